/* SPDX-License-Identifier: MIT */
/*
 * The toolbox's process/execute: the command runs under /bin/sh -c with
 * stderr joined to stdout (Daytona returns one merged `result`), in the
 * sandbox's working directory unless `cwd` says otherwise, with `envs` on
 * top of the sandbox's environment. `timeout` (seconds, > 0) kills the
 * whole process tree and answers 408 without the partial output, as
 * Daytona's daemon does; without it the command may run as long as it likes.
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

#define EXEC_OUTPUT_MAX (16u << 20)

char *sbx__dt_workdir(struct srv_sandbox *s)
{
	return s->workdir ? xstrdup(s->workdir) : sbx__srv_user_home(s, s->user);
}

static void execute_in(struct srv_req *r, struct srv_sandbox *s, json_t *b)
{
	json_t *cmd = json_object_get(b, "command"), *cwd = json_object_get(b, "cwd");
	json_t *envs = json_object_get(b, "envs"), *to = json_object_get(b, "timeout");
	const char *k;
	json_t *v;
	int envs_ok = !envs || json_is_null(envs) || json_is_object(envs);
	if (envs_ok && json_is_object(envs))
		json_object_foreach(envs, k, v)
			envs_ok = envs_ok && json_is_string(v) && *k && !strchr(k, '=');
	if (!json_is_string(cmd) || (cwd && !json_is_null(cwd) && !json_is_string(cwd)) || !envs_ok ||
	    (to && !json_is_null(to) && (!json_is_integer(to) || json_integer_value(to) < 0))) {
		sbx__dt_tb_error(r, 400, NULL, "invalid request: command must be a string, cwd a string, envs a map "
					       "of strings, timeout a non-negative integer (seconds)");
		return;
	}
	char **env = NULL;
	if (json_is_object(envs))
		json_object_foreach(envs, k, v) {
			char *l = xasprintf("%s=%s", k, json_string_value(v));
			sbx__strv_push(&env, l);
			free(l);
		}
	_cleanup_free_ char *dir = json_is_string(cwd) && *json_string_value(cwd) ? xstrdup(json_string_value(cwd))
										  : sbx__dt_workdir(s);
	/* one stream, in the order written, as Daytona merges them */
	_cleanup_free_ char *shell = xasprintf("exec 2>&1\n%s", json_string_value(cmd));
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = shell;
	o.env = (const char *const *)env;
	o.cwd = dir;
	o.user = s->user;
	o.timeout_s = to && json_is_integer(to) ? (double)json_integer_value(to) : 0;
	o.output_max = EXEC_OUTPUT_MAX;
	sbx_exec_result res = { 0 };
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx_sandbox_exec(&res, s->sb, &o, &e);
		sbx__srv_op_end(s);
	}
	sbx__strv_free(env);
	if (rc < 0) {
		sbx__dt_tb_error(r, rc == -ESRCH ? 404 : sbx__srv_http_status(rc), NULL, "execute: %s",
				 e && e->msg ? e->msg : sbx_error_code_name(rc));
		sbx_error_free(e);
	} else if (res.timed_out) {
		sbx__dt_tb_error(r, 408, "PROCESS_EXECUTION_TIMEOUT", "command timed out after %lld seconds",
				 (long long)json_integer_value(to));
	} else {
		json_t *out = sbx__dt_text(res.out ? res.out : "", res.out_len);
		sbx__srv_reply_json(r, 200, json_pack("{s:i,s:o}", "exitCode", res.exit_code, "result", out));
	}
	sbx_exec_result_free(&res);
}

void sbx__dt_execute(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *b = sbx__dt_json_body(r);
	if (!b)
		return;
	execute_in(r, s, b);
	json_decref(b);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
	size_t n = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
	if (n == 0 || n > left || (n == 2 && p[0] < 0xc2))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0)))
		return 0;
	if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || p[0] > 0xf4 || (p[0] == 0xf4 && p[1] >= 0x90)))
		return 0;
	return n;
}

json_t *sbx__dt_text(const char *data, size_t len)
{
	json_t *j = json_stringn(data, len);
	if (j)
		return j;
	/* not UTF-8: each bad byte becomes U+FFFD (NULs already passed, as \u0000) */
	sbx_buf b;
	sbx__buf_init(&b, len * 3 + 16);
	const unsigned char *p = (const unsigned char *)data;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(p + i, len - i);
		if (n)
			sbx__buf_append(&b, data + i, n);
		else
			sbx__buf_append(&b, "\xef\xbf\xbd", 3);
		i += n ? n : 1;
	}
	j = json_stringn(b.data ? b.data : "", b.len);
	sbx__buf_free(&b);
	return j ? j : json_string("");
}
