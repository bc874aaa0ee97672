// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A libfabric memory monitor on /dev/ummunotify.
 *
 * libfabric's MR cache talks to an imported monitor by (addr, len) only:
 * it registers, then subscribe()s the range, asks valid() on every hit,
 * and (from 2.0 on) unsubscribe()s when it uncaches an entry; 1.17 never
 * unsubscribes.  All three run under the cache's global lock (mm_lock).
 * The monitor gives each distinct range one watch and finds it through
 * a hash index, so valid() is a lookup and one load of the watch's
 * generation word, without a lock: writers change the index inside a
 * sequence count, which valid() rereads.
 *
 * Ranges shared by several caches (one per domain) share the watch,
 * counted by refs.  A watch that was made before a registration and is
 * still valid proves that registration current too, so a subscribe()
 * of a watched range reuses the watch even if it is invalid: the range
 * then reads invalid until the watch is retired, which only costs a
 * registration, and never leaves another cache trusting a replaced
 * watch.
 *
 * A thread waits on the device and passes every invalidation to the
 * cache's notify(), which drops the entries at once, so pinned pages are
 * given back without waiting for the next lookup.  It then retires the
 * watches that fired.  The thread never blocks the unmapping thread (the
 * kernel has published the change before munmap() returns; valid() sees
 * it from then on) and holds none of our locks while it calls notify(),
 * which takes mm_lock: subscribe() holds mm_lock while it takes ours.
 *
 * 1.17's cache never unsubscribes: watches of evicted entries stay until
 * their memory changes, and when max_watches are in use the least
 * recently valid()ated one is recycled (CLOCK), which at worst makes one
 * cached entry register again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_ext.h>
#include <rdma/providers/fi_log.h>

#include "ofi.h"

#define READ_ONCE(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define stat_add(field, n) \
	__atomic_fetch_add(&mon.stats.field, (n), __ATOMIC_RELAXED)

#define DEFAULT_WATCHES	8192
#define EVENT_BATCH	256

struct mon_watch {
	struct umn_watch w;	/* where it is while watched: events name it */
	uint64_t addr;		/* the range; len 0: free */
	uint64_t len;
	uint32_t refs;		/* subscribe()s not unsubscribe()d */
	uint32_t next_free;
	bool referenced;	/* valid() since the clock hand passed */
};

struct range {
	uint64_t addr;
	uint64_t len;
	struct mon_watch *mw;
	uint64_t cookie;
};

static struct monitor {
	struct fid_mem_monitor fid;
	struct fi_ops_mem_monitor ops;
	struct umn *u;
	int open_ret;

	pthread_mutex_t lock;		/* the table's writers */
	uint64_t seq;			/* odd while the index changes */
	struct mon_watch *watches;	/* max of them */
	uint32_t *index;		/* watch number + 1, or 0; 2 * max */
	struct range *scratch;		/* the thread's, max of them */
	uint32_t max;
	uint32_t mask;
	uint32_t free_head;		/* watch number + 1, or 0 */
	uint32_t hand;			/* clock */

	pthread_mutex_t import_lock;
	bool imported;
	pthread_t thread;
	int stop_fd;
	bool running;

	struct umn_ofi_stats stats;
} mon = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.import_lock = PTHREAD_MUTEX_INITIALIZER,
	.stop_fd = -1,
};

static pthread_once_t mon_once = PTHREAD_ONCE_INIT;

static uint32_t hash(uint64_t addr, uint64_t len)
{
	uint64_t h = (addr ^ (len << 20) ^ (len >> 12)) * 0x9e3779b97f4a7c15ULL;

	return (uint32_t)(h >> 32) & mon.mask;
}

/*
 * The watch of [addr, addr + len), or NULL.  Also run by valid() without
 * the lock, hence the bounded probe: a torn view is retried by the caller.
 */
static struct mon_watch *index_find(uint64_t addr, uint64_t len)
{
	uint32_t i = hash(addr, len), steps, n;
	struct mon_watch *mw;

	for (steps = 0; steps <= mon.mask; steps++, i = (i + 1) & mon.mask) {
		n = READ_ONCE(mon.index[i]);
		if (!n)
			return NULL;
		mw = &mon.watches[n - 1];
		if (READ_ONCE(mw->addr) == addr && READ_ONCE(mw->len) == len)
			return mw;
	}
	return NULL;
}

static void seq_begin(void)
{
	WRITE_ONCE(mon.seq, mon.seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void seq_end(void)
{
	__atomic_store_n(&mon.seq, mon.seq + 1, __ATOMIC_RELEASE);
}

/* lock held, inside seq_begin()/seq_end(). */
static void index_insert(struct mon_watch *mw)
{
	uint32_t i = hash(mw->addr, mw->len);

	while (mon.index[i])
		i = (i + 1) & mon.mask;
	WRITE_ONCE(mon.index[i], (uint32_t)(mw - mon.watches) + 1);
}

/*
 * lock held, inside seq_begin()/seq_end().  Linear probing without
 * tombstones: entries after the hole move back if their home allows.
 */
static void index_remove(struct mon_watch *mw)
{
	uint32_t n = (uint32_t)(mw - mon.watches) + 1;
	uint32_t hole = hash(mw->addr, mw->len), j, home;
	struct mon_watch *other;

	while (mon.index[hole] != n)
		hole = (hole + 1) & mon.mask;
	for (j = (hole + 1) & mon.mask; mon.index[j]; j = (j + 1) & mon.mask) {
		other = &mon.watches[mon.index[j] - 1];
		home = hash(other->addr, other->len);
		/* Stays if its home lies cyclically in (hole, j]. */
		if (((j - home) & mon.mask) < ((j - hole) & mon.mask))
			continue;
		WRITE_ONCE(mon.index[hole], mon.index[j]);
		hole = j;
	}
	WRITE_ONCE(mon.index[hole], 0);
}

/* lock held: unwatch and free mw. */
static void watch_drop(struct mon_watch *mw)
{
	seq_begin();
	index_remove(mw);
	WRITE_ONCE(mw->len, 0);
	seq_end();
	umn_unwatch(mon.u, &mw->w);
	mw->refs = 0;
	mw->next_free = mon.free_head;
	mon.free_head = (uint32_t)(mw - mon.watches) + 1;
	stat_add(watches, -1);
}

/* lock held: drop the watch least recently found valid.  False: none. */
static bool watch_recycle(void)
{
	uint64_t steps;
	struct mon_watch *mw;

	for (steps = 0; steps < 2ULL * mon.max; steps++) {
		mw = &mon.watches[mon.hand];
		mon.hand = (mon.hand + 1) % mon.max;
		if (!mw->len)
			continue;
		if (READ_ONCE(mw->referenced)) {
			WRITE_ONCE(mw->referenced, false);
			continue;
		}
		watch_drop(mw);
		stat_add(recycled, 1);
		return true;
	}
	return false;
}

static int mon_subscribe(struct fid_mem_monitor *monitor, const void *addr,
			 size_t len)
{
	uint64_t start = (uintptr_t)addr;
	struct mon_watch *mw;
	int ret;

	(void)monitor;
	pthread_mutex_lock(&mon.lock);
	stat_add(subscribes, 1);
	mw = index_find(start, len);
	if (mw) {
		mw->refs++;
		stat_add(reused, 1);
		pthread_mutex_unlock(&mon.lock);
		return 0;
	}
	if (!mon.free_head && !watch_recycle()) {
		pthread_mutex_unlock(&mon.lock);
		return -ENOSPC;
	}
	mw = &mon.watches[mon.free_head - 1];
	mon.free_head = mw->next_free;
	ret = umn_watch(mon.u, addr, len, 0, &mw->w);
	while (ret == -ENOSPC && watch_recycle())
		ret = umn_watch(mon.u, addr, len, 0, &mw->w);
	if (ret) {
		mw->next_free = mon.free_head;
		mon.free_head = (uint32_t)(mw - mon.watches) + 1;
		pthread_mutex_unlock(&mon.lock);
		return ret;
	}
	mw->refs = 1;
	mw->referenced = true;
	seq_begin();
	WRITE_ONCE(mw->addr, start);
	WRITE_ONCE(mw->len, len);
	index_insert(mw);
	seq_end();
	stat_add(watches, 1);
	pthread_mutex_unlock(&mon.lock);
	return 0;
}

static void mon_unsubscribe(struct fid_mem_monitor *monitor, const void *addr,
			    size_t len)
{
	struct mon_watch *mw;

	(void)monitor;
	pthread_mutex_lock(&mon.lock);
	mw = index_find((uintptr_t)addr, len);
	/* A range whose watch was retired or recycled meanwhile: nothing. */
	if (mw && mw->refs && !--mw->refs)
		watch_drop(mw);
	pthread_mutex_unlock(&mon.lock);
}

/* Every cache hit: no lock, no store unless the clock bit was clear. */
static bool mon_valid(struct fid_mem_monitor *monitor, const void *addr,
		      size_t len)
{
	struct umn_watch copy = { 0 };
	struct mon_watch *mw;
	uint64_t seq;

	(void)monitor;
	do {
		seq = __atomic_load_n(&mon.seq, __ATOMIC_ACQUIRE);
		if (seq & 1)
			continue;
		mw = index_find((uintptr_t)addr, len);
		if (mw) {
			copy.word = READ_ONCE(mw->w.word);
			copy.generation = READ_ONCE(mw->w.generation);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1) || READ_ONCE(mon.seq) != seq);

	if (!mw || !umn_valid(mon.u, &copy))
		return false;
	if (!READ_ONCE(mw->referenced))
		WRITE_ONCE(mw->referenced, true);
	return true;
}

/* Retire the watches named by r[0..n) that fired, if still the same. */
static void retire(struct range *r, size_t n)
{
	size_t i;

	pthread_mutex_lock(&mon.lock);
	for (i = 0; i < n; i++)
		if (r[i].mw->len && r[i].mw->w.cookie == r[i].cookie &&
		    !umn_valid(mon.u, &r[i].mw->w))
			watch_drop(r[i].mw);
	pthread_mutex_unlock(&mon.lock);
}

static void notify(uint64_t addr, uint64_t len)
{
	mon.fid.import_ops->notify(&mon.fid, (void *)(uintptr_t)addr, len);
	stat_add(notified, 1);
}

/* Events were lost: every watch that reads invalid is an event. */
static void rescan(void)
{
	struct mon_watch *mw;
	size_t n = 0, i;

	stat_add(overflows, 1);
	pthread_mutex_lock(&mon.lock);
	for (mw = mon.watches; mw < mon.watches + mon.max; mw++)
		if (mw->len && !umn_valid(mon.u, &mw->w))
			mon.scratch[n++] = (struct range){
				mw->addr, mw->len, mw, mw->w.cookie
			};
	pthread_mutex_unlock(&mon.lock);
	for (i = 0; i < n; i++)
		notify(mon.scratch[i].addr, mon.scratch[i].len);
	retire(mon.scratch, n);
}

/* lock held: the watch an event names, if it is one of ours. */
static bool named_watch(const struct umn_watch *w, struct range *r)
{
	struct mon_watch *mw = (struct mon_watch *)w;

	if (mw < mon.watches || mw >= mon.watches + mon.max)
		return false;
	*r = (struct range){ 0, 0, mw, mw->w.cookie };
	return true;
}

static void *mon_thread(void *arg)
{
	struct pollfd pfd[2] = {
		{ .fd = umn_fd(mon.u), .events = POLLIN },
		{ .fd = mon.stop_fd, .events = POLLIN },
	};
	struct umn_event events[EVENT_BATCH];
	struct range fired[EVENT_BATCH];
	size_t nr_fired;
	int n, i;

	(void)arg;
	while (!(pfd[1].revents & POLLIN)) {
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		n = umn_read_events(mon.u, events, EVENT_BATCH);
		if (n < 0)
			break;
		nr_fired = 0;
		pthread_mutex_lock(&mon.lock);
		for (i = 0; i < n; i++)
			if (events[i].watch &&
			    named_watch(events[i].watch, &fired[nr_fired]))
				nr_fired++;
		pthread_mutex_unlock(&mon.lock);
		for (i = 0; i < n; i++) {
			if (events[i].cause == UMN_CAUSE_OVERFLOW) {
				rescan();
			} else if (events[i].watch) {
				stat_add(events, 1);
				notify(events[i].start,
				       events[i].end - events[i].start);
			}
		}
		retire(fired, nr_fired);
	}
	return NULL;
}

static int mon_start(struct fid_mem_monitor *monitor)
{
	sigset_t all, old;
	int ret;

	(void)monitor;
	mon.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (mon.stop_fd < 0)
		return -errno;
	/* The application's signals are not for this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&mon.thread, NULL, mon_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		close(mon.stop_fd);
		mon.stop_fd = -1;
		return -ret;
	}
	WRITE_ONCE(mon.stats.started, true);
	mon.running = true;
	FI_INFO(&umn_ofi__prov, FI_LOG_MR,
		"ummunotify memory monitor started\n");
	return 0;
}

/* The last cache is gone: nothing relies on any watch. */
static void mon_stop(struct fid_mem_monitor *monitor)
{
	static const uint64_t one = 1;
	struct mon_watch *mw;

	(void)monitor;
	if (!mon.running)
		return;
	if (write(mon.stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(mon.thread, NULL);
	close(mon.stop_fd);
	mon.stop_fd = -1;
	mon.running = false;
	pthread_mutex_lock(&mon.lock);
	for (mw = mon.watches; mw < mon.watches + mon.max; mw++)
		if (mw->len)
			watch_drop(mw);
	pthread_mutex_unlock(&mon.lock);
	WRITE_ONCE(mon.stats.started, false);
	FI_INFO(&umn_ofi__prov, FI_LOG_MR,
		"ummunotify memory monitor stopped\n");
}

static uint32_t max_watches(void)
{
	const char *s = getenv("FI_UMMUNOTIFY_MAX_WATCHES");
	unsigned long v;
	char *end;

	if (!s || !*s)
		return DEFAULT_WATCHES;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || v < 1 || v > (1UL << 24))
		return DEFAULT_WATCHES;
	return (uint32_t)v;
}

static void mon_open(void)
{
	struct umn_attr attr = { 0 };
	uint32_t cap, i;

	mon.max = max_watches();
	for (cap = 2; cap < 2 * mon.max; cap *= 2)
		;
	mon.mask = cap - 1;
	mon.watches = calloc(mon.max, sizeof(*mon.watches));
	mon.index = calloc(cap, sizeof(*mon.index));
	mon.scratch = calloc(mon.max, sizeof(*mon.scratch));
	if (!mon.watches || !mon.index || !mon.scratch) {
		mon.open_ret = -ENOMEM;
		return;
	}
	for (i = 0; i < mon.max; i++)
		mon.watches[i].next_free = i + 2 <= mon.max ? i + 2 : 0;
	mon.free_head = 1;

	attr.max_watches = mon.max;
	mon.open_ret = umn_open(&mon.u, &attr);
	if (mon.open_ret)
		return;
	mon.stats.abi = umn_features(mon.u);

	mon.ops = (struct fi_ops_mem_monitor){
		.size = sizeof(mon.ops),
		.start = mon_start,
		.stop = mon_stop,
		.subscribe = mon_subscribe,
		.unsubscribe = mon_unsubscribe,
		.valid = mon_valid,
	};
	mon.fid.fid.fclass = FI_CLASS_MEM_MONITOR;
	mon.fid.export_ops = &mon.ops;
}

int umn_ofi_import(void)
{
	int ret;

	pthread_once(&mon_once, mon_open);
	if (mon.open_ret)
		return mon.open_ret;
	pthread_mutex_lock(&mon.import_lock);
	if (mon.imported) {
		pthread_mutex_unlock(&mon.import_lock);
		return 0;
	}
	/* libfabric's FI_E* values below 256 are errno values. */
	ret = fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0,
			&mon.fid.fid, NULL);
	if (!ret) {
		mon.imported = true;
		WRITE_ONCE(mon.stats.imported, true);
		FI_INFO(&umn_ofi__prov, FI_LOG_MR,
			"imported the ummunotify memory monitor (%s ABI, %u watches)\n",
			mon.stats.abi ? "native" : "2010", mon.max);
	}
	pthread_mutex_unlock(&mon.import_lock);
	return ret;
}

void umn_ofi_stats(struct umn_ofi_stats *stats)
{
	const uint64_t *from = &mon.stats.watches;
	uint64_t *to = &stats->watches;
	size_t i, n = (sizeof(*stats) - offsetof(struct umn_ofi_stats,
						 watches)) / sizeof(*to);

	stats->imported = READ_ONCE(mon.stats.imported);
	stats->started = READ_ONCE(mon.stats.started);
	stats->abi = mon.stats.abi;
	for (i = 0; i < n; i++)
		to[i] = READ_ONCE(from[i]);
}
