/* SPDX-License-Identifier: MIT */
/*
 * The registry client's network half: libcurl transfers against the Registry
 * HTTP API v2. Every request goes out anonymously (or with the token we
 * already have); a 401 with a Bearer challenge fetches a token from the realm
 * (with Basic credentials from the key file when there are some) and the
 * request is retried once. Bodies go to a bounded buffer or stream to a file
 * while being hashed; only 2xx bodies reach the sink.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include <sbx/version.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/str.h"
#include "registry_int.h"
#include "store.h"

#define ACCEPT_MANIFESTS                                                                      \
	"Accept: application/vnd.oci.image.index.v1+json, "                                  \
	"application/vnd.oci.image.manifest.v1+json, "                                        \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                         \
	"application/vnd.docker.distribution.manifest.v2+json"
#define TOKEN_MAX (1u << 20)
#define ERRBODY_MAX 2048
#define HINT "; import it with 'sbx image import %s SRC' or bootstrap a Debian image with " \
	     "'sbx image bootstrap %s'"

#define _cleanup_json_ _cleanup_(json_decrefp)

/* One transfer: where a 2xx body goes and what the last response said. */
struct xfer {
	long status;              /* status of the response being received */
	char *www_auth;           /* its WWW-Authenticate */
	char *content_type;       /* its Content-Type */
	sbx_buf *body;            /* 2xx body into memory, or */
	int fd;                   /* into this file (-1: none) */
	EVP_MD_CTX *md;           /* hashes the 2xx body when set */
	uint64_t got, limit;      /* limit 0: none */
	int fail;                 /* why the sink refused: -E2BIG, -EFBIG, -errno */
	sbx_buf errbody;          /* start of a non-2xx body (registry error JSON) */
	sbx_registry_progress_fn progress;
	void *payload;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_header(char *data, size_t size, size_t n, void *p)
{
	struct xfer *x = p;
	size_t len = size * n;
	if (len > 5 && strncmp(data, "HTTP/", 5) == 0) {
		const char *sp = memchr(data, ' ', len);
		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		free(steal_ptr(&x->www_auth));
		free(steal_ptr(&x->content_type));
		return len;
	}
	char **slot = NULL;
	size_t skip = 0;
	if (len > 17 && strncasecmp(data, "WWW-Authenticate:", 17) == 0) {
		slot = &x->www_auth;
		skip = 17;
	} else if (len > 13 && strncasecmp(data, "Content-Type:", 13) == 0) {
		slot = &x->content_type;
		skip = 13;
	}
	if (slot && !*slot)
		*slot = sbx__str_trim(xstrndup(data + skip, len - skip));
	return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *p)
{
	struct xfer *x = p;
	size_t len = size * n;
	if (x->status < 200 || x->status >= 300) {
		sbx__buf_append_trunc(&x->errbody, data, len);
		return len;
	}
	if (x->limit && x->got + len > x->limit) {
		x->fail = -EFBIG;
		return 0;
	}
	x->got += len;
	if (x->md)
		EVP_DigestUpdate(x->md, data, len);
	if (x->body && sbx__buf_append(x->body, data, len) < 0) {
		x->fail = -E2BIG;
		return 0;
	}
	if (!x->body && x->fd >= 0) {
		int r = sbx__write_all(x->fd, data, len);
		if (r < 0) {
			x->fail = r;
			return 0;
		}
	}
	return len;
}

static int on_progress(void *p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = p;
	(void)dltotal, (void)ultotal, (void)ulnow;
	if (x->progress && x->status >= 200 && x->status < 300)
		x->progress(x->payload, (uint64_t)dlnow, x->limit);
	return 0;
}

/* One HTTP GET of URL with optional Accept and Authorization header lines. */
static CURLcode perform(struct sbx_registry *c, const char *url, bool plain, const char *accept,
			const char *authz, struct xfer *x)
{
	CURL *h = c->curl;
	curl_easy_reset(h);
	struct curl_slist *hdrs = NULL;
	if (accept)
		hdrs = curl_slist_append(hdrs, accept);
	if (authz)
		hdrs = curl_slist_append(hdrs, authz);
	const char *protos = plain ? "http,https" : "https";
	c->errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, protos);
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, protos);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "sbx/" SBX_VERSION_STRING);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
	if (x->progress) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	}
	CURLcode rc = curl_easy_perform(h);
	curl_slist_free_all(hdrs);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (status)
		x->status = status;
	return rc;
}

/* Maps a failed transfer to an error naming WHAT and where it went. */
static int transport_error(struct sbx_registry *c, CURLcode rc, struct xfer *x, const char *what,
			   const char *where, sbx_error **err)
{
	const char *why = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
	if (rc == CURLE_COULDNT_CONNECT)
		return sbx_error_set(err, -ECONNREFUSED, "cannot connect to %s: %s" HINT, where, why,
				     c->name, c->name);
	if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY)
		return sbx_error_set(err, -EHOSTUNREACH, "cannot resolve %s: %s" HINT, where, why,
				     c->name, c->name);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return sbx_error_set(err, -ETIMEDOUT, "%s from %s timed out: %s" HINT, what, where,
				     why, c->name, c->name);
	if (rc == CURLE_WRITE_ERROR && x->fail == -E2BIG)
		return sbx_error_set(err, -E2BIG, "%s is larger than %u MiB", what,
				     (unsigned)(x->body->max >> 20));
	if (rc == CURLE_WRITE_ERROR && x->fail == -EFBIG)
		return sbx_error_set(err, -EINVAL, "%s is larger than the %llu bytes the manifest gives",
				     what, (unsigned long long)x->limit);
	if (rc == CURLE_WRITE_ERROR && x->fail)
		return sbx_error_setsys(err, x->fail, -x->fail, "write %s", what);
	if (rc == CURLE_UNSUPPORTED_PROTOCOL)
		return sbx_error_set(err, -EPROTO, "%s: %s (plain http is only used for loopback "
				     "registries and SBX_INSECURE_REGISTRIES)", what, why);
	if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
	    rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM)
		return sbx_error_set(err, -EPROTO, "TLS with %s failed: %s" HINT, where, why, c->name,
				     c->name);
	return sbx_error_set(err, -EIO, "%s from %s: %s", what, where, why);
}

/* "CODE: message" from a registry error body ({"errors":[{"code","message"}]}). Owned. */
static char *registry_reason(struct xfer *x)
{
	json_error_t je;
	_cleanup_json_ json_t *j = x->errbody.len ? json_loadb(x->errbody.data, x->errbody.len, 0, &je)
						   : NULL;
	json_t *e = json_array_get(json_object_get(j, "errors"), 0);
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	if (!code && !msg)
		return xasprintf("HTTP %ld", x->status);
	return xasprintf("HTTP %ld %s%s%s", x->status, code ? code : "", code && msg ? ": " : "",
			 msg ? msg : "");
}

static void set_http_status(sbx_error **err, long status)
{
	if (err && *err)
		(*err)->http_status = (int)status;
}

static int status_error(struct sbx_registry *c, struct xfer *x, const char *what,
			sbx_error **err)
{
	if (x->status >= 200 && x->status < 300)
		return 0;
	_cleanup_free_ char *why = registry_reason(x);
	int r;
	if (x->status == 404)
		r = sbx_error_set(err, -ENOENT, "%s not found in %s on %s (%s)", what, c->repo,
				  c->host, why);
	else if ((x->status == 401 || x->status == 403) && c->basic)
		r = sbx_error_set(err, -EACCES, "%s: access to %s on %s denied with the credentials "
				  "from %s (%s)", what, c->repo, c->host, c->auth_file, why);
	else if (x->status == 401 || x->status == 403)
		r = sbx_error_set(err, -EACCES, "%s: access to %s on %s denied (%s); the repository "
				  "does not exist or needs credentials: add them for %s to "
				  "$SBX_REGISTRY_AUTH_FILE or ~/.docker/config.json",
				  what, c->repo, c->host, why, c->host);
	else if (x->status == 429)
		r = sbx_error_set(err, -EAGAIN, "%s: %s is rate limiting (%s)", what, c->host, why);
	else
		r = sbx_error_set(err, -EIO, "%s from %s: %s", what, c->host, why);
	set_http_status(err, x->status);
	return r;
}

/* Fetches a Bearer token from the challenge's realm and stores it in c->bearer. */
static int fetch_token(struct sbx_registry *c, const char *params, sbx_error **err)
{
	_cleanup_free_ char *realm = sbx__registry_challenge_param(params, "realm");
	_cleanup_free_ char *service = sbx__registry_challenge_param(params, "service");
	_cleanup_free_ char *scope = sbx__registry_challenge_param(params, "scope");
	if (!realm || !*realm)
		return sbx_error_set(err, -EPROTO, "%s sent a Bearer challenge without a realm",
				     c->host);
	bool plain = false;
	if (sbx__str_startswith(realm, "http://")) {
		const char *h = realm + 7;
		_cleanup_free_ char *hostport = xstrndup(h, strcspn(h, "/?#"));
		plain = sbx__registry_plain_allowed(hostport);
		if (!plain)
			return sbx_error_set(err, -EPROTO, "token realm %s is plain http and not on "
					     "loopback or in SBX_INSECURE_REGISTRIES", realm);
	} else if (!sbx__str_startswith(realm, "https://")) {
		return sbx_error_set(err, -EPROTO, "token realm '%s' is not an http(s) URL", realm);
	}
	_cleanup_free_ char *dflt = xasprintf("repository:%s:pull", c->repo);
	char *esc_scope = curl_easy_escape(c->curl, scope ? scope : dflt, 0);
	char *esc_service = service ? curl_easy_escape(c->curl, service, 0) : NULL;
	_cleanup_free_ char *url = xasprintf("%s%cscope=%s%s%s", realm, strchr(realm, '?') ? '&' : '?',
					     esc_scope ? esc_scope : "", esc_service ? "&service=" : "",
					     esc_service ? esc_service : "");
	curl_free(esc_scope);
	curl_free(esc_service);
	_cleanup_free_ char *authz = c->basic ? xasprintf("Authorization: Basic %s", c->basic) : NULL;
	sbx_buf body;
	sbx__buf_init(&body, TOKEN_MAX);
	struct xfer x = { .body = &body, .fd = -1 };
	sbx__buf_init(&x.errbody, ERRBODY_MAX);
	CURLcode rc = perform(c, url, plain, NULL, authz, &x);
	if (authz)
		explicit_bzero(authz, strlen(authz));
	int r = 0;
	if (rc != CURLE_OK) {
		r = transport_error(c, rc, &x, "token", realm, err);
	} else if (x.status == 401 || x.status == 403) {
		if (c->basic)
			r = sbx_error_set(err, -EACCES, "token server %s refused the credentials for "
					  "%s from %s (HTTP %ld)", realm, c->host, c->auth_file, x.status);
		else
			r = sbx_error_set(err, -EACCES, "token server %s refused anonymous access to "
					  "%s (HTTP %ld); add credentials for %s to "
					  "$SBX_REGISTRY_AUTH_FILE or ~/.docker/config.json",
					  realm, c->repo, x.status, c->host);
		set_http_status(err, x.status);
	} else if (x.status < 200 || x.status >= 300) {
		r = sbx_error_set(err, -EIO, "token from %s: HTTP %ld", realm, x.status);
		set_http_status(err, x.status);
	} else {
		json_error_t je;
		_cleanup_json_ json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, &je);
		const char *tok = json_string_value(json_object_get(j, "token"));
		if (!tok || !*tok)
			tok = json_string_value(json_object_get(j, "access_token"));
		if (!tok || !*tok) {
			r = sbx_error_set(err, -EPROTO, "token server %s sent no token", realm);
		} else {
			sbx__redact_add(tok);
			if (c->bearer)
				explicit_bzero(c->bearer, strlen(c->bearer));
			free(c->bearer);
			c->bearer = xstrdup(tok);
		}
	}
	if (body.data)
		explicit_bzero(body.data, body.len);
	sbx__buf_free(&body);
	sbx__buf_free(&x.errbody);
	free(x.www_auth);
	free(x.content_type);
	return r;
}

/* Answers a 401: a Bearer challenge fetches a token, a Basic one switches to Basic. */
static int authenticate(struct sbx_registry *c, struct xfer *x, const char *what, sbx_error **err)
{
	const char *ch = x->www_auth ? x->www_auth : "";
	if (strncasecmp(ch, "Bearer ", 7) == 0)
		return fetch_token(c, ch + 7, err);
	if (strncasecmp(ch, "Basic", 5) == 0 && c->basic && !c->use_basic) {
		c->use_basic = true;
		return 0;
	}
	return status_error(c, x, what, err);
}

/* GET <base>/v2/<repo>/<path>, authenticating once on 401. */
static int request(struct sbx_registry *c, const char *path, const char *accept, struct xfer *x,
		   const char *what, sbx_error **err)
{
	_cleanup_free_ char *url = xasprintf("%s/v2/%s/%s", c->base, c->repo, path);
	for (int attempt = 0;; attempt++) {
		_cleanup_free_ char *authz = NULL;
		if (c->bearer)
			authz = xasprintf("Authorization: Bearer %s", c->bearer);
		else if (c->use_basic && c->basic)
			authz = xasprintf("Authorization: Basic %s", c->basic);
		x->status = 0;
		x->got = 0;
		x->fail = 0;
		x->errbody.len = 0;
		if (x->body)
			x->body->len = 0;
		if (x->md)
			sbx__sha256_reset(x->md);
		CURLcode rc = perform(c, url, c->plain_ok, accept, authz, x);
		if (authz)
			explicit_bzero(authz, strlen(authz));
		if (rc != CURLE_OK)
			return transport_error(c, rc, x, what, c->base, err);
		if (x->status == 401 && attempt == 0) {
			int r = authenticate(c, x, what, err);
			if (r < 0)
				return r;
			continue;
		}
		return status_error(c, x, what, err);
	}
}

static void xfer_clear(struct xfer *x)
{
	free(x->www_auth);
	free(x->content_type);
	sbx__buf_free(&x->errbody);
	if (x->md)
		EVP_MD_CTX_free(x->md);
}

int sbx__registry_get_manifest(struct sbx_registry *c, const char *reference, char **body_out,
			       size_t *len_out, char **type_out, sbx_error **err)
{
	sbx_buf body;
	sbx__buf_init(&body, SBX_IMAGE_JSON_MAX);
	struct xfer x = { .body = &body, .fd = -1 };
	sbx__buf_init(&x.errbody, ERRBODY_MAX);
	_cleanup_free_ char *path = xasprintf("manifests/%s", reference);
	_cleanup_free_ char *what = xasprintf("manifest %s", reference);
	int r = request(c, path, ACCEPT_MANIFESTS, &x, what, err);
	if (r == 0) {
		*body_out = sbx__buf_steal(&body, len_out);
		if (type_out)
			*type_out = x.content_type ? steal_ptr(&x.content_type) : NULL;
	}
	sbx__buf_free(&body);
	xfer_clear(&x);
	return r;
}

int sbx__registry_get_blob_buf(struct sbx_registry *c, const char *digest, size_t max,
			       char **body_out, size_t *len_out, sbx_error **err)
{
	sbx_buf body;
	sbx__buf_init(&body, max);
	struct xfer x = { .body = &body, .fd = -1 };
	sbx__buf_init(&x.errbody, ERRBODY_MAX);
	_cleanup_free_ char *path = xasprintf("blobs/%s", digest);
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	int r = request(c, path, NULL, &x, what, err);
	if (r == 0) {
		_cleanup_free_ char *got = sbx__image_sha256_buf(body.data ? body.data : "", body.len);
		if (strcmp(got, digest) != 0) {
			r = sbx_error_set(err, -EINVAL, "blob %s has digest %s", digest, got);
		} else {
			*body_out = sbx__buf_steal(&body, len_out);
		}
	}
	sbx__buf_free(&body);
	xfer_clear(&x);
	return r;
}

int sbx__registry_get_blob_file(struct sbx_registry *c, const char *digest, uint64_t size,
				int fd, sbx_registry_progress_fn progress, void *payload,
				sbx_error **err)
{
	struct xfer x = { .fd = fd, .limit = size, .progress = progress, .payload = payload };
	sbx__buf_init(&x.errbody, ERRBODY_MAX);
	x.md = sbx__sha256_new();
	_cleanup_free_ char *path = xasprintf("blobs/%s", digest);
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	int r = request(c, path, NULL, &x, what, err);
	if (r == 0 && size && x.got != size)
		r = sbx_error_set(err, -EINVAL, "blob %s has %llu bytes, the manifest says %llu",
				  digest, (unsigned long long)x.got, (unsigned long long)size);
	if (r == 0) {
		char hex[SBX_SHA256_HEX_LEN + 1];
		sbx__sha256_final_hex(x.md, hex);
		if (strcmp(hex, digest + 7) != 0)
			r = sbx_error_set(err, -EINVAL, "blob %s has digest sha256:%s", digest, hex);
	}
	xfer_clear(&x);
	return r;
}

int sbx__registry_open(struct sbx_registry **out, const struct sbx_image_ref *ref,
		       const char *name, sbx_error **err)
{
	pthread_once(&curl_once, curl_init_once);
	struct sbx_registry *c = xcalloc(1, sizeof(*c));
	c->name = xstrdup(name);
	c->repo = xstrdup(ref->repository);
	int r = sbx__registry_resolve_base(c, ref->registry, err);
	if (r == 0)
		r = sbx__registry_load_credentials(c, sbx__image_ref_is_docker_hub(c->host), err);
	if (r == 0 && !(c->curl = curl_easy_init()))
		r = sbx_error_set(err, -ENOMEM, "curl: cannot create a handle");
	if (r < 0) {
		sbx__registry_free(c);
		return r;
	}
	*out = c;
	return 0;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void sbx__registry_free(struct sbx_registry *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->name);
	free(c->host);
	free(c->base);
	free(c->repo);
	free(c->auth_file);
	free_secret(c->basic);
	free_secret(c->bearer);
	free(c);
}

const char *sbx__registry_base(const struct sbx_registry *c)
{
	return c->base;
}
