/* SPDX-License-Identifier: MIT */
/* Streamed processes, file-system calls and pause on the local provider. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

TestSuite(process, .init = setup, .fini = teardown);

static sbx_process *start(sbx_sandbox *sb, const char *shell, int keep_stdin)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = shell;
	sbx_process *p = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_process_start(&p, sb, &o, keep_stdin, &err), 0, "%s", err ? err->msg : "");
	return p;
}

/* Reads fd until EOF or `want` bytes. */
static size_t slurp(int fd, char *buf, size_t cap, size_t want)
{
	size_t n = 0;
	while (n < want && n < cap) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 5000) <= 0)
			break;
		ssize_t k = read(fd, buf + n, cap - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	return n;
}

Test(process, streams_stdin_and_exit_status)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_process *p = start(sb, "read line; echo got:$line; echo err >&2; exit 7", 1);
	cr_assert_gt(sbx_process_pid(p), 1);
	int st, to;
	cr_assert_eq(sbx_process_poll(p, &st, &to, 0, NULL), 0, "still running, waiting for stdin");
	cr_assert_eq(write(sbx_process_stdin_fd(p), "hello\n", 6), 6);
	sbx_process_close_stdin(p);
	char buf[64] = "";
	size_t n = slurp(sbx_process_stdout_fd(p), buf, sizeof(buf) - 1, 10);
	buf[n] = '\0';
	cr_assert_str_eq(buf, "got:hello\n");
	n = slurp(sbx_process_stderr_fd(p), buf, sizeof(buf) - 1, 4);
	buf[n] = '\0';
	cr_assert_str_eq(buf, "err\n");
	cr_assert_eq(sbx_process_poll(p, &st, &to, 1, NULL), 1);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	sbx_process_free(p);
	destroy(sb);
}

Test(process, signal_kill_ends_the_tree_and_detach_keeps_it)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_process *p = start(sb, "setsid sleep 1000 & sleep 1000", 0);
	usleep(100000);
	cr_assert_eq(sbx_process_signal(p, SIGKILL, NULL), 0);
	int st, to;
	cr_assert_eq(sbx_process_poll(p, &st, &to, 1, NULL), 1);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	sbx_process_free(p);
	int code;
	char *out = sbx_test_sh(sb, "sleep 0.2; ps -o comm | grep -c sleep", &code);
	cr_assert_str_eq(out, "0\n", "SIGKILL left children: %s", out);
	free(out);
	/* a detached process outlives its handle; an undetached one does not */
	p = start(sb, "sleep 1000", 0);
	sbx_process_detach(p);
	sbx_process_free(p);
	p = start(sb, "sleep 2000", 0);
	sbx_process_free(p);
	usleep(200000);
	out = sbx_test_sh(sb, "ps -o args | grep -v grep | grep -c 'sleep [12]000'", &code);
	cr_assert_str_eq(out, "1\n", "%s", out);
	free(out);
	out = sbx_test_sh(sb, "ps -o args | grep -v grep | grep -c 'sleep 1000'", &code);
	cr_assert_str_eq(out, "1\n");
	free(out);
	destroy(sb);
}

Test(process, missing_command_is_enoent)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	const char *argv[] = { "no-such-cmd", NULL };
	o.argv = argv;
	sbx_process *p = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_process_start(&p, sb, &o, 0, &err), -ENOENT);
	cr_assert_not_null(strstr(err->msg, "no-such-cmd"));
	sbx_error_free(err);
	destroy(sb);
}

Test(process, file_system_calls)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_mkdir(sb, "/data/sub", 0750, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_sandbox_mkdir(sb, "/data/sub", 0750, &err), -EEXIST);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "/data/a.txt", "12345", 5, 0640, NULL), 0);
	int code;
	free(sbx_test_sh(sb, "ln -s a.txt /data/link", &code));
	sbx_file_info fi;
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/data/a.txt", NULL), 0);
	cr_assert_eq(fi.type, SBX_FILE_REGULAR);
	cr_assert_eq(fi.size, 5);
	cr_assert_eq(fi.mode, 0640);
	cr_assert_str_eq(fi.owner, "root");
	cr_assert_str_eq(fi.name, "a.txt");
	sbx_file_info_clear(&fi);
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/data/link", NULL), 0);
	cr_assert_eq(fi.type, SBX_FILE_SYMLINK);
	cr_assert_str_eq(fi.symlink_target, "a.txt");
	sbx_file_info_clear(&fi);
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/nope", &err), -ENOENT);
	sbx_error_free(err);
	err = NULL;
	sbx_file_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list_dir(&v, &n, sb, "/data", 1, NULL), 0);
	cr_assert_eq(n, 3);
	sbx_file_info_free(v, n);
	cr_assert_eq(sbx_sandbox_list_dir(&v, &n, sb, "/data", 2, NULL), 0);
	cr_assert_eq(n, 3, "sub is empty");
	sbx_file_info_free(v, n);
	cr_assert_eq(sbx_sandbox_rename(sb, "/data/a.txt", "/data/sub/b.txt", NULL), 0);
	cr_assert_eq(sbx_sandbox_chown(sb, "/data/sub/b.txt", "user", NULL), 0);
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/data/sub/b.txt", NULL), 0);
	cr_assert_str_eq(fi.owner, "user");
	cr_assert_eq(fi.uid, 1000);
	sbx_file_info_clear(&fi);
	cr_assert_eq(sbx_sandbox_remove(sb, "/data", 0, NULL), 0);
	cr_assert_eq(sbx_sandbox_stat(&fi, sb, "/data", &err), -ENOENT);
	sbx_error_free(err);
	cr_assert_eq(sbx_sandbox_remove(sb, "/data", 1, NULL), 0, "force ignores missing");
	err = NULL;
	cr_assert_eq(sbx_sandbox_remove(sb, "/", 1, &err), -EINVAL);
	sbx_error_free(err);
	/* inotify through a confined path fd */
	cr_assert_eq(sbx_sandbox_mkdir(sb, "/watch", 0755, NULL), 0);
	int pfd = -1;
	cr_assert_eq(sbx_sandbox_path_fd(&pfd, sb, "/watch", NULL), 0);
	int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	cr_assert_geq(inotify_add_watch(in, proc, IN_CREATE), 0);
	free(sbx_test_sh(sb, "touch /watch/new", &code));
	struct pollfd pf = { .fd = in, .events = POLLIN };
	cr_assert_eq(poll(&pf, 1, 2000), 1, "no inotify event");
	char ev[512];
	cr_assert_gt(read(in, ev, sizeof(ev)), 0);
	cr_assert_str_eq(((struct inotify_event *)ev)->name, "new");
	close(in);
	close(pfd);
	destroy(sb);
}

Test(process, pause_freezes_and_resume_thaws)
{
	sbx_sandbox *sb = sbx_test_sandbox(rt, NULL);
	sbx_process *p = start(sb, "i=0; while true; do i=$((i+1)); echo $i; sleep 0.02; done", 0);
	usleep(200000);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_pause(sb, &err), 0, "%s", err ? err->msg : "");
	usleep(100000);
	char buf[8192];
	while (read(sbx_process_stdout_fd(p), buf, sizeof(buf)) > 0)
		;
	usleep(300000);
	cr_assert_lt(read(sbx_process_stdout_fd(p), buf, sizeof(buf)), 1, "output while paused");
	cr_assert_eq(sbx_sandbox_resume(sb, NULL), 0);
	struct pollfd pf = { .fd = sbx_process_stdout_fd(p), .events = POLLIN };
	cr_assert_eq(poll(&pf, 1, 2000), 1, "no output after resume");
	/* destroying a paused sandbox works too */
	cr_assert_eq(sbx_sandbox_pause(sb, NULL), 0);
	sbx_process_free(p);
	destroy(sb);
}
