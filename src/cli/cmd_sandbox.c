/* SPDX-License-Identifier: MIT */
/* `sbx run`, `sbx create`, `sbx exec`: making sandboxes and running commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/fs.h"
#include "../util/str.h"
#include "cli.h"
#include "exec_io.h"
#include "opts.h"
#include "xpool.h"

#define TTY_HELP                                                                            \
	"  -t, --tty          run CMD on a terminal made inside the sandbox; its output\n"     \
	"                     (stderr too) is that terminal's; with -i on a terminal, keys\n"  \
	"                     go to CMD raw (^C is CMD's). -it is -i -t\n"

static const char run_help[] =
	"usage: sbx run [OPTIONS] IMAGE [--] CMD [ARG...]\n\n"
	"Create a sandbox from IMAGE, run CMD in it, destroy it. CMD's output is copied\n"
	"to this process's stdout/stderr, and stdin to CMD when it is not a terminal;\n"
	"CMD never gets this process's own fds. The exit status is CMD's.\n\noptions:\n"
	"  -i, --interactive  copy stdin to CMD even from a terminal\n"
	TTY_HELP
	"  --timeout DUR      kill CMD and all its children after DUR (exit 124)\n"
	"  --time             print stage timings (create, exec, destroy) to stderr\n"
	"  --sh               run CMD as one shell command line (/bin/sh -c)\n";

static const char create_help[] =
	"usage: sbx create [OPTIONS] IMAGE\n\n"
	"Create a sandbox that stays up until 'sbx rm' (or --ttl); print its id.\n\noptions:\n"
	"  --json             print {\"id\": ...}\n";

static const char exec_help[] =
	"usage: sbx exec [OPTIONS] ID [--] CMD [ARG...]\n\n"
	"Run CMD in sandbox ID. CMD's output is copied to this process's stdout/stderr,\n"
	"and stdin to CMD when it is not a terminal; CMD never gets this process's own\n"
	"fds. The exit status is CMD's.\n\noptions:\n"
	"  -i, --interactive  copy stdin to CMD even from a terminal\n"
	TTY_HELP
	"  -e, --env K=V      extra environment (repeatable)\n"
	"  -w, --workdir DIR  working directory\n"
	"  -u, --user USER    user (name, uid, name:group)\n"
	"  --timeout DUR      kill CMD and all its children after DUR (exit 124)\n"
	"  --sh               run CMD as one shell command line (/bin/sh -c)\n";

static int parse_timeout(double *out, const char *cmd, const char *v)
{
	if (!v || sbx__parse_duration(out, v) < 0 || *out <= 0)
		return cli_usage_error(cmd, "--timeout '%s': expected a duration like 30s or 5m", v ? v : "");
	return 0;
}

/* -i, -t, -it, -ti: 1 when `a` is one of them (setting *in and *tty). */
static int stdio_flag(const char *a, enum cli_stdin *in, int *tty)
{
	int i = !strcmp(a, "-i") || !strcmp(a, "--interactive"), t = !strcmp(a, "-t") || !strcmp(a, "--tty");
	if (!strcmp(a, "-it") || !strcmp(a, "-ti"))
		i = t = 1;
	if (i)
		*in = CLI_STDIN_ALWAYS;
	if (t)
		*tty = 1;
	return i || t;
}

/* Runs argv (or one shell line) with stdio pumped through pipes (exec_io.c)
 * or a terminal of the sandbox (exec_tty.c). Returns the exit code. */
static int run_cmd(sbx_sandbox *sb, char **argv, int shell, const sbx_exec_opts *base, enum cli_stdin in,
		   int tty, int *timed_out)
{
	sbx_exec_opts o = *base;
	char *line = NULL;
	if (shell) {
		size_t n = 0;
		for (int i = 0; argv[i]; i++)
			n += strlen(argv[i]) + 1;
		line = calloc(1, n + 1);
		for (int i = 0; argv[i]; i++) {
			strncat(line, argv[i], n);
			if (argv[i + 1])
				strncat(line, " ", n);
		}
		o.shell = line;
	} else {
		o.argv = (const char *const *)argv;
	}
	int code = tty ? cli_exec_tty(sb, &o, in, timed_out) : cli_exec_stdio(sb, &o, in, timed_out);
	free(line);
	return code;
}

int cmd_run(int argc, char **argv)
{
	struct spec_flags f;
	spec_flags_init(&f);
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	int timing = 0, shell = 0, tty = 0, i, code = EXIT_USAGE;
	enum cli_stdin in = CLI_STDIN_AUTO;
	for (i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", run_help);
			spec_flags_print_help(stdout);
			code = EXIT_OK;
			goto out;
		}
		int c = spec_flag(&f, "run", argc, argv, &i);
		if (c == EXIT_USAGE)
			goto out;
		if (c == 1)
			continue;
		if (!strcmp(argv[i], "--timeout")) {
			if (parse_timeout(&eo.timeout_s, "run", i + 1 < argc ? argv[++i] : NULL))
				goto out;
		} else if (!strcmp(argv[i], "--time")) {
			timing = 1;
		} else if (!strcmp(argv[i], "--sh")) {
			shell = 1;
		} else if (stdio_flag(argv[i], &in, &tty)) {
			continue;
		} else {
			code = cli_usage_error("run", "unknown option %s", argv[i]);
			goto out;
		}
	}
	if (i >= argc) {
		code = cli_usage_error("run", "missing IMAGE");
		goto out;
	}
	f.o.image = argv[i++];
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		code = cli_usage_error("run", "missing CMD");
		goto out;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		code = EXIT_ENV;
		goto out;
	}
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	struct xpool_taken taken;
	double t0 = sbx__now_mono();
	/* From a warm pool of this spec (sbx pool start) when one has any. */
	if (!xpool_take(&sb, &taken, rt, &f.o) && sbx_sandbox_create(&sb, rt, &f.o, &err) < 0) {
		code = cli_fail("run", err) == EXIT_NOTFOUND ? EXIT_NOTFOUND : EXIT_SBX;
		sbx_runtime_free(rt);
		goto out;
	}
	double t1 = sbx__now_mono();
	int timed_out = 0;
	code = run_cmd(sb, argv + i, shell, &eo, in, tty, &timed_out);
	double t2 = sbx__now_mono();
	/* A pooled one is killed now and its keeper tears it down. */
	if (xpool_hand_off(&taken) < 0 && sbx_sandbox_destroy(sb, &err) < 0) {
		cli_fail("run: destroy", err);
		code = code ? code : EXIT_FAIL;
	}
	xpool_done(&taken);
	double t3 = sbx__now_mono();
	if (timing)
		fprintf(stderr, "sbx run: create %.1f ms, exec %.1f ms, destroy %.1f ms, total %.1f ms%s\n",
			(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t3 - t0) * 1e3,
			timed_out ? " (timed out)" : "");
	sbx_sandbox_free(sb);
	sbx_runtime_free(rt);
out:
	spec_flags_free(&f);
	return code;
}

int cmd_create(int argc, char **argv)
{
	struct spec_flags f;
	spec_flags_init(&f);
	int json = 0, i, code = EXIT_USAGE;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", create_help);
			spec_flags_print_help(stdout);
			code = EXIT_OK;
			goto out;
		}
		int c = spec_flag(&f, "create", argc, argv, &i);
		if (c == EXIT_USAGE)
			goto out;
		if (c == 1)
			continue;
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else {
			code = cli_usage_error("create", "unknown option %s", argv[i]);
			goto out;
		}
	}
	if (i != argc - 1) {
		code = cli_usage_error("create", i >= argc ? "missing IMAGE" : "unexpected argument %s",
				       i >= argc ? "" : argv[i + 1]);
		goto out;
	}
	f.o.image = argv[i];
	f.o.detach = 1;
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		code = EXIT_ENV;
		goto out;
	}
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	struct xpool_taken taken;
	int pooled = xpool_take(&sb, &taken, rt, &f.o);
	if (pooled) {
		/* Pooled sandboxes have no TTL: the taker's starts now. */
		if (f.o.ttl_s && sbx_sandbox_set_timeout(sb, f.o.ttl_s, &err) < 0)
			cli_fail("create: --ttl", err);
		xpool_give(&taken, rt, sbx_sandbox_id(sb));
	}
	if (!pooled && sbx_sandbox_create(&sb, rt, &f.o, &err) < 0) {
		code = cli_fail("create", err);
	} else {
		if (json)
			printf("{\"id\": \"%s\", \"provider\": \"%s\"}\n", sbx_sandbox_id(sb), sbx_sandbox_provider(sb));
		else
			printf("%s\n", sbx_sandbox_id(sb));
		sbx_sandbox_free(sb);
		code = EXIT_OK;
	}
	sbx_runtime_free(rt);
out:
	spec_flags_free(&f);
	return code;
}

int cmd_exec(int argc, char **argv)
{
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	char **env = NULL;
	int shell = 0, tty = 0, i, code = EXIT_USAGE;
	enum cli_stdin in = CLI_STDIN_AUTO;
	for (i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (cli_is_help(a)) {
			printf("%s", exec_help);
			code = EXIT_OK;
			goto out;
		} else if (!strcmp(a, "--sh")) {
			shell = 1;
		} else if (stdio_flag(a, &in, &tty)) {
			continue;
		} else if (!v) {
			code = cli_usage_error("exec", "%s needs a value (or is unknown)", a);
			goto out;
		} else if (!strcmp(a, "-e") || !strcmp(a, "--env")) {
			if (!strchr(v, '=') || v[0] == '=') {
				code = cli_usage_error("exec", "%s '%s': expected KEY=VALUE", a, v);
				goto out;
			}
			sbx__strv_push(&env, v);
			i++;
		} else if (!strcmp(a, "-w") || !strcmp(a, "--workdir")) {
			eo.cwd = v;
			i++;
		} else if (!strcmp(a, "-u") || !strcmp(a, "--user")) {
			eo.user = v;
			i++;
		} else if (!strcmp(a, "--timeout")) {
			if (parse_timeout(&eo.timeout_s, "exec", v))
				goto out;
			i++;
		} else {
			code = cli_usage_error("exec", "unknown option %s", a);
			goto out;
		}
	}
	if (i >= argc) {
		code = cli_usage_error("exec", "missing sandbox ID");
		goto out;
	}
	const char *id = argv[i++];
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		code = cli_usage_error("exec", "missing CMD");
		goto out;
	}
	eo.env = (const char *const *)env;
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		code = EXIT_ENV;
		goto out;
	}
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	if (sbx_sandbox_open(&sb, rt, NULL, id, &err) < 0) {
		code = cli_fail("exec", err);
	} else {
		int timed_out;
		code = run_cmd(sb, argv + i, shell, &eo, in, tty, &timed_out);
		sbx_sandbox_free(sb);
	}
	sbx_runtime_free(rt);
out:
	sbx__strv_free(env);
	return code;
}
