/* SPDX-License-Identifier: MIT */
/*
 * sudo's options, as E2B-style scripts use them: -u -g -E -H -i -s -n -b
 * -D -v -l -k -K -h -V, the long forms, --preserve-env=LIST, VAR=value
 * before the command, and options that take no effect without a password
 * (-S -A -p PROMPT -P -B). Options end at the first operand or "--", as
 * sudo's own "+" getopt does. Anything else is an error naming it.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"

/* Short options that take an argument, and what they fill. */
static int arg_slot(struct sudo_args *a, char c, const char ***slot)
{
	static const char *ignored;
	switch (c) {
	case 'u': *slot = &a->user; break;
	case 'g': *slot = &a->group; break;
	case 'D': *slot = &a->chdir; break;
	case 'p': *slot = &ignored; break; /* prompt: there is none */
	case 'C': *slot = &ignored; break; /* close-from */
	default: *slot = NULL; break;
	}
	return *slot != NULL;
}

static int flag(struct sudo_args *a, char c)
{
	switch (c) {
	case 'E': a->preserve_env = 1; return 0;
	case 'H': a->set_home = 1; return 0;
	case 'i': a->mode = SUDO_LOGIN; return 0;
	case 's': a->mode = SUDO_SHELL; return 0;
	case 'b': a->background = 1; return 0;
	case 'v': a->mode = SUDO_VALIDATE; return 0;
	case 'l': a->mode = SUDO_LIST; return 0;
	case 'h': a->mode = SUDO_HELP; return 0;
	case 'V': a->mode = SUDO_VERSION; return 0;
	case 'k': case 'K': a->reset = 1; return 0; /* nothing is cached */
	case 'n': case 'S': case 'A': case 'P': case 'B': /* no password is ever asked */
		return 0;
	default: return -1;
	}
}

static const struct {
	const char *name;
	char c;
} longs[] = {
	{ "user", 'u' }, { "group", 'g' }, { "chdir", 'D' }, { "prompt", 'p' }, { "close-from", 'C' },
	{ "preserve-env", 'E' }, { "set-home", 'H' }, { "login", 'i' }, { "shell", 's' },
	{ "background", 'b' }, { "validate", 'v' }, { "list", 'l' }, { "help", 'h' }, { "version", 'V' },
	{ "reset-timestamp", 'k' }, { "remove-timestamp", 'K' }, { "non-interactive", 'n' },
	{ "stdin", 'S' }, { "askpass", 'A' }, { "preserve-groups", 'P' }, { "bell", 'B' },
};

static int long_opt(struct sudo_args *a, const char *opt, int argc, char **argv, int *i, char *err, size_t errlen)
{
	const char *eq = strchr(opt, '=');
	size_t n = eq ? (size_t)(eq - opt) : strlen(opt);
	for (size_t k = 0; k < sizeof(longs) / sizeof(longs[0]); k++) {
		if (strlen(longs[k].name) != n || strncmp(longs[k].name, opt, n) != 0)
			continue;
		const char **slot;
		if (longs[k].c == 'E' && eq) {
			a->preserve_list = eq + 1;
			return 0;
		}
		if (!arg_slot(a, longs[k].c, &slot)) {
			if (eq) {
				snprintf(err, errlen, "option '--%s' doesn't allow an argument", longs[k].name);
				return -1;
			}
			return flag(a, longs[k].c);
		}
		if (eq)
			*slot = eq + 1;
		else if (*i + 1 < argc)
			*slot = argv[++*i];
		else {
			snprintf(err, errlen, "option '--%s' requires an argument", longs[k].name);
			return -1;
		}
		return 0;
	}
	snprintf(err, errlen, "unrecognized option '--%.*s' (sbx's sudo supports -u -g -E -H -i -s -n -b -D -v -l -k "
		 "-h -V and their long forms)", (int)n, opt);
	return -1;
}

int sudo_args_parse(struct sudo_args *a, int argc, char **argv, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	int i = 1;
	for (; i < argc; i++) {
		const char *s = argv[i];
		if (strcmp(s, "--") == 0) {
			i++;
			break;
		}
		if (s[0] != '-' || !s[1])
			break;
		if (s[1] == '-') {
			if (long_opt(a, s + 2, argc, argv, &i, err, errlen) < 0)
				return -1;
			continue;
		}
		for (const char *c = s + 1; *c; c++) {
			const char **slot;
			if (arg_slot(a, *c, &slot)) {
				if (c[1])
					*slot = c + 1;
				else if (i + 1 < argc)
					*slot = argv[++i];
				else {
					snprintf(err, errlen, "option requires an argument -- '%c'", *c);
					return -1;
				}
				break;
			}
			if (flag(a, *c) < 0) {
				snprintf(err, errlen, "invalid option -- '%c' (sbx's sudo supports -u -g -E -H -i -s -n -b -D "
					 "-v -l -k -h -V and their long forms)", *c);
				return -1;
			}
		}
	}
	/* VAR=value operands set the command's environment, as with sudo. */
	for (; i < argc && strchr(argv[i], '=') && argv[i][0] != '=' && argv[i][0] != '-'; i++) {
		if (a->n_set == SUDO_MAX_SET) {
			snprintf(err, errlen, "too many VAR=value operands (at most %d)", SUDO_MAX_SET);
			return -1;
		}
		a->set[a->n_set++] = argv[i];
	}
	a->cmd = argv + i;
	a->n_cmd = argc - i;
	if (a->mode == SUDO_RUN && a->n_cmd == 0 && a->reset)
		a->mode = SUDO_RESET;
	if (a->mode == SUDO_RUN && a->n_cmd == 0) {
		snprintf(err, errlen, "no command given (usage: sudo [-u user] [-E] [-i | -s] [command [arg ...]])");
		return -1;
	}
	return 0;
}

size_t sudo_args_join_escaped(char *out, size_t n, char *const *cmd, int n_cmd)
{
	size_t k = 0;
#define PUT(ch)                      \
	do {                         \
		if (k + 1 < n)       \
			out[k] = (ch); \
		k++;                 \
	} while (0)
	for (int i = 0; i < n_cmd; i++) {
		if (i)
			PUT(' ');
		for (const char *p = cmd[i]; *p; p++) {
			unsigned char ch = (unsigned char)*p;
			int plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
				    ch == '_' || ch == '-' || ch == '$';
			if (!plain)
				PUT('\\');
			PUT((char)ch);
		}
	}
#undef PUT
	if (n)
		out[k < n ? k : n - 1] = '\0';
	return k;
}
