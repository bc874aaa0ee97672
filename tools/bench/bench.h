/* SPDX-License-Identifier: GPL-2.0 */
/*
 * umn-bench: the ways a registration cache can learn that memory it
 * registered changed, measured on the same work in the same run.
 *
 * A backend is one such way.  The cache keeps a struct region per
 * registration; the backend watches it and says whether it is still
 * valid.  Ratios between backends (and against getpid()) measured in one
 * run are the result; absolute times under an emulated guest are not.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* One registration, as a cache holds it. */
struct region {
	char *addr;		/* watched range; len 0: the whole address space */
	size_t len;
	const uint64_t *word;	/* native: the generation word */
	uint64_t gen;		/* native: its value when watched */
	int stale;		/* the others: set when the memory changed */
	uint64_t key[2];	/* kdreg2: where its generation is, and it */
};

struct backend {
	const char *name;
	/* Room for max_entries watches at once; fails if unavailable. */
	int (*open)(unsigned int max_entries);
	/* Drops every watch. */
	void (*close)(void);
	int (*watch)(struct region *e);
	void (*unwatch)(struct region *e);
	bool (*valid)(struct region *e);
	/*
	 * valid(e) up to n times, inlined and unrolled, stopping at the
	 * first no as a hit path would: returns how many said yes.
	 */
	unsigned long (*check)(struct region *e, unsigned long n);
	/*
	 * Consume the notifications pending, if any; returns the
	 * invalidations consumed and adds those lost to *lost (if not NULL).
	 */
	unsigned long (*drain)(unsigned long *lost);
	/*
	 * ummunotify only: the read() another thread of a busy program
	 * makes on the file, to contend for its locks.
	 */
	void (*hammer)(void);
};

extern const struct backend none_backend, native_backend, legacy_backend,
	uffd_backend, interpose_backend, cache_backend, cache_all_backend,
	native_v_backend, native_all_backend, kdreg2_backend;
/* kdreg2's module is in this kernel (make bench KDREG2=DIR). */
bool kdreg2_loaded(void);

static inline bool region_stale(const struct region *e)
{
	return __atomic_load_n(&e->stale, __ATOMIC_ACQUIRE);
}

static inline void region_set_stale(struct region *e)
{
	__atomic_store_n(&e->stale, 1, __ATOMIC_RELEASE);
}

/*
 * The user-space index of watched ranges that userfaultfd and libc
 * interposition need to find the entries an unmapped range hit.  Entries
 * must not overlap.  Thread-safe.
 */
int index_add(struct region *e);
void index_del(struct region *e);
/* Marks stale and forgets every entry overlapping [start, end). */
unsigned long index_invalidate(uintptr_t start, uintptr_t end);
void index_clear(void);

/* For the backends whose entries something else marks stale. */
bool stale_valid(struct region *e);
unsigned long stale_check(struct region *e, unsigned long n);
unsigned long nothing_to_drain(unsigned long *lost);

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Prints "umn-bench: MSG: strerror(-err)" and exits. */
void fail(const char *msg, int err) __attribute__((noreturn));

/* What the measurements share (main.c). */

#define REPS		7	/* of each timed measurement */

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define for_each(b, set) \
	for (const struct backend *const *b = set; \
	     b < set + ARRAY_SIZE(set); b++)

static const struct backend *const watchers[] = {
	&native_backend, &legacy_backend, &uffd_backend, &interpose_backend,
};
static const struct backend *const all[] = {
	&none_backend, &native_backend, &legacy_backend, &uffd_backend,
	&interpose_backend,
};
/*
 * The loops also with libummunotify's cache (cache.c), in each mode: a
 * lookup that registers (nothing: the registration itself is the same for
 * all), and learns of the munmap at the next lookup; and with native-all,
 * the whole-space mode's kernel work without a cache.
 */
static const struct backend *const loopers[] = {
	&none_backend, &native_backend, &legacy_backend, &uffd_backend,
	&interpose_backend, &native_all_backend, &cache_backend,
	&cache_all_backend,
};
static const struct backend *const ummunotify[] = {
	&native_backend, &legacy_backend,
};

extern size_t page;
/* Where the child process of a measurement leaves its results. */
extern void *shared;

/*
 * Runs fn(arg) in a child process: an address space where an MMU notifier,
 * a userfaultfd or hooks were ever installed stays slower, and must not
 * slow the next measurement down.  Exits if the child fails.
 */
void in_child(void (*fn)(const void *arg), const void *arg);
/* Private anonymous memory; exits on failure, as do the others. */
char *map(size_t len);
/* PROT_NONE address space: what is mapped into it merges with nothing. */
char *reserve(size_t len);
void map_fixed(char *p, size_t len);
/* A write per page: each gets a page of its own. */
void touch(char *p, size_t len);
void open_backend(const struct backend *b, unsigned int max_entries);
/* Watches [addr, addr + len) with a fresh *e. */
void watch(const struct backend *b, struct region *e, char *addr, size_t len);
/* The cost of a system call, for scale: ns per getpid(). */
double getpid_ns(void);
/*
 * A measuring program: popen(cmd) with env's NAME, VALUE pairs (up to a
 * NULL) in its environment, and not in the next one's.
 */
FILE *run_with(const char *const *env, const char *cmd);
/* Its line "NAME unit v1 v2 ..." into v[first..max): how many values. */
int read_values(const char *line, const char *name, double *v, int first,
		int max);

void measure_check(void);
void measure_pairs(void);
void measure_loop(void);
void measure_visible(void);
void measure_ring(void);
void measure_cache(void);
void measure_whole(void);
void measure_precision(void);
void measure_ofi(void);
void measure_ucx(void);
void measure_imposed(void);

#endif /* BENCH_H */
