/* SPDX-License-Identifier: MIT */
/*
 * Template builds: a Dockerfile and its context become an image in the local
 * store. Each instruction's result is an image record "sbx-cache/<chain>",
 * where the chain digest covers the parent's chain, the evaluated
 * instruction and the content of the files it copies; an existing record is
 * a cache hit. The template alias "<slug>-<10 hex>" is a digest of the final
 * chain plus the build user and resources, computed in a first pass that
 * builds nothing. A per-alias flock makes concurrent builds of one alias, in
 * any process, build once.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sbx/image.h>
#include <sbx/template.h>

#include "images/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/str.h"
#include "build_int.h"
#include "util/lazy.h"

#define CACHE_PREFIX "sbx-cache/"
#define SLUG_MAX 100

void sbx__build_log(struct build *b, const char *fmt, ...)
{
	if (b->dry || !b->o->on_output)
		return;
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *s = xvasprintf(fmt, ap);
	va_end(ap);
	b->o->on_output(2, s, strlen(s), b->o->payload);
}

double sbx__build_left(const struct build *b)
{
	if (b->deadline <= 0)
		return 0;
	double l = b->deadline - sbx__now_mono();
	return l > 0 ? l : -1;
}

/* sha256 hex of the parts, each followed by '\n'. */
static void sha_hex(char out[65], const char *const *parts)
{
	EVP_MD_CTX *md = sbx__sha256_new();
	for (size_t i = 0; parts[i]; i++) {
		EVP_DigestUpdate(md, parts[i], strlen(parts[i]));
		EVP_DigestUpdate(md, "\n", 1);
	}
	sbx__sha256_final_hex(md, out);
	EVP_MD_CTX_free(md);
}

static void config_copy(sbx_image_config *d, const sbx_image_config *s)
{
	d->env = sbx__strv_dup((const char *const *)s->env);
	d->workdir = s->workdir ? xstrdup(s->workdir) : NULL;
	d->user = s->user ? xstrdup(s->user) : NULL;
	d->cmd = sbx__strv_dup((const char *const *)s->cmd);
	d->entrypoint = sbx__strv_dup((const char *const *)s->entrypoint);
	d->labels = sbx__strv_dup((const char *const *)s->labels);
	d->exposed_ports = sbx__strv_dup((const char *const *)s->exposed_ports);
}

static void state_clear(struct state *s)
{
	sbx__image_config_clear(&s->cfg);
	sbx__strv_free(s->shell);
	sbx__strv_free(s->args);
	sbx__strv_free(s->layers);
	sbx__strv_free(s->layer_paths);
	free(s->record);
	memset(s, 0, sizeof(*s));
}

static void state_copy(struct state *d, const struct state *s)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->chain, s->chain, sizeof(d->chain));
	config_copy(&d->cfg, &s->cfg);
	d->shell = sbx__strv_dup((const char *const *)s->shell);
	d->layers = sbx__strv_dup((const char *const *)s->layers);
	d->layer_paths = sbx__strv_dup((const char *const *)s->layer_paths);
	d->record = s->record ? xstrdup(s->record) : NULL;
}

static void image_freep(sbx_image **p)
{
	sbx_image_free(*p);
}

/* Commits ST's layers and config as NAME; refreshes its layer paths. */
static int commit(struct build *b, struct state *st, const char *name)
{
	_cleanup_close_ int lock = -1;
	_cleanup_(image_freep) sbx_image *img = NULL;
	int r = sbx__image_store_lock(&lock, b->rt, false, b->err);
	if (r < 0)
		return r;
	char *none[] = { NULL };
	r = sbx__image_commit(&img, b->rt, name, st->layers ? st->layers : none, &st->cfg, b->err);
	if (r < 0)
		return r;
	sbx__strv_free(st->layer_paths);
	st->layer_paths = sbx__strv_dup((const char *const *)img->layer_paths);
	return 0;
}

static int get_base(sbx_image **img, struct build *b, const struct df_stage *stg, const char *ref)
{
	sbx_error *e = NULL;
	int r = sbx_image_get(img, b->rt, ref, &e);
	if (r != -ENOENT) {
		if (r < 0 && b->err && !*b->err)
			*b->err = steal_ptr(&e);
		sbx_error_free(e);
		return r;
	}
	sbx_error_free(e);
	e = NULL;
	r = sbx_image_pull(img, b->rt, ref, NULL, &e);
	if (r == 0)
		return 0;
	r = sbx_error_set(b->err, -ENOENT, "%s:%d: FROM %s: not in the image store (%s) and the pull "
			  "failed (%s); import it with 'sbx image import %s SRC' or 'sbx image pull %s'",
			  b->f->path, stg->from->line, ref, sbx_runtime_image_dir(b->rt),
			  e && e->msg ? e->msg : "unknown error", ref, ref);
	sbx_error_free(e);
	return r;
}

/* FROM: the stage's starting state from an image, an earlier stage or scratch. */
static int do_from(struct build *b, size_t si, struct state *st)
{
	const struct df_stage *stg = &b->f->stages[si];
	_cleanup_free_ char *ref = NULL, *seed = NULL;
	int r = sbx__df_from(&ref, b->f, stg, b->meta, b->err);
	if (r < 0)
		return r;
	b->step++;
	memset(st, 0, sizeof(*st));
	int idx = sbx__df_stage_index(b->f, ref, si);
	if (idx >= 0 && b->f->stages[idx].name) {
		state_copy(st, &b->final[idx]);
		seed = xasprintf("stage:%s", b->final[idx].chain);
	} else if (strcmp(ref, "scratch") == 0) {
		seed = xstrdup("scratch");
	} else {
		_cleanup_(image_freep) sbx_image *img = NULL;
		if ((r = get_base(&img, b, stg, ref)) < 0)
			return r;
		config_copy(&st->cfg, &img->config);
		st->layers = sbx__strv_dup((const char *const *)img->layers);
		st->layer_paths = sbx__strv_dup((const char *const *)img->layer_paths);
		seed = xstrdup(img->id);
		if (b->o->user) {
			free(st->cfg.user);
			st->cfg.user = xstrdup(b->o->user);
		}
	}
	if (!st->shell) {
		const char *sh[] = { "/bin/sh", "-c", NULL };
		st->shell = sbx__strv_dup(sh);
	}
	st->cmd_from_base = st->cfg.cmd != NULL;
	_cleanup_free_ char *from = xasprintf("FROM %s", ref);
	_cleanup_free_ char *user = xasprintf("user %s", b->user);
	const char *parts[] = { "sbx-stage-v1", from, seed, user, NULL };
	sha_hex(st->chain, parts);
	if (b->dry)
		return 0;
	b->cached++;
	sbx__build_log(b, "[%d/%d] FROM %s\n", b->step, b->n_steps, ref);
	free(st->record);
	st->record = xasprintf(CACHE_PREFIX "%s", st->chain);
	return commit(b, st, st->record);
}

static void apply_config(struct state *st, const struct df_step *s)
{
	sbx_image_config *c = &st->cfg;
	if (s->kind == DF_ENV) {
		for (size_t i = 0; s->kv && s->kv[i]; i++)
			sbx__strv_setenv(&c->env, s->kv[i]);
	} else if (s->kind == DF_LABEL) {
		for (size_t i = 0; s->kv && s->kv[i]; i++)
			sbx__strv_setenv(&c->labels, s->kv[i]);
	} else if (s->kind == DF_ARG) {
		for (size_t i = 0; s->kv && s->kv[i]; i++)
			sbx__strv_setenv(&st->args, s->kv[i]);
	} else if (s->kind == DF_WORKDIR || s->kind == DF_USER) {
		char **f = s->kind == DF_WORKDIR ? &c->workdir : &c->user;
		free(*f);
		*f = xstrdup(s->dst);
	} else if (s->kind == DF_SHELL) {
		sbx__strv_free(st->shell);
		st->shell = sbx__strv_dup((const char *const *)s->argv);
	} else if (s->kind == DF_EXPOSE) {
		for (size_t i = 0; s->names && s->names[i]; i++) {
			bool have = false;
			for (size_t k = 0; c->exposed_ports && c->exposed_ports[k] && !have; k++)
				have = strcmp(c->exposed_ports[k], s->names[i]) == 0;
			if (!have)
				sbx__strv_push(&c->exposed_ports, s->names[i]);
		}
	} else if (s->kind == DF_CMD || s->kind == DF_ENTRYPOINT) {
		char **v = s->argv ? sbx__strv_dup((const char *const *)s->argv)
				   : sbx__strv_dup((const char *const *)st->shell);
		if (!s->argv)
			sbx__strv_push(&v, s->shell);
		char ***f = s->kind == DF_CMD ? &c->cmd : &c->entrypoint;
		sbx__strv_free(*f);
		*f = v;
		if (s->kind == DF_ENTRYPOINT && st->cmd_from_base) {
			sbx__strv_free(c->cmd);
			c->cmd = NULL;
		}
		st->cmd_from_base = false;
	}
}

static int do_step(struct build *b, size_t si, struct state *st, const struct df_insn *in)
{
	b->step++;
	struct df_vars v = { .env = st->cfg.env, .args = st->args };
	struct df_step s;
	int r = sbx__df_eval(&s, b->f, in, &v, b->build_args, b->meta, st->cfg.workdir, b->err);
	if (r < 0)
		return r;
	char extra[65] = "";
	size_t idx = (size_t)(in - b->f->insns);
	if (s.kind == DF_COPY || s.kind == DF_ADD) {
		if (!b->memo[idx] && (r = sbx__step_copy_digest(b, &s, si, extra)) == 0)
			b->memo[idx] = xstrdup(extra);
		if (b->memo[idx])
			memcpy(extra, b->memo[idx], sizeof(extra));
	}
	char chain[65];
	const char *parts[] = { "sbx-step-v1", st->chain, s.text, extra, NULL };
	sha_hex(chain, parts);
	apply_config(st, &s);
	if (r < 0 || b->dry) {
		memcpy(st->chain, chain, sizeof(chain));
		sbx__df_step_clear(&s);
		return r;
	}
	_cleanup_free_ char *record = xasprintf(CACHE_PREFIX "%s", chain);
	_cleanup_(image_freep) sbx_image *img = NULL;
	if (sbx__build_left(b) < 0) {
		r = sbx_error_set(b->err, -ETIMEDOUT, "build timed out after %.0f s before step [%d/%d] %s",
				  b->o->timeout_s, b->step, b->n_steps, s.display);
	} else if (!b->o->force && sbx_image_get(&img, b->rt, record, NULL) == 0) {
		b->cached++;
		sbx__build_log(b, "[%d/%d] %s (cached)\n", b->step, b->n_steps, s.display);
		sbx__strv_free(st->layers);
		sbx__strv_free(st->layer_paths);
		st->layers = sbx__strv_dup((const char *const *)img->layers);
		st->layer_paths = sbx__strv_dup((const char *const *)img->layer_paths);
	} else {
		sbx__build_log(b, "[%d/%d] %s\n", b->step, b->n_steps, s.display);
		_cleanup_free_ char *digest = NULL;
		r = sbx__step_layer(&digest, b, st, &s, si);
		if (r == 0 && digest)
			sbx__strv_push(&st->layers, digest);
		if (r == 0)
			r = commit(b, st, record);
		if (r == 0)
			b->built++;
	}
	memcpy(st->chain, chain, sizeof(chain));
	free(st->record);
	st->record = steal_ptr(&record);
	sbx__df_step_clear(&s);
	return r;
}

static int do_stage(struct build *b, size_t si)
{
	const struct df_stage *stg = &b->f->stages[si];
	struct state st;
	int r = do_from(b, si, &st);
	for (size_t i = 0; r == 0 && i < stg->n; i++)
		r = do_step(b, si, &st, &b->f->insns[stg->first + i]);
	if (r < 0) {
		state_clear(&st);
		return r;
	}
	b->final[si] = st;
	b->done[si] = true;
	return 0;
}

/* Marks stage SI and the stages it uses (FROM, COPY --from) as needed. */
static void mark_needed(struct build *b, size_t si)
{
	if (b->needed[si])
		return;
	b->needed[si] = true;
	const struct df_stage *stg = &b->f->stages[si];
	_cleanup_free_ char *ref = NULL;
	int idx;
	if (sbx__df_from(&ref, b->f, stg, b->meta, NULL) == 0 &&
	    (idx = sbx__df_stage_index(b->f, ref, si)) >= 0 && b->f->stages[idx].name)
		mark_needed(b, (size_t)idx);
	struct df_vars v = { .args = b->meta };
	for (size_t i = 0; i < stg->n; i++) {
		const struct df_insn *in = &b->f->insns[stg->first + i];
		const char *p = in->kind == DF_COPY ? strstr(in->args, "--from=") : NULL;
		if (!p)
			continue;
		_cleanup_free_ char *raw = xstrndup(p + 7, strcspn(p + 7, " \t"));
		_cleanup_free_ char *val = NULL;
		if (sbx__df_word(&val, raw, b->f->escape, &v, NULL) == 0 &&
		    (idx = sbx__df_stage_index(b->f, val, si)) >= 0)
			mark_needed(b, (size_t)idx);
	}
}

static void build_clear(struct build *b)
{
	for (size_t i = 0; b->f && i < b->f->n_stages; i++)
		if (b->done && b->done[i])
			state_clear(&b->final[i]);
	for (size_t i = 0; b->memo && b->f && i < b->f->n_insns; i++)
		free(b->memo[i]);
	free(b->memo);
	free(b->final);
	free(b->done);
	free(b->needed);
	sbx__df_free(b->f);
	free(b->context);
	sbx__ctx_ignore_free(b->ig);
	sbx__strv_free(b->build_args);
	sbx__strv_free(b->meta);
	if (b->tmp)
		sbx__rm_rf(b->tmp, NULL);
	free(b->tmp);
	memset(b, 0, sizeof(*b));
}

static int target_stage(struct build *b)
{
	if (!b->o->target || !*b->o->target)
		return (int)b->f->n_stages - 1;
	int idx = sbx__df_stage_index(b->f, b->o->target, b->f->n_stages);
	if (idx < 0)
		return sbx_error_set(b->err, -EINVAL, "build target '%s' is not a stage of %s",
				     b->o->target, b->f->path);
	return idx;
}

static int prepare(struct build *b, sbx_runtime *rt, const sbx_build_opts *o, sbx_error **err)
{
	if (sbx__lazy_load(&sbx__lazy_crypto, err) < 0)
		return -ENOSYS;
	memset(b, 0, sizeof(*b));
	b->rt = rt;
	b->o = o;
	b->err = err;
	if (!o || o->version != SBX_BUILD_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "build opts: missing or version %u unsupported",
				     o ? o->version : 0);
	if (!o->context_dir || !*o->context_dir)
		return sbx_error_set(err, -EINVAL, "build: context_dir is required");
	if (o->cpus < 0 || o->timeout_s < 0)
		return sbx_error_set(err, -EINVAL, "build: cpus and timeout_s must not be negative");
	char real[PATH_MAX];
	if (!realpath(o->context_dir, real))
		return sbx_error_setsys(err, -errno, errno, "build context %s", o->context_dir);
	struct stat st;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return sbx_error_set(err, -ENOTDIR, "build context %s is not a directory", o->context_dir);
	b->context = xstrdup(real);
	_cleanup_free_ char *df = o->dockerfile ? xstrdup(o->dockerfile) : xasprintf("%s/Dockerfile", real);
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r = sbx__ctx_read_dockerfile(&text, &len, real, o->dockerfile, err);
	if (r < 0)
		return r;
	const char *label = strrchr(df, '/') ? strrchr(df, '/') + 1 : df;
	if ((r = sbx__df_parse(&b->f, text, len, label, err)) < 0)
		return r;
	if ((r = sbx__ctx_ignore_load(&b->ig, real, err)) < 0)
		return r;
	b->build_args = xcalloc(1, sizeof(char *));
	for (size_t i = 0; o->build_args && o->build_args[i]; i++) {
		const char *a = o->build_args[i];
		const char *val = strchr(a, '=') ? NULL : sbx__env_user(a);
		if (strchr(a, '='))
			sbx__strv_setenv(&b->build_args, a);
		else if (val) {
			_cleanup_free_ char *kv = xasprintf("%s=%s", a, val);
			sbx__strv_setenv(&b->build_args, kv);
		}
	}
	if ((r = sbx__df_meta_args(&b->meta, b->f, b->build_args, err)) < 0)
		return r;
	b->user = o->user && *o->user ? o->user : "root";
	size_t ns = b->f->n_stages;
	b->needed = xcalloc(ns, sizeof(bool));
	b->done = xcalloc(ns, sizeof(bool));
	b->final = xcalloc(ns, sizeof(struct state));
	b->memo = xcalloc(b->f->n_insns + 1, sizeof(char *));
	int t = target_stage(b);
	if (t < 0)
		return t;
	mark_needed(b, (size_t)t);
	for (size_t i = 0; i < ns; i++)
		if (b->needed[i])
			b->n_steps += 1 + (int)b->f->stages[i].n;
	if (o->timeout_s > 0)
		b->deadline = sbx__now_mono() + o->timeout_s;
	return 0;
}

/* Runs every needed stage up to the target; *target_out is its index. */
static int run_stages(struct build *b, bool dry, size_t *target_out)
{
	for (size_t i = 0; i < b->f->n_stages; i++)
		if (b->done[i]) {
			state_clear(&b->final[i]);
			b->done[i] = false;
		}
	b->dry = dry;
	b->step = b->built = b->cached = 0;
	size_t last = 0;
	for (size_t i = 0; i < b->f->n_stages; i++) {
		if (!b->needed[i])
			continue;
		int r = do_stage(b, i);
		if (r < 0)
			return r;
		last = i;
	}
	*target_out = last;
	return 0;
}

static char *slug_of(const char *s)
{
	char *out = xstrdup(s && *s ? s : "image");
	if (strlen(out) > SLUG_MAX)
		out[SLUG_MAX] = '\0';
	for (char *p = out; *p; p++) {
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			*p = '-';
	}
	return out;
}

static void alias_of(const struct build *b, const char *chain, char **alias, char *digest)
{
	_cleanup_free_ char *c = xasprintf("chain %s", chain);
	_cleanup_free_ char *u = xasprintf("user %s", b->user);
	_cleanup_free_ char *res = xasprintf("cpus %.3f memory %u storage %u", b->o->cpus,
					     b->o->memory_mb, b->o->storage_mb);
	const char *parts[] = { "sbx-template-v1", c, u, res, NULL };
	sha_hex(digest, parts);
	_cleanup_free_ char *slug = slug_of(b->o->slug);
	*alias = xasprintf("%s-%.10s", slug, digest);
}

static int compute_alias(struct build *b, char **alias, char digest[65])
{
	size_t t;
	int r = run_stages(b, true, &t);
	if (r < 0)
		return r;
	alias_of(b, b->final[t].chain, alias, digest);
	return 0;
}

int sbx_template_alias(char **alias_out, sbx_runtime *rt, const sbx_build_opts *o, sbx_error **err)
{
	struct build b;
	char digest[65];
	int r = prepare(&b, rt, o, err);
	if (r == 0)
		r = compute_alias(&b, alias_out, digest);
	build_clear(&b);
	return r;
}

static int lock_alias(int *fd_out, struct build *b, const char *alias)
{
	_cleanup_free_ char *dir = xasprintf("%s/locks", sbx_runtime_image_dir(b->rt));
	int r = sbx__mkdir_p(dir, 0755, b->err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = xasprintf("%s/%s.lock", dir, alias);
	_cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_error_setsys(b->err, -errno, errno, "open %s", path);
	while (flock(fd, LOCK_EX | (b->deadline > 0 ? LOCK_NB : 0)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return sbx_error_setsys(b->err, -errno, errno, "lock %s", path);
		if (sbx__build_left(b) < 0)
			return sbx_error_set(b->err, -ETIMEDOUT, "build timed out after %.0f s waiting for "
					     "another build of %s", b->o->timeout_s, alias);
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	*fd_out = steal_fd(&fd);
	return 0;
}

static bool alias_exists(struct build *b, const char *alias)
{
	return !b->o->force && sbx_image_get(NULL, b->rt, alias, NULL) == 0;
}

static int build_locked(struct build *b, sbx_build_result *res, const char *alias, bool *cached)
{
	*cached = alias_exists(b, alias);
	if (*cached)
		return 0;
	char rnd[9];
	sbx__random_hex(rnd, 8);
	b->tmp = xasprintf("%s/tmp/build-%s", sbx_runtime_image_dir(b->rt), rnd);
	int r = sbx__image_store_init(b->rt, b->err);
	if (r < 0 || (r = sbx__mkdir_p(b->tmp, 0700, b->err)) < 0)
		return r;
	size_t t;
	if ((r = run_stages(b, false, &t)) < 0)
		return r;
	if ((r = commit(b, &b->final[t], alias)) < 0)
		return r;
	if (b->o->name && *b->o->name && (r = commit(b, &b->final[t], b->o->name)) < 0)
		return r;
	res->layers_built = b->built;
	res->layers_cached = b->cached;
	return 0;
}

int sbx_template_build(sbx_build_result *out, sbx_runtime *rt, const sbx_build_opts *o,
		       sbx_error **err)
{
	double t0 = sbx__now_mono();
	struct build b;
	sbx_build_result res = { 0 };
	char digest[65];
	_cleanup_close_ int lock = -1;
	bool cached = false;
	int r = prepare(&b, rt, o, err);
	if (r == 0)
		r = compute_alias(&b, &res.alias, digest);
	if (r == 0 && !(cached = alias_exists(&b, res.alias)) && (r = lock_alias(&lock, &b, res.alias)) == 0)
		r = build_locked(&b, &res, res.alias, &cached);
	if (r == 0 && cached) {
		res.cached = 1;
		res.layers_cached = b.n_steps;
		if (o->name && *o->name) {
			struct state st = { 0 };
			_cleanup_(image_freep) sbx_image *img = NULL;
			if ((r = sbx_image_get(&img, rt, res.alias, err)) == 0) {
				st.layers = img->layers;
				st.cfg = img->config;
				r = commit(&b, &st, o->name);
				sbx__strv_free(st.layer_paths);
			}
		}
	}
	build_clear(&b);
	if (r < 0) {
		free(res.alias);
		return r;
	}
	res.digest = xstrdup(digest);
	res.seconds = sbx__now_mono() - t0;
	if (out)
		*out = res;
	else
		sbx_build_result_free(&res);
	return 0;
}

void sbx_build_result_free(sbx_build_result *r)
{
	if (!r)
		return;
	free(r->alias);
	free(r->digest);
	memset(r, 0, sizeof(*r));
}
