/* SPDX-License-Identifier: MIT */
/* The streaming multipart parser: the same parts, byte for byte, however the
 * body is cut into chunks (every split point, and a byte at a time), content
 * that looks like a delimiter, a body cut inside a part, bounded headers,
 * and memory that stays bounded for a large part fed at once. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

struct parts {
	char hdr[4][256];
	sbx_buf data[4];
	int n, ended, fail_begin;
};

static int on_begin(void *ctx, const char *h)
{
	struct parts *p = ctx;
	if (p->fail_begin)
		return -EIO;
	cr_assert_lt(p->n, 4);
	snprintf(p->hdr[p->n], sizeof(p->hdr[0]), "%s", h);
	sbx__buf_init(&p->data[p->n], 8u << 20);
	p->n++;
	return 0;
}

static int on_data(void *ctx, const char *d, size_t len)
{
	struct parts *p = ctx;
	cr_assert_gt(p->n, 0);
	cr_assert_eq(sbx__buf_append(&p->data[p->n - 1], d, len), 0);
	return 0;
}

static int on_end(void *ctx)
{
	struct parts *p = ctx;
	p->ended++;
	return 0;
}

static const struct srv_mp_cbs cbs = { on_begin, on_data, on_end };

static void parts_free(struct parts *p)
{
	for (int i = 0; i < p->n; i++)
		sbx__buf_free(&p->data[i]);
}

static const char body[] = "preamble --xy not a delimiter\r\n"
			   "--XyZ\r\n"
			   "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n"
			   "line one\r\n--XyYnot yet\r\n--Xy\r\n-- and --XyZ inside\r\n"
			   "--XyZ\r\n"
			   "Content-Disposition: form-data; name=\"other\"\r\n\r\n"
			   "\r\n\r\n--XyZ--\r\n"
			   "epilogue\r\n--XyZ\r\nignored\r\n\r\n";

static void check_parts(const struct parts *p)
{
	cr_assert_eq(p->n, 2);
	cr_assert_eq(p->ended, 2);
	cr_assert_str_eq(p->hdr[0], "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"");
	cr_assert_str_eq(p->hdr[1], "Content-Disposition: form-data; name=\"other\"");
	const char *c0 = "line one\r\n--XyYnot yet\r\n--Xy\r\n-- and --XyZ inside";
	cr_assert_eq(p->data[0].len, strlen(c0));
	cr_assert_eq(memcmp(p->data[0].data, c0, strlen(c0)), 0);
	cr_assert_eq(p->data[1].len, 2);
	cr_assert_eq(memcmp(p->data[1].data, "\r\n", 2), 0);
}

Test(server_multipart, same_parts_at_every_split)
{
	size_t len = sizeof(body) - 1;
	for (size_t split = 0; split <= len; split++) {
		struct parts p = { 0 };
		struct srv_mp *m = sbx__srv_mp_new("XyZ", &cbs, &p);
		cr_assert_eq(sbx__srv_mp_feed(m, body, split), 0);
		cr_assert_eq(sbx__srv_mp_feed(m, body + split, len - split), 0);
		check_parts(&p);
		cr_assert_eq(sbx__srv_mp_in_part(m), 0);
		sbx__srv_mp_free(m);
		parts_free(&p);
	}
	struct parts p = { 0 };
	struct srv_mp *m = sbx__srv_mp_new("XyZ", &cbs, &p);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(sbx__srv_mp_feed(m, body + i, 1), 0);
	check_parts(&p);
	sbx__srv_mp_free(m);
	parts_free(&p);
}

Test(server_multipart, cut_inside_a_part)
{
	const char *b = "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabcdef\r\n--";
	struct parts p = { 0 };
	struct srv_mp *m = sbx__srv_mp_new("B", &cbs, &p);
	cr_assert_eq(sbx__srv_mp_feed(m, b, strlen(b)), 0);
	cr_assert_eq(p.n, 1);
	cr_assert_eq(p.ended, 0);
	cr_assert_eq(sbx__srv_mp_in_part(m), 1);
	/* what could still be a delimiter is held back, the rest delivered */
	cr_assert_eq(p.data[0].len, 6);
	sbx__srv_mp_free(m);
	parts_free(&p);
}

Test(server_multipart, headers_are_bounded)
{
	size_t n = SRV_MP_HEADERS_MAX + 100;
	char *b = calloc(1, n + 16);
	memcpy(b, "--B\r\nX: ", 8);
	memset(b + 8, 'a', n - 8);
	struct parts p = { 0 };
	struct srv_mp *m = sbx__srv_mp_new("B", &cbs, &p);
	int r = 0;
	for (size_t off = 0; off < n && r == 0; off += 1000)
		r = sbx__srv_mp_feed(m, b + off, n - off < 1000 ? n - off : 1000);
	cr_assert_eq(r, -E2BIG);
	cr_assert_eq(sbx__srv_mp_feed(m, "\r\n\r\n", 4), -ECANCELED);
	cr_assert_eq(p.n, 0);
	sbx__srv_mp_free(m);
	free(b);
}

Test(server_multipart, a_callback_error_stops_it)
{
	struct parts p = { .fail_begin = 1 };
	struct srv_mp *m = sbx__srv_mp_new("XyZ", &cbs, &p);
	cr_assert_eq(sbx__srv_mp_feed(m, body, sizeof(body) - 1), -EIO);
	cr_assert_eq(sbx__srv_mp_feed(m, "x", 1), -ECANCELED);
	sbx__srv_mp_free(m);
}

/* 6 MiB of content in one call: delivered whole, in slices, with the
 * parser's buffer bounded (an append past its bound would fail the feed). */
Test(server_multipart, large_part_in_one_chunk)
{
	size_t clen = 6u << 20;
	const char *head = "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n";
	const char *tail = "\r\n--B--\r\n";
	size_t n = strlen(head) + clen + strlen(tail);
	char *b = malloc(n); /* checksrc: allow (test) */
	memcpy(b, head, strlen(head));
	for (size_t i = 0; i < clen; i++)
		b[strlen(head) + i] = (char)('a' + i % 26);
	memcpy(b + strlen(head) + clen, tail, strlen(tail));
	struct parts p = { 0 };
	struct srv_mp *m = sbx__srv_mp_new("B", &cbs, &p);
	cr_assert_eq(sbx__srv_mp_feed(m, b, n), 0);
	cr_assert_eq(p.n, 1);
	cr_assert_eq(p.ended, 1);
	cr_assert_eq(p.data[0].len, clen);
	cr_assert_eq(memcmp(p.data[0].data, b + strlen(head), clen), 0);
	sbx__srv_mp_free(m);
	parts_free(&p);
	free(b);
}
