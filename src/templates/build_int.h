/* SPDX-License-Identifier: MIT */
/*
 * The template build executor, shared by build.c (the stages' order,
 * alias, lock, public API), stage.c (one stage and its cache chain) and
 * steps.c (what RUN, COPY/ADD and WORKDIR do to the layers).
 */
#ifndef SBX_TEMPLATES_BUILD_INT_H
#define SBX_TEMPLATES_BUILD_INT_H

#include <stdbool.h>

#include <sbx/template.h>

#include "templates_int.h"

/* The state of a stage between instructions. */
struct state {
	char chain[65];          /* cache chain digest (hex) so far */
	sbx_image_config cfg;    /* Env, WorkingDir, User, Cmd, Entrypoint, Labels, ports */
	char **shell;            /* SHELL, default /bin/sh -c */
	char **args;             /* ARGs in scope with a value, "K=V" */
	bool cmd_from_base;      /* CMD inherited: ENTRYPOINT resets it */
	char **layers;           /* digests, bottom first (build pass) */
	char **layer_paths;      /* directories, bottom first (build pass) */
	char *record;            /* "sbx-cache/<chain>" holding this state (build pass) */
};

struct build {
	sbx_runtime *rt;
	const sbx_build_opts *o;
	bool dry;                /* computing the alias: digests only */
	struct df_file *f;
	char *context;           /* absolute context directory */
	struct ctx_ignore *ig;
	char **build_args;
	char **meta;
	const char *user;        /* build user */
	bool *needed;            /* per stage */
	struct state *final;     /* per stage, once done */
	bool *done;
	char **memo;             /* per instruction: content digest of COPY/ADD sources */
	int step, n_steps;
	int built, cached;
	double deadline;         /* monotonic; 0 = none */
	char *tmp;               /* scratch directory of this build */
	sbx_error **err;
};

/* Step progress and other log lines (through opts->on_output, fd 2). */
void sbx__build_log(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Seconds left before the deadline (0 = no deadline; -1 when passed). */
double sbx__build_left(const struct build *b);

/* stage.c: runs stage si (FROM, then each instruction) into b->final[si]. */
int sbx__build_stage(struct build *b, size_t si);
/* sha256 hex of the parts, each followed by '\n'. */
void sbx__build_sha_hex(char out[65], const char *const *parts);
void sbx__build_state_clear(struct state *s);
/* Commits ST's layers and config as NAME; refreshes its layer paths. */
int sbx__build_commit(struct build *b, struct state *st, const char *name);
/* For _cleanup_(): frees an image. */
void sbx__build_image_freep(sbx_image **p);

/* steps.c: the content digest of COPY/ADD sources (into hex[65]). */
int sbx__step_copy_digest(struct build *b, const struct df_step *s, size_t stage, char hex[65]);
/* Builds the layer of a RUN, COPY/ADD or WORKDIR step on top of ST. Sets
 * *digest_out (owned) to the new layer or NULL when the step adds none. */
int sbx__step_layer(char **digest_out, struct build *b, struct state *st, const struct df_step *s,
		    size_t stage);

#endif
