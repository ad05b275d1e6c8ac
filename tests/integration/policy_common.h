/* SPDX-License-Identifier: MIT */
/*
 * Shared by the policy agent's integration tests: the scripted fake model
 * server (tests/fakes/openai_server.py, on loopback, Debian's python3), a
 * private tasks directory made from the busybox fixtures, a runtime whose
 * log is captured (to prove the key never reaches it), and an episode run
 * by the `policy` agent with agent_args.
 */
#ifndef SBX_TEST_POLICY_COMMON_H
#define SBX_TEST_POLICY_COMMON_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/sbx.h>
#include <sbx/task.h>

#include "fixtures.h"

#define FAKE_KEY "sk-fake-0123456789-POLICY-TEST-KEY-zq7"
#define PY "/usr/bin/python3"
/* each test file uses some of these */
#define HELPER static __attribute__((unused))

static sbx_runtime *rt;
static pid_t srv_pid;
static int srv_port;
static char tmp[256];        /* this test's directory */
static char tasks_dir[512];  /* private tasks: unique instructions per task */
static char key_file[512];
static char record_path[512];
static char *log_text;       /* everything the library logged */
static size_t log_len;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

HELPER void on_log(sbx_log_level lvl, const char *msg, void *payload)
{
	(void)lvl, (void)payload;
	pthread_mutex_lock(&log_lock);
	size_t n = strlen(msg);
	char *p = realloc(log_text, log_len + n + 2); /* checksrc: allow (test) */
	if (p) {
		memcpy(p + log_len, msg, n);
		p[log_len + n] = '\n';
		p[log_len + n + 1] = 0;
		log_len += n + 1;
		log_text = p;
	}
	pthread_mutex_unlock(&log_lock);
}

HELPER int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd); /* checksrc: allow (test: set-up commands) */
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A copy of the `pass` fixture named `name` with its own instruction (the
 * fake finds a task by it) and, when given, its own test.sh. */
HELPER void make_task(const char *name, const char *instruction, const char *test_sh)
{
	const char *src = getenv("SBX_SOURCE_ROOT");
	cr_assert_eq(sh("cp -a '%s/tests/fixtures/tasks/pass' '%s/%s' && printf '%%s\\n' '%s' > "
			"'%s/%s/instruction.md'", src, tasks_dir, name, instruction, tasks_dir, name),
		     0);
	if (test_sh)
		cr_assert_eq(sh("printf '%%s\\n' '%s' > '%s/%s/tests/test.sh'", test_sh, tasks_dir,
				name), 0);
}

HELPER void srv_start(double slow_s)
{
	char port_file[512], slow[32];
	snprintf(port_file, sizeof(port_file), "%s/port", tmp);
	snprintf(slow, sizeof(slow), "%g", slow_s);
	char script[512];
	snprintf(script, sizeof(script), "%s/tests/fakes/openai_server.py", getenv("SBX_SOURCE_ROOT"));
	srv_pid = fork();
	cr_assert_geq(srv_pid, 0);
	if (srv_pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0)
			dup2(fd, 1);
		execl(PY, PY, script, "--tasks-dir", tasks_dir, "--port-file", port_file, "--record",
		      record_path, "--slow-seconds", slow, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		FILE *f = fopen(port_file, "r");
		if (f) {
			int ok = fscanf(f, "%d", &srv_port) == 1;
			fclose(f);
			if (ok)
				return;
		}
		usleep(50 * 1000);
	}
	cr_assert_fail("the fake model server did not start");
}

HELPER void policy_setup(double slow_s)
{
	sbx_test_require_root();
	if (access(PY, X_OK) != 0)
		sbx_test_skip("%s is missing", PY);
	snprintf(tmp, sizeof(tmp), "%s/test-state/policy-%d", getenv("SBX_BUILD_ROOT"),
		 (int)getpid());
	snprintf(tasks_dir, sizeof(tasks_dir), "%s/tasks", tmp);
	snprintf(key_file, sizeof(key_file), "%s/key", tmp);
	snprintf(record_path, sizeof(record_path), "%s/requests.jsonl", tmp);
	cr_assert_eq(sh("rm -rf '%s' && mkdir -p '%s' && printf '%%s\\n' '%s' > '%s' && chmod 600 '%s'",
			tmp, tasks_dir, FAKE_KEY, key_file, key_file), 0);
	make_task("pass", "Write hello to /tmp/answer.", NULL);
	make_task("marker", "Do not touch the marker.",
		  "#!/bin/sh\nif [ -e /tmp/length-marker ]; then echo 0; else echo 1; fi > "
		  "/logs/verifier/reward.txt");
	char state[512], images[512];
	snprintf(state, sizeof(state), "%s/state", tmp);
	snprintf(images, sizeof(images), "%s/test-images", getenv("SBX_BUILD_ROOT"));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	o.log = on_log;
	o.log_level = SBX_LOG_DEBUG;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	sbx_test_busybox_image(rt);
	srv_start(slow_s);
}

HELPER void policy_teardown(void)
{
	if (srv_pid > 0) {
		kill(srv_pid, SIGTERM);
		waitpid(srv_pid, NULL, 0);
		srv_pid = 0;
	}
	sbx_runtime_free(rt);
	rt = NULL;
	if (!getenv("SBX_KEEP_TMP"))
		sh("rm -rf '%s'", tmp);
	free(log_text);
	log_text = NULL;
	log_len = 0;
}

HELPER sbx_task *load_task(const char *name)
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/%s", tasks_dir, name);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, &err), 0, "load %s: %s", dir, err ? err->msg : "?");
	return t;
}

/* Runs `task` with the policy agent and the fake `model`; extra agent args
 * (NULL-terminated) after the base, model and key file. */
HELPER sbx_episode_result play_opts(const char *task, const char *model, double max_s,
				    const char *const *extra)
{
	char base[128], m[128], key[600];
	snprintf(base, sizeof(base), "api_base=http://127.0.0.1:%d/v1", srv_port);
	snprintf(m, sizeof(m), "model=%s", model);
	snprintf(key, sizeof(key), "api_key_file=%s", key_file);
	const char *args[24] = { base, m, key };
	size_t n = 3;
	for (size_t i = 0; extra && extra[i] && n < 23; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent = "policy";
	o.agent_args = args;
	o.max_episode_s = max_s;
	sbx_task *t = load_task(task);
	sbx_episode_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_episode_run(&r, rt, t, &o, &err), 0, "%s", err ? err->msg : "?");
	sbx_task_free(t);
	return r;
}

HELPER sbx_episode_result play(const char *task, const char *model, const char *const *extra)
{
	return play_opts(task, model, 0, extra);
}

/* The parsed trajectory and metrics of a result (owned). */
HELPER json_t *traj(const sbx_episode_result *r)
{
	cr_assert_not_null(r->trajectory_json, "%s: no trajectory", r->task);
	json_t *j = json_loads(r->trajectory_json, 0, NULL);
	cr_assert(json_is_object(j), "%s", r->trajectory_json);
	return j;
}

HELPER json_t *metrics(const sbx_episode_result *r)
{
	cr_assert_not_null(r->agent_metrics_json);
	json_t *j = json_loads(r->agent_metrics_json, 0, NULL);
	cr_assert(json_is_object(j), "%s", r->agent_metrics_json);
	return j;
}

HELPER long mint(json_t *m, const char *k)
{
	return (long)json_integer_value(json_object_get(m, k));
}

HELPER void expect_end(const sbx_episode_result *r, sbx_episode_status st, const char *reason)
{
	cr_assert_eq(r->status, st, "%s: status %s (detail: %s)", r->task,
		     sbx_episode_status_name(r->status), r->detail ? r->detail : "-");
	cr_assert_not_null(r->end_reason);
	cr_assert_str_eq(r->end_reason, reason, "detail: %s", r->detail ? r->detail : "-");
}

/* Sandboxes of this test's runtime (its state dir is its own). */
HELPER size_t sandboxes(void)
{
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, NULL, NULL), 0);
	sbx_sandbox_info_free(v, n);
	return n;
}

/* The recorded requests, as a JSON array (owned). */
HELPER json_t *requests(void)
{
	json_t *a = json_array();
	FILE *f = fopen(record_path, "r");
	if (!f)
		return a;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0)
		json_array_append_new(a, json_loads(line, 0, NULL));
	free(line);
	fclose(f);
	return a;
}

#endif
