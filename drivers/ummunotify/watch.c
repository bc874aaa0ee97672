// SPDX-License-Identifier: GPL-2.0
/*
 * Watches: a cookie, a slot and a place in the address space's notifier
 * (watch_all.c) each, and what that notifier publishes of a change,
 * before the change is made.
 */

#include <linux/bitmap.h>
#include <linux/err.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "umn.h"
#include "trace.h"

/* What a watch costs, as the documentation says. */
static_assert(sizeof(struct umn_region) <= 96);

/*
 * Unknown future events count as CLEAR: assume the pages changed (Kbuild
 * warns of any event not named here).  Device-exclusive access keeps the
 * pages, like a protection change.
 */
unsigned int umn_cause(enum mmu_notifier_event event)
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
	case MMU_NOTIFY_CLEAR:
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

	lockdep_assert_held(&file->lock);

	/* A whole-address-space watch's ring says it all; not the queue. */
	umn_count_event(file, !region->all || !umn_has_ring(file));
	if (region->slot != UMMUNOTIFY_NO_SLOT) {
		event.generation = ++file->last_generation;
		/*
		 * Pairs with user space's load-acquire of the word: the start
		 * callback's count in in_flight shows with it.
		 */
		smp_store_release(&file->generations[region->slot],
				  event.generation);
	}

	if (!umn_has_ring(file))
		return umn_queue_report(file, region, start, end);
	if (cause == UMMUNOTIFY_CAUSE_RELEASE) {
		/* One event says it all, not one per region. */
		if (file->released)
			return false;
		file->released = true;
		event = (struct ummunotify_ring_event) {
			.end = file->task_size,
			.slot = UMMUNOTIFY_NO_SLOT,
			.cause = UMMUNOTIFY_CAUSE_RELEASE,
		};
	}
	return umn_ring_post(file, &event);
}

/*
 * @region saw an invalidation of [@start, @end) (clipped to it) for
 * @cause: publish it unless @region does not report @cause, is dead, or
 * the address space has gone (nobody can read: do not fill the queue for
 * nothing).  Returns true if something new became readable.  file->lock
 * held.
 */
bool umn_report(struct umn_file *file, struct umn_region *region,
		u64 start, u64 end, unsigned int cause)
{
	bool wanted = region->causes & BIT(cause);
	bool posted = false;

	lockdep_assert_held(&file->lock);

	trace_ummunotify_invalidate(region->cookie, start, end, cause, wanted);
	if (!wanted) {
		atomic64_inc(&file->filtered);
		this_cpu_inc(umn_stats.filtered);
	} else if (!region->dead &&
		   (!file->released || cause == UMMUNOTIFY_CAUSE_RELEASE)) {
		posted = umn_publish(file, region, start, end, cause);
	}
	return posted;
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
static __always_inline int umn_check_range(struct umn_file *file, u64 start,
					   u64 end)
{
	return start < end && end <= file->task_size ? 0 : -EINVAL;
}

/* Set up once, a file stays so: no lock needed to tell. */
static bool umn_set_up(struct umn_file *file)
{
	/* Pairs with smp_store_release() in umn_try_setup(). */
	return smp_load_acquire(&file->set_up);
}

/* Arithmetic only: it runs with user access open (umn_get_watches()). */
static __always_inline int umn_watch_range(struct umn_file *file,
					   const struct ummunotify_watch *watch,
					   u64 *start, u64 *end)
{
	if (watch->reserved || watch->flags & ~UMMUNOTIFY_WATCH_ALL ||
	    watch->causes & ~UMN_ALL_CAUSES)
		return -EINVAL;
	if (watch->flags & UMMUNOTIFY_WATCH_ALL) {
		if (watch->start || watch->end)
			return -EINVAL;
		*start = 0;
		*end = file->task_size;
		return 0;
	}
	/* As the mm system calls take them (arm64's top-byte tags). */
	*start = untagged_addr(watch->start);
	*end = untagged_addr(watch->end);
	return umn_check_range(file, *start, *end);
}

/*
 * A region of the kind the file's mode needs, all of it set: the one the
 * last unwatch left (a cache evicting for a miss unwatches one region and
 * watches another: neither pays the allocator), else a new one, charged
 * to the caller's memory cgroup.  regions_lock held: the mode changes
 * only in UMMUNOTIFY_SETUP, which a file that ever had a region refuses,
 * so the spare is of the kind wanted.  Inline, as the other small steps
 * of a watch and an unwatch: a call costs about what they do.
 */
static __always_inline struct umn_region *
umn_alloc_region(struct umn_file *file, u64 cookie, u32 causes, bool all)
{
	struct umn_region *region = xchg(&file->spare, NULL);
	struct umn_queued_region *queued;

	lockdep_assert_held(&file->regions_lock);

	if (umn_has_ring(file)) {
		if (!region)
			region = kmem_cache_alloc(umn_region_cache, GFP_KERNEL);
		if (!region)
			return NULL;
	} else {
		queued = region ? umn_queued(region) :
			 kmem_cache_alloc(umn_queued_cache, GFP_KERNEL);
		if (!queued)
			return NULL;
		*queued = (struct umn_queued_region) { };
		INIT_LIST_HEAD(&queued->report);
		region = &queued->region;
	}
	*region = (struct umn_region) {
		.file = file,
		.cookie = cookie,
		/* The end of the address space is always news. */
		.causes = causes | BIT(UMMUNOTIFY_CAUSE_RELEASE),
		.slot = UMMUNOTIFY_NO_SLOT,
		.all = all,
	};
	/* Until umn_range_insert() puts it in the notifier's tree. */
	RB_CLEAR_NODE(&region->range.rb);
	return region;
}

static void umn_destroy_region(struct umn_file *file,
			       struct umn_region *region)
{
	if (umn_has_ring(file))
		kmem_cache_free(umn_region_cache, region);
	else
		kmem_cache_free(umn_queued_cache, umn_queued(region));
}

/* @region is out of the notifier: it becomes the spare, the spare goes. */
static void umn_free_region(struct umn_file *file, struct umn_region *region)
{
	region = xchg(&file->spare, region);
	if (region)
		umn_destroy_region(file, region);
}

/*
 * Count @region's pages in (@sign 1) or out (-1) of what the file
 * watches.  Inline: see umn_alloc_region().
 */
static __always_inline void umn_account_pages(struct umn_file *file,
					      struct umn_region *region,
					      int sign)
{
	u64 start = umn_region_start(region);
	u64 end = umn_region_end(file, region);
	unsigned long pages = 0;

	if (!region->all)
		pages = (PAGE_ALIGN(end) - (start & PAGE_MASK)) >> PAGE_SHIFT;
	atomic_long_add(sign * pages, &file->watched_pages);
}

/*
 * regions_lock held.  The hint (the slot after the last one taken, or
 * the last one freed) makes the usual search one word long, a full
 * table's too.  Slots are freed without the lock (umn_free_slot()): the
 * bit operations are atomic, and a slot freed during the search is found
 * next time.
 */
static int umn_alloc_slot(struct umn_file *file)
{
	unsigned long *map = file->area.slot_map;
	unsigned long slot = READ_ONCE(file->slot_hint);

	lockdep_assert_held(&file->regions_lock);

	do {
		slot = find_next_zero_bit(map, file->nr_slots, slot);
		if (slot >= file->nr_slots)
			slot = find_first_zero_bit(map, file->nr_slots);
		if (slot >= file->nr_slots)
			return -ENOSPC;
	} while (test_and_set_bit(slot, map));
	WRITE_ONCE(file->slot_hint, slot + 1);
	return slot;
}

/*
 * The slot reads 0, never a valid generation, until it is reused.
 * @region is out of the notifier: it cannot write the word again.
 * Inline: see umn_alloc_region().
 */
static __always_inline void umn_free_slot(struct umn_file *file,
					  struct umn_region *region)
{
	if (region->slot == UMMUNOTIFY_NO_SLOT)
		return;
	/* Release, as every store of a word; 0 never matches. */
	smp_store_release(&file->generations[region->slot], 0);
	/*
	 * Pairs with test_and_set_bit() in umn_alloc_slot(): the 0 lands
	 * before the slot's next generation.
	 */
	smp_mb__before_atomic();
	clear_bit(region->slot, file->area.slot_map);
	/* Only a hint: a race with umn_alloc_slot() costs a search. */
	WRITE_ONCE(file->slot_hint, region->slot);
}

/*
 * Make a pending watch of @cookie: charged, with its slot and first
 * generation (in *@generation), its cookie taken and, a range watch of
 * [@start, @end), started: in the notifier's tree, after its first
 * generation, so that what it sees from then on moves its word past it.
 * regions_lock held; for a range watch, the file has joined the notifier.
 */
static struct umn_region *umn_reserve(struct umn_file *file, u64 cookie,
				      u32 causes, bool all, u64 start,
				      u64 end, u64 *generation)
{
	struct umn_region *region;
	int ret;

	lockdep_assert_held(&file->regions_lock);
	region = umn_alloc_region(file, cookie, causes, all);
	if (!region)
		return ERR_PTR(-ENOMEM);
	ret = umn_charge_watch(file);
	if (ret)
		goto out_free;
	if (file->generations) {
		ret = umn_alloc_slot(file);
		if (ret < 0)
			goto out_uncharge;
		region->slot = ret;
	}
	ret = -EINVAL;
	if (!umn_insert_cookie(file, region))
		goto out_slot;
	if (region->slot != UMMUNOTIFY_NO_SLOT) {
		/* Under the notifier's lock: generations never repeat. */
		spin_lock(&file->lock);
		*generation = ++file->last_generation;
		/* Release, as every store of a word (see umn_publish()). */
		smp_store_release(&file->generations[region->slot],
				  *generation);
		spin_unlock(&file->lock);
	}
	if (!all) {
		ret = umn_range_insert(file, region, start, end, NULL);
		/*
		 * A 2010 client may not look at REGISTER's result (Open MPI
		 * 1.5-2.0 does not): it gets a registration that nothing
		 * watches, reported changed at once (see umn_register()),
		 * rather than one it would keep, believing it watched.
		 */
		if (ret == -ENOSPC && !file->set_up)
			ret = 0;
		if (ret)
			goto out_cookie;
	}
	region->pending = true;
	file->used = true;
	return region;

out_cookie:
	rb_erase(&region->cookie_node, &file->cookies);
out_slot:
	umn_free_slot(file, region);
out_uncharge:
	umn_uncharge_watch(file);
out_free:
	/*
	 * Not the spare: before the file's first watch, a SETUP meanwhile
	 * could change the kind of region the file needs.
	 */
	umn_destroy_region(file, region);
	return ERR_PTR(ret);
}

/*
 * Start @region, a whole-address-space watch (a range watch started in
 * umn_reserve()), in the notifier's files: the file joined the notifier
 * before it was made.  Never waits for invalidations: those in flight,
 * which did not see @region, are published to it at once, so that
 * whatever user space pinned is found changed when it checks.
 */
static int umn_start(struct umn_file *file, struct umn_region *region)
{
	return region->all ? umn_all_start(file, region) : 0;
}

/*
 * Silence @region: whatever its notifier sees from now on is not
 * published, and its pending report goes.
 */
static void umn_silence(struct umn_file *file, struct umn_region *region)
{
	spin_lock(&file->lock);
	region->dead = true;
	if (!umn_has_ring(file))
		list_del_init(&umn_queued(region)->report);
	spin_unlock(&file->lock);
}

/*
 * Take @region out of the cookie tree and the counts, and silence it.
 * regions_lock held.
 */
static void umn_unlink(struct umn_file *file, struct umn_region *region)
{
	lockdep_assert_held(&file->regions_lock);

	rb_erase(&region->cookie_node, &file->cookies);
	umn_uncharge_watch(file);
	if (!region->pending)
		umn_account_pages(file, region, -1);
	umn_silence(file, region);
}

/*
 * Take @region out of the notifier (@started, for a whole-address-space
 * watch; a range watch is in it once in its tree).  Waits for no
 * invalidation: at most for one callback to let go of the notifier's
 * lock.  After it no callback can touch @region.
 */
static void umn_stop(struct umn_file *file, struct umn_region *region,
		     bool started)
{
	if (started && region->all)
		umn_all_remove(file, region);
	else if (umn_in_tree(region))
		umn_range_remove(file, &region, 1);
}

/* Stop an unlinked @region, free its slot and @region. */
static void umn_destroy(struct umn_file *file, struct umn_region *region,
			bool started)
{
	umn_stop(file, region, started);
	umn_free_slot(file, region);
	umn_free_region(file, region);
}

/*
 * The end of a WATCH or REGISTER: the pending watch becomes one (@ret 0),
 * or goes.
 */
static void umn_finish(struct umn_file *file, struct umn_region *region,
		       int ret, bool started)
{
	if (!ret) {
		umn_account_pages(file, region, 1);
		/*
		 * Pairs with smp_load_acquire() in umn_find_watch(), which
		 * may run meanwhile: once false shows, so do the start
		 * (file->all_mm) and the page count.
		 */
		smp_store_release(&region->pending, false);
		return;
	}
	mutex_lock(&file->regions_lock);
	umn_unlink(file, region);
	mutex_unlock(&file->regions_lock);
	umn_destroy(file, region, started);
}

/* Range watches a teardown takes out of the notifier at once. */
#define UMN_REMOVE_BATCH	32

/*
 * Stop and free @batch[0..@n), started range watches of a going file: the
 * owner's other threads can still be in the notifier.
 */
static void umn_remove_batch(struct umn_file *file,
			     struct umn_region **batch, unsigned int n)
{
	unsigned int i;

	umn_range_remove(file, batch, n);
	for (i = 0; i < n; i++)
		umn_free_region(file, batch[i]);
	cond_resched();
}

/* The file is going: nothing else can use it. */
void umn_remove_all(struct umn_file *file)
{
	struct umn_region *batch[UMN_REMOVE_BATCH];
	struct umn_region *region, *next;
	unsigned int n = 0;

	/* Postorder: a region is freed only once the walk has passed it. */
	rbtree_postorder_for_each_entry_safe(region, next, &file->cookies,
					     cookie_node) {
		umn_uncharge_watch(file);
		/* It may be in the notifier a while yet: silent meanwhile. */
		umn_silence(file, region);
		if (umn_in_tree(region)) {
			batch[n++] = region;
			if (n == UMN_REMOVE_BATCH) {
				umn_remove_batch(file, batch, n);
				n = 0;
			}
			continue;
		}
		umn_stop(file, region, true);
		umn_free_region(file, region);
		cond_resched();
	}
	umn_remove_batch(file, batch, n);
	if (file->spare)
		umn_destroy_region(file, file->spare);
	file->spare = NULL;
	file->cookies = RB_ROOT;
	umn_mm_leave(file);
}

/* A registration nothing watches: changed, as far as its owner knows. */
static void umn_report_now(struct umn_file *file, struct umn_region *region)
{
	bool posted;

	spin_lock(&file->lock);
	posted = umn_report(file, region, umn_region_start(region),
			    umn_region_end(file, region),
			    UMMUNOTIFY_CAUSE_UNMAP);
	spin_unlock(&file->lock);
	if (posted)
		umn_wake(file);
}

/*
 * 2010 ABI.  A file that speaks it ignores flags and reserved as the 2010
 * kernel did: Open MPI 1.5-2.0 leaves flags uninitialised.
 */
int umn_register(struct umn_file *file,
		 struct ummunotify_register_ioctl __user *argp)
{
	struct ummunotify_register_ioctl args;
	u32 slot = UMMUNOTIFY_NO_SLOT;
	struct umn_region *region;
	u64 generation;
	bool legacy;
	int ret;

	if (copy_from_user(&args, argp, sizeof(args)))
		return -EFAULT;
	/* As umn_watch_range() takes them; reports give them untagged. */
	args.start = untagged_addr(args.start);
	args.end = untagged_addr(args.end);
	ret = umn_check_range(file, args.start, args.end);
	/* Refused below too, should a SETUP come meanwhile. */
	if (!ret && (args.flags || args.reserved) && umn_set_up(file))
		ret = -EINVAL;
	/*
	 * It goes in the notifier's tree when made: join the notifier
	 * first, where a signal changes nothing.
	 */
	if (!ret)
		ret = umn_mm_join(file);

	mutex_lock(&file->regions_lock);
	legacy = !file->set_up;
	if (!ret && !legacy && (args.flags || args.reserved))
		ret = -EINVAL;
	region = ret ? ERR_PTR(ret) :
		 umn_reserve(file, args.user_cookie,
			     UMMUNOTIFY_CAUSES_DEFAULT, false, args.start,
			     args.end, &generation);
	if (!IS_ERR(region))
		slot = region->slot;
	if (!IS_ERR(region) && !umn_in_tree(region)) {
		/*
		 * Its pages are under max_overlap watches (see umn_reserve()):
		 * made and reported at once, under the lock, so that no
		 * UNREGISTER finds it pending or frees it first.
		 */
		umn_finish(file, region, 0, false);
		umn_report_now(file, region);
		region = NULL;
	}
	mutex_unlock(&file->regions_lock);
	if (IS_ERR(region))
		ret = PTR_ERR(region);
	else if (region)
		umn_finish(file, region, 0, true);
	/*
	 * Refused for a limit, for memory or for a signal, not for its
	 * arguments.  A signal's -ERESTARTSYS reaches a handler without
	 * SA_RESTART as EINTR, which a client ignoring the result must not
	 * take for a watch; a restarted call costs one report too many.
	 */
	if (legacy && ret && ret != -EINVAL) {
		mutex_lock(&file->regions_lock);
		if (!file->set_up)
			umn_report_refusal(file, args.start, args.end);
		mutex_unlock(&file->regions_lock);
	}
	trace_ummunotify_register(args.user_cookie, args.start, args.end,
				  slot, ret);
	return ret;
}

/*
 * Whether the file was set up to watch (WATCH and RESIZE need it): for
 * good once so, for EXCHANGE_FEATURES is refused after SETUP.  Needs no
 * lock.
 */
static bool umn_watching(struct umn_file *file)
{
	return umn_set_up(file) && file->features & UMMUNOTIFY_FEATURE_WATCH;
}

/* A watch's range, checked (umn_watch_range()). */
struct umn_range {
	u64 start, end;
};

/*
 * Read @n watches at @argp into @watches and check them, their ranges
 * in @ranges; with @probe, then write their result fields back as they
 * are, to tell whether the results can be written before anything
 * changes.  One access to user memory for all (opening and closing it
 * costs a fence each), and no write for an argument refused: -EFAULT for
 * any of it unreadable first, then -EINVAL for the first watch refused,
 * then -EFAULT for a result that cannot be written.
 */
static int umn_get_watches(struct umn_file *file,
			   struct ummunotify_watch __user *argp, u32 n,
			   bool probe, struct ummunotify_watch *watches,
			   struct umn_range *ranges)
{
	struct ummunotify_watch *w;
	int ret = 0;
	u32 i;

	if (!n)
		return 0;
	might_fault();
	if (!user_access_begin(argp, (size_t)n * sizeof(*argp)))
		return -EFAULT;
	for (i = 0, w = watches; i < n; i++, w++) {
		unsafe_get_user(w->start, &argp[i].start, efault);
		unsafe_get_user(w->end, &argp[i].end, efault);
		unsafe_get_user(w->user_cookie, &argp[i].user_cookie, efault);
		unsafe_get_user(w->causes, &argp[i].causes, efault);
		unsafe_get_user(w->flags, &argp[i].flags, efault);
		unsafe_get_user(w->generation, &argp[i].generation, efault);
		unsafe_get_user(w->slot, &argp[i].slot, efault);
		unsafe_get_user(w->reserved, &argp[i].reserved, efault);
	}
	for (i = 0; !ret && i < n; i++)
		ret = umn_watch_range(file, &watches[i], &ranges[i].start,
				      &ranges[i].end);
	for (i = 0, w = watches; !ret && probe && i < n; i++, w++) {
		unsafe_put_user(w->generation, &argp[i].generation, efault);
		unsafe_put_user(w->slot, &argp[i].slot, efault);
	}
	user_access_end();
	return ret;
efault:
	user_access_end();
	return -EFAULT;
}

/*
 * Make a watch of [@start, @end) as @watch asks, its slot and generation
 * written back there, in a file set up to watch (umn_watching()).  It
 * stays pending (see umn_finish()) until the caller has handed the
 * result back.
 */
static struct umn_region *umn_make(struct umn_file *file,
				   struct ummunotify_watch *watch,
				   u64 start, u64 end)
{
	bool all = watch->flags & UMMUNOTIFY_WATCH_ALL;
	struct umn_region *region;
	int ret;

	/*
	 * A range watch goes in the notifier's tree when made, a
	 * whole-address-space one in its files: join the notifier first,
	 * where a signal changes nothing.
	 */
	ret = umn_mm_join(file);
	if (ret)
		return ERR_PTR(ret);
	mutex_lock(&file->regions_lock);
	region = umn_reserve(file, watch->user_cookie,
			     watch->causes ?: UMMUNOTIFY_CAUSES_DEFAULT, all,
			     start, end, &watch->generation);
	mutex_unlock(&file->regions_lock);
	if (IS_ERR(region))
		return region;
	watch->slot = region->slot;
	ret = umn_start(file, region);
	if (ret) {
		umn_finish(file, region, ret, false);
		return ERR_PTR(ret);
	}
	return region;
}

/* Only what WATCH fills in goes back: generation and slot. */
static int umn_put_result(struct ummunotify_watch __user *argp,
			  const struct ummunotify_watch *watch)
{
	if (!user_write_access_begin(&argp->generation,
				     offsetofend(struct ummunotify_watch, slot) -
				     offsetof(struct ummunotify_watch,
					      generation)))
		return -EFAULT;
	unsafe_put_user(watch->generation, &argp->generation, efault);
	unsafe_put_user(watch->slot, &argp->slot, efault);
	user_write_access_end();
	return 0;
efault:
	user_write_access_end();
	return -EFAULT;
}

int umn_watch(struct umn_file *file, struct ummunotify_watch __user *argp)
{
	struct ummunotify_watch watch;
	struct umn_region *region;
	struct umn_range range;
	bool watching = umn_watching(file);
	int ret;

	/*
	 * Fail on an unwritable result now, before anything changes; a
	 * file that cannot watch is refused without a write.
	 */
	ret = umn_get_watches(file, argp, 1, watching, &watch, &range);
	if (ret)
		return ret;
	if (!watching)
		return -EINVAL;
	watch.slot = UMMUNOTIFY_NO_SLOT;
	region = umn_make(file, &watch, range.start, range.end);
	ret = PTR_ERR_OR_ZERO(region);
	if (!ret) {
		if (umn_put_result(argp, &watch))
			ret = -EFAULT;
		umn_finish(file, region, ret, true);
	}
	trace_ummunotify_register(watch.user_cookie, range.start, range.end,
				  watch.slot, ret);
	return ret;
}

/*
 * Find the watch of @cookie for UNREGISTER or RESIZE: EINVAL if there is
 * none, EBUSY while the WATCH, WATCHV or REGISTER that makes it runs.
 */
static struct umn_region *umn_find_watch(struct umn_file *file, u64 cookie)
{
	struct umn_region *region = umn_find(file, cookie);

	if (!region)
		return ERR_PTR(-EINVAL);
	/* Pairs with smp_store_release() in umn_finish(): started, counted. */
	return smp_load_acquire(&region->pending) ? ERR_PTR(-EBUSY) : region;
}

/*
 * Move a watch to a new range, keeping its cookie, slot and generation.
 * The new range goes in before the old one comes out, so the part both
 * ranges cover is never unwatched.
 */
int umn_resize(struct umn_file *file, struct ummunotify_watch __user *argp)
{
	struct umn_region *old, *new;
	struct ummunotify_watch watch;
	struct umn_range range;
	int ret;

	ret = umn_get_watches(file, argp, 1, false, &watch, &range);
	if (ret)
		return ret;
	/*
	 * A file that cannot watch has nothing to move; a whole-address-
	 * space watch is one of its own, never moved.
	 */
	if (!umn_watching(file) || watch.flags & UMMUNOTIFY_WATCH_ALL)
		return -EINVAL;
	/* The result goes back after the change: fail on it now. */
	if (copy_to_user(argp, &watch, sizeof(watch)))
		return -EFAULT;

	mutex_lock(&file->regions_lock);
	old = umn_find_watch(file, watch.user_cookie);
	if (!IS_ERR(old) && old->all)
		old = ERR_PTR(-EINVAL);
	new = IS_ERR(old) ? old :
	      umn_alloc_region(file, watch.user_cookie,
			       watch.causes ?: old->causes, false);
	if (!new)
		new = ERR_PTR(-ENOMEM);
	if (!IS_ERR(new)) {
		/*
		 * The generation it goes back with is the slot's before the
		 * new range goes in: an invalidation in flight there moves
		 * the word past it.  The file joined with @old's first watch.
		 */
		new->slot = old->slot;
		spin_lock(&file->lock);
		watch.generation = new->slot == UMMUNOTIFY_NO_SLOT ? 0 :
				   file->generations[new->slot];
		spin_unlock(&file->lock);
		ret = umn_range_insert(file, new, range.start, range.end, old);
		if (ret) {
			umn_free_region(file, new);
			new = ERR_PTR(ret);
		}
	}
	if (!IS_ERR(new)) {
		watch.slot = old->slot;
		rb_replace_node(&old->cookie_node, &new->cookie_node,
				&file->cookies);
		umn_account_pages(file, new, 1);
		umn_account_pages(file, old, -1);
		spin_lock(&file->lock);
		/* The slot is the new watch's now. */
		old->dead = true;
		old->slot = UMMUNOTIFY_NO_SLOT;
		if (!umn_has_ring(file))
			umn_move_report(umn_queued(old), umn_queued(new));
		spin_unlock(&file->lock);
	}
	mutex_unlock(&file->regions_lock);
	if (IS_ERR(new))
		return PTR_ERR(new);
	umn_destroy(file, old, true);
	trace_ummunotify_register(watch.user_cookie, range.start, range.end,
				  watch.slot,
				  0);
	return copy_to_user(argp, &watch, sizeof(watch)) ? -EFAULT : 0;
}

int umn_unregister(struct umn_file *file, u64 __user *argp)
{
	struct umn_region *region;
	u64 cookie;
	int ret;

	if (get_user(cookie, argp))
		return -EFAULT;

	mutex_lock(&file->regions_lock);
	region = umn_find_watch(file, cookie);
	if (!IS_ERR(region))
		umn_unlink(file, region);
	mutex_unlock(&file->regions_lock);
	ret = PTR_ERR_OR_ZERO(region);
	if (!ret)
		umn_destroy(file, region, true);
	trace_ummunotify_unregister(cookie, ret);
	return ret;
}

/*
 * Would a watch of @cookie fail for its cookie, once @regions[0..@n) are
 * unwatched?  (In use by another watch, or the same as @watches[0..@i).)
 * regions_lock held.
 */
static bool umn_cookie_taken(struct umn_file *file, u64 cookie,
			     struct umn_region **regions, u32 n,
			     const struct ummunotify_watch *watches, u32 i)
{
	struct umn_region *region = umn_find(file, cookie);
	u32 j;

	lockdep_assert_held(&file->regions_lock);
	for (j = 0; region && j < n; j++)
		if (regions[j] == region)
			region = NULL;
	for (j = 0; !region && j < i; j++)
		if (watches[j].user_cookie == cookie)
			return true;
	return region;
}

/*
 * Unregister the watches of @cookies, all or none, for a WATCHV whose
 * @watches come next: an unknown cookie (EINVAL), one given twice
 * (EINVAL), one whose WATCH runs (EBUSY) or a watch cookie that would
 * be taken (EINVAL) change nothing.
 */
static int umn_unwatch_all(struct umn_file *file, const u64 *cookies, u32 n,
			   struct umn_region **regions,
			   const struct ummunotify_watch *watches, u32 nr_watch)
{
	int ret = 0;
	u32 i, j;

	mutex_lock(&file->regions_lock);
	for (i = 0; !ret && i < n; i++) {
		regions[i] = umn_find_watch(file, cookies[i]);
		if (IS_ERR(regions[i])) {
			ret = PTR_ERR(regions[i]);
			/* Pending because an earlier cookie was the same. */
			for (j = 0; ret == -EBUSY && j < i; j++)
				if (cookies[j] == cookies[i])
					ret = -EINVAL;
			break;
		}
		/* Ours now: a second cookie the same finds it busy. */
		regions[i]->pending = true;
	}
	for (j = 0; !ret && j < nr_watch; j++)
		if (umn_cookie_taken(file, watches[j].user_cookie, regions, n,
				     watches, j))
			ret = -EINVAL;
	for (j = 0; j < i; j++) {
		regions[j]->pending = false;
		if (!ret)
			umn_unlink(file, regions[j]);
	}
	mutex_unlock(&file->regions_lock);
	for (j = 0; !ret && j < n; j++) {
		trace_ummunotify_unregister(cookies[j], 0);
		umn_destroy(file, regions[j], true);
	}
	return ret;
}

/*
 * The arrays of a UMMUNOTIFY_WATCHV, copied in, and the watches' ranges:
 * one allocation, none for a small batch (a watch and a few unwatches).
 * The stack buffer is small because the kernel zeroes a frame on entry
 * (INIT_STACK_ALL_ZERO).
 */
struct umn_batch {
	u64 *cookies;
	struct ummunotify_watch *watches;
	struct umn_range *ranges;
	struct umn_region **regions;
	void *allocated;
	u64 small[16];
};

static int umn_batch_alloc(struct umn_batch *batch, u32 nr_unwatch,
			   u32 nr_watch)
{
	u32 n = max(nr_unwatch, nr_watch);
	size_t size = (size_t)nr_unwatch * sizeof(*batch->cookies) +
		      (size_t)nr_watch * (sizeof(*batch->watches) +
					  sizeof(*batch->ranges)) +
		      (size_t)n * sizeof(*batch->regions);
	void *mem = batch->small;

	/* Every element a multiple of 8 bytes: each array stays aligned. */
	BUILD_BUG_ON(sizeof(*batch->watches) % 8 || sizeof(*batch->ranges) % 8);
	batch->allocated = NULL;
	if (size > sizeof(batch->small)) {
		mem = kvmalloc(size, GFP_KERNEL_ACCOUNT);
		if (!mem)
			return -ENOMEM;
		batch->allocated = mem;
	}
	batch->cookies = mem;
	batch->watches = (void *)(batch->cookies + nr_unwatch);
	batch->ranges = (void *)(batch->watches + nr_watch);
	batch->regions = (void *)(batch->ranges + nr_watch);
	return 0;
}

/*
 * Read @n cookies at @argp into @cookies in one access to user memory:
 * for the usual one or few, cheaper than copy_from_user()'s string copy.
 */
static int umn_get_cookies(const u64 __user *argp, u32 n, u64 *cookies)
{
	u32 i;

	if (!n)
		return 0;
	might_fault();
	if (!user_access_begin(argp, (size_t)n * sizeof(*argp)))
		return -EFAULT;
	for (i = 0; i < n; i++)
		unsafe_get_user(cookies[i], &argp[i], efault);
	user_access_end();
	return 0;
efault:
	user_access_end();
	return -EFAULT;
}

/*
 * Copy in what @v (its counts checked) points at, and fail on anything
 * wrong now, before anything changes: the watches' arguments are
 * checked, and, with unwatches in a file that is @watching, where the
 * results go is tried (results that cannot be written undo the watches,
 * not the unwatches).
 */
static int umn_batch_get(struct umn_file *file,
			 const struct ummunotify_watchv *v, bool watching,
			 struct umn_batch *batch)
{
	int ret;

	ret = umn_batch_alloc(batch, v->nr_unwatch, v->nr_watch);
	if (ret)
		return ret;
	ret = umn_get_cookies(u64_to_user_ptr(v->unwatch), v->nr_unwatch,
			      batch->cookies);
	if (ret)
		return ret;
	return umn_get_watches(file, u64_to_user_ptr(v->watch), v->nr_watch,
			       v->nr_unwatch && watching, batch->watches,
			       batch->ranges);
}

/*
 * Read a WATCHV argument and check it, then write its done as nr_watch,
 * what it reads when all goes well: a count that cannot be written fails
 * before anything changes, and a call that makes every watch writes the
 * argument no more.  One access to user memory for both, and no write
 * for an argument refused.
 */
static int umn_read_watchv(struct ummunotify_watchv __user *argp,
			   struct ummunotify_watchv *v)
{
	might_fault();
	if (!user_access_begin(argp, sizeof(*argp)))
		return -EFAULT;
	unsafe_get_user(v->unwatch, &argp->unwatch, efault);
	unsafe_get_user(v->watch, &argp->watch, efault);
	unsafe_get_user(v->nr_unwatch, &argp->nr_unwatch, efault);
	unsafe_get_user(v->nr_watch, &argp->nr_watch, efault);
	unsafe_get_user(v->done, &argp->done, efault);
	unsafe_get_user(v->flags, &argp->flags, efault);
	if (v->flags || v->done || v->nr_unwatch > UMN_WATCHV_MAX ||
	    v->nr_watch > UMN_WATCHV_MAX) {
		user_access_end();
		return -EINVAL;
	}
	unsafe_put_user(v->nr_watch, &argp->done, efault);
	user_access_end();
	return 0;
efault:
	user_access_end();
	return -EFAULT;
}

/* Whether the batch has whole-address-space watches. */
static bool umn_batch_all(const struct umn_batch *batch, u32 nr_watch)
{
	u32 i;

	for (i = 0; i < nr_watch; i++)
		if (batch->watches[i].flags & UMMUNOTIFY_WATCH_ALL)
			return true;
	return false;
}

/*
 * UMMUNOTIFY_WATCHV: the unwatches, then the watches, in one call.  The
 * first watch that fails stops the rest: done says how many were made,
 * and the call returns that watch's error.
 */
int umn_watchv(struct umn_file *file, struct ummunotify_watchv __user *argp)
{
	struct ummunotify_watch __user *results;
	struct umn_batch batch;
	struct ummunotify_watchv v;
	struct ummunotify_watch *w;
	bool watching = umn_watching(file);
	bool faulted = false, unwatched = false, held;
	u32 i, made = 0;
	int ret;

	ret = umn_read_watchv(argp, &v);
	if (ret)
		return ret;
	results = u64_to_user_ptr(v.watch);
	ret = umn_batch_get(file, &v, watching, &batch);
	if (!ret && !watching)
		ret = -EINVAL;
	/*
	 * Joining the address space's notifier can take a signal: do it
	 * while nothing changed, so that the call starts again unseen.
	 * After it a watch of the batch waits only for another's
	 * max_overlap walk, which only a fatal signal ends.
	 */
	if (!ret && v.nr_watch)
		ret = umn_mm_join(file);
	held = !ret && umn_batch_all(&batch, v.nr_watch);
	if (held) {
		ret = umn_all_hold(file);
		held = !ret;
	}
	if (!ret) {
		ret = umn_unwatch_all(file, batch.cookies, v.nr_unwatch,
				      batch.regions, batch.watches,
				      v.nr_watch);
		unwatched = !ret && v.nr_unwatch;
	}
	for (i = 0; !ret && i < v.nr_watch; i++) {
		w = &batch.watches[i];
		w->slot = UMMUNOTIFY_NO_SLOT;
		batch.regions[i] = umn_make(file, w, batch.ranges[i].start,
					    batch.ranges[i].end);
		ret = PTR_ERR_OR_ZERO(batch.regions[i]);
		made += !ret;
		trace_ummunotify_register(w->user_cookie, batch.ranges[i].start,
					  batch.ranges[i].end, w->slot, ret);
		/* Up to 1024 watches: a fatal signal ends the batch. */
		if (!ret && i + 1 < v.nr_watch && fatal_signal_pending(current))
			ret = -EINTR;
		cond_resched();
	}
	if (held)
		umn_all_unhold(file);
	/*
	 * Hand the results back; should that fault, no watch stays (the
	 * unwatches do).  done reads nr_watch (umn_read_watchv()) unless
	 * fewer watches stay: then it is written again, and if it cannot
	 * be, the call fails with EFAULT, the watches made undone.
	 */
	for (i = 0; i < made && !faulted; i++)
		faulted = umn_put_result(&results[i], &batch.watches[i]);
	if ((faulted || made < v.nr_watch) &&
	    put_user(faulted ? 0 : made, &argp->done))
		faulted = true;
	for (i = 0; i < made; i++)
		umn_finish(file, batch.regions[i], faulted ? -EFAULT : 0, true);
	if (faulted)
		ret = -EFAULT;
	/*
	 * The notifier was joined before anything changed, so no watch
	 * should take a signal after; should one, a restart would find the
	 * cookies gone.
	 */
	if (ret == -ERESTARTSYS && (unwatched || made))
		ret = -EINTR;
	/* The usual batch, a watch and a few unwatches, is on the stack. */
	if (batch.allocated)
		kvfree(batch.allocated);
	return ret;
}
