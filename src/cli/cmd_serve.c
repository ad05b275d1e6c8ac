/* SPDX-License-Identifier: MIT */
/* `sbx serve`: the self-hosted E2B-compatible server (src/server/). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../server/serve.h"
#include "../util/alloc.h"
#include "../util/config.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "cli.h"

static const char serve_help[] =
	"usage: sbx serve [--listen ADDR:PORT] [--state-dir DIR] [OPTIONS]\n\n"
	"Serve the E2B API (control plane and envd data plane on one port) on local\n"
	"sandboxes. Point the e2b SDK at it with E2B_API_URL=E2B_SANDBOX_URL=http://ADDR:PORT\n"
	"and E2B_API_KEY=<the key in DIR/server/api-key>. See docs/server.md.\n\n"
	"options:\n"
	"  --listen ADDR:PORT       listen address (default 127.0.0.1:49999; port 0 = any free port)\n"
	"  --state-dir DIR          server and sandbox state (default $SBX_STATE_DIR or /run/sbx)\n"
	"  --image-dir DIR          image store (default $SBX_IMAGE_DIR or /var/lib/sbx/images)\n"
	"  --print-port             print the bound port on the first stdout line\n"
	"  --default-template IMG   image for templateID \"base\" (default $SBX_SERVE_DEFAULT_TEMPLATE, else\n"
	"                           the image \"base\": E2B's base image, built by `make base`)\n"
	"  --destroy-on-exit        on SIGINT/SIGTERM destroy every sandbox (else they are re-adopted)\n"
	"  --allow-internet         honour allow_internet_access (E2B default true): the sandbox's own\n"
	"                           NATed network (network=internet), never the host's\n"
	"  --cpus N --memory-mb N --storage-mb N   per-sandbox limits (default all CPUs / a quarter of\n"
	"                           the host RAM, 256M..8G / 10G storage)\n"
	"  --max-sandboxes N        refuse creates past N live sandboxes with 429 (default 2000)\n"
	"  --max-timeout S          cap on sandbox timeouts in seconds (default 86400)\n"
	"  --idle-timeout S         close connections idle for S seconds (default 60; 0 = never)\n"
	"  --max-connections N      open connections, all clients (default 8192)\n"
	"  --max-connections-per-ip N   open connections from one address (default 4096)\n"
	"  --domain DOMAIN          sandboxes' domain: sandbox.getHost(port) is PORT-ID.DOMAIN, routed to\n"
	"                           that port inside the sandbox (default ADDR.sslip.io:PORT; Host names\n"
	"                           under localhost, *.sslip.io and *.nip.io are always routed)\n"
	"  --proxy-idle-timeout S   close proxied connections (WebSockets too) idle for S seconds\n"
	"                           (default 600; 0 = never)\n"
	"  --max-proxy-connections N   open proxied connections per sandbox (default 256)\n"
	"  --pool N                 keep N sandboxes warm per --pool-template: a create of that template\n"
	"                           without metadata and envVars is a hand-out (ready waits for them)\n"
	"  --pool-template T        a template kept warm (repeatable; default \"base\")\n"
	"  --no-access-log          do not log requests to stderr\n"
	"  --rotate-key             write a new API key to DIR/server/api-key, print it, exit\n";

enum { O_LISTEN = 256, O_STATE, O_IMAGE, O_PRINT, O_DEFAULT, O_DESTROY, O_INET, O_CPUS, O_MEM, O_STOR, O_MAX,
       O_MAXT, O_NOLOG, O_ROTATE, O_IDLE, O_MAXC, O_MAXCIP, O_DOMAIN, O_PIDLE, O_MAXPX, O_POOL, O_POOLT };

static int parse_listen(struct srv_config *c, char *s)
{
	char *colon = strrchr(s, ':');
	uint64_t port;
	if (!colon || sbx__parse_u64(&port, colon + 1) < 0 || port > 65535)
		return -1;
	*colon = '\0';
	c->listen_addr = s;
	c->port = (unsigned)port;
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "image-dir", required_argument, NULL, O_IMAGE },
		{ "print-port", no_argument, NULL, O_PRINT },
		{ "default-template", required_argument, NULL, O_DEFAULT },
		{ "destroy-on-exit", no_argument, NULL, O_DESTROY },
		{ "allow-internet", no_argument, NULL, O_INET },
		{ "cpus", required_argument, NULL, O_CPUS },
		{ "memory-mb", required_argument, NULL, O_MEM },
		{ "storage-mb", required_argument, NULL, O_STOR },
		{ "max-sandboxes", required_argument, NULL, O_MAX },
		{ "max-timeout", required_argument, NULL, O_MAXT },
		{ "no-access-log", no_argument, NULL, O_NOLOG },
		{ "rotate-key", no_argument, NULL, O_ROTATE },
		{ "idle-timeout", required_argument, NULL, O_IDLE },
		{ "max-connections", required_argument, NULL, O_MAXC },
		{ "max-connections-per-ip", required_argument, NULL, O_MAXCIP },
		{ "domain", required_argument, NULL, O_DOMAIN },
		{ "proxy-idle-timeout", required_argument, NULL, O_PIDLE },
		{ "max-proxy-connections", required_argument, NULL, O_MAXPX },
		{ "pool", required_argument, NULL, O_POOL },
		{ "pool-template", required_argument, NULL, O_POOLT },
		{ NULL, 0, NULL, 0 },
	};
	char listen_buf[256] = "127.0.0.1:49999";
	struct srv_config c = { .access_log = 1, .max_sandboxes = 2000, .max_timeout_s = 86400,
				.idle_timeout_s = 60, .max_connections = 8192, .max_connections_per_ip = 4096,
				.proxy_idle_timeout_s = 600, .max_proxy_connections = 256 };
	const char *state = sbx__env("SBX_STATE_DIR");
	int rotate = 0, ch;
	uint64_t u;
	c.default_template = sbx__env("SBX_SERVE_DEFAULT_TEMPLATE");
	c.image_dir = sbx__env("SBX_IMAGE_DIR");
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': printf("%s", serve_help); return EXIT_OK;
		case O_LISTEN: snprintf(listen_buf, sizeof(listen_buf), "%s", optarg); break;
		case O_STATE: state = optarg; break;
		case O_IMAGE: c.image_dir = optarg; break;
		case O_PRINT: c.print_port = 1; break;
		case O_DEFAULT: c.default_template = optarg; break;
		case O_DESTROY: c.destroy_on_exit = 1; break;
		case O_INET: c.allow_internet = 1; break;
		case O_DOMAIN:
			if (!*optarg || strspn(optarg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") !=
					    strlen(optarg))
				return cli_usage_error("serve", "--domain wants a DNS name (and optional :PORT), got '%s'",
						       optarg);
			c.domain = optarg;
			break;
		case O_CPUS:
			c.cpus = strtod(optarg, NULL);
			if (c.cpus < 0)
				return cli_usage_error("serve", "--cpus must be >= 0");
			break;
		case O_MEM:
		case O_STOR:
		case O_MAX:
		case O_MAXT:
		case O_IDLE:
		case O_MAXC:
		case O_MAXCIP:
		case O_PIDLE:
		case O_MAXPX:
			if (sbx__parse_u64(&u, optarg) < 0 || u > UINT_MAX)
				return cli_usage_error("serve", "expected a number, got '%s'", optarg);
			if ((ch == O_MAXC || ch == O_MAXCIP || ch == O_MAXPX) && u == 0)
				return cli_usage_error("serve", "--max-%sconnections%s must be at least 1",
						       ch == O_MAXPX ? "proxy-" : "", ch == O_MAXCIP ? "-per-ip" : "");
			if (ch == O_PIDLE && u > 86400 * 7)
				return cli_usage_error("serve", "--proxy-idle-timeout is at most 604800 s (a week)");
			if (ch == O_IDLE)
				c.idle_timeout_s = (unsigned)u;
			else if (ch == O_MAXC)
				c.max_connections = (unsigned)u;
			else if (ch == O_MAXCIP)
				c.max_connections_per_ip = (unsigned)u;
			else if (ch == O_PIDLE)
				c.proxy_idle_timeout_s = (unsigned)u;
			else if (ch == O_MAXPX)
				c.max_proxy_connections = (unsigned)u;
			else if (ch == O_MEM)
				c.memory_mb = (unsigned)u;
			else if (ch == O_STOR)
				c.storage_mb = (unsigned)u;
			else if (ch == O_MAX)
				c.max_sandboxes = (unsigned)u;
			else
				c.max_timeout_s = (unsigned)u;
			break;
		case O_POOL:
			if (sbx__parse_u64(&u, optarg) < 0 || u > 1024)
				return cli_usage_error("serve", "--pool '%s': expected a number of sandboxes, 0 to 1024",
						       optarg);
			c.pool_size = (unsigned)u;
			break;
		case O_POOLT:
			if (!*optarg)
				return cli_usage_error("serve", "--pool-template wants a template name or alias");
			sbx__strv_push(&c.pool_templates, optarg);
			break;
		case O_NOLOG: c.access_log = 0; break;
		case O_ROTATE: rotate = 1; break;
		default: return cli_usage_error("serve", "unknown option");
		}
	}
	if (optind < argc)
		return cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
	if (parse_listen(&c, listen_buf) < 0)
		return cli_usage_error("serve", "--listen wants ADDR:PORT, got '%s'", listen_buf);
	char abs_state[PATH_MAX];
	if (!state || !*state)
		state = "/run/sbx";
	if (sbx__mkdir_p(state, 0700, NULL) < 0 || !realpath(state, abs_state)) {
		fprintf(stderr, "sbx serve: state dir %s is not usable\n", state);
		return EXIT_ENV;
	}
	c.state_dir = abs_state;
	if (rotate) {
		char *key = NULL;
		sbx_error *err = NULL;
		if (sbx__srv_auth_rotate(c.state_dir, &key, &err) < 0)
			return cli_fail("serve --rotate-key", err);
		printf("%s\n", key);
		free(key);
		return EXIT_OK;
	}
	int rc = sbx__srv_run(&c) == 0 ? EXIT_OK : EXIT_FAIL;
	sbx__strv_free(c.pool_templates);
	return rc;
}
