/* SPDX-License-Identifier: MIT */
/*
 * The registry client's policy half, which needs no network: where requests
 * go (SBX_REGISTRY_MIRROR), whether plain HTTP is allowed (loopback and
 * SBX_INSECURE_REGISTRIES only), the credentials from a docker config.json key
 * file, and WWW-Authenticate parameter parsing. Secrets are only ever read
 * from the key file and are registered for redaction at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "util/alloc.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/str.h"
#include "ref.h"
#include "registry_int.h"
#include "util/lazy.h"

#define AUTH_FILE_MAX (1u << 20)
#define _cleanup_json_ _cleanup_(json_decrefp)

/* Splits "host:port" / "[v6]:port" / "host": the host part without brackets. Owned. */
static char *host_part(const char *hostport)
{
	if (hostport[0] == '[') {
		const char *end = strchr(hostport, ']');
		return end ? xstrndup(hostport + 1, (size_t)(end - hostport - 1)) : xstrdup(hostport);
	}
	const char *colon = strchr(hostport, ':');
	if (colon && strchr(colon + 1, ':'))
		return xstrdup(hostport); /* bare IPv6 literal */
	return colon ? xstrndup(hostport, (size_t)(colon - hostport)) : xstrdup(hostport);
}

bool sbx__registry_host_is_loopback(const char *host)
{
	unsigned char a[16];
	if (strcasecmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, a) == 1)
		return a[0] == 127;
	if (inet_pton(AF_INET6, host, a) == 1) {
		static const unsigned char one[16] = { [15] = 1 };
		return memcmp(a, one, 16) == 0;
	}
	return false;
}

/* Is HOSTPORT in SBX_INSECURE_REGISTRIES (entries "host:port", or "host" for any port)? */
static bool listed_insecure(const char *hostport, const char *host)
{
	const char *list = sbx__env("SBX_INSECURE_REGISTRIES");
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ", ");
		if (n && ((strlen(hostport) == n && strncasecmp(p, hostport, n) == 0) ||
			  (strlen(host) == n && strncasecmp(p, host, n) == 0)))
			return true;
		p += n;
		p += strspn(p, ", ");
	}
	return false;
}

bool sbx__registry_plain_allowed(const char *hostport)
{
	_cleanup_free_ char *host = host_part(hostport);
	return sbx__registry_host_is_loopback(host) || listed_insecure(hostport, host);
}

/* The URL SBX_REGISTRY_MIRROR maps REGISTRY to ("docker.io=http://127.0.0.1:5000,..."). */
static char *mirror_for(const char *registry)
{
	const char *list = sbx__env("SBX_REGISTRY_MIRROR");
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ",");
		const char *eq = memchr(p, '=', n);
		if (eq) {
			_cleanup_free_ char *key = xstrndup(p, (size_t)(eq - p));
			sbx__str_trim(key);
			bool hit = strcasecmp(key, registry) == 0 ||
				   (sbx__image_ref_is_docker_hub(key) &&
				    sbx__image_ref_is_docker_hub(registry));
			if (hit)
				return sbx__str_trim(xstrndup(eq + 1, n - (size_t)(eq + 1 - p)));
		}
		p += n + (p[n] == ',');
	}
	return NULL;
}

static char *url_part(CURLU *u, CURLUPart what)
{
	char *v = NULL;
	if (curl_url_get(u, what, &v, 0) != CURLUE_OK || !v)
		return NULL;
	char *copy = xstrdup(v);
	curl_free(v);
	return copy;
}

int sbx__registry_resolve_base(struct sbx_registry *c, const char *registry, sbx_error **err)
{
	_cleanup_free_ char *mirror = mirror_for(registry);
	if (!mirror) {
		c->host = xstrdup(registry);
		c->plain_ok = sbx__registry_plain_allowed(registry);
		c->base = xasprintf("%s://%s", c->plain_ok ? "http" : "https", registry);
		return 0;
	}
	if (sbx__lazy_load(&sbx__lazy_curl, err) < 0)
		return -ENOSYS;
	CURLU *u = curl_url();
	if (!u)
		return sbx_error_set(err, -ENOMEM, "SBX_REGISTRY_MIRROR: out of memory");
	_cleanup_free_ char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	if (curl_url_set(u, CURLUPART_URL, mirror, 0) == CURLUE_OK) {
		scheme = url_part(u, CURLUPART_SCHEME);
		host = url_part(u, CURLUPART_HOST);
		port = url_part(u, CURLUPART_PORT);
		path = url_part(u, CURLUPART_PATH);
	}
	curl_url_cleanup(u);
	if (!scheme || !host || (strcmp(scheme, "http") && strcmp(scheme, "https")) ||
	    (path && strcmp(path, "/") && *path))
		return sbx_error_set(err, -EINVAL,
				     "SBX_REGISTRY_MIRROR: '%s' for %s is not an http(s)://host[:port] URL",
				     mirror, registry);
	c->host = port ? xasprintf("%s:%s", host, port) : xstrdup(host);
	c->plain_ok = sbx__registry_plain_allowed(c->host);
	if (strcmp(scheme, "http") == 0 && !c->plain_ok)
		return sbx_error_set(err, -EINVAL,
				     "SBX_REGISTRY_MIRROR: plain http to %s is only allowed for loopback "
				     "registries and hosts in SBX_INSECURE_REGISTRIES",
				     c->host);
	c->base = xasprintf("%s://%s", scheme, c->host);
	return 0;
}

/* "https://Host:5000/v1/" -> "host:5000". Owned. */
static char *auth_key_host(const char *key)
{
	const char *p = key;
	if (sbx__str_startswith(p, "https://"))
		p += 8;
	else if (sbx__str_startswith(p, "http://"))
		p += 7;
	return sbx__str_lower(xstrndup(p, strcspn(p, "/")));
}

static bool key_matches(const char *key, const char *host, bool hub)
{
	_cleanup_free_ char *k = auth_key_host(key);
	if (strcasecmp(k, host) == 0)
		return true;
	return hub && sbx__image_ref_is_docker_hub(k);
}

/* Decodes standard base64; owned NUL-terminated result or NULL when malformed. */
static char *b64_decode(const char *s)
{
	size_t n = strlen(s), cap = sbx__base64_decoded_max(n) + 1, len = 0;
	/* one allocation of the final size: no copies of the secret left by growth */
	char *out = xmalloc(cap);
	if (sbx__base64_decode_to(out, cap - 1, &len, s, n, SBX_B64_STD) < 0 ||
	    memchr(out, '\0', len)) {
		explicit_bzero(out, cap);
		free(out);
		return NULL;
	}
	out[len] = '\0';
	return out;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/* Sets c->basic from one "auths" entry ({"auth": b64} or {"username","password"}). */
static int take_entry(struct sbx_registry *c, json_t *entry, const char *path, sbx_error **err)
{
	const char *auth = json_string_value(json_object_get(entry, "auth"));
	const char *user = json_string_value(json_object_get(entry, "username"));
	const char *pass = json_string_value(json_object_get(entry, "password"));
	char *plain = NULL;
	if (auth && *auth) {
		sbx__redact_add(auth);
		plain = b64_decode(auth);
	} else if (user && *user && pass) {
		sbx__redact_add(pass);
		plain = xasprintf("%s:%s", user, pass);
	} else {
		return 0; /* identity tokens and credential helpers are not supported */
	}
	char *colon = plain ? strchr(plain, ':') : NULL;
	if (!colon || colon == plain) {
		free_secret(plain);
		return sbx_error_set(err, -EINVAL,
				     "auth file %s: the entry for %s is not base64 of 'user:password'",
				     path, c->host);
	}
	sbx__redact_add(plain);
	sbx__redact_add(colon + 1);
	c->basic = sbx__base64_encode(plain, strlen(plain), SBX_B64_STD);
	sbx__redact_add(c->basic);
	free_secret(plain);
	return 0;
}

int sbx__registry_load_credentials(struct sbx_registry *c, bool hub, sbx_error **err)
{
	const char *env = sbx__env("SBX_REGISTRY_AUTH_FILE");
	_cleanup_free_ char *path = NULL;
	if (env && *env) {
		path = xstrdup(env);
		if (access(path, R_OK) < 0)
			return sbx_error_setsys(err, errno == ENOENT ? -ENOENT : -EACCES, errno,
						"SBX_REGISTRY_AUTH_FILE %s", path);
	} else {
		const char *home = sbx__env("HOME");
		if (!home || !*home)
			return 0;
		path = xasprintf("%s/.docker/config.json", home);
		if (access(path, R_OK) < 0)
			return 0;
	}
	char *data = NULL;
	size_t len = 0;
	int r = sbx__read_file(&data, &len, path, AUTH_FILE_MAX, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "auth file");
	json_error_t je;
	_cleanup_json_ json_t *j = json_loadb(data, len, 0, &je);
	explicit_bzero(data, len);
	free(data);
	if (!j)
		/* je.text may quote the file, so only the line is reported */
		return sbx_error_set(err, -EINVAL, "auth file %s: bad JSON at line %d", path, je.line);
	json_t *auths = json_object_get(j, "auths");
	const char *key;
	json_t *entry;
	json_object_foreach(auths, key, entry) {
		if (!json_is_object(entry) || !key_matches(key, c->host, hub))
			continue;
		r = take_entry(c, entry, path, err);
		if (r < 0 || c->basic)
			break;
	}
	if (r == 0)
		c->auth_file = steal_ptr(&path);
	return r;
}

char *sbx__registry_challenge_param(const char *params, const char *key)
{
	size_t klen = strlen(key);
	_cleanup_free_ char *val = xmalloc(strlen(params) + 1);
	const char *p = params;
	while (*p) {
		p += strspn(p, " \t,");
		const char *k = p;
		p += strcspn(p, "=, \t");
		size_t kn = (size_t)(p - k);
		p += strspn(p, " \t");
		if (*p != '=')
			continue;
		p++;
		p += strspn(p, " \t");
		size_t vn = 0;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1])
					p++;
				val[vn++] = *p;
			}
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ',' && *p != ' ' && *p != '\t')
				val[vn++] = *p++;
		}
		val[vn] = '\0';
		if (kn == klen && strncasecmp(k, key, klen) == 0)
			return steal_ptr(&val);
	}
	return NULL;
}
