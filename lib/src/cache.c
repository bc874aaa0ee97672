// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The registration cache.
 *
 * Entries live in an interval tree keyed by start (itree.c).  Overlap
 * policy: entries may overlap and are never merged.  A request is a hit
 * when one valid entry covers all of it; otherwise the request, rounded
 * out to attr.align, is registered as a new entry, and idle entries that
 * the new one contains are dropped (it serves all their lookups).
 * Merging overlapping entries into their union would re-register the
 * growing union at every step of a sliding access pattern, quadratic in
 * bytes pinned; overlap costs at most one extra registration per entry.
 *
 * The hit path takes no lock.  Entries are type-stable: their memory is
 * recycled between entries but never freed while the cache lives (like
 * the kernel's SLAB_TYPESAFE_BY_RCU), so a lockless search can always
 * dereference what it finds.  A reference is taken with a compare-and-
 * swap on state that fails once the entry is retired; then the range and
 * the generation are checked again, because the memory may by then hold
 * another entry.  A search that races with a change may miss; it then
 * retries under the lock, which is authoritative.  The only shared write
 * on a hit is to the entry found (reference count, hits, referenced).
 *
 * state = users | ENTRY_RETIRED.  An entry is in the tree exactly when
 * it is not retired.  Whoever retires an entry with no users, or drops
 * the last user of a retired one, destroys it: dereg(), unwatch, back to
 * the free entries.  No entry in use is ever deregistered.  Hits counted
 * without the lock stay in the entry, across its lives, so that the
 * stats, which add them up, only ever grow.
 *
 * In front of the tree, a direct-mapped table by start address (the start
 * of a request, rounded down to attr.align) serves the common lookup, of
 * a buffer used again from its start, with one random access instead of
 * a walk down the tree: a hit there is checked exactly as one from the
 * tree, and anything else falls through to the tree.  It grows (under
 * the lock) to twice the entries; old tables stay until the cache goes,
 * since a lockless lookup may still read one.
 *
 * Eviction is LRU approximated by CLOCK (second chance): a hit sets
 * "referenced", and the hand gives referenced or busy entries another
 * round before evicting idle ones, oldest first.  Exact LRU would need a
 * shared list update, hence a lock, on every hit.
 *
 * Registration follows the watch -> register -> check protocol: the
 * watch is made first, so any invalidation after it shows; if the watch
 * is still valid once reg() returns, reg() saw the pages the entry
 * describes.  Otherwise another thread unmapped or replaced them meanwhile
 * and the registration is undone and retried.
 *
 * Whole-address-space mode (a handle opened with UMN_OPEN_WATCH_ALL):
 * entries have no watch of their own.  The handle's one watch reports
 * every change with its exact range, and an event drops exactly the
 * entries it overlaps, under c->lock, before the watch's generation moves
 * on; so while umn_valid() of that watch is true, every change published
 * has been applied, and the tree can be trusted: a lookup checks it once
 * (catch_up()) and no entry.  Registration: the entry is put on the
 * pending list, then reg(), then every event published meanwhile is
 * applied, which marks a pending entry it overlaps "changed"; the check
 * and the insertion into the tree happen under one hold of c->lock.  A
 * loss of events drops every entry and marks every pending one (flush:
 * nothing tells which changed).  An invalidation already under way in
 * another thread when the registration begins has published its event
 * (applied before, so it marks nothing) but may not have changed the page
 * tables yet: reg() waits until the kernel's in_flight count reads 0
 * once after the registration began, as a per-range WATCH waits for such
 * invalidations; every later one publishes after the start and marks it.
 *
 * reg(), dereg() and the umn_*() calls run without c->lock; the order is
 * umn.lock (held while umn_drain() runs cache_event()) before c->lock.
 *
 * A forked child inherits the parent's entries, and the resources behind
 * them: an MR is the parent's, reachable from the child through the
 * uverbs file they share.  The child drops them as they read invalid
 * (its handle reopens the device, and its first drain reports the loss
 * of every watch), but through forget() if any, never dereg(): entries
 * remember the fork generation (epoch) they were registered in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "itree.h"

#define ENTRY_RETIRED		(1ULL << 63)
#define ENTRY_USERS		(ENTRY_RETIRED - 1)
#define ENTRIES_PER_CHUNK	64
#define RETRY_AT_ONCE		4	/* retries before backing off */
#define RETRY_MAX_WAIT_NS	1000000ULL
#define RETRY_FOR_NS		1000000000ULL	/* then EAGAIN */

/*
 * The node first, in a cache line of its own: a search touches one line
 * per level, and only the entry it finds beyond that.
 */
struct umn_entry {
	_Alignas(64) struct itree_node node;	/* in c->tree unless retired */
	struct umn_cache_entry pub;	/* what the caller sees */
	struct umn_watch watch;
	uint64_t state;			/* users | ENTRY_RETIRED */
	uint64_t hits;			/* lockless hits in all its lives */
	unsigned int epoch;		/* c->epoch when registered */
	bool referenced;		/* hit since the clock hand passed */
	bool pending;			/* on c->pending */
	bool changed;			/* pending: an event overlapped it */
	uint64_t since;			/* pending: the whole-space word when
					 * the registration began */
	struct umn_entry *prev;		/* clock or pending list */
	struct umn_entry *next;
	struct umn_entry *link;		/* free list, or a list of victims */
};

struct umn_chunk {
	struct umn_chunk *next;
	struct umn_entry entries[ENTRIES_PER_CHUNK];
};

/* The table by start address. */
struct umn_hash {
	struct umn_hash *older;		/* to free with the cache */
	unsigned int shift;		/* 64 - log2(slots) */
	struct umn_entry *slots[];
};

#define HASH_MIN_SLOTS	64

struct umn_cache {
	struct umn *u;
	struct umn_cache_attr attr;
	pthread_mutex_t lock;
	struct itree tree;
	struct umn_entry clock;		/* list head: clock.next is the hand */
	const struct umn_watch *all;	/* whole-space mode: u's one watch */
	struct umn_entry pending;	/* list head: being registered */
	uint64_t nr_entries;		/* in the tree */
	uint64_t nr_bytes;
	bool over_limit;		/* eviction could not get under limits */
	unsigned int epoch;		/* forks this process is away from the
					 * cache's creator */
	struct umn_entry *free;
	struct umn_entry *returned;	/* freed without the lock, via link */
	struct umn_chunk *chunks;
	struct umn_hash *hash;		/* NULL until the first entry */
	struct umn_cache_stats stats;	/* counters only; atomic adds */
};

#define stat_add(c, field, n) \
	__atomic_fetch_add(&(c)->stats.field, (n), __ATOMIC_RELAXED)

static bool entry_get(struct umn_entry *e)
{
	uint64_t state = READ_ONCE(e->state);

	/*
	 * Acquire: pairs with the release of state in entry_insert() (or
	 * cache_miss()'s uncached one), after the entry's range, watch and
	 * pub were written; other users' RMWs continue that release sequence.
	 */
	do {
		if (state & ENTRY_RETIRED)
			return false;
	} while (!__atomic_compare_exchange_n(&e->state, &state, state + 1,
					      true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

static void list_unlink(struct umn_entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void list_append(struct umn_entry *head, struct umn_entry *e)
{
	e->prev = head->prev;
	e->next = head;
	head->prev->next = e;
	head->prev = e;
}

static void clock_unlink(struct umn_entry *e)
{
	list_unlink(e);
}

static void clock_append(struct umn_cache *c, struct umn_entry *e)
{
	list_append(&c->clock, e);
}

/* c->lock held. */
static struct umn_entry *entry_alloc(struct umn_cache *c)
{
	struct umn_chunk *chunk;
	struct umn_entry *e;
	int i;

	/* Acquire: pairs with entry_free()'s release (the links). */
	if (!c->free)
		c->free = __atomic_exchange_n(&c->returned, NULL,
					      __ATOMIC_ACQUIRE);
	if (!c->free) {
		chunk = calloc(1, sizeof(*chunk));
		if (!chunk)
			return NULL;
		chunk->next = c->chunks;
		c->chunks = chunk;
		for (i = 0; i < ENTRIES_PER_CHUNK; i++) {
			e = &chunk->entries[i];
			e->state = ENTRY_RETIRED;
			e->link = c->free;
			c->free = e;
		}
	}
	e = c->free;
	c->free = e->link;
	return e;
}

/*
 * e is retired and unused.  It goes back without c->lock, onto
 * c->returned: a stack that only this pushes and only entry_alloc()
 * takes, whole, so that no pop can meet a recycled top (ABA).
 */
static void entry_free(struct umn_cache *c, struct umn_entry *e)
{
	e->link = READ_ONCE(c->returned);
	while (!__atomic_compare_exchange_n(&c->returned, &e->link, e, true,
					    __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

/* Undo entry_register(); only forget a registration of a parent process. */
static void entry_unregister(struct umn_cache *c, struct umn_entry *e)
{
	if (e->epoch != READ_ONCE(c->epoch)) {
		/* Its watch was on the parent's file: nothing to unwatch. */
		if (c->attr.forget)
			c->attr.forget(c->attr.arg, e->pub.addr, e->pub.len,
				       e->pub.handle);
		return;
	}
	c->attr.dereg(c->attr.arg, e->pub.addr, e->pub.len, e->pub.handle);
	stat_add(c, deregistrations, 1);
	if (!c->all)
		umn__unwatch_later(c->u, &e->watch);
}

/* Unregister and free a retired entry without users. */
static void entry_destroy(struct umn_cache *c, struct umn_entry *e)
{
	entry_unregister(c, e);
	entry_free(c, e);
}

static void destroy_all(struct umn_cache *c, struct umn_entry *victims)
{
	struct umn_entry *e;

	while ((e = victims)) {
		victims = e->link;
		entry_destroy(c, e);
	}
}

static struct umn_entry **hash_slot(struct umn_hash *h, uint64_t start)
{
	return &h->slots[(start * 0x9e3779b97f4a7c15ULL) >> h->shift];
}

/* c->lock held.  Make room for one more entry; false if out of memory. */
static bool hash_grow(struct umn_cache *c)
{
	struct umn_hash *old = c->hash, *h;
	unsigned int shift = old ? old->shift : 64 - 6;
	size_t slots = (size_t)1 << (64 - shift);
	struct umn_entry *e;

	_Static_assert(HASH_MIN_SLOTS == 1 << 6, "shift");
	if (old && 2 * (c->nr_entries + 1) <= slots)
		return true;
	if (old) {
		shift--;
		slots *= 2;
	}
	h = calloc(1, sizeof(*h) + slots * sizeof(h->slots[0]));
	if (!h)
		return false;
	h->shift = shift;
	h->older = old;
	for (e = c->clock.next; e != &c->clock; e = e->next)
		*hash_slot(h, e->node.start) = e;
	store_release(c->hash, h);
	return true;
}

/* c->lock held: e goes into the tree.  Best effort: the tree is enough. */
static void hash_add(struct umn_cache *c, struct umn_entry *e)
{
	if (hash_grow(c))
		store_release(*hash_slot(c->hash, e->node.start), e);
}

/* c->lock held: take e out of the tree, the clock and the table. */
static void entry_unlink(struct umn_cache *c, struct umn_entry *e)
{
	struct umn_entry **slot = c->hash ? hash_slot(c->hash, e->node.start) :
					    NULL;

	if (slot && *slot == e)
		WRITE_ONCE(*slot, NULL);
	itree_remove(&c->tree, &e->node);
	clock_unlink(e);
	c->nr_entries--;
	c->nr_bytes -= e->pub.len;
}

/* c->lock held; take e out of the cache; unused: add it to *victims. */
static void entry_retire(struct umn_cache *c, struct umn_entry *e,
			 struct umn_entry **victims)
{
	uint64_t state = __atomic_fetch_or(&e->state, ENTRY_RETIRED,
					   __ATOMIC_ACQ_REL);

	entry_unlink(c, e);
	if (!(state & ENTRY_USERS)) {
		e->link = *victims;
		*victims = e;
	}
}

static bool over_limits(const struct umn_cache *c)
{
	return (c->attr.max_entries && c->nr_entries > c->attr.max_entries) ||
	       (c->attr.max_bytes && c->nr_bytes > c->attr.max_bytes);
}

/* c->lock held; retire e if nobody uses it.  False if somebody does. */
static bool entry_retire_idle(struct umn_cache *c, struct umn_entry *e,
			      struct umn_entry **victims)
{
	uint64_t idle = 0;

	/*
	 * Claimed with the same CAS a lockless get races against.  Acquire:
	 * pairs with the last umn_cache_put()'s release (its accesses done).
	 */
	if (!__atomic_compare_exchange_n(&e->state, &idle, ENTRY_RETIRED,
					 false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return false;
	entry_unlink(c, e);
	e->link = *victims;
	*victims = e;
	return true;
}

/*
 * c->lock held.  Two rounds of the hand reach every idle entry: the first
 * may only clear referenced bits.
 */
static void evict(struct umn_cache *c, struct umn_entry **victims)
{
	uint64_t steps = 2 * c->nr_entries;
	struct umn_entry *e;

	while (over_limits(c) && steps--) {
		e = c->clock.next;
		if (!READ_ONCE(e->referenced) &&
		    entry_retire_idle(c, e, victims)) {
			stat_add(c, evictions, 1);
			continue;
		}
		WRITE_ONCE(e->referenced, false);
		clock_unlink(e);
		clock_append(c, e);
	}
	WRITE_ONCE(c->over_limit, over_limits(c));
}

/* c->lock held.  Drop idle entries, oldest first, until bytes (0: all). */
static void release_idle(struct umn_cache *c, uint64_t bytes,
			 struct umn_entry **victims)
{
	struct umn_entry *e, *next;
	uint64_t released = 0;

	for (e = c->clock.next; e != &c->clock; e = next) {
		next = e->next;
		if (bytes && released >= bytes)
			break;
		if (entry_retire_idle(c, e, victims)) {
			released += e->pub.len;
			stat_add(c, released, 1);
		}
	}
	WRITE_ONCE(c->over_limit, over_limits(c));
}

struct scan {
	struct umn_cache *c;
	bool (*pick)(struct umn_cache *c, struct umn_entry *e);
	struct umn_entry *found;	/* through link */
};

static void scan_one(struct itree_node *node, void *arg)
{
	struct umn_entry *e = container_of(node, struct umn_entry, node);
	struct scan *scan = arg;

	if (scan->pick(scan->c, e)) {
		e->link = scan->found;
		scan->found = e;
	}
}

/*
 * c->lock held.  The entries within [lo, hi) that pick() picks, through
 * link: the tree must not change while it is walked.
 */
static struct umn_entry *
collect_within(struct umn_cache *c, uint64_t lo, uint64_t hi,
	       bool (*pick)(struct umn_cache *c, struct umn_entry *e))
{
	struct scan scan = { c, pick, NULL };

	itree_visit_within(&c->tree, lo, hi, scan_one, &scan);
	return scan.found;
}

static bool pick_any(struct umn_cache *c, struct umn_entry *e)
{
	(void)c;
	(void)e;
	return true;
}

/* Entries in the tree are valid in whole-space mode: see the top. */
static bool entry_valid(struct umn_cache *c, struct umn_entry *e)
{
	return c->all || umn_valid(c->u, &e->watch);
}

/* After a loss: in whole-space mode, which entry changed is lost too. */
static bool pick_suspect(struct umn_cache *c, struct umn_entry *e)
{
	return c->all || !umn_valid(c->u, &e->watch);
}

/*
 * c->lock held.  A valid entry covering [lo, hi), with a user added;
 * invalid ones met on the way are retired.
 */
static struct umn_entry *find_locked(struct umn_cache *c, uint64_t lo,
				     uint64_t hi, struct umn_entry **victims)
{
	struct itree_node *node;
	struct umn_entry *e;

	while ((node = itree_find_cover(&c->tree, lo, hi, UINT_MAX))) {
		e = container_of(node, struct umn_entry, node);
		/* Not retired (it is in the tree): the get cannot fail. */
		if (entry_valid(c, e) && entry_get(e))
			return e;
		entry_retire(c, e, victims);
		stat_add(c, invalidations, 1);
	}
	return NULL;
}

/*
 * e, found without the lock, if it serves [lo, hi): with a user added,
 * and counted as a hit.
 */
static bool entry_hit(struct umn_cache *c, struct umn_entry *e, uint64_t lo,
		      uint64_t hi)
{
	if (!entry_get(e))
		return false;
	/* Ours now, and maybe not the entry the search saw. */
	if (READ_ONCE(e->node.start) <= lo && hi <= READ_ONCE(e->node.end) &&
	    entry_valid(c, e)) {
		if (!READ_ONCE(e->referenced))
			WRITE_ONCE(e->referenced, true);
		__atomic_fetch_add(&e->hits, 1, __ATOMIC_RELAXED);
		return true;
	}
	umn_cache_put(c, &e->pub);
	return false;
}

/* The hit path: no lock.  NULL means "ask again under the lock". */
static struct umn_entry *find_lockless(struct umn_cache *c, uint64_t lo,
				       uint64_t hi)
{
	/* Acquire: pairs with hash_grow()'s and hash_add()'s releases. */
	struct umn_hash *h = load_acquire(c->hash);
	struct itree_node *node;
	struct umn_entry *e;

	if (h) {
		e = load_acquire(*hash_slot(h, lo & ~(c->attr.align - 1)));
		if (e && entry_hit(c, e, lo, hi))
			return e;
	}
	node = itree_find_cover(&c->tree, lo, hi, ITREE_LOCKLESS_STEPS);
	if (!node)
		return NULL;
	e = container_of(node, struct umn_entry, node);
	return entry_hit(c, e, lo, hi) ? e : NULL;
}

/* Out of watches: release the oldest idle entry.  False if none is. */
static bool release_one(struct umn_cache *c)
{
	struct umn_entry *victims = NULL;

	pthread_mutex_lock(&c->lock);
	release_idle(c, 1, &victims);
	pthread_mutex_unlock(&c->lock);
	destroy_all(c, victims);
	return victims;
}

/* entry_register(): the memory changed while it was registered. */
#define CHANGED	1

/*
 * Whole-space mode: apply every event published so far.  A drain that
 * finds nothing while the watch still reads invalid met a change being
 * published on another CPU, under the kernel's spinlock: wait for it.
 * Changes published faster than they are applied end in a loss, whose
 * report catches the watch up: the loop ends.  Stopping short of the
 * last change instead would leave the ring to fill (seen: overflows, and
 * registrations flushed 17 times in a row, under ThreadSanitizer).
 */
static int catch_up(struct umn_cache *c)
{
	int ret;

	while (!umn_valid(c->u, c->all)) {
		ret = umn_cache_drain(c);
		if (ret < 0)
			return ret;
		if (!ret)
			sched_yield();
	}
	return 0;
}

/* c->lock held.  Has nothing e covers changed since its registration began? */
static bool registration_holds(struct umn_cache *c, struct umn_entry *e)
{
	return c->all ? !e->changed : umn_valid(c->u, &e->watch);
}

/*
 * After reg(): 0, CHANGED, or a negative errno value.  Whole-space mode
 * applies the events published meanwhile and leaves the verdict to
 * registration_holds() under the hold of c->lock that inserts e.
 */
static int registration_check(struct umn_cache *c, struct umn_entry *e)
{
	if (!c->all)
		return umn_valid(c->u, &e->watch) ? 0 : CHANGED;
	return catch_up(c);
}

/*
 * c->lock held.  Whole-space mode: a registration of e begins; changes
 * published before it are not its own (see the top of this file).
 */
static void pending_restart(struct umn_cache *c, struct umn_entry *e)
{
	e->changed = false;
	/* With the 2010 ABI's words, a change is numbered when pulled. */
	(void)umn_valid(c->u, c->all);
	/*
	 * Acquire: pairs with the word's release (the kernel's umn_publish(),
	 * after its in_flight count): umn_wait_invalidations() then waits for
	 * every change up to since.
	 */
	e->since = load_acquire(*READ_ONCE(c->all->word));
}

/* After a failed reg(): did the memory change meanwhile? */
static bool registration_changed(struct umn_cache *c, struct umn_entry *e)
{
	bool changed;

	if (!c->all)
		return !umn_valid(c->u, &e->watch);
	if (catch_up(c))
		return false;
	pthread_mutex_lock(&c->lock);
	changed = e->changed;
	pthread_mutex_unlock(&c->lock);
	return changed;
}

/*
 * c->lock held.  Whole-space mode: events applied from now on mark e if
 * they overlap it.
 */
static void pending_begin(struct umn_cache *c, struct umn_entry *e,
			  uint64_t start, uint64_t end)
{
	/* Retired, so a lockless search that meets it ignores it. */
	WRITE_ONCE(e->node.start, start);
	WRITE_ONCE(e->node.end, end);
	pending_restart(c, e);
	list_append(&c->pending, e);
	e->pending = true;
}

/* c->lock held. */
static void pending_end(struct umn_entry *e)
{
	if (e->pending)
		list_unlink(e);
	e->pending = false;
}

/*
 * Watch (in whole-space mode, e is pending already), register, check (see
 * the top of this file): 0, CHANGED (and nothing registered), or a
 * negative errno value.
 */
static int entry_register(struct umn_cache *c, struct umn_entry *e,
			  uint64_t start, uint64_t end)
{
	void *addr = (void *)(uintptr_t)start;
	size_t len = end - start;
	void *handle;
	int ret = 0;

	if (!c->all) {
		ret = umn_watch(c->u, addr, len, 0, &e->watch);
		while (ret == -ENOSPC && release_one(c))
			ret = umn_watch(c->u, addr, len, 0, &e->watch);
	}
	if (ret)
		return ret;
	if (c->all)
		umn_wait_invalidations(c->u);	/* after e->since: see the top */
	ret = c->attr.reg(c->attr.arg, addr, len, &handle);
	if (!ret) {
		stat_add(c, registrations, 1);
		e->pub = (struct umn_cache_entry){ addr, len, handle };
		e->epoch = READ_ONCE(c->epoch);
		ret = registration_check(c, e);
		if (ret)
			entry_unregister(c, e);
		return ret;
	}
	/* A failure because the memory went meanwhile is a change. */
	if (registration_changed(c, e))
		ret = CHANGED;
	if (!c->all)
		umn__unwatch_later(c->u, &e->watch);
	return ret;
}

/* c->lock held; e is registered and nobody else knows it. */
static void entry_insert(struct umn_cache *c, struct umn_entry *e,
			 struct umn_entry **victims)
{
	uint64_t start = (uintptr_t)e->pub.addr, end = start + e->pub.len;
	struct umn_entry *inner, *next;

	/* Redundant now, if idle; busy ones age out once put. */
	for (inner = collect_within(c, start, end, pick_any); inner;
	     inner = next) {
		next = inner->link;
		entry_retire_idle(c, inner, victims);
	}
	WRITE_ONCE(e->node.start, start);
	WRITE_ONCE(e->node.end, end);
	e->referenced = true;
	store_release(e->state, 1);
	itree_insert(&c->tree, &e->node);
	clock_append(c, e);
	hash_add(c, e);
	c->nr_entries++;
	c->nr_bytes += e->pub.len;
	evict(c, victims);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * Before attempt "tries" (from 0) of registering e: false to give up.
 * Memory that changes while reg() runs is ordinary (another thread's
 * munmap(), migration, NUMA balancing), and so is losing a few such races
 * in a row, so a count of attempts would fail callers under ordinary
 * load: only memory that keeps changing for RETRY_FOR_NS does (HMM's
 * users of hmm_range_fault() give up after a second too).  Past the
 * first few retries each one waits twice as long as the last, up to a
 * millisecond, so that whoever is changing the memory gets on; the clock
 * is read only once retrying.  A whole-space registration begins again
 * after the wait: changes published during it are not its own.  While
 * the ring overflows, every whole-space registration is marked, so one
 * fails if changes come faster than they are applied for that second.
 */
static bool retry_begin(struct umn_cache *c, struct umn_entry *e,
			unsigned int tries, uint64_t *deadline)
{
	unsigned int shift;
	uint64_t wait;

	if (!tries)
		return true;	/* begun by cache_miss() */
	if (tries == 1)
		*deadline = now_ns() + RETRY_FOR_NS;
	if (tries > RETRY_AT_ONCE) {
		shift = tries - RETRY_AT_ONCE - 1;
		/* 1 us, 2 us, ..., 512 us, then 1 ms */
		wait = shift < 10 ? 1000ULL << shift : RETRY_MAX_WAIT_NS;
		nanosleep(&(struct timespec){ .tv_nsec = wait }, NULL);
		if (now_ns() >= *deadline)
			return false;
	}
	if (c->all) {
		pthread_mutex_lock(&c->lock);
		pending_restart(c, e);
		pthread_mutex_unlock(&c->lock);
	}
	return true;
}

static int cache_miss(struct umn_cache *c, uint64_t lo, uint64_t hi,
		      struct umn_entry **ep)
{
	uint64_t mask = c->attr.align - 1;
	uint64_t start = lo & ~mask, end = (hi + mask) & ~mask;
	struct umn_entry *e, *found = NULL, *victims = NULL;
	uint64_t deadline = 0;
	unsigned int tries;
	int ret;

	if (end < hi)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	e = find_locked(c, lo, hi, &victims);
	if (!e) {
		stat_add(c, misses, 1);
		*ep = entry_alloc(c);
		if (*ep && c->all)
			pending_begin(c, *ep, start, end);
	}
	pthread_mutex_unlock(&c->lock);
	destroy_all(c, victims);
	if (e) {
		stat_add(c, hits, 1);
		*ep = e;
		return 0;
	}
	if (!*ep)
		return -ENOMEM;

	e = *ep;
	for (tries = 0;; tries++) {
		ret = retry_begin(c, e, tries, &deadline) ?
			entry_register(c, e, start, end) : -EAGAIN;
		if (ret == CHANGED) {
			stat_add(c, retries, 1);
			continue;
		}
		victims = NULL;
		pthread_mutex_lock(&c->lock);
		if (ret) {
			pending_end(e);
			entry_free(c, e);
			break;
		}
		found = find_locked(c, lo, hi, &victims);
		if (found) {
			/* Another thread registered it meanwhile: use theirs. */
			pending_end(e);
			*ep = found;
			e->link = victims;
			victims = e;
			break;
		}
		if (registration_holds(c, e))
			break;
		/*
		 * Changed since the check, and its event, if drained, was
		 * ignored (the entry was not in the cache yet): again.
		 */
		pthread_mutex_unlock(&c->lock);
		destroy_all(c, victims);
		entry_unregister(c, e);
		stat_add(c, retries, 1);
	}
	if (!ret && !found) {
		pending_end(e);
		if (c->attr.max_bytes && e->pub.len > c->attr.max_bytes) {
			/* Served once, destroyed by the put: never cached. */
			store_release(e->state, ENTRY_RETIRED | 1);
			stat_add(c, uncached, 1);
		} else {
			entry_insert(c, e, &victims);
		}
	}
	pthread_mutex_unlock(&c->lock);
	destroy_all(c, victims);
	return ret;
}

int umn_cache_get(struct umn_cache *c, const void *addr, size_t len,
		  struct umn_cache_entry **ep)
{
	uint64_t lo = (uintptr_t)addr, hi = lo + len;
	struct umn_entry *e;
	int ret;

	if (!len || hi < lo)
		return -EINVAL;
	if (c->all) {
		ret = catch_up(c);
		if (ret)
			return ret;
	} else if (umn_changed(c->u)) {
		ret = umn_cache_drain(c);
		if (ret < 0)
			return ret;
	}
	e = find_lockless(c, lo, hi);
	if (!e) {
		ret = cache_miss(c, lo, hi, &e);
		if (ret)
			return ret;
	}
	*ep = &e->pub;
	return 0;
}

void umn_cache_put(struct umn_cache *c, struct umn_cache_entry *pub)
{
	struct umn_entry *e = container_of(pub, struct umn_entry, pub);
	/*
	 * Release: pairs with the retirer's acquire (entry_retire(),
	 * entry_retire_idle()); acquire too: the last put sees every user's
	 * accesses.
	 */
	uint64_t state = __atomic_sub_fetch(&e->state, 1, __ATOMIC_ACQ_REL);
	struct umn_entry *victims = NULL;

	if (state == ENTRY_RETIRED) {
		entry_destroy(c, e);
	} else if (state == 0 && READ_ONCE(c->over_limit)) {
		pthread_mutex_lock(&c->lock);
		evict(c, &victims);
		pthread_mutex_unlock(&c->lock);
		destroy_all(c, victims);
	}
}

struct drain {
	struct umn_cache *c;
	struct umn_entry *victims;
};

/*
 * c->lock held.  Mark the pending entries overlapping [lo, hi) whose
 * registration began before the change of generation was published.
 */
static void mark_pending(struct umn_cache *c, uint64_t lo, uint64_t hi,
			 uint64_t generation)
{
	struct umn_entry *e;

	for (e = c->pending.next; e != &c->pending; e = e->next)
		if (e->node.start < hi && lo < e->node.end &&
		    generation > e->since)
			e->changed = true;
}

/* c->lock held.  Whole-space mode: drop what [lo, hi) overlaps. */
static void drop_overlapping(struct umn_cache *c, uint64_t lo, uint64_t hi,
			     uint64_t generation, struct umn_entry **victims)
{
	struct scan scan = { c, pick_any, NULL };
	struct umn_entry *e, *next;

	itree_visit_overlapping(&c->tree, lo, hi, scan_one, &scan);
	for (e = scan.found; e; e = next) {
		next = e->link;
		entry_retire(c, e, victims);
		stat_add(c, invalidations, 1);
	}
	mark_pending(c, lo, hi, generation);
}

/* Runs under umn.lock, from umn_drain(). */
static void cache_event(void *arg, const struct umn_event *event)
{
	struct drain *d = arg;
	struct umn_cache *c = d->c;
	struct umn_entry *e, *next;

	pthread_mutex_lock(&c->lock);
	switch (event->cause) {
	case UMN_CAUSE_OVERFLOW:
		/* Notices were lost, not generations: check them all. */
		stat_add(c, overflows, 1);
		for (e = collect_within(c, 0, UINT64_MAX, pick_suspect); e;
		     e = next) {
			next = e->link;
			entry_retire(c, e, &d->victims);
			stat_add(c, invalidations, 1);
		}
		mark_pending(c, 0, UINT64_MAX, UINT64_MAX);
		break;
	case UMN_CAUSE_PRESSURE:
		release_idle(c, event->value, &d->victims);
		break;
	default:
		if (c->all && event->watch == c->all) {
			drop_overlapping(c, event->start, event->end,
					 event->value, &d->victims);
			break;
		}
		if (!event->watch)
			break;
		e = container_of(event->watch, struct umn_entry, watch);
		/* Retired ones and those being registered are not ours. */
		if (!(READ_ONCE(e->state) & ENTRY_RETIRED)) {
			entry_retire(c, e, &d->victims);
			stat_add(c, invalidations, 1);
		}
		break;
	}
	pthread_mutex_unlock(&c->lock);
}

int umn_cache_drain(struct umn_cache *c)
{
	struct drain d = { c, NULL };
	int ret = umn_drain(c->u, cache_event, &d);

	destroy_all(c, d.victims);
	return ret;
}

void umn_cache_flush(struct umn_cache *c)
{
	struct umn_entry *victims = NULL, *e;

	pthread_mutex_lock(&c->lock);
	while ((e = c->clock.next) != &c->clock) {
		entry_retire(c, e, &victims);
		stat_add(c, released, 1);
	}
	WRITE_ONCE(c->over_limit, false);
	pthread_mutex_unlock(&c->lock);
	destroy_all(c, victims);
	/* Leave the kernel no watch of an entry that is gone. */
	if (!c->all)
		umn__send_unwatches(c->u);
}

/* c->lock held. */
static void for_each_entry(struct umn_cache *c,
			   void (*fn)(struct umn_entry *e, void *arg),
			   void *arg)
{
	struct umn_chunk *chunk;
	int i;

	for (chunk = c->chunks; chunk; chunk = chunk->next)
		for (i = 0; i < ENTRIES_PER_CHUNK; i++)
			fn(&chunk->entries[i], arg);
}

static void count_entry(struct umn_entry *e, void *arg)
{
	struct umn_cache_stats *stats = arg;

	stats->hits += READ_ONCE(e->hits);
	if (READ_ONCE(e->state) & ENTRY_USERS)
		stats->in_use++;
}

_Static_assert(UMN_CACHE_STATS_SIZE_1_0 ==
	       offsetof(struct umn_cache_stats, in_use) + sizeof(uint64_t),
	       "the counters of 1.0 end with in_use");

int umn_cache_query_stats(struct umn_cache *c, struct umn_cache_stats *stats,
			  size_t size)
{
	struct umn_cache_stats now;
	size_t kept = sizeof(now);
	const uint64_t *from = (const uint64_t *)&c->stats;
	uint64_t *to = (uint64_t *)&now;
	size_t i;

	_Static_assert(sizeof(now) % sizeof(*to) == 0, "all counters");
	if (size < UMN_CACHE_STATS_SIZE_1_0 || size % sizeof(*to))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < sizeof(now) / sizeof(*to); i++)
		to[i] = READ_ONCE(from[i]);
	now.entries = c->nr_entries;
	now.bytes = c->nr_bytes;
	now.in_use = 0;
	for_each_entry(c, count_entry, &now);
	pthread_mutex_unlock(&c->lock);
	/* A newer caller's counters this library does not keep read 0. */
	if (size > sizeof(now))
		memset((char *)stats + sizeof(now), 0, size - sizeof(now));
	else
		kept = size;
	memcpy(stats, &now, kept);
	return kept;
}

void umn_cache_stats(struct umn_cache *c, struct umn_cache_stats *stats)
{
	umn_cache_query_stats(c, stats, UMN_CACHE_STATS_SIZE_1_0);
}

/* umn_cache_create() of 1.3 and of 1.0: @attr is whole. */
static int cache_create(struct umn *u, const struct umn_cache_attr *attr,
			struct umn_cache **cp)
{
	struct umn_cache *c;
	int ret;

	if (!attr->reg || !attr->dereg || attr->align & (attr->align - 1))
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->u = u;
	c->attr = *attr;
	if (!c->attr.align)
		c->attr.align = sysconf(_SC_PAGESIZE);
	pthread_mutex_init(&c->lock, NULL);
	c->clock.prev = c->clock.next = &c->clock;
	c->pending.prev = c->pending.next = &c->pending;
	c->all = umn_watch_all(u);

	ret = umn__attach_cache(u, c);
	if (ret) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		return ret;
	}
	*cp = c;
	return 0;
}

/* Both are umn_cache_create(): the one of 1.3, and the one of 1.0. */
__typeof__(umn_cache_create) umn_cache_create_1_3, umn_cache_create_1_0;

int umn_cache_create_1_3(struct umn *u, const struct umn_cache_attr *attr,
			 struct umn_cache **cp)
{
	if (!attr || attr->comp_mask)
		return -EINVAL;
	return cache_create(u, attr, cp);
}
UMN_SYMVER(umn_cache_create_1_3, "umn_cache_create@@UMMUNOTIFY_1.3");

/* For programs built before 1.3: their attr ends at forget. */
int umn_cache_create_1_0(struct umn *u, const struct umn_cache_attr *attr,
			 struct umn_cache **cp)
{
	struct umn_cache_attr whole = { 0 };

	if (!attr)
		return -EINVAL;
	memcpy(&whole, attr, offsetof(struct umn_cache_attr, comp_mask));
	return cache_create(u, &whole, cp);
}
UMN_SYMVER(umn_cache_create_1_0, "umn_cache_create@UMMUNOTIFY_1.0");

static void check_busy(struct umn_entry *e, void *arg)
{
	if (READ_ONCE(e->state) & ENTRY_USERS)
		*(bool *)arg = true;
}

int umn_cache_destroy(struct umn_cache *c)
{
	struct umn_hash *hash;
	struct umn_chunk *chunk;
	bool busy = false;

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	for_each_entry(c, check_busy, &busy);
	pthread_mutex_unlock(&c->lock);
	if (busy)
		return -EBUSY;

	umn_cache_flush(c);
	umn__attach_cache(c->u, NULL);
	while ((chunk = c->chunks)) {
		c->chunks = chunk->next;
		free(chunk);
	}
	while ((hash = c->hash)) {
		c->hash = hash->older;
		free(hash);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

void umn__cache_fork_prepare(struct umn_cache *c)
{
	pthread_mutex_lock(&c->lock);
}

void umn__cache_fork_parent(struct umn_cache *c)
{
	pthread_mutex_unlock(&c->lock);
}

/* Every entry there is now is the parent's: see the top of this file. */
void umn__cache_fork_child(struct umn_cache *c)
{
	pthread_mutex_init(&c->lock, NULL);
	c->epoch++;
}
