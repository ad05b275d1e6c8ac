/* SPDX-License-Identifier: MIT */
/*
 * sbx_image_pull() against a real registry on loopback: Debian's
 * docker-registry (distribution) serving a temp dir, images built here from
 * busybox-static as an OCI layout and pushed with skopeo. A second registry
 * over the same storage uses `auth: token`, with a token endpoint served by
 * this test (RS256 JWTs signed by a self-signed certificate made here). Each
 * test starts its own registries on free ports and stops them in the fini.
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

#define USER "alice"
#define PASS "correct-horse-battery"
#define MT_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_LAYER "application/vnd.oci.image.layer.v1.tar+gzip"

static char *tmp;                    /* everything this test writes */
static sbx_runtime *rt;              /* private store under tmp */
static pid_t reg_pid = -1, auth_pid = -1;
static int reg_port, auth_port;
static char *single_digest, *index_digest, *v2s2_digest;

/* ---- small helpers ----------------------------------------------------------- */

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, f);
	cr_assert(vasprintf(&s, f, ap) >= 0);
	va_end(ap);
	return s;
}

static void sh(const char *f, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *f, ...)
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

static void write_str(const char *path, const char *data)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
	fputs(data, f);
	fclose(f);
}

static char *hex_digest(const unsigned char *md, unsigned n)
{
	char *s = malloc(8 + 2 * n);
	snprintf(s, 8, "sha256:");
	for (unsigned i = 0; i < n; i++)
		snprintf(s + 7 + 2 * i, 3, "%02x", md[i]);
	return s;
}

static char *sha256_file(const char *path, long *size)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "open %s", path);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	char buf[65536];
	size_t n;
	long total = 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		EVP_DigestUpdate(c, buf, n);
		total += (long)n;
	}
	fclose(f);
	unsigned char md[32];
	unsigned len = 0;
	EVP_DigestFinal_ex(c, md, &len);
	EVP_MD_CTX_free(c);
	if (size)
		*size = total;
	return hex_digest(md, len);
}

/* Moves FILE into the OCI layout's blobs; returns its digest and size. */
static char *add_blob(const char *file, long *size)
{
	char *d = sha256_file(file, size);
	sh("mv '%s' '%s/oci/blobs/sha256/%s'", file, tmp, d + 7);
	return d;
}

static void write_at(const char *rel, const char *data)
{
	char *p = fmt("%s/%s", tmp, rel);
	write_str(p, data);
	free(p);
}

static char *add_blob_json(json_t *j, long *size)
{
	char *data = json_dumps(j, JSON_COMPACT);
	char *p = fmt("%s/blob.json", tmp);
	write_str(p, data);
	char *d = add_blob(p, size);
	free(p);
	free(data);
	json_decref(j);
	return d;
}

/* A layer from directory REL: tar (digest = diffID), then gzip -n (the blob). */
static char *add_layer(const char *rel, char **diff_out, long *size)
{
	char *tar = fmt("%s/layer.tar", tmp);
	sh("tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C '%s/%s' -cf '%s' .",
	   tmp, rel, tar);
	*diff_out = sha256_file(tar, NULL);
	sh("gzip -n -f '%s'", tar);
	char *gz = fmt("%s.gz", tar);
	char *d = add_blob(gz, size);
	free(gz);
	free(tar);
	return d;
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

/* ---- the token endpoint ------------------------------------------------------ */

static EVP_PKEY *tok_key;
static char *tok_x5c;
static int tok_fd = -1, tok_port;
static pthread_t tok_thread;
static int tok_granted, tok_refused;

static char *b64url(const unsigned char *d, size_t n)
{
	char *s = malloc(4 * ((n + 2) / 3) + 1);
	int len = EVP_EncodeBlock((unsigned char *)s, d, (int)n);
	while (len > 0 && s[len - 1] == '=')
		len--;
	s[len] = '\0';
	for (char *p = s; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	return s;
}

/* An RS256 JWT the registry accepts: x5c names our certificate. */
static char *make_token(const char *sub, const char *repo)
{
	json_t *hdr = json_pack("{s:s, s:s, s:[s]}", "typ", "JWT", "alg", "RS256", "x5c", tok_x5c);
	json_t *access = json_array();
	if (repo)
		json_array_append_new(access, json_pack("{s:s, s:s, s:[s]}", "type", "repository",
							"name", repo, "actions", "pull"));
	long now = (long)time(NULL);
	unsigned char rnd[8];
	RAND_bytes(rnd, sizeof(rnd));
	char *jti = b64url(rnd, sizeof(rnd));
	json_t *claims = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:o}", "iss", "sbx-test",
				   "sub", sub, "aud", "sbx-registry", "exp", (json_int_t)now + 600,
				   "nbf", (json_int_t)now - 60, "iat", (json_int_t)now, "jti", jti,
				   "access", access);
	char *h = json_dumps(hdr, JSON_COMPACT), *c = json_dumps(claims, JSON_COMPACT);
	char *h64 = b64url((unsigned char *)h, strlen(h)), *c64 = b64url((unsigned char *)c, strlen(c));
	char *input = fmt("%s.%s", h64, c64);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t siglen = 0;
	EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, tok_key);
	EVP_DigestSign(md, NULL, &siglen, (unsigned char *)input, strlen(input));
	unsigned char *sig = malloc(siglen);
	EVP_DigestSign(md, sig, &siglen, (unsigned char *)input, strlen(input));
	char *s64 = b64url(sig, siglen);
	char *tok = fmt("%s.%s", input, s64);
	EVP_MD_CTX_free(md);
	free(sig), free(s64), free(input), free(h64), free(c64), free(h), free(c), free(jti);
	json_decref(hdr);
	json_decref(claims);
	return tok;
}

static void url_decode(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (*s == '%' && s[1] && s[2]) {
			char hex[3] = { s[1], s[2], 0 };
			*o++ = (char)strtol(hex, NULL, 16);
			s += 2;
		} else {
			*o++ = *s == '+' ? ' ' : *s;
		}
	}
	*o = '\0';
}

/* GET /token?scope=repository:NAME:pull&service=...; Basic USER:PASS or anonymous. */
static void token_request(int c)
{
	char req[16384] = "";
	size_t n = 0;
	while (n < sizeof(req) - 1 && !strstr(req, "\r\n\r\n")) {
		ssize_t r = read(c, req + n, sizeof(req) - 1 - n);
		if (r <= 0)
			return;
		n += (size_t)r;
		req[n] = '\0';
	}
	char repo[256] = "";
	char *scope = strstr(req, "scope=");
	if (scope) {
		scope += 6;
		size_t len = strcspn(scope, "& ");
		char buf[512];
		snprintf(buf, sizeof(buf), "%.*s", (int)len, scope);
		url_decode(buf);
		char *a = strchr(buf, ':'), *b = strrchr(buf, ':');
		if (a && b > a)
			snprintf(repo, sizeof(repo), "%.*s", (int)(b - a - 1), a + 1);
	}
	const char *who = "anonymous";
	bool ok = true;
	char *auth = strcasestr(req, "\r\nAuthorization: Basic ");
	if (auth) {
		auth += 23;
		char b64[512];
		snprintf(b64, sizeof(b64), "%.*s", (int)strcspn(auth, "\r\n"), auth);
		unsigned char plain[512];
		int len = EVP_DecodeBlock(plain, (unsigned char *)b64, (int)strlen(b64));
		while (len > 0 && plain[len - 1] == '\0')
			len--;
		ok = len >= 0 && (size_t)len == strlen(USER ":" PASS) &&
		     memcmp(plain, USER ":" PASS, (size_t)len) == 0;
		who = USER;
	}
	char *resp;
	if (!ok) {
		__atomic_add_fetch(&tok_refused, 1, __ATOMIC_SEQ_CST);
		const char *body = "{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"bad password\"}]}";
		resp = fmt("HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
			   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
	} else {
		/* anonymous callers get a token without access */
		char *tok = make_token(who, auth && *repo ? repo : NULL);
		if (auth)
			__atomic_add_fetch(&tok_granted, 1, __ATOMIC_SEQ_CST);
		char *body = fmt("{\"token\":\"%s\",\"expires_in\":600}", tok);
		resp = fmt("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
		free(body);
		free(tok);
	}
	size_t off = 0, len = strlen(resp);
	while (off < len) {
		ssize_t w = write(c, resp + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	free(resp);
}

static void *token_main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept4(tok_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		token_request(c);
		close(c);
	}
}

/* A key and self-signed certificate; the registry trusts the certificate. */
static void token_start(const char *cert_path)
{
	tok_key = EVP_RSA_gen(2048);
	cr_assert_not_null(tok_key);
	X509 *x = X509_new();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, tok_key);
	X509_NAME *nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)"sbx-test-token",
				   -1, -1, 0);
	X509_set_issuer_name(x, nm);
	cr_assert(X509_sign(x, tok_key, EVP_sha256()) > 0);
	FILE *f = fopen(cert_path, "w");
	PEM_write_X509(f, x);
	fclose(f);
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	tok_x5c = malloc(4 * ((size_t)(n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)tok_x5c, der, n);
	OPENSSL_free(der);
	X509_free(x);

	tok_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	cr_assert(bind(tok_fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cr_assert(listen(tok_fd, 16) == 0);
	cr_assert(getsockname(tok_fd, (struct sockaddr *)&a, &len) == 0);
	tok_port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&tok_thread, NULL, token_main, NULL), 0);
}

static void token_stop(void)
{
	if (tok_fd < 0)
		return;
	shutdown(tok_fd, SHUT_RDWR);
	close(tok_fd);
	tok_fd = -1;
	pthread_join(tok_thread, NULL);
	EVP_PKEY_free(tok_key);
	free(tok_x5c);
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

/* Builds the OCI layout: "single" (amd64, 2 layers) and "multi" (arm64 + amd64 index). */
static void build_images(void)
{
	sh("mkdir -p '%s/oci/blobs/sha256' '%s/l1' '%s/l2/etc' '%s/l3/etc'", tmp, tmp, tmp, tmp);
	write_at("oci/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
	const char *dirs = "bin sbin usr/bin etc tmp root proc dev sys var/tmp home/user work";
	sh("cd '%s/l1' && mkdir -p %s && chmod 1777 tmp && cp /bin/busybox bin/busybox && "
	   "for a in sh true cat echo ls id; do ln -s busybox bin/$a; done && "
	   "printf 'root:x:0:0:root:/root:/bin/sh\\n' > etc/passwd && "
	   "printf 'root:x:0:\\n' > etc/group", tmp, dirs);
	write_at("l2/etc/pulled", "hello from the registry\n");
	write_at("l3/etc/arch", "arm64\n");
	char *diff1, *diff2, *diff3;
	long s1, s2, s3, sc, sm, sa, sx;
	char *l1 = add_layer("l1", &diff1, &s1);
	char *l2 = add_layer("l2", &diff2, &s2);
	char *l3 = add_layer("l3", &diff3, &s3);
	char *cfg = add_blob_json(json_pack("{s:s, s:s, s:{s:[s,s], s:s, s:[s]}, s:{s:s, s:[s,s]}}",
					    "architecture", "amd64", "os", "linux", "config", "Env",
					    "PATH=/bin:/usr/bin", "FROM_REGISTRY=1", "WorkingDir",
					    "/root", "Cmd", "/bin/sh", "rootfs", "type", "layers",
					    "diff_ids", diff1, diff2),
				  &sc);
	char *man = add_blob_json(
		json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}, {s:s, s:s, s:I}]}",
			  "schemaVersion", 2, "mediaType", MT_MANIFEST, "config", "mediaType",
			  MT_CONFIG, "digest", cfg, "size", (json_int_t)sc, "layers", "mediaType",
			  MT_LAYER, "digest", l1, "size", (json_int_t)s1, "mediaType", MT_LAYER,
			  "digest", l2, "size", (json_int_t)s2),
		&sm);
	char *cfg_arm = add_blob_json(json_pack("{s:s, s:s, s:s, s:{}, s:{s:s, s:[s]}}",
						"architecture", "arm64", "variant", "v8", "os", "linux",
						"config", "rootfs", "type", "layers", "diff_ids", diff3),
				      &sx);
	char *man_arm = add_blob_json(
		json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}]}", "schemaVersion", 2,
			  "mediaType", MT_MANIFEST, "config", "mediaType", MT_CONFIG, "digest",
			  cfg_arm, "size", (json_int_t)sx, "layers", "mediaType", MT_LAYER, "digest",
			  l3, "size", (json_int_t)s3),
		&sa);
	long si;
	char *idx = add_blob_json(
		json_pack("{s:i, s:s, s:[{s:s, s:s, s:I, s:{s:s, s:s, s:s}}, "
			  "{s:s, s:s, s:I, s:{s:s, s:s}}]}",
			  "schemaVersion", 2, "mediaType", MT_INDEX, "manifests", "mediaType",
			  MT_MANIFEST, "digest", man_arm, "size", (json_int_t)sa, "platform",
			  "architecture", "arm64", "os", "linux", "variant", "v8", "mediaType",
			  MT_MANIFEST, "digest", man, "size", (json_int_t)sm, "platform",
			  "architecture", "amd64", "os", "linux"),
		&si);
	json_t *top = json_pack(
		"{s:i, s:[{s:s, s:s, s:I, s:{s:s}}, {s:s, s:s, s:I, s:{s:s}}]}", "schemaVersion", 2,
		"manifests", "mediaType", MT_MANIFEST, "digest", man, "size", (json_int_t)sm,
		"annotations", "org.opencontainers.image.ref.name", "single", "mediaType", MT_INDEX,
		"digest", idx, "size", (json_int_t)si, "annotations",
		"org.opencontainers.image.ref.name", "multi");
	char *data = json_dumps(top, JSON_COMPACT);
	write_at("oci/index.json", data);
	free(data);
	json_decref(top);
	single_digest = man;
	index_digest = idx;
	free(l1), free(l2), free(l3), free(diff1), free(diff2), free(diff3);
	free(cfg), free(cfg_arm), free(man_arm);
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
