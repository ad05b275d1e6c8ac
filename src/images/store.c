/* SPDX-License-Identifier: MIT */
/*
 * The image store on disk: paths, the store lock, image records
 * (images/<escaped-name>.json) and the public get/list/remove/free calls.
 * Layers are written by layer.c; formats are recognised by import.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <sbx/image.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "store.h"

#define _cleanup_json_ _cleanup_(json_decrefp)

char *sbx__image_escape_name(const char *name)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(name);
	char *out = xmalloc(n * 3 + 1), *p = out;
	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		    (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-') {
			*p++ = (char)*s;
		} else {
			*p++ = '%';
			*p++ = hex[*s >> 4];
			*p++ = hex[*s & 15];
		}
	}
	*p = '\0';
	return out;
}

bool sbx__image_digest_valid(const char *digest)
{
	if (!digest || !sbx__str_startswith(digest, "sha256:"))
		return false;
	const char *h = digest + 7;
	size_t i = 0;
	for (; h[i]; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
			return false;
	return i == 64;
}

char *sbx__image_layer_dir(sbx_runtime *rt, const char *digest)
{
	return xasprintf("%s/layers/sha256/%s", sbx_runtime_image_dir(rt), digest + 7);
}

bool sbx__image_layer_exists(sbx_runtime *rt, const char *digest)
{
	if (!sbx__image_digest_valid(digest))
		return false;
	_cleanup_free_ char *dir = sbx__image_layer_dir(rt, digest);
	_cleanup_free_ char *meta = xasprintf("%s/meta.json", dir);
	return access(meta, F_OK) == 0;
}

/* Only root reaches into the store: layers are the images' files, owned by
 * the images' users, and a host user must not get at them. */
static int store_root(sbx_runtime *rt, sbx_error **err)
{
	const char *dir = sbx_runtime_image_dir(rt);
	int r = sbx__mkdir_p(dir, 0700, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "image store");
	struct stat st;
	if (stat(dir, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "image store %s", dir);
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700) < 0)
		return sbx_error_setsys(err, -errno, errno, "image store %s: chmod 0700", dir);
	return 0;
}

int sbx__image_store_init(sbx_runtime *rt, sbx_error **err)
{
	int r = store_root(rt, err);
	if (r < 0)
		return r;
	const char *sub[] = { "layers/sha256", "images", "tmp" };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(sub); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", sbx_runtime_image_dir(rt), sub[i]);
		r = sbx__mkdir_p(p, 0755, err);
		if (r < 0)
			return sbx_error_prefix(err, r, "image store");
	}
	return sbx__image_store_scrub(rt, err);
}

int sbx__image_store_lock(int *fd_out, sbx_runtime *rt, bool exclusive, sbx_error **err)
{
	int r = sbx__image_store_init(rt, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *p = xasprintf("%s/.lock", sbx_runtime_image_dir(rt));
	_cleanup_close_ int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", p);
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR)
			return sbx_error_setsys(err, -errno, errno, "lock %s", p);
	*fd_out = steal_fd(&fd);
	return 0;
}

static char *image_record_path(sbx_runtime *rt, const char *name)
{
	_cleanup_free_ char *esc = sbx__image_escape_name(name);
	return xasprintf("%s/images/%s.json", sbx_runtime_image_dir(rt), esc);
}

static int check_name(const char *name, sbx_error **err)
{
	if (!name || !*name)
		return sbx_error_set(err, -EINVAL, "image name is empty");
	if (strlen(name) > SBX_IMAGE_NAME_MAX)
		return sbx_error_set(err, -EINVAL, "image name '%.32s...' is longer than %d bytes",
				     name, SBX_IMAGE_NAME_MAX);
	return 0;
}

void sbx__image_config_clear(sbx_image_config *c)
{
	sbx__strv_free(c->env);
	free(c->workdir);
	free(c->user);
	sbx__strv_free(c->cmd);
	sbx__strv_free(c->entrypoint);
	sbx__strv_free(c->labels);
	sbx__strv_free(c->exposed_ports);
	memset(c, 0, sizeof(*c));
}

static char **strv_from_json(json_t *a)
{
	if (!json_is_array(a))
		return NULL;
	char **v = xcalloc(1, sizeof(char *));
	size_t i;
	json_t *e;
	json_array_foreach(a, i, e)
		if (json_is_string(e))
			sbx__strv_push(&v, json_string_value(e));
	return v;
}

static char *str_from_json(json_t *s)
{
	return json_is_string(s) && *json_string_value(s) ? xstrdup(json_string_value(s)) : NULL;
}

void sbx__image_config_from_json(sbx_image_config *c, const void *json_object)
{
	json_t *o = (json_t *)json_object;
	if (!json_is_object(o))
		return;
	c->env = strv_from_json(json_object_get(o, "Env"));
	c->workdir = str_from_json(json_object_get(o, "WorkingDir"));
	c->user = str_from_json(json_object_get(o, "User"));
	c->cmd = strv_from_json(json_object_get(o, "Cmd"));
	c->entrypoint = strv_from_json(json_object_get(o, "Entrypoint"));
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(o, "Labels"), k, v) {
		_cleanup_free_ char *kv = xasprintf("%s=%s", k, json_is_string(v) ? json_string_value(v) : "");
		sbx__strv_push(&c->labels, kv);
	}
	json_object_foreach(json_object_get(o, "ExposedPorts"), k, v)
		sbx__strv_push(&c->exposed_ports, k);
}

static json_t *strv_to_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *config_to_json(const sbx_image_config *c)
{
	json_t *o = json_object();
	json_object_set_new(o, "Env", strv_to_json(c ? c->env : NULL));
	if (c && c->workdir)
		json_object_set_new(o, "WorkingDir", json_string(c->workdir));
	if (c && c->user)
		json_object_set_new(o, "User", json_string(c->user));
	if (c && c->cmd)
		json_object_set_new(o, "Cmd", strv_to_json(c->cmd));
	if (c && c->entrypoint)
		json_object_set_new(o, "Entrypoint", strv_to_json(c->entrypoint));
	if (c && c->labels) {
		json_t *l = json_object();
		for (size_t i = 0; c->labels[i]; i++) {
			const char *eq = strchr(c->labels[i], '=');
			_cleanup_free_ char *k = eq ? xstrndup(c->labels[i], (size_t)(eq - c->labels[i]))
						    : xstrdup(c->labels[i]);
			json_object_set_new(l, k, json_string(eq ? eq + 1 : ""));
		}
		json_object_set_new(o, "Labels", l);
	}
	if (c && c->exposed_ports) {
		json_t *p = json_object();
		for (size_t i = 0; c->exposed_ports[i]; i++)
			json_object_set_new(p, c->exposed_ports[i], json_object());
		json_object_set_new(o, "ExposedPorts", p);
	}
	return o;
}

/* Layer size from meta.json: bytes on disk when recorded, else the tar size. */
static uint64_t layer_size(const char *layer_dir)
{
	_cleanup_free_ char *p = xasprintf("%s/meta.json", layer_dir);
	_cleanup_json_ json_t *j = json_load_file(p, 0, NULL);
	json_t *v = json_object_get(j, "disk_size");
	if (!json_is_integer(v))
		v = json_object_get(j, "size");
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* Builds an sbx_image from a record's bytes; -EINVAL when malformed. */
static int image_from_record(sbx_image **out, sbx_runtime *rt, const char *path, const char *data,
			     size_t len, sbx_error **err)
{
	json_error_t je;
	_cleanup_json_ json_t *j = json_loadb(data, len, 0, &je);
	json_t *name = json_object_get(j, "name"), *layers = json_object_get(j, "layers");
	if (!json_is_string(name) || !json_is_array(layers))
		return sbx_error_set(err, -EINVAL, "image record %s is malformed", path);
	sbx_image *img = xcalloc(1, sizeof(*img));
	img->name = xstrdup(json_string_value(name));
	_cleanup_free_ char *id = sbx__image_sha256_buf(data, len);
	img->id = steal_ptr(&id);
	img->n_layers = json_array_size(layers);
	img->layers = xcalloc(img->n_layers + 1, sizeof(char *));
	img->layer_paths = xcalloc(img->n_layers + 1, sizeof(char *));
	for (size_t i = 0; i < img->n_layers; i++) {
		const char *d = json_string_value(json_array_get(layers, i));
		if (!sbx__image_digest_valid(d)) {
			sbx_image_free(img);
			return sbx_error_set(err, -EINVAL, "image record %s: bad layer digest", path);
		}
		_cleanup_free_ char *dir = sbx__image_layer_dir(rt, d);
		img->layers[i] = xstrdup(d);
		img->layer_paths[i] = xasprintf("%s/rootfs", dir);
		img->size += layer_size(dir);
	}
	sbx__image_config_from_json(&img->config, json_object_get(j, "config"));
	img->created = json_number_value(json_object_get(j, "created"));
	*out = img;
	return 0;
}

static int load_record(sbx_image **out, sbx_runtime *rt, const char *path, sbx_error **err)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	int r = sbx__read_file(&data, &len, path, SBX_IMAGE_JSON_MAX, err);
	if (r < 0)
		return r;
	return image_from_record(out, rt, path, data, len, err);
}

int sbx__image_commit(sbx_image **out, sbx_runtime *rt, const char *name, char *const *layers,
		      const sbx_image_config *cfg, sbx_error **err)
{
	int r = check_name(name, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *j = json_object();
	json_t *jl = json_array();
	for (size_t i = 0; layers && layers[i]; i++) {
		if (!sbx__image_layer_exists(rt, layers[i]))
			return sbx_error_set(err, -ENOENT, "image %s: layer %s is not in the store",
					     name, layers[i]);
		json_array_append_new(jl, json_string(layers[i]));
	}
	json_object_set_new(j, "name", json_string(name));
	json_object_set_new(j, "layers", jl);
	json_object_set_new(j, "config", config_to_json(cfg));
	json_object_set_new(j, "created", json_real(sbx__now_real()));
	_cleanup_free_ char *data = json_dumps(j, JSON_INDENT(2));
	if (!data)
		return sbx_error_set(err, -EINVAL, "image %s: cannot encode record", name);
	size_t len = strlen(data);
	r = sbx__image_store_init(rt, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = image_record_path(rt, name);
	r = sbx__write_file_atomic(path, data, len, 0644, err);
	if (r < 0)
		return r;
	if (!out)
		return 0;
	return image_from_record(out, rt, path, data, len, err);
}

int sbx_image_get(sbx_image **out, sbx_runtime *rt, const char *name, sbx_error **err)
{
	int r = check_name(name, err);
	if (r < 0)
		return r;
	/* A store made by an older sbx is tightened by whatever uses it first,
	 * sandbox creation included (best effort: reading must not fail). */
	struct stat st;
	const char *dir = sbx_runtime_image_dir(rt);
	if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) != 0700)
		chmod(dir, 0700);
	_cleanup_free_ char *path = image_record_path(rt, name);
	if (access(path, F_OK) < 0)
		return sbx_error_set(err, -ENOENT,
				     "image '%s' not found in %s; import it with 'sbx image import %s SRC' "
				     "or build a Debian one with 'sbx image bootstrap %s'",
				     name, sbx_runtime_image_dir(rt), name, name);
	if (!out)
		return 0;
	return load_record(out, rt, path, err);
}

void sbx_image_free(sbx_image *img)
{
	if (!img)
		return;
	free(img->name);
	free(img->id);
	sbx__strv_free(img->layers);
	sbx__strv_free(img->layer_paths);
	sbx__image_config_clear(&img->config);
	free(img);
}

void sbx_image_list_free(sbx_image **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		sbx_image_free(v[i]);
	free(v);
}

static int cmp_image(const void *a, const void *b)
{
	return strcmp((*(sbx_image *const *)a)->name, (*(sbx_image *const *)b)->name);
}

int sbx_image_list(sbx_image ***out, size_t *n_out, sbx_runtime *rt, sbx_error **err)
{
	_cleanup_free_ char *dir = xasprintf("%s/images", sbx_runtime_image_dir(rt));
	sbx_image **v = NULL;
	size_t n = 0;
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d && errno != ENOENT)
		return sbx_error_setsys(err, -errno, errno, "open %s", dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
		sbx_image *img = NULL;
		if (load_record(&img, rt, p, NULL) < 0)
			continue; /* removed meanwhile, or not ours */
		v = xrealloc(v, (n + 1) * sizeof(*v));
		v[n++] = img;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_image);
	*out = v;
	*n_out = n;
	return 0;
}

static bool strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* Moves the layer out of layers/ first, so a crash never leaves half a layer. */
static int remove_layer(sbx_runtime *rt, const char *digest, sbx_error **err)
{
	_cleanup_free_ char *dir = sbx__image_layer_dir(rt, digest);
	char rnd[9];
	sbx__random_hex(rnd, 8);
	_cleanup_free_ char *tmp = xasprintf("%s/tmp/rm-%.12s-%s", sbx_runtime_image_dir(rt),
					     digest + 7, rnd);
	if (rename(dir, tmp) < 0)
		return errno == ENOENT ? 0 : sbx_error_setsys(err, -errno, errno, "move %s", dir);
	return sbx__rm_rf(tmp, err);
}

static void image_freep(sbx_image **p)
{
	sbx_image_free(*p);
}

int sbx_image_remove(sbx_runtime *rt, const char *name, sbx_error **err)
{
	_cleanup_close_ int lock = -1;
	_cleanup_(image_freep) sbx_image *img = NULL;
	int r = sbx_image_get(&img, rt, name, err);
	if (r < 0)
		return r;
	r = sbx__image_store_lock(&lock, rt, true, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = image_record_path(rt, name);
	if (unlink(path) < 0)
		return sbx_error_setsys(err, -errno, errno, "remove %s", path);
	sbx_image **all = NULL;
	size_t n = 0;
	r = sbx_image_list(&all, &n, rt, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < img->n_layers; i++) {
		bool used = false;
		for (size_t k = 0; k < n && !used; k++)
			used = strv_contains(all[k]->layers, img->layers[i]);
		if (!used && (r = remove_layer(rt, img->layers[i], err)) < 0)
			break;
	}
	sbx_image_list_free(all, n);
	return r;
}
