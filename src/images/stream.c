/* SPDX-License-Identifier: MIT */
/*
 * Hashed tar streams. A layer's digest is the sha256 of its uncompressed tar
 * stream, which libarchive never exposes directly, so reading is two-level: a
 * "raw" reader decompresses the file, and a tar reader pulls its input from
 * the raw reader through a callback that hashes every byte on the way. A third
 * hash over the file bytes checks OCI blob digests. Also: sha256 helpers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/sha256.h"
#include "store.h"
#include "stream.h"
#include "util/lazy.h"

/* "sha256:<hex>" */
static void hex_digest(EVP_MD_CTX *c, char out[72])
{
	memcpy(out, "sha256:", 7);
	sbx__sha256_final_hex(c, out + 7);
}

char *sbx__image_sha256_buf(const void *data, size_t len)
{
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_hex(hex, data, len);
	return xasprintf("sha256:%s", hex);
}

int sbx__image_sha256_file(char **digest_out, const char *path, sbx_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "open %s", path);
	EVP_MD_CTX *c = sbx__sha256_new();
	char buf[65536], out[72];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			EVP_MD_CTX_free(c);
			return sbx_error_setsys(err, -e, e, "read %s", path);
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(c, buf, (size_t)n);
	}
	hex_digest(c, out);
	EVP_MD_CTX_free(c);
	*digest_out = xstrdup(out);
	return 0;
}

/* raw reader input: the file, hashed as stored */
static la_ssize_t raw_read(struct archive *a, void *arg, const void **buf)
{
	sbx_stream *s = arg;
	for (;;) {
		ssize_t n = read(s->fd, s->buf, sizeof(s->buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			archive_set_error(a, errno, "read: %s", strerror(errno));
			return -1;
		}
		EVP_DigestUpdate(s->blob, s->buf, (size_t)n);
		*buf = s->buf;
		return n;
	}
}

/* tar reader input: decompressed bytes from the raw reader, hashed */
static la_ssize_t tar_read(struct archive *a, void *arg, const void **buf)
{
	sbx_stream *s = arg;
	la_ssize_t n = archive_read_data(s->raw, s->chunk, sizeof(s->chunk));
	if (n < 0) {
		archive_set_error(a, archive_errno(s->raw), "%s", archive_error_string(s->raw));
		return -1;
	}
	EVP_DigestUpdate(s->diff, s->chunk, (size_t)n);
	s->diff_size += (uint64_t)n;
	*buf = s->chunk;
	return n;
}

int sbx__stream_open(sbx_stream *s, int fd, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_archive, err) < 0 || sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	memset(s, 0, offsetof(sbx_stream, buf));
	s->fd = fd;
	s->blob = sbx__sha256_new();
	s->diff = sbx__sha256_new();
	s->raw = archive_read_new();
	archive_read_support_filter_all(s->raw);
	archive_read_support_format_raw(s->raw);
	struct archive_entry *e;
	if (archive_read_open(s->raw, s, NULL, raw_read, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(s->raw, &e) != ARCHIVE_OK)
		return sbx_error_set(err, -EINVAL, "not a tar stream (%s)",
				     archive_error_string(s->raw) ? archive_error_string(s->raw)
								  : "empty");
	s->tar = archive_read_new();
	archive_read_support_format_tar(s->tar);
	archive_read_support_format_empty(s->tar);
	if (archive_read_open(s->tar, s, NULL, tar_read, NULL) != ARCHIVE_OK)
		return sbx_error_set(err, -EINVAL, "not a tar stream (%s)",
				     archive_error_string(s->tar));
	return 0;
}

int sbx__stream_drain(sbx_stream *s, sbx_error **err)
{
	const void *b;
	la_ssize_t n;
	while ((n = tar_read(s->tar, s, &b)) > 0)
		;
	if (n < 0)
		return sbx_error_set(err, -EINVAL, "read: %s", archive_error_string(s->tar));
	while ((n = raw_read(s->raw, s, &b)) > 0)
		;
	if (n < 0)
		return sbx_error_set(err, -EIO, "read: %s", archive_error_string(s->raw));
	hex_digest(s->blob, s->blob_digest);
	hex_digest(s->diff, s->diff_digest);
	return 0;
}

void sbx__stream_close(sbx_stream *s)
{
	if (s->tar)
		archive_read_free(s->tar);
	if (s->raw)
		archive_read_free(s->raw);
	if (s->blob)
		EVP_MD_CTX_free(s->blob);
	if (s->diff)
		EVP_MD_CTX_free(s->diff);
	if (s->fd >= 0)
		close(s->fd);
	memset(s, 0, offsetof(sbx_stream, buf));
	s->fd = -1;
}
