/* SPDX-License-Identifier: MIT */
/*
 * Private to the registry client (registry.c, registry_auth.c): the client
 * state, and the policy half (where to connect, whether plain HTTP is allowed,
 * credentials, WWW-Authenticate parsing) that needs no network.
 */
#ifndef SBX_IMAGES_REGISTRY_INT_H
#define SBX_IMAGES_REGISTRY_INT_H

#include <stdbool.h>

#include "registry.h"

struct sbx_registry {
	char *name;      /* image name, for the import/bootstrap hint */
	char *host;      /* host[:port] requests go to (the mirror's when mirrored) */
	char *base;      /* "https://host[:port]" */
	char *repo;      /* "library/debian" */
	bool plain_ok;   /* plain HTTP allowed: loopback or SBX_INSECURE_REGISTRIES */
	char *auth_file; /* where the credentials came from, or NULL */
	char *basic;     /* base64("user:pass") or NULL (a secret) */
	char *bearer;    /* current token or NULL (a secret) */
	bool use_basic;  /* the registry asked for Basic instead of tokens */
};

/* Plain HTTP allowed for HOSTPORT ("127.0.0.1:5000", "[::1]:80", "reg.lan")? */
bool sbx__registry_plain_allowed(const char *hostport);
/* Sets c->host, c->base and c->plain_ok for REGISTRY, honouring SBX_REGISTRY_MIRROR. */
int sbx__registry_resolve_base(struct sbx_registry *c, const char *registry, sbx_error **err);
/*
 * Loads c->basic for c->host from SBX_REGISTRY_AUTH_FILE, else
 * ~/.docker/config.json when it exists. HUB adds Docker Hub's key aliases.
 * Registers every secret for redaction. No entry for the host is not an error.
 */
int sbx__registry_load_credentials(struct sbx_registry *c, bool hub, sbx_error **err);
/* The value of KEY in a WWW-Authenticate parameter list (key="v", ...). Owned or NULL. */
char *sbx__registry_challenge_param(const char *params, const char *key);

#endif
