/* SPDX-License-Identifier: MIT */
/*
 * Base64 (RFC 4648): the standard and the URL-safe alphabet, encode and
 * strict decode. Decoding rejects characters outside the alphabet, padding
 * that is missing (unless optional), misplaced or excessive, and non-zero
 * bits after the last full byte, so every input has at most one meaning.
 */
#ifndef SBX_UTIL_BASE64_H
#define SBX_UTIL_BASE64_H

#include <stddef.h>

#include "buf.h"

/* Standard alphabet ('+', '/'), padded with '='. */
#define SBX_B64_STD 0u
/* URL-safe alphabet ('-', '_') instead of the standard one. */
#define SBX_B64_URL 1u
/* Encode without '='; decode refuses '=' and takes any length but 4k+1. */
#define SBX_B64_NOPAD 2u
/* Decode only: '=' may be left out, but when present it must be right. */
#define SBX_B64_PAD_OPTIONAL 4u
/* Decode only: either alphabet (not both in one string); protobuf JSON
 * bytes fields are specified so. */
#define SBX_B64_ANY_ALPHABET 8u

/* Length of the encoding of N bytes, without a NUL. */
size_t sbx__base64_encoded_len(size_t n, unsigned flags);
/* Upper bound of the bytes N characters decode to. */
size_t sbx__base64_decoded_max(size_t n);

/*
 * Encodes LEN bytes into OUT (CAP bytes, NUL-terminated).
 * @return the length written without the NUL, or -ENOBUFS when CAP is too small.
 */
long sbx__base64_encode_to(char *out, size_t cap, const void *data, size_t len, unsigned flags);
/* Appends the encoding to B. @return 0 or -E2BIG (nothing appended). */
int sbx__base64_encode_buf(sbx_buf *b, const void *data, size_t len, unsigned flags);
/* The encoding as an owned string (aborts on OOM: DATA is already in memory). */
char *sbx__base64_encode(const void *data, size_t len, unsigned flags);

/*
 * Decodes N characters of IN into OUT (CAP bytes); *LEN_OUT is the byte count.
 * @return 0, -EINVAL (bad character, padding or trailing bits), -ENOBUFS.
 */
int sbx__base64_decode_to(void *out, size_t cap, size_t *len_out, const char *in, size_t n,
			  unsigned flags);
/* Appends the decoding to B. @return 0, -EINVAL, -E2BIG (B unchanged on error). */
int sbx__base64_decode_buf(sbx_buf *b, const char *in, size_t n, unsigned flags);

#endif
