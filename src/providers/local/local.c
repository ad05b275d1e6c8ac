/* SPDX-License-Identifier: MIT */
/*
 * The `local` provider: sandboxes from Linux namespaces, overlayfs and
 * cgroups on this host. This file is the lifecycle: create (the order of
 * control socket, cgroups, spawn, state file and the handshake of setup.c),
 * open by id from any process, and destroy; gc.c lists and collects what a
 * crashed process left, ops.c is the ops table. The other files of this
 * directory each own one concern.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
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

int sbx__local_init(void **ctx_out, sbx_runtime *rt, sbx_error **err)
{
	struct local_ctx *c = xcalloc(1, sizeof(*c));
	c->rt = rt;
	c->dir = xasprintf("%s/local", sbx_runtime_state_dir(rt));
	_cleanup_free_ char *mnt = xasprintf("%s/.mnt", c->dir);
	int r = sbx__mkdir_p(mnt, 0700, err);
	if (r < 0) {
		free(c->dir);
		free(c);
		return r;
	}
	pthread_mutex_init(&c->cg_lock, NULL);
	sbx__nspool_init(&c->pool);
	sbx__scratch_init(&c->scratch, c->dir);
	*ctx_out = c;
	return 0;
}

void sbx__local_fini(void *ctx)
{
	struct local_ctx *c = ctx;
	if (!c)
		return;
	sbx__nspool_fini(&c->pool);
	sbx__scratch_fini(&c->scratch);
	sbx__cg_free(&c->cg_);
	pthread_mutex_destroy(&c->cg_lock);
	free(c->cg_msg);
	free(c->dir);
	free(c);
}

struct local_sb *sbx__local_sb_new(struct local_ctx *c, const char *id)
{
	struct local_sb *sb = xcalloc(1, sizeof(*sb));
	sb->ctx = c;
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	sb->dir = xasprintf("%s/%s", c->dir, id); /* files are <dir>.json and <dir>.sock */
	sb->pidfd = -1;
	sb->rootfd = -1;
	sb->mntns = -1;
	pthread_mutex_init(&sb->lock, NULL);
	return sb;
}

/* 1 when init is in its memory group already (a first exec from another
 * process made it): the memory line of /proc/PID/cgroup ends in /<id>. The
 * limit was written before init moved in, so an exec from a new process
 * (`sbx exec`) needs no cgroup detection, mkdir, limit or move. */
static int memcg_joined_already(const struct local_sb *sb)
{
	char path[64], *data = NULL;
	size_t n = 0;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)sb->pid);
	if (sbx__read_file(&data, &n, path, 1 << 16, NULL) < 0)
		return 0;
	int yes = 0;
	size_t il = strlen(sb->id);
	for (char *line = data, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		int mem = 0;
		for (char *t = c1 + 1, *comma; t; t = comma ? comma + 1 : NULL) {
			comma = strchr(t, ',');
			size_t len = comma ? (size_t)(comma - t) : strlen(t);
			mem |= len == 6 && !strncmp(t, "memory", 6);
		}
		const char *g = c2 + 1;
		size_t gl = strlen(g);
		if (mem)
			yes = gl > il && g[gl - il - 1] == '/' && !strcmp(g + gl - il, sb->id);
	}
	free(data);
	return yes;
}

int sbx__local_memcg_join(struct local_sb *sb, sbx_error **err)
{
	if (__atomic_load_n(&sb->mem_joined, __ATOMIC_ACQUIRE))
		return 0;
	/* A destroyed sandbox must not get its group back (nor a reused pid). */
	if (!sbx__proc_alive(sb->pid, sb->start))
		return sbx_error_set(err, -ESRCH, "sandbox %s is not running", sb->id);
	if (memcg_joined_already(sb)) {
		__atomic_store_n(&sb->mem_joined, 1, __ATOMIC_RELEASE);
		return 0;
	}
	int r = sbx__cg_memory_join(sbx__local_cg(sb->ctx), sb->id, sb->memory_mb, sb->pid, err);
	if (r == 0)
		__atomic_store_n(&sb->mem_joined, 1, __ATOMIC_RELEASE);
	return r;
}

uint32_t sbx__local_id_base(struct local_sb *sb)
{
	if (!sb->id_known) {
		uint32_t b = 0;
		if (sbx__idmap_of_pid(sb->pid, &b) == 0) {
			sb->id_base = b;
			sb->id_known = 1;
		}
	}
	return sb->id_base;
}

void sbx__local_close(void *h)
{
	struct local_sb *sb = h;
	if (!sb)
		return;
	if (sb->rootfd >= 0)
		close(sb->rootfd);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	if (sb->mntns >= 0)
		close(sb->mntns); /* the sandbox lives on: init holds its own reference */
	pthread_mutex_destroy(&sb->lock);
	sbx__strv_free(sb->frozen);
	free(sb->scratch);
	free(sb->dir);
	free(sb);
}

/* Kills init (and so the whole pid namespace) and waits until it is gone. */
static void kill_init(struct local_sb *sb)
{
	if (sb->pid <= 0)
		return;
	if (sb->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
	else if (sbx__proc_alive(sb->pid, sb->start))
		kill(sb->pid, SIGKILL);
	if (sb->is_child) {
		while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
			;
	} else if (sb->pidfd >= 0) {
		struct pollfd p = { .fd = sb->pidfd, .events = POLLIN };
		poll(&p, 1, 10000);
	} else {
		for (int i = 0; i < 10000 && sbx__proc_alive(sb->pid, sb->start); i++)
			usleep(1000);
	}
	sb->pid = 0;
}

/* Holds init's mount namespace so its teardown can leave the destroy path
 * (nspool.c), when the background thread runs and fds are not scarce. */
static void hold_mntns(struct local_sb *sb)
{
	if (!sbx__nspool_active(&sb->ctx->pool))
		return;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)sb->pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct rlimit rl;
	if (fd >= 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && (rlim_t)fd > rl.rlim_cur / 2) {
		close(fd);
		fd = -1;
	}
	sb->mntns = fd;
}

char *sbx__local_path_of(const struct local_sb *sb, const char *ext)
{
	return xasprintf("%s.%s", sb->dir, ext);
}

/* Everything a sandbox holds on the host, in reverse order of creation: init
 * (its death takes every process, mount and namespace inside with it), its
 * network links, its writable layer on disk, the cgroups, the socket, and
 * last the state file, so a teardown cut short is still listed and finished
 * by GC. */
int sbx__local_teardown(struct local_sb *sb, sbx_error **err)
{
	if (sb->rootfd >= 0) {
		close(sb->rootfd);
		sb->rootfd = -1;
	}
	double t0 = sbx__now_mono();
	sbx__cg_thaw_if_frozen(sbx__local_cg(sb->ctx), sb->id);
	kill_init(sb);
	/* Every process is gone; the kernel frees the mount tree when the
	 * background thread drops this last reference (nspool.c). */
	sbx__nspool_release(&sb->ctx->pool, sb->mntns);
	sb->mntns = -1;
	double t1 = sbx__now_mono();
	int r = sbx__net_detach(sb->dir, sb->id, err);
	if (r == 0 && (r = sbx__scratch_remove(&sb->ctx->scratch, sb->id)) < 0)
		sbx_error_setsys(err, r, -r, "remove the writable layer of sandbox %s", sb->id);
	if (r >= 0) {
		sbx__frozen_unref_all(sb->ctx, sb->frozen, sb->id);
		sbx__strv_free(sb->frozen);
		sb->frozen = NULL;
	}
	if (r >= 0)
		r = sbx__cg_remove(sbx__local_cg(sb->ctx), sb->id, err);
	if (r < 0)
		return r;
	double t2 = sbx__now_mono();
	_cleanup_free_ char *sock = sbx__local_path_of(sb, "sock");
	_cleanup_free_ char *state = sbx__local_path_of(sb, "json");
	if ((unlink(sock) < 0 && errno != ENOENT) || (unlink(state) < 0 && errno != ENOENT))
		return sbx_error_setsys(err, -errno, errno, "remove state of sandbox %s", sb->id);
	SBX_LOGD("local: teardown %s: kill %.2f ms, cgroups %.2f ms, files %.2f ms", sb->id, (t1 - t0) * 1e3,
		 (t2 - t1) * 1e3, (sbx__now_mono() - t2) * 1e3);
	return 0;
}

static int write_state(struct local_sb *sb, const sbx_sandbox_opts *o, sbx_error **err)
{
	struct local_state st = {
		.id = sb->id,
		.image = (char *)o->image,
		.status = (char *)"running",
		.pid = sb->pid,
		.start = sb->start,
		.owner = getpid(),
		.owner_start = sbx__proc_starttime(getpid()),
		.detach = o->detach,
		.created = sbx__now_real(),
		.labels = (char **)o->labels,
		.has_spec = 1,
		.spec = *o,
		.env = (char **)o->env,
		.layer_base = sb->layer_base,
		.frozen = sb->frozen,
	};
	st.expires = o->ttl_s ? st.created + o->ttl_s : 0;
	_cleanup_free_ char *path = sbx__local_path_of(sb, "json");
	return sbx__state_write(path, &st, err);
}

/* Takes a reference on each frozen layer below sb's own: its writable
 * layer exists by now, so a sweep sees the holder alive. */
static int hold_frozen(struct local_sb *sb, char *const *frozen, sbx_error **err)
{
	for (size_t i = 0; frozen && frozen[i]; i++) {
		int r = sbx__frozen_ref(sb->ctx, frozen[i], sb->id, err);
		if (r < 0)
			return r;
		sbx__strv_push(&sb->frozen, frozen[i]);
	}
	return 0;
}

/* preset: the id whose writable layer a fork already made (storing ids of
 * layer_base), else NULL for a fresh id and layer. frozen: frozen layers
 * (frozen.c) between the image and the writable layer. */
static int create_impl(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
		       const char *preset, uint32_t layer_base, char *const *frozen, sbx_error **err)
{
	if (geteuid() != 0)
		return sbx_error_set(err, -EPERM,
				     "local: sandboxes need root (namespaces, overlayfs, cgroups); run as root");
	sbx_image *img = NULL;
	int r = sbx_image_get(&img, c->rt, o->image, err);
	if (r < 0)
		return r;
	char id[LOCAL_ID_LEN + 1];
	if (preset)
		snprintf(id, sizeof(id), "%s", preset);
	else
		sbx__random_hex(id, LOCAL_ID_LEN);
	struct local_sb *sb = sbx__local_sb_new(c, id);
	int listener = -1, sync[2] = { -1, -1 }, cg_procs[CG_N], n_cg = 0;
	struct sbx_nsset ns = SBX_NSSET_INIT;
	double t0 = sbx__now_mono(), t_stage = 0, t_spawn = 0, t_state = 0;
	/* Order matters for GC: the control socket comes first (while it
	 * accepts connections, GC leaves the id alone), then the cgroups (GC
	 * kills what is in groups without a live socket or state file), init
	 * moves itself into them before it runs, and the state file with init's
	 * pid follows the spawn. init finds its setup already queued on fd 3,
	 * so it builds the root while we write the state file. Teardown removes
	 * everything in the reverse order. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sync) < 0) {
		r = sbx_error_setsys(err, -errno, errno, "socketpair");
		goto out;
	}
	int pooled = sbx__nspool_take(&c->pool, &ns) == 0;
	if (o->userns == SBX_USERNS_HOST)
		sbx__idmap_close(&ns.id);
	else if (ns.id.userns < 0 && (r = sbx__idmap_make(&ns.id, err)) < 0)
		goto out;
	sb->id_base = ns.id.base;
	sb->id_known = 1;
	sb->layer_base = preset ? layer_base : ns.id.base;
	if ((r = sbx__local_cg_check(c, err)) < 0 || (r = sbx__local_listen(sb->dir, &listener, err)) < 0 ||
	    (r = sbx__cg_create(sbx__local_cg(c), id, o, err)) < 0 ||
	    (r = n_cg = sbx__cg_procs_fds(sbx__local_cg(c), id, cg_procs, err)) < 0)
		goto out;
	/* The writable layer on disk unless the spec brings its own (builds). */
	if (preset) {
		sb->scratch = sbx__scratch_path(&c->scratch, id);
	} else if (!o->upper_dir) {
		int kind = sbx__scratch_mode(&c->scratch, o->scratch, err);
		if (kind < 0) {
			r = kind;
			goto out;
		}
		if (kind == SCRATCH_DISK &&
		    (r = sbx__scratch_make(&c->scratch, id, (uint64_t)sbx__local_storage_mb(c, o) << 20,
					   &sb->scratch, err)) < 0)
			goto out;
	}
	if ((r = hold_frozen(sb, frozen, err)) < 0)
		goto out;
	int sent = sbx__local_send_setup(sb, sync[0], listener, &ns.id, img, o, MSG_DONTWAIT, err);
	if (sent < 0 && sent != -EAGAIN) {
		r = sent;
		goto out;
	}
	t_stage = sbx__now_mono();
	struct sbx_spawn_opts so = { .sync_fd = sync[1], .net_none = o->network != SBX_NETWORK_HOST,
				     .ns = pooled ? &ns : NULL, .cg_procs = cg_procs, .n_cg = n_cg };
	r = sbx__init_spawn(&sb->pid, &sb->pidfd, &so, err);
	close(sync[1]);
	sync[1] = -1;
	if (r < 0)
		goto out;
	sb->is_child = 1;
	sb->memory_mb = o->memory_mb ? o->memory_mb : sbx__cg_default_memory_mb();
	t_spawn = sbx__now_mono();
	sb->start = sbx__proc_starttime(sb->pid);
	hold_mntns(sb);
	if ((r = write_state(sb, o, err)) < 0)
		goto out;
	if (o->network == SBX_NETWORK_INTERNET && (r = sbx__net_attach(sb->dir, id, sb->pid, o, err)) < 0)
		goto out;
	t_state = sbx__now_mono();
	if (sent < 0 && (r = sbx__local_send_setup(sb, sync[0], listener, &ns.id, img, o, 0, err)) < 0)
		goto out;
	/* init reports ready only after this: a creator killed before its state
	 * file exists leaves an init that exits instead of an unrecorded one. */
	if ((r = sbx__local_send_go(sb, sync[0], err)) < 0)
		goto out;
	if ((r = sbx__local_await_ready(sb, sync[0], err)) < 0)
		goto out;
	SBX_LOGD("local: created %s (init pid %d, image %s) in %.2f ms: cgroups+setup %.2f, spawn %.2f, "
		 "state %.2f, init setup %.2f%s%s", id, (int)sb->pid, o->image, (sbx__now_mono() - t0) * 1e3,
		 (t_stage - t0) * 1e3, (t_spawn - t_stage) * 1e3, (t_state - t_spawn) * 1e3,
		 (sbx__now_mono() - t_state) * 1e3, pooled ? ", pooled namespaces" : "",
		 sent < 0 ? ", setup sent late" : "");
	*id_out = xstrdup(id);
	*sb_out = steal_ptr(&sb);
out:
	sbx__nsset_close(&ns);
	while (n_cg > 0)
		close(cg_procs[--n_cg]);
	if (listener >= 0)
		close(listener);
	if (sync[0] >= 0)
		close(sync[0]);
	if (sync[1] >= 0)
		close(sync[1]);
	if (sb) {
		sbx__local_teardown(sb, NULL);
		sbx__local_close(sb);
	}
	sbx_image_free(img);
	sbx__nspool_kick(&c->pool);
	return r;
}

int sbx__local_create(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *o,
			sbx_error **err)
{
	if (sbx__local_is_snapshot_image(o->image))
		return sbx__local_create_snapshot(sb_out, id_out, ctx, o, err);
	return create_impl(sb_out, id_out, ctx, o, NULL, 0, NULL, err);
}

int sbx__local_create_from(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
			   const char *id, uint32_t layer_base, char *const *frozen, sbx_error **err)
{
	return create_impl(sb_out, id_out, c, o, id, layer_base, frozen, err);
}

int sbx__local_create_frozen(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
			     char *const *frozen, sbx_error **err)
{
	return create_impl(sb_out, id_out, c, o, NULL, 0, frozen, err);
}

int sbx__local_valid_id(const char *id)
{
	return strlen(id) == LOCAL_ID_LEN && strspn(id, "0123456789abcdef") == LOCAL_ID_LEN;
}

int sbx__local_open(void **sb_out, void *ctx, const char *id, sbx_error **err)
{
	struct local_ctx *c = ctx;
	if (!sbx__local_valid_id(id))
		return sbx_error_set(err, -ENOENT, "no sandbox '%s' (ids are %d hex digits)", id, LOCAL_ID_LEN);
	struct local_sb *sb = sbx__local_sb_new(c, id);
	struct local_state st;
	_cleanup_free_ char *path = sbx__local_path_of(sb, "json");
	int r = sbx__state_read(&st, path, NULL);
	if (r < 0) {
		sbx__local_close(sb);
		return sbx_error_set(err, -ENOENT, "no sandbox '%s' in %s", id, c->dir);
	}
	sb->pid = st.pid;
	sb->start = st.start;
	sb->frozen = steal_ptr(&st.frozen);
	sb->memory_mb = st.spec.memory_mb ? st.spec.memory_mb : sbx__cg_default_memory_mb();
	sbx__state_clear(&st);
	if (!sbx__proc_alive(sb->pid, sb->start)) {
		sbx__local_close(sb);
		return sbx_error_set(err, -ESRCH, "sandbox %s is not running (run 'sbx gc' to remove it)", id);
	}
	sb->pidfd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
	/* The pid could have been reused between the check and the open. */
	if (sb->pidfd >= 0 && !sbx__proc_alive(sb->pid, sb->start)) {
		sbx__local_close(sb);
		return sbx_error_set(err, -ESRCH, "sandbox %s is not running", id);
	}
	*sb_out = sb;
	return 0;
}

int sbx__local_destroy(void *h, sbx_error **err)
{
	struct local_sb *sb = h;
	int r = sbx__local_teardown(sb, err);
	if (r == 0)
		SBX_LOGD("local: destroyed %s", sb->id);
	return r;
}
