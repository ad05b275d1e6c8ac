/* SPDX-License-Identifier: MIT */
/*
 * envhelper's connection: its WebSocket frames and the commands it runs. One
 * file, because they share the socket: while a command runs, the client's
 * pings are answered and a client that goes away kills the command.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "envhelper.h"

int fd = -1;
pid_t running; /* the process group of the command running, or 0 */
unsigned char in[MSG_MAX + 16];
size_t in_n;

void wr(const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			_exit(0);
		}
		c += w;
		n -= (size_t)w;
	}
}

void ws_send(unsigned op, const void *p, size_t n)
{
	unsigned char h[10];
	size_t hn = 2;
	h[0] = (unsigned char)(0x80 | op);
	if (n < 126) {
		h[1] = (unsigned char)n;
	} else if (n < 65536) {
		h[1] = 126, h[2] = (unsigned char)(n >> 8), h[3] = (unsigned char)n, hn = 4;
	} else {
		h[1] = 127, hn = 10;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
	}
	wr(h, hn);
	wr(p, n);
}

void ws_close(unsigned code)
{
	unsigned char c[2] = { (unsigned char)(code >> 8), (unsigned char)code };
	if (running > 0)
		kill(-running, SIGKILL);
	ws_send(0x8, c, 2);
	_exit(0);
}

double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- frames ------------------------------------------------------------------- */

/* Parses the frame at in[off]: 1 when whole, 0 when more is due; a broken one closes. */
int frame_at(size_t off, struct frame *f)
{
	const unsigned char *b = in + off;
	size_t n = in_n - off, h = 2;
	uint64_t len;
	if (n < 2)
		return 0;
	f->fin = b[0] >> 7, f->op = b[0] & 15;
	len = b[1] & 127;
	if ((b[0] & 0x70) || !(b[1] & 0x80)) /* RSV bits; an unmasked client frame */
		ws_close(1002);
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)b[2] << 8 | b[3], h = 4;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | b[2 + i];
		h = 10;
	}
	if (len > MSG_MAX)
		ws_close(1009);
	if (f->op >= 8 && (len > 125 || !f->fin))
		ws_close(1002);
	f->hdr = h + 4, f->len = (size_t)len;
	return n >= f->hdr + f->len;
}

void frame_unmask(size_t off, const struct frame *f)
{
	unsigned char *m = in + off + f->hdr - 4, *p = in + off + f->hdr;
	for (size_t i = 0; i < f->len; i++)
		p[i] ^= m[i & 3];
}

void drop(size_t off, size_t n)
{
	memmove(in + off, in + off + n, in_n - off - n);
	in_n -= n;
}

/* Reads what the socket has into in[]. Returns 0, or -1 at EOF. */
int fill(void)
{
	if (in_n >= sizeof(in))
		ws_close(1009);
	ssize_t r;
	do
		r = read(fd, in + in_n, sizeof(in) - in_n);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return -1;
	in_n += (size_t)r;
	return 0;
}

/*
 * Answers the control frames in in[] (pings, pongs, a close) and leaves data
 * frames in order for later. Returns -1 when the client closed.
 */
int service_control(void)
{
	struct frame f;
	size_t off = 0;
	while (frame_at(off, &f) == 1) {
		if (f.op < 8) {
			off += f.hdr + f.len;
			continue;
		}
		frame_unmask(off, &f);
		if (f.op == 0x9)
			ws_send(0xA, in + off + f.hdr, f.len);
		if (f.op == 0x8)
			return -1;
		drop(off, f.hdr + f.len);
	}
	return 0;
}

/* ---- commands ----------------------------------------------------------------- */

char out[OUT_MAX + 1];
size_t out_n;

/*
 * Runs `sh -c CMD` in workdir with ENV added, its stdout and stderr into
 * out[] (the first max_output bytes), killed (its whole process group) after
 * TIMEOUT seconds (0: none) or when the client goes away.
 */
void run(const char *cmd, char **env, int nenv, double timeout, struct run *r)
{
	int p[2];
	double t0 = now();
	memset(r, 0, sizeof(*r));
	out_n = 0;
	if (pipe(p) < 0) {
		r->exit_code = 126;
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigaction(SIGPIPE, &dfl, NULL);
		setsid();
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		close(fd);
		for (int i = 0; i < nenv; i++)
			putenv(env[i]);
		if (chdir(workdir) < 0) {
			dprintf(2, "envhelper: cd %s: %s\n", workdir, strerror(errno));
			_exit(127);
		}
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		dprintf(2, "envhelper: /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	close(p[1]);
	running = pid > 0 ? pid : 0;
	int status = 0, exited = pid < 0, eof = 0;
	if (pid < 0)
		status = 126 << 8;
	while (!eof || !exited) {
		if (!exited && waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
		/* a background child keeping the pipe open does not hold the answer */
		struct pollfd fds[2] = { { .fd = eof ? -1 : p[0], .events = POLLIN }, { .fd = fd, .events = POLLIN } };
		int wait_ms = exited ? 0 : 100;
		if (poll(fds, 2, wait_ms) < 0 && errno != EINTR)
			break;
		if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (fill() < 0 || service_control() < 0) {
				if (!exited)
					kill(-pid, SIGKILL);
				_exit(0);
			}
		}
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[65536];
			ssize_t k = read(p[0], buf, sizeof(buf));
			if (k <= 0 && !(k < 0 && errno == EINTR)) {
				eof = 1;
			} else if (k > 0) {
				size_t room = max_output - out_n, take = (size_t)k < room ? (size_t)k : room;
				memcpy(out + out_n, buf, take);
				out_n += take;
				if (take < (size_t)k)
					r->truncated = 1;
			}
		} else if (exited) {
			break; /* exited and nothing more to read now */
		}
		if (!exited && timeout > 0 && now() - t0 > timeout) {
			kill(-pid, SIGKILL);
			r->timed_out = 1;
		}
	}
	close(p[0]);
	running = 0;
	if (WIFEXITED(status))
		r->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		r->exit_code = 128 + WTERMSIG(status);
	r->seconds = now() - t0;
}

