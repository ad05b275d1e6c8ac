/* SPDX-License-Identifier: MIT */
/* The host <-> init wire format: records, fds, limits, malformed input. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "providers/local/proto.h"

Test(local_proto, round_trip_with_fds)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	char buf[4096];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), M_EXEC);
	sbx__msg_add_str(&m, T_ARG, "echo");
	sbx__msg_add_str(&m, T_ARG, "");
	sbx__msg_add(&m, T_ARG, "a\0b", 3);
	sbx__msg_add_u64(&m, T_TIMEOUT_MS, 1500);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	int fds[3] = { p[0], p[1], p[1] };
	cr_assert_eq(sbx__msg_send(sv[0], &m, fds, 3), 0);
	char in[4096];
	int got[SBX_MSG_MAX_FDS], n = 0;
	long len = sbx__msg_recv(sv[1], in, sizeof(in), got, &n);
	cr_assert_eq(len, (long)m.len);
	cr_assert_eq(n, 3);
	cr_assert_eq(sbx__msg_type(in), M_EXEC);
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	const char *want[] = { "echo", "", "a\0b" };
	uint32_t wl[] = { 4, 0, 3 };
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(sbx__msg_next(in, (size_t)len, &off, &tag, &d, &dl), 1);
		cr_assert_eq(tag, T_ARG);
		cr_assert_eq(dl, wl[i]);
		cr_assert_eq(memcmp(d, want[i], dl), 0);
	}
	cr_assert_eq(sbx__msg_next(in, (size_t)len, &off, &tag, &d, &dl), 1);
	cr_assert_eq(sbx__msg_u64(d, dl), 1500);
	cr_assert_eq(sbx__msg_next(in, (size_t)len, &off, &tag, &d, &dl), 0);
	/* received fds are live and close-on-exec */
	cr_assert_eq(write(got[1], "x", 1), 1);
	char c;
	cr_assert_eq(read(p[0], &c, 1), 1);
	cr_assert(fcntl(got[0], F_GETFD) & FD_CLOEXEC);
	for (int i = 0; i < n; i++)
		close(got[i]);
	close(sv[0]);
	cr_assert_eq(sbx__msg_recv(sv[1], in, sizeof(in), got, &n), 0, "EOF reads as 0");
}

Test(local_proto, overflow_is_refused_not_truncated)
{
	char buf[64];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), M_EXEC);
	char big[100];
	memset(big, 'a', sizeof(big));
	sbx__msg_add(&m, T_ARG, big, sizeof(big));
	cr_assert_eq(m.overflow, 1);
	cr_assert_eq(sbx__msg_send(0, &m, NULL, 0), -E2BIG);
}

Test(local_proto, malformed_records_are_detected)
{
	char buf[64];
	struct sbx_msg m;
	sbx__msg_init(&m, buf, sizeof(buf), M_PING);
	sbx__msg_add_str(&m, T_MSG, "hello");
	/* claim a longer record than the message holds */
	uint32_t bad = 1000;
	memcpy(buf + sizeof(struct sbx_msg_hdr) + 2, &bad, 4);
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t dl;
	cr_assert_eq(sbx__msg_next(buf, m.len, &off, &tag, &d, &dl), -1);
	/* a datagram whose header lies about its length is -EPROTO */
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	struct sbx_msg_hdr h = { .type = M_PING, .len = 99 };
	cr_assert_eq(write(sv[0], &h, sizeof(h)), (ssize_t)sizeof(h));
	char in[64];
	int fds[SBX_MSG_MAX_FDS], n;
	cr_assert_eq(sbx__msg_recv(sv[1], in, sizeof(in), fds, &n), -EPROTO);
	close(sv[0]);
	close(sv[1]);
}
