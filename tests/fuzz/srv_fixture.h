/* SPDX-License-Identifier: MIT */
/*
 * An in-process `sbx serve` for the fuzz harnesses: the real request path of
 * src/server/ (http.c's callbacks, routing, auth, control plane, envd) over a
 * fake libmicrohttpd (srv_fixture.c defines the MHD_* functions the server
 * calls, so no socket is opened) and a fake provider whose one sandbox
 * accepts writes and has no files. Requests run one at a time on the
 * caller's thread.
 */
#ifndef SBX_FUZZ_SRV_FIXTURE_H
#define SBX_FUZZ_SRV_FIXTURE_H

#include <stddef.h>

#include <sbx/sys/provider.h>

#include "../../src/server/server_int.h"

/* The API key and the sandbox's id and envd access token. */
#define FZ_API_KEY "e2b_fuzzkey0123456789"
#define FZ_SANDBOX_ID "fuzzsbx0"
#define FZ_TOKEN "fuzztoken0123456789"

struct fz_header {
	const char *name, *value;
};

/* Starts the server once (state and image store under /dev/shm or /tmp). */
struct server *fz_srv(void);

/*
 * Runs one request. URL may hold a query string; BODY arrives in two chunks
 * split at SPLIT (clamped). Afterwards the sandbox table is put back to one
 * running sandbox. Returns the status the server queued (0 = none).
 */
int fz_request(const char *method, const char *url, const struct fz_header *h, size_t nh,
	       const void *body, size_t len, size_t split);

/* The provider of that sandbox (fake_provider.c). */
const sbx_provider_ops *fz_fake_provider(void);

#endif
