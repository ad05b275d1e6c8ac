/* SPDX-License-Identifier: MIT */
/*
 * envd's /files: GET streams a regular file (octet-stream with
 * Content-Length; 404 missing, 400 directory, FIFO, device or socket), POST writes one or more files from a multipart
 * body (the `path` query wins over each part's filename) or from a raw
 * application/octet-stream body (optionally gzip), creating parents and
 * chowning to the caller's user; the reply lists the written entries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/str.h"
#include "server_int.h"

static void file_error(struct srv_req *r, int code, const char *path, sbx_error *e)
{
	if (code == -ENOENT || code == -ESRCH)
		sbx__srv_reply_error(r, 404, code == -ENOENT ? "path '%s' does not exist" : "%s: sandbox is gone", path);
	else if (code == -EISDIR)
		sbx__srv_reply_error(r, 400, "path '%s' is a directory", path);
	else if (code == -ENOTDIR)
		sbx__srv_reply_error(r, 400, "a parent of path '%s' is not a directory", path);
	else
		sbx__srv_reply_error(r, sbx__srv_http_status(code), "%s: %s", path, e && e->msg ? e->msg : sbx_error_code_name(code));
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

static int write_one(struct srv_sandbox *s, const char *path, const void *data, size_t len, const char *user,
		     sbx_error **e)
{
	/* An existing FIFO, device or socket there is refused, not opened (a
	 * FIFO would block the write until the sandbox reads it). */
	int fd = -1;
	struct stat st;
	sbx_error *pe = NULL;
	int rc = sbx__srv_open_regular(&fd, &st, s, path, &pe);
	if (fd >= 0)
		close(fd);
	if (rc == -EINVAL || rc == -EISDIR) {
		*e = pe;
		return rc;
	}
	sbx_error_free(pe);
	if ((rc = sbx__srv_op_begin(s, e)) < 0)
		return rc;
	rc = sbx_sandbox_write_file(s->sb, path, data, len, 0644, e);
	if (rc == 0 && user && strcmp(user, "root") != 0)
		sbx_sandbox_chown(s->sb, path, user, NULL);
	sbx__srv_op_end(s);
	return rc;
}

static json_t *entry(const char *path)
{
	const char *slash = strrchr(path, '/');
	return json_pack("{s:s,s:s,s:s}", "path", path, "name", slash ? slash + 1 : path, "type", "file");
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

static int inflate_body(sbx_buf *out, const char *in, size_t len)
{
	z_stream z = { 0 };
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -EINVAL;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	char buf[65536];
	int r = 0, zr;
	do {
		z.next_out = (Bytef *)buf;
		z.avail_out = sizeof(buf);
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END) {
			r = -EINVAL;
			break;
		}
		if (sbx__buf_append(out, buf, sizeof(buf) - z.avail_out) < 0) {
			r = -EFBIG;
			break;
		}
	} while (zr != Z_STREAM_END);
	inflateEnd(&z);
	return r;
}

static void post_octet(struct srv_req *r, struct srv_sandbox *s, const char *path, const char *user)
{
	if (!path) {
		sbx__srv_reply_error(r, 400, "path is required for application/octet-stream uploads");
		return;
	}
	const char *enc = sbx__srv_header(r, "Content-Encoding");
	const char *data = r->body.data ? r->body.data : "";
	size_t len = r->body.len;
	sbx_buf plain;
	sbx__buf_init(&plain, SRV_UPLOAD_MAX);
	if (enc && strcasecmp(enc, "gzip") == 0) {
		if (inflate_body(&plain, data, len) < 0) {
			sbx__buf_free(&plain);
			sbx__srv_reply_error(r, 400, "body is not valid gzip (or inflates past %u bytes)", SRV_UPLOAD_MAX);
			return;
		}
		data = plain.data ? plain.data : "";
		len = plain.len;
	} else if (enc && strcasecmp(enc, "identity") != 0) {
		sbx__buf_free(&plain);
		sbx__srv_reply_error(r, 415, "unsupported Content-Encoding %s", enc);
		return;
	}
	sbx_error *e = NULL;
	int rc = write_one(s, path, data, len, user, &e);
	sbx__buf_free(&plain);
	if (rc < 0) {
		file_error(r, rc, path, e);
		return;
	}
	sbx__srv_reply_json(r, 200, json_pack("[o]", entry(path)));
}

static void post_multipart(struct srv_req *r, struct srv_sandbox *s, const char *qpath, const char *ctype,
			   const char *user)
{
	_cleanup_free_ char *boundary = header_param(ctype, "boundary");
	if (!boundary || !*boundary) {
		sbx__srv_reply_error(r, 400, "multipart body without a boundary");
		return;
	}
	_cleanup_free_ char *delim = xasprintf("--%s", boundary);
	size_t dl = strlen(delim);
	const char *b = r->body.data ? r->body.data : "", *end = b + r->body.len;
	const char *p = memmem(b, r->body.len, delim, dl);
	json_t *written = json_array();
	while (p) {
		p += dl;
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			break;
		if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
			p += 2;
		const char *hdr_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (!hdr_end)
			break;
		_cleanup_free_ char *headers = xstrndup(p, (size_t)(hdr_end - p));
		const char *content = hdr_end + 4;
		_cleanup_free_ char *needle = xasprintf("\r\n%s", delim);
		const char *next = memmem(content, (size_t)(end - content), needle, dl + 2);
		if (!next)
			break;
		char *disp = strcasestr(headers, "content-disposition:");
		_cleanup_free_ char *name = disp ? header_param(disp, "name") : NULL;
		_cleanup_free_ char *filename = disp ? header_param(disp, "filename") : NULL;
		if (name && strcmp(name, "file") == 0) {
			const char *target = qpath ? qpath : filename;
			if (!target || !*target || strcmp(target, "undefined") == 0) {
				json_decref(written);
				sbx__srv_reply_error(r, 400, "no path for an uploaded part (give ?path= or a filename)");
				return;
			}
			_cleanup_free_ char *abs = sbx__srv_resolve_path(s, user, target);
			sbx_error *e = NULL;
			int rc = write_one(s, abs, content, (size_t)(next - content), user, &e);
			if (rc < 0) {
				json_decref(written);
				file_error(r, rc, abs, e);
				return;
			}
			json_array_append_new(written, entry(abs));
		}
		p = next + 2;
	}
	if (json_array_size(written) == 0) {
		json_decref(written);
		sbx__srv_reply_error(r, 400, "multipart body has no part named \"file\"");
		return;
	}
	sbx__srv_reply_json(r, 200, written);
}

void sbx__srv_envd_files(struct srv_req *r, struct srv_sandbox *s)
{
	int explicit_user = 0;
	_cleanup_free_ char *user = caller_user(r, s, &explicit_user);
	const char *q = sbx__srv_query(r, "path");
	_cleanup_free_ char *path = q && *q ? sbx__srv_resolve_path(s, user, q) : NULL;
	if (strcmp(r->method, "GET") == 0) {
		if (!path)
			sbx__srv_reply_error(r, 400, "path is required");
		else
			get_file(r, s, path);
		return;
	}
	if (strcmp(r->method, "POST") != 0) {
		sbx__srv_reply_error(r, 405, "method %s not allowed on /files", r->method);
		return;
	}
	const char *ct = sbx__srv_header(r, "Content-Type");
	const char *wuser = user;
	if (ct && sbx__str_startswith(ct, "multipart/form-data"))
		post_multipart(r, s, path, ct, wuser);
	else
		post_octet(r, s, path, wuser);
}
