/* SPDX-License-Identifier: MIT */
/*
 * Escape battery: `sbx serve` under attack. A client without credentials
 * tries to make the server buffer large bodies or hold idle connections until
 * nobody else gets in; a sandbox tries to make the server read a device or
 * block on a FIFO (and with it the timer that enforces every deadline, and
 * SIGTERM); a URL tries to forge access-log lines; a create that omits
 * allow_internet_access tries to get the host's network; and GET
 * /sandboxes/{id} must report the limits that are enforced. Each test starts
 * its own real `sbx serve` on loopback (SBX_SERVE_BIN overrides the binary,
 * to replay the battery against an older build).
 */
#include "server_harness.h"

TestSuite(srv, .init = suite_init, .fini = fini, .timeout = 600);

/* ---- 1. no body before credentials; bounded bodies -------------------------- */

/* Sends a request head; returns the status answered before any body byte. */
static int status_for_head(const char *head)
{
	int fd = tcp_to_server(NULL);
	send_str(fd, head);
	int st = read_status(fd, 20000);
	close(fd);
	return st;
}

Test(srv, auth_before_body)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	char h[1024];
	/* no API key, 512 MB announced: refused at once, nothing buffered */
	cr_assert_eq(status_for_head("POST /sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
				     "Content-Length: 536870000\r\n\r\n"), 401);
	snprintf(h, sizeof(h), "POST /files?path=/x HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: %s\r\n"
		 "X-Access-Token: wrong\r\nContent-Length: 536870000\r\n\r\n", a.id);
	cr_assert_eq(status_for_head(h), 401);
	cr_assert_eq(status_for_head("POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nX-Access-Token: nobody\r\n"
				     "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"), 401);
	cr_assert_eq(status_for_head("POST /files?path=/x HTTP/1.1\r\nHost: x\r\nContent-Length: 536870000\r\n\r\n"), 401);
	/* authenticated but over the endpoint's bound: 413 before the body */
	snprintf(h, sizeof(h), "POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-KEY: %s\r\n"
		 "Content-Type: application/json\r\nContent-Length: 2097152\r\n\r\n", S.key);
	cr_assert_eq(status_for_head(h), 413);
	snprintf(h, sizeof(h), "POST /filesystem.Filesystem/Stat HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: %s\r\n"
		 "X-Access-Token: %s\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n", a.id, a.token);
	cr_assert_eq(status_for_head(h), 413);
	/* chunked past the bound: the connection ends without the rest being
	 * read (MHD cannot answer mid-body) */
	int fd = tcp_to_server(NULL);
	snprintf(h, sizeof(h), "POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-KEY: %s\r\n"
		 "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", S.key);
	send_str(fd, h);
	static char chunk[65536 + 16];
	int k = snprintf(chunk, sizeof(chunk), "10000\r\n");
	memset(chunk + k, ' ', 65536);
	memcpy(chunk + k + 65536, "\r\n", 2);
	for (int i = 0; i < 24; i++)
		if (send(fd, chunk, (size_t)k + 65538, MSG_NOSIGNAL) < 0)
			break;
	char got[512] = "";
	cr_assert(read_until_closed(fd, got, sizeof(got), 20000), "a chunked body past the cap was read on");
	cr_assert(!*got || strstr(got, " 413 "), "%s", got);
	close(fd);
	/* a request within bounds still works */
	long st = 0;
	json_t *j = detail(&a, &st);
	cr_assert_eq(st, 200);
	json_decref(j);
	cr_assert(srv_stop(&S));
}

/* ---- 2. idle connections and a per-client cap ------------------------------ */

Test(srv, idle_connections_time_out)
{
	const char *opts[] = { "--idle-timeout", "2", NULL };
	srv_start(&S, opts, 0);
	char buf[1024];
	int fd = tcp_to_server(NULL);
	cr_assert(read_until_closed(fd, buf, sizeof(buf), 60000), "an idle connection was never closed");
	close(fd);
	fd = tcp_to_server(NULL);
	send_str(fd, "GET /health HTTP/1.1\r\nHost: x\r\n");
	cr_assert(read_until_closed(fd, buf, sizeof(buf), 60000), "a half-sent request was never closed");
	close(fd);
	/* inactivity only: a process stream silent for longer still runs to its end */
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	char *out = sh(&a, "sleep 5; echo done");
	cr_assert_str_eq(out, "done\n");
	free(out);
	cr_assert(srv_stop(&S));
}

Test(srv, per_ip_connection_cap)
{
	const char *opts[] = { "--max-connections-per-ip", "8", NULL };
	srv_start(&S, opts, 0);
	enum { N = 24 };
	int fds[N];
	for (int i = 0; i < N; i++)
		fds[i] = tcp_to_server("127.0.0.2");
	int closed[N] = { 0 }, nclosed = 0;
	for (int round = 0; round < 100 && nclosed < N - 8; round++) {
		for (int i = 0; i < N; i++) {
			struct pollfd p = { .fd = fds[i], .events = POLLIN };
			char b[256];
			if (!closed[i] && poll(&p, 1, 0) > 0 && recv(fds[i], b, sizeof(b), MSG_DONTWAIT) <= 0) {
				closed[i] = 1;
				nclosed++;
			}
		}
		nap_ms(100);
	}
	cr_assert_geq(nclosed, N - 8, "only %d of %d idle connections past the cap were refused", nclosed, N);
	/* another client is still served while the first holds its share */
	struct resp r = req("GET", "/health", NULL, NULL, 0, 10000);
	cr_assert_eq(r.status, 204, "fresh client: %ld", r.status);
	free(r.body);
	/* and the capped client gets no more */
	int fd = tcp_to_server("127.0.0.2");
	send(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 34, MSG_NOSIGNAL);
	cr_assert_eq(read_status(fd, 5000), -1);
	close(fd);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	cr_assert(srv_stop(&S));
}

/* ---- 3. /files of devices, FIFOs and big files ------------------------------ */

Test(srv, files_refuses_devices_and_fifos)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	char *o = sh(&a, "ln -s /dev/zero /tmp/zero && mkfifo /tmp/fifo && head -c 3000000 /dev/urandom >/tmp/big && echo ok");
	cr_assert_str_eq(o, "ok\n");
	free(o);
	struct resp r = envd(&a, "GET", "/files?path=/tmp/zero", NULL, NULL, 0, NULL, 60000);
	cr_assert_eq(r.status, 400, "GET of a symlink to /dev/zero: %ld (%zu bytes)", r.status, r.len);
	cr_assert(strstr(r.body, "not a regular file"), "%s", r.body);
	free(r.body);
	r = envd(&a, "GET", "/files?path=/tmp/fifo", NULL, NULL, 0, NULL, 20000);
	cr_assert_eq(r.status, 400, "GET of a FIFO: %ld", r.status);
	free(r.body);
	r = envd(&a, "GET", "/files?path=/dev/null", NULL, NULL, 0, NULL, 20000);
	cr_assert_eq(r.status, 400, "GET of a device: %ld", r.status);
	free(r.body);
	r = envd(&a, "GET", "/files?path=/tmp/big", NULL, NULL, 0, NULL, 60000);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.len, 3000000);
	free(r.body);
	r = envd(&a, "GET", "/files?path=/tmp", NULL, NULL, 0, NULL, 20000);
	cr_assert_eq(r.status, 400);
	free(r.body);
	cr_assert(srv_stop(&S));
}

/* ---- 4. a FIFO where the server expects a file ------------------------------ */

struct bg {
	const struct sbref *s;
	const char *method, *path, *ctype, *body, *extra;
	long status;
};

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	struct resp r = envd(b->s, b->method, b->path, b->ctype, b->body, b->body ? strlen(b->body) : 0, b->extra,
			     90000);
	b->status = r.status;
	free(r.body);
	return NULL;
}

/* 1 when some thread of pid sleeps in a FIFO open or read. */
static int blocked_on_fifo(pid_t pid)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		char p[400], w[128] = "";
		snprintf(p, sizeof(p), "%s/%s/wchan", dir, e->d_name);
		FILE *f = fopen(p, "r");
		if (f && fgets(w, sizeof(w), f))
			found = strstr(w, "partner") || strstr(w, "fifo") || strstr(w, "pipe");
		if (f)
			fclose(f);
	}
	closedir(d);
	return found;
}

static void set_timeout(const struct sbref *s, int secs)
{
	char p[128], b[64];
	snprintf(p, sizeof(p), "/sandboxes/%s/timeout", s->id);
	snprintf(b, sizeof(b), "{\"timeout\":%d}", secs);
	struct resp r = api("POST", p, b, 15000);
	cr_assert_eq(r.status, 204, "set timeout of %s: %ld %s", s->id, r.status, r.body);
	free(r.body);
}

Test(srv, fifo_cannot_stall_the_server)
{
	srv_start(&S, NULL, 0);
	struct sbref a, b;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":3600}"), 201);
	cr_assert_eq(create_sb(&b, "{\"templateID\":\"base\",\"timeout\":3600}"), 201);
	char *o = sh(&a, "mkfifo /tmp/fifo /tmp/pw && echo ok");
	cr_assert_str_eq(o, "ok\n");
	free(o);
	run(&a, "mv -f /tmp/pw /etc/passwd");
	/* the home-dir lookup of a named user (host side, /etc/passwd), an upload
	 * onto a FIFO, and a Stat whose owner names come from /etc/passwd */
	struct bg jobs[] = {
		{ &a, "GET", "/files?path=rel.txt&username=user", NULL, NULL, NULL, 0 },
		{ &a, "POST", "/files?path=/tmp/fifo", "application/octet-stream", "x", NULL, 0 },
		{ &a, "POST", "/filesystem.Filesystem/Stat", "application/json", "{\"path\":\"/tmp\"}",
		  "Authorization: Basic dXNlcjo=", 0 },
	};
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, bg_main, &jobs[i]);
	for (int i = 0; i < 50 && !blocked_on_fifo(S.pid); i++)
		nap_ms(100);
	/* the sandbox with the stuck calls still expires, and so does another */
	set_timeout(&a, 1);
	cr_assert(wait_gone(&a), "sandbox %s outlived its timeout", a.id);
	set_timeout(&b, 1);
	cr_assert(wait_gone(&b), "the timer stopped: sandbox %s outlived its timeout", b.id);
	struct resp r = api("GET", "/sandboxes", NULL, 15000);
	cr_assert_eq(r.status, 200);
	free(r.body);
	cr_assert(srv_stop(&S), "sbx serve did not stop on SIGTERM");
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	/* the home lookup refused the FIFO instead of waiting on it */
	cr_assert_eq(jobs[0].status, 404, "GET relative to the home of a user: %ld", jobs[0].status);
}

/* ---- 4b. closing a process's stdin closes nothing else ------------------------ */

/* GET /health on a kept-alive raw connection: the status, -1 once the server
 * closed it. */
static int health_on(int fd)
{
	static const char rq[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	if (send(fd, rq, sizeof(rq) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(rq) - 1)
		return -1;
	char buf[4096] = "";
	size_t len = 0;
	for (int i = 0; i < 200 && !strstr(buf, "\r\n\r\n"); i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
	}
	int st = -1;
	return sscanf(buf, "HTTP/1.%*d %d", &st) == 1 ? st : -1;
}

struct bgstart {
	const struct sbref *s;
	const char *cmd;
	long status;
};

static void *bgstart_main(void *arg)
{
	struct bgstart *b = arg;
	size_t n = 0;
	char *env = envelope(json_pack("{s:{s:s,s:[s,s]},s:s}", "process", "cmd", "/bin/bash", "args", "-c", b->cmd,
				       "tag", "held"), &n);
	struct resp r = envd(b->s, "POST", "/process.Process/Start", "application/connect+json", env, n, NULL, 120000);
	b->status = r.status;
	free(r.body);
	free(env);
	return NULL;
}

/* CloseStdin closed the stdin fd, and freeing the process closed the same
 * number again: whatever the server had opened under it meanwhile (a
 * client's connection here; as well a download, or a sandbox's cached root
 * fd that the next open would resolve paths against) was closed under it.
 * Under load the same happened to every process started with stdin open
 * (closed twice within a few syscalls): the intermittent "no response" or
 * EBADF of GET /files right after a command. */
Test(srv, close_stdin_closes_no_other_fd)
{
	srv_start(&S, NULL, 0);
	struct sbref a;
	cr_assert_eq(create_sb(&a, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	struct bgstart st = { &a, "while [ ! -e /tmp/go ]; do sleep 0.05; done", 0 };
	pthread_t th;
	pthread_create(&th, NULL, bgstart_main, &st);
	int listed = 0;
	for (int i = 0; i < 200 && !listed; i++) {
		struct resp r = envd(&a, "POST", "/process.Process/List", NULL, "{}", 2, NULL, 15000);
		listed = r.status == 200 && strstr(r.body, "\"held\"");
		free(r.body);
		if (!listed)
			nap_ms(50);
	}
	cr_assert(listed, "the held process did not start");
	const char *cs = "{\"process\":{\"tag\":\"held\"}}";
	struct resp r = envd(&a, "POST", "/process.Process/CloseStdin", NULL, cs, strlen(cs), NULL, 15000);
	cr_assert_eq(r.status, 200, "CloseStdin: %ld %s", r.status, r.body);
	free(r.body);
	/* new connections take the lowest free numbers, the closed one among them */
	enum { NCONN = 16 };
	int fds[NCONN];
	for (int i = 0; i < NCONN; i++) {
		fds[i] = tcp_to_server(NULL);
		cr_assert_eq(health_on(fds[i]), 204);
	}
	r = envd(&a, "POST", "/files?path=/tmp/go", "application/octet-stream", "x", 1, NULL, 15000);
	cr_assert_eq(r.status, 200, "%s", r.body);
	free(r.body);
	pthread_join(th, NULL);
	cr_assert_eq(st.status, 200);
	/* the process is freed once its stream and pump are done with it */
	for (int i = 0; i < 100; i++) {
		r = envd(&a, "POST", "/process.Process/List", NULL, "{}", 2, NULL, 15000);
		int gone = r.status == 200 && !strstr(r.body, "\"held\"");
		free(r.body);
		if (gone)
			break;
		nap_ms(50);
	}
	nap_ms(500);
	for (int i = 0; i < NCONN; i++) {
		cr_expect_eq(health_on(fds[i]), 204, "connection %d of %d was closed by the server", i + 1, NCONN);
		close(fds[i]);
	}
	/* and reads right after commands all answer (no retries) */
	for (int i = 0; i < 20; i++) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "echo %d", i);
		char *o = sh(&a, cmd);
		cr_assert_eq(strtol(o, NULL, 10), i, "%s", o);
		free(o);
	}
	cr_assert(srv_stop(&S));
}

/* ---- 5. the access log cannot be forged ------------------------------------ */

Test(srv, access_log_is_escaped)
{
	srv_start(&S, NULL, 1);
	int fd = tcp_to_server(NULL);
	send_str(fd, "GET /x%0a%7b%22forged%22:1%7d%0d%5c%1b%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	cr_assert_eq(read_status(fd, 20000), 401);
	close(fd);
	fd = tcp_to_server(NULL);
	send_str(fd, "G\x01T /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	read_status(fd, 20000);
	close(fd);
	struct resp r = req("GET", "/health", NULL, NULL, 0, 10000);
	free(r.body);
	/* the last request's line marks the end of the log */
	int seen_x = 0, done = 0;
	for (int round = 0; round < 100 && !done; round++) {
		nap_ms(100);
		FILE *f = fopen(S.log, "r");
		cr_assert_not_null(f);
		char line[4096];
		seen_x = 0;
		int lines = 0;
		while (fgets(line, sizeof(line), f)) {
			if (line[0] != '{' && !strstr(line, "forged"))
				continue;
			lines++;
			json_t *j = json_loads(line, 0, NULL);
			cr_assert_not_null(j, "access log line is not JSON: %s", line);
			const char *path = json_string_value(json_object_get(j, "path"));
			cr_assert_not_null(path, "%s", line);
			if (strncmp(path, "/x", 2) == 0) {
				cr_assert_str_eq(path, "/x\n{\"forged\":1}\r\\\x1b\xc3\xbf");
				seen_x = 1;
			}
			if (strcmp(path, "/health") == 0 && json_integer_value(json_object_get(j, "status")) == 204)
				done = 1;
			json_decref(j);
		}
		fclose(f);
		(void)lines;
	}
	cr_assert(done && seen_x, "access log lines missing (see %s)", S.log);
	cr_assert(srv_stop(&S));
}

/* ---- 6. allow_internet_access never means the host's network --------------- */

/* The first host interface other than lo (from /proc/net/dev), or "". */
static void host_iface(char *out, size_t cap)
{
	out[0] = '\0';
	FILE *f = fopen("/proc/net/dev", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char name[64];
		if (sscanf(line, " %63[^:]:", name) == 1 && strcmp(name, "lo") != 0 && !strchr(name, '|')) {
			snprintf(out, cap, "%s:", name);
			break;
		}
	}
	if (f)
		fclose(f);
}

/* Creates with `body` and checks the sandbox reaches neither a host
 * 127.0.0.1 listener nor sees the host's interfaces. */
static void check_not_host_network(const char *body)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(l, 4), 0);
	socklen_t al = sizeof(a);
	getsockname(l, (struct sockaddr *)&a, &al);
	struct sbref s;
	long st = create_sb(&s, body);
	if (st != 201) {
		/* internet mode not available yet: refusing is fine, host network is not */
		cr_assert(st >= 400, "create: %ld", st);
		close(l);
		return;
	}
	long ds = 0;
	json_t *d = detail(&s, &ds);
	cr_assert_eq(ds, 200);
	json_decref(d);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "(echo hi >/dev/tcp/127.0.0.1/%d) 2>/dev/null && echo CONNECTED; cat /proc/net/dev",
		 ntohs(a.sin_port));
	char *o = sh(&s, cmd);
	cr_assert_null(strstr(o, "CONNECTED"), "the sandbox reached a host 127.0.0.1 listener:\n%s", o);
	char ifc[80];
	host_iface(ifc, sizeof(ifc));
	if (*ifc)
		cr_assert_null(strstr(o, ifc), "the sandbox sees host interface %s:\n%s", ifc, o);
	free(o);
	cr_assert_lt(accept(l, NULL, NULL), 0, "the host listener got a connection");
	close(l);
}

Test(srv, internet_access_is_never_host_network)
{
	const char *opts[] = { "--allow-internet", NULL };
	srv_start(&S, opts, 0);
	check_not_host_network("{\"templateID\":\"base\"}");
	check_not_host_network("{\"templateID\":\"base\",\"allow_internet_access\":true}");
	cr_assert(srv_stop(&S));
	srv_start(&S, NULL, 0);
	struct sbref s;
	cr_assert_eq(create_sb(&s, "{\"templateID\":\"base\",\"allow_internet_access\":true}"), 201);
	long ds = 0;
	json_t *d = detail(&s, &ds);
	cr_assert_eq(ds, 200);
	cr_assert(json_is_false(json_object_get(d, "allowInternetAccess")),
		  "without --allow-internet the sandbox has no internet, and says so");
	json_decref(d);
	check_not_host_network("{\"templateID\":\"base\",\"allow_internet_access\":true}");
	cr_assert(srv_stop(&S));
}

/* ---- 7. what GET /sandboxes/{id} reports is what is enforced ---------------- */

/* Reads a cgroup file of the sandbox from the host (v2 or v1), "" if none. */
static void cg_read(const char *id, const char *file, char *out, size_t cap)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
		 "for d in $(find /sys/fs/cgroup -maxdepth 6 -type d -name %s 2>/dev/null); do "
		 "cat \"$d/%s\" 2>/dev/null && break; done", id, file);
	out[0] = '\0';
	FILE *p = popen(cmd, "r"); /* checksrc: allow (test) */
	if (p && !fgets(out, (int)cap, p))
		out[0] = '\0';
	if (p)
		pclose(p);
	out[strcspn(out, "\n")] = '\0';
}

/* MiB of the qgroup limit on $SBX_SCRATCH_DIR/<key>/<id>, or -1 if the
 * sandbox's writable layer is not on disk. */
static long long scratch_limit_mb(const char *id)
{
	const char *root = getenv("SBX_SCRATCH_DIR");
	char cmd[700], line[512];
	snprintf(cmd, sizeof(cmd), "for d in %s/*/%s; do [ -d \"$d\" ] && btrfs qgroup show -r --raw -f \"$d\"; done 2>/dev/null",
		 root ? root : "/nonexistent", id);
	FILE *p = popen(cmd, "r"); /* checksrc: allow (test) */
	long long mb = -1;
	while (p && fgets(line, sizeof(line), p)) {
		unsigned long long a, b, c;
		if (sscanf(line, "0/%*u %llu %llu %llu", &a, &b, &c) == 3)
			mb = (long long)(c >> 20);
	}
	if (p)
		pclose(p);
	return mb;
}

static void check_reported(const struct sbref *s)
{
	/* the memory cgroup is made at the first command (docs/local-provider.md) */
	free(sh(s, "true"));
	long ds = 0;
	json_t *d = detail(s, &ds);
	cr_assert_eq(ds, 200);
	long long mem = json_integer_value(json_object_get(d, "memoryMB"));
	long long cpus = json_integer_value(json_object_get(d, "cpuCount"));
	long long disk = json_integer_value(json_object_get(d, "diskSizeMB"));
	json_decref(d);
	/* memory: the cgroup limit, or all of the host's memory without one */
	char v[128], v1[128];
	cg_read(s->id, "memory.max", v, sizeof(v));
	if (!*v)
		cg_read(s->id, "memory.limit_in_bytes", v, sizeof(v));
	long long lim = *v && strcmp(v, "max") != 0 ? strtoll(v, NULL, 10) : 0;
	if (lim > 0 && lim < (1ll << 50))
		cr_assert_eq(mem, lim >> 20, "memoryMB %lld, cgroup limit %s", mem, v);
	else
		cr_assert_eq(mem, (long long)(sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) >> 20),
			     "memoryMB %lld but memory is not limited", mem);
	/* cpus: the quota rounded up, or every CPU without one */
	long long quota = -1, period = 1;
	cg_read(s->id, "cpu.max", v, sizeof(v));
	if (*v) {
		if (sscanf(v, "%lld %lld", &quota, &period) != 2)
			quota = -1;
	} else {
		/* v1 keeps the quota on <id>/run, where commands run (init is
		 * outside it); older layouts had it on <id> */
		cg_read(s->id, "run/cpu.cfs_quota_us", v, sizeof(v));
		cg_read(s->id, "run/cpu.cfs_period_us", v1, sizeof(v1));
		if (!*v || strtoll(v, NULL, 10) < 0) {
			cg_read(s->id, "cpu.cfs_quota_us", v, sizeof(v));
			cg_read(s->id, "cpu.cfs_period_us", v1, sizeof(v1));
		}
		if (*v && *v1) {
			quota = strtoll(v, NULL, 10);
			period = strtoll(v1, NULL, 10);
		}
	}
	if (quota > 0 && period > 0)
		cr_assert_eq(cpus, (quota + period - 1) / period, "cpuCount %lld, quota %lld/%lld", cpus, quota, period);
	else
		cr_assert_eq(cpus, sysconf(_SC_NPROCESSORS_ONLN), "cpuCount %lld without a quota", cpus);
	/* the writable layer's cap: the qgroup limit of its subvolume on disk
	 * (df inside shows the whole scratch file system), or the tmpfs size */
	long long total = scratch_limit_mb(s->id);
	if (total < 0) {
		char *o = sh(s, "df -m / | tail -1");
		cr_assert_eq(sscanf(o, "%*s %lld", &total), 1, "%s", o);
		free(o);
	}
	cr_assert(disk >= total - 1 && disk <= total + 1, "diskSizeMB %lld, enforced %lld MiB", disk, total);
}

Test(srv, detail_reports_enforced_limits)
{
	const char *opts[] = { "--cpus", "0.5", "--memory-mb", "300", "--storage-mb", "200", NULL };
	srv_start(&S, opts, 0);
	struct sbref s;
	cr_assert_eq(create_sb(&s, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	check_reported(&s);
	cr_assert(srv_stop(&S));
	srv_start(&S, NULL, 0);
	cr_assert_eq(create_sb(&s, "{\"templateID\":\"base\",\"timeout\":600}"), 201);
	check_reported(&s);
	cr_assert(srv_stop(&S));
}
