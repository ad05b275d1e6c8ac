/* SPDX-License-Identifier: MIT */
/*
 * Private to the TOML parser (src/tasks/toml*.c): the cursor over the input,
 * error reporting with line:column, lexing of strings and scalars, and the
 * node helpers the structural parser builds the tree with.
 */
#ifndef SBX_TASKS_TOML_INT_H
#define SBX_TASKS_TOML_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "tasks/toml.h"
#include "util/buf.h"

/* Table flags (sbx_toml.flags). */
#define TOML_F_IMPLICIT 0x01u /* created as a parent of a [header] */
#define TOML_F_DEFINED  0x02u /* defined by its own [header] or [[header]] */
#define TOML_F_DOTTED   0x04u /* created or extended by dotted keys */
#define TOML_F_INLINE   0x08u /* inline table (or inside one): frozen */
#define TOML_F_AOT      0x10u /* array created by [[header]] */

typedef struct sbx_toml_parser {
	const char *src;
	size_t len;
	size_t pos;
	const char *file;
	sbx_error **err;
} sbx_toml_parser;

/* Cursor helpers: the byte at pos + off, or -1 past the end. */
static inline int toml_peek(const sbx_toml_parser *p, size_t off)
{
	return p->pos + off < p->len ? (unsigned char)p->src[p->pos + off] : -1;
}

/* Sets "FILE:LINE:COL: msg" at byte offset `at`; returns -EINVAL. */
int sbx__toml_fail(sbx_toml_parser *p, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Checks the whole input is valid UTF-8 (no overlongs, surrogates, > U+10FFFF). */
int sbx__toml_check_utf8(sbx_toml_parser *p);

/* Skips spaces and tabs. */
void sbx__toml_skip_ws(sbx_toml_parser *p);
/* At a newline (LF or CRLF)? Consumes it when true. */
bool sbx__toml_eat_newline(sbx_toml_parser *p);
/* At '#': consumes the comment up to (not including) the newline. */
int sbx__toml_skip_comment(sbx_toml_parser *p);
/* Skips whitespace, newlines and comments (inside arrays). */
int sbx__toml_skip_ws_nl_comments(sbx_toml_parser *p);

/* Parses one key segment (bare, "basic" or 'literal') into out (owned). */
int sbx__toml_lex_key(sbx_toml_parser *p, char **out, size_t *len);
/* Parses any string value at pos (all four kinds) into out (owned). */
int sbx__toml_lex_string(sbx_toml_parser *p, char **out, size_t *len);
/* Parses an integer, float or datetime at pos. */
int sbx__toml_lex_scalar(sbx_toml_parser *p, sbx_toml **out);
/* Parses a datetime of any kind at pos (caller checked it starts like one). */
int sbx__toml_lex_datetime(sbx_toml_parser *p, sbx_toml **out);

/* Formats a float as the shortest text that reads back to v ("inf", "nan"). */
void sbx__toml_format_float(char *buf, size_t size, double v);

/* Node helpers. */
sbx_toml *sbx__toml_new(sbx_toml_type type);
/* Looks a key up; NULL when absent. */
sbx_toml *sbx__toml_find(const sbx_toml *table, const char *key, size_t klen);
/* Appends key (ownership of key and val taken); the key must be absent. */
void sbx__toml_insert(sbx_toml *table, char *key, size_t klen, sbx_toml *val);
/* Appends an item (ownership taken). */
void sbx__toml_push(sbx_toml *array, sbx_toml *item);

#endif
