/* SPDX-License-Identifier: MIT */
/* `sbx cp`, `sbx rm`, `sbx ls`, `sbx gc`: moving files and managing sandboxes. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sbx/backend.h>
#include <sbx/sys/provider.h>

#include "../util/alloc.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "cli.h"
#include "xpool.h"

static const char cp_help[] =
	"usage: sbx cp SRC DST\n\n"
	"Copy a file or directory tree between the host and a sandbox. Exactly one of\n"
	"SRC and DST is ID:PATH (PATH absolute). Into an existing directory DST the\n"
	"copy lands as DST/basename(SRC); a symlink as DST's last component is never\n"
	"followed. Uploads keep modes and symlinks. Downloads are made safe for the\n"
	"host: files belong to you, with permission bits only (no setuid, setgid or\n"
	"sticky bit, no xattrs or file capabilities, umask applied); a symlink SRC is\n"
	"followed inside the sandbox; FIFOs, sockets and devices are refused (SRC) or\n"
	"skipped with a warning (inside a tree), as are symlinks that would lead out\n"
	"of the copied tree (absolute, or climbing out with ..).\n";

static const char rm_help[] =
	"usage: sbx rm ID... | sbx rm --all\n\n"
	"Destroy sandboxes: processes, mounts, cgroups and state.\n";

static const char ls_help[] =
	"usage: sbx ls [--json] [-l K=V]...\n\n"
	"List sandboxes (local provider), optionally only those with all given labels.\n";

static const char gc_help[] =
	"usage: sbx gc [--backend B] [--run-id R] [--older-than DUR] [--all] [--dry-run] [--json]\n\n"
	"Destroy leaked sandboxes on backend B (default $SBX_BACKEND, else local): those\n"
	"whose processes died, whose creating process died (unless made by 'sbx create'),\n"
	"or whose TTL passed, and what a crash mid-create left. With --run-id, every\n"
	"sandbox labelled sbx.run_id=R counts (a crashed trainer's whole run); with\n"
	"--older-than, only those created longer ago than DUR (30m, 2h). --all: every\n"
	"sandbox matching the filters. --dry-run only lists.\n";

/* Splits "ID:PATH" if it looks like one (PATH absolute, ID has no '/'). */
static int split_remote(const char *s, char **id, const char **path)
{
	const char *colon = strchr(s, ':');
	if (!colon || colon == s || colon[1] != '/' || memchr(s, '/', (size_t)(colon - s)))
		return 0;
	*id = strndup(s, (size_t)(colon - s));
	*path = colon + 1;
	return 1;
}

int cmd_cp(int argc, char **argv)
{
	if (argc == 2 && cli_is_help(argv[1])) {
		printf("%s", cp_help);
		return EXIT_OK;
	}
	if (argc != 3)
		return cli_usage_error("cp", "expected SRC and DST");
	char *sid = NULL, *did = NULL;
	const char *spath = argv[1], *dpath = argv[2];
	int s_remote = split_remote(argv[1], &sid, &spath);
	int d_remote = split_remote(argv[2], &did, &dpath);
	int code;
	if (s_remote == d_remote) {
		code = cli_usage_error("cp", "exactly one of SRC and DST must be ID:/PATH");
		goto out;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		code = EXIT_ENV;
		goto out;
	}
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_open(&sb, rt, NULL, s_remote ? sid : did, &err);
	if (r == 0)
		r = s_remote ? sbx_sandbox_download(sb, spath, dpath, &err)
			     : sbx_sandbox_upload(sb, spath, dpath, &err);
	code = r < 0 ? cli_fail("cp", err) : EXIT_OK;
	sbx_sandbox_free(sb);
	sbx_runtime_free(rt);
out:
	free(sid);
	free(did);
	return code;
}

int cmd_rm(int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("rm", "missing ID");
	if (cli_is_help(argv[1])) {
		printf("%s", rm_help);
		return EXIT_OK;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	int code = EXIT_OK;
	char **ids = NULL;
	if (!strcmp(argv[1], "--all")) {
		sbx_sandbox_info *v = NULL;
		size_t n = 0;
		sbx_error *err = NULL;
		if (sbx_sandbox_list(&v, &n, rt, NULL, NULL, &err) < 0) {
			code = cli_fail("rm", err);
			goto out;
		}
		for (size_t i = 0; i < n; i++)
			sbx__strv_push(&ids, v[i].id);
		sbx_sandbox_info_free(v, n);
	} else {
		for (int i = 1; i < argc; i++)
			sbx__strv_push(&ids, argv[i]);
	}
	for (size_t i = 0; ids && ids[i]; i++) {
		sbx_error *err = NULL;
		if (sbx_sandbox_destroy_id(rt, NULL, ids[i], &err) < 0)
			code = cli_fail("rm", err);
		else
			printf("%s\n", ids[i]);
	}
out:
	sbx__strv_free(ids);
	sbx_runtime_free(rt);
	return code;
}

static void fmt_age(char *out, size_t n, double secs)
{
	if (secs < 120)
		snprintf(out, n, "%.0fs", secs);
	else if (secs < 7200)
		snprintf(out, n, "%.0fm", secs / 60);
	else
		snprintf(out, n, "%.1fh", secs / 3600);
}

json_t *cli_info_json(const sbx_sandbox_info *in)
{
	json_t *labels = json_object();
	for (size_t k = 0; in->labels && in->labels[k]; k++) {
		char *eq = strchr(in->labels[k], '=');
		if (!eq)
			continue;
		char *key = strndup(in->labels[k], (size_t)(eq - in->labels[k]));
		json_object_set_new(labels, key, json_string(eq + 1));
		free(key);
	}
	return json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:b, s:i, s:o}", "id", in->id, "provider",
			 in->provider ? in->provider : "", "image", in->image ? in->image : "", "state",
			 in->state ? in->state : "", "created_at", in->created_at, "expires_at", in->expires_at,
			 "leaked", in->leaked, "pid", (int)in->pid, "labels", labels);
}

int cmd_ls(int argc, char **argv)
{
	int json = 0;
	char **filter = NULL;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", ls_help);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if ((!strcmp(argv[i], "-l") || !strcmp(argv[i], "--label")) && i + 1 < argc) {
			sbx__strv_push(&filter, argv[++i]);
		} else {
			sbx__strv_free(filter);
			return cli_usage_error("ls", "unknown argument %s", argv[i]);
		}
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		sbx__strv_free(filter);
		return EXIT_ENV;
	}
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	int code = EXIT_OK;
	if (sbx_sandbox_list(&v, &n, rt, NULL, (const char *const *)filter, &err) < 0) {
		code = cli_fail("ls", err);
		goto out;
	}
	double now = sbx__now_real();
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr, cli_info_json(&v[i]));
		char *s = json_dumps(arr, JSON_INDENT(2));
		printf("%s\n", s);
		free(s);
		json_decref(arr);
	} else {
		printf("%-14s %-8s %-20s %-6s %s\n", "ID", "STATE", "IMAGE", "AGE", "LABELS");
		for (size_t i = 0; i < n; i++) {
			char age[32];
			fmt_age(age, sizeof(age), now - v[i].created_at);
			printf("%-14s %-8s %-20s %-6s", v[i].id, v[i].leaked ? "leaked" : v[i].state, v[i].image,
			       age);
			for (size_t k = 0; v[i].labels && v[i].labels[k]; k++)
				printf("%s%s", k ? "," : " ", v[i].labels[k]);
			printf("\n");
		}
	}
	sbx_sandbox_info_free(v, n);
out:
	sbx__strv_free(filter);
	sbx_runtime_free(rt);
	return code;
}

int cmd_gc(int argc, char **argv)
{
	int all = 0, dry = 0, json = 0;
	const char *backend = NULL, *run_id = NULL;
	double older = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (cli_is_help(a)) {
			printf("%s", gc_help);
			return EXIT_OK;
		} else if (!strcmp(a, "--all")) {
			all = 1;
		} else if (!strcmp(a, "--dry-run")) {
			dry = 1;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--backend") && v) {
			backend = argv[++i];
		} else if (!strcmp(a, "--run-id") && v) {
			run_id = argv[++i];
		} else if (!strcmp(a, "--older-than") && v) {
			if (sbx__parse_duration(&older, v) < 0)
				return cli_usage_error("gc", "--older-than '%s': expected a duration like 30m or 2h", v);
			i++;
		} else {
			return cli_usage_error("gc", "unknown argument %s", a);
		}
	}
	char *provider = NULL;
	sbx_error *err = NULL;
	if (sbx_backend_resolve(&provider, backend, &err) < 0)
		return cli_fail("gc", err);
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		free(provider);
		return EXIT_ENV;
	}
	sbx_sandbox_info *v = NULL;
	size_t n = 0, removed = 0, failed = 0;
	int code = EXIT_OK;
	char *label = run_id ? xasprintf("sbx.run_id=%s", run_id) : NULL;
	const char *filter[] = { label, NULL };
	if (sbx_sandbox_list(&v, &n, rt, provider, label ? filter : NULL, &err) < 0) {
		code = cli_fail("gc", err);
		goto out;
	}
	double now = sbx__now_real();
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		/* A pooled sandbox is detached: its keeper or taker answers for it. */
		if (!all && !run_id && !v[i].leaked && xpool_orphan(rt, &v[i], dry) != 1)
			continue;
		if (older >= 0 && now - v[i].created_at < older)
			continue;
		if (!dry && sbx_sandbox_destroy_id(rt, provider, v[i].id, &err) < 0) {
			failed++;
			cli_fail("gc", err);
			err = NULL;
			continue;
		}
		removed++;
		json_array_append_new(arr, json_pack("{s:s, s:s}", "id", v[i].id, "state", v[i].state));
		if (!json)
			printf("%s %s (%s)\n", dry ? "would remove" : "removed", v[i].id, v[i].state);
	}
	if (json) {
		char *s = json_dumps(arr, JSON_COMPACT);
		printf("{\"backend\": \"%s\", \"removed\": %s, \"dry_run\": %s, \"failed\": %zu}\n", provider, s,
		       dry ? "true" : "false", failed);
		free(s);
	} else {
		printf("gc: %s %zu of %zu %s sandboxes%s\n", dry ? "would remove" : "removed", removed, n, provider,
		       failed ? " (some failed)" : "");
	}
	json_decref(arr);
	code = failed ? EXIT_FAIL : EXIT_OK;
	sbx_sandbox_info_free(v, n);
	v = NULL;
	/* Warm pools' records of what is gone now, and dead keepers' pools. */
	if (!dry && !label && !strcmp(provider, sbx_provider_host()->name) &&
	    sbx_sandbox_list(&v, &n, rt, provider, NULL, &err) == 0) {
		xpool_sweep(rt, v, n);
		sbx_sandbox_info_free(v, n);
	}
	sbx_error_free(err);
out:
	free(label);
	free(provider);
	sbx_runtime_free(rt);
	return code;
}
