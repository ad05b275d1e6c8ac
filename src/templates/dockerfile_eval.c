/* SPDX-License-Identifier: MIT */
/*
 * Evaluating Dockerfile instructions: flags (--from, --chown, --chmod,
 * --network, --mount), exec (JSON) versus shell form, here-documents, and
 * variable substitution in the instructions Docker substitutes. The canonical
 * text of each step (what the layer cache and the template alias hash) is a
 * keyword plus a JSON object with sorted keys.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/str.h"
#include "templates_int.h"

#define _cleanup_json_ _cleanup_(json_decrefp)
#define _cleanup_strv_ _cleanup_(strv_freep)

static void strv_freep(char ***v)
{
	sbx__strv_free(*v);
}

struct ev {
	const struct df_file *f;
	const struct df_insn *in;
	const struct df_vars *v;
	sbx_error **err;
};

__attribute__((format(printf, 2, 3))) static int fail(const struct ev *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = xvasprintf(fmt, ap);
	va_end(ap);
	return sbx_error_set(e->err, -EINVAL, "%s:%d: %s", e->f->path, e->in->line, m);
}

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* A JSON array of strings, or NULL (then the shell form applies). */
static char **json_argv(const char *s)
{
	if (s[0] != '[')
		return NULL;
	_cleanup_json_ json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
	if (!json_is_array(j))
		return NULL;
	char **v = xcalloc(1, sizeof(char *));
	size_t i;
	json_t *x;
	json_array_foreach(j, i, x) {
		if (!json_is_string(x)) {
			sbx__strv_free(v);
			return NULL;
		}
		sbx__strv_push(&v, json_string_value(x));
	}
	return v;
}

/* Splits leading --name[=value] flags off *rest; values are substituted. */
static int take_flags(const struct ev *e, const char **rest, char ***flags)
{
	const char *s = e->in->args;
	while (sbx__str_startswith(s, "--")) {
		size_t n = strcspn(s, " \t");
		_cleanup_free_ char *tok = xstrndup(s + 2, n - 2);
		char *eq = strchr(tok, '=');
		_cleanup_free_ char *val = NULL, *msg = NULL;
		if (eq && sbx__df_word(&val, eq + 1, e->f->escape, e->v, &msg) < 0)
			return fail(e, "%s flag --%s: %s", e->in->keyword, tok, msg);
		if (eq)
			*eq = '\0';
		_cleanup_free_ char *kv = val ? xasprintf("%s=%s", tok, val) : xstrdup(tok);
		sbx__strv_push(flags, kv);
		s += n;
		while (*s == ' ' || *s == '\t')
			s++;
	}
	*rest = s;
	return 0;
}

static const char *flag(char *const *flags, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; flags && flags[i]; i++)
		if (strncmp(flags[i], name, n) == 0 && (flags[i][n] == '=' || !flags[i][n]))
			return flags[i][n] ? flags[i] + n + 1 : "";
	return NULL;
}

/* Every flag must be one of ALLOWED (NULL-terminated). */
static int check_flags(const struct ev *e, char *const *flags, const char *const *allowed)
{
	for (size_t i = 0; flags && flags[i]; i++) {
		size_t n = strcspn(flags[i], "=");
		bool ok = false;
		for (size_t k = 0; allowed[k] && !ok; k++)
			ok = strlen(allowed[k]) == n && strncmp(allowed[k], flags[i], n) == 0;
		if (!ok)
			return fail(e, "%s does not support the flag --%.*s", e->in->keyword, (int)n, flags[i]);
	}
	return 0;
}

static int eval_run(const struct ev *e, struct df_step *s, json_t *j)
{
	_cleanup_strv_ char **flags = NULL;
	const char *rest;
	int r = take_flags(e, &rest, &flags);
	static const char *const allowed[] = { "mount", "network", "security", NULL };
	if (r < 0 || (r = check_flags(e, flags, allowed)) < 0)
		return r;
	const char *net = flag(flags, "network"), *mnt = flag(flags, "mount"), *sec = flag(flags, "security");
	if (net && strcmp(net, "default") != 0 && strcmp(net, "host") != 0 && strcmp(net, "none") != 0)
		return fail(e, "RUN --network=%s (expected default, none or host)", net);
	s->network = !net || !strcmp(net, "default") ? -1 : !strcmp(net, "host");
	if (mnt && !strstr(mnt, "type=cache") && !strstr(mnt, "type=tmpfs"))
		return fail(e, "RUN --mount=%s is not supported (only type=cache and type=tmpfs, "
			    "which build without the mount)", mnt);
	if (sec && strcmp(sec, "sandbox") != 0)
		return fail(e, "RUN --security=%s is not supported", sec);
	if (!*rest)
		return fail(e, "RUN needs a command");
	if ((s->argv = json_argv(rest))) {
		if (!s->argv[0])
			return fail(e, "RUN [] needs a command");
		json_object_set_new(j, "argv", strv_json(s->argv));
	} else if (e->in->n_heredocs) {
		const struct df_heredoc *h = &e->in->heredocs[0];
		/* "RUN <<EOF" alone: the body is the script. Otherwise the shell gets
		 * the line and the here-documents as written. */
		bool alone = e->in->n_heredocs == 1 && rest[0] == '<' && rest[1] == '<' &&
			     !strpbrk(rest + 2, " \t");
		if (alone) {
			s->shell = xstrdup(h->body);
		} else {
			sbx_buf b;
			sbx__buf_init(&b, SBX_DF_MAX);
			sbx__buf_printf(&b, "%s\n", rest);
			for (size_t i = 0; i < e->in->n_heredocs; i++)
				sbx__buf_printf(&b, "%s", e->in->heredocs[i].raw);
			s->shell = sbx__buf_steal(&b, NULL);
		}
		json_object_set_new(j, "shell", json_string(s->shell));
	} else {
		s->shell = xstrdup(rest);
		json_object_set_new(j, "shell", json_string(s->shell));
	}
	json_object_set_new(j, "flags", strv_json(flags));
	return 0;
}

static int eval_cmd(const struct ev *e, struct df_step *s, json_t *j)
{
	const char *a = e->in->args;
	if ((s->argv = json_argv(a))) {
		json_object_set_new(j, "argv", strv_json(s->argv));
		return 0;
	}
	if (e->in->kind == DF_SHELL)
		return fail(e, "SHELL needs the exec form, e.g. SHELL [\"/bin/bash\", \"-c\"]");
	s->shell = xstrdup(a);
	json_object_set_new(j, "shell", json_string(s->shell));
	return 0;
}

static bool is_url(const char *s)
{
	return strstr(s, "://") || sbx__str_startswith(s, "git@");
}

static int eval_copy(const struct ev *e, struct df_step *s, json_t *j)
{
	_cleanup_strv_ char **flags = NULL;
	const char *rest;
	int r = take_flags(e, &rest, &flags);
	static const char *const copy_flags[] = { "from", "chown", "chmod", "link", NULL };
	static const char *const add_flags[] = { "chown", "chmod", "link", NULL };
	if (r < 0 || (r = check_flags(e, flags, e->in->kind == DF_COPY ? copy_flags : add_flags)) < 0)
		return r;
	_cleanup_strv_ char **words = json_argv(rest);
	_cleanup_free_ char *msg = NULL;
	if (!words && sbx__df_words(&words, rest, e->f->escape, true, e->v, &msg) < 0)
		return fail(e, "%s: %s", e->in->keyword, msg);
	size_t n = sbx__strv_len((const char *const *)words);
	if (n < 2)
		return fail(e, "%s expects 'SRC... DEST'", e->in->keyword);
	for (size_t i = 0; i + 1 < n; i++) {
		const char *w = words[i];
		if (sbx__str_startswith(w, "<<")) {
			const char *name = w + 2 + (w[2] == '-');
			bool found = false;
			for (size_t k = 0; k < e->in->n_heredocs && !found; k++)
				found = strcmp(e->in->heredocs[k].name, name) == 0;
			if (!found)
				return fail(e, "%s %s: no such heredoc", e->in->keyword, w);
			_cleanup_free_ char *hs = xasprintf("<<%s", name);
			sbx__strv_push(&s->srcs, hs);
			continue;
		}
		if (is_url(w))
			return fail(e, "%s from a URL (%s) is not supported; download it in a RUN step",
				    e->in->keyword, w);
		sbx__strv_push(&s->srcs, w);
	}
	s->dst = xstrdup(words[n - 1]);
	const char *v;
	if ((v = flag(flags, "from")))
		s->from = xstrdup(v);
	if ((v = flag(flags, "chown")))
		s->chown = xstrdup(v);
	if ((v = flag(flags, "chmod"))) {
		char *end;
		unsigned long m = strtoul(v, &end, 8);
		if (!*v || *end || m > 07777)
			return fail(e, "%s --chmod=%s (expected octal digits, e.g. 0755)", e->in->keyword, v);
		s->chmod = xstrdup(v);
	}
	if (n > 2 && (!*s->dst || s->dst[strlen(s->dst) - 1] != '/'))
		return fail(e, "%s with several sources needs a destination ending in '/'", e->in->keyword);
	json_object_set_new(j, "srcs", strv_json(s->srcs));
	json_object_set_new(j, "dst", json_string(s->dst));
	json_object_set_new(j, "flags", strv_json(flags));
	json_t *hd = json_array();
	for (size_t k = 0; k < e->in->n_heredocs; k++) {
		const struct df_heredoc *h = &e->in->heredocs[k];
		_cleanup_free_ char *body = h->expand ? sbx__df_expand_vars(h->body, e->f->escape, e->v)
						      : xstrdup(h->body);
		if (!body) {
			json_decref(hd);
			return fail(e, "heredoc %s expands to more than %u MiB", h->name, SBX_DF_MAX >> 20);
		}
		json_array_append_new(hd, json_pack("[ss]", h->name, body));
	}
	json_object_set_new(j, "heredocs", hd);
	return 0;
}

/* Lexically cleans an absolute path: no "", "." or ".." components. */
static char *clean_path(const char *p)
{
	/* In place, one pass: a path of 100k components was quadratic as a
	 * list of parts (fuzz/dockerfile's WORKDIR of a doubled $A). */
	char *out = xmalloc(strlen(p) + 2);
	size_t o = 0;
	for (const char *s = p; *s;) {
		while (*s == '/')
			s++;
		const char *e = s;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - s);
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else if (n && !(n == 1 && s[0] == '.')) {
			out[o++] = '/';
			memcpy(out + o, s, n);
			o += n;
		}
		s = e;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return out;
}

/* KEY=VALUE pairs (ENV, LABEL), or the legacy "KEY VALUE..." form. */
static int eval_kv(const struct ev *e, struct df_step *s, json_t *j)
{
	const char *a = e->in->args;
	size_t first = strcspn(a, " \t");
	_cleanup_free_ char *msg = NULL;
	if (!memchr(a, '=', first)) {
		const char *val = a + first;
		while (*val == ' ' || *val == '\t')
			val++;
		if (!*val)
			return fail(e, "%s expects KEY=VALUE", e->in->keyword);
		_cleanup_free_ char *v = NULL;
		if (sbx__df_word(&v, val, e->f->escape, e->v, &msg) < 0)
			return fail(e, "%s: %s", e->in->keyword, msg);
		_cleanup_free_ char *kv = xasprintf("%.*s=%s", (int)first, a, v);
		sbx__strv_push(&s->kv, kv);
	} else {
		_cleanup_strv_ char **w = NULL;
		if (sbx__df_words(&w, a, e->f->escape, true, e->v, &msg) < 0)
			return fail(e, "%s: %s", e->in->keyword, msg);
		for (size_t i = 0; w[i]; i++) {
			if (!strchr(w[i], '=') || w[i][0] == '=')
				return fail(e, "%s expects KEY=VALUE, got '%.60s'", e->in->keyword, w[i]);
			sbx__strv_push(&s->kv, w[i]);
		}
	}
	json_object_set_new(j, "kv", strv_json(s->kv));
	return 0;
}

static const char *kv_value(char *const *v, const char *name, size_t n)
{
	const char *hit = NULL;
	for (size_t i = 0; v && v[i]; i++)
		if (strncmp(v[i], name, n) == 0 && (v[i][n] == '=' || !v[i][n]))
			hit = v[i][n] == '=' ? v[i] + n + 1 : NULL;
	return hit;
}

static int eval_arg(const struct ev *e, struct df_step *s, json_t *j, char *const *build_args,
		    char *const *meta)
{
	_cleanup_strv_ char **w = NULL;
	_cleanup_free_ char *msg = NULL;
	if (sbx__df_words(&w, e->in->args, e->f->escape, true, e->v, &msg) < 0)
		return fail(e, "ARG: %s", msg);
	for (size_t i = 0; w[i]; i++) {
		char *eq = strchr(w[i], '=');
		size_t n = eq ? (size_t)(eq - w[i]) : strlen(w[i]);
		if (!n)
			return fail(e, "ARG expects NAME[=DEFAULT], got '%.60s'", w[i]);
		_cleanup_free_ char *name = xstrndup(w[i], n);
		sbx__strv_push(&s->names, name);
		const char *val = kv_value(build_args, name, n);
		if (!val)
			val = eq ? eq + 1 : kv_value(meta, name, n);
		if (val) {
			_cleanup_free_ char *kv = xasprintf("%s=%s", name, val);
			sbx__strv_push(&s->kv, kv);
		}
	}
	json_object_set_new(j, "names", strv_json(s->names));
	json_object_set_new(j, "kv", strv_json(s->kv));
	return 0;
}

static int eval_expose(const struct ev *e, struct df_step *s, json_t *j)
{
	_cleanup_strv_ char **w = NULL;
	_cleanup_free_ char *msg = NULL;
	if (sbx__df_words(&w, e->in->args, e->f->escape, true, e->v, &msg) < 0)
		return fail(e, "EXPOSE: %s", msg);
	for (size_t i = 0; w[i]; i++) {
		char *end;
		unsigned long p = strtoul(w[i], &end, 10);
		if (end == w[i] || p > 65535 || (*end && *end != '/' && *end != '-'))
			return fail(e, "EXPOSE expects PORT[/tcp|/udp], got '%.40s'", w[i]);
		_cleanup_free_ char *port = strchr(w[i], '/') ? xstrdup(w[i]) : xasprintf("%s/tcp", w[i]);
		sbx__strv_push(&s->names, port);
	}
	json_object_set_new(j, "ports", strv_json(s->names));
	return 0;
}

static int eval_word(const struct ev *e, struct df_step *s, json_t *j, const char *cwd)
{
	_cleanup_free_ char *msg = NULL, *w = NULL;
	if (sbx__df_word(&w, e->in->args, e->f->escape, e->v, &msg) < 0)
		return fail(e, "%s: %s", e->in->keyword, msg);
	if (!*w)
		return fail(e, "%s needs a value", e->in->keyword);
	if (e->in->kind == DF_WORKDIR) {
		_cleanup_free_ char *abs = w[0] == '/' ? xstrdup(w) : xasprintf("%s/%s", cwd ? cwd : "/", w);
		s->dst = clean_path(abs);
	} else {
		s->dst = steal_ptr(&w);
	}
	json_object_set_new(j, "value", json_string(s->dst));
	return 0;
}

/* First line of the instruction as written, for progress lines. */
static char *display_of(const struct df_insn *in)
{
	size_t n = strcspn(in->args, "\n");
	return xasprintf("%s %.*s", in->keyword, (int)(n > 200 ? 200 : n), in->args);
}

int sbx__df_eval(struct df_step *out, const struct df_file *f, const struct df_insn *in,
		 const struct df_vars *v, char *const *build_args, char *const *meta,
		 const char *cwd, sbx_error **err)
{
	struct ev e = { .f = f, .in = in, .v = v, .err = err };
	memset(out, 0, sizeof(*out));
	size_t vars = 0;
	for (size_t i = 0; v && v->env && v->env[i]; i++)
		vars += strlen(v->env[i]);
	for (size_t i = 0; v && v->args && v->args[i]; i++)
		vars += strlen(v->args[i]);
	if (vars > SBX_DF_VARS_MAX)
		return sbx_error_set(err, -E2BIG, "%s:%d: the stage's ENV and ARG values hold more than %u KiB",
				     f->path, in->line, SBX_DF_VARS_MAX >> 10);
	out->kind = in->kind;
	out->line = in->line;
	out->insn = in;
	out->network = -1;
	out->display = display_of(in);
	_cleanup_json_ json_t *j = json_object();
	int r;
	switch (in->kind) {
	case DF_RUN: r = eval_run(&e, out, j); break;
	case DF_CMD:
	case DF_ENTRYPOINT:
	case DF_SHELL: r = eval_cmd(&e, out, j); break;
	case DF_COPY:
	case DF_ADD: r = eval_copy(&e, out, j); break;
	case DF_ENV:
	case DF_LABEL: r = eval_kv(&e, out, j); break;
	case DF_ARG: r = eval_arg(&e, out, j, build_args, meta); break;
	case DF_EXPOSE: r = eval_expose(&e, out, j); break;
	case DF_WORKDIR:
	case DF_USER: r = eval_word(&e, out, j, cwd); break;
	case DF_FROM: r = fail(&e, "FROM is evaluated per stage"); break;
	case DF_VOLUME:
	case DF_STOPSIGNAL:
	case DF_HEALTHCHECK:
	case DF_ONBUILD:
	case DF_MAINTAINER:
	default:
		json_object_set_new(j, "args", json_string(in->args));
		r = 0;
		break;
	}
	if (r < 0) {
		sbx__df_step_clear(out);
		return r;
	}
	_cleanup_free_ char *js = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	out->text = xasprintf("%s %s", in->keyword, js ? js : "{}");
	return 0;
}

void sbx__df_step_clear(struct df_step *s)
{
	free(s->text);
	free(s->display);
	sbx__strv_free(s->argv);
	free(s->shell);
	sbx__strv_free(s->srcs);
	free(s->dst);
	free(s->from);
	free(s->chown);
	free(s->chmod);
	sbx__strv_free(s->kv);
	sbx__strv_free(s->names);
	memset(s, 0, sizeof(*s));
}

int sbx__df_meta_args(char ***out, const struct df_file *f, char *const *build_args,
		      sbx_error **err)
{
	char **args = xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < f->n_meta; i++) {
		struct df_vars v = { .args = args };
		struct df_step s;
		int r = sbx__df_eval(&s, f, &f->insns[i], &v, build_args, NULL, "/", err);
		if (r < 0) {
			sbx__strv_free(args);
			return r;
		}
		for (size_t k = 0; s.kv && s.kv[k]; k++)
			sbx__strv_setenv(&args, s.kv[k]);
		sbx__df_step_clear(&s);
	}
	*out = args;
	return 0;
}

int sbx__df_from(char **ref_out, const struct df_file *f, const struct df_stage *s,
		 char *const *meta, sbx_error **err)
{
	const char *a = s->from->args;
	while (sbx__str_startswith(a, "--")) {
		a += strcspn(a, " \t");
		while (*a == ' ' || *a == '\t')
			a++;
	}
	_cleanup_free_ char *word = xstrndup(a, strcspn(a, " \t"));
	struct df_vars v = { .args = meta };
	_cleanup_free_ char *msg = NULL;
	if (sbx__df_word(ref_out, word, f->escape, &v, &msg) < 0)
		return sbx_error_set(err, -EINVAL, "%s:%d: FROM: %s", f->path, s->from->line, msg);
	if (!**ref_out) {
		free(*ref_out);
		*ref_out = NULL;
		return sbx_error_set(err, -EINVAL, "%s:%d: FROM names an empty image (is an ARG unset?)",
				     f->path, s->from->line);
	}
	return 0;
}
