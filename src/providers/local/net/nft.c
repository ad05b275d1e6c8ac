/* SPDX-License-Identifier: MIT */
/*
 * nftables over libnftnl: table `inet sbx` is made once per host (the first
 * create that finds it missing makes it in one transaction with
 * NLM_F_EXCL, so concurrent creators make it once; every create looks it
 * up), then a sandbox with egress lists adds chain sb_<id> and its element
 * of map @sandboxes in one transaction and removes both in one at destroy;
 * its nameservers go into @dns once per process. The rules are in rules.c.
 */
#include <errno.h>
#include <stdio.h> /* libnftnl headers need FILE */
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "../../../util/alloc.h"
#include "../../../util/cleanup.h"
#include "net_int.h"

#define MAP_ID 1
#define DNS_ID 2
#define BATCH_MAX (256 * 1024)
/* In the table's userdata: a table made by a version with other base rules
 * is refused rather than mixed with (its sandboxes still rely on it). */
#define TABLE_VERSION "sbx-net 2"

struct batch {
	struct mnl_nlmsg_batch *b;
	char *buf;
	uint32_t seq;
	unsigned n;         /* requests that expect an ack */
	int overflow;
};

static void batch_init(struct batch *bt)
{
	bt->buf = xmalloc(BATCH_MAX);
	bt->b = mnl_nlmsg_batch_start(bt->buf, BATCH_MAX - 4096);
	bt->seq = (uint32_t)time(NULL);
	bt->n = 0;
	bt->overflow = 0;
	nftnl_batch_begin(mnl_nlmsg_batch_current(bt->b), bt->seq++);
	mnl_nlmsg_batch_next(bt->b);
}

static void batch_free(struct batch *bt)
{
	mnl_nlmsg_batch_stop(bt->b);
	free(bt->buf);
}

static struct nlmsghdr *batch_msg(struct batch *bt, uint16_t type, uint16_t flags)
{
	bt->n++;
	return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET, flags | NLM_F_ACK,
				     bt->seq++);
}

static void batch_next(struct batch *bt)
{
	if (!mnl_nlmsg_batch_next(bt->b))
		bt->overflow = 1;
}

static struct mnl_socket *nf_open(void)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nl)
		return NULL;
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/* Sends the batch and reads one ack per request: 0 or the first error. */
static int commit(struct batch *bt)
{
	if (bt->overflow)
		return -E2BIG;
	nftnl_batch_end(mnl_nlmsg_batch_current(bt->b), bt->seq++);
	mnl_nlmsg_batch_next(bt->b);
	struct mnl_socket *nl = nf_open();
	if (!nl)
		return -errno;
	int r = 0;
	if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(bt->b), mnl_nlmsg_batch_size(bt->b)) < 0) {
		r = -errno;
		goto out;
	}
	char buf[16384];
	for (unsigned acked = 0; acked < bt->n;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0) {
			r = r ? r : errno == EAGAIN ? -ETIMEDOUT : -errno;
			break;
		}
		int len = (int)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len); h = mnl_nlmsg_next(h, &len)) {
			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
			if (e->error && !r)
				r = e->error;
			acked++;
		}
		/* A failed batch is aborted whole; its remaining acks may not come. */
		if (r)
			break;
	}
out:
	mnl_socket_close(nl);
	return r;
}

static void add_chain(struct batch *bt, const char *name, const char *type, int hook, int prio)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		abort();
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NET_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	if (type) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	batch_next(bt);
	nftnl_chain_free(c);
}

static void add_rules(struct batch *bt, struct nft_rules *l)
{
	for (size_t i = 0; i < l->n; i++) {
		struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
		nftnl_rule_nlmsg_build_payload(nlh, l->v[i]);
		batch_next(bt);
	}
}

static void add_set(struct batch *bt, const char *name, uint32_t set_id, uint32_t flags, uint32_t key_type,
		    uint32_t key_len)
{
	struct nftnl_set *s = nftnl_set_alloc();
	if (!s)
		abort();
	nftnl_set_set_str(s, NFTNL_SET_TABLE, NET_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_ID, set_id);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type); /* only for `nft list` */
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len);
	if (flags & NFT_SET_MAP)
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
	struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWSET, NLM_F_CREATE);
	nftnl_set_nlmsg_build_payload(nlh, s);
	batch_next(bt);
	nftnl_set_free(s);
}

/* The table, its chains, the sets and the base rules, unless the table
 * exists: 0 made, 1 there already. */
static int make_table(void)
{
	struct batch bt;
	batch_init(&bt);
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		abort();
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, NET_TABLE);
	nftnl_table_set_data(t, NFTNL_TABLE_USERDATA, TABLE_VERSION, sizeof(TABLE_VERSION));
	struct nlmsghdr *nlh = batch_msg(&bt, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
	nftnl_table_nlmsg_build_payload(nlh, t);
	batch_next(&bt);
	nftnl_table_free(t);
	add_chain(&bt, "input", "filter", NF_INET_LOCAL_IN, 0);
	add_chain(&bt, "forward", "filter", NF_INET_FORWARD, 0);
	add_chain(&bt, "postrouting", "nat", NF_INET_POST_ROUTING, 100);
	add_chain(&bt, "from_sb", NULL, 0, 0);
	add_set(&bt, "sandboxes", MAP_ID, NFT_SET_MAP, 41 /* nft's ifname type */, IFNAMSIZ);
	add_set(&bt, "dns", DNS_ID, 0, 7 /* nft's ipv4_addr type */, 4);
	struct nft_rules l = { 0 };
	sbx__nft_base_rules(&l, MAP_ID, DNS_ID);
	add_rules(&bt, &l);
	sbx__nft_rules_free(&l);
	int r = commit(&bt);
	batch_free(&bt);
	return r == -EEXIST ? 1 : r;
}

struct table_info {
	int ours;           /* made by this version */
	uint64_t handle;    /* changes when the table is made again */
};

static int table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct table_info *ti = data;
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		abort();
	if (nftnl_table_nlmsg_parse(nlh, t) == 0) {
		uint32_t len = 0;
		const void *ud = nftnl_table_get_data(t, NFTNL_TABLE_USERDATA, &len);
		ti->ours = ud && len == sizeof(TABLE_VERSION) && !memcmp(ud, TABLE_VERSION, len);
		ti->handle = nftnl_table_get_u64(t, NFTNL_TABLE_HANDLE);
	}
	nftnl_table_free(t);
	return MNL_CB_OK;
}

/* One request and its replies: cb sees each. 0 or -errno. */
static int query(struct nlmsghdr *nlh, uint32_t seq, mnl_cb_t cb, void *data)
{
	struct mnl_socket *nl = nf_open();
	if (!nl)
		return -errno;
	char buf[MNL_SOCKET_BUFFER_SIZE];
	int r = 0;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		r = -errno;
	while (r == 0) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0) {
			r = errno == EAGAIN ? -ETIMEDOUT : -errno;
			break;
		}
		int ret = mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl), cb, data);
		if (ret < 0)
			r = -errno;
		if (ret <= MNL_CB_STOP)
			break;
	}
	mnl_socket_close(nl);
	return r;
}

/* 0 and what the table is, or -ENOENT when there is none. */
static int table_query(struct table_info *ti)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		abort();
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, NET_TABLE);
	uint32_t seq = (uint32_t)time(NULL);
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK, seq);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	memset(ti, 0, sizeof(*ti));
	return query(nlh, seq, table_cb, ti);
}

static struct nftnl_set *map_with(const char *id, int with_verdict)
{
	struct nftnl_set *s = nftnl_set_alloc();
	struct nftnl_set_elem *e = nftnl_set_elem_alloc();
	if (!s || !e)
		abort();
	nftnl_set_set_str(s, NFTNL_SET_TABLE, NET_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, "sandboxes");
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	char key[IFNAMSIZ] = { 0 };
	snprintf(key, sizeof(key), NET_IF_PREFIX "%s", id);
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, sizeof(key));
	if (with_verdict) {
		char chain[32];
		snprintf(chain, sizeof(chain), "sb_%s", id);
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NFT_JUMP);
		nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
	}
	nftnl_set_elem_add(s, e);
	return s;
}

/* Nameservers this process has put in @dns of the table with this handle
 * (elements are never removed: the set only ever opens port 53 of
 * resolvers the host configured). */
static pthread_mutex_t dns_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t dns_known[16];
static size_t n_dns_known;
static uint64_t dns_table;

static int dns_is_known(uint32_t a)
{
	for (size_t i = 0; i < n_dns_known; i++)
		if (dns_known[i] == a)
			return 1;
	return 0;
}

static int add_sandbox_once(const char *id, const struct net_plan *p)
{
	struct batch bt;
	batch_init(&bt);
	pthread_mutex_lock(&dns_lock);
	struct nftnl_set *ds = NULL;
	for (size_t i = 0; i < p->n_dns; i++) {
		if (dns_is_known(p->dns[i]))
			continue;
		if (!ds) {
			ds = nftnl_set_alloc();
			if (!ds)
				abort();
			nftnl_set_set_str(ds, NFTNL_SET_TABLE, NET_TABLE);
			nftnl_set_set_str(ds, NFTNL_SET_NAME, "dns");
			nftnl_set_set_u32(ds, NFTNL_SET_FAMILY, NFPROTO_INET);
		}
		struct nftnl_set_elem *e = nftnl_set_elem_alloc();
		if (!e)
			abort();
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &p->dns[i], 4);
		nftnl_set_elem_add(ds, e);
	}
	pthread_mutex_unlock(&dns_lock);
	if (ds) {
		struct nlmsghdr *nlh = batch_msg(&bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
		nftnl_set_elems_nlmsg_build_payload(nlh, ds);
		batch_next(&bt);
		nftnl_set_free(ds);
	}
	if (sbx__nft_plan_needs_chain(p)) {
		char chain[32];
		snprintf(chain, sizeof(chain), "sb_%s", id);
		add_chain(&bt, chain, NULL, 0, 0);
		struct nft_rules l = { 0 };
		sbx__nft_sandbox_rules(&l, id, p);
		add_rules(&bt, &l);
		sbx__nft_rules_free(&l);
		struct nftnl_set *s = map_with(id, 1);
		struct nlmsghdr *nlh = batch_msg(&bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		batch_next(&bt);
		nftnl_set_free(s);
	}
	int r = bt.n ? commit(&bt) : 0;
	batch_free(&bt);
	if (r == 0 && ds) {
		pthread_mutex_lock(&dns_lock);
		for (size_t i = 0; i < p->n_dns; i++)
			if (!dns_is_known(p->dns[i]) && n_dns_known < SBX_ARRAY_SIZE(dns_known))
				dns_known[n_dns_known++] = p->dns[i];
		pthread_mutex_unlock(&dns_lock);
	}
	return r;
}

int sbx__nft_add_sandbox(const char *id, const struct net_plan *p, sbx_error **err)
{
	/* The table is looked up at every create (one netlink round trip): a
	 * table someone deleted must not leave a new sandbox unfiltered. */
	int r = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		struct table_info ti;
		r = table_query(&ti);
		if (r == -ENOENT) {
			if ((r = make_table()) < 0)
				return sbx_error_setsys(err, r, -r, "nftables: create table inet %s", NET_TABLE);
			continue;
		}
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "nftables: read table inet %s", NET_TABLE);
		if (!ti.ours)
			return sbx_error_set(err, -EEXIST,
					     "nftables: table inet %s was made by another sbx version (want '%s'); when "
					     "no internet sandbox runs, remove it: nft delete table inet %s",
					     NET_TABLE, TABLE_VERSION, NET_TABLE);
		pthread_mutex_lock(&dns_lock);
		if (ti.handle != dns_table) {
			n_dns_known = 0;
			dns_table = ti.handle;
		}
		pthread_mutex_unlock(&dns_lock);
		r = add_sandbox_once(id, p);
		if (r != -ENOENT)
			break;
	}
	if (r == -E2BIG)
		return sbx_error_set(err, -E2BIG, "sandbox %s: too many egress rules (at most %d)", id, NET_MAX_RULES);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "nftables: add the rules of sandbox %s", id);
	return 0;
}

static int chain_cb(const struct nlmsghdr *nlh, void *data)
{
	(void)nlh;
	*(int *)data = 1;
	return MNL_CB_OK;
}

int sbx__nft_has_sandbox(const char *id)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		abort();
	char chain[32];
	snprintf(chain, sizeof(chain), "sb_%s", id);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NET_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
	uint32_t seq = (uint32_t)time(NULL);
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETCHAIN, NFPROTO_INET, NLM_F_ACK, seq);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	nftnl_chain_free(c);
	int found = 0;
	int r = query(nlh, seq, chain_cb, &found);
	if (r == -ENOENT)
		return 0;
	return r < 0 ? r : found;
}

int sbx__nft_del_sandbox(const char *id, sbx_error **err)
{
	int has = sbx__nft_has_sandbox(id);
	if (has == 0)
		return 1;
	if (has < 0)
		return sbx_error_setsys(err, has, -has, "nftables: look up the rules of sandbox %s", id);
	/* One transaction, as the add was: the element (it refers to the
	 * chain), the chain's rules (a chain with rules cannot go), the chain.
	 * Each transaction that deletes costs an RCU grace period. */
	struct batch bt;
	batch_init(&bt);
	struct nftnl_set *s = map_with(id, 0);
	struct nlmsghdr *nlh = batch_msg(&bt, NFT_MSG_DELSETELEM, 0);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	batch_next(&bt);
	nftnl_set_free(s);
	char chain[32];
	snprintf(chain, sizeof(chain), "sb_%s", id);
	struct nftnl_rule *rl = nftnl_rule_alloc();
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!rl || !c)
		abort();
	nftnl_rule_set_u32(rl, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(rl, NFTNL_RULE_TABLE, NET_TABLE);
	nftnl_rule_set_str(rl, NFTNL_RULE_CHAIN, chain);
	nlh = batch_msg(&bt, NFT_MSG_DELRULE, 0);
	nftnl_rule_nlmsg_build_payload(nlh, rl);
	batch_next(&bt);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NET_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
	nlh = batch_msg(&bt, NFT_MSG_DELCHAIN, 0);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	batch_next(&bt);
	nftnl_rule_free(rl);
	nftnl_chain_free(c);
	int r = commit(&bt);
	batch_free(&bt);
	if (r == -ENOENT)
		return 1;
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "nftables: remove chain %s", chain);
	return 0;
}

/* Replaces what chain sb_<id> enforces, in one transaction: the chain's
 * rules flushed and the new ones added (or the chain made and hooked into
 * @sandboxes, or removed when the plan needs none), so no packet is judged
 * by neither list. */
int sbx__nft_set_sandbox(const char *id, const struct net_plan *p, sbx_error **err)
{
	int has = sbx__nft_has_sandbox(id);
	if (has < 0)
		return sbx_error_setsys(err, has, -has, "nftables: look up the rules of sandbox %s", id);
	if (!sbx__nft_plan_needs_chain(p)) {
		int r = has ? sbx__nft_del_sandbox(id, err) : 0;
		return r < 0 ? r : 0;
	}
	struct batch bt;
	batch_init(&bt);
	char chain[32];
	snprintf(chain, sizeof(chain), "sb_%s", id);
	if (has) {
		struct nftnl_rule *rl = nftnl_rule_alloc();
		if (!rl)
			abort();
		nftnl_rule_set_u32(rl, NFTNL_RULE_FAMILY, NFPROTO_INET);
		nftnl_rule_set_str(rl, NFTNL_RULE_TABLE, NET_TABLE);
		nftnl_rule_set_str(rl, NFTNL_RULE_CHAIN, chain);
		struct nlmsghdr *nlh = batch_msg(&bt, NFT_MSG_DELRULE, 0);
		nftnl_rule_nlmsg_build_payload(nlh, rl);
		batch_next(&bt);
		nftnl_rule_free(rl);
	} else {
		add_chain(&bt, chain, NULL, 0, 0);
	}
	struct nft_rules l = { 0 };
	sbx__nft_sandbox_rules(&l, id, p);
	add_rules(&bt, &l);
	sbx__nft_rules_free(&l);
	if (!has) {
		struct nftnl_set *s = map_with(id, 1);
		struct nlmsghdr *nlh = batch_msg(&bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE | NLM_F_EXCL);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		batch_next(&bt);
		nftnl_set_free(s);
	}
	int r = commit(&bt);
	batch_free(&bt);
	if (r == -E2BIG)
		return sbx_error_set(err, -E2BIG, "sandbox %s: too many egress rules (at most %d)", id, NET_MAX_RULES);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "nftables: replace the rules of sandbox %s", id);
	return 0;
}
