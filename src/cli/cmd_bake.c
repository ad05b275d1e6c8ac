/* SPDX-License-Identifier: MIT */
/*
 * `sbx bake TASKS_DIR (--tasks a,b | --all)`: resolves every task's image
 * ahead of time — a prebuilt docker_image already in the store, a template
 * build of environment/ (cached by alias), or a registry pull — several at a
 * time, with progress on a terminal and a per-task summary.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/alloc.h"
#include "util/str.h"

static const char bake_usage[] =
	"usage: sbx bake TASKS_DIR (--tasks A,B,... | --all) [--force] [--jobs N] [--backend B]\n"
	"                [--connector NAME]\n\n"
	"Builds (or finds) the image of each Harbor task so episodes start without a\n"
	"build: docker_image when it is in the store, else a template build of\n"
	"environment/ (cached: an unchanged task is never built twice), else a pull.\n"
	"Prints one line per task: TASK  IMAGE  built|cached|prebuilt|pulled  SECONDS.\n\n"
	"options:\n"
	"  --tasks A,B,...   tasks (directory names under TASKS_DIR)\n"
	"  --all             every task under TASKS_DIR\n"
	"  --force           rebuild from environment/ even if cached or prebuilt\n"
	"  --jobs N          builds at a time (default 2)\n"
	"  --backend B       where the images go: local (the store), e2b/agentenv\n"
	"                    (E2B templates built through the endpoint's build API),\n"
	"                    or daytona (snapshots sbx-<task>-<digest>: environment/\n"
	"                    uploaded through Daytona's object storage, then built)\n"
	"  --connector NAME  read the tasks as this format (default: each task's own)\n\n"
	"exit status: 0 when every image is ready, 1 otherwise, 2 on bad arguments.\n";

struct bake {
	size_t total, done, failed;
};

static void on_done(size_t i, const sbx_task *t, const sbx_bake_result *r, void *payload)
{
	struct bake *b = payload;
	(void)i;
	b->done++;
	cli_progress_clear();
	if (r->rc < 0) {
		b->failed++;
		printf("  %-32s ERROR  %s\n", t->name, r->error ? r->error : "failed");
	} else {
		printf("  %-32s %-40s %-8s %7.1fs\n", t->name, r->image.image, r->image.how,
		       r->image.seconds);
	}
	fflush(stdout);
	cli_progress("bake", b->done, b->total);
}

int cmd_bake(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { "tasks", required_argument, NULL, 't' },
		{ "all", no_argument, NULL, 'a' }, { "force", no_argument, NULL, 'f' },
		{ "jobs", required_argument, NULL, 'j' }, { "backend", required_argument, NULL, 'b' },
		{ "connector", required_argument, NULL, 'C' }, { NULL, 0, NULL, 0 },
	};
	const char *list = NULL, *backend = NULL, *connector = NULL;
	bool all = false;
	int force = 0;
	long jobs = 2;
	char *end;
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "hj:", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(bake_usage, stdout); return EXIT_OK;
		case 't': list = optarg; break;
		case 'a': all = true; break;
		case 'f': force = 1; break;
		case 'b': backend = optarg; break;
		case 'C': connector = optarg; break;
		case 'j':
			jobs = strtol(optarg, &end, 10);
			if (*end || end == optarg || jobs < 1 || jobs > 64)
				return cli_usage_error("bake", "--jobs: expected 1..64");
			break;
		default:
			return cli_usage_error("bake", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("bake", "expected one TASKS_DIR");
	int cr = cli_check_connector(connector, "bake");
	if (cr)
		return cr;
	if (backend) {
		/* The canonical name becomes the runtime's default: image
		 * resolution follows it (e2b: templates on the endpoint). */
		char *canon = NULL;
		sbx_error *berr = NULL;
		if (sbx_backend_resolve(&canon, backend, &berr) < 0)
			return cli_fail("bake", berr);
		setenv("SBX_BACKEND", canon, 1);
		free(canon);
	}
	const char *dir = argv[optind];
	char **names = NULL;
	int r = cli_select_tasks(&names, "bake", dir, list, all);
	if (r)
		return r;
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		sbx__strv_free(names);
		return EXIT_FAIL;
	}
	size_t n = sbx__strv_len((const char *const *)names);
	struct bake b = { .total = n };
	sbx_task **tasks = xcalloc(n + 1, sizeof(*tasks));
	size_t nt = 0;
	printf("bake | %zu tasks | jobs=%ld%s\n", n, jobs, force ? " | force" : "");
	for (size_t i = 0; i < n; i++) {
		char *td = xasprintf("%s/%s", dir, names[i]);
		sbx_error *err = NULL;
		if (sbx_task_load_as(&tasks[nt], connector, td, &err) < 0) {
			printf("  %-32s ERROR  load: %s\n", names[i], err ? err->msg : "failed");
			b.failed++;
			b.done++;
			sbx_error_free(err);
		} else {
			nt++;
		}
		free(td);
	}
	sbx_bake_result *res = xcalloc(nt + 1, sizeof(*res));
	cli_progress("bake", b.done, b.total);
	sbx_error *err = NULL;
	int rc = EXIT_OK;
	if (nt && sbx_task_bake_batch(res, rt, tasks, nt, (unsigned)jobs, force, on_done, &b,
				      &err) < 0) {
		cli_progress_clear();
		rc = cli_fail("bake", err);
	}
	cli_progress_clear();
	printf("bake: %zu ready, %zu failed\n", n - b.failed, b.failed);
	if (b.failed && rc == EXIT_OK)
		rc = EXIT_FAIL;
	for (size_t i = 0; i < nt; i++) {
		sbx_bake_result_free(&res[i]);
		sbx_task_free(tasks[i]);
	}
	free(res);
	free(tasks);
	sbx__strv_free(names);
	sbx_runtime_free(rt);
	return rc;
}
