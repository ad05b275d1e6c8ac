/* SPDX-License-Identifier: MIT */
/* A provider with only the required ops: every optional op the core
 * dispatches answers -ENOSYS with a message naming the provider and the op,
 * and never calls through a NULL pointer. Also the registry's checks of a
 * table (version 1, incomplete process ops, alias clashes) and what it says
 * about itself (descriptions, aliases, default). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/sbx.h>
#include <sbx/backend.h>
#include <sbx/sys/faulty.h>
#include <sbx/sys/provider.h>

static int t_create(void **sb, char **id, void *ctx, const sbx_sandbox_opts *o, sbx_error **err)
{
	(void)ctx;
	(void)o;
	(void)err;
	*sb = strdup("handle");
	*id = strdup("tiny-1");
	return 0;
}

static int t_exec(sbx_exec_result *out, void *sb, const sbx_exec_opts *o, sbx_error **err)
{
	(void)out;
	(void)sb;
	(void)o;
	(void)err;
	return 0;
}

static int t_destroy(void *sb, sbx_error **err)
{
	(void)sb;
	(void)err;
	return 0;
}

static void t_close(void *sb)
{
	free(sb);
}

static int t_start(void **proc, struct sbx_process_fds *fds, void *sb, const sbx_exec_opts *o, int keep_stdin,
		   sbx_error **err)
{
	(void)sb;
	(void)o;
	(void)keep_stdin;
	(void)err;
	*proc = strdup("proc");
	fds->pid = 42;
	return 0;
}

static int t_poll(void *proc, int *status, int *timed_out, int block, sbx_error **err)
{
	(void)proc;
	(void)status;
	(void)timed_out;
	(void)block;
	(void)err;
	return 0;
}

static void t_free(void *proc, int kill)
{
	(void)kill;
	free(proc);
}

static const char *const tiny_aliases[] = { "wee", NULL };
static const sbx_provider_desc tiny_desc = { .name = "tiny", .aliases = tiny_aliases, .title = "Tiny" };
static const sbx_provider_ops tiny = {
	.version = SBX_PROVIDER_OPS_VERSION, .name = "tiny", .desc = &tiny_desc,
	.create = t_create, .exec = t_exec, .destroy = t_destroy, .close = t_close,
};
/* Streams processes but cannot signal them. */
static const sbx_provider_ops tiny_proc = {
	.version = SBX_PROVIDER_OPS_VERSION, .name = "tinyproc",
	.create = t_create, .exec = t_exec, .destroy = t_destroy, .close = t_close,
	.process_start = t_start, .process_poll = t_poll, .process_free = t_free,
};

static sbx_runtime *rt;
static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/sbx-guards-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	sbx_runtime_opts o = SBX_RUNTIME_OPTS_INIT;
	o.state_dir = dir;
	o.image_dir = dir;
	cr_assert_eq(sbx_runtime_new(&rt, &o, NULL), 0);
	sbx_error *err = NULL;
	int r = sbx_provider_register(&tiny, &err);
	cr_assert(r == 0 || r == -EEXIST, "%s", err ? err->msg : "");
	sbx_error_free(err);
	sbx_provider_register(&tiny_proc, NULL);
}

static void teardown(void)
{
	sbx_runtime_free(rt);
	rmdir(dir);
}

TestSuite(core_guards, .init = setup, .fini = teardown);

static sbx_sandbox *make(const char *provider)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "img";
	o.provider = provider;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_sandbox_create(&sb, rt, &o, &err), 0, "%s", err ? err->msg : "");
	return sb;
}

/* r must be -ENOSYS and err must read "PROVIDER: OP is not supported". */
static void enosys(int r, sbx_error *err, const char *provider, const char *op)
{
	char want[128];
	snprintf(want, sizeof(want), "%s: %s is not supported", provider, op);
	cr_assert_eq(r, -ENOSYS, "%s: got %d", op, r);
	cr_assert_not_null(err, "%s: no error set", op);
	cr_assert_str_eq(err->msg, want);
	sbx_error_free(err);
}

/* The call's return value first, then its error (evaluation order). */
#define CHECK(call, provider, op)                  \
	do {                                       \
		e = NULL;                          \
		int r_ = (call);                   \
		enosys(r_, e, provider, op);       \
	} while (0)

Test(core_guards, every_optional_op_names_provider_and_op)
{
	sbx_sandbox *sb = make("tiny");
	sbx_error *e = NULL;
	void *data = NULL;
	size_t len = 0;
	sbx_file_info fi, *fv = NULL;
	sbx_sandbox_info *iv = NULL;
	int fd = -1;
	sbx_process *p = NULL;
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = "true";

	CHECK(sbx_sandbox_write_file(sb, "/f", "x", 1, 0644, &e), "tiny", "write_file");
	CHECK(sbx_sandbox_read_file(&data, &len, sb, "/f", 0, &e), "tiny", "read_file");
	CHECK(sbx_sandbox_upload(sb, "/tmp", "/d", &e), "tiny", "upload");
	CHECK(sbx_sandbox_download(sb, "/d", "/tmp/x", &e), "tiny", "download");
	CHECK(sbx_sandbox_set_timeout(sb, 10, &e), "tiny", "set_timeout");
	CHECK(sbx_process_start(&p, sb, &x, 0, &e), "tiny", "process_start");
	CHECK(sbx_sandbox_stat(&fi, sb, "/f", &e), "tiny", "stat");
	CHECK(sbx_sandbox_list_dir(&fv, &len, sb, "/", 1, &e), "tiny", "list_dir");
	CHECK(sbx_sandbox_mkdir(sb, "/d", 0755, &e), "tiny", "mkdir");
	CHECK(sbx_sandbox_rename(sb, "/a", "/b", &e), "tiny", "rename");
	CHECK(sbx_sandbox_remove(sb, "/a", 0, &e), "tiny", "remove");
	CHECK(sbx_sandbox_chown(sb, "/a", "root", &e), "tiny", "chown");
	CHECK(sbx_sandbox_path_fd(&fd, sb, "/a", &e), "tiny", "path_fd");
	CHECK(sbx_sandbox_connect_port(&fd, sb, 8000, &e), "tiny", "connect_port");
	e = NULL;
	cr_assert_eq(sbx_sandbox_connect_port(&fd, sb, 0, &e), -EINVAL);
	cr_assert_not_null(strstr(e->msg, "1..65535"), "%s", e->msg);
	sbx_error_free(e);
	e = NULL;
	cr_assert_eq(sbx_sandbox_connect_port(&fd, sb, 65536, &e), -EINVAL);
	sbx_error_free(e);
	cr_assert_eq(fd, -1);
	CHECK(sbx_sandbox_pause(sb, &e), "tiny", "pause");
	CHECK(sbx_sandbox_resume(sb, &e), "tiny", "resume");
	sbx_sandbox *o2 = NULL;
	CHECK(sbx_sandbox_open(&o2, rt, "tiny", "tiny-1", &e), "tiny", "open");
	CHECK(sbx_sandbox_list(&iv, &len, rt, "tiny", NULL, &e), "tiny", "list");
	CHECK(sbx_sandbox_destroy_id(rt, "tiny", "tiny-1", &e), "tiny", "destroy_id");
	/* an alias reaches the same provider */
	CHECK(sbx_sandbox_list(&iv, &len, rt, "WEE", NULL, &e), "tiny", "list");
	cr_assert_eq(sbx_sandbox_destroy(sb, NULL), 0);
	sbx_sandbox_free(sb);
}

Test(core_guards, process_signal_is_guarded_too)
{
	sbx_sandbox *sb = make("tinyproc");
	sbx_exec_opts x = SBX_EXEC_OPTS_INIT;
	x.shell = "sleep 1";
	sbx_process *p = NULL;
	cr_assert_eq(sbx_process_start(&p, sb, &x, 0, NULL), 0);
	sbx_error *e = NULL;
	CHECK(sbx_process_signal(p, SIGTERM, &e), "tinyproc", "process_signal");
	sbx_process_free(p);
	sbx_sandbox_free(sb);
}

static int never_called(int *fd, void *sb, unsigned port, sbx_error **err)
{
	(void)fd;
	(void)sb;
	(void)port;
	(void)err;
	cr_assert_fail("the core read connect_port from a version 2 table");
	return 0;
}

/* A version 2 table predates connect_port: accepted, and the core never
 * reads the field (here deliberately set, as garbage past a real v2 table's end). */
Test(core_guards, version_2_tables_get_enosys_for_newer_ops)
{
	static const sbx_provider_ops v2 = { .version = 2, .name = "oldtwo", .create = t_create, .exec = t_exec,
					     .destroy = t_destroy, .close = t_close, .connect_port = never_called };
	sbx_error *e = NULL;
	int r = sbx_provider_register(&v2, &e);
	cr_assert(r == 0 || r == -EEXIST, "%s", e ? e->msg : "");
	sbx_error_free(e);
	sbx_sandbox *sb = make("oldtwo");
	int fd = -1;
	CHECK(sbx_sandbox_connect_port(&fd, sb, 8000, &e), "oldtwo", "connect_port");
	sbx_sandbox_free(sb);
}

static int info_never_called(sbx_sandbox_info *out, void *sb, sbx_error **err)
{
	(void)out;
	(void)sb;
	(void)err;
	cr_assert_fail("the core read info from a version 6 table");
	return 0;
}

/* A version 6 table ends before `info`: sbx_sandbox_info_get lists instead
 * (here the table cannot list: -ENOSYS), never calling the field. */
Test(core_guards, version_6_tables_are_listed_not_asked_for_info)
{
	static const sbx_provider_ops v6 = { .version = 6, .name = "oldsix", .create = t_create, .exec = t_exec,
					     .destroy = t_destroy, .close = t_close, .info = info_never_called };
	sbx_error *e = NULL;
	int r = sbx_provider_register(&v6, &e);
	cr_assert(r == 0 || r == -EEXIST, "%s", e ? e->msg : "");
	sbx_error_free(e);
	e = NULL;
	sbx_sandbox *sb = make("oldsix");
	sbx_sandbox_info *one = NULL;
	cr_assert_eq(sbx_sandbox_info_get(&one, sb, &e), -ENOSYS);
	cr_assert_null(one);
	cr_assert_not_null(strstr(e->msg, "list"), "%s", e->msg);
	sbx_error_free(e);
	sbx_sandbox_free(sb);
}

Test(core_guards, registry_refuses_bad_tables)
{
	sbx_error *e = NULL;
	static const sbx_provider_ops v1 = { .version = 1, .name = "old",
					     .create = t_create, .exec = t_exec, .destroy = t_destroy };
	cr_assert_eq(sbx_provider_register(&v1, &e), -EINVAL);
	cr_assert_not_null(strstr(e->msg, "version 1"), "%s", e->msg);
	cr_assert_not_null(strstr(e->msg, "old"), "%s", e->msg);
	sbx_error_free(e);
	e = NULL;
	static const sbx_provider_ops half = { .version = SBX_PROVIDER_OPS_VERSION, .name = "half",
					       .create = t_create, .exec = t_exec, .destroy = t_destroy,
					       .process_start = t_start, .process_free = t_free };
	cr_assert_eq(sbx_provider_register(&half, &e), -EINVAL);
	cr_assert_not_null(strstr(e->msg, "process_poll"), "%s", e->msg);
	sbx_error_free(e);
	e = NULL;
	static const char *const clash[] = { "agentenv", NULL };
	static const sbx_provider_desc cd = { .name = "clash", .aliases = clash };
	static const sbx_provider_ops c = { .version = SBX_PROVIDER_OPS_VERSION, .name = "clash", .desc = &cd,
					    .create = t_create, .exec = t_exec, .destroy = t_destroy };
	cr_assert_eq(sbx_provider_register(&c, &e), -EEXIST);
	cr_assert_not_null(strstr(e->msg, "agentenv"), "%s", e->msg);
	sbx_error_free(e);
	cr_assert_null(sbx_provider_find("clash"));
}

Test(core_guards, descriptions_and_names)
{
	const sbx_provider_desc *d = sbx_provider_default();
	cr_assert_not_null(d);
	cr_assert_not_null(sbx_provider_desc_ops(d), "the default can create sandboxes");
	cr_assert(d->caps & SBX_PROVIDER_CAP_HOST);
	cr_assert_eq(sbx_provider_host(), d);
	cr_assert_eq(sbx_provider_describe(" Wee "), &tiny_desc);
	cr_assert_eq(sbx_provider_find("wee"), &tiny);
	/* described only: a name, a credential, no ops */
	const sbx_provider_desc *m = sbx_provider_describe("modal");
	cr_assert_not_null(m);
	cr_assert_not_null(m->cred);
	cr_assert_null(sbx_provider_desc_ops(m));
	cr_assert_null(sbx_provider_find("modal"));
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = "img";
	o.provider = "modal";
	sbx_sandbox *sb = NULL;
	sbx_error *e = NULL;
	cr_assert_eq(sbx_sandbox_create(&sb, rt, &o, &e), -ENOENT);
	cr_assert_not_null(strstr(e->msg, "provider 'modal' is described but not implemented"), "%s", e->msg);
	sbx_error_free(e);
	const char *names = sbx_backend_names();
	cr_assert_not_null(strstr(names, "tiny"), "%s", names);
	cr_assert_not_null(strstr(names, "wee"), "%s", names);
}

static int lines, failed;
static char last_check[64];

static void collect(void *payload, int ok, const char *check, const char *fmt, ...)
{
	(void)payload;
	(void)fmt;
	lines++;
	failed += !ok;
	snprintf(last_check, sizeof(last_check), "%s", check);
}

Test(core_guards, faulty_describes_itself)
{
	cr_assert_eq(sbx_faulty_register(NULL), 0);
	const sbx_provider_desc *d = sbx_provider_describe("faulty");
	cr_assert_not_null(d);
	cr_assert_eq(sbx_provider_desc_ops(d), sbx_provider_find("faulty"));
	cr_assert_null(d->cred, "wraps local: no credential");
	cr_assert_null(d->task_image, "the host image store, as local");
	cr_assert_not_null(d->doctor);
	sbx_doctor_ctx dc = { .backend = d->name, .emit = collect };
	d->doctor(&dc);
	cr_assert_eq(lines, 2);
	cr_assert_eq(failed, 0);
	cr_assert_str_eq(last_check, "injection");
	/* a registered provider is a backend name too */
	char *b = NULL;
	cr_assert_eq(sbx_backend_resolve(&b, "Faulty", NULL), 0);
	cr_assert_str_eq(b, "faulty");
	free(b);
}
