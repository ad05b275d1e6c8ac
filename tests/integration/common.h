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

/* The host pid of the sandbox's init, as sbx_sandbox_list() reports it. */
static inline pid_t sandbox_init_pid(sbx_sandbox *sb)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, &err), 0, "list: %s", err ? err->msg : "?");
	pid_t pid = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].id, sbx_sandbox_id(sb)) == 0)
			pid = (pid_t)v[i].pid;
	sbx_sandbox_info_free(v, n);
	cr_assert_gt(pid, 0, "sandbox %s not listed", sbx_sandbox_id(sb));
	return pid;
}

#endif
