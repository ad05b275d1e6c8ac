/* SPDX-License-Identifier: MIT */
/*
 * The default seccomp filter, compiled once per process with libseccomp and
 * handed to each sandbox's init as raw BPF. Allow by default (like Docker's
 * profile in effect), deny what lets a process reach the kernel or host
 * beyond its sandbox: mounts, namespaces, tracing, modules, keyrings, BPF,
 * clocks, reboot, swap, io_uring. Denied calls fail with EPERM; clone3 fails
 * with ENOSYS so libc falls back to clone, whose namespace flags we can check.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../util/alloc.h"
#include "../../util/cleanup.h"
#include "local_int.h"

const char *const sbx__seccomp_denied[] = {
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "unshare", "setns", "ptrace", "process_vm_readv",
	"process_vm_writev", "kcmp", "kexec_load", "kexec_file_load", "bpf", "keyctl",
	"add_key", "request_key", "reboot", "swapon", "swapoff", "init_module",
	"finit_module", "delete_module", "acct", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "syslog", "perf_event_open", "open_by_handle_at",
	"name_to_handle_at", "userfaultfd", "lookup_dcookie", "quotactl", "quotactl_fd",
	"vhangup", "iopl", "ioperm", "uselib", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "fanotify_init", NULL,
};

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *prog_data;
static size_t prog_len;
static int prog_err;

static void build(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;
	if (!ctx) {
		prog_err = -ENOMEM;
		return;
	}
	/* A binary tree instead of a linear chain: the kernel evaluates the
	 * filter for every syscall number when it is installed (its bitmap
	 * cache), so a shorter path per syscall is paid by every sandbox. */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	/* Also filter the 32-bit entry points, which would otherwise bypass us. */
	seccomp_arch_add(ctx, SCMP_ARCH_X86);
	seccomp_arch_add(ctx, SCMP_ARCH_X32);
	for (int i = 0; sbx__seccomp_denied[i] && r == 0; i++) {
		int nr = seccomp_syscall_resolve_name(sbx__seccomp_denied[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	static const unsigned long ns_flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
						  CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
						  CLONE_NEWCGROUP, CLONE_NEWTIME };
	for (size_t i = 0; i < SBX_ARRAY_SIZE(ns_flags) && r == 0; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	int fd = -1;
	if (r == 0) {
		fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
		r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
	}
	if (r == 0) {
		off_t len = lseek(fd, 0, SEEK_END);
		prog_data = xmalloc((size_t)len);
		if (pread(fd, prog_data, (size_t)len, 0) != len)
			r = -EIO;
		prog_len = (size_t)len;
	}
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	prog_err = r;
}

int sbx__seccomp_program(const void **prog, size_t *len, sbx_error **err)
{
	pthread_once(&once, build);
	if (prog_err < 0)
		return sbx_error_setsys(err, prog_err, -prog_err, "build seccomp filter");
	*prog = prog_data;
	*len = prog_len;
	return 0;
}
