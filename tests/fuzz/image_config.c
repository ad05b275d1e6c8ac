/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: the image-config parsers of src/images/. The input is used
 * three ways: as an OCI image config (its "config" object, as pulls and
 * imports read it, into sbx_image_config), as an image record of the store
 * (written to a tmpfs store and loaded by sbx_image_get, which validates the
 * layer digests and reads the config), and its first line as an image
 * reference (ref.c).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/image.h>
#include <sbx/runtime.h>

#include "../../src/images/ref.h"
#include "../../src/images/store.h"
#include "../../src/util/alloc.h"
#include "../../src/util/fs.h"
#include "fuzz.h"

static sbx_runtime *rt;
static char *record;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	const char *root = fz_scratch_dir("img");
	sbx_error *e = NULL;
	char *state = xasprintf("%s/state", root), *images = xasprintf("%s/images", root);
	char *dir = xasprintf("%s/images", images);
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	if (sbx__mkdir_p(dir, 0700, &e) < 0 || sbx_runtime_new(&rt, &o, &e) < 0) {
		fprintf(stderr, "image_config: %s\n", e && e->msg ? e->msg : "setup");
		abort();
	}
	char *esc = sbx__image_escape_name("fuzz");
	record = xasprintf("%s/%s.json", dir, esc);
	free(esc);
	free(dir);
	free(state);
	free(images);
	return 0;
}

static void as_config(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *j = json_loadb((const char *)data, size, 0, &je);
	if (!j)
		return;
	sbx_image_config c = { 0 };
	sbx__image_config_from_json(&c, json_object_get(j, "config"));
	sbx__image_config_clear(&c);
	sbx__image_config_from_json(&c, j);
	sbx__image_config_clear(&c);
	json_decref(j);
}

static void as_record(const uint8_t *data, size_t size)
{
	sbx_error *e = NULL;
	if (sbx__write_file_atomic(record, data, size, 0644, &e) < 0) {
		sbx_error_free(e);
		return;
	}
	sbx_image *img = NULL;
	if (sbx_image_get(&img, rt, "fuzz", &e) == 0)
		sbx_image_free(img);
	else
		sbx_error_free(e);
}

static void as_ref(const uint8_t *data, size_t size)
{
	const void *nl = memchr(data, '\n', size);
	char *line = xstrndup((const char *)data, nl ? (size_t)((const uint8_t *)nl - data) : size);
	struct sbx_image_ref ref = { 0 };
	sbx_error *e = NULL;
	if (sbx__image_ref_parse(&ref, line, &e) == 0) {
		(void)sbx__image_ref_reference(&ref);
		(void)sbx__image_ref_is_docker_hub(ref.registry);
		sbx__image_ref_clear(&ref);
	} else {
		sbx_error_free(e);
	}
	(void)sbx__image_digest_valid(line);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!rt)
		LLVMFuzzerInitialize(NULL, NULL);
	as_config(data, size);
	as_record(data, size);
	as_ref(data, size);
	return 0;
}
