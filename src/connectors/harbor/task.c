/* SPDX-License-Identifier: MIT */
/*
 * Harbor task loader (the connector's load op): reads a task directory (instruction.md, task.toml in the
 * legacy `version = "1.0"` or the current `schema_version = "1.x"` form,
 * environment/, tests/, solution/), applies Harbor's defaults, converts legacy
 * sizes, expands ${VAR:-default} in env tables, and reports every bad value
 * as "<file>: [section].field: what is wrong".
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connectors/harbor/harbor.h"
#include "tasks/toml.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
#include "util/str.h"

#define INSTRUCTION_MAX (4u << 20)

/* Loader context: the file name for messages, the task being filled. */
struct ld {
	const char *file;
	const sbx_toml *root;
	sbx_task *t;
	sbx_error **err;
};

static const char *const root_keys[] = { "version", "schema_version", "source",
	"multi_step_reward_strategy", "artifacts", "task", "metadata", "agent", "verifier",
	"solution", "environment", "steps", NULL };
static const char *const agent_keys[] = { "timeout_sec", "user", "network_mode",
	"allowed_hosts", NULL };
static const char *const verifier_keys[] = { "timeout_sec", "env", "user", "environment_mode",
	"environment", "network_mode", "allowed_hosts", NULL };
static const char *const solution_keys[] = { "env", NULL };
static const char *const env_keys[] = { "build_timeout_sec", "docker_image", "os", "cpus",
	"memory_mb", "storage_mb", "memory", "storage", "gpus", "gpu_types", "tpu", "network_mode",
	"allow_internet", "allowed_hosts", "env", "mcp_servers", "skills_dir", "healthcheck",
	"workdir", NULL };

static void warn(sbx_task *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(sbx_task *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = xvasprintf(fmt, ap);
	va_end(ap);
	sbx__strv_push(&t->warnings, m);
}

static int bad(struct ld *l, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(struct ld *l, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = xvasprintf(fmt, ap);
	va_end(ap);
	const char *dot = strchr(path, '.');
	if (!dot)
		return sbx_error_set(l->err, -EINVAL, "%s: %s: %s", l->file, path, m);
	return sbx_error_set(l->err, -EINVAL, "%s: [%.*s]%s: %s", l->file, (int)(dot - path), path,
			     dot, m);
}

static void check_keys(struct ld *l, const char *section, const char *const *known)
{
	const sbx_toml *tab = section ? sbx__toml_get(l->root, section) : l->root;
	if (!tab || sbx__toml_type(tab) != SBX_TOML_TABLE)
		return;
	for (size_t i = 0; i < sbx__toml_len(tab); i++) {
		const char *k = sbx__toml_key_at(tab, i, NULL);
		bool ok = false;
		for (size_t j = 0; known[j] && !ok; j++)
			ok = strcmp(k, known[j]) == 0;
		if (!ok) {
			if (section)
				warn(l->t, "%s: [%s].%s: unknown key, ignored", l->file, section, k);
			else
				warn(l->t, "%s: %s: unknown key, ignored", l->file, k);
		}
	}
}

/* Optional string; *out stays NULL when absent. */
static int opt_string(struct ld *l, const char *path, char **out)
{
	const char *s;
	switch (sbx__toml_get_string(l->root, path, &s)) {
	case SBX_TOML_FOUND:
		*out = xstrdup(s);
		return 0;
	case SBX_TOML_MISSING:
		return 0;
	case SBX_TOML_WRONG_TYPE:
	default:
		return sbx__toml_type_error(l->err, l->file, path, "a string",
					    sbx__toml_get(l->root, path));
	}
}

/* Optional positive number; `present` says whether it was there. */
static int opt_number(struct ld *l, const char *path, double *out, int *present)
{
	double v;
	*present = 0;
	switch (sbx__toml_get_number(l->root, path, &v)) {
	case SBX_TOML_FOUND:
		if (!isfinite(v) || v <= 0)
			return bad(l, path, "must be a positive number, got %g", v);
		*out = v;
		*present = 1;
		return 0;
	case SBX_TOML_MISSING:
		return 0;
	case SBX_TOML_WRONG_TYPE:
	default:
		return sbx__toml_type_error(l->err, l->file, path, "a number",
					    sbx__toml_get(l->root, path));
	}
}

/* Optional positive integer that fits in unsigned. */
static int opt_uint(struct ld *l, const char *path, unsigned *out, int *present, int allow_zero)
{
	int64_t v;
	*present = 0;
	switch (sbx__toml_get_int(l->root, path, &v)) {
	case SBX_TOML_FOUND:
		if (v < (allow_zero ? 0 : 1) || v > (int64_t)UINT_MAX)
			return bad(l, path, "must be a %s integer, got %lld",
				   allow_zero ? "non-negative" : "positive", (long long)v);
		*out = (unsigned)v;
		*present = 1;
		return 0;
	case SBX_TOML_MISSING:
		return 0;
	case SBX_TOML_WRONG_TYPE:
	default:
		return sbx__toml_type_error(l->err, l->file, path, "an integer",
					    sbx__toml_get(l->root, path));
	}
}

static int opt_table(struct ld *l, const char *path, const sbx_toml **out)
{
	*out = NULL;
	switch (sbx__toml_get_table(l->root, path, out)) {
	case SBX_TOML_FOUND:
	case SBX_TOML_MISSING:
		return 0;
	case SBX_TOML_WRONG_TYPE:
	default:
		return sbx__toml_type_error(l->err, l->file, path, "a table",
					    sbx__toml_get(l->root, path));
	}
}

/* A user is a string or an integer uid. */
static int opt_user(struct ld *l, const char *path, char **out)
{
	const sbx_toml *v = sbx__toml_get(l->root, path);
	if (!v)
		return 0;
	if (sbx__toml_type(v) == SBX_TOML_STRING) {
		*out = xstrdup(sbx__toml_string(v, NULL));
		return 0;
	}
	if (sbx__toml_type(v) == SBX_TOML_INTEGER && sbx__toml_int(v) >= 0) {
		*out = xasprintf("%lld", (long long)sbx__toml_int(v));
		return 0;
	}
	return sbx__toml_type_error(l->err, l->file, path, "a user name or uid", v);
}

static int string_list(struct ld *l, const char *path, char ***out)
{
	const sbx_toml *a = NULL;
	switch (sbx__toml_get_array(l->root, path, &a)) {
	case SBX_TOML_FOUND:
		break;
	case SBX_TOML_MISSING:
		return 0;
	case SBX_TOML_WRONG_TYPE:
	default:
		return sbx__toml_type_error(l->err, l->file, path, "an array of strings",
					    sbx__toml_get(l->root, path));
	}
	for (size_t i = 0; i < sbx__toml_len(a); i++) {
		const sbx_toml *it = sbx__toml_at(a, i);
		if (sbx__toml_type(it) != SBX_TOML_STRING)
			return bad(l, path, "item %zu: expected a string, got %s", i + 1,
				   sbx__toml_type_name(sbx__toml_type(it)));
		sbx__strv_push(out, sbx__toml_string(it, NULL));
	}
	if (!*out)
		*out = xcalloc(1, sizeof(char *));
	return 0;
}

int sbx__task_expand_env(char **out, const char *in, char **missing_out)
{
	size_t n = strlen(in);
	_cleanup_free_ char *res = xmalloc(1);
	size_t len = 0;
	res[0] = '\0';
	for (size_t i = 0; i < n;) {
		const char *piece = in + i;
		size_t plen = 1;
		_cleanup_free_ char *sub = NULL;
		const char *close = in[i] == '$' && in[i + 1] == '{' ? strchr(in + i + 2, '}') : NULL;
		if (close) {
			const char *name = in + i + 2;
			const char *def = NULL;
			const char *sep = memmem(name, (size_t)(close - name), ":-", 2);
			size_t nlen = sep ? (size_t)(sep - name) : (size_t)(close - name);
			if (sep)
				def = sep + 2;
			_cleanup_free_ char *var = xstrndup(name, nlen);
			const char *val = nlen ? sbx__env_user(var) : NULL;
			if (val && (!sep || *val)) {
				sub = xstrdup(val);
			} else if (def) {
				sub = xstrndup(def, (size_t)(close - def));
			} else {
				if (missing_out)
					*missing_out = steal_ptr(&var);
				return -ENOENT;
			}
			piece = sub;
			plen = strlen(sub);
			i = (size_t)(close - in) + 1;
		} else {
			i++;
		}
		res = xrealloc(res, len + plen + 1);
		memcpy(res + len, piece, plen);
		len += plen;
		res[len] = '\0';
	}
	*out = steal_ptr(&res);
	return 0;
}

static int env_table(struct ld *l, const char *path, char ***out)
{
	const sbx_toml *tab;
	int r = opt_table(l, path, &tab);
	if (r < 0 || !tab)
		return r;
	for (size_t i = 0; i < sbx__toml_len(tab); i++) {
		const sbx_toml *v;
		const char *k = sbx__toml_key_at(tab, i, &v);
		if (!*k || strchr(k, '='))
			return bad(l, path, "bad variable name '%s'", k);
		_cleanup_free_ char *raw = NULL;
		switch (sbx__toml_type(v)) {
		case SBX_TOML_STRING:
			raw = xstrdup(sbx__toml_string(v, NULL));
			break;
		case SBX_TOML_INTEGER:
			raw = xasprintf("%lld", (long long)sbx__toml_int(v));
			break;
		case SBX_TOML_FLOAT:
			raw = xasprintf("%g", sbx__toml_number(v));
			break;
		case SBX_TOML_BOOL:
			raw = xstrdup(sbx__toml_bool(v) ? "true" : "false");
			break;
		case SBX_TOML_TABLE:
		case SBX_TOML_ARRAY:
		case SBX_TOML_DATETIME:
		case SBX_TOML_DATETIME_LOCAL:
		case SBX_TOML_DATE_LOCAL:
		case SBX_TOML_TIME_LOCAL:
		default:
			return bad(l, path, "%s: expected a string, got %s", k,
				   sbx__toml_type_name(sbx__toml_type(v)));
		}
		_cleanup_free_ char *val = NULL, *missing = NULL;
		if (sbx__task_expand_env(&val, raw, &missing) < 0)
			return bad(l, path, "%s: environment variable %s is not set (write ${%s:-default} "
				   "for a default)", k, missing, missing);
		_cleanup_free_ char *kv = xasprintf("%s=%s", k, val);
		sbx__strv_setenv(out, kv);
	}
	if (!*out)
		*out = xcalloc(1, sizeof(char *));
	return 0;
}

/* memory_mb / memory = "2G" (and storage). */
static int size_field(struct ld *l, const char *mb_path, const char *str_path, unsigned *out)
{
	int present = 0;
	int r = opt_uint(l, mb_path, out, &present, 0);
	if (r < 0)
		return r;
	const sbx_toml *s = sbx__toml_get(l->root, str_path);
	if (!s)
		return 0;
	if (present) {
		warn(l->t, "%s: both %s and %s set; %s wins", l->file, mb_path, str_path, mb_path);
		return 0;
	}
	if (sbx__toml_type(s) == SBX_TOML_INTEGER && sbx__toml_int(s) > 0 &&
	    sbx__toml_int(s) <= UINT_MAX) {
		*out = (unsigned)sbx__toml_int(s);
		return 0;
	}
	if (sbx__toml_type(s) != SBX_TOML_STRING)
		return sbx__toml_type_error(l->err, l->file, str_path, "a size like \"2G\"", s);
	if (sbx__task_parse_mb(out, sbx__toml_string(s, NULL)) < 0)
		return bad(l, str_path, "bad size \"%s\" (expected a number with G, M or K, e.g. \"2G\")",
			   sbx__toml_string(s, NULL));
	return 0;
}

static int network(struct ld *l)
{
	sbx_task *t = l->t;
	int r = opt_string(l, "environment.network_mode", &t->network_mode);
	if (r < 0)
		return r;
	bool inet;
	switch (sbx__toml_get_bool(l->root, "environment.allow_internet", &inet)) {
	case SBX_TOML_FOUND:
		if (t->network_mode)
			warn(t, "%s: both network_mode and allow_internet set; network_mode wins",
			     l->file);
		else
			t->network_mode = xstrdup(inet ? "public" : "no-network");
		break;
	case SBX_TOML_MISSING:
		break;
	case SBX_TOML_WRONG_TYPE:
	default:
		return sbx__toml_type_error(l->err, l->file, "environment.allow_internet", "a boolean",
					    sbx__toml_get(l->root, "environment.allow_internet"));
	}
	if (!t->network_mode)
		t->network_mode = xstrdup("public");
	if (strcmp(t->network_mode, "public") && strcmp(t->network_mode, "no-network") &&
	    strcmp(t->network_mode, "allowlist"))
		return bad(l, "environment.network_mode",
			   "expected \"public\", \"no-network\" or \"allowlist\", got \"%s\"",
			   t->network_mode);
	r = string_list(l, "environment.allowed_hosts", &t->allowed_hosts);
	if (r < 0)
		return r;
	bool allow = strcmp(t->network_mode, "allowlist") == 0;
	if (allow && !(t->allowed_hosts && t->allowed_hosts[0]))
		return bad(l, "environment.allowed_hosts", "required when network_mode = \"allowlist\"");
	if (!allow && t->allowed_hosts && t->allowed_hosts[0])
		return bad(l, "environment.allowed_hosts",
			   "only allowed with network_mode = \"allowlist\"");
	const char *phases[] = { "agent.network_mode", "verifier.network_mode" };
	for (size_t i = 0; i < 2; i++) {
		_cleanup_free_ char *m = NULL;
		r = opt_string(l, phases[i], &m);
		if (r < 0)
			return r;
		if (m && strcmp(m, "public") && strcmp(m, "no-network") && strcmp(m, "allowlist"))
			return bad(l, phases[i],
				   "expected \"public\", \"no-network\" or \"allowlist\", got \"%s\"", m);
		if (m && strcmp(m, t->network_mode))
			warn(t, "%s: %s = \"%s\": per-phase network modes are not applied; the "
				"sandbox keeps \"%s\"", l->file, phases[i], m, t->network_mode);
	}
	return 0;
}

static int schema(struct ld *l)
{
	sbx_task *t = l->t;
	_cleanup_free_ char *legacy = NULL;
	int r = opt_string(l, "version", &legacy);
	if (r < 0)
		return r;
	r = opt_string(l, "schema_version", &t->schema_version);
	if (r < 0)
		return r;
	if (legacy && t->schema_version)
		return bad(l, "version", "give either version (legacy) or schema_version, not both");
	if (legacy) {
		t->legacy = 1;
		t->schema_version = steal_ptr(&legacy);
	}
	if (!t->schema_version)
		t->schema_version = xstrdup("1.3");
	if (!sbx__str_startswith(t->schema_version, "1.") && strcmp(t->schema_version, "1"))
		return bad(l, t->legacy ? "version" : "schema_version",
			   "unsupported schema version \"%s\" (this loader reads 1.x)",
			   t->schema_version);
	if (sbx__toml_get(l->root, "steps"))
		return bad(l, "steps", "multi-step tasks are not supported");
	const sbx_toml *task;
	r = opt_table(l, "task", &task);
	if (r < 0)
		return r;
	if (task) {
		r = opt_string(l, "task.name", &t->registry_name);
		if (r < 0)
			return r;
		if (!t->registry_name)
			return bad(l, "task.name", "required when [task] is present");
	}
	return 0;
}

static int timeouts(struct ld *l)
{
	sbx_task *t = l->t;
	int p;
	t->build_timeout_sec = 600;
	t->verifier_timeout_sec = 600;
	int r = opt_number(l, "environment.build_timeout_sec", &t->build_timeout_sec, &p);
	if (r == 0)
		r = opt_number(l, "verifier.timeout_sec", &t->verifier_timeout_sec, &p);
	if (r == 0)
		r = opt_number(l, "agent.timeout_sec", &t->agent_timeout_sec, &p);
	return r;
}

static int environment(struct ld *l)
{
	sbx_task *t = l->t;
	int p;
	int r = opt_string(l, "environment.docker_image", &t->docker_image);
	if (r == 0 && t->docker_image && !*t->docker_image)
		r = bad(l, "environment.docker_image", "must not be empty");
	if (r == 0)
		r = opt_string(l, "environment.os", &t->os);
	if (r < 0)
		return r;
	if (!t->os)
		t->os = xstrdup("linux");
	if (strcmp(t->os, "linux") && strcmp(t->os, "windows"))
		return bad(l, "environment.os", "expected \"linux\" or \"windows\", got \"%s\"", t->os);
	if (strcmp(t->os, "windows") == 0)
		warn(t, "%s: [environment].os = \"windows\": not supported by sbx providers", l->file);
	r = opt_number(l, "environment.cpus", &t->cpus, &p);
	if (r == 0)
		r = size_field(l, "environment.memory_mb", "environment.memory", &t->memory_mb);
	if (r == 0)
		r = size_field(l, "environment.storage_mb", "environment.storage", &t->storage_mb);
	if (r == 0)
		r = opt_uint(l, "environment.gpus", &t->gpus, &p, 1);
	if (r < 0)
		return r;
	if (t->gpus)
		warn(t, "%s: [environment].gpus = %u: no sbx provider offers GPUs yet", l->file, t->gpus);
	r = opt_string(l, "environment.workdir", &t->workdir);
	if (r < 0)
		return r;
	if (t->workdir && t->workdir[0] != '/')
		return bad(l, "environment.workdir", "must be an absolute path, got \"%s\"", t->workdir);
	r = network(l);
	if (r == 0)
		r = env_table(l, "environment.env", &t->env);
	if (r == 0)
		r = env_table(l, "verifier.env", &t->verifier_env);
	if (r == 0)
		r = env_table(l, "solution.env", &t->solution_env);
	if (r == 0)
		r = opt_user(l, "agent.user", &t->agent_user);
	if (r == 0)
		r = opt_user(l, "verifier.user", &t->verifier_user);
	if (r < 0)
		return r;
	const char *ignored[] = { "environment.healthcheck", "environment.mcp_servers",
				  "environment.skills_dir", "environment.tpu", "verifier.environment",
				  "verifier.environment_mode", "artifacts", NULL };
	for (size_t i = 0; ignored[i]; i++) {
		if (!sbx__toml_get(l->root, ignored[i]))
			continue;
		const char *dot = strchr(ignored[i], '.');
		if (dot)
			warn(t, "%s: [%.*s]%s: not supported yet, ignored", l->file,
			     (int)(dot - ignored[i]), ignored[i], dot);
		else
			warn(t, "%s: %s: not supported yet, ignored", l->file, ignored[i]);
	}
	return 0;
}

static bool is_file(const char *dir, const char *rel)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *dir, const char *rel)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int files(sbx_task *t, sbx_error **err)
{
	if (!is_file(t->dir, "tests/test.sh"))
		return sbx_error_set(err, -ENOENT, "%s/tests/test.sh: missing (the verifier entry point)",
				     t->dir);
	t->has_solution = is_file(t->dir, "solution/solve.sh");
	if (!t->has_solution)
		warn(t, "%s/solution/solve.sh: missing; the oracle agent cannot run this task", t->dir);
	t->has_dockerfile = is_file(t->dir, "environment/Dockerfile");
	if (!t->has_dockerfile && !t->docker_image) {
		if (is_file(t->dir, "environment/docker-compose.yaml") ||
		    is_file(t->dir, "environment/docker-compose.yml"))
			return sbx_error_set(err, -EINVAL, "%s/environment: multi-container "
					     "(docker-compose) tasks are not supported", t->dir);
		return sbx_error_set(err, -ENOENT, "%s/environment/Dockerfile: missing, and "
				     "[environment].docker_image is not set in %s", t->dir, t->toml_path);
	}
	if (!is_dir(t->dir, "environment") && !t->docker_image)
		return sbx_error_set(err, -ENOENT, "%s/environment: missing", t->dir);
	return 0;
}

int sbx__harbor_load(sbx_task *t, const char *dir, sbx_error **err)
{
	char real[PATH_MAX];
	if (!realpath(dir, real))
		return sbx_error_setsys(err, -errno, errno, "task directory %s", dir);
	struct stat st;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return sbx_error_set(err, -ENOTDIR, "%s: not a task directory", dir);
	t->dir = xstrdup(real);
	const char *base = strrchr(real, '/');
	t->name = xstrdup(base && base[1] ? base + 1 : real);
	t->toml_path = xasprintf("%s/task.toml", real);
	_cleanup_free_ char *ipath = xasprintf("%s/instruction.md", real);
	size_t ilen;
	if (access(t->toml_path, F_OK) < 0)
		return sbx_error_set(err, -ENOENT, "%s: missing", t->toml_path);
	int r = sbx__read_file(&t->instruction, &ilen, ipath, INSTRUCTION_MAX, NULL);
	if (r == -ENOENT)
		return sbx_error_set(err, -ENOENT, "%s: missing", ipath);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "read %s", ipath);
	_cleanup_(sbx__toml_freep) sbx_toml *root = NULL;
	r = sbx__toml_parse_file(&root, t->toml_path, err);
	if (r < 0)
		return r;
	struct ld l = { .file = t->toml_path, .root = root, .t = t, .err = err };
	check_keys(&l, NULL, root_keys);
	check_keys(&l, "agent", agent_keys);
	check_keys(&l, "verifier", verifier_keys);
	check_keys(&l, "solution", solution_keys);
	check_keys(&l, "environment", env_keys);
	const char *tables[] = { "agent", "verifier", "solution", "environment", "metadata", NULL };
	for (size_t i = 0; tables[i]; i++) {
		const sbx_toml *tab;
		r = opt_table(&l, tables[i], &tab);
		if (r < 0)
			return r;
	}
	r = schema(&l);
	if (r == 0)
		r = timeouts(&l);
	if (r == 0)
		r = environment(&l);
	if (r == 0)
		r = files(t, err);
	if (r == 0 && !t->env)
		t->env = xcalloc(1, sizeof(char *));
	if (r == 0 && !t->verifier_env)
		t->verifier_env = xcalloc(1, sizeof(char *));
	if (r == 0 && !t->solution_env)
		t->solution_env = xcalloc(1, sizeof(char *));
	return r;
}

int sbx__harbor_probe(const char *dir)
{
	return is_dir(dir, ".") && is_file(dir, "task.toml");
}
