/* SPDX-License-Identifier: MIT */
/*
 * `sbx eval TASKS_DIR (--tasks A,B | --all) --api-base URL --model NAME`: the
 * API baseline. Runs the `policy` agent (a model behind an OpenAI-compatible
 * API writes each turn's command) on every task, `--samples` times each,
 * concurrently, and grades every episode with the task's verifier. One line
 * per episode, a summary, pass@1 and pass@k, and with --out one training
 * record per episode (docs/trajectories.md). `--replay FILE.jsonl` lives in
 * eval_replay.c.
 *
 * Eval counts differently from training: an episode is scored only when it
 * was Submitted with a reward. A time limit, a model API that failed, an
 * environment or a verifier that broke are ERR: the baseline must not count
 * the infrastructure's failures as the model's.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sbx/backend.h>
#include <sbx/sys/connector.h>

#include "cli.h"
#include "eval.h"
#include "util/alloc.h"
#include "util/str.h"

static const char eval_usage[] =
	"usage: sbx eval TASKS_DIR (--tasks A,B,... | --all) --api-base URL --model NAME [options]\n"
	"       sbx eval --replay FILE.jsonl [TASKS_DIR] [--backend NAME] [--json]\n\n"
	"Runs the policy agent (each turn: one chat completion from an OpenAI-compatible\n"
	"API, the command in its reply run in the task's sandbox, the output fed back) on\n"
	"each task, --samples times, and grades every episode with the task's verifier.\n"
	"Prints one line per episode:\n"
	"  [1|0|ERR] TASK [sample=S] turns=N reason=END_REASON SECONDS\n"
	"then '=== pass X/Y scored (E errored) ===', 'solved: [...]' and, with\n"
	"--samples K > 1, pass@1 and pass@K (unbiased estimator, averaged over tasks).\n"
	"ERR: not scored (time limit, model API or agent error, environment or verifier\n"
	"failure); never counted as 0.\n\n"
	"options:\n"
	"  --tasks A,B,...      tasks (directory names under TASKS_DIR)\n"
	"  --all                every task under TASKS_DIR\n"
	"  --api-base URL       the API's base URL, with /v1 (default: the agent's,\n"
	"                       $POLICY_BASE_URL)\n"
	"  --model NAME         model name sent to the API (default: the agent's,\n"
	"                       $POLICY_MODEL)\n"
	"  --api-key-file PATH  file holding the API key (default: the agent's:\n"
	"                       $POLICY_API_KEY_FILE, $POLICY_API_KEY, $DEEPSEEK_API_KEY);\n"
	"                       the key is never printed, logged or written\n"
	"  --concurrency N      episodes at a time (default 4)\n"
	"  --samples K          episodes per task (default 1)\n"
	"  --pool N             keep N sandboxes of each task warm from its first episode\n"
	"                       on: its other samples start from the pool (default off)\n"
	"  --temperature T      sampling temperature, 0..2 (default: the agent's, 0.8)\n"
	"  --max-turns N        turns per episode (default: the agent's, 30)\n"
	"  --agent-arg K=V      any other policy agent setting (repeatable; see\n"
	"                       docs/trajectories.md: max_tokens, obs_cap, tool_mode, ...)\n"
	"  --agent NAME         a registered agent instead of policy (oracle: no model)\n"
	"  --out FILE.jsonl     write one trajectory record per episode\n"
	"                       (schema sbx.trajectory/1, docs/trajectories.md)\n"
	"  --backend NAME       provider (default: local)\n"
	"  --max-episode-s S    wall clock per episode (default $SBX_MAX_EPISODE_S or 3600)\n"
	"  --json               print one JSON summary object instead of the lines\n\n"
	"replay (--replay FILE.jsonl): runs each record's commands again, in order, in a\n"
	"fresh sandbox of the same task (TASKS_DIR/TASK, else the record's task_dir) and\n"
	"says whether the reward is the same: '  [same|DIFF|ERR|skip] TASK ...', then\n"
	"'=== replay: S/N same (D differ, E errored, K skipped) ==='. --out FILE writes\n"
	"the replayed records; --concurrency N replays N records at a time.\n\n"
	"exit status: 0 every episode scored (replay: every reward the same), 1 an episode\n"
	"was ERR or the run failed (replay: a reward differs or a replay failed), 2 bad\n"
	"arguments.\n";

struct eopts {
	const char *list, *out, *backend, *api_base, *model, *key_file, *agent, *replay;
	const char *temperature, *max_turns;
	char **agent_args; /* owned strv of the --agent-arg values */
	bool all, json;
	long concurrency, samples, pool;
	double max_s;
};

struct eval_run {
	size_t total, done, passed, scored, errored;
	size_t load_errors;        /* samples of tasks that did not load (ERR) */
	unsigned samples;
	bool json;
	FILE *out;
	const char *provider;
	const struct eopts *o;
	sbx_task **tasks;          /* one per loaded task */
	struct eval_task_count *counts;
	json_t *episodes;          /* --json: one object per episode */
	const char *const *args;   /* the agent's settings */
};

/* Eval's own scoring: Submitted with a reward; anything else is ERR. */
static bool scored(const sbx_episode_result *r)
{
	if (!r->has_reward || r->status != SBX_EPISODE_SUBMITTED)
		return false;
	return !r->end_reason || (strcmp(r->end_reason, "timeout") && strcmp(r->end_reason, "error"));
}

/* Turns the agent played: its metrics say, else the trajectory's length. */
static long turns_of(const sbx_episode_result *r)
{
	long n = 0;
	json_t *m = r->agent_metrics_json ? json_loads(r->agent_metrics_json, 0, NULL) : NULL;
	json_t *t = json_object_get(m, "turns");
	if (json_is_integer(t)) {
		n = (long)json_integer_value(t);
	} else if (r->trajectory_json) {
		json_t *tj = json_loads(r->trajectory_json, 0, NULL);
		n = (long)json_array_size(json_object_get(tj, "turns"));
		json_decref(tj);
	}
	json_decref(m);
	return n;
}

static void on_done(size_t i, const sbx_episode_result *r, void *payload)
{
	struct eval_run *g = payload;
	size_t ti = i / g->samples;
	unsigned sample = (unsigned)(i % g->samples);
	g->done++;
	cli_progress_clear();
	bool ok = scored(r);
	bool pass = ok && r->reward >= 1.0;
	const char *tag = ok ? (pass ? "1" : "0") : "ERR";
	if (ok) {
		g->scored++;
		g->counts[ti].scored++;
		if (pass) {
			g->passed++;
			g->counts[ti].passed++;
		}
	} else {
		g->errored++;
	}
	long turns = turns_of(r);
	const char *reason = r->end_reason ? r->end_reason : "-";
	if (g->json) {
		json_array_append_new(g->episodes,
			json_pack("{s:s,s:i,s:s,s:o,s:i,s:s?,s:s,s:f}", "task", r->task, "sample",
				  (json_int_t)sample, "result", tag,
				  "reward", r->has_reward ? json_real(r->reward) : json_null(),
				  "turns", (json_int_t)turns, "end_reason", r->end_reason,
				  "status", sbx_episode_status_name(r->status),
				  "seconds", round(r->total_seconds * 1000) / 1000));
	} else {
		printf("  [%s] %s", tag, r->task);
		if (g->samples > 1)
			printf(" sample=%u", sample);
		printf(" turns=%ld reason=%s %.1fs", turns, reason, r->total_seconds);
		if (!ok)
			printf("  (%s%s%s)", sbx_episode_status_name(r->status), r->detail ? ": " : "",
			       r->detail ? r->detail : "");
		printf("\n");
		fflush(stdout);
	}
	if (g->out) {
		const struct eopts *o = g->o;
		struct eval_meta m = { .model = o->model, .api_base = o->api_base,
				       .provider = g->provider, .task_dir = g->tasks[ti]->dir,
				       .sample = sample, .run = "eval", .agent_args = g->args };
		char *line = eval_record(r, &m);
		fprintf(g->out, "%s\n", line);
		fflush(g->out);
		free(line);
	}
	if (!g->json)
		cli_progress("eval", g->done, g->total);
}

static int parse_count(long *out, const char *arg, const char *flag, long max)
{
	char *end;
	errno = 0;
	*out = strtol(arg, &end, 10);
	if (errno || *end || end == arg || *out < 1 || *out > max)
		return cli_usage_error("eval", "%s: expected a whole number 1..%ld, got '%s'", flag, max,
				       arg);
	return 0;
}

static int parse(int argc, char **argv, struct eopts *o)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { "tasks", required_argument, NULL, 't' },
		{ "all", no_argument, NULL, 'a' }, { "concurrency", required_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' }, { "samples", required_argument, NULL, 's' },
		{ "api-base", required_argument, NULL, 'B' }, { "model", required_argument, NULL, 'M' },
		{ "temperature", required_argument, NULL, 'T' },
		{ "max-turns", required_argument, NULL, 'n' },
		{ "api-key-file", required_argument, NULL, 'k' },
		{ "agent-arg", required_argument, NULL, 'A' }, { "agent", required_argument, NULL, 'G' },
		{ "backend", required_argument, NULL, 'b' }, { "replay", required_argument, NULL, 'R' },
		{ "max-episode-s", required_argument, NULL, 'm' }, { "json", no_argument, NULL, 'j' },
		{ "pool", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	o->concurrency = 4;
	o->samples = 1;
	o->agent = "policy";
	optind = 0;
	opterr = 0;
	int c, r;
	long n;
	char *end;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(eval_usage, stdout); return -1;
		case 't': o->list = optarg; break;
		case 'a': o->all = true; break;
		case 'o': o->out = optarg; break;
		case 'B': o->api_base = optarg; break;
		case 'M': o->model = optarg; break;
		case 'k': o->key_file = optarg; break;
		case 'G': o->agent = optarg; break;
		case 'b': o->backend = optarg; break;
		case 'R': o->replay = optarg; break;
		case 'j': o->json = true; break;
		case 'c':
			if ((r = parse_count(&o->concurrency, optarg, "--concurrency", 256)))
				return r;
			break;
		case 's':
			if ((r = parse_count(&o->samples, optarg, "--samples", 1000)))
				return r;
			break;
		case 'P':
			if ((r = parse_count(&o->pool, optarg, "--pool", 64)))
				return r;
			break;
		case 'n':
			if ((r = parse_count(&n, optarg, "--max-turns", 100000)))
				return r;
			o->max_turns = optarg;
			break;
		case 'T': {
			errno = 0;
			double t = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(t >= 0 && t <= 2))
				return cli_usage_error("eval", "--temperature: expected a number 0..2, got '%s'",
						       optarg);
			o->temperature = optarg;
			break;
		}
		case 'A':
			if (!strchr(optarg, '=') || optarg[0] == '=')
				return cli_usage_error("eval", "--agent-arg: expected KEY=VALUE, got '%s'", optarg);
			sbx__strv_push(&o->agent_args, optarg);
			break;
		case 'm':
			if (sbx__parse_duration(&o->max_s, optarg) < 0 || o->max_s <= 0)
				return cli_usage_error("eval", "--max-episode-s: bad duration '%s'", optarg);
			break;
		default:
			return cli_usage_error("eval", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (o->replay) {
		if (o->list || o->all || o->api_base || o->model || o->samples != 1 || o->temperature ||
		    o->max_turns || o->key_file || o->agent_args)
			return cli_usage_error("eval", "--replay takes only [TASKS_DIR], --backend, --out, "
					       "--concurrency, --max-episode-s and --json");
		if (argc - optind > 1)
			return cli_usage_error("eval", "--replay: expected at most one TASKS_DIR");
		return 0;
	}
	if (argc - optind != 1)
		return cli_usage_error("eval", "expected one TASKS_DIR");
	struct stat st;
	/* Checked here so that a typo is a usage error; only the agent reads it. */
	if (o->key_file && (stat(o->key_file, &st) < 0 || !S_ISREG(st.st_mode)))
		return cli_usage_error("eval", "--api-key-file: '%s' is not a readable file",
				       o->key_file);
	return 0;
}

/* "key=value" settings for the agent, in the order the flags name them. */
static char **agent_args(const struct eopts *o)
{
	char **v = NULL;
	const struct { const char *key, *val; } kv[] = {
		{ "api_base", o->api_base }, { "model", o->model },
		{ "temperature", o->temperature }, { "max_turns", o->max_turns },
		{ "api_key_file", o->key_file },
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		if (kv[i].val) {
			char *s = xasprintf("%s=%s", kv[i].key, kv[i].val);
			sbx__strv_push(&v, s);
			free(s);
		}
	for (size_t i = 0; o->agent_args && o->agent_args[i]; i++)
		sbx__strv_push(&v, o->agent_args[i]);
	return v;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names of the tasks with a pass, sorted (owned array of borrowed names). */
static const char **solved_names(const struct eval_run *g, size_t nt, size_t *n_out)
{
	const char **v = xcalloc(nt + 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < nt; i++)
		if (g->counts[i].passed)
			v[n++] = g->tasks[i]->name;
	qsort(v, n, sizeof(*v), cmp_str);
	*n_out = n;
	return v;
}

static void print_summary(struct eval_run *g, size_t nt)
{
	size_t ns;
	const char **solved_v = solved_names(g, nt, &ns);
	double p1 = -1, pk = -1;
	size_t u1 = 0, uk = 0;
	if (g->samples > 1) {
		p1 = eval_pass_at_k_mean(g->counts, nt, 1, &u1);
		pk = eval_pass_at_k_mean(g->counts, nt, g->samples, &uk);
	}
	if (g->json) {
		json_t *solved = json_array();
		for (size_t i = 0; i < ns; i++)
			json_array_append_new(solved, json_string(solved_v[i]));
		json_t *j = json_pack("{s:i,s:i,s:i,s:i,s:o,s:o}", "episodes", (json_int_t)(g->total + g->load_errors),
				      "passed", (json_int_t)g->passed, "scored", (json_int_t)g->scored,
				      "errored", (json_int_t)g->errored, "solved", solved,
				      "results", json_incref(g->episodes));
		if (g->samples > 1) {
			json_object_set_new(j, "samples", json_integer(g->samples));
			json_object_set_new(j, "pass_at_1", p1 >= 0 ? json_real(p1) : json_null());
			char key[32];
			snprintf(key, sizeof(key), "pass_at_%u", g->samples);
			json_object_set_new(j, key, pk >= 0 ? json_real(pk) : json_null());
		}
		char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
		printf("%s\n", s ? s : "{}");
		free(s);
		json_decref(j);
		free(solved_v);
		return;
	}
	printf("=== pass %zu/%zu scored (%zu errored) ===\n", g->passed, g->scored, g->errored);
	printf("solved: [");
	for (size_t i = 0; i < ns; i++)
		printf("%s%s", i ? ", " : "", solved_v[i]);
	printf("]\n");
	free(solved_v);
	if (g->samples > 1) {
		if (p1 >= 0)
			printf("pass@1 = %.4f (%zu tasks)\n", p1, u1);
		else
			printf("pass@1 = n/a (no task has a scored sample)\n");
		if (pk >= 0)
			printf("pass@%u = %.4f (%zu tasks with %u scored samples)\n", g->samples, pk, uk,
			       g->samples);
		else
			printf("pass@%u = n/a (no task has %u scored samples)\n", g->samples, g->samples);
	}
	fflush(stdout);
}

static int run_eval(struct eopts *o, const char *dir)
{
	char **names = NULL;
	int r = cli_select_tasks(&names, "eval", dir, o->list, o->all);
	if (r)
		return r;
	if (!sbx_agent_find(o->agent)) {
		char known[512];
		sbx_agent_names(known, sizeof(known));
		sbx__strv_free(names);
		return cli_usage_error("eval", "--agent: unknown agent '%s' (known: %s)", o->agent, known);
	}
	size_t n = sbx__strv_len((const char *const *)names);
	FILE *out = NULL;
	if (o->out && !(out = fopen(o->out, "we"))) {
		fprintf(stderr, "sbx eval: --out: cannot write '%s': %s\n", o->out, strerror(errno));
		sbx__strv_free(names);
		return EXIT_USAGE;
	}
	char *provider = NULL;
	sbx_error *err = NULL;
	if (sbx_backend_resolve(&provider, o->backend, &err) < 0) {
		r = cli_fail("eval", err);
		goto out_early;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		r = EXIT_FAIL;
		goto out_early;
	}
	struct eval_run g = { .samples = (unsigned)o->samples, .json = o->json, .out = out,
			      .provider = provider, .o = o };
	g.tasks = xcalloc(n + 1, sizeof(sbx_task *));
	g.counts = xcalloc(n + 1, sizeof(*g.counts));
	g.episodes = json_array();
	if (!o->json)
		printf("eval | %zu tasks x %ld samples | agent=%s model=%s | concurrency=%ld\n", n,
		       o->samples, o->agent, o->model ? o->model : "(default)", o->concurrency);
	fflush(stdout);
	size_t nt = 0, load_errors = 0;
	for (size_t i = 0; i < n; i++) {
		char *td = xasprintf("%s/%s", dir, names[i]);
		sbx_task *t = NULL;
		if (sbx_task_load(&t, td, &err) < 0) {
			load_errors += (size_t)o->samples;
			const char *why = err && err->msg ? err->msg : "failed";
			if (!o->json)
				printf("  [ERR] %s  load: %s\n", names[i], why);
			else
				json_array_append_new(g.episodes, json_pack("{s:s,s:s,s:s,s:s}", "task",
					names[i], "result", "ERR", "status", "EnvironmentError",
					"detail", why));
			sbx_error_free(err);
			err = NULL;
		} else {
			g.tasks[nt++] = t;
		}
		free(td);
	}
	g.errored = g.load_errors = load_errors;
	size_t ne = nt * (size_t)o->samples;
	g.total = ne;
	sbx_task **runs = xcalloc(ne + 1, sizeof(sbx_task *));
	for (size_t i = 0; i < ne; i++)
		runs[i] = g.tasks[i / (size_t)o->samples];
	char **args = agent_args(o);
	sbx_episode_result *res = xcalloc(ne + 1, sizeof(*res));
	sbx_batch_opts bo = SBX_BATCH_OPTS_INIT;
	bo.concurrency = (unsigned)o->concurrency;
	bo.episode.pool = (unsigned)o->pool;
	bo.episode.provider = o->backend;
	bo.episode.agent = o->agent;
	bo.episode.agent_args = (const char *const *)args;
	g.args = (const char *const *)args;
	bo.episode.max_episode_s = o->max_s;
	bo.on_done = on_done;
	bo.payload = &g;
	const char *const labels[] = { "sbx.run=eval", NULL };
	bo.episode.labels = labels;
	if (!o->json)
		cli_progress("eval", 0, g.total);
	r = EXIT_OK;
	if (ne && sbx_episode_run_batch(res, rt, runs, ne, &bo, &err) < 0) {
		cli_progress_clear();
		r = cli_fail("eval", err);
	}
	cli_progress_clear();
	print_summary(&g, nt);
	if (r == EXIT_OK && g.errored)
		r = EXIT_FAIL;
	for (size_t i = 0; i < ne; i++)
		sbx_episode_result_free(&res[i]);
	for (size_t i = 0; i < nt; i++)
		sbx_task_free(g.tasks[i]);
	free(res);
	free(runs);
	free(g.tasks);
	free(g.counts);
	json_decref(g.episodes);
	sbx__strv_free(args);
	sbx_runtime_free(rt);
out_early:
	free(provider);
	sbx__strv_free(names);
	if (out && fclose(out) != 0 && r == EXIT_OK) {
		fprintf(stderr, "sbx eval: --out: writing '%s' failed\n", o->out);
		r = EXIT_FAIL;
	}
	return r;
}

int cmd_eval(int argc, char **argv)
{
	struct eopts o;
	memset(&o, 0, sizeof(o));
	int r = parse(argc, argv, &o);
	if (r) {
		sbx__strv_free(o.agent_args);
		return r < 0 ? EXIT_OK : r;
	}
	if (o.backend && (r = cli_use_backend(&o.backend, "eval")) != 0)
		goto out;
	if (o.replay) {
		struct eval_replay_opts ro = { .file = o.replay, .backend = o.backend, .out = o.out,
					       .max_s = o.max_s, .json = o.json,
					       .concurrency = (unsigned)o.concurrency,
					       .tasks_dir = optind < argc ? argv[optind] : NULL };
		r = eval_replay(&ro);
	} else {
		r = run_eval(&o, argv[optind]);
	}
out:
	sbx__strv_free(o.agent_args);
	return r;
}
