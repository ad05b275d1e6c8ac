/* SPDX-License-Identifier: MIT */
/* The stdio of `sbx run` and `sbx exec`: pipes (or a sandbox's terminal) the
 * CLI pumps, never its own fds. */
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

/*
 * The same on a terminal made inside the sandbox (-t, exec_tty.c): only its
 * master comes out, and our stdin (as `in` says) is typed into it, in raw
 * mode when stdin is a terminal, while its output goes to our stdout.
 * Returns as cli_exec_stdio(), or 128+signal when a signal ended us
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT: the command is killed, our terminal
 * restored).
 */
int cli_exec_tty(sbx_sandbox *sb, const sbx_exec_opts *o, enum cli_stdin in, int *timed_out);

/* Shared by both (exec_io.c). */
/* Whether our stdin is copied to the command: with -i, or when it is not a
 * terminal (nor /dev/null). */
int cli_stdin_forwarded(enum cli_stdin in);
/* Opens /dev/null on a closed 0, 1 or 2, which an fd made for the command
 * would otherwise take (we would pump its output into its own input). */
void cli_stdio_guard(void);
/* Writes all of `p` to one of our own fds, waiting when it was left
 * non-blocking by whoever gave it to us. -1 when the reader is gone. */
int cli_write_all(int fd, const char *p, size_t n);

#endif
