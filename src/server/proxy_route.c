/* SPDX-License-Identifier: MIT */
/*
 * Which requests are for a port inside a sandbox (docs/server.md, "Port
 * routing"): a Host `{port}-{sandboxID}.{domain}` (the server's --domain,
 * `localhost`, or any sslip.io / nip.io name, which resolve to the IP they
 * spell), else the E2b-Sandbox-Id and E2b-Sandbox-Port headers. Port 49983
 * is envd (the data plane); any other port is proxied into the sandbox,
 * after the checks here, made from the headers alone: the sandbox exists
 * and runs, and a sandbox created with allowPublicTraffic: false gets the
 * traffic token in `e2b-traffic-access-token` (403 otherwise, E2B's shape).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/alloc.h"
#include "../util/str.h"
#include "server_int.h"

char *sbx__srv_proxy_domain(struct server *srv)
{
	if (srv->cfg.domain && *srv->cfg.domain)
		return xstrdup(srv->cfg.domain);
	const char *a = srv->cfg.listen_addr;
	if (!a || strcmp(a, "localhost") == 0 || strcmp(a, "0.0.0.0") == 0)
		a = "127.0.0.1";
	return xasprintf("%s.sslip.io:%u", a, srv->port);
}

/* n bytes of s equal t, ignoring case. */
static int eq_n(const char *s, size_t n, const char *t)
{
	return strlen(t) == n && strncasecmp(s, t, n) == 0;
}

/* 1 when the suffix of a routed Host (after `{port}-{id}.`, without
 * `:port`) names this server. */
static int domain_ok(struct server *srv, const char *d, size_t n)
{
	if (eq_n(d, n, "localhost"))
		return 1;
	static const char *const wild[] = { ".sslip.io", ".nip.io" };
	for (size_t i = 0; i < 2; i++) {
		size_t w = strlen(wild[i]);
		if (n > w && strncasecmp(d + n - w, wild[i], w) == 0)
			return 1;
	}
	const char *cd = srv->cfg.domain;
	if (!cd || !*cd)
		return 0;
	size_t cn = strcspn(cd, ":");
	return cn == n && strncasecmp(d, cd, n) == 0;
}

static int parse_port(const char *s, size_t n, unsigned *port)
{
	if (n == 0 || n > 5)
		return -EINVAL;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*port = v;
	return 0;
}

static int id_ok(const char *s, size_t n)
{
	if (n == 0 || n >= 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* Host `{port}-{id}.{domain}[:p]`: 1 with sid/port, else 0. */
static int from_host(struct server *srv, const char *host, char sid[32], unsigned *port)
{
	if (!host)
		return 0;
	size_t hn = strcspn(host, ":");
	const char *dot = memchr(host, '.', hn);
	if (!dot)
		return 0;
	const char *dash = memchr(host, '-', (size_t)(dot - host));
	if (!dash)
		return 0;
	const char *id = dash + 1;
	size_t idn = (size_t)(dot - id);
	if (parse_port(host, (size_t)(dash - host), port) < 0 || !id_ok(id, idn) ||
	    !domain_ok(srv, dot + 1, hn - (size_t)(dot + 1 - host)))
		return 0;
	memcpy(sid, id, idn);
	sid[idn] = '\0';
	return 1;
}

int sbx__srv_proxy_target(struct srv_req *r, char sid[32], unsigned *port)
{
	if (from_host(r->srv, sbx__srv_header(r, "Host"), sid, port))
		return 1;
	const char *hid = sbx__srv_header(r, "E2b-Sandbox-Id");
	const char *hport = sbx__srv_header(r, "E2b-Sandbox-Port");
	if (!hport || !hid)
		return 0; /* the data plane answers a lone E2b-Sandbox-Id as before */
	if (parse_port(hport, strlen(hport), port) < 0) {
		sbx__srv_reply_error(r, 400, "E2b-Sandbox-Port must be a TCP port 1..65535");
		return -1;
	}
	if (*port == SRV_ENVD_PORT)
		return 0; /* envd: the data plane as before */
	if (!id_ok(hid, strlen(hid))) {
		sbx__srv_reply_error(r, 400, "E2b-Sandbox-Id must be a sandbox id (letters and digits)");
		return -1;
	}
	snprintf(sid, 32, "%s", hid);
	return 1;
}

void sbx__srv_proxy_error(struct srv_req *r, int status, unsigned port, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	json_t *o = json_pack("{s:i,s:s,s:s}", "code", status, "message", msg, "sandboxId", r->sandbox_id);
	if (port) {
		char p[16];
		snprintf(p, sizeof(p), "%u", port);
		json_object_set_new(o, "port", json_string(p));
	}
	free(msg);
	sbx__srv_reply_json(r, status, o);
}

int sbx__srv_proxy_authorize(struct srv_req *r, const char *sid, unsigned port)
{
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", sid);
	struct srv_sandbox *s = sbx__srv_sandbox_get(r->srv, sid);
	if (!s) {
		sbx__srv_proxy_error(r, 502, port, "The sandbox was not found: no sandbox %s runs on this server", sid);
		return 0;
	}
	if (s->private_traffic) {
		const char *tok = sbx__srv_header(r, SRV_TRAFFIC_HEADER);
		if (!tok || !sbx__srv_ct_equal(tok, s->traffic_token)) {
			sbx__srv_proxy_error(r, 403, 0,
					     tok ? "Sandbox is secured with traffic access token. Provided token in "
						   "header '" SRV_TRAFFIC_HEADER "' is invalid"
						 : "Sandbox is secured with traffic access token. Token header '"
						   SRV_TRAFFIC_HEADER "' is missing");
			sbx__srv_sandbox_put(r->srv, s);
			return 0;
		}
	}
	/* autoResume: traffic to its ports wakes it, as on E2B */
	int paused = !sbx__srv_sandbox_autoresume(s);
	if (paused) {
		sbx__srv_proxy_error(r, 502, port, "sandbox %s is paused: its ports answer once it is resumed", sid);
		sbx__srv_sandbox_put(r->srv, s);
		return 0;
	}
	r->sb = s;
	r->proxy_port = port;
	return 1;
}
