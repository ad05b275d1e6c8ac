/* SPDX-License-Identifier: MIT */
/*
 * Changing what a running sandbox may reach (E2B's PUT /sandboxes/{id}/network):
 * the core checks the lists' shape, the provider swaps its rules.
 */
#include <errno.h>
#include <stddef.h>

#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "runtime_int.h"

#define EGRESS_MAX 256

static int check_list(const char *const *v, const char *field, const char *id, sbx_error **err)
{
	size_t n = 0;
	for (; v && v[n]; n++)
		if (!*v[n])
			return sbx_error_set(err, -EINVAL, "sandbox %s: %s[%zu] is empty", id, field, n);
	if (n > EGRESS_MAX)
		return sbx_error_set(err, -EINVAL, "sandbox %s: %s has %zu entries, at most %d", id, field, n,
				     EGRESS_MAX);
	return 0;
}

int sbx_sandbox_set_egress(sbx_sandbox *sb, const char *const *allow_out, const char *const *deny_out,
			   sbx_error **err)
{
	if (!sb)
		return sbx_error_set(err, -EINVAL, "set egress: sandbox is required");
	const char *id = sbx_sandbox_id(sb);
	int r;
	if ((r = check_list(allow_out, "allow_out", id, err)) < 0 || (r = check_list(deny_out, "deny_out", id, err)) < 0)
		return r;
	const sbx_provider_ops *ops = sbx__sandbox_ops(sb);
	/* Tables older than version 5 end before set_egress: never read past them. */
	if (ops->version < 5 || !ops->set_egress)
		return sbx_error_set(err, -ENOSYS, "%s: changing a sandbox's egress lists is not supported", ops->name);
	return ops->set_egress(sbx__sandbox_impl(sb), allow_out, deny_out, err);
}
