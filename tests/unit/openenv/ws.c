/* SPDX-License-Identifier: MIT */
/* RFC 6455 framing of `sbx openenv serve`: handshake key, frame parser,
 * fragmented messages and their limits (src/openenv/ws.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "openenv/ws.h"

/* A masked client frame of OPCODE with PAYLOAD; returns its length. */
static size_t client_frame(unsigned char *out, int fin, int opcode, const void *payload, size_t n,
			   int masked)
{
	static const unsigned char key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	size_t h = 0;
	out[h++] = (unsigned char)((fin ? 0x80 : 0) | opcode);
	unsigned char m = masked ? 0x80 : 0;
	if (n < 126) {
		out[h++] = (unsigned char)(m | n);
	} else if (n <= 0xFFFF) {
		out[h++] = m | 126;
		out[h++] = (unsigned char)(n >> 8);
		out[h++] = (unsigned char)n;
	} else {
		out[h++] = m | 127;
		for (int i = 7; i >= 0; i--)
			out[h++] = (unsigned char)((uint64_t)n >> (8 * i));
	}
	if (masked) {
		memcpy(out + h, key, 4);
		h += 4;
	}
	for (size_t i = 0; i < n; i++)
		out[h + i] = ((const unsigned char *)payload)[i] ^ (masked ? key[i & 3] : 0);
	return h + n;
}

Test(ws, accept_key_matches_rfc_example)
{
	char out[OE_WS_ACCEPT_LEN + 1];
	cr_assert_eq(sbx__oe_ws_accept_key(out, "dGhlIHNhbXBsZSBub25jZQ=="), 0);
	cr_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

Test(ws, accept_key_refuses_bad_keys)
{
	char out[OE_WS_ACCEPT_LEN + 1];
	cr_assert_eq(sbx__oe_ws_accept_key(out, ""), -EINVAL);
	cr_assert_eq(sbx__oe_ws_accept_key(out, NULL), -EINVAL);
	cr_assert_eq(sbx__oe_ws_accept_key(out, "not base64 at all!!!!!!!"), -EINVAL);
	cr_assert_eq(sbx__oe_ws_accept_key(out, "dGhlIHNhbXBsZSBub25jZQ"), -EINVAL); /* 22 chars */
}

Test(ws, parses_masked_text_and_unmasks)
{
	unsigned char b[64];
	size_t n = client_frame(b, 1, OE_WS_TEXT, "Hello", 5, 1);
	struct oe_ws_frame f;
	for (size_t k = 0; k < n; k++)
		cr_assert_eq(sbx__oe_ws_parse(&f, b, k, 100), 0, "a partial frame (%zu bytes) waits", k);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(f.fin, 1);
	cr_assert_eq(f.opcode, OE_WS_TEXT);
	cr_assert_eq(f.len, 5);
	cr_assert_eq(memcmp(f.payload, "Hello", 5), 0);
}

Test(ws, lengths_16_and_64_bit)
{
	static unsigned char b[70000 + 14], p[70000];
	memset(p, 'x', sizeof(p));
	struct oe_ws_frame f;
	size_t n = client_frame(b, 1, OE_WS_BINARY, p, 300, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 1 << 20), (long)n);
	cr_assert_eq(f.len, 300);
	n = client_frame(b, 1, OE_WS_BINARY, p, sizeof(p), 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 1 << 20), (long)n);
	cr_assert_eq(f.len, sizeof(p));
	cr_assert_eq(f.payload[69999], 'x');
}

Test(ws, refuses_unmasked_rsv_bad_opcode_and_big_control)
{
	unsigned char b[256];
	struct oe_ws_frame f;
	size_t n = client_frame(b, 1, OE_WS_TEXT, "hi", 2, 0);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), -OE_WS_CLOSE_PROTOCOL, "unmasked");
	n = client_frame(b, 1, OE_WS_TEXT, "hi", 2, 1);
	b[0] |= 0x40;
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), -OE_WS_CLOSE_PROTOCOL, "RSV1 without an extension");
	for (int op = 3; op <= 0xF; op++) {
		if (op >= OE_WS_CLOSE && op <= OE_WS_PONG)
			continue;
		n = client_frame(b, 1, op, "hi", 2, 1);
		cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), -OE_WS_CLOSE_PROTOCOL, "opcode %d", op);
	}
	unsigned char big[200];
	memset(big, 'p', sizeof(big));
	n = client_frame(b, 1, OE_WS_PING, big, 126, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 1000), -OE_WS_CLOSE_PROTOCOL, "a 126-byte ping");
	n = client_frame(b, 0, OE_WS_PING, "x", 1, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 1000), -OE_WS_CLOSE_PROTOCOL, "a fragmented ping");
}

Test(ws, refuses_oversize_from_the_header_alone)
{
	unsigned char b[16] = { 0x81, 0x80 | 127, 0, 0, 0, 0, 0x01, 0, 0, 0 };
	struct oe_ws_frame f;
	/* 16 MiB + 0: the header is enough to refuse, no payload needed. */
	cr_assert_eq(sbx__oe_ws_parse(&f, b, 10, (16u << 20) - 1), -OE_WS_CLOSE_TOO_BIG);
	b[2] = 0x80; /* the top bit of a 64-bit length */
	cr_assert_eq(sbx__oe_ws_parse(&f, b, 10, 100), -OE_WS_CLOSE_PROTOCOL);
}

Test(ws, fragmented_message_with_interleaved_ping)
{
	unsigned char b[256];
	struct oe_ws_frame f;
	struct oe_ws_msg m;
	sbx__oe_ws_msg_init(&m, 100);
	size_t n = client_frame(b, 0, OE_WS_TEXT, "{\"type\":", 8, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), 0);
	n = client_frame(b, 1, OE_WS_PING, "p", 1, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n, "a control frame between fragments");
	cr_assert_eq(f.opcode, OE_WS_PING);
	n = client_frame(b, 0, OE_WS_CONT, "\"state\"", 7, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), 0);
	n = client_frame(b, 1, OE_WS_CONT, "}", 1, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), 1);
	cr_assert_str_eq(m.data.data, "{\"type\":\"state\"}");
	sbx__oe_ws_msg_reset(&m);
	sbx__oe_ws_msg_free(&m);
}

Test(ws, message_limit_spans_fragments)
{
	unsigned char b[256], p[60];
	memset(p, 'a', sizeof(p));
	struct oe_ws_frame f;
	struct oe_ws_msg m;
	sbx__oe_ws_msg_init(&m, 100);
	size_t n = client_frame(b, 0, OE_WS_TEXT, p, 60, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), 0);
	n = client_frame(b, 1, OE_WS_CONT, p, 60, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), -OE_WS_CLOSE_TOO_BIG, "60 + 60 > 100");
	sbx__oe_ws_msg_free(&m);
}

Test(ws, bad_fragment_order_and_bad_utf8)
{
	unsigned char b[64];
	struct oe_ws_frame f;
	struct oe_ws_msg m;
	sbx__oe_ws_msg_init(&m, 100);
	size_t n = client_frame(b, 1, OE_WS_CONT, "x", 1, 1);
	cr_assert_eq(sbx__oe_ws_parse(&f, b, n, 100), (long)n);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), -OE_WS_CLOSE_PROTOCOL, "a continuation of nothing");
	n = client_frame(b, 0, OE_WS_TEXT, "x", 1, 1);
	sbx__oe_ws_parse(&f, b, n, 100);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), 0);
	n = client_frame(b, 1, OE_WS_TEXT, "y", 1, 1);
	sbx__oe_ws_parse(&f, b, n, 100);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), -OE_WS_CLOSE_PROTOCOL, "a new message mid-message");
	sbx__oe_ws_msg_reset(&m);
	n = client_frame(b, 1, OE_WS_TEXT, "\xc0\xaf", 2, 1);
	sbx__oe_ws_parse(&f, b, n, 100);
	cr_assert_eq(sbx__oe_ws_msg_add(&m, &f), -OE_WS_CLOSE_BAD_DATA, "an overlong '/'");
	sbx__oe_ws_msg_free(&m);
}

Test(ws, utf8_validator)
{
	cr_assert(sbx__oe_utf8_valid((const unsigned char *)"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
	cr_assert_not(sbx__oe_utf8_valid((const unsigned char *)"\xed\xa0\x80", 3), "a surrogate");
	cr_assert_not(sbx__oe_utf8_valid((const unsigned char *)"\xf4\x90\x80\x80", 4), "over U+10FFFF");
	cr_assert_not(sbx__oe_utf8_valid((const unsigned char *)"\xe2\x82", 2), "truncated");
	cr_assert_not(sbx__oe_utf8_valid((const unsigned char *)"\xff", 1));
}

Test(ws, server_headers)
{
	unsigned char h[OE_WS_HEADER_MAX];
	cr_assert_eq(sbx__oe_ws_header(h, OE_WS_TEXT, 5), 2);
	cr_assert_eq(h[0], 0x81);
	cr_assert_eq(h[1], 5);
	cr_assert_eq(sbx__oe_ws_header(h, OE_WS_PONG, 126), 4);
	cr_assert_eq(h[1], 126);
	cr_assert_eq(h[3], 126);
	cr_assert_eq(sbx__oe_ws_header(h, OE_WS_TEXT, 1u << 20), 10);
	cr_assert_eq(h[1], 127);
	cr_assert_eq(h[7], 0x10);
}
