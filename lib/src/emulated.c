// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Generation words kept by the library, for sources that only queue
 * reports (the 2010 ABI).  A report bumps its watch's word when it is
 * pulled; umn_valid() pulls first whenever the source's counter moved, so
 * a watch never reads valid after an invalidation that the counter had
 * shown.  Each watch has at most one pending report, widened by later
 * hits, so the queue never overflows.
 *
 * A source cookie is (sequence << 32 | slot): the slot finds the watch,
 * the sequence tells a report for an old watch of the same slot.
 *
 * The whole-space watch's reports are not coalesced, since the ranges are
 * all it says: they are kept exact in a ring of attr.ring_entries records,
 * and one that does not fit is lost, reported as the kernel's ring does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

static uint64_t emulated_cookie(struct umn *u, uint32_t slot)
{
	return ++u->next_cookie << 32 | slot;
}

/* pull_lock held. */
static void pending_unlink(struct umn *u, struct umn_slot *s)
{
	if (!s->pending)
		return;
	if (s->prev == UMN_NIL)
		u->pending_head = s->next;
	else
		u->slots[s->prev].next = s->next;
	if (s->next == UMN_NIL)
		u->pending_tail = s->prev;
	else
		u->slots[s->next].prev = s->prev;
	s->pending = false;
}

/* pull_lock held. */
static void pending_append(struct umn *u, uint32_t i)
{
	struct umn_slot *s = &u->slots[i];

	s->pending = true;
	s->next = UMN_NIL;
	s->prev = u->pending_tail;
	if (u->pending_tail == UMN_NIL)
		u->pending_head = i;
	else
		u->slots[u->pending_tail].next = i;
	u->pending_tail = i;
}

/* pull_lock held. */
static void record_append(struct umn *u, uint64_t start, uint64_t end,
			  unsigned int cause)
{
	if (u->records_tail - u->records_head > u->records_mask) {
		WRITE_ONCE(u->lost, true);
		return;
	}
	u->records[u->records_tail++ & u->records_mask] = (struct umn_record){
		.start = start,
		.end = end,
		.generation = u->next_gen,
		.cause = cause,
	};
}

void umn__report(struct umn *u, uint64_t cookie, uint64_t start,
		 uint64_t end, unsigned int cause)
{
	uint32_t i = (uint32_t)cookie;
	struct umn_slot *s;

	if (i >= u->nr_slots)
		return;
	s = &u->slots[i];
	if (!s->watch || s->cookie != cookie)
		return;
	/* Release: pairs with umn_valid()'s acquire of the word. */
	store_release(u->gens[i], ++u->next_gen);
	if (s->watch == &u->all) {
		record_append(u, start, end, cause);
		return;
	}
	if (!s->pending) {
		s->start = start;
		s->end = end;
		s->cause = cause;
		pending_append(u, i);
		return;
	}
	if (start < s->start)
		s->start = start;
	if (end > s->end)
		s->end = end;
	if (s->cause != cause)
		s->cause = UMN_CAUSE_UNKNOWN;
}

/* pull_lock held.  Requests coalesce: amounts add up, 0 ("all") wins. */
void umn__report_pressure(struct umn *u, uint64_t bytes)
{
	if (u->pressure && (!bytes || !u->pressure_bytes))
		u->pressure_bytes = 0;
	else
		u->pressure_bytes += bytes;
	u->pressure = true;
}

/*
 * The source failed to say what changed: assume everything did, and
 * report an overflow so that owners check every watch.
 */
static void emulated_lose_all(struct umn *u)
{
	uint32_t i;

	for (i = 0; i < u->nr_slots; i++)
		if (u->slots[i].watch)
			store_release(u->gens[i], ++u->next_gen);
	WRITE_ONCE(u->lost, true);
}

/* pull_lock held. */
static void emulated_pull_locked(struct umn *u)
{
	/*
	 * Acquire: pull()'s read() comes after.  The kernel moves the counter
	 * (relaxed) and queues the report under one hold of its file lock,
	 * which that read() takes: it gets every report the value counted.
	 */
	uint64_t counter = load_acquire(*u->counter);

	if (counter == READ_ONCE(u->fast.pulled))
		return;
	if (u->source->pull(u))
		emulated_lose_all(u);
	/* Release: pairs with umn_valid()'s acquire of pulled (the words). */
	store_release(u->fast.pulled, counter);
}

/* pull_lock held: the handle's descriptor polls readable until drained. */
static void emulated_wake(struct umn *u)
{
	static const uint64_t one = 1;

	if (!u->woken && write(u->wake_fd, &one, sizeof(one)) == sizeof(one))
		u->woken = true;
}

/*
 * From umn_valid(): what this takes from the source no longer makes the
 * source's descriptor readable, so make the handle's readable instead,
 * until a drain has reported it.
 */
void umn__pull(struct umn *u)
{
	pthread_mutex_lock(&u->pull_lock);
	emulated_pull_locked(u);
	if (u->pending_head != UMN_NIL || u->pressure)
		emulated_wake(u);
	pthread_mutex_unlock(&u->pull_lock);
}

/* pull_lock held. */
static void emulated_free_slot(struct umn *u, uint32_t i)
{
	struct umn_slot *s = &u->slots[i];

	pending_unlink(u, s);
	s->watch = NULL;
	s->cookie = 0;
	store_release(u->gens[i], 0);
	s->next = u->free_slot;
	u->free_slot = i;
}

static int emulated_watch(struct umn *u, uint64_t start, uint64_t end,
			  unsigned int causes, struct umn_watch *w)
{
	uint32_t i = u->free_slot;
	uint64_t cookie, gen;
	int ret;

	/* The 2010 ABI reports its own fixed set, and cannot say which. */
	if (causes != UMN_CAUSES_DEFAULT)
		return -EOPNOTSUPP;
	if (i == UMN_NIL)
		return -ENOSPC;
	cookie = emulated_cookie(u, i);

	pthread_mutex_lock(&u->pull_lock);
	u->free_slot = u->slots[i].next;
	u->slots[i].watch = w;
	u->slots[i].cookie = cookie;
	gen = ++u->next_gen;
	store_release(u->gens[i], gen);
	pthread_mutex_unlock(&u->pull_lock);

	ret = u->source->add(u, cookie, start, end);
	if (ret) {
		pthread_mutex_lock(&u->pull_lock);
		emulated_free_slot(u, i);
		pthread_mutex_unlock(&u->pull_lock);
		return ret;
	}
	umn__watch_made(u, w, &u->gens[i], gen);
	w->cookie = cookie;
	w->slot = i;
	return 0;
}

static int emulated_unwatch(struct umn *u, struct umn_watch *w)
{
	/* First, so that no report for it can be queued afterwards. */
	int ret = u->source->remove(u, w->cookie);

	pthread_mutex_lock(&u->pull_lock);
	emulated_free_slot(u, w->slot);
	pthread_mutex_unlock(&u->pull_lock);
	return ret;
}

/*
 * Watch the new range under a new cookie before dropping the old one, so
 * that no moment is unwatched; pull the old cookie's reports before the
 * slot answers to the new one only.
 */
static int emulated_resize(struct umn *u, struct umn_watch *w,
			   uint64_t start, uint64_t end)
{
	uint64_t old = w->cookie, cookie = emulated_cookie(u, w->slot);
	int ret = u->source->add(u, cookie, start, end);

	if (ret)
		return ret;
	pthread_mutex_lock(&u->pull_lock);
	emulated_pull_locked(u);
	u->slots[w->slot].cookie = cookie;
	w->cookie = cookie;
	pthread_mutex_unlock(&u->pull_lock);
	u->source->remove(u, old);
	return 0;
}

/*
 * One report at a time, pull_lock dropped around the callback: it may
 * unwatch (itself or others), which takes pull_lock and unlinks reports.
 * At most max of them.
 */
static int emulated_drain(struct umn *u, umn_event_fn *fn, void *arg,
			  size_t max)
{
	struct umn_record record;
	struct umn_event event;
	struct umn_slot *s;
	uint64_t count;
	size_t n = 0;

	pthread_mutex_lock(&u->pull_lock);
	emulated_pull_locked(u);
	while (u->pending_head != UMN_NIL && n < max) {
		s = &u->slots[u->pending_head];
		event = (struct umn_event){
			.watch = s->watch,
			.start = s->start,
			.end = s->end,
			.cause = s->cause,
		};
		pending_unlink(u, s);
		pthread_mutex_unlock(&u->pull_lock);
		fn(arg, &event);
		n++;
		pthread_mutex_lock(&u->pull_lock);
	}
	while (u->records_head != u->records_tail && n < max) {
		record = u->records[u->records_head++ & u->records_mask];
		event = (struct umn_event){
			.watch = &u->all,
			.start = record.start,
			.end = record.end,
			.value = record.generation,
			.cause = record.cause,
		};
		pthread_mutex_unlock(&u->pull_lock);
		fn(arg, &event);
		umn__all_reported(u, record.generation);
		n++;
		pthread_mutex_lock(&u->pull_lock);
	}
	if (u->pressure && n < max) {
		event = (struct umn_event){
			.cause = UMN_CAUSE_PRESSURE,
			.value = u->pressure_bytes,
		};
		u->pressure = false;
		u->pressure_bytes = 0;
		pthread_mutex_unlock(&u->pull_lock);
		fn(arg, &event);
		n++;
		pthread_mutex_lock(&u->pull_lock);
	}
	if (u->pending_head != UMN_NIL || u->records_head != u->records_tail ||
	    u->pressure) {
		/* Stopped at max: the rest is for the next drain. */
		emulated_wake(u);
	} else {
		/* Everything the counter had shown is now reported. */
		WRITE_ONCE(u->seen, READ_ONCE(u->fast.pulled));
		if (u->woken && read(u->wake_fd, &count, sizeof(count)) ==
				sizeof(count))
			u->woken = false;
	}
	pthread_mutex_unlock(&u->pull_lock);
	return (int)n;
}

const struct umn_ops umn__emulated_ops = {
	.watch = emulated_watch,
	.unwatch = emulated_unwatch,
	.resize = emulated_resize,
	.drain = emulated_drain,
};

/*
 * umn_fd() is an epoll set of the source's descriptor, if any, and an
 * eventfd for the reports umn_valid() pulled: readable while either is.
 */
static int emulated_poll_setup(struct umn *u)
{
	struct epoll_event event = { .events = EPOLLIN };

	u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	u->woken = false;
	u->poll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (u->wake_fd < 0 || u->poll_fd < 0 ||
	    epoll_ctl(u->poll_fd, EPOLL_CTL_ADD, u->wake_fd, &event) ||
	    (u->fd >= 0 &&
	     epoll_ctl(u->poll_fd, EPOLL_CTL_ADD, u->fd, &event)))
		return -errno;
	return 0;
}

int umn__emulated_setup(struct umn *u)
{
	uint32_t nr = u->attr.max_watches ? u->attr.max_watches :
		      UMN_DEFAULT_WATCHES;
	size_t len = (size_t)nr * sizeof(*u->gens);
	uint32_t i;
	void *gens;
	int ret;

	if (nr == UMN_NIL)
		return -EINVAL;
	/* Private and untouched until used: costs only what is watched. */
	gens = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (gens == MAP_FAILED)
		return -errno;
	ret = umn__add_map(u, gens, len, PROT_READ | PROT_WRITE, true);
	if (ret) {
		munmap(gens, len);
		return ret;
	}
	u->gens = gens;
	u->slots = calloc(nr, sizeof(*u->slots));
	if (!u->slots)
		return -ENOMEM;
	u->nr_slots = nr;
	for (i = 0; i < nr; i++)
		u->slots[i].next = i + 1 < nr ? i + 1 : UMN_NIL;
	u->free_slot = 0;
	u->pending_head = u->pending_tail = UMN_NIL;
	u->pressure = false;
	u->pressure_bytes = 0;
	if (u->has_all) {
		u->records_mask = (u->attr.ring_entries ? u->attr.ring_entries :
				   UMN_DEFAULT_RING) - 1;
		u->records = calloc((size_t)u->records_mask + 1,
				    sizeof(*u->records));
		if (!u->records)
			return -ENOMEM;
		u->records_head = u->records_tail = 0;
	}

	ret = u->source->open(u);
	if (ret)
		return ret;
	ret = emulated_poll_setup(u);
	if (ret)
		return ret;
	u->ops = &umn__emulated_ops;
	/* Acquire: as in emulated_pull_locked(). */
	u->seen = load_acquire(*u->counter);
	WRITE_ONCE(u->fast.pulled, u->seen);
	WRITE_ONCE(u->fast.produced, u->counter);
	WRITE_ONCE(u->fast.consumed, &u->seen);
	/*
	 * Last: umn_valid() calls umn__pull() once this is set.  Release:
	 * pairs with umn_valid()'s acquire of pull_counter (pulled, words).
	 */
	store_release(u->fast.pull_counter, u->counter);
	return 0;
}
