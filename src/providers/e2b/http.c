/* SPDX-License-Identifier: MIT */
/*
 * One HTTP client per process for every E2B sandbox: a libcurl share handle
 * (connections, DNS, TLS sessions) and a small pool of easy handles, so a
 * create, an exec or a file transfer reuses a kept-alive connection instead
 * of opening a client per call, which leaks a socket per call under load.
 * The number of open descriptors is bounded by the peak concurrency.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include <sbx/version.h>

#include "../../util/alloc.h"
#include "../../util/str.h"
#include "e2b_int.h"

#define POOL_MAX 16

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLSH *share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_MAX];
static size_t n_pool;

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
	curl_global_init(CURL_GLOBAL_DEFAULT);
	for (size_t i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&share_locks[i], NULL);
	share = curl_share_init();
	if (!share)
		return;
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
	if (!h)
		h = curl_easy_init();
	return h;
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

size_t sbx__e2b_http_idle(void)
{
	pthread_mutex_lock(&pool_lock);
	size_t n = n_pool;
	pthread_mutex_unlock(&pool_lock);
	return n;
}

struct curl_slist *sbx__e2b_headers(const char *const *lines)
{
	struct curl_slist *h = NULL;
	for (size_t i = 0; lines && lines[i]; i++) {
		struct curl_slist *n = curl_slist_append(h, lines[i]);
		if (!n)
			abort();
		h = n;
	}
	return h;
}

void sbx__e2b_headers_free(struct curl_slist *h)
{
	curl_slist_free_all(h);
}

struct xfer {
	struct e2b_req *rq;
	size_t sent;     /* bytes of the body source already handed to curl */
	int cb_code;     /* on_data's failure */
	int overflow;    /* resp passed its maximum */
};

static size_t on_write(char *data, size_t sz, size_t nm, void *u)
{
	struct xfer *x = u;
	size_t n = sz * nm;
	if (x->rq->on_data) {
		int r = x->rq->on_data(data, n, x->rq->payload);
		if (r < 0) {
			x->cb_code = r;
			return 0;
		}
		return n;
	}
	if (x->rq->resp && sbx__buf_append(x->rq->resp, data, n) < 0) {
		x->overflow = 1;
		return 0;
	}
	return n;
}

static void header_value(char *dst, size_t cap, const char *v, size_t n)
{
	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static size_t on_header(char *data, size_t sz, size_t nm, void *u)
{
	struct xfer *x = u;
	size_t n = sz * nm;
	static const struct { const char *name; size_t off, cap; } want[] = {
		{ "content-type:", offsetof(struct e2b_req, content_type), sizeof(((struct e2b_req *)0)->content_type) },
		{ "retry-after:", offsetof(struct e2b_req, retry_after), sizeof(((struct e2b_req *)0)->retry_after) },
		{ "x-next-token:", offsetof(struct e2b_req, next_token), sizeof(((struct e2b_req *)0)->next_token) },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		size_t l = strlen(want[i].name);
		if (n > l && strncasecmp(data, want[i].name, l) == 0)
			header_value((char *)x->rq + want[i].off, want[i].cap, data + l, n - l);
	}
	return n;
}

/* Body source: prefix, then the file, then suffix. */
static size_t on_read(char *buf, size_t sz, size_t nm, void *u)
{
	struct xfer *x = u;
	struct e2b_req *rq = x->rq;
	size_t cap = sz * nm, done = 0;
	size_t flen = (size_t)rq->fd_len;
	while (done < cap) {
		size_t pos = x->sent;
		if (pos < rq->prefix_len) {
			size_t k = rq->prefix_len - pos < cap - done ? rq->prefix_len - pos : cap - done;
			memcpy(buf + done, (const char *)rq->prefix + pos, k);
			done += k, x->sent += k;
		} else if (pos < rq->prefix_len + flen) {
			size_t want = rq->prefix_len + flen - pos;
			if (want > cap - done)
				want = cap - done;
			ssize_t r = pread(rq->body_fd, buf + done, want, (off_t)(pos - rq->prefix_len));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return CURL_READFUNC_ABORT;
			done += (size_t)r, x->sent += (size_t)r;
		} else if (pos < rq->prefix_len + flen + rq->suffix_len) {
			size_t off = pos - rq->prefix_len - flen;
			size_t k = rq->suffix_len - off < cap - done ? rq->suffix_len - off : cap - done;
			memcpy(buf + done, (const char *)rq->suffix + off, k);
			done += k, x->sent += k;
		} else {
			break;
		}
	}
	return done;
}

static int on_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct xfer *x = u;
	(void)a, (void)b, (void)c, (void)d;
	return x->rq->cancel && *x->rq->cancel ? 1 : 0;
}

int sbx__e2b_http(struct e2b_req *rq, sbx_error **err)
{
	CURL *h = handle_get();
	if (!h)
		return sbx_error_set(err, -ENOMEM, "e2b: no HTTP handle");
	struct xfer x = { .rq = rq };
	rq->status = 0;
	rq->content_type[0] = rq->retry_after[0] = rq->next_token[0] = '\0';
	char ua[64];
	snprintf(ua, sizeof(ua), "sbx/%s", sbx_version_string());
	if (share)
		curl_easy_setopt(h, CURLOPT_SHARE, share);
	curl_easy_setopt(h, CURLOPT_URL, rq->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, ua);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, rq->headers);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 15000L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (rq->timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	if (rq->body_fd >= 0 && (rq->prefix || rq->fd_len)) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, &x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)(rq->prefix_len + (size_t)rq->fd_len + rq->suffix_len));
	} else if (rq->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	} else if (strcmp(rq->method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	}
	CURLcode rc = curl_easy_perform(h);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	rq->status = status;
	handle_put(h);
	if (rc == CURLE_OK)
		return 0;
	if (x.cb_code)
		return x.cb_code;
	if (x.overflow)
		return sbx_error_set(err, -E2BIG, "e2b: %s %s: response larger than %zu bytes", rq->method,
				     rq->url, rq->resp->max);
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return sbx_error_set(err, -ECANCELED, "e2b: %s %s: cancelled", rq->method, rq->url);
	int code = rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
		 : rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED
		 : -EIO;
	return sbx_error_set(err, code, "e2b: %s %s: %s", rq->method, rq->url, curl_easy_strerror(rc));
}
