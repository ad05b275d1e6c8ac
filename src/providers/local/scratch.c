/* SPDX-License-Identifier: MIT */
/*
 * The sandboxes' writable layers on disk. Each sandbox's overlay upper and
 * work dirs live in a btrfs subvolume of its own, capped by a simple-quota
 * qgroup: the storage limit holds whatever the writer's capabilities (the
 * overlay writes with its mounter's, host root's, which the generic quota
 * code of ext4 lets past its hard limits, and this kernel has no XFS or
 * tmpfs quotas), a subvolume is made and destroyed in tens of microseconds
 * whatever it holds, and squota drops a deleted subvolume's qgroup by itself.
 *
 * The scratch root (SBX_SCRATCH_DIR, default /var/lib/sbx/scratch) is used
 * as it is when it is btrfs already; otherwise a sparse image file beside it
 * (<dir>.img, SBX_SCRATCH_SIZE or 90 % of the free space) is formatted once
 * with mkfs.btrfs and loop-mounted there. Sandboxes of one state dir share
 * <root>/<hash of the state dir>/, so GC of one state dir never touches
 * another's. SBX_SCRATCH=tmpfs keeps the old in-memory layer; where the disk
 * layer cannot be set up (no btrfs, no loop devices) the default falls back
 * to it with a warning, SBX_SCRATCH=disk makes that an error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/loop.h>
#include <linux/magic.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "../../util/log.h"
#include "../../util/str.h"
#include "local_int.h"
#include "proto.h"

#define DEFAULT_ROOT "/var/lib/sbx/scratch"
#define MIN_IMAGE_BYTES (1ULL << 30)
/* BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA (Linux 6.7+), not in older headers. */
#define QUOTA_CTL_ENABLE_SIMPLE 4

extern char **environ;

static int is_btrfs(int fd)
{
	struct statfs s;
	return fstatfs(fd, &s) == 0 && s.f_type == BTRFS_SUPER_MAGIC;
}

static int run_mkfs(const char *img, sbx_error **err)
{
	char *argv[] = { (char *)"mkfs.btrfs", (char *)"-q", (char *)"-f", (char *)img, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int r = posix_spawnp(&pid, "mkfs.btrfs", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return sbx_error_setsys(err, -r, r, "scratch: run mkfs.btrfs for %s (install btrfs-progs)", img);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return sbx_error_set(err, -EIO, "scratch: mkfs.btrfs %s failed (status %d)", img, st);
	return 0;
}

static uint64_t image_size(const char *root)
{
	const char *v = sbx__env("SBX_SCRATCH_SIZE");
	uint64_t bytes = 0;
	if (v && *v && sbx__parse_size(&bytes, v) == 0)
		return bytes;
	_cleanup_free_ char *parent = xstrdup(root);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = '\0';
	struct statvfs s;
	if (statvfs(parent, &s) < 0)
		return 0;
	return (uint64_t)s.f_bavail * s.f_frsize / 10 * 9;
}

/* A loop device over img, mounted on root. LO_FLAGS_AUTOCLEAR: the device
 * goes away with the last unmount. */
static int loop_mount(const char *img, const char *root, sbx_error **err)
{
	_cleanup_close_ int back = open(img, O_RDWR | O_CLOEXEC);
	if (back < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: open %s", img);
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: open /dev/loop-control (no loop devices?)");
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "scratch: find a free loop device");
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return sbx_error_setsys(err, -errno, errno, "scratch: open %s", dev);
		struct loop_config lc = { .fd = (unsigned)back };
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)lc.info.lo_file_name, sizeof(lc.info.lo_file_name), "%s", img);
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) < 0) {
			if (errno == EBUSY)
				continue; /* another process took it first */
			return sbx_error_setsys(err, -errno, errno, "scratch: attach %s to %s", img, dev);
		}
		if (mount(dev, root, "btrfs", MS_NOSUID | MS_NODEV, "discard") < 0)
			return sbx_error_setsys(err, -errno, errno,
						"scratch: mount %s (btrfs on %s) on %s; delete the image to start afresh",
						img, dev, root);
		return 0;
	}
	return sbx_error_set(err, -EBUSY, "scratch: no free loop device for %s", img);
}

/* Whether quotas are on for the btrfs holding fd (sysfs lists qgroups then). */
static int quotas_on(int fd)
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return 0;
	char path[128];
	int n = snprintf(path, sizeof(path), "/sys/fs/btrfs/");
	for (int i = 0; i < BTRFS_FSID_SIZE; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "",
			      fi.fsid[i]);
	snprintf(path + n, sizeof(path) - (size_t)n, "/qgroups");
	return access(path, F_OK) == 0;
}

/* Makes root a btrfs with quotas: as it is, or a loop-mounted image. */
static int prepare_root(const char *root, sbx_error **err)
{
	int r = sbx__mkdir_p(root, 0700, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *lock = xasprintf("%s.lock", root);
	_cleanup_close_ int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0 || flock(lfd, LOCK_EX) < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: lock %s", lock);
	_cleanup_close_ int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: open %s", root);
	_cleanup_free_ char *img = xasprintf("%s.img", root);
	struct stat st;
	int ours = stat(img, &st) == 0;
	if (is_btrfs(dfd) && !ours && !quotas_on(dfd))
		/* Someone's own btrfs: turning quotas on is theirs to decide. */
		return sbx_error_set(err, -ENOTSUP,
				     "scratch: %s is on a btrfs without quotas; run 'btrfs quota enable --simple %s' "
				     "or point SBX_SCRATCH_DIR at another directory", root, root);
	if (!is_btrfs(dfd)) {
		if (!ours) {
			uint64_t size = image_size(root);
			if (size < MIN_IMAGE_BYTES)
				return sbx_error_set(err, -ENOSPC,
						     "scratch: %s would be %llu MiB; it needs 1 GiB of free disk (set SBX_SCRATCH_SIZE or SBX_SCRATCH_DIR)",
						     img, (unsigned long long)(size >> 20));
			_cleanup_close_ int fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
				return sbx_error_setsys(err, -errno, errno, "scratch: create %s", img);
			if ((r = run_mkfs(img, err)) < 0) {
				unlink(img);
				return r;
			}
			SBX_LOGI("scratch: made %s (%llu MiB, sparse) for sandboxes' writable layers", img,
				 (unsigned long long)(size >> 20));
		}
		if ((r = loop_mount(img, root, err)) < 0)
			return r;
		close(dfd);
		dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || !is_btrfs(dfd))
			return sbx_error_set(err, -EIO, "scratch: %s is not btrfs after mounting", root);
	}
	/* Idempotent: enabling quotas that are on already succeeds. */
	struct btrfs_ioctl_quota_ctl_args q = { .cmd = QUOTA_CTL_ENABLE_SIMPLE };
	if (ioctl(dfd, BTRFS_IOC_QUOTA_CTL, &q) < 0)
		return sbx_error_setsys(err, -errno, errno,
					"scratch: enable btrfs simple quotas on %s (needs Linux 6.7+)", root);
	if (fchmod(dfd, 0700) < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: chmod %s", root);
	return 0;
}

static char *root_dir(void)
{
	const char *v = sbx__env("SBX_SCRATCH_DIR");
	return xstrdup(v && *v ? v : DEFAULT_ROOT);
}

/* FNV-1a: a stable short name for the state dir (not a secret). */
static void key_of(char out[17], const char *state)
{
	uint64_t h = 1469598103934665603ULL;
	for (const unsigned char *p = (const unsigned char *)state; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

static void scratch_open_once(struct sbx_scratch *s)
{
	const char *want = sbx__env("SBX_SCRATCH");
	s->mode = SCRATCH_TMPFS;
	if (want && strcmp(want, "tmpfs") == 0)
		return;
	sbx_error *e = NULL;
	_cleanup_free_ char *root = root_dir();
	char key[17];
	key_of(key, s->state);
	_cleanup_free_ char *dir = xasprintf("%s/%s", root, key);
	int r = prepare_root(root, &e);
	if (r == 0 && mkdir(dir, 0700) < 0 && errno != EEXIST)
		r = sbx_error_setsys(&e, -errno, errno, "scratch: create %s", dir);
	if (r == 0 && (s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = sbx_error_setsys(&e, -errno, errno, "scratch: open %s", dir);
	if (r == 0) {
		struct statvfs v;
		s->fs_bytes = fstatvfs(s->dirfd, &v) == 0 ? (uint64_t)v.f_blocks * v.f_frsize : 0;
		s->dir = steal_ptr(&dir);
		s->mode = SCRATCH_DISK;
		sbx_error_free(e);
		return;
	}
	s->failed = r;
	s->why = xstrdup(e && e->msg ? e->msg : "scratch: setup failed");
	sbx_error_free(e);
}

void sbx__scratch_init(struct sbx_scratch *s, const char *state_dir)
{
	memset(s, 0, sizeof(*s));
	s->dirfd = -1;
	s->state = xstrdup(state_dir);
	pthread_mutex_init(&s->lock, NULL);
}

void sbx__scratch_fini(struct sbx_scratch *s)
{
	if (s->dirfd >= 0)
		close(s->dirfd);
	pthread_mutex_destroy(&s->lock);
	free(s->state);
	free(s->dir);
	free(s->why);
}

static void ensure_open(struct sbx_scratch *s)
{
	pthread_mutex_lock(&s->lock);
	if (!s->opened) {
		scratch_open_once(s);
		s->opened = 1;
	}
	pthread_mutex_unlock(&s->lock);
}

int sbx__scratch_mode(struct sbx_scratch *s, sbx_scratch_kind want, sbx_error **err)
{
	if (want == SBX_SCRATCH_TMPFS)
		return SCRATCH_TMPFS;
	ensure_open(s);
	if (s->mode == SCRATCH_DISK)
		return SCRATCH_DISK;
	const char *env = sbx__env("SBX_SCRATCH");
	if (want == SBX_SCRATCH_DISK || (env && strcmp(env, "disk") == 0))
		return sbx_error_set(err, s->failed ? s->failed : -ENOTSUP,
				     "%s (the writable layer on disk was asked for; SBX_SCRATCH=tmpfs keeps it in memory)",
				     s->why ? s->why : "scratch: SBX_SCRATCH=tmpfs");
	pthread_mutex_lock(&s->lock);
	int warn = s->why && !s->warned;
	s->warned = 1;
	pthread_mutex_unlock(&s->lock);
	if (warn)
		SBX_LOGW("%s; writable layers stay in memory (tmpfs)", s->why);
	return SCRATCH_TMPFS;
}

static int peek_fd(struct sbx_scratch *s);

/* Sets nothing up: a limits query must not format a disk. */
uint64_t sbx__scratch_fs_bytes(struct sbx_scratch *s)
{
	pthread_mutex_lock(&s->lock);
	int opened = s->opened;
	uint64_t have = s->mode == SCRATCH_DISK ? s->fs_bytes : 0;
	pthread_mutex_unlock(&s->lock);
	if (opened)
		return have;
	_cleanup_close_ int fd = peek_fd(s);
	struct statvfs v;
	return fd >= 0 && fstatvfs(fd, &v) == 0 ? (uint64_t)v.f_blocks * v.f_frsize : 0;
}

int sbx__scratch_make(struct sbx_scratch *s, const char *id, uint64_t limit, char **dir_out, sbx_error **err)
{
	struct btrfs_ioctl_vol_args_v2 a = { 0 };
	snprintf(a.name, sizeof(a.name), "%s", id);
	if (ioctl(s->dirfd, BTRFS_IOC_SUBVOL_CREATE_V2, &a) < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: create subvolume %s/%s", s->dir, id);
	_cleanup_close_ int fd = openat(s->dirfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct btrfs_ioctl_qgroup_limit_args q = { 0 };
	q.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
	q.lim.max_rfer = limit;
	int r = 0;
	if (fd < 0 || fchmod(fd, 0700) < 0)
		r = sbx_error_setsys(err, -errno, errno, "scratch: open %s/%s", s->dir, id);
	else if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &q) < 0)
		r = sbx_error_setsys(err, -errno, errno, "scratch: set the storage limit of %s/%s", s->dir, id);
	if (r < 0) {
		sbx__scratch_remove(s, id);
		return r;
	}
	*dir_out = xasprintf("%s/%s", s->dir, id);
	return 0;
}

/* A copy-on-write snapshot of src's subvolume as dst, with its own limit:
 * what a fork child starts from. The snapshot shares every extent with src
 * (cost independent of its size), and simple quotas charge dst only for
 * what it writes afterwards. The overlay's work dir is emptied: it holds
 * the parent's in-flight state and a volatile mount's marker, which a new
 * mount refuses. */
int sbx__scratch_snapshot(struct sbx_scratch *s, const char *src, const char *dst, uint64_t limit,
			  sbx_error **err)
{
	_cleanup_close_ int sfd = openat(s->dirfd, src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: open the writable layer %s/%s", s->dir, src);
	struct btrfs_ioctl_vol_args_v2 a = { .fd = sfd };
	snprintf(a.name, sizeof(a.name), "%s", dst);
	if (ioctl(s->dirfd, BTRFS_IOC_SNAP_CREATE_V2, &a) < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: snapshot %s/%s as %s", s->dir, src, dst);
	_cleanup_close_ int fd = openat(s->dirfd, dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct btrfs_ioctl_qgroup_limit_args q = { 0 };
	q.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
	q.lim.max_rfer = limit;
	int r = 0;
	if (fd < 0)
		r = sbx_error_setsys(err, -errno, errno, "scratch: open %s/%s", s->dir, dst);
	else if (ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &q) < 0)
		r = sbx_error_setsys(err, -errno, errno, "scratch: set the storage limit of %s/%s", s->dir, dst);
	else if ((r = sbx__rm_rf_at(fd, "work", NULL)) < 0 && r != -ENOENT)
		sbx_error_setsys(err, r, -r, "scratch: empty the work dir of %s/%s", s->dir, dst);
	else
		r = 0;
	if (r < 0)
		sbx__scratch_remove(s, dst);
	return r;
}

int sbx__scratch_freeze(struct sbx_scratch *s, const char *src, const char *dst, sbx_error **err)
{
	_cleanup_close_ int sfd = openat(s->dirfd, src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: open the writable layer %s/%s", s->dir, src);
	struct btrfs_ioctl_vol_args_v2 a = { .fd = sfd, .flags = BTRFS_SUBVOL_RDONLY };
	snprintf(a.name, sizeof(a.name), "%s", dst);
	if (ioctl(s->dirfd, BTRFS_IOC_SNAP_CREATE_V2, &a) < 0)
		return sbx_error_setsys(err, -errno, errno, "scratch: snapshot %s/%s as %s", s->dir, src, dst);
	return 0;
}

/* Path of sandbox id's subvolume (the disk layer is open). */
char *sbx__scratch_path(struct sbx_scratch *s, const char *id)
{
	return xasprintf("%s/%s", s->dir, id);
}

/* The state dir's scratch directory without setting anything up (GC and
 * listing on a host that never made one must not format a disk): a new fd,
 * or -1 when there is none. */
static int peek_fd(struct sbx_scratch *s)
{
	pthread_mutex_lock(&s->lock);
	int fd = s->opened && s->mode == SCRATCH_DISK ? fcntl(s->dirfd, F_DUPFD_CLOEXEC, 0) : -1;
	int opened = s->opened;
	pthread_mutex_unlock(&s->lock);
	if (opened)
		return fd;
	_cleanup_free_ char *root = root_dir();
	char key[17];
	key_of(key, s->state);
	_cleanup_free_ char *dir = xasprintf("%s/%s", root, key);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !is_btrfs(fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int sbx__scratch_remove(struct sbx_scratch *s, const char *id)
{
	_cleanup_close_ int dfd = peek_fd(s);
	if (dfd < 0)
		return 0;
	struct btrfs_ioctl_vol_args_v2 a = { 0 };
	snprintf(a.name, sizeof(a.name), "%s", id);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY_V2, &a) == 0)
		return 1;
	if (errno == ENOENT)
		return 0;
	int e = errno;
	/* Not a subvolume (made by hand?): remove it as a tree. */
	if (e == EINVAL || e == ENOTDIR)
		return sbx__rm_rf_at(dfd, id, NULL) == 0;
	SBX_LOGW("scratch: remove the writable layer of %s: %s", id, strerror(e));
	return -e;
}

int sbx__scratch_exists(struct sbx_scratch *s, const char *id)
{
	_cleanup_close_ int dfd = peek_fd(s);
	struct stat st;
	return dfd >= 0 && fstatat(dfd, id, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int sbx__scratch_open(struct sbx_scratch *s, const char *id)
{
	_cleanup_close_ int dfd = peek_fd(s);
	return dfd >= 0 ? openat(dfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
}

char **sbx__scratch_list(struct sbx_scratch *s)
{
	int fd = peek_fd(s);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char **v = NULL;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			sbx__strv_push(&v, de->d_name);
	closedir(d);
	return v;
}

/* SBX_LOCAL_STORAGE_MB (10 GiB), unless the scratch file system is small: then a
 * quarter of it (at least 256 MiB), so a few sandboxes cannot fill it. */
unsigned sbx__local_storage_mb(struct local_ctx *c, const sbx_sandbox_opts *o)
{
	if (o->storage_mb)
		return o->storage_mb;
	unsigned mb = SBX_LOCAL_STORAGE_MB;
	if (!o->upper_dir && o->scratch != SBX_SCRATCH_TMPFS) {
		uint64_t fs_mb = sbx__scratch_fs_bytes(&c->scratch) >> 20;
		if (fs_mb && fs_mb / 4 < mb)
			mb = fs_mb / 4 < 256 ? 256 : (unsigned)(fs_mb / 4);
	}
	return mb;
}
