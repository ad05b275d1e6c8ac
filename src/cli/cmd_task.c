/* SPDX-License-Identifier: MIT */
/*
 * `sbx task check DIR...`: lints task directories with the same loader
 * episodes use (the connector that claims each, or --connector NAME). A DIR
 * no connector claims is taken as a tasks directory and every task in it is
 * checked. Errors name the file and field.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sbx/sys/connector.h>

#include "cli.h"
#include "util/alloc.h"

static const char task_usage[] =
	"usage: sbx task COMMAND [ARGS...]\n\n"
	"commands:\n"
	"  check DIR...    lint task directories (or directories of tasks)\n";

static const char check_usage[] =
	"usage: sbx task check [--strict] [--quiet] [--connector NAME] DIR...\n\n"
	"Loads each task directory the way an episode would (Harbor: instruction.md,\n"
	"task.toml in either schema, environment/, tests/test.sh, solution/solve.sh) and\n"
	"reports errors and warnings. A DIR that is not a task (Harbor: no task.toml) is\n"
	"a directory of tasks: each subdirectory that is one is checked.\n\n"
	"options:\n"
	"  --strict            warnings count as errors\n"
	"  --quiet             print only problems\n"
	"  --connector NAME    read them as this format (default: the one that claims each)\n\n"
	"exit status: 0 when every task loads (and, with --strict, has no warning),\n"
	"1 otherwise, 2 on bad arguments.\n";

struct counts {
	size_t ok, warned, failed;
	bool strict, quiet;
	const char *connector;
};

static void summary_line(const sbx_task *t)
{
	char res[128] = "";
	size_t n = 0;
	if (t->cpus > 0)
		n += (size_t)snprintf(res + n, sizeof(res) - n, " cpus=%g", t->cpus);
	if (t->memory_mb)
		n += (size_t)snprintf(res + n, sizeof(res) - n, " memory=%uM", t->memory_mb);
	if (t->storage_mb)
		snprintf(res + n, sizeof(res) - n, " storage=%uM", t->storage_mb);
	char agent[32] = "none";
	if (t->agent_timeout_sec > 0)
		snprintf(agent, sizeof(agent), "%gs", t->agent_timeout_sec);
	printf("ok    %s: schema %s%s, image %s%s%s,%s agent timeout %s, verifier timeout %gs, "
	       "network %s\n", t->name, t->schema_version ? t->schema_version : "-",
	       t->legacy ? " (legacy)" : "",
	       t->docker_image ? t->docker_image : "from Dockerfile",
	       t->docker_image && t->has_dockerfile ? " (+Dockerfile)" : "",
	       t->has_solution ? "" : ", no solution", res, agent, t->verifier_timeout_sec,
	       t->network_mode);
}

static void check_one(const char *dir, struct counts *c)
{
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	if (sbx_task_load_as(&t, c->connector, dir, &err) < 0) {
		printf("error %s: %s\n", dir, err && err->msg ? err->msg : "failed");
		sbx_error_free(err);
		c->failed++;
		return;
	}
	size_t nw = 0;
	while (t->warnings && t->warnings[nw])
		nw++;
	if (!c->quiet || nw)
		summary_line(t);
	for (size_t i = 0; i < nw; i++)
		printf("  warning: %s\n", t->warnings[i]);
	if (nw)
		c->warned++;
	else
		c->ok++;
	sbx_task_free(t);
}

static int check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' }, { "strict", no_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' }, { "connector", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	struct counts c = { 0 };
	optind = 0;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': fputs(check_usage, stdout); return EXIT_OK;
		case 's': c.strict = true; break;
		case 'q': c.quiet = true; break;
		case 'C': c.connector = optarg; break;
		default: return cli_usage_error("task check", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind == argc)
		return cli_usage_error("task check", "expected at least one DIR");
	int cr = cli_check_connector(c.connector, "task check");
	if (cr)
		return cr;
	const sbx_connector_ops *named = c.connector ? sbx_connector_find(c.connector) : NULL;
	for (int i = optind; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0 || !S_ISDIR(st.st_mode)) {
			printf("error %s: not a directory\n", argv[i]);
			c.failed++;
			continue;
		}
		bool is_task = named ? named->probe(argv[i]) == 1 : sbx_connector_detect(argv[i]) != NULL;
		if (is_task) {
			check_one(argv[i], &c);
			continue;
		}
		char **names = NULL;
		sbx_error *err = NULL;
		if (sbx_task_list(&names, NULL, argv[i], &err) < 0 || !names[0]) {
			printf("error %s: %s\n", argv[i],
			       err ? err->msg : "no task (Harbor: task.toml) here or in any subdirectory");
			sbx_error_free(err);
			sbx_task_names_free(names);
			c.failed++;
			continue;
		}
		for (size_t j = 0; names[j]; j++) {
			char *sub = xasprintf("%s/%s", argv[i], names[j]);
			check_one(sub, &c);
			free(sub);
		}
		sbx_task_names_free(names);
	}
	size_t total = c.ok + c.warned + c.failed;
	printf("%zu task%s: %zu ok, %zu with warnings, %zu with errors\n", total,
	       total == 1 ? "" : "s", c.ok, c.warned, c.failed);
	return c.failed || (c.strict && c.warned) ? EXIT_FAIL : EXIT_OK;
}

int cmd_task(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		fputs(task_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (strcmp(argv[1], "check") == 0)
		return check(argc - 1, argv + 1);
	return cli_usage_error("task", "unknown command '%s'", argv[1]);
}
