/* SPDX-License-Identifier: MIT */
/* Command output as JSON text (daytona/process.c): valid UTF-8 passes
 * unchanged (NUL too, as \u0000); each byte that is not becomes U+FFFD, so
 * a binary output never makes the reply fail or carry invalid JSON. */
#include <criterion/criterion.h>
#include <string.h>

#include "server/daytona/daytona.h"

static void expect_text(const char *in, size_t len, const char *want)
{
	json_t *j = sbx__dt_text(in, len);
	cr_assert_not_null(j);
	cr_expect_str_eq(json_string_value(j), want);
	json_decref(j);
}

Test(server_daytona_process, utf8_passes_unchanged)
{
	expect_text("", 0, "");
	expect_text("out\nerr\n", 8, "out\nerr\n");
	expect_text("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12, "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

Test(server_daytona_process, nul_is_kept)
{
	json_t *j = sbx__dt_text("a\0b", 3);
	cr_assert_eq(json_string_length(j), 3);
	cr_expect_eq(memcmp(json_string_value(j), "a\0b", 3), 0);
	json_decref(j);
}

Test(server_daytona_process, bad_bytes_become_replacement_characters)
{
	expect_text("a\xff" "b", 3, "a\xef\xbf\xbd" "b");
	expect_text("\xc3", 1, "\xef\xbf\xbd");                  /* cut sequence */
	expect_text("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd");  /* overlong */
	expect_text("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
	expect_text("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* > U+10FFFF */
}
