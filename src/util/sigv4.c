/* SPDX-License-Identifier: MIT */
/*
 * AWS SigV4 (util/sigv4.h): canonical request, string to sign, the derived
 * key chain and the signature. Query parameters are sorted as sent (a
 * client sends them encoded already); header values are trimmed and their
 * inner runs of spaces collapsed, names lowercased and sorted, repeated
 * names joined with ','.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "alloc.h"
#include "buf.h"
#include "cleanup.h"
#include "sha256.h"
#include "sigv4.h"
#include "str.h"

#define SIGV4_MAX (1u << 20) /* a canonical request: headers and query of one request */

struct hdr {
	char *name;
	char *value;
};

static int cmp_hdr(const void *a, const void *b)
{
	return strcmp(((const struct hdr *)a)->name, ((const struct hdr *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *sbx__sigv4_uri_encode(const char *s, int keep_slash)
{
	sbx_buf b;
	sbx__buf_init(&b, SIGV4_MAX);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/'))
			sbx__buf_append(&b, p, 1);
		else
			sbx__buf_printf(&b, "%%%02X", *p);
	}
	return sbx__buf_steal(&b, NULL);
}

void sbx__sigv4_now(char out[17])
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* The value trimmed, inner runs of spaces as one. Owned. */
static char *canon_value(const char *v)
{
	while (*v == ' ' || *v == '\t')
		v++;
	char *o = xstrdup(v), *w = o;
	for (const char *p = v; *p; p++) {
		if ((*p == ' ' || *p == '\t') && (w == o || w[-1] == ' '))
			continue;
		*w++ = *p == '\t' ? ' ' : *p;
	}
	while (w > o && w[-1] == ' ')
		w--;
	*w = '\0';
	return o;
}

static void hmac(unsigned char out[32], const void *key, size_t klen, const char *msg)
{
	unsigned int n = 32;
	if (!HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n))
		memset(out, 0, 32); /* libcrypto missing: the caller loaded it first */
}

static void canon_query(sbx_buf *b, const char *query)
{
	if (!query || !*query)
		return;
	_cleanup_free_ char *q = xstrdup(query);
	size_t n = 1;
	for (char *p = q; *p; p++)
		n += *p == '&';
	char **v = xcalloc(n, sizeof(*v));
	size_t k = 0;
	for (char *p = q, *end; p; p = end) {
		end = strchr(p, '&');
		if (end)
			*end++ = '\0';
		if (*p)
			v[k++] = strchr(p, '=') ? xstrdup(p) : xasprintf("%s=", p);
	}
	qsort(v, k, sizeof(*v), cmp_str);
	for (size_t i = 0; i < k; i++) {
		sbx__buf_printf(b, "%s%s", i ? "&" : "", v[i]);
		free(v[i]);
	}
	free(v);
}

int sbx__sigv4_sign(char sig[65], char **canonical_out, char **signed_headers_out, const struct sbx_sigv4 *s,
		    sbx_error **err)
{
	if (!s->amz_date || strlen(s->amz_date) != 16 || s->amz_date[8] != 'T')
		return sbx_error_set(err, -EINVAL, "sigv4: x-amz-date '%s' is not YYYYMMDDTHHMMSSZ",
				     s->amz_date ? s->amz_date : "");
	size_t n = 0;
	while (s->headers && s->headers[n])
		n++;
	struct hdr *h = xcalloc(n ? n : 1, sizeof(*h));
	_cleanup_free_ char *sts = NULL, *k0 = NULL;
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		const char *colon = strchr(s->headers[i], ':');
		if (!colon || colon == s->headers[i]) {
			r = sbx_error_set(err, -EINVAL, "sigv4: header line without a name: '%.40s'", s->headers[i]);
			n = i;
			goto out;
		}
		h[i].name = xstrndup(s->headers[i], (size_t)(colon - s->headers[i]));
		for (char *c = h[i].name; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		h[i].value = canon_value(colon + 1);
	}
	qsort(h, n, sizeof(*h), cmp_hdr);
	sbx_buf cr, sh;
	sbx__buf_init(&cr, SIGV4_MAX);
	sbx__buf_init(&sh, SIGV4_MAX);
	sbx__buf_printf(&cr, "%s\n%s\n", s->method, s->path && *s->path ? s->path : "/");
	canon_query(&cr, s->query);
	sbx__buf_printf(&cr, "\n");
	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(h[i].name, h[i - 1].name) == 0) {
			sbx__buf_printf(&cr, ",%s", h[i].value);
			continue;
		}
		sbx__buf_printf(&cr, "%s%s:%s", i ? "\n" : "", h[i].name, h[i].value);
		sbx__buf_printf(&sh, "%s%s", sh.len ? ";" : "", h[i].name);
	}
	sbx__buf_printf(&cr, "\n\n%s\n%s", sh.data ? sh.data : "", s->payload_hash ? s->payload_hash : SBX_SIGV4_EMPTY_SHA256);
	char crh[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_hex(crh, cr.data, cr.len);
	char day[9];
	memcpy(day, s->amz_date, 8);
	day[8] = '\0';
	sts = xasprintf(SBX_SIGV4_ALGO "\n%s\n%s/%s/%s/aws4_request\n%s", s->amz_date, day,
					      s->region, s->service, crh);
	k0 = xasprintf("AWS4%s", s->secret);
	unsigned char k1[32], k2[32], k3[32], k4[32], out[32];
	hmac(k1, k0, strlen(k0), day);
	hmac(k2, k1, 32, s->region);
	hmac(k3, k2, 32, s->service);
	hmac(k4, k3, 32, "aws4_request");
	hmac(out, k4, 32, sts);
	sbx__hex_encode(sig, out, 32);
	explicit_bzero(k0, strlen(k0));
	explicit_bzero(k1, 32), explicit_bzero(k2, 32), explicit_bzero(k3, 32), explicit_bzero(k4, 32);
	if (canonical_out)
		*canonical_out = sbx__buf_steal(&cr, NULL);
	else
		sbx__buf_free(&cr);
	if (signed_headers_out)
		*signed_headers_out = sh.data ? sbx__buf_steal(&sh, NULL) : xstrdup("");
	else
		sbx__buf_free(&sh);
out:
	for (size_t i = 0; i < n; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	return r;
}
