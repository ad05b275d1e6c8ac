/* SPDX-License-Identifier: MIT */
/*
 * The toolbox's content routes: GET /files/find?path=&pattern= (grep -rn in
 * the sandbox: [{file, line, content}]), GET /files/search?path=&pattern=
 * (names matching a glob, find -name: {files}) and POST /files/replace
 * {files, pattern, newValue} (every literal occurrence, file by file:
 * [{file, success, error?}]). The sandbox's own grep and find run with the
 * arguments as given (argv, no shell), as root like Daytona's daemon.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/str.h"
#include "daytona.h"

#define SEARCH_OUTPUT_MAX (16u << 20)
#define SEARCH_RESULTS_MAX 100000u
#define REPLACE_FILE_MAX (64u << 20)
#define REPLACE_FILES_MAX 1024u

/* Runs argv in the sandbox as root; rc < 0 only when it could not run. */
static int run(sbx_exec_result *res, struct srv_sandbox *s, const char *const *argv, sbx_error **e)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.argv = argv;
	o.user = "root";
	o.output_max = SEARCH_OUTPUT_MAX;
	o.timeout_s = 300;
	int rc = sbx__srv_op_begin(s, e);
	if (rc == 0) {
		rc = sbx_sandbox_exec(res, s->sb, &o, e);
		sbx__srv_op_end(s);
	}
	return rc;
}

/* path and pattern from the query, path resolved and present; NULL after replying. */
static char *params(struct srv_req *r, struct srv_sandbox *s, const char **pattern)
{
	const char *q = sbx__srv_query(r, "path");
	*pattern = sbx__srv_query(r, "pattern");
	if (!q || !*q || !*pattern || !**pattern) {
		sbx__dt_tb_error(r, 400, NULL, "query parameters path and pattern are required");
		return NULL;
	}
	char *path = sbx__dt_path(s, q);
	sbx_file_info fi = { 0 };
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx_sandbox_stat(&fi, s->sb, path, &e);
		sbx__srv_op_end(s);
	}
	sbx_file_info_clear(&fi);
	if (rc < 0) {
		sbx__dt_file_error(r, rc, path, e);
		free(path);
		return NULL;
	}
	return path;
}

static void find_in_files(struct srv_req *r, struct srv_sandbox *s)
{
	const char *pattern;
	_cleanup_free_ char *path = params(r, s, &pattern);
	if (!path)
		return;
	const char *argv[] = { "grep", "-rnH", "-e", pattern, "--", path, NULL };
	sbx_exec_result res = { 0 };
	sbx_error *e = NULL;
	int rc = run(&res, s, argv, &e);
	if (rc < 0 || res.exit_code > 1) {
		sbx__dt_tb_error(r, rc < 0 ? sbx__srv_http_status(rc) : 400, NULL, "find in %s: %s", path,
				 rc < 0 ? (e && e->msg ? e->msg : sbx_error_code_name(rc))
					: (res.err && *res.err ? res.err : "grep failed"));
		sbx_error_free(e);
		sbx_exec_result_free(&res);
		return;
	}
	json_t *a = json_array();
	char *save = NULL;
	for (char *l = res.out ? strtok_r(res.out, "\n", &save) : NULL; l && json_array_size(a) < SEARCH_RESULTS_MAX;
	     l = strtok_r(NULL, "\n", &save)) {
		/* file:line:content; the first ":<digits>:" splits it */
		for (char *c = strchr(l, ':'); c; c = strchr(c + 1, ':')) {
			size_t d = strspn(c + 1, "0123456789");
			if (d == 0 || c[1 + d] != ':')
				continue;
			*c = '\0';
			int line = (int)strtol(c + 1, NULL, 10);
			json_t *o = json_pack("{s:o,s:i,s:o}", "file", sbx__dt_text(l, strlen(l)), "line", line,
					      "content", sbx__dt_text(c + 2 + d, strlen(c + 2 + d)));
			json_array_append_new(a, o);
			break;
		}
	}
	sbx_exec_result_free(&res);
	sbx__srv_reply_json(r, 200, a);
}

static void search_files(struct srv_req *r, struct srv_sandbox *s)
{
	const char *pattern;
	_cleanup_free_ char *path = params(r, s, &pattern);
	if (!path)
		return;
	const char *argv[] = { "find", path, "-name", pattern, NULL };
	sbx_exec_result res = { 0 };
	sbx_error *e = NULL;
	int rc = run(&res, s, argv, &e);
	if (rc < 0) {
		sbx__dt_tb_error(r, sbx__srv_http_status(rc), NULL, "search %s: %s", path,
				 e && e->msg ? e->msg : sbx_error_code_name(rc));
		sbx_error_free(e);
		return;
	}
	json_t *a = json_array();
	char *save = NULL;
	for (char *l = res.out ? strtok_r(res.out, "\n", &save) : NULL; l && json_array_size(a) < SEARCH_RESULTS_MAX;
	     l = strtok_r(NULL, "\n", &save))
		json_array_append_new(a, sbx__dt_text(l, strlen(l)));
	sbx_exec_result_free(&res);
	sbx__srv_reply_json(r, 200, json_pack("{s:o}", "files", a));
}

/* data with every occurrence of pat replaced by with; owned, *len updated. */
static char *replace_all(const char *data, size_t *len, const char *pat, const char *with, size_t *count)
{
	size_t pl = strlen(pat), wl = strlen(with);
	sbx_buf b;
	sbx__buf_init(&b, REPLACE_FILE_MAX * 2);
	*count = 0;
	const char *p = data, *end = data + *len;
	for (const char *hit; (hit = memmem(p, (size_t)(end - p), pat, pl)); p = hit + pl) {
		if (sbx__buf_append(&b, p, (size_t)(hit - p)) < 0 || sbx__buf_append(&b, with, wl) < 0)
			goto big;
		(*count)++;
	}
	if (sbx__buf_append(&b, p, (size_t)(end - p)) < 0)
		goto big;
	return sbx__buf_steal(&b, len);
big:
	sbx__buf_free(&b);
	return NULL;
}

static json_t *replace_one(struct srv_sandbox *s, const char *file, const char *pat, const char *with)
{
	_cleanup_free_ char *path = sbx__dt_path(s, file);
	char *data = NULL;
	size_t len = 0, count = 0;
	sbx_error *e = NULL;
	int rc = sbx__srv_read_small(&data, &len, s, path, REPLACE_FILE_MAX, &e);
	_cleanup_free_ char *out = rc == 0 ? replace_all(data, &len, pat, with, &count) : NULL;
	free(data);
	if (rc == 0 && !out)
		rc = sbx_error_set(&e, -EFBIG, "%s would grow past %u bytes", path, REPLACE_FILE_MAX * 2);
	if (rc == 0 && count > 0 && (rc = sbx__srv_op_begin(s, &e)) == 0) {
		sbx_file_info fi = { 0 };
		unsigned mode = sbx_sandbox_stat(&fi, s->sb, path, NULL) == 0 ? fi.mode & 07777 : 0644;
		sbx_file_info_clear(&fi);
		rc = sbx_sandbox_write_file(s->sb, path, out, len, mode, &e);
		sbx__srv_op_end(s);
	}
	json_t *o = json_pack("{s:s,s:b}", "file", file, "success", rc == 0);
	if (rc < 0)
		json_object_set_new(o, "error", json_string(e && e->msg ? e->msg : sbx_error_code_name(rc)));
	sbx_error_free(e);
	return o;
}

static void replace_in_files(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *b = sbx__dt_json_body(r);
	if (!b)
		return;
	json_t *files = json_object_get(b, "files"), *f;
	const char *pat = json_string_value(json_object_get(b, "pattern"));
	const char *with = json_string_value(json_object_get(b, "newValue"));
	size_t i;
	int ok = json_is_array(files) && json_array_size(files) <= REPLACE_FILES_MAX && pat && *pat && with;
	json_array_foreach(files, i, f)
		ok = ok && json_is_string(f) && *json_string_value(f);
	if (!ok) {
		sbx__dt_tb_error(r, 400, NULL, "files (up to %u paths), pattern (non-empty) and newValue are required",
				 REPLACE_FILES_MAX);
		json_decref(b);
		return;
	}
	json_t *a = json_array();
	json_array_foreach(files, i, f)
		json_array_append_new(a, replace_one(s, json_string_value(f), pat, with));
	json_decref(b);
	sbx__srv_reply_json(r, 200, a);
}

int sbx__dt_files_search(struct srv_req *r, struct srv_sandbox *s, const char *op)
{
	const char *m = r->method;
	if (strcmp(op, "find") == 0 && strcmp(m, "GET") == 0)
		find_in_files(r, s);
	else if (strcmp(op, "search") == 0 && strcmp(m, "GET") == 0)
		search_files(r, s);
	else if (strcmp(op, "replace") == 0 && strcmp(m, "POST") == 0)
		replace_in_files(r, s);
	else
		return 0;
	return 1;
}
