/* SPDX-License-Identifier: MIT */
/* Private to src/core: the runtime struct. */
#ifndef SBX_CORE_RUNTIME_INT_H
#define SBX_CORE_RUNTIME_INT_H

#include <pthread.h>
#include <sbx/sys/provider.h>

#define SBX_MAX_PROVIDERS 16

struct sbx_runtime {
	char *state_dir;
	char *image_dir;
	char *default_provider;
	pthread_mutex_t lock;          /* guards ctx[] initialisation */
	const sbx_provider_ops *ops[SBX_MAX_PROVIDERS];
	void *ctx[SBX_MAX_PROVIDERS];
};

/* Finds a provider and its per-runtime context, initialising it once. */
int sbx__runtime_provider(const sbx_provider_ops **ops_out, void **ctx_out, sbx_runtime *rt,
			  const char *name, sbx_error **err);

#endif
