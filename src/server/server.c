/* SPDX-License-Identifier: MIT */
/*
 * Lifecycle of `sbx serve`: the sandbox table with reference counts, the
 * timer that destroys expired sandboxes (checked every 200 ms, so within
 * 1 s of the deadline) and reaps sandboxes that died behind the server's
 * back, startup (lock, key, runtime, SQLite reconcile, HTTP), signal
 * handling, and shutdown (--destroy-on-exit destroys everything it owns).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/sha256.h"
#include "server_int.h"

#define STOP_GRACE_S 10

struct srv_sandbox *sbx__srv_sandbox_new(const char *id)
{
	struct srv_sandbox *s = xcalloc(1, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	pthread_mutex_init(&s->plock, NULL);
	s->refs = 1;
	return s;
}

static void sandbox_free(struct srv_sandbox *s)
{
	sbx__srv_procs_release(s);
	/* Killed by id while a call was stuck: now that the call is over, finish
	 * with the handle too (it reaps init, a child of this process). */
	if (s->finish_pending && s->sb)
		sbx_sandbox_destroy(s->sb, NULL);
	sbx_sandbox_free(s->sb);
	if (s->ext_free)
		s->ext_free(s->ext);
	json_decref(s->ext_saved);
	json_decref(s->metadata);
	json_decref(s->env_vars);
	json_decref(s->allow_out);
	json_decref(s->deny_out);
	free(s->template_id);
	free(s->alias);
	free(s->user);
	free(s->workdir);
	pthread_mutex_destroy(&s->plock);
	free(s);
}

struct srv_sandbox *sbx__srv_sandbox_get(struct server *srv, const char *id)
{
	struct srv_sandbox *found = NULL;
	pthread_mutex_lock(&srv->lock);
	for (size_t i = 0; i < srv->n; i++)
		if (strcmp(srv->v[i]->id, id) == 0) {
			found = srv->v[i];
			found->refs++;
			break;
		}
	pthread_mutex_unlock(&srv->lock);
	return found;
}

struct srv_sandbox *sbx__srv_sandbox_by_token(struct server *srv, const char *token)
{
	struct srv_sandbox *found = NULL;
	pthread_mutex_lock(&srv->lock);
	for (size_t i = 0; i < srv->n; i++)
		if (sbx__srv_ct_equal(token, srv->v[i]->token) && !found) {
			found = srv->v[i];
			found->refs++;
		}
	pthread_mutex_unlock(&srv->lock);
	return found;
}

void sbx__srv_sandbox_put(struct server *srv, struct srv_sandbox *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&srv->lock);
	int last = --s->refs == 0;
	pthread_mutex_unlock(&srv->lock);
	if (last)
		sandbox_free(s);
}

void sbx__srv_sandbox_insert(struct server *srv, struct srv_sandbox *s)
{
	s->srv = srv;
	pthread_mutex_lock(&srv->lock);
	if (srv->n == srv->cap) {
		srv->cap = srv->cap ? srv->cap * 2 : 64;
		srv->v = xrealloc(srv->v, srv->cap * sizeof(*srv->v));
	}
	srv->v[srv->n++] = s;
	pthread_mutex_unlock(&srv->lock);
	sbx__srv_timer_kick(srv);
}

struct srv_sandbox **sbx__srv_sandbox_all(struct server *srv, size_t *n)
{
	pthread_mutex_lock(&srv->lock);
	struct srv_sandbox **v = xcalloc(srv->n + 1, sizeof(*v));
	for (size_t i = 0; i < srv->n; i++) {
		v[i] = srv->v[i];
		v[i]->refs++;
	}
	*n = srv->n;
	pthread_mutex_unlock(&srv->lock);
	return v;
}

int sbx__srv_sandbox_kill(struct server *srv, struct srv_sandbox *s, const char *reason)
{
	pthread_mutex_lock(&srv->lock);
	int found = 0, busy = 0;
	for (size_t i = 0; i < srv->n; i++)
		if (srv->v[i] == s) {
			srv->v[i] = srv->v[--srv->n];
			found = 1;
			break;
		}
	if (found) {
		busy = sbx__srv_op_mark_dead(s);
		s->refs--; /* the table's reference; the caller still holds one */
	}
	pthread_mutex_unlock(&srv->lock);
	if (!found)
		return -ENOENT;
	sbx_error *e = NULL;
	/* A call still in flight owns the handle: destroy through a fresh one. */
	int r = busy ? sbx_sandbox_destroy_id(srv->rt, sbx_sandbox_provider(s->sb), s->id, &e)
		     : sbx_sandbox_destroy(s->sb, &e);
	if (r < 0)
		SBX_LOGW("serve: destroy %s: %s", s->id, e ? e->msg : "?");
	/* Its services are gone: so are the connections proxied to them. */
	sbx__srv_relays_sandbox_gone(srv, s->id);
	sbx_error_free(e);
	sbx__srv_state_delete(srv, s->id);
	atomic_fetch_add(&srv->m.destroys, 1);
	if (strcmp(reason, "timeout") == 0)
		atomic_fetch_add(&srv->m.timeouts, 1);
	SBX_LOGI("serve: sandbox %s destroyed (%s)", s->id, reason);
	return 0;
}

void sbx__srv_timer_kick(struct server *srv)
{
	pthread_mutex_lock(&srv->lock);
	pthread_cond_signal(&srv->timer_cv);
	pthread_mutex_unlock(&srv->lock);
}

/* Sandboxes whose init died without the server destroying them. */
static void reap_dead(struct server *srv)
{
	_cleanup_free_ char *label = xasprintf("sbx.server=%s", srv->server_id);
	const char *filter[] = { label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	if (sbx_sandbox_list(&v, &n, srv->rt, sbx_provider_host()->name, filter, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].state, "dead") != 0)
			continue;
		struct srv_sandbox *s = sbx__srv_sandbox_get(srv, v[i].id);
		if (s) {
			sbx__srv_sandbox_kill(srv, s, "died");
			sbx__srv_sandbox_put(srv, s);
		}
	}
	sbx_sandbox_info_free(v, n);
}

/* autoPause (lifecycle onTimeout "pause"): the deadline pauses the
 * sandbox; 1 when it is paused now (else it is killed as usual). */
static int timeout_pause(struct server *srv, struct srv_sandbox *s, int *busy)
{
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx__srv_sandbox_pause(s, &e);
		sbx__srv_op_end(s);
	}
	if (rc == -EBUSY) /* a snapshot's or fork's hold, or a resume: try again after it */
		*busy = 1;
	if (rc < 0 && rc != -EALREADY && rc != -EBUSY)
		SBX_LOGW("serve: auto-pause %s: %s", s->id, e ? e->msg : "?");
	else if (rc == 0)
		SBX_LOGI("serve: sandbox %s paused at its timeout", s->id);
	sbx_error_free(e);
	(void)srv;
	return rc == 0 || rc == -EALREADY || rc == -EBUSY;
}

static void *timer_main(void *arg)
{
	struct server *srv = arg;
	double last_reap = sbx__now_mono();
	while (!atomic_load(&srv->stopping)) {
		double now = sbx__now_real();
		struct srv_sandbox *expired[64];
		size_t ne = 0;
		pthread_mutex_lock(&srv->lock);
		for (size_t i = 0; i < srv->n && ne < 64; i++) {
			struct srv_sandbox *s = srv->v[i];
			if (!s->paused && s->end_at > 0 && s->end_at <= now) {
				s->refs++;
				expired[ne++] = s;
			}
		}
		if (ne == 0) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&srv->timer_cv, &srv->lock, &ts);
		}
		pthread_mutex_unlock(&srv->lock);
		int busy = 0;
		for (size_t i = 0; i < ne; i++) {
			if (!expired[i]->auto_pause || !timeout_pause(srv, expired[i], &busy))
				sbx__srv_sandbox_kill(srv, expired[i], "timeout");
			sbx__srv_sandbox_put(srv, expired[i]);
		}
		/* A held sandbox stays expired and unpaused until its hold ends
		 * (seconds for a fork): rescanning at once would spin. */
		if (busy)
			nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
		if (sbx__now_mono() - last_reap > 5) {
			reap_dead(srv);
			last_reap = sbx__now_mono();
		}
	}
	return NULL;
}

static void log_sink(sbx_log_level level, const char *msg, void *payload)
{
	(void)payload;
	static const char *names[] = { "error", "warn", "info", "debug" };
	/* Messages name paths and users a client or a sandbox chose: one line
	 * each, control characters escaped, so none can forge another line. */
	char *clean = sbx__srv_log_escape(msg, 0);
	fprintf(stderr, "sbx serve: %s: %s\n", names[level <= SBX_LOG_DEBUG ? level : 0], clean);
	free(clean);
}

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void server_id_of(char out[17], const char *state_dir)
{
	unsigned char md[SBX_SHA256_LEN];
	sbx__sha256(md, state_dir, strlen(state_dir));
	sbx__hex_encode(out, md, 8);
}

/* Waits (at most 10 s) until process pump threads let go of the sandboxes. */
static void drain(struct server *srv, int destroy)
{
	size_t n;
	struct srv_sandbox **v = sbx__srv_sandbox_all(srv, &n);
	for (size_t i = 0; i < n; i++) {
		if (destroy)
			sbx__srv_sandbox_kill(srv, v[i], "shutdown");
		sbx__srv_sandbox_put(srv, v[i]);
	}
	free(v);
	for (int i = 0; i < 1000; i++) {
		int busy = 0;
		pthread_mutex_lock(&srv->lock);
		for (size_t k = 0; k < srv->n; k++)
			busy |= srv->v[k]->refs > 1;
		pthread_mutex_unlock(&srv->lock);
		if (!busy)
			break;
		usleep(10000);
	}
	pthread_mutex_lock(&srv->lock);
	while (srv->n > 0) {
		struct srv_sandbox *s = srv->v[--srv->n];
		pthread_mutex_unlock(&srv->lock);
		sbx__srv_sandbox_put(srv, s);
		pthread_mutex_lock(&srv->lock);
	}
	pthread_mutex_unlock(&srv->lock);
}

struct stopper {
	void *daemon;
	pthread_mutex_t lk;
	pthread_cond_t cv;
	int done;
};

static void *stop_main(void *arg)
{
	struct stopper *st = arg;
	sbx__srv_http_stop(st->daemon);
	pthread_mutex_lock(&st->lk);
	st->done = 1;
	pthread_cond_signal(&st->cv);
	pthread_mutex_unlock(&st->lk);
	return NULL;
}

/* Stops the HTTP side, waiting at most STOP_GRACE_S for the connection
 * threads: one stuck in a call a sandbox blocks must not keep SIGTERM from
 * working. 1 when everything stopped; 0 leaves the stopper running. */
static int http_stop_bounded(void *daemon)
{
	struct stopper *st = xcalloc(1, sizeof(*st));
	st->daemon = daemon;
	pthread_mutex_init(&st->lk, NULL);
	pthread_cond_init(&st->cv, NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, stop_main, st) != 0) {
		/* No stopper thread: stop inline, unbounded, rather than not at all. */
		sbx__srv_http_stop(daemon);
		pthread_mutex_destroy(&st->lk);
		pthread_cond_destroy(&st->cv);
		free(st);
		return 1;
	}
	double until = sbx__now_mono() + STOP_GRACE_S;
	pthread_mutex_lock(&st->lk);
	while (!st->done && sbx__now_mono() < until) {
		struct timespec ts;
		sbx__timespec_in(&ts, 0.2);
		pthread_cond_timedwait(&st->cv, &st->lk, &ts);
	}
	int done = st->done;
	pthread_mutex_unlock(&st->lk);
	if (!done) {
		pthread_detach(t);
		return 0; /* st stays with the detached thread until the process exits */
	}
	pthread_join(t, NULL);
	pthread_mutex_destroy(&st->lk);
	pthread_cond_destroy(&st->cv);
	free(st);
	return 1;
}

static int serve(struct server *srv, sbx_error **err)
{
	int created = 0;
	int r = sbx__srv_auth_init(srv, &created, err);
	if (r < 0)
		return r;
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	ro.state_dir = srv->cfg.state_dir;
	ro.image_dir = srv->cfg.image_dir;
	ro.log = log_sink;
	ro.log_level = SBX_LOG_WARN;
	if ((r = sbx_runtime_new(&srv->rt, &ro, err)) < 0)
		return r;
	if ((r = sbx__srv_state_open(srv, err)) < 0 || (r = sbx__srv_state_reconcile(srv, err)) < 0 ||
	    (r = sbx__srv_pool_start(srv, err)) < 0)
		return r;
	if ((r = sbx__srv_relays_start(srv, err)) < 0)
		return r;
	void *daemon = NULL;
	if ((r = sbx__srv_http_start(srv, &daemon, &srv->port, err)) < 0)
		return r;
	if (srv->cfg.print_port)
		printf("%u\n", srv->port);
	if (created)
		printf("api_key=%s\n", srv->api_key); /* shown once, on creation */
	printf("sbx serve: ready url=http://%s:%u key_file=%s state_dir=%s sandboxes=%zu\n", srv->cfg.listen_addr,
	       srv->port, srv->key_path, srv->cfg.state_dir, srv->n);
	fflush(stdout);
	pthread_t timer;
	int te = pthread_create(&timer, NULL, timer_main, srv);
	if (te != 0) {
		/* Without the timer no deadline or TTL would be enforced. */
		atomic_store(&srv->stopping, 1);
		sbx__srv_relays_stop(srv);
		http_stop_bounded(daemon);
		drain(srv, srv->cfg.destroy_on_exit);
		return sbx_error_setsys(err, -te, te, "start the server's timer thread");
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	int sig = 0;
	while (sigwait(&set, &sig) != 0)
		;
	fprintf(stderr, "sbx serve: signal %d, shutting down%s\n", sig,
		srv->cfg.destroy_on_exit ? " (destroying sandboxes)" : "");
	atomic_store(&srv->stopping, 1);
	sbx__srv_timer_kick(srv);
	sbx__srv_relays_stop(srv); /* MHD must not stop with upgraded connections open */
	if (!http_stop_bounded(daemon)) {
		srv->abandoned = 1;
		fprintf(stderr, "sbx serve: connections still busy after %d s (a call blocked in a sandbox); "
				"exiting without them\n", STOP_GRACE_S);
	}
	pthread_join(timer, NULL);
	drain(srv, srv->cfg.destroy_on_exit);
	return 0;
}

int sbx__srv_run(const struct srv_config *cfg)
{
	struct server *srv = xcalloc(1, sizeof(*srv));
	srv->cfg = *cfg;
	pthread_mutex_init(&srv->lock, NULL);
	pthread_mutex_init(&srv->key_lock, NULL);
	pthread_mutex_init(&srv->db_lock, NULL);
	pthread_mutex_init(&srv->build_lock, NULL);
	pthread_cond_init(&srv->timer_cv, NULL);
	raise_nofile();
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &sa, NULL);
	sbx_error *err = NULL;
	int rc = 1;
	_cleanup_free_ char *dir = xasprintf("%s/server", cfg->state_dir);
	_cleanup_free_ char *lockp = xasprintf("%s/server.lock", dir);
	_cleanup_close_ int lfd = -1;
	/* libcrypto is loaded at first use (util/lazy.h): a missing one is an error here */
	if (sbx__lazy_load(&sbx__lazy_crypto, &err) < 0 || sbx__mkdir_p(dir, 0700, &err) < 0)
		goto out;
	server_id_of(srv->server_id, cfg->state_dir);
	lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) < 0) {
		sbx_error_setsys(&err, -EBUSY, errno, "another sbx serve uses state dir %s (lock %s)",
				 cfg->state_dir, lockp);
		goto out;
	}
	if (serve(srv, &err) == 0)
		rc = 0;
out:
	if (err)
		fprintf(stderr, "sbx serve: %s\n", err->msg);
	sbx_error_free(err);
	if (srv->abandoned)
		return rc; /* threads still use srv; the process is about to exit */
	sbx__srv_relays_free(srv);
	sbx__srv_builds_free(srv);
	sbx__dt_free(srv);
	sbx__srv_state_close(srv);
	sbx_runtime_free(srv->rt);
	sbx__srv_pool_free(srv);
	free(srv->v);
	free(srv->key_path);
	free(srv->api_key);
	free(srv);
	return rc;
}
