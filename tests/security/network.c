/* SPDX-License-Identifier: MIT */
/*
 * network=internet (docs/network.md) and packet sockets (docs/security.md:
 * with the host's network a sandbox sniffed the server's API key off lo with
 * an AF_PACKET socket).
 *
 * Each test makes its own "internet": a network namespace joined to the
 * host by a veth (tnet<slot>, host 198.18.<slot>.2, far end .1, plus
 * 198.19.<slot>.1 routed through it) with TCP listeners on port 8080 and a
 * UDP echo on port 53 inside, served by a thread of the test that setns()es
 * into it. The metadata test adds 169.254.169.254 there, with a host route,
 * under a lock (one route per host). Nothing leaves this machine. The
 * fake internet and the probes are in network_fixture.h.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../integration/common.h"
#include "providers/local/net/net_int.h"
#include "network_fixture.h"

static const char *const some_list[] = { "192.0.2.0/24", NULL };

TestSuite(internet, .init = net_setup, .fini = net_teardown, .timeout = 300);

Test(internet, reaches_the_internet_through_nat)
{
	sbx_sandbox *sb = internet_sandbox(NULL, NULL);
	char a[32], cmd[128];
	snprintf(a, sizeof(a), "198.18.%d.1", slot);
	cr_assert(dial(sb, a, 8080), "an internet sandbox could not reach the (fake) internet");
	snprintf(cmd, sizeof(cmd), "wget -q -O - http://%s:8080/", a);
	int code = -1;
	char *out = sbx_test_sh(sb, cmd, &code);
	char want[64];
	snprintf(want, sizeof(want), "internet 198.18.%d.2", slot);
	cr_assert(strstr(out, want), "the far end should see the host's address (NAT), saw: %s", out);
	free(out);
	out = sbx_test_sh(sb, "cat /etc/resolv.conf", &code);
	cr_assert(strstr(out, "nameserver") || strstr(out, "SBX_NET_DNS"), "no resolv.conf: %s", out);
	cr_assert_null(strstr(out, "nameserver 127."), "a loopback resolver is unreachable: %s", out);
	free(out);
	destroy(sb);
}

Test(internet, host_addresses_unreachable)
{
	/* On every host address, loopback included: the test proves each is
	 * reachable from the host before asking the sandbox. */
	int l_lo = listen_on(SOCK_STREAM, "127.0.0.1", 18181);
	int l_any = listen_on(SOCK_STREAM, "0.0.0.0", 18182);
	sbx_sandbox *sb = internet_sandbox(NULL, NULL);
	char host_end[32], inside[32];
	sandbox_addr(sb, host_end, inside, sizeof(host_end));
	cr_assert(host_dial("127.0.0.1", 18181));
	cr_assert(host_dial(host_end, 18182));
	cr_assert_not(dial(sb, "127.0.0.1", 18181), "reached the host's 127.0.0.1");
	cr_assert_not(dial(sb, host_end, 18182), "reached the host through its veth address %s", host_end);
	char hostside[32];
	snprintf(hostside, sizeof(hostside), "198.18.%d.2", slot);
	cr_assert(host_dial(hostside, 18182));
	cr_assert_not(dial(sb, hostside, 18182), "reached the host through its address %s", hostside);
	struct ifaddrs *ifa = NULL;
	getifaddrs(&ifa);
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		/* Other tests' links come and go: an address that stops being the
		 * host's is routed out and no longer tells anything. */
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !strcmp(i->ifa_name, "lo") ||
		    ((!strncmp(i->ifa_name, "tnet", 4) || !strncmp(i->ifa_name, "sbx", 3)) && strcmp(i->ifa_name, veth)))
			continue;
		char a[32];
		inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof(a));
		cr_assert_not(dial(sb, a, 18182), "reached the host through %s (%s)", a, i->ifa_name);
	}
	freeifaddrs(ifa);
	destroy(sb);
	close(l_lo);
	close(l_any);
}

Test(internet, other_sandboxes_unreachable)
{
	sbx_sandbox *a = internet_sandbox(NULL, NULL), *b = internet_sandbox(NULL, NULL);
	int code = -1;
	free(sbx_test_sh(b, "/probe listen 9000 >/dev/null 2>&1 &", &code));
	char host_end[32], b_addr[32];
	sandbox_addr(b, host_end, b_addr, sizeof(b_addr));
	usleep(200000);
	cr_assert(host_dial(b_addr, 9000), "the host should reach sandbox b's listener at %s", b_addr);
	cr_assert_not(dial(a, b_addr, 9000), "sandbox a reached sandbox b at %s", b_addr);
	destroy(a);
	destroy(b);
}

Test(internet, egress_lists)
{
	char s1[32], s1net[32], s2[32];
	snprintf(s1, sizeof(s1), "198.18.%d.1", slot);
	snprintf(s1net, sizeof(s1net), "198.18.%d.0/24", slot);
	snprintf(s2, sizeof(s2), "198.19.%d.1", slot);
	/* allow_out alone: only these. */
	const char *allow[] = { s1net, NULL };
	sbx_sandbox *sb = internet_sandbox(allow, NULL);
	cr_assert(dial(sb, s1, 8080), "allow_out %s refused %s", s1net, s1);
	cr_assert_not(dial(sb, s2, 8080), "allow_out %s let %s through", s1net, s2);
	destroy(sb);
	/* deny_out alone: all but these. */
	const char *deny[] = { s2, NULL };
	sb = internet_sandbox(NULL, deny);
	cr_assert(dial(sb, s1, 8080));
	cr_assert_not(dial(sb, s2, 8080), "deny_out %s let it through", s2);
	destroy(sb);
	/* E2B's pattern: deny everything, allow a few; allow wins. */
	const char *all[] = { "0.0.0.0/0", NULL }, *one[] = { s2, NULL };
	sb = internet_sandbox(one, all);
	cr_assert(dial(sb, s2, 8080), "allow_out %s should win over deny_out 0.0.0.0/0", s2);
	cr_assert_not(dial(sb, s1, 8080));
	/* The nameservers stay reachable on port 53 only. */
	destroy(sb);
	destroy(internet_sandbox(NULL, NULL));
}

/* E2B's PUT /sandboxes/{id}/network: the lists of a running sandbox change
 * at once, and the last change leaves nothing behind at destroy. */
Test(internet, egress_lists_change_while_running)
{
	char s1[32], s2[32];
	snprintf(s1, sizeof(s1), "198.18.%d.1", slot);
	snprintf(s2, sizeof(s2), "198.19.%d.1", slot);
	sbx_sandbox *sb = internet_sandbox(NULL, NULL);
	const char *id = sbx_sandbox_id(sb);
	cr_assert(dial(sb, s1, 8080) && dial(sb, s2, 8080));
	cr_assert_eq(sbx__nft_has_sandbox(id), 0, "no lists, no chain");
	sbx_error *err = NULL;
	/* a chain made for a sandbox that had none: deny all but s2 */
	const char *all[] = { "0.0.0.0/0", NULL }, *one[] = { s2, NULL };
	cr_assert_eq(sbx_sandbox_set_egress(sb, one, all, &err), 0, "%s", err ? err->msg : "?");
	cr_assert(dial(sb, s2, 8080), "allow_out %s should win over deny_out 0.0.0.0/0", s2);
	cr_assert_not(dial(sb, s1, 8080), "deny_out 0.0.0.0/0 let %s through", s1);
	/* the chain refilled: now the other way round */
	const char *deny2[] = { s2, NULL };
	cr_assert_eq(sbx_sandbox_set_egress(sb, NULL, deny2, &err), 0, "%s", err ? err->msg : "?");
	cr_assert(dial(sb, s1, 8080), "deny_out %s alone refused %s", s2, s1);
	cr_assert_not(dial(sb, s2, 8080), "deny_out %s let it through", s2);
	/* a bad entry changes nothing and names itself */
	const char *bad[] = { "10.0.0.0/33", NULL };
	cr_assert_eq(sbx_sandbox_set_egress(sb, bad, NULL, &err), -EINVAL);
	cr_assert(err && strstr(err->msg, "10.0.0.0/33"), "%s", err ? err->msg : "?");
	sbx_error_free(err);
	err = NULL;
	cr_assert_not(dial(sb, s2, 8080), "a refused change must keep the lists in force");
	/* no lists: the chain goes, everything public is reachable again */
	cr_assert_eq(sbx_sandbox_set_egress(sb, NULL, NULL, &err), 0, "%s", err ? err->msg : "?");
	cr_assert_eq(sbx__nft_has_sandbox(id), 0, "an unrestricted sandbox keeps no chain");
	cr_assert(dial(sb, s1, 8080) && dial(sb, s2, 8080));
	cr_assert_eq(sbx_sandbox_set_egress(sb, one, all, &err), 0, "%s", err ? err->msg : "?");
	char keep[32];
	snprintf(keep, sizeof(keep), "%s", id);
	destroy(sb);
	assert_nothing_left(keep);
	/* network=none has nothing to filter: the mode is chosen at create */
	sbx_sandbox_opts o = base_opts();
	sbx_sandbox *none = sbx_test_sandbox(rt, &o);
	cr_assert_eq(sbx_sandbox_set_egress(none, one, all, &err), -ENOTSUP);
	cr_assert(err && strstr(err->msg, "network"), "%s", err ? err->msg : "?");
	sbx_error_free(err);
	destroy(none);
}

Test(internet, resolver_reachable_under_allow_list)
{
	char s1[32], env[64], other[32];
	snprintf(s1, sizeof(s1), "198.18.%d.1", slot);
	snprintf(env, sizeof(env), "%s", s1);
	snprintf(other, sizeof(other), "198.19.%d.1", slot);
	setenv("SBX_NET_DNS", env, 1);
	const char *allow[] = { other, NULL };
	sbx_sandbox *sb = internet_sandbox(allow, NULL);
	unsetenv("SBX_NET_DNS");
	int code = -1;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "/probe udp %s 53 1500", s1);
	char *out = sbx_test_sh(sb, cmd, &code);
	cr_assert(strstr(out, "udp: ok"), "the configured nameserver was not reachable on port 53: %s", out);
	free(out);
	cr_assert_not(dial(sb, s1, 8080), "the nameserver is reachable on port 53 only");
	out = sbx_test_sh(sb, "cat /etc/resolv.conf", &code);
	cr_assert(strstr(out, s1), "resolv.conf should name SBX_NET_DNS: %s", out);
	free(out);
	destroy(sb);
}

Test(internet, bad_list_entries_are_refused)
{
	sbx_sandbox_opts o = base_opts();
	o.image = "busybox";
	o.network = SBX_NETWORK_INTERNET;
	const char *bad[] = { "10.0.0.0/8", "not a host!", NULL };
	o.allow_out = bad;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_lt(sbx_sandbox_create(&sb, rt, &o, &err), 0);
	cr_assert(err && strstr(err->msg, "allow_out[1]"), "error should name the entry: %s", err ? err->msg : "?");
	sbx_error_free(err);
	err = NULL;
	const char *v6[] = { "2001:db8::/32", NULL };
	o.allow_out = NULL;
	o.deny_out = v6;
	cr_assert_lt(sbx_sandbox_create(&sb, rt, &o, &err), 0);
	cr_assert(err && strstr(err->msg, "deny_out[0]"), "%s", err ? err->msg : "?");
	sbx_error_free(err);
}

Test(internet, destroy_leaves_nothing)
{
	sbx_sandbox *sb = internet_sandbox(NULL, some_list);
	char id[64];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	cr_assert(link_exists(id));
	cr_assert_eq(sbx__nft_has_sandbox(id), 1);
	destroy(sb);
	assert_nothing_left(id);

	/* Destroyed by another handle that knows only the id. */
	sb = internet_sandbox(NULL, some_list);
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	sbx_sandbox_free(sb);
	sbx_runtime *rt2 = sbx_test_runtime();
	sbx_sandbox *again = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_open(&again, rt2, NULL, id, &err), 0, "open %s: %s", id, err ? err->msg : "?");
	destroy(again);
	sbx_test_runtime_free(rt2);
	assert_nothing_left(id);

	/* And by id alone, as `sbx rm ID` does. */
	sb = internet_sandbox(NULL, some_list);
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	sbx_sandbox_free(sb);
	cr_assert_eq(sbx_sandbox_destroy_id(rt, NULL, id, &err), 0, "%s", err ? err->msg : "?");
	assert_nothing_left(id);
}

Test(internet, gc_removes_the_rules_of_a_dead_sandbox)
{
	sbx_sandbox *sb = internet_sandbox(NULL, some_list);
	char id[64];
	snprintf(id, sizeof(id), "%s", sbx_sandbox_id(sb));
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	pid_t pid = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			pid = v[i].pid;
	sbx_sandbox_info_free(v, n);
	cr_assert_gt(pid, 0);
	kill(pid, SIGKILL); /* a crash: nobody runs destroy */
	sbx_sandbox_free(sb);
	for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
		usleep(10000);
	cr_assert_eq(sbx__nft_has_sandbox(id), 1, "the dead sandbox's chain should still be there before gc");
	/* What `sbx gc` does: destroy every leaked sandbox by id. */
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	int found = 0;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id) && v[i].leaked) {
			found = 1;
			cr_assert_eq(sbx_sandbox_destroy_id(rt, NULL, id, NULL), 0);
		}
	sbx_sandbox_info_free(v, n);
	cr_assert(found, "gc did not list the dead sandbox %s", id);
	assert_nothing_left(id);
}

Test(internet, fifty_cycles_leave_nothing)
{
	char ids[50][16];
	for (int i = 0; i < 50; i++) {
		sbx_sandbox_opts o = base_opts();
		o.network = SBX_NETWORK_INTERNET;
		o.deny_out = i % 2 ? some_list : NULL; /* with and without a chain of its own */
		sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
		snprintf(ids[i], sizeof(ids[i]), "%s", sbx_sandbox_id(sb));
		destroy(sb);
	}
	for (int i = 0; i < 50; i++)
		assert_nothing_left(ids[i]);
}

/* Processes creating at the same moment (separate `sbx run`s, a server) get
 * distinct address slots from the kernel and each its own chain. */
Test(internet, concurrent_creators)
{
	pid_t kids[3];
	for (int k = 0; k < 3; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			sbx_runtime *r2 = sbx_test_runtime();
			for (int i = 0; i < 10; i++) {
				sbx_sandbox_opts o = base_opts();
				o.image = "busybox";
				o.network = SBX_NETWORK_INTERNET;
				o.deny_out = i % 2 ? some_list : NULL;
				sbx_sandbox *sb = NULL;
				if (sbx_sandbox_create(&sb, r2, &o, NULL) < 0 || sbx_sandbox_destroy(sb, NULL) < 0)
					_exit(1);
				sbx_sandbox_free(sb);
			}
			sbx_test_runtime_free(r2);
			_exit(0);
		}
	}
	for (int k = 0; k < 3; k++) {
		int st = -1;
		waitpid(kids[k], &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "creator %d failed", k);
	}
}

/* With CAP_NET_RAW (userns=host and net_raw: an explicit opt-in) a sandbox
 * can forge its source. Forging another sandbox's address toward the
 * internet would make the answer come back, de-NATed, into that sandbox,
 * past the sandbox-to-sandbox block: the reverse-path check drops it. */
Test(internet, forged_sources_are_dropped)
{
	sbx_sandbox *b = internet_sandbox(NULL, NULL);
	sbx_sandbox_opts o = base_opts();
	o.network = SBX_NETWORK_INTERNET;
	o.userns = SBX_USERNS_HOST;
	o.net_raw = 1;
	sbx_sandbox *a = sbx_test_sandbox(rt, &o);
	upload_probe(a);
	char ha[32], aa[32], hb[32], ba[32], echo[32], cmd[256];
	sandbox_addr(a, ha, aa, sizeof(aa));
	sandbox_addr(b, hb, ba, sizeof(ba));
	snprintf(echo, sizeof(echo), "198.18.%d.1", slot);
	int code = -1;
	/* Control: a datagram with a's own source gets its echo back to a. */
	snprintf(cmd, sizeof(cmd),
		 "(/probe udplisten 5353 3000 > /tmp/r &); sleep 0.3; /probe spoof %s 5353 %s 53; sleep 1; cat /tmp/r", aa,
		 echo);
	char *out = sbx_test_sh(a, cmd, &code);
	cr_assert(strstr(out, "udplisten: got"), "the raw-socket path itself does not work: %s", out);
	free(out);
	/* The attack: b's address as the source. */
	free(sbx_test_sh(b, "(/probe udplisten 5353 3000 > /tmp/r 2>&1 &)", &code));
	usleep(300000);
	snprintf(cmd, sizeof(cmd), "/probe spoof %s 5353 %s 53", ba, echo);
	out = sbx_test_sh(a, cmd, &code);
	cr_assert(strstr(out, "spoof: ok"), "%s", out);
	free(out);
	sleep(3);
	out = sbx_test_sh(b, "cat /tmp/r", &code);
	cr_assert(strstr(out, "udplisten: timeout"), "a forged source reflected a datagram into sandbox b: %s", out);
	free(out);
	destroy(a);
	destroy(b);
}

TestSuite(metadata, .init = meta_setup, .fini = net_teardown, .timeout = 300);

Test(metadata, link_local_unreachable)
{
	cr_assert(host_dial("169.254.169.254", 80), "the test's metadata listener is not up");
	sbx_sandbox *sb = internet_sandbox(NULL, NULL);
	cr_assert_not(dial(sb, "169.254.169.254", 80), "reached 169.254.169.254 (cloud metadata)");
	/* Not even when the spec allows it. */
	const char *allow[] = { "169.254.0.0/16", NULL };
	sbx_sandbox *sb2 = internet_sandbox(allow, NULL);
	cr_assert_not(dial(sb2, "169.254.169.254", 80), "allow_out opened link-local");
	destroy(sb);
	destroy(sb2);
}

/* A packet socket is how a sandbox sniffed the server's secrets.
 * None in the default mode, none with internet. */
static void no_packet_socket(sbx_network mode, sbx_userns userns)
{
	sbx_sandbox_opts o = base_opts();
	o.network = mode;
	o.userns = userns;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	upload_probe(sb);
	int code = -1;
	char *out = sbx_test_sh(sb, "/probe packet", &code);
	cr_assert_neq(code, 0, "an AF_PACKET socket opened with network=%s: %s", sbx_network_name(mode), out);
	free(out);
	destroy(sb);
}

TestSuite(packet, .init = setup, .fini = packet_teardown, .timeout = 300);

Test(packet, none_mode)
{
	no_packet_socket(SBX_NETWORK_NONE, SBX_USERNS_PRIVATE);
}

Test(packet, internet_mode)
{
	no_packet_socket(SBX_NETWORK_INTERNET, SBX_USERNS_PRIVATE);
}

/* Root inside is host root here: only the capability set keeps NET_RAW out. */
Test(packet, internet_mode_with_host_userns)
{
	no_packet_socket(SBX_NETWORK_INTERNET, SBX_USERNS_HOST);
}
