/* SPDX-License-Identifier: MIT */
/*
 * `sbx smoke --connector harbor --backend local`: one golden (oracle) episode
 * of one task (connector and agent from their registries), printing each stage (resolve → create → exec → verify →
 * destroy) as it finishes with its time and PASS/FAIL. Exit 0 only when the
 * reward is 1 and the episode was Submitted; 1 on any failure; 2 on bad
 * arguments.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sbx/sys/connector.h>

#include "cli.h"
#include "util/alloc.h"
#include "util/config.h"
#include "util/str.h"

static const char smoke_usage[] =
	"usage: sbx smoke --connector NAME --backend NAME [options]\n\n"
	"Runs one golden episode of one task and prints every stage with its time:\n"
	"  resolve (image resolve or template build) → create → exec (the agent) →\n"
	"  verify (tests/test.sh and the reward file) → destroy\n\n"
	"options:\n"
	"  --connector NAME     task format: a registered connector (listed below)\n"
	"  --backend NAME       provider ('local')\n"
	"  --agent NAME         a registered agent (listed below); default golden (= the oracle)\n"
	"  --task NAME          task directory name (default: the first one alphabetically)\n"
	"  --tasks-dir DIR      where the tasks are (default $SBX_TASKS_DIR, else examples/tasks)\n"
	"  --logs-dir DIR       keep the episode's /logs tree and result.json in DIR\n"
	"  --max-episode-s S    episode wall clock (default $SBX_MAX_EPISODE_S or 3600)\n"
	"  --force-build        build environment/ even when docker_image is present\n\n"
	"exit status: 0 when reward = 1 (Submitted), 1 on failure, 2 on bad arguments.\n";

static void print_registries(void)
{
	char names[512];
	sbx_connector_names(names, sizeof(names));
	printf("\nconnectors: %s\n", names);
	sbx_agent_names(names, sizeof(names));
	printf("agents: %s (golden = oracle)\n", names);
}

struct smoke {
	int failed_stage;   /* first stage that failed, or -1 */
	char *failed_detail;
};

static void on_stage(const char *task, sbx_episode_stage s, int done, int ok, double sec,
		     const char *detail, void *payload)
{
	struct smoke *sm = payload;
	(void)task;
	if (!done) {
		fflush(stdout);
		return;
	}
	printf("  %-8s %7.2fs  %s%s%s\n", sbx_episode_stage_name(s), sec, ok ? "PASS" : "FAIL",
	       detail ? "  " : "", detail ? detail : "");
	fflush(stdout);
	if (!ok && sm->failed_stage < 0) {
		sm->failed_stage = (int)s;
		sm->failed_detail = xstrdup(detail ? detail : "");
	}
}

/* What went wrong, by stage, for the last line. */
static const char *stage_failure(int stage)
{
	switch (stage) {
	case SBX_STAGE_RESOLVE: return "the image could not be resolved or built";
	case SBX_STAGE_CREATE: return "the sandbox could not be created";
	case SBX_STAGE_AGENT: return "the agent did not finish";
	case SBX_STAGE_VERIFY: return "the verifier produced no reward";
	case SBX_STAGE_DESTROY: return "the sandbox could not be destroyed or its logs kept";
	default: return "the episode failed";
	}
}

int cmd_smoke(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { "connector", required_argument, NULL, 'c' },
		{ "backend", required_argument, NULL, 'b' }, { "agent", required_argument, NULL, 'a' },
		{ "task", required_argument, NULL, 't' }, { "tasks-dir", required_argument, NULL, 'd' },
		{ "logs-dir", required_argument, NULL, 'l' }, { "benchmark", required_argument, NULL, 'B' },
		{ "max-episode-s", required_argument, NULL, 'm' },
		{ "force-build", no_argument, NULL, 'f' }, { NULL, 0, NULL, 0 },
	};
	const char *connector = NULL, *backend = NULL, *agent = "golden", *task = NULL;
	const char *tasks_dir = sbx__env("SBX_TASKS_DIR"), *logs_dir = NULL;
	double max_s = 0;
	int force = 0;
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(smoke_usage, stdout); print_registries(); return EXIT_OK;
		case 'c': connector = optarg; break;
		case 'b': backend = optarg; break;
		case 'a': agent = optarg; break;
		case 't': task = optarg; break;
		case 'd': tasks_dir = optarg; break;
		case 'l': logs_dir = optarg; break;
		case 'B': break;
		case 'f': force = 1; break;
		case 'm':
			if (sbx__parse_duration(&max_s, optarg) < 0 || max_s <= 0)
				return cli_usage_error("smoke", "--max-episode-s: bad duration '%s'", optarg);
			break;
		default:
			return cli_usage_error("smoke", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_error("smoke", "unexpected argument '%s'", argv[optind]);
	char known[512];
	sbx_connector_names(known, sizeof(known));
	if (!connector)
		return cli_usage_error("smoke", "--connector is required (known: %s)", known);
	if (!sbx_connector_find(connector))
		return cli_usage_error("smoke", "connector '%s' is not supported (known: %s)",
				       connector, known);
	if (!backend)
		return cli_usage_error("smoke", "--backend is required (e.g. local)");
	int br = cli_use_backend(&backend, "smoke");
	if (br != 0)
		return br;
	const sbx_agent_ops *agent_ops = sbx_agent_find(agent);
	if (!agent_ops) {
		sbx_agent_names(known, sizeof(known));
		return cli_usage_error("smoke", "unknown agent '%s' (known: %s; golden = oracle)",
				       agent, known);
	}
	const char *ep_agent = agent_ops->name;
	if (!tasks_dir || !*tasks_dir)
		tasks_dir = "examples/tasks";
	if (task && (strchr(task, '/') || !strcmp(task, "..")))
		return cli_usage_error("smoke", "bad task name '%s'", task);
	char **names = NULL;
	sbx_error *err = NULL;
	if (!task) {
		if (sbx_task_list(&names, NULL, tasks_dir, &err) < 0) {
			fprintf(stderr, "sbx smoke: %s\n", err->msg);
			sbx_error_free(err);
			return EXIT_USAGE;
		}
		if (!names[0]) {
			sbx_task_names_free(names);
			return cli_usage_error("smoke", "no tasks in %s", tasks_dir);
		}
		task = names[0];
	}
	printf("sbx smoke: connector=%s backend=%s agent=%s task=%s tasks-dir=%s\n", connector,
	       backend, agent, task, tasks_dir);
	char *dir = xasprintf("%s/%s", tasks_dir, task);
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(dir);
		sbx_task_names_free(names);
		return cli_usage_error("smoke", "no task '%s' in %s", task, tasks_dir);
	}
	sbx_task *t = NULL;
	int rc = sbx_task_load_as(&t, connector, dir, &err);
	free(dir);
	if (rc < 0) {
		printf("  %-8s %7s  FAIL  %s\n", "load", "", err->msg);
		printf("sbx smoke: FAIL at load: the task could not be loaded\n");
		sbx_error_free(err);
		sbx_task_names_free(names);
		return EXIT_FAIL;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		sbx_task_free(t);
		sbx_task_names_free(names);
		return EXIT_FAIL;
	}
	struct smoke sm = { .failed_stage = -1 };
	sbx_episode_opts eo = SBX_EPISODE_OPTS_INIT;
	eo.provider = backend;
	eo.agent = ep_agent;
	eo.logs_dir = logs_dir;
	eo.max_episode_s = max_s;
	eo.force_build = force;
	eo.on_stage = on_stage;
	eo.payload = &sm;
	const char *const labels[] = { "sbx.run=smoke", NULL };
	eo.labels = labels;
	sbx_episode_result r;
	rc = sbx_episode_run(&r, rt, t, &eo, &err);
	if (rc < 0) {
		rc = cli_fail("smoke", err);
	} else {
		char *j = sbx_episode_result_to_json(&r);
		printf("sbx smoke: result=%s\n", j);
		free(j);
		bool pass = r.status == SBX_EPISODE_SUBMITTED && r.has_reward && r.reward == 1.0;
		if (pass) {
			printf("sbx smoke: PASS (%.2fs)\n", r.total_seconds);
			rc = EXIT_OK;
		} else {
			char reward[32] = "none";
			if (r.has_reward)
				snprintf(reward, sizeof(reward), "%g", r.reward);
			if (sm.failed_stage >= 0)
				printf("sbx smoke: FAIL at %s: %s (reward=%s, exit_status=%s)\n",
				       sbx_episode_stage_name((sbx_episode_stage)sm.failed_stage),
				       stage_failure(sm.failed_stage), reward,
				       sbx_episode_status_name(r.status));
			else
				printf("sbx smoke: FAIL: reward=%s, exit_status=%s%s%s\n", reward,
				       sbx_episode_status_name(r.status), r.detail ? ": " : "",
				       r.detail ? r.detail : "");
			rc = EXIT_FAIL;
		}
		sbx_episode_result_free(&r);
	}
	free(sm.failed_detail);
	sbx_task_free(t);
	sbx_task_names_free(names);
	sbx_runtime_free(rt);
	return rc;
}
