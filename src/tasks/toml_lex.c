/* SPDX-License-Identifier: MIT */
/*
 * TOML lexing: error positions (line:column), UTF-8 validation of the input,
 * whitespace, newlines and comments, keys, and the four string kinds with
 * their escapes. Multi-line strings get CRLF normalized to LF.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/toml_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"

int sbx__toml_fail(sbx_toml_parser *p, size_t at, const char *fmt, ...)
{
	size_t line = 1, col = 1;
	if (at > p->len)
		at = p->len;
	for (size_t i = 0; i < at; i++) {
		unsigned char c = (unsigned char)p->src[i];
		if (c == '\n') {
			line++;
			col = 1;
		} else if ((c & 0xC0) != 0x80) {
			col++;
		}
	}
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	return sbx_error_set(p->err, -EINVAL, "%s:%zu:%zu: %s", p->file, line, col, msg);
}

int sbx__toml_check_utf8(sbx_toml_parser *p)
{
	const unsigned char *s = (const unsigned char *)p->src;
	size_t i = 0;
	while (i < p->len) {
		unsigned c = s[i];
		size_t n;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			n = 2, cp = c & 0x1F, min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			n = 3, cp = c & 0x0F, min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			n = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return sbx__toml_fail(p, i, "invalid UTF-8 byte 0x%02x", c);
		}
		if (p->len - i < n)
			return sbx__toml_fail(p, i, "truncated UTF-8 sequence");
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return sbx__toml_fail(p, i, "invalid UTF-8 sequence");
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (cp < min)
			return sbx__toml_fail(p, i, "overlong UTF-8 sequence");
		if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return sbx__toml_fail(p, i, "UTF-8 sequence encodes an invalid code point");
		i += n;
	}
	return 0;
}

void sbx__toml_skip_ws(sbx_toml_parser *p)
{
	while (p->pos < p->len && (p->src[p->pos] == ' ' || p->src[p->pos] == '\t'))
		p->pos++;
}

bool sbx__toml_eat_newline(sbx_toml_parser *p)
{
	if (toml_peek(p, 0) == '\n') {
		p->pos++;
		return true;
	}
	if (toml_peek(p, 0) == '\r' && toml_peek(p, 1) == '\n') {
		p->pos += 2;
		return true;
	}
	return false;
}

/* Control characters TOML forbids in comments and strings (tab is fine). */
static bool is_control(int c)
{
	return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7F;
}

static int bad_char(sbx_toml_parser *p, int c, const char *where)
{
	if (c == '\r')
		return sbx__toml_fail(p, p->pos, "carriage return not followed by newline %s",
				      where);
	return sbx__toml_fail(p, p->pos, "control character U+%04X %s", (unsigned)c, where);
}

int sbx__toml_skip_comment(sbx_toml_parser *p)
{
	p->pos++; /* '#' */
	for (int c; (c = toml_peek(p, 0)) != -1 && c != '\n'; p->pos++) {
		if (c == '\r' && toml_peek(p, 1) == '\n')
			break;
		if (is_control(c))
			return bad_char(p, c, "in comment");
	}
	return 0;
}

int sbx__toml_skip_ws_nl_comments(sbx_toml_parser *p)
{
	for (;;) {
		sbx__toml_skip_ws(p);
		if (toml_peek(p, 0) == '#') {
			int r = sbx__toml_skip_comment(p);
			if (r < 0)
				return r;
		} else if (!sbx__toml_eat_newline(p)) {
			return 0;
		}
	}
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void put_utf8(sbx_buf *b, uint32_t cp)
{
	char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (char)cp, n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
	}
	sbx__buf_append(b, u, n);
}

/* At '\\' in a basic string: decodes one escape into b. */
static int lex_escape(sbx_toml_parser *p, sbx_buf *b)
{
	size_t at = p->pos;
	int c = toml_peek(p, 1);
	const char *simple = NULL;
	switch (c) {
	case 'b': simple = "\b"; break;
	case 't': simple = "\t"; break;
	case 'n': simple = "\n"; break;
	case 'f': simple = "\f"; break;
	case 'r': simple = "\r"; break;
	case '"': simple = "\""; break;
	case '\\': simple = "\\"; break;
	case 'u':
	case 'U': {
		int digits = c == 'u' ? 4 : 8;
		uint32_t cp = 0;
		for (int i = 0; i < digits; i++) {
			int h = hexval(toml_peek(p, 2 + (size_t)i));
			if (h < 0)
				return sbx__toml_fail(p, at, "expected %d hex digits after \\%c",
						      digits, c);
			cp = (cp << 4) | (uint32_t)h;
		}
		if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return sbx__toml_fail(p, at, "escape \\%c is not a Unicode scalar value",
					      c);
		put_utf8(b, cp);
		p->pos += 2 + (size_t)digits;
		return 0;
	}
	default:
		return sbx__toml_fail(p, at, "invalid escape sequence in string");
	}
	sbx__buf_append(b, simple, 1);
	p->pos += 2;
	return 0;
}

/* Counts the run of quote characters q at pos. */
static size_t quote_run(const sbx_toml_parser *p, char q)
{
	size_t n = 0;
	while (toml_peek(p, n) == q)
		n++;
	return n;
}

/* Single-line basic ("...") or literal ('...') string. */
static int lex_oneline(sbx_toml_parser *p, sbx_buf *b, char q)
{
	size_t start = p->pos++;
	for (;;) {
		int c = toml_peek(p, 0);
		if (c == -1 || c == '\n' || (c == '\r' && toml_peek(p, 1) == '\n'))
			return sbx__toml_fail(p, start, "unterminated string");
		if (c == q) {
			p->pos++;
			return 0;
		}
		if (q == '"' && c == '\\') {
			int r = lex_escape(p, b);
			if (r < 0)
				return r;
			continue;
		}
		if (is_control(c))
			return bad_char(p, c, "in string");
		sbx__buf_append(b, &p->src[p->pos++], 1);
	}
}

/* At a backslash in a multi-line basic string: a line-ending backslash? */
static bool eat_line_continuation(sbx_toml_parser *p)
{
	size_t j = 1;
	while (toml_peek(p, j) == ' ' || toml_peek(p, j) == '\t')
		j++;
	if (toml_peek(p, j) != '\n' && !(toml_peek(p, j) == '\r' && toml_peek(p, j + 1) == '\n'))
		return false;
	p->pos += j;
	for (;;) {
		sbx__toml_skip_ws(p);
		if (!sbx__toml_eat_newline(p))
			return true;
	}
}

/* Multi-line basic ("""...""") or literal ('''...''') string. */
static int lex_multiline(sbx_toml_parser *p, sbx_buf *b, char q)
{
	size_t start = p->pos;
	p->pos += 3;
	sbx__toml_eat_newline(p);
	for (;;) {
		int c = toml_peek(p, 0);
		if (c == -1)
			return sbx__toml_fail(p, start, "unterminated multi-line string");
		if (c == q) {
			size_t n = quote_run(p, q);
			if (n >= 3) {
				if (n > 5)
					return sbx__toml_fail(p, p->pos + 5,
							      "too many quotes closing string");
				sbx__buf_append(b, &p->src[p->pos], n - 3);
				p->pos += n;
				return 0;
			}
			sbx__buf_append(b, &p->src[p->pos], n);
			p->pos += n;
			continue;
		}
		if (q == '"' && c == '\\') {
			if (eat_line_continuation(p))
				continue;
			int r = lex_escape(p, b);
			if (r < 0)
				return r;
			continue;
		}
		if (sbx__toml_eat_newline(p)) {
			sbx__buf_append(b, "\n", 1);
			continue;
		}
		if (is_control(c))
			return bad_char(p, c, "in string");
		sbx__buf_append(b, &p->src[p->pos++], 1);
	}
}

int sbx__toml_lex_string(sbx_toml_parser *p, char **out, size_t *len)
{
	sbx_buf b;
	/* Decoding never grows the text, so the input size bounds the buffer. */
	sbx__buf_init(&b, p->len + 1);
	char q = p->src[p->pos];
	int r = quote_run(p, q) >= 3 ? lex_multiline(p, &b, q) : lex_oneline(p, &b, q);
	if (r < 0) {
		sbx__buf_free(&b);
		return r;
	}
	*out = sbx__buf_steal(&b, len);
	return 0;
}

static bool is_bare(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

int sbx__toml_lex_key(sbx_toml_parser *p, char **out, size_t *len)
{
	int c = toml_peek(p, 0);
	if (c == '"' || c == '\'') {
		if (quote_run(p, (char)c) >= 3)
			return sbx__toml_fail(p, p->pos, "multi-line string cannot be a key");
		sbx_buf b;
		sbx__buf_init(&b, p->len + 1);
		int r = lex_oneline(p, &b, (char)c);
		if (r < 0) {
			sbx__buf_free(&b);
			return r;
		}
		*out = sbx__buf_steal(&b, len);
		return 0;
	}
	size_t start = p->pos;
	while (is_bare(toml_peek(p, 0)))
		p->pos++;
	if (p->pos == start) {
		if (c == -1 || c == '\n' || c == '\r')
			return sbx__toml_fail(p, start, "expected a key");
		return sbx__toml_fail(p, start, "expected a key, got '%s'",
				      c < 0x20 || c >= 0x7F ? "?" : (char[]){(char)c, 0});
	}
	*len = p->pos - start;
	*out = xstrndup(p->src + start, *len);
	return 0;
}
