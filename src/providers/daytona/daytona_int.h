/* SPDX-License-Identifier: MIT */
/*
 * Private to src/providers/daytona: the Daytona client. api.c the control
 * plane (REST + Bearer key on /api: create, poll, get, delete, activity,
 * labels, list), codec.c the pure parts (the create body, the Sandbox DTO,
 * error and throttle mapping, multipart), toolbox.c the toolbox daemon
 * (process/execute, sessions, bulk file transfer), daytona.c the ops table.
 */
#ifndef SBX_PROVIDERS_DAYTONA_INT_H
#define SBX_PROVIDERS_DAYTONA_INT_H

#include <stddef.h>

#include <jansson.h>

#include <sbx/process.h>
#include <sbx/sys/provider.h>

#include "../../util/buf.h"

#define DTN_DEFAULT_URL "https://app.daytona.io/api"
/* Largest control-plane or toolbox JSON reply kept. */
#define DTN_BODY_MAX (32u << 20)

struct dtn_ctx {
	sbx_runtime *rt;
	char *api_url;   /* DAYTONA_API_URL, no trailing '/' */
	char *target;    /* DAYTONA_TARGET or NULL */
	char *org_id;    /* DAYTONA_ORGANIZATION_ID (JWT auth) or NULL */
	char *key;       /* secret: Authorization: Bearer only, never logged */
	double create_deadline_s; /* a create not `started` by then is deleted and retried */
	int exec_execute;         /* SBX_DAYTONA_EXEC=execute: process/execute, streams merged */
};

/* A sandbox as the API reports it. */
struct dtn_info {
	char *id;
	char *state;        /* "creating", "started", "error", ... */
	char *snapshot;
	char *toolbox_url;  /* toolboxProxyUrl, or NULL */
	char *error_reason;
	char **labels;      /* "k=v", NULL-terminated */
	double created_at;
	double expires_at;   /* autoDestroyAt, else last activity + autoStopInterval; 0 = none */
};
void sbx__dtn_info_clear(struct dtn_info *i);
int sbx__dtn_info_parse(struct dtn_info *out, json_t *o, sbx_error **err);

/* What a create sends. */
struct dtn_create {
	const char *image;           /* "snapshot:NAME", a Dockerfile (has '\n'), or an image */
	const char *const *labels;   /* "k=v" */
	const char *const *env;      /* "K=V" */
	const char *user;
	const char *target;
	double cpus;
	unsigned memory_mb, disk_mb;
	unsigned ttl_s;              /* the episode clock: 0 = none */
};
/* The POST /sandbox body. Owned. */
json_t *sbx__dtn_create_body(const struct dtn_create *cr);
/* autoStopInterval minutes for a TTL (rounded up, at least 1; 0 = never). */
unsigned sbx__dtn_minutes(unsigned ttl_s);

/* Maps a reply: 2xx 0; 401/403 -EACCES; 404 -ENOENT; 409 -EEXIST; 408
 * -ETIMEDOUT; 429 and quota bodies -EAGAIN (http_status 429); 400/422
 * -EINVAL; else -EIO. The message names WHAT and carries Daytona's text. */
int sbx__dtn_map_http(long status, const char *body, size_t len, const char *what, sbx_error **err);
/* 1 when Daytona's message is a quota or capacity limit (a throttle). */
int sbx__dtn_is_quota(const char *msg);

/* State polling: 1 ready, 0 keep polling, <0 failed (error/build_failed/destroyed). */
int sbx__dtn_state_step(const char *state);

/* Multipart. A part header for a named field (filename optional). Owned. */
char *sbx__dtn_part_head(const char *boundary, const char *name, const char *filename);
/* Walks a multipart body: fn(name, filename, data, len, ud) per part; <0 stops.
 * @return 0, -EPROTO (malformed), or fn's code. */
int sbx__dtn_multipart_parse(const char *body, size_t len, const char *content_type,
			     int (*fn)(const char *name, const char *filename, const char *data, size_t n,
				       void *ud),
			     void *ud);

/* snapshot.c: task images as digest-named snapshots (desc.c's task_image). */
int sbx__dtn_task_image(char **image_out, char **how_out, sbx_runtime *rt, const sbx_task_env *env,
			sbx_error **err);
/* "sbx-<slug>-<12 hex>" of the Dockerfile text and the context's hash. Owned. */
char *sbx__dtn_snapshot_name(const char *slug, const char *dockerfile, const char *ctx_hash);
/* 1 active, 0 keep polling (pending, building, ...), -1 failed (error, build_failed, ...). */
int sbx__dtn_snapshot_step(const char *state);
/* The POST /snapshots body: name and buildInfo {dockerfileContent, contextHashes}. Owned. */
json_t *sbx__dtn_snapshot_body(const char *name, const char *dockerfile, const char *ctx_hash);

/* api.c */
int sbx__dtn_ctx_new(struct dtn_ctx **out, sbx_runtime *rt, sbx_error **err);
void sbx__dtn_ctx_free(struct dtn_ctx *c);
/* One JSON request; *out owned (NULL when no body). URL = api_url + path
 * unless path is absolute (http...). */
int sbx__dtn_call(json_t **out, struct dtn_ctx *c, const char *method, const char *path, json_t *body,
		  long timeout_ms, const char *what, sbx_error **err);
/* Raw request with a body and content type; the reply into resp. */
int sbx__dtn_raw(sbx_buf *resp, char *ctype_out, size_t ctype_cap, struct dtn_ctx *c, const char *method,
		 const char *url, const char *ctype, const void *body, size_t body_len, long timeout_ms,
		 const char *what, sbx_error **err);
int sbx__dtn_create(struct dtn_info *out, struct dtn_ctx *c, const struct dtn_create *cr, sbx_error **err);
int sbx__dtn_get(struct dtn_info *out, struct dtn_ctx *c, const char *id, sbx_error **err);
int sbx__dtn_delete(struct dtn_ctx *c, const char *id, sbx_error **err);
int sbx__dtn_activity(struct dtn_ctx *c, const char *id, unsigned ttl_s, sbx_error **err);
int sbx__dtn_list(struct dtn_info **out, size_t *n, struct dtn_ctx *c, sbx_error **err);

/* toolbox.c */
struct dtn_sb {
	struct dtn_ctx *ctx;
	char *id;
	char *tb;        /* toolbox base: <toolboxProxyUrl>/<id> */
	char *user;      /* default exec user or NULL */
	char *workdir;
	char **env;      /* the sandbox's env, re-exported per exec */
	int destroyed;
};
int sbx__dtn_exec(sbx_exec_result *out, struct dtn_sb *sb, const sbx_exec_opts *o, sbx_error **err);
int sbx__dtn_write(struct dtn_sb *sb, const char *path, const void *data, size_t len, unsigned mode,
		   sbx_error **err);
int sbx__dtn_read(void **data_out, size_t *len_out, struct dtn_sb *sb, const char *path, size_t max,
		  sbx_error **err);
/* xfer.c: trees as a tar through the file routes. */
int sbx__dtn_upload(struct dtn_sb *sb, const char *src, const char *dst, sbx_error **err);
int sbx__dtn_download(struct dtn_sb *sb, const char *src, const char *dst, sbx_error **err);
/* Shell-quotes s. Owned. */
char *sbx__dtn_shq(const char *s);
/* The wrapper a session runs for one exec (cwd, env, user, stdin file, pid file). Owned. */
char *sbx__dtn_wrap(const sbx_exec_opts *o, const char *default_user, const char *default_cwd,
		    char *const *sb_env, const char *stdin_path, const char *pid_path);

#endif
