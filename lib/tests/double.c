// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The test double: a struct umn_source whose invalidations the test
 * makes.  It behaves as the 2010 kernel does where the cache can tell:
 * the counter moves, under the same lock, whenever a report is queued;
 * one report per registration, widened by later hits; a report is
 * dropped with its registration.  A registration of [0, 0) is of the
 * whole address space and queues every hit exactly, as a ring does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "check.h"

struct reg {
	uint64_t cookie;
	uint64_t start;
	uint64_t end;
	uint64_t hit_start;	/* queued report, if hit */
	uint64_t hit_end;
	unsigned int cause;
	bool hit;
	bool all;		/* the whole address space */
};

/* A hit of a whole-space registration. */
struct all_hit {
	uint64_t cookie;
	uint64_t start;
	uint64_t end;
	unsigned int cause;
};

struct umn_double {
	pthread_mutex_t lock;
	uint64_t counter;
	struct reg *regs;
	unsigned int nr_regs;
	unsigned int cap;
	/*
	 * Index in regs by the cookie's low 32 bits, which emulated.c makes
	 * the slot: removal in O(1), for benchmarks with a million watches.
	 */
	unsigned int *where;
	unsigned int where_cap;
	struct all_hit *all_hits;	/* queued, oldest first */
	unsigned int nr_all_hits;
	unsigned int all_hits_cap;
	uint64_t pressure;
	bool pressure_pending;
	bool fail_pull;
	void (*change)(uint64_t start, uint64_t end, void *arg);
	void *change_arg;
};

static struct umn_double *priv(struct umn *u)
{
	return u->source_priv;
}

/* Also run again by a forked child: start afresh, as a new file would. */
static int double_src_open(struct umn *u)
{
	struct umn_double *d = priv(u);

	pthread_mutex_init(&d->lock, NULL);
	d->nr_regs = 0;
	d->nr_all_hits = 0;
	d->pressure_pending = false;
	d->fail_pull = false;
	u->counter = &d->counter;
	return 0;
}

static int double_add(struct umn *u, uint64_t cookie, uint64_t start,
		      uint64_t end)
{
	struct umn_double *d = priv(u);
	struct reg *regs;
	int ret = 0;

	uint32_t slot = (uint32_t)cookie;
	unsigned int *where;

	pthread_mutex_lock(&d->lock);
	if (d->nr_regs == d->cap) {
		regs = realloc(d->regs, (d->cap * 2 + 16) * sizeof(*regs));
		if (!regs) {
			ret = -ENOMEM;
			goto out;
		}
		d->regs = regs;
		d->cap = d->cap * 2 + 16;
	}
	if (slot >= d->where_cap) {
		where = realloc(d->where, (slot * 2 + 16) * sizeof(*where));
		if (!where) {
			ret = -ENOMEM;
			goto out;
		}
		d->where = where;
		d->where_cap = slot * 2 + 16;
	}
	d->where[slot] = d->nr_regs;
	d->regs[d->nr_regs++] = (struct reg){ .cookie = cookie,
					      .start = start, .end = end,
					      .all = start == end };
out:
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int double_remove(struct umn *u, uint64_t cookie)
{
	struct umn_double *d = priv(u);
	uint32_t slot = (uint32_t)cookie;
	unsigned int i;
	int ret = -EINVAL;

	pthread_mutex_lock(&d->lock);
	i = slot < d->where_cap ? d->where[slot] : d->nr_regs;
	/* A resize briefly has two cookies on one slot: then search. */
	if (i >= d->nr_regs || d->regs[i].cookie != cookie)
		for (i = 0; i < d->nr_regs; i++)
			if (d->regs[i].cookie == cookie)
				break;
	if (i < d->nr_regs) {
		d->regs[i] = d->regs[--d->nr_regs];
		d->where[(uint32_t)d->regs[i].cookie] = i;
		ret = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int double_pull(struct umn *u)
{
	struct umn_double *d = priv(u);
	unsigned int i;
	int ret = 0;

	pthread_mutex_lock(&d->lock);
	if (d->fail_pull) {
		d->fail_pull = false;
		ret = -EIO;
	}
	for (i = 0; i < d->nr_regs; i++) {
		struct reg *r = &d->regs[i];

		if (r->hit && !ret)
			umn__report(u, r->cookie, r->hit_start, r->hit_end,
				    r->cause);
		r->hit = false;
	}
	for (i = 0; i < d->nr_all_hits && !ret; i++)
		umn__report(u, d->all_hits[i].cookie, d->all_hits[i].start,
			    d->all_hits[i].end, d->all_hits[i].cause);
	d->nr_all_hits = 0;
	if (d->pressure_pending && !ret)
		umn__report_pressure(u, d->pressure);
	d->pressure_pending = false;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static const struct umn_source double_source = {
	.open = double_src_open,
	.add = double_add,
	.remove = double_remove,
	.pull = double_pull,
};

int double_open(struct umn **u, const struct umn_attr *attr,
		struct umn_double **dp)
{
	struct umn_double *d = calloc(1, sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	ret = umn__open_source(u, attr, &double_source, d);
	if (ret) {
		free(d);
		return ret;
	}
	*dp = d;
	return 0;
}

void double_free(struct umn_double *d)
{
	free(d->all_hits);
	free(d->where);
	free(d->regs);
	free(d);
}

static void double_bump(struct umn_double *d)
{
	store_release(d->counter, d->counter + 1);
}

/* d->lock held. */
static void all_hit(struct umn_double *d, const struct reg *r, uint64_t start,
		    uint64_t end, unsigned int cause)
{
	struct all_hit *hits = d->all_hits;

	if (d->nr_all_hits == d->all_hits_cap) {
		d->all_hits_cap = d->all_hits_cap * 2 + 16;
		hits = realloc(hits, d->all_hits_cap * sizeof(*hits));
		CHECK(hits);
		d->all_hits = hits;
	}
	hits[d->nr_all_hits++] = (struct all_hit){ r->cookie, start, end,
						   cause };
}

unsigned int double_invalidate(struct umn_double *d, uint64_t start,
			       uint64_t end, unsigned int cause)
{
	unsigned int i, hits = 0;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < d->nr_regs; i++) {
		struct reg *r = &d->regs[i];
		uint64_t s = start > r->start ? start : r->start;
		uint64_t e = end < r->end ? end : r->end;

		if (r->all) {
			all_hit(d, r, start, end, cause);
			hits++;
			continue;
		}
		if (s >= e)
			continue;
		if (!r->hit) {
			r->hit = true;
			r->hit_start = s;
			r->hit_end = e;
			r->cause = cause;
		} else {
			r->hit_start = r->start;
			r->hit_end = r->end;
		}
		hits++;
	}
	if (hits)
		double_bump(d);
	/* The pages change after the reports, before a watch can start. */
	if (d->change)
		d->change(start, end, d->change_arg);
	pthread_mutex_unlock(&d->lock);
	return hits;
}

void double_on_change(struct umn_double *d,
		      void (*change)(uint64_t start, uint64_t end, void *arg),
		      void *arg)
{
	d->change = change;
	d->change_arg = arg;
}

void double_pressure(struct umn_double *d, uint64_t bytes)
{
	pthread_mutex_lock(&d->lock);
	d->pressure = bytes;
	d->pressure_pending = true;
	double_bump(d);
	pthread_mutex_unlock(&d->lock);
}

void double_fail_pull(struct umn_double *d)
{
	pthread_mutex_lock(&d->lock);
	d->fail_pull = true;
	double_bump(d);
	pthread_mutex_unlock(&d->lock);
}

unsigned int double_watches(struct umn_double *d)
{
	unsigned int n;

	pthread_mutex_lock(&d->lock);
	n = d->nr_regs;
	pthread_mutex_unlock(&d->lock);
	return n;
}
