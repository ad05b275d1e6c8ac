/* SPDX-License-Identifier: MIT */
/*
 * Image reference parsing (src/images/ref.c), plus the network-free policy of
 * the registry client (src/images/registry_auth.c): the loopback/insecure
 * plain-HTTP rule, mirrors, WWW-Authenticate parameters and the key file.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "images/ref.h"
#include "images/registry_int.h"

static void expect_ref(const char *ref, const char *registry, const char *repo, const char *tag,
		       const char *digest)
{
	struct sbx_image_ref r;
	sbx_error *err = NULL;
	int rc = sbx__image_ref_parse(&r, ref, &err);
	cr_assert_eq(rc, 0, "%s: %s", ref, err ? err->msg : "?");
	cr_assert_str_eq(r.registry, registry, "%s", ref);
	cr_assert_str_eq(r.repository, repo, "%s", ref);
	if (tag)
		cr_assert_str_eq(r.tag, tag, "%s", ref);
	else
		cr_assert_null(r.tag, "%s", ref);
	if (digest)
		cr_assert_str_eq(r.digest, digest, "%s", ref);
	else
		cr_assert_null(r.digest, "%s", ref);
	sbx__image_ref_clear(&r);
}

/* Expects -EINVAL with a message naming REF and containing RULE. */
static void expect_bad(const char *ref, const char *rule)
{
	struct sbx_image_ref r;
	sbx_error *err = NULL;
	int rc = sbx__image_ref_parse(&r, ref, &err);
	cr_assert_eq(rc, -EINVAL, "'%s' was accepted", ref);
	cr_assert_not_null(err);
	if (*ref)
		cr_assert(strstr(err->msg, ref) != NULL || strlen(ref) > 100, "%s: %s", ref, err->msg);
	cr_assert(strstr(err->msg, rule) != NULL, "%s: '%s' lacks '%s'", ref, err->msg, rule);
	sbx_error_free(err);
}

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

Test(images_ref, docker_hub_library)
{
	expect_ref("debian:bookworm", "registry-1.docker.io", "library/debian", "bookworm", NULL);
	expect_ref("debian", "registry-1.docker.io", "library/debian", "latest", NULL);
	expect_ref("docker.io/debian", "registry-1.docker.io", "library/debian", "latest", NULL);
	expect_ref("index.docker.io/library/debian:12", "registry-1.docker.io", "library/debian",
		   "12", NULL);
}

Test(images_ref, docker_hub_user)
{
	expect_ref("alexgshaw/fix-git:20251031", "registry-1.docker.io", "alexgshaw/fix-git",
		   "20251031", NULL);
	expect_ref("docker.io/alexgshaw/fix-git", "registry-1.docker.io", "alexgshaw/fix-git",
		   "latest", NULL);
}

Test(images_ref, other_registries)
{
	expect_ref("ghcr.io/astral-sh/uv:0.5", "ghcr.io", "astral-sh/uv", "0.5", NULL);
	expect_ref("localhost:5000/x/y@sha256:" D64, "localhost:5000", "x/y", NULL, "sha256:" D64);
	expect_ref("localhost/busybox", "localhost", "busybox", "latest", NULL);
	expect_ref("127.0.0.1:5000/busybox:1", "127.0.0.1:5000", "busybox", "1", NULL);
	expect_ref("[::1]:5000/a/b/c:v1.2-rc_3", "[::1]:5000", "a/b/c", "v1.2-rc_3", NULL);
	expect_ref("Registry.Example.COM/team/app", "registry.example.com", "team/app", "latest",
		   NULL);
}

Test(images_ref, tag_and_digest)
{
	/* both given: the digest is what is fetched, the tag is kept */
	struct sbx_image_ref r;
	cr_assert_eq(sbx__image_ref_parse(&r, "ghcr.io/a/b:1.0@sha256:" D64, NULL), 0);
	cr_assert_str_eq(r.tag, "1.0");
	cr_assert_str_eq(sbx__image_ref_reference(&r), "sha256:" D64);
	sbx__image_ref_clear(&r);
	cr_assert_eq(sbx__image_ref_parse(&r, "debian", NULL), 0);
	cr_assert_str_eq(sbx__image_ref_reference(&r), "latest");
	sbx__image_ref_clear(&r);
}

Test(images_ref, separators_in_components)
{
	expect_ref("a__b/c.d-e---f:x", "registry-1.docker.io", "a__b/c.d-e---f", "x", NULL);
	expect_ref("quay.io/a_b/c", "quay.io", "a_b/c", "latest", NULL);
}

Test(images_ref, malformed)
{
	expect_bad("", "empty");
	expect_bad("Debian:bookworm", "lower-case");
	expect_bad("debian:", "a tag is");
	expect_bad("debian:-x", "a tag is");
	expect_bad("debian:.x", "a tag is");
	expect_bad("debian@sha256:abc", "64 lower-case hex");
	expect_bad("debian@sha512:" D64, "only sha256");
	expect_bad("debian@sha256:" D64 "@sha256:" D64, "more than one '@'");
	expect_bad("a//b", "empty path component");
	expect_bad("/debian", "empty path component");
	expect_bad("debian/", "empty path component");
	expect_bad("a/-b", "repository components");
	expect_bad("a/b_", "repository components");
	expect_bad("a/b___c", "repository components");
	expect_bad("a/b..c", "repository components");
	expect_bad("de bian", "whitespace");
	expect_bad("localhost:0/x", "the registry must be");
	expect_bad("localhost:99999/x", "the registry must be");
	expect_bad("localhost:abc/x", "the registry must be");
	expect_bad("-bad.host/x", "the registry must be");
	expect_bad("a:b:c", "':'");
	expect_bad(":tag", "repository name is missing");
	expect_bad("ghcr.io/:tag", "empty path component");
	char tag[200];
	memset(tag, 'a', sizeof(tag));
	memcpy(tag, "x:", 2);
	tag[sizeof(tag) - 1] = '\0';
	expect_bad(tag, "a tag is");
	char longrepo[300];
	memset(longrepo, 'a', sizeof(longrepo));
	longrepo[sizeof(longrepo) - 1] = '\0';
	expect_bad(longrepo, "longer than 255");
}

Test(images_ref, loopback_and_insecure)
{
	unsetenv("SBX_INSECURE_REGISTRIES");
	cr_assert(sbx__registry_plain_allowed("127.0.0.1:5000"));
	cr_assert(sbx__registry_plain_allowed("127.9.8.7"));
	cr_assert(sbx__registry_plain_allowed("localhost:5000"));
	cr_assert(sbx__registry_plain_allowed("[::1]:5000"));
	cr_assert_not(sbx__registry_plain_allowed("128.0.0.1:5000"));
	cr_assert_not(sbx__registry_plain_allowed("10.0.0.5:5000"));
	cr_assert_not(sbx__registry_plain_allowed("localhost.example.com"));
	cr_assert_not(sbx__registry_plain_allowed("ghcr.io"));
	setenv("SBX_INSECURE_REGISTRIES", "10.0.0.5:5000, reg.lan", 1);
	cr_assert(sbx__registry_plain_allowed("10.0.0.5:5000"));
	cr_assert_not(sbx__registry_plain_allowed("10.0.0.5:5001"));
	cr_assert(sbx__registry_plain_allowed("reg.lan:443"));
	cr_assert(sbx__registry_plain_allowed("REG.LAN"));
	unsetenv("SBX_INSECURE_REGISTRIES");
}

static int resolve(struct sbx_registry *c, const char *registry, sbx_error **err)
{
	memset(c, 0, sizeof(*c));
	return sbx__registry_resolve_base(c, registry, err);
}

static void clear(struct sbx_registry *c)
{
	free(c->host);
	free(c->base);
	free(c->basic);
	free(c->auth_file);
}

Test(images_ref, base_urls_and_mirrors)
{
	struct sbx_registry c;
	unsetenv("SBX_REGISTRY_MIRROR");
	unsetenv("SBX_INSECURE_REGISTRIES");
	cr_assert_eq(resolve(&c, "registry-1.docker.io", NULL), 0);
	cr_assert_str_eq(c.base, "https://registry-1.docker.io");
	clear(&c);
	cr_assert_eq(resolve(&c, "127.0.0.1:5000", NULL), 0);
	cr_assert_str_eq(c.base, "http://127.0.0.1:5000");
	clear(&c);
	setenv("SBX_REGISTRY_MIRROR", "docker.io=http://127.0.0.1:5001, ghcr.io=https://m.example", 1);
	cr_assert_eq(resolve(&c, "registry-1.docker.io", NULL), 0);
	cr_assert_str_eq(c.base, "http://127.0.0.1:5001");
	cr_assert_str_eq(c.host, "127.0.0.1:5001");
	clear(&c);
	cr_assert_eq(resolve(&c, "ghcr.io", NULL), 0);
	cr_assert_str_eq(c.base, "https://m.example");
	clear(&c);
	setenv("SBX_REGISTRY_MIRROR", "docker.io=http://10.1.1.1:5000", 1);
	sbx_error *err = NULL;
	cr_assert_eq(resolve(&c, "registry-1.docker.io", &err), -EINVAL);
	cr_assert(strstr(err->msg, "only allowed for loopback"), "%s", err->msg);
	sbx_error_free(err);
	clear(&c);
	setenv("SBX_REGISTRY_MIRROR", "docker.io=ftp://x", 1);
	cr_assert_eq(resolve(&c, "registry-1.docker.io", NULL), -EINVAL);
	clear(&c);
	unsetenv("SBX_REGISTRY_MIRROR");
}

Test(images_ref, challenge_params)
{
	const char *ch = "realm=\"http://127.0.0.1:1/token\",service=\"reg \\\"x\\\"\", "
			 "scope=\"repository:a/b:pull,push\",error=insufficient_scope";
	char *v = sbx__registry_challenge_param(ch, "realm");
	cr_assert_str_eq(v, "http://127.0.0.1:1/token");
	free(v);
	v = sbx__registry_challenge_param(ch, "service");
	cr_assert_str_eq(v, "reg \"x\"");
	free(v);
	v = sbx__registry_challenge_param(ch, "scope");
	cr_assert_str_eq(v, "repository:a/b:pull,push");
	free(v);
	v = sbx__registry_challenge_param(ch, "ERROR");
	cr_assert_str_eq(v, "insufficient_scope");
	free(v);
	cr_assert_null(sbx__registry_challenge_param(ch, "missing"));
	cr_assert_null(sbx__registry_challenge_param("", "realm"));
}

Test(images_ref, credentials_from_key_file)
{
	char *dir = th_tmpdir("auth");
	char path[512];
	snprintf(path, sizeof(path), "%s/config.json", dir);
	/* "alice:s3cret-pass" */
	const char *cfg = "{\"auths\":{\"https://127.0.0.1:5000/v2/\":{\"auth\":"
			  "\"YWxpY2U6czNjcmV0LXBhc3M=\"},\"other:1\":{\"username\":\"bob\","
			  "\"password\":\"hunter2-long\"},\"bad:2\":{\"auth\":\"!!!!\"}}}";
	th_write_file(path, cfg, strlen(cfg));
	setenv("SBX_REGISTRY_AUTH_FILE", path, 1);
	struct sbx_registry c = { .host = (char *)"127.0.0.1:5000" };
	cr_assert_eq(sbx__registry_load_credentials(&c, false, NULL), 0);
	cr_assert_str_eq(c.basic, "YWxpY2U6czNjcmV0LXBhc3M=");
	cr_assert_str_eq(c.auth_file, path);
	/* the secrets are redacted from every error message */
	sbx_error *err = NULL;
	sbx_error_set(&err, -EIO, "x s3cret-pass YWxpY2U6czNjcmV0LXBhc3M= y");
	cr_assert(strstr(err->msg, "s3cret") == NULL, "%s", err->msg);
	sbx_error_free(err);
	free(c.basic);
	free(c.auth_file);
	struct sbx_registry d = { .host = (char *)"other:1" };
	cr_assert_eq(sbx__registry_load_credentials(&d, false, NULL), 0);
	cr_assert_str_eq(d.basic, "Ym9iOmh1bnRlcjItbG9uZw==");
	free(d.basic);
	free(d.auth_file);
	struct sbx_registry e = { .host = (char *)"bad:2" };
	err = NULL;
	cr_assert_eq(sbx__registry_load_credentials(&e, false, &err), -EINVAL);
	cr_assert(strstr(err->msg, "not base64"), "%s", err->msg);
	sbx_error_free(err);
	struct sbx_registry f = { .host = (char *)"nobody:3" };
	cr_assert_eq(sbx__registry_load_credentials(&f, false, NULL), 0);
	cr_assert_null(f.basic);
	free(f.auth_file);
	snprintf(path, sizeof(path), "%s/missing.json", dir);
	setenv("SBX_REGISTRY_AUTH_FILE", path, 1);
	cr_assert_eq(sbx__registry_load_credentials(&f, false, NULL), -ENOENT);
	unsetenv("SBX_REGISTRY_AUTH_FILE");
	th_rm_rf(dir);
	free(dir);
}
