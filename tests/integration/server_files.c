/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve` end to end (srv_client.h): filesystem RPCs, /files uploads
 * and downloads, WatchDir, and the metrics endpoint.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fixtures.h"
#include "srv_client.h"

TestSuite(server, .init = suite_setup, .fini = suite_teardown, .timeout = 900);

Test(server, filesystem_and_files)
{
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	char idh[80], tokh[128];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", a.id);
	snprintf(tokh, sizeof(tokh), "X-Access-Token: %s", a.token);
	const char *mh[] = { idh, tokh, "Content-Type: multipart/form-data; boundary=B0und", NULL };
	const char *mp = "--B0und\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/a/b.txt\"\r\n"
			 "Content-Type: application/octet-stream\r\n\r\nline1\nline2\r\n--B0und--\r\n";
	struct resp r = req("POST", "/files?path=%2Fhome%2Fuser%2Fa%2Fb.txt", mh, mp, strlen(mp), 1, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_str_eq(r.body, "[{\"path\":\"/home/user/a/b.txt\",\"name\":\"b.txt\",\"type\":\"file\"}]");
	free(r.body);
	const char *gh[] = { idh, tokh, NULL };
	r = req("GET", "/files?path=%2Fhome%2Fuser%2Fa%2Fb.txt", gh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "line1\nline2");
	free(r.body);
	r = req("GET", "/files?path=/nope", gh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"code\":404"));
	free(r.body);
	r = req("GET", "/files?path=/home", gh, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 400);
	free(r.body);
	const char *oh[] = { idh, tokh, "Content-Type: application/octet-stream", NULL };
	r = req("POST", "/files?path=/tmp/raw.bin", oh, "\x01\x02\x00\x03", 4, 1, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	free(r.body);
	/* file metadata (envd 0.6.2) as envd reads it: keys lowercased, empty
	 * keys dropped, the first of repeated headers kept; user.* xattrs */
	const char *xh[] = { idh, tokh, "Content-Type: application/octet-stream", "X-Metadata-Author: mish",
			     "x-metadata-PURPOSE: up", "X-Metadata-Author: second", "X-Metadata-: none", NULL };
	r = req("POST", "/files?path=/tmp/meta.bin", xh, "m", 1, 1, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(strstr(r.body, "\"metadata\":{\"author\":\"mish\",\"purpose\":\"up\"}"), "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/meta.bin\"}", 0, NULL, 0);
	cr_assert(strstr(r.body, "\"author\":\"mish\"") && strstr(r.body, "\"purpose\":\"up\""), "%s", r.body);
	free(r.body);
	/* a relative symlink's target, absolute and resolved, with its type */
	struct run ln = run_cmd(&a, "mkdir -p /tmp/l/d && ln -s ../../raw.bin /tmp/l/d/up && ln -s d/up /tmp/l/chain", NULL);
	cr_assert_eq(ln.exit_code, 0, "%s", ln.err);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/l/chain\"}", 0, NULL, 0);
	cr_assert(strstr(r.body, "\"symlinkTarget\":\"/tmp/raw.bin\"") && strstr(r.body, "FILE_TYPE_FILE") &&
		  strstr(r.body, "\"permissions\":\"Lrwxrwxrwx\""), "%s", r.body);
	free(r.body);
	/* filesystem RPCs */
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/raw.bin\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "\"size\":\"4\"") && strstr(r.body, "FILE_TYPE_FILE"), "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/none\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 404);
	cr_assert(strstr(r.body, "\"code\":\"not_found\""));
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/MakeDir", "{\"path\":\"/tmp/d1/d2\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/MakeDir", "{\"path\":\"/tmp/d1/d2\"}", 0, NULL, 0);
	cr_assert(strstr(r.body, "already_exists"));
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Move", "{\"source\":\"/tmp/raw.bin\",\"destination\":\"/tmp/d1/r.bin\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert(strstr(r.body, "\"path\":\"/tmp/d1/r.bin\""));
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/ListDir", "{\"path\":\"/tmp/d1\",\"depth\":1}", 0, NULL, 0);
	cr_assert(strstr(r.body, "r.bin") && strstr(r.body, "FILE_TYPE_DIRECTORY"), "%s", r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Remove", "{\"path\":\"/tmp/d1\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200);
	free(r.body);
	/* removing what is not there succeeds, as envd's os.RemoveAll */
	r = envd(&a, "/filesystem.Filesystem/Remove", "{\"path\":\"/tmp/never/there\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 200, "remove of a missing path: %ld %s", r.status, r.body);
	free(r.body);
	r = envd(&a, "/filesystem.Filesystem/Stat", "{\"path\":\"/tmp/d1\"}", 0, NULL, 0);
	cr_assert_eq(r.status, 404);
	free(r.body);
	/* WatchDir: start first, then events; the deadline ends the stream */
	struct bg w = { .sb = &a, .method = "/filesystem.Filesystem/WatchDir", .json = "{\"path\":\"/tmp\"}" };
	char idh2[80];
	snprintf(idh2, sizeof(idh2), "%s", idh);
	pthread_t t;
	pthread_create(&t, NULL, bg_main, &w);
	usleep(500000);
	struct run x = run_cmd(&a, "echo x > /tmp/w.txt; rm /tmp/w.txt", NULL);
	cr_assert_eq(x.exit_code, 0);
	pthread_join(t, NULL);
	unsigned char fl[256];
	json_t *m[256];
	size_t n = frames(&w.r, fl, m, 256);
	cr_assert_geq(n, 3);
	cr_assert_not_null(json_object_get(m[0], "start"));
	int created = 0, removed = 0;
	for (size_t i = 1; i < n; i++) {
		json_t *fs = json_object_get(m[i], "filesystem");
		const char *type = json_string_value(json_object_get(fs, "type"));
		if (type && strcmp(json_string_value(json_object_get(fs, "name")), "w.txt") == 0) {
			created |= strcmp(type, "EVENT_TYPE_CREATE") == 0;
			removed |= strcmp(type, "EVENT_TYPE_REMOVE") == 0;
		}
		json_decref(m[i]);
	}
	json_decref(m[0]);
	cr_assert(created && removed, "watch events: %s", w.r.body);
	cr_assert_eq(fl[n - 1], 2);
	free(w.r.body);
	kill_sb(a.id);
}

Test(server, metrics)
{
	struct resp r = req("GET", "/v2/sandboxes", NULL, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 401);
	free(r.body);
	struct sbx_ref a = create_sb("{\"templateID\":\"base\"}", 1);
	run_cmd(&a, "true", NULL);
	kill_sb(a.id);
	r = req("GET", "/metrics", NULL, NULL, 0, 0, 0);
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(r.body, "sbx_serve_sandboxes_live "));
	cr_assert(strstr(r.body, "sbx_serve_sandbox_creates_total "));
	cr_assert(strstr(r.body, "sbx_serve_create_seconds_bucket{le=\"+Inf\"}"));
	cr_assert(strstr(r.body, "sbx_serve_execs_total 1\n"), "%s", r.body);
	cr_assert(strstr(r.body, "sbx_serve_sandbox_creates_total 1\n"));
	cr_assert(strstr(r.body, "sbx_serve_sandboxes_live 0\n"));
	cr_assert(strstr(r.body, "sbx_serve_errors_total{code=\"401\"}"), "%s", r.body);
	cr_assert_null(strstr(r.body, S.key));
	free(r.body);
}
