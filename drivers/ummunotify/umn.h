/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ummunotify internals, shared by the files of the driver:
 *
 *   device.c	the misc device: open, release, ioctl, read (to ring.c
 *		or legacy.c), poll, fasync, fdinfo, sysfs, module init
 *   watch.c	watches, their cookies and slots
 *   watch_all.c the address space's mmu_notifier: its tree of range
 *		watches (no page under too many), its whole-address-space
 *		watches, its record of the invalidations in flight
 *   ring.c	the shared area (SETUP, mmap) and the event ring, read()
 *   legacy.c	the 2010 ABI's queue of reports, read()
 *   pressure.c	memory-pressure advisories from a shrinker
 *   limits.c	what one file and one user may hold
 *   space.c	what the files of one address space share: its
 *		notifier, how many of them want pressure events
 *
 * Locking, outermost first:
 *
 *   regions_lock	per file: setup, the cookie tree, slots, reading
 *			events.  Never held across a fault (user memory is
 *			copied with copy_to_user_nofault() and faulted in
 *			after unlocking), nor across the first join of the
 *			address space's notifier (mmap_lock,
 *			mm_take_all_locks()).  Never taken under mmap_lock
 *			(->mmap) nor by the notifier.
 *   umn_space.join_lock per address space: registering its notifier,
 *			which takes mmap_lock and mm_take_all_locks(); not
 *			under regions_lock
 *   all_lock		per file: joining the notifier's WATCH_ALL files
 *   umn_all_mm.ranges_lock per address space: changing its range watches'
 *			tree, and keeping it still for the max_overlap
 *			check, which may sleep; under regions_lock
 *   list_lru lock	the pressure list of a memory cgroup (pressure.c)
 *   umn_all_mm.lock	per address space spinlock: its range watches by
 *			address, its WATCH_ALL files, its invalidations in
 *			flight; held by its notifier's callbacks for all
 *			they do (watch_all.c)
 *   lock		per file spinlock, the notifier's only other lock:
 *			what invalidations publish.  Nothing sleeps under
 *			either.
 *
 * Nothing of the module waits for the address space's invalidations to
 * end: a watch made while one overlapping it is in flight is reported
 * changed at once, and a watch is removed, and freed, once it is out of
 * the tree under umn_all_mm.lock (see watch_all.c).
 */
#ifndef _UMMUNOTIFY_UMN_H
#define _UMMUNOTIFY_UMN_H

#include <linux/interval_tree.h>
#include <linux/list.h>
#include <linux/llist.h>
#include <linux/list_lru.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rbtree.h>
#include <linux/sched/signal.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include <linux/ummunotify.h>

#include <asm/barrier.h>

#include "compat.h"

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
#define UMN_WATCHV_MAX		UMMUNOTIFY_WATCHV_MAX

/* Layout of the first page: the counter stays at 0 for the 2010 ABI. */
#define UMN_OFF_COUNTER		0
#define UMN_OFF_TAIL		64
#define UMN_OFF_DROPPED		72
#define UMN_OFF_RING_MASK	80
/* Written by every CPU that invalidates: a cache line of its own. */
#define UMN_OFF_IN_FLIGHT	128

/**
 * struct umn_area - what UMMUNOTIFY_SETUP adds to the shared memory
 * @pages:	the read-only area: the header page, generations, ring
 * @nr_pages:	number of @pages
 * @head_page:	the one page user space writes: the ring's head
 * @vaddr:	kernel mapping of @pages[1..]
 * @slot_map:	generation slots in use
 */
struct umn_area {
	struct page **pages;
	unsigned int nr_pages;
	struct page *head_page;
	void *vaddr;
	unsigned long *slot_map;
};

/**
 * struct umn_file - one open file: the watches of one address space
 * @mm:			the opener's address space, mmgrab()ed
 * @opener:		the opener's thread group
 * @opener_exec:	its self_exec_id at open: the exit of the program that
 *			opened the file tears down at once (see umn_release())
 * @task_size:		the opener's TASK_SIZE: where its address space ends
 * @user:		the opener's user, charged for the file's memory
 * @space:		what the files of @mm share
 * @regions_lock:	setup, the cookie tree, slots, consuming events
 *			(see the top of this file)
 * @cookies:		regions by cookie
 * @slot_hint:		where to look for a free slot first; set without a
 *			lock when one is freed
 * @spare:		a region freed once the file had watched, kept for
 *			the next watch; exchanged, never under a lock
 * @nr_regions:		number of entries in @cookies
 * @watched_pages:	pages covered by the watches, but for whole-address-
 *			space ones
 * @features:		granted UMMUNOTIFY_FEATURE_* bits
 * @set_up:		UMMUNOTIFY_SETUP has run: @area is complete
 * @used:		a region was registered (or refused, see
 *			umn_report_refusal()) or read() ran: features and
 *			setup can no longer change
 * @lock:		protects what the notifier touches, below
 * @released:		the address space has exited
 * @reports:		2010 ABI: regions with a pending report, oldest first
 * @need_last:		2010 ABI: a report was read and no LAST followed yet
 * @refusals:		2010 ABI: REGISTERs failed for a limit or for memory
 * @refusals_read:	@refusals when their report was last read; while they
 *			differ, the report covers [@refused_start,
 *			@refused_end)
 * @last_generation:	last generation handed out: they never repeat
 * @tail:		ring producer position
 * @lost:		ring events dropped since the last OVERFLOW event
 * @events:		events published (after filtering)
 * @dropped:		ring events dropped, ever
 * @filtered:		invalidations a watch's causes did not ask for
 * @pressure_node:	in umn_pressure_lru, with FEATURE_PRESSURE
 * @pressure_bytes:	bytes reclaim asked for since the last PRESSURE event
 * @pressure_next:	jiffies before which no PRESSURE event is posted
 * @header_page:	first page of the read-only area: counter, tail...
 * @area:		the rest of the shared memory, after SETUP
 * @header:		kernel address of @header_page
 * @counter:		the 2010 counter, in @header
 * @generations:	slot generation words, in @area
 * @ring:		ring entries, in @area
 * @head:		consumer position, in @area.head_page
 * @nr_slots:		number of @generations
 * @ring_mask:		ring entries - 1
 * @wait:		readers and pollers
 * @fasync:		SIGIO subscribers
 * @sigio_work:		sends SIGIO outside the notifier, which must not
 *			allocate the signal's queue entry nor walk a
 *			process group
 * @teardown_node:	in its topmost user's teardowns, once another process
 *			closed it last
 * @all_lock:		serialises joining @all_mm and its files, @nr_all
 *			and @all_holds
 * @all_mm:		the address space's notifier, from the file's first
 *			watch to its teardown (@space holds it); set with
 *			release
 * @all_file_node:	in the files of @all_mm while the file has
 *			whole-address-space watches or holds; under its lock
 * @all_joined:		@all_file_node is linked; under @all_lock
 * @nr_all:		whole-address-space watches
 * @all_holds:		WATCHVs keeping the file joined meanwhile
 * @all_regions:	whole-address-space watches; under @lock
 * @in_flight:		invalidations started and not ended, while the
 *			file is joined to @all_mm (0 otherwise); in @header
 */
struct umn_file {
	struct mm_struct *mm;
	struct pid *opener;
	u64 opener_exec;
	unsigned long task_size;
	struct umn_user *user;
	struct umn_space *space;

	struct mutex regions_lock;	/* not in the notifier, see above */
	struct rb_root cookies;
	u32 slot_hint;
	struct umn_region *spare;
	unsigned int nr_regions;
	atomic_long_t watched_pages;
	u32 features;
	bool set_up;
	bool used;

	spinlock_t lock;		/* the notifier's only lock */
	bool released;
	struct list_head reports;
	bool need_last;
	u64 refusals;
	u64 refusals_read;
	u64 refused_start;
	u64 refused_end;
	u64 last_generation;
	u64 tail;
	u64 lost;
	u64 events;
	u64 dropped;
	atomic64_t filtered;
	struct list_head pressure_node;
	u64 pressure_bytes;
	unsigned long pressure_next;

	struct page *header_page;
	struct umn_area area;
	void *header;
	u64 *counter;
	u64 *generations;
	struct ummunotify_ring_event *ring;
	u64 *head;
	u32 nr_slots;
	u32 ring_mask;

	wait_queue_head_t wait;
	struct fasync_struct *fasync;
	struct work_struct sigio_work;
	struct llist_node teardown_node;

	struct mutex all_lock;		/* joining all_mm */
	struct umn_all_mm *all_mm;
	struct list_head all_file_node;
	bool all_joined;
	unsigned int nr_all;
	unsigned int all_holds;
	struct list_head all_regions;
	atomic64_t *in_flight;
};

/**
 * struct umn_region - one registration: 96 bytes
 * @range:	range watch: the watched range [start, last], in the
 *		address space's notifier's tree from the time it has its
 *		first generation until it is stopped (watch_all.c)
 * @all_node:	whole-address-space watch: in &umn_file.all_regions
 *		instead
 * @file:	the file it is of, for the notifier
 * @cookie_node: node in &umn_file.cookies
 * @cookie:	user's cookie, unique within the file
 * @slot:	generation slot, or UMMUNOTIFY_NO_SLOT
 * @causes:	BIT(UMMUNOTIFY_CAUSE_*) to publish
 * @pending:	a WATCH or RESIZE of it has not returned yet: no other
 *		ioctl may change it; set under regions_lock, cleared by
 *		umn_finish() without it (by RESIZE and WATCHV under it)
 * @dead:	unregistered, not out of the notifier's tree yet: it
 *		publishes nothing more; under &umn_file.lock
 * @all:	a whole-address-space watch
 */
struct umn_region {
	union {
		struct interval_tree_node range;
		struct list_head all_node;
	};
	struct umn_file *file;
/* Every cause a watch can ask for fits in umn_region.causes. */
static_assert(UMMUNOTIFY_CAUSE_PRESSURE < 8);

	struct rb_node cookie_node;
	u64 cookie;
	u32 slot;
	u8 causes;
	bool pending;
	bool dead;
	bool all;
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

/* 2010 ABI: refused REGISTERs wait to be reported.  file->lock held. */
static inline bool umn_refusals_pending(const struct umn_file *file)
{
	lockdep_assert_held(&file->lock);
	return file->refusals != file->refusals_read;
}

static inline u64 umn_region_start(const struct umn_region *region)
{
	return region->all ? 0 : region->range.start;
}

static inline u64 umn_region_end(const struct umn_file *file,
				 const struct umn_region *region)
{
	return region->all ? file->task_size :
	       region->range.last + 1;
}

/*
 * Only the address space that opened the file may see or change its
 * watches: not a forked child, not a process the fd was passed to, not
 * the opener after execve().
 */
static inline bool umn_is_owner(struct umn_file *file)
{
	return current->mm == file->mm;
}

/* A range watch in the address space's notifier's tree (watch_all.c). */
static inline bool umn_in_tree(const struct umn_region *region)
{
	/*
	 * Other files' changes to the tree rewrite the node's parent, but
	 * only its owner moves it in or out: the answer stands.
	 */
	return !region->all && !data_race(RB_EMPTY_NODE(&region->range.rb));
}

static inline bool umn_has_ring(struct umn_file *file)
{
	return file->ring;
}

/*
 * A copy made without faulting, under regions_lock, failed at @uaddr:
 * fault @size bytes in there, for the caller to try again (0).  -EFAULT
 * where they cannot be; -ERESTARTSYS on any signal, for another thread
 * unmapping them as fast as they are faulted in could keep the caller
 * trying for as long as it runs.  The callers changed nothing yet.
 */
static inline int umn_fault_in(void __user *uaddr, size_t size)
{
	if (fault_in_writeable(uaddr, size))
		return -EFAULT;
	return signal_pending(current) ? -ERESTARTSYS : 0;
}

/* Only for files without a ring, whose regions are all queued ones. */
static inline struct umn_queued_region *umn_queued(struct umn_region *region)
{
	return container_of(region, struct umn_queued_region, region);
}

extern unsigned int max_regions;

DECLARE_PER_CPU(struct umn_stats, umn_stats);
extern atomic_long_t umn_nr_regions;
extern struct list_lru umn_pressure_lru;
extern struct kmem_cache *umn_region_cache;
extern struct kmem_cache *umn_queued_cache;

/*
 * One more event of @file; its 2010 counter moves too if @counted.
 * file->lock held.
 */
static inline void umn_count_event(struct umn_file *file, bool counted)
{
	lockdep_assert_held(&file->lock);

	/* No release: the reports it counts are read() under this lock. */
	if (counted)
		WRITE_ONCE(*file->counter, *file->counter + 1);
	file->events++;
	this_cpu_inc(umn_stats.events);
}

/* device.c */
void umn_wake(struct umn_file *file);
void umn_teardown(struct umn_file *file);

/* watch.c */
unsigned int umn_cause(enum mmu_notifier_event event);
bool umn_report(struct umn_file *file, struct umn_region *region,
		u64 start, u64 end, unsigned int cause);
int umn_register(struct umn_file *file,
		 struct ummunotify_register_ioctl __user *argp);
int umn_watch(struct umn_file *file, struct ummunotify_watch __user *argp);
int umn_watchv(struct umn_file *file, struct ummunotify_watchv __user *argp);
int umn_resize(struct umn_file *file, struct ummunotify_watch __user *argp);
int umn_unregister(struct umn_file *file, u64 __user *argp);
void umn_remove_all(struct umn_file *file);

/* watch_all.c */
void umn_all_init(struct umn_file *file);
struct umn_all_mm *umn_all_get(struct mm_struct *mm);
void umn_all_put(struct umn_all_mm *all);
int umn_mm_join_first(struct umn_file *file);
void umn_mm_leave(struct umn_file *file);

/* Join the address space's notifier: a load but the first time. */
static inline int umn_mm_join(struct umn_file *file)
{
	/* Pairs with the release in umn_mm_join_first(): registered. */
	return smp_load_acquire(&file->all_mm) ? 0 : umn_mm_join_first(file);
}

int umn_range_insert(struct umn_file *file, struct umn_region *region,
		     u64 start, u64 end, struct umn_region *except);
void umn_range_remove(struct umn_file *file, struct umn_region **regions,
		      unsigned int n);
int umn_all_start(struct umn_file *file, struct umn_region *region);
int umn_all_hold(struct umn_file *file);
void umn_all_unhold(struct umn_file *file);
void umn_all_remove(struct umn_file *file, struct umn_region *region);

/* ring.c */
bool umn_ring_post(struct umn_file *file,
		   const struct ummunotify_ring_event *event);
int umn_setup(struct umn_file *file, struct ummunotify_params __user *argp);
void umn_free_area(struct umn_area *area);
unsigned long umn_area_pages(const struct umn_area *area);
bool umn_ring_readable(struct umn_file *file);
int umn_read_ring(struct umn_file *file, char __user *buf, size_t count,
		  size_t *done);
int umn_mmap(struct file *filp, struct vm_area_struct *vma);

/* legacy.c */
bool umn_queue_report(struct umn_file *file, struct umn_region *region,
		      u64 start, u64 end);
void umn_move_report(struct umn_queued_region *old,
		     struct umn_queued_region *new);
void umn_report_refusal(struct umn_file *file, u64 start, u64 end);
int umn_read_reports(struct umn_file *file, char __user *buf, size_t count,
		     size_t *done);

/* limits.c */
int umn_user_get(struct umn_file *file);
void umn_user_release(struct umn_file *file);
bool umn_user_may_see(struct umn_file *file, const struct file *seen);
int umn_charge_watch(struct umn_file *file);
void umn_uncharge_watch(struct umn_file *file);
int umn_charge_pages(struct umn_file *file, unsigned long pages);
void umn_uncharge_pages(struct umn_file *file, unsigned long pages);
long umn_user_watches(struct umn_file *file);
long umn_user_pages(struct umn_file *file);
void umn_user_defer_teardown(struct umn_file *file);
int umn_ns_limits(struct ummunotify_ns_limits __user *argp);
unsigned int umn_ns_limited(void);
int umn_limits_init(void);
void umn_limits_exit(void);

/* space.c */
int umn_space_get(struct umn_file *file);
void umn_space_put(struct umn_file *file);
struct umn_all_mm *umn_space_notifier(struct umn_file *file);
unsigned int umn_space_pressure_files(struct umn_file *file);
void umn_space_pressure_add(struct umn_file *file, int n);

/* pressure.c */
int umn_pressure_init(void);
void umn_pressure_add(struct umn_file *file);
void umn_pressure_del(struct umn_file *file);
void umn_pressure_exit(void);

#endif /* _UMMUNOTIFY_UMN_H */
