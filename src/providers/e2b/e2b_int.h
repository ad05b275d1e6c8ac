/* SPDX-License-Identifier: MIT */
/*
 * Private to src/providers/e2b: the E2B client. http.c puts requests on the
 * process's shared HTTP client (util/http.c); api.c the control plane (REST);
 * envd.c the data plane (Connect JSON: unary calls, the 5-byte envelope
 * stream parser, events, file-system RPCs); proc.c commands (exec and
 * streamed processes); files.c file transfer; codec.c URLs, times and error
 * mapping; templates.c template builds; e2b.c the ops table.
 */
#ifndef SBX_PROVIDERS_E2B_INT_H
#define SBX_PROVIDERS_E2B_INT_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include <sbx/process.h>
#include <sbx/sys/provider.h>

#include "../../util/buf.h"

#define E2B_ENVD_PORT 49983
#define E2B_DEFAULT_DOMAIN "e2b.app"
/* Largest control-plane or unary RPC response body kept. */
#define E2B_BODY_MAX (8u << 20)
/* Largest single Connect envelope accepted. */
#define E2B_ENVELOPE_MAX (16u << 20)

/* ---- configuration (codec.c) ---- */

/* Endpoints and key, read once per runtime from the environment and the
 * credential registry. */
struct e2b_cfg {
	char *api_url;      /* E2B_API_URL, else <scheme>://api.<domain>; no trailing '/' */
	char *sandbox_url;  /* E2B_SANDBOX_URL verbatim (header routing), or NULL */
	char *domain;       /* E2B_DOMAIN, else e2b.app */
	char *scheme;       /* SBX_E2B_URL_SCHEME / OPENENV_E2B_URL_SCHEME, else https */
	char *api_key;      /* secret: sent as X-API-KEY only, never logged */
};

/* Fills cfg from the environment (no key). getenv_fn NULL = getenv. */
void sbx__e2b_cfg_from_env(struct e2b_cfg *c, const char *(*getenv_fn)(const char *));
void sbx__e2b_cfg_clear(struct e2b_cfg *c);
/* The envd base URL of a sandbox: E2B_SANDBOX_URL verbatim when set, else
 * <scheme>://49983-<id>.<domain> (domain from the create response when
 * non-empty, else the configured one). Owned. */
char *sbx__e2b_envd_url(const struct e2b_cfg *c, const char *id, const char *resp_domain);

/* ---- codecs (codec.c) ---- */

/* Percent-encodes for a query value or path segment. Owned. */
char *sbx__e2b_urlenc(const char *s);
/* RFC 3339 -> unix seconds (0 when unparsable). */
double sbx__e2b_parse_time(const char *s);

/* Maps a control-plane reply to 0 or a negative code with a message naming
 * WHAT: 401/403 -EACCES, 404 -ENOENT, 409 -EEXIST, 400/422 -EINVAL, 429/503
 * and rate-limit bodies -EAGAIN, other -EIO; http_status is recorded. */
int sbx__e2b_map_http(long status, const char *body, size_t len, const char *what, sbx_error **err);
/* Connect error code string -> negative errno. */
int sbx__e2b_map_connect_code(const char *code);

/* ---- HTTP (http.c) ---- */

struct e2b_req {
	const char *method;          /* "GET", "POST", "DELETE", "PUT" */
	const char *url;
	const char *const *headers;  /* "Name: value" lines, NULL-terminated; borrowed */
	const void *body;            /* request body (memory), or NULL */
	size_t body_len;
	int body_fd;                 /* or: prefix + this file + suffix (>= 0) */
	const void *prefix, *suffix;
	size_t prefix_len, suffix_len;
	off_t fd_len;
	long timeout_ms;             /* whole transfer; 0 = none */
	/* Response: into `resp` (bounded, may be NULL) unless on_data is set. */
	sbx_buf *resp;
	int (*on_data)(const char *data, size_t len, void *payload); /* <0 aborts */
	void *payload;
	const volatile int *cancel;  /* non-zero aborts the transfer */
	/* out */
	long status;
	char content_type[128];
	char retry_after[32];
	char next_token[512];
};

/* Performs one request on the shared client (connections are reused).
 * @return 0 when a response arrived (any status), -ETIMEDOUT, -ECANCELED,
 *         -ECONNREFUSED, -E2BIG (resp full), -EIO (transport), or the
 *         on_data code (err then unset). */
int sbx__e2b_http(struct e2b_req *rq, sbx_error **err);

/* ---- control plane (api.c) ---- */

struct e2b_ctx {
	sbx_runtime *rt;
	struct e2b_cfg cfg;
};

/* Resolves the key through the credential registry. */
int sbx__e2b_ctx_new(struct e2b_ctx **out, sbx_runtime *rt, sbx_error **err);
void sbx__e2b_ctx_free(struct e2b_ctx *c);

/* A sandbox as the API reports it. */
struct e2b_info {
	char *id;
	char *template_id;
	char *token;        /* envdAccessToken or NULL */
	char *domain;       /* or NULL */
	char *envd_version;
	char *state;        /* "running", "paused" */
	char **metadata;    /* "k=v", NULL-terminated */
	double started_at, end_at;
};
void sbx__e2b_info_clear(struct e2b_info *i);
/* Parses a Sandbox / SandboxDetail / ListedSandbox object. */
int sbx__e2b_info_parse(struct e2b_info *out, json_t *o, sbx_error **err);

/* JSON request to the control plane; *out (owned, may be NULL for 204) is the body. */
int sbx__e2b_api(json_t **out, struct e2b_ctx *c, const char *method, const char *path, json_t *body,
		 const char *what, struct e2b_req *rq_out, sbx_error **err);

struct e2b_create {
	const char *template_id;
	unsigned timeout_s;
	const char *const *metadata; /* "k=v" */
	const char *const *env;      /* "K=V" */
	int internet;
};
int sbx__e2b_api_create(struct e2b_info *out, struct e2b_ctx *c, const struct e2b_create *cr,
			sbx_error **err);
int sbx__e2b_api_get(struct e2b_info *out, struct e2b_ctx *c, const char *id, sbx_error **err);
int sbx__e2b_api_connect(struct e2b_info *out, struct e2b_ctx *c, const char *id, unsigned timeout_s,
			 sbx_error **err);
/* 404 -> -ENOENT. */
int sbx__e2b_api_delete(struct e2b_ctx *c, const char *id, sbx_error **err);
int sbx__e2b_api_timeout(struct e2b_ctx *c, const char *id, unsigned timeout_s, sbx_error **err);
int sbx__e2b_api_pause(struct e2b_ctx *c, const char *id, sbx_error **err);
/* Every page; filter "k=v" metadata (may be NULL). */
int sbx__e2b_api_list(struct e2b_info **out, size_t *n_out, struct e2b_ctx *c,
		      const char *const *filter, sbx_error **err);
/* Builds the metadata query value "k=v&k2=v2" (each part encoded). Owned. */
char *sbx__e2b_metadata_query(const char *const *kv);

/* ---- data plane (envd.c) ---- */

/* What every envd call needs: a copy, so processes outlive nothing. */
struct e2b_conn {
	char *base;      /* envd base URL */
	char *id;
	char *token;     /* or NULL */
};
void sbx__e2b_conn_copy(struct e2b_conn *dst, const struct e2b_conn *src);
void sbx__e2b_conn_clear(struct e2b_conn *c);

/* Headers for an envd call; user NULL = none. Owned: free with
 * sbx__http_headers_free (the access token is in there). */
char **sbx__e2b_envd_headers(const struct e2b_conn *c, const char *content_type,
					 const char *user, long timeout_ms, int stream);

/* Incremental Connect envelope parser. */
struct e2b_envelopes {
	sbx_buf pending;
	int ended;       /* the 0x02 end-stream frame arrived */
};
void sbx__e2b_envelopes_init(struct e2b_envelopes *p);
void sbx__e2b_envelopes_free(struct e2b_envelopes *p);
/* Feeds bytes; calls fn(flags, payload, len, ud) per complete envelope.
 * @return 0, -EPROTO (compressed, oversized, data after end-stream), or fn's <0. */
int sbx__e2b_envelopes_feed(struct e2b_envelopes *p, const char *data, size_t len,
			    int (*fn)(unsigned flags, const char *msg, size_t len, void *ud), void *ud);
/* Frames one JSON message as an envelope. Owned. */
char *sbx__e2b_envelope(const char *json, size_t len, size_t *out_len);

enum e2b_ev { E2B_EV_NONE, E2B_EV_START, E2B_EV_DATA, E2B_EV_END, E2B_EV_KEEPALIVE };
struct e2b_event {
	enum e2b_ev type;
	unsigned pid;
	int fd;          /* DATA: 1 stdout, 2 stderr */
	char *data;      /* DATA: decoded bytes (owned) */
	size_t len;
	int exit_code;   /* END */
	int exited;
	char *status;    /* END: "exit status 3", "signal: killed" (owned) */
	char *error;     /* END: error text (owned) */
};
/* Parses {"event":{...}} (process Start/Connect). */
int sbx__e2b_event_parse(struct e2b_event *out, const char *json, size_t len);
void sbx__e2b_event_clear(struct e2b_event *e);
/* Parses an end-stream payload: 0 on `{}`, else the mapped code with the message set. */
int sbx__e2b_end_stream(const char *json, size_t len, const char *what, sbx_error **err);
/* "signal: killed" -> 9 etc.; 0 when not a signal status. */
int sbx__e2b_status_signal(const char *status);

/* Unary Connect call: POST <base>/<svc>/<method>. *out owned. */
int sbx__e2b_unary(json_t **out, const struct e2b_conn *c, const char *method, json_t *req,
		   const char *user, const char *what, sbx_error **err);

/* File-system RPCs (as root). */
int sbx__e2b_fs_stat(sbx_file_info *out, const struct e2b_conn *c, const char *path, sbx_error **err);
int sbx__e2b_fs_list(sbx_file_info **out, size_t *n_out, const struct e2b_conn *c, const char *dir,
		     unsigned depth, sbx_error **err);
int sbx__e2b_fs_mkdir(const struct e2b_conn *c, const char *path, sbx_error **err);
int sbx__e2b_fs_move(const struct e2b_conn *c, const char *from, const char *to, sbx_error **err);
int sbx__e2b_fs_remove(const struct e2b_conn *c, const char *path, sbx_error **err);
/* EntryInfo JSON -> sbx_file_info. */
int sbx__e2b_entry_parse(sbx_file_info *out, json_t *o);

/* ---- sandboxes, commands and files ---- */

struct e2b_sb {
	struct e2b_ctx *ctx;
	struct e2b_conn conn;
	char *user;      /* default exec user or NULL */
	char *workdir;   /* default cwd or NULL */
	int destroyed;
};

/* exec.c: one process Start stream, run on the calling thread. */
struct e2b_stream {
	struct e2b_conn conn;        /* copy: the stream outlives nothing */
	char *user;
	char *body;                  /* the request envelope */
	size_t body_len;
	long timeout_ms;             /* Connect-Timeout-Ms (process deadline); 0 = none */
	double timeout_s;
	volatile int cancel;         /* set to abort the transfer */
	int (*on_start)(struct e2b_stream *s);
	int (*on_data)(struct e2b_stream *s, int fd, const char *d, size_t n);
	void *ud;
	/* results */
	int started, got_end, got_end_stream;
	unsigned pid;
	int exit_code;
	char *end_status, *end_error;
	int rpc_rc;                  /* error end-stream code, 0 if none */
	char *rpc_msg;
	double t0, t1;
	struct e2b_envelopes env;
	sbx_buf raw;                 /* a non-stream (error) reply */
	int is_stream;               /* the reply is application/connect+json */
	const char *ctype;           /* borrowed from the request while it runs */
};
void sbx__e2b_stream_init(struct e2b_stream *s, const struct e2b_sb *sb, const sbx_exec_opts *o,
			  int want_stdin);
/* @return 0 when the stream completed (see the results), else the failure. */
int sbx__e2b_stream_run(struct e2b_stream *s, sbx_error **err);
void sbx__e2b_stream_clear(struct e2b_stream *s);
/* wait(2)-style status and timed_out from a completed stream. */
void sbx__e2b_stream_status(const struct e2b_stream *s, int *status, int *timed_out);
/* 1 when a failed stream means "the command could not be started". */
int sbx__e2b_stream_start_failed(const struct e2b_stream *s, int rc);

int sbx__e2b_send_signal(const struct e2b_conn *c, unsigned pid, int sig, sbx_error **err);

/* Feeds stdin from an fd (owned) or memory, then closes it (a thread). */
struct e2b_feeder {
	pthread_t thr;
	int running;
	const struct e2b_conn *conn;
	unsigned pid;
	int fd;
	const char *data;
	size_t len;
	volatile int *cancel;
};
void sbx__e2b_feeder_start(struct e2b_feeder *f);
void sbx__e2b_feeder_join(struct e2b_feeder *f);

int sbx__e2b_exec(sbx_exec_result *out, struct e2b_sb *sb, const sbx_exec_opts *o, sbx_error **err);
/* Runs a shell command as root; fails unless it exits 0. */
int sbx__e2b_root_sh(struct e2b_sb *sb, const char *cmd, double timeout_s, sbx_error **err);
/* proc.c */
int sbx__e2b_proc_start(void **out, struct sbx_process_fds *fds, struct e2b_sb *sb,
			const sbx_exec_opts *o, int keep_stdin, sbx_error **err);
int sbx__e2b_proc_poll(void *p, int *status, int *timed_out, int block, sbx_error **err);
int sbx__e2b_proc_signal(void *p, int sig, sbx_error **err);
void sbx__e2b_proc_free(void *p, int kill);
/* Shell-quotes s with single quotes. Owned. */
char *sbx__e2b_shq(const char *s);

/* files.c */
int sbx__e2b_write(struct e2b_sb *sb, const char *path, const void *data, size_t len, unsigned mode,
		   sbx_error **err);
int sbx__e2b_read(void **data_out, size_t *len_out, struct e2b_sb *sb, const char *path, size_t max,
		  sbx_error **err);
int sbx__e2b_upload(struct e2b_sb *sb, const char *src, const char *dst, sbx_error **err);
int sbx__e2b_download(struct e2b_sb *sb, const char *src, const char *dst, sbx_error **err);
/* Multipart body around one file part named `file`; prefix/suffix owned. */
void sbx__e2b_multipart(char **prefix, size_t *plen, char **suffix, size_t *slen, char *ctype,
			size_t ctype_len, const char *filename);

#endif
