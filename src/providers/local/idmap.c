/* SPDX-License-Identifier: MIT */
/*
 * User namespaces: each sandbox's root is an unprivileged host id range of
 * its own. A range is a slot of 65536 ids out of a pool (SBX_USERNS_RANGE,
 * else the `sbx` entry of /etc/subuid and /etc/subgid, else a built-in
 * default), held by an flock on <lock dir>/<slot>. The lock's fd travels to
 * init, which keeps it for life: the slot is free again the moment init
 * dies, whatever killed it, with no cleanup to forget. Processes creating
 * sandboxes concurrently (separate `sbx run`s, a server, a trainer) probe
 * slots from a random start, so they rarely collide.
 *
 * The namespace itself is made here, with its maps written, and init joins
 * it (setns) after it has built the root as host root: mounts, /dev nodes,
 * cgroups and sysctls are set up with host privileges, then every process
 * of the sandbox, init included, runs as ids of the slot. Namespace
 * creation needs a process in it: a CLONE_VM child that only waits on a
 * futex while the maps are written, then exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../util/cleanup.h"
#include "../../util/config.h"
#include "../../util/fs.h"
#include "../../util/log.h"
#include "local_int.h"

#define SLOT_IDS 65536u
#define DEFAULT_START 1048576u          /* 2^20: above any login uid range */
#define DEFAULT_COUNT (16384u * SLOT_IDS) /* 16384 concurrent sandboxes */
#define DEFAULT_LOCK_DIR "/run/sbx-idmap"

/* "start:count" -> range; 0 or -EINVAL. */
static int parse_range(const char *s, uint32_t *start, uint32_t *count)
{
	char *end;
	errno = 0;
	unsigned long long a = strtoull(s, &end, 10);
	if (errno || end == s || *end != ':')
		return -EINVAL;
	const char *c = end + 1;
	unsigned long long b = strtoull(c, &end, 10);
	if (errno || end == c || *end || a == 0 || b < SLOT_IDS || a + b > 0xfffffffeull)
		return -EINVAL;
	*start = (uint32_t)a;
	*count = (uint32_t)b;
	return 0;
}

/* The `sbx` line of a subordinate-id file, or -ENOENT. */
static int subid_range(const char *path, uint32_t *start, uint32_t *count)
{
	char *text = NULL;
	size_t n;
	if (sbx__read_file(&text, &n, path, 1 << 20, NULL) < 0)
		return -ENOENT;
	int r = -ENOENT;
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(line, "sbx:", 4) == 0 && parse_range(line + 4, start, count) == 0) {
			r = 0;
			break;
		}
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	return r;
}

int sbx__idmap_range(uint32_t *start, uint32_t *count, sbx_error **err)
{
	const char *v = sbx__env("SBX_USERNS_RANGE");
	if (v && *v) {
		if (parse_range(v, start, count) < 0)
			return sbx_error_set(err, -EINVAL,
					     "SBX_USERNS_RANGE '%s': expected START:COUNT with START > 0, COUNT >= %u "
					     "and START+COUNT below 2^32-1",
					     v, SLOT_IDS);
		return 0;
	}
	uint32_t gs, gc;
	if (subid_range("/etc/subuid", start, count) == 0 && subid_range("/etc/subgid", &gs, &gc) == 0) {
		if (gs != *start || gc != *count)
			return sbx_error_set(err, -EINVAL,
					     "/etc/subuid and /etc/subgid give user sbx different ranges (%u:%u vs "
					     "%u:%u); make them equal",
					     *start, *count, gs, gc);
		return 0;
	}
	*start = DEFAULT_START;
	*count = DEFAULT_COUNT;
	return 0;
}

static const char *lock_dir(void)
{
	const char *v = sbx__env("SBX_USERNS_LOCK_DIR");
	return v && *v ? v : DEFAULT_LOCK_DIR;
}

/* An flock'ed fd on a free slot's lock file. */
static int take_slot(uint32_t n_slots, uint32_t *slot, sbx_error **err)
{
	const char *dir = lock_dir();
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sbx_error_setsys(err, -errno, errno, "create the user-id slot dir %s", dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", dir);
	uint32_t first;
	if (getrandom(&first, sizeof(first), GRND_NONBLOCK) != sizeof(first))
		first = (uint32_t)getpid() * 2654435761u;
	first %= n_slots;
	for (uint32_t i = 0; i < n_slots; i++) {
		uint32_t s = (first + i) % n_slots;
		char name[16];
		snprintf(name, sizeof(name), "%u", s);
		int fd = openat(dfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
		if (fd < 0)
			return sbx_error_setsys(err, -errno, errno, "open user-id slot %s/%s", dir, name);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			*slot = s;
			return fd;
		}
		int e = errno;
		close(fd);
		if (e != EWOULDBLOCK)
			return sbx_error_setsys(err, -e, e, "lock user-id slot %s/%s", dir, name);
	}
	return sbx_error_set(err, -EAGAIN, "all %u user-id slots in %s are in use; widen SBX_USERNS_RANGE",
			     n_slots, dir);
}

struct holder {
	volatile int go;
	pid_t parent;
};

/* The clone child: shares our memory, so raw syscalls only. It must not
 * outlive a creator killed mid-create (it would wait for `go` forever): it
 * dies with the creating thread, and checks for a parent that died before
 * that was armed. It shares our fd table (CLONE_FILES) and touches no fd. */
static int holder_main(void *arg)
{
	struct holder *h = arg;
	/* errno is the creator's too (shared TLS): only calls that cannot
	 * fail here, and a wait whose errors (EAGAIN, EINTR) are retried
	 * after the creator has read every errno it needs (go is set last). */
	syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (syscall(SYS_getppid) != h->parent)
		syscall(SYS_exit, 0);
	while (!h->go)
		syscall(SYS_futex, &h->go, FUTEX_WAIT, 0, NULL, NULL, 0);
	syscall(SYS_exit, 0);
	return 0;
}

static int write_map(pid_t pid, const char *which, uint32_t base, int host_root, uint32_t shift_from)
{
	char path[64], map[96];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	int n = host_root == 2 ? snprintf(map, sizeof(map), "%u %u %u\n0 0 1\n", shift_from, base, SLOT_IDS)
		: host_root ? snprintf(map, sizeof(map), "0 %u %u\n%u 0 1\n", base, SLOT_IDS, SLOT_IDS)
			  : snprintf(map, sizeof(map), "0 %u %u\n", base, SLOT_IDS);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, map, (size_t)n);
	return w == n ? 0 : w < 0 ? -errno : -EIO;
}

/* A user namespace mapping 0..65535 to base..base+65535 (and, with
 * host_root, 65536 to host root: see sbx__idmap_upper_ns; host_root 2:
 * shift_from.. to base.. and 0 to 0, see sbx__idmap_shift_ns). */
static int make_userns(uint32_t base, int host_root, uint32_t shift_from, sbx_error **err)
{
	char stack[8192] __attribute__((aligned(16)));
	struct holder h = { .go = 0, .parent = getpid() };
	/* CLONE_FILES: the holder shares our fd table instead of copying it (a
	 * copy would hold every fd another thread has open, a file being
	 * written among them: an exec of it would be ETXTBSY meanwhile). */
	pid_t pid = clone(holder_main, stack + sizeof(stack), CLONE_NEWUSER | CLONE_VM | CLONE_FILES, &h);
	if (pid < 0)
		return sbx_error_setsys(err, -errno, errno, "create a user namespace");
	int r = write_map(pid, "uid_map", base, host_root, shift_from);
	if (r == 0)
		r = write_map(pid, "gid_map", base, host_root, shift_from);
	int fd = -1;
	if (r == 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	h.go = 1;
	syscall(SYS_futex, &h.go, FUTEX_WAKE, 1, NULL, NULL, 0);
	/* The child runs on our stack: wait until it is gone. */
	while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
		;
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "write the id map of a user namespace");
	return fd;
}

int sbx__idmap_make(struct sbx_idmap *out, sbx_error **err)
{
	*out = (struct sbx_idmap)SBX_IDMAP_INIT;
	uint32_t start, count, slot = 0;
	int r = sbx__idmap_range(&start, &count, err);
	if (r < 0)
		return r;
	int lock = take_slot(count / SLOT_IDS, &slot, err);
	if (lock < 0)
		return lock;
	uint32_t base = start + slot * SLOT_IDS;
	int ns = make_userns(base, 0, 0, err);
	if (ns < 0) {
		close(lock);
		return ns;
	}
	*out = (struct sbx_idmap){ .userns = ns, .lock = lock, .base = base };
	return 0;
}

/*
 * A host upper dir (template builds) becomes a shared layer, so it must hold
 * the image's own ids: the sandbox's overlay sees it through an idmapped
 * mount of this namespace, which stores id base+N as N. Its one more entry
 * maps 65536 to host root, because overlay creates its work files with the
 * mounter's (host root's) credentials and an idmap must represent them. No
 * process ever runs in this namespace; it only describes the mount.
 */
int sbx__idmap_upper_ns(uint32_t base, sbx_error **err)
{
	return make_userns(base, 1, 0, err);
}

int sbx__idmap_shift_ns(uint32_t from, uint32_t to, sbx_error **err)
{
	if (from == 0 || to == 0)
		return sbx_error_set(err, -EINVAL, "idmap: a forked layer needs private id ranges (%u -> %u)", from, to);
	return make_userns(to, 2, from, err);
}

void sbx__idmap_close(struct sbx_idmap *m)
{
	if (m->userns >= 0)
		close(m->userns);
	if (m->lock >= 0)
		close(m->lock);
	*m = (struct sbx_idmap)SBX_IDMAP_INIT;
}

int sbx__idmap_of_pid(pid_t pid, uint32_t *base)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	unsigned long inside, outside, len;
	if (sscanf(buf, "%lu %lu %lu", &inside, &outside, &len) != 3)
		return -EIO;
	/* The initial namespace's map is the identity over every id. */
	*base = inside == 0 && outside == 0 && len == 4294967295ul ? 0 : (uint32_t)outside;
	return 0;
}

/*
 * Host-side writes into a sandbox (uploads, write_file, mkdir) create files
 * as its root: this thread's fsuid/fsgid become base (both are per thread).
 * That change clears the file capabilities from the effective set; the ones
 * root inside has over its own files (chown, DAC override and read-search,
 * fowner, fsetid) are raised again, nothing more, and the thread's set is
 * restored afterwards. Paths stay resolved in the sandbox's root (files.c).
 */
#define FS_CAPS ((1u << CAP_CHOWN) | (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH) | \
		 (1u << CAP_FOWNER) | (1u << CAP_FSETID))

int sbx__idmap_enter(uint32_t base, struct sbx_fsid *saved)
{
	saved->base = base;
	if (!base)
		return 0;
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	if (syscall(SYS_capget, &hdr, saved->caps) < 0)
		return -errno;
	setfsgid(base);
	setfsuid(base);
	if ((uint32_t)setfsuid((uid_t)-1) != base || (uint32_t)setfsgid((gid_t)-1) != base) {
		sbx__idmap_leave(saved);
		return -EPERM;
	}
	struct __user_cap_data_struct d[2];
	memcpy(d, saved->caps, sizeof(d));
	d[0].effective |= d[0].permitted & FS_CAPS;
	(void)syscall(SYS_capset, &hdr, d);
	return 0;
}

void sbx__idmap_leave(const struct sbx_fsid *saved)
{
	if (!saved->base)
		return;
	setfsuid(0);
	setfsgid(0);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	memcpy(d, saved->caps, sizeof(d));
	(void)syscall(SYS_capset, &hdr, d);
}
