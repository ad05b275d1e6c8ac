/* SPDX-License-Identifier: MIT */
/*
 * Streamed processes on the local provider. Starting one is a control
 * connection to init carrying M_EXEC with the command's stdin/stdout/stderr
 * (SCM_RIGHTS); init answers M_STARTED and, when the command ends, M_EXITED.
 * The caller keeps the other ends of the pipes, so output never passes
 * through init, and the connection itself is the status fd. Closing the
 * connection while the command runs kills its tree, unless detached first.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "local_int.h"
#include "proto.h"

struct local_proc {
	struct local_sb *sb;
	int conn;
	int out_r, err_r, in_w;
	int tty_m;      /* the terminal's master (opts->tty), or -1 */
	int exited;
};

static int build_request(struct sbx_msg *m, const sbx_exec_opts *o, int quiet)
{
	if (quiet)
		sbx__msg_add_u64(m, T_QUIET, 1);
	if (o->shell) {
		sbx__msg_add_str(m, T_ARG, "/bin/sh");
		sbx__msg_add_str(m, T_ARG, "-c");
		sbx__msg_add_str(m, T_ARG, o->shell);
	} else {
		for (size_t i = 0; o->argv[i]; i++)
			sbx__msg_add_str(m, T_ARG, o->argv[i]);
	}
	for (size_t i = 0; o->env && o->env[i]; i++)
		sbx__msg_add_str(m, T_ENV, o->env[i]);
	if (o->cwd)
		sbx__msg_add_str(m, T_CWD, o->cwd);
	if (o->user)
		sbx__msg_add_str(m, T_USER, o->user);
	if (o->timeout_s > 0) {
		uint64_t ms = (uint64_t)(o->timeout_s * 1000.0);
		sbx__msg_add_u64(m, T_TIMEOUT_MS, ms ? ms : 1);
	}
	if (o->tty) {
		uint64_t rows = o->tty_rows ? o->tty_rows : 24, cols = o->tty_cols ? o->tty_cols : 80;
		sbx__msg_add_u64(m, T_TTY, rows << 16 | cols);
	}
	return m->overflow ? -E2BIG : 0;
}

static void fields(const char *buf, size_t n, uint64_t *status, uint64_t *timed_out, int *e, char *msg,
		   size_t msglen)
{
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	while (sbx__msg_next(buf, n, &off, &tag, &d, &dl) == 1) {
		if (tag == T_STATUS)
			*status = sbx__msg_u64(d, dl);
		else if (tag == T_TIMED_OUT)
			*timed_out = sbx__msg_u64(d, dl);
		else if (tag == T_ERRNO)
			*e = (int)sbx__msg_u64(d, dl);
		else if (tag == T_MSG && msg)
			snprintf(msg, msglen, "%.*s", (int)dl, d);
	}
}

void sbx__local_proc_give_output(struct local_proc *p, int *out_r, int *err_r)
{
	*out_r = p->out_r;
	*err_r = p->err_r;
	p->out_r = p->err_r = -1;
}

void sbx__local_proc_free(struct local_proc *p, int kill)
{
	if (!p)
		return;
	if (p->conn >= 0 && !kill && !p->exited)
		sbx__msg_send_simple(p->conn, M_DETACH, NULL, 0);
	int fds[] = { p->conn, p->out_r, p->err_r, p->in_w, p->tty_m };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(p);
}
/*
 * A pipe belongs to whoever made it (host root) and is mode 0600, so root
 * of a user namespace could not reopen /proc/self/fd/1 (`echo >
 * /dev/stdout`, `tee /dev/stderr`): anonymous pipes made for this command
 * (here, or by a caller that says so: fds_are_private) are given to root
 * inside, as container runtimes do. Named FIFOs, a caller's other pipes and
 * every other kind of fd are left alone.
 */
static void give_pipes_to_root_inside(struct local_sb *sb, const int child[3], const int made[3])
{
	uint32_t base = sbx__local_id_base(sb);
	if (!base)
		return;
	for (int i = 0; i < 3; i++) {
		/* A caller's own pipe (its stderr, say) stays the caller's:
		 * root inside could otherwise reopen it and read or write
		 * what other host processes share through it. */
		if (!made[i])
			continue;
		struct stat st;
		struct statfs fs;
		if (fstat(child[i], &st) == 0 && S_ISFIFO(st.st_mode) && st.st_uid == 0 &&
		    fstatfs(child[i], &fs) == 0 && fs.f_type == PIPEFS_MAGIC)
			(void)!fchown(child[i], base, base);
	}
}

/* What a sandbox sends as its terminal must be one: the master side of a
 * devpts instance (ptmx's device number), which we only read, write and
 * resize. Any other file (a host path it holds, a FIFO) is refused. */
static int is_pty_master(int fd)
{
	struct stat st;
	struct statfs fs;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 2) &&
	       fstatfs(fd, &fs) == 0 && fs.f_type == DEVPTS_SUPER_MAGIC;
}

int sbx__local_proc_start(struct local_proc **out, struct sbx_process_fds *fds, struct local_sb *sb,
			  const sbx_exec_opts *o, int keep_stdin, int quiet, int *start_exit, char *start_msg,
			  size_t msglen, sbx_error **err)
{
	/* Most requests fit in 16 KiB; a huge argv/env gets the protocol maximum. */
	size_t cap = 16 * 1024;
	_cleanup_free_ char *mbuf = xmalloc(cap);
	struct sbx_msg m;
	sbx__msg_init(&m, mbuf, cap, M_EXEC);
	if (build_request(&m, o, quiet) < 0) {
		cap = SBX_MSG_MAX;
		mbuf = xrealloc(mbuf, cap);
		sbx__msg_init(&m, mbuf, cap, M_EXEC);
		if (build_request(&m, o, quiet) < 0)
			return sbx_error_set(err, -E2BIG, "exec: argv and env exceed %u bytes", SBX_MSG_MAX);
	}
	struct local_proc *p = xcalloc(1, sizeof(*p));
	*p = (struct local_proc){ .sb = sb, .conn = -1, .out_r = -1, .err_r = -1, .in_w = -1, .tty_m = -1 };
	int child[3] = { -1, -1, -1 };
	int r = 0, nchild = o->tty ? 0 : 3;
	*start_exit = 0;
	/* The master comes with M_STARTED. */
	quiet = quiet && !o->tty;
	if (o->tty) {
		/* init makes the terminal: nothing of ours enters. */
	} else if (o->stdin_fd >= 0) {
		child[0] = fcntl(o->stdin_fd, F_DUPFD_CLOEXEC, 3);
	} else if (o->stdin_data || keep_stdin) {
		/* A socket, not a pipe: send(MSG_NOSIGNAL) cannot raise SIGPIPE in
		 * the caller's process when the command stops reading. */
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
			goto sys_fail;
		shutdown(sp[0], SHUT_WR);
		child[0] = sp[0];
		p->in_w = sp[1];
	} else {
		/* An empty stdin is a socket whose peer is gone, not the host's
		 * /dev/null: a sandbox root could chmod or chown that through
		 * /proc/self/fd/0 (with userns=host). */
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
			goto sys_fail;
		close(sp[1]);
		child[0] = sp[0];
	}
	int given[2] = { o->stdout_fd, o->stderr_fd };
	int *mine[2] = { &p->out_r, &p->err_r };
	for (int i = 0; i < nchild - 1; i++) {
		if (given[i] >= 0) {
			child[i + 1] = fcntl(given[i], F_DUPFD_CLOEXEC, 3);
			continue;
		}
		int pp[2];
		if (pipe2(pp, O_CLOEXEC) < 0)
			goto sys_fail;
		*mine[i] = pp[0];
		child[i + 1] = pp[1];
		fcntl(pp[0], F_SETFL, O_NONBLOCK);
	}
	for (int i = 0; i < nchild; i++)
		if (child[i] < 0)
			goto sys_fail;
	int made[3] = { o->stdin_fd >= 0 && o->fds_are_private, o->stdout_fd < 0 || o->fds_are_private,
			o->stderr_fd < 0 || o->fds_are_private };
	if (nchild)
		give_pipes_to_root_inside(sb, child, made);
	if ((r = sbx__local_memcg_join(sb, err)) < 0 || (r = sbx__local_connect(sb, &p->conn, err)) < 0)
		goto out;
	r = sbx__msg_send(p->conn, &m, child, nchild);
	if (r < 0) {
		r = sbx_error_setsys(err, r, -r, "send exec to sandbox %s", sb->id);
		goto out;
	}
	for (int i = 0; i < 3; i++) {
		close(child[i]);
		child[i] = -1;
	}
	if (quiet) {
		/* M_ERROR or M_EXITED arrive on the status fd (proc_poll). */
		fcntl(p->conn, F_SETFL, O_NONBLOCK);
		*fds = (struct sbx_process_fds){ .pid = 0, .out_fd = p->out_r, .err_fd = p->err_r,
						 .in_fd = p->in_w, .status_fd = p->conn, .tty_fd = -1 };
		*out = steal_ptr(&p);
		return 0;
	}
	char buf[2048];
	int rfds[SBX_MSG_MAX_FDS], nr = 0, k = 0;
	long n = sbx__msg_recv(p->conn, buf, sizeof(buf), rfds, &nr);
	if (n > 0 && o->tty && nr == 1 && sbx__msg_type(buf) == M_STARTED)
		p->tty_m = rfds[k++];
	for (int i = k; i < nr; i++)
		close(rfds[i]);
	if (n <= 0) {
		r = sbx_error_set(err, -ESRCH, "exec: sandbox %s went away", sb->id);
		goto out;
	}
	uint64_t status = 0, timed_out = 0;
	int e = EIO;
	char msg[1024] = "";
	fields(buf, (size_t)n, &status, &timed_out, &e, msg, sizeof(msg));
	uint32_t type = sbx__msg_type(buf);
	if (type == M_ERROR) {
		/* Not found / not executable: a result like a shell's, reported
		 * to the caller as exit code + message, not as an error. */
		if (status && start_exit) {
			*start_exit = (int)status;
			snprintf(start_msg, msglen, "%s", msg);
			r = -ENOENT;
		} else {
			r = sbx_error_set(err, -e, "exec: %s", msg);
		}
		goto out;
	}
	if (type != M_STARTED) {
		r = sbx_error_set(err, -EPROTO, "exec: unexpected reply %u from sandbox %s", type, sb->id);
		goto out;
	}
	if (o->tty && !is_pty_master(p->tty_m)) {
		r = sbx_error_set(err, -EPROTO, "exec: sandbox %s sent no terminal", sb->id);
		goto out;
	}
	fcntl(p->conn, F_SETFL, O_NONBLOCK);
	if (p->tty_m >= 0)
		fcntl(p->tty_m, F_SETFL, O_NONBLOCK);
	*fds = (struct sbx_process_fds){ .pid = (pid_t)0, .out_fd = p->out_r, .err_fd = p->err_r,
					 .in_fd = p->in_w, .status_fd = p->conn, .tty_fd = p->tty_m };
	{
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		while (sbx__msg_next(buf, (size_t)n, &off, &tag, &d, &dl) == 1)
			if (tag == T_PID)
				fds->pid = (pid_t)sbx__msg_u64(d, dl);
	}
	*out = steal_ptr(&p);
	return 0;
sys_fail:
	r = sbx_error_setsys(err, -errno, errno, "exec in sandbox %s", sb->id);
out:
	for (int i = 0; i < 3; i++)
		if (child[i] >= 0)
			close(child[i]);
	sbx__local_proc_free(p, 1);
	return r;
}

void sbx__local_proc_give_stdin(struct local_proc *p)
{
	p->in_w = -1;
}

int sbx__local_proc_poll(struct local_proc *p, int *status, int *timed_out, int block, int *start_exit,
			 char *start_msg, size_t msglen, sbx_error **err)
{
	if (p->exited)
		return 1;
	char buf[2048];
	int rfds[SBX_MSG_MAX_FDS], nr = 0;
	for (;;) {
		if (block) {
			struct pollfd pf = { .fd = p->conn, .events = POLLIN };
			while (poll(&pf, 1, -1) < 0 && errno == EINTR)
				;
		}
		long n = sbx__msg_recv(p->conn, buf, sizeof(buf), rfds, &nr);
		for (int i = 0; i < nr; i++)
			close(rfds[i]);
		if (n == -EAGAIN)
			return block ? sbx_error_set(err, -EIO, "exec: spurious wakeup") : 0;
		if (n <= 0)
			return sbx_error_set(err, -ESRCH, "exec: sandbox %s went away while the command ran",
					     p->sb->id);
		if (sbx__msg_type(buf) == M_ERROR) {
			/* Only a quiet start reports its failure here. */
			uint64_t st = 0, to = 0;
			int e = EIO;
			char msg[1024] = "";
			fields(buf, (size_t)n, &st, &to, &e, msg, sizeof(msg));
			p->exited = 1;
			if (st && start_exit) {
				*start_exit = (int)st;
				snprintf(start_msg, msglen, "%s", msg);
				return -ENOENT;
			}
			return sbx_error_set(err, -e, "exec: %s", msg);
		}
		if (sbx__msg_type(buf) != M_EXITED)
			continue;
		uint64_t st = 0, to = 0;
		int e = 0;
		fields(buf, (size_t)n, &st, &to, &e, NULL, 0);
		*status = (int)st;
		*timed_out = (int)to;
		p->exited = 1;
		return 1;
	}
}

int sbx__local_proc_signal(struct local_proc *p, int sig, sbx_error **err)
{
	char buf[64];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), M_SIGNAL);
	sbx__msg_add_u64(&m, T_SIGNAL, (uint64_t)sig);
	int r = sbx__msg_send(p->conn, &m, NULL, 0);
	return r < 0 ? sbx_error_setsys(err, r, -r, "signal process in sandbox %s", p->sb->id) : 0;
}
