/* SPDX-License-Identifier: MIT */
/*
 * The `daytona` provider: per-episode sandboxes on Daytona (or `sbx serve`'s
 * Daytona API). The ops table and the lifecycle: create (image = the spec's
 * image as `FROM NAME`, or `snapshot:NAME`; labels plus the owner and the
 * default user/workdir; env; cpu/memory/disk; intervals from the TTL), open
 * by id, destroy (404 = already gone), set_timeout (auto-stop + refresh
 * activity: the keepalive), list (labels back, leaked when the owning
 * process on this host died) and destroy by id for `sbx gc`.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "daytona_int.h"

static int d_init(void **ctx_out, sbx_runtime *rt, sbx_error **err)
{
	struct dtn_ctx *c = NULL;
	int r = sbx__dtn_ctx_new(&c, rt, err);
	if (r == 0)
		*ctx_out = c;
	return r;
}

static void d_fini(void *ctx)
{
	sbx__dtn_ctx_free(ctx);
}

static const char *label_get(char *const *l, const char *key)
{
	int i = sbx__strv_find_key(l, key);
	return i >= 0 ? strchr(l[i], '=') + 1 : NULL;
}

static struct dtn_sb *sb_new(struct dtn_ctx *c, const struct dtn_info *in)
{
	struct dtn_sb *sb = xcalloc(1, sizeof(*sb));
	sb->ctx = c;
	sb->id = xstrdup(in->id);
	const char *tb = in->toolbox_url && *in->toolbox_url ? in->toolbox_url : NULL;
	size_t n = tb ? strlen(tb) : 0;
	while (n && tb[n - 1] == '/')
		n--;
	if (tb)
		sb->tb = xasprintf("%.*s/%s", (int)n, tb, in->id);
	else /* older APIs: the toolbox behind the control plane */
		sb->tb = xasprintf("%s/toolbox/%s/toolbox", c->api_url, in->id);
	const char *u = label_get(in->labels, "sbx.user");
	const char *w = label_get(in->labels, "sbx.workdir");
	sb->user = u ? xstrdup(u) : NULL;
	sb->workdir = w ? xstrdup(w) : NULL;
	return sb;
}

static void d_close(void *h)
{
	struct dtn_sb *sb = h;
	if (!sb)
		return;
	free(sb->id);
	free(sb->tb);
	free(sb->user);
	free(sb->workdir);
	sbx__strv_free(sb->env);
	free(sb);
}

/* "start time of this process" from /proc/PID/stat, for owner checks. */
static unsigned long long proc_start(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_free_ char *s = NULL;
	size_t len;
	if (sbx__read_file(&s, &len, path, 8192, NULL) < 0)
		return 0;
	const char *p = strrchr(s, ')');
	unsigned long long v = 0;
	for (int field = 2; p && *p; p++)
		if (*p == ' ' && ++field == 22) {
			v = strtoull(p + 1, NULL, 10);
			break;
		}
	return v;
}

static char *owner_label(void)
{
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	pid_t me = getpid();
	return xasprintf("sbx.owner=%s:%d:%llu", host, (int)me, proc_start(me));
}

static unsigned disk_mb(const sbx_sandbox_opts *o)
{
	const char *ov = sbx__env("HARBOR_OVERRIDE_STORAGE_MB");
	uint64_t v = 0;
	if (ov && *ov && sbx__parse_u64(&v, ov) == 0 && v > 0 && v < (1u << 30))
		return (unsigned)v;
	return o->storage_mb;
}

static int d_create(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	struct dtn_ctx *c = ctx;
	if (!o->image || !*o->image)
		return sbx_error_set(err, -EINVAL, "daytona: create: an image or snapshot:NAME is required");
	char **labels = sbx__strv_dup(o->labels);
	if (!o->detach) {
		_cleanup_free_ char *ow = owner_label();
		sbx__strv_setenv(&labels, ow);
	}
	if (o->user) {
		_cleanup_free_ char *u = xasprintf("sbx.user=%s", o->user);
		sbx__strv_setenv(&labels, u);
	}
	if (o->workdir) {
		_cleanup_free_ char *w = xasprintf("sbx.workdir=%s", o->workdir);
		sbx__strv_setenv(&labels, w);
	}
	struct dtn_create cr = { .image = o->image, .labels = (const char *const *)labels, .env = o->env,
				 .target = c->target, .cpus = o->cpus, .memory_mb = o->memory_mb,
				 .disk_mb = disk_mb(o), .ttl_s = o->ttl_s ? o->ttl_s : sbx__sandbox_ttl_s() };
	struct dtn_info in;
	int r = sbx__dtn_create(&in, c, &cr, err);
	sbx__strv_free(labels);
	if (r < 0)
		return r;
	struct dtn_sb *sb = sb_new(c, &in);
	sb->env = sbx__strv_dup(o->env);
	sbx__dtn_info_clear(&in);
	if (o->workdir) {
		_cleanup_free_ char *q = sbx__dtn_shq(o->workdir);
		_cleanup_free_ char *cmd = xasprintf("mkdir -p %s", q);
		sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
		eo.shell = cmd;
		eo.user = "root";
		eo.cwd = "/";
		sbx_exec_result res;
		r = sbx__dtn_exec(&res, sb, &eo, err);
		if (r == 0 && res.exit_code != 0)
			r = sbx_error_set(err, -EIO, "daytona: sandbox %s: cannot make workdir %s", sb->id, o->workdir);
		sbx_exec_result_free(&res);
		if (r < 0) {
			sbx__dtn_delete(c, sb->id, NULL);
			d_close(sb);
			return r;
		}
	}
	*id_out = xstrdup(sb->id);
	*sb_out = sb;
	return 0;
}

static int d_open(void **sb_out, void *ctx, const char *id, sbx_error **err)
{
	struct dtn_info in;
	int r = sbx__dtn_get(&in, ctx, id, err);
	if (r < 0)
		return r;
	if (sbx__dtn_state_step(in.state) != 1) {
		r = sbx_error_set(err, -ENOENT, "daytona: sandbox %s is %s", id, in.state ? in.state : "?");
		sbx__dtn_info_clear(&in);
		return r;
	}
	*sb_out = sb_new(ctx, &in);
	sbx__dtn_info_clear(&in);
	return 0;
}

static int d_exec(sbx_exec_result *out, void *h, const sbx_exec_opts *o, sbx_error **err)
{
	return sbx__dtn_exec(out, h, o, err);
}

static int d_write(void *h, const char *path, const void *data, size_t len, unsigned mode, sbx_error **err)
{
	return sbx__dtn_write(h, path, data, len, mode, err);
}

static int d_read(void **data_out, size_t *len_out, void *h, const char *path, size_t max, sbx_error **err)
{
	return sbx__dtn_read(data_out, len_out, h, path, max, err);
}

static int d_upload(void *h, const char *src, const char *dst, sbx_error **err)
{
	return sbx__dtn_upload(h, src, dst, err);
}

static int d_download(void *h, const char *src, const char *dst, sbx_error **err)
{
	return sbx__dtn_download(h, src, dst, err);
}

static int d_set_timeout(void *h, unsigned ttl_s, sbx_error **err)
{
	struct dtn_sb *sb = h;
	return sbx__dtn_activity(sb->ctx, sb->id, ttl_s, err);
}

static int d_destroy(void *h, sbx_error **err)
{
	struct dtn_sb *sb = h;
	if (sb->destroyed)
		return 0;
	sbx_error *e = NULL;
	int r = sbx__dtn_delete(sb->ctx, sb->id, &e);
	if (r == -ENOENT)
		r = 0;
	if (r < 0 && err && !*err)
		*err = steal_ptr(&e);
	sbx_error_free(e);
	if (r == 0)
		sb->destroyed = 1;
	return r;
}

static int d_destroy_id(void *ctx, const char *id, sbx_error **err)
{
	return sbx__dtn_delete(ctx, id, err);
}

/* Leaked: created by a process on this host that is gone. */
static int is_leaked(char *const *labels)
{
	const char *ow = label_get(labels, "sbx.owner");
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	const char *c1 = ow ? strrchr(ow, ':') : NULL;
	if (!c1)
		return 0;
	const char *c0 = c1;
	while (c0 > ow && c0[-1] != ':')
		c0--;
	if (c0 == ow || (size_t)(c0 - 1 - ow) != strlen(host) || strncmp(ow, host, strlen(host)) != 0)
		return 0;
	pid_t pid = (pid_t)strtol(c0, NULL, 10);
	unsigned long long st = strtoull(c1 + 1, NULL, 10);
	if (pid <= 0)
		return 0;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	return st && proc_start(pid) != st;
}

static int d_list(sbx_sandbox_info **out, size_t *n_out, void *ctx, sbx_error **err)
{
	struct dtn_info *v = NULL;
	size_t n = 0;
	int r = sbx__dtn_list(&v, &n, ctx, err);
	if (r < 0)
		return r;
	sbx_sandbox_info *res = xcalloc(n + 1, sizeof(*res));
	for (size_t i = 0; i < n; i++) {
		sbx_sandbox_info *s = &res[i];
		s->id = xstrdup(v[i].id);
		s->provider = xstrdup("daytona");
		s->image = xstrdup(v[i].snapshot ? v[i].snapshot : "");
		/* sbx's word for a sandbox that runs */
		int up = !v[i].state || !strcmp(v[i].state, "started");
		s->state = xstrdup(up ? "running" : v[i].state);
		s->created_at = v[i].created_at;
		s->expires_at = v[i].expires_at;
		s->leaked = is_leaked(v[i].labels) || sbx__dtn_state_step(v[i].state) < 0;
		s->labels = steal_ptr(&v[i].labels);
		sbx__dtn_info_clear(&v[i]);
	}
	free(v);
	*out = res;
	*n_out = n;
	return 0;
}

extern const sbx_provider_desc sbx_provider_daytona_desc;

const sbx_provider_ops sbx_provider_daytona = {
	.version = SBX_PROVIDER_OPS_VERSION,
	.name = "daytona",
	.desc = &sbx_provider_daytona_desc,
	.init = d_init,
	.fini = d_fini,
	.create = d_create,
	.open = d_open,
	.exec = d_exec,
	.write_file = d_write,
	.read_file = d_read,
	.upload = d_upload,
	.download = d_download,
	.set_timeout = d_set_timeout,
	.destroy = d_destroy,
	.close = d_close,
	.list = d_list,
	.destroy_id = d_destroy_id,
};
