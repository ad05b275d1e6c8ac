/* SPDX-License-Identifier: MIT */
/*
 * Connect protocol (JSON codec) helpers: request bodies (one envelope for
 * streaming calls, bare JSON for unary ones), envelopes (flag byte plus
 * big-endian u32 length; never compressed), the mandatory 0x02 end-stream
 * frame with an optional error, keepalive and Connect-Timeout-Ms headers,
 * protobuf JSON bytes fields, and the shared waiting primitive of streams.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/alloc.h"
#include "../util/base64.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "server_int.h"

char *sbx__srv_json_bytes_encode(const void *data, size_t len)
{
	/* What protoc's JSON printers write, and what every parser reads. */
	return sbx__base64_encode(data, len, SBX_B64_STD);
}

int sbx__srv_json_bytes_decode(sbx_buf *out, const char *s)
{
	/* The proto3 JSON mapping lets a bytes field use either alphabet, with
	 * or without padding; the E2B SDKs send standard padded base64. */
	return sbx__base64_decode_buf(out, s, strlen(s), SBX_B64_ANY_ALPHABET | SBX_B64_PAD_OPTIONAL);
}

int sbx__srv_connect_is_stream(struct srv_req *r)
{
	const char *ct = sbx__srv_header(r, "Content-Type");
	return ct && sbx__str_startswith(ct, "application/connect+");
}

json_t *sbx__srv_connect_body(struct srv_req *r, int streaming)
{
	const char *p = r->body.data ? r->body.data : "";
	size_t n = r->body.len;
	if (streaming && n >= 5 && (unsigned char)p[0] <= 1) {
		if (p[0] & 1) {
			sbx__srv_reply_stream_error(r, "unimplemented", "compressed messages are not supported");
			return NULL;
		}
		size_t len = ((size_t)(unsigned char)p[1] << 24) | ((size_t)(unsigned char)p[2] << 16) |
			     ((size_t)(unsigned char)p[3] << 8) | (size_t)(unsigned char)p[4];
		if (len > n - 5) {
			sbx__srv_reply_stream_error(r, "invalid_argument", "truncated envelope");
			return NULL;
		}
		p += 5;
		n = len;
	}
	if (n == 0)
		return json_object();
	json_error_t je;
	json_t *j = json_loadb(p, n, 0, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		if (streaming)
			sbx__srv_reply_stream_error(r, "invalid_argument", "request is not a JSON object: %s", je.text);
		else
			sbx__srv_reply_connect_error(r, "invalid_argument", "request is not a JSON object: %s", je.text);
		return NULL;
	}
	return j;
}

int sbx__srv_envelope(sbx_buf *b, unsigned flags, json_t *payload)
{
	char *s = json_dumps(payload, JSON_COMPACT);
	json_decref(payload);
	if (!s)
		return -ENOMEM;
	size_t len = strlen(s);
	unsigned char h[5] = { (unsigned char)flags, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
			       (unsigned char)(len >> 8), (unsigned char)len };
	int r = sbx__buf_append(b, h, 5);
	if (r == 0)
		r = sbx__buf_append(b, s, len);
	free(s);
	return r;
}

void sbx__srv_end_stream(sbx_buf *b, const char *code, const char *msg)
{
	json_t *o = code ? json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg ? msg : code) : json_object();
	sbx__srv_envelope(b, 0x02, o);
}

struct err_stream {
	char *code, *msg;
};

static int err_fill(struct srv_stream *s)
{
	struct err_stream *e = s->ctx;
	sbx__srv_end_stream(&s->out, e->code, e->msg);
	return 1;
}

static void err_fini(struct srv_stream *s)
{
	struct err_stream *e = s->ctx;
	free(e->code);
	free(e->msg);
	free(e);
}

void sbx__srv_reply_stream_error(struct srv_req *r, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct err_stream *e = xcalloc(1, sizeof(*e));
	e->code = xstrdup(code);
	e->msg = xvasprintf(fmt, ap);
	va_end(ap);
	struct srv_stream *s = xcalloc(1, sizeof(*s));
	sbx__buf_init(&s->out, 1 << 16);
	s->fill = err_fill;
	s->fini = err_fini;
	s->ctx = e;
	sbx__srv_reply_stream(r, s);
	sbx__srv_metrics_status(r->srv, sbx__srv_connect_http_status(code));
}

double sbx__srv_keepalive_s(struct srv_req *r)
{
	const char *v = sbx__srv_header(r, "Keepalive-Ping-Interval");
	uint64_t n;
	if (v && sbx__parse_u64(&n, v) == 0 && n > 0)
		return (double)n;
	return 90;
}

double sbx__srv_connect_timeout_s(struct srv_req *r)
{
	const char *v = sbx__srv_header(r, "Connect-Timeout-Ms");
	uint64_t n;
	if (!v)
		return 0;
	if (sbx__parse_u64(&n, v) < 0 || strlen(v) > 10)
		return -1;
	return (double)n / 1000.0;
}

void sbx__srv_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *lk, double deadline)
{
	double wait = deadline - sbx__now_mono();
	if (wait > 0.5)
		wait = 0.5;
	if (wait <= 0)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long ns = ts.tv_nsec + (long)(wait * 1e9);
	ts.tv_sec += ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	pthread_cond_timedwait(cv, lk, &ts);
}
