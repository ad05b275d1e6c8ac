/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of template builds (src/templates/), private to the
 * layer: the Dockerfile front end (dockerfile.h: parser, evaluator, build
 * context, shared with remote template builders), a read-only merged view over an image's layers (lview.c) and the executor
 * (build.c). See docs/templates.md.
 */
#ifndef SBX_TEMPLATES_INT_H
#define SBX_TEMPLATES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <sbx/error.h>
#include <sbx/image.h>

#include "dockerfile.h" /* the parser, evaluator and build context */

/* lview.c: a read-only merged view of layer directories (overlayfs rules:
 * char 0/0 whiteouts, opaque directories), never leaving the layers. */
struct lview {
	char **layers;              /* top first */
	int *fds;                   /* O_PATH fds of the layer roots */
	size_t n;
};
struct lnode {
	bool exists;
	struct stat st;
	size_t layer;               /* where the entry comes from */
	size_t lim;                 /* directories: layers [0, lim) contribute */
	char *path;                 /* canonical absolute path (owned) */
};
/* LAYER_PATHS bottom first, as in sbx_image. */
int sbx__lview_open(struct lview *v, char *const *layer_paths, sbx_error **err);
void sbx__lview_close(struct lview *v);
/* Resolves PATH (absolute), following symlinks in every component but the
 * last unless FOLLOW. A missing entry gives exists = false and the canonical
 * path it would have. -ELOOP, -ENOTDIR. */
int sbx__lview_resolve(struct lnode *out, const struct lview *v, const char *path, bool follow,
		       sbx_error **err);
void sbx__lnode_clear(struct lnode *n);
/* Reads a regular file of the merged view (max bytes). */
int sbx__lview_read(char **out, size_t *len, const struct lview *v, const char *path, size_t max,
		    sbx_error **err);
/* Copies the merged tree at N to host path DST (which must not exist), keeping
 * modes, owners and times. */
int sbx__lview_export(const struct lview *v, const struct lnode *n, const char *dst,
		      sbx_error **err);
/* Creates DIR's canonical path below STAGING with each existing component's
 * metadata from the view (missing ones 0755 root). */
int sbx__lview_mkparents(const struct lview *v, const char *staging, const char *canon,
			 sbx_error **err);

/* How copied files are written. */
struct copy_opts {
	uid_t uid;
	gid_t gid;
	bool chown;                 /* apply uid/gid (else 0:0) */
	int chmod;                  /* -1 = keep */
	bool follow_top;            /* follow a symlink given as the source itself (inside the root) */
	const struct ctx_ignore *ig;
	const char *rel;            /* path of src relative to the context (for ig), or NULL */
};
/* Copies file or tree REL to DST (a tree's contents into directory DST);
 * symlinks below the top are copied as symlinks. */
int sbx__ctx_copy(const char *root_dir, const char *rel, const char *dst, const struct copy_opts *o,
		  sbx_error **err);
/* Extracts archive REL into directory DST (owners from o when chown). */
int sbx__ctx_extract(const char *root_dir, const char *rel, const char *dst,
		     const struct copy_opts *o, sbx_error **err);

#endif
