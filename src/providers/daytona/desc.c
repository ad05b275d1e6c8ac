/* SPDX-License-Identifier: MIT */
/*
 * The daytona provider, described only: the registry resolves the name, and
 * its credential and doctor checks work (`sbx env --for-workers`, `sbx
 * doctor --backend daytona`) before the ops exist. The implementation joins
 * this folder, and its ops table then replaces this entry in the registry.
 */
#include <sbx/sys/provider.h>

static const sbx_provider_cred cred = {
	.key_vars = { "DAYTONA_API_KEY", NULL },
	.file_var = "DAYTONA_API_KEY_FILE",
	.default_path = ".config/daytona/api_key",
	.hint = "mkdir -p ~/.config/daytona && (umask 077; echo dtn_... > ~/.config/daytona/api_key)",
	.forward = { "DAYTONA_API_URL", "DAYTONA_TARGET", NULL },
};

const sbx_provider_desc sbx_provider_daytona_desc = {
	.name = "daytona",
	.title = "Daytona",
	.caps = SBX_PROVIDER_CAP_REMOTE | SBX_PROVIDER_CAP_TTL_EXTEND,
	.cred = &cred,
	.endpoint_default = "https://app.daytona.io/api",
	.endpoint_var = "DAYTONA_API_URL",
	.endpoint_label = "endpoint",
	.ttl_vars = { "SBX_SANDBOX_TTL_S", "OPENENV_E2B_SANDBOX_TTL_S", NULL },
};
