/* SPDX-License-Identifier: MIT */
/*
 * toml-test 1.0.0 conformance: walks tests/files-toml-1.0.0 of the toml-test
 * data kept in tests/conformance/toml-test (its README says where it comes
 * from); every valid file must decode to the tagged JSON beside it (compared
 * as values: integers and floats numerically, nan == nan, datetimes as
 * instants or fields), every invalid file must be rejected. The data dir is
 * $SBX_TOML_TEST_DIR (another copy of upstream's tree) or that one; since it
 * is part of the repository, a missing list is a failure, never a skip.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tasks/toml.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/fs.h"

static char *suite_dir(void)
{
	const char *env = getenv("SBX_TOML_TEST_DIR");
	if (env && *env)
		return xstrdup(env);
	const char *src = getenv("SBX_SOURCE_ROOT");
	return xasprintf("%s/tests/conformance/toml-test", src ? src : ".");
}

/* ---- datetimes, parsed independently of the library ---- */

typedef struct dt {
	bool date, time, offset;
	long y, mo, d, h, mi, s, ns, off_min;
} dt;

static bool num(const char **s, int n, long *out)
{
	*out = 0;
	for (int i = 0; i < n; i++, (*s)++) {
		if (**s < '0' || **s > '9')
			return false;
		*out = *out * 10 + (**s - '0');
	}
	return true;
}

static bool parse_dt(const char *s, dt *v)
{
	memset(v, 0, sizeof(*v));
	if (strlen(s) >= 10 && s[4] == '-') {
		if (!num(&s, 4, &v->y) || *s++ != '-' || !num(&s, 2, &v->mo) || *s++ != '-' ||
		    !num(&s, 2, &v->d))
			return false;
		v->date = true;
		if (!*s)
			return true;
		if (*s != 'T' && *s != 't' && *s != ' ')
			return false;
		s++;
	}
	if (!num(&s, 2, &v->h) || *s++ != ':' || !num(&s, 2, &v->mi) || *s++ != ':' ||
	    !num(&s, 2, &v->s))
		return false;
	v->time = true;
	if (*s == '.') {
		s++;
		long scale = 100000000;
		for (; *s >= '0' && *s <= '9'; s++, scale /= 10)
			v->ns += (*s - '0') * scale;
	}
	if (*s == 'Z' || *s == 'z') {
		v->offset = true;
		s++;
	} else if (*s == '+' || *s == '-') {
		long oh, om;
		int sign = *s++ == '-' ? -1 : 1;
		if (!num(&s, 2, &oh) || *s++ != ':' || !num(&s, 2, &om))
			return false;
		v->offset = true;
		v->off_min = sign * (oh * 60 + om);
	}
	return *s == '\0';
}

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static long days_from_civil(long y, long m, long d)
{
	y -= m <= 2;
	long era = (y >= 0 ? y : y - 399) / 400;
	long yoe = y - era * 400;
	long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool same_datetime(const char *want, const char *have)
{
	dt a, b;
	if (!parse_dt(want, &a) || !parse_dt(have, &b))
		return false;
	if (a.date != b.date || a.time != b.time || a.offset != b.offset || a.ns != b.ns)
		return false;
	long long ta = (long long)days_from_civil(a.y, a.mo, a.d) * 86400 + a.h * 3600 +
		       a.mi * 60 + a.s - a.off_min * 60;
	long long tb = (long long)days_from_civil(b.y, b.mo, b.d) * 86400 + b.h * 3600 +
		       b.mi * 60 + b.s - b.off_min * 60;
	return ta == tb;
}

/* ---- tagged JSON comparison ---- */

static bool is_tagged(json_t *o)
{
	return json_is_object(o) && json_object_size(o) == 2 &&
	       json_is_string(json_object_get(o, "type")) &&
	       json_is_string(json_object_get(o, "value"));
}

static bool same_leaf(json_t *want, json_t *have)
{
	const char *wt = json_string_value(json_object_get(want, "type"));
	const char *ht = json_string_value(json_object_get(have, "type"));
	json_t *wv = json_object_get(want, "value"), *hv = json_object_get(have, "value");
	const char *w = json_string_value(wv), *h = json_string_value(hv);
	if (strcmp(wt, ht) != 0)
		return false;
	if (strcmp(wt, "integer") == 0)
		return strtoll(w, NULL, 10) == strtoll(h, NULL, 10);
	if (strcmp(wt, "float") == 0) {
		double a = strtod(w, NULL), b = strtod(h, NULL);
		return (isnan(a) && isnan(b)) || a == b;
	}
	if (strncmp(wt, "date", 4) == 0 || strcmp(wt, "time-local") == 0)
		return same_datetime(w, h);
	return json_string_length(wv) == json_string_length(hv) &&
	       memcmp(w, h, json_string_length(wv)) == 0;
}

/* Compares values; on a difference writes the JSON path to where. */
static bool same_value(json_t *want, json_t *have, sbx_buf *where)
{
	if (is_tagged(want)) {
		if (!is_tagged(have) || !same_leaf(want, have)) {
			char *h = json_dumps(have, JSON_COMPACT | JSON_ENCODE_ANY);
			sbx__buf_printf(where, ": got %s", h ? h : "?");
			free(h);
			return false;
		}
		return true;
	}
	if (json_is_object(want)) {
		if (!json_is_object(have) || json_object_size(want) != json_object_size(have)) {
			sbx__buf_printf(where, ": table keys differ");
			return false;
		}
		const char *key;
		size_t klen;
		json_t *w;
		json_object_keylen_foreach(want, key, klen, w) {
			json_t *h = json_object_getn(have, key, klen);
			sbx__buf_printf(where, ".%s", key);
			if (!h) {
				sbx__buf_printf(where, ": missing");
				return false;
			}
			if (!same_value(w, h, where))
				return false;
			where->len -= strlen(key) + 1;
			where->data[where->len] = '\0';
		}
		return true;
	}
	if (json_is_array(want)) {
		if (!json_is_array(have) || json_array_size(want) != json_array_size(have)) {
			sbx__buf_printf(where, ": array lengths differ");
			return false;
		}
		for (size_t i = 0; i < json_array_size(want); i++) {
			size_t mark = where->len;
			sbx__buf_printf(where, "[%zu]", i);
			if (!same_value(json_array_get(want, i), json_array_get(have, i), where))
				return false;
			where->len = mark;
			where->data[mark] = '\0';
		}
		return true;
	}
	return json_equal(want, have);
}

/*
 * jansson cannot decode NUL inside object keys, so before loading, each
 * "\u0000" escape in either text becomes "\ufdd0" (a noncharacter the suite
 * does not use). Escaped backslashes are skipped so "\\u0000" stays as is.
 */
static json_t *load_json(const char *text, size_t len, json_error_t *jerr)
{
	sbx_buf b;
	sbx__buf_init(&b, len + 1);
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\\' && i + 1 < len) {
			if (len - i >= 6 && memcmp(text + i, "\\u0000", 6) == 0) {
				sbx__buf_append(&b, "\\ufdd0", 6);
				i += 5;
			} else {
				sbx__buf_append(&b, text + i, 2);
				i++;
			}
			continue;
		}
		sbx__buf_append(&b, text + i, 1);
	}
	json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, jerr);
	sbx__buf_free(&b);
	return j;
}

/* Runs one listed file; returns NULL on success or an owned failure reason. */
static char *run_one(const char *dir, const char *name, bool valid)
{
	char *path = xasprintf("%s/tests/%s", dir, name);
	char *text = NULL;
	size_t len = 0;
	sbx_error *err = NULL;
	sbx_toml *root = NULL;
	char *why = NULL;
	if (sbx__read_file(&text, &len, path, SBX_TOML_MAX_FILE, &err) < 0) {
		why = xasprintf("cannot read: %s", err->msg);
		goto out;
	}
	int r = sbx__toml_parse(&root, text, len, name, &err);
	if (!valid) {
		if (r == 0)
			why = xstrdup("accepted an invalid document");
		else if (r != -EINVAL || !err || !strstr(err->msg, name))
			why = xasprintf("rejected with code %d / message without position", r);
		goto out;
	}
	if (r < 0) {
		why = xasprintf("rejected: %s", err ? err->msg : "?");
		goto out;
	}
	char *json = NULL;
	cr_assert_eq(sbx__toml_to_tagged_json(&json, root), 0);
	json_error_t jerr;
	json_t *have = load_json(json, strlen(json), &jerr);
	free(json);
	char *want_path = xasprintf("%.*s.json", (int)(strlen(path) - 5), path);
	char *want_text = NULL;
	size_t want_len = 0;
	json_t *want = NULL;
	if (sbx__read_file(&want_text, &want_len, want_path, SBX_TOML_MAX_FILE, NULL) == 0)
		want = load_json(want_text, want_len, &jerr);
	free(want_text);
	free(want_path);
	if (!have || !want) {
		why = xasprintf("bad JSON: %s", jerr.text);
	} else {
		sbx_buf where;
		sbx__buf_init(&where, 1 << 16);
		sbx__buf_append(&where, "value mismatch at $", 19);
		if (!same_value(want, have, &where))
			why = sbx__buf_steal(&where, NULL);
		sbx__buf_free(&where);
	}
	json_decref(have);
	json_decref(want);
out:
	sbx__toml_free(root);
	sbx_error_free(err);
	free(text);
	free(path);
	return why;
}

Test(conformance_toml, toml_test_1_0_0, .timeout = 300)
{
	char *dir = suite_dir();
	char *list_path = xasprintf("%s/tests/files-toml-1.0.0", dir);
	struct stat st;
	if (stat(list_path, &st) != 0)
		cr_assert_fail("toml-test data not found at %s (run through meson test, which "
			       "sets SBX_SOURCE_ROOT, or set SBX_TOML_TEST_DIR)", list_path);
	char *list = NULL;
	size_t len = 0;
	cr_assert_eq(sbx__read_file(&list, &len, list_path, 1 << 20, NULL), 0);
	unsigned vok = 0, vall = 0, iok = 0, iall = 0;
	for (char *line = list, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		size_t n = strlen(line);
		if (n < 5 || strcmp(line + n - 5, ".toml") != 0)
			continue;
		bool valid = strncmp(line, "valid/", 6) == 0;
		if (!valid && strncmp(line, "invalid/", 8) != 0)
			continue;
		char *why = run_one(dir, line, valid);
		if (valid) {
			vall++;
			vok += !why;
		} else {
			iall++;
			iok += !why;
		}
		if (why)
			cr_log_error("%s: %s", line, why);
		cr_expect_null(why, "%s: %s", line, why ? why : "");
		free(why);
	}
	printf("toml-test 1.0.0: valid %u/%u, invalid %u/%u\n", vok, vall, iok, iall);
	fflush(stdout);
	cr_log_info("toml-test 1.0.0: valid %u/%u, invalid %u/%u", vok, vall, iok, iall);
	cr_expect_gt(vall + iall, 0, "no test files listed in %s", list_path);
	free(list);
	free(list_path);
	free(dir);
}
