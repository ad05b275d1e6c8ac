/* SPDX-License-Identifier: MIT */
/*
 * E2B's egress lists through `sbx serve` (src/server/network.c):
 * `network.allowOut` / `denyOut` at create and `PUT /sandboxes/{id}/network`
 * reach the sandbox's nftables chain (what the chain then lets through is
 * proven against a fake internet in security/network.c,
 * egress_lists_change_while_running), are reported by GET, survive nothing
 * they should not, and bad lists are refused with the field named.
 */
#include "server_harness.h"
#include "providers/local/net/net_int.h"

TestSuite(egress, .init = suite_init, .fini = fini, .timeout = 600);

static void start(int internet)
{
	const char *with[] = { "--allow-internet", NULL };
	srv_start(&S, internet ? with : NULL, 0);
}

static long put_network(const struct sbref *s, const char *json)
{
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s/network", s->id);
	struct resp r = api("PUT", p, json, 30000);
	long st = r.status;
	if (st != 204)
		fprintf(stderr, "PUT network %s -> %ld %s\n", json, st, r.body);
	free(r.body);
	return st;
}

/* network.allowOut / denyOut of GET /sandboxes/{id}, as compact JSON. */
static void lists(const struct sbref *s, char *allow, char *deny, size_t len)
{
	long st = 0;
	json_t *d = detail(s, &st);
	cr_assert_eq(st, 200);
	json_t *net = json_object_get(d, "network");
	char *a = json_dumps(json_object_get(net, "allowOut"), JSON_COMPACT | JSON_ENCODE_ANY);
	char *n = json_dumps(json_object_get(net, "denyOut"), JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(allow, len, "%s", a ? a : "-");
	snprintf(deny, len, "%s", n ? n : "-");
	free(a);
	free(n);
	json_decref(d);
}

Test(egress, lists_reach_the_chain_and_change_while_running)
{
	start(1);
	struct sbref s;
	cr_assert_eq(create_sb(&s, "{\"templateID\":\"base\",\"network\":{\"allowOut\":[\"192.0.2.7\"],"
				   "\"denyOut\":[\"0.0.0.0/0\"]}}"),
		     201);
	char a[256], d[256];
	lists(&s, a, d, sizeof(a));
	cr_assert_str_eq(a, "[\"192.0.2.7\"]");
	cr_assert_str_eq(d, "[\"0.0.0.0/0\"]");
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 1, "the create's lists made no chain");
	/* replace: "omitting a field clears it" */
	cr_assert_eq(put_network(&s, "{\"denyOut\":[\"198.51.100.0/24\"]}"), 204);
	lists(&s, a, d, sizeof(a));
	cr_assert_str_eq(a, "-");
	cr_assert_str_eq(d, "[\"198.51.100.0/24\"]");
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 1);
	/* nothing: no restriction, no chain */
	cr_assert_eq(put_network(&s, "{}"), 204);
	lists(&s, a, d, sizeof(a));
	cr_assert_str_eq(a, "-");
	cr_assert_str_eq(d, "-");
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 0, "an unrestricted sandbox keeps a chain");
	/* allow_internet_access: false is denyOut 0.0.0.0/0 */
	cr_assert_eq(put_network(&s, "{\"allow_internet_access\":false}"), 204);
	lists(&s, a, d, sizeof(a));
	cr_assert_str_eq(d, "[\"0.0.0.0/0\"]");
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 1);
	/* bad input: 400 naming the field, the lists in force unchanged */
	const char *bad[][2] = {
		{ "{\"denyOut\":[\"example.com\"]}", "denyOut[0]" },
		{ "{\"allowOut\":\"1.2.3.4\"}", "allowOut" },
		{ "{\"allowOut\":[\"\"]}", "allowOut[0]" },
		{ "{\"allowOut\":[\"10.0.0.0/33\"]}", "10.0.0.0/33" },
		{ "{\"egressProxy\":{\"address\":\"p:1080\"}}", "egressProxy" },
		{ "{\"rules\":{\"api.example.com\":[{}]}}", "rules" },
		{ "{\"allow_internet_access\":\"no\"}", "allow_internet_access" },
	};
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s/network", s.id);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct resp r = api("PUT", p, bad[i][0], 30000);
		cr_assert_eq(r.status, 400, "%s -> %ld %s", bad[i][0], r.status, r.body);
		cr_assert(strstr(r.body, bad[i][1]), "%s: the error should name %s: %s", bad[i][0], bad[i][1], r.body);
		free(r.body);
	}
	/* a name that does not resolve is the request's fault, not a missing
	 * sandbox: a 404 would read as SandboxNotFoundError in the SDKs */
	struct resp nx = api("PUT", p, "{\"allowOut\":[\"no-such-host.invalid\"]}", 60000);
	cr_assert_neq(nx.status, 404, "an unresolvable allowOut entry: %ld %s", nx.status, nx.body);
	cr_assert(nx.status == 400 || nx.status == 429, "%ld %s", nx.status, nx.body); /* 429: no resolver at all */
	cr_assert(strstr(nx.body, "no-such-host.invalid"), "%s", nx.body);
	free(nx.body);
	lists(&s, a, d, sizeof(a));
	cr_assert_str_eq(d, "[\"0.0.0.0/0\"]", "a refused update changed the lists");
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 1);
	/* a create with a bad list makes nothing */
	struct sbref x;
	cr_assert_eq(create_sb(&x, "{\"templateID\":\"base\",\"network\":{\"denyOut\":[\"*.example.com\"]}}"), 400);
	long cst = create_sb(&x, "{\"templateID\":\"base\",\"network\":{\"allowOut\":[\"no-such-host.invalid\"]}}");
	cr_assert(cst == 400 || cst == 429, "a create with an unresolvable allowOut entry: %ld", cst);
	/* unknown sandbox */
	struct resp r = api("PUT", "/sandboxes/nope/network", "{}", 30000);
	cr_assert_eq(r.status, 404);
	free(r.body);
	/* the chain goes with the sandbox */
	snprintf(p, sizeof(p), "/sandboxes/%s", s.id);
	r = api("DELETE", p, NULL, 30000);
	cr_assert_eq(r.status, 204);
	free(r.body);
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 0, "the chain outlived its sandbox");
	srv_stop(&S);
}

/* Without the internet network a sandbox reaches nothing: lists that only
 * restrict change nothing and are accepted; lists that would open something
 * are refused (the network mode is chosen at create). */
Test(egress, no_internet_sandbox_cannot_be_opened)
{
	start(0);
	struct sbref s;
	cr_assert_eq(create_sb(&s, "{\"templateID\":\"base\",\"network\":{\"denyOut\":[\"0.0.0.0/0\"]}}"), 201);
	char a[256], d[256];
	lists(&s, a, d, sizeof(a));
	cr_assert_str_eq(d, "[\"0.0.0.0/0\"]");
	cr_assert_eq(sbx__nft_has_sandbox(s.id), 0);
	cr_assert_eq(put_network(&s, "{\"allow_internet_access\":false}"), 204);
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s/network", s.id);
	const char *opening[] = { "{\"allowOut\":[\"192.0.2.7\"]}", "{\"allow_internet_access\":true}" };
	for (size_t i = 0; i < sizeof(opening) / sizeof(opening[0]); i++) {
		struct resp r = api("PUT", p, opening[i], 30000);
		cr_assert_eq(r.status, 400, "%s -> %ld %s", opening[i], r.status, r.body);
		cr_assert(strstr(r.body, "no internet access"), "%s", r.body);
		free(r.body);
	}
	srv_stop(&S);
}
