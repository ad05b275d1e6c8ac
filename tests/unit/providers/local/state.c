/* SPDX-License-Identifier: MIT */
/* The per-sandbox state file round-trips, and bad files are errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "providers/local/local_int.h"

Test(local_state, round_trip)
{
	char path[] = "/tmp/sbx-state-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	char *labels[] = { "task=fix-git", "run=r1", NULL };
	struct local_state st = { .id = "0123456789ab", .image = "debian:bookworm", .status = "running",
				  .pid = 1234, .start = 987654321, .owner = 42, .owner_start = 7,
				  .detach = 1, .created = 1700000000.5, .expires = 1700000600.5,
				  .labels = labels };
	cr_assert_eq(sbx__state_write(path, &st, NULL), 0);
	struct local_state back;
	cr_assert_eq(sbx__state_read(&back, path, NULL), 0);
	cr_assert_str_eq(back.id, "0123456789ab");
	cr_assert_str_eq(back.image, "debian:bookworm");
	cr_assert_eq(back.pid, 1234);
	cr_assert_eq(back.start, 987654321);
	cr_assert_eq(back.owner, 42);
	cr_assert_eq(back.detach, 1);
	cr_assert_float_eq(back.expires, 1700000600.5, 1e-6);
	cr_assert_str_eq(back.labels[1], "run=r1");
	cr_assert_null(back.labels[2]);
	sbx__state_clear(&back);
	FILE *f = fopen(path, "w");
	fputs("{\"not\": \"a state\"}", f);
	fclose(f);
	sbx_error *err = NULL;
	cr_assert_eq(sbx__state_read(&back, path, &err), -EPROTO);
	cr_assert_not_null(strstr(err->msg, path));
	sbx_error_free(err);
	unlink(path);
}

/* A fork child's frozen layers (frozen.c) round-trip in order; entries
 * that are not "NAME" or "NAME:BASE" are dropped, never mounted. */
Test(local_state, frozen_layers_round_trip)
{
	char path[] = "/tmp/sbx-state-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	char *frozen[] = { "0123456789ab", "ba9876543210:100000", "../../etc", "0123456789ab:", "0123456789ab:x",
			   NULL };
	struct local_state st = { .id = "0123456789ab", .image = "busybox", .has_spec = 1,
				  .spec = SBX_SANDBOX_OPTS_INIT, .frozen = frozen };
	cr_assert_eq(sbx__state_write(path, &st, NULL), 0);
	struct local_state back;
	cr_assert_eq(sbx__state_read(&back, path, NULL), 0);
	cr_assert_not_null(back.frozen);
	cr_assert_str_eq(back.frozen[0], "0123456789ab");
	cr_assert_str_eq(back.frozen[1], "ba9876543210:100000");
	cr_assert_null(back.frozen[2], "a bad entry was kept: %s", back.frozen[2]);
	cr_assert_eq(sbx__frozen_base(back.frozen[0]), 0);
	cr_assert_eq(sbx__frozen_base(back.frozen[1]), 100000);
	sbx__state_clear(&back);
	unlink(path);
}

Test(local_proc, start_time_identifies_a_process)
{
	uint64_t me = sbx__proc_starttime(getpid());
	cr_assert_gt(me, 0);
	cr_assert(sbx__proc_alive(getpid(), me));
	cr_assert_not(sbx__proc_alive(getpid(), me + 1), "pid reuse must not look alive");
	cr_assert_not(sbx__proc_alive(0, 0));
}
