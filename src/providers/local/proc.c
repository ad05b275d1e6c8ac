/* SPDX-License-Identifier: MIT */
/* Process identity: (pid, start time) pairs survive pid reuse. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "local_int.h"

uint64_t sbx__proc_starttime(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may contain spaces and parens: fields restart after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p += 2;
	char state = *p;
	if (state == 'Z' || state == 'X')
		return 0;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

int sbx__proc_alive(pid_t pid, uint64_t start)
{
	if (pid <= 0)
		return 0;
	uint64_t now = sbx__proc_starttime(pid);
	return now != 0 && now == start;
}
