/* SPDX-License-Identifier: MIT */
/*
 * Trees as one tar on the host side, shared by the providers that move a
 * tree as a single file (e2b, daytona). Uploads: a pax tar of a host path,
 * owners reset to root, symlinks kept as links, a file that changes size
 * while read is an error. Downloads are hostile input: unpacked with
 * libarchive's secure flags (no absolute paths, no "..", no writing through
 * symlinks) plus our own checks of entry and hard-link names, into a fresh
 * 0700 staging directory beside the destination, then renamed into place.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cleanup.h"
#include "config.h"
#include "fs.h"
#include "lazy.h"
#include "str.h"
#include "tree_tar.h"

int sbx__tree_tmpfd(sbx_error **err)
{
	const char *d = sbx__env("TMPDIR");
	int fd = open(d && *d ? d : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "temporary file");
	return fd;
}

/* An error from libarchive handle A while doing OP on PATH: its errno as the
 * code (ENOSPC, EFBIG, ...) when it has one, else -EIO. */
static int arc_error(sbx_error **err, struct archive *a, const char *op, const char *path)
{
	int e = archive_errno(a);
	const char *why = archive_error_string(a);
	return sbx_error_set(err, e > 0 ? -e : -EIO, "%s %s: %s", op, path,
			     why ? why : e > 0 ? strerror(e) : "archive error");
}

/* Writes the bytes of regular file HOST (SIZE by its stat) as the entry's data. */
static int add_data(struct archive *a, const char *host, int64_t size, sbx_error **err)
{
	_cleanup_close_ int fd = open(host, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "upload: open %s", host);
	char buf[65536];
	int64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_error_setsys(err, -errno, errno, "upload: read %s", host);
		if (n == 0)
			break;
		total += n;
		if (total > size)
			break;
		la_ssize_t w = archive_write_data(a, buf, (size_t)n);
		if (w < 0)
			return arc_error(err, a, "upload: tar", host);
		if (w != n)
			break;
	}
	/* The header already promised SIZE bytes; anything else would be padded
	 * or cut silently. */
	if (total != size)
		return sbx_error_set(err, -EIO, "upload: %s changed size while being read", host);
	return 0;
}

static void add_entry(struct archive *a, struct archive *disk, const char *host, const char *name,
		      int *r, sbx_error **err)
{
	if (*r < 0)
		return;
	struct archive_entry *e = archive_entry_new();
	archive_entry_copy_sourcepath(e, host);
	if (archive_read_disk_entry_from_file(disk, e, -1, NULL) != ARCHIVE_OK) {
		*r = sbx_error_set(err, -ENOENT, "upload: %s: %s", host, archive_error_string(disk));
		archive_entry_free(e);
		return;
	}
	archive_entry_set_pathname(e, name);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_uname(e, "root");
	archive_entry_set_gname(e, "root");
	struct stat st = *archive_entry_stat(e);
	if (archive_write_header(a, e) != ARCHIVE_OK)
		*r = arc_error(err, a, "upload: tar", host);
	else if (S_ISREG(st.st_mode))
		*r = add_data(a, host, (int64_t)st.st_size, err);
	if (*r == 0 && archive_write_finish_entry(a) < ARCHIVE_WARN)
		*r = arc_error(err, a, "upload: tar", host);
	archive_entry_free(e);
	if (*r == 0 && S_ISDIR(st.st_mode)) {
		_cleanup_closedir_ DIR *d = opendir(host);
		if (!d)
			*r = sbx_error_setsys(err, -errno, errno, "upload: open %s", host);
		struct dirent *de;
		while (d && (de = readdir(d)) && *r == 0) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			_cleanup_free_ char *h2 = xasprintf("%s/%s", host, de->d_name);
			_cleanup_free_ char *n2 = xasprintf("%s/%s", name, de->d_name);
			add_entry(a, disk, h2, n2, r, err);
		}
	}
}

int sbx__tree_tar(int *fd_out, off_t *len_out, const char *src, const char *name, int gzip,
		      sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0)
		return -ENOSYS;
	int fd = sbx__tree_tmpfd(err);
	if (fd < 0)
		return fd;
	struct archive *a = archive_write_new();
	struct archive *disk = archive_read_disk_new();
	if (!a || !disk)
		abort(); /* out of memory, by policy */
	int r = 0;
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    (gzip && archive_write_add_filter_gzip(a) < ARCHIVE_WARN))
		r = arc_error(err, a, "upload: tar", src);
	else if (archive_read_disk_set_standard_lookup(disk) != ARCHIVE_OK ||
		 archive_read_disk_set_symlink_physical(disk) != ARCHIVE_OK)
		r = arc_error(err, disk, "upload: read", src);
	else if (archive_write_open_fd(a, fd) != ARCHIVE_OK)
		r = arc_error(err, a, "upload: tar", src);
	add_entry(a, disk, src, name, &r, err);
	/* close flushes the last blocks (and the gzip trailer): its failure is a short tar */
	if (archive_write_close(a) != ARCHIVE_OK && r == 0)
		r = arc_error(err, a, "upload: tar", src);
	archive_write_free(a);
	archive_read_free(disk);
	struct stat st;
	if (r == 0 && fstat(fd, &st) < 0)
		r = sbx_error_setsys(err, -errno, errno, "upload: tar %s", src);
	if (r < 0) {
		close(fd);
		return r;
	}
	*fd_out = fd;
	*len_out = st.st_size;
	return 0;
}

char *sbx__tree_name(const char *p)
{
	_cleanup_free_ char *c = xstrdup(p);
	size_t n = strlen(c);
	while (n > 1 && c[n - 1] == '/')
		c[--n] = '\0';
	const char *s = strrchr(c, '/');
	return xstrdup(s ? s + 1 : c);
}

/* Copies the current entry's data from A to the disk writer W (FULL names it). */
static int unpack_data(struct archive *a, struct archive *w, const char *full, sbx_error **err)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int d;
	while ((d = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK)
		if (archive_write_data_block(w, buf, size, off) != ARCHIVE_OK)
			return arc_error(err, w, "download: write", full);
	if (d != ARCHIVE_EOF)
		return arc_error(err, a, "download: read the sandbox's tar at", full);
	/* finishing applies size, mode and times; a warning (an owner not kept) is not fatal */
	if (archive_write_finish_entry(w) < ARCHIVE_WARN)
		return arc_error(err, w, "download: write", full);
	return 0;
}

int sbx__tree_untar(int fd, const char *dir, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0)
		return -ENOSYS;
	struct archive *a = archive_read_new();
	struct archive *w = archive_write_disk_new();
	if (!a || !w)
		abort(); /* out of memory, by policy */
	int r = 0;
	if (archive_read_support_filter_all(a) < ARCHIVE_WARN || archive_read_support_format_tar(a) != ARCHIVE_OK) {
		r = arc_error(err, a, "download: tar into", dir);
		goto out;
	}
	/* Without ARCHIVE_EXTRACT_PERM the modes get our umask and lose their
	 * set-id and sticky bits: a sandbox's setuid-root file must not come out
	 * as one (docs/security.md, "sbx cp"). */
	if (archive_write_disk_set_options(w, ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
						  ARCHIVE_EXTRACT_TIME) != ARCHIVE_OK) {
		r = arc_error(err, w, "download: tar into", dir);
		goto out;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		r = sbx_error_setsys(err, -errno, errno, "download: tar into %s", dir);
		goto out;
	}
	if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		r = arc_error(err, a, "download: tar into", dir);
		goto out;
	}
	struct archive_entry *e;
	int h;
	while ((h = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);
		if (!p || p[0] == '/' || strstr(p, "..")) {
			r = sbx_error_set(err, -EPERM, "download: unsafe path in the sandbox's tar");
			goto out;
		}
		/* Devices, FIFOs and sockets are skipped, as the local provider's
		 * downloads skip them: a device node made here would be the host's. */
		unsigned type = archive_entry_filetype(e);
		if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && !archive_entry_hardlink(e))
			continue;
		/* p dies with the entry's old name: only full is used from here */
		_cleanup_free_ char *full = xasprintf("%s/%s", dir, p);
		archive_entry_set_pathname(e, full);
		const char *hl = archive_entry_hardlink(e);
		if (hl) {
			if (hl[0] == '/' || strstr(hl, "..")) {
				r = sbx_error_set(err, -EPERM, "download: unsafe link in the sandbox's tar");
				goto out;
			}
			_cleanup_free_ char *hf = xasprintf("%s/%s", dir, hl);
			archive_entry_set_hardlink(e, hf);
		}
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = arc_error(err, w, "download: write", full);
			goto out;
		}
		r = unpack_data(a, w, full, err);
		if (r < 0)
			goto out;
	}
	if (h != ARCHIVE_EOF)
		r = arc_error(err, a, "download: read the sandbox's tar into", dir);
	/* close sets the directories' deferred modes and times */
	else if (archive_write_close(w) != ARCHIVE_OK)
		r = arc_error(err, w, "download: write", dir);
out:
	archive_read_free(a);
	archive_write_free(w);
	return r;
}

int sbx__tree_place(int fd, const char *name, const char *dst, const char *tag, sbx_error **err)
{
	int r;
	char hex[17];
	sbx__random_hex(hex, 16);
	/* Unpack beside DST, then move into place (cp placement). */
	_cleanup_free_ char *dcopy = xstrdup(dst);
	size_t dn = strlen(dcopy);
	while (dn > 1 && dcopy[dn - 1] == '/')
		dcopy[--dn] = '\0';
	struct stat st;
	int into = stat(dcopy, &st) == 0 && S_ISDIR(st.st_mode);
	_cleanup_free_ char *parent = into ? xstrdup(dcopy) : NULL;
	if (!parent) {
		char *slash = strrchr(dcopy, '/');
		parent = slash == dcopy ? xstrdup("/") : slash ? xstrndup(dcopy, (size_t)(slash - dcopy)) : xstrdup(".");
		r = sbx__mkdir_p(parent, 0755, err);
		if (r < 0)
			return r;
	}
	_cleanup_free_ char *stage = xasprintf("%s/.sbx-dl-%s", parent, hex);
	if (mkdir(stage, 0700) < 0)
		return sbx_error_setsys(err, -errno, errno, "%sdownload to %s", tag, dst);
	r = sbx__tree_untar(fd, stage, err);
	_cleanup_free_ char *from = xasprintf("%s/%s", stage, name);
	_cleanup_free_ char *to = into ? xasprintf("%s/%s", dcopy, name) : xstrdup(dcopy);
	if (r == 0 && rename(from, to) < 0) {
		if (errno == ENOTEMPTY || errno == EEXIST || errno == EISDIR) {
			sbx__rm_rf(to, NULL);
			if (rename(from, to) < 0)
				r = sbx_error_setsys(err, -errno, errno, "%sdownload to %s", tag, to);
		} else {
			r = sbx_error_setsys(err, -errno, errno, "%sdownload to %s", tag, to);
		}
	}
	sbx__rm_rf(stage, NULL);
	return r;
}

char *sbx__tree_unpack_sh(const char *qtar, const char *qdst, const char *qname)
{
	return xasprintf(
		"t=%s; d=%s; n=%s; "
		"if [ -d \"$d\" ] && [ ! -L \"$d\" ]; then tar -xpf \"$t\" -C \"$d\"; s=$?; "
		"else p=$(dirname \"$d\"); mkdir -p \"$p\" && x=$(mktemp -d \"$p/.sbx-up-XXXXXX\") && "
		"tar -xpf \"$t\" -C \"$x\" && { [ ! -d \"$d\" ] || [ -L \"$d\" ] || rm -rf \"$d\"; } && "
		"mv -f \"$x/$n\" \"$d\"; s=$?; rm -rf \"$x\"; fi; rm -f \"$t\"; exit $s",
		qtar, qdst, qname);
}
