/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: the Dockerfile parser (src/templates/dockerfile.c) and the
 * evaluator behind it (dockerfile_eval.c, words.c): parse, then evaluate
 * every stage's FROM and instructions the way a build does, carrying ENV and
 * ARG values from one instruction to the next. Nothing is built.
 */
#include <stdlib.h>

#include "../../src/templates/templates_int.h"
#include "../../src/util/alloc.h"
#include "../../src/util/str.h"
#include "fuzz.h"

static char *const build_args[] = { "VERSION=1.2", "BASE=debian:12", "EMPTY=", NULL };

static void eval_stage(const struct df_file *f, const struct df_stage *stg, char *const *meta)
{
	sbx_error *e = NULL;
	char *ref = NULL;
	if (sbx__df_from(&ref, f, stg, meta, &e) == 0) {
		(void)sbx__df_stage_index(f, ref, (size_t)(stg - f->stages));
		free(ref);
	} else {
		sbx_error_free(e);
		e = NULL;
	}
	char **env = NULL, **args = NULL;
	sbx__strv_push(&env, "PATH=/usr/local/bin:/usr/bin:/bin");
	sbx__strv_push(&args, "TARGETARCH=amd64");
	char *cwd = xstrdup("/");
	for (size_t i = 0; i < stg->n; i++) {
		const struct df_insn *in = &f->insns[stg->first + i];
		struct df_vars v = { .env = env, .args = args };
		struct df_step s;
		if (sbx__df_eval(&s, f, in, &v, build_args, meta, cwd, &e) < 0) {
			sbx_error_free(e);
			e = NULL;
			continue;
		}
		for (size_t k = 0; s.kv && s.kv[k]; k++)
			sbx__strv_setenv(s.kind == DF_ENV ? &env : &args, s.kv[k]);
		if (s.kind == DF_WORKDIR && s.dst) {
			free(cwd);
			cwd = xstrdup(s.dst);
		}
		sbx__df_step_clear(&s);
	}
	free(cwd);
	sbx__strv_free(env);
	sbx__strv_free(args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct df_file *f = NULL;
	sbx_error *e = NULL;
	if (sbx__df_parse(&f, (const char *)data, size, "Dockerfile", &e) < 0) {
		sbx_error_free(e);
		return 0;
	}
	char **meta = NULL;
	if (sbx__df_meta_args(&meta, f, build_args, &e) == 0) {
		for (size_t i = 0; i < f->n_stages; i++)
			eval_stage(f, &f->stages[i], meta);
	} else {
		sbx_error_free(e);
	}
	struct df_vars v = { .env = meta };
	for (size_t i = 0; i < f->n_insns; i++) {
		char **words = NULL, *msg = NULL;
		if (sbx__df_words(&words, f->insns[i].args, f->escape, true, &v, &msg) == 0)
			sbx__strv_free(words);
		free(msg);
		for (size_t h = 0; h < f->insns[i].n_heredocs; h++)
			free(sbx__df_expand_vars(f->insns[i].heredocs[h].body, f->escape, &v));
	}
	sbx__strv_free(meta);
	sbx__df_free(f);
	return 0;
}
