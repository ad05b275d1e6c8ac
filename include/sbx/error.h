/* SPDX-License-Identifier: MIT */
/**
 * @file error.h
 * Errors as explicit structs. Every fallible call returns 0 or a negative
 * errno-style code and, when given a non-NULL `sbx_error **err`, stores a
 * heap error the caller releases with sbx_error_free().
 */
#ifndef SBX_ERROR_H
#define SBX_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/** One failure: the code returned, the errno behind it, and a one-line message. */
typedef struct sbx_error {
	int code;         /**< negative errno-style code, equal to the return value */
	int sys_errno;    /**< errno of the failing system call, 0 if none */
	int http_status;  /**< HTTP status for remote providers, 0 if none */
	char *provider;   /**< provider name, or NULL */
	char *msg;        /**< one lowercase line naming the object */
} sbx_error;

/** Frees an error; NULL is fine. */
void sbx_error_free(sbx_error *e);

/**
 * Records an error in *err (if err is non-NULL and *err is still NULL).
 * @return code, so callers can `return sbx_error_set(err, -EINVAL, "...")`.
 */
int sbx_error_set(sbx_error **err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** Like sbx_error_set, appending ": strerror(sys_errno)" and recording it. */
int sbx_error_setsys(sbx_error **err, int code, int sys_errno, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/**
 * Prefixes an existing error's message with context ("create sandbox: ...").
 * @return the error's code (or code if *err is NULL).
 */
int sbx_error_prefix(sbx_error **err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** A static name for a code ("ENOENT"), for JSON output. Never NULL. */
const char *sbx_error_code_name(int code);

#ifdef __cplusplus
}
#endif
#endif
