// SPDX-License-Identifier: GPL-2.0
/*
 * The cache's index of watched ranges, which the userfaultfd handler and
 * the libc hooks search for the entries a change hit; and what the
 * backends that mark entries stale share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <search.h>

#include "bench.h"

static void *root;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Ranges that overlap compare equal: entries never do. */
static int compare(const void *a, const void *b)
{
	const struct region *x = a, *y = b;

	if (x->addr + x->len <= y->addr)
		return -1;
	return x->addr >= y->addr + y->len;
}

int index_add(struct region *e)
{
	void *node;
	int ret;

	pthread_mutex_lock(&lock);
	node = tsearch(e, &root, compare);
	/* Under the lock: the handler may delete the node at once. */
	ret = !node ? -ENOMEM : *(struct region **)node == e ? 0 : -EEXIST;
	pthread_mutex_unlock(&lock);
	return ret;
}

/* Unless a change dropped it first, and maybe another took its place. */
void index_del(struct region *e)
{
	void *node;

	pthread_mutex_lock(&lock);
	node = tfind(e, &root, compare);
	if (node && *(struct region **)node == e)
		tdelete(e, &root, compare);
	pthread_mutex_unlock(&lock);
}

unsigned long index_invalidate(uintptr_t start, uintptr_t end)
{
	struct region key = { .addr = (char *)start, .len = end - start };
	unsigned long hit = 0;
	void *node;

	if (start >= end)
		return 0;
	pthread_mutex_lock(&lock);
	while ((node = tfind(&key, &root, compare))) {
		struct region *e = *(struct region **)node;

		region_set_stale(e);
		tdelete(e, &root, compare);
		hit++;
	}
	pthread_mutex_unlock(&lock);
	return hit;
}

static void forget(void *node)
{
	(void)node;
}

void index_clear(void)
{
	pthread_mutex_lock(&lock);
	tdestroy(root, forget);
	root = NULL;
	pthread_mutex_unlock(&lock);
}

bool stale_valid(struct region *e)
{
	return !region_stale(e);
}

unsigned long stale_check(struct region *e, unsigned long n)
{
	unsigned long i;

#pragma GCC unroll 8
	for (i = 0; i < n; i++)
		if (region_stale(e))
			break;
	return i;
}

unsigned long nothing_to_drain(unsigned long *lost)
{
	(void)lost;
	return 0;
}
