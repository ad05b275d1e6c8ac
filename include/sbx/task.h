/* SPDX-License-Identifier: MIT */
/**
 * @file task.h
 * Task directories and episodes.
 *
 * A task directory is read by a connector (include/sbx/sys/connector.h); the
 * built-in one is Harbor's: `instruction.md`, `task.toml` (legacy
 * `version = "1.0"` or `schema_version` 1.x), `environment/` (a Dockerfile, or
 * `[environment].docker_image`), `tests/test.sh` and optionally
 * `solution/solve.sh`. An episode creates a sandbox from the task's image, runs
 * an agent (the oracle replays the solution), then lets the connector verify
 * (Harbor: upload `tests/`, read the reward the verifier wrote). Rules and
 * defaults: docs/tasks.md.
 */
#ifndef SBX_TASK_H
#define SBX_TASK_H

#include <stddef.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/sandbox.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sbx_connector_ops;

/** A loaded task. Every field is owned by the task; read it, never free it.
 *  The fields are Harbor's vocabulary, which every connector fills as far as
 *  its format has them; toml_path, schema_version, legacy and registry_name
 *  are Harbor's own (NULL or 0 for other formats). */
typedef struct sbx_task {
	char *name;                  /**< directory basename ("fix-git") */
	char *dir;                   /**< absolute task directory */
	char *toml_path;             /**< "<dir>/task.toml" */
	char *schema_version;        /**< "1.0" (legacy `version`), "1.3", ... */
	int legacy;                  /**< 1: the file used `version = ...` */
	char *registry_name;         /**< `[task].name` ("org/name") or NULL */
	char *instruction;           /**< instruction.md, verbatim */
	char *docker_image;          /**< `[environment].docker_image` or NULL */
	int has_dockerfile;          /**< environment/Dockerfile exists */
	int has_solution;            /**< solution/solve.sh exists */
	char *os;                    /**< "linux" or "windows" */
	double cpus;                 /**< 0 = provider default */
	unsigned memory_mb;          /**< 0 = provider default */
	unsigned storage_mb;         /**< 0 = provider default */
	unsigned gpus;               /**< 0 = none */
	double build_timeout_sec;    /**< default 600 */
	double agent_timeout_sec;    /**< 0 = no limit (the default) */
	double verifier_timeout_sec; /**< default 600 */
	char **env;                  /**< `[environment].env`, "K=V", expanded, NULL-terminated */
	char **verifier_env;         /**< `[verifier].env`, expanded */
	char **solution_env;         /**< `[solution].env`, expanded */
	char *workdir;               /**< `[environment].workdir`, NULL = image WORKDIR */
	char *network_mode;          /**< "public", "no-network" or "allowlist" */
	char **allowed_hosts;        /**< NULL-terminated, or NULL */
	char *agent_user;            /**< NULL = image default user */
	char *verifier_user;         /**< NULL = root */
	char **warnings;             /**< non-fatal findings (unknown keys, ...), NULL-terminated */
	const struct sbx_connector_ops *connector; /**< the format it was read as */
	void *connector_data;        /**< the connector's own, or NULL */
} sbx_task;

/**
 * Loads and validates a task directory with the connector that claims it
 * (the first registered, Harbor, when none does: its errors name what is
 * missing). Harbor: `${VAR}` and `${VAR:-default}` in the env tables are
 * expanded from this process's environment.
 * @param out owned; free with sbx_task_free().
 * @return 0; -ENOENT (a required file is missing: the message names it);
 *         -EINVAL (bad TOML or a bad value: "<dir>/task.toml:LINE:COL: ..." for
 *         syntax, "<dir>/task.toml: [section].field: ..." for values).
 */
int sbx_task_load(sbx_task **out, const char *dir, sbx_error **err);

/**
 * sbx_task_load() with a named connector ("harbor"); NULL = sbx_task_load().
 * @return as sbx_task_load(), or -EINVAL (unknown connector: the message
 *         lists the registered ones).
 */
int sbx_task_load_as(sbx_task **out, const char *connector, const char *dir, sbx_error **err);

/** Frees a task; NULL is fine. */
void sbx_task_free(sbx_task *task);

/**
 * Lists the task directories (subdirectories a connector claims; Harbor's
 * hold task.toml) of a tasks directory, sorted by name.
 * @param names_out owned NULL-terminated vector of basenames; free each string
 *        and the vector with free(), or with sbx_task_names_free().
 * @return 0, -ENOENT (no such directory), -ENOTDIR.
 */
int sbx_task_list(char ***names_out, size_t *n_out, const char *tasks_dir, sbx_error **err);

/** Frees a vector from sbx_task_list(); NULL is fine. */
void sbx_task_names_free(char **names);

/** How an image for a task was obtained. */
typedef struct sbx_task_image {
	char *image;    /**< store image name the sandbox is created from */
	char *how;      /**< "prebuilt" (docker_image present), "pulled", "built", "cached" */
	double seconds;
} sbx_task_image;

/**
 * Resolves the image a task runs in: `[environment].docker_image` when it is in
 * the store (unless `force_build`), else a template build of environment/
 * (sbx_template_build, slug = task name, timeout = build_timeout_sec), else a
 * registry pull of docker_image.
 * @param out owned fields; free with sbx_task_image_free().
 * @param on_output build log sink, or NULL.
 * @return 0, -ENOENT, -EINVAL, -ETIMEDOUT, -EIO (from the build or pull),
 *         -ENOSYS (template builds unavailable).
 */
int sbx_task_resolve_image(sbx_task_image *out, sbx_runtime *rt, const sbx_task *task,
			   int force_build, sbx_output_fn on_output, void *payload,
			   sbx_error **err);

/** Frees what an sbx_task_image owns; NULL is fine. */
void sbx_task_image_free(sbx_task_image *img);

/** Final status of an episode (Harbor's vocabulary). */
typedef enum sbx_episode_status {
	SBX_EPISODE_SUBMITTED = 0,     /**< the verifier wrote a reward */
	SBX_EPISODE_TIME_LIMIT = 1,    /**< agent timeout, or the episode wall clock */
	SBX_EPISODE_AGENT_ERROR = 2,   /**< the agent could not be started */
	SBX_EPISODE_VERIFIER_ERROR = 3, /**< verifier timeout; reward missing, empty or unparsable */
	SBX_EPISODE_ENV_ERROR = 4,     /**< image resolve/build or sandbox create failed */
} sbx_episode_status;

/** Static name: "Submitted", "TimeLimitExceeded", "AgentError", "VerifierError",
 *  "EnvironmentError". */
const char *sbx_episode_status_name(sbx_episode_status s);

/** Episode stages, in order. */
typedef enum sbx_episode_stage {
	SBX_STAGE_RESOLVE = 0, /**< image resolve or template build */
	SBX_STAGE_CREATE = 1,  /**< sandbox create + /logs dirs */
	SBX_STAGE_AGENT = 2,   /**< agent phase ("exec") */
	SBX_STAGE_VERIFY = 3,  /**< upload tests/, run test.sh, read the reward */
	SBX_STAGE_DESTROY = 4, /**< logs download + destroy */
} sbx_episode_stage;
#define SBX_EPISODE_STAGES 5

/** Static name: "resolve", "create", "exec", "verify", "destroy". */
const char *sbx_episode_stage_name(sbx_episode_stage s);

/**
 * Stage callback. Called with done = 0 when a stage starts and done = 1 when
 * it ends (ok = 1 or 0, seconds, a one-line detail or NULL). Skipped stages are
 * not reported. Runs on the episode's thread.
 */
typedef void (*sbx_episode_stage_fn)(const char *task, sbx_episode_stage stage, int done, int ok,
				     double seconds, const char *detail, void *payload);

/* Version 2 appended agent_args and pool; a version 1 struct (which ends at
 * force_build) is still accepted by the calls that take a pointer to one. */
#define SBX_EPISODE_OPTS_VERSION 2

typedef struct sbx_episode_opts {
	unsigned version;           /**< SBX_EPISODE_OPTS_VERSION */
	const char *provider;       /**< NULL = the runtime's default */
	const char *agent;          /**< a registered agent (sys/connector.h): "oracle"
	                                 (NULL, replays the solution) or "nop" (does nothing) */
	double max_episode_s;       /**< whole-episode wall clock; 0 = $SBX_MAX_EPISODE_S,
	                                 else $OPENENV_MAX_ROLLOUT_TIME_SECONDS, else 3600 */
	double agent_timeout_s;     /**< > 0 overrides `[agent].timeout_sec` */
	const char *logs_dir;       /**< keep /logs/{agent,verifier,artifacts} and
	                                 result.json here; NULL = keep nothing */
	const char *const *labels;  /**< extra "k=v" sandbox labels */
	sbx_episode_stage_fn on_stage;
	void *payload;
	int force_build;            /**< build environment/ even if docker_image is present */
	const char *const *agent_args; /**< "key=value" settings for the agent (the policy
	                                 agent's model, api_base, ...), NULL-terminated, or NULL */
	unsigned pool;              /**< > 0: keep this many sandboxes of each task's spec
	                                 warm (sbx_pool_add, registered at the task's first
	                                 create), so its later episodes (eval --samples) start
	                                 from the pool; the idle ones last until the runtime
	                                 is freed */
} sbx_episode_opts;

#define SBX_EPISODE_OPTS_INIT { .version = SBX_EPISODE_OPTS_VERSION }

/** The outcome of one episode. Owned strings; free with sbx_episode_result_free(). */
typedef struct sbx_episode_result {
	char *task;                 /**< task name */
	char *agent;                /**< the agent's registered name ("oracle", "nop") */
	sbx_episode_status status;
	int has_reward;             /**< 1 when `reward` is meaningful */
	double reward;              /**< "reward" metric (see docs/tasks.md) */
	char *rewards_json;         /**< all metrics as a JSON object text, or NULL */
	char *reward_source;        /**< "reward.json", "reward.txt" or NULL */
	char *detail;               /**< one line on why the status, or NULL */
	char *image;                /**< image used, or NULL */
	char *image_how;            /**< as sbx_task_image.how, or NULL */
	char *sandbox_id;           /**< or NULL when never created */
	int agent_exit_code;        /**< -1 when the agent did not run */
	int agent_timed_out;
	int verifier_ran;           /**< test.sh was started */
	int verifier_exit_code;     /**< -1 when not run; informational only */
	int verifier_timed_out;
	double stage_seconds[SBX_EPISODE_STAGES]; /**< 0 for skipped stages */
	double total_seconds;
	char *logs_dir;             /**< where the logs were kept, or NULL */
	char *agent_log_tail;       /**< last few KiB of the agent's log (oracle: oracle.txt), or NULL */
	char *verifier_log_tail;    /**< last few KiB of the verifier's output, or NULL */
	char *end_reason;           /**< why the agent stopped, when it says (NULL: oracle, nop) */
	char *agent_metrics_json;   /**< the agent's metrics (JSON object text), or NULL */
	char *extra_json;           /**< the connector's extra record fields (JSON object), or NULL */
	char *trajectory_json;      /**< the turns played (and an agent's messages), a JSON
	                                 object text (docs/trajectories.md), or NULL */
} sbx_episode_result;

/**
 * Runs one episode: resolve → create → agent → verify → destroy, the task's
 * connector giving the sandbox spec, the agent's inputs and the verifier, the
 * agent (opts->agent) playing the agent phase. Failures of
 * the episode itself are reported in `out->status`, not as a return code.
 * `task` and `opts` are borrowed for the call only: a create cut by the
 * episode clock goes on in the background on its own copy of the spec and
 * destroys what it makes (sbx_runtime_free() waits for it).
 * @param out filled (owned fields) whenever 0 is returned; free with
 *        sbx_episode_result_free().
 * @return 0 (see out->status), -EINVAL (bad opts: unknown agent).
 */
int sbx_episode_run(sbx_episode_result *out, sbx_runtime *rt, const sbx_task *task,
		    const sbx_episode_opts *opts, sbx_error **err);

/** Frees what a result owns (not the struct itself); NULL is fine. */
void sbx_episode_result_free(sbx_episode_result *r);

/**
 * The result record as one line of compact JSON (schema in docs/tasks.md).
 * @return owned NUL-terminated string (free with free()).
 */
char *sbx_episode_result_to_json(const sbx_episode_result *r);

/** Called as each episode of a batch finishes (serialised: one call at a time). */
typedef void (*sbx_episode_done_fn)(size_t index, const sbx_episode_result *r, void *payload);

/* Version 2: its episode opts grew (version 2), which moved the fields after it. */
#define SBX_BATCH_OPTS_VERSION 2

typedef struct sbx_batch_opts {
	unsigned version;            /**< SBX_BATCH_OPTS_VERSION */
	sbx_episode_opts episode;    /**< per-episode options (logs_dir is ignored) */
	unsigned concurrency;        /**< worker threads; 0 = 4 */
	const char *logs_root;       /**< keep logs in <logs_root>/<task>; NULL = none */
	sbx_episode_done_fn on_done;
	void *payload;
} sbx_batch_opts;

#define SBX_BATCH_OPTS_INIT { .version = SBX_BATCH_OPTS_VERSION, \
	.episode = SBX_EPISODE_OPTS_INIT }

/**
 * Runs one episode per task, `concurrency` at a time.
 * @param results caller-owned array of n results, all filled on return 0; free
 *        each with sbx_episode_result_free().
 * @return 0, -EINVAL (bad opts), -EAGAIN (no thread could be started).
 */
int sbx_episode_run_batch(sbx_episode_result *results, sbx_runtime *rt,
			  sbx_task *const *tasks, size_t n, const sbx_batch_opts *opts,
			  sbx_error **err);

/** One row of sbx_task_bake_batch(). */
typedef struct sbx_bake_result {
	int rc;               /**< 0 or the negative code of the failure */
	char *error;          /**< message when rc < 0, else NULL */
	sbx_task_image image; /**< filled when rc == 0 */
} sbx_bake_result;

/** Called as each task of a bake finishes (serialised). */
typedef void (*sbx_bake_done_fn)(size_t index, const sbx_task *task, const sbx_bake_result *r,
				 void *payload);

/**
 * Resolves (builds or finds) the image of every task, `jobs` at a time.
 * @param results caller-owned array of n; free each with sbx_bake_result_free().
 * @return 0 (per-task failures are in results), -EINVAL, -EAGAIN.
 */
int sbx_task_bake_batch(sbx_bake_result *results, sbx_runtime *rt, sbx_task *const *tasks,
			size_t n, unsigned jobs, int force, sbx_bake_done_fn on_done,
			void *payload, sbx_error **err);

/** Frees what a bake result owns; NULL is fine. */
void sbx_bake_result_free(sbx_bake_result *r);

#ifdef __cplusplus
}
#endif
#endif
