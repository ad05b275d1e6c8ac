/* SPDX-License-Identifier: MIT */
/*
 * envd's EntryInfo (envd 0.6): name, type, path, size, mode (permission
 * bits), permissions (Go's FileMode string: "drwxr-xr-x", "Lrwxrwxrwx"),
 * owner, group, modifiedTime, and for a symlink the absolute, fully
 * resolved target with the target's type and mode (envd follows links
 * with filepath.EvalSymlinks; a dangling one reports its own path and no
 * type). metadata: the file's user.* extended attributes (envd 0.6.2),
 * which uploads set from X-Metadata-<key> headers.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "server_int.h"

#define XATTR_PREFIX "user."
#define META_LIST_MAX (64u << 10)
#define META_VALUE_MAX 4096u

static const char *type_name(sbx_file_type t)
{
	switch (t) {
	case SBX_FILE_REGULAR: return "FILE_TYPE_FILE";
	case SBX_FILE_DIR: return "FILE_TYPE_DIRECTORY";
	case SBX_FILE_SYMLINK: return "FILE_TYPE_SYMLINK";
	case SBX_FILE_OTHER: return "FILE_TYPE_UNSPECIFIED";
	default: return "FILE_TYPE_UNSPECIFIED";
	}
}

/* An O_PATH fd of a sandbox path, the last symlink followed inside it. */
static int path_fd(struct srv_sandbox *s, const char *path)
{
	int fd = -1;
	if (sbx__srv_op_begin(s, NULL) < 0)
		return -1;
	if (sbx_sandbox_path_fd(&fd, s->sb, path, NULL) < 0)
		fd = -1;
	sbx__srv_op_end(s);
	return fd;
}

static char *fd_path(int fd)
{
	char proc[64], buf[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return xstrdup(buf);
}

/* Where a symlink leads, as a sandbox path: the host path of the inode its
 * resolution reaches, less the host path of the sandbox root. NULL when it
 * dangles or resolves somewhere the server cannot name. */
static char *resolve_link(struct srv_sandbox *s, const char *path)
{
	int rfd = path_fd(s, "/"), tfd = path_fd(s, path);
	_cleanup_free_ char *root = rfd >= 0 ? fd_path(rfd) : NULL;
	_cleanup_free_ char *t = tfd >= 0 ? fd_path(tfd) : NULL;
	if (rfd >= 0)
		close(rfd);
	if (tfd >= 0)
		close(tfd);
	if (!root || !t)
		return NULL;
	size_t n = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(t, root, n) != 0 || (t[n] != '/' && t[n] != '\0'))
		return NULL;
	return xstrdup(t[n] ? t + n : "/");
}

json_t *sbx__srv_xattr_metadata(int fd)
{
	json_t *m = json_object();
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ssize_t n = listxattr(proc, NULL, 0);
	if (n <= 0 || (size_t)n > META_LIST_MAX)
		return m;
	_cleanup_free_ char *names = xmalloc((size_t)n + 1);
	n = listxattr(proc, names, (size_t)n);
	for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(names + i) + 1) {
		const char *k = names + i;
		if (strncmp(k, XATTR_PREFIX, strlen(XATTR_PREFIX)) != 0 || !k[strlen(XATTR_PREFIX)])
			continue;
		char v[META_VALUE_MAX + 1];
		ssize_t vl = getxattr(proc, k, v, META_VALUE_MAX);
		if (vl < 0)
			continue;
		v[vl] = '\0';
		json_object_set_new(m, k + strlen(XATTR_PREFIX), json_stringn(v, (size_t)vl));
	}
	return m;
}

int sbx__srv_xattr_set_metadata(int fd, json_t *meta)
{
	const char *k;
	json_t *v;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	json_object_foreach(meta, k, v) {
		_cleanup_free_ char *name = xasprintf(XATTR_PREFIX "%s", k);
		const char *val = json_string_value(v);
		if (setxattr(proc, name, val, strlen(val), 0) < 0)
			return -errno;
	}
	return 0;
}

json_t *sbx__srv_entry_info(struct srv_sandbox *s, const sbx_file_info *f)
{
	sbx_file_type type = f->type;
	unsigned mode = f->mode & 0777;
	_cleanup_free_ char *target = NULL;
	sbx_file_info ti = { 0 };
	if (f->type == SBX_FILE_SYMLINK && f->path) {
		target = resolve_link(s, f->path);
		int ok = 0;
		if (target && sbx__srv_op_begin(s, NULL) == 0) {
			ok = sbx_sandbox_stat(&ti, s->sb, target, NULL) == 0;
			sbx__srv_op_end(s);
		}
		type = ok ? ti.type : SBX_FILE_OTHER;
		mode = ok ? ti.mode & 0777 : 0;
		if (!target)
			target = xstrdup(f->path);
	}
	char perms[11];
	perms[0] = f->type == SBX_FILE_DIR ? 'd' : f->type == SBX_FILE_SYMLINK ? 'L' : '-';
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		perms[i + 1] = (f->mode & (1u << (8 - i))) ? rwx[i] : '-';
	perms[10] = '\0';
	char size[32];
	snprintf(size, sizeof(size), "%lld", f->size);
	_cleanup_free_ char *mt = sbx__srv_rfc3339(f->mtime);
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:s}", "name", f->name ? f->name : "", "type",
			      type_name(type), "path", f->path ? f->path : "", "size", size, "mode", (int)mode,
			      "permissions", perms, "owner", f->owner ? f->owner : "", "group", f->group ? f->group : "",
			      "modifiedTime", mt);
	if (target)
		json_object_set_new(o, "symlinkTarget", json_string(target));
	int fd = f->path && type != SBX_FILE_OTHER ? path_fd(s, f->path) : -1;
	if (fd >= 0) {
		json_object_set_new(o, "metadata", sbx__srv_xattr_metadata(fd));
		close(fd);
	}
	sbx_file_info_clear(&ti);
	return o;
}
