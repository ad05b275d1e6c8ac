/* SPDX-License-Identifier: MIT */
/*
 * Calls into a sandbox with no lock held across them. A call takes an op
 * reference under srv->lock (never held across I/O) and drops it when the
 * library returns; kill marks the sandbox dead under the same lock, so no
 * call starts after it, and destroys through the handle when no call is in
 * flight, else by id through a fresh handle: a call stuck in the sandbox (an
 * open of a FIFO the sandbox planted) delays neither the kill, nor the
 * timer, nor any other sandbox; the stuck handle is finished by whoever drops
 * the last reference. Also the server's own reads of sandbox files (the user
 * database for home directories, /files downloads) and its streamed writes
 * (/files uploads): an O_PATH fd confined to the sandbox, refused unless it
 * is a regular file, reopened O_NONBLOCK, so a FIFO, device or socket can
 * never block or flood a server thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "server_int.h"

int sbx__srv_op_begin(struct srv_sandbox *s, sbx_error **err)
{
	pthread_mutex_lock(&s->srv->lock);
	int dead = s->dead;
	if (!dead)
		s->ops++;
	pthread_mutex_unlock(&s->srv->lock);
	return dead ? sbx_error_set(err, -ESRCH, "sandbox %s is gone", s->id) : 0;
}

void sbx__srv_op_end(struct srv_sandbox *s)
{
	pthread_mutex_lock(&s->srv->lock);
	s->ops--;
	pthread_mutex_unlock(&s->srv->lock);
}

/* Called with srv->lock held once s left the table: 1 when calls are in flight. */
int sbx__srv_op_mark_dead(struct srv_sandbox *s)
{
	s->dead = 1;
	if (s->ops > 0)
		s->finish_pending = 1;
	return s->ops > 0;
}

static const char *kind_of(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

/* The regular file at path (an O_PATH fd confined to the sandbox), reopened
 * with `flags` (O_RDONLY or O_WRONLY). */
static int open_regular_as(int *fd_out, struct stat *st_out, struct srv_sandbox *s, const char *path, int flags,
			   sbx_error **err)
{
	int pfd = -1;
	int r = sbx__srv_op_begin(s, err);
	if (r < 0)
		return r;
	r = sbx_sandbox_path_fd(&pfd, s->sb, path, err);
	sbx__srv_op_end(s);
	if (r < 0)
		return r;
	_cleanup_close_ int opath = pfd;
	struct stat st, st2;
	if (fstat(opath, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "stat %s", path);
	if (S_ISDIR(st.st_mode))
		return sbx_error_set(err, -EISDIR, "path '%s' is a directory", path);
	if (!S_ISREG(st.st_mode))
		return sbx_error_set(err, -EINVAL, "path '%s' is not a regular file (%s)", path, kind_of(st.st_mode));
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", opath);
	/* The same inode, never the path again: nothing the sandbox renames in
	 * between can swap it; O_NONBLOCK in case it still were not a file. */
	int fd = open(proc, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", path);
	if (fstat(fd, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
		close(fd);
		return sbx_error_set(err, -EINVAL, "path '%s' is not a regular file", path);
	}
	*fd_out = fd;
	*st_out = st2;
	return 0;
}

int sbx__srv_open_regular(int *fd_out, struct stat *st_out, struct srv_sandbox *s, const char *path, sbx_error **err)
{
	return open_regular_as(fd_out, st_out, s, path, O_RDONLY, err);
}

int sbx__srv_open_writable(int *fd_out, struct srv_sandbox *s, const char *path, sbx_error **err)
{
	struct stat st;
	int fd = -1;
	int r = open_regular_as(&fd, &st, s, path, O_WRONLY, err);
	if (r < 0)
		return r;
	/* what the sandbox wrote there since it was created goes */
	if (ftruncate(fd, 0) < 0) {
		r = sbx_error_setsys(err, -errno, errno, "truncate %s", path);
		close(fd);
		return r;
	}
	*fd_out = fd;
	return 0;
}

int sbx__srv_read_small(char **out, size_t *len, struct srv_sandbox *s, const char *path, size_t max,
			sbx_error **err)
{
	int fd = -1;
	struct stat st;
	int r = sbx__srv_open_regular(&fd, &st, s, path, err);
	if (r < 0)
		return r;
	_cleanup_close_ int f = fd;
	if ((uint64_t)st.st_size > max)
		return sbx_error_set(err, -EFBIG, "%s: %lld bytes exceed the %zu-byte limit", path, (long long)st.st_size,
				     max);
	return sbx__read_fd(out, len, f, max, path, err);
}
