/* SPDX-License-Identifier: MIT */
/* Shared pieces of the sbx command-line tool: exit codes, runtime, errors. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <sbx/sbx.h>

/* Exit codes, documented in `sbx --help` and docs/cli.md. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,      /* the operation failed */
	EXIT_USAGE = 2,     /* bad arguments */
	EXIT_NOTFOUND = 3,  /* no such sandbox, image or file */
	EXIT_ENV = 4,       /* the host cannot do this (not root, no namespaces) */
	EXIT_TIMEOUT = 124, /* run/exec: the command hit --timeout */
	EXIT_SBX = 125,     /* run/exec: sbx failed before the command ran */
};

/* A subcommand: argv[0] is the subcommand name. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cmd_run(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_task(int argc, char **argv);
int cmd_smoke(int argc, char **argv);
int cmd_golden(int argc, char **argv);
int cmd_bake(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_openenv(int argc, char **argv);
int cmd_help_env(int argc, char **argv);

/* One row of `sbx ls --json` (also `sbx inspect --json`'s base). */
struct json_t;
struct json_t *cli_info_json(const sbx_sandbox_info *in);
/* Opens the runtime from the environment; prints the error and returns NULL on failure. */
sbx_runtime *cli_runtime(void);
/* Prints "sbx: <what>: <msg>" to stderr, frees err, returns the exit code for it. */
int cli_fail(const char *what, sbx_error *err);
/* --backend NAME: replaces *name with the canonical name (agentenv -> e2b)
 * and makes it the runtime's default too (SBX_BACKEND), so image resolution
 * and sandboxes use the same backend. 0, or an exit code after printing. */
int cli_use_backend(const char **name, const char *cmd);
/* One line per backend in the registry: names, title, default, described only. */
void cli_print_backends(FILE *f);
/* Maps an sbx error code to an exit code. */
int cli_exit_for(int code);
/* True when `s` is "-h" or "--help". */
bool cli_is_help(const char *s);
/* Prints to stderr and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when stdout is a terminal (progress bars). */
bool cli_tty(void);
/* --connector NAME for golden/bake/task check (cmd_golden.c): 0 when NULL or
 * registered, else an exit code after printing the registered names. */
int cli_check_connector(const char *name, const char *cmd);
/* Task selection for golden/bake: --tasks A,B or --all under TASKS_DIR (cmd_golden.c).
 * Returns 0 with an owned strv, or an exit code after printing. */
int cli_select_tasks(char ***names_out, const char *cmd, const char *tasks_dir,
		     const char *list, bool all);
/* Progress bar on stderr when it is a terminal; cleared before printing lines. */
void cli_progress(const char *what, size_t done, size_t total);
void cli_progress_clear(void);

#endif
