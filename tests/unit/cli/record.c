/* SPDX-License-Identifier: MIT */
/* The trajectory record of `sbx eval` (src/cli/eval_record.c): what it keeps,
 * what it never writes (credentials, URL passwords), odd bytes. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/eval.h"

Test(cli_record, url_redaction)
{
	const struct { const char *in, *out; } v[] = {
		{ "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1" },
		{ "https://user:secret@api.example.com/v1", "https://api.example.com/v1" },
		{ "https://api.example.com/v1?api_key=secret#x", "https://api.example.com/v1" },
		{ "https://tok@h", "https://h" },
		{ "h:1/v1?k=secret", "h:1/v1" },
		{ "https://h/p@q", "https://h/p@q" }, /* an @ in the path is not userinfo */
		{ "", "" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char *r = eval_url_redact(v[i].in);
		cr_assert_str_eq(r, v[i].out, "%s", v[i].in);
		free(r);
	}
	cr_assert_null(eval_url_redact(NULL));
}

static json_t *record(const sbx_episode_result *r, const char *const *args)
{
	struct eval_meta m = { .model = "m", .api_base = "http://u:pw@h/v1?key=k1", .provider = "local",
			       .task_dir = "/t/x", .sample = 3, .run = "eval", .agent_args = args };
	char *s = eval_record(r, &m);
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);
	cr_assert_not_null(j, "%s: %s", je.text, s);
	cr_assert_null(strstr(s, "pw"), "%s", s);
	cr_assert_null(strstr(s, "k1"), "%s", s);
	free(s);
	return j;
}

Test(cli_record, fields_settings_and_no_credentials)
{
	sbx_episode_result r;
	memset(&r, 0, sizeof(r));
	r.task = "x";
	r.agent = "policy";
	r.status = SBX_EPISODE_SUBMITTED;
	r.has_reward = 1;
	r.reward = 1;
	r.verifier_exit_code = -1;
	r.end_reason = "task_complete";
	r.detail = "bad \xff byte";
	r.trajectory_json = "{\"turns\":[{\"index\":0,\"command\":\"true\"}],"
			    "\"messages\":[{\"role\":\"system\",\"content\":\"s\"}],\"other\":1}";
	r.agent_metrics_json = "{\"turns\":1}";
	const char *const args[] = { "model=m", "temperature=0.5", "api_key_file=/secret/path",
				     "API_KEY=zzz", "x_auth_token=t", "extra_body={\"a\":1}",
				     "api_base=http://u:pw@h/v1", "=novalue", "noequals", NULL };
	json_t *j = record(&r, args);
	cr_assert_str_eq(json_string_value(json_object_get(j, "schema")), EVAL_SCHEMA);
	cr_assert_eq(json_integer_value(json_object_get(j, "sample")), 3);
	cr_assert(json_is_true(json_object_get(j, "scored")));
	cr_assert_str_eq(json_string_value(json_object_get(j, "api_base")), "http://h/v1");
	cr_assert_str_eq(json_string_value(json_object_get(j, "detail")), "bad ? byte");
	cr_assert_eq(json_array_size(json_object_get(j, "turns")), 1);
	cr_assert_eq(json_array_size(json_object_get(j, "messages")), 1);
	cr_assert_null(json_object_get(j, "other"), "only turns and messages come from the trajectory");
	json_t *s = json_object_get(j, "settings");
	cr_assert_str_eq(json_string_value(json_object_get(s, "model")), "m");
	cr_assert_str_eq(json_string_value(json_object_get(s, "temperature")), "0.5");
	cr_assert_str_eq(json_string_value(json_object_get(s, "extra_body")), "{\"a\":1}");
	cr_assert_str_eq(json_string_value(json_object_get(s, "api_base")), "http://h/v1");
	cr_assert_null(json_object_get(s, "api_key_file"));
	cr_assert_null(json_object_get(s, "API_KEY"));
	cr_assert_null(json_object_get(s, "x_auth_token"));
	cr_assert_eq(json_object_size(s), 4);
	cr_assert(json_is_null(json_object_get(json_object_get(j, "verifier"), "exit_code")));
	json_decref(j);
}

Test(cli_record, not_scored_and_no_trajectory)
{
	sbx_episode_result r;
	memset(&r, 0, sizeof(r));
	r.task = "x";
	r.agent = "oracle";
	r.status = SBX_EPISODE_TIME_LIMIT;
	r.has_reward = 1; /* training's 0 for a time limit */
	r.verifier_exit_code = 0;
	r.trajectory_json = "not json";
	json_t *j = record(&r, NULL);
	cr_assert(json_is_false(json_object_get(j, "scored")), "a time limit is never scored");
	cr_assert(json_is_real(json_object_get(j, "reward")));
	cr_assert_eq(json_array_size(json_object_get(j, "turns")), 0);
	cr_assert(json_is_array(json_object_get(j, "messages")));
	cr_assert_eq(json_object_size(json_object_get(j, "settings")), 0);
	cr_assert(json_is_object(json_object_get(j, "metrics")));
	cr_assert(json_is_null(json_object_get(j, "end_reason")));
	json_decref(j);
}
