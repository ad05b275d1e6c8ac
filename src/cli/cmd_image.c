/* SPDX-License-Identifier: MIT */
/*
 * `sbx image import|bootstrap|ls|rm|inspect`: the local image store from the
 * command line. One-line human summaries on stdout, --json for machines,
 * progress on stderr only when stderr is a terminal.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "images/pull.h"
#include "util/alloc.h"
#include "util/fs.h"
#include "util/str.h"

static const char image_usage[] =
	"usage: sbx image COMMAND [ARGS...]\n\n"
	"Manage the local image store ($SBX_IMAGE_DIR, default /var/lib/sbx/images).\n\n"
	"commands:\n"
	"  import NAME SRC       import a rootfs directory or tarball (tar, tar.gz, tar.xz,\n"
	"                        tar.zst), an OCI image layout (directory or tar) or a\n"
	"                        'docker save' archive\n"
	"  bootstrap NAME        build a Debian image with debootstrap\n"
	"  pull REF [NAME]       pull an image from an OCI registry\n"
	"  ls                    list images\n"
	"  rm NAME...            remove images (and layers no other image uses)\n"
	"  inspect NAME          show an image's layers and config\n\n"
	"Run 'sbx image COMMAND --help' for a command's options.\n";

static const char import_usage[] =
	"usage: sbx image import [--json] NAME SRC\n\n"
	"Imports SRC as image NAME, replacing an existing NAME. SRC is a rootfs\n"
	"directory, a rootfs tarball (tar, tar.gz, tar.xz, tar.zst), an OCI image\n"
	"layout (directory or tar) or a 'docker save' archive. Layers are stored once.\n\n"
	"options:\n"
	"  --json    print the imported image as JSON\n";

static const char bootstrap_usage[] =
	"usage: sbx image bootstrap NAME [--suite SUITE] [--include PKG,...] [--mirror URL] [--json]\n\n"
	"Builds a Debian image with 'debootstrap --variant=minbase' (needs root).\n"
	"The mirror comes from this machine's apt configuration unless --mirror is given.\n\n"
	"options:\n"
	"  --suite SUITE      Debian suite (default bookworm)\n"
	"  --include PKGS     extra packages, comma-separated\n"
	"  --mirror URL       Debian mirror to use instead of apt's\n"
	"  --json             print the built image as JSON\n";

static const char pull_usage[] =
	"usage: sbx image pull [--json] REF [NAME]\n\n"
	"Pulls REF from an OCI registry (Registry HTTP API v2) into the store as NAME\n"
	"(default: REF), replacing an existing NAME. Layers already stored are not\n"
	"downloaded again. REF is [REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST]; without\n"
	"a registry it is Docker Hub ('debian:bookworm' is docker.io/library/debian).\n\n"
	"environment:\n"
	"  SBX_REGISTRY_AUTH_FILE   credentials file in docker config.json format\n"
	"                           (default ~/.docker/config.json when it exists)\n"
	"  SBX_INSECURE_REGISTRIES  host:port,... allowed over plain http (loopback\n"
	"                           registries always are)\n"
	"  SBX_REGISTRY_MIRROR      registry=URL,... e.g. docker.io=http://127.0.0.1:5000\n\n"
	"options:\n"
	"  --json    print the pulled image (with the digest it resolved to) as JSON\n";

static const char ls_usage[] =
	"usage: sbx image ls [--all] [--json]\n\n"
	"Lists images: name, id, layers, size on disk (shared layers counted in each\n"
	"image), creation time. Template-build cache records (sbx-cache/...) are hidden\n"
	"unless --all is given.\n\n"
	"options:\n"
	"  --all     also list the template-build cache records\n"
	"  --json    print a JSON array\n";

static const char rm_usage[] =
	"usage: sbx image rm NAME...\n\n"
	"Removes images; layers that no remaining image uses are deleted.\n";

static const char inspect_usage[] =
	"usage: sbx image inspect [--json] NAME\n\n"
	"Shows an image's id, layers (with their directories) and config.\n\n"
	"options:\n"
	"  --json    print JSON\n";

static void format_size(char *buf, size_t n, uint64_t bytes)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, n, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, n, "%.1f %s", v, units[u]);
}

static void format_time(char *buf, size_t n, double t)
{
	time_t s = (time_t)t;
	struct tm tm;
	if (!localtime_r(&s, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M", &tm))
		snprintf(buf, n, "-");
}

/* "sha256:" plus the first 12 hex digits. */
static const char *short_id(const char *id, char buf[20])
{
	snprintf(buf, 20, "%.19s", id ? id : "");
	return buf;
}

static json_t *strv_json(char *const *v)
{
	if (!v)
		return json_null();
	json_t *a = json_array();
	for (size_t i = 0; v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *image_json(const sbx_image *img, bool full)
{
	json_t *o = json_object();
	json_object_set_new(o, "name", json_string(img->name));
	json_object_set_new(o, "id", json_string(img->id));
	json_object_set_new(o, "layers", strv_json(img->layers));
	if (full)
		json_object_set_new(o, "layer_paths", strv_json(img->layer_paths));
	json_object_set_new(o, "size", json_integer((json_int_t)img->size));
	json_object_set_new(o, "created", json_real(img->created));
	if (full) {
		const sbx_image_config *c = &img->config;
		json_t *cfg = json_object();
		json_object_set_new(cfg, "Env", strv_json(c->env));
		json_object_set_new(cfg, "WorkingDir", c->workdir ? json_string(c->workdir) : json_null());
		json_object_set_new(cfg, "User", c->user ? json_string(c->user) : json_null());
		json_object_set_new(cfg, "Cmd", strv_json(c->cmd));
		json_object_set_new(cfg, "Entrypoint", strv_json(c->entrypoint));
		json_object_set_new(o, "config", cfg);
	}
	return o;
}

static void print_json(json_t *j)
{
	char *s = json_dumps(j, JSON_INDENT(2));
	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(j);
}

/* Parses the options shared by every subcommand; returns -1 on --help. */
struct opts {
	bool json;
	const char *suite, *include, *mirror;
};

static int parse(int argc, char **argv, const char *usage, bool bootstrap, struct opts *o)
{
	static const struct option all[] = {
		{ "help", no_argument, NULL, 'h' },    { "json", no_argument, NULL, 'j' },
		{ "suite", required_argument, NULL, 's' }, { "include", required_argument, NULL, 'i' },
		{ "mirror", required_argument, NULL, 'm' }, { NULL, 0, NULL, 0 },
	};
	static const struct option few[] = {
		{ "help", no_argument, NULL, 'h' }, { "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 },
	};
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "image %s", argv[0]);
	memset(o, 0, sizeof(*o));
	optind = 0;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "hj", bootstrap ? all : few, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage, stdout); return -1;
		case 'j': o->json = true; break;
		case 's': o->suite = optarg; break;
		case 'i': o->include = optarg; break;
		case 'm': o->mirror = optarg; break;
		default:
			return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		}
	}
	return 0;
}

static void print_summary(const char *verb, const sbx_image *img, double secs)
{
	char size[32], id[20];
	format_size(size, sizeof(size), img->size);
	printf("%s %s: %zu layer%s, %s, %s (%.2f s)\n", verb, img->name, img->n_layers,
	       img->n_layers == 1 ? "" : "s", size, short_id(img->id, id), secs);
}

static int image_import(int argc, char **argv)
{
	struct opts o;
	int r = parse(argc, argv, import_usage, false, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (argc - optind != 2)
		return cli_usage_error("image import", "expected NAME and SRC");
	const char *name = argv[optind], *src = argv[optind + 1];
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_FAIL;
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "importing %s from %s...\n", name, src);
	double t0 = sbx__now_mono();
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	if (sbx_image_import(&img, rt, name, src, &err) < 0) {
		sbx_runtime_free(rt);
		return cli_fail("image", err);
	}
	if (o.json)
		print_json(image_json(img, true));
	else
		print_summary("imported", img, sbx__now_mono() - t0);
	sbx_image_free(img);
	sbx_runtime_free(rt);
	return EXIT_OK;
}

/* Splits "a,b,,c" into a NULL-terminated vector (empty items dropped). */
static char **split_commas(const char *s)
{
	char **v = NULL;
	while (s && *s) {
		size_t n = strcspn(s, ",");
		if (n) {
			char *item = xstrndup(s, n);
			sbx__strv_push(&v, item);
			free(item);
		}
		s += n + (s[n] == ',');
	}
	return v;
}

static int image_bootstrap(int argc, char **argv)
{
	struct opts o;
	int r = parse(argc, argv, bootstrap_usage, true, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (argc - optind != 1)
		return cli_usage_error("image bootstrap", "expected one NAME");
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_FAIL;
	char **pkgs = split_commas(o.include);
	sbx_bootstrap_opts bo = SBX_BOOTSTRAP_OPTS_INIT;
	bo.name = argv[optind];
	bo.suite = o.suite;
	bo.mirror = o.mirror;
	bo.include = (const char *const *)pkgs;
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "bootstrapping %s (debootstrap %s, a few minutes; log in %s)...\n",
			bo.name, o.suite ? o.suite : "bookworm", sbx_runtime_image_dir(rt));
	double t0 = sbx__now_mono();
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	r = sbx_image_bootstrap(&img, rt, &bo, &err);
	sbx__strv_free(pkgs);
	if (r < 0) {
		sbx_runtime_free(rt);
		return cli_fail("image", err);
	}
	if (o.json)
		print_json(image_json(img, true));
	else
		print_summary("bootstrapped", img, sbx__now_mono() - t0);
	sbx_image_free(img);
	sbx_runtime_free(rt);
	return EXIT_OK;
}

/* Progress on stderr (a terminal): one rewritten line per layer. */
static void pull_progress(void *payload, size_t layer, size_t n, uint64_t done, uint64_t total,
			  int cached)
{
	double *last = payload;
	double now = sbx__now_mono();
	bool end = total && done >= total;
	if (!end && now - *last < 0.2)
		return;
	*last = now;
	char d[32], t[32];
	format_size(d, sizeof(d), done);
	format_size(t, sizeof(t), total);
	fprintf(stderr, "\r\033[Klayer %zu/%zu: %s%s%s%s", layer + 1, n, cached ? "cached" : d,
		cached ? "" : " of ", cached ? "" : (total ? t : "?"), end ? "\n" : "");
	fflush(stderr);
}

static int image_pull(int argc, char **argv)
{
	struct opts o;
	int r = parse(argc, argv, pull_usage, false, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_error("image pull", "expected REF and an optional NAME");
	const char *ref = argv[optind], *name = argc - optind == 2 ? argv[optind + 1] : ref;
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_FAIL;
	double last = 0;
	struct sbx_pull_opts po = { 0 };
	if (isatty(STDERR_FILENO)) {
		fprintf(stderr, "pulling %s...\n", ref);
		po.progress = pull_progress;
		po.payload = &last;
	}
	double t0 = sbx__now_mono();
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	struct sbx_pull_result res = { 0 };
	if (sbx__image_pull(&img, &res, rt, ref, name, &po, &err) < 0) {
		sbx_runtime_free(rt);
		return cli_fail("image pull", err);
	}
	if (o.json) {
		json_t *j = image_json(img, true);
		json_object_set_new(j, "ref", json_string(ref));
		json_object_set_new(j, "digest", json_string(res.digest));
		json_object_set_new(j, "manifest", json_string(res.manifest));
		json_object_set_new(j, "layers_cached", json_integer((json_int_t)res.layers_cached));
		json_object_set_new(j, "bytes_downloaded", json_integer((json_int_t)res.bytes));
		print_json(j);
	} else {
		char size[32], dg[20];
		format_size(size, sizeof(size), img->size);
		printf("pulled %s%s%s: %zu layer%s (%zu cached), %s, %s (%.1f s)\n", ref,
		       strcmp(name, ref) ? " as " : "", strcmp(name, ref) ? name : "", res.layers,
		       res.layers == 1 ? "" : "s", res.layers_cached, size, short_id(res.digest, dg),
		       sbx__now_mono() - t0);
	}
	sbx__pull_result_clear(&res);
	sbx_image_free(img);
	sbx_runtime_free(rt);
	return EXIT_OK;
}

static bool is_cache(const sbx_image *img)
{
	return strncmp(img->name, "sbx-cache/", 10) == 0;
}

static int image_ls(int argc, char **argv)
{
	struct opts o;
	bool all = false;
	int k = 0;
	for (int i = 0; i < argc; i++) {
		if (i > 0 && (!strcmp(argv[i], "--all") || !strcmp(argv[i], "-a")))
			all = true;
		else
			argv[k++] = argv[i];
	}
	argc = k;
	int r = parse(argc, argv, ls_usage, false, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (optind != argc)
		return cli_usage_error("image ls", "unexpected argument '%s'", argv[optind]);
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_FAIL;
	sbx_image **v = NULL;
	size_t n = 0;
	sbx_error *err = NULL;
	if (sbx_image_list(&v, &n, rt, &err) < 0) {
		sbx_runtime_free(rt);
		return cli_fail("image ls", err);
	}
	if (o.json) {
		json_t *a = json_array();
		for (size_t i = 0; i < n; i++)
			if (all || !is_cache(v[i]))
				json_array_append_new(a, image_json(v[i], false));
		print_json(a);
	} else {
		int w = 4;
		size_t hidden = 0;
		for (size_t i = 0; i < n; i++)
			if ((int)strlen(v[i]->name) > w && (all || !is_cache(v[i])))
				w = (int)strlen(v[i]->name);
		printf("%-*s  %-19s  %6s  %10s  %s\n", w, "NAME", "ID", "LAYERS", "SIZE", "CREATED");
		for (size_t i = 0; i < n; i++) {
			char size[32], when[32], id[20];
			if (!all && is_cache(v[i])) {
				hidden++;
				continue;
			}
			format_size(size, sizeof(size), v[i]->size);
			format_time(when, sizeof(when), v[i]->created);
			printf("%-*s  %-19s  %6zu  %10s  %s\n", w, v[i]->name, short_id(v[i]->id, id),
			       v[i]->n_layers, size, when);
		}
		if (hidden)
			fprintf(stderr, "(%zu template-build cache records hidden; --all lists them)\n", hidden);
	}
	sbx_image_list_free(v, n);
	sbx_runtime_free(rt);
	return EXIT_OK;
}

static int image_rm(int argc, char **argv)
{
	struct opts o;
	int r = parse(argc, argv, rm_usage, false, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (optind >= argc)
		return cli_usage_error("image rm", "expected at least one NAME");
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_FAIL;
	int rc = EXIT_OK;
	for (int i = optind; i < argc; i++) {
		sbx_error *err = NULL;
		if (sbx_image_remove(rt, argv[i], &err) < 0) {
			int c = cli_fail("image rm", err);
			rc = rc == EXIT_OK ? c : rc;
		} else {
			printf("removed %s\n", argv[i]);
		}
	}
	sbx_runtime_free(rt);
	return rc;
}

static void print_list(const char *label, char *const *v)
{
	printf("%-12s", label);
	if (!v) {
		printf("-\n");
		return;
	}
	for (size_t i = 0; v[i]; i++)
		printf("%s%s", i ? " " : "", v[i]);
	printf("\n");
}

static int image_inspect(int argc, char **argv)
{
	struct opts o;
	int r = parse(argc, argv, inspect_usage, false, &o);
	if (r)
		return r < 0 ? EXIT_OK : r;
	if (argc - optind != 1)
		return cli_usage_error("image inspect", "expected one NAME");
	sbx_runtime *rt = cli_runtime();
	if (!rt)
		return EXIT_FAIL;
	sbx_image *img = NULL;
	sbx_error *err = NULL;
	if (sbx_image_get(&img, rt, argv[optind], &err) < 0) {
		sbx_runtime_free(rt);
		return cli_fail("image inspect", err);
	}
	if (o.json) {
		print_json(image_json(img, true));
	} else {
		char size[32], when[32];
		format_size(size, sizeof(size), img->size);
		format_time(when, sizeof(when), img->created);
		printf("%-12s%s\n%-12s%s\n%-12s%s\n%-12s%s\n", "name", img->name, "id", img->id,
		       "created", when, "size", size);
		for (size_t i = 0; i < img->n_layers; i++)
			printf("%-12s%s %s\n", i ? "" : "layers", img->layers[i], img->layer_paths[i]);
		const sbx_image_config *c = &img->config;
		for (size_t i = 0; c->env && c->env[i]; i++)
			printf("%-12s%s\n", i ? "" : "env", c->env[i]);
		printf("%-12s%s\n%-12s%s\n", "workdir", c->workdir ? c->workdir : "-", "user",
		       c->user ? c->user : "-");
		print_list("entrypoint", c->entrypoint);
		print_list("cmd", c->cmd);
	}
	sbx_image_free(img);
	sbx_runtime_free(rt);
	return EXIT_OK;
}

int cmd_image(int argc, char **argv)
{
	static const struct {
		const char *name;
		cli_cmd_fn fn;
	} subs[] = {
		{ "import", image_import }, { "bootstrap", image_bootstrap }, { "pull", image_pull },
		{ "ls", image_ls },
		{ "list", image_ls },       { "rm", image_rm },               { "inspect", image_inspect },
	};
	if (argc < 2 || cli_is_help(argv[1])) {
		fputs(image_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			return subs[i].fn(argc - 1, argv + 1);
	return cli_usage_error("image", "unknown command '%s'", argv[1]);
}
