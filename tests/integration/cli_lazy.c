/* SPDX-License-Identifier: MIT */
/*
 * The CLI's fast commands map no optional library (src/util/lazy.h): a
 * running `sbx exec` has none of them in /proc/PID/maps, and `--version`,
 * `ls`, `create`, `exec`, `cp`, `rm`, `run` load none (LD_DEBUG=libs lists
 * every library the loader maps, dlopen included). A command that needs one
 * still loads it and works: `sbx image import` of a directory (libarchive,
 * libcrypto); with the library unreadable it fails naming the package. If one of these fails after a change, some code calls a
 * function of a lazy library that has no shim, and the build linked the
 * library at start again: add the function to its lazy_<lib>.c.
 */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <poll.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

TestSuite(cli_lazy, .init = setup, .fini = teardown);

/* Libraries the fast commands must not map, and the heavy ones they pull. */
static const char *const optional[] = {
	"libcurl.so", "libarchive.so", "libcrypto.so", "libmicrohttpd.so", "libsqlite3.so",
	"libz.so", "libgnutls.so", "libxml2.so", "libicuuc.so", "libssl.so", NULL,
};

static const char *first_optional(const char *text)
{
	for (size_t i = 0; optional[i]; i++)
		if (strstr(text, optional[i]))
			return optional[i];
	return NULL;
}

static void cli_env(void)
{
	setenv("SBX_STATE_DIR", sbx_runtime_state_dir(rt), 1);
	setenv("SBX_IMAGE_DIR", sbx_runtime_image_dir(rt), 1);
}

static char *read_all(int fd)
{
	size_t cap = 1 << 16, n = 0;
	char *s = malloc(cap);
	ssize_t k;
	while ((k = read(fd, s + n, cap - n - 1)) > 0)
		if ((n += (size_t)k) + 1 == cap)
			s = realloc(s, cap *= 2);
	s[n] = '\0';
	return s;
}

/* Runs build/src/cli/sbx ARGV with LD_DEBUG=libs; its exit code, its
 * stdout in *out and the loader's trace (stderr) in *trace. */
static int sbx_traced(const char *const *argv, char **out, char **trace)
{
	char sbx[512];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	int o[2], e[2];
	cr_assert_eq(pipe(o), 0);
	cr_assert_eq(pipe(e), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (dup2(null, 0) < 0 || dup2(o[1], 1) < 0 || dup2(e[1], 2) < 0)
			_exit(126);
		setenv("LD_DEBUG", "libs", 1);
		execv(sbx, (char *const *)argv);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	/* stderr first: the trace is large, stdout is a line or two */
	*trace = read_all(e[0]);
	*out = read_all(o[0]);
	close(o[0]);
	close(e[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "sbx %s died: status %d", argv[1], st);
	return WEXITSTATUS(st);
}

static void expect_lean(const char *const *argv, char **out)
{
	char *trace = NULL;
	int code = sbx_traced(argv, out, &trace);
	cr_assert_eq(code, 0, "sbx %s %s: exit %d", argv[1], argv[2] ? argv[2] : "", code);
	const char *lib = first_optional(trace);
	cr_expect_null(lib, "sbx %s %s loaded %s", argv[1], argv[2] ? argv[2] : "", lib);
	free(trace);
}

Test(cli_lazy, fast_commands_load_no_optional_library)
{
	cli_env();
	char *out = NULL;
	expect_lean((const char *[]){ "sbx", "--version", NULL }, &out);
	cr_expect_not_null(strstr(out, "sbx "), "%s", out);
	free(out);
	expect_lean((const char *[]){ "sbx", "create", "busybox", NULL }, &out);
	char id[128];
	cr_assert_eq(sscanf(out, "%127s", id), 1, "create printed: %s", out);
	free(out);
	expect_lean((const char *[]){ "sbx", "ls", NULL }, &out);
	cr_expect_not_null(strstr(out, id), "ls: %s", out);
	free(out);
	/* One sandbox, its row and what it uses; a missing id is exit 3. */
	expect_lean((const char *[]){ "sbx", "inspect", id, NULL }, &out);
	cr_expect_not_null(strstr(out, "state      running"), "inspect: %s", out);
	cr_expect_not_null(strstr(out, "memory     "), "inspect: %s", out);
	free(out);
	expect_lean((const char *[]){ "sbx", "inspect", "--json", id, NULL }, &out);
	cr_expect_not_null(strstr(out, "\"state\": \"running\""), "inspect --json: %s", out);
	cr_expect_not_null(strstr(out, "\"mem_bytes\": "), "inspect --json: %s", out);
	cr_expect_not_null(strstr(out, id), "inspect --json: %s", out);
	free(out);
	char *trace = NULL;
	cr_expect_eq(sbx_traced((const char *[]){ "sbx", "inspect", "000000000000", NULL }, &out, &trace), 3);
	free(out);
	free(trace);
	expect_lean((const char *[]){ "sbx", "exec", id, "--", "sh", "-c", "echo hi > /tmp/f", NULL }, &out);
	free(out);
	char host[] = "/tmp/sbx-cli-lazy-XXXXXX";
	cr_assert_not_null(mkdtemp(host));
	char src[160], dst[160];
	snprintf(src, sizeof(src), "%s:/tmp/f", id);
	snprintf(dst, sizeof(dst), "%s/f", host);
	expect_lean((const char *[]){ "sbx", "cp", src, dst, NULL }, &out);
	free(out);
	FILE *f = fopen(dst, "r");
	cr_assert_not_null(f, "cp did not write %s", dst);
	char line[16] = "";
	cr_expect_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_expect_str_eq(line, "hi\n");
	unlink(dst);
	rmdir(host);
	expect_lean((const char *[]){ "sbx", "rm", id, NULL }, &out);
	free(out);
	expect_lean((const char *[]){ "sbx", "run", "busybox", "--", "true", NULL }, &out);
	free(out);
}

Test(cli_lazy, running_exec_maps_no_optional_library)
{
	cli_env();
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	char sbx[512];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	int in[2], o[2];
	cr_assert_eq(pipe(in), 0);
	cr_assert_eq(pipe(o), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(o[1], 1) < 0)
			_exit(126);
		close(in[1]);
		close(o[0]);
		execl(sbx, "sbx", "exec", sbx_sandbox_id(sb), "--", "sh", "-c", "echo ready; read x", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(o[1]);
	/* The command runs (so the CLI is done loading) until we answer. */
	char buf[16] = "";
	cr_assert_eq(read(o[0], buf, 6), 6, "sbx exec printed nothing");
	cr_assert_eq(strncmp(buf, "ready\n", 6), 0, "%s", buf);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	int mfd = open(path, O_RDONLY);
	cr_assert_geq(mfd, 0, "%s", path);
	char *maps = read_all(mfd);
	close(mfd);
	const char *lib = first_optional(maps);
	cr_expect_null(lib, "a running sbx exec has %s mapped", lib);
	cr_expect_not_null(strstr(maps, "libc.so"), "maps look wrong: %.200s", maps);
	free(maps);
	cr_assert_eq(write(in[1], "\n", 1), 1);
	close(in[1]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sbx exec: status %d", st);
	close(o[0]);
	destroy(sb);
}

Test(cli_lazy, import_loads_libarchive_on_demand)
{
	cli_env();
	char dir[] = "/tmp/sbx-cli-lazy-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char p[128];
	snprintf(p, sizeof(p), "%s/hello", dir);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("hello\n", f);
	fclose(f);
	char *out = NULL, *trace = NULL;
	int code = sbx_traced((const char *[]){ "sbx", "image", "import", "cli-lazy-dir", dir, NULL }, &out, &trace);
	cr_expect_eq(code, 0, "import: exit %d", code);
	cr_expect_not_null(strstr(trace, "libarchive.so"), "import did not load libarchive");
	cr_expect_not_null(strstr(trace, "libcrypto.so"), "import did not load libcrypto");
	free(out);
	free(trace);
	code = sbx_traced((const char *[]){ "sbx", "image", "rm", "cli-lazy-dir", NULL }, &out, &trace);
	cr_expect_eq(code, 0, "image rm: exit %d", code);
	free(out);
	free(trace);
	unlink(p);
	rmdir(dir);
}

/* With libarchive unreadable (/dev/null bound over it in a private mount
 * namespace of the child only), `sbx image import` fails with the package
 * to install, and `sbx run`, which never needs it, still works. */
Test(cli_lazy, missing_library_is_an_error_naming_the_package)
{
	cli_env();
	char lib[PATH_MAX];
	if (!realpath("/usr/lib/x86_64-linux-gnu/libarchive.so.13", lib) &&
	    !realpath("/lib/x86_64-linux-gnu/libarchive.so.13", lib))
		cr_skip_test("libarchive.so.13 not found where Debian puts it");
	char dir[] = "/tmp/sbx-cli-lazy-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char sbx[512];
	snprintf(sbx, sizeof(sbx), "%s/src/cli/sbx", getenv("SBX_BUILD_ROOT"));
	int e[2];
	cr_assert_eq(pipe(e), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("/dev/null", lib, NULL, MS_BIND, NULL) < 0)
			_exit(120);
		if (dup2(e[1], 2) < 0)
			_exit(126);
		pid_t c = fork();
		if (c == 0) {
			execl(sbx, "sbx", "image", "import", "cli-lazy-missing", dir, (char *)NULL);
			_exit(127);
		}
		int st;
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 4)
			_exit(121);
		execl(sbx, "sbx", "run", "busybox", "--", "true", (char *)NULL);
		_exit(127);
	}
	close(e[1]);
	char *msg = read_all(e[0]);
	close(e[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d (120: mount, 121: import did not exit 4): %s",
		  WIFEXITED(st) ? WEXITSTATUS(st) : -1, msg);
	cr_expect_not_null(strstr(msg, "libarchive (libarchive.so.13) cannot be loaded"), "%s", msg);
	cr_expect_not_null(strstr(msg, "install the Debian package libarchive13"), "%s", msg);
	free(msg);
	rmdir(dir);
}
