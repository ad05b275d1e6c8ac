/* SPDX-License-Identifier: MIT */
/*
 * The loader front end: picks the connector of a task directory (named, or
 * the first that claims it, else the default one so its errors say what is
 * missing), lets it fill the task, frees what tasks own, lists the tasks of
 * a directory.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_int.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/str.h"

int sbx_task_load_as(sbx_task **out, const char *connector, const char *dir, sbx_error **err)
{
	*out = NULL;
	if (!dir || !*dir)
		return sbx_error_set(err, -EINVAL, "task directory not given");
	const sbx_connector_ops *ops = NULL;
	if (connector) {
		int r = sbx_connector_lookup(&ops, connector, err);
		if (r < 0)
			return r;
	} else {
		ops = sbx_connector_detect(dir);
		if (!ops)
			ops = sbx__connector_default();
	}
	sbx_task *t = xcalloc(1, sizeof(*t));
	t->connector = ops;
	int r = ops->load(t, dir, err);
	if (r < 0) {
		sbx_task_free(t);
		return r;
	}
	*out = t;
	return 0;
}

int sbx_task_load(sbx_task **out, const char *dir, sbx_error **err)
{
	return sbx_task_load_as(out, NULL, dir, err);
}

void sbx_task_free(sbx_task *t)
{
	if (!t)
		return;
	if (t->connector && t->connector->task_free)
		t->connector->task_free(t);
	free(t->name);
	free(t->dir);
	free(t->toml_path);
	free(t->schema_version);
	free(t->registry_name);
	free(t->instruction);
	free(t->docker_image);
	free(t->os);
	sbx__strv_free(t->env);
	sbx__strv_free(t->verifier_env);
	sbx__strv_free(t->solution_env);
	free(t->workdir);
	free(t->network_mode);
	sbx__strv_free(t->allowed_hosts);
	free(t->agent_user);
	free(t->verifier_user);
	sbx__strv_free(t->warnings);
	free(t);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sbx_task_list(char ***names_out, size_t *n_out, const char *tasks_dir, sbx_error **err)
{
	*names_out = NULL;
	if (n_out)
		*n_out = 0;
	_cleanup_closedir_ DIR *d = opendir(tasks_dir);
	if (!d)
		return sbx_error_setsys(err, -errno, errno, "tasks directory %s", tasks_dir);
	char **v = xcalloc(1, sizeof(char *));
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", tasks_dir, de->d_name);
		if (sbx_connector_detect(sub))
			sbx__strv_push(&v, de->d_name);
	}
	size_t n = sbx__strv_len((const char *const *)v);
	qsort(v, n, sizeof(char *), cmp_str);
	*names_out = v;
	if (n_out)
		*n_out = n;
	return 0;
}

void sbx_task_names_free(char **names)
{
	sbx__strv_free(names);
}
