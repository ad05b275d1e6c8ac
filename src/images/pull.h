/* SPDX-License-Identifier: MIT */
/*
 * Registry pulls beyond the public sbx_image_pull(): the digests a pull
 * resolved to (for template builds, which pin "reference + digest"), download
 * statistics and progress for the CLI, and the pull record kept per image.
 */
#ifndef SBX_IMAGES_PULL_H
#define SBX_IMAGES_PULL_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/image.h>

/* Progress of one layer: index (0-based) of n, bytes so far of total (0 = unknown). */
typedef void (*sbx_pull_progress_fn)(void *payload, size_t layer, size_t n_layers,
				     uint64_t done, uint64_t total, int cached);

struct sbx_pull_opts {
	sbx_pull_progress_fn progress; /* may be NULL */
	void *payload;
};

struct sbx_pull_result {
	char *digest;          /* what the reference resolved to (index or manifest) */
	char *manifest;        /* the image manifest used (differs from digest for an index) */
	char *registry;        /* host[:port] the reference names ("registry-1.docker.io") */
	char *repository;      /* "library/debian" */
	size_t layers;         /* layers in the image */
	size_t layers_cached;  /* of which were already in the store (not downloaded) */
	uint64_t bytes;        /* layer bytes downloaded */
};

/* Frees the members. */
void sbx__pull_result_clear(struct sbx_pull_result *r);

/*
 * sbx_image_pull() with options and a result.
 * @param out owned (may be NULL). @param res filled on success (may be NULL).
 * @return as sbx_image_pull().
 */
int sbx__image_pull(sbx_image **out, struct sbx_pull_result *res, sbx_runtime *rt,
		    const char *ref, const char *name, const struct sbx_pull_opts *o,
		    sbx_error **err);

/*
 * Resolves REF to the digest of its manifest or index on the registry without
 * downloading anything else ("debian:bookworm" -> "sha256:...").
 * @param digest_out owned.
 * @return as sbx_image_pull().
 */
int sbx__image_resolve(char **digest_out, sbx_runtime *rt, const char *ref, sbx_error **err);

/*
 * Where image NAME was pulled from: the reference and the digest it resolved
 * to, from the pull record. Only valid while NAME is still that pull's result.
 * @param ref_out, digest_out owned (either may be NULL).
 * @return 0, -ENOENT (NAME was not pulled, or was re-imported or removed since).
 */
int sbx__image_pull_info(char **ref_out, char **digest_out, sbx_runtime *rt, const char *name,
			 sbx_error **err);

#endif
