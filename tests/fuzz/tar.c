/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: tar extraction (src/images/layer.c). Each input is stored
 * as a layer (whiteouts, opaque directories, owners, modes, xattrs; the
 * path-safety checks) and unpacked as an image archive (regular files,
 * directories and symlinks only), both into a store in the process's
 * scratch directory on tmpfs (scratch.c); whatever was extracted is removed
 * again, so every input starts from the same state. The input is rewritten
 * in place in one file kept open. For speed (each extraction costs a thread
 * and a directory tree), a hash of the input decides, the same way every
 * time, whether it also goes through the unpack mode (1 in 4) and whether
 * the layer is committed to the store (1 in 8; otherwise a digest that
 * cannot match stops it just before the commit, after the whole stream was
 * extracted and hashed).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/runtime.h>

#include "../../src/images/store.h"
#include "../../src/util/alloc.h"
#include "../../src/util/fs.h"
#include "fuzz.h"

static sbx_runtime *rt;
static char *input, *unpack;
static int input_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	/* layer.c extracts in a new thread per call; a 1 MiB stack instead of
	 * the 8 MiB default spares ASan clearing the shadow of 8 MiB each time. */
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 1u << 20);
	pthread_setattr_default_np(&a);
	pthread_attr_destroy(&a);
	const char *root = fz_scratch_dir("tar");
	sbx_error *e = NULL;
	char *state = xasprintf("%s/state", root), *images = xasprintf("%s/images", root);
	input = xasprintf("%s/input.tar", root);
	unpack = xasprintf("%s/unpack", root);
	input_fd = open(input, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (input_fd < 0) {
		perror(input);
		abort();
	}
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	if (sbx_runtime_new(&rt, &o, &e) < 0 || sbx__image_store_init(rt, &e) < 0) {
		fprintf(stderr, "tar: %s\n", e && e->msg ? e->msg : "setup");
		abort();
	}
	free(state);
	free(images);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!rt)
		LLVMFuzzerInitialize(NULL, NULL);
	sbx_error *e = NULL;
	if (pwrite(input_fd, data, size, 0) != (ssize_t)size || ftruncate(input_fd, (off_t)size) < 0)
		abort();
	uint32_t hash = 2166136261u;
	for (size_t i = 0; i < size; i++)
		hash = (hash ^ data[i]) * 16777619u;
	const char *never = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
	char *digest = NULL;
	if (sbx__image_layer_from_tar(&digest, rt, input, hash % 8 == 1 ? NULL : never, NULL, &e) == 0) {
		char *dir = sbx__image_layer_dir(rt, digest);
		sbx__rm_rf(dir, NULL);
		free(dir);
		free(digest);
	} else {
		sbx_error_free(e);
		e = NULL;
	}
	if (hash % 4 == 0 && (mkdir(unpack, 0700) == 0 || access(unpack, F_OK) == 0)) {
		if (sbx__image_unpack_archive(input, unpack, &e) < 0)
			sbx_error_free(e);
		sbx__rm_rf(unpack, NULL);
	}
	return 0;
}
