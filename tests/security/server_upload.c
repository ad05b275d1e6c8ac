/* SPDX-License-Identifier: MIT */
/*
 * Escape battery: an authenticated client uploads bodies far larger than the
 * server should ever hold (docs/security.md, "sbx serve"). /files uploads
 * (multipart, and raw chunked octet-stream) and template file tarballs are
 * streamed into their destination, so the server's peak RSS (VmHWM) stays
 * far below the body size; the content arrives intact (sha256 computed here
 * as the body is generated, and by sha256sum in the sandbox); the per-
 * endpoint bounds still answer 413 before the body. The bodies are
 * generated on the fly, never stored on the host.
 */
#include <openssl/evp.h>

#include "server_harness.h"

TestSuite(upload, .init = suite_init, .fini = fini, .timeout = 600);

#define BODY_SIZE (192ull << 20)
#define RSS_SLACK (48ull << 20) /* what the server may grow by: a small fraction of the body */

/* The server's peak resident set (VmHWM), in bytes. */
static unsigned long long vm_hwm(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f);
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	cr_assert_gt(kb, 0);
	return kb << 10;
}

/* A deterministic pseudo-random body of `left` bytes, hashed as it goes. */
struct gen {
	uint64_t x;
	unsigned long long left;
	EVP_MD_CTX *md;
};

static void gen_init(struct gen *g, unsigned long long size)
{
	g->x = 0x9e3779b97f4a7c15ull;
	g->left = size;
	g->md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(g->md, EVP_sha256(), NULL);
}

static size_t gen_read(char *buf, size_t size, size_t n, void *arg)
{
	struct gen *g = arg;
	size_t want = size * n < g->left ? size * n : (size_t)g->left;
	for (size_t i = 0; i < want; i += 8) {
		g->x ^= g->x << 13;
		g->x ^= g->x >> 7;
		g->x ^= g->x << 17;
		size_t k = want - i < 8 ? want - i : 8;
		memcpy(buf + i, &g->x, k);
	}
	EVP_DigestUpdate(g->md, buf, want);
	g->left -= want;
	return want;
}

/* The body's sha256 in hex (out: 65 bytes). */
static void gen_done(struct gen *g, char *out)
{
	unsigned char d[32];
	unsigned n = 0;
	EVP_DigestFinal_ex(g->md, d, &n);
	EVP_MD_CTX_free(g->md);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* Sends the generated body: multipart (one part named "file") or raw
 * chunked octet-stream; returns the status, the reply in *reply (owned). */
static long upload(const char *path, const char *const *hdrs, int multipart, int put, char *sha, char **reply)
{
	struct gen g;
	gen_init(&g, BODY_SIZE);
	struct resp r = { 0 };
	CURL *c = curl_easy_init();
	char url[1024];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", S.port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	struct curl_slist *h = curl_slist_append(NULL, "Expect:");
	for (size_t i = 0; hdrs[i]; i++)
		h = curl_slist_append(h, hdrs[i]);
	curl_mime *mime = NULL;
	if (multipart) {
		mime = curl_mime_init(c);
		curl_mimepart *part = curl_mime_addpart(mime);
		curl_mime_name(part, "file");
		curl_mime_filename(part, "big.bin");
		curl_mime_data_cb(part, (curl_off_t)BODY_SIZE, gen_read, NULL, NULL, &g);
		curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
	} else {
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
		curl_easy_setopt(c, put ? CURLOPT_UPLOAD : CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, gen_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &g);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 300000L);
	curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
	curl_slist_free_all(h);
	curl_mime_free(mime);
	curl_easy_cleanup(c);
	cr_assert_eq(g.left, 0, "the server stopped reading the body with %llu bytes left", g.left);
	gen_done(&g, sha);
	*reply = r.body ? r.body : calloc(1, 1);
	return r.status;
}

static void check_in_sandbox(const struct sbref *a, const char *file, const char *sha)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "stat -c %%s %s; sha256sum %s; rm -f %s", file, file, file);
	char *o = sh(a, cmd);
	char want[200];
	snprintf(want, sizeof(want), "%llu\n%s  %s\n", BODY_SIZE, sha, file);
	cr_assert_str_eq(o, want);
	free(o);
}

Test(upload, uploads_are_streamed_not_buffered)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	char idh[80], tokh[128], kh[200];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", a.id);
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", a.token);
	snprintf(kh, sizeof(kh), "X-API-KEY: %s", S.key);
	unsigned long long base = vm_hwm(S.pid);
	char sha[65], *reply = NULL;

	/* multipart, with a Content-Length */
	const char *mh[] = { idh, tokh, NULL };
	long st = upload("/files?path=/tmp/big", mh, 1, 0, sha, &reply);
	cr_assert_eq(st, 200, "multipart upload: %ld %s", st, reply);
	free(reply);
	unsigned long long hwm = vm_hwm(S.pid);
	fprintf(stderr, "upload: VmHWM %llu MiB before, %llu MiB after a %llu MiB multipart upload\n", base >> 20,
		hwm >> 20, BODY_SIZE >> 20);
	cr_assert_lt(hwm, base + RSS_SLACK, "a %llu MiB multipart upload took the server from %llu to %llu MiB",
		     BODY_SIZE >> 20, base >> 20, hwm >> 20);
	check_in_sandbox(&a, "/tmp/big", sha);

	/* raw octet-stream, chunked (no size announced) */
	const char *oh[] = { idh, tokh, "Content-Type: application/octet-stream", NULL };
	st = upload("/files?path=/tmp/big", oh, 0, 0, sha, &reply);
	cr_assert_eq(st, 200, "octet-stream upload: %ld %s", st, reply);
	free(reply);
	hwm = vm_hwm(S.pid);
	fprintf(stderr, "upload: VmHWM %llu MiB after a chunked one\n", hwm >> 20);
	cr_assert_lt(hwm, base + RSS_SLACK, "a %llu MiB chunked upload took the server from %llu to %llu MiB",
		     BODY_SIZE >> 20, base >> 20, hwm >> 20);
	check_in_sandbox(&a, "/tmp/big", sha);

	/* a template's COPY tarball, stored in the server's state dir */
	const char *th[] = { kh, "Content-Type: application/octet-stream", NULL };
	st = upload("/templates/t1/files/00ff", th, 0, 1, sha, &reply);
	cr_assert_eq(st, 200, "template files upload: %ld %s", st, reply);
	free(reply);
	hwm = vm_hwm(S.pid);
	fprintf(stderr, "upload: VmHWM %llu MiB after a template tarball\n", hwm >> 20);
	cr_assert_lt(hwm, base + RSS_SLACK, "a %llu MiB template upload took the server from %llu to %llu MiB",
		     BODY_SIZE >> 20, base >> 20, hwm >> 20);
	char tar[700];
	snprintf(tar, sizeof(tar), "%s/server/build-files/00ff.tar.gz", S.state);
	struct stat sb;
	cr_assert_eq(stat(tar, &sb), 0);
	cr_assert_eq((unsigned long long)sb.st_size, BODY_SIZE);
	cr_assert_eq(sb.st_mode & 0777, 0600);
	cr_assert(srv_stop(&S));
}

/* Sends a request head; the status answered before any body byte. */
static int status_for_head(const char *head)
{
	int fd = tcp_to_server(NULL);
	send_str(fd, head);
	int st = read_status(fd, 20000);
	close(fd);
	return st;
}

Test(upload, upload_bounds_hold)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	char h[1024];
	/* past the 512 MiB bound: 413 before the body */
	snprintf(h, sizeof(h), "POST /files?path=/tmp/x HTTP/1.1\r\nHost: x\r\nX-Access-Token: %s\r\n"
		 "Content-Type: application/octet-stream\r\nContent-Length: 536870913\r\n\r\n", a.token);
	cr_assert_eq(status_for_head(h), 413);
	snprintf(h, sizeof(h), "PUT /templates/t1/files/00ff HTTP/1.1\r\nHost: x\r\nX-API-KEY: %s\r\n"
		 "Content-Length: 536870913\r\n\r\n", S.key);
	cr_assert_eq(status_for_head(h), 413);
	/* JSON bodies on template URLs are 1 MiB at most, as everywhere */
	snprintf(h, sizeof(h), "POST /templates/t1/builds/b1 HTTP/1.1\r\nHost: x\r\nX-API-KEY: %s\r\n"
		 "Content-Type: application/json\r\nContent-Length: 2097152\r\n\r\n", S.key);
	cr_assert_eq(status_for_head(h), 413);
	/* and still no credentials, no body */
	cr_assert_eq(status_for_head("PUT /templates/t1/files/00ff HTTP/1.1\r\nHost: x\r\nContent-Length: 536870000\r\n\r\n"),
		     401);
	cr_assert(srv_stop(&S));
}

/* A chunked body of many small chunks, sent in bulk: MHD hands the handler
 * the next chunk in the same pass that suspended the connection for the
 * previous one (its chunk loop), while a worker may be resuming it. A second
 * suspend of a suspended connection corrupted MHD's lists ("Resumed
 * connection was already in EREADY set": the server aborted, CI 2026-12-07). */
Test(upload, many_small_chunks_keep_the_server_up)
{
	srv_start(&S, NULL, 0);
	enum { CHUNK = 64, CHUNKS = 65536, BATCH = 4096 };
	int fd = tcp_to_server(NULL);
	/* A server that stops reading without closing fails the test, not hangs it
	 * (bounds far above the seconds this takes under ASan on two busy cores). */
	struct timeval tv = { .tv_sec = 120 };
	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	char h[512];
	snprintf(h, sizeof(h), "PUT /templates/t1/files/00aa HTTP/1.1\r\nHost: x\r\nX-API-KEY: %s\r\n"
		 "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n", S.key);
	send_str(fd, h);
	size_t one = 4 + CHUNK + 2; /* "40\r\n" + data + "\r\n" */
	char *buf = malloc(one * BATCH);
	cr_assert_not_null(buf);
	for (size_t i = 0; i < BATCH; i++) {
		char *p = buf + i * one;
		memcpy(p, "40\r\n", 4);
		memset(p + 4, 'a' + (int)(i % 26), CHUNK);
		memcpy(p + 4 + CHUNK, "\r\n", 2);
	}
	for (int b = 0; b < CHUNKS / BATCH; b++) {
		size_t off = 0, len = one * BATCH;
		while (off < len) {
			ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
			cr_assert_gt(n, 0, "the server stopped reading after %d of %d batches (see %s)", b, CHUNKS / BATCH,
				     S.log);
			off += (size_t)n;
		}
	}
	free(buf);
	send_str(fd, "0\r\n\r\n");
	cr_assert_eq(read_status(fd, 300000), 200, "no answer to a chunked upload (a hung connection? see %s)", S.log);
	close(fd);
	char tar[700];
	snprintf(tar, sizeof(tar), "%s/server/build-files/00aa.tar.gz", S.state);
	struct stat sb;
	cr_assert_eq(stat(tar, &sb), 0);
	cr_assert_eq((unsigned long long)sb.st_size, (unsigned long long)CHUNK * CHUNKS);
	cr_assert_eq(kill(S.pid, 0), 0, "the server died (see %s)", S.log);
	cr_assert(srv_stop(&S));
}
