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

#define SBX_PROVIDER_OPS_VERSION 1

typedef struct sbx_provider_ops {
	unsigned version;  /**< SBX_PROVIDER_OPS_VERSION */
	const char *name;  /**< "local", "e2b", ... */

	/** Per-runtime provider context (lazy, once). */
	int (*init)(void **ctx_out, sbx_runtime *rt, sbx_error **err);
	void (*fini)(void *ctx);

	/** Makes a sandbox; *id_out owned (malloc'd) by the core afterwards.
	 *  `opts` (the core's own copy) is valid only during the call: copy what
	 *  the handle keeps. May run on a worker thread after the caller of
	 *  sbx_sandbox_create_ex() gave up; `ctx` stays valid until it returns. */
	int (*create)(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *opts,
		      sbx_error **err);
	/** Attaches to an existing sandbox by id. */
	int (*open)(void **sb_out, void *ctx, const char *id, sbx_error **err);
	int (*exec)(sbx_exec_result *out, void *sb, const sbx_exec_opts *opts, sbx_error **err);
	int (*write_file)(void *sb, const char *path, const void *data, size_t len, unsigned mode,
			  sbx_error **err);
	int (*read_file)(void **data_out, size_t *len_out, void *sb, const char *path, size_t max,
			 sbx_error **err);
	int (*upload)(void *sb, const char *src, const char *dst, sbx_error **err);
	int (*download)(void *sb, const char *src, const char *dst, sbx_error **err);
	int (*set_timeout)(void *sb, unsigned ttl_s, sbx_error **err);
	/** Destroys what the sandbox holds; idempotent. */
	int (*destroy)(void *sb, sbx_error **err);
	/** Releases the handle only. */
	void (*close)(void *sb);
	/** Lists this provider's sandboxes (unfiltered). */
	int (*list)(sbx_sandbox_info **out, size_t *n_out, void *ctx, sbx_error **err);
	/** Destroys a sandbox by id without an open handle (GC); -ENOENT if gone. */
	int (*destroy_id)(void *ctx, const char *id, sbx_error **err);

	/* Optional (NULL = -ENOSYS): streamed processes, file system, pause. */
	/** Starts a process; fills pid and the fds of sbx_process (see process.h). */
	int (*process_start)(void **proc_out, struct sbx_process_fds *fds, void *sb,
			     const sbx_exec_opts *o, int keep_stdin, sbx_error **err);
	int (*process_poll)(void *proc, int *status, int *timed_out, int block, sbx_error **err);
	int (*process_signal)(void *proc, int sig, sbx_error **err);
	/** Frees a process handle; kill = 1 ends the process if it still runs. */
	void (*process_free)(void *proc, int kill);
	int (*stat)(sbx_file_info *out, void *sb, const char *path, sbx_error **err);
	int (*list_dir)(sbx_file_info **out, size_t *n_out, void *sb, const char *dir, unsigned depth,
			sbx_error **err);
	int (*mkdir)(void *sb, const char *path, unsigned mode, sbx_error **err);
	int (*rename)(void *sb, const char *from, const char *to, sbx_error **err);
	int (*remove)(void *sb, const char *path, int force, sbx_error **err);
	int (*chown)(void *sb, const char *path, const char *user, sbx_error **err);
	int (*path_fd)(int *fd_out, void *sb, const char *path, sbx_error **err);
	int (*pause)(void *sb, sbx_error **err);
	int (*resume)(void *sb, sbx_error **err);
	/** SBX_PROVIDER_* flags: options the core refuses (-ENOSYS) unless set. */
	unsigned features;
} sbx_provider_ops;


/**
 * Registers an out-of-tree provider (the ops table must outlive the process).
 * @return 0, -EEXIST (name taken), -EINVAL (version mismatch or missing ops).
 */
int sbx_provider_register(const sbx_provider_ops *ops, sbx_error **err);

/** Looks up a provider by name; NULL if unknown. Borrowed. */
const sbx_provider_ops *sbx_provider_find(const char *name);

/** Writes the registered provider names, comma separated, into buf. */
void sbx_provider_names(char *buf, size_t len);

/** Logs through the runtime's sink (secrets redacted). */
void sbx_runtime_log(sbx_runtime *rt, sbx_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
