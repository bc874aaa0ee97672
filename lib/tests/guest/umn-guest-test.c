// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libummunotify against the real module, in a guest (tools/testing/vm-run):
 * every test runs twice, on the native ABI and on the 2010 ABI
 * (UMN_OPEN_LEGACY), each in a child process of its own.  The cache's
 * tests run again on a whole-address-space watch (UMN_OPEN_WATCH_ALL),
 * which the 2010 ABI must refuse.  Prints TAP;
 * exits 0 when all pass, 1 when one fails, 4 (skip) without a device.
 *
 * Memory is changed in single pages between PROT_NONE guard pages: they
 * never merge with a neighbour or cover a 2 MiB block, so no huge-page
 * split adds an invalidation a test does not expect.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "ummunotify.h"
#include "../check.h"

#define KSFT_SKIP	4

static size_t ps;
static unsigned int calls[8];		/* ioctl()s, by ummunotify number */
static struct umn_attr mode;		/* flags: native or legacy */
static bool native;
static bool whole;			/* open_umn(): UMN_OPEN_WATCH_ALL */
static unsigned int ring_entries;	/* open_umn(): 0 for the default */

/*
 * The library's ioctl() (it is linked in statically), counted: which
 * system calls a cache makes is part of what it costs.
 */
int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (_IOC_TYPE(request) == UMMUNOTIFY_MAGIC &&
	    _IOC_NR(request) < sizeof(calls) / sizeof(calls[0]))
		calls[_IOC_NR(request)]++;
	return syscall(SYS_ioctl, fd, request, arg);
}

#define CALLS(request)	calls[_IOC_NR(UMMUNOTIFY_##request)]

/* n pages, each between guard pages; page i is at the result + 2*i*ps. */
static char *guarded_pages(unsigned int n)
{
	char *base = mmap(NULL, (2 * n + 1) * ps, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned int i;

	CHECK(base != MAP_FAILED);
	for (i = 0; i < n; i++) {
		CHECK(!mprotect(base + (2 * i + 1) * ps, ps,
				PROT_READ | PROT_WRITE));
		memset(base + (2 * i + 1) * ps, 0x5a, ps);
	}
	return base + ps;
}

static struct umn *open_umn(void)
{
	struct umn_attr attr = mode;
	struct umn *u;

	if (whole)
		attr.flags |= UMN_OPEN_WATCH_ALL;
	attr.ring_entries = ring_entries;
	CHECK_EQ(umn_open(&u, &attr), 0);
	CHECK_EQ(umn_features(u) != 0, native);
	CHECK_EQ(umn_watch_all(u) != NULL, whole);
	return u;
}

/*
 * Run the rest of a whole-space test: on the 2010 ABI only check that it
 * is refused, and say not to.
 */
static bool whole_space(void)
{
	struct umn_attr attr = mode;
	struct umn *u;

	if (!native) {
		attr.flags |= UMN_OPEN_WATCH_ALL;
		CHECK_EQ(umn_open(&u, &attr), -EOPNOTSUPP);
		return false;
	}
	whole = true;
	return true;
}

struct log {
	unsigned int n;
	struct umn_event events[64];
};

static void log_event(void *arg, const struct umn_event *event)
{
	struct log *log = arg;

	if (log->n < 64)
		log->events[log->n++] = *event;
}

static unsigned int expected_cause(unsigned int cause)
{
	return native ? cause : UMN_CAUSE_UNKNOWN;
}

static void test_munmap_invalidates_only_the_watch_it_touches(void)
{
	char *p = guarded_pages(3);
	struct umn *u = open_umn();
	struct umn_watch w[3];
	struct log log = { 0 };
	int i;

	for (i = 0; i < 3; i++)
		CHECK_EQ(umn_watch(u, p + 2 * i * ps, ps, 0, &w[i]), 0);
	CHECK(!umn_changed(u));
	CHECK(!munmap(p + 2 * ps, ps));
	CHECK(umn_changed(u));
	CHECK(umn_valid(u, &w[0]) && !umn_valid(u, &w[1]) &&
	      umn_valid(u, &w[2]));
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK(log.events[0].watch == &w[1]);
	CHECK_EQ(log.events[0].start, (uintptr_t)(p + 2 * ps));
	CHECK_EQ(log.events[0].end, (uintptr_t)(p + 3 * ps));
	CHECK_EQ(log.events[0].cause, expected_cause(UMN_CAUSE_UNMAP));
	CHECK(!umn_changed(u));
	CHECK_EQ(umn_close(u), 0);
}

static void test_dontneed_is_a_clear_and_mprotect_is_not_reported(void)
{
	char *p = guarded_pages(2);
	struct umn *u = open_umn();
	struct umn_watch w[2];
	struct log log = { 0 };

	CHECK_EQ(umn_watch(u, p, ps, 0, &w[0]), 0);
	CHECK_EQ(umn_watch(u, p + 2 * ps, ps, 0, &w[1]), 0);
	CHECK(!mprotect(p, ps, PROT_READ));
	CHECK(umn_valid(u, &w[0]));
	CHECK(!madvise(p + 2 * ps, ps, MADV_DONTNEED));
	CHECK(!umn_valid(u, &w[1]));
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK_EQ(log.events[0].cause, expected_cause(UMN_CAUSE_CLEAR));
	CHECK_EQ(umn_close(u), 0);
}

static void test_causes_are_filtered_natively_only(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	unsigned int causes = 1U << UMN_CAUSE_PROTECTION;
	struct umn_watch w;

	if (!native) {
		CHECK_EQ(umn_watch(u, p, ps, causes, &w), -EOPNOTSUPP);
		CHECK_EQ(umn_close(u), 0);
		return;
	}
	CHECK_EQ(umn_watch(u, p, ps, causes, &w), 0);
	CHECK(!madvise(p, ps, MADV_DONTNEED));
	CHECK(umn_valid(u, &w));
	CHECK(!mprotect(p, ps, PROT_READ));
	CHECK(!umn_valid(u, &w));
	CHECK_EQ(umn_close(u), 0);
}

static void test_unwatched_ranges_are_not_reported(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	struct umn_watch w;
	struct log log = { 0 };

	CHECK_EQ(umn_watch(u, p, ps, 0, &w), 0);
	CHECK_EQ(umn_unwatch(u, &w), 0);
	CHECK(!umn_valid(u, &w));
	CHECK(!munmap(p, ps));
	CHECK_EQ(umn_drain(u, log_event, &log), 0);
	CHECK_EQ(umn_unwatch(u, &w), -ENOENT);
	CHECK_EQ(umn_close(u), 0);
}

static void test_resize_follows_the_new_range(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	struct umn_watch w;
	uint64_t gen;

	CHECK_EQ(umn_watch(u, p, ps / 2, 0, &w), 0);
	gen = w.generation;
	CHECK_EQ(umn_resize(u, &w, p, ps), 0);
	CHECK_EQ(w.generation, gen);
	CHECK(umn_valid(u, &w));
	CHECK(!madvise(p, ps, MADV_DONTNEED));	/* both halves */
	CHECK(!umn_valid(u, &w));
	CHECK_EQ(umn_close(u), 0);
}

static void test_fd_polls_readable_after_a_change(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	struct pollfd pfd = { .events = POLLIN };
	struct umn_watch w;
	struct log log = { 0 };

	pfd.fd = umn_fd(u);
	CHECK(pfd.fd >= 0);
	CHECK_EQ(umn_watch(u, p, ps, 0, &w), 0);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK(!munmap(p, ps));
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	/* With the 2010 ABI this takes the report from the kernel. */
	CHECK(!umn_valid(u, &w));
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(umn_close(u), 0);
}

static void test_a_full_ring_reports_overflow_and_keeps_generations(void)
{
	struct umn_attr attr = { .flags = mode.flags, .ring_entries = 2 };
	char *p = guarded_pages(8);
	struct umn_watch w[8];
	struct log log = { 0 };
	bool overflow = false;
	struct umn *u;
	unsigned int i;

	CHECK_EQ(umn_open(&u, &attr), 0);
	for (i = 0; i < 8; i++)
		CHECK_EQ(umn_watch(u, p + 2 * i * ps, ps, 0, &w[i]), 0);
	for (i = 0; i < 8; i++)
		CHECK(!munmap(p + 2 * i * ps, ps));
	for (i = 0; i < 8; i++)
		CHECK(!umn_valid(u, &w[i]));
	/* The OVERFLOW is written once the drain makes room. */
	while (umn_changed(u))
		CHECK(umn_drain(u, log_event, &log) > 0);
	for (i = 0; i < log.n; i++)
		overflow |= log.events[i].cause == UMN_CAUSE_OVERFLOW;
	/* The 2010 queue holds one report per watch: it never overflows. */
	CHECK_EQ(overflow, native);
	CHECK_EQ(log.n, native ? 3 : 8);
	CHECK_EQ(umn_close(u), 0);
}

/* A bounded read leaves the rest queued, the descriptor readable. */
static void test_read_events_leaves_what_does_not_fit(void)
{
	char *p = guarded_pages(3);
	struct pollfd pfd = { .events = POLLIN };
	struct umn *u = open_umn();
	struct umn_watch w[3];
	struct umn_event ev;
	unsigned int i;

	pfd.fd = umn_fd(u);
	for (i = 0; i < 3; i++)
		CHECK_EQ(umn_watch(u, p + 2 * i * ps, ps, 0, &w[i]), 0);
	for (i = 0; i < 3; i++)
		CHECK(!munmap(p + 2 * i * ps, ps));
	for (i = 0; i < 3; i++) {
		CHECK(!umn_valid(u, &w[2 - i]));
		CHECK_EQ(poll(&pfd, 1, 0), 1);
		CHECK_EQ(umn_read_events(u, &ev, 1), 1);
		CHECK_EQ(ev.cause, expected_cause(UMN_CAUSE_UNMAP));
	}
	CHECK_EQ(umn_read_events(u, &ev, 1), 0);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(umn_close(u), 0);
}

/* Every change, with its exact range, and nothing for mprotect. */
static void test_whole_space_watch_reports_exact_ranges(void)
{
	char *p = guarded_pages(2);
	struct log log = { 0 };
	const struct umn_watch *all;
	unsigned int i, found = 0;
	struct umn *u;

	if (!whole_space())
		return;
	u = open_umn();
	all = umn_watch_all(u);
	CHECK(umn_valid(u, all));
	CHECK(!mprotect(p, ps, PROT_READ));
	CHECK(!munmap(p + 2 * ps, ps));
	CHECK(!umn_valid(u, all));
	CHECK(umn_drain(u, log_event, &log) >= 1);
	CHECK(umn_valid(u, all));
	for (i = 0; i < log.n; i++) {
		CHECK(log.events[i].watch == all);
		found += log.events[i].start == (uintptr_t)(p + 2 * ps) &&
			 log.events[i].end == (uintptr_t)(p + 3 * ps) &&
			 log.events[i].cause == UMN_CAUSE_UNMAP;
		/* The mprotect is not reported. */
		CHECK(log.events[i].end <= (uintptr_t)p ||
		      log.events[i].start >= (uintptr_t)(p + ps));
	}
	CHECK_EQ(found, 1);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * A drain that meets an OVERFLOW reports the loss with the whole-space
 * watch's word as it is then, which may be past the events still behind
 * the OVERFLOW in the ring: their own generations are older, and must not
 * move the watch back.  With a ring of two, after a first loss: two
 * changes put OVERFLOW and the first in the ring, the second is dropped.
 */
static void test_whole_space_watch_never_goes_back_after_a_loss(void)
{
	struct umn_attr attr = { .flags = UMN_OPEN_WATCH_ALL,
				 .ring_entries = 2 };
	char *p = guarded_pages(13);
	const struct umn_watch *all;
	struct log log = { 0 };
	unsigned int i, round;
	struct umn *u;

	if (!whole_space())
		return;
	CHECK_EQ(umn_open(&u, &attr), 0);
	all = umn_watch_all(u);
	for (round = 0, i = 0; round < 6; round++) {
		/* Three at first: the first loss. */
		do
			CHECK(!munmap(p + 2 * i++ * ps, ps));
		while (i < 3 || i % 2 == 0);
		CHECK(!umn_valid(u, all));
		while (umn_changed(u))
			CHECK(umn_drain(u, log_event, &log) > 0);
		CHECK(umn_valid(u, all));
	}
	CHECK_EQ(umn_close(u), 0);
}

static void test_a_forked_child_starts_afresh(void)
{
	char *p = guarded_pages(2);
	struct umn *u = open_umn();
	struct umn_watch w, fresh;
	struct log log = { 0 };
	int status;
	pid_t pid;

	CHECK_EQ(umn_watch(u, p, ps, 0, &w), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(!umn_valid(u, &w));
		CHECK(umn_changed(u));
		CHECK_EQ(umn_drain(u, log_event, &log), 1);
		CHECK_EQ(log.events[0].cause, UMN_CAUSE_OVERFLOW);
		CHECK_EQ(umn_watch(u, p + 2 * ps, ps, 0, &fresh), 0);
		CHECK(umn_valid(u, &fresh));
		CHECK(!munmap(p + 2 * ps, ps));
		CHECK(!umn_valid(u, &fresh));
		CHECK_EQ(umn_close(u), 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Neither the child's watch nor its munmap reached the parent. */
	CHECK(umn_valid(u, &w));
	CHECK(!umn_changed(u));
	CHECK(!munmap(p, ps));
	CHECK(!umn_valid(u, &w));
	CHECK_EQ(umn_close(u), 0);
}

/*
 * The cache's "NIC": a registration is a copy of the first word of the
 * memory, as it was when registered, read like a NIC registration pins
 * pages: through the page tables (process_vm_readv() uses GUP under
 * mmap_lock), not through this CPU's TLB, which may still map the old
 * page for a moment after WATCH returns (the TLB flush of an munmap
 * comes after its invalidate_range_end).
 */
static int snapshot_reg(void *arg, void *addr, size_t len, void **handle)
{
	uint64_t *copy = malloc(sizeof(*copy));
	struct iovec local = { copy, sizeof(*copy) };
	struct iovec remote = { addr, sizeof(*copy) };

	(void)arg;
	(void)len;
	CHECK(copy);
	CHECK_EQ(process_vm_readv(getpid(), &local, 1, &remote, 1, 0),
		 sizeof(*copy));
	*handle = copy;
	return 0;
}

static void snapshot_dereg(void *arg, void *addr, size_t len, void *handle)
{
	(void)arg;
	(void)addr;
	(void)len;
	free(handle);
}

static struct umn_cache *open_cache(struct umn *u)
{
	struct umn_cache_attr attr = {
		.reg = snapshot_reg,
		.dereg = snapshot_dereg,
		.max_entries = 64,
	};
	struct umn_cache *c;

	CHECK_EQ(umn_cache_create(u, &attr, &c), 0);
	return c;
}

static uint64_t snapshot_of(struct umn_cache *c, void *addr)
{
	struct umn_cache_entry *e;
	uint64_t value;

	CHECK_EQ(umn_cache_get(c, addr, sizeof(value), &e), 0);
	value = *(uint64_t *)e->handle;
	umn_cache_put(c, e);
	return value;
}

/* A new page at p, holding value. */
static void replace_page(char *p, uint64_t value)
{
	CHECK(mmap(p, ps, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
	*(uint64_t *)p = value;
}

static void test_cache_never_serves_a_replaced_mapping(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	struct umn_cache *c = open_cache(u);
	struct umn_cache_stats s;

	*(uint64_t *)p = 1;
	CHECK_EQ(snapshot_of(c, p), 1);
	CHECK_EQ(snapshot_of(c, p), 1);
	replace_page(p, 2);
	CHECK_EQ(snapshot_of(c, p), 2);
	umn_cache_stats(c, &s);
	CHECK_EQ(s.hits, 1);
	CHECK_EQ(s.misses, 2);
	CHECK_EQ(s.invalidations, 1);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/* The watches the kernel holds for u's file (native: it is umn_fd()). */
static unsigned int kernel_watches(struct umn *u)
{
	return fd_watches(umn_fd(u));
}

/*
 * A replaced entry's unwatch goes with the next miss's watch, in one
 * UMMUNOTIFY_WATCHV; the 2010 ABI has no such call and unregisters each.
 */
#define ROUNDS	50

static void test_cache_replaces_an_entry_in_one_system_call(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	struct umn_cache *c = open_cache(u);
	uint64_t i;

	*(uint64_t *)p = 0;
	CHECK_EQ(snapshot_of(c, p), 0);
	memset(calls, 0, sizeof(calls));
	for (i = 1; i <= ROUNDS; i++) {
		replace_page(p, i);
		CHECK_EQ(snapshot_of(c, p), i);
		if (native)
			CHECK_EQ(kernel_watches(u), 1);	/* nothing queued */
	}
	if (native) {
		CHECK_EQ(CALLS(WATCHV), ROUNDS);
		CHECK_EQ(CALLS(WATCH) + CALLS(UNREGISTER_REGION), 0);
	} else {
		CHECK_EQ(CALLS(REGISTER_REGION), ROUNDS);
		CHECK_EQ(CALLS(UNREGISTER_REGION), ROUNDS);
		CHECK_EQ(CALLS(WATCHV), 0);
	}
	umn_cache_flush(c);
	if (native)
		CHECK_EQ(kernel_watches(u), 0);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * An evicted entry's watch stays in the kernel until the next miss: its
 * events must reach nobody (its slot no longer names it).  Those still
 * unread once the kernel gives the slot to another watch are dropped by
 * their cookie, as for any watch gone (test_a_full_ring_reports_...).
 */
static void test_cache_ignores_a_watch_waiting_to_be_unwatched(void)
{
	struct umn_cache_attr attr = {
		.reg = snapshot_reg,
		.dereg = snapshot_dereg,
		.max_entries = 1,
	};
	char *p = guarded_pages(2), *q = p + 2 * ps;
	struct umn *u = open_umn();
	struct umn_cache_stats s;
	struct umn_cache *c;

	CHECK_EQ(umn_cache_create(u, &attr, &c), 0);
	*(uint64_t *)p = 1;
	*(uint64_t *)q = 2;
	CHECK_EQ(snapshot_of(c, p), 1);
	CHECK_EQ(snapshot_of(c, q), 2);		/* evicts p's entry */
	if (native)
		CHECK_EQ(kernel_watches(u), 2);
	replace_page(p, 3);
	CHECK_EQ(umn_cache_drain(c), 0);
	umn_cache_stats(c, &s);
	CHECK_EQ(s.invalidations, 0);
	CHECK_EQ(s.evictions, 1);
	CHECK_EQ(snapshot_of(c, q), 2);
	CHECK_EQ(snapshot_of(c, p), 3);
	if (native)
		CHECK_EQ(kernel_watches(u), 2);	/* p's, and q's queued */
	umn_cache_stats(c, &s);
	CHECK_EQ(s.invalidations, 0);
	CHECK_EQ(s.hits, 1);
	CHECK_EQ(umn_cache_destroy(c), 0);
	if (native)
		CHECK_EQ(kernel_watches(u), 0);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * A watch the kernel refuses, with an unwatch queued: the error is
 * WATCH's, and the unwatch is made all the same.
 */
static void test_cache_refused_watch_still_unwatches(void)
{
	char *p = guarded_pages(1);
	struct umn *u = open_umn();
	struct umn_cache *c = open_cache(u);
	/* Past user space: the library cannot tell, the kernel can. */
	char *top = (char *)-(uintptr_t)(4 * ps);
	struct umn_cache_entry *e;

	*(uint64_t *)p = 1;
	CHECK_EQ(snapshot_of(c, p), 1);
	replace_page(p, 2);
	CHECK_EQ(umn_cache_drain(c), 1);
	if (native)
		CHECK_EQ(kernel_watches(u), 1);	/* queued */
	CHECK_EQ(umn_cache_get(c, top, 2 * ps, &e), -EINVAL);
	if (native)
		CHECK_EQ(kernel_watches(u), 0);
	CHECK_EQ(snapshot_of(c, p), 2);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/* The 64th unwatch queued is sent at once, with the 63 before it. */
#define BATCH	64

static void test_cache_sends_a_full_queue_of_unwatches(void)
{
	struct umn_cache_attr attr = {
		.reg = snapshot_reg,
		.dereg = snapshot_dereg,
		.max_entries = BATCH + 1,
	};
	char *p = guarded_pages(BATCH + 1);
	struct umn *u = open_umn();
	struct umn_cache *c;
	uint64_t i;

	CHECK_EQ(umn_cache_create(u, &attr, &c), 0);
	for (i = 0; i <= BATCH; i++) {
		*(uint64_t *)(p + 2 * i * ps) = i;
		CHECK_EQ(snapshot_of(c, p + 2 * i * ps), i);
	}
	memset(calls, 0, sizeof(calls));
	for (i = 0; i <= BATCH; i++)
		replace_page(p + 2 * i * ps, i + 1);
	CHECK_EQ(umn_cache_drain(c), BATCH + 1);
	if (native) {
		CHECK_EQ(CALLS(WATCHV), 1);
		CHECK_EQ(CALLS(UNREGISTER_REGION), 0);
		CHECK_EQ(kernel_watches(u), 1);
	} else {
		CHECK_EQ(CALLS(UNREGISTER_REGION), BATCH + 1);
	}
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * The parent's queue is its file's: a forked child's first miss is a
 * plain WATCH on the child's own file, and the parent's next miss still
 * sends what it queued.
 */
static void test_cache_queue_stays_with_the_parent(void)
{
	char *p = guarded_pages(2), *q = p + 2 * ps;
	struct umn *u = open_umn();
	struct umn_cache *c = open_cache(u);
	int status;
	pid_t pid;

	*(uint64_t *)p = 1;
	*(uint64_t *)q = 2;
	CHECK_EQ(snapshot_of(c, p), 1);
	replace_page(p, 3);
	CHECK_EQ(umn_cache_drain(c), 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct umn_cache_stats before, after;

		umn_cache_stats(c, &before);
		memset(calls, 0, sizeof(calls));
		CHECK_EQ(snapshot_of(c, q), 2);
		umn_cache_stats(c, &after);
		/*
		 * A parent's cookie would fail the child's WATCHV, and the
		 * fallback would unregister it.  The first registration
		 * after the reopen may be made again (the reopen's loss is
		 * reported meanwhile): its unwatch goes with the next try.
		 */
		if (native) {
			CHECK_EQ(CALLS(UNREGISTER_REGION), 0);
			CHECK_EQ(CALLS(WATCH), 1);
			CHECK_EQ(CALLS(WATCHV), after.retries - before.retries);
			CHECK_EQ(kernel_watches(u), 1);
		}
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (native)
		CHECK_EQ(kernel_watches(u), 1);	/* queued */
	memset(calls, 0, sizeof(calls));
	CHECK_EQ(snapshot_of(c, q), 2);
	if (native) {
		CHECK_EQ(CALLS(WATCHV), 1);
		CHECK_EQ(kernel_watches(u), 1);
	}
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * One thread replaces pages with mremap() (atomically: the new page
 * already holds its version number); others look them up.  No lookup may
 * return a registration older than the page was when the lookup began.
 */
#define RACE_PAGES	8

static char *race_base;
static bool race_stop;

static char *race_page(unsigned int i)
{
	return race_base + 2 * i * ps;
}

static void *replacer(void *arg)
{
	uint64_t version = 1, x = (uintptr_t)arg;
	char *fresh;

	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		fresh = mmap(NULL, ps, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(fresh != MAP_FAILED);
		*(uint64_t *)fresh = ++version;
		CHECK(mremap(fresh, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED,
			     race_page((x >> 33) % RACE_PAGES)) != MAP_FAILED);
	}
	return NULL;
}

struct looker {
	pthread_t thread;
	struct umn_cache *c;
	uint64_t seed;
	unsigned int lookups;
};

static void *looker(void *arg)
{
	struct looker *l = arg;
	uint64_t x = l->seed, before;
	char *page;

	while (!__atomic_load_n(&race_stop, __ATOMIC_RELAXED)) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		page = race_page((x >> 33) % RACE_PAGES);
		before = __atomic_load_n((uint64_t *)page, __ATOMIC_ACQUIRE);
		CHECK(snapshot_of(l->c, page) >= before);
		l->lookups++;
	}
	return NULL;
}

static void test_cache_under_concurrent_replacement(void)
{
	struct umn *u = open_umn();
	struct umn_cache *c = open_cache(u);
	struct looker lookers[2];
	struct umn_cache_stats s;
	pthread_t thread;
	unsigned int i;

	race_base = guarded_pages(RACE_PAGES);
	for (i = 0; i < RACE_PAGES; i++)
		*(uint64_t *)race_page(i) = 1;
	pthread_create(&thread, NULL, replacer, (void *)(uintptr_t)time(NULL));
	for (i = 0; i < 2; i++) {
		lookers[i] = (struct looker){ .c = c, .seed = i + 1 };
		pthread_create(&lookers[i].thread, NULL, looker, &lookers[i]);
	}
	sleep(3);
	__atomic_store_n(&race_stop, true, __ATOMIC_RELAXED);
	pthread_join(thread, NULL);
	for (i = 0; i < 2; i++)
		pthread_join(lookers[i].thread, NULL);
	/* Memory has stopped changing: every lookup ends, and promptly. */
	alarm(20);
	for (i = 0; i < RACE_PAGES; i++)
		CHECK(snapshot_of(c, race_page(i)) >=
		      *(uint64_t *)race_page(i));
	alarm(0);
	umn_cache_stats(c, &s);
	printf("# %u+%u lookups: %" PRIu64 " hits, %" PRIu64 " misses, %"
	       PRIu64 " invalidations, %" PRIu64 " retries, %" PRIu64
	       " overflows\n",
	       lookers[0].lookups, lookers[1].lookups, s.hits, s.misses,
	       s.invalidations, s.retries, s.overflows);
	CHECK(s.hits > 0 && s.invalidations > 0);
	CHECK(!ring_entries || s.overflows > 0);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

static void test_whole_space_cache_never_serves_a_replaced_mapping(void)
{
	if (whole_space())
		test_cache_never_serves_a_replaced_mapping();
}

static void test_whole_space_cache_under_concurrent_replacement(void)
{
	if (whole_space())
		test_cache_under_concurrent_replacement();
}

/*
 * A ring of two entries overflows all the time under the replacer: a
 * whole-space watch left a generation behind (a loss reported, then an
 * older event behind its OVERFLOW; or, on a weakly ordered CPU, the drop
 * count seen before the dropped event's word) would make a lookup after
 * the replacer stopped wait for an event that never comes.
 */
static void test_whole_space_cache_overflowing_under_replacement(void)
{
	if (!whole_space())
		return;
	ring_entries = 2;
	test_cache_under_concurrent_replacement();
}

/* More changes than the ring holds: the cache flushes, serves nothing old. */
static void test_whole_space_cache_overflow_flushes(void)
{
	struct umn_attr attr = { .flags = UMN_OPEN_WATCH_ALL,
				 .ring_entries = 2 };
	char *p = guarded_pages(8);
	struct umn_cache_stats s;
	struct umn_cache *c;
	struct umn *u;
	unsigned int i;

	if (!whole_space())
		return;
	CHECK_EQ(umn_open(&u, &attr), 0);
	c = open_cache(u);
	for (i = 0; i < 8; i++) {
		*(uint64_t *)(p + 2 * i * ps) = 1;
		CHECK_EQ(snapshot_of(c, p + 2 * i * ps), 1);
	}
	for (i = 0; i < 8; i++)
		replace_page(p + 2 * i * ps, 2);
	for (i = 0; i < 8; i++)
		CHECK_EQ(snapshot_of(c, p + 2 * i * ps), 2);
	umn_cache_stats(c, &s);
	CHECK(s.overflows >= 1);
	CHECK_EQ(s.hits, 0);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * A whole-space miss waits, before reg(), for an invalidation another
 * thread began earlier (its event is out) until its page tables changed
 * (off.in_flight).  The other thread's MADV_DONTNEED of 256 MiB of
 * populated small pages takes long enough under TCG to be met in the middle:
 * without the wait, reg() finds some of those pages still mapped.
 */
static struct {
	char *p;
	size_t len;
	unsigned int go;
	size_t resident;	/* pages of p mapped when reg() ran */
} inflight;

static void *inflight_dontneed(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&inflight.go, __ATOMIC_ACQUIRE))
		;
	CHECK(!madvise(inflight.p, inflight.len, MADV_DONTNEED));
	return NULL;
}

static int inflight_reg(void *arg, void *addr, size_t len, void **handle)
{
	size_t i, n = inflight.len / ps;
	unsigned char *vec = malloc(n);

	(void)arg;
	(void)addr;
	(void)len;
	CHECK(vec);
	CHECK(!mincore(inflight.p, inflight.len, vec));
	inflight.resident = 0;
	for (i = 0; i < n; i++)
		inflight.resident += vec[i] & 1;
	free(vec);
	*handle = NULL;
	return 0;
}

static void inflight_dereg(void *arg, void *addr, size_t len, void *handle)
{
	(void)arg;
	(void)addr;
	(void)len;
	(void)handle;
}

static void test_whole_space_miss_waits_for_an_invalidation_in_flight(void)
{
	struct umn_cache_attr attr = {
		.reg = inflight_reg,
		.dereg = inflight_dereg,
	};
	char *small = guarded_pages(1);
	struct umn_cache_entry *e;
	struct umn_cache *c;
	pthread_t t;
	struct umn *u;

	if (!whole_space())
		return;
	inflight.len = 256UL << 20;
	inflight.p = mmap(NULL, inflight.len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(inflight.p != MAP_FAILED);
	/* Small pages: a huge page's zap is one entry, over at once. */
	CHECK(!madvise(inflight.p, inflight.len, MADV_NOHUGEPAGE));
	memset(inflight.p, 1, inflight.len);
	u = open_umn();
	CHECK_EQ(umn_cache_create(u, &attr, &c), 0);
	CHECK_EQ(pthread_create(&t, NULL, inflight_dontneed, NULL), 0);
	CHECK(umn_cache_drain(c) >= 0);
	CHECK(umn_valid(u, umn_watch_all(u)));
	__atomic_store_n(&inflight.go, 1, __ATOMIC_RELEASE);
	/* Its event is out: the invalidation has begun. */
	while (umn_valid(u, umn_watch_all(u)))
		;
	CHECK_EQ(umn_cache_get(c, small, ps, &e), 0);
	CHECK_EQ(inflight.resident, 0);
	umn_cache_put(c, e);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

/*
 * A whole-space open waits for the invalidations running, and a signal
 * ends that wait: with a handler without SA_RESTART (an MPI progress
 * timer, say), the kernel's WATCH fails with EINTR, having changed
 * nothing.  The library calls it again: umn_open() does not fail.  A
 * thread keeps truncating a mapped file meanwhile.
 */
#define SIGNALLED_SECONDS	3

static struct {
	char *p;
	size_t len;
	int fd;
	int stop;
} churn;

/*
 * Truncation zaps the pages under the file's rmap lock, not mmap_lock:
 * its invalidations run while the open joins the notifier.
 */
static void *churn_truncate(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&churn.stop, __ATOMIC_ACQUIRE)) {
		memset(churn.p, 1, churn.len);
		CHECK(!ftruncate(churn.fd, 0));
		CHECK(!ftruncate(churn.fd, churn.len));
	}
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void test_whole_space_open_is_not_failed_by_a_signal(void)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval tick = { .it_interval.tv_usec = 200,
				  .it_value.tv_usec = 200 };
	struct itimerval off = { 0 };
	time_t end = time(NULL) + SIGNALLED_SECONDS;
	unsigned int opens = 0;
	pthread_t t;

	if (!whole_space())
		return;
	churn.len = 64UL << 20;
	churn.fd = memfd_create("churn", MFD_CLOEXEC);
	CHECK(churn.fd >= 0);
	CHECK(!ftruncate(churn.fd, churn.len));
	churn.p = mmap(NULL, churn.len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       churn.fd, 0);
	CHECK(churn.p != MAP_FAILED);
	CHECK(!sigaction(SIGALRM, &sa, NULL));
	CHECK_EQ(pthread_create(&t, NULL, churn_truncate, NULL), 0);
	CHECK(!setitimer(ITIMER_REAL, &tick, NULL));
	while (time(NULL) < end) {
		CHECK_EQ(umn_close(open_umn()), 0);
		opens++;
	}
	CHECK(!setitimer(ITIMER_REAL, &off, NULL));
	__atomic_store_n(&churn.stop, 1, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK(!munmap(churn.p, churn.len));
	CHECK(!close(churn.fd));
	printf("# %u whole-space opens under a 200 us timer\n", opens);
}

/*
 * The child's cache starts from nothing and watches the child's space;
 * the parent's keeps its entry and still sees its own changes.
 */
static void test_whole_space_cache_in_a_forked_child(void)
{
	char *p = guarded_pages(1);
	struct umn_cache_stats before, after;
	struct umn_cache *c;
	struct umn *u;
	int status;
	pid_t pid;

	if (!whole_space())
		return;
	u = open_umn();
	c = open_cache(u);
	*(uint64_t *)p = 1;
	CHECK_EQ(snapshot_of(c, p), 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		umn_cache_stats(c, &before);
		CHECK_EQ(snapshot_of(c, p), 1);
		umn_cache_stats(c, &after);
		CHECK_EQ(after.misses, before.misses + 1);
		CHECK_EQ(after.overflows, before.overflows + 1);
		replace_page(p, 3);
		CHECK_EQ(snapshot_of(c, p), 3);
		CHECK_EQ(umn_cache_destroy(c), 0);
		CHECK_EQ(umn_close(u), 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	umn_cache_stats(c, &before);
	CHECK_EQ(snapshot_of(c, p), 1);
	umn_cache_stats(c, &after);
	CHECK_EQ(after.hits, before.hits + 1);
	replace_page(p, 2);
	CHECK_EQ(snapshot_of(c, p), 2);
	CHECK_EQ(umn_cache_destroy(c), 0);
	CHECK_EQ(umn_close(u), 0);
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
#define T(fn) { #fn, fn }
	T(test_munmap_invalidates_only_the_watch_it_touches),
	T(test_dontneed_is_a_clear_and_mprotect_is_not_reported),
	T(test_causes_are_filtered_natively_only),
	T(test_unwatched_ranges_are_not_reported),
	T(test_resize_follows_the_new_range),
	T(test_fd_polls_readable_after_a_change),
	T(test_a_full_ring_reports_overflow_and_keeps_generations),
	T(test_read_events_leaves_what_does_not_fit),
	T(test_a_forked_child_starts_afresh),
	T(test_cache_never_serves_a_replaced_mapping),
	T(test_cache_under_concurrent_replacement),
	T(test_cache_replaces_an_entry_in_one_system_call),
	T(test_cache_ignores_a_watch_waiting_to_be_unwatched),
	T(test_cache_refused_watch_still_unwatches),
	T(test_cache_sends_a_full_queue_of_unwatches),
	T(test_cache_queue_stays_with_the_parent),
	T(test_whole_space_watch_reports_exact_ranges),
	T(test_whole_space_watch_never_goes_back_after_a_loss),
	T(test_whole_space_cache_never_serves_a_replaced_mapping),
	T(test_whole_space_cache_under_concurrent_replacement),
	T(test_whole_space_cache_overflowing_under_replacement),
	T(test_whole_space_cache_overflow_flushes),
	T(test_whole_space_cache_in_a_forked_child),
	T(test_whole_space_miss_waits_for_an_invalidation_in_flight),
	T(test_whole_space_open_is_not_failed_by_a_signal),
#undef T
};

#define NR_TESTS	(sizeof(tests) / sizeof(tests[0]))

/* Each test in a child of its own: a failed CHECK aborts only it. */
static bool run(const char *mode_name, unsigned int number, unsigned int i)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		tests[i].fn();
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	status = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	printf("%sok %u - %s: %s\n", status ? "" : "not ", number, mode_name,
	       tests[i].name);
	return status;
}

/* No arguments: every test; otherwise those whose name contains one. */
static bool selected(int argc, char **argv, unsigned int i)
{
	int a;

	for (a = 1; a < argc; a++)
		if (strstr(tests[i].name, argv[a]))
			return true;
	return argc == 1;
}

int main(int argc, char **argv)
{
	unsigned int i, number = 0, failed = 0, nr = 0;
	bool have_native;
	struct umn *u;
	int ret;

	ps = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = umn_open(&u, NULL);
	if (ret == -ENODEV) {
		printf("1..0 # SKIP no /dev/ummunotify\n");
		return KSFT_SKIP;
	}
	CHECK_EQ(ret, 0);
	have_native = umn_features(u) != 0;
	printf("# features %#x\n", umn_features(u));
	CHECK_EQ(umn_close(u), 0);

	/* The module under test has the native ABI: its absence fails. */
	for (i = 0; i < NR_TESTS; i++)
		nr += selected(argc, argv, i);
	printf("1..%u\n", 2 * nr);
	native = true;
	for (i = 0; i < NR_TESTS; i++) {
		if (!selected(argc, argv, i))
			continue;
		if (have_native) {
			failed += !run("native", ++number, i);
		} else {
			printf("not ok %u - native: %s (no native feature granted)\n",
			       ++number, tests[i].name);
			failed++;
		}
	}
	mode.flags = UMN_OPEN_LEGACY;
	native = false;
	for (i = 0; i < NR_TESTS; i++)
		if (selected(argc, argv, i))
			failed += !run("2010 ABI", ++number, i);
	return failed ? 1 : 0;
}
