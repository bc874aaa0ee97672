// SPDX-License-Identifier: GPL-2.0
/*
 * ummunotify's native ABI: a generation word per watch, checked with one
 * load, and the event ring, consumed in shared memory.  native-v is the
 * same with UMMUNOTIFY_WATCHV: an unwatch waits for the next watch and
 * goes with it, one system call for both, as a cache evicting for a miss
 * would do it.  native-all is one whole-address-space watch and a drain of
 * the ring after each munmap(): what a cache in that mode cannot do with
 * less, in the loops of 3.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "bench.h"

#define RING_ENTRIES	65536

static int fd = -1;
static void *area, *head_page;
static size_t area_size;
static const uint64_t *gens, *tail;
static uint64_t *head;
static const struct ummunotify_ring_event *ring;
static uint32_t mask;

static int native_open(unsigned int max_entries)
{
	__u32 features = UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING;
	struct ummunotify_params p = {
		.slots = max_entries,
		.ring_entries = RING_ENTRIES,
	};

	fd = open("/dev/ummunotify", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features) ||
	    ioctl(fd, UMMUNOTIFY_SETUP, &p))
		return -errno;
	if (!(features & UMMUNOTIFY_FEATURE_RING))
		return -EOPNOTSUPP;
	area_size = p.mmap_size;
	area = mmap(NULL, area_size, PROT_READ, MAP_SHARED, fd, 0);
	if (area == MAP_FAILED)
		return -errno;
	head_page = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			 p.head_offset);
	if (head_page == MAP_FAILED)
		return -errno;
	gens = area + p.off.generations;
	tail = area + p.off.tail;
	ring = area + p.off.events;
	mask = *(const uint32_t *)(area + p.off.ring_mask);
	head = head_page + p.off.head;
	return 0;
}

static void native_close(void)
{
	munmap(head_page, page);
	munmap(area, area_size);
	close(fd);
}

static int native_watch(struct region *e)
{
	struct ummunotify_watch w = {
		.start = (uintptr_t)e->addr,
		.end = (uintptr_t)e->addr + e->len,
		.user_cookie = (uintptr_t)e,
		.flags = e->len ? 0 : UMMUNOTIFY_WATCH_ALL,
	};

	if (ioctl(fd, UMMUNOTIFY_WATCH, &w))
		return -errno;
	e->word = &gens[w.slot];
	e->gen = w.generation;
	return 0;
}

static void native_unwatch(struct region *e)
{
	__u64 cookie = (uintptr_t)e;

	if (ioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie))
		fail("UMMUNOTIFY_UNREGISTER_REGION", -errno);
}

/* native-v: the unwatches waiting for the next watch. */
#define DEFERRED_MAX	8
static __u64 deferred[DEFERRED_MAX];
static unsigned int nr_deferred;

static int watchv(struct ummunotify_watch *w, unsigned int nr_watch)
{
	struct ummunotify_watchv v = {
		.unwatch = (uintptr_t)deferred,
		.watch = (uintptr_t)w,
		.nr_unwatch = nr_deferred,
		.nr_watch = nr_watch,
	};

	if (ioctl(fd, UMMUNOTIFY_WATCHV, &v))
		return -errno;
	nr_deferred = 0;
	return 0;
}

static int native_v_watch(struct region *e)
{
	struct ummunotify_watch w = {
		.start = (uintptr_t)e->addr,
		.end = (uintptr_t)e->addr + e->len,
		.user_cookie = (uintptr_t)e,
		.flags = e->len ? 0 : UMMUNOTIFY_WATCH_ALL,
	};
	int ret = watchv(&w, 1);

	if (ret)
		return ret;
	e->word = &gens[w.slot];
	e->gen = w.generation;
	return 0;
}

static void native_v_unwatch(struct region *e)
{
	int ret;

	deferred[nr_deferred++] = (uintptr_t)e;
	if (nr_deferred == DEFERRED_MAX) {
		ret = watchv(NULL, 0);
		if (ret)
			fail("UMMUNOTIFY_WATCHV", ret);
	}
}

static void native_v_close(void)
{
	nr_deferred = 0;
	native_close();
}

static inline bool native_valid(struct region *e)
{
	return __atomic_load_n(e->word, __ATOMIC_ACQUIRE) == e->gen;
}

/*
 * The entry's own fields are the cache's, at hand after a lookup: the
 * check is the load of the generation word and a compare.
 */
static unsigned long native_check(struct region *e, unsigned long n)
{
	struct region at_hand = *e;
	unsigned long i;

#pragma GCC unroll 8
	for (i = 0; i < n; i++)
		if (!native_valid(&at_hand))
			break;
	return i;
}

static unsigned long native_drain(unsigned long *lost)
{
	uint64_t pos = *head, end = __atomic_load_n(tail, __ATOMIC_ACQUIRE);
	unsigned long events = 0;

	for (; pos != end; pos++) {
		const struct ummunotify_ring_event *ev = &ring[pos & mask];

		if (ev->cause != UMMUNOTIFY_CAUSE_OVERFLOW)
			events++;
		else if (lost)
			*lost += ev->generation;
	}
	__atomic_store_n(head, pos, __ATOMIC_RELEASE);
	return events;
}

/* read() is the ring's other consumer: the file's locks, not the head. */
static void native_hammer(void)
{
	struct ummunotify_ring_event ev[64];

	if (read(fd, ev, sizeof(ev)) < 0 && errno != EAGAIN)
		fail("read ring", -errno);
}

const struct backend native_backend = {
	.name = "native",
	.open = native_open,
	.close = native_close,
	.watch = native_watch,
	.unwatch = native_unwatch,
	.valid = native_valid,
	.check = native_check,
	.drain = native_drain,
	.hammer = native_hammer,
};

const struct backend native_v_backend = {
	.name = "native-v",
	.open = native_open,
	.close = native_v_close,
	.watch = native_v_watch,
	.unwatch = native_v_unwatch,
	.valid = native_valid,
	.check = native_check,
	.drain = native_drain,
	.hammer = native_hammer,
};

/* native-all: no watch per entry; the "unwatch" after munmap() drains. */
static int native_all_open(unsigned int max_entries)
{
	static struct region everything;
	int ret = native_open(max_entries);

	return ret ? ret : native_watch(&everything);
}

static int native_all_watch(struct region *e)
{
	(void)e;
	return 0;
}

static void native_all_unwatch(struct region *e)
{
	(void)e;
	native_drain(NULL);
}

const struct backend native_all_backend = {
	.name = "native-all",
	.open = native_all_open,
	.close = native_close,
	.watch = native_all_watch,
	.unwatch = native_all_unwatch,
	.valid = native_valid,
	.check = native_check,
	.drain = native_drain,
	.hammer = native_hammer,
};
