/* SPDX-License-Identifier: MIT */
/*
 * The provider "fuzz" behind the fuzz server's one sandbox (srv_fixture.c):
 * writes, mkdir and chown succeed and store nothing; the only readable file
 * is an /etc/passwd with root and user; only /, /root and /home/user exist
 * (empty directories); exec and processes are not supported. Nothing here
 * touches the host.
 */
#include <errno.h>
#include <string.h>

#include <sbx/sys/provider.h>

#include "../../src/util/alloc.h"
#include "srv_fixture.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n";

static int fp_create(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)ctx, (void)o, (void)err;
	*sb_out = xstrdup("sandbox");
	*id_out = xstrdup(FZ_SANDBOX_ID);
	return 0;
}

static int fp_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	(void)out, (void)sb, (void)o;
	return sbx_error_set(err, -ENOSYS, "fuzz provider: no exec");
}

static int fp_write(void *sb, const char *path, const void *data, size_t len, unsigned mode, sbx_error **err)
{
	(void)sb, (void)data, (void)len, (void)mode;
	return path && path[0] == '/' ? 0 : sbx_error_set(err, -EINVAL, "path '%s' is not absolute", path);
}

static int fp_read(void **data_out, size_t *len_out, void *sb, const char *path, size_t max, sbx_error **err)
{
	(void)sb;
	if (strcmp(path, "/etc/passwd") != 0)
		return sbx_error_set(err, -ENOENT, "%s: no such file", path);
	size_t n = sizeof(passwd) - 1 < max ? sizeof(passwd) - 1 : max;
	char *d = xmalloc(n + 1);
	memcpy(d, passwd, n);
	d[n] = '\0';
	*data_out = d;
	*len_out = n;
	return 0;
}

static int fp_ok(void *sb, sbx_error **err)
{
	(void)sb, (void)err;
	return 0;
}

static int fp_timeout(void *sb, unsigned ttl, sbx_error **err)
{
	(void)sb, (void)ttl, (void)err;
	return 0;
}

static void fp_close(void *sb)
{
	free(sb);
}

static int fp_stat(sbx_file_info *out, void *sb, const char *path, sbx_error **err)
{
	(void)sb;
	if (strcmp(path, "/") != 0 && strcmp(path, "/root") != 0 && strcmp(path, "/home/user") != 0)
		return sbx_error_set(err, -ENOENT, "%s: no such file", path);
	memset(out, 0, sizeof(*out));
	const char *slash = strrchr(path, '/');
	out->name = xstrdup(slash[1] ? slash + 1 : "/");
	out->path = xstrdup(path);
	out->type = SBX_FILE_DIR;
	out->mode = 0755;
	out->owner = xstrdup("root");
	out->group = xstrdup("root");
	return 0;
}

static int fp_list_dir(sbx_file_info **out, size_t *n_out, void *sb, const char *dir, unsigned depth,
		       sbx_error **err)
{
	(void)depth;
	sbx_file_info st;
	int r = fp_stat(&st, sb, dir, err);
	if (r < 0)
		return r;
	sbx_file_info_clear(&st);
	*out = NULL;
	*n_out = 0;
	return 0;
}

static int fp_mkdir(void *sb, const char *path, unsigned mode, sbx_error **err)
{
	(void)sb, (void)path, (void)mode, (void)err;
	return 0;
}

static int fp_rename(void *sb, const char *from, const char *to, sbx_error **err)
{
	(void)sb, (void)to;
	return sbx_error_set(err, -ENOENT, "%s: no such file", from);
}

static int fp_remove(void *sb, const char *path, int force, sbx_error **err)
{
	(void)sb;
	return force ? 0 : sbx_error_set(err, -ENOENT, "%s: no such file", path);
}

static int fp_chown(void *sb, const char *path, const char *user, sbx_error **err)
{
	(void)sb, (void)path, (void)user, (void)err;
	return 0;
}

static const sbx_provider_ops fake_ops = {
	.version = SBX_PROVIDER_OPS_VERSION,
	.name = "fuzz",
	.create = fp_create,
	.exec = fp_exec,
	.write_file = fp_write,
	.read_file = fp_read,
	.set_timeout = fp_timeout,
	.destroy = fp_ok,
	.close = fp_close,
	.stat = fp_stat,
	.list_dir = fp_list_dir,
	.mkdir = fp_mkdir,
	.rename = fp_rename,
	.remove = fp_remove,
	.chown = fp_chown,
	.pause = fp_ok,
	.resume = fp_ok,
};

const sbx_provider_ops *fz_fake_provider(void)
{
	return &fake_ops;
}
