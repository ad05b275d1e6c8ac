/* SPDX-License-Identifier: MIT */
/*
 * Daytona's object storage, as much of it as the SDK's build-context upload
 * uses (docs/server.md, "Daytona API"). `GET /api/object-storage/push-access`
 * issues temporary credentials (access key, secret, session token, an hour)
 * and a storageUrl pointing back here; the SDK's S3 client (path style) then
 * asks ListObjectsV2 whether <org>/<hash>/ exists and, when not, PutObject's
 * <org>/<hash>/context.tar. Every S3 request must carry a valid SigV4
 * signature by an issued, unexpired credential and its session token; a
 * PutObject's body must hash to its signed x-amz-content-sha256. Objects are
 * files under STATE/server/daytona-objects/<bucket>/<key>: keys are checked
 * segment by segment (no "..", no odd bytes), one object is at most
 * DT_OBJECT_MAX and all of them DT_OBJECTS_MAX. Multipart uploads (the
 * SDK's for a context over 5 MiB) are in objects_multipart.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/buf.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/sha256.h"
#include "../../util/sigv4.h"
#include "../../util/str.h"
#include "daytona.h"

#define KEY_MAX 1024
#define LIST_MAX 1000
#define CLOCK_SKEW_S (15 * 60) /* S3's RequestTimeTooSkewed bound */

struct dt_state *sbx__dt_state(struct server *srv)
{
	pthread_mutex_lock(&srv->lock);
	if (!srv->daytona) {
		struct dt_state *st = xcalloc(1, sizeof(*st));
		pthread_mutex_init(&st->lk, NULL);
		srv->daytona = st;
	}
	struct dt_state *st = srv->daytona;
	pthread_mutex_unlock(&srv->lock);
	return st;
}

int sbx__dt_s3_match(const char *url)
{
	return sbx__str_startswith(url, DT_S3_PREFIX);
}

void sbx__dt_s3_error(struct srv_req *r, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	/* messages and paths here are plain ASCII without markup (keys are checked) */
	char *xml = xasprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message>"
			      "<Resource>%s</Resource><RequestId>sbx</RequestId></Error>",
			      code, msg, r->url);
	sbx__srv_reply_bytes(r, status, "application/xml", xml, strlen(xml));
}

/* The bucket and key of a path (pointers into a copy in *buf); -1 when not
 * an S3 path, 0 for the bucket alone (key ""), 1 for an object. */
static int split_key(const char *url, char **buf, const char **bucket, const char **key)
{
	if (!sbx__dt_s3_match(url))
		return -1;
	*buf = xstrdup(url + strlen(DT_S3_PREFIX));
	char *slash = strchr(*buf, '/');
	if (slash)
		*slash = '\0';
	*bucket = *buf;
	*key = slash ? slash + 1 : "";
	return **key ? 1 : 0;
}

int sbx__dt_s3_key_ok(const char *key)
{
	size_t n = strlen(key);
	if (n == 0 || n > KEY_MAX || key[0] == '/' || key[n - 1] == '/')
		return 0;
	for (const char *p = key; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.') ||
		    strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") < len)
			return 0;
		p += len;
		p += *p == '/';
	}
	return 1;
}

char *sbx__dt_objects_dir(struct server *srv)
{
	return xasprintf("%s/server/daytona-objects/" DT_BUCKET, srv->cfg.state_dir);
}

char *sbx__dt_context_path(struct server *srv, const char *hash)
{
	size_t n = strlen(hash);
	if (n < 16 || n > 128 || strspn(hash, "0123456789abcdef") != n)
		return NULL;
	_cleanup_free_ char *dir = sbx__dt_objects_dir(srv);
	return xasprintf("%s/" DT_ORG_ID "/%s/context.tar", dir, hash);
}

static char *host_base(struct srv_req *r)
{
	const char *host = sbx__srv_header(r, "Host");
	size_t n = host ? strlen(host) : 0;
	if (n == 0 || n > 255 || strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != n)
		return xasprintf("http://127.0.0.1:%u", r->srv->port);
	return xasprintf("http://%s", host);
}

void sbx__dt_push_access(struct srv_req *r)
{
	struct dt_state *st = sbx__dt_state(r->srv);
	char tok[65], sec[65], ak[65];
	sbx__srv_auth_new_token(ak);
	sbx__srv_auth_new_token(sec);
	sbx__srv_auth_new_token(tok);
	struct dt_cred c = { .expires = sbx__now_real() + DT_CRED_TTL_S };
	snprintf(c.ak, sizeof(c.ak), "SBX%.17s", ak);
	for (char *p = c.ak; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	memcpy(c.secret, sec, sizeof(c.secret));
	memcpy(c.token, tok, sizeof(c.token));
	pthread_mutex_lock(&st->lk);
	st->creds[st->next_cred++ % DT_CREDS] = c;
	pthread_mutex_unlock(&st->lk);
	_cleanup_free_ char *base = host_base(r);
	_cleanup_free_ char *url = xasprintf("%s%.*s", base, (int)strlen(DT_S3_PREFIX) - 1, DT_S3_PREFIX);
	sbx__srv_reply_json(r, 200,
			    json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "accessKey", c.ak, "secret", c.secret,
				      "sessionToken", c.token, "storageUrl", url, "organizationId", DT_ORG_ID,
				      "bucket", DT_BUCKET, "region", DT_REGION));
	explicit_bzero(&c, sizeof(c));
	explicit_bzero(sec, sizeof(sec));
	explicit_bzero(tok, sizeof(tok));
}

/* Authorization: AWS4-HMAC-SHA256 Credential=AK/DAY/REGION/SERVICE/aws4_request,
 * SignedHeaders=a;b, Signature=hex */
struct auth {
	char ak[64], day[9], region[32], service[16];
	char signed_headers[1024];
	char sig[65];
};

static int field(const char *h, const char *name, char *out, size_t cap, const char *stop)
{
	const char *p = strstr(h, name);
	if (!p)
		return 0;
	p += strlen(name);
	size_t n = strcspn(p, stop);
	if (n == 0 || n >= cap)
		return 0;
	memcpy(out, p, n);
	out[n] = '\0';
	return 1;
}

static int parse_auth(struct auth *a, const char *h)
{
	char cred[256];
	if (!h || strncmp(h, SBX_SIGV4_ALGO " ", strlen(SBX_SIGV4_ALGO) + 1) != 0 ||
	    !field(h, "Credential=", cred, sizeof(cred), ", ") ||
	    !field(h, "SignedHeaders=", a->signed_headers, sizeof(a->signed_headers), ", ") ||
	    !field(h, "Signature=", a->sig, sizeof(a->sig), ", "))
		return 0;
	char *parts[5], *save = NULL;
	size_t k = 0;
	for (char *t = strtok_r(cred, "/", &save); t && k < 5; t = strtok_r(NULL, "/", &save))
		parts[k++] = t;
	if (k != 5 || strcmp(parts[4], "aws4_request") != 0 || strlen(parts[0]) >= sizeof(a->ak) ||
	    strlen(parts[1]) != 8 || strlen(parts[2]) >= sizeof(a->region) || strlen(parts[3]) >= sizeof(a->service))
		return 0;
	snprintf(a->ak, sizeof(a->ak), "%s", parts[0]);
	snprintf(a->day, sizeof(a->day), "%s", parts[1]);
	snprintf(a->region, sizeof(a->region), "%s", parts[2]);
	snprintf(a->service, sizeof(a->service), "%s", parts[3]);
	return strlen(a->sig) == 64;
}

static double amz_time(const char *d)
{
	struct tm tm = { 0 };
	if (!d || strlen(d) != 16 || !strptime(d, "%Y%m%dT%H%M%SZ", &tm))
		return -1;
	return (double)timegm(&tm);
}

int sbx__dt_s3_authorize(struct srv_req *r)
{
	struct auth a;
	memset(&a, 0, sizeof(a));
	const char *h = sbx__srv_header(r, "Authorization");
	if (!parse_auth(&a, h)) {
		sbx__dt_s3_error(r, 403, "AccessDenied",
			 "missing or malformed Authorization header: expected AWS4-HMAC-SHA256 Credential=..., "
			 "SignedHeaders=..., Signature=... with credentials from GET /api/object-storage/push-access");
		return 0;
	}
	const char *date = sbx__srv_header(r, "x-amz-date");
	double t = amz_time(date);
	if (t < 0 || strncmp(date, a.day, 8) != 0) {
		sbx__dt_s3_error(r, 403, "AccessDenied", "x-amz-date must be YYYYMMDDTHHMMSSZ and match the credential's day");
		return 0;
	}
	if (t < sbx__now_real() - CLOCK_SKEW_S || t > sbx__now_real() + CLOCK_SKEW_S) {
		sbx__dt_s3_error(r, 403, "RequestTimeTooSkewed", "x-amz-date is more than 15 minutes from the server's time");
		return 0;
	}
	const char *payload = sbx__srv_header(r, "x-amz-content-sha256");
	if (payload && sbx__str_startswith(payload, "STREAMING-")) {
		sbx__dt_s3_error(r, 501, "NotImplemented", "x-amz-content-sha256 %s (aws-chunked uploads) is not supported by "
			 "sbx serve", "STREAMING-*");
		return 0;
	}
	struct dt_state *st = sbx__dt_state(r->srv);
	struct dt_cred c = { 0 };
	pthread_mutex_lock(&st->lk);
	for (size_t i = 0; i < DT_CREDS; i++)
		if (st->creds[i].expires > 0 && strcmp(st->creds[i].ak, a.ak) == 0)
			c = st->creds[i];
	pthread_mutex_unlock(&st->lk);
	const char *token = sbx__srv_header(r, "x-amz-security-token");
	int ok = c.expires > sbx__now_real() && token && sbx__srv_ct_equal(token, c.token);
	/* the session token must be signed too, not just present */
	size_t shn = strlen(a.signed_headers);
	char sh_padded[sizeof(a.signed_headers) + 2];
	snprintf(sh_padded, sizeof(sh_padded), ";%s;", a.signed_headers);
	ok = ok && shn && strstr(sh_padded, ";x-amz-security-token;") && strstr(sh_padded, ";host;");
	char sig[65] = "";
	if (ok) {
		char **lines = NULL;
		size_t nl = 0;
		_cleanup_free_ char *names = xstrdup(a.signed_headers);
		char *save = NULL;
		for (char *n = strtok_r(names, ";", &save); n; n = strtok_r(NULL, ";", &save)) {
			const char *v = sbx__srv_header(r, n);
			lines = xrealloc(lines, (nl + 2) * sizeof(*lines));
			lines[nl++] = xasprintf("%s:%s", n, v ? v : "");
			lines[nl] = NULL;
		}
		_cleanup_free_ char *path = xstrdup(r->raw_uri ? r->raw_uri : r->url);
		char *q = strchr(path, '?');
		if (q)
			*q++ = '\0';
		struct sbx_sigv4 s = { .method = r->method, .path = path, .query = q,
				       .headers = (const char *const *)lines,
				       .payload_hash = payload ? payload : "UNSIGNED-PAYLOAD", .amz_date = date,
				       .region = a.region, .service = a.service, .secret = c.secret };
		if (sbx__sigv4_sign(sig, NULL, NULL, &s, NULL) < 0)
			ok = 0;
		sbx__strv_free(lines);
	}
	explicit_bzero(&c, sizeof(c));
	if (!ok || !sbx__srv_ct_equal(sig, a.sig)) {
		sbx__dt_s3_error(r, 403, ok ? "SignatureDoesNotMatch" : "InvalidAccessKeyId",
			 ok ? "the request signature does not match (SigV4 with the push-access secret)"
			    : "unknown or expired access key, or a missing or unsigned x-amz-security-token (ask GET "
			      "/api/object-storage/push-access again)");
		return 0;
	}
	return 1;
}

/* ---- PutObject: streamed to a temporary file, hashed on the way ------------ */

struct put {
	int fd;
	char *tmp;
	EVP_MD_CTX *md;
	int failed;
};

static void put_feed(struct srv_req *r, const char *data, size_t len)
{
	struct put *p = r->up;
	if (p->failed)
		return;
	EVP_DigestUpdate(p->md, data, len);
	while (len) {
		ssize_t w = write(p->fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			p->failed = errno ? errno : EIO;
			return;
		}
		data += w;
		len -= (size_t)w;
	}
}

static void put_free(struct srv_req *r)
{
	struct put *p = r->up;
	if (!p)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->tmp)
		unlink(p->tmp);
	free(p->tmp);
	EVP_MD_CTX_free(p->md);
	free(p);
	r->up = NULL;
}

static uint64_t tree_size(int dfd, unsigned depth)
{
	uint64_t sum = 0;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		struct stat sb;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(sb.st_mode))
			sum += (uint64_t)sb.st_size;
		else if (S_ISDIR(sb.st_mode) && depth < 16) {
			int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				sum += tree_size(sub, depth + 1);
		}
	}
	closedir(d);
	return sum;
}

void sbx__dt_s3_begin(struct srv_req *r)
{
	_cleanup_free_ char *buf = NULL;
	const char *bucket, *key;
	int part = sbx__srv_query(r, "uploadId") || sbx__srv_query(r, "partNumber");
	if (split_key(r->url, &buf, &bucket, &key) != 1 || strcmp(bucket, DT_BUCKET) != 0 || !sbx__dt_s3_key_ok(key))
		return; /* answered at the end */
	_cleanup_free_ char *part_path = NULL;
	if (part && sbx__dt_mp_part_path(&part_path, r, key) < 0)
		return;
	_cleanup_free_ char *dir = sbx__dt_objects_dir(r->srv);
	if (sbx__mkdir_p(dir, 0700, NULL) < 0)
		return;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t used = dfd >= 0 ? tree_size(dfd, 0) : 0;
	if (used >= DT_OBJECTS_MAX)
		return;
	struct put *p = xcalloc(1, sizeof(*p));
	p->tmp = xasprintf("%s/.put-XXXXXX", dir);
	p->fd = mkostemp(p->tmp, O_CLOEXEC);
	if (p->fd < 0) {
		free(p->tmp);
		free(p);
		return;
	}
	p->md = sbx__sha256_new();
	r->up = p;
	r->feed = put_feed;
	r->up_free = put_free;
}

static void put_object(struct srv_req *r, const char *key)
{
	struct put *p = r->up;
	if (r->too_big) {
		sbx__dt_s3_error(r, 400, "EntityTooLarge", "object larger than %u bytes", DT_OBJECT_MAX);
		return;
	}
	_cleanup_free_ char *part_path = NULL;
	int part = sbx__srv_query(r, "uploadId") || sbx__srv_query(r, "partNumber");
	if (part && sbx__dt_mp_part_path(&part_path, r, key) < 0) {
		sbx__dt_s3_error(r, 404, "NoSuchUpload",
				 "unknown uploadId, or partNumber not 1..10000 (start with POST ?uploads)");
		return;
	}
	if (!p) {
		sbx__dt_s3_error(r, 507, "InsufficientStorage", "object storage is full (%llu bytes) or cannot be written",
			 (unsigned long long)DT_OBJECTS_MAX);
		return;
	}
	if (p->failed) {
		sbx__dt_s3_error(r, 500, "InternalError", "writing the object failed: %s", strerror(p->failed));
		return;
	}
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_final_hex(p->md, hex);
	const char *want = sbx__srv_header(r, "x-amz-content-sha256");
	if (want && strcmp(want, "UNSIGNED-PAYLOAD") != 0 && strcasecmp(want, hex) != 0) {
		sbx__dt_s3_error(r, 400, "XAmzContentSHA256Mismatch", "the body's SHA-256 is not x-amz-content-sha256");
		return;
	}
	_cleanup_free_ char *dir = sbx__dt_objects_dir(r->srv);
	_cleanup_free_ char *dst = part ? xstrdup(part_path) : xasprintf("%s/%s", dir, key);
	_cleanup_free_ char *parent = xstrdup(dst);
	*strrchr(parent, '/') = '\0';
	if (fsync(p->fd) < 0 || sbx__mkdir_p(parent, 0700, NULL) < 0 || rename(p->tmp, dst) < 0) {
		sbx__dt_s3_error(r, 500, "InternalError", "storing the object failed: %s", strerror(errno));
		return;
	}
	free(p->tmp);
	p->tmp = NULL;
	_cleanup_free_ char *etag = xasprintf("\"%.32s\"", hex);
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(resp, "ETag", etag);
	sbx__srv_queue(r, 200, resp, NULL);
}

/* ---- ListObjectsV2, HEAD and GET of an object -------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keys under dir (relative, '/'-joined) into *v. */
static void walk(char ***v, size_t *n, const char *root, const char *rel, unsigned depth)
{
	_cleanup_free_ char *path = *rel ? xasprintf("%s/%s", root, rel) : xstrdup(root);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && *n < 100000) {
		if (e->d_name[0] == '.')
			continue; /* ".", "..", temporary puts; keys never start with '.' */
		_cleanup_free_ char *sub = *rel ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
		struct stat sb;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(sb.st_mode) && depth < 16) {
			walk(v, n, root, sub, depth + 1);
		} else if (S_ISREG(sb.st_mode)) {
			*v = xrealloc(*v, (*n + 1) * sizeof(**v));
			(*v)[(*n)++] = steal_ptr(&sub);
		}
	}
	closedir(d);
}

static void list_objects(struct srv_req *r)
{
	const char *prefix = sbx__srv_query(r, "prefix"), *mk = sbx__srv_query(r, "max-keys");
	const char *lt = sbx__srv_query(r, "list-type");
	uint64_t max = LIST_MAX;
	if (!lt || strcmp(lt, "2") != 0) {
		sbx__dt_s3_error(r, 501, "NotImplemented", "only ListObjectsV2 (list-type=2) is supported by sbx serve");
		return;
	}
	if (mk && (sbx__parse_u64(&max, mk) < 0 || max > LIST_MAX)) {
		sbx__dt_s3_error(r, 400, "InvalidArgument", "max-keys must be an integer 0..%d", LIST_MAX);
		return;
	}
	if (prefix && strspn(prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
			      strlen(prefix)) {
		sbx__dt_s3_error(r, 400, "InvalidArgument", "prefix may hold only letters, digits and . _ - /");
		return;
	}
	_cleanup_free_ char *dir = sbx__dt_objects_dir(r->srv);
	char **v = NULL;
	size_t n = 0;
	walk(&v, &n, dir, "", 0);
	if (n)
		qsort(v, n, sizeof(*v), cmp_str);
	sbx_buf b;
	sbx__buf_init(&b, 8u << 20);
	sbx__buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
			    "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>%s</Name><Prefix>%s</Prefix>",
			DT_BUCKET, prefix ? prefix : "");
	size_t count = 0, matching = 0;
	for (size_t i = 0; i < n; i++) {
		if (prefix && !sbx__str_startswith(v[i], prefix))
			continue;
		matching++;
		if (count < max) {
			struct stat sb;
			_cleanup_free_ char *f = xasprintf("%s/%s", dir, v[i]);
			if (stat(f, &sb) == 0) {
				_cleanup_free_ char *ts = sbx__srv_rfc3339((double)sb.st_mtime);
				sbx__buf_printf(&b, "<Contents><Key>%s</Key><LastModified>%s</LastModified><Size>%lld"
						    "</Size><StorageClass>STANDARD</StorageClass></Contents>",
						v[i], ts, (long long)sb.st_size);
				count++;
			}
		}
	}
	sbx__buf_printf(&b, "<KeyCount>%zu</KeyCount><MaxKeys>%llu</MaxKeys><IsTruncated>%s</IsTruncated>"
			    "</ListBucketResult>",
			count, (unsigned long long)max, matching > count ? "true" : "false");
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	size_t len = 0;
	char *xml = sbx__buf_steal(&b, &len);
	sbx__srv_reply_bytes(r, 200, "application/xml", xml, len);
}

static void get_object(struct srv_req *r, const char *key, int head)
{
	_cleanup_free_ char *dir = sbx__dt_objects_dir(r->srv);
	_cleanup_free_ char *f = xasprintf("%s/%s", dir, key);
	int fd = open(f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		if (fd >= 0)
			close(fd);
		if (head)
			sbx__srv_reply_empty(r, 404);
		else
			sbx__dt_s3_error(r, 404, "NoSuchKey", "the specified key does not exist");
		return;
	}
	if (head) {
		close(fd);
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
		char len[32];
		snprintf(len, sizeof(len), "%lld", (long long)sb.st_size);
		MHD_add_response_header(resp, "x-sbx-object-size", len);
		sbx__srv_queue(r, 200, resp, "application/octet-stream");
		return;
	}
	sbx__srv_reply_fd(r, 200, "application/octet-stream", fd, (uint64_t)sb.st_size);
}

void sbx__dt_s3_route(struct srv_req *r)
{
	_cleanup_free_ char *buf = NULL;
	const char *bucket, *key;
	int k = split_key(r->url, &buf, &bucket, &key);
	const char *m = r->method;
	if (k < 0 || !*bucket) {
		sbx__dt_s3_error(r, 400, "InvalidBucketName", "the path needs a bucket: %s<bucket>[/<key>]", DT_S3_PREFIX);
	} else if (strcmp(bucket, DT_BUCKET) != 0) {
		sbx__dt_s3_error(r, 404, "NoSuchBucket", "the only bucket is %s", DT_BUCKET);
	} else if (k == 0 && strcmp(m, "GET") == 0) {
		list_objects(r);
	} else if (k == 0) {
		sbx__dt_s3_error(r, 405, "MethodNotAllowed", "%s on the bucket is not supported by sbx serve", m);
	} else if (!sbx__dt_s3_key_ok(key)) {
		sbx__dt_s3_error(r, 400, "InvalidArgument",
			 "object keys are '/'-separated segments of letters, digits and . _ - (no '..'), at most %d "
			 "bytes", KEY_MAX);
	} else if (strcmp(m, "PUT") == 0) {
		put_object(r, key);
	} else if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
		get_object(r, key, strcmp(m, "HEAD") == 0);
	} else if (strcmp(m, "POST") == 0 || (strcmp(m, "DELETE") == 0 && sbx__srv_query(r, "uploadId"))) {
		sbx__dt_mp_route(r, key);
	} else {
		sbx__dt_s3_error(r, 405, "MethodNotAllowed", "%s of an object is not supported by sbx serve", m);
	}
}
