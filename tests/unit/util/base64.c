/* SPDX-License-Identifier: MIT */
/* Base64: RFC 4648 section 10 vectors, both alphabets, padding modes, bad input, bounds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/base64.h"

static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
static const char *const padded[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
static const char *const bare[] = { "", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy" };

static void decodes(const char *in, unsigned flags, const void *want, size_t want_len)
{
	unsigned char out[256];
	size_t n = 12345;
	int r = sbx__base64_decode_to(out, sizeof(out), &n, in, strlen(in), flags);
	cr_assert_eq(r, 0, "decode '%s' (flags %u): %d", in, flags, r);
	cr_assert_eq(n, want_len, "decode '%s': %zu bytes", in, n);
	cr_assert_eq(memcmp(out, want, n), 0, "decode '%s'", in);
}

static void refuses(const char *in, size_t len, unsigned flags)
{
	unsigned char out[256];
	size_t n = 0;
	int r = sbx__base64_decode_to(out, sizeof(out), &n, in, len, flags);
	cr_assert_eq(r, -EINVAL, "'%.*s' (flags %u) gave %d", (int)len, in, flags, r);
	sbx_buf b;
	sbx__buf_init(&b, 1024);
	sbx__buf_append(&b, "keep", 4);
	cr_assert_eq(sbx__base64_decode_buf(&b, in, len, flags), -EINVAL);
	cr_assert_eq(b.len, 4);
	cr_assert_str_eq(b.data, "keep");
	sbx__buf_free(&b);
}

Test(util_base64, rfc4648_vectors_encode)
{
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		size_t n = strlen(plain[i]);
		char *e = sbx__base64_encode(plain[i], n, SBX_B64_STD);
		cr_assert_str_eq(e, padded[i]);
		cr_assert_eq(sbx__base64_encoded_len(n, SBX_B64_STD), strlen(padded[i]));
		free(e);
		e = sbx__base64_encode(plain[i], n, SBX_B64_NOPAD);
		cr_assert_str_eq(e, bare[i]);
		cr_assert_eq(sbx__base64_encoded_len(n, SBX_B64_NOPAD), strlen(bare[i]));
		free(e);
	}
}

Test(util_base64, rfc4648_vectors_decode)
{
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		size_t n = strlen(plain[i]);
		decodes(padded[i], SBX_B64_STD, plain[i], n);
		decodes(padded[i], SBX_B64_PAD_OPTIONAL, plain[i], n);
		decodes(bare[i], SBX_B64_PAD_OPTIONAL, plain[i], n);
		decodes(bare[i], SBX_B64_NOPAD, plain[i], n);
		if (strcmp(padded[i], bare[i]) != 0) {
			/* padding required by default, refused with NOPAD */
			refuses(bare[i], strlen(bare[i]), SBX_B64_STD);
			refuses(padded[i], strlen(padded[i]), SBX_B64_NOPAD);
		}
	}
}

Test(util_base64, alphabets)
{
	static const unsigned char fb[] = { 0xfb, 0xff, 0xbf };
	char *e = sbx__base64_encode(fb, 3, SBX_B64_STD);
	cr_assert_str_eq(e, "+/+/");
	free(e);
	e = sbx__base64_encode(fb, 3, SBX_B64_URL);
	cr_assert_str_eq(e, "-_-_");
	free(e);
	e = sbx__base64_encode(fb, 2, SBX_B64_URL | SBX_B64_NOPAD);
	cr_assert_str_eq(e, "-_8");
	free(e);
	decodes("+/+/", SBX_B64_STD, fb, 3);
	decodes("-_-_", SBX_B64_URL, fb, 3);
	decodes("-_8", SBX_B64_URL | SBX_B64_NOPAD, fb, 2);
	decodes("-_8", SBX_B64_ANY_ALPHABET | SBX_B64_PAD_OPTIONAL, fb, 2);
	decodes("+/8=", SBX_B64_ANY_ALPHABET | SBX_B64_PAD_OPTIONAL, fb, 2);
	refuses("-_-_", 4, SBX_B64_STD);
	refuses("+/+/", 4, SBX_B64_URL);
	/* one string, one alphabet */
	refuses("+_-/", 4, SBX_B64_ANY_ALPHABET);
}

Test(util_base64, bad_characters)
{
	refuses("Zm9*", 4, SBX_B64_STD);
	refuses("Zm 9v", 5, SBX_B64_PAD_OPTIONAL);
	refuses("Zm9v\n", 5, SBX_B64_PAD_OPTIONAL);
	refuses(" Zm9v", 5, SBX_B64_PAD_OPTIONAL);
	refuses("Zm\0v", 4, SBX_B64_STD);
	refuses("Zm9\xc3\xa9", 5, SBX_B64_PAD_OPTIONAL);
	refuses("a*==", 4, SBX_B64_ANY_ALPHABET | SBX_B64_PAD_OPTIONAL);
}

Test(util_base64, bad_padding)
{
	const unsigned any = SBX_B64_PAD_OPTIONAL;
	refuses("Zg=", 3, any);          /* half the padding */
	refuses("Zm8==", 5, any);        /* one too many */
	refuses("Z===", 4, any);         /* a lone sextet */
	refuses("====", 4, any);
	refuses("=", 1, any);
	refuses("Zm9v=", 5, any);
	refuses("Zg==Zg==", 8, any);     /* padding in the middle */
	refuses("Zm=v", 4, any);
	refuses("Zm9vY", 5, any);        /* 4k+1 characters */
	refuses("abcde", 5, any);
	/* non-zero bits after the last byte: "Zh==" would also mean "f" */
	refuses("Zh==", 4, SBX_B64_STD);
	refuses("Zm9=", 4, SBX_B64_STD);
	refuses("Zh", 2, SBX_B64_NOPAD);
}

Test(util_base64, bounded_output)
{
	unsigned char out[6];
	size_t n;
	cr_assert_eq(sbx__base64_decode_to(out, 5, &n, "Zm9vYmFy", 8, 0), -ENOBUFS);
	cr_assert_eq(sbx__base64_decode_to(out, 4, &n, "Zm9vYmE=", 8, 0), -ENOBUFS);
	cr_assert_eq(sbx__base64_decode_to(out, 5, &n, "Zm9vYmE=", 8, 0), 0);
	cr_assert_eq(n, 5);
	cr_assert_eq(sbx__base64_decode_to(out, 6, &n, "Zm9vYmFy", 8, 0), 0);
	cr_assert_eq(memcmp(out, "foobar", 6), 0);

	char enc[9];
	cr_assert_eq(sbx__base64_encode_to(enc, 8, "foobar", 6, 0), -ENOBUFS);
	cr_assert_eq(sbx__base64_encode_to(enc, 9, "foobar", 6, 0), 8);
	cr_assert_str_eq(enc, "Zm9vYmFy");
	cr_assert_eq(sbx__base64_encode_to(enc, 0, "", 0, 0), -ENOBUFS);

	sbx_buf b;
	sbx__buf_init(&b, 7);
	cr_assert_eq(sbx__base64_encode_buf(&b, "foobar", 6, 0), -E2BIG);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(sbx__base64_encode_buf(&b, "fooba", 5, SBX_B64_NOPAD), 0);
	cr_assert_str_eq(b.data, "Zm9vYmE");
	sbx__buf_free(&b);
	sbx__buf_init(&b, 5);
	cr_assert_eq(sbx__base64_decode_buf(&b, "Zm9vYmFy", 8, 0), -E2BIG);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(sbx__base64_decode_buf(&b, "Zm9vYmE=", 8, 0), 0);
	cr_assert_str_eq(b.data, "fooba");
	sbx__buf_free(&b);
	sbx__buf_init(&b, 5);
	cr_assert_eq(sbx__base64_decode_buf(&b, "", 0, 0), 0);
	cr_assert_not_null(b.data);
	cr_assert_eq(b.len, 0);
	sbx__buf_free(&b);
}

/* Long inputs cross pieces of the chunked buffer paths; OpenSSL is the reference. */
Test(util_base64, long_inputs_match_openssl)
{
	unsigned char raw[1000];
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (unsigned char)(i * 131 + 7);
	for (size_t len = 0; len <= sizeof(raw); len += len < 200 ? 1 : 97) {
		unsigned char ref[1400];
		int rn = EVP_EncodeBlock(ref, raw, (int)len);
		char *e = sbx__base64_encode(raw, len, SBX_B64_STD);
		cr_assert_eq(strlen(e), (size_t)rn);
		cr_assert_eq(memcmp(e, ref, (size_t)rn), 0, "len %zu", len);
		sbx_buf b;
		sbx__buf_init(&b, 4096);
		cr_assert_eq(sbx__base64_encode_buf(&b, raw, len, SBX_B64_STD), 0);
		cr_assert_str_eq(b.data, e);
		sbx__buf_free(&b);
		sbx__buf_init(&b, len);
		cr_assert_eq(sbx__base64_decode_buf(&b, e, strlen(e), SBX_B64_STD), 0);
		cr_assert_eq(b.len, len);
		cr_assert_eq(memcmp(b.data, raw, len), 0, "len %zu", len);
		sbx__buf_free(&b);
		free(e);
		e = sbx__base64_encode(raw, len, SBX_B64_URL | SBX_B64_NOPAD);
		sbx__buf_init(&b, len);
		cr_assert_eq(sbx__base64_decode_buf(&b, e, strlen(e), SBX_B64_ANY_ALPHABET |
						    SBX_B64_PAD_OPTIONAL), 0);
		cr_assert_eq(b.len, len);
		cr_assert_eq(memcmp(b.data, raw, len), 0, "len %zu", len);
		sbx__buf_free(&b);
		free(e);
	}
}
