/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel interfaces that differ among the kernels ummunotify supports.
 * Kbuild probes the headers of the kernel being built against (so that a
 * distribution's backport counts) and defines UMN_HAVE_* / UMN_NEED_*.
 */
#ifndef _UMMUNOTIFY_COMPAT_H
#define _UMMUNOTIFY_COMPAT_H

#include <linux/list_lru.h>
#include <linux/mm.h>

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

#endif /* _UMMUNOTIFY_COMPAT_H */
