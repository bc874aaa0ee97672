/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libummunotify-verbs: ibv_reg_mr() through a registration cache that
 * drops an MR as soon as the memory behind it is unmapped or replaced.
 *
 * As in libibverbs, a function returning a pointer returns NULL and sets
 * errno on failure; one returning int returns 0 or an errno value.
 * See umn_mr_cache_create(3).
 */
#ifndef UMMUNOTIFY_VERBS_H
#define UMMUNOTIFY_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <ummunotify.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The MRs of one protection domain. */
struct umn_mr_cache;

/* One use of a cached MR, given back with umn_mr_put(). */
struct umn_mr_ref;

/* umn_mr_cache_create() settings; a NULL attr means all defaults. */
struct umn_mr_cache_attr {
	size_t max_entries;	/* MRs kept per access value; 0: no limit */
	size_t max_bytes;	/* bytes kept per access value; 0: no limit */
	struct umn_attr umn;	/* how /dev/ummunotify is opened; zeroes:
				 * the defaults (see umn_open(3)) */
	/*
	 * 0; a field added after it comes with a bit here (see struct
	 * umn_attr).  umn cannot grow in place: settings umn_open() gains
	 * later come after comp_mask, under a bit.
	 */
	uint32_t comp_mask;
};

struct umn_mr_cache *umn_mr_cache_create(struct ibv_pd *pd,
					 const struct umn_mr_cache_attr *attr);
int umn_mr_cache_destroy(struct umn_mr_cache *cache);

struct ibv_mr *umn_reg_mr_cached(struct umn_mr_cache *cache, void *addr,
				 size_t length, int access,
				 struct umn_mr_ref **ref);
void umn_mr_put(struct umn_mr_ref *ref);

/* The thirteen counters of 1.0, summed over the cache's access values. */
void umn_mr_cache_stats(struct umn_mr_cache *cache,
			struct umn_cache_stats *stats);
/* Every counter, as umn_cache_query_stats(3) fills them.  Added in 1.1. */
int umn_mr_cache_query_stats(struct umn_mr_cache *cache,
			     struct umn_cache_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOTIFY_VERBS_H */
