/* SPDX-License-Identifier: MIT */
/*
 * The client side of the `sbx serve` integration tests (server.c,
 * server_process.c, server_files.c): the real server binary on a loopback
 * port with a private state dir (one per test: the suite's init runs in
 * each test's process), requests through libcurl, envd's Connect framing.
 */
#ifndef SBX_TEST_SRV_CLIENT_H
#define SBX_TEST_SRV_CLIENT_H
#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

struct srv {
	pid_t pid;
	int port;
	char state[512];
	char key[128];
	char base[64];
};

struct resp {
	long status;
	char *body;
	size_t len;
	char next[256];
	char ctype[128];
};

struct sbx_ref {
	char id[32];
	char token[80];
};

struct run {
	char out[8192];
	char err[8192];
	int exit_code;
	int has_end;
	char error[64];
	int pid;
};

struct bg {
	struct sbx_ref *sb;
	const char *method, *json;
	struct resp r;
};

extern struct srv S;

double now_s(void);
void srv_start(struct srv *s, const char *state, const char *extra);
int srv_stop(struct srv *s, int sig);
void suite_setup(void);
void suite_teardown(void);
struct resp req(const char *method, const char *path, const char *const *hdrs, const void *body, size_t blen,
		int chunked, long timeout_ms);
struct resp api(const char *method, const char *path, const char *json);
json_t *jparse(struct resp *r);
struct sbx_ref create_sb(const char *body, int v2);
void kill_sb(const char *id);
struct resp envd(const struct sbx_ref *s, const char *method, const char *json, int stream, const char *extra_hdr,
		 long timeout_ms);
size_t frames(const struct resp *r, unsigned char *flags, json_t **msgs, size_t max);
const char *sh_start(const char *cmd, char *buf, size_t len, int use_stdin);
struct run parse_run(const struct resp *r);
struct run run_cmd(const struct sbx_ref *s, const char *cmd, const char *hdr);
void *bg_main(void *arg);
int wait_pid(struct sbx_ref *a);
size_t count_sandboxes(const char *state);

#endif
