/* SPDX-License-Identifier: MIT */
/**
 * @file backend.h
 * Backend (provider) names and credentials for every code path: the CLI, the
 * library, `sbx env --for-workers` and `sbx doctor`. Both come from the
 * provider registry's descriptions (sys/provider.h): names, aliases and each
 * provider's credential spec.
 */
#ifndef SBX_BACKEND_H
#define SBX_BACKEND_H

#include <stddef.h>
#include <sbx/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Resolves a backend name: `flag` if non-empty, else $SBX_BACKEND, else
 * $OPENENV_SANDBOX_BACKEND, else the registry's default (local, the one backend
 * that spends nobody's quota). Trimmed, lower-cased; aliases (agentenv for e2b)
 * map to the canonical name.
 * @param out owned canonical name of a described provider.
 * @return 0, -EINVAL (unknown name; the message lists the choices).
 */
int sbx_backend_resolve(char **out, const char *flag, sbx_error **err);

/** Every accepted name and alias, sorted, comma separated (e.g. agentenv, daytona,
 *  e2b, local, modal). Borrowed, per thread, until the next call. */
const char *sbx_backend_names(void);

/** Where a credential came from. */
typedef enum sbx_cred_source {
	SBX_CRED_NONE = 0,  /**< the backend needs none */
	SBX_CRED_ENV = 1,   /**< every key variable is set */
	SBX_CRED_FILE = 2,  /**< read from a key file */
} sbx_cred_source;

/** A resolved credential. Secret values are registered for redaction. */
typedef struct sbx_credential {
	char *backend;           /**< canonical backend name */
	sbx_cred_source source;
	char *path;              /**< the key file read (SBX_CRED_FILE), else NULL */
	char *file_var;          /**< e.g. E2B_API_KEY_FILE; NULL when none is needed */
	char **values;           /**< secret values in key-variable order; never print */
	size_t n_values;
	char *endpoint;          /**< endpoint in use, or NULL = the provider default */
	char *endpoint_label;    /**< human label, e.g. "endpoint" */
} sbx_credential;

/**
 * Resolves the credential of a backend with one precedence everywhere:
 * (1) every key variable set in the environment (a pair counts only when
 * complete), else (2) the key file named by the file variable, else (3) the
 * default key file. A profile file (Modal's ~/.modal.toml) gives the profile
 * named by the provider's profile variable (MODAL_PROFILE), else the active one.
 * @param out owned; free with sbx_credential_clear().
 * @return 0, -ENOKEY (missing: the message names both halves of a pair, the
 *         file, and how to provision it), -EINVAL (malformed file), -EINVAL
 *         (unknown backend).
 */
int sbx_credential_resolve(sbx_credential *out, const char *backend, sbx_error **err);

/** Frees what a credential owns. */
void sbx_credential_clear(sbx_credential *c);

/**
 * What a launcher forwards to worker machines for `backend`: "KEY=VALUE"
 * lines with key-file paths and addresses only, never a secret value.
 * Addresses containing '@' (credentials in userinfo) are refused.
 * @param out owned NULL-terminated list; free each and the array.
 * @param note_out owned human note (where the credential comes from), may be NULL.
 * @return 0, -ENOKEY, -EINVAL ('@' in an address: the message names the variable).
 */
int sbx_backend_forward_env(char ***out, char **note_out, const char *backend, sbx_error **err);

#ifdef __cplusplus
}
#endif
#endif
