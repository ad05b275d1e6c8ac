/* SPDX-License-Identifier: MIT */
/* mkdir -p, rm -rf (no symlink following, no mount crossing), atomic writes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "cleanup.h"
#include "fs.h"

int sbx__mkdir_p(const char *path, mode_t mode, sbx_error **err)
{
	_cleanup_free_ char *p = xstrdup(path);
	for (char *s = p + 1;; s++) {
		char c = *s;
		if (c != '/' && c != '\0')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return sbx_error_setsys(err, -errno, errno, "create directory %s", p);
		*s = c;
		if (!c)
			break;
	}
	return 0;
}

static int rm_children(int dfd, dev_t dev, sbx_error **err)
{
	int fd = dup(dfd);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "dup");
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return sbx_error_setsys(err, -errno, errno, "opendir");
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev)
				return sbx_error_set(err, -EBUSY, "refusing to remove across mount %s",
						     de->d_name);
			_cleanup_close_ int cfd =
				openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0)
				return sbx_error_setsys(err, -errno, errno, "open %s", de->d_name);
			int r = rm_children(cfd, dev, err);
			if (r < 0)
				return r;
			if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
				return sbx_error_setsys(err, -errno, errno, "remove %s", de->d_name);
		} else if (unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT) {
			return sbx_error_setsys(err, -errno, errno, "remove %s", de->d_name);
		}
	}
	return 0;
}

int sbx__rm_rf_at(int dirfd, const char *name, sbx_error **err)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : sbx_error_setsys(err, -errno, errno, "stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return sbx_error_setsys(err, -errno, errno, "remove %s", name);
		return 0;
	}
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", name);
	int r = rm_children(fd, st.st_dev, err);
	if (r < 0)
		return r;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return sbx_error_setsys(err, -errno, errno, "remove %s", name);
	return 0;
}

int sbx__rm_rf(const char *path, sbx_error **err)
{
	return sbx__rm_rf_at(AT_FDCWD, path, err);
}

int sbx__write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sbx__write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			   sbx_error **err)
{
	/* Unique per thread as well as per process: two threads may write the
	 * same path (the last rename wins; neither sees a torn file). */
	static _Atomic unsigned seq;
	_cleanup_free_ char *tmp = xasprintf("%s.tmp.%d.%ld.%u", path, (int)getpid(), (long)gettid(), seq++);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", tmp);
	int r = sbx__write_all(fd, data, len);
	if (r < 0) {
		unlink(tmp);
		return sbx_error_setsys(err, r, -r, "write %s", tmp);
	}
	if (rename(tmp, path) < 0) {
		r = -errno;
		unlink(tmp);
		return sbx_error_setsys(err, r, -r, "rename %s", path);
	}
	return 0;
}

int sbx__read_fd(char **out, size_t *len, int fd, size_t max, const char *what, sbx_error **err)
{
	sbx_buf b;
	sbx__buf_init(&b, max);
	char chunk[65536];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			sbx__buf_free(&b);
			return sbx_error_setsys(err, -e, e, "read %s", what);
		}
		if (n == 0)
			break;
		if (sbx__buf_append(&b, chunk, (size_t)n) < 0) {
			sbx__buf_free(&b);
			return sbx_error_set(err, -EFBIG, "%s is larger than %zu bytes", what, max);
		}
	}
	*out = sbx__buf_steal(&b, len);
	return 0;
}

int sbx__read_file(char **out, size_t *len, const char *path, size_t max, sbx_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", path);
	return sbx__read_fd(out, len, fd, max, path, err);
}

void sbx__timespec_in(struct timespec *ts, double secs)
{
	clock_gettime(CLOCK_REALTIME, ts);
	if (secs < 0)
		secs = 0;
	ts->tv_sec += (time_t)secs;
	ts->tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

double sbx__now_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double sbx__now_real(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
