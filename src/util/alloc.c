/* SPDX-License-Identifier: MIT */
/*
 * The only place raw malloc/realloc are called. Small allocations abort on
 * OOM: a sandbox runtime that cannot allocate 100 bytes has no sane way on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static void oom(size_t n)
{
	fprintf(stderr, "sbx: out of memory allocating %zu bytes\n", n);
	abort();
}

void *sbx__xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *sbx__xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom(n * size);
	return p;
}

void *sbx__xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		oom(n);
	return q;
}

char *sbx__xstrdup(const char *s)
{
	return sbx__xstrndup(s, strlen(s));
}

char *sbx__xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = sbx__xmalloc(len + 1);
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *sbx__xvasprintf(const char *fmt, va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		oom(strlen(fmt));
	return s;
}

char *sbx__xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = sbx__xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}
