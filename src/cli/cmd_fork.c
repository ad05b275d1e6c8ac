/* SPDX-License-Identifier: MIT */
/* `sbx fork ID -n N` and `sbx snapshot ID [NAME]`: new sandboxes from a live
 * sandbox's file system, now or later. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "../util/str.h"
#include "cli.h"

static const char fork_help[] =
	"usage: sbx fork ID [-n N] [--json]\n\n"
	"Create N sandboxes (default 1) whose file systems start as sandbox ID's is\n"
	"now, and print their ids, one a line (--json: {\"parent\":ID,\"children\":[...]}).\n"
	"A file-system fork: processes are not copied; each child starts like a new\n"
	"sandbox with the parent's image, spec and limits, and its own id. The parent\n"
	"is paused while its writable layer is frozen into a read-only layer all the\n"
	"children share, then keeps running. Writes in a child are invisible to the\n"
	"parent and to the other children. Local backend: needs the disk writable\n"
	"layer (btrfs); cost is independent of how many bytes the parent wrote (a\n"
	"reflink copy up to 256 files, else one btrfs snapshot). Remove the children\n"
	"with 'sbx rm'; the shared layer goes with the last of them.\n";

int cmd_fork(int argc, char **argv)
{
	const char *id = NULL;
	unsigned long n = 1;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", fork_help);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "--count")) {
			char *end = NULL;
			if (i + 1 >= argc)
				return cli_usage_error("fork", "-n expects a number");
			errno = 0;
			n = strtoul(argv[++i], &end, 10);
			if (errno || !end || *end || n == 0 || n > 1024)
				return cli_usage_error("fork", "-n expects a number from 1 to 1024, got '%s'", argv[i]);
		} else if (argv[i][0] == '-') {
			return cli_usage_error("fork", "unknown option '%s'", argv[i]);
		} else if (!id) {
			id = argv[i];
		} else {
			return cli_usage_error("fork", "one sandbox ID expected, got '%s' too", argv[i]);
		}
	}
	if (!id)
		return cli_usage_error("fork", "missing ID");
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	sbx_error *err = NULL;
	sbx_sandbox *parent = NULL;
	sbx_sandbox **kids = xcalloc(n, sizeof(*kids));
	int code = EXIT_OK;
	if (sbx_sandbox_open(&parent, rt, NULL, id, &err) < 0 ||
	    sbx_sandbox_fork(kids, n, parent, NULL, &err) < 0) {
		code = cli_fail("fork", err);
		goto out;
	}
	if (json)
		printf("{\"parent\":\"%s\",\"children\":[", sbx_sandbox_id(parent));
	for (size_t i = 0; i < n; i++)
		printf(json ? "%s\"%s\"" : "%s%s\n", json ? (i ? "," : "") : "", sbx_sandbox_id(kids[i]));
	if (json)
		printf("]}\n");
	for (size_t i = 0; i < n; i++)
		sbx_sandbox_free(kids[i]);
out:
	free(kids);
	sbx_sandbox_free(parent);
	sbx_runtime_free(rt);
	return code;
}

static const char snapshot_help[] =
	"usage: sbx snapshot ID [NAME] | sbx snapshot rm NAME...\n\n"
	"Freeze sandbox ID's file system as snapshot NAME (default: a generated\n"
	"snap-... name) and print the name. 'sbx create snapshot:NAME' (or any spec\n"
	"whose image is snapshot:NAME) starts a sandbox from it, with the image the\n"
	"snapshot was taken from. Processes are not kept. The snapshot stays until\n"
	"'sbx snapshot rm NAME'; sandboxes made from it do not depend on it.\n";

int cmd_snapshot(int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("snapshot", "missing ID");
	if (cli_is_help(argv[1])) {
		printf("%s", snapshot_help);
		return EXIT_OK;
	}
	int rm = !strcmp(argv[1], "rm");
	if (rm && argc < 3)
		return cli_usage_error("snapshot", "rm: missing NAME");
	if (!rm && argc > 3)
		return cli_usage_error("snapshot", "expected ID [NAME], got '%s' too", argv[3]);
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	int code = EXIT_OK;
	sbx_error *err = NULL;
	if (rm) {
		for (int i = 2; i < argc; i++) {
			if (sbx_snapshot_remove(rt, NULL, argv[i], &err) < 0)
				code = cli_fail("snapshot rm", err);
			else
				printf("%s\n", argv[i]);
			err = NULL;
		}
	} else {
		sbx_sandbox *sb = NULL;
		char *name = NULL;
		if (sbx_sandbox_open(&sb, rt, NULL, argv[1], &err) < 0 ||
		    sbx_sandbox_snapshot(&name, sb, argc > 2 ? argv[2] : NULL, &err) < 0)
			code = cli_fail("snapshot", err);
		else
			printf("%s\n", name);
		free(name);
		sbx_sandbox_free(sb);
	}
	sbx_runtime_free(rt);
	return code;
}
