/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text metrics of `sbx serve` (GET /metrics): live sandboxes,
 * creates and failures, the create-latency histogram, destroys, timeouts,
 * execs (process starts), requests, and error responses by HTTP status.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../util/alloc.h"
#include "server_int.h"

static const double bounds[] = { 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120 };
#define NB (sizeof(bounds) / sizeof(bounds[0]))

void sbx__srv_metrics_create(struct server *srv, double seconds, int ok)
{
	atomic_fetch_add(ok ? &srv->m.creates : &srv->m.create_failures, 1);
	if (!ok)
		return;
	for (size_t i = 0; i < NB; i++)
		if (seconds <= bounds[i])
			atomic_fetch_add(&srv->m.create_buckets[i], 1);
	atomic_fetch_add(&srv->m.create_count, 1);
	double cur = atomic_load(&srv->m.create_sum);
	while (!atomic_compare_exchange_weak(&srv->m.create_sum, &cur, cur + seconds))
		;
}

void sbx__srv_metrics_status(struct server *srv, int status)
{
	if (status >= 400 && status < 600)
		atomic_fetch_add(&srv->m.errors[status], 1);
}

void sbx__srv_metrics_reply(struct srv_req *r)
{
	struct server *srv = r->srv;
	struct srv_metrics *m = &srv->m;
	pthread_mutex_lock(&srv->lock);
	size_t live = srv->n, paused = 0;
	for (size_t i = 0; i < srv->n; i++)
		paused += srv->v[i]->paused != 0;
	pthread_mutex_unlock(&srv->lock);
	sbx_buf b;
	sbx__buf_init(&b, 1 << 20);
	sbx__buf_printf(&b,
			"# HELP sbx_serve_sandboxes_live Sandboxes currently served.\n"
			"# TYPE sbx_serve_sandboxes_live gauge\nsbx_serve_sandboxes_live %zu\n"
			"# HELP sbx_serve_sandboxes_paused Sandboxes currently paused.\n"
			"# TYPE sbx_serve_sandboxes_paused gauge\nsbx_serve_sandboxes_paused %zu\n"
			"# TYPE sbx_serve_sandbox_creates_total counter\nsbx_serve_sandbox_creates_total %lu\n"
			"# TYPE sbx_serve_sandbox_create_failures_total counter\nsbx_serve_sandbox_create_failures_total %lu\n"
			"# TYPE sbx_serve_sandbox_destroys_total counter\nsbx_serve_sandbox_destroys_total %lu\n"
			"# TYPE sbx_serve_sandbox_timeouts_total counter\nsbx_serve_sandbox_timeouts_total %lu\n"
			"# TYPE sbx_serve_execs_total counter\nsbx_serve_execs_total %lu\n"
			"# TYPE sbx_serve_requests_total counter\nsbx_serve_requests_total %lu\n"
			"# HELP sbx_serve_create_seconds Sandbox create latency.\n"
			"# TYPE sbx_serve_create_seconds histogram\n",
			live, paused, atomic_load(&m->creates), atomic_load(&m->create_failures), atomic_load(&m->destroys),
			atomic_load(&m->timeouts), atomic_load(&m->execs), atomic_load(&m->requests));
	for (size_t i = 0; i < NB; i++)
		sbx__buf_printf(&b, "sbx_serve_create_seconds_bucket{le=\"%g\"} %lu\n", bounds[i],
				atomic_load(&m->create_buckets[i]));
	sbx__buf_printf(&b, "sbx_serve_create_seconds_bucket{le=\"+Inf\"} %lu\nsbx_serve_create_seconds_sum %.6f\n"
			    "sbx_serve_create_seconds_count %lu\n"
			    "# HELP sbx_serve_errors_total Error responses by HTTP status.\n"
			    "# TYPE sbx_serve_errors_total counter\n",
			atomic_load(&m->create_count), atomic_load(&m->create_sum), atomic_load(&m->create_count));
	for (int s = 400; s < 600; s++) {
		unsigned long v = atomic_load(&m->errors[s]);
		if (v)
			sbx__buf_printf(&b, "sbx_serve_errors_total{code=\"%d\"} %lu\n", s, v);
	}
	sbx__buf_printf(&b, "# HELP sbx_serve_proxy_connections Open connections into sandboxes' ports "
			    "(HTTP requests in flight and WebSockets).\n"
			    "# TYPE sbx_serve_proxy_connections gauge\nsbx_serve_proxy_connections %zu\n",
			sbx__srv_relays_count(srv));
	unsigned threads = 0, busy = 0;
	sbx__srv_pool_stats(srv, &threads, &busy);
	sbx__buf_printf(&b, "# HELP sbx_serve_workers Worker threads (at most --workers).\n"
			    "# TYPE sbx_serve_workers gauge\nsbx_serve_workers %u\n"
			    "# HELP sbx_serve_workers_busy Worker threads running a request.\n"
			    "# TYPE sbx_serve_workers_busy gauge\nsbx_serve_workers_busy %u\n",
			threads, busy);
	size_t len = 0;
	char *text = sbx__buf_steal(&b, &len);
	sbx__srv_reply_bytes(r, 200, "text/plain; version=0.0.4", text, len);
}
