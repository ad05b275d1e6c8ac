/* SPDX-License-Identifier: MIT */
/*
 * sbx-sudo-client: a hostile client of a sandbox's sudo broker, uploaded by
 * tests/integration/sudo.c. Each mode misbehaves one way and exits 0 once
 * the broker has answered or hung up (it must never wedge init).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/providers/local/proto.h"

static int conn(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/dev/sbx/sudo.sock" };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("connect");
		exit(3);
	}
	return fd;
}

/* Waits for the broker's answer: prints its message or "eof". */
static void answer(int fd)
{
	static char b[4096];
	int fds[SBX_MSG_MAX_FDS], nfds = 0;
	long n = sbx__msg_recv(fd, b, sizeof(b), fds, &nfds);
	if (n <= 0) {
		printf("eof\n");
		return;
	}
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	while (sbx__msg_next(b, (size_t)n, &off, &tag, &d, &dl) == 1)
		if (tag == T_MSG)
			printf("%.*s\n", (int)dl, d);
}

static void request(struct sbx_msg *m, char *buf, size_t cap, const char *cmd)
{
	sbx__msg_init(m, buf, cap, M_SUDO);
	sbx__msg_add_str(m, T_USER, "0");
	sbx__msg_add_str(m, T_CWD, "/");
	sbx__msg_add_str(m, T_ARG, "/bin/sh");
	sbx__msg_add_str(m, T_ARG, "-c");
	sbx__msg_add_str(m, T_ARG, cmd);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *mode = argv[1];
	static char buf[1 << 20];
	setvbuf(stdout, NULL, _IONBF, 0);
	struct sbx_msg m;
	if (!strcmp(mode, "garbage")) {
		int fd = conn();
		memset(buf, 0x5a, 4096);
		(void)!send(fd, buf, 4096, 0);
		answer(fd);
	} else if (!strcmp(mode, "huge")) {
		/* As large as this socket may send: past the broker's bound. */
		int fd = conn(), sz = 4 << 20;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		socklen_t sl = sizeof(sz);
		getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, &sl);
		size_t len = (size_t)sz / 2 - 4096;
		if (len > sizeof(buf) - 8192)
			len = sizeof(buf) - 8192;
		request(&m, buf, sizeof(buf), "true");
		while (m.len + 4096 < len)
			sbx__msg_add_str(&m, T_ENV, "X=0123456789012345678901234567890123456789012345678901234567890123456789");
		int fds[3] = { 0, 1, 2 };
		int r = sbx__msg_send(fd, &m, fds, 3);
		printf("sent %zu: %s\n", m.len, r < 0 ? strerror(-r) : "ok");
		answer(fd);
	} else if (!strcmp(mode, "nofds")) {
		int fd = conn();
		request(&m, buf, sizeof(buf), "true");
		sbx__msg_send(fd, &m, NULL, 0);
		answer(fd);
	} else if (!strcmp(mode, "silent")) {
		/* Connections that never send: each is one handler, not init. */
		int n = argc > 2 ? atoi(argv[2]) : 50; /* checksrc: allow (test helper) */
		for (int i = 0; i < n; i++)
			conn();
		printf("opened %d\n", n);
	} else if (!strcmp(mode, "pipelock")) {
		/* The attack init must never be exposed to: the read end of a
		 * pipe whose mutex a process of ours holds (splice from an idle
		 * socket into the pipe waits with it held), sent with a
		 * request the broker refuses, our own copy closed: the
		 * broker's close of it is the last one, and blocks. */
		int p[2], sv[2];
		if (pipe(p) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
			return 3;
		if (fork() == 0) {
			setsid();
			close(p[0]);
			(void)!splice(sv[0], NULL, p[1], NULL, 4096, 0);
			_exit(0);
		}
		close(p[1]);
		usleep(200000);
		int fd = conn();
		request(&m, buf, sizeof(buf), "true");
		sbx__msg_add_str(&m, T_USER, "no-such-user");
		int fds[3] = { p[0], p[0], p[0] };
		sbx__msg_send(fd, &m, fds, 3);
		close(p[0]);
		answer(fd);
	} else if (!strcmp(mode, "leave")) {
		/* Starts a long command, then goes away without waiting. */
		int fd = conn();
		request(&m, buf, sizeof(buf), argc > 2 ? argv[2] : "sleep 1000");
		int fds[3] = { 0, 1, 2 };
		sbx__msg_send(fd, &m, fds, 3);
		usleep(300000);
		printf("left\n");
	} else {
		return 2;
	}
	return 0;
}
