/* SPDX-License-Identifier: MIT */
/*
 * Templates: what a `templateID` means (an image name in the store, an
 * alias built by `sbx bake`/`sbx build`, or the configured default for
 * "base"), listing and alias lookup, and the E2B build API (v3 request,
 * COPY file uploads, v2 build start, status polling) mapped onto
 * sbx_template_build(): the steps become a Dockerfile in a private build
 * context and the result is tagged with the template's name.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sbx/image.h>
#include <sbx/template.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

struct srv_build {
	struct server *srv;
	char *template_id, *build_id, *name;
	const char *status;          /* waiting, building, ready, error */
	json_t *logs;                /* array of {timestamp, level, message} */
	char *reason;
	json_t *spec;                /* TemplateBuildStartV2 */
	pthread_t thread;
	int started;
	struct srv_build *next;
};

int sbx__srv_template_resolve(struct server *srv, const char *template_id, char **image_out, sbx_error **err)
{
	const char *name = template_id;
	/* An empty --default-template or $SBX_SERVE_DEFAULT_TEMPLATE: none. */
	int dflt = srv->cfg.default_template && *srv->cfg.default_template;
	if (strcmp(name, "base") == 0 && dflt)
		name = srv->cfg.default_template;
	sbx_image *img = NULL;
	if (sbx_image_get(&img, srv->rt, name, NULL) == 0) {
		sbx_image_free(img);
		*image_out = xstrdup(name);
		return 0;
	}
	if (strcmp(template_id, "base") == 0) {
		/* The SDK's default template: say how to build it into this store. */
		const char *dir = srv->cfg.image_dir;
		_cleanup_free_ char *env = dir ? xasprintf("SBX_IMAGE_DIR=%s ", dir) : xstrdup("");
		if (dflt)
			return sbx_error_set(err, -ENOENT, "template 'base' not found: the store has no image '%s' "
					     "(sbx serve --default-template); see 'sbx image ls'", name);
		return sbx_error_set(err, -ENOENT, "template 'base' not found: the image store has no image 'base' "
				     "(E2B's base image); build it with '%smake base' in the sbx source tree, or "
				     "serve another image as 'base' with 'sbx serve --default-template IMAGE'", env);
	}
	return sbx_error_set(err, -ENOENT, "template '%s' not found (no image of that name in the store; "
					   "see 'sbx image ls' and 'sbx serve --default-template')", template_id);
}

static json_t *template_json(const sbx_image *img)
{
	char *created = sbx__srv_rfc3339(img->created);
	json_t *o = json_pack("{s:s,s:s,s:[s],s:[s],s:i,s:i,s:i,s:b,s:s,s:s,s:s,s:i,s:i,s:s,s:s}", "templateID", img->name,
			      "buildID", img->id, "names", img->name, "aliases", img->name, "cpuCount", 2, "memoryMB",
			      512, "diskSizeMB", (int)(img->size >> 20), "public", 0, "createdAt", created, "updatedAt",
			      created, "lastSpawnedAt", created, "spawnCount", 0, "buildCount", 1, "envdVersion",
			      SRV_ENVD_VERSION, "buildStatus", "ready");
	free(created);
	return o;
}

static void list_templates(struct srv_req *r)
{
	sbx_image **v = NULL;
	size_t n = 0;
	sbx_error *e = NULL;
	int rc = sbx_image_list(&v, &n, r->srv->rt, &e);
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 0, "list templates", rc, e);
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, template_json(v[i]));
	sbx_image_list_free(v, n);
	sbx__srv_snapshot_templates(r->srv, arr);
	sbx__srv_reply_json(r, 200, arr);
}

static struct srv_build *find_build(struct server *srv, const char *tid, const char *bid)
{
	for (struct srv_build *b = srv->builds; b; b = b->next)
		if (strcmp(b->template_id, tid) == 0 && (!bid || strcmp(b->build_id, bid) == 0))
			return b;
	return NULL;
}

static void add_log(struct srv_build *b, const char *level, const char *msg)
{
	char *ts = sbx__srv_rfc3339(sbx__now_real());
	pthread_mutex_lock(&b->srv->build_lock);
	json_array_append_new(b->logs, json_pack("{s:s,s:s,s:s}", "timestamp", ts, "level", level, "message", msg));
	pthread_mutex_unlock(&b->srv->build_lock);
	free(ts);
}

static void on_build_output(int fd, const char *data, size_t len, void *payload)
{
	(void)fd;
	struct srv_build *b = payload;
	_cleanup_free_ char *s = xstrndup(data, len);
	char *save = NULL;
	for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		add_log(b, "info", line);
}

static char *files_path(struct server *srv, const char *hash)
{
	return xasprintf("%s/server/build-files/%s.tar.gz", srv->cfg.state_dir, hash);
}

/* A hardlink target: an entry already extracted below DIR, reached without
 * any symlink, that is a regular file. */
static bool hardlink_ok(const char *dir, const char *target)
{
	_cleanup_close_ int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = root < 0 ? -1 : (int)syscall(SYS_openat2, root, target, &how, sizeof(how));
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * Extracts a COPY tarball under dir. The client is not trusted with the
 * host: paths must be relative without "..", only files, directories,
 * symlinks and hardlinks to files in the tarball are created (no devices,
 * FIFOs or sockets), modes lose setuid/setgid/sticky, owners and xattrs are
 * not restored. Symlinks are kept as they are: the build resolves them
 * inside its context only (templates/context.c).
 */
static int extract(const char *tarball, const char *dir, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0)
		return -ENOSYS;
	struct archive *a = archive_read_new();
	archive_read_support_filter_all(a);
	archive_read_support_format_all(a);
	struct archive *w = archive_write_disk_new();
	/* Entries are checked below and rewritten to absolute paths under dir,
	 * so libarchive's no-absolute-paths guard must not be set (it would
	 * refuse every entry). */
	archive_write_disk_set_options(w, ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
						  ARCHIVE_EXTRACT_PERM);
	int r = 0;
	if (archive_read_open_filename(a, tarball, 65536) != ARCHIVE_OK) {
		r = sbx_error_set(err, -EINVAL, "open %s: %s", tarball, archive_error_string(a));
		goto out;
	}
	struct archive_entry *e;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (!name || name[0] == '/' || strstr(name, "..")) {
			r = sbx_error_set(err, -EINVAL, "unsafe path in COPY archive");
			goto out;
		}
		_cleanup_free_ char *p = xstrdup(name);
		const char *hl = archive_entry_hardlink(e);
		mode_t type = archive_entry_filetype(e);
		if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
			r = sbx_error_set(err, -EINVAL, "COPY archive entry '%s': only files, directories and "
					  "links are allowed", p);
			goto out;
		}
		if (hl && (hl[0] == '/' || strstr(hl, "..") || !hardlink_ok(dir, hl))) {
			r = sbx_error_set(err, -EINVAL, "COPY archive entry '%s': a hardlink must name a regular "
					  "file earlier in the archive, not through a symlink", p);
			goto out;
		}
		archive_entry_set_perm(e, archive_entry_perm(e) & 0777);
		archive_entry_xattr_clear(e);
		char *full = xasprintf("%s/%s", dir, p);
		archive_entry_set_pathname(e, full);
		free(full);
		if (hl) {
			char *h = xasprintf("%s/%s", dir, hl);
			archive_entry_set_hardlink(e, h);
			free(h);
		}
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = sbx_error_set(err, -EIO, "extract COPY archive entry %s: %s", p, archive_error_string(w));
			goto out;
		}
		const void *buf;
		size_t size;
		la_int64_t off;
		while (archive_read_data_block(a, &buf, &size, &off) == ARCHIVE_OK)
			archive_write_data_block(w, buf, size, off);
	}
out:
	archive_read_free(a);
	archive_write_free(w);
	return r;
}

/* TemplateBuildStartV2 -> Dockerfile text (owned) in ctx. */
static int dockerfile(char **out, struct srv_build *b, const char *ctx, sbx_error **err)
{
	json_t *spec = b->spec;
	const char *from = json_string_value(json_object_get(spec, "fromImage"));
	const char *from_t = json_string_value(json_object_get(spec, "fromTemplate"));
	_cleanup_free_ char *base = NULL;
	if (from_t) {
		int r = sbx__srv_template_resolve(b->srv, from_t, &base, err);
		if (r < 0)
			return r;
		from = base;
	}
	if (!from)
		return sbx_error_set(err, -EINVAL, "build: fromImage or fromTemplate is required");
	sbx_buf d;
	sbx__buf_init(&d, 4 << 20);
	sbx__buf_printf(&d, "FROM %s\n", from);
	size_t i;
	json_t *st;
	json_array_foreach(json_object_get(spec, "steps"), i, st) {
		const char *type = json_string_value(json_object_get(st, "type"));
		json_t *args = json_object_get(st, "args");
		const char *a0 = json_string_value(json_array_get(args, 0));
		const char *a1 = json_string_value(json_array_get(args, 1));
		if (!type || !a0) {
			sbx__buf_free(&d);
			return sbx_error_set(err, -EINVAL, "build: step %zu has no type or args", i);
		}
		if (strcmp(type, "RUN") == 0 || strcmp(type, "WORKDIR") == 0 || strcmp(type, "USER") == 0) {
			sbx__buf_printf(&d, "%s %s\n", type, a0);
		} else if (strcmp(type, "ENV") == 0) {
			for (size_t k = 0; k + 1 < json_array_size(args); k += 2) {
				_cleanup_free_ char *v = json_dumps(json_array_get(args, k + 1), JSON_ENCODE_ANY);
				sbx__buf_printf(&d, "ENV %s=%s\n", json_string_value(json_array_get(args, k)), v);
			}
		} else if (strcmp(type, "COPY") == 0 && a1) {
			const char *hash = json_string_value(json_object_get(st, "filesHash"));
			if (hash) {
				_cleanup_free_ char *tar = files_path(b->srv, hash);
				int r = extract(tar, ctx, err);
				if (r < 0) {
					sbx__buf_free(&d);
					return r;
				}
			}
			sbx__buf_printf(&d, "COPY %s %s\n", a0, a1);
		} else {
			sbx__buf_free(&d);
			return sbx_error_set(err, -EINVAL, "build: step type %s is not supported", type);
		}
	}
	*out = sbx__buf_steal(&d, NULL);
	return 0;
}

static void *build_main(void *arg)
{
	struct srv_build *b = arg;
	struct server *srv = b->srv;
	sbx_error *e = NULL;
	_cleanup_free_ char *ctx = xasprintf("%s/server/builds/%s", srv->cfg.state_dir, b->build_id);
	_cleanup_free_ char *df = NULL, *dfp = xasprintf("%s/Dockerfile", ctx);
	b->status = "building";
	add_log(b, "info", "build started");
	int r = sbx__mkdir_p(ctx, 0700, &e);
	if (r == 0)
		r = dockerfile(&df, b, ctx, &e);
	if (r == 0)
		r = sbx__write_file_atomic(dfp, df, strlen(df), 0600, &e);
	sbx_build_result res = { 0 };
	if (r == 0) {
		sbx_build_opts o = SBX_BUILD_OPTS_INIT;
		o.context_dir = ctx;
		o.slug = b->template_id;
		o.name = b->name;
		o.force = json_is_true(json_object_get(b->spec, "force"));
		o.on_output = on_build_output;
		o.payload = b;
		r = sbx_template_build(&res, srv->rt, &o, &e);
	}
	sbx_build_result_free(&res);
	sbx__rm_rf(ctx, NULL);
	pthread_mutex_lock(&srv->build_lock);
	if (r == 0) {
		b->status = "ready";
	} else {
		b->status = "error";
		b->reason = xstrdup(e && e->msg ? e->msg : "build failed");
	}
	pthread_mutex_unlock(&srv->build_lock);
	add_log(b, r == 0 ? "info" : "error", r == 0 ? "build finished" : b->reason);
	sbx_error_free(e);
	return NULL;
}

static void request_build(struct srv_req *r)
{
	json_error_t je;
	json_t *body = json_loadb(r->body.data ? r->body.data : "{}", r->body.len ? r->body.len : 2, 0, &je);
	const char *name = json_string_value(json_object_get(body, "name"));
	if (!name)
		name = json_string_value(json_object_get(body, "alias"));
	if (!name || !*name || strchr(name, '/') || strchr(name, ' ')) {
		sbx__srv_reply_error(r, 400, "template name is required");
		json_decref(body);
		return;
	}
	struct srv_build *b = xcalloc(1, sizeof(*b));
	b->srv = r->srv;
	b->name = xstrdup(name);
	b->template_id = xstrndup(name, strcspn(name, ":"));
	char hex[33];
	sbx__random_hex(hex, 32);
	b->build_id = xasprintf("%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
	b->status = "waiting";
	b->logs = json_array();
	const char *tag = strchr(name, ':');
	json_t *tags = json_pack("[s]", tag ? tag + 1 : "latest");
	json_t *resp = json_pack("{s:s,s:s,s:[s],s:o,s:[s],s:b}", "templateID", b->template_id, "buildID", b->build_id,
				 "names", name, "tags", tags, "aliases", b->template_id, "public", 0);
	pthread_mutex_lock(&r->srv->build_lock);
	b->next = r->srv->builds;
	r->srv->builds = b;
	pthread_mutex_unlock(&r->srv->build_lock);
	json_decref(body);
	sbx__srv_reply_json(r, 202, resp);
}

static void start_build(struct srv_req *r, const char *tid, const char *bid)
{
	json_error_t je;
	json_t *spec = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &je);
	if (!json_is_object(spec)) {
		json_decref(spec);
		sbx__srv_reply_error(r, 400, "build spec is not a JSON object");
		return;
	}
	pthread_mutex_lock(&r->srv->build_lock);
	struct srv_build *b = find_build(r->srv, tid, bid);
	int ok = b && !b->started;
	if (ok) {
		b->started = 1;
		b->spec = spec;
	}
	pthread_mutex_unlock(&r->srv->build_lock);
	if (!ok) {
		json_decref(spec);
		sbx__srv_reply_error(r, b ? 409 : 404, b ? "build already started" : "build %s not found", bid);
		return;
	}
	int e = pthread_create(&b->thread, NULL, build_main, b);
	if (e != 0) {
		/* No thread to join later: the build ends here, as a failure. */
		pthread_mutex_lock(&r->srv->build_lock);
		b->started = 0;
		b->status = "error";
		free(b->reason);
		b->reason = xasprintf("could not start the build thread: %s", strerror(e));
		pthread_mutex_unlock(&r->srv->build_lock);
		add_log(b, "error", b->reason);
		sbx__srv_reply_error(r, 503, "build %s: %s; retry", bid, b->reason);
		return;
	}
	sbx__srv_reply_empty(r, 202);
}

static void build_status(struct srv_req *r, const char *tid, const char *bid)
{
	uint64_t off = 0, limit = 100;
	const char *o = sbx__srv_query(r, "logsOffset"), *l = sbx__srv_query(r, "limit");
	if ((o && sbx__parse_u64(&off, o) < 0) || (l && sbx__parse_u64(&limit, l) < 0)) {
		sbx__srv_reply_error(r, 400, "bad logsOffset or limit");
		return;
	}
	pthread_mutex_lock(&r->srv->build_lock);
	struct srv_build *b = find_build(r->srv, tid, bid);
	json_t *resp = NULL;
	if (b) {
		json_t *logs = json_array(), *entries = json_array();
		for (size_t i = off; i < json_array_size(b->logs) && i < off + limit; i++) {
			json_t *e = json_array_get(b->logs, i);
			json_array_append(entries, e);
			json_array_append_new(logs, json_string(json_string_value(json_object_get(e, "message"))));
		}
		resp = json_pack("{s:s,s:s,s:s,s:o,s:o}", "templateID", b->template_id, "buildID", b->build_id, "status",
				 b->status, "logs", logs, "logEntries", entries);
		if (b->reason)
			json_object_set_new(resp, "reason", json_pack("{s:s}", "message", b->reason));
	}
	pthread_mutex_unlock(&r->srv->build_lock);
	if (!resp)
		sbx__srv_reply_error(r, 404, "build %s of template %s not found", bid, tid);
	else
		sbx__srv_reply_json(r, 200, resp);
}

static int hash_ok(const char *hash)
{
	return strspn(hash, "0123456789abcdef") == strlen(hash) && strlen(hash) <= 128;
}

/* A COPY tarball being received: written to a private temporary file as it
 * arrives (never held in memory), renamed into place once complete. */
struct tar_upload {
	char *path, *tmp;            /* tmp: NULL once renamed */
	int fd;
	int rc;                      /* the first error */
	sbx_error *e;
};

static void tar_feed(struct srv_req *r, const char *data, size_t len)
{
	struct tar_upload *t = r->up;
	if (t->rc < 0 || t->fd < 0)
		return;
	int rc = sbx__write_all(t->fd, data, len);
	if (rc < 0)
		t->rc = sbx_error_setsys(&t->e, rc, -rc, "write %s", t->tmp);
}

static void tar_free(struct srv_req *r)
{
	struct tar_upload *t = r->up;
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (t->tmp)
		unlink(t->tmp);
	free(t->tmp);
	free(t->path);
	sbx_error_free(t->e);
	free(t);
	r->up = NULL;
}

void sbx__srv_template_files_begin(struct srv_req *r, const char *hash)
{
	static _Atomic unsigned seq;
	struct tar_upload *t = xcalloc(1, sizeof(*t));
	t->fd = -1;
	r->up = t;
	r->feed = tar_feed;
	r->up_free = tar_free;
	if (!hash_ok(hash))
		return; /* 400 at the end */
	_cleanup_free_ char *dir = xasprintf("%s/server/build-files", r->srv->cfg.state_dir);
	if ((t->rc = sbx__mkdir_p(dir, 0700, &t->e)) < 0)
		return;
	t->path = files_path(r->srv, hash);
	t->tmp = xasprintf("%s.tmp.%d.%u", t->path, (int)getpid(), seq++);
	t->fd = open(t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (t->fd < 0) {
		t->rc = sbx_error_setsys(&t->e, -errno, errno, "create %s", t->tmp);
		free(t->tmp);
		t->tmp = NULL;
	}
}

/* PUT, after the body: the tarball is complete; renamed into place. */
static void store_files(struct srv_req *r)
{
	struct tar_upload *t = r->up;
	if (!t) {
		sbx__srv_reply_error(r, 500, "upload was not set up");
		return;
	}
	int rc = t->rc;
	if (rc == 0 && close(t->fd) < 0)
		rc = sbx_error_setsys(&t->e, -errno, errno, "write %s", t->tmp);
	t->fd = -1;
	if (rc == 0 && rename(t->tmp, t->path) < 0)
		rc = sbx_error_setsys(&t->e, -errno, errno, "rename %s", t->path);
	if (rc == 0) {
		free(t->tmp);
		t->tmp = NULL;
		sbx__srv_reply_empty(r, 200);
		return;
	}
	sbx__srv_reply_sbx_error(r, 0, "store files", rc, t->e);
	t->e = NULL;
}

/* GET: is the COPY tarball here; PUT: store it (streamed, see above). */
static void build_files(struct srv_req *r, const char *tid, const char *hash)
{
	if (!hash_ok(hash)) {
		sbx__srv_reply_error(r, 400, "bad files hash");
		return;
	}
	_cleanup_free_ char *path = files_path(r->srv, hash);
	if (strcmp(r->method, "PUT") == 0) {
		store_files(r);
		return;
	}
	int present = access(path, F_OK) == 0;
	json_t *resp = json_pack("{s:b}", "present", present);
	if (!present) {
		const char *host = sbx__srv_header(r, "Host");
		char *url = xasprintf("http://%s/templates/%s/files/%s", host ? host : "127.0.0.1", tid, hash);
		json_object_set_new(resp, "url", json_string(url));
		json_object_set_new(resp, "headers", json_pack("{s:s}", "X-API-KEY", r->srv->api_key));
		free(url);
	}
	sbx__srv_reply_json(r, 201, resp);
}

void sbx__srv_templates(struct srv_req *r, char **seg, size_t nseg)
{
	int ver = strcmp(seg[0], "v2") == 0 ? 2 : strcmp(seg[0], "v3") == 0 ? 3 : 1;
	char **s = ver > 1 ? seg + 1 : seg;
	size_t n = ver > 1 ? nseg - 1 : nseg;
	const char *m = r->method;
	if (n == 1 && strcmp(m, "GET") == 0) {
		list_templates(r);
	} else if (n == 1 && strcmp(m, "POST") == 0 && ver >= 2) {
		request_build(r);
	} else if (n == 3 && strcmp(s[1], "aliases") == 0 && strcmp(m, "GET") == 0) {
		_cleanup_free_ char *img = NULL, *snap = NULL;
		if (sbx__srv_snapshot_resolve(r->srv, s[2], &snap, &img)) /* a snapshot is a template too */
			sbx__srv_reply_json(r, 200, json_pack("{s:s,s:b}", "templateID", s[2], "public", 0));
		else if (sbx__srv_template_resolve(r->srv, s[2], &img, NULL) == 0)
			sbx__srv_reply_json(r, 200, json_pack("{s:s,s:b}", "templateID", img, "public", 0));
		else
			sbx__srv_reply_error(r, 404, "template alias %s not found", s[2]);
	} else if (n == 4 && strcmp(s[2], "builds") == 0 && strcmp(m, "POST") == 0) {
		start_build(r, s[1], s[3]);
	} else if (n == 5 && strcmp(s[2], "builds") == 0 && strcmp(s[4], "status") == 0 && strcmp(m, "GET") == 0) {
		build_status(r, s[1], s[3]);
	} else if (n == 4 && strcmp(s[2], "files") == 0) {
		build_files(r, s[1], s[3]);
	} else if (n == 2 && strcmp(m, "DELETE") == 0 && sbx__srv_snapshot_delete(r, s[1])) {
		/* a snapshot (E2B's deleteSnapshot): answered */
	} else if (n == 2 && strcmp(m, "DELETE") == 0) {
		sbx_error *e = NULL;
		int rc = sbx_image_remove(r->srv->rt, s[1], &e);
		if (rc < 0)
			sbx__srv_reply_sbx_error(r, 0, "delete template", rc, e);
		else
			sbx__srv_reply_empty(r, 204);
	} else {
		sbx__srv_reply_error(r, 404, "no endpoint %s %s", m, r->url);
	}
}

void sbx__srv_builds_free(struct server *srv)
{
	struct srv_build *b = srv->builds;
	while (b) {
		struct srv_build *next = b->next;
		if (b->started)
			pthread_join(b->thread, NULL);
		free(b->template_id);
		free(b->build_id);
		free(b->name);
		free(b->reason);
		json_decref(b->logs);
		json_decref(b->spec);
		free(b);
		b = next;
	}
	srv->builds = NULL;
}
