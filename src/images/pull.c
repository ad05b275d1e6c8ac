/* SPDX-License-Identifier: MIT */
/*
 * sbx_image_pull(): resolves a reference on its registry (through image
 * indexes to this host's linux platform), fetches the config and every layer
 * not already in the store, checks all digests, and commits the image. A pull
 * record (pulls/<escaped-name>.json) remembers the reference and the digest it
 * resolved to, for template builds that pin "reference + digest".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <sbx/image.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "pull.h"
#include "ref.h"
#include "registry.h"
#include "store.h"

#if defined(__aarch64__)
#define HOST_ARCH "arm64"
#elif defined(__s390x__)
#define HOST_ARCH "s390x"
#elif defined(__powerpc64__)
#define HOST_ARCH "ppc64le"
#elif defined(__riscv)
#define HOST_ARCH "riscv64"
#else
#define HOST_ARCH "amd64"
#endif

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_V2 "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_V1 "application/vnd.docker.distribution.manifest.v1"
#define MAX_NESTING 4

#define _cleanup_json_ _cleanup_(json_decrefp)

enum kind { KIND_INDEX, KIND_MANIFEST, KIND_V1, KIND_OTHER };

struct pull {
	sbx_runtime *rt;
	struct sbx_image_ref ref;
	struct sbx_registry *reg;
	const struct sbx_pull_opts *o;
	struct sbx_pull_result res;
	size_t layer;                 /* layer being downloaded, for progress */
};

void sbx__pull_result_clear(struct sbx_pull_result *r)
{
	free(r->digest);
	free(r->manifest);
	free(r->registry);
	free(r->repository);
	memset(r, 0, sizeof(*r));
}

/* The document's kind from its mediaType, else Content-Type, else its shape. */
static enum kind kind_of(json_t *doc, const char *content_type, char *buf, size_t bufsz)
{
	const char *mt = json_string_value(json_object_get(doc, "mediaType"));
	if (!mt && content_type) {
		snprintf(buf, bufsz, "%.*s", (int)strcspn(content_type, "; "), content_type);
		mt = buf;
	} else {
		snprintf(buf, bufsz, "%s", mt ? mt : "(none)");
	}
	if (mt && (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0))
		return KIND_INDEX;
	if (mt && (strcmp(mt, MT_OCI_MANIFEST) == 0 || strcmp(mt, MT_DOCKER_V2) == 0))
		return KIND_MANIFEST;
	if (mt && sbx__str_startswith(mt, MT_DOCKER_V1))
		return KIND_V1;
	if (json_integer_value(json_object_get(doc, "schemaVersion")) == 1)
		return KIND_V1;
	if (json_is_array(json_object_get(doc, "manifests")))
		return KIND_INDEX;
	if (json_is_array(json_object_get(doc, "layers")))
		return KIND_MANIFEST;
	return KIND_OTHER;
}

/* Fetches a manifest or index; EXPECT (if set) is the digest it must have. */
static int fetch_manifest(struct pull *p, const char *reference, const char *expect,
			  json_t **doc_out, enum kind *kind_out, char **digest_out, sbx_error **err)
{
	_cleanup_free_ char *body = NULL, *type = NULL;
	size_t len = 0;
	int r = sbx__registry_get_manifest(p->reg, reference, &body, &len, &type, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *digest = sbx__image_sha256_buf(body, len);
	if (expect && strcmp(digest, expect) != 0)
		return sbx_error_set(err, -EINVAL, "manifest %s has digest %s", expect, digest);
	json_error_t je;
	json_t *doc = json_loadb(body, len, 0, &je);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return sbx_error_set(err, -EINVAL, "manifest %s is not a JSON object", reference);
	}
	char mt[128];
	enum kind k = kind_of(doc, type, mt, sizeof(mt));
	if (k == KIND_V1 || k == KIND_OTHER) {
		json_decref(doc);
		return sbx_error_set(err, -EINVAL, "manifest %s: %s (media type %s)", reference,
				     k == KIND_V1 ? "schema 1 manifests are not supported"
						  : "not an image manifest or index", mt);
	}
	*doc_out = doc;
	*kind_out = k;
	*digest_out = steal_ptr(&digest);
	return 0;
}

static bool is_host_platform(json_t *pf)
{
	const char *os = json_string_value(json_object_get(pf, "os"));
	const char *arch = json_string_value(json_object_get(pf, "architecture"));
	const char *variant = json_string_value(json_object_get(pf, "variant"));
	if (!os || !arch || strcmp(os, "linux") || strcmp(arch, HOST_ARCH))
		return false;
	return strcmp(HOST_ARCH, "arm64") != 0 || !variant || strcmp(variant, "v8") == 0;
}

/* "linux/arm64, linux/s390x" for the message when no platform matches. Owned. */
static char *platforms(json_t *manifests)
{
	char *s = xstrdup("");
	size_t i;
	json_t *d;
	json_array_foreach(manifests, i, d) {
		json_t *pf = json_object_get(d, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *arch = json_string_value(json_object_get(pf, "architecture"));
		char *n = xasprintf("%s%s%s/%s", s, *s ? ", " : "", os ? os : "?", arch ? arch : "?");
		free(s);
		s = n;
	}
	return s;
}

/* Follows indexes down to this platform's image manifest. */
static int resolve(struct pull *p, json_t **manifest_out, sbx_error **err)
{
	json_t *doc = NULL;
	enum kind k;
	char *digest = NULL;
	int r = fetch_manifest(p, sbx__image_ref_reference(&p->ref), p->ref.digest, &doc, &k,
			       &digest, err);
	if (r < 0)
		return r;
	p->res.digest = xstrdup(digest);
	for (int depth = 0; k == KIND_INDEX; depth++) {
		json_t *ms = json_object_get(doc, "manifests"), *pick = NULL, *d;
		size_t i;
		json_array_foreach(ms, i, d)
			if (!pick && is_host_platform(json_object_get(d, "platform")))
				pick = d;
		const char *dg = json_string_value(json_object_get(pick, "digest"));
		if (depth >= MAX_NESTING) {
			r = sbx_error_set(err, -EINVAL, "image indexes nested too deeply");
		} else if (!pick) {
			_cleanup_free_ char *have = platforms(ms);
			r = sbx_error_set(err, -ENOENT, "index %s has no linux/%s image (it has: %s)",
					  digest, HOST_ARCH, *have ? have : "nothing");
		} else if (!sbx__image_digest_valid(dg)) {
			r = sbx_error_set(err, -EINVAL, "index %s: unsupported manifest digest '%s'",
					  digest, dg ? dg : "(none)");
		} else {
			json_t *next = NULL;
			char *next_digest = NULL;
			r = fetch_manifest(p, dg, dg, &next, &k, &next_digest, err);
			json_decref(doc);
			free(digest);
			doc = next;
			digest = next_digest;
		}
		if (r < 0)
			break;
	}
	if (r == 0) {
		p->res.manifest = steal_ptr(&digest);
		*manifest_out = steal_ptr(&doc);
	}
	json_decref(doc);
	free(digest);
	return r;
}

static int check_layer_type(const char *digest, const char *mt, sbx_error **err)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar",
		"application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.v1.tar+zstd",
		"application/vnd.docker.image.rootfs.diff.tar",
		"application/vnd.docker.image.rootfs.diff.tar.gzip",
	};
	if (!mt)
		return 0;
	for (size_t i = 0; i < SBX_ARRAY_SIZE(ok); i++)
		if (strcmp(mt, ok[i]) == 0)
			return 0;
	if (strstr(mt, "foreign") || strstr(mt, "nondistributable"))
		return sbx_error_set(err, -EINVAL, "layer %s: foreign layers (%s) are not supported",
				     digest, mt);
	return sbx_error_set(err, -EINVAL, "layer %s has media type %s, not a container image layer",
			     digest, mt);
}

static void on_blob_progress(void *payload, uint64_t done, uint64_t total)
{
	struct pull *p = payload;
	p->o->progress(p->o->payload, p->layer, p->res.layers, done, total, 0);
}

/* Downloads one layer blob into tmp/ and extracts it; *diff_out owned. */
static int fetch_layer(struct pull *p, const char *blob, uint64_t size, const char *diffid,
		       char **diff_out, sbx_error **err)
{
	_cleanup_free_ char *tmp = xasprintf("%s/tmp/pull-XXXXXX", sbx_runtime_image_dir(p->rt));
	_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", tmp);
	bool progress = p->o && p->o->progress;
	int r = sbx__registry_get_blob_file(p->reg, blob, size, fd, progress ? on_blob_progress : NULL,
					    p, err);
	if (r == 0 && close(steal_fd(&fd)) < 0)
		r = sbx_error_setsys(err, -errno, errno, "write %s", tmp);
	if (r == 0)
		r = sbx__image_layer_from_tar(diff_out, p->rt, tmp, diffid, blob, err);
	unlink(tmp);
	return r;
}

/* Makes sure every layer is in the store; *out is the diffIDs, bottom first. */
static int pull_layers(struct pull *p, json_t *layers, json_t *diff_ids, char ***out,
		       sbx_error **err)
{
	size_t n = json_array_size(layers);
	char **v = xcalloc(n + 1, sizeof(char *));
	int r = 0;
	p->res.layers = n;
	for (size_t i = 0; i < n && r == 0; i++) {
		json_t *l = json_array_get(layers, i);
		const char *blob = json_string_value(json_object_get(l, "digest"));
		const char *diff = json_string_value(json_array_get(diff_ids, i));
		json_int_t size = json_integer_value(json_object_get(l, "size"));
		p->layer = i;
		if (!sbx__image_digest_valid(blob) || !sbx__image_digest_valid(diff) || size < 0) {
			r = sbx_error_set(err, -EINVAL, "layer %zu: bad digest, diffID or size", i);
			break;
		}
		r = check_layer_type(blob, json_string_value(json_object_get(l, "mediaType")), err);
		if (r < 0)
			break;
		bool cached = sbx__image_layer_exists(p->rt, diff);
		if (cached) {
			v[i] = xstrdup(diff);
			p->res.layers_cached++;
		} else {
			r = fetch_layer(p, blob, (uint64_t)size, diff, &v[i], err);
			p->res.bytes += (uint64_t)size;
		}
		if (r == 0 && p->o && p->o->progress)
			p->o->progress(p->o->payload, i, n, (uint64_t)size, (uint64_t)size, cached);
	}
	if (r < 0) {
		sbx__strv_free(v);
		return r;
	}
	*out = v;
	return 0;
}

static int check_config(json_t *cfg_desc, json_t *layers, json_t *config, sbx_error **err)
{
	const char *mt = json_string_value(json_object_get(cfg_desc, "mediaType"));
	if (mt && strcmp(mt, "application/vnd.oci.image.config.v1+json") != 0 &&
	    strcmp(mt, "application/vnd.docker.container.image.v1+json") != 0)
		return sbx_error_set(err, -EINVAL, "not a container image (config media type %s)", mt);
	json_t *diff_ids = json_object_get(json_object_get(config, "rootfs"), "diff_ids");
	if (!json_is_array(diff_ids) || json_array_size(diff_ids) != json_array_size(layers))
		return sbx_error_set(err, -EINVAL, "config lists %zu diff_ids for %zu layers",
				     json_array_size(diff_ids), json_array_size(layers));
	return 0;
}

static char *record_path(sbx_runtime *rt, const char *name)
{
	_cleanup_free_ char *esc = sbx__image_escape_name(name);
	return xasprintf("%s/pulls/%s.json", sbx_runtime_image_dir(rt), esc);
}

/* Writes pulls/<escaped-name>.json: reference, digests and the image id it produced. */
static int write_record(struct pull *p, const char *ref, const sbx_image *img, sbx_error **err)
{
	_cleanup_free_ char *dir = xasprintf("%s/pulls", sbx_runtime_image_dir(p->rt));
	int r = sbx__mkdir_p(dir, 0755, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "name", img->name,
					     "ref", ref, "registry", p->res.registry, "repository",
					     p->res.repository, "digest", p->res.digest, "manifest",
					     p->res.manifest, "image_id", img->id);
	_cleanup_free_ char *data = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	if (!data)
		return sbx_error_set(err, -EINVAL, "image %s: cannot encode pull record", img->name);
	_cleanup_free_ char *path = record_path(p->rt, img->name);
	return sbx__write_file_atomic(path, data, strlen(data), 0644, err);
}

/* Fetches the config, then the layers, and commits NAME. */
static int pull_image(struct pull *p, sbx_image **img_out, const char *name, sbx_error **err)
{
	_cleanup_json_ json_t *m = NULL, *config = NULL;
	int r = resolve(p, &m, err);
	if (r < 0)
		return r;
	json_t *cfg_desc = json_object_get(m, "config"), *layers = json_object_get(m, "layers");
	const char *cfg_digest = json_string_value(json_object_get(cfg_desc, "digest"));
	if (!sbx__image_digest_valid(cfg_digest) || !json_is_array(layers))
		return sbx_error_set(err, -EINVAL, "manifest %s has no usable config or layers",
				     p->res.manifest);
	_cleanup_free_ char *body = NULL;
	size_t len = 0;
	r = sbx__registry_get_blob_buf(p->reg, cfg_digest, SBX_IMAGE_JSON_MAX, &body, &len, err);
	if (r < 0)
		return r;
	json_error_t je;
	config = json_loadb(body, len, 0, &je);
	if (!json_is_object(config))
		return sbx_error_set(err, -EINVAL, "config %s is not a JSON object", cfg_digest);
	r = check_config(cfg_desc, layers, config, err);
	if (r < 0)
		return r;
	_cleanup_close_ int lock = -1;
	r = sbx__image_store_lock(&lock, p->rt, false, err);
	if (r < 0)
		return r;
	char **diffs = NULL;
	r = pull_layers(p, layers, json_object_get(json_object_get(config, "rootfs"), "diff_ids"),
			&diffs, err);
	if (r < 0)
		return r;
	sbx_image_config cfg = { 0 };
	sbx__image_config_from_json(&cfg, json_object_get(config, "config"));
	r = sbx__image_commit(img_out, p->rt, name, diffs, &cfg, err);
	sbx__image_config_clear(&cfg);
	sbx__strv_free(diffs);
	return r;
}

static int check_name(const char *name, sbx_error **err)
{
	if (strlen(name) > SBX_IMAGE_NAME_MAX)
		return sbx_error_set(err, -EINVAL,
				     "image name '%.32s...' is longer than %d bytes; give a shorter NAME",
				     name, SBX_IMAGE_NAME_MAX);
	return *name ? 0 : sbx_error_set(err, -EINVAL, "image name is empty");
}

int sbx__image_pull(sbx_image **out, struct sbx_pull_result *res, sbx_runtime *rt,
		    const char *ref, const char *name, const struct sbx_pull_opts *o,
		    sbx_error **err)
{
	struct pull p = { .rt = rt, .o = o };
	int r = sbx__image_ref_parse(&p.ref, ref, err);
	if (r < 0)
		return r;
	if (!name)
		name = ref;
	sbx_image *img = NULL;
	if ((r = check_name(name, err)) < 0 ||
	    (r = sbx__registry_open(&p.reg, &p.ref, name, err)) < 0)
		goto out;
	p.res.registry = xstrdup(p.ref.registry);
	p.res.repository = xstrdup(p.ref.repository);
	r = pull_image(&p, &img, name, err);
	if (r == 0)
		r = write_record(&p, ref, img, err);
out:
	if (r < 0) {
		sbx_error_prefix(err, r, "pull %s", ref);
	} else {
		if (out)
			*out = steal_ptr(&img);
		if (res) {
			*res = p.res;
			memset(&p.res, 0, sizeof(p.res));
		}
	}
	sbx_image_free(img);
	sbx__pull_result_clear(&p.res);
	sbx__registry_free(p.reg);
	sbx__image_ref_clear(&p.ref);
	return r;
}

int sbx_image_pull(sbx_image **out, sbx_runtime *rt, const char *ref, const char *name,
		   sbx_error **err)
{
	return sbx__image_pull(out, NULL, rt, ref, name, NULL, err);
}

int sbx__image_resolve(char **digest_out, sbx_runtime *rt, const char *ref, sbx_error **err)
{
	struct pull p = { .rt = rt };
	int r = sbx__image_ref_parse(&p.ref, ref, err);
	if (r < 0)
		return r;
	json_t *doc = NULL;
	enum kind k;
	r = sbx__registry_open(&p.reg, &p.ref, ref, err);
	if (r == 0)
		r = fetch_manifest(&p, sbx__image_ref_reference(&p.ref), p.ref.digest, &doc, &k,
				   digest_out, err);
	json_decref(doc);
	sbx__registry_free(p.reg);
	sbx__image_ref_clear(&p.ref);
	return r < 0 ? sbx_error_prefix(err, r, "resolve %s", ref) : 0;
}

int sbx__image_pull_info(char **ref_out, char **digest_out, sbx_runtime *rt, const char *name,
			 sbx_error **err)
{
	sbx_image *img = NULL;
	int r = sbx_image_get(&img, rt, name, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = record_path(rt, name);
	_cleanup_json_ json_t *j = json_load_file(path, 0, NULL);
	const char *id = json_string_value(json_object_get(j, "image_id"));
	const char *ref = json_string_value(json_object_get(j, "ref"));
	const char *digest = json_string_value(json_object_get(j, "digest"));
	bool same = id && ref && digest && strcmp(id, img->id) == 0;
	sbx_image_free(img);
	if (!same)
		return sbx_error_set(err, -ENOENT, "image %s was not pulled from a registry "
				     "(or was replaced since)", name);
	if (ref_out)
		*ref_out = xstrdup(ref);
	if (digest_out)
		*digest_out = xstrdup(digest);
	return 0;
}
