// SPDX-License-Identifier: GPL-2.0
/*
 * 6. libummunotify's registration cache: the hit path with 100,000
 * entries cached, and a miss that re-registers for real with
 * ibv_reg_mr() (when built with <infiniband/verbs.h> and a device, rxe in
 * the guest, exists).
 */
#define _GNU_SOURCE
#include <errno.h>
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
#define MISSES		40
#define MISS_LEN	(64 << 10)

struct cache_out {
	double hit[REPS], hot[REPS], hit_getpid[REPS];
	double miss[REPS], miss_getpid[REPS];
	int open_error;		/* of umn_open(): nothing timed */
	bool rdma;
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

static void time_hits(struct umn_cache *c, const char *area,
		      struct cache_out *out)
{
	struct umn_cache_stats st;
	uint64_t x = 1, t;
	int i, r;

	for (i = 0; i < CACHE_ENTRIES; i++)
		get_put(c, area + (size_t)i * page, page);
	for (r = 0; r < REPS; r++) {
		out->hit_getpid[r] = getpid_ns();
		t = now_ns();
		for (i = 0; i < HITS; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			get_put(c, area + (x >> 33) % CACHE_ENTRIES * page,
				page);
		}
		out->hit[r] = (double)(now_ns() - t) / HITS;
		t = now_ns();
		for (i = 0; i < HITS; i++)
			get_put(c, area, page);
		out->hot[r] = (double)(now_ns() - t) / HITS;
	}
	umn_cache_stats(c, &st);
	if (st.misses != CACHE_ENTRIES ||
	    st.hits != (uint64_t)HITS * REPS * 2)
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
	struct umn_attr attr = { .max_watches = CACHE_ENTRIES + 64 };
	struct umn_cache_attr a = { .reg = no_reg, .dereg = no_dereg };
	struct cache_out *out = shared;
	struct umn_cache *c;
	struct umn *u;

	(void)arg;
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
	struct cache_out *out = shared;

	section(6, "libummunotify's registration cache");
	in_child(cache_child, NULL);
	if (out->open_error) {
		note("nothing timed: umn_open() failed: %s",
		     strerror(-out->open_error));
		return;
	}
	row("cache", "hit, any of 100000 entries", "ns", out->hit, REPS);
	ratio_row("cache", "hit, any of 100000 entries", "getpid", out->hit,
		  out->hit_getpid, REPS);
	row("cache", "hit, the same entry each time", "ns", out->hot, REPS);
	ratio_row("cache", "hit, the same entry each time", "getpid",
		  out->hot, out->hit_getpid, REPS);
	if (!out->rdma) {
		note("no miss timed: no <infiniband/verbs.h> at build time, or no RDMA device");
		return;
	}
	row("cache", "miss: ibv_dereg_mr + ibv_reg_mr 64 KiB", "ns",
	    out->miss, REPS);
	ratio_row("cache", "miss: ibv_dereg_mr + ibv_reg_mr 64 KiB", "getpid",
		  out->miss, out->miss_getpid, REPS);
}
