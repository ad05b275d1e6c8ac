/* SPDX-License-Identifier: MIT */
/*
 * sbx_image_import(): recognises what SRC is (rootfs directory, OCI image
 * layout directory, or a tar file holding a rootfs, an OCI layout or a
 * `docker save` image), reads OCI index/manifest/config and docker-save
 * manifests, and hands each layer to layer.c before committing the record.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include <sbx/image.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "store.h"
#include "util/lazy.h"

#define EXPECTED                                                                             \
	"expected a rootfs directory, a rootfs tarball (tar, tar.gz, tar.xz, tar.zst), an OCI " \
	"image layout (directory or tar) or a 'docker save' archive"

#if defined(__aarch64__)
#define HOST_ARCH "arm64"
#else
#define HOST_ARCH "amd64"
#endif

#define _cleanup_json_ _cleanup_(json_decrefp)

static int load_json(json_t **out, const char *path, sbx_error **err)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r = sbx__read_file(&data, &len, path, SBX_IMAGE_JSON_MAX, err);
	if (r < 0)
		return r;
	json_error_t je;
	*out = json_loadb(data, len, 0, &je);
	if (!*out)
		return sbx_error_set(err, -EINVAL, "%s: bad JSON at line %d: %s", path, je.line, je.text);
	return 0;
}

/* Resolves REL below DIR without leaving it (symlinks included) to a
 * regular file: an image archive's symlink must not make the import read a
 * host file (or block on a FIFO). Owned or NULL. */
static char *path_inside(const char *dir, const char *rel)
{
	if (!rel || !*rel || rel[0] == '/')
		return NULL;
	_cleanup_free_ char *joined = xasprintf("%s/%s", dir, rel);
	char root[PATH_MAX], real[PATH_MAX];
	if (!realpath(dir, root) || !realpath(joined, real))
		return NULL;
	size_t n = strlen(root);
	struct stat st;
	if (strncmp(real, root, n) != 0 || real[n] != '/' || stat(real, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	return xstrdup(real);
}

/* DIR/NAME (index.json, manifest.json) as a regular file inside DIR. */
static int load_json_in(json_t **out, const char *dir, const char *name, sbx_error **err)
{
	_cleanup_free_ char *p = path_inside(dir, name);
	if (!p)
		return sbx_error_set(err, -EINVAL, "%s/%s is missing, not a regular file, or a symlink out of "
				     "the image", dir, name);
	return load_json(out, p, err);
}

/* Path of an OCI blob, after checking the digest's shape. */
static int blob_path(char **out, const char *dir, const char *digest, sbx_error **err)
{
	if (!sbx__image_digest_valid(digest))
		return sbx_error_set(err, -EINVAL, "unsupported blob digest '%s'",
				     digest ? digest : "(none)");
	_cleanup_free_ char *rel = xasprintf("blobs/sha256/%s", digest + 7);
	*out = path_inside(dir, rel);
	if (!*out)
		return sbx_error_set(err, -EINVAL, "blob %s is missing, not a regular file, or a symlink out of "
				     "the image", digest);
	return 0;
}

/* Loads a JSON blob and checks its digest. */
static int load_blob(json_t **out, const char *dir, const char *digest, sbx_error **err)
{
	_cleanup_free_ char *p = NULL, *got = NULL;
	int r = blob_path(&p, dir, digest, err);
	if (r == 0)
		r = sbx__image_sha256_file(&got, p, err);
	if (r == 0 && strcmp(got, digest) != 0)
		r = sbx_error_set(err, -EINVAL, "blob %s has digest %s", digest, got);
	return r < 0 ? r : load_json(out, p, err);
}

/* The descriptor for this host's platform, else the first one. */
static json_t *pick_manifest(json_t *manifests)
{
	size_t i;
	json_t *d;
	json_array_foreach(manifests, i, d) {
		json_t *pf = json_object_get(d, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *arch = json_string_value(json_object_get(pf, "architecture"));
		if (os && arch && strcmp(os, "linux") == 0 && strcmp(arch, HOST_ARCH) == 0)
			return d;
	}
	return json_array_get(manifests, 0);
}

/* Layers and config, in the order they are applied. */
struct plan {
	json_t *config;        /* the image config JSON document */
	char **layer_files;    /* tar files, bottom first */
	char **blob_digests;   /* expected file digests (NULL entries: unknown) */
};

static void plan_clear(struct plan *p)
{
	if (p->config)
		json_decref(p->config);
	sbx__strv_free(p->layer_files);
	sbx__strv_free(p->blob_digests);
}

static int run_plan(sbx_image **out, sbx_runtime *rt, const char *name, struct plan *p,
		    sbx_error **err)
{
	json_t *diff_ids = json_object_get(json_object_get(p->config, "rootfs"), "diff_ids");
	size_t n = sbx__strv_len((const char *const *)p->layer_files);
	char **layers = xcalloc(n + 1, sizeof(char *));
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		const char *diff = json_string_value(json_array_get(diff_ids, i));
		const char *blob = p->blob_digests ? p->blob_digests[i] : NULL;
		r = sbx__image_layer_from_tar(&layers[i], rt, p->layer_files[i],
					      sbx__image_digest_valid(diff) ? diff : NULL,
					      blob && *blob ? blob : NULL, err);
	}
	if (r == 0) {
		sbx_image_config cfg = { 0 };
		sbx__image_config_from_json(&cfg, json_object_get(p->config, "config"));
		r = sbx__image_commit(out, rt, name, layers, &cfg, err);
		sbx__image_config_clear(&cfg);
	}
	sbx__strv_free(layers);
	return r;
}

/* Follows index.json through nested indexes to one image manifest. */
static int oci_manifest(json_t **out, const char *dir, sbx_error **err)
{
	json_t *idx = NULL;
	int r = load_json_in(&idx, dir, "index.json", err);
	for (int depth = 0; r == 0 && depth < 4; depth++) {
		json_t *ms = json_object_get(idx, "manifests");
		if (!json_is_array(ms)) {
			*out = idx;
			return 0;
		}
		json_t *d = pick_manifest(ms), *next = NULL;
		if (!d) {
			json_decref(idx);
			return sbx_error_set(err, -EINVAL, "image index lists no manifests");
		}
		r = load_blob(&next, dir, json_string_value(json_object_get(d, "digest")), err);
		json_decref(idx);
		idx = next;
	}
	if (r == 0) {
		json_decref(idx);
		r = sbx_error_set(err, -EINVAL, "image indexes nested too deeply");
	}
	return r;
}

int sbx__image_import_oci_dir(sbx_image **out, sbx_runtime *rt, const char *name,
			      const char *dir, sbx_error **err)
{
	_cleanup_json_ json_t *m = NULL;
	int r = oci_manifest(&m, dir, err);
	if (r < 0)
		return r;
	json_t *layers = json_object_get(m, "layers");
	const char *cfg = json_string_value(json_object_get(json_object_get(m, "config"), "digest"));
	if (!json_is_array(layers) || !cfg)
		return sbx_error_set(err, -EINVAL, "image manifest has no config or layers");
	struct plan p = { 0 };
	p.layer_files = xcalloc(1, sizeof(char *));
	p.blob_digests = xcalloc(1, sizeof(char *));
	r = load_blob(&p.config, dir, cfg, err);
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l) {
		const char *dg = json_string_value(json_object_get(l, "digest"));
		_cleanup_free_ char *path = NULL;
		if (r < 0 || (r = blob_path(&path, dir, dg, err)) < 0)
			break;
		sbx__strv_push(&p.layer_files, path);
		sbx__strv_push(&p.blob_digests, dg);
	}
	if (r == 0)
		r = run_plan(out, rt, name, &p, err);
	plan_clear(&p);
	return r;
}

/* The manifest.json entry tagged NAME, else the first. */
static json_t *pick_docker(json_t *list, const char *name)
{
	size_t i, k;
	json_t *m, *t;
	json_array_foreach(list, i, m)
		json_array_foreach(json_object_get(m, "RepoTags"), k, t)
			if (json_is_string(t) && strcmp(json_string_value(t), name) == 0)
				return m;
	return json_array_get(list, 0);
}

int sbx__image_import_docker_dir(sbx_image **out, sbx_runtime *rt, const char *name,
				 const char *dir, sbx_error **err)
{
	_cleanup_json_ json_t *list = NULL;
	int r = load_json_in(&list, dir, "manifest.json", err);
	if (r < 0)
		return r;
	json_t *m = pick_docker(list, name);
	json_t *layers = json_object_get(m, "Layers");
	const char *cfg = json_string_value(json_object_get(m, "Config"));
	_cleanup_free_ char *cfg_path = path_inside(dir, cfg);
	if (!json_is_array(layers) || !cfg_path)
		return sbx_error_set(err, -EINVAL, "manifest.json has no usable Config or Layers");
	struct plan p = { 0 };
	p.layer_files = xcalloc(1, sizeof(char *));
	r = load_json(&p.config, cfg_path, err);
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l) {
		_cleanup_free_ char *path = path_inside(dir, json_string_value(l));
		if (r < 0)
			break;
		if (!path) {
			r = sbx_error_set(err, -EINVAL, "manifest.json: bad layer '%s'",
					  json_is_string(l) ? json_string_value(l) : "?");
			break;
		}
		sbx__strv_push(&p.layer_files, path);
	}
	if (r == 0)
		r = run_plan(out, rt, name, &p, err);
	plan_clear(&p);
	return r;
}

enum kind { KIND_ROOTFS, KIND_OCI, KIND_DOCKER };

static bool is_hex64(const char *s, size_t n)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Reads entry names until they show a rootfs, to tell image archives apart. */
static int classify_tar(enum kind *out, const char *path, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0)
		return -ENOSYS;
	struct archive *a = archive_read_new();
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	bool index = false, layout = false, manifest = false, other = false;
	struct archive_entry *e;
	int ar = archive_read_open_filename(a, path, 65536);
	int n = 0;
	while (!other && ar == ARCHIVE_OK && (ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);
		while (p[0] == '.' && p[1] == '/')
			p += 2;
		size_t top = strcspn(p, "/");
		bool file = p[top] == '\0';
		n++;
		if (file && strcmp(p, "index.json") == 0)
			index = true;
		else if (file && strcmp(p, "oci-layout") == 0)
			layout = true;
		else if (file && strcmp(p, "manifest.json") == 0)
			manifest = true;
		else if (top && strncmp(p, "blobs", top) != 0 && strncmp(p, "repositories", top) != 0 &&
			 !is_hex64(p, top) && !(top == 69 && is_hex64(p, 64) && !strcmp(p + 64, ".json")))
			other = true;
	}
	bool bad = ar != ARCHIVE_OK && ar != ARCHIVE_EOF;
	_cleanup_free_ char *why = bad || !n ? xstrdup(archive_error_string(a) ? archive_error_string(a)
									     : "no entries")
					     : NULL;
	archive_read_free(a);
	if (why)
		return sbx_error_set(err, -EINVAL, "%s: not a recognised image (%s); " EXPECTED, path,
				     why);
	*out = other ? KIND_ROOTFS : index && layout ? KIND_OCI : manifest ? KIND_DOCKER : KIND_ROOTFS;
	return 0;
}

/* Unpacks an image archive into a private temp dir and imports from there. */
static int import_archive(sbx_image **out, sbx_runtime *rt, const char *name, const char *src,
			  enum kind kind, sbx_error **err)
{
	_cleanup_free_ char *tmp = xasprintf("%s/tmp/import-XXXXXX", sbx_runtime_image_dir(rt));
	if (!mkdtemp(tmp))
		return sbx_error_setsys(err, -errno, errno, "create %s", tmp);
	int r = sbx__image_unpack_archive(src, tmp, err);
	if (r == 0 && kind == KIND_OCI)
		r = sbx__image_import_oci_dir(out, rt, name, tmp, err);
	else if (r == 0)
		r = sbx__image_import_docker_dir(out, rt, name, tmp, err);
	sbx__rm_rf(tmp, NULL);
	return r;
}

static int import_rootfs(sbx_image **out, sbx_runtime *rt, const char *name, const char *src,
			 bool dir, sbx_error **err)
{
	_cleanup_free_ char *digest = NULL;
	int r = dir ? sbx__image_layer_from_dir(&digest, rt, src, err)
		    : sbx__image_layer_from_tar(&digest, rt, src, NULL, NULL, err);
	if (r < 0)
		return r;
	char *layers[] = { digest, NULL };
	sbx_image_config cfg = { 0 };
	return sbx__image_commit(out, rt, name, layers, &cfg, err);
}

static int import_src(sbx_image **out, sbx_runtime *rt, const char *name, const char *src,
		      sbx_error **err)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s", src);
	if (S_ISDIR(st.st_mode)) {
		_cleanup_free_ char *idx = xasprintf("%s/index.json", src);
		_cleanup_free_ char *lay = xasprintf("%s/oci-layout", src);
		if (access(idx, F_OK) == 0 && access(lay, F_OK) == 0)
			return sbx__image_import_oci_dir(out, rt, name, src, err);
		return import_rootfs(out, rt, name, src, true, err);
	}
	if (!S_ISREG(st.st_mode))
		return sbx_error_set(err, -EINVAL, "%s is neither a file nor a directory; " EXPECTED, src);
	enum kind kind;
	int r = classify_tar(&kind, src, err);
	if (r < 0)
		return r;
	if (kind == KIND_ROOTFS)
		return import_rootfs(out, rt, name, src, false, err);
	return import_archive(out, rt, name, src, kind, err);
}

int sbx_image_import(sbx_image **out, sbx_runtime *rt, const char *name, const char *src,
		     sbx_error **err)
{
	if (!name || !*name || !src || !*src)
		return sbx_error_set(err, -EINVAL, "import: image name and source are required");
	if (strlen(name) > SBX_IMAGE_NAME_MAX)
		return sbx_error_set(err, -EINVAL, "import: image name is longer than %d bytes",
				     SBX_IMAGE_NAME_MAX);
	char abs[PATH_MAX];
	if (!realpath(src, abs)) {
		int e = errno;
		if (e == ENOENT)
			return sbx_error_set(err, -ENOENT, "import %s: %s: no such file or directory",
					     name, src);
		return sbx_error_setsys(err, -e, e, "import %s: %s", name, src);
	}
	_cleanup_close_ int lock = -1;
	int r = sbx__image_store_lock(&lock, rt, false, err);
	if (r == 0)
		r = import_src(out, rt, name, abs, err);
	return r < 0 ? sbx_error_prefix(err, r, "import %s", name) : 0;
}
