/* SPDX-License-Identifier: MIT */
/* Small allocations abort on OOM by policy; input-sized data uses sbx_buf. */
#ifndef SBX_UTIL_ALLOC_H
#define SBX_UTIL_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *sbx__xmalloc(size_t n);
void *sbx__xcalloc(size_t n, size_t size);
void *sbx__xrealloc(void *p, size_t n);
char *sbx__xstrdup(const char *s);
char *sbx__xstrndup(const char *s, size_t n);
char *sbx__xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *sbx__xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

#define xmalloc sbx__xmalloc
#define xcalloc sbx__xcalloc
#define xrealloc sbx__xrealloc
#define xstrdup sbx__xstrdup
#define xstrndup sbx__xstrndup
#define xasprintf sbx__xasprintf
#define xvasprintf sbx__xvasprintf

#endif
