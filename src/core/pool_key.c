/* SPDX-License-Identifier: MIT */
/*
 * The pool key: a spec rendered field by field (length-prefixed, so no two
 * specs render alike), without ttl_s, which a hand-out sets. Labels are
 * sorted: their order means nothing to listing or gc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/sandbox.h>

#include "../util/alloc.h"
#include "../util/buf.h"
#include "../util/str.h"
#include "runtime_int.h"

static void put_s(sbx_buf *b, const char *s)
{
	if (!s) {
		(void)sbx__buf_append(b, "-;", 2);
		return;
	}
	char n[24];
	int k = snprintf(n, sizeof(n), "%zu:", strlen(s));
	(void)sbx__buf_append(b, n, (size_t)k);
	(void)sbx__buf_append(b, s, strlen(s));
	(void)sbx__buf_append(b, ";", 1);
}

static void put_v(sbx_buf *b, const char *const *v)
{
	char n[24];
	int k = snprintf(n, sizeof(n), "[%zu", sbx__strv_len(v));
	(void)sbx__buf_append(b, n, (size_t)k);
	for (size_t i = 0; v && v[i]; i++)
		put_s(b, v[i]);
	(void)sbx__buf_append(b, "]", 1);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *sbx__pool_key(const char *provider, const sbx_sandbox_opts *o, char *const *labels)
{
	sbx_buf b;
	sbx__buf_init(&b, (size_t)1 << 24);
	char num[160];
	put_s(&b, provider);
	put_s(&b, o->image);
	snprintf(num, sizeof(num), "%.17g/%u/%u/%u/%d/%d/%d/%u/%d/%d;", o->cpus, o->memory_mb, o->storage_mb,
		 o->pids_max, (int)o->network, o->detach, (int)o->userns, o->nofile_max, o->net_raw,
		 (int)o->scratch);
	(void)sbx__buf_append(&b, num, strlen(num));
	put_v(&b, o->env);
	put_s(&b, o->workdir);
	put_s(&b, o->user);
	put_s(&b, o->hostname);
	put_s(&b, o->upper_dir);
	put_v(&b, o->allow_out);
	put_v(&b, o->deny_out);
	char **sorted = sbx__strv_dup((const char *const *)labels);
	if (sorted) /* none: qsort(NULL, 0) is undefined */
		qsort(sorted, sbx__strv_len((const char *const *)sorted), sizeof(char *), cmp_str);
	put_v(&b, (const char *const *)sorted);
	sbx__strv_free(sorted);
	return sbx__buf_steal(&b, NULL);
}
