/* SPDX-License-Identifier: MIT */
/*
 * The `e2b` provider (alias `agentenv`): sandboxes on E2B Cloud, AgentENV or
 * `sbx serve`, through the E2B control plane and envd. This file is the ops
 * table and the lifecycle: create (template = the spec's image, metadata =
 * labels plus the owner, envVars = env, timeout = ttl), open by id, destroy
 * (404 = already gone), set_timeout (the keepalive), list (metadata back to
 * labels, leaked when the owning process on this host died), pause/resume.
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
#include "e2b_int.h"


static int e_init(void **ctx_out, sbx_runtime *rt, sbx_error **err)
{
	struct e2b_ctx *c = NULL;
	int r = sbx__e2b_ctx_new(&c, rt, err);
	if (r == 0)
		*ctx_out = c;
	return r;
}

static void e_fini(void *ctx)
{
	sbx__e2b_ctx_free(ctx);
}

static const char *meta_get(char *const *md, const char *key)
{
	int i = sbx__strv_find_key(md, key);
	return i >= 0 ? strchr(md[i], '=') + 1 : NULL;
}

static struct e2b_sb *sb_new(struct e2b_ctx *c, const struct e2b_info *in)
{
	struct e2b_sb *sb = xcalloc(1, sizeof(*sb));
	sb->ctx = c;
	sb->conn.id = xstrdup(in->id);
	sb->conn.base = sbx__e2b_envd_url(&c->cfg, in->id, in->domain);
	sb->conn.token = in->token && *in->token ? xstrdup(in->token) : NULL;
	const char *u = meta_get(in->metadata, "sbx.user");
	const char *w = meta_get(in->metadata, "sbx.workdir");
	sb->user = u ? xstrdup(u) : NULL;
	sb->workdir = w ? xstrdup(w) : NULL;
	return sb;
}

static void e_close(void *h)
{
	struct e2b_sb *sb = h;
	if (!sb)
		return;
	sbx__e2b_conn_clear(&sb->conn);
	free(sb->user);
	free(sb->workdir);
	free(sb);
}

/* "start time of this process" from /proc/self/stat, for owner checks. */
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

static int e_create(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	struct e2b_ctx *c = ctx;
	if (!o->image || !*o->image)
		return sbx_error_set(err, -EINVAL, "e2b: create: a template (image) is required");
	char **md = sbx__strv_dup(o->labels);
	if (!o->detach) {
		_cleanup_free_ char *ow = owner_label();
		sbx__strv_setenv(&md, ow);
	}
	if (o->user) {
		_cleanup_free_ char *u = xasprintf("sbx.user=%s", o->user);
		sbx__strv_setenv(&md, u);
	}
	if (o->workdir) {
		_cleanup_free_ char *w = xasprintf("sbx.workdir=%s", o->workdir);
		sbx__strv_setenv(&md, w);
	}
	struct e2b_create cr = { .template_id = o->image, .timeout_s = o->ttl_s ? o->ttl_s : sbx__sandbox_ttl_s(),
				 .metadata = (const char *const *)md, .env = o->env,
				 .internet = o->network != SBX_NETWORK_NONE };
	struct e2b_info in;
	int r = sbx__e2b_api_create(&in, c, &cr, err);
	sbx__strv_free(md);
	if (r < 0)
		return r;
	struct e2b_sb *sb = sb_new(c, &in);
	if (o->user && !sb->user)
		sb->user = xstrdup(o->user);
	if (o->workdir && !sb->workdir)
		sb->workdir = xstrdup(o->workdir);
	*id_out = xstrdup(in.id);
	*sb_out = sb;
	sbx__e2b_info_clear(&in);
	return 0;
}

static int e_open(void **sb_out, void *ctx, const char *id, sbx_error **err)
{
	struct e2b_ctx *c = ctx;
	struct e2b_info in;
	int r = sbx__e2b_api_get(&in, c, id, err);
	if (r == 0 && in.state && strcmp(in.state, "paused") == 0) {
		sbx__e2b_info_clear(&in);
		r = sbx__e2b_api_connect(&in, c, id, sbx__sandbox_ttl_s(), err);
	}
	if (r < 0)
		return r;
	*sb_out = sb_new(c, &in);
	sbx__e2b_info_clear(&in);
	return 0;
}

static int e_exec(sbx_exec_result *out, void *h, const sbx_exec_opts *o, sbx_error **err)
{
	return sbx__e2b_exec(out, h, o, err);
}

static int e_write(void *h, const char *path, const void *data, size_t len, unsigned mode, sbx_error **err)
{
	return sbx__e2b_write(h, path, data, len, mode, err);
}

static int e_read(void **data_out, size_t *len_out, void *h, const char *path, size_t max, sbx_error **err)
{
	return sbx__e2b_read(data_out, len_out, h, path, max, err);
}

static int e_upload(void *h, const char *src, const char *dst, sbx_error **err)
{
	return sbx__e2b_upload(h, src, dst, err);
}

static int e_download(void *h, const char *src, const char *dst, sbx_error **err)
{
	return sbx__e2b_download(h, src, dst, err);
}

static int e_set_timeout(void *h, unsigned ttl_s, sbx_error **err)
{
	struct e2b_sb *sb = h;
	return sbx__e2b_api_timeout(sb->ctx, sb->conn.id, ttl_s ? ttl_s : SBX_SANDBOX_TTL_MAX_S, err);
}

static int e_destroy(void *h, sbx_error **err)
{
	struct e2b_sb *sb = h;
	if (sb->destroyed)
		return 0;
	sbx_error *e = NULL;
	int r = sbx__e2b_api_delete(sb->ctx, sb->conn.id, &e);
	if (r == -ENOENT)
		r = 0;
	if (r < 0 && err && !*err)
		*err = steal_ptr(&e);
	sbx_error_free(e);
	if (r == 0)
		sb->destroyed = 1;
	return r;
}

static int e_destroy_id(void *ctx, const char *id, sbx_error **err)
{
	return sbx__e2b_api_delete(ctx, id, err);
}

/* Leaked: created by a process on this host that is gone, or expired. */
static int is_leaked(const struct e2b_info *in)
{
	const char *ow = meta_get(in->metadata, "sbx.owner");
	if (!ow)
		return 0;
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	const char *c1 = strrchr(ow, ':');
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

static int e_list(sbx_sandbox_info **out, size_t *n_out, void *ctx, sbx_error **err)
{
	struct e2b_info *v = NULL;
	size_t n = 0;
	int r = sbx__e2b_api_list(&v, &n, ctx, NULL, err);
	if (r < 0)
		return r;
	sbx_sandbox_info *res = xcalloc(n + 1, sizeof(*res));
	double now = sbx__now_real();
	for (size_t i = 0; i < n; i++) {
		sbx_sandbox_info *s = &res[i];
		s->id = xstrdup(v[i].id);
		s->provider = xstrdup("e2b");
		s->image = xstrdup(v[i].template_id ? v[i].template_id : "");
		s->state = xstrdup(v[i].state ? v[i].state : "running");
		s->labels = v[i].metadata ? steal_ptr(&v[i].metadata) : xcalloc(1, sizeof(char *));
		s->created_at = v[i].started_at;
		s->expires_at = v[i].end_at;
		v[i].metadata = s->labels;
		s->leaked = is_leaked(&v[i]) || (v[i].end_at > 0 && v[i].end_at < now);
		v[i].metadata = NULL;
		sbx__e2b_info_clear(&v[i]);
	}
	free(v);
	*out = res;
	*n_out = n;
	return 0;
}

static int e_proc_start(void **out, struct sbx_process_fds *fds, void *h, const sbx_exec_opts *o,
			int keep_stdin, sbx_error **err)
{
	return sbx__e2b_proc_start(out, fds, h, o, keep_stdin, err);
}

static int e_stat(sbx_file_info *out, void *h, const char *path, sbx_error **err)
{
	return sbx__e2b_fs_stat(out, &((struct e2b_sb *)h)->conn, path, err);
}

static int e_list_dir(sbx_file_info **out, size_t *n_out, void *h, const char *dir, unsigned depth,
		      sbx_error **err)
{
	return sbx__e2b_fs_list(out, n_out, &((struct e2b_sb *)h)->conn, dir, depth, err);
}

static int e_mkdir(void *h, const char *path, unsigned mode, sbx_error **err)
{
	struct e2b_sb *sb = h;
	int r = sbx__e2b_fs_mkdir(&sb->conn, path, err);
	if (r == 0 && mode && mode != 0755) {
		_cleanup_free_ char *q = sbx__e2b_shq(path);
		_cleanup_free_ char *cmd = xasprintf("chmod %o %s", mode & 07777, q);
		r = sbx__e2b_root_sh(sb, cmd, 120, err);
	}
	return r;
}

static int e_rename(void *h, const char *from, const char *to, sbx_error **err)
{
	return sbx__e2b_fs_move(&((struct e2b_sb *)h)->conn, from, to, err);
}

static int e_remove(void *h, const char *path, int force, sbx_error **err)
{
	sbx_error *e = NULL;
	int r = sbx__e2b_fs_remove(&((struct e2b_sb *)h)->conn, path, &e);
	if (r == -ENOENT && force)
		r = 0;
	if (r < 0 && err && !*err)
		*err = steal_ptr(&e);
	sbx_error_free(e);
	return r;
}

static int e_chown(void *h, const char *path, const char *user, sbx_error **err)
{
	_cleanup_free_ char *qp = sbx__e2b_shq(path), *qu = sbx__e2b_shq(user);
	_cleanup_free_ char *cmd = xasprintf("chown -R %s %s", qu, qp);
	return sbx__e2b_root_sh(h, cmd, 600, err);
}

static int e_pause(void *h, sbx_error **err)
{
	struct e2b_sb *sb = h;
	sbx_error *e = NULL;
	int r = sbx__e2b_api_pause(sb->ctx, sb->conn.id, &e);
	if (r == -EEXIST) {
		sbx_error_free(e);
		return sbx_error_set(err, -EALREADY, "e2b: sandbox %s is already paused", sb->conn.id);
	}
	if (r < 0 && err && !*err)
		*err = steal_ptr(&e);
	sbx_error_free(e);
	return r;
}

static int e_resume(void *h, sbx_error **err)
{
	struct e2b_sb *sb = h;
	struct e2b_info in;
	int r = sbx__e2b_api_get(&in, sb->ctx, sb->conn.id, err);
	if (r < 0)
		return r;
	int paused = in.state && strcmp(in.state, "paused") == 0;
	sbx__e2b_info_clear(&in);
	if (!paused)
		return sbx_error_set(err, -EALREADY, "e2b: sandbox %s is not paused", sb->conn.id);
	r = sbx__e2b_api_connect(&in, sb->ctx, sb->conn.id, sbx__sandbox_ttl_s(), err);
	if (r == 0 && in.token && (!sb->conn.token || strcmp(in.token, sb->conn.token) != 0)) {
		free(sb->conn.token);
		sb->conn.token = xstrdup(in.token);
	}
	sbx__e2b_info_clear(&in);
	return r;
}

extern const sbx_provider_desc sbx_provider_e2b_desc;

const sbx_provider_ops sbx_provider_e2b = {
	.version = SBX_PROVIDER_OPS_VERSION,
	.name = "e2b",
	.desc = &sbx_provider_e2b_desc,
	.init = e_init,
	.fini = e_fini,
	.create = e_create,
	.open = e_open,
	.exec = e_exec,
	.write_file = e_write,
	.read_file = e_read,
	.upload = e_upload,
	.download = e_download,
	.set_timeout = e_set_timeout,
	.destroy = e_destroy,
	.close = e_close,
	.list = e_list,
	.destroy_id = e_destroy_id,
	.process_start = e_proc_start,
	.process_poll = sbx__e2b_proc_poll,
	.process_signal = sbx__e2b_proc_signal,
	.process_free = sbx__e2b_proc_free,
	.stat = e_stat,
	.list_dir = e_list_dir,
	.mkdir = e_mkdir,
	.rename = e_rename,
	.remove = e_remove,
	.chown = e_chown,
	.pause = e_pause,
	.resume = e_resume,
};
