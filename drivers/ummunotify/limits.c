// SPDX-License-Identifier: GPL-2.0
/*
 * What one file and one user may hold.  The device is open to every user
 * of a shared node, so besides the bound per file there is one per user,
 * over all the files that user's processes opened: watches (slab objects)
 * and pages of memory.  A user is a uid in a user namespace, as inotify
 * counts them: a container's uid 0 is not root.  The opener's user is
 * charged for the life of the file, whoever the descriptor is passed to,
 * and so is whoever answers for the namespace (see umn_user_above());
 * the teardowns of files closed last elsewhere run one at a time, those
 * of each user of the initial namespace, and of each namespace root
 * made, apart.
 */

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/hash.h>
#include <linux/hashtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/task.h>
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

static struct umn_limit max_ns_watches;
module_param_cb(max_ns_watches, &umn_limit_ops, &max_ns_watches, 0644);
MODULE_PARM_DESC(max_ns_watches, "Maximum number of watches of all the files opened in one user namespace root made, with those made in it (0: max_user_watches' default)");

static struct umn_limit max_ns_pages;
module_param_cb(max_ns_pages, &umn_limit_ops, &max_ns_pages, 0644);
MODULE_PARM_DESC(max_ns_pages, "Maximum number of pages of all the files opened in one user namespace root made, with those made in it (0: max_user_pages' default)");

/*
 * What a file costs before SETUP: its header page, and what holding the
 * opener's mm_struct costs once the process has exited (the mm_struct
 * and its page table root).
 */
#define UMN_FILE_PAGES	3

/**
 * struct umn_user - what the files of one user, or of one namespace,
 * hold
 * @node:	in umn_users, under umn_users_lock
 * @ns:		the user namespace, held
 * @uid:	the user; INVALID_UID for all of @ns (see umn_user_above())
 * @parent:	charged for all this one is, or NULL
 * @refs:	files charged to it, and users whose @parent it is; under
 *		umn_users_lock
 * @watches:	their watches
 * @pages:	their pages of shared memory
 * @teardowns:	files another process closed last, to tear down (the
 *		topmost user's, see umn_user_defer_teardown())
 * @teardown_work: tears them down
 * @max_watches: a namespace's own limits, which an admin set (0: the
 * @max_pages:	module's); read without umn_users_lock
 * @limited:	in umn_limited if an admin set them, holding a reference
 */
struct umn_user {
	struct hlist_node node;
	struct user_namespace *ns;
	kuid_t uid;
	struct umn_user *parent;
	unsigned int refs;
	atomic_long_t watches;
	atomic_long_t pages;
	struct llist_head teardowns;
	struct work_struct teardown_work;
	unsigned long max_watches;
	unsigned long max_pages;
	struct list_head limited;
};

static DEFINE_HASHTABLE(umn_users, 6);
static DEFINE_MUTEX(umn_users_lock);
static LIST_HEAD(umn_limited);
static unsigned int umn_nr_limited;
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

/* A user's limits, or a namespace's. */
static unsigned long umn_max_watches(const struct umn_user *user)
{
	if (uid_valid(user->uid))
		return umn_limit(&max_user_watches);
	return READ_ONCE(user->max_watches) ?: umn_limit(&max_ns_watches);
}

static unsigned long umn_max_pages(const struct umn_user *user)
{
	if (uid_valid(user->uid))
		return umn_limit(&max_user_pages);
	return READ_ONCE(user->max_pages) ?: umn_limit(&max_ns_pages);
}

/*
 * Charge @n watches (@pages false) or pages to @user and every user above
 * it, or to none if one has not room.  Inline: on a watch's path a call
 * costs about what the charge does.
 */
static __always_inline bool umn_charge_up(struct umn_user *user, long n,
					  bool pages)
{
	struct umn_user *u, *failed;

	for (u = user; u; u = u->parent)
		if (!(pages ? umn_charge(&u->pages, n, umn_max_pages(u)) :
		      umn_charge(&u->watches, n, umn_max_watches(u))))
			goto undo;
	return true;
undo:
	failed = u;
	for (u = user; u != failed; u = u->parent)
		atomic_long_sub(n, pages ? &u->pages : &u->watches);
	return false;
}

static void umn_uncharge_up(struct umn_user *user, long n, bool pages)
{
	for (; user; user = user->parent)
		atomic_long_sub(n, pages ? &user->pages : &user->watches);
}

static u32 umn_user_hash(const struct user_namespace *ns, kuid_t uid)
{
	return hash_ptr(ns, 32) ^ __kuid_val(uid);
}

/* umn_users_lock held. */
static void umn_user_put(struct umn_user *user)
{
	struct umn_user *parent;

	lockdep_assert_held(&umn_users_lock);

	for (; user && !--user->refs; user = parent) {
		/* Its files gave back every watch and page before they went. */
		WARN_ON_ONCE(atomic_long_read(&user->watches) ||
			     atomic_long_read(&user->pages));
		parent = user->parent;
		hash_del(&user->node);
		put_user_ns(user->ns);
		kfree(user);
	}
}

/*
 * Who answers for what @uid of @ns (INVALID_UID: all of @ns) holds,
 * besides itself: *@ns and *@uid become it; false if nobody does.  The
 * ids a namespace maps are its creator's to hand out, so its users are
 * charged to its creator as well, in the parent namespace, as inotify
 * charges them: one user cannot multiply its budget by making
 * namespaces.  But root is no tenant of the namespaces it makes for
 * containers: charged to root, they could spend root's budget, and each
 * other's.  Such a namespace (of the initial one, made by its root)
 * answers for itself instead, against max_ns_watches and max_ns_pages,
 * and for the namespaces made in it.
 */
static bool umn_user_above(struct user_namespace **ns, kuid_t *uid)
{
	if (*ns == &init_user_ns || !uid_valid(*uid))
		return false;
	if ((*ns)->parent == &init_user_ns &&
	    uid_eq((*ns)->owner, GLOBAL_ROOT_UID)) {
		*uid = INVALID_UID;
	} else {
		*uid = (*ns)->owner;
		*ns = (*ns)->parent;
	}
	return true;
}

/* umn_users_lock held. */
static struct umn_user *umn_user_find(struct user_namespace *ns, kuid_t uid)
{
	struct umn_user *user;

	lockdep_assert_held(&umn_users_lock);

	hash_for_each_possible(umn_users, user, node, umn_user_hash(ns, uid))
		if (user->ns == ns && uid_eq(user->uid, uid))
			return user;
	return NULL;
}

/*
 * How many users umn_user_lookup() of @uid of @ns would make: it and
 * those answering for it, up to the first that exists.  umn_users_lock
 * held.
 */
static unsigned int umn_user_missing(struct user_namespace *ns, kuid_t uid)
{
	unsigned int n = 0;

	do {
		if (umn_user_find(ns, uid))
			break;
		n++;
	} while (umn_user_above(&ns, &uid));
	return n;
}

/*
 * @uid of @ns, a reference taken, with those answering for it (see
 * umn_user_above()) as its @parent and up.  Those missing are made from
 * *@spares, a list through ->parent, which umn_user_missing() sized
 * under the same hold of umn_users_lock.  Recurses once a level: user
 * namespaces nest 33 levels below the initial one at most.
 */
static struct umn_user *umn_user_lookup(struct user_namespace *ns,
					kuid_t uid, struct umn_user **spares)
{
	struct user_namespace *above_ns = ns;
	struct umn_user *user, *parent = NULL;
	kuid_t above_uid = uid;

	user = umn_user_find(ns, uid);
	if (user) {
		user->refs++;
		return user;
	}
	if (umn_user_above(&above_ns, &above_uid))
		parent = umn_user_lookup(above_ns, above_uid, spares);
	user = *spares;
	*spares = user->parent;
	user->ns = get_user_ns(ns);
	user->uid = uid;
	user->parent = parent;
	user->refs = 1;
	INIT_WORK(&user->teardown_work, umn_user_teardowns);
	INIT_LIST_HEAD(&user->limited);
	hash_add(umn_users, &user->node, umn_user_hash(ns, uid));
	return user;
}

/*
 * Charge the opener's user for a new file.  The users to make are
 * allocated without umn_users_lock, which every open() and close() takes:
 * an allocation that reclaims holds up nobody else's.
 */
int umn_user_get(struct umn_file *file)
{
	const struct cred *cred = current_cred();
	struct umn_user *spares = NULL, *user;
	unsigned int have = 0, need;
	int ret = 0;

	mutex_lock(&umn_users_lock);
	/* Users may go while it allocates; no chain is over 34 long. */
	while ((need = umn_user_missing(cred->user_ns, cred->uid)) > have) {
		mutex_unlock(&umn_users_lock);
		for (; have < need; have++) {
			user = kzalloc(sizeof(*user), GFP_KERNEL_ACCOUNT);
			if (!user) {
				ret = -ENOMEM;
				goto out;
			}
			user->parent = spares;
			spares = user;
		}
		mutex_lock(&umn_users_lock);
	}
	user = umn_user_lookup(cred->user_ns, cred->uid, &spares);
	if (umn_charge_up(user, UMN_FILE_PAGES, true)) {
		file->user = user;
	} else {
		umn_user_put(user);
		ret = -ENOSPC;
	}
	mutex_unlock(&umn_users_lock);
out:
	while (spares) {
		user = spares;
		spares = user->parent;
		kfree(user);
	}
	return ret;
}

/*
 * Whether the opener of @seen (an fdinfo file: its opener's credentials
 * count, not those of whoever reads it) may see what @file's fdinfo tells
 * of the opener's memory: when its watched ranges changed, and what its
 * user holds in all its files.  Its user may, and whoever may read any
 * process's memory in the user's namespace (CAP_SYS_PTRACE there);
 * another user the descriptor was passed to may not.
 */
bool umn_user_may_see(struct umn_file *file, const struct file *seen)
{
	const struct umn_user *user = file->user;

	return (seen->f_cred->user_ns == user->ns &&
		uid_eq(seen->f_cred->uid, user->uid)) ||
	       file_ns_capable(seen, user->ns, CAP_SYS_PTRACE);
}

/*
 * The container @nr is in (see umn_user_above()), held: the namespace
 * the initial one's root made, above the process's own.
 */
static int umn_container_of(pid_t nr, struct user_namespace **container)
{
	struct user_namespace *ns, *top;
	struct task_struct *task;
	struct pid *pid;

	if (nr <= 0)
		return -EINVAL;
	pid = find_get_pid(nr);
	task = get_pid_task(pid, PIDTYPE_PID);
	put_pid(pid);
	if (!task)
		return -ESRCH;
	rcu_read_lock();
	ns = get_user_ns(__task_cred(task)->user_ns);
	rcu_read_unlock();
	put_task_struct(task);

	for (top = ns; top != &init_user_ns && top->parent != &init_user_ns;)
		top = top->parent;
	/* Root's own users, and a user's namespaces, have budgets per user. */
	if (top == &init_user_ns || !uid_eq(top->owner, GLOBAL_ROOT_UID)) {
		put_user_ns(ns);
		return -EINVAL;
	}
	get_user_ns(top);
	put_user_ns(ns);
	*container = top;
	return 0;
}

/* Forget the limits an admin set for @user's namespace.  Lock held. */
static void umn_ns_unlimit(struct umn_user *user)
{
	list_del_init(&user->limited);
	WRITE_ONCE(umn_nr_limited, umn_nr_limited - 1);
	WRITE_ONCE(user->max_watches, 0);
	WRITE_ONCE(user->max_pages, 0);
	umn_user_put(user);
}

/*
 * Limits hold their namespace, so that they outlive its files: a
 * container that closes its last file and opens again is still bound.
 * Once nothing else holds it no process can enter it again, and they go,
 * at the next UMMUNOTIFY_NS_LIMITS or unload.  (From 7.x an opener of
 * namespaces by file handle may revive it meanwhile, without them.)
 * umn_users_lock held.
 */
static void umn_ns_limits_reap(void)
{
	struct umn_user *user, *next;

	lockdep_assert_held(&umn_users_lock);

	list_for_each_entry_safe(user, next, &umn_limited, limited)
		if (ns_ref_read(user->ns) == 1)
			umn_ns_unlimit(user);
}

unsigned int umn_ns_limited(void)
{
	return READ_ONCE(umn_nr_limited);
}

/*
 * UMMUNOTIFY_NS_LIMITS.  A limit lowered below what the container holds
 * refuses its next watches and pages, and takes nothing back.
 */
int umn_ns_limits(struct ummunotify_ns_limits __user *argp)
{
	struct umn_user *spare = NULL, *user;
	struct ummunotify_ns_limits req;
	struct user_namespace *ns;
	bool set, limit;
	int ret;

	if (copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	set = req.flags & UMMUNOTIFY_NS_LIMITS_SET;
	limit = req.max_watches || req.max_pages;
	if ((req.flags & ~UMMUNOTIFY_NS_LIMITS_SET) || req.reserved[0] ||
	    req.reserved[1] ||
	    (unsigned long)req.max_watches != req.max_watches ||
	    (unsigned long)req.max_pages != req.max_pages)
		return -EINVAL;
	/* A container's root may read its budget but not set it. */
	if (set && !capable(CAP_SYS_RESOURCE))
		return -EPERM;
	ret = umn_container_of(req.pid, &ns);
	/* Whether a process is in a container is not everyone's to learn. */
	if (ret == -EINVAL && req.pid > 0 &&
	    !ns_capable_noaudit(&init_user_ns, CAP_SYS_RESOURCE))
		ret = -EPERM;
	if (ret)
		return ret;
	ret = -EPERM;
	if (!ns_capable(ns, CAP_SYS_RESOURCE))
		goto out;
	/* Fail on an unwritable argument before anything changes. */
	ret = -EFAULT;
	if (copy_to_user(argp, &req, sizeof(req)))
		goto out;
	ret = -ENOMEM;
	if (set && limit) {
		spare = kzalloc(sizeof(*spare), GFP_KERNEL_ACCOUNT);
		if (!spare)
			goto out;
	}

	mutex_lock(&umn_users_lock);
	umn_ns_limits_reap();
	user = umn_user_find(ns, INVALID_UID);
	if (set && limit && !user)
		/* A container has no user above it: @spare will do. */
		user = umn_user_lookup(ns, INVALID_UID, &spare);
	else if (user)
		user->refs++;
	if (set && user) {
		WRITE_ONCE(user->max_watches, req.max_watches);
		WRITE_ONCE(user->max_pages, req.max_pages);
		if (limit && list_empty(&user->limited)) {
			/* The limits' own reference. */
			user->refs++;
			list_add(&user->limited, &umn_limited);
			WRITE_ONCE(umn_nr_limited, umn_nr_limited + 1);
		} else if (!limit && !list_empty(&user->limited)) {
			umn_ns_unlimit(user);
		}
	}
	if (user) {
		req.max_watches = umn_max_watches(user);
		req.max_pages = umn_max_pages(user);
		req.watches = atomic_long_read(&user->watches);
		req.pages = atomic_long_read(&user->pages);
		umn_user_put(user);
	} else {
		req.max_watches = umn_limit(&max_ns_watches);
		req.max_pages = umn_limit(&max_ns_pages);
		req.watches = 0;
		req.pages = 0;
	}
	mutex_unlock(&umn_users_lock);
	kfree(spare);
	ret = copy_to_user(argp, &req, sizeof(req)) ? -EFAULT : 0;
out:
	put_user_ns(ns);
	return ret;
}

/* The file is gone: what else it held was uncharged already. */
void umn_user_release(struct umn_file *file)
{
	umn_uncharge_up(file->user, UMN_FILE_PAGES, true);
	mutex_lock(&umn_users_lock);
	umn_user_put(file->user);
	mutex_unlock(&umn_users_lock);
}

/*
 * A teardown takes as long as its file's watches take to remove (it
 * waits for no invalidation).  The teardowns of the topmost user the
 * file is charged to (a user of the initial namespace, with the
 * namespaces it made; or a namespace root made, with its users) go one at
 * a time, in the order closed, so that one cannot take every worker of
 * the queue and hold up the others' (their budgets, the module).
 */
void umn_user_defer_teardown(struct umn_file *file)
{
	struct umn_user *top = file->user;

	while (top->parent)
		top = top->parent;
	/* umn_limits_exit()'s destroy_workqueue() waits for the put. */
	__module_get(THIS_MODULE);
	/* Onto an empty list: each run queued so far took its files. */
	if (llist_add(&file->teardown_node, &top->teardowns))
		queue_work(umn_teardown_wq, &top->teardown_work);
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
	    !umn_charge_up(file->user, 1, false))
		return -ENOSPC;
	file->nr_regions++;
	atomic_long_inc(&umn_nr_regions);
	return 0;
}

void umn_uncharge_watch(struct umn_file *file)
{
	umn_uncharge_up(file->user, 1, false);
	file->nr_regions--;
	atomic_long_dec(&umn_nr_regions);
}

int umn_charge_pages(struct umn_file *file, unsigned long pages)
{
	return umn_charge_up(file->user, pages, true) ? 0 : -ENOSPC;
}

void umn_uncharge_pages(struct umn_file *file, unsigned long pages)
{
	umn_uncharge_up(file->user, pages, true);
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
	max_ns_watches.dflt = max_user_watches.dflt;
	max_ns_pages.dflt = share;
	umn_teardown_wq = alloc_workqueue("ummunotify_release", WQ_UNBOUND, 0);
	return umn_teardown_wq ? 0 : -ENOMEM;
}

void umn_limits_exit(void)
{
	destroy_workqueue(umn_teardown_wq);
	mutex_lock(&umn_users_lock);
	while (!list_empty(&umn_limited))
		umn_ns_unlimit(list_first_entry(&umn_limited, struct umn_user,
						limited));
	mutex_unlock(&umn_users_lock);
	/* No file is left, so a user left is a reference leaked. */
	WARN_ON(!hash_empty(umn_users));
}
