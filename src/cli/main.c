/* SPDX-License-Identifier: MIT */
/* `sbx`: the command table, global help, and shared CLI helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/backend.h>
#include <sbx/sys/provider.h>

#include "util/config.h"
#include "cli.h"

struct command {
	const char *name;
	cli_cmd_fn fn;
	const char *summary;
};

static const struct command commands[] = {
	{ "run", cmd_run, "create a sandbox, run one command in it, destroy it" },
	{ "create", cmd_create, "create a sandbox and print its id" },
	{ "exec", cmd_exec, "run a command in an existing sandbox" },
	{ "cp", cmd_cp, "copy files between the host and a sandbox" },
	{ "fork", cmd_fork, "fork a sandbox's file system into N new sandboxes" },
	{ "snapshot", cmd_snapshot, "freeze a sandbox's file system as a named snapshot" },
	{ "rm", cmd_rm, "destroy sandboxes" },
	{ "ls", cmd_ls, "list sandboxes" },
	{ "inspect", cmd_inspect, "show one sandbox: state, labels, CPU, memory and disk use" },
	{ "pool", cmd_pool, "keep sandboxes of an image ready for run/create (start, stop, ls)" },
	{ "gc", cmd_gc, "destroy sandboxes whose owner died, and leftovers" },
	{ "build", cmd_build, "build a Dockerfile into a cached template image" },
	{ "image", cmd_image, "manage local images (import, bootstrap, pull, ls, rm)" },
	{ "env", cmd_env, "print what a launcher forwards to workers (paths, never secrets)" },
	{ "doctor", cmd_doctor, "preflight: can this machine and configuration run episodes?" },
	{ "task", cmd_task, "check Harbor task directories" },
	{ "smoke", cmd_smoke, "run one golden episode, stage by stage" },
	{ "golden", cmd_golden, "replay every task's solution and grade it" },
	{ "eval", cmd_eval, "run a model (OpenAI-compatible API) on tasks: pass rate, trajectories" },
	{ "bake", cmd_bake, "build (or find) the images of Harbor tasks" },
	{ "serve", cmd_serve, "serve the E2B API on local sandboxes (see docs/server.md)" },
	{ "openenv", cmd_openenv, "serve tasks over the OpenEnv protocol (see docs/openenv.md)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sbx [--version] COMMAND [ARGS...]\n\n"
		   "Per-episode sandboxes for agentic RL.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nRun 'sbx COMMAND --help' for a command's options.\n\n"
		   "environment:\n"
		   "  SBX_STATE_DIR   runtime state (default /run/sbx)\n"
		   "  SBX_IMAGE_DIR   image store (default /var/lib/sbx/images)\n"
		   "  SBX_BACKEND     default backend (%s); see 'sbx doctor'\n"
		   "  SBX_LOG         error|warn|info|debug: library log on stderr (default warn)\n"
		   "  'sbx help env' lists every variable sbx reads.\n\n"
		   "exit codes:\n"
		   "  0    success\n"
		   "  1    the operation failed\n"
		   "  2    bad arguments\n"
		   "  3    no such sandbox, image or file\n"
		   "  4    this host cannot do it (not root, no namespaces)\n"
		   "  124  run/exec: the command was killed by --timeout\n"
		   "  125  run/exec: sbx failed before the command ran\n"
		   "  N    run/exec: otherwise, the command's own exit status\n",
		sbx_provider_default()->name);
	fprintf(f, "\nbackends:\n");
	cli_print_backends(f);
}

bool cli_is_help(const char *s)
{
	return s && (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0);
}

bool cli_tty(void)
{
	return isatty(STDOUT_FILENO) == 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "sbx %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'sbx %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int cli_exit_for(int code)
{
	switch (-code) {
	case ENOENT:
	case ESRCH:
		return EXIT_NOTFOUND;
	case EINVAL:
		return EXIT_USAGE;
	case EPERM:
	case EACCES:
	case ENOSYS:
		return EXIT_ENV;
	default:
		return EXIT_FAIL;
	}
}

int cli_fail(const char *what, sbx_error *err)
{
	int code = err ? err->code : -EIO;
	fprintf(stderr, "sbx %s: %s\n", what, err && err->msg ? err->msg : "unknown error");
	sbx_error_free(err);
	return cli_exit_for(code);
}

int cli_use_backend(const char **name, const char *cmd)
{
	static char *canon;
	sbx_error *err = NULL;
	free(canon);
	canon = NULL;
	if (sbx_backend_resolve(&canon, *name, &err) < 0)
		return cli_fail(cmd, err);
	setenv("SBX_BACKEND", canon, 1);
	*name = canon;
	return 0;
}

static void log_stderr(sbx_log_level level, const char *msg, void *payload)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	(void)payload;
	fprintf(stderr, "sbx: %s: %s\n", names[level <= SBX_LOG_DEBUG ? level : SBX_LOG_DEBUG], msg);
}

/* SBX_LOG=error|warn|info|debug sends the library's log to stderr
 * (secrets are redacted before any line reaches us). Default: warn. */
static sbx_log_level log_level(void)
{
	const char *v = sbx__env("SBX_LOG");
	if (!v || !*v || !strcmp(v, "warn"))
		return SBX_LOG_WARN;
	if (!strcmp(v, "debug"))
		return SBX_LOG_DEBUG;
	if (!strcmp(v, "info"))
		return SBX_LOG_INFO;
	return SBX_LOG_ERROR;
}

sbx_runtime *cli_runtime(void)
{
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.log = log_stderr;
	o.log_level = log_level();
	char *backend = NULL;
	if (sbx_backend_resolve(&backend, NULL, &err) < 0) {
		cli_fail("backend", err);
		return NULL;
	}
	o.default_provider = backend;
	int r = sbx_runtime_new(&rt, &o, &err);
	free(backend);
	if (r < 0) {
		cli_fail("runtime", err);
		return NULL;
	}
	return rt;
}

int main(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("sbx %s\n", sbx_version_string());
		return EXIT_OK;
	}
	if (strcmp(argv[1], "help") == 0 && argc > 2 && strcmp(argv[2], "env") == 0)
		return cmd_help_env(argc - 2, argv + 2);
	static char help_flag[] = "--help";
	char *hargv[] = { argv[argc > 2 ? 2 : 1], help_flag, NULL };
	if (strcmp(argv[1], "help") == 0 && argc > 2) {
		argv = hargv;
		argc = 2;
	} else {
		argv++;
		argc--;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[0], commands[i].name) == 0)
			return commands[i].fn(argc, argv);
	fprintf(stderr, "sbx: unknown command '%s'\n", argv[0]);
	usage(stderr);
	return EXIT_USAGE;
}
