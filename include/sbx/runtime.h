/* SPDX-License-Identifier: MIT */
/**
 * @file runtime.h
 * A runtime is the process-wide context: where state and images live, which
 * provider is the default, and the logger. Create one per process.
 */
#ifndef SBX_RUNTIME_H
#define SBX_RUNTIME_H

#include <stdarg.h>
#include <sbx/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_runtime sbx_runtime;

/** Log levels, most severe first. */
typedef enum sbx_log_level {
	SBX_LOG_ERROR = 0,
	SBX_LOG_WARN = 1,
	SBX_LOG_INFO = 2,
	SBX_LOG_DEBUG = 3,
} sbx_log_level;

/** Log sink. `msg` has secrets already redacted. */
typedef void (*sbx_log_fn)(sbx_log_level level, const char *msg, void *payload);

#define SBX_RUNTIME_OPTS_VERSION 1

typedef struct sbx_runtime_opts {
	unsigned version;           /**< SBX_RUNTIME_OPTS_VERSION */
	const char *state_dir;      /**< NULL = $SBX_STATE_DIR or /run/sbx */
	const char *image_dir;      /**< NULL = $SBX_IMAGE_DIR or /var/lib/sbx/images */
	const char *default_provider; /**< NULL = the registry's default (sbx_provider_default) */
	sbx_log_fn log;             /**< NULL = no logging. Process-wide: it stays
	                                 installed after sbx_runtime_free(), until a
	                                 later runtime sets another */
	void *log_payload;          /**< borrowed; must outlive every runtime (and
	                                 any worker it waits for) that may log */
	sbx_log_level log_level;    /**< highest level passed to log */
} sbx_runtime_opts;

#define SBX_RUNTIME_OPTS_INIT { .version = SBX_RUNTIME_OPTS_VERSION, .log_level = SBX_LOG_INFO }

/**
 * Creates a runtime.
 * @param out owned; free with sbx_runtime_free().
 * @return 0, -EINVAL (bad opts), -EACCES (state dir not usable).
 */
int sbx_runtime_new(sbx_runtime **out, const sbx_runtime_opts *opts, sbx_error **err);

/**
 * Frees a runtime. Sandboxes still open must be freed first. NULL is fine.
 * First waits for creates abandoned by a cancel or deadline
 * (sbx_sandbox_create_ex()) to return from their provider and destroy what
 * they made, since they use the provider contexts this frees.
 */
void sbx_runtime_free(sbx_runtime *rt);

/** Borrowed: the state directory in use. */
const char *sbx_runtime_state_dir(const sbx_runtime *rt);
/** Borrowed: the image store directory in use. */
const char *sbx_runtime_image_dir(const sbx_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
