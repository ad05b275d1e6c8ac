/* SPDX-License-Identifier: MIT */
/*
 * `sbx serve`'s E2B snapshots, fork and auto-resume (docs/server.md,
 * "Snapshots, fork and auto-resume") against bad input and misuse: unknown
 * sandboxes (404), bad names, counts, timeouts and bodies (400 naming the
 * field), taken names (409), a fork past --max-sandboxes (429), deleting a
 * snapshot a running sandbox was made from (it keeps working), autoResume
 * without autoPause (400), and that only an authorized request wakes a
 * paused sandbox with autoResume (one without it stays paused).
 */
#include "server_harness.h"

TestSuite(snapshots, .init = suite_init, .fini = fini, .timeout = 600);

static void expect(const char *method, const char *path, const char *body, long status, const char *needle)
{
	struct resp r = api(method, path, body, 120000);
	cr_assert_eq(r.status, status, "%s %s %s: %ld %s", method, path, body ? body : "", r.status, r.body);
	if (needle)
		cr_assert(strstr(r.body, needle), "%s %s %s: '%s' not in %s", method, path, body ? body : "", needle,
			  r.body);
	free(r.body);
}

static char *state_of(const struct sbref *s)
{
	long st = 0;
	json_t *j = detail(s, &st);
	cr_assert_eq(st, 200);
	char *v = strdup(json_string_value(json_object_get(j, "state")));
	json_decref(j);
	return v;
}

static void wait_state(const struct sbref *s, const char *want)
{
	for (int i = 0; i < 600; i++) {
		char *v = state_of(s);
		int same = strcmp(v, want) == 0;
		free(v);
		if (same)
			return;
		nap_ms(100);
	}
	cr_assert_fail("sandbox %s never became %s", s->id, want);
}

Test(snapshots, bad_input)
{
	const char *extra[] = { "--max-sandboxes", "3", NULL };
	srv_start(&S, extra, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":300}"), 201);
	char p[128], f[128];
	snprintf(p, sizeof(p), "/sandboxes/%s/snapshots", a.id);
	snprintf(f, sizeof(f), "/sandboxes/%s/fork", a.id);

	/* unknown sandbox */
	expect("POST", "/sandboxes/nosuchsandbox/snapshots", "{}", 404, NULL);
	expect("POST", "/sandboxes/nosuchsandbox/fork", "{\"count\":1}", 404, NULL);
	/* names: 400 naming the field */
	const char *bad_names[] = { "{\"name\":\"\"}", "{\"name\":\"has space\"}", "{\"name\":\"a/b\"}",
				    "{\"name\":\".hidden\"}", "{\"name\":\"-dash\"}", "{\"name\":\"x:tag\"}",
				    "{\"name\":7}", "{\"name\":\"\\u00e9t\\u00e9\"}",
				    "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", NULL };
	for (size_t i = 0; bad_names[i]; i++)
		expect("POST", p, bad_names[i], 400, "name");
	expect("POST", p, "[1]", 400, "JSON object");
	expect("POST", p, "{\"name\":", 400, NULL);
	/* a name taken by an image of the store, or by "base" */
	expect("POST", p, "{\"name\":\"bash\"}", 409, "taken");
	expect("POST", p, "{\"name\":\"base\"}", 409, "taken");
	/* counts and timeouts */
	const char *bad_counts[] = { "{\"count\":0}", "{\"count\":65}", "{\"count\":-1}", "{\"count\":\"3\"}",
				     "{\"count\":1.5}", NULL };
	for (size_t i = 0; bad_counts[i]; i++)
		expect("POST", f, bad_counts[i], 400, "count");
	expect("POST", f, "{\"count\":1,\"timeout\":-5}", 400, "timeout");
	expect("POST", f, "{\"count\":1,\"timeout\":\"soon\"}", 400, "timeout");
	/* --max-sandboxes 3 with one live: room for 2 forks, not 3 */
	expect("POST", f, "{\"count\":3,\"timeout\":60}", 429, "limit");
	/* listing */
	expect("GET", "/snapshots?limit=0", NULL, 400, "limit");
	expect("GET", "/snapshots?limit=101", NULL, 400, "limit");
	expect("GET", "/snapshots?nextToken=zz", NULL, 400, "nextToken");
	/* deleting what is not there */
	expect("DELETE", "/templates/nosuchsnapshot", NULL, 404, NULL);
	/* autoResume: only {enabled: boolean}, and only with autoPause */
	expect("POST", "/v2/sandboxes", "{\"templateID\":\"base\",\"autoResume\":{\"enabled\":true}}", 400, "autoPause");
	expect("POST", "/v2/sandboxes", "{\"templateID\":\"base\",\"autoResume\":true}", 400, "autoResume");
	expect("POST", "/v2/sandboxes", "{\"templateID\":\"base\",\"autoPause\":true,\"autoResume\":{\"enabled\":1}}",
	       400, "autoResume");
	/* nothing was made by any of it */
	struct resp r = api("GET", "/snapshots", NULL, 15000);
	cr_assert_str_eq(r.body, "[]");
	free(r.body);
	r = api("GET", "/v2/sandboxes", NULL, 15000);
	json_t *j = json_loadb(r.body, r.len, 0, NULL);
	cr_assert_eq(json_array_size(j), 1, "%s", r.body);
	json_decref(j);
	free(r.body);
	srv_stop(&S);
}

Test(snapshots, delete_in_use_and_fork_tokens)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":300,\"metadata\":{\"who\":\"parent\"}}"), 201);
	free(sh(&a, "echo frozen > /tmp/f"));
	char p[128], name[64], body[160];
	snprintf(p, sizeof(p), "/sandboxes/%s/snapshots", a.id);
	snprintf(name, sizeof(name), "sec-%d", (int)getpid());
	snprintf(body, sizeof(body), "{\"name\":\"%s\"}", name);
	expect("POST", p, body, 201, name);
	expect("POST", p, body, 409, "taken");
	char alias[128];
	snprintf(alias, sizeof(alias), "/templates/aliases/%s", name);
	expect("GET", alias, NULL, 200, name); /* Template.exists(name) */
	/* a sandbox made from it, then the snapshot deleted under it */
	snprintf(body, sizeof(body), "{\"templateID\":\"%s\",\"timeout\":300}", name);
	struct sbref c;
	cr_assert_eq(create_sb(&c, body), 201);
	char del[128];
	snprintf(del, sizeof(del), "/templates/%s", name);
	expect("DELETE", del, NULL, 204, NULL);
	expect("DELETE", del, NULL, 404, NULL);
	expect("GET", alias, NULL, 404, NULL);
	char *out = sh(&c, "cat /tmp/f; echo more >> /tmp/f; cat /tmp/f");
	cr_assert_str_eq(out, "frozen\nfrozen\nmore\n");
	free(out);
	struct sbref gone;
	cr_assert_eq(create_sb(&gone, body), 404);

	/* fork: each child its own token, the parent's metadata; no token crosses */
	char f[128];
	snprintf(f, sizeof(f), "/sandboxes/%s/fork", a.id);
	struct resp r = api("POST", f, "{\"count\":2,\"timeout\":120}", 120000);
	cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
	json_t *j = json_loadb(r.body, r.len, 0, NULL);
	cr_assert_eq(json_array_size(j), 2, "%s", r.body);
	struct sbref k[2];
	for (size_t i = 0; i < 2; i++) {
		json_t *sb = json_object_get(json_array_get(j, i), "sandbox");
		snprintf(k[i].id, sizeof(k[i].id), "%s", json_string_value(json_object_get(sb, "sandboxID")));
		snprintf(k[i].token, sizeof(k[i].token), "%s", json_string_value(json_object_get(sb, "envdAccessToken")));
		cr_assert_str_neq(k[i].token, a.token);
	}
	json_decref(j);
	free(r.body);
	cr_assert_str_neq(k[0].token, k[1].token);
	long st = 0;
	j = detail(&k[0], &st);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "metadata"), "who")), "parent");
	json_decref(j);
	out = sh(&k[1], "cat /tmp/f");
	cr_assert_str_eq(out, "frozen\n");
	free(out);
	struct sbref cross = a;
	snprintf(cross.token, sizeof(cross.token), "%s", k[0].token);
	r = envd(&cross, "POST", "/filesystem.Filesystem/Stat", NULL, "{\"path\":\"/\"}", 13, NULL, 15000);
	cr_assert_eq(r.status, 401, "a child's token on the parent: %ld %s", r.status, r.body);
	free(r.body);
	/* a paused parent forks too, and stays paused */
	char pp[128];
	snprintf(pp, sizeof(pp), "/sandboxes/%s/pause", a.id);
	expect("POST", pp, "{}", 204, NULL);
	r = api("POST", f, "{\"timeout\":120}", 120000);
	cr_assert_eq(r.status, 201, "fork of a paused parent: %ld %s", r.status, r.body);
	j = json_loadb(r.body, r.len, 0, NULL);
	cr_assert_eq(json_array_size(j), 1, "count defaults to 1: %s", r.body);
	json_t *sb = json_object_get(json_array_get(j, 0), "sandbox");
	struct sbref k3;
	snprintf(k3.id, sizeof(k3.id), "%s", json_string_value(json_object_get(sb, "sandboxID")));
	snprintf(k3.token, sizeof(k3.token), "%s", json_string_value(json_object_get(sb, "envdAccessToken")));
	json_decref(j);
	free(r.body);
	out = sh(&k3, "cat /tmp/f");
	cr_assert_str_eq(out, "frozen\n");
	free(out);
	char *v = state_of(&a);
	cr_assert_str_eq(v, "paused");
	free(v);
	srv_stop(&S);
}

Test(snapshots, auto_resume_needs_authorization)
{
	srv_start(&S, NULL, 0);
	struct sbref on, off;
	cr_assert_eq(create_sb(&on, "{\"templateID\":\"base\",\"timeout\":1,\"autoPause\":true,"
				    "\"autoResume\":{\"enabled\":true}}"), 201);
	cr_assert_eq(create_sb(&off, "{\"templateID\":\"base\",\"timeout\":1,\"autoPause\":true,"
				     "\"autoResume\":{\"enabled\":false}}"), 201);
	long st = 0;
	json_t *j = detail(&on, &st);
	cr_assert(json_is_true(json_object_get(json_object_get(j, "lifecycle"), "autoResume")));
	json_decref(j);
	wait_state(&on, "paused");
	wait_state(&off, "paused");
	/* a wrong token and an anonymous /health do not wake it */
	struct sbref wrong = on;
	snprintf(wrong.token, sizeof(wrong.token), "%s", off.token);
	struct resp r = envd(&wrong, "POST", "/filesystem.Filesystem/Stat", NULL, "{\"path\":\"/\"}", 13, NULL, 15000);
	cr_assert_eq(r.status, 401);
	free(r.body);
	char idh[80];
	snprintf(idh, sizeof(idh), "E2b-Sandbox-Id: %s", on.id);
	const char *h[] = { idh, NULL };
	r = req("GET", "/health", h, NULL, 0, 15000);
	cr_assert_eq(r.status, 502, "anonymous /health: %ld", r.status);
	free(r.body);
	char *v = state_of(&on);
	cr_assert_str_eq(v, "paused");
	free(v);
	/* without autoResume: still 502 and paused */
	r = envd(&off, "GET", "/health", NULL, NULL, 0, NULL, 15000);
	cr_assert_eq(r.status, 502);
	free(r.body);
	v = state_of(&off);
	cr_assert_str_eq(v, "paused");
	free(v);
	/* with it and its token: resumed, the call answered */
	r = envd(&on, "GET", "/health", NULL, NULL, 0, NULL, 15000);
	cr_assert_eq(r.status, 204, "%ld %s", r.status, r.body);
	free(r.body);
	/* (its 1 s timeout pauses it again soon: the 204 is the proof) */
	srv_stop(&S);
}

/* A request to port `port` of sandbox `id` through the routing headers. */
static struct resp preq(const char *id, unsigned port)
{
	char hid[80], hport[48];
	snprintf(hid, sizeof(hid), "E2b-Sandbox-Id: %s", id);
	snprintf(hport, sizeof(hport), "E2b-Sandbox-Port: %u", port);
	const char *h[] = { hid, hport, NULL };
	return req("GET", "/", h, NULL, 0, 60000);
}

/* Uploads tests/integration/porthelper into the sandbox and starts it on `port`. */
static void start_helper(const struct sbref *s, unsigned port)
{
	const char *bin = getenv("SBX_PORTHELPER");
	cr_assert_not_null(bin, "SBX_PORTHELPER is not set (tests/integration/meson.build)");
	FILE *f = fopen(bin, "rb");
	cr_assert_not_null(f, "%s", bin);
	static char data[4 << 20];
	size_t n = fread(data, 1, sizeof(data), f);
	fclose(f);
	cr_assert_gt(n, 0);
	struct resp r = envd(s, "POST", "/files?path=/tmp/porthelper", "application/octet-stream", data, n, NULL, 60000);
	cr_assert_eq(r.status, 200, "upload: %ld %s", r.status, r.body);
	free(r.body);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "chmod 755 /tmp/porthelper && (/tmp/porthelper %u </dev/null >/dev/null 2>&1 &)", port);
	run(s, cmd);
	for (int i = 0; i < 600; i++) { /* a loaded machine: up to 30 s */
		r = preq(s->id, port);
		long st = r.status;
		free(r.body);
		if (st == 200)
			return;
		nap_ms(50);
	}
	r = preq(s->id, port);
	cr_assert_fail("the helper never answered on port %u: %ld %s", port, r.status, r.body);
}

Test(snapshots, auto_resume_by_a_routed_port)
{
	srv_start(&S, NULL, 0);
	struct sbref on, off;
	cr_assert_eq(create_sb(&on, "{\"templateID\":\"base\",\"timeout\":600,\"autoPause\":true,"
				    "\"autoResume\":{\"enabled\":true}}"), 201);
	cr_assert_eq(create_sb(&off, "{\"templateID\":\"base\",\"timeout\":600,\"autoPause\":true}"), 201);
	start_helper(&on, 8000);
	start_helper(&off, 8000);
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s/pause", on.id);
	expect("POST", p, "{}", 204, NULL);
	snprintf(p, sizeof(p), "/sandboxes/%s/pause", off.id);
	expect("POST", p, "{}", 204, NULL);
	struct resp r = preq(off.id, 8000);
	cr_assert_eq(r.status, 502, "a paused sandbox without autoResume: %ld %s", r.status, r.body);
	free(r.body);
	char *v = state_of(&off);
	cr_assert_str_eq(v, "paused");
	free(v);
	r = preq(on.id, 8000);
	cr_assert_eq(r.status, 200, "a paused sandbox with autoResume: %ld %s", r.status, r.body);
	cr_assert_str_eq(r.body, "porthelper ok\n");
	free(r.body);
	v = state_of(&on);
	cr_assert_str_eq(v, "running");
	free(v);
	srv_stop(&S);
}

struct fork_job {
	char path[128];
	struct resp r;
	volatile int done;
};

static void *fork_thread(void *arg)
{
	struct fork_job *j = arg;
	j->r = api("POST", j->path, "{\"count\":8,\"timeout\":120}", 300000);
	j->done = 1;
	return NULL;
}

/* A fork (or snapshot) holds the parent against pause and resume while it
 * copies; the parent still runs, so its ports must not answer "paused". */
Test(snapshots, ports_of_a_running_parent_answer_during_a_fork)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	start_helper(&a, 8000);
	/* files to copy: the fork's hold lasts while they are */
	run(&a, "mkdir -p /tmp/many && cd /tmp/many && for i in {1..2000}; do echo $i > f$i; done");
	struct fork_job job = { .done = 0 };
	snprintf(job.path, sizeof(job.path), "/sandboxes/%s/fork", a.id);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, fork_thread, &job), 0);
	long bad = 0, n = 0;
	char last[256] = "";
	while (!job.done) {
		struct resp r = preq(a.id, 8000);
		n++;
		if (r.status != 200) {
			bad++;
			snprintf(last, sizeof(last), "%ld %s", r.status, r.body ? r.body : "");
		}
		free(r.body);
	}
	pthread_join(t, NULL);
	cr_assert_eq(job.r.status, 201, "fork: %ld %s", job.r.status, job.r.body);
	free(job.r.body);
	cr_assert_eq(bad, 0, "%ld of %ld requests to the running parent's port failed during its fork, last: %s", bad,
		     n, last);
	srv_stop(&S);
}

/* The server's own CPU time (user + system, children not counted), in s. */
static double server_cpu_s(void)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)S.pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	cr_assert_not_null(p);
	unsigned long long ut = 0, st = 0;
	/* after "pid (comm)": state is field 3, utime 14, stime 15 */
	cr_assert_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st), 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A deadline that passes while a fork holds an autoPause sandbox: the
 * timer's pause gets -EBUSY until the hold ends, and must wait for it
 * rather than retry at once in a loop that burns a core (and srv->lock)
 * for the whole fork. The fork's own CPU is measured first, without a
 * deadline; the check allows it twice over plus 0.15 s (a spin through
 * the fork took 0.34 s more on an idle machine). */
Test(snapshots, deadline_during_a_fork_does_not_spin)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600,\"autoPause\":true}"), 201);
	run(&a, "mkdir -p /tmp/many && cd /tmp/many && for i in {1..3000}; do echo $i > f$i; done");
	double c0 = server_cpu_s();
	struct fork_job job = { .done = 0 };
	snprintf(job.path, sizeof(job.path), "/sandboxes/%s/fork", a.id);
	job.r = api("POST", job.path, "{\"count\":8,\"timeout\":120}", 300000);
	cr_assert_eq(job.r.status, 201, "fork: %ld %s", job.r.status, job.r.body);
	free(job.r.body);
	double base = server_cpu_s() - c0;
	c0 = server_cpu_s();
	job.done = 0;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, fork_thread, &job), 0);
	nap_ms(100);
	char p[128];
	snprintf(p, sizeof(p), "/sandboxes/%s/timeout", a.id);
	expect("POST", p, "{\"timeout\":0}", 204, NULL);
	pthread_join(t, NULL);
	double used = server_cpu_s() - c0;
	cr_assert_eq(job.r.status, 201, "fork: %ld %s", job.r.status, job.r.body);
	free(job.r.body);
	wait_state(&a, "paused");
	fprintf(stderr, "deadline_during_a_fork_does_not_spin: the server used %.2f s of CPU for a fork, %.2f s for one "
			"its deadline passed during\n", base, used);
	cr_assert_lt(used, 2 * base + 0.15, "the server used %.2f s of CPU during a fork the deadline passed in (%.2f s "
					   "without): the timer spins on the held sandbox", used, base);
	srv_stop(&S);
}
