/* SPDX-License-Identifier: MIT */
/* passwd/group lookups over untrusted text: by name and by id, first match,
 * malformed lines skipped (never a half-parsed id), bounds respected. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "util/passwd.h"

static const char passwd[] =
	"root:x:0:0:root:/root:/bin/bash\n"
	"# a comment\n"
	"\n"
	"bad:x:12x:5:bad:/bad:/bin/sh\n"      /* id not a number */
	"short:x:7:7\n"                       /* too few fields */
	"huge:x:4294967295:0::/huge:/bin/sh\n" /* (uid_t)-1 is no id */
	"user:x:1000:1001:User:/home/user:/bin/sh\r\n"
	"user:x:2000:2000::/second:/bin/sh\n"
	"1234:x:1234:1234::/numeric:/bin/sh\n"
	"nohome:x:3000:3000:::/bin/sh";       /* no final newline */

static const char group[] = "root:x:0:\nwheel:x:10:root,user\nusers:x:100:\n";

static struct sbx_pwent e;

static void fini(void)
{
	sbx__pw_clear(&e);
}

TestSuite(util_passwd, .fini = fini);

Test(util_passwd, by_name_first_match)
{
	cr_assert_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "user"), 0);
	cr_expect_eq(e.id, 1000u);
	cr_expect_eq(e.gid, 1001u);
	cr_expect_str_eq(e.home, "/home/user"); /* CRLF line: no '\r' in the home */
	sbx__pw_clear(&e);
	cr_assert_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "nohome"), 0);
	cr_expect_str_eq(e.home, "");
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "use"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "user:x"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, ""), -ENOENT);
}

Test(util_passwd, malformed_lines_are_skipped)
{
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "bad"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "short"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "huge"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 0, "# a comment"), -ENOENT);
	cr_expect_eq(sbx__pw_by_id(&e, passwd, strlen(passwd), 0, 12), -ENOENT);
}

Test(util_passwd, by_id)
{
	cr_assert_eq(sbx__pw_by_id(&e, passwd, strlen(passwd), 0, 0), 0);
	cr_expect_str_eq(e.name, "root");
	sbx__pw_clear(&e);
	cr_assert_eq(sbx__pw_by_id(&e, passwd, strlen(passwd), 0, 1234), 0);
	cr_expect_str_eq(e.home, "/numeric");
	cr_expect_eq(sbx__pw_by_id(&e, passwd, strlen(passwd), 0, 4242), -ENOENT);
}

Test(util_passwd, groups)
{
	cr_assert_eq(sbx__pw_by_name(&e, group, strlen(group), 1, "wheel"), 0);
	cr_expect_eq(e.id, 10u);
	cr_expect_null(e.home);
	sbx__pw_clear(&e);
	cr_assert_eq(sbx__pw_by_id(&e, group, strlen(group), 1, 100), 0);
	cr_expect_str_eq(e.name, "users");
	/* a passwd line is not a group line, and the other way round */
	cr_expect_eq(sbx__pw_by_name(&e, passwd, strlen(passwd), 1, "root"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, group, strlen(group), 0, "root"), -ENOENT);
}

Test(util_passwd, stays_within_len)
{
	/* LEN cuts "user" off: the text past it is never read. */
	const char *cut = strstr(passwd, "user:x:1000");
	cr_expect_eq(sbx__pw_by_name(&e, passwd, (size_t)(cut - passwd) + 4, 0, "user"), -ENOENT);
	cr_expect_eq(sbx__pw_by_name(&e, NULL, 0, 0, "root"), -ENOENT);
	char nul[] = "ro\0t:x:0:0::/root:/bin/sh\n";
	cr_expect_eq(sbx__pw_by_id(&e, nul, sizeof(nul) - 1, 0, 0), -ENOENT);
}
