/* SPDX-License-Identifier: MIT */
/*
 * envd's /files: GET streams a regular file (octet-stream with
 * Content-Length; 404 missing, 400 directory, FIFO, device or socket), POST
 * writes one or more files from a multipart body (the `path` query wins
 * over each part's filename) or from a raw application/octet-stream body
 * (optionally gzip), creating parents and chowning to the caller's user;
 * the reply lists the written entries. Uploads are streamed: the body goes
 * through the multipart parser (multipart.c) or inflate straight into the
 * destination's fd as it arrives, so the server holds a few buffers of at
 * most 64 KiB whatever the size. Errors met mid-body are answered at its
 * end (MHD cannot reply earlier); a failed upload may leave the file it was
 * writing with what had arrived, as envd does.
 */
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

/* The status and message (owned) for an error on path. */
static char *file_error_msg(int code, const char *path, const sbx_error *e, int *status)
{
	if (code == -ENOENT || code == -ESRCH) {
		*status = 404;
		return code == -ENOENT ? xasprintf("path '%s' does not exist", path) : xasprintf("%s: sandbox is gone", path);
	}
	*status = 400;
	if (code == -EISDIR)
		return xasprintf("path '%s' is a directory", path);
	if (code == -ENOTDIR)
		return xasprintf("a parent of path '%s' is not a directory", path);
	*status = sbx__srv_http_status(code);
	return xasprintf("%s: %s", path, e && e->msg ? e->msg : sbx_error_code_name(code));
}

static void file_error(struct srv_req *r, int code, const char *path, sbx_error *e)
{
	int status = 500;
	_cleanup_free_ char *msg = file_error_msg(code, path, e, &status);
	sbx__srv_reply_error(r, status, "%s", msg);
	sbx_error_free(e);
}

static char *caller_user(struct srv_req *r, struct srv_sandbox *s, int *explicit)
{
	const char *q = sbx__srv_query(r, "username");
	char *u = q && *q ? xstrdup(q) : sbx__srv_auth_basic_user(sbx__srv_header(r, "Authorization"));
	*explicit = u != NULL;
	return u ? u : s->user ? xstrdup(s->user) : NULL;
}

/* Streams a regular file; FIFOs, devices and sockets are refused (400),
 * never opened for reading, so a sandbox cannot block or flood us. */
static void get_file(struct srv_req *r, struct srv_sandbox *s, const char *path)
{
	sbx_error *e = NULL;
	int fd = -1;
	struct stat st;
	int rc = sbx__srv_open_regular(&fd, &st, s, path, &e);
	if (rc == 0) {
		sbx__srv_reply_fd(r, 200, "application/octet-stream", fd, (uint64_t)st.st_size);
		return;
	}
	if (rc != -ENOSYS) {
		file_error(r, rc, path, e);
		return;
	}
	/* Providers without path fds read through the library, bounded. */
	sbx_error_free(e);
	e = NULL;
	void *data = NULL;
	size_t len = 0;
	sbx_file_info fi = { 0 };
	if ((rc = sbx__srv_op_begin(s, &e)) == 0) {
		rc = sbx_sandbox_stat(&fi, s->sb, path, &e);
		if (rc == 0 && fi.type == SBX_FILE_DIR)
			rc = -EISDIR;
		else if (rc == 0 && fi.type != SBX_FILE_REGULAR)
			rc = sbx_error_set(&e, -EINVAL, "path '%s' is not a regular file", path);
		if (rc == 0)
			rc = sbx_sandbox_read_file(&data, &len, s->sb, path, SRV_READ_MAX, &e);
		sbx__srv_op_end(s);
	}
	sbx_file_info_clear(&fi);
	if (rc < 0) {
		file_error(r, rc, path, e);
		return;
	}
	sbx__srv_reply_bytes(r, 200, "application/octet-stream", data, len);
}

static json_t *entry(const char *path, json_t *meta)
{
	const char *slash = strrchr(path, '/');
	json_t *o = json_pack("{s:s,s:s,s:s}", "path", path, "name", slash ? slash + 1 : path, "type", "file");
	if (meta && json_object_size(meta))
		json_object_set(o, "metadata", meta);
	return o;
}

#define META_HEADER "X-Metadata-"

/* X-Metadata-<key>: <value> request headers (envd 0.6.2 file metadata),
 * as envd reads them: keys lowercased, an empty key dropped, the first of
 * repeated headers kept. */
static enum MHD_Result collect_meta(void *ctx, enum MHD_ValueKind kind, const char *k, const char *v)
{
	(void)kind;
	if (!k || strncasecmp(k, META_HEADER, strlen(META_HEADER)) != 0 || !k[strlen(META_HEADER)])
		return MHD_YES;
	char *key = xstrdup(k + strlen(META_HEADER));
	for (char *c = key; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	if (!json_object_get(ctx, key))
		json_object_set_new(ctx, key, json_string(v ? v : ""));
	free(key);
	return MHD_YES;
}

/* Extracts a parameter (boundary=, filename=) from a header value; owned. */
static char *header_param(const char *h, const char *key)
{
	const char *p = h;
	size_t kl = strlen(key);
	while ((p = strcasestr(p, key))) {
		if ((p == h || p[-1] == ' ' || p[-1] == ';') && p[kl] == '=')
			break;
		p += kl;
	}
	if (!p)
		return NULL;
	p += kl + 1;
	if (*p == '"') {
		const char *end = strchr(p + 1, '"');
		return end ? xstrndup(p + 1, (size_t)(end - p - 1)) : NULL;
	}
	return xstrndup(p, strcspn(p, "; \t\r\n"));
}

/* ---- uploads, streamed ------------------------------------------------------ */

#define ZOUT (64u << 10)

/* The file being written: its fd (providers with path fds: the bytes go
 * straight into it), else a bounded buffer written by one library call when
 * the file is complete. */
struct sink {
	char *path;                   /* NULL = none open */
	int fd;
	int mem;
	sbx_buf buf;
};

struct upload {
	struct srv_sandbox *s;
	char *user;                   /* the caller's user (files are chowned to it) */
	char *qpath;                  /* ?path=, resolved, or NULL */
	struct srv_mp *mp;            /* multipart; else the body is the file */
	int gzip, z_init, z_end;
	z_stream z;
	char *zout;                   /* ZOUT bytes of inflate output */
	uint64_t inflated;
	struct sink cur;
	int skip_part;                /* the current part is not named "file" */
	json_t *written;              /* entries of the files written */
	json_t *meta;                 /* X-Metadata-* headers, set as user.* xattrs */
	int status;                   /* the first error, answered at the end (0 = none) */
	char *msg;
};

__attribute__((format(printf, 3, 4))) static int fail(struct upload *u, int status, const char *fmt, ...)
{
	if (!u->status) {
		va_list ap;
		va_start(ap, fmt);
		u->msg = xvasprintf(fmt, ap);
		va_end(ap);
		u->status = status;
	}
	return -ECANCELED;
}

static int fail_sbx(struct upload *u, int code, const char *path, sbx_error *e)
{
	if (!u->status) {
		u->msg = file_error_msg(code, path, e, &u->status);
	}
	sbx_error_free(e);
	return -ECANCELED;
}

static int sink_open(struct upload *u, const char *path)
{
	struct sink *k = &u->cur;
	sbx_error *e = NULL;
	int fd = -1;
	struct stat st;
	/* An existing FIFO, device or socket there is refused, not opened (a
	 * FIFO would block the write until the sandbox reads it). */
	int rc = sbx__srv_open_regular(&fd, &st, u->s, path, &e);
	if (fd >= 0)
		close(fd);
	if (rc == -EINVAL || rc == -EISDIR)
		return fail_sbx(u, rc, path, e);
	int mem = rc == -ENOSYS;
	sbx_error_free(e);
	e = NULL;
	/* Created with its parents, and truncated, by the library, which never
	 * blocks on what the sandbox put there; then the bytes go to that inode. */
	if ((rc = sbx__srv_op_begin(u->s, &e)) == 0) {
		int own = u->user && strcmp(u->user, "root") != 0;
		char **made = own ? sbx__srv_missing_parents(u->s, path) : NULL;
		rc = sbx_sandbox_write_file(u->s->sb, path, "", 0, 0644, &e);
		for (size_t i = 0; rc == 0 && made && made[i]; i++)
			sbx_sandbox_chown(u->s->sb, made[i], u->user, NULL);
		sbx__strv_free(made);
		sbx__srv_op_end(u->s);
	}
	k->fd = -1;
	if (rc == 0 && !mem && (rc = sbx__srv_open_writable(&k->fd, u->s, path, &e)) == -ENOSYS) {
		sbx_error_free(e);
		e = NULL;
		mem = 1;
		rc = 0;
	}
	if (rc < 0)
		return fail_sbx(u, rc, path, e);
	k->mem = mem;
	if (mem)
		sbx__buf_init(&k->buf, SRV_UPLOAD_MAX);
	k->path = xstrdup(path);
	return 0;
}

static int sink_write(struct upload *u, const char *data, size_t len)
{
	struct sink *k = &u->cur;
	if (!k->path || !len)
		return 0;
	int rc = k->mem ? sbx__buf_append(&k->buf, data, len) : sbx__write_all(k->fd, data, len);
	return rc < 0 ? fail_sbx(u, rc == -E2BIG ? -EFBIG : rc, k->path, NULL) : 0;
}

static void sink_drop(struct sink *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	sbx__buf_free(&k->buf);
	free(k->path);
	k->path = NULL;
}

/* Completes the file: written (buffered providers), chowned, listed. */
static int sink_close(struct upload *u)
{
	struct sink *k = &u->cur;
	if (!k->path)
		return 0;
	sbx_error *e = NULL;
	int rc = 0;
	if (!k->mem && json_object_size(u->meta) && (rc = sbx__srv_xattr_set_metadata(k->fd, u->meta)) < 0)
		rc = sbx_error_setsys(&e, rc, -rc, "set metadata (user.* extended attributes) of %s", k->path);
	if (!k->mem && close(k->fd) < 0 && errno != EINTR && rc == 0)
		rc = sbx_error_setsys(&e, -errno, errno, "write %s", k->path);
	k->fd = -1;
	if (rc == 0 && (rc = sbx__srv_op_begin(u->s, &e)) == 0) {
		if (k->mem)
			rc = sbx_sandbox_write_file(u->s->sb, k->path, k->buf.data ? k->buf.data : "", k->buf.len, 0644, &e);
		if (rc == 0 && u->user && strcmp(u->user, "root") != 0)
			sbx_sandbox_chown(u->s->sb, k->path, u->user, NULL);
		sbx__srv_op_end(u->s);
	}
	if (rc == 0)
		json_array_append_new(u->written, entry(k->path, u->meta));
	else
		fail_sbx(u, rc, k->path, e);
	sink_drop(k);
	return rc < 0 ? -ECANCELED : 0;
}

static int part_begin(void *ctx, const char *headers)
{
	struct upload *u = ctx;
	const char *disp = strcasestr(headers, "content-disposition:");
	_cleanup_free_ char *name = disp ? header_param(disp, "name") : NULL;
	_cleanup_free_ char *filename = disp ? header_param(disp, "filename") : NULL;
	u->skip_part = !name || strcmp(name, "file") != 0;
	if (u->skip_part)
		return 0;
	if (json_array_size(u->written) >= SRV_UPLOAD_FILES_MAX)
		return fail(u, 400, "more than %u files in one upload", SRV_UPLOAD_FILES_MAX);
	const char *target = u->qpath ? u->qpath : filename;
	if (!target || !*target || strcmp(target, "undefined") == 0)
		return fail(u, 400, "no path for an uploaded part (give ?path= or a filename)");
	_cleanup_free_ char *abs = sbx__srv_resolve_path(u->s, u->user, target);
	return sink_open(u, abs);
}

static int part_data(void *ctx, const char *data, size_t len)
{
	struct upload *u = ctx;
	return u->skip_part ? 0 : sink_write(u, data, len);
}

static int part_end(void *ctx)
{
	struct upload *u = ctx;
	return u->skip_part ? 0 : sink_close(u);
}

static const struct srv_mp_cbs mp_cbs = { part_begin, part_data, part_end };

static int gzip_feed(struct upload *u, const char *data, size_t len)
{
	while (len && !u->z_end) {
		size_t k = len < (1u << 20) ? len : (1u << 20);
		u->z.next_in = (Bytef *)data;
		u->z.avail_in = (uInt)k;
		data += k;
		len -= k;
		for (;;) {
			u->z.next_out = (Bytef *)u->zout;
			u->z.avail_out = ZOUT;
			int zr = inflate(&u->z, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
				return fail(u, 400, "body is not valid gzip");
			size_t got = ZOUT - u->z.avail_out;
			if (got > SRV_UPLOAD_MAX - u->inflated)
				return fail(u, 400, "body inflates past %u bytes", SRV_UPLOAD_MAX);
			u->inflated += got;
			if (sink_write(u, u->zout, got) < 0)
				return -ECANCELED;
			if (zr == Z_STREAM_END)
				u->z_end = 1; /* what follows the gzip stream is ignored */
			if (zr != Z_OK || (u->z.avail_out && !u->z.avail_in))
				break;
		}
	}
	return 0;
}

static void upload_feed(struct srv_req *r, const char *data, size_t len)
{
	struct upload *u = r->up;
	if (u->status)
		return; /* refused: the rest is dropped */
	if (u->mp) {
		if (sbx__srv_mp_feed(u->mp, data, len) == -E2BIG)
			fail(u, 400, "a multipart part's headers exceed %u bytes", SRV_MP_HEADERS_MAX);
	} else if (u->gzip) {
		gzip_feed(u, data, len);
	} else {
		sink_write(u, data, len);
	}
}

static void upload_free(struct srv_req *r)
{
	struct upload *u = r->up;
	if (!u)
		return;
	sink_drop(&u->cur);
	sbx__srv_mp_free(u->mp);
	if (u->z_init)
		inflateEnd(&u->z);
	free(u->zout);
	json_decref(u->written);
	json_decref(u->meta);
	free(u->user);
	free(u->qpath);
	free(u->msg);
	free(u);
	r->up = NULL;
}

void sbx__srv_envd_files_begin(struct srv_req *r, struct srv_sandbox *s)
{
	struct upload *u = xcalloc(1, sizeof(*u));
	u->s = s;
	u->cur.fd = -1;
	u->written = json_array();
	u->meta = json_object();
	MHD_get_connection_values(r->c, MHD_HEADER_KIND, collect_meta, u->meta);
	int explicit_user = 0;
	u->user = caller_user(r, s, &explicit_user);
	const char *q = sbx__srv_query(r, "path");
	u->qpath = q && *q ? sbx__srv_resolve_path(s, u->user, q) : NULL;
	r->up = u;
	r->feed = upload_feed;
	r->up_free = upload_free;
	const char *ct = sbx__srv_header(r, "Content-Type");
	if (ct && sbx__str_startswith(ct, "multipart/form-data")) {
		_cleanup_free_ char *boundary = header_param(ct, "boundary");
		if (!boundary || !*boundary)
			fail(u, 400, "multipart body without a boundary");
		else
			u->mp = sbx__srv_mp_new(boundary, &mp_cbs, u);
		return;
	}
	if (!u->qpath) {
		fail(u, 400, "path is required for application/octet-stream uploads");
		return;
	}
	const char *enc = sbx__srv_header(r, "Content-Encoding");
	if (enc && strcasecmp(enc, "gzip") == 0) {
		if (inflateInit2(&u->z, 16 + MAX_WBITS) != Z_OK) {
			fail(u, 500, "cannot set up gzip decoding");
			return;
		}
		u->z_init = u->gzip = 1;
		u->zout = xmalloc(ZOUT);
	} else if (enc && strcasecmp(enc, "identity") != 0) {
		fail(u, 415, "unsupported Content-Encoding %s", enc);
		return;
	}
	sink_open(u, u->qpath);
}

/* The final call: the last file completed, and the reply. */
static void post_files(struct srv_req *r)
{
	struct upload *u = r->up;
	if (!u) {
		sbx__srv_reply_error(r, 500, "upload was not set up");
		return;
	}
	if (!u->status && u->mp) {
		/* a body cut inside a file part leaves that file with what arrived */
		if (sbx__srv_mp_in_part(u->mp) && !u->skip_part)
			fail(u, 400, "multipart body ends inside the part for %s", u->cur.path);
		else if (json_array_size(u->written) == 0)
			fail(u, 400, "multipart body has no part named \"file\"");
	} else if (!u->status) {
		if (u->gzip && !u->z_end)
			fail(u, 400, "body is not valid gzip (it ends early)");
		else
			sink_close(u);
	}
	if (u->status) {
		sbx__srv_reply_error(r, u->status, "%s", u->msg);
		return;
	}
	sbx__srv_reply_json(r, 200, u->written);
	u->written = NULL;
}

void sbx__srv_envd_files(struct srv_req *r, struct srv_sandbox *s)
{
	if (strcmp(r->method, "POST") == 0) {
		post_files(r);
		return;
	}
	if (strcmp(r->method, "GET") != 0) {
		sbx__srv_reply_error(r, 405, "method %s not allowed on /files", r->method);
		return;
	}
	int explicit_user = 0;
	_cleanup_free_ char *user = caller_user(r, s, &explicit_user);
	const char *q = sbx__srv_query(r, "path");
	_cleanup_free_ char *path = q && *q ? sbx__srv_resolve_path(s, user, q) : NULL;
	if (!path)
		sbx__srv_reply_error(r, 400, "path is required");
	else
		get_file(r, s, path);
}
