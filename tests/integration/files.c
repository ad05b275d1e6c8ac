/* SPDX-License-Identifier: MIT */
/* Files: binary round trips, modes, big files, trees, clear errors, escapes. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

TestSuite(files, .init = setup, .fini = teardown);

Test(files, binary_round_trip_and_modes)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char data[4096];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + (i >> 8));
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "/a/b/c/data.bin", data, sizeof(data), 0755, &err), 0, "%s",
		     err ? err->msg : "");
	void *back = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_read_file(&back, &n, sb, "/a/b/c/data.bin", 0, &err), 0);
	cr_assert_eq(n, sizeof(data));
	cr_assert_eq(memcmp(back, data, n), 0);
	free(back);
	int code;
	char *out = sbx_test_sh(sb, "stat -c %a /a/b/c/data.bin; md5sum /a/b/c/data.bin | cut -c1-8", &code);
	cr_assert_eq(strncmp(out, "755\n", 4), 0, "%s", out);
	free(out);
	cr_assert_eq(sbx_sandbox_write_file(sb, "/a/script.sh", "#!/bin/sh\necho ran\n", 19, 0700, NULL), 0);
	out = sbx_test_sh(sb, "/a/script.sh; stat -c %a /a/script.sh", &code);
	cr_assert_str_eq(out, "ran\n700\n");
	free(out);
	/* empty files too */
	cr_assert_eq(sbx_sandbox_write_file(sb, "/empty", "", 0, 0644, NULL), 0);
	cr_assert_eq(sbx_sandbox_read_file(&back, &n, sb, "/empty", 0, NULL), 0);
	cr_assert_eq(n, 0);
	free(back);
	destroy(sb);
}

Test(files, hundred_mib_file)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	size_t len = 100u << 20;
	unsigned char *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)(i ^ (i >> 11));
	cr_assert_eq(sbx_sandbox_write_file(sb, "/big", data, len, 0644, NULL), 0);
	int code;
	char *out = sbx_test_sh(sb, "wc -c < /big", &code);
	cr_assert_eq(atol(out), (long)len);
	free(out);
	void *back = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_read_file(&back, &n, sb, "/big", 0, NULL), 0);
	cr_assert_eq(n, len);
	cr_assert_eq(memcmp(back, data, len), 0);
	free(back);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_read_file(&back, &n, sb, "/big", 1 << 20, &err), -EFBIG);
	sbx_error_free(err);
	free(data);
	destroy(sb);
}

Test(files, missing_file_is_a_clear_error)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	void *back = NULL;
	size_t n;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_read_file(&back, &n, sb, "/no/such/file", 0, &err), -ENOENT);
	cr_assert_not_null(strstr(err->msg, "/no/such/file"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "No such file"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_read_file(&back, &n, sb, "/etc", 0, &err), -EISDIR);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "relative", "x", 1, 0644, &err), -EINVAL);
	sbx_error_free(err);
	destroy(sb);
}

Test(files, symlinks_cannot_escape_to_the_host)
{
	char dir[] = "/tmp/sbx-escape-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char host[300];
	snprintf(host, sizeof(host), "%s/victim", dir);
	FILE *f = fopen(host, "w");
	fputs("original", f);
	fclose(f);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s; ln -s %s /link; mkdir -p /d; ln -s / /d/up", dir, host);
	int code;
	free(sbx_test_sh(sb, cmd, &code));
	cr_assert_eq(sbx_sandbox_write_file(sb, "/link", "pwned", 5, 0644, NULL), 0);
	char tmp[400];
	snprintf(tmp, sizeof(tmp), "/d/up/../..%s", host);
	sbx_sandbox_write_file(sb, tmp, "pwned", 5, 0644, NULL);
	char buf[32] = "";
	f = fopen(host, "r");
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "original");
	/* the writes landed inside the sandbox instead */
	snprintf(cmd, sizeof(cmd), "cat %s", host);
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert_str_eq(out, "pwned");
	free(out);
	destroy(sb);
	unlink(host);
	rmdir(dir);
}

Test(files, upload_and_download_trees)
{
	char src[] = "/tmp/sbx-tree-XXXXXX";
	cr_assert_not_null(mkdtemp(src));
	char p[400];
	snprintf(p, sizeof(p), "mkdir -p %s/t/sub && printf one > %s/t/a.txt && printf two > %s/t/sub/b.sh "
			       "&& chmod 750 %s/t/sub/b.sh && ln -s a.txt %s/t/link",
		 src, src, src, src, src);
	cr_assert_eq(system(p), 0);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	snprintf(p, sizeof(p), "%s/t", src);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_upload(sb, p, "/tests", &err), 0, "%s", err ? err->msg : "");
	int code;
	char *out = sbx_test_sh(sb, "cat /tests/a.txt /tests/sub/b.sh; stat -c %a /tests/sub/b.sh; readlink /tests/link",
			       &code);
	cr_assert_str_eq(out, "onetwo750\na.txt\n");
	free(out);
	free(sbx_test_sh(sb, "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt", &code));
	snprintf(p, sizeof(p), "%s/out", src);
	cr_assert_eq(sbx_sandbox_download(sb, "/logs", p, &err), 0, "%s", err ? err->msg : "");
	snprintf(p, sizeof(p), "%s/out/verifier/reward.txt", src);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f, "%s missing", p);
	char buf[8] = "";
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "1\n");
	cr_assert_eq(sbx_sandbox_upload(sb, "/tmp/definitely-missing-sbx", "/x", &err), -ENOENT);
	sbx_error_free(err);
	destroy(sb);
	snprintf(p, sizeof(p), "rm -rf %s", src);
	cr_assert_eq(system(p), 0);
}
