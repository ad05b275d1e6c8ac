/* SPDX-License-Identifier: MIT */
/*
 * Private pieces of the Harbor task connector shared between the loader,
 * the reward reader and the episode runner (sbx__task_* / sbx__reward_*).
 */
#ifndef SBX_TASKS_TASK_INT_H
#define SBX_TASKS_TASK_INT_H

#include <stddef.h>

#include <sbx/task.h>

/* Largest reward file read from a sandbox. */
#define SBX_REWARD_MAX_FILE (1u << 20)

/*
 * Expands ${VAR} and ${VAR:-default} in `in` from the process environment.
 * "$$" is not special; a lone "$" or "${" without "}" is kept verbatim.
 * @param out owned expansion.
 * @param missing_out on -ENOENT: owned name of the unset variable.
 * @return 0, -ENOENT (a ${VAR} without default is unset).
 */
int sbx__task_expand_env(char **out, const char *in, char **missing_out);

/* "2G", "512M", "1024K" (optional trailing B, case-insensitive; 1G = 1024 MB)
 * -> MB, rounded up. 0 or -EINVAL. */
int sbx__task_parse_mb(unsigned *out, const char *s);

/* What the verifier left behind. */
typedef enum sbx_reward_status {
	SBX_REWARD_OK = 0,
	SBX_REWARD_MISSING,     /* neither reward.json nor reward.txt */
	SBX_REWARD_EMPTY,       /* the file read is empty (or only whitespace) */
	SBX_REWARD_UNPARSABLE,  /* not a flat JSON object of numbers / not one float */
} sbx_reward_status;

typedef struct sbx_reward {
	sbx_reward_status status;
	double reward;          /* the "reward" metric (else the mean of all metrics) */
	char *rewards_json;     /* owned compact JSON object of every metric */
	const char *source;     /* static "reward.json" / "reward.txt", or NULL */
	char *detail;           /* owned one-line description when status != OK */
} sbx_reward;

/*
 * Decides the reward from the two files' contents; NULL = file absent.
 * reward.json, when present, is authoritative (no fallback to reward.txt).
 */
void sbx__reward_parse(sbx_reward *out, const char *json, size_t json_len, const char *txt,
		       size_t txt_len);
void sbx__reward_free(sbx_reward *r);

/* task_image.c: the task's image (prebuilt, built or pulled), the build
 * bounded by timeout_s; `provider` (NULL = from the environment) picks E2B
 * templates for the e2b backend. *out is filled on 0. */
int sbx__task_resolve(sbx_task_image *out, sbx_runtime *rt, const sbx_task *t, int force,
		      double timeout_s, sbx_output_fn on_output, void *payload, const char *provider,
		      sbx_error **err);

/* The episode's whole wall clock from the environment (see sbx_episode_opts). */
double sbx__episode_default_max_s(void);

#endif
