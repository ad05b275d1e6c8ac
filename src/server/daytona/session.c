/* SPDX-License-Identifier: MIT */
/*
 * Toolbox sessions: a session is one long-lived shell (bash, else sh) in the
 * sandbox reading commands from a pipe, so `cd`, variables and functions
 * carry from one command to the next, as in Daytona's daemon. Each command
 * is written to that shell as
 *   { eval '<command>'
 *   } >D/<id>.out 2>D/<id>.err; echo $? >D/<id>.x; mv D/<id>.x D/<id>.exit
 * (D = /tmp/.sbx-daytona/<session>), so stdout and stderr stay apart and the
 * exit code appears atomically; commands run one after another. A command
 * reads the session's stdin, which is what .../input writes. Logs and exit
 * codes are read back through the server's confined reads (sbops.c). A
 * synchronous exec waits for the exit file; an async one returns its id.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/process.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona.h"

#define SESSION_ROOT "/tmp/.sbx-daytona"
#define SESSIONS_MAX 64
#define COMMANDS_MAX 4096
#define INPUT_WAIT_S 5.0

struct dt_cmd {
	char id[33];
	char *command;
	int done, exit_code;
	struct dt_cmd *next;
};

struct dt_session {
	char *id;
	sbx_process *p;
	pthread_mutex_t lk;          /* stdin and cmds */
	struct dt_cmd *cmds;         /* newest first */
	unsigned ncmds;
	int refs, removed;           /* guarded by the ext's lk */
	struct dt_session *next;
};

static void session_free(struct dt_session *ss)
{
	while (ss->cmds) {
		struct dt_cmd *c = ss->cmds;
		ss->cmds = c->next;
		free(c->command);
		free(c);
	}
	sbx_process_free(ss->p); /* kills the shell and what it runs */
	pthread_mutex_destroy(&ss->lk);
	free(ss->id);
	free(ss);
}

void sbx__dt_sessions_free(struct dt_session *v)
{
	while (v) {
		struct dt_session *n = v->next;
		session_free(v);
		v = n;
	}
}

static int valid_id(const char *id)
{
	size_t n = strlen(id);
	return n > 0 && n <= 64 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n &&
	       strcmp(id, ".") != 0 && strcmp(id, "..") != 0;
}

/* Writes all of data to the shell's stdin within INPUT_WAIT_S (a command
 * that does not read its input must not hold the server). ss->lk held. */
static int write_in(struct dt_session *ss, const char *data, size_t len)
{
	int fd = sbx_process_stdin_fd(ss->p);
	if (fd < 0)
		return -EPIPE;
	double end = sbx__now_mono() + INPUT_WAIT_S;
	while (len) {
		ssize_t w = write(fd, data, len);
		if (w > 0) {
			data += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -errno;
		double left = end - sbx__now_mono();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		poll(&pfd, 1, (int)(left * 1000) + 1);
	}
	return 0;
}

static struct dt_session *find_locked(struct dt_ext *x, const char *id)
{
	for (struct dt_session *ss = x->sessions; ss; ss = ss->next)
		if (strcmp(ss->id, id) == 0)
			return ss;
	return NULL;
}

static void create_session(struct srv_req *r, struct srv_sandbox *s, struct dt_ext *x)
{
	json_t *b = sbx__dt_json_body(r);
	if (!b)
		return;
	const char *id = json_string_value(json_object_get(b, "sessionId"));
	if (!id || !valid_id(id)) {
		sbx__dt_tb_error(r, 400, NULL, "sessionId is required: 1..64 characters of [A-Za-z0-9._-]");
		json_decref(b);
		return;
	}
	pthread_mutex_lock(&x->lk);
	int exists = find_locked(x, id) != NULL;
	unsigned n = 0;
	for (struct dt_session *ss = x->sessions; ss; ss = ss->next)
		n++;
	pthread_mutex_unlock(&x->lk);
	if (exists || n >= SESSIONS_MAX) {
		if (exists)
			sbx__dt_tb_error(r, 409, NULL, "session %s already exists", id);
		else
			sbx__dt_tb_error(r, 429, NULL, "too many sessions (%u): delete one first", SESSIONS_MAX);
		json_decref(b);
		return;
	}
	static const char *const argv[] = { "/bin/sh", "-c",
		"if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc; else exec sh; fi", NULL };
	_cleanup_free_ char *dir = sbx__dt_workdir(s);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.argv = argv;
	o.cwd = dir;
	o.user = s->user;
	struct dt_session *ss = xcalloc(1, sizeof(*ss));
	pthread_mutex_init(&ss->lk, NULL);
	ss->id = xstrdup(id);
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx_process_start(&ss->p, s->sb, &o, 1, &e);
		sbx__srv_op_end(s);
	}
	if (rc == 0) {
		int fd = sbx_process_stdin_fd(ss->p);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		/* the shell's own output is never read: nothing may fill its pipes */
		_cleanup_free_ char *init = xasprintf("exec >/dev/null 2>&1; umask 022; mkdir -p %s/%s\n", SESSION_ROOT, id);
		rc = write_in(ss, init, strlen(init));
		if (rc < 0)
			sbx_error_set(&e, rc, "session %s: the shell does not take input", id);
	}
	if (rc < 0) {
		sbx__dt_tb_error(r, sbx__srv_http_status(rc), NULL, "create session %s: %s", id,
				 e && e->msg ? e->msg : sbx_error_code_name(rc));
		sbx_error_free(e);
		session_free(ss);
		json_decref(b);
		return;
	}
	pthread_mutex_lock(&x->lk);
	if (find_locked(x, id)) { /* lost a race with the same id */
		pthread_mutex_unlock(&x->lk);
		session_free(ss);
		sbx__dt_tb_error(r, 409, NULL, "session %s already exists", id);
		json_decref(b);
		return;
	}
	ss->next = x->sessions;
	x->sessions = ss;
	pthread_mutex_unlock(&x->lk);
	sbx__srv_reply_empty(r, 201);
	json_decref(b);
}

/* Reads D/<cmd>.<ext> of a session: owned text, NULL when absent. */
static char *read_part(struct srv_sandbox *s, const char *sid, const char *cid, const char *ext, size_t *len)
{
	_cleanup_free_ char *path = xasprintf("%s/%s/%s.%s", SESSION_ROOT, sid, cid, ext);
	char *data = NULL;
	*len = 0;
	if (sbx__srv_read_small(&data, len, s, path, DT_LOG_MAX, NULL) < 0)
		return NULL;
	return data;
}

/* Refreshes c's exit code from its exit file; ss->lk held. */
static void poll_cmd(struct srv_sandbox *s, struct dt_session *ss, struct dt_cmd *c)
{
	if (c->done)
		return;
	size_t len;
	_cleanup_free_ char *x = read_part(s, ss->id, c->id, "exit", &len);
	int code;
	if (x && sscanf(x, "%d", &code) == 1) {
		c->done = 1;
		c->exit_code = code;
	}
}

static json_t *cmd_json(struct dt_cmd *c)
{
	json_t *o = json_pack("{s:s,s:s}", "id", c->id, "command", c->command);
	if (c->done)
		json_object_set_new(o, "exitCode", json_integer(c->exit_code));
	return o;
}

static json_t *session_json(struct srv_sandbox *s, struct dt_session *ss)
{
	json_t *cmds = json_array();
	pthread_mutex_lock(&ss->lk);
	for (struct dt_cmd *c = ss->cmds; c; c = c->next) {
		poll_cmd(s, ss, c);
		json_array_insert_new(cmds, 0, cmd_json(c));
	}
	pthread_mutex_unlock(&ss->lk);
	return json_pack("{s:s,s:o}", "sessionId", ss->id, "commands", cmds);
}

static json_t *logs_json(struct srv_sandbox *s, struct dt_session *ss, struct dt_cmd *c, int with_exit)
{
	size_t ol, el;
	_cleanup_free_ char *out = read_part(s, ss->id, c->id, "out", &ol);
	_cleanup_free_ char *err = read_part(s, ss->id, c->id, "err", &el);
	sbx_buf both;
	sbx__buf_init(&both, 2 * (size_t)DT_LOG_MAX + 1);
	sbx__buf_append(&both, out ? out : "", ol);
	sbx__buf_append(&both, err ? err : "", el);
	json_t *o = json_pack("{s:o,s:o,s:o}", "output", sbx__dt_text(both.data ? both.data : "", both.len), "stdout",
			      sbx__dt_text(out ? out : "", ol), "stderr", sbx__dt_text(err ? err : "", el));
	sbx__buf_free(&both);
	if (with_exit) {
		json_object_set_new(o, "cmdId", json_string(c->id));
		if (c->done)
			json_object_set_new(o, "exitCode", json_integer(c->exit_code));
	}
	return o;
}

/* Single-quoted for the shell: ' becomes '\'' */
static char *shell_quote(const char *s)
{
	sbx_buf b;
	sbx__buf_init(&b, strlen(s) * 4 + 3);
	sbx__buf_append(&b, "'", 1);
	for (const char *p = s; *p; p++)
		if (*p == '\'')
			sbx__buf_append(&b, "'\\''", 4);
		else
			sbx__buf_append(&b, p, 1);
	sbx__buf_append(&b, "'", 1);
	return sbx__buf_steal(&b, NULL);
}

static void exec_cmd(struct srv_req *r, struct srv_sandbox *s, struct dt_session *ss)
{
	json_t *b = sbx__dt_json_body(r);
	if (!b)
		return;
	json_t *cmd = json_object_get(b, "command");
	int async = json_is_true(json_object_get(b, "runAsync")) || json_is_true(json_object_get(b, "async"));
	if (!json_is_string(cmd) || !*json_string_value(cmd)) {
		sbx__dt_tb_error(r, 400, NULL, "command is required (a non-empty string)");
		json_decref(b);
		return;
	}
	struct dt_cmd *c = xcalloc(1, sizeof(*c));
	char tok[65];
	sbx__srv_auth_new_token(tok);
	snprintf(c->id, sizeof(c->id), "%.32s", tok);
	c->command = xstrdup(json_string_value(cmd));
	_cleanup_free_ char *q = shell_quote(c->command);
	_cleanup_free_ char *line = xasprintf("{ eval %s\n} >%s/%s/%s.out 2>%s/%s/%s.err; echo $? >%s/%s/%s.x; "
					      "mv -f %s/%s/%s.x %s/%s/%s.exit\n",
					      q, SESSION_ROOT, ss->id, c->id, SESSION_ROOT, ss->id, c->id, SESSION_ROOT,
					      ss->id, c->id, SESSION_ROOT, ss->id, c->id, SESSION_ROOT, ss->id, c->id);
	json_decref(b);
	pthread_mutex_lock(&ss->lk);
	int rc = ss->ncmds >= COMMANDS_MAX ? -E2BIG : write_in(ss, line, strlen(line));
	if (rc == 0) {
		c->next = ss->cmds;
		ss->cmds = c;
		ss->ncmds++;
	}
	pthread_mutex_unlock(&ss->lk);
	if (rc < 0) {
		free(c->command);
		free(c);
		if (rc == -E2BIG)
			sbx__dt_tb_error(r, 429, NULL, "session %s has run %u commands: delete it and start another",
					 ss->id, COMMANDS_MAX);
		else
			sbx__dt_tb_error(r, 409, "SESSION_ENDED",
					 "session %s does not take commands (its shell ended or is busy with input)", ss->id);
		return;
	}
	if (async) {
		sbx__srv_reply_json(r, 202, json_pack("{s:s}", "cmdId", c->id));
		return;
	}
	/* synchronous: until the exit file appears or the shell is gone */
	for (;;) {
		pthread_mutex_lock(&ss->lk);
		poll_cmd(s, ss, c);
		int done = c->done, st = 0, to = 0;
		int gone = !done && sbx_process_poll(ss->p, &st, &to, 0, NULL) != 0;
		pthread_mutex_unlock(&ss->lk);
		if (done)
			break;
		if (gone || r->srv->stopping || sbx__srv_op_begin(s, NULL) < 0) {
			sbx__dt_tb_error(r, 409, "SESSION_ENDED", "session %s ended before command %s finished", ss->id, c->id);
			return;
		}
		sbx__srv_op_end(s);
		usleep(20000);
	}
	pthread_mutex_lock(&ss->lk);
	json_t *o = logs_json(s, ss, c, 1);
	pthread_mutex_unlock(&ss->lk);
	sbx__srv_reply_json(r, 200, o);
}

static void send_input(struct srv_req *r, struct dt_session *ss, struct dt_cmd *c)
{
	json_t *b = sbx__dt_json_body(r);
	if (!b)
		return;
	json_t *d = json_object_get(b, "data");
	if (!json_is_string(d)) {
		sbx__dt_tb_error(r, 400, NULL, "data is required (a string)");
		json_decref(b);
		return;
	}
	pthread_mutex_lock(&ss->lk);
	int rc = c->done ? -EALREADY : write_in(ss, json_string_value(d), json_string_length(d));
	pthread_mutex_unlock(&ss->lk);
	json_decref(b);
	if (rc == -EALREADY)
		sbx__dt_tb_error(r, 409, "COMMAND_ALREADY_COMPLETED", "command %s has already completed", c->id);
	else if (rc < 0)
		sbx__dt_tb_error(r, 409, "SESSION_ENDED", "session %s does not take input: %s", ss->id, sbx_error_code_name(rc));
	else
		sbx__srv_reply_empty(r, 200);
}

/* A session with a reference taken (NULL when unknown). */
static struct dt_session *session_get(struct dt_ext *x, const char *id)
{
	pthread_mutex_lock(&x->lk);
	struct dt_session *ss = find_locked(x, id);
	if (ss)
		ss->refs++;
	pthread_mutex_unlock(&x->lk);
	return ss;
}

static void session_put(struct dt_ext *x, struct dt_session *ss)
{
	pthread_mutex_lock(&x->lk);
	int last = --ss->refs == 0 && ss->removed;
	pthread_mutex_unlock(&x->lk);
	if (last)
		session_free(ss);
}

static void delete_session(struct srv_req *r, struct srv_sandbox *s, struct dt_ext *x, const char *id)
{
	pthread_mutex_lock(&x->lk);
	struct dt_session **pp = &x->sessions, *gone = NULL;
	for (; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->id, id) == 0) {
			gone = *pp;
			*pp = gone->next;
			gone->removed = 1;
			break;
		}
	int now = gone && gone->refs == 0;
	pthread_mutex_unlock(&x->lk);
	if (!gone) {
		sbx__dt_tb_error(r, 404, "PROCESS_NOT_FOUND", "session %s not found", id);
		return;
	}
	if (now)
		session_free(gone);
	else /* a call still uses it: the last one frees it; its shell dies now */
		sbx_process_signal(gone->p, SIGKILL, NULL);
	/* its logs would otherwise fill the sandbox's disk, one exec at a time */
	_cleanup_free_ char *dir = xasprintf("%s/%s", SESSION_ROOT, id);
	if (sbx__srv_op_begin(s, NULL) == 0) {
		sbx_sandbox_remove(s->sb, dir, 1, NULL);
		sbx__srv_op_end(s);
	}
	sbx__srv_reply_empty(r, 204);
}

static void command_route(struct srv_req *r, struct srv_sandbox *s, struct dt_session *ss, char **seg, size_t n)
{
	const char *m = r->method;
	if (n == 1 && strcmp(m, "GET") == 0) {
		sbx__srv_reply_json(r, 200, session_json(s, ss));
		return;
	}
	if (n == 2 && strcmp(m, "POST") == 0 && strcmp(seg[1], "exec") == 0) {
		exec_cmd(r, s, ss);
		return;
	}
	if (n < 3 || strcmp(seg[1], "command") != 0) {
		sbx__dt_tb_error(r, 404, NULL, "toolbox route %s %s is not implemented by sbx serve", m, r->url);
		return;
	}
	struct dt_cmd *c;
	pthread_mutex_lock(&ss->lk);
	for (c = ss->cmds; c && strcmp(c->id, seg[2]) != 0; c = c->next)
		;
	pthread_mutex_unlock(&ss->lk);
	if (!c) { /* commands live as long as their session */
		sbx__dt_tb_error(r, 404, "PROCESS_NOT_FOUND", "command %s not found in session %s", seg[2], ss->id);
		return;
	}
	if (n == 3 && strcmp(m, "GET") == 0) {
		pthread_mutex_lock(&ss->lk);
		poll_cmd(s, ss, c);
		json_t *o = cmd_json(c);
		pthread_mutex_unlock(&ss->lk);
		sbx__srv_reply_json(r, 200, o);
	} else if (n == 4 && strcmp(m, "GET") == 0 && strcmp(seg[3], "logs") == 0) {
		const char *follow = sbx__srv_query(r, "follow");
		if (follow && strcmp(follow, "true") == 0) {
			sbx__dt_tb_error(r, 400, NULL, "follow=true needs a WebSocket, which sbx serve does not offer: "
						       "poll the logs without follow");
			return;
		}
		pthread_mutex_lock(&ss->lk);
		json_t *o = logs_json(s, ss, c, 0);
		pthread_mutex_unlock(&ss->lk);
		sbx__srv_reply_json(r, 200, o);
	} else if (n == 4 && strcmp(m, "POST") == 0 && strcmp(seg[3], "input") == 0) {
		send_input(r, ss, c);
	} else {
		sbx__dt_tb_error(r, 404, NULL, "toolbox route %s %s is not implemented by sbx serve", m, r->url);
	}
}

/* seg after "process/session" */
void sbx__dt_session(struct srv_req *r, struct srv_sandbox *s, char **seg, size_t n)
{
	struct dt_ext *x = sbx__dt_ext(s);
	const char *m = r->method;
	if (n == 0 && strcmp(m, "POST") == 0) {
		create_session(r, s, x);
	} else if (n == 0 && strcmp(m, "GET") == 0) {
		/* references first: reading logs takes srv->lock, which is taken
		 * before x->lk elsewhere (the state row), never after it */
		struct dt_session *v[SESSIONS_MAX];
		size_t k = 0;
		pthread_mutex_lock(&x->lk);
		for (struct dt_session *ss = x->sessions; ss && k < SESSIONS_MAX; ss = ss->next, k++) {
			ss->refs++;
			v[k] = ss;
		}
		pthread_mutex_unlock(&x->lk);
		json_t *a = json_array();
		for (size_t i = k; i-- > 0;) {
			json_array_append_new(a, session_json(s, v[i]));
			session_put(x, v[i]);
		}
		sbx__srv_reply_json(r, 200, a);
	} else if (n == 0) {
		sbx__dt_tb_error(r, 405, NULL, "method %s not allowed on /process/session", m);
	} else if (n == 1 && strcmp(m, "DELETE") == 0) {
		delete_session(r, s, x, seg[0]);
	} else {
		struct dt_session *ss = session_get(x, seg[0]);
		if (!ss) {
			sbx__dt_tb_error(r, 404, "PROCESS_NOT_FOUND", "session %s not found", seg[0]);
			return;
		}
		command_route(r, s, ss, seg, n);
		session_put(x, ss);
	}
}
