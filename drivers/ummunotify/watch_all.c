// SPDX-License-Identifier: GPL-2.0
/*
 * Whole-address-space watches (UMMUNOTIFY_WATCH_ALL).  Every invalidation
 * of the process concerns them, so they do not each take an interval
 * notifier, which would put the address space's every invalidation
 * through the interval tree and its lock: they hang off one mmu_notifier
 * per file, registered with the first of them.
 *
 * Its end callback also keeps in_flight, a word of the shared area: the
 * invalidations that have started (and published what they change) but
 * not yet changed the page tables.  A cache without a watch per entry
 * pins only once it has read 0 there after its last look at the ring, so
 * that it never pins pages an invalidation it already saw is about to
 * take away.
 */

#include <linux/atomic.h>
#include <linux/mmu_notifier.h>
#include <linux/wait.h>

#include "umn.h"

static struct umn_file *umn_all_file(struct mmu_notifier *notifier)
{
	return container_of(notifier, struct umn_file, all_notifier);
}

/*
 * Publish [@start, @end) to every whole-address-space watch; file->lock
 * taken.  Returns true if something new became readable.
 */
static bool umn_all_report(struct umn_file *file, u64 start, u64 end,
			   unsigned int cause)
{
	struct umn_region *region;
	bool posted = false;

	spin_lock(&file->lock);
	list_for_each_entry(region, &file->all_regions, all_node)
		posted |= umn_report(file, region, start, end, cause);
	if (cause == UMMUNOTIFY_CAUSE_RELEASE)
		file->released = true;
	spin_unlock(&file->lock);
	return posted;
}

/*
 * Before the page tables change, possibly where sleeping is not allowed:
 * a spinlock only, no allocation, no user access.
 */
static int umn_all_start_range(struct mmu_notifier *notifier,
			       const struct mmu_notifier_range *range)
{
	struct umn_file *file = umn_all_file(notifier);
	u64 end = min_t(u64, range->end, file->task_size);

	/*
	 * Counted before anything is published, which is done with release
	 * stores: whoever sees the event also sees it in flight.
	 */
	atomic64_inc(file->in_flight);
	if (range->start < end &&
	    umn_all_report(file, range->start, end, umn_cause(range->event)))
		umn_wake(file);
	return 0;
}

static void umn_all_end_range(struct mmu_notifier *notifier,
			      const struct mmu_notifier_range *range)
{
	struct umn_file *file = umn_all_file(notifier);

	/* Release: the page tables changed before the count drops. */
	if (!atomic64_dec_return_release(file->in_flight) &&
	    wq_has_sleeper(&file->all_wait))
		wake_up_all(&file->all_wait);
}

/* The address space exits, or the file is closing (umn_all_stop()). */
static void umn_all_release(struct mmu_notifier *notifier,
			    struct mm_struct *mm)
{
	struct umn_file *file = umn_all_file(notifier);

	if (umn_all_report(file, 0, file->task_size,
			   UMMUNOTIFY_CAUSE_RELEASE))
		umn_wake(file);
}

static const struct mmu_notifier_ops umn_all_ops = {
	.invalidate_range_start	= umn_all_start_range,
	.invalidate_range_end	= umn_all_end_range,
	.release		= umn_all_release,
};

void umn_all_init(struct umn_file *file)
{
	mutex_init(&file->all_lock);
	file->all_notifier.ops = &umn_all_ops;
	INIT_LIST_HEAD(&file->all_regions);
	file->in_flight = file->header + UMN_OFF_IN_FLIGHT;
	init_waitqueue_head(&file->all_wait);
}

/*
 * Start reporting to @region, registering the file's notifier if it is
 * the first.  Called by the owner without regions_lock: registration
 * takes mmap_lock and every lock of the address space's rmaps, so that no
 * invalidation is in flight while it happens (in_flight counts each one
 * from its start).  Like mmu_interval_read_begin() for a range, returns
 * once the invalidations already running, which did not see @region, are
 * over.
 */
int umn_all_start(struct umn_file *file, struct umn_region *region)
{
	int ret = 0;

	mutex_lock(&file->all_lock);
	if (!file->all_registered) {
		ret = mmu_notifier_register(&file->all_notifier, file->mm);
		file->all_registered = !ret;
	}
	mutex_unlock(&file->all_lock);
	if (ret)
		return ret;

	spin_lock(&file->lock);
	list_add_tail(&region->all_node, &file->all_regions);
	spin_unlock(&file->lock);
	wait_event(file->all_wait, !atomic64_read(file->in_flight));
	return 0;
}

/*
 * The file is closing.  Unregistering waits for the callbacks running
 * (SRCU): after it the watches can go.
 */
void umn_all_stop(struct umn_file *file)
{
	if (file->all_registered)
		mmu_notifier_unregister(&file->all_notifier, file->mm);
}
