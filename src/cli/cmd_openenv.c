/* SPDX-License-Identifier: MIT */
/* `sbx openenv serve`: the OpenEnv environment server (src/openenv/). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../openenv/serve.h"
#include "../util/str.h"
#include "cli.h"

static const char openenv_help[] =
	"usage: sbx openenv serve --tasks-dir DIR [--listen ADDR:PORT] [OPTIONS]\n\n"
	"Serve Harbor tasks over OpenEnv's environment-server protocol: GET /health,\n"
	"/metadata, /schema; WS /ws (reset / step / state / close, one fresh sandbox per\n"
	"session); stateless POST /reset, POST /step, GET /state. Point an OpenEnv client\n"
	"(OPENENV_ENV_URL) at http://ADDR:PORT. See docs/openenv.md.\n\n"
	"options:\n"
	"  --tasks-dir DIR          the tasks a reset's task_id names (subdirectories with task.toml)\n"
	"  --listen ADDR:PORT       IPv4 listen address (default 127.0.0.1:8000; port 0 = any free port)\n"
	"  --backend NAME           provider of the sandboxes (default: $SBX_BACKEND or local)\n"
	"  --max-sessions N         WebSocket sessions at once; more get CAPACITY_REACHED (default 64)\n"
	"  --max-message-mb N       largest message or request body in MiB (default 16)\n"
	"  --workers N              blocking calls (reset, step, evaluate) at once (default: max-sessions)\n"
	"  --step-timeout S         default timeout of an exec step (default 0: the task's agent limit)\n"
	"  --ping-interval S        send a ping every S seconds (default 20; 0 = never)\n"
	"  --ping-timeout S         drop a session silent for S seconds after a ping (default 60)\n"
	"  --message-timeout S      a message (or request) must arrive within S seconds once\n"
	"                           started (default 120)\n"
	"  --print-port             print the bound port on the first stdout line\n";

enum { O_LISTEN = 256, O_TASKS, O_BACKEND, O_MAXS, O_MAXM, O_WORKERS, O_STEP, O_PING, O_PINGTO, O_MSGTO,
       O_PRINT };

static int parse_seconds(double *out, const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || v < 0 || v > 1e7)
		return -1;
	*out = v;
	return 0;
}

static int serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "tasks-dir", required_argument, NULL, O_TASKS },
		{ "backend", required_argument, NULL, O_BACKEND },
		{ "max-sessions", required_argument, NULL, O_MAXS },
		{ "max-message-mb", required_argument, NULL, O_MAXM },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "step-timeout", required_argument, NULL, O_STEP },
		{ "ping-interval", required_argument, NULL, O_PING },
		{ "ping-timeout", required_argument, NULL, O_PINGTO },
		{ "message-timeout", required_argument, NULL, O_MSGTO },
		{ "print-port", no_argument, NULL, O_PRINT },
		{ NULL, 0, NULL, 0 },
	};
	char listen_buf[256] = "127.0.0.1:8000";
	struct oe_config c = { .max_sessions = 64, .max_message = 16u << 20, .ping_interval_s = 20,
			       .ping_timeout_s = 60, .message_timeout_s = 120 };
	const char *tasks = NULL, *backend = NULL;
	uint64_t u;
	int ch, r, idx = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (ch) {
		case 'h': printf("%s", openenv_help); return EXIT_OK;
		case O_LISTEN: snprintf(listen_buf, sizeof(listen_buf), "%s", optarg); break;
		case O_TASKS: tasks = optarg; break;
		case O_BACKEND: backend = optarg; break;
		case O_PRINT: c.print_port = 1; break;
		case O_MAXS:
		case O_MAXM:
		case O_WORKERS:
			if (sbx__parse_u64(&u, optarg) < 0 || u == 0 || u > 100000)
				return cli_usage_error("openenv serve", "--%s expects a number from 1 to 100000, got '%s'",
						       opts[idx].name, optarg);
			if (ch == O_MAXS)
				c.max_sessions = (unsigned)u;
			else if (ch == O_WORKERS)
				c.workers = (unsigned)u;
			else if (u > 1024)
				return cli_usage_error("openenv serve", "--max-message-mb is at most 1024");
			else
				c.max_message = (size_t)u << 20;
			break;
		case O_STEP:
		case O_PING:
		case O_PINGTO:
		case O_MSGTO: {
			double v;
			if (parse_seconds(&v, optarg) < 0)
				return cli_usage_error("openenv serve", "--%s expects seconds (a number >= 0), got '%s'",
						       opts[idx].name, optarg);
			if (ch == O_STEP)
				c.step_timeout_s = v;
			else if (ch == O_PING)
				c.ping_interval_s = v;
			else if (ch == O_PINGTO)
				c.ping_timeout_s = v;
			else
				c.message_timeout_s = v;
			break;
		}
		default: return cli_usage_error("openenv serve", "unknown option (see sbx openenv serve --help)");
		}
	}
	if (optind < argc)
		return cli_usage_error("openenv serve", "unexpected argument '%s'", argv[optind]);
	if (!tasks)
		return cli_usage_error("openenv serve", "--tasks-dir DIR is required (a directory of Harbor tasks)");
	char abs_tasks[PATH_MAX];
	char **names = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	if (!realpath(tasks, abs_tasks) || sbx_task_list(&names, &n, abs_tasks, &err) < 0) {
		sbx_error_free(err);
		return cli_usage_error("openenv serve", "--tasks-dir %s is not a directory of tasks", tasks);
	}
	sbx_task_names_free(names);
	c.tasks_dir = abs_tasks;
	char *colon = strrchr(listen_buf, ':');
	if (!colon || sbx__parse_u64(&u, colon + 1) < 0 || u > 65535)
		return cli_usage_error("openenv serve", "--listen wants ADDR:PORT, got '%s'", listen_buf);
	*colon = '\0';
	c.listen_addr = listen_buf;
	c.port = (unsigned)u;
	if (!c.workers)
		c.workers = c.max_sessions;
	if (backend && (r = cli_use_backend(&backend, "openenv serve")) != 0)
		return r;
	c.backend = backend;
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	r = sbx__oe_serve(&c, rt);
	sbx_runtime_free(rt);
	return r == 0 ? EXIT_OK : EXIT_FAIL;
}

int cmd_openenv(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		printf("%s", openenv_help);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (!strcmp(argv[1], "serve"))
		return serve(argc - 1, argv + 1);
	return cli_usage_error("openenv", "unknown subcommand '%s' (expected serve)", argv[1]);
}
