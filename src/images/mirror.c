/* SPDX-License-Identifier: MIT */
/*
 * The Debian mirror for `sbx image bootstrap`, read from the machine's apt
 * configuration rather than hard-coded: deb822 stanzas in
 * etc/apt/sources.list.d/ *.sources first, then one-line "deb URI SUITE ..."
 * entries in etc/apt/sources.list and sources.list.d/ *.list. An entry listing
 * the wanted suite beats any other; security archives are never used.
 */
#include <errno.h>
#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "store.h"

#define SOURCES_MAX (1u << 20)

/* One apt source: its first URI and its suites. */
struct source {
	char *uri;
	char **suites;
};

struct sources {
	struct source *v;
	size_t n;
};

static void sources_add(struct sources *s, const char *uri, char **suites)
{
	s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n].uri = xstrdup(uri);
	s->v[s->n].suites = suites;
	s->n++;
}

static void sources_free(struct sources *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].uri);
		sbx__strv_free(s->v[i].suites);
	}
	free(s->v);
}

static void strv_freep(char ***v)
{
	sbx__strv_free(*v);
}

/* Splits on blanks into a new vector. */
static char **split_words(const char *s)
{
	char **v = xcalloc(1, sizeof(char *));
	while (*s) {
		s += strspn(s, " \t");
		size_t n = strcspn(s, " \t");
		if (n) {
			_cleanup_free_ char *w = xstrndup(s, n);
			sbx__strv_push(&v, w);
		}
		s += n;
	}
	return v;
}

static bool has_word(char *const *v, const char *w)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], w) == 0)
			return true;
	return false;
}

/* One deb822 stanza: Types, URIs, Suites, Enabled (other fields ignored). */
struct stanza {
	char *types, *uris, *suites, *enabled;
};

static void stanza_flush(struct stanza *st, struct sources *out)
{
	_cleanup_(strv_freep) char **types = split_words(st->types ? st->types : "");
	_cleanup_(strv_freep) char **uris = split_words(st->uris ? st->uris : "");
	bool enabled = !st->enabled || strcasecmp(sbx__str_trim(st->enabled), "no") != 0;
	if (enabled && has_word(types, "deb") && uris[0])
		sources_add(out, uris[0], split_words(st->suites ? st->suites : ""));
	free(st->types);
	free(st->uris);
	free(st->suites);
	free(st->enabled);
	memset(st, 0, sizeof(*st));
}

static void parse_deb822(char *text, struct sources *out)
{
	struct stanza st = { 0 };
	char **last = NULL; /* the field continuation lines extend */
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#')
			continue;
		if (line[0] == ' ' || line[0] == '\t') {
			char *t = sbx__str_trim(line);
			if (!*t) {
				stanza_flush(&st, out);
				last = NULL;
			} else if (last && *last && strcmp(t, ".") != 0) {
				char *joined = xasprintf("%s %s", *last, t);
				free(*last);
				*last = joined;
			}
			continue;
		}
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		const char *key = sbx__str_trim(line);
		char *val = sbx__str_trim(colon + 1);
		last = !strcasecmp(key, "Types")    ? &st.types
		       : !strcasecmp(key, "URIs")   ? &st.uris
		       : !strcasecmp(key, "Suites") ? &st.suites
		       : !strcasecmp(key, "Enabled") ? &st.enabled
						     : NULL;
		if (last) {
			free(*last);
			*last = xstrdup(val);
		}
	}
	stanza_flush(&st, out);
}

/* strtok_r above swallows blank lines, so split stanzas on "\n\n" first. */
static void parse_deb822_file(const char *path, struct sources *out)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (sbx__read_file(&text, &len, path, SOURCES_MAX, NULL) < 0)
		return;
	for (char *p = text; p && *p;) {
		char *end = strstr(p, "\n\n");
		if (end)
			*end = '\0';
		parse_deb822(p, out);
		p = end ? end + 2 : NULL;
	}
}

/* "deb [options] URI SUITE [COMPONENT...]" */
static void parse_list_file(const char *path, struct sources *out)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (sbx__read_file(&text, &len, path, SOURCES_MAX, NULL) < 0)
		return;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *p = sbx__str_trim(line);
		if (strncmp(p, "deb", 3) != 0 || (p[3] != ' ' && p[3] != '\t'))
			continue;
		p += 3 + strspn(p + 3, " \t");
		if (*p == '[') {
			char *close = strchr(p, ']');
			if (!close)
				continue;
			p = close + 1;
		}
		_cleanup_(strv_freep) char **w = split_words(p);
		if (!w[0] || !w[1])
			continue;
		char **suites = xcalloc(1, sizeof(char *));
		sbx__strv_push(&suites, w[1]);
		sources_add(out, w[0], suites);
	}
}

static void parse_glob(const char *pattern, void (*fn)(const char *, struct sources *),
		       struct sources *out)
{
	glob_t g;
	if (glob(pattern, 0, NULL, &g) != 0)
		return;
	for (size_t i = 0; i < g.gl_pathc; i++)
		fn(g.gl_pathv[i], out);
	globfree(&g);
}

static bool is_security(const struct source *s)
{
	if (strstr(s->uri, "-security"))
		return true;
	for (size_t i = 0; s->suites && s->suites[i]; i++) {
		size_t n = strlen(s->suites[i]);
		if (n >= 9 && strcmp(s->suites[i] + n - 9, "-security") == 0)
			return true;
	}
	return false;
}

int sbx__image_mirror_from_apt(char **out, const char *root, const char *suite,
			       sbx_error **err)
{
	struct sources s = { 0 };
	const char *r = root && strcmp(root, "/") != 0 ? root : "";
	_cleanup_free_ char *d822 = xasprintf("%s/etc/apt/sources.list.d/*.sources", r);
	_cleanup_free_ char *list = xasprintf("%s/etc/apt/sources.list", r);
	_cleanup_free_ char *lists = xasprintf("%s/etc/apt/sources.list.d/*.list", r);
	parse_glob(d822, parse_deb822_file, &s);
	parse_list_file(list, &s);
	parse_glob(lists, parse_list_file, &s);
	const struct source *pick = NULL;
	for (size_t i = 0; i < s.n && !pick; i++)
		if (!is_security(&s.v[i]) && has_word(s.v[i].suites, suite))
			pick = &s.v[i];
	for (size_t i = 0; i < s.n && !pick; i++)
		if (!is_security(&s.v[i]) && strncmp(s.v[i].uri, "cdrom:", 6) != 0)
			pick = &s.v[i];
	if (pick) {
		char *u = xstrdup(pick->uri);
		size_t n = strlen(u);
		while (n > 1 && u[n - 1] == '/')
			u[--n] = '\0';
		*out = u;
	}
	sources_free(&s);
	if (!pick)
		return sbx_error_set(err, -ENOENT,
				     "no Debian mirror for %s in %s/etc/apt (sources.list, "
				     "sources.list.d); pass one with --mirror URL",
				     suite, r);
	return 0;
}
