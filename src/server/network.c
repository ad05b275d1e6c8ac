/* SPDX-License-Identifier: MIT */
/*
 * E2B's egress lists: `network.allowOut` / `denyOut` on create and
 * `PUT /sandboxes/{id}/network` on a running sandbox, enforced by the
 * provider's rules for network=internet (docs/network.md; an allow entry
 * wins over a deny entry, allowOut alone means only these). A sandbox
 * without the internet network (the server has no --allow-internet, or the
 * create said allow_internet_access: false) reaches nothing, so lists that
 * only restrict are accepted there and change nothing; lists that would
 * open something are refused: the network mode is chosen at create.
 */
#include <errno.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/str.h"
#include "server_int.h"

#define EGRESS_MAX 256
#define ENTRY_MAX 253 /* a DNS name's length; CIDRs are shorter */

static int is_address(const char *s)
{
	return strspn(s, "0123456789./") == strlen(s);
}

/* One list: absent/null -> *out NULL; else an array of non-empty strings. */
static int parse_list(struct srv_req *r, json_t *net, const char *field, json_t **out)
{
	*out = NULL;
	json_t *v = json_object_get(net, field);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) > EGRESS_MAX) {
		sbx__srv_reply_error(r, 400, "invalid network: %s must be an array of at most %d strings", field,
				     EGRESS_MAX);
		return -1;
	}
	size_t i;
	json_t *x;
	json_array_foreach(v, i, x) {
		const char *s = json_string_value(x);
		if (!s || !*s || strlen(s) > ENTRY_MAX) {
			sbx__srv_reply_error(r, 400, "invalid network: %s[%zu] must be a CIDR block, an IPv4 address "
						"or (allowOut) a domain name of 1..%d bytes",
					     field, i, ENTRY_MAX);
			return -1;
		}
		/* E2B: "Domain names are not supported for deny rules." */
		if (!strcmp(field, "denyOut") && !is_address(s)) {
			sbx__srv_reply_error(r, 400, "invalid network: denyOut[%zu] '%s' is not a CIDR block or an IPv4 "
						"address (domain names are allowed in allowOut only)",
					     i, s);
			return -1;
		}
	}
	*out = json_incref(v);
	return 0;
}

int sbx__srv_egress_parse(struct srv_req *r, json_t *net, json_t **allow, json_t **deny)
{
	*allow = *deny = NULL;
	if (!net || json_is_null(net))
		return 0;
	if (!json_is_object(net)) {
		sbx__srv_reply_error(r, 400, "invalid network: must be an object");
		return -1;
	}
	/* Honest refusals: a proxy or header rules that were silently dropped
	 * would leave a caller believing its traffic is shaped. */
	const char *unsupported[] = { "egressProxy", "rules", "maskRequestHost" };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(unsupported); i++) {
		json_t *v = json_object_get(net, unsupported[i]);
		if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0)) {
			sbx__srv_reply_error(r, 400, "invalid network: %s is not supported by sbx serve "
						"(allowOut and denyOut are)", unsupported[i]);
			return -1;
		}
	}
	if (parse_list(r, net, "allowOut", allow) < 0)
		return -1;
	if (parse_list(r, net, "denyOut", deny) < 0) {
		json_decref(*allow);
		*allow = NULL;
		return -1;
	}
	return 0;
}

char **sbx__srv_egress_strv(json_t *arr)
{
	char **v = NULL;
	size_t i;
	json_t *x;
	json_array_foreach(arr, i, x)
		sbx__strv_push(&v, json_string_value(x));
	return v;
}

void sbx__srv_egress_json(json_t *network, const struct srv_sandbox *s)
{
	/* under the lock update() swaps them with: read unlocked, the array
	 * could be freed by a concurrent PUT between the load and the incref */
	pthread_mutex_lock(&s->srv->lock);
	if (s->allow_out)
		json_object_set(network, "allowOut", s->allow_out);
	if (s->deny_out)
		json_object_set(network, "denyOut", s->deny_out);
	pthread_mutex_unlock(&s->srv->lock);
}

/* Whether the lists open anything: an allow entry, or a deny list short of
 * everything. */
static int opens_something(json_t *allow, json_t *deny, int no_internet)
{
	if (no_internet)
		return json_array_size(allow) > 0;
	size_t i;
	json_t *x;
	json_array_foreach(deny, i, x) {
		const char *s = json_string_value(x);
		if (!strcmp(s, "0.0.0.0/0"))
			return json_array_size(allow) > 0;
	}
	return 1;
}

static void update(struct srv_req *r, struct srv_sandbox *s, json_t *b)
{
	json_t *allow = NULL, *deny = NULL;
	json_t *inet = json_object_get(b, "allow_internet_access");
	if (inet && !json_is_boolean(inet) && !json_is_null(inet)) {
		sbx__srv_reply_error(r, 400, "invalid network: allow_internet_access must be a boolean");
		return;
	}
	if (sbx__srv_egress_parse(r, b, &allow, &deny) < 0)
		return;
	/* "When set to false, it behaves the same as specifying denyOut to
	 * 0.0.0.0/0" (E2B's SandboxNetworkUpdateConfig). */
	if (inet && json_is_false(inet)) {
		json_t *all = json_pack("[s]", "0.0.0.0/0");
		json_decref(deny);
		deny = all;
	}
	if (!s->allow_internet) {
		if (opens_something(allow, deny, 1) || (inet && json_is_true(inet))) {
			sbx__srv_reply_error(r, 400, "sandbox %s has no internet access (chosen at create: the server's "
						"--allow-internet and allow_internet_access); its egress cannot be opened",
					     s->id);
			goto out;
		}
	} else {
		char **av = sbx__srv_egress_strv(allow), **dv = sbx__srv_egress_strv(deny);
		sbx_error *e = NULL;
		int rc = sbx_sandbox_set_egress(s->sb, (const char *const *)av, (const char *const *)dv, &e);
		sbx__strv_free(av);
		sbx__strv_free(dv);
		if (rc < 0) {
			sbx__srv_reply_sbx_error(r, 0, "update network", rc, e);
			goto out;
		}
	}
	pthread_mutex_lock(&s->srv->lock);
	json_t *oa = s->allow_out, *od = s->deny_out;
	s->allow_out = allow;
	s->deny_out = deny;
	pthread_mutex_unlock(&s->srv->lock);
	json_decref(oa);
	json_decref(od);
	allow = deny = NULL;
	sbx__srv_state_save(s->srv, s);
	sbx__srv_reply_empty(r, 204);
out:
	json_decref(allow);
	json_decref(deny);
}

void sbx__srv_network_update(struct srv_req *r, struct srv_sandbox *s)
{
	json_t *b = sbx__srv_json_object_body(r);
	if (!b)
		return;
	if (sbx__srv_op_begin(s, NULL) < 0) {
		sbx__srv_reply_error(r, 404, "sandbox %s not found", s->id);
	} else {
		update(r, s, b);
		sbx__srv_op_end(s);
	}
	json_decref(b);
}
