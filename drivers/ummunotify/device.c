// SPDX-License-Identifier: GPL-2.0
/*
 * ummunotify: MMU notifications for user-space registration caches.
 *
 * A process opens /dev/ummunotify and watches address ranges it has handed
 * to a device (an RDMA NIC, say).  When the kernel unmaps or replaces the
 * pages behind a watched range, the address space's notifier (watch_all.c)
 * publishes it into memory the process has mapped, before the unmapping
 * call returns: a counter, the watch's generation word and an event ring
 * (or, for the 2010 ABI, a queue read with read()).  A cache validates an entry with
 * one load.
 *
 * See Documentation/userspace-api/ummunotify.rst.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/poll.h>
#include <linux/proc_fs.h>
#include <linux/sched/mm.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "umn.h"

#define CREATE_TRACE_POINTS
#include "trace.h"

DEFINE_PER_CPU(struct umn_stats, umn_stats);
static atomic_long_t umn_nr_files;
atomic_long_t umn_nr_regions;
struct kmem_cache *umn_region_cache;
struct kmem_cache *umn_queued_cache;
static struct kmem_cache *umn_file_cache;

/* file->lock held. */
static bool umn_readable(struct umn_file *file)
{
	lockdep_assert_held(&file->lock);

	if (umn_has_ring(file))
		return umn_ring_readable(file);
	return umn_refusals_pending(file) || !list_empty(&file->reports) ||
	       file->need_last;
}

/*
 * Something became readable.  kill_fasync() may allocate the signal's
 * queue entry (F_SETSIG) and, with F_SETOWN of a process group, signal
 * every process in it: not in the notifier, which may run where neither
 * is allowed, and not in interrupt context either.  SIGIO is sent from a
 * work item, right after; queueing it allocates nothing.
 */
void umn_wake(struct umn_file *file)
{
	/*
	 * Its smp_mb() pairs with set_current_state() in the waiter's
	 * wait_event_interruptible(): it sees the event, or is seen here.
	 */
	if (wq_has_sleeper(&file->wait))
		wake_up_interruptible(&file->wait);
	if (READ_ONCE(file->fasync))
		queue_work(system_wq, &file->sigio_work);
}

static void umn_send_sigio(struct work_struct *work)
{
	struct umn_file *file = container_of(work, struct umn_file,
					     sigio_work);

	kill_fasync(&file->fasync, SIGIO, POLL_IN);
}

static int umn_try_exchange(struct umn_file *file, u32 granted,
			    u32 __user *argp)
{
	int ret = 0;

	mutex_lock(&file->regions_lock);
	if (file->used || file->set_up)
		ret = -EINVAL;
	else if (copy_to_user_nofault(argp, &granted, sizeof(granted)))
		ret = -EAGAIN;	/* not present: see umn_exchange_features() */
	else
		file->features = granted;
	mutex_unlock(&file->regions_lock);
	return ret;
}

/*
 * Granting changes nothing yet: the file speaks the 2010 ABI until
 * UMMUNOTIFY_SETUP turns the features on.  The 2010 test program passed
 * an uninitialised mask; it must keep working whatever it asked for.
 * Under regions_lock nothing faults: a page not present is faulted in
 * without it, and the call made again.  The mask is read once, before:
 * fault_in_writeable() overwrites what it faults in.
 */
static int umn_exchange_features(struct umn_file *file, u32 __user *argp)
{
	u32 asked, granted;
	int ret;

	/* Fail on an unwritable argument now, not under regions_lock. */
	if (get_user(asked, argp) || put_user(asked, argp))
		return -EFAULT;
	granted = asked & UMN_SUPPORTED_FEATURES;
	/* Pressure advisories are ring events. */
	if (!(granted & UMMUNOTIFY_FEATURE_RING))
		granted &= ~UMMUNOTIFY_FEATURE_PRESSURE;
	while ((ret = umn_try_exchange(file, granted, argp)) == -EAGAIN) {
		ret = umn_fault_in(argp, sizeof(*argp));
		if (ret)
			break;
	}
	/* A restart reads the argument again: put back what the caller wrote. */
	if (ret == -ERESTARTSYS && put_user(asked, argp))
		ret = -EFAULT;
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
	case UMMUNOTIFY_WATCHV:
		break;
	case UMMUNOTIFY_NS_LIMITS:
		/* The caller's privileges count, whoever opened the file. */
		return umn_ns_limits(argp);
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
	case UMMUNOTIFY_WATCHV:
		return umn_watchv(file, argp);
	default:
		return umn_setup(file, argp);
	}
}

static bool umn_has_events(struct umn_file *file)
{
	bool readable;

	spin_lock(&file->lock);
	readable = umn_readable(file);
	spin_unlock(&file->lock);
	return readable;
}

/*
 * regions_lock is not held across a fault: the copies do not fault, and
 * the event's bytes where a copy stopped are faulted in without it, then
 * the buffer filled on (one a fork left copy-on-write, or not yet
 * touched, is filled as far as there are events, as copy_to_user() would).
 * Once events are copied, a copy that faults again where the fault-in
 * succeeded (another thread zapping the page, a memory tag the fault-in
 * does not check) ends the read with them; a signal after a fault-in
 * ends it with them, or before any with -ERESTARTSYS.  What is readable
 * can turn out to be gone when read (a head user space moved meanwhile):
 * that waits again, as an empty file does.
 */
static ssize_t umn_read(struct file *filp, char __user *buf, size_t count,
			loff_t *pos)
{
	struct umn_file *file = filp->private_data;
	size_t size, done = 0, faulted_at = SIZE_MAX;
	int ret;

	if (!umn_is_owner(file))
		return -EPERM;

	mutex_lock(&file->regions_lock);
	for (;;) {
		size = umn_has_ring(file) ? sizeof(struct ummunotify_ring_event) :
					    sizeof(struct ummunotify_event);
		if (count < size) {
			ret = -EINVAL;
			break;
		}
		file->used = true;
		ret = 0;
		if (umn_has_events(file))
			ret = umn_has_ring(file) ?
			      umn_read_ring(file, buf, count, &done) :
			      umn_read_reports(file, buf, count, &done);
		if (done && (!ret || done == faulted_at))
			break;
		mutex_unlock(&file->regions_lock);
		if (ret == -EFAULT) {
			faulted_at = done;
			ret = umn_fault_in(buf + done, size);
		} else if (filp->f_flags & O_NONBLOCK) {
			ret = -EAGAIN;
		} else {
			ret = wait_event_interruptible(file->wait,
						       umn_has_events(file));
		}
		if (ret)
			return done ? (ssize_t)done : ret;
		cond_resched();
		mutex_lock(&file->regions_lock);
	}
	mutex_unlock(&file->regions_lock);
	return done ? (ssize_t)done : ret;
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
 * The opener's number in the pid namespace of the /proc that shows the
 * file (as pidfd's fdinfo has it), 0 once its thread group is gone.
 */
static pid_t umn_opener_nr(struct umn_file *file, struct seq_file *m)
{
	struct pid_namespace *ns = proc_pid_ns(file_inode(m->file)->i_sb);

	if (!pid_has_task(file->opener, PIDTYPE_TGID))
		return 0;
	return pid_nr_ns(file->opener, ns);
}

/* Only the opener's user and root see anything (see umn_user_may_see()). */
static void umn_show_fdinfo(struct seq_file *m, struct file *filp)
{
	struct umn_file *file = filp->private_data;

	if (!umn_user_may_see(file, m->file))
		return;
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
	seq_printf(m, "user_watches:\t%ld\n", umn_user_watches(file));
	seq_printf(m, "user_pages:\t%ld\n", umn_user_pages(file));
	/* Changed under all_lock: a snapshot will do. */
	seq_printf(m, "whole_space:\t%u\n", READ_ONCE(file->nr_all));
	seq_printf(m, "opener:\t%d\n", umn_opener_nr(file, m));
	spin_unlock(&file->lock);
}

/* After umn_pressure_del(): no walk of the pressure list reaches the file. */
void umn_teardown(struct umn_file *file)
{
	umn_remove_all(file);
	/* Nor can the notifier queue SIGIO now. */
	cancel_work_sync(&file->sigio_work);
	umn_uncharge_pages(file, umn_area_pages(&file->area));
	umn_free_area(&file->area);
	__free_page(file->header_page);
	umn_space_put(file);
	umn_user_release(file);
	put_pid(file->opener);
	mmdrop(file->mm);
	kmem_cache_free(umn_file_cache, file);
	atomic_long_dec(&umn_nr_files);
}

static int umn_open(struct inode *inode, struct file *filp)
{
	struct umn_file *file;
	int ret;

	/* Kernel threads have no address space to watch. */
	if (!current->mm)
		return -EINVAL;

	/* Sets up the cgroup's pressure list, should the file want it. */
	file = kmem_cache_alloc_lru(umn_file_cache, &umn_pressure_lru,
				    GFP_KERNEL | __GFP_ZERO);
	if (!file)
		return -ENOMEM;
	ret = umn_user_get(file);
	if (ret)
		goto out_free;
	ret = -ENOMEM;
	file->header_page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!file->header_page)
		goto out_user;
	file->header = page_address(file->header_page);
	file->counter = file->header + UMN_OFF_COUNTER;

	/*
	 * Hold the mm_struct only, not the address space: an open file
	 * must not keep the memory of an exited process alive.
	 */
	mmgrab(current->mm);
	file->mm = current->mm;
	file->opener = get_pid(task_tgid(current));
	file->opener_exec = current->self_exec_id;
	ret = umn_space_get(file);
	if (ret)
		goto out_mm;
	/* A 32-bit process's ends below a 64-bit one's. */
	file->task_size = TASK_SIZE;
	mutex_init(&file->regions_lock);
	file->cookies = RB_ROOT;
	spin_lock_init(&file->lock);
	INIT_LIST_HEAD(&file->reports);
	INIT_LIST_HEAD(&file->pressure_node);
	init_waitqueue_head(&file->wait);
	INIT_WORK(&file->sigio_work, umn_send_sigio);
	umn_all_init(file);
	atomic_long_inc(&umn_nr_files);

	filp->private_data = file;
	return nonseekable_open(inode, filp);

out_mm:
	put_pid(file->opener);
	mmdrop(file->mm);
	__free_page(file->header_page);
out_user:
	umn_user_release(file);
out_free:
	kmem_cache_free(umn_file_cache, file);
	return ret;
}

/*
 * self_exec_id is per task, but the same in the whole thread group: exec
 * kills the other threads before it bumps the exec'ing one's.
 */
static bool umn_owner_exits(struct umn_file *file)
{
	return !current->mm && task_tgid(current) == file->opener &&
	       current->self_exec_id == file->opener_exec;
}

/*
 * A teardown waits for no invalidation of the address space (a watch
 * comes out of the notifier under its spinlock), but it takes the time
 * its watches take, up to max_user_watches.  The owner's own close, or
 * one after its address space is gone, tears down here; the last close
 * of anyone else (a process the fd was passed to, the opener after
 * execve(), the kernel's delayed fput of an fd left in flight) must not
 * spend it: the driver's own queue does it, behind the other teardowns
 * of the opener's user only, the memory charged to that user and the
 * module held until then (so that rmmod fails with EBUSY meanwhile,
 * rather than waiting).
 * The opener's exit closes after exit_mm(), its mm gone from current
 * while another user may hold it (a CLONE_VM child, a moment's mmget() of
 * khugepaged or /proc): it counts as the owner's close, so that its
 * user's budget is back before the exit is reaped.
 */
static int umn_release(struct inode *inode, struct file *filp)
{
	struct umn_file *file = filp->private_data;

	umn_pressure_del(file);
	if (current->mm == file->mm || umn_owner_exits(file) ||
	    !atomic_read(&file->mm->mm_users))
		umn_teardown(file);
	else
		umn_user_defer_teardown(file);
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

/*
 * Every attribute is root's to read: the totals move when any user's
 * watched memory changes, or a watch is made, which another user must not
 * be able to time.
 */
static struct dev_ext_attribute dev_attr_events = {
	__ATTR(events, 0400, umn_stat_show, NULL),
	(void *)offsetof(struct umn_stats, events)
};

static struct dev_ext_attribute dev_attr_dropped = {
	__ATTR(dropped, 0400, umn_stat_show, NULL),
	(void *)offsetof(struct umn_stats, dropped)
};

static struct dev_ext_attribute dev_attr_filtered = {
	__ATTR(filtered, 0400, umn_stat_show, NULL),
	(void *)offsetof(struct umn_stats, filtered)
};

static ssize_t files_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&umn_nr_files));
}
static DEVICE_ATTR_ADMIN_RO(files);

static ssize_t regions_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&umn_nr_regions));
}
static DEVICE_ATTR_ADMIN_RO(regions);

static ssize_t ns_limits_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", umn_ns_limited());
}
static DEVICE_ATTR_ADMIN_RO(ns_limits);

static struct attribute *umn_attrs[] = {
	&dev_attr_files.attr,
	&dev_attr_regions.attr,
	&dev_attr_events.attr.attr,
	&dev_attr_dropped.attr.attr,
	&dev_attr_filtered.attr.attr,
	&dev_attr_ns_limits.attr,
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

	ret = umn_limits_init();
	if (ret)
		return ret;
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
	umn_limits_exit();
	return ret;
}

static void __exit umn_exit(void)
{
	misc_deregister(&umn_misc);
	/* The last teardown may still be returning from module_put(). */
	umn_limits_exit();
	/*
	 * Each WATCH_ALL notifier holds the module until its SRCU callback
	 * frees it; that callback's return, after module_put(), is covered
	 * by the grace periods waited for here and by module unloading.
	 */
	mmu_notifier_synchronize();
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
MODULE_VERSION(UMN_VERSION);
