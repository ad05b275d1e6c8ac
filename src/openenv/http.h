/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.1 requests `sbx openenv serve` understands: a request line, at
 * most OE_HTTP_HEADERS_MAX bytes of headers, and a Content-Length body (no
 * chunked bodies). Only the headers the server acts on are kept.
 */
#ifndef SBX_OPENENV_HTTP_H
#define SBX_OPENENV_HTTP_H

#include <stddef.h>

#define OE_HTTP_HEADERS_MAX (16u << 10)

struct oe_http_req {
	char method[16];
	char path[1024];          /* without the query string */
	int minor;                /* HTTP/1.minor */
	long long content_length; /* -1 when absent */
	int chunked;              /* Transfer-Encoding present (refused with 411) */
	int upgrade_ws;           /* Upgrade: websocket */
	int conn_upgrade;         /* Connection: ... upgrade ... */
	int conn_close;           /* Connection: close (or HTTP/1.0 without keep-alive) */
	char ws_key[64];
	char ws_version[8];
	int ws_deflate;           /* the client offered permessage-deflate (ignored: none agreed) */
};

/*
 * Parses the request head at the start of BUF (N bytes).
 * @return the head's length including the blank line (> 0), 0 when it is not
 *         complete yet, -EINVAL (malformed), -E2BIG (head over
 *         OE_HTTP_HEADERS_MAX, or a field over its buffer).
 */
long sbx__oe_http_parse(struct oe_http_req *r, const char *buf, size_t n);

/* The reason phrase of a status the server sends ("OK", "Not Found", ...). */
const char *sbx__oe_http_reason(int status);

#endif
