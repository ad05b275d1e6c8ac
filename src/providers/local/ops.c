/* SPDX-License-Identifier: MIT */
/* The local provider's ops table and its thin adapters onto the files that
 * do the work (local.c the lifecycle, gc.c list and GC, the rest per concern). */
#include <errno.h>
#include <stdint.h>

#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "local_int.h"
#include "net/net.h"
#include "proto.h"

static int local_exec(sbx_exec_result *out, void *h, const sbx_exec_opts *o, sbx_error **err)
{
	return sbx__local_exec(out, h, o, err);
}

static int local_write(void *h, const char *path, const void *data, size_t len, unsigned mode,
		       sbx_error **err)
{
	struct sbx_fsid fs;
	int r = sbx__idmap_enter(sbx__local_id_base(h), &fs);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "become root of the sandbox to write into it");
	r = sbx__local_write_file(h, path, data, len, mode, err);
	sbx__idmap_leave(&fs);
	return r;
}

static int local_read(void **data, size_t *len, void *h, const char *path, size_t max, sbx_error **err)
{
	return sbx__local_read_file(data, len, h, path, max, err);
}

static int local_upload(void *h, const char *src, const char *dst, sbx_error **err)
{
	struct sbx_fsid fs;
	int r = sbx__idmap_enter(sbx__local_id_base(h), &fs);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "become root of the sandbox to write into it");
	r = sbx__local_upload(h, src, dst, err);
	sbx__idmap_leave(&fs);
	return r;
}

static int local_download(void *h, const char *src, const char *dst, sbx_error **err)
{
	return sbx__local_download(h, src, dst, err);
}

static int local_set_timeout(void *h, unsigned ttl_s, sbx_error **err)
{
	struct local_sb *sb = h;
	int r = sbx__local_request(sb, M_SET_TTL, (uint64_t)ttl_s * 1000, NULL, err);
	if (r < 0)
		return r;
	struct local_state st;
	_cleanup_free_ char *path = sbx__local_path_of(sb, "json");
	if (sbx__state_read(&st, path, NULL) == 0) {
		st.expires = ttl_s ? sbx__now_real() + ttl_s : 0;
		r = sbx__state_write(path, &st, err);
		sbx__state_clear(&st);
	}
	return r;
}
static int l_proc_start(void **proc, struct sbx_process_fds *fds, void *h, const sbx_exec_opts *o,
			int keep_stdin, sbx_error **err)
{
	int start_exit = 0;
	char msg[1024] = "";
	int r = sbx__local_proc_start((struct local_proc **)proc, fds, h, o, keep_stdin, 0, &start_exit, msg,
				      sizeof(msg), err);
	if (r == -ENOENT && start_exit)
		r = sbx_error_set(err, start_exit == 127 ? -ENOENT : -EACCES, "%s", msg);
	/* sbx_process owns fds->in_fd from here (sbx_process_close_stdin() and
	 * sbx_process_free() close it); a second close here would hit whatever
	 * the process opened under that number meanwhile. */
	if (r == 0)
		sbx__local_proc_give_stdin(*proc);
	return r;
}

static int l_proc_poll(void *p, int *status, int *timed_out, int block, sbx_error **err)
{
	return sbx__local_proc_poll(p, status, timed_out, block, NULL, NULL, 0, err);
}

static int l_proc_signal(void *p, int sig, sbx_error **err)
{
	return sbx__local_proc_signal(p, sig, err);
}

static void l_proc_free(void *p, int kill)
{
	sbx__local_proc_free(p, kill);
}

static int l_stat(sbx_file_info *out, void *h, const char *path, sbx_error **err)
{
	return sbx__local_stat(out, h, path, err);
}

static int l_list(sbx_file_info **out, size_t *n, void *h, const char *dir, unsigned depth, sbx_error **err)
{
	return sbx__local_list_dir(out, n, h, dir, depth, err);
}

static int l_mkdir(void *h, const char *path, unsigned mode, sbx_error **err)
{
	struct sbx_fsid fs;
	int r = sbx__idmap_enter(sbx__local_id_base(h), &fs);
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "become root of the sandbox to write into it");
	r = sbx__local_mkdir(h, path, mode, err);
	sbx__idmap_leave(&fs);
	return r;
}

static int l_rename(void *h, const char *from, const char *to, sbx_error **err)
{
	return sbx__local_rename(h, from, to, err);
}

static int l_remove(void *h, const char *path, int force, sbx_error **err)
{
	return sbx__local_remove(h, path, force, err);
}

static int l_chown(void *h, const char *path, const char *user, sbx_error **err)
{
	return sbx__local_chown(h, path, user, err);
}

static int l_path_fd(int *fd, void *h, const char *path, sbx_error **err)
{
	return sbx__local_path_fd(fd, h, path, err);
}

static int l_set_egress(void *h, const char *const *allow, const char *const *deny, sbx_error **err)
{
	struct local_sb *sb = h;
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.allow_out = allow;
	o.deny_out = deny;
	return sbx__net_set_egress(sb->dir, sb->id, &o, err);
}

static int l_connect_port(int *fd, void *h, unsigned port, sbx_error **err)
{
	return sbx__local_connect_port(fd, h, port, err);
}

static int l_pause(void *h, sbx_error **err)
{
	struct local_sb *sb = h;
	return sbx__cg_freeze(sbx__local_cg(sb->ctx), sb->id, 1, err);
}

static int l_resume(void *h, sbx_error **err)
{
	struct local_sb *sb = h;
	return sbx__cg_freeze(sbx__local_cg(sb->ctx), sb->id, 0, err);
}

/* A pooled sandbox's memory group now, not at its taker's first exec. */
static int l_warm(void *h, sbx_error **err)
{
	return sbx__local_memcg_join(h, err);
}

extern const sbx_provider_desc sbx_provider_local_desc;

const sbx_provider_ops sbx_provider_local = {
	.version = SBX_PROVIDER_OPS_VERSION,
	.name = "local",
	.desc = &sbx_provider_local_desc,
	.init = sbx__local_init,
	.fini = sbx__local_fini,
	.create = sbx__local_create,
	.open = sbx__local_open,
	.exec = local_exec,
	.write_file = local_write,
	.read_file = local_read,
	.upload = local_upload,
	.download = local_download,
	.set_timeout = local_set_timeout,
	.destroy = sbx__local_destroy,
	.close = sbx__local_close,
	.list = sbx__local_list,
	.destroy_id = sbx__local_destroy_id,
	.process_start = l_proc_start,
	.process_poll = l_proc_poll,
	.process_signal = l_proc_signal,
	.process_free = l_proc_free,
	.stat = l_stat,
	.list_dir = l_list,
	.mkdir = l_mkdir,
	.rename = l_rename,
	.remove = l_remove,
	.chown = l_chown,
	.path_fd = l_path_fd,
	.pause = l_pause,
	.resume = l_resume,
	.features = SBX_PROVIDER_TTY,
	.limits = sbx__local_limits,
	.stats = sbx__local_stats,
	.connect_port = l_connect_port,
	.fork = sbx__local_fork,
	.snapshot = sbx__local_snapshot,
	.snapshot_remove = sbx__local_snapshot_remove,
	.set_egress = l_set_egress,
	.warm = l_warm,
	.info = sbx__local_info,
};
