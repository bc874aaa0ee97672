// SPDX-License-Identifier: GPL-2.0
/*
 * Issue 22, finding 1: no call of the module may sleep uninterruptibly
 * until the other threads of the process stop invalidating.  With each
 * watch an interval notifier, removing one (UNREGISTER, WATCHV's
 * unwatches, RESIZE, close()) waited in mmu_interval_notifier_remove()
 * for a moment when no invalidation of a watched range ran, and a
 * process whose threads keep such invalidations overlapping never gives
 * it one: the call slept in D state, unkillable, until the hung-task
 * detector fired.
 *
 * Each test here has THREADS threads loop madvise(MADV_DONTNEED) over
 * SLICE_MIB slices of a MAP_MIB mapping with a page table every 2 MiB
 * (as after its pages were zapped once), the first slice over the
 * watches, while the test's thread makes the calls for SECONDS.  A
 * real-time watchdog thread reads the calling thread's state: should a
 * call still be running after BOUND seconds with the thread in D state,
 * the test fails, and the watchdog stops the madvise() threads (the only
 * thing that lets such a call end).  The stall needs vCPUs that run at
 * once (UMMUNOTIFY_TCG_THREAD=multi in tools/testing/vm-run) and enough
 * threads preempted inside their invalidations: with one vCPU thread the
 * tests pass on any module.  UMMUNOTIFY_STALL="THREADS BOUND SECONDS"
 * changes the defaults, 200 10 10.
 *
 * The address space's notifier is registered before the threads start,
 * by a file that stays open: registering it waits for mmap_lock, as an
 * mmap() does, which is not what is tested.  So the close test closes
 * the address space's last file once, at its end, and opens none after.
 * The watchdog never waits for mmap_lock either: no stdio, nothing it
 * faults in once the threads run.
 *
 * These tests failed on c59d7ac (a 6.1 guest, UMMUNOTIFY_TCG_THREAD=
 * multi: the first call held in D state past the bound within seconds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "kselftest_harness.h"
#include "native.h"

#define MAP_MIB		1024UL
#define SLICE_MIB	64UL
#define MAX_THREADS	1024
/*
 * The harness's bound on a test, setup included: populating the mapping
 * and starting the threads takes a minute or more on the debug kernel
 * (KASAN, lockdep) in a guest.
 */
#define STALL_TIMEOUT	400

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The state letter in @stat_fd, a /proc/self/task/TID/stat, or '?'.
 * Read with pread(), not stdio: the real-time watchdog must never wait
 * for mmap_lock (malloc() may mmap()), which the threads' madvise()
 * calls hold: on 5.10 a real-time waiter there stalled the guest.
 */
static char task_state(int stat_fd)
{
	char buf[512], *p;
	ssize_t n = pread(stat_fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return '?';
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

FIXTURE(zapped)
{
	char *map;
	size_t map_len, slice_len;
	int threads;
	double bound, seconds;
	pthread_t tids[MAX_THREADS];
	pthread_t dog;
	pthread_barrier_t go;
	/* Threads created: the teardown joins them once all are. */
	int started;
	int keeper;
	char *kept;
	struct umn u;
	atomic_bool stop;
	/* Of the call running: the watchdog reads them. */
	atomic_bool in_call;
	_Atomic double call_start;
	pid_t tid;
	int stat_fd;
	/* What the watchdog saw. */
	atomic_bool stalled;
	double longest_d, stalled_for;
	/* What the calls did. */
	double longest;
	long calls;
	atomic_long zaps;
};

static void *zapper(void *arg)
{
	FIXTURE_DATA(zapped) *self = arg;
	static atomic_long next;
	long i = atomic_fetch_add(&next, 1);
	char *slice = self->map +
		      (size_t)i % (self->map_len / self->slice_len) *
		      self->slice_len;

	/* Created without them running: each creation would wait for CPU. */
	pthread_barrier_wait(&self->go);
	while (!atomic_load(&self->stop)) {
		madvise(slice, self->slice_len, MADV_DONTNEED);
		atomic_fetch_add(&self->zaps, 1);
	}
	return NULL;
}

static void *watchdog(void *arg)
{
	FIXTURE_DATA(zapped) *self = arg;
	double d_since = 0, t;

	/* Its stack and the calls faulted in before the threads run. */
	task_state(self->stat_fd);
	pthread_barrier_wait(&self->go);
	while (!atomic_load(&self->stop)) {
		usleep(10000);
		if (!atomic_load(&self->in_call) ||
		    task_state(self->stat_fd) != 'D') {
			d_since = 0;
			continue;
		}
		t = now();
		if (!d_since)
			d_since = t;
		if (t - d_since > self->longest_d)
			self->longest_d = t - d_since;
		if (t - atomic_load(&self->call_start) > self->bound) {
			self->stalled_for = t - atomic_load(&self->call_start);
			atomic_store(&self->stalled, true);
			/* What lets the call end, on a module that waits. */
			atomic_store(&self->stop, true);
		}
	}
	return NULL;
}

FIXTURE_SETUP(zapped)
{
	const char *env = getenv("UMMUNOTIFY_STALL");
	double start = now();
	char path[64];

	self->threads = 200;
	self->bound = 10;
	self->seconds = 10;
	if (env)
		sscanf(env, "%d %lf %lf", &self->threads, &self->bound,
		       &self->seconds);
	ASSERT_LT(0, self->threads);
	ASSERT_GE(MAX_THREADS, self->threads);
	self->tid = syscall(SYS_gettid);
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)self->tid);
	self->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, self->stat_fd);
	/* The watchdog can see: a test that sees nothing passes. */
	ASSERT_EQ('R', task_state(self->stat_fd));
	self->map_len = MAP_MIB << 20;
	self->slice_len = SLICE_MIB << 20;
	/*
	 * A page table every 2 MiB, each with one page: every madvise()
	 * walks 512 entries a table under its invalidation, as it does once
	 * the pages of a populated mapping are gone, and the mapping costs
	 * no memory to speak of.
	 */
	self->map = mmap(NULL, self->map_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, self->map);
	ASSERT_EQ(0, madvise(self->map, self->map_len, MADV_NOHUGEPAGE));
	for (size_t off = 0; off < self->map_len; off += 2UL << 20)
		self->map[off] = 1;
	/*
	 * The address space's notifier, registered before the threads run
	 * and kept by a file open throughout: registering it waits for
	 * mmap_lock for writing (killable), once in the life of the
	 * process's files, as an mmap() does.  What is tested here is every
	 * call after it.
	 */
	self->kept = mmap(NULL, ps, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->kept);
	self->keeper = open_dev(_metadata, O_RDONLY);
	ASSERT_EQ(0, register_region(self->keeper, self->kept, ps, 1));
	self->u.fd = -1;
	TH_LOG("set up in %.1f s", now() - start);
}

/*
 * Start the madvise() threads and the watchdog.  A test maps what it
 * needs first: on 5.10 an mmap() made while the threads run waited for
 * mmap_lock for minutes, their madvise() calls taking it ahead of it,
 * with the interval-notifier module as with this one.
 */
static void start_zapping(struct __test_metadata *_metadata,
			  FIXTURE_DATA(zapped) *self)
{
	struct sched_param fifo = { .sched_priority = 1 };
	pthread_attr_t attr;
	double start = now();
	int i;

	/* The threads, the watchdog and this one. */
	ASSERT_EQ(0, pthread_barrier_init(&self->go, NULL, self->threads + 2));
	/* Real-time, so that the busy threads cannot keep it from looking. */
	ASSERT_EQ(0, pthread_attr_init(&attr));
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	pthread_attr_setschedparam(&attr, &fifo);
	ASSERT_EQ(0, pthread_create(&self->dog, &attr, watchdog, self));
	pthread_attr_destroy(&attr);
	for (i = 0; i < self->threads; i++) {
		ASSERT_EQ(0, pthread_create(&self->tids[i], NULL, zapper,
					    self));
		self->started++;
	}
	pthread_barrier_wait(&self->go);
	/* Every thread in its loop. */
	sleep(1);
	/* Minutes on a debug kernel under TCG: see the tests' timeout. */
	TH_LOG("%d threads zapping, after %.1f s", self->threads,
	       now() - start);
}

FIXTURE_TEARDOWN(zapped)
{
	int i;

	atomic_store(&self->stop, true);
	/*
	 * After a failed start the threads made wait at the barrier for
	 * good: the test's process ends with them.
	 */
	if (self->started == self->threads) {
		for (i = 0; i < self->threads; i++)
			pthread_join(self->tids[i], NULL);
		pthread_join(self->dog, NULL);
	}
	if (self->u.fd >= 0)
		close(self->u.fd);
	if (self->keeper >= 0)
		close(self->keeper);
	close(self->stat_fd);
	munmap(self->kept, ps);
	munmap(self->map, self->map_len);
}

/* Whether the test's time is up, or the watchdog stopped it. */
static bool zapping(FIXTURE_DATA(zapped) *self, double start)
{
	return !atomic_load(&self->stop) && now() - start < self->seconds;
}

/* Make a call the watchdog watches: its result. */
#define WATCHED(self, call) ({					\
	double _start = now();					\
	__typeof__(call) _ret;					\
								\
	atomic_store(&(self)->call_start, _start);		\
	atomic_store(&(self)->in_call, true);			\
	_ret = (call);						\
	atomic_store(&(self)->in_call, false);			\
	if (now() - _start > (self)->longest)			\
		(self)->longest = now() - _start;		\
	(self)->calls++;					\
	_ret;							\
})

/* The verdict: every call returned within the bound. */
static void verdict(struct __test_metadata *_metadata,
		    FIXTURE_DATA(zapped) *self)
{
	TH_LOG("%d threads, %ld calls, the longest %.3f s, the longest time in D state in one call %.3f s, %ld madvise() calls",
	       self->threads, self->calls, self->longest, self->longest_d,
	       atomic_load(&self->zaps));
	EXPECT_FALSE(atomic_load(&self->stalled))
		TH_LOG("a call was still in D state after %.1f s (the bound %.0f s)",
		       self->stalled_for, self->bound);
	/* The madvise() threads did run meanwhile. */
	EXPECT_LT(self->threads, atomic_load(&self->zaps));
}

/* The 2010 ABI: UNREGISTER and REGISTER, again and again. */
TEST_F_TIMEOUT(zapped, unregister_never_waits_for_other_threads_invalidations,
	       STALL_TIMEOUT)
{
	int fd = open_dev(_metadata, O_RDONLY);
	double start;
	int ret = 0;

	start_zapping(_metadata, self);
	start = now();
	ret = WATCHED(self, register_region(fd, self->map, ps, 1));
	while (!ret && zapping(self, start)) {
		ret = WATCHED(self, unwatch(fd, 1));
		if (!ret)
			ret = WATCHED(self, register_region(fd, self->map, ps,
							    1));
	}
	EXPECT_EQ(0, ret);
	verdict(_metadata, self);
	close(fd);
}

/* The native ABI: WATCHV's unwatch and watch, and RESIZE. */
TEST_F_TIMEOUT(zapped, unwatch_and_resize_never_wait_for_other_threads,
	       STALL_TIMEOUT)
{
	struct ummunotify_watch w = watch_arg(self->map, ps, 1, 0);
	struct ummunotify_watchv v = {
		.unwatch = (uintptr_t)&w.user_cookie,
		.nr_unwatch = 1,
		.watch = (uintptr_t)&w,
		.nr_watch = 1,
	};
	struct umn *u = &self->u;
	double start;
	int ret = 0;

	umn_init(_metadata, u, WATCH_RING, 0, 0);
	start_zapping(_metadata, self);
	start = now();
	ret = WATCHED(self, uioctl(u->fd, UMMUNOTIFY_WATCH, &w));
	while (!ret && zapping(self, start)) {
		w = watch_arg(self->map, ps, 1, 0);
		v.done = 0;
		ret = WATCHED(self, uioctl(u->fd, UMMUNOTIFY_WATCHV, &v));
		if (!ret)
			ret = WATCHED(self, resize(u->fd, &w, self->map, 2 * ps,
						   1, 0));
		if (!ret)
			ret = WATCHED(self, resize(u->fd, &w, self->map, ps, 1,
						   0));
	}
	EXPECT_EQ(0, ret);
	verdict(_metadata, self);
}

/*
 * The owner's close() tears down there and then; the address space's
 * last file, closed last, lets go of its notifier too.
 */
TEST_F_TIMEOUT(zapped, close_never_waits_for_other_threads_invalidations,
	       STALL_TIMEOUT)
{
	double start;
	int fd, ret = 0;

	start_zapping(_metadata, self);
	start = now();
	while (!ret && zapping(self, start)) {
		fd = open_dev(_metadata, O_RDONLY);
		ret = WATCHED(self, register_region(fd, self->map, ps, 1));
		WATCHED(self, close(fd));
	}
	EXPECT_EQ(0, ret);
	/* The address space's last file. */
	EXPECT_EQ(0, WATCHED(self, close(self->keeper)));
	self->keeper = -1;
	verdict(_metadata, self);
}

TEST_HARNESS_MAIN
