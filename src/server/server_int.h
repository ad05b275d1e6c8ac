/* SPDX-License-Identifier: MIT */
/*
 * Private interface of `sbx serve`, the E2B-compatible server: the server
 * and sandbox records, the HTTP glue, and one section per source file
 * (the API handlers' sections are in handlers.h, included at the end).
 * Threading (docs/server.md, "Threads"): libmicrohttpd's one event thread
 * reads requests and writes replies; handlers run on the worker pool
 * (workers.c) while their connection is suspended; waits without a thread
 * (process output, stream wake-ups) go through the notifier (loop.c). The sandbox table
 * and every sandbox's mutable fields (deadline, paused, op count, dead) are
 * guarded by srv->lock, which is never held across I/O; calls into a sandbox
 * hold an op reference instead of a lock (sbops.c); each process has its own
 * mutex.
 */
#ifndef SBX_SERVER_INT_H
#define SBX_SERVER_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/sbx.h>

#include "../util/buf.h"
#include "../util/lazy.h"
#include "serve.h"

/* envd's version today: the SDK gates file metadata (0.6.2), watch-event
 * entries (0.6.3) and network-mount watching (0.6.4) on it. */
#define SRV_ENVD_VERSION "0.6.13"
#define SRV_CLIENT_ID "6532622b"
#define SRV_JSON_MAX (1u << 20)         /* control-plane and RPC bodies */
#define SRV_UPLOAD_MAX (512u << 20)     /* /files uploads and template file tars (streamed) */
#define SRV_MP_HEADERS_MAX (16u << 10)  /* one multipart part's header block */
#define SRV_UPLOAD_FILES_MAX 4096u      /* files written by one multipart upload */
#define SRV_MAX_CONNECTIONS 8192u     /* --max-connections default */
#define SRV_MAX_CONNECTIONS_PER_IP 4096u
#define SRV_IDLE_TIMEOUT_S 60u
#define SRV_READ_MAX (1024u << 20)      /* /files downloads without path fds (remote providers) */
#define SRV_ENVD_PORT 49983u
#define SRV_PROXY_IDLE_TIMEOUT_S 600u   /* --proxy-idle-timeout default */
#define SRV_PROXY_PER_SANDBOX 256u      /* --max-proxy-connections default */
#define SRV_TRAFFIC_HEADER "e2b-traffic-access-token"
#define SRV_WORKERS 64u                 /* --workers default */

struct srv_proxy;
struct srv_relays;
struct srv_loop;
struct srv_pool;
struct server;

/* ---- loop.c: the notifier ---------------------------------------------- */

/* An fd watched by the notifier; cb runs on its thread, once per arm. */
struct srv_watch {
	int fd;
	int added;
	void (*cb)(struct srv_watch *w, uint32_t events);
	void *ctx;
};
/* A one-shot timer of the notifier; cb runs on its thread. */
struct srv_timer {
	double at;                    /* monotonic */
	int linked, firing;
	void (*cb)(struct srv_timer *t);
	void *ctx;
	struct srv_timer *next;
};
int sbx__srv_loop_start(struct server *srv, sbx_error **err);
void sbx__srv_loop_stop(struct server *srv);
void sbx__srv_loop_free(struct server *srv);
/* Arms w (fd, cb set) for events (EPOLLIN, EPOLLOUT): cb runs once. 0 or -errno. */
int sbx__srv_loop_arm(struct server *srv, struct srv_watch *w, uint32_t events);
/* Removes w; when it returns, cb is not running and will not run. */
void sbx__srv_loop_unwatch(struct server *srv, struct srv_watch *w);
/* Arms (or moves) t to fire at `at`; cancel: when it returns, cb is done. */
void sbx__srv_timer_set(struct server *srv, struct srv_timer *t, double at);
void sbx__srv_timer_cancel(struct server *srv, struct srv_timer *t);

/* ---- workers.c: the worker pool ------------------------------------------ */

int sbx__srv_pool_start(struct server *srv, unsigned max, sbx_error **err);
/* Runs fn(arg) on a worker (queued while all --workers are busy). */
void sbx__srv_pool_submit(struct server *srv, void (*fn)(void *), void *arg);
/* 1 once no job runs or waits, 0 at `until` (monotonic). */
int sbx__srv_pool_wait_idle(struct server *srv, double until);
/* Ends the threads (after the queued jobs): 1 when all ended by `until`. */
int sbx__srv_pool_stop(struct server *srv, double until);
void sbx__srv_pool_free(struct server *srv);
void sbx__srv_pool_stats(struct server *srv, unsigned *threads, unsigned *busy);

struct srv_build;
struct sqlite3;
struct dt_state;

/* One started process of a sandbox (envd's process table entry). */
struct srv_proc {
	struct srv_sandbox *owner;   /* the pump holds a reference */
	struct server *srv;
	sbx_process *p;
	pid_t pid;
	char *tag;
	json_t *config;              /* ProcessConfig as received, for List */
	int pty;                     /* output goes out as "pty" data */
	pthread_mutex_t lk;
	pthread_cond_t cv;
	pthread_mutex_t in_lk;       /* stdin: SendInput vs CloseStdin (never lk, which
	                                the output pump needs while input waits) */
	struct srv_sub *subs;        /* live streams attached to the output */
	int exited;                  /* status valid */
	int status, timed_out;
	int sandbox_gone;            /* it ended because its sandbox was killed */
	int refs;                    /* guarded by lk */
	int in_table;                /* guarded by owner->plock */
	struct srv_proc *next;       /* owner's list */
	/* the pump (envd_process.c): notifier watches, one step at a time */
	struct srv_watch pw[3];      /* stdout, stderr, status */
	struct srv_timer ptimer;     /* the drain after the exit */
	unsigned ready;              /* guarded by lk: watches fired */
	int pumping;                 /* guarded by lk: a step is queued or runs */
	int p_exited, p_status, p_timed_out; /* the pump's own view */
	double drain_until;
};

/* One subscriber (a Start or Connect stream) of a process's output. */
struct srv_sub {
	struct srv_stream *st;       /* woken per event */
	sbx_buf q;                   /* encoded envelopes not yet sent */
	int overflow;
	struct srv_sub *next;
};

struct srv_sandbox {
	char id[32];
	char *template_id;
	char *alias;                 /* image name it was created from */
	char token[65];
	char traffic_token[65];      /* allowPublicTraffic: false: user ports need it */
	int private_traffic;
	json_t *metadata;            /* object */
	json_t *env_vars;            /* object */
	double started_at, end_at;   /* unix seconds */
	int paused;
	int auto_pause;              /* autoPause: the deadline pauses instead of killing */
	int auto_resume;             /* autoResume.enabled: a request resumes it (autoresume.c) */
	long long timeout_s;         /* the timeout it was created with (an auto-resume's) */
	double stat_t, stat_cpu_s;   /* the previous metrics sample (cpuUsedPct) */
	int allow_internet;
	json_t *allow_out, *deny_out; /* network.allowOut / denyOut as given (arrays) or NULL */
	char *user;                  /* image default user or NULL (root) */
	char *workdir;               /* image WorkingDir or NULL */
	sbx_sandbox *sb;
	struct server *srv;
	pthread_mutex_t plock;       /* the process list */
	struct srv_proc *procs;
	int refs;                    /* guarded by srv->lock, like the fields below */
	int ops;                     /* library calls in flight on sb */
	int dead;                    /* removed from the table; no new calls */
	int finish_pending;          /* killed by id while calls were in flight */
	int transition;              /* a pause or resume is under way */
	void *ext;                   /* the Daytona API's part (daytona/), set under srv->lock */
	void (*ext_free)(void *ext); /* runs when the record is freed */
	json_t *(*ext_row)(void *ext); /* its part of the state row (called under srv->lock) */
	json_t *ext_saved;           /* the row's "ext" as loaded, until ext is rebuilt from it */
};

struct srv_metrics {
	atomic_ulong creates, create_failures, destroys, timeouts, execs, requests;
	atomic_ulong errors[600];    /* by HTTP status */
	atomic_ulong create_buckets[12];
	atomic_ulong create_count;
	_Atomic double create_sum;
};

struct server {
	struct srv_config cfg;
	sbx_runtime *rt;
	char server_id[17];           /* label sbx.server=<id> */
	char *key_path;
	char *api_key;                /* guarded by key_lock */
	double key_mtime;
	pthread_mutex_t key_lock;
	struct sqlite3 *db;
	pthread_mutex_t db_lock;
	pthread_mutex_t lock;         /* table */
	pthread_cond_t timer_cv;
	struct srv_sandbox **v;
	size_t n, cap;
	unsigned creating;
	atomic_int stopping;
	struct srv_metrics m;
	pthread_mutex_t build_lock;
	struct srv_build *builds;
	unsigned port;
	int abandoned;                /* stopped with workers still busy */
	struct srv_relays *relays;    /* proxied connections (relay.c) */
	struct dt_state *daytona;     /* the Daytona API's snapshots and credentials (daytona/) */
	char **pool_keys;             /* specs kept warm (pool.c) */
	struct srv_loop *loop;        /* the notifier (loop.c) */
	struct srv_pool *pool;        /* the workers (workers.c) */
	pthread_mutex_t parks_lk;     /* connections that may park (woken at shutdown) */
	struct srv_park *parks;
};

/* Waits for the Daytona API's snapshot builds and frees its state (daytona/snapshot.c). */
void sbx__dt_free(struct server *srv);

/* ---- http.c -------------------------------------------------------------- */

struct MHD_Connection;
struct srv_req;

/* A connection parked from inside a content reader (http.c): suspended
 * until woken by a producer, a time or an fd's readiness. */
struct srv_park {
	struct server *srv;
	struct MHD_Connection *c;
	pthread_mutex_t lk;
	atomic_uint gen;              /* wakes so far */
	int parked;
	int inited, quiet;
	struct srv_timer timer;
	struct srv_watch watch;       /* fd -1 = none */
	struct srv_park *pnext, *pprev; /* srv->parks */
};
void sbx__srv_park_init(struct srv_park *p, struct server *srv, struct MHD_Connection *c);
/* From a content reader that has nothing to send: suspends the connection
 * until sbx__srv_park_wake(), `until` (monotonic, 0 = none) or fd being
 * ready for `events` (fd -1 = none), unless a wake came after gen was read
 * (sbx__srv_park_gen): then 0, try again; 1 when parked (return 0). */
int sbx__srv_park(struct srv_park *p, unsigned gen, double until, int fd, uint32_t events);
unsigned sbx__srv_park_gen(struct srv_park *p);
/* Resumes a parked connection, or makes the next park return 0. Any thread. */
void sbx__srv_park_wake(struct srv_park *p);
/* The notifier and the shutdown's wake-up let go of p (before its fd is
 * closed); producers may still wake it. */
void sbx__srv_park_quiesce(struct srv_park *p);
/* Before the fd is closed or p freed (quiesces first). */
void sbx__srv_park_fini(struct srv_park *p);

#define SRV_FILL_MORE 0               /* appended to out */
#define SRV_FILL_DONE 1               /* appended the last frame */
#define SRV_FILL_WAIT 2               /* nothing yet: see wake_at, wake_fd */

/* A server-streaming response: `fill` appends envelopes to `out` and never
 * blocks (it runs on the event thread): SRV_FILL_MORE, SRV_FILL_DONE, or
 * SRV_FILL_WAIT when it has nothing, after setting wake_at (monotonic, 0 =
 * none) and wake_fd (readable wakes it; -1 = none); a producer wakes it
 * with sbx__srv_stream_wake(). */
struct srv_stream {
	struct server *srv;
	struct MHD_Connection *c;      /* the idle timeout restarts per event */
	sbx_buf out;
	size_t off;
	int done;
	int (*fill)(struct srv_stream *s);
	void (*fini)(struct srv_stream *s);
	double keepalive_s;           /* 0 = none */
	double deadline;              /* monotonic, 0 = none */
	double wake_at;
	int wake_fd;
	void *ctx;
	struct srv_park park;         /* http.c */
};
/* A producer has something for s (any thread). */
void sbx__srv_stream_wake(struct srv_stream *s);
/* At shutdown: every parked connection is woken (fills see srv->stopping). */
void sbx__srv_parks_wake_all(struct server *srv);

struct srv_req {
	struct server *srv;
	struct MHD_Connection *c;
	const char *method;
	const char *url;
	sbx_buf body;                 /* buffered bodies (JSON, RPC): at most SRV_JSON_MAX */
	uint64_t body_in;             /* body bytes received, buffered or streamed */
	uint64_t body_cap;            /* past this the connection ends */
	int upload;                   /* an upload endpoint: streamed to `feed`, never buffered */
	/* An upload's consumer, set by sbx__srv_route_begin() once the headers
	 * are authorized: feed gets the body as it arrives (it cannot answer:
	 * MHD queues replies only before or after the body, so it remembers
	 * errors for the final call); up_free runs when the request ends. */
	void (*feed)(struct srv_req *r, const char *data, size_t len);
	void (*up_free)(struct srv_req *r);
	void *up;
	int too_big;
	int status;
	double t0;
	char sandbox_id[32];
	int queued;
	int authorized;               /* headers checked; the body may be read */
	struct srv_sandbox *sb;       /* data plane: the sandbox (a reference) */
	int begun;                    /* on_request saw the headers */
	char *raw_uri;                /* the request target as sent (path and query) */
	unsigned proxy_port;          /* a user port of sb: proxied (proxy_http.c) */
	struct srv_proxy *proxy;
	/* http.c: the phases run on workers while the connection is suspended */
	atomic_int busy;              /* a job runs: the connection is suspended */
	int recall;                   /* MHD repeats the first call after a begin job */
	char *chunk;                  /* body bytes a feed job is consuming (a copy) */
	size_t chunk_n, chunk_cap;
	int final_done;               /* the route job finished */
};

int sbx__srv_http_start(struct server *srv, void **daemon_out, unsigned *port_out, sbx_error **err);
void sbx__srv_http_stop(struct server *srv, void *daemon);
const char *sbx__srv_header(struct srv_req *r, const char *name);
const char *sbx__srv_query(struct srv_req *r, const char *name);
void sbx__srv_reply_json(struct srv_req *r, int status, json_t *body); /* steals body */
void sbx__srv_reply_empty(struct srv_req *r, int status);
void sbx__srv_reply_bytes(struct srv_req *r, int status, const char *ctype, void *data, size_t len); /* takes data */
/* Streams size bytes of a regular file (takes fd). */
void sbx__srv_reply_fd(struct srv_req *r, int status, const char *ctype, int fd, uint64_t size);
void sbx__srv_reply_text(struct srv_req *r, int status, const char *ctype, const char *text);
/* REST error {"code":status,"message":...}. */
void sbx__srv_reply_error(struct srv_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Unary Connect error {"code":"not_found","message":...}. */
void sbx__srv_reply_connect_error(struct srv_req *r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
struct MHD_Response;
/* Queues resp (and destroys this reference) with status and Content-Type. */
void sbx__srv_queue(struct srv_req *r, int status, struct MHD_Response *resp, const char *ctype);
/* Counts as activity for the connection's idle timeout. */
void sbx__srv_touch(struct srv_req *r);
void sbx__srv_conn_touch(struct MHD_Connection *c, unsigned idle_s);
/* Starts a streaming response; takes ownership of s (fini runs at the end). */
void sbx__srv_reply_stream(struct srv_req *r, struct srv_stream *s);

/* ---- router.c ------------------------------------------------------------ */

/* Checks credentials from the headers alone, before any body byte: 1 to go
 * on, 0 after queueing the error. Data plane: takes r->sb. */
int sbx__srv_authorize(struct srv_req *r);
/* 1 for the endpoints whose bodies are streamed (POST /files, PUT of a
 * template's files): bounded by SRV_UPLOAD_MAX, never buffered. */
int sbx__srv_is_upload(const char *method, const char *url);
/* After authorization, before the body: sets up an upload's consumer. */
void sbx__srv_route_begin(struct srv_req *r);
void sbx__srv_route(struct srv_req *r);
/* Splits url path into at most max segments (owned copy in *buf). */
size_t sbx__srv_split_path(char **segs, size_t max, char **buf, const char *path);

/* ---- proxy_route.c: user ports ({port}-{id}.{domain}, E2b-Sandbox-Port) -- */

/* Where a request goes by its Host ({port}-{id}.{domain}) or routing
 * headers: 0 for the server itself; 1 with sid and port filled (port may
 * be envd's); -1 after replying 400 (a malformed routing header). */
int sbx__srv_proxy_target(struct srv_req *r, char sid[32], unsigned *port);
/* A user port, from the headers alone: the sandbox (r->sb taken), paused
 * or not, and its traffic token. 1 to go on, 0 after replying. */
int sbx__srv_proxy_authorize(struct srv_req *r, const char *sid, unsigned port);
/* An E2B-shaped proxy error {"code","message","sandboxId"[,"port"]}. */
void sbx__srv_proxy_error(struct srv_req *r, int status, unsigned port, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The domain create/connect answers (getHost's suffix); owned, or NULL. */
char *sbx__srv_proxy_domain(struct server *srv);

/* ---- proxy_request.c, proxy_http.c: HTTP through a user port ----------- */

/* A proxied response's head, and its body's reads, fit in this. */
#define SRV_PROXY_BUF (64u << 10)
enum body_mode { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_EOF };
enum chunk_state { CH_SIZE, CH_DATA, CH_CRLF, CH_TRAILER, CH_DONE };
struct upg;
/* One proxied request: the connection into the sandbox and the response's reader. */
struct srv_proxy {
	atomic_int refs;             /* the request, and the response reader */
	struct srv_req *r;           /* valid while the request lives */
	struct server *srv;
	char sid[32];
	unsigned port;
	int fd;                      /* into the sandbox; -1 once handed on */
	int chunked_in, upgrade, head_only;
	int failed;                  /* errno of a failed write to the sandbox */
	int timeout_ms;              /* -1 = none */
	int nonblock;                /* the body's reader: fill() never waits */
	double park_until;           /* the reader's wait ends here (monotonic; 0 = not waiting) */
	struct srv_park park;        /* the body's reader (once the reply is queued) */
	enum body_mode mode;
	enum chunk_state ch;
	uint64_t left;               /* BODY_LENGTH: bytes left; CH_DATA: in this chunk */
	struct upg *upg;
	size_t off, len;             /* unread bytes of buf */
	char buf[SRV_PROXY_BUF];
};
/* After authorization: connects to the port inside the sandbox and sends
 * the request head; the body then streams through r->feed. Replies on error. */
void sbx__srv_proxy_begin(struct srv_req *r);
/* After the body: relays the response (streamed), or a 101 and the relay. */
void sbx__srv_proxy_finish(struct srv_req *r);
/* proxy_http.c: drops a reference (the last closes and frees px). */
void sbx__srv_px_put(struct srv_proxy *px);
/* Writes all of data into the sandbox, each wait bounded: 0 or -errno. */
int sbx__srv_px_send_all(struct srv_proxy *px, const void *data, size_t n);
/* proxy_request.c: 1 for a header a proxy must not pass on (hop-by-hop, or routing). */
int sbx__srv_proxy_hop_by_hop(const char *k);
/* 1 when the comma-separated list has tok (case-insensitive). */
int sbx__srv_proxy_has_token(const char *list, const char *tok);

/* ---- relay.c: proxied connections ------------------------------------------ */

int sbx__srv_relays_start(struct server *srv, sbx_error **err);
/* Closes every relay and stops the thread (before the HTTP side stops). */
void sbx__srv_relays_stop(struct server *srv);
/* After the HTTP side stopped: frees the table. */
void sbx__srv_relays_free(struct server *srv);
/* Counts fd against the sandbox's cap: 0, or -EAGAIN at the cap. */
int sbx__srv_relays_track(struct server *srv, const char *sid, int fd);
void sbx__srv_relays_untrack(struct server *srv, int fd);
/* An upgraded connection: client socket (MHD's, closed through urh) and
 * the sandbox's socket (taken), with bytes each side already sent. */
struct MHD_UpgradeResponseHandle;
void sbx__srv_relays_add(struct server *srv, const char *sid, int cfd, struct MHD_UpgradeResponseHandle *urh,
			 int bfd, const char *to_client, size_t nc, const char *to_sandbox, size_t ns);
/* The sandbox went away: every connection proxied to it is shut down. */
void sbx__srv_relays_sandbox_gone(struct server *srv, const char *sid);
/* Live proxied connections (metrics). */
size_t sbx__srv_relays_count(struct server *srv);

/* ---- errors.c ------------------------------------------------------------ */

/* The one map from sbx error codes to HTTP statuses and Connect code strings. */
int sbx__srv_http_status(int code);
const char *sbx__srv_connect_code(int code);
int sbx__srv_connect_http_status(const char *connect_code);
/* Replies with a REST or Connect error for an sbx error (frees e). */
void sbx__srv_reply_sbx_error(struct srv_req *r, int connect, const char *what, int code, sbx_error *e);

/* ---- auth.c -------------------------------------------------------------- */

int sbx__srv_auth_init(struct server *srv, int *created, sbx_error **err);

int sbx__srv_auth_api_key_ok(struct server *srv, const char *given);
void sbx__srv_auth_new_token(char out[65]);
int sbx__srv_ct_equal(const char *a, const char *b);
/* Verifies a /files URL signature; 1 when valid. */
int sbx__srv_auth_signature_ok(const char *token, const char *path, const char *op, const char *user,
			  const char *sig, const char *expiration);
/* User from "Authorization: Basic base64(user:)" (owned) or NULL. */
char *sbx__srv_auth_basic_user(const char *header);

/* ---- sandboxes (server.c) ------------------------------------------------ */

/* Looks up a live sandbox and takes a reference (NULL when unknown). */
struct srv_sandbox *sbx__srv_sandbox_get(struct server *srv, const char *id);
/* Finds the sandbox owning an envd token (constant-time per entry). */
struct srv_sandbox *sbx__srv_sandbox_by_token(struct server *srv, const char *token);
void sbx__srv_sandbox_put(struct server *srv, struct srv_sandbox *s);
/* Adds a new record to the table (takes the creator's reference). */
void sbx__srv_sandbox_insert(struct server *srv, struct srv_sandbox *s);
/* A new record (one reference); its srv is set by sbx__srv_sandbox_insert(). */
struct srv_sandbox *sbx__srv_sandbox_new(const char *id);
/* Removes from the table, destroys the sandbox and its row. 0 or -ENOENT. */
int sbx__srv_sandbox_kill(struct server *srv, struct srv_sandbox *s, const char *reason);
/* Snapshot of the table with references taken; release with sbx__srv_sandbox_put each. */
struct srv_sandbox **sbx__srv_sandbox_all(struct server *srv, size_t *n);
void sbx__srv_timer_kick(struct server *srv);

/* ---- sbops.c ------------------------------------------------------------- */

/* Starts a library call on s->sb: 0, or -ESRCH once the sandbox is dead. */
int sbx__srv_op_begin(struct srv_sandbox *s, sbx_error **err);
void sbx__srv_op_end(struct srv_sandbox *s);
/* With srv->lock held, after s left the table: 1 when calls are in flight. */
int sbx__srv_op_mark_dead(struct srv_sandbox *s);
struct stat;
/* Opens a regular file of the sandbox for reading, never blocking: -EINVAL
 * for FIFOs, devices and sockets, -EISDIR, -ENOENT, -ENOSYS (no path fds). */
int sbx__srv_open_regular(int *fd_out, struct stat *st_out, struct srv_sandbox *s, const char *path,
			  sbx_error **err);
/* Opens a regular file of the sandbox for writing the same way (the inode
 * found at path, never blocking; truncated); -ENOSYS without path fds. */
int sbx__srv_open_writable(int *fd_out, struct srv_sandbox *s, const char *path, sbx_error **err);
/* Reads a whole regular file of at most max bytes (-EFBIG past it). */
int sbx__srv_read_small(char **out, size_t *len, struct srv_sandbox *s, const char *path, size_t max,
			sbx_error **err);

/* ---- state.c ------------------------------------------------------------- */

int sbx__srv_state_open(struct server *srv, sbx_error **err);
void sbx__srv_state_close(struct server *srv);
void sbx__srv_state_save(struct server *srv, struct srv_sandbox *s);
void sbx__srv_state_delete(struct server *srv, const char *id);
/* Re-adopts or reaps every recorded sandbox, then reaps unrecorded ones. */
int sbx__srv_state_reconcile(struct server *srv, sbx_error **err);
json_t *sbx__srv_sandbox_to_row(const struct srv_sandbox *s);

/* ---- multipart.c --------------------------------------------------------- */

/* Callbacks of the streaming multipart parser; <0 stops it. */
struct srv_mp_cbs {
	int (*part_begin)(void *ctx, const char *headers);
	int (*part_data)(void *ctx, const char *data, size_t len);
	int (*part_end)(void *ctx);
};
struct srv_mp;
struct srv_mp *sbx__srv_mp_new(const char *boundary, const struct srv_mp_cbs *cbs, void *ctx);
/* Takes the next bytes of the body: 0, a callback's error, or -E2BIG (a
 * part's headers past SRV_MP_HEADERS_MAX); once stopped, -ECANCELED. */
int sbx__srv_mp_feed(struct srv_mp *m, const char *data, size_t len);
/* 1 when the body so far ends inside a part's content. */
int sbx__srv_mp_in_part(const struct srv_mp *m);
void sbx__srv_mp_free(struct srv_mp *m);

/* ---- metrics.c ----------------------------------------------------------- */

void sbx__srv_metrics_create(struct server *srv, double seconds, int ok);
void sbx__srv_metrics_status(struct server *srv, int status);
void sbx__srv_metrics_reply(struct srv_req *r);

/* ---- http.c: logging ----------------------------------------------------- */

/* s with control characters, quotes, backslashes and non-ASCII bytes escaped
 * (JSON string syntax, \u00XX per byte), so it cannot break a log line. With
 * `json`, quotes are escaped too. Owned. */
char *sbx__srv_log_escape(const char *s, int json);

/* lazy_mhd.c, lazy_sqlite.c, lazy_zlib.c: loaded when `sbx serve` starts. */
extern sbx__lazy_lib sbx__lazy_mhd, sbx__lazy_sqlite, sbx__lazy_zlib;

/* A create's labels (sbx.server, e2b.template, e2b.meta.K from META) and
 * env ("K=V" from ENVS), appended to *labels and *env (control.c; the
 * Daytona API's create uses it too, so both list and reap alike). */
/* ---- pool.c: --pool N ----------------------------------------------------- */

/* Adds the warm pools of --pool and waits until they are full. */
int sbx__srv_warm_start(struct server *srv, sbx_error **err);
/* 1 when a pool holds sandboxes of spec `o` (its detach ignored). */
int sbx__srv_warm_has(const struct server *srv, const sbx_sandbox_opts *o);
void sbx__srv_warm_free(struct server *srv);

void sbx__srv_create_lists(char ***labels, char ***env, const struct server *srv, const char *template_id,
			   json_t *meta, json_t *envs);

#include "handlers.h"

#endif
