/* SPDX-License-Identifier: MIT */
/*
 * Private pieces of the Harbor connector shared between the loader (task.c),
 * the reward reader (reward.c) and the ops table (connector.c).
 */
#ifndef SBX_CONNECTORS_HARBOR_H
#define SBX_CONNECTORS_HARBOR_H

#include <stddef.h>

#include <sbx/sys/connector.h>
#include <sbx/task.h>

/* Largest reward file read from a sandbox. */
#define SBX_REWARD_MAX_FILE (1u << 20)

/* task.c: 1 when `dir` is a directory holding task.toml. */
int sbx__harbor_probe(const char *dir);

/* task.c: fills a zeroed task from a Harbor task directory (the load op). */
int sbx__harbor_load(sbx_task *t, const char *dir, sbx_error **err);

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

#endif
