/* SPDX-License-Identifier: MIT */
/* Growable byte buffer with a hard maximum fixed at init (input-sized data). */
#ifndef SBX_UTIL_BUF_H
#define SBX_UTIL_BUF_H

#include <stddef.h>

typedef struct sbx_buf {
	char *data;   /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
	size_t max;   /* appends past this fail with -E2BIG */
} sbx_buf;

void sbx__buf_init(sbx_buf *b, size_t max);
/* Appends; returns 0 or -E2BIG (nothing appended past max). */
int sbx__buf_append(sbx_buf *b, const void *data, size_t len);
/* Appends as much as fits; returns the number of bytes dropped. */
size_t sbx__buf_append_trunc(sbx_buf *b, const void *data, size_t len);
int sbx__buf_printf(sbx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands out the data (owned by caller) and resets the buffer. */
char *sbx__buf_steal(sbx_buf *b, size_t *len);
void sbx__buf_free(sbx_buf *b);

#endif
