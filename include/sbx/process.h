/* SPDX-License-Identifier: MIT */
/**
 * @file process.h
 * Long-running processes with streamed I/O, for servers and agents: start a
 * command, read its stdout/stderr as they come (pollable fds), write stdin,
 * send signals, and collect the exit status without blocking. The blocking
 * sbx_sandbox_exec() is the simple case of this.
 */
#ifndef SBX_PROCESS_H
#define SBX_PROCESS_H

#include <sys/types.h>
#include <sbx/error.h>
#include <sbx/sandbox.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_process sbx_process;

/**
 * Starts a command and returns once it runs (or failed to start).
 * Uses argv/shell/env/cwd/user/timeout_s of `opts`; output capture fields are
 * ignored. stdout and stderr are pipes whose read ends the caller gets from
 * sbx_process_stdout_fd()/stderr_fd() (non-blocking, close-on-exec), unless
 * opts->stdout_fd/stderr_fd name fds to hand over directly. stdin: an open
 * writable fd (sbx_process_stdin_fd()) when opts->stdin_fd == -1 and
 * opts->stdin_data is NULL and `keep_stdin` is set; else as in exec. With
 * opts->tty, none of these: the command's stdio is a terminal inside the
 * sandbox whose master is sbx_process_tty_fd().
 * @param out owned; free with sbx_process_free() (which does not kill).
 * @return 0, -ENOENT (command not found: message names it), -EINVAL, -ESRCH,
 *         -ENOSYS (opts->tty on a provider without terminals).
 */
int sbx_process_start(sbx_process **out, sbx_sandbox *sb, const sbx_exec_opts *opts, int keep_stdin,
		      sbx_error **err);

/** The process id inside the sandbox. */
pid_t sbx_process_pid(const sbx_process *p);
/** Read ends of stdout/stderr (-1 when handed to caller fds or already closed). Borrowed. */
int sbx_process_stdout_fd(const sbx_process *p);
int sbx_process_stderr_fd(const sbx_process *p);
/**
 * The terminal's master when started with opts->tty (else -1): read the
 * command's output from it, write its input (keystrokes) into it, set the
 * window size with ioctl(TIOCSWINSZ). Non-blocking, close-on-exec; reads fail
 * with EIO once no process holds the terminal any more. Borrowed: closed by
 * sbx_process_free(), which hangs the terminal up.
 */
int sbx_process_tty_fd(const sbx_process *p);
/** Write end of stdin, or -1. Borrowed; close it with sbx_process_close_stdin(). */
int sbx_process_stdin_fd(const sbx_process *p);
void sbx_process_close_stdin(sbx_process *p);
/** An fd that becomes readable when the exit status is available. Borrowed. */
int sbx_process_status_fd(const sbx_process *p);

/**
 * Collects the exit status if it is available (call when status_fd polls
 * readable, or with block = 1 to wait).
 * @param status_out wait(2)-style status.
 * @return 1 when exited (status and timed_out set), 0 when still running,
 *         -ESRCH when the sandbox went away.
 */
int sbx_process_poll(sbx_process *p, int *status_out, int *timed_out, int block, sbx_error **err);

/** Sends a signal to the process (SIGKILL also kills its children). */
int sbx_process_signal(sbx_process *p, int sig, sbx_error **err);

/** Frees the handle; a process still running is killed unless detached. */
void sbx_process_free(sbx_process *p);
/** Lets the process outlive its handle (background jobs). */
void sbx_process_detach(sbx_process *p);

/* ---- files beyond whole-file read/write ---------------------------------- */

/** File types, as envd reports them. */
typedef enum sbx_file_type {
	SBX_FILE_OTHER = 0,
	SBX_FILE_REGULAR = 1,
	SBX_FILE_DIR = 2,
	SBX_FILE_SYMLINK = 3,
} sbx_file_type;

/** One directory entry or stat result. */
typedef struct sbx_file_info {
	char *name;            /**< base name */
	char *path;            /**< absolute path in the sandbox */
	sbx_file_type type;
	long long size;
	unsigned mode;         /**< st_mode & 07777 */
	unsigned uid, gid;
	char *owner, *group;   /**< names from the sandbox's /etc files, or the numbers */
	double mtime;          /**< unix seconds */
	char *symlink_target;  /**< NULL unless a symlink */
} sbx_file_info;

/** Stats PATH (symlinks not followed). -ENOENT when missing. */
int sbx_sandbox_stat(sbx_file_info *out, sbx_sandbox *sb, const char *path, sbx_error **err);
/**
 * Lists DIR down to `depth` levels (1 = direct children).
 * @param out owned array; free with sbx_file_info_free().
 * @return 0, -ENOENT, -ENOTDIR.
 */
int sbx_sandbox_list_dir(sbx_file_info **out, size_t *n_out, sbx_sandbox *sb, const char *dir,
			 unsigned depth, sbx_error **err);
/** mkdir -p. @return 0, -EEXIST (already a directory), -ENOTDIR. */
int sbx_sandbox_mkdir(sbx_sandbox *sb, const char *path, unsigned mode, sbx_error **err);
/** rename(2) inside the sandbox. @return 0, -ENOENT. */
int sbx_sandbox_rename(sbx_sandbox *sb, const char *from, const char *to, sbx_error **err);
/** rm -rf (no error if missing when `force`). @return 0, -ENOENT. */
int sbx_sandbox_remove(sbx_sandbox *sb, const char *path, int force, sbx_error **err);
/** chown PATH to USER (name or uid[:gid], resolved in the sandbox). */
int sbx_sandbox_chown(sbx_sandbox *sb, const char *path, const char *user, sbx_error **err);
/**
 * An fd for host-side watching of a sandbox path (inotify works on it through
 * /proc/self/fd/N): O_PATH, confined to the sandbox. -ENOSYS for remote providers.
 */
int sbx_sandbox_path_fd(int *fd_out, sbx_sandbox *sb, const char *path, sbx_error **err);
/**
 * Connects to TCP port PORT (1..65535) on 127.0.0.1 inside the sandbox's own network
 * namespace, whatever its network mode allows from outside (`none` included).
 * @param fd_out a connected, non-blocking, close-on-exec socket; the caller closes it.
 * @return 0, -EINVAL (port), -ECONNREFUSED (nothing listens), -ETIMEDOUT, -ESRCH (the
 *         sandbox is gone), -EPERM (host network: its ports are the host's, refused),
 *         -ENOSYS (the provider cannot).
 */
int sbx_sandbox_connect_port(int *fd_out, sbx_sandbox *sb, unsigned port, sbx_error **err);
/** Frees an array from sbx_sandbox_list_dir() (or one stat result with n = 0... use _clear). */
void sbx_file_info_free(sbx_file_info *v, size_t n);
/** Frees what one sbx_file_info owns. */
void sbx_file_info_clear(sbx_file_info *f);

/* ---- pause ---------------------------------------------------------------- */

/** Freezes every process of the sandbox. @return 0, -EALREADY (already paused). */
int sbx_sandbox_pause(sbx_sandbox *sb, sbx_error **err);
/** Thaws it. @return 0, -EALREADY (not paused). */
int sbx_sandbox_resume(sbx_sandbox *sb, sbx_error **err);

/* ---- resource use ----------------------------------------------------------- */

/** What a sandbox uses now, as its provider measures it (local: its cgroups
 *  and its writable layer). */
typedef struct sbx_stats {
	double cpu_s;                          /**< CPU time used by everything in it, seconds */
	unsigned long long mem_bytes;          /**< memory charged to it, page cache included */
	unsigned long long mem_cache_bytes;    /**< of which page cache */
	unsigned long long disk_bytes;         /**< bytes its writable layer holds */
	unsigned long long disk_total_bytes;   /**< what that layer may grow to; 0 = unknown */
} sbx_stats;

/** Samples a sandbox's resource use (also while paused; never waits on it).
 *  @return 0, -ENOSYS (the provider cannot say). */
int sbx_sandbox_stats(sbx_stats *out, sbx_sandbox *sb, sbx_error **err);

#ifdef __cplusplus
}
#endif
#endif
