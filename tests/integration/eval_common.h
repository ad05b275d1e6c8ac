/* SPDX-License-Identifier: MIT */
/* Helpers of the `sbx eval` tests (eval.c, eval_policy.c): running the CLI,
 * temp files, a fake key, and the trajectory checker. */
#ifndef SBX_TEST_EVAL_COMMON_H
#define SBX_TEST_EVAL_COMMON_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct eval_tmp {
	char path[256];
	char value[64]; /* eval_fake_key(): the key itself */
};

static inline struct eval_tmp eval_tmp_file(const char *suffix)
{
	struct eval_tmp t = { { 0 }, { 0 } };
	snprintf(t.path, sizeof(t.path), "/tmp/sbx-eval-test-XXXXXX.%s", suffix);
	int fd = mkstemps(t.path, (int)strlen(suffix) + 1);
	cr_assert_geq(fd, 0, "mkstemps");
	close(fd);
	return t;
}

/* A key file holding a fake key no output may ever contain. */
static inline struct eval_tmp eval_fake_key(void)
{
	struct eval_tmp t = eval_tmp_file("key");
	snprintf(t.value, sizeof(t.value), "sk-sbxtest-FAKE-%08x%08x", (unsigned)getpid(),
		 (unsigned)rand());
	FILE *f = fopen(t.path, "w");
	cr_assert_not_null(f);
	fprintf(f, "%s\n", t.value);
	fclose(f);
	chmod(t.path, 0600);
	return t;
}

static inline void eval_tmp_free(struct eval_tmp *t)
{
	unlink(t->path);
}

static inline char *eval_read_all(FILE *p)
{
	size_t cap = 1 << 16, len = 0, n;
	char *buf = calloc(1, cap);
	while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
		len += n;
		if (cap - 1 - len == 0) {
			buf = realloc(buf, cap * 2);
			memset(buf + cap, 0, cap);
			cap *= 2;
		}
	}
	buf[len] = 0;
	return buf;
}

static inline char *eval_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	char *s = eval_read_all(f);
	fclose(f);
	return s;
}

/* Runs `ENV sbx ARGS` from the source root with these stores; stdout and
 * stderr together in *out (owned). */
static inline int eval_cli_env(char **out, const char *env, const char *state,
			       const char *images, const char *args)
{
	const char *b = getenv("SBX_BUILD_ROOT"), *src = getenv("SBX_SOURCE_ROOT");
	cr_assert(b && src);
	char *cmd = NULL;
	cr_assert(asprintf(&cmd, "cd '%s' && %s SBX_STATE_DIR='%s' SBX_IMAGE_DIR='%s' '%s/src/cli/sbx' "
			   "%s 2>&1 </dev/null", src, env ? env : "", state, images, b, args) > 0);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	*out = eval_read_all(p);
	int st = pclose(p);
	free(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static inline int eval_cli(char **out, const char *state, const char *images, const char *args)
{
	return eval_cli_env(out, NULL, state, images, args);
}

static inline void eval_assert_no_secret(const char *text, const struct eval_tmp *key)
{
	if (key && key->value[0])
		cr_assert_null(strstr(text, key->value), "the fake key leaked into:\n%s", text);
}

/* tests/trajectories/check.py over one JSONL file: every record valid,
 * exactly `expect` of them (-1: any), none holding the key. */
static inline void eval_check_records(const char *path, int expect, const struct eval_tmp *key)
{
	const char *src = getenv("SBX_SOURCE_ROOT");
	char *cmd = NULL, ex[32] = "";
	if (expect >= 0)
		snprintf(ex, sizeof(ex), "--expect %d", expect);
	cr_assert(asprintf(&cmd, "/usr/bin/python3 '%s/tests/trajectories/check.py' %s %s%s%s '%s' 2>&1",
			   src, ex, key && key->value[0] ? "--forbid '" : "",
			   key && key->value[0] ? key->value : "", key && key->value[0] ? "'" : "",
			   path) > 0);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char *out = eval_read_all(p);
	int st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "trajectory check of %s failed:\n%s", path, out);
	free(out);
	free(cmd);
}

#endif
