/* SPDX-License-Identifier: MIT */
/*
 * The plain HTTP routes of `sbx openenv serve`, as OpenEnv's FastAPI server
 * has them: /health, /metadata, /schema, and the stateless /reset, /step and
 * /state (each request gets a fresh environment that is closed after it, so
 * an episode needs WS /ws).
 */
#include <stdlib.h>
#include <string.h>

#include <sbx/version.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "openenv_int.h"

static const char schema_json[] =
	"{\"action\":{\"title\":\"Tbench2Action\",\"type\":\"object\",\"additionalProperties\":false,"
	"\"properties\":{"
	"\"action_type\":{\"type\":\"string\",\"default\":\"exec\",\"enum\":[\"exec\",\"write\",\"view\","
	"\"wait\",\"kill\",\"write_file\",\"evaluate\",\"close\"]},"
	"\"command\":{\"type\":\"string\",\"default\":\"\"},"
	"\"session_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"default\":null},"
	"\"block\":{\"type\":\"boolean\",\"default\":true},"
	"\"wait_seconds\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}],\"default\":null},"
	"\"file_path\":{\"type\":\"string\",\"default\":\"\"},"
	"\"content\":{\"type\":\"string\",\"default\":\"\"},"
	"\"timeout_s\":{\"anyOf\":[{\"type\":\"number\",\"exclusiveMinimum\":0},{\"type\":\"null\"}],"
	"\"default\":null},"
	"\"metadata\":{\"type\":\"object\",\"default\":{}}}},"
	"\"observation\":{\"title\":\"Tbench2Observation\",\"type\":\"object\",\"properties\":{"
	"\"instruction\":{\"type\":\"string\"},\"output\":{\"type\":\"string\"},"
	"\"success\":{\"type\":\"boolean\"},\"error\":{\"type\":\"string\"},"
	"\"task_id\":{\"type\":\"string\"},\"task_path\":{\"type\":\"string\"},"
	"\"session_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"action_type\":{\"type\":\"string\"},\"info\":{\"type\":\"object\"},"
	"\"reward\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"}]},"
	"\"done\":{\"type\":\"boolean\"}}},"
	"\"state\":{\"title\":\"Tbench2State\",\"type\":\"object\",\"properties\":{"
	"\"episode_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"step_count\":{\"type\":\"integer\",\"minimum\":0},"
	"\"task_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"task_path\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"session_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"terminal_ready\":{\"type\":\"boolean\"},"
	"\"last_action_type\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"last_command\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},"
	"\"last_output\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}}}}";

static void detail(struct oe_conn *c, int status, const char *loc, const char *msg)
{
	json_t *d;
	if (status == 422) /* FastAPI's validation error shape */
		d = json_pack("{s:[{s:[s,s], s:s, s:s}]}", "detail", "loc", "body", loc, "msg", msg, "type",
			      "value_error");
	else
		d = json_pack("{s:s}", "detail", msg);
	char *s = json_dumps(d, JSON_COMPACT);
	json_decref(d);
	sbx__oe_send_http(c, status, s ? s : "{}");
	free(s);
}

static json_t *body_object(struct oe_conn *c, const char *body, size_t len)
{
	if (len == 0)
		return json_object();
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		detail(c, 422, "body", "expected a JSON object");
		return NULL;
	}
	return j;
}

static void post_reset(struct oe_conn *c, const char *body, size_t len)
{
	json_t *j = body_object(c, body, len);
	const char *task_id = NULL, *eid = NULL, *bad;
	if (!j)
		return;
	if ((bad = sbx__oe_reset_args(c->srv, j, &task_id, &eid))) {
		detail(c, 422, "task_id", bad + strlen("data."));
	} else {
		struct oe_job *job = xcalloc(1, sizeof(*job));
		job->kind = OE_JOB_HTTP_RESET;
		job->conn = c;
		job->task_id = xstrdup(task_id);
		sbx__oe_submit(c->srv, job);
	}
	json_decref(j);
}

static void post_step(struct oe_conn *c, const char *body, size_t len)
{
	json_t *j = body_object(c, body, len);
	const char *type, *command, *bad;
	double timeout;
	if (!j)
		return;
	json_t *a = json_object_get(j, "action"), *to = json_object_get(j, "timeout_s");
	if (!a) {
		detail(c, 422, "action", "field required: the action object");
	} else if (to && !json_is_null(to) && (!json_is_number(to) || json_number_value(to) <= 0)) {
		detail(c, 422, "timeout_s", "expected a number > 0");
	} else if ((bad = sbx__oe_action_check(a, &type, &command, &timeout))) {
		detail(c, 422, "action", bad);
	} else {
		char *r = sbx__oe_http_obs(NULL, type, "no episode: HTTP /step is stateless (a fresh environment "
					   "per request); play episodes over WS /ws");
		sbx__oe_send_http(c, 200, r);
		free(r);
	}
	json_decref(j);
}

void sbx__oe_env_http(struct oe_conn *c, const struct oe_http_req *r, const char *body, size_t len)
{
	const char *p = r->path;
	int get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");
	if (!strcmp(p, "/health")) {
		if (get)
			sbx__oe_send_http(c, 200, "{\"status\":\"healthy\"}");
		else
			detail(c, 405, NULL, "Method Not Allowed");
	} else if (!strcmp(p, "/metadata")) {
		if (get)
			sbx__oe_send_http(c, 200, "{\"name\":\"sbx\",\"description\":\"Harbor (Terminal-Bench 2) "
					  "tasks, one fresh sbx sandbox per WebSocket session\",\"readme_content\":"
					  "null,\"version\":\"" SBX_VERSION_STRING "\",\"author\":\"sbx\","
					  "\"documentation_url\":null}");
		else
			detail(c, 405, NULL, "Method Not Allowed");
	} else if (!strcmp(p, "/schema")) {
		if (get)
			sbx__oe_send_http(c, 200, schema_json);
		else
			detail(c, 405, NULL, "Method Not Allowed");
	} else if (!strcmp(p, "/state")) {
		if (get)
			sbx__oe_send_http(c, 200, "{\"episode_id\":null,\"step_count\":0}");
		else
			detail(c, 405, NULL, "Method Not Allowed");
	} else if (!strcmp(p, "/reset")) {
		if (post)
			post_reset(c, body, len);
		else
			detail(c, 405, NULL, "Method Not Allowed");
	} else if (!strcmp(p, "/step")) {
		if (post)
			post_step(c, body, len);
		else
			detail(c, 405, NULL, "Method Not Allowed");
	} else if (!strcmp(p, "/ws")) {
		detail(c, 426, NULL, "WS /ws wants a WebSocket upgrade (Upgrade: websocket)");
	} else {
		detail(c, 404, NULL, "Not Found");
	}
}
