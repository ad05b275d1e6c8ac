/* SPDX-License-Identifier: MIT */
/*
 * Daytona's declarative builds in `sbx serve`: a Dockerfile text plus the
 * context tars the SDK uploaded to object storage (objects.c), for a
 * snapshot (snapshot.c) or a sandbox created with buildInfo (sandbox.c).
 * Each tar is unpacked with the confined unpacker (util/tree_tar.c: no
 * absolute paths, no "..", no writes through symlinks, no devices, FIFOs or
 * set-id bits) into one directory, the build context; the Dockerfile sits
 * beside it, so a context's own Dockerfile never replaces it. The template
 * builder caches by the digest of the recipe and the context's content.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/template.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/tree_tar.h"
#include "daytona.h"

#define BUILD_TIMEOUT_S 3600

static int unpack(struct server *srv, json_t *hashes, const char *ctx, sbx_error **e)
{
	size_t i;
	json_t *h;
	json_array_foreach(hashes, i, h) {
		const char *hash = json_string_value(h);
		_cleanup_free_ char *p = hash ? sbx__dt_context_path(srv, hash) : NULL;
		if (!p)
			return sbx_error_set(e, -EINVAL, "buildInfo.contextHashes[%zu] must be a lowercase hex hash", i);
		_cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return sbx_error_setsys(e, -errno == -ENOENT ? -ENOENT : -EIO, errno,
						"build context %s is not in object storage (upload %s/%s/context.tar "
						"first, with GET /api/object-storage/push-access credentials)",
						hash, DT_ORG_ID, hash);
		int rc = sbx__tree_untar(fd, ctx, e);
		if (rc < 0)
			return sbx_error_prefix(e, rc, "build context %s", hash);
	}
	return 0;
}

int sbx__dt_build(struct server *srv, const char *dockerfile, json_t *hashes, const char *slug, char **alias,
		  sbx_output_fn on_output, void *payload, sbx_error **e)
{
	_cleanup_free_ char *parent = xasprintf("%s/server/daytona-builds", srv->cfg.state_dir);
	int rc = sbx__mkdir_p(parent, 0700, e);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *dir = xasprintf("%s/XXXXXX", parent);
	if (!mkdtemp(dir))
		return sbx_error_setsys(e, -errno, errno, "create a build directory in %s", parent);
	_cleanup_free_ char *ctx = xasprintf("%s/context", dir), *dfp = xasprintf("%s/Dockerfile", dir);
	rc = mkdir(ctx, 0700) < 0 ? sbx_error_setsys(e, -errno, errno, "create %s", ctx) : 0;
	if (rc == 0 && json_is_array(hashes))
		rc = unpack(srv, hashes, ctx, e);
	if (rc == 0)
		rc = sbx__write_file_atomic(dfp, dockerfile, strlen(dockerfile), 0600, e);
	sbx_build_result res = { 0 };
	if (rc == 0) {
		sbx_build_opts o = SBX_BUILD_OPTS_INIT;
		o.context_dir = ctx;
		o.dockerfile = dfp;
		o.slug = slug; /* alias <slug>-<10 hex>, cached by digest */
		o.timeout_s = BUILD_TIMEOUT_S;
		o.on_output = on_output;
		o.payload = payload;
		rc = sbx_template_build(&res, srv->rt, &o, e);
	}
	if (rc == 0)
		*alias = steal_ptr(&res.alias);
	sbx_build_result_free(&res);
	sbx__rm_rf(dir, NULL);
	return rc;
}
