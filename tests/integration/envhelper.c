/* SPDX-License-Identifier: MIT */
/*
 * A small environment server for the E2B-leg acceptance test
 * (tests/compat/eleg.mjs): uploaded into a task's sandbox, started with
 * commands.run(..., {background: true}) and reached at getHost(PORT), the way
 * the reference framework's E2B leg runs OpenEnv's tbench2_env server inside
 * each sandbox. Built -static (a task image's libc is not ours to rely on).
 *
 *   envhelper --port N --task ID [--workdir DIR] [--instruction FILE]
 *             [--verifier-timeout S] [--verifier-env K=V]... [--max-output N]
 *
 *   GET /health   {"status":"healthy"}
 *   GET /ws       a WebSocket speaking a subset of OpenEnv's messages
 *                 (docs/server.md, "The E2B-leg pattern"): reset, step
 *                 (action_type exec | evaluate | close), state, close.
 *
 * exec runs `/bin/sh -c COMMAND` in DIR (default /) and answers output,
 * exit code and timing. evaluate is Harbor's verifier (docs/tasks.md):
 * /logs/verifier wiped, `/tests/test.sh > /logs/verifier/test-stdout.txt
 * 2>&1` in DIR with the --verifier-env variables under --verifier-timeout,
 * then the reward from /logs/verifier/reward.json ("reward", else the mean)
 * or reward.txt; no reward (or a timeout) is "no verdict": reward null. The
 * client uploads /tests itself before evaluate (tests never sit in the
 * sandbox during the agent phase). While a command runs, pings are answered
 * and a client that goes away kills it. One process per connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envhelper.h"
#include "envjson.h"
#include "wsaccept.h"

const char *workdir = "/";
size_t max_output = 1u << 20;
static const char *task = "", *instr_file;
static double verifier_timeout = 600;
static char *venv[64];
static int nvenv;

/* ---- replies ------------------------------------------------------------------ */

static char reply_buf[(6u << 20)];
static struct jout o = { reply_buf, 0, sizeof(reply_buf) };

static void send_reply(void)
{
	ws_send(0x1, o.b, o.n);
	o.n = 0;
}

static void error_reply(const char *code, const char *msg)
{
	jputs(&o, "{\"type\":\"error\",\"data\":{\"message\":");
	jputq(&o, msg, strlen(msg));
	jputs(&o, ",\"code\":\"");
	jputs(&o, code);
	jputs(&o, "\"}}");
	send_reply();
}

/* {"type":"observation","data":{"observation":{...OBS_TAIL},"reward":R,"done":D} */
static void obs_begin(const char *action, const char *output, size_t output_n, int success, const char *error)
{
	jputs(&o, "{\"type\":\"observation\",\"data\":{\"observation\":{\"output\":");
	jputq(&o, output, output_n);
	jputs(&o, success ? ",\"success\":true,\"error\":" : ",\"success\":false,\"error\":");
	jputq(&o, error, strlen(error));
	jputs(&o, ",\"task_id\":");
	jputq(&o, task, strlen(task));
	jputs(&o, ",\"action_type\":\"");
	jputs(&o, action);
	jputs(&o, "\"");
}

static void obs_end(const char *reward, int done)
{
	jputs(&o, "},\"reward\":");
	jputs(&o, reward);
	jputs(&o, done ? ",\"done\":true}}" : ",\"done\":false}}");
	send_reply();
}

/* ---- the session ---------------------------------------------------------------- */

static int episode, step_count;
static char last_action[32] = "";

static void do_reset(const char *data)
{
	static char tid[256], text[65536];
	const char *v = data ? jget(data, "task_id") : NULL;
	if (!v && data)
		v = jget(data, "task_name");
	if (v && (!jstr(v, tid, sizeof(tid)) || strcmp(tid, task) != 0)) {
		error_reply("VALIDATION_ERROR", "task_id: this server serves one task (started with --task)");
		return;
	}
	struct run r;
	run("mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/agent /logs/verifier "
	    "/logs/artifacts", NULL, 0, 30, &r);
	if (r.exit_code != 0) {
		error_reply("EXECUTION_ERROR", "reset: could not make /logs/{agent,verifier,artifacts}");
		return;
	}
	size_t n = 0;
	int f = instr_file ? open(instr_file, O_RDONLY) : -1;
	if (f >= 0) {
		ssize_t k;
		while (n < sizeof(text) && (k = read(f, text + n, sizeof(text) - n)) > 0)
			n += (size_t)k;
		close(f);
	}
	episode = 1, step_count = 0;
	snprintf(last_action, sizeof(last_action), "reset");
	jputs(&o, "{\"type\":\"observation\",\"data\":{\"observation\":{\"instruction\":");
	jputq(&o, text, n);
	jputs(&o, ",\"output\":\"\",\"success\":true,\"error\":\"\",\"task_id\":");
	jputq(&o, task, strlen(task));
	jputs(&o, ",\"action_type\":\"reset\",\"info\":{}");
	obs_end("0.0", 0);
}

/* A step that runs (a rejected one changes nothing, state included). */
static void counted(const char *action)
{
	step_count++;
	snprintf(last_action, sizeof(last_action), "%s", action);
}

static void do_exec(const char *data)
{
	static char cmd[MSG_MAX];
	const char *c = jget(data, "command"), *t = jget(data, "timeout_s");
	double timeout = 0;
	if (!c || !jstr(c, cmd, sizeof(cmd)) || !*cmd) {
		error_reply("VALIDATION_ERROR", "command: expected a non-empty string");
		return;
	}
	if (t && ((timeout = strtod(t, NULL)) <= 0 || !isfinite(timeout))) {
		error_reply("VALIDATION_ERROR", "timeout_s: expected a number > 0");
		return;
	}
	struct run r;
	counted("exec");
	run(cmd, NULL, 0, timeout, &r);
	char err[64] = "";
	if (r.timed_out)
		snprintf(err, sizeof(err), "command timed out");
	else if (r.exit_code)
		snprintf(err, sizeof(err), "exit code %d", r.exit_code);
	obs_begin("exec", out, out_n, !r.timed_out && r.exit_code == 0, err);
	char info[256];
	snprintf(info, sizeof(info), ",\"info\":{\"exit_code\":%d,\"timed_out\":%s,\"truncated\":%s,\"seconds\":%.3f}",
		 r.exit_code, r.timed_out ? "true" : "false", r.truncated ? "true" : "false", r.seconds);
	jputs(&o, info);
	obs_end("null", 0);
}

/* Reads PATH into buf (NUL-terminated). Returns its length, or -1 when absent. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	int f = open(path, O_RDONLY);
	if (f < 0)
		return -1;
	size_t n = 0;
	ssize_t k;
	while (n + 1 < cap && (k = read(f, buf + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	close(f);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* Harbor's reward (docs/tasks.md, "Reward"). Returns 0 with *R, or -1 with WHY. */
static int read_reward(double *rw, const char **source, const char **why)
{
	static char b[65536], key[128];
	if (slurp("/logs/verifier/reward.json", b, sizeof(b)) >= 0) {
		const char *it = b, *v;
		double sum = 0;
		int n = 0, rc, have = 0;
		*source = "reward.json";
		if (!jvalid(b) || *jws(b) != '{') {
			*why = "reward.json is not a JSON object";
			return -1;
		}
		while ((rc = jnext(&it, key, sizeof(key), &v)) == 1) {
			char *e;
			double x = strtod(v, &e);
			if (e == v || !isfinite(x)) {
				*why = "reward.json: every metric must be a finite number";
				return -1;
			}
			if (strcmp(key, "reward") == 0)
				*rw = x, have = 1;
			sum += x, n++;
		}
		if (rc < 0 || n == 0) {
			*why = "reward.json: expected a non-empty flat object of numbers";
			return -1;
		}
		if (!have)
			*rw = sum / n;
		return 0;
	}
	if (slurp("/logs/verifier/reward.txt", b, sizeof(b)) >= 0) {
		char *e;
		*source = "reward.txt";
		*rw = strtod(b, &e);
		if (e == b || !isfinite(*rw) || *jws(e) != '\0') {
			*why = *jws(b) ? "reward.txt is not one number" : "reward.txt is empty";
			return -1;
		}
		return 0;
	}
	*source = "";
	*why = "the verifier wrote no reward (/logs/verifier/reward.txt or reward.json)";
	return -1;
}

static void do_evaluate(void)
{
	static char log[4097];
	struct run r;
	run("rm -rf /logs/verifier && mkdir -p /logs/verifier && chmod 777 /logs/verifier", NULL, 0, 30, &r);
	if (access("/tests/test.sh", F_OK) != 0) {
		obs_begin("evaluate", "", 0, 0, "no verdict: VerifierError: /tests/test.sh is missing (upload tests/ first)");
		jputs(&o, ",\"info\":{\"harness\":\"tests/test.sh\"}");
		obs_end("null", 0);
		return;
	}
	run("chmod +x /tests/test.sh && (/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1", venv, nvenv,
	    verifier_timeout, &r);
	double rw = 0;
	const char *source = "", *why = "";
	int ok = read_reward(&rw, &source, &why) == 0 && !r.timed_out;
	if (r.timed_out)
		why = "tests/test.sh timed out (--verifier-timeout)";
	/* the log's last 4 KiB */
	ssize_t n = slurp("/logs/verifier/test-stdout.txt", out, sizeof(out));
	const char *tail = out;
	if (n > 4096)
		tail = out + n - 4096, n = 4096;
	snprintf(log, sizeof(log), "%.*s", (int)(n > 0 ? n : 0), tail);
	char err[256] = "";
	if (!ok)
		snprintf(err, sizeof(err), "no verdict: VerifierError: %s", why);
	obs_begin("evaluate", log, strlen(log), ok && rw == 1.0, err);
	char info[512];
	snprintf(info, sizeof(info),
		 ",\"info\":{\"harness\":\"tests/test.sh\",\"tests_passed\":%s,\"reward_source\":\"%s\","
		 "\"verifier_exit_code\":%d,\"verifier_timed_out\":%s,\"seconds\":%.3f}",
		 ok && rw == 1.0 ? "true" : "false", source, r.exit_code, r.timed_out ? "true" : "false",
		 r.seconds);
	jputs(&o, info);
	if (!ok) {
		obs_end("null", 0);
		return;
	}
	episode = 0;
	char rs[64];
	snprintf(rs, sizeof(rs), "%.17g", rw);
	obs_end(rs, 1);
}

static void do_state(void)
{
	char b[160];
	jputs(&o, "{\"type\":\"state\",\"data\":{\"episode_id\":null,\"task_id\":");
	jputq(&o, task, strlen(task));
	snprintf(b, sizeof(b), ",\"step_count\":%d,\"episode_active\":%s,\"last_action_type\":\"%s\"}}", step_count,
		 episode ? "true" : "false", last_action);
	jputs(&o, b);
	send_reply();
}

static void message(const char *msg)
{
	static char type[32], action[32];
	const char *t = jget(msg, "type"), *data = jget(msg, "data");
	if (!jvalid(msg) || *jws(msg) != '{') {
		error_reply("INVALID_JSON", "the message is not a JSON object");
		return;
	}
	if (!t || !jstr(t, type, sizeof(type))) {
		error_reply("UNKNOWN_TYPE", "type: expected one of reset, step, state, close");
		return;
	}
	if (strcmp(type, "reset") == 0) {
		do_reset(data && *data == '{' ? data : NULL);
	} else if (strcmp(type, "state") == 0) {
		do_state();
	} else if (strcmp(type, "close") == 0) {
		ws_close(1000);
	} else if (strcmp(type, "step") == 0) {
		const char *a = data && *data == '{' ? jget(data, "action_type") : NULL;
		if (!a || !jstr(a, action, sizeof(action))) {
			error_reply("VALIDATION_ERROR", "data.action_type: expected exec, evaluate or close");
		} else if (!episode) {
			error_reply("EXECUTION_ERROR", "no episode: send reset first");
		} else if (strcmp(action, "exec") == 0) {
			do_exec(data);
		} else if (strcmp(action, "evaluate") == 0) {
			counted("evaluate");
			do_evaluate();
		} else if (strcmp(action, "close") == 0) {
			episode = 0;
			obs_begin("close", "", 0, 1, "");
			obs_end("null", 1);
		} else {
			error_reply("VALIDATION_ERROR", "data.action_type: expected exec, evaluate or close");
		}
	} else {
		error_reply("UNKNOWN_TYPE", "type: expected one of reset, step, state, close");
	}
}

static void session(void)
{
	for (;;) {
		struct frame f;
		while (frame_at(0, &f) != 1)
			if (fill() < 0)
				_exit(0);
		frame_unmask(0, &f);
		unsigned char *p = in + f.hdr;
		if (f.op == 0x9) {
			ws_send(0xA, p, f.len);
		} else if (f.op == 0x8) {
			ws_close(1000);
		} else if (f.op == 0x1 && f.fin) {
			static char msg[MSG_MAX + 1];
			memcpy(msg, p, f.len);
			msg[f.len] = '\0';
			drop(0, f.hdr + f.len);
			message(msg);
			continue;
		} else if (f.op != 0xA) {
			error_reply("INVALID_JSON", "messages are single unfragmented text frames");
		}
		drop(0, f.hdr + f.len);
	}
}

/* ---- HTTP ------------------------------------------------------------------------ */

static void http(void)
{
	static char head[16384];
	size_t n = 0;
	char *e = NULL;
	while (!e && n < sizeof(head) - 1) {
		ssize_t r = read(fd, head + n, sizeof(head) - 1 - n);
		if (r <= 0)
			return;
		n += (size_t)r;
		head[n] = '\0';
		e = strstr(head, "\r\n\r\n");
	}
	if (!e)
		return;
	/* bytes after the head (a client's first frame) stay for the session */
	size_t hl = (size_t)(e + 4 - head);
	memcpy(in, head + hl, n - hl);
	in_n = n - hl;
	char target[1024] = "", key[128] = "";
	sscanf(head, "%*s %1023s", target);
	for (char *l = strstr(head, "\r\n"); l && l < e; l = strstr(l + 2, "\r\n"))
		if (strncasecmp(l + 2, "Sec-WebSocket-Key:", 18) == 0)
			sscanf(l + 20, " %127[^\r ]", key);
	if (strcmp(target, "/health") == 0) {
		const char *r = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n"
				"Connection: close\r\n\r\n{\"status\":\"healthy\"}";
		wr(r, strlen(r));
	} else if (strcmp(target, "/ws") == 0 && *key) {
		char acc[40], resp[256];
		ws_accept(key, acc);
		snprintf(resp, sizeof(resp), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", acc);
		wr(resp, strlen(resp));
		session();
	} else {
		const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n";
		wr(r, strlen(r));
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: envhelper --port N --task ID [--workdir DIR] [--instruction FILE]\n"
			"                 [--verifier-timeout S] [--verifier-env K=V]... [--max-output BYTES]\n");
	return 2;
}

int main(int argc, char **argv)
{
	long port = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return usage();
		if (strcmp(a, "--port") == 0)
			port = strtol(v, NULL, 10);
		else if (strcmp(a, "--task") == 0)
			task = v;
		else if (strcmp(a, "--workdir") == 0)
			workdir = v;
		else if (strcmp(a, "--instruction") == 0)
			instr_file = v;
		else if (strcmp(a, "--verifier-timeout") == 0)
			verifier_timeout = strtod(v, NULL);
		else if (strcmp(a, "--max-output") == 0)
			max_output = strtoul(v, NULL, 10);
		else if (strcmp(a, "--verifier-env") == 0 && strchr(v, '=') && nvenv < 64)
			venv[nvenv++] = argv[i + 1];
		else
			return usage();
		i++;
	}
	if (port <= 0 || port > 65535 || !*task || max_output == 0 || max_output > sizeof(out) - 1 ||
	    verifier_timeout <= 0)
		return usage();
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigaction(SIGPIPE, &ign, NULL);
	sigaction(SIGCHLD, &ign, NULL); /* connection children reap themselves */
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 64) < 0) {
		fprintf(stderr, "envhelper: listen on port %ld: %s\n", port, strerror(errno));
		return 1;
	}
	fprintf(stderr, "envhelper: task %s, listening on 0.0.0.0:%ld\n", task, port);
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		if (fork() == 0) {
			struct sigaction dfl = { .sa_handler = SIG_DFL };
			sigaction(SIGCHLD, &dfl, NULL); /* run() waits for its commands */
			close(s);
			fd = c;
			http();
			_exit(0);
		}
		close(c);
	}
}
