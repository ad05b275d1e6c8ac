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
	json_decref(o);
	return 0;
}

void sbx__state_clear(struct local_state *st)
{
	free(st->id);
	free(st->image);
	free(st->status);
	sbx__strv_free(st->labels);
	memset(st, 0, sizeof(*st));
}
