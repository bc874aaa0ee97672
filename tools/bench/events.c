// SPDX-License-Identifier: GPL-2.0
/*
 * How invalidations arrive: 4. visible when munmap() returns, also
 * while another thread hammers the file; 5. ring throughput.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>

#include "bench.h"
#include "report.h"

/* 4. Invalidations visible when munmap returns */

#define UNMAPS		1000

struct visible_arg {
	const struct backend *b;
	bool hammer;
};

struct visible_out {
	double visible, hammered;
};

static bool stop;

/* Watches, unwatches and reads on the same file, as fast as it can. */
static void *hammer_main(void *arg)
{
	const struct backend *b = arg;
	struct visible_out *out = shared;
	char *p = map(page);
	struct region e;

	touch(p, page);
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		watch(b, &e, p, page);
		b->unwatch(&e);
		b->hammer();
		out->hammered++;
	}
	return NULL;
}

static void visible_child(const void *arg)
{
	const struct visible_arg *a = arg;
	struct visible_out *out = shared;
	pthread_t hammer;
	struct region e;
	char *p;
	int i;

	*out = (struct visible_out){ 0 };
	open_backend(a->b, 2);
	if (a->hammer && pthread_create(&hammer, NULL, hammer_main,
					(void *)a->b))
		fail("pthread_create", -EAGAIN);
	for (i = 0; i < UNMAPS; i++) {
		p = map(page);
		touch(p, page);
		watch(a->b, &e, p, page);
		munmap(p, page);
		out->visible += !a->b->valid(&e);
		a->b->unwatch(&e);
	}
	if (a->hammer) {
		__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
		pthread_join(hammer, NULL);
	}
	a->b->close();
}

static void visible(const struct backend *b, bool hammer)
{
	struct visible_out *out = shared;
	struct visible_arg a = { b, hammer };
	char what[64], label[64];

	in_child(visible_child, &a);
	snprintf(what, sizeof(what), "visible of %d%s", UNMAPS,
		 hammer ? ", file hammered" : "");
	row(b->name, what, "", &out->visible, 1);
	if (b->hammer) {
		snprintf(label, sizeof(label), "%s: all visible%s", b->name,
			 hammer ? ", hammered" : "");
		snprintf(what, sizeof(what), "%s: munmap()s visible at return%s",
			 b->name, hammer ? ", file hammered" : "");
		goal(label, what, out->visible, "", UNMAPS, false);
	}
	if (hammer)
		note("           (the other thread made %.0f watch, unwatch and read() rounds)",
		     out->hammered);
}

void measure_visible(void)
{
	section(4, "Invalidations visible to the unmapping thread when munmap() returns");
	for_each(b, all)
		visible(*b, false);
	for_each(b, ummunotify)
		visible(*b, true);
}

/* 5. Ring throughput */

#define RING_WATCHES	256
#define ROUNDS		400

struct ring_out {
	double rate[REPS], missing[REPS];
};

struct consumer {
	const struct backend *b;
	unsigned long delivered, lost;
};

static bool produced;

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	unsigned long got;
	bool done;

	do {
		done = __atomic_load_n(&produced, __ATOMIC_ACQUIRE);
		got = c->b->drain(&c->lost);
		c->delivered += got;
	} while (!done || got);
	return NULL;
}

static void ring_child(const void *arg)
{
	const struct backend *b = arg;
	struct ring_out *out = shared;
	struct region e[RING_WATCHES];
	size_t len = RING_WATCHES * page;
	char *p = map(len);
	pthread_t consumer;
	uint64_t t;
	int i, r;

	open_backend(b, RING_WATCHES);
	for (i = 0; i < RING_WATCHES; i++)
		watch(b, &e[i], p + i * page, page);
	for (r = 0; r < REPS; r++) {
		struct consumer c = { .b = b };

		__atomic_store_n(&produced, false, __ATOMIC_RELAXED);
		if (pthread_create(&consumer, NULL, consumer_main, &c))
			fail("pthread_create", -EAGAIN);
		t = now_ns();
		for (i = 0; i < ROUNDS; i++)
			madvise(p, len, MADV_DONTNEED);
		__atomic_store_n(&produced, true, __ATOMIC_RELEASE);
		pthread_join(consumer, NULL);
		out->rate[r] = c.delivered * 1e9 / (now_ns() - t);
		out->missing[r] = 100.0 - 100.0 * c.delivered /
				  (ROUNDS * RING_WATCHES);
	}
	b->close();
}

void measure_ring(void)
{
	struct ring_out *out = shared;

	section(5, "Invalidations per second delivered to one consumer thread");
	for_each(b, ummunotify) {
		in_child(ring_child, *b);
		row((*b)->name, "delivered", "/s", out->rate, REPS);
		row((*b)->name, "not delivered (dropped, merged)", "%",
		    out->missing, REPS);
	}
	note("%d madvise(DONTNEED) calls, each over %d watched pages, while the consumer drains.",
	     ROUNDS, RING_WATCHES);
	note("native: the ring in shared memory; legacy: read() of reports.");
}

