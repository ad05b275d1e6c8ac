/* SPDX-License-Identifier: MIT */
/*
 * Image reference parsing: [registry/]repository[:tag][@sha256:hex], with the
 * Docker rules for telling a registry host from the first path component and
 * for Docker Hub's "library/" namespace. Every rejection names the reference
 * and the rule it breaks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/str.h"
#include "ref.h"
#include "store.h"

#define REPO_MAX 255
#define TAG_MAX 128

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* One path component: [a-z0-9]+ joined by ".", "_", "__" or runs of "-". */
static bool component_valid(const char *s, size_t n)
{
	size_t i = 0;
	if (n == 0 || !is_lower_alnum(s[0]))
		return false;
	while (i < n) {
		while (i < n && is_lower_alnum(s[i]))
			i++;
		if (i == n)
			return true;
		size_t sep = i;
		if (s[i] == '.') {
			i++;
		} else if (s[i] == '_') {
			i++;
			if (i < n && s[i] == '_')
				i++;
		} else if (s[i] == '-') {
			while (i < n && s[i] == '-')
				i++;
		} else {
			return false;
		}
		if (i == n || !is_lower_alnum(s[i]) || i == sep)
			return false;
	}
	return true;
}

/* host[:port]: DNS labels or a bracketed IPv6 literal, port 1..65535. */
static bool host_valid(const char *s)
{
	const char *port = NULL;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end == s + 1)
			return false;
		for (const char *p = s + 1; p < end; p++)
			if (!strchr("0123456789abcdefABCDEF:.", *p))
				return false;
		if (end[1] && end[1] != ':')
			return false;
		port = end[1] ? end + 1 : NULL;
	} else {
		size_t n = strcspn(s, ":");
		size_t label = 0;
		if (n == 0)
			return false;
		for (size_t i = 0; i < n; i++) {
			char c = s[i];
			if (c == '.') {
				if (label == 0 || s[i - 1] == '-')
					return false;
				label = 0;
			} else if (is_alnum(c) || (c == '-' && label > 0)) {
				label++;
			} else {
				return false;
			}
		}
		if (label == 0 || s[n - 1] == '-')
			return false;
		port = s[n] ? s + n : NULL;
	}
	if (!port)
		return true;
	uint64_t v;
	return port[1] && strspn(port + 1, "0123456789") == strlen(port + 1) &&
	       sbx__parse_u64(&v, port + 1) == 0 && v >= 1 && v <= 65535;
}

static bool tag_valid(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > TAG_MAX || !(is_alnum(t[0]) || t[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(is_alnum(t[i]) || t[i] == '_' || t[i] == '.' || t[i] == '-'))
			return false;
	return true;
}

static int bad(sbx_error **err, const char *ref, const char *rule)
{
	return sbx_error_set(err, -EINVAL, "image reference '%s': %s", ref, rule);
}

int sbx__image_ref_is_docker_hub(const char *registry)
{
	return registry && (strcmp(registry, SBX_DOCKER_HUB_HOST) == 0 ||
			    strcmp(registry, "docker.io") == 0 ||
			    strcmp(registry, "index.docker.io") == 0);
}

/* Checks the repository path; the message says which rule failed. */
static int check_repository(const char *ref, const char *repo, sbx_error **err)
{
	if (strlen(repo) > REPO_MAX)
		return bad(err, ref, "repository name is longer than 255 characters");
	for (const char *p = repo;;) {
		size_t n = strcspn(p, "/");
		if (n == 0)
			return bad(err, ref, "repository has an empty path component");
		for (size_t i = 0; i < n; i++)
			if (p[i] >= 'A' && p[i] <= 'Z')
				return bad(err, ref, "repository names must be lower-case");
		if (!component_valid(p, n))
			return bad(err, ref,
				   "repository components are [a-z0-9] separated by '.', '_', '__' "
				   "or '-' and must start and end with a letter or digit");
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

int sbx__image_ref_parse(struct sbx_image_ref *out, const char *ref, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	if (!ref || !*ref)
		return sbx_error_set(err, -EINVAL, "image reference is empty");
	if (strlen(ref) > SBX_IMAGE_REF_MAX)
		return sbx_error_set(err, -EINVAL, "image reference '%.40s...' is longer than %d bytes",
				     ref, SBX_IMAGE_REF_MAX);
	for (const char *p = ref; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
			return bad(err, ref, "contains whitespace or a non-ASCII character");
	_cleanup_free_ char *name = xstrdup(ref);
	_cleanup_free_ char *digest = NULL, *tag = NULL, *registry = NULL;
	char *at = strchr(name, '@');
	if (at) {
		*at = '\0';
		if (strchr(at + 1, '@'))
			return bad(err, ref, "more than one '@'");
		if (!sbx__str_startswith(at + 1, "sha256:"))
			return bad(err, ref, "only sha256 digests are supported (NAME@sha256:<64 hex>)");
		if (!sbx__image_digest_valid(at + 1))
			return bad(err, ref, "a digest is 'sha256:' and 64 lower-case hex digits");
		digest = xstrdup(at + 1);
	}
	char *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
	if (colon && (!slash || colon > slash)) {
		*colon = '\0';
		if (!tag_valid(colon + 1))
			return bad(err, ref,
				   "a tag is 1-128 of [A-Za-z0-9_.-] and does not start with '.' or '-'");
		tag = xstrdup(colon + 1);
	}
	if (!*name)
		return bad(err, ref, "the repository name is missing");
	char *repo = name, *first = strchr(name, '/');
	if (first) {
		size_t n = (size_t)(first - name);
		if (memchr(name, '.', n) || memchr(name, ':', n) ||
		    (n == 9 && memcmp(name, "localhost", 9) == 0)) {
			*first = '\0';
			if (!host_valid(name))
				return bad(err, ref,
					   "the registry must be a host name or [IPv6] literal "
					   "with an optional :port");
			registry = sbx__str_lower(xstrdup(name));
			repo = first + 1;
		}
	}
	if (!registry && strchr(repo, ':'))
		return bad(err, ref, "a ':' may only introduce the tag or a registry port");
	int r = check_repository(ref, repo, err);
	if (r < 0)
		return r;
	if (!registry || sbx__image_ref_is_docker_hub(registry)) {
		free(registry);
		registry = xstrdup(SBX_DOCKER_HUB_HOST);
		out->repository = strchr(repo, '/') ? xstrdup(repo) : xasprintf("library/%s", repo);
	} else {
		out->repository = xstrdup(repo);
	}
	out->registry = steal_ptr(&registry);
	out->tag = tag ? steal_ptr(&tag) : (digest ? NULL : xstrdup("latest"));
	out->digest = steal_ptr(&digest);
	return 0;
}

void sbx__image_ref_clear(struct sbx_image_ref *r)
{
	free(r->registry);
	free(r->repository);
	free(r->tag);
	free(r->digest);
	memset(r, 0, sizeof(*r));
}

const char *sbx__image_ref_reference(const struct sbx_image_ref *r)
{
	return r->digest ? r->digest : r->tag;
}
