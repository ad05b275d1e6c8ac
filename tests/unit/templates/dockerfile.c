/* SPDX-License-Identifier: MIT */
/* Dockerfile parsing and evaluation: continuations, heredocs, exec versus
 * shell form, ARG/ENV substitution, stages, .dockerignore and errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "templates/templates_int.h"
#include "util/str.h"

static struct df_file *parse_ok(const char *text)
{
	struct df_file *f = NULL;
	sbx_error *err = NULL;
	int r = sbx__df_parse(&f, text, strlen(text), "Dockerfile", &err);
	cr_assert_eq(r, 0, "parse: %s", err ? err->msg : "?");
	return f;
}

static char *parse_err(const char *text)
{
	struct df_file *f = NULL;
	sbx_error *err = NULL;
	int r = sbx__df_parse(&f, text, strlen(text), "Dockerfile", &err);
	cr_assert_eq(r, -EINVAL);
	cr_assert_not_null(err);
	char *m = strdup(err->msg);
	sbx_error_free(err);
	return m;
}

static void eval_ok(struct df_step *s, struct df_file *f, size_t i, char *const *env, char *const *args)
{
	struct df_vars v = { .env = env, .args = args };
	sbx_error *err = NULL;
	int r = sbx__df_eval(s, f, &f->insns[i], &v, NULL, NULL, "/", &err);
	cr_assert_eq(r, 0, "eval: %s", err ? err->msg : "?");
}

Test(templates_dockerfile, continuations_and_comments)
{
	struct df_file *f = parse_ok("FROM base\n"
				     "# a comment\n"
				     "RUN apt-get update && \\\n"
				     "    # comment inside\n"
				     "\n"
				     "    apt-get install -y git\n"
				     "run echo done\n");
	cr_assert_eq(f->n_insns, 3);
	cr_assert_eq(f->insns[1].kind, DF_RUN);
	cr_assert_eq(f->insns[1].line, 3);
	cr_assert_str_eq(f->insns[1].args, "apt-get update &&     apt-get install -y git");
	cr_assert_str_eq(f->insns[2].keyword, "RUN");
	cr_assert_eq(f->insns[2].line, 7);
	sbx__df_free(f);
}

Test(templates_dockerfile, escape_directive)
{
	struct df_file *f = parse_ok("# escape=`\nFROM base\nRUN echo a `\n  b\nCOPY C:\\x /y\n");
	cr_assert_eq(f->escape, '`');
	cr_assert_str_eq(f->insns[1].args, "echo a   b");
	cr_assert_str_eq(f->insns[2].args, "C:\\x /y");
	sbx__df_free(f);
}

Test(templates_dockerfile, heredocs)
{
	struct df_file *f = parse_ok("FROM base\n"
				     "RUN <<EOF\n"
				     "echo one\n"
				     "echo two\n"
				     "EOF\n"
				     "RUN cat <<-'A' > /x && cat <<B > /y\n"
				     "\tliteral $X\n"
				     "\tA\n"
				     "b $X\n"
				     "B\n"
				     "COPY <<EOF /etc/conf\n"
				     "v=${V}\n"
				     "EOF\n"
				     "ENV Z=1\n");
	cr_assert_eq(f->n_insns, 5);
	cr_assert_eq(f->insns[1].n_heredocs, 1);
	cr_assert_str_eq(f->insns[1].heredocs[0].body, "echo one\necho two\n");
	cr_assert_eq(f->insns[2].n_heredocs, 2);
	cr_assert_str_eq(f->insns[2].heredocs[0].name, "A");
	cr_assert_str_eq(f->insns[2].heredocs[0].body, "literal $X\n");
	cr_assert(!f->insns[2].heredocs[0].expand);
	cr_assert(f->insns[2].heredocs[1].expand);
	cr_assert_eq(f->insns[4].line, 14);

	struct df_step s;
	eval_ok(&s, f, 1, NULL, NULL);
	cr_assert_str_eq(s.shell, "echo one\necho two\n");
	sbx__df_step_clear(&s);
	eval_ok(&s, f, 2, NULL, NULL);
	cr_assert_str_eq(s.shell, "cat <<-'A' > /x && cat <<B > /y\n\tliteral $X\n\tA\nb $X\nB\n");
	sbx__df_step_clear(&s);
	char *env[] = { "V=42", NULL };
	eval_ok(&s, f, 3, env, NULL);
	cr_assert_str_eq(s.srcs[0], "<<EOF");
	cr_assert_str_eq(s.dst, "/etc/conf");
	cr_assert(strstr(s.text, "v=42"), "%s", s.text);
	sbx__df_step_clear(&s);
	sbx__df_free(f);
}

Test(templates_dockerfile, exec_and_shell_form)
{
	struct df_file *f = parse_ok("FROM base\n"
				     "RUN [\"/bin/echo\", \"a b\"]\n"
				     "RUN echo $HOME\n"
				     "RUN [not json\n"
				     "CMD [\"sleep\", \"1\"]\n"
				     "ENTRYPOINT exec app\n"
				     "SHELL [\"/bin/bash\", \"-c\"]\n");
	struct df_step s;
	eval_ok(&s, f, 1, NULL, NULL);
	cr_assert_not_null(s.argv);
	cr_assert_str_eq(s.argv[1], "a b");
	cr_assert_null(s.shell);
	sbx__df_step_clear(&s);
	char *env[] = { "HOME=/root", NULL };
	eval_ok(&s, f, 2, env, NULL);
	cr_assert_str_eq(s.shell, "echo $HOME", "RUN is not substituted");
	sbx__df_step_clear(&s);
	eval_ok(&s, f, 3, NULL, NULL);
	cr_assert_str_eq(s.shell, "[not json");
	sbx__df_step_clear(&s);
	eval_ok(&s, f, 4, NULL, NULL);
	cr_assert_str_eq(s.argv[0], "sleep");
	sbx__df_step_clear(&s);
	eval_ok(&s, f, 5, NULL, NULL);
	cr_assert_str_eq(s.shell, "exec app");
	sbx__df_step_clear(&s);
	eval_ok(&s, f, 6, NULL, NULL);
	cr_assert_str_eq(s.argv[0], "/bin/bash");
	sbx__df_step_clear(&s);
	sbx__df_free(f);

	f = parse_ok("FROM base\nSHELL /bin/bash -c\n");
	struct df_vars v = { 0 };
	sbx_error *err = NULL;
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[1], &v, NULL, NULL, "/", &err), -EINVAL);
	cr_assert(strstr(err->msg, "Dockerfile:2: SHELL needs the exec form"), "%s", err->msg);
	sbx_error_free(err);
	sbx__df_free(f);
}

Test(templates_dockerfile, substitution)
{
	char *env[] = { "A=1", "P=/usr/bin", "EMPTY=", NULL };
	char *args[] = { "A=arg", "B=two words", NULL };
	struct df_vars v = { .env = env, .args = args };
	struct {
		const char *in, *out;
	} cases[] = {
		{ "$A", "1" },                   /* ENV wins over ARG */
		{ "${B}", "two words" },
		{ "x${A}y", "x1y" },
		{ "${NOPE:-def}", "def" },
		{ "${EMPTY:-def}", "def" },
		{ "${EMPTY-def}", "" },
		{ "${A:+set}", "set" },
		{ "${NOPE:+set}", "" },
		{ "${NOPE:-$P/x}", "/usr/bin/x" },
		{ "'$A'", "$A" },
		{ "\"$A\"", "1" },
		{ "\\$A", "$A" },
		{ "$", "$" },
		{ "a\\ b", "a b" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *w = NULL;
		cr_assert_eq(sbx__df_word(&w, cases[i].in, '\\', &v, NULL), 0, "%s", cases[i].in);
		cr_assert_str_eq(w, cases[i].out, "%s -> %s", cases[i].in, w);
		free(w);
	}
	char **words = NULL;
	cr_assert_eq(sbx__df_words(&words, "K=\"a b\" L=$B ''", '\\', true, &v, NULL), 0);
	cr_assert_eq(sbx__strv_len((const char *const *)words), 3);
	cr_assert_str_eq(words[0], "K=a b");
	cr_assert_str_eq(words[1], "L=two words");
	cr_assert_str_eq(words[2], "");
	sbx__strv_free(words);
	char *msg = NULL, *w = NULL;
	cr_assert_eq(sbx__df_word(&w, "${A", '\\', &v, &msg), -EINVAL);
	cr_assert(strstr(msg, "missing '}'"), "%s", msg);
	free(msg);
	msg = NULL;
	cr_assert_eq(sbx__df_word(&w, "\"open", '\\', &v, &msg), -EINVAL);
	free(msg);
}

Test(templates_dockerfile, env_arg_and_meta_args)
{
	struct df_file *f = parse_ok("ARG TAG=12\n"
				     "ARG REG\n"
				     "FROM ${REG:-docker.io}/debian:${TAG} AS build\n"
				     "ARG TAG\n"
				     "ARG V=1 W\n"
				     "ENV X=$V Y=\"$TAG b\"\n"
				     "ENV LEGACY some value $V\n"
				     "WORKDIR app/$V\n");
	cr_assert_eq(f->n_meta, 2);
	cr_assert_eq(f->n_stages, 1);
	cr_assert_str_eq(f->stages[0].name, "build");
	char *bargs[] = { "TAG=13", "UNUSED=x", NULL };
	char **meta = NULL;
	cr_assert_eq(sbx__df_meta_args(&meta, f, bargs, NULL), 0);
	char *ref = NULL;
	cr_assert_eq(sbx__df_from(&ref, f, &f->stages[0], meta, NULL), 0);
	cr_assert_str_eq(ref, "docker.io/debian:13");
	free(ref);

	struct df_vars v = { 0 };
	struct df_step s;
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[3], &v, bargs, meta, "/", NULL), 0);
	cr_assert_str_eq(s.kv[0], "TAG=13");
	sbx__df_step_clear(&s);
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[4], &v, NULL, meta, "/", NULL), 0);
	cr_assert_eq(sbx__strv_len((const char *const *)s.names), 2);
	cr_assert_eq(sbx__strv_len((const char *const *)s.kv), 1, "W has no value");
	cr_assert_str_eq(s.kv[0], "V=1");
	sbx__df_step_clear(&s);
	char *args[] = { "TAG=13", "V=1", NULL };
	v.args = args;
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[5], &v, NULL, meta, "/", NULL), 0);
	cr_assert_str_eq(s.kv[0], "X=1");
	cr_assert_str_eq(s.kv[1], "Y=13 b");
	sbx__df_step_clear(&s);
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[6], &v, NULL, meta, "/", NULL), 0);
	cr_assert_str_eq(s.kv[0], "LEGACY=some value 1");
	sbx__df_step_clear(&s);
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[7], &v, NULL, meta, "/srv/", NULL), 0);
	cr_assert_str_eq(s.dst, "/srv/app/1");
	sbx__df_step_clear(&s);
	sbx__strv_free(meta);
	sbx__df_free(f);
}

Test(templates_dockerfile, stages_and_copy_flags)
{
	struct df_file *f = parse_ok("FROM base AS Builder\n"
				     "RUN make\n"
				     "FROM base\n"
				     "COPY --from=builder --chown=1000:1000 --chmod=0755 /out/app /usr/bin/\n"
				     "COPY --from=0 a b c /dst/\n"
				     "ADD x.tar.gz /opt\n");
	cr_assert_eq(f->n_stages, 2);
	cr_assert_str_eq(f->stages[0].name, "builder");
	cr_assert_null(f->stages[1].name);
	cr_assert_eq(f->stages[1].first, 3);
	cr_assert_eq(f->stages[1].n, 3);
	cr_assert_eq(sbx__df_stage_index(f, "BUILDER", 1), 0);
	cr_assert_eq(sbx__df_stage_index(f, "0", 1), 0);
	cr_assert_eq(sbx__df_stage_index(f, "builder", 0), -1);
	struct df_step s;
	eval_ok(&s, f, 3, NULL, NULL);
	cr_assert_str_eq(s.from, "builder");
	cr_assert_str_eq(s.chown, "1000:1000");
	cr_assert_str_eq(s.chmod, "0755");
	cr_assert_str_eq(s.srcs[0], "/out/app");
	cr_assert_str_eq(s.dst, "/usr/bin/");
	sbx__df_step_clear(&s);
	eval_ok(&s, f, 4, NULL, NULL);
	cr_assert_eq(sbx__strv_len((const char *const *)s.srcs), 3);
	sbx__df_step_clear(&s);
	sbx__df_free(f);
}

static void expect_error(const char *text, const char *needle)
{
	char *m = parse_err(text);
	cr_assert(strstr(m, needle), "expected '%s' in '%s'", needle, m);
	free(m);
}

static void expect_eval_error(const char *text, size_t insn, const char *needle)
{
	struct df_file *f = parse_ok(text);
	struct df_vars v = { 0 };
	struct df_step s;
	sbx_error *err = NULL;
	cr_assert_eq(sbx__df_eval(&s, f, &f->insns[insn], &v, NULL, NULL, "/", &err), -EINVAL, "%s", text);
	cr_assert(strstr(err->msg, needle), "expected '%s' in '%s'", needle, err->msg);
	sbx_error_free(err);
	sbx__df_free(f);
}

Test(templates_dockerfile, errors_name_the_line)
{
	expect_error("FROM a\n\nFOO bar\n", "Dockerfile:3: unknown instruction 'FOO'");
	expect_error("RUN x\nFROM a\n", "Dockerfile:1: expected FROM before RUN");
	expect_error("# only a comment\n", "no FROM instruction");
	expect_error("FROM a\nRUN\n", "Dockerfile:2: RUN needs at least one argument");
	expect_error("FROM a\nRUN <<EOF\necho\n", "Dockerfile:2: heredoc <<EOF is not terminated");
	expect_error("FROM a AS x\nFROM b AS x\n", "Dockerfile:2: stage name 'x' is already used on line 1");
	expect_error("FROM a b\n", "Dockerfile:1: FROM expects 'IMAGE [AS NAME]'");
	expect_error("# escape=x\nFROM a\n", "Dockerfile:1: escape directive");
	expect_eval_error("FROM a\nCOPY onlyone\n", 1, "Dockerfile:2: COPY expects 'SRC... DEST'");
	expect_eval_error("FROM a\nCOPY a b /c\n", 1, "Dockerfile:2: COPY with several sources");
	expect_eval_error("FROM a\n\nADD https://x.org/f /f\n", 1, "Dockerfile:3: ADD from a URL");
	expect_eval_error("FROM a\nCOPY --bogus=1 a /b\n", 1, "does not support the flag --bogus");
	expect_eval_error("FROM a\nCOPY --chmod=999 a /b\n", 1, "--chmod=999");
	expect_eval_error("FROM a\nENV novalue\n", 1, "Dockerfile:2: ENV expects KEY=VALUE");
	expect_eval_error("FROM a\nRUN --mount=type=bind,src=x echo\n", 1, "RUN --mount");
	expect_eval_error("FROM a\nEXPOSE http\n", 1, "EXPOSE expects PORT");
	expect_eval_error("FROM a\nWORKDIR ${X\n", 1, "Dockerfile:2: WORKDIR: missing '}'");
}

Test(templates_dockerfile, dockerignore_match)
{
	cr_assert(sbx__ctx_match("*.log", "a.log"));
	cr_assert(!sbx__ctx_match("*.log", "dir/a.log"));
	cr_assert(sbx__ctx_match("**/*.log", "dir/sub/a.log"));
	cr_assert(sbx__ctx_match("**/*.log", "a.log"));
	cr_assert(sbx__ctx_match("build", "build/x/y"), "a directory pattern covers its contents");
	cr_assert(sbx__ctx_match("a/*/c", "a/b/c"));
	cr_assert(!sbx__ctx_match("a/*/c", "a/b/d/c"));
	cr_assert(sbx__ctx_match("node_modules", "node_modules"));
}
