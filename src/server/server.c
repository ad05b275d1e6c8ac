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
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "server_int.h"

struct srv_sandbox *sbx__srv_sandbox_new(const char *id)
{
	struct srv_sandbox *s = xcalloc(1, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", id);
	pthread_rwlock_init(&s->rw, NULL);
	pthread_mutex_init(&s->plock, NULL);
	s->refs = 1;
	return s;
}

static void sandbox_free(struct srv_sandbox *s)
{
	sbx__srv_procs_release(s);
	sbx_sandbox_free(s->sb);
	json_decref(s->metadata);
	json_decref(s->env_vars);
	free(s->template_id);
	free(s->alias);
	free(s->user);
	free(s->workdir);
	pthread_rwlock_destroy(&s->rw);
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
	int found = 0;
	for (size_t i = 0; i < srv->n; i++)
		if (srv->v[i] == s) {
			srv->v[i] = srv->v[--srv->n];
			found = 1;
			break;
		}
	if (found) {
		s->dead = 1;
		s->refs--; /* the table's reference; the caller still holds one */
	}
	pthread_mutex_unlock(&srv->lock);
	if (!found)
		return -ENOENT;
	sbx_error *e = NULL;
	pthread_rwlock_wrlock(&s->rw);
	if (sbx_sandbox_destroy(s->sb, &e) < 0)
		SBX_LOGW("serve: destroy %s: %s", s->id, e ? e->msg : "?");
	pthread_rwlock_unlock(&s->rw);
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
	if (sbx_sandbox_list(&v, &n, srv->rt, "local", filter, NULL) < 0)
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
		for (size_t i = 0; i < ne; i++) {
			sbx__srv_sandbox_kill(srv, expired[i], "timeout");
			sbx__srv_sandbox_put(srv, expired[i]);
		}
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
	fprintf(stderr, "sbx serve: %s: %s\n", names[level <= SBX_LOG_DEBUG ? level : 0], msg);
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
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)state_dir, strlen(state_dir), md);
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
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
	if ((r = sbx__srv_state_open(srv, err)) < 0 || (r = sbx__srv_state_reconcile(srv, err)) < 0)
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
	pthread_create(&timer, NULL, timer_main, srv);
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
	sbx__srv_http_stop(daemon);
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
	server_id_of(srv->server_id, cfg->state_dir);
	sbx_error *err = NULL;
	int rc = 1;
	_cleanup_free_ char *dir = xasprintf("%s/server", cfg->state_dir);
	_cleanup_free_ char *lockp = xasprintf("%s/server.lock", dir);
	_cleanup_close_ int lfd = -1;
	if (sbx__mkdir_p(dir, 0700, &err) < 0)
		goto out;
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
	sbx__srv_builds_free(srv);
	sbx__srv_state_close(srv);
	sbx_runtime_free(srv->rt);
	free(srv->v);
	free(srv->key_path);
	free(srv->api_key);
	free(srv);
	return rc;
}
