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
	const struct sbx_spawn_opts *so;
	int null_fd;
	volatile int err;
	volatile int phase; /* 1 = cgroup, 2 = namespaces, 3 = exec */
};

/* Runs in the clone child, sharing our memory until execveat: syscalls only. */
static int child_main(void *arg)
{
	struct child *c = arg;
	const struct sbx_spawn_opts *so = c->so;
	static char *const argv[] = { (char *)"sbx-init", NULL };
	static char *const envp[] = { NULL };
	/* Into the sandbox's groups before anything else runs: init's pids and
	 * memory are counted from its first instruction. */
	c->phase = 1;
	for (int i = 0; i < so->n_cg; i++)
		if (write(so->cg_procs[i], "0", 1) != 1)
			goto fail;
	c->phase = 2;
	if (so->ns && ((so->net_none && setns(so->ns->net, CLONE_NEWNET) < 0) ||
		       setns(so->ns->uts, CLONE_NEWUTS) < 0 || setns(so->ns->ipc, CLONE_NEWIPC) < 0))
		goto fail;
	c->phase = 3;
	for (int fd = 0; fd <= 2; fd++)
		if ((c->null_fd == fd ? fcntl(fd, F_SETFD, 0) : dup2(c->null_fd, fd)) < 0)
			goto fail;
	if ((so->sync_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(so->sync_fd, 3)) < 0)
		goto fail;
	syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
fail:
	c->err = errno;
	_exit(127);
}

int sbx__init_spawn(pid_t *pid_out, int *pidfd_out, const struct sbx_spawn_opts *so, sbx_error **err)
{
	pthread_once(&once, make_memfd);
	if (init_fd < 0)
		return sbx_error_setsys(err, -init_errno, init_errno, "load embedded sbx-init");
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open /dev/null");
	/* The child runs on this buffer until execveat while we are suspended
	 * (CLONE_VFORK), so our own frame can hold it. No mmap/munmap: an unmap
	 * in a process whose threads ran on several CPUs costs a TLB shootdown. */
	char stack[32 * 1024] __attribute__((aligned(16)));
	struct child c = { .so = so, .null_fd = null_fd };
	int flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | SIGCHLD;
	if (!so->ns)
		flags |= CLONE_NEWUTS | CLONE_NEWIPC | (so->net_none ? CLONE_NEWNET : 0);
	int pidfd = -1;
	pid_t pid = clone(child_main, stack + sizeof(stack), flags, &c, &pidfd);
	int e = errno;
	close(null_fd);
	if (pid < 0)
		return sbx_error_setsys(err, -e, e, "clone sandbox init");
	if (c.err) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		if (pidfd >= 0)
			close(pidfd);
		static const char *const what[] = { "start sandbox init", "move sandbox init into its cgroups",
						     "join pooled namespaces", "exec sandbox init" };
		return sbx_error_setsys(err, -c.err, c.err, "%s", what[c.phase]);
	}
	if (pidfd >= 0)
		fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	*pid_out = pid;
	*pidfd_out = pidfd;
	return 0;
}
