/* SPDX-License-Identifier: MIT */
/*
 * sbx_image_pull() against a real registry on loopback: Debian's
 * docker-registry (distribution) serving a temp dir, images built here from
 * busybox-static as an OCI layout and pushed with skopeo. A second registry
 * over the same storage uses `auth: token`, with a token endpoint served by
 * this test (RS256 JWTs signed by a self-signed certificate made here:
 * registry_token.c; the OCI layout: registry_oci.c). Each test starts its
 * own registries on free ports and stops them in the fini.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "fixtures.h"
#include "images/pull.h"
#include "registry.h"

char *tmp;                           /* everything this test writes */
static sbx_runtime *rt;              /* private store under tmp */
static pid_t reg_pid = -1, auth_pid = -1;
static int reg_port, auth_port;
char *single_digest, *index_digest;
static char *v2s2_digest;

/* ---- small helpers ----------------------------------------------------------- */

char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, f);
	cr_assert(vasprintf(&s, f, ap) >= 0);
	va_end(ap);
	return s;
}

void sh(const char *f, ...)
{
	va_list ap;
	char *cmd = NULL;
	va_start(ap, f);
	cr_assert(vasprintf(&cmd, f, ap) >= 0);
	va_end(ap);
	int r = system(cmd);
	cr_assert_eq(r, 0, "command failed (%d): %s", r, cmd);
	free(cmd);
}

void write_str(const char *path, const char *data)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
	fputs(data, f);
	fclose(f);
}


static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static bool port_open(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* ---- registries --------------------------------------------------------------- */

static pid_t start_registry(const char *tag, int port, const char *auth)
{
	char *cfg = fmt("%s/%s.yml", tmp, tag), *log = fmt("%s/%s.log", tmp, tag);
	char *body = fmt("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n"
			 "storage:\n  filesystem:\n    rootdirectory: %s/storage\n"
			 "  delete:\n    enabled: true\n"
			 "http:\n  addr: 127.0.0.1:%d\n%s",
			 tmp, port, auth ? auth : "");
	write_str(cfg, body);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl("/usr/bin/docker-registry", "docker-registry", "serve", cfg, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300 && !port_open(port); i++) {
		int st;
		cr_assert_eq(waitpid(pid, &st, WNOHANG), 0, "docker-registry exited; see %s", log);
		usleep(50 * 1000);
	}
	cr_assert(port_open(port), "docker-registry did not listen on %d; see %s", port, log);
	free(cfg), free(log), free(body);
	return pid;
}

static void stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		*pid = -1;
	}
}


static void push(const char *src, const char *dest, const char *flags)
{
	sh("skopeo --insecure-policy copy -q %s --dest-tls-verify=false oci:'%s/oci':%s "
	   "docker://127.0.0.1:%d/%s >>'%s/skopeo.log' 2>&1",
	   flags, tmp, src, reg_port, dest, tmp);
}

static char *ref(int port, const char *path)
{
	return fmt("127.0.0.1:%d/%s", port, path);
}

static void setup(void)
{
	bool have = access("/usr/bin/docker-registry", X_OK) == 0 &&
		    access("/usr/bin/skopeo", X_OK) == 0 && access("/bin/busybox", X_OK) == 0;
	if (!have)
		sbx_test_skip("docker-registry, skopeo or busybox-static missing (scripts/deps.sh installs them)");
	sbx_test_require_root();
	unsetenv("SBX_REGISTRY_AUTH_FILE");
	unsetenv("SBX_REGISTRY_MIRROR");
	unsetenv("SBX_INSECURE_REGISTRIES");
	setenv("HOME", "/nonexistent", 1);
	const char *b = getenv("SBX_BUILD_ROOT");
	tmp = fmt("%s/test-registry.XXXXXX", b && *b ? b : "/tmp");
	cr_assert_not_null(mkdtemp(tmp));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	char *state = fmt("%s/state", tmp), *images = fmt("%s/images", tmp);
	o.state_dir = state;
	o.image_dir = images;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	free(state), free(images);
	build_images();
	reg_port = free_port();
	reg_pid = start_registry("open", reg_port, NULL);
	push("single", "test/busybox:1", "--preserve-digests");
	push("multi", "test/multi:1", "--all --preserve-digests");
	push("single", "test/busybox:v2s2", "--format v2s2");
	char *out = fmt("%s/v2s2.digest", tmp);
	sh("skopeo --insecure-policy inspect --tls-verify=false --format '{{.Digest}}' "
	   "docker://127.0.0.1:%d/test/busybox:v2s2 > '%s'", reg_port, out);
	FILE *f = fopen(out, "r");
	char line[128] = "";
	cr_assert(fgets(line, sizeof(line), f));
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	v2s2_digest = strdup(line);
	free(out);
}

/* A second registry over the same storage that wants tokens from our endpoint. */
static void start_auth_registry(void)
{
	char *cert = fmt("%s/token.crt", tmp);
	token_start(cert);
	char *auth = fmt("auth:\n  token:\n    realm: http://127.0.0.1:%d/token\n"
			 "    service: sbx-registry\n    issuer: sbx-test\n"
			 "    rootcertbundle: %s\n", tok_port, cert);
	auth_port = free_port();
	auth_pid = start_registry("token", auth_port, auth);
	free(auth);
	free(cert);
}

static void teardown(void)
{
	stop(&reg_pid);
	stop(&auth_pid);
	token_stop();
	if (rt)
		sbx_runtime_free(rt);
	rt = NULL;
	if (tmp && getenv("SBX_KEEP_TMP") == NULL) {
		char *cmd = fmt("rm -rf '%s'", tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmp);
		free(cmd);
	}
	free(tmp);
	free(single_digest), free(index_digest), free(v2s2_digest);
	tmp = single_digest = index_digest = v2s2_digest = NULL;
}

TestSuite(registry, .init = setup, .fini = teardown, .timeout = 300);

/* ---- tests -------------------------------------------------------------------- */

static sbx_image *pull_ok(const char *r, const char *name, struct sbx_pull_result *res)
{
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	int rc = sbx__image_pull(&img, res, rt, r, name, NULL, &err);
	cr_assert_eq(rc, 0, "pull %s: %s", r, err ? err->msg : "?");
	cr_assert_null(err);
	return img;
}

static int pull_fail(const char *r, char **msg)
{
	sbx_error *err = NULL;
	int rc = sbx_image_pull(NULL, rt, r, NULL, &err);
	cr_assert_lt(rc, 0, "pull %s succeeded", r);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, rc);
	cr_assert(strstr(err->msg, r) != NULL, "message does not name the ref: %s", err->msg);
	*msg = strdup(err->msg);
	sbx_error_free(err);
	return rc;
}

static bool layer_has(const sbx_image *img, const char *rel)
{
	for (size_t i = 0; i < img->n_layers; i++) {
		char *p = fmt("%s/%s", img->layer_paths[i], rel);
		bool ok = access(p, F_OK) == 0;
		free(p);
		if (ok)
			return true;
	}
	return false;
}

Test(registry, pull_by_tag)
{
	char *r = ref(reg_port, "test/busybox:1");
	struct sbx_pull_result res = { 0 };
	sbx_image *img = pull_ok(r, NULL, &res);
	cr_assert_str_eq(img->name, r);
	cr_assert_eq(img->n_layers, 2);
	cr_assert_eq(res.layers, 2);
	cr_assert_eq(res.layers_cached, 0);
	cr_assert_gt(res.bytes, 100000);
	cr_assert_str_eq(res.digest, single_digest);
	cr_assert_str_eq(res.manifest, single_digest);
	cr_assert(layer_has(img, "bin/busybox"));
	cr_assert(layer_has(img, "etc/pulled"));
	cr_assert_str_eq(img->config.workdir, "/root");
	cr_assert_str_eq(img->config.env[1], "FROM_REGISTRY=1");
	cr_assert_str_eq(img->config.cmd[0], "/bin/sh");
	char *pref = NULL, *pdig = NULL;
	cr_assert_eq(sbx__image_pull_info(&pref, &pdig, rt, r, NULL), 0);
	cr_assert_str_eq(pref, r);
	cr_assert_str_eq(pdig, single_digest);
	char *resolved = NULL;
	cr_assert_eq(sbx__image_resolve(&resolved, rt, r, NULL), 0);
	cr_assert_str_eq(resolved, single_digest);
	/* a re-import under the same name invalidates the pull record */
	char *l2 = fmt("%s/l2", tmp);
	cr_assert_eq(sbx_image_import(NULL, rt, r, l2, NULL), 0);
	free(l2);
	cr_assert_eq(sbx__image_pull_info(NULL, NULL, rt, r, NULL), -ENOENT);
	free(resolved), free(pref), free(pdig), free(r);
	sbx__pull_result_clear(&res);
	sbx_image_free(img);
}

Test(registry, pull_by_digest_and_docker_v2)
{
	char *r = fmt("127.0.0.1:%d/test/busybox@%s", reg_port, single_digest);
	struct sbx_pull_result res = { 0 };
	sbx_image *img = pull_ok(r, "by-digest", &res);
	cr_assert_str_eq(img->name, "by-digest");
	cr_assert_eq(img->n_layers, 2);
	cr_assert_str_eq(res.digest, single_digest);
	sbx__pull_result_clear(&res);
	/* the same image as a Docker v2 schema 2 manifest: same layers, all cached */
	char *r2 = ref(reg_port, "test/busybox:v2s2");
	sbx_image *img2 = pull_ok(r2, "v2s2", &res);
	cr_assert_str_eq(res.digest, v2s2_digest);
	cr_assert_neq(strcmp(res.digest, single_digest), 0);
	cr_assert_eq(res.layers_cached, 2);
	cr_assert_str_eq(img2->layers[0], img->layers[0]);
	cr_assert_str_eq(img2->layers[1], img->layers[1]);
	sbx__pull_result_clear(&res);
	/* a digest the registry does not have */
	char *missing = fmt("127.0.0.1:%d/test/busybox@sha256:%064d", reg_port, 0);
	char *msg = NULL;
	cr_assert_eq(pull_fail(missing, &msg), -ENOENT, "%s", msg);
	free(msg), free(missing), free(r), free(r2);
	sbx_image_free(img);
	sbx_image_free(img2);
}

Test(registry, index_picks_linux_amd64)
{
	char *r = ref(reg_port, "test/multi:1");
	struct sbx_pull_result res = { 0 };
	sbx_image *img = pull_ok(r, "multi", &res);
	cr_assert_str_eq(res.digest, index_digest);
	cr_assert_str_eq(res.manifest, single_digest);
	cr_assert_eq(img->n_layers, 2);
	cr_assert(layer_has(img, "etc/pulled"));
	cr_assert_not(layer_has(img, "etc/arch"), "the arm64 image was pulled");
	/* by the index digest too */
	char *r2 = fmt("127.0.0.1:%d/test/multi@%s", reg_port, index_digest);
	sbx__pull_result_clear(&res);
	sbx_image_free(pull_ok(r2, "multi2", &res));
	cr_assert_str_eq(res.manifest, single_digest);
	sbx__pull_result_clear(&res);
	free(r), free(r2);
	sbx_image_free(img);
}

Test(registry, second_pull_downloads_nothing)
{
	char *r = ref(reg_port, "test/busybox:1");
	struct sbx_pull_result res = { 0 };
	sbx_image_free(pull_ok(r, "first", &res));
	cr_assert_eq(res.layers_cached, 0);
	sbx__pull_result_clear(&res);
	sbx_image *img = pull_ok(r, "second", &res);
	cr_assert_eq(res.layers, 2);
	cr_assert_eq(res.layers_cached, 2);
	cr_assert_eq(res.bytes, 0);
	cr_assert_eq(img->n_layers, 2);
	sbx__pull_result_clear(&res);
	sbx_image_free(img);
	free(r);
}

Test(registry, unknown_tag_and_repository)
{
	char *msg = NULL;
	char *r = ref(reg_port, "test/busybox:nope");
	cr_assert_eq(pull_fail(r, &msg), -ENOENT, "%s", msg);
	cr_assert(strstr(msg, "MANIFEST_UNKNOWN") || strstr(msg, "not found"), "%s", msg);
	free(msg), free(r);
	r = ref(reg_port, "no/such-repo:1");
	cr_assert_eq(pull_fail(r, &msg), -ENOENT, "%s", msg);
	free(msg), free(r);
	/* nothing was committed */
	cr_assert_eq(sbx_image_get(NULL, rt, "no/such-repo:1", NULL), -ENOENT);
}

Test(registry, connection_refused_has_hint)
{
	char *msg = NULL;
	char *r = ref(free_port(), "test/busybox:1");
	cr_assert_eq(pull_fail(r, &msg), -ECONNREFUSED, "%s", msg);
	cr_assert(strstr(msg, "sbx image import"), "%s", msg);
	cr_assert(strstr(msg, "sbx image bootstrap"), "%s", msg);
	free(msg), free(r);
	cr_assert_eq(sbx_image_pull(NULL, rt, "Not/Valid", NULL, NULL), -EINVAL);
}

Test(registry, bearer_token_auth)
{
	start_auth_registry();
	char *r = ref(auth_port, "test/busybox:1");
	char *msg = NULL;
	/* anonymous: a token without access, then 401 */
	cr_assert_eq(pull_fail(r, &msg), -EACCES, "%s", msg);
	cr_assert(strstr(msg, "credentials"), "%s", msg);
	free(msg);
	/* the right password */
	char *file = fmt("%s/auth.json", tmp);
	char *cfg = fmt("{\"auths\":{\"127.0.0.1:%d\":{\"auth\":\"YWxpY2U6Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5\"}}}",
			auth_port);
	write_str(file, cfg);
	setenv("SBX_REGISTRY_AUTH_FILE", file, 1);
	struct sbx_pull_result res = { 0 };
	sbx_image *img = pull_ok(r, "authed", &res);
	cr_assert_eq(img->n_layers, 2);
	cr_assert_eq(res.layers_cached, 0);
	cr_assert_geq(__atomic_load_n(&tok_granted, __ATOMIC_SEQ_CST), 1);
	sbx__pull_result_clear(&res);
	sbx_image_free(img);
	/* a wrong password: the token endpoint refuses, and the secret stays out of the message */
	free(cfg);
	cfg = fmt("{\"auths\":{\"http://127.0.0.1:%d\":{\"username\":\"alice\","
		  "\"password\":\"wrong-password-123\"}}}", auth_port);
	write_str(file, cfg);
	cr_assert_eq(pull_fail(r, &msg), -EACCES, "%s", msg);
	cr_assert_geq(__atomic_load_n(&tok_refused, __ATOMIC_SEQ_CST), 1);
	cr_assert_null(strstr(msg, "wrong-password"), "%s", msg);
	cr_assert_null(strstr(msg, PASS), "%s", msg);
	free(msg);
	unsetenv("SBX_REGISTRY_AUTH_FILE");
	free(cfg), free(file), free(r);
}

Test(registry, sandbox_from_pulled_image)
{
	char *r = ref(reg_port, "test/multi:1");
	sbx_image_free(pull_ok(r, "pulled-busybox", NULL));
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "pulled-busybox";
	sbx_sandbox *sb = sbx_test_sandbox(rt, &o);
	int code = -1;
	char *out = sbx_test_sh(sb, "busybox true && cat /etc/pulled && echo $FROM_REGISTRY", &code);
	cr_assert_eq(code, 0, "exit %d: %s", code, out);
	cr_assert_str_eq(out, "hello from the registry\n1\n");
	free(out);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_destroy(sb, &err), 0, "destroy: %s", err ? err->msg : "?");
	sbx_sandbox_free(sb);
	free(r);
}

Test(registry, cli_pull_summary_and_json)
{
	const char *b = getenv("SBX_BUILD_ROOT");
	cr_assert_not_null(b);
	char *out = fmt("%s/cli.out", tmp);
	sh("SBX_STATE_DIR='%s/state' SBX_IMAGE_DIR='%s/images' '%s/src/cli/sbx' image pull "
	   "127.0.0.1:%d/test/busybox:1 cli-img > '%s' 2>&1", tmp, tmp, b, reg_port, out);
	char line[512] = "";
	FILE *f = fopen(out, "r");
	cr_assert(fgets(line, sizeof(line), f));
	fclose(f);
	char *want = fmt("pulled 127.0.0.1:%d/test/busybox:1 as cli-img: 2 layers (0 cached), ",
			 reg_port);
	cr_assert(strncmp(line, want, strlen(want)) == 0, "%s", line);
	cr_assert(strstr(line, "sha256:") != NULL, "%s", line);
	sh("SBX_STATE_DIR='%s/state' SBX_IMAGE_DIR='%s/images' '%s/src/cli/sbx' image pull --json "
	   "127.0.0.1:%d/test/busybox:1 cli-img > '%s'", tmp, tmp, b, reg_port, out);
	json_error_t je;
	json_t *j = json_load_file(out, 0, &je);
	cr_assert_not_null(j, "%s", je.text);
	cr_assert_str_eq(json_string_value(json_object_get(j, "digest")), single_digest);
	cr_assert_eq(json_integer_value(json_object_get(j, "layers_cached")), 2);
	cr_assert_str_eq(json_string_value(json_object_get(j, "name")), "cli-img");
	json_decref(j);
	free(want), free(out);
}
