/* SPDX-License-Identifier: MIT */
/*
 * The fixture of tests/security/network.c (included after common.h, whose
 * runtime it uses): the test's own "internet" (a namespace on a veth with
 * listeners, served by a thread), the suites' init and fini, and the probes
 * that dial through a sandbox or from the host.
 */
#ifndef SBX_TEST_NETWORK_FIXTURE_H
#define SBX_TEST_NETWORK_FIXTURE_H

static int slot = -1, slot_lock = -1, inet_ns = -1;
static char ns_name[32], veth[16];
static volatile int stop_serving;

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int r = system(cmd); /* checksrc: allow (test setup with iproute2) */
	cr_assert_eq(r, 0, "setup command failed: %s", cmd);
}

static void lock_slot(void)
{
	for (int s = 1; s < 250; s++) {
		char p[64];
		snprintf(p, sizeof(p), "/tmp/sbx-test-net.%d.lock", s);
		int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
			slot = s;
			slot_lock = fd;
			return;
		}
		if (fd >= 0)
			close(fd);
	}
	cr_assert_fail("no free test network slot");
}

static int listen_on(int type, const char *ip, int port)
{
	int s = socket(AF_INET, type | SOCK_CLOEXEC, 0), one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &sa.sin_addr);
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s:%d: %s", ip, port, strerror(errno));
	if (type == SOCK_STREAM)
		listen(s, 64);
	return s;
}

/* Answers TCP with "internet <peer address>\n" and echoes UDP. */
static void serve(int *fds, int n)
{
	struct pollfd p[8];
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	while (!stop_serving) {
		if (poll(p, (nfds_t)n, 100) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			struct sockaddr_in peer;
			socklen_t pl = sizeof(peer);
			char buf[128];
			int type = 0;
			socklen_t tl = sizeof(type);
			getsockopt(fds[i], SOL_SOCKET, SO_TYPE, &type, &tl);
			if (type == SOCK_DGRAM) {
				ssize_t k = recvfrom(fds[i], buf, sizeof(buf), 0, (struct sockaddr *)&peer, &pl);
				if (k > 0)
					sendto(fds[i], buf, (size_t)k, 0, (struct sockaddr *)&peer, pl);
				continue;
			}
			int c = accept(fds[i], (struct sockaddr *)&peer, &pl);
			if (c < 0)
				continue;
			char a[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &peer.sin_addr, a, sizeof(a));
			int len = snprintf(buf, sizeof(buf), "HTTP/1.0 200 OK\r\n\r\ninternet %s\n", a);
			(void)!write(c, buf, (size_t)len);
			close(c);
		}
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

static int want_metadata;

static void *inet_main(void *arg)
{
	(void)arg;
	if (setns(inet_ns, CLONE_NEWNET) < 0)
		abort();
	char a[32], b[32];
	snprintf(a, sizeof(a), "198.18.%d.1", slot);
	snprintf(b, sizeof(b), "198.19.%d.1", slot);
	int fds[8], n = 0;
	fds[n++] = listen_on(SOCK_STREAM, a, 8080);
	fds[n++] = listen_on(SOCK_STREAM, b, 8080);
	fds[n++] = listen_on(SOCK_DGRAM, a, 53);
	if (want_metadata)
		fds[n++] = listen_on(SOCK_STREAM, "169.254.169.254", 80);
	serve(fds, n);
	return NULL;
}

static pthread_t inet_thread;

static void fake_internet(int metadata)
{
	lock_slot();
	snprintf(ns_name, sizeof(ns_name), "sbxtest-inet-%d", slot);
	snprintf(veth, sizeof(veth), "tnet%d", slot);
	/* Leftovers of a killed run of this slot. */
	char c[256];
	snprintf(c, sizeof(c), "ip netns del %s 2>/dev/null; ip link del %s 2>/dev/null; true", ns_name, veth);
	system(c); /* checksrc: allow */
	sh("ip netns add %s", ns_name);
	sh("ip link add %s type veth peer name %sp", veth, veth);
	sh("ip link set %sp netns %s", veth, ns_name);
	sh("ip addr add 198.18.%d.2/24 dev %s && ip link set %s up", slot, veth, veth);
	sh("ip -n %s addr add 198.18.%d.1/24 dev %sp && ip -n %s addr add 198.19.%d.1/24 dev %sp", ns_name, slot, veth,
	   ns_name, slot, veth);
	sh("ip -n %s link set %sp up && ip -n %s link set lo up", ns_name, veth, ns_name);
	sh("ip -n %s route add default via 198.18.%d.2", ns_name, slot);
	sh("ip route add 198.19.%d.0/24 via 198.18.%d.1", slot, slot);
	if (metadata) {
		sh("ip -n %s addr add 169.254.169.254/32 dev %sp", ns_name, veth);
		sh("ip route replace 169.254.169.254/32 via 198.18.%d.1", slot);
	}
	char path[64];
	snprintf(path, sizeof(path), "/run/netns/%s", ns_name);
	inet_ns = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(inet_ns, 0);
	want_metadata = metadata;
	stop_serving = 0;
	pthread_create(&inet_thread, NULL, inet_main, NULL);
	usleep(100000); /* the listeners bind */
}

static void net_setup(void)
{
	setup();
	fake_internet(0);
}

/* A failed assertion leaves its sandboxes running: this test process's
 * state dir is its own, so everything in it is the test's to remove. */
static void destroy_all(void)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	if (sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		sbx_sandbox_destroy_id(rt, NULL, v[i].id, NULL);
	sbx_sandbox_info_free(v, n);
}

static void packet_teardown(void)
{
	destroy_all();
	teardown();
}

static void net_teardown(void)
{
	destroy_all();
	stop_serving = 1;
	pthread_join(inet_thread, NULL);
	char c[256];
	snprintf(c, sizeof(c), "ip route del 198.19.%d.0/24 2>/dev/null; ip link del %s; ip netns del %s", slot, veth,
		 ns_name);
	system(c); /* checksrc: allow */
	if (want_metadata)
		system("ip route del 169.254.169.254/32 2>/dev/null"); /* checksrc: allow */
	close(inet_ns);
	close(slot_lock);
	teardown();
}

static void meta_setup(void)
{
	setup();
	/* One host route for 169.254.169.254: one such test at a time. */
	int fd = open("/tmp/sbx-test-net.metadata.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	flock(fd, LOCK_EX);
	fake_internet(1);
}

/* Within the hard RLIMIT_NOFILE of any test host. */
static sbx_sandbox_opts base_opts(void)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.nofile_max = 1024;
	return o;
}

static sbx_sandbox *internet_sandbox(const char *const *allow, const char *const *deny)
{
	sbx_sandbox_opts o = base_opts();
	o.network = SBX_NETWORK_INTERNET;
	o.allow_out = allow;
	o.deny_out = deny;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	upload_probe(sb);
	return sb;
}

/* "ok" or the failure the probe printed. */
static int dial(sbx_sandbox *sb, const char *ip, int port)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "/probe dial %s %d 1500", ip, port);
	int code = -1;
	char *out = sbx_test_sh(sb, cmd, &code);
	int ok = strstr(out, "dial: ok") != NULL;
	cr_log_info("%s -> %s", cmd, out);
	free(out);
	return ok;
}

static int host_dial(const char *ip, int port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, ip, &sa.sin_addr);
	int ok = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(s);
	return ok;
}

/* IPv4 address of a host link, or "" */
static void link_addr(const char *name, char *out, size_t len)
{
	struct ifaddrs *ifa = NULL;
	out[0] = '\0';
	getifaddrs(&ifa);
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, name))
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)len);
	freeifaddrs(ifa);
}

/* The sandbox's eth0 address: its host end's + 1. */
static void sandbox_addr(sbx_sandbox *sb, char *host, char *inside, size_t len)
{
	char name[80];
	snprintf(name, sizeof(name), "sbx%s", sbx_sandbox_id(sb));
	link_addr(name, host, len);
	cr_assert(host[0], "no address on %s", name);
	struct in_addr a;
	inet_pton(AF_INET, host, &a);
	a.s_addr = htonl(ntohl(a.s_addr) + 1);
	inet_ntop(AF_INET, &a, inside, (socklen_t)len);
}

static int link_exists(const char *id)
{
	char name[80];
	snprintf(name, sizeof(name), "sbx%s", id);
	return if_nametoindex(name) != 0;
}

/* The chain goes at destroy; the link dies with the sandbox's network
 * namespace, which the kernel frees in the background (docs/network.md). */
static void assert_nothing_left(const char *id)
{
	cr_assert_eq(sbx__nft_has_sandbox(id), 0, "chain sb_%s outlived its sandbox", id);
	for (int i = 0; i < 500 && link_exists(id); i++)
		usleep(10000);
	cr_assert_not(link_exists(id), "veth sbx%s outlived its sandbox by 5 s", id);
}

#endif
