/* SPDX-License-Identifier: MIT */
/* `sbx env --for-workers`: what a launcher forwards to worker machines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/backend.h>

#include "cli.h"

static const char env_help[] =
	"usage: sbx env --for-workers [--backend B] [--json]\n\n"
	"Print the environment a launcher should forward to worker machines for backend B\n"
	"(default: $SBX_BACKEND, $OPENENV_SANDBOX_BACKEND, else local): key-file paths and\n"
	"addresses only, never a secret value. Addresses that embed credentials ('@') are\n"
	"refused. Lines are KEY=VALUE, ready for `env` or a job spec; a note on stderr says\n"
	"where the credential comes from.\n";

int cmd_env(int argc, char **argv)
{
	const char *backend = NULL;
	int workers = 0, json = 0;
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", env_help);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--for-workers")) {
			workers = 1;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
			backend = argv[++i];
		} else {
			return cli_usage_error("env", "unknown argument %s", argv[i]);
		}
	}
	if (!workers)
		return cli_usage_error("env", "say --for-workers (the only mode so far)");
	char *name = NULL, *note = NULL, **lines = NULL;
	sbx_error *err = NULL;
	if (sbx_backend_resolve(&name, backend, &err) < 0)
		return cli_fail("env", err);
	int code = EXIT_OK;
	if (sbx_backend_forward_env(&lines, &note, name, &err) < 0) {
		code = cli_fail("env", err);
		goto out;
	}
	if (json)
		printf("{\"backend\": \"%s\", \"env\": {", name);
	for (size_t i = 0; lines[i]; i++) {
		if (json) {
			char *eq = strchr(lines[i], '=');
			printf("%s\"%.*s\": \"%s\"", i ? ", " : "", (int)(eq - lines[i]), lines[i], eq + 1);
		} else {
			printf("%s\n", lines[i]);
		}
		free(lines[i]);
	}
	if (json)
		printf("}}\n");
	free(lines);
	fprintf(stderr, "sbx env: backend %s: %s\n", name, note);
out:
	free(note);
	free(name);
	return code;
}
