/* SPDX-License-Identifier: MIT */
/*
 * init's side of the sudo broker (docs/security.md, "sudo"). At setup, with
 * the sandbox's policy on, init puts the sbx-sudo front-end (embedded in init, sudo_blob.S) at /dev/sbx/sudo,
 * binds it read-only and nosuid over /usr/bin/sudo, and listens on
 * /dev/sbx/sudo.sock. /dev is init's own tmpfs, so nothing lands in the
 * writable layer and nobody but the sandbox's root can change either file.
 *
 * init itself never accepts a connection nor touches a client's fds: when
 * the listener is readable it starts one broker process (the same binary,
 * as the sandbox's root, through spawn_command like any command: same
 * cgroup, seccomp filter, capabilities, no_new_privs), which accepts one
 * connection, forks a handler for it and exits; init re-arms the listener
 * when it reaps that process. A client can send fds of pipes whose mutex
 * another of its processes holds (see "A pipe's mutex, held from inside"):
 * the last close of such an fd blocks, and only a broker process, never
 * init's loop, ever makes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/mount.h>

#include "spawn.h"
#include "sudo.h"

extern const char sbx__sudo_blob[];
extern const char sbx__sudo_blob_end[];

static int write_blob(int fd)
{
	const char *p = sbx__sudo_blob;
	size_t left = (size_t)(sbx__sudo_blob_end - sbx__sudo_blob);
	while (left) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		left -= (size_t)w;
	}
	return 0;
}

/* The mount point: the image's /usr/bin/sudo (a regular file, never a
 * symlink's target), or with the policy on a new empty one, not in a
 * template build (its upper dir becomes an image layer). */
static int sudo_target(const struct init_cfg *cfg)
{
	int t = open("/usr/bin/sudo", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (t >= 0 && fstat(t, &st) == 0 && S_ISREG(st.st_mode))
		return t;
	if (t >= 0) {
		close(t);
		return -EINVAL;
	}
	int building = cfg->upper_dir && !cfg->volatile_upper;
	if (errno != ENOENT || building)
		return -ENOENT;
	init_as_sandbox_root(cfg, 1);
	/* 0644: were it ever left without the mount, running it fails
	 * (126) instead of a shell running an empty script (0). */
	int c = open("/usr/bin/sudo", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	init_as_sandbox_root(cfg, 0);
	if (c < 0)
		return -errno;
	close(c);
	t = open("/usr/bin/sudo", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return t >= 0 ? t : -errno;
}

/* /dev/sbx/sudo, read-only and nosuid, over the target. */
static int bind_front_end(int target)
{
	int tree = (int)syscall(SYS_open_tree, AT_FDCWD, INIT_SUDO_BIN, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return -errno;
	struct mount_attr at = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	int r = 0;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &at, sizeof(at)) < 0 ||
	    syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		r = -errno;
	close(tree);
	return r;
}

static int listen_sock(const struct init_cfg *cfg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, INIT_SUDO_SOCK, sizeof(INIT_SUDO_SOCK));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	init_as_sandbox_root(cfg, 1);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	init_as_sandbox_root(cfg, 0);
	/* Every user connects (the broker applies the policy): 0666. */
	if (r < 0 || chmod(INIT_SUDO_SOCK, 0666) < 0 || listen(fd, 64) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

int init_sudo_setup(struct init_cfg *cfg, char *msg, size_t msglen)
{
	cfg->sudo_fd = -1;
	/* Off: the image's own sudo stays as it is (and is no mount point
	 * that a dpkg upgrade of sudo, run by root, could not replace). */
	if (!cfg->sudo)
		return 0;
	int target = sudo_target(cfg);
	if (target == -ENOENT)
		return 0; /* no /usr/bin in the image, or a template build without sudo */
	if (target < 0) {
		init_fmt(msg, msglen, "sudo policy (label sbx.sudo=nopasswd): /usr/bin/sudo in the image is not a "
			 "regular file");
		return target;
	}
	const char *step = "create /dev/sbx";
	int r = 0;
	init_as_sandbox_root(cfg, 1);
	if (mkdir("/dev/sbx", 0755) < 0)
		r = -errno;
	int fd = -1;
	if (r == 0) {
		step = "write " INIT_SUDO_BIN;
		fd = open(INIT_SUDO_BIN, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
		r = fd < 0 ? -errno : write_blob(fd);
		if (fd >= 0)
			close(fd);
	}
	init_as_sandbox_root(cfg, 0);
	if (r == 0 && (r = bind_front_end(target)) < 0)
		step = "mount " INIT_SUDO_BIN " over /usr/bin/sudo";
	close(target);
	if (r == 0 && (r = listen_sock(cfg)) < 0)
		step = "listen on " INIT_SUDO_SOCK;
	if (r < 0) {
		init_fmt(msg, msglen, "sudo broker: %s", step);
		init_append_errno(msg, msglen, -r);
		return r;
	}
	cfg->sudo_fd = r;
	return 0;
}

pid_t init_sudo_spawn(const struct init_cfg *cfg)
{
	static const struct init_user root = { .uid = 0, .gid = 0, .groups = { 0 }, .n_groups = 1,
					       .home = "/root" };
	char *argv[] = { (char *)INIT_SUDO_BIN, (char *)"--sbx-broker", (char *)(cfg->sudo ? "nopasswd" : "off"),
			 NULL };
	char *none[] = { NULL };
	struct spawn_req q = { .argv = argv, .base_env = (char **)cfg->env, .extra_env = none, .cwd = "/",
			       .as = &root, .fds = { cfg->sudo_fd, cfg->sudo_fd, cfg->sudo_fd } };
	pid_t pid = 0;
	int master = -1, code = 0;
	char msg[256];
	init_req_begin(0);
	int r = spawn_command(&pid, &master, &q, -1, msg, sizeof(msg), &code);
	init_req_end();
	return r < 0 ? -1 : pid;
}
