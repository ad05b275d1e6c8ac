/* SPDX-License-Identifier: MIT */
/* The namespace pool: starts at the second kick, fills to its target with
 * distinct fresh namespaces, hands each out once, releases fds on its thread,
 * and gives everything back at fini. Needs root (unshare). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "providers/local/local_int.h"

static void need_root(void)
{
	if (geteuid() != 0)
		sbx_test_skip("needs root for unshare");
}

static ino_t ino_of(int fd)
{
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	return st.st_ino;
}

static ino_t own_ns(const char *kind)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/ns/%s", kind);
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	return st.st_ino;
}

/* Waits (up to 5 s) until the pool holds n sets. */
static void wait_for(struct sbx_nspool *p, unsigned n)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&p->lock);
		unsigned have = p->n;
		pthread_mutex_unlock(&p->lock);
		if (have >= n)
			return;
		usleep(10000);
	}
	cr_assert_fail("pool never reached %u sets", n);
}

Test(local_nspool, fills_hands_out_distinct_sets_and_releases)
{
	need_root();
	setenv("SBX_NS_POOL", "3", 1);
	struct sbx_nspool p;
	sbx__nspool_init(&p);
	struct sbx_nsset s = { -1, -1, -1 };
	cr_assert_eq(sbx__nspool_take(&p, &s), -1, "empty before any kick");
	sbx__nspool_kick(&p);
	cr_assert_not(sbx__nspool_active(&p), "one create does not start the thread");
	sbx__nspool_kick(&p);
	cr_assert(sbx__nspool_active(&p));
	wait_for(&p, 3);
	ino_t seen[3];
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(sbx__nspool_take(&p, &s), 0);
		cr_assert_neq(ino_of(s.net), own_ns("net"));
		cr_assert_neq(ino_of(s.uts), own_ns("uts"));
		cr_assert_neq(ino_of(s.ipc), own_ns("ipc"));
		seen[i] = ino_of(s.net);
		for (int j = 0; j < i; j++)
			cr_assert_neq(seen[i], seen[j], "a network namespace handed out twice");
		sbx__nsset_close(&s);
		cr_assert_eq(s.net, -1);
	}
	/* A released fd is closed by the thread. */
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	sbx__nspool_release(&p, fd);
	int closed = 0;
	for (int i = 0; i < 500 && !closed; i++) {
		closed = fcntl(fd, F_GETFD) < 0;
		usleep(10000);
	}
	cr_assert(closed, "released fd still open");
	sbx__nspool_kick(&p);
	wait_for(&p, 3);
	sbx__nspool_fini(&p);
	unsetenv("SBX_NS_POOL");
}

Test(local_nspool, zero_turns_it_off)
{
	setenv("SBX_NS_POOL", "0", 1);
	struct sbx_nspool p;
	sbx__nspool_init(&p);
	for (int i = 0; i < 3; i++)
		sbx__nspool_kick(&p);
	cr_assert_not(sbx__nspool_active(&p));
	struct sbx_nsset s = { -1, -1, -1 };
	cr_assert_eq(sbx__nspool_take(&p, &s), -1);
	/* release without a thread closes at once */
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sbx__nspool_release(&p, fd);
	cr_assert_lt(fcntl(fd, F_GETFD), 0);
	sbx__nspool_fini(&p);
	unsetenv("SBX_NS_POOL");
}
