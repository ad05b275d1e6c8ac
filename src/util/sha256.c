/* SPDX-License-Identifier: MIT */
/* SHA-256 contexts and digests as lowercase hex (see sha256.h). */
#include <stdlib.h>

#include "sha256.h"

EVP_MD_CTX *sbx__sha256_new(void)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md)
		abort(); /* out of memory, by policy */
	sbx__sha256_reset(md);
	return md;
}

void sbx__sha256_reset(EVP_MD_CTX *md)
{
	/* Fails only without memory or without SHA-256 (a broken libcrypto). */
	if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
		abort();
}

void sbx__sha256_final_hex(EVP_MD_CTX *md, char out[SBX_SHA256_HEX_LEN + 1])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (EVP_DigestFinal_ex(md, d, &n) != 1 || n != SBX_SHA256_LEN)
		abort();
	sbx__hex_encode(out, d, SBX_SHA256_LEN);
}

void sbx__sha256_hex(char out[SBX_SHA256_HEX_LEN + 1], const void *data, size_t len)
{
	EVP_MD_CTX *md = sbx__sha256_new();
	EVP_DigestUpdate(md, data, len);
	sbx__sha256_final_hex(md, out);
	EVP_MD_CTX_free(md);
}

void sbx__hex_encode(char *out, const void *bytes, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = bytes;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}
