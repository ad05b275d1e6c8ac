/* SPDX-License-Identifier: MIT */
/*
 * Escape battery: the image store as a way to host root. A RUN step (root
 * in the build sandbox) makes a setuid-root binary and one with file
 * capabilities; an imported tarball or rootfs directory brings setuid
 * files and device nodes. None of it may land in a layer on the host, and
 * the store root must not let other host users in at all. Overlay
 * whiteouts (char 0/0) are the one kind of device a layer keeps.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../integration/common.h"
#include "tar_writer.h"

TestSuite(image_store, .init = setup, .fini = teardown);

static char *at(const char *dir, const char *name)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

static void rm_rf(const char *p)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", p);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void write_file(const char *path, const char *data, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert_geq(fd, 0, "create %s", path);
	cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
	cr_assert_eq(chmod(path, mode), 0);
}

/* vfs_cap_data v2: CAP_SETUID permitted and effective. */
static const unsigned cap_v2[5] = { 0x02000001u, 1u << 7, 0, 0, 0 };

/* The top layer's rootfs of IMAGE (owned). */
static char *top_layer(const char *image)
{
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_get(&img, rt, image, &err), 0, "%s", err ? err->msg : "?");
	char *p = strdup(img->layer_paths[img->n_layers - 1]);
	sbx_image_free(img);
	return p;
}

/* REL in LAYER exists as a regular file without setuid/setgid bits or a
 * security.capability xattr. */
static void expect_harmless(const char *layer, const char *rel)
{
	char *p = at(layer, rel);
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0, "%s is missing from the layer", rel);
	cr_expect(S_ISREG(st.st_mode), "%s: not a regular file", rel);
	cr_expect_eq(st.st_mode & (S_ISUID | S_ISGID), 0, "%s is mode %o in the layer", rel,
		     (unsigned)(st.st_mode & 07777));
	char v[64];
	ssize_t n = lgetxattr(p, "security.capability", v, sizeof(v));
	cr_expect(n < 0 && errno == ENODATA, "%s keeps its security.capability xattr", rel);
	free(p);
}

/* REL in LAYER is not a character or block device (a missing entry is fine). */
static void expect_no_device(const char *layer, const char *rel)
{
	char *p = at(layer, rel);
	struct stat st;
	if (lstat(p, &st) == 0)
		cr_expect(!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode), "%s: a device node %u:%u is in the layer",
			  rel, major(st.st_rdev), minor(st.st_rdev));
	free(p);
}

static void expect_whiteout(const char *layer, const char *rel)
{
	char *p = at(layer, rel);
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0, "whiteout %s is missing", rel);
	cr_expect(S_ISCHR(st.st_mode) && st.st_rdev == 0, "%s is not a whiteout", rel);
	free(p);
}

Test(image_store, store_root_is_0700)
{
	const char *dir = sbx_runtime_image_dir(rt);
	cr_assert_eq(chmod(dir, 0755), 0, "chmod %s", dir);
	char tmp[] = "/tmp/sbx-sec-store-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char *tar = at(tmp, "one.tar");
	char body[64];
	snprintf(body, sizeof(body), "%d-%ld\n", (int)getpid(), random());
	struct tar_ent ents[] = { { .name = "f", .type = '0', .mode = 0644, .data = body }, { 0 } };
	tar_write(tar, ents);
	sbx_error *err = NULL;
	int r = sbx_image_import(NULL, rt, "sec-store-root", tar, &err);
	cr_assert_eq(r, 0, "import: %s", err ? err->msg : "?");
	struct stat st;
	cr_assert_eq(stat(dir, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700, "image store %s is mode %o", dir, (unsigned)(st.st_mode & 07777));
	sbx_image_remove(rt, "sec-store-root", NULL);
	free(tar);
	rm_rf(tmp);
}

Test(image_store, run_step_setuid_and_caps_do_not_reach_the_layer)
{
	char ctx[] = "/tmp/sbx-sec-run-XXXXXX";
	cr_assert_not_null(mkdtemp(ctx));
	char *probe = at(ctx, "probe"), *df = at(ctx, "Dockerfile"), *text = NULL, *cmd = NULL;
	cr_assert_geq(asprintf(&cmd, "cp '%s' '%s'", getenv("SBX_PROBE"), probe), 0);
	cr_assert_eq(system(cmd), 0);
	cr_assert_geq(asprintf(&text,
			       "FROM busybox\nENV NONCE=%d-%ld\nCOPY probe /probe\n"
			       "RUN cp /probe /suid && chmod 4755 /suid && [ -u /suid ] && "
			       "cp /probe /sgid && chmod 2755 /sgid && [ -g /sgid ] && "
			       "cp /probe /capbin && /probe setcap /capbin\n",
			       (int)getpid(), random()),
		      0);
	write_file(df, text, 0644);
	sbx_build_opts o = SBX_BUILD_OPTS_INIT;
	o.context_dir = ctx;
	o.slug = "sec-run";
	sbx_build_result res = { 0 };
	sbx_error *err = NULL;
	int r = sbx_template_build(&res, rt, &o, &err);
	cr_assert_eq(r, 0, "build: %s", err ? err->msg : "?");
	char *layer = top_layer(res.alias);
	expect_harmless(layer, "suid");
	expect_harmless(layer, "sgid");
	expect_harmless(layer, "capbin");
	sbx_image_remove(rt, res.alias, NULL);
	sbx_build_result_free(&res);
	free(layer), free(probe), free(df), free(text), free(cmd);
	rm_rf(ctx);
}

Test(image_store, imported_tarball_loses_devices_and_setuid)
{
	char tmp[] = "/tmp/sbx-sec-imp-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char *tar = at(tmp, "evil.tar");
	char name[64];
	snprintf(name, sizeof(name), "sec-imp-%d-%ld", (int)getpid(), random());
	FILE *f = fopen(tar, "w");
	cr_assert_not_null(f);
	struct tar_ent ents[] = {
		{ .name = "bin/", .type = '5', .mode = 0755 },
		{ .name = "bin/suid", .type = '0', .mode = 04755, .data = name },
		{ .name = "bin/sgid", .type = '0', .mode = 02755, .data = name },
		{ .name = "bin/suid2", .type = '1', .mode = 04755, .link = "bin/suid" },
		{ .name = "dev/", .type = '5', .mode = 0755 },
		{ .name = "dev/mem", .type = '3', .mode = 0666, .major = 1, .minor = 1 },
		{ .name = "dev/sda", .type = '4', .mode = 0666, .major = 8, .minor = 0 },
		{ .name = "dev/.wh.gone", .type = '0', .mode = 0644 },
		{ 0 },
	};
	for (size_t i = 0; ents[i].name; i++)
		tar_add(f, &ents[i]);
	tar_pax_xattr(f, "security.capability", cap_v2, sizeof(cap_v2));
	tar_add(f, &(struct tar_ent){ .name = "bin/capbin", .type = '0', .mode = 0755, .data = name });
	tar_end(f);
	cr_assert_eq(fclose(f), 0);
	sbx_error *err = NULL;
	int r = sbx_image_import(NULL, rt, name, tar, &err);
	cr_assert_eq(r, 0, "import: %s", err ? err->msg : "?");
	char *layer = top_layer(name);
	expect_harmless(layer, "bin/suid");
	expect_harmless(layer, "bin/suid2");
	expect_harmless(layer, "bin/sgid");
	expect_harmless(layer, "bin/capbin");
	expect_no_device(layer, "dev/mem");
	expect_no_device(layer, "dev/sda");
	expect_whiteout(layer, "dev/gone");
	sbx_image_remove(rt, name, NULL);
	free(layer), free(tar);
	rm_rf(tmp);
}

Test(image_store, imported_rootfs_dir_loses_devices_and_setuid)
{
	char tmp[] = "/tmp/sbx-sec-dir-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char name[64];
	snprintf(name, sizeof(name), "sec-dir-%d-%ld", (int)getpid(), random());
	char *bin = at(tmp, "bin"), *dev = at(tmp, "dev"), *suid = at(tmp, "bin/suid"),
	     *cap = at(tmp, "bin/capbin"), *mem = at(tmp, "dev/mem"), *wh = at(tmp, "dev/gone");
	cr_assert_eq(mkdir(bin, 0755), 0);
	cr_assert_eq(mkdir(dev, 0755), 0);
	write_file(suid, name, 04755);
	write_file(cap, name, 0755);
	cr_assert_eq(setxattr(cap, "security.capability", cap_v2, sizeof(cap_v2), 0), 0, "setcap: %s",
		     strerror(errno));
	cr_assert_eq(mknod(mem, S_IFCHR | 0666, makedev(1, 1)), 0);
	cr_assert_eq(mknod(wh, S_IFCHR | 0000, makedev(0, 0)), 0);
	sbx_error *err = NULL;
	int r = sbx_image_import(NULL, rt, name, tmp, &err);
	cr_assert_eq(r, 0, "import: %s", err ? err->msg : "?");
	char *layer = top_layer(name);
	expect_harmless(layer, "bin/suid");
	expect_harmless(layer, "bin/capbin");
	expect_no_device(layer, "dev/mem");
	expect_whiteout(layer, "dev/gone");
	sbx_image_remove(rt, name, NULL);
	free(layer), free(bin), free(dev), free(suid), free(cap), free(mem), free(wh);
	rm_rf(tmp);
}

/* A store written before layers were sanitized: its layers are scrubbed the
 * next time the store is opened. */
Test(image_store, layers_stored_before_are_scrubbed)
{
	char tmp[] = "/tmp/sbx-sec-old-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char name[64];
	snprintf(name, sizeof(name), "sec-old-%d-%ld", (int)getpid(), random());
	char *tar = at(tmp, "old.tar");
	struct tar_ent ents[] = { { .name = "suid", .type = '0', .mode = 0755, .data = name },
				  { .name = "capbin", .type = '0', .mode = 0755, .data = name },
				  { .name = ".wh.gone", .type = '0', .mode = 0644 },
				  { 0 } };
	tar_write(tar, ents);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(NULL, rt, name, tar, &err), 0, "import: %s", err ? err->msg : "?");
	/* What an unsanitized store held: plant it behind the store's back. */
	char *layer = top_layer(name), *suid = at(layer, "suid"), *cap = at(layer, "capbin"),
	     *mem = at(layer, "mem");
	cr_assert_eq(chmod(suid, 04755), 0);
	cr_assert_eq(setxattr(cap, "security.capability", cap_v2, sizeof(cap_v2), 0), 0);
	cr_assert_eq(mknod(mem, S_IFCHR | 0666, makedev(1, 1)), 0);
	char *marker = at(sbx_runtime_image_dir(rt), ".layers-sanitized-v1");
	unlink(marker);
	char *tar2 = at(tmp, "new.tar");
	struct tar_ent ents2[] = { { .name = "f", .type = '0', .mode = 0644, .data = tar2 }, { 0 } };
	tar_write(tar2, ents2);
	char name2[80];
	snprintf(name2, sizeof(name2), "%s-2", name);
	cr_assert_eq(sbx_image_import(NULL, rt, name2, tar2, &err), 0, "import: %s", err ? err->msg : "?");
	expect_harmless(layer, "suid");
	expect_harmless(layer, "capbin");
	expect_no_device(layer, "mem");
	expect_whiteout(layer, "gone");
	cr_expect_eq(access(marker, F_OK), 0, "the scrub left no marker");
	sbx_image_remove(rt, name, NULL);
	sbx_image_remove(rt, name2, NULL);
	free(layer), free(suid), free(cap), free(mem), free(marker), free(tar), free(tar2);
	rm_rf(tmp);
}

static void sha256_hex(char hex[65], const void *data, size_t len)
{
	unsigned char md[32];
	EVP_Digest(data, len, md, NULL, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* An OCI archive whose layer blob is a symlink to a host tarball: the
 * import must not read the host file (here the attacker even knows its
 * digest, as for any file whose contents are guessable). */
Test(image_store, oci_archive_blob_symlink_reads_no_host_file)
{
	char host[] = "/root/sbx-sec-oci-XXXXXX", tmp[] = "/tmp/sbx-sec-oci-XXXXXX";
	cr_assert_not_null(mkdtemp(host));
	cr_assert_not_null(mkdtemp(tmp));
	char secret[64];
	snprintf(secret, sizeof(secret), "host-secret-%d-%ld", (int)getpid(), random());
	char *htar = at(host, "backup.tar");
	struct tar_ent hents[] = { { .name = "leaked", .type = '0', .mode = 0600, .data = secret }, { 0 } };
	tar_write(htar, hents);
	FILE *f = fopen(htar, "r");
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	char layer[65], cfgd[65], mand[65];
	sha256_hex(layer, buf, n);
	char cfg[512], man[512], idx[512], p1[128], p2[128], p3[128];
	snprintf(cfg, sizeof(cfg), "{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:%s\"]},\"config\":{}}", layer);
	sha256_hex(cfgd, cfg, strlen(cfg));
	snprintf(man, sizeof(man), "{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:%s\"},"
		 "\"layers\":[{\"digest\":\"sha256:%s\"}]}", cfgd, layer);
	sha256_hex(mand, man, strlen(man));
	snprintf(idx, sizeof(idx), "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha256:%s\"}]}", mand);
	snprintf(p1, sizeof(p1), "blobs/sha256/%s", cfgd);
	snprintf(p2, sizeof(p2), "blobs/sha256/%s", mand);
	snprintf(p3, sizeof(p3), "blobs/sha256/%s", layer);
	struct tar_ent ents[] = {
		{ .name = "oci-layout", .type = '0', .mode = 0644, .data = "{\"imageLayoutVersion\":\"1.0.0\"}" },
		{ .name = "index.json", .type = '0', .mode = 0644, .data = idx },
		{ .name = "blobs/", .type = '5', .mode = 0755 },
		{ .name = "blobs/sha256/", .type = '5', .mode = 0755 },
		{ .name = p1, .type = '0', .mode = 0644, .data = cfg },
		{ .name = p2, .type = '0', .mode = 0644, .data = man },
		{ .name = p3, .type = '2', .mode = 0777, .link = htar },
		{ 0 },
	};
	char *tar = at(tmp, "oci.tar");
	tar_write(tar, ents);
	char name[64];
	snprintf(name, sizeof(name), "sec-oci-%d-%ld", (int)getpid(), random());
	sbx_error *err = NULL;
	int r = sbx_image_import(NULL, rt, name, tar, &err);
	cr_log_info("import: %s", r == 0 ? "succeeded" : err->msg);
	if (r == 0) {
		char *top = top_layer(name), *leak = at(top, "leaked");
		cr_expect_neq(access(leak, F_OK), 0, "the image holds the host tarball's file");
		free(top), free(leak);
		sbx_image_remove(rt, name, NULL);
	}
	sbx_error_free(err);
	free(htar), free(tar);
	rm_rf(host);
	rm_rf(tmp);
}
