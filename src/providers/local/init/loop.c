/* SPDX-License-Identifier: MIT */
/*
 * init's event loop: one epoll over the control listener, client
 * connections, a signalfd for SIGCHLD and a timerfd for exec deadlines and
 * the sandbox TTL. Each exec owns one connection: M_EXEC in, M_STARTED and
 * later M_EXITED out. A connection closed while its command runs kills the
 * command's whole tree (its process group, and its pids sub-cgroup when it
 * has a timeout), so a cancelled caller never leaves work running.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto.h"
#include "spawn.h"
#include "sudo.h"

#define MAX_EXECS 1024
#define MAX_CONNS 1024

enum { EV_LISTEN = 1, EV_SIGNAL, EV_TIMER, EV_CONN, EV_SUDO };

struct exec {
	int used;
	pid_t pid;
	int conn;              /* index in conns, or -1 once the caller left */
	uint64_t deadline_ms;  /* 0 = none */
	int timed_out;
	int cg;                /* 1 when it has a sub-cgroup named e<pid> */
};

struct conn {
	int fd;                /* -1 = free slot */
	int exec;              /* index in execs, or -1 */
};

static struct init_cfg *cfg;
/* Slots at or above the high-water marks were never used: scans stop there,
 * so an idle init touches (and keeps resident) none of the tables. */
static struct exec execs[MAX_EXECS];
static struct conn conns[MAX_CONNS];
static int execs_hi, conns_hi;
static int epfd, sigfd, timfd;
static uint64_t ttl_deadline;
/* The sudo listener is watched one-shot: 0 = armed, > 0 = the broker
 * process that accepts, -1 = it could not start (retried at the next
 * exit of any process). Re-armed when that process is reaped. */
static pid_t sudo_broker;

static void sudo_arm(int add)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = (uint64_t)EV_SUDO << 32 };
	sudo_broker = 0;
	epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, cfg->sudo_fd, &ev);
}

static void ep_add(int fd, uint32_t kind, uint32_t idx)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = ((uint64_t)kind << 32) | idx };
	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void cg_name(char *out, size_t n, pid_t pid)
{
	snprintf(out, n, "e%d", (int)pid);
}

/* SIGKILLs every descendant of `root` by walking parent links in /proc (our
 * pid namespace holds only this sandbox, so the walk is short). Children that
 * called setsid are found while their ancestors live. */
static void kill_descendants(pid_t root)
{
	enum { MAXP = 8192 };
	static pid_t pid[MAXP], ppid[MAXP];
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d)) && n < MAXP) {
		char *end;
		long v = strtol(de->d_name, &end, 10);
		if (*end || v <= 1)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%ld/stat", v);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		char *rp = strrchr(buf, ')');
		int pp;
		if (!rp || sscanf(rp + 2, "%*c %d", &pp) != 1)
			continue;
		pid[n] = (pid_t)v;
		ppid[n++] = (pid_t)pp;
	}
	if (d)
		closedir(d);
	/* Mark descendants: repeat until no process with a marked parent is left. */
	static char in[MAXP];
	memset(in, 0, (size_t)n);
	for (int changed = 1; changed;) {
		changed = 0;
		for (int i = 0; i < n; i++) {
			if (in[i])
				continue;
			int hit = ppid[i] == root;
			for (int j = 0; j < n && !hit; j++)
				hit = in[j] && pid[j] == ppid[i];
			if (hit)
				in[i] = changed = 1;
		}
	}
	for (int i = 0; i < n; i++)
		if (in[i])
			kill(pid[i], SIGKILL);
}

/* Kills every process of an exec. With its own sub-cgroup: the group is
 * stopped from growing first (v2 kills it at once; v1 forbids new forks),
 * then its process group and whatever the group lists. A fork bomb outran
 * the old order (SIGSTOP, a /proc scan for descendants, then the group),
 * for seconds under a CPU quota. Without one: descendants and the group. */
static void kill_tree(struct exec *e)
{
	kill(e->pid, SIGSTOP); /* no new children while we look */
	char name[64];
	size_t base = 0;
	int cg = e->cg && cfg->cg_fd >= 0;
	if (cg) {
		cg_name(name, sizeof(name), e->pid);
		base = strlen(name);
		static const char *const stop[][2] = { { "/cgroup.kill", "1" }, { "/pids.max", "0" } };
		for (size_t k = 0; k < 2; k++) {
			snprintf(name + base, sizeof(name) - base, "%s", stop[k][0]);
			int fd = openat(cfg->cg_fd, name, O_WRONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			ssize_t w = write(fd, stop[k][1], 1);
			close(fd);
			if (w == 1 && k == 0)
				break;
		}
	}
	/* While the stopped command lives: once it is dead, a child of it
	 * that left its process group (setsid) is init's and no longer found. */
	if (!cg)
		kill_descendants(e->pid);
	kill(-e->pid, SIGKILL);
	kill(e->pid, SIGKILL);
	if (!cg)
		return;
	snprintf(name + base, sizeof(name) - base, "/cgroup.procs");
	for (int round = 0; round < 50; round++) {
		int fd = openat(cfg->cg_fd, name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		char pids[4096];
		ssize_t n = read(fd, pids, sizeof(pids) - 1);
		close(fd);
		if (n <= 0)
			return;
		pids[n] = '\0';
		for (char *p = pids, *line; (line = strsep(&p, "\n")) != NULL;)
			if (*line)
				kill((pid_t)strtol(line, NULL, 10), SIGKILL);
	}
}

static void cg_remove(pid_t pid)
{
	char name[32];
	cg_name(name, sizeof(name), pid);
	unlinkat(cfg->cg_fd, name, AT_REMOVEDIR);
}

static void conn_close(int ci)
{
	struct conn *c = &conns[ci];
	if (c->exec >= 0) {
		struct exec *e = &execs[c->exec];
		e->conn = -1;
		kill_tree(e);
	}
	close(c->fd);
	c->fd = -1;
	c->exec = -1;
}

/* Strings and arrays come from the request arena (init_req_alloc). */
static char *req_strdup(const char *d, uint32_t n)
{
	char *s = init_req_alloc((size_t)n + 1);
	if (s) {
		memcpy(s, d, n);
		s[n] = '\0';
	}
	return s;
}

static int parse_exec(struct spawn_req *q, uint64_t *timeout_ms, int *quiet, const char *m, size_t len)
{
	int na = 0, ne = 0;
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t n;
	int r;
	memset(q, 0, sizeof(*q));
	q->cwd = cfg->workdir ? cfg->workdir : "/";
	q->user = cfg->user;
	*timeout_ms = 0;
	*quiet = 0;
	/* First pass: sizes of the argv and env arrays. */
	while ((r = sbx__msg_next(m, len, &off, &tag, &d, &n)) == 1) {
		na += tag == T_ARG;
		ne += tag == T_ENV;
	}
	if (r < 0 || na == 0)
		return -EPROTO;
	char **argv = init_req_alloc(((size_t)na + 1) * sizeof(*argv));
	char **env = init_req_alloc(((size_t)ne + 1) * sizeof(*env));
	if (!argv || !env)
		return -ENOMEM;
	na = ne = 0;
	off = 0;
	while ((r = sbx__msg_next(m, len, &off, &tag, &d, &n)) == 1) {
		if (tag == T_TIMEOUT_MS) {
			*timeout_ms = sbx__msg_u64(d, n);
			continue;
		}
		if (tag == T_QUIET) {
			*quiet = 1;
			continue;
		}
		if (tag == T_TTY) {
			uint64_t v = sbx__msg_u64(d, n);
			q->tty = 1;
			q->rows = (unsigned)(v >> 16 & 0xffff);
			q->cols = (unsigned)(v & 0xffff);
			continue;
		}
		if (tag != T_ARG && tag != T_ENV && tag != T_CWD && tag != T_USER)
			continue;
		char *s = req_strdup(d, n);
		if (!s)
			return -ENOMEM;
		if (tag == T_ARG)
			argv[na++] = s;
		else if (tag == T_ENV)
			env[ne++] = s;
		else if (tag == T_CWD)
			q->cwd = s;
		else
			q->user = s;
	}
	argv[na] = NULL;
	env[ne] = NULL;
	q->argv = argv;
	q->extra_env = env;
	q->base_env = cfg->env;
	return r < 0 ? -EPROTO : 0;
}

static void reply_exec_error(int fd, int err, int exit_code, const char *msg)
{
	char b[1024];
	struct sbx_msg m;
	sbx__msg_init(&m, b, sizeof(b), M_ERROR);
	sbx__msg_add_u64(&m, T_ERRNO, (uint64_t)err);
	sbx__msg_add_str(&m, T_MSG, msg);
	if (exit_code)
		sbx__msg_add_u64(&m, T_STATUS, (uint64_t)exit_code);
	sbx__msg_send(fd, &m, NULL, 0);
}

static void do_exec(int ci, const char *m, size_t len, int *fds, int nfds)
{
	struct conn *c = &conns[ci];
	struct spawn_req q;
	uint64_t timeout_ms;
	int quiet;
	char msg[768] = "";
	int ei;
	for (ei = 0; ei < execs_hi && execs[ei].used; ei++)
		;
	init_req_begin(len);
	int r = parse_exec(&q, &timeout_ms, &quiet, m, len);
	/* A terminal's exec carries no fd: its stdio is made here. (An init
	 * older than T_TTY sees a tty request as one without its 3 fds.) */
	if (r == 0 && nfds != (q.tty ? 0 : 3))
		r = -EPROTO;
	if (r < 0 || c->exec >= 0 || ei == MAX_EXECS) {
		reply_exec_error(c->fd, r < 0 ? -r : EBUSY, 0,
				 r < 0 ? "malformed exec request" : "too many commands running");
		goto out;
	}
	if (!q.tty)
		memcpy(q.fds, fds, sizeof(q.fds));
	int procs = -1, made_cg = 0, master = -1;
	char name[64];
	pid_t pid = 0;
	int exit_code = 0;
	if (timeout_ms && cfg->cg_fd >= 0) {
		/* The cgroup is named after a placeholder until we know the pid;
		 * a per-request counter keeps names unique. */
		static unsigned seq;
		snprintf(name, sizeof(name), "s%u", ++seq);
		if (mkdirat(cfg->cg_fd, name, 0755) == 0) {
			char p[96];
			snprintf(p, sizeof(p), "%s/cgroup.procs", name);
			procs = openat(cfg->cg_fd, p, O_WRONLY | O_CLOEXEC);
			made_cg = procs >= 0;
		}
	}
	r = spawn_command(&pid, &master, &q, procs, msg, sizeof(msg), &exit_code);
	if (procs >= 0)
		close(procs);
	if (r < 0) {
		if (made_cg)
			unlinkat(cfg->cg_fd, name, AT_REMOVEDIR);
		reply_exec_error(c->fd, -r, exit_code, msg);
		goto out;
	}
	if (made_cg) {
		char final[32];
		cg_name(final, sizeof(final), pid);
		made_cg = renameat(cfg->cg_fd, name, cfg->cg_fd, final) == 0;
		if (!made_cg)
			unlinkat(cfg->cg_fd, name, AT_REMOVEDIR);
	}
	if (ei == execs_hi)
		execs_hi++;
	execs[ei] = (struct exec){ .used = 1, .pid = pid, .conn = ci, .cg = made_cg,
				   .deadline_ms = timeout_ms ? init_now_ms() + timeout_ms : 0 };
	c->exec = ei;
	if (!quiet || master >= 0) {
		char b[64];
		struct sbx_msg sm;
		sbx__msg_init(&sm, b, sizeof(b), M_STARTED);
		sbx__msg_add_u64(&sm, T_PID, (uint64_t)pid);
		sbx__msg_send(c->fd, &sm, &master, master >= 0);
	}
	if (master >= 0)
		close(master); /* the caller's alone now */
out:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	init_req_end();
}

static void handle_conn(int ci)
{
	struct conn *c = &conns[ci];
	int fds[SBX_MSG_MAX_FDS], nfds = 0;
	long n = sbx__msg_recv(c->fd, init_msgbuf, SBX_MSG_MAX, fds, &nfds);
	if (n <= 0) {
		if (n == -EAGAIN)
			return;
		conn_close(ci);
		return;
	}
	switch (sbx__msg_type(init_msgbuf)) {
	case M_EXEC:
		do_exec(ci, init_msgbuf, (size_t)n, fds, nfds);
		return;
	case M_SIGNAL: {
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		while (sbx__msg_next(init_msgbuf, (size_t)n, &off, &tag, &d, &dl) == 1) {
			if (tag != T_SIGNAL || c->exec < 0)
				continue;
			int sig = (int)sbx__msg_u64(d, dl);
			/* SIGKILL ends the command's whole tree, as a timeout does. */
			if (sig == SIGKILL)
				kill_tree(&execs[c->exec]);
			else
				kill(execs[c->exec].pid, sig);
		}
		break;
	}
	case M_DETACH:
		/* The caller goes away but the command stays (background jobs). */
		if (c->exec >= 0) {
			execs[c->exec].conn = -1;
			c->exec = -1;
		}
		break;
	case M_ROOTFD: {
		int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (root < 0) {
			sbx__msg_send_error(c->fd, errno, "open sandbox root");
			break;
		}
		sbx__msg_send_simple(c->fd, M_OK, &root, 1);
		close(root);
		break;
	}
	case M_SET_TTL: {
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		while (sbx__msg_next(init_msgbuf, (size_t)n, &off, &tag, &d, &dl) == 1)
			if (tag == T_TTL_MS) {
				uint64_t ttl = sbx__msg_u64(d, dl);
				ttl_deadline = ttl ? init_now_ms() + ttl : 0;
			}
		sbx__msg_send_simple(c->fd, M_OK, NULL, 0);
		break;
	}
	case M_PING:
		sbx__msg_send_simple(c->fd, M_OK, NULL, 0);
		break;
	default:
		sbx__msg_send_error(c->fd, EPROTO, "unknown request");
		break;
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(cfg->ctl_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		int ci;
		for (ci = 0; ci < conns_hi && conns[ci].fd >= 0; ci++)
			;
		if (ci == MAX_CONNS) {
			close(fd);
			continue;
		}
		if (ci == conns_hi)
			conns_hi++;
		conns[ci] = (struct conn){ .fd = fd, .exec = -1 };
		ep_add(fd, EV_CONN, (uint32_t)ci);
	}
}

static void send_exited(struct exec *e, int status)
{
	if (e->conn < 0)
		return;
	char b[64];
	struct sbx_msg m;
	sbx__msg_init(&m, b, sizeof(b), M_EXITED);
	sbx__msg_add_u64(&m, T_STATUS, (uint64_t)status);
	sbx__msg_add_u64(&m, T_TIMED_OUT, (uint64_t)e->timed_out);
	sbx__msg_send(conns[e->conn].fd, &m, NULL, 0);
	conns[e->conn].exec = -1;
}

static void reap(void)
{
	struct signalfd_siginfo si;
	while (read(sigfd, &si, sizeof(si)) == sizeof(si))
		;
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (sudo_broker && (pid == sudo_broker || sudo_broker < 0))
			sudo_arm(0);
		for (int i = 0; i < execs_hi; i++) {
			struct exec *e = &execs[i];
			if (!e->used || e->pid != pid)
				continue;
			/* A command timed out: finish off anything it left behind. */
			if (e->timed_out)
				kill_tree(e);
			send_exited(e, status);
			if (e->cg)
				cg_remove(pid);
			e->used = 0;
		}
	}
}

static void on_timer(void)
{
	uint64_t x;
	while (read(timfd, &x, sizeof(x)) == sizeof(x))
		;
	uint64_t now = init_now_ms();
	if (ttl_deadline && now >= ttl_deadline) {
		/* Everything else first: init's own exit closes the sudo
		 * listener, whose queued connections may hold fds of pipes
		 * a process inside keeps locked (init/sudo.c). */
		kill(-1, SIGKILL);
		_exit(0); /* pid 1 exits: the kernel kills the whole sandbox */
	}
	for (int i = 0; i < execs_hi; i++) {
		struct exec *e = &execs[i];
		if (e->used && e->deadline_ms && now >= e->deadline_ms && !e->timed_out) {
			e->timed_out = 1;
			kill_tree(e);
		}
	}
}

static void arm_timer(void)
{
	uint64_t next = ttl_deadline;
	for (int i = 0; i < execs_hi; i++)
		if (execs[i].used && execs[i].deadline_ms && !execs[i].timed_out &&
		    (!next || execs[i].deadline_ms < next))
			next = execs[i].deadline_ms;
	struct itimerspec its = { 0 };
	if (next) {
		its.it_value.tv_sec = (time_t)(next / 1000);
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000L;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(timfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void init_loop(struct init_cfg *c)
{
	cfg = c;
	ttl_deadline = cfg->ttl_ms ? init_now_ms() + cfg->ttl_ms : 0;
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &ign, NULL);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	timfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (epfd < 0 || sigfd < 0 || timfd < 0)
		_exit(4);
	fcntl(cfg->ctl_fd, F_SETFL, O_NONBLOCK);
	ep_add(cfg->ctl_fd, EV_LISTEN, 0);
	ep_add(sigfd, EV_SIGNAL, 0);
	ep_add(timfd, EV_TIMER, 0);
	if (cfg->sudo_fd >= 0)
		sudo_arm(1);
	int housekeeping = 1;
	for (;;) {
		arm_timer();
		struct epoll_event evs[64];
		/* Work no request waits for runs once init has been idle for
		 * 5 ms: a short-lived sandbox never pays for it. */
		int n = epoll_wait(epfd, evs, 64, housekeeping ? 5 : -1);
		if (n == 0 && housekeeping) {
			init_shrink_fd_table();
			housekeeping = 0;
		}
		for (int i = 0; i < n; i++) {
			uint32_t kind = (uint32_t)(evs[i].data.u64 >> 32);
			uint32_t idx = (uint32_t)evs[i].data.u64;
			switch (kind) {
			case EV_LISTEN: accept_all(); break;
			case EV_SIGNAL: reap(); break;
			case EV_TIMER: on_timer(); break;
			case EV_SUDO: sudo_broker = init_sudo_spawn(cfg); break;
			case EV_CONN:
				if (conns[idx].fd >= 0)
					handle_conn((int)idx);
				break;
			default: break;
			}
		}
	}
}
