/* SPDX-License-Identifier: MIT */
/*
 * The per-sandbox state file, <state>/local/<id>.json: enough for any
 * process (the CLI, a restarted server, `sbx gc`) to find, verify and remove
 * a sandbox: init's pid and start time, the owner's pid and start time, the
 * image, labels and expiry. Written atomically.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "local_int.h"

/* What a fork's children inherit: limits, network, users, env. */
static json_t *spec_json(const struct local_state *st)
{
	const sbx_sandbox_opts *o = &st->spec;
	json_t *env = json_array();
	for (size_t i = 0; st->env && st->env[i]; i++)
		json_array_append_new(env, json_string(st->env[i]));
	json_t *j = json_pack("{s:f, s:I, s:I, s:I, s:i, s:I, s:i, s:I, s:i, s:i, s:I, s:o}", "cpus", o->cpus,
			      "memory_mb", (json_int_t)o->memory_mb, "storage_mb", (json_int_t)o->storage_mb,
			      "pids_max", (json_int_t)o->pids_max, "network", (int)o->network,
			      "nofile_max", (json_int_t)o->nofile_max, "userns", (int)o->userns,
			      "ttl_s", (json_int_t)o->ttl_s, "net_raw", o->net_raw, "scratch", (int)o->scratch,
			      "layer_base", (json_int_t)st->layer_base, "env", env);
	if (j && o->workdir)
		json_object_set_new(j, "workdir", json_string(o->workdir));
	if (j && o->user)
		json_object_set_new(j, "user", json_string(o->user));
	if (j && o->hostname)
		json_object_set_new(j, "hostname", json_string(o->hostname));
	if (j && st->frozen) {
		json_t *fz = json_array();
		for (size_t i = 0; st->frozen[i]; i++)
			json_array_append_new(fz, json_string(st->frozen[i]));
		json_object_set_new(j, "frozen", fz);
	}
	return j ? j : json_object();
}

static void spec_read(struct local_state *st, json_t *j)
{
	if (!json_is_object(j))
		return;
	sbx_sandbox_opts *o = &st->spec;
	*o = (sbx_sandbox_opts)SBX_SANDBOX_OPTS_INIT;
	o->cpus = json_number_value(json_object_get(j, "cpus"));
	o->memory_mb = (unsigned)json_integer_value(json_object_get(j, "memory_mb"));
	o->storage_mb = (unsigned)json_integer_value(json_object_get(j, "storage_mb"));
	o->pids_max = (unsigned)json_integer_value(json_object_get(j, "pids_max"));
	o->network = (sbx_network)json_integer_value(json_object_get(j, "network"));
	o->nofile_max = (unsigned)json_integer_value(json_object_get(j, "nofile_max"));
	o->userns = (sbx_userns)json_integer_value(json_object_get(j, "userns"));
	o->ttl_s = (unsigned)json_integer_value(json_object_get(j, "ttl_s"));
	o->net_raw = (int)json_integer_value(json_object_get(j, "net_raw"));
	o->scratch = (sbx_scratch_kind)json_integer_value(json_object_get(j, "scratch"));
	st->layer_base = (uint32_t)json_integer_value(json_object_get(j, "layer_base"));
	const char *w = json_string_value(json_object_get(j, "workdir"));
	const char *u = json_string_value(json_object_get(j, "user"));
	const char *h = json_string_value(json_object_get(j, "hostname"));
	o->workdir = w ? xstrdup(w) : NULL;
	o->user = u ? xstrdup(u) : NULL;
	o->hostname = h ? xstrdup(h) : NULL;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(j, "env"), i, v)
		if (json_is_string(v))
			sbx__strv_push(&st->env, json_string_value(v));
	json_array_foreach(json_object_get(j, "frozen"), i, v)
		if (json_is_string(v) && sbx__frozen_valid(json_string_value(v)))
			sbx__strv_push(&st->frozen, json_string_value(v));
	st->has_spec = 1;
}

int sbx__state_write(const char *path, const struct local_state *st, sbx_error **err)
{
	json_t *labels = json_array();
	for (size_t i = 0; st->labels && st->labels[i]; i++)
		json_array_append_new(labels, json_string(st->labels[i]));
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:b, s:f, s:f, s:o}",
			      "id", st->id, "image", st->image ? st->image : "",
			      "status", st->status ? st->status : "running",
			      "pid", (json_int_t)st->pid, "start", (json_int_t)st->start,
			      "owner", (json_int_t)st->owner, "owner_start", (json_int_t)st->owner_start,
			      "detach", st->detach, "created", st->created, "expires", st->expires,
			      "labels", labels);
	if (o && st->has_spec)
		json_object_set_new(o, "spec", spec_json(st));
	if (!o)
		return sbx_error_set(err, -EINVAL, "state for %s: labels or image are not valid UTF-8", st->id);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	int r = sbx__write_file_atomic(path, text, strlen(text), 0600, err);
	free(text);
	return r;
}

int sbx__state_read(struct local_state *st, const char *path, sbx_error **err)
{
	memset(st, 0, sizeof(*st));
	json_error_t je;
	json_t *o = json_load_file(path, 0, &je);
	if (!o)
		return sbx_error_set(err, -ENOENT, "read %s: %s", path, je.text);
	const char *id = NULL, *image = NULL, *status = NULL;
	json_int_t pid = 0, start = 0, owner = 0, owner_start = 0;
	int detach = 0;
	double created = 0, expires = 0;
	json_t *labels = NULL;
	if (json_unpack_ex(o, &je, 0, "{s:s, s?s, s?s, s?I, s?I, s?I, s?I, s?b, s?F, s?F, s?o}", "id", &id,
			   "image", &image, "status", &status, "pid", &pid, "start", &start, "owner",
			   &owner, "owner_start", &owner_start, "detach", &detach, "created", &created,
			   "expires", &expires, "labels", &labels) < 0) {
		json_decref(o);
		return sbx_error_set(err, -EPROTO, "%s: %s", path, je.text);
	}
	st->id = xstrdup(id);
	st->image = xstrdup(image ? image : "");
	st->status = xstrdup(status ? status : "running");
	st->pid = (pid_t)pid;
	st->start = (uint64_t)start;
	st->owner = (pid_t)owner;
	st->owner_start = (uint64_t)owner_start;
	st->detach = detach;
	st->created = created;
	st->expires = expires;
	size_t i;
	json_t *v;
	json_array_foreach(labels, i, v)
		if (json_is_string(v))
			sbx__strv_push(&st->labels, json_string_value(v));
	spec_read(st, json_object_get(o, "spec"));
	json_decref(o);
	return 0;
}

void sbx__state_clear(struct local_state *st)
{
	free(st->id);
	free(st->image);
	free(st->status);
	sbx__strv_free(st->labels);
	if (st->has_spec) {
		free((char *)st->spec.workdir);
		free((char *)st->spec.user);
		free((char *)st->spec.hostname);
	}
	sbx__strv_free(st->env);
	sbx__strv_free(st->frozen);
	memset(st, 0, sizeof(*st));
}
