/* SPDX-License-Identifier: MIT */
/*
 * A small pool of fresh network, UTS and IPC namespaces (and a user
 * namespace on an id slot of its own, idmap.c), made ahead of time
 * by one background thread per process. Creating a network namespace is the
 * most expensive step of starting a sandbox (about half a millisecond on a
 * 2-core VM, more than mounting its whole root), and none of the three
 * depends on the sandbox's image or spec, so a process that creates many
 * sandboxes gets them ready-made: the clone child setns()es into a set
 * instead of passing CLONE_NEW{NET,UTS,IPC}.
 *
 * A pooled set has never held a process; each is handed out once and its
 * fds closed by the taker. The thread starts at the second create of a
 * process (a one-shot `sbx run` pays nothing), refills after each create
 * (not at the take: a refill racing the create that emptied the slot
 * costs that create what the pool saves), keeps SBX_NS_POOL sets (default
 * 2, at most 64, 0 = off) and stops at the first error: callers then
 * create the namespaces inline, as without the pool.
 *
 * The thread works only after creates and destroys have paused for 1.5 ms
 * (or when its release queue is half full), so it stays off the path of a
 * create that follows a destroy.
 *
 * The same thread releases what a destroyed sandbox leaves to the kernel:
 * the host holds each sandbox's mount namespace while it lives, so init's
 * exit does not unmount its whole tree (an RCU grace period and every
 * superblock) on the destroy path. destroy() returns once every process is
 * dead and the cgroups and files are gone; the thread then drops the last
 * reference and the kernel frees the mounts.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../util/config.h"
#include "../../util/log.h"
#include "local_int.h"

#define POOL_MAX 64
#define RELEASE_MAX 256
#define QUIET_NS 1500000ull /* 1.5 ms */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_ns(const char *name)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/thread-self/ns/%s", name);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Loopback up now, so init finds it ready (it only checks). */
static void loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		(void)ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

/* One fresh set, made by unsharing this thread into it. */
static int make_set(struct sbx_nsset *s)
{
	if (unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC) < 0)
		return -errno;
	loopback_up();
	/* A failed id slot is not the pool's failure: the create then makes
	 * one inline and reports why. */
	(void)sbx__idmap_make(&s->id, NULL);
	s->net = open_ns("net");
	s->uts = open_ns("uts");
	s->ipc = open_ns("ipc");
	if (s->net < 0 || s->uts < 0 || s->ipc < 0) {
		int e = errno;
		sbx__nsset_close(s);
		return -e;
	}
	return 0;
}

static void *pool_main(void *arg)
{
	struct sbx_nspool *p = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && p->n_release == 0 && (p->n >= p->target || !p->kicked))
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stop)
			break;
		/* Work only once creates and destroys have paused for a moment:
		 * on a small machine a refill or a mount-tree release racing the
		 * next create costs that create more than the pool saves it. */
		uint64_t quiet_at = p->last_activity_ns + QUIET_NS;
		if (now_ns() < quiet_at && p->n_release < RELEASE_MAX / 2) {
			struct timespec ts = { .tv_sec = (time_t)(quiet_at / 1000000000ull),
					       .tv_nsec = (long)(quiet_at % 1000000000ull) };
			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
			continue;
		}
		if (p->n_release > 0) {
			int fd = p->release[--p->n_release];
			pthread_mutex_unlock(&p->lock);
			close(fd);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		p->kicked = p->n + 1 < p->target;
		pthread_mutex_unlock(&p->lock);
		struct sbx_nsset s = SBX_NSSET_INIT;
		int r = make_set(&s);
		pthread_mutex_lock(&p->lock);
		if (r < 0) {
			SBX_LOGD("local: namespace pool off: %s", strerror(-r));
			p->failed = 1;
			break;
		}
		p->items[p->n++] = s;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

void sbx__nspool_init(struct sbx_nspool *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits below use it */
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	const char *v = sbx__env("SBX_NS_POOL");
	long t = v && *v ? strtol(v, NULL, 10) : 2;
	p->target = t < 0 ? 0 : t > POOL_MAX ? POOL_MAX : (unsigned)t;
	p->items = calloc(POOL_MAX, sizeof(*p->items));
	p->release = calloc(RELEASE_MAX, sizeof(*p->release));
	p->owner = getpid();
}

int sbx__nspool_take(struct sbx_nspool *p, struct sbx_nsset *out)
{
	/* A forked child has the fds but not the thread (nor a usable lock). */
	if (p->target == 0 || !p->items || p->owner != getpid())
		return -1;
	int r = -1;
	pthread_mutex_lock(&p->lock);
	if (p->n > 0) {
		*out = p->items[--p->n];
		r = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

void sbx__nspool_kick(struct sbx_nspool *p)
{
	if (p->target == 0 || !p->items || p->owner != getpid())
		return;
	pthread_mutex_lock(&p->lock);
	if (!p->failed && !p->stop) {
		if (!p->started && ++p->takes >= 2)
			p->started = pthread_create(&p->thread, NULL, pool_main, p) == 0;
		p->kicked = 1;
		p->last_activity_ns = now_ns();
		pthread_cond_signal(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
}

int sbx__nspool_active(struct sbx_nspool *p)
{
	if (!p->items || p->owner != getpid())
		return 0;
	pthread_mutex_lock(&p->lock);
	int on = p->started && !p->failed && !p->stop;
	pthread_mutex_unlock(&p->lock);
	return on;
}

void sbx__nspool_release(struct sbx_nspool *p, int fd)
{
	if (fd < 0)
		return;
	if (p->items && p->owner == getpid()) {
		pthread_mutex_lock(&p->lock);
		int queued = p->started && !p->failed && !p->stop && p->n_release < RELEASE_MAX;
		if (queued) {
			p->release[p->n_release++] = fd;
			p->last_activity_ns = now_ns();
			pthread_cond_signal(&p->cond);
		}
		pthread_mutex_unlock(&p->lock);
		if (queued)
			return;
	}
	close(fd);
}

void sbx__nspool_fini(struct sbx_nspool *p)
{
	if (!p->items)
		return;
	if (p->owner == getpid()) {
		pthread_mutex_lock(&p->lock);
		p->stop = 1;
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
		if (p->started)
			pthread_join(p->thread, NULL);
	}
	for (unsigned i = 0; i < p->n; i++)
		sbx__nsset_close(&p->items[i]);
	for (unsigned i = 0; i < p->n_release; i++)
		close(p->release[i]);
	free(p->release);
	free(p->items);
	p->items = NULL;
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

void sbx__nsset_close(struct sbx_nsset *s)
{
	int *fds[] = { &s->net, &s->uts, &s->ipc };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
	sbx__idmap_close(&s->id);
}
