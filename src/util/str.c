/* SPDX-License-Identifier: MIT */
/* String vectors, trimming, and the size/duration grammar used by flags. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "alloc.h"
#include "str.h"

size_t sbx__strv_len(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

char **sbx__strv_dup(const char *const *v)
{
	if (!v)
		return NULL;
	size_t n = sbx__strv_len(v);
	char **r = xcalloc(n + 1, sizeof(*r));
	for (size_t i = 0; i < n; i++)
		r[i] = xstrdup(v[i]);
	return r;
}

void sbx__strv_push(char ***v, const char *s)
{
	size_t n = sbx__strv_len((const char *const *)*v);
	*v = xrealloc(*v, (n + 2) * sizeof(**v));
	(*v)[n] = xstrdup(s);
	(*v)[n + 1] = NULL;
}

bool sbx__strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

void sbx__strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

int sbx__strv_find_key(char *const *v, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
	for (int i = 0; v && v[i]; i++)
		if (strncmp(v[i], kv, klen) == 0 && v[i][klen] == '=')
			return i;
	return -1;
}

void sbx__strv_setenv(char ***v, const char *kv)
{
	int i = sbx__strv_find_key(*v, kv);
	if (i < 0) {
		sbx__strv_push(v, kv);
		return;
	}
	free((*v)[i]);
	(*v)[i] = xstrdup(kv);
}

bool sbx__str_startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

char *sbx__str_trim(char *s)
{
	char *p = s;
	while (isspace((unsigned char)*p))
		p++;
	size_t n = strlen(p);
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	memmove(s, p, n);
	s[n] = '\0';
	return s;
}

char *sbx__str_lower(char *s)
{
	for (char *p = s; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return s;
}

int sbx__parse_u64(uint64_t *out, const char *s)
{
	if (!s || !*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Parses "<number><suffix>" where the number may have a fraction. */
static int parse_scaled(double *num, const char **suffix, const char *s)
{
	if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -EINVAL;
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	*num = v;
	*suffix = end;
	return 0;
}

int sbx__parse_size(uint64_t *out, const char *s)
{
	double v;
	const char *suf;
	int r = parse_scaled(&v, &suf, s);
	if (r < 0)
		return r;
	double mul;
	char c = (char)toupper((unsigned char)*suf);
	switch (c) {
	case '\0': mul = 1; break;
	case 'B': mul = 1; break;
	case 'K': mul = 1024.0; break;
	case 'M': mul = 1024.0 * 1024; break;
	case 'G': mul = 1024.0 * 1024 * 1024; break;
	case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
	default: return -EINVAL;
	}
	if (c && c != 'B') {
		suf++;
		if (*suf == 'i')
			suf++;
		if (*suf == 'B' || *suf == 'b')
			suf++;
	} else if (c == 'B') {
		suf++;
	}
	if (*suf)
		return -EINVAL;
	double bytes = v * mul;
	if (bytes > 9.0e18)
		return -ERANGE;
	*out = (uint64_t)bytes;
	return 0;
}

int sbx__parse_duration(double *out, const char *s)
{
	double v;
	const char *suf;
	int r = parse_scaled(&v, &suf, s);
	if (r < 0)
		return r;
	double mul;
	if (!*suf || strcmp(suf, "s") == 0)
		mul = 1;
	else if (strcmp(suf, "ms") == 0)
		mul = 0.001;
	else if (strcmp(suf, "m") == 0 || strcmp(suf, "min") == 0)
		mul = 60;
	else if (strcmp(suf, "h") == 0)
		mul = 3600;
	else if (strcmp(suf, "d") == 0)
		mul = 86400;
	else
		return -EINVAL;
	*out = v * mul;
	return 0;
}

void sbx__random_hex(char *out, size_t n)
{
	unsigned char raw[32];
	size_t need = (n + 1) / 2;
	if (need > sizeof(raw))
		need = sizeof(raw);
	size_t got = 0;
	while (got < need) {
		ssize_t r = getrandom(raw + got, need - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			abort();
		}
		got += (size_t)r;
	}
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n && i / 2 < need; i++)
		out[i] = hex[(i % 2) ? (raw[i / 2] & 15) : (raw[i / 2] >> 4)];
	out[n] = '\0';
}
