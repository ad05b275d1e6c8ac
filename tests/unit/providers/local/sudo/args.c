/* SPDX-License-Identifier: MIT */
/* The sandbox's sudo command line (src/providers/local/sudo/args.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "providers/local/sudo/args.h"

static int parse(struct sudo_args *a, char *err, const char *const *v)
{
	static char *argv[32];
	int n = 0;
	argv[n++] = (char *)"sudo";
	for (; v[n - 1]; n++)
		argv[n] = (char *)v[n - 1];
	argv[n] = NULL;
	return sudo_args_parse(a, n, argv, err, 256);
}

#define PARSE(a, err, ...) parse(a, err, (const char *const[]){ __VA_ARGS__, NULL })

Test(sudo_args, plain_command_and_options_end_at_the_first_operand)
{
	struct sudo_args a;
	char err[256];
	cr_assert_eq(PARSE(&a, err, "-n", "ls", "-l", "-u", "x"), 0, "%s", err);
	cr_assert_eq(a.mode, SUDO_RUN);
	cr_assert_null(a.user);
	cr_assert_eq(a.n_cmd, 4);
	cr_assert_str_eq(a.cmd[0], "ls");
	cr_assert_str_eq(a.cmd[3], "x");
}

Test(sudo_args, user_group_forms)
{
	struct sudo_args a;
	char err[256];
	cr_assert_eq(PARSE(&a, err, "-u", "nobody", "id"), 0);
	cr_assert_str_eq(a.user, "nobody");
	cr_assert_eq(PARSE(&a, err, "-unobody", "-g#50", "id"), 0);
	cr_assert_str_eq(a.user, "nobody");
	cr_assert_str_eq(a.group, "#50");
	cr_assert_eq(PARSE(&a, err, "--user=#1000", "-Eg", "staff", "--", "-x"), 0, "%s", err);
	cr_assert_str_eq(a.user, "#1000");
	cr_assert_str_eq(a.group, "staff");
	cr_assert_eq(a.preserve_env, 1);
	cr_assert_str_eq(a.cmd[0], "-x");
	cr_assert_eq(PARSE(&a, err, "--user", "root", "true"), 0);
	cr_assert_str_eq(a.user, "root");
}

Test(sudo_args, modes)
{
	struct sudo_args a;
	char err[256];
	cr_assert_eq(PARSE(&a, err, "-i"), 0);
	cr_assert_eq(a.mode, SUDO_LOGIN);
	cr_assert_eq(a.n_cmd, 0);
	cr_assert_eq(PARSE(&a, err, "-s", "echo", "hi"), 0);
	cr_assert_eq(a.mode, SUDO_SHELL);
	cr_assert_eq(a.n_cmd, 2);
	cr_assert_eq(PARSE(&a, err, "-k"), 0);
	cr_assert_eq(a.mode, SUDO_RESET);
	cr_assert_eq(PARSE(&a, err, "-k", "true"), 0);
	cr_assert_eq(a.mode, SUDO_RUN);
	cr_assert_eq(PARSE(&a, err, "-v"), 0);
	cr_assert_eq(a.mode, SUDO_VALIDATE);
	cr_assert_eq(PARSE(&a, err, "--list"), 0);
	cr_assert_eq(a.mode, SUDO_LIST);
	cr_assert_eq(PARSE(&a, err, "-p", "pw:", "-S", "-A", "true"), 0, "%s", err);
	cr_assert_eq(PARSE(&a, err, "--preserve-env=A,B", "-H", "-D", "/tmp", "-b", "true"), 0, "%s", err);
	cr_assert_str_eq(a.preserve_list, "A,B");
	cr_assert_eq(a.preserve_env, 0);
	cr_assert_eq(a.set_home, 1);
	cr_assert_str_eq(a.chdir, "/tmp");
	cr_assert_eq(a.background, 1);
}

Test(sudo_args, env_assignments_before_the_command)
{
	struct sudo_args a;
	char err[256];
	cr_assert_eq(PARSE(&a, err, "A=1", "B=x=y", "env", "C=2"), 0);
	cr_assert_eq(a.n_set, 2);
	cr_assert_str_eq(a.set[1], "B=x=y");
	cr_assert_str_eq(a.cmd[0], "env");
	cr_assert_eq(a.n_cmd, 2);
}

Test(sudo_args, errors_name_the_problem)
{
	struct sudo_args a;
	char err[256];
	cr_assert_eq(PARSE(&a, err, "-x", "true"), -1);
	cr_assert(strstr(err, "invalid option -- 'x'"), "%s", err);
	cr_assert_eq(PARSE(&a, err, "--frobnicate", "true"), -1);
	cr_assert(strstr(err, "unrecognized option '--frobnicate'"), "%s", err);
	cr_assert_eq(PARSE(&a, err, "-u"), -1);
	cr_assert(strstr(err, "requires an argument -- 'u'"), "%s", err);
	cr_assert_eq(PARSE(&a, err, "--login=x"), -1);
	cr_assert(strstr(err, "doesn't allow an argument"), "%s", err);
	cr_assert_eq(PARSE(&a, err, "-n"), -1);
	cr_assert(strstr(err, "no command given"), "%s", err);
}

Test(sudo_args, join_escapes_like_sudo)
{
	char *cmd[] = { (char *)"echo", (char *)"a b", (char *)"$HOME;x", NULL };
	char out[64];
	size_t n = sudo_args_join_escaped(out, sizeof(out), cmd, 3);
	cr_assert_str_eq(out, "echo a\\ b $HOME\\;x");
	cr_assert_eq(n, strlen(out));
	char small[5];
	n = sudo_args_join_escaped(small, sizeof(small), cmd, 3);
	cr_assert_str_eq(small, "echo");
	cr_assert_eq(n, strlen(out));
}
