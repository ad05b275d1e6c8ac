/* SPDX-License-Identifier: MIT */
/*
 * Private pieces of the task layer shared between the episode driver, the
 * registries, the loader front end and the image resolve stage. Each
 * connector's own pieces live in its folder (src/connectors/NAME/).
 */
#ifndef SBX_TASKS_TASK_INT_H
#define SBX_TASKS_TASK_INT_H

#include <stddef.h>

#include <sbx/sys/connector.h>
#include <sbx/task.h>

/* task_image.c: the task's image (prebuilt, built or pulled), the build
 * bounded by timeout_s; `provider` (NULL = from the environment) picks E2B
 * templates for the e2b backend. *out is filled on 0. */
int sbx__task_resolve(sbx_task_image *out, sbx_runtime *rt, const sbx_task *t, int force,
		      double timeout_s, sbx_output_fn on_output, void *payload, const char *provider,
		      sbx_error **err);

/* registry.c: the connector sbx_task_load() falls back to (the first one). */
const sbx_connector_ops *sbx__connector_default(void);
/* registry.c: the agent of episodes that name none (the first one). */
const sbx_agent_ops *sbx__agent_default(void);

/* The episode's whole wall clock from the environment (see sbx_episode_opts). */
double sbx__episode_default_max_s(void);

#endif
