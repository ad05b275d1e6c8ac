/* SPDX-License-Identifier: MIT */
/* passwd(5) and group(5) lookups over untrusted text (see passwd.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "passwd.h"

#define MAX_FIELDS 7

struct line {
	const char *f[MAX_FIELDS];
	size_t fl[MAX_FIELDS];
	size_t n;
};

/* An id field: decimal digits only, at most 2^32-2 ((unsigned)-1 is no id). */
static int parse_id(unsigned *out, const char *s, size_t n)
{
	if (n == 0 || n > 10)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v >= UINT32_MAX)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* Splits the line at P (LEN bytes) into fields; 0 when it is an entry. */
static int split(struct line *l, const char *p, size_t len, int group)
{
	l->n = 0;
	for (const char *end = p + len;;) {
		const char *c = memchr(p, ':', (size_t)(end - p));
		if (l->n == MAX_FIELDS)
			return -EINVAL;
		l->f[l->n] = p;
		l->fl[l->n++] = c ? (size_t)(c - p) : (size_t)(end - p);
		if (!c)
			break;
		p = c + 1;
	}
	size_t want = group ? 4 : 7;
	if (l->n != want || l->fl[0] == 0 || memchr(l->f[0], '\0', l->fl[0]))
		return -EINVAL;
	return 0;
}

static int fill(struct sbx_pwent *out, const struct line *l, int group)
{
	unsigned id, gid;
	if (parse_id(&id, l->f[2], l->fl[2]) < 0)
		return -EINVAL;
	if (group)
		gid = id;
	else if (parse_id(&gid, l->f[3], l->fl[3]) < 0 || memchr(l->f[5], '\0', l->fl[5]))
		return -EINVAL;
	out->name = xstrndup(l->f[0], l->fl[0]);
	out->id = id;
	out->gid = gid;
	out->home = group ? NULL : xstrndup(l->f[5], l->fl[5]);
	return 0;
}

/* Walks DB; returns the first parsable entry matching NAME (or ID). */
static int find(struct sbx_pwent *out, const char *db, size_t len, int group, const char *name,
		unsigned id)
{
	memset(out, 0, sizeof(*out));
	size_t nl = name ? strlen(name) : 0;
	for (size_t off = 0; db && off < len;) {
		const char *p = db + off;
		const char *nlp = memchr(p, '\n', len - off);
		size_t ll = nlp ? (size_t)(nlp - p) : len - off;
		off += ll + 1;
		if (ll && p[ll - 1] == '\r')
			ll--;
		struct line l;
		if (split(&l, p, ll, group) < 0)
			continue;
		if (name && (l.fl[0] != nl || memcmp(l.f[0], name, nl) != 0))
			continue;
		unsigned got;
		if (!name && (parse_id(&got, l.f[2], l.fl[2]) < 0 || got != id))
			continue;
		if (fill(out, &l, group) == 0)
			return 0;
	}
	return -ENOENT;
}

int sbx__pw_by_name(struct sbx_pwent *out, const char *db, size_t len, int group, const char *name)
{
	return find(out, db, len, group, name, 0);
}

int sbx__pw_by_id(struct sbx_pwent *out, const char *db, size_t len, int group, unsigned id)
{
	return find(out, db, len, group, NULL, id);
}

void sbx__pw_clear(struct sbx_pwent *e)
{
	free(e->name);
	free(e->home);
	memset(e, 0, sizeof(*e));
}
