/* SPDX-License-Identifier: MIT */
/* Image store: rootfs-directory import, records, get/list/remove, layer sharing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fixtures.h"
#include "helpers.h"
#include "images/store.h"

static char *make_rootfs(const char *content)
{
	char *root = th_tmpdir("rootfs");
	char p[1024];
	snprintf(p, sizeof(p), "%s/etc/hostname", root);
	th_write_file(p, content, strlen(content));
	snprintf(p, sizeof(p), "%s/bin/tool", root);
	th_write_file(p, "#!/bin/sh\n", 10);
	chmod(p, 0755);
	snprintf(p, sizeof(p), "%s/bin/sh", root);
	cr_assert_eq(symlink("/bin/tool", p), 0);
	snprintf(p, sizeof(p), "%s/bin/tool2", root);
	char t[1024];
	snprintf(t, sizeof(t), "%s/bin/tool", root);
	cr_assert_eq(link(t, p), 0);
	snprintf(p, sizeof(p), "%s/home", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/home/user", root);
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(chown(p, 1000, 1000), 0);
	return root;
}

Test(images_store, escape_name)
{
	char *e = sbx__image_escape_name("debian:bookworm");
	cr_assert_str_eq(e, "debian%3Abookworm");
	free(e);
	e = sbx__image_escape_name("a/b c_d-e.f");
	cr_assert_str_eq(e, "a%2Fb%20c_d-e.f");
	free(e);
}

Test(images_store, import_rootfs_dir)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *root = make_rootfs("box\n");
	char cwd_before[1024], cwd_after[1024];
	cr_assert_not_null(getcwd(cwd_before, sizeof(cwd_before)));
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	int r = sbx_image_import(&img, rt, "debian:test", root, &err);
	cr_assert_eq(r, 0, "import: %s", err ? err->msg : "?");
	cr_assert_null(err);
	cr_assert_not_null(getcwd(cwd_after, sizeof(cwd_after)));
	cr_assert_str_eq(cwd_before, cwd_after, "import must not change the cwd");
	cr_assert_str_eq(img->name, "debian:test");
	cr_assert_eq(img->n_layers, 1);
	cr_assert(sbx__image_digest_valid(img->layers[0]));
	cr_assert(sbx__image_digest_valid(img->id));
	cr_assert_gt(img->size, 0);
	cr_assert_gt(img->created, 1.6e9);

	char p[1024], q[1024];
	snprintf(p, sizeof(p), "%s/store/images/debian%%3Atest.json", dir);
	cr_assert_eq(access(p, F_OK), 0, "record at %s", p);
	char *id = th_sha256_file(p);
	cr_assert_str_eq(img->id, id);
	free(id);
	snprintf(p, sizeof(p), "%s/store/layers/sha256/%s/rootfs", dir, img->layers[0] + 7);
	cr_assert_str_eq(img->layer_paths[0], p);
	snprintf(p, sizeof(p), "%s/store/layers/sha256/%s/meta.json", dir, img->layers[0] + 7);
	cr_assert_eq(access(p, F_OK), 0);

	struct stat st, st2;
	snprintf(p, sizeof(p), "%s/etc/hostname", img->layer_paths[0]);
	cr_assert_eq(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/bin/sh", img->layer_paths[0]);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	snprintf(p, sizeof(p), "%s/bin/tool", img->layer_paths[0]);
	snprintf(q, sizeof(q), "%s/bin/tool2", img->layer_paths[0]);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(stat(q, &st2), 0);
	cr_assert_eq(st.st_ino, st2.st_ino, "hardlink kept");
	cr_assert_eq(st.st_mode & 0777, 0755);
	snprintf(p, sizeof(p), "%s/home/user", img->layer_paths[0]);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_uid, 1000);
	cr_assert_eq(st.st_mode & 0777, 0700);

	sbx_image *got = NULL;
	cr_assert_eq(sbx_image_get(&got, rt, "debian:test", NULL), 0);
	cr_assert_str_eq(got->id, img->id);
	cr_assert_str_eq(got->layers[0], img->layers[0]);
	cr_assert_eq(got->size, img->size);
	sbx_image_free(got);
	sbx_image_free(img);
	th_rm_rf(root);
	free(root);
	th_runtime_free(rt, dir);
}

Test(images_store, get_missing_says_how)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_get(&img, rt, "foo", &err), -ENOENT);
	cr_assert_null(img);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, -ENOENT);
	cr_assert_not_null(strstr(err->msg, "image 'foo' not found in "), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "sbx image import foo SRC"), "%s", err->msg);
	cr_assert_not_null(strstr(err->msg, "sbx image bootstrap foo"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_image_remove(rt, "foo", &err), -ENOENT);
	sbx_error_free(err);
	th_runtime_free(rt, dir);
}

Test(images_store, import_twice_shares_layer_and_rm_gcs)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *a = make_rootfs("same\n"), *b = make_rootfs("other\n");
	sbx_image *i1 = NULL, *i2 = NULL, *i3 = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(&i1, rt, "one", a, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_image_import(&i2, rt, "two", a, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_image_import(&i3, rt, "three", b, &err), 0, "%s", err ? err->msg : "");
	cr_assert_str_eq(i1->layers[0], i2->layers[0], "same directory, same layer");
	cr_assert_str_neq(i1->layers[0], i3->layers[0]);
	char layers[1024];
	snprintf(layers, sizeof(layers), "%s/store/layers/sha256", dir);
	cr_assert_eq(th_count_dir(layers), 2);

	sbx_image **v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_image_list(&v, &n, rt, NULL), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0]->name, "one");
	cr_assert_str_eq(v[1]->name, "three");
	cr_assert_str_eq(v[2]->name, "two");
	sbx_image_list_free(v, n);

	cr_assert_eq(sbx_image_get(NULL, rt, "one", NULL), 0, "existence check without out");
	cr_assert_eq(sbx_image_remove(rt, "one", NULL), 0);
	cr_assert_eq(access(i1->layer_paths[0], F_OK), 0, "shared layer kept");
	cr_assert_eq(sbx_image_get(NULL, rt, "one", NULL), -ENOENT);
	cr_assert_eq(sbx_image_remove(rt, "three", NULL), 0);
	cr_assert_neq(access(i3->layer_paths[0], F_OK), 0, "unshared layer deleted");
	cr_assert_eq(sbx_image_remove(rt, "two", NULL), 0);
	cr_assert_neq(access(i2->layer_paths[0], F_OK), 0, "last user gone, layer deleted");
	cr_assert_eq(th_count_dir(layers), 0);
	cr_assert_eq(sbx_image_list(&v, &n, rt, NULL), 0);
	cr_assert_eq(n, 0);
	sbx_image_list_free(v, n);

	sbx_image_free(i1);
	sbx_image_free(i2);
	sbx_image_free(i3);
	th_rm_rf(a);
	th_rm_rf(b);
	free(a);
	free(b);
	th_runtime_free(rt, dir);
}

Test(images_store, reimport_replaces_name)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *a = make_rootfs("v1\n"), *b = make_rootfs("v2\n");
	sbx_image *i1 = NULL, *i2 = NULL;
	cr_assert_eq(sbx_image_import(&i1, rt, "app", a, NULL), 0);
	cr_assert_eq(sbx_image_import(&i2, rt, "app", b, NULL), 0);
	cr_assert_str_neq(i1->id, i2->id);
	sbx_image *got = NULL;
	cr_assert_eq(sbx_image_get(&got, rt, "app", NULL), 0);
	cr_assert_str_eq(got->layers[0], i2->layers[0]);
	sbx_image_free(got);
	sbx_image_free(i1);
	sbx_image_free(i2);
	th_rm_rf(a);
	th_rm_rf(b);
	free(a);
	free(b);
	th_runtime_free(rt, dir);
}

Test(images_store, commit_config_roundtrip)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *root = make_rootfs("cfg\n");
	sbx_image *base = NULL;
	cr_assert_eq(sbx_image_import(&base, rt, "base", root, NULL), 0);
	char *env[] = { "PATH=/bin", "LANG=C.UTF-8", NULL };
	char *cmd[] = { "/bin/sh", "-c", "echo hi", NULL };
	char *ep[] = { "/entry", NULL };
	sbx_image_config cfg = { .env = env, .workdir = "/work", .user = "1000:1000", .cmd = cmd,
				 .entrypoint = ep };
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx__image_commit(&img, rt, "derived", base->layers, &cfg, &err), 0, "%s",
		     err ? err->msg : "");
	sbx_image_free(img);
	cr_assert_eq(sbx_image_get(&img, rt, "derived", NULL), 0);
	cr_assert_str_eq(img->config.env[0], "PATH=/bin");
	cr_assert_str_eq(img->config.env[1], "LANG=C.UTF-8");
	cr_assert_null(img->config.env[2]);
	cr_assert_str_eq(img->config.workdir, "/work");
	cr_assert_str_eq(img->config.user, "1000:1000");
	cr_assert_str_eq(img->config.cmd[2], "echo hi");
	cr_assert_str_eq(img->config.entrypoint[0], "/entry");
	sbx_image_free(img);
	char *bad[] = { "sha256:0000000000000000000000000000000000000000000000000000000000000000",
			NULL };
	cr_assert_eq(sbx__image_commit(NULL, rt, "broken", bad, &cfg, &err), -ENOENT);
	sbx_error_free(err);
	sbx_image_free(base);
	th_rm_rf(root);
	free(root);
	th_runtime_free(rt, dir);
}

Test(images_store, upper_dir_keeps_overlay_format)
{
	char *dir;
	sbx_runtime *rt = th_runtime(&dir);
	char *up = th_tmpdir("rootfs");
	char p[1024];
	snprintf(p, sizeof(p), "%s/etc", up);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/etc/deleted", up);
	cr_assert_eq(mknod(p, S_IFCHR, makedev(0, 0)), 0);
	snprintf(p, sizeof(p), "%s/opt", up);
	cr_assert_eq(mkdir(p, 0755), 0);
	cr_assert_eq(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_import(&img, rt, "upper", up, &err), 0, "%s", err ? err->msg : "");
	struct stat st;
	snprintf(p, sizeof(p), "%s/etc/deleted", img->layer_paths[0]);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISCHR(st.st_mode));
	cr_assert_eq(st.st_rdev, makedev(0, 0));
	char v[4] = { 0 };
	snprintf(p, sizeof(p), "%s/opt", img->layer_paths[0]);
	cr_assert_eq(lgetxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
	cr_assert_eq(v[0], 'y');
	sbx_image_free(img);
	th_rm_rf(up);
	free(up);
	th_runtime_free(rt, dir);
}

Test(images_store, busybox_fixture)
{
	sbx_runtime *rt = sbx_test_runtime();
	sbx_test_busybox_image(rt);
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_image_get(&img, rt, "busybox", &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(img->n_layers, 1);
	char p[1024];
	snprintf(p, sizeof(p), "%s/bin/busybox", img->layer_paths[0]);
	cr_assert_eq(access(p, X_OK), 0);
	struct stat st;
	snprintf(p, sizeof(p), "%s/bin/sh", img->layer_paths[0]);
	cr_assert_eq(lstat(p, &st), 0);
	cr_assert(S_ISLNK(st.st_mode));
	snprintf(p, sizeof(p), "%s/tmp", img->layer_paths[0]);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 01777);
	sbx_image_free(img);
	sbx_test_runtime_free(rt);
}
