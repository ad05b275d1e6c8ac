/* SPDX-License-Identifier: MIT */
/* Cleanup attributes and ownership hand-off helpers (GNU C). */
#ifndef SBX_UTIL_CLEANUP_H
#define SBX_UTIL_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void sbx__freep(void *p) { free(*(void **)p); }
static inline void sbx__closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void sbx__fclosep(FILE **f) { if (*f) fclose(*f); }
static inline void sbx__closedirp(DIR **d) { if (*d) closedir(*d); }
/* Kills and reaps a child on early exit. */
static inline void sbx__killpidp(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
}

#define _cleanup_free_ _cleanup_(sbx__freep)
#define _cleanup_close_ _cleanup_(sbx__closep)
#define _cleanup_fclose_ _cleanup_(sbx__fclosep)
#define _cleanup_closedir_ _cleanup_(sbx__closedirp)
#define _cleanup_pid_ _cleanup_(sbx__killpidp)

/* Hands ownership out: returns the pointer and clears the variable. */
#define steal_ptr(pp) ({ __typeof__(*(pp)) _p = *(pp); *(pp) = NULL; _p; })
#define steal_fd(pfd) ({ int _fd = *(pfd); *(pfd) = -1; _fd; })

#define SBX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
