/* SPDX-License-Identifier: MIT */
/*
 * The toolbox's uploads, streamed: POST /files/bulk-upload takes the SDK's
 * multipart body, where field `files[i].path` names the destination of the
 * part `files[i].file` that follows it (the part's filename is only a base
 * name, so it is never used); the older POST /files/upload?path= takes one
 * part named `file`. Each file goes through the multipart parser straight
 * into the sandbox file's fd (created with its parents, truncated, chowned
 * to the sandbox user), so the server holds a few buffers whatever the
 * size. Errors met mid-body are answered once the body is in.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona.h"

#define FIELD_MAX 4096u

struct dt_upload {
	struct srv_sandbox *s;          /* a reference */
	struct srv_mp *mp;
	char *qpath;                    /* /files/upload's ?path=, resolved */
	json_t *paths;                  /* index -> destination, from files[i].path */
	int kind;                       /* current part: 0 skipped, 1 a path field, 2 a file */
	char idx[16];
	sbx_buf field;
	char *path;                     /* the file being written */
	int fd, mem;
	sbx_buf buf;                    /* providers without path fds */
	unsigned files;
	int status;                     /* the first error (0 = none), answered at the end */
	char *msg;
};

__attribute__((format(printf, 3, 4))) static int fail(struct dt_upload *u, int status, const char *fmt, ...)
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

static int fail_sbx(struct dt_upload *u, int rc, const char *path, sbx_error *e)
{
	int st = rc == -ENOENT ? 404 : rc == -EFBIG || rc == -E2BIG ? 413 : sbx__srv_http_status(rc);
	fail(u, st, "upload %s: %s", path, e && e->msg ? e->msg : sbx_error_code_name(rc));
	sbx_error_free(e);
	return -ECANCELED;
}

/* name="..." (or filename=) from a Content-Disposition header; owned. */
static char *disposition_param(const char *headers, const char *key)
{
	const char *h = strcasestr(headers, "content-disposition:");
	size_t kl = strlen(key);
	for (const char *p = h; p && (p = strcasestr(p, key)); p += kl) {
		if (p[-1] != ' ' && p[-1] != ';')
			continue;
		if (p[kl] != '=')
			continue;
		p += kl + 1;
		if (*p == '"') {
			const char *end = strchr(p + 1, '"');
			return end ? xstrndup(p + 1, (size_t)(end - p - 1)) : NULL;
		}
		return xstrndup(p, strcspn(p, "; \t\r\n"));
	}
	return NULL;
}

static int sink_open(struct dt_upload *u, const char *path)
{
	sbx_error *e = NULL;
	int fd = -1;
	struct stat st;
	/* a FIFO, device or socket there is refused, never opened */
	int rc = sbx__srv_open_regular(&fd, &st, u->s, path, &e);
	if (fd >= 0)
		close(fd);
	if (rc == -EINVAL || rc == -EISDIR)
		return fail_sbx(u, rc, path, e);
	int mem = rc == -ENOSYS;
	sbx_error_free(e);
	e = NULL;
	if ((rc = sbx__srv_op_begin(u->s, &e)) == 0) {
		rc = sbx_sandbox_write_file(u->s->sb, path, "", 0, 0644, &e);
		sbx__srv_op_end(u->s);
	}
	u->fd = -1;
	if (rc == 0 && !mem && (rc = sbx__srv_open_writable(&u->fd, u->s, path, &e)) == -ENOSYS) {
		sbx_error_free(e);
		e = NULL;
		mem = 1;
		rc = 0;
	}
	if (rc < 0)
		return fail_sbx(u, rc, path, e);
	u->mem = mem;
	if (mem)
		sbx__buf_init(&u->buf, SRV_UPLOAD_MAX);
	u->path = xstrdup(path);
	return 0;
}

static void sink_drop(struct dt_upload *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	sbx__buf_free(&u->buf);
	free(u->path);
	u->path = NULL;
}

static int sink_close(struct dt_upload *u)
{
	if (!u->path)
		return 0;
	sbx_error *e = NULL;
	int rc = 0;
	if (!u->mem && close(u->fd) < 0 && errno != EINTR)
		rc = sbx_error_setsys(&e, -errno, errno, "write %s", u->path);
	u->fd = -1;
	if (rc == 0 && (rc = sbx__srv_op_begin(u->s, &e)) == 0) {
		if (u->mem)
			rc = sbx_sandbox_write_file(u->s->sb, u->path, u->buf.data ? u->buf.data : "", u->buf.len, 0644, &e);
		if (rc == 0 && u->s->user && strcmp(u->s->user, "root") != 0)
			sbx_sandbox_chown(u->s->sb, u->path, u->s->user, NULL);
		sbx__srv_op_end(u->s);
	}
	if (rc < 0)
		fail_sbx(u, rc, u->path, e);
	else
		u->files++;
	sink_drop(u);
	return rc < 0 ? -ECANCELED : 0;
}

/* "files[12].path" -> kind 1, idx "12"; "files[12].file" -> kind 2. */
static int field_kind(const char *name, char idx[16])
{
	const char *p = sbx__str_startswith(name, "files[") ? name + 6 : NULL;
	size_t n = p ? strspn(p, "0123456789") : 0;
	if (!p || n == 0 || n > 9 || p[n] != ']')
		return 0;
	memcpy(idx, p, n);
	idx[n] = '\0';
	return strcmp(p + n, "].path") == 0 ? 1 : strcmp(p + n, "].file") == 0 ? 2 : 0;
}

static int part_begin(void *ctx, const char *headers)
{
	struct dt_upload *u = ctx;
	_cleanup_free_ char *name = disposition_param(headers, "name");
	u->kind = 0;
	if (!name)
		return 0;
	const char *dest = NULL;
	if (u->qpath && strcmp(name, "file") == 0) {
		u->kind = 2;
		dest = u->qpath;
	} else if (!u->qpath) {
		u->kind = field_kind(name, u->idx);
	}
	if (u->kind == 1) {
		sbx__buf_free(&u->field);
		sbx__buf_init(&u->field, FIELD_MAX);
		return 0;
	}
	if (u->kind != 2)
		return 0;
	if (u->files >= SRV_UPLOAD_FILES_MAX)
		return fail(u, 400, "more than %u files in one upload", SRV_UPLOAD_FILES_MAX);
	if (!dest)
		dest = json_string_value(json_object_get(u->paths, u->idx));
	if (!dest)
		return fail(u, 400, "part files[%s].file comes without a files[%s].path field before it", u->idx, u->idx);
	_cleanup_free_ char *abs = sbx__dt_path(u->s, dest);
	return sink_open(u, abs);
}

static int part_data(void *ctx, const char *data, size_t len)
{
	struct dt_upload *u = ctx;
	if (u->kind == 1)
		return sbx__buf_append(&u->field, data, len) < 0
			       ? fail(u, 400, "files[%s].path is longer than %u bytes", u->idx, FIELD_MAX)
			       : 0;
	if (u->kind != 2 || !u->path || !len)
		return 0;
	int rc = u->mem ? sbx__buf_append(&u->buf, data, len) : sbx__write_all(u->fd, data, len);
	return rc < 0 ? fail_sbx(u, rc == -E2BIG ? -EFBIG : rc, u->path, NULL) : 0;
}

static int part_end(void *ctx)
{
	struct dt_upload *u = ctx;
	if (u->kind == 1) {
		const char *v = u->field.data ? u->field.data : "";
		if (!*v || strlen(v) != u->field.len)
			return fail(u, 400, "files[%s].path is empty or not text", u->idx);
		json_object_set_new(u->paths, u->idx, json_string(v));
		return 0;
	}
	return u->kind == 2 ? sink_close(u) : 0;
}

static const struct srv_mp_cbs mp_cbs = { part_begin, part_data, part_end };

static void feed(struct srv_req *r, const char *data, size_t len)
{
	struct dt_upload *u = r->up;
	if (u->status || !u->mp)
		return;
	if (sbx__srv_mp_feed(u->mp, data, len) == -E2BIG)
		fail(u, 400, "a multipart part's headers exceed %u bytes", SRV_MP_HEADERS_MAX);
}

static void upload_free(struct srv_req *r)
{
	struct dt_upload *u = r->up;
	if (!u)
		return;
	sink_drop(u);
	sbx__srv_mp_free(u->mp);
	sbx__buf_free(&u->field);
	json_decref(u->paths);
	sbx__srv_sandbox_put(r->srv, u->s);
	free(u->qpath);
	free(u->msg);
	free(u);
	r->up = NULL;
}

void sbx__dt_upload_begin(struct srv_req *r, struct srv_sandbox *s)
{
	struct dt_upload *u = xcalloc(1, sizeof(*u));
	u->s = s;
	u->fd = -1;
	u->paths = json_object();
	r->up = u;
	r->feed = feed;
	r->up_free = upload_free;
	if (strstr(r->url, "/files/upload")) {
		const char *q = sbx__srv_query(r, "path");
		if (!q || !*q) {
			fail(u, 400, "query parameter path is required");
			return;
		}
		u->qpath = sbx__dt_path(s, q);
	}
	const char *ct = sbx__srv_header(r, "Content-Type");
	_cleanup_free_ char *boundary = NULL;
	if (ct && sbx__str_startswith(ct, "multipart/form-data")) {
		const char *b = strcasestr(ct, "boundary=");
		if (b) {
			b += strlen("boundary=");
			boundary = *b == '"' ? xstrndup(b + 1, strcspn(b + 1, "\"")) : xstrndup(b, strcspn(b, "; \t"));
		}
	}
	if (!boundary || !*boundary) {
		fail(u, 400, "the body must be multipart/form-data with a boundary");
		return;
	}
	u->mp = sbx__srv_mp_new(boundary, &mp_cbs, u);
}

void sbx__dt_upload_end(struct srv_req *r)
{
	struct dt_upload *u = r->up;
	if (!u) {
		sbx__dt_tb_error(r, 404, NULL, "sandbox not found");
		return;
	}
	if (!u->status && sbx__srv_mp_in_part(u->mp))
		fail(u, 400, "multipart body ends inside a part%s%s", u->path ? " for " : "", u->path ? u->path : "");
	else if (!u->status && u->files == 0)
		fail(u, 400, "multipart body has no file part (files[i].path then files[i].file)");
	if (u->status) {
		const char *code = u->status == 404 ? "FILE_NOT_FOUND" : u->status == 403 ? "FILE_ACCESS_DENIED" : NULL;
		sbx__dt_tb_error(r, u->status, code, "%s", u->msg);
		return;
	}
	sbx__srv_reply_empty(r, 200);
}
