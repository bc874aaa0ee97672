// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ucp-threads: UCX's registration cache looked up in one thread right
 * after another thread changed the memory, while more threads look their
 * own memory up all along, each in a UCP context of its own (one context
 * would serialise their lookups under its lock):
 *
 *   changer  replaces the pages of the checker's buffer by raw system
 *            calls (remap.h: munmap + mmap, mmap over, madvise, mremap in
 *            turn), then publishes the round (release);
 *   checker  waits for the round (acquire), so begins after the changing
 *            call returned, and maps the buffer (ucp_mem_map()): UCX must
 *            register it anew, in this thread; mapped again, it must not
 *            (the cache is on);
 *   busy     each maps and unmaps a buffer of its own, never changed, as
 *            fast as it can: with libummunotify-ucx their lookups catch
 *            up and pass the changes on to every cache in their threads
 *            (the checker's too), racing the checker's lookup.
 *
 * A checker's map that does not register is a registration of the old
 * pages handed back after the change: stale.  It prints
 *
 *   ucp-threads: memory events: ...                  (remap_say_path())
 *   ucp-threads: 100 rounds, 2 busy threads: 0 stale, 0 uncached, 1234 busy lookups
 *
 * Usage: ucp-threads [ROUNDS [BUSY]]  (UCX_TLS, UCX_NET_DEVICES from the
 * environment).  Exit status 1 if a round was stale or uncached, 2 if the
 * program could not run.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "remap.h"
#include "ucp-map.h"

#define PAGES	4
#define MAX_BUSY	8

static uint8_t *checked;	/* the checker's buffer */
static size_t span;
static int rounds;
static int round_done;		/* by the changer: release */
static int round_checked;	/* by the checker: release */
static int stop;
static unsigned long busy_lookups;
static int stale, uncached;

static void die(const char *what, ucs_status_t status)
{
	fprintf(stderr, "ucp-threads: %s: %s\n", what, ucs_status_string(status));
	exit(2);
}

/* A single-threaded UCP context: its thread's alone. */
static ucp_context_h open_context(void)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA,
	};
	ucp_config_t *config;
	ucp_context_h context;
	ucs_status_t status;

	status = ucp_config_read(NULL, NULL, &config);
	if (status != UCS_OK)
		die("ucp_config_read", status);
	status = ucp_init(&params, config, &context);
	ucp_config_release(config);
	if (status != UCS_OK)
		die("ucp_init", status);
	return context;
}

static void wait_for(int *counter, int value)
{
	while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < value)
		sched_yield();
}

static void *changer(void *arg)
{
	int round;

	(void)arg;
	for (round = 1; round <= rounds; round++) {
		wait_for(&round_checked, round - 1);
		remap_replace(checked, span, round);
		memset(checked, round, span);
		__atomic_store_n(&round_done, round, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *checker(void *arg)
{
	ucp_context_h context = arg;
	unsigned long before;
	int round;

	for (round = 1; round <= rounds; round++) {
		wait_for(&round_done, round);
		before = thread_registrations;
		ucp_map_unmap(context, checked, span);
		if (thread_registrations == before)
			stale++;
		before = thread_registrations;
		ucp_map_unmap(context, checked, span);
		if (thread_registrations != before)
			uncached++;
		__atomic_store_n(&round_checked, round, __ATOMIC_RELEASE);
	}
	return NULL;
}

struct busy {
	pthread_t thread;
	ucp_context_h context;
	uint8_t *buf;
};

static void *busy(void *arg)
{
	struct busy *b = arg;

	/* Yielding: the checker and changer get the CPUs of a small guest. */
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		ucp_map_unmap(b->context, b->buf, span);
		__atomic_fetch_add(&busy_lookups, 1, __ATOMIC_RELAXED);
		sched_yield();
	}
	return NULL;
}

static void *new_buffer(void)
{
	void *p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("ucp-threads: mmap");
		exit(2);
	}
	memset(p, 1, span);
	return p;
}

int main(int argc, char **argv)
{
	struct busy busy_threads[MAX_BUSY];
	ucp_context_h check_context;
	pthread_t change, check;
	int nbusy, i;

	rounds = argc > 1 ? atoi(argv[1]) : 100;
	nbusy = argc > 2 ? atoi(argv[2]) : 2;
	if (rounds < 4 || nbusy < 0 || nbusy > MAX_BUSY) {
		fprintf(stderr, "usage: ucp-threads [ROUNDS >= 4 [BUSY <= %d]]\n",
			MAX_BUSY);
		return 2;
	}
	span = PAGES * (size_t)sysconf(_SC_PAGESIZE);
	check_context = open_context();
	checked = new_buffer();
	for (i = 0; i < nbusy; i++) {
		busy_threads[i].context = open_context();
		busy_threads[i].buf = new_buffer();
		if (pthread_create(&busy_threads[i].thread, NULL, busy,
				   &busy_threads[i]))
			die("pthread_create", UCS_ERR_NO_RESOURCE);
	}
	if (pthread_create(&check, NULL, checker, check_context) ||
	    pthread_create(&change, NULL, changer, NULL))
		die("pthread_create", UCS_ERR_NO_RESOURCE);
	pthread_join(change, NULL);
	pthread_join(check, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < nbusy; i++) {
		pthread_join(busy_threads[i].thread, NULL);
		ucp_cleanup(busy_threads[i].context);
	}

	remap_say_path("ucp-threads");
	printf("ucp-threads: %d rounds, %d busy threads: %d stale, %d uncached, %lu busy lookups\n",
	       rounds, nbusy, stale, uncached, busy_lookups);
	ucp_cleanup(check_context);
	return stale || uncached;
}
