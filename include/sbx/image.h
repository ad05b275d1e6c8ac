/* SPDX-License-Identifier: MIT */
/**
 * @file image.h
 * The local image store: content-addressed layers (extracted directories in
 * overlayfs format) plus an image config (Env, WorkingDir, User, Cmd).
 */
#ifndef SBX_IMAGE_H
#define SBX_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sbx/error.h>
#include <sbx/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a container would get from the image's config. */
typedef struct sbx_image_config {
	char **env;         /**< NULL-terminated "K=V" */
	char *workdir;      /**< NULL if unset */
	char *user;         /**< NULL if unset */
	char **cmd;         /**< NULL-terminated, may be NULL */
	char **entrypoint;  /**< NULL-terminated, may be NULL */
	char **labels;      /**< NULL-terminated "key=value" (OCI Labels), may be NULL */
	char **exposed_ports; /**< NULL-terminated "80/tcp" (OCI ExposedPorts), may be NULL */
} sbx_image_config;

/** An image in the store. */
typedef struct sbx_image {
	char *name;          /**< "debian:bookworm" */
	char *id;            /**< "sha256:<hex>" of the stored manifest */
	size_t n_layers;
	char **layers;       /**< layer digests "sha256:<hex>", bottom first */
	char **layer_paths;  /**< absolute directories of the extracted layers, bottom first */
	sbx_image_config config;
	double created;      /**< unix seconds */
	uint64_t size;       /**< bytes on disk over all layers */
} sbx_image;

/**
 * Looks up an image by name.
 * @param out owned; free with sbx_image_free().
 * @return 0, -ENOENT (the message says how to import or bootstrap it).
 */
int sbx_image_get(sbx_image **out, sbx_runtime *rt, const char *name, sbx_error **err);

/** Frees an image; NULL is fine. */
void sbx_image_free(sbx_image *img);

/**
 * Imports SRC as NAME. SRC is a rootfs directory, a rootfs tarball (plain, gz,
 * xz, zst), an OCI image layout directory or archive, or a `docker save` archive.
 * OCI whiteouts are honoured. Replaces an existing NAME.
 * @param out owned (may be NULL if not wanted).
 * @return 0, -ENOENT (SRC missing), -EINVAL (unrecognised format).
 */
int sbx_image_import(sbx_image **out, sbx_runtime *rt, const char *name, const char *src,
		     sbx_error **err);

#define SBX_BOOTSTRAP_OPTS_VERSION 1

typedef struct sbx_bootstrap_opts {
	unsigned version;              /**< SBX_BOOTSTRAP_OPTS_VERSION */
	const char *name;              /**< image name to create */
	const char *suite;             /**< NULL = "bookworm" */
	const char *mirror;            /**< NULL = from the machine's apt configuration */
	const char *const *include;    /**< extra packages, NULL-terminated */
	const char *variant;           /**< NULL = "minbase" */
} sbx_bootstrap_opts;

#define SBX_BOOTSTRAP_OPTS_INIT { .version = SBX_BOOTSTRAP_OPTS_VERSION }

/**
 * Builds a Debian image with debootstrap from the machine's apt mirror.
 * @return 0, -ENOENT (debootstrap missing), -EIO (debootstrap failed; its log path
 *         is in the message).
 */
int sbx_image_bootstrap(sbx_image **out, sbx_runtime *rt, const sbx_bootstrap_opts *opts,
			sbx_error **err);

/**
 * Pulls REF ("registry/repo:tag", "repo@sha256:...", "debian:bookworm" = Docker
 * Hub library) from an OCI registry (Registry HTTP API v2, bearer-token auth)
 * into the store under NAME (NULL = REF). Registry host overrides and plain
 * HTTP for loopback registries: see docs/images.md.
 * @param out owned (may be NULL).
 * @return 0, -ENOENT (no such repository/tag), -EACCES (auth refused),
 *         -ECONNREFUSED / -EHOSTUNREACH (registry unreachable; the message says
 *         how to import or bootstrap the image instead).
 */
int sbx_image_pull(sbx_image **out, sbx_runtime *rt, const char *ref, const char *name,
		   sbx_error **err);

/**
 * Lists images.
 * @param out owned array of owned images; free with sbx_image_list_free().
 */
int sbx_image_list(sbx_image ***out, size_t *n_out, sbx_runtime *rt, sbx_error **err);
void sbx_image_list_free(sbx_image **v, size_t n);

/**
 * Removes an image name; layers no other image uses are deleted.
 * @return 0, -ENOENT.
 */
int sbx_image_remove(sbx_runtime *rt, const char *name, sbx_error **err);

#ifdef __cplusplus
}
#endif
#endif
