/* SPDX-License-Identifier: MIT */
/*
 * The nop agent: does nothing, so the verifier sees the task as it starts
 * (a task whose tests pass untouched is broken).
 */
#include <sbx/sys/connector.h>

#include "util/alloc.h"

static int run(sbx_episode *ep, sbx_agent_outcome *out, sbx_error **err)
{
	(void)ep;
	(void)err;
	out->detail = xstrdup("nop agent");
	return 0;
}

const sbx_agent_ops sbx_agent_nop = {
	.version = SBX_AGENT_OPS_VERSION,
	.name = "nop",
	.summary = "does nothing; the verifier judges the untouched task",
	.run = run,
};
