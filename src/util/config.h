/* SPDX-License-Identifier: MIT */
/*
 * The configuration knobs: every environment variable sbx reads, in one
 * table (src/util/config.c) that generates `sbx help env` and
 * docs/configuration.md. Code reads the environment only through
 * sbx__env() (scripts/checksrc.sh bans raw getenv() elsewhere in src/).
 */
#ifndef SBX_UTIL_CONFIG_H
#define SBX_UTIL_CONFIG_H

#include <stddef.h>

enum sbx_knob_type {
	SBX_KNOB_STRING,
	SBX_KNOB_CHOICE,      /* one of the words the help names */
	SBX_KNOB_PATH,
	SBX_KNOB_SIZE,        /* sbx__parse_size: 512M, 2G, ... */
	SBX_KNOB_DURATION,    /* sbx__parse_duration: 30, 5m, 1.5h, ... */
	SBX_KNOB_SECONDS,     /* a decimal number of seconds (strtod) */
	SBX_KNOB_INTEGER,
	SBX_KNOB_BOOLEAN,     /* "1" is true */
	SBX_KNOB_LIST,        /* comma-separated */
	SBX_KNOB_SECRET,      /* the value is a secret: prefer its _FILE twin */
	SBX_KNOB_SECRET_FILE, /* the path of a file holding a secret */
};

struct sbx_knob {
	const char *name;
	enum sbx_knob_type type;
	const char *component; /* who reads it: core, local, e2b, cli, ... */
	/* As documented. A default in parentheses describes a computed value
	 * or the absence of one; any other default parses as the type. */
	const char *def;
	const char *help;      /* one line */
};

/* The knobs sbx itself reads, grouped by component, sorted by name within
 * each; and, apart, those only the tests, benchmarks and scripts read. */
extern const struct sbx_knob sbx__knobs[];
extern const size_t sbx__n_knobs;
extern const struct sbx_knob sbx__test_knobs[];
extern const size_t sbx__n_test_knobs;

const char *sbx__knob_type_name(enum sbx_knob_type t);
/* The entry of sbx__knobs named NAME, or NULL. */
const struct sbx_knob *sbx__knob_find(const char *name);

/* getenv(NAME) for a knob of the table. NAME must be a literal the table
 * has (checksrc and tests/unit/util/config check every call); an unknown
 * one is a bug, logged as an error, and still read. */
const char *sbx__env(const char *name);
/* The same for a name computed at run time (a variable of a list, a
 * provider's OPENENV_<B>_... twin): an unknown name is logged at debug. */
const char *sbx__env_dyn(const char *name);
/* A variable the user named (a task.toml ${VAR}, a --build-arg without a
 * value): passed through, not a knob of sbx. */
const char *sbx__env_user(const char *name);

#endif
