// SPDX-License-Identifier: GPL-2.0
/*
 * What the files of one address space share: the range watches of all of
 * them, by address, and how many of them asked for pressure events.
 *
 * An invalidation of a page reaches every range watch over it, and
 * not only when the owner unmaps: reclaim, compaction, migration and the
 * OOM reaper invalidate the owner's pages (and a shared file's page, for
 * every process that maps it).  A stack of a million watches over one
 * range would make each of its pages cost whoever reclaims or migrates it
 * a million callbacks.  So a range watch is refused if a page of it is
 * under max_overlap watches of the address space already: no page is
 * ever under more, in one mapping (a physical page mapped many times
 * costs that for each mapping).  A watch counts until it is out of the
 * notifier.  Whole-address-space watches are bounded on their own
 * (watch_all.c).
 */

#include <linux/hashtable.h>
#include <linux/interval_tree_generic.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "umn.h"

static unsigned int max_overlap = 64;
module_param(max_overlap, uint, 0644);
MODULE_PARM_DESC(max_overlap, "Maximum number of range watches of one address space over any one page (default 64)");

/**
 * struct umn_space - what the files of one address space share
 * @node:		in umn_spaces, under umn_spaces_lock
 * @mm:			the address space; each file holds it with mmgrab()
 * @files:		files sharing this, under umn_spaces_lock
 * @pressure_files:	of those, the ones on the pressure list
 * @lock:		the range watches; under regions_lock, never
 *			taken by a notifier
 * @ranges:		the range watches of all the files, by address
 * @join_lock:		registering @notifier
 * @notifier:		the address space's notifier (watch_all.c), once a
 *			file of it watched: one reference for all the files
 */
struct umn_space {
	struct hlist_node node;
	struct mm_struct *mm;
	unsigned int files;
	atomic_t pressure_files;
	struct mutex lock;	/* @ranges */
	struct rb_root_cached ranges;
	struct mutex join_lock;	/* @notifier */
	struct umn_all_mm *notifier;
};

static DEFINE_HASHTABLE(umn_spaces, 6);
static DEFINE_MUTEX(umn_spaces_lock);

/*
 * The range is the one the notifier's tree keys the watch by:
 * umn_space_add() sets it, before the watch goes in there, and nothing
 * changes it while the watch is in @ranges.  Counted in whole pages, as
 * pages are invalidated: watches of distinct bytes of one page all see
 * its every invalidation.
 */
#define UMN_RANGE_START(region)	((region)->range.start & PAGE_MASK)
#define UMN_RANGE_LAST(region)	((region)->range.last | ~PAGE_MASK)

INTERVAL_TREE_DEFINE(struct umn_region, space_node, unsigned long,
		     space_last, UMN_RANGE_START, UMN_RANGE_LAST, static,
		     umn_ranges)

/* At open: find or make the opener's address space's. */
int umn_space_get(struct umn_file *file)
{
	struct umn_space *space;
	int ret = 0;

	mutex_lock(&umn_spaces_lock);
	hash_for_each_possible(umn_spaces, space, node, (unsigned long)file->mm)
		if (space->mm == file->mm)
			goto found;
	space = kzalloc(sizeof(*space), GFP_KERNEL_ACCOUNT);
	if (!space) {
		ret = -ENOMEM;
		goto out;
	}
	space->mm = file->mm;
	mutex_init(&space->lock);
	space->ranges = RB_ROOT_CACHED;
	mutex_init(&space->join_lock);
	hash_add(umn_spaces, &space->node, (unsigned long)file->mm);
found:
	space->files++;
	file->space = space;
out:
	mutex_unlock(&umn_spaces_lock);
	return ret;
}

/* The file's watches are gone and it has left the pressure list. */
void umn_space_put(struct umn_file *file)
{
	struct umn_space *space = file->space;

	mutex_lock(&umn_spaces_lock);
	if (!--space->files) {
		WARN_ON_ONCE(!RB_EMPTY_ROOT(&space->ranges.rb_root));
		hash_del(&space->node);
		if (space->notifier)
			umn_all_put(space->notifier);
		kfree(space);
	}
	mutex_unlock(&umn_spaces_lock);
}

/*
 * Whether some page of [@start, @last] is under @limit watches of @space
 * already, @except aside.  The watches over it come by increasing start:
 * at each, the ones still over its first page in the range are @active
 * (their last addresses); when @limit are, that page is full.  Fewer
 * than @limit watches over the range in all need no array.  Under
 * @space->lock.
 */
static int umn_space_full(struct umn_space *space, unsigned long start,
			  unsigned long last, unsigned int limit,
			  struct umn_region *except)
{
	unsigned int n = 0, kept, i, seen = 0;
	struct umn_region *other;
	unsigned long *active;
	int ret = 0;

	lockdep_assert_held(&space->lock);

	for (other = umn_ranges_iter_first(&space->ranges, start, last);
	     other && seen < limit;
	     other = umn_ranges_iter_next(other, start, last))
		seen += other != except;
	if (seen < limit)
		return 0;
	/* Root may set an absurd max_overlap: ENOMEM, not a warning. */
	active = kmalloc_array(limit, sizeof(*active),
			       GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!active)
		return -ENOMEM;
	for (other = umn_ranges_iter_first(&space->ranges, start, last);
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
		cond_resched();
	}
	kfree(active);
	return ret;
}

/*
 * Add @region's range [@start, @end) to the address space's, unless a
 * page of it is under max_overlap of them; @except (a watch RESIZE moves)
 * does not count.  regions_lock held.
 */
int umn_space_add(struct umn_file *file, struct umn_region *region,
		  u64 start, u64 end, struct umn_region *except)
{
	unsigned int limit = READ_ONCE(max_overlap);
	struct umn_space *space = file->space;
	int ret = -ENOSPC;

	lockdep_assert_held(&file->regions_lock);

	region->range.start = start;
	region->range.last = end - 1;
	mutex_lock(&space->lock);
	if (limit)
		ret = umn_space_full(space, UMN_RANGE_START(region),
				     UMN_RANGE_LAST(region), limit, except);
	if (!ret)
		umn_ranges_insert(region, &space->ranges);
	mutex_unlock(&space->lock);
	return ret;
}

/* Undo umn_space_add() for @regions[0..@n). */
void umn_space_del(struct umn_file *file, struct umn_region **regions,
		   unsigned int n)
{
	struct umn_space *space = file->space;
	unsigned int i;

	mutex_lock(&space->lock);
	for (i = 0; i < n; i++)
		umn_ranges_remove(regions[i], &space->ranges);
	mutex_unlock(&space->lock);
}

/*
 * The address space's notifier, registered by the first of its files to
 * watch, for them all: its later files, and the owner's threads, do not
 * take mmap_lock for it.  Without regions_lock (see umn_all_get()).
 */
struct umn_all_mm *umn_space_notifier(struct umn_file *file)
{
	struct umn_space *space = file->space;
	struct umn_all_mm *all;

	/* Held by a thread of the owner registering it: killable too. */
	if (mutex_lock_killable(&space->join_lock))
		return ERR_PTR(-EINTR);
	all = space->notifier;
	if (!all) {
		all = umn_all_get(file->mm);
		if (!IS_ERR(all))
			space->notifier = all;
	}
	mutex_unlock(&space->join_lock);
	return all;
}

/* The files of the address space that are on the pressure list. */
unsigned int umn_space_pressure_files(struct umn_file *file)
{
	return atomic_read(&file->space->pressure_files);
}

void umn_space_pressure_add(struct umn_file *file, int n)
{
	atomic_add(n, &file->space->pressure_files);
}
