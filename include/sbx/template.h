/* SPDX-License-Identifier: MIT */
/**
 * @file template.h
 * Template builds: a Dockerfile plus its build context become an image in the
 * local store, one cached layer per instruction. The template alias is a
 * digest of everything that determines the result, so an unchanged task maps
 * to the same alias and is never built twice.
 */
#ifndef SBX_TEMPLATE_H
#define SBX_TEMPLATE_H

#include <stddef.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/sandbox.h>
#include <sbx/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_BUILD_OPTS_VERSION 1

typedef struct sbx_build_opts {
	unsigned version;               /**< SBX_BUILD_OPTS_VERSION */
	const char *context_dir;        /**< build context directory (required) */
	const char *dockerfile;         /**< NULL = <context_dir>/Dockerfile */
	const char *slug;               /**< alias prefix, e.g. the task name ("fix-git") */
	const char *name;               /**< extra image name to tag the result with, or NULL */
	const char *const *build_args;  /**< "K=V" for ARG, NULL-terminated */
	const char *target;             /**< multi-stage target, NULL = last stage */
	const char *user;               /**< build user recorded in the alias, NULL = "root" */
	double cpus;                    /**< build sandbox resources (part of the alias) */
	unsigned memory_mb;
	unsigned storage_mb;
	double timeout_s;               /**< whole build, 0 = none (tasks: build_timeout_sec) */
	int force;                      /**< rebuild every layer */
	sbx_network network;            /**< RUN steps' network; builds default to INTERNET (never HOST unless set) */
	int network_set;                /**< 1 when `network` was set explicitly */
	sbx_output_fn on_output;        /**< build log (RUN output and step lines) */
	void *payload;
} sbx_build_opts;

#define SBX_BUILD_OPTS_INIT { .version = SBX_BUILD_OPTS_VERSION }

typedef struct sbx_build_result {
	char *alias;          /**< "<slug>-<10 hex>": the image name in the store */
	char *digest;         /**< full sha256 hex behind the alias */
	int cached;           /**< 1: the alias existed, nothing was built */
	int layers_built;
	int layers_cached;
	double seconds;
} sbx_build_result;

/**
 * Computes the template alias without building (resolves FROM to a digest).
 * @param alias_out owned string.
 * @return 0, -ENOENT (Dockerfile or base image missing), -EINVAL (bad Dockerfile:
 *         the message names file:line and what was expected).
 */
int sbx_template_alias(char **alias_out, sbx_runtime *rt, const sbx_build_opts *o, sbx_error **err);

/**
 * Builds (or finds cached) the template image. Concurrent builds of the same
 * alias, in any process, build once. The result is the store image `alias`.
 * @return 0, -ENOENT, -EINVAL, -ETIMEDOUT (timeout_s), -EIO (a RUN step failed:
 *         the message names the step and its exit code).
 */
int sbx_template_build(sbx_build_result *out, sbx_runtime *rt, const sbx_build_opts *o,
		       sbx_error **err);

/** Frees what a build result owns. NULL is fine. */
void sbx_build_result_free(sbx_build_result *r);

#ifdef __cplusplus
}
#endif
#endif
