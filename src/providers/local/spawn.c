/* SPDX-License-Identifier: MIT */
/*
 * Starting a sandbox's init. The static sbx-init binary is embedded in
 * libsbx (init_blob.S) and copied once per process into a sealed memfd; each
 * sandbox is then a vfork-style clone into new namespaces that immediately
 * execveat()s that memfd. The host never forks a copy of itself, so this is
 * safe from threaded programs and costs no page-table copy however large the
 * host process is.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../util/fs.h"
#include "local_int.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

extern const char sbx__init_blob[];
extern const char sbx__init_blob_end[];

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_fd = -1;
static int init_errno;

static void make_memfd(void)
{
	int fd = memfd_create("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create("sbx-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		init_errno = errno;
		return;
	}
	size_t len = (size_t)(sbx__init_blob_end - sbx__init_blob);
	int r = sbx__write_all(fd, sbx__init_blob, len);
	if (r < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		init_errno = r < 0 ? -r : errno;
		close(fd);
		return;
	}
	init_fd = fd;
}

struct child {
	int sync_fd;
	int null_fd;
	volatile int err;
};

/* Runs in the clone child, sharing our memory until execveat: syscalls only. */
static int child_main(void *arg)
{
	struct child *c = arg;
	static char *const argv[] = { (char *)"sbx-init", NULL };
	static char *const envp[] = { NULL };
	for (int fd = 0; fd <= 2; fd++)
		if ((c->null_fd == fd ? fcntl(fd, F_SETFD, 0) : dup2(c->null_fd, fd)) < 0)
			goto fail;
	if ((c->sync_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(c->sync_fd, 3)) < 0)
		goto fail;
	syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
fail:
	c->err = errno;
	_exit(127);
}

int sbx__init_spawn(pid_t *pid_out, int *pidfd_out, int sync_fd, int net_none, sbx_error **err)
{
	pthread_once(&once, make_memfd);
	if (init_fd < 0)
		return sbx_error_setsys(err, -init_errno, init_errno, "load embedded sbx-init");
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open /dev/null");
	/* The child's stack is only used until execveat. */
	size_t stack_len = 64 * 1024;
	void *stack = mmap(NULL, stack_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
			   -1, 0);
	if (stack == MAP_FAILED) {
		close(null_fd);
		return sbx_error_setsys(err, -errno, errno, "allocate clone stack");
	}
	struct child c = { .sync_fd = sync_fd, .null_fd = null_fd };
	int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS |
		    CLONE_NEWIPC | (net_none ? CLONE_NEWNET : 0) | SIGCHLD;
	int pidfd = -1;
	pid_t pid = clone(child_main, (char *)stack + stack_len, flags, &c, &pidfd);
	int e = errno;
	munmap(stack, stack_len);
	close(null_fd);
	if (pid < 0)
		return sbx_error_setsys(err, -e, e, "clone sandbox init");
	if (c.err) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (pidfd >= 0)
			close(pidfd);
		return sbx_error_setsys(err, -c.err, c.err, "exec sandbox init");
	}
	if (pidfd >= 0)
		fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	*pid_out = pid;
	*pidfd_out = pidfd;
	return 0;
}
