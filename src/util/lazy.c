/* SPDX-License-Identifier: MIT */
/* Loading optional libraries at first use (see lazy.h). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "lazy.h"
#include "log.h"

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int try_load(sbx__lazy_lib *lib)
{
	int st = __atomic_load_n(&lib->state, __ATOMIC_ACQUIRE);
	if (st)
		return st;
	pthread_mutex_lock(&load_lock);
	st = lib->state;
	if (!st) {
		/* RTLD_LOCAL: its symbols never interpose on anyone else's. */
		lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
		if (!lib->handle) {
			const char *e = dlerror();
			snprintf(lib->error, sizeof(lib->error), "%s", e ? e : "dlopen failed");
		}
		st = lib->handle ? 1 : -1;
		__atomic_store_n(&lib->state, st, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&load_lock);
	return st;
}

int sbx__lazy_load(sbx__lazy_lib *lib, sbx_error **err)
{
	if (try_load(lib) > 0)
		return 0;
	return sbx_error_set(err, -ENOSYS, "%s (%s) cannot be loaded: %s; install the Debian package %s",
			     lib->name, lib->soname, lib->error, lib->package);
}

void *sbx__lazy_sym(sbx__lazy_lib *lib, const char *name)
{
	if (try_load(lib) < 0) {
		SBX_LOGE("%s: %s (%s) cannot be loaded: %s; install the Debian package %s", name,
			 lib->name, lib->soname, lib->error, lib->package);
		return NULL;
	}
	void *p = dlsym(lib->handle, name);
	if (!p)
		SBX_LOGE("%s: not found in %s (%s)", name, lib->name, lib->soname);
	return p;
}

int sbx__lazy_mapped(const sbx__lazy_lib *lib)
{
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return 0;
	dlclose(h);
	return 1;
}
