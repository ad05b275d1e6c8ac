/* SPDX-License-Identifier: MIT */
/**
 * @file episode.h
 * Turn-by-turn episodes, for trainers that run their own policy.
 *
 * sbx_episode_run() plays a whole episode with a registered agent. A trainer
 * that generates the commands itself drives the same episode one turn at a
 * time instead: sbx_episode_begin() resolves the task's image, creates its
 * sandbox and opens the agent phase; each sbx_episode_turn() runs one
 * command there and returns the observation a model is fed; and
 * sbx_episode_end() closes the agent phase, runs the task's verifier,
 * destroys the sandbox and returns the record. The `policy` agent plays its
 * turns through exactly these calls, so a record made either way is the same
 * (docs/trajectories.md).
 */
#ifndef SBX_EPISODE_H
#define SBX_EPISODE_H

#include <stddef.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/task.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One running episode (opaque; the same type as in sys/connector.h). */
typedef struct sbx_episode sbx_episode;

/** What one turn's command gave back. Owned fields; free with
 *  sbx_observation_free(). */
typedef struct sbx_observation {
	char *output;      /**< stdout then stderr as a model is fed them, "(no output)"
	                        when both were empty, then the head of it up to the
	                        observation cap: `obs_cap=N` in opts->agent_args, default
	                        4000 characters (UTF-8 code points; no tail is kept, as
	                        in the reference loop). Bytes that are not UTF-8, and
	                        NUL, are U+FFFD: valid UTF-8 without NULs */
	size_t output_len; /**< bytes in output (NUL-terminated as well) */
	int exit_code;     /**< the command's exit status; -1 when it did not finish */
	int timed_out;     /**< a limit cut it (its own, the agent's or the episode's) */
	int truncated;     /**< the output was cut to the cap */
	double seconds;    /**< the command's wall time */
	int done;          /**< the agent phase is over: its limit or the episode clock ran
	                        out; further turns fail with -ETIMEDOUT */
} sbx_observation;

/**
 * Starts an episode of `task` as sbx_episode_run() would (resolve, create,
 * the connector's prepare) and opens its agent phase; opts->agent is
 * ignored (the caller is the agent).
 * `task` and `opts` are borrowed until sbx_episode_end() or
 * sbx_episode_abort().
 * @param out owned; end it with sbx_episode_end() or sbx_episode_abort().
 * The record's agent is "external".
 * @return 0; -EINVAL (bad opts or agent_args); an environment failure (the image could not
 *         be resolved, the sandbox not created) as its code with the
 *         message, and then nothing is left behind.
 */
int sbx_episode_begin(sbx_episode **out, sbx_runtime *rt, const sbx_task *task,
		      const sbx_episode_opts *opts, sbx_error **err);

/**
 * Runs one command (for /bin/sh -c, as the agent user) in the episode's
 * sandbox, bounded by `timeout_s` (0 = none), the agent limit and the
 * episode clock, and records it in the episode's trajectory.
 * @param out owned; free with sbx_observation_free().
 * @return 0 (whatever the command did), -EINVAL (no command, or the episode
 *         is not in its agent phase), -ETIMEDOUT (the agent phase is over),
 *         or the exec's code.
 */
int sbx_episode_turn(sbx_observation *out, sbx_episode *ep, const char *command,
		     double timeout_s, sbx_error **err);

/** Frees what an observation owns; NULL is fine. */
void sbx_observation_free(sbx_observation *o);

/**
 * Closes the agent phase, verifies, destroys the sandbox and frees `ep`.
 * @param out filled (owned fields) whenever 0 is returned, as by
 *        sbx_episode_run() (status, reward, stage timings, trajectory);
 *        free with sbx_episode_result_free().
 * @return 0 (see out->status), -EINVAL (ep or out is NULL: nothing is
 *         done, `ep` stays the caller's).
 */
int sbx_episode_end(sbx_episode_result *out, sbx_episode *ep, sbx_error **err);

/** Destroys the episode's sandbox without verifying and frees `ep` (the
 *  record, if kept in opts->logs_dir, says AgentError "aborted by the
 *  caller"); NULL is fine. One thread at a time per episode, for every call
 *  here. */
void sbx_episode_abort(sbx_episode *ep);

#ifdef __cplusplus
}
#endif
#endif
