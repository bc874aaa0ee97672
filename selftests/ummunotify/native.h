/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The native ABI as the tests use it: a file granted features, set up and
 * mapped as the documentation says; watches, the ring, fdinfo and sysfs.
 */
#ifndef UMMUNOTIFY_SELFTESTS_NATIVE_H
#define UMMUNOTIFY_SELFTESTS_NATIVE_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "calls.h"
#include "kselftest_harness.h"
#include "sysfile.h"

#define MAX_REGIONS	"/sys/module/ummunotify/parameters/max_regions"

#define WATCH_RING	(UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING)
#define ALL_FEATURES	(WATCH_RING | UMMUNOTIFY_FEATURE_PRESSURE)
#define CAUSE(name)	(1U << UMMUNOTIFY_CAUSE_##name)
#define EVENT_SIZE	((ssize_t)sizeof(struct ummunotify_ring_event))
#define BUF_PAGES	8

static size_t ps;

static void __attribute__((constructor)) init_page_size(void)
{
	ps = sysconf(_SC_PAGESIZE);
}

static inline int try_mmap(int fd, size_t len, int prot, int flags,
			   off_t offset)
{
	void *p = mmap(NULL, len, prot, flags, fd, offset);

	if (p == MAP_FAILED)
		return -errno;
	munmap(p, len);
	return 0;
}

static inline ssize_t try_read(int fd, void *buf, size_t len)
{
	ssize_t ret = read(fd, buf, len);

	return ret < 0 ? -errno : ret;
}

static inline int open_dev(struct __test_metadata *_metadata, int flags)
{
	int fd = open(DEVICE, flags | O_CLOEXEC);

	ASSERT_LE(0, fd) TH_LOG("open %s: %s", DEVICE, strerror(errno));
	return fd;
}

/* A file granted FEATURES, set up and mapped as the documentation says. */
struct umn {
	int fd;
	struct ummunotify_params p;
	char *area;		/* the read-only area */
	__u64 *head;		/* the ring's consumer position, or NULL */
};

static inline void umn_init(struct __test_metadata *_metadata, struct umn *u,
			    __u32 features, __u32 slots, __u32 ring_entries)
{
	char *page;

	u->fd = open_dev(_metadata, O_RDWR);
	ASSERT_EQ((long)features, exchange(u->fd, features));
	ASSERT_EQ(0, setup(u->fd, &u->p, slots, ring_entries));
	u->area = mmap(NULL, u->p.mmap_size, PROT_READ, MAP_SHARED, u->fd, 0);
	ASSERT_NE(MAP_FAILED, u->area) TH_LOG("mmap: %s", strerror(errno));
	if (!(features & UMMUNOTIFY_FEATURE_RING))
		return;
	page = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, u->fd,
		    u->p.head_offset);
	ASSERT_NE(MAP_FAILED, page) TH_LOG("mmap head: %s", strerror(errno));
	u->head = (__u64 *)(page + u->p.off.head);
}

static inline __u64 area_u64(const struct umn *u, size_t offset)
{
	return __atomic_load_n((__u64 *)(u->area + offset), __ATOMIC_ACQUIRE);
}

/* A cache's validity check: one acquire load of the generation word. */
static inline __u64 gen_of(const struct umn *u, __u32 slot)
{
	return area_u64(u, u->p.off.generations + slot * sizeof(__u64));
}

static inline __u64 ring_tail(const struct umn *u)
{
	return area_u64(u, u->p.off.tail);
}

static inline __u64 ring_dropped(const struct umn *u)
{
	return area_u64(u, u->p.off.dropped);
}

static inline void set_head(struct umn *u, __u64 head)
{
	__atomic_store_n(u->head, head, __ATOMIC_RELEASE);
}

/* The documented consumer, one event at a time; false when empty. */
static inline bool ring_pop(struct umn *u, struct ummunotify_ring_event *ev)
{
	const struct ummunotify_ring_event *events =
		(const void *)(u->area + u->p.off.events);
	__u32 mask = *(const __u32 *)(u->area + u->p.off.ring_mask);
	__u64 head = *u->head;

	if (head == ring_tail(u))
		return false;
	*ev = events[head & mask];
	set_head(u, head + 1);
	return true;
}

static inline bool ring_empty(const struct umn *u)
{
	return *u->head == ring_tail(u);
}

static inline void check_event(struct __test_metadata *_metadata,
			       const struct ummunotify_ring_event *ev,
			       unsigned int cause, const void *start,
			       size_t len, __u64 cookie, __u32 slot)
{
	EXPECT_EQ(cause, ev->cause);
	EXPECT_EQ((uintptr_t)start, ev->start);
	EXPECT_EQ((uintptr_t)start + len, ev->end);
	EXPECT_EQ(cookie, ev->user_cookie);
	EXPECT_EQ(slot, ev->slot);
	EXPECT_EQ(0, ev->flags);
}

/*
 * Pop the next event, which must be CAUSE over [START, START + LEN) for
 * the watch COOKIE in SLOT.  Returns the event's generation.
 */
static inline __u64 expect_event(struct __test_metadata *_metadata,
				 struct umn *u, unsigned int cause,
				 const void *start, size_t len, __u64 cookie,
				 __u32 slot)
{
	struct ummunotify_ring_event ev;

	ASSERT_TRUE(ring_pop(u, &ev)) TH_LOG("the ring is empty");
	check_event(_metadata, &ev, cause, start, len, cookie, slot);
	return ev.generation;
}

static inline void expect_overflow(struct __test_metadata *_metadata,
				   struct umn *u, __u64 lost)
{
	struct ummunotify_ring_event ev;

	ASSERT_TRUE(ring_pop(u, &ev)) TH_LOG("the ring is empty");
	EXPECT_EQ(UMMUNOTIFY_CAUSE_OVERFLOW, ev.cause);
	EXPECT_EQ(lost, ev.generation);
	EXPECT_EQ(UMMUNOTIFY_NO_SLOT, ev.slot);
	EXPECT_EQ(0, ev.flags);
}

static inline struct ummunotify_watch watch_arg(const void *start, size_t len,
						__u64 cookie, __u32 causes)
{
	return (struct ummunotify_watch) {
		.start = (uintptr_t)start,
		.end = (uintptr_t)start + len,
		.user_cookie = cookie,
		.causes = causes,
	};
}

static inline struct ummunotify_watch
watch_range(struct __test_metadata *_metadata, int fd, const void *start,
	    size_t len, __u64 cookie, __u32 causes)
{
	struct ummunotify_watch w = watch_arg(start, len, cookie, causes);

	ASSERT_EQ(0, uioctl(fd, UMMUNOTIFY_WATCH, &w));
	return w;
}

static inline int unwatch(int fd, __u64 cookie)
{
	return uioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie);
}

static inline int resize(int fd, struct ummunotify_watch *w, const void *start,
			 size_t len, __u64 cookie, __u32 causes)
{
	*w = watch_arg(start, len, cookie, causes);
	return uioctl(fd, UMMUNOTIFY_RESIZE, w);
}

static inline int register_region(int fd, const void *start, size_t len,
				  __u64 cookie)
{
	struct ummunotify_register_ioctl r = {
		.start = (uintptr_t)start,
		.end = (uintptr_t)start + len,
		.user_cookie = cookie,
	};

	return uioctl(fd, UMMUNOTIFY_REGISTER_REGION, &r);
}

/*
 * PAGES populated read-write pages between two PROT_NONE guard pages
 * (see the top of the file).
 */
static inline char *map_guarded(struct __test_metadata *_metadata, size_t pages)
{
	char *p;

	ASSERT_LT((pages + 2) * ps, 2UL << 20);
	p = mmap(NULL, (pages + 2) * ps, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	p += ps;
	ASSERT_EQ(p, mmap(p, pages * ps, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	memset(p, 0x5a, pages * ps);
	return p;
}

/* Fresh pages at P, where nothing is mapped; false if P was taken. */
static inline bool map_fresh(char *p, size_t len)
{
	return mmap(p, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		    -1, 0) == p;
}

static inline void clear_page(struct __test_metadata *_metadata, char *p)
{
	ASSERT_EQ(0, madvise(p, ps, MADV_DONTNEED));
}

static inline void clear_pages(struct __test_metadata *_metadata, char *buf,
			       unsigned int first, unsigned int n)
{
	for (unsigned int i = first; i < first + n; i++)
		clear_page(_metadata, buf + i * ps);
}

/* A page of its own holding a copy of SRC, made read-only: EFAULT bait. */
static inline void *read_only_copy(struct __test_metadata *_metadata,
				   const void *src, size_t len)
{
	void *p = mmap(NULL, ps, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, p);
	memcpy(p, src, len);
	ASSERT_EQ(0, mprotect(p, ps, PROT_READ));
	return p;
}

static inline int write_max_regions(long long value)
{
	char text[32];

	snprintf(text, sizeof(text), "%lld\n", value);
	return write_file(MAX_REGIONS, text) ? -errno : 0;
}

static inline int open_pagemap(struct __test_metadata *_metadata)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	ASSERT_LE(0, fd);
	return fd;
}

/* The entry of /proc/self/pagemap for ADDR; 0 (not present) on error. */
static inline __u64 pagemap_entry(int pagemap, const void *addr)
{
	__u64 entry;

	if (pread(pagemap, &entry, sizeof(entry),
		  (uintptr_t)addr / ps * sizeof(entry)) != sizeof(entry))
		return 0;
	return entry;
}

static inline bool page_present(int pagemap, const void *addr)
{
	return pagemap_entry(pagemap, addr) >> 63;
}

/* The page frame mapped at ADDR, 0 if none (or not shown to us). */
static inline __u64 pfn_at(int pagemap, const void *addr)
{
	__u64 entry = pagemap_entry(pagemap, addr);

	return entry >> 63 ? entry & ((1ULL << 55) - 1) : 0;
}

static inline double seconds_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec - start->tv_sec +
	       (now.tv_nsec - start->tv_nsec) / 1e9;
}

static inline bool ranges_overlap(__u64 a, __u64 a_len, __u64 b, __u64 b_len)
{
	return a < b + b_len && b < a + a_len;
}

#ifdef __LP64__
/*
 * A thread that keeps the address space invalidating: MADV_FREE over
 * 16 GiB whose every 2 MiB has a page table, so that each call walks four
 * million page table entries, again and again until busy_stop().  Not
 * MADV_DONTNEED: since 6.14 ("mm: pgtable: reclaim empty PTE page in
 * madvise(MADV_DONTNEED)", CONFIG_PT_RECLAIM) its first call frees the
 * page tables it emptied, and every later one is over at once.
 * MADV_FREE leaves the pages mapped, and so their page tables.
 */
#define BUSY_LEN	(16UL << 30)

struct busy {
	char *p;
	pthread_t thread;
	atomic_bool stop;
};

static inline void *busy_invalidating(void *arg)
{
	struct busy *b = arg;

	while (!atomic_load(&b->stop))
		madvise(b->p, BUSY_LEN, MADV_FREE);
	return NULL;
}

/* BUSY_LEN bytes with a page table every 2 MiB, or MAP_FAILED. */
static inline char *busy_map(void)
{
	char *p = mmap(NULL, BUSY_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return p;
	if (madvise(p, BUSY_LEN, MADV_NOHUGEPAGE)) {
		munmap(p, BUSY_LEN);
		return MAP_FAILED;
	}
	for (size_t off = 0; off < BUSY_LEN; off += 2UL << 20)
		p[off] = 1;
	return p;
}

static inline void busy_start(struct __test_metadata *_metadata,
			      struct busy *b)
{
	b->p = busy_map();
	ASSERT_NE(MAP_FAILED, b->p);
	atomic_store(&b->stop, false);
	ASSERT_EQ(0, pthread_create(&b->thread, NULL, busy_invalidating, b));
}

static inline void busy_stop(struct __test_metadata *_metadata,
			     struct busy *b)
{
	atomic_store(&b->stop, true);
	ASSERT_EQ(0, pthread_join(b->thread, NULL));
	ASSERT_EQ(0, munmap(b->p, BUSY_LEN));
}
#endif

#endif
