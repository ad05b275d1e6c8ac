/* SPDX-License-Identifier: MIT */
/*
 * One stage of a template build: FROM (an image, an earlier stage or
 * scratch), then each instruction, config ones in the state and the others
 * as layers looked up in, or added to, the cache chain (build.c drives the
 * stages).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/image.h>
#include <sbx/template.h>

#include "images/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/str.h"
#include "build_int.h"
#include "util/lazy.h"

#define CACHE_PREFIX "sbx-cache/"

/* sha256 hex of the parts, each followed by '\n'. */
void sbx__build_sha_hex(char out[65], const char *const *parts)
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

void sbx__build_state_clear(struct state *s)
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

void sbx__build_image_freep(sbx_image **p)
{
	sbx_image_free(*p);
}

/* Commits ST's layers and config as NAME; refreshes its layer paths. */
int sbx__build_commit(struct build *b, struct state *st, const char *name)
{
	_cleanup_close_ int lock = -1;
	_cleanup_(sbx__build_image_freep) sbx_image *img = NULL;
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
		_cleanup_(sbx__build_image_freep) sbx_image *img = NULL;
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
	sbx__build_sha_hex(st->chain, parts);
	if (b->dry)
		return 0;
	b->cached++;
	sbx__build_log(b, "[%d/%d] FROM %s\n", b->step, b->n_steps, ref);
	free(st->record);
	st->record = xasprintf(CACHE_PREFIX "%s", st->chain);
	return sbx__build_commit(b, st, st->record);
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
	sbx__build_sha_hex(chain, parts);
	apply_config(st, &s);
	if (r < 0 || b->dry) {
		memcpy(st->chain, chain, sizeof(chain));
		sbx__df_step_clear(&s);
		return r;
	}
	_cleanup_free_ char *record = xasprintf(CACHE_PREFIX "%s", chain);
	_cleanup_(sbx__build_image_freep) sbx_image *img = NULL;
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
			r = sbx__build_commit(b, st, record);
		if (r == 0)
			b->built++;
	}
	memcpy(st->chain, chain, sizeof(chain));
	free(st->record);
	st->record = steal_ptr(&record);
	sbx__df_step_clear(&s);
	return r;
}

int sbx__build_stage(struct build *b, size_t si)
{
	const struct df_stage *stg = &b->f->stages[si];
	struct state st;
	int r = do_from(b, si, &st);
	for (size_t i = 0; r == 0 && i < stg->n; i++)
		r = do_step(b, si, &st, &b->f->insns[stg->first + i]);
	if (r < 0) {
		sbx__build_state_clear(&st);
		return r;
	}
	b->final[si] = st;
	b->done[si] = true;
	return 0;
}
