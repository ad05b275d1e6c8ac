/* SPDX-License-Identifier: MIT */
/*
 * GET /sandboxes/{id}/metrics (the SDK's getMetrics): one sample taken now
 * from the sandbox's provider (sbx_sandbox_stats: cgroups and the writable
 * layer for local), in E2B's SandboxMetric shape. cpuUsedPct is the CPU
 * time used since the previous sample (the first: since the start) over
 * the wall time and the CPUs it may use; totals are the limits it gets.
 * E2B keeps a history sampled every few seconds and answers a start..end
 * window from it; this server keeps none, so the answer is the one sample.
 */
#include <errno.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "server_int.h"

void sbx__srv_metrics_sandbox(struct srv_req *r, struct srv_sandbox *s)
{
	struct server *srv = r->srv;
	sbx_stats st;
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx_sandbox_stats(&st, s->sb, &e);
		sbx__srv_op_end(s);
	}
	if (rc < 0) {
		sbx__srv_reply_sbx_error(r, 0, "metrics", rc, e);
		return;
	}
	long cpus;
	long long mem_mb, disk_mb;
	sbx__srv_sandbox_limits(srv, s, &cpus, &mem_mb, &disk_mb);
	double now = sbx__now_real();
	pthread_mutex_lock(&srv->lock);
	double prev_t = s->stat_t > 0 ? s->stat_t : s->started_at, prev_cpu = s->stat_t > 0 ? s->stat_cpu_s : 0;
	s->stat_t = now;
	s->stat_cpu_s = st.cpu_s;
	pthread_mutex_unlock(&srv->lock);
	double wall = now - prev_t, pct = 0;
	if (wall > 0 && cpus > 0 && st.cpu_s >= prev_cpu)
		pct = (st.cpu_s - prev_cpu) / wall / (double)cpus * 100.0;
	if (pct > 100)
		pct = 100;
	unsigned long long cache = st.mem_cache_bytes < st.mem_bytes ? st.mem_cache_bytes : st.mem_bytes;
	unsigned long long disk_total = st.disk_total_bytes ? st.disk_total_bytes : (unsigned long long)disk_mb << 20;
	_cleanup_free_ char *ts = sbx__srv_rfc3339(now);
	json_t *m = json_pack("{s:s,s:I,s:f,s:I,s:I,s:I,s:I,s:I}", "timestamp", ts, "timestampUnix", (json_int_t)now,
			      "cpuUsedPct", pct, "cpuCount", (json_int_t)cpus, "memUsed",
			      (json_int_t)(st.mem_bytes - cache), "memTotal", (json_int_t)(mem_mb << 20), "memCache",
			      (json_int_t)cache, "diskUsed", (json_int_t)st.disk_bytes);
	json_object_set_new(m, "diskTotal", json_integer((json_int_t)disk_total));
	sbx__srv_reply_json(r, 200, json_pack("[o]", m));
}
