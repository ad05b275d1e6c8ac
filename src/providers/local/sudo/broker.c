/* SPDX-License-Identifier: MIT */
/*
 * The sudo broker: this binary run by init as the sandbox's root when the
 * listener /dev/sbx/sudo.sock is readable (init/sudo.c). It accepts one
 * connection, forks a handler for it and exits, so that init can watch the
 * listener again. The handler reads one request (bounded, one datagram,
 * within 10 s), decides by the peer's credentials and the policy init gave
 * it, starts the command as the target user (a child of its own, with the
 * client's stdio; same cgroup, seccomp filter, capabilities and
 * no_new_privs as every command, inherited from init), relays signals, and
 * sends back the exit status. A client that goes away takes the command's
 * process group with it. Whatever a client does only ever blocks its own
 * handler, never init.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "../init/sudo.h"
#include "../proto.h"
#include "sudo_int.h"

extern char **environ;

#define MAX_STRS (INIT_SUDO_MSG_MAX / 6 + 1)
#define REQUEST_WAIT_MS 10000

static char buf[INIT_SUDO_MSG_MAX + 1];
static char *argv_[MAX_STRS], *env_[MAX_STRS + 512];

static void reply_error(int c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(int c, int err, const char *fmt, ...)
{
	char msg[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sbx__msg_send_error(c, err, msg);
}

static int env_find(char **env, int n, const char *kv)
{
	size_t k = strcspn(kv, "=");
	for (int i = 0; i < n; i++)
		if (strncmp(env[i], kv, k) == 0 && env[i][k] == '=')
			return i;
	return -1;
}

/* The request, NUL-terminated in place once every record is found (a NUL
 * overwrites the next record's first header byte, read already). */
struct request {
	const char *user, *cwd;
	char **argv, **env;
	int nenv;
};

static int parse(struct request *q, long n)
{
	static struct { char *d; uint32_t l; } strs[MAX_STRS];
	static uint16_t tags[MAX_STRS];
	int ns = 0, na = 0, ne = 0, r;
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	while ((r = sbx__msg_next(buf, (size_t)n, &off, &tag, &d, &dl)) == 1) {
		if (tag != T_ARG && tag != T_ENV && tag != T_USER && tag != T_CWD)
			continue;
		if (ns == MAX_STRS)
			return -1;
		strs[ns].d = (char *)d;
		strs[ns].l = dl;
		tags[ns++] = tag;
	}
	if (r < 0)
		return -1;
	memset(q, 0, sizeof(*q));
	/* The base: what every command gets from init (image and spec env). */
	for (char **e = environ; e && *e && ne < 512; e++)
		env_[ne++] = *e;
	for (int i = 0; i < ns; i++) {
		strs[i].d[strs[i].l] = '\0';
		if (tags[i] == T_ARG)
			argv_[na++] = strs[i].d;
		else if (tags[i] == T_USER)
			q->user = strs[i].d;
		else if (tags[i] == T_CWD)
			q->cwd = strs[i].d;
		else if (strchr(strs[i].d, '=')) {
			int j = env_find(env_, ne, strs[i].d);
			env_[j >= 0 ? j : ne++] = strs[i].d;
		}
	}
	argv_[na] = NULL;
	env_[ne] = NULL;
	q->argv = argv_;
	q->env = env_;
	q->nenv = ne;
	return na > 0 ? 0 : -1;
}

/* In the child: execve through the request's PATH, as a shell would. */
static int exec_path(char **argv, char **env)
{
	if (strchr(argv[0], '/')) {
		execve(argv[0], argv, env);
		return errno;
	}
	const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (int i = 0; env[i]; i++)
		if (strncmp(env[i], "PATH=", 5) == 0)
			path = env[i] + 5;
	int e = ENOENT;
	char p[4096];
	while (*path) {
		size_t len = strcspn(path, ":");
		snprintf(p, sizeof(p), "%.*s/%s", (int)len, len ? path : ".", argv[0]);
		execve(p, argv, env);
		if (errno == EACCES)
			e = EACCES;
		else if (errno != ENOENT && errno != ENOTDIR)
			return errno;
		path += len;
		if (*path == ':')
			path++;
	}
	return e;
}

struct child_err {
	int phase; /* 1 = credentials, 2 = cwd, 3 = exec */
	int err;
};

static void child(const struct request *q, const struct init_user *u, const int fds[3], int errw)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(SIGPIPE, &dfl, NULL);
	setsid();
	struct child_err ce = { 1, 0 };
	/* stdio first, then the error pipe at 3 and nothing else. */
	int e = fcntl(errw, F_DUPFD_CLOEXEC, 64);
	if (e < 0 || dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0 || dup3(e, 3, O_CLOEXEC) < 0)
		_exit(127);
	syscall(SYS_close_range, 4, ~0U, 0);
	if (setgroups((size_t)u->n_groups, u->groups) < 0 || setresgid(u->gid, u->gid, u->gid) < 0 ||
	    setresuid(u->uid, u->uid, u->uid) < 0)
		goto fail;
	ce.phase = 2;
	if (chdir(q->cwd ? q->cwd : "/") < 0)
		goto fail;
	ce.phase = 3;
	errno = exec_path(q->argv, q->env);
fail:
	ce.err = errno;
	(void)!write(3, &ce, sizeof(ce));
	_exit(127);
}

/* Relays signals and waits; the client's departure kills the group. */
static int supervise(int c, pid_t pid, int sigfd)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = c, .events = POLLIN }, { .fd = sigfd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return 1;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == sizeof(si))
				;
			int status;
			if (waitpid(pid, &status, WNOHANG) == pid) {
				char b[64];
				struct sbx_msg m;
				sbx__msg_init(&m, b, sizeof(b), M_EXITED);
				sbx__msg_add_u64(&m, T_STATUS, (uint64_t)status);
				sbx__msg_send(c, &m, NULL, 0);
				return 0;
			}
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		int fds[SBX_MSG_MAX_FDS], nfds = 0;
		char b[256];
		long n = sbx__msg_recv(c, b, sizeof(b), fds, &nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (n == 0 || (n < 0 && n != -EAGAIN && n != -EPROTO)) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			return 1;
		}
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		while (n > 0 && sbx__msg_type(b) == M_SIGNAL && sbx__msg_next(b, (size_t)n, &off, &tag, &d, &dl) == 1) {
			uint64_t sig = sbx__msg_u64(d, dl);
			if (tag == T_SIGNAL && sig > 0 && sig < 65 && kill(-pid, (int)sig) < 0)
				kill(pid, (int)sig);
		}
	}
}

static int handle(int c, int policy_on)
{
	struct pollfd pf = { .fd = c, .events = POLLIN };
	if (poll(&pf, 1, REQUEST_WAIT_MS) <= 0)
		return 1;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
		return 1;
	int fds[SBX_MSG_MAX_FDS], nfds = 0;
	long n = sbx__msg_recv(c, buf, INIT_SUDO_MSG_MAX, fds, &nfds);
	if (n <= 0) {
		if (n < 0)
			reply_error(c, EPROTO, "malformed request (a request is one message of at most %u bytes)",
				    INIT_SUDO_MSG_MAX);
		return 1;
	}
	struct request q;
	int r = 1;
	if (cr.pid == 0) {
		/* A process outside this sandbox's pid namespace. */
		reply_error(c, EPERM, "the requester is not a process of this sandbox");
	} else if (cr.uid != 0 && !policy_on) {
		reply_error(c, EPERM,
			    "sudo is not enabled in this sandbox: uid %u may not run commands as another user "
			    "(enable it with the image or sandbox label sbx.sudo=nopasswd)",
			    (unsigned)cr.uid);
	} else if (sbx__msg_type(buf) != M_SUDO || nfds != 3 || parse(&q, n) < 0) {
		reply_error(c, EPROTO, "malformed request: expected argv, environment, cwd, user and 3 fds "
			    "(stdin, stdout, stderr); got %d fds", nfds);
	} else {
		r = 0;
	}
	struct init_user u;
	char msg[768] = "";
	if (r == 0 && init_user_resolve(&u, q.user, msg, sizeof(msg)) < 0) {
		reply_error(c, ENOENT, "%s", msg);
		r = 1;
	}
	int ep[2] = { -1, -1 };
	pid_t pid = -1;
	if (r == 0 && pipe2(ep, O_CLOEXEC) == 0)
		pid = fork();
	if (pid == 0)
		child(&q, &u, fds, ep[1]);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (ep[1] >= 0)
		close(ep[1]);
	if (r == 0 && pid < 0) {
		reply_error(c, errno, "start the command: %s", strerror(errno));
		r = 1;
	}
	if (r) {
		if (ep[0] >= 0)
			close(ep[0]);
		return r;
	}
	struct child_err ce;
	ssize_t got = read(ep[0], &ce, sizeof(ce));
	close(ep[0]);
	if (got == (ssize_t)sizeof(ce)) {
		waitpid(pid, NULL, 0);
		if (ce.phase == 3)
			reply_error(c, ce.err, "%s: %s", q.argv[0],
				    ce.err == ENOENT ? "command not found" : strerror(ce.err));
		else if (ce.phase == 2)
			reply_error(c, ce.err, "unable to change directory to %s: %s", q.cwd, strerror(ce.err));
		else
			reply_error(c, ce.err, "switch to user %s: %s", q.user, strerror(ce.err));
		return 1;
	}
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGCHLD);
	int sigfd = signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0) {
		kill(-pid, SIGKILL);
		return 1;
	}
	return supervise(c, pid, sigfd);
}

int sudo_broker_main(const char *policy)
{
	int c = accept4(0, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return 0; /* another broker took it, or the client left */
	/* The parent's exit tells init to watch the listener again. */
	pid_t p = fork();
	if (p > 0)
		_exit(0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int i = 0; i < 3; i++)
		if (dup2(null, i) < 0)
			close(i);
	if (null > 2)
		close(null);
	/* SIGCHLD is read from a signalfd; block it before any child exists. */
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGCHLD);
	sigprocmask(SIG_BLOCK, &s, NULL);
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &ign, NULL);
	return handle(c, strcmp(policy, "nopasswd") == 0);
}
