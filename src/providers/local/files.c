/* SPDX-License-Identifier: MIT */
/*
 * File transfer for the local provider without a round trip through init:
 * init hands us one O_PATH fd of the sandbox root, and every path is
 * resolved with openat2(RESOLVE_IN_ROOT), so symlinks planted inside the
 * sandbox can never lead the host process outside it.
 *
 * The sandbox is hostile. Every open of a path it controls is O_NONBLOCK
 * (a FIFO opens at once, or fails ENXIO for writing) and is kept only once
 * fstat says it is a regular file or directory, so a FIFO or device put
 * where a file is expected gives an error instead of blocking the host
 * thread. What a download hands the host carries no set-id or sticky bit, no
 * xattr (file capabilities), no owner but the downloader's, no special file
 * and no symlink leading out of the copied tree (docs/security.md).
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
#include "../../util/log.h"
#include "local_int.h"

static const char *type_of(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return "regular file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symlink";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	case S_IFCHR:
		return "character device";
	case S_IFBLK:
		return "block device";
	default:
		return "special file";
	}
}

#define IN_ROOT (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
#define BENEATH (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

/* openat2 returning -errno. EAGAIN is retried a few times only: besides a
 * rename racing RESOLVE_IN_ROOT it means a lease the sandbox holds on the
 * file, which must give an error, not a spin. */
static int open2(int dirfd, const char *path, int flags, unsigned mode, uint64_t resolve)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .mode = mode, .resolve = resolve };
	int fd = -1;
	for (int i = 0; i < 8 && fd < 0; i++) {
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd < 0 && errno != EAGAIN)
			break;
	}
	return fd < 0 ? -errno : fd;
}

int sbx__local_open_in(int root, const char *path, int flags, unsigned mode)
{
	int fd = open2(root, path, flags, mode, IN_ROOT);
	if (fd < 0) {
		errno = -fd;
		return -1;
	}
	return fd;
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

/* Opens a regular file the sandbox may control without ever blocking (see
 * the top of the file). Returns the fd; -EISDIR, or -EINVAL with *type set,
 * when PATH is something else; -errno otherwise. */
static int open_regular(int dirfd, const char *path, int flags, unsigned mode, uint64_t resolve,
			struct stat *st, mode_t *type)
{
	flags |= O_NONBLOCK | O_NOCTTY | (resolve == BENEATH ? O_NOFOLLOW : 0);
	int fd = open2(dirfd, path, flags, mode, resolve);
	if (fd == -ENXIO) { /* a FIFO opened for writing with no reader (or a device) */
		int p = open2(dirfd, path, O_PATH | (flags & O_NOFOLLOW), 0, resolve);
		*type = p >= 0 && fstat(p, st) == 0 ? st->st_mode : S_IFIFO;
		if (p >= 0)
			close(p);
		return -EINVAL;
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		*type = st->st_mode;
		return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	}
	return fd;
}

static int open_error(sbx_error **err, int r, mode_t type, const char *verb, const char *path,
		      const char *id)
{
	if (r == -EISDIR)
		return sbx_error_set(err, r, "%s %s in sandbox %s: is a directory", verb, path, id);
	if (r == -EINVAL && type)
		return sbx_error_set(err, r, "%s %s in sandbox %s: is a %s, not a regular file", verb, path, id,
				     type_of(type));
	return sbx_error_setsys(err, r, -r, "%s %s in sandbox %s", verb, path, id);
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
	struct stat st;
	mode_t type = 0;
	_cleanup_close_ int fd = open_regular(root, path, O_WRONLY | O_CREAT, mode & 07777, IN_ROOT, &st, &type);
	if (fd < 0)
		return open_error(err, fd, type, "write", path, sb->id);
	if (ftruncate(fd, 0) < 0)
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
	struct stat st;
	mode_t type = 0;
	_cleanup_close_ int fd = open_regular(root, path, O_RDONLY, 0, IN_ROOT, &st, &type);
	if (fd < 0)
		return open_error(err, fd, type, "read", path, sb->id);
	if ((uint64_t)st.st_size > max)
		return sbx_error_set(err, -EFBIG, "read %s in sandbox %s: %lld bytes exceed the %zu-byte limit",
				     path, sb->id, (long long)st.st_size, max);
	char *data = NULL;
	int r = sbx__read_fd(&data, len_out, fd, max, path, err);
	if (r == 0)
		*data_out = data;
	return r;
}

/* One tree copy. A download lands on the host, so it keeps permission bits
 * only (applying the umask to what it creates), makes no symlink that leads
 * out of the copied tree and skips special files; an upload keeps modes and
 * symlinks as they are, since the sandbox resolves them in its own root. */
struct copy {
	int down;          /* sandbox -> host */
	const char *what;  /* "download" / "upload", for messages */
};

/* Copies the first `size` bytes (the size when the copy began: a file the
 * sandbox keeps growing does not make the copy endless), keeping holes, so
 * a sparse file costs the host no more disk than it costs the sandbox. */
static int copy_data(int in, int out, off_t size, const char *what, sbx_error **err)
{
	char chunk[1 << 16];
	off_t off = 0, end = size;
	while (off < end) {
		off_t data = lseek(in, off, SEEK_DATA), hole = end;
		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0)
			data = off;
		else if ((hole = lseek(in, data, SEEK_HOLE)) < 0 || hole > end)
			hole = end;
		for (off = data; off < hole;) {
			size_t want = (size_t)(hole - off) < sizeof(chunk) ? (size_t)(hole - off) : sizeof(chunk);
			ssize_t n = pread(in, chunk, want, off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return sbx_error_setsys(err, -errno, errno, "read %s", what);
			if (n == 0) { /* shrank meanwhile */
				end = hole = off;
				break;
			}
			for (ssize_t done = 0; done < n;) {
				ssize_t w = pwrite(out, chunk + done, (size_t)(n - done), off + done);
				if (w < 0 && errno == EINTR)
					continue;
				if (w < 0)
					return sbx_error_setsys(err, -errno, errno, "write %s", what);
				done += w;
			}
			off += n;
		}
		off = hole;
	}
	if (ftruncate(out, end) < 0)
		return sbx_error_setsys(err, -errno, errno, "write %s", what);
	return 0;
}

/* A relative target whose only ".." components lead it, fewer of them than
 * the link's depth below the top of the copied tree, stays in the tree: each
 * leading ".." is taken from the real directory holding the link, and every
 * other link in the tree obeys the same rule. Absolute targets, and ".."
 * after a name (which may itself be a link to the top), are refused. */
static int link_inside(const char *t, int depth)
{
	if (*t == '/' || !*t)
		return 0;
	int up = 0, leading = 1;
	for (const char *p = t; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (!leading)
				return 0;
			up++;
		} else if (n > 1 || (n == 1 && p[0] != '.')) {
			leading = 0;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return up < depth;
}

static int special(const struct copy *c, mode_t mode, const char *rel, int depth, sbx_error **err)
{
	if (depth == 0)
		return sbx_error_set(err, -EINVAL, "%s %s: is a %s, not a regular file or directory", c->what, rel,
				     type_of(mode));
	SBX_LOGW("%s: skipped %s: a %s", c->what, rel, type_of(mode));
	return 0;
}

static int dest_error(sbx_error **err, int r, mode_t type, const struct copy *c, const char *rel)
{
	if (r == -ELOOP)
		return sbx_error_set(err, r, "%s %s: the destination is a symlink (never followed)", c->what, rel);
	if (r == -EISDIR || (r == -EINVAL && type))
		return sbx_error_set(err, r, "%s %s: the destination is a %s, not a regular file", c->what, rel,
				     r == -EISDIR ? "directory" : type_of(type));
	return sbx_error_setsys(err, r, -r, "%s %s: create the destination", c->what, rel);
}

static int copy_file(const struct copy *c, int in, const struct stat *st, int dfd, const char *dname,
		     const char *rel, sbx_error **err)
{
	struct stat dst;
	mode_t type = 0;
	_cleanup_close_ int out = open_regular(dfd, dname, O_WRONLY | O_CREAT, st->st_mode & (c->down ? 0777 : 07777),
					       BENEATH, &dst, &type);
	if (out < 0)
		return dest_error(err, out, type, c, rel);
	if (ftruncate(out, 0) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s %s: truncate the destination", c->what, rel);
	/* An existing file keeps its mode but never a set-id bit over sandbox bytes. */
	if (c->down && (dst.st_mode & 07000) && fchmod(out, dst.st_mode & 0777) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s %s: clear set-id bits", c->what, rel);
	if (!c->down)
		fchmod(out, st->st_mode & 07777);
	return copy_data(in, out, st->st_size, rel, err);
}

static int copy_entry(const struct copy *c, int sfd, const char *sname, int dfd, const char *dname,
		      const char *rel, int depth, sbx_error **err);

static int copy_dir(const struct copy *c, int in, const struct stat *st, int dfd, const char *dname,
		    const char *rel, int depth, sbx_error **err)
{
	if (mkdirat(dfd, dname, c->down ? (st->st_mode & 0777) | 0700 : 0700) < 0 && errno != EEXIST)
		return sbx_error_setsys(err, -errno, errno, "%s %s: mkdir", c->what, rel);
	_cleanup_close_ int sub = open2(dfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, BENEATH);
	if (sub < 0)
		return dest_error(err, sub, 0, c, rel);
	int dup_fd = dup(in);
	_cleanup_closedir_ DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return sbx_error_setsys(err, -errno, errno, "%s %s: list", c->what, rel);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *crel = xasprintf("%s%s%s", rel, strcmp(rel, "/") ? "/" : "", de->d_name);
		int r = copy_entry(c, in, de->d_name, sub, de->d_name, crel, depth + 1, err);
		if (r < 0)
			return r;
	}
	/* after the children, so a read-only directory can be filled */
	if (!c->down)
		fchmod(sub, st->st_mode & 07777);
	return 0;
}

/* Copies what `in` (opened O_NONBLOCK) is to dname in dfd. */
static int copy_open(const struct copy *c, int in, int dfd, const char *dname, const char *rel, int depth,
		     sbx_error **err)
{
	struct stat st;
	if (fstat(in, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s %s: stat", c->what, rel);
	if (S_ISREG(st.st_mode))
		return copy_file(c, in, &st, dfd, dname, rel, err);
	if (S_ISDIR(st.st_mode))
		return copy_dir(c, in, &st, dfd, dname, rel, depth, err);
	return special(c, st.st_mode, rel, depth, err);
}

static int copy_link(const struct copy *c, int sfd, const char *sname, int dfd, const char *dname,
		     const char *rel, int depth, sbx_error **err)
{
	char target[4096];
	ssize_t n = readlinkat(sfd, sname, target, sizeof(target) - 1);
	if (n < 0)
		return sbx_error_setsys(err, -errno, errno, "%s %s: readlink", c->what, rel);
	target[n] = '\0';
	if (c->down && !link_inside(target, depth)) {
		SBX_LOGW("%s: skipped %s: a symlink leading out of the copied tree", c->what, rel);
		return 0;
	}
	unlinkat(dfd, dname, 0);
	if (symlinkat(target, dfd, dname) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s %s: symlink", c->what, rel);
	return 0;
}

/* Copies entry sname of directory sfd to dname in directory dfd. Neither
 * side follows a symlink: links are copied as links (see link_inside), and
 * other types than files and directories are skipped, or refused at the top. */
static int copy_entry(const struct copy *c, int sfd, const char *sname, int dfd, const char *dname,
		      const char *rel, int depth, sbx_error **err)
{
	struct stat st;
	if (depth > 256)
		return sbx_error_set(err, -ELOOP, "%s %s: directory tree deeper than 256", c->what, rel);
	if (fstatat(sfd, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s %s", c->what, rel);
	if (S_ISLNK(st.st_mode))
		return copy_link(c, sfd, sname, dfd, dname, rel, depth, err);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return special(c, st.st_mode, rel, depth, err);
	_cleanup_close_ int in = open2(sfd, sname, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW, 0, BENEATH);
	if (in < 0)
		return sbx_error_setsys(err, in, -in, "%s %s: open", c->what, rel);
	return copy_open(c, in, dfd, dname, rel, depth, err);
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

/* Where a copy lands, like cp: into DST if DST is an existing directory (not
 * a symlink to one), else as DST itself. */
static int place(int dfd, const char *dbase, const char *sbase, int *into, const char **name)
{
	struct stat st;
	*into = -1;
	*name = dbase;
	if (fstatat(dfd, dbase, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		*into = open2(dfd, dbase, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, BENEATH);
		if (*into < 0)
			return *into;
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
	if (!*dbase)
		return sbx_error_set(err, -EINVAL, "upload to %s: name a path below /", dst);
	_cleanup_close_ int sfd = open(sdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0 || faccessat(sfd, sbase, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_error_setsys(err, -errno, errno, "upload: %s", src);
	_cleanup_close_ int dfd = sbx__local_mkdirs_in(root, ddir, err);
	if (dfd < 0)
		return sbx_error_prefix(err, dfd, "upload to %s", dst);
	_cleanup_close_ int into = -1;
	const char *name;
	int r = place(dfd, dbase, sbase, &into, &name);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "upload to %s", dst);
	const struct copy c = { .down = 0, .what = "upload" };
	return copy_entry(&c, sfd, sbase, into >= 0 ? into : dfd, name, src, 0, err);
}

/* The source of a download: SRC resolved in the sandbox root, following a
 * symlink at the top (a link copied as itself could only point out of the
 * copy). Checked through O_PATH first, so a FIFO or a device is refused
 * without being opened; the real open must then find the same inode. */
static int open_source(int root, const char *src, const char *id, sbx_error **err)
{
	struct stat st, st2;
	_cleanup_close_ int p = open2(root, src, O_PATH, 0, IN_ROOT);
	if (p < 0)
		return sbx_error_setsys(err, p, -p, "download: %s in sandbox %s", src, id);
	if (fstat(p, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "download: %s in sandbox %s", src, id);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return sbx_error_set(err, -EINVAL, "download %s in sandbox %s: is a %s, not a regular file or directory",
				     src, id, type_of(st.st_mode));
	int fd = open2(root, src, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, IN_ROOT);
	if (fd < 0)
		return sbx_error_setsys(err, fd, -fd, "download: %s in sandbox %s", src, id);
	if (fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
		close(fd);
		return sbx_error_set(err, -EAGAIN, "download: %s in sandbox %s changed while opened", src, id);
	}
	return fd;
}

int sbx__local_download(struct local_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *sdir = NULL, *sbase = NULL, *ddir = NULL, *dbase = NULL;
	split(src, &sdir, &sbase);
	split(dst, &ddir, &dbase);
	if (!*sbase)
		return sbx_error_set(err, -EINVAL, "download %s: name a path below /", src);
	_cleanup_close_ int in = open_source(root, src, sb->id, err);
	if (in < 0)
		return in;
	int r = sbx__mkdir_p(ddir, 0755, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dfd = open(ddir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_error_setsys(err, -errno, errno, "download to %s", ddir);
	_cleanup_close_ int into = -1;
	const char *name;
	if ((r = place(dfd, dbase, sbase, &into, &name)) < 0)
		return sbx_error_setsys(err, r, -r, "download to %s", dst);
	const struct copy c = { .down = 1, .what = "download" };
	return copy_open(&c, in, into >= 0 ? into : dfd, name, src, 0, err);
}
