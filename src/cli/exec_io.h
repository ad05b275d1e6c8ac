/* SPDX-License-Identifier: MIT */
/* The stdio of `sbx run` and `sbx exec`: pipes (or a sandbox's terminal) the
 * CLI pumps, never its own fds. */
#ifndef SBX_CLI_EXEC_IO_H
#define SBX_CLI_EXEC_IO_H

#include <sys/types.h>

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

/* The relay process (exec_relay.c): the only holder of the pipe ends the
 * sandbox shares, so nothing the sandbox does to them can block the CLI. */
struct cli_relay_fds {
	int out_r, err_r, in_w;    /* the host's ends of the command's pipes (-1: none) */
	int rout_w, rerr_w, rin_r; /* the relay's ends of the CLI's relay pipes (-1: none) */
	int theirs[3];             /* the command's ends (stdout, stderr, stdin; -1: none),
	                              held until cli_relay_release() */
};
struct cli_relay {
	pid_t pid;
	int ctl; /* its hang-up tells the relay the exec is over */
	int ack; /* hangs up once, after that, the relay has passed on all the
	            command's pipes held (or when the relay is gone) */
	void *map; /* its stack and state (it shares our memory) */
	size_t map_len;
};
/* Starts the relay with copies of every fd in `f`; the caller then closes its
 * own copies of all but theirs[] (which go in the exec request) and of
 * the relay pipes' far ends. 0 or a negative errno. */
int cli_relay_start(struct cli_relay *r, const struct cli_relay_fds *f);
/* The exec is over and our copies of theirs[] are closed: the relay drops
 * its own, so the command's pipes reach EOF when its processes end. */
void cli_relay_release(struct cli_relay *r);
/* Release, and reap the relay if it is done (else it ends on its own). */
void cli_relay_finish(struct cli_relay *r);

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
