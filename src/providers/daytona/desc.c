/* SPDX-License-Identifier: MIT */
/*
 * How the daytona provider describes itself to the registry: its credential
 * (the reference framework's names), its endpoint, which create errors are
 * throttles (Daytona's quota and capacity errors clear as sandboxes end, so
 * the core backs off and retries them), and the doctor's quota math: the
 * sandboxes run at once times the disk of each against the org's disk quota,
 * and how a task's environment becomes a digest-named snapshot (snapshot.c).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sbx/sys/provider.h>

#include "../../util/config.h"
#include "../../util/str.h"
#include "daytona_int.h"

static const sbx_provider_cred cred = {
	.key_vars = { "DAYTONA_API_KEY", NULL },
	.file_var = "DAYTONA_API_KEY_FILE",
	.default_path = ".config/daytona/api_key",
	.hint = "mkdir -p ~/.config/daytona && (umask 077; echo dtn_... > ~/.config/daytona/api_key)",
	.forward = { "DAYTONA_API_URL", "DAYTONA_TARGET", "DAYTONA_ORGANIZATION_ID", NULL },
};

/* Daytona's wordings of a full quota or a busy org (checked case-insensitively). */
static const char *const throttles[] = {
	"Total disk limit exceeded", "Sandbox resource limit reached", "snapshot quota", "snapshot limit",
	"concurrency limit", "Total CPU limit exceeded", "Total memory limit exceeded", "No available runners",
	"still creating", NULL,
};

static int dtn_is_throttle(const sbx_error *e)
{
	if (!e)
		return -1;
	if (e->http_status == 429)
		return 1;
	for (size_t i = 0; e->msg && throttles[i]; i++)
		if (strcasestr(e->msg, throttles[i]))
			return 1;
	return -1;
}

static unsigned long num(const char *name, unsigned long dflt)
{
	uint64_t v = 0;
	const char *s = sbx__env(name);
	return s && *s && sbx__parse_u64(&v, s) == 0 && v > 0 ? (unsigned long)v : dflt;
}

static void dtn_doctor(const sbx_doctor_ctx *d)
{
	unsigned long conc = num("SBX_DAYTONA_SANDBOXES", num("SBX_CREATE_CONCURRENCY", 4));
	unsigned long disk_mb = num("HARBOR_OVERRIDE_STORAGE_MB", 3072);
	unsigned long disk_gb = (disk_mb + 1023) / 1024;
	unsigned long quota = num("SBX_DAYTONA_DISK_QUOTA_GB", 30);
	unsigned long need = conc * disk_gb;
	if (need <= quota) {
		d->emit(d->payload, 1, "disk quota", "%lu sandboxes x %lu GiB = %lu GiB, within the %lu GiB quota", conc,
			disk_gb, need, quota);
		return;
	}
	unsigned long fit = quota / (disk_gb ? disk_gb : 1);
	unsigned long per = quota / (conc ? conc : 1);
	d->emit(d->payload, 0, "disk quota",
		"%lu sandboxes x %lu GiB = %lu GiB, over the %lu GiB quota (creates fail 'Total disk limit "
		"exceeded' and back off): run at most %lu at once (SBX_DAYTONA_SANDBOXES), or set "
		"HARBOR_OVERRIDE_STORAGE_MB=%lu, or raise the quota (SBX_DAYTONA_DISK_QUOTA_GB)",
		conc, disk_gb, need, quota, fit, per * 1024);
}

const sbx_provider_desc sbx_provider_daytona_desc = {
	.name = "daytona",
	.title = "Daytona",
	.caps = SBX_PROVIDER_CAP_REMOTE | SBX_PROVIDER_CAP_TTL_EXTEND | SBX_PROVIDER_CAP_NET_NONE |
		SBX_PROVIDER_CAP_NET_INTERNET,
	.cred = &cred,
	.endpoint_default = "https://app.daytona.io/api",
	.endpoint_var = "DAYTONA_API_URL",
	.endpoint_label = "endpoint",
	.ttl_vars = { "SBX_SANDBOX_TTL_S", "OPENENV_E2B_SANDBOX_TTL_S", NULL },
	.throttle_patterns = throttles,
	.is_throttle = dtn_is_throttle,
	.doctor = dtn_doctor,
	.task_image = sbx__dtn_task_image,
};
