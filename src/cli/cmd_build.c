/* SPDX-License-Identifier: MIT */
/*
 * `sbx build`: builds a Dockerfile into the local image store as a template
 * (one cached layer per instruction; the result is named by its alias).
 * Step lines and RUN output go to stderr, a one-line summary (or --json)
 * to stdout.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util/alloc.h"
#include "util/str.h"

static const char build_usage[] =
	"usage: sbx build [-f DOCKERFILE] [-t NAME] [--slug S] [--build-arg K=V]... [--target STAGE]\n"
	"                 [--user U] [--cpus N] [--memory SIZE] [--storage SIZE] [--network MODE]\n"
	"                 [--force] [--timeout DUR] [--json] CONTEXT\n\n"
	"Builds the Dockerfile in CONTEXT into the local image store. Every instruction is a\n"
	"cached layer; an unchanged Dockerfile and context rebuild nothing. The image is\n"
	"named by its template alias SLUG-<10 hex>, a digest of the base image, every\n"
	"instruction, the copied files, the build user and the build resources.\n\n"
	"options:\n"
	"  -f, --file PATH       Dockerfile (default CONTEXT/Dockerfile)\n"
	"  -t, --tag NAME        also name the result NAME\n"
	"  --slug S              alias prefix (default: the context directory's name)\n"
	"  --build-arg K=V       value for ARG K (K alone: from the environment)\n"
	"  --target STAGE        build this stage of a multi-stage Dockerfile\n"
	"  --user U              build user recorded in the alias (default root)\n"
	"  --cpus N, --memory SIZE, --storage SIZE\n"
	"                        build sandbox resources (part of the alias)\n"
	"  --network MODE        RUN steps' network: host (default) or none\n"
	"  --force               rebuild every layer\n"
	"  --timeout DUR         fail the whole build after DUR (30s, 10m, 1h)\n"
	"  --json                print the result as JSON\n";

static void on_output(int fd, const char *data, size_t len, void *payload)
{
	(void)fd;
	(void)payload;
	fwrite(data, 1, len, stderr);
	fflush(stderr);
}

struct bflags {
	sbx_build_opts o;
	char **args;
	bool json;
	char *slug;
};

static int parse_num(struct bflags *f, int c, const char *v)
{
	uint64_t n;
	char *end;
	switch (c) {
	case 'c':
		f->o.cpus = strtod(v, &end);
		if (end == v || *end || f->o.cpus <= 0)
			return cli_usage_error("build", "--cpus '%s': expected a positive number", v);
		return 0;
	case 'm':
	case 's':
		if (sbx__parse_size(&n, v) < 0 || n < (1u << 20))
			return cli_usage_error("build", "'%s': expected a size like 512M or 2G", v);
		*(c == 'm' ? &f->o.memory_mb : &f->o.storage_mb) = (unsigned)(n >> 20);
		return 0;
	case 'T':
		if (sbx__parse_duration(&f->o.timeout_s, v) < 0)
			return cli_usage_error("build", "--timeout '%s': expected a duration like 30s or 10m", v);
		return 0;
	default:
		return cli_usage_error("build", "unknown option");
	}
}

static int parse(struct bflags *f, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },       { "file", required_argument, NULL, 'f' },
		{ "tag", required_argument, NULL, 't' },  { "slug", required_argument, NULL, 'S' },
		{ "build-arg", required_argument, NULL, 'a' }, { "target", required_argument, NULL, 'g' },
		{ "user", required_argument, NULL, 'u' }, { "cpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' }, { "storage", required_argument, NULL, 's' },
		{ "network", required_argument, NULL, 'n' }, { "force", no_argument, NULL, 'F' },
		{ "timeout", required_argument, NULL, 'T' }, { "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	optind = 0;
	opterr = 0;
	int c, r;
	while ((c = getopt_long(argc, argv, "hf:t:", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(build_usage, stdout); return -1;
		case 'f': f->o.dockerfile = optarg; break;
		case 't': f->o.name = optarg; break;
		case 'S': f->o.slug = optarg; break;
		case 'a': sbx__strv_push(&f->args, optarg); break;
		case 'g': f->o.target = optarg; break;
		case 'u': f->o.user = optarg; break;
		case 'F': f->o.force = 1; break;
		case 'j': f->json = true; break;
		case 'n':
			if (sbx_network_parse(&f->o.network, optarg) < 0)
				return cli_usage_error("build", "--network '%s': expected host or none", optarg);
			f->o.network_set = 1;
			break;
		case 'c':
		case 'm':
		case 's':
		case 'T':
			if ((r = parse_num(f, c, optarg)) != 0)
				return r;
			break;
		default:
			return cli_usage_error("build", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("build", "expected one CONTEXT directory");
	f->o.context_dir = argv[optind];
	f->o.build_args = (const char *const *)f->args;
	if (!f->o.slug) {
		char *real = realpath(f->o.context_dir, NULL);
		const char *base = real ? strrchr(real, '/') : NULL;
		if (base && base[1])
			f->slug = xstrdup(base + 1);
		free(real);
		f->o.slug = f->slug;
	}
	return 0;
}

static void print_result(const sbx_build_result *res, bool json)
{
	if (!json) {
		int steps = res->layers_built + res->layers_cached;
		printf("%s %s: %d steps, %d built, %d cached, %.1f s\n", res->cached ? "found" : "built",
		       res->alias, steps, res->layers_built, res->layers_cached, res->seconds);
		return;
	}
	json_t *o = json_object();
	json_object_set_new(o, "alias", json_string(res->alias));
	json_object_set_new(o, "digest", json_string(res->digest));
	json_object_set_new(o, "cached", json_boolean(res->cached));
	json_object_set_new(o, "layers_built", json_integer(res->layers_built));
	json_object_set_new(o, "layers_cached", json_integer(res->layers_cached));
	json_object_set_new(o, "seconds", json_real(res->seconds));
	char *s = json_dumps(o, JSON_INDENT(2));
	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(o);
}

int cmd_build(int argc, char **argv)
{
	struct bflags f = { .o = SBX_BUILD_OPTS_INIT };
	int r = parse(&f, argc, argv);
	if (r) {
		sbx__strv_free(f.args);
		free(f.slug);
		return r < 0 ? EXIT_OK : r;
	}
	f.o.on_output = on_output;
	sbx_runtime *rt = cli_runtime();
	if (!rt) {
		sbx__strv_free(f.args);
		free(f.slug);
		return EXIT_FAIL;
	}
	sbx_build_result res = { 0 };
	sbx_error *err = NULL;
	r = sbx_template_build(&res, rt, &f.o, &err);
	sbx__strv_free(f.args);
	free(f.slug);
	if (r < 0) {
		sbx_runtime_free(rt);
		return cli_fail("build", err);
	}
	print_result(&res, f.json);
	sbx_build_result_free(&res);
	sbx_runtime_free(rt);
	return EXIT_OK;
}
