/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: what a client of `sbx openenv serve` controls before any
 * sandbox is involved: the HTTP request head (src/openenv/http.c), then the
 * WebSocket frames after it (src/openenv/ws.c) fed through the frame parser
 * and the message assembler as the connection does, with a small message
 * limit so the limit paths are reached.
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/openenv/http.h"
#include "../../src/openenv/ws.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oe_http_req r;
	long hl = sbx__oe_http_parse(&r, (const char *)data, size);
	size_t off = hl > 0 ? (size_t)hl : 0;
	if (hl > 0 && (size_t)hl > size)
		abort();
	if (r.method[0] && strlen(r.path) >= sizeof(r.path))
		abort();
	char accept[OE_WS_ACCEPT_LEN + 1];
	if (hl > 0 && sbx__oe_ws_accept_key(accept, r.ws_key) == 0 && strlen(accept) != OE_WS_ACCEPT_LEN)
		abort();

	/* The frames: a mutable copy, parsed as the connection parses c->in. */
	size_t n = size - off;
	unsigned char *buf = malloc(n ? n : 1); /* checksrc: allow (harness) */
	if (!buf)
		return 0;
	memcpy(buf, data + off, n);
	struct oe_ws_msg m;
	sbx__oe_ws_msg_init(&m, 4096);
	size_t pos = 0;
	while (pos < n) {
		struct oe_ws_frame f;
		long k = sbx__oe_ws_parse(&f, buf + pos, n - pos, 4096);
		if (k <= 0)
			break;
		if ((size_t)k > n - pos || f.len > 4096 || f.payload < buf + pos ||
		    f.payload + f.len > buf + pos + k)
			abort();
		if (f.opcode < OE_WS_CLOSE) {
			int rc = sbx__oe_ws_msg_add(&m, &f);
			if (rc < 0)
				break;
			if (rc == 1) {
				if (m.data.len > 4096 || m.data.data[m.data.len] != '\0')
					abort();
				sbx__oe_ws_msg_reset(&m);
			}
		}
		pos += (size_t)k;
	}
	sbx__oe_ws_msg_free(&m);
	unsigned char h[OE_WS_HEADER_MAX];
	if (sbx__oe_ws_header(h, OE_WS_TEXT, n) > OE_WS_HEADER_MAX)
		abort();
	free(buf);
	return 0;
}
