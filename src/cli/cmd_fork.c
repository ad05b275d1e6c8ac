/* SPDX-License-Identifier: MIT */
/* `sbx fork ID -n N`: N sandboxes starting from a live sandbox's file system. */
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
	"is paused while its writable layer is snapshotted, then keeps running. Writes\n"
	"in a child are invisible to the parent and to the other children. Local\n"
	"backend: needs the disk writable layer (btrfs); cost is independent of how\n"
	"much the parent wrote. Remove the children with 'sbx rm'.\n";

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
