/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of the image store (src/images/), for the public image
 * API and for template builds: store paths and locking, turning a tar stream or
 * a directory into a content-addressed layer, committing an image record, and
 * reading the apt mirror. Layout is described in docs/images.md.
 */
#ifndef SBX_IMAGES_STORE_H
#define SBX_IMAGES_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sbx/image.h>

/* Longest accepted image name, in bytes before escaping. */
#define SBX_IMAGE_NAME_MAX 128
/* Largest JSON document (image record, OCI index/manifest/config) read. */
#define SBX_IMAGE_JSON_MAX (16u << 20)

/* ---- store.c: paths, records, locking ------------------------------------ */

/* Percent-encodes every byte outside [A-Za-z0-9._-]. Owned. */
char *sbx__image_escape_name(const char *name);
/* True for "sha256:" followed by 64 lower-case hex digits. */
bool sbx__image_digest_valid(const char *digest);
/* "<image_dir>/layers/sha256/<hex>" for a valid digest. Owned. */
char *sbx__image_layer_dir(sbx_runtime *rt, const char *digest);
/* True when the layer is complete in the store (its meta.json exists). */
bool sbx__image_layer_exists(sbx_runtime *rt, const char *digest);
/* Creates the store root (mode 0700, tightened when it is looser), layers/,
 * layers/sha256/, images/ and tmp/, and scrubs layers stored before layers
 * were sanitized (once; sanitize.c). */
int sbx__image_store_init(sbx_runtime *rt, sbx_error **err);
/*
 * Takes the store lock: shared for importers (many at once), exclusive for
 * removal (which deletes layers). *fd_out is the lock fd; close it to release.
 */
int sbx__image_store_lock(int *fd_out, sbx_runtime *rt, bool exclusive, sbx_error **err);
/*
 * Writes images/<escaped-name>.json for NAME over the given layers (which must
 * exist in the store) and config, replacing any earlier NAME.
 * @param out owned (may be NULL).
 */
int sbx__image_commit(sbx_image **out, sbx_runtime *rt, const char *name, char *const *layers,
		      const sbx_image_config *cfg, sbx_error **err);
/* Frees the members of a config (not the struct itself). */
void sbx__image_config_clear(sbx_image_config *c);
/* Parses the OCI/Docker "config" object (Env, WorkingDir, User, Cmd, Entrypoint). */
void sbx__image_config_from_json(sbx_image_config *c, const void *json_object);

/* ---- layer.c: layers from tar streams and directories --------------------- */

/*
 * Extracts the tar stream in PATH (plain, gzip, xz or zstd) as a layer,
 * converting OCI whiteouts to overlayfs format. The digest is the sha256 of
 * the uncompressed stream (the OCI diffID).
 * @param digest_out owned "sha256:<hex>".
 * @param expect_diffid if non-NULL, a layer already stored under it is reused
 *        without reading PATH, and a stream hashing differently is -EINVAL.
 * @param expect_blob if non-NULL, the sha256 the file itself must have.
 * @return 0, -EINVAL (not a tar stream, unsafe entry, digest mismatch), -EIO.
 */
int sbx__image_layer_from_tar(char **digest_out, sbx_runtime *rt, const char *path,
			      const char *expect_diffid, const char *expect_blob, sbx_error **err);
/*
 * Copies directory DIR (absolute) as one layer, as-is (no whiteout conversion,
 * so an overlayfs upper directory stays one). The digest is the sha256 of a tar
 * stream generated from DIR.
 * @param digest_out owned "sha256:<hex>".
 */
int sbx__image_layer_from_dir(char **digest_out, sbx_runtime *rt, const char *dir,
			      sbx_error **err);
/*
 * Extracts an archive (any libarchive filter, tar format) into the existing
 * directory DEST without owners or whiteout conversion, refusing unsafe paths:
 * used to unpack OCI-layout and docker-save archives before importing them.
 */
int sbx__image_unpack_archive(const char *path, const char *dest, sbx_error **err);
/* The same for an archive open as FD (borrowed; LABEL names it in errors). */
int sbx__image_unpack_archive_fd(int fd, const char *label, const char *dest, sbx_error **err);
/* sha256 of a whole file as "sha256:<hex>" (owned). */
int sbx__image_sha256_file(char **digest_out, const char *path, sbx_error **err);
/* sha256 of a buffer as "sha256:<hex>" (owned). */
char *sbx__image_sha256_buf(const void *data, size_t len);

/* ---- sanitize.c: what a layer may hold ------------------------------------ */

struct archive_entry;
/*
 * Makes entry E safe to store in a layer: clears setuid/setgid bits (except
 * on directories) and drops security.* xattrs (file capabilities). Returns
 * false for an entry to skip: a block device or a character device other
 * than an overlayfs whiteout (0/0).
 */
bool sbx__image_entry_sanitize(struct archive_entry *e);
/* Applies the same rule to every layer already in the store, once (a marker
 * file in the store root records it). */
int sbx__image_store_scrub(sbx_runtime *rt, sbx_error **err);

/* ---- import.c: format detection, OCI image layout, docker save ------------ */

/* Imports an OCI image layout directory (index.json + oci-layout). */
int sbx__image_import_oci_dir(sbx_image **out, sbx_runtime *rt, const char *name,
			      const char *dir, sbx_error **err);
/* Imports an unpacked `docker save` directory (manifest.json). */
int sbx__image_import_docker_dir(sbx_image **out, sbx_runtime *rt, const char *name,
				 const char *dir, sbx_error **err);

/* ---- mirror.c: the machine's apt mirror ----------------------------------- */

/*
 * Finds the Debian mirror for SUITE in the apt configuration under ROOT
 * ("/" on a live system; a fixture directory in tests): the first URI of a
 * deb822 "Types: deb" stanza in etc/apt/sources.list.d/ *.sources, else the
 * first "deb URI SUITE" line of etc/apt/sources.list and sources.list.d/ *.list.
 * Entries whose suites include SUITE win over others; "-security" URIs and
 * suites are never chosen.
 * @param out owned URI without a trailing slash.
 * @return 0, -ENOENT (no usable entry).
 */
int sbx__image_mirror_from_apt(char **out, const char *root, const char *suite,
			       sbx_error **err);

#endif
