/* SPDX-License-Identifier: MIT */
/*
 * The creation pipeline against real sandboxes through the `faulty`
 * provider: retry counts, the semaphore bound, backoff freeing the slot,
 * cancellation and deadlines leaving nothing (nor reading the caller's spec
 * afterwards, for plain creates and episodes), keepalive, labels, and a soak.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sys/faulty.h>
#include <sbx/task.h>

#include "common.h"

static void osetup(void)
{
	setup();
	cr_assert_eq(sbx_faulty_register(NULL), 0);
	setenv("SBX_BACKOFF_BASE_S", "0.01", 1);
	setenv("SBX_BACKOFF_CAP_S", "0.05", 1);
}

TestSuite(orchestration, .init = osetup, .fini = teardown);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static sbx_sandbox_opts fopts(void)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.provider = "faulty";
	return o;
}

static size_t count_live(void)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, "faulty", NULL, NULL), 0);
	sbx_sandbox_info_free(v, n);
	return n;
}

Test(orchestration, throttles_are_retried_other_errors_are_not)
{
	sbx_faulty_config c = { .seed = 1, .throttle_first = 3 };
	sbx_faulty_configure(&c);
	sbx_sandbox_opts o = fopts();
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	sbx_sandbox *sb = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, NULL), 0);
	cr_assert_eq(ctl.attempts, 4, "3 throttles + 1 success = 4 calls, got %u", ctl.attempts);
	destroy(sb);

	setenv("SBX_CREATE_MAX_RETRIES", "2", 1);
	c = (sbx_faulty_config){ .seed = 1, .throttle_rate = 1.0 };
	sbx_faulty_configure(&c);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err), -EAGAIN);
	cr_assert_eq(ctl.attempts, 3, "max_retries 2 -> 3 calls, got %u", ctl.attempts);
	cr_assert_not_null(strstr(err->msg, "throttled after 3 attempts"), "%s", err->msg);
	sbx_error_free(err);
	unsetenv("SBX_CREATE_MAX_RETRIES");

	c = (sbx_faulty_config){ .seed = 1, .error_rate = 1.0 };
	sbx_faulty_configure(&c);
	err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err), -EIO);
	cr_assert_eq(ctl.attempts, 1, "a non-throttle error fails at once");
	sbx_error_free(err);

	/* extra patterns classify provider-specific wordings */
	c = (sbx_faulty_config){ .seed = 1, .error_rate = 1.0 };
	sbx_faulty_configure(&c);
	setenv("SBX_THROTTLE_PATTERNS", "create failed (injected)", 1);
	setenv("SBX_CREATE_MAX_RETRIES", "1", 1);
	err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err), -EIO);
	cr_assert_eq(ctl.attempts, 2);
	sbx_error_free(err);
	unsetenv("SBX_THROTTLE_PATTERNS");
	unsetenv("SBX_CREATE_MAX_RETRIES");
}

struct worker {
	sbx_sandbox_opts o;
	int ok;
	double done_at;
	sbx_create_ctl ctl;
};

static void *create_one(void *arg)
{
	struct worker *w = arg;
	sbx_sandbox *sb = NULL;
	if (sbx_sandbox_create_ex(&sb, rt, &w->o, &w->ctl, NULL) == 0) {
		w->ok = 1;
		w->done_at = now();
		sbx_sandbox_destroy(sb, NULL);
		sbx_sandbox_free(sb);
	}
	return NULL;
}

Test(orchestration, semaphore_bounds_concurrent_creates)
{
	setenv("SBX_CREATE_CONCURRENCY", "3", 1);
	sbx_runtime *r2 = sbx_test_runtime(); /* the limit is read when the provider starts */
	sbx_runtime *keep = rt;
	rt = r2;
	sbx_faulty_config c = { .seed = 2, .slow_ms = 60 };
	sbx_faulty_configure(&c);
	pthread_t th[12];
	struct worker w[12];
	for (int i = 0; i < 12; i++) {
		w[i] = (struct worker){ .o = fopts(), .ctl = SBX_CREATE_CTL_INIT };
		cr_assert_eq(pthread_create(&th[i], NULL, create_one, &w[i]), 0);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(th[i], NULL);
		cr_assert(w[i].ok);
	}
	sbx_faulty_stats st;
	sbx_faulty_stats_get(&st);
	cr_assert(st.peak_inflight <= 3, "peak in flight %u > limit 3", st.peak_inflight);
	cr_assert(st.peak_inflight >= 2, "creates never overlapped (peak %u)", st.peak_inflight);
	cr_assert_eq(count_live(), 0);
	rt = keep;
	sbx_test_runtime_free(r2);
	unsetenv("SBX_CREATE_CONCURRENCY");
}

Test(orchestration, backoff_releases_the_slot)
{
	setenv("SBX_CREATE_CONCURRENCY", "1", 1);
	setenv("SBX_BACKOFF_BASE_S", "0.4", 1);
	setenv("SBX_BACKOFF_CAP_S", "0.4", 1);
	sbx_runtime *r2 = sbx_test_runtime();
	sbx_runtime *keep = rt;
	rt = r2;
	/* A's first create is throttled; B must get the single slot during A's backoff. */
	sbx_faulty_config c = { .seed = 3, .throttle_first = 1 };
	sbx_faulty_configure(&c);
	struct worker a = { .o = fopts(), .ctl = SBX_CREATE_CTL_INIT };
	struct worker b = { .o = fopts(), .ctl = SBX_CREATE_CTL_INIT };
	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, create_one, &a), 0);
	usleep(50000);
	cr_assert_eq(pthread_create(&tb, NULL, create_one, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert(a.ok && b.ok);
	cr_assert_eq(a.ctl.attempts, 2);
	cr_assert(b.done_at < a.done_at, "B waited for A's backoff to end");
	rt = keep;
	sbx_test_runtime_free(r2);
	unsetenv("SBX_CREATE_CONCURRENCY");
	setenv("SBX_BACKOFF_BASE_S", "0.01", 1);
	setenv("SBX_BACKOFF_CAP_S", "0.05", 1);
}

struct firer {
	sbx_cancel *c;
	int delay_ms;
};

static void *fire_later(void *arg)
{
	struct firer *f = arg;
	usleep((useconds_t)f->delay_ms * 1000);
	sbx_cancel_fire(f->c);
	return NULL;
}

Test(orchestration, cancel_during_create_leaves_nothing)
{
	sbx_faulty_config c = { .seed = 4, .slow_ms = 400 };
	sbx_faulty_configure(&c);
	sbx_sandbox_opts o = fopts();
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.cancel = sbx_cancel_new();
	struct firer f = { ctl.cancel, 50 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, fire_later, &f), 0);
	double t0 = now();
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err), -ECANCELED);
	cr_assert(now() - t0 < 0.3, "cancel did not return promptly (%.3f s)", now() - t0);
	sbx_error_free(err);
	pthread_join(th, NULL);
	/* the provider finishes the create later; the pipeline destroys it */
	for (int i = 0; i < 100; i++) {
		sbx_faulty_stats st;
		sbx_faulty_stats_get(&st);
		if (st.creates == 1 && st.live == 0 && i > 5)
			break;
		usleep(20000);
	}
	sbx_faulty_stats st;
	sbx_faulty_stats_get(&st);
	cr_assert_eq(st.live, 0, "the orphan was not destroyed");
	cr_assert_eq(count_live(), 0);
	sbx_cancel_free(ctl.cancel);

	/* a deadline works the same way */
	ctl = (sbx_create_ctl)SBX_CREATE_CTL_INIT;
	ctl.timeout_s = 0.05;
	err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err), -ETIMEDOUT);
	sbx_error_free(err);
	usleep(600000);
	cr_assert_eq(count_live(), 0);
}

static char *scribbled(char *s)
{
	memset(s, 'X', strlen(s));
	return s;
}

/* Waits (bounded, a hang guard) until the faulty provider's late create has
 * returned and what it made was destroyed by the pipeline. */
static void wait_reaped(sbx_faulty_stats *st)
{
	for (int i = 0; i < 1500; i++) {
		sbx_faulty_stats_get(st);
		if (st->returned == 1 && st->destroyed == 1 && st->live == 0)
			return;
		usleep(20000);
	}
}

/* Issue 14: the spec is borrowed for the call only. The cancelled create goes
 * on in its worker (create.c -> faulty.c -> local.c -> the image store) after
 * the caller has overwritten and freed every string of its spec; under ASan a
 * read of the caller's memory is a heap-use-after-free. */
Test(orchestration, cancelled_create_outlives_the_callers_spec)
{
	sbx_faulty_config c = { .seed = 8, .slow_ms = 400 };
	sbx_faulty_configure(&c);
	sbx_sandbox_opts *o = calloc(1, sizeof(*o));
	*o = fopts();
	char *provider = strdup("faulty"), *image = strdup("busybox"), *workdir = strdup("/tmp");
	char *user = strdup("root"), *host = strdup("late-one"), *task = strdup("late-task");
	char **env = calloc(3, sizeof(*env)), **labels = calloc(2, sizeof(*labels));
	env[0] = strdup("A=1");
	env[1] = strdup("B=2");
	labels[0] = strdup("team=rl");
	o->provider = provider;
	o->image = image;
	o->workdir = workdir;
	o->user = user;
	o->hostname = host;
	o->env = (const char *const *)env;
	o->labels = (const char *const *)labels;
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.cancel = sbx_cancel_new();
	ctl.task = task;
	struct firer f = { ctl.cancel, 50 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, fire_later, &f), 0);
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, o, &ctl, &err), -ECANCELED);
	sbx_error_free(err);
	pthread_join(th, NULL);
	char *strs[] = { provider, image, workdir, user, host, task, env[0], env[1], labels[0] };
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		free(scribbled(strs[i]));
	free(env);
	free(labels);
	memset(o, 0x55, sizeof(*o));
	free(o);
	sbx_cancel_free(ctl.cancel);
	sbx_faulty_stats st;
	wait_reaped(&st);
	cr_assert_eq(st.returned, 1, "the late create never returned");
	cr_assert_eq(st.destroyed, 1, "the late create made nothing, or it was not destroyed");
	cr_assert_eq(st.live, 0);
	cr_assert_eq(count_live(), 0);
}

/* Issue 14, for episodes: the episode clock cuts a slow create, and
 * sbx_episode_run returns and frees its image name while the create goes on
 * in its worker; the caller then frees the task and the labels. Under ASan a
 * read of any of them by the late create is a heap-use-after-free. */
Test(orchestration, episode_create_cut_by_the_clock_outlives_image_and_task)
{
	sbx_faulty_config c = { .seed = 9, .slow_ms = 2500 };
	sbx_faulty_configure(&c);
	char *dir = NULL;
	cr_assert(asprintf(&dir, "%s/tests/fixtures/tasks/workdir", getenv("SBX_SOURCE_ROOT")) > 0);
	sbx_task *t = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, NULL), 0, "load %s", dir);
	free(dir);
	char *label = strdup("team=rl");
	const char *labels[] = { label, NULL };
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.provider = "faulty";
	o.agent = "nop";
	o.max_episode_s = 1;
	o.labels = labels;
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_run(&r, rt, t, &o, NULL), 0);
	cr_assert_eq(r.status, SBX_EPISODE_TIME_LIMIT, "status %s: %s", sbx_episode_status_name(r.status),
		     r.detail ? r.detail : "-");
	cr_assert_null(r.sandbox_id);
	sbx_episode_result_free(&r);
	sbx_task_free(t);
	free(scribbled(label));
	sbx_faulty_stats st;
	wait_reaped(&st);
	cr_assert_eq(st.returned, 1, "the late create never returned");
	cr_assert_eq(st.destroyed, 1, "the late create made nothing, or it was not destroyed");
	cr_assert_eq(st.live, 0);
	cr_assert_eq(count_live(), 0);
}

Test(orchestration, keepalive_renews_and_gives_up_after_failures)
{
	setenv("SBX_KEEPALIVE_INTERVAL_S", "0.05", 1);
	sbx_faulty_config c = { .seed = 5 };
	sbx_faulty_configure(&c);
	sbx_sandbox_opts o = fopts();
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.keepalive = 1;
	sbx_sandbox *sb = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, NULL), 0);
	usleep(400000);
	sbx_faulty_stats st;
	sbx_faulty_stats_get(&st);
	cr_assert(st.set_timeouts >= 3, "only %u renewals in 0.4 s", st.set_timeouts);
	destroy(sb);
	sbx_faulty_stats_get(&st);
	unsigned after = st.set_timeouts;
	usleep(200000);
	sbx_faulty_stats_get(&st);
	cr_assert_eq(st.set_timeouts, after, "renewed a destroyed sandbox");

	c = (sbx_faulty_config){ .seed = 5, .set_timeout_fail = 1 };
	sbx_faulty_configure(&c);
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, NULL), 0);
	usleep(500000);
	sbx_faulty_stats_get(&st);
	cr_assert_eq(st.set_timeouts, 3, "keepalive should stop after 3 consecutive failures, made %u",
		     st.set_timeouts);
	destroy(sb);
	unsetenv("SBX_KEEPALIVE_INTERVAL_S");
}

Test(orchestration, every_sandbox_is_labelled)
{
	sbx_faulty_config c = { .seed = 6 };
	sbx_faulty_configure(&c);
	setenv("SBX_RUN_ID", "run-7", 1);
	setenv("SBX_LAUNCHER", "alice", 1);
	sbx_sandbox_opts o = fopts();
	const char *labels[] = { "team=rl", NULL };
	o.labels = labels;
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.task = "fix-git";
	sbx_sandbox *sb = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, NULL), 0);
	const char *filter[] = { "sbx.task=fix-git", "sbx.run_id=run-7", "sbx.launcher=alice", "team=rl", NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, "faulty", filter, NULL), 0);
	cr_assert_eq(n, 1);
	sbx_sandbox_info_free(v, n);
	destroy(sb);
	unsetenv("SBX_RUN_ID");
	unsetenv("SBX_LAUNCHER");
}

/* ---- soak: 2000 episodes, 20% throttles, 5% cancellations ---------------- */

#define SOAK_WORKERS 8

static atomic_int next_episode, scored, cancelled, failed;
static int soak_total;

static void *soak_worker(void *arg)
{
	(void)arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	for (;;) {
		int i = atomic_fetch_add(&next_episode, 1);
		if (i >= soak_total)
			return NULL;
		sbx_sandbox_opts o = fopts();
		sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
		ctl.cancel = sbx_cancel_new();
		int cancel = rand_r(&seed) % 100 < 5;
		pthread_t th;
		struct firer f = { ctl.cancel, rand_r(&seed) % 4 };
		if (cancel && pthread_create(&th, NULL, fire_later, &f) != 0) {
			sbx_cancel_fire(ctl.cancel); /* no thread: cancel at once */
			cancel = 0;
		}
		sbx_sandbox *sb = NULL;
		int r = sbx_sandbox_create_ex(&sb, rt, &o, &ctl, NULL);
		if (cancel)
			pthread_join(th, NULL);
		if (r == 0 && sbx_cancel_fired(ctl.cancel)) {
			/* cancelled after the create: the episode ends here */
			sbx_sandbox_destroy(sb, NULL);
			sbx_sandbox_free(sb);
			r = -ECANCELED;
		}
		if (r == 0) {
			sbx_exec_opts e = SBX_EXEC_OPTS_INIT;
			const char *argv[] = { "true", NULL };
			e.argv = argv;
			sbx_exec_result res;
			if (sbx_sandbox_exec(&res, sb, &e, NULL) == 0 && res.exit_code == 0)
				atomic_fetch_add(&scored, 1);
			else
				atomic_fetch_add(&failed, 1);
			sbx_exec_result_free(&res);
			sbx_sandbox_destroy(sb, NULL);
			sbx_sandbox_free(sb);
		} else if (r == -ECANCELED) {
			atomic_fetch_add(&cancelled, 1);
		} else {
			atomic_fetch_add(&failed, 1);
		}
		sbx_cancel_free(ctl.cancel);
	}
}

Test(orchestration, soak_2000_episodes_leave_nothing, .timeout = 900)
{
	soak_total = getenv("SBX_SOAK_EPISODES") ? atoi(getenv("SBX_SOAK_EPISODES")) : 2000;
	setenv("SBX_CREATE_MAX_RETRIES", "30", 1);
	sbx_faulty_config c = { .seed = 7, .throttle_rate = 0.20 };
	sbx_faulty_configure(&c);
	pthread_t th[SOAK_WORKERS];
	for (int i = 0; i < SOAK_WORKERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, soak_worker, NULL), 0);
	for (int i = 0; i < SOAK_WORKERS; i++)
		pthread_join(th[i], NULL);
	usleep(300000);
	sbx_faulty_stats st;
	sbx_faulty_stats_get(&st);
	fprintf(stderr, "soak: %d episodes, %d scored, %d cancelled, %d failed; %u creates, %u throttled, "
			"peak %u in flight\n",
		soak_total, scored, cancelled, failed, st.creates, st.throttled, st.peak_inflight);
	cr_assert_eq(failed, 0);
	cr_assert_eq(scored + cancelled, soak_total);
	cr_assert(st.throttled > (unsigned)soak_total / 10, "throttles were not injected");
	cr_assert(cancelled > 0);
	cr_assert_eq(st.live, 0, "%u sandboxes left alive", st.live);
	cr_assert_eq(count_live(), 0);
	unsetenv("SBX_CREATE_MAX_RETRIES");
}
