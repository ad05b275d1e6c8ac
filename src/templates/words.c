/* SPDX-License-Identifier: MIT */
/*
 * Docker's word processing for the instructions it substitutes (FROM, COPY,
 * ADD, ENV, ARG, LABEL, WORKDIR, USER, EXPOSE, ...): $VAR and ${VAR} with the
 * :- :+ - + modifiers, single and double quotes, the escape character, and
 * splitting into words on unquoted whitespace. RUN, CMD and ENTRYPOINT are
 * left to the shell.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/str.h"
#include "templates_int.h"

static const char *lookup_in(char *const *v, const char *name, size_t n)
{
	const char *hit = NULL;
	for (size_t i = 0; v && v[i]; i++)
		if (strncmp(v[i], name, n) == 0 && v[i][n] == '=')
			hit = v[i] + n + 1;
	return hit;
}

const char *sbx__df_lookup(const struct df_vars *v, const char *name, size_t n)
{
	if (!v)
		return NULL;
	const char *s = lookup_in(v->env, name, n);
	return s ? s : lookup_in(v->args, name, n);
}

static bool name_char(char c, bool first)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (!first && c >= '0' && c <= '9');
}

struct lex {
	const char *s;
	size_t i;
	char esc;
	const struct df_vars *v;
	char *errmsg;
	bool overflow; /* an expansion outgrew its buffer: an error, never a cut */
};

static void put(struct lex *l, sbx_buf *b, const char *s, size_t n)
{
	if (sbx__buf_append(b, s, n) < 0)
		l->overflow = true;
}

static int expand_word_in_braces(struct lex *l, sbx_buf *out);

/* At l->s[l->i] == '$': appends the expansion (or a literal '$'). */
static int expand_var(struct lex *l, sbx_buf *out)
{
	const char *s = l->s;
	size_t i = l->i + 1;
	if (name_char(s[i], true)) {
		size_t st = i;
		while (name_char(s[i], false))
			i++;
		const char *val = sbx__df_lookup(l->v, s + st, i - st);
		if (val)
			put(l, out, val, strlen(val));
		l->i = i;
		return 0;
	}
	if (s[i] != '{') {
		put(l, out, "$", 1);
		l->i = i;
		return 0;
	}
	size_t st = ++i;
	while (name_char(s[i], i == st))
		i++;
	if (i == st) {
		l->errmsg = xasprintf("bad substitution at '%.20s'", s + l->i);
		return -EINVAL;
	}
	const char *val = sbx__df_lookup(l->v, s + st, i - st);
	char mod = 0;
	bool colon = false;
	if (s[i] == ':' && (s[i + 1] == '-' || s[i + 1] == '+')) {
		colon = true;
		mod = s[i + 1];
		i += 2;
	} else if (s[i] == '-' || s[i] == '+') {
		mod = s[i++];
	} else if (!s[i]) {
		l->errmsg = xasprintf("missing '}' in '%.20s'", s + l->i);
		return -EINVAL;
	} else if (s[i] != '}') {
		l->errmsg = xasprintf("unsupported modifier in '%.20s' (expected ${NAME}, "
				      "${NAME:-word} or ${NAME:+word})", s + l->i);
		return -EINVAL;
	}
	sbx_buf word;
	sbx__buf_init(&word, SBX_DF_MAX);
	l->i = i;
	int r = mod ? expand_word_in_braces(l, &word) : 0;
	if (r == 0 && l->s[l->i] != '}') {
		l->errmsg = xasprintf("missing '}' in '%.20s'", s + st - 2);
		r = -EINVAL;
	}
	if (r < 0) {
		sbx__buf_free(&word);
		return r;
	}
	l->i++;
	bool set = val && (!colon || *val);
	if (mod == '-' && !set)
		put(l, out, word.data ? word.data : "", word.len);
	else if (mod == '+' && set)
		put(l, out, word.data ? word.data : "", word.len);
	else if (mod != '+' && val)
		put(l, out, val, strlen(val));
	sbx__buf_free(&word);
	return 0;
}

/* The word of ${NAME:-word}: up to the matching '}', variables expanded. */
static int expand_word_in_braces(struct lex *l, sbx_buf *out)
{
	while (l->s[l->i] && l->s[l->i] != '}') {
		char c = l->s[l->i];
		if (c == l->esc && l->s[l->i + 1]) {
			put(l, out, l->s + l->i + 1, 1);
			l->i += 2;
		} else if (c == '$') {
			int r = expand_var(l, out);
			if (r < 0)
				return r;
		} else {
			put(l, out, &c, 1);
			l->i++;
		}
	}
	return 0;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A NULL-terminated word list that grows by doubling: pushing one word at a
 * time through strv_push (a length scan each) was quadratic, and a value of
 * 100k words took the fuzzer past its timeout. */
struct wordv {
	char **v;
	size_t n, cap;
};

static int wordv_push(struct wordv *w, const char *s)
{
	if (w->n >= SBX_DF_WORDS_MAX)
		return -E2BIG;
	if (w->n + 2 > w->cap) {
		w->cap = w->cap ? w->cap * 2 : 8;
		w->v = xrealloc(w->v, w->cap * sizeof(char *));
	}
	w->v[w->n++] = xstrdup(s);
	w->v[w->n] = NULL;
	return 0;
}

int sbx__df_words(char ***out, const char *in, char escape, bool split, const struct df_vars *v,
		  char **errmsg_out)
{
	struct lex l = { .s = in, .esc = escape, .v = v };
	struct wordv words = { 0 };
	sbx_buf cur;
	sbx__buf_init(&cur, SBX_DF_WORD_MAX);
	bool have = false;
	int r = 0;
	while (r == 0 && in[l.i]) {
		char c = in[l.i];
		if (split && is_space(c)) {
			if (have) {
				if (wordv_push(&words, cur.data ? cur.data : "") < 0) {
					l.errmsg = xasprintf("splits into more than %u words", SBX_DF_WORDS_MAX);
					r = -E2BIG;
					break;
				}
				cur.len = 0;
				if (cur.data)
					cur.data[0] = '\0';
				have = false;
			}
			l.i++;
			continue;
		}
		have = true;
		if (c == '\'') {
			const char *end = strchr(in + l.i + 1, '\'');
			if (!end) {
				l.errmsg = xstrdup("unterminated single quote");
				r = -EINVAL;
				break;
			}
			put(&l, &cur, in + l.i + 1, (size_t)(end - in - l.i - 1));
			l.i = (size_t)(end - in) + 1;
		} else if (c == '"') {
			l.i++;
			while (r == 0 && in[l.i] && in[l.i] != '"') {
				char d = in[l.i];
				if (d == escape && (in[l.i + 1] == '"' || in[l.i + 1] == '$' ||
						    in[l.i + 1] == escape)) {
					put(&l, &cur, in + l.i + 1, 1);
					l.i += 2;
				} else if (d == '$') {
					r = expand_var(&l, &cur);
				} else {
					put(&l, &cur, &d, 1);
					l.i++;
				}
			}
			if (r == 0 && in[l.i] != '"') {
				l.errmsg = xstrdup("unterminated double quote");
				r = -EINVAL;
			}
			if (r == 0)
				l.i++;
		} else if (c == escape && in[l.i + 1]) {
			put(&l, &cur, in + l.i + 1, 1);
			l.i += 2;
		} else if (c == '$') {
			r = expand_var(&l, &cur);
		} else {
			put(&l, &cur, &c, 1);
			l.i++;
		}
	}
	if (r == 0 && l.overflow) {
		l.errmsg = xasprintf("expands to more than %u KiB", SBX_DF_WORD_MAX >> 10);
		r = -E2BIG;
	}
	if (r == 0 && (have || !split) && wordv_push(&words, cur.data ? cur.data : "") < 0) {
		l.errmsg = xasprintf("splits into more than %u words", SBX_DF_WORDS_MAX);
		r = -E2BIG;
	}
	if (!words.v)
		words.v = xcalloc(1, sizeof(char *));
	sbx__buf_free(&cur);
	if (r < 0) {
		sbx__strv_free(words.v);
		if (errmsg_out)
			*errmsg_out = steal_ptr(&l.errmsg);
		free(l.errmsg);
		return r;
	}
	*out = words.v;
	return 0;
}

int sbx__df_word(char **out, const char *in, char escape, const struct df_vars *v,
		 char **errmsg_out)
{
	char **w = NULL;
	int r = sbx__df_words(&w, in, escape, false, v, errmsg_out);
	if (r < 0)
		return r;
	*out = xstrdup(w[0]);
	sbx__strv_free(w);
	return 0;
}

char *sbx__df_expand_vars(const char *in, char escape, const struct df_vars *v)
{
	struct lex l = { .s = in, .esc = escape, .v = v };
	sbx_buf out;
	sbx__buf_init(&out, SBX_DF_MAX);
	while (in[l.i]) {
		if (in[l.i] == escape && in[l.i + 1] == '$') {
			put(&l, &out, "$", 1);
			l.i += 2;
		} else if (in[l.i] == '$') {
			size_t at = l.i;
			if (expand_var(&l, &out) < 0) {
				free(l.errmsg);
				l.errmsg = NULL;
				put(&l, &out, "$", 1);
				l.i = at + 1;
			}
		} else {
			put(&l, &out, in + l.i, 1);
			l.i++;
		}
	}
	if (l.overflow) {
		sbx__buf_free(&out);
		return NULL;
	}
	char *s = sbx__buf_steal(&out, NULL);
	return s ? s : xstrdup("");
}
