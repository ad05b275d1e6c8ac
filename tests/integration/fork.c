/* SPDX-License-Identifier: MIT */
/* Fork: children start from the parent's files, writes stay apart, nothing leaks. */
#include <glob.h>
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
	cr_assert_eq(sbx_test_count_fds(), fds0, "fds leak across fork/destroy cycles");
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
