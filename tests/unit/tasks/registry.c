/* SPDX-License-Identifier: MIT */
/*
 * The connector and agent registries (src/tasks/registry.c): the built-ins,
 * aliases, registration checks, and that every unknown name, wherever it is
 * given (lookup, sbx_task_load_as, episodes, batches), is an error listing
 * the known names. Episodes with a connector of the test's own run in
 * tests/integration/connector.c (they need a sandbox).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/sbx.h>
#include <sbx/sys/connector.h>

static int fake_probe(const char *dir)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/fake-task", dir);
	return access(p, F_OK) == 0;
}

static int fake_load(sbx_task *t, const char *dir, sbx_error **err)
{
	(void)err;
	t->name = strdup("fake");
	t->dir = strdup(dir);
	t->instruction = strdup("do nothing");
	t->os = strdup("linux");
	t->network_mode = strdup("no-network");
	t->env = calloc(1, sizeof(char *));
	t->verifier_env = calloc(1, sizeof(char *));
	t->solution_env = calloc(1, sizeof(char *));
	t->connector_data = strdup("private");
	return 0;
}

static void fake_task_free(sbx_task *t)
{
	free(t->connector_data);
}

static int fake_spec(sbx_sandbox_opts *so, const sbx_task *t, sbx_error **err)
{
	(void)so; (void)t; (void)err;
	return 0;
}

static int fake_inputs(sbx_agent_inputs *in, const sbx_task *t, sbx_error **err)
{
	(void)in; (void)t; (void)err;
	return 0;
}

static int fake_verify(sbx_episode *ep, sbx_verdict *v, sbx_error **err)
{
	(void)ep; (void)v;
	return sbx_error_set(err, -ENOSYS, "fake");
}

static int fake_run(sbx_episode *ep, sbx_agent_outcome *out, sbx_error **err)
{
	(void)ep; (void)out; (void)err;
	return 0;
}

#define FAKE_CONNECTOR(n) { .version = SBX_CONNECTOR_OPS_VERSION, .name = n, \
	.probe = fake_probe, .load = fake_load, .task_free = fake_task_free, \
	.sandbox_spec = fake_spec, .agent_inputs = fake_inputs, .verify = fake_verify }

Test(tasks_registry, built_ins)
{
	const sbx_connector_ops *h = sbx_connector_find("harbor");
	cr_assert_not_null(h);
	cr_assert_str_eq(h->name, "harbor");
	cr_assert_null(sbx_connector_find("nope"));
	cr_assert_null(sbx_connector_find(NULL));
	const sbx_agent_ops *o = sbx_agent_find("oracle");
	cr_assert_not_null(o);
	cr_assert_eq(sbx_agent_find("golden"), o, "golden is the oracle's alias");
	cr_assert_str_eq(sbx_agent_find("nop")->name, "nop");
	cr_assert_str_eq(sbx_agent_find("policy")->name, "policy");
	cr_assert_null(sbx_agent_find("claude"));
	cr_assert_null(sbx_agent_find(NULL));
	char names[256];
	sbx_connector_names(names, sizeof(names));
	cr_assert_str_eq(names, "harbor");
	sbx_agent_names(names, sizeof(names));
	cr_assert_str_eq(names, "oracle, nop, policy");
}

Test(tasks_registry, unknown_names_list_the_known_ones)
{
	const sbx_connector_ops *c = (const void *)1;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_connector_lookup(&c, "openenv", &err), -EINVAL);
	cr_assert_null(c);
	cr_assert_str_eq(err->msg, "unknown connector \"openenv\" (known: harbor)");
	sbx_error_free(err);
	err = NULL;
	const sbx_agent_ops *a = (const void *)1;
	cr_assert_eq(sbx_agent_lookup(&a, "claude", &err), -EINVAL);
	cr_assert_null(a);
	cr_assert_str_eq(err->msg, "unknown agent \"claude\" (known: oracle, nop, policy)");
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_agent_lookup(&a, "golden", NULL), 0);
	cr_assert_str_eq(a->name, "oracle");
	sbx_task *t = (void *)1;
	cr_assert_eq(sbx_task_load_as(&t, "openenv", "/nonexistent", &err), -EINVAL);
	cr_assert_null(t);
	cr_assert_not_null(strstr(err->msg, "(known: harbor)"), "%s", err->msg);
	sbx_error_free(err);
}

Test(tasks_registry, unknown_agent_stops_episodes_and_batches_before_anything_runs)
{
	char dir[] = "/tmp/sbx-unit-registry-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	sbx_runtime_opts ro = SBX_RUNTIME_OPTS_INIT;
	ro.state_dir = dir;
	ro.image_dir = dir;
	sbx_runtime *rt = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_runtime_new(&rt, &ro, &err), 0, "%s", err ? err->msg : "");
	sbx_task t = { .name = "t" };
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	o.agent = "claude";
	sbx_episode_result r;
	cr_assert_eq(sbx_episode_run(&r, rt, &t, &o, &err), -EINVAL);
	cr_assert_str_eq(err->msg, "unknown agent \"claude\" (known: oracle, nop, policy)");
	sbx_error_free(err);
	err = NULL;
	sbx_batch_opts bo = SBX_BATCH_OPTS_INIT;
	bo.episode.agent = "claude";
	sbx_task *tasks[] = { &t };
	cr_assert_eq(sbx_episode_run_batch(&r, rt, tasks, 1, &bo, &err), -EINVAL);
	cr_assert_not_null(strstr(err->msg, "(known: oracle, nop, policy)"), "%s", err->msg);
	sbx_error_free(err);
	sbx_runtime_free(rt);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(tasks_registry, register_checks_version_ops_and_names)
{
	static const sbx_connector_ops good = FAKE_CONNECTOR("fake");
	static const sbx_connector_ops dup = FAKE_CONNECTOR("harbor");
	static sbx_connector_ops old = FAKE_CONNECTOR("old");
	old.version = 0;
	static sbx_connector_ops partial = FAKE_CONNECTOR("partial");
	partial.verify = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_connector_register(&good, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_connector_find("fake"), &good);
	cr_assert_eq(sbx_connector_register(&old, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_connector_register(&partial, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_connector_register(&dup, &err), -EEXIST);
	cr_assert_not_null(strstr(err->msg, "harbor"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_connector_register(NULL, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	char names[256];
	sbx_connector_names(names, sizeof(names));
	cr_assert_str_eq(names, "harbor, fake");
	const sbx_connector_ops *c;
	cr_assert_eq(sbx_connector_lookup(&c, "nope", &err), -EINVAL);
	cr_assert_str_eq(err->msg, "unknown connector \"nope\" (known: harbor, fake)");
	sbx_error_free(err);
	err = NULL;

	static const char *const clash[] = { "golden", NULL };
	static const sbx_agent_ops a_good = { .version = SBX_AGENT_OPS_VERSION, .name = "scripted",
					      .run = fake_run };
	static const sbx_agent_ops a_alias = { .version = SBX_AGENT_OPS_VERSION, .name = "other",
					       .aliases = clash, .run = fake_run };
	static const sbx_agent_ops a_norun = { .version = SBX_AGENT_OPS_VERSION, .name = "norun" };
	static const sbx_agent_ops a_old = { .version = 99, .name = "old", .run = fake_run };
	cr_assert_eq(sbx_agent_register(&a_good, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(sbx_agent_find("scripted"), &a_good);
	cr_assert_eq(sbx_agent_register(&a_good, &err), -EEXIST);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_agent_register(&a_alias, &err), -EEXIST, "an alias may not shadow a name");
	cr_assert_not_null(strstr(err->msg, "\"golden\" taken by oracle"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_agent_register(&a_norun, &err), -EINVAL);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_agent_register(&a_old, &err), -EINVAL);
	sbx_error_free(err);
	sbx_agent_names(names, sizeof(names));
	cr_assert_str_eq(names, "oracle, nop, policy, scripted");
}

Test(tasks_registry, load_picks_the_connector_that_claims_the_directory)
{
	static const sbx_connector_ops fake = FAKE_CONNECTOR("fake");
	cr_assert_eq(sbx_connector_register(&fake, NULL), 0);
	char dir[] = "/tmp/sbx-unit-detect-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char sub[600], marker[700];
	snprintf(sub, sizeof(sub), "%s/one", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	snprintf(marker, sizeof(marker), "%s/fake-task", sub);
	FILE *f = fopen(marker, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(sbx_connector_detect(sub), &fake);
	cr_assert_null(sbx_connector_detect(dir));
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx_task_load(&t, sub, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(t->connector, &fake);
	cr_assert_str_eq(t->connector_data, "private");
	sbx_task_free(t);
	/* Listing finds tasks of every format. */
	char **names = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_task_list(&names, &n, dir, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(names[0], "one");
	sbx_task_names_free(names);
	/* A directory nobody claims gets the default connector, whose errors
	 * name what is missing; a named connector is used even if it would not
	 * claim the directory. */
	cr_assert_eq(sbx_task_load(&t, dir, &err), -ENOENT);
	cr_assert_not_null(strstr(err->msg, "task.toml: missing"), "%s", err->msg);
	sbx_error_free(err);
	err = NULL;
	cr_assert_eq(sbx_task_load_as(&t, "fake", dir, &err), 0, "%s", err ? err->msg : "");
	cr_assert_eq(t->connector, &fake);
	sbx_task_free(t);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}
