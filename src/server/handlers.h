/* SPDX-License-Identifier: MIT */
/* Private to `sbx serve`: the API handlers, control plane and data plane, one
 * section per source file (server_int.h includes this at its end). */
#ifndef SBX_SERVER_HANDLERS_H
#define SBX_SERVER_HANDLERS_H

#include "server_int.h"

/* ---- control.c / templates.c -------------------------------------------- */

void sbx__srv_control(struct srv_req *r, char **seg, size_t nseg);
/* A sandbox as JSON: detail < 0 create/connect (Sandbox), 0 ListedSandbox,
 * > 0 SandboxDetail. */
json_t *sbx__srv_sandbox_json(struct server *srv, struct srv_sandbox *s, int detail);
/* control.c: the request body as a JSON object ({} when empty); NULL after a 400. */
json_t *sbx__srv_json_object_body(struct srv_req *r);

/* network.c: E2B egress lists. parse: -1 after a 400; *allow and *deny new references
 * (arrays) or NULL. strv: a NULL-terminated copy (NULL for none). update: PUT
 * /sandboxes/ID/network. */
int sbx__srv_egress_parse(struct srv_req *r, json_t *net, json_t **allow, json_t **deny);
char **sbx__srv_egress_strv(json_t *arr);
void sbx__srv_egress_json(json_t *network, const struct srv_sandbox *s);
void sbx__srv_network_update(struct srv_req *r, struct srv_sandbox *s);
/* Pauses s as POST /pause does (the caller holds an op reference): 0,
 * -EALREADY when paused, -EBUSY while a pause or resume is under way. */
int sbx__srv_sandbox_pause(struct srv_sandbox *s, sbx_error **err);
/* Resumes s when paused (waiting out a pause or resume under way), with
 * the deadline now + secs (connect: only when later; resume_only: always,
 * and -EALREADY when it runs). 1 resumed, 0 was running, -EBUSY, -errno.
 * The caller holds an op reference. */
int sbx__srv_sandbox_wake(struct srv_sandbox *s, long long secs, int resume_only, sbx_error **err);
/* Create's `autoResume` ({enabled: bool}; enabled needs autoPause): 0 with
 * *out set, or -EINVAL after replying 400 (autoresume.c). */
int sbx__srv_parse_auto_resume(struct srv_req *r, json_t *v, int auto_pause, int *out);
/* Before a request reaches s: 1 when it runs (resumed now when paused with
 * autoResume), 0 when it stays paused. */
int sbx__srv_sandbox_autoresume(struct srv_sandbox *s);
/* The CPUs, memory and disk a sandbox of this server is held to (what is
 * enforced; "no limit" as this host's size). */
void sbx__srv_sandbox_limits(const struct server *srv, const struct srv_sandbox *s, long *cpus,
			     long long *mem_mb, long long *disk_mb);
/* GET /sandboxes/{id}/metrics (sandbox_metrics.c). */
void sbx__srv_metrics_sandbox(struct srv_req *r, struct srv_sandbox *s);
/* GET /sandboxes, /v2/sandboxes (listing.c). */
void sbx__srv_list(struct srv_req *r, int v2);
/* RFC 3339 (Z or +hh:mm, optional fraction) to unix seconds; 0 or -EINVAL. */
int sbx__srv_parse_rfc3339(double *out, const char *s);
void sbx__srv_templates(struct srv_req *r, char **seg, size_t nseg);
/* PUT /templates/{id}/files/{hash}: streams the body into a private file. */
void sbx__srv_template_files_begin(struct srv_req *r, const char *hash);
/* templateID (id, name:tag, alias, "base") -> image name (owned); -ENOENT. */
int sbx__srv_template_resolve(struct server *srv, const char *template_id, char **image_out,
			 sbx_error **err);
void sbx__srv_builds_free(struct server *srv);
char *sbx__srv_rfc3339(double t);

/* ---- snapshots.c, fork.c --------------------------------------------------- */

/* A templateID naming a snapshot: 1 with *image = "snapshot:<provider name>"
 * and *base = the image under it (both owned); 0 when it is none. */
int sbx__srv_snapshot_resolve(struct server *srv, const char *template_id, char **image, char **base);
/* POST /sandboxes/{id}/snapshots. */
void sbx__srv_snapshot_create(struct srv_req *r, struct srv_sandbox *s);
/* GET /snapshots. */
void sbx__srv_snapshots_list(struct srv_req *r);
/* DELETE /templates/{id} for a snapshot: 1 after replying, 0 when id is none. */
int sbx__srv_snapshot_delete(struct srv_req *r, const char *id);
/* Appends the snapshots as Template objects (GET /templates). */
void sbx__srv_snapshot_templates(struct server *srv, json_t *arr);
/* Marks s as in a transition (no pause or resume meanwhile; one under way
 * is waited out, up to 30 s): 0, or -EBUSY. The caller holds an op reference. */
int sbx__srv_sandbox_hold(struct srv_sandbox *s);
void sbx__srv_sandbox_unhold(struct srv_sandbox *s);
/* POST /sandboxes/{id}/fork. */
void sbx__srv_fork(struct srv_req *r, struct srv_sandbox *s);

/* ---- data plane ---------------------------------------------------------- */

/* Parses a Connect request body (envelope or bare JSON); NULL + error reply sent. */
json_t *sbx__srv_connect_body(struct srv_req *r, int streaming);
int sbx__srv_connect_is_stream(struct srv_req *r);
/* A protobuf JSON bytes field: standard padded base64 out (owned). */
char *sbx__srv_json_bytes_encode(const void *data, size_t len);
/* Decodes one into OUT: either alphabet, padding optional, nothing else.
 * @return 0, -EINVAL or -E2BIG (OUT unchanged on error). */
int sbx__srv_json_bytes_decode(sbx_buf *out, const char *s);
/* Appends one envelope (flags 0 or 2) with JSON payload (stolen). */
int sbx__srv_envelope(sbx_buf *b, unsigned flags, json_t *payload);
/* Appends the end-stream frame: {} or {"error":{code,message}}. */
void sbx__srv_end_stream(sbx_buf *b, const char *code, const char *msg);
/* A stream that sends only an error end-stream (errors before streaming). */
void sbx__srv_reply_stream_error(struct srv_req *r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
double sbx__srv_keepalive_s(struct srv_req *r);
/* Connect-Timeout-Ms as seconds (0 = none); -1 when malformed. */
double sbx__srv_connect_timeout_s(struct srv_req *r);
/* Waits on cv until `deadline` (monotonic) or at most 0.5 s. */
void sbx__srv_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *lk, double deadline);

void sbx__srv_envd_process(struct srv_req *r, struct srv_sandbox *s, const char *method);
void sbx__srv_envd_fs(struct srv_req *r, struct srv_sandbox *s, const char *method);
void sbx__srv_envd_files(struct srv_req *r, struct srv_sandbox *s);
/* POST /files before its body: the upload's consumer (envd_files.c). */
void sbx__srv_envd_files_begin(struct srv_req *r, struct srv_sandbox *s);
/* Per subscriber (stream) of a process: encoded events not yet sent. */
#define SRV_SUB_MAX (16u << 20)
/* envd_pump.c: the output pump of a process. Drops a reference (the last
 * frees pr). */
void sbx__srv_proc_put(struct srv_proc *pr);
/* Arms the pump's watches; 0, or -errno (nothing armed then). */
int sbx__srv_pump_start(struct srv_proc *pr);
/* The pump's end: the process's end is told and it leaves the table. */
void sbx__srv_pump_finish(struct srv_proc *pr);
/* At shutdown: every process's pump runs once more and, seeing
 * srv->stopping, lets go of its sandbox. */
void sbx__srv_procs_kick_all(struct server *srv);
/* Frees the process table (sandbox is going away). */
void sbx__srv_procs_release(struct srv_sandbox *s);
/* The user and cwd for a call: user from Basic auth (or default), home dir. */
char *sbx__srv_user_home(struct srv_sandbox *s, const char *user);
/* "user" (owned) when the sandbox's /etc/passwd has it, else NULL (root). */
char *sbx__srv_default_user(struct srv_sandbox *s);
/* The ancestors of path that do not exist yet, deepest first (owned vector). */
char **sbx__srv_missing_parents(struct srv_sandbox *s, const char *path);
/* Resolves a path against the user's home; owned. */
char *sbx__srv_resolve_path(struct srv_sandbox *s, const char *user, const char *path);
/* envd's EntryInfo of f (entry_info.c): symlinks resolved to absolute
 * targets inside the sandbox, user.* xattrs as metadata. */
json_t *sbx__srv_entry_info(struct srv_sandbox *s, const sbx_file_info *f);
/* user.* extended attributes of an fd (O_PATH works) as a JSON object. */
json_t *sbx__srv_xattr_metadata(int fd);
/* Sets user.<key> for each string of meta; 0 or -errno. */
int sbx__srv_xattr_set_metadata(int fd, json_t *meta);

#endif
