/* SPDX-License-Identifier: MIT */
/* Backend names and the credential registry: one precedence, clear errors,
 * paths forwarded and values never. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/backend.h>

static char home[64];

static void clean_env(void)
{
	const char *vars[] = { "SBX_BACKEND", "OPENENV_SANDBOX_BACKEND", "E2B_API_KEY", "E2B_API_KEY_FILE",
			       "DAYTONA_API_KEY", "DAYTONA_API_KEY_FILE", "MODAL_TOKEN_ID",
			       "MODAL_TOKEN_SECRET", "MODAL_CONFIG_PATH", "MODAL_PROFILE", "E2B_API_URL",
			       "E2B_DOMAIN", "E2B_SANDBOX_URL", NULL };
	for (int i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	snprintf(home, sizeof(home), "/tmp/sbx-cred-XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	setenv("HOME", home, 1);
}

TestSuite(backend, .init = clean_env);

static void put(const char *rel, const char *body)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", home, rel);
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", p);
	*strrchr(dir, '/') = '\0';
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	cr_assert_eq(system(cmd), 0);
	FILE *f = fopen(p, "w");
	fputs(body, f);
	fclose(f);
}

Test(backend, resolution_order_aliases_and_errors)
{
	char *b = NULL;
	cr_assert_eq(sbx_backend_resolve(&b, NULL, NULL), 0);
	cr_assert_str_eq(b, "local", "the default spends nobody's quota");
	free(b);
	setenv("OPENENV_SANDBOX_BACKEND", "daytona", 1);
	cr_assert_eq(sbx_backend_resolve(&b, NULL, NULL), 0);
	cr_assert_str_eq(b, "daytona");
	free(b);
	setenv("SBX_BACKEND", "  AgentENV \n", 1);
	cr_assert_eq(sbx_backend_resolve(&b, NULL, NULL), 0);
	cr_assert_str_eq(b, "e2b");
	free(b);
	cr_assert_eq(sbx_backend_resolve(&b, "Modal", NULL), 0);
	cr_assert_str_eq(b, "modal");
	free(b);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_backend_resolve(&b, "docker", &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "'docker'"));
	cr_assert_not_null(strstr(err->msg, "agentenv, daytona, e2b, local, modal"), "%s", err->msg);
	sbx_error_free(err);
}

Test(backend, env_wins_then_named_file_then_default_file)
{
	sbx_credential c;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_credential_resolve(&c, "e2b", &err), -ENOKEY);
	cr_assert_not_null(strstr(err->msg, ".config/e2b/api_key"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "E2B_API_KEY_FILE"));
	cr_assert_not_null(strstr(err->msg, "mkdir -p ~/.config/e2b"), "provisioning hint: %s", err->msg);
	sbx_error_free(err);

	put(".config/e2b/api_key", "e2b_default_file_key_123\n");
	cr_assert_eq(sbx_credential_resolve(&c, "e2b", NULL), 0);
	cr_assert_eq(c.source, SBX_CRED_FILE);
	cr_assert_str_eq(c.values[0], "e2b_default_file_key_123");
	sbx_credential_clear(&c);

	put("other/key", "e2b_named_file_key_456");
	char p[256];
	snprintf(p, sizeof(p), "%s/other/key", home);
	setenv("E2B_API_KEY_FILE", p, 1);
	cr_assert_eq(sbx_credential_resolve(&c, "e2b", NULL), 0);
	cr_assert_str_eq(c.values[0], "e2b_named_file_key_456");
	cr_assert_str_eq(c.path, p);
	sbx_credential_clear(&c);

	setenv("E2B_API_KEY", "e2b_env_key_789", 1);
	cr_assert_eq(sbx_credential_resolve(&c, "e2b", NULL), 0);
	cr_assert_eq(c.source, SBX_CRED_ENV);
	cr_assert_str_eq(c.values[0], "e2b_env_key_789");
	sbx_credential_clear(&c);

	unsetenv("E2B_API_KEY");
	setenv("E2B_API_KEY_FILE", "/nonexistent/key", 1);
	err = NULL;
	cr_assert_eq(sbx_credential_resolve(&c, "e2b", &err), -ENOKEY);
	cr_assert_not_null(strstr(err->msg, "E2B_API_KEY_FILE=/nonexistent/key"), "%s", err->msg);
	sbx_error_free(err);

	put(".config/daytona/api_key", "   \n");
	err = NULL;
	cr_assert_eq(sbx_credential_resolve(&c, "daytona", &err), -ENOKEY);
	cr_assert_not_null(strstr(err->msg, "empty"), "%s", err->msg);
	sbx_error_free(err);

	cr_assert_eq(sbx_credential_resolve(&c, "local", NULL), 0);
	cr_assert_eq(c.source, SBX_CRED_NONE);
	sbx_credential_clear(&c);
}

Test(backend, modal_pair_is_all_or_nothing_and_profiles_work)
{
	setenv("MODAL_TOKEN_ID", "ak-only-half", 1);
	sbx_credential c;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_credential_resolve(&c, "modal", &err), -ENOKEY);
	cr_assert_not_null(strstr(err->msg, "MODAL_TOKEN_ID + MODAL_TOKEN_SECRET"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "part of the Modal credential pair"), "%s", err->msg);
	sbx_error_free(err);
	unsetenv("MODAL_TOKEN_ID");

	put(".modal.toml", "[default]\ntoken_id = \"ak-default\"\ntoken_secret = \"as-default-secret\"\n\n"
			   "[work]\ntoken_id = \"ak-work\"\ntoken_secret = \"as-work-secret\"\nactive = true\n");
	cr_assert_eq(sbx_credential_resolve(&c, "modal", NULL), 0);
	cr_assert_str_eq(c.values[0], "ak-work", "the active profile");
	cr_assert_eq(c.n_values, 2);
	sbx_credential_clear(&c);
	setenv("MODAL_PROFILE", "default", 1);
	cr_assert_eq(sbx_credential_resolve(&c, "modal", NULL), 0);
	cr_assert_str_eq(c.values[1], "as-default-secret");
	sbx_credential_clear(&c);
	setenv("MODAL_PROFILE", "missing", 1);
	err = NULL;
	cr_assert_eq(sbx_credential_resolve(&c, "modal", &err), -ENOKEY);
	cr_assert_not_null(strstr(err->msg, "missing"));
	sbx_error_free(err);
}

Test(backend, forwarding_sends_paths_and_addresses_never_values)
{
	put(".config/e2b/api_key", "e2b_secret_value_never_forwarded");
	setenv("E2B_API_URL", "http://127.0.0.1:3000", 1);
	char **lines = NULL, *note = NULL;
	cr_assert_eq(sbx_backend_forward_env(&lines, &note, "e2b", NULL), 0);
	int saw_file = 0, saw_url = 0;
	for (char **l = lines; *l; l++) {
		cr_assert_null(strstr(*l, "e2b_secret_value"), "secret forwarded: %s", *l);
		saw_file |= strncmp(*l, "E2B_API_KEY_FILE=", 17) == 0;
		saw_url |= strcmp(*l, "E2B_API_URL=http://127.0.0.1:3000") == 0;
		free(*l);
	}
	free(lines);
	cr_assert(saw_file && saw_url);
	cr_assert_null(strstr(note, "e2b_secret_value"));
	free(note);

	setenv("E2B_API_URL", "https://user:tok@api.example", 1);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_backend_forward_env(&lines, &note, "e2b", &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "E2B_API_URL looks like it embeds credentials"), "%s", err->msg);
	cr_assert_null(strstr(err->msg, "tok@"), "the refusal must not echo the value");
	sbx_error_free(err);
}
