/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"

Test(util_fs, mkdir_write_read_rm)
{
	char tmpl[] = "/tmp/sbx-fs-XXXXXX";
	cr_assert_not_null(mkdtemp(tmpl));
	char p[256], f[300];
	snprintf(p, sizeof(p), "%s/a/b/c", tmpl);
	cr_assert_eq(sbx__mkdir_p(p, 0755, NULL), 0);
	snprintf(f, sizeof(f), "%s/file", p);
	cr_assert_eq(sbx__write_file_atomic(f, "hello", 5, 0600, NULL), 0);
	struct stat st;
	cr_assert_eq(stat(f, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	char *data;
	size_t n;
	cr_assert_eq(sbx__read_file(&data, &n, f, 100, NULL), 0);
	cr_assert_eq(n, 5);
	cr_assert_str_eq(data, "hello");
	free(data);
	sbx_error *e = NULL;
	cr_assert_eq(sbx__read_file(&data, &n, f, 3, &e), -EFBIG);
	sbx_error_free(e);
	snprintf(f, sizeof(f), "%s/a/link", tmpl);
	cr_assert_eq(symlink("/etc", f), 0);
	cr_assert_eq(sbx__rm_rf(tmpl, NULL), 0);
	cr_assert_eq(access(tmpl, F_OK), -1);
	cr_assert_eq(access("/etc/hostname", F_OK) == 0 || errno == ENOENT, 1);
}
