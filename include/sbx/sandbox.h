/* SPDX-License-Identifier: MIT */
/**
 * @file sandbox.h
 * Sandbox lifecycle: create, exec, files, timeout, destroy, list.
 * Every call goes through the provider named in the spec.
 */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include <stddef.h>
#include <sys/types.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_sandbox sbx_sandbox;

/**
 * Creates a sandbox.
 * @param out owned; release with sbx_sandbox_free() (after sbx_sandbox_destroy()
 *        unless the sandbox should live on).
 * @param opts borrowed for the call only; what the provider reads is copied
 *        (see sbx_sandbox_opts).
 * @return 0, -EINVAL (bad spec), -ENOENT (unknown image or provider),
 *         -EAGAIN (provider throttled), other negative codes from the provider.
 */
int sbx_sandbox_create(sbx_sandbox **out, sbx_runtime *rt, const sbx_sandbox_opts *opts,
		       sbx_error **err);

/** The limits a sandbox gets, as its provider enforces them; 0 = none. */
typedef struct sbx_limits {
	double cpus;          /**< CPU quota in CPUs */
	unsigned memory_mb;   /**< memory cgroup limit */
	unsigned storage_mb;  /**< writable layer size */
} sbx_limits;

/**
 * The limits a sandbox created from OPTS would get: what OPTS asks for, with
 * the provider's defaults where it asks for none. Creates nothing.
 * @return 0, -ENOENT (unknown provider), -ENOSYS (the provider cannot say).
 */
int sbx_sandbox_limits(sbx_limits *out, sbx_runtime *rt, const sbx_sandbox_opts *opts,
		       sbx_error **err);

/** A cancellation token, fired from any thread. */
typedef struct sbx_cancel sbx_cancel;

/** Makes a token (owned; free with sbx_cancel_free()). Never fails. */
sbx_cancel *sbx_cancel_new(void);
/** Fires the token: operations watching it return -ECANCELED promptly. */
void sbx_cancel_fire(sbx_cancel *c);
/** 1 once fired. */
int sbx_cancel_fired(const sbx_cancel *c);
/** Frees a token no operation is watching any more. NULL is fine. */
void sbx_cancel_free(sbx_cancel *c);

#define SBX_CREATE_CTL_VERSION 1

/**
 * How a create is run. Every create goes through one pipeline: a per-process,
 * per-provider semaphore (SBX_CREATE_CONCURRENCY or OPENENV_<B>_CREATE_CONCURRENCY,
 * default 4) held only during an attempt; throttles (-EAGAIN, HTTP 429, quota
 * and rate-limit messages, SBX_THROTTLE_PATTERNS) retried with jittered
 * exponential backoff (SBX_BACKOFF_BASE_S 2, SBX_BACKOFF_CAP_S 30,
 * SBX_CREATE_MAX_RETRIES 8); any other error fails at once.
 */
typedef struct sbx_create_ctl {
	unsigned version;     /**< SBX_CREATE_CTL_VERSION */
	sbx_cancel *cancel;   /**< firing it makes the create return -ECANCELED at once;
	                           a sandbox the provider still produces is destroyed */
	double timeout_s;     /**< 0 = none; like a cancel at expiry, but -ETIMEDOUT */
	const char *task;     /**< recorded as label sbx.task (copied) */
	int keepalive;        /**< renew the TTL every TTL/6 while the handle lives;
	                           the TTL defaults to SBX_SANDBOX_TTL_S (1800) */
	unsigned attempts;    /**< out: provider create calls made */
} sbx_create_ctl;

#define SBX_CREATE_CTL_INIT { .version = SBX_CREATE_CTL_VERSION }

/**
 * sbx_sandbox_create() with cancellation, a deadline, a task label and
 * keepalive. Every sandbox also gets labels sbx.launcher ($SBX_LAUNCHER or the
 * unix user) and sbx.run_id ($SBX_RUN_ID or $OPENENV_RUN_ID, omitted when unset).
 *
 * Ownership: `opts` and `ctl` (its task and cancel token too) are borrowed
 * for the call only. On -ECANCELED / -ETIMEDOUT the provider call may still
 * be running on a worker thread; that worker reads only its own copy of the
 * spec, destroys whatever the provider produces, and keeps using the runtime
 * (provider context, semaphore, log sink) until it ends: sbx_runtime_free()
 * waits for it.
 * @param opts borrowed for the call only (see sbx_sandbox_opts).
 * @param ctl may be NULL (same as sbx_sandbox_create()); ctl->attempts is written;
 *        borrowed for the call only.
 * @return as sbx_sandbox_create(), plus -ECANCELED and -ETIMEDOUT.
 */
int sbx_sandbox_create_ex(sbx_sandbox **out, sbx_runtime *rt, const sbx_sandbox_opts *opts,
			  sbx_create_ctl *ctl, sbx_error **err);

/**
 * Opens an existing sandbox by id (e.g. one made by `sbx create`).
 * @param provider NULL = the runtime's default.
 * @return 0, -ENOENT (no such sandbox).
 */
int sbx_sandbox_open(sbx_sandbox **out, sbx_runtime *rt, const char *provider, const char *id,
		     sbx_error **err);

/** Borrowed: the sandbox id. */
const char *sbx_sandbox_id(const sbx_sandbox *sb);
/** Borrowed: the provider name. */
const char *sbx_sandbox_provider(const sbx_sandbox *sb);

/**
 * Forks a live sandbox into n new ones whose file systems start as the parent's is
 * now (a file-system fork like E2B's snapshot: processes, open files and memory are
 * not copied; each child boots its own init). The parent is paused for the copy and
 * keeps running. Children are independent of the parent and of each other: writes in
 * one are invisible to the others, and destroying the parent leaves them working.
 * Local provider: the writable layer is frozen once into a read-only layer all
 * children share (a reflink copy, or past 256 files one btrfs snapshot), each child
 * writing to a fresh layer of its own; cost independent of how many bytes the parent
 * wrote; the shared layer goes with the last child.
 * @param children filled with n handles on success, each owned by the caller
 *        (sbx_sandbox_destroy() then sbx_sandbox_free()); untouched on failure, when
 *        no child is left behind.
 * @param overrides the children's spec (limits, env, TTL, labels); its image must be
 *        NULL or the parent's. NULL = the spec the parent was created with.
 * @return 0, -EINVAL (n is 0 or over 1024, another image), -ESRCH (parent gone),
 *         -ENOTSUP (the parent's writable layer is in memory or a host directory),
 *         -ENOSYS (provider without fork), -ENOSPC.
 */
int sbx_sandbox_fork(sbx_sandbox **children, size_t n, sbx_sandbox *parent, const sbx_sandbox_opts *overrides,
		     sbx_error **err);

/**
 * Freezes the sandbox's file system as a named snapshot (the same mechanism as
 * sbx_sandbox_fork(); processes are not kept). A sandbox whose spec's image is
 * "snapshot:NAME" starts from it, with the snapshot's image; the snapshot outlives the
 * sandbox and stays until sbx_snapshot_remove().
 * @param name_out owned (free()); the name given, or a generated "snap-..." one.
 * @param name NULL = generate; else 1..64 of [A-Za-z0-9_.-], not starting with '.'.
 * @return 0, -EEXIST, -EINVAL, -ENOTSUP (layer in memory), -ENOSYS.
 */
int sbx_sandbox_snapshot(char **name_out, sbx_sandbox *sb, const char *name, sbx_error **err);

/** Removes a snapshot; sandboxes made from it keep working. @return 0, -ENOENT. */
int sbx_snapshot_remove(sbx_runtime *rt, const char *provider, const char *name, sbx_error **err);

/**
 * Replaces the egress lists of a running sandbox with network=internet, with the
 * meaning of sbx_sandbox_opts.allow_out / deny_out (CIDRs, addresses, hostnames resolved
 * now; an allow entry wins over a deny entry; allow_out alone = only these). Both NULL
 * lifts every restriction. The switch is atomic: no packet sees neither list.
 * @return 0, -EINVAL (an entry, named in the error), -ENOTSUP (network none or host: the
 *         network mode is fixed at create), -ENOSYS (provider without it), -ESRCH.
 */
int sbx_sandbox_set_egress(sbx_sandbox *sb, const char *const *allow_out, const char *const *deny_out,
			   sbx_error **err);

/**
 * Destroys the sandbox: processes, mounts, cgroups, directories. Idempotent.
 * The handle stays valid until sbx_sandbox_free().
 */
int sbx_sandbox_destroy(sbx_sandbox *sb, sbx_error **err);

/**
 * Destroys a sandbox by id without an open handle, also one whose processes
 * already died (what `sbx rm` and `sbx gc` use).
 * @param provider NULL = the runtime's default.
 * @return 0, -ENOENT (no such sandbox).
 */
int sbx_sandbox_destroy_id(sbx_runtime *rt, const char *provider, const char *id, sbx_error **err);

/** Frees the handle without destroying the sandbox. NULL is fine. */
void sbx_sandbox_free(sbx_sandbox *sb);

/** Streaming output callback: `fd` is 1 (stdout) or 2 (stderr). */
typedef void (*sbx_output_fn)(int fd, const char *data, size_t len, void *payload);

#define SBX_EXEC_OPTS_VERSION 1

/** What to run. Exactly one of argv and shell is set. */
typedef struct sbx_exec_opts {
	unsigned version;          /**< SBX_EXEC_OPTS_VERSION */
	const char *const *argv;   /**< NULL-terminated argv */
	const char *shell;         /**< or: a command for /bin/sh -c */
	const char *const *env;    /**< extra "KEY=VALUE" on top of the sandbox's */
	const char *cwd;           /**< NULL = sandbox workdir */
	const char *user;          /**< NULL = sandbox user */
	const void *stdin_data;    /**< bytes fed to stdin, then EOF; NULL = /dev/null */
	size_t stdin_len;
	double timeout_s;          /**< 0 = none; on expiry the whole tree is killed */
	size_t output_max;         /**< cap per stream kept in the result; 0 = 16 MiB */
	sbx_output_fn on_output;   /**< if set, output is streamed here too */
	void *payload;
	int stdout_fd;             /**< >0: output goes straight to this fd, not captured */
	int stderr_fd;             /**< >0: likewise for stderr */
	int stdin_fd;              /**< >0: stdin comes from this fd (stdin_data ignored) */
	int fds_are_private;       /**< 1: the given stdio fds are pipes made for this exec
	                                alone; the provider may give them to root inside
	                                (so /dev/stdout reopens under a user namespace).
	                                0: they are left as they are */
	int tty;                   /**< 1: run on a terminal made inside the sandbox (its own
	                                devpts): stdin, stdout and stderr are its slave and
	                                its controlling terminal; no stdio fd of the caller
	                                enters. sbx_sandbox_exec() then captures the
	                                terminal's output as stdout (stderr stays empty) and
	                                types stdin_data into it; a process's master is
	                                sbx_process_tty_fd(). The *_fd fields are ignored.
	                                Providers without terminals: -ENOSYS */
	unsigned tty_rows;         /**< window size at start; 0 = 24 rows */
	unsigned tty_cols;         /**< 0 = 80 columns */
} sbx_exec_opts;

#define SBX_EXEC_OPTS_INIT { .version = SBX_EXEC_OPTS_VERSION, .stdout_fd = -1, .stderr_fd = -1, .stdin_fd = -1 }

/** Result of one exec. */
typedef struct sbx_exec_result {
	int exit_code;       /**< exit status, or 128+signal when signalled */
	int signal;          /**< terminating signal, 0 if exited */
	int timed_out;       /**< 1 when killed by timeout_s */
	char *out;           /**< captured stdout (NUL-terminated), may be NULL */
	size_t out_len;
	char *err;           /**< captured stderr (NUL-terminated), may be NULL */
	size_t err_len;
	int out_truncated;   /**< 1 when stdout passed output_max */
	int err_truncated;
	double seconds;      /**< wall time of the command */
} sbx_exec_result;

/**
 * Runs a command and waits for it.
 * @param out owned; free with sbx_exec_result_free(). A command that fails to
 *        start (no such file) yields exit_code 127 and a message on stderr.
 * @return 0 when the command ran (whatever its exit code), -EINVAL (bad opts),
 *         -ESRCH (sandbox gone), -E2BIG (argv/env too large), -ENOSYS (opts->tty
 *         on a provider without terminals).
 */
int sbx_sandbox_exec(sbx_exec_result *out, sbx_sandbox *sb, const sbx_exec_opts *opts,
		     sbx_error **err);

/** Frees what a result owns (not the struct). NULL is fine. */
void sbx_exec_result_free(sbx_exec_result *r);

/**
 * Writes a file (binary safe), creating parent directories. Never blocks on
 * what the sandbox put at `path`: a FIFO or device there is refused.
 * @param mode file mode, e.g. 0644.
 * @return 0, -ENOENT, -EACCES, -ENOSPC, -EISDIR, -EINVAL (not a regular file).
 */
int sbx_sandbox_write_file(sbx_sandbox *sb, const char *path, const void *data, size_t len,
			   unsigned mode, sbx_error **err);

/**
 * Reads a whole file. Never blocks: a FIFO, socket or device (also through a
 * symlink) is refused.
 * @param data_out owned, NUL-terminated; free with free().
 * @param max refuse files larger than this (-EFBIG); 0 = 1 GiB.
 * @return 0, -ENOENT, -EISDIR, -EFBIG, -EINVAL (not a regular file).
 */
int sbx_sandbox_read_file(void **data_out, size_t *len_out, sbx_sandbox *sb, const char *path,
			  size_t max, sbx_error **err);

/**
 * Copies a host file or directory tree into the sandbox at `dst` (tar semantics:
 * modes and symlinks kept; FIFOs, sockets and devices skipped). A FIFO or
 * device where a file would land is refused, a symlink there never followed.
 * @return 0, -ENOENT (src missing), -ENOSPC, -EINVAL, -ELOOP.
 */
int sbx_sandbox_upload(sbx_sandbox *sb, const char *src, const char *dst, sbx_error **err);

/**
 * Copies a file or directory tree out of the sandbox to host path `dst`, made
 * safe for the host: owned by the caller, permission bits only (no set-id or
 * sticky bits, no xattrs), no symlink leading out of the copied tree, no
 * FIFO, socket or device (skipped inside a tree, logged as warnings). A
 * symlink `src` is followed inside the sandbox.
 * @return 0, -ENOENT (src missing in the sandbox), -EINVAL (src is a FIFO,
 * socket or device), -ELOOP (a symlink where the copy lands).
 */
int sbx_sandbox_download(sbx_sandbox *sb, const char *src, const char *dst, sbx_error **err);

/**
 * Sets the time to live from now; 0 = never expire.
 * @return 0, -ESRCH.
 */
int sbx_sandbox_set_timeout(sbx_sandbox *sb, unsigned ttl_s, sbx_error **err);

/** One row of sbx_sandbox_list(). */
typedef struct sbx_sandbox_info {
	char *id;
	char *provider;
	char *image;
	char *state;        /**< "running", "dead", "creating" */
	char **labels;      /**< NULL-terminated "k=v" */
	double created_at;  /**< unix seconds */
	double expires_at;  /**< unix seconds, 0 = never */
	int leaked;         /**< 1: its owner process is gone (or it is dead) */
	pid_t pid;          /**< local: init pid on the host */
} sbx_sandbox_info;

/**
 * Lists sandboxes whose labels include every "k=v" in `filter` (NULL = all).
 * @param out owned array; free with sbx_sandbox_info_free().
 */
int sbx_sandbox_list(sbx_sandbox_info **out, size_t *n_out, sbx_runtime *rt,
		     const char *provider, const char *const *filter, sbx_error **err);

/**
 * The sbx_sandbox_list() row of one open sandbox, without listing the others.
 * @param out owned array of one; free with sbx_sandbox_info_free(*out, 1).
 * @return 0, -ESRCH (gone), -ENOSYS (the provider cannot list).
 */
int sbx_sandbox_info_get(sbx_sandbox_info **out, sbx_sandbox *sb, sbx_error **err);

/** Frees a list from sbx_sandbox_list() or sbx_sandbox_info_get(). */
void sbx_sandbox_info_free(sbx_sandbox_info *v, size_t n);

#ifdef __cplusplus
}
#endif
#endif
