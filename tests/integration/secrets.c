/* SPDX-License-Identifier: MIT */
/*
 * No secret value ever reaches output: run the CLI's commands with
 * recognisable fake secrets in every credential variable and key file, debug
 * logging on, and grep every byte they print. Sandboxes never inherit the
 * host environment either.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

TestSuite(secrets, .init = setup, .fini = teardown);

#define S_E2B "sbxFAKEe2bSECRET000111"
#define S_E2B_FILE "sbxFAKEe2bFILESECRET222"
#define S_DAYTONA "sbxFAKEdaytonaSECRET333"
#define S_MODAL_ID "sbxFAKEmodalID444"
#define S_MODAL_SECRET "sbxFAKEmodalSECRET555"
#define S_REG "sbxFAKEregistryPASS666"

static char dir[64];

static void write_file(const char *rel, const char *body)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(body, f);
	fclose(f);
	chmod(p, 0600);
}

/* Runs `sbx CMD` with the given environment assignments; returns its output. */
static char *run(const char *env, const char *cmd)
{
	char shell[4096];
	snprintf(shell, sizeof(shell), "env -u E2B_API_KEY -u DAYTONA_API_KEY -u MODAL_TOKEN_ID "
				       "-u MODAL_TOKEN_SECRET %s %s/src/cli/sbx %s 2>&1",
		 env, getenv("SBX_BUILD_ROOT"), cmd);
	FILE *p = popen(shell, "r");
	cr_assert_not_null(p);
	size_t cap = 1 << 16, n = 0, k;
	char *out = malloc(cap);
	while ((k = fread(out + n, 1, cap - n - 1, p)) > 0) {
		n += k;
		if (n + 1 == cap)
			out = realloc(out, cap *= 2);
	}
	out[n] = '\0';
	pclose(p);
	return out;
}

Test(secrets, no_command_prints_a_secret)
{
	snprintf(dir, sizeof(dir), "/tmp/sbx-secrets-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	write_file("e2b_key", S_E2B_FILE "\n");
	write_file("modal.toml", "[p]\ntoken_id = \"" S_MODAL_ID "\"\ntoken_secret = \"" S_MODAL_SECRET "\"\n");
	/* base64("user:sbxFAKEregistryPASS666") */
	write_file("docker.json", "{\"auths\": {\"127.0.0.1:1\": {\"auth\": \"dXNlcjpzYnhGQUtFcmVnaXN0cnlQQVNTNjY2\"}}}");
	char common[1024], by_env[512], by_file[512];
	snprintf(common, sizeof(common),
		 "SBX_LOG=debug SBX_REGISTRY_AUTH_FILE=%s/docker.json SBX_STATE_DIR=%s SBX_IMAGE_DIR=%s "
		 "E2B_API_URL=http://127.0.0.1:9 DAYTONA_API_URL=http://127.0.0.1:9",
		 dir, sbx_runtime_state_dir(rt), sbx_runtime_image_dir(rt));
	snprintf(by_env, sizeof(by_env), "E2B_API_KEY=%s DAYTONA_API_KEY=%s MODAL_TOKEN_ID=%s MODAL_TOKEN_SECRET=%s",
		 S_E2B, S_DAYTONA, S_MODAL_ID, S_MODAL_SECRET);
	snprintf(by_file, sizeof(by_file), "E2B_API_KEY_FILE=%s/e2b_key MODAL_CONFIG_PATH=%s/modal.toml", dir, dir);
	const char *cmds[] = {
		"env --for-workers --backend e2b", "env --for-workers --backend daytona",
		"env --for-workers --backend modal", "env --for-workers --backend agentenv --json",
		"doctor --backend e2b", "doctor --backend daytona", "doctor --backend modal",
		"gc --backend local --dry-run --json", "ls --json",
		"run busybox -- env", "run busybox -- cat /proc/1/environ",
		"image pull 127.0.0.1:1/nothing:here", NULL };
	const char *secrets[] = { S_E2B, S_E2B_FILE, S_DAYTONA, S_MODAL_ID, S_MODAL_SECRET, S_REG, NULL };
	const char *supplies[] = { by_env, by_file };
	for (int i = 0; cmds[i]; i++)
		for (int k = 0; k < 2; k++) {
			char env[2048];
			snprintf(env, sizeof(env), "%s %s", common, supplies[k]);
			char *out = run(env, cmds[i]);
			for (int s = 0; secrets[s]; s++)
				cr_assert_null(strstr(out, secrets[s]), "'sbx %s' (%s) printed a secret:\n%s", cmds[i],
					       k ? "key files" : "environment", out);
			free(out);
		}
	char rm[128];
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	cr_assert_eq(system(rm), 0);
}
