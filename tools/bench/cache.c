// SPDX-License-Identifier: GPL-2.0
/*
 * 6. libummunotify's registration cache, in each mode (a watch per entry,
 * one watch of the whole address space): the hit path with 100,000
 * entries cached, and a miss that re-registers for real with
 * ibv_reg_mr() (when built with <infiniband/verbs.h> and a device, rxe in
 * the guest, exists).  Also the cache as a backend of the loops of 3.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <ummunotify.h>
#ifdef HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#include "bench.h"
#include "report.h"

#define CACHE_ENTRIES	100000
#define HITS		200000
#define FEW_ENTRIES	1000	/* a working set a TLB holds */
#define MISSES		40
#define MISS_LEN	(64 << 10)

struct cache_out {
	double hit[REPS], few[REPS], hot[REPS], hit_getpid[REPS];
	double miss[REPS], miss_getpid[REPS];
	int open_error;		/* of umn_open(): nothing timed */
	bool rdma;
};

/* The modes, as umn_open() flags, and their names in the tables. */
static const struct cache_mode {
	const char *name;
	uint32_t flags;
} modes[] = {
	{ "cache", 0 },
	{ "cache-all", UMN_OPEN_WATCH_ALL },
};

/* The hit path never registers: the 100,000 need not pin anything. */
static int no_reg(void *arg, void *addr, size_t len, void **handle)
{
	(void)arg;
	(void)len;
	*handle = addr;
	return 0;
}

static void no_dereg(void *arg, void *addr, size_t len, void *handle)
{
	(void)arg;
	(void)addr;
	(void)len;
	(void)handle;
}

static struct umn_cache *create(struct umn *u, const struct umn_cache_attr *a)
{
	struct umn_cache *c;
	int ret = umn_cache_create(u, a, &c);

	if (ret)
		fail("umn_cache_create", ret);
	return c;
}

static void get_put(struct umn_cache *c, const void *addr, size_t len)
{
	struct umn_cache_entry *e;
	int ret = umn_cache_get(c, addr, len, &e);

	if (ret)
		fail("umn_cache_get", ret);
	umn_cache_put(c, e);
}

/* ns per hit on one of the first n entries, at random (1: the first). */
static double random_hits(struct umn_cache *c, const char *area,
			  unsigned int n)
{
	uint64_t x = 1, t = now_ns();
	int i;

	for (i = 0; i < HITS; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		get_put(c, area + (x >> 33) % n * page, page);
	}
	return (double)(now_ns() - t) / HITS;
}

static void time_hits(struct umn_cache *c, const char *area,
		      struct cache_out *out)
{
	struct umn_cache_stats st;
	int i, r;

	for (i = 0; i < CACHE_ENTRIES; i++)
		get_put(c, area + (size_t)i * page, page);
	for (r = 0; r < REPS; r++) {
		out->hit_getpid[r] = getpid_ns();
		out->hit[r] = random_hits(c, area, CACHE_ENTRIES);
		out->few[r] = random_hits(c, area, FEW_ENTRIES);
		out->hot[r] = random_hits(c, area, 1);
	}
	umn_cache_stats(c, &st);
	if (st.misses != CACHE_ENTRIES ||
	    st.hits != (uint64_t)HITS * REPS * 3)
		fail("the cache missed where it should have hit", -EINVAL);
}

#ifdef HAVE_VERBS
static int mr_reg(void *pd, void *addr, size_t len, void **mr)
{
	*mr = ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	return *mr ? 0 : -errno;
}

static void mr_dereg(void *pd, void *addr, size_t len, void *mr)
{
	(void)pd;
	(void)addr;
	(void)len;
	ibv_dereg_mr(mr);
}

static struct ibv_pd *open_pd(void)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) :
						     NULL;

	return ctx ? ibv_alloc_pd(ctx) : NULL;
}

/* Each miss finds the entry's pages replaced (madvise) and re-registers. */
static void time_misses(struct umn *u, struct cache_out *out)
{
	struct ibv_pd *pd = open_pd();
	struct umn_cache_attr a = { .reg = mr_reg, .dereg = mr_dereg };
	struct umn_cache_stats st;
	struct umn_cache *c;
	char *buf = map(MISS_LEN);
	uint64_t t;
	int i, r;

	if (!pd)
		return;
	a.arg = pd;
	c = create(u, &a);
	touch(buf, MISS_LEN);
	get_put(c, buf, MISS_LEN);
	for (r = 0; r < REPS; r++) {
		out->miss_getpid[r] = getpid_ns();
		out->miss[r] = 0;
		for (i = 0; i < MISSES; i++) {
			madvise(buf, MISS_LEN, MADV_DONTNEED);
			touch(buf, MISS_LEN);
			t = now_ns();
			get_put(c, buf, MISS_LEN);
			out->miss[r] += now_ns() - t;
		}
		out->miss[r] /= MISSES;
	}
	umn_cache_stats(c, &st);
	if (st.misses != 1 + MISSES * REPS)
		fail("the cache hit a replaced buffer", -EINVAL);
	umn_cache_destroy(c);
	out->rdma = true;
}
#else
static void time_misses(struct umn *u, struct cache_out *out)
{
	(void)u;
	(void)out;
}
#endif

static void cache_child(const void *arg)
{
	const struct cache_mode *mode = arg;
	struct umn_attr attr = { .flags = mode->flags,
				 .max_watches = CACHE_ENTRIES + 64 };
	struct umn_cache_attr a = { .reg = no_reg, .dereg = no_dereg };
	struct cache_out *out = (struct cache_out *)shared + (mode - modes);
	struct umn_cache *c;
	struct umn *u;

	*out = (struct cache_out){ 0 };
	out->open_error = umn_open(&u, &attr);
	if (out->open_error)
		return;
	c = create(u, &a);
	time_hits(c, map((size_t)CACHE_ENTRIES * page), out);
	umn_cache_destroy(c);
	time_misses(u, out);
	umn_close(u);
}

void measure_cache(void)
{
	struct cache_out *outs = shared, *out;
	const struct cache_mode *mode;
	char label[64], what[96];
	struct summary s;

	_Static_assert(sizeof(*outs) * ARRAY_SIZE(modes) <= 1 << 20,
		       "results fit in the shared area");
	section(6, "libummunotify's registration cache");
	for (mode = modes; mode < modes + ARRAY_SIZE(modes); mode++)
		in_child(cache_child, mode);
	for (mode = modes; mode < modes + ARRAY_SIZE(modes); mode++) {
		out = &outs[mode - modes];
		if (out->open_error) {
			note("%s: nothing timed: umn_open() failed: %s",
			     mode->name, strerror(-out->open_error));
			continue;
		}
		row(mode->name, "hit, any of 100000 entries", "ns", out->hit,
		    REPS);
		s = ratio_row(mode->name, "hit, any of 100000 entries",
			      "getpid", out->hit, out->hit_getpid, REPS);
		snprintf(label, sizeof(label), "%s hit: < 1 getpid",
			 mode->name);
		snprintf(what, sizeof(what),
			 "%s hit (any of 100000 entries) in getpid()s",
			 mode->name);
		goal(label, what, s.med, "getpid", 1, true);
		row(mode->name, "hit, any of the first 1000", "ns", out->few,
		    REPS);
		ratio_row(mode->name, "hit, any of the first 1000", "getpid",
			  out->few, out->hit_getpid, REPS);
		row(mode->name, "hit, the same entry each time", "ns",
		    out->hot, REPS);
		ratio_row(mode->name, "hit, the same entry each time",
			  "getpid", out->hot, out->hit_getpid, REPS);
		if (!out->rdma) {
			note("%s: no miss timed: no <infiniband/verbs.h> at build time, or no RDMA device",
			     mode->name);
			continue;
		}
		row(mode->name, "miss: ibv_dereg_mr + ibv_reg_mr 64 KiB", "ns",
		    out->miss, REPS);
		ratio_row(mode->name, "miss: ibv_dereg_mr + ibv_reg_mr 64 KiB",
			  "getpid", out->miss, out->miss_getpid, REPS);
	}
	note("cache-all: on UMN_OPEN_WATCH_ALL: a hit checks one word, a miss makes no system call but reg().");
	note("a hit finds its entry by start address (one random access); per range, its generation word is one more.");
}

/* The cache as a backend of the loops (3.): see bench.h. */

static struct umn *loop_u;
static struct umn_cache *loop_c;

static int cache_open_flags(unsigned int max_entries, uint32_t flags)
{
	struct umn_attr attr = { .flags = flags, .max_watches = max_entries };
	struct umn_cache_attr a = { .reg = no_reg, .dereg = no_dereg };
	int ret = umn_open(&loop_u, &attr);

	if (ret)
		return ret;
	ret = umn_cache_create(loop_u, &a, &loop_c);
	if (ret)
		umn_close(loop_u);
	return ret;
}

static int cache_open(unsigned int max_entries)
{
	return cache_open_flags(max_entries, 0);
}

static int cache_all_open(unsigned int max_entries)
{
	return cache_open_flags(max_entries, UMN_OPEN_WATCH_ALL);
}

static void cache_close(void)
{
	umn_cache_destroy(loop_c);
	umn_close(loop_u);
}

/* A lookup; the entry stays cached until an event drops it. */
static int cache_watch(struct region *e)
{
	get_put(loop_c, e->addr, e->len);
	return 0;
}

/* Nothing: the next lookup learns of the munmap and drops the entry. */
static void cache_unwatch(struct region *e)
{
	(void)e;
}

const struct backend cache_backend = {
	.name = "cache",
	.open = cache_open,
	.close = cache_close,
	.watch = cache_watch,
	.unwatch = cache_unwatch,
};

const struct backend cache_all_backend = {
	.name = "cache-all",
	.open = cache_all_open,
	.close = cache_close,
	.watch = cache_watch,
	.unwatch = cache_unwatch,
};
