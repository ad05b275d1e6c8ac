/* SPDX-License-Identifier: MIT */
/* Shared setup for the integration tests: one runtime and the busybox image. */
#ifndef SBX_TEST_INTEGRATION_COMMON_H
#define SBX_TEST_INTEGRATION_COMMON_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

static sbx_runtime *rt;

static void setup(void)
{
	sbx_test_require_root();
	rt = sbx_test_runtime();
	sbx_test_busybox_image(rt);
}

static void teardown(void)
{
	sbx_test_runtime_free(rt);
}

/* Uploads the static probe binary to /probe. */
static inline void upload_probe(sbx_sandbox *sb)
{
	const char *p = getenv("SBX_PROBE");
	cr_assert_not_null(p, "SBX_PROBE not set");
	sbx_error *err = NULL;
	int r = sbx_sandbox_upload(sb, p, "/probe", &err);
	cr_assert_eq(r, 0, "upload probe: %s", err ? err->msg : "?");
}

static inline void destroy(sbx_sandbox *sb)
{
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0, "destroy: %s", err ? err->msg : "?");
	sbx_sandbox_free(sb);
}

#endif
