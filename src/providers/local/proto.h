/* SPDX-License-Identifier: MIT */
/*
 * Wire format between the host library and a sandbox's init, over
 * SOCK_SEQPACKET unix sockets (one datagram = one message, fds attached with
 * SCM_RIGHTS). Compiled into both libsbx and the static sbx-init, so it uses
 * no allocation: callers own the buffers.
 *
 * A message is a header {type, len} followed by records {tag u16, len u32,
 * bytes}. Tags may repeat (one T_ARG per argv element).
 */
#ifndef SBX_LOCAL_PROTO_H
#define SBX_LOCAL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define SBX_MSG_MAX (1u << 20)  /* argv + env of one exec must fit in 1 MiB */
#define SBX_MSG_MAX_FDS 8
/* Writable layer of a spec without storage_mb, unless its scratch file
 * system is small (sbx__local_storage_mb); init's size when T_STORAGE_MB is 0. */
#define SBX_LOCAL_STORAGE_MB 10240u

enum sbx_msg_type {
	M_SETUP = 1,  /* host -> init at birth: rootfs and policy; fds: ctl listener, pids cg dir */
	M_READY,      /* init -> host: setup done */
	M_ERROR,      /* any reply: T_ERRNO + T_MSG */
	M_EXEC,       /* host -> init: run a command; fds: stdin, stdout, stderr (none with T_TTY) */
	M_STARTED,    /* init -> host: T_PID (not sent for a T_QUIET exec); fd: with T_TTY
	                 the terminal's master */
	M_EXITED,     /* init -> host: T_STATUS (wait status), T_TIMED_OUT */
	M_SIGNAL,     /* host -> init, on an exec connection: T_SIGNAL */
	M_ROOTFD,     /* host -> init: send an O_PATH fd of the sandbox root */
	M_SET_TTL,    /* host -> init: T_TTL_MS (0 = never) */
	M_PING,       /* host -> init: liveness */
	M_OK,         /* init -> host: done (fds may be attached) */
	M_DETACH,     /* host -> init, on an exec connection: let the command outlive it */
	M_GO,         /* host -> init at birth, after M_SETUP: the state file exists, report M_READY */
	M_SUDO,       /* sandbox sudo -> its broker (init/sudo.c): T_ARG, T_ENV, T_CWD, T_USER;
	                 fds: stdin, stdout, stderr. Replies M_EXITED or M_ERROR; M_SIGNAL relays */
};

enum sbx_msg_tag {
	T_ERRNO = 1, T_MSG, T_PID, T_STATUS, T_TIMED_OUT, T_SIGNAL,
	T_ARG, T_ENV, T_CWD, T_USER, T_TIMEOUT_MS,
	T_LAYER, T_UPPER_DIR, T_STORAGE_MB, T_HOSTNAME, T_NETWORK, T_SECCOMP,
	T_WORKDIR, T_TTL_MS, T_ROOT_MNT, T_RW_MNT, T_RESOLV, T_ID, T_SHM_MB,
	T_QUIET,      /* M_EXEC: no M_STARTED (a blocking exec does not wait for it) */
	T_ID_BASE,    /* M_SETUP: host id of root inside; the fds then carry the
	                 user namespace and the id slot's lock (setup.c) */
	T_NET_RAW,    /* M_SETUP: keep CAP_NET_RAW (spec net_raw) */
	T_NOFILE,     /* M_SETUP: RLIMIT_NOFILE of every command */
	T_UPPER_IDMAP, /* M_SETUP: the fds carry, after the id slot's lock, the
	                  namespace that idmaps the host upper dir (setup.c) */
	T_CPU_RUN,    /* M_SETUP: the last fd is the cgroup.procs commands join
	                 (v1 CPU quota; init stays outside it) */
	T_VOLATILE,   /* M_SETUP: the upper dir is a throwaway scratch layer:
	                 mount the overlay `volatile` (no syncs into it) */
	T_TTY,        /* M_EXEC: run on a terminal made inside; u64 rows << 16 | cols */
	T_SUDO,       /* M_SETUP: the sandbox's sudo policy (1 = nopasswd for every user) */
	T_LAYER_IDMAP, /* M_SETUP: u64 index of a layer (a fork's frozen snapshot)
	                  idmapped by its own shift namespace, not the sandbox's:
	                  the fds carry them in this order, after the upper's */
};

struct sbx_msg {
	char *buf;    /* caller-owned storage */
	size_t cap;
	size_t len;   /* bytes used, header included */
	int overflow; /* set when an add did not fit */
};

struct sbx_msg_hdr {
	uint32_t type;
	uint32_t len;
};

void sbx__msg_init(struct sbx_msg *m, char *buf, size_t cap, uint32_t type);
void sbx__msg_add(struct sbx_msg *m, uint16_t tag, const void *data, uint32_t len);
void sbx__msg_add_str(struct sbx_msg *m, uint16_t tag, const char *s);
void sbx__msg_add_u64(struct sbx_msg *m, uint16_t tag, uint64_t v);

/* Sends one message with up to SBX_MSG_MAX_FDS fds. 0 or -errno (-E2BIG on overflow). */
int sbx__msg_send(int sock, const struct sbx_msg *m, const int *fds, int nfds);
/* The same with extra sendmsg flags (MSG_DONTWAIT: -EAGAIN when it does not fit). */
int sbx__msg_sendf(int sock, const struct sbx_msg *m, const int *fds, int nfds, int flags);
/* Receives one message into buf; fds[] gets attached fds (CLOEXEC), *nfds their count.
 * Returns the message length, 0 on orderly EOF, or -errno (-EPROTO if malformed). */
long sbx__msg_recv(int sock, char *buf, size_t cap, int *fds, int *nfds);

uint32_t sbx__msg_type(const char *buf);
/* Iterates records: returns 1 with tag/data/len set, 0 at the end, -1 if malformed. */
int sbx__msg_next(const char *buf, size_t len, size_t *off, uint16_t *tag, const char **data,
		  uint32_t *dlen);
/* Reads a u64 record body (8 bytes, host order). */
uint64_t sbx__msg_u64(const char *data, uint32_t dlen);

/* Convenience: a two-record error reply / plain reply without records. */
int sbx__msg_send_error(int sock, int errnum, const char *msg);
int sbx__msg_send_simple(int sock, uint32_t type, const int *fds, int nfds);

#endif
