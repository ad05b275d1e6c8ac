/* SPDX-License-Identifier: MIT */
/*
 * The Daytona-compatible API of `sbx serve` (docs/server.md, "Daytona API"):
 * the control plane under /api (Bearer auth with the server's key) and the
 * toolbox under /toolbox/{id}/ (what the Sandbox DTO's toolboxProxyUrl
 * points at; the deprecated /api/toolbox/{id}/toolbox/ prefix too). Its
 * sandboxes are the server's sandbox records (server.c), so the E2B API,
 * the timer and the state file see them too; what only Daytona has (name,
 * intervals, activity, sessions) hangs off the record's `ext`.
 */
#ifndef SBX_SERVER_DAYTONA_H
#define SBX_SERVER_DAYTONA_H

#include <jansson.h>
#include <pthread.h>

#include "../server_int.h"

#define DT_ORG_ID "sbx-local"
#define DT_TTL_BACKSTOP_S 60                  /* the provider's TTL past the deadline */
#define DT_NEVER_S (100.0 * 365 * 86400)      /* "no deadline" */
#define DT_LOG_MAX (16u << 20)      /* a session command's stdout or stderr as returned */

#define DT_S3_PREFIX "/api/object-storage/s3/"  /* the push-access storageUrl's path */
#define DT_BUCKET "daytona-volume-builds"         /* the SDK's default bucket name */
#define DT_REGION "us-east-1"
#define DT_CREDS 32                 /* push-access credentials kept (the oldest go first) */
#define DT_CRED_TTL_S 3600.0
#define DT_OBJECT_MAX SRV_UPLOAD_MAX             /* one object */
#define DT_OBJECTS_MAX (8ull << 30)              /* all objects together */

struct dt_session;
struct dt_snap;

/* Temporary object-storage credentials issued by push-access. */
struct dt_cred {
	char ak[21];
	char secret[65];
	char token[65];
	double expires;              /* unix seconds; 0 = unused slot */
};

/* The API's server-wide state (srv->daytona, made at first use). */
struct dt_state {
	pthread_mutex_t lk;
	struct dt_cred creds[DT_CREDS];
	unsigned next_cred;
	struct dt_snap *snaps;       /* snapshot.c; loaded from the state dir at first use */
	int loaded;
};

/* What a Daytona sandbox has beyond the server's record (guarded by lk). */
struct dt_ext {
	pthread_mutex_t lk;
	char *name;
	char *user;                  /* the DTO's user */
	long long auto_stop, auto_archive, auto_delete; /* minutes; auto_delete -1 = never */
	double created_at, last_activity;
	double cpu, memory_gb, disk_gb;
	json_t *build_info;          /* as received, or NULL */
	struct dt_session *sessions;
};

/* ---- router.c ------------------------------------------------------------ */

/* 1 for the paths this API serves (/api/..., /toolbox/...). */
int sbx__dt_match(const char *url);
int sbx__dt_authorize(struct srv_req *r);
int sbx__dt_is_upload(const char *method, const char *url);
void sbx__dt_route_begin(struct srv_req *r);
void sbx__dt_route(struct srv_req *r);

/* Control-plane error {statusCode, message, error, path, timestamp}. */
void sbx__dt_error(struct srv_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Toolbox error: the same plus {code, source: the daemon} (router.c). */
void sbx__dt_tb_error(struct srv_req *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The body as a JSON object ({} when empty); NULL after replying 400. */
json_t *sbx__dt_json_body(struct srv_req *r);

/* The server's Daytona state (made on first call). */
struct dt_state *sbx__dt_state(struct server *srv);

/* ---- objects.c: push-access and the S3 subset the SDK's client uses ------ */

/* 1 for an object-storage path (under DT_S3_PREFIX). */
int sbx__dt_s3_match(const char *url);
/* Checks the request's SigV4 signature against an issued credential, from
 * the headers alone; 0 after replying (S3's XML error). */
int sbx__dt_s3_authorize(struct srv_req *r);
/* PUT of an object: the streaming consumer, before the body. */
void sbx__dt_s3_begin(struct srv_req *r);
void sbx__dt_s3_route(struct srv_req *r);
/* 1 for an object key: '/'-separated segments of [A-Za-z0-9._-], never "."
 * or "..", at most 1024 bytes. */
int sbx__dt_s3_key_ok(const char *key);
/* S3's XML error {Code, Message, Resource}. */
void sbx__dt_s3_error(struct srv_req *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* STATE/server/daytona-objects/<bucket>. Owned. */
char *sbx__dt_objects_dir(struct server *srv);
/* objects_multipart.c: where part ?partNumber=&uploadId= of KEY goes (owned),
 * or -ENOENT for an unknown upload or a bad part number. */
int sbx__dt_mp_part_path(char **out, struct srv_req *r, const char *key);
/* POST ?uploads (create), POST ?uploadId= (complete), DELETE ?uploadId= (abort). */
void sbx__dt_mp_route(struct srv_req *r, const char *key);
/* GET /api/object-storage/push-access */
void sbx__dt_push_access(struct srv_req *r);
/* The file of object <org>/<hash>/context.tar, or NULL when the hash is
 * malformed. Owned. */
char *sbx__dt_context_path(struct server *srv, const char *hash);

/* ---- snapshot.c / snapshot_build.c ----------------------------------------- */

/* /api/snapshots[...]: seg[0] = "snapshots". */
void sbx__dt_snapshots(struct srv_req *r, char **seg, size_t n);
/* The store image of snapshot NAME (a name or id): 0, -ENOENT (no such
 * snapshot), -EAGAIN (not active yet; the message says its state). */
int sbx__dt_snapshot_image(struct server *srv, const char *name, char **image_out, sbx_error **e);
/* Builds DOCKERFILE with the context tars of HASHES (a JSON array of
 * strings, or NULL) unpacked as its context; the store alias in *alias. */
int sbx__dt_build(struct server *srv, const char *dockerfile, json_t *hashes, const char *slug, char **alias,
		  sbx_output_fn on_output, void *payload, sbx_error **e);

/* ---- sandbox.c ----------------------------------------------------------- */

/* /api/sandbox[...]: seg are the segments after "api". */
void sbx__dt_sandbox(struct srv_req *r, char **seg, size_t n);

/* ---- record.c ------------------------------------------------------------ */

/* A new Daytona part: defaults, or what the record's saved row says. */
struct dt_ext *sbx__dt_ext_new(struct srv_sandbox *s);
void sbx__dt_ext_free(void *ext);
/* Its part of the state row (called under srv->lock; takes the ext's lk). */
json_t *sbx__dt_ext_row(void *ext);
/* Sets the record's deadline (and the provider's TTL) from the intervals. */
void sbx__dt_apply_deadline(struct srv_sandbox *s);
/* The Sandbox DTO; state NULL = the record's (started or stopped); full
 * adds env and buildInfo (list items leave them out). */
json_t *sbx__dt_dto(struct srv_req *r, struct srv_sandbox *s, const char *state, int full);
/* http://<Host>/toolbox (a plain host[:port] only), else the loopback address. Owned. */
char *sbx__dt_proxy_url(struct srv_req *r);
/* A sandbox by id or name with a reference taken (NULL when unknown). */
struct srv_sandbox *sbx__dt_find(struct server *srv, const char *id_or_name);
/* The record's Daytona part, made with defaults for a sandbox the E2B API
 * (or an earlier run of the server) created. */
struct dt_ext *sbx__dt_ext(struct srv_sandbox *s);
/* Toolbox and API calls are activity: pushes the auto-stop deadline. */
void sbx__dt_touch(struct srv_sandbox *s);

/* ---- process.c / session.c / files.c (the toolbox) ---------------------- */

void sbx__dt_execute(struct srv_req *r, struct srv_sandbox *s);
void sbx__dt_session(struct srv_req *r, struct srv_sandbox *s, char **seg, size_t n);
void sbx__dt_sessions_free(struct dt_session *v);
void sbx__dt_files(struct srv_req *r, struct srv_sandbox *s, const char *op);
/* /files/find, /files/search, /files/replace: 1 when answered (files_search.c). */
int sbx__dt_files_search(struct srv_req *r, struct srv_sandbox *s, const char *op);
/* POST /files/bulk-upload (and the older /files/upload) before its body:
 * the streaming consumer (takes the reference on s); _end replies. */
void sbx__dt_upload_begin(struct srv_req *r, struct srv_sandbox *s);
void sbx__dt_upload_end(struct srv_req *r);
/* A toolbox path: absolute as given, relative against the working dir. */
char *sbx__dt_path(struct srv_sandbox *s, const char *path);
/* The daemon's error for a failed file call on path (frees e). */
void sbx__dt_file_error(struct srv_req *r, int rc, const char *path, sbx_error *e);
/* Text as a JSON string; bytes that are not UTF-8 become U+FFFD. */
json_t *sbx__dt_text(const char *data, size_t len);
/* The directory commands run in: the image's WorkingDir, else the user's home. */
char *sbx__dt_workdir(struct srv_sandbox *s);

#endif
