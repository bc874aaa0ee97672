// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The hit path, timed: umn_valid(), umn_changed(), and umn_cache_get() +
 * umn_cache_put() of a cached range for caches of 1 to 1M entries, from
 * one thread and from several (distinct entries, then one shared entry).
 * For scale, an uncontended pthread rwlock read lock and unlock, which a
 * locked lookup would add.  Runs on the test double, whose words behave
 * as the 2010 ABI's: umn_valid() does one load more than natively.  The
 * cache's hits again on one whole-address-space watch.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "ummunotify.h"
#include "check.h"

#define PAGE	4096UL
#define BASE	0x10000000UL
#define ITERS	2000000

static struct umn_cache *cache;
static unsigned int nr_entries;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fake_reg(void *arg, void *addr, size_t len, void **handle)
{
	(void)arg;
	(void)len;
	*handle = addr;
	return 0;
}

static void fake_dereg(void *arg, void *addr, size_t len, void *handle)
{
	(void)arg;
	(void)addr;
	(void)len;
	(void)handle;
}

struct worker {
	pthread_t thread;
	uint64_t seed;
	bool shared;		/* everyone on entry 0 */
	double ns;
};

static void *hits(void *arg)
{
	struct worker *w = arg;
	struct umn_cache_entry *e;
	uint64_t x = w->seed;
	unsigned int i, n;
	double t;

	t = now();
	for (i = 0; i < ITERS; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		n = w->shared ? 0 : (x >> 33) % nr_entries;
		if (umn_cache_get(cache, (void *)(BASE + n * 2 * PAGE + 64),
				  256, &e))
			abort();
		umn_cache_put(cache, e);
	}
	w->ns = (now() - t) * 1e9 / ITERS;
	return NULL;
}

static double run(unsigned int threads, bool shared)
{
	struct worker w[8];
	double ns = 0;
	unsigned int i;

	for (i = 0; i < threads; i++) {
		w[i] = (struct worker){ .seed = i + 1, .shared = shared };
		pthread_create(&w[i].thread, NULL, hits, &w[i]);
	}
	for (i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		ns += w[i].ns;
	}
	return ns / threads;
}

/* Hits of caches of 1 to 1M entries on a handle opened with flags. */
static void cache_hits(uint32_t flags)
{
	static const unsigned int sizes[] = { 1, 1000, 65536, 1 << 20 };
	struct umn_cache_attr attr = { .reg = fake_reg, .dereg = fake_dereg };
	struct umn_attr uattr = { .flags = flags,
				  .max_watches = (1 << 20) + 1 };
	struct umn_cache_entry *e;
	struct umn_double *d;
	struct umn *u;
	unsigned int s;

	CHECK_EQ(double_open(&u, &uattr, &d), 0);
	CHECK_EQ(umn_cache_create(u, &attr, &cache), 0);
	printf("%s:\n", flags ? "whole address space" : "a watch per entry");
	for (nr_entries = 0, s = 0; s < sizeof(sizes) / sizeof(sizes[0]);
	     s++) {
		for (; nr_entries < sizes[s]; nr_entries++) {
			CHECK_EQ(umn_cache_get(cache,
					       (void *)(BASE + nr_entries * 2 * PAGE),
					       PAGE, &e), 0);
			umn_cache_put(cache, e);
		}
		printf("get+put hit, %7u entries:  1 thread %6.1f ns, "
		       "2 threads %6.1f ns, 2 on one entry %6.1f ns\n",
		       nr_entries, run(1, false), run(2, false), run(2, true));
	}
	CHECK_EQ(umn_cache_destroy(cache), 0);
	CHECK_EQ(umn_close(u), 0);
	double_free(d);
}

int main(void)
{
	struct umn_attr uattr = { 0 };
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	volatile bool sink = false;
	struct umn_double *d;
	struct umn_watch w;
	struct umn *u;
	unsigned int i;
	double t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	CHECK_EQ(double_open(&u, &uattr, &d), 0);
	CHECK_EQ(umn_watch(u, (void *)BASE, PAGE, 0, &w), 0);
	t = now();
	for (i = 0; i < ITERS * 10; i++)
		sink |= umn_valid(u, &w);
	printf("umn_valid                        %6.1f ns\n",
	       (now() - t) * 1e9 / (ITERS * 10));
	t = now();
	for (i = 0; i < ITERS * 10; i++)
		sink |= umn_changed(u);
	printf("umn_changed                      %6.1f ns\n",
	       (now() - t) * 1e9 / (ITERS * 10));
	t = now();
	for (i = 0; i < ITERS; i++) {
		pthread_rwlock_rdlock(&rw);
		pthread_rwlock_unlock(&rw);
	}
	printf("rwlock rdlock+unlock (reference) %6.1f ns\n",
	       (now() - t) * 1e9 / ITERS);
	umn_unwatch(u, &w);
	CHECK_EQ(umn_close(u), 0);
	double_free(d);

	cache_hits(0);
	cache_hits(UMN_OPEN_WATCH_ALL);
	return sink & 2;
}
