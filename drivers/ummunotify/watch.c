// SPDX-License-Identifier: GPL-2.0
/*
 * Watches: a cookie, a slot and an interval notifier each, and the
 * notifier callback that publishes what changed before the change is
 * made.
 */

#include <linux/bitmap.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "umn.h"
#include "trace.h"

/*
 * Unknown future events count as CLEAR: assume the pages changed.
 * Device-exclusive access keeps the pages, like a protection change.
 */
static unsigned int umn_cause(enum mmu_notifier_event event)
{
	if (umn_event_exclusive(event))
		return UMMUNOTIFY_CAUSE_PROTECTION;
	switch (event) {
	case MMU_NOTIFY_UNMAP:
		return UMMUNOTIFY_CAUSE_UNMAP;
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
		return UMMUNOTIFY_CAUSE_PROTECTION;
	case MMU_NOTIFY_SOFT_DIRTY:
		return UMMUNOTIFY_CAUSE_SOFT_DIRTY;
	case MMU_NOTIFY_MIGRATE:
		return UMMUNOTIFY_CAUSE_MIGRATE;
	case MMU_NOTIFY_RELEASE:
		return UMMUNOTIFY_CAUSE_RELEASE;
	default:
		return UMMUNOTIFY_CAUSE_CLEAR;
	}
}

/*
 * Publish an invalidation of [@start, @end) in @region.  Returns true if
 * something new became readable.  Called with file->lock held.
 *
 * The counter moves for every region hit, not once per invalidation:
 * invalidations running at once in several threads cannot be told apart
 * here, and each thread must see its own move the counter.
 */
static bool umn_publish(struct umn_file *file, struct umn_region *region,
			u64 start, u64 end, unsigned int cause)
{
	struct ummunotify_ring_event event = {
		.start = start,
		.end = end,
		.user_cookie = region->cookie,
		.slot = region->slot,
		.cause = cause,
	};

	WRITE_ONCE(*file->counter, *file->counter + 1);
	if (region->slot != UMMUNOTIFY_NO_SLOT) {
		event.generation = ++file->last_generation;
		/* Pairs with the cache's acquire load of the word. */
		smp_store_release(&file->generations[region->slot],
				  event.generation);
	}
	file->events++;
	this_cpu_inc(umn_stats.events);

	if (!umn_has_ring(file))
		return umn_queue_report(file, region, start, end);
	if (cause == UMMUNOTIFY_CAUSE_RELEASE) {
		/* One event says it all, not one per region. */
		if (file->released)
			return false;
		event = (struct ummunotify_ring_event) {
			.end = TASK_SIZE_MAX,
			.slot = UMMUNOTIFY_NO_SLOT,
			.cause = UMMUNOTIFY_CAUSE_RELEASE,
		};
	}
	return umn_ring_post(file, &event);
}

/*
 * Runs before the pages go away, possibly where sleeping is not allowed
 * (OOM reaper): a spinlock only, no allocation, no user access.
 */
bool umn_invalidate(struct mmu_interval_notifier *notifier,
		    const struct mmu_notifier_range *range,
		    unsigned long cur_seq)
{
	struct umn_region *region = container_of(notifier, struct umn_region,
						 notifier);
	struct umn_file *file = umn_region_file(region);
	unsigned int cause = umn_cause(range->event);
	u64 start = max_t(u64, range->start, umn_region_start(region));
	u64 end = min_t(u64, range->end, umn_region_end(region));
	bool posted = false;

	mmu_interval_set_seq(notifier, cur_seq);
	trace_ummunotify_invalidate(region->cookie, start, end, cause,
				    region->causes & BIT(cause));
	if (!(region->causes & BIT(cause))) {
		atomic64_inc(&file->filtered);
		this_cpu_inc(umn_stats.filtered);
		return true;
	}

	spin_lock(&file->lock);
	/* After exit nobody can read: do not fill the queue for nothing. */
	if (!file->released || cause == UMMUNOTIFY_CAUSE_RELEASE) {
		posted = umn_publish(file, region, start, end, cause);
		if (cause == UMMUNOTIFY_CAUSE_RELEASE)
			file->released = true;
	}
	spin_unlock(&file->lock);

	if (posted)
		umn_wake(file);
	return true;
}

static struct umn_region *umn_find(struct umn_file *file, u64 cookie)
{
	struct rb_node *node = file->cookies.rb_node;

	while (node) {
		struct umn_region *region = rb_entry(node, struct umn_region,
						     cookie_node);

		if (cookie < region->cookie)
			node = node->rb_left;
		else if (cookie > region->cookie)
			node = node->rb_right;
		else
			return region;
	}
	return NULL;
}

/* Returns false if the cookie is already in use. */
static bool umn_insert_cookie(struct umn_file *file, struct umn_region *new)
{
	struct rb_node **link = &file->cookies.rb_node, *parent = NULL;

	while (*link) {
		struct umn_region *region = rb_entry(*link, struct umn_region,
						     cookie_node);

		parent = *link;
		if (new->cookie < region->cookie)
			link = &parent->rb_left;
		else if (new->cookie > region->cookie)
			link = &parent->rb_right;
		else
			return false;
	}
	rb_link_node(&new->cookie_node, parent, link);
	rb_insert_color(&new->cookie_node, &file->cookies);
	return true;
}

/* The range a 2010 registration or a watch asks for, checked. */
static int umn_check_range(u64 start, u64 end)
{
	return start < end && end <= TASK_SIZE ? 0 : -EINVAL;
}

static int umn_watch_range(const struct ummunotify_watch *watch,
			   u64 *start, u64 *end)
{
	if (watch->reserved || watch->flags & ~UMMUNOTIFY_WATCH_ALL ||
	    watch->causes & ~UMN_ALL_CAUSES)
		return -EINVAL;
	if (watch->flags & UMMUNOTIFY_WATCH_ALL) {
		if (watch->start || watch->end)
			return -EINVAL;
		*start = 0;
		*end = TASK_SIZE;
		return 0;
	}
	*start = watch->start;
	*end = watch->end;
	return umn_check_range(*start, *end);
}

/*
 * A region of the kind the file's mode needs.  regions_lock held: the
 * mode changes only in UMMUNOTIFY_SETUP, which a file with regions
 * refuses.
 */
static struct umn_region *umn_alloc_region(struct umn_file *file, u64 cookie,
					   u32 causes)
{
	struct umn_queued_region *queued;
	struct umn_region *region;

	if (umn_has_ring(file)) {
		region = kmem_cache_zalloc(umn_region_cache, GFP_KERNEL);
	} else {
		queued = kmem_cache_zalloc(umn_queued_cache, GFP_KERNEL);
		if (!queued)
			return NULL;
		INIT_LIST_HEAD(&queued->report);
		region = &queued->region;
	}
	if (!region)
		return NULL;
	region->cookie = cookie;
	/* The end of the address space is always news. */
	region->causes = causes | BIT(UMMUNOTIFY_CAUSE_RELEASE);
	region->slot = UMMUNOTIFY_NO_SLOT;
	return region;
}

static void umn_free_region(struct umn_file *file, struct umn_region *region)
{
	if (umn_has_ring(file))
		kmem_cache_free(umn_region_cache, region);
	else
		kmem_cache_free(umn_queued_cache, umn_queued(region));
}

/* Count @region in (@sign 1) or out (-1) of the file's totals. */
void umn_account(struct umn_file *file, struct umn_region *region,
		 int sign)
{
	u64 start = umn_region_start(region), end = umn_region_end(region);
	unsigned long pages = 0;

	if (start || end != TASK_SIZE)
		pages = (PAGE_ALIGN(end) - (start & PAGE_MASK)) >> PAGE_SHIFT;
	WRITE_ONCE(file->watched_pages, file->watched_pages + sign * pages);
	file->nr_regions += sign;
	atomic_long_add(sign, &umn_nr_regions);
}

/* The slot reads 0, never a valid generation, until it is reused. */
static void umn_free_slot(struct umn_file *file, struct umn_region *region)
{
	if (region->slot == UMMUNOTIFY_NO_SLOT)
		return;
	/* Pairs with the cache's acquire load of the word. */
	smp_store_release(&file->generations[region->slot], 0);
	__clear_bit(region->slot, file->slot_map);
}

/* regions_lock held.  The hint makes the usual search one word long. */
static int umn_alloc_slot(struct umn_file *file)
{
	unsigned long slot;

	slot = find_next_zero_bit(file->slot_map, file->nr_slots,
				  file->slot_hint);
	if (slot >= file->nr_slots)
		slot = find_first_zero_bit(file->slot_map, file->nr_slots);
	if (slot >= file->nr_slots)
		return -ENOSPC;
	__set_bit(slot, file->slot_map);
	file->slot_hint = slot + 1;
	return slot;
}

/*
 * Start watching [@start, @end) with @region; regions_lock held.  With
 * generation words, the slot's first generation is in *@generation.
 */
static int umn_add(struct umn_file *file, struct umn_region *region,
		   u64 start, u64 end, u64 *generation)
{
	int ret;

	if (file->nr_regions >= READ_ONCE(max_regions))
		return -ENOSPC;
	if (file->generations) {
		ret = umn_alloc_slot(file);
		if (ret < 0)
			return ret;
		region->slot = ret;
	}
	ret = -EINVAL;
	if (!umn_insert_cookie(file, region))
		goto out_slot;

	if (region->slot != UMMUNOTIFY_NO_SLOT) {
		/* Before the notifier can run: it must not be overwritten. */
		spin_lock(&file->lock);
		*generation = ++file->last_generation;
		/* Pairs with the cache's acquire load of the word. */
		smp_store_release(&file->generations[region->slot],
				  *generation);
		spin_unlock(&file->lock);
	}
	ret = mmu_interval_notifier_insert(&region->notifier, file->mm, start,
					   end - start, &file->notifier_ops);
	if (ret)
		goto out_cookie;
	umn_account(file, region, 1);
	file->used = true;
	/*
	 * An invalidation already running when the notifier went in does
	 * not call it.  Wait for it to finish, so that whatever user space
	 * pins after we return sees the pages as they are after it.
	 */
	mmu_interval_read_begin(&region->notifier);
	return 0;

out_cookie:
	rb_erase(&region->cookie_node, &file->cookies);
out_slot:
	umn_free_slot(file, region);
	return ret;
}

/*
 * Stop @region's notifier, drop its report, free its slot and @region.
 * regions_lock held or the file being released.
 */
void umn_remove(struct umn_file *file, struct umn_region *region)
{
	/* Waits for a running callback: after it, none can touch @region. */
	mmu_interval_notifier_remove(&region->notifier);
	if (!umn_has_ring(file)) {
		spin_lock(&file->lock);
		list_del(&umn_queued(region)->report);
		spin_unlock(&file->lock);
	}
	umn_free_slot(file, region);
	umn_free_region(file, region);
}

/* A watch that was added to the cookie tree, then forgotten. */
static void umn_forget(struct umn_file *file, struct umn_region *region)
{
	rb_erase(&region->cookie_node, &file->cookies);
	umn_account(file, region, -1);
	umn_remove(file, region);
}

int umn_register(struct umn_file *file,
		 struct ummunotify_register_ioctl __user *argp)
{
	struct ummunotify_register_ioctl args;
	struct umn_region *region;
	u64 generation;
	int ret;

	if (copy_from_user(&args, argp, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved ||
	    umn_check_range(args.start, args.end))
		return -EINVAL;

	mutex_lock(&file->regions_lock);
	region = umn_alloc_region(file, args.user_cookie,
				  UMMUNOTIFY_CAUSES_DEFAULT);
	if (!region)
		ret = -ENOMEM;
	else
		ret = umn_add(file, region, args.start, args.end, &generation);
	trace_ummunotify_register(args.user_cookie, args.start, args.end,
				  region ? region->slot : UMMUNOTIFY_NO_SLOT,
				  ret);
	if (ret && region)
		umn_free_region(file, region);
	mutex_unlock(&file->regions_lock);
	return ret;
}

/* WATCH and RESIZE are for files set up with FEATURE_WATCH. */
static bool umn_watching(struct umn_file *file)
{
	return file->set_up && file->features & UMMUNOTIFY_FEATURE_WATCH;
}

/*
 * Read and check a WATCH or RESIZE argument, and fail on an unwritable
 * one now, before anything changes.
 */
static int umn_get_watch(struct ummunotify_watch __user *argp,
			 struct ummunotify_watch *watch, u64 *start, u64 *end)
{
	int ret;

	if (copy_from_user(watch, argp, sizeof(*watch)))
		return -EFAULT;
	ret = umn_watch_range(watch, start, end);
	if (ret)
		return ret;
	return copy_to_user(argp, watch, sizeof(*watch)) ? -EFAULT : 0;
}

int umn_watch(struct umn_file *file,
	      struct ummunotify_watch __user *argp)
{
	struct ummunotify_watch watch;
	struct umn_region *region;
	u64 start, end;
	int ret;

	ret = umn_get_watch(argp, &watch, &start, &end);
	if (ret)
		return ret;

	mutex_lock(&file->regions_lock);
	if (!umn_watching(file)) {
		ret = -EINVAL;
		goto out_unlock;
	}
	region = umn_alloc_region(file, watch.user_cookie,
				  watch.causes ?: UMMUNOTIFY_CAUSES_DEFAULT);
	if (!region) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	ret = umn_add(file, region, start, end, &watch.generation);
	watch.slot = region->slot;
	trace_ummunotify_register(watch.user_cookie, start, end, watch.slot,
				  ret);
	if (!ret && copy_to_user(argp, &watch, sizeof(watch))) {
		umn_forget(file, region);
		ret = -EFAULT;
	} else if (ret) {
		umn_free_region(file, region);
	}
out_unlock:
	mutex_unlock(&file->regions_lock);
	return ret;
}

/*
 * Move a watch to a new range, keeping its cookie, slot and generation.
 * The new notifier goes in before the old one comes out, so the part
 * both ranges cover is never unwatched.
 */
int umn_resize(struct umn_file *file,
	       struct ummunotify_watch __user *argp)
{
	struct umn_region *old, *new;
	struct ummunotify_watch watch;
	u64 start, end;
	int ret;

	ret = umn_get_watch(argp, &watch, &start, &end);
	if (ret)
		return ret;

	mutex_lock(&file->regions_lock);
	old = umn_find(file, watch.user_cookie);
	if (!umn_watching(file) || !old) {
		ret = -EINVAL;
		goto out_unlock;
	}
	new = umn_alloc_region(file, watch.user_cookie, watch.causes);
	if (!new) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	if (!watch.causes)
		new->causes = old->causes;
	new->slot = old->slot;
	watch.slot = old->slot;
	spin_lock(&file->lock);
	watch.generation = new->slot == UMMUNOTIFY_NO_SLOT ? 0 :
			   file->generations[new->slot];
	spin_unlock(&file->lock);

	ret = mmu_interval_notifier_insert(&new->notifier, file->mm, start,
					   end - start, &file->notifier_ops);
	if (ret)
		goto out_free;
	rb_replace_node(&old->cookie_node, &new->cookie_node, &file->cookies);
	umn_account(file, new, 1);
	umn_account(file, old, -1);
	mmu_interval_read_begin(&new->notifier);

	mmu_interval_notifier_remove(&old->notifier);
	if (!umn_has_ring(file))
		umn_move_report(file, umn_queued(old), umn_queued(new));
	umn_free_region(file, old);
	trace_ummunotify_register(watch.user_cookie, start, end, watch.slot,
				  0);
	mutex_unlock(&file->regions_lock);
	return copy_to_user(argp, &watch, sizeof(watch)) ? -EFAULT : 0;

out_free:
	umn_free_region(file, new);
out_unlock:
	mutex_unlock(&file->regions_lock);
	return ret;
}

int umn_unregister(struct umn_file *file, u64 __user *argp)
{
	struct umn_region *region;
	u64 cookie;
	int ret = 0;

	if (get_user(cookie, argp))
		return -EFAULT;

	mutex_lock(&file->regions_lock);
	region = umn_find(file, cookie);
	if (region)
		umn_forget(file, region);
	else
		ret = -EINVAL;
	mutex_unlock(&file->regions_lock);
	trace_ummunotify_unregister(cookie, ret);
	return ret;
}
