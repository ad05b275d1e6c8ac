/* SPDX-License-Identifier: MIT */
/* The knob table: well formed, and every variable src/ names is in it. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/str.h"

static void check_table(const struct sbx_knob *k, size_t n)
{
	cr_assert_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		cr_assert(k[i].name && *k[i].name && k[i].component && *k[i].component && k[i].def && *k[i].def &&
				  k[i].help && *k[i].help,
			  "entry %zu (%s) has an empty field", i, k[i].name ? k[i].name : "?");
		cr_assert_neq(strcmp(sbx__knob_type_name(k[i].type), "?"), 0, "%s: no such type", k[i].name);
		cr_assert_null(strchr(k[i].help, '\n'), "%s: the help is one line", k[i].name);
		cr_assert_eq(strspn(k[i].name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"), strlen(k[i].name),
			     "%s: not a variable name", k[i].name);
		if (i == 0 || strcmp(k[i].component, k[i - 1].component) != 0) {
			/* a component is one run of entries */
			for (size_t j = 0; j < i; j++)
				cr_assert_neq(strcmp(k[j].component, k[i].component), 0,
					      "component %s is split (at %s)", k[i].component, k[i].name);
		} else {
			cr_assert_lt(strcmp(k[i - 1].name, k[i].name), 0, "%s: %s is not sorted after %s",
				     k[i].component, k[i].name, k[i - 1].name);
		}
	}
}

Test(util_config, tables_well_formed)
{
	check_table(sbx__knobs, sbx__n_knobs);
	check_table(sbx__test_knobs, sbx__n_test_knobs);
}

Test(util_config, names_unique_across_both_parts)
{
	for (size_t i = 0; i < sbx__n_knobs + sbx__n_test_knobs; i++)
		for (size_t j = i + 1; j < sbx__n_knobs + sbx__n_test_knobs; j++) {
			const struct sbx_knob *a = i < sbx__n_knobs ? &sbx__knobs[i] : &sbx__test_knobs[i - sbx__n_knobs];
			const struct sbx_knob *b = j < sbx__n_knobs ? &sbx__knobs[j] : &sbx__test_knobs[j - sbx__n_knobs];
			cr_assert_neq(strcmp(a->name, b->name), 0, "%s is listed twice", a->name);
		}
}

static void check_default(const struct sbx_knob *k)
{
	if (k->def[0] == '(')
		return; /* described, not a value */
	uint64_t u;
	double d;
	char *end;
	switch (k->type) {
	case SBX_KNOB_SIZE: cr_assert_eq(sbx__parse_size(&u, k->def), 0, "%s=%s", k->name, k->def); break;
	case SBX_KNOB_DURATION: cr_assert_eq(sbx__parse_duration(&d, k->def), 0, "%s=%s", k->name, k->def); break;
	case SBX_KNOB_INTEGER: cr_assert_eq(sbx__parse_u64(&u, k->def), 0, "%s=%s", k->name, k->def); break;
	case SBX_KNOB_SECONDS:
		d = strtod(k->def, &end);
		cr_assert(*end == '\0' && d >= 0, "%s=%s", k->name, k->def);
		break;
	case SBX_KNOB_BOOLEAN:
		cr_assert(strcmp(k->def, "0") == 0 || strcmp(k->def, "1") == 0, "%s=%s", k->name, k->def);
		break;
	case SBX_KNOB_SECRET: cr_assert_fail("%s: a secret has no default value", k->name); break;
	case SBX_KNOB_STRING:
	case SBX_KNOB_CHOICE:
	case SBX_KNOB_PATH:
	case SBX_KNOB_LIST:
	case SBX_KNOB_SECRET_FILE:
	default: break;
	}
}

Test(util_config, defaults_parse_as_their_type)
{
	for (size_t i = 0; i < sbx__n_knobs; i++)
		check_default(&sbx__knobs[i]);
	for (size_t i = 0; i < sbx__n_test_knobs; i++)
		check_default(&sbx__test_knobs[i]);
}

static char last[512];
static int n_logged;

static void sink(sbx_log_level level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	snprintf(last, sizeof(last), "%s", msg);
	n_logged++;
}

Test(util_config, env_reads_and_flags_unknown_names)
{
	cr_assert_not_null(sbx__knob_find("SBX_STATE_DIR"));
	cr_assert_null(sbx__knob_find("SBX_TEST_CYCLES"), "test-only knobs are not sbx's");
	cr_assert_null(sbx__knob_find(NULL));
	sbx__log_set_sink(sink, NULL, SBX_LOG_DEBUG);
	setenv("SBX_STATE_DIR", "/tmp/knob-test", 1);
	n_logged = 0;
	cr_assert_str_eq(sbx__env("SBX_STATE_DIR"), "/tmp/knob-test");
	cr_assert_str_eq(sbx__env_dyn("SBX_STATE_DIR"), "/tmp/knob-test");
	cr_assert_eq(n_logged, 0);
	unsetenv("SBX_STATE_DIR");
	cr_assert_null(sbx__env("SBX_STATE_DIR"));
	setenv("SBX_NO_SUCH_KNOB", "x", 1);
	cr_assert_str_eq(sbx__env("SBX_NO_SUCH_KNOB"), "x", "an unknown knob is still read");
	cr_assert_eq(n_logged, 1);
	cr_assert_not_null(strstr(last, "SBX_NO_SUCH_KNOB"));
	cr_assert_str_eq(sbx__env_dyn("SBX_NO_SUCH_KNOB"), "x");
	cr_assert_eq(n_logged, 2);
	setenv("SOME_TASK_VAR", "y", 1);
	cr_assert_str_eq(sbx__env_user("SOME_TASK_VAR"), "y");
	cr_assert_eq(n_logged, 2, "a user-named variable is not a knob");
	sbx__log_set_sink(NULL, NULL, SBX_LOG_INFO);
}

/* ---- every variable src/ names is in the table ---- */

static int n_files, n_names;
static char unknown[4096];

static bool knob_prefix(const char *s)
{
	static const char *const p[] = { "SBX_", "OPENENV_", "E2B_", "DAYTONA_", "MODAL_" };
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		if (strncmp(s, p[i], strlen(p[i])) == 0)
			return true;
	return false;
}

/* Every sbx__env("X") argument and every string literal that is exactly a
 * variable name with a knob prefix ("SBX_...", in a list of names). */
static void scan(const char *path, const char *text)
{
	for (const char *q = strchr(text, '"'); q; q = strchr(q + 1, '"')) {
		size_t n = strspn(q + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		if (n == 0 || q[1 + n] != '"')
			continue;
		bool call = q - text >= 9 && strncmp(q - 9, "sbx__env(", 9) == 0;
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)n, q + 1);
		if (call || knob_prefix(name)) {
			n_names++;
			if (!sbx__knob_find(name)) {
				size_t l = strlen(unknown);
				snprintf(unknown + l, sizeof(unknown) - l, " %s (%s)", name, path);
			}
		}
		q += n + 1;
	}
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	size_t l = strlen(path);
	if (flag != FTW_F || l < 2 || (strcmp(path + l - 2, ".c") != 0 && strcmp(path + l - 2, ".h") != 0))
		return 0;
	if (strstr(path, "/src/util/config.c"))
		return 0; /* the table itself, with the test-only part */
	char *text = NULL;
	size_t len;
	cr_assert_eq(sbx__read_file(&text, &len, path, 1 << 20, NULL), 0, "read %s", path);
	n_files++;
	scan(path, text);
	free(text);
	return 0;
}

Test(util_config, every_variable_named_in_src_is_a_knob)
{
	const char *root = getenv("SBX_SOURCE_ROOT");
	cr_assert_not_null(root, "SBX_SOURCE_ROOT (set by meson test)");
	char src[4096];
	snprintf(src, sizeof(src), "%s/src", root);
	cr_assert_eq(nftw(src, visit, 16, FTW_PHYS), 0);
	cr_assert_gt(n_files, 50);
	cr_assert_gt(n_names, 40);
	cr_assert_eq(unknown[0], '\0', "not in src/util/config.c:%s", unknown);
}
