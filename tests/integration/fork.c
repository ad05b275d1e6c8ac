/* SPDX-License-Identifier: MIT */
/* Fork: children start from the parent's files, writes stay apart, nothing leaks. */
#include <glob.h>
#include <sys/xattr.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

TestSuite(fork, .init = setup, .fini = teardown);

/* Whether a cgroup of this sandbox id remains (v2 or v1 hierarchies). */
static int cgroup_of(const char *id)
{
	char pat[300];
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/%s", id);
	glob_t g;
	int n = glob(pat, GLOB_ONLYDIR, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	if (n)
		globfree(&g);
	snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/*/%s", id);
	int m = glob(pat, GLOB_ONLYDIR, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	if (m)
		globfree(&g);
	return n + m;
}

static int layer_of(const char *id)
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

static char *sh(sbx_sandbox *sb, const char *cmd, int want)
{
	int code = -1;
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert_eq(code, want, "'%s' exited %d: %s", cmd, code, out ? out : "");
	return out;
}

static sbx_sandbox *disk_sandbox(unsigned storage_mb)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.scratch = SBX_SCRATCH_DISK;
	o.storage_mb = storage_mb;
	return sbx_test_sandbox(rt, &o);
}

Test(fork, children_start_from_parent_and_stay_apart)
{
	sbx_sandbox *p = disk_sandbox(512);
	free(sh(p, "mkdir -p /work && echo base > /work/f && dd if=/dev/urandom of=/work/big bs=1M count=100 "
		   "2>/dev/null && md5sum /work/big | cut -d' ' -f1 > /work/big.md5 && "
		   "touch /work/owned && chown 1000:1000 /work/owned", 0));
	sbx_sandbox *kids[3] = { 0 };
	sbx_error *err = NULL;
	int r = sbx_sandbox_fork(kids, 3, p, NULL, &err);
	cr_assert_eq(r, 0, "fork: %s", err ? err->msg : "?");
	for (int i = 0; i < 3; i++) {
		cr_assert_str_neq(sbx_sandbox_id(kids[i]), sbx_sandbox_id(p));
		cr_assert_eq(layer_of(sbx_sandbox_id(kids[i])), 1);
		char *out = sh(kids[i], "cat /work/f; md5sum /work/big | cut -d' ' -f1; cat /work/big.md5; "
					"stat -c %u /work/owned", 0);
		char a[64], b[64], f[16];
		unsigned owner = 0;
		cr_assert_eq(sscanf(out, "%15s %63s %63s %u", f, a, b, &owner), 4, "got %s", out);
		cr_assert_str_eq(f, "base");
		cr_assert_str_eq(a, b, "the 100 MiB file differs in child %d", i);
		cr_assert_eq(owner, 1000, "file owners keep their ids inside the child: %s", out);
		free(out);
	}
	/* Isolation, both ways and between siblings. */
	free(sh(kids[0], "echo kid0 > /work/f && touch /work/only0 && rm /work/big", 0));
	free(sh(p, "echo parent > /work/f && touch /work/onlyp", 0));
	char *o = sh(p, "cat /work/f; ls /work/only0 2>&1 >/dev/null | wc -l; ls /work/big", 0);
	cr_assert(strstr(o, "parent") && strstr(o, "1\n"), "parent sees a child's write: %s", o);
	free(o);
	o = sh(kids[1], "cat /work/f; ls /work/only0 /work/onlyp 2>/dev/null | wc -l; ls /work/big", 0);
	cr_assert(strstr(o, "base") && strstr(o, "\n0\n"), "a sibling or the parent leaked into child 1: %s", o);
	free(o);
	/* The parent goes; the children keep working. */
	destroy(p);
	o = sh(kids[2], "cat /work/f && echo more > /work/g && cat /work/g", 0);
	cr_assert(strstr(o, "base") && strstr(o, "more"), "child after the parent's destroy: %s", o);
	free(o);
	/* A fork of a fork (ids are mapped again). */
	sbx_sandbox *gk = NULL;
	cr_assert_eq(sbx_sandbox_fork(&gk, 1, kids[2], NULL, &err), 0, "fork of a fork: %s", err ? err->msg : "?");
	o = sh(gk, "cat /work/g; stat -c %u /work/owned", 0);
	cr_assert(strstr(o, "more") && strstr(o, "1000"), "grandchild: %s", o);
	free(o);
	char ids[4][16];
	snprintf(ids[3], sizeof(ids[3]), "%s", sbx_sandbox_id(gk));
	destroy(gk);
	for (int i = 0; i < 3; i++) {
		snprintf(ids[i], sizeof(ids[i]), "%s", sbx_sandbox_id(kids[i]));
		destroy(kids[i]);
	}
	for (int i = 0; i < 4; i++)
		cr_assert_eq(layer_of(ids[i]), 0, "the writable layer of %s is left behind", ids[i]);
}

Test(fork, storage_limit_applies_to_children)
{
	sbx_sandbox *p = disk_sandbox(64);
	free(sh(p, "dd if=/dev/zero of=/a bs=1M count=8 2>/dev/null", 0));
	sbx_sandbox *k = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_fork(&k, 1, p, NULL, &err), 0, "fork: %s", err ? err->msg : "?");
	int code = 0;
	char *o = sbx_test_sh(k, "dd if=/dev/zero of=/b bs=1M count=200 2>&1", &code);
	cr_assert_neq(code, 0, "a child wrote 200 MiB past its 64 MiB limit: %s", o);
	free(o);
	destroy(k);
	destroy(p);
}

Test(fork, bad_requests_are_clear)
{
	sbx_sandbox *p = disk_sandbox(0);
	sbx_sandbox *k = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_fork(&k, 0, p, NULL, &err), -EINVAL);
	cr_assert(strstr(err->msg, "n must be"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "another";
	cr_assert_eq(sbx_sandbox_fork(&k, 1, p, &o, &err), -EINVAL);
	cr_assert(strstr(err->msg, "image"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	/* A sandbox that is gone. */
	sbx_sandbox *q = disk_sandbox(0);
	sbx_sandbox *stale = NULL;
	cr_assert_eq(sbx_sandbox_open(&stale, rt, NULL, sbx_sandbox_id(q), &err), 0);
	destroy(q);
	int r = sbx_sandbox_fork(&k, 1, stale, NULL, &err);
	cr_assert(r == -ESRCH, "fork of a destroyed sandbox: %d", r);
	cr_assert(strstr(err->msg, sbx_sandbox_id(stale)), "%s", err->msg);
	sbx_error_free(err);
	sbx_sandbox_free(stale);
	/* In memory: refused, naming the reason. */
	err = NULL;
	sbx_sandbox_opts mo = SBX_SANDBOX_OPTS_INIT;
	mo.scratch = SBX_SCRATCH_TMPFS;
	sbx_sandbox *m = sbx_test_sandbox(rt, &mo);
	cr_assert_eq(sbx_sandbox_fork(&k, 1, m, NULL, &err), -ENOTSUP);
	cr_assert(strstr(err->msg, "disk"), "%s", err->msg);
	sbx_error_free(err);
	destroy(m);
	destroy(p);
}

Test(fork, cycles_leak_nothing)
{
	sbx_sandbox *p = disk_sandbox(0);
	free(sh(p, "echo x > /x", 0));
	int fds0 = -1, left = 0;
	for (int i = 0; i < 50; i++) {
		sbx_sandbox *k[2] = { 0 };
		sbx_error *err = NULL;
		cr_assert_eq(sbx_sandbox_fork(k, 2, p, NULL, &err), 0, "cycle %d: %s", i, err ? err->msg : "?");
		char a[16], b[16];
		snprintf(a, sizeof(a), "%s", sbx_sandbox_id(k[0]));
		snprintf(b, sizeof(b), "%s", sbx_sandbox_id(k[1]));
		destroy(k[0]);
		destroy(k[1]);
		left += layer_of(a) + layer_of(b) + cgroup_of(a) + cgroup_of(b);
		if (i == 4)
			fds0 = sbx_test_count_fds();
	}
	/* Children boot in parallel, so the namespace pool refills at its own
	 * pace: wait (bounded) for it to settle; a leak never does. */
	int fds = sbx_test_count_fds();
	for (int t = 0; t < 100 && fds > fds0; t++) {
		usleep(20000);
		fds = sbx_test_count_fds();
	}
	cr_assert_leq(fds, fds0, "fds leak across fork/destroy cycles (%d -> %d)", fds0, fds);
	cr_assert_eq(left, 0, "subvolumes or cgroups leak across fork/destroy cycles");
	destroy(p);
}

Test(fork, named_snapshot_and_create_from_it)
{
	sbx_sandbox *p = disk_sandbox(0);
	free(sh(p, "echo before > /s && touch /owned && chown 1000:1000 /owned", 0));
	char *name = NULL;
	sbx_error *err = NULL;
	char want[64];
	snprintf(want, sizeof(want), "t-%d", (int)getpid());
	cr_assert_eq(sbx_sandbox_snapshot(&name, p, want, &err), 0, "snapshot: %s", err ? err->msg : "?");
	cr_assert_str_eq(name, want);
	char *dup = NULL;
	cr_assert_eq(sbx_sandbox_snapshot(&dup, p, want, &err), -EEXIST);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_snapshot(&dup, p, "../x", &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	free(sh(p, "echo after > /s", 0));
	destroy(p); /* the snapshot outlives its sandbox */
	char img[96];
	snprintf(img, sizeof(img), "snapshot:%s", name);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = img;
	sbx_sandbox *a = sbx_test_sandbox(rt, &o), *b = sbx_test_sandbox(rt, &o);
	char *out = sh(a, "cat /s; stat -c %u /owned; echo a > /s", 0);
	cr_assert(strstr(out, "before") && strstr(out, "1000"), "from the snapshot: %s", out);
	free(out);
	out = sh(b, "cat /s", 0);
	cr_assert_str_eq(out, "before\n");
	free(out);
	cr_assert_eq(sbx_snapshot_remove(rt, NULL, name, &err), 0, "remove: %s", err ? err->msg : "?");
	char sub[96];
	snprintf(sub, sizeof(sub), ".snap-%s", name);
	cr_assert_eq(layer_of(sub), 0, "the snapshot's subvolume is left behind");
	out = sh(a, "cat /s", 0); /* made from it: unaffected by its removal */
	cr_assert_str_eq(out, "a\n");
	free(out);
	cr_assert_eq(sbx_snapshot_remove(rt, NULL, name, &err), -ENOENT);
	sbx_error_free(err);
	err = NULL;
	sbx_sandbox *c = NULL;
	cr_assert_lt(sbx_sandbox_create(&c, rt, &o, &err), 0, "a removed snapshot still creates");
	cr_assert(strstr(err->msg, name), "%s", err->msg);
	sbx_error_free(err);
	destroy(a);
	destroy(b);
	free(name);
}

/* Everything a child must see as the parent had it, one line per fact. */
#define TREE_SIG                                                                                         \
	"cd /work && for f in /work/* /work/d /home /home/*; do stat -c '%n %a %u %g %h %F %Y %s' $f; done; " \
	"stat -c '%i' /work/h1 /work/h2 | uniq | wc -l; readlink /work/ln; cat /work/h1; "                     \
	"md5sum /work/big | cut -d' ' -f1; ls /etc; ls -a /home"

static void parent_tree(sbx_sandbox *p)
{
	free(sh(p, "mkdir -p /work/d && chmod 0710 /work/d && chown 1234:5678 /work/d && "
		   "dd if=/dev/urandom of=/work/big bs=1M count=3 2>/dev/null && "
		   "echo h > /work/h1 && ln /work/h1 /work/h2 && ln -s /etc/passwd /work/ln && "
		   "mkfifo /work/fifo && echo s > /work/suid && chmod 4755 /work/suid && "
		   "touch -d '2001-02-03 04:05:06' /work/old && "
		   /* a deleted image file (whiteout) and a replaced image dir (opaque) */
		   "rm /etc/group && rm -rf /home && mkdir -p /home/new && touch /home/new/x",
		   0));
}

/* A user xattr set from the host, read back through another sandbox. */
static void set_xattr(sbx_sandbox *sb, const char *path, const char *value)
{
	int fd = -1;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_path_fd(&fd, sb, path, &err), 0, "path fd: %s", err ? err->msg : "?");
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	cr_assert_eq(setxattr(p, "user.sbx.fork", value, strlen(value), 0), 0, "setxattr: %s", strerror(errno));
	close(fd);
}

static void check_xattr(sbx_sandbox *sb, const char *path, const char *want)
{
	int fd = -1;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_path_fd(&fd, sb, path, &err), 0, "path fd: %s", err ? err->msg : "?");
	char p[64], v[64] = "";
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = getxattr(p, "user.sbx.fork", v, sizeof(v) - 1);
	close(fd);
	cr_assert_geq(n, 0, "getxattr %s: %s", path, strerror(errno));
	v[n] = '\0';
	cr_assert_str_eq(v, want);
}

/* Frozen layers of this runtime's state dir: how many, and the newest
 * one's name in last (when there is one). */
static int frozen_layers(char last[32])
{
	char pat[600];
	snprintf(pat, sizeof(pat), "%s/local/frozen/*", sbx_runtime_state_dir(rt));
	glob_t g;
	int n = glob(pat, GLOB_ONLYDIR, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
	if (n && last)
		snprintf(last, 32, "%s", strrchr(g.gl_pathv[n - 1], '/') + 1);
	if (n)
		globfree(&g);
	return n;
}

/* Whether frozen layer name's subvolume is on the scratch fs. */
static int frozen_on_disk(const char *name)
{
	char sub[64];
	snprintf(sub, sizeof(sub), ".frz-%s", name);
	return layer_of(sub);
}

static int scratch_mounts(void)
{
	const char *root = getenv("SBX_SCRATCH_DIR");
	FILE *f = fopen("/proc/self/mountinfo", "r");
	cr_assert_not_null(f);
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += root && strstr(line, root) != NULL;
	fclose(f);
	return n;
}

static void fork_keeps_everything(sbx_userns userns)
{
	char name[32] = "";
	cr_assert_eq(frozen_layers(NULL), 0);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.scratch = SBX_SCRATCH_DISK;
	o.userns = userns;
	sbx_sandbox *p = sbx_test_sandbox(rt, &o);
	int mnt0 = scratch_mounts(); /* the first disk sandbox mounts the scratch fs */
	parent_tree(p);
	set_xattr(p, "/work/h1", "parent");
	char *want = sh(p, TREE_SIG, 0);
	cr_assert(strstr(want, "/work/d 710 1234 5678") && strstr(want, "/work/suid 4755") &&
		  strstr(want, "fifo") && strstr(want, "\n1\n") && !strstr(want, "group"),
		  "parent tree: %s", want);
	sbx_sandbox *k[2] = { 0 };
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_fork(k, 2, p, NULL, &err), 0, "fork: %s", err ? err->msg : "?");
	cr_assert_eq(frozen_layers(name), 1, "one frozen layer per fork");
	cr_assert_eq(frozen_on_disk(name), 1);
	for (int i = 0; i < 2; i++) {
		char *got = sh(k[i], TREE_SIG, 0);
		cr_assert_str_eq(got, want, "child %d differs from the parent", i);
		free(got);
		check_xattr(k[i], "/work/h1", "parent");
	}
	/* Writes stay apart: a child's, the parent's, its sibling's. */
	free(sh(k[0], "echo k0 > /work/h1 && rm /work/big && touch /home/k0", 0));
	set_xattr(k[0], "/work/d", "k0");
	free(sh(p, "echo p > /work/h2 && touch /home/p", 0));
	char *o1 = sh(k[1], "cat /work/h1; ls /home/k0 /home/p 2>/dev/null | wc -l; ls /work/big", 0);
	cr_assert_str_eq(o1, "h\n0\n/work/big\n");
	free(o1);
	o1 = sh(p, "cat /work/h1; ls /home/k0 2>/dev/null | wc -l", 0);
	cr_assert_str_eq(o1, "p\n0\n");
	free(o1);
	/* The parent goes first; then the children, the last taking the layer. */
	destroy(p);
	char *again = sh(k[1], TREE_SIG, 0);
	cr_assert_str_eq(again, want, "child 1 after the parent's destroy");
	free(again);
	destroy(k[0]);
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(name), 2, "the frozen layer went before its last child");
	destroy(k[1]);
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(name), 0, "the frozen layer is left behind after its last child");
	cr_assert_eq(scratch_mounts(), mnt0, "mounts of the scratch fs leak");
	free(want);
}

Test(fork, child_sees_exactly_the_parent_tree)
{
	fork_keeps_everything(SBX_USERNS_PRIVATE);
}

Test(fork, child_sees_exactly_the_parent_tree_userns_host)
{
	fork_keeps_everything(SBX_USERNS_HOST);
}

/* Past the copy's file budget the frozen layer is a snapshot keeping the
 * parent's ids (mounted with a shift per child); forks of forks stack two. */
static void many_files(sbx_userns userns)
{
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.scratch = SBX_SCRATCH_DISK;
	so.userns = userns;
	sbx_sandbox *p = sbx_test_sandbox(rt, &so);
	free(sh(p, "mkdir /m && cd /m && seq 1 5000 | xargs touch && echo v > /m/17 && chown 1000:50 /m/17 && "
		   "rm /etc/group",
		   0));
	sbx_sandbox *k[2] = { 0 };
	sbx_error *err = NULL;
	char frz[32] = "";
	cr_assert_eq(sbx_sandbox_fork(k, 2, p, NULL, &err), 0, "fork: %s", err ? err->msg : "?");
	cr_assert_eq(frozen_layers(frz), 1, "one frozen layer, a snapshot");
	cr_assert_eq(frozen_on_disk(frz), 1);
	const char *check = "ls /m | wc -l; cat /m/17; stat -c '%u %g' /m/17; ls /etc/group 2>/dev/null | wc -l";
	for (int i = 0; i < 2; i++) {
		char *o = sh(k[i], check, 0);
		cr_assert_str_eq(o, "5000\nv\n1000 50\n0\n", "child %d", i);
		free(o);
	}
	free(sh(k[0], "rm /m/17", 0));
	char *o = sh(k[1], "cat /m/17", 0);
	cr_assert_str_eq(o, "v\n");
	free(o);
	/* A fork of a child that wrote many files too: two snapshot layers. */
	free(sh(k[1], "mkdir /m2 && cd /m2 && seq 1 5000 | xargs touch && echo w > /m2/9 && chown 1001:1001 /m2/9",
		0));
	sbx_sandbox *g = NULL;
	cr_assert_eq(sbx_sandbox_fork(&g, 1, k[1], NULL, &err), 0, "fork of a fork: %s", err ? err->msg : "?");
	o = sh(g, "ls /m /m2 | wc -l; stat -c '%u %g' /m/17 /m2/9; cat /m2/9", 0);
	cr_assert_str_eq(o, "10003\n1000 50\n1001 1001\nw\n", "grandchild");
	free(o);
	/* And a third generation: past the shifted layers' limit it copies. */
	free(sh(g, "mkdir /m3 && cd /m3 && seq 1 5000 | xargs touch", 0));
	sbx_sandbox *gg = NULL;
	cr_assert_eq(sbx_sandbox_fork(&gg, 1, g, NULL, &err), 0, "third generation: %s", err ? err->msg : "?");
	o = sh(gg, "ls /m /m2 /m3 | wc -l; stat -c '%u %g' /m/17 /m2/9", 0);
	cr_assert_str_eq(o, "15005\n1000 50\n1001 1001\n", "third generation");
	free(o);
	destroy(gg);
	destroy(g);
	destroy(k[0]);
	destroy(k[1]);
	destroy(p);
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(frz), 0, "frozen layers are left behind");
}

Test(fork, many_files_share_one_snapshot)
{
	many_files(SBX_USERNS_PRIVATE);
}

Test(fork, many_files_share_one_snapshot_userns_host)
{
	many_files(SBX_USERNS_HOST);
}

Test(fork, snapshot_of_a_child_holds_its_frozen_layer)
{
	char frz[32] = "";
	sbx_sandbox *p = disk_sandbox(0);
	free(sh(p, "echo parent > /a", 0));
	sbx_sandbox *k = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_fork(&k, 1, p, NULL, &err), 0, "fork: %s", err ? err->msg : "?");
	free(sh(k, "echo child > /b", 0));
	char *name = NULL;
	char want[64];
	snprintf(want, sizeof(want), "k-%d", (int)getpid());
	cr_assert_eq(sbx_sandbox_snapshot(&name, k, want, &err), 0, "snapshot: %s", err ? err->msg : "?");
	destroy(k);
	destroy(p);
	cr_assert_eq(frozen_layers(frz), 1, "the snapshot lost the frozen layer below it");
	cr_assert_eq(frozen_on_disk(frz), 1);
	char img[96];
	snprintf(img, sizeof(img), "snapshot:%s", name);
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = img;
	sbx_sandbox *s = sbx_test_sandbox(rt, &o);
	char *out = sh(s, "cat /a /b", 0);
	cr_assert_str_eq(out, "parent\nchild\n");
	free(out);
	cr_assert_eq(sbx_snapshot_remove(rt, NULL, name, &err), 0, "remove: %s", err ? err->msg : "?");
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(frz), 2, "a sandbox made from the snapshot holds the layer");
	destroy(s);
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(frz), 0, "the frozen layer is left behind");
	free(name);
}

Test(fork, gc_removes_an_orphaned_frozen_layer)
{
	sbx_sandbox *p = disk_sandbox(0);
	free(sh(p, "echo x > /x", 0));
	sbx_sandbox *k = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_fork(&k, 1, p, NULL, &err), 0, "fork: %s", err ? err->msg : "?");
	/* A holder that died without its teardown (a crashed creator). */
	char frz[32] = "", ref[700], name[40];
	cr_assert_eq(frozen_layers(frz), 1);
	snprintf(ref, sizeof(ref), "%s/local/frozen/%s/0123456789ab", sbx_runtime_state_dir(rt), frz);
	snprintf(name, sizeof(name), "frz-%s", frz);
	FILE *f = fopen(ref, "w");
	cr_assert_not_null(f);
	fclose(f);
	destroy(k);
	destroy(p);
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(frz), 2, "held by a dead holder: left for gc");
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, "local", NULL, &err), 0);
	int listed = 0;
	for (size_t i = 0; i < n; i++)
		listed |= strcmp(v[i].id, name) == 0 && v[i].leaked;
	sbx_sandbox_info_free(v, n);
	cr_assert(listed, "gc does not see the orphaned frozen layer %s", name);
	cr_assert_eq(sbx_sandbox_destroy_id(rt, "local", name, &err), 0, "gc: %s", err ? err->msg : "?");
	cr_assert_eq(frozen_layers(NULL) + frozen_on_disk(frz), 0, "gc left the frozen layer");
	cr_assert_eq(sbx_sandbox_destroy_id(rt, "local", name, &err), -ENOENT);
	sbx_error_free(err);
}

/* The frozen layer is a lower layer: a child's own may stay in memory. */
Test(fork, children_may_write_to_memory)
{
	sbx_sandbox *p = disk_sandbox(0);
	free(sh(p, "echo disk > /f", 0));
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.scratch = SBX_SCRATCH_TMPFS;
	sbx_sandbox *k = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_fork(&k, 1, p, &o, &err), 0, "fork: %s", err ? err->msg : "?");
	cr_assert_eq(layer_of(sbx_sandbox_id(k)), 0, "a tmpfs child has no subvolume");
	char *out = sh(k, "cat /f && echo mem > /f && cat /f", 0);
	cr_assert_str_eq(out, "disk\nmem\n");
	free(out);
	destroy(p);
	destroy(k);
	cr_assert_eq(frozen_layers(NULL), 0, "the frozen layer is left behind");
}
