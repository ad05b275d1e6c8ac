/* SPDX-License-Identifier: MIT */
/* Test fixtures: a private runtime and a tiny busybox image built offline. */
#ifndef SBX_TEST_FIXTURES_H
#define SBX_TEST_FIXTURES_H

#include <sbx/sbx.h>

/* A runtime with a fresh state dir and the shared test image store.
 * Aborts the test on failure. Free with sbx_test_runtime_free(). */
sbx_runtime *sbx_test_runtime(void);
void sbx_test_runtime_free(sbx_runtime *rt);

/* Makes sure image "busybox" exists in the test image store (built once from
 * busybox-static, under a lock). Returns 0 or skips the test if busybox is missing. */
void sbx_test_busybox_image(sbx_runtime *rt);

/* Creates a sandbox from "busybox" with defaults adjusted by `opts` (may be NULL). */
sbx_sandbox *sbx_test_sandbox(sbx_runtime *rt, const sbx_sandbox_opts *opts);

/* Skips the test (exit 0 with a message) unless we can make namespaces;
 * with SBX_MUST_WORK=1 that is a failure instead. */
void sbx_test_require_root(void);

/* Count of open fds in this process. */
int sbx_test_count_fds(void);
/* fds of namespaces (the local provider's namespace pool) */
int sbx_test_count_ns_fds(void);

/* Runs a shell command in the sandbox and returns stdout (owned) and exit code. */
char *sbx_test_sh(sbx_sandbox *sb, const char *cmd, int *exit_code);

#endif
