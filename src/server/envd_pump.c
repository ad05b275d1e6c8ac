/* SPDX-License-Identifier: MIT */
/*
 * The output pump of envd's processes (envd_process.c is the service): it
 * reads a process's stdout/stderr and fans the encoded events out to the
 * streams attached at that moment, one step at a time on a worker when the
 * notifier (loop.c) sees a pipe or the status fd ready, and ends the
 * process's record when it exits.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"
#include "server_int.h"

void sbx__srv_proc_put(struct srv_proc *pr)
{
	pthread_mutex_lock(&pr->lk);
	int last = --pr->refs == 0;
	pthread_mutex_unlock(&pr->lk);
	if (!last)
		return;
	if (!pr->exited)
		sbx_process_detach(pr->p);
	sbx_process_free(pr->p);
	json_decref(pr->config);
	free(pr->tag);
	pthread_mutex_destroy(&pr->lk);
	pthread_mutex_destroy(&pr->in_lk);
	pthread_cond_destroy(&pr->cv);
	free(pr);
}

static void fan_out(struct srv_proc *pr, json_t *event)
{
	sbx_buf frame;
	sbx__buf_init(&frame, SRV_SUB_MAX);
	sbx__srv_envelope(&frame, 0, json_pack("{s:o}", "event", event));
	pthread_mutex_lock(&pr->lk);
	for (struct srv_sub *s = pr->subs; s; s = s->next) {
		if (!s->overflow && sbx__buf_append(&s->q, frame.data, frame.len) < 0)
			s->overflow = 1;
		sbx__srv_stream_wake(s->st);
	}
	pthread_cond_broadcast(&pr->cv);
	pthread_mutex_unlock(&pr->lk);
	sbx__buf_free(&frame);
}

static void emit_data(struct srv_proc *pr, int fd, const char *data, size_t len)
{
	char *b64 = sbx__srv_json_bytes_encode(data, len);
	const char *key = pr->pty ? "pty" : fd == 1 ? "stdout" : "stderr";
	fan_out(pr, json_pack("{s:{s:s}}", "data", key, b64));
	free(b64);
}

static void emit_end(struct srv_proc *pr, int status, int timed_out)
{
	json_t *end = json_object();
	char st[64];
	if (WIFEXITED(status)) {
		if (WEXITSTATUS(status))
			json_object_set_new(end, "exitCode", json_integer(WEXITSTATUS(status)));
		json_object_set_new(end, "exited", json_true());
		snprintf(st, sizeof(st), "exit status %d", WEXITSTATUS(status));
	} else {
		int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
		json_object_set_new(end, "exitCode", json_integer(-1));
		json_object_set_new(end, "exited", json_false());
		char name[32];
		snprintf(name, sizeof(name), "%s", strsignal(sig));
		for (char *c = name; *c; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		snprintf(st, sizeof(st), "signal: %s", name);
	}
	json_object_set_new(end, "status", json_string(st));
	if (timed_out)
		json_object_set_new(end, "error", json_string("deadline exceeded"));
	/* Killed with its sandbox: on E2B the VM goes and the stream breaks
	 * with no end event (the SDK then raises TimeoutError), so the streams
	 * end "unavailable" instead. The kill marks the sandbox dead first. */
	pthread_mutex_lock(&pr->srv->lock);
	int gone = pr->owner->dead;
	pthread_mutex_unlock(&pr->srv->lock);
	if (!gone)
		fan_out(pr, json_pack("{s:o}", "end", end));
	else
		json_decref(end);
	pthread_mutex_lock(&pr->lk);
	pr->sandbox_gone = gone;
	pr->exited = 1;
	pr->status = status;
	pr->timed_out = timed_out;
	for (struct srv_sub *sb = pr->subs; sb; sb = sb->next)
		sbx__srv_stream_wake(sb->st);
	pthread_cond_broadcast(&pr->cv);
	pthread_mutex_unlock(&pr->lk);
}

/* The pump's end: the process's end is told, it leaves the table, and the
 * pump's references go. Runs on the pump's worker, with no watch armed
 * that could start another step. */
void sbx__srv_pump_finish(struct srv_proc *pr)
{
	struct server *srv = pr->srv;
	for (int i = 0; i < 3; i++)
		sbx__srv_loop_unwatch(srv, &pr->pw[i]);
	sbx__srv_timer_cancel(srv, &pr->ptimer);
	if (pr->p_exited)
		emit_end(pr, pr->p_status, pr->p_timed_out);
	struct srv_sandbox *s = pr->owner;
	pthread_mutex_lock(&s->plock);
	for (struct srv_proc **pp = &s->procs; *pp; pp = &(*pp)->next)
		if (*pp == pr) {
			*pp = pr->next;
			break;
		}
	pr->in_table = 0;
	pthread_mutex_unlock(&s->plock);
	sbx__srv_proc_put(pr);
	sbx__srv_sandbox_put(srv, s);
}

/* One step: a read from each ready pipe, the status when it is ready; the
 * fds still open are armed again. 1 when the pump is over. */
static int pump_step(struct srv_proc *pr, unsigned ready)
{
	struct server *srv = pr->srv;
	char buf[32768];
	if (atomic_load(&srv->stopping))
		return 1;
	for (int i = 0; i < 2; i++) {
		if (pr->pw[i].fd < 0 || !(ready & (1u << i)))
			continue;
		ssize_t got = read(pr->pw[i].fd, buf, sizeof(buf));
		if (got > 0) {
			emit_data(pr, i + 1, buf, (size_t)got);
			if (pr->p_exited)
				pr->drain_until = sbx__now_mono() + 0.2;
		}
		if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR))) {
			if (sbx__srv_loop_arm(srv, &pr->pw[i], EPOLLIN) < 0)
				return 1;
		} else {
			sbx__srv_loop_unwatch(srv, &pr->pw[i]);
			pr->pw[i].fd = -1; /* EOF: the fd stays the process handle's */
		}
	}
	if (!pr->p_exited && (ready & 4u)) {
		int status = (int)SIGKILL, timed_out = 0;
		int r = sbx_process_poll(pr->p, &status, &timed_out, 0, NULL);
		if (r != 0) {
			pr->p_exited = 1;
			pr->p_status = r < 0 ? SIGKILL : status;
			pr->p_timed_out = timed_out;
			pr->drain_until = sbx__now_mono() + 0.2;
			sbx__srv_loop_unwatch(srv, &pr->pw[2]);
		} else if (sbx__srv_loop_arm(srv, &pr->pw[2], EPOLLIN) < 0) {
			return 1;
		}
	}
	if (pr->pw[0].fd < 0 && pr->pw[1].fd < 0 && (pr->p_exited || pr->pw[2].fd < 0))
		return 1;
	if (pr->p_exited) {
		if (sbx__now_mono() >= pr->drain_until)
			return 1; /* background processes keep the pipes: stop reading */
		sbx__srv_timer_set(srv, &pr->ptimer, pr->drain_until);
	}
	return 0;
}

static void pump_job(void *arg)
{
	struct srv_proc *pr = arg;
	for (;;) {
		pthread_mutex_lock(&pr->lk);
		unsigned ready = pr->ready;
		pr->ready = 0;
		pthread_mutex_unlock(&pr->lk);
		if (pump_step(pr, ready)) {
			sbx__srv_pump_finish(pr);
			return;
		}
		pthread_mutex_lock(&pr->lk);
		if (!pr->ready) {
			pr->pumping = 0;
			pthread_mutex_unlock(&pr->lk);
			return;
		}
		pthread_mutex_unlock(&pr->lk);
	}
}

/* From the notifier (or a kick): a step for this process, unless one runs
 * (it then loops once more). */
static void pump_kick(struct srv_proc *pr, unsigned bits)
{
	pthread_mutex_lock(&pr->lk);
	pr->ready |= bits;
	int start = !pr->pumping;
	pr->pumping = 1;
	pthread_mutex_unlock(&pr->lk);
	if (start)
		sbx__srv_pool_submit(pr->srv, pump_job, pr);
}

static void pump_on_fd(struct srv_watch *w, uint32_t events)
{
	(void)events;
	struct srv_proc *pr = w->ctx;
	pump_kick(pr, 1u << (w - pr->pw));
}

/* A kick with no fd ready still needs its own bit: a step already running
 * loops once more only for bits it has not taken. */
#define PUMP_TICK 8u

static void pump_on_timer(struct srv_timer *t)
{
	pump_kick(t->ctx, PUMP_TICK);
}

/* Arms the pump's watches; 0, or -errno (nothing armed then). */
int sbx__srv_pump_start(struct srv_proc *pr)
{
	int fds[3] = { sbx_process_stdout_fd(pr->p), sbx_process_stderr_fd(pr->p), sbx_process_status_fd(pr->p) };
	pr->ptimer.cb = pump_on_timer;
	pr->ptimer.ctx = pr;
	for (int i = 0; i < 3; i++) {
		pr->pw[i].fd = fds[i];
		pr->pw[i].cb = pump_on_fd;
		pr->pw[i].ctx = pr;
	}
	for (int i = 0; i < 3; i++) {
		if (fds[i] < 0)
			continue;
		int rc = sbx__srv_loop_arm(pr->srv, &pr->pw[i], EPOLLIN);
		if (rc < 0) {
			for (int k = 0; k < i; k++)
				sbx__srv_loop_unwatch(pr->srv, &pr->pw[k]);
			return rc;
		}
	}
	return 0;
}

void sbx__srv_procs_kick_all(struct server *srv)
{
	size_t n;
	struct srv_sandbox **v = sbx__srv_sandbox_all(srv, &n);
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_lock(&v[i]->plock);
		for (struct srv_proc *pr = v[i]->procs; pr; pr = pr->next)
			pump_kick(pr, PUMP_TICK);
		pthread_mutex_unlock(&v[i]->plock);
		sbx__srv_sandbox_put(srv, v[i]);
	}
	free(v);
}
