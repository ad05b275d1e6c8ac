/* SPDX-License-Identifier: MIT */
/* A strict, bounded HTTP/1.1 request-head parser (see http.h). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static const char *find_crlfcrlf(const char *buf, size_t n)
{
	for (size_t i = 3; i < n; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return buf + i + 1;
	return NULL;
}

static int copy_field(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return -E2BIG;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

/* True when the comma-separated list S (N bytes) has TOKEN, case-insensitively. */
static int has_token(const char *s, size_t n, const char *token)
{
	size_t tl = strlen(token), i = 0;
	while (i < n) {
		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
			i++;
		size_t st = i;
		while (i < n && s[i] != ',' && s[i] != ';')
			i++;
		size_t e = i;
		while (e > st && (s[e - 1] == ' ' || s[e - 1] == '\t'))
			e--;
		if (e - st == tl && strncasecmp(s + st, token, tl) == 0)
			return 1;
		while (i < n && s[i] != ',')
			i++;
	}
	return 0;
}

static int header(struct oe_http_req *r, const char *name, size_t nl, const char *v, size_t vl)
{
#define IS(lit) (nl == sizeof(lit) - 1 && strncasecmp(name, lit, nl) == 0)
	if (IS("content-length")) {
		long long x = 0;
		if (vl == 0 || vl > 15 || r->content_length >= 0)
			return -EINVAL;
		for (size_t i = 0; i < vl; i++) {
			if (v[i] < '0' || v[i] > '9')
				return -EINVAL;
			x = x * 10 + (v[i] - '0');
		}
		r->content_length = x;
	} else if (IS("transfer-encoding")) {
		r->chunked = 1;
	} else if (IS("upgrade")) {
		r->upgrade_ws = has_token(v, vl, "websocket");
	} else if (IS("connection")) {
		r->conn_upgrade |= has_token(v, vl, "upgrade");
		if (has_token(v, vl, "close"))
			r->conn_close = 1;
		else if (has_token(v, vl, "keep-alive"))
			r->conn_close = 0;
	} else if (IS("sec-websocket-key")) {
		return copy_field(r->ws_key, sizeof(r->ws_key), v, vl);
	} else if (IS("sec-websocket-version")) {
		return copy_field(r->ws_version, sizeof(r->ws_version), v, vl);
	} else if (IS("sec-websocket-extensions")) {
		r->ws_deflate |= has_token(v, vl, "permessage-deflate");
	}
#undef IS
	return 0;
}

long sbx__oe_http_parse(struct oe_http_req *r, const char *buf, size_t n)
{
	size_t scan = n < OE_HTTP_HEADERS_MAX ? n : OE_HTTP_HEADERS_MAX;
	const char *end = find_crlfcrlf(buf, scan);
	if (!end)
		return n >= OE_HTTP_HEADERS_MAX ? -E2BIG : 0;
	memset(r, 0, sizeof(*r));
	r->content_length = -1;

	/* Request line: METHOD SP TARGET SP HTTP/1.x CRLF */
	const char *p = buf, *eol = memchr(p, '\r', (size_t)(end - p));
	const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
	if (!sp1 || sp1 == p)
		return -EINVAL;
	const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1 || sp1[1] != '/')
		return -EINVAL;
	if (eol - sp2 - 1 != 8 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    (sp2[8] != '0' && sp2[8] != '1'))
		return -EINVAL;
	r->minor = sp2[8] - '0';
	r->conn_close = r->minor == 0;
	for (const char *c = p; c < sp1; c++)
		if (*c < 'A' || *c > 'Z')
			return -EINVAL;
	if (copy_field(r->method, sizeof(r->method), p, (size_t)(sp1 - p)) < 0)
		return -EINVAL;
	const char *q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
	const char *pend = q ? q : sp2;
	if (copy_field(r->path, sizeof(r->path), sp1 + 1, (size_t)(pend - sp1 - 1)) < 0)
		return -E2BIG;
	for (const char *c = sp1 + 1; c < sp2; c++)
		if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7F)
			return -EINVAL;

	/* Header fields: NAME ":" OWS VALUE OWS CRLF; no obsolete line folding. */
	p = eol + 2;
	while (p < end - 2) {
		eol = memchr(p, '\r', (size_t)(end - p));
		if (!eol || eol[1] != '\n')
			return -EINVAL;
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon || colon == p)
			return -EINVAL;
		for (const char *c = p; c < colon; c++)
			if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7F)
				return -EINVAL;
		const char *v = colon + 1, *ve = eol;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		for (const char *c = v; c < ve; c++)
			if (*c == '\0' || *c == '\n')
				return -EINVAL;
		int rc = header(r, p, (size_t)(colon - p), v, (size_t)(ve - v));
		if (rc < 0)
			return rc;
		p = eol + 2;
	}
	return (long)(end - buf);
}

const char *sbx__oe_http_reason(int status)
{
	switch (status) {
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 422: return "Unprocessable Content";
	case 426: return "Upgrade Required";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}
