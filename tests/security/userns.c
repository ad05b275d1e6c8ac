/* SPDX-License-Identifier: MIT */
/*
 * Root inside is not root outside (docs/security.md: set-id and capability
 * files, the shared per-uid quotas): with the default user namespace, what a
 * sandboxed root writes (set-uid files, file capabilities) gives a host user
 * nothing, and each sandbox has an id range of its own. Each test also runs
 * the attack with userns=host, the mode every sandbox had before, as the
 * control that shows the attack is real.
 */
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../integration/common.h"

TestSuite(userns, .init = setup, .fini = teardown, .timeout = 120);

static sbx_sandbox *make(sbx_userns mode)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.userns = mode;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	upload_probe(sb);
	return sb;
}


/* Opens a file of the sandbox from the host, as host root. */
static int open_inside(sbx_sandbox *sb, const char *path)
{
	char p[256];
	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)sandbox_init_pid(sb), path);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s on the host", p);
	return fd;
}

/* Runs the file behind fd as host user 65534 with argument "euid" and
 * returns the effective uid it reports. */
static long run_as_nobody(int fd)
{
	int pfd[2];
	cr_assert_eq(pipe(pfd), 0);
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		dup2(pfd[1], 1);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(90);
		char *const argv[] = { (char *)"probe", (char *)"euid", NULL };
		char *const envp[] = { NULL };
		fexecve(fd, argv, envp);
		_exit(91);
	}
	close(pfd[1]);
	char buf[128] = "";
	ssize_t n = read(pfd[0], buf, sizeof(buf) - 1);
	close(pfd[0]);
	int st;
	waitpid(c, &st, 0);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "probe as nobody: status %d, output '%s'", st,
		  n > 0 ? buf : "");
	long euid = -1;
	sscanf(buf, "euid %ld", &euid);
	return euid;
}

/* Copies fd to a fresh host file with st's owner, then its mode; returns
 * an O_PATH-free read fd of the copy (unlinked: fexecve needs no name). */
static int keep_owner_copy(int fd, const struct stat *st)
{
	char path[] = "/tmp/sbx-userns-copy-XXXXXX";
	int out = mkstemp(path);
	cr_assert_geq(out, 0);
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	cr_assert_eq(fchown(out, st->st_uid, st->st_gid), 0);
	cr_assert_eq(fchmod(out, st->st_mode & 07777), 0);
	close(out);
	int r = open(path, O_RDONLY | O_CLOEXEC);
	unlink(path);
	cr_assert_geq(r, 0);
	return r;
}

static void setuid_attack(sbx_userns mode, int want_host_root)
{
	sbx_sandbox *sb = make(mode);
	int code;
	char *out = sbx_test_sh(sb, "cp /probe /tmp/suid && chown 0:0 /tmp/suid && chmod 4755 /tmp/suid && echo made",
				&code);
	cr_assert_eq(code, 0, "make the set-uid file: %s", out);
	free(out);
	int fd = open_inside(sb, "/tmp/suid");
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert(st.st_mode & S_ISUID, "the file lost its set-uid bit inside: the attack was not tried");
	/* The kernel treats files reached through another mount namespace as
	 * nosuid; the attack is a copy that keeps owner and mode landing on a
	 * host file system (a layer commit, `cp -a`, a naive download). */
	int host = keep_owner_copy(fd, &st);
	close(fd);
	long euid = run_as_nobody(host);
	close(host);
	if (want_host_root) {
		cr_assert_eq(euid, 0, "control (userns=host): expected the attack to give euid 0, got %ld", euid);
	} else {
		cr_assert_neq(st.st_uid, 0, "a file root made inside is owned by host root");
		cr_assert_neq(euid, 0, "a set-uid file written by root inside runs as host root");
		cr_assert_eq((uid_t)euid, st.st_uid);
	}
	destroy(sb);
}

Test(userns, setuid_file_written_inside_is_not_host_root)
{
	setuid_attack(SBX_USERNS_PRIVATE, 0);
}

Test(userns, control_setuid_file_with_userns_host_is_host_root)
{
	setuid_attack(SBX_USERNS_HOST, 1);
}

/* vfs_cap_data: a v2 entry applies to every user namespace; written from
 * inside a user namespace the kernel stores v3 with the namespace's root id,
 * which the host's namespace ignores. */
static void filecap_attack(sbx_userns mode, int want_global)
{
	sbx_sandbox *sb = make(mode);
	int code;
	char *out = sbx_test_sh(sb, "cp /probe /tmp/capf && /probe setcap /tmp/capf", &code);
	cr_assert_eq(code, 0, "setcap inside: %s", out);
	free(out);
	int fd = open_inside(sb, "/tmp/capf");
	uint32_t cap[6] = { 0 };
	ssize_t n = fgetxattr(fd, "security.capability", cap, sizeof(cap));
	close(fd);
	cr_assert_gt(n, 0, "no security.capability on the file");
	unsigned version = cap[0] & 0xff000000u;
	if (want_global) {
		cr_assert_eq(version, 0x02000000u, "control: expected a v2 (host-wide) capability, got %#x", version);
	} else {
		cr_assert_eq(version, 0x03000000u, "a capability set inside is host-wide (version %#x)", version);
		cr_assert_neq(cap[5], 0, "the capability's root id is host root");
	}
	destroy(sb);
}

Test(userns, file_capability_written_inside_binds_nobody_outside)
{
	filecap_attack(SBX_USERNS_PRIVATE, 0);
}

Test(userns, control_file_capability_with_userns_host_is_host_wide)
{
	filecap_attack(SBX_USERNS_HOST, 1);
}

static unsigned long host_base(sbx_sandbox *sb)
{
	int code;
	char *out = sbx_test_sh(sb, "cat /proc/self/uid_map", &code);
	unsigned long in = 9, base = 0, len = 0;
	cr_assert_eq(sscanf(out, "%lu %lu %lu", &in, &base, &len), 3, "uid_map: %s", out);
	free(out);
	cr_assert_eq(in, 0);
	cr_assert_eq(len, 65536, "range of %lu ids", len);
	return base;
}

/* Per-uid kernel quotas (inotify instances, pipe buffers, ...) are counted
 * per host uid: distinct ranges make them per sandbox. */
Test(userns, each_sandbox_has_its_own_id_range)
{
	sbx_sandbox *a = make(SBX_USERNS_PRIVATE), *b = make(SBX_USERNS_PRIVATE);
	unsigned long ba = host_base(a), bb = host_base(b);
	cr_assert_neq(ba, 0);
	cr_assert_neq(bb, 0);
	cr_assert(ba + 65536 <= bb || bb + 65536 <= ba, "ranges overlap: %lu and %lu", ba, bb);
	int code;
	char *out = sbx_test_sh(a, "id -u; touch /f && chown 1000:1000 /f && stat -c %u:%g /f", &code);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert_str_eq(out, "0\n1000:1000\n");
	free(out);
	destroy(a);
	destroy(b);
}

/* What the host writes in (uploads) belongs to root inside, not to a host
 * id the sandbox cannot touch. */
Test(userns, host_writes_belong_to_root_inside)
{
	sbx_sandbox *sb = make(SBX_USERNS_PRIVATE);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "/etc/uploaded", "x", 1, 0644, &err), 0, "write: %s",
		     err ? err->msg : "?");
	int code;
	char *out = sbx_test_sh(sb, "stat -c %u /etc/uploaded /probe && chmod 600 /etc/uploaded && echo ok", &code);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert_str_eq(out, "0\n0\nok\n");
	free(out);
	destroy(sb);
}

/* Template-build RUN steps (a task's Dockerfile) run in a user namespace
 * too, and the layer they leave holds the image's own ids: root inside
 * writes uid 0, `chown 1000` writes 1000, never the sandbox's host ids. */
Test(userns, build_steps_run_unprivileged_and_keep_image_ids)
{
	char ctx[] = "/tmp/sbx-userns-build-XXXXXX";
	cr_assert_not_null(mkdtemp(ctx));
	char p[600];
	snprintf(p, sizeof(p), "%s/Dockerfile", ctx);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fprintf(f, "FROM busybox\nENV NONCE=%d-%ld\n"
		   "RUN cat /proc/self/uid_map > /map && touch /mine && touch /his && chown 1000:1000 /his\n",
		(int)getpid(), (long)time(NULL));
	fclose(f);
	sbx_build_opts o = SBX_BUILD_OPTS_INIT;
	o.context_dir = ctx;
	o.slug = "userns-build";
	sbx_build_result res;
	memset(&res, 0, sizeof(res));
	sbx_error *err = NULL;
	cr_assert_eq(sbx_template_build(&res, rt, &o, &err), 0, "build: %s", err ? err->msg : "?");
	sbx_image *img = NULL;
	cr_assert_eq(sbx_image_get(&img, rt, res.alias, &err), 0, "image: %s", err ? err->msg : "?");
	const char *top = img->layer_paths[img->n_layers - 1];
	struct stat mine, his;
	snprintf(p, sizeof(p), "%s/mine", top);
	cr_assert_eq(stat(p, &mine), 0, "%s", p);
	snprintf(p, sizeof(p), "%s/his", top);
	cr_assert_eq(stat(p, &his), 0, "%s", p);
	cr_assert_eq(mine.st_uid, 0, "the layer holds the build sandbox's host id %u", (unsigned)mine.st_uid);
	cr_assert_eq(his.st_uid, 1000);
	cr_assert_eq(his.st_gid, 1000);
	snprintf(p, sizeof(p), "%s/map", top);
	char map[128] = "";
	f = fopen(p, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(map, sizeof(map), f));
	fclose(f);
	unsigned long in = 9, base = 0;
	cr_assert_eq(sscanf(map, "%lu %lu", &in, &base), 2, "%s", map);
	cr_assert_neq(base, 0, "the RUN step ran as host root: %s", map);
	sbx_image_free(img);
	free(res.alias);
	free(res.digest);
	snprintf(p, sizeof(p), "rm -rf '%s'", ctx);
	cr_assert_eq(system(p), 0);
}

/* The host's stdio pipes are given to root inside: scripts that write to
 * /dev/stdout or /dev/stderr (a reopen of /proc/self/fd/N, which checks the
 * pipe's owner) keep working under a user namespace. */
Test(userns, dev_stdout_and_stderr_reopen)
{
	sbx_sandbox *sb = make(SBX_USERNS_PRIVATE);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "echo out > /dev/stdout && echo err > /dev/stderr && echo done";
	sbx_exec_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, &err), 0, "exec: %s", err ? err->msg : "?");
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err ? r.err : "");
	cr_assert_str_eq(r.out, "out\ndone\n");
	cr_assert_str_eq(r.err, "err\n");
	sbx_exec_result_free(&r);
	destroy(sb);
}
