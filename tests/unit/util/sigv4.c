/* SPDX-License-Identifier: MIT */
/*
 * util/sigv4 against AWS's published vectors: the SigV4 test suite's
 * get-vanilla and get-vanilla-query-order-key-case, and the S3 developer
 * guide's GET Object (with Range) and PUT Object examples (header form).
 * The keys are AWS's documented example keys, not secrets.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/lazy.h"
#include "util/sigv4.h"

#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define S3_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static void load(void)
{
	cr_assert_eq(sbx__lazy_load(&sbx__lazy_crypto, NULL), 0);
}

TestSuite(sigv4, .init = load);

Test(sigv4, suite_get_vanilla)
{
	const char *h[] = { "Host: example.amazonaws.com", "X-Amz-Date: 20150830T123600Z", NULL };
	struct sbx_sigv4 s = { .method = "GET", .path = "/", .headers = h, .payload_hash = SBX_SIGV4_EMPTY_SHA256,
			       .amz_date = "20150830T123600Z", .region = "us-east-1", .service = "service",
			       .secret = SUITE_SECRET };
	char sig[65];
	char *cr = NULL, *sh = NULL;
	cr_assert_eq(sbx__sigv4_sign(sig, &cr, &sh, &s, NULL), 0);
	cr_expect_str_eq(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	cr_expect_str_eq(sh, "host;x-amz-date");
	cr_expect_str_eq(cr, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
			     SBX_SIGV4_EMPTY_SHA256);
	free(cr);
	free(sh);
}

Test(sigv4, suite_query_order_key_case)
{
	const char *h[] = { "host:example.amazonaws.com", "x-amz-date:20150830T123600Z", NULL };
	struct sbx_sigv4 s = { .method = "GET", .path = "/", .query = "Param2=value2&Param1=value1", .headers = h,
			       .payload_hash = SBX_SIGV4_EMPTY_SHA256, .amz_date = "20150830T123600Z",
			       .region = "us-east-1", .service = "service", .secret = SUITE_SECRET };
	char sig[65];
	cr_assert_eq(sbx__sigv4_sign(sig, NULL, NULL, &s, NULL), 0);
	cr_expect_str_eq(sig, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

Test(sigv4, s3_get_object_with_range)
{
	/* header order and case do not matter; values are trimmed */
	const char *h[] = { "x-amz-date: 20130524T000000Z", "Range:   bytes=0-9 ",
			    "x-amz-content-sha256: " SBX_SIGV4_EMPTY_SHA256, "Host: examplebucket.s3.amazonaws.com",
			    NULL };
	struct sbx_sigv4 s = { .method = "GET", .path = "/test.txt", .headers = h,
			       .payload_hash = SBX_SIGV4_EMPTY_SHA256, .amz_date = "20130524T000000Z",
			       .region = "us-east-1", .service = "s3", .secret = S3_SECRET };
	char sig[65];
	cr_assert_eq(sbx__sigv4_sign(sig, NULL, NULL, &s, NULL), 0);
	cr_expect_str_eq(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

Test(sigv4, s3_put_object)
{
	const char *body_hash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
	char xc[100];
	snprintf(xc, sizeof(xc), "x-amz-content-sha256: %s", body_hash);
	const char *h[] = { "Date: Fri, 24 May 2013 00:00:00 GMT", "Host: examplebucket.s3.amazonaws.com", xc,
			    "x-amz-date: 20130524T000000Z", "x-amz-storage-class: REDUCED_REDUNDANCY", NULL };
	char *path = sbx__sigv4_uri_encode("/test$file.text", 1);
	cr_expect_str_eq(path, "/test%24file.text");
	struct sbx_sigv4 s = { .method = "PUT", .path = path, .headers = h, .payload_hash = body_hash,
			       .amz_date = "20130524T000000Z", .region = "us-east-1", .service = "s3",
			       .secret = S3_SECRET };
	char sig[65];
	cr_assert_eq(sbx__sigv4_sign(sig, NULL, NULL, &s, NULL), 0);
	cr_expect_str_eq(sig, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
	free(path);
}

Test(sigv4, a_wrong_secret_or_date_changes_or_fails)
{
	const char *h[] = { "host:example.amazonaws.com", NULL };
	struct sbx_sigv4 s = { .method = "GET", .path = "/", .headers = h, .amz_date = "20150830T123600Z",
			       .region = "us-east-1", .service = "service", .secret = "other" };
	char sig[65];
	cr_assert_eq(sbx__sigv4_sign(sig, NULL, NULL, &s, NULL), 0);
	cr_expect_str_neq(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	s.amz_date = "2015-08-30";
	sbx_error *e = NULL;
	cr_expect_eq(sbx__sigv4_sign(sig, NULL, NULL, &s, &e), -EINVAL);
	cr_expect(e && strstr(e->msg, "x-amz-date"));
	sbx_error_free(e);
	const char *bad[] = { "no colon here", NULL };
	s.amz_date = "20150830T123600Z";
	s.headers = bad;
	e = NULL;
	cr_expect_eq(sbx__sigv4_sign(sig, NULL, NULL, &s, &e), -EINVAL);
	sbx_error_free(e);
}

Test(sigv4, uri_encode)
{
	char *a = sbx__sigv4_uri_encode("a b/c~d=e", 0), *b = sbx__sigv4_uri_encode("a b/c", 1);
	cr_expect_str_eq(a, "a%20b%2Fc~d%3De");
	cr_expect_str_eq(b, "a%20b/c");
	free(a);
	free(b);
}
