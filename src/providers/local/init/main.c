/* SPDX-License-Identifier: MIT */
/*
 * sbx-init entry: read M_SETUP from fd 3, build the sandbox, report M_READY
 * (or M_ERROR with the reason), then serve requests. Runs as pid 1 of the
 * sandbox's pid namespace; when it exits the kernel kills everything inside.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <linux/futex.h>

#include "../proto.h"
#include "init.h"
#include "sudo.h"

#define SYNC_FD 3

int init_oom_adjusted;
int init_cpu_run_fd = -1;
char init_msgbuf[SBX_MSG_MAX] __attribute__((aligned(4096)));

void init_fmt(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
}

void init_append_errno(char *msg, size_t len, int e)
{
	size_t n = strlen(msg);
	if (n < len)
		snprintf(msg + n, len - n, ": %s", strerror(e));
}

/* Raw syscalls, not the vDSO: an init that never touches the vDSO has no
 * page tables for that corner of its address space. */
uint64_t init_now_us(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t init_now_ms(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* n bytes (16-aligned) from base[*used..cap), or NULL when they do not fit. */
static void *bump(char *base, size_t cap, size_t *used, size_t n)
{
	if (*used > cap || n > cap - *used)
		return NULL;
	*used += n;
	return base + *used - n;
}

void *init_setup_alloc(size_t n)
{
	/* Setup's strings live as long as init: a bump arena in .bss instead
	 * of malloc, so an idle init has no heap (nor its page tables). */
	static char arena[32768] __attribute__((aligned(16)));
	static size_t used;
	n = (n + 15) & ~(size_t)15;
	void *p = bump(arena, sizeof(arena), &used, n);
	return p ? p : malloc(n);
}

/*
 * Per-request memory: the tail of init_msgbuf after the request itself. A
 * small request's strings and pointer arrays then land in the page it was
 * received into, which is resident. The first malloc of a process costs a
 * brk, an mmap and their page-table pages: about 0.4 ms on the first exec of
 * a sandbox on a paravirtualized guest (measured). Requests too big for the
 * tail spill into malloc'd chunks, freed by init_req_end.
 */
struct spill {
	struct spill *next;
	size_t used, cap;
	char data[];
};
static size_t req_used;
static struct spill *req_spill;

void init_req_begin(size_t msg_len)
{
	req_used = (msg_len + 15) & ~(size_t)15;
}

void *init_req_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	void *p = bump(init_msgbuf, SBX_MSG_MAX, &req_used, n);
	if (!p && req_spill)
		p = bump(req_spill->data, req_spill->cap, &req_spill->used, n);
	if (p)
		return p;
	size_t cap = n > (256u << 10) ? n : (256u << 10);
	struct spill *s = malloc(sizeof(*s) + cap);
	if (!s)
		return NULL;
	*s = (struct spill){ .next = req_spill, .cap = cap, .used = n };
	req_spill = s;
	return s->data;
}

void init_req_end(void)
{
	while (req_spill) {
		struct spill *s = req_spill;
		req_spill = s->next;
		free(s);
	}
	req_used = 0;
}

/* Record bodies are not NUL-terminated; copy each into a string of its own. */
static char *dupz(const char *d, uint32_t n)
{
	char *s = init_setup_alloc((size_t)n + 1);
	if (!s)
		_exit(70);
	memcpy(s, d, n);
	s[n] = '\0';
	return s;
}

static int parse_setup(struct init_cfg *cfg, const char *buf, size_t len)
{
	size_t off = 0;
	uint16_t tag;
	const char *d;
	uint32_t n;
	int nenv = 0, r;
	while ((r = sbx__msg_next(buf, len, &off, &tag, &d, &n)) == 1) {
		switch (tag) {
		case T_ID: cfg->id = dupz(d, n); break;
		case T_LAYER:
			if (cfg->n_layers == INIT_MAX_LAYERS)
				return -E2BIG;
			cfg->layers[cfg->n_layers++] = dupz(d, n);
			break;
		case T_UPPER_DIR: cfg->upper_dir = dupz(d, n); break;
		case T_RW_MNT: cfg->rw_mnt = dupz(d, n); break;
		case T_STORAGE_MB: cfg->storage_mb = sbx__msg_u64(d, n); break;
		case T_SHM_MB: cfg->shm_mb = sbx__msg_u64(d, n); break;
		case T_HOSTNAME: cfg->hostname = dupz(d, n); break;
		case T_NETWORK: cfg->network_host = sbx__msg_u64(d, n) == 1; break;
		case T_RESOLV: cfg->resolv = dupz(d, n); break;
		case T_SECCOMP: cfg->seccomp = d; cfg->seccomp_len = n; break;
		case T_WORKDIR: cfg->workdir = dupz(d, n); break;
		case T_USER: cfg->user = dupz(d, n); break;
		case T_TTL_MS: cfg->ttl_ms = sbx__msg_u64(d, n); break;
		case T_ID_BASE: cfg->id_base = (uint32_t)sbx__msg_u64(d, n); cfg->userns_fd = -2; break;
		case T_NET_RAW: cfg->net_raw = sbx__msg_u64(d, n) == 1; break;
		case T_NOFILE: cfg->nofile = sbx__msg_u64(d, n); break;
		case T_VOLATILE: cfg->volatile_upper = sbx__msg_u64(d, n) == 1; break;
		case T_UPPER_IDMAP: cfg->upper_ns_fd = -2; break;
		case T_LAYER_IDMAP:
			if (cfg->n_layer_ns == 2)
				return -E2BIG;
			cfg->layer_ns_index[cfg->n_layer_ns++] = (int)sbx__msg_u64(d, n);
			break;
		case T_CPU_RUN: cfg->cpu_run_fd = -2; break;
		case T_SUDO: cfg->sudo = sbx__msg_u64(d, n) == 1; break;
		case T_ENV:
			if (nenv == INIT_MAX_ENV - 1)
				return -E2BIG;
			cfg->env[nenv++] = dupz(d, n);
			break;
		default: break;
		}
	}
	cfg->env[nenv] = NULL;
	if (r < 0 || !cfg->rw_mnt || !cfg->hostname)
		return -EPROTO;
	return 0;
}

static void mkdir_p(const char *path)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

/* /proc/self/maps in the message buffer (free until the loop's first
 * request), NUL-terminated; NULL if it cannot be read. */
static char *read_maps(void)
{
	char *maps = init_msgbuf;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, maps, 65535);
	close(fd);
	if (n <= 0)
		return NULL;
	maps[n] = '\0';
	return maps;
}

/* Setup's deep frames (paths, the rootfs build) touched stack pages an idle
 * init never needs again; with thousands of idle sandboxes they add up, so
 * give them back. Only pages well below this frame, inside [stack]. */
static void __attribute__((noinline)) trim_stack(void)
{
	char *maps = read_maps();
	if (!maps)
		return;
	char *line = strstr(maps, "[stack]");
	if (!line)
		return;
	while (line > maps && line[-1] != '\n')
		line--;
	uintptr_t lo = (uintptr_t)strtoull(line, NULL, 16);
	uintptr_t hi = ((uintptr_t)__builtin_frame_address(0) - 4096) & ~(uintptr_t)4095;
	if (lo && hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

#if defined(__x86_64__) && !defined(__GLIBC__)
/*
 * The idle loop runs on a stack in .bss, beside init's other pages, and the
 * [stack], [vvar] and [vdso] mappings at the top of the address space go:
 * with them goes the page-table branch that mapped them (24 -> 12 KiB of
 * page tables per idle sandbox, measured). 128 KiB: the loop's deepest path
 * (exec -> spawn -> user lookup) uses under 20 KiB; the lowest page is a
 * guard.
 *
 * What libc keeps pointing into the old stack moves first: the auxiliary
 * vector (musl's malloc reads AT_RANDOM at its first call, its clock calls
 * look up the vDSO through AT_SYSINFO_EHDR, which the copy leaves out so
 * they use system calls), the environment (empty: init runs commands with
 * the request's) and the program name. musl's `__libc.auxv` is internal:
 * it is patched only where it holds the address the kernel gave, else the
 * old stack stays mapped.
 */
#define LOOP_STACK (128 * 1024)
static char loop_stack[LOOP_STACK] __attribute__((aligned(4096)));
static struct init_cfg *loop_cfg;
extern char __libc[] __attribute__((visibility("hidden")));
extern char **environ;

static int move_libc_off_stack(void)
{
	static size_t auxv[128];
	static unsigned char random16[16];
	static char *no_env[1];
	static char name[] = "sbx-init";
	char **e = environ;
	while (*e)
		e++;
	size_t *kauxv = (size_t *)(e + 1), **slot = (size_t **)(void *)(__libc + 8);
	if (*slot != kauxv)
		return -1;
	size_t n = 0;
	for (size_t i = 0; kauxv[i] && n + 4 < sizeof(auxv) / sizeof(auxv[0]); i += 2) {
		size_t k = kauxv[i], v = kauxv[i + 1];
		if (k == AT_SYSINFO_EHDR || k == AT_EXECFN || k == AT_PLATFORM || k == AT_BASE_PLATFORM)
			continue;
		if (k == AT_RANDOM) {
			memcpy(random16, (void *)v, sizeof(random16));
			v = (size_t)random16;
		}
		auxv[n++] = k;
		auxv[n++] = v;
	}
	*slot = auxv;
	environ = no_env;
	program_invocation_name = program_invocation_short_name = name;
	return 0;
}

/* /proc/PID/cmdline reads the argument area, which was on the old stack:
 * point it at "sbx-init" in the top bytes of the loop's stack, resident
 * and anonymous (the kernel reads cmdline from anonymous memory only).
 * PR_SET_MM_MAP needs no capability for these fields; it takes the whole
 * map, so the rest is read back from /proc/self/stat unchanged. */
#define CMDLINE_BYTES 16
static void keep_cmdline(void)
{
	char *cmd = loop_stack + LOOP_STACK - CMDLINE_BYTES, *st = init_msgbuf;
	memcpy(cmd, "sbx-init", sizeof("sbx-init"));
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, st, 4095);
	close(fd);
	char *p = n > 0 ? (st[n] = '\0', strrchr(st, ')')) : NULL;
	unsigned long long f[53] = { 0 };
	/* Field 3 (state) follows ") "; fields 26-28 and 45-51 are the map's. */
	for (int i = 3; p && i < 53; i++) {
		p = strchr(p, ' ');
		if (p)
			f[i] = strtoull(++p, NULL, 10);
	}
	if (!f[51])
		return; /* a short or unreadable stat: keep the empty cmdline */
	struct prctl_mm_map m = {
		.start_code = f[26], .end_code = f[27], .start_stack = f[28], .start_data = f[45],
		.end_data = f[46], .start_brk = f[47], .brk = (uint64_t)syscall(SYS_brk, 0),
		.arg_start = (uint64_t)(uintptr_t)cmd, .arg_end = (uint64_t)(uintptr_t)(cmd + sizeof("sbx-init")),
		.env_start = f[50], .env_end = f[51], .exe_fd = (uint32_t)-1,
	};
	prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&m, sizeof(m), 0);
}

static void unmap_top_regions(void)
{
	char *maps = read_maps();
	for (char *line = maps; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strstr(line, "[stack]") || strstr(line, "[vvar") || strstr(line, "[vdso]")) {
			char *end;
			uintptr_t lo = (uintptr_t)strtoull(line, &end, 16);
			uintptr_t hi = *end == '-' ? (uintptr_t)strtoull(end + 1, NULL, 16) : 0;
			if (lo && hi > lo)
				munmap((void *)lo, hi - lo);
		}
		line = nl ? nl + 1 : NULL;
	}
}

static void __attribute__((noreturn, noinline, used)) loop_on_own_stack(void)
{
	unmap_top_regions();
	keep_cmdline();
	init_loop(loop_cfg);
}

static void __attribute__((noreturn)) run_loop(struct init_cfg *cfg)
{
	loop_cfg = cfg;
	if (move_libc_off_stack() < 0 || mprotect(loop_stack, 4096, PROT_NONE) < 0) {
		trim_stack();
		init_loop(cfg);
	}
	/* The call leaves the stack 16-byte aligned minus the return address,
	 * as the ABI expects at a function's entry. */
	__asm__ volatile("mov %0, %%rsp\n\txor %%ebp, %%ebp\n\tcall *%1\n\tud2"
			 :
			 : "r"(loop_stack + LOOP_STACK - CMDLINE_BYTES), "r"(loop_on_own_stack)
			 : "memory");
	__builtin_unreachable();
}
#else
static void __attribute__((noreturn)) run_loop(struct init_cfg *cfg)
{
	trim_stack();
	init_loop(cfg);
}
#endif

/*
 * init's fd table is a copy of the host's, as large as the host's highest
 * fd, and a table never shrinks: with thousands of sandboxes open on the
 * host, each new init kept ~130 KB of fd arrays for life (measured), so the
 * cost per sandbox grew with their number. close_range(CLOSE_RANGE_UNSHARE)
 * makes a fresh table sized to init's few fds, but only of a table that is
 * shared: a thread shares it for that moment, and the old table goes when
 * the thread exits. The loop calls this once init has been idle for a few
 * milliseconds (loop.c), off every request's path.
 */
static volatile int fdt_go;
static volatile pid_t fdt_tid;

static int fdt_holder(void *arg)
{
	(void)arg;
	while (!fdt_go)
		syscall(SYS_futex, &fdt_go, FUTEX_WAIT, 0, NULL, NULL, 0);
	syscall(SYS_exit, 0);
	return 0;
}

void init_shrink_fd_table(void)
{
	/* The thread's stack: the top of the message buffer's first page,
	 * resident and unused until the loop's first request. */
	char *stack = init_msgbuf + 4096;
	fdt_tid = 1;
	pid_t t = clone(fdt_holder, stack, CLONE_VM | CLONE_FILES | CLONE_FS | CLONE_SIGHAND | CLONE_THREAD |
			CLONE_SYSVSEM | CLONE_CHILD_CLEARTID, NULL, NULL, NULL, &fdt_tid);
	if (t < 0)
		return;
	/* Everything below 64 is copied (init has fewer than ten fds). */
	syscall(SYS_close_range, 64, ~0U, CLOSE_RANGE_UNSHARE);
	fdt_go = 1;
	syscall(SYS_futex, &fdt_go, FUTEX_WAKE, 1, NULL, NULL, 0);
	/* Its stack is ours again once the kernel has cleared fdt_tid. */
	pid_t v;
	while ((v = fdt_tid) != 0)
		syscall(SYS_futex, &fdt_tid, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void fail(const char *msg, int err) __attribute__((noreturn));
static void fail(const char *msg, int err)
{
	sbx__msg_send_error(SYNC_FD, err, msg);
	_exit(1);
}

int main(void)
{
	char *buf = init_msgbuf;
	static struct init_cfg cfg;
	char msg[768] = "";
	int fds[SBX_MSG_MAX_FDS], nfds = 0;

	prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
	/* Not dumpable: the sandbox's processes run as root in init's user
	 * namespace, and a dumpable init would let them open /proc/1/fd/N and
	 * /proc/1/mem without CAP_SYS_PTRACE. init holds host fds (its cgroup
	 * directory, the control socket), and ".." from a directory reached
	 * through such a magic link walks up the host's tree to its "/". */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		_exit(5);
	/* The host may be a threaded program with fds it forgot to mark CLOEXEC. */
	syscall(SYS_close_range, SYNC_FD + 1, ~0U, 0);
	long n = sbx__msg_recv(SYNC_FD, buf, SBX_MSG_MAX, fds, &nfds);
	if (n <= 0 || sbx__msg_type(buf) != M_SETUP || nfds < 1)
		_exit(2); /* the host went away before sending the setup */
	memset(&cfg, 0, sizeof(cfg));
	/* Stage timings travel back in M_READY for the host's debug log. */
	uint64_t t[6];
	t[0] = init_now_us();
	cfg.ctl_fd = fds[0];
	cfg.userns_fd = cfg.slot_fd = cfg.upper_ns_fd = cfg.cpu_run_fd = -1;
	int r = parse_setup(&cfg, buf, (size_t)n);
	if (r < 0)
		fail("malformed setup message", -r);
	/* fds: listener, [user namespace, id slot lock,] [exec cgroup dir] */
	int next = 1;
	if (cfg.userns_fd == -2) {
		if (nfds < 3)
			fail("setup names an id range but carries no user namespace", EPROTO);
		cfg.userns_fd = fds[1];
		cfg.slot_fd = fds[2];
		next = 3;
		if (cfg.upper_ns_fd == -2) {
			if (nfds < 4)
				fail("setup announces an upper-dir idmap but carries none", EPROTO);
			cfg.upper_ns_fd = fds[next++];
		}
		for (int i = 0; i < cfg.n_layer_ns; i++) {
			if (nfds <= next)
				fail("setup announces a layer idmap but carries none", EPROTO);
			cfg.layer_ns_fd[i] = fds[next++];
		}
	}
	/* fds: ... [exec cgroup dir] [cpu run group's procs] */
	int want_run = cfg.cpu_run_fd == -2;
	cfg.cpu_run_fd = want_run && nfds > next ? fds[nfds - 1] : -1;
	cfg.cg_fd = nfds - (cfg.cpu_run_fd >= 0) > next ? fds[next] : -1;
	init_cpu_run_fd = cfg.cpu_run_fd;
	t[1] = init_now_us();
	init_userns_sysctls(&cfg);
	if ((r = init_rootfs(&cfg, msg, sizeof(msg))) < 0 || (r = init_sudo_setup(&cfg, msg, sizeof(msg))) < 0)
		fail(msg, -r);
	t[2] = init_now_us();
	if (sethostname(cfg.hostname, strlen(cfg.hostname)) < 0)
		fail("sethostname", errno);
	if (!cfg.network_host && (r = init_loopback_up(msg, sizeof(msg))) < 0)
		fail(msg, -r);
	/* The host placed us in our cgroups before M_SETUP; make them our root. */
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail("unshare cgroup namespace", errno);
	t[3] = init_now_us();
	if (cfg.workdir) {
		init_as_sandbox_root(&cfg, 1);
		mkdir_p(cfg.workdir);
		init_as_sandbox_root(&cfg, 0);
	}
	/* init's timers (exec timeouts, the TTL) must fire whatever the
	 * commands do: a fork bomb at nice 0 in the same cpu group cannot
	 * starve an init at -20 that sleeps nearly always. Commands go back
	 * to 0 (spawn.c). */
	setpriority(PRIO_PROCESS, 0, -20);
	if (cfg.nofile) {
		/* Above the host's hard limit only with CAP_SYS_RESOURCE, which
		 * some hosts withhold: then the hard limit is the most we give. */
		struct rlimit rl = { .rlim_cur = cfg.nofile, .rlim_max = cfg.nofile }, old;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && errno == EPERM && getrlimit(RLIMIT_NOFILE, &old) == 0 &&
		    old.rlim_max < rl.rlim_max)
			rl.rlim_cur = rl.rlim_max = old.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			fail("set the open-file limit", errno);
	}
	int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (adj >= 0) {
		/* Make a memory hog, not init, the OOM killer's choice. Lowering
		 * it needs CAP_SYS_RESOURCE; without it commands inherit 0 anyway
		 * and need no reset (spawn.c). */
		init_oom_adjusted = write(adj, "-500", 4) == 4;
		close(adj);
	}
	if ((r = init_enter_userns(&cfg, msg, sizeof(msg))) < 0 || (r = init_harden(&cfg, msg, sizeof(msg))) < 0)
		fail(msg, -r);
	t[4] = init_now_us();
	/* The host sends M_GO once its state file names us (normally long
	 * queued by now). A creator that died first never does: exit rather
	 * than live on as a sandbox nothing records. */
	char gb[256]; /* not buf: the seccomp program of the setup points into it */
	n = sbx__msg_recv(SYNC_FD, gb, sizeof(gb), fds, &nfds);
	if (n <= 0 || sbx__msg_type(gb) != M_GO)
		_exit(2);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	char rbuf[256];
	struct sbx_msg rm;
	sbx__msg_init(&rm, rbuf, sizeof(rbuf), M_READY);
	snprintf(msg, sizeof(msg), "recv %.2f, rootfs %.2f, net+cgns %.2f, harden %.2f ms",
		 (double)(t[1] - t[0]) / 1e3, (double)(t[2] - t[1]) / 1e3, (double)(t[3] - t[2]) / 1e3,
		 (double)(t[4] - t[3]) / 1e3);
	sbx__msg_add_str(&rm, T_MSG, msg);
	if (sbx__msg_send(SYNC_FD, &rm, NULL, 0) < 0)
		_exit(3);
	close(SYNC_FD);
	/* The host is busy returning from create: use the moment. Its first
	 * request is nearly always an exec as the default user; resolve that
	 * user now (the answer is cached) instead of on the exec's critical
	 * path. Then leave the setup's stack. */
	struct init_user u;
	(void)init_user_resolve(&u, cfg.user, msg, sizeof(msg));
	run_loop(&cfg);
}
