/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve` end to end (srv_client.h): Connect framing of envd process
 * streams (Start, exit codes, deadlines, envs/cwd/user) and process control
 * (List, Connect, SendInput, SendSignal, Update).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fixtures.h"
#include "srv_client.h"

TestSuite(server, .init = suite_setup, .fini = suite_teardown, .timeout = 900);

Test(server, process_stream)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	/* byte-exact framing of `echo hi` */
	char buf[512];
	struct resp r = envd(&a, "/process.Process/Start", sh_start("echo hi", buf, sizeof(buf), 0), 1, NULL, 0);
	cr_assert_eq(r.status, 200);
	const unsigned char *p = (const unsigned char *)r.body;
	cr_assert_eq(p[0], 0);
	size_t l0 = ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
	cr_assert(strncmp((const char *)p + 5, "{\"event\":{\"start\":{\"pid\":", 25) == 0);
	const char *data = "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}";
	cr_assert_eq(p[5 + l0], 0);
	cr_assert_eq(p[5 + l0 + 4], strlen(data));
	cr_assert(memcmp(p + 5 + l0 + 5, data, strlen(data)) == 0);
	cr_assert(memmem(r.body, r.len, "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}", 58));
	cr_assert(memcmp(r.body + r.len - 7, "\x02\x00\x00\x00\x02{}", 7) == 0, "no end-stream {}");
	free(r.body);
	/* non-zero exit and stderr */
	struct run x = run_cmd(&a, "echo oops >&2; exit 3", NULL);
	cr_assert_eq(x.exit_code, 3);
	cr_assert_str_eq(x.err, "oops\n");
	cr_assert_str_eq(x.error, "");
	/* Connect-Timeout-Ms kills the process */
	double t0 = now_s();
	x = run_cmd(&a, "sleep 30", "Connect-Timeout-Ms: 1000");
	cr_assert_lt(now_s() - t0, 5);
	cr_assert_str_eq(x.error, "deadline_exceeded");
	cr_assert(x.has_end);
	/* envs, cwd, user */
	r = envd(&a, "/process.Process/Start",
		 "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"echo $A:$(pwd):$(id -u)\"],\"envs\":{\"A\":\"1\"},"
		 "\"cwd\":\"/tmp\"},\"stdin\":false}", 1, "Authorization: Basic dXNlcjo=", 0);
	x = parse_run(&r);
	free(r.body);
	cr_assert_str_eq(x.out, "1:/tmp:1000\n");
	/* E2B's default user: the image has `user`, so no user means `user`;
	 * an explicit one wins */
	x = run_cmd(&a, "pwd; id -un", NULL);
	cr_assert_str_eq(x.out, "/home/user\nuser\n");
	r = envd(&a, "/process.Process/Start",
		 "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"pwd; id -un\"]},\"stdin\":false}", 1,
		 "Authorization: Basic cm9vdDo=", 0);
	x = parse_run(&r);
	free(r.body);
	cr_assert_str_eq(x.out, "/root\nroot\n");
	/* a malformed request is an error end-stream */
	r = envd(&a, "/process.Process/Start", "{\"process\":{}}", 1, NULL, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(memmem(r.body, r.len, "invalid_argument", 16));
	free(r.body);
	kill_sb(a.id);
}

Test(server, process_control)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	char buf[512], sel[128];
	/* SendInput + CloseStdin */
	struct bg b = { .sb = &a, .method = "/process.Process/Start",
			.json = sh_start("read x; echo got:$x; cat; echo done", buf, sizeof(buf), 1) };
	pthread_t t;
	pthread_create(&t, NULL, bg_main, &b);
	int pid = wait_pid(&a);
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"aGVsbG8K\"}}", pid);
	struct resp r = envd(&a, "/process.Process/SendInput", sel, 0, NULL, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, "{}");
	free(r.body);
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%d}}", pid);
	r = envd(&a, "/process.Process/CloseStdin", sel, 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	pthread_join(t, NULL);
	struct run x = parse_run(&b.r);
	free(b.r.body);
	cr_assert_str_eq(x.out, "got:hello\ndone\n");
	/* SendSignal SIGKILL ends it; Connect re-attaches */
	struct bg s1 = { .sb = &a, .method = "/process.Process/Start",
			 .json = sh_start("for i in $(seq 100); do echo tick; sleep 0.2; done", buf, sizeof(buf), 0) };
	pthread_create(&t, NULL, bg_main, &s1);
	pid = wait_pid(&a);
	snprintf(sel, sizeof(sel), "{\"process\":{\"pid\":%d}}", pid);
	struct bg s2 = { .sb = &a, .method = "/process.Process/Connect", .json = sel };
	pthread_t t2;
	pthread_create(&t2, NULL, bg_main, &s2);
	usleep(700000);
	char sig[160];
	snprintf(sig, sizeof(sig), "{\"process\":{\"pid\":%d},\"signal\":\"SIGNAL_SIGKILL\"}", pid);
	r = envd(&a, "/process.Process/SendSignal", sig, 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	x = parse_run(&s1.r);
	cr_assert(x.has_end && x.exit_code == -1, "killed: exit %d", x.exit_code);
	struct run y = parse_run(&s2.r);
	cr_assert_eq(y.pid, pid);
	cr_assert(y.has_end && strstr(y.out, "tick"), "re-attached stream: %s", y.out);
	free(s1.r.body);
	free(s2.r.body);
	r = envd(&a, "/process.Process/SendSignal", sig, 0, NULL, 0);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"not_found\""));
	free(r.body);
	r = envd(&a, "/process.Process/List", "{}", 0, NULL, 0);
	cr_assert_str_eq(r.body, "{\"processes\":[]}");
	free(r.body);
	kill_sb(a.id);
}
