/* SPDX-License-Identifier: MIT */
/*
 * User resolution inside the sandbox, reading its own /etc/passwd and
 * /etc/group (a static binary has no NSS, and the host's databases are the
 * wrong ones anyway).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "init.h"

/* A line reader over read(2) with a static buffer: stdio's FILE buffer is
 * an mmap/munmap pair per file in musl, and an munmap in a process that ran
 * on several CPUs costs a TLB shootdown. Lines longer than the line buffer
 * are cut (passwd and group lines are short). */
struct lines {
	int fd;
	size_t len, off, total;
	char buf[16384];
};

/* The sandbox owns these files: one it made huge would stall every exec. */
#define LINES_MAX_BYTES (4u << 20)

/* One reader for all three lookups: they run one after the other. */
static struct lines f;

/* The sandbox controls these files: a FIFO or a device in their place
 * must neither block init (O_NONBLOCK) nor be read (regular files only). */
static int lines_open(struct lines *l, const char *path)
{
	l->len = l->off = l->total = 0;
	l->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (l->fd < 0)
		return -errno;
	struct stat st;
	if (fstat(l->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(l->fd);
		l->fd = -1;
		return -EINVAL;
	}
	return 0;
}

static void lines_close(struct lines *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static int next_line(struct lines *l, char *out, size_t n)
{
	size_t k = 0;
	for (;;) {
		if (l->off == l->len) {
			ssize_t r = l->fd >= 0 && l->total < LINES_MAX_BYTES ? read(l->fd, l->buf, sizeof(l->buf)) : 0;
			if (r > 0)
				l->total += (size_t)r;
			if (r <= 0) {
				out[k] = '\0';
				return k > 0;
			}
			l->len = (size_t)r;
			l->off = 0;
		}
		char c = l->buf[l->off++];
		if (c == '\n') {
			out[k] = '\0';
			return 1;
		}
		if (k + 1 < n)
			out[k++] = c;
	}
}

static int is_num(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* Splits a passwd/group line into up to n fields in place. */
static int split(char *line, char **f, int n)
{
	int k = 0;
	line[strcspn(line, "\n")] = '\0';
	f[k++] = line;
	for (char *p = line; *p && k < n; p++)
		if (*p == ':') {
			*p = '\0';
			f[k++] = p + 1;
		}
	return k;
}

static int find_group(const char *name_or_id, gid_t *gid)
{
	if (is_num(name_or_id)) {
		*gid = (gid_t)strtoul(name_or_id, NULL, 10);
		return 0;
	}
	if (lines_open(&f, "/etc/group") < 0)
		return -ENOENT;
	char line[4096];
	int r = -ENOENT;
	while (next_line(&f, line, sizeof(line))) {
		char *fl[4];
		if (split(line, fl, 4) >= 3 && strcmp(fl[0], name_or_id) == 0) {
			*gid = (gid_t)strtoul(fl[2], NULL, 10);
			r = 0;
			break;
		}
	}
	lines_close(&f);
	return r;
}

static void supplementary(struct init_user *u, const char *name)
{
	u->n_groups = 0;
	u->groups[u->n_groups++] = u->gid;
	f.fd = -1;
	if (!name || lines_open(&f, "/etc/group") < 0)
		goto out;
	char line[4096];
	while (next_line(&f, line, sizeof(line)) && u->n_groups < 64) {
		char *fl[4];
		if (split(line, fl, 4) < 4)
			continue;
		gid_t g = (gid_t)strtoul(fl[2], NULL, 10);
		char *rest = fl[3], *m;
		while ((m = strsep(&rest, ",")) != NULL)
			if (strcmp(m, name) == 0 && g != u->gid && u->n_groups < 64)
				u->groups[u->n_groups++] = g;
	}
out:
	lines_close(&f);
}

/* Identity of /etc/passwd and /etc/group: a change (rename over, edit,
 * removal) invalidates the cached resolution. */
struct files_id {
	struct stat st[2];
	int present[2];
};

static void files_id(struct files_id *id)
{
	static const char *const paths[2] = { "/etc/passwd", "/etc/group" };
	memset(id, 0, sizeof(*id));
	for (int i = 0; i < 2; i++)
		id->present[i] = stat(paths[i], &id->st[i]) == 0;
}

static int same_files(const struct files_id *a, const struct files_id *b)
{
	for (int i = 0; i < 2; i++) {
		const struct stat *x = &a->st[i], *y = &b->st[i];
		if (a->present[i] != b->present[i])
			return 0;
		if (a->present[i] && (x->st_dev != y->st_dev || x->st_ino != y->st_ino || x->st_size != y->st_size ||
				      x->st_mtim.tv_sec != y->st_mtim.tv_sec ||
				      x->st_mtim.tv_nsec != y->st_mtim.tv_nsec ||
				      x->st_ctim.tv_sec != y->st_ctim.tv_sec ||
				      x->st_ctim.tv_nsec != y->st_ctim.tv_nsec))
			return 0;
	}
	return 1;
}

static int resolve(struct init_user *u, const char *spec, char *msg, size_t msglen);

static int settled(const struct files_id *id)
{
	struct timespec now;
	/* Not the vDSO: its pages would be first-touch faults here. */
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &now);
	double t = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
	for (int i = 0; i < 2; i++) {
		const struct stat *st = &id->st[i];
		double m = (double)st->st_mtim.tv_sec + (double)st->st_mtim.tv_nsec / 1e9;
		double c = (double)st->st_ctim.tv_sec + (double)st->st_ctim.tv_nsec / 1e9;
		if (id->present[i] && (t - m < 0.05 || t - c < 0.05))
			return 0;
	}
	return 1;
}

/* Every exec resolves its user; the answer only changes with the files, so
 * the last one is kept and revalidated with two stat() calls instead of
 * parsing both files again. */
int init_user_resolve(struct init_user *u, const char *spec, char *msg, size_t msglen)
{
	static struct {
		int valid;
		char spec[256];
		struct files_id files;
		struct init_user user;
	} cache;
	if (!spec || !*spec)
		spec = "root";
	struct files_id now;
	files_id(&now);
	if (cache.valid && strcmp(cache.spec, spec) == 0 && same_files(&cache.files, &now)) {
		*u = cache.user;
		return 0;
	}
	int r = resolve(u, spec, msg, msglen);
	/* Like git's racy index: a file changed within the last 50 ms could
	 * change again without a visible mtime step, so it is not cached. */
	cache.valid = r == 0 && strlen(spec) < sizeof(cache.spec) && settled(&now);
	if (cache.valid) {
		snprintf(cache.spec, sizeof(cache.spec), "%s", spec);
		cache.files = now;
		cache.user = *u;
	}
	return r;
}

static int resolve(struct init_user *u, const char *spec, char *msg, size_t msglen)
{
	char buf[256];
	if (strlen(spec) >= sizeof(buf)) {
		init_fmt(msg, msglen, "user '%.32s...' too long", spec);
		return -EINVAL;
	}
	memcpy(buf, spec, strlen(spec) + 1);
	char *grp = strchr(buf, ':');
	if (grp)
		*grp++ = '\0';
	memset(u, 0, sizeof(*u));
	snprintf(u->home, sizeof(u->home), "/");
	int found = 0;
	char name[128] = "";
	if (lines_open(&f, "/etc/passwd") == 0) {
		char line[4096];
		while (next_line(&f, line, sizeof(line))) {
			char *fl[7];
			if (split(line, fl, 7) < 6)
				continue;
			if (is_num(buf) ? strcmp(fl[2], buf) == 0 : strcmp(fl[0], buf) == 0) {
				u->uid = (uid_t)strtoul(fl[2], NULL, 10);
				u->gid = (gid_t)strtoul(fl[3], NULL, 10);
				snprintf(u->home, sizeof(u->home), "%s", fl[5]);
				snprintf(name, sizeof(name), "%s", fl[0]);
				found = 1;
				break;
			}
		}
		lines_close(&f);
	}
	if (!found && strcmp(buf, "root") == 0) {
		/* Images without /etc/passwd (FROM scratch, distroless, a bare
		 * rootfs) still have a root, as in Docker. */
		u->uid = 0;
		u->gid = 0;
		snprintf(u->home, sizeof(u->home), "/root");
	} else if (!found) {
		if (!is_num(buf)) {
			init_fmt(msg, msglen, "user '%s' not found in the sandbox's /etc/passwd", buf);
			return -ENOENT;
		}
		u->uid = (uid_t)strtoul(buf, NULL, 10);
		u->gid = 0;
	}
	if (grp && find_group(grp, &u->gid) < 0) {
		init_fmt(msg, msglen, "group '%s' not found in the sandbox's /etc/group", grp);
		return -ENOENT;
	}
	supplementary(u, found ? name : NULL);
	return 0;
}
