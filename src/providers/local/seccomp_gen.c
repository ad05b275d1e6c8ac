/* SPDX-License-Identifier: MIT */
/*
 * sbx-seccomp-gen: compiles the default seccomp filter with libseccomp at
 * build time and writes it as a C array (seccomp_bpf.c), which seccomp.c
 * hands to each sandbox's init as raw BPF. The filter depends on nothing
 * but the architecture, so no process pays libseccomp's compile (~0.3 ms)
 * or its loading. The filter: Allow by default (like Docker's
 * profile in effect), deny what lets a process reach the kernel or host
 * beyond its sandbox: mounts, namespaces, tracing, modules, keyrings, BPF,
 * clocks, reboot, swap, io_uring. Denied calls fail with EPERM; clone3 fails
 * with ENOSYS so libc falls back to clone, whose namespace flags we can check.
 */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const denied[] = {
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

/* The filter for the target's architecture: meson passes its cpu_family
 * and endianness, so a cross build does not get the build machine's. */
static uint32_t target_arch(const char *cpu, const char *endian)
{
	if (!strcmp(cpu, "ppc64") && !strcmp(endian, "little"))
		cpu = "ppc64le";
	else if (!strcmp(cpu, "mips64") && !strcmp(endian, "little"))
		cpu = "mipsel64";
	else if (!strcmp(cpu, "mips") && !strcmp(endian, "little"))
		cpu = "mipsel";
	return seccomp_arch_resolve_name(cpu);
}

static int build(uint32_t arch, void **data, size_t *len)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;
	if (!ctx)
		return -ENOMEM;
	/* A binary tree instead of a linear chain: the kernel evaluates the
	 * filter for every syscall number when it is installed (its bitmap
	 * cache), so a shorter path per syscall is paid by every sandbox. */
	seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (arch != seccomp_arch_native()) {
		seccomp_arch_add(ctx, arch);
		seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
	}
	/* On x86_64 also filter the 32-bit entry points, which would otherwise
	 * bypass us. */
	if (arch == SCMP_ARCH_X86_64) {
		seccomp_arch_add(ctx, SCMP_ARCH_X86);
		seccomp_arch_add(ctx, SCMP_ARCH_X32);
	}
	for (int i = 0; denied[i] && r == 0; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR || seccomp_syscall_resolve_name_arch(arch, denied[i]) == __NR_SCMP_ERROR) {
			/* Every name exists on x86_64: an old libseccomp that does
			 * not know one would leave it allowed. Elsewhere some
			 * calls do not exist (iopl on arm64, say). */
			if (arch == SCMP_ARCH_X86_64) {
				fprintf(stderr, "sbx-seccomp-gen: this libseccomp does not know %s\n", denied[i]);
				r = -ENOSYS;
			}
			continue;
		}
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	static const unsigned long ns_flags[] = { CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC,
						  CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
						  CLONE_NEWCGROUP, CLONE_NEWTIME };
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]) && r == 0; i++)
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
		off_t n = lseek(fd, 0, SEEK_END);
		*data = malloc(n > 0 ? (size_t)n : 1); /* checksrc: allow (a build tool; no libsbx) */
		if (!*data || n <= 0 || pread(fd, *data, (size_t)n, 0) != n)
			r = -EIO;
		*len = (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return r;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: sbx-seccomp-gen OUT.c CPU_FAMILY ENDIAN (meson's host_machine)\n");
		return 2;
	}
	uint32_t arch = target_arch(argv[2], argv[3]);
	if (!arch) {
		fprintf(stderr, "sbx-seccomp-gen: libseccomp knows no architecture %s (%s endian)\n", argv[2], argv[3]);
		return 1;
	}
	void *data = NULL;
	size_t len = 0;
	int r = build(arch, &data, &len);
	if (r < 0) {
		fprintf(stderr, "sbx-seccomp-gen: %s\n", strerror(-r));
		return 1;
	}
	FILE *f = fopen(argv[1], "w");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	fprintf(f, "/* Generated by sbx-seccomp-gen (seccomp_gen.c) at build time. */\n"
		   "#include <stddef.h>\n\nextern const unsigned char sbx__seccomp_bpf[];\n"
		   "extern const size_t sbx__seccomp_bpf_len;\n\n"
		   "const unsigned char sbx__seccomp_bpf[] __attribute__((aligned(8))) = {");
	for (size_t i = 0; i < len; i++)
		fprintf(f, "%s0x%02x,", i % 12 ? " " : "\n\t", ((unsigned char *)data)[i]);
	fprintf(f, "\n};\nconst size_t sbx__seccomp_bpf_len = %zu;\n", len);
	free(data);
	return fclose(f) == 0 ? 0 : 1;
}
