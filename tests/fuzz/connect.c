/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: Connect envelopes and messages, both sides. Server side
 * (src/server/connect.c and the envd RPC handlers): byte 0 picks an RPC,
 * bit 0 of byte 1 picks the streaming content type (5-byte envelope) or
 * unary JSON, the rest is the request body, sent with the fake sandbox's
 * token (srv_fixture.c). Client side (src/providers/e2b/): the same bytes
 * as a server's response stream, fed to the incremental envelope parser in
 * chunks sized by byte 1, each frame decoded as a process event or the
 * end-stream message, and as an error body of a failed call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/providers/e2b/e2b_int.h"
#include "../../src/util/alloc.h"
#include "fuzz.h"
#include "srv_fixture.h"

static const char *const rpcs[] = {
	"/process.Process/Start",       "/process.Process/Connect",   "/process.Process/List",
	"/process.Process/SendInput",   "/process.Process/SendSignal", "/process.Process/CloseStdin",
	"/process.Process/Update",      "/process.Process/StreamInput", "/filesystem.Filesystem/Stat",
	"/filesystem.Filesystem/ListDir", "/filesystem.Filesystem/MakeDir", "/filesystem.Filesystem/Move",
	"/filesystem.Filesystem/Remove", "/filesystem.Filesystem/WatchDir", "/filesystem.Filesystem/Other",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_srv();
	return 0;
}

static int on_frame(unsigned flags, const char *msg, size_t len, void *ud)
{
	(void)ud;
	sbx_error *e = NULL;
	if (flags & 0x02) {
		(void)sbx__e2b_end_stream(msg, len, "process", &e);
		sbx_error_free(e);
		return 0;
	}
	struct e2b_event ev;
	if (sbx__e2b_event_parse(&ev, msg, len) < 0)
		return -EPROTO;
	sbx__e2b_event_clear(&ev);
	return 0;
}

static void client(const char *p, size_t n, unsigned chunk)
{
	struct e2b_envelopes env;
	sbx__e2b_envelopes_init(&env);
	for (size_t off = 0; off < n;) {
		size_t k = n - off < chunk ? n - off : chunk;
		if (sbx__e2b_envelopes_feed(&env, p + off, k, on_frame, NULL) < 0)
			break;
		off += k;
	}
	sbx__e2b_envelopes_free(&env);
	sbx_error *e = NULL;
	(void)sbx__e2b_map_http(400, p, n, "process", &e);
	sbx_error_free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const char *rpc = rpcs[data[0] % (sizeof(rpcs) / sizeof(rpcs[0]))];
	int stream = data[1] & 1;
	const char *body = (const char *)data + 2;
	size_t len = size - 2;
	struct fz_header h[] = {
		{ "X-Access-Token", FZ_TOKEN },
		{ "Content-Type", stream ? "application/connect+json" : "application/json" },
		{ "Connect-Protocol-Version", "1" },
	};
	fz_request("POST", rpc, h, 3, body, len, len);
	client(body, len, 1u + (data[1] >> 1) * 4u);
	return 0;
}
