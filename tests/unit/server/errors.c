/* SPDX-License-Identifier: MIT */
/* The server's one error map: sbx codes to REST statuses and Connect codes,
 * Connect codes to their HTTP statuses, and the defaults for the rest. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "server/server_int.h"

static const struct {
	int code;
	int http;
	const char *connect;
} expect[] = {
	{ -ENOENT, 404, "not_found" },		{ -ESRCH, 404, "not_found" },
	{ -EEXIST, 409, "already_exists" },	{ -EINVAL, 400, "invalid_argument" },
	{ -EPERM, 403, "permission_denied" },	{ -EACCES, 403, "permission_denied" },
	{ -ETIMEDOUT, 504, "deadline_exceeded" }, { -ECANCELED, 499, "canceled" },
	{ -EAGAIN, 429, "resource_exhausted" }, { -E2BIG, 413, "resource_exhausted" },
	{ -ENOSPC, 507, "resource_exhausted" }, { -ENOSYS, 501, "unimplemented" },
	{ -ENOTEMPTY, 409, "failed_precondition" },
};

Test(server_errors, known_codes)
{
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		cr_expect_eq(sbx__srv_http_status(expect[i].code), expect[i].http, "code %d", expect[i].code);
		cr_expect_str_eq(sbx__srv_connect_code(expect[i].code), expect[i].connect, "code %d",
				 expect[i].code);
	}
}

Test(server_errors, anything_else_is_internal)
{
	int others[] = { 0, -EXDEV, -ENOMEM, -12345, 17 };
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		cr_expect_eq(sbx__srv_http_status(others[i]), 500);
		cr_expect_str_eq(sbx__srv_connect_code(others[i]), "internal");
	}
	cr_expect_eq(sbx__srv_connect_http_status("no_such_code"), 500);
}

/* Every Connect code the map can produce has its own HTTP status in the
 * Connect table (no silent fall-through to 500). */
Test(server_errors, every_connect_code_has_a_status)
{
	for (int e = 1; e < 200; e++) {
		const char *c = sbx__srv_connect_code(-e);
		if (strcmp(c, "internal") == 0)
			continue;
		int s = sbx__srv_connect_http_status(c);
		cr_expect_neq(s, 500, "%s (from -%d) has no Connect status", c, e);
	}
	cr_expect_eq(sbx__srv_connect_http_status("not_found"), 404);
	cr_expect_eq(sbx__srv_connect_http_status("unauthenticated"), 401);
	cr_expect_eq(sbx__srv_connect_http_status("failed_precondition"), 400);
}
