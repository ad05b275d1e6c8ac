/* SPDX-License-Identifier: MIT */
/* Helpers of the Harbor episode tests (episode.c, episode_cli.c): the busybox
 * fixture tasks in tests/fixtures/tasks, loaded and run on the local provider. */
#ifndef SBX_TEST_EPISODE_COMMON_H
#define SBX_TEST_EPISODE_COMMON_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include <sbx/task.h>

#include "common.h"

static inline char *fixture(const char *name)
{
	const char *src = getenv("SBX_SOURCE_ROOT");
	cr_assert_not_null(src, "SBX_SOURCE_ROOT not set");
	char *p = NULL;
	cr_assert(asprintf(&p, "%s/tests/fixtures/tasks/%s", src, name) > 0);
	return p;
}

static inline sbx_task *load(const char *name)
{
	char *dir = fixture(name);
	sbx_task *t = NULL;
	sbx_error *err = NULL;
	int r = sbx_task_load(&t, dir, &err);
	cr_assert_eq(r, 0, "load %s: %s", dir, err ? err->msg : "?");
	free(dir);
	return t;
}
static inline sbx_episode_result run_opts(const char *name, sbx_episode_opts *o)
{
	sbx_task *t = load(name);
	sbx_episode_result r;
	sbx_error *err = NULL;
	int rc = sbx_episode_run(&r, rt, t, o, &err);
	cr_assert_eq(rc, 0, "episode %s: %s", name, err ? err->msg : "?");
	sbx_task_free(t);
	return r;
}

static inline sbx_episode_result run(const char *name)
{
	sbx_episode_opts o = SBX_EPISODE_OPTS_INIT;
	return run_opts(name, &o);
}

static inline void expect(const sbx_episode_result *r, sbx_episode_status st)
{
	cr_assert_eq(r->status, st, "%s: status %s, want %s (detail: %s)", r->task,
		     sbx_episode_status_name(r->status), sbx_episode_status_name(st),
		     r->detail ? r->detail : "-");
}

#endif
