/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's `sudo` (mounted over /usr/bin/sudo by init/sudo.c). It is
 * no set-uid program and holds no privilege: it turns its command line
 * into a request (argv, environment, cwd, target user), sends it with its
 * stdin, stdout and stderr (SCM_RIGHTS) to the broker on
 * /dev/sbx/sudo.sock, relays the signals a terminal or `kill` sends it, and
 * exits with the command's status. The broker decides (broker.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../init/sudo.h"
#include "../proto.h"
#include "args.h"
#include "pw.h"
#include "sudo_int.h"

extern char **environ;

static char reqbuf[INIT_SUDO_MSG_MAX];
static int sig_pipe[2] = { -1, -1 };

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("sudo: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

/* Variables sudo's env_reset keeps (Debian's defaults). */
static int kept(const char *kv, const char *list)
{
	static const char *const keep[] = { "TERM=", "COLORTERM=", "COLORS=", "LS_COLORS=", "DISPLAY=",
					    "XAUTHORITY=", "LANG=", "LANGUAGE=", "LINGUAS=", "LC_", "TZ=",
					    "HOSTNAME=", "PS1=", "PS2=", NULL };
	for (int i = 0; keep[i]; i++)
		if (strncmp(kv, keep[i], strlen(keep[i])) == 0)
			return 1;
	size_t k = strcspn(kv, "=");
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ",");
		if (n == k && strncmp(p, kv, k) == 0)
			return 1;
		p += n + (p[n] == ',');
	}
	return 0;
}

static void add_env(struct sbx_msg *m, const char *name, const char *value)
{
	char b[4200];
	snprintf(b, sizeof(b), "%s=%s", name, value);
	sbx__msg_add_str(m, T_ENV, b);
}

static void on_signal(int sig)
{
	int e = errno;
	unsigned char c = (unsigned char)sig;
	(void)!write(sig_pipe[1], &c, 1);
	errno = e;
}

/* Signals a terminal or `kill` sends sudo reach the command's group. */
static void relay_signals(void)
{
	static const int sigs[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM };
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return;
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &ign, NULL);
}

/* Exits as the command did: its code, or its signal re-raised. */
static int exit_like(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (!WIFSIGNALED(status))
		return 1;
	int sig = WTERMSIG(status);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core of sudo for the command's */
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(sig, &dfl, NULL);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	raise(sig);
	return 128 + sig;
}

/* stdio the request carries: a closed one is /dev/null. */
static void stdio_fds(int fds[3])
{
	for (int i = 0; i < 3; i++) {
		fds[i] = i;
		if (fcntl(i, F_GETFD) < 0)
			fds[i] = open("/dev/null", i ? O_WRONLY : O_RDONLY | O_CLOEXEC);
	}
}

static int wait_reply(int sock)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = sig_pipe[0], .events = POLLIN } };
		if (poll(p, sig_pipe[0] >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return die("poll: %s", strerror(errno));
		}
		if (p[1].revents & POLLIN) {
			unsigned char c;
			while (read(sig_pipe[0], &c, 1) == 1) {
				char b[64];
				struct sbx_msg m;
				sbx__msg_init(&m, b, sizeof(b), M_SIGNAL);
				sbx__msg_add_u64(&m, T_SIGNAL, c);
				sbx__msg_send(sock, &m, NULL, 0);
			}
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		char b[2048];
		int fds[SBX_MSG_MAX_FDS], nfds = 0;
		long n = sbx__msg_recv(sock, b, sizeof(b), fds, &nfds);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (n <= 0)
			return die("the sandbox's sudo broker went away before the command ended");
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		uint64_t status = 0;
		char msg[1024] = "";
		while (sbx__msg_next(b, (size_t)n, &off, &tag, &d, &dl) == 1) {
			if (tag == T_STATUS)
				status = sbx__msg_u64(d, dl);
			else if (tag == T_MSG)
				snprintf(msg, sizeof(msg), "%.*s", (int)dl, d);
		}
		if (sbx__msg_type(b) == M_EXITED)
			return exit_like((int)status);
		if (sbx__msg_type(b) == M_ERROR)
			return die("%s", msg);
	}
}

/* The request's environment (sudo's env_reset, -E, --preserve-env=). */
static void build_env(struct sbx_msg *m, const struct sudo_args *a, const struct sudo_pw *to,
		      const struct sudo_pw *from, const char *command)
{
	for (char **e = environ; e && *e; e++) {
		if (strncmp(*e, "PATH=", 5) == 0) /* secure_path: the sandbox's own */
			continue;
		if (a->preserve_env || kept(*e, a->preserve_list))
			sbx__msg_add_str(m, T_ENV, *e);
	}
	const char *home = getenv("HOME");
	if (!a->preserve_env || a->set_home || a->mode == SUDO_LOGIN || !home)
		add_env(m, "HOME", to->home);
	add_env(m, "USER", to->name);
	add_env(m, "LOGNAME", to->name);
	add_env(m, "SHELL", to->shell);
	char num[32];
	add_env(m, "SUDO_USER", from->name);
	snprintf(num, sizeof(num), "%u", (unsigned)from->uid);
	add_env(m, "SUDO_UID", num);
	snprintf(num, sizeof(num), "%u", (unsigned)from->gid);
	add_env(m, "SUDO_GID", num);
	add_env(m, "SUDO_COMMAND", command);
	for (int i = 0; i < a->n_set; i++)
		sbx__msg_add_str(m, T_ENV, a->set[i]);
}

int sudo_front_main(int argc, char **argv)
{
	struct sudo_args a;
	char err[512];
	if (sudo_args_parse(&a, argc, argv, err, sizeof(err)) < 0)
		return die("%s", err);
	switch (a.mode) {
	case SUDO_HELP:
		printf("usage: sudo [-u user] [-g group] [-E | --preserve-env=list] [-H] [-D dir] [-b] [-n]\n"
		       "            [-i | -s] [VAR=value] [command [arg ...]]\n"
		       "       sudo -v | -l | -k | -V | -h\n"
		       "sbx's sudo: the sandbox's broker runs the command as the target user when the\n"
		       "sandbox's policy allows it (label sbx.sudo=nopasswd); no password is ever asked.\n");
		return 0;
	case SUDO_VERSION: printf("Sudo version 1.9 (sbx sandbox broker)\n"); return 0;
	case SUDO_RESET: return 0;
	default: break;
	}
	struct sudo_pw to, from;
	const char *user = a.user ? a.user : "root";
	int by_uid = user[0] == '#';
	uid_t tuid = by_uid ? (uid_t)strtoul(user + 1, NULL, 10) : 0;
	if (sudo_pw_find(&to, user, by_uid, tuid) < 0) {
		if (!by_uid && strcmp(user, "root") != 0)
			return die("unknown user %s", user);
		memset(&to, 0, sizeof(to));
		snprintf(to.name, sizeof(to.name), "%s", by_uid ? user : "root");
		to.uid = tuid;
		snprintf(to.home, sizeof(to.home), "%s", to.uid ? "/" : "/root");
		snprintf(to.shell, sizeof(to.shell), "/bin/sh");
	}
	if (sudo_pw_find(&from, NULL, 1, getuid()) < 0) {
		memset(&from, 0, sizeof(from));
		snprintf(from.name, sizeof(from.name), "%u", (unsigned)getuid());
		from.uid = getuid();
		from.gid = getgid();
		snprintf(from.shell, sizeof(from.shell), "/bin/sh");
	}
	/* What runs: the command, or a shell that runs it. */
	static char joined[INIT_SUDO_MSG_MAX / 2];
	char *run[8];
	int nrun = 0;
	char *const *cmd = a.cmd;
	int ncmd = a.n_cmd;
	if (a.mode == SUDO_LOGIN || a.mode == SUDO_SHELL) {
		const char *sh = getenv("SHELL");
		run[nrun++] = a.mode == SUDO_LOGIN ? to.shell : (char *)(sh && *sh ? sh : from.shell);
		if (a.mode == SUDO_LOGIN)
			run[nrun++] = (char *)"-l";
		if (a.n_cmd) {
			if (sudo_args_join_escaped(joined, sizeof(joined), a.cmd, a.n_cmd) >= sizeof(joined))
				return die("argument list too long");
			run[nrun++] = (char *)"-c";
			run[nrun++] = joined;
		}
		cmd = run;
		ncmd = nrun;
	} else if (a.mode == SUDO_VALIDATE || a.mode == SUDO_LIST) {
		run[nrun++] = (char *)"true";
		cmd = run;
		ncmd = nrun;
	}
	char target[160];
	snprintf(target, sizeof(target), "%u", (unsigned)to.uid);
	if (a.group) {
		size_t l = strlen(target);
		snprintf(target + l, sizeof(target) - l, ":%s", a.group[0] == '#' ? a.group + 1 : a.group);
	}
	char cwd[4096];
	if (a.mode == SUDO_LOGIN)
		snprintf(cwd, sizeof(cwd), "%s", to.home);
	else if (a.chdir)
		snprintf(cwd, sizeof(cwd), "%s", a.chdir);
	else if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	struct sbx_msg m;
	sbx__msg_init(&m, reqbuf, sizeof(reqbuf), M_SUDO);
	sbx__msg_add_str(&m, T_USER, target);
	sbx__msg_add_str(&m, T_CWD, cwd);
	char command[4096];
	size_t cl = 0;
	command[0] = '\0';
	for (int i = 0; i < ncmd; i++) {
		sbx__msg_add_str(&m, T_ARG, cmd[i]);
		if (cl < sizeof(command))
			cl += (size_t)snprintf(command + cl, sizeof(command) - cl, "%s%s", i ? " " : "", cmd[i]);
	}
	build_env(&m, &a, &to, &from, command);
	if (m.overflow)
		return die("argument list and environment too long (at most %u bytes)", INIT_SUDO_MSG_MAX);
	if (a.background) {
		pid_t p = fork();
		if (p < 0)
			return die("fork: %s", strerror(errno));
		if (p > 0)
			return 0;
		setsid();
	}
	int sock = sudo_connect(err, sizeof(err));
	if (sock < 0)
		return die("%s", err);
	relay_signals();
	int fds[3];
	stdio_fds(fds);
	int r = sbx__msg_send(sock, &m, fds, 3);
	if (r < 0)
		return die("send the request to the sandbox's sudo broker: %s", strerror(-r));
	r = wait_reply(sock);
	if (r == 0 && a.mode == SUDO_LIST)
		printf("User %s may run the following commands in this sandbox:\n    (ALL : ALL) NOPASSWD: ALL\n",
		       from.name);
	return r;
}
