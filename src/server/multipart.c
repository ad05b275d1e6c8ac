/* SPDX-License-Identifier: MIT */
/*
 * A multipart/form-data parser fed the body as it arrives, in chunks of any
 * size, holding back only what could still be the start of a delimiter (or a
 * part's header block, at most SRV_MP_HEADERS_MAX): its memory is bounded by
 * a constant whatever the body size, and part contents go straight to the
 * caller's callbacks. The grammar is the one envd_files.c accepted when it
 * parsed a buffered body: anything before the first "--boundary" is skipped;
 * after a delimiter "--" ends the body and one CRLF is skipped; a part's
 * headers end at the first CRLFCRLF and its content at the next
 * CRLF "--boundary".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/alloc.h"
#include "server_int.h"

#define MP_SLICE (64u << 10) /* input taken per round, so `pend` stays bounded */

enum mp_state { MP_PREAMBLE, MP_AFTER_DELIM, MP_HEADERS, MP_CONTENT, MP_EPILOGUE, MP_STOPPED };

struct srv_mp {
	enum mp_state st;
	char *delim;                  /* "\r\n--" boundary; the first delimiter lacks the CRLF */
	size_t dl;                    /* strlen(delim) */
	sbx_buf pend;                 /* received, not yet consumed */
	int in_part;                  /* part_begin called, part_end not yet */
	const struct srv_mp_cbs *cbs;
	void *ctx;
};

struct srv_mp *sbx__srv_mp_new(const char *boundary, const struct srv_mp_cbs *cbs, void *ctx)
{
	struct srv_mp *m = xcalloc(1, sizeof(*m));
	m->delim = xasprintf("\r\n--%s", boundary);
	m->dl = strlen(m->delim);
	/* a slice, plus a header block or a delimiter's worth held back */
	sbx__buf_init(&m->pend, MP_SLICE + SRV_MP_HEADERS_MAX + m->dl + 8);
	m->cbs = cbs;
	m->ctx = ctx;
	return m;
}

void sbx__srv_mp_free(struct srv_mp *m)
{
	if (!m)
		return;
	sbx__buf_free(&m->pend);
	free(m->delim);
	free(m);
}

static const char *find(const char *p, size_t n, const char *needle, size_t nl)
{
	return n >= nl ? memmem(p, n, needle, nl) : NULL;
}

/* Consumes what it can of pend; returns the offset consumed, or <0 to stop. */
static long step(struct srv_mp *m)
{
	const char *b = m->pend.data;
	size_t n = m->pend.len, off = 0;
	for (;;) {
		const char *p = b + off, *hit;
		size_t left = n - off;
		switch (m->st) {
		case MP_PREAMBLE:
			/* "--boundary" anywhere, without the CRLF */
			if ((hit = find(p, left, m->delim + 2, m->dl - 2))) {
				off = (size_t)(hit - b) + m->dl - 2;
				m->st = MP_AFTER_DELIM;
				continue;
			}
			if (left > m->dl - 3)
				off = n - (m->dl - 3);
			return (long)off;
		case MP_AFTER_DELIM:
			if (left < 2)
				return (long)off;
			if (p[0] == '-' && p[1] == '-') {
				m->st = MP_EPILOGUE;
				continue;
			}
			if (p[0] == '\r' && p[1] == '\n')
				off += 2;
			m->st = MP_HEADERS;
			continue;
		case MP_HEADERS:
			if (!(hit = find(p, left, "\r\n\r\n", 4))) {
				if (left > SRV_MP_HEADERS_MAX)
					return -E2BIG;
				return (long)off;
			}
			if ((size_t)(hit - p) > SRV_MP_HEADERS_MAX)
				return -E2BIG;
			{
				char *h = xstrndup(p, (size_t)(hit - p));
				int r = m->cbs->part_begin(m->ctx, h);
				free(h);
				if (r < 0)
					return r;
			}
			m->in_part = 1;
			off = (size_t)(hit - b) + 4;
			m->st = MP_CONTENT;
			continue;
		case MP_CONTENT: {
			hit = find(p, left, m->delim, m->dl);
			/* without a delimiter, all but its length less one is content */
			size_t take = hit ? (size_t)(hit - p) : left > m->dl - 1 ? left - (m->dl - 1) : 0;
			if (take) {
				int r = m->cbs->part_data(m->ctx, p, take);
				if (r < 0)
					return r;
			}
			off += take;
			if (!hit)
				return (long)off;
			m->in_part = 0;
			int r = m->cbs->part_end(m->ctx);
			if (r < 0)
				return r;
			off += m->dl;
			m->st = MP_AFTER_DELIM;
			continue;
		}
		case MP_EPILOGUE:
		case MP_STOPPED:
		default:
			return (long)n;
		}
	}
}

int sbx__srv_mp_feed(struct srv_mp *m, const char *data, size_t len)
{
	while (len && m->st != MP_STOPPED) {
		size_t k = len < MP_SLICE ? len : MP_SLICE;
		if (m->st == MP_EPILOGUE)
			return 0;
		if (sbx__buf_append(&m->pend, data, k) < 0) {
			m->st = MP_STOPPED;
			return -E2BIG; /* cannot happen: step() leaves at most the held-back bytes */
		}
		data += k;
		len -= k;
		long off = step(m);
		if (off < 0) {
			m->st = MP_STOPPED;
			return (int)off;
		}
		memmove(m->pend.data, m->pend.data + off, m->pend.len - (size_t)off);
		m->pend.len -= (size_t)off;
		m->pend.data[m->pend.len] = '\0';
	}
	return m->st == MP_STOPPED ? -ECANCELED : 0;
}

int sbx__srv_mp_in_part(const struct srv_mp *m)
{
	return m->in_part;
}
