/* SPDX-License-Identifier: MIT */
/*
 * The steps of a template build that produce layers. RUN runs in a sandbox
 * of the local provider over the current layers with a host upper directory,
 * which then becomes the layer (whiteouts and opaque directories included).
 * COPY/ADD and WORKDIR build a staging tree on the host, placed with the
 * merged view of the current layers (lview.c) so that symlinked directories
 * such as /bin -> usr/bin are followed, not shadowed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/sandbox.h>
#include <sbx/sys/provider.h>

#include "images/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/passwd.h"
#include "util/sha256.h"
#include "util/str.h"
#include "build_int.h"

#define RUN_OUTPUT_MAX (64u << 10)

static void lview_closep(struct lview *v)
{
	sbx__lview_close(v);
}

/* Layers and digest of the image or stage COPY --from names. */
static int from_source(struct build *b, const struct df_step *s, size_t stage, char ***paths_out,
		       char **digest_out)
{
	int idx = sbx__df_stage_index(b->f, s->from, stage);
	if (idx >= 0) {
		if (!b->done[idx])
			return sbx_error_set(b->err, -EINVAL, "%s:%d: COPY --from=%s: stage is not built",
					     b->f->path, s->line, s->from);
		*digest_out = xasprintf("stage:%s", b->final[idx].chain);
		if (paths_out)
			*paths_out = sbx__strv_dup((const char *const *)b->final[idx].layer_paths);
		return 0;
	}
	sbx_image *img = NULL;
	sbx_error *e = NULL;
	int r = sbx_image_get(&img, b->rt, s->from, &e);
	if (r < 0) {
		sbx_error_free(e);
		return sbx_error_set(b->err, -ENOENT, "%s:%d: COPY --from=%s: no such stage, and no such "
				     "image in the store; import it with 'sbx image import %s SRC'",
				     b->f->path, s->line, s->from, s->from);
	}
	*digest_out = xasprintf("image:%s", img->id);
	if (paths_out)
		*paths_out = sbx__strv_dup((const char *const *)img->layer_paths);
	sbx_image_free(img);
	return 0;
}

int sbx__step_copy_digest(struct build *b, const struct df_step *s, size_t stage, char hex[65])
{
	EVP_MD_CTX *md = sbx__sha256_new();
	int r = 0;
	if (s->from) {
		_cleanup_free_ char *d = NULL;
		r = from_source(b, s, stage, NULL, &d);
		if (r == 0)
			EVP_DigestUpdate(md, d, strlen(d));
	} else {
		char **files = NULL;
		char **plain = xcalloc(1, sizeof(char *));
		for (size_t i = 0; s->srcs[i]; i++)
			if (!sbx__str_startswith(s->srcs[i], "<<"))
				sbx__strv_push(&plain, s->srcs[i]);
		r = sbx__ctx_sources(&files, b->context, b->ig, plain, b->err);
		sbx__strv_free(plain);
		size_t cl = strlen(b->context);
		for (size_t i = 0; r == 0 && files[i]; i++) {
			const char *rel = files[i][cl] ? files[i] + cl + 1 : "";
			EVP_DigestUpdate(md, "\nSRC ", 5);
			EVP_DigestUpdate(md, rel, strlen(rel) + 1);
			r = sbx__ctx_hash(md, b->context, rel, b->ig, b->err);
		}
		sbx__strv_free(files);
		if (r < 0)
			sbx_error_prefix(b->err, r, "%s:%d: %s", b->f->path, s->line,
					 s->kind == DF_ADD ? "ADD" : "COPY");
	}
	char out[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_final_hex(md, out);
	EVP_MD_CTX_free(md);
	if (r == 0)
		memcpy(hex, out, sizeof(out));
	return r;
}

/* Looks NAME up in the image's passwd or group file; -1 if absent. */
static long lookup_id(const struct lview *v, const char *file, const char *name, long *gid_out)
{
	_cleanup_free_ char *data = NULL;
	size_t len;
	if (sbx__lview_read(&data, &len, v, file, SBX_PASSWD_MAX, NULL) < 0)
		return -1;
	struct sbx_pwent e;
	if (sbx__pw_by_name(&e, data, len, strcmp(file, "/etc/group") == 0, name) < 0)
		return -1;
	if (gid_out)
		*gid_out = e.gid;
	long id = e.id;
	sbx__pw_clear(&e);
	return id;
}

static bool numeric(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

/* --chown=USER[:GROUP] against the image's /etc/passwd and /etc/group. */
static int resolve_chown(struct build *b, const struct lview *v, const struct df_step *s,
			 struct copy_opts *co)
{
	_cleanup_free_ char *u = xstrdup(s->chown);
	char *g = strchr(u, ':');
	if (g)
		*g++ = '\0';
	long uid, gid = -1;
	if (numeric(u))
		uid = strtol(u, NULL, 10);
	else if ((uid = lookup_id(v, "/etc/passwd", u, &gid)) < 0)
		return sbx_error_set(b->err, -EINVAL, "%s:%d: --chown=%s: no user '%s' in the image's /etc/passwd",
				     b->f->path, s->line, s->chown, u);
	if (g && numeric(g))
		gid = strtol(g, NULL, 10);
	else if (g && (gid = lookup_id(v, "/etc/group", g, NULL)) < 0)
		return sbx_error_set(b->err, -EINVAL, "%s:%d: --chown=%s: no group '%s' in the image's /etc/group",
				     b->f->path, s->line, s->chown, g);
	if (gid < 0)
		gid = uid;
	co->chown = true;
	co->uid = (uid_t)uid;
	co->gid = (gid_t)gid;
	return 0;
}

static char *join_path(const char *dir, const char *name)
{
	return strcmp(dir, "/") == 0 ? xasprintf("/%s", name) : xasprintf("%s/%s", dir, name);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static const struct df_heredoc *heredoc_of(const struct df_step *s, const char *src)
{
	for (size_t k = 0; k < s->insn->n_heredocs; k++)
		if (strcmp(s->insn->heredocs[k].name, src + 2) == 0)
			return &s->insn->heredocs[k];
	return NULL;
}

static int write_heredoc(struct build *b, const struct state *st, const struct df_step *s,
			 const struct df_heredoc *h, const char *dst, const struct copy_opts *co)
{
	struct df_vars vars = { .env = st->cfg.env, .args = st->args };
	_cleanup_free_ char *body = h->expand ? sbx__df_expand_vars(h->body, b->f->escape, &vars)
					      : xstrdup(h->body);
	if (!body)
		return sbx_error_set(b->err, -E2BIG, "%s:%d: heredoc %s expands to more than %u MiB", b->f->path,
				     s->line, h->name, SBX_DF_MAX >> 20);
	unlink(dst);
	int r = sbx__write_file_atomic(dst, body, strlen(body), 0644, b->err);
	if (r < 0)
		return r;
	if (lchown(dst, co->chown ? co->uid : 0, co->chown ? co->gid : 0) < 0 ||
	    (co->chmod >= 0 && chmod(dst, (mode_t)co->chmod) < 0))
		return sbx_error_setsys(b->err, -errno, errno, "%s:%d: set owner of %s", b->f->path, s->line, dst);
	return 0;
}

/* Host paths of source I: context files (wildcards expanded), or the file
 * or tree exported from the --from stage or image into WORK. */
static int source_files(char ***out, struct build *b, const struct df_step *s, size_t stage,
			size_t i, const char *work)
{
	if (!s->from) {
		char *one[2] = { s->srcs[i], NULL };
		return sbx__ctx_sources(out, b->context, b->ig, one, b->err);
	}
	_cleanup_free_ char *digest = NULL;
	char **paths = NULL;
	int r = from_source(b, s, stage, &paths, &digest);
	if (r < 0)
		return r;
	_cleanup_(lview_closep) struct lview v = { 0 };
	r = sbx__lview_open(&v, paths, b->err);
	sbx__strv_free(paths);
	if (r < 0)
		return r;
	_cleanup_free_ char *abs = s->srcs[i][0] == '/' ? xstrdup(s->srcs[i]) : xasprintf("/%s", s->srcs[i]);
	struct lnode n = { 0 };
	r = sbx__lview_resolve(&n, &v, abs, true, b->err);
	if (r == 0 && !n.exists)
		r = sbx_error_set(b->err, -ENOENT, "COPY --from=%s: %s not found", s->from, s->srcs[i]);
	_cleanup_free_ char *dir = xasprintf("%s/%zu", work, i);
	_cleanup_free_ char *dst = xasprintf("%s/%s", dir, strcmp(n.path, "/") ? base_name(n.path) : "root");
	if (r == 0 && (r = sbx__mkdir_p(dir, 0700, b->err)) == 0 &&
	    (r = sbx__lview_export(&v, &n, dst, b->err)) == 0) {
		*out = xcalloc(1, sizeof(char *));
		sbx__strv_push(out, dst);
	}
	sbx__lnode_clear(&n);
	return r;
}

/* Where source file F (from source_files) resolves: the context and F's
 * path in it, or for --from the export directory and F's name. Symlinks in
 * the source resolve inside that root only (ctxcopy.c). *root_out owned. */
static const char *src_root(char **root_out, const struct build *b, const struct df_step *s,
			    const char *f)
{
	if (s->from) {
		*root_out = xstrndup(f, (size_t)(base_name(f) - f - 1));
		return base_name(f);
	}
	size_t cl = strlen(b->context);
	*root_out = xstrdup(b->context);
	return f[cl] ? f + cl + 1 : "";
}

static bool is_dir(const struct build *b, const struct df_step *s, const char *f)
{
	_cleanup_free_ char *root = NULL;
	const char *rel = src_root(&root, b, s, f);
	struct stat st;
	return sbx__ctx_stat(&st, root, rel) == 0 && S_ISDIR(st.st_mode);
}

static bool is_archive(const struct build *b, const struct df_step *s, const char *f)
{
	_cleanup_free_ char *root = NULL;
	const char *rel = src_root(&root, b, s, f);
	return sbx__ctx_is_archive(root, rel);
}

static int copy_src(struct build *b, const struct df_step *s, const char *f, const char *dst, bool archive,
		    struct copy_opts *co)
{
	_cleanup_free_ char *root = NULL;
	const char *rel = src_root(&root, b, s, f);
	co->rel = s->from ? NULL : rel;
	return archive ? sbx__ctx_extract(root, rel, dst, co, b->err) : sbx__ctx_copy(root, rel, dst, co, b->err);
}

static bool is_heredoc(const struct df_step *s, size_t i)
{
	return !s->from && sbx__str_startswith(s->srcs[i], "<<");
}

/* Copies one source's files into directory TOP (staging path). */
static int copy_into(struct build *b, const struct state *st, const struct df_step *s, size_t i,
		     char *const *files, const char *top, bool archive, struct copy_opts *co)
{
	if (is_heredoc(s, i)) {
		const struct df_heredoc *h = heredoc_of(s, s->srcs[i]);
		_cleanup_free_ char *p = xasprintf("%s/%s", top, h->name);
		return write_heredoc(b, st, s, h, p, co);
	}
	int r = 0;
	for (size_t k = 0; files && files[k] && r == 0; k++) {
		const char *f = files[k];
		_cleanup_free_ char *target = is_dir(b, s, f) ? xstrdup(top) : xasprintf("%s/%s", top, base_name(f));
		r = copy_src(b, s, f, archive ? top : target, archive, co);
	}
	return r;
}

static void strvv_free(char ***v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		sbx__strv_free(v[i]);
	free(v);
}

static int copy_layer(struct build *b, struct state *st, const struct df_step *s, size_t stage,
		      const char *work, const char *staging)
{
	_cleanup_(lview_closep) struct lview v = { 0 };
	int r = sbx__lview_open(&v, st->layer_paths, b->err);
	if (r < 0)
		return r;
	struct copy_opts co = { .chmod = -1, .follow_top = true, .ig = s->from ? NULL : b->ig };
	if (s->chmod)
		co.chmod = (int)strtol(s->chmod, NULL, 8);
	if (s->chown && (r = resolve_chown(b, &v, s, &co)) < 0)
		return r;
	size_t n_src = sbx__strv_len((const char *const *)s->srcs);
	char ***files = xcalloc(n_src + 1, sizeof(char **));
	_cleanup_free_ char *from_dir = xasprintf("%s/from", work);
	size_t n_files = 0;
	for (size_t i = 0; i < n_src && r == 0; i++) {
		if (!is_heredoc(s, i))
			r = source_files(&files[i], b, s, stage, i, from_dir);
		n_files += files[i] ? sbx__strv_len((const char *const *)files[i]) : 1;
	}
	const char *wd = st->cfg.workdir && *st->cfg.workdir ? st->cfg.workdir : "/";
	_cleanup_free_ char *dst = s->dst[0] == '/' ? xstrdup(s->dst) : join_path(wd, s->dst);
	bool one_dir = r == 0 && n_files == 1 && files[0] && is_dir(b, s, files[0][0]);
	bool archive = r == 0 && s->kind == DF_ADD && n_files == 1 && files[0] && !one_dir &&
		       is_archive(b, s, files[0][0]);
	struct lnode dn = { 0 };
	if (r == 0)
		r = sbx__lview_resolve(&dn, &v, dst, true, b->err);
	bool into = s->dst[strlen(s->dst) - 1] == '/' || n_files > 1 || one_dir || archive ||
		    (dn.exists && S_ISDIR(dn.st.st_mode));
	_cleanup_free_ char *canon = dn.path ? xstrdup(dn.path) : NULL;
	bool existed = dn.exists;
	sbx__lnode_clear(&dn);
	if (r == 0 && into) {
		r = sbx__lview_mkparents(&v, staging, canon, b->err);
		_cleanup_free_ char *top = xasprintf("%s%s", staging, canon);
		if (r == 0 && !existed && co.chown && lchown(top, co.uid, co.gid) < 0)
			r = sbx_error_setsys(b->err, -errno, errno, "chown %s", top);
		for (size_t i = 0; i < n_src && r == 0; i++)
			r = copy_into(b, st, s, i, files[i], top, archive, &co);
	} else if (r == 0) {
		char *slash = strrchr(canon, '/');
		_cleanup_free_ char *parent = slash == canon ? xstrdup("/") : xstrndup(canon, (size_t)(slash - canon));
		r = sbx__lview_mkparents(&v, staging, parent, b->err);
		_cleanup_free_ char *target = xasprintf("%s%s", staging, canon);
		if (r == 0 && is_heredoc(s, 0)) {
			r = write_heredoc(b, st, s, heredoc_of(s, s->srcs[0]), target, &co);
		} else if (r == 0) {
			r = copy_src(b, s, files[0][0], target, false, &co);
		}
	}
	strvv_free(files, n_src);
	return r < 0 ? sbx_error_prefix(b->err, r, "%s:%d: %s", b->f->path, s->line, s->insn->keyword) : 0;
}

static void on_output(int fd, const char *data, size_t len, void *payload)
{
	struct build *b = payload;
	if (b->o->on_output)
		b->o->on_output(fd, data, len, b->o->payload);
}

/* The last non-empty line of captured stderr, for the error message. */
static char *last_line(const char *s, size_t len)
{
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' '))
		len--;
	size_t st = len;
	while (st && s[st - 1] != '\n')
		st--;
	size_t n = len - st > 200 ? 200 : len - st;
	return xstrndup(s + st, n);
}

static void sandbox_freep(sbx_sandbox **sb)
{
	if (*sb) {
		sbx_sandbox_destroy(*sb, NULL);
		sbx_sandbox_free(*sb);
	}
}

/* Runs S in a sandbox over ST's layers; the writable layer lands in WORK/upper. */
static int run_step(struct build *b, struct state *st, const struct df_step *s, const char *work)
{
	if (!st->layer_paths || !st->layer_paths[0])
		return sbx_error_set(b->err, -EINVAL, "%s:%d: RUN needs a base image with a shell "
				     "(the image has no layers)", b->f->path, s->line);
	const char *labels[] = { "sbx.build=1", NULL };
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.provider = sbx_provider_host()->name;
	so.image = st->record;
	so.cpus = b->o->cpus;
	so.memory_mb = b->o->memory_mb;
	so.storage_mb = b->o->storage_mb;
	so.network = b->o->network_set ? b->o->network : SBX_NETWORK_INTERNET;
	if (s->network >= 0)
		so.network = s->network ? SBX_NETWORK_INTERNET : SBX_NETWORK_NONE;
	so.upper_dir = work;
	so.labels = labels;
	_cleanup_(sandbox_freep) sbx_sandbox *sb = NULL;
	int r = sbx_sandbox_create(&sb, b->rt, &so, b->err);
	if (r < 0)
		return sbx_error_prefix(b->err, r, "step [%d/%d] %s: build sandbox", b->step, b->n_steps,
					s->display);
	char **env = sbx__strv_dup((const char *const *)st->cfg.env);
	for (size_t i = 0; st->args && st->args[i]; i++)
		if (sbx__strv_find_key(env, st->args[i]) < 0)
			sbx__strv_push(&env, st->args[i]);
	char **argv = NULL;
	if (s->argv) {
		argv = sbx__strv_dup((const char *const *)s->argv);
	} else {
		argv = sbx__strv_dup((const char *const *)st->shell);
		sbx__strv_push(&argv, s->shell);
	}
	sbx_exec_opts eo = SBX_EXEC_OPTS_INIT;
	eo.argv = (const char *const *)argv;
	eo.env = (const char *const *)env;
	eo.cwd = st->cfg.workdir && *st->cfg.workdir ? st->cfg.workdir : "/";
	eo.user = st->cfg.user && *st->cfg.user ? st->cfg.user : "root";
	double left = sbx__build_left(b);
	eo.timeout_s = left > 0 ? left : 0;
	eo.output_max = RUN_OUTPUT_MAX;
	eo.on_output = on_output;
	eo.payload = b;
	sbx_exec_result res = { 0 };
	r = left < 0 ? -ETIMEDOUT : sbx_sandbox_exec(&res, sb, &eo, b->err);
	sbx__strv_free(argv);
	sbx__strv_free(env);
	if (r == -ETIMEDOUT || (r == 0 && res.timed_out)) {
		sbx_exec_result_free(&res);
		return sbx_error_set(b->err, -ETIMEDOUT, "build timed out after %.0f s at step [%d/%d] %s",
				     b->o->timeout_s, b->step, b->n_steps, s->display);
	}
	if (r < 0)
		return sbx_error_prefix(b->err, r, "step [%d/%d] %s", b->step, b->n_steps, s->display);
	if (res.exit_code != 0) {
		_cleanup_free_ char *tail = last_line(res.err ? res.err : "", res.err_len);
		r = sbx_error_set(b->err, -EIO, "%s:%d: step [%d/%d] %s failed with exit code %d%s%s",
				  b->f->path, s->line, b->step, b->n_steps, s->display, res.exit_code,
				  *tail ? ": " : "", tail);
	}
	sbx_exec_result_free(&res);
	return r;
}

/* Drops what the sandbox itself put in the writable layer (not the step's work). */
static void scrub_upper(const char *upper)
{
	static const char *const identity[] = { "etc/hostname", "etc/hosts", "etc/resolv.conf" };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(identity); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", upper, identity[i]);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
			unlink(p);
	}
}

static int workdir_layer(struct build *b, struct state *st, const struct df_step *s,
			 const char *staging, bool *made)
{
	_cleanup_(lview_closep) struct lview v = { 0 };
	int r = sbx__lview_open(&v, st->layer_paths, b->err);
	if (r < 0)
		return r;
	struct lnode n = { 0 };
	if ((r = sbx__lview_resolve(&n, &v, s->dst, true, b->err)) < 0)
		return r;
	*made = !(n.exists && S_ISDIR(n.st.st_mode));
	if (*made)
		r = sbx__lview_mkparents(&v, staging, n.path, b->err);
	sbx__lnode_clear(&n);
	return r;
}

int sbx__step_layer(char **digest_out, struct build *b, struct state *st, const struct df_step *s,
		    size_t stage)
{
	*digest_out = NULL;
	char rnd[9];
	sbx__random_hex(rnd, 8);
	_cleanup_free_ char *work = xasprintf("%s/step%d-%s", b->tmp, b->step, rnd);
	_cleanup_free_ char *root = xasprintf("%s/root", work);
	int r = sbx__mkdir_p(root, 0755, b->err);
	if (r < 0)
		return r;
	bool layer = true;
	const char *dir = root;
	_cleanup_free_ char *upper = xasprintf("%s/upper", work);
	if (s->kind == DF_RUN) {
		r = run_step(b, st, s, work);
		dir = upper;
		if (r == 0)
			scrub_upper(upper);
	} else if (s->kind == DF_COPY || s->kind == DF_ADD) {
		r = copy_layer(b, st, s, stage, work, root);
	} else if (s->kind == DF_WORKDIR) {
		r = workdir_layer(b, st, s, root, &layer);
	} else {
		layer = false;
	}
	if (r == 0 && layer)
		r = sbx__image_layer_from_dir(digest_out, b->rt, dir, b->err);
	sbx__rm_rf(work, NULL);
	return r;
}
