/* SPDX-License-Identifier: MIT */
/*
 * toml-test tagged JSON: tables become objects, arrays arrays, and every
 * scalar {"type": TYPE, "value": TEXT} with TEXT as toml-test expects it
 * (decimal integers, shortest round-trip floats, inf/-inf/nan, RFC 3339).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "tasks/toml_int.h"

static json_t *tagged(const char *type, json_t *value)
{
	json_t *o = json_object();
	json_object_set_new(o, "type", json_string(type));
	json_object_set_new(o, "value", value);
	return o;
}

static json_t *to_json(const sbx_toml *v)
{
	char num[64];
	switch (v->type) {
	case SBX_TOML_TABLE: {
		json_t *o = json_object();
		for (size_t i = 0; i < v->u.tab.n; i++)
			json_object_setn_new(o, v->u.tab.keys[i], v->u.tab.key_lens[i],
					     to_json(v->u.tab.vals[i]));
		return o;
	}
	case SBX_TOML_ARRAY: {
		json_t *a = json_array();
		for (size_t i = 0; i < v->u.arr.n; i++)
			json_array_append_new(a, to_json(v->u.arr.items[i]));
		return a;
	}
	case SBX_TOML_STRING:
		return tagged("string", json_stringn(v->u.str.s, v->u.str.len));
	case SBX_TOML_INTEGER:
		snprintf(num, sizeof(num), "%" PRId64, v->u.i);
		return tagged("integer", json_string(num));
	case SBX_TOML_FLOAT:
		sbx__toml_format_float(num, sizeof(num), v->u.f);
		return tagged("float", json_string(num));
	case SBX_TOML_BOOL:
		return tagged("bool", json_string(v->u.b ? "true" : "false"));
	case SBX_TOML_DATETIME:
		return tagged("datetime", json_string(v->u.dt.s));
	case SBX_TOML_DATETIME_LOCAL:
		return tagged("datetime-local", json_string(v->u.dt.s));
	case SBX_TOML_DATE_LOCAL:
		return tagged("date-local", json_string(v->u.dt.s));
	case SBX_TOML_TIME_LOCAL:
		return tagged("time-local", json_string(v->u.dt.s));
	default:
		return json_null();
	}
}

int sbx__toml_to_tagged_json(char **out, const sbx_toml *root)
{
	json_t *j = to_json(root);
	char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	if (!s)
		return -ENOMEM;
	*out = s;
	return 0;
}
