/* SPDX-License-Identifier: MIT */
/* Test fixtures: a private runtime and a tiny busybox image built offline. */
#ifndef SBX_TEST_FIXTURES_H
#define SBX_TEST_FIXTURES_H

#include <criterion/criterion.h>
#include <sbx/sbx.h>
#include <stdbool.h>

/* A runtime with a fresh state dir and the shared test image store.
 * Aborts the test on failure. Free with sbx_test_runtime_free(). */
sbx_runtime *sbx_test_runtime(void);
void sbx_test_runtime_free(sbx_runtime *rt);

/* Makes sure image "busybox" exists in the test image store (built once from
 * busybox-static, under a lock). Returns 0 or skips the test if busybox is missing. */
void sbx_test_busybox_image(sbx_runtime *rt);

/* Creates a sandbox from "busybox" with defaults adjusted by `opts` (may be NULL). */
sbx_sandbox *sbx_test_sandbox(sbx_runtime *rt, const sbx_sandbox_opts *opts);

/* True when SBX_MUST_WORK=1 (CI, through .ci/run): nothing may be skipped. */
bool sbx_test_must_work(void);

/* Skips the test for something missing on this machine (a tool, data, root),
 * saying what; with SBX_MUST_WORK=1 that is a failure instead. Every skip in
 * the suite goes through here, so scripts/run-tests.sh counts it as skipped
 * and CI cannot pass on a test that did not run. */
#define sbx_test_skip(...)                                \
	do {                                              \
		if (sbx_test_must_work())                 \
			cr_assert_fail(__VA_ARGS__);      \
		cr_skip_test(__VA_ARGS__);                \
	} while (0)

/* Skips the test (sbx_test_skip) unless we can make namespaces. */
void sbx_test_require_root(void);

/* Count of open fds in this process. */
int sbx_test_count_fds(void);
/* fds of namespaces (the local provider's namespace pool) */
int sbx_test_count_ns_fds(void);

/* Runs a shell command in the sandbox and returns stdout (owned) and exit code. */
char *sbx_test_sh(sbx_sandbox *sb, const char *cmd, int *exit_code);

#endif
