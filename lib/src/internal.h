/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Inside libummunotify.  A struct umn is backed by one of two
 * implementations of struct umn_ops:
 *
 *  native	the kernel grants FEATURE_WATCH and FEATURE_RING: it writes
 *		the generation words and the event ring itself (native.c);
 *  emulated	the library keeps the generation words and a queue of
 *		reports, fed by a struct umn_source: the 2010 ABI's
 *		register/read() (legacy.c), or a test double (lib/tests/).
 *
 * Locking, outermost first:
 *  umn_list_lock	the list of open handles (fork handlers)
 *  umn.lock		recursive; watch, unwatch, resize, drain, reopen.
 *			Held while umn_drain() runs its callback, which may
 *			call back in: hence recursive.
 *  umn_cache.lock	the cache's tree and lists (cache.c)
 *  umn.pull_lock	emulated: the slot table, generation words and
 *			pending reports, shared with umn_valid()'s pull
 */
#ifndef UMN_INTERNAL_H
#define UMN_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>

#include "ummunotify.h"

/*
 * Exports C function @name as @symbol: "NAME@@VERSION", the one programs
 * link to from VERSION on, or "NAME@VERSION", the one programs built
 * before keep calling (the library's map lists NAME in both nodes).  The
 * attribute where the compiler has it (gcc 10): a top-level .symver does
 * not survive gcc's link-time optimisation.
 */
#if defined(__has_attribute)
#if __has_attribute(__symver__)
#define UMN_SYMVER(name, symbol) \
	extern __typeof__(name) name __attribute__((__symver__(symbol)))
#endif
#endif
#ifndef UMN_SYMVER
#define UMN_SYMVER(name, symbol)	__asm__(".symver " #name ", " symbol)
#endif

/*
 * ioctl() of a call that changes nothing when a signal interrupts it
 * (WATCH, RESIZE, REGISTER_REGION): a handler without SA_RESTART must
 * not fail the caller's registration.  0 or -errno.
 */
static inline int umn__ioctl_restart(int fd, unsigned long request, void *arg)
{
	int ret;

	do
		ret = ioctl(fd, request, arg) ? -errno : 0;
	while (ret == -EINTR);
	return ret;
}

#define READ_ONCE(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define load_acquire(x)		__atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define store_release(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define UMN_NIL			UINT32_MAX	/* end of a slot list */
#define UMN_DEFAULT_WATCHES	4096		/* emulated; as the kernel's */
#define UMN_DEFAULT_RING	4096		/* emulated whole-space records */
#define UMN_MAX_MAPS		3
#define UMN_UNWATCH_BATCH	64		/* native: unwatches queued */

/* A mapping whose contents a forked child must not see. */
struct umn_map {
	void *addr;
	size_t len;
	int prot;
	bool words;	/* holds generation words: keep until umn_close() */
};

/*
 * One watch slot: the owner's struct umn_watch and the cookie the source
 * reports it by.  Reports for a cookie other than the slot's are for a
 * watch that is gone and are dropped.  The rest is the emulated pending
 * report, coalesced like the kernel's 2010 queue: one per slot.
 */
struct umn_slot {
	struct umn_watch *watch;	/* NULL: free */
	uint64_t cookie;
	uint64_t start;			/* pending: range, widened by each hit */
	uint64_t end;
	uint32_t next;			/* pending list, or free list */
	uint32_t prev;			/* pending list */
	uint16_t cause;			/* pending: UMN_CAUSE_* */
	bool pending;
};

struct umn;

/*
 * [0, 0) in watch() and add(): the whole address space.  drain() reports
 * at most max events and leaves the rest queued.  unwatch_later() (NULL:
 * unwatch() does) may leave the kernel's watch until the next watch() or
 * send_unwatches() (NULL: nothing is ever left).
 */
struct umn_ops {
	int (*watch)(struct umn *u, uint64_t start, uint64_t end,
		     unsigned int causes, struct umn_watch *w);
	int (*unwatch)(struct umn *u, struct umn_watch *w);
	int (*unwatch_later)(struct umn *u, struct umn_watch *w);
	void (*send_unwatches)(struct umn *u);
	int (*resize)(struct umn *u, struct umn_watch *w, uint64_t start,
		      uint64_t end);
	int (*drain)(struct umn *u, umn_event_fn *fn, void *arg, size_t max);
};

/*
 * Where an emulated handle's reports come from.  open() sets u->counter,
 * a word that moves whenever a report is queued, and adds any mapping it
 * makes with umn__add_map(); the handle's teardown undoes it.  pull() hands every
 * queued report to umn__report() or umn__report_pressure(), under
 * pull_lock; a failure makes every watch read invalid.
 */
struct umn_source {
	int (*open)(struct umn *u);
	int (*add)(struct umn *u, uint64_t cookie, uint64_t start,
		   uint64_t end);
	int (*remove)(struct umn *u, uint64_t cookie);
	int (*pull)(struct umn *u);
};

struct umn_cache;

/* Emulated: a report of the whole-space watch, kept exact as in a ring. */
struct umn_record {
	uint64_t start;
	uint64_t end;
	uint64_t generation;		/* of the whole-space word */
	unsigned int cause;
};

struct umn {
	struct umn__fast fast;		/* first: see ummunotify.h */

	pthread_mutex_t lock;		/* see the top of this file */
	pthread_mutex_t pull_lock;

	struct umn_attr attr;
	int (*setup)(struct umn *u);	/* open, or reopen in a forked child */
	const struct umn_ops *ops;
	const struct umn_source *source;	/* emulated only */
	void *source_priv;
	unsigned int features;
	int fd;				/* the device, or -1 */
	int poll_fd;			/* emulated: what umn_fd() returns */

	struct umn_slot *slots;
	uint32_t nr_slots;
	uint64_t next_cookie;		/* cookies are never reused */

	/* native */
	uint64_t *head;
	const uint64_t *tail;
	const uint64_t *dropped;	/* ring events lost, ever */
	uint64_t dropped_seen;		/* ... and reported */
	const uint32_t *ring_mask;
	const void *events;		/* struct ummunotify_ring_event[] */
	const uint64_t *in_flight;	/* invalidations the kernel started and
					 * has not finished; NULL: not given */
	uint64_t unwatched[UMN_UNWATCH_BATCH];	/* cookies to unregister */
	unsigned int nr_unwatched;

	/* emulated */
	const uint64_t *counter;	/* moves when a report is queued */
	uint64_t *gens;			/* generation words */
	uint64_t next_gen;		/* last generation handed out */
	uint64_t seen;			/* counter value drained */
	int wake_fd;			/* eventfd: reports pulled, not drained */
	bool woken;			/* wake_fd was written since */
	uint32_t free_slot;		/* free list through slots[].next */
	uint32_t pending_head;		/* oldest pending report */
	uint32_t pending_tail;
	bool pressure;			/* a PRESSURE event is pending */
	uint64_t pressure_bytes;	/* asked for; 0: everything */
	struct umn_record *records;	/* whole-space reports, a ring */
	uint32_t records_mask;
	uint32_t records_head;
	uint32_t records_tail;

	/*
	 * UMN_OPEN_WATCH_ALL.  Its generation is the word's value as of the
	 * last change umn_drain() reported, rather than fixed: umn_valid()
	 * of it says that no change is left to report.
	 */
	struct umn_watch all;
	bool has_all;

	struct umn_map maps[UMN_MAX_MAPS];
	unsigned int nr_maps;
	struct umn_map *retired;	/* words of a forked parent's file */
	unsigned int nr_retired;

	bool forked;			/* a child that has not reopened yet */
	bool lost;			/* report OVERFLOW at the next drain;
					 * atomic: set under pull_lock too */
	struct umn_cache *cache;	/* its lock is taken across fork() */
	struct umn *next_open;		/* list of open handles */
};

extern const struct umn_ops umn__native_ops;
extern const struct umn_ops umn__emulated_ops;
extern const struct umn_source umn__legacy_source;

/* Open with the given source instead of the device (test doubles). */
int umn__open_source(struct umn **up, const struct umn_attr *attr,
		     const struct umn_source *source, void *priv);

int umn__native_setup(struct umn *u, unsigned int features);
int umn__emulated_setup(struct umn *u);
void umn__report(struct umn *u, uint64_t cookie, uint64_t start,
		 uint64_t end, unsigned int cause);
void umn__report_pressure(struct umn *u, uint64_t bytes);
/*
 * Report lost events (value: how many, 0 unknown) to fn, from a drain:
 * the whole-space watch catches up with its word, since fn had to treat
 * everything as changed.
 */
void umn__report_loss(struct umn *u, umn_event_fn *fn, void *arg,
		      uint64_t value);
/* umn_drain() reported a change of the whole-space watch, of generation. */
void umn__all_reported(struct umn *u, uint64_t generation);
void umn__watch_made(struct umn *u, struct umn_watch *w, const uint64_t *word,
		     uint64_t generation);
/*
 * Whole-space watch: wait until no invalidation the kernel published is
 * still changing page tables (at once if it does not say).
 */
int umn__add_map(struct umn *u, void *addr, size_t len, int prot,
		 bool words);
void umn__unmap_all(struct umn *u);

/*
 * umn_unwatch() for a caller that watches again soon (the cache): the
 * kernel may hear of it with the next watch, in the same system call.
 * The kernel's watch lasts until then, or until umn__send_unwatches(): it
 * counts against the limits meanwhile, and its events are dropped.
 */
int umn__unwatch_later(struct umn *u, struct umn_watch *w);
void umn__send_unwatches(struct umn *u);

/* umn.lock held: reopen first if this is a forked child. */
int umn__lock(struct umn *u);
void umn__unlock(struct umn *u);

/* Set (c) or clear (NULL) the cache that owns u's events; -EBUSY. */
int umn__attach_cache(struct umn *u, struct umn_cache *c);

/* Taken and released around fork() by the cache attached to a handle. */
void umn__cache_fork_prepare(struct umn_cache *c);
void umn__cache_fork_parent(struct umn_cache *c);
void umn__cache_fork_child(struct umn_cache *c);

#endif /* UMN_INTERNAL_H */
