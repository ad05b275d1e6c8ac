/* SPDX-License-Identifier: MIT */
/* Loopback up with one ioctl: no `ip` helper per sandbox. A namespace from
 * the host's pool (nspool.c) arrives with it up already. */
#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "init.h"

int init_loopback_up(char *msg, size_t msglen)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		init_fmt(msg, msglen, "socket for loopback: %s", strerror(errno));
		return -errno;
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	int r = 0;
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (!(ifr.ifr_flags & IFF_UP) &&
	     (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(s, SIOCSIFFLAGS, &ifr) < 0))) {
		r = -errno;
		init_fmt(msg, msglen, "bring loopback up: %s", strerror(errno));
	}
	close(s);
	return r;
}
