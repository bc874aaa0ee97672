// SPDX-License-Identifier: GPL-2.0
/*
 * ummunotify: MMU notifications for user-space registration caches.
 *
 * A process opens /dev/ummunotify and registers address ranges it has
 * handed to a device (an RDMA NIC, say).  When the kernel unmaps or
 * replaces the pages behind a registered range, the interval notifier
 * below bumps a counter the process has mapped and queues a report, both
 * before the unmapping call returns.  A cache checks the counter with one
 * load and reads the reports only when it moved.
 *
 * See Documentation/userspace-api/ummunotify.rst.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/rbtree.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include <linux/ummunotify.h>

static unsigned int max_regions = 1U << 20;
module_param(max_regions, uint, 0644);
MODULE_PARM_DESC(max_regions, "Maximum number of regions registered on one open file (default 1048576)");

/**
 * struct umn_file - one open file: the watches of one address space
 * @mm:			the opener's address space, mmgrab()ed
 * @regions_lock:	serialises changes to @cookies and the consumption of
 *			reports; never taken by the notifier or under mmap_lock
 * @cookies:		registered regions by cookie
 * @nr_regions:		number of entries in @cookies
 * @used:		a region was registered or read() ran:
 *			features can no longer change
 * @lock:		protects what the notifier touches: @reports,
 *			@counted_seq, @need_last, the counter and the
 *			report fields of every region
 * @reports:		regions with a pending report, oldest first
 * @counted_seq:	invalidation (cur_seq) already counted in the
 *			counter; 0 once a LAST event reported the counter
 * @need_last:		a report was read and no LAST has followed yet
 * @counter_page:	page mapped read-only by user space; starts with
 *			the __u64 generation counter
 * @counter:		the counter, in @counter_page
 * @wait:		readers and pollers
 * @fasync:		SIGIO subscribers
 */
struct umn_file {
	struct mm_struct *mm;

	struct mutex regions_lock;	/* see above: not in the notifier */
	struct rb_root cookies;
	unsigned int nr_regions;
	bool used;

	spinlock_t lock;		/* the notifier's only lock */
	struct list_head reports;
	unsigned long counted_seq;
	bool need_last;

	struct page *counter_page;
	u64 *counter;

	wait_queue_head_t wait;
	struct fasync_struct *fasync;
};

/**
 * struct umn_region - one registration
 * @notifier:	interval notifier over [@start, @end)
 * @file:	owning file
 * @cookie_node: node in &umn_file.cookies
 * @report:	node in &umn_file.reports while a report is pending,
 *		otherwise empty
 * @cookie:	user's cookie, unique within @file
 * @start:	first byte watched
 * @end:	first byte past the range watched
 * @hint_start:	start of the part invalidated, valid when @hint
 * @hint_end:	end of the part invalidated, valid when @hint
 * @hint:	the pending report covers one invalidation only
 */
struct umn_region {
	struct mmu_interval_notifier notifier;
	struct umn_file *file;
	struct rb_node cookie_node;
	struct list_head report;
	u64 cookie;
	u64 start;
	u64 end;
	u64 hint_start;
	u64 hint_end;
	bool hint;
};

/* Features EXCHANGE_FEATURES can grant: none beyond the 2010 ABI yet. */
#define UMN_SUPPORTED_FEATURES	0U

static struct kmem_cache *umn_region_cache;

/* Before 6.3 (see Kbuild) */
#ifdef UMN_NEED_VM_FLAGS_MOD
static inline void vm_flags_mod(struct vm_area_struct *vma,
				vm_flags_t set, vm_flags_t clear)
{
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
}
#endif

/*
 * Only the address space that opened the file may see or change its
 * watches: not a forked child, not a process the fd was passed to, not
 * the opener after execve().
 */
static bool umn_is_owner(struct umn_file *file)
{
	return current->mm == file->mm;
}

/*
 * Events after which a cached registration no longer describes what the
 * process sees.  Protection changes (fork's copy-on-write arming,
 * mprotect), soft-dirty tracking and device-exclusive access keep the
 * same pages and are not reported.  Unknown future events are.
 */
static bool umn_event_invalidates(enum mmu_notifier_event event)
{
	switch (event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
	case MMU_NOTIFY_EXCLUSIVE:
		return false;
	default:
		return true;
	}
}

static bool umn_readable(struct umn_file *file)
{
	return !list_empty(&file->reports) || file->need_last;
}

/*
 * Count the invalidation and queue (or widen) @region's report.  Returns
 * true when the file became readable.  Called with file->lock held.
 *
 * One invalidation calls us once per region it hits, all with the same
 * cur_seq, so the counter moves once per invalidation.  Once a LAST event
 * has reported the counter, counted_seq is reset and the next report
 * moves the counter again, even within the same invalidation: a reader
 * that saw the LAST value can never miss a report queued after it.
 */
static bool umn_report(struct umn_file *file, struct umn_region *region,
		       u64 start, u64 end, unsigned long cur_seq)
{
	bool was_readable = umn_readable(file);

	if (file->counted_seq != cur_seq) {
		file->counted_seq = cur_seq;
		WRITE_ONCE(*file->counter, *file->counter + 1);
	}

	if (!list_empty(&region->report)) {
		region->hint = false;
		return false;
	}

	region->hint = true;
	region->hint_start = start;
	region->hint_end = end;
	list_add_tail(&region->report, &file->reports);
	return !was_readable;
}

/*
 * Runs before the pages go away, possibly from a context that must not
 * sleep (OOM reaper): only a spinlock, no allocation, no user access.
 */
static bool umn_invalidate(struct mmu_interval_notifier *notifier,
			   const struct mmu_notifier_range *range,
			   unsigned long cur_seq)
{
	struct umn_region *region = container_of(notifier, struct umn_region,
						 notifier);
	struct umn_file *file = region->file;
	bool woke;

	mmu_interval_set_seq(notifier, cur_seq);
	if (!umn_event_invalidates(range->event))
		return true;

	spin_lock(&file->lock);
	woke = umn_report(file, region, max_t(u64, range->start, region->start),
			  min_t(u64, range->end, region->end), cur_seq);
	spin_unlock(&file->lock);

	if (woke) {
		wake_up_interruptible(&file->wait);
		kill_fasync(&file->fasync, SIGIO, POLL_IN);
	}
	return true;
}

static const struct mmu_interval_notifier_ops umn_notifier_ops = {
	.invalidate = umn_invalidate,
};

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

static int umn_exchange_features(struct umn_file *file, u32 __user *argp)
{
	u32 wanted;
	int ret = 0;

	if (get_user(wanted, argp))
		return -EFAULT;

	mutex_lock(&file->regions_lock);
	if (file->used)
		ret = -EINVAL;
	else if (put_user(wanted & UMN_SUPPORTED_FEATURES, argp))
		ret = -EFAULT;
	mutex_unlock(&file->regions_lock);
	return ret;
}

static int umn_register(struct umn_file *file,
			struct ummunotify_register_ioctl __user *argp)
{
	struct ummunotify_register_ioctl args;
	struct umn_region *region;
	int ret;

	if (copy_from_user(&args, argp, sizeof(args)))
		return -EFAULT;
	if (args.flags || args.reserved || args.start >= args.end ||
	    args.end > TASK_SIZE)
		return -EINVAL;

	region = kmem_cache_zalloc(umn_region_cache, GFP_KERNEL);
	if (!region)
		return -ENOMEM;
	region->file = file;
	region->cookie = args.user_cookie;
	region->start = args.start;
	region->end = args.end;
	INIT_LIST_HEAD(&region->report);

	mutex_lock(&file->regions_lock);
	if (file->nr_regions >= READ_ONCE(max_regions)) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	if (!umn_insert_cookie(file, region)) {
		ret = -EINVAL;
		goto out_unlock;
	}
	ret = mmu_interval_notifier_insert(&region->notifier, file->mm,
					   args.start, args.end - args.start,
					   &umn_notifier_ops);
	if (ret) {
		rb_erase(&region->cookie_node, &file->cookies);
		goto out_unlock;
	}
	file->nr_regions++;
	file->used = true;
	/*
	 * An invalidation already running when the notifier went in does
	 * not call it.  Wait for it to finish, so that whatever user space
	 * pins after we return sees the pages as they are after it.
	 */
	mmu_interval_read_begin(&region->notifier);
	mutex_unlock(&file->regions_lock);
	return 0;

out_unlock:
	mutex_unlock(&file->regions_lock);
	kmem_cache_free(umn_region_cache, region);
	return ret;
}

/* Stops @region's notifier and drops its report; regions_lock held. */
static void umn_remove(struct umn_file *file, struct umn_region *region)
{
	/* Waits for a running callback: after it, none can queue @region. */
	mmu_interval_notifier_remove(&region->notifier);
	spin_lock(&file->lock);
	list_del(&region->report);
	spin_unlock(&file->lock);
	kmem_cache_free(umn_region_cache, region);
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
	if (region) {
		rb_erase(&region->cookie_node, &file->cookies);
		file->nr_regions--;
		umn_remove(file, region);
	} else {
		ret = -EINVAL;
	}
	mutex_unlock(&file->regions_lock);
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
	default:
		return umn_unregister(file, argp);
	}
}

/*
 * Fill @event with the oldest pending report, or with LAST once the
 * queue is empty.  Returns the region reported, NULL for LAST, or an
 * error pointer when nothing is pending.
 */
static struct umn_region *umn_peek(struct umn_file *file,
				   struct ummunotify_event *event)
{
	struct umn_region *region;

	memset(event, 0, sizeof(*event));
	spin_lock(&file->lock);
	region = list_first_entry_or_null(&file->reports, struct umn_region,
					  report);
	if (region) {
		event->type = UMMUNOTIFY_EVENT_TYPE_INVAL;
		event->user_cookie_counter = region->cookie;
		if (region->hint) {
			event->flags = UMMUNOTIFY_EVENT_FLAG_HINT;
			event->hint_start = region->hint_start;
			event->hint_end = region->hint_end;
		} else {
			event->hint_start = region->start;
			event->hint_end = region->end;
		}
	} else if (file->need_last) {
		event->type = UMMUNOTIFY_EVENT_TYPE_LAST;
		event->user_cookie_counter = *file->counter;
		/* Reports queued from now on must move the counter again. */
		file->counted_seq = 0;
	} else {
		region = ERR_PTR(-EAGAIN);
	}
	spin_unlock(&file->lock);
	return region;
}

/* @event, peeked for @region (NULL: LAST), reached user space. */
static void umn_consume(struct umn_file *file, struct umn_region *region,
			const struct ummunotify_event *event)
{
	spin_lock(&file->lock);
	if (!region) {
		file->need_last = false;
	} else if (!(event->flags & UMMUNOTIFY_EVENT_FLAG_HINT) ||
		   region->hint) {
		list_del_init(&region->report);
		file->need_last = true;
	}
	/* Else hit again since the peek: keep it, now for the whole range. */
	spin_unlock(&file->lock);
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
	struct ummunotify_event event;
	struct umn_region *region;
	size_t done = 0;
	int ret;

	if (!umn_is_owner(file))
		return -EPERM;
	if (count < sizeof(event))
		return -EINVAL;

	for (;;) {
		mutex_lock(&file->regions_lock);
		if (umn_has_events(file))
			break;
		file->used = true;
		mutex_unlock(&file->regions_lock);
		if (filp->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(file->wait,
					       umn_has_events(file));
		if (ret)
			return ret;
	}

	/*
	 * Copy each event out before dequeuing it, so that a bad buffer
	 * loses nothing.  regions_lock keeps the peeked region alive.
	 */
	ret = 0;
	while (count - done >= sizeof(event)) {
		region = umn_peek(file, &event);
		if (IS_ERR(region))
			break;
		if (copy_to_user(buf + done, &event, sizeof(event))) {
			ret = -EFAULT;
			break;
		}
		umn_consume(file, region, &event);
		file->used = true;
		done += sizeof(event);
	}
	mutex_unlock(&file->regions_lock);
	return done ? done : ret;
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

static int umn_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct umn_file *file = filp->private_data;

	if (vma->vm_mm != file->mm)
		return -EPERM;
	if (vma->vm_pgoff || vma->vm_end - vma->vm_start > PAGE_SIZE ||
	    !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;

	vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYWRITE);
	return vm_insert_page(vma, vma->vm_start, file->counter_page);
}

static int umn_open(struct inode *inode, struct file *filp)
{
	struct umn_file *file;

	/* Kernel threads have no address space to watch. */
	if (!current->mm)
		return -EINVAL;

	file = kzalloc(sizeof(*file), GFP_KERNEL_ACCOUNT);
	if (!file)
		return -ENOMEM;
	file->counter_page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!file->counter_page) {
		kfree(file);
		return -ENOMEM;
	}
	file->counter = page_address(file->counter_page);

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
	init_waitqueue_head(&file->wait);

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
		umn_remove(file, region);
		cond_resched();
	}
	mmdrop(file->mm);
	__free_page(file->counter_page);
	kfree(file);
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
};

static struct miscdevice umn_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "ummunotify",
	.fops	= &umn_fops,
	.mode	= 0666,
};

static int __init umn_init(void)
{
	int ret;

	umn_region_cache = KMEM_CACHE(umn_region, SLAB_ACCOUNT);
	if (!umn_region_cache)
		return -ENOMEM;

	ret = misc_register(&umn_misc);
	if (ret)
		kmem_cache_destroy(umn_region_cache);
	return ret;
}

static void __exit umn_exit(void)
{
	misc_deregister(&umn_misc);
	kmem_cache_destroy(umn_region_cache);
}

module_init(umn_init);
module_exit(umn_exit);

MODULE_DESCRIPTION("User-space notification of MMU invalidations");
MODULE_AUTHOR("The ummunotify developers");
MODULE_LICENSE("GPL");
