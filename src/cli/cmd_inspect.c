/* SPDX-License-Identifier: MIT */
/*
 * `sbx inspect ID [--json]`: one sandbox without listing the others, its
 * listing row (sbx_sandbox_info_get) and, where the backend can say, what it
 * uses now (sbx_sandbox_stats).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/fs.h"
#include "cli.h"

static const char inspect_help[] =
	"usage: sbx inspect [--json] ID\n\n"
	"Show one sandbox: its backend, image, state, init pid (local), when it was\n"
	"created and when it expires, its labels, and the CPU, memory and disk it\n"
	"uses now where the backend can say. --json prints one object: the fields of\n"
	"'sbx ls --json' and \"stats\" (null when the backend cannot say).\n"
	"Exit status: 0, 3 no such sandbox.\n";

static void print_time(const char *key, double t, double now)
{
	if (t <= 0) {
		printf("%-10s never\n", key);
		return;
	}
	char when[64] = "?";
	time_t s = (time_t)t;
	struct tm tm;
	if (gmtime_r(&s, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	double d = t - now;
	printf("%-10s %s (%s%.0f s%s)\n", key, when, d > 0 ? "in " : "", d > 0 ? d : -d, d > 0 ? "" : " ago");
}

static void print_bytes(const char *key, unsigned long long b, const char *rest)
{
	printf("%-10s %.1f MiB%s\n", key, (double)b / (1 << 20), rest);
}

static void print_text(const sbx_sandbox_info *in, const sbx_stats *st)
{
	double now = sbx__now_real();
	printf("%-10s %s\n%-10s %s\n%-10s %s\n", "id", in->id, "backend", in->provider ? in->provider : "",
	       "image", in->image ? in->image : "");
	printf("%-10s %s%s\n", "state", in->state ? in->state : "",
	       in->leaked ? " (leaked: 'sbx gc' removes it)" : "");
	if (in->pid > 0)
		printf("%-10s %d\n", "pid", (int)in->pid);
	print_time("created", in->created_at, now);
	print_time("expires", in->expires_at, now);
	printf("%-10s", "labels");
	for (size_t k = 0; in->labels && in->labels[k]; k++)
		printf("%s%s", k ? "," : " ", in->labels[k]);
	printf("\n");
	if (!st)
		return;
	printf("%-10s %.2f s\n", "cpu", st->cpu_s);
	char rest[64];
	snprintf(rest, sizeof(rest), " (%.1f MiB of it page cache)", (double)st->mem_cache_bytes / (1 << 20));
	print_bytes("memory", st->mem_bytes, rest);
	if (st->disk_total_bytes)
		snprintf(rest, sizeof(rest), " of %.1f MiB", (double)st->disk_total_bytes / (1 << 20));
	else
		rest[0] = '\0';
	print_bytes("disk", st->disk_bytes, rest);
}

static void print_json(const sbx_sandbox_info *in, const sbx_stats *st)
{
	json_t *o = cli_info_json(in);
	json_object_set_new(o, "stats",
			    st ? json_pack("{s:f, s:I, s:I, s:I, s:I}", "cpu_s", st->cpu_s, "mem_bytes",
					   (json_int_t)st->mem_bytes, "mem_cache_bytes", (json_int_t)st->mem_cache_bytes,
					   "disk_bytes", (json_int_t)st->disk_bytes, "disk_total_bytes",
					   (json_int_t)st->disk_total_bytes)
			       : json_null());
	char *s = json_dumps(o, JSON_INDENT(2));
	printf("%s\n", s ? s : "{}");
	free(s);
	json_decref(o);
}

int cmd_inspect(int argc, char **argv)
{
	int json = 0;
	const char *id = NULL;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", inspect_help);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (argv[i][0] == '-' || id) {
			return cli_usage_error("inspect", "unexpected argument %s", argv[i]);
		} else {
			id = argv[i];
		}
	}
	if (!id)
		return cli_usage_error("inspect", "missing ID");
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	sbx_sandbox *sb = NULL;
	sbx_sandbox_info *in = NULL;
	sbx_error *err = NULL;
	int code = EXIT_OK;
	if (sbx_sandbox_open(&sb, rt, NULL, id, &err) < 0 || sbx_sandbox_info_get(&in, sb, &err) < 0) {
		code = cli_fail("inspect", err);
		goto out;
	}
	/* A dead one, or a backend that cannot say: the row alone. */
	sbx_stats st;
	int have = sbx_sandbox_stats(&st, sb, NULL) == 0;
	if (json)
		print_json(in, have ? &st : NULL);
	else
		print_text(in, have ? &st : NULL);
out:
	if (in)
		sbx_sandbox_info_free(in, 1);
	sbx_sandbox_free(sb);
	sbx_runtime_free(rt);
	return code;
}
