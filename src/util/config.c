/* SPDX-License-Identifier: MIT */
/*
 * The table of configuration knobs (see config.h). `sbx help env` prints it
 * and docs/configuration.md is its output, so a knob's documentation is
 * here: keep each group sorted by name, a default as the code applies it,
 * and the help to one line. scripts/checksrc.sh reads the K(...) lines.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "str.h"
#include "config.h"

#define K(name, type, comp, def, help) { name, SBX_KNOB_##type, comp, def, help }
#define T K /* the same, for the part checksrc does not accept */

const struct sbx_knob sbx__knobs[] = {
	/* core: src/core (runtime, create pipeline, keepalive) */
	K("OPENENV_E2B_CREATE_CONCURRENCY", INTEGER, "core", "4", "the reference framework's name for SBX_CREATE_CONCURRENCY on the e2b provider"),
	K("OPENENV_E2B_CREATE_MAX_RETRIES", INTEGER, "core", "8", "the reference framework's name for SBX_CREATE_MAX_RETRIES on the e2b provider"),
	K("OPENENV_E2B_THROTTLE_PATTERNS", LIST, "core", "(none)", "the reference framework's name for SBX_THROTTLE_PATTERNS (read when that is unset)"),
	K("OPENENV_LAUNCHER", STRING, "core", "(the user name)", "the reference framework's name for SBX_LAUNCHER"),
	K("OPENENV_LOCAL_CREATE_CONCURRENCY", INTEGER, "core", "4", "SBX_CREATE_CONCURRENCY for the local provider only (OPENENV_<PROVIDER>_...)"),
	K("OPENENV_LOCAL_CREATE_MAX_RETRIES", INTEGER, "core", "8", "SBX_CREATE_MAX_RETRIES for the local provider only (OPENENV_<PROVIDER>_...)"),
	K("OPENENV_RUN_ID", STRING, "core", "(none)", "the reference framework's name for SBX_RUN_ID"),
	K("SBX_BACKOFF_BASE_S", SECONDS, "core", "2", "first delay before retrying a throttled create; doubles per retry, times U(0.5, 1.5)"),
	K("SBX_BACKOFF_CAP_S", SECONDS, "core", "30", "longest delay between retries of a throttled create"),
	K("SBX_CREATE_CONCURRENCY", INTEGER, "core", "4", "provider create calls at once, per process and provider (1..99999)"),
	K("SBX_CREATE_MAX_RETRIES", INTEGER, "core", "8", "retries of a throttled create (0..999)"),
	K("SBX_IMAGE_DIR", PATH, "core", "/var/lib/sbx/images", "the image store (sbx_runtime_opts.image_dir and --image-dir win)"),
	K("SBX_KEEPALIVE_INTERVAL_S", SECONDS, "core", "(TTL / 6)", "how often the keepalive thread renews a remote sandbox's TTL"),
	K("SBX_LAUNCHER", STRING, "core", "(the user name)", "the sbx.launcher label of every sandbox created"),
	K("SBX_RUN_ID", STRING, "core", "(none)", "the sbx.run_id label of every sandbox created"),
	K("SBX_STATE_DIR", PATH, "core", "/run/sbx", "runtime state: sandbox records, locks (sbx_runtime_opts.state_dir and --state-dir win)"),
	K("SBX_THROTTLE_PATTERNS", LIST, "core", "(none)", "extra message substrings that make a create failure a throttle, re-read on every failure"),
	/* local: src/providers/local */
	K("SBX_CGROUP", CHOICE, "providers/local", "(detected)", "v1, v2 or none: force the cgroup hierarchy sandbox limits use"),
	K("SBX_CGROUP_PARENT", STRING, "providers/local", "(sbx-<hash of state dir>)", "name of the parent cgroup of the sandboxes' groups"),
	K("SBX_DEFAULT_MEMORY", SIZE, "providers/local", "(1/4 of RAM, 256M..8G)", "memory limit of a sandbox that asks for none; a bare number is MiB, 0 = unlimited"),
	K("SBX_MEMCG_SPARES", INTEGER, "providers/local", "16", "cgroup v1: emptied memory groups kept per state dir for the next sandbox's first exec, by a process from its second create on (0 = off, at most 64)"),
	K("SBX_NET_DENY_PRIVATE", BOOLEAN, "providers/local", "0", "network=internet: 1 also blocks 10/8, 172.16/12, 192.168/16 and 100.64/10"),
	K("SBX_NET_DNS", LIST, "providers/local", "(the host's non-loopback nameservers)", "network=internet: the sandboxes' IPv4 nameservers"),
	K("SBX_NET_POOL", STRING, "providers/local", "100.96.0.0/12", "network=internet: IPv4 prefix (/8../24) sandbox addresses come from, a /31 each"),
	K("SBX_NS_POOL", INTEGER, "providers/local", "2", "ready-made network/UTS/IPC namespaces kept per process (0 = off, at most 64)"),
	K("SBX_SCRATCH", CHOICE, "providers/local", "(disk if it works)", "tmpfs keeps every writable layer in memory; disk makes a scratch file system failure an error"),
	K("SBX_SCRATCH_DIR", PATH, "providers/local", "/var/lib/sbx/scratch", "btrfs scratch file system of the writable layers (made as <dir>.img if it is none)"),
	K("SBX_SCRATCH_SIZE", SIZE, "providers/local", "(90% of the free space, at least 1G)", "size of the <dir>.img a scratch file system is made in"),
	K("SBX_USERNS_LOCK_DIR", PATH, "providers/local", "/run/sbx-idmap", "lock files of the user-id slots of userns=private sandboxes"),
	K("SBX_USERNS_RANGE", STRING, "providers/local", "(/etc/subuid's sbx line, else 1048576:1073741824)", "START:COUNT host ids userns=private sandboxes take 65536 each from"),
	/* images: src/images (registry pulls) */
	K("SBX_INSECURE_REGISTRIES", LIST, "images", "(none; loopback is always allowed)", "registries (host:port, or host for any port) pulled over plain HTTP"),
	K("SBX_REGISTRY_AUTH_FILE", SECRET_FILE, "images", "~/.docker/config.json", "registry credentials, Docker's config.json format"),
	K("SBX_REGISTRY_MIRROR", LIST, "images", "(none)", "REGISTRY=URL pairs: pull REGISTRY's images from URL (docker.io=http://127.0.0.1:5000)"),
	/* e2b: src/providers/e2b */
	K("E2B_API_URL", STRING, "providers/e2b", "(<scheme>://api.<E2B_DOMAIN>)", "the E2B control-plane API address"),
	K("E2B_DOMAIN", STRING, "providers/e2b", "e2b.app", "the E2B domain; sandboxes are reached at <port>-<id>.<domain>"),
	K("E2B_SANDBOX_URL", STRING, "providers/e2b", "(<scheme>://<port>-<id>.<domain>)", "one address for every sandbox's envd (sbx serve, proxies)"),
	K("OPENENV_E2B_SANDBOX_TTL_S", INTEGER, "providers/e2b", "1800", "the reference framework's name for SBX_SANDBOX_TTL_S"),
	K("OPENENV_E2B_URL_SCHEME", CHOICE, "providers/e2b", "https", "the reference framework's name for SBX_E2B_URL_SCHEME"),
	K("SBX_E2B_URL_SCHEME", CHOICE, "providers/e2b", "https", "http or https for the addresses made from E2B_DOMAIN"),
	K("SBX_SANDBOX_TTL_S", INTEGER, "providers/e2b", "1800", "seconds a remote sandbox outlives its last keepalive (1..86400); core's keepalive uses it too"),
	/* daytona: src/providers/daytona */
	K("DAYTONA_ORGANIZATION_ID", STRING, "providers/daytona", "(none)", "sent as X-Daytona-Organization-ID (needed when the key is a JWT)"),
	K("HARBOR_OVERRIDE_STORAGE_MB", INTEGER, "providers/daytona", "(the task's storage, else Daytona's default)", "disk of every Daytona sandbox in MiB (rounded up to GiB): keeps concurrency x disk under the org quota"),
	K("SBX_DAYTONA_CREATE_TIMEOUT_S", DURATION, "providers/daytona", "300", "a Daytona sandbox not started this long after its create is deleted and the create retried"),
	K("SBX_DAYTONA_DISK_QUOTA_GB", INTEGER, "providers/daytona", "30", "sbx doctor --backend daytona: the org's total disk quota (GiB) for the quota math"),
	K("SBX_DAYTONA_EXEC", CHOICE, "providers/daytona", "session", "session: a session per exec, polled, stdout and stderr apart; execute: one process/execute call, stderr merged into stdout"),
	K("SBX_DAYTONA_SANDBOXES", INTEGER, "providers/daytona", "(SBX_CREATE_CONCURRENCY)", "sbx doctor --backend daytona: how many sandboxes you run at once, for the quota math"),
	/* server: sbx serve */
	K("SBX_SERVE_DAYTONA_FAIL_CREATES", STRING, "server", "0", "sbx serve, tests only: answer the next N Daytona creates with the disk-quota error (400), or with 429 as N:429"),
	K("SBX_SERVE_DAYTONA_FAIL_SNAPSHOTS", INTEGER, "server", "0", "sbx serve, tests only: answer the next N Daytona snapshot creates with the snapshot-quota error (400)"),
	K("SBX_SERVE_DEFAULT_TEMPLATE", STRING, "server", "(none)", "sbx serve: the image of templateID \"base\" (--default-template wins; none or empty: the image \"base\", built by make base)"),
	/* cli: src/cli */
	K("OPENENV_MODAL_SANDBOX_TTL_S", INTEGER, "cli", "1800", "sbx doctor --backend modal: the sandbox TTL checked against the episode cap"),
	K("SBX_LOG", CHOICE, "cli", "warn", "error, warn, info or debug: the library's log on stderr (secrets redacted)"),
	K("SBX_TASKS_DIR", PATH, "cli", "examples/tasks", "sbx smoke: where the Harbor tasks are (--tasks-dir wins)"),
	/* tasks: src/tasks */
	K("OPENENV_MAX_ROLLOUT_TIME_SECONDS", DURATION, "tasks", "3600", "the reference framework's name for SBX_MAX_EPISODE_S"),
	K("SBX_MAX_EPISODE_S", DURATION, "tasks", "3600", "an episode's wall-clock cap when the caller sets none"),
	/* agents: src/agents (the policy agent) */
	K("DEEPSEEK_API_KEY", SECRET, "agents", "(none)", "the policy agent's key when POLICY_API_KEY_FILE and POLICY_API_KEY are unset (the reference's name)"),
	K("OPENENV_MAX_TURNS", INTEGER, "agents", "30", "the policy agent's turn limit (agent arg max_turns wins)"),
	K("POLICY_API_KEY", SECRET, "agents", "(none)", "the policy agent's model API key (a key file is safer)"),
	K("POLICY_API_KEY_FILE", SECRET_FILE, "agents", "(none)", "file holding the policy agent's model API key (wins over the variables)"),
	K("POLICY_BASE_URL", STRING, "agents", "https://api.deepseek.com", "the policy agent's OpenAI-compatible API base; POSTs go to {base}/chat/completions (agent arg api_base wins)"),
	K("POLICY_MODEL", STRING, "agents", "deepseek-v4-flash", "the policy agent's model name (agent arg model wins)"),
	/* credentials: src/core/credentials.c (one precedence: variables, the named file, the default file) */
	K("DAYTONA_API_KEY", SECRET, "credentials", "(none)", "the Daytona key (a key file is safer)"),
	K("DAYTONA_API_KEY_FILE", SECRET_FILE, "credentials", "~/.config/daytona/api_key", "file holding the Daytona key"),
	K("DAYTONA_API_URL", STRING, "credentials", "(Daytona's default)", "the Daytona endpoint; forwarded to workers"),
	K("DAYTONA_TARGET", STRING, "credentials", "(Daytona's default)", "the Daytona target region; forwarded to workers"),
	K("E2B_API_KEY", SECRET, "credentials", "(none)", "the E2B key (a key file is safer)"),
	K("E2B_API_KEY_FILE", SECRET_FILE, "credentials", "~/.config/e2b/api_key", "file holding the E2B key"),
	K("MODAL_CONFIG_PATH", SECRET_FILE, "credentials", "~/.modal.toml", "Modal's token file ([profile] token_id, token_secret)"),
	K("MODAL_ENVIRONMENT", STRING, "credentials", "(the workspace default)", "the Modal workspace environment; forwarded to workers"),
	K("MODAL_PROFILE", STRING, "credentials", "(the active profile)", "the profile of MODAL_CONFIG_PATH to use; forwarded to workers"),
	K("MODAL_TOKEN_ID", SECRET, "credentials", "(none)", "the Modal token id, with MODAL_TOKEN_SECRET (both or neither)"),
	K("MODAL_TOKEN_SECRET", SECRET, "credentials", "(none)", "the Modal token secret, with MODAL_TOKEN_ID"),
	K("OPENENV_MODAL_APP", STRING, "credentials", "(none)", "the Modal app name; forwarded to workers"),
	K("OPENENV_SANDBOX_BACKEND", CHOICE, "credentials", "providers/local", "the reference framework's name for SBX_BACKEND"),
	K("SBX_BACKEND", CHOICE, "credentials", "providers/local", "default backend: local, e2b (= agentenv), daytona or modal (--backend wins)"),
	/* standard variables sbx also reads */
	K("HOME", PATH, "standard", "/root", "default key files (~/.config/..., ~/.modal.toml; /root without HOME) and ~/.docker/config.json"),
	K("PATH", LIST, "standard", "/usr/bin:/bin", "where debootstrap and mkfs.btrfs are found (image bootstrap also tries /usr/sbin:/sbin)"),
	K("TMPDIR", PATH, "standard", "/tmp", "e2b provider: temporary files of tree uploads and downloads"),
};
const size_t sbx__n_knobs = sizeof(sbx__knobs) / sizeof(sbx__knobs[0]);

/* Read only by tests/, bench/ and scripts/ (which may use getenv); sbx__env
 * refuses them. */
const struct sbx_knob sbx__test_knobs[] = {
	T("SBX_BUILD_ROOT", PATH, "tests", "(set by meson test)", "the build directory, to find sbx, the probe and helpers"),
	T("SBX_E2B_EPISODES", INTEGER, "tests", "1000", "integration/e2b: episodes of the soak through the E2B provider"),
	T("SBX_EVAL_TASKS", STRING, "tests", "(all)", "integration/eval_policy: the bundled tasks its sweeps run (A,B,...); scripts/check.sh gives the ASan pass a few"),
	T("SBX_FUZZ_DEBUG", BOOLEAN, "tests", "(unset)", "fuzz harnesses: set to print the server fixture's log"),
	T("SBX_KEEP_TMP", BOOLEAN, "tests", "(unset)", "integration/registry: set to keep the test's temporary directory"),
	T("SBX_MUST_WORK", BOOLEAN, "tests", "0", "1 turns a skip for want of root, node or data into a failure (CI sets it)"),
	T("SBX_PROBE", PATH, "tests", "(set by meson test)", "the probe binary integration tests run inside sandboxes"),
	T("SBX_SERVER_SCALE", INTEGER, "tests", "500", "integration/server: sandboxes of the scale test (0 = skip it)"),
	T("SBX_SERVE_BIN", PATH, "tests", "(the built sbx)", "security/server: the sbx binary to serve with"),
	T("SBX_SOAK_EPISODES", INTEGER, "tests", "2000", "integration/orchestration: episodes of the soak"),
	T("SBX_SOURCE_ROOT", PATH, "tests", "(set by meson test)", "the source tree, for fixtures and examples"),
	T("SBX_TEST_CYCLES", INTEGER, "tests", "1000", "integration/cleanup: create/destroy cycles of the leak test"),
	T("SBX_TOML_TEST_DIR", PATH, "tests", "(../shared/conformance/toml-test)", "conformance/toml: the toml-test corpus"),
	T("SBX_COMPAT_CACHE", PATH, "scripts", "(build/compat-cache)", "tests/compat, bench/serve.sh: where the e2b npm SDKs are installed"),
	T("SBX_COMPAT_IMAGE_DIR", PATH, "scripts", "(build/compat-images)", "tests/compat: the image store of the SDK tests"),
	T("SBX_COMPAT_VERSIONS", LIST, "scripts", "2.51.0 2.30.5 2.8.4", "tests/compat: e2b SDK versions to test (space-separated)"),
	T("SBX_DEMO_TASKS", PATH, "scripts", "examples/tasks", "scripts/demo.sh: the tasks directory"),
	T("SBX_LIBRARY", PATH, "scripts", "(a build dir next to python/, then libsbx.so.0)", "the Python package (python/sbx): the libsbx.so it loads (docs/python.md)"),
	T("SBX_TASKS_IMAGE", STRING, "scripts", "sbx-tasks:bookworm", "examples/tasks/base-image.env: the tasks' base image"),
	T("SBX_TASKS_PACKAGES", LIST, "scripts", "(examples/tasks/base-image.env)", "Debian packages bootstrapped into SBX_TASKS_IMAGE"),
	T("SBX_TASKS_SUITE", STRING, "scripts", "bookworm", "the Debian suite of SBX_TASKS_IMAGE"),
};
const size_t sbx__n_test_knobs = sizeof(sbx__test_knobs) / sizeof(sbx__test_knobs[0]);

const char *sbx__knob_type_name(enum sbx_knob_type t)
{
	static const char *const names[] = {
		[SBX_KNOB_STRING] = "string",     [SBX_KNOB_CHOICE] = "choice",
		[SBX_KNOB_PATH] = "path",         [SBX_KNOB_SIZE] = "size",
		[SBX_KNOB_DURATION] = "duration", [SBX_KNOB_SECONDS] = "seconds",
		[SBX_KNOB_INTEGER] = "integer",   [SBX_KNOB_BOOLEAN] = "boolean",
		[SBX_KNOB_LIST] = "list",         [SBX_KNOB_SECRET] = "secret",
		[SBX_KNOB_SECRET_FILE] = "secret file",
	};
	return (unsigned)t < sizeof(names) / sizeof(names[0]) && names[t] ? names[t] : "?";
}

const struct sbx_knob *sbx__knob_find(const char *name)
{
	for (size_t i = 0; name && i < sbx__n_knobs; i++)
		if (strcmp(sbx__knobs[i].name, name) == 0)
			return &sbx__knobs[i];
	return NULL;
}

const char *sbx__env(const char *name)
{
	if (!sbx__knob_find(name))
		SBX_LOGE("bug: environment variable %s is not in the knob table (src/util/config.c)", name);
	return getenv(name);
}

const char *sbx__env_dyn(const char *name)
{
	if (!sbx__knob_find(name))
		SBX_LOGD("environment variable %s is not in the knob table (src/util/config.c)", name);
	return getenv(name);
}

const char *sbx__env_user(const char *name)
{
	return getenv(name);
}

unsigned sbx__sandbox_ttl_s(void)
{
	const char *v[] = { sbx__env("SBX_SANDBOX_TTL_S"), sbx__env("OPENENV_E2B_SANDBOX_TTL_S") };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint64_t n;
		if (v[i] && sbx__parse_u64(&n, v[i]) == 0 && n > 0 && n <= SBX_SANDBOX_TTL_MAX_S)
			return (unsigned)n;
	}
	return SBX_SANDBOX_TTL_DEFAULT_S;
}
