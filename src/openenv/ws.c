/* SPDX-License-Identifier: MIT */
/* RFC 6455 framing for `sbx openenv serve` (see ws.h). */
#include <errno.h>
#include <string.h>

#include <openssl/sha.h>

#include "../util/base64.h"
#include "ws.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int sbx__oe_ws_accept_key(char out[OE_WS_ACCEPT_LEN + 1], const char *key)
{
	unsigned char raw[32], digest[SHA_DIGEST_LENGTH];
	size_t n = 0, klen = key ? strlen(key) : 0;
	char cat[128];

	/* RFC 6455 4.1: the key is a random 16-byte value, base64-encoded (24 chars). */
	if (klen != 24 || sbx__base64_decode_to(raw, sizeof(raw), &n, key, klen, SBX_B64_STD) < 0 ||
	    n != 16)
		return -EINVAL;
	memcpy(cat, key, klen);
	memcpy(cat + klen, ws_guid, sizeof(ws_guid) - 1);
	SHA1((const unsigned char *)cat, klen + sizeof(ws_guid) - 1, digest);
	if (sbx__base64_encode_to(out, OE_WS_ACCEPT_LEN + 1, digest, sizeof(digest), SBX_B64_STD) !=
	    OE_WS_ACCEPT_LEN)
		return -EINVAL;
	return 0;
}

long sbx__oe_ws_parse(struct oe_ws_frame *f, unsigned char *buf, size_t n, size_t max)
{
	size_t hdr = 2;
	uint64_t len;

	if (n < 2)
		return 0;
	int fin = buf[0] >> 7, rsv = (buf[0] >> 4) & 7, op = buf[0] & 0xF;
	int masked = buf[1] >> 7;
	len = buf[1] & 0x7F;
	if (rsv)
		return -OE_WS_CLOSE_PROTOCOL;
	switch (op) {
	case OE_WS_CONT:
	case OE_WS_TEXT:
	case OE_WS_BINARY:
		break;
	case OE_WS_CLOSE:
	case OE_WS_PING:
	case OE_WS_PONG:
		if (!fin || len > 125)
			return -OE_WS_CLOSE_PROTOCOL;
		break;
	default:
		return -OE_WS_CLOSE_PROTOCOL;
	}
	/* A server must fail the connection on an unmasked client frame (5.1). */
	if (!masked)
		return -OE_WS_CLOSE_PROTOCOL;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		hdr = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 2; i < 10; i++)
			len = len << 8 | buf[i];
		if (len >> 63)
			return -OE_WS_CLOSE_PROTOCOL;
		hdr = 10;
	}
	if (len > max)
		return -OE_WS_CLOSE_TOO_BIG;
	if (n < hdr + 4 || n - hdr - 4 < len)
		return 0;
	const unsigned char *mask = buf + hdr;
	unsigned char *p = buf + hdr + 4;
	for (uint64_t i = 0; i < len; i++)
		p[i] ^= mask[i & 3];
	f->fin = fin;
	f->opcode = op;
	f->payload = p;
	f->len = (size_t)len;
	return (long)(hdr + 4 + len);
}

void sbx__oe_ws_msg_init(struct oe_ws_msg *m, size_t max)
{
	sbx__buf_init(&m->data, max);
	m->opcode = 0;
}

void sbx__oe_ws_msg_reset(struct oe_ws_msg *m)
{
	size_t max = m->data.max;
	sbx__buf_free(&m->data);
	sbx__oe_ws_msg_init(m, max);
}

void sbx__oe_ws_msg_free(struct oe_ws_msg *m)
{
	sbx__buf_free(&m->data);
	m->opcode = 0;
}

int sbx__oe_ws_msg_add(struct oe_ws_msg *m, const struct oe_ws_frame *f)
{
	if (f->opcode == OE_WS_CONT) {
		if (!m->opcode)
			return -OE_WS_CLOSE_PROTOCOL;
	} else {
		if (m->opcode)
			return -OE_WS_CLOSE_PROTOCOL;
		m->opcode = f->opcode;
	}
	if (f->len > m->data.max - m->data.len || sbx__buf_append(&m->data, f->payload, f->len) < 0)
		return -OE_WS_CLOSE_TOO_BIG;
	if (!f->fin)
		return 0;
	/* An empty message still hands out a NUL-terminated (empty) string. */
	if (!m->data.data && sbx__buf_append(&m->data, "", 0) < 0)
		return -OE_WS_CLOSE_TOO_BIG;
	if (m->opcode == OE_WS_TEXT &&
	    !sbx__oe_utf8_valid((const unsigned char *)m->data.data, m->data.len))
		return -OE_WS_CLOSE_BAD_DATA;
	return 1;
}

int sbx__oe_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		size_t k;
		unsigned cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			k = 1, cp = c & 0x1F, min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			k = 2, cp = c & 0x0F, min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return 0;
		}
		if (n - i - 1 < k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += k + 1;
	}
	return 1;
}

size_t sbx__oe_ws_header(unsigned char out[OE_WS_HEADER_MAX], int opcode, uint64_t len)
{
	out[0] = (unsigned char)(0x80 | (opcode & 0xF));
	if (len < 126) {
		out[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xFFFF) {
		out[1] = 126;
		out[2] = (unsigned char)(len >> 8);
		out[3] = (unsigned char)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
	return 10;
}
