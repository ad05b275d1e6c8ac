/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "util/buf.h"

Test(util_buf, append_within_max)
{
	sbx_buf b;
	sbx__buf_init(&b, 8);
	cr_assert_eq(sbx__buf_append(&b, "abcd", 4), 0);
	cr_assert_eq(sbx__buf_append(&b, "efgh", 4), 0);
	cr_assert_str_eq(b.data, "abcdefgh");
	cr_assert_eq(sbx__buf_append(&b, "x", 1), -E2BIG);
	cr_assert_eq(b.len, 8);
	sbx__buf_free(&b);
}

Test(util_buf, truncating_append_reports_dropped)
{
	sbx_buf b;
	sbx__buf_init(&b, 5);
	cr_assert_eq(sbx__buf_append_trunc(&b, "123", 3), 0);
	cr_assert_eq(sbx__buf_append_trunc(&b, "4567", 4), 2);
	cr_assert_str_eq(b.data, "12345");
	size_t n;
	char *s = sbx__buf_steal(&b, &n);
	cr_assert_eq(n, 5);
	cr_assert_null(b.data);
	free(s);
}

Test(util_buf, steal_empty_gives_empty_string)
{
	sbx_buf b;
	sbx__buf_init(&b, 10);
	size_t n = 99;
	char *s = sbx__buf_steal(&b, &n);
	cr_assert_str_eq(s, "");
	cr_assert_eq(n, 0);
	free(s);
}
