// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * umn_*() on the emulated implementation, driven by the test double:
 * generations, events, unwatch and resize, re-entrant callbacks, limits,
 * lost reports and fork.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ummunotify.h"
#include "check.h"

#define PAGE	4096UL
#define A(n)	((void *)(0x10000000UL + (n) * PAGE))
#define U(n)	((uint64_t)(uintptr_t)A(n))

struct log {
	unsigned int n;
	struct umn_event events[16];
	/* Optional: unwatch this from inside the callback. */
	struct umn *u;
	struct umn_watch *unwatch;
};

static void log_event(void *arg, const struct umn_event *event)
{
	struct log *log = arg;

	CHECK(log->n < 16);
	log->events[log->n++] = *event;
	if (log->unwatch) {
		CHECK_EQ(umn_unwatch(log->u, log->unwatch), 0);
		log->unwatch = NULL;
	}
}

static struct umn *open_double(struct umn_double **d, uint32_t max_watches)
{
	struct umn_attr attr = { .max_watches = max_watches };
	struct umn *u;

	CHECK_EQ(double_open(&u, &attr, d), 0);
	return u;
}

static void close_double(struct umn *u, struct umn_double *d)
{
	CHECK_EQ(umn_close(u), 0);
	double_free(d);
}

static void test_watch_reads_valid_until_overlapping_change(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w1, w2;

	CHECK_EQ(umn_features(u), 0);
	CHECK_EQ(umn_watch(u, A(0), 2 * PAGE, 0, &w1), 0);
	CHECK_EQ(umn_watch(u, A(4), PAGE, 0, &w2), 0);
	CHECK(w1.generation != 0 && w2.generation != w1.generation);
	CHECK(umn_valid(u, &w1) && umn_valid(u, &w2));
	CHECK(!umn_changed(u));

	CHECK_EQ(double_invalidate(d, U(2), U(4), UMN_CAUSE_UNMAP), 0);
	CHECK(umn_valid(u, &w1) && umn_valid(u, &w2));
	CHECK_EQ(double_invalidate(d, U(1), U(3), UMN_CAUSE_UNMAP), 1);
	CHECK(umn_changed(u));
	CHECK(!umn_valid(u, &w1));
	CHECK(umn_valid(u, &w2));
	/* Pulled by umn_valid(), still to be drained. */
	CHECK(umn_changed(u));
	close_double(u, d);
}

static void test_drain_reports_each_change_once(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w;
	struct log log = { 0 };

	CHECK_EQ(umn_watch(u, A(0), 4 * PAGE, 0, &w), 0);
	double_invalidate(d, U(1), U(2), UMN_CAUSE_CLEAR);
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK(log.events[0].watch == &w);
	CHECK_EQ(log.events[0].start, U(1));
	CHECK_EQ(log.events[0].end, U(2));
	CHECK_EQ(log.events[0].cause, UMN_CAUSE_CLEAR);
	CHECK(!umn_changed(u));
	CHECK_EQ(umn_drain(u, log_event, &log), 0);

	/* Two hits before a drain: one event, the range widened. */
	double_invalidate(d, U(1), U(2), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, &w));
	double_invalidate(d, U(3), U(4), UMN_CAUSE_CLEAR);
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK_EQ(log.events[1].start, U(1));
	CHECK_EQ(log.events[1].end, U(4));
	CHECK_EQ(log.events[1].cause, UMN_CAUSE_UNKNOWN);
	close_double(u, d);
}

static void test_unwatched_watch_reads_invalid_and_is_not_reported(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w, again;
	struct log log = { 0 };

	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w), 0);
	double_invalidate(d, U(0), U(1), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, &w));		/* pulled: now pending */
	CHECK_EQ(umn_unwatch(u, &w), 0);
	CHECK_EQ(umn_drain(u, log_event, &log), 0);
	CHECK_EQ(umn_unwatch(u, &w), -ENOENT);
	CHECK_EQ(double_watches(d), 0);

	/* The slot is reused; the old watch stays invalid. */
	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &again), 0);
	CHECK_EQ(again.slot, w.slot);
	CHECK(!umn_valid(u, &w));
	CHECK(umn_valid(u, &again));
	close_double(u, d);
}

static bool readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	CHECK(poll(&pfd, 1, 0) >= 0);
	return pfd.revents & POLLIN;
}

static void test_read_events_copies_out_and_leaves_what_does_not_fit(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w[3];
	struct umn_event ev[2];
	int i;

	CHECK_EQ(umn_read_events(u, ev, 0), -EINVAL);
	for (i = 0; i < 3; i++)
		CHECK_EQ(umn_watch(u, A(2 * i), PAGE, 0, &w[i]), 0);
	CHECK_EQ(umn_read_events(u, ev, 2), 0);

	double_invalidate(d, U(0), U(1), UMN_CAUSE_UNMAP);
	CHECK_EQ(umn_read_events(u, ev, 2), 1);
	CHECK(ev[0].watch == &w[0]);
	CHECK_EQ(ev[0].start, U(0));
	CHECK_EQ(ev[0].end, U(1));
	CHECK(!umn_changed(u));

	/* Three events, room for two: the third waits for the next call. */
	double_invalidate(d, U(0), U(6), UMN_CAUSE_UNMAP);
	CHECK_EQ(umn_read_events(u, ev, 2), 2);
	CHECK(ev[0].watch == &w[0] && ev[1].watch == &w[1]);
	CHECK(umn_changed(u));
	CHECK(readable(umn_fd(u)));
	CHECK_EQ(umn_read_events(u, ev, 2), 1);
	CHECK(ev[0].watch == &w[2]);
	CHECK_EQ(ev[0].cause, UMN_CAUSE_UNMAP);
	CHECK(!umn_changed(u));
	CHECK(!readable(umn_fd(u)));
	CHECK_EQ(umn_read_events(u, ev, 2), 0);
	for (i = 0; i < 3; i++)
		CHECK(!umn_valid(u, &w[i]));
	close_double(u, d);
}

static void test_fd_is_readable_while_pulled_reports_wait(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w;
	struct log log = { 0 };
	int fd = umn_fd(u);

	CHECK(fd >= 0);
	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w), 0);
	CHECK(!readable(fd));
	double_invalidate(d, U(0), U(1), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, &w));		/* pulled: the source is quiet */
	CHECK(readable(fd));
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK(!readable(fd));
	close_double(u, d);
}

static void test_callback_may_unwatch_a_watch_with_a_pending_event(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w1, w2;
	struct log log = { .u = u, .unwatch = &w2 };

	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w1), 0);
	CHECK_EQ(umn_watch(u, A(1), PAGE, 0, &w2), 0);
	double_invalidate(d, U(0), U(2), UMN_CAUSE_UNMAP);
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK(log.events[0].watch == &w1);
	close_double(u, d);
}

static void test_resize_keeps_generation_and_follows_range(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w;
	uint64_t gen;

	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w), 0);
	gen = w.generation;
	CHECK_EQ(umn_resize(u, &w, A(0), 3 * PAGE), 0);
	CHECK_EQ(w.generation, gen);
	CHECK(umn_valid(u, &w));
	CHECK_EQ(double_watches(d), 1);
	double_invalidate(d, U(2), U(3), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, &w));

	/* Shrunk: the part left out is no longer watched. */
	CHECK_EQ(umn_watch(u, A(8), 2 * PAGE, 0, &w), 0);
	CHECK_EQ(umn_resize(u, &w, A(8), PAGE), 0);
	double_invalidate(d, U(9), U(10), UMN_CAUSE_UNMAP);
	CHECK(umn_valid(u, &w));
	close_double(u, d);
}

static void test_a_change_before_a_resize_still_shows(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w;
	struct log log = { 0 };

	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w), 0);
	double_invalidate(d, U(0), U(1), UMN_CAUSE_UNMAP);
	CHECK_EQ(umn_resize(u, &w, A(0), 2 * PAGE), 0);
	CHECK(!umn_valid(u, &w));
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK(log.events[0].watch == &w);
	close_double(u, d);
}

static void test_bad_arguments_and_limits(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 2);
	struct umn_watch w[3];
	struct umn_attr bad = { .ring_entries = 3 };
	struct umn_attr later = { .comp_mask = 1 };

	CHECK_EQ(umn_open(&u, &bad), -EINVAL);
	/* A setting this library does not know is refused, not ignored. */
	CHECK_EQ(umn_open(&u, &later), -EINVAL);
	CHECK_EQ(umn_watch(u, A(0), 0, 0, &w[0]), -EINVAL);
	CHECK_EQ(umn_watch(u, (void *)-4096UL, 8192, 0, &w[0]), -EINVAL);
	CHECK_EQ(umn_watch(u, A(0), PAGE, 1U << UMN_CAUSE_OVERFLOW, &w[0]),
		 -EINVAL);
	/* The 2010 ABI cannot filter. */
	CHECK_EQ(umn_watch(u, A(0), PAGE, 1U << UMN_CAUSE_PROTECTION, &w[0]),
		 -EOPNOTSUPP);
	CHECK_EQ(umn_watch(u, A(0), PAGE, UMN_CAUSES_DEFAULT, &w[0]), 0);
	CHECK_EQ(umn_watch(u, A(1), PAGE, 0, &w[1]), 0);
	CHECK_EQ(umn_watch(u, A(2), PAGE, 0, &w[2]), -ENOSPC);
	CHECK_EQ(umn_unwatch(u, &w[0]), 0);
	CHECK_EQ(umn_watch(u, A(2), PAGE, 0, &w[2]), 0);
	close_double(u, d);
}

static void test_generations_are_never_zero_or_repeated(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 4);
	struct umn_watch w;
	uint64_t last = 0;
	int i;

	for (i = 0; i < 1000; i++) {
		CHECK_EQ(umn_watch(u, A(i % 7), PAGE, 0, &w), 0);
		CHECK(w.generation > last);
		last = w.generation;
		if (i % 3 == 0) {
			double_invalidate(d, U(i % 7), U(i % 7 + 1), 0);
			CHECK(!umn_valid(u, &w));
			CHECK(*w.word > last);
			last = *w.word;
		}
		CHECK_EQ(umn_unwatch(u, &w), 0);
		CHECK_EQ(*w.word, 0);
	}
	close_double(u, d);
}

static void test_a_lost_pull_invalidates_everything(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w1, w2;
	struct log log = { 0 };

	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w1), 0);
	CHECK_EQ(umn_watch(u, A(5), PAGE, 0, &w2), 0);
	double_fail_pull(d);
	CHECK(!umn_valid(u, &w1));
	CHECK(!umn_valid(u, &w2));
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK_EQ(log.events[0].cause, UMN_CAUSE_OVERFLOW);
	CHECK(log.events[0].watch == NULL);
	close_double(u, d);
}

static void test_pressure_requests_coalesce(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct log log = { 0 };

	double_pressure(d, 1000);
	CHECK(umn_changed(u));
	CHECK_EQ(umn_drain(u, log_event, &log), 1);
	CHECK_EQ(log.events[0].cause, UMN_CAUSE_PRESSURE);
	CHECK_EQ(log.events[0].value, 1000);
	CHECK(!umn_changed(u));
	close_double(u, d);
}

static void test_forked_child_sees_every_watch_invalid_and_reopens(void)
{
	struct umn_double *d;
	struct umn *u = open_double(&d, 0);
	struct umn_watch w, fresh;
	struct log log = { 0 };
	int status;
	pid_t pid;

	CHECK_EQ(umn_watch(u, A(0), PAGE, 0, &w), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK(!umn_valid(u, &w));
		CHECK(umn_changed(u));
		CHECK_EQ(umn_drain(u, log_event, &log), 1);
		CHECK_EQ(log.events[0].cause, UMN_CAUSE_OVERFLOW);
		CHECK(!umn_changed(u));
		CHECK(!umn_valid(u, &w));
		CHECK_EQ(umn_unwatch(u, &w), -ENOENT);
		CHECK_EQ(umn_watch(u, A(1), PAGE, 0, &fresh), 0);
		CHECK(umn_valid(u, &fresh));
		double_invalidate(d, U(1), U(2), UMN_CAUSE_UNMAP);
		CHECK(!umn_valid(u, &fresh));
		CHECK(!umn_valid(u, &w));
		CHECK_EQ(umn_close(u), 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent is untouched. */
	CHECK(umn_valid(u, &w));
	CHECK(!umn_changed(u));
	double_invalidate(d, U(0), U(1), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, &w));
	close_double(u, d);
}

static struct umn *open_whole(struct umn_double **d, uint32_t ring_entries)
{
	struct umn_attr attr = { .flags = UMN_OPEN_WATCH_ALL,
				 .ring_entries = ring_entries };
	struct umn *u;

	CHECK_EQ(double_open(&u, &attr, d), 0);
	CHECK(umn_watch_all(u));
	return u;
}

static void test_whole_space_watch_reports_each_change_exactly(void)
{
	struct umn_double *d;
	struct umn *u = open_whole(&d, 0), *plain;
	const struct umn_watch *all = umn_watch_all(u);
	struct log log = { 0 };
	struct umn_watch w;

	CHECK(umn_valid(u, all));
	CHECK_EQ(umn_watch(u, A(10), PAGE, 0, &w), 0);
	double_invalidate(d, U(1), U(2), UMN_CAUSE_UNMAP);
	double_invalidate(d, U(5), U(7), UMN_CAUSE_CLEAR);
	double_invalidate(d, U(1), U(2), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, all));
	CHECK(umn_valid(u, &w));
	/* Not coalesced: three changes, three events, in order. */
	CHECK_EQ(umn_drain(u, log_event, &log), 3);
	CHECK(umn_valid(u, all));
	CHECK(log.events[0].watch == all && log.events[1].watch == all &&
	      log.events[2].watch == all);
	CHECK_EQ(log.events[0].start, U(1));
	CHECK_EQ(log.events[0].end, U(2));
	CHECK_EQ(log.events[1].start, U(5));
	CHECK_EQ(log.events[1].end, U(7));
	CHECK_EQ(log.events[1].cause, UMN_CAUSE_CLEAR);
	CHECK_EQ(log.events[2].start, U(1));
	/* It lasts as long as the handle. */
	CHECK_EQ(umn_unwatch(u, (struct umn_watch *)all), -ENOENT);
	CHECK_EQ(umn_resize(u, (struct umn_watch *)all, A(0), PAGE), -ENOENT);
	close_double(u, d);

	plain = open_double(&d, 0);
	CHECK(!umn_watch_all(plain));
	close_double(plain, d);
}

/* What does not fit is lost, and the watch catches up at the loss. */
static void test_whole_space_records_overflow_into_one_loss(void)
{
	struct umn_double *d;
	struct umn *u = open_whole(&d, 2);
	const struct umn_watch *all = umn_watch_all(u);
	struct log log = { 0 };
	int i;

	for (i = 0; i < 5; i++)
		double_invalidate(d, U(i), U(i + 1), UMN_CAUSE_UNMAP);
	CHECK(!umn_valid(u, all));
	CHECK_EQ(umn_drain(u, log_event, &log), 3);
	CHECK_EQ(log.events[0].start, U(0));
	CHECK_EQ(log.events[1].start, U(1));
	CHECK_EQ(log.events[2].cause, UMN_CAUSE_OVERFLOW);
	CHECK(umn_valid(u, all));
	close_double(u, d);
}

static void test_forked_child_gets_a_whole_space_watch_of_its_own(void)
{
	struct umn_double *d;
	struct umn *u = open_whole(&d, 0);
	const struct umn_watch *all = umn_watch_all(u);
	struct log log = { 0 };
	int status;
	pid_t pid;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* Invalid until the drain has said that everything went. */
		CHECK(!umn_valid(u, all));
		CHECK_EQ(umn_drain(u, log_event, &log), 1);
		CHECK_EQ(log.events[0].cause, UMN_CAUSE_OVERFLOW);
		CHECK(umn_valid(u, all) && umn_watch_all(u) == all);
		double_invalidate(d, U(3), U(4), UMN_CAUSE_UNMAP);
		CHECK(!umn_valid(u, all));
		CHECK_EQ(umn_drain(u, log_event, &log), 1);
		CHECK(log.events[1].watch == all);
		CHECK_EQ(log.events[1].start, U(3));
		CHECK(umn_valid(u, all));
		CHECK_EQ(umn_close(u), 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(umn_valid(u, all));
	close_double(u, d);
}

int main(void)
{
	test_watch_reads_valid_until_overlapping_change();
	test_drain_reports_each_change_once();
	test_unwatched_watch_reads_invalid_and_is_not_reported();
	test_read_events_copies_out_and_leaves_what_does_not_fit();
	test_fd_is_readable_while_pulled_reports_wait();
	test_callback_may_unwatch_a_watch_with_a_pending_event();
	test_resize_keeps_generation_and_follows_range();
	test_a_change_before_a_resize_still_shows();
	test_bad_arguments_and_limits();
	test_generations_are_never_zero_or_repeated();
	test_a_lost_pull_invalidates_everything();
	test_pressure_requests_coalesce();
	test_forked_child_sees_every_watch_invalid_and_reopens();
	test_whole_space_watch_reports_each_change_exactly();
	test_whole_space_records_overflow_into_one_loss();
	test_forked_child_gets_a_whole_space_watch_of_its_own();
	printf("test-umn: ok\n");
	return 0;
}
