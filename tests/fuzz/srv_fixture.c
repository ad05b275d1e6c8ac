/* SPDX-License-Identifier: MIT */
/*
 * The in-process server of srv_fixture.h. libmicrohttpd is replaced at link
 * time: the MHD_* functions below are defined in the executable, so the
 * server's calls land here instead of in the shared library (which still
 * provides MHD_http_unescape). A request is a fake MHD_Connection holding
 * the headers and query arguments; MHD_start_daemon only records the
 * callbacks http.c registers, and fz_request() calls them the way
 * libmicrohttpd does (first call, body chunks, final call, completion).
 * The provider behind the one sandbox is fake_provider.c.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sbx/sys/provider.h>

#include "../../src/util/alloc.h"
#include "../../src/util/fs.h"
#include "fuzz.h"
#include "srv_fixture.h"

#define FZ_MAX_KV 64

/* ---- fake libmicrohttpd ---------------------------------------------------- */

struct MHD_Response {
	int refs;
	const char *data;
	size_t len;
	void *owned;                          /* freed with free_cb or free() */
	MHD_ContentReaderFreeCallback free_cb;
	MHD_ContentReaderCallback reader;     /* streaming responses */
	void *reader_cls;
};

struct kv {
	char *k, *v;
};

struct MHD_Connection {
	struct kv h[FZ_MAX_KV], a[FZ_MAX_KV];
	size_t nh, na;
	struct MHD_Response *resp;
	unsigned status;
	union MHD_ConnectionInfo info;
	struct sockaddr_in peer;
	unsigned suspends;  /* the server hands phases to workers (run inline here) */
};

/* The fixture's server has no worker pool: sbx__srv_pool_submit runs each
 * job inline, so a suspend is over before the call that made it returns. */
void MHD_suspend_connection(struct MHD_Connection *c)
{
	c->suspends++;
}

void MHD_resume_connection(struct MHD_Connection *c)
{
	(void)c;
}

struct MHD_Daemon {
	MHD_AccessHandlerCallback dh;
	void *dh_cls;
	MHD_RequestCompletedCallback done;
	void *done_cls;
	void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *c);
	void *uri_log_cls;
	MHD_NotifyConnectionCallback notify;
	void *notify_cls;
	union MHD_DaemonInfo info;
};

static struct MHD_Daemon *daemon_g;

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	(void)flags, (void)apc, (void)apc_cls;
	struct MHD_Daemon *d = xcalloc(1, sizeof(*d));
	d->dh = dh;
	d->dh_cls = dh_cls;
	d->info.port = port ? port : 49999;
	va_list ap;
	va_start(ap, dh_cls);
	for (int more = 1; more;) {
		enum MHD_OPTION o = va_arg(ap, enum MHD_OPTION);
		switch ((int)o) {
		case MHD_OPTION_END:
			more = 0;
			break;
		case MHD_OPTION_NOTIFY_COMPLETED:
			d->done = va_arg(ap, MHD_RequestCompletedCallback);
			d->done_cls = va_arg(ap, void *);
			break;
		case MHD_OPTION_URI_LOG_CALLBACK:
			d->uri_log = va_arg(ap, void *(*)(void *, const char *, struct MHD_Connection *));
			d->uri_log_cls = va_arg(ap, void *);
			break;
		case MHD_OPTION_NOTIFY_CONNECTION:
			d->notify = va_arg(ap, MHD_NotifyConnectionCallback);
			d->notify_cls = va_arg(ap, void *);
			break;
		case MHD_OPTION_EXTERNAL_LOGGER:
			(void)va_arg(ap, void *);
			(void)va_arg(ap, void *);
			break;
		case MHD_OPTION_SOCK_ADDR:
			(void)va_arg(ap, struct sockaddr *);
			break;
		case MHD_OPTION_CONNECTION_MEMORY_LIMIT:
		case MHD_OPTION_THREAD_STACK_SIZE:
		case MHD_OPTION_CONNECTION_MEMORY_INCREMENT:
			(void)va_arg(ap, size_t);
			break;
		case MHD_OPTION_CONNECTION_LIMIT:
		case MHD_OPTION_CONNECTION_TIMEOUT:
		case MHD_OPTION_PER_IP_CONNECTION_LIMIT:
		case MHD_OPTION_THREAD_POOL_SIZE:
		case MHD_OPTION_LISTEN_BACKLOG_SIZE:
			(void)va_arg(ap, unsigned int);
			break;
		case MHD_OPTION_STRICT_FOR_CLIENT:
		case MHD_OPTION_LISTEN_SOCKET:
			(void)va_arg(ap, int);
			break;
		default:
			more = 0; /* unknown: its argument types are not known here */
			break;
		}
	}
	va_end(ap);
	daemon_g = d;
	return d;
}

void MHD_stop_daemon(struct MHD_Daemon *d)
{
	if (d == daemon_g)
		daemon_g = NULL;
	free(d);
}

const union MHD_DaemonInfo *MHD_get_daemon_info(struct MHD_Daemon *d, enum MHD_DaemonInfoType t, ...)
{
	(void)t;
	return &d->info;
}

const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c,
							  enum MHD_ConnectionInfoType t, ...)
{
	if (t != MHD_CONNECTION_INFO_CLIENT_ADDRESS)
		return NULL;
	c->peer.sin_family = AF_INET;
	c->peer.sin_addr.s_addr = htonl(0x7f000001);
	c->info.client_addr = (struct sockaddr *)&c->peer;
	return &c->info;
}

enum MHD_Result MHD_set_connection_option(struct MHD_Connection *c, enum MHD_CONNECTION_OPTION o, ...)
{
	(void)c, (void)o;
	return MHD_YES;
}

static const struct kv *lookup(const struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key)
{
	const struct kv *v = kind == MHD_GET_ARGUMENT_KIND ? c->a : c->h;
	size_t n = kind == MHD_GET_ARGUMENT_KIND ? c->na : kind == MHD_HEADER_KIND ? c->nh : 0;
	for (size_t i = 0; key && i < n; i++)
		if (kind == MHD_GET_ARGUMENT_KIND ? strcmp(v[i].k, key) == 0 : strcasecmp(v[i].k, key) == 0)
			return &v[i];
	return NULL;
}

const char *MHD_lookup_connection_value(struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key)
{
	const struct kv *v = lookup(c, kind, key);
	return v ? v->v : NULL;
}

enum MHD_Result MHD_lookup_connection_value_n(struct MHD_Connection *c, enum MHD_ValueKind kind,
					      const char *key, size_t key_size, const char **value_ptr,
					      size_t *value_size_ptr)
{
	(void)key_size;
	const struct kv *v = lookup(c, kind, key);
	if (value_ptr)
		*value_ptr = v ? v->v : NULL;
	if (value_size_ptr)
		*value_size_ptr = v ? strlen(v->v) : 0;
	return v ? MHD_YES : MHD_NO;
}

int MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind kind,
			      MHD_KeyValueIterator it, void *cls)
{
	const struct kv *v = kind == MHD_GET_ARGUMENT_KIND ? c->a : c->h;
	size_t n = kind == MHD_GET_ARGUMENT_KIND ? c->na : kind == MHD_HEADER_KIND ? c->nh : 0;
	int k = 0;
	for (size_t i = 0; i < n; i++, k++)
		if (it && it(cls, kind, v[i].k, v[i].v) != MHD_YES)
			return k + 1;
	return k;
}

static struct MHD_Response *response(void)
{
	struct MHD_Response *r = xcalloc(1, sizeof(*r));
	r->refs = 1;
	return r;
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = response();
	r->len = size;
	if (mode == MHD_RESPMEM_MUST_COPY) {
		r->owned = xmalloc(size + 1);
		memcpy(r->owned, buffer, size);
		r->data = r->owned;
	} else {
		r->data = buffer;
		if (mode == MHD_RESPMEM_MUST_FREE)
			r->owned = buffer;
	}
	return r;
}

struct MHD_Response *MHD_create_response_from_buffer_with_free_callback(size_t size, void *buffer,
									 MHD_ContentReaderFreeCallback crfc)
{
	struct MHD_Response *r = response();
	r->len = size;
	r->data = buffer;
	r->owned = buffer;
	r->free_cb = crfc;
	return r;
}

struct MHD_Response *MHD_create_response_from_callback(uint64_t size, size_t block_size,
						       MHD_ContentReaderCallback crc, void *crc_cls,
						       MHD_ContentReaderFreeCallback crfc)
{
	(void)size, (void)block_size;
	struct MHD_Response *r = response();
	r->reader = crc;
	r->reader_cls = crc_cls;
	r->owned = crc_cls;
	r->free_cb = crfc;
	return r;
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *r, const char *header, const char *content)
{
	return r && header && content && !strchr(header, '\n') && !strchr(content, '\n') ? MHD_YES : MHD_NO;
}

static void release(struct MHD_Response *r)
{
	if (!r || --r->refs > 0)
		return;
	if (r->free_cb)
		r->free_cb(r->owned);
	else
		free(r->owned);
	free(r);
}

void MHD_destroy_response(struct MHD_Response *r)
{
	release(r);
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *c, unsigned int status, struct MHD_Response *r)
{
	if (!c || !r || c->resp || status < 100 || status > 999)
		return MHD_NO;
	r->refs++;
	c->resp = r;
	c->status = status;
	return MHD_YES;
}

/* Reads a streaming response to its end, as the client would. */
static void drain(struct MHD_Response *r)
{
	char buf[4096];
	uint64_t pos = 0;
	for (int i = 0; r->reader && i < 256; i++) {
		ssize_t n = r->reader(r->reader_cls, pos, buf, sizeof(buf));
		if (n < 0)
			break;
		pos += (uint64_t)n;
	}
}

/* ---- the server ------------------------------------------------------------ */

static struct server *srv_g;
static struct srv_sandbox *sandbox_g;

static void fail(const char *what, sbx_error *e)
{
	fprintf(stderr, "fuzz fixture: %s: %s\n", what, e && e->msg ? e->msg : "?");
	abort();
}

/* Puts the table back to exactly one running sandbox with known state. */
static void reset_sandbox(struct server *srv)
{
	if (srv->n == 1 && srv->v[0] == sandbox_g && !sandbox_g->dead) {
		sandbox_g->paused = 0;
		sandbox_g->end_at = sandbox_g->started_at + 300;
		return;
	}
	while (srv->n > 0) {
		struct srv_sandbox *s = srv->v[0];
		s->refs++;
		sbx__srv_sandbox_kill(srv, s, "reset");
		sbx__srv_sandbox_put(srv, s);
	}
	sbx_error *e = NULL;
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.provider = "fuzz";
	o.image = "fuzz";
	o.detach = 1;
	struct srv_sandbox *s = sbx__srv_sandbox_new(FZ_SANDBOX_ID);
	if (sbx_sandbox_create(&s->sb, srv->rt, &o, &e) < 0)
		fail("create sandbox", e);
	s->template_id = xstrdup("base");
	s->alias = xstrdup("base");
	snprintf(s->token, sizeof(s->token), "%s", FZ_TOKEN);
	s->metadata = json_pack("{s:s,s:s}", "owner", "fuzz", "k", "v");
	s->env_vars = json_object();
	s->started_at = 1.7e9;
	s->end_at = s->started_at + 300;
	s->refs++; /* the table's reference, like create() */
	sbx__srv_sandbox_insert(srv, s);
	sbx__srv_sandbox_put(srv, s);
	sandbox_g = s;
}

struct server *fz_srv(void)
{
	if (srv_g)
		return srv_g;
	sbx_error *e = NULL;
	struct server *srv = xcalloc(1, sizeof(*srv));
	const char *root = fz_scratch_dir("srv");
	char *state = xasprintf("%s/state", root), *images = xasprintf("%s/images", root);
	char *keydir = xasprintf("%s/server", state), *key = xasprintf("%s/api-key", keydir);
	if (sbx__mkdir_p(keydir, 0700, &e) < 0 || sbx__write_file_atomic(key, FZ_API_KEY "\n",
									   strlen(FZ_API_KEY) + 1, 0600, &e) < 0)
		fail("state dir", e);
	srv->cfg.listen_addr = "127.0.0.1";
	srv->cfg.state_dir = state;
	srv->cfg.image_dir = images;
	srv->cfg.max_sandboxes = 4;
	srv->cfg.max_timeout_s = 3600;
	snprintf(srv->server_id, sizeof(srv->server_id), "fuzz");
	pthread_mutex_init(&srv->key_lock, NULL);
	pthread_mutex_init(&srv->db_lock, NULL);
	pthread_mutex_init(&srv->lock, NULL);
	pthread_mutex_init(&srv->build_lock, NULL);
	pthread_cond_init(&srv->timer_cv, NULL);
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	ro.state_dir = state;
	ro.image_dir = images;
	ro.default_provider = "fuzz";
	if (sbx_provider_register(fz_fake_provider(), &e) < 0 && e && e->code != -EEXIST)
		fail("register provider", e);
	sbx_error_free(e);
	e = NULL;
	if (sbx_runtime_new(&srv->rt, &ro, &e) < 0)
		fail("runtime", e);
	int created = 0;
	if (sbx__srv_auth_init(srv, &created, &e) < 0)
		fail("api key", e);
	void *d = NULL;
	unsigned port = 0;
	if (sbx__srv_http_start(srv, &d, &port, &e) < 0 || !daemon_g)
		fail("http", e);
	srv->port = port;
	srv_g = srv;
	reset_sandbox(srv);
	free(keydir);
	free(key);
	return srv;
}

static void set_kv(struct kv *v, const char *k, size_t kl, const char *val, size_t vl)
{
	v->k = xstrndup(k, kl);
	v->v = xstrndup(val, vl);
}

/* Splits "a=1&b=%20" into unescaped arguments, as libmicrohttpd does. */
static void parse_query(struct MHD_Connection *c, const char *q)
{
	while (*q && c->na < FZ_MAX_KV) {
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		size_t kl = eq ? (size_t)(eq - q) : n;
		struct kv *v = &c->a[c->na++];
		set_kv(v, q, kl, eq ? eq + 1 : "", eq ? n - kl - 1 : 0);
		MHD_http_unescape(v->k);
		MHD_http_unescape(v->v);
		q += n;
		if (*q == '&')
			q++;
	}
}

static void conn_clear(struct MHD_Connection *c)
{
	for (size_t i = 0; i < c->nh; i++)
		free(c->h[i].k), free(c->h[i].v);
	for (size_t i = 0; i < c->na; i++)
		free(c->a[i].k), free(c->a[i].v);
	release(c->resp);
	c->resp = NULL;
}

int fz_request(const char *method, const char *url, const struct fz_header *h, size_t nh, const void *body,
	       size_t len, size_t split)
{
	struct server *srv = fz_srv();
	struct MHD_Daemon *d = daemon_g;
	struct MHD_Connection c = { 0 };
	for (size_t i = 0; i < nh && c.nh < FZ_MAX_KV; i++)
		set_kv(&c.h[c.nh++], h[i].name, strlen(h[i].name), h[i].value, strlen(h[i].value));
	const char *qm = strchr(url, '?');
	char *path = qm ? xstrndup(url, (size_t)(qm - url)) : xstrdup(url);
	if (qm)
		parse_query(&c, qm + 1);
	void *con_cls = d->uri_log ? d->uri_log(d->uri_log_cls, url, &c) : NULL;
	void *sock_ctx = NULL;
	if (d->notify)
		d->notify(d->notify_cls, &c, &sock_ctx, MHD_CONNECTION_NOTIFY_STARTED);
	enum MHD_RequestTerminationCode toe = MHD_REQUEST_TERMINATED_COMPLETED_OK;
	size_t zero = 0;
	const char *b = body;
	if (split > len)
		split = len;
	size_t chunk[2] = { split, len - split }, off = 0;
	enum MHD_Result ok = d->dh(d->dh_cls, &c, path, method, "HTTP/1.1", NULL, &zero, &con_cls);
	/* libmicrohttpd calls a connection suspended in its first call again
	 * after the resume, with no data */
	if (ok == MHD_YES && c.suspends && !c.resp)
		ok = d->dh(d->dh_cls, &c, path, method, "HTTP/1.1", NULL, &zero, &con_cls);
	for (int i = 0; i < 2 && ok == MHD_YES && !c.resp; i++) {
		size_t left = chunk[i];
		for (int tries = 0; left && ok == MHD_YES && !c.resp && tries < 8; tries++) {
			size_t n = left;
			ok = d->dh(d->dh_cls, &c, path, method, "HTTP/1.1", b + off, &n, &con_cls);
			off += left - n;
			left = n;
		}
	}
	if (ok == MHD_YES && !c.resp) {
		zero = 0;
		ok = d->dh(d->dh_cls, &c, path, method, "HTTP/1.1", NULL, &zero, &con_cls);
	}
	if (ok != MHD_YES || !c.resp)
		toe = MHD_REQUEST_TERMINATED_WITH_ERROR;
	if (c.resp)
		drain(c.resp);
	if (d->done)
		d->done(d->done_cls, &c, &con_cls, toe);
	if (d->notify)
		d->notify(d->notify_cls, &c, &sock_ctx, MHD_CONNECTION_NOTIFY_CLOSED);
	int status = c.resp ? (int)c.status : 0;
	static int debug = -1;
	if (debug < 0)
		debug = getenv("SBX_FUZZ_DEBUG") != NULL;
	if (debug)
		fprintf(stderr, "fuzz: %s %s -> %d %.*s\n", method, url, status,
			c.resp && c.resp->data ? (int)(c.resp->len < 200 ? c.resp->len : 200) : 0,
			c.resp && c.resp->data ? c.resp->data : "");
	conn_clear(&c);
	free(path);
	reset_sandbox(srv);
	return status;
}
