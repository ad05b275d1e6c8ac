/* SPDX-License-Identifier: MIT */
/*
 * The process's one HTTP client, over libcurl, for every remote caller (the
 * e2b provider, the image registry client). It owns curl_global_init (once,
 * thread-safe), a share of connections, DNS answers and TLS sessions with
 * locks, so callers on any thread reuse kept-alive connections, and a small
 * pool of easy handles. Every request gets the same base options: user agent
 * "sbx/<version>", connect timeout, no signals (threads), TCP keepalive,
 * allowed schemes (also for redirects), no redirects unless asked, proxies
 * from the environment as curl reads them (http_proxy, https_proxy,
 * no_proxy). Header lines may carry secrets: they are never logged and the
 * values of credential headers are registered for redaction; logs and error
 * messages name URLs without their query (presigned URLs sign there).
 */
#ifndef SBX_UTIL_HTTP_H
#define SBX_UTIL_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/error.h>

#include "buf.h"

#define SBX_HTTP_CONNECT_TIMEOUT_MS 15000L

/* Why a transfer failed (rq->fail); SBX_HTTP_OK when a response arrived. */
enum sbx_http_fail {
	SBX_HTTP_OK,
	SBX_HTTP_CONNECT,   /* connection refused or unreachable */
	SBX_HTTP_RESOLVE,   /* host or proxy name did not resolve */
	SBX_HTTP_TIMEOUT,
	SBX_HTTP_SCHEME,    /* the URL (or a redirect) uses a scheme not allowed */
	SBX_HTTP_TLS,       /* handshake or certificate verification */
	SBX_HTTP_SINK,      /* a callback refused, or the response passed resp->max */
	SBX_HTTP_CANCEL,    /* *cancel became non-zero */
	SBX_HTTP_OTHER,
};

struct sbx_http_req;
/* Response body bytes (of every response that has a body). <0 aborts the
 * transfer, and perform returns that code. */
typedef int (*sbx_http_data_fn)(struct sbx_http_req *rq, const char *data, size_t len);
/* The next request body bytes into BUF: the count, 0 at the end, <0 aborts. */
typedef long (*sbx_http_read_fn)(struct sbx_http_req *rq, char *buf, size_t cap);
/* One response header, name and value trimmed (not NUL-terminated). NAME is
 * NULL when a new response begins (a redirect, 100 Continue): rq->status is
 * already its status, and headers kept from before belong to the old one. */
typedef void (*sbx_http_header_fn)(struct sbx_http_req *rq, const char *name, size_t name_len,
				   const char *value, size_t value_len);
/* Body bytes received so far (called often; must be cheap). */
typedef void (*sbx_http_progress_fn)(struct sbx_http_req *rq, uint64_t received);

/* One request and its response. Zero-initialise, then fill what applies. */
typedef struct sbx_http_req {
	const char *method;          /* NULL: GET */
	const char *url;
	const char *const *headers;  /* "Name: value" lines, NULL-terminated; may carry secrets */
	const char *protocols;       /* allowed schemes, e.g. "https"; NULL: "http,https" */
	long max_redirects;          /* follow at most this many; 0: return the 3xx */
	long connect_timeout_ms;     /* 0: SBX_HTTP_CONNECT_TIMEOUT_MS */
	long timeout_ms;             /* the whole transfer; 0: none */
	long low_speed_time_s;       /* abort after this long under 1 byte/s; 0: never */
	/* request body: memory, or a callback producing body_len bytes, or none */
	const void *body;
	sbx_http_read_fn read;
	uint64_t body_len;
	/* response body: to on_data when set, else into resp (bounded) when set */
	sbx_buf *resp;
	sbx_http_data_fn on_data;
	sbx_http_header_fn on_header;
	sbx_http_progress_fn on_progress;
	void *payload;               /* for the callbacks */
	const volatile int *cancel;  /* non-zero aborts the transfer */
	/* out */
	long status;                 /* of the last response; live while receiving */
	enum sbx_http_fail fail;
	char error[256];             /* why it failed, for messages (no secrets) */
} sbx_http_req;

/*
 * Performs RQ on a pooled handle. A callback's negative code is returned as
 * is and ERR is left for the caller to set; every other failure sets ERR
 * ("<METHOD> <url without query>: <why>").
 * @return 0 when a response arrived (any status), -ECONNREFUSED,
 *         -EHOSTUNREACH, -ETIMEDOUT, -EPROTO (scheme or TLS), -E2BIG
 *         (body past resp->max), -ECANCELED, -EIO, -ENOSYS (libcurl cannot be
 *         loaded: ERR names the package), or the callback's code.
 */
int sbx__http_perform(sbx_http_req *rq, sbx_error **err);

/* Frees a header vector (sbx__strv-style), zeroing each line first: lines
 * carry keys and tokens. NULL is fine. */
void sbx__http_headers_free(char **lines);

/* Percent-encodes S for a query value. Owned. */
char *sbx__http_escape(const char *s);

/* URL up to (not including) its query or fragment, for messages. Owned. */
char *sbx__http_url_for_log(const char *url);

#endif
