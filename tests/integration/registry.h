/* SPDX-License-Identifier: MIT */
/* Shared by tests/integration/registry.c, registry_oci.c and registry_token.c. */
#ifndef SBX_TEST_REGISTRY_H
#define SBX_TEST_REGISTRY_H

#define USER "alice"
#define PASS "correct-horse-battery"

extern char *tmp;                          /* everything this test writes */
extern char *single_digest, *index_digest; /* set by build_images() */

char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
void sh(const char *f, ...) __attribute__((format(printf, 1, 2)));
void write_str(const char *path, const char *data);

/* registry_oci.c: builds the OCI layout: "single" (amd64, 2 layers) and
 * "multi" (arm64 + amd64 index). */
void build_images(void);

/* registry_token.c: the token endpoint on a free loopback port (tok_port),
 * trusted through the certificate it writes to cert_path. */
extern int tok_port, tok_granted, tok_refused;
void token_start(const char *cert_path);
void token_stop(void);

#endif
