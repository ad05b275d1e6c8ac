/* SPDX-License-Identifier: MIT */
/*
 * Hashed tar streams for layer.c: reading a (compressed) tar file while
 * hashing both the file (blob digest) and the uncompressed stream (diffID).
 */
#ifndef SBX_IMAGES_STREAM_H
#define SBX_IMAGES_STREAM_H

#include <stdint.h>

#include <sbx/error.h>

struct archive;
struct evp_md_ctx_st;

typedef struct sbx_stream {
	int fd;                       /* source file or socket */
	struct evp_md_ctx_st *blob;   /* sha256 of the file as stored */
	struct evp_md_ctx_st *diff;   /* sha256 of the uncompressed tar stream */
	struct archive *raw;          /* decompressor over fd */
	struct archive *tar;          /* tar entries over raw */
	uint64_t diff_size;           /* bytes of the uncompressed stream */
	char blob_digest[72];         /* "sha256:<hex>" once finished */
	char diff_digest[72];
	char buf[65536];              /* file bytes */
	char chunk[65536];            /* uncompressed bytes */
} sbx_stream;

/* Reads FD (owned from now on) as a tar stream (any libarchive filter); s->tar
 * is positioned before the first entry. -EINVAL when it is not a tar stream. */
int sbx__stream_open(sbx_stream *s, int fd, sbx_error **err);
/* Reads whatever is left of the file and finishes both digests. */
int sbx__stream_drain(sbx_stream *s, sbx_error **err);
/* Releases everything; safe on a zeroed or half-opened stream. */
void sbx__stream_close(sbx_stream *s);

#endif
