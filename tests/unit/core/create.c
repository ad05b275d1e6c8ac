/* SPDX-License-Identifier: MIT */
/*
 * Who owns what in the create pipeline, with a provider whose create blocks
 * until the test lets it go: a create abandoned by a cancel or a deadline
 * reads only its own copy of the spec (every string and array), never the
 * caller's, and sbx_runtime_free() waits for it before the provider context
 * goes away. Under ASan a violation is a heap-use-after-free; in other builds
 * the provider sees the bytes the test scribbled over the caller's copy.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sbx.h>
#include <sbx/sys/provider.h>

#define MAGIC 0x5b5b5b5b

struct gated_ctx {
	int magic;
};

/* What the gated provider has seen; guarded by `m`, changes signalled on `c`. */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int entered, gate_open, returned, closed, destroys;
static int spec_ok = -1, ctx_ok = -1;
static int fini_called, runtime_freed;

static void bump(int *v, int to)
{
	pthread_mutex_lock(&m);
	*v = to;
	pthread_cond_broadcast(&c);
	pthread_mutex_unlock(&m);
}

/* Waits until *v is set; 0, or -ETIMEDOUT after `secs` (a hang, not a timing check). */
static int wait_set(int *v, double secs)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)secs;
	ts.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	int r = 0;
	pthread_mutex_lock(&m);
	while (!*v && r == 0)
		r = pthread_cond_timedwait(&c, &m, &ts) == ETIMEDOUT ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&m);
	return r;
}

static int strv_is(const char *const *v, const char *const *want)
{
	size_t i = 0;
	for (; v && v[i] && want[i]; i++)
		if (strcmp(v[i], want[i]) != 0)
			return 0;
	return v && !v[i] && !want[i];
}

static int strv_has(const char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

static const char *const want_env[] = { "A=1", "B=two", NULL };
static const char *const want_allow[] = { "10.0.0.0/8", "pypi.org", NULL };
static const char *const want_deny[] = { "10.1.0.0/16", NULL };

/* Every pointer field of sbx_sandbox_opts, read the way a provider reads it. */
static int spec_intact(const sbx_sandbox_opts *o)
{
	return strcmp(o->provider, "gated") == 0 && strcmp(o->image, "image-name") == 0 &&
	       strv_is(o->env, want_env) && strcmp(o->workdir, "/work") == 0 &&
	       strcmp(o->user, "1000:1000") == 0 && strv_has(o->labels, "team=rl") &&
	       strv_has(o->labels, "sbx.task=t1") && strcmp(o->hostname, "host-x") == 0 &&
	       strcmp(o->upper_dir, "/upper") == 0 && strv_is(o->allow_out, want_allow) &&
	       strv_is(o->deny_out, want_deny) && o->network == SBX_NETWORK_INTERNET &&
	       o->memory_mb == 256;
}

static int g_init(void **ctx_out, sbx_runtime *rt, sbx_error **err)
{
	(void)rt;
	(void)err;
	struct gated_ctx *g = calloc(1, sizeof(*g));
	g->magic = MAGIC;
	*ctx_out = g;
	return 0;
}

static void g_fini(void *ctx)
{
	struct gated_ctx *g = ctx;
	g->magic = 0;
	free(g);
	bump(&fini_called, 1);
}

static int g_create(void **sb, char **id, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)err;
	bump(&entered, 1);
	wait_set(&gate_open, 60);
	/* Runs after the caller gave up and freed its spec (and maybe the runtime). */
	int ok = spec_intact(o);
	int cok = ((struct gated_ctx *)ctx)->magic == MAGIC;
	pthread_mutex_lock(&m);
	cok = cok && !fini_called;
	pthread_mutex_unlock(&m);
	bump(&spec_ok, ok);
	bump(&ctx_ok, cok);
	*sb = strdup("handle");
	*id = strdup("gated-1");
	bump(&returned, 1);
	return 0;
}

static int g_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	(void)out;
	(void)sb;
	(void)o;
	return sbx_error_set(err, -ENOSYS, "gated: no exec");
}

static int g_destroy(void *sb, sbx_error **err)
{
	(void)sb;
	(void)err;
	pthread_mutex_lock(&m);
	destroys++;
	pthread_mutex_unlock(&m);
	return 0;
}

static void g_close(void *sb)
{
	free(sb);
	bump(&closed, 1);
}

static const sbx_provider_ops gated_ops = {
	.version = SBX_PROVIDER_OPS_VERSION, .name = "gated",
	.init = g_init, .fini = g_fini, .create = g_create, .exec = g_exec,
	.destroy = g_destroy, .close = g_close,
};

static sbx_runtime *rt;

static void setup(void)
{
	char dir[] = "/tmp/sbx-core-create-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = dir;
	o.image_dir = dir;
	cr_assert_eq(sbx_runtime_new(&rt, &o, NULL), 0);
	cr_assert_eq(sbx_provider_register(&gated_ops, NULL), 0);
}

static void teardown(void)
{
	sbx_runtime_free(rt);
}

TestSuite(core_create, .init = setup, .fini = teardown, .timeout = 60);

static char **heap_strv(const char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	char **r = calloc(n + 1, sizeof(*r));
	for (size_t i = 0; i < n; i++)
		r[i] = strdup(v[i]);
	return r;
}

/* The caller's spec, every string and array on the heap so ASan tracks it. */
static sbx_sandbox_opts *heap_opts(void)
{
	static const char *const labels[] = { "team=rl", NULL };
	sbx_sandbox_opts *o = calloc(1, sizeof(*o));
	*o = (sbx_sandbox_opts)SBX_SANDBOX_OPTS_INIT;
	o->provider = strdup("gated");
	o->image = strdup("image-name");
	o->memory_mb = 256;
	o->network = SBX_NETWORK_INTERNET;
	o->env = (const char *const *)heap_strv(want_env);
	o->workdir = strdup("/work");
	o->user = strdup("1000:1000");
	o->labels = (const char *const *)heap_strv(labels);
	o->hostname = strdup("host-x");
	o->upper_dir = strdup("/upper");
	o->allow_out = (const char *const *)heap_strv(want_allow);
	o->deny_out = (const char *const *)heap_strv(want_deny);
	return o;
}

static void scribble_free(const char *s)
{
	if (!s)
		return;
	memset((char *)s, 'X', strlen(s));
	free((char *)s);
}

static void scribble_free_strv(const char *const *v)
{
	for (size_t i = 0; v && v[i]; i++)
		scribble_free(v[i]);
	free((void *)v);
}

/* What a caller may do the moment create returns: overwrite and free it all. */
static void free_opts(sbx_sandbox_opts *o)
{
	scribble_free(o->provider);
	scribble_free(o->image);
	scribble_free_strv(o->env);
	scribble_free(o->workdir);
	scribble_free(o->user);
	scribble_free_strv(o->labels);
	scribble_free(o->hostname);
	scribble_free(o->upper_dir);
	scribble_free_strv(o->allow_out);
	scribble_free_strv(o->deny_out);
	memset(o, 0x55, sizeof(*o));
	free(o);
}

static void *fire_when_entered(void *arg)
{
	wait_set(&entered, 30);
	sbx_cancel_fire(arg);
	return NULL;
}

/* Runs one create that the caller abandons (cancel, or a deadline when
 * `cancel` is 0), frees the caller's spec and task name, and returns. */
static void abandoned_create(sbx_runtime *r, int cancel, int want)
{
	sbx_sandbox_opts *o = heap_opts();
	char *task = strdup("t1");
	sbx_create_ctl ctl = SBX_CREATE_CTL_INIT;
	ctl.task = task;
	ctl.keepalive = 1;
	pthread_t th;
	if (cancel) {
		ctl.cancel = sbx_cancel_new();
		cr_assert_eq(pthread_create(&th, NULL, fire_when_entered, ctl.cancel), 0);
	} else {
		ctl.timeout_s = 0.05;
	}
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int rc = sbx_sandbox_create_ex(&sb, r, o, &ctl, &err);
	cr_assert_eq(rc, want, "create: %d %s", rc, err ? err->msg : "");
	cr_assert_null(sb);
	sbx_error_free(err);
	free_opts(o);
	scribble_free(task);
	if (cancel) {
		pthread_join(th, NULL);
		sbx_cancel_free(ctl.cancel);
	}
}

static void expect_reaped(void)
{
	cr_assert_eq(wait_set(&returned, 30), 0, "the provider create never returned");
	cr_assert_eq(wait_set(&closed, 30), 0, "the orphan was never closed");
	pthread_mutex_lock(&m);
	int sok = spec_ok, cok = ctx_ok, n = destroys;
	pthread_mutex_unlock(&m);
	cr_assert_eq(sok, 1, "the abandoned create read the caller's freed spec");
	cr_assert_eq(cok, 1, "the provider context was gone");
	cr_assert_eq(n, 1, "the orphan was not destroyed");
}

Test(core_create, cancelled_create_reads_its_own_copy_of_the_spec)
{
	abandoned_create(rt, 1, -ECANCELED);
	bump(&gate_open, 1);
	expect_reaped();
}

Test(core_create, timed_out_create_reads_its_own_copy_of_the_spec)
{
	abandoned_create(rt, 0, -ETIMEDOUT);
	cr_assert_eq(wait_set(&entered, 30), 0);
	bump(&gate_open, 1);
	expect_reaped();
}

static void *free_runtime(void *arg)
{
	sbx_runtime_free(arg);
	bump(&runtime_freed, 1);
	return NULL;
}

Test(core_create, runtime_free_waits_for_an_abandoned_create)
{
	abandoned_create(rt, 1, -ECANCELED);
	sbx_runtime *r = rt;
	rt = NULL;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, free_runtime, r), 0);
	/* Freeing the runtime now would pull the provider context from under
	 * the worker; it must wait. (Only the pass direction is certain: a
	 * broken free returns at once and the check below catches it.) */
	int early = wait_set(&runtime_freed, 0.3) == 0;
	bump(&gate_open, 1);
	pthread_join(th, NULL);
	cr_assert_not(early, "sbx_runtime_free returned while a create still ran");
	expect_reaped();
	cr_assert_eq(fini_called, 1);
}
