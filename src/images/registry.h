/* SPDX-License-Identifier: MIT */
/*
 * A small client for the OCI distribution API (Registry HTTP API v2) over
 * libcurl: anonymous access first, then Bearer tokens (or Basic) on 401,
 * credentials from a docker config.json key file, plain HTTP only for
 * loopback and explicitly insecure registries, optional mirrors.
 */
#ifndef SBX_IMAGES_REGISTRY_H
#define SBX_IMAGES_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sbx/error.h>

#include "ref.h"

struct sbx_registry;

/* Called while a blob downloads: bytes so far and the expected total (0 = unknown). */
typedef void (*sbx_registry_progress_fn)(void *payload, uint64_t done, uint64_t total);

/*
 * Prepares a client for REF's registry and repository. NAME is the image name,
 * for the "import or bootstrap it instead" hint of connection errors.
 * Reads SBX_REGISTRY_MIRROR, SBX_INSECURE_REGISTRIES and the auth file
 * (SBX_REGISTRY_AUTH_FILE, else ~/.docker/config.json when it exists).
 * @return 0, -EINVAL (bad mirror or plain-HTTP registry that is not allowed),
 *         -ENOENT (SBX_REGISTRY_AUTH_FILE missing).
 */
int sbx__registry_open(struct sbx_registry **out, const struct sbx_image_ref *ref,
		       const char *name, sbx_error **err);
void sbx__registry_free(struct sbx_registry *c);

/*
 * GET /v2/<repo>/manifests/<reference> accepting OCI and Docker v2 manifests
 * and indexes, at most SBX_IMAGE_JSON_MAX bytes.
 * @param body_out owned, NUL-terminated; @param type_out owned Content-Type (may be NULL).
 * @return 0, -ENOENT, -EACCES, -ECONNREFUSED, -EHOSTUNREACH, -E2BIG, -EIO.
 */
int sbx__registry_get_manifest(struct sbx_registry *c, const char *reference, char **body_out,
			       size_t *len_out, char **type_out, sbx_error **err);

/* GET /v2/<repo>/blobs/<digest> into memory (at most MAX bytes), checking the digest. */
int sbx__registry_get_blob_buf(struct sbx_registry *c, const char *digest, size_t max,
			       char **body_out, size_t *len_out, sbx_error **err);

/*
 * GET /v2/<repo>/blobs/<digest> into FD (following redirects), hashing as it
 * streams. SIZE is the size the manifest gives (0 = unknown); more is an error.
 * @return 0, -EINVAL (digest or size mismatch), plus the codes above.
 */
int sbx__registry_get_blob_file(struct sbx_registry *c, const char *digest, uint64_t size,
				int fd, sbx_registry_progress_fn progress, void *payload,
				sbx_error **err);

/* True for "localhost", 127.0.0.0/8 and ::1 (HOST without port or brackets). */
bool sbx__registry_host_is_loopback(const char *host);

#endif
