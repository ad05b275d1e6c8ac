/* SPDX-License-Identifier: MIT */
/* Daytona client pure pieces on canned bodies: the create body, the Sandbox
 * DTO, state polling, error and throttle mapping, multipart replies. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "providers/daytona/daytona_int.h"

static json_t *body_of(const struct dtn_create *cr)
{
	return sbx__dtn_create_body(cr);
}

Test(daytona_codec, an_image_goes_as_a_one_line_dockerfile)
{
	const char *labels[] = { "sbx.run=1", "task=a=b", NULL };
	const char *env[] = { "A=1", "B=x y", NULL };
	struct dtn_create cr = { .image = "python:3.12-slim", .labels = labels, .env = env, .cpus = 1.5,
				 .memory_mb = 1500, .disk_mb = 3072, .ttl_s = 1801, .target = "eu" };
	json_t *b = body_of(&cr);
	json_t *bi = json_object_get(b, "buildInfo");
	cr_assert_str_eq(json_string_value(json_object_get(bi, "dockerfileContent")), "FROM python:3.12-slim\n");
	cr_assert_null(json_object_get(b, "snapshot"));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "labels"), "task")), "a=b");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "env"), "B")), "x y");
	cr_assert_eq(json_integer_value(json_object_get(b, "cpu")), 2, "cores round up");
	cr_assert_eq(json_integer_value(json_object_get(b, "memory")), 2, "GiB round up");
	cr_assert_eq(json_integer_value(json_object_get(b, "disk")), 3);
	cr_assert_eq(json_integer_value(json_object_get(b, "autoStopInterval")), 31, "minutes round up");
	cr_assert_eq(json_integer_value(json_object_get(b, "autoDeleteInterval")), 0, "a stopped orphan goes at once");
	cr_assert_str_eq(json_string_value(json_object_get(b, "target")), "eu");
	json_decref(b);
}

Test(daytona_codec, snapshot_dockerfile_and_no_ttl)
{
	struct dtn_create cr = { .image = "snapshot:sbx-abc123" };
	json_t *b = body_of(&cr);
	cr_assert_str_eq(json_string_value(json_object_get(b, "snapshot")), "sbx-abc123");
	cr_assert_null(json_object_get(b, "buildInfo"));
	cr_assert_null(json_object_get(b, "cpu"), "no size asked: Daytona's defaults");
	cr_assert_eq(json_integer_value(json_object_get(b, "autoStopInterval")), 0, "no TTL: never stops");
	cr_assert_eq(json_integer_value(json_object_get(b, "autoDeleteInterval")), -1);
	json_decref(b);
	cr.image = "FROM busybox\nRUN true\n";
	b = body_of(&cr);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "buildInfo"), "dockerfileContent")),
			 "FROM busybox\nRUN true\n", "a Dockerfile goes as it is");
	json_decref(b);
	cr_assert_eq(sbx__dtn_minutes(0), 0);
	cr_assert_eq(sbx__dtn_minutes(1), 1);
	cr_assert_eq(sbx__dtn_minutes(60), 1);
	cr_assert_eq(sbx__dtn_minutes(61), 2);
}

Test(daytona_codec, sandbox_dto)
{
	const char *s = "{\"id\":\"sb-1\",\"state\":\"started\",\"snapshot\":\"base\","
			"\"toolboxProxyUrl\":\"https://proxy.app.daytona.io/toolbox\",\"labels\":{\"a\":\"1\",\"n\":2},"
			"\"createdAt\":\"2026-12-04T10:00:00.123Z\",\"lastActivityAt\":\"2026-12-04T10:00:00Z\","
			"\"autoStopInterval\":15}";
	json_t *j = json_loads(s, 0, NULL);
	struct dtn_info in;
	cr_assert_eq(sbx__dtn_info_parse(&in, j, NULL), 0);
	cr_assert_str_eq(in.id, "sb-1");
	cr_assert_str_eq(in.toolbox_url, "https://proxy.app.daytona.io/toolbox");
	cr_assert_str_eq(in.labels[0], "a=1");
	cr_assert_null(in.labels[1], "a label that is not a string is skipped");
	cr_assert_eq(in.created_at, 1796378400.0);
	cr_assert_eq(in.expires_at, 1796378400.0 + 900, "last activity + autoStopInterval");
	sbx__dtn_info_clear(&in);
	json_decref(j);
	j = json_loads("{\"state\":\"started\"}", 0, NULL);
	sbx_error *e = NULL;
	cr_assert_eq(sbx__dtn_info_parse(&in, j, &e), -EPROTO);
	cr_assert(strstr(e->msg, "without id"));
	sbx_error_free(e);
	json_decref(j);
}

Test(daytona_codec, state_polling)
{
	cr_assert_eq(sbx__dtn_state_step("started"), 1);
	cr_assert_eq(sbx__dtn_state_step("creating"), 0);
	cr_assert_eq(sbx__dtn_state_step("pending_build"), 0);
	cr_assert_eq(sbx__dtn_state_step("building_snapshot"), 0);
	cr_assert_eq(sbx__dtn_state_step("starting"), 0);
	cr_assert_eq(sbx__dtn_state_step(NULL), 0);
	cr_assert_lt(sbx__dtn_state_step("error"), 0);
	cr_assert_lt(sbx__dtn_state_step("build_failed"), 0);
	cr_assert_lt(sbx__dtn_state_step("destroyed"), 0);
}

static int map(long status, const char *body, sbx_error **e)
{
	return sbx__dtn_map_http(status, body, body ? strlen(body) : 0, "create sandbox", e);
}

Test(daytona_codec, errors_and_throttles)
{
	sbx_error *e = NULL;
	cr_assert_eq(map(200, "{}", &e), 0);
	cr_assert_eq(map(400, "{\"statusCode\":400,\"message\":\"Total disk limit exceeded. Maximum allowed: 30GiB\","
			      "\"error\":\"Bad Request\"}", &e), -EAGAIN, "the disk quota is a throttle");
	cr_assert_eq(e->http_status, 429);
	cr_assert(strstr(e->msg, "Total disk limit exceeded"), "%s", e->msg);
	sbx_error_free(e), e = NULL;
	cr_assert_eq(map(403, "{\"message\":\"Sandbox resource limit reached (16)\"}", &e), -EAGAIN);
	sbx_error_free(e), e = NULL;
	cr_assert_eq(map(429, "Too Many Requests", &e), -EAGAIN);
	sbx_error_free(e), e = NULL;
	cr_assert_eq(map(400, "{\"message\":[\"cpu must be a number\"]}", &e), -EINVAL);
	cr_assert(strstr(e->msg, "cpu must be a number"));
	sbx_error_free(e), e = NULL;
	cr_assert_eq(map(401, "{\"message\":\"Unauthorized\"}", &e), -EACCES);
	sbx_error_free(e), e = NULL;
	cr_assert_eq(map(404, "{\"message\":\"Sandbox not found\"}", &e), -ENOENT);
	sbx_error_free(e), e = NULL;
	cr_assert_eq(map(500, "<html>\n</html>", &e), -EIO);
	cr_assert_null(strchr(e->msg, '\n'), "one line");
	sbx_error_free(e), e = NULL;
	/* the description's classifier, as the core's create pipeline asks it */
	const sbx_provider_desc *d = sbx_provider_describe("daytona");
	cr_assert_not_null(d);
	sbx_error q = { .code = -EIO, .msg = (char *)"daytona: create: HTTP 400: Snapshot quota exceeded" };
	cr_assert_eq(d->is_throttle(&q), 1);
	sbx_error n = { .code = -EINVAL, .msg = (char *)"daytona: create: HTTP 400: bad image" };
	cr_assert_eq(d->is_throttle(&n), -1);
	sbx_error h = { .code = -EIO, .http_status = 429, .msg = (char *)"x" };
	cr_assert_eq(d->is_throttle(&h), 1);
}

struct seen {
	int n;
	char names[4][32], files[4][64], data[4][64];
};

static int on_part(const char *name, const char *filename, const char *data, size_t len, void *ud)
{
	struct seen *s = ud;
	if (s->n >= 4)
		return -E2BIG;
	snprintf(s->names[s->n], 32, "%s", name);
	snprintf(s->files[s->n], 64, "%s", filename ? filename : "-");
	snprintf(s->data[s->n], 64, "%.*s", (int)len, data);
	s->n++;
	return 0;
}

Test(daytona_codec, multipart_replies)
{
	const char body[] = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/a b\"\r\n"
			    "Content-Type: application/octet-stream\r\n\r\nhello\r\n--XyZ\r\n"
			    "Content-Disposition: form-data; name=\"error\"\r\n\r\n{\"code\":\"FILE_NOT_FOUND\"}\r\n"
			    "--XyZ--\r\n";
	struct seen s = { 0 };
	cr_assert_eq(sbx__dtn_multipart_parse(body, sizeof(body) - 1, "multipart/form-data; boundary=XyZ", on_part, &s),
		     0);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.names[0], "file");
	cr_assert_str_eq(s.files[0], "/tmp/a b");
	cr_assert_str_eq(s.data[0], "hello");
	cr_assert_str_eq(s.names[1], "error");
	cr_assert_str_eq(s.files[1], "-");
	memset(&s, 0, sizeof(s));
	cr_assert_eq(sbx__dtn_multipart_parse(body, sizeof(body) - 1, "multipart/form-data; boundary=\"XyZ\"", on_part,
					      &s), 0, "a quoted boundary");
	cr_assert_eq(sbx__dtn_multipart_parse(body, 40, "multipart/form-data; boundary=XyZ", on_part, &s), -EPROTO,
		     "a cut body");
	cr_assert_eq(sbx__dtn_multipart_parse(body, sizeof(body) - 1, "application/json", on_part, &s), -EPROTO);
	char *h = sbx__dtn_part_head("B", "files[0].path", NULL);
	cr_assert_str_eq(h, "--B\r\nContent-Disposition: form-data; name=\"files[0].path\"\r\n\r\n");
	free(h);
}
