/* SPDX-License-Identifier: MIT */
/*
 * Frozen layers: a sandbox's writable layer as it was at a fork, shared
 * read-only by every child as one more overlay lower layer above the image's
 * (each child writes to a fresh, empty subvolume of its own, as a cold
 * create does).
 *
 * A frozen layer is <scratch>/.frz-NAME/upper: a plain subvolume (no btrfs
 * commit to make it, unlike a snapshot) into which the parent's upper tree
 * is reflink-copied while its cgroup is frozen. A reflink shares the file's
 * extents, so the cost is per file, not per byte. Owners are stored as the
 * image stores them (0..65535, the parent's id range subtracted): the layer
 * is then mounted exactly like an image layer, idmapped onto each child's
 * own range, and a fork of a fork stacks one more such layer.
 *
 * Past a budget of files a copy costs more than one btrfs commit: the layer
 * is then a read-only snapshot of the parent's subvolume instead (one commit
 * whatever it holds). That one keeps the parent's on-disk ids, so its entry
 * in a sandbox's list is "NAME:BASE" and each child mounts it idmapped by a
 * shift from BASE to its own range (setup.c, init's rootfs.c).
 *
 * References: <state>/local/frozen/NAME/ holds one empty file per holder (a
 * sandbox id, or "snapshot:NAME" for a named snapshot recording the layer).
 * A holder's teardown unlinks its file; whoever empties the directory
 * (rmdir succeeds) removes the layer. A crash can leave files of dead
 * holders: the sweep (GC) drops those and removes layers nobody holds.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/fs.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/log.h"
#include "../../util/str.h"
#include "local_int.h"

#define FRZ_PREFIX ".frz-"
#define ID_SPAN 65536u
/* Deeper trees are snapshotted instead: the copy recurses (a few hundred
 * bytes of stack and three fds a level). */
#define MAX_DEPTH 256

struct link_seen {
	dev_t dev;
	ino_t ino;
	char *path; /* relative to the copy's root */
};

struct copy {
	int root;            /* the destination root dir */
	uint32_t base;       /* the source's id base (0: ids kept) */
	long budget;         /* entries left before giving up */
	int depth;
	struct link_seen *links;
	size_t n_links;
	char path[4096];     /* current dir, relative to the roots */
};

static uint32_t canon(const struct copy *cp, uint32_t id)
{
	return cp->base && id >= cp->base && id - cp->base < ID_SPAN ? id - cp->base : id;
}

/* POSIX ACL xattrs name users and groups: their ids move like the owner's. */
static void canon_acl(const struct copy *cp, char *v, ssize_t n)
{
	for (ssize_t off = 4; off + 8 <= n; off += 8) {
		uint16_t tag;
		uint32_t id;
		memcpy(&tag, v + off, 2);
		memcpy(&id, v + off + 4, 4);
		if (tag == 0x02 || tag == 0x08) { /* ACL_USER, ACL_GROUP */
			id = canon(cp, id);
			memcpy(v + off + 4, &id, 4);
		}
	}
}

/* File capabilities of version 3 name the root they belong to. */
static ssize_t canon_caps(const struct copy *cp, char *v, ssize_t n)
{
	if (n != 24 || (v[3] & 0xff) != 0x03)
		return n;
	uint32_t root;
	memcpy(&root, v + 20, 4);
	root = canon(cp, root);
	if (root == 0) { /* plain root: version 2 */
		v[3] = 0x02;
		return 20;
	}
	memcpy(v + 20, &root, 4);
	return n;
}

static int copy_xattrs(const struct copy *cp, const char *src, const char *dst)
{
	char names[8192];
	ssize_t ln = llistxattr(src, names, sizeof(names));
	if (ln < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (ssize_t i = 0; i < ln; i += (ssize_t)strlen(names + i) + 1) {
		const char *name = names + i;
		char val[65536];
		ssize_t n = lgetxattr(src, name, val, sizeof(val));
		if (n < 0)
			return -errno;
		if (!strcmp(name, "system.posix_acl_access") || !strcmp(name, "system.posix_acl_default"))
			canon_acl(cp, val, n);
		else if (!strcmp(name, "security.capability"))
			n = canon_caps(cp, val, n);
		if (lsetxattr(dst, name, val, (size_t)n, 0) < 0)
			return -errno;
	}
	return 0;
}

/* Owner, mode, xattrs and times of dst (named in dfd) from st and src. */
static int finish(const struct copy *cp, int sfd, int dfd, const char *name, const struct stat *st)
{
	if (fchownat(dfd, name, canon(cp, st->st_uid), canon(cp, st->st_gid), AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	/* After the chown, which clears set-id bits. */
	if (!S_ISLNK(st->st_mode) && fchmodat(dfd, name, st->st_mode & 07777, 0) < 0)
		return -errno;
	char sp[64 + NAME_MAX], dp[64 + NAME_MAX];
	snprintf(sp, sizeof(sp), "/proc/self/fd/%d/%s", sfd, name);
	snprintf(dp, sizeof(dp), "/proc/self/fd/%d/%s", dfd, name);
	int r = copy_xattrs(cp, sp, dp);
	if (r < 0)
		return r;
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	return utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int copy_file(int sfd, int dfd, const char *name, const struct stat *st)
{
	/* O_NONBLOCK: a lease held by the (frozen) sandbox fails the open
	 * instead of blocking it for the lease break time. */
	_cleanup_close_ int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	_cleanup_close_ int out = in < 0 ? -1 : openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	if (st->st_size > 0 && ioctl(out, FICLONE, in) < 0) {
		/* Not clonable (another file system): copy the bytes. */
		off_t left = st->st_size;
		while (left > 0) {
			ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			left -= n;
		}
	}
	return 0;
}

static int copy_dir(struct copy *cp, int sfd, int dfd);

/* Out of copy_entry, whose frame every level of the recursion holds. */
static __attribute__((noinline)) int copy_symlink(int sfd, int dfd, const char *name)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	return symlinkat(target, dfd, name) < 0 ? -errno : 0;
}

static int copy_entry(struct copy *cp, int sfd, int dfd, const char *name)
{
	struct stat st;
	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (--cp->budget < 0)
		return -E2BIG;
	size_t plen = strlen(cp->path);
	if (plen + strlen(name) + 2 >= sizeof(cp->path))
		return -ENAMETOOLONG;
	snprintf(cp->path + plen, sizeof(cp->path) - plen, "%s%s", plen ? "/" : "", name);
	int r = 0;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		for (size_t i = 0; i < cp->n_links; i++)
			if (cp->links[i].dev == st.st_dev && cp->links[i].ino == st.st_ino) {
				if (linkat(cp->root, cp->links[i].path, dfd, name, 0) < 0)
					return -errno;
				cp->path[plen] = '\0';
				return 0;
			}
		cp->links = xrealloc(cp->links, (cp->n_links + 1) * sizeof(*cp->links));
		cp->links[cp->n_links++] = (struct link_seen){ st.st_dev, st.st_ino, xstrdup(cp->path) };
	}
	if (S_ISDIR(st.st_mode)) {
		if (cp->depth == MAX_DEPTH) {
			r = -ELOOP;
		} else if (mkdirat(dfd, name, 0700) < 0) {
			r = -errno;
		} else {
			_cleanup_close_ int s2 = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			_cleanup_close_ int d2 = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			cp->depth++;
			r = s2 < 0 || d2 < 0 ? -errno : copy_dir(cp, s2, d2);
			cp->depth--;
		}
	} else if (S_ISREG(st.st_mode)) {
		r = copy_file(sfd, dfd, name, &st);
	} else if (S_ISLNK(st.st_mode)) {
		r = copy_symlink(sfd, dfd, name);
	} else {
		/* Whiteouts (0:0 character devices), FIFOs, sockets, devices. */
		r = mknodat(dfd, name, st.st_mode, st.st_rdev) < 0 ? -errno : 0;
	}
	if (r == 0)
		r = finish(cp, sfd, dfd, name, &st);
	if (r == 0) /* on failure the path names what failed */
		cp->path[plen] = '\0';
	return r;
}

static int copy_dir(struct copy *cp, int sfd, int dfd)
{
	int fd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own offset */
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	int r = 0;
	struct dirent *de;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = copy_entry(cp, sfd, dfd, de->d_name);
	closedir(d);
	return r;
}

/* Entries are "NAME" or "NAME:BASE": the name is the first LOCAL_ID_LEN. */
/* Entries under dir fd, counting stops past max: a walk of directory
 * reads and stats, far cheaper per file than the copy it decides on. */
static long count_entries(int fd, long max)
{
	int dup = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own offset */
	DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
	if (!d) {
		if (dup >= 0)
			close(dup);
		return max + 1;
	}
	long n = 0;
	struct dirent *de;
	while (n <= max && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		struct stat st;
		int dir = de->d_type == DT_DIR ||
			  (de->d_type == DT_UNKNOWN && fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			   S_ISDIR(st.st_mode));
		if (dir) {
			_cleanup_close_ int sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			n += sub < 0 ? max + 1 : count_entries(sub, max - n);
		}
	}
	closedir(d);
	return n;
}

static char *subvol(const char *name)
{
	return xasprintf(FRZ_PREFIX "%.*s", LOCAL_ID_LEN, name);
}

static char *refs_dir(struct local_ctx *c, const char *name)
{
	return xasprintf("%s/frozen/%.*s", c->dir, LOCAL_ID_LEN, name);
}

int sbx__frozen_valid(const char *entry)
{
	size_t n = strlen(entry);
	if (n < LOCAL_ID_LEN || strspn(entry, "0123456789abcdef") < LOCAL_ID_LEN)
		return 0;
	if (n == LOCAL_ID_LEN)
		return 1;
	return entry[LOCAL_ID_LEN] == ':' && n > LOCAL_ID_LEN + 1 && n <= LOCAL_ID_LEN + 11 &&
	       strspn(entry + LOCAL_ID_LEN + 1, "0123456789") == n - LOCAL_ID_LEN - 1;
}

uint32_t sbx__frozen_base(const char *entry)
{
	return entry[LOCAL_ID_LEN] == ':' ? (uint32_t)strtoul(entry + LOCAL_ID_LEN + 1, NULL, 10) : 0;
}

char *sbx__frozen_path(struct local_ctx *c, const char *entry)
{
	return xasprintf("%s/" FRZ_PREFIX "%.*s/upper", c->scratch.dir, LOCAL_ID_LEN, entry);
}

int sbx__frozen_ref(struct local_ctx *c, const char *name, const char *holder, sbx_error **err)
{
	_cleanup_free_ char *dir = refs_dir(c, name);
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, holder);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "hold frozen layer %.*s for %s", LOCAL_ID_LEN, name, holder);
	close(fd);
	return 0;
}

/* The last holder removes the layer: rmdir succeeds only on an empty dir,
 * so of two holders leaving at once exactly one does. */
void sbx__frozen_unref(struct local_ctx *c, const char *name, const char *holder)
{
	_cleanup_free_ char *dir = refs_dir(c, name);
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, holder);
	if (unlink(path) < 0 && errno != ENOENT)
		SBX_LOGW("frozen layer %.*s: drop the reference of %s: %s", LOCAL_ID_LEN, name, holder, strerror(errno));
	if (rmdir(dir) < 0)
		return;
	_cleanup_free_ char *sub = subvol(name);
	if (sbx__scratch_remove(&c->scratch, sub) < 0)
		SBX_LOGW("frozen layer %.*s: could not remove it (sbx gc retries)", LOCAL_ID_LEN, name);
	else
		SBX_LOGD("local: removed frozen layer %.*s", LOCAL_ID_LEN, name);
}

void sbx__frozen_unref_all(struct local_ctx *c, char *const *names, const char *holder)
{
	for (size_t i = 0; names && names[i]; i++)
		sbx__frozen_unref(c, names[i], holder);
}

/* A new layer's reference dir with guard's reference, then its subvolume:
 * from the first step on, a sweep leaves it to its holders. */
static int begin(char name[LOCAL_ID_LEN + 1], struct local_ctx *c, const char *guard, sbx_error **err)
{
	sbx__random_hex(name, LOCAL_ID_LEN);
	_cleanup_free_ char *dir = refs_dir(c, name);
	int r = sbx__mkdir_p(dir, 0700, err);
	if (r < 0)
		return r;
	if ((r = sbx__frozen_ref(c, name, guard, err)) < 0)
		rmdir(dir);
	return r;
}

int sbx__frozen_make(char name[LOCAL_ID_LEN + 1], struct local_ctx *c, const char *src_id, uint32_t base,
		     long max_entries, const char *guard, sbx_error **err)
{
	_cleanup_close_ int layer = sbx__scratch_open(&c->scratch, src_id);
	_cleanup_close_ int sfd = layer < 0 ? -1 : openat(layer, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_error_setsys(err, -errno, errno, "frozen layer: open the writable layer of %s", src_id);
	if (max_entries > 0 && count_entries(sfd, max_entries) > max_entries)
		return sbx_error_set(err, -E2BIG, "frozen layer of %s: more than %ld files", src_id, max_entries);
	int r = begin(name, c, guard, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *sub = subvol(name);
	struct btrfs_ioctl_vol_args_v2 a = { 0 };
	snprintf(a.name, sizeof(a.name), "%s", sub);
	if (ioctl(c->scratch.dirfd, BTRFS_IOC_SUBVOL_CREATE_V2, &a) < 0) {
		r = sbx_error_setsys(err, -errno, errno, "frozen layer: create subvolume %s/%s", c->scratch.dir, sub);
		sbx__frozen_unref(c, name, guard);
		return r;
	}
	_cleanup_close_ int top = openat(c->scratch.dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* The budget also holds if the tree grew since the count (no freezer). */
	struct copy cp = { .base = base, .budget = max_entries > 0 ? max_entries : LONG_MAX };
	if (top < 0) {
		r = -errno;
	} else if (mkdirat(top, "upper", 0700) < 0) {
		r = -errno;
	} else {
		cp.root = openat(top, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = cp.root < 0 ? -errno : copy_dir(&cp, sfd, cp.root);
		struct stat st;
		/* The upper dir is the merged root: its owner and mode too. */
		if (r == 0 && fstat(sfd, &st) == 0 && fchown(cp.root, canon(&cp, st.st_uid), canon(&cp, st.st_gid)) == 0)
			r = fchmod(cp.root, st.st_mode & 07777) < 0 ? -errno : 0;
		if (cp.root >= 0)
			close(cp.root);
	}
	for (size_t i = 0; i < cp.n_links; i++)
		free(cp.links[i].path);
	free(cp.links);
	if (r == -E2BIG)
		sbx_error_set(err, r, "frozen layer of %s: more than %ld files", src_id, max_entries);
	else if (r == -ELOOP)
		sbx_error_set(err, r, "frozen layer of %s: %s is more than %d directories deep", src_id, cp.path, MAX_DEPTH);
	else if (r < 0)
		sbx_error_setsys(err, r, -r, "frozen layer of %s: copy %s", src_id, cp.path[0] ? cp.path : "the upper dir");
	if (r < 0)
		sbx__frozen_unref(c, name, guard);
	return r;
}

int sbx__frozen_snapshot(char name[LOCAL_ID_LEN + 1], struct local_ctx *c, const char *src_id, const char *guard,
			 sbx_error **err)
{
	int r = begin(name, c, guard, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *sub = subvol(name);
	if ((r = sbx__scratch_freeze(&c->scratch, src_id, sub, err)) < 0)
		sbx__frozen_unref(c, name, guard);
	return r;
}

/* Whether holder still needs its layers: a sandbox with a state file, a
 * socket or a writable layer (a create in flight), or a named snapshot. */
static int holder_alive(struct local_ctx *c, const char *holder)
{
	_cleanup_free_ char *p = NULL;
	if (!strncmp(holder, "snapshot:", 9))
		p = xasprintf("%s/snapshots/%s.json", c->dir, holder + 9);
	else
		p = xasprintf("%s/%s.json", c->dir, holder);
	if (access(p, F_OK) == 0)
		return 1;
	if (strncmp(holder, "snapshot:", 9) == 0)
		return 0;
	free(p);
	p = xasprintf("%s/%s.sock", c->dir, holder);
	return access(p, F_OK) == 0 || sbx__scratch_exists(&c->scratch, holder);
}

/* Names of frozen layers nobody alive holds. The one named remove, if it
 * is among them, is removed with its dead holders' files. */
char **sbx__frozen_sweep(struct local_ctx *c, const char *remove)
{
	char **dead = NULL;
	_cleanup_free_ char *top = xasprintf("%s/frozen", c->dir);
	_cleanup_closedir_ DIR *d = opendir(top);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!sbx__frozen_valid(de->d_name))
			continue;
		_cleanup_free_ char *dir = xasprintf("%s/%s", top, de->d_name);
		_cleanup_closedir_ DIR *h = opendir(dir);
		struct dirent *he;
		int live = 0;
		while (h && !live && (he = readdir(h)))
			live = he->d_name[0] != '.' && holder_alive(c, he->d_name);
		if (!live)
			sbx__strv_push(&dead, de->d_name);
	}
	/* Layers whose reference dir is gone (a crash between the two). */
	_cleanup_close_ int sfd = sbx__scratch_open(&c->scratch, ".");
	DIR *s = sfd >= 0 ? fdopendir(steal_fd(&sfd)) : NULL;
	while (s && (de = readdir(s))) {
		const char *n = de->d_name + strlen(FRZ_PREFIX);
		if (strncmp(de->d_name, FRZ_PREFIX, strlen(FRZ_PREFIX)) || !sbx__frozen_valid(n) ||
		    sbx__strv_contains(dead, n))
			continue;
		_cleanup_free_ char *dir = xasprintf("%s/%s", top, n);
		if (access(dir, F_OK) < 0)
			sbx__strv_push(&dead, n);
	}
	if (s)
		closedir(s);
	if (remove && sbx__strv_contains(dead, remove)) {
		_cleanup_free_ char *dir = xasprintf("%s/%s", top, remove);
		sbx__rm_rf(dir, NULL);
		_cleanup_free_ char *sub = subvol(remove);
		sbx__scratch_remove(&c->scratch, sub);
	}
	return dead;
}

/* Layers nobody alive holds (a fork cut short, a crash), listed for GC as
 * dead sandboxes named frz-NAME. */
void sbx__frozen_list(struct local_ctx *c, sbx_sandbox_info **v, size_t *n)
{
	char **dead = sbx__frozen_sweep(c, NULL);
	for (size_t k = 0; dead && dead[k]; k++) {
		*v = xrealloc(*v, (*n + 1) * sizeof(**v));
		sbx_sandbox_info *i = &(*v)[(*n)++];
		memset(i, 0, sizeof(*i));
		i->id = xasprintf(FROZEN_ID_PREFIX "%s", dead[k]);
		i->provider = xstrdup("local");
		i->image = xstrdup("(frozen layer)");
		i->state = xstrdup("dead");
		i->leaked = 1;
	}
	sbx__strv_free(dead);
}

int sbx__frozen_destroy(struct local_ctx *c, const char *name, sbx_error **err)
{
	char **dead = sbx__frozen_sweep(c, name);
	int had = sbx__strv_contains(dead, name);
	sbx__strv_free(dead);
	return had ? 0 : sbx_error_set(err, -ENOENT, "no orphaned frozen layer '%s'", name);
}
