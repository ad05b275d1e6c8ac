/* SPDX-License-Identifier: MIT */
/*
 * Provider conformance, lifecycle: create/open/destroy, labels and list,
 * destroy by id, GC of a leaked sandbox, TTL and keepalive, cancel during
 * create, and throttle backoff.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

TestSuite(conf_life, .init = conf_setup, .fini = conf_teardown, .timeout = 120);

static int has_label(const sbx_sandbox_info *in, const char *kv)
{
	for (size_t i = 0; in->labels && in->labels[i]; i++)
		if (!strcmp(in->labels[i], kv))
			return 1;
	return 0;
}

/* What list says of one sandbox of this run. */
struct row {
	char state[32];
	int leaked;
	double expires_at;
	int has_role_a, has_role_b, has_team, has_run;
};

/* Fills *out from the row of `id` among this run's sandboxes; 0 if not listed. */
static int find_row(struct row *out, const char *id)
{
	const char *filter[] = { C.label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &n, C.rt, C.name, filter, &err), 0, "list: %s", ERRMSG(err));
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].id, id))
			continue;
		found = 1;
		memset(out, 0, sizeof(*out));
		snprintf(out->state, sizeof(out->state), "%s", v[i].state ? v[i].state : "");
		out->leaked = v[i].leaked;
		out->expires_at = v[i].expires_at;
		out->has_role_a = has_label(&v[i], "conf.role=a");
		out->has_role_b = has_label(&v[i], "conf.role=b");
		out->has_team = has_label(&v[i], "conf.team=rl");
		out->has_run = has_label(&v[i], C.label);
	}
	sbx_sandbox_info_free(v, n);
	return found;
}

Test(conf_life, create_open_destroy)
{
	sbx_sandbox *sb = conf_create(NULL);
	cr_assert(sbx_sandbox_id(sb) && *sbx_sandbox_id(sb));
	cr_assert_str_eq(sbx_sandbox_provider(sb), C.name);
	char id[128];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	struct row row;
	cr_assert(find_row(&row, id), "%s: a new sandbox is listed", C.name);
	cr_assert_str_eq(row.state, "running");
	cr_assert_eq(row.leaked, 0, "our own live sandbox is not leaked");
	cr_assert_gt(row.expires_at, 0, "TTL 300 gives an expiry");

	sbx_sandbox *again = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, C.rt, C.name, id, &err), 0, "%s: open: %s", C.name, ERRMSG(err));
	cr_assert_str_eq(sbx_sandbox_id(again), id);
	sbx_exec_result r = conf_sh(again, "echo reopened");
	cr_assert_str_eq(r.out, "reopened\n");
	sbx_exec_result_free(&r);
	sbx_sandbox_free(again); /* frees the handle only */
	r = conf_sh(sb, "echo alive");
	cr_assert_str_eq(r.out, "alive\n", "%s: freeing a second handle left the sandbox", C.name);
	sbx_exec_result_free(&r);

	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0, "%s", ERRMSG(err));
	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0, "%s: destroy is idempotent: %s", C.name, ERRMSG(err));
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "true";
	sbx_exec_result x;
	int rc = sbx_sandbox_exec(&x, sb, &o, &err);
	cr_assert_lt(rc, 0, "%s: exec on a destroyed sandbox succeeded", C.name);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_free(sb);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0, "%s: destroyed sandbox still listed", C.name);
	rc = sbx_sandbox_open(&again, C.rt, C.name, id, &err);
	cr_assert_eq(rc, -ENOENT, "%s: open of a destroyed id: %d %s", C.name, rc, ERRMSG(err));
	sbx_error_free(err);
	err = NULL;
	rc = sbx_sandbox_destroy_id(C.rt, C.name, id, &err);
	cr_assert_eq(rc, -ENOENT, "%s: destroy_id of a destroyed id: %d %s", C.name, rc, ERRMSG(err));
	sbx_error_free(err);
}

Test(conf_life, labels_list_and_destroy_id)
{
	sbx_sandbox_opts o = conf_opts();
	const char *la[] = { C.label, "conf.role=a", "conf.team=rl", NULL };
	const char *lb[] = { C.label, "conf.role=b", "conf.team=rl", NULL };
	o.labels = la;
	sbx_sandbox *a = conf_create(&o);
	o.labels = lb;
	sbx_sandbox *b = conf_create(&o);
	cr_assert_eq(conf_count(NULL), 2);
	cr_assert_eq(conf_count("conf.team=rl"), 2);
	cr_assert_eq(conf_count("conf.role=a"), 1);
	cr_assert_eq(conf_count("conf.role=c"), 0);
	cr_assert_eq(conf_count("conf.role"), 0, "a filter is k=v, not a key");
	struct row row;
	cr_assert(find_row(&row, sbx_sandbox_id(a)));
	cr_assert(row.has_role_a && row.has_team && row.has_run, "%s: labels come back as given", C.name);
	cr_assert(!row.has_role_b);
	/* filtering happens for every provider alike: a filter matching another run finds none of ours */
	const char *other[] = { "conf.run=some-other-run", NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, C.rt, C.name, other, NULL), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert(strcmp(v[i].id, sbx_sandbox_id(a)) && strcmp(v[i].id, sbx_sandbox_id(b)));
	sbx_sandbox_info_free(v, n);

	char id[128];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(a));
	sbx_error *err = NULL;
	int r = sbx_sandbox_destroy_id(C.rt, C.name, id, &err);
	cr_assert_eq(r, 0, "%s: destroy_id: %d %s", C.name, r, ERRMSG(err));
	cr_assert_eq(conf_wait_count("conf.role=a", 0, 10), 0, "%s: destroy_id left it listed", C.name);
	cr_assert_eq(conf_count("conf.role=b"), 1, "the other one stays");
	sbx_sandbox_destroy(a, NULL); /* the stale handle: idempotent or an error, never a crash */
	sbx_sandbox_free(a);
	conf_destroy(b);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0);
}

/* sbx_sandbox_info_get: the listing's row of one sandbox, whichever way the
 * provider answers it (its own `info` op, or the core's list and pick). */
Test(conf_life, info_get_is_the_listing_row)
{
	sbx_sandbox_opts o = conf_opts();
	const char *la[] = { C.label, "conf.role=a", NULL };
	o.labels = la;
	sbx_sandbox *a = conf_create(&o);
	sbx_sandbox_info *one = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_info_get(&one, a, &err);
	cr_assert_eq(r, 0, "%s: info_get: %d %s", C.name, r, ERRMSG(err));
	cr_assert_str_eq(one->id, sbx_sandbox_id(a));
	cr_assert(has_label(one, "conf.role=a") && has_label(one, C.label), "%s: its labels", C.name);
	const char *filter[] = { C.label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, C.rt, C.name, filter, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(v[0].id, one->id);
	cr_assert_str_eq(v[0].provider, one->provider, "%s: the row's provider", C.name);
	cr_assert_str_eq(v[0].state, one->state);
	cr_assert_str_eq(v[0].image ? v[0].image : "", one->image ? one->image : "");
	cr_assert_eq(v[0].pid, one->pid, "%s: the same init pid", C.name);
	cr_assert_eq(v[0].leaked, one->leaked);
	sbx_sandbox_info_free(v, n);
	sbx_sandbox_info_free(one, 1);
	/* Gone behind this handle's back (destroy_id elsewhere): the provider says so. */
	char id[128];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(a));
	cr_assert_eq(sbx_sandbox_destroy_id(C.rt, C.name, id, NULL), 0);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0);
	one = NULL;
	r = sbx_sandbox_info_get(&one, a, &err);
	cr_assert_eq(r, -ESRCH, "%s: info_get of a sandbox destroyed by id: %d %s", C.name, r, ERRMSG(err));
	cr_assert_null(one);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_destroy(a, NULL); /* the stale handle: idempotent or an error */
	r = sbx_sandbox_info_get(&one, a, &err);
	cr_assert_eq(r, -ESRCH, "%s: info_get of a destroyed handle: %d %s", C.name, r, ERRMSG(err));
	cr_assert_null(one);
	sbx_error_free(err);
	sbx_sandbox_free(a);
}

Test(conf_life, gc_collects_a_leaked_sandbox)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		/* The owner: its own runtime, then killed holding the sandbox. */
		close(p[0]);
		sbx_runtime *rt = conf_runtime();
		sbx_sandbox_opts o = conf_opts();
		const char *l[] = { C.label, "conf.case=gc", NULL };
		o.labels = l;
		sbx_sandbox *sb = NULL;
		if (sbx_sandbox_create(&sb, rt, &o, NULL) < 0)
			_exit(1);
		char id[128];
		size_t n = (size_t)snprintf(id, sizeof(id), "%s\n", sbx_sandbox_id(sb));
		if (write(p[1], id, n) != (ssize_t)n)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	char id[128] = "";
	FILE *f = fdopen(p[0], "r");
	int got = fgets(id, sizeof(id), f) != NULL;
	fclose(f);
	kill(child, SIGKILL);
	int st = 0;
	waitpid(child, &st, 0);
	cr_assert(got, "%s: the owner process could not create a sandbox (exit %d)", C.name,
		  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	id[strcspn(id, "\n")] = '\0';
	struct row row;
	cr_assert(find_row(&row, id), "%s: the orphan %s is listed", C.name, id);
	cr_assert_eq(row.leaked, 1, "%s: a sandbox whose owner died is leaked (state %s)", C.name, row.state);
	/* gc: what `sbx gc` does, destroy_id on every leaked row */
	const char *filter[] = { C.label, NULL };
	sbx_sandbox_info *v = NULL;
	size_t n = 0, removed = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &n, C.rt, C.name, filter, &err), 0);
	for (size_t i = 0; i < n; i++) {
		if (!v[i].leaked)
			continue;
		int r = sbx_sandbox_destroy_id(C.rt, C.name, v[i].id, &err);
		cr_assert_eq(r, 0, "%s: gc %s: %d %s", C.name, v[i].id, r, ERRMSG(err));
		removed++;
	}
	sbx_sandbox_info_free(v, n);
	cr_assert_eq(removed, 1, "%s: gc removed %zu sandboxes, want 1", C.name, removed);
	cr_assert_eq(conf_wait_count("conf.case=gc", 0, 10), 0, "%s: the collected sandbox is still listed", C.name);
	cr_assert_eq(sbx_sandbox_destroy_id(C.rt, C.name, id, &err), -ENOENT);
	sbx_error_free(err);
}

/* Waits (bounded) until the sandbox no longer runs commands; the exec error. */
static int wait_ended(sbx_sandbox *sb, double max_s)
{
	double until = conf_now() + max_s;
	for (;;) {
		sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
		o.shell = "true";
		o.timeout_s = 5;
		sbx_exec_result r;
		sbx_error *err = NULL;
		int rc = sbx_sandbox_exec(&r, sb, &o, &err);
		if (rc < 0)
			fprintf(stderr, "%s: exec after expiry: %d %s (http %d)\n", C.name, rc, ERRMSG(err),
				err ? err->http_status : 0);
		sbx_error_free(err);
		if (rc == 0)
			sbx_exec_result_free(&r);
		if (rc < 0 || conf_now() > until)
			return rc;
		conf_sleep(0.2);
	}
}

Test(conf_life, ttl_ends_the_sandbox)
{
	if (C.kind == CONF_DAYTONA)
		cr_skip_test("not applicable: Daytona's auto-stop interval is whole minutes (a 2 s TTL is 1 min)");
	/* one with a TTL in its spec, one shortened later with set_timeout */
	sbx_sandbox_opts o = conf_opts();
	o.ttl_s = 2;
	sbx_sandbox *a = conf_create(&o);
	sbx_sandbox *b = conf_create(NULL);
	sbx_error *err = NULL;
	int r = sbx_sandbox_set_timeout(b, 1, &err);
	cr_assert_eq(r, 0, "%s: set_timeout: %d %s", C.name, r, ERRMSG(err));
	int ra = wait_ended(a, 20), rb = wait_ended(b, 20);
	cr_assert_lt(ra, 0, "%s: a sandbox with ttl_s 2 still runs commands", C.name);
	cr_assert_lt(rb, 0, "%s: set_timeout(1) did not end the sandbox", C.name);
	/* an expired one is gone or shown as not running (local keeps it for gc) */
	struct row row;
	if (find_row(&row, sbx_sandbox_id(a))) {
		cr_assert(row.leaked == 1 && strcmp(row.state, "running"),
			  "%s: expired sandbox listed as %s leaked=%d", C.name, row.state, row.leaked);
		}
	sbx_sandbox_destroy(a, NULL);
	sbx_sandbox_destroy(b, NULL);
	sbx_sandbox_free(a);
	sbx_sandbox_free(b);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0, "%s: expired sandboxes left after destroy", C.name);
	/* 0 = never expire: set and still there */
	sbx_sandbox *c = conf_create(NULL);
	cr_assert_eq(sbx_sandbox_set_timeout(c, 0, &err), 0, "%s: set_timeout(0): %s", C.name, ERRMSG(err));
	sbx_exec_result x = conf_sh(c, "echo ok");
	cr_assert_str_eq(x.out, "ok\n");
	sbx_exec_result_free(&x);
	conf_destroy(c);
	/* e2b gave -EIO here (HTTP 502 "sandbox ... not found") until exec.c
	 * read that answer as gone */
	cr_assert(ra == -ESRCH && rb == -ESRCH, "%s: exec after expiry gives %d/%d, want -ESRCH", C.name, ra, rb);
}

Test(conf_life, keepalive_outlives_the_ttl)
{
	sbx_sandbox_opts o = conf_opts();
	o.ttl_s = 2; /* renewed every ttl/6 while the handle lives */
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.keepalive = 1;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create_ex(&sb, C.rt, &o, &ctl, &err);
	cr_assert_eq(r, 0, "%s: create_ex: %d %s", C.name, r, ERRMSG(err));
	cr_assert_eq(ctl.attempts, 1);
	/* well past the TTL, checked along the way */
	for (int i = 0; i < 8; i++) {
		conf_sleep(0.5);
		sbx_exec_result x = conf_sh(sb, "echo up");
		cr_assert_str_eq(x.out, "up\n", "%s: keepalive let the sandbox expire", C.name);
		sbx_exec_result_free(&x);
	}
	conf_destroy(sb);
}

struct firer {
	sbx_cancel *c;
	double delay;
	int after_throttles; /* fire once this many throttle warnings were logged (0 = by delay) */
};

static void *fire(void *arg)
{
	struct firer *f = arg;
	if (f->after_throttles) {
		double until = conf_now() + 30;
		while (conf_throttle_logs() < f->after_throttles && conf_now() < until)
			conf_sleep(0.005);
	} else {
		conf_sleep(f->delay);
	}
	sbx_cancel_fire(f->c);
	return NULL;
}

/* create_ex with a cancel fired by another thread; the result code. */
static int create_cancelled(sbx_sandbox **sb, struct firer *f, sbx_create_ctl *ctl)
{
	sbx_sandbox_opts o = conf_opts();
	const char *l[] = { C.label, "conf.case=cancel", NULL };
	o.labels = l;
	ctl->cancel = f->c;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, fire, f), 0);
	sbx_error *err = NULL;
	int r = sbx_sandbox_create_ex(sb, C.rt, &o, ctl, &err);
	pthread_join(th, NULL);
	cr_assert(r == 0 || r == -ECANCELED, "%s: cancelled create gave %d %s", C.name, r, ERRMSG(err));
	if (r == -ECANCELED)
		cr_assert_not_null(err);
	sbx_error_free(err);
	return r;
}

Test(conf_life, cancel_during_create_leaves_nothing)
{
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	sbx_sandbox *sb = NULL;
	/* fired before the call: nothing is attempted */
	struct firer f0 = { sbx_cancel_new(), 0, 0 };
	sbx_cancel_fire(f0.c);
	cr_assert_eq(create_cancelled(&sb, &f0, &ctl), -ECANCELED);
	/* Not asserted: the pipeline still starts one provider create for a
	 * token fired before the call (and destroys what it makes). */
	fprintf(stderr, "%s: a token fired before create_ex: %u provider call(s)\n", C.name, ctl.attempts);
	sbx_cancel_free(f0.c);
	int cancelled = 0;
	if (C.kind == CONF_FAULTY) {
		/* a slow create: the cancel lands inside the provider call */
		sbx_faulty_config fc = { .seed = 4, .slow_ms = 400 };
		sbx_faulty_configure(&fc);
		struct firer f = { sbx_cancel_new(), 0.05, 0 };
		cr_assert_eq(create_cancelled(&sb, &f, &ctl), -ECANCELED, "%s: a 400 ms create outran a cancel", C.name);
		cr_assert_eq(ctl.attempts, 1);
		sbx_cancel_free(f.c);
		/* the create finishes later and the pipeline destroys what it made */
		double until = conf_now() + 10;
		sbx_faulty_stats st;
		do {
			conf_sleep(0.05);
			sbx_faulty_stats_get(&st);
		} while ((st.creates < 1 || st.live > 0 || conf_count("conf.case=cancel") > 0) && conf_now() < until);
		cr_assert_eq(st.live, 0, "faulty: the orphaned create was not destroyed");
		cancelled++;
		fc = (sbx_faulty_config){ .seed = 4 };
		sbx_faulty_configure(&fc);
	}
	/* cancels racing the create at a spread of delays: each either wins
	 * (-ECANCELED, nothing may remain) or loses (a sandbox we then own) */
	static const double delays[] = { 0, 0.001, 0.003, 0.006, 0.012, 0.025, 0.05 };
	for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
		struct firer f = { sbx_cancel_new(), delays[i], 0 };
		int r = create_cancelled(&sb, &f, &ctl);
		if (r == 0)
			conf_destroy(sb);
		else
			cancelled++;
		sbx_cancel_free(f.c);
	}
	fprintf(stderr, "%s: %d of %zu racing cancels won\n", C.name, cancelled,
		sizeof(delays) / sizeof(delays[0]) + (C.kind == CONF_FAULTY));
	/* a deadline works like a cancel */
	ctl = (sbx_create_ctl)SBX_CREATE_CTL_INIT;
	ctl.timeout_s = 0.0001;
	sbx_sandbox_opts o = conf_opts();
	sbx_error *err = NULL;
	int r = sbx_sandbox_create_ex(&sb, C.rt, &o, &ctl, &err);
	cr_assert(r == -ETIMEDOUT || r == 0, "%s: deadline create gave %d %s", C.name, r, ERRMSG(err));
	sbx_error_free(err);
	if (r == 0)
		conf_destroy(sb);
	/* Orphans are made and destroyed in the background, and nothing says
	 * when that is over: wait for none to be listed, give a create still
	 * running time to finish, and look again. */
	size_t left = conf_wait_count(NULL, 0, 15);
	cr_assert_eq(left, 0, "%s: %zu sandboxes left after cancelled creates", C.name, left);
	conf_sleep(1.0);
	left = conf_wait_count(NULL, 0, 15);
	cr_assert_eq(left, 0, "%s: %zu sandboxes appeared after cancelled creates", C.name, left);
}

/*
 * The caller may free the runtime once create_ex returned -ECANCELED: the
 * pipeline's abandoned worker must not touch it afterwards (before main's
 * create.c fix, ASan saw a heap-use-after-free of the provider context in
 * local_create and e2b's sb_new via run_attempt, freed by sbx_runtime_free).
 * The sleep after the free keeps this process alive while a worker would
 * still run, so a crash is this test's, not a later one's.
 */
Test(conf_life, free_runtime_right_after_a_cancel)
{
	if (C.kind == CONF_FAULTY) {
		sbx_faulty_config fc = { .seed = 4, .slow_ms = 300 };
		sbx_faulty_configure(&fc);
	}
	static const double delays[] = { 0.0005, 0.001, 0.002, 0.004, 0.008, 0.02 };
	for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
		sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
		struct firer f = { sbx_cancel_new(), delays[i], 0 };
		sbx_sandbox *sb = NULL;
		if (create_cancelled(&sb, &f, &ctl) == 0)
			conf_destroy(sb);
		sbx_cancel_free(f.c);
	}
	sbx_runtime_free(C.rt);
	C.rt = NULL;
	conf_sleep(1.5);
	/* what the abandoned creates left: collected by a fresh runtime */
	C.rt = conf_runtime();
	size_t left = conf_wait_count("conf.case=cancel", 0, 15);
	cr_assert_eq(left, 0, "%s: %zu sandboxes leaked by creates cancelled before a runtime free", C.name, left);
}

struct bg_create {
	sbx_create_ctl ctl;
	sbx_sandbox *sb;
	int r;
};

static void *bg_create_run(void *arg)
{
	struct bg_create *b = arg;
	sbx_sandbox_opts o = conf_opts();
	b->r = sbx_sandbox_create_ex(&b->sb, C.rt, &o, &b->ctl, NULL);
	return NULL;
}

Test(conf_life, throttles_are_retried_with_backoff)
{
	if (C.kind == CONF_LOCAL)
		cr_skip_test("not applicable: nothing throttles a local create (no quota, no 429) to provoke");
	sbx_error *err = NULL;
	if (C.kind == CONF_FAULTY) {
		sbx_faulty_config fc = { .seed = 1, .throttle_first = 2 };
		sbx_faulty_configure(&fc);
		sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
		sbx_sandbox_opts o = conf_opts();
		sbx_sandbox *sb = NULL;
		int r = sbx_sandbox_create_ex(&sb, C.rt, &o, &ctl, &err);
		cr_assert_eq(r, 0, "faulty: create after 2 throttles: %d %s", r, ERRMSG(err));
		cr_assert_eq(ctl.attempts, 3, "faulty: 2 throttles + 1 success = 3 calls, got %u", ctl.attempts);
		cr_assert_eq(conf_throttle_logs(), 2, "each retry is logged");
		conf_destroy(sb);
		setenv("SBX_CREATE_MAX_RETRIES", "1", 1);
		fc = (sbx_faulty_config){ .seed = 1, .throttle_rate = 1.0 };
		sbx_faulty_configure(&fc);
		r = sbx_sandbox_create_ex(&sb, C.rt, &o, &ctl, &err);
		cr_assert_eq(r, -EAGAIN, "faulty: always throttled: %d", r);
		cr_assert_eq(ctl.attempts, 2, "max retries 1 = 2 calls, got %u", ctl.attempts);
		cr_assert_eq(err->http_status, 429);
		sbx_error_free(err);
		unsetenv("SBX_CREATE_MAX_RETRIES");
		cr_assert_eq(conf_count(NULL), 0);
		return;
	}
	/* e2b: a server that holds one sandbox at most answers 429 past it */
	conf_restart_server("--max-sandboxes=1");
	sbx_sandbox *first = conf_create(NULL);
	struct bg_create b = { .ctl = SBX_CREATE_CTL_INIT };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, bg_create_run, &b), 0);
	double until = conf_now() + 30;
	while (conf_throttle_logs() < 2 && conf_now() < until)
		conf_sleep(0.005);
	cr_assert_geq(conf_throttle_logs(), 2, "e2b: the second create was never throttled");
	conf_destroy(first); /* the slot frees: the retry succeeds */
	pthread_join(th, NULL);
	cr_assert_eq(b.r, 0, "e2b: throttled create failed once the slot freed: %d", b.r);
	cr_assert_geq(b.ctl.attempts, 3, "e2b: %u attempts", b.ctl.attempts);
	/* cancel during backoff */
	int before = conf_throttle_logs();
	struct firer f = { sbx_cancel_new(), 0, before + 1 };
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	sbx_sandbox *sb = NULL;
	cr_assert_eq(create_cancelled(&sb, &f, &ctl), -ECANCELED, "e2b: a create in backoff ignored the cancel");
	cr_assert_geq(ctl.attempts, 1);
	sbx_cancel_free(f.c);
	/* retries run out */
	setenv("SBX_CREATE_MAX_RETRIES", "1", 1);
	ctl = (sbx_create_ctl)SBX_CREATE_CTL_INIT;
	sbx_sandbox_opts o = conf_opts();
	int r = sbx_sandbox_create_ex(&sb, C.rt, &o, &ctl, &err);
	cr_assert_eq(r, -EAGAIN, "e2b: over the limit: %d %s", r, ERRMSG(err));
	cr_assert_eq(ctl.attempts, 2);
	cr_assert_eq(err->http_status, 429);
	sbx_error_free(err);
	unsetenv("SBX_CREATE_MAX_RETRIES");
	conf_destroy(b.sb);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0);
}

/*
 * Daytona's quota errors are 400s with a message, not 429s: a server told to
 * answer the next creates with "Total disk limit exceeded" makes the create
 * back off, and it succeeds when capacity returns.
 */
Test(conf_life, quota_errors_back_off_until_capacity_returns)
{
	if (C.kind != CONF_DAYTONA)
		cr_skip_test("not applicable: Daytona's disk-quota error (the server's knob is the Daytona API's)");
	setenv("SBX_SERVE_DAYTONA_FAIL_CREATES", "3", 1);
	conf_restart_server(NULL);
	unsetenv("SBX_SERVE_DAYTONA_FAIL_CREATES");
	int before = conf_throttle_logs();
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	sbx_sandbox_opts o = conf_opts();
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create_ex(&sb, C.rt, &o, &ctl, &err);
	cr_assert_eq(r, 0, "daytona: create after 3 quota errors: %d %s", r, ERRMSG(err));
	cr_assert_eq(ctl.attempts, 4, "3 quota errors + 1 success = 4 calls, got %u", ctl.attempts);
	cr_assert_eq(conf_throttle_logs() - before, 3, "each retry is logged as a throttle");
	sbx_exec_result x = conf_sh(sb, "echo up");
	cr_assert_str_eq(x.out, "up\n");
	sbx_exec_result_free(&x);
	conf_destroy(sb);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0);
}

/* A wrong key, given by value: refused (-EACCES) and in no error or log line. */
Test(conf_life, a_fake_key_appears_in_no_output)
{
	if (C.kind != CONF_DAYTONA)
		cr_skip_test("not applicable: the daytona provider's key handling (e2b's is in integration/secrets)");
	static const char fake[] = "dtn_fake0123456789abcdefSECRET";
	setenv("DAYTONA_API_KEY", fake, 1);
	setenv("SBX_LOG", "debug", 1);
	conf_secret = fake;
	sbx_runtime *rt = conf_runtime();
	sbx_sandbox_opts o = conf_opts();
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, rt, &o, &err);
	cr_assert_eq(r, -EACCES, "daytona: a wrong key gave %d %s", r, ERRMSG(err));
	cr_assert_null(strstr(ERRMSG(err), fake), "the key is in the error: %s", ERRMSG(err));
	cr_assert_null(strstr(ERRMSG(err), "SECRET"));
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	r = sbx_sandbox_list(&v, &n, rt, C.name, NULL, &err);
	cr_assert_eq(r, -EACCES);
	cr_assert_null(strstr(ERRMSG(err), fake));
	sbx_error_free(err);
	sbx_runtime_free(rt);
	conf_secret = NULL;
	unsetenv("DAYTONA_API_KEY");
	unsetenv("SBX_LOG");
	cr_assert_eq(conf_secret_leaks, 0, "the key was logged %d times", (int)conf_secret_leaks);
}

static int fd_count(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Episodes (create, exec, write, read, destroy) leave no sandbox and no fd. */
Test(conf_life, episodes_leave_nothing, .timeout = 1800)
{
	if (C.kind != CONF_DAYTONA)
		cr_skip_test("not applicable: e2b's and local's soaks are in integration/");
	const char *e = getenv("SBX_DAYTONA_EPISODES");
	int n = e ? (int)strtol(e, NULL, 10) : 0;
	if (n <= 0)
		n = 40;
	int base = 0;
	for (int i = 0; i < n; i++) {
		sbx_sandbox *sb = conf_create(NULL);
		sbx_error *err = NULL;
		cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/f", "x", 1, 0644, &err), 0, "%s", ERRMSG(err));
		sbx_exec_result r = conf_sh(sb, "cat /tmp/f");
		cr_assert_str_eq(r.out, "x");
		sbx_exec_result_free(&r);
		conf_destroy(sb);
		if (i == 1)
			base = fd_count(); /* after the HTTP client's pool warmed up */
	}
	int now = fd_count();
	cr_log_info("daytona: %d episodes: %d fds after the second, %d after the last", n, base, now);
	cr_assert_leq(now, base + 2, "daytona: fds %d after %d episodes, %d after the second", now, n, base);
	cr_assert_eq(conf_wait_count(NULL, 0, 10), 0, "daytona: sandboxes left after %d episodes", n);
}
