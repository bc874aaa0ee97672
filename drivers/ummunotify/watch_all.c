// SPDX-License-Identifier: GPL-2.0
/*
 * Whole-address-space watches (UMMUNOTIFY_WATCH_ALL).  Every invalidation
 * of the process concerns them, so they do not each take an interval
 * notifier, which would put the address space's every invalidation
 * through the interval tree and its lock: they hang off one mmu_notifier
 * per address space, shared by the files watching it.  Registering one
 * takes every lock of the address space (mm_take_all_locks()); that
 * happens once in the address space's life, as for interval notifiers,
 * not once per file.
 *
 * Its end callback also keeps each file's in_flight, a word of the shared
 * area: the invalidations that have started (and published what they
 * change) but not yet changed the page tables.  A cache without a watch
 * per entry pins only once it has read 0 there after its last look at
 * the ring, so that it never pins pages an invalidation it already saw is
 * about to take away.
 */

#include <linux/atomic.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "umn.h"

/* Whole-address-space watches of one file: enough for any cache. */
#define UMN_MAX_ALL		16
/* Files of one address space with such watches: each invalidation visits them all. */
#define UMN_MAX_ALL_FILES	16

/**
 * struct umn_all_mm - the notifier of an address space's WATCH_ALL files
 * @notifier:	registered once, by mmu_notifier_get_locked(), for all of them
 * @kept:	the reference for the address space's life is taken; under
 *		mmap_lock
 * @lock:	taken by the callbacks; nests outside &umn_file.lock
 * @files:	the joined files, by &umn_file.all_file_node; under @lock
 * @nr_files:	their number; under @lock
 * @running:	invalidations started and not ended; under @lock
 * @epoch:	moves each time @running drops to 0; written under @lock
 * @idle:	WATCH_ALL waiting for @epoch to move
 */
struct umn_all_mm {
	struct mmu_notifier notifier;
	bool kept;
	spinlock_t lock;		/* the callbacks' */
	struct list_head files;
	unsigned int nr_files;
	long running;
	unsigned long epoch;
	wait_queue_head_t idle;
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
 * spinlocks only, no allocation, no user access.  At most
 * UMN_MAX_ALL_FILES files of UMN_MAX_ALL watches each.
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
	/* Release: the page tables changed before the counts drop. */
	list_for_each_entry(file, &all->files, all_file_node)
		atomic64_dec_return_release(file->in_flight);
	if (!--all->running) {
		/* Pairs with umn_all_start(): the ends came before. */
		smp_store_release(&all->epoch, all->epoch + 1);
		if (wq_has_sleeper(&all->idle))
			wake_up_all(&all->idle);
	}
	spin_unlock(&all->lock);
}

/*
 * The address space exits: the last invalidation.  The notifier stays
 * with the files still joined (their fds live on elsewhere), and goes
 * with the last of them.
 */
static void umn_all_release(struct mmu_notifier *notifier,
			    struct mm_struct *mm)
{
	struct umn_all_mm *all = umn_all_mm(notifier);
	struct umn_file *file;

	spin_lock(&all->lock);
	list_for_each_entry(file, &all->files, all_file_node) {
		/* An invalidation the exit overtook never ends here. */
		atomic64_set(file->in_flight, 0);
		if (umn_all_report(file, 0, file->task_size,
				   UMMUNOTIFY_CAUSE_RELEASE))
			umn_wake(file);
	}
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
	INIT_LIST_HEAD(&all->files);
	init_waitqueue_head(&all->idle);
	/* The callbacks outlive the files; umn_exit() waits for the free. */
	__module_get(THIS_MODULE);
	return &all->notifier;
}

static void umn_all_free(struct mmu_notifier *notifier)
{
	kfree(umn_all_mm(notifier));
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
 * The address space's notifier, and a reference to it for the file.
 * Registering it takes every lock of the address space
 * (mm_take_all_locks()), so it is registered once and kept, with a
 * second reference, until the address space exits: files opened and
 * closed in a loop do not register it again each time.
 */
static struct umn_all_mm *umn_all_get(struct mm_struct *mm)
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

/* Join the address space's notifier.  all_lock held. */
static int umn_all_join(struct umn_file *file)
{
	struct umn_all_mm *all;
	int ret = 0;

	lockdep_assert_held(&file->all_lock);
	all = umn_all_get(file->mm);
	if (IS_ERR(all)) {
		/* mm_take_all_locks() gives up on any signal: start again. */
		return PTR_ERR(all) == -EINTR ? -ERESTARTSYS : PTR_ERR(all);
	}
	spin_lock(&all->lock);
	if (all->nr_files >= UMN_MAX_ALL_FILES) {
		ret = -ENOSPC;
	} else {
		all->nr_files++;
		/* Those running now end here too: they count from the start. */
		atomic64_set(file->in_flight, all->running);
		list_add_tail(&file->all_file_node, &all->files);
	}
	spin_unlock(&all->lock);
	if (ret) {
		mmu_notifier_put(&all->notifier);
		return ret;
	}
	file->all_mm = all;
	return 0;
}

/*
 * Off the notifier, which the callbacks walk under its lock, so that none
 * of them reaches the file afterwards.  all_lock held.
 */
static void umn_all_leave(struct umn_file *file)
{
	struct umn_all_mm *all = file->all_mm;

	lockdep_assert_held(&file->all_lock);

	spin_lock(&all->lock);
	list_del(&file->all_file_node);
	all->nr_files--;
	/* No end will come for those running: they are not ours now. */
	atomic64_set(file->in_flight, 0);
	spin_unlock(&all->lock);
	mmu_notifier_put(&all->notifier);
	file->all_mm = NULL;
}

static bool umn_all_moved(struct umn_all_mm *all, unsigned long epoch)
{
	/* Pairs with the release in umn_all_end_range(). */
	return smp_load_acquire(&all->epoch) != epoch;
}

/*
 * Start reporting to @region.  Called by the owner without regions_lock:
 * joining may take mmap_lock and every lock of the address space's rmaps.
 * Like mmu_interval_read_begin() for a range, returns once the
 * invalidations already running, which did not see @region, are over;
 * or, on a signal, with @region removed: -ERESTARTSYS if the call may
 * start again (@restartable), or else -EINTR on a fatal one only.
 */
int umn_all_start(struct umn_file *file, struct umn_region *region,
		  bool restartable)
{
	unsigned long epoch = 0;
	struct umn_all_mm *all;
	bool wait;
	int ret = 0;

	mutex_lock(&file->all_lock);
	if (file->nr_all >= UMN_MAX_ALL)
		ret = -ENOSPC;
	else if (!file->all_mm)
		ret = umn_all_join(file);
	if (!ret)
		file->nr_all++;
	/* Joined while @region counts in nr_all. */
	all = file->all_mm;
	mutex_unlock(&file->all_lock);
	if (ret)
		return ret;

	/* Under all->lock: an invalidation either sees @region or is waited for. */
	spin_lock(&all->lock);
	spin_lock(&file->lock);
	list_add_tail(&region->all_node, &file->all_regions);
	spin_unlock(&file->lock);
	wait = all->running;
	if (wait)
		epoch = all->epoch;
	spin_unlock(&all->lock);
	if (!wait)
		return 0;
	ret = restartable ?
	      wait_event_interruptible(all->idle, umn_all_moved(all, epoch)) :
	      wait_event_killable(all->idle, umn_all_moved(all, epoch));
	if (ret) {
		umn_all_remove(file, region);
		return restartable ? -ERESTARTSYS : -EINTR;
	}
	return 0;
}

/*
 * Join the notifier for a WATCHV to come, before it changes anything:
 * its whole-address-space watches then cannot fail to join.
 */
int umn_all_hold(struct umn_file *file)
{
	int ret = 0;

	mutex_lock(&file->all_lock);
	if (!file->all_mm)
		ret = umn_all_join(file);
	if (!ret)
		file->all_holds++;
	mutex_unlock(&file->all_lock);
	return ret;
}

void umn_all_unhold(struct umn_file *file)
{
	mutex_lock(&file->all_lock);
	if (!--file->all_holds && !file->nr_all)
		umn_all_leave(file);
	mutex_unlock(&file->all_lock);
}

/*
 * @region was started: after this no callback can touch it.  The file
 * leaves the notifier with its last whole-address-space watch, so that
 * the invalidations of a process that stopped using them pay nothing.
 */
void umn_all_remove(struct umn_file *file, struct umn_region *region)
{
	spin_lock(&file->lock);
	list_del(&region->all_node);
	spin_unlock(&file->lock);
	mutex_lock(&file->all_lock);
	if (!--file->nr_all && !file->all_holds)
		umn_all_leave(file);
	mutex_unlock(&file->all_lock);
}
