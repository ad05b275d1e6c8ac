/* SPDX-License-Identifier: MIT */
/*
 * envd's filesystem.Filesystem service: Stat, ListDir, MakeDir, Move,
 * Remove (unary) and WatchDir (server stream from inotify on O_PATH fds of
 * the sandbox's directories, through /proc/self/fd/N), plus the user
 * helpers shared with processes and /files: a user's home from the
 * sandbox's /etc/passwd (read without blocking, regular files only) and
 * relative-path resolution.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/passwd.h"
#include "../util/str.h"
#include "server_int.h"

/* Starts one library call on the sandbox (sbops.c); -ESRCH once it is gone. */
static int sb_enter(struct srv_sandbox *s, sbx_error **err)
{
	return sbx__srv_op_begin(s, err);
}

static void sb_leave(struct srv_sandbox *s)
{
	sbx__srv_op_end(s);
}

/* The home directory from the sandbox's /etc/passwd, read by the server
 * itself: a FIFO, device or oversized file there is ignored, never waited on. */
char *sbx__srv_user_home(struct srv_sandbox *s, const char *user)
{
	if (!user || strcmp(user, "root") == 0 || strcmp(user, "0") == 0)
		return xstrdup("/root");
	_cleanup_free_ char *name = xstrndup(user, strcspn(user, ":"));
	char *data = NULL;
	size_t len = 0;
	int r = sbx__srv_read_small(&data, &len, s, "/etc/passwd", SBX_PASSWD_MAX, NULL);
	if (r == -ENOSYS && (r = sb_enter(s, NULL)) == 0) { /* no path fds: a remote provider */
		r = sbx_sandbox_read_file((void **)&data, &len, s->sb, "/etc/passwd", SBX_PASSWD_MAX, NULL);
		sb_leave(s);
	}
	char *home = NULL;
	struct sbx_pwent e;
	uint64_t uid;
	if (r == 0 && (sbx__pw_by_name(&e, data, len, 0, name) == 0 ||
		       (sbx__parse_u64(&uid, name) == 0 && uid <= UINT32_MAX &&
			sbx__pw_by_id(&e, data, len, 0, (unsigned)uid) == 0))) {
		if (*e.home)
			home = xstrdup(e.home);
		sbx__pw_clear(&e);
	}
	free(data);
	return home ? home : xasprintf("/home/%s", name);
}

/* E2B runs commands and resolves relative paths as `user` (/home/user) when
 * the image has that account, as its base image does; root otherwise. */
char *sbx__srv_default_user(struct srv_sandbox *s)
{
	char *data = NULL;
	size_t len = 0;
	int r = sbx__srv_read_small(&data, &len, s, "/etc/passwd", SBX_PASSWD_MAX, NULL);
	if (r == -ENOSYS && (r = sb_enter(s, NULL)) == 0) { /* no path fds: a remote provider */
		r = sbx_sandbox_read_file((void **)&data, &len, s->sb, "/etc/passwd", SBX_PASSWD_MAX, NULL);
		sb_leave(s);
	}
	struct sbx_pwent e;
	int found = r == 0 && sbx__pw_by_name(&e, data, len, 0, "user") == 0;
	if (found)
		sbx__pw_clear(&e);
	free(data);
	return found ? xstrdup("user") : NULL;
}

/* E2B's envd makes the directories a write or MakeDir creates the caller's,
 * else a default `user` could not write next to its own upload. */
char **sbx__srv_missing_parents(struct srv_sandbox *s, const char *path)
{
	char **v = xcalloc(1, sizeof(char *));
	_cleanup_free_ char *d = xstrdup(path);
	for (char *slash = strrchr(d, '/'); slash && slash != d; slash = strrchr(d, '/')) {
		*slash = '\0';
		sbx_file_info fi = { 0 };
		int rc = sbx_sandbox_stat(&fi, s->sb, d, NULL);
		sbx_file_info_clear(&fi);
		if (rc != -ENOENT)
			break;
		sbx__strv_push(&v, d);
	}
	return v;
}

char *sbx__srv_resolve_path(struct srv_sandbox *s, const char *user, const char *path)
{
	if (path[0] == '/')
		return xstrdup(path);
	_cleanup_free_ char *home = sbx__srv_user_home(s, user);
	if (strcmp(path, "~") == 0)
		return xstrdup(home);
	if (strncmp(path, "~/", 2) == 0)
		path += 2;
	return xasprintf("%s/%s", strcmp(home, "/") == 0 ? "" : home, path);
}

/* Stats path and replies {"entry":...}. */
static void reply_entry(struct srv_req *r, struct srv_sandbox *s, const char *path, const char *what)
{
	sbx_file_info fi = { 0 };
	sbx_error *e = NULL;
	int rc = sb_enter(s, &e);
	if (rc == 0) {
		rc = sbx_sandbox_stat(&fi, s->sb, path, &e);
		sb_leave(s);
	}
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 1, what, rc, e);
		return;
	}
	sbx__srv_reply_json(r, 200, json_pack("{s:o}", "entry", sbx__srv_entry_info(s, &fi)));
	sbx_file_info_clear(&fi);
}

static void unary(struct srv_req *r, struct srv_sandbox *s, const char *method, json_t *req, const char *user)
{
	const char *p = json_string_value(json_object_get(req, strcmp(method, "Move") == 0 ? "source" : "path"));
	if (!p || !*p) {
		sbx__srv_reply_connect_error(r, "invalid_argument", "path is required");
		return;
	}
	_cleanup_free_ char *path = sbx__srv_resolve_path(s, user, p);
	sbx_error *e = NULL;
	int rc;
	if (strcmp(method, "Stat") == 0) {
		reply_entry(r, s, path, "stat");
	} else if (strcmp(method, "ListDir") == 0) {
		json_t *d = json_object_get(req, "depth");
		unsigned depth = json_is_integer(d) && json_integer_value(d) > 0 ? (unsigned)json_integer_value(d) : 1;
		sbx_file_info *v = NULL;
		size_t n = 0;
		if ((rc = sb_enter(s, &e)) == 0) {
			rc = sbx_sandbox_list_dir(&v, &n, s->sb, path, depth, &e);
			sb_leave(s);
		}
		if (rc < 0) {
			sbx__srv_reply_sbx_error(r, 1, "list", rc, e);
			return;
		}
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, sbx__srv_entry_info(s, &v[i]));
		sbx_file_info_free(v, n);
		sbx__srv_reply_json(r, 200, json_pack("{s:o}", "entries", arr));
	} else if (strcmp(method, "MakeDir") == 0) {
		if ((rc = sb_enter(s, &e)) == 0) {
			int own = user && strcmp(user, "root") != 0;
			char **made = own ? sbx__srv_missing_parents(s, path) : NULL;
			rc = sbx_sandbox_mkdir(s->sb, path, 0755, &e);
			if (rc == 0 && user)
				sbx_sandbox_chown(s->sb, path, user, NULL);
			for (size_t i = 0; rc == 0 && made && made[i]; i++)
				sbx_sandbox_chown(s->sb, made[i], user, NULL);
			sbx__strv_free(made);
			sb_leave(s);
		}
		if (rc < 0)
			sbx__srv_reply_sbx_error(r, 1, "make dir", rc, e);
		else
			reply_entry(r, s, path, "make dir");
	} else if (strcmp(method, "Move") == 0) {
		const char *d = json_string_value(json_object_get(req, "destination"));
		if (!d || !*d) {
			sbx__srv_reply_connect_error(r, "invalid_argument", "destination is required");
			return;
		}
		_cleanup_free_ char *dst = sbx__srv_resolve_path(s, user, d);
		if ((rc = sb_enter(s, &e)) == 0) {
			rc = sbx_sandbox_rename(s->sb, path, dst, &e);
			sb_leave(s);
		}
		if (rc < 0)
			sbx__srv_reply_sbx_error(r, 1, "move", rc, e);
		else
			reply_entry(r, s, dst, "move");
	} else {
		if ((rc = sb_enter(s, &e)) == 0) {
			/* envd removes with os.RemoveAll: a missing path is success */
			rc = sbx_sandbox_remove(s->sb, path, 1, &e);
			sb_leave(s);
		}
		if (rc < 0)
			sbx__srv_reply_sbx_error(r, 1, "remove", rc, e);
		else
			sbx__srv_reply_json(r, 200, json_object());
	}
}

/* ---- WatchDir ------------------------------------------------------------- */

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
#define WATCH_RECHECK_S 2.0 /* a watch notices its sandbox gone at least this often */

struct watch {
	struct srv_sandbox *s;
	int ifd;
	int root_wd;
	int recursive;
	int include_entry;  /* WatchDirRequest.include_entry (envd 0.6.3) */
	char *root;
	char **rel;        /* by wd: path relative to root ("" for root) */
	size_t nrel;
	int sent_start;
	double next_ka;
};

static int add_watch(struct watch *w, const char *rel, sbx_error **err)
{
	_cleanup_free_ char *abs = *rel ? xasprintf("%s/%s", w->root, rel) : xstrdup(w->root);
	int pfd = -1;
	int rc = sb_enter(w->s, err);
	if (rc < 0)
		return rc;
	rc = sbx_sandbox_path_fd(&pfd, w->s->sb, abs, err);
	sb_leave(w->s);
	if (rc < 0)
		return rc;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	int wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
	close(pfd);
	if (wd < 0)
		return sbx_error_setsys(err, -errno, errno, "watch %s", abs);
	if ((size_t)wd >= w->nrel) {
		size_t n = (size_t)wd + 16;
		w->rel = xrealloc(w->rel, n * sizeof(*w->rel));
		memset(w->rel + w->nrel, 0, (n - w->nrel) * sizeof(*w->rel));
		w->nrel = n;
	}
	free(w->rel[wd]);
	w->rel[wd] = xstrdup(rel);
	return wd;
}

static const char *event_type(uint32_t m)
{
	if (m & IN_CREATE || m & IN_MOVED_TO)
		return "EVENT_TYPE_CREATE";
	if (m & IN_MODIFY)
		return "EVENT_TYPE_WRITE";
	if (m & IN_DELETE)
		return "EVENT_TYPE_REMOVE";
	if (m & IN_MOVED_FROM)
		return "EVENT_TYPE_RENAME";
	if (m & IN_ATTRIB)
		return "EVENT_TYPE_CHMOD";
	return NULL;
}

/* The entry of what an event names, when it is still there (a file
 * removed or renamed away has none, as with envd). */
static void add_entry(struct watch *w, json_t *fe, const char *name)
{
	_cleanup_free_ char *abs = xasprintf("%s/%s", strcmp(w->root, "/") == 0 ? "" : w->root, name);
	sbx_file_info fi = { 0 };
	if (sb_enter(w->s, NULL) < 0)
		return;
	int rc = sbx_sandbox_stat(&fi, w->s->sb, abs, NULL);
	sb_leave(w->s);
	if (rc == 0)
		json_object_set_new(fe, "entry", sbx__srv_entry_info(w->s, &fi));
	sbx_file_info_clear(&fi);
}

static int watch_fill(struct srv_stream *st)
{
	struct watch *w = st->ctx;
	if (!w->sent_start) {
		w->sent_start = 1;
		sbx__srv_envelope(&st->out, 0, json_pack("{s:{}}", "start"));
		return 0;
	}
	for (;;) {
		double now = sbx__now_mono();
		if (atomic_load(&st->srv->stopping) || w->s->dead) {
			sbx__srv_end_stream(&st->out, "unavailable", w->s->dead ? "sandbox is gone" : "server shutting down");
			return 1;
		}
		if (st->deadline && now >= st->deadline) {
			sbx__srv_end_stream(&st->out, "deadline_exceeded", "watch deadline exceeded");
			return 1;
		}
		if (now >= w->next_ka) {
			w->next_ka = now + st->keepalive_s;
			sbx__srv_envelope(&st->out, 0, json_pack("{s:{}}", "keepalive"));
			return 0;
		}
		/* Never waits here (the event thread runs this): with nothing to
		 * read, the notifier watches the inotify fd; the sandbox's end is
		 * checked every WATCH_RECHECK_S. */
		char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
		ssize_t n = read(w->ifd, buf, sizeof(buf));
		if (n <= 0) {
			double at = w->next_ka < now + WATCH_RECHECK_S ? w->next_ka : now + WATCH_RECHECK_S;
			if (st->deadline && st->deadline < at)
				at = st->deadline;
			st->wake_at = at;
			st->wake_fd = w->ifd;
			return SRV_FILL_WAIT;
		}
		int ended = 0;
		for (char *q = buf; q < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)q;
			q += sizeof(*ev) + ev->len;
			if (ev->wd == w->root_wd && (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)))
				ended = 1;
			const char *type = event_type(ev->mask);
			if (!type || !ev->len || ev->wd < 0 || (size_t)ev->wd >= w->nrel || !w->rel[ev->wd])
				continue;
			const char *base = w->rel[ev->wd];
			_cleanup_free_ char *name = *base ? xasprintf("%s/%s", base, ev->name) : xstrdup(ev->name);
			if (w->recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
				add_watch(w, name, NULL);
			json_t *fe = json_pack("{s:s,s:s}", "name", name, "type", type);
			if (w->include_entry && !(ev->mask & (IN_DELETE | IN_MOVED_FROM)))
				add_entry(w, fe, name);
			sbx__srv_envelope(&st->out, 0, json_pack("{s:o}", "filesystem", fe));
		}
		if (ended) {
			sbx__srv_end_stream(&st->out, "not_found", "watched directory was removed");
			return 1;
		}
		if (st->out.len) {
			w->next_ka = now + st->keepalive_s;
			return 0;
		}
	}
}

static void watch_fini(struct srv_stream *st)
{
	struct watch *w = st->ctx;
	close(w->ifd);
	for (size_t i = 0; i < w->nrel; i++)
		free(w->rel[i]);
	free(w->rel);
	free(w->root);
	sbx__srv_sandbox_put(st->srv, w->s);
	free(w);
}

static void watch_dir(struct srv_req *r, struct srv_sandbox *s, const char *user)
{
	json_t *req = sbx__srv_connect_body(r, 1);
	if (!req)
		return;
	const char *p = json_string_value(json_object_get(req, "path"));
	int recursive = json_is_true(json_object_get(req, "recursive"));
	int include_entry = json_is_true(json_object_get(req, "includeEntry")) ||
			    json_is_true(json_object_get(req, "include_entry"));
	_cleanup_free_ char *path = p && *p ? sbx__srv_resolve_path(s, user, p) : NULL;
	json_decref(req);
	if (!path) {
		sbx__srv_reply_stream_error(r, "invalid_argument", "path is required");
		return;
	}
	sbx_file_info fi = { 0 };
	sbx_error *e = NULL;
	int rc = sb_enter(s, &e);
	if (rc == 0) {
		rc = sbx_sandbox_stat(&fi, s->sb, path, &e);
		sb_leave(s);
	}
	if (rc < 0 || fi.type != SBX_FILE_DIR) {
		sbx__srv_reply_stream_error(r, rc < 0 ? sbx__srv_connect_code(rc) : "invalid_argument", "watch %s: %s", path,
				       rc < 0 && e ? e->msg : "not a directory");
		sbx_error_free(e);
		sbx_file_info_clear(&fi);
		return;
	}
	sbx_file_info_clear(&fi);
	struct watch *w = xcalloc(1, sizeof(*w));
	w->s = s;
	w->root = xstrdup(path);
	w->recursive = recursive;
	w->include_entry = include_entry;
	w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	pthread_mutex_lock(&r->srv->lock);
	s->refs++;
	pthread_mutex_unlock(&r->srv->lock);
	struct srv_stream *st = xcalloc(1, sizeof(*st));
	sbx__buf_init(&st->out, 16 << 20);
	st->srv = r->srv;
	st->ctx = w;
	st->fill = watch_fill;
	st->fini = watch_fini;
	st->keepalive_s = sbx__srv_keepalive_s(r);
	double tmo = sbx__srv_connect_timeout_s(r);
	st->deadline = tmo > 0 ? sbx__now_mono() + tmo : 0;
	w->next_ka = sbx__now_mono() + st->keepalive_s;
	w->root_wd = w->ifd < 0 ? -1 : add_watch(w, "", &e);
	if (w->root_wd < 0) {
		sbx__srv_reply_stream_error(r, "internal", "watch %s: %s", path, e ? e->msg : "inotify");
		sbx_error_free(e);
		watch_fini(st);
		sbx__buf_free(&st->out);
		free(st);
		return;
	}
	if (recursive) {
		sbx_file_info *v = NULL;
		size_t n = 0;
		if (sb_enter(s, NULL) == 0) {
			if (sbx_sandbox_list_dir(&v, &n, s->sb, path, 64, NULL) < 0)
				n = 0;
			sb_leave(s);
		}
		size_t plen = strcmp(path, "/") == 0 ? 0 : strlen(path);
		for (size_t i = 0; i < n; i++)
			if (v[i].type == SBX_FILE_DIR && v[i].path && strlen(v[i].path) > plen + 1)
				add_watch(w, v[i].path + plen + 1, NULL);
		sbx_file_info_free(v, n);
	}
	sbx__srv_reply_stream(r, st);
}

void sbx__srv_envd_fs(struct srv_req *r, struct srv_sandbox *s, const char *method)
{
	_cleanup_free_ char *user = sbx__srv_auth_basic_user(sbx__srv_header(r, "Authorization"));
	const char *eff = user ? user : s->user;
	if (strcmp(method, "WatchDir") == 0) {
		watch_dir(r, s, eff);
		return;
	}
	if (strcmp(method, "Stat") != 0 && strcmp(method, "ListDir") != 0 && strcmp(method, "MakeDir") != 0 &&
	    strcmp(method, "Move") != 0 && strcmp(method, "Remove") != 0) {
		sbx__srv_reply_connect_error(r, "unimplemented", "filesystem.Filesystem/%s is not supported", method);
		return;
	}
	json_t *req = sbx__srv_connect_body(r, 0);
	if (!req)
		return;
	unary(r, s, method, req, eff);
	json_decref(req);
}
