// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libummunotify-ucx: UCX's registration caches (ucs_rcache: UCP's and each
 * UCT memory domain's) told of every change to the memory they registered
 * by /dev/ummunotify, with UCM's libc patches off.  Preloaded, it defines
 * three of UCX's own functions, which libucp and libuct (and Open MPI,
 * for the last) call through their PLT, and hands each call on to UCX's:
 *
 *   ucs_rcache_create()	 the first one, before UCX subscribes to
 *				 VM_UNMAPPED, opens a whole-address-space
 *				 watch (UMN_OPEN_WATCH_ALL) and marks
 *				 VM_UNMAPPED an external event, so that UCM
 *				 installs no hook for it;
 *   ucs_rcache_get()		 every lookup first catches up: one check of
 *				 the watch (umn_valid(): two loads) and, when
 *				 the kernel published a change, each changed
 *				 range passed to UCX with ucm_vm_munmap(), as
 *				 UCM's hooks would have, once the change has
 *				 reached the page tables;
 *   ucm_test_external_events()	 Open MPI's check that the feed works.
 *
 * Why a lookup never hands back a registration whose memory changed
 * before it began, in any thread: the module publishes each change (the
 * watch's word) before the changing call returns.  A lookup that begins
 * after that sees the word moved, unless umn_drain() already passed the
 * change on: the watch's generation moves on only after feed() returned
 * for it.  feed() first waits until no invalidation the kernel started
 * is still changing page tables (umn_wait_invalidations()), then passes
 * the range on: a region UCX inserted before that (1.13 inserts it, then
 * registers, under its page-table lock) is dropped, at once or from
 * UCX's queue, and one inserted after pins the new pages.
 * ucm_vm_munmap() reaches the caches synchronously: they drop the
 * overlapping regions at once or queue them, and ucs_rcache_get() takes
 * its fast path only with nothing queued.  So by the time the handed-on
 * lookup runs, every change published before it began is in the cache.
 * A change published while it runs is seen by the next lookup.
 *
 * This holds only where every lookup goes through ucs_rcache_get(): so in
 * UCX 1.13 (read in its source).  From 1.15 on, UCP's lookup is an inline
 * function compiled into libucp; there the library leaves UCX its own
 * hooks and says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ucm/api/ucm.h>

#include "ummunotify.h"
#include "ummunotify-ucx.h"

/* See ucs_rcache_get() below. */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "ucs_rcache_get() is handed on for x86-64 and AArch64 calling conventions only"
#endif

/* The UCX releases whose every lookup goes through ucs_rcache_get(). */
static const unsigned int supported[][2] = { { 1, 13 } };

/* Past every user address of x86-64 (57 bits) and AArch64 (52 bits). */
#define ALL_MEMORY		(1ULL << 57)

typedef ucs_status_t rcache_get_fn(void *rcache, void *address, size_t length,
				   uintptr_t a3, uintptr_t a4, uintptr_t a5,
				   uintptr_t a6);
typedef ucs_status_t rcache_get6_fn(void *rcache, void *address,
				    size_t length, uintptr_t a3, uintptr_t a4,
				    uintptr_t a5);
typedef ucs_status_t rcache_create_fn(const void *params, const char *name,
				      void *stats_parent, void **rcache_p);
typedef ucs_status_t test_events_fn(int events);
typedef void vm_munmap_fn(void *addr, size_t length);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool ready;			/* init() has run: acquire */
static bool seven_args;			/* ucs_rcache_get() has 7 (1.15 on) */
static rcache_get_fn *ucx_get;
static rcache_create_fn *ucx_create;
static test_events_fn *ucx_test_external;
static vm_munmap_fn *ucx_vm_munmap;

static struct umn *umn;			/* set, with release, once active */
static const struct umn_watch *all;
static struct umn_ucx_status status;	/* counters: atomic */

/*
 * The feed test's page, and whether feed() passed on a change covering
 * it: feed() runs under the handle's lock, which the test's catch-up
 * takes after setting probe and before reading probe_seen.
 */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t probe;
static bool probe_seen;

/* UCX's own level: at "info" and more verbose ones, this speaks too. */
static bool info_wanted(void)
{
	static const char *const quiet[] = { "fatal", "error", "warn", "diag" };
	const char *level = getenv("UCX_LOG_LEVEL");
	size_t i;

	if (!level)
		return false;
	for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
		if (!strcasecmp(level, quiet[i]))
			return false;
	return true;
}

/*
 * UCX's own NAME: the next definition after this library's, else the one
 * in library LIB, loaded already, where UCX was dlopen()ed RTLD_LOCAL
 * (Open MPI's components) and RTLD_NEXT does not see it.
 */
static void *ucx_symbol(const char *lib, const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);
	void *handle;

	if (sym)
		return sym;
	handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	if (!handle)
		return NULL;
	sym = dlsym(handle, name);
	dlclose(handle);
	return sym;
}

/* A wrapper called by a UCX whose own function cannot be found. */
static void *target(void *fn, const char *name)
{
	if (!fn) {
		fprintf(stderr, "ummunotify-ucx[%d]: UCX called %s(), but its own cannot be found\n",
			(int)getpid(), name);
		abort();
	}
	return fn;
}

static bool version_supported(const uint32_t v[3])
{
	size_t i;

	for (i = 0; i < sizeof(supported) / sizeof(supported[0]); i++)
		if (v[0] == supported[i][0] && v[1] == supported[i][1])
			return true;
	return false;
}

/* The state last: umn_ucx_status() reads what came before it. */
static void publish(uint32_t state)
{
	__atomic_store_n(&status.state, state, __ATOMIC_RELEASE);
}

static void init_ucx(void);

static void init(void)
{
	init_ucx();
	__atomic_store_n(&ready, true, __ATOMIC_RELEASE);
}

static void init_ucx(void)
{
	struct umn_attr attr = { .flags = UMN_OPEN_WATCH_ALL };
	void (*get_version)(unsigned int *, unsigned int *, unsigned int *);
	void (*set_external)(int events);
	ucm_global_config_t *opts;
	unsigned int v[3] = { 0, 0, 0 };
	struct umn *u;
	int ret;

	ucx_get = ucx_symbol("libucs.so.0", "ucs_rcache_get");
	ucx_create = ucx_symbol("libucs.so.0", "ucs_rcache_create");
	ucx_test_external = ucx_symbol("libucm.so.0", "ucm_test_external_events");
	ucx_vm_munmap = ucx_symbol("libucm.so.0", "ucm_vm_munmap");
	set_external = ucx_symbol("libucm.so.0", "ucm_set_external_event");
	opts = ucx_symbol("libucm.so.0", "ucm_global_opts");
	get_version = ucx_symbol("libucp.so.0", "ucp_get_version");
	if (get_version)
		get_version(&v[0], &v[1], &v[2]);
	memcpy(status.ucx_version, v, sizeof(v));
	/* An unknown release passes seven: see ucs_rcache_get(). */
	seven_args = !get_version || v[0] > 1 || v[1] >= 15;

	if (!get_version || !ucx_vm_munmap || !set_external || !opts ||
	    !ucx_test_external || !version_supported(status.ucx_version)) {
		const char *hook_mode = getenv("UCX_MEM_MMAP_HOOK_MODE");
		const char *what = hook_mode && !strcasecmp(hook_mode, "none") ?
			"UCX runs without memory hooks, so without registration caches" :
			"UCX keeps its own memory hooks";

		publish(UMN_UCX_UNSUPPORTED);
		if (get_version)
			fprintf(stderr, "ummunotify-ucx[%d]: UCX %u.%u.%u is not a release this library supports (1.13): %s\n",
				(int)getpid(), v[0], v[1], v[2], what);
		else
			fprintf(stderr, "ummunotify-ucx[%d]: UCX's release is unknown (libucp.so.0 is not loaded): %s\n",
				(int)getpid(), what);
		return;
	}
	ret = umn_open(&u, &attr);
	/* Without the kernel's in-flight count the argument at the top fails. */
	if (!ret && umn_wait_invalidations(u)) {
		umn_close(u);
		ret = -EOPNOTSUPP;
	}
	if (ret) {
		/*
		 * UCX_MEM_MMAP_HOOK_MODE=none kept UCM from patching libc at
		 * start-up: UCX's default mode patches it when the cache
		 * subscribes.  (1.13's "reloc" mode hung UCP programs here.)
		 */
		if (opts->mmap_hook_mode == UCM_MMAP_HOOK_NONE)
			opts->mmap_hook_mode = UCM_MMAP_HOOK_BISTRO;
		status.error = -ret;
		publish(UMN_UCX_NO_DEVICE);
		/* No module is a node's choice; anything else, a problem. */
		if (info_wanted() || ret != -ENODEV)
			fprintf(stderr, "ummunotify-ucx[%d]: /dev/ummunotify: %s: UCX uses its own memory hooks\n",
				(int)getpid(), strerror(-ret));
		return;
	}
	set_external(UCM_EVENT_VM_UNMAPPED);
	all = umn_watch_all(u);
	__atomic_store_n(&umn, u, __ATOMIC_RELEASE);
	publish(UMN_UCX_ACTIVE);
	if (info_wanted())
		fprintf(stderr, "ummunotify-ucx[%d]: UCX %u.%u.%u's registration caches learn of memory changes from /dev/ummunotify; %s\n",
			(int)getpid(), v[0], v[1], v[2],
			opts->mmap_hook_mode == UCM_MMAP_HOOK_NONE ?
			"UCM's memory hooks are off" :
			"UCM patched libc at start-up (UCX_MEM_MMAP_HOOK_MODE is not none) and feeds them too");
}

static void count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* umn_drain()'s callback, under the handle's lock. */
static void feed(void *arg, const struct umn_event *event)
{
	uintptr_t start = event->start, end = event->end;
	uintptr_t page = __atomic_load_n(&probe, __ATOMIC_RELAXED);

	if (event->cause == UMN_CAUSE_OVERFLOW) {
		/* Nothing tells which ranges changed. */
		start = 0;
		end = ALL_MEMORY;
		count(&status.overflows);
	} else if (!event->watch) {
		/* The address space is gone: nothing will look it up. */
		return;
	}
	/* The change reaches the page tables before UCX hears: see the top. */
	umn_wait_invalidations(arg);
	ucx_vm_munmap((void *)start, end - start);
	count(&status.ranges);
	if (page && start <= page && page < end)
		__atomic_store_n(&probe_seen, true, __ATOMIC_RELAXED);
}

/*
 * Set while this thread feeds UCX: a UCM handler that looked a cache up
 * would otherwise drain again inside the drain (the handle's lock is
 * recursive), under the outer drain's view of the ring.
 */
static __thread bool feeding;

static void catch_up_slow(struct umn *u)
{
	static const struct umn_event lost = { .cause = UMN_CAUSE_OVERFLOW };

	count(&status.catch_ups);
	feeding = true;
	/* A forked child that cannot reopen the device knows nothing. */
	if (umn_drain(u, feed, u) < 0)
		feed(u, &lost);
	feeding = false;
}

static inline void catch_up(void)
{
	struct umn *u = __atomic_load_n(&umn, __ATOMIC_ACQUIRE);

	if (u && !feeding && !umn_valid(u, all))
		catch_up_slow(u);
}

static inline void init_once(void)
{
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
		pthread_once(&once, init);
}

/*
 * UCX 1.13 passes six arguments, 1.15 and later seven (an alignment came
 * before prot).  Seven pointer-sized ones are taken, which the x86-64 and
 * AArch64 calling conventions allow for a six-argument caller (the
 * seventh is then a word of the caller's frame, read and not used), and
 * as many handed on as the release takes, so that a release this library
 * refuses still runs through it unchanged.
 */
ucs_status_t ucs_rcache_get(void *rcache, void *address, size_t length,
			    uintptr_t a3, uintptr_t a4, uintptr_t a5,
			    uintptr_t a6);
ucs_status_t ucs_rcache_get(void *rcache, void *address, size_t length,
			    uintptr_t a3, uintptr_t a4, uintptr_t a5,
			    uintptr_t a6)
{
	init_once();
	catch_up();
	if (seven_args)
		return ((rcache_get_fn *)target(ucx_get, __func__))
			(rcache, address, length, a3, a4, a5, a6);
	return ((rcache_get6_fn *)target(ucx_get, __func__))
		(rcache, address, length, a3, a4, a5);
}

ucs_status_t ucs_rcache_create(const void *params, const char *name,
			       void *stats_parent, void **rcache_p);
ucs_status_t ucs_rcache_create(const void *params, const char *name,
			       void *stats_parent, void **rcache_p)
{
	init_once();
	return ((rcache_create_fn *)target(ucx_create, __func__))
		(params, name, stats_parent, rcache_p);
}

/*
 * Does an munmap() reach UCX's handlers?  UCM's own test expects them
 * called inside munmap(); here they are called by the next lookup, so the
 * test is this library's: a page unmapped by a raw system call, then a
 * catch-up, which must pass on a change covering it.
 */
static bool feed_fires(struct umn *u)
{
	long page = sysconf(_SC_PAGESIZE);
	bool seen = false;
	void *p;

	pthread_mutex_lock(&probe_lock);
	p = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		catch_up();
		__atomic_store_n(&probe, (uintptr_t)p, __ATOMIC_RELAXED);
		syscall(SYS_munmap, p, page);
		catch_up_slow(u);
		seen = __atomic_exchange_n(&probe_seen, false, __ATOMIC_RELAXED);
		__atomic_store_n(&probe, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&probe_lock);
	return seen;
}

ucs_status_t ucm_test_external_events(int events)
{
	struct umn *u;

	init_once();
	u = __atomic_load_n(&umn, __ATOMIC_ACQUIRE);
	if (u && (events & UCM_EVENT_VM_UNMAPPED)) {
		if (!feed_fires(u))
			return UCS_ERR_UNSUPPORTED;
		events &= ~UCM_EVENT_VM_UNMAPPED;
		if (!events)
			return UCS_OK;
	}
	return ((test_events_fn *)target(ucx_test_external, __func__))(events);
}

void umn_ucx_status(struct umn_ucx_status *out, size_t size)
{
	struct umn_ucx_status now = {
		.state = __atomic_load_n(&status.state, __ATOMIC_ACQUIRE),
		.error = status.error,
		.catch_ups = __atomic_load_n(&status.catch_ups, __ATOMIC_RELAXED),
		.ranges = __atomic_load_n(&status.ranges, __ATOMIC_RELAXED),
		.overflows = __atomic_load_n(&status.overflows, __ATOMIC_RELAXED),
	};

	memcpy(now.ucx_version, status.ucx_version, sizeof(now.ucx_version));
	memcpy(out, &now, size < sizeof(now) ? size : sizeof(now));
}
