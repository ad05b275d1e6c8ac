/* SPDX-License-Identifier: MIT */
/* Streamed processes and file-system calls: argument checks and dispatch to
 * the provider's optional ops. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/process.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/str.h"
#include "runtime_int.h"

struct sbx_process {
	const sbx_provider_ops *ops;
	void *impl;
	struct sbx_process_fds fds;
	int exited;
	int detached;
};

static int unsupported(const sbx_sandbox *sb, const char *op, sbx_error **err)
{
	return sbx__unsupported(sbx__sandbox_ops(sb), op, err);
}

static int check_path(const char *path, const char *what, sbx_error **err)
{
	if (!path || path[0] != '/')
		return sbx_error_set(err, -EINVAL, "%s: sandbox path '%s' must be absolute", what,
				     path ? path : "(null)");
	return 0;
}

int sbx__exec_check_tty(const sbx_provider_ops *ops, const sbx_exec_opts *o, sbx_error **err)
{
	if (!o->tty)
		return 0;
	if (!(ops->features & SBX_PROVIDER_TTY))
		return sbx_error_set(err, -ENOSYS, "%s: exec option tty (a terminal) is not supported",
				     ops->name);
	if (o->tty_rows > 65535 || o->tty_cols > 65535)
		return sbx_error_set(err, -EINVAL, "exec: terminal size %ux%u is too large", o->tty_rows,
				     o->tty_cols);
	return 0;
}

int sbx_process_start(sbx_process **out, sbx_sandbox *sb, const sbx_exec_opts *opts, int keep_stdin,
		      sbx_error **err)
{
	const sbx_provider_ops *ops = sbx__sandbox_ops(sb);
	if (!ops->process_start)
		return unsupported(sb, "process_start", err);
	if (!opts || opts->version != SBX_EXEC_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "process opts: missing or version unsupported");
	if (!!(opts->argv && opts->argv[0]) == !!opts->shell)
		return sbx_error_set(err, -EINVAL, "process: give exactly one of argv and shell");
	if (opts->cwd && opts->cwd[0] != '/')
		return sbx_error_set(err, -EINVAL, "process: cwd '%s' must be absolute", opts->cwd);
	int r = sbx__exec_check_tty(ops, opts, err);
	if (r < 0)
		return r;
	sbx_process *p = xcalloc(1, sizeof(*p));
	p->ops = ops;
	p->fds = (struct sbx_process_fds){ .out_fd = -1, .err_fd = -1, .in_fd = -1, .status_fd = -1,
					   .tty_fd = -1 };
	r = ops->process_start(&p->impl, &p->fds, sbx__sandbox_impl(sb), opts, keep_stdin, err);
	if (r < 0) {
		free(p);
		return r;
	}
	/* A provider that fills the struct whole without knowing the field. */
	if (!opts->tty)
		p->fds.tty_fd = -1;
	*out = p;
	return 0;
}

pid_t sbx_process_pid(const sbx_process *p)
{
	return p->fds.pid;
}

int sbx_process_stdout_fd(const sbx_process *p)
{
	return p->fds.out_fd;
}

int sbx_process_stderr_fd(const sbx_process *p)
{
	return p->fds.err_fd;
}

int sbx_process_tty_fd(const sbx_process *p)
{
	return p->fds.tty_fd;
}

int sbx_process_stdin_fd(const sbx_process *p)
{
	return p->fds.in_fd;
}

int sbx_process_status_fd(const sbx_process *p)
{
	return p->fds.status_fd;
}

void sbx_process_close_stdin(sbx_process *p)
{
	if (p->fds.in_fd >= 0) {
		close(p->fds.in_fd);
		p->fds.in_fd = -1;
	}
}

int sbx_process_poll(sbx_process *p, int *status_out, int *timed_out, int block, sbx_error **err)
{
	int st = 0, to = 0;
	/* process_poll and process_free come with process_start (registry.c). */
	int r = p->ops->process_poll(p->impl, &st, &to, block, err);
	if (r == 1) {
		p->exited = 1;
		if (status_out)
			*status_out = st;
		if (timed_out)
			*timed_out = to;
	}
	return r;
}

int sbx_process_signal(sbx_process *p, int sig, sbx_error **err)
{
	if (p->exited)
		return sbx_error_set(err, -ESRCH, "process %d already exited", (int)p->fds.pid);
	if (!p->ops->process_signal)
		return sbx__unsupported(p->ops, "process_signal", err);
	return p->ops->process_signal(p->impl, sig, err);
}

void sbx_process_detach(sbx_process *p)
{
	p->detached = 1;
}

void sbx_process_free(sbx_process *p)
{
	if (!p)
		return;
	sbx_process_close_stdin(p);
	p->ops->process_free(p->impl, !p->detached && !p->exited);
	free(p);
}

#define FS_CALL(op, what, ...)                                   \
	do {                                                     \
		const sbx_provider_ops *ops_ = sbx__sandbox_ops(sb); \
		if (!ops_->op)                                   \
			return unsupported(sb, what, err);       \
		return ops_->op(__VA_ARGS__);                    \
	} while (0)

int sbx_sandbox_stat(sbx_file_info *out, sbx_sandbox *sb, const char *path, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	int r = check_path(path, "stat", err);
	if (r < 0)
		return r;
	FS_CALL(stat, "stat", out, sbx__sandbox_impl(sb), path, err);
}

int sbx_sandbox_list_dir(sbx_file_info **out, size_t *n_out, sbx_sandbox *sb, const char *dir,
			 unsigned depth, sbx_error **err)
{
	int r = check_path(dir, "list", err);
	if (r < 0)
		return r;
	FS_CALL(list_dir, "list_dir", out, n_out, sbx__sandbox_impl(sb), dir, depth ? depth : 1, err);
}

int sbx_sandbox_mkdir(sbx_sandbox *sb, const char *path, unsigned mode, sbx_error **err)
{
	int r = check_path(path, "mkdir", err);
	if (r < 0)
		return r;
	FS_CALL(mkdir, "mkdir", sbx__sandbox_impl(sb), path, mode ? mode : 0755, err);
}

int sbx_sandbox_rename(sbx_sandbox *sb, const char *from, const char *to, sbx_error **err)
{
	int r = check_path(from, "rename", err);
	if (r == 0)
		r = check_path(to, "rename", err);
	if (r < 0)
		return r;
	FS_CALL(rename, "rename", sbx__sandbox_impl(sb), from, to, err);
}

int sbx_sandbox_remove(sbx_sandbox *sb, const char *path, int force, sbx_error **err)
{
	int r = check_path(path, "remove", err);
	if (r < 0)
		return r;
	if (strcmp(path, "/") == 0)
		return sbx_error_set(err, -EINVAL, "remove: refusing to remove the sandbox root");
	FS_CALL(remove, "remove", sbx__sandbox_impl(sb), path, force, err);
}

int sbx_sandbox_chown(sbx_sandbox *sb, const char *path, const char *user, sbx_error **err)
{
	int r = check_path(path, "chown", err);
	if (r < 0)
		return r;
	FS_CALL(chown, "chown", sbx__sandbox_impl(sb), path, user, err);
}

int sbx_sandbox_path_fd(int *fd_out, sbx_sandbox *sb, const char *path, sbx_error **err)
{
	int r = check_path(path, "path fd", err);
	if (r < 0)
		return r;
	FS_CALL(path_fd, "path_fd", fd_out, sbx__sandbox_impl(sb), path, err);
}

int sbx_sandbox_connect_port(int *fd_out, sbx_sandbox *sb, unsigned port, sbx_error **err)
{
	*fd_out = -1;
	if (port == 0 || port > 65535)
		return sbx_error_set(err, -EINVAL, "connect to port %u: expected a TCP port 1..65535", port);
	const sbx_provider_ops *ops = sbx__sandbox_ops(sb);
	/* A version 2 table ends before connect_port: never read past it. */
	if (ops->version < 3 || !ops->connect_port)
		return unsupported(sb, "connect_port", err);
	return ops->connect_port(fd_out, sbx__sandbox_impl(sb), port, err);
}

int sbx_sandbox_pause(sbx_sandbox *sb, sbx_error **err)
{
	FS_CALL(pause, "pause", sbx__sandbox_impl(sb), err);
}

int sbx_sandbox_resume(sbx_sandbox *sb, sbx_error **err)
{
	FS_CALL(resume, "resume", sbx__sandbox_impl(sb), err);
}

int sbx_sandbox_stats(sbx_stats *out, sbx_sandbox *sb, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const sbx_provider_ops *ops = sbx__sandbox_ops(sb);
	/* A version 2 table ends before stats: never read past it. */
	if (ops->version < 3 || !ops->stats)
		return unsupported(sb, "stats", err);
	return ops->stats(out, sbx__sandbox_impl(sb), err);
}

void sbx_file_info_clear(sbx_file_info *f)
{
	if (!f)
		return;
	free(f->name);
	free(f->path);
	free(f->owner);
	free(f->group);
	free(f->symlink_target);
	memset(f, 0, sizeof(*f));
}

void sbx_file_info_free(sbx_file_info *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		sbx_file_info_clear(&v[i]);
	free(v);
}
