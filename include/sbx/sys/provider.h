/* SPDX-License-Identifier: MIT */
/**
 * @file sys/provider.h
 * For provider implementors: the versioned ops table and registration.
 * Every callback returns 0 or a negative code and sets *err on failure.
 */
#ifndef SBX_SYS_PROVIDER_H
#define SBX_SYS_PROVIDER_H

#include <stddef.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/sandbox.h>
#include <sbx/spec.h>
#include <sbx/process.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a provider's process_start reports. out_fd, err_fd and status_fd stay owned by the
 *  provider handle (closed by process_free); in_fd passes to the caller, which closes it
 *  (sbx_process_close_stdin(), sbx_process_free()): process_free must not close it again. */
struct sbx_process_fds {
	pid_t pid;
	int out_fd;     /**< stdout read end or -1 */
	int err_fd;     /**< stderr read end or -1 */
	int in_fd;      /**< stdin write end or -1 */
	int status_fd;  /**< readable when the exit status can be collected */
	int tty_fd;     /**< the terminal's master with opts->tty, else -1 */
};

/** sbx_provider_ops.features: the provider runs commands on a terminal (opts->tty). */
#define SBX_PROVIDER_TTY 1u

/* ---- the provider's description ------------------------------------------ */

/** Capability flags: what the core, `sbx doctor` and the connectors may rely on. */
enum {
	SBX_PROVIDER_CAP_TTL_EXTEND = 1u << 0,   /**< set_timeout extends a live sandbox (keepalive) */
	SBX_PROVIDER_CAP_PAUSE = 1u << 1,        /**< pause/resume */
	SBX_PROVIDER_CAP_SNAPSHOT = 1u << 2,     /**< snapshot/fork */
	SBX_PROVIDER_CAP_TEMPLATES = 1u << 3,    /**< builds images from a Dockerfile */
	SBX_PROVIDER_CAP_PORTS = 1u << 4,        /**< routes ports of a sandbox */
	SBX_PROVIDER_CAP_NET_NONE = 1u << 5,     /**< network modes it honours */
	SBX_PROVIDER_CAP_NET_HOST = 1u << 6,
	SBX_PROVIDER_CAP_NET_INTERNET = 1u << 7,
	SBX_PROVIDER_CAP_DEFAULT = 1u << 8,      /**< the backend when none is chosen (one only) */
	SBX_PROVIDER_CAP_HOST = 1u << 9,         /**< runs sandboxes on this machine: what `sbx serve`
						      and template builds use */
	SBX_PROVIDER_CAP_REMOTE = 1u << 10,      /**< a service reached over the network with a credential */
};

/**
 * Where a provider's credential comes from, in one precedence (core/credentials.c):
 * every key variable set (a pair counts only when complete), else the file named by
 * file_var, else $HOME/default_path. A plain key file holds one key on one line; a
 * profile file (profile_keys set) is TOML with one table per profile.
 */
typedef struct sbx_provider_cred {
	const char *key_vars[4];      /**< NULL-terminated; all required (a pair is all-or-nothing) */
	const char *file_var;         /**< e.g. "E2B_API_KEY_FILE" */
	const char *default_path;     /**< below $HOME, e.g. ".config/e2b/api_key" */
	const char *hint;             /**< how to provision the file (one shell line) */
	const char *forward[8];       /**< address variables a launcher forwards by value */
	const char *profile_var;      /**< profile file: variable naming the profile, else the active one */
	const char *profile_keys[4];  /**< profile file: keys in key_vars order; NULL = plain key file */
} sbx_provider_cred;

/** One doctor verdict: check name ("credentials"), ok, message. */
typedef void (*sbx_doctor_emit)(void *payload, int ok, const char *check, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/** What `sbx doctor` knows when it calls a probe. */
typedef struct sbx_doctor_ctx {
	const char *backend;   /**< canonical name */
	const char *image;     /**< --image, or NULL */
	sbx_runtime *(*runtime)(void);  /**< opens a runtime (the CLI's settings); NULL on failure */
	sbx_doctor_emit emit;
	void *payload;
} sbx_doctor_ctx;

/** A task's environment, for task_image (borrowed for the call). */
typedef struct sbx_task_env {
	const char *dir;           /**< the task directory (messages) */
	const char *context_dir;   /**< environment/ with a Dockerfile, or NULL */
	const char *docker_image;  /**< prebuilt image reference, or NULL */
	const char *slug;          /**< name prefix for what is built (the task name) */
	double cpus;
	unsigned memory_mb;
	unsigned storage_mb;
	double timeout_s;          /**< build deadline, 0 = none */
	int force;                 /**< rebuild even if cached */
	sbx_output_fn on_output;   /**< build log */
	void *payload;
} sbx_task_env;

/**
 * How a provider describes itself: the registry, `sbx doctor`, help text, credentials,
 * throttle classification and the task layer read only this. Static; outlives the process.
 */
typedef struct sbx_provider_desc {
	const char *name;                 /**< canonical, lower case; equals ops->name */
	const char *const *aliases;       /**< NULL-terminated accepted spellings, or NULL */
	const char *title;                /**< human name ("E2B") */
	unsigned caps;                    /**< SBX_PROVIDER_CAP_* */
	const sbx_provider_cred *cred;    /**< NULL = needs no credential */
	const char *endpoint_default;     /**< default API address, or NULL */
	const char *endpoint_var;         /**< variable overriding it (or naming the workspace) */
	const char *endpoint_label;       /**< "endpoint", "workspace environment" */
	const char *ttl_vars[3];          /**< sandbox TTL variables, first set wins (doctor) */
	/** Extra substrings (case-insensitive) that mark a create error as a throttle. */
	const char *const *throttle_patterns;
	/** Extra variable with comma-separated patterns, after $SBX_THROTTLE_PATTERNS. */
	const char *throttle_env;
	/** 1 = throttle, 0 = not, -1 = let the core decide (typed codes, common wordings). */
	int (*is_throttle)(const sbx_error *e);
	/** Provider-specific doctor checks, emitted after the core's (credentials, endpoint,
	 *  TTL for remote providers). NULL = none. */
	void (*doctor)(const sbx_doctor_ctx *d);
	/**
	 * Turns a task's environment into what create takes (sbx_sandbox_opts.image).
	 * NULL = the host's image store: prebuilt, else a template build, else a pull.
	 * @param image_out owned; @param how_out owned: "prebuilt", "built", "cached", "pulled".
	 * @return 0 or a negative errno with *err set.
	 */
	int (*task_image)(char **image_out, char **how_out, sbx_runtime *rt, const sbx_task_env *env,
			  sbx_error **err);
} sbx_provider_desc;

/*
 * Version 2 added `desc` after `name`: a version 1 table (compiled against the old
 * layout) is refused by sbx_provider_register with a message that says so.
 * Version 3 appended `stats` and `connect_port`; a version 2 table is still accepted
 * and the core never reads past its end (those ops count as NULL).
 * Version 4 appended `fork`, `snapshot` and `snapshot_remove`; the core reads
 * them only from version 4 tables.
 * Version 5 appended `set_egress`.
 * Version 6 appended `warm`; version 7 `info`.
 */
#define SBX_PROVIDER_OPS_VERSION 7

/*
 * Every op returns 0 or a negative errno and sets *err (a lowercase message naming the
 * sandbox or path) on failure; the codes listed are the ones callers act on. Handles
 * (`sb`, `proc`, `ctx`) are owned by the core once returned and released only through
 * close/process_free/fini. Strings and buffers passed in are borrowed for the call.
 * Optional ops may be NULL: the core answers -ENOSYS "PROVIDER: OP is not supported".
 */
typedef struct sbx_provider_ops {
	unsigned version;  /**< SBX_PROVIDER_OPS_VERSION */
	const char *name;  /**< canonical name, as in desc->name */
	const sbx_provider_desc *desc;  /**< NULL = a bare description (name only) */

	/** Optional. Per-runtime provider context (lazy, once); -EACCES, -ENOKEY, -EPERM. */
	int (*init)(void **ctx_out, sbx_runtime *rt, sbx_error **err);
	void (*fini)(void *ctx);

	/** Required. Makes a sandbox; *sb_out owned by the core (released by close), *id_out
	 *  owned (malloc'd) by the core afterwards.
	 *  `opts` (the core's own copy) is valid only during the call: copy what
	 *  the handle keeps. May run on a worker thread after the caller of
	 *  sbx_sandbox_create_ex() gave up; `ctx` stays valid until it returns.
	 *  -EAGAIN/HTTP 429 (throttled: retried), -ENOENT (image), -EINVAL, -ENOKEY, -EIO. */
	int (*create)(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *opts,
		      sbx_error **err);
	/** Optional. Attaches to an existing sandbox by id; -ENOENT if gone. */
	int (*open)(void **sb_out, void *ctx, const char *id, sbx_error **err);
	/** Required. Runs to completion; out->out/err owned by the caller; a nonzero exit is
	 *  success (out->exit_code). -ETIMEDOUT is not used: out->timed_out says so. -ESRCH, -EIO. */
	int (*exec)(sbx_exec_result *out, void *sb, const sbx_exec_opts *opts, sbx_error **err);
	/** Optional. -ENOENT (parent), -EACCES, -ENOSPC, -EISDIR, -EINVAL (not a regular file). */
	int (*write_file)(void *sb, const char *path, const void *data, size_t len, unsigned mode,
			  sbx_error **err);
	/** Optional. *data_out owned by the caller (malloc'd, NUL-terminated); -ENOENT, -EISDIR,
	 *  -EFBIG (larger than max), -EINVAL (not a regular file: never blocks on a FIFO). */
	int (*read_file)(void **data_out, size_t *len_out, void *sb, const char *path, size_t max,
			 sbx_error **err);
	/** Optional. Host path src -> sandbox path dst (file or tree); -ENOENT (src), -ENOSPC,
	 *  -EINVAL, -ELOOP. */
	int (*upload)(void *sb, const char *src, const char *dst, sbx_error **err);
	/** Optional. Sandbox path src -> host path dst; -ENOENT (src), -EINVAL (not a file or tree). */
	int (*download)(void *sb, const char *src, const char *dst, sbx_error **err);
	/** Optional. Resets the TTL to ttl_s from now; -ESRCH (gone), -EIO. */
	int (*set_timeout)(void *sb, unsigned ttl_s, sbx_error **err);
	/** Required. Destroys what the sandbox holds; idempotent. -EIO. */
	int (*destroy)(void *sb, sbx_error **err);
	/** Optional. Releases the handle only. */
	void (*close)(void *sb);
	/** Optional. Lists this provider's sandboxes (unfiltered); *out owned by the caller
	 *  (sbx_sandbox_info_free). */
	int (*list)(sbx_sandbox_info **out, size_t *n_out, void *ctx, sbx_error **err);
	/** Optional. Destroys a sandbox by id without an open handle (GC); -ENOENT if gone. */
	int (*destroy_id)(void *ctx, const char *id, sbx_error **err);

	/* Optional (NULL = -ENOSYS): streamed processes, file system, pause. A provider with
	 * process_start must have process_poll and process_free (checked at registration). */
	/** Starts a process; fills pid and the fds of sbx_process (see process.h). *proc_out
	 *  owned by the core until process_free. -ENOENT (no such program), -EIO. */
	int (*process_start)(void **proc_out, struct sbx_process_fds *fds, void *sb,
			     const sbx_exec_opts *o, int keep_stdin, sbx_error **err);
	/** 1 when exited (*status a wait status, *timed_out set), 0 while running (block = 0),
	 *  -ESRCH when the sandbox went away. */
	int (*process_poll)(void *proc, int *status, int *timed_out, int block, sbx_error **err);
	/** -ESRCH when it already exited. */
	int (*process_signal)(void *proc, int sig, sbx_error **err);
	/** Frees a process handle; kill = 1 ends the process if it still runs. */
	void (*process_free)(void *proc, int kill);
	/** out's strings owned by the caller (sbx_file_info_clear); -ENOENT. */
	int (*stat)(sbx_file_info *out, void *sb, const char *path, sbx_error **err);
	/** *out owned by the caller (sbx_file_info_free); -ENOENT, -ENOTDIR. */
	int (*list_dir)(sbx_file_info **out, size_t *n_out, void *sb, const char *dir, unsigned depth,
			sbx_error **err);
	/** mkdir -p; -EEXIST (exists, not a directory), -ENOTDIR. */
	int (*mkdir)(void *sb, const char *path, unsigned mode, sbx_error **err);
	/** -ENOENT. */
	int (*rename)(void *sb, const char *from, const char *to, sbx_error **err);
	/** Recursive; force = 1: missing is not an error. -ENOENT. */
	int (*remove)(void *sb, const char *path, int force, sbx_error **err);
	/** -ENOENT (path or user). */
	int (*chown)(void *sb, const char *path, const char *user, sbx_error **err);
	/** An O_PATH fd on the host (local-like providers only); owned by the caller. */
	int (*path_fd)(int *fd_out, void *sb, const char *path, sbx_error **err);
	/** -EALREADY when already in that state. */
	int (*pause)(void *sb, sbx_error **err);
	int (*resume)(void *sb, sbx_error **err);
	/** SBX_PROVIDER_* flags: options the core refuses (-ENOSYS) unless set. */
	unsigned features;
	/** Optional: the limits OPTS gets (see sbx_sandbox_limits()), defaults filled in. */
	int (*limits)(sbx_limits *out, void *ctx, const sbx_sandbox_opts *opts, sbx_error **err);

	/* ---- version 3 ---- */
	/** Optional: resource use now (see sbx_sandbox_stats()); must not block on the sandbox. */
	int (*stats)(sbx_stats *out, void *sb, sbx_error **err);
	/** Optional: a TCP connection to 127.0.0.1:port inside the sandbox's own network
	 *  (never the host's): *fd_out a connected, non-blocking, close-on-exec socket owned
	 *  by the caller. -ECONNREFUSED (nothing listens), -ETIMEDOUT, -ESRCH (gone),
	 *  -EPERM (the sandbox shares the host's network: its ports are the host's). */
	int (*connect_port)(int *fd_out, void *sb, unsigned port, sbx_error **err);

	/* ---- version 4 ---- */
	/** Optional: N new sandboxes whose file systems start as the parent's is now (no
	 *  processes are copied); the parent keeps running. `opts` (the core's copy, valid
	 *  for the call) is the children's spec, or NULL for the parent's own. On success
	 *  children_out[0..n) and ids_out[0..n) are owned by the core (release with close,
	 *  free); on failure none is left behind. -ESRCH (parent gone), -ENOTSUP (the
	 *  parent's writable layer cannot be forked), -ENOSPC, -EIO. */
	int (*fork)(void **children_out, char **ids_out, size_t n, void *parent,
		    const sbx_sandbox_opts *opts, sbx_error **err);
	/** Optional: freezes the sandbox's file system as a named snapshot that later creates
	 *  start from (sbx_sandbox_opts.image "snapshot:NAME"). name NULL = a generated one;
	 *  *name_out owned by the caller. -EEXIST (name taken), -EINVAL (bad name), -ENOTSUP. */
	int (*snapshot)(char **name_out, void *sb, const char *name, sbx_error **err);
	/** Optional: removes a snapshot (sandboxes made from it are not affected); -ENOENT. */
	int (*snapshot_remove)(void *ctx, const char *name, sbx_error **err);

	/* ---- version 5 ---- */
	/** Optional: replaces a running sandbox's egress lists (the semantics of
	 *  sbx_sandbox_opts.allow_out/deny_out; NULL/NULL = no restriction) at once, with no
	 *  moment where neither the old nor the new lists apply. -ENOTSUP (the sandbox has no
	 *  network of its own to filter: none or host), -EINVAL (an entry, named), -ESRCH. */
	int (*set_egress)(void *sb, const char *const *allow_out, const char *const *deny_out, sbx_error **err);

	/* ---- version 6 ---- */
	/** Optional: pays now what the sandbox's first command would pay on its path (local:
	 *  its memory group, made at the first exec so idle sandboxes stay small). Warm pools
	 *  call it on a sandbox they keep ready, off the taker's path; failing is harmless
	 *  (the first command pays as before). -ESRCH. */
	int (*warm)(void *sb, sbx_error **err);

	/* ---- version 7 ---- */
	/** Optional: the `list` row of this one sandbox, without reading the others (a pool
	 *  keeper asks it of every sandbox it makes). Fills *out's fields with owned strings,
	 *  as `list` would (a NULL `provider` becomes the op table's name); without it the
	 *  core lists and picks. -ESRCH. */
	int (*info)(sbx_sandbox_info *out, void *sb, sbx_error **err);
} sbx_provider_ops;


/**
 * Registers an out-of-tree provider (the ops table must outlive the process).
 * @return 0, -EEXIST (name or alias taken), -EINVAL (version 1 table, version unknown,
 *         a required op missing, process_start without process_poll/process_free, or
 *         desc->name different from ops->name).
 */
int sbx_provider_register(const sbx_provider_ops *ops, sbx_error **err);

/** Looks up a runnable provider by name or alias; NULL if unknown. Borrowed. */
const sbx_provider_ops *sbx_provider_find(const char *name);

/** Writes the registered (runnable) provider names, comma separated, into buf. */
void sbx_provider_names(char *buf, size_t len);

/**
 * Looks up a provider's description by name or alias (trimmed, any case), runnable
 * or described only (a provider the registry knows without ops in this build: its
 * credentials and doctor checks work, creating sandboxes does not). NULL if unknown.
 */
const sbx_provider_desc *sbx_provider_describe(const char *name);

/** The i-th description in registry order (built-ins first); NULL past the end. */
const sbx_provider_desc *sbx_provider_desc_at(size_t i);

/** The description flagged SBX_PROVIDER_CAP_DEFAULT (the first one registered). */
const sbx_provider_desc *sbx_provider_default(void);

/** The first provider flagged SBX_PROVIDER_CAP_HOST: sandboxes on this machine. */
const sbx_provider_desc *sbx_provider_host(void);

/** The ops of a description; NULL when it is described only. */
const sbx_provider_ops *sbx_provider_desc_ops(const sbx_provider_desc *d);

/** Logs through the runtime's sink (secrets redacted). */
void sbx_runtime_log(sbx_runtime *rt, sbx_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
