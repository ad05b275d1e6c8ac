/* SPDX-License-Identifier: MIT */
/*
 * How the local provider describes itself to the registry: the default
 * backend (it spends nobody's quota), no credential, sandboxes on this
 * machine, and its `sbx doctor` checks: root, kernel features, cgroups, the
 * state and image directories, and one real sandbox.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <sbx/image.h>
#include <sbx/sys/provider.h>

static int has_line(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char line[512];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void disk(const sbx_doctor_ctx *d, const char *what, const char *path, double want_gib)
{
	struct statvfs s;
	if (statvfs(path, &s) < 0) {
		d->emit(d->payload, 0, what, "%s: %s", path, strerror(errno));
		return;
	}
	double gib = (double)s.f_bavail * (double)s.f_frsize / (1024.0 * 1024 * 1024);
	d->emit(d->payload, gib >= want_gib, what, "%s: %.1f GiB free (want >= %.0f)", path, gib, want_gib);
}

static void try_sandbox(const sbx_doctor_ctx *d, sbx_runtime *rt, const char *use)
{
	sbx_sandbox_opts o = SBX_SANDBOX_OPTS_INIT;
	o.image = use;
	o.provider = d->backend;
	sbx_sandbox *sb = NULL;
	sbx_error *err = NULL;
	int r = sbx_sandbox_create(&sb, rt, &o, &err);
	if (r == 0) {
		sbx_exec_opts e = SBX_EXEC_OPTS_INIT;
		e.shell = "echo ok";
		sbx_exec_result res;
		r = sbx_sandbox_exec(&res, sb, &e, &err);
		int ok = r == 0 && res.out && strcmp(res.out, "ok\n") == 0;
		sbx_exec_result_free(&res);
		r = sbx_sandbox_destroy(sb, ok ? &err : NULL);
		sbx_sandbox_free(sb);
		d->emit(d->payload, ok && r == 0, "sandbox", "create, exec and destroy on %s", use);
	} else {
		d->emit(d->payload, 0, "sandbox", "create on %s: %s", use, err ? err->msg : "?");
	}
	sbx_error_free(err);
}

static void local_doctor(const sbx_doctor_ctx *d)
{
	d->emit(d->payload, geteuid() == 0, "root",
		geteuid() == 0 ? "running as root" : "the local provider needs root");
	struct utsname u;
	uname(&u);
	int maj = 0, min = 0;
	sscanf(u.release, "%d.%d", &maj, &min);
	d->emit(d->payload, maj > 5 || (maj == 5 && min >= 8), "kernel", "%s (need >= 5.8: openat2, pidfd, fsopen)",
		u.release);
	d->emit(d->payload, has_line("/proc/filesystems", "overlay"), "overlayfs", "in /proc/filesystems");
	d->emit(d->payload, has_line("/proc/self/status", "Seccomp:"), "seccomp", "filter mode supported");
	int v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 &&
		 has_line("/sys/fs/cgroup/cgroup.controllers", "memory");
	int v1 = access("/sys/fs/cgroup/memory/memory.failcnt", F_OK) == 0 &&
		 access("/sys/fs/cgroup/pids/cgroup.procs", F_OK) == 0;
	int hybrid = access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0 &&
		     has_line("/sys/fs/cgroup/unified/cgroup.controllers", "memory");
	d->emit(d->payload, v1 || v2 || hybrid, "cgroups", "%s",
		v2 || hybrid ? "v2 with memory+pids" : v1 ? "v1 memory+pids+cpu" : "none usable: limits unavailable");
	sbx_runtime *rt = d->runtime ? d->runtime() : NULL;
	if (!rt) {
		d->emit(d->payload, 0, "state dir", "cannot open the runtime");
		return;
	}
	d->emit(d->payload, access(sbx_runtime_state_dir(rt), W_OK) == 0, "state dir", "%s writable",
		sbx_runtime_state_dir(rt));
	disk(d, "image disk", access(sbx_runtime_image_dir(rt), F_OK) == 0 ? sbx_runtime_image_dir(rt) : "/", 5);
	sbx_image **imgs = NULL;
	size_t n = 0;
	sbx_image_list(&imgs, &n, rt, NULL);
	const char *use = d->image ? d->image : n ? imgs[0]->name : NULL;
	d->emit(d->payload, use != NULL, "images", "%zu in %s%s", n, sbx_runtime_image_dir(rt),
		use ? "" : " (import one: sbx image import|bootstrap)");
	if (use)
		try_sandbox(d, rt, use);
	sbx_image_list_free(imgs, n);
	sbx_runtime_free(rt);
}

const sbx_provider_desc sbx_provider_local_desc = {
	.name = "local",
	.title = "local",
	.caps = SBX_PROVIDER_CAP_DEFAULT | SBX_PROVIDER_CAP_HOST | SBX_PROVIDER_CAP_TTL_EXTEND |
		SBX_PROVIDER_CAP_PAUSE | SBX_PROVIDER_CAP_TEMPLATES | SBX_PROVIDER_CAP_PORTS | SBX_PROVIDER_CAP_NET_NONE |
		SBX_PROVIDER_CAP_NET_HOST | SBX_PROVIDER_CAP_NET_INTERNET,
	.doctor = local_doctor,
	/* task_image NULL: the host's image store (prebuilt, template build, pull). */
};
