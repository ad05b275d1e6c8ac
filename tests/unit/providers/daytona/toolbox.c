/* SPDX-License-Identifier: MIT */
/* The exec wrapper a Daytona session runs: quoting, env, cwd, user, stdin. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/daytona/daytona_int.h"

/* Runs a wrapper with the host's /bin/sh and returns its stdout. */
static char *run(const char *script)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	static char buf[4096];
	size_t n = 0;
	ssize_t k;
	while ((k = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	close(p[0]);
	waitpid(pid, NULL, 0);
	return buf;
}

Test(daytona_toolbox, quoting)
{
	char *q = sbx__dtn_shq("it's $HOME");
	cr_assert_str_eq(q, "'it'\\''s $HOME'");
	free(q);
}

Test(daytona_toolbox, wrapper_carries_env_cwd_and_argv)
{
	char pidf[] = "/tmp/sbx-dtn-unit-XXXXXX";
	int fd = mkstemp(pidf);
	cr_assert_geq(fd, 0);
	close(fd);
	const char *argv[] = { "/bin/sh", "-c", "printf '%s|%s|%s|' \"$A\" \"$B\" \"$1\"; pwd", "x", "y 'z'", NULL };
	const char *env[] = { "B=exec's", NULL };
	char *senv[] = { (char *)"A=sandbox", (char *)"B=sandbox", NULL };
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.argv = argv;
	o.env = env;
	char *w = sbx__dtn_wrap(&o, NULL, "/tmp", senv, NULL, pidf);
	cr_assert_str_eq(run(w), "sandbox|exec's|y 'z'|/tmp\n");
	free(w);
	o.argv = NULL;
	o.shell = "cat; echo \"[$$]\" >/dev/null";
	o.cwd = "/";
	w = sbx__dtn_wrap(&o, "root", "/tmp", NULL, NULL, pidf);
	cr_assert_str_eq(run(w), "", "stdin is /dev/null without stdin data");
	free(w);
	/* the user who runs the toolbox: no switch (numeric ids are named first) */
	char me[32];
	snprintf(me, sizeof(me), "%d", (int)getuid());
	o.shell = "id -u";
	w = sbx__dtn_wrap(&o, me, "/", NULL, NULL, pidf);
	char want[40];
	snprintf(want, sizeof(want), "%s\n", me);
	cr_assert_str_eq(run(w), want);
	free(w);
	unlink(pidf);
}
