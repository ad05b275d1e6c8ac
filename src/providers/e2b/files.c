/* SPDX-License-Identifier: MIT */
/*
 * File transfer through envd: whole files with POST /files (multipart, one
 * part named `file`) and GET /files, as root. Trees (and single files, so
 * modes survive) are uploaded as one tar and unpacked by a command in the
 * sandbox; downloads of trees are a tar made by a command, fetched and
 * unpacked here confined, then placed as cp does (util/tree_tar.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/http.h"
#include "../../util/str.h"
#include "../../util/tree_tar.h"
#include "e2b_int.h"

#define XFER_TIMEOUT_MS (30L * 60 * 1000)
#define CMD_TIMEOUT_S 600

void sbx__e2b_multipart(char **prefix, size_t *plen, char **suffix, size_t *slen, char *ctype,
			size_t ctype_len, const char *filename)
{
	char bnd[33];
	sbx__random_hex(bnd, 32);
	sbx_buf f;
	sbx__buf_init(&f, strlen(filename) * 3 + 1);
	for (const char *p = filename; *p; p++) {
		if (*p == '"' || *p == '\r' || *p == '\n')
			sbx__buf_printf(&f, "%%%02X", (unsigned char)*p);
		else
			sbx__buf_append(&f, p, 1);
	}
	_cleanup_free_ char *fn = sbx__buf_steal(&f, NULL);
	*prefix = xasprintf("--sbx%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
			    "Content-Type: application/octet-stream\r\n\r\n", bnd, fn);
	*plen = strlen(*prefix);
	*suffix = xasprintf("\r\n--sbx%s--\r\n", bnd);
	*slen = strlen(*suffix);
	snprintf(ctype, ctype_len, "multipart/form-data; boundary=sbx%s", bnd);
}

static char *files_url(const struct e2b_conn *c, const char *path)
{
	_cleanup_free_ char *ep = sbx__e2b_urlenc(path);
	return xasprintf("%s/files?path=%s&username=root", c->base, ep);
}

/* POST /files with data from memory (fd < 0) or from fd (len bytes). */
static int post_file(const struct e2b_conn *c, const char *path, const void *data, size_t len, int fd,
		     sbx_error **err)
{
	char *prefix, *suffix, ctype[128];
	size_t plen, slen;
	sbx__e2b_multipart(&prefix, &plen, &suffix, &slen, ctype, sizeof(ctype), path);
	_cleanup_free_ char *url = files_url(c, path);
	char **h = sbx__e2b_envd_headers(c, ctype, NULL, 0, 0);
	sbx_buf resp;
	sbx__buf_init(&resp, 1u << 20);
	struct e2b_req rq = { .method = "POST", .url = url, .headers = (const char *const *)h, .body_fd = -1,
			      .timeout_ms = XFER_TIMEOUT_MS, .resp = &resp };
	_cleanup_free_ char *body = NULL;
	if (fd >= 0) {
		rq.body_fd = fd;
		rq.prefix = prefix, rq.prefix_len = plen;
		rq.suffix = suffix, rq.suffix_len = slen;
		rq.fd_len = (off_t)len;
	} else {
		body = xmalloc(plen + len + slen);
		memcpy(body, prefix, plen);
		if (len)
			memcpy(body + plen, data, len);
		memcpy(body + plen + len, suffix, slen);
		rq.body = body;
		rq.body_len = plen + len + slen;
	}
	int r = sbx__e2b_http(&rq, err);
	sbx__http_headers_free(h);
	free(prefix);
	free(suffix);
	_cleanup_free_ char *what = xasprintf("write %s in sandbox %s", path, c->id);
	if (r < 0)
		sbx_error_prefix(err, r, "%s", what);
	else
		r = sbx__e2b_map_http(rq.status, resp.data, resp.len, what, err);
	sbx__buf_free(&resp);
	return r;
}

int sbx__e2b_write(struct e2b_sb *sb, const char *path, const void *data, size_t len, unsigned mode,
		   sbx_error **err)
{
	int r = post_file(&sb->conn, path, data, len, -1, err);
	if (r == 0 && mode && (mode & 07777) != 0644) {
		_cleanup_free_ char *q = sbx__e2b_shq(path);
		_cleanup_free_ char *cmd = xasprintf("chmod %o %s", mode & 07777, q);
		r = sbx__e2b_root_sh(sb, cmd, CMD_TIMEOUT_S, err);
	}
	return r;
}


static int to_fd(const char *d, size_t n, void *u)
{
	int fd = *(int *)u;
	return sbx__write_all(fd, d, n);
}

/* GET /files into a bounded buffer or an fd. */
static int get_file(sbx_buf *into, int fd, const struct e2b_conn *c, const char *path, sbx_error **err)
{
	_cleanup_free_ char *url = files_url(c, path);
	char **h = sbx__e2b_envd_headers(c, NULL, NULL, 0, 0);
	struct e2b_req rq = { .method = "GET", .url = url, .headers = (const char *const *)h, .body_fd = -1,
			      .timeout_ms = XFER_TIMEOUT_MS, .resp = into };
	if (fd >= 0) {
		rq.on_data = to_fd;
		rq.payload = &fd;
	}
	int r = sbx__e2b_http(&rq, err);
	sbx__http_headers_free(h);
	_cleanup_free_ char *what = xasprintf("read %s in sandbox %s", path, c->id);
	if (r == -E2BIG)
		return sbx_error_set(err, -EFBIG, "e2b: %s: larger than %zu bytes", what, into->max - 1);
	if (r < 0)
		return sbx_error_prefix(err, r, "%s", what);
	if (rq.status != 200) {
		const char *b = into ? into->data : NULL;
		size_t bl = into ? into->len : 0;
		r = sbx__e2b_map_http(rq.status, b, bl, what, err);
		if (r == -EINVAL && rq.status == 400 && err && *err && strstr((*err)->msg, "director"))
			(*err)->code = r = -EISDIR;
	}
	return r;
}

int sbx__e2b_read(void **data_out, size_t *len_out, struct e2b_sb *sb, const char *path, size_t max,
		  sbx_error **err)
{
	sbx_buf b;
	sbx__buf_init(&b, max + 1);
	int r = get_file(&b, -1, &sb->conn, path, err);
	if (r == 0 && b.len > max)
		r = sbx_error_set(err, -EFBIG, "e2b: read %s: larger than %zu bytes", path, max);
	if (r < 0) {
		sbx__buf_free(&b);
		return r;
	}
	*data_out = sbx__buf_steal(&b, len_out);
	return 0;
}

/* ---- trees ---- */

int sbx__e2b_upload(struct e2b_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "upload: %s", src);
	_cleanup_free_ char *name = sbx__tree_name(src);
	_cleanup_close_ int fd = -1;
	off_t len = 0;
	int r = sbx__tree_tar(&fd, &len, src, name, 0, err);
	if (r < 0)
		return r;
	char hex[17];
	sbx__random_hex(hex, 16);
	_cleanup_free_ char *tmp = xasprintf("/tmp/.sbx-upload-%s.tar", hex);
	r = post_file(&sb->conn, tmp, NULL, (size_t)len, fd, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "upload %s", src);
	_cleanup_free_ char *qt = sbx__e2b_shq(tmp), *qd = sbx__e2b_shq(dst), *qn = sbx__e2b_shq(name);
	_cleanup_free_ char *cmd = sbx__tree_unpack_sh(qt, qd, qn);
	r = sbx__e2b_root_sh(sb, cmd, CMD_TIMEOUT_S, err);
	return r < 0 ? sbx_error_prefix(err, r, "upload %s to %s", src, dst) : 0;
}

int sbx__e2b_download(struct e2b_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	sbx_file_info fi;
	int r = sbx__e2b_fs_stat(&fi, &sb->conn, src, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "download %s", src);
	sbx_file_info_clear(&fi);
	_cleanup_free_ char *name = sbx__tree_name(src);
	char hex[17];
	sbx__random_hex(hex, 16);
	_cleanup_free_ char *tmp = xasprintf("/tmp/.sbx-download-%s.tar", hex);
	_cleanup_free_ char *qs = sbx__e2b_shq(src), *qt = sbx__e2b_shq(tmp);
	_cleanup_free_ char *cmd = xasprintf("cd \"$(dirname %s)\" && tar -cf %s \"$(basename %s)\"", qs, qt, qs);
	r = sbx__e2b_root_sh(sb, cmd, CMD_TIMEOUT_S, err);
	_cleanup_close_ int fd = r == 0 ? sbx__tree_tmpfd(err) : -1;
	if (r == 0 && fd < 0)
		r = fd;
	if (r == 0)
		r = get_file(NULL, fd, &sb->conn, tmp, err);
	_cleanup_free_ char *rm = xasprintf("rm -f %s", qt);
	sbx__e2b_root_sh(sb, rm, CMD_TIMEOUT_S, NULL);
	if (r < 0)
		return sbx_error_prefix(err, r, "download %s", src);
	return sbx__tree_place(fd, name, dst, "", err);
}
