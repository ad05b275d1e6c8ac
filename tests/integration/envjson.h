/* SPDX-License-Identifier: MIT */
/*
 * The JSON that tests/integration/envhelper needs, and no more: find a member
 * of an object, decode a string or a number, iterate a flat object, and write
 * text escaped (invalid UTF-8 becomes U+FFFD, so a command's raw output is
 * always a valid WebSocket text message). envhelper is a static binary that
 * links no library, hence no jansson. Header-only, static functions.
 */
#ifndef SBX_TEST_ENVJSON_H
#define SBX_TEST_ENVJSON_H

#include <stdlib.h>
#include <string.h>

static const char *jws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/*
 * Decodes the string at P (its opening quote) into OUT (CAP bytes, NUL-
 * terminated; OUT may be NULL to only skip it). Returns the position after
 * the closing quote, or NULL (not a string, bad escape, longer than CAP - 1).
 */
static const char *jstr(const char *p, char *out, size_t cap)
{
	size_t n = 0;
	if (*p != '"')
		return NULL;
	for (p++; *p != '"'; p++) {
		unsigned c = (unsigned char)*p;
		char enc[4];
		size_t k = 1;
		if (c == 0 || c < 0x20)
			return NULL;
		enc[0] = (char)c;
		if (c == '\\') {
			p++;
			switch (*p) {
			case '"': case '\\': case '/': enc[0] = *p; break;
			case 'b': enc[0] = '\b'; break;
			case 'f': enc[0] = '\f'; break;
			case 'n': enc[0] = '\n'; break;
			case 'r': enc[0] = '\r'; break;
			case 't': enc[0] = '\t'; break;
			case 'u': {
				unsigned u, lo;
				if (hex4(p + 1, &u) < 0)
					return NULL;
				p += 4;
				if (u >= 0xD800 && u < 0xDC00 && p[1] == '\\' && p[2] == 'u' &&
				    hex4(p + 3, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
					u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
					p += 6;
				} else if (u >= 0xD800 && u < 0xE000) {
					u = 0xFFFD;
				}
				if (u < 0x80) {
					enc[0] = (char)u;
				} else if (u < 0x800) {
					enc[0] = (char)(0xC0 | u >> 6), enc[1] = (char)(0x80 | (u & 63)), k = 2;
				} else if (u < 0x10000) {
					enc[0] = (char)(0xE0 | u >> 12), enc[1] = (char)(0x80 | (u >> 6 & 63));
					enc[2] = (char)(0x80 | (u & 63)), k = 3;
				} else {
					enc[0] = (char)(0xF0 | u >> 18), enc[1] = (char)(0x80 | (u >> 12 & 63));
					enc[2] = (char)(0x80 | (u >> 6 & 63)), enc[3] = (char)(0x80 | (u & 63)), k = 4;
				}
				break;
			}
			default:
				return NULL;
			}
		}
		if (out) {
			if (n + k >= cap)
				return NULL;
			memcpy(out + n, enc, k);
		}
		n += k;
	}
	if (out)
		out[n] = '\0';
	return p + 1;
}

/* Skips the value at P. Returns the position after it, or NULL when malformed. */
static const char *jskip(const char *p, int depth)
{
	p = jws(p);
	if (depth > 64)
		return NULL;
	if (*p == '"')
		return jstr(p, NULL, 0);
	if (*p == '{' || *p == '[') {
		char end = *p == '{' ? '}' : ']';
		p = jws(p + 1);
		if (*p == end)
			return p + 1;
		for (;;) {
			if (end == '}') {
				p = jstr(p, NULL, 0);
				if (!p || *(p = jws(p)) != ':')
					return NULL;
				p++;
			}
			p = jskip(p, depth + 1);
			if (!p)
				return NULL;
			p = jws(p);
			if (*p == end)
				return p + 1;
			if (*p != ',')
				return NULL;
			p = jws(p + 1);
		}
	}
	if (strncmp(p, "true", 4) == 0 || strncmp(p, "null", 4) == 0)
		return p + 4;
	if (strncmp(p, "false", 5) == 0)
		return p + 5;
	char *e;
	strtod(p, &e);
	return e == p ? NULL : e;
}

/*
 * Iterates the members of the object at *IT: the first call with *IT at the
 * '{', later ones where the last left it. Gives the key (in KEY, CAP bytes)
 * and the value's start. Returns 1 for a member, 0 at the end, -1 when the
 * object is malformed.
 */
static int jnext(const char **it, char *key, size_t cap, const char **val)
{
	const char *p = jws(*it);
	if (*p == '{') {
		p = jws(p + 1);
		if (*p == '}') {
			*it = p;
			return 0;
		}
	} else if (*p == ',') {
		p = jws(p + 1);
	} else if (*p == '}') {
		return 0;
	} else {
		return -1;
	}
	p = jstr(p, key, cap);
	if (!p || *(p = jws(p)) != ':')
		return -1;
	*val = jws(p + 1);
	p = jskip(*val, 0);
	if (!p)
		return -1;
	*it = jws(p);
	return **it == ',' || **it == '}' ? 1 : -1;
}

/* The value of member KEY of the object at OBJ, or NULL. */
static const char *jget(const char *obj, const char *key)
{
	const char *it = jws(obj), *v;
	char k[128];
	if (*it != '{')
		return NULL;
	while (jnext(&it, k, sizeof(k), &v) == 1)
		if (strcmp(k, key) == 0)
			return v;
	return NULL;
}

/* True when the text at P is a whole JSON value (and nothing after it). */
static int jvalid(const char *p)
{
	p = jskip(p, 0);
	return p && *jws(p) == '\0';
}

/* ---- output ----------------------------------------------------------------- */

struct jout {
	char *b;
	size_t n, cap;
};

static void jput(struct jout *o, const char *s, size_t n)
{
	if (n > o->cap - o->n - 1)
		n = o->cap - o->n - 1;
	memcpy(o->b + o->n, s, n);
	o->n += n;
	o->b[o->n] = '\0';
}

static void jputs(struct jout *o, const char *s)
{
	jput(o, s, strlen(s));
}

/* Length of the well-formed UTF-8 sequence at S (N bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t k;
	unsigned min, cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		k = 2, min = 0x80, cp = c & 31;
	else if (c >= 0xE0 && c <= 0xEF)
		k = 3, min = 0x800, cp = c & 15;
	else if (c >= 0xF0 && c <= 0xF4)
		k = 4, min = 0x10000, cp = c & 7;
	else
		return 0;
	if (n < k)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 63);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
		return 0;
	return k;
}

/* Writes S (N bytes) as a JSON string, quotes included. */
static void jputq(struct jout *o, const char *s, size_t n)
{
	jputs(o, "\"");
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		char e[8];
		size_t k = utf8_len((const unsigned char *)s + i, n - i);
		if (k == 0) {
			jputs(o, "\\ufffd");
			i++;
			continue;
		}
		if (c == '"' || c == '\\') {
			e[0] = '\\', e[1] = (char)c;
			jput(o, e, 2);
		} else if (c == '\n') {
			jputs(o, "\\n");
		} else if (c == '\t') {
			jputs(o, "\\t");
		} else if (c < 0x20 || c == 0x7F) {
			static const char hx[] = "0123456789abcdef";
			memcpy(e, "\\u00", 4);
			e[4] = hx[c >> 4], e[5] = hx[c & 15];
			jput(o, e, 6);
		} else {
			jput(o, s + i, k);
		}
		i += k;
	}
	jputs(o, "\"");
}

#endif
