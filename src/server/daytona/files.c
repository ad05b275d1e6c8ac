/* SPDX-License-Identifier: MIT */
/*
 * The toolbox's file routes, as the SDK's `fs` calls them: list (GET
 * /files), info, folder, move, permissions, delete (DELETE /files),
 * download (one file, octet-stream) and bulk-download (a multipart reply,
 * one `file` part per path named by the path as asked, or an `error` part
 * with a JSON body). Relative paths resolve against the sandbox's working
 * directory. Uploads are in upload.c, find/search/replace in
 * files_search.c; upload-v2 (signed URLs) is not implemented (501).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/str.h"
#include "daytona.h"

#define BULK_DOWNLOAD_MAX (512u << 20)  /* the whole multipart reply, held in memory */
#define BULK_PATHS_MAX 1024u

char *sbx__dt_path(struct srv_sandbox *s, const char *path)
{
	if (path[0] == '/')
		return xstrdup(path);
	_cleanup_free_ char *wd = sbx__dt_workdir(s);
	if (strcmp(path, ".") == 0 || !*path)
		return xstrdup(wd);
	if (strncmp(path, "./", 2) == 0)
		path += 2;
	return xasprintf("%s/%s", strcmp(wd, "/") == 0 ? "" : wd, path);
}

/* The daemon's error for a failed file call on path. */
void sbx__dt_file_error(struct srv_req *r, int rc, const char *path, sbx_error *e)
{
	const char *msg = e && e->msg ? e->msg : sbx_error_code_name(rc);
	if (rc == -ENOENT)
		sbx__dt_tb_error(r, 404, "FILE_NOT_FOUND", "file not found: %s", path);
	else if (rc == -EACCES || rc == -EPERM)
		sbx__dt_tb_error(r, 403, "FILE_ACCESS_DENIED", "access denied: %s: %s", path, msg);
	else if (rc == -EINVAL || rc == -EISDIR || rc == -ENOTDIR || rc == -EEXIST || rc == -ENOTEMPTY)
		sbx__dt_tb_error(r, 400, "INVALID_FILE_PATH", "%s: %s", path, msg);
	else
		sbx__dt_tb_error(r, sbx__srv_http_status(rc), NULL, "%s: %s", path, msg);
	sbx_error_free(e);
}

static json_t *file_info(const sbx_file_info *f)
{
	char mode[11], perm[8];
	mode[0] = f->type == SBX_FILE_DIR ? 'd' : f->type == SBX_FILE_SYMLINK ? 'L' : '-';
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		mode[i + 1] = (f->mode & (1u << (8 - i))) ? rwx[i] : '-';
	mode[10] = '\0';
	snprintf(perm, sizeof(perm), "%04o", f->mode & 07777);
	char *mt = sbx__srv_rfc3339(f->mtime);
	json_t *o = json_pack("{s:s,s:s,s:b,s:I,s:s,s:s,s:s,s:s,s:s,s:s}", "name", f->name ? f->name : "", "path",
			      f->path ? f->path : "", "isDir", f->type == SBX_FILE_DIR, "size", (json_int_t)f->size, "mode",
			      mode, "permissions", perm, "owner", f->owner ? f->owner : "", "group",
			      f->group ? f->group : "", "modTime", mt, "modifiedAt", mt);
	free(mt);
	return o;
}

/* The query parameter `name`, resolved; NULL after replying 400. */
static char *path_param(struct srv_req *r, struct srv_sandbox *s, const char *name)
{
	const char *q = sbx__srv_query(r, name);
	if (!q || !*q) {
		sbx__dt_tb_error(r, 400, "INVALID_FILE_PATH", "query parameter %s is required", name);
		return NULL;
	}
	return sbx__dt_path(s, q);
}

static void list(struct srv_req *r, struct srv_sandbox *s, const char *path)
{
	sbx_file_info *v = NULL;
	size_t n = 0;
	sbx_error *e = NULL;
	int rc = sbx_sandbox_list_dir(&v, &n, s->sb, path, 1, &e);
	if (rc < 0) {
		sbx__dt_file_error(r, rc, path, e);
		return;
	}
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, file_info(&v[i]));
	sbx_file_info_free(v, n);
	sbx__srv_reply_json(r, 200, a);
}

static int parse_mode(const char *m, unsigned *out)
{
	char *end = NULL;
	unsigned long v = m && *m ? strtoul(m, &end, 8) : 0;
	if (!m || !*m || *end || v > 07777)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* One part of the bulk-download reply. */
static int add_part(sbx_buf *b, const char *boundary, const char *name, const char *src, const char *ctype,
		    const char *data, size_t len)
{
	_cleanup_free_ char *q = sbx__srv_log_escape(src, 1); /* a quoted-string: no raw quotes or CR/LF */
	if (sbx__buf_printf(b, "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
			       "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
			    boundary, name, q, ctype, len) < 0 ||
	    sbx__buf_append(b, data, len) < 0 || sbx__buf_append(b, "\r\n", 2) < 0)
		return -E2BIG;
	return 0;
}

static void bulk_download(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *body = sbx__dt_json_body(r);
	if (!body)
		return;
	json_t *paths = json_object_get(body, "paths"), *p;
	size_t i;
	int ok = json_is_array(paths) && json_array_size(paths) > 0 && json_array_size(paths) <= BULK_PATHS_MAX;
	json_array_foreach(paths, i, p)
		ok = ok && json_is_string(p) && *json_string_value(p);
	if (!ok) {
		sbx__dt_tb_error(r, 400, NULL, "paths must be an array of 1..%u non-empty strings", BULK_PATHS_MAX);
		json_decref(body);
		return;
	}
	char tok[65];
	sbx__srv_auth_new_token(tok);
	_cleanup_free_ char *boundary = xasprintf("sbx-%.24s", tok);
	sbx_buf b;
	sbx__buf_init(&b, BULK_DOWNLOAD_MAX);
	int rc = 0;
	json_array_foreach(paths, i, p) {
		const char *src = json_string_value(p);
		_cleanup_free_ char *abs = sbx__dt_path(s, src);
		char *data = NULL;
		size_t len = 0;
		sbx_error *e = NULL;
		int frc = sbx__srv_read_small(&data, &len, s, abs, BULK_DOWNLOAD_MAX - b.len, &e);
		if (frc == 0) {
			rc = add_part(&b, boundary, "file", src, "application/octet-stream", data, len);
		} else {
			int st = frc == -ENOENT ? 404 : 400;
			const char *code = frc == -ENOENT ? "FILE_NOT_FOUND" : frc == -EFBIG ? "FILE_READ_FAILED" : "INVALID_FILE_PATH";
			json_t *ej = json_pack("{s:s,s:i,s:s}", "message",
					       frc == -ENOENT ? "file not found" : e && e->msg ? e->msg : sbx_error_code_name(frc),
					       "statusCode", st, "code", code);
			char *es = json_dumps(ej, JSON_COMPACT);
			rc = add_part(&b, boundary, "error", src, "application/json", es, strlen(es));
			free(es);
			json_decref(ej);
		}
		free(data);
		sbx_error_free(e);
		if (rc < 0)
			break;
	}
	json_decref(body);
	if (rc == 0)
		rc = sbx__buf_printf(&b, "--%s--\r\n", boundary);
	if (rc < 0) {
		sbx__buf_free(&b);
		sbx__dt_tb_error(r, 413, NULL, "bulk-download reply larger than %u bytes: ask for fewer files",
				 BULK_DOWNLOAD_MAX);
		return;
	}
	_cleanup_free_ char *ct = xasprintf("multipart/form-data; boundary=%s", boundary);
	size_t len = 0;
	char *data = sbx__buf_steal(&b, &len);
	sbx__srv_reply_bytes(r, 200, ct, data, len);
}

static void download(struct srv_req *r, struct srv_sandbox *s)
{
	_cleanup_free_ char *path = path_param(r, s, "path");
	if (!path)
		return;
	int fd = -1;
	struct stat st;
	sbx_error *e = NULL;
	int rc = sbx__srv_open_regular(&fd, &st, s, path, &e);
	if (rc == 0) {
		sbx__srv_reply_fd(r, 200, "application/octet-stream", fd, (uint64_t)st.st_size);
		return;
	}
	if (rc != -ENOSYS) {
		sbx__dt_file_error(r, rc, path, e);
		return;
	}
	sbx_error_free(e);
	e = NULL;
	char *data = NULL;
	size_t len = 0;
	if ((rc = sbx__srv_read_small(&data, &len, s, path, SRV_READ_MAX, &e)) < 0)
		sbx__dt_file_error(r, rc, path, e);
	else
		sbx__srv_reply_bytes(r, 200, "application/octet-stream", data, len);
}

/* One library call on the sandbox (under an op reference). */
static void fs_call(struct srv_req *r, struct srv_sandbox *s, const char *op, const char *path)
{
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc < 0) {
		sbx__dt_file_error(r, rc, path, e);
		return;
	}
	const char *m = r->method;
	if (!*op && strcmp(m, "GET") == 0) {
		list(r, s, path);
	} else if (strcmp(op, "info") == 0 && strcmp(m, "GET") == 0) {
		sbx_file_info fi = { 0 };
		if ((rc = sbx_sandbox_stat(&fi, s->sb, path, &e)) < 0)
			sbx__dt_file_error(r, rc, path, e);
		else
			sbx__srv_reply_json(r, 200, file_info(&fi));
		sbx_file_info_clear(&fi);
	} else if (!*op && strcmp(m, "DELETE") == 0) {
		const char *rec = sbx__srv_query(r, "recursive");
		sbx_file_info fi = { 0 };
		rc = sbx_sandbox_stat(&fi, s->sb, path, &e);
		if (rc == 0 && fi.type == SBX_FILE_DIR && !(rec && strcmp(rec, "true") == 0))
			rc = sbx_error_set(&e, -EISDIR, "%s is a directory: pass recursive=true", path);
		sbx_file_info_clear(&fi);
		if (rc == 0)
			rc = sbx_sandbox_remove(s->sb, path, 0, &e);
		if (rc < 0)
			sbx__dt_file_error(r, rc, path, e);
		else
			sbx__srv_reply_empty(r, 204);
	} else if (strcmp(op, "folder") == 0 && strcmp(m, "POST") == 0) {
		unsigned mode = 0755;
		const char *mq = sbx__srv_query(r, "mode");
		if (mq && *mq && parse_mode(mq, &mode) < 0)
			sbx__dt_tb_error(r, 400, NULL, "mode must be octal, e.g. 755");
		else if ((rc = sbx_sandbox_mkdir(s->sb, path, mode, &e)) < 0 && rc != -EEXIST)
			sbx__dt_file_error(r, rc, path, e);
		else {
			sbx_error_free(e);
			if (s->user && strcmp(s->user, "root") != 0)
				sbx_sandbox_chown(s->sb, path, s->user, NULL);
			sbx__srv_reply_empty(r, 201);
		}
	} else if (strcmp(op, "move") == 0 && strcmp(m, "POST") == 0) {
		_cleanup_free_ char *dst = path_param(r, s, "destination");
		if (dst && (rc = sbx_sandbox_rename(s->sb, path, dst, &e)) < 0)
			sbx__dt_file_error(r, rc, path, e);
		else if (dst)
			sbx__srv_reply_empty(r, 200);
	} else if (strcmp(op, "permissions") == 0 && strcmp(m, "POST") == 0) {
		const char *mq = sbx__srv_query(r, "mode"), *owner = sbx__srv_query(r, "owner");
		const char *group = sbx__srv_query(r, "group");
		unsigned mode = 0;
		if (mq && *mq && parse_mode(mq, &mode) < 0) {
			sbx__dt_tb_error(r, 400, NULL, "mode must be octal, e.g. 644");
		} else {
			_cleanup_free_ char *spec = owner && *owner ? (group && *group ? xasprintf("%s:%s", owner, group)
										 : xstrdup(owner))
							  : NULL;
			if (mq && *mq) {
				/* no chmod in the library: the sandbox's own chmod, argv as given */
				char ms[8];
				snprintf(ms, sizeof(ms), "%o", mode);
				const char *argv[] = { "chmod", ms, "--", path, NULL };
				sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
				o.argv = argv;
				o.user = "root"; /* as Daytona's daemon, which runs as root */
				sbx_exec_result res = { 0 };
				rc = sbx_sandbox_exec(&res, s->sb, &o, &e);
				if (rc == 0 && res.exit_code != 0)
					rc = sbx_error_set(&e, res.exit_code == 127 ? -ENOSYS : -EINVAL, "chmod %s: %s", path,
							   res.err && *res.err ? res.err : "failed");
				sbx_exec_result_free(&res);
			}
			if (rc == 0 && spec)
				rc = sbx_sandbox_chown(s->sb, path, spec, &e);
			if (rc < 0)
				sbx__dt_file_error(r, rc, path, e);
			else
				sbx__srv_reply_empty(r, 200);
		}
	} else {
		sbx__dt_tb_error(r, 404, NULL, "toolbox route %s /files/%s is not implemented by sbx serve", m, op);
	}
	sbx__srv_op_end(s);
}

void sbx__dt_files(struct srv_req *r, struct srv_sandbox *s, const char *op)
{
	const char *m = r->method;
	if (strcmp(op, "bulk-upload") == 0 || strcmp(op, "upload") == 0) {
		sbx__dt_upload_end(r);
	} else if (strcmp(op, "bulk-download") == 0 && strcmp(m, "POST") == 0) {
		bulk_download(r, s);
	} else if (strcmp(op, "download") == 0 && strcmp(m, "GET") == 0) {
		download(r, s);
	} else if (sbx__dt_files_search(r, s, op)) {
		/* answered */
	} else if (strcmp(op, "upload-v2") == 0) {
		sbx__dt_tb_error(r, 501, NULL, "/files/%s is not implemented by sbx serve", op);
	} else {
		_cleanup_free_ char *path = path_param(r, s, strcmp(op, "move") == 0 ? "source" : "path");
		if (path)
			fs_call(r, s, op, path);
	}
}
