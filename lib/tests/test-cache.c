// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The registration cache on the test double: behaviours one by one, then
 * random operation sequences checked against a brute-force model of what
 * the cache may and must do; in both modes, a watch per entry and one
 * watch of the whole address space.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ummunotify.h"
#include "check.h"

#define PAGE	4096UL
#define A(n)	((void *)(0x10000000UL + (n) * PAGE))
#define U(n)	((uint64_t)(uintptr_t)A(n))
#define MAX_REGS	100000
#define MAX_HELD	64

/* The model: every registration the cache ever made. */
struct reg {
	uint64_t start;
	uint64_t end;
	unsigned int users;	/* entries the test holds */
	bool live;		/* reg() without dereg() yet */
	bool forgotten;		/* forget() instead, in a forked child */
	bool cached;		/* may be in the cache's tree */
	bool invalidated;	/* its memory changed since reg() */
};

static struct reg regs[MAX_REGS];
static unsigned int nr_regs;
static struct umn_double *dbl;
static struct umn *umn;
static struct umn_cache *cache;
static size_t max_entries, max_bytes;
static bool use_forget = true;		/* give the cache a forget() */
static bool whole;			/* UMN_OPEN_WATCH_ALL */
static uint32_t ring_entries;		/* whole: records before a loss */
static int fail_reg;			/* next reg() returns this */
static int race_reg;			/* next reg()s invalidate themselves */

static struct reg *reg_of(const struct umn_cache_entry *e)
{
	uintptr_t id = (uintptr_t)e->handle;

	CHECK(id >= 1 && id <= nr_regs);
	return &regs[id - 1];
}

/* Like an munmap of [start, end): the source reports, the model notes. */
static void invalidate(uint64_t start, uint64_t end)
{
	unsigned int i;

	for (i = 0; i < nr_regs; i++)
		if (regs[i].live && regs[i].start < end && start < regs[i].end)
			regs[i].invalidated = true;
	double_invalidate(dbl, start, end, UMN_CAUSE_UNMAP);
}

static int model_reg(void *arg, void *addr, size_t len, void **handle)
{
	struct reg *r;

	CHECK(arg == &regs);
	CHECK((uintptr_t)addr % PAGE == 0 && len % PAGE == 0);
	if (fail_reg) {
		int ret = fail_reg;

		fail_reg = 0;
		return ret;
	}
	CHECK(nr_regs < MAX_REGS);
	r = &regs[nr_regs++];
	*r = (struct reg){
		.start = (uintptr_t)addr,
		.end = (uintptr_t)addr + len,
		.live = true,
		.cached = !max_bytes || len <= max_bytes,
	};
	*handle = (void *)(uintptr_t)nr_regs;
	if (race_reg) {
		/* Another thread unmapped it while it was being pinned. */
		race_reg--;
		invalidate(r->start, r->end);
	}
	return 0;
}

static void model_dereg(void *arg, void *addr, size_t len, void *handle)
{
	struct umn_cache_entry e = { addr, len, handle };
	struct reg *r = reg_of(&e);

	CHECK(arg == &regs);
	CHECK(r->live && !r->forgotten);
	CHECK_EQ(r->users, 0);		/* never under a user */
	CHECK_EQ(r->start, (uintptr_t)addr);
	CHECK_EQ(r->end - r->start, len);
	r->live = false;
}

/* Only in a forked child, for the parent's registrations. */
static void model_forget(void *arg, void *addr, size_t len, void *handle)
{
	struct umn_cache_entry e = { addr, len, handle };
	struct reg *r = reg_of(&e);

	CHECK(arg == &regs);
	CHECK(r->live && !r->forgotten);
	CHECK_EQ(r->users, 0);
	r->forgotten = true;
}

static void setup_watches(size_t entries, size_t bytes, size_t align,
			  uint32_t watches)
{
	struct umn_attr uattr = {
		.flags = whole ? UMN_OPEN_WATCH_ALL : 0,
		.max_watches = watches,
		.ring_entries = ring_entries,
	};
	struct umn_cache_attr attr = {
		.reg = model_reg,
		.dereg = model_dereg,
		.forget = use_forget ? model_forget : NULL,
		.arg = &regs,
		.max_entries = entries,
		.max_bytes = bytes,
		.align = align,
	};

	memset(regs, 0, sizeof(regs[0]) * nr_regs);
	nr_regs = 0;
	max_entries = entries;
	max_bytes = bytes;
	CHECK_EQ(double_open(&umn, &uattr, &dbl), 0);
	CHECK_EQ(umn_cache_create(umn, &attr, &cache), 0);
}

static void setup(size_t entries, size_t bytes, size_t align)
{
	setup_watches(entries, bytes, align, 0);
}

static void teardown(void)
{
	unsigned int i;

	umn_cache_flush(cache);
	for (i = 0; i < nr_regs; i++)
		CHECK(!regs[i].live || regs[i].forgotten);
	CHECK_EQ(umn_cache_destroy(cache), 0);
	CHECK_EQ(double_watches(dbl), whole);
	CHECK_EQ(umn_close(umn), 0);
	double_free(dbl);
}

static struct umn_cache_entry *get(unsigned int page, unsigned int pages)
{
	struct umn_cache_entry *e;

	CHECK_EQ(umn_cache_get(cache, A(page), pages * PAGE, &e), 0);
	reg_of(e)->users++;
	return e;
}

static void put(struct umn_cache_entry *e)
{
	reg_of(e)->users--;
	umn_cache_put(cache, e);
}

static struct umn_cache_stats stats(void)
{
	struct umn_cache_stats s;

	umn_cache_stats(cache, &s);
	return s;
}

static void test_second_get_is_a_hit_on_the_aligned_entry(void)
{
	struct umn_cache_entry *e1, *e2;

	setup(0, 0, 0);
	CHECK_EQ(umn_cache_get(cache, (char *)A(3) + 100, 10, &e1), 0);
	CHECK(e1->addr == A(3) && e1->len == PAGE);
	reg_of(e1)->users++;
	CHECK_EQ(umn_cache_get(cache, (char *)A(3) + 200, 300, &e2), 0);
	CHECK(e2 == e1);
	reg_of(e2)->users++;
	CHECK_EQ(stats().hits, 1);
	CHECK_EQ(stats().misses, 1);
	CHECK_EQ(stats().in_use, 1);
	put(e1);
	put(e2);
	CHECK_EQ(stats().in_use, 0);
	CHECK_EQ(stats().entries, 1);
	CHECK_EQ(stats().bytes, PAGE);
	teardown();
}

static void test_eviction_prefers_the_least_recently_used(void)
{
	struct umn_cache_entry *a, *b, *c, *d;

	setup(2, 0, 0);
	a = get(0, 1);
	put(a);
	b = get(1, 1);
	put(b);
	c = get(2, 1);
	put(c);
	CHECK(!reg_of(a)->live);		/* oldest */
	CHECK(reg_of(b)->live && reg_of(c)->live);

	put(get(1, 1));				/* b used again */
	d = get(3, 1);
	put(d);
	CHECK(!reg_of(c)->live);
	CHECK(reg_of(b)->live && reg_of(d)->live);
	CHECK_EQ(stats().evictions, 2);
	teardown();
}

static void test_entries_in_use_are_never_evicted(void)
{
	struct umn_cache_entry *a, *b;

	setup(1, 0, 0);
	a = get(0, 1);
	b = get(1, 1);
	CHECK(reg_of(a)->live && reg_of(b)->live);
	CHECK_EQ(stats().entries, 2);
	put(a);					/* over the limit: goes now */
	CHECK(!reg_of(a)->live);
	CHECK_EQ(stats().entries, 1);
	put(b);
	CHECK(reg_of(b)->live);
	teardown();
}

static void test_byte_limit_and_oversize_requests(void)
{
	struct umn_cache_entry *big, *a, *b;

	setup(0, 3 * PAGE, 0);
	big = get(0, 4);
	CHECK_EQ(stats().uncached, 1);
	CHECK_EQ(stats().entries, 0);
	put(big);
	CHECK(!reg_of(big)->live);

	a = get(10, 2);
	put(a);
	b = get(20, 2);
	put(b);
	CHECK(!reg_of(a)->live && reg_of(b)->live);
	CHECK_EQ(stats().bytes, 2 * PAGE);
	teardown();
}

static void test_invalidated_entries_go_at_once_or_at_put(void)
{
	struct umn_cache_entry *idle, *held, *again;

	setup(0, 0, 0);
	idle = get(0, 1);
	put(idle);
	held = get(5, 1);
	invalidate(U(0), U(6));
	/* One event per watch hit: whole-space mode has one. */
	CHECK_EQ(umn_cache_drain(cache), whole ? 1 : 2);
	CHECK(!reg_of(idle)->live);
	CHECK(reg_of(held)->live);
	CHECK_EQ(stats().invalidations, 2);

	again = get(5, 1);			/* not the stale one */
	CHECK(again != held);
	put(held);
	CHECK(!reg_of(held)->live);
	put(again);
	teardown();
}

static void test_a_lookup_notices_a_change_without_a_drain(void)
{
	struct umn_cache_entry *e;
	struct reg *old;

	setup(0, 0, 0);
	e = get(0, 2);
	old = reg_of(e);
	put(e);
	invalidate(U(1), U(2));
	e = get(0, 1);
	CHECK(reg_of(e) != old);
	CHECK(!old->live);
	put(e);
	teardown();
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Losing many races in a row is ordinary load and no failure (it failed
 * with EAGAIN after 16 before 2026-12-01); memory that never settles
 * fails after a second of retries, with back-off (so far fewer than a
 * retry per microsecond).
 */
static void check_retries_for_a_second(void)
{
	struct umn_cache_entry *e;
	uint64_t retries = stats().retries;
	unsigned int before;
	double t0, t;

	race_reg = 100;
	e = get(8, 1);
	CHECK_EQ(race_reg, 0);
	CHECK(!reg_of(e)->invalidated);
	CHECK_EQ(stats().retries, retries + 100);
	put(e);

	race_reg = INT_MAX;			/* never settles */
	before = nr_regs;
	t0 = seconds();
	CHECK_EQ(umn_cache_get(cache, A(16), PAGE, &e), -EAGAIN);
	t = seconds() - t0;
	race_reg = 0;
	CHECK(t >= 1.0 && t < 10.0);
	CHECK(nr_regs - before > 100 && nr_regs - before < 2000);
}

static void test_a_change_during_registration_is_retried(void)
{
	struct umn_cache_entry *e;

	setup(0, 0, 0);
	race_reg = 1;
	e = get(0, 1);
	CHECK(!reg_of(e)->invalidated);
	CHECK_EQ(nr_regs, 2);
	CHECK(!regs[0].live);
	CHECK_EQ(stats().retries, 1);
	put(e);
	check_retries_for_a_second();
	CHECK_EQ(double_watches(dbl), 2);
	teardown();
}

static void test_a_failed_registration_leaves_nothing(void)
{
	struct umn_cache_entry *e;

	setup(0, 0, 0);
	fail_reg = -EFAULT;
	CHECK_EQ(umn_cache_get(cache, A(0), PAGE, &e), -EFAULT);
	CHECK_EQ(double_watches(dbl), 0);
	CHECK_EQ(stats().entries, 0);
	CHECK_EQ(umn_cache_get(cache, A(0), 0, &e), -EINVAL);
	teardown();
}

static void test_a_larger_entry_replaces_idle_ones_it_contains(void)
{
	struct umn_cache_entry *small, *busy, *large;

	setup(0, 0, 0);
	small = get(1, 1);
	put(small);
	busy = get(2, 1);
	large = get(0, 4);
	CHECK(!reg_of(small)->live);
	CHECK(reg_of(busy)->live);
	put(busy);
	put(large);
	CHECK_EQ(stats().entries, 2);
	teardown();
}

static void test_pressure_releases_idle_entries_oldest_first(void)
{
	struct umn_cache_entry *e[4];
	int i;

	setup(0, 0, 0);
	for (i = 0; i < 4; i++)
		e[i] = get(i, 1);
	for (i = 1; i < 4; i++)
		put(e[i]);
	double_pressure(dbl, 2 * PAGE);
	umn_cache_drain(cache);
	CHECK(reg_of(e[0])->live);
	CHECK(!reg_of(e[1])->live && !reg_of(e[2])->live);
	CHECK(reg_of(e[3])->live);
	double_pressure(dbl, 0);
	umn_cache_drain(cache);
	CHECK(!reg_of(e[3])->live && reg_of(e[0])->live);
	CHECK_EQ(stats().released, 3);
	put(e[0]);
	teardown();
}

static void test_overflow_rescans_every_entry(void)
{
	struct umn_cache_entry *e;

	setup(0, 0, 0);
	put(get(0, 1));
	e = get(3, 1);
	double_fail_pull(dbl);
	CHECK_EQ(umn_cache_drain(cache), 1);
	CHECK_EQ(stats().overflows, 1);
	CHECK_EQ(stats().entries, 0);
	CHECK_EQ(stats().deregistrations, 1);
	put(e);
	CHECK_EQ(stats().deregistrations, 2);
	teardown();
}

static void test_running_out_of_watches_releases_idle_entries(void)
{
	struct umn_cache_entry *a, *b, *c;

	setup_watches(0, 0, 0, 2);
	a = get(0, 1);
	put(a);
	b = get(1, 1);
	c = get(2, 1);
	CHECK(!reg_of(a)->live);
	CHECK_EQ(stats().released, 1);
	CHECK_EQ(umn_cache_get(cache, A(3), PAGE, &a), -ENOSPC);
	put(b);
	put(c);
	teardown();
}

static void test_destroy_and_close_refuse_while_busy(void)
{
	struct umn_cache_entry *e;

	setup(0, 0, 0);
	e = get(0, 1);
	CHECK_EQ(umn_cache_destroy(cache), -EBUSY);
	CHECK_EQ(umn_close(umn), -EBUSY);
	put(e);
	teardown();
}

/*
 * The parent's registrations are forgotten in the child, never
 * deregistered: an idle one when the child's first lookup finds it
 * invalid, one held across the fork at its put.  The child's own are
 * deregistered as usual, and the parent's cache is untouched.
 */
static void test_forked_child_forgets_the_parents_entries(void)
{
	struct umn_cache_entry *held, *e;
	int status;
	pid_t pid;

	setup(0, 0, 0);
	put(get(0, 1));
	held = get(1, 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		e = get(0, 1);
		CHECK_EQ(nr_regs, 3);
		CHECK(regs[0].live && regs[0].forgotten);
		CHECK(!reg_of(held)->forgotten);	/* in use */
		put(held);
		CHECK(reg_of(held)->live && reg_of(held)->forgotten);
		CHECK_EQ(stats().deregistrations, 0);
		put(e);
		teardown();
		CHECK(!regs[2].live && !regs[2].forgotten);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	put(held);
	e = get(0, 1);
	CHECK_EQ(nr_regs, 2);
	CHECK_EQ(stats().hits, 1);
	put(e);
	teardown();
}

/* Without forget(), the child drops the parent's entries silently. */
static void test_forked_child_without_forget_calls_nothing(void)
{
	int status;
	pid_t pid;

	use_forget = false;
	setup(0, 0, 0);
	put(get(0, 1));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		umn_cache_flush(cache);
		CHECK(regs[0].live && !regs[0].forgotten);
		CHECK_EQ(stats().entries, 0);
		CHECK_EQ(stats().deregistrations, 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(regs[0].live);
	teardown();
	use_forget = true;
}

/* ---- whole-address-space mode ---- */

/* No watch per entry; a change drops exactly the entries it overlaps. */
static void test_whole_space_drops_exactly_what_a_change_overlaps(void)
{
	struct umn_cache_entry *a, *b, *c, *again;

	whole = true;
	setup(0, 0, 0);
	a = get(0, 2);
	b = get(4, 1);
	c = get(8, 1);
	put(a);
	put(b);
	put(c);
	CHECK_EQ(double_watches(dbl), 1);
	invalidate(U(1), U(5));			/* a and b, not c */
	again = get(8, 1);
	CHECK(again == c);
	put(again);
	CHECK(!reg_of(a)->live && !reg_of(b)->live && reg_of(c)->live);
	CHECK_EQ(stats().invalidations, 2);
	invalidate(U(9), U(10));		/* next to c: nothing */
	put(get(8, 1));
	CHECK_EQ(stats().hits, 2);
	teardown();
	whole = false;
}

/* A change while reg() runs is applied to the entry being registered. */
static void test_whole_space_change_during_registration_is_retried(void)
{
	struct umn_cache_entry *e;

	whole = true;
	setup(0, 0, 0);
	race_reg = 1;
	e = get(0, 1);
	CHECK_EQ(nr_regs, 2);
	CHECK(!regs[0].live && !reg_of(e)->invalidated);
	CHECK_EQ(stats().retries, 1);
	put(e);
	check_retries_for_a_second();
	teardown();
	whole = false;
}

/* More changes than the ring holds: a flush, never a stale hit. */
static void test_whole_space_overflow_flushes(void)
{
	struct umn_cache_entry *held, *e;
	int i;

	whole = true;
	ring_entries = 2;
	setup(0, 0, 0);
	for (i = 0; i < 4; i++)
		put(get(2 * i, 1));
	held = get(20, 1);
	for (i = 0; i < 3; i++)
		invalidate(U(2 * i), U(2 * i + 1));
	e = get(6, 1);				/* unchanged, but dropped */
	CHECK(reg_of(e) != &regs[3]);
	CHECK_EQ(stats().overflows, 1);
	CHECK(!regs[3].live && reg_of(held)->live);
	put(held);
	CHECK(!reg_of(held)->live);
	put(e);
	teardown();
	ring_entries = 0;
	whole = false;
}

/* ---- random operation sequences against the model ---- */

#define SPACE_PAGES	48

static struct umn_cache_entry *held[MAX_HELD];
static unsigned int nr_held;
static uint64_t model_hits, model_misses;

static bool in_cache(const struct reg *r)
{
	return r->live && r->cached && !r->invalidated;
}

/* Over a limit only while every cached entry is in use. */
static void check_limits(void)
{
	uint64_t count = 0, bytes = 0;
	bool idle = false;
	unsigned int i;

	for (i = 0; i < nr_regs; i++) {
		if (!in_cache(&regs[i]))
			continue;
		count++;
		bytes += regs[i].end - regs[i].start;
		idle |= !regs[i].users;
	}
	if ((max_entries && count > max_entries) ||
	    (max_bytes && bytes > max_bytes))
		CHECK(!idle);
}

/* After a drain the cache holds exactly the model's cached set. */
static void check_drained(void)
{
	struct umn_cache_stats s = stats();
	uint64_t count = 0, bytes = 0, users = 0;
	unsigned int i;

	for (i = 0; i < nr_regs; i++) {
		if (regs[i].invalidated && !regs[i].users)
			CHECK(!regs[i].live);
		users += regs[i].users > 0;
		if (!in_cache(&regs[i]))
			continue;
		count++;
		bytes += regs[i].end - regs[i].start;
	}
	CHECK_EQ(s.entries, count);
	CHECK_EQ(s.bytes, bytes);
	CHECK_EQ(s.in_use, users);
	CHECK_EQ(s.hits, model_hits);
	CHECK_EQ(s.misses, model_misses);
}

static void op_get(size_t align)
{
	uint64_t lo = U(rnd_below(SPACE_PAGES)) + rnd_below(PAGE);
	uint64_t len = rnd_below(4) ? 1 + rnd_below(2 * PAGE) :
				      1 + rnd_below(12 * PAGE);
	uint64_t hi = lo + len, start = lo & ~(align - 1);
	uint64_t end = (hi + align - 1) & ~(align - 1);
	unsigned int before = nr_regs, i;
	struct umn_cache_entry *e;
	bool expect_hit = false;
	int ret, injected;
	struct reg *r;

	if (nr_held == MAX_HELD)
		return;
	for (i = 0; i < nr_regs; i++)
		expect_hit |= in_cache(&regs[i]) && regs[i].start <= lo &&
			      hi <= regs[i].end;
	if (!rnd_below(20))
		fail_reg = -EFAULT;
	else if (!rnd_below(20))
		race_reg = 1;

	injected = fail_reg;
	ret = umn_cache_get(cache, (void *)(uintptr_t)lo, len, &e);
	if (expect_hit) {
		model_hits++;
		fail_reg = race_reg = 0;
		CHECK_EQ(ret, 0);
		CHECK_EQ(nr_regs, before);
	} else {
		model_misses++;
		if (injected) {
			CHECK_EQ(fail_reg, 0);
			CHECK_EQ(ret, injected);
			return;
		}
		CHECK_EQ(ret, 0);
		CHECK(nr_regs > before);
		CHECK_EQ(reg_of(e) - regs, nr_regs - 1);
		CHECK_EQ(reg_of(e)->start, start);
		CHECK_EQ(reg_of(e)->end, end);
		race_reg = 0;
	}
	r = reg_of(e);
	CHECK(r->live && !r->invalidated);
	CHECK(r->start <= lo && hi <= r->end);
	CHECK((uintptr_t)e->addr == r->start && e->len == r->end - r->start);
	r->users++;
	held[nr_held++] = e;

	/* A new entry replaced the idle ones it contains. */
	if (!expect_hit && r->cached)
		for (i = 0; i < before; i++)
			if (in_cache(&regs[i]) && !regs[i].users &&
			    r->start <= regs[i].start && regs[i].end <= r->end)
				CHECK(false);
}

static void op_put(void)
{
	unsigned int i = rnd_below(nr_held);
	struct reg *r = reg_of(held[i]);

	put(held[i]);
	held[i] = held[--nr_held];
	if (!r->cached && !r->users)
		CHECK(!r->live);		/* oversize, or flushed */
}

static void op_invalidate(void)
{
	uint64_t start = U(rnd_below(SPACE_PAGES)) + rnd_below(PAGE);

	invalidate(start, start + 1 + rnd_below(3 * PAGE));
}

static void op_flush(void)
{
	unsigned int i;

	umn_cache_flush(cache);
	for (i = 0; i < nr_regs; i++) {
		regs[i].cached = false;
		if (!regs[i].users)
			CHECK(!regs[i].live);
	}
}

static void op_pressure(void)
{
	uint64_t want = rnd_below(3) ? rnd_below(8) * PAGE : 0;
	uint64_t idle_before = 0, freed = 0, idle_after = 0;
	bool was_live[MAX_REGS / 100];
	unsigned int i, n = nr_regs < MAX_REGS / 100 ? nr_regs : 0;

	if (!n)
		return;
	for (i = 0; i < n; i++) {
		was_live[i] = regs[i].live;
		if (in_cache(&regs[i]) && !regs[i].users)
			idle_before += regs[i].end - regs[i].start;
	}
	double_pressure(dbl, want);
	umn_cache_drain(cache);
	for (i = 0; i < n; i++) {
		if (was_live[i] && !regs[i].live && !regs[i].invalidated)
			freed += regs[i].end - regs[i].start;
		if (in_cache(&regs[i]) && !regs[i].users)
			idle_after += regs[i].end - regs[i].start;
	}
	if (!want)
		CHECK_EQ(idle_after, 0);
	else
		CHECK(freed >= want || idle_after == 0);
	CHECK(freed <= idle_before);
}

static void op_overflow(void)
{
	unsigned int i;

	for (i = 0; i < nr_regs; i++)
		if (regs[i].live)
			regs[i].invalidated = true;
	double_fail_pull(dbl);
}

static void property_run(unsigned int ops)
{
	size_t align = rnd_below(4) ? PAGE : 4 * PAGE;
	unsigned int op, roll;

	setup(rnd_below(3) ? rnd_below(12) : 0,
	      rnd_below(3) ? rnd_below(24) * PAGE : 0, align);
	nr_held = 0;
	model_hits = model_misses = 0;
	for (op = 0; op < ops; op++) {
		roll = rnd_below(100);
		if (roll < 45)
			op_get(align);
		else if (roll < 80 && nr_held)
			op_put();
		else if (roll < 90)
			op_invalidate();
		else if (roll < 95) {
			umn_cache_drain(cache);
			check_drained();
		} else if (roll < 97)
			op_pressure();
		else if (roll < 99)
			op_overflow();
		else
			op_flush();
		check_limits();
	}
	while (nr_held)
		op_put();
	umn_cache_drain(cache);
	check_drained();
	teardown();
}

/* The umn_cache_create() of 1.0, as programs built before 1.3 call it. */
int umn_cache_create_old(struct umn *u, const void *attr,
			 struct umn_cache **c);
__asm__(".symver umn_cache_create_old, umn_cache_create@UMMUNOTIFY_1.0");

/*
 * comp_mask: a bit this library does not know is refused; the 1.0 entry
 * reads nothing past forget, however the bytes after it read.
 */
static void test_attr_comp_mask_and_the_1_0_entry(void)
{
	struct umn_cache_attr attr = {
		.reg = model_reg, .dereg = model_dereg, .arg = &regs,
		.comp_mask = 1,
	};
	struct {
		char old[offsetof(struct umn_cache_attr, comp_mask)];
		uint32_t after;
	} old = { .after = ~0U };

	CHECK_EQ(double_open(&umn, NULL, &dbl), 0);
	CHECK_EQ(umn_cache_create(umn, &attr, &cache), -EINVAL);
	attr.comp_mask = 0;
	memcpy(old.old, &attr, sizeof(old.old));
	CHECK_EQ(umn_cache_create_old(umn, &old, &cache), 0);
	CHECK_EQ(umn_cache_destroy(cache), 0);
	CHECK_EQ(umn_cache_create_old(umn, NULL, &cache), -EINVAL);
	CHECK_EQ(umn_close(umn), 0);
	double_free(dbl);
}

/*
 * umn_cache_query_stats() fills what the caller's size holds and zeroes
 * what this library does not keep; umn_cache_stats() the 1.0 counters.
 */
static void test_query_stats_fills_what_the_size_holds(void)
{
	struct {
		struct umn_cache_stats s;
		uint64_t later[2];
	} big;
	struct umn_cache_stats s, q;

	setup(0, 0, 0);
	put(get(0, 1));
	put(get(0, 1));
	s = stats();
	CHECK_EQ(s.hits, 1);
	CHECK_EQ(s.misses, 1);
	memset(&q, 0xff, sizeof(q));
	CHECK_EQ(umn_cache_query_stats(cache, &q, sizeof(q)), (int)sizeof(q));
	CHECK(!memcmp(&q, &s, sizeof(q)));
	memset(&big, 0xff, sizeof(big));
	CHECK_EQ(umn_cache_query_stats(cache, &big.s, sizeof(big)),
		 (int)sizeof(s));
	CHECK(!memcmp(&big.s, &s, sizeof(s)));
	CHECK_EQ(big.later[0], 0);
	CHECK_EQ(big.later[1], 0);
	CHECK_EQ(umn_cache_query_stats(cache, &q, UMN_CACHE_STATS_SIZE_1_0 - 8),
		 -EINVAL);
	CHECK_EQ(umn_cache_query_stats(cache, &q, sizeof(q) + 4), -EINVAL);
	teardown();
}

int main(int argc, char **argv)
{
	unsigned int runs = argc > 1 ? atoi(argv[1]) : 300, i;

	test_second_get_is_a_hit_on_the_aligned_entry();
	test_eviction_prefers_the_least_recently_used();
	test_entries_in_use_are_never_evicted();
	test_byte_limit_and_oversize_requests();
	test_invalidated_entries_go_at_once_or_at_put();
	test_a_lookup_notices_a_change_without_a_drain();
	test_a_change_during_registration_is_retried();
	test_a_failed_registration_leaves_nothing();
	test_a_larger_entry_replaces_idle_ones_it_contains();
	test_pressure_releases_idle_entries_oldest_first();
	test_overflow_rescans_every_entry();
	test_running_out_of_watches_releases_idle_entries();
	test_destroy_and_close_refuse_while_busy();
	test_forked_child_forgets_the_parents_entries();
	test_forked_child_without_forget_calls_nothing();
	test_whole_space_drops_exactly_what_a_change_overlaps();
	test_whole_space_change_during_registration_is_retried();
	test_whole_space_overflow_flushes();
	test_attr_comp_mask_and_the_1_0_entry();
	test_query_stats_fills_what_the_size_holds();
	whole = true;
	test_forked_child_forgets_the_parents_entries();
	test_pressure_releases_idle_entries_oldest_first();
	test_invalidated_entries_go_at_once_or_at_put();
	test_a_lookup_notices_a_change_without_a_drain();
	whole = false;

	seed_rng("test-cache");
	for (i = 0; i < runs; i++) {
		whole = i % 2;
		property_run(1000 + rnd_below(2000));
	}
	whole = false;
	printf("test-cache: ok (%u random runs)\n", runs);
	return 0;
}
