/* SPDX-License-Identifier: MIT */
/*
 * Private interface of `sbx openenv serve`, the OpenEnv environment server
 * (docs/openenv.md). Threading: one event-loop thread owns every socket and
 * connection; a bounded pool of worker threads runs the blocking episode
 * calls (reset, step, evaluate, abort). A connection with a job in flight is
 * `busy`: the loop leaves its session alone until the job's completion comes
 * back through the done queue (and an eventfd wakes the loop), so session
 * fields need no lock. Only the job queues are shared, under one mutex.
 */
#ifndef SBX_OPENENV_INT_H
#define SBX_OPENENV_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <sbx/sbx.h>
#include <sbx/episode.h>

#include "../util/buf.h"
#include "http.h"
#include "serve.h"
#include "ws.h"

#define OE_PENDING_MAX 16u          /* messages queued behind a running job */
#define OE_LAST_OUTPUT_MAX 4096u    /* state.last_output keeps this much */
#define OE_IDLE_HTTP_S 60.0         /* idle keep-alive HTTP connections close */
#define OE_CLOSING_S 10.0           /* a closing connection drains its output this long */

enum oe_job_kind {
	OE_JOB_RESET,        /* WS reset: (re)start the session's episode */
	OE_JOB_EXEC,         /* WS step, action_type exec */
	OE_JOB_EVALUATE,     /* WS step, action_type evaluate */
	OE_JOB_CLOSE,        /* WS step, action_type close: abort, then reply */
	OE_JOB_ABORT,        /* the connection is gone: abort, no reply */
	OE_JOB_HTTP_RESET,   /* stateless POST /reset: begin, reply, abort */
	OE_JOB_KILL,         /* the client left mid-step: destroy the sandbox under the
	                        running step (by its label), so it ends now (no conn) */
};

/* One turn-based episode of a WebSocket session. Owned by its connection. */
struct oe_session {
	char id[33];                /* episode_id, new at every reset */
	sbx_episode *ep;            /* NULL before reset and after evaluate/close */
	sbx_task *task;             /* the task of ep (kept for state after the end) */
	sbx_episode_opts opts;      /* borrowed by ep */
	const char *labels[2];
	char label[64];             /* "sbx.openenv=PID-SERIAL", unique to the session */
	unsigned step_count;
	char *last_action_type, *last_command, *last_output;
	int done;                   /* the last observation had done = true */
};

struct oe_conn;

struct oe_job {
	enum oe_job_kind kind;
	struct oe_conn *conn;
	char *task_id;
	char *command;
	double timeout_s;
	char *reply;                /* the frame (WS) or body (HTTP) to send, or NULL */
	int http_status;
	struct oe_job *next;
};

struct oe_server;

struct oe_conn {
	struct oe_server *srv;
	int fd;                     /* -1 once closed (the conn may outlive its socket) */
	int ws;                     /* upgraded */
	int busy;                   /* a job is in flight */
	int closing;                /* close after the output is flushed */
	int has_session;            /* counted in srv->active_sessions */
	int freed;                  /* unlinked, waiting to be freed (loop.c) */
	uint64_t serial;            /* unique in this server: the sandbox label */
	enum oe_job_kind job_kind;  /* of the job in flight, when busy */
	int kill_sent;              /* an OE_JOB_KILL went out for it */
	sbx_buf in, out;
	struct oe_ws_msg msg;
	double partial_since;       /* a message (or request) started arriving; 0 = none */
	double last_rx;             /* anything received */
	double ping_sent;           /* an unanswered ping went out then; 0 = none */
	double last_ping;
	double closing_since;       /* when on_tick first saw it closing */
	char *pending[OE_PENDING_MAX];
	size_t n_pending, pending_bytes;
	struct oe_session sess;
	struct oe_conn *prev, *next;
};

struct oe_server {
	const struct oe_config *cfg;
	sbx_runtime *rt;
	int epfd, lfd, evfd, sigfd, tfd;
	struct oe_conn *conns;
	struct oe_conn *grave;      /* freed at the end of the loop iteration */
	uint64_t next_serial;
	unsigned active_sessions;
	unsigned n_conns;
	int stopping;
	/* the worker pool */
	pthread_mutex_t lk;
	pthread_cond_t cv;           /* work for the workers */
	pthread_cond_t gone;         /* a worker left */
	struct oe_job *todo, *todo_tail, *done;
	unsigned n_todo, n_workers, idle_workers, peak_workers, jobs_in_flight;
	int quit;
};

/* env.c: the OpenEnv protocol on top of the loop. */
/* Handles one complete text message of a WebSocket session: answers it at
 * once (error frames, state) or hands a job to the pool. */
void sbx__oe_env_message(struct oe_conn *c, const char *text, size_t len);
/* Routes a complete HTTP request (head R, body BODY). */
void sbx__oe_env_http(struct oe_conn *c, const struct oe_http_req *r, const char *body, size_t len);
/* Runs a job on a worker thread: fills job->reply. */
void sbx__oe_env_run_job(struct oe_server *s, struct oe_job *j);
/* The WS session opened: CAPACITY_REACHED and close when full. */
void sbx__oe_env_open(struct oe_conn *c);
/* Frees what a session owns once no episode is left in it. */
void sbx__oe_session_clear(struct oe_session *s);
/* Validates a reset's data: NULL when fine, else what is wrong. */
const char *sbx__oe_reset_args(struct oe_server *s, json_t *data, const char **task_id,
			       const char **episode_id);
/* Validates a step's action as OpenEnv's Tbench2Action (extra fields
 * forbidden): NULL when fine, else what is wrong. */
const char *sbx__oe_action_check(json_t *a, const char **type, const char **command, double *timeout);
/* The stateless HTTP observation reply for a task (POST /reset, /step). */
char *sbx__oe_http_obs(const sbx_task *t, const char *action, const char *error);
/* An error frame's text. EXTRA (may be NULL) is merged into data. */
char *sbx__oe_error_frame(const char *code, const char *message, json_t *extra);

/* conn.c: one connection. */
void sbx__oe_conn_new(struct oe_server *s, int fd);
/* Reads what the socket has and handles every complete request or frame. */
void sbx__oe_conn_readable(struct oe_conn *c);
/* Handles what is buffered (after a job let the connection go on). */
void sbx__oe_conn_process(struct oe_conn *c);
void sbx__oe_conn_flush(struct oe_conn *c);
/* Closes the socket; frees the record now, or after its job or the abort of
 * its episode. */
void sbx__oe_conn_close(struct oe_conn *c);
/* Frees the records closed during this loop iteration. */
void sbx__oe_conn_bury(struct oe_server *s);
void sbx__oe_conn_frame(struct oe_conn *c, int opcode, const void *p, size_t n);
void sbx__oe_send_text(struct oe_conn *c, const char *text);
void sbx__oe_send_http(struct oe_conn *c, int status, const char *body);
void sbx__oe_ws_close(struct oe_conn *c, int code, const char *reason);
/* An error frame, then the close handshake with CODE. */
void sbx__oe_ws_fail(struct oe_conn *c, int code, const char *what);

/* pool.c */
void sbx__oe_submit(struct oe_server *s, struct oe_job *j);

int sbx__oe_pool_start(struct oe_server *s, sbx_error **err);
void sbx__oe_pool_stop(struct oe_server *s);
/* Pops the finished jobs (a list, in no particular order). */
struct oe_job *sbx__oe_pool_take_done(struct oe_server *s);
void sbx__oe_job_free(struct oe_job *j);

#endif
