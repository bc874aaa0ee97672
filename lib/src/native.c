// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The native ABI: the kernel writes each watch's generation word and an
 * event ring in memory we map; we only read, and store the ring's head.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "internal.h"

_Static_assert(UMN_UNWATCH_BATCH <= UMMUNOTIFY_WATCHV_MAX, "one WATCHV");

/*
 * Unregister the cookies native_unwatch_later() queued, one call each,
 * after a WATCHV that failed: an error means that it had unregistered
 * the watch already.
 */
static void native_unwatch_each(struct umn *u)
{
	unsigned int i;

	for (i = 0; i < u->nr_unwatched; i++)
		ioctl(u->fd, UMMUNOTIFY_UNREGISTER_REGION, &u->unwatched[i]);
	u->nr_unwatched = 0;
}

/*
 * The queued unwatches and, unless arg is NULL, one watch, in one
 * WATCHV: a cache that replaces an entry makes one system call, not two.
 * ENOSPC comes only once the unwatches are done, and is WATCH's answer
 * too; on any other failure, which may have come before them, fall back
 * to a call per job, which leaves the errors (and the restart after a
 * signal) exactly those of WATCH.
 */
static int native_watchv(struct umn *u, struct ummunotify_watch *arg)
{
	struct ummunotify_watchv v = {
		.unwatch = (uintptr_t)u->unwatched,
		.watch = (uintptr_t)arg,
		.nr_unwatch = u->nr_unwatched,
		.nr_watch = !!arg,
	};
	int ret = ioctl(u->fd, UMMUNOTIFY_WATCHV, &v) ? -errno : 0;

	if (!ret || ret == -ENOSPC) {
		u->nr_unwatched = 0;
		return ret;
	}
	native_unwatch_each(u);
	return arg ? umn__ioctl_restart(u->fd, UMMUNOTIFY_WATCH, arg) : 0;
}

static int native_watch(struct umn *u, uint64_t start, uint64_t end,
			unsigned int causes, struct umn_watch *w)
{
	struct ummunotify_watch arg = {
		.start = start,
		.end = end,
		.user_cookie = ++u->next_cookie,
		.causes = causes,
		.flags = start == end ? UMMUNOTIFY_WATCH_ALL : 0,
	};
	int ret;

	ret = u->nr_unwatched ? native_watchv(u, &arg) :
	      umn__ioctl_restart(u->fd, UMMUNOTIFY_WATCH, &arg);
	if (ret)
		return ret;
	if (arg.slot >= u->nr_slots) {
		/* Not a slot we mapped: never trust it with a pointer. */
		ioctl(u->fd, UMMUNOTIFY_UNREGISTER_REGION, &arg.user_cookie);
		return -EPROTO;
	}
	u->slots[arg.slot].watch = w;
	u->slots[arg.slot].cookie = arg.user_cookie;
	umn__watch_made(u, w, &u->gens[arg.slot], arg.generation);
	w->cookie = arg.user_cookie;
	w->slot = arg.slot;
	return 0;
}

static void native_forget(struct umn *u, struct umn_watch *w)
{
	u->slots[w->slot].watch = NULL;
	u->slots[w->slot].cookie = 0;
}

static int native_unwatch(struct umn *u, struct umn_watch *w)
{
	int ret = ioctl(u->fd, UMMUNOTIFY_UNREGISTER_REGION, &w->cookie) ?
		  -errno : 0;

	native_forget(u, w);
	return ret;
}

/*
 * Gone for the caller at once: its events are dropped, as those of any
 * cookie its slot does not hold, and the kernel keeps the slot until the
 * unwatch is sent.
 */
static int native_unwatch_later(struct umn *u, struct umn_watch *w)
{
	u->unwatched[u->nr_unwatched++] = w->cookie;
	native_forget(u, w);
	if (u->nr_unwatched == UMN_UNWATCH_BATCH)
		native_watchv(u, NULL);
	return 0;
}

static void native_send_unwatches(struct umn *u)
{
	if (u->nr_unwatched)
		native_watchv(u, NULL);
}

/*
 * The kernel keeps the slot and the generation: an invalidation before
 * the resize still shows, and w->generation must not be refreshed.
 */
static int native_resize(struct umn *u, struct umn_watch *w, uint64_t start,
			 uint64_t end)
{
	struct ummunotify_watch arg = {
		.start = start,
		.end = end,
		.user_cookie = w->cookie,
	};

	/* A queued watch must not count against the new range's limits. */
	native_send_unwatches(u);
	return umn__ioctl_restart(u->fd, UMMUNOTIFY_RESIZE, &arg);
}

/* Translate a ring entry; false if it is for a watch that is gone. */
static bool native_event(struct umn *u, const struct ummunotify_ring_event *in,
			 struct umn_event *out)
{
	const struct umn_slot *slot;

	*out = (struct umn_event){
		.start = in->start,
		.end = in->end,
		.cause = in->cause,
	};
	if (in->cause == UMN_CAUSE_PRESSURE) {
		out->value = in->generation;
		return true;
	}
	/* Not about one watch: RELEASE of the whole address space. */
	if (in->slot == UMMUNOTIFY_NO_SLOT)
		return true;
	if (in->slot >= u->nr_slots)
		return false;
	slot = &u->slots[in->slot];
	if (!slot->watch || slot->cookie != in->user_cookie)
		return false;
	out->watch = slot->watch;
	if (out->watch == &u->all)
		out->value = in->generation;
	return true;
}

/* Report what the dropped counter says was lost since last time. */
static int native_report_dropped(struct umn *u, umn_event_fn *fn, void *arg)
{
	/*
	 * Acquire: pairs with the store-release of the count in
	 * umn_ring_post(), after the generation word of the event dropped,
	 * which umn__report_loss() then reads.  A count newer than the tail
	 * loaded may not show yet: the next drain reports it.
	 */
	uint64_t dropped = load_acquire(*u->dropped);
	uint64_t lost = dropped - u->dropped_seen;

	if (!lost)
		return 0;
	u->dropped_seen = dropped;
	umn__report_loss(u, fn, arg, lost);
	return 1;
}

/*
 * Each entry is copied out and the head stored before the callback runs,
 * so the kernel gets the space back at once; the callback may unwatch,
 * which is why the slot is looked up only just before it runs.
 *
 * Losses are reported from the dropped counter: where the kernel's
 * in-band OVERFLOW stands, before the events that follow it (the
 * whole-space watch must not catch up with them first), and after the
 * entries, because the in-band OVERFLOW comes only with the next event,
 * which may never come.  Drops happen only while the ring is full, when
 * umn_changed() is true, so a drain always follows them.  A drain that
 * stops at max leaves the rest, losses included, to the next one.
 */
static int native_drain(struct umn *u, umn_event_fn *fn, void *arg,
			size_t max)
{
	const struct ummunotify_ring_event *ring = u->events;
	uint32_t mask = READ_ONCE(*u->ring_mask);
	uint64_t head = READ_ONCE(*u->head);	/* only we write it */
	/* Acquire: pairs with umn_ring_post()'s tail release: entries first. */
	uint64_t tail = load_acquire(*u->tail);
	struct ummunotify_ring_event in;
	struct umn_event out;
	size_t n = 0;

	while (head != tail && n < max) {
		in = ring[head & mask];
		/*
		 * Release: pairs with umn_ring_post()'s acquire of the head:
		 * the copy is done before the kernel reuses the entry.
		 */
		store_release(*u->head, ++head);
		if (in.cause == UMN_CAUSE_OVERFLOW) {
			n += native_report_dropped(u, fn, arg);
		} else if (native_event(u, &in, &out)) {
			fn(arg, &out);
			n++;
			if (u->has_all && out.watch == &u->all)
				umn__all_reported(u, in.generation);
			/* The space is gone, and this says all about it. */
			else if (u->has_all && in.cause == UMN_CAUSE_RELEASE)
				umn__all_reported(u,
						  load_acquire(*u->all.word));
		}
		if (head == tail)
			tail = load_acquire(*u->tail);
	}
	if (head == tail && n < max)
		n += native_report_dropped(u, fn, arg);
	return (int)n;
}

const struct umn_ops umn__native_ops = {
	.watch = native_watch,
	.unwatch = native_unwatch,
	.unwatch_later = native_unwatch_later,
	.send_unwatches = native_send_unwatches,
	.resize = native_resize,
	.drain = native_drain,
};

static void *native_map(struct umn *u, size_t len, int prot, off_t offset,
			bool words)
{
	void *addr = mmap(NULL, len, prot, MAP_SHARED, u->fd, offset);
	int ret;

	if (addr == MAP_FAILED)
		return NULL;
	ret = umn__add_map(u, addr, len, prot, words);
	if (ret) {
		munmap(addr, len);
		errno = -ret;
		return NULL;
	}
	return addr;
}

int umn__native_setup(struct umn *u, unsigned int features)
{
	struct ummunotify_params params = {
		.slots = u->attr.max_watches,
		.ring_entries = u->attr.ring_entries,
	};
	char *shared, *head_page;

	if (ioctl(u->fd, UMMUNOTIFY_SETUP, &params))
		return -errno;
	shared = native_map(u, params.mmap_size, PROT_READ, 0, true);
	if (!shared)
		return -errno;
	head_page = native_map(u, sysconf(_SC_PAGESIZE),
			       PROT_READ | PROT_WRITE, params.head_offset,
			       false);
	if (!head_page)
		return -errno;
	u->slots = calloc(params.slots, sizeof(*u->slots));
	if (!u->slots)
		return -ENOMEM;
	u->nr_slots = params.slots;

	u->gens = (uint64_t *)(shared + params.off.generations);
	u->tail = (const uint64_t *)(shared + params.off.tail);
	u->dropped = (const uint64_t *)(shared + params.off.dropped);
	u->dropped_seen = load_acquire(*u->dropped);
	u->ring_mask = (const uint32_t *)(shared + params.off.ring_mask);
	u->events = shared + params.off.events;
	/* Offset 0 is the counter's: a module without the word says 0. */
	WRITE_ONCE(u->in_flight, params.off.in_flight ?
		   (const uint64_t *)(shared + params.off.in_flight) : NULL);
	u->head = (uint64_t *)(head_page + params.off.head);
	u->features = features;
	u->ops = &umn__native_ops;
	WRITE_ONCE(u->fast.produced, u->tail);
	WRITE_ONCE(u->fast.consumed, u->head);
	return 0;
}
