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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/str.h"
#include "registry_int.h"
#include "store.h"
#include "util/lazy.h"

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
	enum sbx_http_fail why;   /* how the transfer failed */
	char error[256];          /* and what the client said */
	sbx_buf errbody;          /* start of a non-2xx body (registry error JSON) */
	sbx_registry_progress_fn progress;
	void *payload;
};

static void on_header(sbx_http_req *rq, const char *name, size_t nl, const char *v, size_t vl)
{
	struct xfer *x = rq->payload;
	if (!name) {
		/* a new response (after a redirect): its headers replace the old */
		x->status = rq->status;
		free(steal_ptr(&x->www_auth));
		free(steal_ptr(&x->content_type));
		return;
	}
	char **slot = NULL;
	if (nl == 16 && strncasecmp(name, "WWW-Authenticate", 16) == 0)
		slot = &x->www_auth;
	else if (nl == 12 && strncasecmp(name, "Content-Type", 12) == 0)
		slot = &x->content_type;
	if (slot && !*slot)
		*slot = xstrndup(v, vl);
}

static int on_body(sbx_http_req *rq, const char *data, size_t len)
{
	struct xfer *x = rq->payload;
	if (x->status < 200 || x->status >= 300) {
		sbx__buf_append_trunc(&x->errbody, data, len);
		return 0;
	}
	if (x->limit && x->got + len > x->limit)
		return x->fail = -EFBIG;
	x->got += len;
	if (x->md)
		EVP_DigestUpdate(x->md, data, len);
	if (x->body && sbx__buf_append(x->body, data, len) < 0)
		return x->fail = -E2BIG;
	if (!x->body && x->fd >= 0) {
		int r = sbx__write_all(x->fd, data, len);
		if (r < 0)
			return x->fail = r;
	}
	return 0;
}

static void on_progress(sbx_http_req *rq, uint64_t received)
{
	struct xfer *x = rq->payload;
	if (x->status >= 200 && x->status < 300)
		x->progress(x->payload, received, x->limit);
}

/* One HTTP GET of URL with optional Accept and Authorization header lines
 * (redirects followed, to http only when PLAIN). @return 0 or <0 (see x->why). */
static int perform(const char *url, bool plain, const char *accept, const char *authz,
		   struct xfer *x)
{
	const char *hdrs[3] = { 0 };
	size_t n = 0;
	if (accept)
		hdrs[n++] = accept;
	if (authz)
		hdrs[n++] = authz;
	sbx_http_req rq = { .url = url, .headers = hdrs, .protocols = plain ? "http,https" : "https",
			    .max_redirects = 5, .connect_timeout_ms = 30000, .low_speed_time_s = 60,
			    .on_data = on_body, .on_header = on_header,
			    .on_progress = x->progress ? on_progress : NULL, .payload = x };
	int r = sbx__http_perform(&rq, NULL);
	if (rq.status)
		x->status = rq.status;
	x->why = rq.fail;
	snprintf(x->error, sizeof(x->error), "%s", rq.error);
	return r;
}

/* Maps a failed transfer to an error naming WHAT and where it went. */
static int transport_error(struct sbx_registry *c, struct xfer *x, const char *what,
			   const char *where, sbx_error **err)
{
	const char *why = x->error;
	if (x->why == SBX_HTTP_CONNECT)
		return sbx_error_set(err, -ECONNREFUSED, "cannot connect to %s: %s" HINT, where, why,
				     c->name, c->name);
	if (x->why == SBX_HTTP_RESOLVE)
		return sbx_error_set(err, -EHOSTUNREACH, "cannot resolve %s: %s" HINT, where, why,
				     c->name, c->name);
	if (x->why == SBX_HTTP_TIMEOUT)
		return sbx_error_set(err, -ETIMEDOUT, "%s from %s timed out: %s" HINT, what, where,
				     why, c->name, c->name);
	if (x->fail == -E2BIG)
		return sbx_error_set(err, -E2BIG, "%s is larger than %u MiB", what,
				     (unsigned)(x->body->max >> 20));
	if (x->fail == -EFBIG)
		return sbx_error_set(err, -EINVAL, "%s is larger than the %llu bytes the manifest gives",
				     what, (unsigned long long)x->limit);
	if (x->fail)
		return sbx_error_setsys(err, x->fail, -x->fail, "write %s", what);
	if (x->why == SBX_HTTP_SCHEME)
		return sbx_error_set(err, -EPROTO, "%s: %s (plain http is only used for loopback "
				     "registries and SBX_INSECURE_REGISTRIES)", what, why);
	if (x->why == SBX_HTTP_TLS)
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
	_cleanup_free_ char *esc_scope = sbx__http_escape(scope ? scope : dflt);
	_cleanup_free_ char *esc_service = service ? sbx__http_escape(service) : NULL;
	_cleanup_free_ char *url = xasprintf("%s%cscope=%s%s%s", realm, strchr(realm, '?') ? '&' : '?',
					     esc_scope, esc_service ? "&service=" : "",
					     esc_service ? esc_service : "");
	_cleanup_free_ char *authz = c->basic ? xasprintf("Authorization: Basic %s", c->basic) : NULL;
	sbx_buf body;
	sbx__buf_init(&body, TOKEN_MAX);
	struct xfer x = { .body = &body, .fd = -1 };
	sbx__buf_init(&x.errbody, ERRBODY_MAX);
	int r = perform(url, plain, NULL, authz, &x);
	if (authz)
		explicit_bzero(authz, strlen(authz));
	if (r < 0) {
		r = transport_error(c, &x, "token", realm, err);
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
		int rc = perform(url, c->plain_ok, accept, authz, x);
		if (authz)
			explicit_bzero(authz, strlen(authz));
		if (rc < 0)
			return transport_error(c, x, what, c->base, err);
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
	if (sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
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
	struct sbx_registry *c = xcalloc(1, sizeof(*c));
	c->name = xstrdup(name);
	c->repo = xstrdup(ref->repository);
	int r = sbx__registry_resolve_base(c, ref->registry, err);
	if (r == 0)
		r = sbx__registry_load_credentials(c, sbx__image_ref_is_docker_hub(c->host), err);
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
	free(c->name);
	free(c->host);
	free(c->base);
	free(c->repo);
	free(c->auth_file);
	free_secret(c->basic);
	free_secret(c->bearer);
	free(c);
}
