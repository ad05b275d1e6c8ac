/* SPDX-License-Identifier: MIT */
/*
 * A read-only merged view of an image's layer directories, as overlayfs
 * would show them (char 0/0 whiteouts hide lower entries, an opaque
 * directory hides lower contents), computed on the host without mounting.
 * Template builds use it to place COPY results under the image's real
 * directories (following symlinks such as /bin -> usr/bin the way the
 * sandbox would), to read /etc/passwd for --chown, and to export files for
 * COPY --from. Every lookup goes through openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS) from the layer root, so nothing leads outside a layer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "templates_int.h"

static int open_beneath(int root, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	return (int)syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof(how));
}

static bool is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int fd)
{
	char v[4];
	_cleanup_close_ int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ssize_t n = d >= 0 ? fgetxattr(d, "trusted.overlay.opaque", v, sizeof(v)) : -1;
	return n == 1 && v[0] == 'y';
}

/* lstat of REL inside layer i: 0, or -1 when absent (or not reachable). */
static int lstat_in(const struct lview *v, size_t i, const char *rel, struct stat *st, bool *opaque)
{
	_cleanup_close_ int fd = open_beneath(v->fds[i], rel, O_PATH);
	if (fd < 0 || fstatat(fd, "", st, AT_EMPTY_PATH) < 0)
		return -1;
	if (opaque)
		*opaque = S_ISDIR(st->st_mode) && is_opaque(fd);
	return 0;
}

int sbx__lview_open(struct lview *v, char *const *layer_paths, sbx_error **err)
{
	memset(v, 0, sizeof(*v));
	size_t n = sbx__strv_len((const char *const *)layer_paths);
	v->layers = xcalloc(n + 1, sizeof(char *));
	v->fds = xcalloc(n + 1, sizeof(int));
	for (size_t i = 0; i < n; i++) {
		v->layers[i] = xstrdup(layer_paths[n - 1 - i]);
		v->fds[i] = open(v->layers[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		v->n = i + 1;
		if (v->fds[i] < 0) {
			int r = sbx_error_setsys(err, -errno, errno, "open layer %s", v->layers[i]);
			sbx__lview_close(v);
			return r;
		}
	}
	return 0;
}

void sbx__lview_close(struct lview *v)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->fds[i] >= 0)
			close(v->fds[i]);
	sbx__strv_free(v->layers);
	free(v->fds);
	memset(v, 0, sizeof(*v));
}

void sbx__lnode_clear(struct lnode *n)
{
	free(n->path);
	memset(n, 0, sizeof(*n));
}

/* Looks up child NAME of directory node D (which exists). */
static void lookup_child(struct lnode *out, const struct lview *v, const struct lnode *d,
			 const char *name)
{
	_cleanup_free_ char *rel = strcmp(d->path, "/") ? xasprintf("%s/%s", d->path + 1, name)
							: xstrdup(name);
	memset(out, 0, sizeof(*out));
	out->path = xasprintf("/%s", rel);
	for (size_t i = 0; i < d->lim; i++) {
		struct stat st;
		bool opq;
		if (lstat_in(v, i, rel, &st, &opq) < 0)
			continue;
		if (is_whiteout(&st))
			return;
		out->exists = true;
		out->st = st;
		out->layer = i;
		out->lim = i + 1;
		if (!S_ISDIR(st.st_mode) || opq)
			return;
		for (size_t k = i + 1; k < d->lim; k++) {
			if (lstat_in(v, k, rel, &st, &opq) < 0) {
				out->lim = k + 1;
				continue;
			}
			if (!S_ISDIR(st.st_mode))
				return;
			out->lim = k + 1;
			if (opq)
				return;
		}
		return;
	}
}

static void root_node(struct lnode *out, const struct lview *v)
{
	memset(out, 0, sizeof(*out));
	out->path = xstrdup("/");
	out->exists = true;
	out->lim = v->n;
	out->st.st_mode = S_IFDIR | 0755;
	for (size_t i = 0; i < v->n; i++) {
		struct stat st;
		bool opq = false;
		if (lstat_in(v, i, "", &st, &opq) == 0 && i == 0)
			out->st = st;
		if (opq) {
			out->lim = i + 1;
			break;
		}
	}
}

static int read_link(char **out, const struct lview *v, const struct lnode *n)
{
	_cleanup_close_ int fd = open_beneath(v->fds[n->layer], n->path + 1, O_PATH);
	char buf[4096];
	ssize_t len = fd >= 0 ? readlinkat(fd, "", buf, sizeof(buf) - 1) : -1;
	if (len < 0)
		return -errno;
	buf[len] = '\0';
	*out = xstrdup(buf);
	return 0;
}

int sbx__lview_resolve(struct lnode *out, const struct lview *v, const char *path, bool follow,
		       sbx_error **err)
{
	/* Pending components, processed front to back; symlinks splice theirs in. */
	_cleanup_free_ char *todo = xstrdup(path);
	struct lnode cur;
	root_node(&cur, v);
	int hops = 0;
	char *p = todo;
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		size_t n = strcspn(p, "/");
		_cleanup_free_ char *name = xstrndup(p, n);
		p += n;
		bool last = !*p || !p[strspn(p, "/")];
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0) {
			char *slash = strrchr(cur.path, '/');
			_cleanup_free_ char *up = slash == cur.path ? xstrdup("/")
								    : xstrndup(cur.path, (size_t)(slash - cur.path));
			sbx__lnode_clear(&cur);
			int r = sbx__lview_resolve(&cur, v, up, true, err);
			if (r < 0)
				return r;
			continue;
		}
		if (!cur.exists || !S_ISDIR(cur.st.st_mode)) {
			if (cur.exists) {
				int r = sbx_error_set(err, -ENOTDIR, "%s: not a directory in the image", cur.path);
				sbx__lnode_clear(&cur);
				return r;
			}
			char *np = strcmp(cur.path, "/") ? xasprintf("%s/%s", cur.path, name)
							 : xasprintf("/%s", name);
			free(cur.path);
			cur.path = np;
			continue;
		}
		struct lnode child;
		lookup_child(&child, v, &cur, name);
		if (child.exists && S_ISLNK(child.st.st_mode) && (!last || follow)) {
			_cleanup_free_ char *target = NULL;
			if (++hops > 40 || read_link(&target, v, &child) < 0) {
				int r = sbx_error_set(err, -ELOOP, "%s: too many levels of symbolic links",
						      child.path);
				sbx__lnode_clear(&child);
				sbx__lnode_clear(&cur);
				return r;
			}
			char *np = xasprintf("%s/%s", target, p);
			p = np;
			free(todo);
			todo = np;
			if (target[0] == '/') {
				sbx__lnode_clear(&cur);
				root_node(&cur, v);
			}
			sbx__lnode_clear(&child);
			continue;
		}
		sbx__lnode_clear(&cur);
		cur = child;
	}
	*out = cur;
	return 0;
}

int sbx__lview_read(char **out, size_t *len, const struct lview *v, const char *path, size_t max,
		    sbx_error **err)
{
	struct lnode n;
	int r = sbx__lview_resolve(&n, v, path, true, err);
	if (r < 0)
		return r;
	if (!n.exists || !S_ISREG(n.st.st_mode)) {
		r = sbx_error_set(err, -ENOENT, "%s: no such file in the image", path);
		sbx__lnode_clear(&n);
		return r;
	}
	_cleanup_close_ int fd = open_beneath(v->fds[n.layer], n.path + 1, O_RDONLY);
	sbx__lnode_clear(&n);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s in the image", path);
	sbx_buf b;
	sbx__buf_init(&b, max);
	char chunk[16384];
	ssize_t k;
	while ((k = read(fd, chunk, sizeof(chunk))) > 0)
		if (sbx__buf_append(&b, chunk, (size_t)k) < 0) {
			sbx__buf_free(&b);
			return sbx_error_set(err, -EFBIG, "%s: larger than %zu bytes", path, max);
		}
	*out = sbx__buf_steal(&b, len);
	return 0;
}

static int copy_meta(int fd, const char *dst, const struct stat *st, sbx_error **err)
{
	if (fchownat(fd, dst, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -errno, errno, "chown %s", dst);
	if (!S_ISLNK(st->st_mode) && fchmodat(fd, dst, st->st_mode & 07777, 0) < 0)
		return sbx_error_setsys(err, -errno, errno, "chmod %s", dst);
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	utimensat(fd, dst, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in the merged directory N (whiteouts removed), sorted. */
static char **list_dir(const struct lview *v, const struct lnode *n)
{
	char **names = xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < n->lim; i++) {
		int fd = open_beneath(v->fds[i], n->path + 1, O_RDONLY | O_DIRECTORY);
		_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct dirent *de;
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
				bool seen = false;
				for (size_t k = 0; names[k] && !seen; k++)
					seen = strcmp(names[k], de->d_name) == 0;
				if (!seen)
					sbx__strv_push(&names, de->d_name);
			}
	}
	size_t cnt = sbx__strv_len((const char *const *)names);
	qsort(names, cnt, sizeof(char *), cmp_str);
	return names;
}

static int export_node(const struct lview *v, const struct lnode *n, const char *dst, int depth,
		       sbx_error **err)
{
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "%s: directory tree deeper than 256", n->path);
	const struct stat *st = &n->st;
	if (S_ISDIR(st->st_mode)) {
		if (mkdir(dst, 0700) < 0)
			return sbx_error_setsys(err, -errno, errno, "create %s", dst);
		char **names = list_dir(v, n);
		int r = 0;
		for (size_t i = 0; names[i] && r == 0; i++) {
			struct lnode c;
			lookup_child(&c, v, n, names[i]);
			if (c.exists) {
				_cleanup_free_ char *sub = xasprintf("%s/%s", dst, names[i]);
				r = export_node(v, &c, sub, depth + 1, err);
			}
			sbx__lnode_clear(&c);
		}
		sbx__strv_free(names);
		return r < 0 ? r : copy_meta(AT_FDCWD, dst, st, err);
	}
	if (S_ISLNK(st->st_mode)) {
		_cleanup_free_ char *target = NULL;
		if (read_link(&target, v, n) < 0 || symlink(target, dst) < 0)
			return sbx_error_setsys(err, -errno, errno, "symlink %s", dst);
		return copy_meta(AT_FDCWD, dst, st, err);
	}
	if (!S_ISREG(st->st_mode))
		return 0;
	_cleanup_close_ int in = open_beneath(v->fds[n->layer], n->path + 1, O_RDONLY);
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (in < 0 || out < 0)
		return sbx_error_setsys(err, -errno, errno, "copy %s", n->path);
	char buf[65536];
	ssize_t k;
	while ((k = read(in, buf, sizeof(buf))) > 0)
		if (sbx__write_all(out, buf, (size_t)k) < 0)
			return sbx_error_setsys(err, -errno, errno, "write %s", dst);
	if (k < 0)
		return sbx_error_setsys(err, -errno, errno, "read %s", n->path);
	return copy_meta(AT_FDCWD, dst, st, err);
}

int sbx__lview_export(const struct lview *v, const struct lnode *n, const char *dst,
		      sbx_error **err)
{
	return export_node(v, n, dst, 0, err);
}

int sbx__lview_mkparents(const struct lview *v, const char *staging, const char *canon,
			 sbx_error **err)
{
	_cleanup_free_ char *p = xstrdup(canon);
	for (char *s = p + 1;; s++) {
		char c = *s;
		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		_cleanup_free_ char *dst = xasprintf("%s%s", staging, p);
		struct lnode n = { 0 };
		int r = sbx__lview_resolve(&n, v, p, false, NULL);
		struct stat st = { .st_mode = S_IFDIR | 0755 };
		if (r == 0 && n.exists && S_ISDIR(n.st.st_mode))
			st = n.st;
		sbx__lnode_clear(&n);
		struct stat have;
		if (lstat(dst, &have) < 0) {
			if (mkdir(dst, 0755) < 0)
				return sbx_error_setsys(err, -errno, errno, "create %s", dst);
			if ((r = copy_meta(AT_FDCWD, dst, &st, err)) < 0)
				return r;
		}
		*s = c;
		if (!c)
			break;
	}
	return 0;
}
