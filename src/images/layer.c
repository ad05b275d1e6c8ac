/* SPDX-License-Identifier: MIT */
/*
 * Layers: extracting a tar stream (or copying a directory) into
 * layers/sha256/<hex>/rootfs in overlayfs format, content-addressed by the
 * sha256 of the uncompressed tar stream. libarchive's disk writer resolves
 * paths against the current directory, so each extraction runs in a helper
 * thread that unshares its fs context (CLONE_FS) and chdirs into the target:
 * the caller's working directory is never touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/str.h"
#include "store.h"
#include "stream.h"
#include "util/lazy.h"

#define LAYER_FLAGS                                                                          \
	(ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |                 \
	 ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_OWNER |                    \
	 ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR)
#define UNPACK_FLAGS                                                                         \
	(ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |                 \
	 ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS)

/* One extraction job, run by a thread whose cwd is the target directory. */
struct job {
	int (*fn)(struct job *j);
	const char *dir;            /* target directory (cwd of the thread) */
	const char *src;            /* source file or directory (absolute) */
	int src_fd;                 /* unpack jobs: the archive, if src_open */
	bool src_open;
	bool layer;                 /* owners, whiteout conversion */
	sbx_stream st;              /* tar jobs: the hashed source stream */
	sbx_error *err;
	int r;
};

static void *job_thread(void *arg)
{
	struct job *j = arg;
	if (unshare(CLONE_FS) < 0)
		j->r = sbx_error_setsys(&j->err, -errno, errno, "unshare fs context");
	else if (chdir(j->dir) < 0)
		j->r = sbx_error_setsys(&j->err, -errno, errno, "chdir %s", j->dir);
	else
		j->r = j->fn(j);
	return NULL;
}

/* Runs j->fn in a thread with its own working directory j->dir. */
static int run_job(struct job *j, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0 || sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	pthread_t t;
	int e = pthread_create(&t, NULL, job_thread, j);
	if (e)
		return sbx_error_setsys(err, -e, e, "start extraction thread");
	pthread_join(t, NULL);
	if (j->r < 0 && err && !*err)
		*err = steal_ptr(&j->err);
	sbx_error_free(j->err);
	j->err = NULL;
	return j->r;
}

static void archive_freep(struct archive **a)
{
	if (*a)
		archive_write_free(*a);
}

/* Strips leading "./" components; "" means the root entry itself. */
static const char *strip_dot(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		for (p += 2; *p == '/'; p++)
			;
	return strcmp(p, ".") == 0 ? "" : p;
}

/* A relative path with no "..", "." handled by strip_dot. */
static bool path_safe(const char *p)
{
	if (p[0] == '/')
		return false;
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return false;
		s += n;
		while (*s == '/')
			s++;
	}
	return true;
}

/* Opens directory PATH below "." one component at a time (creating missing
 * ones), never following symlinks. */
static int open_dir_beneath(const char *path)
{
	_cleanup_free_ char *copy = xstrdup(path);
	int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			close(fd);
			errno = EINVAL;
			return -1;
		}
		if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
			close(fd);
			return -1;
		}
		int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		errno = e;
		fd = next;
	}
	return fd;
}

static int set_opaque(char **dirs, sbx_error **err)
{
	for (size_t i = 0; dirs && dirs[i]; i++) {
		_cleanup_close_ int fd = open_dir_beneath(dirs[i]);
		if (fd < 0)
			return sbx_error_setsys(err, -EINVAL, errno, "opaque directory '%s'", dirs[i]);
		if (fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0) < 0)
			return sbx_error_setsys(err, -errno, errno, "mark '%s' opaque", dirs[i]);
	}
	return 0;
}

static int copy_data(struct archive *in, struct archive *out, const char *path, sbx_error **err)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK)
		if (archive_write_data_block(out, buf, len, off) < ARCHIVE_WARN)
			return sbx_error_set(err, -EIO, "write '%s': %s", path, archive_error_string(out));
	if (r != ARCHIVE_EOF)
		return sbx_error_set(err, -EINVAL, "read '%s': %s", path, archive_error_string(in));
	return 0;
}

/* Writes a whiteout (char device 0/0) for ".wh.NAME" at DIR/NAME. */
static int write_whiteout(struct archive *disk, const char *dir, const char *name,
			  struct archive_entry *from, sbx_error **err)
{
	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return sbx_error_set(err, -EINVAL, "bad whiteout '%s/.wh.%s'", dir, name);
	_cleanup_free_ char *path = *dir ? xasprintf("%s/%s", dir, name) : xstrdup(name);
	struct archive_entry *w = archive_entry_new();
	archive_entry_set_pathname(w, path);
	archive_entry_set_filetype(w, AE_IFCHR);
	archive_entry_set_perm(w, 0);
	archive_entry_set_rdev(w, 0);
	archive_entry_set_uid(w, 0);
	archive_entry_set_gid(w, 0);
	archive_entry_set_mtime(w, archive_entry_mtime(from), 0);
	int r = archive_write_header(disk, w) < ARCHIVE_WARN ? -EINVAL : 0;
	if (r < 0)
		sbx_error_set(err, r, "whiteout '%s': %s", path, archive_error_string(disk));
	archive_entry_free(w);
	return r;
}

/* Handles one entry's name: whiteouts, opaque markers, unsafe names.
 * Returns 1 when the entry was consumed, 0 to extract it, <0 on error. */
static int layer_special(struct job *j, struct archive *disk, struct archive_entry *e,
			 const char *path, char ***opaque)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!sbx__str_startswith(base, ".wh."))
		return 0;
	_cleanup_free_ char *dir = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup("");
	if (strcmp(base, ".wh..wh..opq") == 0) {
		if (!path_safe(dir))
			return sbx_error_set(&j->err, -EINVAL, "unsafe path '%s'", path);
		sbx__strv_push(opaque, dir);
		return 1;
	}
	int r = write_whiteout(disk, dir, base + 4, e, &j->err);
	return r < 0 ? r : 1;
}

/* Extracts every entry of `in` into the current directory. Layers get
 * what sanitize.c allows; unpacking keeps files, directories and symlinks
 * only, without owners, modes beyond the umask, or xattrs. */
static int extract_entries(struct job *j, struct archive *in)
{
	_cleanup_(archive_freep) struct archive *disk = archive_write_disk_new();
	archive_write_disk_set_options(disk, j->layer ? LAYER_FLAGS : UNPACK_FLAGS);
	char **opaque = NULL;
	char **skipped = xcalloc(1, sizeof(char *)); /* dropped devices, for hardlinks to them */
	struct archive_entry *e;
	int ar, r = 0;
	while (r == 0 && ((ar = archive_read_next_header(in, &e)) == ARCHIVE_OK || ar == ARCHIVE_WARN)) {
		_cleanup_free_ char *path = xstrdup(strip_dot(archive_entry_pathname(e)));
		size_t n = strlen(path);
		while (n && path[n - 1] == '/')
			path[--n] = '\0';
		if (!*path)
			continue;
		mode_t type = archive_entry_filetype(e);
		if (!j->layer && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
			continue;
		int special = j->layer ? layer_special(j, disk, e, path, &opaque) : 0;
		if (special < 0)
			r = special;
		if (special)
			continue;
		if (j->layer && !sbx__image_entry_sanitize(e)) {
			sbx__strv_push(&skipped, path);
			continue;
		}
		const char *hl = archive_entry_hardlink(e);
		if (hl) {
			_cleanup_free_ char *link = xstrdup(strip_dot(hl));
			if (!path_safe(link)) {
				r = sbx_error_set(&j->err, -EINVAL, "unsafe hardlink '%s' -> '%s'", path, hl);
				break;
			}
			if (sbx__strv_contains(skipped, link))
				continue;
			archive_entry_set_hardlink(e, link);
		}
		archive_entry_set_pathname(e, path);
		if (archive_write_header(disk, e) < ARCHIVE_WARN) {
			r = sbx_error_set(&j->err, -EINVAL, "entry '%s': %s", path,
					  archive_error_string(disk));
			break;
		}
		if (archive_entry_size(e) > 0 && (r = copy_data(in, disk, path, &j->err)) < 0)
			break;
		if (archive_write_finish_entry(disk) < ARCHIVE_WARN)
			r = sbx_error_set(&j->err, -EIO, "entry '%s': %s", path,
					  archive_error_string(disk));
	}
	if (r == 0 && ar != ARCHIVE_EOF)
		r = sbx_error_set(&j->err, -EINVAL, "read: %s", archive_error_string(in));
	if (archive_write_close(disk) < ARCHIVE_WARN && r == 0)
		r = sbx_error_set(&j->err, -EIO, "finish: %s", archive_error_string(disk));
	if (r == 0)
		r = set_opaque(opaque, &j->err);
	sbx__strv_free(opaque);
	sbx__strv_free(skipped);
	return r;
}

static int tar_job(struct job *j)
{
	int r = extract_entries(j, j->st.tar);
	if (r == 0)
		r = sbx__stream_drain(&j->st, &j->err);
	return r;
}

static int unpack_job(struct job *j)
{
	struct archive *in = archive_read_new();
	archive_read_support_filter_all(in);
	archive_read_support_format_tar(in);
	int r = 0;
	if ((j->src_open ? archive_read_open_fd(in, j->src_fd, 65536)
			 : archive_read_open_filename(in, j->src, 65536)) != ARCHIVE_OK)
		r = sbx_error_set(&j->err, -EINVAL, "%s", archive_error_string(in));
	else
		r = extract_entries(j, in);
	archive_read_free(in);
	return r;
}

int sbx__image_unpack_archive(const char *path, const char *dest, sbx_error **err)
{
	struct job j = { .fn = unpack_job, .dir = dest, .src = path };
	int r = run_job(&j, err);
	return r < 0 ? sbx_error_prefix(err, r, "unpack %s", path) : 0;
}

int sbx__image_unpack_archive_fd(int fd, const char *label, const char *dest, sbx_error **err)
{
	struct job j = { .fn = unpack_job, .dir = dest, .src = label, .src_fd = fd, .src_open = true };
	int r = run_job(&j, err);
	return r < 0 ? sbx_error_prefix(err, r, "unpack %s", label) : 0;
}

/* ---- finishing a layer ----------------------------------------------------- */

static __thread uint64_t du_total;

static int du_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p, (void)flag, (void)f;
	du_total += (uint64_t)st->st_blocks * 512 / (st->st_nlink ? st->st_nlink : 1);
	return 0;
}

static uint64_t disk_usage(const char *dir)
{
	du_total = 0;
	nftw(dir, du_cb, 32, FTW_PHYS | FTW_MOUNT);
	return du_total;
}

/* Creates layers/.tmp-XXXXXX/rootfs; *tmp_out owned. */
static int layer_tmp(char **tmp_out, sbx_runtime *rt, sbx_error **err)
{
	int r = sbx__image_store_init(rt, err);
	if (r < 0)
		return r;
	char *tmp = xasprintf("%s/layers/.tmp-XXXXXX", sbx_runtime_image_dir(rt));
	if (!mkdtemp(tmp)) {
		r = sbx_error_setsys(err, -errno, errno, "create %s", tmp);
		free(tmp);
		return r;
	}
	chmod(tmp, 0755);
	_cleanup_free_ char *root = xasprintf("%s/rootfs", tmp);
	if (mkdir(root, 0755) < 0) {
		r = sbx_error_setsys(err, -errno, errno, "create %s", root);
		sbx__rm_rf(tmp, NULL);
		free(tmp);
		return r;
	}
	*tmp_out = tmp;
	return 0;
}

/* Writes meta.json and renames TMP into place; an existing layer wins. */
static int layer_commit(sbx_runtime *rt, const char *tmp, const char *digest, uint64_t size,
			sbx_error **err)
{
	_cleanup_free_ char *root = xasprintf("%s/rootfs", tmp);
	json_t *m = json_pack("{s:s, s:I, s:I}", "digest", digest, "size", (json_int_t)size,
			      "disk_size", (json_int_t)disk_usage(root));
	_cleanup_free_ char *data = json_dumps(m, 0);
	json_decref(m);
	_cleanup_free_ char *meta = xasprintf("%s/meta.json", tmp);
	int r = sbx__write_file_atomic(meta, data, strlen(data), 0644, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *final = sbx__image_layer_dir(rt, digest);
	if (rename(tmp, final) == 0)
		return 0;
	if (errno != EEXIST && errno != ENOTEMPTY)
		return sbx_error_setsys(err, -errno, errno, "rename layer into %s", final);
	return sbx__rm_rf(tmp, err); /* a concurrent importer stored it first */
}

/* A producer of the stream, asked for its verdict before the layer is stored. */
struct producer {
	int (*finish)(struct producer *p, sbx_error **err);
};

/* Extracts the tar stream on FD (owned) as a layer. */
static int layer_from_fd(char **digest_out, sbx_runtime *rt, int fd, const char *expect_diffid,
			 const char *expect_blob, struct producer *prod, sbx_error **err)
{
	_cleanup_free_ char *tmp = NULL;
	int r = layer_tmp(&tmp, rt, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	_cleanup_free_ char *root = xasprintf("%s/rootfs", tmp);
	/* Zeroed by calloc; a compound literal here would also write (and fault
	 * in) both 64 KiB stream buffers of every job, used or not. */
	struct job *j = xcalloc(1, sizeof(*j));
	j->fn = tar_job;
	j->dir = root;
	j->layer = true;
	r = sbx__stream_open(&j->st, fd, err);
	if (r == 0)
		r = run_job(j, err);
	if (prod) {
		shutdown(j->st.fd, SHUT_RDWR); /* unblocks a producer stuck on a full socket */
		int pr = prod->finish(prod, err);
		r = pr < 0 ? pr : r;
	}
	if (r == 0 && expect_blob && strcmp(j->st.blob_digest, expect_blob) != 0)
		r = sbx_error_set(err, -EINVAL, "blob digest is %s, expected %s", j->st.blob_digest,
				  expect_blob);
	if (r == 0 && expect_diffid && strcmp(j->st.diff_digest, expect_diffid) != 0)
		r = sbx_error_set(err, -EINVAL, "layer digest is %s, expected %s", j->st.diff_digest,
				  expect_diffid);
	if (r == 0)
		r = layer_commit(rt, tmp, j->st.diff_digest, j->st.diff_size, err);
	if (r == 0)
		*digest_out = xstrdup(j->st.diff_digest);
	sbx__stream_close(&j->st);
	free(j);
	if (r < 0)
		sbx__rm_rf(tmp, NULL);
	return r;
}

int sbx__image_layer_from_tar(char **digest_out, sbx_runtime *rt, const char *path,
			      const char *expect_diffid, const char *expect_blob, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0 || sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	if (expect_diffid && sbx__image_layer_exists(rt, expect_diffid)) {
		*digest_out = xstrdup(expect_diffid);
		return 0;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", path);
	int r = layer_from_fd(digest_out, rt, fd, expect_diffid, expect_blob, NULL, err);
	return r < 0 ? sbx_error_prefix(err, r, "layer %s", path) : 0;
}

/* ---- directory layers: read_disk -> tar -> socket -> layer_from_fd --------- */

/* The producer side: a thread with its own fs context, since read_disk may
 * fchdir() while it walks. */
struct dirtar {
	struct producer prod;
	pthread_t thread;
	const char *dir;
	int fd;
	sbx_error *err;
	int r;
	char buf[65536];
};
static la_ssize_t sock_write(struct archive *a, void *arg, const void *buf, size_t len)
{
	struct dirtar *d = arg;
	for (;;) {
		ssize_t n = send(d->fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			archive_set_error(a, errno, "send: %s", strerror(errno));
		return n;
	}
}

static int dirtar_entry(struct dirtar *d, struct archive *rd, struct archive *w,
			struct archive_entry *e, const char *path)
{
	if (archive_write_header(w, e) < ARCHIVE_WARN)
		return sbx_error_set(&d->err, -EIO, "'%s': %s", path, archive_error_string(w));
	la_ssize_t n = 0;
	while (archive_entry_size(e) > 0 && (n = archive_read_data(rd, d->buf, sizeof(d->buf))) > 0)
		if (archive_write_data(w, d->buf, (size_t)n) < 0)
			return sbx_error_set(&d->err, -EIO, "'%s': %s", path, archive_error_string(w));
	if (n < 0)
		return sbx_error_set(&d->err, -EIO, "read '%s': %s", path, archive_error_string(rd));
	return 0;
}

static int dirtar_walk(struct dirtar *d, struct archive *rd, struct archive *w)
{
	struct archive_entry_linkresolver *lr = archive_entry_linkresolver_new();
	archive_entry_linkresolver_set_strategy(lr, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
	size_t plen = strlen(d->dir);
	int r = 0, ar = ARCHIVE_OK;
	struct archive_entry *e;
	while (r == 0 && ((ar = archive_read_next_header(rd, &e)) == ARCHIVE_OK || ar == ARCHIVE_WARN)) {
		archive_read_disk_descend(rd);
		const char *full = archive_entry_pathname(e);
		if (strncmp(full, d->dir, plen) != 0)
			continue;
		_cleanup_free_ char *path = xstrdup(full + plen + (full[plen] == '/'));
		if (!*path || archive_entry_filetype(e) == AE_IFSOCK)
			continue;
		archive_entry_set_pathname(e, path);
		archive_entry_unset_atime(e);
		archive_entry_unset_ctime(e);
		archive_entry_unset_birthtime(e);
		struct archive_entry *spare = NULL;
		archive_entry_linkify(lr, &e, &spare);
		if (e)
			r = dirtar_entry(d, rd, w, e, path);
	}
	if (r == 0 && ar != ARCHIVE_EOF)
		r = sbx_error_set(&d->err, -EIO, "read: %s", archive_error_string(rd));
	archive_entry_linkresolver_free(lr);
	return r;
}

static void *dirtar_thread(void *arg)
{
	struct dirtar *d = arg;
	if (unshare(CLONE_FS) < 0) {
		d->r = sbx_error_setsys(&d->err, -errno, errno, "unshare fs context");
		return NULL;
	}
	struct archive *rd = archive_read_disk_new();
	archive_read_disk_set_symlink_physical(rd);
	archive_read_disk_set_behavior(rd, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
	struct archive *w = archive_write_new();
	archive_write_set_format_pax_restricted(w);
	archive_write_add_filter_none(w);
	archive_write_set_bytes_in_last_block(w, 1);
	if (archive_read_disk_open(rd, d->dir) != ARCHIVE_OK)
		d->r = sbx_error_set(&d->err, -EIO, "open: %s", archive_error_string(rd));
	else if (archive_write_open(w, d, NULL, sock_write, NULL) != ARCHIVE_OK)
		d->r = sbx_error_set(&d->err, -EIO, "tar: %s", archive_error_string(w));
	else
		d->r = dirtar_walk(d, rd, w);
	if (archive_write_close(w) != ARCHIVE_OK && d->r == 0)
		d->r = sbx_error_set(&d->err, -EIO, "tar: %s", archive_error_string(w));
	archive_write_free(w);
	archive_read_free(rd);
	shutdown(d->fd, SHUT_WR);
	return NULL;
}

static int dirtar_finish(struct producer *p, sbx_error **err)
{
	struct dirtar *d = (struct dirtar *)p;
	pthread_join(d->thread, NULL);
	if (d->r < 0 && err) {
		sbx_error_free(*err); /* the reader's error explains the extractor's */
		*err = steal_ptr(&d->err);
	}
	return d->r;
}

int sbx__image_layer_from_dir(char **digest_out, sbx_runtime *rt, const char *dir,
			      sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0 || sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return sbx_error_setsys(err, -errno, errno, "socketpair");
	struct dirtar *d = xcalloc(1, sizeof(*d));
	d->prod.finish = dirtar_finish;
	d->dir = dir;
	d->fd = sv[1];
	int e = pthread_create(&d->thread, NULL, dirtar_thread, d);
	if (e) {
		close(sv[0]);
		close(sv[1]);
		free(d);
		return sbx_error_setsys(err, -e, e, "start directory reader");
	}
	int r = layer_from_fd(digest_out, rt, sv[0], NULL, NULL, &d->prod, err); /* closes sv[0] */
	close(sv[1]);
	sbx_error_free(d->err);
	free(d);
	return r < 0 ? sbx_error_prefix(err, r, "layer from %s", dir) : 0;
}
