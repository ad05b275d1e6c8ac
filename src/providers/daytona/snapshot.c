/* SPDX-License-Identifier: MIT */
/*
 * Task images on Daytona as digest-named snapshots (the provider
 * description's task_image, desc.c). A task's environment/ becomes the
 * snapshot `sbx-<task>-<12 hex>`, the hex a digest of the Dockerfile text
 * and the content of the whole context (paths, modes, bytes: no times, so
 * every checkout of the same task names the same snapshot). It is looked
 * up first (`GET /snapshots/{name}`: active = cached; pending or building
 * = another process is building it, wait); when missing, the context goes
 * up as one tar through Daytona's object storage as the SDK does it
 * (`GET /object-storage/push-access` for temporary S3 credentials,
 * ListObjectsV2 of <org>/<hash>/, PutObject of <org>/<hash>/context.tar,
 * signed with SigV4: util/sigv4.c), then `POST /snapshots` with buildInfo
 * {dockerfileContent, contextHashes} and polling until `active`. Episodes
 * then create from `snapshot:NAME`. The Daytona key never goes to the
 * object store; the temporary secret is registered for redaction.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../templates/dockerfile.h"
#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/http.h"
#include "../../util/lazy.h"
#include "../../util/log.h"
#include "../../util/sha256.h"
#include "../../util/sigv4.h"
#include "../../util/str.h"
#include "../../util/tree_tar.h"
#include "daytona_int.h"

#define DOCKERFILE_MAX (1u << 20)
#define CONTEXT_MAX (512u << 20)
#define S3_TIMEOUT_MS 600000L
#define DEFAULT_BUILD_TIMEOUT_S 3600.0
#define SNAP_RETRIES 5 /* waits 1+2+4+8+16 s */

static double now_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void logline(const sbx_task_env *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logline(const sbx_task_env *env, const char *fmt, ...)
{
	if (!env->on_output)
		return;
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = xvasprintf(fmt, ap);
	va_end(ap);
	_cleanup_free_ char *line = xasprintf("%s\n", m);
	env->on_output(2, line, strlen(line), env->payload);
}

char *sbx__dtn_snapshot_name(const char *slug, const char *dockerfile, const char *ctx_hash)
{
	const char *parts[] = { "sbx-daytona-snapshot-v1", dockerfile, ctx_hash ? ctx_hash : "" };
	EVP_MD_CTX *md = sbx__sha256_new();
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		EVP_DigestUpdate(md, parts[i], strlen(parts[i]) + 1);
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_final_hex(md, hex);
	EVP_MD_CTX_free(md);
	_cleanup_free_ char *s = xstrndup(slug && *slug ? slug : "task", 40);
	for (char *c = s; *c; c++)
		*c = isalnum((unsigned char)*c) || *c == '-' || *c == '.' || *c == '_' ? (char)tolower((unsigned char)*c)
										: '-';
	return xasprintf("sbx-%s-%.12s", s, hex);
}

/* Hands an error made with a private pointer to the caller's. */
static void pass_error(sbx_error **err, sbx_error *e)
{
	if (err && !*err)
		*err = e;
	else
		sbx_error_free(e);
}

/* ---- object storage ---------------------------------------------------------- */

struct push {
	char *ak, *secret, *token, *url, *org, *bucket, *region;
};

static void push_clear(struct push *p)
{
	if (p->secret)
		explicit_bzero(p->secret, strlen(p->secret));
	if (p->token)
		explicit_bzero(p->token, strlen(p->token));
	free(p->ak), free(p->secret), free(p->token), free(p->url), free(p->org), free(p->bucket), free(p->region);
	memset(p, 0, sizeof(*p));
}

static int push_access(struct push *p, struct dtn_ctx *c, sbx_error **err)
{
	json_t *j = NULL;
	int r = sbx__dtn_call(&j, c, "GET", "/object-storage/push-access", NULL, 0, "object storage push-access", err);
	if (r < 0)
		return r;
	const char *k[] = { "accessKey", "secret", "sessionToken", "storageUrl", "organizationId", "bucket", "region" };
	char **dst[] = { &p->ak, &p->secret, &p->token, &p->url, &p->org, &p->bucket, &p->region };
	for (size_t i = 0; i < 7; i++) {
		const char *v = json_string_value(json_object_get(j, k[i]));
		if (!v || (!*v && i != 6)) {
			json_decref(j);
			push_clear(p);
			return sbx_error_set(err, -EPROTO, "daytona: object storage push-access: no %s in the reply", k[i]);
		}
		*dst[i] = xstrdup(v);
	}
	json_decref(j);
	if (!*p->region) {
		free(p->region);
		p->region = xstrdup("us-east-1");
	}
	size_t n = strlen(p->url);
	while (n && p->url[n - 1] == '/')
		p->url[--n] = '\0';
	sbx__redact_add(p->secret);
	sbx__redact_add(p->token);
	return 0;
}

/* <Tag>text</Tag> of an XML reply. Owned or NULL. */
static char *xml_text(const char *xml, const char *tag)
{
	_cleanup_free_ char *open = xasprintf("<%s>", tag), *close = xasprintf("</%s>", tag);
	const char *a = xml ? strstr(xml, open) : NULL;
	const char *b = a ? strstr(a, close) : NULL;
	return a && b ? xstrndup(a + strlen(open), (size_t)(b - a - strlen(open))) : NULL;
}

/* One signed S3 request: path under the storage URL, query as sent. */
static int s3(sbx_buf *resp, long *status, const struct push *p, const char *method, const char *key,
	      const char *query, const void *body, size_t len, sbx_error **err)
{
	const char *hs = strstr(p->url, "://");
	hs = hs ? hs + 3 : p->url;
	size_t hl = strcspn(hs, "/");
	_cleanup_free_ char *host = xstrndup(hs, hl);
	_cleanup_free_ char *ekey = sbx__sigv4_uri_encode(key, 1);
	_cleanup_free_ char *path = xasprintf("%s/%s/%s", hs + hl, p->bucket, ekey);
	_cleanup_free_ char *url = xasprintf("%.*s%s%s%s", (int)(hs - p->url + hl), p->url, path, query ? "?" : "",
					     query ? query : "");
	char hash[SBX_SHA256_HEX_LEN + 1], date[17];
	sbx__sha256_hex(hash, body ? body : "", len);
	sbx__sigv4_now(date);
	_cleanup_free_ char *h_host = xasprintf("host: %s", host), *h_sha = xasprintf("x-amz-content-sha256: %s", hash);
	_cleanup_free_ char *h_date = xasprintf("x-amz-date: %s", date);
	_cleanup_free_ char *h_tok = xasprintf("x-amz-security-token: %s", p->token);
	const char *sign[] = { h_host, h_sha, h_date, h_tok, NULL };
	char sig[65];
	_cleanup_free_ char *signed_h = NULL;
	struct sbx_sigv4 s = { .method = method, .path = path, .query = query, .headers = sign, .payload_hash = hash,
			       .amz_date = date, .region = p->region, .service = "s3", .secret = p->secret };
	int r = sbx__sigv4_sign(sig, NULL, &signed_h, &s, err);
	if (r < 0)
		return r;
	char day[9];
	memcpy(day, date, 8);
	day[8] = '\0';
	_cleanup_free_ char *auth = xasprintf("Authorization: " SBX_SIGV4_ALGO " Credential=%s/%s/%s/s3/aws4_request, "
					      "SignedHeaders=%s, Signature=%s",
					      p->ak, day, p->region, signed_h, sig);
	const char *lines[] = { auth, h_sha, h_date, h_tok, "Content-Type: application/x-tar", "Expect:", NULL };
	sbx_http_req rq = { .method = method, .url = url, .headers = lines, .body = body, .body_len = len,
			    .timeout_ms = S3_TIMEOUT_MS, .resp = resp };
	resp->len = 0;
	r = sbx__http_perform(&rq, err);
	explicit_bzero(auth, strlen(auth));
	explicit_bzero(h_tok, strlen(h_tok));
	if (r < 0)
		return sbx_error_prefix(err, r, "daytona: object storage");
	*status = rq.status;
	if (rq.status >= 200 && rq.status < 300)
		return 0;
	_cleanup_free_ char *code = xml_text(resp->data, "Code"), *msg = xml_text(resp->data, "Message");
	return sbx_error_set(err, rq.status == 403 ? -EACCES : rq.status == 404 ? -ENOENT : -EIO,
			     "daytona: object storage: %s %s/%s: HTTP %ld %s%s%s", method, p->bucket, key, rq.status,
			     code ? code : "", msg ? ": " : "", msg ? msg : "");
}

/* Uploads the context tar as <org>/<hash>/context.tar unless it is there. */
static int upload_context(struct dtn_ctx *c, const sbx_task_env *env, const char *hash, sbx_error **err)
{
	struct push p = { 0 };
	int r = push_access(&p, c, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *prefix = xasprintf("%s/%s/", p.org, hash), *key = xasprintf("%scontext.tar", prefix);
	_cleanup_free_ char *eprefix = sbx__sigv4_uri_encode(prefix, 0);
	_cleanup_free_ char *query = xasprintf("list-type=2&max-keys=1&prefix=%s", eprefix);
	sbx_buf resp;
	sbx__buf_init(&resp, 1u << 20);
	long st = 0;
	r = s3(&resp, &st, &p, "GET", "", query, NULL, 0, err);
	if (r == 0 && resp.data && strstr(resp.data, "<Key>")) {
		logline(env, "daytona: context %s is in object storage already", hash);
		goto out;
	}
	if (r < 0)
		goto out;
	int fd = -1;
	off_t len = 0;
	r = sbx__tree_tar(&fd, &len, env->context_dir, ".", 0, err);
	if (r < 0)
		goto out;
	if ((uint64_t)len > CONTEXT_MAX) {
		close(fd);
		r = sbx_error_set(err, -E2BIG, "daytona: the build context %s is %lld bytes, over %u", env->context_dir,
				  (long long)len, CONTEXT_MAX);
		goto out;
	}
	char *data = xmalloc((size_t)len + 1);
	ssize_t got = 0;
	for (size_t off = 0; off < (size_t)len; off += (size_t)got) {
		got = pread(fd, data + off, (size_t)len - off, (off_t)off);
		if (got <= 0) {
			r = sbx_error_setsys(err, -EIO, got < 0 ? errno : EIO, "daytona: read the context tar");
			break;
		}
	}
	close(fd);
	if (r == 0) {
		logline(env, "daytona: uploading context %s (%lld bytes)", hash, (long long)len);
		r = s3(&resp, &st, &p, "PUT", key, "x-id=PutObject", data, (size_t)len, err);
	}
	free(data);
out:
	sbx__buf_free(&resp);
	push_clear(&p);
	return r;
}

/* ---- the snapshot ------------------------------------------------------------ */

struct snap {
	char *state;
	char *reason;
};

static void snap_clear(struct snap *s)
{
	free(s->state);
	free(s->reason);
	memset(s, 0, sizeof(*s));
}

static int snap_get(struct snap *out, struct dtn_ctx *c, const char *name, sbx_error **err)
{
	_cleanup_free_ char *q = sbx__http_escape(name);
	_cleanup_free_ char *path = xasprintf("/snapshots/%s", q);
	json_t *j = NULL;
	sbx_error *e = NULL;
	int r = sbx__dtn_call(&j, c, "GET", path, NULL, 0, "get snapshot", &e);
	if (r == -ENOENT) {
		sbx_error_free(e);
		return -ENOENT;
	}
	if (r < 0) {
		pass_error(err, e);
		return r;
	}
	const char *st = json_string_value(json_object_get(j, "state"));
	const char *why = json_string_value(json_object_get(j, "errorReason"));
	out->state = xstrdup(st ? st : "unknown");
	out->reason = why ? xstrdup(why) : NULL;
	json_decref(j);
	return 0;
}

static int snap_delete(struct dtn_ctx *c, const char *name, sbx_error **err)
{
	_cleanup_free_ char *q = sbx__http_escape(name);
	_cleanup_free_ char *path = xasprintf("/snapshots/%s", q);
	int r = sbx__dtn_call(NULL, c, "DELETE", path, NULL, 0, "delete snapshot", err);
	return r == -ENOENT ? 0 : r;
}

int sbx__dtn_snapshot_step(const char *state)
{
	if (strcmp(state, "active") == 0)
		return 1;
	if (strcmp(state, "error") == 0 || strcmp(state, "build_failed") == 0 || strcmp(state, "removing") == 0 ||
	    strcmp(state, "inactive") == 0)
		return -1;
	return 0; /* pending, pulling, building, ... */
}

json_t *sbx__dtn_snapshot_body(const char *name, const char *dockerfile, const char *ctx_hash)
{
	json_t *hashes = json_array();
	if (ctx_hash)
		json_array_append_new(hashes, json_string(ctx_hash));
	return json_pack("{s:s,s:{s:s,s:o}}", "name", name, "buildInfo", "dockerfileContent", dockerfile,
			 "contextHashes", hashes);
}

static int wait_active(struct dtn_ctx *c, const char *name, double timeout_s, sbx_error **err)
{
	double until = now_mono() + (timeout_s > 0 ? timeout_s : DEFAULT_BUILD_TIMEOUT_S), wait = 0.25;
	for (;;) {
		struct snap s = { 0 };
		int r = snap_get(&s, c, name, err);
		if (r == -ENOENT)
			return sbx_error_set(err, -EIO, "daytona: snapshot %s disappeared during its build", name);
		if (r < 0)
			return r;
		int step = sbx__dtn_snapshot_step(s.state);
		if (step != 0) {
			r = step > 0 ? 0
				     : sbx_error_set(err, -EIO, "daytona: snapshot %s is %s: %s", name, s.state,
						     s.reason ? s.reason : "no errorReason given");
			snap_clear(&s);
			return r;
		}
		if (now_mono() > until) {
			r = sbx_error_set(err, -ETIMEDOUT, "daytona: snapshot %s still %s after %.0f s", name, s.state,
					  timeout_s > 0 ? timeout_s : DEFAULT_BUILD_TIMEOUT_S);
			snap_clear(&s);
			return r;
		}
		snap_clear(&s);
		struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
		nanosleep(&ts, NULL);
		wait = wait * 2 > 2 ? 2 : wait * 2;
	}
}

/* POST /snapshots. A quota or rate error (-EAGAIN: 429, "Snapshot quota
 * exceeded", ...) is retried SNAP_RETRIES times with doubling waits, since
 * other processes may be deleting snapshots or the rate limit may clear;
 * then it fails saying what to do. 409 = another process made it: wait. */
static int create_snapshot(struct dtn_ctx *c, const sbx_task_env *env, const char *name, const char *df,
			   const char *hex, sbx_error **err)
{
	json_t *body = sbx__dtn_snapshot_body(name, df, hex);
	int r = 0;
	for (int attempt = 0;; attempt++) {
		sbx_error *e = NULL;
		r = sbx__dtn_call(NULL, c, "POST", "/snapshots", body, 0, "create snapshot", &e);
		if (r == -EEXIST) {
			sbx_error_free(e);
			r = 0;
		} else if (r == -EAGAIN && attempt < SNAP_RETRIES) {
			unsigned wait = 1u << attempt;
			logline(env, "daytona: snapshot %s: %s; retrying in %u s", name, e && e->msg ? e->msg : "throttled",
				wait);
			sbx_error_free(e);
			sleep(wait);
			continue;
		} else if (r < 0) {
			pass_error(err, e);
			if (r == -EAGAIN)
				sbx_error_prefix(err, r, "snapshot %s (after %d retries; the snapshot quota is per "
							 "organization: delete snapshots of tasks not in use, named sbx-*, "
							 "or raise it)",
						 name, SNAP_RETRIES);
			else
				sbx_error_prefix(err, r, "snapshot %s", name);
		}
		break;
	}
	json_decref(body);
	return r;
}

static int ensure(char **name_out, int *cached, struct dtn_ctx *c, const sbx_task_env *env, sbx_error **err)
{
	_cleanup_free_ char *dfp = xasprintf("%s/Dockerfile", env->context_dir);
	_cleanup_free_ char *df = NULL;
	size_t dflen = 0;
	int r = sbx__read_file(&df, &dflen, dfp, DOCKERFILE_MAX, err);
	if (r < 0)
		return r;
	EVP_MD_CTX *md = sbx__sha256_new();
	r = sbx__ctx_hash(md, env->context_dir, "", NULL, err);
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_final_hex(md, hex);
	EVP_MD_CTX_free(md);
	if (r < 0)
		return r;
	hex[32] = '\0'; /* the SDK's context hashes are 32 hex digits (md5) */
	_cleanup_free_ char *name = sbx__dtn_snapshot_name(env->slug, df, hex);
	struct snap s = { 0 };
	r = snap_get(&s, c, name, err);
	if (r == 0 && (env->force || sbx__dtn_snapshot_step(s.state) < 0)) {
		if (!env->force) {
			r = sbx_error_set(err, -EIO,
					  "daytona: snapshot %s is %s: %s (delete it, or bake again with --force)", name,
					  s.state, s.reason ? s.reason : "no errorReason given");
			snap_clear(&s);
			return r;
		}
		logline(env, "daytona: deleting snapshot %s (%s) to rebuild it", name, s.state);
		snap_clear(&s);
		r = snap_delete(c, name, err);
		if (r < 0)
			return r;
		r = -ENOENT;
	}
	if (r == 0) {
		*cached = 1;
		if (sbx__dtn_snapshot_step(s.state) == 0)
			logline(env, "daytona: snapshot %s is %s: waiting for it", name, s.state);
		snap_clear(&s);
	} else if (r == -ENOENT) {
		*cached = 0;
		r = upload_context(c, env, hex, err);
		if (r < 0)
			return r;
		logline(env, "daytona: creating snapshot %s", name);
		r = create_snapshot(c, env, name, df, hex, err);
		if (r < 0)
			return r;
	} else {
		return r;
	}
	r = wait_active(c, name, env->timeout_s, err);
	if (r < 0)
		return r;
	*name_out = steal_ptr(&name);
	return 0;
}

int sbx__dtn_task_image(char **image_out, char **how_out, sbx_runtime *rt, const sbx_task_env *env,
			sbx_error **err)
{
	if (!env->context_dir) {
		if (!env->docker_image)
			return sbx_error_set(err, -ENOENT, "%s: no Dockerfile and no docker_image", env->dir);
		*image_out = xstrdup(env->docker_image); /* sent as the one-line Dockerfile FROM NAME */
		*how_out = xstrdup("prebuilt");
		return 0;
	}
	if (sbx__lazy_load(&sbx__lazy_crypto, err) < 0 || sbx__lazy_load(&sbx__lazy_archive, err) < 0)
		return -ENOSYS;
	struct dtn_ctx *c = NULL;
	int r = sbx__dtn_ctx_new(&c, rt, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *name = NULL;
	int cached = 0;
	r = ensure(&name, &cached, c, env, err);
	sbx__dtn_ctx_free(c);
	if (r < 0)
		return sbx_error_prefix(err, r, "daytona snapshot of %s", env->dir);
	logline(env, "daytona: snapshot %s is active%s", name, cached ? " (cached)" : "");
	*image_out = xasprintf("snapshot:%s", name);
	*how_out = xstrdup(cached ? "cached" : "built");
	return 0;
}
