/* SPDX-License-Identifier: MIT */
/*
 * What each base64 reader of the server accepts: exactly what real clients
 * send, nothing looser. /files URL signatures are E2B's "v1_" + standard
 * base64 without '='; Basic credentials are standard padded base64 (btoa,
 * base64.b64encode, curl -u); protobuf JSON bytes (process input) take
 * either alphabet with optional padding, as the proto3 JSON mapping says.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

/* sha256("/home/user/a.txt:read:user:tok") in standard base64. */
#define SIG_READ "p0WqJQYCLtO6YX+e4h7VbpybRsdJbMbIw7clYpulIJk"
/* sha256("/home/user/a.txt:write::tok:4102444800"), '+' and '/' inside. */
#define SIG_WRITE "Bmg/l36pAnoXXl94JBx8ZCMUmng5s+vDCjyELPiPl0Q"

Test(server_encodings, signature_is_e2b_scheme)
{
	cr_expect(sbx__srv_auth_signature_ok("tok", "/home/user/a.txt", "read", "user", "v1_" SIG_READ, NULL));
	cr_expect(sbx__srv_auth_signature_ok("tok", "/home/user/a.txt", "write", NULL, "v1_" SIG_WRITE,
					     "4102444800"));
	/* The SDK strips '='; a padded or URL-safe spelling is not what it sends. */
	cr_expect(!sbx__srv_auth_signature_ok("tok", "/home/user/a.txt", "read", "user", "v1_" SIG_READ "=", NULL));
	cr_expect(!sbx__srv_auth_signature_ok("tok", "/home/user/a.txt", "write", NULL,
					      "v1_Bmg_l36pAnoXXl94JBx8ZCMUmng5s-vDCjyELPiPl0Q", "4102444800"));
	cr_expect(!sbx__srv_auth_signature_ok("tok", "/home/user/a.txt", "read", "user", SIG_READ, NULL));
	cr_expect(!sbx__srv_auth_signature_ok("other", "/home/user/a.txt", "read", "user", "v1_" SIG_READ, NULL));
	cr_expect(!sbx__srv_auth_signature_ok("tok", "/home/user/a.txt", "write", NULL, "v1_" SIG_WRITE, "1"));
}

static void expect_user(const char *header, const char *want)
{
	char *u = sbx__srv_auth_basic_user(header);
	if (want)
		cr_expect(u && strcmp(u, want) == 0, "%s: got %s, want %s", header, u ? u : "(null)", want);
	else
		cr_expect(u == NULL, "%s: got %s, want nothing", header, u);
	free(u);
}

Test(server_encodings, basic_credentials_are_standard_padded)
{
	expect_user("Basic cm9vdDo=", "root");
	expect_user("basic dXNlcjo=", "user");
	expect_user("Basic YT4/Og==", "a>?");
	expect_user("Basic dXNlcjpwYXNz", "user"); /* "user:pass": no padding needed */
	expect_user("Basic cm9vdDo", NULL);       /* padding left out */
	expect_user("Basic YT4_Og==", NULL);      /* URL-safe alphabet */
	expect_user("Basic cm9v\r\ndDo=", NULL);  /* line breaks inside */
	expect_user("Basic cm9vdDo=cm9v", NULL);  /* data after padding */
	expect_user("Basic Og==", NULL);          /* ":" alone: no user */
	expect_user("Bearer cm9vdDo=", NULL);
}

static void expect_bytes(const char *in, const char *want)
{
	sbx_buf b;
	sbx__buf_init(&b, 1024);
	int r = sbx__srv_json_bytes_decode(&b, in);
	if (want) {
		cr_expect_eq(r, 0, "%s: %d", in, r);
		cr_expect(r == 0 && b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "%s", in);
	} else {
		cr_expect_eq(r, -EINVAL, "%s: %d", in, r);
		cr_expect_eq(b.len, 0u, "%s", in);
	}
	sbx__buf_free(&b);
}

Test(server_encodings, json_bytes_either_alphabet_padding_optional)
{
	expect_bytes("aGk=", "hi");      /* what the SDK sends */
	expect_bytes("aGk", "hi");
	expect_bytes("", "");
	expect_bytes("fn5+Og==", "~~~:");
	expect_bytes("fn5-Og", "~~~:");
	expect_bytes("fn5+Og", "~~~:");
	expect_bytes("fn5-Og==", "~~~:");
	expect_bytes("YT4/Og-=", NULL);  /* both alphabets in one string */
	expect_bytes("aG\nk=", NULL);    /* whitespace is not in the mapping */
	expect_bytes("aGk==", NULL);
	expect_bytes("a=Gk", NULL);
	expect_bytes("aGl", NULL);       /* non-zero trailing bits */
	expect_bytes("a", NULL);
	char *e = sbx__srv_json_bytes_encode("~~~:", 4);
	cr_expect_str_eq(e, "fn5+Og==");
	free(e);
}
