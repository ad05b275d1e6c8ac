/* SPDX-License-Identifier: MIT */
/* Test fixture: image "bash" (host bash + its libraries + busybox-static),
 * the image E2B-style clients need (the SDK runs /bin/bash -l -c CMD). */
#ifndef SBX_TEST_BASH_IMAGE_H
#define SBX_TEST_BASH_IMAGE_H

#include <sbx/sbx.h>

/* Makes sure image "bash" exists in rt's image store, built once per build
 * tree from tests/support/mk-bash-rootfs.sh under an flock. Skips the test
 * when busybox-static or bash is missing. */
void sbx_test_bash_image(sbx_runtime *rt);

#endif
