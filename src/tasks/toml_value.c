/* SPDX-License-Identifier: MIT */
/*
 * TOML scalars: integers (decimal, hex, octal, binary; underscore and leading
 * zero rules; int64 range), floats (fraction, exponent, inf/nan with signs)
 * and the four datetime kinds with calendar validation. Each parser leaves
 * pos just past the token; the caller checks what follows.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/toml_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"

/* Tokens are echoed in messages, cut to a readable length. */
#define SHOWN(n) ((int)((n) > 40 ? 40 : (n)))

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_token_char(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       c == '+' || c == '-' || c == '.';
}

static int digit_value(int c, int radix)
{
	int v;
	if (is_digit(c))
		v = c - '0';
	else if (c >= 'a' && c <= 'f')
		v = c - 'a' + 10;
	else if (c >= 'A' && c <= 'F')
		v = c - 'A' + 10;
	else
		return -1;
	return v < radix ? v : -1;
}

/*
 * Checks s[0..n) is digits of radix with single underscores between digits.
 * Copies the digits (without underscores) to out when non-NULL.
 */
static bool valid_digits(const char *s, size_t n, int radix, sbx_buf *out)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '_') {
			if (i == 0 || i + 1 == n || s[i + 1] == '_')
				return false;
			continue;
		}
		if (digit_value((unsigned char)s[i], radix) < 0)
			return false;
		if (out)
			sbx__buf_append(out, &s[i], 1);
	}
	return true;
}

static int lex_integer(sbx_toml_parser *p, size_t start, const char *s, size_t n,
		       sbx_toml **out)
{
	bool neg = false;
	int radix = 10;
	size_t i = 0;
	if (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-';
		i = 1;
	} else if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
		radix = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
		i = 2;
	}
	if (!valid_digits(s + i, n - i, radix, NULL))
		return sbx__toml_fail(p, start, "invalid number '%.*s'", SHOWN(n), s);
	if (radix == 10 && s[i] == '0' && n - i > 1)
		return sbx__toml_fail(p, start, "leading zeros are not allowed in '%.*s'",
				      SHOWN(n), s);
	uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
	for (; i < n; i++) {
		if (s[i] == '_')
			continue;
		uint64_t d = (uint64_t)digit_value((unsigned char)s[i], radix);
		if (v > (limit - d) / (uint64_t)radix)
			return sbx__toml_fail(p, start, "integer '%.*s' out of range", SHOWN(n), s);
		v = v * (uint64_t)radix + d;
	}
	sbx_toml *node = sbx__toml_new(SBX_TOML_INTEGER);
	node->u.i = neg ? (int64_t)(0 - v) : (int64_t)v;
	*out = node;
	return 0;
}

static void buf_freep(sbx_buf **b)
{
	sbx__buf_free(*b);
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

void sbx__toml_format_float(char *buf, size_t size, double v)
{
	if (isnan(v)) {
		snprintf(buf, size, "nan");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, size, "%sinf", v < 0 ? "-" : "");
		return;
	}
	pthread_once(&c_locale_once, c_locale_init);
	locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (!strpbrk(buf, ".e"))
		snprintf(buf + strlen(buf), size - strlen(buf), ".0");
	if (old)
		uselocale(old);
}

static int lex_float(sbx_toml_parser *p, size_t start, const char *s, size_t n, sbx_toml **out)
{
	size_t i = 0;
	if (s[0] == '+' || s[0] == '-')
		i = 1;
	sbx_toml *node;
	if (n - i == 3 && (memcmp(s + i, "inf", 3) == 0 || memcmp(s + i, "nan", 3) == 0)) {
		node = sbx__toml_new(SBX_TOML_FLOAT);
		node->u.f = s[i] == 'i' ? INFINITY : NAN;
		if (s[0] == '-')
			node->u.f = -node->u.f;
		*out = node;
		return 0;
	}
	/* Split into integer part, fraction and exponent, validating each. */
	size_t int_end = i;
	while (int_end < n && s[int_end] != '.' && s[int_end] != 'e' && s[int_end] != 'E')
		int_end++;
	size_t frac_end = int_end;
	if (frac_end < n && s[frac_end] == '.') {
		frac_end++;
		while (frac_end < n && s[frac_end] != 'e' && s[frac_end] != 'E')
			frac_end++;
	}
	sbx_buf b;
	sbx__buf_init(&b, n + 8);
	_cleanup_(buf_freep) sbx_buf *bp = &b;
	if (s[0] == '-')
		sbx__buf_append(&b, "-", 1);
	bool ok = valid_digits(s + i, int_end - i, 10, &b) &&
		  !(s[i] == '0' && int_end - i > 1);
	if (ok && frac_end > int_end) {
		sbx__buf_append(&b, ".", 1);
		ok = valid_digits(s + int_end + 1, frac_end - int_end - 1, 10, &b);
	}
	if (ok && frac_end < n) {
		size_t e = frac_end + 1;
		sbx__buf_append(&b, "e", 1);
		if (e < n && (s[e] == '+' || s[e] == '-'))
			sbx__buf_append(&b, &s[e++], 1);
		ok = valid_digits(s + e, n - e, 10, &b);
	}
	if (!ok)
		return sbx__toml_fail(p, start, "invalid float '%.*s'", SHOWN(n), s);
	pthread_once(&c_locale_once, c_locale_init);
	errno = 0;
	double v = c_locale ? strtod_l(b.data, NULL, c_locale) : strtod(b.data, NULL);
	if (isinf(v))
		return sbx__toml_fail(p, start, "float '%.*s' out of range", SHOWN(n), s);
	node = sbx__toml_new(SBX_TOML_FLOAT);
	node->u.f = v;
	*out = node;
	return 0;
}

static bool looks_like_date(const sbx_toml_parser *p)
{
	for (size_t i = 0; i < 4; i++)
		if (!is_digit(toml_peek(p, i)))
			return false;
	return toml_peek(p, 4) == '-';
}

static bool looks_like_time(const sbx_toml_parser *p)
{
	return is_digit(toml_peek(p, 0)) && is_digit(toml_peek(p, 1)) && toml_peek(p, 2) == ':';
}

int sbx__toml_lex_scalar(sbx_toml_parser *p, sbx_toml **out)
{
	if (looks_like_date(p) || looks_like_time(p))
		return sbx__toml_lex_datetime(p, out);
	size_t start = p->pos;
	while (is_token_char(toml_peek(p, 0)))
		p->pos++;
	const char *s = p->src + start;
	size_t n = p->pos - start;
	if (n == 0)
		return sbx__toml_fail(p, start, "expected a value");
	bool is_float = false;
	size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
	bool radix = i == 0 && n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b');
	if (!radix)
		for (size_t k = i; k < n; k++)
			if (s[k] == '.' || s[k] == 'e' || s[k] == 'E' || s[k] == 'i' || s[k] == 'n')
				is_float = true;
	return is_float ? lex_float(p, start, s, n, out) : lex_integer(p, start, s, n, out);
}

/* Reads exactly n digits at pos into *v. */
static bool read_digits(sbx_toml_parser *p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		int c = toml_peek(p, 0);
		if (!is_digit(c))
			return false;
		*v = *v * 10 + (c - '0');
		p->pos++;
	}
	return !is_digit(toml_peek(p, 0));
}

static bool eat(sbx_toml_parser *p, char c)
{
	if (toml_peek(p, 0) != c)
		return false;
	p->pos++;
	return true;
}

static int days_in_month(int y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return m == 2 && leap ? 29 : days[m - 1];
}

/* HH:MM:SS[.frac]; appends the fraction digits (max 9) to frac. */
static bool lex_time(sbx_toml_parser *p, sbx_toml_datetime *dt, char frac[10])
{
	if (!read_digits(p, 2, &dt->hour) || !eat(p, ':') || !read_digits(p, 2, &dt->minute) ||
	    !eat(p, ':') || !read_digits(p, 2, &dt->second))
		return false;
	if (dt->hour > 23 || dt->minute > 59 || dt->second > 60)
		return false;
	dt->has_time = true;
	frac[0] = '\0';
	if (!eat(p, '.'))
		return true;
	if (!is_digit(toml_peek(p, 0)))
		return false;
	int nd = 0;
	for (int c; is_digit(c = toml_peek(p, 0)); p->pos++) {
		if (nd < 9) {
			frac[nd++] = (char)c;
			dt->nanosecond = dt->nanosecond * 10 + (c - '0');
		}
	}
	frac[nd] = '\0';
	for (int k = nd; k < 9; k++)
		dt->nanosecond *= 10;
	return true;
}

static bool lex_offset(sbx_toml_parser *p, sbx_toml_datetime *dt, char *sign)
{
	int c = toml_peek(p, 0);
	if (c == 'Z' || c == 'z') {
		p->pos++;
		*sign = 'Z';
		dt->has_offset = true;
		return true;
	}
	if (c != '+' && c != '-')
		return true;
	p->pos++;
	int h, m;
	if (!read_digits(p, 2, &h) || !eat(p, ':') || !read_digits(p, 2, &m) || h > 23 || m > 59)
		return false;
	*sign = (char)c;
	dt->offset_min = (c == '-' ? -1 : 1) * (h * 60 + m);
	dt->has_offset = true;
	return true;
}

int sbx__toml_lex_datetime(sbx_toml_parser *p, sbx_toml **out)
{
	size_t start = p->pos;
	sbx_toml_datetime dt = {0};
	char frac[10] = "", sign = 0;
	if (looks_like_date(p)) {
		if (!read_digits(p, 4, &dt.year) || !eat(p, '-') || !read_digits(p, 2, &dt.month) ||
		    !eat(p, '-') || !read_digits(p, 2, &dt.day))
			return sbx__toml_fail(p, start, "invalid date (expected YYYY-MM-DD)");
		if (dt.month < 1 || dt.month > 12 || dt.day < 1 ||
		    dt.day > days_in_month(dt.year, dt.month))
			return sbx__toml_fail(p, start, "date out of range");
		dt.has_date = true;
		int c = toml_peek(p, 0);
		if (c == 'T' || c == 't' || (c == ' ' && is_digit(toml_peek(p, 1)))) {
			p->pos++;
			if (!lex_time(p, &dt, frac))
				return sbx__toml_fail(p, start, "invalid time in datetime "
						      "(expected HH:MM:SS[.frac] in range)");
			if (!lex_offset(p, &dt, &sign))
				return sbx__toml_fail(p, start, "invalid UTC offset in datetime");
		}
	} else if (!lex_time(p, &dt, frac)) {
		return sbx__toml_fail(p, start, "invalid time (expected HH:MM:SS[.frac] in range)");
	}
	sbx_toml_type type = dt.has_offset ? SBX_TOML_DATETIME
			   : dt.has_date && dt.has_time ? SBX_TOML_DATETIME_LOCAL
			   : dt.has_date ? SBX_TOML_DATE_LOCAL : SBX_TOML_TIME_LOCAL;
	char date_s[48] = "", time_s[64] = "", off_s[32] = "";
	if (dt.has_date)
		snprintf(date_s, sizeof(date_s), "%04d-%02d-%02d%s", dt.year, dt.month, dt.day,
			 dt.has_time ? "T" : "");
	if (dt.has_time)
		snprintf(time_s, sizeof(time_s), "%02d:%02d:%02d%s%s", dt.hour, dt.minute,
			 dt.second, frac[0] ? "." : "", frac);
	if (sign == 'Z')
		snprintf(off_s, sizeof(off_s), "Z");
	else if (sign)
		snprintf(off_s, sizeof(off_s), "%c%02d:%02d", sign, abs(dt.offset_min) / 60,
			 abs(dt.offset_min) % 60);
	sbx_toml *node = sbx__toml_new(type);
	node->u.dt.v = dt;
	node->u.dt.s = xasprintf("%s%s%s", date_s, time_s, off_s);
	*out = node;
	return 0;
}
