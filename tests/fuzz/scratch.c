/* SPDX-License-Identifier: MIT */
/*
 * The one scratch directory a harness process works in: on /dev/shm (a
 * tmpfs) when it is writable, else /tmp, and removed with everything in it
 * when the process exits normally (replay's return from main, libFuzzer's
 * -runs / -max_total_time end). A crash or timeout ends the process with
 * _Exit and leaves it behind, together with the crash input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../src/util/alloc.h"
#include "../../src/util/fs.h"
#include "fuzz.h"

static char *scratch;

static void remove_scratch(void)
{
	if (scratch)
		sbx__rm_rf(scratch, NULL);
	free(scratch);
	scratch = NULL;
}

const char *fz_scratch_dir(const char *name)
{
	if (scratch)
		return scratch;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	scratch = xasprintf("%s/sbx-fuzz-%s-XXXXXX", base, name);
	if (!mkdtemp(scratch)) {
		perror(scratch);
		abort();
	}
	atexit(remove_scratch);
	return scratch;
}
