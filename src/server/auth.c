/* SPDX-License-Identifier: MIT */
/*
 * Authentication for `sbx serve`: the control-plane API key (generated on
 * first start as e2b_ + 40 hex, kept 0600 in <state>/server/api-key,
 * re-read when the file changes so `sbx serve --rotate-key` takes effect at
 * once), per-sandbox envd access tokens, constant-time comparisons, /files
 * URL signatures and the Basic-auth user.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../util/alloc.h"
#include "../util/base64.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/sha256.h"
#include "../util/str.h"
#include "server_int.h"

int sbx__srv_ct_equal(const char *a, const char *b)
{
	if (!a || !b)
		return 0;
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = (unsigned char)(la != lb);
	for (size_t i = 0; i < lb; i++)
		d |= (unsigned char)(a[i % (la ? la : 1)] ^ b[i]);
	return d == 0 && la == lb;
}

static char *key_path(const char *state_dir)
{
	return xasprintf("%s/server/api-key", state_dir);
}

static int write_new_key(const char *path, char **key_out, sbx_error **err)
{
	char hex[41];
	sbx__random_hex(hex, 40);
	char *key = xasprintf("e2b_%s", hex);
	_cleanup_free_ char *line = xasprintf("%s\n", key);
	int r = sbx__write_file_atomic(path, line, strlen(line), 0600, err);
	if (r < 0) {
		free(key);
		return r;
	}
	*key_out = key;
	return 0;
}

static int read_key(const char *path, char **key_out, double *mtime, sbx_error **err)
{
	char *data = NULL;
	size_t len;
	int r = sbx__read_file(&data, &len, path, 4096, err);
	if (r < 0)
		return r;
	sbx__str_trim(data);
	if (!*data) {
		free(data);
		return sbx_error_set(err, -EINVAL, "API key file %s is empty", path);
	}
	struct stat st;
	if (stat(path, &st) == 0)
		*mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 + (double)st.st_ino * 1e-3;
	*key_out = data;
	return 0;
}

int sbx__srv_auth_init(struct server *srv, int *created, sbx_error **err)
{
	srv->key_path = key_path(srv->cfg.state_dir);
	*created = 0;
	int r = read_key(srv->key_path, &srv->api_key, &srv->key_mtime, NULL);
	if (r == 0)
		goto out;
	r = write_new_key(srv->key_path, &srv->api_key, err);
	if (r < 0)
		return r;
	*created = 1;
	struct stat st;
	if (stat(srv->key_path, &st) == 0)
		srv->key_mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 + (double)st.st_ino * 1e-3;
out:
	sbx__redact_add(srv->api_key);
	return 0;
}

int sbx__srv_auth_rotate(const char *state_dir, char **key_out, sbx_error **err)
{
	_cleanup_free_ char *dir = xasprintf("%s/server", state_dir);
	int r = sbx__mkdir_p(dir, 0700, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = key_path(state_dir);
	return write_new_key(path, key_out, err);
}

int sbx__srv_auth_api_key_ok(struct server *srv, const char *given)
{
	if (!given || !*given)
		return 0;
	pthread_mutex_lock(&srv->key_lock);
	struct stat st;
	if (stat(srv->key_path, &st) == 0) {
		double m = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 + (double)st.st_ino * 1e-3;
		char *k = NULL;
		if (m != srv->key_mtime && read_key(srv->key_path, &k, &srv->key_mtime, NULL) == 0) {
			free(srv->api_key);
			srv->api_key = k;
			sbx__redact_add(k);
		}
	}
	int ok = sbx__srv_ct_equal(given, srv->api_key);
	pthread_mutex_unlock(&srv->key_lock);
	return ok;
}

void sbx__srv_auth_new_token(char out[65])
{
	sbx__random_hex(out, 48);
	out[48] = '\0';
}

int sbx__srv_auth_signature_ok(const char *token, const char *path, const char *op, const char *user,
			  const char *sig, const char *expiration)
{
	if (!token || !sig || strncmp(sig, "v1_", 3) != 0)
		return 0;
	if (expiration && *expiration) {
		uint64_t exp;
		if (sbx__parse_u64(&exp, expiration) < 0 || (double)exp < (double)time(NULL))
			return 0;
	}
	_cleanup_free_ char *msg = expiration && *expiration
		? xasprintf("%s:%s:%s:%s:%s", path, op, user ? user : "", token, expiration)
		: xasprintf("%s:%s:%s:%s", path, op, user ? user : "", token);
	/* E2B's scheme: standard alphabet, trailing '=' stripped. */
	unsigned char md[SBX_SHA256_LEN];
	sbx__sha256(md, msg, strlen(msg));
	char b[64];
	if (sbx__base64_encode_to(b, sizeof(b), md, sizeof(md), SBX_B64_STD | SBX_B64_NOPAD) < 0)
		return 0;
	return sbx__srv_ct_equal(sig + 3, b);
}

char *sbx__srv_auth_basic_user(const char *header)
{
	if (!header || strncasecmp(header, "Basic ", 6) != 0)
		return NULL;
	/* RFC 7617 credentials are standard, padded base64, which is what the
	 * SDKs (btoa, base64.b64encode) and curl send; nothing looser. */
	const char *cred = header + 6;
	while (*cred == ' ')
		cred++;
	sbx_buf b;
	sbx__buf_init(&b, 4096);
	if (sbx__base64_decode_buf(&b, cred, strlen(cred), SBX_B64_STD) < 0 || !b.data ||
	    memchr(b.data, '\0', b.len)) {
		sbx__buf_free(&b);
		return NULL;
	}
	char *colon = memchr(b.data, ':', b.len);
	if (colon)
		*colon = '\0';
	char *user = b.data[0] ? xstrdup(b.data) : NULL;
	sbx__buf_free(&b);
	return user;
}
