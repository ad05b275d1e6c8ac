/* SPDX-License-Identifier: MIT */
/*
 * TOML DOM: node allocation and release, insertion-ordered tables with a hash
 * index for large ones, dotted-path and typed lookups for the task loader,
 * type names and type-error messages, and reading a document from a file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/toml.h"
#include "tasks/toml_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#define INDEX_MIN_KEYS 16

sbx_toml *sbx__toml_new(sbx_toml_type type)
{
	sbx_toml *v = xcalloc(1, sizeof(*v));
	v->type = type;
	return v;
}

void sbx__toml_free(sbx_toml *v)
{
	if (!v)
		return;
	switch (v->type) {
	case SBX_TOML_TABLE:
		for (size_t i = 0; i < v->u.tab.n; i++) {
			free(v->u.tab.keys[i]);
			sbx__toml_free(v->u.tab.vals[i]);
		}
		free(v->u.tab.keys);
		free(v->u.tab.key_lens);
		free(v->u.tab.vals);
		free(v->u.tab.index);
		break;
	case SBX_TOML_ARRAY:
		for (size_t i = 0; i < v->u.arr.n; i++)
			sbx__toml_free(v->u.arr.items[i]);
		free(v->u.arr.items);
		break;
	case SBX_TOML_STRING:
		free(v->u.str.s);
		break;
	case SBX_TOML_DATETIME:
	case SBX_TOML_DATETIME_LOCAL:
	case SBX_TOML_DATE_LOCAL:
	case SBX_TOML_TIME_LOCAL:
		free(v->u.dt.s);
		break;
	case SBX_TOML_INTEGER:
	case SBX_TOML_FLOAT:
	case SBX_TOML_BOOL:
	default:
		break;
	}
	free(v);
}

static uint32_t hash_key(const char *key, size_t klen)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < klen; i++) {
		h ^= (unsigned char)key[i];
		h *= 16777619u;
	}
	return h;
}

static void index_add(sbx_toml *t, size_t idx)
{
	size_t mask = t->u.tab.index_cap - 1;
	size_t slot = hash_key(t->u.tab.keys[idx], t->u.tab.key_lens[idx]) & mask;
	while (t->u.tab.index[slot])
		slot = (slot + 1) & mask;
	t->u.tab.index[slot] = (uint32_t)(idx + 1);
}

static void index_rebuild(sbx_toml *t)
{
	size_t cap = 64;
	while (cap < t->u.tab.n * 2)
		cap *= 2;
	free(t->u.tab.index);
	t->u.tab.index = xcalloc(cap, sizeof(*t->u.tab.index));
	t->u.tab.index_cap = cap;
	for (size_t i = 0; i < t->u.tab.n; i++)
		index_add(t, i);
}

static bool key_eq(const sbx_toml *t, size_t i, const char *key, size_t klen)
{
	return t->u.tab.key_lens[i] == klen && memcmp(t->u.tab.keys[i], key, klen) == 0;
}

sbx_toml *sbx__toml_find(const sbx_toml *t, const char *key, size_t klen)
{
	if (!t || t->type != SBX_TOML_TABLE)
		return NULL;
	if (t->u.tab.index) {
		size_t mask = t->u.tab.index_cap - 1;
		size_t slot = hash_key(key, klen) & mask;
		for (uint32_t s; (s = t->u.tab.index[slot]) != 0; slot = (slot + 1) & mask)
			if (key_eq(t, s - 1, key, klen))
				return t->u.tab.vals[s - 1];
		return NULL;
	}
	for (size_t i = 0; i < t->u.tab.n; i++)
		if (key_eq(t, i, key, klen))
			return t->u.tab.vals[i];
	return NULL;
}

void sbx__toml_insert(sbx_toml *t, char *key, size_t klen, sbx_toml *val)
{
	if (t->u.tab.n == t->u.tab.cap) {
		size_t cap = t->u.tab.cap ? t->u.tab.cap * 2 : 8;
		t->u.tab.keys = xrealloc(t->u.tab.keys, cap * sizeof(*t->u.tab.keys));
		t->u.tab.key_lens = xrealloc(t->u.tab.key_lens, cap * sizeof(*t->u.tab.key_lens));
		t->u.tab.vals = xrealloc(t->u.tab.vals, cap * sizeof(*t->u.tab.vals));
		t->u.tab.cap = cap;
	}
	size_t idx = t->u.tab.n++;
	t->u.tab.keys[idx] = key;
	t->u.tab.key_lens[idx] = klen;
	t->u.tab.vals[idx] = val;
	if (t->u.tab.index && t->u.tab.n * 2 <= t->u.tab.index_cap)
		index_add(t, idx);
	else if (t->u.tab.n >= INDEX_MIN_KEYS)
		index_rebuild(t);
}

void sbx__toml_push(sbx_toml *a, sbx_toml *item)
{
	if (a->u.arr.n == a->u.arr.cap) {
		size_t cap = a->u.arr.cap ? a->u.arr.cap * 2 : 4;
		a->u.arr.items = xrealloc(a->u.arr.items, cap * sizeof(*a->u.arr.items));
		a->u.arr.cap = cap;
	}
	a->u.arr.items[a->u.arr.n++] = item;
}

const char *sbx__toml_type_name(sbx_toml_type t)
{
	switch (t) {
	case SBX_TOML_TABLE: return "table";
	case SBX_TOML_ARRAY: return "array";
	case SBX_TOML_STRING: return "string";
	case SBX_TOML_INTEGER: return "integer";
	case SBX_TOML_FLOAT: return "float";
	case SBX_TOML_BOOL: return "boolean";
	case SBX_TOML_DATETIME: return "datetime";
	case SBX_TOML_DATETIME_LOCAL: return "local datetime";
	case SBX_TOML_DATE_LOCAL: return "local date";
	case SBX_TOML_TIME_LOCAL: return "local time";
	default: return "unknown";
	}
}

const sbx_toml *sbx__toml_table_get(const sbx_toml *table, const char *key, size_t klen)
{
	return sbx__toml_find(table, key, klen);
}

const sbx_toml *sbx__toml_get(const sbx_toml *table, const char *path)
{
	const sbx_toml *v = table;
	if (!path)
		return NULL;
	for (;;) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		v = sbx__toml_find(v, path, n);
		if (!v || !dot)
			return v;
		path = dot + 1;
	}
}

static sbx_toml_status lookup(const sbx_toml *t, const char *path, sbx_toml_type want,
			      const sbx_toml **out)
{
	const sbx_toml *v = sbx__toml_get(t, path);
	if (!v)
		return SBX_TOML_MISSING;
	if (v->type != want)
		return SBX_TOML_WRONG_TYPE;
	*out = v;
	return SBX_TOML_FOUND;
}

sbx_toml_status sbx__toml_get_string(const sbx_toml *t, const char *path, const char **out)
{
	const sbx_toml *v;
	sbx_toml_status s = lookup(t, path, SBX_TOML_STRING, &v);
	if (s == SBX_TOML_FOUND)
		*out = v->u.str.s;
	return s;
}

sbx_toml_status sbx__toml_get_int(const sbx_toml *t, const char *path, int64_t *out)
{
	const sbx_toml *v;
	sbx_toml_status s = lookup(t, path, SBX_TOML_INTEGER, &v);
	if (s == SBX_TOML_FOUND)
		*out = v->u.i;
	return s;
}

sbx_toml_status sbx__toml_get_number(const sbx_toml *t, const char *path, double *out)
{
	const sbx_toml *v = sbx__toml_get(t, path);
	if (!v)
		return SBX_TOML_MISSING;
	if (v->type == SBX_TOML_INTEGER)
		*out = (double)v->u.i;
	else if (v->type == SBX_TOML_FLOAT)
		*out = v->u.f;
	else
		return SBX_TOML_WRONG_TYPE;
	return SBX_TOML_FOUND;
}

sbx_toml_status sbx__toml_get_bool(const sbx_toml *t, const char *path, bool *out)
{
	const sbx_toml *v;
	sbx_toml_status s = lookup(t, path, SBX_TOML_BOOL, &v);
	if (s == SBX_TOML_FOUND)
		*out = v->u.b;
	return s;
}

sbx_toml_status sbx__toml_get_table(const sbx_toml *t, const char *path, const sbx_toml **out)
{
	return lookup(t, path, SBX_TOML_TABLE, out);
}

sbx_toml_status sbx__toml_get_array(const sbx_toml *t, const char *path, const sbx_toml **out)
{
	return lookup(t, path, SBX_TOML_ARRAY, out);
}

int sbx__toml_type_error(sbx_error **err, const char *file, const char *path, const char *what,
			 const sbx_toml *got)
{
	const char *dot = strrchr(path, '.');
	_cleanup_free_ char *name = dot ? xasprintf("[%.*s].%s", (int)(dot - path), path, dot + 1)
					: xstrdup(path);
	if (!got)
		return sbx_error_set(err, -EINVAL, "%s: %s: expected %s, got nothing",
				     file ? file : "<input>", name, what);
	return sbx_error_set(err, -EINVAL, "%s: %s: expected %s, got %s", file ? file : "<input>",
			     name, what, sbx__toml_type_name(got->type));
}

sbx_toml_type sbx__toml_type(const sbx_toml *v)
{
	return v ? v->type : SBX_TOML_TABLE;
}

size_t sbx__toml_len(const sbx_toml *v)
{
	if (!v)
		return 0;
	if (v->type == SBX_TOML_TABLE)
		return v->u.tab.n;
	if (v->type == SBX_TOML_ARRAY)
		return v->u.arr.n;
	return 0;
}

const char *sbx__toml_key_at(const sbx_toml *t, size_t i, const sbx_toml **val)
{
	if (!t || t->type != SBX_TOML_TABLE || i >= t->u.tab.n)
		return NULL;
	if (val)
		*val = t->u.tab.vals[i];
	return t->u.tab.keys[i];
}

const sbx_toml *sbx__toml_at(const sbx_toml *a, size_t i)
{
	if (!a || a->type != SBX_TOML_ARRAY || i >= a->u.arr.n)
		return NULL;
	return a->u.arr.items[i];
}

const char *sbx__toml_string(const sbx_toml *v, size_t *len)
{
	if (!v || v->type != SBX_TOML_STRING)
		return NULL;
	if (len)
		*len = v->u.str.len;
	return v->u.str.s;
}

int64_t sbx__toml_int(const sbx_toml *v)
{
	return v && v->type == SBX_TOML_INTEGER ? v->u.i : 0;
}

double sbx__toml_number(const sbx_toml *v)
{
	if (v && v->type == SBX_TOML_INTEGER)
		return (double)v->u.i;
	if (v && v->type == SBX_TOML_FLOAT)
		return v->u.f;
	return 0.0;
}

bool sbx__toml_bool(const sbx_toml *v)
{
	return v && v->type == SBX_TOML_BOOL && v->u.b;
}

const sbx_toml_datetime *sbx__toml_datetime(const sbx_toml *v, const char **text)
{
	if (!v || v->type < SBX_TOML_DATETIME || v->type > SBX_TOML_TIME_LOCAL)
		return NULL;
	if (text)
		*text = v->u.dt.s;
	return &v->u.dt.v;
}

int sbx__toml_parse_file(sbx_toml **out, const char *path, sbx_error **err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = sbx__read_file(&text, &len, path, SBX_TOML_MAX_FILE, err);
	if (r < 0)
		return r;
	return sbx__toml_parse(out, text, len, path, err);
}
