/* SPDX-License-Identifier: MIT */
/*
 * Image references ("debian:bookworm", "ghcr.io/astral-sh/uv:0.5",
 * "localhost:5000/x/y@sha256:...") split into registry, repository, tag and
 * digest, following the Docker reference grammar.
 */
#ifndef SBX_IMAGES_REF_H
#define SBX_IMAGES_REF_H

#include <sbx/error.h>

/* Docker Hub: what "docker.io" references are fetched from. */
#define SBX_DOCKER_HUB_HOST "registry-1.docker.io"
/* Longest reference accepted (repository names are capped at 255 by Docker). */
#define SBX_IMAGE_REF_MAX 512

struct sbx_image_ref {
	char *registry;   /* host[:port] to talk to: "registry-1.docker.io", "localhost:5000" */
	char *repository; /* "library/debian", "astral-sh/uv" */
	char *tag;        /* "bookworm"; "latest" when neither tag nor digest is given */
	char *digest;     /* "sha256:<hex>" or NULL */
};

/*
 * Parses REF. Without a registry part (first component with no '.' or ':' and
 * not "localhost") the registry is Docker Hub, where one-component names get
 * "library/". A digest wins over a tag when both are given (the tag is kept).
 * @return 0, -EINVAL (the message names REF and the rule it breaks).
 */
int sbx__image_ref_parse(struct sbx_image_ref *out, const char *ref, sbx_error **err);
/* Frees the members. */
void sbx__image_ref_clear(struct sbx_image_ref *r);
/* The tag or digest to ask the registry for (borrowed). */
const char *sbx__image_ref_reference(const struct sbx_image_ref *r);
/* True when REGISTRY is Docker Hub. */
int sbx__image_ref_is_docker_hub(const char *registry);

#endif
