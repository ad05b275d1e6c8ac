/* SPDX-License-Identifier: MIT */
/*
 * What a layer may hold. Layers are directories on the host, so nothing in
 * them may give a host user more than that user already has: no setuid or
 * setgid bits on anything but directories, no file capabilities (nor any
 * other security.* xattr: SELinux labels and IMA data belong to the host),
 * and no device nodes except overlayfs whiteouts (char 0/0, which open
 * nothing). Every entry is filtered as it is extracted (layer.c), whatever
 * produced it: an imported tarball, an OCI or docker-save layer, a registry
 * blob, a rootfs directory or a build step. Layers stored before this rule
 * are scrubbed once, the first time the store is opened, and a marker file
 * in the store root records that.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "store.h"

#define SCRUB_MARKER ".layers-sanitized-v1"

static bool xattr_dropped(const char *name)
{
	return sbx__str_startswith(name, "security.");
}

static bool device_dropped(mode_t type, dev_t rdev)
{
	return type == S_IFBLK || (type == S_IFCHR && rdev != 0);
}

struct kept_xattr {
	char *name;
	void *value;
	size_t size;
};

static void drop_xattrs(struct archive_entry *e)
{
	const char *name;
	const void *value;
	size_t size;
	bool any = false;
	int n = archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
		any |= xattr_dropped(name);
	if (!any)
		return;
	struct kept_xattr *k = xcalloc((size_t)n + 1, sizeof(*k));
	size_t nk = 0;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		if (xattr_dropped(name))
			continue;
		k[nk].name = xstrdup(name);
		k[nk].value = xmalloc(size ? size : 1);
		memcpy(k[nk].value, value, size);
		k[nk++].size = size;
	}
	archive_entry_xattr_clear(e);
	for (size_t i = 0; i < nk; i++) {
		archive_entry_xattr_add_entry(e, k[i].name, k[i].value, k[i].size);
		free(k[i].name);
		free(k[i].value);
	}
	free(k);
}

bool sbx__image_entry_sanitize(struct archive_entry *e)
{
	mode_t type = archive_entry_filetype(e);
	if (device_dropped(type, archive_entry_rdev(e)))
		return false;
	if (type != AE_IFDIR)
		archive_entry_set_perm(e, archive_entry_perm(e) & ~(mode_t)(S_ISUID | S_ISGID));
	drop_xattrs(e);
	return true;
}

/* ---- the one-time scrub of layers stored before ----------------------------- */

static __thread int scrub_errno;
static __thread char scrub_path[256];

static void scrub_fail(const char *p)
{
	if (!scrub_errno) {
		scrub_errno = errno ? errno : EIO;
		snprintf(scrub_path, sizeof(scrub_path), "%s", p);
	}
}

static void scrub_xattrs(const char *p)
{
	char names[65536];
	ssize_t n = llistxattr(p, names, sizeof(names));
	for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1)
		if (xattr_dropped(names + off) && lremovexattr(p, names + off) < 0 && errno != ENODATA)
			scrub_fail(p);
}

static int scrub_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_SL || flag == FTW_SLN || flag == FTW_NS || flag == FTW_DNR)
		return 0;
	mode_t type = st->st_mode & S_IFMT;
	if (device_dropped(type, st->st_rdev)) {
		if (unlink(p) < 0 && errno != ENOENT)
			scrub_fail(p);
		return 0;
	}
	/* FTW_PHYS: P has no symlink in it, and it is not one itself. */
	if (type != S_IFDIR && (st->st_mode & (S_ISUID | S_ISGID)) &&
	    fchmodat(AT_FDCWD, p, st->st_mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID), 0) < 0)
		scrub_fail(p);
	scrub_xattrs(p);
	return 0;
}

int sbx__image_store_scrub(sbx_runtime *rt, sbx_error **err)
{
	const char *dir = sbx_runtime_image_dir(rt);
	_cleanup_free_ char *marker = xasprintf("%s/" SCRUB_MARKER, dir);
	if (access(marker, F_OK) == 0)
		return 0;
	_cleanup_free_ char *layers = xasprintf("%s/layers", dir);
	scrub_errno = 0;
	if (nftw(layers, scrub_cb, 32, FTW_PHYS | FTW_MOUNT) < 0 && errno != ENOENT)
		return sbx_error_setsys(err, -errno, errno, "image store: scan %s", layers);
	if (scrub_errno)
		return sbx_error_setsys(err, -scrub_errno, scrub_errno,
					"image store: remove setuid bits, capabilities or devices from %s",
					scrub_path);
	static const char note[] = "layers hold no setuid/setgid files, security.* xattrs or devices\n";
	return sbx__write_file_atomic(marker, note, sizeof(note) - 1, 0600, err);
}
