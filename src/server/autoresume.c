/* SPDX-License-Identifier: MIT */
/*
 * E2B's auto-resume (`lifecycle: {onTimeout: 'pause', autoResume: true}`,
 * sent as `autoResume: {enabled: true}` with `autoPause: true`): a paused
 * sandbox created with it is resumed by the next request that reaches it,
 * envd calls (/health included) and its routed ports alike, with the
 * timeout it was created with, before the request goes on; the client sees
 * a running sandbox. Without it a paused sandbox stays unreachable until
 * resume or connect (router.c, proxy_route.c).
 */
#include <errno.h>

#include "../util/log.h"
#include "server_int.h"

int sbx__srv_parse_auto_resume(struct srv_req *r, json_t *v, int auto_pause, int *out)
{
	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	json_t *en = json_is_object(v) ? json_object_get(v, "enabled") : NULL;
	if (!json_is_object(v) || (en && !json_is_boolean(en) && !json_is_null(en))) {
		sbx__srv_reply_error(r, 400, "invalid sandbox spec: autoResume must be an object {\"enabled\": boolean}");
		return -EINVAL;
	}
	if (json_is_true(en) && !auto_pause) {
		/* what the SDK enforces: a sandbox that is killed at its timeout
		 * has nothing to resume */
		sbx__srv_reply_error(r, 400, "invalid sandbox spec: autoResume.enabled needs autoPause: true "
					"(lifecycle onTimeout 'pause')");
		return -EINVAL;
	}
	*out = json_is_true(en);
	return 0;
}

int sbx__srv_sandbox_autoresume(struct srv_sandbox *s)
{
	struct server *srv = s->srv;
	pthread_mutex_lock(&srv->lock);
	/* A transition on a sandbox that is not paused is a snapshot's or a
	 * fork's hold (snapshots.c) or a pause about to start: it still runs.
	 * Only with autoResume is a pause about to start worth waiting out. */
	int on = s->auto_resume, paused = s->paused || (s->transition && on);
	long long secs = s->timeout_s > 0 ? s->timeout_s : 300;
	pthread_mutex_unlock(&srv->lock);
	if (!paused)
		return 1;
	if (!on)
		return 0;
	if (srv->cfg.max_timeout_s && secs > srv->cfg.max_timeout_s)
		secs = srv->cfg.max_timeout_s;
	sbx_error *e = NULL;
	int rc = sbx__srv_op_begin(s, &e);
	if (rc == 0) {
		rc = sbx__srv_sandbox_wake(s, secs, 0, &e);
		sbx__srv_op_end(s);
	}
	if (rc < 0)
		SBX_LOGW("serve: auto-resume %s: %s", s->id, e ? e->msg : "?");
	else if (rc == 1)
		SBX_LOGI("serve: sandbox %s resumed by a request (autoResume)", s->id);
	sbx_error_free(e);
	return rc >= 0;
}
