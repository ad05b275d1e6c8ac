/* SPDX-License-Identifier: MIT */
/*
 * envd's process.Process service: Start (server stream: start{pid}, data,
 * keepalives, end, end-stream), Connect (re-attach by pid or tag), List,
 * SendInput, SendSignal, CloseStdin, Update. Every started process has a
 * pump that reads its stdout/stderr and fans the encoded events out to the
 * streams attached at that moment, so a process outlives a dropped stream
 * (background commands) and its pipes never fill up. The pump (envd_pump.c)
 * has no thread: the notifier (loop.c) watches its pipes and status fd
 * and, when one is ready, runs one pump step on a worker (one at a time per
 * process); each step reads once per ready fd and wakes the streams. A
 * read that waits on a pipe's mutex (a splice inside the sandbox holds
 * it) holds that worker only.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "server_int.h"

/* Longest a SendInput waits for room in a process's stdin. */
#define SRV_STDIN_WAIT_MS 30000


struct pstream {
	struct srv_proc *pr;
	struct srv_sub *sub;
	int sent_start;
	double next_ka;
	int is_start;
};

static struct srv_sub *subscribe(struct srv_proc *pr, struct srv_stream *st)
{
	struct srv_sub *sub = xcalloc(1, sizeof(*sub));
	sub->st = st;
	sbx__buf_init(&sub->q, SRV_SUB_MAX);
	pthread_mutex_lock(&pr->lk);
	sub->next = pr->subs;
	pr->subs = sub;
	pr->refs++;
	pthread_mutex_unlock(&pr->lk);
	return sub;
}

/* Never blocks (it runs on the event thread): SRV_FILL_WAIT with the next
 * keepalive or deadline as the time to look again; the pump wakes it. */
static int pstream_fill(struct srv_stream *st)
{
	struct pstream *ps = st->ctx;
	struct srv_proc *pr = ps->pr;
	if (!ps->sent_start) {
		ps->sent_start = 1;
		sbx__srv_envelope(&st->out, 0, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)pr->pid));
		return SRV_FILL_MORE;
	}
	int rc = SRV_FILL_WAIT;
	double now = sbx__now_mono();
	double dl = st->deadline ? st->deadline + (ps->is_start ? 2 : 0) : 0;
	pthread_mutex_lock(&pr->lk);
	if (ps->sub->q.len) {
		sbx__buf_append(&st->out, ps->sub->q.data, ps->sub->q.len);
		ps->sub->q.len = 0;
		ps->next_ka = now + st->keepalive_s;
		rc = SRV_FILL_MORE;
	} else if (ps->sub->overflow) {
		sbx__srv_end_stream(&st->out, "resource_exhausted", "client did not keep up with the output");
		rc = SRV_FILL_DONE;
	} else if (pr->exited) {
		if (pr->sandbox_gone)
			sbx__srv_end_stream(&st->out, "unavailable", "the sandbox was killed while the process ran");
		else if (pr->timed_out)
			sbx__srv_end_stream(&st->out, "deadline_exceeded", "process deadline (Connect-Timeout-Ms) exceeded");
		else
			sbx__srv_end_stream(&st->out, NULL, NULL);
		rc = SRV_FILL_DONE;
	} else if (atomic_load(&st->srv->stopping)) {
		sbx__srv_end_stream(&st->out, "unavailable", "server shutting down");
		rc = SRV_FILL_DONE;
	} else if (dl && now >= dl) {
		sbx__srv_end_stream(&st->out, "deadline_exceeded", "deadline exceeded");
		rc = SRV_FILL_DONE;
	} else if (now >= ps->next_ka) {
		sbx__srv_envelope(&st->out, 0, json_pack("{s:{s:{}}}", "event", "keepalive"));
		ps->next_ka = now + st->keepalive_s;
		rc = SRV_FILL_MORE;
	} else {
		st->wake_at = dl && dl < ps->next_ka ? dl + 0.01 : ps->next_ka;
	}
	pthread_mutex_unlock(&pr->lk);
	return rc;
}

static void pstream_fini(struct srv_stream *st)
{
	struct pstream *ps = st->ctx;
	struct srv_proc *pr = ps->pr;
	pthread_mutex_lock(&pr->lk);
	for (struct srv_sub **pp = &pr->subs; *pp; pp = &(*pp)->next)
		if (*pp == ps->sub) {
			*pp = ps->sub->next;
			break;
		}
	pthread_mutex_unlock(&pr->lk);
	sbx__buf_free(&ps->sub->q);
	free(ps->sub);
	sbx__srv_proc_put(pr);
	free(ps);
}

static void attach(struct srv_req *r, struct srv_proc *pr, double deadline_s, int is_start)
{
	struct pstream *ps = xcalloc(1, sizeof(*ps));
	ps->pr = pr;
	ps->is_start = is_start;
	struct srv_stream *st = xcalloc(1, sizeof(*st));
	ps->sub = subscribe(pr, st);
	sbx__buf_init(&st->out, 2 * SRV_SUB_MAX);
	st->keepalive_s = sbx__srv_keepalive_s(r);
	ps->next_ka = sbx__now_mono() + st->keepalive_s;
	st->deadline = deadline_s > 0 ? sbx__now_mono() + deadline_s : 0;
	st->fill = pstream_fill;
	st->fini = pstream_fini;
	st->ctx = ps;
	sbx__srv_reply_stream(r, st);
}

/* Finds a process by {"pid":N} or {"tag":"t"} selector and takes a reference. */
static struct srv_proc *find_proc(struct srv_sandbox *s, json_t *sel)
{
	json_t *pid = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));
	long long want = json_is_integer(pid) ? json_integer_value(pid) : json_is_string(pid) ? strtoll(json_string_value(pid), NULL, 10) : -1;
	struct srv_proc *found = NULL;
	pthread_mutex_lock(&s->plock);
	for (struct srv_proc *pr = s->procs; pr && !found; pr = pr->next)
		if ((want >= 0 && pr->pid == want) || (tag && pr->tag && strcmp(tag, pr->tag) == 0))
			found = pr;
	if (found) {
		pthread_mutex_lock(&found->lk);
		found->refs++;
		pthread_mutex_unlock(&found->lk);
	}
	pthread_mutex_unlock(&s->plock);
	return found;
}

static int string_list(json_t *a)
{
	size_t i;
	json_t *v;
	if (a && !json_is_array(a))
		return 0;
	json_array_foreach(a, i, v)
		if (!json_is_string(v))
			return 0;
	return 1;
}

static void start(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *req = sbx__srv_connect_body(r, 1);
	if (!req)
		return;
	double tmo = sbx__srv_connect_timeout_s(r);
	json_t *proc = json_object_get(req, "process");
	const char *cmd = json_string_value(json_object_get(proc, "cmd"));
	json_t *args = json_object_get(proc, "args"), *envs = json_object_get(proc, "envs");
	json_t *cwdj = json_object_get(proc, "cwd");
	json_t *stdinj = json_object_get(req, "stdin");
	_cleanup_free_ char *user = sbx__srv_auth_basic_user(sbx__srv_header(r, "Authorization"));
	_cleanup_free_ char *cwd = NULL;
	char **argv = NULL, **env = NULL;
	sbx_process *p = NULL;
	sbx_error *e = NULL;
	if (tmo < 0 || !cmd || !*cmd || !string_list(args) || (envs && !json_is_object(envs)) ||
	    (cwdj && !json_is_string(cwdj) && !json_is_null(cwdj))) {
		sbx__srv_reply_stream_error(r, "invalid_argument", "process.cmd is required; args strings, envs a map, "
							     "Connect-Timeout-Ms a number");
		goto out;
	}
	const char *eff_user = user ? user : s->user;
	if (json_string_value(cwdj) && *json_string_value(cwdj))
		cwd = sbx__srv_resolve_path(s, eff_user, json_string_value(cwdj));
	else
		cwd = s->workdir ? xstrdup(s->workdir) : sbx__srv_user_home(s, eff_user);
	sbx__strv_push(&argv, cmd);
	size_t i;
	json_t *v;
	json_array_foreach(args, i, v)
		sbx__strv_push(&argv, json_string_value(v));
	if (eff_user && strspn(eff_user, "0123456789:") != strlen(eff_user)) {
		char *kv = xasprintf("USER=%s", eff_user);
		sbx__strv_push(&env, kv);
		free(kv);
		kv = xasprintf("LOGNAME=%s", eff_user);
		sbx__strv_push(&env, kv);
		free(kv);
	}
	const char *k;
	json_object_foreach(envs, k, v) {
		if (!json_is_string(v))
			continue;
		char *kv = xasprintf("%s=%s", k, json_string_value(v));
		sbx__strv_setenv(&env, kv);
		free(kv);
	}
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.argv = (const char *const *)argv;
	o.env = (const char *const *)env;
	o.cwd = cwd;
	o.user = eff_user; /* the call's, else the image's or E2B's default `user` */
	o.timeout_s = tmo;
	int keep_stdin = !stdinj || json_is_true(stdinj) || json_object_get(req, "pty");
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx_process_start(&p, s->sb, &o, keep_stdin, &e);
		sbx__srv_op_end(s);
	}
	if (rc < 0) {
		sbx__srv_reply_stream_error(r, rc == -ENOENT ? "invalid_argument" : sbx__srv_connect_code(rc), "start %s: %s",
				       cmd, e && e->msg ? e->msg : sbx_error_code_name(rc));
		goto out;
	}
	atomic_fetch_add(&r->srv->m.execs, 1);
	struct srv_proc *pr = xcalloc(1, sizeof(*pr));
	pr->owner = s;
	pr->srv = r->srv;
	pr->p = p;
	pr->pid = sbx_process_pid(p);
	pr->tag = json_string_value(json_object_get(req, "tag")) ? xstrdup(json_string_value(json_object_get(req, "tag"))) : NULL;
	pr->config = json_deep_copy(proc);
	pr->pty = json_object_get(req, "pty") && !json_is_null(json_object_get(req, "pty"));
	pr->refs = 1; /* the pump */
	pthread_mutex_init(&pr->lk, NULL);
	pthread_mutex_init(&pr->in_lk, NULL);
	pthread_cond_init(&pr->cv, NULL);
	pthread_mutex_lock(&r->srv->lock);
	s->refs++; /* the pump's */
	pthread_mutex_unlock(&r->srv->lock);
	pthread_mutex_lock(&s->plock);
	pr->next = s->procs;
	s->procs = pr;
	pr->in_table = 1;
	pthread_mutex_unlock(&s->plock);
	attach(r, pr, tmo, 1);
	int pe = sbx__srv_pump_start(pr);
	if (pe < 0) {
		/* Nobody would read its output or report its end: end it now and
		 * pump what is left on this worker (a killed process drains fast). */
		SBX_LOGE("envd: watch the output of pid %d: %s; process killed", (int)pr->pid, strerror(-pe));
		sbx_process_signal(pr->p, SIGKILL, NULL);
		int st = 0, to = 0;
		sbx_process_poll(pr->p, &st, &to, 1, NULL);
		pr->p_exited = 1;
		pr->p_status = st;
		pr->p_timed_out = to;
		sbx__srv_pump_finish(pr);
	}
out:
	sbx_error_free(e);
	sbx__strv_free(argv);
	sbx__strv_free(env);
	json_decref(req);
}

static void connect_proc(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *req = sbx__srv_connect_body(r, 1);
	if (!req)
		return;
	struct srv_proc *pr = find_proc(s, json_object_get(req, "process"));
	json_decref(req);
	if (!pr) {
		sbx__srv_reply_stream_error(r, "not_found", "process not found");
		return;
	}
	double tmo = sbx__srv_connect_timeout_s(r);
	attach(r, pr, tmo > 0 ? tmo : 0, 0);
	sbx__srv_proc_put(pr);
}

static void list_procs(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *arr = json_array();
	pthread_mutex_lock(&s->plock);
	for (struct srv_proc *pr = s->procs; pr; pr = pr->next) {
		if (pr->exited)
			continue;
		json_t *o = json_pack("{s:O,s:i}", "config", pr->config, "pid", (int)pr->pid);
		if (pr->tag)
			json_object_set_new(o, "tag", json_string(pr->tag));
		json_array_append_new(arr, o);
	}
	pthread_mutex_unlock(&s->plock);
	sbx__srv_reply_json(r, 200, json_pack("{s:o}", "processes", arr));
}

static int parse_signal(json_t *v)
{
	const char *name = json_string_value(v);
	if (name)
		return strcmp(name, "SIGNAL_SIGKILL") == 0 ? SIGKILL : strcmp(name, "SIGNAL_SIGTERM") == 0 ? SIGTERM : 0;
	if (json_is_integer(v) && (json_integer_value(v) == 9 || json_integer_value(v) == 15))
		return (int)json_integer_value(v);
	return 0;
}

/* SendInput, SendSignal, CloseStdin, Update. */
static void unary(struct srv_req *r, struct srv_sandbox *s, const char *method)
{
	json_t *req = sbx__srv_connect_body(r, 0);
	if (!req)
		return;
	struct srv_proc *pr = find_proc(s, json_object_get(req, "process"));
	if (!pr) {
		sbx__srv_reply_connect_error(r, "not_found", "process not found");
		json_decref(req);
		return;
	}
	if (strcmp(method, "SendSignal") == 0) {
		int sig = parse_signal(json_object_get(req, "signal"));
		sbx_error *e = NULL;
		int rc = sig ? sbx_process_signal(pr->p, sig, &e) : -EINVAL;
		if (rc < 0)
			sbx__srv_reply_sbx_error(r, 1, "signal", rc, e);
		else
			sbx__srv_reply_json(r, 200, json_object());
	} else if (strcmp(method, "SendInput") == 0) {
		json_t *in = json_object_get(req, "input");
		const char *b64 = json_string_value(json_object_get(in, "stdin"));
		if (!b64)
			b64 = json_string_value(json_object_get(in, "pty"));
		sbx_buf data;
		sbx__buf_init(&data, SRV_JSON_MAX);
		/* A command that never reads its stdin must not hold this thread
		 * for good: each wait for room is bounded. */
		pthread_mutex_lock(&pr->in_lk);
		int fd = sbx_process_stdin_fd(pr->p);
		int rc = !b64 || sbx__srv_json_bytes_decode(&data, b64) < 0 ? -EINVAL : fd < 0 ? -EPIPE : 0;
		for (size_t off = 0; rc == 0 && off < data.len;) {
			ssize_t n = send(fd, data.data + off, data.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno == EAGAIN) {
				struct pollfd pw = { .fd = fd, .events = POLLOUT };
				int k = poll(&pw, 1, SRV_STDIN_WAIT_MS);
				if (k == 0)
					rc = -EAGAIN;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				rc = -errno;
			else
				off += (size_t)n;
		}
		pthread_mutex_unlock(&pr->in_lk);
		sbx__buf_free(&data);
		if (rc < 0)
			sbx__srv_reply_connect_error(r, rc == -EINVAL ? "invalid_argument" : rc == -EAGAIN ? "deadline_exceeded" : "failed_precondition",
						"send input: %s", rc == -EINVAL ? "bad input" : rc == -EAGAIN ? "the process has not read its stdin for 30 s" : "stdin is closed");
		else
			sbx__srv_reply_json(r, 200, json_object());
	} else if (strcmp(method, "CloseStdin") == 0) {
		pthread_mutex_lock(&pr->in_lk);
		sbx_process_close_stdin(pr->p);
		pthread_mutex_unlock(&pr->in_lk);
		sbx__srv_reply_json(r, 200, json_object());
	} else {
		sbx__srv_reply_json(r, 200, json_object()); /* Update: no pty to resize */
	}
	sbx__srv_proc_put(pr);
	json_decref(req);
}

void sbx__srv_envd_process(struct srv_req *r, struct srv_sandbox *s, const char *method)
{
	if (strcmp(method, "Start") == 0)
		start(r, s);
	else if (strcmp(method, "Connect") == 0)
		connect_proc(r, s);
	else if (strcmp(method, "List") == 0)
		list_procs(r, s);
	else if (strcmp(method, "SendInput") == 0 || strcmp(method, "SendSignal") == 0 ||
		 strcmp(method, "CloseStdin") == 0 || strcmp(method, "Update") == 0)
		unary(r, s, method);
	else if (strcmp(method, "StreamInput") == 0)
		sbx__srv_reply_connect_error(r, "unimplemented", "StreamInput is not supported (use SendInput)");
	else
		sbx__srv_reply_connect_error(r, "unimplemented", "process.Process/%s does not exist", method);
}

void sbx__srv_procs_release(struct srv_sandbox *s)
{
	(void)s; /* pumps hold the sandbox; when it is freed the table is empty */
}
