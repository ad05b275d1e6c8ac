/* SPDX-License-Identifier: MIT */
/* libcrypto (SHA-256 streams, SHA-1, HMAC-SHA256 for SigV4), loaded at first use (see lazy.h). */
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "lazy.h"

/* The Debian 12 soname (stable for a decade) and its package. */
sbx__lazy_lib sbx__lazy_crypto = SBX_LAZY_LIB_INIT("libcrypto.so.3", "libcrypto", "libssl3");

#define FAIL 0 /* what EVP functions return on failure */

SBX_LAZY(sbx__lazy_crypto, int, FAIL, EVP_DigestFinal_ex, (EVP_MD_CTX *a0, unsigned char *a1, unsigned int *a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_crypto, int, FAIL, EVP_DigestInit_ex, (EVP_MD_CTX *a0, const EVP_MD *a1, ENGINE *a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_crypto, int, FAIL, EVP_DigestUpdate, (EVP_MD_CTX *a0, const void *a1, size_t a2), (a0, a1, a2))
SBX_LAZY_VOID(sbx__lazy_crypto, EVP_MD_CTX_free, (EVP_MD_CTX *a0), (a0))
SBX_LAZY(sbx__lazy_crypto, EVP_MD_CTX *, NULL, EVP_MD_CTX_new, (void), ())
SBX_LAZY(sbx__lazy_crypto, const EVP_MD *, NULL, EVP_sha256, (void), ())
SBX_LAZY(sbx__lazy_crypto, unsigned char *, NULL, SHA1, (const unsigned char *a0, size_t a1, unsigned char *a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_crypto, unsigned char *, NULL, HMAC,
	 (const EVP_MD *a0, const void *a1, int a2, const unsigned char *a3, size_t a4, unsigned char *a5,
	  unsigned int *a6),
	 (a0, a1, a2, a3, a4, a5, a6))
