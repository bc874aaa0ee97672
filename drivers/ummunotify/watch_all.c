// SPDX-License-Identifier: GPL-2.0
/*
 * The address space's notifier: one mmu_notifier per address space,
 * shared by the files of its process, that publishes every invalidation
 * of a watched range before the invalidating call returns.  It holds
 *
 *  - the range watches of every file, by address, in an interval tree
 *    of the module's own;
 *  - the files with whole-address-space watches (UMMUNOTIFY_WATCH_ALL),
 *    which every invalidation concerns: at most UMN_MAX_ALL_FILES, of
 *    UMN_MAX_ALL watches each;
 *  - a record of the invalidations in flight (started, not ended): each
 *    one's range and cause, for the first UMN_IN_FLIGHT at once, and the
 *    hull and causes of the others.
 *
 * Registering the notifier takes every lock of the address space
 * (mm_take_all_locks()): it happens once in the address space's life, at
 * its first watch, and the notifier stays until the address space exits
 * (see umn_all_get()), not once per file.
 *
 * Ordering.  One spinlock, &umn_all_mm.lock, is held by each callback
 * for all it does: recording an invalidation in flight and walking the
 * watches it overlaps (invalidate_range_start), forgetting it
 * (invalidate_range_end), the exit (release).  The ioctls take it to put
 * a watch in the tree or take it out, inside the tree's mutex
 * (ranges_lock), which no callback takes: the max_overlap check reads
 * the tree under the mutex alone, as it may sleep.  Nothing sleeps,
 * allocates or touches user memory under the spinlock, so the callbacks
 * never sleep, whether mmu_notifier_range_blockable() or not, and
 * whoever takes it waits for at most one callback's walk, never for the
 * address space's invalidations to end.  (On PREEMPT_RT, where a
 * spinlock is a sleeping lock, the OOM reaper's non-blockable start,
 * which the core runs under non_block_start(), may block behind a walk,
 * and with CONFIG_DEBUG_ATOMIC_SLEEP warns whenever it takes the lock.)
 * The lock is the only pairing needed:
 *
 *  - A watch goes in under the lock, before or after an invalidation's
 *    start.  Before: the start callback finds it in the tree and
 *    publishes to it, on the invalidating thread.  After, while the
 *    invalidation is in flight: the insertion finds the invalidation in
 *    the record and publishes it to the new watch at once
 *    (umn_mark_in_flight()), on the watching thread, before the
 *    unlock; the end callback takes the lock to forget the invalidation,
 *    so that unlock (release) and that lock (acquire) order the
 *    publication before the end callback returns, and so before the
 *    invalidating call returns, for its thread and whoever it
 *    synchronises with.  After the end: the invalidation was over
 *    before the watch existed, and the pages user space pins next are
 *    the new ones.  mmu_interval_read_begin() made the watch wait for
 *    the invalidations in flight; here it is reported changed instead,
 *    and a cache that checks its watch after pinning (as it must
 *    anyway) drops what it pinned.
 *  - A watch comes out under the lock, after which no callback reaches
 *    it: a callback that had it in hand held the lock until it let go
 *    (the unlock of the one pairs with the lock of the other).  The
 *    caller frees it, and its slot, at once; nothing waits for a grace
 *    period, for no reader walks the tree without the lock.  Once a
 *    file's last watch is out, and the file is off @files, no callback
 *    reaches the file either.
 *  - What a callback publishes to the shared memory is written with
 *    release stores (watch.c, ring.c) that user space pairs with its
 *    acquire loads (the userspace-api document's "Memory ordering").
 *
 * An invalidation in flight when the notifier is registered never calls
 * it: mm_take_all_locks() and mmap_lock, both held to register it,
 * exclude every notifier method (mm/mmu_notifier.c).  When another
 * notifier fails a start (only where it cannot sleep: the OOM reaper),
 * either an interval notifier failed, and neither our start nor our end
 * is called, or every notifier's start has been called, and 5.13 and
 * later call every end; so the only end without a start is one that the
 * exit overtook (the record is cleared at release), and it is ignored.
 * Before 5.13 an invalidation whose start another notifier failed never
 * ends here: its record stays, and the watches made over it are
 * reported changed at once, until the exit, which the OOM reaper's
 * process is bound for.
 *
 * A walk that may sleep lets go of the lock now and then (see
 * umn_range_report()): a truncate or an exit over a million watches
 * keeps neither the CPU nor the ioctls.  Not on PREEMPT_RT, where
 * spin_is_contended() is always false and a task that wants the CPU
 * preempts the walk where it stands: it never lets go of the lock, and
 * an ioctl that needs it waits for its end (boosting it only if of an
 * RT or deadline class).  One that may not sleep (the OOM reaper's)
 * walks all the watches of the address space it covers, each charged
 * to its opener's max_user_watches.
 *
 * While more than UMN_IN_FLIGHT invalidations are in flight at once,
 * the hull of the others grows until none of them is: meanwhile a watch
 * made anywhere over it is reported changed at once, as
 * mmu_interval_read_begin() had it retry while any ran.
 *
 * The end callback also keeps each WATCH_ALL file's in_flight, a word of
 * the shared area: the invalidations that have started (and published
 * what they change) but not yet changed the page tables.  A cache
 * without a watch per entry pins only once it has read 0 there after its
 * last look at the ring, so that it never pins pages an invalidation it
 * already saw is about to take away.
 */

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/interval_tree_generic.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "umn.h"

/* Whole-address-space watches of one file: enough for any cache. */
#define UMN_MAX_ALL		16
/*
 * Files of one address space with such watches: each invalidation
 * visits them all.
 */
#define UMN_MAX_ALL_FILES	16
/* Invalidations in flight recorded one by one; the others by their hull. */
#define UMN_IN_FLIGHT		32
/* Range watches a blockable walk visits between looks at who waits. */
#define UMN_WALK_BREAK		256

/*
 * An invalidation of a page reaches every range watch over it, and not
 * only when the owner unmaps: reclaim, compaction, migration and the OOM
 * reaper invalidate the owner's pages (and a shared file's page, for
 * every process that maps it).  A stack of a million watches over one
 * range would make each of its pages cost whoever reclaims or migrates
 * it a million callbacks.  So a range watch is refused if a page of it is
 * under max_overlap watches of the address space already: no page is
 * ever under more, in one mapping (a physical page mapped many times
 * costs that for each mapping).  Whole-address-space watches are bounded
 * on their own (UMN_MAX_ALL, UMN_MAX_ALL_FILES).
 */
static unsigned int max_overlap = 64;
module_param(max_overlap, uint, 0644);
MODULE_PARM_DESC(max_overlap, "Maximum number of range watches of one address space over any one page (default 64)");

/*
 * The range watches' tree is keyed by whole pages, as pages are
 * invalidated: watches of distinct bytes of one page all see its every
 * invalidation, and all count over it.  Invalidations are of whole pages,
 * so a watch overlaps one in pages exactly when its bytes do.
 */
#define UMN_RANGE_START(node)	((node)->start & PAGE_MASK)
#define UMN_RANGE_LAST(node)	((node)->last | ~PAGE_MASK)

INTERVAL_TREE_DEFINE(struct interval_tree_node, rb, unsigned long,
		     __subtree_last, UMN_RANGE_START, UMN_RANGE_LAST, static,
		     umn_ranges)

/**
 * struct umn_inval - an invalidation in flight
 * @range:	the invalidation's, as its start and end callbacks get it
 * @start:	its start, as it was at the start callback
 * @end:	its end, likewise
 * @cause:	UMMUNOTIFY_CAUSE_* of its event
 */
struct umn_inval {
	const struct mmu_notifier_range *range;
	unsigned long start;
	unsigned long end;
	unsigned int cause;
};

/**
 * struct umn_all_mm - the notifier of an address space
 * @notifier:	registered once, by mmu_notifier_get_locked(), for every file
 * @kept:	the reference for the address space's life is taken; under
 *		mmap_lock
 * @released:	the address space has exited; under @lock
 * @lock:	held by the callbacks for all they do; nests outside
 *		&umn_file.lock
 * @ranges_lock: changes to @ranges, which take @lock too: held alone,
 *		it keeps @ranges still for a walk that may sleep (the
 *		max_overlap check); nests outside @lock
 * @ranges:	the range watches of every file, by &umn_region.range;
 *		changed under @ranges_lock and @lock, read under either
 * @nr_ranges:	their number; under @lock
 * @files:	the files with whole-address-space watches (or holds), by
 *		&umn_file.all_file_node; under @lock
 * @nr_files:	their number; under @lock
 * @running:	invalidations in flight; under @lock
 * @used:	bit i: @inval[i] is one of them; under @lock
 * @overflow:	those of them not in @inval; under @lock
 * @overflow_start: the start of the first of those, the lowest since
 *		@overflow was last 0; under @lock
 * @overflow_end: the highest end of those; under @lock
 * @overflow_causes: BIT(UMMUNOTIFY_CAUSE_*) of those; under @lock
 * @inval:	the others; under @lock
 */
struct umn_all_mm {
	struct mmu_notifier notifier;
	bool kept;
	bool released;
	spinlock_t lock;		/* the callbacks' */
	struct mutex ranges_lock;	/* changing @ranges */
	struct rb_root_cached ranges;
	unsigned long nr_ranges;
	struct list_head files;
	unsigned int nr_files;
	long running;
	unsigned long used;
	unsigned long overflow;
	unsigned long overflow_start;
	unsigned long overflow_end;
	unsigned int overflow_causes;
	struct umn_inval inval[UMN_IN_FLIGHT];
};

static struct umn_all_mm *umn_all_mm(struct mmu_notifier *notifier)
{
	return container_of(notifier, struct umn_all_mm, notifier);
}

static struct umn_region *umn_range_region(struct interval_tree_node *node)
{
	return container_of(node, struct umn_region, range);
}

/*
 * Publish [@start, @end) (within it) to @region.  all->lock held: the
 * region is in the notifier, and stays there meanwhile.
 */
static void umn_publish_to(struct umn_region *region, u64 start, u64 end,
			   unsigned int cause)
{
	struct umn_file *file = region->file;
	bool posted;

	spin_lock(&file->lock);
	posted = umn_report(file, region, start, end, cause);
	if (cause == UMMUNOTIFY_CAUSE_RELEASE)
		file->released = true;
	spin_unlock(&file->lock);
	if (posted)
		umn_wake(file);
}

/*
 * The first range watch over [@start, @last] whose first page starts at
 * @from or later, if any.
 */
static struct interval_tree_node *umn_range_from(struct umn_all_mm *all,
						 unsigned long from,
						 unsigned long start,
						 unsigned long last)
{
	struct rb_node *rb = all->ranges.rb_root.rb_node;
	struct interval_tree_node *node, *found = NULL;

	lockdep_assert_held(&all->lock);
	/* Ordered by start, like any interval tree. */
	while (rb) {
		node = rb_entry(rb, struct interval_tree_node, rb);
		if (UMN_RANGE_START(node) >= from) {
			found = node;
			rb = rb->rb_left;
		} else {
			rb = rb->rb_right;
		}
	}
	if (!found || UMN_RANGE_START(found) > last)
		return NULL;
	/* It may end before @start, if @from is below @start. */
	return UMN_RANGE_LAST(found) >= start ? found :
	       umn_ranges_iter_next(found, start, last);
}

/*
 * Publish [@start, @end) to the range watches it overlaps.  all->lock
 * held; dropped now and then if @blockable, so that a walk of many
 * watches neither keeps the CPU nor keeps the ioctls and teardowns of
 * the address space waiting for its end.  Meanwhile watches can come
 * and go: the walk goes on from the next start it had not reached.  A
 * watch put in meanwhile was given the invalidation by
 * umn_mark_in_flight(), as it is in the record (one after that point
 * gets it twice); one taken out needs nothing.  Watches with one start
 * are walked without a break, so that none is skipped.  Once the walk
 * has visited as many watches as there were when it began, it breaks no
 * more: a process that keeps putting watches in ahead of it cannot
 * stretch another's invalidation (a truncate of a file it maps).  What
 * is left then is walked in one go: the watches the tree holds, each
 * charged to its opener's limits.  Watches "with one start" here are
 * those whose first pages are one, the tree's keys.
 */
static void umn_range_report(struct umn_all_mm *all, unsigned long start,
			     unsigned long end, unsigned int cause,
			     bool blockable)
{
	unsigned long budget = all->nr_ranges, walked = 0, since = 0;
	struct interval_tree_node *node, *next;
	unsigned long from;
	u64 lo, hi;

	lockdep_assert_held(&all->lock);
	if (start >= end)
		return;
	node = umn_ranges_iter_first(&all->ranges, start, end - 1);
	while (node) {
		lo = max_t(u64, start, node->start);
		hi = min_t(u64, end, (u64)node->last + 1);
		if (lo < hi)
			umn_publish_to(umn_range_region(node), lo, hi, cause);
		next = umn_ranges_iter_next(node, start, end - 1);
		walked++;
		if (next && blockable && ++since >= UMN_WALK_BREAK &&
		    walked < budget &&
		    UMN_RANGE_START(next) != UMN_RANGE_START(node) &&
		    (need_resched() || spin_is_contended(&all->lock))) {
			from = UMN_RANGE_START(next);
			spin_unlock(&all->lock);
			cond_resched();
			spin_lock(&all->lock);
			next = umn_range_from(all, from, start, end - 1);
			since = 0;
		}
		node = next;
	}
}

/*
 * Publish [@start, @end) to every whole-address-space watch of @file.
 * Returns true if something new became readable.
 */
static bool umn_all_report(struct umn_file *file, u64 start, u64 end,
			   unsigned int cause)
{
	struct umn_region *region;
	bool posted = false;

	spin_lock(&file->lock);
	list_for_each_entry(region, &file->all_regions, all_node)
		posted |= umn_report(file, region, start, end, cause);
	spin_unlock(&file->lock);
	return posted;
}

/* Record @range, of @cause, in flight.  all->lock held. */
static void umn_inval_add(struct umn_all_mm *all,
			  const struct mmu_notifier_range *range,
			  unsigned int cause)
{
	unsigned long i = find_first_zero_bit(&all->used, UMN_IN_FLIGHT);

	lockdep_assert_held(&all->lock);
	all->running++;
	if (i < UMN_IN_FLIGHT) {
		__set_bit(i, &all->used);
		all->inval[i] = (struct umn_inval) {
			.range = range,
			.start = range->start,
			.end = range->end,
			.cause = cause,
		};
		return;
	}
	if (!all->overflow++) {
		all->overflow_start = range->start;
		all->overflow_end = range->end;
		all->overflow_causes = 0;
	} else {
		all->overflow_start = min(all->overflow_start, range->start);
		all->overflow_end = max(all->overflow_end, range->end);
	}
	all->overflow_causes |= BIT(cause);
}

/*
 * Forget @range, in flight no more.  Returns false if it was not
 * recorded (the exit overtook it).  all->lock held.
 */
static bool umn_inval_del(struct umn_all_mm *all,
			  const struct mmu_notifier_range *range)
{
	unsigned long i;

	lockdep_assert_held(&all->lock);
	for_each_set_bit(i, &all->used, UMN_IN_FLIGHT) {
		if (all->inval[i].range == range) {
			__clear_bit(i, &all->used);
			all->running--;
			return true;
		}
	}
	/* Not one by one: one of the others, whichever, as they are a hull. */
	if (!all->overflow) {
		/* Every end has its start (see the top), but the exit's. */
		WARN_ON_ONCE(!all->released);
		return false;
	}
	all->overflow--;
	all->running--;
	return true;
}

/*
 * @region, over [@start, @end), just went in: publish to it the
 * invalidations in flight over it, which did not see it start.  Those
 * beyond the record publish their hull, with a cause @region asks for
 * if they have one.  all->lock held.
 */
static void umn_mark_in_flight(struct umn_all_mm *all,
			       struct umn_region *region, u64 start, u64 end)
{
	unsigned int causes;
	unsigned long i;

	lockdep_assert_held(&all->lock);
	for_each_set_bit(i, &all->used, UMN_IN_FLIGHT) {
		const struct umn_inval *inval = &all->inval[i];

		if (inval->start < end && start < inval->end)
			umn_publish_to(region, max_t(u64, start, inval->start),
				       min_t(u64, end, inval->end),
				       inval->cause);
	}
	if (all->overflow && all->overflow_start < end &&
	    start < all->overflow_end) {
		causes = all->overflow_causes & region->causes ?:
			 all->overflow_causes;
		umn_publish_to(region, max_t(u64, start, all->overflow_start),
			       min_t(u64, end, all->overflow_end),
			       __ffs(causes));
	}
}

/*
 * Before the page tables change, possibly where sleeping is not allowed
 * (the OOM reaper's !mmu_notifier_range_blockable()): spinlocks only, no
 * allocation, no user access.
 */
static int umn_all_start_range(struct mmu_notifier *notifier,
			       const struct mmu_notifier_range *range)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	unsigned int cause = umn_cause(range->event);
	struct umn_file *file;
	u64 end;

	spin_lock(&all->lock);
	umn_inval_add(all, range, cause);
	/*
	 * Before the range watches, whose walk may let go of the lock: a
	 * file that joins meanwhile counts this one in all->running.
	 */
	list_for_each_entry(file, &all->files, all_file_node) {
		/*
		 * Counted before anything is published: the release stores
		 * of the word, the tail or dropped show it to whoever loads
		 * them with acquire.
		 */
		atomic64_inc(file->in_flight);
		end = min_t(u64, range->end, file->task_size);
		if (range->start < end &&
		    umn_all_report(file, range->start, end, cause))
			umn_wake(file);
	}
	umn_range_report(all, range->start, range->end, cause,
			 mmu_notifier_range_blockable(range));
	spin_unlock(&all->lock);
	return 0;
}

static void umn_all_end_range(struct mmu_notifier *notifier,
			      const struct mmu_notifier_range *range)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	struct umn_file *file;

	spin_lock(&all->lock);
	/*
	 * Pairs with user space's load-acquire of in_flight: the page tables
	 * changed before the count drops.
	 */
	if (umn_inval_del(all, range))
		list_for_each_entry(file, &all->files, all_file_node)
			atomic64_dec_return_release(file->in_flight);
	spin_unlock(&all->lock);
}

/*
 * The address space exits: the last invalidation, over every watch.  The
 * notifier stays with the files still joined (their fds live on
 * elsewhere), and goes with the last of them.
 */
static void umn_all_release(struct mmu_notifier *notifier,
			    struct mm_struct *mm)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	struct umn_file *file;

	spin_lock(&all->lock);
	all->released = true;
	umn_range_report(all, 0, ULONG_MAX, UMMUNOTIFY_CAUSE_RELEASE, true);
	list_for_each_entry(file, &all->files, all_file_node) {
		/* An invalidation the exit overtook never ends here. */
		atomic64_set(file->in_flight, 0);
		if (umn_all_report(file, 0, file->task_size,
				   UMMUNOTIFY_CAUSE_RELEASE))
			umn_wake(file);
	}
	all->used = 0;
	all->overflow = 0;
	all->running = 0;
	spin_unlock(&all->lock);
	/* Allowed here: unhashing is RCU-safe, the free waits for SRCU. */
	if (all->kept)
		mmu_notifier_put(notifier);
}

static struct mmu_notifier *umn_all_alloc(struct mm_struct *mm)
{
	struct umn_all_mm *all = kzalloc(sizeof(*all), GFP_KERNEL_ACCOUNT);

	if (!all)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&all->lock);
	mutex_init(&all->ranges_lock);
	all->ranges = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&all->files);
	/* The callbacks outlive the files; umn_exit() waits for the free. */
	__module_get(THIS_MODULE);
	return &all->notifier;
}

static void umn_all_free(struct mmu_notifier *notifier)
{
	struct umn_all_mm *all = umn_all_mm(notifier);

	WARN_ON_ONCE(!RB_EMPTY_ROOT(&all->ranges.rb_root) || all->nr_ranges);
	kfree(all);
	module_put(THIS_MODULE);
}

static const struct mmu_notifier_ops umn_all_ops = {
	.invalidate_range_start	= umn_all_start_range,
	.invalidate_range_end	= umn_all_end_range,
	.release		= umn_all_release,
	.alloc_notifier		= umn_all_alloc,
	.free_notifier		= umn_all_free,
};

void umn_all_init(struct umn_file *file)
{
	mutex_init(&file->all_lock);
	INIT_LIST_HEAD(&file->all_regions);
	file->in_flight = file->header + UMN_OFF_IN_FLIGHT;
}

/*
 * The address space's notifier, and a reference to it for the files of
 * the address space (umn_space_notifier() takes it for them all, once).
 * Registering it takes every lock of the address space
 * (mm_take_all_locks()), so it is registered once and kept, with a
 * second reference, until the address space exits: processes whose
 * files come and go do not register it again each time.  Waits for
 * mmap_lock (killable) and every rmap lock (mm_take_all_locks(), which
 * gives up on any signal): -EINTR.
 */
struct umn_all_mm *umn_all_get(struct mm_struct *mm)
{
	struct mmu_notifier *notifier;
	struct umn_all_mm *all;

	if (mmap_write_lock_killable(mm))
		return ERR_PTR(-EINTR);
	notifier = mmu_notifier_get_locked(&umn_all_ops, mm);
	if (IS_ERR(notifier)) {
		all = ERR_CAST(notifier);
	} else {
		all = umn_all_mm(notifier);
		/* Found now that it is registered: this cannot fail. */
		if (!all->kept &&
		    !WARN_ON_ONCE(mmu_notifier_get_locked(&umn_all_ops, mm) !=
				  notifier))
			all->kept = true;
	}
	mmap_write_unlock(mm);
	return all;
}

/*
 * Drop umn_all_get()'s reference, every watch of the address space's
 * files out of it.  The free, should it be the last, waits for SRCU in a
 * callback: nothing here waits.
 */
void umn_all_put(struct umn_all_mm *all)
{
	mmu_notifier_put(&all->notifier);
}

/*
 * The file's pointer to the address space's notifier, before its first
 * watch goes in (umn_mm_join(), which finds it set after that); the
 * address space's files hold the reference (umn_space_notifier()).  The
 * only wait of the watch path, once in the address space's life: see
 * umn_all_get().  -ERESTARTSYS on a signal, nothing having changed.
 */
int umn_mm_join_first(struct umn_file *file)
{
	struct umn_all_mm *all = umn_space_notifier(file);

	if (IS_ERR(all))
		return PTR_ERR(all) == -EINTR ? -ERESTARTSYS : PTR_ERR(all);
	/* Pairs with umn_mm_join()'s acquire: registered.  Racers agree. */
	smp_store_release(&file->all_mm, all);
	return 0;
}

/* The file's teardown, its watches gone. */
void umn_mm_leave(struct umn_file *file)
{
	WARN_ON_ONCE(file->all_joined);
	file->all_mm = NULL;
}

/*
 * Whether some page of @range is under @limit range watches of @all
 * already, @except aside.  The watches over it come by increasing first
 * page: at each, the ones still over its first page in the range are
 * @active (their last addresses); when @limit are, that page is full.
 * Fewer than @limit watches over the range in all need no array; more
 * need @active, of @limit entries: -EAGAIN without it.  Under
 * @all->ranges_lock, which keeps the tree still without @all->lock: the
 * walk may sleep.  It ends on a fatal signal (-EINTR), as teardowns may
 * be waiting for the mutex.
 */
static int umn_ranges_full(struct umn_all_mm *all,
			   const struct interval_tree_node *range,
			   unsigned int limit,
			   const struct interval_tree_node *except,
			   unsigned long *active)
{
	unsigned long start = UMN_RANGE_START(range);
	unsigned long last = UMN_RANGE_LAST(range);
	unsigned int n = 0, kept, i, seen = 0;
	struct interval_tree_node *other;
	int ret = 0;

	lockdep_assert_held(&all->ranges_lock);

	for (other = umn_ranges_iter_first(&all->ranges, start, last);
	     other && seen < limit;
	     other = umn_ranges_iter_next(other, start, last)) {
		seen += other != except;
		/* Root may set max_overlap to millions. */
		if (fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
	}
	if (seen < limit)
		return 0;
	if (!active)
		return -EAGAIN;
	for (other = umn_ranges_iter_first(&all->ranges, start, last);
	     other && !ret;
	     other = umn_ranges_iter_next(other, start, last)) {
		unsigned long page = max(start, UMN_RANGE_START(other));

		if (other == except)
			continue;
		for (i = 0, kept = 0; i < n; i++)
			if (active[i] >= page)
				active[kept++] = active[i];
		n = kept;
		active[n++] = UMN_RANGE_LAST(other);
		if (n == limit)
			ret = -ENOSPC;
		/* The range may cover a million watches. */
		if (fatal_signal_pending(current))
			ret = -EINTR;
		cond_resched();
	}
	return ret;
}

/*
 * Start @region, a range watch of [@start, @end), unless a page of it is
 * under max_overlap range watches already (-ENOSPC), @except (a watch
 * RESIZE moves) aside: publish to it from now on, and the invalidations
 * in flight over it at once.  The file has joined; @region has its slot
 * and first generation, which those publish past.  -ENOMEM, or -EINTR
 * on a fatal signal, change nothing either.
 */
int umn_range_insert(struct umn_file *file, struct umn_region *region,
		     u64 start, u64 end, struct umn_region *except)
{
	unsigned int limit = READ_ONCE(max_overlap);
	struct umn_all_mm *all = file->all_mm;
	unsigned long *active = NULL;
	int ret;

	region->range.start = start;
	region->range.last = end - 1;
again:
	/* Killable: another file's check may be walking many watches. */
	ret = mutex_lock_killable(&all->ranges_lock);
	if (ret)
		goto out;
	ret = limit ? umn_ranges_full(all, &region->range, limit,
				      except ? &except->range : NULL, active) :
		      -ENOSPC;
	if (ret == -EAGAIN) {
		/*
		 * Not under the mutex, which teardowns wait for: reclaim
		 * may take long.  Root may set an absurd max_overlap:
		 * ENOMEM, not a warning.
		 */
		mutex_unlock(&all->ranges_lock);
		active = kmalloc_array(limit, sizeof(*active),
				       GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
		if (!active)
			return -ENOMEM;
		goto again;
	}
	if (!ret) {
		spin_lock(&all->lock);
		umn_ranges_insert(&region->range, &all->ranges);
		all->nr_ranges++;
		/* Usually none is in flight (running counts them all). */
		if (all->running)
			umn_mark_in_flight(all, region, start, end);
		spin_unlock(&all->lock);
	}
	mutex_unlock(&all->ranges_lock);
out:
	kfree(active);
	return ret;
}

/*
 * Stop the range watches @regions[0..@n): after this no callback reaches
 * them, and they may be freed at once.  Waits for one callback's walk at
 * most, once for them all (a file's teardown stops them by the batch),
 * rather than once each; and for another file's max_overlap check of
 * the address space: one walk of the watches over a range, which
 * allocates nothing under the mutex and ends on its caller's fatal
 * signal.
 */
void umn_range_remove(struct umn_file *file, struct umn_region **regions,
		      unsigned int n)
{
	struct umn_all_mm *all = file->all_mm;
	unsigned int i;

	if (!n)
		return;
	mutex_lock(&all->ranges_lock);
	spin_lock(&all->lock);
	for (i = 0; i < n; i++) {
		umn_ranges_remove(&regions[i]->range, &all->ranges);
		RB_CLEAR_NODE(&regions[i]->range.rb);
	}
	all->nr_ranges -= n;
	spin_unlock(&all->lock);
	mutex_unlock(&all->ranges_lock);
}

/* Join the notifier's files.  all_lock held, the file joined. */
static int umn_all_link(struct umn_file *file)
{
	struct umn_all_mm *all = file->all_mm;
	int ret = 0;

	lockdep_assert_held(&file->all_lock);
	spin_lock(&all->lock);
	if (all->nr_files >= UMN_MAX_ALL_FILES) {
		ret = -ENOSPC;
	} else {
		all->nr_files++;
		/* Those running now end here too: they count from the start. */
		atomic64_set(file->in_flight, all->running);
		list_add_tail(&file->all_file_node, &all->files);
		file->all_joined = true;
	}
	spin_unlock(&all->lock);
	return ret;
}

/*
 * Off the notifier's files, which the callbacks walk under its lock, so
 * that none of them reaches the file afterwards.  all_lock held.
 */
static void umn_all_unlink(struct umn_file *file)
{
	struct umn_all_mm *all = file->all_mm;

	lockdep_assert_held(&file->all_lock);

	spin_lock(&all->lock);
	list_del(&file->all_file_node);
	all->nr_files--;
	/* No end will come for those running: they are not ours now. */
	atomic64_set(file->in_flight, 0);
	spin_unlock(&all->lock);
	file->all_joined = false;
}

/*
 * Start reporting to @region, the file joined to the notifier.  Never
 * waits for invalidations: those in flight, which did not see @region,
 * are published to it at once.
 */
int umn_all_start(struct umn_file *file, struct umn_region *region)
{
	struct umn_all_mm *all;
	int ret = 0;

	mutex_lock(&file->all_lock);
	if (file->nr_all >= UMN_MAX_ALL)
		ret = -ENOSPC;
	else if (!file->all_joined)
		ret = umn_all_link(file);
	if (!ret)
		file->nr_all++;
	mutex_unlock(&file->all_lock);
	if (ret)
		return ret;

	all = file->all_mm;
	spin_lock(&all->lock);
	spin_lock(&file->lock);
	list_add_tail(&region->all_node, &file->all_regions);
	spin_unlock(&file->lock);
	umn_mark_in_flight(all, region, 0, file->task_size);
	spin_unlock(&all->lock);
	return 0;
}

/*
 * Join the notifier's files for a WATCHV to come, before it changes
 * anything: its whole-address-space watches then cannot fail to join.
 * The file joined to the notifier.
 */
int umn_all_hold(struct umn_file *file)
{
	int ret = 0;

	mutex_lock(&file->all_lock);
	if (!file->all_joined)
		ret = umn_all_link(file);
	if (!ret)
		file->all_holds++;
	mutex_unlock(&file->all_lock);
	return ret;
}

void umn_all_unhold(struct umn_file *file)
{
	mutex_lock(&file->all_lock);
	if (!--file->all_holds && !file->nr_all)
		umn_all_unlink(file);
	mutex_unlock(&file->all_lock);
}

/*
 * @region was started: after this no callback can touch it.  The file
 * leaves the notifier's files with its last whole-address-space watch,
 * so that the invalidations of a process that stopped using them pay
 * nothing for it.
 */
void umn_all_remove(struct umn_file *file, struct umn_region *region)
{
	struct umn_all_mm *all = file->all_mm;

	spin_lock(&all->lock);
	spin_lock(&file->lock);
	list_del(&region->all_node);
	spin_unlock(&file->lock);
	spin_unlock(&all->lock);
	mutex_lock(&file->all_lock);
	if (!--file->nr_all && !file->all_holds)
		umn_all_unlink(file);
	mutex_unlock(&file->all_lock);
}
