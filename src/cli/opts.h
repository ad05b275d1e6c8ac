/* SPDX-License-Identifier: MIT */
/* Sandbox-spec flags shared by `sbx run` and `sbx create`. */
#ifndef SBX_CLI_OPTS_H
#define SBX_CLI_OPTS_H

#include <stdio.h>
#include <sbx/sbx.h>

struct spec_flags {
	sbx_sandbox_opts o;
	char **env;      /* owned strv */
	char **labels;   /* owned strv */
	char **allow_out, **deny_out; /* owned strv (network=internet egress rules) */
	char *backend;   /* owned canonical --backend name, or NULL */
};

/* Consumes one spec flag at argv[*i] (advancing *i past its value).
 * Returns 1 if consumed, 0 if not a spec flag, or EXIT_USAGE after printing. */
int spec_flag(struct spec_flags *f, const char *cmd, int argc, char **argv, int *i);
void spec_flags_init(struct spec_flags *f);
void spec_flags_free(struct spec_flags *f);
/* Help text for the spec flags. */
extern const char spec_flags_help[];
/* spec_flags_help and the --backend line generated from the registry. */
void spec_flags_print_help(FILE *f);

#endif
