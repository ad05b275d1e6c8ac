/* SPDX-License-Identifier: MIT */
/*
 * The provider conformance suite's harness: which provider this run tests
 * ($SBX_CONF_PROVIDER: local, faulty, e2b or daytona), a private runtime for it, and
 * for e2b and daytona an `sbx serve` of the test's own on loopback. Only the public API
 * (include/sbx/) is used; the binary links the shared libsbx, which exports
 * nothing else.
 */
#ifndef SBX_TEST_PROVIDER_HARNESS_H
#define SBX_TEST_PROVIDER_HARNESS_H

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <sbx/sbx.h>
#include <sbx/sys/faulty.h>

enum conf_kind { CONF_LOCAL, CONF_FAULTY, CONF_E2B, CONF_DAYTONA };
/* A provider tested against an `sbx serve` of the test's own. */
#define CONF_SERVED(k) ((k) == CONF_E2B || (k) == CONF_DAYTONA)

struct conf {
	enum conf_kind kind;
	const char *name;     /* provider name in specs and lists */
	sbx_runtime *rt;
	char state[512];      /* this test's runtime state dir */
	char images[512];     /* the shared test image store */
	char run[64];         /* unique label value: conf.run=<run> on every sandbox */
	char label[96];       /* "conf.run=<run>" */
	const char *labels[2]; /* { label, NULL } */
	pid_t srv_pid;        /* e2b: the sbx serve process */
	char srv_state[512];
	char keyfile[600];
};

extern struct conf C;

/* Suite init/fini: the provider from the environment, a private runtime, the
 * busybox image, and the server for e2b. */
void conf_setup(void);
void conf_teardown(void);
/* For a test that needs a server with extra options (e2b only): restarts it. */
void conf_restart_server(const char *extra);

/* A fresh runtime on the same state dir and image store (for a child process). */
sbx_runtime *conf_runtime(void);

/* Spec of a conformance sandbox: busybox, the provider, conf.run=<run>, TTL 300 s
 * (so one a failed test leaves behind reaps itself). */
sbx_sandbox_opts conf_opts(void);
/* Creates one (asserting success), with extra labels (NULL-terminated, may be NULL). */
sbx_sandbox *conf_create(const sbx_sandbox_opts *o);
void conf_destroy(sbx_sandbox *sb);

/* Runs a shell command; asserts the call itself succeeded. Free with sbx_exec_result_free(). */
sbx_exec_result conf_sh(sbx_sandbox *sb, const char *cmd);
sbx_exec_result conf_exec(sbx_sandbox *sb, const sbx_exec_opts *o);

/* Sandboxes of this provider whose labels include conf.run=<run> and `extra`. */
size_t conf_count(const char *extra);
/* Polls (bounded) until conf_count(extra) == want; returns the last count. */
size_t conf_wait_count(const char *extra, size_t want, double max_s);

/* A secret the log sink looks for in every message (at every level), and
 * how many messages carried it. */
extern const char *volatile conf_secret;
extern _Atomic int conf_secret_leaks;

/* Number of "create throttled" warnings the runtime logged so far. */
int conf_throttle_logs(void);

/* Deterministic pseudo-random bytes. */
void conf_fill(unsigned char *buf, size_t len, unsigned seed);
/* Lower-case hex SHA-256 of buf into hex[65]. */
void conf_sha256(const void *buf, size_t len, char hex[65]);

double conf_now(void);
void conf_sleep(double s);

/* A case a provider fails because of a bug found by this suite and not fixed
 * yet: skipped (counted as skipped, never passed) with the bug named, unless
 * SBX_CONF_KNOWN_BUGS=run, which runs it to show the failure. */
#define CONF_KNOWN_BUG(why)                                                                 \
	do {                                                                                \
		const char *kb_ = getenv("SBX_CONF_KNOWN_BUGS");                            \
		if (!kb_ || strcmp(kb_, "run"))                                            \
			cr_skip_test("%s: known bug: %s", C.name, why);                     \
	} while (0)

#define ERRMSG(e) ((e) && (e)->msg ? (e)->msg : "?")

#endif
