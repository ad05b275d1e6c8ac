/* SPDX-License-Identifier: MIT */
/* Private to the local provider: host-side structures shared by its files. */
#ifndef SBX_LOCAL_INT_H
#define SBX_LOCAL_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/image.h>
#include <sbx/sys/provider.h>

#define LOCAL_ID_LEN 12
/* How `sbx ls`/`gc` name an orphaned frozen layer (frozen.c). */
#define FROZEN_ID_PREFIX "frz-"

enum cg_mode { CG_NONE = 0, CG_V1 = 1, CG_V2 = 2 };
enum cg_ctrl { CG_MEMORY, CG_PIDS, CG_CPU, CG_N };

struct cg_layout {
	enum cg_mode mode;
	char *root[CG_N];   /* v1: mount point per controller; v2: the unified mount in [0] */
	char *parent;       /* our parent group name below each root ("sbx") */
	char *freezer;      /* v1 freezer mount point, NULL if none (pause) */
};

/* nspool.c: fresh network/UTS/IPC namespaces made ahead of time. */
/* idmap.c: a sandbox's own host id range and the user namespace mapping
 * 0..65535 inside onto it. */
struct sbx_idmap {
	int userns;         /* O_RDONLY fd of the namespace, -1 = none */
	int lock;           /* flock'ed fd of the range's slot; init keeps it */
	uint32_t base;      /* host id of root inside */
};
#define SBX_IDMAP_INIT { .userns = -1, .lock = -1, .base = 0 }
/* A free slot (locked) and a namespace mapping it. 0 or -errno. */
int sbx__idmap_make(struct sbx_idmap *out, sbx_error **err);
void sbx__idmap_close(struct sbx_idmap *m);
/* O_RDONLY fd of a namespace that idmaps a host upper dir for a sandbox of
 * this base (the dir keeps image ids), or -errno. */
int sbx__idmap_upper_ns(uint32_t base, sbx_error **err);
/* Same, for a forked upper dir that stores ids of range from: from+i on disk
 * is to+i to the sandbox (and host root stays host root). */
int sbx__idmap_shift_ns(uint32_t from, uint32_t to, sbx_error **err);
/* The pool of host ids slots come from: SBX_USERNS_RANGE, /etc/subuid's
 * `sbx` entry, or the default. */
int sbx__idmap_range(uint32_t *start, uint32_t *count, sbx_error **err);
/* Host id of root inside the user namespace of pid (0: the host's). */
int sbx__idmap_of_pid(pid_t pid, uint32_t *base);
/* This thread creates files as host id base (root inside) until leave;
 * no-ops for base 0. enter: 0 or -errno (then nothing changed). */
struct sbx_fsid {
	uint32_t base;
	uint32_t caps[6]; /* the thread's capability sets before (capget v3) */
};
int sbx__idmap_enter(uint32_t base, struct sbx_fsid *saved);
void sbx__idmap_leave(const struct sbx_fsid *saved);

struct sbx_nsset {
	int net, uts, ipc;  /* O_RDONLY fds of /proc/.../ns/<kind>, -1 = none */
	struct sbx_idmap id; /* made with the set; unused for userns=host */
};
#define SBX_NSSET_INIT { -1, -1, -1, SBX_IDMAP_INIT }
struct sbx_nspool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int started, stop, failed, kicked;
	unsigned target, n, takes, n_release;
	struct sbx_nsset *items;
	int *release;       /* fds whose last close the thread does */
	pid_t owner;        /* the process whose thread fills the pool */
	uint64_t last_activity_ns; /* last create or destroy (CLOCK_MONOTONIC) */
};
void sbx__nspool_init(struct sbx_nspool *p);
void sbx__nspool_fini(struct sbx_nspool *p);
/* 0 and a set the caller owns, or -1: create the namespaces inline. */
int sbx__nspool_take(struct sbx_nspool *p, struct sbx_nsset *out);
void sbx__nsset_close(struct sbx_nsset *s);
/* Refill now: called when a create is done, so the refill does not compete
 * with the create that emptied a slot. */
void sbx__nspool_kick(struct sbx_nspool *p);
/* Whether the background thread runs (then deferring a release pays). */
int sbx__nspool_active(struct sbx_nspool *p);
/* Closes fd on the background thread if it runs, else now. */
void sbx__nspool_release(struct sbx_nspool *p, int fd);

/* scratch.c: writable layers on disk, a btrfs subvolume with a quota each. */
enum { SCRATCH_TMPFS = 0, SCRATCH_DISK = 1 };
struct sbx_scratch {
	pthread_mutex_t lock;
	int opened, mode, failed, warned;
	int dirfd;          /* <scratch root>/<state dir key>, SCRATCH_DISK only */
	char *state, *dir, *why;
	uint64_t fs_bytes;  /* size of the scratch file system */
};
void sbx__scratch_init(struct sbx_scratch *s, const char *state_dir);
void sbx__scratch_fini(struct sbx_scratch *s);
/* SCRATCH_DISK or SCRATCH_TMPFS for a spec's choice (sets the disk up on
 * first use), or -errno when the disk was asked for and cannot be had. */
int sbx__scratch_mode(struct sbx_scratch *s, sbx_scratch_kind want, sbx_error **err);
uint64_t sbx__scratch_fs_bytes(struct sbx_scratch *s);
/* A subvolume for sandbox id capped at limit bytes; *dir_out its path. */
int sbx__scratch_make(struct sbx_scratch *s, const char *id, uint64_t limit, char **dir_out, sbx_error **err);
/* dst: a copy-on-write snapshot of src's subvolume capped at limit (fork). */
int sbx__scratch_snapshot(struct sbx_scratch *s, const char *src, const char *dst, uint64_t limit,
			  sbx_error **err);
char *sbx__scratch_path(struct sbx_scratch *s, const char *id);
/* dst: a read-only snapshot of src's subvolume (a named snapshot). */
int sbx__scratch_freeze(struct sbx_scratch *s, const char *src, const char *dst, sbx_error **err);
/* 1 removed, 0 nothing there, -errno. Never sets anything up. */
int sbx__scratch_remove(struct sbx_scratch *s, const char *id);
int sbx__scratch_exists(struct sbx_scratch *s, const char *id);
/* An O_DIRECTORY fd of sandbox id's subvolume without setting anything up, or -1. */
int sbx__scratch_open(struct sbx_scratch *s, const char *id);
char **sbx__scratch_list(struct sbx_scratch *s);
/* The storage limit of a spec: its own, else the default for where its
 * writable layer lives. */
struct local_ctx;
unsigned sbx__local_storage_mb(struct local_ctx *c, const sbx_sandbox_opts *o);

struct local_ctx {
	sbx_runtime *rt;
	char *dir;          /* <state>/local */
	struct cg_layout cg_; /* through sbx__local_cg(): detected at first use */
	pthread_mutex_t cg_lock;
	int cg_state;        /* 0 not yet, 1 detected, else the negative errno */
	char *cg_msg;        /* why the detection failed */
	struct sbx_nspool pool;
	struct sbx_scratch scratch;
};

struct local_sb {
	struct local_ctx *ctx;
	char id[LOCAL_ID_LEN + 1];
	char *dir;          /* <state>/local/<id>: files are <dir>.json, <dir>.sock */
	pid_t pid;          /* init, host pid */
	uint64_t start;     /* init's start time (clock ticks) against pid reuse */
	int pidfd;          /* -1 if unavailable */
	int is_child;       /* we created it: we reap it */
	pthread_mutex_t lock;
	int rootfd;         /* O_PATH fd of the sandbox root, lazily fetched */
	int mntns;          /* its mount namespace, held by a creator to release it off the destroy path */
	uint32_t id_base;   /* host id of root inside (0: userns=host); see sbx__local_id_base */
	int id_known;       /* id_base is set (a sandbox opened by id reads it lazily) */
	char *scratch;      /* its writable layer's subvolume (creator only), or NULL */
	unsigned memory_mb;  /* the memory limit (default resolved), for the lazy memcg */
	int mem_joined;      /* init is in its memory group (or has none to join) */
	uint32_t layer_base; /* host id of root inside as the writable layer stores it:
				id_base, or a fork's ancestor's (then an idmapped upper) */
	char **frozen;      /* frozen layers below its own (frozen.c), bottom first; NULL = none */
};
/* local.c: the lifecycle ops (ops.c holds the table) and what gc.c shares:
 * a handle for id (nothing opened), its <dir>.EXT path, and the teardown of
 * everything it holds on the host. */
int sbx__local_init(void **ctx_out, sbx_runtime *rt, sbx_error **err);
void sbx__local_fini(void *ctx);
int sbx__local_create(void **sb_out, char **id_out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err);
int sbx__local_open(void **sb_out, void *ctx, const char *id, sbx_error **err);
int sbx__local_destroy(void *h, sbx_error **err);
void sbx__local_close(void *h);
struct local_sb *sbx__local_sb_new(struct local_ctx *c, const char *id);
char *sbx__local_path_of(const struct local_sb *sb, const char *ext);
int sbx__local_teardown(struct local_sb *sb, sbx_error **err);
/* Whether id has the form of a sandbox id (LOCAL_ID_LEN hex digits). */
int sbx__local_valid_id(const char *id);
/* gc.c: the list and destroy_id ops (orphans included, for GC). */
int sbx__local_list(sbx_sandbox_info **out, size_t *n_out, void *ctx, sbx_error **err);
int sbx__local_info(sbx_sandbox_info *out, void *sb, sbx_error **err);
int sbx__local_destroy_id(void *ctx, const char *id, sbx_error **err);
/* local.c: host id of the sandbox's root (0 for userns=host): files the host
 * creates inside belong to base + the id inside. */
uint32_t sbx__local_id_base(struct local_sb *sb);
/* Before anything makes init spawn user code: its memory group (v1), made
 * at the first exec rather than at create, so an idle sandbox has none. */
int sbx__local_memcg_join(struct local_sb *sb, sbx_error **err);

/* cgroup.c */
int sbx__cg_detect(struct cg_layout *cg, const char *state_dir, sbx_error **err);
void sbx__cg_free(struct cg_layout *cg);
int sbx__cg_create(const struct cg_layout *cg, const char *id, const sbx_sandbox_opts *o,
		   sbx_error **err);
/* v1: makes the sandbox's memory group with its limit and moves init in;
 * called before every exec until it succeeded once (idempotent, race-free
 * between processes). v2 and memory_mb 0: nothing to do. */
int sbx__cg_memory_join(const struct cg_layout *cg, const char *id, unsigned memory_mb, pid_t init,
			sbx_error **err);
/* O_WRONLY fds of the cgroup.procs of every group of the sandbox (init's
 * clone child writes "0" to each to move itself in); returns how many. */
int sbx__cg_procs_fds(const struct cg_layout *cg, const char *id, int fds[CG_N], sbx_error **err);
/* v1 with a CPU quota: O_WRONLY fd of <cpu group>/run/cgroup.procs, where
 * commands go (init stays outside the quota), or -1. */
int sbx__cg_cpu_run_fd(const struct cg_layout *cg, const char *id);
/* O_DIRECTORY fd of the group where init makes per-exec sub-groups, or -1. */
int sbx__cg_exec_dirfd(const struct cg_layout *cg, const char *id);
/* Kills what is left in the groups and removes them (sub-groups first). */
int sbx__cg_remove(const struct cg_layout *cg, const char *id, sbx_error **err);
/* Ids of every sandbox group under our parent (for GC); owned strv. */
char **sbx__cg_list(const struct cg_layout *cg);
const char *sbx__cg_mode_name(enum cg_mode m);
/* The host's cgroup layout, detected (and our parent groups made) at the
 * first call that needs it: a runtime that only opens a sandbox to exec in
 * it (`sbx exec`) reads no mountinfo and makes and removes no group.
 * sbx__local_cg_check() reports a failed detection (SBX_CGROUP names a
 * version that is not mounted); sbx__local_cg() then gives the layout of
 * mode none. */
int sbx__local_cg_check(struct local_ctx *c, sbx_error **err);
struct cg_layout *sbx__local_cg(struct local_ctx *c);
/* Memory limit of a sandbox whose spec sets none (SBX_DEFAULT_MEMORY, else
 * a quarter of the host's RAM within 256 MiB..8 GiB; 0 = none). */
unsigned sbx__cg_default_memory_mb(void);
/* A group's directory for controller c (v2: c = 0), or NULL; owned. */
char *sbx__cg_dir(const struct cg_layout *cg, int c, const char *id);
/* Writes val into dir/file: 0 or -errno. */
int sbx__cg_write_str(const char *dir, const char *file, const char *val);
/* cgroup_spare.c (v1): emptied memory groups kept for the next first exec.
 * take renames a spare to dir (0) or finds none (-1); park renames an empty
 * dir to a spare (0) or leaves it to be removed (-1); drop removes them. */
int sbx__cg_spare_take(const struct cg_layout *cg, const char *dir);
int sbx__cg_spare_park(const struct cg_layout *cg, const char *dir);
/* Counts a create of this process: spares are parked from the second on. */
void sbx__cg_spare_count_create(void);
void sbx__cg_spare_drop(const struct cg_layout *cg);
/* stats.c: the stats op (cgroups and the writable layer, host side only). */
/* The value of "key N" in a flat-keyed file such as DIR/memory.stat: 0, or -1. */
int sbx__cg_read_key(uint64_t *out, const char *dir, const char *file, const char *key);
int sbx__local_stats(sbx_stats *out, void *h, sbx_error **err);
/* The provider's limits op: the cgroup and writable-layer sizes a spec gets. */
int sbx__local_limits(sbx_limits *out, void *ctx, const sbx_sandbox_opts *o, sbx_error **err);
/* local.c: create with the writable layer already made as subvolume id
 * (a fork child) storing ids of layer_base. */
int sbx__local_create_from(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
			   const char *id, uint32_t layer_base, char *const *frozen, sbx_error **err);
/* frozen.c: a fork's frozen layer, shared read-only by its children. A
 * sandbox lists its frozen layers as entries "NAME" (image ids) or
 * "NAME:BASE" (a snapshot storing the ids of range BASE). */
int sbx__frozen_valid(const char *entry);
uint32_t sbx__frozen_base(const char *entry);
char *sbx__frozen_path(struct local_ctx *c, const char *entry);
/* Copies sandbox src_id's upper dir (ids stored from base) into a new
 * frozen layer, held by guard; -E2BIG past max_entries files (<= 0: no
 * limit). */
int sbx__frozen_make(char name[LOCAL_ID_LEN + 1], struct local_ctx *c, const char *src_id, uint32_t base,
		     long max_entries, const char *guard, sbx_error **err);
/* The same as a read-only snapshot of src_id's subvolume (one commit). */
int sbx__frozen_snapshot(char name[LOCAL_ID_LEN + 1], struct local_ctx *c, const char *src_id, const char *guard,
			 sbx_error **err);
/* At most this many frozen layers of one sandbox keep a shifted id base
 * (each takes one more fd in M_SETUP). */
#define FROZEN_MAX_SHIFTED 2
int sbx__frozen_ref(struct local_ctx *c, const char *entry, const char *holder, sbx_error **err);
/* Drops holder's reference; the last one removes the layer. */
void sbx__frozen_unref(struct local_ctx *c, const char *name, const char *holder);
void sbx__frozen_unref_all(struct local_ctx *c, char *const *names, const char *holder);
/* Names of layers no live sandbox or snapshot holds; the one named remove
 * (if among them) is removed. */
char **sbx__frozen_sweep(struct local_ctx *c, const char *remove);
/* GC: the orphans as dead sandboxes "frz-NAME" appended to v; removal of one. */
void sbx__frozen_list(struct local_ctx *c, sbx_sandbox_info **v, size_t *n);
int sbx__frozen_destroy(struct local_ctx *c, const char *name, sbx_error **err);
/* local.c: create with frozen layers (names, bottom first) below a fresh upper. */
int sbx__local_create_frozen(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
			     char *const *frozen, sbx_error **err);

/* snapshot.c: named snapshots and creates from them ("snapshot:NAME"). */
int sbx__local_snapshot(char **name_out, void *sb, const char *name, sbx_error **err);
int sbx__local_snapshot_remove(void *ctx, const char *name, sbx_error **err);
int sbx__local_is_snapshot_image(const char *image);
int sbx__local_create_snapshot(void **sb_out, char **id_out, struct local_ctx *c, const sbx_sandbox_opts *o,
			       sbx_error **err);
/* fork.c: the fork op. */
int sbx__local_fork(void **children, char **ids, size_t n, void *parent, const sbx_sandbox_opts *o,
		    sbx_error **err);

/* seccomp.c: the default filter, compiled at build time (seccomp_gen.c). */
int sbx__seccomp_program(const void **prog, size_t *len, sbx_error **err);

/* spawn.c: starts the embedded init in new namespaces; with ns (from the
 * pool) it joins those instead of creating net, UTS and IPC namespaces. */
struct sbx_spawn_opts {
	int sync_fd;                /* becomes init's fd 3 */
	int net_none;               /* own network namespace (else the host's) */
	const struct sbx_nsset *ns; /* pooled namespaces to join, or NULL */
	const int *cg_procs;        /* cgroup.procs fds the child moves itself into */
	int n_cg;
};
int sbx__init_spawn(pid_t *pid_out, int *pidfd_out, const struct sbx_spawn_opts *so, sbx_error **err);

/* setup.c: the birth handshake with a new init. */
int sbx__local_listen(const char *base, int *fd_out, sbx_error **err);
/* M_SETUP with the listener and the exec cgroup dir; with MSG_DONTWAIT in
 * flags, -EAGAIN (no error set) when it does not fit in the socket now. */
/* sudo_policy.c: the label sbx.sudo (spec over image): *on = 1 for
 * "nopasswd", 0 for "off" or none; -EINVAL naming the label otherwise. */
int sbx__local_sudo_policy(int *on, const sbx_image *img, const sbx_sandbox_opts *o, sbx_error **err);
int sbx__local_send_setup(struct local_sb *sb, int sync, int listener, const struct sbx_idmap *idm,
			  const sbx_image *img, const sbx_sandbox_opts *o, int flags, sbx_error **err);
int sbx__local_send_go(struct local_sb *sb, int sync, sbx_error **err);
int sbx__local_await_ready(struct local_sb *sb, int sync, sbx_error **err);

/* proc.c: process identity helpers. */
uint64_t sbx__proc_starttime(pid_t pid);
int sbx__proc_alive(pid_t pid, uint64_t start);

/* client.c: talking to a sandbox's init. */
int sbx__local_connect(struct local_sb *sb, int *fd_out, sbx_error **err);
int sbx__local_request(struct local_sb *sb, uint32_t type, uint64_t ttl_ms, int *fd_out,
		       sbx_error **err);
int sbx__local_rootfd(struct local_sb *sb, sbx_error **err);

/* process.c: streamed processes (exec.c builds the blocking exec on them). */
struct local_proc;
/* quiet: do not wait for M_STARTED (init does not send it); a failure to
 * start then arrives through sbx__local_proc_poll. */
int sbx__local_proc_start(struct local_proc **out, struct sbx_process_fds *fds, struct local_sb *sb,
			  const sbx_exec_opts *o, int keep_stdin, int quiet, int *start_exit, char *start_msg,
			  size_t msglen, sbx_error **err);
/* 1 exited, 0 still running, <0 error; -ENOENT with *start_exit set when a
 * quiet start failed as "not found / not executable" (start_exit may be NULL). */
int sbx__local_proc_poll(struct local_proc *p, int *status, int *timed_out, int block, int *start_exit,
			 char *start_msg, size_t msglen, sbx_error **err);
int sbx__local_proc_signal(struct local_proc *p, int sig, sbx_error **err);
void sbx__local_proc_free(struct local_proc *p, int kill);
/* Hands the stdout/stderr read ends to the caller, who closes them: the last
 * close of a pipe waits for its mutex, which the sandbox can hold. */
void sbx__local_proc_give_output(struct local_proc *p, int *out_r, int *err_r);
/* The stdin write end now belongs to the caller (sbx_process closes it): the
 * handle forgets it, so freeing the handle cannot close that number again. */
void sbx__local_proc_give_stdin(struct local_proc *p);

/* fsops.c: stat, list, mkdir, rename, remove, chown, path fds */
int sbx__local_stat(sbx_file_info *out, struct local_sb *sb, const char *path, sbx_error **err);
int sbx__local_list_dir(sbx_file_info **out, size_t *n_out, struct local_sb *sb, const char *dir,
			unsigned depth, sbx_error **err);
int sbx__local_mkdir(struct local_sb *sb, const char *path, unsigned mode, sbx_error **err);
int sbx__local_rename(struct local_sb *sb, const char *from, const char *to, sbx_error **err);
int sbx__local_remove(struct local_sb *sb, const char *path, int force, sbx_error **err);
int sbx__local_chown(struct local_sb *sb, const char *path, const char *user, sbx_error **err);
int sbx__local_path_fd(int *fd_out, struct local_sb *sb, const char *path, sbx_error **err);
/* ports.c: a connected socket to 127.0.0.1:port in the sandbox's own network. */
int sbx__local_connect_port(int *fd_out, struct local_sb *sb, unsigned port, sbx_error **err);
/* files.c helpers shared with fsops.c */
int sbx__local_open_in(int root, const char *path, int flags, unsigned mode);
int sbx__local_mkdirs_in(int root, const char *path, sbx_error **err);

/* cgroup_freeze.c */
int sbx__cg_freeze(const struct cg_layout *cg, const char *id, int freeze, sbx_error **err);
/* Thaws the sandbox if a v1 freezer group exists for it (frozen tasks cannot die). */
void sbx__cg_thaw_if_frozen(const struct cg_layout *cg, const char *id);
/* Waits (at most ~100 ms) until a freeze has taken hold. */
void sbx__cg_freeze_settle(const struct cg_layout *cg, const char *id);
/* Whether the sandbox is paused (frozen). */
int sbx__cg_frozen(const struct cg_layout *cg, const char *id);

/* exec.c */
int sbx__local_exec(sbx_exec_result *out, struct local_sb *sb, const sbx_exec_opts *o,
		    sbx_error **err);

/* files.c */
int sbx__local_write_file(struct local_sb *sb, const char *path, const void *data, size_t len,
			  unsigned mode, sbx_error **err);
int sbx__local_read_file(void **data_out, size_t *len_out, struct local_sb *sb, const char *path,
			 size_t max, sbx_error **err);
int sbx__local_upload(struct local_sb *sb, const char *src, const char *dst, sbx_error **err);
int sbx__local_download(struct local_sb *sb, const char *src, const char *dst, sbx_error **err);

/* state.c: the per-sandbox state file. */
struct local_state {
	char *id;
	char *image;
	char *status;       /* "creating", "running" */
	pid_t pid;
	uint64_t start;
	pid_t owner;
	uint64_t owner_start;
	int detach;
	double created;
	double expires;     /* 0 = never */
	char **labels;
	/* The spec, for forks (has_spec = 0 in files older than fork). */
	int has_spec;
	sbx_sandbox_opts spec;  /* image, env, labels unset; workdir/user/hostname owned */
	char **env;
	uint32_t layer_base;
	char **frozen;      /* frozen layers below the writable one, bottom first */
};
int sbx__state_write(const char *path, const struct local_state *st, sbx_error **err);
int sbx__state_read(struct local_state *st, const char *path, sbx_error **err);
void sbx__state_clear(struct local_state *st);

#endif
