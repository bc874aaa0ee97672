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

void measure_pairs(void)
{
	struct pair_out *out = shared;
	double med[NR_LIVES], worst;
	struct summary s;
	char what[64];
	size_t i;

	section(2, "Watch + unwatch of one region, with many regions live");
	in_child(refused_child, NULL);
	ratio_row("", "floor: 2 ioctl()s refused (ENOTTY)", "getpid",
		  out->pair[0], out->getpid[0], REPS);
	for_each(b, watchers) {
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
		}
		if (*b == &native_backend) {
			goal("pair: 5 getpid",
			     "native watch+unwatch, worst of 1k/100k/1M live, in getpid()s",
			     worst, "getpid", 5, true);
			goal("pair: 1M live / 1k live",
			     "native watch+unwatch, 1M live / 1k live",
			     med[NR_LIVES - 1] / med[0], "x", 1.5, true);
		}
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
	note("uffd keeps no kernel state per registration: adjacent ranges merge into one VMA.");
}

/* 3. and 7.: the mmap-touch-watch-munmap loop */

/* More than REPS: a loop takes long enough for the host to disturb it. */
#define LOOP_REPS	15

struct loop_arg {
	const struct backend *b;
	size_t len;
	int iters;
	bool whole;	/* one whole-address-space watch, drained each time */
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
			in_child(loop_child, &a);
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
	struct summary cache_all = { 0 };
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
	struct summary ratio[ARRAY_SIZE(whole)];
	char label[64];
	size_t k;

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
	note("native: UMMUNOTIFY_WATCH_ALL, the ring drained after each munmap;");
	note("legacy: one registration of the whole user range, read() of its reports.");
}
