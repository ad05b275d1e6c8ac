/* SPDX-License-Identifier: MIT */
/*
 * sbx_image_bootstrap(): builds a Debian image by running debootstrap against
 * the machine's apt mirror (mirror.c) into a temp dir under the store, trims
 * apt caches, and imports the result as a one-layer image. A one-off build, so
 * a plain posix_spawn + waitpid; debootstrap's output goes to a log file.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/image.h>

#include "util/alloc.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
#include "util/str.h"
#include "store.h"

extern char **environ;

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Suites, variants and package names: no option injection, no separators. */
static bool word_ok(const char *s, const char *extra)
{
	if (!s || !*s || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr(extra, *s)))
			return false;
	return true;
}

/* debootstrap in PATH, or in the sbin directories PATH often lacks. Owned or NULL. */
static char *find_debootstrap(void)
{
	const char *env = sbx__env("PATH");
	_cleanup_free_ char *path = xasprintf("%s:/usr/sbin:/sbin", env && *env ? env : "/usr/bin:/bin");
	char *save = NULL;
	for (char *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char *p = xasprintf("%s/debootstrap", d);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

/* Runs argv with stdout+stderr to LOG; returns the exit status or -errno. */
static int run_logged(char *const *argv, const char *log, sbx_error **err)
{
	_cleanup_close_ int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (lfd < 0)
		return sbx_error_setsys(err, -errno, errno, "create %s", log);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, lfd, 1);
	posix_spawn_file_actions_adddup2(&fa, lfd, 2);
	pid_t pid;
	int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		return sbx_error_setsys(err, -e, e, "run %s", argv[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return sbx_error_setsys(err, -errno, errno, "wait for %s", argv[0]);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Removes entries of ROOT/REL (those ending in SUFFIX, or all when NULL). */
static void rm_entries(const char *root, const char *rel, const char *suffix)
{
	_cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name), s = suffix ? strlen(suffix) : 0;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!suffix || (n > s && strcmp(de->d_name + n - s, suffix) == 0))
			sbx__rm_rf_at(dirfd(d), de->d_name, NULL);
	}
}

/* Drops mounts a failed debootstrap may leave, then the tree. */
static void remove_target(const char *dir)
{
	const char *mnts[] = { "proc", "sys", "dev/pts", "dev" };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(mnts); i++) {
		_cleanup_free_ char *m = xasprintf("%s/%s", dir, mnts[i]);
		umount2(m, MNT_DETACH | UMOUNT_NOFOLLOW);
	}
	sbx__rm_rf(dir, NULL);
}

static int import_target(sbx_image **out, sbx_runtime *rt, const char *name, const char *dir,
			 sbx_error **err)
{
	rm_entries(dir, "var/cache/apt/archives", ".deb");
	rm_entries(dir, "var/lib/apt/lists", NULL);
	_cleanup_close_ int lock = -1;
	_cleanup_free_ char *digest = NULL;
	int r = sbx__image_store_lock(&lock, rt, false, err);
	if (r == 0)
		r = sbx__image_layer_from_dir(&digest, rt, dir, err);
	if (r < 0)
		return r;
	char *env[] = { (char *)DEFAULT_PATH, NULL };
	char *layers[] = { digest, NULL };
	sbx_image_config cfg = { .env = env, .workdir = (char *)"/" };
	return sbx__image_commit(out, rt, name, layers, &cfg, err);
}

/* Checks opts and builds "--include=a,b" (owned; NULL when none). */
static int check_opts(char **include_out, const sbx_bootstrap_opts *o, sbx_error **err)
{
	if (!o || o->version != SBX_BOOTSTRAP_OPTS_VERSION)
		return sbx_error_set(err, -EINVAL, "bootstrap: opts version %u unsupported",
				     o ? o->version : 0);
	if (!o->name || !*o->name || strlen(o->name) > SBX_IMAGE_NAME_MAX)
		return sbx_error_set(err, -EINVAL, "bootstrap: image name is empty or too long");
	if (o->suite && !word_ok(o->suite, "._-"))
		return sbx_error_set(err, -EINVAL, "bootstrap %s: bad suite '%s'", o->name, o->suite);
	if (o->variant && !word_ok(o->variant, "._-"))
		return sbx_error_set(err, -EINVAL, "bootstrap %s: bad variant '%s'", o->name, o->variant);
	if (o->mirror && (!*o->mirror || o->mirror[0] == '-' || strpbrk(o->mirror, " \t\n")))
		return sbx_error_set(err, -EINVAL, "bootstrap %s: bad mirror '%s'", o->name, o->mirror);
	sbx_buf b;
	sbx__buf_init(&b, 64 * 1024);
	for (size_t i = 0; o->include && o->include[i]; i++) {
		if (!word_ok(o->include[i], ".+-:")) {
			sbx__buf_free(&b);
			return sbx_error_set(err, -EINVAL, "bootstrap %s: bad package name '%s'", o->name,
					     o->include[i]);
		}
		if (sbx__buf_printf(&b, "%s%s", i ? "," : "--include=", o->include[i]) < 0) {
			sbx__buf_free(&b);
			return sbx_error_set(err, -E2BIG, "bootstrap %s: too many packages", o->name);
		}
	}
	*include_out = b.data ? sbx__buf_steal(&b, NULL) : NULL;
	return 0;
}

int sbx_image_bootstrap(sbx_image **out, sbx_runtime *rt, const sbx_bootstrap_opts *opts,
			sbx_error **err)
{
	_cleanup_free_ char *include = NULL, *mirror = NULL, *prog = NULL;
	int r = check_opts(&include, opts, err);
	if (r < 0)
		return r;
	const char *name = opts->name;
	const char *suite = opts->suite ? opts->suite : "bookworm";
	const char *variant = opts->variant ? opts->variant : "minbase";
	if (opts->mirror)
		mirror = xstrdup(opts->mirror);
	else if ((r = sbx__image_mirror_from_apt(&mirror, "/", suite, err)) < 0)
		return sbx_error_prefix(err, r, "bootstrap %s", name);
	if (!(prog = find_debootstrap()))
		return sbx_error_set(err, -ENOENT, "bootstrap %s: debootstrap not found; install it "
						   "with 'apt-get install debootstrap'", name);
	if ((r = sbx__image_store_init(rt, err)) < 0)
		return r;
	_cleanup_free_ char *esc = sbx__image_escape_name(name);
	_cleanup_free_ char *log = xasprintf("%s/bootstrap-%s.log", sbx_runtime_image_dir(rt), esc);
	_cleanup_free_ char *tmp = xasprintf("%s/tmp/bootstrap-XXXXXX", sbx_runtime_image_dir(rt));
	if (!mkdtemp(tmp))
		return sbx_error_setsys(err, -errno, errno, "create %s", tmp);
	chmod(tmp, 0755);
	_cleanup_free_ char *var = xasprintf("--variant=%s", variant);
	char *argv[8];
	size_t n = 0;
	argv[n++] = prog;
	argv[n++] = var;
	if (include)
		argv[n++] = include;
	argv[n++] = (char *)suite;
	argv[n++] = tmp;
	argv[n++] = mirror;
	argv[n] = NULL;
	r = run_logged(argv, log, err);
	if (r > 0)
		r = sbx_error_set(err, -EIO, "debootstrap %s from %s failed (exit %d); see %s",
				  suite, mirror, r, log);
	if (r == 0)
		r = import_target(out, rt, name, tmp, err);
	remove_target(tmp);
	return r < 0 ? sbx_error_prefix(err, r, "bootstrap %s", name) : 0;
}
