/* SPDX-License-Identifier: MIT */
/*
 * Shared test fixtures. The busybox image is built from Debian's
 * busybox-static (no download), once per build tree, under an flock so
 * parallel test processes share it.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"

static const char *build_root(void)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	return b && *b ? b : "/tmp";
}

bool sbx_test_must_work(void)
{
	const char *must = getenv("SBX_MUST_WORK");
	return must && strcmp(must, "1") == 0;
}

void sbx_test_require_root(void)
{
	if (geteuid() == 0)
		return;
	sbx_test_skip("needs root for namespaces, overlayfs and cgroups");
}

sbx_runtime *sbx_test_runtime(void)
{
	char state[512], images[512];
	snprintf(state, sizeof(state), "%s/test-state/%d", build_root(), (int)getpid());
	snprintf(images, sizeof(images), "%s/test-images", build_root());
	/* A test binary run by hand (outside meson's environment) still keeps
	 * its writable layers off the host's default scratch file system. */
	char scratch[512];
	snprintf(scratch, sizeof(scratch), "%s/test-scratch", build_root());
	setenv("SBX_SCRATCH_DIR", scratch, 0);
	if (!getenv("SBX_SCRATCH_SIZE"))
		setenv("SBX_SCRATCH_SIZE", "16G", 0);
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	int r = sbx_runtime_new(&rt, &o, &err);
	cr_assert_eq(r, 0, "runtime: %s", err ? err->msg : "?");
	return rt;
}

void sbx_test_runtime_free(sbx_runtime *rt)
{
	sbx_runtime_free(rt);
}

static void must(int ok, const char *what)
{
	if (!ok)
		cr_assert_fail("fixture: %s: %s", what, strerror(errno));
}

static void build_rootfs(const char *root)
{
	char p[1024];
	const char *dirs[] = { "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root",
			       "home", "home/user", "proc", "dev", "sys", "var", "var/tmp", "work", NULL };
	must(mkdir(root, 0755) == 0 || errno == EEXIST, root);
	for (int i = 0; dirs[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		must(mkdir(p, 0755) == 0 || errno == EEXIST, p);
	}
	snprintf(p, sizeof(p), "%s/tmp", root);
	chmod(p, 01777);
	snprintf(p, sizeof(p), "%s/home/user", root);
	must(chown(p, 1000, 1000) == 0, p);
	snprintf(p, sizeof(p), "cp /bin/busybox '%s/bin/busybox'", root);
	must(system(p) == 0, "copy busybox");
	FILE *f = popen("/bin/busybox --list-full", "r");
	must(f != NULL, "busybox --list-full");
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!*line || strcmp(line, "bin/busybox") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, line);
		symlink("/bin/busybox", p);
	}
	pclose(f);
	struct { const char *path; const char *body; } files[] = {
		{ "etc/passwd", "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n"
				"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" },
		{ "etc/group", "root:x:0:\nuser:x:1000:\nstaff:x:50:user\nnogroup:x:65534:\n" },
		{ NULL, NULL } };
	for (int i = 0; files[i].path; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, files[i].path);
		FILE *w = fopen(p, "w");
		must(w != NULL, p);
		fputs(files[i].body, w);
		fclose(w);
	}
}

void sbx_test_busybox_image(sbx_runtime *rt)
{
	if (access("/bin/busybox", X_OK) != 0)
		sbx_test_skip("busybox-static is not installed (scripts/deps.sh installs it)");
	char lockp[512];
	snprintf(lockp, sizeof(lockp), "%s/test-images.lock", build_root());
	int lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	must(lfd >= 0, lockp);
	must(flock(lfd, LOCK_EX) == 0, "flock");
	sbx_image *img = NULL;
	if (sbx_image_get(&img, rt, "busybox", NULL) == 0) {
		sbx_image_free(img);
		close(lfd);
		return;
	}
	char root[512];
	snprintf(root, sizeof(root), "%s/test-busybox-rootfs.%d", build_root(), (int)getpid());
	build_rootfs(root);
	sbx_error *err = NULL;
	int r = sbx_image_import(NULL, rt, "busybox", root, &err);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	system(cmd);
	close(lfd);
	cr_assert_eq(r, 0, "import busybox: %s", err ? err->msg : "?");
}

sbx_sandbox *sbx_test_sandbox(sbx_runtime *rt, const sbx_sandbox_opts *opts)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	if (opts)
		o = *opts;
	if (!o.image)
		o.image = "busybox";
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, rt, &o, &err);
	cr_assert_eq(r, 0, "create: %s", err ? err->msg : "?");
	return sb;
}

/* Namespace fds are the local provider's pool of ready-made namespaces
 * (nspool.c), refilled in the background: not a leak, and counted apart. */
static int is_ns_fd(int dirfd_self, const char *name)
{
	char target[512];
	ssize_t n = readlinkat(dirfd_self, name, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	/* A pooled set also holds a user namespace and its id slot's lock. */
	const char *locks = getenv("SBX_USERNS_LOCK_DIR");
	if (!locks || !*locks)
		locks = "/run/sbx-idmap";
	size_t ll = strlen(locks);
	return strncmp(target, "net:[", 5) == 0 || strncmp(target, "uts:[", 5) == 0 ||
	       strncmp(target, "ipc:[", 5) == 0 || strncmp(target, "user:[", 6) == 0 ||
	       (strncmp(target, locks, ll) == 0 && target[ll] == '/');
}

static int count_fds(int want_ns)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && is_ns_fd(dirfd(d), de->d_name) == want_ns)
			n++;
	closedir(d);
	return want_ns ? n : n - 1;
}

/* The pool thread briefly holds a socket while it refills: count once it is
 * quiet (two equal counts 20 ms apart). */
int sbx_test_count_fds(void)
{
	int a = count_fds(0);
	for (int i = 0; i < 50; i++) {
		usleep(20000);
		int b = count_fds(0);
		if (b == a)
			break;
		a = b;
	}
	return a;
}

int sbx_test_count_ns_fds(void)
{
	return count_fds(1);
}

char *sbx_test_sh(sbx_sandbox *sb, const char *cmd, int *exit_code)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	sbx_exec_result res;
	sbx_error *err = NULL;
	int r = sbx_sandbox_exec(&res, sb, &o, &err);
	cr_assert_eq(r, 0, "exec '%s': %s", cmd, err ? err->msg : "?");
	if (exit_code)
		*exit_code = res.exit_code;
	char *out = res.out;
	res.out = NULL;
	sbx_exec_result_free(&res);
	return out ? out : strdup("");
}
