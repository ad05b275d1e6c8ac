/* SPDX-License-Identifier: MIT */
/*
 * Group fork: N sandboxes starting from one live sandbox's file system
 * (GRPO's G rollouts of one prompt pay the shared prefix once). The
 * provider does the copy; the core checks the request and wraps handles.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "runtime_int.h"

#define FORK_MAX 1024

int sbx_sandbox_fork(sbx_sandbox **children, size_t n, sbx_sandbox *parent, const sbx_sandbox_opts *overrides,
		     sbx_error **err)
{
	if (!children || !parent)
		return sbx_error_set(err, -EINVAL, "fork: children and parent are required");
	if (n == 0 || n > FORK_MAX)
		return sbx_error_set(err, -EINVAL, "fork sandbox %s: n must be 1..%d, got %zu", sbx_sandbox_id(parent),
				     FORK_MAX, n);
	if (overrides) {
		if (overrides->version != SBX_SANDBOX_OPTS_VERSION)
			return sbx_error_set(err, -EINVAL, "fork: sandbox opts version %u unsupported", overrides->version);
		if (overrides->upper_dir)
			return sbx_error_set(err, -EINVAL, "fork sandbox %s: children cannot take upper_dir",
					     sbx_sandbox_id(parent));
	}
	const sbx_provider_ops *ops = sbx__sandbox_ops(parent);
	/* Tables older than version 4 end before fork: never read past them. */
	if (ops->version < 4 || !ops->fork)
		return sbx_error_set(err, -ENOSYS, "%s: fork is not supported", ops->name);
	void **impls = xcalloc(n, sizeof(*impls));
	char **ids = xcalloc(n, sizeof(*ids));
	int r = ops->fork(impls, ids, n, sbx__sandbox_impl(parent), overrides, err);
	if (r == 0)
		for (size_t i = 0; i < n; i++)
			children[i] = sbx__sandbox_wrap(sbx__sandbox_runtime(parent), ops, impls[i], ids[i]);
	free(impls);
	free(ids);
	return r;
}

int sbx_sandbox_snapshot(char **name_out, sbx_sandbox *sb, const char *name, sbx_error **err)
{
	*name_out = NULL;
	const sbx_provider_ops *ops = sbx__sandbox_ops(sb);
	if (ops->version < 4 || !ops->snapshot)
		return sbx_error_set(err, -ENOSYS, "%s: snapshot is not supported", ops->name);
	return ops->snapshot(name_out, sbx__sandbox_impl(sb), name, err);
}

int sbx_snapshot_remove(sbx_runtime *rt, const char *provider, const char *name, sbx_error **err)
{
	if (!name || !*name)
		return sbx_error_set(err, -EINVAL, "remove snapshot: a name is required");
	const sbx_provider_ops *ops;
	void *ctx;
	int r = sbx__runtime_provider(&ops, &ctx, rt, provider, err);
	if (r < 0)
		return r;
	if (ops->version < 4 || !ops->snapshot_remove)
		return sbx_error_set(err, -ENOSYS, "%s: snapshot is not supported", ops->name);
	return ops->snapshot_remove(ctx, name, err);
}
