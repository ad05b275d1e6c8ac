/* SPDX-License-Identifier: MIT */
/*
 * network=internet: the order of wiring one sandbox, and its removal.
 *
 * attach: the egress plan (lists resolved, nothing made yet), the marker
 * <state>/local/<id>.net (a creator killed after it leaves something GC
 * finds), the veth pair sbx<id> / eth0 with the peer made directly in the
 * sandbox's namespace, an address slot, the sandbox's nftables objects if
 * its plan has any (before its links are up, so its lists apply from the
 * first packet), the host end's address and link, and last, through a
 * socket in the sandbox's namespace, lo, eth0 and the default route.
 *
 * detach: the nftables objects, then the marker. The veth pair dies with
 * the namespace (docs/network.md says why it is not deleted here).
 *
 * An address slot is a /31 of the pool (SBX_NET_POOL): host end .2k,
 * sandbox .2k+1. The kernel hands it out: the host end takes the altname
 * sbxip-<host address in hex>, and altnames are unique on the host, so two
 * processes can never take the same slot, and the slot is free again the
 * moment the link goes (with the sandbox's namespace, whatever killed it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../util/alloc.h"
#include "../../../util/cleanup.h"
#include "../../../util/fs.h"
#include "../../../util/log.h"
#include "net.h"
#include "net_int.h"

#define SLOT_PROBES 4096

static char *marker_path(const char *base)
{
	return xasprintf("%s.net", base);
}

int sbx__net_marked(const char *base)
{
	_cleanup_free_ char *m = marker_path(base);
	return access(m, F_OK) == 0;
}

/* Host-wide and never turned back off (docs/network.md): like Docker. */
static int ensure_forwarding(sbx_error **err)
{
	const char *path = "/proc/sys/net/ipv4/ip_forward";
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	char c = '0';
	if (fd < 0 || pread(fd, &c, 1, 0) != 1)
		return sbx_error_setsys(err, -errno, errno, "read %s", path);
	if (c == '1')
		return 0;
	if (pwrite(fd, "1", 1, 0) != 1)
		return sbx_error_setsys(err, -errno, errno, "enable IPv4 forwarding (%s)", path);
	SBX_LOGI("local: enabled IPv4 forwarding on the host (network=internet)");
	return 0;
}

/* The first free /31 of the pool, from a random start. */
static int take_slot(struct rtnl *h, int ifindex, const struct net_cidr *pool, struct net_plan *p,
		     const char *id, sbx_error **err)
{
	uint32_t slots = 1u << (32 - pool->plen - 1), start = 0;
	if (getrandom(&start, sizeof(start), 0) != sizeof(start))
		start = (uint32_t)getpid();
	uint32_t base = ntohl(pool->addr);
	for (uint32_t i = 0; i < slots && i < SLOT_PROBES; i++) {
		uint32_t s = (start + i) % slots;
		uint32_t host = base + 2 * s;
		/* Skip the pool's network and broadcast addresses of classful
		 * habits (.0 of the first slot is fine for a /31, but some
		 * middleboxes dislike .0 and .255). */
		if ((host & 0xff) == 0 || (host & 0xff) == 0xfe)
			continue;
		char alt[32];
		snprintf(alt, sizeof(alt), "sbxip-%08x", host);
		int r = sbx__rtnl_altname(h, ifindex, alt);
		if (r == -EEXIST)
			continue;
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "sandbox %s: claim an address slot (altname %s)", id, alt);
		p->host_addr = htonl(host);
		p->sb_addr = htonl(host + 1);
		return 0;
	}
	return sbx_error_set(err, -EADDRNOTAVAIL, "sandbox %s: no free address slot in SBX_NET_POOL (%u probed)", id,
			     slots < SLOT_PROBES ? slots : SLOT_PROBES);
}

/* lo, eth0 and the default route, from inside. */
static int wire_inside(int netns, const struct net_plan *p, const char *id, sbx_error **err)
{
	struct rtnl *in = NULL;
	int r = sbx__rtnl_open(&in, netns);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "sandbox %s: netlink in its network namespace", id);
	const char *what = "bring lo up";
	int eth = 0;
	if ((r = sbx__rtnl_up(in, 1)) < 0)
		goto out;
	what = "find eth0";
	if ((r = eth = sbx__rtnl_index(in, "eth0")) < 0)
		goto out;
	what = "address eth0";
	if ((r = sbx__rtnl_addr(in, eth, p->sb_addr, 31)) < 0)
		goto out;
	what = "bring eth0 up";
	if ((r = sbx__rtnl_up(in, eth)) < 0)
		goto out;
	what = "add the default route";
	r = sbx__rtnl_default_route(in, eth, p->host_addr);
out:
	sbx__rtnl_close(in);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "sandbox %s: %s", id, what);
	return 0;
}

int sbx__net_attach(const char *base, const char *id, pid_t init_pid, const sbx_sandbox_opts *o,
		    sbx_error **err)
{
	double t0 = sbx__now_mono();
	struct net_plan p = { 0 };
	struct net_cidr pool;
	struct rtnl *h = NULL;
	int netns = -1, r;
	_cleanup_free_ char *marker = marker_path(base);
	char host[16];
	snprintf(host, sizeof(host), NET_IF_PREFIX "%s", id);
	if ((r = sbx__net_pool(&pool, err)) < 0 || (r = sbx__net_plan_lists(&p, o, err)) < 0 ||
	    (r = ensure_forwarding(err)) < 0)
		goto out;
	double t1 = sbx__now_mono();
	if ((r = sbx__write_file_atomic(marker, id, strlen(id), 0600, err)) < 0)
		goto out;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)init_pid);
	if ((netns = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		r = sbx_error_setsys(err, -errno, errno, "sandbox %s: open its network namespace", id);
		goto out;
	}
	if ((r = sbx__rtnl_open(&h, -1)) < 0) {
		r = sbx_error_setsys(err, r, -r, "netlink socket");
		goto out;
	}
	if ((r = sbx__rtnl_veth(h, host, "eth0", netns)) < 0) {
		r = sbx_error_setsys(err, r, -r, "sandbox %s: create veth pair %s", id, host);
		goto out;
	}
	int idx = sbx__rtnl_index(h, host);
	if (idx < 0) {
		r = sbx_error_setsys(err, idx, -idx, "sandbox %s: find %s", id, host);
		goto out;
	}
	if ((r = take_slot(h, idx, &pool, &p, id, err)) < 0 || (r = sbx__nft_add_sandbox(id, &p, err)) < 0)
		goto out;
	double t2 = sbx__now_mono();
	if ((r = sbx__rtnl_addr(h, idx, p.host_addr, 31)) < 0 || (r = sbx__rtnl_up(h, idx)) < 0) {
		r = sbx_error_setsys(err, r, -r, "sandbox %s: configure %s", id, host);
		goto out;
	}
	if ((r = wire_inside(netns, &p, id, err)) < 0)
		goto out;
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &p.sb_addr, a, sizeof(a));
	SBX_LOGD("local: %s network=internet: %s on %s in %.2f ms (lists %.2f, links+rules %.2f, addresses %.2f)",
		 id, a, host, (sbx__now_mono() - t0) * 1e3, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
		 (sbx__now_mono() - t2) * 1e3);
out:
	if (netns >= 0)
		close(netns);
	sbx__rtnl_close(h);
	sbx__net_plan_clear(&p);
	return r;
}

/* set_egress and detach lock the marker: a replace that ran after detach
 * had looked for the chain would make one for a sandbox already gone, and
 * nothing would ever remove it. */
static int lock_marker(const char *base)
{
	_cleanup_free_ char *m = marker_path(base);
	int fd = open(m, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	struct stat st;
	int r = flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0 ? -errno : 0;
	if (r == 0 && st.st_nlink == 0)
		r = -ENOENT; /* detached while we waited */
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

int sbx__net_set_egress(const char *base, const char *id, const sbx_sandbox_opts *o, sbx_error **err)
{
	if (!sbx__net_marked(base))
		return sbx_error_set(err, -ENOTSUP,
				     "sandbox %s has no network of its own to filter (network=internet is chosen at "
				     "create)", id);
	struct net_plan p = { 0 };
	int r = sbx__net_plan_lists(&p, o, err); /* resolving names takes time: outside the lock */
	if (r == 0) {
		int fd = lock_marker(base);
		if (fd < 0)
			r = sbx_error_set(err, -ESRCH, "sandbox %s: its network is gone (destroyed)", id);
		else
			r = sbx__nft_set_sandbox(id, &p, err);
		if (fd >= 0)
			close(fd);
	}
	sbx__net_plan_clear(&p);
	return r;
}

int sbx__net_detach(const char *base, const char *id, sbx_error **err)
{
	int fd = lock_marker(base);
	if (fd == -ENOENT)
		return 0;
	_cleanup_close_ int lock = fd; /* held until the marker is gone */
	int r = sbx__nft_del_sandbox(id, err);
	if (r < 0)
		return r;
	/* The link needs nothing: it dies with the sandbox's namespace, which
	 * the kernel frees (in the background, within milliseconds) once init
	 * is gone, and its address slot with it. Deleting it here would cost
	 * two RCU grace periods (tens of ms) for nothing. */
	_cleanup_free_ char *marker = marker_path(base);
	if (unlink(marker) < 0 && errno != ENOENT)
		return sbx_error_setsys(err, -errno, errno, "remove %s", marker);
	return 0;
}

char *sbx__net_resolv_conf(void)
{
	uint32_t ns[8];
	size_t n = sbx__net_nameservers(ns, 8);
	if (n == 0)
		return xstrdup("# sbx: the host has no nameserver a sandbox can reach (loopback only); "
			       "set SBX_NET_DNS\n");
	char *out = xstrdup("");
	for (size_t i = 0; i < n; i++) {
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &ns[i], a, sizeof(a));
		char *next = xasprintf("%snameserver %s\n", out, a);
		free(out);
		out = next;
	}
	return out;
}
