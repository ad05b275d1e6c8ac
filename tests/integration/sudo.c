/* SPDX-License-Identifier: MIT */
/*
 * Passwordless sudo in local sandboxes (docs/security.md, "sudo"): the
 * broker runs commands as the sandbox's root for its users when the label
 * sbx.sudo=nopasswd (spec or image) allows it, the elevated process stays
 * as confined as any command, and hostile clients leave init responsive.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

TestSuite(sudo, .init = setup, .fini = teardown, .timeout = 300);

static sbx_sandbox *make(const char *label)
{
	const char *labels[] = { label, NULL };
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.labels = label ? labels : NULL;
	return sbx_test_sandbox(rt, &o);
}

/* Runs cmd with /bin/sh -c as `user`; returns stdout (owned); stderr in *errout. */
static char *run_as(sbx_sandbox *sb, const char *user, const char *cmd, const char *in, int *code, char **errout)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	o.user = user;
	o.stdin_data = in;
	o.stdin_len = in ? strlen(in) : 0;
	o.timeout_s = 60;
	sbx_exec_result res;
	sbx_error *err = NULL;
	int r = sbx_sandbox_exec(&res, sb, &o, &err);
	cr_assert_eq(r, 0, "exec '%s' as %s: %s", cmd, user, err ? err->msg : "?");
	*code = res.exit_code;
	char *out = res.out ? res.out : strdup("");
	res.out = NULL;
	if (errout) {
		*errout = res.err ? res.err : strdup("");
		res.err = NULL;
	}
	sbx_exec_result_free(&res);
	return out;
}

static void expect(sbx_sandbox *sb, const char *cmd, int want_code, const char *want_out)
{
	int code;
	char *e = NULL;
	char *out = run_as(sb, "1000", cmd, NULL, &code, &e);
	cr_expect_eq(code, want_code, "'%s': exit %d, want %d (stdout '%s', stderr '%s')", cmd, code, want_code, out,
		     e);
	if (want_out)
		cr_expect_str_eq(out, want_out, "'%s': stdout '%s', want '%s' (stderr '%s')", cmd, out, want_out, e);
	free(out);
	free(e);
}

Test(sudo, common_forms_run_as_root)
{
	sbx_sandbox *sb = make("sbx.sudo=nopasswd");
	expect(sb, "id -u", 0, "1000\n");
	expect(sb, "sudo id -u", 0, "0\n");
	expect(sb, "sudo -n true", 0, "");
	expect(sb, "sudo -u nobody id -u", 0, "65534\n");
	expect(sb, "sudo -u '#1000' id -u", 0, "1000\n");
	expect(sb, "sudo -g staff id -g", 0, "50\n");
	expect(sb, "sudo sh -c 'echo x > /root/f' && sudo cat /root/f", 0, "x\n");
	expect(sb, "sudo whoami", 0, "root\n");
	/* the environment: reset, HOME/USER of the target, -E keeps, VAR=v sets */
	expect(sb, "sudo sh -c 'echo $HOME $USER $SUDO_USER $SUDO_UID'", 0, "/root root user 1000\n");
	expect(sb, "FOO=bar sudo sh -c 'echo ${FOO:-unset}'", 0, "unset\n");
	expect(sb, "FOO=bar sudo -E sh -c 'echo $FOO'", 0, "bar\n");
	expect(sb, "sudo FOO=baz sh -c 'echo $FOO'", 0, "baz\n");
	/* cwd is the caller's; -i is the target's login shell in its home */
	expect(sb, "cd /tmp && sudo pwd", 0, "/tmp\n");
	expect(sb, "sudo -i pwd", 0, "/root\n");
	expect(sb, "sudo -s -- echo 'a b'", 0, "a b\n");
	expect(sb, "sudo -i sh -c 'id -u'", 0, "0\n");
	expect(sb, "sudo -v && sudo -k && echo ok", 0, "ok\n");
	/* a signal sent to sudo reaches the command (its process group) */
	expect(sb, "rm -f /tmp/ready; sudo sh -c 'trap \"echo got; exit 3\" TERM; touch /tmp/ready; "
		   "while :; do sleep 0.05; done' & p=$!; while [ ! -e /tmp/ready ]; do sleep 0.05; done; "
		   "kill -TERM $p; wait $p; echo $?", 0, "got\n3\n");
	/* exit status and signals pass through */
	expect(sb, "sudo sh -c 'exit 7'", 7, "");
	expect(sb, "sudo sh -c 'kill -TERM $$'; echo $?", 0, "143\n");
	/* errors, like sudo's */
	expect(sb, "sudo no-such-command 2>&1", 1, "sudo: no-such-command: command not found\n");
	expect(sb, "sudo -u no-such-user true 2>&1", 1, "sudo: unknown user no-such-user\n");
	expect(sb, "sudo -x true 2>/dev/null", 1, "");
	expect(sb, "sudo 2>/dev/null", 1, "");
	destroy(sb);
}

Test(sudo, stdio_passes_through)
{
	sbx_sandbox *sb = make("sbx.sudo=nopasswd");
	int code;
	char *e = NULL;
	char *out = run_as(sb, "1000", "sudo sh -c 'tr a-z A-Z; echo to-err >&2'", "hello\n", &code, &e);
	cr_expect_eq(code, 0);
	cr_expect_str_eq(out, "HELLO\n");
	cr_expect_str_eq(e, "to-err\n");
	free(out);
	free(e);
	/* a file descriptor of the caller's is the command's (same file, same offset) */
	out = run_as(sb, "1000", "echo a > /tmp/o; sudo sh -c 'echo b' >> /tmp/o; cat /tmp/o", NULL, &code, NULL);
	cr_expect_str_eq(out, "a\nb\n");
	free(out);
	destroy(sb);
}

/* An image built FROM busybox with a stand-in for the image's own
 * /usr/bin/sudo (busybox, as it would be after sbx stripped sudo's set-uid
 * bit) and, when `label`, that LABEL. */
static char *build_from(const char *slug, const char *dockerfile);

static char *build_image(const char *slug, const char *label)
{
	char df[512];
	snprintf(df, sizeof(df), "FROM busybox\nRUN cp /bin/busybox /usr/bin/sudo\n%s%s\n", label ? "LABEL " : "",
		 label ? label : "");
	return build_from(slug, df);
}

static char *build_from(const char *slug, const char *dockerfile)
{
	char ctx[512], p[600];
	const char *b = getenv("SBX_BUILD_ROOT");
	snprintf(ctx, sizeof(ctx), "%s/test-sudo-ctx.%d.%s", b && *b ? b : "/tmp", (int)getpid(), slug);
	mkdir(ctx, 0755);
	snprintf(p, sizeof(p), "%s/Dockerfile", ctx);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(dockerfile, f);
	fclose(f);
	sbx_build_opts o = SBX_BUILD_OPTS_INIT;
	o.context_dir = ctx;
	o.slug = slug;
	o.network = SBX_NETWORK_NONE;
	o.network_set = 1;
	sbx_build_result res;
	memset(&res, 0, sizeof(res));
	sbx_error *err = NULL;
	int r = sbx_template_build(&res, rt, &o, &err);
	cr_assert_eq(r, 0, "build %s: %s", slug, err ? err->msg : "?");
	unlink(p);
	rmdir(ctx);
	char *alias = strdup(res.alias);
	sbx_build_result_free(&res);
	return alias;
}

static sbx_sandbox *make_from(const char *image, const char *label)
{
	const char *labels[] = { label, NULL };
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = image;
	o.labels = label ? labels : NULL;
	return sbx_test_sandbox(rt, &o);
}

Test(sudo, policy_off_leaves_the_image_alone)
{
	/* busybox has no sudo: with the policy off nothing is installed */
	sbx_sandbox *sb = make("sbx.sudo=off");
	expect(sb, "command -v sudo || echo none; test -e /dev/sbx || echo no-broker", 0, "none\nno-broker\n");
	destroy(sb);

	/* An image that ships sudo, without the label: its sudo stays as it
	 * is (no mount point a root `apt-get upgrade` of sudo would trip on),
	 * and it cannot elevate: user 1000 stays out of root's files. */
	char *img = build_image("sudo-off", NULL);
	sb = make_from(img, NULL);
	int code;
	char *out = run_as(sb, "1000", "sudo id -u", NULL, &code, NULL);
	cr_expect_neq(code, 0, "sudo without the policy: exit 0, stdout %s", out);
	cr_expect(strcmp(out, "0\n") != 0, "sudo without the policy ran as root");
	free(out);
	expect(sb, "touch /root/x 2>/dev/null || echo denied; test -e /dev/sbx || echo no-broker", 0,
	       "denied\nno-broker\n");
	out = run_as(sb, "root", "grep -c ' /usr/bin/sudo ' /proc/self/mountinfo", NULL, &code, NULL);
	cr_expect_str_eq(out, "0\n");
	free(out);
	destroy(sb);

	/* The spec's label turns it on for that image: the image's sudo is
	 * covered read-only and nosuid, not replaced. */
	sb = make_from(img, "sbx.sudo=nopasswd");
	expect(sb, "sudo id -u", 0, "0\n");
	out = run_as(sb, "root", "grep -c ' /usr/bin/sudo .*ro,nosuid,nodev' /proc/self/mountinfo; "
			 "echo > /usr/bin/sudo 2>/dev/null || echo read-only", NULL, &code, NULL);
	cr_expect_str_eq(out, "1\nread-only\n");
	free(out);
	destroy(sb);
	free(img);
}

Test(sudo, image_label_turns_it_on)
{
	char *img = build_image("sudo-on", "sbx.sudo=nopasswd");
	sbx_sandbox *sb = make_from(img, NULL);
	expect(sb, "sudo id -u && /usr/bin/sudo whoami", 0, "0\nroot\n");
	destroy(sb);
	/* A build FROM it inherits the label: its RUN steps use sudo, and
	 * the image's own /usr/bin/sudo is what the layers keep. */
	char df[512];
	snprintf(df, sizeof(df), "FROM %s\nUSER user\nRUN sudo id -u > /tmp/who && sudo touch /root/built\n", img);
	char *child = build_from("sudo-child", df);
	sbx_sandbox *c = make_from(child, "sbx.sudo=off");
	int code;
	char *out = sbx_test_sh(c, "cat /tmp/who; ls /root; cmp -s /usr/bin/sudo /bin/busybox && echo own-sudo", &code);
	cr_expect_str_eq(out, "0\nbuilt\nown-sudo\n");
	free(out);
	destroy(c);
	free(child);
	/* the spec's sbx.sudo=off wins: the image's own (powerless) sudo */
	sb = make_from(img, "sbx.sudo=off");
	expect(sb, "sudo id -u 2>/dev/null || echo refused; test -e /dev/sbx || echo no-broker", 0,
	       "refused\nno-broker\n");
	destroy(sb);
	free(img);
}

/* The elevated process is a command like any other of the sandbox's root:
 * same capabilities, no_new_privs, seccomp, cgroup and namespaces. */
Test(sudo, elevated_command_stays_confined)
{
	sbx_sandbox *sb = make("sbx.sudo=nopasswd");
	const char *probe = "grep -E '^(NoNewPrivs|Seccomp|CapBnd|CapEff|CapPrm|CapAmb):' /proc/self/status; "
			    "cat /proc/self/cgroup; readlink /proc/self/ns/pid /proc/self/ns/mnt /proc/self/ns/net "
			    "/proc/self/ns/user; hostname";
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = probe;
	o.user = "root";
	sbx_exec_result res;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&res, sb, &o, &err), 0);
	char want[4096];
	snprintf(want, sizeof(want), "%s", res.out);
	sbx_exec_result_free(&res);
	cr_assert(strstr(want, "NoNewPrivs:\t1"), "%s", want);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "sudo sh -c \"%s\"", probe);
	o.shell = cmd;
	o.user = "1000";
	cr_assert_eq(sbx_sandbox_exec(&res, sb, &o, &err), 0);
	cr_expect_eq(res.exit_code, 0);
	cr_expect_str_eq(res.out, want);
	sbx_exec_result_free(&res);
	/* and sees no more of the host than root inside does */
	expect(sb, "sudo sh -c 'ls /proc | grep -c \"^[0-9]\" | awk \"{print (\\$1 < 20)}\"'", 0, "1\n");
	destroy(sb);
}

static void upload_client(sbx_sandbox *sb)
{
	const char *p = getenv("SBX_SUDO_CLIENT");
	cr_assert_not_null(p, "SBX_SUDO_CLIENT not set");
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_upload(sb, p, "/client", &err), 0, "upload: %s", err ? err->msg : "?");
}

/* init answers, and sudo still works. */
static void alive(sbx_sandbox *sb)
{
	int code;
	char *out = sbx_test_sh(sb, "echo alive", &code);
	cr_assert_str_eq(out, "alive\n");
	free(out);
	expect(sb, "sudo id -u", 0, "0\n");
}

Test(sudo, hostile_clients_leave_init_responsive)
{
	{
		sbx_sandbox *sb = make("sbx.sudo=nopasswd");
		upload_client(sb);
		int code;
		char *e = NULL;
		char *out = run_as(sb, "1000", "/client garbage", NULL, &code, &e);
		cr_expect(strstr(out, "malformed request"), "garbage: %s %s", out, e);
		free(out);
		free(e);
		alive(sb);
		out = run_as(sb, "1000", "/client huge", NULL, &code, &e);
		cr_expect(strstr(out, "malformed request") || strstr(out, "eof") || strstr(out, "Message too long"),
			  "huge: %s %s", out, e);
		free(out);
		free(e);
		alive(sb);
		out = run_as(sb, "1000", "/client nofds", NULL, &code, NULL);
		cr_expect(strstr(out, "got 0 fds"), "nofds: %s", out);
		free(out);
		alive(sb);
		out = run_as(sb, "1000", "/client silent 200", NULL, &code, NULL);
		cr_expect_str_eq(out, "opened 200\n");
		free(out);
		alive(sb);
		/* A pipe whose mutex a process inside holds, left to the
		 * broker to close last: only that handler waits on it. */
		out = run_as(sb, "1000", "/client pipelock", NULL, &code, NULL);
		cr_expect(strstr(out, "no-such-user"), "pipelock: %s", out);
		free(out);
		alive(sb);
		/* A client that leaves takes its command with it. */
		out = run_as(sb, "1000", "/client leave 'sleep 1000'", NULL, &code, NULL);
		cr_expect_str_eq(out, "left\n");
		free(out);
		int gone = 0;
		for (int i = 0; i < 100 && !gone; i++) {
			out = sbx_test_sh(sb, "ps -o args | grep -c '^sleep 1000'", &code);
			gone = strcmp(out, "0\n") == 0;
			free(out);
			if (!gone)
				usleep(50000);
		}
		cr_expect(gone, "the command of a client that left still runs");
		alive(sb);
		destroy(sb);
	}
}

/* An exec's timeout ends its sudo'd command too (the client leaves). */
Test(sudo, exec_timeout_ends_the_elevated_command)
{
	sbx_sandbox *sb = make("sbx.sudo=nopasswd");
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "sudo sleep 1000";
	o.user = "1000";
	o.timeout_s = 1;
	sbx_exec_result res;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&res, sb, &o, &err), 0);
	cr_expect_eq(res.timed_out, 1);
	sbx_exec_result_free(&res);
	int gone = 0, code;
	for (int i = 0; i < 100 && !gone; i++) {
		char *out = sbx_test_sh(sb, "ps -o args | grep -c '^sleep 1000'", &code);
		gone = strcmp(out, "0\n") == 0;
		free(out);
		if (!gone)
			usleep(50000);
	}
	cr_expect(gone, "sleep 1000 outlived the timed-out exec that ran it with sudo");
	destroy(sb);
}

Test(sudo, bad_label_value_is_a_clear_error)
{
	const char *labels[] = { "sbx.sudo=yes", NULL };
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.labels = labels;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, rt, &o, &err);
	cr_assert_eq(r, -EINVAL, "create with sbx.sudo=yes: %d", r);
	cr_expect(strstr(err->msg, "sbx.sudo") && strstr(err->msg, "nopasswd"), "error: %s", err->msg);
	sbx_error_free(err);
}
