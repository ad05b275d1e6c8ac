/* SPDX-License-Identifier: MIT */
/* The stdio of `sbx run` and `sbx exec`: pipes the CLI pumps, never its own fds. */
#ifndef SBX_CLI_EXEC_IO_H
#define SBX_CLI_EXEC_IO_H

#include <sbx/sbx.h>

/* When the CLI's stdin is forwarded to the command. */
enum cli_stdin {
	CLI_STDIN_AUTO,    /* when it is not a terminal (nor /dev/null) */
	CLI_STDIN_ALWAYS,  /* -i: a terminal too (line by line, as typed) */
};

/*
 * Runs the command of `o` (argv or shell, env, cwd, user, timeout_s; its
 * stdio fields are ignored) with stdout/stderr copied to this process's own
 * and stdin copied from it as `in` says. The sandbox gets only pipe ends.
 * Returns the exit code to exit with: the command's, 128+signal,
 * EXIT_TIMEOUT (and *timed_out = 1), 126/127 when it could not start, or
 * EXIT_SBX after printing why sbx failed.
 */
int cli_exec_stdio(sbx_sandbox *sb, const sbx_exec_opts *o, enum cli_stdin in, int *timed_out);

#endif
