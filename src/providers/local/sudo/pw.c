/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's /etc/passwd, read the way init reads it (init/user.c): a
 * static binary has no NSS. Non-blocking, regular files only, at most
 * 4 MiB, long lines cut.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pw.h"

#define PW_MAX_BYTES (4u << 20)

static int parse(struct sudo_pw *pw, char *line, const char *name, int by_uid, uid_t uid)
{
	char *f[7];
	int k = 0;
	f[k++] = line;
	for (char *p = line; *p && k < 7; p++)
		if (*p == ':') {
			*p = '\0';
			f[k++] = p + 1;
		}
	if (k < 6)
		return 0;
	uid_t u = (uid_t)strtoul(f[2], NULL, 10);
	if (by_uid ? u != uid : strcmp(f[0], name) != 0)
		return 0;
	snprintf(pw->name, sizeof(pw->name), "%s", f[0]);
	pw->uid = u;
	pw->gid = (gid_t)strtoul(f[3], NULL, 10);
	snprintf(pw->home, sizeof(pw->home), "%s", f[5]);
	snprintf(pw->shell, sizeof(pw->shell), "%s", k > 6 && *f[6] ? f[6] : "/bin/sh");
	return 1;
}

int sudo_pw_find(struct sudo_pw *pw, const char *name, int by_uid, uid_t uid)
{
	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -ENOENT;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	char buf[8192], line[1024];
	size_t ll = 0, total = 0;
	int found = 0;
	ssize_t n;
	while (!found && total < PW_MAX_BYTES && (n = read(fd, buf, sizeof(buf))) > 0) {
		total += (size_t)n;
		for (ssize_t i = 0; i < n && !found; i++) {
			if (buf[i] != '\n') {
				if (ll + 1 < sizeof(line))
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = '\0';
			found = parse(pw, line, name, by_uid, uid);
			ll = 0;
		}
	}
	if (!found && ll) {
		line[ll] = '\0';
		found = parse(pw, line, name, by_uid, uid);
	}
	close(fd);
	return found ? 0 : -ENOENT;
}
