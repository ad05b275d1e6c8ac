/* SPDX-License-Identifier: MIT */
/*
 * Host-side trees as one tar: packing a host path for an upload, and
 * unpacking a download confined to a staging directory, then moving it into
 * place the way cp does. No sandbox knowledge: providers move the tar.
 */
#ifndef SBX_UTIL_TREE_TAR_H
#define SBX_UTIL_TREE_TAR_H

#include <sys/types.h>

#include <sbx/error.h>

/* An unnamed O_TMPFILE in $TMPDIR (else /tmp), read-write, 0600. */
int sbx__tree_tmpfd(sbx_error **err);
/* The last component of PATH, trailing slashes ignored; owned. */
char *sbx__tree_name(const char *path);
/* Writes a tar (gzip optional) of host path SRC, top entry NAME, to a
 * temporary fd (owned; read it from offset 0). */
int sbx__tree_tar(int *fd_out, off_t *len_out, const char *src, const char *name, int gzip,
		  sbx_error **err);
/* Unpacks the tar in FD (from offset 0) under host directory DIR, refusing
 * absolute paths, "..", and writes through symlinks. */
int sbx__tree_untar(int fd, const char *dir, sbx_error **err);
/* Unpacks the tar in FD, whose top entry is NAME, in a staging directory
 * beside DST and renames it into place (cp placement: into DST when it is an
 * existing directory, else as DST, replacing what is there). TAG starts the
 * error messages ("" or "provider: "). */
int sbx__tree_place(int fd, const char *name, const char *dst, const char *tag, sbx_error **err);
/* The sh command that unpacks the tar at QTAR (top entry QNAME) in a
 * sandbox with cp placement at QDST, then removes the tar; all three
 * arguments already shell-quoted. Owned. */
char *sbx__tree_unpack_sh(const char *qtar, const char *qdst, const char *qname);

#endif
