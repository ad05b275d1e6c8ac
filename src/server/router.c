/* SPDX-License-Identifier: MIT */
/*
 * Request dispatch for the combined port (docs/server.md, "Routing and auth"): a request
 * for a user port of a sandbox (proxy_route.c) is proxied; one with E2b-Sandbox-Id
 * (or a Host routed to port 49983), an envd RPC path or /files goes to the data plane
 * (the sandbox found by header, else by its envd access token); everything
 * else is the control plane, which needs X-API-KEY except /health and
 * /metrics. Authorization runs on the headers, before the body is read
 * (http.c); uploads get their consumer then (route_begin), and dispatch
 * runs once the body is in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/str.h"
#include "daytona/daytona.h"
#include "server_int.h"

#define ENVD_PORT "49983"

size_t sbx__srv_split_path(char **segs, size_t max, char **buf, const char *path)
{
	*buf = xstrdup(path);
	size_t n = 0;
	char *save = NULL;
	for (char *t = strtok_r(*buf, "/", &save); t && n < max; t = strtok_r(NULL, "/", &save))
		segs[n++] = t;
	return n;
}

static int is_rpc(const char *url)
{
	return sbx__str_startswith(url, "/process.Process/") || sbx__str_startswith(url, "/filesystem.Filesystem/");
}

static void unauthorized(struct srv_req *r, int rpc, const char *msg)
{
	if (rpc)
		sbx__srv_reply_connect_error(r, "unauthenticated", "%s", msg);
	else
		sbx__srv_reply_error(r, 401, "%s", msg);
}

static int files_signed(struct srv_req *r, struct srv_sandbox *s)
{
	const char *sig = sbx__srv_query(r, "signature");
	const char *path = sbx__srv_query(r, "path");
	if (!sig || !path)
		return 0;
	const char *op = strcmp(r->method, "GET") == 0 ? "read" : "write";
	return sbx__srv_auth_signature_ok(s->token, path, op, sbx__srv_query(r, "username"), sig,
				     sbx__srv_query(r, "signature_expiration"));
}

/* The sandbox whose token signed this /files URL (a reference), or NULL. */
static struct srv_sandbox *by_signature(struct srv_req *r)
{
	size_t n;
	struct srv_sandbox **v = sbx__srv_sandbox_all(r->srv, &n), *found = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!found && files_signed(r, v[i]))
			found = v[i];
		else
			sbx__srv_sandbox_put(r->srv, v[i]);
	}
	free(v);
	return found;
}

/* Data plane, from the headers alone: the sandbox and whether the caller
 * may use it. 1 with r->sb taken, 0 after replying. */
static int authorize_data(struct srv_req *r, const char *sid)
{
	const char *token = sbx__srv_header(r, "X-Access-Token");
	int rpc = is_rpc(r->url);
	const char *port = sbx__srv_header(r, "E2b-Sandbox-Port");
	if (port && strcmp(port, ENVD_PORT) != 0) {
		sbx__srv_reply_error(r, 400, "E2b-Sandbox-Port %s needs E2b-Sandbox-Id (the sandbox to route to)", port);
		return 0;
	}
	struct srv_sandbox *s = NULL;
	if (sid) {
		s = sbx__srv_sandbox_get(r->srv, sid);
		if (!s) {
			sbx__srv_reply_error(r, 502, "sandbox %s not found", sid);
			return 0;
		}
	} else {
		s = token ? sbx__srv_sandbox_by_token(r->srv, token) : NULL;
		/* A signed URL (downloadUrl/uploadUrl) carries neither header: the
		 * sandbox is the one whose token signed it. */
		if (!s && !token && strcmp(r->url, "/files") == 0 && sbx__srv_query(r, "signature"))
			s = by_signature(r);
		if (!s && !token && strcmp(r->url, "/files") == 0 && sbx__srv_query(r, "signature")) {
			sbx__srv_reply_error(r, 401, "invalid or expired signature");
			return 0;
		}
		if (!s) {
			unauthorized(r, rpc, token ? "invalid access token" : "missing X-Access-Token");
			return 0;
		}
	}
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", s->id);
	int is_health = strcmp(r->url, "/health") == 0;
	int is_files = strcmp(r->url, "/files") == 0;
	int token_ok = sbx__srv_ct_equal(token, s->token);
	if (!is_health && !token_ok && !(is_files && files_signed(r, s))) {
		unauthorized(r, rpc, token ? "access token does not belong to this sandbox" : "missing X-Access-Token");
		sbx__srv_sandbox_put(r->srv, s);
		return 0;
	}
	/* autoResume: an authorized request wakes a paused sandbox before it
	 * goes on (an anonymous /health does not) */
	if (!is_health || token_ok)
		sbx__srv_sandbox_autoresume(s);
	r->sb = s;
	return 1;
}

int sbx__srv_authorize(struct srv_req *r)
{
	char tsid[32];
	unsigned tport = 0;
	int t = sbx__srv_proxy_target(r, tsid, &tport);
	if (t < 0)
		return 0;
	if (t == 1 && tport != SRV_ENVD_PORT)
		return sbx__srv_proxy_authorize(r, tsid, tport);
	if (t == 0 && sbx__dt_match(r->url))
		return sbx__dt_authorize(r); /* the Daytona API: Bearer */
	const char *sid = t == 1 ? tsid : sbx__srv_header(r, "E2b-Sandbox-Id");
	if (sid || is_rpc(r->url) || strcmp(r->url, "/files") == 0)
		return authorize_data(r, sid);
	if (strcmp(r->url, "/health") == 0 || (strcmp(r->url, "/metrics") == 0 && strcmp(r->method, "GET") == 0))
		return 1;
	const char *key = sbx__srv_header(r, "X-API-KEY");
	if (!sbx__srv_auth_api_key_ok(r->srv, key)) {
		sbx__srv_reply_error(r, 401, key ? "invalid API key" : "missing X-API-KEY header");
		return 0;
	}
	return 1;
}

static void data_plane(struct srv_req *r, struct srv_sandbox *s)
{
	int is_health = strcmp(r->url, "/health") == 0;
	/* As on E2B, a paused sandbox's envd is unreachable, /health included
	 * (the SDK's isRunning() is false), until resume or connect. */
	if (s->paused)
		sbx__srv_reply_error(r, 502, "sandbox %s is paused", s->id);
	else if (is_health)
		sbx__srv_reply_empty(r, 204);
	else if (strcmp(r->url, "/files") == 0)
		sbx__srv_envd_files(r, s);
	else if (sbx__str_startswith(r->url, "/process.Process/"))
		sbx__srv_envd_process(r, s, r->url + strlen("/process.Process/"));
	else if (sbx__str_startswith(r->url, "/filesystem.Filesystem/"))
		sbx__srv_envd_fs(r, s, r->url + strlen("/filesystem.Filesystem/"));
	else
		sbx__srv_reply_error(r, 404, "no envd endpoint %s", r->url);
}

/* The template file URL (templates.c) with an optional v2/v3 prefix: the
 * hash segment, or NULL. */
static const char *template_files_hash(const char *url)
{
	if (sbx__str_startswith(url, "/v2/") || sbx__str_startswith(url, "/v3/"))
		url += 3;
	if (!sbx__str_startswith(url, "/templates/"))
		return NULL;
	const char *id = url + strlen("/templates/");
	const char *slash = strchr(id, '/');
	if (!slash || slash == id || !sbx__str_startswith(slash, "/files/"))
		return NULL;
	const char *hash = slash + strlen("/files/");
	return *hash && !strchr(hash, '/') ? hash : NULL;
}

int sbx__srv_is_upload(const char *method, const char *url)
{
	return sbx__dt_is_upload(method, url) || (strcmp(method, "POST") == 0 && strcmp(url, "/files") == 0) ||
	       (strcmp(method, "PUT") == 0 && template_files_hash(url));
}

void sbx__srv_route_begin(struct srv_req *r)
{
	if (sbx__dt_match(r->url) && !r->sb && !r->proxy_port) {
		sbx__dt_route_begin(r);
		return;
	}
	if (r->sb) {
		/* a paused sandbox is answered 502 at the end; its body is dropped */
		if (strcmp(r->url, "/files") == 0 && !r->sb->paused)
			sbx__srv_envd_files_begin(r, r->sb);
		return;
	}
	const char *hash = template_files_hash(r->url);
	if (hash)
		sbx__srv_template_files_begin(r, hash);
}

/* After sbx__srv_authorize() let the request through and its body is in. */
void sbx__srv_route(struct srv_req *r)
{
	if (r->proxy_port) {
		sbx__srv_proxy_finish(r);
		return;
	}
	if (sbx__dt_match(r->url) && !r->sb) {
		sbx__dt_route(r);
		return;
	}
	if (r->sb) {
		data_plane(r, r->sb);
		return;
	}
	if (strcmp(r->url, "/health") == 0) {
		/* SDKs before 2.14.1 probe a sandbox's envd /health with only its
		 * access token: answer for that sandbox (502 = gone, which the SDK
		 * reads as "not running"), not for the server. */
		const char *token = sbx__srv_header(r, "X-Access-Token");
		struct srv_sandbox *sb = token ? sbx__srv_sandbox_by_token(r->srv, token) : NULL;
		if (sb)
			sbx__srv_sandbox_autoresume(sb);
		if ((token && !sb) || (sb && sb->paused)) {
			sbx__srv_reply_error(r, 502, "no running sandbox has this access token");
			sbx__srv_sandbox_put(r->srv, sb);
			return;
		}
		if (sb)
			sbx__srv_sandbox_put(r->srv, sb);
		sbx__srv_reply_empty(r, 204);
		return;
	}
	if (strcmp(r->url, "/metrics") == 0 && strcmp(r->method, "GET") == 0) {
		sbx__srv_metrics_reply(r);
		return;
	}
	char *segs[8];
	_cleanup_free_ char *buf = NULL;
	size_t n = sbx__srv_split_path(segs, 8, &buf, r->url);
	char **s = segs;
	size_t k = n;
	if (k > 0 && (strcmp(s[0], "v2") == 0 || strcmp(s[0], "v3") == 0) && k > 1) {
		s++;
		k--;
	}
	if (k > 0 && strcmp(s[0], "sandboxes") == 0)
		sbx__srv_control(r, segs, n);
	else if (k == 1 && strcmp(s[0], "snapshots") == 0 && strcmp(r->method, "GET") == 0)
		sbx__srv_snapshots_list(r);
	else if (k > 0 && strcmp(s[0], "templates") == 0)
		sbx__srv_templates(r, segs, n);
	else
		sbx__srv_reply_error(r, 404, "no endpoint %s %s", r->method, r->url);
}
