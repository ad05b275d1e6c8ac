/* SPDX-License-Identifier: MIT */
/*
 * File transfer for the local provider without a round trip through init:
 * init hands us one O_PATH fd of the sandbox root, and every path is
 * resolved with openat2(RESOLVE_IN_ROOT), so symlinks planted inside the
 * sandbox can never lead the host process outside it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "local_int.h"

int sbx__local_open_in(int root, const char *path, int flags, unsigned mode)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .mode = mode,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd;
	do
		fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	return fd;
}

/* Children of a directory we opened: never follow symlinks at all. */
static int open_beneath(int dirfd, const char *name, int flags, mode_t mode)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW), .mode = mode,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

/* mkdir -p inside the sandbox; returns an O_DIRECTORY fd of path. */
int sbx__local_mkdirs_in(int root, const char *path, sbx_error **err)
{
	_cleanup_free_ char *p = xstrdup(path);
	size_t n = strlen(p);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		char c = p[i];
		p[i] = '\0';
		int fd = sbx__local_open_in(root, p, O_RDONLY | O_DIRECTORY, 0);
		if (fd < 0 && errno == ENOENT) {
			char *slash = strrchr(p, '/');
			*slash = '\0';
			_cleanup_close_ int parent = sbx__local_open_in(root, *p ? p : "/", O_RDONLY | O_DIRECTORY, 0);
			*slash = '/';
			if (parent < 0 || (mkdirat(parent, slash + 1, 0755) < 0 && errno != EEXIST))
				return sbx_error_setsys(err, -errno, errno, "create directory %s", p);
			fd = sbx__local_open_in(root, p, O_RDONLY | O_DIRECTORY, 0);
		}
		if (fd < 0)
			return sbx_error_setsys(err, -errno, errno, "open directory %s", p);
		p[i] = c;
		if (c == '\0')
			return fd;
		close(fd);
	}
	return sbx__local_open_in(root, "/", O_RDONLY | O_DIRECTORY, 0);
}

static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
}

int sbx__local_write_file(struct local_sb *sb, const char *path, const void *data, size_t len,
			  unsigned mode, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *parent = parent_of(path);
	_cleanup_close_ int dfd = sbx__local_mkdirs_in(root, parent, err);
	if (dfd < 0)
		return sbx_error_prefix(err, dfd, "write %s", path);
	_cleanup_close_ int fd = sbx__local_open_in(root, path, O_WRONLY | O_CREAT | O_TRUNC, mode & 07777);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "write %s in sandbox %s", path, sb->id);
	fchmod(fd, mode & 07777);
	int r = sbx__write_all(fd, data, len);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "write %s in sandbox %s", path, sb->id);
	return 0;
}

int sbx__local_read_file(void **data_out, size_t *len_out, struct local_sb *sb, const char *path,
			 size_t max, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_close_ int fd = sbx__local_open_in(root, path, O_RDONLY, 0);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "read %s in sandbox %s", path, sb->id);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "stat %s", path);
	if (S_ISDIR(st.st_mode))
		return sbx_error_set(err, -EISDIR, "read %s in sandbox %s: is a directory", path, sb->id);
	if ((uint64_t)st.st_size > max)
		return sbx_error_set(err, -EFBIG, "read %s in sandbox %s: %lld bytes exceed the %zu-byte limit",
				     path, sb->id, (long long)st.st_size, max);
	char *data = NULL;
	int r = sbx__read_fd(&data, len_out, fd, max, path, err);
	if (r == 0)
		*data_out = data;
	return r;
}

/* Copies between two open directories; `into_sandbox` picks which side is confined. */
static int copy_fd(int from, int to, const char *what, sbx_error **err)
{
	char chunk[1 << 16];
	for (;;) {
		ssize_t n = read(from, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "read %s", what);
		if (n == 0)
			return 0;
		int r = sbx__write_all(to, chunk, (size_t)n);
		if (r < 0)
			return sbx_error_setsys(err, r, -r, "write %s", what);
	}
}

/* Copies entry sname of directory sfd to dname in directory dfd (tar
 * semantics: files, directories and symlinks with their modes; other types
 * skipped). The destination is opened beneath dfd without following symlinks. */
static int copy_entry(int sfd, const char *sname, int dfd, const char *dname, int depth,
		      sbx_error **err)
{
	struct stat st;
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "copy %s: directory tree deeper than 256", sname);
	if (fstatat(sfd, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -errno, errno, "stat %s", sname);
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(sfd, sname, target, sizeof(target) - 1);
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "readlink %s", sname);
		target[n] = '\0';
		unlinkat(dfd, dname, 0);
		if (symlinkat(target, dfd, dname) < 0)
			return sbx_error_setsys(err, -errno, errno, "symlink %s", dname);
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		_cleanup_close_ int in = openat(sfd, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0)
			return sbx_error_setsys(err, -errno, errno, "open %s", sname);
		_cleanup_close_ int out = open_beneath(dfd, dname, O_WRONLY | O_CREAT | O_TRUNC, st.st_mode & 07777);
		if (out < 0)
			return sbx_error_setsys(err, -errno, errno, "create %s", dname);
		fchmod(out, st.st_mode & 07777);
		return copy_fd(in, out, sname, err);
	}
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (mkdirat(dfd, dname, st.st_mode & 07777) < 0 && errno != EEXIST)
		return sbx_error_setsys(err, -errno, errno, "mkdir %s", dname);
	_cleanup_close_ int sub_d = open_beneath(dfd, dname, O_RDONLY | O_DIRECTORY, 0);
	if (sub_d < 0)
		return sbx_error_setsys(err, -errno, errno, "open directory %s", dname);
	_cleanup_close_ int sub_s = openat(sfd, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub_s < 0)
		return sbx_error_setsys(err, -errno, errno, "open directory %s", sname);
	fchmod(sub_d, st.st_mode & 07777);
	int dup_fd = dup(sub_s);
	_cleanup_closedir_ DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return sbx_error_setsys(err, -errno, errno, "list %s", sname);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = copy_entry(sub_s, de->d_name, sub_d, de->d_name, depth + 1, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static void split(const char *path, char **dir, char **base)
{
	_cleanup_free_ char *p = xstrdup(path);
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	char *slash = strrchr(p, '/');
	if (!slash) {
		*dir = xstrdup(".");
		*base = xstrdup(p);
	} else {
		*base = xstrdup(slash + 1);
		*dir = slash == p ? xstrdup("/") : xstrndup(p, (size_t)(slash - p));
	}
}

/* Where a copy lands, like cp: into DST if DST is an existing directory,
 * else as DST itself. */
static int place(int dfd, const char *dbase, const char *sbase, int *into, const char **name,
		 int confined)
{
	struct stat st;
	*into = -1;
	*name = dbase;
	if (fstatat(dfd, dbase, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		*into = confined ? open_beneath(dfd, dbase, O_RDONLY | O_DIRECTORY, 0)
				 : openat(dfd, dbase, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (*into < 0)
			return -errno;
		*name = sbase;
	}
	return 0;
}

int sbx__local_upload(struct local_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *sdir = NULL, *sbase = NULL, *ddir = NULL, *dbase = NULL;
	split(src, &sdir, &sbase);
	split(dst, &ddir, &dbase);
	_cleanup_close_ int sfd = open(sdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0 || faccessat(sfd, sbase, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -errno, errno, "upload: %s", src);
	_cleanup_close_ int dfd = sbx__local_mkdirs_in(root, ddir, err);
	if (dfd < 0)
		return sbx_error_prefix(err, dfd, "upload to %s", dst);
	_cleanup_close_ int into = -1;
	const char *name;
	if (place(dfd, dbase, sbase, &into, &name, 1) < 0)
		return sbx_error_setsys(err, -errno, errno, "upload to %s", dst);
	return copy_entry(sfd, sbase, into >= 0 ? into : dfd, name, 0, err);
}

int sbx__local_download(struct local_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *sdir = NULL, *sbase = NULL, *ddir = NULL, *dbase = NULL;
	split(src, &sdir, &sbase);
	split(dst, &ddir, &dbase);
	_cleanup_close_ int sfd = sbx__local_open_in(root, sdir, O_RDONLY | O_DIRECTORY, 0);
	if (sfd < 0 || faccessat(sfd, sbase, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -errno, errno, "download: %s in sandbox %s", src, sb->id);
	int r = sbx__mkdir_p(ddir, 0755, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dfd = open(ddir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_error_setsys(err, -errno, errno, "download to %s", ddir);
	_cleanup_close_ int into = -1;
	const char *name;
	if (place(dfd, dbase, sbase, &into, &name, 0) < 0)
		return sbx_error_setsys(err, -errno, errno, "download to %s", dst);
	return copy_entry(sfd, sbase, into >= 0 ? into : dfd, name, 0, err);
}
