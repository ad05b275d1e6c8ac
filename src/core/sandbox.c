/* SPDX-License-Identifier: MIT */
/*
 * The provider-agnostic sandbox handle: validates arguments once, then
 * dispatches to the provider's ops table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/str.h"
#include "runtime_int.h"

struct sbx_sandbox {
	sbx_runtime *rt;
	const sbx_provider_ops *ops;
	void *impl;
	char *id;
	int destroyed;
	int keepalive;   /* registered with the runtime's keepalive thread */
};

static int check_kv(const char *const *v, const char *what, sbx_error **err)
{
	for (size_t i = 0; v && v[i]; i++) {
		const char *eq = strchr(v[i], '=');
		if (!eq || eq == v[i])
			return sbx_error_set(err, -EINVAL, "%s entry '%s': expected KEY=VALUE", what, v[i]);
	}
	return 0;
}

int sbx__sandbox_check_opts(const sbx_sandbox_opts *o, sbx_error **err)
{
	if (!o || o->version != SBX_SANDBOX_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "sandbox opts: missing or version %u unsupported",
				     o ? o->version : 0);
	if (!o->image || !*o->image)
		return sbx_error_set(err, -EINVAL, "sandbox spec: image is required");
	if (o->cpus < 0 || o->cpus > 1024)
		return sbx_error_set(err, -EINVAL, "sandbox spec: cpus %.2f out of range (0..1024)", o->cpus);
	if (o->network != SBX_NETWORK_NONE && o->network != SBX_NETWORK_HOST && o->network != SBX_NETWORK_INTERNET)
		return sbx_error_set(err, -EINVAL, "sandbox spec: network %d unknown (none, internet, host)",
				     (int)o->network);
	if (o->userns != SBX_USERNS_PRIVATE && o->userns != SBX_USERNS_HOST)
		return sbx_error_set(err, -EINVAL, "sandbox spec: userns %d unknown (private, host)", (int)o->userns);
	if ((o->allow_out || o->deny_out) && o->network != SBX_NETWORK_INTERNET)
		return sbx_error_set(err, -EINVAL,
				     "sandbox spec: egress rules (allow_out/deny_out) need network=internet");
	if (o->workdir && o->workdir[0] != '/')
		return sbx_error_set(err, -EINVAL, "sandbox spec: workdir '%s' must be absolute", o->workdir);
	int r = check_kv(o->env, "env", err);
	return r < 0 ? r : check_kv(o->labels, "label", err);
}

sbx_sandbox *sbx__sandbox_wrap(sbx_runtime *rt, const sbx_provider_ops *ops, void *impl, char *id)
{
	sbx_sandbox *sb = xcalloc(1, sizeof(*sb));
	sb->rt = rt;
	sb->ops = ops;
	sb->impl = impl;
	sb->id = id;
	return sb;
}

int sbx_sandbox_create(sbx_sandbox **out, sbx_runtime *rt, const sbx_sandbox_opts *opts,
		       sbx_error **err)
{
	return sbx_sandbox_create_ex(out, rt, opts, NULL, err);
}

const sbx_provider_ops *sbx__sandbox_ops(const sbx_sandbox *sb)
{
	return sb->ops;
}

void *sbx__sandbox_impl(const sbx_sandbox *sb)
{
	return sb->impl;
}

sbx_runtime *sbx__sandbox_runtime(const sbx_sandbox *sb)
{
	return sb->rt;
}

void sbx__sandbox_set_keepalive(sbx_sandbox *sb, int on)
{
	sb->keepalive = on;
}

int sbx_sandbox_open(sbx_sandbox **out, sbx_runtime *rt, const char *provider, const char *id,
		     sbx_error **err)
{
	if (!id || !*id)
		return sbx_error_set(err, -EINVAL, "open sandbox: id is required");
	const sbx_provider_ops *ops;
	void *ctx;
	int r = sbx__runtime_provider(&ops, &ctx, rt, provider, err);
	if (r < 0)
		return r;
	if (!ops->open)
		return sbx__unsupported(ops, "open", err);
	void *impl = NULL;
	r = ops->open(&impl, ctx, id, err);
	if (r < 0)
		return r;
	*out = sbx__sandbox_wrap(rt, ops, impl, xstrdup(id));
	return 0;
}

int sbx_sandbox_limits(sbx_limits *out, sbx_runtime *rt, const sbx_sandbox_opts *opts, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const sbx_provider_ops *ops;
	void *ctx;
	int r = sbx__runtime_provider(&ops, &ctx, rt, opts->provider, err);
	if (r < 0)
		return r;
	if (!ops->limits)
		return sbx_error_set(err, -ENOSYS, "%s: reporting limits is not supported", ops->name);
	return ops->limits(out, ctx, opts, err);
}

const char *sbx_sandbox_id(const sbx_sandbox *sb)
{
	return sb->id;
}

const char *sbx_sandbox_provider(const sbx_sandbox *sb)
{
	return sb->ops->name;
}

int sbx_sandbox_destroy(sbx_sandbox *sb, sbx_error **err)
{
	if (sb->destroyed)
		return 0;
	if (sb->keepalive) {
		sbx__keepalive_remove(sb->rt, sb);
		sb->keepalive = 0;
	}
	int r = sb->ops->destroy(sb->impl, err);
	if (r == 0)
		sb->destroyed = 1;
	return r;
}

int sbx_sandbox_destroy_id(sbx_runtime *rt, const char *provider, const char *id, sbx_error **err)
{
	if (!id || !*id)
		return sbx_error_set(err, -EINVAL, "destroy sandbox: id is required");
	const sbx_provider_ops *ops;
	void *ctx;
	int r = sbx__runtime_provider(&ops, &ctx, rt, provider, err);
	if (r < 0)
		return r;
	if (!ops->destroy_id)
		return sbx__unsupported(ops, "destroy_id", err);
	return ops->destroy_id(ctx, id, err);
}

void sbx_sandbox_free(sbx_sandbox *sb)
{
	if (!sb)
		return;
	if (sb->keepalive)
		sbx__keepalive_remove(sb->rt, sb);
	if (sb->ops->close)
		sb->ops->close(sb->impl);
	free(sb->id);
	free(sb);
}

int sbx__unsupported(const sbx_provider_ops *ops, const char *op, sbx_error **err)
{
	return sbx_error_set(err, -ENOSYS, "%s: %s is not supported", ops->name, op);
}

static int gone(sbx_sandbox *sb, sbx_error **err)
{
	return sbx_error_set(err, -ESRCH, "sandbox %s was destroyed", sb->id);
}

int sbx_sandbox_exec(sbx_exec_result *out, sbx_sandbox *sb, const sbx_exec_opts *opts,
		     sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	if (!opts || opts->version != SBX_EXEC_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "exec opts: missing or version unsupported");
	if (!!(opts->argv && opts->argv[0]) == !!opts->shell)
		return sbx_error_set(err, -EINVAL, "exec: give exactly one of argv and shell");
	if (opts->timeout_s < 0)
		return sbx_error_set(err, -EINVAL, "exec: timeout %.3f must not be negative", opts->timeout_s);
	if (opts->cwd && opts->cwd[0] != '/')
		return sbx_error_set(err, -EINVAL, "exec: cwd '%s' must be absolute", opts->cwd);
	int r = check_kv(opts->env, "exec env", err);
	if (r == 0)
		r = sbx__exec_check_tty(sb->ops, opts, err);
	if (r < 0)
		return r;
	if (sb->destroyed)
		return gone(sb, err);
	return sb->ops->exec(out, sb->impl, opts, err);
}

void sbx_exec_result_free(sbx_exec_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

static int check_path(const char *path, const char *what, sbx_error **err)
{
	if (!path || path[0] != '/')
		return sbx_error_set(err, -EINVAL, "%s: sandbox path '%s' must be absolute", what,
				     path ? path : "(null)");
	return 0;
}

int sbx_sandbox_write_file(sbx_sandbox *sb, const char *path, const void *data, size_t len,
			   unsigned mode, sbx_error **err)
{
	int r = check_path(path, "write file", err);
	if (r < 0)
		return r;
	if (sb->destroyed)
		return gone(sb, err);
	if (!sb->ops->write_file)
		return sbx__unsupported(sb->ops, "write_file", err);
	return sb->ops->write_file(sb->impl, path, data, len, mode, err);
}

int sbx_sandbox_read_file(void **data_out, size_t *len_out, sbx_sandbox *sb, const char *path,
			  size_t max, sbx_error **err)
{
	int r = check_path(path, "read file", err);
	if (r < 0)
		return r;
	if (sb->destroyed)
		return gone(sb, err);
	if (!sb->ops->read_file)
		return sbx__unsupported(sb->ops, "read_file", err);
	return sb->ops->read_file(data_out, len_out, sb->impl, path, max ? max : (1UL << 30), err);
}

int sbx_sandbox_upload(sbx_sandbox *sb, const char *src, const char *dst, sbx_error **err)
{
	int r = check_path(dst, "upload", err);
	if (r < 0)
		return r;
	if (sb->destroyed)
		return gone(sb, err);
	if (!sb->ops->upload)
		return sbx__unsupported(sb->ops, "upload", err);
	return sb->ops->upload(sb->impl, src, dst, err);
}

int sbx_sandbox_download(sbx_sandbox *sb, const char *src, const char *dst, sbx_error **err)
{
	int r = check_path(src, "download", err);
	if (r < 0)
		return r;
	if (sb->destroyed)
		return gone(sb, err);
	if (!sb->ops->download)
		return sbx__unsupported(sb->ops, "download", err);
	return sb->ops->download(sb->impl, src, dst, err);
}

int sbx_sandbox_set_timeout(sbx_sandbox *sb, unsigned ttl_s, sbx_error **err)
{
	if (sb->destroyed)
		return gone(sb, err);
	if (!sb->ops->set_timeout)
		return sbx__unsupported(sb->ops, "set_timeout", err);
	return sb->ops->set_timeout(sb->impl, ttl_s, err);
}

static int labels_match(char *const *labels, const char *const *filter)
{
	for (size_t i = 0; filter && filter[i]; i++) {
		int found = 0;
		for (size_t j = 0; labels && labels[j]; j++)
			if (strcmp(labels[j], filter[i]) == 0)
				found = 1;
		if (!found)
			return 0;
	}
	return 1;
}

static void info_clear(sbx_sandbox_info *i)
{
	free(i->id);
	free(i->provider);
	free(i->image);
	free(i->state);
	sbx__strv_free(i->labels);
}

int sbx_sandbox_list(sbx_sandbox_info **out, size_t *n_out, sbx_runtime *rt, const char *provider,
		     const char *const *filter, sbx_error **err)
{
	const sbx_provider_ops *ops;
	void *ctx;
	int r = sbx__runtime_provider(&ops, &ctx, rt, provider, err);
	if (r < 0)
		return r;
	if (!ops->list)
		return sbx__unsupported(ops, "list", err);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	r = ops->list(&v, &n, ctx, err);
	if (r < 0)
		return r;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (labels_match(v[i].labels, filter))
			v[k++] = v[i];
		else
			info_clear(&v[i]);
	}
	*out = v;
	*n_out = k;
	return 0;
}

int sbx_sandbox_info_get(sbx_sandbox_info **out, sbx_sandbox *sb, sbx_error **err)
{
	*out = NULL;
	if (sb->destroyed)
		return gone(sb, err);
	const sbx_provider_ops *ops = sb->ops;
	/* Tables older than version 7 end before info: never read past them. */
	if (ops->version >= 7 && ops->info) {
		sbx_sandbox_info *one = xcalloc(1, sizeof(*one));
		int r = ops->info(one, sb->impl, err);
		if (r < 0) {
			info_clear(one);
			free(one);
			return r;
		}
		/* What list would say: the op's own value, else the provider's name. */
		if (!one->provider)
			one->provider = xstrdup(ops->name);
		*out = one;
		return 0;
	}
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	int r = sbx_sandbox_list(&v, &n, sb->rt, ops->name, NULL, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		if (!*out && strcmp(v[i].id, sbx_sandbox_id(sb)) == 0) {
			*out = xmalloc(sizeof(**out));
			**out = v[i];
		} else {
			info_clear(&v[i]);
		}
	}
	free(v);
	return *out ? 0 : sbx_error_set(err, -ESRCH, "no sandbox '%s' (gone?)", sbx_sandbox_id(sb));
}

void sbx_sandbox_info_free(sbx_sandbox_info *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		info_clear(&v[i]);
	free(v);
}

int sbx_network_parse(sbx_network *out, const char *s)
{
	if (s && strcmp(s, "none") == 0)
		*out = SBX_NETWORK_NONE;
	else if (s && strcmp(s, "host") == 0)
		*out = SBX_NETWORK_HOST;
	else if (s && strcmp(s, "internet") == 0)
		*out = SBX_NETWORK_INTERNET;
	else
		return -EINVAL;
	return 0;
}

const char *sbx_network_name(sbx_network n)
{
	return n == SBX_NETWORK_HOST ? "host" : n == SBX_NETWORK_INTERNET ? "internet" : "none";
}

int sbx_userns_parse(sbx_userns *out, const char *s)
{
	if (s && strcmp(s, "private") == 0)
		*out = SBX_USERNS_PRIVATE;
	else if (s && strcmp(s, "host") == 0)
		*out = SBX_USERNS_HOST;
	else
		return -EINVAL;
	return 0;
}

const char *sbx_userns_name(sbx_userns u)
{
	return u == SBX_USERNS_HOST ? "host" : "private";
}

int sbx_scratch_parse(sbx_scratch_kind *out, const char *s)
{
	if (s && strcmp(s, "disk") == 0)
		*out = SBX_SCRATCH_DISK;
	else if (s && strcmp(s, "tmpfs") == 0)
		*out = SBX_SCRATCH_TMPFS;
	else
		return -EINVAL;
	return 0;
}
