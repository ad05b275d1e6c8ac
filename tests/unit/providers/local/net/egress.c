/* SPDX-License-Identifier: MIT */
/* Egress plans: CIDR parsing, list validation, nameservers, resolv.conf. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sbx.h>

#include "providers/local/net/net.h"
#include "providers/local/net/net_int.h"

static uint32_t ip(const char *s)
{
	struct in_addr a;
	cr_assert_eq(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

Test(net_egress, cidr)
{
	struct net_cidr c;
	cr_assert_eq(sbx__net_parse_cidr(&c, "10.1.2.3/8"), 0);
	cr_assert_eq(c.addr, ip("10.0.0.0"), "host bits are masked off");
	cr_assert_eq(c.plen, 8);
	cr_assert_eq(sbx__net_parse_cidr(&c, "1.2.3.4"), 0);
	cr_assert_eq(c.plen, 32);
	cr_assert_eq(sbx__net_parse_cidr(&c, "0.0.0.0/0"), 0);
	cr_assert_eq(c.addr, 0);
	const char *bad[] = { "", "1.2.3", "1.2.3.4/33", "1.2.3.4/", "1.2.3.4/x", "::1", "a.b.c.d", "1.2.3.4/8/8" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_lt(sbx__net_parse_cidr(&c, bad[i]), 0, "'%s' accepted", bad[i]);
}

Test(net_egress, lists)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	const char *allow[] = { "192.0.2.0/24", "192.0.2.7", "192.0.2.0/24", NULL };
	o.allow_out = allow;
	struct net_plan p = { 0 };
	cr_assert_eq(sbx__net_plan_lists(&p, &o, NULL), 0);
	cr_assert_eq(p.n_allow, 2, "duplicates are dropped");
	cr_assert(p.allow_only, "allow_out alone means only these");
	sbx__net_plan_clear(&p);
	const char *deny[] = { "0.0.0.0/0", NULL };
	o.deny_out = deny;
	cr_assert_eq(sbx__net_plan_lists(&p, &o, NULL), 0);
	cr_assert_not(p.allow_only, "with deny_out, allow entries only win over it");
	sbx__net_plan_clear(&p);

	/* Hostnames resolve on the host, now, to /32 entries. */
	const char *names[] = { "localhost", NULL };
	o.allow_out = names;
	o.deny_out = NULL;
	cr_assert_eq(sbx__net_plan_lists(&p, &o, NULL), 0);
	cr_assert_eq(p.n_allow, 1);
	cr_assert_eq(p.allow[0].addr, ip("127.0.0.1"));
	cr_assert_eq(p.allow[0].plen, 32);
	sbx__net_plan_clear(&p);

	const char *numeric[] = { "1.2.3", NULL };
	o.allow_out = numeric;
	cr_assert_eq(sbx__net_plan_lists(&p, &o, NULL), -EINVAL, "a short numeric address is not a hostname");
	sbx__net_plan_clear(&p);

	const char *bad[] = { "192.0.2.1", "x y", NULL };
	o.allow_out = bad;
	sbx_error *err = NULL;
	cr_assert_eq(sbx__net_plan_lists(&p, &o, &err), -EINVAL);
	cr_assert(strstr(err->msg, "allow_out[1]") && strstr(err->msg, "'x y'"), "%s", err->msg);
	sbx_error_free(err);
	sbx__net_plan_clear(&p);
	const char *v6[] = { "2001:db8::1", NULL };
	o.allow_out = NULL;
	o.deny_out = v6;
	err = NULL;
	cr_assert_eq(sbx__net_plan_lists(&p, &o, &err), -EINVAL);
	cr_assert(strstr(err->msg, "deny_out[0]") && strstr(err->msg, "IPv6"), "%s", err->msg);
	sbx_error_free(err);
	sbx__net_plan_clear(&p);
}

Test(net_egress, nameservers_and_resolv_conf)
{
	setenv("SBX_NET_DNS", "192.0.2.53, 198.51.100.53,junk", 1);
	uint32_t ns[8];
	cr_assert_eq(sbx__net_nameservers(ns, 8), 2);
	cr_assert_eq(ns[0], ip("192.0.2.53"));
	char *r = sbx__net_resolv_conf();
	cr_assert_str_eq(r, "nameserver 192.0.2.53\nnameserver 198.51.100.53\n");
	free(r);
	unsetenv("SBX_NET_DNS");
}

Test(net_egress, pool)
{
	struct net_cidr c;
	unsetenv("SBX_NET_POOL");
	cr_assert_eq(sbx__net_pool(&c, NULL), 0);
	cr_assert_eq(c.addr, ip("100.96.0.0"));
	cr_assert_eq(c.plen, 12);
	setenv("SBX_NET_POOL", "10.200.0.0/30", 1);
	sbx_error *err = NULL;
	cr_assert_eq(sbx__net_pool(&c, &err), -EINVAL);
	cr_assert(strstr(err->msg, "SBX_NET_POOL"), "%s", err->msg);
	sbx_error_free(err);
	unsetenv("SBX_NET_POOL");
}

#include <libnftnl/rule.h>

/* Index of the first rule of l whose text has both needles, or -1. */
static long rule_with(const struct nft_rules *l, const char *a, const char *b)
{
	char buf[4096];
	for (size_t i = 0; i < l->n; i++) {
		nftnl_rule_snprintf(buf, sizeof(buf), l->v[i], NFTNL_OUTPUT_DEFAULT, 0);
		if (strstr(buf, a) && strstr(buf, b))
			return (long)i;
	}
	return -1;
}

/* SBX_NET_DENY_PRIVATE=1 is the operator's: an egress list (which an API
 * client of sbx serve chooses) must not open a private range past it. */
Test(net_egress, deny_private_comes_before_the_lists)
{
	struct net_cidr allow[] = { { ip("10.1.2.3"), 32 }, { ip("192.168.0.0"), 16 } };
	struct net_plan p = { 0 };
	p.allow = allow;
	p.n_allow = 2;
	p.deny_private = 1;
	struct nft_rules l = { 0 };
	sbx__nft_sandbox_rules(&l, "x", &p);
	long drop10 = rule_with(&l, "0x0000000a", "drop"), drop192 = rule_with(&l, "0x0000a8c0", "drop");
	long acc10 = rule_with(&l, "0x0302010a", "accept"), acc192 = rule_with(&l, "0x0000a8c0", "accept");
	cr_assert(drop10 >= 0 && drop192 >= 0 && acc10 >= 0 && acc192 >= 0, "%ld %ld %ld %ld", drop10, drop192, acc10,
		  acc192);
	cr_assert_lt(drop10, acc10, "allow_out 10.1.2.3 is accepted before 10/8 is dropped");
	cr_assert_lt(drop192, acc192, "allow_out 192.168/16 is accepted before it is dropped");
	p.allow = NULL; /* not ours to free */
	p.n_allow = 0;
	sbx__nft_rules_free(&l);
}
