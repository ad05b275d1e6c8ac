/* SPDX-License-Identifier: MIT */
/* The OCI layout tests/integration/registry.c pushes: busybox-static layers,
 * configs, manifests and an index, written as blobs under <tmp>/oci. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "fixtures.h"
#include "images/pull.h"
#include "registry.h"

#define MT_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_LAYER "application/vnd.oci.image.layer.v1.tar+gzip"

static char *hex_digest(const unsigned char *md, unsigned n)
{
	char *s = malloc(8 + 2 * n);
	snprintf(s, 8, "sha256:");
	for (unsigned i = 0; i < n; i++)
		snprintf(s + 7 + 2 * i, 3, "%02x", md[i]);
	return s;
}

static char *sha256_file(const char *path, long *size)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "open %s", path);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	char buf[65536];
	size_t n;
	long total = 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
		EVP_DigestUpdate(c, buf, n);
		total += (long)n;
	}
	fclose(f);
	unsigned char md[32];
	unsigned len = 0;
	EVP_DigestFinal_ex(c, md, &len);
	EVP_MD_CTX_free(c);
	if (size)
		*size = total;
	return hex_digest(md, len);
}

/* Moves FILE into the OCI layout's blobs; returns its digest and size. */
static char *add_blob(const char *file, long *size)
{
	char *d = sha256_file(file, size);
	sh("mv '%s' '%s/oci/blobs/sha256/%s'", file, tmp, d + 7);
	return d;
}

static void write_at(const char *rel, const char *data)
{
	char *p = fmt("%s/%s", tmp, rel);
	write_str(p, data);
	free(p);
}

static char *add_blob_json(json_t *j, long *size)
{
	char *data = json_dumps(j, JSON_COMPACT);
	char *p = fmt("%s/blob.json", tmp);
	write_str(p, data);
	char *d = add_blob(p, size);
	free(p);
	free(data);
	json_decref(j);
	return d;
}

/* A layer from directory REL: tar (digest = diffID), then gzip -n (the blob). */
static char *add_layer(const char *rel, char **diff_out, long *size)
{
	char *tar = fmt("%s/layer.tar", tmp);
	sh("tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C '%s/%s' -cf '%s' .",
	   tmp, rel, tar);
	*diff_out = sha256_file(tar, NULL);
	sh("gzip -n -f '%s'", tar);
	char *gz = fmt("%s.gz", tar);
	char *d = add_blob(gz, size);
	free(gz);
	free(tar);
	return d;
}
/* Builds the OCI layout: "single" (amd64, 2 layers) and "multi" (arm64 + amd64 index). */
void build_images(void)
{
	sh("mkdir -p '%s/oci/blobs/sha256' '%s/l1' '%s/l2/etc' '%s/l3/etc'", tmp, tmp, tmp, tmp);
	write_at("oci/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
	const char *dirs = "bin sbin usr/bin etc tmp root proc dev sys var/tmp home/user work";
	sh("cd '%s/l1' && mkdir -p %s && chmod 1777 tmp && cp /bin/busybox bin/busybox && "
	   "for a in sh true cat echo ls id; do ln -s busybox bin/$a; done && "
	   "printf 'root:x:0:0:root:/root:/bin/sh\\n' > etc/passwd && "
	   "printf 'root:x:0:\\n' > etc/group", tmp, dirs);
	write_at("l2/etc/pulled", "hello from the registry\n");
	write_at("l3/etc/arch", "arm64\n");
	char *diff1, *diff2, *diff3;
	long s1, s2, s3, sc, sm, sa, sx;
	char *l1 = add_layer("l1", &diff1, &s1);
	char *l2 = add_layer("l2", &diff2, &s2);
	char *l3 = add_layer("l3", &diff3, &s3);
	char *cfg = add_blob_json(json_pack("{s:s, s:s, s:{s:[s,s], s:s, s:[s]}, s:{s:s, s:[s,s]}}",
					    "architecture", "amd64", "os", "linux", "config", "Env",
					    "PATH=/bin:/usr/bin", "FROM_REGISTRY=1", "WorkingDir",
					    "/root", "Cmd", "/bin/sh", "rootfs", "type", "layers",
					    "diff_ids", diff1, diff2),
				  &sc);
	char *man = add_blob_json(
		json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}, {s:s, s:s, s:I}]}",
			  "schemaVersion", 2, "mediaType", MT_MANIFEST, "config", "mediaType",
			  MT_CONFIG, "digest", cfg, "size", (json_int_t)sc, "layers", "mediaType",
			  MT_LAYER, "digest", l1, "size", (json_int_t)s1, "mediaType", MT_LAYER,
			  "digest", l2, "size", (json_int_t)s2),
		&sm);
	char *cfg_arm = add_blob_json(json_pack("{s:s, s:s, s:s, s:{}, s:{s:s, s:[s]}}",
						"architecture", "arm64", "variant", "v8", "os", "linux",
						"config", "rootfs", "type", "layers", "diff_ids", diff3),
				      &sx);
	char *man_arm = add_blob_json(
		json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}]}", "schemaVersion", 2,
			  "mediaType", MT_MANIFEST, "config", "mediaType", MT_CONFIG, "digest",
			  cfg_arm, "size", (json_int_t)sx, "layers", "mediaType", MT_LAYER, "digest",
			  l3, "size", (json_int_t)s3),
		&sa);
	long si;
	char *idx = add_blob_json(
		json_pack("{s:i, s:s, s:[{s:s, s:s, s:I, s:{s:s, s:s, s:s}}, "
			  "{s:s, s:s, s:I, s:{s:s, s:s}}]}",
			  "schemaVersion", 2, "mediaType", MT_INDEX, "manifests", "mediaType",
			  MT_MANIFEST, "digest", man_arm, "size", (json_int_t)sa, "platform",
			  "architecture", "arm64", "os", "linux", "variant", "v8", "mediaType",
			  MT_MANIFEST, "digest", man, "size", (json_int_t)sm, "platform",
			  "architecture", "amd64", "os", "linux"),
		&si);
	json_t *top = json_pack(
		"{s:i, s:[{s:s, s:s, s:I, s:{s:s}}, {s:s, s:s, s:I, s:{s:s}}]}", "schemaVersion", 2,
		"manifests", "mediaType", MT_MANIFEST, "digest", man, "size", (json_int_t)sm,
		"annotations", "org.opencontainers.image.ref.name", "single", "mediaType", MT_INDEX,
		"digest", idx, "size", (json_int_t)si, "annotations",
		"org.opencontainers.image.ref.name", "multi");
	char *data = json_dumps(top, JSON_COMPACT);
	write_at("oci/index.json", data);
	free(data);
	json_decref(top);
	single_digest = man;
	index_digest = idx;
	free(l1), free(l2), free(l3), free(diff1), free(diff2), free(diff3);
	free(cfg), free(cfg_arm), free(man_arm);
}
