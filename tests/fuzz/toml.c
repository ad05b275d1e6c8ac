/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: the TOML 1.0 parser (src/tasks/toml*.c) on arbitrary bytes,
 * then every accessor over the tree it builds and the toml-test JSON encoder.
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/tasks/toml.h"
#include "fuzz.h"

static void walk(const sbx_toml *v, unsigned depth)
{
	size_t n = sbx__toml_len(v), len;
	const char *text;
	switch (sbx__toml_type(v)) {
	case SBX_TOML_TABLE:
		for (size_t i = 0; i < n; i++) {
			const sbx_toml *val = NULL;
			const char *k = sbx__toml_key_at(v, i, &val);
			if (k && val && sbx__toml_table_get(v, k, strlen(k)) == NULL && depth > 1000)
				abort();
			walk(val, depth + 1);
		}
		break;
	case SBX_TOML_ARRAY:
		for (size_t i = 0; i < n; i++)
			walk(sbx__toml_at(v, i), depth + 1);
		break;
	case SBX_TOML_STRING:
		(void)sbx__toml_string(v, &len);
		break;
	case SBX_TOML_INTEGER:
	case SBX_TOML_FLOAT:
		(void)sbx__toml_number(v);
		(void)sbx__toml_int(v);
		break;
	case SBX_TOML_BOOL:
		(void)sbx__toml_bool(v);
		break;
	case SBX_TOML_DATETIME:
	case SBX_TOML_DATETIME_LOCAL:
	case SBX_TOML_DATE_LOCAL:
	case SBX_TOML_TIME_LOCAL:
		(void)sbx__toml_datetime(v, &text);
		break;
	default:
		break;
	}
	(void)sbx__toml_type_name(sbx__toml_type(v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sbx_toml *root = NULL;
	sbx_error *e = NULL;
	if (sbx__toml_parse(&root, (const char *)data, size, "task.toml", &e) < 0) {
		sbx_error_free(e);
		return 0;
	}
	walk(root, 0);
	const char *s;
	int64_t i;
	double d;
	bool b;
	const sbx_toml *t;
	(void)sbx__toml_get_string(root, "metadata.author_name", &s);
	(void)sbx__toml_get_number(root, "agent.timeout_sec", &d);
	(void)sbx__toml_get_int(root, "environment.cpus", &i);
	(void)sbx__toml_get_bool(root, "environment.allow_internet", &b);
	(void)sbx__toml_get_table(root, "verifier", &t);
	(void)sbx__toml_get_array(root, "a.b.c", &t);
	if (sbx__toml_type_error(&e, "task.toml", "agent.timeout_sec", "number",
				 sbx__toml_get(root, "agent.timeout_sec")) < 0)
		sbx_error_free(e);
	char *json = NULL;
	if (sbx__toml_to_tagged_json(&json, root) == 0)
		free(json);
	sbx__toml_free(root);
	return 0;
}
