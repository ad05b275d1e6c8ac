/* SPDX-License-Identifier: MIT */
/*
 * The `faulty` provider: `local` with injected failures, for testing the
 * creation pipeline, cancellation and keepalive against real sandboxes.
 * Counters are process-wide and guarded by one mutex.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/sys/faulty.h>
#include <sbx/sys/provider.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sbx_faulty_config cfg;
static sbx_faulty_stats stats;
static unsigned inflight;
static unsigned rng;

static const sbx_provider_ops *base(void)
{
	return sbx_provider_find("local");
}

static double roll(void)
{
	pthread_mutex_lock(&lock);
	rng = rng * 1103515245u + 12345u;
	unsigned v = (rng >> 8) & 0xffffff;
	pthread_mutex_unlock(&lock);
	return (double)v / (double)0x1000000;
}

static void sleep_ms(double ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = { (time_t)(ms / 1000), (long)((ms - (double)(long)(ms / 1000) * 1000) * 1e6) };
	nanosleep(&ts, NULL);
}

static int f_init(void **ctx_out, sbx_runtime *rt, sbx_error **err)
{
	return base()->init(ctx_out, rt, err);
}

static void f_fini(void *ctx)
{
	base()->fini(ctx);
}

static int f_create(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	pthread_mutex_lock(&lock);
	stats.creates++;
	if (++inflight > stats.peak_inflight)
		stats.peak_inflight = inflight;
	sbx_faulty_config c = cfg;
	pthread_mutex_unlock(&lock);
	sleep_ms(c.slow_ms);
	if (c.hang_rate > 0 && roll() < c.hang_rate)
		sleep_ms(c.hang_ms);
	int r;
	double x = roll();
	pthread_mutex_lock(&lock);
	int forced = stats.creates <= c.throttle_first;
	pthread_mutex_unlock(&lock);
	if (forced || x < c.throttle_rate) {
		r = sbx_error_set(err, -EAGAIN, "faulty: 429 Too Many Requests (injected)");
		if (err && *err)
			(*err)->http_status = 429;
		pthread_mutex_lock(&lock);
		stats.throttled++;
		pthread_mutex_unlock(&lock);
	} else if (x < c.throttle_rate + c.error_rate) {
		r = sbx_error_set(err, -EIO, "faulty: create failed (injected)");
		pthread_mutex_lock(&lock);
		stats.failed++;
		pthread_mutex_unlock(&lock);
	} else {
		sbx_sandbox_opts lo = *o;
		lo.provider = "local";
		r = base()->create(sb_out, id_out, ctx, &lo, err);
		if (r == 0) {
			pthread_mutex_lock(&lock);
			stats.live++;
			pthread_mutex_unlock(&lock);
		}
	}
	pthread_mutex_lock(&lock);
	inflight--;
	stats.returned++;
	pthread_mutex_unlock(&lock);
	return r;
}

static int f_open(void **sb_out, void *ctx, const char *id, sbx_error **err)
{
	return base()->open(sb_out, ctx, id, err);
}

static int f_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	if (cfg.exec_fail_rate > 0 && roll() < cfg.exec_fail_rate)
		return sbx_error_set(err, -EIO, "faulty: exec failed (injected)");
	return base()->exec(out, sb, o, err);
}

static int f_write(void *sb, const char *p, const void *d, size_t n, unsigned mode, sbx_error **err)
{
	return base()->write_file(sb, p, d, n, mode, err);
}

static int f_read(void **d, size_t *n, void *sb, const char *p, size_t max, sbx_error **err)
{
	return base()->read_file(d, n, sb, p, max, err);
}

static int f_upload(void *sb, const char *s, const char *d, sbx_error **err)
{
	return base()->upload(sb, s, d, err);
}

static int f_download(void *sb, const char *s, const char *d, sbx_error **err)
{
	return base()->download(sb, s, d, err);
}

static int f_set_timeout(void *sb, unsigned ttl, sbx_error **err)
{
	pthread_mutex_lock(&lock);
	stats.set_timeouts++;
	unsigned fail = cfg.set_timeout_fail;
	pthread_mutex_unlock(&lock);
	if (fail)
		return sbx_error_set(err, -EIO, "faulty: set_timeout failed (injected)");
	return base()->set_timeout(sb, ttl, err);
}

static int f_destroy(void *sb, sbx_error **err)
{
	int r = base()->destroy(sb, err);
	if (r == 0) {
		pthread_mutex_lock(&lock);
		if (stats.live)
			stats.live--;
		stats.destroyed++;
		pthread_mutex_unlock(&lock);
	}
	return r;
}

static void f_close(void *sb)
{
	base()->close(sb);
}

static int f_list(sbx_sandbox_info **out, size_t *n, void *ctx, sbx_error **err)
{
	return base()->list(out, n, ctx, err);
}

static int f_destroy_id(void *ctx, const char *id, sbx_error **err)
{
	return base()->destroy_id(ctx, id, err);
}

/* Its doctor check: what it wraps, and what it injects now. */
static void f_doctor(const sbx_doctor_ctx *d)
{
	pthread_mutex_lock(&lock);
	sbx_faulty_config c = cfg;
	pthread_mutex_unlock(&lock);
	d->emit(d->payload, base() != NULL, "base", "wraps the local provider");
	d->emit(d->payload, 1, "injection", "throttle %.2f, error %.2f, exec failure %.2f, slow %.0f ms",
		c.throttle_rate, c.error_rate, c.exec_fail_rate, c.slow_ms);
}

/* Injected throttles are typed (-EAGAIN, HTTP 429) and the core sees them;
 * this pattern also marks the message a real wrapper might log. */
static const char *const throttle_patterns[] = { "injected throttle", NULL };

static const sbx_provider_desc faulty_desc = {
	.name = "faulty",
	.title = "faulty (local with injected failures)",
	.caps = SBX_PROVIDER_CAP_TTL_EXTEND | SBX_PROVIDER_CAP_NET_NONE | SBX_PROVIDER_CAP_NET_HOST |
		SBX_PROVIDER_CAP_NET_INTERNET,
	.throttle_patterns = throttle_patterns,
	.doctor = f_doctor,
	/* No credential, no endpoint; task_image NULL: the host's image store, as local. */
};

static const sbx_provider_ops faulty_ops = {
	.version = SBX_PROVIDER_OPS_VERSION,
	.name = "faulty",
	.desc = &faulty_desc,
	.init = f_init, .fini = f_fini, .create = f_create, .open = f_open, .exec = f_exec,
	.write_file = f_write, .read_file = f_read, .upload = f_upload, .download = f_download,
	.set_timeout = f_set_timeout, .destroy = f_destroy, .close = f_close, .list = f_list,
	.destroy_id = f_destroy_id,
};

int sbx_faulty_register(sbx_error **err)
{
	if (sbx_provider_find("faulty"))
		return 0;
	return sbx_provider_register(&faulty_ops, err);
}

void sbx_faulty_configure(const sbx_faulty_config *c)
{
	pthread_mutex_lock(&lock);
	cfg = *c;
	memset(&stats, 0, sizeof(stats));
	rng = c->seed ? c->seed : (unsigned)time(NULL);
	pthread_mutex_unlock(&lock);
}

void sbx_faulty_stats_get(sbx_faulty_stats *out)
{
	pthread_mutex_lock(&lock);
	*out = stats;
	pthread_mutex_unlock(&lock);
}
