/* SPDX-License-Identifier: MIT */
/* libcurl, loaded at first use: the functions sbx calls (see lazy.h). */
#include <stdarg.h>
#include <stddef.h>

#include <curl/curl.h>

#include "lazy.h"

/* The Debian 12 soname (stable for a decade) and its package. */
sbx__lazy_lib sbx__lazy_curl = SBX_LAZY_LIB_INIT("libcurl.so.4", "libcurl", "libcurl4");

#define FAIL CURLE_FAILED_INIT
#define UFAIL CURLUE_OUT_OF_MEMORY

SBX_LAZY_VOID(sbx__lazy_curl, curl_easy_cleanup, (CURL *a0), (a0))
SBX_LAZY(sbx__lazy_curl, char *, NULL, curl_easy_escape, (CURL *a0, const char *a1, int a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_curl, CURL *, NULL, curl_easy_init, (void), ())
SBX_LAZY(sbx__lazy_curl, CURLcode, FAIL, curl_easy_perform, (CURL *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_curl, curl_easy_reset, (CURL *a0), (a0))
SBX_LAZY(sbx__lazy_curl, const char *, NULL, curl_easy_strerror, (CURLcode a0), (a0))
SBX_LAZY_VOID(sbx__lazy_curl, curl_free, (void *a0), (a0))
SBX_LAZY(sbx__lazy_curl, CURLcode, FAIL, curl_global_init, (long int a0), (a0))
SBX_LAZY(sbx__lazy_curl, CURLSH *, NULL, curl_share_init, (void), ())
SBX_LAZY(sbx__lazy_curl, struct curl_slist *, NULL, curl_slist_append, (struct curl_slist *a0, const char *a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_curl, curl_slist_free_all, (struct curl_slist *a0), (a0))
SBX_LAZY(sbx__lazy_curl, CURLU *, NULL, curl_url, (void), ())
SBX_LAZY_VOID(sbx__lazy_curl, curl_url_cleanup, (CURLU *a0), (a0))
SBX_LAZY(sbx__lazy_curl, CURLUcode, UFAIL, curl_url_get, (CURLU *a0, CURLUPart a1, char **a2, unsigned int a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_curl, CURLUcode, UFAIL, curl_url_set, (CURLU *a0, CURLUPart a1, const char *a2, unsigned int a3), (a0, a1, a2, a3))

/* The variadic three take one argument whose type the option decides, as
 * libcurl itself reads it. */
#define RESOLVE(name)                                                                   \
	static __typeof__(name) *fp;                                                    \
	__typeof__(name) *f = __atomic_load_n(&fp, __ATOMIC_ACQUIRE);                   \
	if (!f) {                                                                       \
		f = (__typeof__(name) *)sbx__lazy_sym(&sbx__lazy_curl, #name);          \
		if (!f)                                                                 \
			return FAIL;                                                    \
		__atomic_store_n(&fp, f, __ATOMIC_RELEASE);                             \
	}

__attribute__((weak, visibility("hidden"))) CURLcode(curl_easy_setopt)(CURL *h, CURLoption opt, ...)
{
	RESOLVE(curl_easy_setopt);
	va_list ap;
	va_start(ap, opt);
	CURLcode r;
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		r = f(h, opt, va_arg(ap, long));
	else if (opt >= CURLOPTTYPE_OFF_T && opt < CURLOPTTYPE_BLOB)
		r = f(h, opt, va_arg(ap, curl_off_t));
	else /* objects, strings, callbacks, blobs: one pointer */
		r = f(h, opt, va_arg(ap, void *));
	va_end(ap);
	return r;
}

__attribute__((weak, visibility("hidden"))) CURLcode(curl_easy_getinfo)(CURL *h, CURLINFO info, ...)
{
	RESOLVE(curl_easy_getinfo);
	va_list ap;
	va_start(ap, info);
	CURLcode r = f(h, info, va_arg(ap, void *));
	va_end(ap);
	return r;
}

__attribute__((weak, visibility("hidden"))) CURLSHcode(curl_share_setopt)(CURLSH *sh, CURLSHoption opt, ...)
{
#undef FAIL
#define FAIL CURLSHE_NOT_BUILT_IN
	RESOLVE(curl_share_setopt);
	va_list ap;
	va_start(ap, opt);
	CURLSHcode r;
	if (opt == CURLSHOPT_SHARE || opt == CURLSHOPT_UNSHARE)
		r = f(sh, opt, va_arg(ap, int));
	else
		r = f(sh, opt, va_arg(ap, void *));
	va_end(ap);
	return r;
}
