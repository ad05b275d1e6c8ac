/* SPDX-License-Identifier: MIT */
/* Test helpers for the image store: private runtimes and archives built with
 * libarchive (no downloads). */
#ifndef SBX_TEST_IMAGES_HELPERS_H
#define SBX_TEST_IMAGES_HELPERS_H

#include <stdbool.h>
#include <sbx/sbx.h>

/* One tar entry: 'f' file (data), 'd' dir, 'l' symlink (target), 'h' hardlink (target). */
struct th_entry {
	char type;
	const char *path;
	const char *data;
	unsigned mode; /* 0 = default */
};
#define TH_END { 0, NULL, NULL, 0 }

/* A runtime over a fresh mkdtemp store; *dir_out (owned) is that store. */
sbx_runtime *th_runtime(char **dir_out);
/* Frees the runtime and removes its store and state dirs. */
void th_runtime_free(sbx_runtime *rt, char *dir);
/* mkdtemp under /tmp; owned. */
char *th_tmpdir(const char *tag);
void th_rm_rf(const char *path);
/* Writes a tar (gzip when gz) with fixed mtimes, so equal entries give equal bytes. */
void th_write_tar(const char *path, const struct th_entry *e, bool gz);
/* Tars directory DIR (contents at the archive root). */
void th_tar_dir(const char *path, const char *dir);
/* Writes a file, creating parent directories. */
void th_write_file(const char *path, const char *data, size_t len);
/* "sha256:<hex>" of a file / buffer; owned. */
char *th_sha256_file(const char *path);
char *th_sha256_buf(const void *data, size_t len);
/* Stores FILE as blobs/sha256/<hex> under an OCI layout DIR; returns its digest (owned). */
char *th_oci_blob(const char *dir, const char *file);
char *th_oci_blob_str(const char *dir, const char *data);
/* Counts entries of a directory (without . and ..), -1 if missing. */
int th_count_dir(const char *dir);
/* True when a file named NAME exists anywhere below DIR. */
bool th_find_name(const char *dir, const char *name);

#endif
