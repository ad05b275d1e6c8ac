/* SPDX-License-Identifier: MIT */
/* The token endpoint of tests/integration/registry.c's `auth: token`
 * registry: RS256 JWTs signed by a self-signed certificate made here. */
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

static EVP_PKEY *tok_key;
static char *tok_x5c;
static int tok_fd = -1;
int tok_port;
static pthread_t tok_thread;
int tok_granted, tok_refused;

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
void token_start(const char *cert_path)
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

void token_stop(void)
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
