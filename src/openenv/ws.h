/* SPDX-License-Identifier: MIT */
/*
 * RFC 6455 WebSocket pieces that need no socket: the opening handshake's
 * accept key, an incremental frame parser for client frames (which must be
 * masked), a message assembler for fragmented text/binary messages, and the
 * header of an (unmasked) server frame. No extension is negotiated, so any
 * RSV bit is a protocol error.
 */
#ifndef SBX_OPENENV_WS_H
#define SBX_OPENENV_WS_H

#include <stddef.h>
#include <stdint.h>

#include "../util/buf.h"

enum {
	OE_WS_CONT = 0x0,
	OE_WS_TEXT = 0x1,
	OE_WS_BINARY = 0x2,
	OE_WS_CLOSE = 0x8,
	OE_WS_PING = 0x9,
	OE_WS_PONG = 0xA,
};

/* Close codes (RFC 6455 7.4.1). */
enum {
	OE_WS_CLOSE_NORMAL = 1000,
	OE_WS_CLOSE_GOING_AWAY = 1001,
	OE_WS_CLOSE_PROTOCOL = 1002,
	OE_WS_CLOSE_BAD_DATA = 1007,
	OE_WS_CLOSE_POLICY = 1008,
	OE_WS_CLOSE_TOO_BIG = 1009,
	OE_WS_CLOSE_INTERNAL = 1011,
};

/* The accept key is always 28 base64 characters. */
#define OE_WS_ACCEPT_LEN 28
/* The longest server frame header (2 + 8 length bytes). */
#define OE_WS_HEADER_MAX 10

/* One parsed frame; payload points into the caller's buffer, unmasked in place. */
struct oe_ws_frame {
	int fin;
	int opcode;
	unsigned char *payload;
	size_t len;
};

/*
 * Computes Sec-WebSocket-Accept for a client's Sec-WebSocket-Key, which must
 * be the base64 of 16 bytes.
 * @return 0, or -EINVAL (a key that is not 16 bytes of base64).
 */
int sbx__oe_ws_accept_key(char out[OE_WS_ACCEPT_LEN + 1], const char *key);

/*
 * Parses one frame from the start of BUF (N bytes) and unmasks its payload
 * in place. Control frames are at most 125 bytes and never fragmented; a
 * data frame's payload is at most MAX bytes.
 * @return the bytes the frame took (> 0), 0 when BUF holds less than one
 *         frame, or minus a close code: -OE_WS_CLOSE_PROTOCOL (unmasked, RSV
 *         bits, unknown opcode, bad control frame, 64-bit length with its top
 *         bit set), -OE_WS_CLOSE_TOO_BIG (over MAX).
 */
long sbx__oe_ws_parse(struct oe_ws_frame *f, unsigned char *buf, size_t n, size_t max);

/* A message being put together from its fragments. */
struct oe_ws_msg {
	sbx_buf data;   /* the payload so far (max = the message limit) */
	int opcode;     /* OE_WS_TEXT or OE_WS_BINARY once started, else 0 */
};

void sbx__oe_ws_msg_init(struct oe_ws_msg *m, size_t max);
void sbx__oe_ws_msg_reset(struct oe_ws_msg *m);
void sbx__oe_ws_msg_free(struct oe_ws_msg *m);

/*
 * Adds a data frame (text, binary or continuation) to M.
 * @return 1 when the message is complete (m->data holds it, NUL-terminated;
 *         a text message is valid UTF-8), 0 when more fragments are due, or
 *         minus a close code: -OE_WS_CLOSE_PROTOCOL (a continuation with
 *         nothing started, a new message before the last one ended),
 *         -OE_WS_CLOSE_TOO_BIG, -OE_WS_CLOSE_BAD_DATA (text not UTF-8).
 */
int sbx__oe_ws_msg_add(struct oe_ws_msg *m, const struct oe_ws_frame *f);

/* True when S (N bytes) is well-formed UTF-8 (no overlongs, surrogates, > U+10FFFF). */
int sbx__oe_utf8_valid(const unsigned char *s, size_t n);

/* Writes the header of a final, unmasked frame. @return its length (2, 4 or 10). */
size_t sbx__oe_ws_header(unsigned char out[OE_WS_HEADER_MAX], int opcode, uint64_t len);

#endif
