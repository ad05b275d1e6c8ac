/* SPDX-License-Identifier: MIT */
/* The provider-agnostic sandbox handle: argument checks happen before any
 * provider is called, and every failure names what was wrong. A recording
 * provider registered by the test shows what reaches providers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/sbx.h>
#include <sbx/sys/provider.h>

static int creates, execs, destroys;

static int rec_create(void **sb, char **id, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)ctx;
	if (strcmp(o->image, "missing") == 0)
		return sbx_error_set(err, -ENOENT, "image %s not found", o->image);
	creates++;
	*sb = strdup("handle");
	*id = strdup("rec-1");
	return 0;
}

static int rec_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	(void)sb;
	(void)o;
	(void)err;
	execs++;
	out->exit_code = 7;
	return 0;
}

static int rec_destroy(void *sb, sbx_error **err)
{
	(void)sb;
	(void)err;
	destroys++;
	return 0;
}

static void rec_close(void *sb)
{
	free(sb);
}

static const sbx_provider_ops rec_ops = {
	.version = SBX_PROVIDER_OPS_VERSION, .name = "recording",
	.create = rec_create, .exec = rec_exec, .destroy = rec_destroy, .close = rec_close,
};

static sbx_runtime *rt;

static void setup(void)
{
	char dir[] = "/tmp/sbx-core-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = dir;
	o.image_dir = dir;
	o.default_provider = "recording";
	cr_assert_eq(sbx_runtime_new(&rt, &o, NULL), 0);
	sbx_provider_register(&rec_ops, NULL);
	creates = execs = destroys = 0;
}

static void teardown(void)
{
	sbx_runtime_free(rt);
}

TestSuite(core_sandbox, .init = setup, .fini = teardown);

static int create_err(sbx_sandbox_opts *o, const char *needle)
{
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, rt, o, &err);
	cr_assert(r < 0);
	cr_assert_not_null(err, "a failure must set err");
	cr_assert_eq(err->code, r);
	cr_assert_not_null(strstr(err->msg, needle), "'%s' lacks '%s'", err->msg, needle);
	sbx_error_free(err);
	cr_assert_null(sb);
	return r;
}

Test(core_sandbox, bad_specs_fail_before_the_provider)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	cr_assert_eq(create_err(&o, "image is required"), -EINVAL);
	o.image = "busybox";
	o.cpus = -1;
	cr_assert_eq(create_err(&o, "cpus"), -EINVAL);
	o.cpus = 0;
	o.workdir = "relative/dir";
	cr_assert_eq(create_err(&o, "workdir"), -EINVAL);
	o.workdir = NULL;
	const char *env[] = { "NOEQUALS", NULL };
	o.env = env;
	cr_assert_eq(create_err(&o, "NOEQUALS"), -EINVAL);
	o.env = NULL;
	const char *labels[] = { "=v", NULL };
	o.labels = labels;
	cr_assert_eq(create_err(&o, "label"), -EINVAL);
	o.labels = NULL;
	o.version = 99;
	cr_assert_eq(create_err(&o, "version"), -EINVAL);
	cr_assert_eq(creates, 0);
}

Test(core_sandbox, unknown_provider_lists_the_choices)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	o.provider = "nope";
	create_err(&o, "local");
	create_err(&o, "no provider 'nope'");
}

Test(core_sandbox, provider_errors_pass_through)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "missing";
	cr_assert_eq(create_err(&o, "image missing not found"), -ENOENT);
}

Test(core_sandbox, dispatch_and_destroy_once)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	sbx_sandbox *sb = NULL;
	cr_assert_eq(sbx_sandbox_create(&sb, rt, &o, NULL), 0);
	cr_assert_str_eq(sbx_sandbox_id(sb), "rec-1");
	cr_assert_str_eq(sbx_sandbox_provider(sb), "recording");
	sbx_exec_opts e = SBX_EXEC_OPTS_INIT;
	sbx_exec_result r;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, &err), -EINVAL, "no argv and no shell");
	sbx_error_free(err);
	err = NULL;
	const char *argv[] = { "true", NULL };
	e.argv = argv;
	e.shell = "true";
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, &err), -EINVAL, "both argv and shell");
	sbx_error_free(err);
	err = NULL;
	e.shell = NULL;
	e.timeout_s = -1;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, &err), -EINVAL);
	sbx_error_free(err);
	e.timeout_s = 0;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, NULL), 0);
	cr_assert_eq(r.exit_code, 7);
	cr_assert_eq(execs, 1);
	/* files need absolute paths */
	err = NULL;
	cr_assert_eq(sbx_sandbox_write_file(sb, "rel", "x", 1, 0644, &err), -EINVAL);
	sbx_error_free(err);
	/* destroy is idempotent; afterwards calls fail with ESRCH */
	cr_assert_eq(sbx_sandbox_destroy(sb, NULL), 0);
	cr_assert_eq(sbx_sandbox_destroy(sb, NULL), 0);
	cr_assert_eq(destroys, 1);
	err = NULL;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, &err), -ESRCH);
	sbx_error_free(err);
	/* optional ops missing from the table are reported, not crashed on */
	err = NULL;
	cr_assert_eq(sbx_sandbox_set_timeout(sb, 10, &err), -ESRCH);
	sbx_error_free(err);
	sbx_sandbox_free(sb);
	err = NULL;
	sbx_sandbox *o2 = NULL;
	cr_assert_eq(sbx_sandbox_open(&o2, rt, NULL, "x", &err), -ENOSYS);
	sbx_error_free(err);
}

Test(core_sandbox, network_names)
{
	sbx_network n;
	cr_assert_eq(sbx_network_parse(&n, "host"), 0);
	cr_assert_eq(n, SBX_NETWORK_HOST);
	cr_assert_str_eq(sbx_network_name(n), "host");
	cr_assert_eq(sbx_network_parse(&n, "bridge"), -EINVAL);
}

Test(core_sandbox, a_terminal_needs_a_provider_that_has_them)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "busybox";
	sbx_sandbox *sb = NULL;
	cr_assert_eq(sbx_sandbox_create(&sb, rt, &o, NULL), 0);
	sbx_exec_opts e = SBX_EXEC_OPTS_INIT;
	e.shell = "true";
	e.tty = 1;
	sbx_exec_result r;
	sbx_error *err = NULL;
	/* Refused before the provider runs it without one. */
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, &err), -ENOSYS);
	cr_assert_not_null(err);
	cr_expect_not_null(strstr(err->msg, "recording"), "%s", err->msg);
	cr_expect_not_null(strstr(err->msg, "tty"), "%s", err->msg);
	sbx_error_free(err);
	cr_assert_eq(execs, 0);
	e.tty = 0;
	cr_assert_eq(sbx_sandbox_exec(&r, sb, &e, NULL), 0);
	cr_assert_eq(execs, 1);
	cr_assert_eq(sbx_sandbox_destroy(sb, NULL), 0);
	sbx_sandbox_free(sb);
}
