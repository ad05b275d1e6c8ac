/* SPDX-License-Identifier: MIT */
/*
 * Escape battery: template builds reading host files through their build
 * context. A context (or a `sbx serve` template-build tarball) holds
 * symlinks and hardlinks to a root-only file and a root-only directory of
 * the host; whatever the build does with them, the image it produces must
 * not contain the host's bytes. Symlinks that stay inside the context keep
 * working (Docker semantics).
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../integration/common.h"
#include "tar_writer.h"

TestSuite(build_context, .init = setup, .fini = teardown);

static char host[64];      /* root-only host dir holding the secrets */
static char secret[96];    /* bytes that must never reach an image */
static char ctx[64];

static void rm_rf(const char *p)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void write_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert_geq(fd, 0, "create %s", path);
	cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
	chmod(path, mode);
}

static char *at(const char *dir, const char *name)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

/* /root/sbx-sec-XXXXXX (0700): secret (0600), tree/secret, secret.tar. */
static void make_host_secrets(void)
{
	snprintf(host, sizeof(host), "/root/sbx-sec-ctx-XXXXXX");
	if (!mkdtemp(host)) {
		snprintf(host, sizeof(host), "/tmp/sbx-sec-ctx-XXXXXX");
		cr_assert_not_null(mkdtemp(host));
	}
	chmod(host, 0700);
	snprintf(secret, sizeof(secret), "host-secret-%d-%ld-%ld", (int)getpid(), (long)time(NULL), random());
	char *f = at(host, "secret"), *t = at(host, "tree"), *tf = at(host, "tree/secret");
	write_file(f, secret, 0600);
	cr_assert_eq(mkdir(t, 0700), 0);
	write_file(tf, secret, 0600);
	char *tar = at(host, "secret.tar");
	struct tar_ent ents[] = { { .name = "leaked", .type = '0', .mode = 0644, .data = secret }, { 0 } };
	tar_write(tar, ents);
	free(f), free(t), free(tf), free(tar);
}

/* A fresh context with a unique Dockerfile (so no layer comes from cache). */
static void make_ctx(const char *body)
{
	snprintf(ctx, sizeof(ctx), "/tmp/sbx-sec-bctx-XXXXXX");
	cr_assert_not_null(mkdtemp(ctx));
	char *df = at(ctx, "Dockerfile"), *text = NULL;
	cr_assert_geq(asprintf(&text, "FROM busybox\nENV NONCE=%d-%ld\n%s", (int)getpid(), random(), body), 0);
	write_file(df, text, 0644);
	free(df), free(text);
}

static void link_in_ctx(const char *name, const char *target)
{
	char *p = at(ctx, name);
	cr_assert_eq(symlink(target, p), 0, "symlink %s", p);
	free(p);
}

static void cleanup(void)
{
	if (*ctx)
		rm_rf(ctx);
	if (*host)
		rm_rf(host);
	*ctx = *host = '\0';
}

/* ---- does an image hold the secret? ---------------------------------------- */

static int found;

static int scan_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)flag, (void)f;
	if (!S_ISREG(st->st_mode) || st->st_size > (4 << 20))
		return 0;
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	static char buf[4 << 20];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n > 0 && memmem(buf, (size_t)n, secret, strlen(secret))) {
		cr_log_error("host secret found in layer file %s", p);
		found = 1;
	}
	return 0;
}

/* True when any layer of IMAGE (that busybox does not have) holds the secret. */
static bool image_leaks(const char *image)
{
	sbx_image *img = NULL, *base = NULL;
	if (sbx_image_get(&img, rt, image, NULL) < 0)
		return false;
	cr_assert_eq(sbx_image_get(&base, rt, "busybox", NULL), 0);
	found = 0;
	for (size_t i = base->n_layers; i < img->n_layers; i++)
		nftw(img->layer_paths[i], scan_cb, 16, FTW_PHYS);
	sbx_image_free(img);
	sbx_image_free(base);
	return found;
}

/* Builds the context; returns the result code and the alias (owned) on success. */
static int build(char **alias, sbx_error **err)
{
	sbx_build_opts o = SBX_BUILD_OPTS_INIT;
	o.context_dir = ctx;
	o.slug = "sec-ctx";
	sbx_build_result res = { 0 };
	int r = sbx_template_build(&res, rt, &o, err);
	*alias = r == 0 ? strdup(res.alias) : NULL;
	sbx_build_result_free(&res);
	return r;
}

static void expect_no_leak(const char *what)
{
	char *alias = NULL;
	sbx_error *err = NULL;
	int r = build(&alias, &err);
	cr_log_info("%s: build %s%s", what, r == 0 ? "succeeded" : "failed: ", r == 0 ? "" : err->msg);
	if (r == 0)
		cr_expect(!image_leaks(alias), "%s: the image holds a host file's bytes", what);
	cr_expect(!err || !strstr(err->msg, secret), "%s: the error quotes the secret", what);
	free(alias);
	sbx_error_free(err);
}

Test(build_context, copy_symlink_to_host_file)
{
	make_host_secrets();
	char *f = at(host, "secret");
	make_ctx("COPY secret /x\n");
	link_in_ctx("secret", f);
	expect_no_leak("COPY of a symlink to a host file");
	free(f);
	cleanup();
}

Test(build_context, copy_symlink_to_host_dir)
{
	make_host_secrets();
	make_ctx("COPY hostdir /y/\n");
	link_in_ctx("hostdir", host);
	expect_no_leak("COPY of a symlink to a host directory");
	cleanup();
}

Test(build_context, copy_through_symlinked_dir)
{
	make_host_secrets();
	make_ctx("COPY hostdir/secret /z\nCOPY hostdir/tree/ /t/\n");
	link_in_ctx("hostdir", host);
	expect_no_leak("COPY through a symlinked directory");
	cleanup();
}

Test(build_context, copy_glob_through_symlink)
{
	make_host_secrets();
	make_ctx("COPY hostdir/* /g/\n");
	link_in_ctx("hostdir", host);
	expect_no_leak("COPY of a wildcard under a symlinked directory");
	cleanup();
}

Test(build_context, add_symlinked_archive)
{
	make_host_secrets();
	char *tar = at(host, "secret.tar");
	make_ctx("ADD arch.tar /a/\n");
	link_in_ctx("arch.tar", tar);
	expect_no_leak("ADD of a symlink to a host archive");
	free(tar);
	cleanup();
}

Test(build_context, dockerignore_and_dockerfile_symlinks_stay_inside)
{
	make_host_secrets();
	char *f = at(host, "secret");
	make_ctx("COPY . /all/\n");
	link_in_ctx(".dockerignore", f);
	expect_no_leak("a .dockerignore symlinked to a host file");
	free(f);
	cleanup();
}

static void fifo_in_ctx(const char *name)
{
	char *p = at(ctx, name);
	cr_assert_eq(mkfifo(p, 0644), 0, "mkfifo %s", p);
	free(p);
}

/* A build that blocked on a FIFO would hang its caller (a `sbx serve`
 * build thread, a task run) for ever; the alarm turns that into a failure. */
Test(build_context, fifos_in_the_context_do_not_block)
{
	alarm(120);
	const char *cases[][2] = {
		{ ".dockerignore", "COPY . /all/\n" },
		{ "fifo", "ADD fifo /x\n" },
		{ "fifo", "COPY fifo /x\n" },
		{ "Dockerfile", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		make_ctx(cases[i][1] ? cases[i][1] : "");
		if (!cases[i][1]) {
			char *df = at(ctx, "Dockerfile");
			unlink(df);
			free(df);
		}
		fifo_in_ctx(cases[i][0]);
		char *alias = NULL;
		sbx_error *err = NULL;
		int r = build(&alias, &err);
		cr_log_info("FIFO %s: build %s%s", cases[i][0], r == 0 ? "succeeded" : "failed: ",
			    r == 0 ? "" : err->msg);
		free(alias);
		sbx_error_free(err);
		cleanup();
	}
	alarm(0);
}

/* What stays inside the context still works: a symlink copied with its
 * directory stays a symlink; a symlink named as the source is followed
 * within the context, an absolute one as if the context were /. */
Test(build_context, symlinks_inside_the_context_work)
{
	make_host_secrets();
	make_ctx("COPY . /all/\nCOPY link /l\nCOPY abs /m\nCOPY dirlink/ /d/\n");
	char *real = at(ctx, "real.txt"), *sub = at(ctx, "sub"), *subf = at(ctx, "sub/f");
	write_file(real, "inside\n", 0644);
	cr_assert_eq(mkdir(sub, 0755), 0);
	write_file(subf, "sub\n", 0644);
	char *f = at(host, "secret");
	link_in_ctx("hostlink", f);
	link_in_ctx("link", "real.txt");
	link_in_ctx("abs", "/real.txt");
	link_in_ctx("dirlink", "sub");
	char *alias = NULL;
	sbx_error *err = NULL;
	int r = build(&alias, &err);
	cr_assert_eq(r, 0, "build: %s", err ? err->msg : "?");
	cr_expect(!image_leaks(alias));
	sbx_sandbox_opts so = SBX_SANDBOX_OPTS_INIT;
	so.image = alias;
	sbx_sandbox *sb = sbx_test_sandbox(rt, &so);
	int code = -1;
	char *out = sbx_test_sh(sb, "cat /l /m /d/f; readlink /all/hostlink; readlink /all/link; test -L /all/hostlink", &code);
	char *want = NULL;
	cr_assert_geq(asprintf(&want, "inside\ninside\nsub\n%s\nreal.txt\n", f), 0);
	cr_expect_eq(code, 0, "%s", out);
	cr_expect_str_eq(out, want);
	free(out), free(want);
	destroy(sb);
	free(alias), free(real), free(sub), free(subf), free(f);
	cleanup();
}

/* ---- `sbx serve`: the template-build tarball -------------------------------- */

struct srv {
	pid_t pid;
	char base[64], key[128], state[512];
};

static void srv_start(struct srv *s)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	snprintf(s->state, sizeof(s->state), "%s/test-state/secctx%d", b, (int)getpid());
	char bin[512], images[512];
	snprintf(bin, sizeof(bin), "%s/src/cli/sbx", b);
	snprintf(images, sizeof(images), "%s/test-images", b);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	s->pid = fork();
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], 1);
		close(p[0]);
		execl(bin, "sbx", "serve", "--listen", "127.0.0.1:0", "--print-port", "--state-dir", s->state,
		      "--image-dir", images, "--no-access-log", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	char line[512];
	long port = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!port)
			port = strtol(line, NULL, 10);
		if (strstr(line, "ready url="))
			break;
	}
	fclose(f);
	cr_assert_gt(port, 0, "server did not print its port");
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%ld", port);
	char kp[600];
	snprintf(kp, sizeof(kp), "%s/server/api-key", s->state);
	FILE *k = fopen(kp, "r");
	cr_assert_not_null(k);
	cr_assert_not_null(fgets(s->key, sizeof(s->key), k));
	s->key[strcspn(s->key, "\n")] = '\0';
	fclose(k);
}

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
	char **body = u;
	size_t have = *body ? strlen(*body) : 0;
	*body = realloc(*body, have + sz * n + 1); /* checksrc: allow (test) */
	memcpy(*body + have, p, sz * n);
	(*body)[have + sz * n] = '\0';
	return sz * n;
}

static long http(const struct srv *s, const char *method, const char *path, const void *body, size_t len,
		 json_t **out)
{
	CURL *c = curl_easy_init();
	char url[1024], kh[200];
	snprintf(url, sizeof(url), "%s%s", s->base, path);
	snprintf(kh, sizeof(kh), "X-API-KEY: %s", s->key);
	struct curl_slist *h = curl_slist_append(NULL, kh);
	h = curl_slist_append(h, "Expect:");
	char *resp = NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
	curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out)
		*out = resp ? json_loads(resp, 0, NULL) : NULL;
	free(resp);
	return status;
}

/* Uploads TAR as the files of one COPY step (SRC DST) and builds it through
 * the E2B build API; returns the template name once the build settled. */
static char *serve_build(const struct srv *s, const char *tar, const char *src, const char *dst,
			 char *status, size_t slen)
{
	static int n;
	char name[64], path[256], hash[65];
	snprintf(name, sizeof(name), "sec-srv-%d-%d", (int)getpid(), n++);
	snprintf(hash, sizeof(hash), "%08x%08lx", (unsigned)getpid(), (unsigned long)random());
	FILE *f = fopen(tar, "r");
	cr_assert_not_null(f);
	static char data[1 << 20];
	size_t len = fread(data, 1, sizeof(data), f);
	fclose(f);
	snprintf(path, sizeof(path), "/templates/%s/files/%s", name, hash);
	cr_assert_eq(http(s, "PUT", path, data, len, NULL), 200);
	char req[256];
	snprintf(req, sizeof(req), "{\"name\":\"%s\"}", name);
	json_t *j = NULL;
	cr_assert_eq(http(s, "POST", "/v3/templates", req, strlen(req), &j), 202);
	char *bid = strdup(json_string_value(json_object_get(j, "buildID")));
	json_decref(j);
	char spec[1024];
	snprintf(spec, sizeof(spec),
		 "{\"fromImage\":\"busybox\",\"steps\":[{\"type\":\"ENV\",\"args\":[\"N\",\"%d-%ld\"]},"
		 "{\"type\":\"COPY\",\"args\":[\"%s\",\"%s\"],\"filesHash\":\"%s\"}]}",
		 (int)getpid(), random(), src, dst, hash);
	snprintf(path, sizeof(path), "/v2/templates/%s/builds/%s", name, bid);
	cr_assert_eq(http(s, "POST", path, spec, strlen(spec), NULL), 202);
	snprintf(path, sizeof(path), "/templates/%s/builds/%s/status", name, bid);
	snprintf(status, slen, "?");
	for (int i = 0; i < 600; i++) {
		json_t *st = NULL;
		http(s, "GET", path, NULL, 0, &st);
		const char *v = json_string_value(json_object_get(st, "status"));
		const char *why = json_string_value(json_object_get(json_object_get(st, "reason"), "message"));
		snprintf(status, slen, "%s%s%s", v ? v : "?", why ? ": " : "", why ? why : "");
		bool done = v && (strcmp(v, "ready") == 0 || strcmp(v, "error") == 0);
		json_decref(st);
		if (done)
			break;
		usleep(100000);
	}
	free(bid);
	return strdup(name);
}

Test(build_context, serve_tarball_symlinks_and_hardlinks)
{
	make_host_secrets();
	curl_global_init(CURL_GLOBAL_ALL);
	struct srv s = { 0 };
	srv_start(&s);
	char *f = at(host, "secret");
	char tar[128];
	snprintf(tar, sizeof(tar), "%s.tar", host);
	struct {
		const char *what, *src, *dst;
		struct tar_ent ents[3];
		bool ok; /* a well-behaved archive: the build must succeed */
	} cases[] = {
		{ "tar hardlink to a file in the archive", "b", "/b",
		  { { .name = "a", .type = '0', .mode = 0755, .data = "inside\n" },
		    { .name = "b", .type = '1', .mode = 0755, .link = "a" },
		    { 0 } }, true },
		{ "tar symlink to a host file", "secret", "/x",
		  { { .name = "secret", .type = '2', .mode = 0777, .link = f }, { 0 } } },
		{ "tar symlink to a host directory", "hostdir", "/y/",
		  { { .name = "hostdir", .type = '2', .mode = 0777, .link = host }, { 0 } } },
		{ "tar device node", "mem", "/mem",
		  { { .name = "mem", .type = '3', .mode = 0666, .major = 1, .minor = 1 }, { 0 } } },
		{ "tar hardlink through a symlinked directory", "h", "/h",
		  { { .name = "hostdir", .type = '2', .mode = 0777, .link = host },
		    { .name = "h", .type = '1', .mode = 0644, .link = "hostdir/secret" },
		    { 0 } } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tar_write(tar, cases[i].ents);
		char status[512];
		char *name = serve_build(&s, tar, cases[i].src, cases[i].dst, status, sizeof(status));
		cr_log_info("%s: build %s", cases[i].what, status);
		if (cases[i].ok)
			cr_expect_str_eq(status, "ready", "%s", cases[i].what);
		if (cases[i].ents[0].type == '3')
			cr_expect(strncmp(status, "error", 5) == 0, "%s: the server extracted it", cases[i].what);
		cr_expect(!image_leaks(name), "%s: the image holds a host file's bytes", cases[i].what);
		cr_expect(!strstr(status, secret), "%s: the build log quotes the secret", cases[i].what);
		sbx_image_remove(rt, name, NULL);
		free(name);
	}
	kill(s.pid, SIGTERM);
	waitpid(s.pid, NULL, 0);
	unlink(tar);
	free(f);
	rm_rf(s.state);
	cleanup();
}
