/* SPDX-License-Identifier: MIT */
/* The entry point of `sbx serve` for the CLI: options and the blocking run. */
#ifndef SBX_SERVER_SERVE_H
#define SBX_SERVER_SERVE_H

#include <sbx/error.h>

/* Options of `sbx serve`, filled by src/cli/cmd_serve.c. */
struct srv_config {
	const char *listen_addr;      /* "127.0.0.1" */
	unsigned port;                /* 0 = any free port */
	const char *state_dir;        /* absolute */
	const char *image_dir;        /* NULL = runtime default */
	const char *default_template; /* image used for templateID "base" */
	int print_port;
	int destroy_on_exit;
	int access_log;
	int allow_internet;           /* honour allow_internet_access (network=internet) */
	double cpus;
	unsigned memory_mb;
	unsigned storage_mb;
	unsigned max_sandboxes;
	unsigned max_timeout_s;
	unsigned idle_timeout_s;      /* close connections idle this long; 0 = never */
	unsigned max_connections;     /* all clients together */
	unsigned max_connections_per_ip;
	const char *domain;           /* getHost suffix ({port}-{id}.DOMAIN); NULL = <listen>.sslip.io:<port> */
	unsigned proxy_idle_timeout_s; /* proxied connections idle this long close; 0 = never */
	unsigned max_proxy_connections; /* per sandbox */
	unsigned pool_size;           /* --pool: sandboxes kept warm per template (0 = none) */
	char **pool_templates;        /* --pool-template (NULL: "base") */
};

/* Runs the server until SIGINT/SIGTERM. Returns the process exit code. */
int sbx__srv_run(const struct srv_config *cfg);
/* Writes a new API key to <state_dir>/server/api-key (owned in *key_out). */
int sbx__srv_auth_rotate(const char *state_dir, char **key_out, sbx_error **err);

#endif
