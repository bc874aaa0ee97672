/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libummunotify: know, with one load, whether memory you registered with a
 * device (an RDMA NIC, say) still holds the pages it held when you
 * registered it; and a registration cache built on that.
 *
 * See ummunotify(7) and the page of each function.  Functions return 0 (or
 * a count) on success and a negative errno value on failure.
 */
#ifndef UMMUNOTIFY_H
#define UMMUNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header and the library it comes with, for #if:
 * LIBUMMUNOTIFY_VERSION >= LIBUMMUNOTIFY_VERSION_CODE(1, 1, 0) before using
 * what 1.1 adds.  The Makefile takes the library's version from here.
 */
#define LIBUMMUNOTIFY_VERSION_MAJOR	1
#define LIBUMMUNOTIFY_VERSION_MINOR	3
#define LIBUMMUNOTIFY_VERSION_PATCH	0
#define LIBUMMUNOTIFY_VERSION_CODE(major, minor, patch) \
	(((major) << 16) | ((minor) << 8) | (patch))
#define LIBUMMUNOTIFY_VERSION \
	LIBUMMUNOTIFY_VERSION_CODE(LIBUMMUNOTIFY_VERSION_MAJOR, \
				   LIBUMMUNOTIFY_VERSION_MINOR, \
				   LIBUMMUNOTIFY_VERSION_PATCH)

/* One open /dev/ummunotify: a set of watches on this process's memory. */
struct umn;

/* umn_attr.flags */
#define UMN_OPEN_LEGACY		(1U << 0) /* use the 2010 ABI even if more is offered */
#define UMN_OPEN_WATCH_ALL	(1U << 1) /* one watch of the whole address
					   * space: umn_watch_all() */

/*
 * The structures a program passes in end with comp_mask: 0, or the bits
 * of the fields added after it that the program set.  A library that
 * does not know a bit refuses the call (-EINVAL, as rdma-core does)
 * rather than ignore a setting; one that knows it reads a field added
 * later only under its bit, so a program built against an older header
 * keeps working.  None has a bit yet: comp_mask is where growth begins
 * (1.3).  Zero the whole structure, then set fields.
 */

/* umn_open() settings; a NULL attr or a 0 field means the default. */
struct umn_attr {
	uint32_t flags;		/* UMN_OPEN_* */
	uint32_t max_watches;	/* watches at once (default 4096) */
	uint32_t ring_entries;	/* events the kernel can queue (power of two,
				 * default 4096) */
	union {
		uint32_t comp_mask;	/* 0 */
		uint32_t reserved;	/* its name before 1.3 */
	};
};

/* What the kernel grants; umn_features().  0: the 2010 ABI. */
#define UMN_FEATURE_WATCH	(1U << 0) /* per-watch generation words */
#define UMN_FEATURE_RING	(1U << 1) /* events in shared memory */
#define UMN_FEATURE_PRESSURE	(1U << 2) /* UMN_CAUSE_PRESSURE events */

/* Why a watched range changed: umn_event.cause, bit numbers of causes. */
enum {
	UMN_CAUSE_UNMAP		= 0, /* munmap, mremap, MAP_FIXED, brk, shmdt */
	UMN_CAUSE_CLEAR		= 1, /* madvise, copy-on-write, reclaim, migration */
	UMN_CAUSE_PROTECTION	= 2, /* mprotect, fork: same pages (opt-in) */
	UMN_CAUSE_SOFT_DIRTY	= 3, /* clear_refs: same pages (opt-in) */
	UMN_CAUSE_MIGRATE	= 4, /* moved to or from device memory */
	UMN_CAUSE_RELEASE	= 5, /* the address space is gone */
	UMN_CAUSE_OVERFLOW	= 6, /* events were lost: check every watch */
	UMN_CAUSE_PRESSURE	= 7, /* the kernel asks for memory back */
	UMN_CAUSE_UNKNOWN	= 8, /* invalidated; the 2010 ABI does not say why */
};

/* Causes a watch reports when umn_watch() is given 0. */
#define UMN_CAUSES_DEFAULT	((1U << UMN_CAUSE_UNMAP) | \
				 (1U << UMN_CAUSE_CLEAR) | \
				 (1U << UMN_CAUSE_MIGRATE) | \
				 (1U << UMN_CAUSE_RELEASE))

/*
 * A watch on [addr, addr + len).  The caller owns the memory and must not
 * move it while watched: events point back to it.  Only umn_*() functions
 * touch the fields.
 */
struct umn_watch {
	const uint64_t *word;	/* generation word the kernel rewrites */
	uint64_t generation;	/* its value when the watch was made */
	uint64_t cookie;	/* the kernel's name for the watch */
	uint32_t slot;		/* index of word */
	uint32_t reserved;
};

/* What umn_drain() hands its callback. */
struct umn_event {
	struct umn_watch *watch;	/* NULL: OVERFLOW, PRESSURE, or a
					 * RELEASE of the whole address space */
	uint64_t start;			/* part of the watch that changed */
	uint64_t end;
	uint64_t value;			/* OVERFLOW: events lost (0: unknown);
					 * PRESSURE: bytes asked for; a change
					 * of umn_watch_all(): its generation */
	unsigned int cause;		/* UMN_CAUSE_* */
};

typedef void umn_event_fn(void *arg, const struct umn_event *event);

int umn_open(struct umn **u, const struct umn_attr *attr);
int umn_close(struct umn *u);
unsigned int umn_features(struct umn *u);
int umn_fd(struct umn *u);

int umn_watch(struct umn *u, const void *addr, size_t len,
	      unsigned int causes, struct umn_watch *w);
int umn_unwatch(struct umn *u, struct umn_watch *w);
int umn_resize(struct umn *u, struct umn_watch *w, const void *addr,
	       size_t len);

int umn_drain(struct umn *u, umn_event_fn *fn, void *arg);
int umn_read_events(struct umn *u, struct umn_event *events, size_t n);

/*
 * The watch of the whole address space of a handle opened with
 * UMN_OPEN_WATCH_ALL, or NULL.  umn_drain() reports each change with its
 * exact range and this as the watch; umn_valid() of it is true while
 * umn_drain() has reported every change the kernel published.
 */
const struct umn_watch *umn_watch_all(struct umn *u);

/*
 * Wait until every invalidation the kernel has started in this address
 * space, and published to a umn_watch_all() watch, has changed the page
 * tables: after it, pinning pages pins the new ones.  0 at once for a
 * handle without that watch; -EOPNOTSUPP where the kernel does not count
 * them (the 2010 ABI, a module older than the count).  Added in 1.2.
 */
int umn_wait_invalidations(struct umn *u);

/*
 * Private to the inline functions below: the first member of struct umn.
 * The pointers change only when a forked child reopens the device.
 */
struct umn__fast {
	const uint64_t *produced;	/* ring tail, or the 2010 counter */
	const uint64_t *consumed;	/* ring head, or counter drained */
	const uint64_t *pull_counter;	/* 2010 counter; NULL: words are live */
	uint64_t pulled;		/* 2010 counter value pulled */
};

/* Private: bring the generation words up to date (2010 ABI only). */
void umn__pull(struct umn *u);

/*
 * Is w still valid: has nothing it watches been unmapped or replaced since
 * umn_watch()?  With the native ABI this is one acquire load of the word
 * the kernel rewrites (after a test of u that says so).  With the 2010
 * ABI the kernel's counter is loaded first, and the library called only
 * when it moved.  Thread-safe; never blocks for long.  The atomic loads
 * of w's fields are for umn_watch_all(), which umn_drain() moves on.
 *
 * Ordering, for weakly ordered CPUs (arm64, POWER), each acquire named
 * with the release it pairs with:
 * - pull_counter: umn__emulated_setup()'s release, after pulled and the
 *   words of a (forked child's) reopen;
 * - *counter: none; the kernel moves it and queues the report under one
 *   hold of its lock, which a pull's read() takes after loading it;
 * - pulled: emulated_pull_locked()'s release, after it bumped the words
 *   of every report the counter value had shown.  A relaxed load here let
 *   a reader see the new pulled with an old word, and skip the pull: a
 *   range read valid after munmap() returned;
 * - *word: the kernel's smp_store_release() in umn_publish() (native),
 *   or umn__report()'s (2010 ABI);
 * - w->word, w->generation: unordered against each other; a mix of old
 *   and new never matches (generations are never reused), so it can only
 *   read invalid.
 * Binaries built against an older copy of this header inline the relaxed
 * load of pulled: rebuild them for weakly ordered CPUs.
 */
static inline bool umn_valid(struct umn *u, const struct umn_watch *w)
{
	struct umn__fast *f = (struct umn__fast *)u;
	const uint64_t *counter = __atomic_load_n(&f->pull_counter,
						  __ATOMIC_ACQUIRE);

	if (counter && __atomic_load_n(counter, __ATOMIC_ACQUIRE) !=
		       __atomic_load_n(&f->pulled, __ATOMIC_ACQUIRE))
		umn__pull(u);
	return __atomic_load_n(__atomic_load_n(&w->word, __ATOMIC_RELAXED),
			       __ATOMIC_ACQUIRE) ==
	       __atomic_load_n(&w->generation, __ATOMIC_ACQUIRE);
}

/*
 * Does umn_drain() have anything to report?  Two loads, no call.
 * Thread-safe.
 */
static inline bool umn_changed(struct umn *u)
{
	struct umn__fast *f = (struct umn__fast *)u;
	const uint64_t *produced = __atomic_load_n(&f->produced,
						   __ATOMIC_RELAXED);
	const uint64_t *consumed = __atomic_load_n(&f->consumed,
						   __ATOMIC_RELAXED);

	/* A hint: umn_drain() takes the lock, which orders what it reads. */
	return __atomic_load_n(produced, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(consumed, __ATOMIC_RELAXED);
}

/* The registration cache: one per set of registrations (per PD, say). */
struct umn_cache;

/* What the cache hands out.  Read-only for the caller, stable while held. */
struct umn_cache_entry {
	void *addr;		/* registered range; covers what was asked */
	size_t len;
	void *handle;		/* what reg() returned, e.g. a struct ibv_mr * */
};

struct umn_cache_attr {
	/*
	 * Register [addr, addr + len) and store what deregistration needs in
	 * *handle; return 0 or a negative errno.  Called without any cache
	 * lock held, possibly from several threads at once.
	 */
	int (*reg)(void *arg, void *addr, size_t len, void **handle);
	/*
	 * Undo reg(); called once per successful reg(), never while in use,
	 * never in a forked child for the parent's registrations (forget).
	 */
	void (*dereg)(void *arg, void *addr, size_t len, void *handle);
	void *arg;		/* passed to reg() and dereg() */
	size_t max_entries;	/* 0: no limit */
	size_t max_bytes;	/* 0: no limit */
	size_t align;		/* power of two, registrations are rounded
				 * out to it; 0: the page size */
	/*
	 * In a forked child, instead of dereg() for a registration the
	 * parent made, whose device resources are the parent's: free what
	 * reg() allocated, touch no device.  NULL: nothing is called.
	 */
	void (*forget)(void *arg, void *addr, size_t len, void *handle);
	/*
	 * 0 (see above).  Added in 1.3: a program built against an older
	 * header calls the umn_cache_create() of 1.0, which reads nothing
	 * past forget.
	 */
	uint32_t comp_mask;
};

/*
 * Counters only, each 64 bits, in this order: a counter is added at the
 * end, and umn_cache_query_stats() fills as many as the caller's struct
 * has room for.
 */
struct umn_cache_stats {
	uint64_t hits;			/* umn_cache_get() served from the cache */
	uint64_t misses;		/* umn_cache_get() that registered */
	uint64_t registrations;		/* successful reg() calls */
	uint64_t deregistrations;	/* dereg() calls */
	uint64_t invalidations;		/* entries dropped because their memory changed */
	uint64_t evictions;		/* entries dropped for the limits */
	uint64_t released;		/* entries dropped on pressure, by flush,
					 * or to free a watch */
	uint64_t retries;		/* registrations redone after a race */
	uint64_t uncached;		/* entries larger than max_bytes */
	uint64_t overflows;		/* OVERFLOW events (full rescans) */
	uint64_t entries;		/* entries cached now */
	uint64_t bytes;			/* bytes cached now */
	uint64_t in_use;		/* entries held by callers now */
};

int umn_cache_create(struct umn *u, const struct umn_cache_attr *attr,
		     struct umn_cache **c);
int umn_cache_destroy(struct umn_cache *c);
int umn_cache_get(struct umn_cache *c, const void *addr, size_t len,
		  struct umn_cache_entry **e);
void umn_cache_put(struct umn_cache *c, struct umn_cache_entry *e);
int umn_cache_drain(struct umn_cache *c);
void umn_cache_flush(struct umn_cache *c);
/* The thirteen counters of 1.0: umn_cache_query_stats() fills them all. */
void umn_cache_stats(struct umn_cache *c, struct umn_cache_stats *stats);
#define UMN_CACHE_STATS_SIZE_1_0	104	/* their bytes */
/*
 * @size is sizeof(*stats) as the caller's header has it: the counters
 * the library keeps that fit, zeroes for those it does not keep.
 * Returns the bytes it filled with counters it keeps.  Added in 1.3.
 */
int umn_cache_query_stats(struct umn_cache *c, struct umn_cache_stats *stats,
			  size_t size);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOTIFY_H */
