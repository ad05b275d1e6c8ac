/* SPDX-License-Identifier: MIT */
/* Cleanup: nothing survives destroy, a crash, or a TTL; gc finds leftovers. */
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

TestSuite(cleanup, .init = setup, .fini = teardown);

/* Host mounts that belong to sbx: anything on the state or image dirs, or
 * sbx's tmpfs/overlay. Other activity on the host does not count. */
static int count_sbx_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	const char *state = sbx_runtime_state_dir(rt), *images = sbx_runtime_image_dir(rt);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, state) || strstr(line, images) || strstr(line, "sbx-rw");
	fclose(f);
	return n;
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		     strcmp(de->d_name, ".mnt") != 0;
	closedir(d);
	return n;
}

/* Whether the writable layer of this sandbox id is still on disk. */
static int scratch_left(const char *id)
{
	const char *root = getenv("SBX_SCRATCH_DIR");
	char pat[600];
	snprintf(pat, sizeof(pat), "%s/*/%s", root ? root : "/nonexistent", id);
	glob_t g;
	int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	if (n)
		globfree(&g);
	return n;
}

/* Our live children (inits we created and did not reap would show here). */
static int count_children(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int n = 0, pid;
	while (fscanf(f, "%d", &pid) == 1)
		n++;
	fclose(f);
	return n;
}

/* Whether any cgroup directory of this sandbox id remains, in any hierarchy. */
static int cgroup_left(const char *id)
{
	const char *roots[] = { "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu",
				"/sys/fs/cgroup/unified", "/sys/fs/cgroup", NULL };
	for (int i = 0; roots[i]; i++) {
		DIR *d = opendir(roots[i]);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			if (strncmp(de->d_name, "sbx", 3) != 0)
				continue;
			char p[512];
			struct stat st;
			snprintf(p, sizeof(p), "%s/%s/%s", roots[i], de->d_name, id);
			if (stat(p, &st) == 0) {
				closedir(d);
				return 1;
			}
		}
		if (d)
			closedir(d);
	}
	return 0;
}

static char *local_dir(void)
{
	char *p = NULL;
	cr_assert(asprintf(&p, "%s/local", sbx_runtime_state_dir(rt)) > 0);
	return p;
}

Test(cleanup, thousand_cycles_leave_nothing, .timeout = 900)
{
	int cycles = getenv("SBX_TEST_CYCLES") ? atoi(getenv("SBX_TEST_CYCLES")) : 1000;
	/* warm up lazily-created process-wide state (memfd, seccomp program) */
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	destroy(sb);
	int fds0 = sbx_test_count_fds();
	cr_assert_eq(count_sbx_mounts(), 0);
	char *dir = local_dir();
	char (*ids)[16] = calloc((size_t)cycles, 16);
	for (int i = 0; i < cycles; i++) {
		sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
		o.memory_mb = 256;
		o.cpus = 1;
		sb = sbx_test_sandbox(rt, &o);
		snprintf(ids[i], 16, "%s", sbx_sandbox_id(sb));
		if (i % 100 == 0) {
			int code;
			free(sbx_test_sh(sb, "true", &code));
		}
		destroy(sb);
	}
	cr_assert_eq(sbx_test_count_fds(), fds0, "fds leaked");
	cr_assert_eq(count_sbx_mounts(), 0, "mounts leaked");
	cr_assert_eq(count_entries(dir), 0, "state directories left in %s", dir);
	cr_assert_eq(count_children(), 0, "init processes left");
	for (int i = 0; i < cycles; i++) {
		cr_assert_eq(cgroup_left(ids[i]), 0, "cgroup of %s left", ids[i]);
		cr_assert_eq(scratch_left(ids[i]), 0, "writable layer of %s left", ids[i]);
	}
	free(ids);
	free(dir);
}

static int gc_all_leaked(void)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	int removed = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].leaked)
			continue;
		sbx_error *err = NULL;
		cr_assert_eq(sbx_sandbox_destroy_id(rt, NULL, v[i].id, &err), 0, "gc %s: %s", v[i].id,
			     err ? err->msg : "");
		removed++;
	}
	sbx_sandbox_info_free(v, n);
	return removed;
}

Test(cleanup, sigkill_of_the_creator_then_gc_leaves_nothing)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t child = fork();
	if (child == 0) {
		sbx_sandbox *sb = NULL;
		sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
		o.image = "busybox";
		if (sbx_sandbox_create(&sb, rt, &o, NULL) < 0)
			_exit(1);
		if (write(p[1], sbx_sandbox_id(sb), 12) != 12)
			_exit(1);
		pause();
		_exit(0);
	}
	char id[13] = "";
	cr_assert_eq(read(p[0], id, 12), 12);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* The sandbox outlived its owner: listed as leaked, then collected. */
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	int found = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id)) {
			found = 1;
			cr_assert_eq(v[i].leaked, 1);
			cr_assert(kill(v[i].pid, 0) == 0, "init should still run before gc");
		}
	sbx_sandbox_info_free(v, n);
	cr_assert(found);
	cr_assert_eq(gc_all_leaked(), 1);
	char *dir = local_dir();
	cr_assert_eq(count_entries(dir), 0);
	cr_assert_eq(cgroup_left(id), 0);
	cr_assert_eq(scratch_left(id), 0, "writable layer of %s left after gc", id);
	free(dir);
}

/* Processes running this test binary whose parent is gone (ppid 1). */
static int count_orphans_of_this_binary(void)
{
	char self[4096];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0)
		return 0;
	self[sl] = '\0';
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int pid = atoi(de->d_name);
		if (pid <= 1)
			continue;
		char p[64], exe[4096], st[512];
		snprintf(p, sizeof(p), "/proc/%d/exe", pid);
		ssize_t el = readlink(p, exe, sizeof(exe) - 1);
		if (el != sl || memcmp(exe, self, (size_t)sl) != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/stat", pid);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		size_t k = fread(st, 1, sizeof(st) - 1, f);
		fclose(f);
		st[k] = '\0';
		char *rp = strrchr(st, ')');
		int ppid = 0;
		if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == 1)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

Test(cleanup, kills_mid_create_are_all_collected)
{
	srand((unsigned)getpid());
	for (int round = 0; round < 25; round++) {
		pid_t child = fork();
		if (child == 0) {
			for (;;) {
				sbx_sandbox *sb = NULL;
				sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
				o.image = "busybox";
				o.memory_mb = 128;
				if (sbx_sandbox_create(&sb, rt, &o, NULL) == 0) {
					sbx_sandbox_destroy(sb, NULL);
					sbx_sandbox_free(sb);
				}
			}
		}
		struct timespec ts = { 0, (long)(rand() % 30000) * 1000L };
		nanosleep(&ts, NULL);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	gc_all_leaked();
	/* Inits that were still waiting for their setup exit on their own. */
	usleep(200000);
	gc_all_leaked();
	char *dir = local_dir();
	if (count_entries(dir)) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "ls -la %s >&2; cat %s/*.json >&2", dir, dir);
		(void)!system(cmd);
	}
	cr_assert_eq(count_entries(dir), 0, "state left after gc");
	free(dir);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	cr_assert_eq(n, 0, "%zu sandboxes (or orphan cgroups) left", n);
	sbx_sandbox_info_free(v, n);
	/* Nothing of a killed creator lives on as an orphan of ours: the short
	 * helper that holds a new user namespace while its maps are written
	 * once waited forever (with copies of our fds) when its creator died. */
	int orphans = -1;
	for (int tries = 0; tries < 40 && orphans; tries++) {
		orphans = count_orphans_of_this_binary();
		if (orphans)
			usleep(50000);
	}
	cr_assert_eq(orphans, 0, "%d processes of this test binary outlived their killed creator", orphans);
}

static int fd_table_size(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int size = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "FDSize: %d", &size) == 1)
			break;
	fclose(f);
	return size;
}

/* init starts with a copy of the host's fd table; a host holding thousands
 * of fds (thousands of sandboxes) must not make every idle init keep one. */
Test(cleanup, idle_init_fd_table_does_not_follow_the_host)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < 3000)
		sbx_test_skip("RLIMIT_NOFILE hard limit %lu < 3000", (unsigned long)rl.rlim_max);
	struct rlimit want = { .rlim_cur = 3000, .rlim_max = rl.rlim_max };
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &want), 0);
	int fds[2500], n = 0;
	while (n < 2500 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		n++;
	cr_assert_eq(n, 2500);
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	sbx_sandbox_info *v = NULL;
	size_t nv = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &nv, rt, NULL, NULL, NULL), 0);
	pid_t pid = 0;
	for (size_t i = 0; i < nv; i++)
		if (!strcmp(v[i].id, sbx_sandbox_id(sb)))
			pid = v[i].pid;
	sbx_sandbox_info_free(v, nv);
	cr_assert_gt(pid, 0);
	/* init trims its table after a few idle milliseconds. */
	int size = -1;
	for (int i = 0; i < 200 && (size = fd_table_size(pid)) > 64; i++)
		usleep(10000);
	cr_assert_leq(size, 64, "init's fd table has %d slots", size);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "echo still here";
	sbx_exec_result r;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &o, NULL), 0);
	cr_assert_str_eq(r.out, "still here\n");
	sbx_exec_result_free(&r);
	destroy(sb);
	setrlimit(RLIMIT_NOFILE, &rl);
}

Test(cleanup, ttl_expiry_ends_the_sandbox)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.ttl_s = 1;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	int code;
	free(sbx_test_sh(sb, "sleep 1000 >/dev/null 2>&1 &", &code));
	/* extending works, then expiry kills everything inside */
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_set_timeout(sb, 2, &err), 0, "%s", err ? err->msg : "");
	usleep(1200000);
	free(sbx_test_sh(sb, "true", &code));
	usleep(1500000);
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.shell = "true";
	sbx_exec_result r;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &eo, &err), -ESRCH);
	sbx_error_free(err);
	destroy(sb);
}

Test(cleanup, destroy_is_idempotent_and_open_by_id_works)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_sandbox *again = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt, NULL, sbx_sandbox_id(sb), &err), 0, "%s", err ? err->msg : "");
	int code;
	char *out = sbx_test_sh(again, "echo via-open", &code);
	cr_assert_str_eq(out, "via-open\n");
	free(out);
	cr_assert_eq(sbx_sandbox_destroy(again, NULL), 0);
	cr_assert_eq(sbx_sandbox_destroy(again, NULL), 0);
	sbx_sandbox_free(again);
	/* the first handle sees it gone */
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.shell = "true";
	sbx_exec_result r;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &eo, &err), -ESRCH);
	sbx_error_free(err);
	cr_assert_eq(sbx_sandbox_destroy(sb, NULL), 0);
	sbx_sandbox_free(sb);
}

/* The namespace pool holds a bounded number of namespace fds and gives them
 * all back when the runtime is freed. */
Test(cleanup, namespace_pool_is_bounded_and_released)
{
	int ns0 = sbx_test_count_ns_fds();
	sbx_runtime *rt2 = sbx_test_runtime();
	for (int i = 0; i < 10; i++)
		destroy(sbx_test_sandbox(rt2, NULL));
	usleep(100000);
	int held = sbx_test_count_ns_fds() - ns0;
	const char *v = getenv("SBX_NS_POOL");
	int target = v && *v ? atoi(v) : 2;
	/* net, uts, ipc, user and the id slot lock per set */
	cr_assert_leq(held, 5 * target, "%d namespace fds held, pool target %d", held, target);
	if (target > 0)
		cr_assert_gt(held, 0, "the pool never filled");
	sbx_test_runtime_free(rt2);
	cr_assert_eq(sbx_test_count_ns_fds(), ns0, "namespace fds left after the runtime was freed");
}
