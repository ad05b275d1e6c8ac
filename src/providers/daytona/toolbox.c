/* SPDX-License-Identifier: MIT */
/*
 * The toolbox daemon of a Daytona sandbox (<toolboxProxyUrl>/<id>/...).
 * exec runs in a session of its own, asynchronously, and polls the command:
 * the session keeps stdout and stderr apart (process/execute merges them),
 * and on a timeout the client kills the command's tree itself and still
 * reads the partial output (process/execute answers 408 without it). A
 * wrapper script carries cwd, env, user and stdin (a file uploaded first).
 * Files go through bulk-upload / bulk-download (multipart).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/http.h"
#include "../../util/str.h"
#include "daytona_int.h"

#define TB_TIMEOUT_MS 600000L

char *sbx__dtn_shq(const char *s)
{
	sbx_buf b;
	sbx__buf_init(&b, 4 * strlen(s) + 8);
	sbx__buf_append(&b, "'", 1);
	for (; *s; s++)
		if (*s == '\'')
			sbx__buf_append(&b, "'\\''", 4);
		else
			sbx__buf_append(&b, s, 1);
	sbx__buf_append(&b, "'", 1);
	return sbx__buf_steal(&b, NULL);
}

static void add_exports(sbx_buf *b, char *const *env)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			continue;
		_cleanup_free_ char *q = sbx__dtn_shq(eq + 1);
		sbx__buf_printf(b, "export %.*s=%s; ", (int)(eq - env[i]), env[i], q);
	}
}

char *sbx__dtn_wrap(const sbx_exec_opts *o, const char *default_user, const char *default_cwd,
		    char *const *sb_env, const char *stdin_path, const char *pid_path)
{
	sbx_buf in;
	sbx__buf_init(&in, 64u << 20);
	add_exports(&in, sb_env);
	add_exports(&in, (char *const *)o->env);
	const char *cwd = o->cwd ? o->cwd : default_cwd;
	if (cwd) {
		_cleanup_free_ char *q = sbx__dtn_shq(cwd);
		sbx__buf_printf(&in, "cd %s || exit 1; ", q);
	}
	if (o->argv) {
		sbx__buf_printf(&in, "exec");
		for (size_t i = 0; o->argv[i]; i++) {
			_cleanup_free_ char *q = sbx__dtn_shq(o->argv[i]);
			sbx__buf_printf(&in, " %s", q);
		}
	} else {
		_cleanup_free_ char *q = sbx__dtn_shq(o->shell ? o->shell : "");
		sbx__buf_printf(&in, "exec /bin/sh -c %s", q);
	}
	_cleanup_free_ char *inner = sbx__buf_steal(&in, NULL);
	sbx_buf w;
	sbx__buf_init(&w, 64u << 20);
	_cleanup_free_ char *pq = sbx__dtn_shq(pid_path);
	sbx__buf_printf(&w, "echo $$ > %s; ", pq);
	if (stdin_path) {
		_cleanup_free_ char *sq = sbx__dtn_shq(stdin_path);
		sbx__buf_printf(&w, "exec 0<%s; rm -f %s; ", sq, sq);
	} else {
		sbx__buf_printf(&w, "exec 0</dev/null; ");
	}
	const char *user = o->user ? o->user : default_user;
	_cleanup_free_ char *iq = sbx__dtn_shq(inner);
	if (user) {
		/* a numeric user is named through /etc/passwd (su and sudo take names);
		 * root switches with su, a non-root toolbox (Daytona Cloud's `daytona`)
		 * with sudo -n */
		_cleanup_free_ char *uq = sbx__dtn_shq(user);
		sbx__buf_printf(&w,
				"u=%s; case $u in *[!0-9]*) ;; *) n=$(sed -n \"s/^\\([^:]*\\):[^:]*:$u:.*/\\1/p\" "
				"/etc/passwd | head -n 1); [ -n \"$n\" ] && u=$n;; esac; "
				"if [ \"$u\" = \"$(id -un)\" ]; then exec /bin/sh -c %s; "
				"elif [ \"$(id -u)\" = 0 ]; then exec su -s /bin/sh \"$u\" -c %s; "
				"else exec sudo -n -u \"$u\" /bin/sh -c %s; fi",
				uq, iq, iq, iq);
	} else {
		sbx__buf_printf(&w, "exec /bin/sh -c %s", iq);
	}
	return sbx__buf_steal(&w, NULL);
}

static double now_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int tb_call(json_t **out, struct dtn_sb *sb, const char *method, const char *rel, json_t *body,
		   const char *what, sbx_error **err)
{
	_cleanup_free_ char *url = xasprintf("%s%s", sb->tb, rel);
	return sbx__dtn_call(out, sb->ctx, method, url, body, TB_TIMEOUT_MS, what, err);
}

/* process/execute (stderr merged): for the provider's own chores, as the image user. */
static int tb_sh(struct dtn_sb *sb, const char *cmd, sbx_error **err)
{
	json_t *body = json_pack("{s:s, s:i}", "command", cmd, "timeout", 600);
	json_t *j = NULL;
	int r = tb_call(&j, sb, "POST", "/process/execute", body, "execute", err);
	json_decref(body);
	if (r == 0 && json_integer_value(json_object_get(j, "exitCode")) != 0)
		r = sbx_error_set(err, -EIO, "daytona: sandbox %s: '%s' failed: %s", sb->id, cmd,
				  json_string_value(json_object_get(j, "result")) ?: "");
	json_decref(j);
	return r;
}

/* Kills the tree under the pid in PIDFILE: stopped top-down, then killed. */
static void kill_tree(struct dtn_sb *sb, const char *pidfile)
{
	_cleanup_free_ char *cmd = xasprintf(
		"k(){ kill -STOP $1 2>/dev/null; for c in $(cat /proc/$1/task/*/children 2>/dev/null); do k $c; done; "
		"kill -KILL $1 2>/dev/null; }; p=$(cat %s 2>/dev/null) && [ -n \"$p\" ] && k $p; rm -f %s; true",
		pidfile, pidfile);
	tb_sh(sb, cmd, NULL);
}

static int read_one(char **dst, size_t *len, struct dtn_sb *sb, const char *path, size_t max, sbx_error **err)
{
	void *d = NULL;
	size_t n = 0;
	sbx_error *e = NULL;
	int r = sbx__dtn_read(&d, &n, sb, path, DTN_BODY_MAX * 8, &e);
	if (r == -ENOENT) /* the command never started its shell */
		r = 0, d = NULL, n = 0;
	if (r < 0) {
		if (err && !*err)
			*err = steal_ptr(&e);
		sbx_error_free(e);
		return r;
	}
	sbx_error_free(e);
	if (n > max)
		n = max;
	*dst = d ? d : xstrdup("");
	(*dst)[n] = '\0';
	*len = n;
	return 0;
}

static int read_output(sbx_exec_result *out, struct dtn_sb *sb, const char *outf, const char *errf,
		       const sbx_exec_opts *o, sbx_error **err)
{
	size_t max = o->output_max ? o->output_max : (16u << 20);
	int r = read_one(&out->out, &out->out_len, sb, outf, max, err);
	if (r == 0)
		r = read_one(&out->err, &out->err_len, sb, errf, max, err);
	if (r == 0 && o->on_output) {
		if (out->out_len)
			o->on_output(1, out->out, out->out_len, o->payload);
		if (out->err_len)
			o->on_output(2, out->err, out->err_len, o->payload);
	}
	return r;
}

/* process/execute: one call, stderr merged into stdout, the deadline kept by
 * `timeout -s KILL N` inside and the server's timeout a little later (its
 * 408 drops the output; the wrapper's kill keeps it). */
static int exec_once(sbx_exec_result *out, struct dtn_sb *sb, const sbx_exec_opts *o, const char *inf,
		     const char *pidf, sbx_error **err)
{
	_cleanup_free_ char *wrap = sbx__dtn_wrap(o, sb->user, sb->workdir, sb->env, inf, pidf);
	_cleanup_free_ char *wq = sbx__dtn_shq(wrap);
	unsigned t = o->timeout_s > 0 ? (unsigned)(o->timeout_s + 0.999) : 0;
	_cleanup_free_ char *cmd = t ? xasprintf("timeout -s KILL %u /bin/sh -c %s 2>&1", t, wq)
				     : xasprintf("/bin/sh -c %s 2>&1", wq);
	json_t *body = json_pack("{s:s}", "command", cmd);
	if (t)
		json_object_set_new(body, "timeout", json_integer(t + 10));
	json_t *j = NULL;
	double t0 = now_mono();
	sbx_error *e = NULL;
	int r = tb_call(&j, sb, "POST", "/process/execute", body, "execute", &e);
	json_decref(body);
	if (r == -ETIMEDOUT && e && e->http_status == 408) {
		sbx_error_free(e);
		out->out = xstrdup("");
		out->err = xstrdup("");
		out->timed_out = 1, out->exit_code = 137, out->signal = 9;
		return 0;
	}
	if (r < 0) {
		if (err && !*err)
			*err = steal_ptr(&e);
		sbx_error_free(e);
		return r;
	}
	size_t max = o->output_max ? o->output_max : (16u << 20);
	const char *res = json_string_value(json_object_get(j, "result"));
	size_t n = res ? strlen(res) : 0;
	out->out = xstrndup(res ? res : "", n > max ? max : n);
	out->out_len = strlen(out->out);
	out->err = xstrdup("");
	out->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
	json_decref(j);
	if (t && (out->exit_code == 137 || out->exit_code == 124) && now_mono() - t0 >= o->timeout_s) {
		out->timed_out = 1, out->exit_code = 137, out->signal = 9;
		kill_tree(sb, pidf); /* what timeout's KILL of the shell left running */
	}
	if (o->on_output && out->out_len)
		o->on_output(1, out->out, out->out_len, o->payload);
	return 0;
}

int sbx__dtn_exec(sbx_exec_result *out, struct dtn_sb *sb, const sbx_exec_opts *o, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	if (o->tty || o->stdout_fd > 0 || o->stderr_fd > 0 || o->stdin_fd > 0)
		return sbx_error_set(err, -ENOSYS, "daytona: exec: terminals and fd redirection are not supported");
	char rnd[17];
	sbx__random_hex(rnd, 16);
	_cleanup_free_ char *sid = xasprintf("sbx-%s", rnd);
	_cleanup_free_ char *pidf = xasprintf("/tmp/.sbx-exec-%s.pid", rnd);
	_cleanup_free_ char *inf = NULL, *crel = NULL;
	_cleanup_free_ char *outf = xasprintf("/tmp/.sbx-exec-%s.out", rnd);
	_cleanup_free_ char *errf = xasprintf("/tmp/.sbx-exec-%s.err", rnd);
	int r, have_exit = 0, timed_out = 0, code = -1;
	if (o->stdin_data) {
		inf = xasprintf("/tmp/.sbx-exec-%s.in", rnd);
		r = sbx__dtn_write(sb, inf, o->stdin_data, o->stdin_len, 0600, err);
		if (r < 0)
			return r;
	}
	if (sb->ctx->exec_execute) {
		r = exec_once(out, sb, o, inf, pidf, err);
		_cleanup_free_ char *rm = xasprintf("rm -f %s %s", pidf, inf ? inf : "");
		tb_sh(sb, rm, NULL);
		return r;
	}
	json_t *sb_body = json_pack("{s:s}", "sessionId", sid);
	r = tb_call(NULL, sb, "POST", "/process/session", sb_body, "create session", err);
	json_decref(sb_body);
	if (r < 0)
		return r;
	_cleanup_free_ char *wrap = sbx__dtn_wrap(o, sb->user, sb->workdir, sb->env, inf, pidf);
	_cleanup_free_ char *wq = sbx__dtn_shq(wrap);
	_cleanup_free_ char *cmd = xasprintf("/bin/sh -c %s >%s 2>%s", wq, outf, errf);
	json_t *body = json_pack("{s:s, s:b}", "command", cmd, "runAsync", 1);
	json_t *j = NULL;
	_cleanup_free_ char *rel = xasprintf("/process/session/%s/exec", sid);
	r = tb_call(&j, sb, "POST", rel, body, "exec", err);
	json_decref(body);
	_cleanup_free_ char *cmd_id = xstrdup(json_string_value(json_object_get(j, "cmdId")) ?: "");
	json_decref(j);
	if (r == 0 && !*cmd_id)
		r = sbx_error_set(err, -EPROTO, "daytona: exec in %s: no cmdId in the reply", sb->id);
	if (r < 0)
		goto out;
	double t0 = now_mono(), wait = 0.01;
	crel = xasprintf("/process/session/%s/command/%s", sid, cmd_id);
	for (;;) {
		j = NULL;
		r = tb_call(&j, sb, "GET", crel, NULL, "poll command", err);
		if (r < 0)
			goto out;
		json_t *ec = json_object_get(j, "exitCode");
		if (json_is_integer(ec)) {
			code = (int)json_integer_value(ec);
			have_exit = 1;
		}
		json_decref(j);
		if (have_exit)
			break;
		if (timed_out && now_mono() - t0 > o->timeout_s + 10)
			break;
		if (!timed_out && o->timeout_s > 0 && now_mono() - t0 >= o->timeout_s) {
			timed_out = 1;
			kill_tree(sb, pidf);
		}
		sleep_s(wait);
		wait = wait < 0.2 ? wait * 2 : 0.2;
	}
	/* the output files, not the session's logs: bytes that are not UTF-8 survive */
	r = read_output(out, sb, outf, errf, o, err);
	if (r < 0)
		goto out;
	out->timed_out = timed_out;
	/* a shell reports a signal as 128+N, as Daytona does: told apart only for our own kill */
	out->exit_code = have_exit ? code : 137;
	if (timed_out && out->exit_code == 0)
		out->exit_code = 137;
	if (timed_out && out->exit_code > 128)
		out->signal = out->exit_code - 128;
out:
	if (r < 0)
		sbx_exec_result_free(out);
	_cleanup_free_ char *drel = xasprintf("/process/session/%s", sid);
	tb_call(NULL, sb, "DELETE", drel, NULL, "delete session", NULL);
	{
		_cleanup_free_ char *rm = xasprintf("rm -f %s %s %s", pidf, outf, errf);
		tb_sh(sb, rm, NULL);
	}
	return r;
}

int sbx__dtn_write(struct dtn_sb *sb, const char *path, const void *data, size_t len, unsigned mode,
		   sbx_error **err)
{
	char bnd[33];
	sbx__random_hex(bnd, 32);
	_cleanup_free_ char *h1 = sbx__dtn_part_head(bnd, "files[0].path", NULL);
	_cleanup_free_ char *h2 = sbx__dtn_part_head(bnd, "files[0].file", "file");
	sbx_buf b;
	sbx__buf_init(&b, len + strlen(path) + 1024);
	sbx__buf_printf(&b, "%s%s\r\n%s", h1, path, h2);
	sbx__buf_append(&b, data, len);
	sbx__buf_printf(&b, "\r\n--%s--\r\n", bnd);
	_cleanup_free_ char *ct = xasprintf("multipart/form-data; boundary=%s", bnd);
	_cleanup_free_ char *url = xasprintf("%s/files/bulk-upload", sb->tb);
	sbx_buf resp;
	sbx__buf_init(&resp, 1u << 20);
	int r = sbx__dtn_raw(&resp, NULL, 0, sb->ctx, "POST", url, ct, b.data, b.len, TB_TIMEOUT_MS,
			     "upload", err);
	sbx__buf_free(&resp);
	sbx__buf_free(&b);
	if (r < 0)
		return sbx_error_prefix(err, r, "daytona: write %s in %s", path, sb->id);
	if (mode && (mode & 07777) != 0644) {
		_cleanup_free_ char *q = sbx__dtn_shq(path);
		_cleanup_free_ char *cmd = xasprintf("chmod %o %s", mode & 07777, q);
		r = tb_sh(sb, cmd, err);
	}
	return r;
}

struct rd {
	const char *path;
	size_t max;
	void *data;
	size_t len;
	int got, rc;
	char *emsg;
};

static int on_part(const char *name, const char *filename, const char *data, size_t n, void *ud)
{
	struct rd *d = ud;
	(void)filename;
	if (!strcmp(name, "error")) {
		json_t *j = json_loadb(data, n, 0, NULL);
		const char *code = json_string_value(json_object_get(j, "code"));
		const char *m = json_string_value(json_object_get(j, "message"));
		d->rc = code && strstr(code, "NOT_FOUND") ? -ENOENT
			: code && strstr(code, "DENIED") ? -EACCES
			: m && strcasestr(m, "directory") ? -EISDIR : -EIO;
		d->emsg = xstrdup(m ? m : code ? code : "error");
		json_decref(j);
		return 0;
	}
	if (strcmp(name, "file") != 0 || d->got)
		return 0;
	d->got = 1;
	if (n > d->max)
		return d->rc = -EFBIG;
	char *p = xmalloc(n + 1);
	memcpy(p, data, n);
	p[n] = '\0';
	d->data = p;
	d->len = n;
	return 0;
}

int sbx__dtn_read(void **data_out, size_t *len_out, struct dtn_sb *sb, const char *path, size_t max,
		  sbx_error **err)
{
	json_t *body = json_pack("{s:[s]}", "paths", path);
	_cleanup_free_ char *payload = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	_cleanup_free_ char *url = xasprintf("%s/files/bulk-download", sb->tb);
	sbx_buf resp;
	sbx__buf_init(&resp, max + (1u << 20));
	char ctype[256];
	int r = sbx__dtn_raw(&resp, ctype, sizeof(ctype), sb->ctx, "POST", url, "application/json", payload,
			     strlen(payload), TB_TIMEOUT_MS, "download", err);
	if (r == -E2BIG) {
		sbx__buf_free(&resp);
		sbx_error_free(err ? *err : NULL);
		if (err)
			*err = NULL;
		return sbx_error_set(err, -EFBIG, "daytona: %s in %s is larger than %zu bytes", path, sb->id, max);
	}
	if (r < 0) {
		sbx__buf_free(&resp);
		return r;
	}
	struct rd d = { .path = path, .max = max };
	int pr = sbx__dtn_multipart_parse(resp.data ? resp.data : "", resp.len, ctype, on_part, &d);
	sbx__buf_free(&resp);
	if (d.rc == -EFBIG)
		r = sbx_error_set(err, -EFBIG, "daytona: %s in %s is larger than %zu bytes", path, sb->id, max);
	else if (d.rc < 0)
		r = sbx_error_set(err, d.rc, "daytona: read %s in %s: %s", path, sb->id, d.emsg);
	else if (pr < 0 || !d.got)
		r = sbx_error_set(err, -EPROTO, "daytona: read %s in %s: no file in the reply", path, sb->id);
	free(d.emsg);
	if (r < 0) {
		free(d.data);
		return r;
	}
	*data_out = d.data;
	*len_out = d.len;
	return 0;
}
