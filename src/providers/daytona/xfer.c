/* SPDX-License-Identifier: MIT */
/*
 * Trees to and from a Daytona sandbox: a tar (modes kept) travels as one
 * file through bulk-upload / bulk-download and is unpacked on the other
 * side. The tar writer, the confined unpacker and the placement are
 * util/tree_tar.c's, shared with e2b (one implementation of path checks).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "../../util/tree_tar.h"
#include "daytona_int.h"

#define TREE_MAX (512u << 20)

static int root_sh(struct dtn_sb *sb, const char *cmd, const char *what, sbx_error **err)
{
	sbx_exec_opts o = SBX_EXEC_OPTS_INIT;
	o.shell = cmd;
	o.user = "root";
	o.cwd = "/";
	sbx_exec_result res;
	int r = sbx__dtn_exec(&res, sb, &o, err);
	if (r == 0 && res.exit_code != 0) {
		int code = strstr(res.err ? res.err : "", "No such file") ? -ENOENT : -EIO;
		r = sbx_error_set(err, code, "daytona: %s in %s: %s", what, sb->id, res.err ? res.err : "");
	}
	sbx_exec_result_free(&res);
	return r;
}

int sbx__dtn_upload(struct dtn_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return sbx_error_setsys(err, -errno, errno, "daytona: upload: %s", src);
	_cleanup_free_ char *name = sbx__tree_name(src);
	_cleanup_close_ int fd = -1;
	off_t len = 0;
	int r = sbx__tree_tar(&fd, &len, src, name, 0, err);
	if (r < 0)
		return r;
	if ((uint64_t)len > TREE_MAX)
		return sbx_error_set(err, -EFBIG, "daytona: upload %s: %lld bytes of tar, more than %u", src,
				     (long long)len, TREE_MAX);
	void *map = len ? mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	if (map == MAP_FAILED)
		return sbx_error_setsys(err, -errno, errno, "daytona: upload %s: map the tar", src);
	char hex[17];
	sbx__random_hex(hex, 16);
	_cleanup_free_ char *tmp = xasprintf("/tmp/.sbx-upload-%s.tar", hex);
	r = sbx__dtn_write(sb, tmp, map ? map : "", (size_t)len, 0600, err);
	if (map)
		munmap(map, (size_t)len);
	if (r < 0)
		return r;
	_cleanup_free_ char *qt = sbx__dtn_shq(tmp), *qd = sbx__dtn_shq(dst), *qn = sbx__dtn_shq(name);
	_cleanup_free_ char *cmd = sbx__tree_unpack_sh(qt, qd, qn);
	r = root_sh(sb, cmd, "unpack an upload", err);
	return r < 0 ? sbx_error_prefix(err, r, "upload %s to %s", src, dst) : 0;
}

int sbx__dtn_download(struct dtn_sb *sb, const char *src, const char *dst, sbx_error **err)
{
	_cleanup_free_ char *name = sbx__tree_name(src);
	char hex[17];
	sbx__random_hex(hex, 16);
	_cleanup_free_ char *tmp = xasprintf("/tmp/.sbx-download-%s.tar", hex);
	_cleanup_free_ char *qs = sbx__dtn_shq(src), *qt = sbx__dtn_shq(tmp);
	_cleanup_free_ char *cmd = xasprintf("[ -e %s ] || { echo 'No such file' >&2; exit 1; }; "
					     "cd \"$(dirname %s)\" && tar -cf %s \"$(basename %s)\"",
					     qs, qs, qt, qs);
	int r = root_sh(sb, cmd, "pack a download", err);
	void *data = NULL;
	size_t len = 0;
	if (r == 0)
		r = sbx__dtn_read(&data, &len, sb, tmp, TREE_MAX, err);
	_cleanup_free_ char *rm = xasprintf("rm -f %s", qt);
	root_sh(sb, rm, "remove a download's tar", NULL);
	if (r < 0)
		return sbx_error_prefix(err, r, "download %s", src);
	_cleanup_close_ int fd = memfd_create("sbx-dtn-download", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		free(data);
		return sbx_error_setsys(err, -EIO, errno, "daytona: download %s: buffer the tar", src);
	}
	free(data);
	return sbx__tree_place(fd, name, dst, "daytona: ", err);
}
