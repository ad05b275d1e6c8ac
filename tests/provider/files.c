/* SPDX-License-Identifier: MIT */
/*
 * Provider conformance, files: every byte value both ways (write/read and
 * upload/download), modes honoured, missing files giving -ENOENT.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(conf_files, .init = conf_setup, .fini = conf_teardown, .timeout = 120);

/* 4 KiB: each of the 256 byte values in order, then a pseudo-random rest. */
static void pattern(unsigned char *buf, size_t len)
{
	conf_fill(buf, len, 7);
	for (size_t i = 0; i < 256 && i < len; i++)
		buf[i] = (unsigned char)i;
}

static void host_dir(char *out, size_t cap, const char *tag)
{
	snprintf(out, cap, "%s/host-%s", C.state, tag);
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", out, out);
	cr_assert_eq(system(cmd), 0); /* checksrc: allow (test) */
}

static void host_write(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
	cr_assert_eq(chmod(path, mode), 0);
}

static unsigned char *host_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	unsigned char *buf = malloc(1u << 16); /* checksrc: allow (test) */
	*len = fread(buf, 1, 1u << 16, f);
	fclose(f);
	return buf;
}

Test(conf_files, binary_round_trip)
{
	sbx_sandbox *sb = conf_create(NULL);
	unsigned char data[4096];
	pattern(data, sizeof(data));
	char want[65];
	conf_sha256(data, sizeof(data), want);
	sbx_error *err = NULL;
	int r = sbx_sandbox_write_file(sb, "/tmp/new/dir/all.bin", data, sizeof(data), 0644, &err);
	cr_assert_eq(r, 0, "%s: write_file: %d %s", C.name, r, ERRMSG(err));
	void *back = NULL;
	size_t len = 0;
	r = sbx_sandbox_read_file(&back, &len, sb, "/tmp/new/dir/all.bin", 0, &err);
	cr_assert_eq(r, 0, "%s: read_file: %d %s", C.name, r, ERRMSG(err));
	cr_assert_eq(len, sizeof(data));
	cr_assert_eq(memcmp(back, data, len), 0, "%s: bytes changed through write_file/read_file", C.name);
	cr_assert_eq(((char *)back)[len], '\0', "read_file NUL-terminates");
	free(back);
	/* what the sandbox itself sees */
	sbx_exec_result x = conf_sh(sb, "sha256sum /tmp/new/dir/all.bin; wc -c < /tmp/new/dir/all.bin");
	cr_assert(x.out && strncmp(x.out, want, 64) == 0, "%s: hash inside %s, want %s", C.name, x.out, want);
	cr_assert_eq(strtol(strchr(x.out, '\n') + 1, NULL, 10), (long)sizeof(data));
	sbx_exec_result_free(&x);
	/* an empty file, and overwriting with a shorter one */
	cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/empty", "", 0, 0644, &err), 0, "%s", ERRMSG(err));
	cr_assert_eq(sbx_sandbox_read_file(&back, &len, sb, "/tmp/empty", 0, &err), 0, "%s", ERRMSG(err));
	cr_assert_eq(len, 0);
	free(back);
	cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/new/dir/all.bin", "\0\xff", 2, 0644, &err), 0);
	cr_assert_eq(sbx_sandbox_read_file(&back, &len, sb, "/tmp/new/dir/all.bin", 0, &err), 0);
	cr_assert(len == 2 && memcmp(back, "\0\xff", 2) == 0, "%s: overwrite left %zu bytes", C.name, len);
	free(back);

	/* upload and download keep the bytes too */
	char dir[600], p[700], q[700];
	host_dir(dir, sizeof(dir), "bin");
	snprintf(p, sizeof(p), "%s/up.bin", dir);
	host_write(p, data, sizeof(data), 0644);
	r = sbx_sandbox_upload(sb, p, "/work/up.bin", &err);
	cr_assert_eq(r, 0, "%s: upload: %d %s", C.name, r, ERRMSG(err));
	x = conf_sh(sb, "sha256sum /work/up.bin");
	cr_assert(x.out && strncmp(x.out, want, 64) == 0, "%s: uploaded hash %s", C.name, x.out);
	sbx_exec_result_free(&x);
	snprintf(q, sizeof(q), "%s/down.bin", dir);
	r = sbx_sandbox_download(sb, "/work/up.bin", q, &err);
	cr_assert_eq(r, 0, "%s: download: %d %s", C.name, r, ERRMSG(err));
	unsigned char *d = host_read(q, &len);
	cr_assert_eq(len, sizeof(data));
	cr_assert_eq(memcmp(d, data, len), 0, "%s: bytes changed through upload/download", C.name);
	free(d);
	conf_destroy(sb);
}

static unsigned mode_inside(sbx_sandbox *sb, const char *path)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "stat -c %%a %s", path);
	sbx_exec_result x = conf_sh(sb, cmd);
	cr_assert_eq(x.exit_code, 0, "stat %s: %s", path, x.err);
	unsigned m = (unsigned)strtoul(x.out, NULL, 8);
	sbx_exec_result_free(&x);
	return m;
}

Test(conf_files, modes_honoured)
{
	sbx_sandbox *sb = conf_create(NULL);
	sbx_error *err = NULL;
	static const unsigned modes[] = { 0755, 0644, 0600, 0640, 0700 };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char path[64];
		snprintf(path, sizeof(path), "/tmp/m%03o", modes[i]);
		int r = sbx_sandbox_write_file(sb, path, "#!/bin/sh\necho ran\n", 19, modes[i], &err);
		cr_assert_eq(r, 0, "%s: write %s: %d %s", C.name, path, r, ERRMSG(err));
		unsigned got = mode_inside(sb, path);
		cr_assert_eq(got, modes[i], "%s: write_file mode %03o, found %03o", C.name, modes[i], got);
	}
	sbx_exec_result x = conf_sh(sb, "/tmp/m755");
	cr_assert_str_eq(x.out ? x.out : "", "ran\n", "%s: a 0755 file runs", C.name);
	sbx_exec_result_free(&x);
	/* 0600 root's: unreadable to another user */
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "cat /tmp/m600";
	o.user = "user";
	x = conf_exec(sb, &o);
	cr_assert_neq(x.exit_code, 0, "%s: user 1000 read a 0600 root file", C.name);
	sbx_exec_result_free(&x);

	/* upload keeps host modes; download keeps them back */
	char dir[600], p[700], q[700];
	host_dir(dir, sizeof(dir), "modes");
	snprintf(p, sizeof(p), "%s/t", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/t/run.sh", dir);
	host_write(p, "#!/bin/sh\necho up\n", 18, 0750);
	snprintf(p, sizeof(p), "%s/t/secret", dir);
	host_write(p, "s\n", 2, 0600);
	snprintf(p, sizeof(p), "%s/t", dir);
	int r = sbx_sandbox_upload(sb, p, "/work/t", &err);
	cr_assert_eq(r, 0, "%s: upload tree: %d %s", C.name, r, ERRMSG(err));
	cr_assert_eq(mode_inside(sb, "/work/t/run.sh"), 0750, "%s: upload mode", C.name);
	cr_assert_eq(mode_inside(sb, "/work/t/secret"), 0600, "%s: upload mode", C.name);
	x = conf_sh(sb, "/work/t/run.sh");
	cr_assert_str_eq(x.out ? x.out : "", "up\n");
	sbx_exec_result_free(&x);
	snprintf(q, sizeof(q), "%s/back", dir);
	r = sbx_sandbox_download(sb, "/work/t", q, &err);
	cr_assert_eq(r, 0, "%s: download tree: %d %s", C.name, r, ERRMSG(err));
	struct stat st;
	snprintf(q, sizeof(q), "%s/back/run.sh", dir);
	cr_assert_eq(stat(q, &st), 0, "%s", q);
	cr_assert_eq(st.st_mode & 07777, 0750, "%s: download mode %03o", C.name, st.st_mode & 07777);
	snprintf(q, sizeof(q), "%s/back/secret", dir);
	cr_assert_eq(stat(q, &st), 0, "%s", q);
	cr_assert_eq(st.st_mode & 07777, 0600, "%s: download mode %03o", C.name, st.st_mode & 07777);
	conf_destroy(sb);
}

Test(conf_files, missing_files)
{
	sbx_sandbox *sb = conf_create(NULL);
	sbx_error *err = NULL;
	void *data = NULL;
	size_t len = 0;
	int r = sbx_sandbox_read_file(&data, &len, sb, "/no/such/file", 0, &err);
	cr_assert_eq(r, -ENOENT, "%s: read_file of a missing file: %d %s", C.name, r, ERRMSG(err));
	cr_assert_not_null(err, "an error says why");
	cr_assert_eq(err->code, r);
	sbx_error_free(err);
	err = NULL;
	r = sbx_sandbox_read_file(&data, &len, sb, "/tmp/missing-in-existing-dir", 0, &err);
	cr_assert_eq(r, -ENOENT, "%s: %d %s", C.name, r, ERRMSG(err));
	sbx_error_free(err);
	err = NULL;
	char dir[600], p[700];
	host_dir(dir, sizeof(dir), "missing");
	snprintf(p, sizeof(p), "%s/down", dir);
	r = sbx_sandbox_download(sb, "/no/such/file", p, &err);
	cr_assert_eq(r, -ENOENT, "%s: download of a missing file: %d %s", C.name, r, ERRMSG(err));
	sbx_error_free(err);
	err = NULL;
	cr_assert_neq(access(p, F_OK), 0, "a failed download leaves nothing on the host");
	snprintf(p, sizeof(p), "%s/not-there", dir);
	r = sbx_sandbox_upload(sb, p, "/tmp/x", &err);
	cr_assert_eq(r, -ENOENT, "%s: upload of a missing host file: %d %s", C.name, r, ERRMSG(err));
	sbx_error_free(err);
	err = NULL;
	/* a read cap below the size is -EFBIG, not a short read */
	cr_assert_eq(sbx_sandbox_write_file(sb, "/tmp/ten", "0123456789", 10, 0644, &err), 0);
	r = sbx_sandbox_read_file(&data, &len, sb, "/tmp/ten", 5, &err);
	cr_assert_eq(r, -EFBIG, "%s: read_file max 5 of 10 bytes: %d", C.name, r);
	sbx_error_free(err);
	conf_destroy(sb);
}
