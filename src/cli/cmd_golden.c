/* SPDX-License-Identifier: MIT */
/*
 * `sbx golden TASKS_DIR (--tasks a,b | --all)`: replays every task's official
 * solution (the oracle agent) in its own sandbox, concurrently, and grades it
 * with the task's verifier. One line per task, a summary, an exit status that
 * fails on regressions. Also the task-selection and progress-bar helpers that
 * `sbx bake` shares.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sys/connector.h>

#include "cli.h"
#include "util/alloc.h"
#include "util/fs.h"
#include "util/str.h"

static const char golden_usage[] =
	"usage: sbx golden TASKS_DIR (--tasks A,B,... | --all) [options]\n\n"
	"Runs the oracle agent (the reference solution; Harbor: solution/solve.sh) of each\n"
	"task in its own sandbox and grades it with the task's verifier (Harbor:\n"
	"tests/test.sh). Prints one line per task:\n"
	"  [1|0|ERR] TASK  EXIT_STATUS reward=R SECONDS\n"
	"then 'golden pass P/S scored (E errored)'.\n\n"
	"options:\n"
	"  --tasks A,B,...      tasks (directory names under TASKS_DIR)\n"
	"  --all                every task under TASKS_DIR\n"
	"  --concurrency N      episodes at a time (default 4)\n"
	"  --out FILE.jsonl     write one result record (JSON) per task\n"
	"  --expect N           exit 1 when fewer than N tasks pass (default: all of them)\n"
	"  --logs               print the tail of each task's solve and test output, and\n"
	"                       keep its /logs tree (see --logs-dir)\n"
	"  --logs-dir DIR       keep each task's /logs tree in DIR/TASK\n"
	"                       (default with --logs: $SBX_STATE_DIR/runs/golden-TIME)\n"
	"  --backend NAME       provider (default: local)\n"
	"  --connector NAME     read the tasks as this format (default: each task's own;\n"
	"                       registered: see 'sbx smoke --help')\n"
	"  --max-episode-s S    wall clock per episode (default $SBX_MAX_EPISODE_S or 3600)\n"
	"  --force-build        build environment/ even when docker_image is present\n\n"
	"exit status: 0 when at least --expect tasks pass, 1 otherwise, 2 on bad arguments.\n";

int cli_check_connector(const char *name, const char *cmd)
{
	if (!name || sbx_connector_find(name))
		return 0;
	char known[512];
	sbx_connector_names(known, sizeof(known));
	return cli_usage_error(cmd, "unknown connector '%s' (known: %s)", name, known);
}

int cli_select_tasks(char ***names_out, const char *cmd, const char *tasks_dir,
		     const char *list, bool all)
{
	*names_out = NULL;
	if (!tasks_dir)
		return cli_usage_error(cmd, "expected TASKS_DIR");
	if (!!list == all)
		return cli_usage_error(cmd, "give exactly one of --tasks A,B,... and --all");
	if (all) {
		char **names = NULL;
		sbx_error *err = NULL;
		if (sbx_task_list(&names, NULL, tasks_dir, &err) < 0) {
			fprintf(stderr, "sbx %s: %s\n", cmd, err->msg);
			sbx_error_free(err);
			return EXIT_USAGE;
		}
		if (!names[0]) {
			sbx_task_names_free(names);
			return cli_usage_error(cmd, "no tasks (directories with task.toml) in %s",
					       tasks_dir);
		}
		*names_out = names;
		return 0;
	}
	char **names = NULL;
	char *copy = xstrdup(list), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		sbx__str_trim(tok);
		if (!*tok)
			continue;
		if (strchr(tok, '/') || !strcmp(tok, "..") || !strcmp(tok, ".")) {
			free(copy);
			sbx__strv_free(names);
			return cli_usage_error(cmd, "bad task name '%s'", tok);
		}
		bool dup = false;
		for (size_t i = 0; names && names[i]; i++)
			dup |= strcmp(names[i], tok) == 0;
		if (!dup)
			sbx__strv_push(&names, tok);
	}
	free(copy);
	if (!names)
		return cli_usage_error(cmd, "--tasks is empty");
	*names_out = names;
	return 0;
}

static bool progress_on(void)
{
	return isatty(STDERR_FILENO) == 1;
}

void cli_progress(const char *what, size_t done, size_t total)
{
	if (!progress_on() || total == 0)
		return;
	const int width = 30;
	int fill = (int)(done * (size_t)width / total);
	fprintf(stderr, "\r\033[K%s [", what);
	for (int i = 0; i < width; i++)
		fputc(i < fill ? '=' : (i == fill ? '>' : ' '), stderr);
	fprintf(stderr, "] %zu/%zu", done, total);
	fflush(stderr);
}

void cli_progress_clear(void)
{
	if (progress_on()) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
}

struct golden {
	size_t total, done, passed, scored, errored;
	bool logs;
	FILE *out;
	sbx_task **tasks;
};

/* Prints the last `lines` lines of s, indented. */
static void print_tail(const char *label, const char *s, int lines)
{
	if (!s || !*s)
		return;
	const char *p = s + strlen(s);
	if (p > s && p[-1] == '\n')
		p--;
	int n = 0;
	while (p > s && n < lines) {
		p--;
		if (*p == '\n')
			n++;
	}
	if (*p == '\n')
		p++;
	printf("      %s:\n", label);
	while (*p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);
		printf("        | %.*s\n", len, p);
		p += len + (nl ? 1 : 0);
	}
}

static void on_done(size_t i, const sbx_episode_result *r, void *payload)
{
	struct golden *g = payload;
	(void)i;
	g->done++;
	cli_progress_clear();
	const char *tag = "ERR";
	if (r->has_reward) {
		g->scored++;
		tag = r->reward >= 1.0 ? "1" : "0";
		if (r->reward >= 1.0)
			g->passed++;
	} else {
		g->errored++;
	}
	char reward[32] = "-";
	if (r->has_reward)
		snprintf(reward, sizeof(reward), "%g", r->reward);
	printf("  [%s] %s  %s reward=%s %.1fs", tag, r->task, sbx_episode_status_name(r->status),
	       reward, r->total_seconds);
	if (r->status != SBX_EPISODE_SUBMITTED && r->detail)
		printf("  (%s)", r->detail);
	printf("\n");
	if (g->logs) {
		print_tail("solve log (/logs/agent/oracle.txt)", r->agent_log_tail, 10);
		print_tail("test log (/logs/verifier/test-stdout.txt)", r->verifier_log_tail, 10);
	}
	fflush(stdout);
	if (g->out) {
		char *j = sbx_episode_result_to_json(r);
		fprintf(g->out, "%s\n", j);
		fflush(g->out);
		free(j);
	}
	cli_progress("golden", g->done, g->total);
}

static char *default_logs_dir(sbx_runtime *rt)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	return xasprintf("%s/runs/golden-%s-%d", sbx_runtime_state_dir(rt), stamp, (int)getpid());
}

struct gopts {
	const char *list, *out, *logs_dir, *backend, *connector;
	bool all, logs, force;
	long concurrency, expect;
	double max_s;
};

static int parse(int argc, char **argv, struct gopts *o)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { "tasks", required_argument, NULL, 't' },
		{ "all", no_argument, NULL, 'a' }, { "concurrency", required_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' }, { "expect", required_argument, NULL, 'e' },
		{ "logs", no_argument, NULL, 'l' }, { "logs-dir", required_argument, NULL, 'L' },
		{ "backend", required_argument, NULL, 'b' }, { "max-episode-s", required_argument, NULL, 'm' },
		{ "force-build", no_argument, NULL, 'f' }, { "connector", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof(*o));
	o->concurrency = 4;
	o->expect = -1;
	optind = 0;
	opterr = 0;
	int c;
	char *end;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(golden_usage, stdout); return -1;
		case 't': o->list = optarg; break;
		case 'a': o->all = true; break;
		case 'o': o->out = optarg; break;
		case 'l': o->logs = true; break;
		case 'L': o->logs_dir = optarg; break;
		case 'b': o->backend = optarg; break;
		case 'C': o->connector = optarg; break;
		case 'f': o->force = true; break;
		case 'c':
			o->concurrency = strtol(optarg, &end, 10);
			if (*end || end == optarg || o->concurrency < 1 || o->concurrency > 256)
				return cli_usage_error("golden", "--concurrency: expected 1..256");
			break;
		case 'e':
			o->expect = strtol(optarg, &end, 10);
			if (*end || end == optarg || o->expect < 0)
				return cli_usage_error("golden", "--expect: expected a count");
			break;
		case 'm':
			if (sbx__parse_duration(&o->max_s, optarg) < 0 || o->max_s <= 0)
				return cli_usage_error("golden", "--max-episode-s: bad duration '%s'", optarg);
			break;
		default:
			return cli_usage_error("golden", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("golden", "expected one TASKS_DIR");
	return cli_check_connector(o->connector, "golden");
}

int cmd_golden(int argc, char **argv)
{
	struct gopts o;
	int r = parse(argc, argv, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (o.backend && (r = cli_use_backend(&o.backend, "golden")) != 0)
		return r;
	const char *dir = argv[optind];
	char **names = NULL;
	r = cli_select_tasks(&names, "golden", dir, o.list, o.all);
	if (r)
		return r;
	size_t n = sbx__strv_len((const char *const *)names);
	if (o.expect > (long)n) {
		sbx__strv_free(names);
		return cli_usage_error("golden", "--expect %ld is more than the %zu tasks selected",
				       o.expect, n);
	}
	FILE *out = NULL;
	if (o.out && !(out = fopen(o.out, "we"))) {
		perror(o.out);
		sbx__strv_free(names);
		return EXIT_USAGE;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		sbx__strv_free(names);
		if (out)
			fclose(out);
		return EXIT_FAIL;
	}
	printf("golden sweep | %zu tasks | concurrency=%ld\n", n, o.concurrency);
	struct golden g = { .total = n, .logs = o.logs, .out = out };
	g.tasks = xcalloc(n + 1, sizeof(sbx_task *));
	size_t nt = 0;
	for (size_t i = 0; i < n; i++) {
		char *td = xasprintf("%s/%s", dir, names[i]);
		sbx_error *err = NULL;
		sbx_task *t = NULL;
		if (sbx_task_load_as(&t, o.connector, td, &err) < 0) {
			g.done++;
			g.errored++;
			printf("  [ERR] %s  load: %s\n", names[i], err ? err->msg : "failed");
			if (out) {
				json_t *j = json_pack("{s:s,s:s,s:n,s:s}", "task", names[i], "exit_status",
						      "EnvironmentError", "reward", "detail",
						      err && err->msg ? err->msg : "task failed to load");
				char *line = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
				if (line)
					fprintf(out, "%s\n", line);
				free(line);
				json_decref(j);
			}
			sbx_error_free(err);
		} else {
			g.tasks[nt++] = t;
		}
		free(td);
	}
	char *logs_dir = o.logs_dir ? xstrdup(o.logs_dir) : o.logs ? default_logs_dir(rt) : NULL;
	sbx_episode_result *res = xcalloc(nt + 1, sizeof(*res));
	sbx_batch_opts bo = SBX_BATCH_OPTS_INIT;
	bo.concurrency = (unsigned)o.concurrency;
	bo.logs_root = logs_dir;
	bo.episode.provider = o.backend;
	bo.episode.max_episode_s = o.max_s;
	bo.episode.force_build = o.force;
	bo.on_done = on_done;
	bo.payload = &g;
	const char *const labels[] = { "sbx.run=golden", NULL };
	bo.episode.labels = labels;
	cli_progress("golden", g.done, g.total);
	sbx_error *err = NULL;
	int rc = EXIT_OK;
	if (nt && sbx_episode_run_batch(res, rt, g.tasks, nt, &bo, &err) < 0) {
		cli_progress_clear();
		rc = cli_fail("golden", err);
	}
	cli_progress_clear();
	long expect = o.expect >= 0 ? o.expect : (long)n;
	printf("=== golden pass %zu/%zu scored (%zu errored) ===\n", g.passed, g.scored, g.errored);
	if (logs_dir)
		printf("logs: %s\n", logs_dir);
	fflush(stdout);
	if (rc == EXIT_OK && (long)g.passed < expect) {
		fprintf(stderr, "sbx golden: %zu passed, expected at least %ld\n", g.passed, expect);
		rc = EXIT_FAIL;
	}
	for (size_t i = 0; i < nt; i++) {
		sbx_episode_result_free(&res[i]);
		sbx_task_free(g.tasks[i]);
	}
	free(res);
	free(g.tasks);
	free(logs_dir);
	sbx__strv_free(names);
	if (out)
		fclose(out);
	sbx_runtime_free(rt);
	return rc;
}
