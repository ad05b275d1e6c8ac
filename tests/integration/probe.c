/* SPDX-License-Identifier: MIT */
/*
 * sbx-probe: a static helper uploaded into test sandboxes. Each subcommand
 * tries one thing and prints the outcome, so tests can assert on what the
 * sandbox allows (busybox alone cannot call ptrace or bpf).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <netinet/in.h>
#include <poll.h>
#include <arpa/inet.h>
#include <unistd.h>

static int report(const char *what, long r)
{
	printf("%s: %s\n", what, r < 0 ? strerror(errno) : "ok");
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *c = argv[1];
	if (!strcmp(c, "mount"))
		return report("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
	if (!strcmp(c, "ptrace"))
		return report("ptrace", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
	if (!strcmp(c, "unshare"))
		return report("unshare", unshare(CLONE_NEWUSER));
	if (!strcmp(c, "bpf"))
		return report("bpf", syscall(SYS_bpf, 0, NULL, 0));
	if (!strcmp(c, "keyctl"))
		return report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	if (!strcmp(c, "mknod"))
		return report("mknod", mknod("/tmp/sda", 060600, 0x800));
	if (!strcmp(c, "connect") && argc > 2) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
		inet_pton(AF_INET, argc > 3 ? argv[3] : "127.0.0.1", &sa.sin_addr);
		return report("connect", connect(s, (struct sockaddr *)&sa, sizeof(sa)));
	}
	if (!strcmp(c, "hog") && argc > 2) {
		size_t mb = (size_t)atol(argv[2]);
		for (size_t i = 0; i < mb; i++) {
			char *p = malloc(1 << 20);
			if (!p)
				return report("hog", -1);
			memset(p, 1, 1 << 20);
		}
		printf("hog: allocated %zu MiB\n", mb);
		return 0;
	}
	if (!strcmp(c, "packet"))
		/* A sniffer's first step (docs/security.md, packet sockets). */
		return report("packet", socket(AF_PACKET, SOCK_RAW, htons(0x0003 /* ETH_P_ALL */)));
	if (!strcmp(c, "dial") && argc > 4) {
		/* dial HOST PORT MS: a TCP connect that gives up after MS. */
		int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)strtol(argv[3], NULL, 10)) };
		inet_pton(AF_INET, argv[2], &sa.sin_addr);
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
			return report("dial", -1);
		struct pollfd p = { .fd = s, .events = POLLOUT };
		if (poll(&p, 1, (int)strtol(argv[4], NULL, 10)) == 0) {
			printf("dial: timeout\n");
			return 1;
		}
		int e = 0;
		socklen_t el = sizeof(e);
		getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
		errno = e;
		return report("dial", e ? -1 : 0);
	}
	if (!strcmp(c, "udp") && argc > 4) {
		/* udp HOST PORT MS: one datagram out, waits MS for any answer. */
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)strtol(argv[3], NULL, 10)) };
		inet_pton(AF_INET, argv[2], &sa.sin_addr);
		if (sendto(s, "ping", 4, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return report("udp", -1);
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (poll(&p, 1, (int)strtol(argv[4], NULL, 10)) == 0) {
			printf("udp: timeout\n");
			return 1;
		}
		char b[64];
		return report("udp", recv(s, b, sizeof(b), 0));
	}
	if (!strcmp(c, "listen") && argc > 2) {
		/* listen PORT: answers every TCP connection with "sbx\n". */
		int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)strtol(argv[2], NULL, 10)) };
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 16) < 0)
			return report("listen", -1);
		for (;;) {
			int c2 = accept(s, NULL, NULL);
			if (c2 >= 0) {
				(void)!write(c2, "sbx\n", 4);
				close(c2);
			}
		}
	}
	if (!strcmp(c, "reopen") && argc > 3) {
		/* Opens /proc/self/fd/N again, as an escape would, and either reads
		 * what it can without blocking into FILE or appends TEXT to it. */
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", argv[2]);
		int w = !strcmp(argv[3], "w");
		int fd = open(path, (w ? O_WRONLY | O_APPEND : O_RDONLY) | O_NONBLOCK);
		if (fd < 0 || argc < 5)
			return report("reopen", fd);
		if (w)
			return report("reopen", write(fd, argv[4], strlen(argv[4])));
		FILE *out = fopen(argv[4], "w");
		char buf[4096];
		ssize_t n;
		while (out && (n = read(fd, buf, sizeof(buf))) > 0)
			fwrite(buf, 1, (size_t)n, out);
		return report("reopen", out ? fclose(out) : -1);
	}
	if (!strcmp(c, "sti") && argc > 3) {
		/* sti N TEXT: pushes TEXT into the input of the terminal on fd
		 * N (TIOCSTI), as if typed there: on a host terminal, the host
		 * shell would run it after we exit. */
		long r = 0;
		for (const char *p = argv[3]; *p && r == 0; p++)
			r = ioctl((int)strtol(argv[2], NULL, 10), TIOCSTI, p);
		return report("sti", r);
	}
	if (!strcmp(c, "euid")) {
		printf("euid %u\n", (unsigned)geteuid());
		return 0;
	}
	if (!strcmp(c, "setcap") && argc > 2) {
		/* vfs_cap_data v2: CAP_SETUID (7) permitted and effective */
		uint32_t cap[5] = { 0x02000001u, 1u << 7, 0, 0, 0 };
		return report("setcap", setxattr(argv[2], "security.capability", cap, sizeof(cap), 0));
	}
	if (!strcmp(c, "udplisten") && argc > 3) {
		/* udplisten PORT MS: waits MS for one datagram on PORT. */
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)strtol(argv[2], NULL, 10)) };
		if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return report("udplisten", -1);
		struct pollfd p = { .fd = s, .events = POLLIN };
		int got = poll(&p, 1, (int)strtol(argv[3], NULL, 10)) > 0;
		printf("udplisten: %s\n", got ? "got" : "timeout");
		fflush(stdout);
		return got ? 0 : 1;
	}
	if (!strcmp(c, "spoof") && argc > 5) {
		/* spoof SRC SPORT DST DPORT: one UDP datagram built by hand on a
		 * raw socket (needs CAP_NET_RAW), whatever SRC says. */
		int s = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
		if (s < 0)
			return report("spoof", -1);
		unsigned char pkt[20 + 8 + 5] = { 0 };
		uint16_t sport = htons((uint16_t)strtol(argv[3], NULL, 10)), dport = htons((uint16_t)strtol(argv[5], NULL, 10));
		uint16_t len = htons(sizeof(pkt)), ulen = htons(8 + 5);
		pkt[0] = 0x45;
		memcpy(pkt + 2, &len, 2);
		pkt[8] = 64;
		pkt[9] = 17; /* UDP; the kernel fills in the IP checksum and id */
		inet_pton(AF_INET, argv[2], pkt + 12);
		inet_pton(AF_INET, argv[4], pkt + 16);
		memcpy(pkt + 20, &sport, 2);
		memcpy(pkt + 22, &dport, 2);
		memcpy(pkt + 24, &ulen, 2); /* UDP checksum 0: none */
		memcpy(pkt + 28, "spoof", 5);
		struct sockaddr_in sa = { .sin_family = AF_INET };
		memcpy(&sa.sin_addr, pkt + 16, 4);
		return report("spoof", sendto(s, pkt, sizeof(pkt), 0, (struct sockaddr *)&sa, sizeof(sa)));
	}
	return 2;
}
