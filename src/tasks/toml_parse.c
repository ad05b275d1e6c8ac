/* SPDX-License-Identifier: MIT */
/*
 * TOML document structure: expressions line by line, dotted keys, [tables]
 * and [[arrays of tables]] with the TOML 1.0 definition rules, arrays and
 * inline tables. Table nodes carry flags recording how they came to exist
 * (implicitly as a header's parent, by their own header, by dotted keys, or
 * as an inline table) and every redefinition rule is checked against them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/toml_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"

/* One segment of a dotted key, with its position for messages. */
typedef struct key_seg {
	char *s;
	size_t len;
	size_t at;
} key_seg;

typedef struct key_path {
	key_seg *v;
	size_t n, cap;
} key_path;

static void key_path_free(key_path *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].s);
	free(k->v);
	k->v = NULL;
	k->n = k->cap = 0;
}

static bool is_bare_key(const key_seg *k)
{
	if (k->len == 0)
		return false;
	for (size_t i = 0; i < k->len; i++) {
		char c = k->s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* "a.b.\"c d\"" for messages: segments 0..upto of k (owned). */
static char *path_name(const key_path *k, size_t upto)
{
	sbx_buf b;
	sbx__buf_init(&b, 4096);
	for (size_t i = 0; i <= upto && i < k->n; i++) {
		if (i)
			sbx__buf_append_trunc(&b, ".", 1);
		bool bare = is_bare_key(&k->v[i]);
		if (!bare)
			sbx__buf_append_trunc(&b, "\"", 1);
		for (size_t j = 0; j < k->v[i].len && j < 64; j++) {
			unsigned char c = (unsigned char)k->v[i].s[j];
			sbx__buf_append_trunc(&b, c < 0x20 || c == 0x7F ? "?" : &k->v[i].s[j], 1);
		}
		if (!bare)
			sbx__buf_append_trunc(&b, "\"", 1);
	}
	return sbx__buf_steal(&b, NULL);
}

static const char *type_with_article(sbx_toml_type t)
{
	switch (t) {
	case SBX_TOML_ARRAY: return "an array";
	case SBX_TOML_INTEGER: return "an integer";
	case SBX_TOML_TABLE: return "a table";
	case SBX_TOML_STRING: return "a string";
	case SBX_TOML_FLOAT: return "a float";
	case SBX_TOML_BOOL: return "a boolean";
	case SBX_TOML_DATETIME: return "a datetime";
	case SBX_TOML_DATETIME_LOCAL: return "a local datetime";
	case SBX_TOML_DATE_LOCAL: return "a local date";
	case SBX_TOML_TIME_LOCAL: return "a local time";
	default: return "a value";
	}
}

static int parse_key(sbx_toml_parser *p, key_path *k)
{
	for (;;) {
		if (k->n == k->cap) {
			k->cap = k->cap ? k->cap * 2 : 4;
			k->v = xrealloc(k->v, k->cap * sizeof(*k->v));
		}
		key_seg *seg = &k->v[k->n];
		seg->at = p->pos;
		int r = sbx__toml_lex_key(p, &seg->s, &seg->len);
		if (r < 0)
			return r;
		k->n++;
		sbx__toml_skip_ws(p);
		if (toml_peek(p, 0) != '.')
			return 0;
		p->pos++;
		sbx__toml_skip_ws(p);
	}
}

/* Fails with "PRE'a.b'POST" at `at`, naming segments 0..i of k. */
static int key_fail(sbx_toml_parser *p, size_t at, const key_path *k, size_t i, const char *pre,
		    const char *post)
{
	_cleanup_free_ char *name = path_name(k, i);
	return sbx__toml_fail(p, at, "%s'%s'%s", pre, name, post);
}

static int not_table_fail(sbx_toml_parser *p, const key_path *k, size_t i, sbx_toml_type t)
{
	_cleanup_free_ char *name = path_name(k, i);
	return sbx__toml_fail(p, k->v[i].at, "key '%s' is %s, not a table", name,
			      type_with_article(t));
}

static int check_depth(sbx_toml_parser *p, size_t at, unsigned depth)
{
	if (depth > SBX_TOML_MAX_DEPTH)
		return sbx__toml_fail(p, at, "nesting deeper than %d levels", SBX_TOML_MAX_DEPTH);
	return 0;
}

/* Creates an empty table under key seg of parent t (key copied). */
static sbx_toml *add_table(sbx_toml *t, const key_seg *seg, unsigned flags)
{
	sbx_toml *child = sbx__toml_new(SBX_TOML_TABLE);
	child->flags = flags;
	child->depth = t->depth + 1;
	sbx__toml_insert(t, xstrndup(seg->s, seg->len), seg->len, child);
	return child;
}

static int parse_value(sbx_toml_parser *p, unsigned depth, sbx_toml **out);

static int parse_array(sbx_toml_parser *p, unsigned depth, sbx_toml **out)
{
	size_t start = p->pos++;
	_cleanup_(sbx__toml_freep) sbx_toml *arr = sbx__toml_new(SBX_TOML_ARRAY);
	arr->depth = depth;
	for (;;) {
		int r = sbx__toml_skip_ws_nl_comments(p);
		if (r < 0)
			return r;
		if (toml_peek(p, 0) == ']')
			break;
		sbx_toml *item = NULL;
		r = parse_value(p, depth + 1, &item);
		if (r < 0)
			return r;
		sbx__toml_push(arr, item);
		r = sbx__toml_skip_ws_nl_comments(p);
		if (r < 0)
			return r;
		if (toml_peek(p, 0) == ',') {
			p->pos++;
			continue;
		}
		if (toml_peek(p, 0) == ']')
			break;
		if (toml_peek(p, 0) == -1)
			return sbx__toml_fail(p, start, "unterminated array");
		return sbx__toml_fail(p, p->pos, "expected ',' or ']' in array");
	}
	p->pos++;
	*out = steal_ptr(&arr);
	return 0;
}

static int parse_keyval(sbx_toml_parser *p, sbx_toml *table);

static int parse_inline_table(sbx_toml_parser *p, unsigned depth, sbx_toml **out)
{
	size_t start = p->pos++;
	_cleanup_(sbx__toml_freep) sbx_toml *tab = sbx__toml_new(SBX_TOML_TABLE);
	tab->depth = depth;
	sbx__toml_skip_ws(p);
	if (toml_peek(p, 0) != '}') {
		for (;;) {
			int r = parse_keyval(p, tab);
			if (r < 0)
				return r;
			sbx__toml_skip_ws(p);
			int c = toml_peek(p, 0);
			if (c == '}')
				break;
			if (c == -1)
				return sbx__toml_fail(p, start, "unterminated inline table");
			if (c != ',')
				return sbx__toml_fail(p, p->pos, c == '\n' || c == '\r' || c == '#'
						      ? "newline not allowed in inline table"
						      : "expected ',' or '}' in inline table");
			size_t comma = p->pos++;
			sbx__toml_skip_ws(p);
			if (toml_peek(p, 0) == '}')
				return sbx__toml_fail(p, comma,
						      "trailing comma not allowed in inline table");
		}
	}
	p->pos++;
	tab->flags = TOML_F_INLINE;
	*out = steal_ptr(&tab);
	return 0;
}

static bool match_word(const sbx_toml_parser *p, const char *w)
{
	size_t n = strlen(w);
	return p->len - p->pos >= n && memcmp(p->src + p->pos, w, n) == 0;
}

static int parse_value(sbx_toml_parser *p, unsigned depth, sbx_toml **out)
{
	int c = toml_peek(p, 0);
	int r = check_depth(p, p->pos, depth);
	if (r < 0)
		return r;
	if (c == '"' || c == '\'') {
		sbx_toml *v = sbx__toml_new(SBX_TOML_STRING);
		r = sbx__toml_lex_string(p, &v->u.str.s, &v->u.str.len);
		if (r < 0) {
			sbx__toml_free(v);
			return r;
		}
		*out = v;
		return 0;
	}
	if (match_word(p, "true") || match_word(p, "false")) {
		sbx_toml *v = sbx__toml_new(SBX_TOML_BOOL);
		v->u.b = c == 't';
		p->pos += v->u.b ? 4 : 5;
		*out = v;
		return 0;
	}
	if (c == '[')
		r = parse_array(p, depth, out);
	else if (c == '{')
		r = parse_inline_table(p, depth, out);
	else if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == 'i' || c == 'n')
		r = sbx__toml_lex_scalar(p, out);
	else if (c == -1 || c == '\n' || c == '\r' || c == '#')
		return sbx__toml_fail(p, p->pos, "expected a value");
	else
		return sbx__toml_fail(p, p->pos, "expected a value, got '%c'",
				      c >= 0x20 && c < 0x7F ? c : '?');
	if (r == 0)
		(*out)->depth = depth;
	return r;
}

/* key = value, inserted below table with the dotted-key rules. */
static int parse_keyval(sbx_toml_parser *p, sbx_toml *table)
{
	_cleanup_(key_path_free) key_path k = {0};
	int r = parse_key(p, &k);
	if (r < 0)
		return r;
	if (toml_peek(p, 0) != '=')
		return sbx__toml_fail(p, p->pos, "expected '=' after key");
	p->pos++;
	sbx__toml_skip_ws(p);
	sbx_toml *t = table;
	for (size_t i = 0; i + 1 < k.n; i++) {
		const key_seg *seg = &k.v[i];
		sbx_toml *child = sbx__toml_find(t, seg->s, seg->len);
		if (!child) {
			r = check_depth(p, seg->at, t->depth + 1);
			if (r < 0)
				return r;
			child = add_table(t, seg, TOML_F_DOTTED);
		} else if (child->type != SBX_TOML_TABLE) {
			return not_table_fail(p, &k, i, child->type);
		} else if (child->flags & TOML_F_INLINE) {
			return key_fail(p, seg->at, &k, i, "cannot add keys to inline table ", "");
		} else if (child->flags & TOML_F_DEFINED) {
			return key_fail(p, seg->at, &k, i, "cannot add keys to table ",
					" defined by a header using dotted keys");
		}
		child->flags |= TOML_F_DOTTED;
		t = child;
	}
	key_seg *last = &k.v[k.n - 1];
	if (sbx__toml_find(t, last->s, last->len))
		return key_fail(p, last->at, &k, k.n - 1, "duplicate key ", "");
	sbx_toml *val = NULL;
	r = parse_value(p, t->depth + 1, &val);
	if (r < 0)
		return r;
	sbx__toml_insert(t, steal_ptr(&last->s), last->len, val);
	return 0;
}

/* [a.b.c] or [[a.b.c]]: finds or creates the table and makes it current. */
static int parse_header(sbx_toml_parser *p, sbx_toml *root, sbx_toml **cur)
{
	size_t start = p->pos;
	bool aot = toml_peek(p, 1) == '[';
	p->pos += aot ? 2 : 1;
	sbx__toml_skip_ws(p);
	_cleanup_(key_path_free) key_path k = {0};
	int r = parse_key(p, &k);
	if (r < 0)
		return r;
	if (toml_peek(p, 0) != ']' || (aot && toml_peek(p, 1) != ']'))
		return sbx__toml_fail(p, p->pos, aot ? "expected ']]' after table name"
						     : "expected ']' after table name");
	p->pos += aot ? 2 : 1;
	sbx_toml *t = root;
	for (size_t i = 0; i < k.n; i++) {
		const key_seg *seg = &k.v[i];
		bool last = i + 1 == k.n;
		sbx_toml *child = sbx__toml_find(t, seg->s, seg->len);
		if (!child || (child->type == SBX_TOML_TABLE && !(child->flags & TOML_F_INLINE)) ||
		    (child->type == SBX_TOML_ARRAY && (child->flags & TOML_F_AOT)))
			r = check_depth(p, seg->at, t->depth + 2);
		else if (child->type == SBX_TOML_TABLE)
			r = key_fail(p, seg->at, &k, i, "cannot extend inline table ", "");
		else
			r = not_table_fail(p, &k, i, child->type);
		if (r < 0)
			return r;
		if (last && aot) {
			if (!child) {
				child = sbx__toml_new(SBX_TOML_ARRAY);
				child->flags = TOML_F_AOT;
				child->depth = t->depth + 1;
				sbx__toml_insert(t, xstrndup(seg->s, seg->len), seg->len, child);
			} else if (child->type != SBX_TOML_ARRAY) {
				return key_fail(p, start, &k, i, "cannot define array of tables ",
						": already a table");
			}
			sbx_toml *elem = sbx__toml_new(SBX_TOML_TABLE);
			elem->flags = TOML_F_DEFINED;
			elem->depth = child->depth + 1;
			sbx__toml_push(child, elem);
			*cur = elem;
			return 0;
		}
		if (last) {
			if (!child) {
				child = add_table(t, seg, TOML_F_DEFINED);
			} else if (child->type != SBX_TOML_TABLE) {
				return key_fail(p, start, &k, i, "table ",
						" is already an array of tables");
			} else if (child->flags & (TOML_F_DEFINED | TOML_F_DOTTED)) {
				return key_fail(p, start, &k, i, "table ", " defined more than once");
			}
			child->flags |= TOML_F_DEFINED;
			*cur = child;
			return 0;
		}
		if (!child)
			child = add_table(t, seg, TOML_F_IMPLICIT);
		else if (child->type == SBX_TOML_ARRAY)
			child = child->u.arr.items[child->u.arr.n - 1];
		t = child;
	}
	return 0;
}

/* After an expression: optional comment, then a newline or the end. */
static int end_of_line(sbx_toml_parser *p, const char *what)
{
	sbx__toml_skip_ws(p);
	if (toml_peek(p, 0) == '#') {
		int r = sbx__toml_skip_comment(p);
		if (r < 0)
			return r;
	}
	if (toml_peek(p, 0) == -1 || sbx__toml_eat_newline(p))
		return 0;
	return sbx__toml_fail(p, p->pos, "expected a newline after %s", what);
}

int sbx__toml_parse(sbx_toml **out, const char *text, size_t len, const char *filename,
		    sbx_error **err)
{
	sbx_toml_parser p = {
		.src = text ? text : "",
		.len = text ? len : 0,
		.file = filename ? filename : "<input>",
		.err = err,
	};
	if (p.len >= 3 && memcmp(p.src, "\xEF\xBB\xBF", 3) == 0)
		p.pos = 3;
	int r = sbx__toml_check_utf8(&p);
	if (r < 0)
		return r;
	_cleanup_(sbx__toml_freep) sbx_toml *root = sbx__toml_new(SBX_TOML_TABLE);
	root->flags = TOML_F_DEFINED;
	sbx_toml *cur = root;
	for (;;) {
		sbx__toml_skip_ws(&p);
		int c = toml_peek(&p, 0);
		if (c == -1)
			break;
		if (sbx__toml_eat_newline(&p))
			continue;
		if (c == '#')
			r = end_of_line(&p, "comment");
		else if (c == '[')
			r = parse_header(&p, root, &cur);
		else
			r = parse_keyval(&p, cur);
		if (r == 0 && c != '#')
			r = end_of_line(&p, c == '[' ? "table header" : "value");
		if (r < 0)
			return r;
	}
	*out = steal_ptr(&root);
	return 0;
}
