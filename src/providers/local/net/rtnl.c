/* SPDX-License-Identifier: MIT */
/*
 * rtnetlink over libmnl: the few link, address and route requests that wire
 * a sandbox's network namespace, instead of an `ip` process per sandbox.
 * A socket for a sandbox's namespace is opened by a short-lived thread that
 * setns()es into it, so the calling thread never leaves the host's
 * namespace (a socket keeps the namespace it was made in).
 */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../../../util/alloc.h"
#include "net_int.h"

struct rtnl {
	struct mnl_socket *nl;
	uint32_t seq, portid;
};

struct ns_open {
	int fd;
	struct mnl_socket *nl;
	int err;
};

static void *ns_open_main(void *arg)
{
	struct ns_open *o = arg;
	if (setns(o->fd, CLONE_NEWNET) < 0) {
		o->err = errno;
		return NULL;
	}
	o->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!o->nl)
		o->err = errno;
	return NULL;
}

int sbx__rtnl_open(struct rtnl **out, int netns_fd)
{
	struct ns_open o = { .fd = netns_fd };
	if (netns_fd < 0) {
		o.nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
		if (!o.nl)
			return -errno;
	} else {
		pthread_t t;
		int e = pthread_create(&t, NULL, ns_open_main, &o);
		if (e)
			return -e;
		pthread_join(t, NULL);
		if (!o.nl)
			return -(o.err ? o.err : EIO);
	}
	/* A kernel that never answers must not hang a create. */
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(mnl_socket_get_fd(o.nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (mnl_socket_bind(o.nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int e = errno;
		mnl_socket_close(o.nl);
		return -e;
	}
	struct rtnl *r = xcalloc(1, sizeof(*r));
	r->nl = o.nl;
	r->portid = mnl_socket_get_portid(o.nl);
	r->seq = (uint32_t)time(NULL);
	*out = r;
	return 0;
}

void sbx__rtnl_close(struct rtnl *r)
{
	if (!r)
		return;
	mnl_socket_close(r->nl);
	free(r);
}

/* Sends one request and reads to its ack; cb sees data replies. */
static int talk(struct rtnl *r, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++r->seq;
	if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	char buf[8192];
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(r->nl, buf, sizeof(buf));
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		int ret = mnl_cb_run(buf, (size_t)n, nlh->nlmsg_seq, r->portid, cb, data);
		if (ret < 0)
			return -errno;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

static struct ifinfomsg *put_link(struct nlmsghdr **nlh, char *buf, uint16_t type, uint16_t flags)
{
	*nlh = mnl_nlmsg_put_header(buf);
	(*nlh)->nlmsg_type = type;
	(*nlh)->nlmsg_flags = flags;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(*nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	return ifm;
}

/* No IPv6 link-local address: a sandbox has no IPv6, and the host end's
 * fe80:: address would be one more host address to reach. */
static void put_no_ipv6(struct nlmsghdr *nlh)
{
	struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	struct nlattr *in6 = mnl_attr_nest_start(nlh, AF_INET6);
	mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
	mnl_attr_nest_end(nlh, in6);
	mnl_attr_nest_end(nlh, spec);
}

int sbx__rtnl_veth(struct rtnl *r, const char *host, const char *peer, int peer_netns_fd)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	put_link(&nlh, buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, host);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *p = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* The peer's attributes follow an ifinfomsg of its own. */
	struct ifinfomsg *pifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifm));
	memset(pifm, 0, sizeof(*pifm));
	pifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd);
	mnl_attr_nest_end(nlh, p);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return talk(r, nlh, NULL, NULL);
}

static int index_cb(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type == RTM_NEWLINK) {
		const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
		*(int *)data = ifm->ifi_index;
	}
	return MNL_CB_OK;
}

int sbx__rtnl_index(struct rtnl *r, const char *name)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	put_link(&nlh, buf, RTM_GETLINK, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	int idx = 0;
	/* The reply comes before the ack; the ack ends the exchange. */
	int rc = talk(r, nlh, index_cb, &idx);
	if (rc < 0)
		return rc;
	return idx > 0 ? idx : -ENODEV;
}

int sbx__rtnl_altname(struct rtnl *r, int ifindex, const char *alt)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm = put_link(&nlh, buf, RTM_NEWLINKPROP, NLM_F_CREATE | NLM_F_EXCL);
	ifm->ifi_index = ifindex;
	struct nlattr *l = mnl_attr_nest_start(nlh, IFLA_PROP_LIST);
	mnl_attr_put_strz(nlh, IFLA_ALT_IFNAME, alt);
	mnl_attr_nest_end(nlh, l);
	return talk(r, nlh, NULL, NULL);
}

int sbx__rtnl_addr(struct rtnl *r, int ifindex, uint32_t addr, int plen)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)ifindex;
	mnl_attr_put_u32(nlh, IFA_LOCAL, addr);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, addr);
	return talk(r, nlh, NULL, NULL);
}

int sbx__rtnl_up(struct rtnl *r, int ifindex)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	/* Before the link goes up, which is when the kernel would make the
	 * address; a kernel without IPv6 refuses and needs nothing. */
	if (ifindex != 1) {
		ifm = put_link(&nlh, buf, RTM_NEWLINK, 0);
		ifm->ifi_index = ifindex;
		put_no_ipv6(nlh);
		(void)talk(r, nlh, NULL, NULL);
	}
	ifm = put_link(&nlh, buf, RTM_NEWLINK, 0);
	ifm->ifi_index = ifindex;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return talk(r, nlh, NULL, NULL);
}

int sbx__rtnl_default_route(struct rtnl *r, int ifindex, uint32_t gw)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, gw);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	return talk(r, nlh, NULL, NULL);
}

int sbx__rtnl_del(struct rtnl *r, const char *name)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	put_link(&nlh, buf, RTM_DELLINK, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return talk(r, nlh, NULL, NULL);
}
