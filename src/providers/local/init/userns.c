/* SPDX-License-Identifier: MIT */
/*
 * Joining the sandbox's user namespace (idmap.c made it, with root inside
 * mapped to an unprivileged host id range). init builds the root, /dev,
 * cgroups and the namespaces' settings as host root first, because those
 * namespaces belong to the host's user namespace; then every process of the
 * sandbox, init included, runs as ids of the range: root inside is a
 * nobody outside, set-uid files and file capabilities written inside mean
 * nothing to the host, and per-user kernel quotas are the sandbox's own.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <string.h>
#include <sys/fsuid.h>
#include <unistd.h>

#include "init.h"

void init_as_sandbox_root(const struct init_cfg *cfg, int on)
{
	if (cfg->userns_fd < 0)
		return;
	uid_t id = on ? (uid_t)cfg->id_base : 0;
	setfsgid(id);
	setfsuid(id);
}

static void sysctl_set(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	(void)!write(fd, value, strlen(value));
	close(fd);
}

void init_userns_sysctls(const struct init_cfg *cfg)
{
	/* The network namespace stays the host user namespace's, so root
	 * inside has no CAP_NET_BIND_SERVICE or CAP_NET_RAW in it: let any
	 * user bind low ports and use ICMP echo sockets (ping) instead, as
	 * rootless container runtimes do. Never with the host's network. */
	if (cfg->userns_fd < 0 || cfg->network_host)
		return;
	sysctl_set("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
	sysctl_set("/proc/sys/net/ipv4/ping_group_range", "0 2147483647");
}

int init_enter_userns(const struct init_cfg *cfg, char *msg, size_t msglen)
{
	if (cfg->userns_fd < 0)
		return 0;
	if (setns(cfg->userns_fd, CLONE_NEWUSER) < 0) {
		init_fmt(msg, msglen, "join the sandbox's user namespace: %s", strerror(errno));
		return -errno;
	}
	close(cfg->userns_fd);
	gid_t none[1];
	if (setgroups(0, none) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		init_fmt(msg, msglen, "become root of the sandbox's user namespace: %s", strerror(errno));
		return -errno;
	}
	return 0;
}
