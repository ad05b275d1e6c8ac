/* SPDX-License-Identifier: MIT */
/*
 * connect_port for the local provider: a TCP connection to 127.0.0.1:PORT
 * inside a sandbox's own network namespace, whatever its network mode
 * (`none` has only `lo`). The socket is made by a short-lived thread that
 * setns()es into the namespace (a socket keeps the namespace it was made
 * in), so no caller's thread ever leaves the host's. A sandbox that shares
 * the host's namespace is refused: its "inside" would be the host's ports.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local_int.h"

#define CONNECT_TIMEOUT_MS 5000

struct ns_sock {
	int nsfd;   /* the sandbox's network namespace (or its pidfd) */
	int fd;     /* out */
	int err;    /* errno, EPERM = the host's namespace */
};

static int same_ns(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static void *ns_sock_main(void *arg)
{
	struct ns_sock *o = arg;
	struct stat host, inside;
	if (stat("/proc/thread-self/ns/net", &host) < 0 || setns(o->nsfd, CLONE_NEWNET) < 0 ||
	    stat("/proc/thread-self/ns/net", &inside) < 0) {
		o->err = errno;
		return NULL;
	}
	if (same_ns(&host, &inside)) {
		o->err = EPERM;
		return NULL;
	}
	o->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (o->fd < 0)
		o->err = errno;
	return NULL;
}

/* The sandbox's network namespace: its pidfd (setns takes one since 5.8),
 * else /proc/<init>/ns/net checked against pid reuse. *own = 1 when the
 * fd is a new one the caller closes. */
static int netns_fd(struct local_sb *sb, int *own)
{
	*own = 0;
	if (sb->pid <= 0)
		return -ESRCH;
	if (sb->pidfd >= 0)
		return sb->pidfd;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	if (!sbx__proc_alive(sb->pid, sb->start)) {
		close(fd);
		return -ESRCH;
	}
	*own = 1;
	return fd;
}

/* Waits for a non-blocking connect on loopback: immediate unless the
 * listener's backlog is full. */
static int finish_connect(int fd, const struct sockaddr_in *a)
{
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int n;
	do
		n = poll(&p, 1, CONNECT_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -ETIMEDOUT;
	int e = 0;
	socklen_t el = sizeof(e);
	if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
		return -errno;
	return -e;
}

int sbx__local_connect_port(int *fd_out, struct local_sb *sb, unsigned port, sbx_error **err)
{
	*fd_out = -1;
	int own = 0;
	int ns = netns_fd(sb, &own);
	if (ns < 0)
		return sbx_error_setsys(err, ns == -ESRCH ? -ESRCH : ns, -ns, "sandbox %s: its network namespace", sb->id);
	struct ns_sock o = { .nsfd = ns, .fd = -1 };
	pthread_t t;
	int e = pthread_create(&t, NULL, ns_sock_main, &o);
	if (e == 0)
		pthread_join(t, NULL);
	if (own)
		close(ns);
	if (e)
		return sbx_error_setsys(err, -e, e, "sandbox %s: start a thread to enter its network", sb->id);
	if (o.fd < 0) {
		if (o.err == EPERM)
			return sbx_error_set(err, -EPERM,
					     "sandbox %s shares the host's network: its ports are the host's, not its own",
					     sb->id);
		if (o.err == ESRCH || o.err == EBADF)
			return sbx_error_set(err, -ESRCH, "sandbox %s is not running", sb->id);
		return sbx_error_setsys(err, -o.err, o.err, "sandbox %s: a socket in its network", sb->id);
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int r = finish_connect(o.fd, &a);
	if (r < 0) {
		close(o.fd);
		if (r == -ECONNREFUSED)
			return sbx_error_set(err, r, "sandbox %s: nothing listens on port %u", sb->id, port);
		if (r == -ETIMEDOUT)
			return sbx_error_set(err, r, "sandbox %s: port %u did not accept within %d s", sb->id, port,
					     CONNECT_TIMEOUT_MS / 1000);
		return sbx_error_setsys(err, r, -r, "sandbox %s: connect to port %u", sb->id, port);
	}
	*fd_out = o.fd;
	return 0;
}
