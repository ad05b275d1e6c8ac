/* SPDX-License-Identifier: MIT */
/*
 * The shared libcurl client (see http.h): global init once, one share handle
 * (connections, DNS, TLS sessions) guarded by a mutex per data kind, and a
 * pool of easy handles, so the number of open descriptors is bounded by the
 * peak concurrency rather than by the number of requests.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include <sbx/version.h>

#include "alloc.h"
#include "http.h"
#include "lazy.h"
#include "log.h"

#define POOL_MAX 16

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLSH *share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_MAX];
static size_t n_pool;
static char user_agent[64];

static void lock_cb(CURL *h, curl_lock_data d, curl_lock_access a, void *u)
{
	(void)h, (void)a, (void)u;
	pthread_mutex_lock(&share_locks[d]);
}

static void unlock_cb(CURL *h, curl_lock_data d, void *u)
{
	(void)h, (void)u;
	pthread_mutex_unlock(&share_locks[d]);
}

static void setup(void)
{
	/* Not thread-safe in libcurl itself, hence the pthread_once. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(user_agent, sizeof(user_agent), "sbx/%s", sbx_version_string());
	for (size_t i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&share_locks[i], NULL);
	share = curl_share_init();
	if (!share)
		return; /* requests still work, each with its own caches */
	curl_share_setopt(share, CURLSHOPT_LOCKFUNC, lock_cb);
	curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, unlock_cb);
	curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

static CURL *handle_get(void)
{
	pthread_once(&once, setup);
	CURL *h = NULL;
	pthread_mutex_lock(&pool_lock);
	if (n_pool)
		h = pool[--n_pool];
	pthread_mutex_unlock(&pool_lock);
	return h ? h : curl_easy_init();
}

static void handle_put(CURL *h)
{
	curl_easy_reset(h);
	pthread_mutex_lock(&pool_lock);
	if (n_pool < POOL_MAX) {
		pool[n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

char *sbx__http_url_for_log(const char *url)
{
	return xstrndup(url, strcspn(url, "?#"));
}

void sbx__http_headers_free(char **lines)
{
	for (size_t i = 0; lines && lines[i]; i++) {
		explicit_bzero(lines[i], strlen(lines[i]));
		free(lines[i]);
	}
	free(lines);
}

char *sbx__http_escape(const char *s)
{
	/* RFC 3986 unreserved characters stay, every other byte is %XX: what
	 * curl_easy_escape does, without loading libcurl for it. */
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *r = xcalloc(1, 3 * n + 1), *o = r;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	return r;
}

/* Header names whose values are credentials. */
static int is_secret_header(const char *name, size_t n)
{
	static const char *const words[] = { "auth", "key", "token", "secret", "cookie", "signature" };
	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t wl = strlen(words[w]);
		for (size_t i = 0; i + wl <= n; i++)
			if (strncasecmp(name + i, words[w], wl) == 0)
				return 1;
	}
	return 0;
}

/* Registers the credential of a "Name: value" line for redaction, so it
 * cannot surface in any log or error even if something echoes it. */
static void redact_header(const char *line)
{
	const char *colon = strchr(line, ':');
	if (!colon || !is_secret_header(line, (size_t)(colon - line)))
		return;
	const char *v = colon + 1;
	v += strspn(v, " \t");
	const char *sp = strchr(v, ' ');
	/* "Basic xyz", "Bearer xyz": the credential is after the scheme */
	sbx__redact_add(sp ? sp + 1 : v);
}

static struct curl_slist *header_list(const char *const *lines)
{
	struct curl_slist *h = NULL;
	for (size_t i = 0; lines && lines[i]; i++) {
		redact_header(lines[i]);
		struct curl_slist *n = curl_slist_append(h, lines[i]);
		if (!n)
			abort(); /* out of memory, by policy */
		h = n;
	}
	return h;
}

static void header_list_free(struct curl_slist *h)
{
	for (struct curl_slist *p = h; p; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
}

/* What the callbacks share with perform. */
struct xfer {
	sbx_http_req *rq;
	int cb_code;       /* a callback's failure */
	int overflow;      /* resp passed its maximum */
};

static size_t on_write(char *data, size_t sz, size_t nm, void *u)
{
	struct xfer *x = u;
	sbx_http_req *rq = x->rq;
	size_t n = sz * nm;
	if (rq->on_data) {
		int r = rq->on_data(rq, data, n);
		if (r < 0) {
			x->cb_code = r;
			return 0;
		}
		return n;
	}
	if (rq->resp && sbx__buf_append(rq->resp, data, n) < 0) {
		x->overflow = 1;
		return 0;
	}
	return n;
}

static size_t on_header(char *data, size_t sz, size_t nm, void *u)
{
	struct xfer *x = u;
	sbx_http_req *rq = x->rq;
	size_t n = sz * nm;
	if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
		const char *sp = memchr(data, ' ', n);
		rq->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		if (rq->on_header)
			rq->on_header(rq, NULL, 0, NULL, 0);
		return n;
	}
	const char *colon = memchr(data, ':', n);
	if (!rq->on_header || !colon)
		return n;
	size_t nl = (size_t)(colon - data);
	const char *v = colon + 1;
	size_t vl = n - nl - 1;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	rq->on_header(rq, data, nl, v, vl);
	return n;
}

static size_t on_read(char *buf, size_t sz, size_t nm, void *u)
{
	struct xfer *x = u;
	long r = x->rq->read(x->rq, buf, sz * nm);
	if (r < 0) {
		x->cb_code = (int)r;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)r;
}

static int on_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = u;
	(void)dltotal, (void)ultotal, (void)ulnow;
	if (x->rq->cancel && *x->rq->cancel)
		return 1;
	if (x->rq->on_progress)
		x->rq->on_progress(x->rq, (uint64_t)dlnow);
	return 0;
}

static void set_options(CURL *h, sbx_http_req *rq, struct xfer *x, struct curl_slist *hdrs,
			char *errbuf)
{
	const char *method = rq->method ? rq->method : "GET";
	const char *protos = rq->protocols ? rq->protocols : "http,https";
	if (share)
		curl_easy_setopt(h, CURLOPT_SHARE, share);
	curl_easy_setopt(h, CURLOPT_URL, rq->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, user_agent);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 rq->connect_timeout_ms > 0 ? rq->connect_timeout_ms : SBX_HTTP_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, protos);
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, protos);
	if (rq->max_redirects > 0) {
		curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(h, CURLOPT_MAXREDIRS, rq->max_redirects);
	}
	if (rq->timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
	if (rq->low_speed_time_s > 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, rq->low_speed_time_s);
	}
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	if (rq->cancel || rq->on_progress) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	}
	if (rq->read) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_len);
	} else if (rq->body || strcmp(method, "GET") != 0) {
		if (strcmp(method, "HEAD") == 0) {
			curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
		} else {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)(rq->body ? rq->body_len : 0));
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		}
	}
}

static enum sbx_http_fail classify(CURLcode rc)
{
	if (rc == CURLE_OK)
		return SBX_HTTP_OK;
	if (rc == CURLE_COULDNT_CONNECT)
		return SBX_HTTP_CONNECT;
	if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY)
		return SBX_HTTP_RESOLVE;
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return SBX_HTTP_TIMEOUT;
	if (rc == CURLE_UNSUPPORTED_PROTOCOL)
		return SBX_HTTP_SCHEME;
	if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
	    rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM)
		return SBX_HTTP_TLS;
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return SBX_HTTP_CANCEL;
	if (rc == CURLE_WRITE_ERROR || rc == CURLE_READ_ERROR)
		return SBX_HTTP_SINK;
	return SBX_HTTP_OTHER;
}

int sbx__http_perform(sbx_http_req *rq, sbx_error **err)
{
	const char *method = rq->method ? rq->method : "GET";
	rq->status = 0;
	rq->fail = SBX_HTTP_OK;
	rq->error[0] = '\0';
	if (sbx__lazy_load(&sbx__lazy_curl, err) < 0) {
		rq->fail = SBX_HTTP_OTHER;
		snprintf(rq->error, sizeof(rq->error), "libcurl cannot be loaded");
		return -ENOSYS;
	}
	CURL *h = handle_get();
	if (!h) {
		rq->fail = SBX_HTTP_OTHER;
		snprintf(rq->error, sizeof(rq->error), "cannot create a curl handle");
		return sbx_error_set(err, -ENOMEM, "%s: %s", method, rq->error);
	}
	struct xfer x = { .rq = rq };
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = header_list(rq->headers);
	set_options(h, rq, &x, hdrs, errbuf);
	CURLcode rc = curl_easy_perform(h);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (status)
		rq->status = status;
	handle_put(h);
	header_list_free(hdrs);
	char *where = sbx__http_url_for_log(rq->url);
	int r = 0;
	rq->fail = classify(rc);
	if (rc != CURLE_OK) {
		snprintf(rq->error, sizeof(rq->error), "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		sbx__redact_inplace(rq->error);
	}
	if (rc == CURLE_OK) {
		SBX_LOGD("http: %s %s: HTTP %ld", method, where, rq->status);
	} else if (x.cb_code) {
		rq->fail = SBX_HTTP_SINK;
		r = x.cb_code;
	} else if (x.overflow) {
		rq->fail = SBX_HTTP_SINK;
		snprintf(rq->error, sizeof(rq->error), "response larger than %zu bytes", rq->resp->max);
		r = sbx_error_set(err, -E2BIG, "%s %s: %s", method, where, rq->error);
	} else {
		r = rq->fail == SBX_HTTP_CANCEL ? -ECANCELED
		  : rq->fail == SBX_HTTP_TIMEOUT ? -ETIMEDOUT
		  : rq->fail == SBX_HTTP_CONNECT ? -ECONNREFUSED
		  : rq->fail == SBX_HTTP_RESOLVE ? -EHOSTUNREACH
		  : rq->fail == SBX_HTTP_SCHEME || rq->fail == SBX_HTTP_TLS ? -EPROTO
		  : -EIO;
		if (r == -ECANCELED)
			snprintf(rq->error, sizeof(rq->error), "cancelled");
		sbx_error_set(err, r, "%s %s: %s", method, where, rq->error);
	}
	if (r < 0)
		SBX_LOGD("http: %s %s: %s", method, where, rq->error[0] ? rq->error : "aborted");
	free(where);
	return r;
}
