/* SPDX-License-Identifier: MIT */
/*
 * The Dockerfile front end of src/templates, the one part of the layer that
 * other layers use: parsing and evaluating a Dockerfile (dockerfile.c,
 * dockerfile_eval.c, words.c) and reading a build context (context.c,
 * ctxcopy.c). Remote providers that build templates from a task's
 * Dockerfile (providers/e2b/templates.c) include this header, never
 * templates_int.h, which stays private to the executor. See docs/templates.md.
 */
#ifndef SBX_TEMPLATES_DOCKERFILE_H
#define SBX_TEMPLATES_DOCKERFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>


#include <sbx/error.h>

#include "util/sha256.h"


/* Most bytes all of a stage's ENV and ARG values may hold together: a
 * Dockerfile whose values double at each line ($A$A) must fail, not eat the
 * host's memory (found by fuzz/dockerfile: 1.8 GB and 7 minutes for 2 KB). */
#define SBX_DF_VARS_MAX (1u << 20)
/* Longest expanded word (an ENV value, a COPY source, ...); heredoc bodies
 * may take SBX_DF_MAX. */
#define SBX_DF_WORD_MAX (256u << 10)
/* Most words one instruction splits into. */
#define SBX_DF_WORDS_MAX 65536u

/* Largest Dockerfile and .dockerignore read. */
#define SBX_DF_MAX (4u << 20)

enum df_kind {
	DF_FROM, DF_RUN, DF_COPY, DF_ADD, DF_WORKDIR, DF_ENV, DF_ARG, DF_USER, DF_SHELL,
	DF_LABEL, DF_EXPOSE, DF_CMD, DF_ENTRYPOINT, DF_VOLUME, DF_STOPSIGNAL, DF_HEALTHCHECK,
	DF_ONBUILD, DF_MAINTAINER,
};

/* One here-document: `<<[-]["']NAME["']` and the lines after the instruction. */
struct df_heredoc {
	char *name;
	char *body;       /* lines joined with '\n', final newline included; tabs stripped for <<- */
	char *raw;        /* the lines as written plus the terminator line (for a shell script) */
	bool expand;      /* false when NAME was quoted */
};

/* One instruction as written (continuations joined, heredocs collected). */
struct df_insn {
	enum df_kind kind;
	int line;                   /* first line of the instruction, 1-based */
	char *keyword;              /* upper case */
	char *args;                 /* everything after the keyword, flags included */
	struct df_heredoc *heredocs;
	size_t n_heredocs;
};

/* A build stage: FROM ... [AS name] and the instructions up to the next FROM. */
struct df_stage {
	const struct df_insn *from;
	char *name;                 /* lower case, or NULL */
	size_t first, n;            /* instructions after FROM: insns[first .. first+n) */
};

struct df_file {
	char *path;                 /* label used in messages ("Dockerfile") */
	char escape;
	struct df_insn *insns;
	size_t n_insns;
	size_t n_meta;              /* ARGs before the first FROM: insns[0 .. n_meta) */
	struct df_stage *stages;
	size_t n_stages;
};

/* dockerfile.c: parsing. LABEL is the file name used in messages. */
int sbx__df_parse(struct df_file **out, const char *text, size_t len, const char *label,
		  sbx_error **err);
void sbx__df_free(struct df_file *f);
/* Index of the stage called NAME or numbered NAME, below `before`; -1 if none. */
int sbx__df_stage_index(const struct df_file *f, const char *name, size_t before);

/* Variables visible to substitution: ENV first, then ARG (both "K=V"). */
struct df_vars {
	char *const *env;
	char *const *args;
};

/* words.c: Docker's word processing. Expands $VAR, ${VAR}, ${VAR:-w}, ${VAR:+w},
 * ${VAR-w}, ${VAR+w}; removes quotes and the escape character. With `split`,
 * unquoted whitespace separates words; otherwise the result is one word.
 * @param errmsg_out on -EINVAL, an owned description of what is wrong. */
int sbx__df_words(char ***out, const char *in, char escape, bool split, const struct df_vars *v,
		  char **errmsg_out);
/* One word (split = false). */
int sbx__df_word(char **out, const char *in, char escape, const struct df_vars *v,
		 char **errmsg_out);
/* Expands variables only (heredoc bodies): no quote or escape processing
 * except that the escape character before '$' keeps it literal. NULL when
 * the result would pass SBX_DF_MAX (an error for the caller, never a cut). */
char *sbx__df_expand_vars(const char *in, char escape, const struct df_vars *v);
/* Value of NAME: ENV first, then ARG; NULL if unset. Borrowed. */
const char *sbx__df_lookup(const struct df_vars *v, const char *name, size_t n);

/* An evaluated instruction: flags parsed, variables substituted. */
struct df_step {
	enum df_kind kind;
	int line;
	char *text;                 /* canonical text (hashed into the cache chain) */
	char *display;              /* "RUN apt-get ..." as written, for progress lines */
	char **argv;                /* RUN/CMD/ENTRYPOINT/SHELL exec form, or NULL */
	char *shell;                /* RUN/CMD/ENTRYPOINT shell form */
	int network;                /* RUN --network: -1 default, 0 none, 1 host */
	char **srcs;                /* COPY/ADD sources; "<<NAME" for a heredoc */
	char *dst;                  /* COPY/ADD destination; WORKDIR/USER value */
	char *from;                 /* COPY --from */
	char *chown, *chmod;        /* COPY/ADD --chown/--chmod */
	char **kv;                  /* ENV/LABEL/ARG "K=V" (ARG: only those with a value) */
	char **names;               /* ARG: every declared name; EXPOSE: ports */
	const struct df_insn *insn; /* heredocs */
};

/*
 * Evaluates instruction IN against variables V (the state before it).
 * ARG values come from BUILD_ARGS ("K=V"), else from the default, else from
 * META (the ARGs declared before FROM). WORKDIR is made absolute against CWD.
 * @return 0 or -EINVAL with "FILE:LINE: what was expected".
 */
int sbx__df_eval(struct df_step *out, const struct df_file *f, const struct df_insn *in,
		 const struct df_vars *v, char *const *build_args, char *const *meta,
		 const char *cwd, sbx_error **err);
void sbx__df_step_clear(struct df_step *s);
/* Evaluates the ARGs before the first FROM into "K=V" (only those with a value). */
int sbx__df_meta_args(char ***out, const struct df_file *f, char *const *build_args,
		      sbx_error **err);
/* FROM of stage S: the image reference and name, with meta ARGs substituted. */
int sbx__df_from(char **ref_out, const struct df_file *f, const struct df_stage *s,
		 char *const *meta, sbx_error **err);
/* context.c: the build context. Paths are resolved inside a root directory
 * (the context, or a tree exported for COPY --from) as if it were '/'. */
struct ctx_ignore;
int sbx__ctx_ignore_load(struct ctx_ignore **out, const char *context_dir, sbx_error **err);
void sbx__ctx_ignore_free(struct ctx_ignore *ig);
/* True when relative path REL is excluded. */
bool sbx__ctx_ignored(const struct ctx_ignore *ig, const char *rel);
/* Glob match of a path against a .dockerignore pattern ('**' spans directories). */
bool sbx__ctx_match(const char *pattern, const char *rel);
/* Expands COPY sources against the context: relative paths, wildcards;
 * every result is "<context>/<rel>" (owned strv), REL as written (cleaned),
 * not resolved. -ENOENT names the missing source, or the symlink that leads
 * out of the context. */
int sbx__ctx_sources(char ***out, const char *context_dir, const struct ctx_ignore *ig,
		     char *const *srcs, sbx_error **err);
/* Reads the Dockerfile: PATH as given (like `docker build -f`), else
 * "Dockerfile" inside the context. -EINVAL when it is not a regular file
 * (never blocks on a FIFO). */
int sbx__ctx_read_dockerfile(char **out, size_t *len, const char *context_dir, const char *path,
			     sbx_error **err);
/* O_PATH fd of directory DIR (the root lookups start from). */
int sbx__ctx_open_root(const char *dir, sbx_error **err);
/* openat2(RESOLVE_IN_ROOT) of REL below ROOT: an fd or -errno. */
int sbx__ctx_open_in(int root, const char *rel, int flags, bool follow);
/* REL as a regular file opened for reading, O_NONBLOCK; -errno, -EINVAL. */
int sbx__ctx_open_file(int root, const char *rel);
/* The host path REL resolves to inside the context (symlinks followed
 * there only), for code that must hand a path to another reader. Owned. */
int sbx__ctx_real_path(char **out, const char *context_dir, const char *rel, sbx_error **err);
/* Sorted entry names of the directory open as DFD (owned strv). */
char **sbx__ctx_sorted_entries(int dfd);

/* ctxcopy.c: reading sources. ROOT_DIR is the directory REL resolves in. */
/* Adds paths, types, modes and bytes of REL (a file or tree) to MD (from
 * sbx__sha256_new), in sorted order, skipping ignored entries (ig may be NULL). */
int sbx__ctx_hash(EVP_MD_CTX *md, const char *root_dir, const char *rel, const struct ctx_ignore *ig,
		  sbx_error **err);
/* stat of REL, a final symlink followed inside ROOT_DIR; 0 or -errno. */
int sbx__ctx_stat(struct stat *st, const char *root_dir, const char *rel);
/* True when REL is a regular file holding a tar archive (plain or compressed). */
bool sbx__ctx_is_archive(const char *root_dir, const char *rel);

#endif
