// SPDX-License-Identifier: GPL-2.0
/*
 * Memory-pressure advisories: reclaim asks the files that want them,
 * through a memcg-aware shrinker, to give back registrations.
 */

#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/shrinker.h>
#include <linux/slab.h>

#include "umn.h"

static unsigned int pressure_interval_ms = 1000;
module_param(pressure_interval_ms, uint, 0644);
MODULE_PARM_DESC(pressure_interval_ms, "Minimum interval between two pressure events to one file (default 1000)");

/*
 * Files that asked for pressure events, on the list of their memory
 * cgroup, so that reclaim in that cgroup asks them (and only them).
 */
struct list_lru umn_pressure_lru;
static bool umn_pressure_ready;

/*
 * Memory pressure.  The files of a memory cgroup that asked for pressure
 * events make one cache, in the shrinker's sense, whose objects are pages
 * they could give back: what each watches, up to its share of what its
 * process has resident (the pinned pages of its registrations are among
 * those).  Reclaim in that cgroup, in an ancestor, or of the whole
 * machine asks that cache for pages as it asks every cache; nothing here
 * can free them.  Each call is split among the files, and each file is
 * told, at most once per pressure_interval_ms, how many bytes reclaim
 * asked of it since the last time: only the application knows which
 * registrations to drop.
 *
 * A cgroup may hold many such files and reclaim runs often: a call looks
 * at UMN_PRESSURE_WALK files at most, under the list's lock, and moves
 * them to the end of the list so that the next call asks the next ones.
 */
#define UMN_PRESSURE_WALK	32

struct umn_pressure_walk {
	unsigned long budget;	/* files still to look at */
	unsigned long files;	/* files looked at */
	unsigned long pages;	/* what they could give back */
	unsigned long estimate;	/* ... all the cgroup's files, estimated */
	unsigned long asked;	/* pages reclaim asks for */
};

/*
 * Pages a file could give back.  Virtual address space is no memory: a
 * watch of a huge unmapped range must not make reclaim try forever.
 */
static unsigned long umn_pressure_pages(struct umn_file *file)
{
	return min_t(unsigned long, atomic_long_read(&file->watched_pages),
		   get_mm_rss(file->mm) /
		   max(umn_space_pressure_files(file), 1U));
}

static enum lru_status umn_pressure_count_one(UMN_LRU_WALK_ARGS)
{
	struct umn_file *file = container_of(item, struct umn_file,
					     pressure_node);
	struct umn_pressure_walk *walk = arg;

	walk->files++;
	walk->pages += umn_pressure_pages(file);
	return LRU_SKIP;
}

static enum lru_status umn_pressure_ask_one(UMN_LRU_WALK_ARGS)
{
	struct umn_file *file = container_of(item, struct umn_file,
					     pressure_node);
	u64 pages = umn_pressure_pages(file);
	struct umn_pressure_walk *walk = arg;
	struct ummunotify_ring_event event = {
		.slot = UMMUNOTIFY_NO_SLOT,
		.cause = UMMUNOTIFY_CAUSE_PRESSURE,
	};
	bool posted = false;
	u64 share;

	/*
	 * In bytes: a call's 128 pages split among thousands of files are
	 * less than a page each.  The sizes moved since they were added
	 * up: never more than asked.
	 */
	share = min_t(u64, (u64)walk->asked << PAGE_SHIFT,
		      mul_u64_u64_div_u64((u64)walk->asked << PAGE_SHIFT,
					  pages, walk->estimate));
	spin_lock(&file->lock);
	file->pressure_bytes = min(file->pressure_bytes + share,
				   pages << PAGE_SHIFT);
	if (file->pressure_bytes && !file->released &&
	    time_after_eq(jiffies, file->pressure_next)) {
		event.generation = file->pressure_bytes;
		posted = umn_ring_post(file, &event);
	}
	if (posted) {
		file->pressure_bytes = 0;
		file->pressure_next = jiffies +
			msecs_to_jiffies(READ_ONCE(pressure_interval_ms));
	}
	spin_unlock(&file->lock);
	if (posted)
		umn_wake(file);
	return LRU_ROTATE;
}

/*
 * SETUP publishes the file: it joins its cgroup's list, counted first
 * among its address space's, which share its RSS.
 */
void umn_pressure_add(struct umn_file *file)
{
	umn_space_pressure_add(file, 1);
	list_lru_add_obj(&umn_pressure_lru, &file->pressure_node);
}

/* The file is closing: after this no walk can see it. */
void umn_pressure_del(struct umn_file *file)
{
	if (list_lru_del_obj(&umn_pressure_lru, &file->pressure_node))
		umn_space_pressure_add(file, -1);
}

/* Not NUMA aware: the cgroup's files may sit on any node. */
static unsigned long umn_pressure_files(struct mem_cgroup *memcg)
{
	unsigned long files = 0;
	int nid;

	for_each_node_state(nid, N_NORMAL_MEMORY)
		files += list_lru_count_one(&umn_pressure_lru, nid, memcg);
	return files;
}

static void umn_pressure_walk(struct mem_cgroup *memcg, list_lru_walk_cb cb,
			      struct umn_pressure_walk *walk)
{
	unsigned long nr = walk->budget;
	int nid;

	for_each_node_state(nid, N_NORMAL_MEMORY) {
		list_lru_walk_one(&umn_pressure_lru, nid, memcg, cb, walk, &nr);
		if (!nr)
			break;
	}
}

/* Look at the first files: what all of them could give back, estimated. */
static unsigned long umn_pressure_sample(struct mem_cgroup *memcg,
					 struct umn_pressure_walk *walk)
{
	unsigned long files = umn_pressure_files(memcg);

	if (!files)
		return 0;
	walk->budget = UMN_PRESSURE_WALK;
	umn_pressure_walk(memcg, umn_pressure_count_one, walk);
	if (!walk->files)
		return 0;
	return mul_u64_u64_div_u64(walk->pages, files, walk->files);
}

static unsigned long umn_pressure_count(struct shrinker *shrinker,
					struct shrink_control *sc)
{
	struct umn_pressure_walk walk = {};
	unsigned long estimate;

	/*
	 * Pairs with smp_store_release() in umn_shrinker_register(): before
	 * 6.7 the list can only be set up after registration.
	 */
	if (!smp_load_acquire(&umn_pressure_ready))
		return 0;
	estimate = umn_pressure_sample(sc->memcg, &walk);
	return walk.files ? estimate : SHRINK_EMPTY;
}

static unsigned long umn_pressure_scan(struct shrinker *shrinker,
				       struct shrink_control *sc)
{
	struct umn_pressure_walk walk = { .asked = sc->nr_to_scan };

	walk.estimate = umn_pressure_sample(sc->memcg, &walk);
	if (!walk.estimate)
		return SHRINK_STOP;
	/* The same files, asked and moved to the end of the list. */
	walk.budget = walk.files;
	umn_pressure_walk(sc->memcg, umn_pressure_ask_one, &walk);
	/*
	 * Nothing here frees anything: the files were asked, and asking
	 * again in the same call would only stall reclaim.
	 */
	return SHRINK_STOP;
}

static struct umn_shrinker umn_pressure_shrinker;

int umn_pressure_init(void)
{
	return umn_shrinker_register(&umn_pressure_shrinker, &umn_pressure_lru,
				     umn_pressure_count, umn_pressure_scan,
				     &umn_pressure_ready);
}

void umn_pressure_exit(void)
{
	umn_shrinker_unregister(&umn_pressure_shrinker);
	list_lru_destroy(&umn_pressure_lru);
}
