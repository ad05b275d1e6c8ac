/* SPDX-License-Identifier: MIT */
/*
 * The providers' host-side tar code (util/tree_tar.c): sbx__tree_tar (uploads) and
 * sbx__tree_untar (downloads) round-trip a tree, and every libarchive or I/O
 * failure comes back as an error naming the path: a sink that is full
 * (RLIMIT_FSIZE makes writes fail with EFBIG, no privileges needed), a source
 * that cannot be read, a tar cut short.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/tree_tar.h"
#include "../../security/tar_writer.h"

static char root[] = "/tmp/sbx-tree-tar-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(root));
	setenv("TMPDIR", root, 1);
}

static void teardown(void)
{
	sbx__rm_rf(root, NULL);
}

TestSuite(tree_tar, .init = setup, .fini = teardown);

static void put(const char *path, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	for (size_t done = 0; done < size; done += sizeof(buf))
		cr_assert_eq(sbx__write_all(fd, buf, size - done < sizeof(buf) ? size - done : sizeof(buf)), 0);
	close(fd);
}

static char *at(const char *rel)
{
	static char p[4][256];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", root, rel);
	return p[i];
}

/* Writes past this many bytes fail with EFBIG (SIGXFSZ ignored). */
static void limit_file_size(rlim_t max)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigaction(SIGXFSZ, &sa, NULL);
	struct rlimit rl = { max, max };
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

Test(tree_tar, tar_round_trip)
{
	cr_assert_eq(mkdir(at("src"), 0755), 0);
	cr_assert_eq(mkdir(at("src/d"), 0700), 0);
	put(at("src/d/f"), 100000);
	cr_assert_eq(symlink("d/f", at("src/l")), 0);
	int fd = -1;
	off_t len = 0;
	sbx_error *e = NULL;
	cr_assert_eq(sbx__tree_tar(&fd, &len, at("src"), "top", 0, &e), 0, "%s", e ? e->msg : "");
	cr_assert_gt(len, 100000);
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	cr_assert_eq(sbx__tree_untar(fd, at("out"), &e), 0, "%s", e ? e->msg : "");
	close(fd);
	struct stat st;
	cr_assert_eq(stat(at("out/top/d/f"), &st), 0);
	cr_assert_eq(st.st_size, 100000);
	cr_assert_eq(stat(at("out/top/d"), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700);
	char t[16] = "";
	cr_assert_eq(readlink(at("out/top/l"), t, sizeof(t) - 1), 3);
	cr_assert_str_eq(t, "d/f");
}

Test(tree_tar, tar_to_a_full_sink_names_the_file)
{
	put(at("big"), 1 << 20);
	limit_file_size(64 << 10);
	int fd = -1;
	off_t len = 0;
	sbx_error *e = NULL;
	int r = sbx__tree_tar(&fd, &len, at("big"), "big", 0, &e);
	cr_assert_eq(r, -EFBIG, "got %d: %s", r, e ? e->msg : "(no error)");
	cr_assert_not_null(e);
	cr_assert_not_null(strstr(e->msg, at("big")), "%s", e->msg);
	sbx_error_free(e);
}

Test(tree_tar, unreadable_source_names_the_file)
{
	/* a "regular file" of size 0 whose read fails (EIO at address 0) */
	int fd = -1;
	off_t len = 0;
	sbx_error *e = NULL;
	int r = sbx__tree_tar(&fd, &len, "/proc/self/mem", "mem", 0, &e);
	cr_assert_lt(r, 0, "an unreadable file is not an empty one");
	cr_assert_not_null(e);
	cr_assert_not_null(strstr(e->msg, "/proc/self/mem"), "%s", e->msg);
	sbx_error_free(e);
	e = NULL;
	/* st_size 0 but content: the header would lie */
	r = sbx__tree_tar(&fd, &len, "/proc/self/status", "status", 0, &e);
	cr_assert_eq(r, -EIO);
	cr_assert_not_null(strstr(e->msg, "changed size"), "%s", e->msg);
	sbx_error_free(e);
}

Test(tree_tar, untar_into_a_full_disk_names_the_file)
{
	cr_assert_eq(mkdir(at("src"), 0755), 0);
	put(at("src/f"), 1 << 20);
	int fd = -1;
	off_t len = 0;
	sbx_error *e = NULL;
	cr_assert_eq(sbx__tree_tar(&fd, &len, at("src"), "src", 0, &e), 0);
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	limit_file_size(64 << 10);
	int r = sbx__tree_untar(fd, at("out"), &e);
	close(fd);
	cr_assert_eq(r, -EFBIG, "a short file is not a download: got %d", r);
	cr_assert_not_null(strstr(e->msg, at("out/src/f")), "%s", e->msg);
	sbx_error_free(e);
}

Test(tree_tar, untar_of_a_cut_tar_fails)
{
	cr_assert_eq(mkdir(at("src"), 0755), 0);
	put(at("src/f"), 1 << 20);
	int fd = -1;
	off_t len = 0;
	sbx_error *e = NULL;
	cr_assert_eq(sbx__tree_tar(&fd, &len, at("src"), "src", 0, &e), 0);
	cr_assert_eq(ftruncate(fd, len / 2), 0);
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	int r = sbx__tree_untar(fd, at("out"), &e);
	close(fd);
	cr_assert_lt(r, 0);
	cr_assert_not_null(e);
	cr_assert_not_null(strstr(e->msg, at("out")), "%s", e->msg);
	sbx_error_free(e);
}

/* A sandbox's tar is hostile: what it unpacks to on the host must not be a
 * setuid file, a device node or a FIFO (docs/security.md, "sbx cp"). */
Test(tree_tar, untar_drops_set_id_bits_and_special_files)
{
	const struct tar_ent ents[] = {
		{ .name = "top/", .type = '5', .mode = 0755 },
		{ .name = "top/suid", .type = '0', .mode = 06755, .data = "#!/bin/sh\n" },
		{ .name = "top/dev", .type = '3', .mode = 0666, .major = 1, .minor = 3 },
		{ .name = "top/blk", .type = '4', .mode = 0660, .major = 7, .minor = 0 },
		{ .name = "top/fifo", .type = '6', .mode = 0644 },
		{ .name = "top/ok", .type = '0', .mode = 0644, .data = "ok\n" },
		{ 0 },
	};
	tar_write(at("hostile.tar"), ents);
	int fd = open(at("hostile.tar"), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(mkdir(at("out"), 0755), 0);
	sbx_error *e = NULL;
	cr_assert_eq(sbx__tree_untar(fd, at("out"), &e), 0, "%s", e ? e->msg : "");
	close(fd);
	struct stat st;
	cr_assert_eq(stat(at("out/top/suid"), &st), 0);
	cr_expect_eq(st.st_mode & 07000, 0, "set-id bits kept: %o", st.st_mode & 07777);
	cr_expect_eq(stat(at("out/top/ok"), &st), 0);
	cr_expect(lstat(at("out/top/dev"), &st) < 0 && errno == ENOENT, "a device node was made");
	cr_expect(lstat(at("out/top/blk"), &st) < 0 && errno == ENOENT, "a block device was made");
	cr_expect(lstat(at("out/top/fifo"), &st) < 0 && errno == ENOENT, "a FIFO was made");
}
