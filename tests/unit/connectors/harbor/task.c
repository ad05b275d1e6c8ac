/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the Harbor task loader (src/connectors/harbor/task.c): both
 * task.toml schemas, Harbor's defaults, legacy size conversion, network
 * settings, ${VAR:-default} expansion, and errors that name file and field.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/task.h>

#include "connectors/harbor/harbor.h"
#include "util/alloc.h"

static char root[64];

static void mk(void)
{
	snprintf(root, sizeof(root), "/tmp/sbx-task-unit.XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void rm(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(harbor_task, .init = mk, .fini = rm);

static void put(const char *rel, const char *body)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs(body, f);
	fclose(f);
}

/* A complete task named "t" whose task.toml is `toml`. */
static char *task_dir(const char *toml)
{
	put("t/instruction.md", "Fix it.\n");
	put("t/tests/test.sh", "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n");
	put("t/solution/solve.sh", "#!/bin/sh\ntrue\n");
	put("t/environment/Dockerfile", "FROM busybox\n");
	if (toml)
		put("t/task.toml", toml);
	return xasprintf("%s/t", root);
}

static sbx_task *load_ok(const char *toml)
{
	char *dir = task_dir(toml);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	int r = sbx_task_load(&t, dir, &err);
	cr_assert_eq(r, 0, "load: %s", err ? err->msg : "?");
	cr_assert_null(err);
	free(dir);
	return t;
}

/* Loads expecting failure with `code`; returns the owned message. */
static char *load_err(int code)
{
	char *dir = xasprintf("%s/t", root);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	int r = sbx_task_load(&t, dir, &err);
	cr_assert_eq(r, code, "want %d got %d (%s)", code, r, err ? err->msg : "-");
	cr_assert_null(t);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, r);
	char *m = xstrdup(err->msg);
	sbx_error_free(err);
	free(dir);
	return m;
}

static char *bad_toml(const char *toml)
{
	free(task_dir(toml));
	return load_err(-EINVAL);
}

static const char *env_get(char **env, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], key, k) == 0 && env[i][k] == '=')
			return env[i] + k + 1;
	return NULL;
}

Test(harbor_task, current_schema_defaults)
{
	sbx_task *t = load_ok("schema_version = \"1.3\"\n");
	cr_assert_str_eq(t->name, "t");
	cr_assert_str_eq(t->schema_version, "1.3");
	cr_assert_eq(t->legacy, 0);
	cr_assert_str_eq(t->instruction, "Fix it.\n");
	cr_assert_null(t->docker_image);
	cr_assert_eq(t->has_dockerfile, 1);
	cr_assert_eq(t->has_solution, 1);
	cr_assert_str_eq(t->os, "linux");
	cr_assert_eq(t->cpus, 0);
	cr_assert_eq(t->memory_mb, 0);
	cr_assert_eq(t->storage_mb, 0);
	cr_assert_float_eq(t->build_timeout_sec, 600, 1e-9);
	cr_assert_float_eq(t->verifier_timeout_sec, 600, 1e-9);
	cr_assert_eq(t->agent_timeout_sec, 0, "no agent limit by default");
	cr_assert_str_eq(t->network_mode, "public");
	cr_assert_null(t->allowed_hosts);
	cr_assert_null(t->workdir);
	cr_assert_null(t->agent_user);
	cr_assert_null(t->verifier_user);
	cr_assert_not_null(t->env);
	cr_assert_null(t->env[0]);
	cr_assert_null(t->verifier_env[0]);
	cr_assert_null(t->solution_env[0]);
	cr_assert_null(t->warnings);
	cr_assert_eq(t->dir[0], '/');
	sbx_task_free(t);
}

Test(harbor_task, empty_file_means_defaults)
{
	sbx_task *t = load_ok("");
	cr_assert_str_eq(t->schema_version, "1.3");
	sbx_task_free(t);
}

Test(harbor_task, legacy_schema_tb2)
{
	sbx_task *t = load_ok(
		"version = \"1.0\"\n\n[metadata]\nauthor_name = \"x\"\ndifficulty = \"hard\"\n"
		"tags = [\"git\"]\n\n[verifier]\ntimeout_sec = 900.0\n\n[agent]\ntimeout_sec = 1800.0\n\n"
		"[environment]\nbuild_timeout_sec = 600.0\n"
		"docker_image = \"docker.io/alexgshaw/fix-git:20251031\"\ncpus = 1\n"
		"memory = \"2G\"\nstorage = \"10G\"\n");
	cr_assert_str_eq(t->schema_version, "1.0");
	cr_assert_eq(t->legacy, 1);
	cr_assert_str_eq(t->docker_image, "docker.io/alexgshaw/fix-git:20251031");
	cr_assert_float_eq(t->cpus, 1, 1e-9);
	cr_assert_eq(t->memory_mb, 2048);
	cr_assert_eq(t->storage_mb, 10240);
	cr_assert_float_eq(t->verifier_timeout_sec, 900, 1e-9);
	cr_assert_float_eq(t->agent_timeout_sec, 1800, 1e-9);
	cr_assert_null(t->warnings, "%s", t->warnings ? t->warnings[0] : "");
	sbx_task_free(t);
}

Test(harbor_task, legacy_file_with_mb_fields)
{
	sbx_task *t = load_ok("version = \"1.0\"\n[environment]\nmemory_mb = 8192\nstorage_mb = 10240\n");
	cr_assert_eq(t->memory_mb, 8192);
	cr_assert_eq(t->storage_mb, 10240);
	sbx_task_free(t);
}

Test(harbor_task, tb21_schema_allow_internet)
{
	sbx_task *t = load_ok("schema_version = \"1.1\"\n[environment]\nmemory_mb = 4096\n"
			      "storage_mb = 10240\nallow_internet = true\n");
	cr_assert_str_eq(t->network_mode, "public");
	sbx_task_free(t);
	t = load_ok("schema_version = \"1.1\"\n[environment]\nallow_internet = false\n");
	cr_assert_str_eq(t->network_mode, "no-network");
	sbx_task_free(t);
}

Test(harbor_task, full_current_schema)
{
	setenv("SBX_UNIT_TOKEN", "secret-value", 1);
	unsetenv("SBX_UNIT_UNSET");
	sbx_task *t = load_ok(
		"schema_version = \"1.3\"\nsource = \"x\"\n\n[task]\nname = \"org/t\"\n"
		"description = \"d\"\n\n[agent]\ntimeout_sec = 120\nuser = \"agent\"\n\n"
		"[verifier]\ntimeout_sec = 30.5\nuser = 0\n"
		"env = { A = \"1\", TOKEN = \"${SBX_UNIT_TOKEN}\", D = \"${SBX_UNIT_UNSET:-dflt}\" }\n\n"
		"[solution]\nenv = { S = \"pre-${SBX_UNIT_TOKEN}-post\", N = 5 }\n\n"
		"[environment]\ndocker_image = \"busybox\"\ncpus = 2\nmemory_mb = 1024\n"
		"storage_mb = 2048\nnetwork_mode = \"allowlist\"\n"
		"allowed_hosts = [\"pypi.org\", \"*.github.com\"]\nworkdir = \"/app\"\n"
		"env = { E = \"e\" }\n");
	unsetenv("SBX_UNIT_TOKEN");
	cr_assert_str_eq(t->registry_name, "org/t");
	cr_assert_float_eq(t->agent_timeout_sec, 120, 1e-9);
	cr_assert_float_eq(t->verifier_timeout_sec, 30.5, 1e-9);
	cr_assert_str_eq(t->agent_user, "agent");
	cr_assert_str_eq(t->verifier_user, "0");
	cr_assert_str_eq(env_get(t->verifier_env, "A"), "1");
	cr_assert_str_eq(env_get(t->verifier_env, "TOKEN"), "secret-value");
	cr_assert_str_eq(env_get(t->verifier_env, "D"), "dflt");
	cr_assert_str_eq(env_get(t->solution_env, "S"), "pre-secret-value-post");
	cr_assert_str_eq(env_get(t->solution_env, "N"), "5");
	cr_assert_str_eq(env_get(t->env, "E"), "e");
	cr_assert_str_eq(t->docker_image, "busybox");
	cr_assert_float_eq(t->cpus, 2, 1e-9);
	cr_assert_eq(t->memory_mb, 1024);
	cr_assert_eq(t->storage_mb, 2048);
	cr_assert_str_eq(t->network_mode, "allowlist");
	cr_assert_str_eq(t->allowed_hosts[0], "pypi.org");
	cr_assert_str_eq(t->allowed_hosts[1], "*.github.com");
	cr_assert_null(t->allowed_hosts[2]);
	cr_assert_str_eq(t->workdir, "/app");
	sbx_task_free(t);
}

Test(harbor_task, docker_image_makes_dockerfile_optional)
{
	free(task_dir("[environment]\ndocker_image = \"busybox\"\n"));
	char p[256];
	snprintf(p, sizeof(p), "%s/t/environment/Dockerfile", root);
	cr_assert_eq(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/t/environment", root);
	cr_assert_eq(rmdir(p), 0);
	char *dir = xasprintf("%s/t", root);
	sbx_task *t = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, NULL), 0);
	cr_assert_eq(t->has_dockerfile, 0);
	sbx_task_free(t);
	free(dir);
}

Test(harbor_task, unknown_keys_and_unsupported_features_warn)
{
	sbx_task *t = load_ok("schema_version = \"1.3\"\nbogus = 1\n[agent]\ntimeut_sec = 5\n"
			      "[environment]\nhealthcheck = { command = \"true\" }\n");
	cr_assert_not_null(t->warnings);
	size_t n = 0;
	int bogus = 0, typo = 0, hc = 0;
	for (; t->warnings[n]; n++) {
		bogus |= strstr(t->warnings[n], "bogus: unknown key") != NULL;
		typo |= strstr(t->warnings[n], "[agent].timeut_sec: unknown key") != NULL;
		hc |= strstr(t->warnings[n], "[environment].healthcheck: not supported") != NULL;
	}
	cr_assert(bogus && typo && hc, "warnings: %s", t->warnings[0]);
	sbx_task_free(t);
}

Test(harbor_task, missing_solution_is_a_warning)
{
	free(task_dir(""));
	char p[256];
	snprintf(p, sizeof(p), "%s/t/solution/solve.sh", root);
	cr_assert_eq(unlink(p), 0);
	char *dir = xasprintf("%s/t", root);
	sbx_task *t = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, NULL), 0);
	cr_assert_eq(t->has_solution, 0);
	cr_assert_not_null(strstr(t->warnings[0], "solution/solve.sh"));
	sbx_task_free(t);
	free(dir);
}

Test(harbor_task, missing_files_are_named)
{
	char *dir = task_dir(NULL);
	char *m = load_err(-ENOENT);
	cr_assert_not_null(strstr(m, "/t/task.toml: missing"), "%s", m);
	free(m);
	put("t/task.toml", "");
	char p[256];
	snprintf(p, sizeof(p), "%s/instruction.md", dir);
	unlink(p);
	m = load_err(-ENOENT);
	cr_assert_not_null(strstr(m, "instruction.md: missing"), "%s", m);
	free(m);
	put("t/instruction.md", "x");
	snprintf(p, sizeof(p), "%s/tests/test.sh", dir);
	unlink(p);
	m = load_err(-ENOENT);
	cr_assert_not_null(strstr(m, "tests/test.sh: missing"), "%s", m);
	free(m);
	put("t/tests/test.sh", "x");
	snprintf(p, sizeof(p), "%s/environment/Dockerfile", dir);
	unlink(p);
	m = load_err(-ENOENT);
	cr_assert_not_null(strstr(m, "environment/Dockerfile: missing, and "
				  "[environment].docker_image is not set"), "%s", m);
	free(m);
	free(dir);
	sbx_task *t = (sbx_task *)1;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_load(&t, "/nonexistent/task", &err), -ENOENT);
	cr_assert_null(t);
	cr_assert_not_null(strstr(err->msg, "/nonexistent/task"));
	sbx_error_free(err);
}

Test(harbor_task, syntax_error_names_file_line_column)
{
	char *m = bad_toml("schema_version = \"1.3\"\n\n[agent]\ntimeout_sec = 60\n\n[environment\n");
	cr_assert_not_null(strstr(m, "/t/task.toml:6:"), "%s", m);
	free(m);
}

Test(harbor_task, bad_values_name_file_and_field)
{
	struct { const char *toml; const char *want; } cases[] = {
		{ "[agent]\ntimeout_sec = \"soon\"\n", "[agent].timeout_sec: expected a number, got string" },
		{ "[agent]\ntimeout_sec = -5\n", "[agent].timeout_sec: must be a positive number" },
		{ "[verifier]\ntimeout_sec = 0\n", "[verifier].timeout_sec: must be a positive number" },
		{ "[environment]\nmemory = \"2 bananas\"\n", "[environment].memory: bad size \"2 bananas\"" },
		{ "[environment]\nstorage = \"10\"\n", "[environment].storage: bad size" },
		{ "[environment]\nmemory_mb = \"2G\"\n", "[environment].memory_mb: expected an integer" },
		{ "[environment]\nmemory_mb = 0\n", "[environment].memory_mb: must be a positive integer" },
		{ "[environment]\ncpus = 0\n", "[environment].cpus: must be a positive number" },
		{ "[environment]\nnetwork_mode = \"internet\"\n", "[environment].network_mode: expected \"public\"" },
		{ "[environment]\nnetwork_mode = \"allowlist\"\n", "[environment].allowed_hosts: required" },
		{ "[environment]\nallowed_hosts = [\"a\"]\n", "[environment].allowed_hosts: only allowed" },
		{ "[environment]\nallow_internet = \"yes\"\n", "[environment].allow_internet: expected a boolean" },
		{ "[environment]\nos = \"macos\"\n", "[environment].os: expected \"linux\" or \"windows\"" },
		{ "[environment]\nworkdir = \"app\"\n", "[environment].workdir: must be an absolute path" },
		{ "[environment]\ndocker_image = 7\n", "[environment].docker_image: expected a string" },
		{ "[verifier]\nenv = { X = \"${SBX_UNIT_SURELY_UNSET}\" }\n",
		  "[verifier].env: X: environment variable SBX_UNIT_SURELY_UNSET is not set" },
		{ "[verifier]\nenv = { X = [1] }\n", "[verifier].env: X: expected a string, got array" },
		{ "[verifier]\nenv = 3\n", "[verifier].env: expected a table" },
		{ "schema_version = \"2.0\"\n", "schema_version: unsupported schema version \"2.0\"" },
		{ "version = \"1.0\"\nschema_version = \"1.3\"\n", "version: give either" },
		{ "[task]\ndescription = \"x\"\n", "[task].name: required" },
		{ "[[steps]]\nname = \"a\"\n", "steps: multi-step tasks are not supported" },
		{ "agent = 5\n", "task.toml: agent: expected a table" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *m = bad_toml(cases[i].toml);
		cr_assert_not_null(strstr(m, "/t/task.toml: "), "case %zu: no file in '%s'", i, m);
		cr_assert_not_null(strstr(m, cases[i].want), "case %zu: '%s' lacks '%s'", i, m,
				   cases[i].want);
		free(m);
	}
}

Test(harbor_task, parse_mb)
{
	unsigned mb;
	cr_assert_eq(sbx__task_parse_mb(&mb, "2G"), 0);
	cr_assert_eq(mb, 2048);
	cr_assert_eq(sbx__task_parse_mb(&mb, "10g"), 0);
	cr_assert_eq(mb, 10240);
	cr_assert_eq(sbx__task_parse_mb(&mb, "512M"), 0);
	cr_assert_eq(mb, 512);
	cr_assert_eq(sbx__task_parse_mb(&mb, "1.5GB"), 0);
	cr_assert_eq(mb, 1536);
	cr_assert_eq(sbx__task_parse_mb(&mb, "2048K"), 0);
	cr_assert_eq(mb, 2);
	cr_assert_eq(sbx__task_parse_mb(&mb, "1K"), 0);
	cr_assert_eq(mb, 1, "rounded up");
	cr_assert_eq(sbx__task_parse_mb(&mb, "4Gi"), 0);
	cr_assert_eq(mb, 4096);
	const char *bad[] = { "", "G", "2", "2T", "-1G", "0G", "2GG", "nanG", "1e30G" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(sbx__task_parse_mb(&mb, bad[i]), -EINVAL, "%s", bad[i]);
}

Test(harbor_task, expand_env)
{
	setenv("SBX_UNIT_A", "aa", 1);
	setenv("SBX_UNIT_EMPTY", "", 1);
	unsetenv("SBX_UNIT_NONE");
	struct { const char *in, *out; } ok[] = {
		{ "plain", "plain" },
		{ "${SBX_UNIT_A}", "aa" },
		{ "x${SBX_UNIT_A}y${SBX_UNIT_A}", "xaayaa" },
		{ "${SBX_UNIT_NONE:-def}", "def" },
		{ "${SBX_UNIT_NONE:-}", "" },
		{ "${SBX_UNIT_EMPTY:-def}", "def" },
		{ "${SBX_UNIT_EMPTY}", "" },
		{ "${SBX_UNIT_A:-def}", "aa" },
		{ "$SBX_UNIT_A", "$SBX_UNIT_A" },
		{ "cost $5 ${", "cost $5 ${" },
		{ "", "" },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char *out = NULL;
		cr_assert_eq(sbx__task_expand_env(&out, ok[i].in, NULL), 0, "%s", ok[i].in);
		cr_assert_str_eq(out, ok[i].out, "%s", ok[i].in);
		free(out);
	}
	char *out = NULL, *missing = NULL;
	cr_assert_eq(sbx__task_expand_env(&out, "a${SBX_UNIT_NONE}b", &missing), -ENOENT);
	cr_assert_null(out);
	cr_assert_str_eq(missing, "SBX_UNIT_NONE");
	free(missing);
}

Test(harbor_task, list_sorted)
{
	put("b/task.toml", "");
	put("a/task.toml", "");
	put("c/readme", "");
	put(".hidden/task.toml", "");
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_task_list(&names, &n, root, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(names[0], "a");
	cr_assert_str_eq(names[1], "b");
	cr_assert_null(names[2]);
	sbx_task_names_free(names);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_list(&names, &n, "/nonexistent-tasks", &err), -ENOENT);
	sbx_error_free(err);
}

Test(harbor_task, fixture_tasks_load)
{
	const char *src = getenv("SBX_SOURCE_ROOT");
	cr_assert_not_null(src);
	char *dir = xasprintf("%s/tests/fixtures/tasks", src);
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_task_list(&names, &n, dir, NULL), 0);
	cr_assert_geq(n, 10);
	for (size_t i = 0; i < n; i++) {
		char *td = xasprintf("%s/%s", dir, names[i]);
		sbx_task *t = NULL;
		sbx_error *err = NULL;
		int r = sbx_task_load(&t, td, &err);
		bool broken = !strcmp(names[i], "malformed") || !strcmp(names[i], "bad-value");
		if (broken)
			cr_assert_eq(r, -EINVAL, "%s", names[i]);
		else
			cr_assert_eq(r, 0, "%s: %s", names[i], err ? err->msg : "?");
		sbx_error_free(err);
		sbx_task_free(t);
		free(td);
	}
	sbx_task_names_free(names);
	free(dir);
}
