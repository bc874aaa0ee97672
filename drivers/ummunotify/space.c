// SPDX-License-Identifier: GPL-2.0
/*
 * What the files of one address space share: its notifier (watch_all.c),
 * which holds their range watches, and how many of them asked for
 * pressure events.
 */

#include <linux/hashtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "umn.h"

/**
 * struct umn_space - what the files of one address space share
 * @node:		in umn_spaces, under umn_spaces_lock
 * @mm:			the address space; each file holds it with mmgrab()
 * @files:		files sharing this, under umn_spaces_lock
 * @pressure_files:	of those, the ones on the pressure list
 * @join_lock:		registering @notifier
 * @notifier:		the address space's notifier (watch_all.c), once a
 *			file of it watched: one reference for all the files
 */
struct umn_space {
	struct hlist_node node;
	struct mm_struct *mm;
	unsigned int files;
	atomic_t pressure_files;
	struct mutex join_lock;	/* @notifier */
	struct umn_all_mm *notifier;
};

static DEFINE_HASHTABLE(umn_spaces, 6);
static DEFINE_MUTEX(umn_spaces_lock);

/* At open: find or make the opener's address space's. */
int umn_space_get(struct umn_file *file)
{
	struct umn_space *space;
	int ret = 0;

	mutex_lock(&umn_spaces_lock);
	hash_for_each_possible(umn_spaces, space, node, (unsigned long)file->mm)
		if (space->mm == file->mm)
			goto found;
	space = kzalloc(sizeof(*space), GFP_KERNEL_ACCOUNT);
	if (!space) {
		ret = -ENOMEM;
		goto out;
	}
	space->mm = file->mm;
	mutex_init(&space->join_lock);
	hash_add(umn_spaces, &space->node, (unsigned long)file->mm);
found:
	space->files++;
	file->space = space;
out:
	mutex_unlock(&umn_spaces_lock);
	return ret;
}

/* The file's watches are gone and it has left the pressure list. */
void umn_space_put(struct umn_file *file)
{
	struct umn_space *space = file->space;

	mutex_lock(&umn_spaces_lock);
	if (!--space->files) {
		hash_del(&space->node);
		if (space->notifier)
			umn_all_put(space->notifier);
		kfree(space);
	}
	mutex_unlock(&umn_spaces_lock);
}

/*
 * The address space's notifier, registered by the first of its files to
 * watch, for them all: its later files, and the owner's threads, do not
 * take mmap_lock for it.  Without regions_lock (see umn_all_get()).
 */
struct umn_all_mm *umn_space_notifier(struct umn_file *file)
{
	struct umn_space *space = file->space;
	struct umn_all_mm *all;

	/* Held by a thread of the owner registering it: killable too. */
	if (mutex_lock_killable(&space->join_lock))
		return ERR_PTR(-EINTR);
	all = space->notifier;
	if (!all) {
		all = umn_all_get(file->mm);
		if (!IS_ERR(all))
			space->notifier = all;
	}
	mutex_unlock(&space->join_lock);
	return all;
}

/* The files of the address space that are on the pressure list. */
unsigned int umn_space_pressure_files(struct umn_file *file)
{
	return atomic_read(&file->space->pressure_files);
}

void umn_space_pressure_add(struct umn_file *file, int n)
{
	atomic_add(n, &file->space->pressure_files);
}
