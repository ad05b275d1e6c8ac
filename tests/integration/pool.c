/* SPDX-License-Identifier: MIT */
/* Warm pools: hand-out, refill, spec mismatch, concurrent takers, runtime
 * free, the taker's TTL and labels, and no leak over many cycles. */
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>

#include "common.h"
#include "memcg.h"

TestSuite(pool, .init = setup, .fini = teardown);

static void add_pool(sbx_runtime *r, const sbx_sandbox_opts *spec, unsigned n)
{
	sbx_pool_opts po = SBX_POOL_OPTS_INIT;
	po.spec = spec;
	po.size = n;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_pool_add(r, &po, &err), 0, "pool add: %s", err ? err->msg : "?");
	cr_assert_eq(sbx_pool_wait(r, 120, &err), 0, "pool wait: %s", err ? err->msg : "?");
}

static sbx_sandbox *take(sbx_runtime *r, const sbx_sandbox_opts *spec)
{
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create(&sb, r, spec, &err), 0, "create: %s", err ? err->msg : "?");
	return sb;
}

/* The listing row of a sandbox (labels, expiry); caller frees with list_free. */
static sbx_sandbox_info *info_of(sbx_runtime *r, const char *id, sbx_sandbox_info **all, size_t *n)
{
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(all, n, r, NULL, NULL, &err), 0, "list: %s", err ? err->msg : "?");
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*all)[i].id, id))
			return &(*all)[i];
	return NULL;
}

static int has_label_key(char *const *labels, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; labels && labels[i]; i++)
		if (!strncmp(labels[i], key, k) && labels[i][k] == '=')
			return 1;
	return 0;
}

static int from_pool(sbx_runtime *r, sbx_sandbox *sb)
{
	sbx_sandbox_info *all = NULL;
	size_t n = 0;
	sbx_sandbox_info *i = info_of(r, sbx_sandbox_id(sb), &all, &n);
	cr_assert_not_null(i);
	int yes = has_label_key(i->labels, "sbx.pool");
	sbx_sandbox_info_free(all, n);
	return yes;
}

Test(pool, hands_out_then_refills)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	add_pool(rt, &o, 2);
	cr_assert_eq(sbx_pool_ready(rt), 2);
	sbx_sandbox *sb = take(rt, &o);
	cr_assert(from_pool(rt, sb), "a matching create is served from the pool");
	cr_assert_lt(sbx_pool_ready(rt), 2);
	int code = -1;
	char *out = sbx_test_sh(sb, "echo hi", &code);
	cr_assert_eq(code, 0);
	cr_assert_str_eq(out, "hi\n");
	free(out);
	destroy(sb);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_pool_wait(rt, 120, &err), 0, "refill: %s", err ? err->msg : "?");
	cr_assert_eq(sbx_pool_ready(rt), 2);
}

/* A pooled sandbox was warmed by the refill (the provider's `warm`): its
 * memory group, otherwise made by the first exec, is there with the spec's
 * limit and init in it before its taker runs anything. */
Test(pool, pooled_sandbox_is_warm)
{
	require_v1_memory();
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.memory_mb = 80;
	add_pool(rt, &o, 1);
	sbx_sandbox *sb = take(rt, &o);
	cr_assert(from_pool(rt, sb));
	char dir[512];
	cr_assert(memcg_dir(sb, dir, sizeof(dir)), "pooled sandbox %s has no memory group", sbx_sandbox_id(sb));
	cr_expect_eq(read_long(dir, "memory.limit_in_bytes"), 80L << 20);
	cr_expect_eq(read_long(dir, "cgroup.procs"), (long)sandbox_init_pid(sb), "init is not in %s", dir);
	int code = -1;
	free(sbx_test_sh(sb, "true", &code));
	cr_expect_eq(code, 0);
	destroy(sb);
}

Test(pool, mismatch_falls_back)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.memory_mb = 128;
	add_pool(rt, &o, 1);
	sbx_sandbox_opts other = SBX_SANDBOX_OPTS_INIT;
	other.image = "busybox";
	sbx_sandbox *sb = take(rt, &other);
	cr_assert_not(from_pool(rt, sb), "another spec is created cold");
	cr_assert_eq(sbx_pool_ready(rt), 1);
	destroy(sb);
	const char *labels[] = { "team=b", NULL };
	other = o;
	other.labels = labels;
	sb = take(rt, &other);
	cr_assert_not(from_pool(rt, sb), "other labels miss the pool");
	destroy(sb);
	sbx_pool_opts bad = SBX_POOL_OPTS_INIT;
	other = o;
	other.detach = 1;
	bad.spec = &other;
	bad.size = 1;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_pool_add(rt, &bad, &err), -EINVAL);
	sbx_error_free(err);
}

struct taker {
	const sbx_sandbox_opts *spec;
	sbx_sandbox *sb;
	int r;
};

static void *take_thread(void *arg)
{
	struct taker *t = arg;
	t->r = sbx_sandbox_create(&t->sb, rt, t->spec, NULL);
	return NULL;
}

Test(pool, concurrent_takers_get_distinct_sandboxes)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	add_pool(rt, &o, 4);
	enum { N = 6 };
	struct taker t[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		t[i] = (struct taker){ .spec = &o };
		cr_assert_eq(pthread_create(&th[i], NULL, take_thread, &t[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(t[i].r, 0);
	}
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			cr_assert_str_neq(sbx_sandbox_id(t[i].sb), sbx_sandbox_id(t[j].sb));
	for (int i = 0; i < N; i++)
		destroy(t[i].sb);
}

/* A live (not zombie) process. */
static int alive(pid_t pid)
{
	char path[64], st = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int ok = fscanf(f, "%*d (%*[^)]) %c", &st) == 1;
	fclose(f);
	return ok && st != 'Z' && st != 'X';
}

Test(pool, runtime_free_destroys_idle)
{
	sbx_runtime *r2 = sbx_test_runtime();
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	add_pool(r2, &o, 3);
	sbx_error *err = NULL;
	sbx_sandbox_info *all = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&all, &n, r2, NULL, NULL, &err), 0);
	cr_assert_eq(n, 3, "idle pooled sandboxes are listed");
	pid_t pids[3];
	for (size_t i = 0; i < 3; i++) {
		cr_assert(has_label_key(all[i].labels, "sbx.pool"));
		cr_assert_not(all[i].leaked, "an idle pooled sandbox is not leaked while its runtime lives");
		pids[i] = all[i].pid;
		cr_assert(alive(pids[i]));
	}
	sbx_sandbox_info_free(all, n);
	sbx_sandbox *sb = take(r2, &o);
	destroy(sb);
	sbx_test_runtime_free(r2);
	for (size_t i = 0; i < 3; i++)
		cr_assert_not(alive(pids[i]), "idle sandbox (init %d) outlived its runtime", (int)pids[i]);
}

Test(pool, ttl_and_labels_are_the_takers)
{
	const char *labels[] = { "team=a", NULL };
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.labels = labels;
	add_pool(rt, &o, 1);
	sbx_sandbox_opts mine = o;
	mine.ttl_s = 600;
	sbx_sandbox *sb = take(rt, &mine);
	sbx_sandbox_info *all = NULL;
	size_t n = 0;
	sbx_sandbox_info *i = info_of(rt, sbx_sandbox_id(sb), &all, &n);
	cr_assert_not_null(i);
	cr_assert(has_label_key(i->labels, "sbx.pool"), "served from the pool");
	cr_assert(has_label_key(i->labels, "team"), "the caller's label is there");
	cr_assert_gt(i->expires_at, 0, "the caller's TTL is set");
	sbx_sandbox_info_free(all, n);
	destroy(sb);
}

/* Mount namespaces the provider's namespace pool holds come and go with it. */
static int count_mnt_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char t[64];
		ssize_t k = readlinkat(dirfd(d), de->d_name, t, sizeof(t) - 1);
		n += k > 5 && !strncmp(t, "mnt:[", 5);
	}
	closedir(d);
	return n;
}

Test(pool, many_cycles_leak_nothing)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	add_pool(rt, &o, 2);
	sbx_sandbox *warm = take(rt, &o);
	destroy(warm);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_pool_wait(rt, 120, &err), 0);
	int fds0 = sbx_test_count_fds() - sbx_test_count_ns_fds() - count_mnt_fds();
	int pooled = 0;
	for (int i = 0; i < 200; i++) {
		sbx_sandbox *sb = take(rt, &o);
		pooled += from_pool(rt, sb);
		destroy(sb);
	}
	cr_assert_gt(pooled, 0);
	cr_assert_eq(sbx_pool_wait(rt, 120, &err), 0);
	sbx_sandbox_info *all = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&all, &n, rt, NULL, NULL, &err), 0);
	cr_assert_eq(n, 2, "only the idle pool is left, got %zu", n);
	sbx_sandbox_info_free(all, n);
	int fds1 = sbx_test_count_fds() - sbx_test_count_ns_fds() - count_mnt_fds();
	/* The provider's namespace pool holds a varying few fds of its own (it
	 * refills in the background); a leak per cycle would show as 200. */
	cr_assert_leq(fds1, fds0 + 4, "fds (namespace pool aside) before %d after %d", fds0, fds1);
}

/* A pool whose creates fail makes sbx_pool_wait say why, not wait on. */
Test(pool, failing_spec_is_reported)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "no-such-image-for-pool";
	sbx_pool_opts po = SBX_POOL_OPTS_INIT;
	po.spec = &o;
	po.size = 1;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_pool_add(rt, &po, &err), 0, "%s", err ? err->msg : "?");
	int r = sbx_pool_wait(rt, 0, &err);
	cr_assert_lt(r, 0);
	cr_assert_neq(r, -ETIMEDOUT);
	cr_assert_not_null(strstr(err->msg, "no-such-image-for-pool"), "%s", err->msg);
	sbx_error_free(err);
	cr_assert_eq(sbx_pool_ready(rt), 0);
}

/* A taker with keepalive and the pool's TTL keeps the pooled deadline until
 * the first renewal; the sandbox still has one and works. */
Test(pool, keepalive_taker_has_a_deadline)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.ttl_s = 600;
	add_pool(rt, &o, 1);
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.keepalive = 1;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create_ex(&sb, rt, &o, &ctl, &err), 0, "%s", err ? err->msg : "?");
	cr_assert_eq(ctl.attempts, 0, "served from the pool: no provider create");
	sbx_sandbox_info *all = NULL;
	size_t n = 0;
	sbx_sandbox_info *i = info_of(rt, sbx_sandbox_id(sb), &all, &n);
	cr_assert_not_null(i);
	cr_assert(has_label_key(i->labels, "sbx.pool"));
	cr_assert_gt(i->expires_at, 0);
	sbx_sandbox_info_free(all, n);
	int code = -1;
	free(sbx_test_sh(sb, "true", &code));
	cr_assert_eq(code, 0);
	destroy(sb);
}
