/* SPDX-License-Identifier: MIT */
/*
 * The sandbox-spec flags (--cpus, --memory, --storage, --pids, --network,
 * --allow-out, --deny-out, --userns, --nofile, --scratch, --cap-net-raw, --env,
 * --workdir, --user, --ttl, --label, --hostname), parsed into the one
 * spec struct every entry point fills.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/backend.h>
#include <sbx/sys/provider.h>

#include "../util/str.h"
#include "cli.h"
#include "opts.h"

const char spec_flags_help[] =
	"  --cpus N           CPU quota in cores (e.g. 0.5, 2)\n"
	"  --memory SIZE      memory limit (512M, 2G)\n"
	"  --storage SIZE     cap on the writable layer (default 10G)\n"
	"  --pids N           process limit (default 4096)\n"
	"  --network MODE     none (default, loopback only), internet (own address, NAT;\n"
	"                     host, link-local and other sandboxes unreachable), or host\n"
	"                     (UNSAFE: the host's network, loopback included)\n"
	"  --allow-out NET    internet only: egress only to this CIDR or hostname (repeatable)\n"
	"  --deny-out NET     internet only: no egress to this CIDR or hostname (repeatable)\n"
	"  --userns MODE      private (default: root inside is an unprivileged host id range)\n"
	"                     or host (UNSAFE: root inside is host root)\n"
	"  --nofile N         open-file limit of commands (default 65536)\n"
	"  --scratch KIND     where the writable layer lives: disk (default where the host\n"
	"                     can: a quota-capped btrfs subvolume) or tmpfs (host memory)\n"
	"  --cap-net-raw      keep CAP_NET_RAW (raw and packet sockets; off by default)\n"
	"  -e, --env K=V      environment for every command (repeatable)\n"
	"  -w, --workdir DIR  default working directory\n"
	"  -u, --user USER    default user (name, uid, name:group)\n"
	"  --ttl DUR          destroy after this long (30s, 10m, 2h)\n"
	"  -l, --label K=V    label for listing and gc (repeatable)\n"
	"  --hostname NAME    hostname inside the sandbox\n";

/* The --backend line, from the registry: "local (default), e2b/agentenv, ...". */
void spec_flags_print_help(FILE *f)
{
	fputs(spec_flags_help, f);
	fputs("  --backend NAME     backend: ", f);
	const sbx_provider_desc *d, *def = sbx_provider_default();
	for (size_t i = 0; (d = sbx_provider_desc_at(i)) != NULL; i++) {
		fprintf(f, "%s%s", i ? ", " : "", d->name);
		for (size_t j = 0; d->aliases && d->aliases[j]; j++)
			fprintf(f, "/%s", d->aliases[j]);
		if (d == def)
			fputs(" (default)", f);
	}
	fputs("\n                     (also $SBX_BACKEND, $OPENENV_SANDBOX_BACKEND)\n", f);
}

void cli_print_backends(FILE *f)
{
	const sbx_provider_desc *d, *def = sbx_provider_default();
	for (size_t i = 0; (d = sbx_provider_desc_at(i)) != NULL; i++) {
		char names[96];
		int n = snprintf(names, sizeof(names), "%s", d->name);
		for (size_t j = 0; d->aliases && d->aliases[j] && n >= 0 && (size_t)n < sizeof(names); j++)
			n += snprintf(names + n, sizeof(names) - (size_t)n, "/%s", d->aliases[j]);
		fprintf(f, "  %-16s %s%s%s\n", names, d->title ? d->title : d->name, d == def ? " (default)" : "",
			sbx_provider_desc_ops(d) ? "" : " (described only: no sandboxes in this build)");
	}
}

void spec_flags_init(struct spec_flags *f)
{
	memset(f, 0, sizeof(*f));
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	f->o = o;
}

void spec_flags_free(struct spec_flags *f)
{
	sbx__strv_free(f->env);
	sbx__strv_free(f->labels);
	sbx__strv_free(f->allow_out);
	sbx__strv_free(f->deny_out);
	free(f->backend);
}

static int want_mb(unsigned *out, const char *cmd, const char *flag, const char *v)
{
	uint64_t bytes;
	if (sbx__parse_size(&bytes, v) < 0 || bytes == 0)
		return cli_usage_error(cmd, "%s '%s': expected a size like 512M or 2G", flag, v);
	/* A bare number means MiB, as in task files' *_mb fields. */
	if (strspn(v, "0123456789") == strlen(v))
		bytes <<= 20;
	*out = (unsigned)(bytes >> 20);
	return 0;
}

int spec_flag(struct spec_flags *f, const char *cmd, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	if (!strcmp(a, "--cap-net-raw")) {
		f->o.net_raw = 1;
		return 1;
	}
	static const char *with_value[] = { "--cpus", "--memory", "--storage", "--pids", "--network",
					    "--allow-out", "--deny-out", "--userns", "--nofile", "--scratch",
					    "--env", "-e", "--workdir", "-w", "--user", "-u", "--ttl",
					    "--label", "-l", "--hostname", "--provider", "--backend", NULL };
	int known = 0;
	for (int k = 0; with_value[k]; k++)
		known |= strcmp(a, with_value[k]) == 0;
	if (!known)
		return 0;
	if (*i + 1 >= argc)
		return cli_usage_error(cmd, "%s needs a value", a);
	const char *v = argv[++*i];
	if (!strcmp(a, "--cpus")) {
		char *end;
		double c = strtod(v, &end);
		if (*end || c <= 0)
			return cli_usage_error(cmd, "--cpus '%s': expected a positive number", v);
		f->o.cpus = c;
	} else if (!strcmp(a, "--memory")) {
		return want_mb(&f->o.memory_mb, cmd, a, v) ? EXIT_USAGE : 1;
	} else if (!strcmp(a, "--storage")) {
		return want_mb(&f->o.storage_mb, cmd, a, v) ? EXIT_USAGE : 1;
	} else if (!strcmp(a, "--pids")) {
		uint64_t n;
		if (sbx__parse_u64(&n, v) < 0 || n == 0 || n > 1000000)
			return cli_usage_error(cmd, "--pids '%s': expected a whole number from 1", v);
		f->o.pids_max = (unsigned)n;
	} else if (!strcmp(a, "--network")) {
		if (sbx_network_parse(&f->o.network, v) < 0)
			return cli_usage_error(cmd, "--network '%s': expected none, internet or host", v);
	} else if (!strcmp(a, "--allow-out") || !strcmp(a, "--deny-out")) {
		if (!*v)
			return cli_usage_error(cmd, "%s needs a CIDR or a hostname", a);
		sbx__strv_push(a[2] == 'a' ? &f->allow_out : &f->deny_out, v);
	} else if (!strcmp(a, "--userns")) {
		if (sbx_userns_parse(&f->o.userns, v) < 0)
			return cli_usage_error(cmd, "--userns '%s': expected private or host", v);
	} else if (!strcmp(a, "--scratch")) {
		if (sbx_scratch_parse(&f->o.scratch, v) < 0)
			return cli_usage_error(cmd, "--scratch '%s': expected disk or tmpfs", v);
	} else if (!strcmp(a, "--nofile")) {
		uint64_t n;
		if (sbx__parse_u64(&n, v) < 0 || n < 16 || n > 1048576)
			return cli_usage_error(cmd, "--nofile '%s': expected a whole number from 16 to 1048576", v);
		f->o.nofile_max = (unsigned)n;
	} else if (!strcmp(a, "--env") || !strcmp(a, "-e")) {
		if (!strchr(v, '=') || v[0] == '=')
			return cli_usage_error(cmd, "%s '%s': expected KEY=VALUE", a, v);
		sbx__strv_push(&f->env, v);
	} else if (!strcmp(a, "--label") || !strcmp(a, "-l")) {
		if (!strchr(v, '=') || v[0] == '=')
			return cli_usage_error(cmd, "%s '%s': expected KEY=VALUE", a, v);
		sbx__strv_push(&f->labels, v);
	} else if (!strcmp(a, "--workdir") || !strcmp(a, "-w")) {
		if (v[0] != '/')
			return cli_usage_error(cmd, "%s '%s': expected an absolute path", a, v);
		f->o.workdir = v;
	} else if (!strcmp(a, "--user") || !strcmp(a, "-u")) {
		f->o.user = v;
	} else if (!strcmp(a, "--ttl")) {
		double s;
		if (sbx__parse_duration(&s, v) < 0 || s < 1)
			return cli_usage_error(cmd, "--ttl '%s': expected a duration like 30s, 10m or 2h", v);
		f->o.ttl_s = (unsigned)s;
	} else if (!strcmp(a, "--hostname")) {
		f->o.hostname = v;
	} else if (!strcmp(a, "--provider") || !strcmp(a, "--backend")) {
		sbx_error *err = NULL;
		free(f->backend);
		f->backend = NULL;
		if (sbx_backend_resolve(&f->backend, v, &err) < 0) {
			fprintf(stderr, "sbx %s: %s\n", cmd, err->msg);
			sbx_error_free(err);
			return EXIT_USAGE;
		}
		f->o.provider = f->backend;
	}
	f->o.env = (const char *const *)f->env;
	f->o.labels = (const char *const *)f->labels;
	f->o.allow_out = (const char *const *)f->allow_out;
	f->o.deny_out = (const char *const *)f->deny_out;
	return 1;
}
