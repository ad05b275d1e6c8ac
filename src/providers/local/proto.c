/* SPDX-License-Identifier: MIT */
/*
 * Message framing for host <-> init. SOCK_SEQPACKET keeps message boundaries,
 * so a message is exactly one sendmsg/recvmsg, fds included.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proto.h"

void sbx__msg_init(struct sbx_msg *m, char *buf, size_t cap, uint32_t type)
{
	struct sbx_msg_hdr h = { .type = type, .len = sizeof(h) };
	m->buf = buf;
	m->cap = cap;
	m->len = sizeof(h);
	m->overflow = 0;
	memcpy(buf, &h, sizeof(h));
}

void sbx__msg_add(struct sbx_msg *m, uint16_t tag, const void *data, uint32_t len)
{
	size_t need = 2 + 4 + (size_t)len;
	if (m->overflow || need > m->cap - m->len) {
		m->overflow = 1;
		return;
	}
	memcpy(m->buf + m->len, &tag, 2);
	memcpy(m->buf + m->len + 2, &len, 4);
	if (len)
		memcpy(m->buf + m->len + 6, data, len);
	m->len += need;
	uint32_t total = (uint32_t)m->len;
	memcpy(m->buf + offsetof(struct sbx_msg_hdr, len), &total, 4);
}

void sbx__msg_add_str(struct sbx_msg *m, uint16_t tag, const char *s)
{
	sbx__msg_add(m, tag, s, (uint32_t)strlen(s));
}

void sbx__msg_add_u64(struct sbx_msg *m, uint16_t tag, uint64_t v)
{
	sbx__msg_add(m, tag, &v, sizeof(v));
}

int sbx__msg_send(int sock, const struct sbx_msg *m, const int *fds, int nfds)
{
	return sbx__msg_sendf(sock, m, fds, nfds, 0);
}

int sbx__msg_sendf(int sock, const struct sbx_msg *m, const int *fds, int nfds, int flags)
{
	if (m->overflow)
		return -E2BIG;
	struct iovec iov = { .iov_base = m->buf, .iov_len = m->len };
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBX_MSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
		if (n >= 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

long sbx__msg_recv(int sock, char *buf, size_t cap, int *fds, int *nfds)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBX_MSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	*nfds = 0;
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *in = (int *)(void *)CMSG_DATA(c);
		for (int i = 0; i < k; i++) {
			if (*nfds < SBX_MSG_MAX_FDS)
				fds[(*nfds)++] = in[i];
			else
				close(in[i]);
		}
	}
	if (n == 0)
		return 0;
	struct sbx_msg_hdr h;
	if ((size_t)n < sizeof(h) || (mh.msg_flags & MSG_TRUNC))
		goto bad;
	memcpy(&h, buf, sizeof(h));
	if (h.len != (uint32_t)n)
		goto bad;
	return n;
bad:
	for (int i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
	return -EPROTO;
}

uint32_t sbx__msg_type(const char *buf)
{
	struct sbx_msg_hdr h;
	memcpy(&h, buf, sizeof(h));
	return h.type;
}

int sbx__msg_next(const char *buf, size_t len, size_t *off, uint16_t *tag, const char **data,
		  uint32_t *dlen)
{
	if (*off < sizeof(struct sbx_msg_hdr))
		*off = sizeof(struct sbx_msg_hdr);
	if (*off == len)
		return 0;
	if (len - *off < 6)
		return -1;
	uint32_t l;
	memcpy(tag, buf + *off, 2);
	memcpy(&l, buf + *off + 2, 4);
	if (l > len - *off - 6)
		return -1;
	*data = buf + *off + 6;
	*dlen = l;
	*off += 6 + (size_t)l;
	return 1;
}

uint64_t sbx__msg_u64(const char *data, uint32_t dlen)
{
	uint64_t v = 0;
	if (dlen == sizeof(v))
		memcpy(&v, data, sizeof(v));
	return v;
}

int sbx__msg_send_error(int sock, int errnum, const char *msg)
{
	char buf[1024];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), M_ERROR);
	sbx__msg_add_u64(&m, T_ERRNO, (uint64_t)errnum);
	size_t n = strlen(msg);
	sbx__msg_add(&m, T_MSG, msg, (uint32_t)(n > 900 ? 900 : n));
	return sbx__msg_send(sock, &m, NULL, 0);
}

int sbx__msg_send_simple(int sock, uint32_t type, const int *fds, int nfds)
{
	char buf[sizeof(struct sbx_msg_hdr)];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), type);
	return sbx__msg_send(sock, &m, fds, nfds);
}
