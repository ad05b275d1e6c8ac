/* SPDX-License-Identifier: MIT */
/*
 * Privilege drop for the whole sandbox, applied once in init and inherited by
 * every command: Docker's default capability set minus CAP_MKNOD (we run no
 * device cgroup, so mknod must not be possible) and CAP_NET_RAW, no_new_privs, and the
 * seccomp filter the host compiled.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init.h"

/* Docker's set less CAP_NET_RAW, which is kept only when the spec asks
 * (net_raw): with a raw or packet socket a sandbox sharing the host's
 * network sniffed the server's API keys off lo (docs/security.md). ping
 * works without it through ICMP echo sockets (userns.c). */
static const int keep[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_SETGID,
	CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
	CAP_KILL, CAP_AUDIT_WRITE, CAP_NET_RAW,
};
#define N_KEEP(cfg) (sizeof(keep) / sizeof(keep[0]) - ((cfg)->net_raw ? 0 : 1))

static int kept(const struct init_cfg *cfg, int cap)
{
	for (size_t i = 0; i < N_KEEP(cfg); i++)
		if (keep[i] == cap)
			return 1;
	return 0;
}

/* Raw read, no stdio: fopen's buffer is an mmap/munmap pair in musl. */
static int last_cap(void)
{
	int n = CAP_LAST_CAP;
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char b[16];
		ssize_t k = read(fd, b, sizeof(b) - 1);
		close(fd);
		if (k > 0) {
			b[k] = '\0';
			char *end;
			long v = strtol(b, &end, 10);
			if (end != b && v > 0 && v < 64)
				n = (int)v;
		}
	}
	return n;
}

int init_harden(const struct init_cfg *cfg, char *msg, size_t msglen)
{
	int last = last_cap();
	for (int c = 0; c <= last; c++)
		if (!kept(cfg, c) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) {
			init_fmt(msg, msglen, "drop capability %d from the bounding set: %s", c, strerror(errno));
			return -errno;
		}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < N_KEEP(cfg); i++) {
		int c = keep[i];
		data[c / 32].effective |= 1u << (c % 32);
		data[c / 32].permitted |= 1u << (c % 32);
	}
	if (syscall(SYS_capset, &hdr, data) < 0) {
		init_fmt(msg, msglen, "capset: %s", strerror(errno));
		return -errno;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		init_fmt(msg, msglen, "no_new_privs: %s", strerror(errno));
		return -errno;
	}
	if (cfg->seccomp_len) {
		if (cfg->seccomp_len % sizeof(struct sock_filter) != 0) {
			init_fmt(msg, msglen, "seccomp program of %zu bytes is malformed", cfg->seccomp_len);
			return -EINVAL;
		}
		/* Copy for alignment: the message buffer gives no guarantee. */
		struct sock_filter *insns = init_setup_alloc(cfg->seccomp_len);
		if (!insns)
			return -ENOMEM;
		memcpy(insns, cfg->seccomp, cfg->seccomp_len);
		struct sock_fprog prog = { .len = (unsigned short)(cfg->seccomp_len / sizeof(*insns)),
					   .filter = insns };
		long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
		int e = errno;
		if (r < 0) {
			init_fmt(msg, msglen, "install seccomp filter: %s", strerror(e));
			return -e;
		}
	}
	return 0;
}
