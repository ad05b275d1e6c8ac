/* SPDX-License-Identifier: MIT */
/*
 * e2b requests on the process's shared HTTP client (util/http.c), so a
 * create, an exec or a file transfer reuses a kept-alive connection instead
 * of opening a client per call. What is e2b's own: a body of prefix + file +
 * suffix (multipart uploads without a copy), the reply headers the client
 * reads (Content-Type, Retry-After, X-Next-Token), and its error codes:
 * only timeouts and refused connections are told apart from -EIO.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/http.h"
#include "e2b_int.h"

struct xfer {
	struct e2b_req *rq;
	size_t sent;     /* bytes of the body source already handed over */
	int read_fail;   /* the body file could not be read (-errno) */
};

static void keep(char *dst, size_t cap, const char *v, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static void on_header(sbx_http_req *h, const char *name, size_t nl, const char *v, size_t vl)
{
	struct e2b_req *rq = ((struct xfer *)h->payload)->rq;
	static const struct { const char *name; size_t off, cap; } want[] = {
		{ "content-type", offsetof(struct e2b_req, content_type), sizeof(((struct e2b_req *)0)->content_type) },
		{ "retry-after", offsetof(struct e2b_req, retry_after), sizeof(((struct e2b_req *)0)->retry_after) },
		{ "x-next-token", offsetof(struct e2b_req, next_token), sizeof(((struct e2b_req *)0)->next_token) },
	};
	for (size_t i = 0; name && i < sizeof(want) / sizeof(want[0]); i++)
		if (nl == strlen(want[i].name) && strncasecmp(name, want[i].name, nl) == 0)
			keep((char *)rq + want[i].off, want[i].cap, v, vl);
}

static int on_data(sbx_http_req *h, const char *data, size_t n)
{
	struct e2b_req *rq = ((struct xfer *)h->payload)->rq;
	return rq->on_data(data, n, rq->payload);
}

static size_t take(char *buf, size_t cap, const void *src, size_t len, size_t off)
{
	size_t k = len - off < cap ? len - off : cap;
	memcpy(buf, (const char *)src + off, k);
	return k;
}

/* Body source: prefix, then the file, then suffix. */
static long on_read(sbx_http_req *h, char *buf, size_t cap)
{
	struct xfer *x = h->payload;
	struct e2b_req *rq = x->rq;
	size_t done = 0, flen = (size_t)rq->fd_len;
	while (done < cap) {
		size_t pos = x->sent, k;
		if (pos < rq->prefix_len) {
			k = take(buf + done, cap - done, rq->prefix, rq->prefix_len, pos);
		} else if (pos < rq->prefix_len + flen) {
			size_t want = rq->prefix_len + flen - pos;
			if (want > cap - done)
				want = cap - done;
			ssize_t r = pread(rq->body_fd, buf + done, want, (off_t)(pos - rq->prefix_len));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return x->read_fail = r < 0 ? -errno : -EIO; /* EIO: it shrank */
			k = (size_t)r;
		} else if (pos < rq->prefix_len + flen + rq->suffix_len) {
			k = take(buf + done, cap - done, rq->suffix, rq->suffix_len, pos - rq->prefix_len - flen);
		} else {
			break;
		}
		done += k, x->sent += k;
	}
	return (long)done;
}

int sbx__e2b_http(struct e2b_req *rq, sbx_error **err)
{
	struct xfer x = { .rq = rq };
	rq->status = 0;
	rq->content_type[0] = rq->retry_after[0] = rq->next_token[0] = '\0';
	sbx_http_req h = { .method = rq->method, .url = rq->url, .headers = rq->headers,
			   .timeout_ms = rq->timeout_ms, .resp = rq->on_data ? NULL : rq->resp,
			   .on_data = rq->on_data ? on_data : NULL, .on_header = on_header,
			   .payload = &x, .cancel = rq->cancel };
	if (rq->body_fd >= 0 && (rq->prefix || rq->fd_len)) {
		h.read = on_read;
		h.body_len = rq->prefix_len + (uint64_t)rq->fd_len + rq->suffix_len;
	} else if (rq->body) {
		h.body = rq->body;
		h.body_len = rq->body_len;
	}
	sbx_error *e = NULL;
	int r = sbx__http_perform(&h, &e);
	rq->status = h.status;
	if (x.read_fail) {
		char *where = sbx__http_url_for_log(rq->url);
		sbx_error_setsys(&e, r, -r, "e2b: %s %s: read the request body", h.method, where);
		free(where);
	}
	if (r < 0 && e) {
		/* e2b's codes: everything but a timeout or a refusal is -EIO */
		if (r == -EHOSTUNREACH || r == -EPROTO)
			r = e->code = -EIO;
		sbx_error_prefix(&e, r, "e2b");
		if (err && !*err)
			*err = e;
		else
			sbx_error_free(e);
	}
	return r;
}
