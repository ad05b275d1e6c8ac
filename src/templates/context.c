/* SPDX-License-Identifier: MIT */
/*
 * The build context of a template build: .dockerignore patterns and COPY/ADD
 * source expansion (relative paths and wildcards, never outside the
 * context). Hashing and copying sources is in ctxcopy.c.
 *
 * The context belongs to whoever wrote it, so nothing here follows a path
 * out of it: every lookup goes through openat2(RESOLVE_IN_ROOT) on the
 * context's directory fd, so a symlink resolves as if the context were '/'
 * (Docker's rule for a symlink named as a COPY source: "..", and absolute
 * targets, stay inside). Files are opened O_NONBLOCK and used only when
 * fstat says they are regular, so a FIFO cannot stall a build.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* openat2 below ROOT with the context as '/': never reaches outside it.
 * Returns an fd or -errno. EAGAIN (a rename racing "..") is retried a few
 * times. */
int sbx__ctx_open_in(int root, const char *rel, int flags, bool follow)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW)),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd = -1;
	for (int i = 0; i < 8 && fd < 0; i++) {
		fd = (int)syscall(SYS_openat2, root, rel && *rel ? rel : ".", &how, sizeof(how));
		if (fd < 0 && errno != EAGAIN && errno != EINTR)
			break;
	}
	return fd < 0 ? -errno : fd;
}

int sbx__ctx_open_root(const char *dir, sbx_error **err)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open build context %s", dir);
	return fd;
}

/* A regular file REL of the context, opened for reading (following a final
 * symlink inside the context); -ENOENT, -EINVAL (not a regular file). */
int sbx__ctx_open_file(int root, const char *rel)
{
	int fd = sbx__ctx_open_in(root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, true);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int sbx__ctx_ignore_load(struct ctx_ignore **out, const char *context_dir, sbx_error **err)
{
	_cleanup_close_ int root = sbx__ctx_open_root(context_dir, err);
	if (root < 0)
		return root;
	struct ctx_ignore *ig = xcalloc(1, sizeof(*ig));
	_cleanup_free_ char *data = NULL;
	size_t len;
	_cleanup_close_ int fd = sbx__ctx_open_file(root, ".dockerignore");
	if (fd == -EINVAL) {
		free(ig);
		return sbx_error_set(err, -EINVAL, "%s/.dockerignore is not a regular file in the build context",
				     context_dir);
	}
	if (fd < 0 && fd != -ENOENT) {
		free(ig);
		return sbx_error_setsys(err, fd, -fd, "%s/.dockerignore", context_dir);
	}
	if (fd >= 0) {
		int r = sbx__read_fd(&data, &len, fd, SBX_DF_MAX, ".dockerignore", err);
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

int sbx__ctx_read_dockerfile(char **out, size_t *len, const char *context_dir, const char *path,
			     sbx_error **err)
{
	_cleanup_close_ int root = -1, fd = -1;
	if (path) {
		fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		fd = fd < 0 ? -errno : fd;
	} else if ((root = sbx__ctx_open_root(context_dir, err)) < 0) {
		return root;
	} else {
		fd = sbx__ctx_open_in(root, "Dockerfile", O_RDONLY | O_NONBLOCK | O_NOCTTY, true);
	}
	_cleanup_free_ char *label = path ? xstrdup(path) : xasprintf("%s/Dockerfile", context_dir);
	struct stat st;
	if (fd < 0)
		return sbx_error_setsys(err, fd, -fd, "Dockerfile %s", label);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return sbx_error_set(err, -EINVAL, "Dockerfile %s is not a regular file%s", label,
				     path ? "" : " in the build context");
	return sbx__read_fd(out, len, fd, SBX_DF_MAX, label, err);
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

/* Sorted names in the directory open as DFD (which stays open). */
char **sbx__ctx_sorted_entries(int dfd)
{
	char **names = xcalloc(1, sizeof(char *));
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	_cleanup_closedir_ DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d && dup_fd >= 0)
		close(dup_fd);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			sbx__strv_push(&names, de->d_name);
	sort_strv(names);
	return names;
}

/* Expands segs[i..] below REL (relative to the context ROOT) into *out. */
static void glob_expand(char ***out, int root, const char *rel, char **segs, size_t i,
			const struct ctx_ignore *ig)
{
	if (!segs[i]) {
		if (!sbx__ctx_ignored(ig, rel))
			sbx__strv_push(out, rel);
		return;
	}
	if (!has_glob(segs[i])) {
		_cleanup_free_ char *next = *rel ? xasprintf("%s/%s", rel, segs[i]) : xstrdup(segs[i]);
		_cleanup_close_ int fd = sbx__ctx_open_in(root, next, O_PATH, false);
		if (fd >= 0)
			glob_expand(out, root, next, segs, i + 1, ig);
		return;
	}
	_cleanup_close_ int dfd = sbx__ctx_open_in(root, rel, O_RDONLY | O_DIRECTORY, true);
	if (dfd < 0)
		return;
	char **all = sbx__ctx_sorted_entries(dfd);
	for (size_t k = 0; all[k]; k++) {
		if (fnmatch(segs[i], all[k], 0) != 0)
			continue;
		_cleanup_free_ char *next = *rel ? xasprintf("%s/%s", rel, all[k]) : xstrdup(all[k]);
		glob_expand(out, root, next, segs, i + 1, ig);
	}
	sbx__strv_free(all);
}

/* Checks that source REL exists inside the context once its symlinks are
 * followed there; a symlink leading out of (or nowhere in) the context is
 * an error that says so. */
static int check_source(int root, const char *context_dir, const char *src, const char *rel,
			sbx_error **err)
{
	_cleanup_close_ int fd = sbx__ctx_open_in(root, rel, O_PATH, true);
	if (fd >= 0)
		return 0;
	_cleanup_close_ int lfd = sbx__ctx_open_in(root, rel, O_PATH, false);
	if (lfd >= 0)
		return sbx_error_set(err, -ENOENT, "'%s' in the build context %s is a symlink to a path "
				     "outside the context or missing from it (symlinks resolve inside the context)",
				     src, context_dir);
	return sbx_error_set(err, -ENOENT, "'%s' not found in the build context %s "
			     "(or excluded by .dockerignore)", src, context_dir);
}

int sbx__ctx_sources(char ***out, const char *context_dir, const struct ctx_ignore *ig,
		     char *const *srcs, sbx_error **err)
{
	_cleanup_close_ int root = sbx__ctx_open_root(context_dir, err);
	if (root < 0)
		return root;
	char **res = xcalloc(1, sizeof(char *));
	for (size_t i = 0; srcs && srcs[i]; i++) {
		_cleanup_free_ char *rel = clean_rel(srcs[i]);
		if (!rel) {
			sbx__strv_free(res);
			return sbx_error_set(err, -EINVAL, "source '%s' is outside the build context", srcs[i]);
		}
		char **found = xcalloc(1, sizeof(char *));
		int r = 0;
		if (has_glob(rel)) {
			char **segs = split_segs(rel);
			glob_expand(&found, root, "", segs, 0, ig);
			sbx__strv_free(segs);
		} else if (!sbx__ctx_ignored(ig, rel) && (r = check_source(root, context_dir, srcs[i], rel, err)) == 0) {
			sbx__strv_push(&found, rel);
		}
		if (!found[0] && r == 0)
			r = sbx_error_set(err, -ENOENT, "'%s' not found in the build context %s "
					  "(or excluded by .dockerignore)", srcs[i], context_dir);
		if (r < 0) {
			sbx__strv_free(found);
			sbx__strv_free(res);
			return r;
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

int sbx__ctx_real_path(char **out, const char *context_dir, const char *rel, sbx_error **err)
{
	_cleanup_close_ int root = sbx__ctx_open_root(context_dir, err);
	if (root < 0)
		return root;
	_cleanup_close_ int fd = sbx__ctx_open_in(root, rel, O_PATH, true);
	if (fd < 0)
		return sbx_error_setsys(err, fd, -fd, "%s in the build context %s", rel, context_dir);
	char proc[64], real[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, real, sizeof(real) - 1);
	if (n < 0)
		return sbx_error_setsys(err, -errno, errno, "%s in the build context %s", rel, context_dir);
	real[n] = '\0';
	*out = xstrdup(real);
	return 0;
}
