/* SPDX-License-Identifier: MIT */
/* `sbx openenv serve`: the entry point the CLI calls (docs/openenv.md). */
#ifndef SBX_OPENENV_SERVE_H
#define SBX_OPENENV_SERVE_H

#include <stddef.h>
#include <sbx/runtime.h>

struct oe_config {
	const char *listen_addr;    /* "127.0.0.1" */
	unsigned port;              /* 0 = any free port */
	const char *tasks_dir;      /* absolute */
	const char *backend;        /* NULL = the runtime's default */
	unsigned max_sessions;      /* WebSocket sessions at once */
	size_t max_message;         /* bytes in one message (and one HTTP body) */
	unsigned workers;           /* blocking calls at once */
	double ping_interval_s;     /* server pings; 0 = never */
	double ping_timeout_s;      /* no pong (nor anything) for this long: drop */
	double message_timeout_s;   /* a started message must arrive within this */
	double step_timeout_s;      /* default exec timeout; 0 = the agent limit */
	int print_port;
};

/* Serves until SIGINT or SIGTERM, then destroys every live sandbox.
 * @return 0, or -errno (the listen socket could not be set up; printed). */
int sbx__oe_serve(const struct oe_config *c, sbx_runtime *rt);

#endif
