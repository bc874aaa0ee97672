// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The cache under concurrency: threads get and put while another one
 * "unmaps" (the pages change version and the source reports it) and
 * another drains, flushes and asks for memory back.  Checked on every
 * get: the entry covers the request and its registration is no older
 * than the memory was when the get started; on every dereg(): nobody
 * uses it (and under ASan, nobody touches it afterwards).  Once with a
 * watch per entry, once with one watch of the whole address space.
 * A getter retries an EAGAIN, as umn_cache_get(3) tells callers.  The
 * unmapper changes memory faster than a real munmap() could, and under
 * ThreadSanitizer faster than the whole-space mode applies the changes:
 * the ring overflows thousands of times a run, and a registration that
 * keeps meeting overflows for a second fails (0 to 5 gets in 600k seen).
 * More than a small fraction of such gets, or a get that keeps failing,
 * is a livelock.  Last, the stats are read while entries with hits are
 * dropped: no counter since the cache's creation may go back.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "ummunotify.h"
#include "check.h"

#define PAGE		4096UL
#define PAGES		64
#define BASE		0x10000000UL
#define GETTERS		3
#define GETS		200000
/*
 * Or as many as fit in this: under TSan the unmapper's flood makes gets
 * retry (and back off) so often that 200000 took over a quarter of an
 * hour.
 */
#define GET_SECONDS	20
/*
 * Of one get: each EAGAIN is a second of the range changing under the
 * registration's retries, so this bounds a getter's starvation to ten
 * seconds.  Three failed on an idle two-core host (seed 1796177715).
 */
#define MAX_ATTEMPTS	10

struct treg {
	uint64_t start;
	uint64_t end;
	unsigned int users;
	uint64_t version[];	/* of each page when registered */
};

static uint64_t version[PAGES];
static time_t deadline;
static uint64_t regs, deregs, eagains, gets;
static struct umn_double *dbl;
static struct umn_cache *cache;
static bool stop;

static unsigned int page_of(uint64_t addr)
{
	return (addr - BASE) / PAGE;
}

static void change(uint64_t start, uint64_t end, void *arg)
{
	unsigned int p;

	(void)arg;
	for (p = page_of(start); p <= page_of(end - 1) && p < PAGES; p++)
		__atomic_fetch_add(&version[p], 1, __ATOMIC_RELEASE);
}

static int treg_reg(void *arg, void *addr, size_t len, void **handle)
{
	uint64_t start = (uintptr_t)addr;
	unsigned int p, n = len / PAGE;
	struct treg *r = malloc(sizeof(*r) + n * sizeof(r->version[0]));

	(void)arg;
	CHECK(r);
	r->start = start;
	r->end = start + len;
	r->users = 0;
	for (p = 0; p < n; p++)
		r->version[p] = __atomic_load_n(&version[page_of(start) + p],
						__ATOMIC_ACQUIRE);
	__atomic_fetch_add(&regs, 1, __ATOMIC_RELAXED);
	*handle = r;
	return 0;
}

static void treg_dereg(void *arg, void *addr, size_t len, void *handle)
{
	struct treg *r = handle;

	(void)arg;
	CHECK_EQ(__atomic_load_n(&r->users, __ATOMIC_ACQUIRE), 0);
	CHECK_EQ(r->start, (uintptr_t)addr);
	CHECK_EQ(r->end - r->start, len);
	__atomic_fetch_add(&deregs, 1, __ATOMIC_RELAXED);
	free(r);
}

static void *getter(void *arg)
{
	uint64_t seed = (uintptr_t)arg, before[4];
	struct umn_cache_entry *e;
	unsigned int i, p, first, pages, attempts;
	struct treg *r;
	uint64_t lo, hi;
	int ret;

	for (i = 0; i < GETS; i++) {
		if (i % 1024 == 0 && time(NULL) > deadline)
			break;
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		first = (seed >> 33) % (PAGES - 4);
		pages = 1 + (seed >> 20) % 3;
		lo = BASE + first * PAGE + (seed >> 8) % 512;
		hi = BASE + (first + pages) * PAGE - (seed >> 12) % 512;
		for (p = 0; p <= pages; p++)
			before[p] = __atomic_load_n(&version[first + p],
						    __ATOMIC_ACQUIRE);
		for (attempts = 1;; attempts++) {
			ret = umn_cache_get(cache, (void *)(uintptr_t)lo,
					    hi - lo, &e);
			if (ret != -EAGAIN)
				break;
			__atomic_fetch_add(&eagains, 1, __ATOMIC_RELAXED);
			CHECK(attempts < MAX_ATTEMPTS);
		}
		CHECK_EQ(ret, 0);
		r = e->handle;
		__atomic_fetch_add(&r->users, 1, __ATOMIC_ACQUIRE);
		CHECK(r->start <= lo && hi <= r->end);
		/* Changed before the get began: must not be served. */
		for (p = page_of(lo); p <= page_of(hi - 1); p++)
			CHECK(r->version[p - page_of(r->start)] >=
			      before[p - first]);
		__atomic_fetch_sub(&r->users, 1, __ATOMIC_RELEASE);
		umn_cache_put(cache, e);
	}
	__atomic_fetch_add(&gets, i, __ATOMIC_RELAXED);
	return NULL;
}

static void *unmapper(void *arg)
{
	uint64_t seed = (uintptr_t)arg, start;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		start = BASE + ((seed >> 33) % PAGES) * PAGE;
		double_invalidate(dbl, start, start + PAGE * (1 + seed % 2),
				  UMN_CAUSE_UNMAP);
	}
	return NULL;
}

static void *drainer(void *arg)
{
	unsigned int n = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		umn_cache_drain(cache);
		if (++n % 1000 == 0)
			umn_cache_flush(cache);
		else if (n % 300 == 0)
			double_pressure(dbl, 4 * PAGE);
	}
	return NULL;
}

static void run(uint64_t seed, uint32_t flags)
{
	struct umn_cache_attr attr = {
		.reg = treg_reg,
		.dereg = treg_dereg,
		.max_entries = 16,
	};
	struct umn_attr uattr = { .flags = flags };
	pthread_t getters[GETTERS], other[2];
	struct umn_cache_stats s;
	struct umn *u;
	int i;

	regs = deregs = eagains = gets = 0;
	stop = false;
	deadline = time(NULL) + GET_SECONDS;
	CHECK_EQ(double_open(&u, &uattr, &dbl), 0);
	double_on_change(dbl, change, NULL);
	CHECK_EQ(umn_cache_create(u, &attr, &cache), 0);
	for (i = 0; i < GETTERS; i++)
		pthread_create(&getters[i], NULL, getter,
			       (void *)(uintptr_t)(seed + i));
	pthread_create(&other[0], NULL, unmapper, (void *)(uintptr_t)~seed);
	pthread_create(&other[1], NULL, drainer, NULL);
	for (i = 0; i < GETTERS; i++)
		pthread_join(getters[i], NULL);
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	pthread_join(other[0], NULL);
	pthread_join(other[1], NULL);

	umn_cache_stats(cache, &s);
	CHECK_EQ(s.in_use, 0);
	/* A get that failed was a miss. */
	CHECK_EQ(s.hits + s.misses, gets + eagains);
	printf("test-stress: %s: %" PRIu64 " hits, %" PRIu64 " misses, %"
	       PRIu64 " invalidations, %" PRIu64 " evictions, %" PRIu64
	       " retries, %" PRIu64 " overflows, %" PRIu64 " EAGAIN in %"
	       PRIu64 " gets\n",
	       flags ? "whole space" : "per range", s.hits, s.misses,
	       s.invalidations, s.evictions, s.retries, s.overflows, eagains,
	       gets);
	/*
	 * At most one in a hundred gets gave up once (under TSan's slowness
	 * the flood overflows the whole-space ring thousands of times).
	 */
	CHECK(eagains * 100 <= gets);
	CHECK(s.hits > 0 && s.invalidations > 0);
	CHECK_EQ(umn_cache_destroy(cache), 0);
	CHECK_EQ(regs, deregs);
	CHECK_EQ(double_watches(dbl), flags ? 1 : 0);
	CHECK_EQ(umn_close(u), 0);
	double_free(dbl);
}

/* Enough entries, all made first, that reading the stats walks 32 chunks. */
#define STATS_PAGES	2048

static int count_reg(void *arg, void *addr, size_t len, void **handle)
{
	(void)arg;
	(void)len;
	__atomic_fetch_add(&regs, 1, __ATOMIC_RELAXED);
	*handle = addr;
	return 0;
}

static void count_dereg(void *arg, void *addr, size_t len, void *handle)
{
	(void)arg;
	(void)addr;
	(void)len;
	(void)handle;
	__atomic_fetch_add(&deregs, 1, __ATOMIC_RELAXED);
}

static void get_put(unsigned int page)
{
	struct umn_cache_entry *e;

	CHECK_EQ(umn_cache_get(cache, (void *)(BASE + page * PAGE), PAGE, &e),
		 0);
	umn_cache_put(cache, e);
}

static void *getter_of_all(void *arg)
{
	unsigned int i;

	(void)arg;
	/* Each page four times: a miss, then hits for the flusher to drop. */
	for (i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++)
		get_put(i / 4 % STATS_PAGES);
	__atomic_fetch_add(&gets, i, __ATOMIC_RELAXED);
	return NULL;
}

static void *flusher(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		umn_cache_flush(cache);
	return NULL;
}

/*
 * The counters up to overflows count since the cache's creation: read
 * while entries with hits are dropped (the flusher), none goes back.
 */
static void stats_only_grow(void)
{
	enum { COUNTERS = offsetof(struct umn_cache_stats, entries) /
			  sizeof(uint64_t) };
	struct umn_cache_attr attr = { .reg = count_reg, .dereg = count_dereg };
	struct umn_attr uattr = { .flags = UMN_OPEN_WATCH_ALL };
	uint64_t last[COUNTERS] = { 0 }, reads;
	struct umn_cache_stats s;
	const uint64_t *now = (const uint64_t *)&s;
	time_t end = time(NULL) + 2;
	pthread_t other[2];
	struct umn *u;
	int i;

	regs = deregs = 0;
	stop = false;
	CHECK_EQ(double_open(&u, &uattr, &dbl), 0);
	CHECK_EQ(umn_cache_create(u, &attr, &cache), 0);
	for (i = 0; i < STATS_PAGES; i++)
		get_put(i);
	gets = STATS_PAGES;
	pthread_create(&other[0], NULL, getter_of_all, NULL);
	pthread_create(&other[1], NULL, flusher, NULL);
	for (reads = 0; reads < 200000 && time(NULL) < end; reads++) {
		umn_cache_stats(cache, &s);
		for (i = 0; i < COUNTERS; i++) {
			CHECK(now[i] >= last[i]);
			last[i] = now[i];
		}
	}
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	pthread_join(other[0], NULL);
	pthread_join(other[1], NULL);
	umn_cache_stats(cache, &s);
	CHECK(s.hits > 0);
	CHECK_EQ(s.hits + s.misses, gets);
	printf("test-stress: stats read %" PRIu64 " times, none went back\n",
	       reads);
	CHECK_EQ(umn_cache_destroy(cache), 0);
	CHECK_EQ(regs, deregs);
	CHECK_EQ(umn_close(u), 0);
	double_free(dbl);
}

int main(void)
{
	uint64_t seed = seed_rng("test-stress");

	run(seed, 0);
	run(seed, UMN_OPEN_WATCH_ALL);
	stats_only_grow();
	printf("test-stress: ok\n");
	return 0;
}
