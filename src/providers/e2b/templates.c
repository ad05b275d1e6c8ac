/* SPDX-License-Identifier: MIT */
/*
 * Task templates on E2B. A task's Dockerfile is parsed and evaluated with the
 * template builder's parser (templates_int.h) into E2B build steps: FROM
 * becomes fromImage, then USER root first (E2B Cloud otherwise builds as a
 * non-root user), RUN, COPY (one step per source, uploaded as a gzipped tar
 * keyed by a content hash), ENV, WORKDIR and USER. Metadata-only
 * instructions (LABEL, EXPOSE, CMD, ENTRYPOINT, ...) are skipped; multi-stage
 * builds, COPY --from, ADD of URLs or archives and heredocs are refused with
 * a message. The alias digests all of it, so a build is skipped when
 * GET /templates/aliases/<alias> finds it.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
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
#include "../../util/sha256.h"
#include "../../util/str.h"
#include "../../util/tree_tar.h"
#include "e2b_int.h"
#include "e2b_template.h"
#include "../../util/lazy.h"

struct copy_src {
	char *host;      /* absolute path in the context */
	char *rel;       /* path relative to the context (the tar's entry) */
	char hash[65];
};

struct plan {
	char *from;
	json_t *steps;
	struct copy_src *copies;
	size_t n_copies;
};

static void plan_clear(struct plan *p)
{
	free(p->from);
	json_decref(p->steps);
	for (size_t i = 0; i < p->n_copies; i++) {
		free(p->copies[i].host);
		free(p->copies[i].rel);
	}
	free(p->copies);
	memset(p, 0, sizeof(*p));
}

static void add_step(struct plan *p, const char *type, json_t *args)
{
	json_array_append_new(p->steps, json_pack("{s:s, s:o, s:b}", "type", type, "args", args, "force", 0));
}

static int add_copies(struct plan *p, const char *ctx, const struct ctx_ignore *ig, const struct df_step *s,
		      char **files, sbx_error **err);

static int add_copy(struct plan *p, const char *ctx, const struct ctx_ignore *ig, const struct df_step *s,
		    sbx_error **err)
{
	char **files = NULL;
	int r = sbx__ctx_sources(&files, ctx, ig, s->srcs, err);
	if (r < 0)
		return r;
	r = add_copies(p, ctx, ig, s, files, err);
	sbx__strv_free(files);
	return r;
}

static int add_copies(struct plan *p, const char *ctx, const struct ctx_ignore *ig, const struct df_step *s,
		      char **files, sbx_error **err)
{
	int r = 0;
	size_t cl = strlen(ctx);
	for (size_t i = 0; files[i]; i++) {
		const char *rel = files[i][cl] == '/' ? files[i] + cl + 1 : "";
		if (!*rel)
			return sbx_error_set(err, -EINVAL, "line %d: COPY of the whole context is not supported on e2b",
					     s->line);
		EVP_MD_CTX *md = sbx__sha256_new();
		EVP_DigestUpdate(md, "COPY\n", 5);
		EVP_DigestUpdate(md, rel, strlen(rel) + 1);
		EVP_DigestUpdate(md, s->dst, strlen(s->dst) + 1);
		r = sbx__ctx_hash(md, ctx, rel, ig, err);
		char hash[SBX_SHA256_HEX_LEN + 1];
		sbx__sha256_final_hex(md, hash);
		EVP_MD_CTX_free(md);
		_cleanup_free_ char *host = NULL; /* never a path through a symlink out of the context */
		if (r < 0 || (r = sbx__ctx_real_path(&host, ctx, rel, err)) < 0)
			return r;
		p->copies = xrealloc(p->copies, (p->n_copies + 1) * sizeof(*p->copies));
		struct copy_src *c = &p->copies[p->n_copies++];
		c->host = steal_ptr(&host);
		c->rel = xstrdup(rel);
		memcpy(c->hash, hash, sizeof(c->hash));
		_cleanup_free_ char *mode = s->chmod ? xstrdup(s->chmod) : xstrdup("");
		json_t *args = json_pack("[s, s, s, s]", rel, s->dst, s->chown ? s->chown : "", mode);
		json_array_append_new(p->steps, json_pack("{s:s, s:o, s:b, s:s}", "type", "COPY", "args", args,
							  "force", 0, "filesHash", c->hash));
	}
	return 0;
}

static char *join_argv(char *const *argv)
{
	sbx_buf b;
	sbx__buf_init(&b, 1u << 20);
	for (size_t i = 0; argv && argv[i]; i++) {
		_cleanup_free_ char *q = sbx__e2b_shq(argv[i]);
		sbx__buf_printf(&b, "%s%s", i ? " " : "", q);
	}
	return sbx__buf_steal(&b, NULL);
}

static int map_step(struct plan *p, const char *ctx, const struct ctx_ignore *ig, const struct df_step *s,
		    char ***env, char ***args, char **cwd, sbx_error **err)
{
	switch (s->kind) {
	case DF_RUN: {
		if (s->insn && s->insn->n_heredocs)
			return sbx_error_set(err, -EINVAL, "line %d: RUN with a heredoc is not supported on e2b", s->line);
		_cleanup_free_ char *cmd = s->shell ? xstrdup(s->shell) : join_argv(s->argv);
		add_step(p, "RUN", json_pack("[s]", cmd));
		return 0;
	}
	case DF_COPY:
	case DF_ADD:
		if (s->from)
			return sbx_error_set(err, -EINVAL, "line %d: COPY --from (multi-stage) is not supported on e2b",
					     s->line);
		for (size_t i = 0; s->srcs && s->srcs[i]; i++) {
			const char *src = s->srcs[i];
			if (sbx__str_startswith(src, "<<") ||
			    (s->kind == DF_ADD && (strstr(src, "://") || sbx__ctx_is_archive(ctx, src))))
				return sbx_error_set(err, -EINVAL, "line %d: %s %s is not supported on e2b", s->line,
						     s->kind == DF_ADD ? "ADD" : "COPY", src);
		}
		return add_copy(p, ctx, ig, s, err);
	case DF_ENV: {
		json_t *a = json_array();
		for (size_t i = 0; s->kv && s->kv[i]; i++) {
			const char *eq = strchr(s->kv[i], '=');
			_cleanup_free_ char *k = xstrndup(s->kv[i], eq ? (size_t)(eq - s->kv[i]) : strlen(s->kv[i]));
			json_array_append_new(a, json_string(k));
			json_array_append_new(a, json_string(eq ? eq + 1 : ""));
			sbx__strv_setenv(env, s->kv[i]);
		}
		add_step(p, "ENV", a);
		return 0;
	}
	case DF_ARG:
		for (size_t i = 0; s->kv && s->kv[i]; i++)
			sbx__strv_setenv(args, s->kv[i]);
		return 0;
	case DF_WORKDIR:
		free(*cwd);
		*cwd = xstrdup(s->dst);
		add_step(p, "WORKDIR", json_pack("[s]", s->dst));
		return 0;
	case DF_USER:
		add_step(p, "USER", json_pack("[s]", s->dst));
		return 0;
	case DF_FROM:
	case DF_SHELL:
	case DF_LABEL:
	case DF_EXPOSE:
	case DF_CMD:
	case DF_ENTRYPOINT:
	case DF_VOLUME:
	case DF_STOPSIGNAL:
	case DF_HEALTHCHECK:
	case DF_ONBUILD:
	case DF_MAINTAINER:
	default:
		return 0;
	}
}

/* Dockerfile (or docker_image alone) -> plan. */
static int make_plan(struct plan *p, const struct sbx_e2b_template_opts *o, sbx_error **err)
{
	memset(p, 0, sizeof(*p));
	p->steps = json_array();
	add_step(p, "USER", json_pack("[s]", "root"));
	if (!o->context_dir) {
		if (!o->docker_image)
			return sbx_error_set(err, -ENOENT, "e2b template: no Dockerfile and no docker_image");
		p->from = xstrdup(o->docker_image);
		return 0;
	}
	_cleanup_free_ char *ctx = realpath(o->context_dir, NULL);
	if (!ctx)
		return sbx_error_setsys(err, -errno, errno, "e2b template: %s", o->context_dir);
	_cleanup_free_ char *dfp = xasprintf("%s/Dockerfile", ctx);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = sbx__read_file(&text, &len, dfp, SBX_DF_MAX, err);
	if (r < 0)
		return r;
	struct df_file *f = NULL;
	struct ctx_ignore *ig = NULL;
	char **meta = NULL, **env = xcalloc(1, sizeof(char *)), **args = xcalloc(1, sizeof(char *));
	char *cwd = xstrdup("/");
	if ((r = sbx__df_parse(&f, text, len, "Dockerfile", err)) < 0)
		goto out;
	if (f->n_stages != 1) {
		r = sbx_error_set(err, -EINVAL, "Dockerfile: %zu build stages; e2b templates take one", f->n_stages);
		goto out;
	}
	if ((r = sbx__ctx_ignore_load(&ig, ctx, err)) < 0 || (r = sbx__df_meta_args(&meta, f, NULL, err)) < 0 ||
	    (r = sbx__df_from(&p->from, f, &f->stages[0], meta, err)) < 0)
		goto out;
	const struct df_stage *st = &f->stages[0];
	for (size_t i = st->first; r == 0 && i < st->first + st->n; i++) {
		struct df_vars v = { .env = env, .args = args };
		struct df_step s;
		if ((r = sbx__df_eval(&s, f, &f->insns[i], &v, NULL, meta, cwd, err)) < 0)
			break;
		r = map_step(p, ctx, ig, &s, &env, &args, &cwd, err);
		sbx__df_step_clear(&s);
	}
out:
	free(cwd);
	sbx__strv_free(env);
	sbx__strv_free(args);
	sbx__strv_free(meta);
	sbx__ctx_ignore_free(ig);
	sbx__df_free(f);
	return r;
}

static unsigned cpu_count(double cpus)
{
	return cpus > 0 ? (unsigned)ceil(cpus) : 0;
}

static char *plan_alias(const struct plan *p, const struct sbx_e2b_template_opts *o)
{
	_cleanup_free_ char *steps = json_dumps(p->steps, JSON_COMPACT | JSON_SORT_KEYS);
	_cleanup_free_ char *res = xasprintf("cpu=%u mem=%u", cpu_count(o->cpus), o->memory_mb);
	const char *parts[] = { "sbx-e2b-template-v1", p->from, "user=root", steps, res };
	EVP_MD_CTX *md = sbx__sha256_new();
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		EVP_DigestUpdate(md, parts[i], strlen(parts[i]) + 1);
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_final_hex(md, hex);
	EVP_MD_CTX_free(md);
	_cleanup_free_ char *slug = xstrdup(o->slug && *o->slug ? o->slug : "task");
	for (char *c = slug; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '-')
			*c = '-';
		else
			*c = (char)tolower((unsigned char)*c);
	return xasprintf("%s-%.10s", slug, hex);
}

static void logline(const struct sbx_e2b_template_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void logline(const struct sbx_e2b_template_opts *o, const char *fmt, ...)
{
	if (!o->on_output)
		return;
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *m = xvasprintf(fmt, ap);
	va_end(ap);
	_cleanup_free_ char *l = xasprintf("%s\n", m);
	o->on_output(2, l, strlen(l), o->payload);
}

/* PUT a COPY tarball to the URL the API gave (only its headers are sent). */
static int upload_files(struct e2b_ctx *c, const struct copy_src *cs, json_t *reply, sbx_error **err)
{
	const char *url = json_string_value(json_object_get(reply, "url"));
	_cleanup_free_ char *full = url && url[0] == '/' ? xasprintf("%s%s", c->cfg.api_url, url) : xstrdup(url);
	char **lines = NULL;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(reply, "headers"), k, v) {
		if (!json_is_string(v))
			continue;
		_cleanup_free_ char *l = xasprintf("%s: %s", k, json_string_value(v));
		sbx__strv_push(&lines, l);
	}
	sbx__strv_push(&lines, "Content-Type: application/gzip");
	sbx__strv_push(&lines, "Expect:");
	int fd = -1;
	off_t len = 0;
	int r = sbx__tree_tar(&fd, &len, cs->host, cs->rel, 1, err);
	if (r == 0) {
		sbx_buf resp;
		sbx__buf_init(&resp, 65536);
		struct e2b_req rq = { .method = "PUT", .url = full, .headers = (const char *const *)lines, .body_fd = fd, .fd_len = len,
				      .timeout_ms = 30L * 60 * 1000, .resp = &resp };
		if (len == 0)
			rq.prefix = "", rq.prefix_len = 0;
		r = sbx__e2b_http(&rq, err);
		_cleanup_free_ char *what = xasprintf("upload COPY source %s", cs->rel);
		if (r == 0)
			r = sbx__e2b_map_http(rq.status, resp.data, resp.len, what, err);
		sbx__buf_free(&resp);
		close(fd);
	}
	sbx__http_headers_free(lines);
	return r;
}

static int build_remote(struct e2b_ctx *c, const struct plan *p, const char *alias,
			const struct sbx_e2b_template_opts *o, sbx_error **err)
{
	double deadline = o->timeout_s > 0 ? sbx__now_mono() + o->timeout_s : 0;
	json_t *req = json_pack("{s:s}", "name", alias);
	if (cpu_count(o->cpus))
		json_object_set_new(req, "cpuCount", json_integer(cpu_count(o->cpus)));
	if (o->memory_mb)
		json_object_set_new(req, "memoryMB", json_integer(o->memory_mb));
	json_t *j = NULL;
	int r = sbx__e2b_api(&j, c, "POST", "/v3/templates", req, "request template build", NULL, err);
	json_decref(req);
	if (r < 0)
		return r;
	_cleanup_free_ char *tid = xstrdup(json_string_value(json_object_get(j, "templateID")) ?: "");
	_cleanup_free_ char *bid = xstrdup(json_string_value(json_object_get(j, "buildID")) ?: "");
	json_decref(j);
	if (!*tid || !*bid)
		return sbx_error_set(err, -EPROTO, "e2b: request template build: reply without templateID/buildID");
	logline(o, "e2b: template %s: build %s of %s", alias, bid, tid);
	_cleanup_free_ char *etid = sbx__e2b_urlenc(tid), *ebid = sbx__e2b_urlenc(bid);
	for (size_t i = 0; r == 0 && i < p->n_copies; i++) {
		_cleanup_free_ char *path = xasprintf("/templates/%s/files/%s", etid, p->copies[i].hash);
		r = sbx__e2b_api(&j, c, "GET", path, NULL, "template files link", NULL, err);
		if (r == 0 && !json_is_true(json_object_get(j, "present")) && json_object_get(j, "url")) {
			logline(o, "e2b: uploading %s", p->copies[i].rel);
			r = upload_files(c, &p->copies[i], j, err);
		}
		json_decref(j);
		j = NULL;
	}
	if (r < 0)
		return r;
	json_t *spec = json_pack("{s:s, s:O, s:b}", "fromImage", p->from, "steps", p->steps, "force", o->force);
	_cleanup_free_ char *bpath = xasprintf("/v2/templates/%s/builds/%s", etid, ebid);
	r = sbx__e2b_api(NULL, c, "POST", bpath, spec, "start template build", NULL, err);
	json_decref(spec);
	if (r < 0)
		return r;
	size_t off = 0;
	for (;;) {
		_cleanup_free_ char *spath = xasprintf("/templates/%s/builds/%s/status?logsOffset=%zu", etid, ebid, off);
		r = sbx__e2b_api(&j, c, "GET", spath, NULL, "template build status", NULL, err);
		if (r < 0)
			return r;
		json_t *entries = json_object_get(j, "logEntries");
		size_t i;
		json_t *e;
		json_array_foreach(entries, i, e)
			logline(o, "  | %s", json_string_value(json_object_get(e, "message")) ?: "");
		off += json_array_size(entries);
		const char *st = json_string_value(json_object_get(j, "status")) ?: "";
		if (!strcmp(st, "ready")) {
			json_decref(j);
			return 0;
		}
		if (!strcmp(st, "error")) {
			const char *why = json_string_value(json_object_get(json_object_get(j, "reason"), "message"));
			r = sbx_error_set(err, -EIO, "e2b: template %s: build failed: %s", alias, why ? why : "unknown error");
			json_decref(j);
			return r;
		}
		json_decref(j);
		if (deadline && sbx__now_mono() > deadline)
			return sbx_error_set(err, -ETIMEDOUT, "e2b: template %s: build did not finish in %.0fs", alias,
					     o->timeout_s);
		struct timespec ts = { 0, 500 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

int sbx__e2b_template_ensure(char **alias_out, int *cached_out, sbx_runtime *rt,
			     const struct sbx_e2b_template_opts *o, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	struct plan p;
	int r = make_plan(&p, o, err);
	if (r < 0) {
		plan_clear(&p);
		return r;
	}
	_cleanup_free_ char *alias = plan_alias(&p, o);
	struct e2b_ctx *c = NULL;
	r = sbx__e2b_ctx_new(&c, rt, err);
	if (r == 0) {
		_cleanup_free_ char *ea = sbx__e2b_urlenc(alias);
		_cleanup_free_ char *path = xasprintf("/templates/aliases/%s", ea);
		sbx_error *e = NULL;
		json_t *j = NULL;
		int exists = sbx__e2b_api(&j, c, "GET", path, NULL, "template alias", NULL, &e);
		json_decref(j);
		if (exists < 0 && exists != -ENOENT) {
			r = exists;
			if (err && !*err)
				*err = steal_ptr(&e);
		}
		sbx_error_free(e);
		*cached_out = exists == 0 && !o->force;
		if (r == 0 && !*cached_out) {
			logline(o, "e2b: building template %s from %s", alias, p.from);
			r = build_remote(c, &p, alias, o, err);
		}
	}
	sbx__e2b_ctx_free(c);
	plan_clear(&p);
	if (r == 0)
		*alias_out = steal_ptr(&alias);
	return r;
}
