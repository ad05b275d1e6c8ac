/* SPDX-License-Identifier: MIT */
/*
 * The "bash" test image: tests/support/mk-bash-rootfs.sh builds the rootfs
 * (offline, a few seconds) and it is imported once per image store, under
 * an flock so parallel test processes share it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "bash_image.h"
#include "fixtures.h"

void sbx_test_bash_image(sbx_runtime *rt)
{
	if (access("/bin/busybox", X_OK) != 0 || access("/bin/bash", X_OK) != 0)
		sbx_test_skip("busybox-static or bash is not installed (scripts/deps.sh)");
	const char *src = getenv("SBX_SOURCE_ROOT");
	const char *build = getenv("SBX_BUILD_ROOT");
	if (!src || !build)
		sbx_test_skip("SBX_SOURCE_ROOT/SBX_BUILD_ROOT not set (run through meson test)");
	char lockp[512];
	snprintf(lockp, sizeof(lockp), "%s/test-images.lock", build);
	int lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert(lfd >= 0, "open %s", lockp);
	cr_assert_eq(flock(lfd, LOCK_EX), 0);
	sbx_image *img = NULL;
	if (sbx_image_get(&img, rt, "bash", NULL) == 0) {
		sbx_image_free(img);
		close(lfd);
		return;
	}
	char root[512], cmd[1600];
	snprintf(root, sizeof(root), "%s/test-bash-rootfs.%d", build, (int)getpid());
	snprintf(cmd, sizeof(cmd), "sh '%s/tests/support/mk-bash-rootfs.sh' '%s' >/dev/null", src, root);
	int rc = system(cmd);
	sbx_error *err = NULL;
	int r = rc == 0 ? sbx_image_import(NULL, rt, "bash", root, &err) : -1;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "bash_image: could not remove %s\n", root);
	close(lfd);
	cr_assert_eq(rc, 0, "mk-bash-rootfs.sh failed");
	cr_assert_eq(r, 0, "import bash: %s", err ? err->msg : "?");
}
