// SPDX-License-Identifier: GPL-2.0
/*
 * ofi-bench: libfabric's MR cache with the memory monitor the environment
 * selects (FI_MR_CACHE_MONITOR; ummunotify through its provider), on
 * verbs;ofi_rxm.  umn-bench (ofi.c) runs it once per monitor and
 * repetition, the monitors in turn, and reads its lines, "NAME unit VALUE":
 *
 *   monitor  -   ummunotify, or libfabric's (its own)
 *   hit      ns  fi_mr_reg() + fi_close() of a cached registration
 *   hit-misses - the monitor's subscribes, refusals and stale entries in
 *                the hit loop, all 0 (ummunotify only; else it fails)
 *   loop4k   us  mmap, touch, fi_mr_reg(), fi_close(), munmap: 4 KiB
 *   loop1m   us  the same, 1 MiB
 *
 * The unmaps are libc's, which every monitor sees.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "fab.h"
#include "ummunotify-ofi.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "ofi-bench: %s: %s\n", what, fi_strerror(-ret));
	exit(1);
}

static void reg_close(struct fab *f, void *buf, size_t len)
{
	struct fid_mr *mr;
	int ret = fab_reg(f, buf, len, &mr);

	if (ret)
		die("fi_mr_reg", ret);
	fi_close(&mr->fid);
}

static double hit_ns(struct fab *f, char *buf, int iters)
{
	double t = now();
	int i;

	for (i = 0; i < iters; i++)
		reg_close(f, buf, 4096);
	return (now() - t) / iters;
}

static double loop_us(struct fab *f, size_t len, int iters)
{
	double t = now();
	size_t off;
	char *p;
	int i;

	for (i = 0; i < iters; i++) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die("mmap", -FI_ENOMEM);
		for (off = 0; off < len; off += 4096)
			p[off] = 1;
		reg_close(f, p, len);
		munmap(p, len);
	}
	return (now() - t) / iters / 1e3;
}

int main(void)
{
	static const struct {
		const char *name;
		size_t len;
		int iters;
	} loops[] = { { "loop4k", 4096, 400 }, { "loop1m", 1 << 20, 40 } };
	struct umn_ofi_stats s, after;
	struct fab f;
	char *buf;
	int ret;
	size_t i;

	ret = fab_open(&f, "verbs;ofi_rxm");
	if (ret)
		die("fab_open", ret);
	buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap", -FI_ENOMEM);
	memset(buf, 1, 4096);
	hit_ns(&f, buf, 1000);
	umn_ofi_stats(&s, sizeof(s));
	printf("monitor - %s\n", s.started ? "ummunotify" : "libfabric's");
	printf("hit ns %.1f\n", hit_ns(&f, buf, 20000));
	if (s.started) {
		/* Each hit is valid() alone: a subscribe is a miss. */
		umn_ofi_stats(&after, sizeof(after));
		printf("hit-misses - %llu subscribes, %llu refused, %llu stale\n",
		       (unsigned long long)(after.subscribes - s.subscribes),
		       (unsigned long long)(after.refused - s.refused),
		       (unsigned long long)(after.stale - s.stale));
		if (!after.started || after.subscribes != s.subscribes ||
		    after.refused != s.refused || after.stale != s.stale) {
			fprintf(stderr, "ofi-bench: the hit loop was not all cache hits on the ummunotify monitor\n");
			return 1;
		}
	}
	for (i = 0; i < sizeof(loops) / sizeof(loops[0]); i++) {
		loop_us(&f, loops[i].len, loops[i].iters / 10);
		printf("%s us %.2f\n", loops[i].name,
		       loop_us(&f, loops[i].len, loops[i].iters));
	}
	fab_close(&f);
	return 0;
}
