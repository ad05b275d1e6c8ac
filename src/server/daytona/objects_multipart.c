/* SPDX-License-Identifier: MIT */
/*
 * S3 multipart uploads for the Daytona API's object storage (objects.c):
 * what the SDK's uploader (@aws-sdk/lib-storage) does for a build context
 * over its 5 MiB part size. `POST KEY?uploads` starts an upload (a
 * directory .mp/<id> beside the objects, holding the key it is for; names
 * starting with '.' are never keys, so listings skip it), `PUT
 * KEY?partNumber=N&uploadId=ID` stores part N (streamed and checked like a
 * PutObject, objects.c), `POST KEY?uploadId=ID` with the
 * CompleteMultipartUpload XML joins the listed parts in that order into
 * the object, `DELETE KEY?uploadId=ID` aborts. The parts count against the
 * store's cap; the joined object against DT_OBJECT_MAX.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/sha256.h"
#include "../../util/str.h"
#include "daytona.h"

#define PARTS_MAX 10000u

static char *upload_dir(struct server *srv, const char *id)
{
	_cleanup_free_ char *dir = sbx__dt_objects_dir(srv);
	return xasprintf("%s/.mp/%s", dir, id);
}

/* The upload's directory when ID names an upload of KEY. Owned or NULL. */
static char *upload_of(struct server *srv, const char *id, const char *key)
{
	if (!id || strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)
		return NULL;
	char *dir = upload_dir(srv, id);
	_cleanup_free_ char *kp = xasprintf("%s/key", dir), *k = NULL;
	size_t n = 0;
	if (sbx__read_file(&k, &n, kp, 2048, NULL) < 0 || strcmp(k, key) != 0) {
		free(dir);
		return NULL;
	}
	return dir;
}

int sbx__dt_mp_part_path(char **out, struct srv_req *r, const char *key)
{
	const char *pn = sbx__srv_query(r, "partNumber");
	uint64_t n = 0;
	if (!pn || sbx__parse_u64(&n, pn) < 0 || n < 1 || n > PARTS_MAX)
		return -ENOENT;
	_cleanup_free_ char *dir = upload_of(r->srv, sbx__srv_query(r, "uploadId"), key);
	if (!dir)
		return -ENOENT;
	*out = xasprintf("%s/part-%05u", dir, (unsigned)n);
	return 0;
}

/* 1 when the raw query has NAME as a parameter (with or without a value). */
static int has_param(struct srv_req *r, const char *name)
{
	const char *q = r->raw_uri ? strchr(r->raw_uri, '?') : NULL;
	size_t n = strlen(name);
	for (const char *p = q ? q + 1 : NULL; p && *p; p += strcspn(p, "&"), p += *p == '&')
		if (strncmp(p, name, n) == 0 && (p[n] == '\0' || p[n] == '&' || p[n] == '='))
			return 1;
	return 0;
}

static void create(struct srv_req *r, const char *key)
{
	char tok[65];
	sbx__srv_auth_new_token(tok);
	tok[32] = '\0';
	_cleanup_free_ char *dir = upload_dir(r->srv, tok), *kp = xasprintf("%s/key", dir);
	if (sbx__mkdir_p(dir, 0700, NULL) < 0 || sbx__write_file_atomic(kp, key, strlen(key), 0600, NULL) < 0) {
		sbx__dt_s3_error(r, 500, "InternalError", "could not start the upload");
		return;
	}
	char *xml = xasprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
			      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>%s</Bucket><Key>%s</Key>"
			      "<UploadId>%s</UploadId></InitiateMultipartUploadResult>",
			      DT_BUCKET, key, tok);
	sbx__srv_reply_bytes(r, 200, "application/xml", xml, strlen(xml));
}

/* Appends part file PATH to fd OUT; 0, -E2BIG past the cap, -errno. */
static int append(int out, const char *path, uint64_t *total)
{
	_cleanup_close_ int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -errno;
	char buf[65536];
	ssize_t got;
	while ((got = read(in, buf, sizeof(buf))) > 0) {
		*total += (uint64_t)got;
		if (*total > DT_OBJECT_MAX)
			return -E2BIG;
		for (ssize_t off = 0; off < got;) {
			ssize_t w = write(out, buf + off, (size_t)(got - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? -errno : -EIO;
			off += w;
		}
	}
	return got < 0 ? -errno : 0;
}

static void complete(struct srv_req *r, const char *key, const char *dir)
{
	const char *want = sbx__srv_header(r, "x-amz-content-sha256");
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_hex(hex, r->body.data ? r->body.data : "", r->body.len);
	if (want && strcmp(want, "UNSIGNED-PAYLOAD") != 0 && strcasecmp(want, hex) != 0) {
		sbx__dt_s3_error(r, 400, "XAmzContentSHA256Mismatch", "the body's SHA-256 is not x-amz-content-sha256");
		return;
	}
	_cleanup_free_ char *objs = sbx__dt_objects_dir(r->srv);
	_cleanup_free_ char *tmp = xasprintf("%s/.put-XXXXXX", objs);
	_cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		sbx__dt_s3_error(r, 500, "InternalError", "could not join the parts: %s", strerror(errno));
		return;
	}
	uint64_t total = 0;
	unsigned count = 0, last = 0;
	int rc = 0;
	const char *p = r->body.data;
	while (rc == 0 && p && (p = strstr(p, "<PartNumber>"))) {
		p += strlen("<PartNumber>");
		char *end = NULL;
		unsigned long n = strtoul(p, &end, 10);
		if (!end || *end != '<' || n < 1 || n > PARTS_MAX || n <= last) {
			rc = -EINVAL;
			break;
		}
		last = (unsigned)n;
		_cleanup_free_ char *part = xasprintf("%s/part-%05u", dir, (unsigned)n);
		rc = append(fd, part, &total);
		count++;
	}
	if (rc == 0 && count == 0)
		rc = -EINVAL;
	_cleanup_free_ char *dst = xasprintf("%s/%s", objs, key), *parent = xstrdup(dst);
	*strrchr(parent, '/') = '\0';
	if (rc == 0 && (fsync(fd) < 0 || sbx__mkdir_p(parent, 0700, NULL) < 0 || rename(tmp, dst) < 0))
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		if (rc == -EINVAL || rc == -ENOENT)
			sbx__dt_s3_error(r, 400, "InvalidPart",
					 "the CompleteMultipartUpload body must list uploaded parts in ascending order");
		else if (rc == -E2BIG)
			sbx__dt_s3_error(r, 400, "EntityTooLarge", "object larger than %u bytes", DT_OBJECT_MAX);
		else
			sbx__dt_s3_error(r, 500, "InternalError", "could not join the parts: %s", strerror(-rc));
		return;
	}
	sbx__rm_rf(dir, NULL);
	char *xml = xasprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult "
			      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>%s</Bucket><Key>%s</Key>"
			      "<ETag>\"%.32s-%u\"</ETag></CompleteMultipartUploadResult>",
			      DT_BUCKET, key, hex, count);
	sbx__srv_reply_bytes(r, 200, "application/xml", xml, strlen(xml));
}

void sbx__dt_mp_route(struct srv_req *r, const char *key)
{
	const char *id = sbx__srv_query(r, "uploadId");
	if (strcmp(r->method, "POST") == 0 && has_param(r, "uploads") && !id) {
		create(r, key);
		return;
	}
	_cleanup_free_ char *dir = id ? upload_of(r->srv, id, key) : NULL;
	if (!dir) {
		sbx__dt_s3_error(r, id ? 404 : 400, id ? "NoSuchUpload" : "InvalidRequest",
				 id ? "unknown uploadId for this key" : "POST of an object needs ?uploads or ?uploadId=");
		return;
	}
	if (strcmp(r->method, "DELETE") == 0) {
		sbx__rm_rf(dir, NULL);
		sbx__srv_reply_empty(r, 204);
		return;
	}
	complete(r, key, dir);
}
