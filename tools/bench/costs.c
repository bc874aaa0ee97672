// SPDX-License-Identifier: GPL-2.0
/*
 * What watching costs: 1. the validity check, 2. watch + unwatch with
 * many regions live, 3. the mmap-touch-watch-munmap loop, 7. a
 * whole-address-space watch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <linux/ummunotify.h>

#include "bench.h"
#include "report.h"

/* 1. Validity check */

#define CHECKS		2000000UL

struct check_out {
	double check[REPS], getpid[REPS];
};

static void check_child(const void *arg)
{
	const struct backend *b = arg;
	struct check_out *out = shared;
	struct region e;
	uint64_t t;
	int r;

	open_backend(b, 1);
	watch(b, &e, map(page), page);
	for (r = 0; r < REPS; r++) {
		out->getpid[r] = getpid_ns();
		t = now_ns();
		if (b->check(&e, CHECKS) != CHECKS)
			fail("an unchanged entry is not valid", -EINVAL);
		out->check[r] = (double)(now_ns() - t) / CHECKS;
	}
	b->unwatch(&e);
	b->close();
}

void measure_check(void)
{
	struct check_out *out = shared;
	struct summary s;

	section(1, "Validity check of one cached entry, against getpid()");
	for_each(b, watchers) {
		in_child(check_child, *b);
		if (b == watchers)
			row("", "getpid()", "ns", out->getpid, REPS);
		row((*b)->name, "check", "ns", out->check, REPS);
		s = ratio_row((*b)->name, "getpid() / check", "x", out->getpid,
			      out->check, REPS);
		if (*b == &native_backend)
			goal("check: 200x cheaper than getpid",
			     "native check, times cheaper than getpid()",
			     s.med, "x", 200, false);
	}
	note("uffd and interpose check a flag their handler or hook sets.");
}

/* 2. Watch + unwatch with many regions live */

#define PAIRS		1000

static const unsigned int lives[] = { 1000, 100000, 1000000 };
#define NR_LIVES	ARRAY_SIZE(lives)

struct pair_out {
	double pair[NR_LIVES][REPS], getpid[NR_LIVES][REPS];
	double slab;	/* kernel slab bytes per live region */
};

/* Kernel memory in slab caches, in KiB. */
static long slab_kb(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long kb = -1;

	if (!f)
		fail("/proc/meminfo", -errno);
	while (kb < 0 && fgets(line, sizeof(line), f))
		sscanf(line, "Slab: %ld", &kb);
	fclose(f);
	return kb;
}

static void pair_child(const void *arg)
{
	const struct backend *b = arg;
	struct pair_out *out = shared;
	unsigned int max = lives[NR_LIVES - 1], n = 0;
	struct region *live = calloc(max, sizeof(*live)), test;
	char *area = map((size_t)max * page), *test_page = map(page);
	long slab;
	uint64_t t;
	size_t i;
	int r, k;

	if (!live)
		fail("calloc", -ENOMEM);
	open_backend(b, max + 1);
	slab = slab_kb();
	for (i = 0; i < NR_LIVES; i++) {
		for (; n < lives[i]; n++)
			watch(b, &live[n], area + (size_t)n * page, page);
		for (r = 0; r < REPS; r++) {
			out->getpid[i][r] = getpid_ns();
			t = now_ns();
			for (k = 0; k < PAIRS; k++) {
				watch(b, &test, test_page, page);
				b->unwatch(&test);
			}
			out->pair[i][r] = (double)(now_ns() - t) / PAIRS;
		}
	}
	out->slab = (slab_kb() - slab) * 1024.0 / n;
	b->close();
}

/* The floor of a watch made by ioctl(): two ioctl()s refused at once. */
static void refused_child(const void *arg)
{
	struct pair_out *out = shared;
	int fd = open("/dev/ummunotify", O_RDONLY | O_CLOEXEC);
	uint64_t t;
	int r, k;

	(void)arg;
	if (fd < 0)
		fail("/dev/ummunotify", -errno);
	for (r = 0; r < REPS; r++) {
		out->getpid[0][r] = getpid_ns();
		t = now_ns();
		for (k = 0; k < PAIRS; k++) {
			ioctl(fd, _IO(UMMUNOTIFY_MAGIC, 0));
			ioctl(fd, _IO(UMMUNOTIFY_MAGIC, 0));
		}
		out->pair[0][r] = (double)(now_ns() - t) / PAIRS;
	}
	close(fd);
}

/* Bytes per object of the module's slab cache, or of the one it joined. */
static long slab_size(void)
{
	FILE *f = fopen("/sys/kernel/slab/umn_region/slab_size", "r");
	long size = -1;

	if (f) {
		if (fscanf(f, "%ld", &size) != 1)
			size = -1;
		fclose(f);
	}
	return size;
}

/* Watch + unwatch: the watchers, WATCHV, and kdreg2 where it is built. */
static const struct backend *const pairers[] = {
	&native_backend, &native_v_backend, &legacy_backend, &uffd_backend,
	&interpose_backend,
#ifdef HAVE_KDREG2
	&kdreg2_backend,
#endif
};

void measure_pairs(void)
{
	struct pair_out *out = shared;
	double med[NR_LIVES], worst, best_umn[NR_LIVES];
	struct summary s;
	char what[64];
	size_t i;

	section(2, "Watch + unwatch of one region, with many regions live");
	in_child(refused_child, NULL);
	ratio_row("", "floor: 2 ioctl()s refused (ENOTTY)", "getpid",
		  out->pair[0], out->getpid[0], REPS);
	for_each(b, pairers) {
#ifdef HAVE_KDREG2
		if (*b == &kdreg2_backend && !kdreg2_loaded()) {
			note("kdreg2: built, but its module is not in this kernel");
			continue;
		}
#endif
		in_child(pair_child, *b);
		worst = 0;
		for (i = 0; i < NR_LIVES; i++) {
			snprintf(what, sizeof(what), "pair, %u live", lives[i]);
			row((*b)->name, what, "ns", out->pair[i], REPS);
			med[i] = ratio_row((*b)->name, what, "getpid",
					   out->pair[i], out->getpid[i],
					   REPS).med;
			if (med[i] > worst)
				worst = med[i];
			if (*b == &native_backend ||
			    (*b == &native_v_backend && med[i] < best_umn[i]))
				best_umn[i] = med[i];
		}
		if (*b == &native_backend) {
			goal("pair: 5 getpid",
			     "native watch+unwatch, worst of 1k/100k/1M live, in getpid()s",
			     worst, "getpid", 5, true);
			goal("pair: 1M live / 1k live",
			     "native watch+unwatch, 1M live / 1k live",
			     med[NR_LIVES - 1] / med[0], "x", 1.5, true);
		}
#ifdef HAVE_KDREG2
		if (*b == &kdreg2_backend) {
			worst = 0;
			for (i = 0; i < NR_LIVES; i++)
				worst = fmax(worst, best_umn[i] / med[i]);
			goal("pair: below kdreg2",
			     "best of native/native-v over kdreg2, worst of 1k/100k/1M live",
			     worst, "x", 1, true);
		}
#endif
		if (*b == &native_backend || *b == &legacy_backend) {
			s = row((*b)->name, "kernel slab per live region", "B",
				&out->slab, 1);
			if (*b == &native_backend)
				goal("slab per region",
				     "kernel memory per region (slab)",
				     s.med, "B", 128, true);
		}
	}
	note("slab object of umn_region (or the cache SLUB merged it into): %ld B",
	     slab_size());
	note("native-v: UMMUNOTIFY_WATCHV, an unwatch sent with the next watch (one system call a pair).");
	note("uffd keeps no kernel state per registration: adjacent ranges merge into one VMA.");
}

/* 3. and 7.: the mmap-touch-watch-munmap loop */

/* More than REPS: a loop takes long enough for the host to disturb it. */
#define LOOP_REPS	15

/* What test 7 does to memory no entry covers (test 3: munmap). */
enum whole_op { OP_MUNMAP, OP_MADVISE, OP_MREMAP, OP_FAULT };

struct loop_arg {
	const struct backend *b;
	size_t len;
	int iters;
	bool whole;	/* one whole-address-space watch, drained each time */
	enum whole_op op;
	int threads;	/* test 7: threads doing op at once, 0 = 1 */
};

/*
 * mmap, touch, watch, munmap, unwatch, iters times; or, with a
 * whole-address-space watch, mmap, touch, munmap and drain.  Always in
 * the same hole between PROT_NONE pages: the mapping merges with nothing,
 * gets no transparent huge page, and has the same neighbours with every
 * backend.
 */
static void loop_child(const void *arg)
{
	const struct loop_arg *a = arg;
	char *p = reserve(a->len + 2 * page) + page;
	struct region e, everything;
	uint64_t t;
	int i;

	open_backend(a->b, 1);
	if (a->whole)
		watch(a->b, &everything, NULL, 0);
	t = now_ns();
	for (i = 0; i < a->iters; i++) {
		map_fixed(p, a->len);
		touch(p, a->len);
		if (!a->whole)
			watch(a->b, &e, p, a->len);
		munmap(p, a->len);
		if (a->whole)
			a->b->drain(NULL);
		else
			a->b->unwatch(&e);
	}
	*(double *)shared = (double)(now_ns() - t) / a->iters;
	a->b->close();
}

/* Pages test 7's fault loop touches before giving them back. */
#define FAULT_PAGES	64

/*
 * Test 7 beyond munmap: madvise(MADV_DONTNEED) of a touched page, two
 * mremap() moves of one, or FAULT_PAGES page faults and the
 * MADV_DONTNEED that makes them faults again.  The ring (65536 entries)
 * holds every event of a run: drained once, at the end.
 */
static void *op_thread(void *arg)
{
	const struct loop_arg *a = arg;
	size_t len = a->op == OP_FAULT ? FAULT_PAGES * page : page;
	char *p = reserve(2 * len + 3 * page) + page, *q = p + len + page;
	int i;

	map_fixed(p, len);
	for (i = 0; i < a->iters; i++) {
		touch(p, len);
		switch (a->op) {
		case OP_MREMAP:
			if (mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				   q) != q ||
			    mremap(q, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				   p) != p)
				fail("mremap", -errno);
			break;
		default:
			if (madvise(p, len, MADV_DONTNEED))
				fail("madvise", -errno);
		}
	}
	return NULL;
}

static void op_child(const void *arg)
{
	const struct loop_arg *a = arg;
	int n = a->threads ?: 1, i;
	pthread_t threads[16];
	struct region everything;
	uint64_t t;

	open_backend(a->b, 1);
	watch(a->b, &everything, NULL, 0);
	t = now_ns();
	for (i = 0; i < n; i++)
		if (pthread_create(&threads[i], NULL, op_thread, (void *)a))
			fail("pthread_create", -EAGAIN);
	for (i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	*(double *)shared = (double)(now_ns() - t) / a->iters;
	a->b->drain(NULL);
	a->b->close();
}

/*
 * The loop of @a with each backend of @set, set[0] the baseline, LOOP_REPS
 * times in turns (each round starting with the next backend); prints the
 * times and their ratios to the baseline's, returned in @ratio[1..n).
 */
static void loops(const struct backend *const *set, size_t n,
		  struct loop_arg a, const char *what, struct summary *ratio)
{
	double ns[ARRAY_SIZE(loopers)][LOOP_REPS];
	char buf[64];
	size_t i, k;
	int r;

	for (r = 0; r < LOOP_REPS; r++) {
		for (i = 0; i < n; i++) {
			k = (i + r) % n;
			a.b = set[k];
			in_child(a.op == OP_MUNMAP ? loop_child : op_child,
				 &a);
			ns[k][r] = *(double *)shared;
		}
	}
	for (k = 0; k < n; k++) {
		row(set[k]->name, what, "ns", ns[k], LOOP_REPS);
		if (!k)
			continue;
		snprintf(buf, sizeof(buf), "%s / %s", what, set[0]->name);
		ratio[k] = ratio_row(set[k]->name, buf, "x", ns[k], ns[0],
				     LOOP_REPS);
	}
}

void measure_loop(void)
{
	static const struct {
		size_t len;
		int iters;
		const char *name;
	} sizes[] = {
		{ 4096, 1000, "4 KiB" },
		{ 1 << 20, 40, "1 MiB" },
	};
	struct summary ratio[ARRAY_SIZE(loopers)], native = { 0 }, uffd = { 0 };
	struct summary cache_all = { 0 }, floor_all = { 0 };
	char what[64], label[64];
	size_t i, k;

	section(3, "mmap, touch, watch, munmap (and unwatch), per iteration");
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		snprintf(what, sizeof(what), "%s loop", sizes[i].name);
		loops(loopers, ARRAY_SIZE(loopers),
		      (struct loop_arg){ .len = sizes[i].len,
					 .iters = sizes[i].iters },
		      what, ratio);
		for (k = 1; k < ARRAY_SIZE(loopers); k++) {
			snprintf(label, sizeof(label), "%s %s",
				 loopers[k]->name, sizes[i].name);
			chart(label, ratio[k]);
			if (loopers[k] == &native_backend)
				native = ratio[k];
			if (loopers[k] == &uffd_backend)
				uffd = ratio[k];
			if (loopers[k] == &cache_all_backend)
				cache_all = ratio[k];
			if (loopers[k] == &native_all_backend &&
			    sizes[i].len == 4096)
				floor_all = ratio[k];
		}
		/* The whole-space cache: no system call of its own. */
		if (sizes[i].len == 4096)
			goal("loop 4 KiB: cache-all 1.05x none",
			     "whole-space cache, 4 KiB loop / none",
			     cache_all.med, "x", 1.05, true);
		snprintf(label, sizeof(label), "loop %s: 1.15x none",
			 sizes[i].name);
		snprintf(what, sizeof(what), "native %s loop / none",
			 sizes[i].name);
		goal(label, what, native.med, "x", 1.15, true);
		snprintf(label, sizeof(label),
			 "loop %s: 1/10 of uffd's overhead", sizes[i].name);
		snprintf(what, sizeof(what), "native / uffd overhead, %s loop",
			 sizes[i].name);
		/* Faster than none is noise: no overhead. */
		goal(label, what, fmax(native.med - 1, 0) / (uffd.med - 1),
		     "x", 0.1, true);
	}
	note("native-all: one UMMUNOTIFY_WATCH_ALL watch, the ring drained after each munmap:");
	note("  the floor under cache-all's goal (4 KiB: %.3g x [%.3g - %.3g]);",
	     floor_all.med, floor_all.lo, floor_all.hi);
	note("cache: umn_cache_get() + put per iteration, a watch per entry;");
	note("cache-all: the same on one UMMUNOTIFY_WATCH_ALL watch (no system call of its own).");
}

/* 7. Whole-address-space watch */

#define WHOLE_ITERS	1000

static const struct backend *const whole[] = {
	&none_backend, &native_backend, &legacy_backend,
};

void measure_whole(void)
{
	static const struct {
		enum whole_op op;
		const char *what;
	} ops[] = {
		{ OP_MADVISE, "4 KiB touch, MADV_DONTNEED" },
		{ OP_MREMAP, "4 KiB touch, 2 mremap() moves" },
		{ OP_FAULT, "64 page faults, MADV_DONTNEED" },
	};
	static const struct backend *const pair[] = {
		&none_backend, &native_backend,
	};
	struct summary ratio[ARRAY_SIZE(whole)];
	char label[112], what[96];
	size_t k;
	int threads;

	section(7, "A whole-address-space watch on a munmap-heavy process");
	loops(whole, ARRAY_SIZE(whole),
	      (struct loop_arg){ .len = page, .iters = WHOLE_ITERS,
				 .whole = true },
	      "4 KiB mmap, touch, munmap, drain", ratio);
	for (k = 1; k < ARRAY_SIZE(whole); k++) {
		snprintf(label, sizeof(label), "%s whole space, 4 KiB",
			 whole[k]->name);
		chart(label, ratio[k]);
	}
	for (threads = 1; threads <= 4; threads *= 4) {
		for (k = 0; k < ARRAY_SIZE(ops); k++) {
			snprintf(what, sizeof(what), "%s, %d thread%s",
				 ops[k].what, threads, threads > 1 ? "s" : "");
			loops(pair, ARRAY_SIZE(pair),
			      (struct loop_arg){ .iters = WHOLE_ITERS,
						 .whole = true,
						 .op = ops[k].op,
						 .threads = threads },
			      what, ratio);
			snprintf(label, sizeof(label), "whole: %s", what);
			goal(label, what, ratio[1].med, "x", 1.05, true);
		}
	}
	note("native: UMMUNOTIFY_WATCH_ALL, the ring drained after each munmap;");
	note("legacy: one registration of the whole user range, read() of its reports.");
	note("The other operations on unwatched memory, with and without a WATCH_ALL watch");
	note("(ring drained at the end); with 4 threads, per iteration of each thread.");
}
