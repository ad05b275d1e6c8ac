/* SPDX-License-Identifier: MIT */
/*
 * Host-side requests to a sandbox's init over its control socket
 * (<dir>/ctl.sock, SOCK_SEQPACKET). One connection per request keeps calls
 * from different threads independent.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "local_int.h"
#include "proto.h"

int sbx__local_connect(struct local_sb *sb, int *fd_out, sbx_error **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.sock", sb->dir);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return sbx_error_set(err, -ENAMETOOLONG, "control socket path %s.sock is too long", sb->dir);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		if (e == ECONNREFUSED || e == ENOENT)
			return sbx_error_set(err, -ESRCH, "sandbox %s is not running", sb->id);
		return sbx_error_setsys(err, -e, e, "connect to sandbox %s", sb->id);
	}
	*fd_out = steal_fd(&fd);
	return 0;
}

/* Reads the reply to a simple request; an attached fd is returned in *fd_out. */
static int read_reply(struct local_sb *sb, int fd, int *fd_out, sbx_error **err)
{
	char buf[2048];
	int fds[SBX_MSG_MAX_FDS], nfds = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 30000) == 0)
		return sbx_error_set(err, -ETIMEDOUT, "sandbox %s did not answer in 30 s", sb->id);
	long n = sbx__msg_recv(fd, buf, sizeof(buf), fds, &nfds);
	if (n <= 0)
		return sbx_error_set(err, -ESRCH, "sandbox %s closed the connection (it is gone)", sb->id);
	uint32_t type = sbx__msg_type(buf);
	int r = 0;
	if (type == M_ERROR) {
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		int e = EIO;
		char msg[1024] = "error";
		while (sbx__msg_next(buf, (size_t)n, &off, &tag, &d, &dl) == 1) {
			if (tag == T_ERRNO)
				e = (int)sbx__msg_u64(d, dl);
			else if (tag == T_MSG)
				snprintf(msg, sizeof(msg), "%.*s", (int)dl, d);
		}
		r = sbx_error_set(err, -e, "sandbox %s: %s", sb->id, msg);
	} else if (type != M_OK) {
		r = sbx_error_set(err, -EPROTO, "sandbox %s: unexpected reply %u", sb->id, type);
	}
	for (int i = 0; i < nfds; i++) {
		if (r == 0 && fd_out && i == 0)
			*fd_out = fds[i];
		else
			close(fds[i]);
	}
	return r;
}

int sbx__local_request(struct local_sb *sb, uint32_t type, uint64_t ttl_ms, int *fd_out,
		       sbx_error **err)
{
	_cleanup_close_ int fd = -1;
	int r = sbx__local_connect(sb, &fd, err);
	if (r < 0)
		return r;
	char buf[64];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), type);
	if (type == M_SET_TTL)
		sbx__msg_add_u64(&m, T_TTL_MS, ttl_ms);
	r = sbx__msg_send(fd, &m, NULL, 0);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "send request to sandbox %s", sb->id);
	return read_reply(sb, fd, fd_out, err);
}

int sbx__local_rootfd(struct local_sb *sb, sbx_error **err)
{
	pthread_mutex_lock(&sb->lock);
	int r = 0;
	if (sb->rootfd < 0) {
		int fd = -1;
		r = sbx__local_request(sb, M_ROOTFD, 0, &fd, err);
		if (r == 0)
			sb->rootfd = fd;
	}
	int fd = sb->rootfd;
	pthread_mutex_unlock(&sb->lock);
	return r < 0 ? r : fd;
}
