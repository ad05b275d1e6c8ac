/* SPDX-License-Identifier: MIT */
/*
 * Starting one command inside the sandbox. init prepares everything (argv,
 * env, user, executable path) in its normal context, then uses a vfork-style
 * clone: the child shares init's memory until execve, so starting a command
 * costs no page-table copy. The child only makes system calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>

#include "spawn.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#define DEVPTS_MAGIC 0x1cd1

struct child_args {
	const struct spawn_req *req;
	char **envp;
	const struct init_user *user;
	const char *path;
	const int *fds;        /* stdin, stdout, stderr */
	int ctty;              /* fds[0] becomes the controlling terminal */
	int cg_procs_fd;
	volatile int err;      /* errno of the failing step, written by the child */
	volatile int phase;    /* 1 = chdir, 2 = credentials, 3 = execve, 4 = terminal */
};

static int child_main(void *arg)
{
	struct child_args *a = arg;
	const struct spawn_req *q = a->req;
	/* init ignores SIGPIPE and blocks SIGCHLD; commands get the defaults.
	 * Without CLONE_SIGHAND the child has its own disposition table. */
	sigset_t none;
	sigemptyset(&none);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(SIGPIPE, &dfl, NULL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	if (a->cg_procs_fd >= 0)
		(void)!write(a->cg_procs_fd, "0", 1);
	if (init_cpu_run_fd >= 0) /* under the CPU quota; init is not */
		(void)!write(init_cpu_run_fd, "0", 1);
	setpriority(PRIO_PROCESS, 0, 0); /* init runs at -20 (main.c) */
	int adj = init_oom_adjusted ? open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC) : -1;
	if (adj >= 0) {
		(void)!write(adj, "0", 1);
		close(adj);
	}
	if (dup2(a->fds[0], 0) < 0 || dup2(a->fds[1], 1) < 0 || dup2(a->fds[2], 2) < 0)
		goto fail_creds;
	/* setsid above left us without one: ^C, job control, /dev/tty. */
	a->phase = 4;
	if (a->ctty && ioctl(0, TIOCSCTTY, 0) < 0)
		goto fail;
	a->phase = 2;
	if (syscall(SYS_setgroups, a->user->n_groups, a->user->groups) < 0 ||
	    syscall(SYS_setresgid, a->user->gid, a->user->gid, a->user->gid) < 0 ||
	    syscall(SYS_setresuid, a->user->uid, a->user->uid, a->user->uid) < 0)
		goto fail_creds;
	a->phase = 1;
	if (chdir(q->cwd) < 0)
		goto fail;
	a->phase = 3;
	/* ETXTBSY for a file just written through the library: a child the
	 * host process cloned meanwhile (a starting init until its exec, a user
	 * namespace being made) holds a copy of the writer's fd for a moment.
	 * Waited out, bounded (~0.13 s in all); a writer in here that keeps the
	 * file open still gets the error. */
	long ns = 250000;
	while (execve(a->path, q->argv, a->envp) < 0 && errno == ETXTBSY && ns <= 64000000) {
		struct timespec ts = { 0, ns };
		nanosleep(&ts, NULL);
		ns *= 2;
	}
fail:
	a->err = errno;
	_exit(127);
fail_creds:
	a->phase = 2;
	a->err = errno;
	_exit(127);
}

/* PATH lookup done by init, as the shell would, but before the fork. */
static int find_exec(char *out, size_t n, const char *cmd, char *const *envp)
{
	if (strchr(cmd, '/')) {
		snprintf(out, n, "%s", cmd);
		return 0;
	}
	const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (int i = 0; envp[i]; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	int seen_eacces = 0;
	while (*path) {
		size_t len = strcspn(path, ":");
		snprintf(out, n, "%.*s/%s", (int)len, len ? path : ".", cmd);
		struct stat st;
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(out, X_OK) == 0)
				return 0;
			seen_eacces = 1;
		}
		path += len;
		if (*path == ':')
			path++;
	}
	return seen_eacces ? -EACCES : -ENOENT;
}

static int env_find(char **env, int n, const char *kv)
{
	size_t k = strcspn(kv, "=");
	for (int i = 0; i < n; i++)
		if (strncmp(env[i], kv, k) == 0 && env[i][k] == '=')
			return i;
	return -1;
}

/* base + extra (extra wins), then HOME and PATH defaults. Pointers are
 * borrowed; the array and HOME live in the request arena. */
static char **merge_env(const struct spawn_req *q, const struct init_user *u)
{
	int nb = 0, ne = 0;
	while (q->base_env && q->base_env[nb])
		nb++;
	while (q->extra_env && q->extra_env[ne])
		ne++;
	char **env = init_req_alloc((size_t)(nb + ne + 3) * sizeof(*env));
	if (!env)
		return NULL;
	int n = 0;
	for (int i = 0; i < nb; i++) {
		int j = env_find(env, n, q->base_env[i]);
		env[j >= 0 ? j : n++] = q->base_env[i];
	}
	for (int i = 0; i < ne; i++) {
		int j = env_find(env, n, q->extra_env[i]);
		env[j >= 0 ? j : n++] = q->extra_env[i];
	}
	if (env_find(env, n, "HOME=") < 0) {
		size_t hl = strlen(u->home) + sizeof("HOME=");
		char *home = init_req_alloc(hl);
		if (home) {
			snprintf(home, hl, "HOME=%s", u->home);
			env[n++] = home;
		}
	}
	if (env_find(env, n, "PATH=") < 0)
		env[n++] = (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	env[n] = NULL;
	return env;
}

/*
 * A new terminal of the sandbox's own devpts instance, which rootfs.c mounts
 * at /dev/pts with newinstance: nothing inside can cover or move that mount
 * point (no mount(2); a mount point cannot be renamed), and the file system
 * is checked. The master is opened as the command's user, which makes the
 * slave that user's (under the user namespace an id of the sandbox's range,
 * never host root). No fd of the host is involved: the host gets the master.
 */
static int open_tty(int *master, int *slave, const struct spawn_req *q, const struct init_user *u, char *msg,
		    size_t msglen)
{
	int ogid = setfsgid(u->gid), ouid = setfsuid(u->uid);
	int m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC), e = errno;
	setfsuid((uid_t)ouid);
	setfsgid((gid_t)ogid);
	if (m < 0) {
		init_fmt(msg, msglen, "open /dev/pts/ptmx: %s", strerror(e));
		return -e;
	}
	struct statfs fs;
	struct winsize ws = { .ws_row = (unsigned short)q->rows, .ws_col = (unsigned short)q->cols };
	int unlock = 0, s = -1;
	if (fstatfs(m, &fs) < 0 || fs.f_type != DEVPTS_MAGIC)
		errno = ENOTTY;
	else if (ioctl(m, TIOCSPTLCK, &unlock) == 0 && ioctl(m, TIOCSWINSZ, &ws) == 0)
		s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		e = errno;
		close(m);
		init_fmt(msg, msglen, "terminal from /dev/pts/ptmx: %s", strerror(e));
		return -e;
	}
	*master = m;
	*slave = s;
	return 0;
}

int spawn_command(pid_t *pid_out, int *tty_master, const struct spawn_req *q, int cg_procs_fd, char *msg,
		  size_t msglen, int *exit_code)
{
	static char stack[256 * 1024] __attribute__((aligned(16)));
	struct init_user user;
	*exit_code = 0;
	int r = 0;
	if (q->as)
		user = *q->as;
	else
		r = init_user_resolve(&user, q->user, msg, msglen);
	if (r < 0)
		return r;
	char **envp = merge_env(q, &user);
	if (!envp)
		return -ENOMEM;
	char path[4096];
	r = find_exec(path, sizeof(path), q->argv[0], envp);
	if (r < 0) {
		init_fmt(msg, msglen, "%s: %s", q->argv[0],
			 r == -ENOENT ? "command not found" : "permission denied");
		*exit_code = r == -ENOENT ? 127 : 126;
		return r;
	}
	int m = -1, s = -1;
	*tty_master = -1;
	if (q->tty && (r = open_tty(&m, &s, q, &user, msg, msglen)) < 0)
		return r;
	int tfds[3] = { s, s, s };
	struct child_args a = { .req = q, .envp = envp, .user = &user, .path = path,
				.fds = q->tty ? tfds : q->fds, .ctty = q->tty, .cg_procs_fd = cg_procs_fd };
	/* Start the command on this CPU: we sleep until it has exec'd, so the
	 * CPU is free, and a short command then runs and exits where init and
	 * its caches are, instead of waking an idle CPU (an IPI and, on a VM, a
	 * halted vCPU) at fork and migrating again at exec. The command gets
	 * init's full affinity back as soon as it has exec'd. */
	cpu_set_t all, here;
	/* The system call, not musl's vDSO getcpu: the vDSO's text and data
	 * pages would be three more first-touch faults in this init. */
	unsigned cpu = 0;
	int pinned = syscall(SYS_getcpu, &cpu, NULL, NULL) == 0 &&
		     sched_getaffinity(0, sizeof(all), &all) == 0;
	if (pinned) {
		CPU_ZERO(&here);
		CPU_SET((int)cpu, &here);
		pinned = sched_setaffinity(0, sizeof(here), &here) == 0;
	}
	pid_t pid = clone(child_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	int fork_errno = errno;
	if (pinned) {
		sched_setaffinity(0, sizeof(all), &all);
		if (pid > 0)
			sched_setaffinity(pid, sizeof(all), &all);
	}
	/* The child has exec'd or exited: its view of our memory is gone. */
	if (s >= 0)
		close(s); /* the command's now, and only its */
	if ((pid < 0 || a.err) && m >= 0)
		close(m);
	if (pid < 0) {
		init_fmt(msg, msglen, "fork: %s", strerror(fork_errno));
		return -fork_errno;
	}
	if (a.err) {
		int e = a.err;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		switch (a.phase) {
		case 1:
			init_fmt(msg, msglen, "cwd %s: %s", q->cwd, strerror(e));
			break;
		case 2:
			init_fmt(msg, msglen, "switch to user %s: %s", q->user ? q->user : "root", strerror(e));
			break;
		case 4:
			init_fmt(msg, msglen, "controlling terminal: %s", strerror(e));
			break;
		default:
			init_fmt(msg, msglen, "%s: %s", q->argv[0], strerror(e));
			*exit_code = e == ENOENT ? 127 : 126;
			break;
		}
		return -e;
	}
	*pid_out = pid;
	*tty_master = m;
	return 0;
}
