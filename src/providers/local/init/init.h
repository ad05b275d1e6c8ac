/* SPDX-License-Identifier: MIT */
/*
 * sbx-init: the static pid 1 of every local sandbox. It is exec'd by the host
 * straight after clone (new mount/pid/net/uts/ipc namespaces), receives its
 * configuration as one M_SETUP message on fd 3, builds the root file system,
 * drops privileges, then serves exec and file requests on a control socket.
 */
#ifndef SBX_INIT_H
#define SBX_INIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define INIT_MAX_LAYERS 128
#define INIT_MAX_ENV 512

struct init_cfg {
	const char *id;
	const char *layers[INIT_MAX_LAYERS]; /* bottom first */
	int n_layers;
	const char *upper_dir;   /* host dir holding upper/ and work/, or NULL for tmpfs */
	int volatile_upper;      /* upper_dir is a scratch layer: overlay `volatile` */
	const char *root_mnt;    /* where the overlay is mounted: rw_mnt, or <rw_mnt>/root on a tmpfs */
	const char *rw_mnt;      /* shared host dir; our private tmpfs goes on it */
	uint64_t storage_mb;
	uint64_t shm_mb;
	const char *hostname;
	int network_host;
	const char *resolv;      /* resolv.conf content (may be empty) */
	const char *seccomp;     /* raw BPF program */
	size_t seccomp_len;
	const char *workdir;
	const char *user;
	char *env[INIT_MAX_ENV]; /* base env, NULL-terminated, owned */
	uint64_t ttl_ms;
	int ctl_fd;              /* listening control socket */
	int cg_fd;               /* pids (v1) or unified (v2) cgroup dir of this sandbox, or -1 */
	int cpu_run_fd;          /* v1 cpu <id>/run/cgroup.procs commands join, or -1 (-2: announced) */
	int userns_fd;           /* user namespace to join after setup, or -1 (userns=host) */
	int slot_fd;             /* flock'ed id slot, kept for life (frees the slot at death) */
	int upper_ns_fd;         /* namespace idmapping the host upper dir, or -1 (-2: announced) */
	int n_layer_ns;          /* layers idmapped by a namespace of their own (T_LAYER_IDMAP) */
	int layer_ns_index[2];   /* which layers (index into layers[]) */
	int layer_ns_fd[2];      /* and their namespaces */
	uint32_t id_base;        /* host id of root inside (with userns_fd) */
	int net_raw;             /* keep CAP_NET_RAW */
	uint64_t nofile;         /* RLIMIT_NOFILE for commands, 0 = inherited */
	int sudo;                /* sudo policy: 1 = any user may run commands as any (sudo.c) */
	int sudo_fd;             /* the sudo broker's listener, or -1 */
};
/* rootfs.c: runs the next file creations as root of the sandbox's id range
 * (on) or as host root again (off); no-op without a user namespace. */
void init_as_sandbox_root(const struct init_cfg *cfg, int on);

/* rootfs.c: mounts, /dev, /proc masks, identity files, pivot_root. 0 or -errno, msg filled. */
int init_rootfs(struct init_cfg *cfg, char *msg, size_t msglen);
/* caps.c: capability drop, no_new_privs, seccomp. 0 or -errno. */
int init_harden(const struct init_cfg *cfg, char *msg, size_t msglen);
/* userns.c: per-netns sysctls that stand in for the capabilities root
 * inside has no more over host-owned namespaces (before /proc/sys is
 * read-only); then joining the user namespace as its root. No-ops without
 * one. 0 or -errno, msg filled. */
void init_userns_sysctls(const struct init_cfg *cfg);
int init_enter_userns(const struct init_cfg *cfg, char *msg, size_t msglen);
/* net.c: bring loopback up. */
int init_loopback_up(char *msg, size_t msglen);

/* user.c: resolves "name|uid[:group|gid]" against the sandbox's /etc files. */
struct init_user {
	uid_t uid;
	gid_t gid;
	gid_t groups[64];
	int n_groups;
	char home[256];
};
int init_user_resolve(struct init_user *u, const char *spec, char *msg, size_t msglen);

/* loop.c: serves the control socket until the TTL ends or forever. */
void init_loop(struct init_cfg *cfg) __attribute__((noreturn));

/* main.c: whether init lowered its oom_score_adj (commands then reset it). */
extern int init_oom_adjusted;
/* main.c: cfg.cpu_run_fd, for spawn.c's children (-1: none). */
extern int init_cpu_run_fd;
/* The one message buffer: the setup message first (its seccomp program is
 * read in place until harden), then each request of the loop. One buffer,
 * not two, keeps init's whole image inside one page-table page. */
extern char init_msgbuf[];
/* main.c: per-request bump memory after the request in init_msgbuf (see
 * there). begin takes the request's length; end frees any spill. */
void init_req_begin(size_t msg_len);
void *init_req_alloc(size_t n);
void init_req_end(void);
/* main.c: gives init an fd table of its own size (see there). */
void init_shrink_fd_table(void);
/* Memory kept for init's lifetime, never freed (the setup's strings). */
void *init_setup_alloc(size_t n);

/* Small helpers shared by the init files. */
void init_fmt(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void init_append_errno(char *msg, size_t len, int e);
uint64_t init_now_ms(void);
uint64_t init_now_us(void);

#endif
