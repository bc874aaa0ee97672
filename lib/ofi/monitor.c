// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A libfabric memory monitor on /dev/ummunotify.
 *
 * libfabric's MR cache talks to an imported monitor by (addr, len) only:
 * it registers, then subscribe()s the range, asks valid() on every hit,
 * and from 2.1 on unsubscribe()s each entry it uncaches, also right after
 * a subscribe() that failed; 1.17 never unsubscribes.  All of these run
 * under the cache's global lock, mm_lock, which notify() takes to drop the
 * entries of every cache that overlap a range.
 *
 * Each distinct range has one watch, found through a hash index; valid()
 * is a lookup and one load of the watch's generation word, without a
 * lock: writers change the index inside a sequence count, which valid()
 * rereads.  The caches (one per domain) subscribing a range share its
 * watch, counted by refs.
 *
 * What keeps a cached entry from trusting another watch than its own: an
 * entry relies on the watch its subscribe() found live and valid, and a
 * watch leaves the index only after notify() of its range has dropped the
 * entries that rely on it.  A watch that fired, or one taken back for room
 * (max_watches, or the kernel's limits) or for memory (the kernel's
 * pressure requests), is first retired: no subscribe() attaches to it
 * any more (those fail, and libfabric keeps the registration uncached),
 * the thread passes its range to notify(), and only then unwatches it.
 * Until then valid() reads the kernel's word, which is right for as long
 * as the range is watched.  An unsubscribe() of a live watch's last
 * subscriber frees it at once: nothing relies on it.
 *
 * The thread waits on the device, retires the watches that fired and runs
 * the retirements.  It holds none of our locks while it calls notify():
 * subscribe() holds mm_lock while it takes ours.  The thread that unmaps
 * never waits for it: the kernel published the change before munmap()
 * returned, and valid() sees it from then on.  notify() moves the entries
 * to the cache's dead list; libfabric deregisters them, and gives their
 * pages back, at its next search or flush.
 *
 * A thread that stops on an error fails the monitor: it retires and
 * notifies every watch, so that no entry relies on one, and from then on
 * valid() refuses every hit and subscribe() every range (libfabric keeps
 * those registrations uncached), until the last cache stops.  fork()
 * waits for the thread to leave notify(), which holds libfabric's locks:
 * the child's copies of them are free.
 *
 * The watches are a pool of handles of the device (segments), the first
 * opened by the first start(), more by grow() while every watch is in
 * use, up to max_watches.  A segment never changes or goes once counted,
 * so valid() finds a watch by number without a lock; the index grow()
 * replaces stays allocated, since valid() may still be reading it.
 *
 * Nothing is opened or allocated before the first start(): a program that
 * loads the provider and never caches a registration pays nothing.
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
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>
#include <rdma/providers/fi_log.h>

#include "ofi.h"

#define READ_ONCE(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define stat_add(field, n) \
	__atomic_fetch_add(&mon.stats.field, (n), __ATOMIC_RELAXED)

#define DEFAULT_WATCHES	65536
#define FIRST_WATCHES	8192		/* the first handle's */
#define HANDLE_WATCHES	(1U << 20)	/* the module's default max_regions */
#define MAX_REGIONS	"/sys/module/ummunotify/parameters/max_regions"
#define MAX_HANDLES	32
#define EVENT_BATCH	256
#define RETIRE_BATCH	1024

enum watch_state {
	W_FREE,
	W_LIVE,		/* subscribe() attaches to it while it reads valid */
	W_RETIRING,	/* queued for notify(), then freed by the thread */
	W_FORKED,	/* a parent's, in a forked child: retired when used */
};

/*
 * A watch, in one cache line.  valid() reads the first four fields, which
 * change only inside the sequence count (umn_watch() writes w, which
 * valid() never reads).
 */
struct mon_watch {
	uint64_t addr;		/* the range; len 0: free */
	uint64_t len;
	const uint64_t *word;	/* w's */
	uint64_t generation;
	struct umn_watch w;	/* events name it */
} __attribute__((aligned(64)));

/* The rest of a watch, under the lock but for referenced. */
struct mon_meta {
	uint32_t refs;		/* subscribe()s not unsubscribe()d */
	uint32_t next_free;	/* watch number + 1, or 0 */
	uint8_t state;
	bool referenced;	/* valid() since the clock hand passed */
};

/*
 * The watches of one handle of the device, numbered from first on: made
 * by grow(), never changed after but for hand, kept until the process
 * ends.
 */
struct segment {
	struct umn *u;
	struct mon_watch *watches;
	struct mon_meta *meta;
	uint32_t first;
	uint32_t size;
	uint32_t hand;		/* give_back()'s clock, under the lock */
};

/* Open addressing by (addr, len), linear probing: watch number + 1, or 0. */
struct index {
	uint32_t mask;
	uint32_t slot[];
};

/* A retired watch and the range its notify() covers. */
struct retiring {
	uint64_t start;
	uint64_t end;
	uint32_t n;		/* watch number */
};

static struct monitor {
	struct fid_mem_monitor fid;
	struct fi_ops_mem_monitor ops;

	pthread_mutex_t open_lock;	/* the first handle, made at start() */

	pthread_mutex_t lock;		/* everything below but the stats */
	uint64_t seq;			/* odd while the index changes */
	bool failed;			/* the thread stopped on an error */
	struct segment *segs[MAX_HANDLES];	/* set before nsegs counts it */
	uint32_t nsegs;
	uint32_t capacity;		/* watches in the segments */
	uint32_t max;			/* the capacity may grow to it */
	bool grow_refused;		/* the module refused a handle for good */
	uint64_t grow_after;		/* ms: no growth before (see grow()) */
	struct index *index;		/* for twice the capacity */
	struct index *old_index[MAX_HANDLES];	/* valid() may read them */
	uint32_t free_head;		/* watch number + 1, or 0 */
	uint32_t nr_free;
	uint32_t nr_retiring;		/* free once the thread is done */
	uint32_t low_free;		/* make room when nr_free falls to it */
	uint32_t hand;			/* clock */
	struct retiring *queue;		/* retired, to notify: capacity */
	uint32_t queued;

	pthread_t thread;		/* the newest */
	int kick_fd;			/* eventfd: work queued, or stop */
	bool wanted;			/* between start() and stop() */
	bool alive;			/* thread joinable (not in a child) */
	bool current;			/* thread runs for this generation */
	uint64_t gen;			/* moves on at each stop() */

	pthread_mutex_t notify_lock;	/* the thread, in notify() */

	pthread_mutex_t import_lock;
	bool imported;
	bool fini;			/* fi_fini() ran while a cache was active */
	bool closing;			/* start() fails: the import closes */

	struct umn_ofi_stats stats;
} mon = {
	.open_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.notify_lock = PTHREAD_MUTEX_INITIALIZER,
	.import_lock = PTHREAD_MUTEX_INITIALIZER,
	.kick_fd = -1,
};

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static uint32_t hash(uint64_t addr, uint64_t len, uint32_t mask)
{
	uint64_t h = (addr ^ (len << 20) ^ (len >> 12)) * 0x9e3779b97f4a7c15ULL;

	return (uint32_t)(h >> 32) & mask;
}

/*
 * The segment of watch number n.  valid() calls it without the lock: a
 * segment is complete before the release that counts it, and NULL (a
 * number the count does not cover yet) is a torn view, which it retries.
 */
static const struct segment *segment_of(uint32_t n)
{
	uint32_t k = __atomic_load_n(&mon.nsegs, __ATOMIC_ACQUIRE);
	const struct segment *s;

	while (k--) {
		s = READ_ONCE(mon.segs[k]);
		if (n >= s->first)
			return n < s->first + s->size ? s : NULL;
	}
	return NULL;
}

static struct mon_watch *watch_at(uint32_t n)
{
	const struct segment *s = segment_of(n);

	return s ? &s->watches[n - s->first] : NULL;
}

/* lock held: mw's segment. */
static const struct segment *segment_of_watch(const struct mon_watch *mw)
{
	const struct segment *s;
	uint32_t k;

	for (k = 0;; k++) {
		s = mon.segs[k];
		if (mw >= s->watches && mw < s->watches + s->size)
			return s;
	}
}

static uint32_t number(const struct mon_watch *mw)
{
	const struct segment *s = segment_of_watch(mw);

	return s->first + (uint32_t)(mw - s->watches);
}

static struct mon_meta *meta(const struct mon_watch *mw)
{
	const struct segment *s = segment_of_watch(mw);

	return &s->meta[mw - s->watches];
}

/*
 * The number + 1 of the watch of [addr, addr + len), or 0.  Also run by
 * valid() without the lock, hence the bounded probe and the checks: a
 * torn view is retried by the caller.
 */
static uint32_t index_find(uint64_t addr, uint64_t len)
{
	const struct index *idx = __atomic_load_n(&mon.index, __ATOMIC_ACQUIRE);
	uint32_t i, steps, n;
	struct mon_watch *mw;

	if (!idx)
		return 0;
	i = hash(addr, len, idx->mask);
	for (steps = 0; steps <= idx->mask; steps++, i = (i + 1) & idx->mask) {
		n = READ_ONCE(idx->slot[i]);
		if (!n)
			return 0;
		mw = watch_at(n - 1);
		if (mw && READ_ONCE(mw->addr) == addr &&
		    READ_ONCE(mw->len) == len)
			return n;
	}
	return 0;
}

/* lock held: the watch of [addr, addr + len), or NULL. */
static struct mon_watch *find(uint64_t addr, uint64_t len)
{
	uint32_t n = index_find(addr, len);

	return n ? watch_at(n - 1) : NULL;
}

/*
 * The sequence count's pairings (C11's seqlock): seq_begin()'s release
 * fence, before the index and watch stores, pairs with mon_valid()'s
 * acquire fence, after its loads of them: a reader that saw one of them
 * rereads an odd or newer seq.  seq_end()'s release store pairs with
 * mon_valid()'s acquire load of seq: a reader that starts at it sees
 * every store before it.
 */
static void seq_begin(void)
{
	WRITE_ONCE(mon.seq, mon.seq + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void seq_end(void)
{
	__atomic_store_n(&mon.seq, mon.seq + 1, __ATOMIC_RELEASE);
}

/* lock held, inside seq_begin()/seq_end(), or idx not published yet. */
static void index_insert(struct index *idx, uint32_t n)
{
	const struct mon_watch *mw = watch_at(n);
	uint32_t i = hash(mw->addr, mw->len, idx->mask);

	while (idx->slot[i])
		i = (i + 1) & idx->mask;
	WRITE_ONCE(idx->slot[i], n + 1);
}

/*
 * lock held, inside seq_begin()/seq_end().  Linear probing without
 * tombstones: entries after the hole move back if their home allows.
 */
static void index_remove(struct mon_watch *mw)
{
	struct index *idx = mon.index;
	uint32_t n = number(mw) + 1, mask = idx->mask;
	uint32_t hole = hash(mw->addr, mw->len, mask), j, home;
	struct mon_watch *other;

	while (idx->slot[hole] != n)
		hole = (hole + 1) & mask;
	for (j = (hole + 1) & mask; idx->slot[j]; j = (j + 1) & mask) {
		other = watch_at(idx->slot[j] - 1);
		home = hash(other->addr, other->len, mask);
		/* Stays if its home lies cyclically in (hole, j]. */
		if (((j - home) & mask) < ((j - hole) & mask))
			continue;
		WRITE_ONCE(idx->slot[hole], idx->slot[j]);
		hole = j;
	}
	WRITE_ONCE(idx->slot[hole], 0);
}

/* lock held: unwatch and free mw. */
static void watch_free(struct mon_watch *mw)
{
	struct mon_meta *m = meta(mw);

	seq_begin();
	index_remove(mw);
	WRITE_ONCE(mw->len, 0);
	seq_end();
	/* A parent's watch, in a forked child, is no longer the handle's. */
	umn_unwatch(segment_of_watch(mw)->u, &mw->w);
	if (m->state == W_RETIRING)
		mon.nr_retiring--;
	m->refs = 0;
	m->state = W_FREE;
	m->next_free = mon.free_head;
	mon.free_head = number(mw) + 1;
	mon.nr_free++;
	stat_add(watches, -1);
}

/* lock held: the thread has work, or is to stop. */
static void kick(void)
{
	static const uint64_t one = 1;

	if (mon.alive && write(mon.kick_fd, &one, sizeof(one)) < 0)
		FI_WARN(&umn_ofi__prov, FI_LOG_MR,
			"cannot wake the monitor's thread: %s\n",
			strerror(errno));
}

/* lock held: no entry may rely on mw from now; notify [start, end). */
static void retire(struct mon_watch *mw, uint64_t start, uint64_t end)
{
	meta(mw)->state = W_RETIRING;
	mon.nr_retiring++;
	mon.queue[mon.queued++] = (struct retiring){ start, end, number(mw) };
	kick();
}

/*
 * lock held: a clock's hand, over the watches numbered [first, first +
 * size), moves on from the watch it points to, for as long as *steps
 * stays under limit, and retires the first live watch not found valid
 * since a hand last passed it (those found valid lose that mark as it
 * passes): it, or NULL.
 */
static struct mon_watch *clock_retire(uint32_t *hand, uint32_t first,
				      uint32_t size, uint64_t *steps,
				      uint64_t limit)
{
	struct mon_watch *mw;
	struct mon_meta *m;

	while (*steps < limit) {
		++*steps;
		mw = watch_at(first + *hand);
		m = meta(mw);
		*hand = (*hand + 1) % size;
		if (m->state != W_LIVE && m->state != W_FORKED)
			continue;
		if (READ_ONCE(m->referenced)) {
			WRITE_ONCE(m->referenced, false);
			continue;
		}
		retire(mw, mw->addr, mw->addr + mw->len);
		stat_add(recycled, 1);
		return mw;
	}
	return NULL;
}

/*
 * lock held: retire the watch least recently found valid, for room: two
 * turns of the hand find one if any is live.  It, or NULL.
 */
static struct mon_watch *recycle(void)
{
	uint64_t steps = 0;

	return clock_retire(&mon.hand, 0, mon.capacity, &steps,
			    2ULL * mon.capacity);
}

/* Milliseconds, for grow()'s hold-offs. */
static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* lock held: no growth for ms from now (or longer, if already). */
static void hold_off_growth(uint64_t ms)
{
	uint64_t until = now_ms() + ms;

	if (until > mon.grow_after)
		mon.grow_after = until;
}

/*
 * lock held: the kernel asks handle s for bytes of memory back (0: all
 * it can); it asks each file of the process in turn.  libfabric's caches
 * pin what they registered, and notify() is the one way to make them let
 * go: retire the watches of s not found valid since a hand last passed,
 * in the order of its own hand, until their ranges add up to what was
 * asked, and libfabric deregisters the entries that relied on them.  One
 * turn of that hand at most: a range hit since stays, since it would only
 * be registered again at once, pinning the same pages.
 */
static void give_back(struct segment *s, uint64_t bytes)
{
	uint64_t given = 0, steps = 0;
	struct mon_watch *mw;

	while ((!bytes || given < bytes) &&
	       (mw = clock_retire(&s->hand, s->first, s->size, &steps,
				  s->size)))
		given += mw->len;
	/* A handle's memory is charged to the cgroup being reclaimed. */
	hold_off_growth(2000);
	/* Once done, under the lock still: counted means handled. */
	stat_add(pressure, 1);
}

/* The module's bound on the watches of one file, or its default. */
static uint32_t max_regions(void)
{
	FILE *f = fopen(MAX_REGIONS, "re");
	unsigned int v = 0;

	if (f) {
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v ? v : HANDLE_WATCHES;
}

/*
 * lock held: one more handle of the device, with as many watches as the
 * others (the first: FIRST_WATCHES), up to max and to the module's bound
 * on one file.  Its watches join the free list.  The index, for twice as
 * many, replaces the old one, which valid() may still be reading: that
 * one is kept until the process ends (all of them together are smaller
 * than the new one).  Held off for a while after a request for memory,
 * a watch the module refused, or a handle refused for want of memory;
 * for good once the module refuses a handle for its limits.
 */
static int grow(void)
{
	uint32_t size = mon.nsegs ? mon.capacity : FIRST_WATCHES, cap, n;
	struct umn_attr attr = { 0 };
	struct retiring *queue = NULL;
	struct index *idx = NULL;
	struct segment *s;
	uint32_t bound;
	int ret = -ENOMEM;

	if (mon.grow_refused || mon.nsegs == MAX_HANDLES ||
	    mon.capacity >= mon.max ||
	    (mon.nsegs && now_ms() < mon.grow_after))
		return -ENOSPC;
	bound = max_regions();
	if (size > bound)
		size = bound;
	if (size > mon.max - mon.capacity)
		size = mon.max - mon.capacity;
	for (cap = 2; cap < 2 * (mon.capacity + size); cap *= 2)
		;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->watches = aligned_alloc(_Alignof(struct mon_watch),
				   size * sizeof(*s->watches));
	s->meta = calloc(size, sizeof(*s->meta));
	idx = calloc(1, sizeof(*idx) + cap * sizeof(idx->slot[0]));
	queue = calloc(mon.capacity + size, sizeof(*queue));
	if (s->watches && s->meta && idx && queue) {
		attr.max_watches = size;
		ret = umn_open(&s->u, &attr);
	}
	if (ret) {
		/* The first handle is tried again at the next start(). */
		if (mon.nsegs && ret != -ENOMEM) {
			mon.grow_refused = true;
			FI_INFO(&umn_ofi__prov, FI_LOG_MR,
				"no more watches than %u: the device refused another handle (%s)\n",
				mon.capacity, strerror(-ret));
		} else if (mon.nsegs) {
			hold_off_growth(10000);
		}
		free(s->watches);
		free(s->meta);
		free(s);
		free(idx);
		free(queue);
		return ret;
	}
	memset(s->watches, 0, size * sizeof(*s->watches));
	s->first = mon.capacity;
	s->size = size;
	for (n = 0; n < size; n++)
		s->meta[n].next_free = n + 1 < size ? s->first + n + 2 :
				       mon.free_head;
	if (mon.queued)
		memcpy(queue, mon.queue, mon.queued * sizeof(*queue));
	free(mon.queue);
	mon.queue = queue;
	/* Private until published: no reader sees it half built. */
	idx->mask = cap - 1;
	for (n = 0; n < s->first; n++)
		if (watch_at(n)->len)
			index_insert(idx, n);

	seq_begin();
	WRITE_ONCE(mon.segs[mon.nsegs], s);
	__atomic_store_n(&mon.nsegs, mon.nsegs + 1, __ATOMIC_RELEASE);
	mon.capacity += size;
	if (mon.index)
		mon.old_index[mon.nsegs - 2] = mon.index;
	__atomic_store_n(&mon.index, idx, __ATOMIC_RELEASE);
	seq_end();

	mon.free_head = s->first + 1;
	mon.nr_free += size;
	mon.low_free = mon.capacity / 16;
	WRITE_ONCE(mon.stats.capacity, mon.capacity);
	if (mon.nsegs == 1)
		WRITE_ONCE(mon.stats.abi, umn_features(s->u));
	FI_INFO(&umn_ofi__prov, FI_LOG_MR,
		"opened /dev/ummunotify: %s ABI, %u watches (%u in all)\n",
		umn_features(s->u) ? "native" : "2010", size, mon.capacity);
	/* The thread waits on the new handle too. */
	kick();
	return 0;
}

/*
 * lock held, at 1/16 free: room ahead, so that the thread frees some
 * before it runs out.  Nothing while the retirements under way will free
 * enough, unless none is free now: then the pool grows if it can.  Else
 * the first watch the hand finds cold goes; if a whole turn finds every
 * watch in use, the pool grows; where it cannot, the coldest goes.
 */
static void make_room(void)
{
	uint64_t steps = 0;

	if (mon.nr_free + mon.nr_retiring > mon.low_free) {
		if (!mon.nr_free)
			grow();
		return;
	}
	if (!clock_retire(&mon.hand, 0, mon.capacity, &steps, mon.capacity) &&
	    grow())
		recycle();
}

/* lock held: a new watch of [addr, addr + len). */
static int watch_new(uint64_t addr, uint64_t len)
{
	struct mon_watch *mw;
	struct mon_meta *m;
	int ret;

	if (mon.nr_free <= mon.low_free)
		make_room();
	if (!mon.free_head)
		return -ENOSPC;
	mw = watch_at(mon.free_head - 1);
	m = meta(mw);
	ret = umn_watch(segment_of_watch(mw)->u, (void *)(uintptr_t)addr, len,
			0, &mw->w);
	if (ret) {
		/*
		 * The kernel's limits (the user's max_user_watches, or
		 * max_overlap watches over a page): give one back for the
		 * next time; more handles would only cost memory for a while.
		 */
		if (ret == -ENOSPC) {
			hold_off_growth(10000);
			recycle();
		}
		return ret;
	}
	mon.free_head = m->next_free;
	mon.nr_free--;
	m->refs = 1;
	m->state = W_LIVE;
	WRITE_ONCE(m->referenced, true);
	seq_begin();
	WRITE_ONCE(mw->addr, addr);
	WRITE_ONCE(mw->len, len);
	WRITE_ONCE(mw->word, mw->w.word);
	WRITE_ONCE(mw->generation, mw->w.generation);
	index_insert(mon.index, number(mw));
	seq_end();
	stat_add(watches, 1);
	return 0;
}

static int thread_start(void);

static int mon_subscribe(struct fid_mem_monitor *monitor, const void *addr,
			 size_t len)
{
	uint64_t start = (uintptr_t)addr;
	struct mon_watch *mw;
	struct mon_meta *m;
	int ret;

	(void)monitor;
	pthread_mutex_lock(&mon.lock);
	stat_add(subscribes, 1);
	/*
	 * A forked child's first subscribe() starts its thread; without one,
	 * or after it failed, no range is cached.  libfabric calls start()
	 * first, which opens the handle.
	 */
	if (mon.wanted && !mon.current && !mon.failed)
		thread_start();
	mw = find(start, len);
	m = mw ? meta(mw) : NULL;
	if (!mon.nsegs || mon.failed || (mon.wanted && !mon.current)) {
		/*
		 * A parent's watch, in a child whose thread did not start:
		 * retired, so that the unsubscribe() that follows (2.1) does
		 * not free it while another cache's entry relies on it being
		 * found invalid.  The thread, once it starts, notifies it.
		 */
		if (m && m->state == W_FORKED)
			retire(mw, start, start + len);
		ret = -EIO;
	} else if (!mw) {
		ret = watch_new(start, len);
	} else if (m->state == W_LIVE &&
		   umn_valid(segment_of_watch(mw)->u, &mw->w)) {
		m->refs++;
		stat_add(reused, 1);
		ret = 0;
	} else {
		/* Changed, its event not read yet; or a parent's. */
		if (m->state != W_RETIRING)
			retire(mw, start, start + len);
		ret = -EAGAIN;
	}
	if (ret)
		stat_add(refused, 1);
	pthread_mutex_unlock(&mon.lock);
	return ret;
}

static void mon_unsubscribe(struct fid_mem_monitor *monitor, const void *addr,
			    size_t len)
{
	struct mon_watch *mw;
	struct mon_meta *m;

	(void)monitor;
	pthread_mutex_lock(&mon.lock);
	mw = find((uintptr_t)addr, len);
	m = mw ? meta(mw) : NULL;
	/*
	 * The thread frees a retiring watch; a live one, or a parent's, at its
	 * last subscriber.  An unsubscribe() that follows a failed subscribe()
	 * (2.1 does that) finds no watch or a retiring one.
	 */
	if (m && m->refs && !--m->refs &&
	    (m->state == W_LIVE || m->state == W_FORKED))
		watch_free(mw);
	pthread_mutex_unlock(&mon.lock);
}

/*
 * Every cache hit: no lock, no store unless the clock bit was clear.
 * Only for a range subscribe() took, so after start() opened the handle.
 */
static bool mon_valid(struct fid_mem_monitor *monitor, const void *addr,
		      size_t len)
{
	const struct segment *s = NULL;
	struct umn_watch copy = { 0 };
	struct mon_meta *m;
	uint64_t seq;
	uint32_t n;

	(void)monitor;
	/*
	 * Relaxed: a stale false is no worse than a hit read just before the
	 * thread failed; the watch still says what changed until it is
	 * unwatched, which the sequence count shows.
	 */
	if (READ_ONCE(mon.failed))
		return false;
	do {
		seq = __atomic_load_n(&mon.seq, __ATOMIC_ACQUIRE);
		n = index_find((uintptr_t)addr, len);
		s = n ? segment_of(--n) : NULL;
		if (s) {
			copy.word = READ_ONCE(s->watches[n - s->first].word);
			copy.generation =
				READ_ONCE(s->watches[n - s->first].generation);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((seq & 1) || READ_ONCE(mon.seq) != seq);

	if (!s || !umn_valid(s->u, &copy)) {
		stat_add(stale, 1);
		return false;
	}
	m = &s->meta[n - s->first];
	if (!READ_ONCE(m->referenced))
		WRITE_ONCE(m->referenced, true);
	return true;
}

/* lock held: events were lost, so every watch that reads invalid fired. */
static void rescan(void)
{
	const struct segment *s;
	struct mon_watch *mw;
	uint32_t k, i;

	stat_add(overflows, 1);
	for (k = 0; k < mon.nsegs; k++) {
		s = mon.segs[k];
		for (i = 0, mw = s->watches; i < s->size; i++, mw++)
			if (s->meta[i].state == W_LIVE &&
			    !umn_valid(s->u, &mw->w))
				retire(mw, mw->addr, mw->addr + mw->len);
	}
}

/*
 * lock held: the watches events of handle s name.  Read under the lock
 * that unwatch takes, an event's watch is the one it fired for.  Lost
 * events set *overflow: every watch is rechecked once after the round
 * (a forked child's reopen loses each handle's).
 */
static void take_events(struct segment *s, const struct umn_event *ev,
			int n, bool *overflow)
{
	struct mon_watch *mw;
	int i;

	for (i = 0; i < n; i++) {
		if (ev[i].cause == UMN_CAUSE_OVERFLOW) {
			*overflow = true;
			continue;
		}
		if (ev[i].cause == UMN_CAUSE_PRESSURE) {
			give_back(s, ev[i].value);
			continue;
		}
		if (!ev[i].watch)
			continue;
		mw = (struct mon_watch *)((char *)ev[i].watch -
					  offsetof(struct mon_watch, w));
		stat_add(events, 1);
		if (meta(mw)->state == W_LIVE)
			retire(mw, ev[i].start, ev[i].end);
	}
}

static int by_start(const void *a, const void *b)
{
	const struct retiring *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * Pass the retired watches' ranges to notify(), merged where they touch
 * (every call takes libfabric's locks), then free the watches; batch by
 * batch until none is queued.
 */
static void run_retirements(uint64_t gen)
{
	struct retiring batch[RETIRE_BATCH];
	uint32_t i, j, n;
	bool stopping;
	uint64_t end;

next:
	pthread_mutex_lock(&mon.lock);
	/* Once stopped, the queue is the next generation's. */
	if (mon.gen != gen) {
		pthread_mutex_unlock(&mon.lock);
		return;
	}
	n = mon.queued < RETIRE_BATCH ? mon.queued : RETIRE_BATCH;
	mon.queued -= n;
	memcpy(batch, mon.queue + mon.queued, n * sizeof(*batch));
	pthread_mutex_unlock(&mon.lock);
	if (!n)
		return;

	qsort(batch, n, sizeof(*batch), by_start);
	pthread_mutex_lock(&mon.notify_lock);
	for (i = 0; i < n; i = j) {
		end = batch[i].end;
		for (j = i + 1; j < n && batch[j].start <= end; j++)
			if (batch[j].end > end)
				end = batch[j].end;
		/*
		 * Once stop() ran no cache is on libfabric's list, and the
		 * mm_list_rwlock notify() takes may be held by a domain
		 * open that waits for the lock stop()'s caller holds.  Once
		 * fi_fini() ran, notify()'s locks are destroyed.
		 */
		pthread_mutex_lock(&mon.lock);
		stopping = mon.gen != gen || mon.fini;
		pthread_mutex_unlock(&mon.lock);
		if (stopping)
			continue;
		mon.fid.import_ops->notify(&mon.fid,
					   (void *)(uintptr_t)batch[i].start,
					   end - batch[i].start);
		stat_add(notified, 1);
	}
	pthread_mutex_unlock(&mon.notify_lock);

	/* Once stopping, stop() freed every watch. */
	pthread_mutex_lock(&mon.lock);
	for (i = 0; i < n && mon.gen == gen; i++)
		watch_free(watch_at(batch[i].n));
	pthread_mutex_unlock(&mon.lock);
	goto next;
}

/*
 * The thread stops on an error: its device may no longer say what
 * changed.  Drop every entry that relies on a watch, and cache nothing
 * more until the last cache stops.
 */
static void *thread_failed(const char *what, int err, uint64_t gen)
{
	static bool said;
	struct mon_watch *mw;
	uint32_t n;

	pthread_mutex_lock(&mon.lock);
	/* A stopped thread's error is not the next generation's. */
	if (mon.gen != gen) {
		pthread_mutex_unlock(&mon.lock);
		return NULL;
	}
	WRITE_ONCE(mon.failed, true);
	pthread_setname_np(pthread_self(), UMN_OFI_FAILED_THREAD_NAME);
	for (n = 0; n < mon.capacity; n++) {
		mw = watch_at(n);
		if (meta(mw)->state == W_LIVE || meta(mw)->state == W_FORKED)
			retire(mw, mw->addr, mw->addr + mw->len);
	}
	pthread_mutex_unlock(&mon.lock);
	stat_add(failures, 1);
	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		umn_ofi__say(true, "the ummunotify monitor's thread stopped (%s: %s): registrations are not cached until every domain is closed",
			     what, strerror(err));
	run_retirements(gen);
	return NULL;
}

/* A thread's start: its generation, and the stopped thread it joins. */
struct thread_arg {
	pthread_t prev;
	bool has_prev;
	uint64_t gen;
};

static void *mon_thread(void *p)
{
	struct thread_arg arg = *(struct thread_arg *)p;
	struct umn_event events[EVENT_BATCH];
	struct pollfd pfd[MAX_HANDLES + 1];
	bool overflow;
	uint32_t k, nfds;
	uint64_t count;
	bool stopping;
	int n;

	free(p);
	/*
	 * Here, holding no lock of libfabric's: its start() and stop() hold
	 * mm_state_lock, which a domain open holding mm_list_rwlock, which
	 * the stopped thread may wait for in notify(), may be waiting for.
	 * Work queued meanwhile waits; valid() reads the kernel's words.
	 */
	if (arg.has_prev)
		pthread_join(arg.prev, NULL);
	for (;;) {
		/*
		 * Each handle's, a batch at a time; in a forked child each
		 * reopens first.  Once stopped, the events are the next
		 * thread's.
		 */
		overflow = false;
		for (k = 0, n = 0; n >= 0; k += n < EVENT_BATCH) {
			pthread_mutex_lock(&mon.lock);
			stopping = mon.gen != arg.gen;
			if (stopping || k == mon.nsegs) {
				if (!stopping && overflow)
					rescan();
				pthread_mutex_unlock(&mon.lock);
				break;
			}
			n = umn_read_events(mon.segs[k]->u, events,
					    EVENT_BATCH);
			if (n > 0)
				take_events(mon.segs[k], events, n, &overflow);
			pthread_mutex_unlock(&mon.lock);
		}
		if (stopping)
			return NULL;
		if (n < 0)
			return thread_failed("reading events", -n, arg.gen);
		run_retirements(arg.gen);

		/* The handles grow() adds meanwhile kick: the next round. */
		pthread_mutex_lock(&mon.lock);
		nfds = mon.nsegs;
		for (k = 0; k < nfds; k++)
			pfd[k] = (struct pollfd){ .fd = umn_fd(mon.segs[k]->u),
						  .events = POLLIN };
		pthread_mutex_unlock(&mon.lock);
		pfd[nfds] = (struct pollfd){ .fd = mon.kick_fd,
					     .events = POLLIN };
		if (poll(pfd, nfds + 1, -1) < 0 && errno != EINTR)
			return thread_failed("poll", errno, arg.gen);
		for (k = 0; k < nfds; k++)
			if (pfd[k].revents & (POLLERR | POLLHUP | POLLNVAL))
				return thread_failed("the device", EIO,
						     arg.gen);
		/* Else it would spin, or read whatever reused the fd. */
		if (pfd[nfds].revents & (POLLERR | POLLNVAL))
			return thread_failed("the wakeup eventfd", EIO,
					     arg.gen);
		if ((pfd[nfds].revents & POLLIN) &&
		    read(mon.kick_fd, &count, sizeof(count)) < 0 &&
		    errno != EAGAIN)
			return thread_failed("the wakeup eventfd", errno,
					     arg.gen);
	}
}

/*
 * lock held: a thread for this generation, which first joins the
 * previous one if that was stopped and not joined yet.  One eventfd
 * serves them all: a kick the stopped one read, the new one's first
 * round covers.
 */
static int thread_start(void)
{
	struct thread_arg *arg = malloc(sizeof(*arg));
	sigset_t all, old;
	pthread_t t;
	int ret;

	if (!arg)
		return -ENOMEM;
	if (mon.kick_fd < 0)
		mon.kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (mon.kick_fd < 0) {
		free(arg);
		return -errno;
	}
	*arg = (struct thread_arg){
		.prev = mon.thread,
		.has_prev = mon.alive,
		.gen = mon.gen,
	};
	/* The application's signals are not for this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&t, NULL, mon_thread, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		free(arg);
		return -ret;
	}
	/* umnstat --check's sign that the monitor runs, before start() returns. */
	pthread_setname_np(t, UMN_OFI_THREAD_NAME);
	mon.thread = t;
	mon.alive = true;
	mon.current = true;
	return 0;
}

/*
 * Every lock, in the order the threads take them, so that no thread of
 * ours is halfway through a change, or inside notify(), at fork().
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&mon.import_lock);
	pthread_mutex_lock(&mon.notify_lock);
	pthread_mutex_lock(&mon.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&mon.lock);
	pthread_mutex_unlock(&mon.notify_lock);
	pthread_mutex_unlock(&mon.import_lock);
}

/*
 * The child has no thread, and shares the parent's eventfd: close it, so
 * that stopping here never stops the parent's thread.  Its caches hold
 * the parent's entries, which its handle's watches (reopened) no longer
 * cover: the parent's watches read invalid here and stay in the index, so
 * that no new watch of their range validates those entries, until the
 * child subscribes the range (then notify() drops them first) or
 * unsubscribes them all.  Retirements in flight are the child's now.
 */
static void fork_child(void)
{
	struct mon_watch *mw;
	uint32_t n;

	pthread_mutex_init(&mon.import_lock, NULL);
	pthread_mutex_init(&mon.notify_lock, NULL);
	pthread_mutex_init(&mon.lock, NULL);
	pthread_mutex_init(&mon.open_lock, NULL);
	if (mon.kick_fd >= 0)
		close(mon.kick_fd);
	mon.kick_fd = -1;
	mon.alive = false;
	mon.current = false;
	mon.queued = 0;
	mon.nr_retiring = 0;
	for (n = 0; n < mon.capacity; n++) {
		mw = watch_at(n);
		if (mw->len)
			meta(mw)->state = W_FORKED;
	}
}

/*
 * After umn_open(), whose own handlers then run after ours at fork(): we
 * take our locks before the library's, as the thread does.
 */
static void register_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/*
 * libfabric's parameter, which fi_info -e lists: FI_UMMUNOTIFY_MAX_WATCHES.
 * Defined by the provider's init, inside fi_ini(), and else at the first
 * start(): fi_ini() would drop (and leak) what a program's own import
 * defined before it.  Where missing only: libfabric keeps duplicates.
 */
void umn_ofi__define_params(void)
{
	static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;
	int v;

	pthread_mutex_lock(&params_lock);
	if (fi_param_get_int(&umn_ofi__prov, "max_watches", &v) == -FI_ENOENT)
		fi_param_define(&umn_ofi__prov, "max_watches", FI_PARAM_INT,
				"Ranges the ummunotify memory monitor may watch at once, shared by every MR cache; it grows to it as they need (1 to 16777216, default %u)",
				DEFAULT_WATCHES);
	pthread_mutex_unlock(&params_lock);
}

static uint32_t max_watches(void)
{
	int v;

	umn_ofi__define_params();
	if (fi_param_get_int(&umn_ofi__prov, "max_watches", &v) != FI_SUCCESS)
		return DEFAULT_WATCHES;
	if (v < 1 || v > (1 << 24)) {
		FI_WARN(&umn_ofi__prov, FI_LOG_MR,
			"FI_UMMUNOTIFY_MAX_WATCHES=%d is not 1 to 16777216: using %u\n",
			v, DEFAULT_WATCHES);
		return DEFAULT_WATCHES;
	}
	return (uint32_t)v;
}

/* open_lock held: the first handle (again if it failed). */
static int mon_open(void)
{
	uint32_t max = max_watches();
	int ret;

	pthread_mutex_lock(&mon.lock);
	mon.max = max;
	ret = grow();
	pthread_mutex_unlock(&mon.lock);
	return ret;
}

/*
 * Nothing relies on any watch, the next start() starts afresh.
 * libfabric calls start() and stop() holding its mm_state_lock, which a
 * domain open holding mm_list_rwlock for writing may be waiting for,
 * while the thread waits for that rwlock in notify(): neither waits for
 * the thread.  stop() moves the generation on, and the stopped thread
 * then notifies and frees nothing more; the next thread joins it.  A
 * failed thread has stopped already: the next start() starts afresh.
 */
static void mon_stop_thread(void)
{
	struct mon_watch *mw;
	uint32_t n;

	pthread_mutex_lock(&mon.lock);
	mon.wanted = false;
	if (mon.current) {
		mon.gen++;
		mon.current = false;
		kick();
		/* umnstat --check: stopped, though it may not be gone yet. */
		pthread_setname_np(mon.thread, UMN_OFI_STOPPED_THREAD_NAME);
	}
	WRITE_ONCE(mon.failed, mon.fini);
	for (n = 0; n < mon.capacity; n++) {
		mw = watch_at(n);
		if (mw->len)
			watch_free(mw);
	}
	mon.queued = 0;
	pthread_mutex_unlock(&mon.lock);
	WRITE_ONCE(mon.stats.started, false);
}

/* At the import's close, after mon_stop_thread(): join the last thread. */
static void mon_reap(void)
{
	pthread_t thread;
	bool alive;

	pthread_mutex_lock(&mon.lock);
	alive = mon.alive;
	thread = mon.thread;
	mon.alive = false;
	pthread_mutex_unlock(&mon.lock);
	if (!alive)
		return;
	pthread_join(thread, NULL);
	pthread_mutex_lock(&mon.lock);
	close(mon.kick_fd);
	mon.kick_fd = -1;
	pthread_mutex_unlock(&mon.lock);
}

static int mon_start(struct fid_mem_monitor *monitor)
{
	static bool said;
	int ret;

	(void)monitor;
	pthread_mutex_lock(&mon.open_lock);
	ret = READ_ONCE(mon.nsegs) ? 0 : mon_open();
	pthread_mutex_unlock(&mon.open_lock);
	if (!ret) {
		pthread_once(&fork_once, register_fork_handlers);
		pthread_mutex_lock(&mon.lock);
		ret = mon.failed || mon.closing ? -EIO :
		      mon.current ? 0 : thread_start();
		mon.wanted = !ret;
		pthread_mutex_unlock(&mon.lock);
	}
	if (ret) {
		/* libfabric says so for every domain, at warning level. */
		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			umn_ofi__say(ret == -EMFILE || ret == -ENOSPC,
				     "the ummunotify memory monitor cannot start (%s): domains opened now cache no registrations",
				     strerror(-ret));
		return ret;
	}
	WRITE_ONCE(mon.stats.started, true);
	FI_INFO(&umn_ofi__prov, FI_LOG_MR,
		"ummunotify memory monitor started\n");
	return 0;
}

/*
 * The last cache is gone: nothing relies on any watch.  The import is
 * never closed here: libfabric 1.21 and later call stop() holding
 * mm_state_lock, which their close of an import takes.
 */
static void mon_stop(struct fid_mem_monitor *monitor)
{
	(void)monitor;
	mon_stop_thread();
	FI_INFO(&umn_ofi__prov, FI_LOG_MR,
		"ummunotify memory monitor stopped\n");
}

struct fid_mem_monitor *umn_ofi__monitor(void)
{
	return &mon.fid;
}

/* libfabric's own monitors, whose names in FI_MR_CACHE_MONITOR it obeys. */
bool umn_ofi__libfabric_monitor(const char *name)
{
	static const char *const names[] = {
		"userfaultfd", "uffd", "memhooks", "kdreg2", "disabled",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

int umn_ofi_import(void)
{
	const char *want = getenv("FI_MR_CACHE_MONITOR");
	int ret;

	/* libfabric would obey it at fi_ini(), but not after an import. */
	if (want && umn_ofi__libfabric_monitor(want))
		return -EPERM;
	/* Nothing opened yet: start() does, if a cache ever starts. */
	ret = umn_ofi__have_device();
	if (ret)
		return ret;
	pthread_mutex_lock(&mon.import_lock);
	if (mon.imported) {
		pthread_mutex_unlock(&mon.import_lock);
		return 0;
	}
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
	/* libfabric's FI_E* values below 256 are errno values. */
	ret = fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0,
			&mon.fid.fid, NULL);
	if (!ret) {
		mon.imported = true;
		WRITE_ONCE(mon.stats.imported, true);
		FI_INFO(&umn_ofi__prov, FI_LOG_MR,
			"imported the ummunotify memory monitor: it replaces libfabric's default monitor\n");
	}
	pthread_mutex_unlock(&mon.import_lock);
	return ret;
}

/*
 * Our destructor, then libfabric's fi_fini() (the provider's cleanup),
 * close the import when no cache uses the monitor.  A domain may close
 * after either: the plugin's destructor that glibc runs between the two,
 * an atexit() handler that runs after both, a thread still running.
 * libfabric then still calls the monitor, through the import: it stays
 * imported.  After our destructor it keeps working, and fi_fini() closes
 * it once the last cache stopped.  After fi_fini() nothing closes it (the
 * close takes libfabric's mm_state_lock, destroyed from then on, as are
 * the locks notify() takes): it fails safe, refusing every hit and
 * subscription and notifying nothing, until the process ends.
 */
static void close_import(bool fini)
{
	bool active;

	pthread_mutex_lock(&mon.import_lock);
	if (!mon.imported || mon.fini)
		goto out;
	pthread_mutex_lock(&mon.lock);
	active = mon.wanted;
	/*
	 * In the same section as the check: a domain opened by another
	 * thread from here on must not start a thread that mon_reap() would
	 * join (it joins the stopped one, forever) or whose eventfd it
	 * would close.
	 */
	mon.closing = !active;
	if (active && fini) {
		mon.fini = true;
		WRITE_ONCE(mon.failed, true);
		/* umnstat --check: it runs on, caching nothing. */
		if (mon.alive)
			pthread_setname_np(mon.thread,
					   UMN_OFI_FAILED_THREAD_NAME);
	}
	pthread_mutex_unlock(&mon.lock);
	/*
	 * A notify() already past the check of fini finishes before
	 * fi_fini() destroys the locks it takes.
	 */
	if (active && fini) {
		pthread_mutex_lock(&mon.notify_lock);
		pthread_mutex_unlock(&mon.notify_lock);
	}
	if (active) {
		FI_INFO(&umn_ofi__prov, FI_LOG_MR, "%s\n", fini ?
			"fi_fini() while a cache uses the ummunotify memory monitor: it stays imported, caching nothing" :
			"a cache still uses the ummunotify memory monitor: fi_fini() closes the import");
		goto out;
	}
	mon_stop_thread();
	mon_reap();
	fi_close(&mon.fid.fid);
	pthread_mutex_lock(&mon.lock);
	mon.closing = false;
	pthread_mutex_unlock(&mon.lock);
	mon.imported = false;
	WRITE_ONCE(mon.stats.imported, false);
	FI_INFO(&umn_ofi__prov, FI_LOG_MR,
		"closed the ummunotify memory monitor's import\n");
out:
	pthread_mutex_unlock(&mon.import_lock);
}

void umn_ofi__close(void)
{
	close_import(false);
}

void umn_ofi__fini(void)
{
	close_import(true);
}

void umn_ofi_stats(struct umn_ofi_stats *stats, size_t size)
{
	const uint64_t *from = &mon.stats.watches;
	struct umn_ofi_stats s;
	uint64_t *to = &s.watches;
	size_t i, n = (sizeof(s) - offsetof(struct umn_ofi_stats, watches)) /
		      sizeof(*to);

	s.imported = READ_ONCE(mon.stats.imported);
	s.started = READ_ONCE(mon.stats.started);
	s.abi = READ_ONCE(mon.stats.abi);
	for (i = 0; i < n; i++)
		to[i] = READ_ONCE(from[i]);
	memcpy(stats, &s, size < sizeof(s) ? size : sizeof(s));
}
