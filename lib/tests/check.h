/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the tests share: CHECK(), a seeded generator whose seed is printed
 * so that a failure can be replayed (UMN_SEED=...), the watches the
 * kernel holds for a descriptor, and the test double of a notification
 * source (double.c).
 */
#ifndef UMN_CHECK_H
#define UMN_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n",	\
			__FILE__, __LINE__, __func__, #cond);		\
		abort();						\
	}								\
} while (0)

#define CHECK_EQ(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a != _b) {							\
		fprintf(stderr, "%s:%d: %s: %s == %lld, expected %s == %lld\n", \
			__FILE__, __LINE__, __func__, #a, _a, #b, _b);	\
		abort();						\
	}								\
} while (0)

static uint64_t rng_state;

/* splitmix64: small, fast, good enough to pick operations. */
static inline uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rnd_below(uint64_t n)
{
	return rnd() % n;
}

/* The seed of this run, from UMN_SEED or the clock; printed. */
static inline uint64_t seed_rng(const char *test)
{
	const char *env = getenv("UMN_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) :
			(uint64_t)time(NULL) ^ (uint64_t)clock();

	printf("%s: seed %" PRIu64 " (replay with UMN_SEED=%" PRIu64 ")\n",
	       test, seed, seed);
	fflush(stdout);
	rng_state = seed;
	return seed;
}

struct umn;
struct umn_attr;
struct umn_double;

/*
 * A notification source for host tests, behind the same interface as the
 * 2010 ABI: the test says which ranges changed, the library and the cache
 * do the rest exactly as with the kernel.
 */
int double_open(struct umn **u, const struct umn_attr *attr,
		struct umn_double **d);
void double_free(struct umn_double *d);
/* Like an munmap: report every watch overlapping [start, end). */
unsigned int double_invalidate(struct umn_double *d, uint64_t start,
			       uint64_t end, unsigned int cause);
/*
 * Make change() what an invalidation does to memory: it runs after the
 * reports are queued, and no watch starts meanwhile, as with the kernel
 * (a new registration waits for an invalidation in progress).
 */
void double_on_change(struct umn_double *d,
		      void (*change)(uint64_t start, uint64_t end, void *arg),
		      void *arg);
void double_pressure(struct umn_double *d, uint64_t bytes);
/* Make the next pull fail, as if the source lost track. */
void double_fail_pull(struct umn_double *d);
/* Watches registered with the source now. */
unsigned int double_watches(struct umn_double *d);

/* The "regions:" line of /proc/self/fdinfo/FD, of a /dev/ummunotify fd. */
static inline unsigned int fd_watches(int fd)
{
	char path[64], line[128];
	unsigned int n = 0;
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		found |= sscanf(line, "regions: %u", &n) == 1;
	fclose(f);
	CHECK(found);
	return n;
}

#endif /* UMN_CHECK_H */
