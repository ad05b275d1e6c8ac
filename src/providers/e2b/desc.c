/* SPDX-License-Identifier: MIT */
/*
 * How the e2b provider (alias agentenv: the AgentENV fork of the E2B API,
 * and `sbx serve`) describes itself to the registry: its credential, its
 * endpoint, the legacy OpenEnv throttle-pattern variable, and how a task's
 * environment becomes an E2B template (templates.c).
 */
#include <stdlib.h>

#include <sbx/sys/provider.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "e2b_template.h"

static int e2b_task_image(char **image_out, char **how_out, sbx_runtime *rt, const sbx_task_env *env,
			  sbx_error **err)
{
	struct sbx_e2b_template_opts o = { .context_dir = env->context_dir, .docker_image = env->docker_image,
					   .slug = env->slug, .cpus = env->cpus, .memory_mb = env->memory_mb,
					   .timeout_s = env->timeout_s, .force = env->force,
					   .on_output = env->on_output, .payload = env->payload };
	int cached = 0;
	int r = sbx__e2b_template_ensure(image_out, &cached, rt, &o, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "e2b template of %s", env->dir);
	*how_out = xstrdup(cached ? "cached" : "built");
	return 0;
}

static const char *const aliases[] = { "agentenv", NULL };

static const sbx_provider_cred cred = {
	.key_vars = { "E2B_API_KEY", NULL },
	.file_var = "E2B_API_KEY_FILE",
	.default_path = ".config/e2b/api_key",
	.hint = "mkdir -p ~/.config/e2b && (umask 077; echo YOUR_KEY > ~/.config/e2b/api_key)  "
		"# E2B Cloud: e2b.dev dashboard; AgentENV and `sbx serve`: the server's key",
	.forward = { "E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN", "SBX_E2B_URL_SCHEME", "OPENENV_E2B_URL_SCHEME",
		     NULL },
};

const sbx_provider_desc sbx_provider_e2b_desc = {
	.name = "e2b",
	.aliases = aliases,
	.title = "E2B",
	.caps = SBX_PROVIDER_CAP_REMOTE | SBX_PROVIDER_CAP_TTL_EXTEND | SBX_PROVIDER_CAP_PAUSE |
		SBX_PROVIDER_CAP_TEMPLATES | SBX_PROVIDER_CAP_PORTS | SBX_PROVIDER_CAP_NET_NONE |
		SBX_PROVIDER_CAP_NET_INTERNET,
	.cred = &cred,
	.endpoint_default = "https://api.e2b.app",
	.endpoint_var = "E2B_API_URL",
	.endpoint_label = "endpoint",
	.ttl_vars = { "SBX_SANDBOX_TTL_S", "OPENENV_E2B_SANDBOX_TTL_S", NULL },
	.throttle_env = "OPENENV_E2B_THROTTLE_PATTERNS",
	.task_image = e2b_task_image,
};
