/* SPDX-License-Identifier: MIT */
/*
 * Pure pieces of the E2B client: endpoint rules (E2B_API_URL, E2B_SANDBOX_URL,
 * E2B_DOMAIN, the URL scheme override), percent-encoding, RFC 3339 times, and the mapping of HTTP statuses and Connect codes to sbx codes.
 * No network here; tests/unit/providers/e2b covers all of it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/str.h"
#include "e2b_int.h"

static const char *env_or(const char *(*get)(const char *), const char *a, const char *b)
{
	const char *v = get(a);
	if ((!v || !*v) && b)
		v = get(b);
	return v && *v ? v : NULL;
}

static const char *plain_getenv(const char *name)
{
	return sbx__env_dyn(name);
}

static char *strip_slash(const char *s)
{
	char *r = xstrdup(s);
	size_t n = strlen(r);
	while (n > 0 && r[n - 1] == '/')
		r[--n] = '\0';
	return r;
}

void sbx__e2b_cfg_from_env(struct e2b_cfg *c, const char *(*get)(const char *))
{
	if (!get)
		get = plain_getenv;
	memset(c, 0, sizeof(*c));
	const char *scheme = env_or(get, "SBX_E2B_URL_SCHEME", "OPENENV_E2B_URL_SCHEME");
	c->scheme = xstrdup(scheme ? scheme : "https");
	sbx__str_lower(c->scheme);
	size_t sl = strlen(c->scheme);
	if (sl > 3 && strcmp(c->scheme + sl - 3, "://") == 0)
		c->scheme[sl - 3] = '\0';
	const char *domain = env_or(get, "E2B_DOMAIN", NULL);
	c->domain = strip_slash(domain ? domain : E2B_DEFAULT_DOMAIN);
	const char *api = env_or(get, "E2B_API_URL", NULL);
	c->api_url = api ? strip_slash(api) : xasprintf("%s://api.%s", c->scheme, c->domain);
	const char *sbu = env_or(get, "E2B_SANDBOX_URL", NULL);
	c->sandbox_url = sbu ? strip_slash(sbu) : NULL;
}

void sbx__e2b_cfg_clear(struct e2b_cfg *c)
{
	free(c->api_url);
	free(c->sandbox_url);
	free(c->domain);
	free(c->scheme);
	if (c->api_key)
		explicit_bzero(c->api_key, strlen(c->api_key));
	free(c->api_key);
	memset(c, 0, sizeof(*c));
}

char *sbx__e2b_envd_url(const struct e2b_cfg *c, const char *id, const char *resp_domain)
{
	if (c->sandbox_url)
		return xstrdup(c->sandbox_url);
	const char *d = resp_domain && *resp_domain ? resp_domain : c->domain;
	return xasprintf("%s://%d-%s.%s", c->scheme, E2B_ENVD_PORT, id, d);
}

char *sbx__e2b_urlenc(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *r = xmalloc(n * 3 + 1), *o = r;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return r;
}

double sbx__e2b_parse_time(const char *s)
{
	if (!s)
		return 0;
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return 0;
	double frac = 0;
	if (*p == '.') {
		double scale = 0.1;
		for (p++; isdigit((unsigned char)*p); p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	long off = 0;
	if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1;
		int hh = 0, mm = 0;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) >= 1)
			off = sign * (hh * 3600L + mm * 60L);
	}
	return (double)timegm(&tm) - (double)off + frac;
}

/* The server's message: JSON {"message": ...} (or "error"), else the text. */
static char *server_message(const char *body, size_t len)
{
	if (!body || !len)
		return xstrdup("");
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *m = NULL;
	if (json_is_object(j)) {
		m = json_string_value(json_object_get(j, "message"));
		if (!m)
			m = json_string_value(json_object_get(j, "error"));
	}
	char *r = m ? xstrdup(m) : xstrndup(body, len > 300 ? 300 : len);
	json_decref(j);
	for (char *p = r; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return r;
}

static int is_throttle_text(const char *m)
{
	_cleanup_free_ char *l = sbx__str_lower(xstrdup(m));
	return strstr(l, "rate limit") || strstr(l, "too many requests") || strstr(l, "throttl");
}

int sbx__e2b_map_http(long status, const char *body, size_t len, const char *what, sbx_error **err)
{
	if (status >= 200 && status < 300)
		return 0;
	_cleanup_free_ char *m = server_message(body, len);
	int code;
	switch (status) {
	case 401: case 403: code = -EACCES; break;
	case 404: code = -ENOENT; break;
	case 409: code = -EEXIST; break;
	case 400: case 422: code = -EINVAL; break;
	case 429: case 503: code = -EAGAIN; break;
	default: code = -EIO; break;
	}
	if (code != -EAGAIN && is_throttle_text(m))
		code = -EAGAIN;
	sbx_error_set(err, code, "e2b: %s: HTTP %ld%s%s", what, status, *m ? ": " : "", m);
	if (err && *err) {
		(*err)->http_status = (int)status;
		if (!(*err)->provider)
			(*err)->provider = xstrdup("e2b");
	}
	return code;
}

int sbx__e2b_map_connect_code(const char *code)
{
	static const struct { const char *name; int code; } map[] = {
		{ "not_found", -ENOENT }, { "already_exists", -EEXIST },
		{ "invalid_argument", -EINVAL }, { "failed_precondition", -EINVAL },
		{ "out_of_range", -EINVAL }, { "permission_denied", -EACCES },
		{ "unauthenticated", -EACCES }, { "resource_exhausted", -EAGAIN },
		{ "unavailable", -EAGAIN }, { "deadline_exceeded", -ETIMEDOUT },
		{ "canceled", -ECANCELED }, { "unimplemented", -ENOSYS },
	};
	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].name) == 0)
			return map[i].code;
	return -EIO;
}
