/* SPDX-License-Identifier: MIT */
/* sudo's command line, as the sandbox's front-end understands it (args.c). */
#ifndef SBX_SUDO_ARGS_H
#define SBX_SUDO_ARGS_H

#include <stddef.h>

enum sudo_mode {
	SUDO_RUN,      /* sudo [opts] CMD... */
	SUDO_LOGIN,    /* -i: the target's login shell (CMD through it) */
	SUDO_SHELL,    /* -s: $SHELL (CMD through it) */
	SUDO_VALIDATE, /* -v: may we? */
	SUDO_LIST,     /* -l: what may we run? */
	SUDO_RESET,    /* -k / -K alone: no credentials are cached, nothing to do */
	SUDO_HELP,     /* -h */
	SUDO_VERSION,  /* -V */
};

#define SUDO_MAX_SET 64

struct sudo_args {
	enum sudo_mode mode;
	const char *user;          /* -u (NULL = root); "#N" is uid N */
	const char *group;         /* -g */
	const char *chdir;         /* -D */
	const char *preserve_list; /* --preserve-env=A,B */
	int preserve_env;          /* -E / --preserve-env */
	int set_home;              /* -H */
	int background;            /* -b */
	int reset;                 /* -k / -K */
	const char *set[SUDO_MAX_SET]; /* VAR=value operands before the command */
	int n_set;
	char **cmd;                /* the command (NULL-terminated), n_cmd may be 0 */
	int n_cmd;
};

/* Parses argv[1..]. 0, or -1 with err filled (the message sudo prints,
 * without the "sudo: " prefix). */
int sudo_args_parse(struct sudo_args *a, int argc, char **argv, char *err, size_t errlen);

/* The string -s and -i give the shell's -c: each argument with every byte
 * but [A-Za-z0-9_$-] backslash-escaped, joined by spaces (as sudo does).
 * Writes at most n bytes with the NUL; returns the length needed. */
size_t sudo_args_join_escaped(char *out, size_t n, char *const *cmd, int n_cmd);

#endif
