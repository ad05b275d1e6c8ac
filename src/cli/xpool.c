/* SPDX-License-Identifier: MIT */
/*
 * Cross-process warm pools, the taker's side (xpool.h): finding the pool of a
 * spec, claiming a ready sandbox with one rename(2) (two takers never get the
 * same one: the second rename fails with ENOENT), and the rules `sbx gc`
 * applies to pooled sandboxes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/runtime_int.h"
#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/sha256.h"
#include "../util/str.h"
#include "xpool.h"

void xpool_name(char out[17], const sbx_sandbox_opts *o)
{
	sbx_sandbox_opts k = *o;
	k.ttl_s = 0;
	k.detach = 0;
	k.provider = NULL;
	/* With the labels a create here would add (sbx.launcher, sbx.run_id):
	 * a taker of another run id must not get a sandbox labelled with the
	 * keeper's, or `sbx gc --run-id` would miss it. */
	char **labels = sbx__create_labels(o, NULL);
	_cleanup_free_ char *key = sbx__pool_key(o->provider ? o->provider : "-", &k, labels);
	sbx__strv_free(labels);
	char hex[SBX_SHA256_HEX_LEN + 1];
	sbx__sha256_hex(hex, key, strlen(key));
	memcpy(out, hex, 16);
	out[16] = '\0';
}

char *xpool_path(sbx_runtime *rt, const char *name, const char *sub)
{
	const char *st = sbx_runtime_state_dir(rt);
	if (!name)
		return xasprintf("%s/xpool", st);
	return sub ? xasprintf("%s/xpool/%s/%s", st, name, sub) : xasprintf("%s/xpool/%s", st, name);
}

unsigned long long xpool_starttime(pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *s = strrchr(buf, ')'); /* the name may hold spaces and parens */
	if (!s)
		return 0;
	/* Field 22 is the start time; the text after ')' begins at field 3. */
	for (int f = 2; f < 22 && s; f++)
		s = strchr(s + 1, ' ');
	return s ? strtoull(s + 1, NULL, 10) : 0;
}

int xpool_alive(pid_t pid, unsigned long long start)
{
	if (pid <= 0)
		return 0;
	unsigned long long now = xpool_starttime(pid);
	return now && (!start || now == start);
}

int xpool_keeper_alive(const char *pool_dir)
{
	_cleanup_free_ char *p = xasprintf("%s/keeper.lock", pool_dir);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	return flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

/* "<init pid> <init start>" of a ready record. */
static void read_init(struct xpool_taken *t)
{
	char buf[64];
	_cleanup_close_ int fd = open(t->record, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = '\0';
	int pid = 0;
	if (sscanf(buf, "%d %llu", &pid, &t->init_start) == 2 && pid > 0)
		t->init = pid;
}

int xpool_take(sbx_sandbox **sb, struct xpool_taken *t, sbx_runtime *rt, const sbx_sandbox_opts *o)
{
	memset(t, 0, sizeof(*t));
	char name[17];
	xpool_name(name, o);
	_cleanup_free_ char *ready = xpool_path(rt, name, "ready");
	DIR *d = opendir(ready); /* no pool: one failed open */
	if (!d)
		return 0;
	_cleanup_free_ char *taken = xpool_path(rt, name, "taken");
	pid_t me = getpid();
	unsigned long long start = xpool_starttime(me);
	struct dirent *e;
	int got = 0;
	while (!got && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char *from = xasprintf("%s/%s", ready, e->d_name);
		char *to = xasprintf("%s/%s.%d.%llu", taken, e->d_name, (int)me, start);
		if (rename(from, to) == 0) {
			sbx_error *err = NULL;
			/* Gone meanwhile (`sbx gc --all`): drop it, take the next. */
			if (sbx_sandbox_open(sb, rt, o->provider, e->d_name, &err) == 0) {
				t->record = steal_ptr(&to);
				t->dead = xasprintf("%s/xpool/%s/dead/%s", sbx_runtime_state_dir(rt), name, e->d_name);
				read_init(t);
				got = 1;
			} else {
				sbx_error_free(err);
				unlink(to);
			}
		}
		free(from);
		free(to);
	}
	closedir(d);
	return got;
}

void xpool_give(struct xpool_taken *t, sbx_runtime *rt, const char *id)
{
	if (!t->record)
		return;
	_cleanup_free_ char *dir = xpool_path(rt, ".given", NULL);
	mkdir(dir, 0700);
	_cleanup_free_ char *to = xasprintf("%s/%s", dir, id);
	if (rename(t->record, to) < 0)
		unlink(t->record);
	free(t->record);
	free(t->dead);
	t->record = t->dead = NULL;
}

void xpool_done(struct xpool_taken *t)
{
	if (t->record)
		unlink(t->record);
	free(t->record);
	free(t->dead);
	t->record = t->dead = NULL;
}

int xpool_hand_off(struct xpool_taken *t)
{
	if (!t->record || t->init <= 0)
		return -1;
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, t->init, 0);
	/* The pidfd pins the process: checked once, it cannot be another. */
	if (pfd < 0 || xpool_starttime(t->init) != t->init_start ||
	    syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) < 0)
		return -1;
	/* Killed: nothing of it runs any more. The keeper (inotify on dead/)
	 * or `sbx gc` does the rest. */
	if (rename(t->record, t->dead) < 0)
		return -1; /* the caller's destroy finishes it */
	free(t->record);
	free(t->dead);
	t->record = t->dead = NULL;
	return 0;
}

/* taken/<id>.<pid>.<start> of `id`, or NULL. */
static char *find_taken(const char *taken, const char *id, pid_t *pid, unsigned long long *start)
{
	DIR *d = opendir(taken);
	if (!d)
		return NULL;
	size_t n = strlen(id);
	char *found = NULL;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL) {
		int p = 0;
		unsigned long long s = 0;
		if (strncmp(e->d_name, id, n) || e->d_name[n] != '.' ||
		    sscanf(e->d_name + n, ".%d.%llu", &p, &s) != 2)
			continue;
		*pid = p;
		*start = s;
		found = xasprintf("%s/%s", taken, e->d_name);
	}
	closedir(d);
	return found;
}

int xpool_orphan(sbx_runtime *rt, const sbx_sandbox_info *i, int dry)
{
	const char *name = NULL;
	size_t ln = strlen(XPOOL_LABEL);
	for (size_t k = 0; i->labels && i->labels[k]; k++)
		if (!strncmp(i->labels[k], XPOOL_LABEL, ln) && i->labels[k][ln] == '=')
			name = i->labels[k] + ln + 1;
	if (!name || !*name || strchr(name, '/') || name[0] == '.')
		return -1;
	_cleanup_free_ char *given = xasprintf("%s/xpool/.given/%s", sbx_runtime_state_dir(rt), i->id);
	if (access(given, F_OK) == 0)
		return 0;
	_cleanup_free_ char *dir = xpool_path(rt, name, NULL);
	_cleanup_free_ char *taken = xpool_path(rt, name, "taken");
	_cleanup_free_ char *ready = xasprintf("%s/ready/%s", dir, i->id);
	_cleanup_free_ char *dead = xasprintf("%s/dead/%s", dir, i->id);
	if (access(dead, F_OK) == 0) {
		if (!dry)
			unlink(dead);
		return 1; /* killed by its taker, its cleanup left undone */
	}
	pid_t pid = 0;
	unsigned long long start = 0;
	_cleanup_free_ char *rec = find_taken(taken, i->id, &pid, &start);
	if (rec) {
		if (xpool_alive(pid, start))
			return 0;
		if (!dry)
			unlink(rec);
		return 1;
	}
	/* Ready, or made and not yet recorded: the keeper's. */
	if (xpool_keeper_alive(dir))
		return 0;
	if (!dry)
		unlink(ready);
	return 1;
}

static int listed(const sbx_sandbox_info *v, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].id, id))
			return 1;
	return 0;
}

/* Unlinks the entries of dir whose id (up to a '.') is not in v. */
static void prune(const char *dir, const sbx_sandbox_info *v, size_t n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char id[256];
		snprintf(id, sizeof(id), "%s", e->d_name);
		char *dot = strchr(id, '.');
		if (dot)
			*dot = '\0';
		if (!listed(v, n, id)) {
			_cleanup_free_ char *p = xasprintf("%s/%s", dir, e->d_name);
			unlink(p);
		}
	}
	if (d)
		closedir(d);
}

void xpool_sweep(sbx_runtime *rt, const sbx_sandbox_info *v, size_t n)
{
	_cleanup_free_ char *root = xpool_path(rt, NULL, NULL);
	_cleanup_free_ char *given = xpool_path(rt, ".given", NULL);
	prune(given, v, n);
	DIR *d = opendir(root);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *dir = xpool_path(rt, e->d_name, NULL);
		if (xpool_keeper_alive(dir))
			continue;
		_cleanup_free_ char *ready = xpool_path(rt, e->d_name, "ready");
		_cleanup_free_ char *taken = xpool_path(rt, e->d_name, "taken");
		_cleanup_free_ char *dead = xpool_path(rt, e->d_name, "dead");
		prune(ready, v, n);
		prune(taken, v, n);
		prune(dead, v, n);
		/* A dead keeper's pool with nothing left in use goes. */
		if ((rmdir(ready) == 0 || errno == ENOENT) && (rmdir(dead) == 0 || errno == ENOENT) &&
		    (rmdir(taken) == 0 || errno == ENOENT))
			sbx__rm_rf(dir, NULL);
	}
	if (d)
		closedir(d);
}
