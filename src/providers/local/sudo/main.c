/* SPDX-License-Identifier: MIT */
/*
 * sbx-sudo: one static binary, embedded in sbx-init and put in every
 * sandbox whose policy allows sudo or whose image ships one (init/sudo.c).
 * As /usr/bin/sudo it is the front end any user runs; started by init with
 * --sbx-broker as the sandbox's root, it is the broker. The broker mode
 * needs root (as anyone else it would grant nothing anyway).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../init/sudo.h"
#include "sudo_int.h"

/* init/user.c, shared with init, reports through these. */
void init_fmt(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
}

void init_append_errno(char *msg, size_t len, int e)
{
	size_t n = strlen(msg);
	if (n < len)
		snprintf(msg + n, len - n, ": %s", strerror(e));
}

int sudo_connect(char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, INIT_SUDO_SOCK, sizeof(INIT_SUDO_SOCK));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	snprintf(err, errlen, "cannot reach the sandbox's sudo broker at %s: %s", INIT_SUDO_SOCK, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--sbx-broker") == 0 && geteuid() == 0)
		return sudo_broker_main(argv[2]);
	return sudo_front_main(argc, argv);
}
