/* SPDX-License-Identifier: MIT */
/* E2B client pure pieces: endpoint rules, encoding, times, error mapping. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "providers/e2b/e2b_int.h"

static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; fake_env && fake_env[i]; i++)
		if (strncmp(fake_env[i], name, n) == 0 && fake_env[i][n] == '=')
			return fake_env[i] + n + 1;
	return NULL;
}

static struct e2b_cfg cfg_of(const char *const *env)
{
	struct e2b_cfg c;
	fake_env = env;
	sbx__e2b_cfg_from_env(&c, fake_getenv);
	return c;
}

Test(e2b_codec, defaults_are_e2b_cloud)
{
	const char *env[] = { NULL };
	struct e2b_cfg c = cfg_of(env);
	cr_assert_str_eq(c.api_url, "https://api.e2b.app");
	cr_assert_null(c.sandbox_url);
	char *u = sbx__e2b_envd_url(&c, "abc123", NULL);
	cr_assert_str_eq(u, "https://49983-abc123.e2b.app");
	free(u);
	u = sbx__e2b_envd_url(&c, "abc123", "eu.e2b.dev");
	cr_assert_str_eq(u, "https://49983-abc123.eu.e2b.dev", "the create response's domain wins");
	free(u);
	sbx__e2b_cfg_clear(&c);
}

Test(e2b_codec, sandbox_url_is_verbatim)
{
	const char *env[] = { "E2B_API_URL=http://127.0.0.1:8000/", "E2B_SANDBOX_URL=http://127.0.0.1:8000",
			      "E2B_DOMAIN=ignored.example", NULL };
	struct e2b_cfg c = cfg_of(env);
	cr_assert_str_eq(c.api_url, "http://127.0.0.1:8000");
	char *u = sbx__e2b_envd_url(&c, "x", "other.example");
	cr_assert_str_eq(u, "http://127.0.0.1:8000");
	free(u);
	sbx__e2b_cfg_clear(&c);
}

Test(e2b_codec, domain_and_scheme_override)
{
	const char *env[] = { "E2B_DOMAIN=10-0-0-5.sslip.io:8080", "OPENENV_E2B_URL_SCHEME=http", NULL };
	struct e2b_cfg c = cfg_of(env);
	cr_assert_str_eq(c.api_url, "http://api.10-0-0-5.sslip.io:8080");
	char *u = sbx__e2b_envd_url(&c, "sid", "");
	cr_assert_str_eq(u, "http://49983-sid.10-0-0-5.sslip.io:8080");
	free(u);
	sbx__e2b_cfg_clear(&c);
	const char *env2[] = { "E2B_DOMAIN=d.example", "SBX_E2B_URL_SCHEME=HTTP://",
			       "OPENENV_E2B_URL_SCHEME=https", NULL };
	c = cfg_of(env2);
	u = sbx__e2b_envd_url(&c, "sid", NULL);
	cr_assert_str_eq(u, "http://49983-sid.d.example", "SBX_ wins over OPENENV_, case and :// normalised");
	free(u);
	sbx__e2b_cfg_clear(&c);
}

Test(e2b_codec, urlenc_and_metadata_query)
{
	char *s = sbx__e2b_urlenc("/home/user/a b&c=d");
	cr_assert_str_eq(s, "%2Fhome%2Fuser%2Fa%20b%26c%3Dd");
	free(s);
	const char *kv[] = { "sbx.task=fix git", "sbx.run_id=r&1", "bad", NULL };
	char *q = sbx__e2b_metadata_query(kv);
	cr_assert_str_eq(q, "sbx.task=fix%20git&sbx.run_id=r%261");
	free(q);
	q = sbx__e2b_metadata_query(NULL);
	cr_assert_str_eq(q, "");
	free(q);
}

Test(e2b_codec, rfc3339)
{
	cr_assert_float_eq(sbx__e2b_parse_time("1970-01-01T00:00:10Z"), 10.0, 1e-9);
	cr_assert_float_eq(sbx__e2b_parse_time("2025-01-01T00:00:00.250Z"), 1735689600.25, 1e-6);
	cr_assert_float_eq(sbx__e2b_parse_time("2025-01-01T02:00:00+02:00"), 1735689600.0, 1e-6);
	cr_assert_float_eq(sbx__e2b_parse_time("garbage"), 0.0, 1e-9);
	cr_assert_float_eq(sbx__e2b_parse_time(NULL), 0.0, 1e-9);
}

static int mapped(long status, const char *body, sbx_error **e)
{
	*e = NULL;
	return sbx__e2b_map_http(status, body, body ? strlen(body) : 0, "create sandbox", e);
}

Test(e2b_codec, http_error_mapping)
{
	sbx_error *e;
	cr_assert_eq(mapped(201, "{}", &e), 0);
	cr_assert_null(e);
	cr_assert_eq(mapped(204, NULL, &e), 0);
	cr_assert_eq(mapped(401, "{\"code\":401,\"message\":\"invalid key\"}", &e), -EACCES);
	cr_assert_eq(e->http_status, 401);
	cr_assert_str_eq(e->msg, "e2b: create sandbox: HTTP 401: invalid key");
	cr_assert_str_eq(e->provider, "e2b");
	sbx_error_free(e);
	cr_assert_eq(mapped(404, "{\"code\":404,\"message\":\"sandbox x not found\"}", &e), -ENOENT);
	sbx_error_free(e);
	cr_assert_eq(mapped(429, "{\"code\":429,\"message\":\"slow down\"}", &e), -EAGAIN);
	cr_assert_eq(e->http_status, 429);
	sbx_error_free(e);
	cr_assert_eq(mapped(503, "busy", &e), -EAGAIN);
	sbx_error_free(e);
	cr_assert_eq(mapped(500, "{\"message\":\"Rate limit exceeded for team\"}", &e), -EAGAIN,
		     "a rate-limit body is a throttle whatever the status");
	sbx_error_free(e);
	cr_assert_eq(mapped(400, "{\"code\":400,\"message\":\"template name is required\"}", &e), -EINVAL);
	cr_assert(strstr(e->msg, "template name is required"), "the server's body is surfaced: %s", e->msg);
	sbx_error_free(e);
	cr_assert_eq(mapped(502, "<html>\nbad gateway</html>", &e), -EIO);
	cr_assert_null(strchr(e->msg, '\n'));
	sbx_error_free(e);
	cr_assert_eq(mapped(409, "{}", &e), -EEXIST);
	sbx_error_free(e);
}

Test(e2b_codec, connect_codes)
{
	cr_assert_eq(sbx__e2b_map_connect_code("not_found"), -ENOENT);
	cr_assert_eq(sbx__e2b_map_connect_code("already_exists"), -EEXIST);
	cr_assert_eq(sbx__e2b_map_connect_code("invalid_argument"), -EINVAL);
	cr_assert_eq(sbx__e2b_map_connect_code("unauthenticated"), -EACCES);
	cr_assert_eq(sbx__e2b_map_connect_code("resource_exhausted"), -EAGAIN);
	cr_assert_eq(sbx__e2b_map_connect_code("unavailable"), -EAGAIN);
	cr_assert_eq(sbx__e2b_map_connect_code("deadline_exceeded"), -ETIMEDOUT);
	cr_assert_eq(sbx__e2b_map_connect_code("internal"), -EIO);
	cr_assert_eq(sbx__e2b_map_connect_code(NULL), -EIO);
}

Test(e2b_codec, multipart_framing)
{
	char *pre, *suf, ct[128];
	size_t pl, sl;
	sbx__e2b_multipart(&pre, &pl, &suf, &sl, ct, sizeof(ct), "/home/user/a\"b");
	cr_assert(strncmp(ct, "multipart/form-data; boundary=", 30) == 0);
	const char *bnd = ct + 30;
	cr_assert(strncmp(pre, "--", 2) == 0 && strncmp(pre + 2, bnd, strlen(bnd)) == 0);
	cr_assert(strstr(pre, "name=\"file\"; filename=\"/home/user/a%22b\""));
	cr_assert(strstr(pre, "\r\n\r\n") == pre + pl - 4);
	cr_assert(strstr(suf, bnd) && strcmp(suf + sl - 4, "--\r\n") == 0);
	free(pre);
	free(suf);
}

Test(e2b_codec, shell_quote)
{
	char *q = sbx__e2b_shq("it's a \"test\"");
	cr_assert_str_eq(q, "'it'\\''s a \"test\"'");
	free(q);
}
