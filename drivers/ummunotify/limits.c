// SPDX-License-Identifier: GPL-2.0
/*
 * What one file and one user may hold.  The device is open to every user
 * of a shared node, so besides the bound per file there is one per user,
 * over all the files that user's processes opened: watches (slab objects)
 * and pages of memory.  The opener's user is charged for the life of the
 * file, whoever the descriptor is passed to, and the teardowns of its
 * files closed last elsewhere run one at a time, each user's apart.
 */

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/user_namespace.h>
#include <linux/workqueue.h>

#include "umn.h"

unsigned int max_regions = 1U << 20;
module_param(max_regions, uint, 0644);
MODULE_PARM_DESC(max_regions, "Maximum number of watches of one open file (default 1048576)");

/*
 * A per-user limit: 0 (at load time or later) means the default, sized
 * from RAM at load; reading the parameter shows the limit in force.
 */
struct umn_limit {
	unsigned long max;
	unsigned long dflt;
};

static int umn_limit_set(const char *val, const struct kernel_param *kp)
{
	struct umn_limit *limit = kp->arg;
	unsigned long max;
	int ret;

	ret = kstrtoul(val, 0, &max);
	if (!ret)
		WRITE_ONCE(limit->max, max);
	return ret;
}

static int umn_limit_get(char *buf, const struct kernel_param *kp)
{
	const struct umn_limit *limit = kp->arg;

	return scnprintf(buf, PAGE_SIZE, "%lu\n",
			 READ_ONCE(limit->max) ?: limit->dflt);
}

static const struct kernel_param_ops umn_limit_ops = {
	.set	= umn_limit_set,
	.get	= umn_limit_get,
};

static struct umn_limit max_user_watches;
module_param_cb(max_user_watches, &umn_limit_ops, &max_user_watches, 0644);
MODULE_PARM_DESC(max_user_watches, "Maximum number of watches of all the files one user opened (0: 1/32 of RAM's worth, from 8192 to 1048576)");

static struct umn_limit max_user_pages;
module_param_cb(max_user_pages, &umn_limit_ops, &max_user_pages, 0644);
MODULE_PARM_DESC(max_user_pages, "Maximum number of pages of all the files one user opened (0: 1/32 of RAM)");

/*
 * What a file costs before SETUP: its header page, and what holding the
 * opener's mm_struct costs once the process has exited (the mm_struct
 * and its page table root).
 */
#define UMN_FILE_PAGES	3

/**
 * struct umn_user - what the files one user opened hold
 * @node:	in umn_users, under umn_users_lock
 * @uid:	the user
 * @files:	files charged to it, under umn_users_lock
 * @watches:	their watches
 * @pages:	their pages of shared memory
 * @teardowns:	files another process closed last, to tear down
 * @teardown_work: tears them down
 */
struct umn_user {
	struct hlist_node node;
	kuid_t uid;
	unsigned int files;
	atomic_long_t watches;
	atomic_long_t pages;
	struct llist_head teardowns;
	struct work_struct teardown_work;
};

static DEFINE_HASHTABLE(umn_users, 6);
static DEFINE_MUTEX(umn_users_lock);
static struct workqueue_struct *umn_teardown_wq;

static void umn_user_teardowns(struct work_struct *work);

/* Add @n to @used unless that takes it beyond @max. */
static bool umn_charge(atomic_long_t *used, long n, unsigned long max)
{
	long old = atomic_long_read(used);

	do {
		if (old + n > max)
			return false;
	} while (!atomic_long_try_cmpxchg(used, &old, old + n));
	return true;
}

static unsigned long umn_limit(const struct umn_limit *limit)
{
	return READ_ONCE(limit->max) ?: limit->dflt;
}

/*
 * The user to charge for @cred: its (real) uid; in a user namespace, the
 * user who made the outermost one.  The ids a namespace maps are its
 * creator's to hand out: they must not each get a budget of their own
 * (inotify charges every level of the hierarchy for the same reason).
 */
static kuid_t umn_charged_uid(const struct cred *cred)
{
	const struct user_namespace *ns = cred->user_ns;

	if (ns == &init_user_ns)
		return cred->uid;
	while (ns->parent != &init_user_ns)
		ns = ns->parent;
	return ns->owner;
}

/* umn_users_lock held. */
static void umn_user_put(struct umn_user *user)
{
	lockdep_assert_held(&umn_users_lock);

	if (--user->files)
		return;
	/* Its files gave back every watch and page before they went. */
	WARN_ON_ONCE(atomic_long_read(&user->watches) ||
		     atomic_long_read(&user->pages));
	hash_del(&user->node);
	kfree(user);
}

/* Charge the opener's user for a new file. */
int umn_user_get(struct umn_file *file)
{
	kuid_t uid = umn_charged_uid(current_cred());
	struct umn_user *user;
	int ret = 0;

	mutex_lock(&umn_users_lock);
	hash_for_each_possible(umn_users, user, node, __kuid_val(uid))
		if (uid_eq(user->uid, uid))
			goto found;
	user = kzalloc(sizeof(*user), GFP_KERNEL_ACCOUNT);
	if (!user) {
		ret = -ENOMEM;
		goto out;
	}
	user->uid = uid;
	INIT_WORK(&user->teardown_work, umn_user_teardowns);
	hash_add(umn_users, &user->node, __kuid_val(uid));
found:
	user->files++;
	if (umn_charge(&user->pages, UMN_FILE_PAGES, umn_limit(&max_user_pages))) {
		file->user = user;
	} else {
		umn_user_put(user);
		ret = -ENOSPC;
	}
out:
	mutex_unlock(&umn_users_lock);
	return ret;
}

/*
 * Whether the opener of @seen (an fdinfo file: its opener's credentials
 * count, not those of whoever reads it) may see what @file's fdinfo tells
 * of the opener's memory: when its watched ranges changed, and what its
 * user holds in all its files.  Its user may, and whoever may read any
 * process's memory (CAP_SYS_PTRACE); another user the descriptor was
 * passed to may not.
 */
bool umn_user_may_see(struct umn_file *file, const struct file *seen)
{
	return uid_eq(umn_charged_uid(seen->f_cred), file->user->uid) ||
	       file_ns_capable(seen, &init_user_ns, CAP_SYS_PTRACE);
}

/* The file is gone: what else it held was uncharged already. */
void umn_user_release(struct umn_file *file)
{
	atomic_long_sub(UMN_FILE_PAGES, &file->user->pages);
	mutex_lock(&umn_users_lock);
	umn_user_put(file->user);
	mutex_unlock(&umn_users_lock);
}

/*
 * A teardown can wait as long as the processes sharing the opener's
 * address space keep invalidating where its watches are (removing an
 * interval notifier waits for a pause).  One user's teardowns go one at a
 * time, in the order closed, so that a user cannot take every worker of
 * the queue and hold up the others' (their budgets, the module).
 */
void umn_user_defer_teardown(struct umn_file *file)
{
	struct umn_user *user = file->user;

	/* umn_limits_exit()'s destroy_workqueue() waits for the put. */
	__module_get(THIS_MODULE);
	/* Onto an empty list: each run queued so far took its files. */
	if (llist_add(&file->teardown_node, &user->teardowns))
		queue_work(umn_teardown_wq, &user->teardown_work);
}

static void umn_user_teardowns(struct work_struct *work)
{
	struct umn_user *user = container_of(work, struct umn_user,
					     teardown_work);
	struct llist_node *files = llist_del_all(&user->teardowns);
	struct umn_file *file, *next;

	/* Each file holds @user, which the last teardown may free. */
	llist_for_each_entry_safe(file, next, llist_reverse_order(files),
				  teardown_node) {
		umn_teardown(file);
		module_put(THIS_MODULE);
	}
}

/* One more watch on @file; regions_lock held. */
int umn_charge_watch(struct umn_file *file)
{
	lockdep_assert_held(&file->regions_lock);

	if (file->nr_regions >= READ_ONCE(max_regions) ||
	    !umn_charge(&file->user->watches, 1, umn_limit(&max_user_watches)))
		return -ENOSPC;
	file->nr_regions++;
	atomic_long_inc(&umn_nr_regions);
	return 0;
}

void umn_uncharge_watch(struct umn_file *file)
{
	atomic_long_dec(&file->user->watches);
	file->nr_regions--;
	atomic_long_dec(&umn_nr_regions);
}

int umn_charge_pages(struct umn_file *file, unsigned long pages)
{
	return umn_charge(&file->user->pages, pages,
			  umn_limit(&max_user_pages)) ? 0 : -ENOSPC;
}

void umn_uncharge_pages(struct umn_file *file, unsigned long pages)
{
	atomic_long_sub(pages, &file->user->pages);
}

long umn_user_watches(struct umn_file *file)
{
	return atomic_long_read(&file->user->watches);
}

long umn_user_pages(struct umn_file *file)
{
	return atomic_long_read(&file->user->pages);
}

/*
 * As inotify sizes max_user_watches: a share of RAM, so that a small
 * machine's users cannot pin most of it in slab, and a cap.
 */
int umn_limits_init(void)
{
	unsigned long share = totalram_pages() / 32;

	max_user_watches.dflt = clamp(share * PAGE_SIZE /
				      sizeof(struct umn_queued_region),
				      8192UL, 1UL << 20);
	max_user_pages.dflt = share;
	umn_teardown_wq = alloc_workqueue("ummunotify_release", WQ_UNBOUND, 0);
	return umn_teardown_wq ? 0 : -ENOMEM;
}

void umn_limits_exit(void)
{
	destroy_workqueue(umn_teardown_wq);
	/* No file is left, so a user left is a reference leaked. */
	WARN_ON(!hash_empty(umn_users));
}
