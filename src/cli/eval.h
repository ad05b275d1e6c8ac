/* SPDX-License-Identifier: MIT */
/* `sbx eval` internals shared by its files (cmd_eval.c, eval_*.c). */
#ifndef SBX_CLI_EVAL_H
#define SBX_CLI_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sbx/sbx.h>

/* The trajectory record's schema name (docs/trajectories.md). */
#define EVAL_SCHEMA "sbx.trajectory/1"

/*
 * The unbiased pass@k estimator of one task: n samples scored, c of them
 * passed, 1 - C(n-c, k) / C(n, k), computed as a product so that large n
 * cannot overflow. Returns -1 when k is 0 or more than n (not estimable).
 */
double eval_pass_at_k(unsigned n, unsigned c, unsigned k);

/* Per task counts of a sweep with several samples each. */
struct eval_task_count {
	unsigned scored, passed;
};

/*
 * pass@k averaged over the tasks that have at least k scored samples.
 * *used_out: how many tasks counted. Returns -1 when none did.
 */
double eval_pass_at_k_mean(const struct eval_task_count *v, size_t n, unsigned k,
			   size_t *used_out);

/* What the record says beyond the episode result. */
struct eval_meta {
	const char *model;      /* --model, or NULL (the agent's default) */
	const char *api_base;   /* --api-base without any user:password@, or NULL */
	const char *provider;   /* canonical backend name */
	const char *task_dir;   /* absolute task directory */
	unsigned sample;        /* 0-based sample index */
	const char *run;        /* "eval" or "replay" */
	const char *const *agent_args; /* the agent's "key=value" settings, or NULL:
	                                  the record keeps those that cannot name
	                                  a credential */
};

/*
 * One trajectory record (EVAL_SCHEMA) as a line of compact JSON: the
 * episode result, the agent's turns and messages (r->trajectory_json) and
 * the meta. Owned; free with free().
 */
char *eval_record(const sbx_episode_result *r, const struct eval_meta *m);

/* `sbx eval --replay FILE.jsonl`: argv after the options, the exit code. */
struct eval_replay_opts {
	const char *file;       /* the JSONL */
	const char *tasks_dir;  /* NULL: each record's task_dir */
	const char *backend;    /* NULL: the runtime's default */
	const char *out;        /* write the replayed records here, or NULL */
	double max_s;           /* episode wall clock, 0 = default */
	bool json;              /* a JSON summary line on stdout */
	unsigned concurrency;
};
int eval_replay(const struct eval_replay_opts *o);

/* A URL with any "user:password@" removed (owned). */
char *eval_url_redact(const char *url);

#endif
