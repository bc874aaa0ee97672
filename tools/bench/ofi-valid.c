// SPDX-License-Identifier: GPL-2.0
/*
 * ofi-valid: the check libfabric's MR cache makes on every hit, alone:
 * the ummunotify monitor's valid() (imported into libfabric, its ranges
 * subscribed as the cache subscribes them, on the real module) against a
 * valid() that checks nothing, which is what memhooks and userfaultfd
 * answer.  Both are called the way libfabric calls them, through the
 * monitor's function pointer, over ranges in turn; repetitions alternate
 * the two.  umn-bench (ofi.c) reads its lines, one value per repetition:
 *
 *   valid      ns  the ummunotify monitor's valid()
 *   valid0     ns  a valid() that returns true
 *
 * Usage: ofi-valid (as root in a guest with the module loaded)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ofi.h"

#define RANGES	1024
#define ITERS	2000000
#define REPS	5

typedef bool valid_fn(struct fid_mem_monitor *m, const void *addr,
		      size_t len);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static bool __attribute__((noinline)) no_check(struct fid_mem_monitor *m,
					       const void *addr, size_t len)
{
	(void)m, (void)addr, (void)len;
	__asm__ volatile("" ::: "memory");
	return true;
}

static double ns_per_call(valid_fn *volatile *fn, struct fid_mem_monitor *m,
			  const char *base)
{
	unsigned long yes = 0;
	double t = now();
	int i;

	for (i = 0; i < ITERS; i++)
		yes += (*fn)(m, base + (size_t)(i % RANGES) * 8192, 4096);
	t = (now() - t) / ITERS;
	if (yes != ITERS) {
		fprintf(stderr, "ofi-valid: %lu of %d checks said yes\n", yes,
			ITERS);
		exit(1);
	}
	return t;
}

int main(void)
{
	struct fid_mem_monitor *m;
	struct fi_info *info = NULL;
	double v[2][REPS];
	valid_fn *volatile fn;
	char *base;
	int ret, i, r;

	ret = umn_ofi_import();
	if (ret) {
		fprintf(stderr, "ofi-valid: umn_ofi_import: %s\n",
			strerror(-ret));
		return 1;
	}
	fi_getinfo(FI_VERSION(1, 13), NULL, NULL, 0, NULL, &info);
	fi_freeinfo(info);
	m = umn_ofi__monitor();
	base = mmap(NULL, RANGES * 8192, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return 1;
	memset(base, 1, RANGES * 8192);
	/* As libfabric does: start() opens the device. */
	ret = m->export_ops->start(m);
	if (ret) {
		fprintf(stderr, "ofi-valid: start: %s\n", strerror(-ret));
		return 1;
	}
	for (i = 0; i < RANGES; i++)
		if (m->export_ops->subscribe(m, base + (size_t)i * 8192, 4096))
			return 1;
	for (r = 0; r < REPS; r++) {
		fn = m->export_ops->valid;
		v[0][r] = ns_per_call(&fn, m, base);
		fn = no_check;
		v[1][r] = ns_per_call(&fn, m, base);
	}
	printf("valid ns");
	for (r = 0; r < REPS; r++)
		printf(" %.2f", v[0][r]);
	printf("\nvalid0 ns");
	for (r = 0; r < REPS; r++)
		printf(" %.2f", v[1][r]);
	printf("\n");
	m->export_ops->stop(m);
	return 0;
}
