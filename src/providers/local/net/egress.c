/* SPDX-License-Identifier: MIT */
/*
 * What a sandbox may reach, decided on the host at create time: the
 * spec's allow_out/deny_out entries as IPv4 prefixes (hostnames resolved
 * here, once: docs/network.md says what that cannot do), the nameservers
 * it may always ask, and the address pool sandboxes are numbered from.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../../util/alloc.h"
#include "../../../util/config.h"
#include "../../../util/fs.h"
#include "net_int.h"

#define DEFAULT_POOL "100.96.0.0/12"
#define MAX_LIST 256

void sbx__net_plan_clear(struct net_plan *p)
{
	free(p->allow);
	free(p->deny);
	free(p->dns);
	memset(p, 0, sizeof(*p));
}

int sbx__net_parse_cidr(struct net_cidr *out, const char *s)
{
	char ip[INET_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	if (n == 0 || n >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, s, n);
	ip[n] = '\0';
	struct in_addr a;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return -EINVAL;
	long plen = 32;
	if (slash) {
		char *end;
		errno = 0;
		plen = strtol(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end || plen < 0 || plen > 32)
			return -EINVAL;
	}
	uint32_t m = plen ? htonl(~0u << (32 - plen)) : 0;
	out->addr = a.s_addr & m;
	out->plen = (uint8_t)plen;
	return 0;
}

int sbx__net_pool(struct net_cidr *out, sbx_error **err)
{
	const char *v = sbx__env("SBX_NET_POOL");
	if (!v || !*v)
		v = DEFAULT_POOL;
	if (sbx__net_parse_cidr(out, v) < 0 || out->plen > 24 || out->plen < 8)
		return sbx_error_set(err, -EINVAL, "SBX_NET_POOL '%s': expected an IPv4 prefix from /8 to /24", v);
	return 0;
}

/* A hostname as the resolver would take it: letters, digits, '-', '.'; not
 * digits and dots only (the resolver would read "1.2.3" as 1.2.0.3). */
static int is_hostname(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253 || strspn(s, "0123456789.") == n)
		return 0;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
		      *c == '.'))
			return 0;
	return 1;
}

static void push(struct net_cidr **v, size_t *n, struct net_cidr c)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].addr == c.addr && (*v)[i].plen == c.plen)
			return;
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = c;
}

static int plan_list(struct net_cidr **v, size_t *n, const char *const *list, const char *field, sbx_error **err)
{
	size_t i = 0;
	for (; list && list[i]; i++) {
		const char *s = list[i];
		if (i >= MAX_LIST)
			return sbx_error_set(err, -E2BIG, "sandbox spec: %s has more than %d entries", field, MAX_LIST);
		struct net_cidr c;
		if (sbx__net_parse_cidr(&c, s) == 0) {
			push(v, n, c);
			continue;
		}
		if (strchr(s, ':'))
			return sbx_error_set(err, -EINVAL,
					     "sandbox spec: %s[%zu] '%s': IPv6 is not supported (sandboxes have no IPv6)",
					     field, i, s);
		if (!is_hostname(s) || strchr(s, '/'))
			return sbx_error_set(err, -EINVAL,
					     "sandbox spec: %s[%zu] '%s': expected an IPv4 address, an IPv4 CIDR or a hostname",
					     field, i, s);
		struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
		int g = getaddrinfo(s, NULL, &hints, &res);
		if (g != 0)
			/* a name that does not exist is a bad entry (-EINVAL, as
			 * sbx_sandbox_create and set_egress document), not a missing
			 * image or sandbox (-ENOENT: sbx serve's 404) */
			return sbx_error_set(err, g == EAI_NONAME ? -EINVAL : -EAGAIN,
					     "sandbox spec: %s[%zu]: resolve '%s': %s", field, i, s, gai_strerror(g));
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			const struct sockaddr_in *sin = (const struct sockaddr_in *)a->ai_addr;
			push(v, n, (struct net_cidr){ sin->sin_addr.s_addr, 32 });
		}
		freeaddrinfo(res);
	}
	return 0;
}

int sbx__net_plan_lists(struct net_plan *p, const sbx_sandbox_opts *o, sbx_error **err)
{
	int r = plan_list(&p->allow, &p->n_allow, o->allow_out, "allow_out", err);
	if (r == 0)
		r = plan_list(&p->deny, &p->n_deny, o->deny_out, "deny_out", err);
	if (r < 0)
		return r;
	if (p->n_allow + p->n_deny > NET_MAX_RULES)
		return sbx_error_set(err, -E2BIG,
				     "sandbox spec: allow_out and deny_out resolve to %zu addresses (at most %d)",
				     p->n_allow + p->n_deny, NET_MAX_RULES);
	/* E2B's precedence: an allow entry wins over a deny entry. An allow
	 * list on its own means "only these" (Harbor's allowlist). */
	p->allow_only = o->allow_out && o->allow_out[0] && !(o->deny_out && o->deny_out[0]);
	const char *dp = sbx__env("SBX_NET_DENY_PRIVATE");
	p->deny_private = dp && !strcmp(dp, "1");
	uint32_t ns[8];
	size_t n = sbx__net_nameservers(ns, 8);
	p->dns = xcalloc(n ? n : 1, sizeof(*p->dns));
	memcpy(p->dns, ns, n * sizeof(*ns));
	p->n_dns = n;
	return 0;
}

/* IPv4 nameservers of a resolv.conf text that a sandbox can reach. */
static size_t parse_resolv(const char *text, uint32_t *out, size_t max)
{
	size_t n = 0;
	for (const char *line = text; line && *line && n < max;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[128];
		if (len < sizeof(buf) && !strncmp(line, "nameserver", 10)) {
			memcpy(buf, line + 10, len - 10);
			buf[len - 10] = '\0';
			char *s = buf + strspn(buf, " \t");
			s[strcspn(s, " \t\r")] = '\0';
			struct in_addr a;
			if (inet_pton(AF_INET, s, &a) == 1 && (ntohl(a.s_addr) >> 24) != 127 && a.s_addr != 0)
				out[n++] = a.s_addr;
		}
		line = nl ? nl + 1 : NULL;
	}
	return n;
}

size_t sbx__net_nameservers(uint32_t *out, size_t max)
{
	const char *v = sbx__env("SBX_NET_DNS");
	if (v && *v) {
		size_t n = 0;
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", v);
		for (char *s = buf, *save = NULL, *t; n < max && (t = strtok_r(s, ", ", &save)); s = NULL) {
			struct in_addr a;
			if (inet_pton(AF_INET, t, &a) == 1)
				out[n++] = a.s_addr;
		}
		return n;
	}
	/* systemd-resolved listens on 127.0.0.53, which a sandbox cannot
	 * reach; its upstream servers are in the second file. */
	static const char *const files[] = { "/etc/resolv.conf", "/run/systemd/resolve/resolv.conf" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *text = NULL;
		size_t len;
		if (sbx__read_file(&text, &len, files[i], 65536, NULL) < 0)
			continue;
		size_t n = parse_resolv(text, out, max);
		free(text);
		if (n)
			return n;
	}
	return 0;
}
