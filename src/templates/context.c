/* SPDX-License-Identifier: MIT */
/*
 * The build context of a template build: .dockerignore patterns, COPY/ADD
 * source expansion (relative paths and wildcards, never outside the
 * context), the content digest of copied files (paths, types, modes and
 * bytes in sorted order, so it does not depend on readdir order or mtimes),
 * copying into a layer's staging directory with --chown/--chmod, and ADD's
 * extraction of local tar archives.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "images/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "templates_int.h"

struct ctx_ignore {
	char **pats;
	bool *neg;
	size_t n;
	bool any_neg;
};

/* Cleans a relative path: no leading '/', "./", empty or "." components;
 * ".." folds. Returns NULL when it climbs above the root. */
static char *clean_rel(const char *p)
{
	_cleanup_free_ char *cp = xstrdup(p);
	char **parts = xcalloc(1, sizeof(char *));
	char *save = NULL;
	bool above = false;
	for (char *t = strtok_r(cp, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		size_t n = sbx__strv_len((const char *const *)parts);
		if (strcmp(t, ".") == 0)
			continue;
		if (strcmp(t, "..") == 0) {
			if (!n)
				above = true;
			else {
				free(parts[n - 1]);
				parts[n - 1] = NULL;
			}
			continue;
		}
		sbx__strv_push(&parts, t);
	}
	size_t len = 1;
	for (size_t i = 0; parts[i]; i++)
		len += strlen(parts[i]) + 1;
	char *out = xcalloc(1, len);
	for (size_t i = 0; parts[i]; i++) {
		if (i)
			strncat(out, "/", len - strlen(out) - 1);
		strncat(out, parts[i], len - strlen(out) - 1);
	}
	sbx__strv_free(parts);
	if (above) {
		free(out);
		return NULL;
	}
	return out;
}

int sbx__ctx_ignore_load(struct ctx_ignore **out, const char *context_dir, sbx_error **err)
{
	struct ctx_ignore *ig = xcalloc(1, sizeof(*ig));
	_cleanup_free_ char *path = xasprintf("%s/.dockerignore", context_dir);
	_cleanup_free_ char *data = NULL;
	size_t len;
	if (access(path, F_OK) == 0) {
		int r = sbx__read_file(&data, &len, path, SBX_DF_MAX, err);
		if (r < 0) {
			free(ig);
			return r;
		}
		char *save = NULL;
		for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			sbx__str_trim(l);
			if (!*l || *l == '#')
				continue;
			bool neg = *l == '!';
			char *pat = clean_rel(sbx__str_trim(l + neg));
			if (!pat)
				continue;
			ig->pats = xrealloc(ig->pats, (ig->n + 1) * sizeof(char *));
			ig->neg = xrealloc(ig->neg, (ig->n + 1) * sizeof(bool));
			ig->pats[ig->n] = pat;
			ig->neg[ig->n++] = neg;
			ig->any_neg |= neg;
		}
	}
	*out = ig;
	return 0;
}

void sbx__ctx_ignore_free(struct ctx_ignore *ig)
{
	if (!ig)
		return;
	for (size_t i = 0; i < ig->n; i++)
		free(ig->pats[i]);
	free(ig->pats);
	free(ig->neg);
	free(ig);
}

/* Matches pattern segments against path segments; "**" spans any number. */
static bool match_segs(char **ps, char **xs)
{
	if (!*ps)
		return !*xs;
	if (strcmp(*ps, "**") == 0) {
		for (char **x = xs;; x++) {
			if (match_segs(ps + 1, x))
				return true;
			if (!*x)
				return false;
		}
	}
	return *xs && fnmatch(*ps, *xs, 0) == 0 && match_segs(ps + 1, xs + 1);
}

static char **split_segs(const char *s)
{
	char **v = xcalloc(1, sizeof(char *));
	_cleanup_free_ char *cp = xstrdup(s);
	char *save = NULL;
	for (char *t = strtok_r(cp, "/", &save); t; t = strtok_r(NULL, "/", &save))
		sbx__strv_push(&v, t);
	return v;
}

bool sbx__ctx_match(const char *pattern, const char *rel)
{
	char **ps = split_segs(pattern), **xs = split_segs(rel);
	bool m = false;
	size_t n = sbx__strv_len((const char *const *)xs);
	/* A pattern matching a parent directory excludes everything below it. */
	for (size_t k = 1; k <= n && !m; k++) {
		char *saved = xs[k];
		xs[k] = NULL;
		m = match_segs(ps, xs);
		xs[k] = saved;
	}
	sbx__strv_free(ps);
	sbx__strv_free(xs);
	return m;
}

bool sbx__ctx_ignored(const struct ctx_ignore *ig, const char *rel)
{
	bool out = false;
	if (!ig || !rel || !*rel)
		return false;
	for (size_t i = 0; i < ig->n; i++)
		if (sbx__ctx_match(ig->pats[i], rel))
			out = !ig->neg[i];
	return out;
}

static bool has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sort_strv(char **v)
{
	qsort(v, sbx__strv_len((const char *const *)v), sizeof(char *), cmp_str);
}

/* Expands segs[i..] below REL (relative to ctx) into *out. */
static void glob_expand(char ***out, const char *ctx, const char *rel, char **segs, size_t i,
			const struct ctx_ignore *ig)
{
	if (!segs[i]) {
		if (!sbx__ctx_ignored(ig, rel))
			sbx__strv_push(out, rel);
		return;
	}
	_cleanup_free_ char *dir = *rel ? xasprintf("%s/%s", ctx, rel) : xstrdup(ctx);
	if (!has_glob(segs[i])) {
		_cleanup_free_ char *next = *rel ? xasprintf("%s/%s", rel, segs[i]) : xstrdup(segs[i]);
		_cleanup_free_ char *abs = xasprintf("%s/%s", ctx, next);
		struct stat st;
		if (lstat(abs, &st) == 0)
			glob_expand(out, ctx, next, segs, i + 1, ig);
		return;
	}
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	char **names = xcalloc(1, sizeof(char *));
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && fnmatch(segs[i], de->d_name, 0) == 0)
			sbx__strv_push(&names, de->d_name);
	sort_strv(names);
	for (size_t k = 0; names[k]; k++) {
		_cleanup_free_ char *next = *rel ? xasprintf("%s/%s", rel, names[k]) : xstrdup(names[k]);
		glob_expand(out, ctx, next, segs, i + 1, ig);
	}
	sbx__strv_free(names);
}

int sbx__ctx_sources(char ***out, const char *context_dir, const struct ctx_ignore *ig,
		     char *const *srcs, sbx_error **err)
{
	char **res = xcalloc(1, sizeof(char *));
	for (size_t i = 0; srcs && srcs[i]; i++) {
		_cleanup_free_ char *rel = clean_rel(srcs[i]);
		if (!rel) {
			sbx__strv_free(res);
			return sbx_error_set(err, -EINVAL, "source '%s' is outside the build context", srcs[i]);
		}
		char **found = xcalloc(1, sizeof(char *));
		if (has_glob(rel)) {
			char **segs = split_segs(rel);
			glob_expand(&found, context_dir, "", segs, 0, ig);
			sbx__strv_free(segs);
		} else {
			_cleanup_free_ char *abs = *rel ? xasprintf("%s/%s", context_dir, rel) : xstrdup(context_dir);
			struct stat st;
			if (lstat(abs, &st) == 0 && !sbx__ctx_ignored(ig, rel))
				sbx__strv_push(&found, rel);
		}
		if (!found[0]) {
			sbx__strv_free(found);
			sbx__strv_free(res);
			return sbx_error_set(err, -ENOENT, "'%s' not found in the build context %s "
					     "(or excluded by .dockerignore)", srcs[i], context_dir);
		}
		for (size_t k = 0; found[k]; k++) {
			_cleanup_free_ char *abs = *found[k] ? xasprintf("%s/%s", context_dir, found[k])
							     : xstrdup(context_dir);
			sbx__strv_push(&res, abs);
		}
		sbx__strv_free(found);
	}
	*out = res;
	return 0;
}

static char **sorted_entries(const char *dir)
{
	char **names = xcalloc(1, sizeof(char *));
	_cleanup_closedir_ DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			sbx__strv_push(&names, de->d_name);
	sort_strv(names);
	return names;
}

static int hash_node(EVP_MD_CTX *md, const char *abs, const char *rel, const char *crel,
		     const struct ctx_ignore *ig, bool top, int depth, sbx_error **err)
{
	struct stat st;
	if ((top ? stat(abs, &st) : lstat(abs, &st)) < 0)
		return sbx_error_setsys(err, -errno, errno, "stat %s", abs);
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "%s: directory tree deeper than 256", abs);
	char head[64];
	if (S_ISREG(st.st_mode)) {
		snprintf(head, sizeof(head), "\nF %o %lld ", (unsigned)(st.st_mode & 07777), (long long)st.st_size);
		EVP_DigestUpdate(md, head, strlen(head));
		EVP_DigestUpdate(md, rel, strlen(rel) + 1);
		_cleanup_close_ int fd = open(abs, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && top)
			fd = open(abs, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return sbx_error_setsys(err, -errno, errno, "open %s", abs);
		char buf[65536];
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			EVP_DigestUpdate(md, buf, (size_t)n);
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "read %s", abs);
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(abs, target, sizeof(target) - 1);
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "readlink %s", abs);
		target[n] = '\0';
		EVP_DigestUpdate(md, "\nL ", 3);
		EVP_DigestUpdate(md, rel, strlen(rel) + 1);
		EVP_DigestUpdate(md, target, (size_t)n);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	snprintf(head, sizeof(head), "\nD %o ", (unsigned)(st.st_mode & 07777));
	EVP_DigestUpdate(md, head, strlen(head));
	EVP_DigestUpdate(md, rel, strlen(rel) + 1);
	char **names = sorted_entries(abs);
	int r = 0;
	for (size_t i = 0; names[i] && r == 0; i++) {
		_cleanup_free_ char *cr = crel ? (*crel ? xasprintf("%s/%s", crel, names[i]) : xstrdup(names[i])) : NULL;
		if (cr && sbx__ctx_ignored(ig, cr))
			continue;
		_cleanup_free_ char *sa = xasprintf("%s/%s", abs, names[i]);
		_cleanup_free_ char *sr = *rel ? xasprintf("%s/%s", rel, names[i]) : xstrdup(names[i]);
		r = hash_node(md, sa, sr, cr, ig, false, depth + 1, err);
	}
	sbx__strv_free(names);
	return r;
}

int sbx__ctx_hash(EVP_MD_CTX *md, const char *src, const char *rel, const struct ctx_ignore *ig,
		  sbx_error **err)
{
	return hash_node(md, src, "", rel, ig, true, 0, err);
}

static int set_meta(const char *dst, const struct stat *st, const struct copy_opts *o, bool top,
		    sbx_error **err)
{
	uid_t uid = o->chown ? o->uid : 0;
	gid_t gid = o->chown ? o->gid : 0;
	if (lchown(dst, uid, gid) < 0)
		return sbx_error_setsys(err, -errno, errno, "chown %s", dst);
	(void)top;
	if (!S_ISLNK(st->st_mode)) {
		mode_t mode = o->chmod >= 0 ? (mode_t)o->chmod : st->st_mode & 07777;
		if (chmod(dst, mode) < 0)
			return sbx_error_setsys(err, -errno, errno, "chmod %s", dst);
	}
	struct timespec ts[2] = { st->st_mtim, st->st_mtim };
	utimensat(AT_FDCWD, dst, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int copy_file(const char *src, const char *dst, sbx_error **err)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", src);
	unlink(dst);
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", dst);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		int r = sbx__write_all(out, buf, (size_t)n);
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "write %s", dst);
	}
	if (n < 0)
		return sbx_error_setsys(err, -errno, errno, "read %s", src);
	return 0;
}

static int copy_node(const char *src, const char *dst, const char *crel, const struct copy_opts *o,
		     bool top, int depth, sbx_error **err)
{
	struct stat st;
	if (((top && o->follow_top) ? stat(src, &st) : lstat(src, &st)) < 0)
		return sbx_error_setsys(err, -errno, errno, "stat %s", src);
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "%s: directory tree deeper than 256", src);
	int r;
	if (S_ISREG(st.st_mode)) {
		if ((r = copy_file(src, dst, err)) < 0)
			return r;
		return set_meta(dst, &st, o, top, err);
	}
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "readlink %s", src);
		target[n] = '\0';
		unlink(dst);
		if (symlink(target, dst) < 0)
			return sbx_error_setsys(err, -errno, errno, "symlink %s", dst);
		return set_meta(dst, &st, o, top, err);
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	struct stat have;
	bool existed = lstat(dst, &have) == 0 && S_ISDIR(have.st_mode);
	if (!existed && mkdir(dst, 0700) < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", dst);
	char **names = sorted_entries(src);
	r = 0;
	for (size_t i = 0; names[i] && r == 0; i++) {
		_cleanup_free_ char *cr = crel ? (*crel ? xasprintf("%s/%s", crel, names[i]) : xstrdup(names[i])) : NULL;
		if (cr && sbx__ctx_ignored(o->ig, cr))
			continue;
		_cleanup_free_ char *s = xasprintf("%s/%s", src, names[i]);
		_cleanup_free_ char *d = xasprintf("%s/%s", dst, names[i]);
		r = copy_node(s, d, cr, o, false, depth + 1, err);
	}
	sbx__strv_free(names);
	if (r < 0 || (top && existed))
		return r;
	return set_meta(dst, &st, o, top, err);
}

int sbx__ctx_copy(const char *src, const char *dst, const struct copy_opts *o, sbx_error **err)
{
	return copy_node(src, dst, o->rel, o, true, 0, err);
}

bool sbx__ctx_is_archive(const char *path)
{
	struct archive *a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	struct archive_entry *e;
	bool ok = archive_read_open_filename(a, path, 65536) == ARCHIVE_OK &&
		  archive_read_next_header(a, &e) == ARCHIVE_OK;
	archive_read_free(a);
	return ok;
}

static int chown_tree(const char *p, uid_t uid, gid_t gid, int depth, sbx_error **err)
{
	struct stat st;
	if (depth > 256 || lstat(p, &st) < 0 || lchown(p, uid, gid) < 0)
		return sbx_error_setsys(err, -EIO, errno, "chown %s", p);
	if (!S_ISDIR(st.st_mode))
		return 0;
	char **names = sorted_entries(p);
	int r = 0;
	for (size_t i = 0; names[i] && r == 0; i++) {
		_cleanup_free_ char *sub = xasprintf("%s/%s", p, names[i]);
		r = chown_tree(sub, uid, gid, depth + 1, err);
	}
	sbx__strv_free(names);
	return r;
}

int sbx__ctx_extract(const char *path, const char *dst, const struct copy_opts *o,
		     sbx_error **err)
{
	int r = sbx__image_unpack_archive(path, dst, err);
	if (r < 0 || !o->chown)
		return r;
	return chown_tree(dst, o->uid, o->gid, 0, err);
}
