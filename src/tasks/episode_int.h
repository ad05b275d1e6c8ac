/* SPDX-License-Identifier: MIT */
/*
 * The episode driver's state, shared by the driver (episode.c: the stages,
 * the statuses, the record) and what connectors and agents call
 * (episode_ops.c: accessors, bounded execs, steps).
 *
 * The driver runs in three calls, so that a turn-by-turn API is a thin
 * wrapper: sbx__episode_start (resolve, create, prepare, and the agent phase
 * begins), any number of sbx_episode_step, then sbx__episode_finish (the
 * agent phase ends, verify, destroy, the record). sbx_episode_run is start,
 * the agent's run(), finish.
 */
#ifndef SBX_TASKS_EPISODE_INT_H
#define SBX_TASKS_EPISODE_INT_H

#include "tasks/task_int.h"

/* Where an episode is. */
enum sbx__episode_phase {
	SBX__PHASE_SETUP = 0, /* resolve/create running, or they failed */
	SBX__PHASE_AGENT,     /* the agent phase: steps run */
	SBX__PHASE_AGENT_END, /* the agent phase is over; verify next if allowed */
	SBX__PHASE_DONE,      /* finished: the result was handed out */
};

struct sbx_episode {
	sbx_runtime *rt;
	const sbx_task *t;            /* borrowed until finish */
	const sbx_connector_ops *conn;
	const sbx_agent_ops *agent;
	sbx_episode_opts o;           /* a copy; its strings borrowed until finish */
	sbx_episode_result res;       /* built up, handed out by finish */
	sbx_agent_inputs in;
	sbx_sandbox *sb;
	sbx_task_image img;
	enum sbx__episode_phase phase;
	double t0, deadline, stage_t0;
	double agent_timeout_s;       /* the agent phase's limit; 0 = none */
	double agent_deadline;        /* monotonic; 0 = none */
	sbx_episode_limit agent_cut;  /* the widest limit that cut a step */
	unsigned steps;
	int last_exit_code;           /* of the last step, -1 before one ran */
	int status_set;               /* res.status is final */
	int clock_expired;            /* the episode wall clock cut a phase */
	int agent_timed_out;          /* the agent's own limit cut it: the verifier still runs */
	sbx_verdict verdict;
	int verdict_read;             /* verdict.kind is REWARD or NO_REWARD */
	char *agent_log;              /* sandbox path of the agent's log, or NULL */
	int setup_rc;                 /* the code of a failed resolve/create/inputs, else 0 */
	size_t obs_cap;               /* observation cap in characters (agent arg obs_cap) */
	struct json_t *turns;         /* the turns played (turns.c), an array, or NULL */
	char *agent_traj;             /* the agent's own trajectory part (JSON object), or NULL */
	int turns_done;               /* a limit cut a turn: further turns are -ETIMEDOUT */
};

/* *o = in (NULL: the defaults), read as far as in->version says: a version 1
 * struct ends at force_build. 0 or -EINVAL (unknown version). */
int sbx__episode_opts_copy(sbx_episode_opts *o, const sbx_episode_opts *in, sbx_error **err);

/*
 * Starts an episode: checks opts (unknown agent: -EINVAL, nothing made),
 * then resolve, create and the connector's prepare; on success the agent
 * phase begins. A failed stage is recorded in the episode, not returned:
 * *out is set whenever 0 is returned, and steps then fail with -EINVAL.
 * `task` and `opts` (and the strings it points to) are borrowed until
 * sbx__episode_finish().
 */
int sbx__episode_start(sbx_episode **out, sbx_runtime *rt, const sbx_task *task,
		       const sbx_episode_opts *opts, sbx_error **err);

/* sbx__episode_start with the agent given (the turn API's caller-as-agent)
 * instead of looked up from opts->agent. */
int sbx__episode_start_as(sbx_episode **out, sbx_runtime *rt, const sbx_task *task,
			  const sbx_episode_opts *opts, const sbx_agent_ops *agent,
			  sbx_error **err);

/* turns.c: the trajectory of the turns played merged with the agent's part,
 * a JSON object text (owned), or NULL when there is neither. */
char *sbx__episode_trajectory(const sbx_episode *e);

/* turns.c: adds the driver's reset_time and eval_time to the metrics of an
 * agent that counts turns (the policy agent), as the reference reports them. */
void sbx__episode_metrics_finish(sbx_episode *e);

/* turns.c: s[0..n) as valid UTF-8 (bad bytes and NUL become U+FFFD), at most
 * cap characters; *truncated says whether characters were left out. Owned. */
char *sbx__episode_text(const char *s, size_t n, size_t cap, int *truncated);

/* Ends the agent phase with what the agent reported: rc < 0 is an
 * AgentError ("<agent>: <err msg>"). `oc` (may be NULL) is emptied: its
 * strings move into the episode. Does nothing outside the agent phase. */
void sbx__episode_end_agent(sbx_episode *e, sbx_agent_outcome *oc, int rc, const sbx_error *err);

/* Ends the agent phase (if still on), verifies when allowed, destroys the
 * sandbox, decides status and reward, writes result.json; hands the result
 * to *out (free with sbx_episode_result_free()). Then free the episode. */
void sbx__episode_finish(sbx_episode *e, sbx_episode_result *out);

/* Frees an episode (a started one that was never finished is finished and
 * its result dropped, so its sandbox never leaks). NULL is fine. */
void sbx__episode_free(sbx_episode *e);

/* Frees what the out-structs of the ops own. */
void sbx__agent_inputs_free(sbx_agent_inputs *in);
void sbx__agent_outcome_free(sbx_agent_outcome *oc);
void sbx__verdict_free(sbx_verdict *v);

#endif
