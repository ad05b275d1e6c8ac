/* SPDX-License-Identifier: MIT */
/* The sudo broker's paths and init's hooks (sudo.c; the front-end and the
 * broker process are ../sudo/). */
#ifndef SBX_INIT_SUDO_H
#define SBX_INIT_SUDO_H

#include <sys/types.h>
#include "init.h"

#define INIT_SUDO_BIN "/dev/sbx/sudo"
#define INIT_SUDO_SOCK "/dev/sbx/sudo.sock"
/* The largest request (argv + environment) a client may send. A
 * SOCK_SEQPACKET datagram must fit the sender's socket buffer (208 KiB by
 * default, all an unprivileged process may ask for). */
#define INIT_SUDO_MSG_MAX (192u << 10)

/* After init_rootfs, as host root: installs the front-end and the listener
 * (cfg->sudo_fd) when the policy is on; otherwise cfg->sudo_fd = -1. 0 or
 * -errno with msg set. */
int init_sudo_setup(struct init_cfg *cfg, char *msg, size_t msglen);
/* The listener is readable: starts a broker process (it accepts). Its pid,
 * or -1 when it could not start (retry once a process has exited). */
pid_t init_sudo_spawn(const struct init_cfg *cfg);

#endif
