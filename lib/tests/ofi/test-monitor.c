// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The monitor on the host, imported into the host's real libfabric, with
 * the test double for the device (umn_open() is wrapped at link time): a
 * watch per range shared by subscribes, valid() following the generation
 * word, recycling at max_watches, and the thread passing an invalidation
 * to notify() and retiring the watch.  The monitor's source is included
 * to reach its operations, which only libfabric holds otherwise.
 */
#include "../../ofi/monitor.c"

#include "../check.h"

#define PAGE	4096UL
#define A(n)	((void *)(0x10000000UL + (n) * PAGE))
#define U(n)	((uint64_t)(uintptr_t)A(n))

static struct umn_double *dbl;

int __wrap_umn_open(struct umn **u, const struct umn_attr *attr);
int __wrap_umn_open(struct umn **u, const struct umn_attr *attr)
{
	return double_open(u, attr, &dbl);
}

static struct fid_mem_monitor *m = &mon.fid;

static uint64_t stat_of(size_t offset)
{
	struct umn_ofi_stats s;

	umn_ofi_stats(&s);
	return *(uint64_t *)((char *)&s + offset);
}
#define STAT(field)	stat_of(offsetof(struct umn_ofi_stats, field))

static void test_a_range_has_one_watch_shared_by_its_subscribers(void)
{
	CHECK_EQ(m->export_ops->subscribe(m, A(0), PAGE), 0);
	CHECK_EQ(m->export_ops->subscribe(m, A(0), PAGE), 0);
	CHECK_EQ(STAT(watches), 1);
	CHECK_EQ(STAT(reused), 1);
	CHECK(m->export_ops->valid(m, A(0), PAGE));
	/* Another length is another range: never watched, never valid. */
	CHECK(!m->export_ops->valid(m, A(0), 2 * PAGE));
	m->export_ops->unsubscribe(m, A(0), PAGE);
	CHECK(m->export_ops->valid(m, A(0), PAGE));
	m->export_ops->unsubscribe(m, A(0), PAGE);
	CHECK_EQ(STAT(watches), 0);
	CHECK(!m->export_ops->valid(m, A(0), PAGE));
	CHECK_EQ(double_watches(dbl), 0);
}

static void test_valid_follows_the_generation_word(void)
{
	CHECK_EQ(m->export_ops->subscribe(m, A(2), 2 * PAGE), 0);
	CHECK_EQ(m->export_ops->subscribe(m, A(8), PAGE), 0);
	double_invalidate(dbl, U(3), U(4), UMN_CAUSE_UNMAP);
	CHECK(!m->export_ops->valid(m, A(2), 2 * PAGE));
	CHECK(m->export_ops->valid(m, A(8), PAGE));
	/* Subscribed again before it is retired: still invalid. */
	CHECK_EQ(m->export_ops->subscribe(m, A(2), 2 * PAGE), 0);
	CHECK(!m->export_ops->valid(m, A(2), 2 * PAGE));
}

static void test_the_least_recently_valid_watch_is_recycled(void)
{
	uint32_t i, live = (uint32_t)STAT(watches);

	for (i = 0; live + i < mon.max; i++)
		CHECK_EQ(m->export_ops->subscribe(m, A(100 + i), PAGE), 0);
	CHECK_EQ(STAT(watches), mon.max);
	/* Every watch was just referenced: the hand clears, then takes one. */
	CHECK_EQ(m->export_ops->subscribe(m, A(99), PAGE), 0);
	CHECK_EQ(STAT(recycled), 1);
	CHECK_EQ(STAT(watches), mon.max);
	CHECK(m->export_ops->valid(m, A(99), PAGE));
}

static void test_the_thread_notifies_and_retires_what_fired(void)
{
	struct timespec pause = { 0, 1000000 };
	uint64_t notified = STAT(notified), watches;
	int i;

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK(m->export_ops->valid(m, A(8), PAGE));
	watches = STAT(watches);
	double_invalidate(dbl, U(8), U(9), UMN_CAUSE_UNMAP);
	/* The 2010 ABI's reports are pulled by the check, then drained. */
	CHECK(!m->export_ops->valid(m, A(8), PAGE));
	for (i = 0; i < 5000 && STAT(notified) == notified; i++)
		nanosleep(&pause, NULL);
	CHECK(STAT(notified) > notified);
	for (i = 0; i < 5000 && STAT(watches) == watches; i++)
		nanosleep(&pause, NULL);
	CHECK_EQ(STAT(watches), watches - 1);
	CHECK_EQ(m->export_ops->subscribe(m, A(8), PAGE), 0);
	CHECK(m->export_ops->valid(m, A(8), PAGE));
	m->export_ops->stop(m);
	CHECK_EQ(STAT(watches), 0);
	CHECK_EQ(double_watches(dbl), 0);
}

int main(void)
{
	struct fi_info *info = NULL;

	setenv("FI_UMMUNOTIFY_MAX_WATCHES", "16", 1);
	CHECK_EQ(umn_ofi_import(), 0);
	CHECK_EQ(umn_ofi_import(), 0);
	/* libfabric sets up its monitors (notify()'s lists) at fi_ini(). */
	fi_getinfo(FI_VERSION(1, 13), NULL, NULL, 0, NULL, &info);
	fi_freeinfo(info);
	CHECK_EQ(mon.max, 16);
	test_a_range_has_one_watch_shared_by_its_subscribers();
	test_valid_follows_the_generation_word();
	test_the_least_recently_valid_watch_is_recycled();
	test_the_thread_notifies_and_retires_what_fired();
	printf("test-monitor: ok\n");
	return 0;
}
