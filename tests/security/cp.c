/* SPDX-License-Identifier: MIT */
/*
 * Escape battery: what `sbx cp` and the file calls hand back to the host.
 * A sandboxed root tries to get a setuid or file-capability binary onto the
 * host, to plant symlinks that a later download writes through, and to
 * block the host process with FIFOs and devices where it expects files.
 * Every test that could hang arms an alarm, so a regression fails (the
 * worker dies of SIGALRM) instead of hanging the suite.
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../integration/common.h"

TestSuite(cp, .init = setup, .fini = teardown);

/* A regression that blocks fails here instead of hanging (SIGALRM kills the
 * test's worker process). */
static void watchdog(void)
{
	alarm(60);
}

/* A fresh host dir that user nobody can enter (for the setuid check). */
static char *host_dir(void)
{
	char tmpl[] = "/tmp/sbx-sec-cp-XXXXXX";
	cr_assert_not_null(mkdtemp(tmpl));
	chmod(tmpl, 0755);
	return strdup(tmpl);
}

static void rm_dir(char *d)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	if (system(cmd) != 0)
		cr_log_warn("could not remove %s", d);
	free(d);
}

static char *join(const char *a, const char *b)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", a, b), 0);
	return p;
}

static void sh_ok(sbx_sandbox *sb, const char *cmd)
{
	int code = -1;
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert_eq(code, 0, "'%s' failed (%d): %s", cmd, code, out);
	free(out);
}

/* Runs `path euid` as user nobody on the host and returns the euid it printed. */
static long run_as_nobody(const char *path)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(120);
		execl(path, path, "euid", (char *)NULL);
		_exit(121);
	}
	close(p[1]);
	char buf[64] = "";
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "running %s as nobody: status %d", path, st);
	buf[n > 0 ? n : 0] = '\0';
	long euid = -1;
	cr_assert_eq(sscanf(buf, "euid %ld", &euid), 1, "output: %s", buf);
	return euid;
}

Test(cp, setuid_download_does_not_run_as_root)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	sh_ok(sb, "cp /probe /suid && chown 0:0 /suid && chmod 6755 /suid && "
		  "mkdir -p /tree/sgid && chmod 3777 /tree/sgid && cp /suid /tree/sgid/suid && "
		  "chmod 6755 /tree/sgid/suid && touch /tree/owned && chown 1234:1234 /tree/owned");
	char *d = host_dir();
	char *dst = join(d, "suid");
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_download(sb, "/suid", dst, &err), 0, "%s", err ? err->msg : "");
	struct stat st;
	cr_assert_eq(stat(dst, &st), 0);
	cr_expect_eq(st.st_mode & 07000, 0, "set-id bits kept: %o", st.st_mode & 07777);
	cr_expect_eq(st.st_uid, geteuid());
	cr_expect_eq(run_as_nobody(dst), 65534, "a downloaded setuid binary ran as root");
	/* the same inside a tree, and for directories */
	cr_assert_eq(sbx_sandbox_download(sb, "/tree", d, &err), 0, "%s", err ? err->msg : "");
	char *f = join(d, "tree/sgid/suid"), *sg = join(d, "tree/sgid"), *own = join(d, "tree/owned");
	cr_assert_eq(stat(f, &st), 0);
	cr_expect_eq(st.st_mode & 07000, 0, "set-id bits kept in a tree: %o", st.st_mode & 07777);
	cr_expect_eq(run_as_nobody(f), 65534, "a downloaded setuid binary ran as root");
	cr_assert_eq(stat(sg, &st), 0);
	cr_expect_eq(st.st_mode & 07000, 0, "directory set-id/sticky kept: %o", st.st_mode & 07777);
	cr_assert_eq(stat(own, &st), 0);
	cr_expect_eq(st.st_uid, geteuid(), "owner copied from the sandbox: %u", st.st_uid);
	free(f);
	free(sg);
	free(own);
	free(dst);
	rm_dir(d);
	destroy(sb);
}

Test(cp, existing_setuid_file_is_not_kept_setuid)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	char *d = host_dir();
	char *dst = join(d, "tool");
	int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
	cr_assert_geq(fd, 0);
	close(fd);
	chmod(dst, 04755);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_download(sb, "/probe", dst, &err), 0, "%s", err ? err->msg : "");
	cr_expect_eq(run_as_nobody(dst), 65534, "sandbox content landed in a setuid-root file");
	free(dst);
	rm_dir(d);
	destroy(sb);
}

Test(cp, file_capabilities_are_not_copied)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	upload_probe(sb);
	int code;
	char *out = sbx_test_sh(sb, "cp /probe /capped && /probe setcap /capped", &code);
	if (code != 0)
		sbx_test_skip("cannot set security.capability in the sandbox: %s", out);
	free(out);
	char *d = host_dir();
	char *dst = join(d, "capped");
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_download(sb, "/capped", dst, &err), 0, "%s", err ? err->msg : "");
	char v[64];
	cr_expect_lt(getxattr(dst, "security.capability", v, sizeof(v)), 0, "file capability copied");
	cr_expect_eq(run_as_nobody(dst), 65534);
	free(dst);
	rm_dir(d);
	destroy(sb);
}

Test(cp, special_files_are_refused)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "mkfifo /fifo && ln -s /dev/zero /zero && mkdir /t && mkfifo /t/pipe && echo hi > /t/file");
	char *d = host_dir();
	char *dst = join(d, "out");
	sbx_error *err = NULL;
	int r = sbx_sandbox_download(sb, "/fifo", dst, &err);
	cr_expect_eq(r, -EINVAL, "download of a fifo: %d %s", r, err ? err->msg : "");
	if (err)
		cr_expect_not_null(strstr(err->msg, "/fifo"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	struct stat st;
	cr_expect_lt(lstat(dst, &st), 0, "something was created for a fifo");
	r = sbx_sandbox_download(sb, "/zero", dst, &err);
	cr_expect_eq(r, -EINVAL, "download of a symlink to /dev/zero: %d %s", r, err ? err->msg : "");
	if (err)
		cr_expect_not_null(strstr(err->msg, "character device"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	cr_expect_lt(lstat(dst, &st), 0, "something was created for /dev/zero");
	r = sbx_sandbox_download(sb, "/dev/zero", dst, &err);
	cr_expect_eq(r, -EINVAL, "download of /dev/zero: %d %s", r, err ? err->msg : "");
	sbx_error_free(err);
	err = NULL;
	/* in a tree, special files are skipped and the rest copied */
	cr_assert_eq(sbx_sandbox_download(sb, "/t", d, &err), 0, "%s", err ? err->msg : "");
	char *pipe_p = join(d, "t/pipe"), *file_p = join(d, "t/file");
	cr_expect_lt(lstat(pipe_p, &st), 0, "fifo recreated on the host");
	cr_expect_eq(stat(file_p, &st), 0);
	free(pipe_p);
	free(file_p);
	free(dst);
	rm_dir(d);
	destroy(sb);
}

Test(cp, symlinks_out_of_the_tree_are_not_recreated)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char *d = host_dir(), *outside = host_dir();
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p /t/sub && echo f > /t/sub/f && ln -s %s /t/evil && ln -s ../../x /t/sub/up && "
		 "ln -s . /t/dot && ln -s dot/.. /t/esc && ln -s sub/f /t/ok && ln -s ../ok /t/sub/okup && "
		 "echo pwned > /x",
		 outside);
	sh_ok(sb, cmd);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_download(sb, "/t", d, &err), 0, "%s", err ? err->msg : "");
	struct stat st;
	const char *gone[] = { "t/evil", "t/sub/up", "t/esc" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(*gone); i++) {
		char *p = join(d, gone[i]);
		cr_expect_lt(lstat(p, &st), 0, "%s recreated: it points out of the tree", gone[i]);
		free(p);
	}
	const char *kept[] = { "t/ok", "t/sub/okup", "t/dot" };
	for (size_t i = 0; i < sizeof(kept) / sizeof(*kept); i++) {
		char *p = join(d, kept[i]);
		cr_expect(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "%s (inside the tree) not kept", kept[i]);
		free(p);
	}
	/* a second download through where the link was stays below DST */
	char *through = join(d, "t/evil/x");
	err = NULL;
	int r = sbx_sandbox_download(sb, "/x", through, &err);
	cr_expect_eq(r, 0, "%s", err ? err->msg : "");
	sbx_error_free(err);
	char *leak = join(outside, "x");
	cr_expect_lt(lstat(leak, &st), 0, "a download wrote outside its destination: %s", leak);
	free(leak);
	free(through);
	rm_dir(outside);
	rm_dir(d);
	destroy(sb);
}

Test(cp, existing_host_symlink_in_dst_is_not_followed)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "echo pwned > /x");
	char *d = host_dir(), *outside = host_dir();
	char *target = join(outside, "target"), *link = join(d, "link");
	cr_assert_eq(symlink(target, link), 0);
	sbx_error *err = NULL;
	int r = sbx_sandbox_download(sb, "/x", link, &err);
	sbx_error_free(err);
	struct stat st;
	cr_expect_lt(lstat(target, &st), 0, "download wrote through a symlink in DST (r=%d)", r);
	free(target);
	free(link);
	rm_dir(outside);
	rm_dir(d);
	destroy(sb);
}

/* Host-side reads and writes of sandbox paths never block. */
Test(cp, read_file_of_a_fifo_does_not_block)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "rm /etc/passwd && mkfifo /etc/passwd");
	void *data = NULL;
	size_t n;
	sbx_error *err = NULL;
	int r = sbx_sandbox_read_file(&data, &n, sb, "/etc/passwd", 0, &err);
	cr_expect_eq(r, -EINVAL, "%d %s", r, err ? err->msg : "");
	if (err) {
		cr_expect_not_null(strstr(err->msg, "/etc/passwd"), "%s", err->msg);
		cr_expect_not_null(strstr(err->msg, "fifo"), "%s", err->msg);
	}
	sbx_error_free(err);
	free(data);
	destroy(sb);
}

Test(cp, write_file_onto_a_fifo_does_not_block)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "mkfifo /w");
	sbx_error *err = NULL;
	int r = sbx_sandbox_write_file(sb, "/w", "x", 1, 0644, &err);
	cr_expect_eq(r, -EINVAL, "%d %s", r, err ? err->msg : "");
	if (err)
		cr_expect_not_null(strstr(err->msg, "fifo"), "%s", err->msg);
	sbx_error_free(err);
	destroy(sb);
}

Test(cp, stat_with_a_fifo_passwd_does_not_block)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "rm /etc/passwd /etc/group && mkfifo /etc/passwd /etc/group");
	sbx_file_info fi;
	memset(&fi, 0, sizeof(fi));
	sbx_error *err = NULL;
	cr_expect_eq(sbx_sandbox_stat(&fi, sb, "/", &err), 0, "%s", err ? err->msg : "");
	sbx_file_info_clear(&fi);
	sbx_file_info *v = NULL;
	size_t n = 0;
	cr_expect_eq(sbx_sandbox_list_dir(&v, &n, sb, "/etc", 1, &err), 0, "%s", err ? err->msg : "");
	sbx_file_info_free(v, n);
	destroy(sb);
}

Test(cp, read_file_of_dev_zero_is_refused)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "ln -s /dev/zero /z");
	const char *paths[] = { "/z", "/dev/zero" };
	for (size_t i = 0; i < 2; i++) {
		void *data = NULL;
		size_t n;
		sbx_error *err = NULL;
		int r = sbx_sandbox_read_file(&data, &n, sb, paths[i], 64 << 20, &err);
		cr_expect_eq(r, -EINVAL, "%s: %d %s", paths[i], r, err ? err->msg : "");
		if (err)
			cr_expect_not_null(strstr(err->msg, "character device"), "%s", err->msg);
		sbx_error_free(err);
		free(data);
	}
	destroy(sb);
}

Test(cp, upload_onto_a_fifo_does_not_block)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sh_ok(sb, "mkfifo /dst && mkdir -p /into/t && mkfifo /into/t/f");
	char *d = host_dir();
	char *t = join(d, "t"), *f = join(d, "t/f");
	mkdir(t, 0755);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "hi\n", 3), 3);
	close(fd);
	sbx_error *err = NULL;
	int r = sbx_sandbox_upload(sb, f, "/dst", &err);
	cr_expect_eq(r, -EINVAL, "upload onto a fifo: %d %s", r, err ? err->msg : "");
	if (err)
		cr_expect_not_null(strstr(err->msg, "fifo"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	r = sbx_sandbox_upload(sb, t, "/into", &err);
	cr_expect_eq(r, -EINVAL, "upload of a tree onto a fifo: %d %s", r, err ? err->msg : "");
	sbx_error_free(err);
	free(t);
	free(f);
	rm_dir(d);
	destroy(sb);
}

Test(cp, upload_does_not_follow_symlinks_out)
{
	watchdog();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char *d = host_dir(), *outside = host_dir();
	char *src = join(d, "f");
	int fd = open(src, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	close(fd);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "ln -s %s /updir && ln -s %s/file /upfile", outside, outside);
	sh_ok(sb, cmd);
	sbx_error *err = NULL;
	sbx_sandbox_upload(sb, src, "/updir/x", &err);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_upload(sb, src, "/upfile", &err);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_write_file(sb, "/updir/y", "y", 1, 0644, &err);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_write_file(sb, "/upfile", "y", 1, 0644, &err);
	sbx_error_free(err);
	const char *names[] = { "x", "y", "file" };
	for (size_t i = 0; i < 3; i++) {
		char *p = join(outside, names[i]);
		struct stat st;
		cr_expect_lt(lstat(p, &st), 0, "an upload wrote the host's %s", p);
		free(p);
	}
	free(src);
	rm_dir(outside);
	rm_dir(d);
	destroy(sb);
}
