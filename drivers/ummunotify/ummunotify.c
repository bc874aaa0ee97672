// SPDX-License-Identifier: GPL-2.0
/*
 * ummunotify: MMU notifications for user-space registration caches.
 *
 * A process opens /dev/ummunotify and watches address ranges it has handed
 * to a device (an RDMA NIC, say).  When the kernel unmaps or replaces the
 * pages behind a watched range, the interval notifier below publishes it
 * into memory the process has mapped, before the unmapping call returns:
 * a counter, the watch's generation word and an event ring (or, for the
 * 2010 ABI, a queue read with read()).  A cache validates an entry with
 * one load.
 *
 * See Documentation/userspace-api/ummunotify.rst.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/bitmap.h>
#include <linux/list_lru.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/poll.h>
#include <linux/rbtree.h>
#include <linux/sched/mm.h>
#include <linux/seq_file.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>

#include <linux/ummunotify.h>

#define CREATE_TRACE_POINTS
#include "trace.h"

static unsigned int max_regions = 1U << 20;
module_param(max_regions, uint, 0644);
MODULE_PARM_DESC(max_regions, "Maximum number of regions registered on one open file (default 1048576)");

static unsigned int pressure_interval_ms = 1000;
module_param(pressure_interval_ms, uint, 0644);
MODULE_PARM_DESC(pressure_interval_ms, "Minimum interval between two pressure events to one file (default 1000)");

#define UMN_SUPPORTED_FEATURES	(UMMUNOTIFY_FEATURE_WATCH | \
				 UMMUNOTIFY_FEATURE_RING | \
				 UMMUNOTIFY_FEATURE_PRESSURE)
#define UMN_ALL_CAUSES		(BIT(UMMUNOTIFY_CAUSE_UNMAP) | \
				 BIT(UMMUNOTIFY_CAUSE_CLEAR) | \
				 BIT(UMMUNOTIFY_CAUSE_PROTECTION) | \
				 BIT(UMMUNOTIFY_CAUSE_SOFT_DIRTY) | \
				 BIT(UMMUNOTIFY_CAUSE_MIGRATE) | \
				 BIT(UMMUNOTIFY_CAUSE_RELEASE))
#define UMN_DEFAULT_SLOTS	4096U
#define UMN_DEFAULT_RING	4096U
#define UMN_MAX_RING		BIT(20)

/* Layout of the first page: the counter stays at 0 for the 2010 ABI. */
#define UMN_OFF_COUNTER		0
#define UMN_OFF_TAIL		64
#define UMN_OFF_DROPPED		72
#define UMN_OFF_RING_MASK	80

/**
 * struct umn_file - one open file: the watches of one address space
 * @mm:			the opener's address space, mmgrab()ed
 * @regions_lock:	serialises setup, changes to @cookies and the
 *			consumption of events; never taken by the notifier
 *			or under mmap_lock
 * @cookies:		regions by cookie
 * @slot_map:		generation slots in use, sized by UMMUNOTIFY_SETUP
 * @slot_hint:		where to look for a free slot first
 * @nr_regions:		number of entries in @cookies
 * @watched_pages:	pages covered by the watches, but for whole-address-
 *			space ones: what a cache has probably pinned
 * @features:		granted UMMUNOTIFY_FEATURE_* bits
 * @set_up:		UMMUNOTIFY_SETUP has run
 * @used:		a region was registered or read() ran: features and
 *			setup can no longer change
 * @lock:		protects what the notifier touches, below
 * @released:		the address space has exited
 * @reports:		2010 ABI: regions with a pending report, oldest first
 * @need_last:		2010 ABI: a report was read and no LAST followed yet
 * @last_generation:	last generation handed out: they never repeat
 * @tail:		ring producer position
 * @lost:		ring events dropped since the last OVERFLOW event
 * @events:		events published (after filtering)
 * @dropped:		ring events dropped, ever
 * @filtered:		invalidations a watch's causes did not ask for
 * @pressure_node:	in umn_pressure_lru, with FEATURE_PRESSURE
 * @pressure_pages:	pages reclaim asked for since the last PRESSURE event
 * @pressure_next:	jiffies before which no PRESSURE event is posted
 * @header_page:	first page of the read-only area: counter, tail...
 * @pages:		the read-only area: @header_page, generations, ring
 * @nr_pages:		number of @pages
 * @head_page:		the one page user space writes: the ring's head
 * @header:		kernel address of @header_page
 * @counter:		the 2010 counter, in @header
 * @area:		kernel mapping of @pages[1..]
 * @generations:	slot generation words, in @area
 * @ring:		ring entries, in @area
 * @head:		consumer position, in @head_page
 * @nr_slots:		number of @generations
 * @ring_mask:		ring entries - 1
 * @wait:		readers and pollers
 * @fasync:		SIGIO subscribers
 * @notifier_ops:	the file's own, so that a region finds its file
 */
struct umn_file {
	struct mm_struct *mm;

	struct mutex regions_lock;	/* not in the notifier, see above */
	struct rb_root cookies;
	unsigned long *slot_map;
	u32 slot_hint;
	unsigned int nr_regions;
	unsigned long watched_pages;
	u32 features;
	bool set_up;
	bool used;

	spinlock_t lock;		/* the notifier's only lock */
	bool released;
	struct list_head reports;
	bool need_last;
	u64 last_generation;
	u64 tail;
	u64 lost;
	u64 events;
	u64 dropped;
	atomic64_t filtered;
	struct list_head pressure_node;
	unsigned long pressure_pages;
	unsigned long pressure_next;

	struct page *header_page;
	struct page **pages;
	unsigned int nr_pages;
	struct page *head_page;
	void *header;
	u64 *counter;
	void *area;
	u64 *generations;
	struct ummunotify_ring_event *ring;
	u64 *head;
	u32 nr_slots;
	u32 ring_mask;

	wait_queue_head_t wait;
	struct fasync_struct *fasync;
	struct mmu_interval_notifier_ops notifier_ops;
};

/**
 * struct umn_region - one registration: 128 bytes, the file found from
 * the notifier's ops (see umn_region_file())
 * @notifier:	interval notifier over the watched range
 * @cookie_node: node in &umn_file.cookies
 * @cookie:	user's cookie, unique within the file
 * @slot:	generation slot, or UMMUNOTIFY_NO_SLOT
 * @causes:	BIT(UMMUNOTIFY_CAUSE_*) to publish
 */
struct umn_region {
	struct mmu_interval_notifier notifier;
	struct rb_node cookie_node;
	u64 cookie;
	u32 slot;
	u16 causes;
};

/**
 * struct umn_queued_region - a registration of a file without a ring,
 * whose reports wait in the 2010 queue
 * @region:	the registration
 * @report:	node in &umn_file.reports while a report is pending,
 *		otherwise empty
 * @hint_start:	start of the part invalidated, valid when @hint
 * @hint_end:	end of the part invalidated, valid when @hint
 * @hint:	the pending report covers one invalidation only
 */
struct umn_queued_region {
	struct umn_region region;
	struct list_head report;
	u64 hint_start;
	u64 hint_end;
	bool hint;
};

/* Module-wide counters, in /sys/class/misc/ummunotify/. */
struct umn_stats {
	u64 events;
	u64 dropped;
	u64 filtered;
};

static DEFINE_PER_CPU(struct umn_stats, umn_stats);
static atomic_long_t umn_nr_files;
static atomic_long_t umn_nr_regions;

/*
 * Files that asked for pressure events, on the list of their memory
 * cgroup, so that reclaim in that cgroup asks them (and only them).
 */
static struct list_lru umn_pressure_lru;
static bool umn_pressure_ready;
static struct kmem_cache *umn_region_cache;
static struct kmem_cache *umn_queued_cache;
static struct kmem_cache *umn_file_cache;

/* Before 6.3 (see Kbuild) */
#ifdef UMN_NEED_VM_FLAGS_MOD
static inline void vm_flags_mod(struct vm_area_struct *vma,
				vm_flags_t set, vm_flags_t clear)
{
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
}
#endif

/* Before 6.8 (see Kbuild) */
#ifndef UMN_HAVE_LIST_LRU_ADD_OBJ
static inline bool list_lru_add_obj(struct list_lru *lru,
				    struct list_head *item)
{
	return list_lru_add(lru, item);
}

static inline bool list_lru_del_obj(struct list_lru *lru,
				    struct list_head *item)
{
	return list_lru_del(lru, item);
}
#endif

static u64 umn_region_start(const struct umn_region *region)
{
	return region->notifier.interval_tree.start;
}

static u64 umn_region_end(const struct umn_region *region)
{
	return region->notifier.interval_tree.last + 1;
}

/*
 * Only the address space that opened the file may see or change its
 * watches: not a forked child, not a process the fd was passed to, not
 * the opener after execve().
 */
static bool umn_is_owner(struct umn_file *file)
{
	return current->mm == file->mm;
}

static bool umn_has_ring(struct umn_file *file)
{
	return file->ring;
}

/* Saves a pointer in every region: 8 of the 128 bytes. */
static struct umn_file *umn_region_file(struct umn_region *region)
{
	return container_of(region->notifier.ops, struct umn_file,
			    notifier_ops);
}

/* Only for files without a ring, whose regions are all queued ones. */
static struct umn_queued_region *umn_queued(struct umn_region *region)
{
	return container_of(region, struct umn_queued_region, region);
}

/*
 * Unknown future events count as CLEAR: assume the pages changed.
 * Device-exclusive access keeps the pages, like a protection change.
 */
static unsigned int umn_cause(enum mmu_notifier_event event)
{
	switch (event) {
	case MMU_NOTIFY_UNMAP:
		return UMMUNOTIFY_CAUSE_UNMAP;
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_EXCLUSIVE:
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

static bool umn_readable(struct umn_file *file)
{
	if (umn_has_ring(file))
		return READ_ONCE(*file->head) != file->tail;
	return !list_empty(&file->reports) || file->need_last;
}

/*
 * Append @event to the ring, preceded by an OVERFLOW event if some were
 * lost since the last one.  Never waits: a full ring drops the event and
 * counts it.  The head is user memory: an impossible value makes the ring
 * look full, which only hurts the process that wrote it.
 */
static bool umn_ring_post(struct umn_file *file,
			  const struct ummunotify_ring_event *event)
{
	u64 entries = (u64)file->ring_mask + 1;
	u64 need = file->lost ? 2 : 1;
	u64 used;

	/* Pairs with the consumer's release: it is done with those entries. */
	used = file->tail - smp_load_acquire(file->head);

	if (used > entries || entries - used < need) {
		file->lost++;
		file->dropped++;
		WRITE_ONCE(*(u64 *)(file->header + UMN_OFF_DROPPED),
			   file->dropped);
		this_cpu_inc(umn_stats.dropped);
		return false;
	}
	if (file->lost) {
		file->ring[file->tail++ & file->ring_mask] =
			(struct ummunotify_ring_event) {
				.cause = UMMUNOTIFY_CAUSE_OVERFLOW,
				.slot = UMMUNOTIFY_NO_SLOT,
				.generation = file->lost,
			};
		file->lost = 0;
	}
	file->ring[file->tail++ & file->ring_mask] = *event;
	/* Pairs with the consumer's acquire of the tail: entries first. */
	smp_store_release((u64 *)(file->header + UMN_OFF_TAIL), file->tail);
	return true;
}

/* 2010 ABI: queue @region's report, or widen the pending one. */
static bool umn_queue_report(struct umn_file *file, struct umn_region *region,
			     u64 start, u64 end)
{
	struct umn_queued_region *queued = umn_queued(region);

	if (!list_empty(&queued->report)) {
		queued->hint = false;
		return false;
	}
	queued->hint = true;
	queued->hint_start = start;
	queued->hint_end = end;
	list_add_tail(&queued->report, &file->reports);
	return true;
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

static void umn_wake(struct umn_file *file)
{
	if (wq_has_sleeper(&file->wait))
		wake_up_interruptible(&file->wait);
	kill_fasync(&file->fasync, SIGIO, POLL_IN);
}

/*
 * Runs before the pages go away, possibly where sleeping is not allowed
 * (OOM reaper): a spinlock only, no allocation, no user access.
 */
static bool umn_invalidate(struct mmu_interval_notifier *notifier,
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

/*
 * Granting changes nothing yet: the file speaks the 2010 ABI until
 * UMMUNOTIFY_SETUP turns the features on.  The 2010 test program passed
 * an uninitialised mask; it must keep working whatever it asked for.
 */
static int umn_exchange_features(struct umn_file *file, u32 __user *argp)
{
	u32 granted;
	int ret = 0;

	if (get_user(granted, argp))
		return -EFAULT;
	granted &= UMN_SUPPORTED_FEATURES;
	/* Pressure advisories are ring events. */
	if (!(granted & UMMUNOTIFY_FEATURE_RING))
		granted &= ~UMMUNOTIFY_FEATURE_PRESSURE;

	mutex_lock(&file->regions_lock);
	if (file->used || file->set_up)
		ret = -EINVAL;
	else if (put_user(granted, argp))
		ret = -EFAULT;
	else
		file->features = granted;
	mutex_unlock(&file->regions_lock);
	return ret;
}

static void umn_free_area(struct umn_file *file)
{
	unsigned int i;

	if (file->area)
		vunmap(file->area);
	/* pages[0] is the header page, which lives as long as the file. */
	for (i = 1; i < file->nr_pages; i++)
		__free_page(file->pages[i]);
	if (file->head_page)
		__free_page(file->head_page);
	if (file->pages != &file->header_page)
		kvfree(file->pages);
	bitmap_free(file->slot_map);
	file->slot_map = NULL;
	file->area = NULL;
	file->head_page = NULL;
	file->pages = &file->header_page;
	file->nr_pages = 1;
}

static int umn_setup(struct umn_file *file,
		     struct ummunotify_params __user *argp)
{
	struct ummunotify_params params;
	size_t gen_bytes, ring_bytes;
	unsigned int i, nr_pages;
	struct page **pages;
	int ret;

	if (copy_from_user(&params, argp, sizeof(params)))
		return -EFAULT;
	if (params.flags || params.reserved ||
	    memchr_inv(params.reserved2, 0, sizeof(params.reserved2)))
		return -EINVAL;

	mutex_lock(&file->regions_lock);
	ret = -EINVAL;
	if (file->used || file->set_up || !file->features)
		goto out_unlock;

	if (file->features & UMMUNOTIFY_FEATURE_WATCH) {
		params.slots = params.slots ?: UMN_DEFAULT_SLOTS;
		if (params.slots > READ_ONCE(max_regions))
			goto out_unlock;
		gen_bytes = PAGE_ALIGN((size_t)params.slots * sizeof(u64));
		params.slots = gen_bytes / sizeof(u64);
	} else {
		if (params.slots)
			goto out_unlock;
		gen_bytes = 0;
	}
	if (file->features & UMMUNOTIFY_FEATURE_RING) {
		params.ring_entries = params.ring_entries ?: UMN_DEFAULT_RING;
		/* Two at least: an OVERFLOW marker and the event after it. */
		if (params.ring_entries < 2 ||
		    params.ring_entries > UMN_MAX_RING ||
		    !is_power_of_2(params.ring_entries))
			goto out_unlock;
		ring_bytes = PAGE_ALIGN((size_t)params.ring_entries *
					sizeof(struct ummunotify_ring_event));
	} else {
		if (params.ring_entries)
			goto out_unlock;
		ring_bytes = 0;
	}

	ret = -ENOMEM;
	nr_pages = 1 + (gen_bytes + ring_bytes) / PAGE_SIZE;
	pages = kvcalloc(nr_pages, sizeof(*pages), GFP_KERNEL_ACCOUNT);
	if (!pages)
		goto out_unlock;
	pages[0] = file->pages[0];
	file->pages = pages;
	file->nr_pages = 1;
	for (i = 1; i < nr_pages; i++, file->nr_pages++) {
		pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!pages[i])
			goto out_free;
	}
	/* With the words, not per watch: a watch costs its 128 bytes only. */
	if (gen_bytes) {
		file->slot_map = bitmap_zalloc(params.slots, GFP_KERNEL_ACCOUNT);
		if (!file->slot_map)
			goto out_free;
	}
	if (ring_bytes) {
		file->head_page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!file->head_page)
			goto out_free;
	}
	file->area = vmap(pages + 1, nr_pages - 1, VM_MAP, PAGE_KERNEL);
	if (!file->area)
		goto out_free;

	params.mmap_size = (u64)nr_pages << PAGE_SHIFT;
	params.head_offset = ring_bytes ? params.mmap_size : 0;
	params.off = (struct ummunotify_offsets) {
		.counter = UMN_OFF_COUNTER,
		.tail = UMN_OFF_TAIL,
		.dropped = UMN_OFF_DROPPED,
		.ring_mask = UMN_OFF_RING_MASK,
		.generations = PAGE_SIZE,
		.events = PAGE_SIZE + gen_bytes,
		.head = 0,
	};
	ret = -EFAULT;
	if (copy_to_user(argp, &params, sizeof(params)))
		goto out_free;

	file->nr_slots = params.slots;
	if (gen_bytes)
		file->generations = file->area;
	spin_lock(&file->lock);
	if (ring_bytes) {
		file->head = page_address(file->head_page);
		file->ring = file->area + gen_bytes;
		file->ring_mask = params.ring_entries - 1;
		*(u32 *)(file->header + UMN_OFF_RING_MASK) = file->ring_mask;
	}
	spin_unlock(&file->lock);
	if (file->features & UMMUNOTIFY_FEATURE_PRESSURE)
		list_lru_add_obj(&umn_pressure_lru, &file->pressure_node);
	/* Pairs with umn_mmap(), which cannot take regions_lock. */
	smp_store_release(&file->set_up, true);
	mutex_unlock(&file->regions_lock);
	return 0;

out_free:
	umn_free_area(file);
out_unlock:
	mutex_unlock(&file->regions_lock);
	return ret;
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
static void umn_account(struct umn_file *file, struct umn_region *region,
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
static void umn_remove(struct umn_file *file, struct umn_region *region)
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

static int umn_register(struct umn_file *file,
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

static int umn_watch(struct umn_file *file,
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

/* The 2010 queue: a resized watch's pending report moves to the new range. */
static void umn_move_report(struct umn_file *file, struct umn_queued_region *old,
			    struct umn_queued_region *new)
{
	spin_lock(&file->lock);
	if (!list_empty(&old->report)) {
		if (list_empty(&new->report)) {
			list_replace_init(&old->report, &new->report);
			new->hint = old->hint;
			new->hint_start = old->hint_start;
			new->hint_end = old->hint_end;
		} else {
			list_del_init(&old->report);
			new->hint = false;
		}
	}
	spin_unlock(&file->lock);
}

/*
 * Move a watch to a new range, keeping its cookie, slot and generation.
 * The new notifier goes in before the old one comes out, so the part
 * both ranges cover is never unwatched.
 */
static int umn_resize(struct umn_file *file,
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

static int umn_unregister(struct umn_file *file, u64 __user *argp)
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

static long umn_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct umn_file *file = filp->private_data;
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case UMMUNOTIFY_EXCHANGE_FEATURES:
	case UMMUNOTIFY_REGISTER_REGION:
	case UMMUNOTIFY_UNREGISTER_REGION:
	case UMMUNOTIFY_WATCH:
	case UMMUNOTIFY_RESIZE:
	case UMMUNOTIFY_SETUP:
		break;
	default:
		return -ENOTTY;
	}
	if (!umn_is_owner(file))
		return -EPERM;

	switch (cmd) {
	case UMMUNOTIFY_EXCHANGE_FEATURES:
		return umn_exchange_features(file, argp);
	case UMMUNOTIFY_REGISTER_REGION:
		return umn_register(file, argp);
	case UMMUNOTIFY_UNREGISTER_REGION:
		return umn_unregister(file, argp);
	case UMMUNOTIFY_WATCH:
		return umn_watch(file, argp);
	case UMMUNOTIFY_RESIZE:
		return umn_resize(file, argp);
	default:
		return umn_setup(file, argp);
	}
}

/*
 * 2010 ABI: fill @event with the oldest pending report, or with LAST once
 * the queue is empty.  Returns the region reported, NULL for LAST, or an
 * error pointer when nothing is pending.
 */
static struct umn_queued_region *umn_peek(struct umn_file *file,
					  struct ummunotify_event *event)
{
	struct umn_queued_region *queued;

	memset(event, 0, sizeof(*event));
	spin_lock(&file->lock);
	queued = list_first_entry_or_null(&file->reports,
					  struct umn_queued_region, report);
	if (queued) {
		event->type = UMMUNOTIFY_EVENT_TYPE_INVAL;
		event->user_cookie_counter = queued->region.cookie;
		if (queued->hint) {
			event->flags = UMMUNOTIFY_EVENT_FLAG_HINT;
			event->hint_start = queued->hint_start;
			event->hint_end = queued->hint_end;
		} else {
			event->hint_start = umn_region_start(&queued->region);
			event->hint_end = umn_region_end(&queued->region);
		}
	} else if (file->need_last) {
		event->type = UMMUNOTIFY_EVENT_TYPE_LAST;
		event->user_cookie_counter = *file->counter;
	} else {
		queued = ERR_PTR(-EAGAIN);
	}
	spin_unlock(&file->lock);
	return queued;
}

/* @event, peeked for @queued (NULL: LAST), reached user space. */
static void umn_consume(struct umn_file *file,
			struct umn_queued_region *queued,
			const struct ummunotify_event *event)
{
	spin_lock(&file->lock);
	if (!queued) {
		file->need_last = false;
	} else if (!(event->flags & UMMUNOTIFY_EVENT_FLAG_HINT) ||
		   queued->hint) {
		list_del_init(&queued->report);
		file->need_last = true;
	}
	/* Else hit again since the peek: keep it, now for the whole range. */
	spin_unlock(&file->lock);
}

/*
 * 2010 ABI.  Each event is copied out before it is dequeued, so that a
 * bad buffer loses nothing; regions_lock keeps the peeked region alive.
 */
static ssize_t umn_read_reports(struct umn_file *file, char __user *buf,
				size_t count)
{
	struct umn_queued_region *queued;
	struct ummunotify_event event;
	size_t done = 0;

	while (count - done >= sizeof(event)) {
		queued = umn_peek(file, &event);
		if (IS_ERR(queued))
			break;
		if (copy_to_user(buf + done, &event, sizeof(event)))
			return done ?: -EFAULT;
		umn_consume(file, queued, &event);
		done += sizeof(event);
	}
	return done;
}

/* The ring, for event loops that prefer read() to the shared head. */
static ssize_t umn_read_ring(struct umn_file *file, char __user *buf,
			     size_t count)
{
	const size_t size = sizeof(struct ummunotify_ring_event);
	u64 head = READ_ONCE(*file->head);
	size_t done = 0;
	u64 tail;

	/* Pairs with umn_ring_post(): the entries are complete. */
	tail = smp_load_acquire((u64 *)(file->header + UMN_OFF_TAIL));

	/* A head user space corrupted restarts at the oldest entry. */
	if (tail - head > (u64)file->ring_mask + 1)
		head = tail - min_t(u64, tail, (u64)file->ring_mask + 1);
	for (; head != tail && count - done >= size; head++, done += size)
		if (copy_to_user(buf + done,
				 &file->ring[head & file->ring_mask], size))
			break;
	/* Pairs with umn_ring_post(): the entries were read first. */
	smp_store_release(file->head, head);
	return done ?: -EFAULT;
}

static bool umn_has_events(struct umn_file *file)
{
	bool readable;

	spin_lock(&file->lock);
	readable = umn_readable(file);
	spin_unlock(&file->lock);
	return readable;
}

static ssize_t umn_read(struct file *filp, char __user *buf, size_t count,
			loff_t *pos)
{
	struct umn_file *file = filp->private_data;
	ssize_t ret;

	if (!umn_is_owner(file))
		return -EPERM;

	mutex_lock(&file->regions_lock);
	for (;;) {
		if (count < (umn_has_ring(file) ?
			     sizeof(struct ummunotify_ring_event) :
			     sizeof(struct ummunotify_event))) {
			mutex_unlock(&file->regions_lock);
			return -EINVAL;
		}
		file->used = true;
		if (umn_has_events(file))
			break;
		mutex_unlock(&file->regions_lock);
		if (filp->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(file->wait,
					       umn_has_events(file));
		if (ret)
			return ret;
		mutex_lock(&file->regions_lock);
	}

	if (umn_has_ring(file))
		ret = umn_read_ring(file, buf, count);
	else
		ret = umn_read_reports(file, buf, count);
	mutex_unlock(&file->regions_lock);
	return ret;
}

static __poll_t umn_poll(struct file *filp, poll_table *wait)
{
	struct umn_file *file = filp->private_data;

	if (!umn_is_owner(file))
		return EPOLLERR;

	poll_wait(filp, &file->wait, wait);
	return umn_has_events(file) ? EPOLLIN | EPOLLRDNORM : 0;
}

static int umn_fasync(int fd, struct file *filp, int on)
{
	struct umn_file *file = filp->private_data;

	/* Anyone may turn it off: the last close does, from any process. */
	if (on && !umn_is_owner(file))
		return -EPERM;
	return fasync_helper(fd, filp, on, &file->fasync);
}

/*
 * Offset 0: the read-only area (before UMMUNOTIFY_SETUP, just the counter
 * page of the 2010 ABI).  Offset head_offset: the ring's head, writable.
 */
static int umn_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct umn_file *file = filp->private_data;
	unsigned long pages = vma_pages(vma);

	if (vma->vm_mm != file->mm)
		return -EPERM;
	/* MAP_SHARED: VM_SHARED itself is cleared on a read-only file. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;

	/* Pairs with umn_setup(): the layout is complete once set_up is. */
	if (!smp_load_acquire(&file->set_up)) {
		if (vma->vm_pgoff || pages > 1)
			return -EINVAL;
	} else if (file->head_page && vma->vm_pgoff == file->nr_pages) {
		if (pages > 1)
			return -EINVAL;
		vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, 0);
		return vm_insert_page(vma, vma->vm_start, file->head_page);
	} else if (vma->vm_pgoff || pages > file->nr_pages) {
		return -EINVAL;
	}

	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYWRITE);
	return vm_map_pages_zero(vma, file->pages, pages);
}

static void umn_show_fdinfo(struct seq_file *m, struct file *filp)
{
	struct umn_file *file = filp->private_data;

	spin_lock(&file->lock);
	seq_printf(m, "features:\t%#x\n", READ_ONCE(file->features));
	seq_printf(m, "regions:\t%u\n", READ_ONCE(file->nr_regions));
	seq_printf(m, "slots:\t%u\n", file->nr_slots);
	seq_printf(m, "ring_entries:\t%u\n",
		   file->ring ? file->ring_mask + 1 : 0);
	seq_printf(m, "counter:\t%llu\n", *file->counter);
	seq_printf(m, "events:\t%llu\n", file->events);
	seq_printf(m, "dropped:\t%llu\n", file->dropped);
	seq_printf(m, "filtered:\t%lld\n", atomic64_read(&file->filtered));
	seq_printf(m, "released:\t%d\n", file->released);
	spin_unlock(&file->lock);
}

/*
 * Memory pressure.  The files of a memory cgroup that asked for pressure
 * events make one cache whose objects are the pages they watch: reclaim
 * in that cgroup asks it for a share of them, as it asks every cache, in
 * proportion to its size and to how hard reclaim is trying.  Nothing here
 * can free those pages; each file is told, at most once per
 * pressure_interval_ms, how many bytes reclaim asked of it since the last
 * time, and only the application knows which registrations to drop.
 */
struct umn_pressure_walk {
	unsigned long watched;	/* pages watched by the cgroup's files */
	unsigned long asked;	/* pages reclaim asks for */
};

static enum lru_status umn_pressure_count_one(struct list_head *item,
					      struct list_lru_one *list,
					      spinlock_t *lock, void *arg)
{
	struct umn_file *file = container_of(item, struct umn_file,
					     pressure_node);
	struct umn_pressure_walk *walk = arg;

	walk->watched += READ_ONCE(file->watched_pages);
	return LRU_SKIP;
}

static enum lru_status umn_pressure_ask_one(struct list_head *item,
					    struct list_lru_one *list,
					    spinlock_t *lock, void *arg)
{
	struct umn_file *file = container_of(item, struct umn_file,
					     pressure_node);
	unsigned long watched = READ_ONCE(file->watched_pages);
	struct umn_pressure_walk *walk = arg;
	struct ummunotify_ring_event event = {
		.slot = UMMUNOTIFY_NO_SLOT,
		.cause = UMMUNOTIFY_CAUSE_PRESSURE,
	};
	bool posted = false;

	if (!walk->watched)
		return LRU_SKIP;
	spin_lock(&file->lock);
	file->pressure_pages = min(file->pressure_pages +
				   mult_frac(walk->asked, watched,
					     walk->watched), watched);
	if (file->pressure_pages && !file->released &&
	    time_after_eq(jiffies, file->pressure_next)) {
		event.generation = (u64)file->pressure_pages << PAGE_SHIFT;
		posted = umn_ring_post(file, &event);
	}
	if (posted) {
		file->pressure_pages = 0;
		file->pressure_next = jiffies +
			msecs_to_jiffies(READ_ONCE(pressure_interval_ms));
	}
	spin_unlock(&file->lock);
	if (posted)
		umn_wake(file);
	return LRU_SKIP;
}

/* Not NUMA aware: the cgroup's files may sit on any node. */
static void umn_pressure_walk(struct mem_cgroup *memcg, list_lru_walk_cb cb,
			      struct umn_pressure_walk *walk)
{
	unsigned long nr;
	int nid;

	for_each_node_state(nid, N_NORMAL_MEMORY) {
		nr = ULONG_MAX;
		list_lru_walk_one(&umn_pressure_lru, nid, memcg, cb, walk, &nr);
	}
}

static unsigned long umn_pressure_count(struct shrinker *shrinker,
					struct shrink_control *sc)
{
	struct umn_pressure_walk walk = {};

	/* Before 6.7 the list can only be set up after registration. */
	if (!smp_load_acquire(&umn_pressure_ready))
		return 0;
	umn_pressure_walk(sc->memcg, umn_pressure_count_one, &walk);
	return walk.watched;
}

static unsigned long umn_pressure_scan(struct shrinker *shrinker,
				       struct shrink_control *sc)
{
	struct umn_pressure_walk walk = { .asked = sc->nr_to_scan };

	umn_pressure_walk(sc->memcg, umn_pressure_count_one, &walk);
	umn_pressure_walk(sc->memcg, umn_pressure_ask_one, &walk);
	/* Freed nothing, but asked: reclaim need not defer the work. */
	return 0;
}

/* 6.7 replaced register_shrinker() with shrinker_alloc() (see Kbuild). */
#ifdef UMN_HAVE_SHRINKER_ALLOC
static struct shrinker *umn_shrinker;

static int umn_pressure_init(void)
{
	int ret;

	umn_shrinker = shrinker_alloc(SHRINKER_MEMCG_AWARE, "ummunotify");
	if (!umn_shrinker)
		return -ENOMEM;
	umn_shrinker->count_objects = umn_pressure_count;
	umn_shrinker->scan_objects = umn_pressure_scan;
	ret = list_lru_init_memcg(&umn_pressure_lru, umn_shrinker);
	if (ret) {
		shrinker_free(umn_shrinker);
		return ret;
	}
	/* Pairs with umn_pressure_count(): the list is ready. */
	smp_store_release(&umn_pressure_ready, true);
	shrinker_register(umn_shrinker);
	return 0;
}

static void umn_pressure_exit(void)
{
	shrinker_free(umn_shrinker);
	list_lru_destroy(&umn_pressure_lru);
}
#else
static struct shrinker umn_shrinker = {
	.count_objects	= umn_pressure_count,
	.scan_objects	= umn_pressure_scan,
	.seeks		= DEFAULT_SEEKS,
	.flags		= SHRINKER_MEMCG_AWARE,
};

static int umn_pressure_init(void)
{
	int ret;

	ret = register_shrinker(&umn_shrinker, "ummunotify");
	if (ret)
		return ret;
	/* The list takes the shrinker's id, known once it is registered. */
	ret = list_lru_init_memcg(&umn_pressure_lru, &umn_shrinker);
	if (ret) {
		unregister_shrinker(&umn_shrinker);
		return ret;
	}
	/* Pairs with umn_pressure_count(): the list is ready. */
	smp_store_release(&umn_pressure_ready, true);
	return 0;
}

static void umn_pressure_exit(void)
{
	unregister_shrinker(&umn_shrinker);
	list_lru_destroy(&umn_pressure_lru);
}

#endif

static int umn_open(struct inode *inode, struct file *filp)
{
	struct umn_file *file;

	/* Kernel threads have no address space to watch. */
	if (!current->mm)
		return -EINVAL;

	/* Sets up the cgroup's pressure list, should the file want it. */
	file = kmem_cache_alloc_lru(umn_file_cache, &umn_pressure_lru,
				    GFP_KERNEL | __GFP_ZERO);
	if (!file)
		return -ENOMEM;
	file->header_page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!file->header_page) {
		kmem_cache_free(umn_file_cache, file);
		return -ENOMEM;
	}
	file->pages = &file->header_page;
	file->nr_pages = 1;
	file->header = page_address(file->header_page);
	file->counter = file->header + UMN_OFF_COUNTER;

	/*
	 * Hold the mm_struct only, not the address space: an open file
	 * must not keep the memory of an exited process alive.
	 */
	mmgrab(current->mm);
	file->mm = current->mm;
	mutex_init(&file->regions_lock);
	file->cookies = RB_ROOT;
	spin_lock_init(&file->lock);
	INIT_LIST_HEAD(&file->reports);
	INIT_LIST_HEAD(&file->pressure_node);
	init_waitqueue_head(&file->wait);
	file->notifier_ops.invalidate = umn_invalidate;
	atomic_long_inc(&umn_nr_files);

	filp->private_data = file;
	return nonseekable_open(inode, filp);
}

static int umn_release(struct inode *inode, struct file *filp)
{
	struct umn_file *file = filp->private_data;
	struct umn_region *region, *next;

	/*
	 * Nothing else holds the file, but the owner's other threads can
	 * still be running the notifier until each region is removed.
	 */
	rbtree_postorder_for_each_entry_safe(region, next, &file->cookies,
					     cookie_node) {
		umn_account(file, region, -1);
		umn_remove(file, region);
		cond_resched();
	}
	list_lru_del_obj(&umn_pressure_lru, &file->pressure_node);
	umn_free_area(file);
	__free_page(file->header_page);
	mmdrop(file->mm);
	kmem_cache_free(umn_file_cache, file);
	atomic_long_dec(&umn_nr_files);
	return 0;
}

static const struct file_operations umn_fops = {
	.owner		= THIS_MODULE,
	.open		= umn_open,
	.release	= umn_release,
	.read		= umn_read,
	.poll		= umn_poll,
	.fasync		= umn_fasync,
	.mmap		= umn_mmap,
	.unlocked_ioctl	= umn_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.show_fdinfo	= umn_show_fdinfo,
};

static u64 umn_stats_sum(size_t offset)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *(u64 *)((void *)per_cpu_ptr(&umn_stats, cpu) + offset);
	return sum;
}

static ssize_t umn_stat_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr,
						    struct dev_ext_attribute,
						    attr);

	return sysfs_emit(buf, "%llu\n", umn_stats_sum((size_t)ea->var));
}

static struct dev_ext_attribute dev_attr_events = {
	__ATTR(events, 0444, umn_stat_show, NULL),
	(void *)offsetof(struct umn_stats, events)
};

static struct dev_ext_attribute dev_attr_dropped = {
	__ATTR(dropped, 0444, umn_stat_show, NULL),
	(void *)offsetof(struct umn_stats, dropped)
};

static struct dev_ext_attribute dev_attr_filtered = {
	__ATTR(filtered, 0444, umn_stat_show, NULL),
	(void *)offsetof(struct umn_stats, filtered)
};

static ssize_t files_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&umn_nr_files));
}
static DEVICE_ATTR_RO(files);

static ssize_t regions_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&umn_nr_regions));
}
static DEVICE_ATTR_RO(regions);

static struct attribute *umn_attrs[] = {
	&dev_attr_files.attr,
	&dev_attr_regions.attr,
	&dev_attr_events.attr.attr,
	&dev_attr_dropped.attr.attr,
	&dev_attr_filtered.attr.attr,
	NULL
};
ATTRIBUTE_GROUPS(umn);

static struct miscdevice umn_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "ummunotify",
	.fops	= &umn_fops,
	.mode	= 0666,
	.groups	= umn_groups,
};

static int __init umn_init(void)
{
	int ret;

	umn_region_cache = KMEM_CACHE(umn_region, SLAB_ACCOUNT);
	umn_queued_cache = KMEM_CACHE(umn_queued_region, SLAB_ACCOUNT);
	umn_file_cache = KMEM_CACHE(umn_file, SLAB_ACCOUNT);
	ret = -ENOMEM;
	if (!umn_region_cache || !umn_queued_cache || !umn_file_cache)
		goto out_cache;
	ret = umn_pressure_init();
	if (ret)
		goto out_cache;
	ret = misc_register(&umn_misc);
	if (ret)
		goto out_pressure;
	return 0;

out_pressure:
	umn_pressure_exit();
out_cache:
	kmem_cache_destroy(umn_file_cache);
	kmem_cache_destroy(umn_queued_cache);
	kmem_cache_destroy(umn_region_cache);
	return ret;
}

static void __exit umn_exit(void)
{
	misc_deregister(&umn_misc);
	umn_pressure_exit();
	kmem_cache_destroy(umn_file_cache);
	kmem_cache_destroy(umn_queued_cache);
	kmem_cache_destroy(umn_region_cache);
}

module_init(umn_init);
module_exit(umn_exit);

MODULE_DESCRIPTION("User-space notification of MMU invalidations");
MODULE_AUTHOR("The ummunotify developers");
MODULE_LICENSE("GPL");
