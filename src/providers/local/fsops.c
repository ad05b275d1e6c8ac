/* SPDX-License-Identifier: MIT */
/*
 * File-system calls on a local sandbox (stat, list, mkdir, rename, remove,
 * chown, path fds) for the envd data plane and remote-style clients. Paths
 * resolve inside the sandbox root only (openat2 RESOLVE_IN_ROOT on the root fd
 * init handed us); the last component is never followed when it is a symlink.
 * Owner and group names come from the sandbox's own /etc/passwd and /etc/group,
 * read only when they are regular files (never blocking on a FIFO).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/passwd.h"
#include "local_int.h"

/* Opens the parent of PATH (O_PATH directory) and points *base at its last
 * component ("" for "/"). */
static int open_parent(int root, const char *path, char **base, sbx_error **err)
{
	_cleanup_free_ char *p = xstrdup(path);
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
	char *slash = strrchr(p, '/');
	*base = xstrdup(slash + 1);
	if (slash == p)
		slash[1] = '\0';
	else
		*slash = '\0';
	int fd = sbx__local_open_in(root, p, O_PATH | O_DIRECTORY, 0);
	if (fd < 0) {
		int e = errno;
		free(*base);
		*base = NULL;
		return sbx_error_setsys(err, -e, e, "%s", path);
	}
	return fd;
}

/* Reads one of the sandbox's account files (small; past SBX_PASSWD_MAX it
 * is ignored, as the server and builds do, rather than cut mid-line). The
 * sandbox may make it a FIFO or a link to a device: O_NONBLOCK opens those
 * at once, and only a regular file is read. */
static char *read_etc(int root, const char *file, size_t *len)
{
	struct stat st;
	*len = 0;
	_cleanup_close_ int fd = sbx__local_open_in(root, file, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	sbx_buf b;
	sbx__buf_init(&b, SBX_PASSWD_MAX);
	char chunk[8192];
	ssize_t n;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (sbx__buf_append(&b, chunk, (size_t)n) < 0) {
			sbx__buf_free(&b);
			return NULL;
		}
	return sbx__buf_steal(&b, len);
}

/* The name listed for ID, or NULL. */
static char *name_of(const char *db, size_t len, int group, unsigned id)
{
	struct sbx_pwent e;
	if (sbx__pw_by_id(&e, db, len, group, id) < 0)
		return NULL;
	free(e.home);
	return e.name;
}

/* NAME's id (and for passwd its primary gid in *gid). 0 or -ENOENT. */
static int id_of(const char *db, size_t len, int group, const char *name, unsigned *id, unsigned *gid)
{
	struct sbx_pwent e;
	int r = sbx__pw_by_name(&e, db, len, group, name);
	if (r < 0)
		return r;
	*id = e.id;
	if (gid)
		*gid = e.gid;
	sbx__pw_clear(&e);
	return 0;
}

struct names {
	char *passwd, *group;
	size_t passwd_len, group_len;
	uint32_t id_base; /* the sandbox's host id of root inside */
};

static void fill(sbx_file_info *f, const struct stat *in, const char *name, const char *path, int dirfd,
		 const struct names *nm)
{
	/* Owners as the sandbox sees them: host ids less its id base. */
	struct stat shifted = *in;
	const struct stat *st = &shifted;
	if (nm->id_base && in->st_uid >= nm->id_base && in->st_uid - nm->id_base < 65536)
		shifted.st_uid -= nm->id_base;
	if (nm->id_base && in->st_gid >= nm->id_base && in->st_gid - nm->id_base < 65536)
		shifted.st_gid -= nm->id_base;
	f->name = xstrdup(name);
	f->path = xstrdup(path);
	f->type = S_ISREG(st->st_mode) ? SBX_FILE_REGULAR : S_ISDIR(st->st_mode) ? SBX_FILE_DIR :
		  S_ISLNK(st->st_mode) ? SBX_FILE_SYMLINK : SBX_FILE_OTHER;
	f->size = (long long)st->st_size;
	f->mode = st->st_mode & 07777;
	f->uid = st->st_uid;
	f->gid = st->st_gid;
	f->owner = name_of(nm->passwd, nm->passwd_len, 0, st->st_uid);
	f->group = name_of(nm->group, nm->group_len, 1, st->st_gid);
	if (!f->owner)
		f->owner = xasprintf("%u", st->st_uid);
	if (!f->group)
		f->group = xasprintf("%u", st->st_gid);
	f->mtime = (double)st->st_mtim.tv_sec + (double)st->st_mtim.tv_nsec / 1e9;
	if (S_ISLNK(st->st_mode)) {
		char t[4096];
		ssize_t n = readlinkat(dirfd, *name ? name : ".", t, sizeof(t) - 1);
		if (n >= 0) {
			t[n] = '\0';
			f->symlink_target = xstrdup(t);
		}
	}
}

static void names_load(struct names *nm, struct local_sb *sb, int root)
{
	nm->id_base = sbx__local_id_base(sb);
	nm->passwd = read_etc(root, "/etc/passwd", &nm->passwd_len);
	nm->group = read_etc(root, "/etc/group", &nm->group_len);
}

static void names_free(struct names *nm)
{
	free(nm->passwd);
	free(nm->group);
}

int sbx__local_stat(sbx_file_info *out, struct local_sb *sb, const char *path, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int dfd = open_parent(root, path, &base, err);
	if (dfd < 0)
		return dfd;
	struct stat st;
	if (fstatat(dfd, *base ? base : "", &st, AT_SYMLINK_NOFOLLOW | (*base ? 0 : AT_EMPTY_PATH)) < 0)
		return sbx_error_setsys(err, -errno, errno, "%s", path);
	struct names nm;
	names_load(&nm, sb, root);
	fill(out, &st, *base ? base : "/", path, dfd, &nm);
	names_free(&nm);
	return 0;
}

static int list_into(sbx_file_info **v, size_t *n, int dirfd, const char *dir, unsigned depth,
		     const struct names *nm, sbx_error **err)
{
	int fd = dup(dirfd);
	_cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return sbx_error_setsys(err, -errno, errno, "list %s", dir);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		_cleanup_free_ char *path = xasprintf("%s%s%s", dir, strcmp(dir, "/") ? "/" : "", de->d_name);
		*v = xrealloc(*v, (*n + 1) * sizeof(**v));
		memset(&(*v)[*n], 0, sizeof(**v));
		fill(&(*v)[(*n)++], &st, de->d_name, path, dirfd, nm);
		if (depth > 1 && S_ISDIR(st.st_mode)) {
			_cleanup_close_ int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				int r = list_into(v, n, sub, path, depth - 1, nm, err);
				if (r < 0)
					return r;
			}
		}
	}
	return 0;
}

int sbx__local_list_dir(sbx_file_info **out, size_t *n_out, struct local_sb *sb, const char *dir,
			unsigned depth, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_close_ int fd = sbx__local_open_in(root, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "list %s", dir);
	struct names nm;
	names_load(&nm, sb, root);
	sbx_file_info *v = NULL;
	size_t n = 0;
	int r = list_into(&v, &n, fd, dir, depth, &nm, err);
	names_free(&nm);
	if (r < 0) {
		sbx_file_info_free(v, n);
		return r;
	}
	*out = v ? v : xcalloc(1, sizeof(*v));
	*n_out = n;
	return 0;
}

int sbx__local_mkdir(struct local_sb *sb, const char *path, unsigned mode, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_close_ int fd = sbx__local_open_in(root, path, O_PATH, 0);
	if (fd >= 0) {
		struct stat st;
		fstat(fd, &st);
		return S_ISDIR(st.st_mode) ? sbx_error_set(err, -EEXIST, "%s already exists", path)
					   : sbx_error_set(err, -ENOTDIR, "%s exists and is not a directory", path);
	}
	int d = sbx__local_mkdirs_in(root, path, err);
	if (d < 0)
		return d;
	fchmod(d, mode & 07777);
	close(d);
	return 0;
}

int sbx__local_rename(struct local_sb *sb, const char *from, const char *to, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *fb = NULL, *tb = NULL;
	_cleanup_close_ int ff = open_parent(root, from, &fb, err);
	if (ff < 0)
		return ff;
	_cleanup_close_ int tf = open_parent(root, to, &tb, err);
	if (tf < 0)
		return tf;
	if (!*fb || !*tb)
		return sbx_error_set(err, -EINVAL, "rename %s to %s: cannot move the root", from, to);
	if (renameat(ff, fb, tf, tb) < 0)
		return sbx_error_setsys(err, -errno, errno, "rename %s to %s", from, to);
	return 0;
}

int sbx__local_remove(struct local_sb *sb, const char *path, int force, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int dfd = open_parent(root, path, &base, force ? NULL : err);
	if (dfd < 0)
		return force && dfd == -ENOENT ? 0 : dfd;
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return force && errno == ENOENT ? 0 : sbx_error_setsys(err, -errno, errno, "%s", path);
	return sbx__rm_rf_at(dfd, base, err);
}

int sbx__local_chown(struct local_sb *sb, const char *path, const char *user, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	struct names nm;
	names_load(&nm, sb, root);
	_cleanup_free_ char *u = xstrdup(user && *user ? user : "root");
	char *grp = strchr(u, ':');
	if (grp)
		*grp++ = '\0';
	unsigned uid = 0, gid = 0;
	int r = 0;
	if (isdigit((unsigned char)u[0])) {
		uid = (unsigned)strtoul(u, NULL, 10);
		gid = uid;
		id_of(nm.passwd, nm.passwd_len, 0, u, &uid, &gid); /* keep the numbers if not listed */
	} else if (id_of(nm.passwd, nm.passwd_len, 0, u, &uid, &gid) < 0) {
		r = sbx_error_set(err, -ENOENT, "user '%s' not found in the sandbox's /etc/passwd", u);
	}
	if (r == 0 && grp && (isdigit((unsigned char)grp[0]) ? (gid = (unsigned)strtoul(grp, NULL, 10), 0)
							     : id_of(nm.group, nm.group_len, 1, grp, &gid, NULL)) < 0)
		r = sbx_error_set(err, -ENOENT, "group '%s' not found in the sandbox's /etc/group", grp);
	names_free(&nm);
	if (r < 0)
		return r;
	_cleanup_free_ char *base = NULL;
	_cleanup_close_ int dfd = open_parent(root, path, &base, err);
	if (dfd < 0)
		return dfd;
	/* Ids inside are base + id on the host (user namespaces, idmap.c);
	 * an id past the range (from a client or the sandbox's own passwd)
	 * would land in another sandbox's range, or wrap to host root. */
	uint32_t idb = sbx__local_id_base(sb);
	if (idb && (uid > 65535 || gid > 65535))
		return sbx_error_set(err, -EINVAL, "chown %s: ids %u:%u are outside the sandbox's range (0-65535)",
				     path, uid, gid);
	if (fchownat(dfd, *base ? base : "", uid + idb, gid + idb,
		     AT_SYMLINK_NOFOLLOW | (*base ? 0 : AT_EMPTY_PATH)) < 0)
		return sbx_error_setsys(err, -errno, errno, "chown %s", path);
	return 0;
}

int sbx__local_path_fd(int *fd_out, struct local_sb *sb, const char *path, sbx_error **err)
{
	int root = sbx__local_rootfd(sb, err);
	if (root < 0)
		return root;
	int fd = sbx__local_open_in(root, path, O_PATH, 0);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "%s", path);
	*fd_out = fd;
	return 0;
}
