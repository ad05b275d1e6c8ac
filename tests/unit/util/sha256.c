/* SPDX-License-Identifier: MIT */
/* SHA-256 as hex: FIPS 180-2 vectors, incremental use, reset, plain hex. */
#include <criterion/criterion.h>
#include <string.h>

#include "util/sha256.h"

Test(util_sha256, known_vectors)
{
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_hex(hex, "", 0);
	cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sbx__sha256_hex(hex, "abc", 3);
	cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sbx__sha256_hex(hex, two, strlen(two));
	cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(util_sha256, incremental_and_reset)
{
	char a[SBX_SHA256_HEX_LEN + 1], b[SBX_SHA256_HEX_LEN + 1];
	EVP_MD_CTX *md = sbx__sha256_new();
	EVP_DigestUpdate(md, "ignored", 7);
	sbx__sha256_reset(md);
	EVP_DigestUpdate(md, "a", 1);
	EVP_DigestUpdate(md, "bc", 2);
	sbx__sha256_final_hex(md, a);
	EVP_MD_CTX_free(md);
	sbx__sha256_hex(b, "abc", 3);
	cr_assert_str_eq(a, b);
}

Test(util_sha256, hex_encode)
{
	char out[9];
	sbx__hex_encode(out, "\x00\x0f\xa0\xff", 4);
	cr_assert_str_eq(out, "000fa0ff");
	sbx__hex_encode(out, "", 0);
	cr_assert_str_eq(out, "");
}

Test(util_sha256, raw_digest_matches_hex)
{
	unsigned char raw[SBX_SHA256_LEN];
	char hex[SBX_SHA256_HEX_LEN + 1], again[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256(raw, "abc", 3);
	sbx__hex_encode(again, raw, sizeof(raw));
	sbx__sha256_hex(hex, "abc", 3);
	cr_assert_str_eq(again, hex);
}

/* The one-shot digest (computed in sha256.c) agrees with libcrypto's stream
 * at every length around the block and padding boundaries. */
Test(util_sha256, oneshot_matches_libcrypto)
{
	unsigned char data[300];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 131 + 7);
	for (size_t n = 0; n <= sizeof(data); n++) {
		char a[SBX_SHA256_HEX_LEN + 1], b[SBX_SHA256_HEX_LEN + 1];
		sbx__sha256_hex(a, data, n);
		EVP_MD_CTX *md = sbx__sha256_new();
		EVP_DigestUpdate(md, data, n);
		sbx__sha256_final_hex(md, b);
		EVP_MD_CTX_free(md);
		cr_assert_str_eq(a, b, "length %zu", n);
	}
}
