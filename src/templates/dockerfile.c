/* SPDX-License-Identifier: MIT */
/*
 * Dockerfile parsing: parser directives (syntax, escape), comments, line
 * continuations, here-documents, stages (FROM ... AS name, ARGs before FROM).
 * The result is a list of instructions as written; dockerfile_eval.c turns
 * each into a step once the variables in scope are known. Every error names
 * FILE:LINE and what was expected.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/str.h"
#include "templates_int.h"

static const struct {
	const char *kw;
	enum df_kind kind;
} keywords[] = {
	{ "FROM", DF_FROM }, { "RUN", DF_RUN }, { "COPY", DF_COPY }, { "ADD", DF_ADD },
	{ "WORKDIR", DF_WORKDIR }, { "ENV", DF_ENV }, { "ARG", DF_ARG }, { "USER", DF_USER },
	{ "SHELL", DF_SHELL }, { "LABEL", DF_LABEL }, { "EXPOSE", DF_EXPOSE }, { "CMD", DF_CMD },
	{ "ENTRYPOINT", DF_ENTRYPOINT }, { "VOLUME", DF_VOLUME }, { "STOPSIGNAL", DF_STOPSIGNAL },
	{ "HEALTHCHECK", DF_HEALTHCHECK }, { "ONBUILD", DF_ONBUILD }, { "MAINTAINER", DF_MAINTAINER },
};

struct lines {
	char **v;
	size_t n;
};

struct parser {
	const char *label;
	struct lines l;
	size_t i;
	char esc;
	struct df_insn *insns;
	size_t n;
};

static char *skip_ws(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static bool blank_or_comment(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return !*s || *s == '#';
}

/* "# key=value" at the top of the file. */
static int directives(struct parser *p, sbx_error **err)
{
	for (size_t i = 0; i < p->l.n; i++) {
		char *s = p->l.v[i];
		if (*s != '#')
			return 0;
		s = skip_ws(s + 1);
		char *eq = strchr(s, '=');
		if (!eq)
			return 0;
		_cleanup_free_ char *key = sbx__str_lower(sbx__str_trim(xstrndup(s, (size_t)(eq - s))));
		_cleanup_free_ char *val = sbx__str_trim(xstrdup(eq + 1));
		for (const char *k = key; *k; k++)
			if (!isalnum((unsigned char)*k))
				return 0;
		if (strcmp(key, "escape") == 0) {
			if (strcmp(val, "\\") != 0 && strcmp(val, "`") != 0)
				return sbx_error_set(err, -EINVAL, "%s:%zu: escape directive must be '\\' or '`', not '%s'",
						     p->label, i + 1, val);
			p->esc = val[0];
		} else if (strcmp(key, "syntax") != 0 && strcmp(key, "check") != 0) {
			return 0;
		}
	}
	return 0;
}

/* Right-trims; returns true (and drops it) when the line ends with the escape char. */
static bool continues(char *s, char esc)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n && s[n - 1] == esc) {
		s[n - 1] = '\0';
		return true;
	}
	return false;
}

/* Joins one logical line starting at p->i; advances p->i past it. */
static char *logical_line(struct parser *p)
{
	sbx_buf b;
	sbx__buf_init(&b, SBX_DF_MAX);
	bool first = true;
	while (p->i < p->l.n) {
		char *line = p->l.v[p->i++];
		if (!first && blank_or_comment(line))
			continue;
		_cleanup_free_ char *cp = xstrdup(first ? skip_ws(line) : line);
		first = false;
		bool more = continues(cp, p->esc);
		sbx__buf_append(&b, cp, strlen(cp));
		if (!more)
			break;
	}
	return sbx__str_trim(sbx__buf_steal(&b, NULL));
}

static bool marker_char(char c)
{
	return c && !isspace((unsigned char)c) && !strchr("'\"<>;|&()`", c);
}

/* Finds the next `<<[-]["']NAME["']` in s from *pos outside quotes. */
static bool next_marker(const char *s, size_t *pos, char **name, bool *strip, bool *quoted,
			size_t *start)
{
	char q = 0;
	for (size_t i = *pos; s[i]; i++) {
		if (q) {
			if (s[i] == q)
				q = 0;
			continue;
		}
		if (s[i] == '\'' || s[i] == '"') {
			q = s[i];
			continue;
		}
		if (s[i] != '<' || s[i + 1] != '<' || s[i + 2] == '<' || (i && s[i - 1] == '<'))
			continue;
		size_t j = i + 2;
		*strip = s[j] == '-';
		if (*strip)
			j++;
		char oq = (s[j] == '\'' || s[j] == '"') ? s[j++] : 0;
		size_t st = j;
		while (marker_char(s[j]))
			j++;
		if (j == st || (oq && s[j] != oq))
			continue;
		*name = xstrndup(s + st, j - st);
		*quoted = oq != 0;
		*start = i;
		*pos = j + (oq ? 1 : 0);
		return true;
	}
	return false;
}

static bool exec_form(const char *args)
{
	return args[0] == '[';
}

static int read_heredocs(struct parser *p, struct df_insn *in, sbx_error **err)
{
	size_t pos = 0, start;
	char *name;
	bool strip, quoted;
	while (next_marker(in->args, &pos, &name, &strip, &quoted, &start)) {
		sbx_buf body, raw;
		sbx__buf_init(&body, SBX_DF_MAX);
		sbx__buf_init(&raw, SBX_DF_MAX);
		bool done = false;
		while (p->i < p->l.n && !done) {
			const char *line = p->l.v[p->i++];
			const char *t = line;
			if (strip)
				while (*t == '\t')
					t++;
			sbx__buf_printf(&raw, "%s\n", line);
			if (strcmp(t, name) == 0)
				done = true;
			else
				sbx__buf_printf(&body, "%s\n", t);
		}
		if (!done) {
			sbx__buf_free(&body);
			sbx__buf_free(&raw);
			int r = sbx_error_set(err, -EINVAL, "%s:%d: heredoc <<%s is not terminated "
					      "(expected a line '%s')", p->label, in->line, name, name);
			free(name);
			return r;
		}
		in->heredocs = xrealloc(in->heredocs, (in->n_heredocs + 1) * sizeof(*in->heredocs));
		in->heredocs[in->n_heredocs++] = (struct df_heredoc){
			.name = name, .body = sbx__buf_steal(&body, NULL),
			.raw = sbx__buf_steal(&raw, NULL), .expand = !quoted,
		};
	}
	return 0;
}

static int parse_insn(struct parser *p, struct df_insn *in, sbx_error **err)
{
	in->line = (int)p->i + 1;
	_cleanup_free_ char *text = logical_line(p);
	size_t kl = strcspn(text, " \t");
	in->keyword = xstrndup(text, kl);
	for (char *k = in->keyword; *k; k++)
		*k = (char)toupper((unsigned char)*k);
	in->args = xstrdup(skip_ws(text + kl));
	size_t k = 0;
	while (k < SBX_ARRAY_SIZE(keywords) && strcmp(keywords[k].kw, in->keyword) != 0)
		k++;
	if (k == SBX_ARRAY_SIZE(keywords))
		return sbx_error_set(err, -EINVAL, "%s:%d: unknown instruction '%.40s' (expected FROM, RUN, "
				     "COPY, ADD, WORKDIR, ENV, ARG, USER, SHELL, LABEL, EXPOSE, CMD, "
				     "ENTRYPOINT, ...)", p->label, in->line, in->keyword);
	in->kind = keywords[k].kind;
	if (!*in->args)
		return sbx_error_set(err, -EINVAL, "%s:%d: %s needs at least one argument", p->label,
				     in->line, in->keyword);
	if ((in->kind == DF_RUN || in->kind == DF_COPY || in->kind == DF_ADD) && !exec_form(in->args))
		return read_heredocs(p, in, err);
	return 0;
}

/* FROM [--platform=P] IMAGE [AS NAME]: the stage name, checked. */
static int stage_of(struct parser *p, const struct df_insn *in, struct df_stage *s, sbx_error **err)
{
	char *words[4] = { 0 };
	size_t n = 0;
	_cleanup_free_ char *cp = xstrdup(in->args);
	for (char *save = NULL, *w = strtok_r(cp, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == 0 && sbx__str_startswith(w, "--"))
			continue;
		if (n == 4)
			break;
		words[n++] = w;
	}
	if (n == 3 && strcasecmp(words[1], "as") == 0) {
		s->name = sbx__str_lower(xstrdup(words[2]));
		for (const char *c = s->name; *c; c++)
			if (!isalnum((unsigned char)*c) && !strchr("-_.", *c))
				return sbx_error_set(err, -EINVAL, "%s:%d: bad stage name '%s' (expected "
						     "letters, digits, '-', '_' or '.')", p->label, in->line, words[2]);
	} else if (n != 1) {
		return sbx_error_set(err, -EINVAL, "%s:%d: FROM expects 'IMAGE [AS NAME]'", p->label, in->line);
	}
	return 0;
}

static void split_lines(struct lines *l, char *text)
{
	char *s = text;
	for (;;) {
		char *nl = strchr(s, '\n');
		if (nl)
			*nl = '\0';
		size_t n = strlen(s);
		if (n && s[n - 1] == '\r')
			s[n - 1] = '\0';
		l->v = xrealloc(l->v, (l->n + 1) * sizeof(char *));
		l->v[l->n++] = s;
		if (!nl)
			break;
		s = nl + 1;
	}
}

static int build_stages(struct df_file *f, struct parser *p, sbx_error **err)
{
	for (size_t i = 0; i < f->n_insns; i++) {
		const struct df_insn *in = &f->insns[i];
		if (in->kind != DF_FROM) {
			if (f->n_stages)
				f->stages[f->n_stages - 1].n++;
			else if (in->kind == DF_ARG)
				f->n_meta++;
			else
				return sbx_error_set(err, -EINVAL, "%s:%d: expected FROM before %s", p->label,
						     in->line, in->keyword);
			continue;
		}
		f->stages = xrealloc(f->stages, (f->n_stages + 1) * sizeof(*f->stages));
		struct df_stage *s = &f->stages[f->n_stages++];
		*s = (struct df_stage){ .from = in, .first = i + 1 };
		int r = stage_of(p, in, s, err);
		if (r < 0)
			return r;
		for (size_t k = 0; s->name && k + 1 < f->n_stages; k++)
			if (f->stages[k].name && strcmp(f->stages[k].name, s->name) == 0)
				return sbx_error_set(err, -EINVAL, "%s:%d: stage name '%s' is already used on line %d",
						     p->label, in->line, s->name, f->stages[k].from->line);
	}
	if (!f->n_stages)
		return sbx_error_set(err, -EINVAL, "%s: no FROM instruction (expected 'FROM IMAGE')", p->label);
	return 0;
}

int sbx__df_parse(struct df_file **out, const char *text, size_t len, const char *label,
		  sbx_error **err)
{
	if (memchr(text, '\0', len))
		return sbx_error_set(err, -EINVAL, "%s: binary data (NUL byte) in a Dockerfile", label);
	_cleanup_free_ char *copy = xstrndup(text, len);
	struct parser p = { .label = label, .esc = '\\' };
	split_lines(&p.l, copy);
	struct df_file *f = xcalloc(1, sizeof(*f));
	f->path = xstrdup(label);
	int r = directives(&p, err);
	while (r == 0 && p.i < p.l.n) {
		if (blank_or_comment(p.l.v[p.i])) {
			p.i++;
			continue;
		}
		f->insns = xrealloc(f->insns, (f->n_insns + 1) * sizeof(*f->insns));
		struct df_insn *in = &f->insns[f->n_insns++];
		memset(in, 0, sizeof(*in));
		r = parse_insn(&p, in, err);
	}
	f->escape = p.esc;
	free(p.l.v);
	if (r == 0)
		r = build_stages(f, &p, err);
	if (r < 0) {
		sbx__df_free(f);
		return r;
	}
	*out = f;
	return 0;
}

void sbx__df_free(struct df_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_insns; i++) {
		struct df_insn *in = &f->insns[i];
		free(in->keyword);
		free(in->args);
		for (size_t k = 0; k < in->n_heredocs; k++) {
			free(in->heredocs[k].name);
			free(in->heredocs[k].body);
			free(in->heredocs[k].raw);
		}
		free(in->heredocs);
	}
	for (size_t i = 0; i < f->n_stages; i++)
		free(f->stages[i].name);
	free(f->stages);
	free(f->insns);
	free(f->path);
	free(f);
}

int sbx__df_stage_index(const struct df_file *f, const char *name, size_t before)
{
	if (!name || !*name)
		return -1;
	for (size_t i = 0; i < before && i < f->n_stages; i++)
		if (f->stages[i].name && strcasecmp(f->stages[i].name, name) == 0)
			return (int)i;
	uint64_t idx;
	if (sbx__parse_u64(&idx, name) == 0 && idx < before && idx < f->n_stages)
		return (int)idx;
	return -1;
}
