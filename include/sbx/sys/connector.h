/* SPDX-License-Identifier: MIT */
/**
 * @file sys/connector.h
 * For connector and agent implementors: the versioned ops tables, their
 * registries, and what a connector or an agent may do with a running episode.
 *
 * A **connector** knows one task format (Harbor: task.toml, solution/,
 * tests/, /logs/verifier/reward.*). It loads a task directory into an
 * sbx_task, says what sandbox the task needs and what the agent phase gets,
 * and verifies the task after the agent. An **agent** plays the agent phase
 * (`oracle` replays the task's solution, `nop` does nothing) through
 * sbx_episode_step(). The episode driver owns the order of the stages, the
 * clocks, the statuses and the record (docs/tasks.md): a connector or an
 * agent never sets a status, it reports what happened.
 *
 * Every callback returns 0 or a negative code and sets *err on failure.
 * Strings a callback puts in an out-struct are malloc'd and freed by the
 * core with free().
 */
#ifndef SBX_SYS_CONNECTOR_H
#define SBX_SYS_CONNECTOR_H

#include <stddef.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/sandbox.h>
#include <sbx/task.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One running episode (opaque). Valid during the callbacks it is passed to. */
typedef struct sbx_episode sbx_episode;

/** What the agent phase gets from the connector (agent_inputs()). */
typedef struct sbx_agent_inputs {
	char *instruction;      /**< the task's prompt, verbatim */
	char *user;             /**< user of the agent's commands; NULL = the image default */
	double timeout_s;       /**< the agent phase's limit; 0 = none (episode clock only).
	                             sbx_episode_opts.agent_timeout_s overrides it */
	char *logs_dir;         /**< sandbox directory for the agent's logs, or NULL */
	char *solution_dir;     /**< host directory of the reference solution, or NULL */
	char *solution_missing; /**< NULL when the solution can be replayed, else what is
	                             missing ("<dir>/solution/solve.sh is missing") */
	char *solution_dest;    /**< where solution_dir goes in the sandbox */
	char *solution_entry;   /**< the script to run there (made executable); a path that
	                             needs no shell quoting */
	char **solution_env;    /**< "K=V" for the replay only; NULL-terminated, or NULL */
} sbx_agent_inputs;

/** How a verification ended (a verifier that could not even run is a
 *  verify() returning < 0). */
typedef enum sbx_verdict_kind {
	SBX_VERDICT_REWARD = 0,    /**< a reward was read */
	SBX_VERDICT_NO_REWARD = 1, /**< the verifier finished without a usable reward (detail) */
	SBX_VERDICT_TIMEOUT = 2,   /**< the verifier hit its own timeout (detail) */
	SBX_VERDICT_CLOCK = 3,     /**< the episode wall clock cut it (sbx_episode_exec said so) */
} sbx_verdict_kind;

/** What verify() found. The core presets exit_code to -1, the rest to 0. */
typedef struct sbx_verdict {
	sbx_verdict_kind kind;
	int ran;               /**< the verifier was started */
	int exit_code;         /**< its exit status; informational, -1 when not run */
	int timed_out;
	double reward;         /**< REWARD: the main metric */
	char *rewards_json;    /**< REWARD: every metric, a JSON object text */
	char *source;          /**< REWARD: where it came from ("reward.json") */
	char *detail;          /**< NO_REWARD, TIMEOUT: one line on why */
	char *log_path;        /**< sandbox path of the verifier's output (tail kept), or NULL */
} sbx_verdict;

#define SBX_CONNECTOR_OPS_VERSION 1

/** A task format. Adding one: docs/tasks.md ("Adding a connector"). */
typedef struct sbx_connector_ops {
	unsigned version;     /**< SBX_CONNECTOR_OPS_VERSION */
	const char *name;     /**< "harbor"; what --connector takes */
	const char *summary;  /**< one line for help text */

	/** 1 when `dir` is a task of this format (a cheap file test), else 0. */
	int (*probe)(const char *dir);
	/** Fills `t` (zeroed, t->connector set) from `dir`. The public fields of
	 *  sbx_task are malloc'd (sbx_task_free() frees them); name, dir,
	 *  instruction, os ("linux") and network_mode ("public") are required,
	 *  env, verifier_env and solution_env are NULL-terminated vectors (maybe
	 *  empty). connector_data is the connector's own. */
	int (*load)(sbx_task *t, const char *dir, sbx_error **err);
	/** Optional: frees t->connector_data. */
	void (*task_free)(sbx_task *t);
	/** The sandbox the task needs: resources, network, env, workdir, all
	 *  borrowed from `t`. The core sets provider, image, labels and TTL. */
	int (*sandbox_spec)(sbx_sandbox_opts *so, const sbx_task *t, sbx_error **err);
	/** Optional: runs once the sandbox exists, before the agent (log
	 *  directories, files the image lacks). < 0 = EnvironmentError. */
	int (*prepare)(sbx_episode *ep, sbx_error **err);
	/** What the agent phase gets (owned strings, freed by the core). */
	int (*agent_inputs)(sbx_agent_inputs *out, const sbx_task *t, sbx_error **err);
	/** Verifies after the agent phase: puts the tests in, runs them through
	 *  sbx_episode_exec(), reads the reward. < 0 = the verifier could not
	 *  run or its reward could not be read (VerifierError "verify: <msg>");
	 *  out->ran and the exit code count even then. */
	int (*verify)(sbx_episode *ep, sbx_verdict *out, sbx_error **err);
	/** Sandbox directories kept in sbx_episode_opts.logs_dir/<basename>,
	 *  NULL-terminated, or NULL. */
	const char *const *log_dirs;
	/** Optional: extra fields for the result record, a JSON object text
	 *  (malloc'd), or NULL. The core's own fields win over these. */
	char *(*record)(sbx_episode *ep);
} sbx_connector_ops;

/** What an agent's run() reports. The core presets exit_code to -1. */
typedef struct sbx_agent_outcome {
	int exit_code;       /**< its (last) command's exit status; -1 = none */
	int timed_out;       /**< it stopped because its time ran out (steps cut by the
	                          agent or episode limit are noted by the core anyway) */
	char *detail;        /**< one line for the exec stage, or NULL */
	char *log_path;      /**< sandbox path of its log (the record keeps the tail), or NULL */
	char *end_reason;    /**< why it stopped, for the record ("task_complete"), or NULL */
	char *metrics_json;  /**< its metrics, a JSON object text for the record, or NULL */
	char *trajectory_json; /**< its own part of the trajectory (a model agent's
	                            messages), a JSON object text merged with the turns the
	                            core recorded, or NULL */
} sbx_agent_outcome;

#define SBX_AGENT_OPS_VERSION 1

/** An agent: what plays the agent phase. */
typedef struct sbx_agent_ops {
	unsigned version;             /**< SBX_AGENT_OPS_VERSION */
	const char *name;             /**< "oracle"; the result's and the label's name */
	const char *const *aliases;   /**< other accepted names, NULL-terminated, or NULL */
	const char *summary;          /**< one line for help text */
	/** Plays the agent phase of `ep`, its commands through sbx_episode_step().
	 *  0: it ran, whatever it achieved (the verifier decides).
	 *  < 0: it could not run: AgentError "<name>: <msg>", no verification. */
	int (*run)(sbx_episode *ep, sbx_agent_outcome *out, sbx_error **err);
} sbx_agent_ops;

/**
 * Registers an out-of-tree connector or agent (the table must outlive the
 * process).
 * @return 0, -EEXIST (name or alias taken), -EINVAL (version mismatch or a
 *         required op missing), -ENOSPC (table full).
 */
int sbx_connector_register(const sbx_connector_ops *ops, sbx_error **err);
int sbx_agent_register(const sbx_agent_ops *ops, sbx_error **err);

/** Looks up by exact name (agents: or alias); NULL if unknown. Borrowed. */
const sbx_connector_ops *sbx_connector_find(const char *name);
const sbx_agent_ops *sbx_agent_find(const char *name);

/**
 * Like the find functions, with an error for the caller to show.
 * @return 0, -EINVAL ("unknown connector \"x\" (known: harbor)").
 */
int sbx_connector_lookup(const sbx_connector_ops **out, const char *name, sbx_error **err);
int sbx_agent_lookup(const sbx_agent_ops **out, const char *name, sbx_error **err);

/** The first registered connector whose probe() claims `dir`, or NULL. */
const sbx_connector_ops *sbx_connector_detect(const char *dir);

/** Writes the registered names, comma separated ("harbor"; "oracle, nop"), into buf. */
void sbx_connector_names(char *buf, size_t len);
void sbx_agent_names(char *buf, size_t len);

/* ---- what connectors and agents may do with an episode ---- */

const sbx_task *sbx_episode_task(const sbx_episode *ep);
sbx_runtime *sbx_episode_runtime(const sbx_episode *ep);
/** The episode's sandbox; NULL before it is created and after it is destroyed. */
sbx_sandbox *sbx_episode_sandbox(const sbx_episode *ep);
/** The connector's agent inputs; valid from the agent phase on. */
const sbx_agent_inputs *sbx_episode_agent_inputs(const sbx_episode *ep);
/** The episode's agent settings (sbx_episode_opts.agent_args: "key=value",
 *  NULL-terminated), or NULL. Borrowed. */
const char *const *sbx_episode_agent_args(const sbx_episode *ep);
/** Seconds left on the episode wall clock (may be <= 0). */
double sbx_episode_remaining(const sbx_episode *ep);
/** Seconds left for the agent: the agent limit or the episode clock, whichever is
 *  nearer; only the clock outside the agent phase. */
double sbx_episode_agent_remaining(const sbx_episode *ep);

/** Which limit cut a command. */
typedef enum sbx_episode_limit {
	SBX_LIMIT_NONE = 0,     /**< not cut */
	SBX_LIMIT_COMMAND = 1,  /**< its own timeout (exec: the x->timeout_s given) */
	SBX_LIMIT_AGENT = 2,    /**< the agent phase's limit */
	SBX_LIMIT_EPISODE = 3,  /**< the episode wall clock */
} sbx_episode_limit;

/**
 * Runs a command in the episode's sandbox with x->timeout_s (0 = none)
 * bounded by the episode clock.
 * @param out owned; free with sbx_exec_result_free().
 * @param limit_out which limit cut it when out->timed_out, else SBX_LIMIT_NONE.
 * @return 0 (whatever the command did), -EINVAL (no sandbox), or the exec's code.
 */
int sbx_episode_exec(sbx_exec_result *out, sbx_episode_limit *limit_out, sbx_episode *ep,
		     const sbx_exec_opts *x, sbx_error **err);

/** A short setup command as root that must succeed (exit 0 within 120 s):
 *  0, -EIO (it failed: the message has its exit code and stderr), or the exec's code. */
int sbx_episode_root_sh(sbx_episode *ep, const char *cmd, sbx_error **err);

#define SBX_STEP_OPTS_VERSION 1

/** One agent command. */
typedef struct sbx_step_opts {
	unsigned version;          /**< SBX_STEP_OPTS_VERSION */
	const char *command;       /**< for /bin/sh -c */
	const char *const *env;    /**< extra "K=V" for this command, or NULL */
	const char *user;          /**< NULL = the agent user (sbx_agent_inputs.user) */
	double timeout_s;          /**< this command's own limit; 0 = none */
	size_t output_max;         /**< cap per stream kept; 0 = 64 KiB */
} sbx_step_opts;

#define SBX_STEP_OPTS_INIT { .version = SBX_STEP_OPTS_VERSION }

/**
 * Runs one agent command (a turn) during the agent phase, bounded by its own
 * timeout, the agent limit and the episode clock, whichever is nearest. A
 * command cut by the agent limit or the clock marks the agent phase as
 * timed out.
 * @param out owned; free with sbx_exec_result_free().
 * @param limit_out which limit cut it (SBX_LIMIT_NONE when it ended by itself).
 * @return 0 (whatever the command did), -EINVAL (not in the agent phase or bad
 *         opts), or the exec's code.
 */
int sbx_episode_step(sbx_exec_result *out, sbx_episode_limit *limit_out, sbx_episode *ep,
		     const sbx_step_opts *o, sbx_error **err);

#ifdef __cplusplus
}
#endif
#endif
