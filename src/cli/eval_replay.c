/* SPDX-License-Identifier: MIT */
/*
 * `sbx eval --replay FILE.jsonl`: a determinism check for environments. Each
 * record's turns run again, in order, in a fresh sandbox of the same task,
 * through the turn-by-turn episode API (include/sbx/episode.h), with no
 * model in the loop; then the task's verifier grades the sandbox and the
 * reward is compared with the record's. A task whose reward depends on the
 * clock, the network or randomness shows up as DIFF.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/backend.h>
#include <sbx/episode.h>

#include "cli.h"
#include "eval.h"
#include "util/alloc.h"
#include "util/str.h"

enum verdict { V_SAME, V_DIFF, V_ERR, V_SKIP };
static const char *const verdict_tag[] = { "same", "DIFF", "ERR", "skip" };

struct replay {
	const struct eval_replay_opts *o;
	sbx_runtime *rt;
	const char *provider;
	FILE *out;
	json_t **recs;       /* parsed records; NULL where the line was bad */
	char **bad;          /* why a line was bad, or NULL */
	size_t n, next;
	size_t count[4];
	json_t *rows;        /* --json */
	pthread_mutex_t mu;
};

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Seconds one turn may take: the record's command timeout when it had one
 * that cut this turn (the limit is "command"; its length is the turn's own
 * time), else none: the agent limit and the episode clock still apply. */
static double turn_timeout(json_t *turn)
{
	const char *limit = jstr(turn, "limit");
	json_t *s = json_object_get(turn, "seconds");
	if (limit && !strcmp(limit, "command") && json_is_number(s) && json_number_value(s) > 0)
		return json_number_value(s);
	return 0;
}

struct outcome {
	enum verdict v;
	char *why;       /* ERR/skip: one line */
	sbx_episode_result res;
	bool have_res;
	size_t turns;
	double seconds;
};

static void replay_one(struct replay *p, json_t *rec, struct outcome *oc)
{
	const struct eval_replay_opts *o = p->o;
	json_t *turns = json_object_get(rec, "turns");
	const char *task_name = jstr(rec, "task");
	if (!json_is_boolean(json_object_get(rec, "scored")) || !json_is_true(json_object_get(rec, "scored"))) {
		oc->v = V_SKIP;
		oc->why = xstrdup("the record was not scored: no reward to compare");
		return;
	}
	char *dir = o->tasks_dir ? xasprintf("%s/%s", o->tasks_dir, task_name)
				 : xstrdup(jstr(rec, "task_dir"));
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	sbx_episode *ep = NULL;
	if (sbx_task_load(&t, dir, &err) < 0) {
		oc->v = V_ERR;
		oc->why = xasprintf("load: %s", err && err->msg ? err->msg : "failed");
		goto out;
	}
	sbx_episode_opts eo = SBX_EPISODE_OPTS_INIT;
	eo.provider = o->backend;
	eo.max_episode_s = o->max_s;
	const char *const labels[] = { "sbx.run=replay", NULL };
	eo.labels = labels;
	if (sbx_episode_begin(&ep, p->rt, t, &eo, &err) < 0) {
		oc->v = V_ERR;
		oc->why = xasprintf("begin: %s", err && err->msg ? err->msg : "failed");
		goto out;
	}
	size_t i;
	json_t *turn;
	json_array_foreach(turns, i, turn) {
		sbx_observation obs;
		int r = sbx_episode_turn(&obs, ep, jstr(turn, "command"), turn_timeout(turn), &err);
		sbx_observation_free(&obs);
		if (r == -ETIMEDOUT)
			break; /* the agent phase is over, as it may have been the first time */
		if (r < 0) {
			oc->v = V_ERR;
			oc->why = xasprintf("turn %zu: %s", i, err && err->msg ? err->msg : "failed");
			sbx_episode_abort(ep);
			ep = NULL;
			goto out;
		}
		oc->turns++;
	}
	sbx_episode_end(&oc->res, ep, &err);
	ep = NULL;
	oc->have_res = true;
	oc->seconds = oc->res.total_seconds;
	bool ok = oc->res.has_reward && oc->res.status == SBX_EPISODE_SUBMITTED;
	json_t *want = json_object_get(rec, "reward");
	if (!ok) {
		oc->v = V_ERR;
		oc->why = xasprintf("%s%s%s", sbx_episode_status_name(oc->res.status),
				    oc->res.detail ? ": " : "", oc->res.detail ? oc->res.detail : "");
	} else {
		oc->v = fabs(oc->res.reward - json_number_value(want)) < 1e-9 ? V_SAME : V_DIFF;
	}
out:
	sbx_error_free(err);
	sbx_task_free(t);
	free(dir);
}

static void report(struct replay *p, size_t i, json_t *rec, struct outcome *oc)
{
	const struct eval_replay_opts *o = p->o;
	const char *task = rec ? jstr(rec, "task") : NULL;
	json_int_t sample = rec ? json_integer_value(json_object_get(rec, "sample")) : 0;
	json_t *want = rec ? json_object_get(rec, "reward") : NULL;
	char was[32] = "-", now[32] = "-";
	if (json_is_number(want))
		snprintf(was, sizeof(was), "%g", json_number_value(want));
	if (oc->have_res && oc->res.has_reward)
		snprintf(now, sizeof(now), "%g", oc->res.reward);
	p->count[oc->v]++;
	if (o->json) {
		json_array_append_new(p->rows, json_pack("{s:I,s:s?,s:I,s:s,s:s?,s:s?,s:s?}",
			"line", (json_int_t)(i + 1), "task", task, "sample", sample, "result",
			verdict_tag[oc->v], "reward", was, "replayed", now, "detail", oc->why));
	} else {
		printf("  [%s] %s sample=%lld reward=%s -> %s commands=%zu %.1fs", verdict_tag[oc->v],
		       task ? task : "?", (long long)sample, was, now, oc->turns, oc->seconds);
		if (oc->why)
			printf("  (line %zu: %s)", i + 1, oc->why);
		printf("\n");
		fflush(stdout);
	}
	if (p->out && oc->have_res) {
		struct eval_meta m = { .model = jstr(rec, "model"), .api_base = jstr(rec, "api_base"),
				       .provider = p->provider, .task_dir = jstr(rec, "task_dir"),
				       .sample = (unsigned)sample, .run = "replay" };
		char *line = eval_record(&oc->res, &m);
		fprintf(p->out, "%s\n", line);
		fflush(p->out);
		free(line);
	}
}

static void *worker(void *arg)
{
	struct replay *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		size_t i = p->next++;
		pthread_mutex_unlock(&p->mu);
		if (i >= p->n)
			return NULL;
		struct outcome oc = { 0 };
		if (p->recs[i]) {
			replay_one(p, p->recs[i], &oc);
		} else {
			oc.v = V_ERR;
			oc.why = xstrdup(p->bad[i]);
		}
		pthread_mutex_lock(&p->mu);
		report(p, i, p->recs[i], &oc);
		pthread_mutex_unlock(&p->mu);
		if (oc.have_res)
			sbx_episode_result_free(&oc.res);
		free(oc.why);
	}
}

/* Why a record cannot be replayed, or NULL. */
static char *check_record(json_t *rec, const char *tasks_dir)
{
	if (!json_is_object(rec))
		return xstrdup("not a JSON object");
	const char *schema = jstr(rec, "schema");
	if (!schema || strcmp(schema, EVAL_SCHEMA))
		return xasprintf("schema: expected \"%s\", got %s", EVAL_SCHEMA,
				 schema ? schema : "none");
	const char *task = jstr(rec, "task");
	if (!task || !*task || strchr(task, '/'))
		return xstrdup("task: expected a task directory name");
	if (!tasks_dir && !jstr(rec, "task_dir"))
		return xstrdup("task_dir: missing (give TASKS_DIR)");
	json_t *turns = json_object_get(rec, "turns");
	if (!json_is_array(turns))
		return xstrdup("turns: expected an array");
	size_t i;
	json_t *t;
	json_array_foreach(turns, i, t) {
		const char *c = jstr(t, "command");
		if (!c || !*c)
			return xasprintf("turns[%zu].command: expected a non-empty string", i);
	}
	if (json_is_true(json_object_get(rec, "scored")) &&
	    !json_is_number(json_object_get(rec, "reward")))
		return xstrdup("reward: expected a number in a scored record");
	return NULL;
}

/* Reads the JSONL file; 0 or an exit code after printing. */
static int load(struct replay *p, const char *file)
{
	FILE *f = fopen(file, "re");
	if (!f) {
		fprintf(stderr, "sbx eval: --replay: cannot read '%s': %s\n", file, strerror(errno));
		return errno == ENOENT ? EXIT_NOTFOUND : EXIT_USAGE;
	}
	char *line = NULL;
	size_t cap = 0, lineno = 0, alloc = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		char *s = sbx__str_trim(line);
		if (!*s)
			continue;
		if (p->n == alloc) {
			alloc = alloc ? alloc * 2 : 16;
			p->recs = xrealloc(p->recs, alloc * sizeof(*p->recs));
			p->bad = xrealloc(p->bad, alloc * sizeof(*p->bad));
		}
		json_error_t je;
		json_t *rec = json_loads(s, 0, &je);
		char *why = rec ? check_record(rec, p->o->tasks_dir)
				: xasprintf("not JSON: %s (column %d)", je.text, je.column);
		if (why) {
			json_decref(rec);
			rec = NULL;
			char *full = xasprintf("%s:%zu: %s", file, lineno, why);
			free(why);
			why = full;
		}
		p->recs[p->n] = rec;
		p->bad[p->n] = why;
		p->n++;
	}
	free(line);
	fclose(f);
	if (!p->n) {
		fprintf(stderr, "sbx eval: --replay: '%s' has no records\n", file);
		return EXIT_USAGE;
	}
	return 0;
}

int eval_replay(const struct eval_replay_opts *o)
{
	struct replay p = { .o = o };
	pthread_mutex_init(&p.mu, NULL);
	char *provider = NULL;
	sbx_error *err = NULL;
	int rc = load(&p, o->file);
	if (rc)
		goto out;
	if (o->out && !(p.out = fopen(o->out, "we"))) {
		fprintf(stderr, "sbx eval: --out: cannot write '%s': %s\n", o->out, strerror(errno));
		rc = EXIT_USAGE;
		goto out;
	}
	if (sbx_backend_resolve(&provider, o->backend, &err) < 0) {
		rc = cli_fail("eval", err);
		goto out;
	}
	p.provider = provider;
	if (!(p.rt = cli_runtime())) {
		rc = EXIT_FAIL;
		goto out;
	}
	p.rows = json_array();
	if (!o->json)
		printf("replay | %zu records | concurrency=%u\n", p.n, o->concurrency);
	fflush(stdout);
	unsigned nw = o->concurrency ? o->concurrency : 1;
	if (nw > p.n)
		nw = (unsigned)p.n;
	pthread_t *th = xcalloc(nw, sizeof(*th));
	unsigned started = 0;
	for (; started < nw; started++)
		if (pthread_create(&th[started], NULL, worker, &p) != 0)
			break;
	if (!started)
		worker(&p); /* no thread: replay on this one */
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	size_t same = p.count[V_SAME], diff = p.count[V_DIFF], bad = p.count[V_ERR],
	       skip = p.count[V_SKIP];
	if (o->json) {
		json_t *j = json_pack("{s:I,s:I,s:I,s:I,s:I,s:O}", "records", (json_int_t)p.n, "same",
				      (json_int_t)same, "differ", (json_int_t)diff, "errored",
				      (json_int_t)bad, "skipped", (json_int_t)skip, "results", p.rows);
		char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%s\n", s ? s : "{}");
		free(s);
		json_decref(j);
	} else {
		printf("=== replay: %zu/%zu same (%zu differ, %zu errored, %zu skipped) ===\n", same,
		       same + diff + bad, diff, bad, skip);
	}
	fflush(stdout);
	rc = diff || bad ? EXIT_FAIL : EXIT_OK;
out:
	sbx_runtime_free(p.rt);
	json_decref(p.rows);
	for (size_t i = 0; i < p.n; i++) {
		json_decref(p.recs[i]);
		free(p.bad[i]);
	}
	free(p.recs);
	free(p.bad);
	free(provider);
	if (p.out)
		fclose(p.out);
	pthread_mutex_destroy(&p.mu);
	return rc;
}
