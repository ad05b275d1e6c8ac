/* SPDX-License-Identifier: MIT */
/*
 * The rules of table `inet sbx`, as libnftnl expressions (what `nft` would
 * compile them to). In nft syntax, the base chains are:
 *
 *   chain input       { type filter hook input priority 0;
 *                       iifname "sbx*" ct state established,related accept
 *                       iifname "sbx*" drop }
 *   chain forward     { type filter hook forward priority 0;
 *                       iifname "sbx*" jump from_sb
 *                       oifname "sbx*" ct state established,related accept
 *                       oifname "sbx*" drop }
 *   chain from_sb     { oifname "sbx*" drop                 # another sandbox
 *                       meta nfproto ipv6 drop
 *                       fib saddr . iif oif missing drop     # spoofed source
 *                       ip daddr @dns udp|tcp dport 53 accept
 *                       ip daddr { 0/8, 127/8, 169.254/16, 224/4, 240/4 } drop
 *                       iifname vmap @sandboxes             # egress lists
 *                       accept }
 *   chain postrouting { type nat hook postrouting priority 100;
 *                       iifname "sbx*" oifname != "sbx*" masquerade }
 *
 * A sandbox with egress lists (or SBX_NET_DENY_PRIVATE=1) also has chain
 * sb_<id>, reached through @sandboxes by its host end's name:
 *
 *   ip daddr <allow_out> accept ...
 *   ip daddr <deny_out> drop ...
 *   [drop]                                    # allow_out alone
 *   [ip daddr { 10/8, 172.16/12, 192.168/16, 100.64/10 } drop]
 *   accept
 *
 * A sandbox without lists has nothing of its own in the table: its create
 * and destroy touch no nftables object (removing one costs the kernel an
 * RCU grace period, tens of milliseconds on a small VM).
 *
 * Traffic from a sandbox to any host address (its host end, the host's
 * public ones, 127.0.0.1 through a crafted packet) is INPUT and dropped; to
 * another sandbox it is FORWARD out an sbx* link and dropped.
 */
#include <arpa/inet.h>
#include <stdio.h> /* libnftnl headers need FILE */
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "../../../util/alloc.h"
#include "net_int.h"

static struct nftnl_rule *rule(struct nft_rules *l, const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r)
		abort(); /* small allocation: the project's OOM policy */
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NET_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = r;
	return r;
}

static struct nftnl_expr *expr(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);
	if (!e)
		abort();
	nftnl_rule_add_expr(r, e);
	return e;
}

static void meta(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = expr(r, "meta");
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
}

static void cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = expr(r, "cmp");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
}

/* iifname/oifname "sbx*": a compare of the prefix only, as nft does. */
static void ifname_prefix(struct nftnl_rule *r, uint32_t key, uint32_t op)
{
	meta(r, key);
	cmp(r, op, NET_IF_PREFIX, sizeof(NET_IF_PREFIX) - 1);
}

static void payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
	struct nftnl_expr *e = expr(r, "payload");
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
}

static void mask(struct nftnl_rule *r, uint32_t m, uint32_t len)
{
	uint32_t zero = 0;
	struct nftnl_expr *e = expr(r, "bitwise");
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &m, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &zero, len);
}

static void verdict(struct nftnl_rule *r, int v, const char *chain)
{
	struct nftnl_expr *e = expr(r, "immediate");
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)v);
	if (chain)
		nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
}

static void ct_established(struct nftnl_rule *r)
{
	struct nftnl_expr *e = expr(r, "ct");
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	mask(r, NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED), 4);
	uint32_t zero = 0;
	cmp(r, NFT_CMP_NEQ, &zero, 4);
}

/* ip daddr (or saddr) within c. */
static void ip_match(struct nftnl_rule *r, int src, const struct net_cidr *c, uint32_t op)
{
	payload(r, NFT_PAYLOAD_NETWORK_HEADER, src ? 12 : 16, 4);
	uint32_t m = c->plen ? htonl(~0u << (32 - c->plen)) : 0;
	if (c->plen < 32)
		mask(r, m, 4);
	uint32_t net = c->addr & m;
	cmp(r, op, &net, 4);
}

static void dns_rule(struct nft_rules *l, uint32_t dns_id, uint8_t proto)
{
	struct nftnl_rule *r = rule(l, "from_sb");
	payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4);
	struct nftnl_expr *e = expr(r, "lookup");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, "dns");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, dns_id);
	meta(r, NFT_META_L4PROTO);
	cmp(r, NFT_CMP_EQ, &proto, 1);
	payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
	uint16_t port = htons(53);
	cmp(r, NFT_CMP_EQ, &port, 2);
	verdict(r, NF_ACCEPT, NULL);
}

static void cidr_rule(struct nft_rules *l, const char *chain, uint32_t addr, uint8_t plen, int v)
{
	struct nftnl_rule *r = rule(l, chain);
	struct net_cidr c = { addr, plen };
	ip_match(r, 0, &c, NFT_CMP_EQ);
	verdict(r, v, NULL);
}

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return htonl(a << 24 | b << 16 | c << 8 | d);
}

void sbx__nft_base_rules(struct nft_rules *l, uint32_t map_id, uint32_t dns_id)
{
	struct nftnl_rule *r;
	r = rule(l, "input");
	ifname_prefix(r, NFT_META_IIFNAME, NFT_CMP_EQ);
	ct_established(r);
	verdict(r, NF_ACCEPT, NULL);
	r = rule(l, "input");
	ifname_prefix(r, NFT_META_IIFNAME, NFT_CMP_EQ);
	verdict(r, NF_DROP, NULL);

	r = rule(l, "forward");
	ifname_prefix(r, NFT_META_IIFNAME, NFT_CMP_EQ);
	verdict(r, NFT_JUMP, "from_sb");
	r = rule(l, "forward");
	ifname_prefix(r, NFT_META_OIFNAME, NFT_CMP_EQ);
	ct_established(r);
	verdict(r, NF_ACCEPT, NULL);
	r = rule(l, "forward");
	ifname_prefix(r, NFT_META_OIFNAME, NFT_CMP_EQ);
	verdict(r, NF_DROP, NULL);

	r = rule(l, "from_sb");
	ifname_prefix(r, NFT_META_OIFNAME, NFT_CMP_EQ);
	verdict(r, NF_DROP, NULL);
	r = rule(l, "from_sb");
	meta(r, NFT_META_NFPROTO);
	uint8_t v6 = NFPROTO_IPV6;
	cmp(r, NFT_CMP_EQ, &v6, 1);
	verdict(r, NF_DROP, NULL);
	/* Strict reverse-path check: the source must route back out the link
	 * it came in on, which only the sandbox's own /31 does. */
	r = rule(l, "from_sb");
	struct nftnl_expr *e = expr(r, "fib");
	nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_SADDR | NFTA_FIB_F_IIF);
	nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_OIF);
	nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
	uint32_t zero = 0;
	cmp(r, NFT_CMP_EQ, &zero, 4);
	verdict(r, NF_DROP, NULL);
	dns_rule(l, dns_id, IPPROTO_UDP);
	dns_rule(l, dns_id, IPPROTO_TCP);
	/* Never reachable, whatever the lists say: "this network", loopback,
	 * link-local (cloud metadata), multicast, reserved and broadcast. */
	cidr_rule(l, "from_sb", ip4(0, 0, 0, 0), 8, NF_DROP);
	cidr_rule(l, "from_sb", ip4(127, 0, 0, 0), 8, NF_DROP);
	cidr_rule(l, "from_sb", ip4(169, 254, 0, 0), 16, NF_DROP);
	cidr_rule(l, "from_sb", ip4(224, 0, 0, 0), 4, NF_DROP);
	cidr_rule(l, "from_sb", ip4(240, 0, 0, 0), 4, NF_DROP);
	r = rule(l, "from_sb");
	meta(r, NFT_META_IIFNAME);
	e = expr(r, "lookup");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, "sandboxes");
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, map_id);
	r = rule(l, "from_sb");
	verdict(r, NF_ACCEPT, NULL);

	r = rule(l, "postrouting");
	ifname_prefix(r, NFT_META_IIFNAME, NFT_CMP_EQ);
	ifname_prefix(r, NFT_META_OIFNAME, NFT_CMP_NEQ);
	expr(r, "masq");
}

int sbx__nft_plan_needs_chain(const struct net_plan *p)
{
	return p->n_allow || p->n_deny || p->allow_only || p->deny_private;
}

void sbx__nft_sandbox_rules(struct nft_rules *l, const char *id, const struct net_plan *p)
{
	char chain[32];
	snprintf(chain, sizeof(chain), "sb_%s", id);
	/* The operator's private-range block comes first: the lists are the
	 * sandbox creator's (an API client of sbx serve), and no allow entry
	 * may open what the host's operator closed. */
	if (p->deny_private) {
		cidr_rule(l, chain, ip4(10, 0, 0, 0), 8, NF_DROP);
		cidr_rule(l, chain, ip4(172, 16, 0, 0), 12, NF_DROP);
		cidr_rule(l, chain, ip4(192, 168, 0, 0), 16, NF_DROP);
		cidr_rule(l, chain, ip4(100, 64, 0, 0), 10, NF_DROP);
	}
	for (size_t i = 0; i < p->n_allow; i++)
		cidr_rule(l, chain, p->allow[i].addr, p->allow[i].plen, NF_ACCEPT);
	for (size_t i = 0; i < p->n_deny; i++)
		cidr_rule(l, chain, p->deny[i].addr, p->deny[i].plen, NF_DROP);
	struct nftnl_rule *r;
	if (p->allow_only) {
		r = rule(l, chain);
		verdict(r, NF_DROP, NULL);
	}
	r = rule(l, chain);
	verdict(r, NF_ACCEPT, NULL);
}

void sbx__nft_rules_free(struct nft_rules *l)
{
	for (size_t i = 0; i < l->n; i++)
		nftnl_rule_free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}
