/* SPDX-License-Identifier: MIT */
/* Image import formats: rootfs tarballs, OCI image layouts (directory and
 * tar) with whiteouts, docker-save archives, unsafe entries and garbage. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "helpers.h"
#include "images/store.h"

#define CONFIG_FMT                                                                           \
	"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/usr/bin:/bin\","   \
	"\"GREETING=hi there\"],\"WorkingDir\":\"/srv\",\"User\":\"1000:1000\",\"Cmd\":[\"/bin/sh\","   \
	"\"-c\",\"echo ok\"]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\",\"%s\"]}}"

#define ENTRY_FMT                                                                            \
	"{\"mediaType\":\"application/vnd.oci.image.%s.v1+json\",\"digest\":\"%s\",\"size\":1,"    \
	"\"platform\":{\"architecture\":\"%s\",\"os\":\"linux\"}}"

/* Two layers: the upper one deletes etc/gone and makes opt/d opaque. */
struct two_layers {
	char *tmp;          /* scratch dir */
	char *lower, *upper_plain, *upper_gz;
	char *diff_lower, *diff_upper;
};

static void make_layers(struct two_layers *l)
{
	l->tmp = th_tmpdir("layers");
	const struct th_entry lower[] = { { 'd', "etc", NULL, 0 },
					  { 'f', "etc/keep", "keep\n", 0 },
					  { 'f', "etc/gone", "gone\n", 0 },
					  { 'd', "opt", NULL, 0 },
					  { 'd', "opt/d", NULL, 0 },
					  { 'f', "opt/d/a", "a\n", 0 },
					  { 'f', "bin/tool", "tool\n", 0755 },
					  { 'h', "bin/tool-link", "bin/tool", 0 },
					  TH_END };
	const struct th_entry upper[] = { { 'd', "etc", NULL, 0 },
					  { 'f', "etc/.wh.gone", "", 0 },
					  { 'd', "opt/d", NULL, 0 },
					  { 'f', "opt/d/.wh..wh..opq", "", 0 },
					  { 'f', "opt/d/b", "b\n", 0 },
					  TH_END };
	cr_assert(asprintf(&l->lower, "%s/lower.tar", l->tmp) > 0);
	cr_assert(asprintf(&l->upper_plain, "%s/upper.tar", l->tmp) > 0);
	cr_assert(asprintf(&l->upper_gz, "%s/upper.tar.gz", l->tmp) > 0);
	th_write_tar(l->lower, lower, false);
	th_write_tar(l->upper_plain, upper, false);
	th_write_tar(l->upper_gz, upper, true);
	l->diff_lower = th_sha256_file(l->lower);
	l->diff_upper = th_sha256_file(l->upper_plain);
}

static void free_layers(struct two_layers *l)
{
	th_rm_rf(l->tmp);
	free(l->tmp);
	free(l->lower);
	free(l->upper_plain);
	free(l->upper_gz);
	free(l->diff_lower);
	free(l->diff_upper);
}

/* Writes an OCI image layout for the two layers into a new dir (owned). */
static char *make_oci(struct two_layers *l, bool nested_index)
{
	char *oci = th_tmpdir("oci");
	char p[1024], doc[4096];
	char *lb = th_oci_blob(oci, l->lower), *ub = th_oci_blob(oci, l->upper_gz);
	snprintf(doc, sizeof(doc), CONFIG_FMT, l->diff_lower, l->diff_upper);
	char *cfg = th_oci_blob_str(oci, doc);
	snprintf(doc, sizeof(doc),
		 "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":"
		 "\"%s\",\"size\":1},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1."
		 "tar\",\"digest\":\"%s\",\"size\":1},{\"mediaType\":\"application/vnd.oci.image.layer"
		 ".v1.tar+gzip\",\"digest\":\"%s\",\"size\":1}]}",
		 cfg, lb, ub);
	char *man = th_oci_blob_str(oci, doc);
	char e1[512], e2[512];
	snprintf(e1, sizeof(e1), ENTRY_FMT, "manifest", "sha256:1111111111111111111111111111111111111111111111111111111111111111", "s390x");
	snprintf(e2, sizeof(e2), ENTRY_FMT, "manifest", man, "amd64");
	snprintf(doc, sizeof(doc), "{\"schemaVersion\":2,\"manifests\":[%s,%s]}", e1, e2);
	if (nested_index) {
		char *idx = th_oci_blob_str(oci, doc);
		snprintf(e1, sizeof(e1), "{\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
					 "\"digest\":\"%s\",\"size\":1}", idx);
		snprintf(doc, sizeof(doc), "{\"schemaVersion\":2,\"manifests\":[%s]}", e1);
		free(idx);
	}
	snprintf(p, sizeof(p), "%s/index.json", oci);
	th_write_file(p, doc, strlen(doc));
	snprintf(p, sizeof(p), "%s/oci-layout", oci);
	th_write_file(p, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	free(lb);
	free(ub);
	free(cfg);
	free(man);
	return oci;
}

static void check_two_layer_image(const sbx_image *img, const struct two_layers *l)
{
	char p[1024];
	struct stat st;
	cr_assert_eq(img->n_layers, 2);
	cr_assert_str_eq(img->layers[0], l->diff_lower);
	cr_assert_str_eq(img->layers[1], l->diff_upper);
	snprintf(p, sizeof(p), "%s/etc/gone", img->layer_paths[0]);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	snprintf(p, sizeof(p), "%s/etc/gone", img->layer_paths[1]);
	cr_assert_eq(lstat(p, &st), 0, "whiteout at %s", p);
	cr_assert(S_ISCHR(st.st_mode), "whiteout is a char device");
	cr_assert_eq(major(st.st_rdev), 0);
	cr_assert_eq(minor(st.st_rdev), 0);
	snprintf(p, sizeof(p), "%s/etc/.wh.gone", img->layer_paths[1]);
	cr_assert_neq(lstat(p, &st), 0, "no .wh. file left");
	snprintf(p, sizeof(p), "%s/opt/d", img->layer_paths[1]);
	char v[8] = { 0 };
	cr_assert_eq(lgetxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
	cr_assert_eq(v[0], 'y');
	snprintf(p, sizeof(p), "%s/opt/d/.wh..wh..opq", img->layer_paths[1]);
	cr_assert_neq(lstat(p, &st), 0, "no opaque marker file left");
	snprintf(p, sizeof(p), "%s/opt/d/b", img->layer_paths[1]);
	cr_assert_eq(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/opt/d", img->layer_paths[0]);
	cr_assert_lt(lgetxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 0);
	struct stat a, b;
	snprintf(p, sizeof(p), "%s/bin/tool", img->layer_paths[0]);
	cr_assert_eq(stat(p, &a), 0);
	cr_assert_eq(a.st_mode & 0777, 0755);
	snprintf(p, sizeof(p), "%s/bin/tool-link", img->layer_paths[0]);
	cr_assert_eq(stat(p, &b), 0);
	cr_assert_eq(a.st_ino, b.st_ino, "hardlink inside a layer");
	cr_assert_eq(a.st_mtime, 1700000000);

	const sbx_image_config *c = &img->config;
	cr_assert_not_null(c->env);
	cr_assert_str_eq(c->env[0], "PATH=/usr/bin:/bin");
	cr_assert_str_eq(c->env[1], "GREETING=hi there");
	cr_assert_null(c->env[2]);
	cr_assert_str_eq(c->workdir, "/srv");
	cr_assert_str_eq(c->user, "1000:1000");
	cr_assert_not_null(c->cmd);
	cr_assert_str_eq(c->cmd[0], "/bin/sh");
	cr_assert_str_eq(c->cmd[2], "echo ok");
	cr_assert_null(c->cmd[3]);
	cr_assert_null(c->entrypoint);
}

static sbx_image *import_ok(sbx_runtime *rt, const char *name, const char *src)
{
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	int r = sbx_image_import(&img, rt, name, src, &err);
	cr_assert_eq(r, 0, "import %s: %s", src, err ? err->msg : "?");
	cr_assert_null(err);
	return img;
}

Test(images_import, oci_layout_dir_and_tar)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	struct two_layers l;
	make_layers(&l);
	char *oci = make_oci(&l, false);
	sbx_image *img = import_ok(rt, "oci:dir", oci);
	check_two_layer_image(img, &l);
	sbx_image_free(img);
	sbx_image *got = NULL;
	cr_assert_eq(sbx_image_get(&got, rt, "oci:dir", NULL), 0);
	check_two_layer_image(got, &l);
	sbx_image_free(got);

	char tar[1024];
	snprintf(tar, sizeof(tar), "%s/oci.tar", l.tmp);
	th_tar_dir(tar, oci);
	img = import_ok(rt, "oci:tar", tar);
	check_two_layer_image(img, &l);
	sbx_image_free(img);
	char layers[1024];
	snprintf(layers, sizeof(layers), "%s/store/layers/sha256", dir);
	cr_assert_eq(th_count_dir(layers), 2, "layers shared between the two imports");
	snprintf(layers, sizeof(layers), "%s/store/tmp", dir);
	cr_assert_eq(th_count_dir(layers), 0, "temp dirs cleaned");
	th_rm_rf(oci);
	free(oci);
	free_layers(&l);
	th_runtime_free(rt, dir);
}

Test(images_import, oci_nested_index_picks_host_platform)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	struct two_layers l;
	make_layers(&l);
	char *oci = make_oci(&l, true);
	sbx_image *img = import_ok(rt, "nested", oci);
	check_two_layer_image(img, &l);
	sbx_image_free(img);
	th_rm_rf(oci);
	free(oci);
	free_layers(&l);
	th_runtime_free(rt, dir);
}

Test(images_import, oci_corrupt_blob_rejected)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	struct two_layers l;
	make_layers(&l);
	char *oci = make_oci(&l, false);
	char p[1024];
	snprintf(p, sizeof(p), "%s/blobs/sha256/%s", oci, l.diff_lower + 7);
	char cmd[2100];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", l.upper_plain, p); /* a valid tar, wrong content */
	cr_assert_eq(system(cmd), 0);
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(NULL, rt, "bad", oci, &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "digest"), "%s", err->msg);
	sbx_error_free(err);
	cr_assert_eq(sbx_image_get(NULL, rt, "bad", NULL), -ENOENT);
	th_rm_rf(oci);
	free(oci);
	free_layers(&l);
	th_runtime_free(rt, dir);
}

Test(images_import, docker_save_archive)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	struct two_layers l;
	make_layers(&l);
	char *ds = th_tmpdir("docker");
	char p[1024], doc[4096];
	snprintf(doc, sizeof(doc), CONFIG_FMT, l.diff_lower, l.diff_upper);
	char *cfgd = th_sha256_buf(doc, strlen(doc));
	snprintf(p, sizeof(p), "%s/%s.json", ds, cfgd + 7);
	th_write_file(p, doc, strlen(doc));
	/* docker save stores layers uncompressed, one directory per layer */
	char cmd[2048];
	snprintf(p, sizeof(p), "%s/%s/layer.tar", ds, l.diff_lower + 7);
	th_write_file(p, "", 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", l.lower, p);
	cr_assert_eq(system(cmd), 0);
	snprintf(p, sizeof(p), "%s/%s/layer.tar", ds, l.diff_upper + 7);
	th_write_file(p, "", 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", l.upper_plain, p);
	cr_assert_eq(system(cmd), 0);
	snprintf(doc, sizeof(doc),
		 "[{\"Config\":\"%s.json\",\"RepoTags\":[\"app:latest\"],\"Layers\":[\"%s/layer.tar\","
		 "\"%s/layer.tar\"]}]",
		 cfgd + 7, l.diff_lower + 7, l.diff_upper + 7);
	snprintf(p, sizeof(p), "%s/manifest.json", ds);
	th_write_file(p, doc, strlen(doc));
	char tar[1024];
	snprintf(tar, sizeof(tar), "%s/docker.tar", l.tmp);
	th_tar_dir(tar, ds);
	sbx_image *img = import_ok(rt, "app:latest", tar);
	check_two_layer_image(img, &l);
	sbx_image_free(img);
	free(cfgd);
	th_rm_rf(ds);
	free(ds);
	free_layers(&l);
	th_runtime_free(rt, dir);
}

Test(images_import, rootfs_tar_gz_twice_shares_layer)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *tmp = th_tmpdir("tgz");
	char tgz[1024];
	snprintf(tgz, sizeof(tgz), "%s/rootfs.tar.gz", tmp);
	const struct th_entry e[] = { { 'd', "./", NULL, 0 },
				      { 'd', "./etc", NULL, 0 },
				      { 'f', "./etc/os-release", "ID=test\n", 0 },
				      { 'l', "./bin", "usr/bin", 0 },
				      { 'd', "./usr/bin", NULL, 0 },
				      { 'f', "./usr/bin/hello", "hello\n", 0755 },
				      TH_END };
	th_write_tar(tgz, e, true);
	sbx_image *a = import_ok(rt, "a", tgz), *b = import_ok(rt, "b", tgz);
	cr_assert_eq(a->n_layers, 1);
	cr_assert_str_eq(a->layers[0], b->layers[0]);
	char p[1024];
	snprintf(p, sizeof(p), "%s/store/layers/sha256", dir);
	cr_assert_eq(th_count_dir(p), 1);
	snprintf(p, sizeof(p), "%s/store/layers", dir);
	cr_assert_eq(th_count_dir(p), 1, "no temp layer dirs left behind");
	snprintf(p, sizeof(p), "%s/usr/bin/hello", a->layer_paths[0]);
	cr_assert_eq(access(p, X_OK), 0);
	struct stat st;
	snprintf(p, sizeof(p), "%s/bin", a->layer_paths[0]);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_null(a->config.cmd);
	sbx_image_free(a);
	sbx_image_free(b);
	th_rm_rf(tmp);
	free(tmp);
	th_runtime_free(rt, dir);
}

Test(images_import, dotdot_entry_stays_inside)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *tmp = th_tmpdir("evil");
	char tar[1024];
	snprintf(tar, sizeof(tar), "%s/evil.tar", tmp);
	const struct th_entry e[] = { { 'f', "ok", "fine\n", 0 },
				      { 'f', "../evil", "pwned\n", 0 },
				      { 'f', "a/../../../evil2", "pwned\n", 0 },
				      TH_END };
	th_write_tar(tar, e, false);
	sbx_error *err = NULL;
	int r = sbx_image_import(NULL, rt, "evil", tar, &err);
	cr_assert_lt(r, 0);
	cr_assert_not_null(err);
	sbx_error_free(err);
	cr_assert(!th_find_name(dir, "evil"), "../evil escaped the layer");
	cr_assert(!th_find_name(dir, "evil2"));
	char p[1024];
	snprintf(p, sizeof(p), "%s/store/layers", dir);
	cr_assert_eq(th_count_dir(p), 1, "failed layer removed");
	th_rm_rf(tmp);
	free(tmp);
	th_runtime_free(rt, dir);
}

Test(images_import, symlink_escape_stays_inside)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *tmp = th_tmpdir("evil");
	char *outside = th_tmpdir("outside");
	char tar[1024], target[1024];
	snprintf(tar, sizeof(tar), "%s/evil.tar", tmp);
	snprintf(target, sizeof(target), "%s", outside);
	const struct th_entry abs[] = { { 'l', "link", target, 0 },
					{ 'f', "link/evil", "pwned\n", 0 },
					TH_END };
	th_write_tar(tar, abs, false);
	sbx_error *err = NULL;
	cr_assert_lt(sbx_image_import(NULL, rt, "evil", tar, &err), 0);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(th_count_dir(outside), 0, "wrote through an absolute symlink");

	const struct th_entry rel[] = { { 'l', "up", "../../../../../../../../..", 0 },
					{ 'f', "up/tmp/sbx-evil-rel", "pwned\n", 0 },
					TH_END };
	th_write_tar(tar, rel, false);
	cr_assert_lt(sbx_image_import(NULL, rt, "evil", tar, &err), 0);
	sbx_error_free(err);
	cr_assert_neq(access("/tmp/sbx-evil-rel", F_OK), 0, "wrote through a relative symlink");

	const struct th_entry hl[] = { { 'h', "passwd", "/etc/passwd", 0 }, TH_END };
	th_write_tar(tar, hl, false);
	err = NULL;
	cr_assert_lt(sbx_image_import(NULL, rt, "evil", tar, &err), 0);
	sbx_error_free(err);
	cr_assert(!th_find_name(dir, "passwd"));
	th_rm_rf(outside);
	free(outside);
	th_rm_rf(tmp);
	free(tmp);
	th_runtime_free(rt, dir);
}

Test(images_import, garbage_and_missing)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *tmp = th_tmpdir("garbage");
	char p[1024];
	snprintf(p, sizeof(p), "%s/garbage.bin", tmp);
	char junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 7919 % 251);
	th_write_file(p, junk, sizeof(junk));
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(NULL, rt, "junk", p, &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "garbage.bin"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "expected"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	snprintf(p, sizeof(p), "%s/empty.tar", tmp);
	th_write_file(p, "", 0);
	cr_assert_eq(sbx_image_import(NULL, rt, "empty", p, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	snprintf(p, sizeof(p), "%s/nope.tar", tmp);
	cr_assert_eq(sbx_image_import(NULL, rt, "nope", p, &err), -ENOENT);
	char want[1100];
	snprintf(want, sizeof(want), "import nope: %s: no such file or directory", p);
	cr_assert_str_eq(err->msg, want);
	sbx_error_free(err);
	cr_assert_eq(sbx_image_get(NULL, rt, "junk", NULL), -ENOENT);
	th_rm_rf(tmp);
	free(tmp);
	th_runtime_free(rt, dir);
}
