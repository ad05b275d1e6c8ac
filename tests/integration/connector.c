/* SPDX-License-Identifier: MIT */
/*
 * The connector and agent seams end to end on the local provider: a
 * connector and an agent registered by this test (not Harbor's) run whole
 * episodes on busybox through the generic driver: the nop and oracle agents
 * on a foreign task format, steps bounded by their own timeout, the agent
 * limit and the episode clock, end reasons and metrics in the record, the
 * connector's record fields, kept logs, and steps refused outside the agent
 * phase, and the CLI resolving connector and agent names through the
 * registries.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/sys/connector.h>
#include <sbx/task.h>

#include "common.h"

/* ---- a connector of the test's own: a "probe task" directory ---- */

static int step_in_verify_rc = 1;

static int pt_probe(const char *dir)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/probe-task", dir);
	return access(p, F_OK) == 0;
}

static int pt_load(sbx_task *t, const char *dir, sbx_error **err)
{
	(void)err;
	t->dir = strdup(dir);
	t->name = strdup(strrchr(dir, '/') + 1);
	t->instruction = strdup("write 1 to /tmp/answer");
	t->docker_image = strdup("busybox");
	t->os = strdup("linux");
	t->network_mode = strdup("no-network");
	t->env = calloc(2, sizeof(char *));
	t->env[0] = strdup("PROBE_ENV=from-spec");
	t->verifier_env = calloc(1, sizeof(char *));
	t->solution_env = calloc(1, sizeof(char *));
	return 0;
}

static int pt_spec(sbx_sandbox_opts *so, const sbx_task *t, sbx_error **err)
{
	(void)err;
	so->network = SBX_NETWORK_NONE;
	so->env = (const char *const *)t->env;
	return 0;
}

static int pt_prepare(sbx_episode *ep, sbx_error **err)
{
	return sbx_episode_root_sh(ep, "mkdir -p /work/logs && chmod 777 /work/logs && "
				   "echo prepared > /work/logs/prepared", err);
}

static int pt_inputs(sbx_agent_inputs *in, const sbx_task *t, sbx_error **err)
{
	(void)err;
	in->instruction = strdup(t->instruction);
	in->logs_dir = strdup("/work/logs");
	char *p = NULL;
	cr_assert(asprintf(&p, "%s/sol", t->dir) > 0);
	in->solution_dir = p;
	in->solution_dest = strdup("/sol");
	in->solution_entry = strdup("/sol/run.sh");
	return 0;
}

/* The reward is what /tmp/answer holds (0 when absent); the verifier also
 * checks that prepare() ran and the spec's env reached the sandbox. */
static int pt_verify(sbx_episode *ep, sbx_verdict *v, sbx_error **err)
{
	sbx_exec_result x;
	sbx_episode_limit limit;
	sbx_step_opts so = SBX_STEP_OPTS_INIT;
	so.command = "true";
	step_in_verify_rc = sbx_episode_step(&x, &limit, ep, &so, NULL);
	sbx_exec_result_free(&x);
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = "test -f /work/logs/prepared && test \"$PROBE_ENV\" = from-spec && "
		  "{ cat /tmp/answer 2>/dev/null || echo 0; }";
	o.timeout_s = 30;
	int r = sbx_episode_exec(&x, &limit, ep, &o, err);
	if (r < 0)
		return r;
	v->ran = 1;
	v->exit_code = x.exit_code;
	v->log_path = strdup("/work/logs/prepared");
	if (x.exit_code != 0) {
		v->kind = SBX_VERDICT_NO_REWARD;
		v->detail = strdup("prepare() or the spec's env missing");
	} else {
		v->kind = SBX_VERDICT_REWARD;
		v->reward = strtod(x.out, NULL);
		v->source = strdup("answer");
	}
	sbx_exec_result_free(&x);
	return 0;
}

static char *pt_record(sbx_episode *ep)
{
	(void)ep;
	return strdup("{\"probe_connector\":true,\"task\":\"not-overridden\"}");
}

static const char *const pt_logs[] = { "/work/logs", NULL };

static const sbx_connector_ops probe_connector = {
	.version = SBX_CONNECTOR_OPS_VERSION, .name = "probe-task", .probe = pt_probe,
	.load = pt_load, .sandbox_spec = pt_spec, .prepare = pt_prepare,
	.agent_inputs = pt_inputs, .verify = pt_verify, .log_dirs = pt_logs, .record = pt_record,
};

/* ---- an agent of the test's own, scripted per test ---- */

static enum { WRITE, SLEEP, FAIL } script;
static sbx_episode_limit limits[3];

static int scripted_run(sbx_episode *ep, sbx_agent_outcome *out, sbx_error **err)
{
	if (script == FAIL)
		return sbx_error_set(err, -EIO, "failing on purpose");
	const char *cmds[3] = { "sleep 5", "echo 1 > /tmp/answer", "echo done" };
	double timeouts[3] = { 0.3, 0, 0 };
	if (script == SLEEP) {
		cmds[0] = "sleep 30";
		timeouts[0] = 0;
	}
	for (int i = 0; i < 3; i++) {
		sbx_step_opts so = SBX_STEP_OPTS_INIT;
		so.command = cmds[i];
		so.timeout_s = timeouts[i];
		sbx_exec_result x;
		int r = sbx_episode_step(&x, &limits[i], ep, &so, err);
		if (r < 0)
			return r;
		out->exit_code = x.exit_code;
		sbx_exec_result_free(&x);
		if (script == SLEEP)
			break;
	}
	out->end_reason = strdup(script == SLEEP ? "timeout" : "task_complete");
	out->metrics_json = strdup("{\"turns\":3}");
	out->detail = strdup("scripted");
	return 0;
}

static const sbx_agent_ops scripted_agent = {
	.version = SBX_AGENT_OPS_VERSION, .name = "scripted", .run = scripted_run,
};

/* ---- fixtures ---- */

static char tasks_dir[] = "/tmp/sbx-connector-test.XXXXXX";

static void make_task(const char *name)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s/sol", tasks_dir, name);
	char *cmd = NULL;
	cr_assert(asprintf(&cmd, "mkdir -p '%s' && touch '%s/../probe-task' && "
			   "printf '#!/bin/sh\\necho solved\\necho 1 > /tmp/answer\\n' > '%s/run.sh'",
			   p, p, p) > 0);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

static void init(void)
{
	setup();
	sbx_error *err = NULL;
	cr_assert_eq(sbx_connector_register(&probe_connector, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_agent_register(&scripted_agent, &err), 0, "%s", err ? err->msg : "");
	cr_assert_not_null(mkdtemp(tasks_dir));
	make_task("one");
}

static void fini(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tasks_dir);
	cr_assert_eq(system(cmd), 0);
	teardown();
}

TestSuite(connector, .init = init, .fini = fini, .timeout = 300);

static sbx_episode_result run_with(const char *agent, sbx_episode_opts *o)
{
	char dir[700];
	snprintf(dir, sizeof(dir), "%s/one", tasks_dir);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_load(&t, dir, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(t->connector, &probe_connector, "the registered connector claims it");
	o->agent = agent;
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_run(&r, rt, t, o, &err), 0, "%s", err ? err->msg : "");
	sbx_task_free(t);
	return r;
}

static void expect(const sbx_episode_result *r, sbx_episode_status st)
{
	cr_assert_eq(r->status, st, "status %s, want %s (detail: %s)",
		     sbx_episode_status_name(r->status), sbx_episode_status_name(st),
		     r->detail ? r->detail : "-");
}

Test(connector, nop_agent_end_to_end_on_a_foreign_format)
{
	char logs[700];
	snprintf(logs, sizeof(logs), "%s/kept", tasks_dir);
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.logs_dir = logs;
	sbx_episode_result r = run_with("nop", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_str_eq(r.agent, "nop");
	cr_assert_eq(r.has_reward, 1);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	cr_assert_str_eq(r.reward_source, "answer");
	cr_assert_str_eq(r.image_how, "prebuilt");
	cr_assert_eq(r.verifier_ran, 1);
	cr_assert_eq(r.agent_exit_code, -1);
	cr_assert_null(r.end_reason);
	cr_assert_not_null(r.verifier_log_tail);
	cr_assert_str_eq(r.verifier_log_tail, "prepared\n");
	cr_assert_neq(step_in_verify_rc, 0, "a step outside the agent phase must be refused");
	char p[800];
	snprintf(p, sizeof(p), "%s/logs/prepared", logs);
	cr_assert_eq(access(p, F_OK), 0, "%s: the connector's log dir was not kept", p);
	char *j = sbx_episode_result_to_json(&r);
	json_t *o2 = json_loads(j, 0, NULL);
	cr_assert_not_null(o2, "%s", j);
	cr_assert(json_is_true(json_object_get(o2, "probe_connector")), "%s", j);
	cr_assert_str_eq(json_string_value(json_object_get(o2, "task")), "one", "%s", j);
	cr_assert_null(json_object_get(o2, "end_reason"), "%s", j);
	json_decref(o2);
	free(j);
	sbx_episode_result_free(&r);
}

Test(connector, oracle_replays_the_connectors_solution)
{
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	sbx_episode_result r = run_with("golden", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_str_eq(r.agent, "oracle");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_eq(r.agent_exit_code, 0);
	cr_assert_not_null(r.agent_log_tail);
	cr_assert_str_eq(r.agent_log_tail, "solved\n", "the oracle's log is in the connector's "
			 "logs_dir");
	sbx_episode_result_free(&r);
}

Test(connector, steps_end_reason_and_metrics)
{
	script = WRITE;
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	sbx_episode_result r = run_with("scripted", &o);
	expect(&r, SBX_EPISODE_SUBMITTED);
	cr_assert_eq(limits[0], SBX_LIMIT_COMMAND, "sleep 5 with a 0.3 s timeout");
	cr_assert_eq(limits[1], SBX_LIMIT_NONE);
	cr_assert_eq(r.agent_timed_out, 0, "a command's own timeout is not the agent's");
	cr_assert_float_eq(r.reward, 1.0, 1e-9);
	cr_assert_eq(r.agent_exit_code, 0);
	cr_assert_str_eq(r.end_reason, "task_complete");
	char *j = sbx_episode_result_to_json(&r);
	json_t *o2 = json_loads(j, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(o2, "end_reason")), "task_complete");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(o2, "agent_metrics"),
							"turns")), 3, "%s", j);
	json_decref(o2);
	free(j);
	sbx_episode_result_free(&r);
}

Test(connector, agent_limit_cuts_a_step_and_the_verifier_still_runs)
{
	script = SLEEP;
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent_timeout_s = 1;
	sbx_episode_result r = run_with("scripted", &o);
	expect(&r, SBX_EPISODE_TIME_LIMIT);
	cr_assert_eq(limits[0], SBX_LIMIT_AGENT);
	cr_assert_eq(r.agent_timed_out, 1);
	cr_assert_eq(r.verifier_ran, 1);
	cr_assert_eq(r.has_reward, 1);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	cr_assert_not_null(strstr(r.detail, "agent timed out after 1 s"), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(connector, episode_clock_cuts_a_step_and_skips_the_verifier)
{
	script = SLEEP;
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.max_episode_s = 5;
	sbx_episode_result r = run_with("scripted", &o);
	expect(&r, SBX_EPISODE_TIME_LIMIT);
	cr_assert_eq(limits[0], SBX_LIMIT_EPISODE);
	cr_assert_eq(r.verifier_ran, 0);
	cr_assert_float_eq(r.reward, 0.0, 1e-9);
	cr_assert_not_null(strstr(r.detail, "wall clock"), "%s", r.detail);
	sbx_episode_result_free(&r);
}

Test(connector, failing_agent_is_agent_error)
{
	script = FAIL;
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	sbx_episode_result r = run_with("scripted", &o);
	expect(&r, SBX_EPISODE_AGENT_ERROR);
	cr_assert_str_eq(r.detail, "scripted: failing on purpose");
	cr_assert_eq(r.verifier_ran, 0);
	cr_assert_eq(r.has_reward, 0);
	cr_assert_not_null(r.sandbox_id);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	const char *filter[] = { "sbx.agent=scripted", NULL };
	cr_assert_eq(sbx_sandbox_list(&v, &n, rt, NULL, filter, NULL), 0);
	cr_assert_eq(n, 0, "%zu episode sandboxes left", n);
	sbx_sandbox_info_free(v, n);
	sbx_episode_result_free(&r);
}

/* ---- the CLI resolves names through the registries ---- */

static int sbx_cli(char **out, const char *args)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	const char *src = getenv("SBX_SOURCE_ROOT");
	cr_assert(b && src);
	char *cmd = NULL;
	cr_assert(asprintf(&cmd, "cd '%s' && SBX_STATE_DIR='%s' SBX_IMAGE_DIR='%s' '%s/src/cli/sbx' %s 2>&1",
			   src, sbx_runtime_state_dir(rt), sbx_runtime_image_dir(rt), b, args) > 0);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t cap = 1 << 16, len = 0, n;
	char *buf = calloc(1, cap);
	while ((n = fread(buf + len, 1, cap - 1 - len, p)) > 0)
		len += n;
	int st = pclose(p);
	free(cmd);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

Test(connector, cli_unknown_names_list_the_registered_ones)
{
	static const struct { const char *args, *want; } cases[] = {
		{ "smoke --connector nope --backend local", "connector 'nope' is not supported (known: harbor)" },
		{ "smoke --backend local", "--connector is required (known: harbor)" },
		{ "smoke --connector harbor --backend local --agent claude",
		  "unknown agent 'claude' (known: oracle, nop, policy; golden = oracle)" },
		{ "golden tests/fixtures/tasks --all --connector nope", "unknown connector 'nope' (known: harbor)" },
		{ "bake tests/fixtures/tasks --all --connector nope", "unknown connector 'nope' (known: harbor)" },
		{ "task check --connector nope tests/fixtures/tasks", "unknown connector 'nope' (known: harbor)" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out;
		int rc = sbx_cli(&out, cases[i].args);
		cr_assert_eq(rc, 2, "%s -> %d: %s", cases[i].args, rc, out);
		cr_assert_not_null(strstr(out, cases[i].want), "%s:\n%s", cases[i].args, out);
		free(out);
	}
	char *out;
	cr_assert_eq(sbx_cli(&out, "smoke --help"), 0);
	cr_assert_not_null(strstr(out, "connectors: harbor\nagents: oracle, nop, policy"), "%s", out);
	free(out);
	cr_assert_eq(sbx_cli(&out, "task check --connector harbor tests/fixtures/tasks/pass"), 0, "%s", out);
	free(out);
	cr_assert_eq(sbx_cli(&out, "smoke --connector harbor --backend local --agent nop "
			     "--tasks-dir tests/fixtures/tasks --task reward-fraction"), 1, "%s", out);
	cr_assert_not_null(strstr(out, "agent=nop"), "%s", out);
	cr_assert_not_null(strstr(out, "nop agent"), "%s", out);
	free(out);
}
