// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ibv_reg_mr() through libummunotify's registration cache.
 *
 * The cache knows ranges, not access flags.  Served from one cache, a
 * request could get an MR made with fewer flags than it asks for (the
 * peer's RDMA then fails) or with more (the peer gets access nobody asked
 * to give it).  So each access value has a cache of its own, made at the
 * first request with that value; a /dev/ummunotify handle serves one
 * cache, so each has its own handle too.  Programs use a handful of
 * access values: the list stays short, only grows, and is searched
 * without a lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ummunotify-verbs.h"

/* The cache of one access value. */
struct mr_sub {
	struct mr_sub *next;		/* fixed once published */
	struct ibv_pd *pd;
	int access;
	struct umn *u;
	struct umn_cache *cache;
};

/* An entry's handle: the MR, and the cache umn_mr_put() gives it to. */
struct mr_reg {
	struct ibv_mr *mr;
	struct mr_sub *sub;
};

struct umn_mr_cache {
	struct ibv_pd *pd;
	struct umn_mr_cache_attr attr;
	/*
	 * Opened by umn_mr_cache_create(), so that a missing device fails
	 * there and not at the first registration; the first cache takes it.
	 */
	struct umn *spare;
	pthread_mutex_t lock;		/* adds to subs */
	struct mr_sub *subs;		/* newest first; published with release */
};

/* A reference is the cache's entry, under a name of our own. */
static struct umn_cache_entry *ref_entry(struct umn_mr_ref *ref)
{
	return (struct umn_cache_entry *)ref;
}

static int mr_reg(void *arg, void *addr, size_t len, void **handle)
{
	struct mr_sub *s = arg;
	struct mr_reg *r = malloc(sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->mr = ibv_reg_mr(s->pd, addr, len, s->access);
	if (!r->mr) {
		err = errno;
		free(r);
		return -err;
	}
	r->sub = s;
	*handle = r;
	return 0;
}

static void mr_dereg(void *arg, void *addr, size_t len, void *handle)
{
	struct mr_reg *r = handle;

	(void)arg;
	(void)addr;
	(void)len;
	/*
	 * It fails only while a memory window is bound to the MR, which the
	 * caller had to unbind before the put: nothing to do about it here.
	 */
	ibv_dereg_mr(r->mr);
	free(r);
}

/*
 * In a forked child, for the parent's MR: ibv_dereg_mr() would destroy it
 * through the uverbs file the two processes share.  The child's copy of
 * struct ibv_mr is the provider's to free, so it stays.
 */
static void mr_forget(void *arg, void *addr, size_t len, void *handle)
{
	(void)arg;
	(void)addr;
	(void)len;
	free(handle);
}

static struct mr_sub *sub_find(struct umn_mr_cache *c, int access)
{
	struct mr_sub *s;

	/* Acquire: pairs with sub_get()'s release; a pushed sub never changes. */
	for (s = __atomic_load_n(&c->subs, __ATOMIC_ACQUIRE); s; s = s->next)
		if (s->access == access)
			return s;
	return NULL;
}

/* c->lock held.  0 or a negative errno value. */
static int sub_create(struct umn_mr_cache *c, int access, struct mr_sub **sp)
{
	struct umn_cache_attr attr = {
		.reg = mr_reg,
		.dereg = mr_dereg,
		.forget = mr_forget,
		.max_entries = c->attr.max_entries,
		.max_bytes = c->attr.max_bytes,
	};
	struct mr_sub *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->pd = c->pd;
	s->access = access;
	if (c->spare) {
		s->u = c->spare;
		c->spare = NULL;
	} else {
		ret = umn_open(&s->u, &c->attr.umn);
		if (ret)
			goto err_free;
	}
	attr.arg = s;
	ret = umn_cache_create(s->u, &attr, &s->cache);
	if (ret)
		goto err_close;
	*sp = s;
	return 0;

err_close:
	umn_close(s->u);
err_free:
	free(s);
	return ret;
}

/* The cache for access; NULL with errno set if it cannot be made. */
static struct mr_sub *sub_get(struct umn_mr_cache *c, int access)
{
	struct mr_sub *s = sub_find(c, access);
	int ret = 0;

	if (s)
		return s;
	pthread_mutex_lock(&c->lock);
	s = sub_find(c, access);
	if (!s) {
		ret = sub_create(c, access, &s);
		if (!ret) {
			s->next = c->subs;
			/* Release: pairs with the lockless walks' acquire. */
			__atomic_store_n(&c->subs, s, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return s;
}

struct umn_mr_cache *umn_mr_cache_create(struct ibv_pd *pd,
					 const struct umn_mr_cache_attr *attr)
{
	struct umn_mr_cache *c;
	int ret;

	if (!pd || (attr && attr->comp_mask)) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->pd = pd;
	if (attr)
		c->attr = *attr;
	ret = umn_open(&c->spare, &c->attr.umn);
	if (ret) {
		free(c);
		errno = -ret;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

int umn_mr_cache_destroy(struct umn_mr_cache *c)
{
	struct umn_cache_stats stats;
	struct mr_sub *s;

	if (!c)
		return 0;
	umn_mr_cache_stats(c, &stats);
	if (stats.in_use)
		return EBUSY;
	while ((s = c->subs)) {
		c->subs = s->next;
		/* Deregisters every MR; it cannot fail with none in use. */
		umn_cache_destroy(s->cache);
		umn_close(s->u);
		free(s);
	}
	umn_close(c->spare);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

struct ibv_mr *umn_reg_mr_cached(struct umn_mr_cache *c, void *addr,
				 size_t length, int access,
				 struct umn_mr_ref **ref)
{
	struct mr_sub *s = sub_get(c, access);
	struct umn_cache_entry *e;
	int ret;

	if (!s)
		return NULL;
	ret = umn_cache_get(s->cache, addr, length, &e);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	*ref = (struct umn_mr_ref *)e;
	return ((struct mr_reg *)e->handle)->mr;
}

void umn_mr_put(struct umn_mr_ref *ref)
{
	struct umn_cache_entry *e = ref_entry(ref);
	struct mr_reg *r = e->handle;

	umn_cache_put(r->sub->cache, e);
}

/*
 * Each access value's counters, as many as @size holds, summed.  0 or
 * an errno value.
 */
int umn_mr_cache_query_stats(struct umn_mr_cache *c,
			     struct umn_cache_stats *stats, size_t size)
{
	struct umn_cache_stats buf;
	uint64_t *one = (uint64_t *)&buf, *sum = (uint64_t *)stats;
	struct mr_sub *s;
	size_t i;

	/* umn_cache_query_stats()'s rule, also when no cache exists yet. */
	if (size < UMN_CACHE_STATS_SIZE_1_0 || size % sizeof(*one))
		return EINVAL;
	/*
	 * The heap only for a caller with more counters than this header
	 * has: umn_mr_cache_stats(), and so umn_mr_cache_destroy(), cannot
	 * fail.
	 */
	if (size > sizeof(buf)) {
		one = malloc(size);
		if (!one)
			return ENOMEM;
	}
	memset(stats, 0, size);
	for (s = __atomic_load_n(&c->subs, __ATOMIC_ACQUIRE); s; s = s->next) {
		/* Cannot fail: the size is checked above. */
		umn_cache_query_stats(s->cache, (void *)one, size);
		for (i = 0; i < size / sizeof(*one); i++)
			sum[i] += one[i];
	}
	if (one != (uint64_t *)&buf)
		free(one);
	return 0;
}

void umn_mr_cache_stats(struct umn_mr_cache *c, struct umn_cache_stats *stats)
{
	umn_mr_cache_query_stats(c, stats, UMN_CACHE_STATS_SIZE_1_0);
}
