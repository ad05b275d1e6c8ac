/* SPDX-License-Identifier: MIT */
/*
 * `sbx pool start|stop|ls`: cross-process warm pools (xpool.h). `start` forks
 * a keeper that holds the pool's lock for its whole life, creates sandboxes
 * until N are ready, and refills as takers rename them away (inotify on
 * ready/). SIGTERM (`sbx pool stop`) makes it claim what is still ready the
 * way a taker does and destroy it, so it never races a taker for one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/runtime_int.h"
#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/str.h"
#include "cli.h"
#include "opts.h"
#include "xpool.h"

static const char pool_help[] =
	"usage: sbx pool start [-n N] [SPEC OPTIONS] IMAGE\n"
	"       sbx pool stop NAME... | --all\n"
	"       sbx pool ls [--json]\n\n"
	"Warm pools shared by every sbx process on this state dir. 'start' runs a small\n"
	"keeper process (in the background; it returns once the pool is full and prints\n"
	"the pool's NAME) that keeps N sandboxes of IMAGE and the spec ready. 'sbx run'\n"
	"and 'sbx create' with the same IMAGE and spec options take one of them instead\n"
	"of creating (each at most once, never reused); the keeper refills behind them.\n"
	"'stop' destroys what the pool holds and ends its keeper. A keeper killed\n"
	"otherwise leaves its idle sandboxes to 'sbx gc'.\n\noptions (start):\n"
	"  -n N               sandboxes kept ready (1..256, default 4)\n"
	"  --wait DUR         give up when the pool is not full after DUR (default 2m)\n";

#define REFILL_RETRY_S 1.0
#define MAX_FAILS 3

/* Ready sandboxes now (names without a leading dot). */
static unsigned count_ready(const char *ready)
{
	DIR *d = opendir(ready);
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* The host pid of a sandbox's init (0 when unknown): its own row, not a
 * listing of every sandbox (that cost the keeper ~28 us per sandbox kept, at
 * every refill). */
static pid_t init_of(sbx_sandbox *sb)
{
	sbx_sandbox_info *i = NULL;
	if (sbx_sandbox_info_get(&i, sb, NULL) < 0)
		return 0;
	pid_t pid = i->pid;
	sbx_sandbox_info_free(i, 1);
	return pid;
}

/* One more ready sandbox. Its record, written whole before it appears
 * (names with a leading dot are never taken), holds its init's pid and
 * start time: the taker of `sbx run` kills it by them (xpool_hand_off). */
static int make_one(sbx_runtime *rt, const sbx_sandbox_opts *o, const char *ready, sbx_error **err)
{
	sbx_sandbox *sb = NULL;
	int r = sbx_sandbox_create(&sb, rt, o, err);
	if (r < 0)
		return r;
	const char *id = sbx_sandbox_id(sb);
	/* Its taker's first exec pays nothing more; one dead already is not kept. */
	if (sbx__sandbox_warm(sb) == -ESRCH) {
		r = sbx_error_set(err, -ESRCH, "pool: sandbox %s died before it was ready", id);
		sbx_sandbox_destroy(sb, NULL);
		sbx_sandbox_free(sb);
		return r;
	}
	pid_t pid = init_of(sb);
	_cleanup_free_ char *tmp = xasprintf("%s/.%s", ready, id);
	_cleanup_free_ char *rec = xasprintf("%s/%s", ready, id);
	_cleanup_free_ char *line = xasprintf("%d %llu\n", (int)pid, pid > 0 ? xpool_starttime(pid) : 0ULL);
	r = sbx__write_file_atomic(tmp, line, strlen(line), 0600, err);
	if (r == 0 && rename(tmp, rec) < 0)
		r = sbx_error_setsys(err, -errno, errno, "pool: record %s", rec);
	sbx_sandbox_free(sb);
	return r;
}

/* Finishes the teardown of what takers killed (xpool_hand_off). */
static void reap_dead(sbx_runtime *rt, const char *dir)
{
	_cleanup_free_ char *dead = xasprintf("%s/dead", dir);
	DIR *d = opendir(dead);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		sbx_error *err = NULL;
		if (sbx_sandbox_destroy_id(rt, NULL, e->d_name, &err) < 0 && err && err->code != -ENOENT)
			fprintf(stderr, "sbx pool: destroy %s: %s\n", e->d_name, err->msg);
		sbx_error_free(err);
		_cleanup_free_ char *p = xasprintf("%s/%s", dead, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
}

/* Claims every ready sandbox as a taker would, and destroys it. */
static void drain(sbx_runtime *rt, const char *dir)
{
	_cleanup_free_ char *ready = xasprintf("%s/ready", dir);
	DIR *d = opendir(ready);
	struct dirent *e;
	pid_t me = getpid();
	unsigned long long start = xpool_starttime(me);
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *from = xasprintf("%s/%s", ready, e->d_name);
		_cleanup_free_ char *to = xasprintf("%s/taken/%s.%d.%llu", dir, e->d_name, (int)me, start);
		if (rename(from, to) < 0)
			continue;
		sbx_error *err = NULL;
		if (sbx_sandbox_destroy_id(rt, NULL, e->d_name, &err) < 0 && err && err->code != -ENOENT)
			fprintf(stderr, "sbx pool: destroy %s: %s\n", e->d_name, err->msg);
		sbx_error_free(err);
		unlink(to);
	}
	if (d)
		closedir(d);
}

static void report(int fd, const char *msg)
{
	if (fd >= 0) {
		(void)!write(fd, msg, strlen(msg));
		close(fd);
	}
}

/* The keeper: never returns. status_fd gets "ok" once full, or why not. */
static _Noreturn void keeper(const char *dir, sbx_sandbox_opts *o, unsigned size, int status_fd,
			    int lock)
{
	(void)lock; /* held until we exit */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	int sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	_cleanup_free_ char *ready = xasprintf("%s/ready", dir);
	_cleanup_free_ char *dead = xasprintf("%s/dead", dir);
	int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ino >= 0 && (inotify_add_watch(ino, ready, IN_MOVED_FROM | IN_DELETE) < 0 ||
			 inotify_add_watch(ino, dead, IN_MOVED_TO) < 0)) {
		close(ino);
		ino = -1; /* then it looks every 100 ms */
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt || sfd < 0) {
		report(status_fd, "cannot open the runtime");
		_exit(EXIT_ENV);
	}
	unsigned fails = 0;
	int stop = 0;
	while (!stop) {
		reap_dead(rt, dir);
		unsigned n = count_ready(ready);
		sbx_error *err = NULL;
		double wait_s = -1;
		if (n < size) {
			if (make_one(rt, o, ready, &err) < 0) {
				if (++fails >= MAX_FAILS && status_fd >= 0) {
					_cleanup_free_ char *m = xasprintf("%s", err && err->msg ? err->msg : "create failed");
					report(status_fd, m);
					status_fd = -1;
					stop = 2;
				}
				sbx_error_free(err);
				wait_s = REFILL_RETRY_S;
			} else {
				fails = 0;
				wait_s = 0;
			}
		} else if (status_fd >= 0) {
			report(status_fd, "ok");
			status_fd = -1;
		}
		struct pollfd pf[2] = { { .fd = sfd, .events = POLLIN }, { .fd = ino, .events = POLLIN } };
		int k = poll(pf, ino >= 0 ? 2 : 1, wait_s < 0 ? (ino >= 0 ? -1 : 100) : (int)(wait_s * 1000));
		if (k > 0 && pf[0].revents)
			stop = 1;
		if (k > 0 && ino >= 0 && pf[1].revents) {
			char buf[4096];
			while (read(ino, buf, sizeof(buf)) > 0)
				;
		}
	}
	drain(rt, dir);
	reap_dead(rt, dir);
	sbx_runtime_free(rt);
	_cleanup_free_ char *info = xasprintf("%s/info.json", dir);
	unlink(info);
	_cleanup_free_ char *taken = xasprintf("%s/taken", dir);
	/* Emptied by their takers as they finish; the dirs stay while in use.
	 * The lock's path goes last (a starter checks that the file it locked
	 * is still the one at the path), its flock when we exit. */
	rmdir(ready);
	rmdir(taken);
	rmdir(dead);
	_cleanup_free_ char *logp = xasprintf("%s/keeper.log", dir);
	_cleanup_free_ char *lockp = xasprintf("%s/keeper.lock", dir);
	unlink(logp);
	unlink(lockp);
	rmdir(dir);
	_exit(stop == 2 ? EXIT_FAIL : EXIT_OK);
}

static int write_info(const char *dir, const char *name, const char *image, unsigned size, pid_t pid)
{
	json_t *j = json_pack("{s:s, s:s, s:i, s:i}", "name", name, "image", image, "size", (int)size,
			      "keeper", (int)pid);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	_cleanup_free_ char *p = xasprintf("%s/info.json", dir);
	int r = s ? sbx__write_file_atomic(p, s, strlen(s), 0600, NULL) : -ENOMEM;
	free(s);
	return r;
}

static int pool_start(int argc, char **argv)
{
	struct spec_flags f;
	spec_flags_init(&f);
	unsigned long size = 4;
	double wait_s = 120;
	int i, code = EXIT_USAGE;
	char *dir = NULL, *ready = NULL, *taken = NULL, *dead = NULL, *lockp = NULL, *label = NULL;
	for (i = 2; i < argc && argv[i][0] == '-'; i++) {
		if (cli_is_help(argv[i])) {
			printf("%s", pool_help);
			spec_flags_print_help(stdout);
			code = EXIT_OK;
			goto out;
		}
		int c = spec_flag(&f, "pool start", argc, argv, &i);
		if (c == EXIT_USAGE)
			goto out;
		if (c == 1)
			continue;
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		if (!strcmp(argv[i], "-n") && v) {
			size = strtoul(v, &end, 10);
			if (!*v || *end || size < 1 || size > 256) {
				code = cli_usage_error("pool start", "-n '%s': expected a number from 1 to 256", v);
				goto out;
			}
			i++;
		} else if (!strcmp(argv[i], "--wait") && v) {
			if (sbx__parse_duration(&wait_s, v) < 0 || wait_s <= 0) {
				code = cli_usage_error("pool start", "--wait '%s': expected a duration like 30s", v);
				goto out;
			}
			i++;
		} else {
			code = cli_usage_error("pool start", "unknown option %s", argv[i]);
			goto out;
		}
	}
	if (i != argc - 1) {
		code = cli_usage_error("pool start", i >= argc ? "missing IMAGE" : "unexpected argument %s",
				       i >= argc ? "" : argv[i + 1]);
		goto out;
	}
	if (f.o.ttl_s) {
		code = cli_usage_error("pool start", "--ttl: a pool's sandboxes have none (a taker's --ttl applies)");
		goto out;
	}
	f.o.image = argv[i];
	char name[17];
	xpool_name(name, &f.o);
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		code = EXIT_ENV;
		goto out;
	}
	dir = xpool_path(rt, name, NULL);
	ready = xpool_path(rt, name, "ready");
	taken = xpool_path(rt, name, "taken");
	dead = xpool_path(rt, name, "dead");
	lockp = xpool_path(rt, name, "keeper.lock");
	sbx_runtime_free(rt);
	sbx_error *err = NULL;
	if (sbx__mkdir_p(dir, 0700, &err) < 0) {
		code = cli_fail("pool start", err);
		goto out;
	}
	/* The lock first: a keeper on its way out removes the dirs. */
	int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct stat a, b;
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0 || fstat(lock, &a) < 0 || stat(lockp, &b) < 0 ||
	    a.st_ino != b.st_ino) {
		fprintf(stderr, "sbx pool start: pool %s (%s) is kept already, or its keeper is stopping "
				"(sbx pool ls)\n", name, f.o.image);
		if (lock >= 0)
			close(lock);
		code = EXIT_FAIL;
		goto out;
	}
	if (sbx__mkdir_p(ready, 0700, &err) < 0 || sbx__mkdir_p(taken, 0700, &err) < 0 ||
	    sbx__mkdir_p(dead, 0700, &err) < 0) {
		close(lock);
		code = cli_fail("pool start", err);
		goto out;
	}
	/* The spec's sandboxes: detached (they outlive a taker's hand-out),
	 * labelled with the pool for `sbx gc`. */
	label = xasprintf("%s=%s", XPOOL_LABEL, name);
	sbx__strv_push(&f.labels, label);
	f.o.labels = (const char *const *)f.labels;
	f.o.detach = 1;
	int st[2];
	if (pipe2(st, O_CLOEXEC) < 0) {
		close(lock);
		code = EXIT_FAIL;
		goto out;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(st[0]);
		setsid();
		(void)!chdir("/"); /* pins no directory of the starter's */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		_cleanup_free_ char *logp = xasprintf("%s/keeper.log", dir);
		int log = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		dup2(null, 0);
		dup2(null, 1);
		dup2(log >= 0 ? log : null, 2);
		/* A second fork: the keeper is nobody's child, init reaps it. */
		if (fork() != 0)
			_exit(0);
		write_info(dir, name, f.o.image, (unsigned)size, getpid());
		keeper(dir, &f.o, (unsigned)size, st[1], lock);
	}
	close(st[1]);
	close(lock);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	char msg[1024];
	struct pollfd pf = { .fd = st[0], .events = POLLIN };
	ssize_t n = pid > 0 && poll(&pf, 1, (int)(wait_s * 1000)) > 0 ? read(st[0], msg, sizeof(msg) - 1) : -1;
	close(st[0]);
	msg[n > 0 ? n : 0] = '\0';
	if (n == 2 && !memcmp(msg, "ok", 2)) {
		printf("%s\n", name);
		code = EXIT_OK;
	} else {
		fprintf(stderr, "sbx pool start: pool %s (%s): %s\n", name, f.o.image,
			n > 0 ? msg : n == 0 ? "the keeper died (see its keeper.log)" : "not full within --wait; its keeper goes on filling it (sbx pool ls, sbx pool stop NAME)");
		code = EXIT_FAIL;
	}
out:
	free(dir);
	free(ready);
	free(taken);
	free(dead);
	free(lockp);
	free(label);
	spec_flags_free(&f);
	return code;
}

/* The keeper's pid from info.json, 0 when unknown. */
static pid_t keeper_pid(const char *dir, json_t **info)
{
	_cleanup_free_ char *p = xasprintf("%s/info.json", dir);
	json_t *j = json_load_file(p, 0, NULL);
	pid_t pid = j ? (pid_t)json_integer_value(json_object_get(j, "keeper")) : 0;
	if (info)
		*info = j;
	else
		json_decref(j);
	return pid;
}

static int stop_one(sbx_runtime *rt, const char *name)
{
	_cleanup_free_ char *dir = xpool_path(rt, name, NULL);
	if (!xpool_keeper_alive(dir)) {
		fprintf(stderr, "sbx pool stop: no pool %s is kept ('sbx gc' collects a dead keeper's sandboxes)\n",
			name);
		return EXIT_NOTFOUND;
	}
	pid_t pid = keeper_pid(dir, NULL);
	if (pid <= 0 || kill(pid, SIGTERM) < 0) {
		fprintf(stderr, "sbx pool stop: pool %s: keeper pid unknown\n", name);
		return EXIT_FAIL;
	}
	/* It holds its lock until it destroyed what it held. */
	_cleanup_free_ char *lockp = xasprintf("%s/keeper.lock", dir);
	_cleanup_close_ int fd = open(lockp, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		flock(fd, LOCK_SH);
	unlink(lockp);
	_cleanup_free_ char *logp = xasprintf("%s/keeper.log", dir);
	unlink(logp);
	rmdir(dir);
	printf("%s\n", name);
	return EXIT_OK;
}

/* Pool names under <state>/xpool (owned strv). */
static char **pool_names(sbx_runtime *rt)
{
	_cleanup_free_ char *root = xpool_path(rt, NULL, NULL);
	char **v = NULL;
	DIR *d = opendir(root);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			sbx__strv_push(&v, e->d_name);
	if (d)
		closedir(d);
	return v;
}

static int pool_stop(int argc, char **argv)
{
	int all = argc == 3 && !strcmp(argv[2], "--all");
	if (argc < 3 || (argc == 3 && cli_is_help(argv[2]))) {
		printf("%s", pool_help);
		return argc < 3 ? EXIT_USAGE : EXIT_OK;
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	char **names = all ? pool_names(rt) : NULL;
	int code = EXIT_OK;
	for (int i = 0; all ? names && names[i] : i + 2 < argc; i++) {
		const char *n = all ? names[i] : argv[i + 2];
		if (strlen(n) != 16 || strspn(n, "0123456789abcdef") != 16) {
			code = cli_usage_error("pool stop", "'%s': expected a pool NAME (16 hex digits, sbx pool ls)", n);
			break;
		}
		_cleanup_free_ char *dir = xpool_path(rt, n, NULL);
		if (all && !xpool_keeper_alive(dir))
			continue;
		int c = stop_one(rt, n);
		if (c)
			code = c;
	}
	sbx__strv_free(names);
	sbx_runtime_free(rt);
	return code;
}

static int pool_ls(int argc, char **argv)
{
	int json = argc > 2 && !strcmp(argv[2], "--json");
	if (argc > 2 && !json) {
		if (cli_is_help(argv[2])) {
			printf("%s", pool_help);
			return EXIT_OK;
		}
		return cli_usage_error("pool ls", "unknown argument %s", argv[2]);
	}
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_ENV;
	char **names = pool_names(rt);
	json_t *arr = json_array();
	if (!json)
		printf("%-16s  %-24s  %5s  %5s  %s\n", "NAME", "IMAGE", "READY", "SIZE", "KEEPER");
	for (size_t i = 0; names && names[i]; i++) {
		_cleanup_free_ char *dir = xpool_path(rt, names[i], NULL);
		_cleanup_free_ char *ready = xpool_path(rt, names[i], "ready");
		json_t *info = NULL;
		pid_t pid = keeper_pid(dir, &info);
		int alive = xpool_keeper_alive(dir);
		const char *image = json_string_value(json_object_get(info, "image"));
		int size = (int)json_integer_value(json_object_get(info, "size"));
		unsigned n = count_ready(ready);
		if (json)
			json_array_append_new(arr, json_pack("{s:s, s:s?, s:i, s:i, s:i, s:b}", "name", names[i],
							     "image", image, "ready", (int)n, "size", size, "keeper",
							     (int)pid, "alive", alive));
		else
			printf("%-16s  %-24s  %5u  %5d  %d%s\n", names[i], image ? image : "?", n, size, (int)pid,
			       alive ? "" : " (dead: sbx gc)");
		json_decref(info);
	}
	if (json) {
		char *s = json_dumps(arr, JSON_INDENT(2));
		printf("%s\n", s ? s : "[]");
		free(s);
	}
	json_decref(arr);
	sbx__strv_free(names);
	sbx_runtime_free(rt);
	return EXIT_OK;
}

int cmd_pool(int argc, char **argv)
{
	if (argc < 2 || cli_is_help(argv[1])) {
		printf("%s", pool_help);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (!strcmp(argv[1], "start"))
		return pool_start(argc, argv);
	if (!strcmp(argv[1], "stop"))
		return pool_stop(argc, argv);
	if (!strcmp(argv[1], "ls"))
		return pool_ls(argc, argv);
	return cli_usage_error("pool", "unknown subcommand '%s' (start, stop, ls)", argv[1]);
}
