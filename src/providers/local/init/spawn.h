/* SPDX-License-Identifier: MIT */
/* One command start inside the sandbox (see spawn.c). */
#ifndef SBX_INIT_SPAWN_H
#define SBX_INIT_SPAWN_H

#include <sys/wait.h>
#include "init.h"

struct spawn_req {
	char **argv;
	char **base_env;  /* sandbox env (image + spec), NULL-terminated */
	char **extra_env; /* this exec's env, overrides base */
	const char *cwd;
	const char *user;
	const struct init_user *as; /* already resolved: user is not looked up */
	int fds[3];       /* unused with tty */
	int tty;          /* run on a new terminal of the sandbox's devpts */
	unsigned rows, cols;
};

/* Starts q. On failure returns -errno with msg set; *exit_code is 127/126 when
 * the failure is "command not found/not executable" (a result, not an error).
 * With q->tty, *tty_master gets the terminal's master (else -1). */
int spawn_command(pid_t *pid_out, int *tty_master, const struct spawn_req *q, int cg_procs_fd, char *msg,
		  size_t msglen, int *exit_code);

#endif
