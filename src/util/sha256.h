/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 through libcrypto's EVP interface, and lowercase hex: the one way
 * digests become text (image ids, layer and blob digests, template hashes).
 * Contexts come from here initialised; allocation failure aborts by policy.
 */
#ifndef SBX_UTIL_SHA256_H
#define SBX_UTIL_SHA256_H

#include <stddef.h>

#include <openssl/evp.h>

#define SBX_SHA256_LEN 32
#define SBX_SHA256_HEX_LEN 64

/* A context ready for EVP_DigestUpdate; free with EVP_MD_CTX_free. */
EVP_MD_CTX *sbx__sha256_new(void);
/* Starts MD over, as a fresh SHA-256. */
void sbx__sha256_reset(EVP_MD_CTX *md);
/* Finishes MD into 64 hex digits and a NUL. */
void sbx__sha256_final_hex(EVP_MD_CTX *md, char out[SBX_SHA256_HEX_LEN + 1]);
/* Finishes MD into the raw 32-byte digest. */
void sbx__sha256_final(EVP_MD_CTX *md, unsigned char out[SBX_SHA256_LEN]);
/* Raw SHA-256 of LEN bytes (for encodings other than hex). The one-shot
 * pair never loads libcrypto (see sha256.c). */
void sbx__sha256(unsigned char out[SBX_SHA256_LEN], const void *data, size_t len);
/* Hex of the SHA-256 of LEN bytes. */
void sbx__sha256_hex(char out[SBX_SHA256_HEX_LEN + 1], const void *data, size_t len);
/* Lowercase hex of N bytes into OUT (2N + 1 bytes, NUL-terminated). */
void sbx__hex_encode(char *out, const void *bytes, size_t n);

#endif
