/* SPDX-License-Identifier: MIT */
/*
 * Reading what COPY/ADD take from the build context (or from a tree
 * exported from another stage): the content digest of a source, copying it
 * into a layer's staging directory, and ADD's archives. The top of a source
 * is resolved inside its root with RESOLVE_IN_ROOT (context.c); below it
 * every entry is opened relative to its parent's fd with O_NOFOLLOW, so a
 * symlink is hashed and copied as a symlink and never read through, and
 * files are opened only once fstat says they are regular, O_NONBLOCK.
 */
#include <errno.h>
#include <fcntl.h>
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
#include "util/lazy.h"

/*
 * One entry being read: the top of a source (REL resolved inside the
 * context ROOT, a final symlink followed when `follow`) or an entry NAME of
 * an already open directory (never followed).
 */
struct node {
	int base;          /* context root or parent directory fd */
	const char *path;  /* REL below the root, or one NAME */
	bool in_root;      /* path is resolved with RESOLVE_IN_ROOT */
	bool follow;       /* in_root only: follow a final symlink */
	const char *label; /* for messages */
};

static int node_open(const struct node *n, int flags)
{
	if (n->in_root)
		return sbx__ctx_open_in(n->base, n->path, flags, n->follow);
	int fd = openat(n->base, n->path, flags | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int node_stat(const struct node *n, struct stat *st, sbx_error **err)
{
	_cleanup_close_ int fd = node_open(n, O_PATH);
	if (fd < 0)
		return sbx_error_setsys(err, fd, -fd, "stat %s", n->label);
	if (fstat(fd, st) < 0)
		return sbx_error_setsys(err, -errno, errno, "stat %s", n->label);
	return 0;
}

/* Opens N as a regular file (the one fstat'ed as ST: a swap in between fails). */
static int node_open_file(const struct node *n, const struct stat *st, sbx_error **err)
{
	int fd = node_open(n, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	struct stat now;
	if (fd < 0)
		return sbx_error_setsys(err, fd, -fd, "open %s", n->label);
	if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino ||
	    now.st_dev != st->st_dev) {
		close(fd);
		return sbx_error_set(err, -EAGAIN, "%s changed while it was read", n->label);
	}
	return fd;
}

static int node_readlink(const struct node *n, char *buf, size_t size, sbx_error **err)
{
	_cleanup_close_ int fd = node_open(n, O_PATH | O_NOFOLLOW);
	ssize_t len = fd < 0 ? -1 : readlinkat(fd, "", buf, size - 1);
	if (len < 0)
		return sbx_error_setsys(err, fd < 0 ? fd : -errno, fd < 0 ? -fd : errno, "readlink %s", n->label);
	buf[len] = '\0';
	return (int)len;
}

static int node_open_dir(const struct node *n, sbx_error **err)
{
	int fd = node_open(n, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return sbx_error_setsys(err, fd, -fd, "open %s", n->label);
	return fd;
}

static int hash_node(EVP_MD_CTX *md, const struct node *n, const char *rel, const char *crel,
		     const struct ctx_ignore *ig, int depth, sbx_error **err)
{
	struct stat st;
	int r = node_stat(n, &st, err);
	if (r < 0)
		return r;
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "%s: directory tree deeper than 256", n->label);
	char head[64];
	if (S_ISREG(st.st_mode)) {
		snprintf(head, sizeof(head), "\nF %o %lld ", (unsigned)(st.st_mode & 07777), (long long)st.st_size);
		EVP_DigestUpdate(md, head, strlen(head));
		EVP_DigestUpdate(md, rel, strlen(rel) + 1);
		_cleanup_close_ int fd = node_open_file(n, &st, err);
		if (fd < 0)
			return fd;
		char buf[65536];
		ssize_t got;
		while ((got = read(fd, buf, sizeof(buf))) > 0)
			EVP_DigestUpdate(md, buf, (size_t)got);
		if (got < 0)
			return sbx_error_setsys(err, -errno, errno, "read %s", n->label);
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		int len = node_readlink(n, target, sizeof(target), err);
		if (len < 0)
			return len;
		EVP_DigestUpdate(md, "\nL ", 3);
		EVP_DigestUpdate(md, rel, strlen(rel) + 1);
		EVP_DigestUpdate(md, target, (size_t)len);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	snprintf(head, sizeof(head), "\nD %o ", (unsigned)(st.st_mode & 07777));
	EVP_DigestUpdate(md, head, strlen(head));
	EVP_DigestUpdate(md, rel, strlen(rel) + 1);
	_cleanup_close_ int dfd = node_open_dir(n, err);
	if (dfd < 0)
		return dfd;
	char **names = sbx__ctx_sorted_entries(dfd);
	r = 0;
	for (size_t i = 0; names[i] && r == 0; i++) {
		_cleanup_free_ char *cr = crel ? (*crel ? xasprintf("%s/%s", crel, names[i]) : xstrdup(names[i])) : NULL;
		if (cr && sbx__ctx_ignored(ig, cr))
			continue;
		_cleanup_free_ char *label = xasprintf("%s/%s", n->label, names[i]);
		_cleanup_free_ char *sr = *rel ? xasprintf("%s/%s", rel, names[i]) : xstrdup(names[i]);
		struct node c = { .base = dfd, .path = names[i], .label = label };
		r = hash_node(md, &c, sr, cr, ig, depth + 1, err);
	}
	sbx__strv_free(names);
	return r;
}

int sbx__ctx_hash(EVP_MD_CTX *md, const char *root_dir, const char *rel, const struct ctx_ignore *ig,
		  sbx_error **err)
{
	_cleanup_close_ int root = sbx__ctx_open_root(root_dir, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *label = *rel ? xasprintf("%s/%s", root_dir, rel) : xstrdup(root_dir);
	struct node n = { .base = root, .path = rel, .in_root = true, .follow = true, .label = label };
	return hash_node(md, &n, "", rel, ig, 0, err);
}

int sbx__ctx_stat(struct stat *st, const char *root_dir, const char *rel)
{
	_cleanup_close_ int root = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	_cleanup_close_ int fd = sbx__ctx_open_in(root, rel, O_PATH, true);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? -errno : 0;
}

static int set_meta(const char *dst, const struct stat *st, const struct copy_opts *o, sbx_error **err)
{
	uid_t uid = o->chown ? o->uid : 0;
	gid_t gid = o->chown ? o->gid : 0;
	if (lchown(dst, uid, gid) < 0)
		return sbx_error_setsys(err, -errno, errno, "chown %s", dst);
	if (!S_ISLNK(st->st_mode)) {
		mode_t mode = o->chmod >= 0 ? (mode_t)o->chmod : st->st_mode & 07777;
		if (chmod(dst, mode) < 0)
			return sbx_error_setsys(err, -errno, errno, "chmod %s", dst);
	}
	struct timespec ts[2] = { st->st_mtim, st->st_mtim };
	utimensat(AT_FDCWD, dst, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int copy_file(const struct node *n, const struct stat *st, const char *dst, sbx_error **err)
{
	_cleanup_close_ int in = node_open_file(n, st, err);
	if (in < 0)
		return in;
	unlink(dst);
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", dst);
	char buf[65536];
	ssize_t got;
	while ((got = read(in, buf, sizeof(buf))) > 0) {
		int r = sbx__write_all(out, buf, (size_t)got);
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "write %s", dst);
	}
	if (got < 0)
		return sbx_error_setsys(err, -errno, errno, "read %s", n->label);
	return 0;
}

static int copy_node(const struct node *n, const char *dst, const char *crel, const struct copy_opts *o,
		     bool top, int depth, sbx_error **err)
{
	struct stat st;
	int r = node_stat(n, &st, err);
	if (r < 0)
		return r;
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "%s: directory tree deeper than 256", n->label);
	if (S_ISREG(st.st_mode)) {
		if ((r = copy_file(n, &st, dst, err)) < 0)
			return r;
		return set_meta(dst, &st, o, err);
	}
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		if ((r = node_readlink(n, target, sizeof(target), err)) < 0)
			return r;
		unlink(dst);
		if (symlink(target, dst) < 0)
			return sbx_error_setsys(err, -errno, errno, "symlink %s", dst);
		return set_meta(dst, &st, o, err);
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	struct stat have;
	bool existed = lstat(dst, &have) == 0 && S_ISDIR(have.st_mode);
	if (!existed && mkdir(dst, 0700) < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", dst);
	_cleanup_close_ int dfd = node_open_dir(n, err);
	if (dfd < 0)
		return dfd;
	char **names = sbx__ctx_sorted_entries(dfd);
	for (size_t i = 0; names[i] && r == 0; i++) {
		_cleanup_free_ char *cr = crel ? (*crel ? xasprintf("%s/%s", crel, names[i]) : xstrdup(names[i])) : NULL;
		if (cr && sbx__ctx_ignored(o->ig, cr))
			continue;
		_cleanup_free_ char *label = xasprintf("%s/%s", n->label, names[i]);
		_cleanup_free_ char *d = xasprintf("%s/%s", dst, names[i]);
		struct node c = { .base = dfd, .path = names[i], .label = label };
		r = copy_node(&c, d, cr, o, false, depth + 1, err);
	}
	sbx__strv_free(names);
	if (r < 0 || (top && existed))
		return r;
	return set_meta(dst, &st, o, err);
}

int sbx__ctx_copy(const char *root_dir, const char *rel, const char *dst, const struct copy_opts *o,
		  sbx_error **err)
{
	_cleanup_close_ int root = sbx__ctx_open_root(root_dir, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *label = *rel ? xasprintf("%s/%s", root_dir, rel) : xstrdup(root_dir);
	struct node n = { .base = root, .path = rel, .in_root = true, .follow = o->follow_top, .label = label };
	return copy_node(&n, dst, o->rel, o, true, 0, err);
}

bool sbx__ctx_is_archive(const char *root_dir, const char *rel)
{
	_cleanup_close_ int root = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = root < 0 ? -1 : sbx__ctx_open_file(root, rel);
	if (fd < 0)
		return false;
	struct archive *a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	struct archive_entry *e;
	bool ok = archive_read_open_fd(a, fd, 65536) == ARCHIVE_OK &&
		  archive_read_next_header(a, &e) == ARCHIVE_OK;
	archive_read_free(a);
	return ok;
}

/* Gives the extracted tree at DFD/NAME to UID:GID, never following a symlink. */
static int chown_tree(int dfd, const char *name, const char *label, uid_t uid, gid_t gid, int depth,
		      sbx_error **err)
{
	struct stat st;
	if (depth > 256 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchownat(dfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -EIO, errno, "chown %s", label);
	if (!S_ISDIR(st.st_mode))
		return 0;
	_cleanup_close_ int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", label);
	char **names = sbx__ctx_sorted_entries(sub);
	int r = 0;
	for (size_t i = 0; names[i] && r == 0; i++) {
		_cleanup_free_ char *sl = xasprintf("%s/%s", label, names[i]);
		r = chown_tree(sub, names[i], sl, uid, gid, depth + 1, err);
	}
	sbx__strv_free(names);
	return r;
}

int sbx__ctx_extract(const char *root_dir, const char *rel, const char *dst,
		     const struct copy_opts *o, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0)
		return -ENOSYS;
	_cleanup_close_ int root = sbx__ctx_open_root(root_dir, err);
	if (root < 0)
		return root;
	_cleanup_close_ int fd = sbx__ctx_open_file(root, rel);
	if (fd < 0)
		return sbx_error_setsys(err, fd == -EINVAL ? -EINVAL : fd, fd == -EINVAL ? 0 : -fd,
				       "%s/%s is not a regular file in the build context", root_dir, rel);
	int r = sbx__image_unpack_archive_fd(fd, rel, dst, err);
	if (r < 0 || !o->chown)
		return r;
	return chown_tree(AT_FDCWD, dst, dst, o->uid, o->gid, 0, err);
}
