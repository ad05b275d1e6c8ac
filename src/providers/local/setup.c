/* SPDX-License-Identifier: MIT */
/*
 * The birth handshake with a new sandbox's init: the control socket it will
 * serve, M_SETUP (everything init needs to build the sandbox, queued before
 * the spawn when it fits), M_GO once the host's state file exists, and
 * M_READY or M_ERROR back. The order of these steps is local.c's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sbx/image.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/log.h"
#include "../../util/str.h"
#include "local_int.h"
#include "net/net.h"
#include "proto.h"

/* Commands get their own open-file limit, not whatever the host process had. */
#define DEFAULT_NOFILE 65536

int sbx__local_listen(const char *base, int *fd_out, sbx_error **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.sock", base);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return sbx_error_set(err, -ENAMETOOLONG,
				     "state dir %s is too deep for a unix socket path (max %zu bytes); set SBX_STATE_DIR shorter",
				     base, sizeof(sa.sun_path) - 20);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_error_setsys(err, -errno, errno, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0600) < 0 ||
	    listen(fd, 128) < 0)
		return sbx_error_setsys(err, -errno, errno, "listen on %s", sa.sun_path);
	*fd_out = steal_fd(&fd);
	return 0;
}

/* The base env of every exec: image config Env, then the spec's env. */
static void add_setup_env(struct sbx_msg *m, const sbx_image *img, const sbx_sandbox_opts *o)
{
	char **env = sbx__strv_dup((const char *const *)img->config.env);
	for (size_t i = 0; o->env && o->env[i]; i++)
		sbx__strv_setenv(&env, o->env[i]);
	for (size_t i = 0; env && env[i]; i++)
		sbx__msg_add_str(m, T_ENV, env[i]);
	sbx__strv_free(env);
}

/* A fork child's layer stores its ancestor's ids: it is mounted idmapped. */
static int layer_shifted(const struct local_sb *sb, const struct sbx_idmap *idm)
{
	return sb->scratch && idm->userns >= 0 && sb->layer_base != idm->base;
}

static void build_setup(struct sbx_msg *m, char *buf, size_t cap, struct local_sb *sb, const void *prog,
			size_t prog_len, const sbx_image *img, const struct sbx_idmap *idm, int cpu_run, int sudo,
			const sbx_sandbox_opts *o)
{
	sbx__msg_init(m, buf, cap, M_SETUP);
	sbx__msg_add_str(m, T_ID, sb->id);
	for (size_t i = 0; i < img->n_layers; i++)
		sbx__msg_add_str(m, T_LAYER, img->layer_paths[i]);
	/* Frozen layers (frozen.c) go on top, mounted as image layers are;
	 * a snapshot one keeps its parent's ids and gets a shift of its own. */
	for (size_t i = 0; sb->frozen && sb->frozen[i]; i++) {
		_cleanup_free_ char *p = sbx__frozen_path(sb->ctx, sb->frozen[i]);
		sbx__msg_add_str(m, T_LAYER, p);
		if (idm->userns >= 0 && sbx__frozen_base(sb->frozen[i]))
			sbx__msg_add_u64(m, T_LAYER_IDMAP, img->n_layers + i);
	}
	_cleanup_free_ char *rw = xasprintf("%s/.mnt", sb->ctx->dir);
	sbx__msg_add_str(m, T_RW_MNT, rw);
	if (o->upper_dir || sb->scratch)
		sbx__msg_add_str(m, T_UPPER_DIR, o->upper_dir ? o->upper_dir : sb->scratch);
	/* A scratch layer dies with the sandbox: nothing in it needs to reach
	 * the disk, and an overlay's syncfs at unmount would commit the whole
	 * btrfs (tens of ms) under every other sandbox's create. */
	if (!o->upper_dir && sb->scratch)
		sbx__msg_add_u64(m, T_VOLATILE, 1);
	sbx__msg_add_u64(m, T_STORAGE_MB, sbx__local_storage_mb(sb->ctx, o));
	char host[64];
	snprintf(host, sizeof(host), "sbx-%s", sb->id);
	sbx__msg_add_str(m, T_HOSTNAME, o->hostname ? o->hostname : host);
	sbx__msg_add_u64(m, T_NETWORK, o->network == SBX_NETWORK_HOST ? 1 : 0);
	if (o->network == SBX_NETWORK_HOST) {
		char *resolv = NULL;
		size_t n;
		if (sbx__read_file(&resolv, &n, "/etc/resolv.conf", 65536, NULL) == 0) {
			sbx__msg_add_str(m, T_RESOLV, resolv);
			free(resolv);
		}
	} else if (o->network == SBX_NETWORK_INTERNET) {
		_cleanup_free_ char *resolv = sbx__net_resolv_conf();
		sbx__msg_add_str(m, T_RESOLV, resolv);
	}
	sbx__msg_add(m, T_SECCOMP, prog, (uint32_t)prog_len);
	const char *wd = o->workdir ? o->workdir : img->config.workdir;
	sbx__msg_add_str(m, T_WORKDIR, wd && *wd ? wd : "/");
	const char *user = o->user ? o->user : img->config.user;
	if (user && *user)
		sbx__msg_add_str(m, T_USER, user);
	sbx__msg_add_u64(m, T_TTL_MS, (uint64_t)o->ttl_s * 1000);
	add_setup_env(m, img, o);
	if (idm->userns >= 0)
		sbx__msg_add_u64(m, T_ID_BASE, idm->base);
	if (idm->userns >= 0 && (o->upper_dir || layer_shifted(sb, idm)))
		sbx__msg_add_u64(m, T_UPPER_IDMAP, 1);
	if (cpu_run)
		sbx__msg_add_u64(m, T_CPU_RUN, 1);
	if (o->net_raw)
		sbx__msg_add_u64(m, T_NET_RAW, 1);
	sbx__msg_add_u64(m, T_NOFILE, o->nofile_max ? o->nofile_max : DEFAULT_NOFILE);
	if (sudo)
		sbx__msg_add_u64(m, T_SUDO, 1);
}

/* Sends M_SETUP with the control listener and the exec cgroup dir. With
 * MSG_DONTWAIT (before init exists) it returns -EAGAIN if the message does
 * not fit in the socket buffer; the caller then sends it after the spawn. */
int sbx__local_send_setup(struct local_sb *sb, int sync, int listener, const struct sbx_idmap *idm,
			  const sbx_image *img, const sbx_sandbox_opts *o, int flags, sbx_error **err)
{
	const void *prog;
	size_t prog_len;
	int sudo;
	int r = sbx__seccomp_program(&prog, &prog_len, err);
	if (r < 0 || (r = sbx__local_sudo_policy(&sudo, img, o, err)) < 0)
		return r;
	/* Most setups fit in 64 KiB; a huge env gets the protocol maximum. */
	size_t cap = 64 * 1024;
	_cleanup_free_ char *buf = xmalloc(cap);
	struct sbx_msg m;
	/* v1 with a CPU quota: the group commands join (init stays out). A
	 * host whose cpu hierarchy is missing has no quota to leave out. */
	struct cg_layout *cgl = sbx__local_cg(sb->ctx);
	_cleanup_close_ int run = o->cpus > 0 && cgl->mode == CG_V1 ? sbx__cg_cpu_run_fd(cgl, sb->id) : -1;
	build_setup(&m, buf, cap, sb, prog, prog_len, img, idm, run >= 0, sudo, o);
	if (m.overflow) {
		cap = SBX_MSG_MAX;
		buf = xrealloc(buf, cap);
		build_setup(&m, buf, cap, sb, prog, prog_len, img, idm, run >= 0, sudo, o);
	}
	/* fds: the listener, then (userns) the namespace and the id slot's
	 * lock (and the upper dir's idmap, then the frozen snapshot layers'),
	 * then the exec cgroup dir if any. */
	int fds[SBX_MSG_MAX_FDS] = { listener }, n = 1;
	_cleanup_close_ int upper_ns = -1;
	_cleanup_close_ int layer_ns0 = -1;
	_cleanup_close_ int layer_ns1 = -1;
	int *layer_ns[FROZEN_MAX_SHIFTED] = { &layer_ns0, &layer_ns1 }, n_layer_ns = 0;
	if (idm->userns >= 0) {
		fds[n++] = idm->userns;
		fds[n++] = idm->lock;
		if (o->upper_dir || layer_shifted(sb, idm)) {
			upper_ns = o->upper_dir ? sbx__idmap_upper_ns(idm->base, err)
						: sbx__idmap_shift_ns(sb->layer_base, idm->base, err);
			if (upper_ns < 0)
				return upper_ns;
			fds[n++] = upper_ns;
		}
		for (size_t i = 0; sb->frozen && sb->frozen[i]; i++) {
			uint32_t from = sbx__frozen_base(sb->frozen[i]);
			if (!from)
				continue;
			if (n_layer_ns == FROZEN_MAX_SHIFTED)
				return sbx_error_set(err, -E2BIG, "sandbox %s: more than %d frozen snapshot layers", sb->id,
						     FROZEN_MAX_SHIFTED);
			if ((*layer_ns[n_layer_ns] = sbx__idmap_shift_ns(from, idm->base, err)) < 0)
				return *layer_ns[n_layer_ns];
			fds[n++] = *layer_ns[n_layer_ns++];
		}
	}
	int cg = sbx__cg_exec_dirfd(sbx__local_cg(sb->ctx), sb->id);
	/* init runs as the slot's root: the exec group is delegated to it, as
	 * a container manager delegates a subtree (its limits stay the host's). */
	if (cg >= 0 && idm->userns >= 0 &&
	    (fchown(cg, idm->base, idm->base) < 0 ||
	     (fchownat(cg, "cgroup.procs", idm->base, idm->base, 0) < 0 && errno != ENOENT))) {
		r = -errno;
		close(cg);
		return sbx_error_setsys(err, r, -r, "delegate the cgroup of sandbox %s to its user namespace", sb->id);
	}
	if (cg >= 0)
		fds[n++] = cg;
	if (run >= 0)
		fds[n++] = run;
	r = sbx__msg_sendf(sync, &m, fds, n, flags);
	if (cg >= 0)
		close(cg);
	if (r == -EAGAIN && (flags & MSG_DONTWAIT))
		return r;
	if (r < 0)
		return sbx_error_setsys(err, r, -r, "send setup to sandbox %s", sb->id);
	return 0;
}

int sbx__local_await_ready(struct local_sb *sb, int sync, sbx_error **err)
{
	char buf[2048];
	int fds[SBX_MSG_MAX_FDS], nfds = 0;
	struct pollfd p = { .fd = sync, .events = POLLIN };
	if (poll(&p, 1, 60000) == 0)
		return sbx_error_set(err, -ETIMEDOUT, "sandbox %s: init did not finish setup in 60 s", sb->id);
	long n = sbx__msg_recv(sync, buf, sizeof(buf), fds, &nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (n <= 0)
		return sbx_error_set(err, -EIO, "sandbox %s: init exited during setup", sb->id);
	if (sbx__msg_type(buf) == M_READY) {
		size_t off = 0;
		uint16_t tag;
		const char *d;
		uint32_t dl;
		while (sbx__msg_next(buf, (size_t)n, &off, &tag, &d, &dl) == 1)
			if (tag == T_MSG)
				SBX_LOGD("local: %s init setup: %.*s", sb->id, (int)dl, d);
		return 0;
	}
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	int e = EIO;
	char msg[1024] = "setup failed";
	while (sbx__msg_next(buf, (size_t)n, &off, &tag, &d, &dl) == 1) {
		if (tag == T_ERRNO)
			e = (int)sbx__msg_u64(d, dl);
		else if (tag == T_MSG)
			snprintf(msg, sizeof(msg), "%.*s", (int)dl, d);
	}
	return sbx_error_set(err, -e, "sandbox %s: %s", sb->id, msg);
}

int sbx__local_send_go(struct local_sb *sb, int sync, sbx_error **err)
{
	int r = sbx__msg_send_simple(sync, M_GO, NULL, 0);
	return r < 0 ? sbx_error_setsys(err, r, -r, "start sandbox %s", sb->id) : 0;
}
