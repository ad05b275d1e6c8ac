/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the TOML parser (src/tasks/toml*.c): values, table rules,
 * error messages with line:column, lookups and type errors, a Harbor
 * task.toml, limits, and truncated or mutated input (no crash, no leak).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tasks/toml.h"
#include "util/alloc.h"
#include "util/buf.h"

static sbx_toml *parse_ok(const char *text)
{
	sbx_toml *root = NULL;
	sbx_error *err = NULL;
	int r = sbx__toml_parse(&root, text, strlen(text), "t.toml", &err);
	cr_assert_eq(r, 0, "parse failed: %s", err ? err->msg : "?");
	cr_assert_null(err);
	return root;
}

/* Parses text expecting failure; returns the owned message. */
static char *parse_err(const char *text, size_t len, const char *file)
{
	sbx_toml *root = NULL;
	sbx_error *err = NULL;
	int r = sbx__toml_parse(&root, text, len, file, &err);
	cr_assert_eq(r, -EINVAL, "expected -EINVAL for %s", text);
	cr_assert_null(root);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, -EINVAL);
	char *msg = xstrdup(err->msg);
	sbx_error_free(err);
	return msg;
}

static void expect_err(const char *text, const char *want)
{
	char *msg = parse_err(text, strlen(text), "task.toml");
	cr_expect_str_eq(msg, want, "for %s", text);
	free(msg);
}

Test(tasks_toml, scalar_values)
{
	sbx_toml *t = parse_ok("s = \"a\\tb\\u00e9\\U0001F600\"\n"
			       "lit = 'C:\\path'\n"
			       "hex = 0xdead_BEEF\noct = 0o755\nbin = 0b1010\n"
			       "dec = 1_000\nmin = -9223372036854775808\nmax = 9223372036854775807\n"
			       "f = 6.02e+23\ng = -0.5\nh = 1e-3\npinf = +inf\nninf = -inf\nn = nan\n"
			       "yes = true\nno = false\n");
	const char *s;
	int64_t i;
	double d;
	bool b;
	cr_assert_eq(sbx__toml_get_string(t, "s", &s), SBX_TOML_FOUND);
	cr_expect_str_eq(s, "a\tb\xc3\xa9\xf0\x9f\x98\x80");
	cr_assert_eq(sbx__toml_get_string(t, "lit", &s), SBX_TOML_FOUND);
	cr_expect_str_eq(s, "C:\\path");
	sbx__toml_get_int(t, "hex", &i);
	cr_expect_eq(i, 0xdeadbeef);
	sbx__toml_get_int(t, "oct", &i);
	cr_expect_eq(i, 0755);
	sbx__toml_get_int(t, "bin", &i);
	cr_expect_eq(i, 10);
	sbx__toml_get_int(t, "dec", &i);
	cr_expect_eq(i, 1000);
	sbx__toml_get_int(t, "min", &i);
	cr_expect_eq(i, INT64_MIN);
	sbx__toml_get_int(t, "max", &i);
	cr_expect_eq(i, INT64_MAX);
	sbx__toml_get_number(t, "f", &d);
	cr_expect_float_eq(d, 6.02e23, 1e9);
	sbx__toml_get_number(t, "g", &d);
	cr_expect_eq(d, -0.5);
	sbx__toml_get_number(t, "h", &d);
	cr_expect_eq(d, 1e-3);
	sbx__toml_get_number(t, "pinf", &d);
	cr_expect(isinf(d) && d > 0);
	sbx__toml_get_number(t, "ninf", &d);
	cr_expect(isinf(d) && d < 0);
	sbx__toml_get_number(t, "n", &d);
	cr_expect(isnan(d));
	cr_assert_eq(sbx__toml_get_bool(t, "yes", &b), SBX_TOML_FOUND);
	cr_expect(b);
	cr_assert_eq(sbx__toml_get_bool(t, "no", &b), SBX_TOML_FOUND);
	cr_expect(!b);
	sbx__toml_free(t);
}

Test(tasks_toml, multiline_strings)
{
	sbx_toml *t = parse_ok("a = \"\"\"\nline1\r\nline2 \\\n    joined\"\"\"\n"
			       "b = '''\n raw \\n ''''\n"
			       "c = \"\"\"x\"\"\"\"\"\n"
			       "d = \"nul\\u0000byte\"\n");
	const char *s;
	sbx__toml_get_string(t, "a", &s);
	cr_expect_str_eq(s, "line1\nline2 joined");
	sbx__toml_get_string(t, "b", &s);
	cr_expect_str_eq(s, " raw \\n '");
	sbx__toml_get_string(t, "c", &s);
	cr_expect_str_eq(s, "x\"\"");
	size_t len;
	s = sbx__toml_string(sbx__toml_get(t, "d"), &len);
	cr_expect_eq(len, 8);
	cr_expect_eq(memcmp(s, "nul\0byte", 8), 0);
	sbx__toml_free(t);
}

Test(tasks_toml, datetimes)
{
	sbx_toml *t = parse_ok("odt = 1979-05-27 07:32:00.999999999999-07:30\n"
			       "ldt = 2000-02-29t23:59:60\n"
			       "ld = 2024-12-31\nlt = 00:00:00.5\nz = 1979-05-27T07:32:00z\n");
	const char *text;
	const sbx_toml_datetime *dt = sbx__toml_datetime(sbx__toml_get(t, "odt"), &text);
	cr_assert_not_null(dt);
	cr_expect_eq(sbx__toml_type(sbx__toml_get(t, "odt")), SBX_TOML_DATETIME);
	cr_expect_str_eq(text, "1979-05-27T07:32:00.999999999-07:30");
	cr_expect_eq(dt->nanosecond, 999999999);
	cr_expect_eq(dt->offset_min, -450);
	dt = sbx__toml_datetime(sbx__toml_get(t, "ldt"), &text);
	cr_expect_eq(sbx__toml_type(sbx__toml_get(t, "ldt")), SBX_TOML_DATETIME_LOCAL);
	cr_expect_str_eq(text, "2000-02-29T23:59:60");
	cr_expect_eq(dt->second, 60);
	sbx__toml_datetime(sbx__toml_get(t, "ld"), &text);
	cr_expect_eq(sbx__toml_type(sbx__toml_get(t, "ld")), SBX_TOML_DATE_LOCAL);
	cr_expect_str_eq(text, "2024-12-31");
	dt = sbx__toml_datetime(sbx__toml_get(t, "lt"), &text);
	cr_expect_eq(sbx__toml_type(sbx__toml_get(t, "lt")), SBX_TOML_TIME_LOCAL);
	cr_expect_str_eq(text, "00:00:00.5");
	cr_expect_eq(dt->nanosecond, 500000000);
	sbx__toml_datetime(sbx__toml_get(t, "z"), &text);
	cr_expect_str_eq(text, "1979-05-27T07:32:00Z");
	cr_expect_null(sbx__toml_datetime(sbx__toml_get(t, "missing"), NULL));
	sbx__toml_free(t);
}

Test(tasks_toml, tables_keep_insertion_order)
{
	sbx_toml *t = parse_ok("z = 1\na = 2\n[m]\nq = 1\n[b]\n\"quoted key\" = 3\n"
			       "dotted.x.y = 4\n");
	const char *want[] = {"z", "a", "m", "b"};
	cr_assert_eq(sbx__toml_len(t), 4);
	for (size_t i = 0; i < 4; i++)
		cr_expect_str_eq(sbx__toml_key_at(t, i, NULL), want[i]);
	cr_expect_null(sbx__toml_key_at(t, 4, NULL));
	const sbx_toml *b = sbx__toml_get(t, "b");
	cr_expect_not_null(sbx__toml_table_get(b, "quoted key", 10));
	int64_t i;
	cr_expect_eq(sbx__toml_get_int(t, "b.dotted.x.y", &i), SBX_TOML_FOUND);
	cr_expect_eq(i, 4);
	sbx__toml_free(t);
}

Test(tasks_toml, arrays_and_inline_tables)
{
	sbx_toml *t = parse_ok("a = [1, 'two', 3.0, [4], {five = 5},]\n"
			       "multi = [\n  1, # one\n  2\n]\n"
			       "point = { x = 1, y.z = 2 }\n"
			       "[[fruit]]\nname = 'apple'\n[[fruit.variety]]\nname = 'red'\n"
			       "[[fruit]]\nname = 'banana'\n");
	const sbx_toml *a;
	cr_assert_eq(sbx__toml_get_array(t, "a", &a), SBX_TOML_FOUND);
	cr_assert_eq(sbx__toml_len(a), 5);
	cr_expect_eq(sbx__toml_type(sbx__toml_at(a, 1)), SBX_TOML_STRING);
	cr_expect_eq(sbx__toml_type(sbx__toml_at(a, 3)), SBX_TOML_ARRAY);
	cr_expect_eq(sbx__toml_int(sbx__toml_get(sbx__toml_at(a, 4), "five")), 5);
	cr_expect_null(sbx__toml_at(a, 5));
	cr_assert_eq(sbx__toml_get_array(t, "multi", &a), SBX_TOML_FOUND);
	cr_expect_eq(sbx__toml_len(a), 2);
	int64_t i;
	cr_expect_eq(sbx__toml_get_int(t, "point.y.z", &i), SBX_TOML_FOUND);
	cr_expect_eq(i, 2);
	cr_assert_eq(sbx__toml_get_array(t, "fruit", &a), SBX_TOML_FOUND);
	cr_assert_eq(sbx__toml_len(a), 2);
	const char *s;
	cr_expect_eq(sbx__toml_get_string(sbx__toml_at(a, 0), "variety", &s),
		     SBX_TOML_WRONG_TYPE);
	const sbx_toml *v;
	cr_assert_eq(sbx__toml_get_array(sbx__toml_at(a, 0), "variety", &v), SBX_TOML_FOUND);
	cr_expect_str_eq(sbx__toml_string(sbx__toml_get(sbx__toml_at(v, 0), "name"), NULL),
			 "red");
	cr_expect_str_eq(sbx__toml_string(sbx__toml_get(sbx__toml_at(a, 1), "name"), NULL),
			 "banana");
	sbx__toml_free(t);
}

Test(tasks_toml, errors_name_file_line_and_column)
{
	expect_err("# header\n\n[agent]\nuser = 'x'\n\n\ntimeout_sec: 600\n",
		   "task.toml:7:12: expected '=' after key");
	expect_err("a = 1\na = 2\n", "task.toml:2:1: duplicate key 'a'");
	expect_err("[a]\nb = 1\n[a]\n", "task.toml:3:1: table 'a' defined more than once");
	expect_err("a = \"open\n", "task.toml:1:5: unterminated string");
	expect_err("a = {x = 1,}\n",
		   "task.toml:1:11: trailing comma not allowed in inline table");
	expect_err("a = 1 b = 2\n", "task.toml:1:7: expected a newline after value");
	expect_err("a = 01\n", "task.toml:1:5: leading zeros are not allowed in '01'");
	expect_err("a = 9223372036854775808\n",
		   "task.toml:1:5: integer '9223372036854775808' out of range");
	expect_err("é = 1\n", "task.toml:1:1: expected a key, got '?'");
	expect_err("a = \"\\x41\"\n", "task.toml:1:6: invalid escape sequence in string");
	expect_err("a = \"\\uD800\"\n",
		   "task.toml:1:6: escape \\u is not a Unicode scalar value");
	expect_err("a = 2023-02-29\n", "task.toml:1:5: date out of range");
	expect_err("a = 1\n[b]\nc = {d = 1}\nc.e = 2\n",
		   "task.toml:4:1: cannot add keys to inline table 'c'");
	expect_err("[x.y]\n[x]\ny.z = 1\n",
		   "task.toml:3:1: cannot add keys to table 'y' defined by a header "
		   "using dotted keys");
	expect_err("a = [1 2]\n", "task.toml:1:8: expected ',' or ']' in array");
	expect_err("a = 1\r\rb = 2\n", "task.toml:1:6: expected a newline after value");
	expect_err("a = 'x' # bell\x07\n", "task.toml:1:15: control character U+0007 in comment");
	expect_err("[[t]]\n[t]\n", "task.toml:2:1: table 't' is already an array of tables");
	expect_err("t = []\n[[t]]\n",
		   "task.toml:2:3: key 't' is an array, not a table");
	expect_err("a.b = 1\na.b.c = 2\n", "task.toml:2:3: key 'a.b' is an integer, not a table");
}

Test(tasks_toml, errors_for_encoding)
{
	char *msg = parse_err("a = 'ok'\nb = '\xc0\xaf'\n", 16, NULL);
	cr_expect_str_eq(msg, "<input>:2:6: overlong UTF-8 sequence");
	free(msg);
	msg = parse_err("a = \"\xed\xa0\x80\"\n", 10, "f");
	cr_expect_str_eq(msg, "f:1:6: UTF-8 sequence encodes an invalid code point");
	free(msg);
	/* NUL bytes in the text are control characters, not terminators. */
	msg = parse_err("a = 'x\0y'\n", 10, "f");
	cr_expect_str_eq(msg, "f:1:7: control character U+0000 in string");
	free(msg);
}

Test(tasks_toml, length_bounds_the_input)
{
	/* Only the first len bytes count; no terminator needed. */
	sbx_toml *t = NULL;
	const char text[] = {'a', ' ', '=', ' ', '1', '2', 'x'};
	cr_assert_eq(sbx__toml_parse(&t, text, 6, NULL, NULL), 0);
	cr_expect_eq(sbx__toml_int(sbx__toml_get(t, "a")), 12);
	sbx__toml_free(t);
	cr_assert_eq(sbx__toml_parse(&t, NULL, 0, NULL, NULL), 0);
	cr_expect_eq(sbx__toml_len(t), 0);
	sbx__toml_free(t);
	cr_assert_eq(sbx__toml_parse(&t, "\xEF\xBB\xBFk = 1\r\n", 10, NULL, NULL), 0);
	cr_expect_eq(sbx__toml_int(sbx__toml_get(t, "k")), 1);
	sbx__toml_free(t);
	/* err may be NULL on failure too. */
	t = NULL;
	cr_expect_eq(sbx__toml_parse(&t, "=", 1, NULL, NULL), -EINVAL);
	cr_expect_null(t);
}

Test(tasks_toml, type_names)
{
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_TABLE), "table");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_ARRAY), "array");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_STRING), "string");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_INTEGER), "integer");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_FLOAT), "float");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_BOOL), "boolean");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_DATETIME), "datetime");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_DATETIME_LOCAL), "local datetime");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_DATE_LOCAL), "local date");
	cr_expect_str_eq(sbx__toml_type_name(SBX_TOML_TIME_LOCAL), "local time");
	cr_expect_str_eq(sbx__toml_type_name((sbx_toml_type)99), "unknown");
}

Test(tasks_toml, lookups_report_missing_and_wrong_type)
{
	sbx_toml *t = parse_ok("[agent]\ntimeout_sec = \"600\"\nretries = 3\nname = 'x'\n");
	double d = -1;
	int64_t i;
	bool b;
	const sbx_toml *v;
	cr_expect_eq(sbx__toml_get_number(t, "agent.timeout_sec", &d), SBX_TOML_WRONG_TYPE);
	cr_expect_eq(d, -1);
	cr_expect_eq(sbx__toml_get_number(t, "agent.retries", &d), SBX_TOML_FOUND);
	cr_expect_eq(d, 3.0);
	cr_expect_eq(sbx__toml_get_int(t, "agent.missing", &i), SBX_TOML_MISSING);
	cr_expect_eq(sbx__toml_get_bool(t, "agent.name", &b), SBX_TOML_WRONG_TYPE);
	cr_expect_eq(sbx__toml_get_table(t, "agent.name.deeper", &v), SBX_TOML_MISSING);
	cr_expect_eq(sbx__toml_get_table(t, "agent", &v), SBX_TOML_FOUND);
	cr_expect_eq(sbx__toml_get_array(t, "agent", &v), SBX_TOML_WRONG_TYPE);
	cr_expect_null(sbx__toml_get(t, NULL));
	cr_expect_null(sbx__toml_get(NULL, "agent"));

	sbx_error *err = NULL;
	int r = sbx__toml_type_error(&err, "task.toml", "agent.timeout_sec", "a number",
				     sbx__toml_get(t, "agent.timeout_sec"));
	cr_expect_eq(r, -EINVAL);
	cr_expect_str_eq(err->msg, "task.toml: [agent].timeout_sec: expected a number, got string");
	sbx_error_free(err);
	err = NULL;
	sbx__toml_type_error(&err, "task.toml", "version", "a string", NULL);
	cr_expect_str_eq(err->msg, "task.toml: version: expected a string, got nothing");
	sbx_error_free(err);

	/* NULL-safe accessors. */
	cr_expect_eq(sbx__toml_len(NULL), 0);
	cr_expect_null(sbx__toml_string(sbx__toml_get(t, "agent.retries"), NULL));
	cr_expect_eq(sbx__toml_int(sbx__toml_get(t, "agent.name")), 0);
	cr_expect_eq(sbx__toml_number(NULL), 0.0);
	cr_expect(!sbx__toml_bool(NULL));
	sbx__toml_free(t);
}

static const char harbor_task[] =
	"version = \"1.0\"\n"
	"\n"
	"[metadata]\n"
	"author_name = \"Jane Doe\"\n"
	"author_email = \"jane@example.com\"\n"
	"difficulty = \"medium\"\n"
	"category = \"software-engineering\"\n"
	"tags = [\"git\", \"bash\"]\n"
	"expert_time_estimate_min = 30.0\n"
	"junior_time_estimate_min = 120\n"
	"\n"
	"[verifier]\n"
	"timeout_sec = 900.0\n"
	"env = { API_URL = \"${API_URL:-http://localhost}\" }\n"
	"\n"
	"[agent]\n"
	"timeout_sec = 1800\n"
	"\n"
	"[environment]\n"
	"build_timeout_sec = 600.0\n"
	"docker_image = \"ghcr.io/example/task:latest\"\n"
	"cpus = 2\n"
	"memory = \"4G\"\n"
	"storage_mb = 10240\n"
	"allow_internet = false\n"
	"healthcheck = { command = \"test -f /ready\", retries = 3 }\n"
	"\n"
	"[[environment.mcp_servers]]\n"
	"name = \"files\"\n"
	"transport = \"stdio\"\n"
	"command = \"mcp-files\"\n"
	"args = [\"--root\", \"/app\"]\n"
	"\n"
	"[[steps]]\n"
	"name = \"build\"\n"
	"min_reward = 0.5\n"
	"[steps.agent]\n"
	"timeout_sec = 300\n"
	"\n"
	"[[steps]]\n"
	"name = \"test\"\n"
	"min_reward = { unit = 1.0, lint = 0.5 }\n";

Test(tasks_toml, harbor_task_toml)
{
	sbx_toml *t = parse_ok(harbor_task);
	const char *s;
	double d;
	int64_t i;
	bool b;
	const sbx_toml *v;
	cr_expect_eq(sbx__toml_get_string(t, "version", &s), SBX_TOML_FOUND);
	cr_expect_str_eq(s, "1.0");
	cr_expect_eq(sbx__toml_get_number(t, "agent.timeout_sec", &d), SBX_TOML_FOUND);
	cr_expect_eq(d, 1800.0);
	cr_expect_eq(sbx__toml_get_number(t, "verifier.timeout_sec", &d), SBX_TOML_FOUND);
	cr_expect_eq(d, 900.0);
	cr_expect_eq(sbx__toml_get_string(t, "verifier.env.API_URL", &s), SBX_TOML_FOUND);
	cr_expect_str_eq(s, "${API_URL:-http://localhost}");
	cr_expect_eq(sbx__toml_get_int(t, "environment.cpus", &i), SBX_TOML_FOUND);
	cr_expect_eq(i, 2);
	cr_expect_eq(sbx__toml_get_int(t, "environment.memory_mb", &i), SBX_TOML_MISSING);
	cr_expect_eq(sbx__toml_get_string(t, "environment.memory", &s), SBX_TOML_FOUND);
	cr_expect_eq(sbx__toml_get_bool(t, "environment.allow_internet", &b), SBX_TOML_FOUND);
	cr_expect(!b);
	cr_expect_eq(sbx__toml_get_int(t, "environment.healthcheck.retries", &i), SBX_TOML_FOUND);
	cr_expect_eq(sbx__toml_get_array(t, "metadata.tags", &v), SBX_TOML_FOUND);
	cr_expect_eq(sbx__toml_len(v), 2);
	cr_expect_eq(sbx__toml_get_array(t, "environment.mcp_servers", &v), SBX_TOML_FOUND);
	cr_expect_eq(sbx__toml_get_array(sbx__toml_at(v, 0), "args", &v), SBX_TOML_FOUND);
	cr_expect_str_eq(sbx__toml_string(sbx__toml_at(v, 1), NULL), "/app");
	cr_assert_eq(sbx__toml_get_array(t, "steps", &v), SBX_TOML_FOUND);
	cr_assert_eq(sbx__toml_len(v), 2);
	cr_expect_eq(sbx__toml_get_number(sbx__toml_at(v, 0), "agent.timeout_sec", &d),
		     SBX_TOML_FOUND);
	cr_expect_eq(d, 300.0);
	cr_expect_eq(sbx__toml_get_number(sbx__toml_at(v, 1), "min_reward", &d),
		     SBX_TOML_WRONG_TYPE);
	cr_expect_eq(sbx__toml_get_number(sbx__toml_at(v, 1), "min_reward.lint", &d),
		     SBX_TOML_FOUND);
	cr_expect_eq(d, 0.5);
	sbx__toml_free(t);
}

Test(tasks_toml, parse_file)
{
	char dir[] = "/tmp/sbx-toml-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char *path = xasprintf("%s/task.toml", dir);
	sbx_toml *t = NULL;
	sbx_error *err = NULL;
	cr_expect_eq(sbx__toml_parse_file(&t, path, &err), -ENOENT);
	cr_assert_not_null(err);
	cr_expect(strstr(err->msg, path) != NULL, "message names the path: %s", err->msg);
	sbx_error_free(err);
	err = NULL;

	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("[agent]\ntimeout_sec 5\n", f);
	fclose(f);
	cr_expect_eq(sbx__toml_parse_file(&t, path, &err), -EINVAL);
	char *want = xasprintf("%s:2:13: expected '=' after key", path);
	cr_expect_str_eq(err->msg, want);
	free(want);
	sbx_error_free(err);
	err = NULL;

	f = fopen(path, "w");
	fputs(harbor_task, f);
	fclose(f);
	cr_expect_eq(sbx__toml_parse_file(&t, path, &err), 0);
	cr_expect_not_null(sbx__toml_get(t, "environment"));
	sbx__toml_free(t);
	t = NULL;

	f = fopen(path, "w");
	for (size_t n = 0; n <= SBX_TOML_MAX_FILE / 15; n++)
		fputs("# padding line\n", f);
	fclose(f);
	cr_expect_eq(sbx__toml_parse_file(&t, path, &err), -EFBIG);
	cr_expect_null(t);
	sbx_error_free(err);
	unlink(path);
	rmdir(dir);
	free(path);
}

Test(tasks_toml, large_tables_use_the_index)
{
	sbx_buf b;
	sbx__buf_init(&b, 1 << 20);
	for (int k = 0; k < 2000; k++)
		sbx__buf_printf(&b, "k%d = %d\n", k, k);
	sbx_toml *t = parse_ok(b.data);
	cr_assert_eq(sbx__toml_len(t), 2000);
	for (int k = 0; k < 2000; k += 37) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", k);
		cr_expect_eq(sbx__toml_int(sbx__toml_get(t, key)), k);
	}
	cr_expect_str_eq(sbx__toml_key_at(t, 1999, NULL), "k1999");
	sbx__toml_free(t);
	sbx__buf_printf(&b, "k1234 = 0\n");
	char *msg = parse_err(b.data, b.len, "big.toml");
	cr_expect_str_eq(msg, "big.toml:2001:1: duplicate key 'k1234'");
	free(msg);
	sbx__buf_free(&b);
}

Test(tasks_toml, nesting_is_bounded)
{
	sbx_buf b;
	sbx__buf_init(&b, 1 << 20);
	sbx__buf_append(&b, "a = ", 4);
	for (int k = 0; k < 100000; k++)
		sbx__buf_append(&b, "[", 1);
	char *msg = parse_err(b.data, b.len, "deep.toml");
	cr_expect(strstr(msg, "nesting deeper than") != NULL, "%s", msg);
	free(msg);
	sbx__buf_free(&b);
	sbx__buf_init(&b, 1 << 20);
	for (int k = 0; k < 5000; k++)
		sbx__buf_append(&b, "a.", 2);
	sbx__buf_append(&b, "a = 1\n", 6);
	msg = parse_err(b.data, b.len, "deep.toml");
	cr_expect(strstr(msg, "nesting deeper than") != NULL, "%s", msg);
	free(msg);
	sbx__buf_free(&b);
	/* Within the limit is fine. */
	sbx_toml *t = parse_ok("a = [[[[[[[[[[1]]]]]]]]]]\n");
	sbx__toml_free(t);
}

Test(tasks_toml, tagged_json)
{
	sbx_toml *t = parse_ok("s = 'x'\ni = 7\nf = 0.1\ng = 3e0\nb = true\n"
			       "d = 1979-05-27\na = [nan, -inf]\n[t]\n");
	char *json = NULL;
	cr_assert_eq(sbx__toml_to_tagged_json(&json, t), 0);
	/* Compact the output for a stable comparison. */
	sbx_buf b;
	sbx__buf_init(&b, 4096);
	for (const char *c = json; *c; c++)
		if (*c != ' ' && *c != '\n')
			sbx__buf_append(&b, c, 1);
	cr_expect_str_eq(b.data,
			 "{\"s\":{\"type\":\"string\",\"value\":\"x\"},"
			 "\"i\":{\"type\":\"integer\",\"value\":\"7\"},"
			 "\"f\":{\"type\":\"float\",\"value\":\"0.1\"},"
			 "\"g\":{\"type\":\"float\",\"value\":\"3.0\"},"
			 "\"b\":{\"type\":\"bool\",\"value\":\"true\"},"
			 "\"d\":{\"type\":\"date-local\",\"value\":\"1979-05-27\"},"
			 "\"a\":[{\"type\":\"float\",\"value\":\"nan\"},"
			 "{\"type\":\"float\",\"value\":\"-inf\"}],"
			 "\"t\":{}}");
	sbx__buf_free(&b);
	free(json);
	sbx__toml_free(t);
}

/* Every prefix and many byte mutations of a real document: no crash, no leak. */
Test(tasks_toml, truncated_and_mutated_input)
{
	size_t len = strlen(harbor_task);
	for (size_t n = 0; n <= len; n++) {
		sbx_toml *t = NULL;
		sbx_error *err = NULL;
		int r = sbx__toml_parse(&t, harbor_task, n, "cut.toml", &err);
		cr_assert(r == 0 ? t != NULL && err == NULL : t == NULL && err != NULL);
		sbx__toml_free(t);
		sbx_error_free(err);
	}
	static const char bytes[] = "[]{}=.,'\"\\#\n\r\t 0_+-:eTZ\x80\xff\x00";
	char *copy = xmalloc(len);
	unsigned seed = 12345;
	for (int round = 0; round < 4000; round++) {
		memcpy(copy, harbor_task, len);
		for (int k = 0; k < 3; k++) {
			seed = seed * 1103515245u + 12345u;
			size_t at = (seed >> 8) % len;
			seed = seed * 1103515245u + 12345u;
			copy[at] = bytes[(seed >> 8) % (sizeof(bytes) - 1)];
		}
		sbx_toml *t = NULL;
		sbx_error *err = NULL;
		int r = sbx__toml_parse(&t, copy, len, "fuzz.toml", &err);
		cr_assert(r == 0 || r == -EINVAL);
		sbx__toml_free(t);
		sbx_error_free(err);
	}
	free(copy);
}
