/* SPDX-License-Identifier: MIT */
/*
 * The sandbox root, built inside init's private mount namespace: overlay
 * upper/work in the host's scratch subvolume (scratch.c) or in a tmpfs
 * (size = storage cap), the overlay over the
 * image layers (idmapped onto the sandbox's id range with a user namespace), /proc with Docker's masks, a minimal /dev, read-only /sys,
 * identity files, then pivot_root. Nothing here is visible on the host, and
 * all of it disappears with the namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/mount.h>

#include "../proto.h"
#include "init.h"

#define FAIL(...)                                   \
	do {                                        \
		int e_ = errno;                     \
		init_fmt(msg, msglen, __VA_ARGS__); \
		init_append_errno(msg, msglen, e_); \
		return -e_;                         \
	} while (0)

static int mount_overlay_fsapi(const struct init_cfg *cfg, const char *const *lower, const char *upper,
			       const char *work)
{
	int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	int r = 0;
	/* lowerdir+ lists the top layer first; ours are bottom first. */
	for (int i = cfg->n_layers - 1; i >= 0 && r == 0; i--)
		if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir+", lower[i], 0) < 0)
			r = -errno;
	if (r == 0 && cfg->volatile_upper && syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "volatile", NULL, 0) < 0)
		r = -errno;
	if (r == 0 && (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
		       syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0 ||
		       syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0))
		r = -errno;
	if (r == 0) {
		int mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV);
		if (mfd < 0 || syscall(SYS_move_mount, mfd, "", AT_FDCWD, cfg->root_mnt,
				       MOVE_MOUNT_F_EMPTY_PATH) < 0)
			r = -errno;
		if (mfd >= 0)
			close(mfd);
	}
	close(fs);
	return r;
}

static int mount_overlay_legacy(const struct init_cfg *cfg, const char *const *lower, const char *upper,
				const char *work)
{
	size_t cap = 256 + strlen(upper) + strlen(work);
	for (int i = 0; i < cfg->n_layers; i++)
		cap += strlen(lower[i]) + 1;
	char *opts = malloc(cap);
	if (!opts)
		return -ENOMEM;
	size_t off = (size_t)snprintf(opts, cap, "lowerdir=");
	for (int i = cfg->n_layers - 1; i >= 0; i--)
		off += (size_t)snprintf(opts + off, cap - off, "%s%s", lower[i], i ? ":" : "");
	snprintf(opts + off, cap - off, ",upperdir=%s,workdir=%s%s", upper, work, cfg->volatile_upper ? ",volatile" : "");
	int r = mount("overlay", cfg->root_mnt, "overlay", MS_NODEV, opts) < 0 ? -errno : 0;
	free(opts);
	return r;
}

/*
 * With a user namespace, each (host-owned, shared) layer is seen through an
 * idmapped mount: a file the store holds as uid 0 is uid base+0 to the
 * kernel, so root inside owns the image's files. The layers themselves stay
 * untouched and shared between every sandbox. Paths are /proc/self/fd/N of
 * the detached mounts; fds[] is closed by the caller once the overlay holds
 * them.
 */
static int idmap_layers(const struct init_cfg *cfg, const char **lower, int *fds, char *msg, size_t msglen)
{
	static char paths[INIT_MAX_LAYERS][32];
	for (int i = 0; i < cfg->n_layers; i++) {
		fds[i] = -1;
		lower[i] = cfg->layers[i];
	}
	if (cfg->userns_fd < 0)
		return 0;
	for (int i = 0; i < cfg->n_layers; i++) {
		fds[i] = (int)syscall(SYS_open_tree, AT_FDCWD, cfg->layers[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fds[i] < 0)
			FAIL("open layer %s", cfg->layers[i]);
		/* A fork's frozen snapshot stores its parent's ids: a shift of its own. */
		int ns = cfg->userns_fd;
		for (int k = 0; k < cfg->n_layer_ns; k++)
			if (cfg->layer_ns_index[k] == i)
				ns = cfg->layer_ns_fd[k];
		struct mount_attr at = { .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
						     MOUNT_ATTR_NODEV,
					 .userns_fd = (uint64_t)ns };
		if (syscall(SYS_mount_setattr, fds[i], "", AT_EMPTY_PATH, &at, sizeof(at)) < 0)
			FAIL("idmap layer %s (the image store's file system must support idmapped mounts, "
			     "or use userns=host)", cfg->layers[i]);
		snprintf(paths[i], sizeof(paths[i]), "/proc/self/fd/%d", fds[i]);
		lower[i] = paths[i];
	}
	return 0;
}

/* Without a disk upper dir, a private tmpfs on the shared mount base
 * (invisible outside our mount namespace) holds the overlay mountpoint and
 * the upper and work dirs: its size is the storage cap. With one, the
 * overlay goes on the mount base itself (our mounts are private by now):
 * no tmpfs. Every superblock registers a memcg-aware shrinker, and each
 * memory cgroup's shrinker map grows with the host's number of them
 * (docs/performance.md, "Idle density"): one fewer per sandbox matters. */
static int make_rw(struct init_cfg *cfg, char *upper, char *work, size_t n, char *msg, size_t msglen)
{
	if (cfg->upper_dir) {
		cfg->root_mnt = cfg->rw_mnt;
	} else {
		char opts[64];
		unsigned long long mb = cfg->storage_mb ? cfg->storage_mb : SBX_LOCAL_STORAGE_MB;
		snprintf(opts, sizeof(opts), "mode=0755,size=%llum", mb);
		if (mount("sbx-rw", cfg->rw_mnt, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
			FAIL("mount tmpfs for the writable layer on %s", cfg->rw_mnt);
		static char root[4096];
		snprintf(root, sizeof(root), "%s/root", cfg->rw_mnt);
		cfg->root_mnt = root;
		if (mkdir(root, 0755) < 0)
			FAIL("create %s", root);
	}
	const char *base = cfg->upper_dir ? cfg->upper_dir : cfg->rw_mnt;
	snprintf(upper, n, "%s/upper", base);
	snprintf(work, n, "%s/work", base);
	int fresh = mkdir(upper, 0755) == 0;
	if ((!fresh && errno != EEXIST) || (mkdir(work, 0700) < 0 && errno != EEXIST))
		FAIL("create %s/upper and work", base);
	if (cfg->upper_dir && cfg->upper_ns_fd >= 0) {
		/* A host upper dir keeps the image's ids (it becomes a layer):
		 * the overlay reaches it through an idmapped mount instead. */
		static int ufd = -1;
		ufd = (int)syscall(SYS_open_tree, AT_FDCWD, base, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (ufd < 0)
			FAIL("open upper dir %s", base);
		struct mount_attr at = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)cfg->upper_ns_fd };
		if (syscall(SYS_mount_setattr, ufd, "", AT_EMPTY_PATH, &at, sizeof(at)) < 0)
			FAIL("idmap upper dir %s", base);
		close(cfg->upper_ns_fd);
		snprintf(upper, n, "/proc/self/fd/%d/upper", ufd);
		snprintf(work, n, "/proc/self/fd/%d/work", ufd);
		return 0;
	}
	/* The upper dir is the merged root's inode: root inside owns "/". */
	if (fresh && cfg->userns_fd >= 0 && chown(upper, cfg->id_base, cfg->id_base) < 0)
		FAIL("give %s to the sandbox's root", upper);
	return 0;
}

static void ensure_dir(const char *p, mode_t mode)
{
	if (mkdir(p, mode) == 0 && (mode & 07000))
		chmod(p, mode);
}

static int setup_dev(const struct init_cfg *cfg, char *msg, size_t msglen)
{
	char opts[96];
	/* 256k: room for the sudo front end (sudo.c) besides the nodes; the
	 * rest is /dev/shm's (setup_shm), one superblock for both. */
	snprintf(opts, sizeof(opts), "mode=755,size=%lluk,uid=%u,gid=%u",
		 256 + 1024 * (unsigned long long)(cfg->shm_mb ? cfg->shm_mb : 64), cfg->id_base, cfg->id_base);
	if (mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_STRICTATIME, opts) < 0)
		FAIL("mount /dev");
	static const struct { const char *name; unsigned maj, min; } nodes[] = {
		{ "dev/null", 1, 3 }, { "dev/zero", 1, 5 }, { "dev/full", 1, 7 },
		{ "dev/random", 1, 8 }, { "dev/urandom", 1, 9 }, { "dev/tty", 5, 0 },
	};
	/* umask 0 for the nodes, so they are 0666 without a chmod each. */
	mode_t old_mask = umask(0);
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		if (mknod(nodes[i].name, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0) {
			umask(old_mask);
			FAIL("mknod %s", nodes[i].name);
		}
	}
	umask(old_mask);
	mkdir("dev/pts", 0755);
	mkdir("dev/shm", 01777);
	if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") < 0)
		FAIL("mount /dev/pts");
	static const char *links[][2] = {
		{ "pts/ptmx", "dev/ptmx" }, { "/proc/self/fd", "dev/fd" },
		{ "/proc/self/fd/0", "dev/stdin" }, { "/proc/self/fd/1", "dev/stdout" },
		{ "/proc/self/fd/2", "dev/stderr" },
	};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink(links[i][0], links[i][1]) < 0)
			FAIL("symlink %s", links[i][1]);
	return 0;
}

/* /dev/shm is a directory of /dev's tmpfs bound onto itself with nosuid,
 * nodev, noexec, not a tmpfs of its own: every superblock costs an idle
 * sandbox ~9 KiB (docs/performance.md, "Idle density"). Its files are
 * reachable by no other path in the sandbox: the bind covers the directory. */
static int setup_shm(const struct init_cfg *cfg, char *msg, size_t msglen)
{
	/* Owned as /dev is (its tmpfs options): by root inside. */
	if (chmod("dev/shm", 01777) < 0 || chown("dev/shm", cfg->id_base, cfg->id_base) < 0)
		FAIL("set up /dev/shm");
	if (mount("dev/shm", "dev/shm", NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, "dev/shm", NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		FAIL("mount /dev/shm");
	return 0;
}

/* Docker's masked and read-only /proc paths. Missing ones are skipped. */
static int mask_proc(char *msg, size_t msglen)
{
	static const char *masked[] = { "proc/kcore", "proc/keys", "proc/timer_list",
					"proc/sched_debug", "proc/sysrq-trigger" };
	static const char *ro[] = { "proc/sys", "proc/irq", "proc/bus", "proc/fs" };
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
		if (mount("dev/null", masked[i], NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
			FAIL("mask %s", masked[i]);
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		if (mount(ro[i], ro[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
			if (errno == ENOENT)
				continue;
			FAIL("read-only %s", ro[i]);
		}
		if (mount(NULL, ro[i], NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  NULL) < 0)
			FAIL("read-only %s", ro[i]);
	}
	return 0;
}

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -EIO;
}

static int identity_files(const struct init_cfg *cfg, char *msg, size_t msglen)
{
	char buf[512];
	ensure_dir("etc", 0755);
	/* An image's /etc/resolv.conf or hosts may be a symlink; replace, never follow. */
	unlink("etc/hostname");
	unlink("etc/hosts");
	snprintf(buf, sizeof(buf), "%s\n", cfg->hostname);
	if (write_text("etc/hostname", buf) < 0)
		FAIL("write /etc/hostname");
	snprintf(buf, sizeof(buf),
		 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n",
		 cfg->hostname);
	if (write_text("etc/hosts", buf) < 0)
		FAIL("write /etc/hosts");
	/* With a network (host or internet) the host's resolvers replace the
	 * image's, which would name servers the sandbox cannot reach. */
	if (cfg->network_host || cfg->resolv || access("etc/resolv.conf", F_OK) != 0) {
		unlink("etc/resolv.conf");
		if (write_text("etc/resolv.conf", cfg->resolv ? cfg->resolv : "") < 0)
			FAIL("write /etc/resolv.conf");
	}
	return 0;
}

int init_rootfs(struct init_cfg *cfg, char *msg, size_t msglen)
{
	char upper[4096], work[4096];
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		FAIL("make mounts private");
	int r = make_rw(cfg, upper, work, sizeof(upper), msg, msglen);
	if (r < 0)
		return r;
	if (cfg->n_layers < 1) {
		init_fmt(msg, msglen, "image has no layers");
		return -EINVAL;
	}
	const char *lower[INIT_MAX_LAYERS];
	int lfd[INIT_MAX_LAYERS];
	r = idmap_layers(cfg, lower, lfd, msg, msglen);
	if (r == 0) {
		r = mount_overlay_fsapi(cfg, lower, upper, work);
		if (r < 0)
			r = mount_overlay_legacy(cfg, lower, upper, work);
		for (int i = 0; i < cfg->n_layers; i++)
			if (lfd[i] >= 0)
				close(lfd[i]);
		for (int k = 0; k < cfg->n_layer_ns; k++)
			close(cfg->layer_ns_fd[k]);
		cfg->n_layer_ns = 0;
		if (r < 0) {
			errno = -r;
			FAIL("mount overlay (%d layers) on %s", cfg->n_layers, cfg->root_mnt);
		}
	} else {
		return r;
	}
	if (chdir(cfg->root_mnt) < 0)
		FAIL("chdir %s", cfg->root_mnt);
	/* What init creates in the root belongs to root inside. */
	init_as_sandbox_root(cfg, 1);
	ensure_dir("proc", 0555);
	ensure_dir("dev", 0755);
	ensure_dir("sys", 0555);
	ensure_dir("tmp", 01777);
	init_as_sandbox_root(cfg, 0);
	if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		FAIL("mount /proc");
	if ((r = setup_dev(cfg, msg, msglen)) < 0 || (r = setup_shm(cfg, msg, msglen)) < 0 ||
	    (r = mask_proc(msg, msglen)) < 0)
		return r;
	/* sysfs needs a net namespace we own; with network=host it shows the host's. */
	if (!cfg->network_host)
		mount("sysfs", "sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		FAIL("pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		FAIL("detach old root");
	if (chdir("/") < 0)
		FAIL("chdir /");
	/* After pivot_root: an image whose etc is a symlink to /etc must lead
	 * to its own /etc, not the host's. */
	init_as_sandbox_root(cfg, 1);
	r = identity_files(cfg, msg, msglen);
	init_as_sandbox_root(cfg, 0);
	return r;
}
