/* SPDX-License-Identifier: MIT */
/*
 * Base64 for every caller (auth headers, registry key files, envd process
 * data): one encoder, one strict decoder, both writing to bounded output.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "base64.h"

static const char std_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t sbx__base64_encoded_len(size_t n, unsigned flags)
{
	if (flags & SBX_B64_NOPAD)
		return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
	return (n + 2) / 3 * 4;
}

size_t sbx__base64_decoded_max(size_t n)
{
	return n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
}

long sbx__base64_encode_to(char *out, size_t cap, const void *data, size_t len, unsigned flags)
{
	size_t need = sbx__base64_encoded_len(len, flags);
	if (cap == 0 || need > cap - 1)
		return -ENOBUFS;
	const char *a = flags & SBX_B64_URL ? url_alpha : std_alpha;
	const unsigned char *p = data;
	size_t o = 0, i = 0;
	for (; i + 2 < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		out[o++] = a[(v >> 6) & 63];
		out[o++] = a[v & 63];
	}
	if (i < len) {
		int two = i + 1 < len;
		unsigned v = (unsigned)p[i] << 16 | (two ? (unsigned)p[i + 1] << 8 : 0);
		out[o++] = a[v >> 18];
		out[o++] = a[(v >> 12) & 63];
		if (two)
			out[o++] = a[(v >> 6) & 63];
		if (!(flags & SBX_B64_NOPAD)) {
			if (!two)
				out[o++] = '=';
			out[o++] = '=';
		}
	}
	out[o] = '\0';
	return (long)o;
}

int sbx__base64_encode_buf(sbx_buf *b, const void *data, size_t len, unsigned flags)
{
	if (sbx__base64_encoded_len(len, flags) > b->max - b->len)
		return -E2BIG;
	/* 48-byte pieces encode to 64 characters without padding, so the pieces
	 * concatenate to the encoding of the whole. */
	const unsigned char *p = data;
	char chunk[65];
	do {
		size_t k = len < 48 ? len : 48;
		long n = sbx__base64_encode_to(chunk, sizeof(chunk), p, k, flags);
		sbx__buf_append(b, chunk, (size_t)n);
		p += k, len -= k;
	} while (len);
	return 0;
}

char *sbx__base64_encode(const void *data, size_t len, unsigned flags)
{
	size_t need = sbx__base64_encoded_len(len, flags) + 1;
	char *out = xmalloc(need);
	sbx__base64_encode_to(out, need, data, len, flags);
	return out;
}

/* Value of CH in the alphabets FLAGS allow; *seen records which one it came
 * from (1 standard, 2 URL-safe) for characters that differ. -1 if none. */
static int value(unsigned char ch, unsigned flags, unsigned *seen)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	int url = (flags & SBX_B64_URL) || (flags & SBX_B64_ANY_ALPHABET);
	int std = !(flags & SBX_B64_URL) || (flags & SBX_B64_ANY_ALPHABET);
	if (std && (ch == '+' || ch == '/')) {
		*seen |= 1;
		return ch == '+' ? 62 : 63;
	}
	if (url && (ch == '-' || ch == '_')) {
		*seen |= 2;
		return ch == '-' ? 62 : 63;
	}
	return -1;
}

/* Checks the shape of IN: *body is the count of characters before padding. */
static int check_padding(size_t *body, const char *in, size_t n, unsigned flags)
{
	size_t pad = 0;
	while (pad < n && pad < 3 && in[n - 1 - pad] == '=')
		pad++;
	size_t m = n - pad;
	if (pad && (flags & SBX_B64_NOPAD))
		return -EINVAL;
	if (m % 4 == 1)
		return -EINVAL;
	if (pad) {
		/* "xx==" or "xxx=": padding completes the last quantum exactly. */
		if (n % 4 != 0 || pad != 4 - m % 4)
			return -EINVAL;
	} else if (m % 4 && !(flags & (SBX_B64_NOPAD | SBX_B64_PAD_OPTIONAL))) {
		return -EINVAL;
	}
	*body = m;
	return 0;
}

/* Decodes the M characters before the padding; *SEEN carries the alphabet
 * across calls. @return the byte count, or -EINVAL. */
static long decode_body(unsigned char *o, const char *in, size_t m, unsigned flags, unsigned *seen)
{
	unsigned acc = 0;
	int bits = 0;
	size_t k = 0;
	for (size_t i = 0; i < m; i++) {
		int v = value((unsigned char)in[i], flags, seen);
		if (v < 0 || *seen == 3)
			return -EINVAL;
		acc = (acc << 6 | (unsigned)v) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[k++] = (unsigned char)(acc >> bits);
		}
	}
	/* The bits left over must be zero, or two strings decode alike. */
	if (bits && (acc & ((1u << bits) - 1)))
		return -EINVAL;
	return (long)k;
}

int sbx__base64_decode_to(void *out, size_t cap, size_t *len_out, const char *in, size_t n,
			  unsigned flags)
{
	size_t m;
	int r = check_padding(&m, in, n, flags);
	if (r < 0)
		return r;
	if (sbx__base64_decoded_max(m) > cap)
		return -ENOBUFS;
	unsigned seen = 0;
	long k = decode_body(out, in, m, flags, &seen);
	if (k < 0)
		return (int)k;
	*len_out = (size_t)k;
	return 0;
}

int sbx__base64_decode_buf(sbx_buf *b, const char *in, size_t n, unsigned flags)
{
	size_t m;
	int r = check_padding(&m, in, n, flags);
	if (r < 0)
		return r;
	if (sbx__base64_decoded_max(m) > b->max - b->len)
		return -E2BIG;
	size_t start = b->len;
	unsigned seen = 0;
	unsigned char chunk[48];
	for (size_t i = 0; i < m; i += 64) {
		long k = decode_body(chunk, in + i, m - i < 64 ? m - i : 64, flags, &seen);
		if (k < 0) {
			if (b->data) {
				explicit_bzero(b->data + start, b->len - start);
				b->len = start;
			}
			return (int)k;
		}
		sbx__buf_append(b, chunk, (size_t)k);
	}
	explicit_bzero(chunk, sizeof(chunk));
	if (!b->data)
		sbx__buf_append(b, "", 0);
	return 0;
}
