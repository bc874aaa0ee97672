// SPDX-License-Identifier: GPL-2.0
/*
 * Whole-address-space watches (UMMUNOTIFY_WATCH_ALL).  Every invalidation
 * of the process concerns them, so they do not each take an interval
 * notifier, which would put the address space's every invalidation
 * through the interval tree and its lock: they hang off one mmu_notifier
 * per address space, shared by the files watching it.  Registering one
 * takes every lock of the address space (mm_take_all_locks()); that
 * happens once per address space, as for interval notifiers, not once
 * per file.
 *
 * Its end callback also keeps each file's in_flight, a word of the shared
 * area: the invalidations that have started (and published what they
 * change) but not yet changed the page tables.  A cache without a watch
 * per entry pins only once it has read 0 there after its last look at
 * the ring, so that it never pins pages an invalidation it already saw is
 * about to take away.
 */

#include <linux/atomic.h>
#include <linux/mmu_notifier.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "umn.h"

/* Whole-address-space watches of one file: enough for any cache. */
#define UMN_MAX_ALL	16

/**
 * struct umn_all_mm - the notifier of an address space's WATCH_ALL files
 * @notifier:	registered once, by mmu_notifier_get(), for all of them
 * @lock:	taken by the callbacks; nests outside &umn_file.lock
 * @files:	the files, by &umn_file.all_file_node; under @lock
 * @running:	invalidations started and not ended; under @lock
 */
struct umn_all_mm {
	struct mmu_notifier notifier;
	spinlock_t lock;
	struct list_head files;
	long running;
};

static struct umn_all_mm *umn_all_mm(struct mmu_notifier *notifier)
{
	return container_of(notifier, struct umn_all_mm, notifier);
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

/*
 * Before the page tables change, possibly where sleeping is not allowed:
 * spinlocks only, no allocation, no user access.
 */
static int umn_all_start_range(struct mmu_notifier *notifier,
			       const struct mmu_notifier_range *range)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	unsigned int cause = umn_cause(range->event);
	struct umn_file *file;
	u64 end;

	spin_lock(&all->lock);
	all->running++;
	list_for_each_entry(file, &all->files, all_file_node) {
		/*
		 * Counted before anything is published, which is done with
		 * release stores: whoever sees the event also sees it in
		 * flight.
		 */
		atomic64_inc(file->in_flight);
		end = min_t(u64, range->end, file->task_size);
		if (range->start < end &&
		    umn_all_report(file, range->start, end, cause))
			umn_wake(file);
	}
	spin_unlock(&all->lock);
	return 0;
}

static void umn_all_end_range(struct mmu_notifier *notifier,
			      const struct mmu_notifier_range *range)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	struct umn_file *file;

	spin_lock(&all->lock);
	all->running--;
	list_for_each_entry(file, &all->files, all_file_node) {
		/* Release: the page tables changed before the count drops. */
		if (!atomic64_dec_return_release(file->in_flight) &&
		    wq_has_sleeper(&file->all_wait))
			wake_up_all(&file->all_wait);
	}
	spin_unlock(&all->lock);
}

/* The address space exits. */
static void umn_all_release(struct mmu_notifier *notifier,
			    struct mm_struct *mm)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	struct umn_file *file;

	spin_lock(&all->lock);
	list_for_each_entry(file, &all->files, all_file_node)
		if (umn_all_report(file, 0, file->task_size,
				   UMMUNOTIFY_CAUSE_RELEASE))
			umn_wake(file);
	spin_unlock(&all->lock);
}

static struct mmu_notifier *umn_all_alloc(struct mm_struct *mm)
{
	struct umn_all_mm *all = kzalloc(sizeof(*all), GFP_KERNEL_ACCOUNT);

	if (!all)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&all->lock);
	INIT_LIST_HEAD(&all->files);
	return &all->notifier;
}

static void umn_all_free(struct mmu_notifier *notifier)
{
	kfree(umn_all_mm(notifier));
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
	init_waitqueue_head(&file->all_wait);
}

/* Join the address space's notifier, registering it if it is the first. */
static int umn_all_join(struct umn_file *file)
{
	struct mmu_notifier *notifier;
	struct umn_all_mm *all;

	notifier = mmu_notifier_get(&umn_all_ops, file->mm);
	if (IS_ERR(notifier)) {
		/* mm_take_all_locks() gives up on any signal: start again. */
		return PTR_ERR(notifier) == -EINTR ? -ERESTARTSYS :
						     PTR_ERR(notifier);
	}
	all = umn_all_mm(notifier);
	spin_lock(&all->lock);
	/* Those running now end here too: they count from the start. */
	atomic64_set(file->in_flight, all->running);
	list_add_tail(&file->all_file_node, &all->files);
	spin_unlock(&all->lock);
	file->all_mm = all;
	return 0;
}

/*
 * Start reporting to @region.  Called by the owner without regions_lock:
 * joining may take mmap_lock and every lock of the address space's rmaps.
 * Like mmu_interval_read_begin() for a range, returns once the
 * invalidations already running, which did not see @region, are over;
 * on a fatal signal, with @region removed.
 */
int umn_all_start(struct umn_file *file, struct umn_region *region)
{
	int ret = 0;

	mutex_lock(&file->all_lock);
	if (file->nr_all >= UMN_MAX_ALL)
		ret = -ENOSPC;
	else if (!file->all_mm)
		ret = umn_all_join(file);
	if (!ret)
		file->nr_all++;
	mutex_unlock(&file->all_lock);
	if (ret)
		return ret;

	spin_lock(&file->lock);
	list_add_tail(&region->all_node, &file->all_regions);
	spin_unlock(&file->lock);
	/* Pairs with the release in umn_all_end_range(). */
	ret = wait_event_killable(file->all_wait,
				  !atomic64_read_acquire(file->in_flight));
	if (ret)
		umn_all_remove(file, region);
	return ret;
}

/* @region was started: after this no callback can touch it. */
void umn_all_remove(struct umn_file *file, struct umn_region *region)
{
	spin_lock(&file->lock);
	list_del(&region->all_node);
	spin_unlock(&file->lock);
	mutex_lock(&file->all_lock);
	file->nr_all--;
	mutex_unlock(&file->all_lock);
}

/*
 * The file is closing: off the address space's notifier, which the
 * callbacks walk under its lock, so that none of them can reach the file
 * afterwards.  The notifier goes with the last file (after SRCU).
 */
void umn_all_stop(struct umn_file *file)
{
	struct umn_all_mm *all = file->all_mm;

	if (!all)
		return;
	spin_lock(&all->lock);
	list_del(&file->all_file_node);
	spin_unlock(&all->lock);
	mmu_notifier_put(&all->notifier);
}
