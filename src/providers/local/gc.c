/* SPDX-License-Identifier: MIT */
/* The local provider's list and GC: every sandbox of the state dir, and the
 * groups, layers, sockets and state files a crashed process left. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "../../util/fs.h"
#include "../../util/str.h"
#include "local_int.h"
#include "net/net.h"

/* Whether someone still listens on <id>.sock: a create in flight (its
 * process holds the listener until init takes it over) or a live init. */
static int sock_listening(struct local_ctx *c, const char *id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", c->dir, id);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return 0;
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	return connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN;
}

/* One listing row from a state file (its labels are moved out of st). */
static void fill_info(sbx_sandbox_info *i, struct local_state *st, double now)
{
	memset(i, 0, sizeof(*i));
	int alive = sbx__proc_alive(st->pid, st->start);
	int owner_alive = sbx__proc_alive(st->owner, st->owner_start);
	i->id = xstrdup(st->id);
	i->provider = xstrdup("local");
	i->image = xstrdup(st->image);
	i->state = xstrdup(alive ? "running" : "dead");
	i->labels = steal_ptr(&st->labels);
	i->created_at = st->created;
	i->expires_at = st->expires;
	i->pid = st->pid;
	i->leaked = !alive;
	if (alive && !st->detach && !owner_alive)
		i->leaked = 1;
	if (alive && st->expires && now > st->expires + 5)
		i->leaked = 1;
}

int sbx__local_info(sbx_sandbox_info *out, void *h, sbx_error **err)
{
	struct local_sb *sb = h;
	_cleanup_free_ char *path = xasprintf("%s.json", sb->dir);
	struct local_state st;
	if (sbx__state_read(&st, path, NULL) < 0)
		return sbx_error_set(err, -ESRCH, "no sandbox '%s' (gone?)", sb->id);
	fill_info(out, &st, sbx__now_real());
	sbx__state_clear(&st);
	return 0;
}

int sbx__local_list(sbx_sandbox_info **out, size_t *n_out, void *ctx, sbx_error **err)
{
	struct local_ctx *c = ctx;
	_cleanup_closedir_ DIR *d = opendir(c->dir);
	if (!d)
		return sbx_error_setsys(err, -errno, errno, "list %s", c->dir);
	sbx_sandbox_info *v = NULL;
	size_t n = 0;
	struct dirent *de;
	double now = sbx__now_real();
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len != LOCAL_ID_LEN + 5 || strcmp(de->d_name + LOCAL_ID_LEN, ".json") != 0)
			continue;
		_cleanup_free_ char *path = xasprintf("%s/%s", c->dir, de->d_name);
		struct local_state st;
		if (sbx__state_read(&st, path, NULL) < 0)
			continue;
		v = xrealloc(v, (n + 1) * sizeof(*v));
		fill_info(&v[n++], &st, now);
		sbx__state_clear(&st);
	}
	/* Groups, writable layers, sockets or half-written state files with no
	 * state file: a crash between the cgroups and the state file. They are
	 * listed as dead so GC removes them. */
	char **orphans = sbx__cg_list(sbx__local_cg(c));
	char **layers = sbx__scratch_list(&c->scratch);
	for (size_t k = 0; layers && layers[k]; k++)
		if (sbx__local_valid_id(layers[k]) && !sbx__strv_contains(orphans, layers[k]))
			sbx__strv_push(&orphans, layers[k]);
	sbx__strv_free(layers);
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		if (strlen(name) <= LOCAL_ID_LEN || name[LOCAL_ID_LEN] != '.' ||
		    strcmp(name + LOCAL_ID_LEN, ".json") == 0)
			continue;
		char oid[LOCAL_ID_LEN + 1];
		snprintf(oid, sizeof(oid), "%.*s", LOCAL_ID_LEN, name);
		if (sbx__local_valid_id(oid) && !sbx__strv_contains(orphans, oid))
			sbx__strv_push(&orphans, oid);
	}
	for (size_t k = 0; orphans && orphans[k]; k++) {
		_cleanup_free_ char *path = xasprintf("%s/%s.json", c->dir, orphans[k]);
		if (access(path, F_OK) == 0 || sock_listening(c, orphans[k]))
			continue;
		v = xrealloc(v, (n + 1) * sizeof(*v));
		sbx_sandbox_info *i = &v[n++];
		memset(i, 0, sizeof(*i));
		i->id = xstrdup(orphans[k]);
		i->provider = xstrdup("local");
		i->image = xstrdup("");
		i->state = xstrdup("dead");
		i->leaked = 1;
	}
	sbx__strv_free(orphans);
	sbx__frozen_list(c, &v, &n);
	*out = v;
	*n_out = n;
	return 0;
}

/* State files a killed writer left half-written (<id>.json.tmp.*); GC only. */
static int remove_tmp_files(struct local_ctx *c, const char *id)
{
	_cleanup_closedir_ DIR *d = opendir(c->dir);
	_cleanup_free_ char *prefix = xasprintf("%s.json.tmp.", id);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 && unlinkat(dirfd(d), de->d_name, 0) == 0)
			n++;
	return n > 0;
}

int sbx__local_destroy_id(void *ctx, const char *id, sbx_error **err)
{
	struct local_ctx *c = ctx;
	if (!strncmp(id, FROZEN_ID_PREFIX, strlen(FROZEN_ID_PREFIX)))
		return sbx__frozen_destroy(c, id + strlen(FROZEN_ID_PREFIX), err);
	if (!sbx__local_valid_id(id))
		return sbx_error_set(err, -ENOENT, "no sandbox '%s'", id);
	struct local_sb *sb = sbx__local_sb_new(c, id);
	struct local_state st;
	_cleanup_free_ char *path = sbx__local_path_of(sb, "json");
	int have = sbx__state_read(&st, path, NULL) == 0;
	if (have) {
		sb->frozen = steal_ptr(&st.frozen);
		if (sbx__proc_alive(st.pid, st.start)) {
			sb->pid = st.pid;
			sb->start = st.start;
			sb->pidfd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
		}
		sbx__state_clear(&st);
	}
	char **cgs = sbx__cg_list(sbx__local_cg(c));
	_cleanup_free_ char *sock = sbx__local_path_of(sb, "sock");
	int exists = have || access(sock, F_OK) == 0 || sbx__net_marked(sb->dir) ||
		     sbx__scratch_exists(&c->scratch, id);
	for (size_t k = 0; cgs && cgs[k]; k++)
		exists |= strcmp(cgs[k], id) == 0;
	sbx__strv_free(cgs);
	int r = sbx__local_teardown(sb, err);
	if (r == 0)
		exists |= remove_tmp_files(c, id);
	sbx__local_close(sb);
	if (r == 0 && !exists)
		return sbx_error_set(err, -ENOENT, "no sandbox '%s'", id);
	return r;
}
