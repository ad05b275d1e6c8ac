/* SPDX-License-Identifier: MIT */
/*
 * Template builds: a Dockerfile and its context become an image in the local
 * store. Each instruction's result is an image record "sbx-cache/<chain>",
 * where the chain digest covers the parent's chain, the evaluated
 * instruction and the content of the files it copies; an existing record is
 * a cache hit. The template alias "<slug>-<10 hex>" is a digest of the final
 * chain plus the build user and resources, computed in a first pass that
 * builds nothing. A per-alias flock makes concurrent builds of one alias, in
 * any process, build once. stage.c runs each stage.
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
			sbx__build_state_clear(&b->final[i]);
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
			sbx__build_state_clear(&b->final[i]);
			b->done[i] = false;
		}
	b->dry = dry;
	b->step = b->built = b->cached = 0;
	size_t last = 0;
	for (size_t i = 0; i < b->f->n_stages; i++) {
		if (!b->needed[i])
			continue;
		int r = sbx__build_stage(b, i);
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
	sbx__build_sha_hex(digest, parts);
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
	if ((r = sbx__build_commit(b, &b->final[t], alias)) < 0)
		return r;
	if (b->o->name && *b->o->name && (r = sbx__build_commit(b, &b->final[t], b->o->name)) < 0)
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
			_cleanup_(sbx__build_image_freep) sbx_image *img = NULL;
			if ((r = sbx_image_get(&img, rt, res.alias, err)) == 0) {
				st.layers = img->layers;
				st.cfg = img->config;
				r = sbx__build_commit(&b, &st, o->name);
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
