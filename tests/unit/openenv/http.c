/* SPDX-License-Identifier: MIT */
/* The request-head parser of `sbx openenv serve` (src/openenv/http.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "openenv/http.h"

static long parse(struct oe_http_req *r, const char *s)
{
	return sbx__oe_http_parse(r, s, strlen(s));
}

Test(http, websocket_upgrade)
{
	struct oe_http_req r;
	const char *s = "GET /ws?x=1 HTTP/1.1\r\nHost: h\r\nUpgrade: WebSocket\r\n"
			"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; "
			"client_max_window_bits\r\n\r\nrest";
	cr_assert_eq(parse(&r, s), (long)(strlen(s) - 4));
	cr_assert_str_eq(r.method, "GET");
	cr_assert_str_eq(r.path, "/ws");
	cr_assert(r.upgrade_ws);
	cr_assert(r.conn_upgrade);
	cr_assert(r.ws_deflate);
	cr_assert_str_eq(r.ws_key, "dGhlIHNhbXBsZSBub25jZQ==");
	cr_assert_str_eq(r.ws_version, "13");
	cr_assert_eq(r.content_length, -1);
	cr_assert_not(r.conn_close);
}

Test(http, incomplete_waits_and_body_length)
{
	struct oe_http_req r;
	const char *s = "POST /reset HTTP/1.1\r\nContent-Length: 12\r\n\r\n";
	for (size_t k = 0; k < strlen(s); k++)
		cr_assert_eq(sbx__oe_http_parse(&r, s, k), 0);
	cr_assert_eq(parse(&r, s), (long)strlen(s));
	cr_assert_eq(r.content_length, 12);
	cr_assert_str_eq(r.method, "POST");
}

Test(http, malformed_heads)
{
	struct oe_http_req r;
	cr_assert_eq(parse(&r, "GET\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "GET / HTTP/2.0\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "get / HTTP/1.1\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "GET x HTTP/1.1\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "GET / HTTP/1.1\r\nNoColon\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"), -EINVAL);
	cr_assert_eq(parse(&r, "POST / HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n"), -EINVAL);
}

Test(http, head_limit)
{
	static char big[OE_HTTP_HEADERS_MAX + 64];
	struct oe_http_req r;
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	cr_assert_eq(sbx__oe_http_parse(&r, big, sizeof(big)), -E2BIG);
	cr_assert_eq(sbx__oe_http_parse(&r, big, 100), 0, "a short prefix still waits");
}

Test(http, http10_closes_and_chunked_flagged)
{
	struct oe_http_req r;
	cr_assert_gt(parse(&r, "GET /health HTTP/1.0\r\n\r\n"), 0);
	cr_assert(r.conn_close);
	cr_assert_gt(parse(&r, "POST /step HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 0);
	cr_assert(r.chunked);
	cr_assert_gt(parse(&r, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n"), 0);
	cr_assert(r.conn_close);
}
