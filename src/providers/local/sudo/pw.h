/* SPDX-License-Identifier: MIT */
/* One /etc/passwd entry, for the front-end's names, homes and shells (pw.c). */
#ifndef SBX_SUDO_PW_H
#define SBX_SUDO_PW_H

#include <sys/types.h>

struct sudo_pw {
	char name[64];
	uid_t uid;
	gid_t gid;
	char home[256];
	char shell[256];
};

/* By name, or by uid when by_uid (name ignored). 0, or -ENOENT. */
int sudo_pw_find(struct sudo_pw *pw, const char *name, int by_uid, uid_t uid);

#endif
