/* SPDX-License-Identifier: MIT */
/* Bounded buffers: exceeding the maximum is an error, never an abort. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"

void sbx__buf_init(sbx_buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

static void grow(sbx_buf *b, size_t need)
{
	if (need + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need + 1)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

int sbx__buf_append(sbx_buf *b, const void *data, size_t len)
{
	if (len > b->max - b->len)
		return -E2BIG;
	grow(b, b->len + len);
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

size_t sbx__buf_append_trunc(sbx_buf *b, const void *data, size_t len)
{
	size_t room = b->max - b->len;
	size_t n = len < room ? len : room;
	if (n || !b->data)
		sbx__buf_append(b, data, n);
	return len - n;
}

int sbx__buf_printf(sbx_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	int r = sbx__buf_append(b, s, strlen(s));
	free(s);
	return r;
}

char *sbx__buf_steal(sbx_buf *b, size_t *len)
{
	if (!b->data)
		sbx__buf_append(b, "", 0);
	char *d = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}

void sbx__buf_free(sbx_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
