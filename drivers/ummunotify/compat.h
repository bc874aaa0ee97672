/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What differs among the kernels ummunotify supports, from 5.10 on.
 * Kbuild probes the headers and defines UMN_HAVE_* for what the kernel
 * has; each bridge below gives older kernels the newer interface.
 */
#ifndef _UMMUNOTIFY_COMPAT_H
#define _UMMUNOTIFY_COMPAT_H

#include <linux/list_lru.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/pagemap.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/user_namespace.h>

/* Before 5.14 there is no device-exclusive access to be told about. */
#ifdef UMN_HAVE_MMU_NOTIFY_EXCLUSIVE
#define umn_event_exclusive(event)	((event) == MMU_NOTIFY_EXCLUSIVE)
#else
#define umn_event_exclusive(event)	false
#endif

/* How many references a user namespace has. */
#ifndef UMN_HAVE_NS_REF_READ
#ifdef UMN_HAVE_NS_COMMON_COUNT
#define ns_ref_read(user_ns)	refcount_read(&(user_ns)->ns.count)
#else
#define ns_ref_read(user_ns)	atomic_read(&(user_ns)->count)
#endif
#endif

#ifndef UMN_HAVE_FAULT_IN_WRITEABLE
static inline size_t fault_in_writeable(char __user *uaddr, size_t size)
{
	return fault_in_pages_writeable(uaddr, size) ? size : 0;
}
#endif

/*
 * Before 5.18 objects of a SLAB_ACCOUNT cache join their memory cgroup's
 * list_lru without being told about the list at allocation.
 */
#ifndef UMN_HAVE_KMEM_CACHE_ALLOC_LRU
static inline void *kmem_cache_alloc_lru(struct kmem_cache *cache,
					 struct list_lru *lru, gfp_t gfp)
{
	return kmem_cache_alloc(cache, gfp);
}
#endif

#ifndef UMN_HAVE_VM_FLAGS_MOD
static inline void vm_flags_mod(struct vm_area_struct *vma,
				vm_flags_t set, vm_flags_t clear)
{
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
}
#endif

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

/*
 * A memcg-aware shrinker "ummunotify" for lru, which takes its id, and
 * *ready set, with release, once lru is ready for the shrinker's calls.
 * 6.7 allocates shrinkers and gives the id at allocation, so the list is
 * ready before the shrinker is registered; before 6.7 the caller embeds
 * the shrinker, which gets its id at registration and may run before
 * the list is ready: its count_objects must look at *ready.
 */
typedef unsigned long umn_shrink_fn(struct shrinker *shrinker,
				    struct shrink_control *sc);

#ifdef UMN_HAVE_SHRINKER_ALLOC
struct umn_shrinker {
	struct shrinker *shrinker;
};

static inline int umn_shrinker_register(struct umn_shrinker *s,
					struct list_lru *lru,
					umn_shrink_fn *count,
					umn_shrink_fn *scan, bool *ready)
{
	int ret;

	s->shrinker = shrinker_alloc(SHRINKER_MEMCG_AWARE, "ummunotify");
	if (!s->shrinker)
		return -ENOMEM;
	s->shrinker->count_objects = count;
	s->shrinker->scan_objects = scan;
	ret = list_lru_init_memcg(lru, s->shrinker);
	if (ret) {
		shrinker_free(s->shrinker);
		return ret;
	}
	/* Pairs with smp_load_acquire() in umn_pressure_count(): list ready. */
	smp_store_release(ready, true);
	shrinker_register(s->shrinker);
	return 0;
}

static inline void umn_shrinker_unregister(struct umn_shrinker *s)
{
	shrinker_free(s->shrinker);
}
#else
struct umn_shrinker {
	struct shrinker shrinker;
};

/* Shrinkers have names since 6.0. */
#ifdef UMN_HAVE_SHRINKER_NAME
#define umn_register_named_shrinker(shrinker)	\
	register_shrinker(shrinker, "ummunotify")
#else
#define umn_register_named_shrinker(shrinker)	register_shrinker(shrinker)
#endif

static inline int umn_shrinker_register(struct umn_shrinker *s,
					struct list_lru *lru,
					umn_shrink_fn *count,
					umn_shrink_fn *scan, bool *ready)
{
	int ret;

	s->shrinker = (struct shrinker){
		.count_objects	= count,
		.scan_objects	= scan,
		.seeks		= DEFAULT_SEEKS,
		.flags		= SHRINKER_MEMCG_AWARE,
	};
	ret = umn_register_named_shrinker(&s->shrinker);
	if (ret)
		return ret;
	ret = list_lru_init_memcg(lru, &s->shrinker);
	if (ret) {
		unregister_shrinker(&s->shrinker);
		return ret;
	}
	/* Pairs with smp_load_acquire() in umn_pressure_count(): list ready. */
	smp_store_release(ready, true);
	return 0;
}

static inline void umn_shrinker_unregister(struct umn_shrinker *s)
{
	unregister_shrinker(&s->shrinker);
}
#endif

/* The parameters of a list_lru_walk_cb, named: 6.13 dropped the lock. */
#ifdef UMN_HAVE_LIST_LRU_WALK_LOCK
#define UMN_LRU_WALK_ARGS \
	struct list_head *item, struct list_lru_one *list, \
	spinlock_t *lock, void *arg
#else
#define UMN_LRU_WALK_ARGS \
	struct list_head *item, struct list_lru_one *list, void *arg
#endif

#endif /* _UMMUNOTIFY_COMPAT_H */
