/* SPDX-License-Identifier: MIT */
/*
 * The modal provider, described only (see ../daytona/desc.c): its token pair
 * lives in ~/.modal.toml, one table per profile, and a Modal sandbox's TTL is
 * fixed at creation, so `sbx doctor` checks it against the episode cap.
 */
#include <sbx/sys/provider.h>

static const sbx_provider_cred cred = {
	.key_vars = { "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", NULL },
	.file_var = "MODAL_CONFIG_PATH",
	.default_path = ".modal.toml",
	.hint = "pip install 'modal>=1.5.5' && modal token new  # writes ~/.modal.toml",
	.forward = { "MODAL_PROFILE", "MODAL_ENVIRONMENT", "OPENENV_MODAL_APP", NULL },
	.profile_var = "MODAL_PROFILE",
	.profile_keys = { "token_id", "token_secret", NULL },
};

const sbx_provider_desc sbx_provider_modal_desc = {
	.name = "modal",
	.title = "Modal",
	.caps = SBX_PROVIDER_CAP_REMOTE,
	.cred = &cred,
	.endpoint_default = "https://api.modal.com",
	.endpoint_var = "MODAL_ENVIRONMENT",
	.endpoint_label = "workspace environment",
	.ttl_vars = { "OPENENV_MODAL_SANDBOX_TTL_S", "SBX_SANDBOX_TTL_S", NULL },
};
