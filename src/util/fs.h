/* SPDX-License-Identifier: MIT */
/* File-system helpers for host-side state: no sandbox knowledge. */
#ifndef SBX_UTIL_FS_H
#define SBX_UTIL_FS_H

#include <stddef.h>
#include <sys/types.h>

#include <sbx/error.h>

/* mkdir -p with mode for created components. */
int sbx__mkdir_p(const char *path, mode_t mode, sbx_error **err);
/* rm -rf below dirfd/name without following symlinks or crossing mounts. */
int sbx__rm_rf_at(int dirfd, const char *name, sbx_error **err);
int sbx__rm_rf(const char *path, sbx_error **err);
/* Writes a whole file atomically (tmp + rename) with mode. */
int sbx__write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
			   sbx_error **err);
/* Reads a whole file up to max bytes (-EFBIG past it); *out owned, NUL-terminated. */
int sbx__read_file(char **out, size_t *len, const char *path, size_t max, sbx_error **err);
/* Reads fd to EOF, up to max bytes (-EFBIG past it, naming `what`); *out owned,
 * NUL-terminated. */
int sbx__read_fd(char **out, size_t *len, int fd, size_t max, const char *what, sbx_error **err);
/* Writes all of buf to fd, retrying on EINTR/short writes. 0 or -errno. */
int sbx__write_all(int fd, const void *buf, size_t len);
/* CLOCK_REALTIME timespec `secs` from now (for pthread_cond_timedwait). */
struct timespec;
void sbx__timespec_in(struct timespec *ts, double secs);
/* Monotonic and wall clocks in seconds. */
double sbx__now_mono(void);
double sbx__now_real(void);

#endif
