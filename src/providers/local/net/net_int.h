/* SPDX-License-Identifier: MIT */
/* Private to src/providers/local/net/: rtnetlink, nftables and egress plans. */
#ifndef SBX_LOCAL_NET_INT_H
#define SBX_LOCAL_NET_INT_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/spec.h>
#include <sbx/sys/provider.h>

#define NET_TABLE "sbx"
#define NET_IF_PREFIX "sbx"   /* host ends: sbx<id>, 15 bytes with a 12-digit id */
#define NET_MAX_RULES 512     /* resolved allow + deny entries per sandbox */

/* An IPv4 prefix; addresses in network byte order. */
struct net_cidr {
	uint32_t addr;
	uint8_t plen;
};

/* What the per-sandbox chain enforces. */
struct net_plan {
	uint32_t host_addr, sb_addr;    /* the /31 pair (the chain checks the source by fib) */
	struct net_cidr *allow, *deny;  /* owned */
	size_t n_allow, n_deny;
	uint32_t *dns;                  /* nameservers the sandbox may always ask (port 53) */
	size_t n_dns;
	int allow_only;                 /* allow_out given without deny_out: drop the rest */
	int deny_private;               /* SBX_NET_DENY_PRIVATE=1 */
};
void sbx__net_plan_clear(struct net_plan *p);

/* egress.c: allow_out/deny_out -> prefixes (hostnames resolved now). */
int sbx__net_plan_lists(struct net_plan *p, const sbx_sandbox_opts *o, sbx_error **err);
/* The pool (SBX_NET_POOL, default 100.96.0.0/12). */
int sbx__net_pool(struct net_cidr *out, sbx_error **err);
/* Usable IPv4 nameservers for sandboxes (SBX_NET_DNS, else the host's
 * resolv.conf without loopback ones, else systemd-resolved's upstream list). */
size_t sbx__net_nameservers(uint32_t *out, size_t max);
int sbx__net_parse_cidr(struct net_cidr *out, const char *s);

/* rtnl.c: links, addresses and routes over rtnetlink (libmnl). */
struct rtnl;
/* netns_fd -1: this thread's namespace. */
int sbx__rtnl_open(struct rtnl **out, int netns_fd);
void sbx__rtnl_close(struct rtnl *r);
int sbx__rtnl_veth(struct rtnl *r, const char *host, const char *peer, int peer_netns_fd);
int sbx__rtnl_index(struct rtnl *r, const char *name);
int sbx__rtnl_altname(struct rtnl *r, int ifindex, const char *alt);
int sbx__rtnl_addr(struct rtnl *r, int ifindex, uint32_t addr, int plen);
int sbx__rtnl_up(struct rtnl *r, int ifindex);
int sbx__rtnl_default_route(struct rtnl *r, int ifindex, uint32_t gw);
/* -ENODEV when there is no such link. */
int sbx__rtnl_del(struct rtnl *r, const char *name);

/* nft.c: the `inet sbx` table (made once per host) and per-sandbox chains. */
int sbx__nft_add_sandbox(const char *id, const struct net_plan *p, sbx_error **err);
/* 0 removed, 1 nothing to remove, <0 error. */
int sbx__nft_del_sandbox(const char *id, sbx_error **err);
/* Replaces the sandbox's chain (made, flushed and refilled, or removed) in
 * one transaction. */
int sbx__nft_set_sandbox(const char *id, const struct net_plan *p, sbx_error **err);
/* 1 if chain sb_<id> exists. */
int sbx__nft_has_sandbox(const char *id);

/* rules.c: the rules of the base chains and of a sandbox's chain, appended
 * to a list (the caller frees them with nftnl_rule_free). */
struct nftnl_rule;
struct nft_rules {
	struct nftnl_rule **v;
	size_t n;
};
void sbx__nft_base_rules(struct nft_rules *l, uint32_t map_id, uint32_t dns_id);
/* Whether the plan needs a chain of its own (egress lists, private ranges). */
int sbx__nft_plan_needs_chain(const struct net_plan *p);
void sbx__nft_sandbox_rules(struct nft_rules *l, const char *id, const struct net_plan *p);
void sbx__nft_rules_free(struct nft_rules *l);

#endif
