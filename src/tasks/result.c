/* SPDX-License-Identifier: MIT */
/*
 * The episode result record as JSON: one compact object per episode, the line
 * format of `sbx golden --out FILE.jsonl` and of <logs>/result.json. The
 * schema is documented in docs/tasks.md; fields are only ever added. The
 * agent's end reason and metrics, the trajectory (turns played, an agent's
 * messages) and the connector's extra fields appear only when they were given.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/task.h>

#include "util/alloc.h"

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* Seconds rounded to milliseconds. */
static double ms(double s)
{
	return round(s * 1000) / 1000;
}

/* Log tails are arbitrary bytes: invalid UTF-8 becomes '?'. */
static json_t *text(const char *s)
{
	json_t *j = json_stringn(s, strlen(s));
	if (j)
		return j;
	char *c = xstrdup(s);
	for (char *p = c; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(c);
	free(c);
	return j;
}

char *sbx_episode_result_to_json(const sbx_episode_result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "task", str_or_null(r->task));
	json_object_set_new(o, "agent", str_or_null(r->agent));
	json_object_set_new(o, "exit_status", json_string(sbx_episode_status_name(r->status)));
	json_object_set_new(o, "reward", r->has_reward ? json_real(r->reward) : json_null());
	json_t *rewards = r->rewards_json ? json_loads(r->rewards_json, 0, NULL) : NULL;
	json_object_set_new(o, "rewards", rewards ? rewards : json_null());
	json_object_set_new(o, "reward_source", str_or_null(r->reward_source));
	json_object_set_new(o, "detail", r->detail ? text(r->detail) : json_null());
	json_object_set_new(o, "image", str_or_null(r->image));
	json_object_set_new(o, "image_source", str_or_null(r->image_how));
	json_object_set_new(o, "sandbox_id", str_or_null(r->sandbox_id));
	json_object_set_new(o, "agent_exit_code",
			    r->agent_exit_code >= 0 ? json_integer(r->agent_exit_code) : json_null());
	json_object_set_new(o, "agent_timed_out", json_boolean(r->agent_timed_out));
	json_object_set_new(o, "verifier_ran", json_boolean(r->verifier_ran));
	json_object_set_new(o, "verifier_exit_code", r->verifier_exit_code >= 0
			    ? json_integer(r->verifier_exit_code) : json_null());
	json_object_set_new(o, "verifier_timed_out", json_boolean(r->verifier_timed_out));
	json_t *t = json_object();
	static const char *const keys[SBX_EPISODE_STAGES] = { "resolve", "create", "agent", "verify",
							      "destroy" };
	for (int i = 0; i < SBX_EPISODE_STAGES; i++)
		json_object_set_new(t, keys[i], json_real(ms(r->stage_seconds[i])));
	json_object_set_new(t, "total", json_real(ms(r->total_seconds)));
	json_object_set_new(o, "seconds", t);
	json_object_set_new(o, "logs_dir", str_or_null(r->logs_dir));
	if (r->agent_log_tail && *r->agent_log_tail)
		json_object_set_new(o, "agent_log_tail", text(r->agent_log_tail));
	if (r->verifier_log_tail && *r->verifier_log_tail)
		json_object_set_new(o, "verifier_log_tail",
				    text(r->verifier_log_tail));
	if (r->end_reason)
		json_object_set_new(o, "end_reason", json_string(r->end_reason));
	json_t *metrics = r->agent_metrics_json ? json_loads(r->agent_metrics_json, 0, NULL) : NULL;
	if (metrics)
		json_object_set_new(o, "agent_metrics", metrics);
	json_t *traj = r->trajectory_json ? json_loads(r->trajectory_json, 0, NULL) : NULL;
	if (traj)
		json_object_set_new(o, "trajectory", traj);
	/* The connector's fields never replace the driver's. */
	json_t *extra = r->extra_json ? json_loads(r->extra_json, 0, NULL) : NULL;
	if (json_is_object(extra)) {
		const char *k;
		json_t *v;
		json_object_foreach(extra, k, v)
			if (!json_object_get(o, k))
				json_object_set(o, k, v);
	}
	json_decref(extra);
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(o);
	if (!s)
		s = xstrdup("{}");
	return s;
}
