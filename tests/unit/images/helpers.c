/* SPDX-License-Identifier: MIT */
/* Test helpers for the image store (see helpers.h). */
#include <criterion/criterion.h>
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

char *th_tmpdir(const char *tag)
{
	char *p = NULL;
	cr_assert(asprintf(&p, "/tmp/sbx-%s-XXXXXX", tag) > 0);
	cr_assert_not_null(mkdtemp(p), "mkdtemp: %s", strerror(errno));
	return p;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	remove(p);
	return 0;
}

void th_rm_rf(const char *path)
{
	nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

sbx_runtime *th_runtime(char **dir_out)
{
	char *dir = th_tmpdir("images");
	char state[600];
	snprintf(state, sizeof(state), "%s/state", dir);
	char images[600];
	snprintf(images, sizeof(images), "%s/store", dir);
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = state;
	o.image_dir = images;
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &o, &err), 0, "runtime: %s", err ? err->msg : "?");
	*dir_out = dir;
	return rt;
}

void th_runtime_free(sbx_runtime *rt, char *dir)
{
	sbx_runtime_free(rt);
	th_rm_rf(dir);
	free(dir);
}

void th_write_file(const char *path, const char *data, size_t len)
{
	char *copy = strdup(path);
	for (char *s = copy + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(copy, 0755);
			*s = '/';
		}
	free(copy);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

void th_write_tar(const char *path, const struct th_entry *e, bool gz)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	if (gz)
		archive_write_add_filter_gzip(a);
	archive_write_set_bytes_in_last_block(a, 1);
	cr_assert_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (; e->path; e++) {
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, e->path);
		archive_entry_set_mtime(ae, 1700000000, 0);
		archive_entry_set_uid(ae, 0);
		archive_entry_set_gid(ae, 0);
		size_t len = 0;
		switch (e->type) {
		case 'f':
			len = e->data ? strlen(e->data) : 0;
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_perm(ae, e->mode ? e->mode : 0644);
			archive_entry_set_size(ae, (la_int64_t)len);
			break;
		case 'd':
			archive_entry_set_filetype(ae, AE_IFDIR);
			archive_entry_set_perm(ae, e->mode ? e->mode : 0755);
			break;
		case 'l':
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_set_perm(ae, 0777);
			archive_entry_set_symlink(ae, e->data);
			break;
		case 'h':
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_perm(ae, 0644);
			archive_entry_set_hardlink(ae, e->data);
			break;
		default:
			cr_assert_fail("bad entry type %c", e->type);
		}
		cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK, "%s", archive_error_string(a));
		if (len)
			cr_assert_eq(archive_write_data(a, e->data, len), (la_ssize_t)len);
		archive_entry_free(ae);
	}
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

void th_tar_dir(const char *path, const char *dir)
{
	struct archive *rd = archive_read_disk_new();
	archive_read_disk_set_symlink_physical(rd);
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	cr_assert_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
	cr_assert_eq(archive_read_disk_open(rd, dir), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = strlen(dir);
	while (archive_read_next_header(rd, &e) == ARCHIVE_OK) {
		archive_read_disk_descend(rd);
		const char *p = archive_entry_pathname(e);
		if (strlen(p) <= n + 1)
			continue;
		char *rel = strdup(p + n + 1);
		archive_entry_set_pathname(e, rel);
		free(rel);
		cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK);
		char buf[8192];
		la_ssize_t k;
		while ((k = archive_read_data(rd, buf, sizeof(buf))) > 0)
			archive_write_data(a, buf, (size_t)k);
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_read_free(rd);
}

static char *hex(EVP_MD_CTX *c)
{
	unsigned char md[32];
	unsigned int n;
	EVP_DigestFinal_ex(c, md, &n);
	EVP_MD_CTX_free(c);
	char *out = calloc(1, 72);
	memcpy(out, "sha256:", 7);
	for (int i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	return out;
}

char *th_sha256_buf(const void *data, size_t len)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	EVP_DigestUpdate(c, data, len);
	return hex(c);
}

char *th_sha256_file(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	char buf[8192];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		EVP_DigestUpdate(c, buf, n);
	fclose(f);
	return hex(c);
}

char *th_oci_blob(const char *dir, const char *file)
{
	char *d = th_sha256_file(file);
	char dst[1024];
	snprintf(dst, sizeof(dst), "%s/blobs/sha256/%s", dir, d + 7);
	FILE *in = fopen(file, "r");
	cr_assert_not_null(in);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), in)) > 0)
		fwrite(chunk, 1, n, mem);
	fclose(mem);
	fclose(in);
	th_write_file(dst, buf, len);
	free(buf);
	return d;
}

char *th_oci_blob_str(const char *dir, const char *data)
{
	char *d = th_sha256_buf(data, strlen(data));
	char dst[1024];
	snprintf(dst, sizeof(dst), "%s/blobs/sha256/%s", dir, d + 7);
	th_write_file(dst, data, strlen(data));
	return d;
}

int th_count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static const char *find_target;
static bool find_hit;

static int find_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag;
	if (strcmp(p + f->base, find_target) == 0)
		find_hit = true;
	return 0;
}

bool th_find_name(const char *dir, const char *name)
{
	find_target = name;
	find_hit = false;
	nftw(dir, find_cb, 32, FTW_PHYS);
	return find_hit;
}
