/* SPDX-License-Identifier: MIT */
/*
 * The training record of one `sbx eval` episode (schema sbx.trajectory/1,
 * docs/trajectories.md): who played what where, every turn as it was run and
 * fed back, the model's messages, the reward and the timings. Built from the
 * episode result and the agent's trajectory (turns + messages), never from
 * the agent's settings, so no key or key path can reach it.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "eval.h"
#include "util/alloc.h"

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* Agent and verifier details are arbitrary bytes: invalid UTF-8 becomes '?'
 * (jansson refuses it and the key would silently go missing). */
static json_t *text_or_null(const char *s)
{
	if (!s)
		return json_null();
	json_t *j = json_string(s);
	if (j)
		return j;
	char *c = xstrdup(s);
	for (char *p = c; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(c);
	free(c);
	return j ? j : json_null();
}

static double ms(double s)
{
	return round(s * 1000) / 1000;
}

char *eval_url_redact(const char *url)
{
	if (!url)
		return NULL;
	const char *p = strstr(url, "://");
	const char *host = p ? p + 3 : url;
	const char *end = host + strcspn(host, "/?#");
	const char *at = memchr(host, '@', (size_t)(end - host));
	/* user:password@ and any ?query or #fragment go: a key may hide there. */
	size_t tail = strcspn(end, "?#");
	return xasprintf("%.*s%.*s%.*s", (int)(host - url), url,
			 (int)(end - (at ? at + 1 : host)), at ? at + 1 : host, (int)tail, end);
}

/* The array `key` of the agent's trajectory object, or a new empty one. */
static json_t *traj_array(json_t *traj, const char *key)
{
	json_t *a = json_object_get(traj, key);
	return json_is_array(a) ? json_incref(a) : json_array();
}

/* A setting whose name mentions a credential is never written, not even a
 * key file's path; URLs lose their user:password@ and query. */
static json_t *settings(const char *const *args)
{
	static const char *const secretish[] = { "key", "token", "secret", "passw", "auth",
						 "cred", "header" };
	json_t *o = json_object();
	for (size_t i = 0; args && args[i]; i++) {
		const char *eq = strchr(args[i], '=');
		if (!eq || eq == args[i])
			continue;
		char *k = xstrndup(args[i], (size_t)(eq - args[i]));
		bool drop = false;
		for (size_t j = 0; j < sizeof(secretish) / sizeof(secretish[0]); j++)
			drop |= strcasestr(k, secretish[j]) != NULL;
		if (!drop) {
			char *v = strstr(eq + 1, "://") ? eval_url_redact(eq + 1) : xstrdup(eq + 1);
			json_t *jv = json_string(v);
			if (jv)
				json_object_set_new(o, k, jv);
			free(v);
		}
		free(k);
	}
	return o;
}

char *eval_record(const sbx_episode_result *r, const struct eval_meta *m)
{
	json_t *traj = r->trajectory_json ? json_loads(r->trajectory_json, 0, NULL) : NULL;
	json_t *o = json_object();
	json_object_set_new(o, "schema", json_string(EVAL_SCHEMA));
	json_object_set_new(o, "sbx_version", json_string(sbx_version_string()));
	json_object_set_new(o, "run", json_string(m->run ? m->run : "eval"));
	json_object_set_new(o, "task", str_or_null(r->task));
	json_object_set_new(o, "task_dir", str_or_null(m->task_dir));
	json_object_set_new(o, "sample", json_integer(m->sample));
	json_object_set_new(o, "agent", str_or_null(r->agent));
	json_object_set_new(o, "model", str_or_null(m->model));
	char *base = eval_url_redact(m->api_base);
	json_object_set_new(o, "api_base", str_or_null(base));
	free(base);
	json_object_set_new(o, "settings", settings(m->agent_args));
	json_object_set_new(o, "provider", str_or_null(m->provider));
	json_object_set_new(o, "sandbox_id", str_or_null(r->sandbox_id));
	json_object_set_new(o, "image", str_or_null(r->image));
	json_object_set_new(o, "status", json_string(sbx_episode_status_name(r->status)));
	json_object_set_new(o, "scored", json_boolean(r->has_reward &&
						      r->status == SBX_EPISODE_SUBMITTED));
	json_object_set_new(o, "reward", r->has_reward ? json_real(r->reward) : json_null());
	json_t *rewards = r->rewards_json ? json_loads(r->rewards_json, 0, NULL) : NULL;
	json_object_set_new(o, "rewards", rewards ? rewards : json_null());
	json_object_set_new(o, "end_reason", str_or_null(r->end_reason));
	json_object_set_new(o, "detail", text_or_null(r->detail));
	json_object_set_new(o, "turns", traj_array(traj, "turns"));
	json_object_set_new(o, "messages", traj_array(traj, "messages"));
	json_t *metrics = r->agent_metrics_json ? json_loads(r->agent_metrics_json, 0, NULL) : NULL;
	json_object_set_new(o, "metrics", json_is_object(metrics) ? metrics : json_object());
	if (metrics && !json_is_object(metrics))
		json_decref(metrics);
	json_object_set_new(o, "agent_timed_out", json_boolean(r->agent_timed_out));
	json_object_set_new(o, "verifier",
			    json_pack("{s:b,s:o,s:b}", "ran", r->verifier_ran, "exit_code",
				      r->verifier_exit_code >= 0 ? json_integer(r->verifier_exit_code)
								 : json_null(),
				      "timed_out", r->verifier_timed_out));
	json_t *t = json_object();
	static const char *const keys[SBX_EPISODE_STAGES] = { "resolve", "create", "agent", "verify",
							      "destroy" };
	for (int i = 0; i < SBX_EPISODE_STAGES; i++)
		json_object_set_new(t, keys[i], json_real(ms(r->stage_seconds[i])));
	json_object_set_new(t, "total", json_real(ms(r->total_seconds)));
	json_object_set_new(o, "seconds", t);
	json_decref(traj);
	/* Invalid UTF-8 in a string makes jansson refuse it (json_string NULL
	 * -> the key is dropped); the turns came through jansson already. */
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(o);
	return s ? s : xstrdup("{}");
}
