// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The monitor driven as libfabric's MR cache drives it, imported into the
 * real libfabric, whose notify() is recorded on the way: on the host over
 * the test double (test-monitor), in a guest over the real module
 * (ofi-monitor), see backend.h.  "Cache A" and "cache B" are two caches
 * (domains) subscribing the same range; a subscribe() that fails is
 * followed by an unsubscribe(), as libfabric 2.1 does.  Each test starts
 * and ends with no watch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "ofi.h"
#include "backend.h"
#include "../check.h"

#define MAX_WATCHES	512
/* test-monitor grow: three handles, the third smaller. */
#define GROW_MAX	20480

static struct fid_mem_monitor *m;
static struct fi_ops_mem_notify *libfabric_notify;
static struct fi_ops_mem_notify recorder;
static struct fi_ops *libfabric_fid_ops;
static struct fi_ops closer;

/* What notify() was given, and how many watches there were then. */
static struct {
	uint64_t start;
	uint64_t end;
	uint64_t watches;
} notified[4 * NR_PAGES];
static unsigned int nr_notified;
static pthread_mutex_t notified_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The lock a cache's notify() holds (libfabric's mm_lock), as the
 * recorder's: hold_notify keeps it a while, after setting in_notify.
 */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static bool hold_notify, in_notify;

/*
 * libfabric's mm_list_rwlock, which its notify() takes for reading and a
 * domain open for writing, and its mm_state_lock, held around start() and
 * stop() and, from libfabric 1.21 on, taken by the import's close, as the
 * recorder, the closer and the test take them (libfabric's own are not
 * exported): with gate_notify, notify() waits until a writer holds the
 * rwlock, then takes it.  An error-checking mutex: a close from inside
 * stop() fails its CHECK where libfabric 1.21 hangs.
 */
static pthread_rwlock_t list_rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t state_lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static bool gate_notify, writer_in;

/* The errno value the thread's next umn_read_events() fails with. */
static int read_error;

/* The error the next pthread_create() fails with. */
static int create_error;

int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg)
{
	int err = __atomic_exchange_n(&create_error, 0, __ATOMIC_RELAXED);

	return err ? err : __real_pthread_create(t, attr, fn, arg);
}

int __real_umn_read_events(struct umn *u, struct umn_event *events, size_t n);
int __wrap_umn_read_events(struct umn *u, struct umn_event *events, size_t n);
int __wrap_umn_read_events(struct umn *u, struct umn_event *events, size_t n)
{
	int err = __atomic_exchange_n(&read_error, 0, __ATOMIC_RELAXED);

	return err ? -err : __real_umn_read_events(u, events, n);
}

static struct umn_ofi_stats stats(void)
{
	struct umn_ofi_stats s;

	umn_ofi_stats(&s, sizeof(s));
	return s;
}

static void record_notify(struct fid_mem_monitor *monitor, const void *addr,
			  size_t len)
{
	struct timespec pause = { 0, 300000000 };

	if (__atomic_load_n(&gate_notify, __ATOMIC_RELAXED)) {
		__atomic_store_n(&in_notify, true, __ATOMIC_RELAXED);
		while (!__atomic_load_n(&writer_in, __ATOMIC_RELAXED))
			nanosleep(&pause, NULL);
		pthread_rwlock_rdlock(&list_rwlock);
		pthread_rwlock_unlock(&list_rwlock);
	}
	pthread_mutex_lock(&cache_lock);
	if (__atomic_load_n(&hold_notify, __ATOMIC_RELAXED)) {
		__atomic_store_n(&in_notify, true, __ATOMIC_RELAXED);
		nanosleep(&pause, NULL);
	}
	pthread_mutex_lock(&notified_lock);
	CHECK(nr_notified < 4 * NR_PAGES);
	notified[nr_notified].start = (uintptr_t)addr;
	notified[nr_notified].end = (uintptr_t)addr + len;
	notified[nr_notified].watches = stats().watches;
	nr_notified++;
	pthread_mutex_unlock(&notified_lock);
	libfabric_notify->notify(monitor, addr, len);
	pthread_mutex_unlock(&cache_lock);
}

/* The import's close as libfabric 1.21 and later make it. */
static int close_as_libfabric_1_21(struct fid *fid)
{
	CHECK_EQ(pthread_mutex_lock(&state_lock), 0);
	pthread_mutex_unlock(&state_lock);
	return libfabric_fid_ops->close(fid);
}

/* After each import: the recorder and the closer in libfabric's way. */
static void interpose(void)
{
	m->import_ops = &recorder;
	libfabric_fid_ops = m->fid.ops;
	closer = *libfabric_fid_ops;
	closer.close = close_as_libfabric_1_21;
	m->fid.ops = &closer;
}

static unsigned int notified_count(void)
{
	unsigned int n;

	pthread_mutex_lock(&notified_lock);
	n = nr_notified;
	pthread_mutex_unlock(&notified_lock);
	return n;
}

/* Pages [n, n + pages) as the cache names a range. */
static int sub(unsigned int n, unsigned int pages)
{
	return m->export_ops->subscribe(m, page(n), pages * PAGE);
}

static void unsub(unsigned int n, unsigned int pages)
{
	m->export_ops->unsubscribe(m, page(n), pages * PAGE);
}

static bool valid(unsigned int n, unsigned int pages)
{
	return m->export_ops->valid(m, page(n), pages * PAGE);
}

#define WAIT_FOR(cond) do {						\
	struct timespec _pause = { 0, 1000000 };			\
	int _i;								\
									\
	for (_i = 0; _i < 20000 && !(cond); _i++)			\
		nanosleep(&_pause, NULL);				\
	CHECK(cond);							\
} while (0)

/*
 * Once a pressure request is counted: the monitor's lock, taken by an
 * unsubscribe() of a range nobody subscribed, orders what it did to the
 * watches before what this thread does next.
 */
static void pressure_done(uint64_t count)
{
	WAIT_FOR(stats().pressure > count);
	unsub(99, 1);
}

/* Was page n passed to notify() since notified[first]? */
static bool notified_since(unsigned int first, unsigned int n)
{
	bool covered = false;
	unsigned int r;

	pthread_mutex_lock(&notified_lock);
	for (r = first; r < nr_notified; r++)
		covered |= notified[r].start <= (uintptr_t)page(n) &&
			   notified[r].end >= (uintptr_t)page(n + 1);
	pthread_mutex_unlock(&notified_lock);
	return covered;
}

/* The last cache is gone: libfabric stops the monitor under its lock. */
static void stop_as_libfabric(void)
{
	CHECK_EQ(pthread_mutex_lock(&state_lock), 0);
	m->export_ops->stop(m);
	pthread_mutex_unlock(&state_lock);
}

static void stop(void)
{
	stop_as_libfabric();
	CHECK_EQ(stats().watches, 0);
	CHECK_EQ(device_watches(), 0);
}

static void test_a_range_has_one_watch_shared_by_its_subscribers(void)
{
	uint64_t reused = stats().reused;

	CHECK_EQ(sub(0, 1), 0);
	CHECK_EQ(sub(0, 1), 0);
	CHECK_EQ(stats().watches, 1);
	CHECK_EQ(device_watches(), 1);
	CHECK_EQ(stats().reused, reused + 1);
	CHECK(valid(0, 1));
	/* Another length is another range: never watched, never valid. */
	CHECK(!valid(0, 2));
	unsub(0, 1);
	CHECK(valid(0, 1));
	unsub(0, 1);
	CHECK_EQ(stats().watches, 0);
	CHECK_EQ(device_watches(), 0);
	CHECK(!valid(0, 1));
}

/*
 * Until the thread has notified the range, no cache may rely on it.  The
 * untouched range lies megabytes away: the kernel may invalidate the whole
 * 2 MiB block around the ends of a munmap() (splitting the VMA runs
 * __split_huge_pmd(), which notifies the block whether or not a huge page
 * is there), so a neighbour a few pages away may read invalid too.
 */
static void test_a_changed_range_refuses_subscribers(void)
{
	const unsigned int far = NR_PAGES - 1;

	CHECK_EQ(sub(2, 2), 0);
	CHECK_EQ(sub(far, 1), 0);
	change(3, 1);
	CHECK(!valid(2, 2));
	CHECK(valid(far, 1));
	CHECK_EQ(sub(2, 2), -EAGAIN);
	unsub(2, 2);
	CHECK(!valid(2, 2));
	/* Cache A's own unsubscribe leaves the watch to the thread. */
	unsub(2, 2);
	CHECK_EQ(stats().watches, 2);
	CHECK(!valid(2, 2));
	stop();
}

static void test_the_thread_notifies_a_change_before_the_watch_goes(void)
{
	unsigned int before = notified_count();

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(8, 1), 0);
	CHECK_EQ(sub(8, 1), 0);
	CHECK(valid(8, 1));
	change(8, 1);
	WAIT_FOR(stats().watches == 0);
	CHECK_EQ(notified_count(), before + 1);
	CHECK(notified[before].start <= (uintptr_t)page(8));
	CHECK(notified[before].end >= (uintptr_t)page(9));
	CHECK_EQ(notified[before].watches, 1);
	CHECK_EQ(sub(8, 1), 0);
	CHECK(valid(8, 1));
	stop();
}

/*
 * The review's two caches: cache A's entries outnumber the watches, so
 * some watches are recycled while A relies on them; every range is then
 * replaced and cache B subscribes it.  No entry of A may read valid, and
 * each recycled range is notified before its watch goes.
 */
static void test_recycling_never_validates_a_replaced_range(void)
{
	enum { N = MAX_WATCHES + 64 };
	static bool cached[N];
	uint64_t recycled = stats().recycled, watches;
	unsigned int i, r, first = notified_count();
	bool covered;

	for (i = 0; i < N; i++)
		cached[i] = !sub(2 * i, 1);
	CHECK(stats().recycled > recycled);
	change(0, 2 * N);
	for (i = 0; i < N; i++) {
		CHECK(sub(2 * i, 1) < 0);
		unsub(2 * i, 1);
	}
	for (i = 0; i < N; i++)
		CHECK(!cached[i] || !valid(2 * i, 1));

	watches = stats().watches;
	CHECK_EQ(m->export_ops->start(m), 0);
	WAIT_FOR(stats().watches == 0);
	for (i = 0; i < N; i++) {
		if (!cached[i])
			continue;
		covered = false;
		for (r = first; r < notified_count(); r++)
			covered |= notified[r].start <= (uintptr_t)page(2 * i) &&
				   notified[r].end >= (uintptr_t)page(2 * i + 1) &&
				   notified[r].watches == watches;
		CHECK(covered);
	}
	CHECK_EQ(sub(0, 1), 0);
	CHECK(valid(0, 1));
	stop();
}

/*
 * More events than one read takes (256): every watch is still retired and
 * notified, without an overflow.  At least one event per watch, not
 * exactly one: the munmap() may also notify the 2 MiB blocks at its ends
 * (see test_a_changed_range_refuses_subscribers).
 */
static void test_a_burst_larger_than_a_read_is_no_overflow(void)
{
	enum { N = 300 };
	struct umn_ofi_stats before = stats(), after;
	unsigned int i, r, first = notified_count();
	bool covered;

	CHECK_EQ(m->export_ops->start(m), 0);
	for (i = 0; i < N; i++)
		CHECK_EQ(sub(2 * i, 1), 0);
	change(0, 2 * N);
	WAIT_FOR(stats().watches == 0);
	after = stats();
	CHECK_EQ(after.overflows, before.overflows);
	CHECK(after.events >= before.events + N);
	for (i = 0; i < N; i++) {
		covered = false;
		for (r = first; r < notified_count(); r++)
			covered |= notified[r].start <= (uintptr_t)page(2 * i) &&
				   notified[r].end >= (uintptr_t)page(2 * i + 1);
		CHECK(covered);
	}
	stop();
}

/*
 * More events than the ring holds (4096) while the thread is not reading:
 * the kernel drops the last, and says so.  The thread must then recheck
 * every watch: the one whose only event was lost is retired too, and the
 * unchanged one kept.  The three lie megabytes apart (see
 * test_a_changed_range_refuses_subscribers).  The 2010 ABI merges a
 * watch's reports instead and loses none.
 */
static void test_lost_events_recheck_every_watch(void)
{
	enum { CHANGES = 5000, LOST = NR_PAGES / 2, KEPT = NR_PAGES - 1 };
	struct umn_ofi_stats before = stats();
	unsigned int i, r, first = notified_count();
	bool covered = false;

	CHECK_EQ(sub(0, 1), 0);
	CHECK_EQ(sub(LOST, 1), 0);
	CHECK_EQ(sub(KEPT, 1), 0);
	for (i = 0; i < CHANGES; i++)
		change(0, 1);
	change(LOST, 1);
	CHECK_EQ(m->export_ops->start(m), 0);
	WAIT_FOR(stats().watches == 1);
	if (before.abi & UMN_FEATURE_RING)
		CHECK(stats().overflows > before.overflows);
	else
		CHECK_EQ(stats().overflows, before.overflows);
	for (r = first; r < notified_count(); r++)
		covered |= notified[r].start <= (uintptr_t)page(LOST) &&
			   notified[r].end >= (uintptr_t)page(LOST + 1);
	CHECK(covered);
	CHECK(valid(KEPT, 1));
	stop();
}

#ifndef __SANITIZE_THREAD__
/*
 * Until the thread the last start() made is past joining the stopped one,
 * and that one is gone: a fork() meanwhile can copy a lock of ASan's
 * allocator that either holds, and the child's thread hangs on it (seen
 * once in twenty runs).  A range of page n notified shows it.
 */
static void settle(unsigned int n)
{
	unsigned int first = notified_count();
	uint64_t watches = stats().watches;

	CHECK_EQ(sub(n, 1), 0);
	change(n, 1);
	WAIT_FOR(notified_since(first, n) && stats().watches == watches);
}

/*
 * The child's stop() must not stop the parent's thread, nor wait for a
 * thread it does not have; the parent's ranges read invalid in the child
 * and can be cached there again once notified.
 */
static void test_a_forked_child_starts_afresh(void)
{
	unsigned int before;
	int status;
	pid_t pid;

	CHECK_EQ(m->export_ops->start(m), 0);
	settle(90);
	CHECK_EQ(sub(16, 1), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(60);
		CHECK(!valid(16, 1));
		CHECK_EQ(sub(16, 1), -EAGAIN);
		WAIT_FOR(!sub(16, 1));
		CHECK(valid(16, 1));
		change(16, 1);
		WAIT_FOR(!valid(16, 1));
		stop_as_libfabric();
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(valid(16, 1));
	before = notified_count();
	change(16, 1);
	WAIT_FOR(notified_count() > before);
	stop();
}

/*
 * A forked child whose thread cannot start (no descriptor for its
 * eventfd) refuses a parent's range, which libfabric 2.1 then
 * unsubscribes: the parent's watch must stay, retired, so that no new
 * watch of the range validates the parent's entry that another cache
 * holds before notify() dropped it.  Before, that unsubscribe freed it.
 */
static void test_a_child_without_a_thread_keeps_the_parents_watch(void)
{
	int status;
	pid_t pid;

	CHECK_EQ(m->export_ops->start(m), 0);
	settle(90);
	CHECK_EQ(sub(18, 1), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		unsigned int first = notified_count();
		uint64_t watches = stats().watches;
		struct rlimit old, none;

		alarm(60);
		CHECK(!getrlimit(RLIMIT_NOFILE, &old));
		none = old;
		none.rlim_cur = 0;
		CHECK(!setrlimit(RLIMIT_NOFILE, &none));
		CHECK_EQ(sub(18, 1), -EIO);
		unsub(18, 1);
		CHECK(!setrlimit(RLIMIT_NOFILE, &old));
		CHECK_EQ(stats().watches, watches);
		CHECK(!valid(18, 1));
		WAIT_FOR(!sub(18, 1));
		CHECK(notified_since(first, 18));
		CHECK(valid(18, 1));
		stop_as_libfabric();
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	stop();
}
#endif

/*
 * A thread that stops on an error (its read of events fails here) fails
 * the monitor: every watched range is notified and its watch freed, and
 * until the last cache stops no hit is valid, not even of an unchanged
 * range, and no range is subscribed.  Then start() starts afresh.
 */
static void test_a_failed_thread_drops_every_entry(void)
{
	const unsigned int far = NR_PAGES - 2;
	uint64_t failures = stats().failures;
	unsigned int first = notified_count();

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(40, 1), 0);
	CHECK_EQ(sub(far, 1), 0);
	CHECK_EQ(sub(60, 1), 0);
	__atomic_store_n(&read_error, EIO, __ATOMIC_RELAXED);
	change(60, 1);
	WAIT_FOR(stats().failures > failures && stats().watches == 0);
	CHECK(notified_since(first, 40));
	CHECK(notified_since(first, far));
	CHECK_EQ(device_watches(), 0);
	CHECK(!valid(far, 1));
	CHECK(sub(41, 1) < 0);
	CHECK_EQ(stats().watches, 0);
	stop();
	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(41, 1), 0);
	CHECK(valid(41, 1));
	stop();
}

/*
 * New watches on pages n, n + 2 and n + 4, and a pressure request of
 * bytes, which moves the hand past them and retires none.  False where
 * the backend cannot ask (the device): the request's count before it
 * in *before otherwise.
 */
static bool new_watches_passed_by_the_hand(unsigned int n, uint64_t bytes,
					   uint64_t *before)
{
	uint64_t recycled = stats().recycled;

	*before = stats().pressure;
	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(n, 1), 0);
	CHECK_EQ(sub(n + 2, 1), 0);
	CHECK_EQ(sub(n + 4, 1), 0);
	if (!pressure(bytes))
		return false;
	pressure_done(*before);
	CHECK_EQ(stats().recycled, recycled);
	return true;
}

/*
 * The kernel asks for memory back: the watches not found valid since the
 * clock's hand last passed are retired, and their ranges notified
 * (libfabric deregisters what relied on them), until they add up to what
 * was asked.  New watches count as found valid: the first request only
 * moves the hand past them.  Before, the monitor dropped the request.
 * Not on the device: see backend.h.
 */
static void test_pressure_gives_back_the_coldest_ranges(void)
{
	unsigned int first = notified_count();
	uint64_t before;

	if (new_watches_passed_by_the_hand(70, 2 * PAGE, &before)) {
		CHECK(pressure(2 * PAGE));
		WAIT_FOR(stats().pressure > before + 1 &&
			 stats().watches == 1);
		CHECK_EQ(notified_since(first, 70) + notified_since(first, 72) +
			 notified_since(first, 74), 2);
	}
	stop();
}

/*
 * Asked for all it can, the monitor gives back what was not found valid
 * since the hand last passed, and keeps what is in use: giving that back
 * would only have it registered, and pinned, again.  The next request
 * finds it cold unless it was used meanwhile.
 */
static void test_pressure_keeps_the_ranges_in_use(void)
{
	unsigned int first = notified_count();
	uint64_t before, recycled;

	if (new_watches_passed_by_the_hand(80, 0, &before)) {
		before++;
		/* A hit: found valid. */
		CHECK(valid(82, 1));
		CHECK(pressure(0));
		WAIT_FOR(stats().pressure > before && stats().watches == 1);
		CHECK_EQ(notified_since(first, 80), 1);
		CHECK_EQ(notified_since(first, 82), 0);
		CHECK_EQ(notified_since(first, 84), 1);
		CHECK(valid(82, 1));
		/* Found valid since: it stays again. */
		recycled = stats().recycled;
		CHECK(pressure(0));
		pressure_done(before + 1);
		CHECK_EQ(stats().recycled, recycled);
		/* Cold now. */
		CHECK(pressure(0));
		WAIT_FOR(stats().pressure > before + 2 && stats().watches == 0);
		CHECK_EQ(notified_since(first, 82), 1);
	}
	stop();
}

/* The thread cannot be created: start() fails. */
static void test_a_thread_that_cannot_start_fails_start(void)
{
	__atomic_store_n(&create_error, EAGAIN, __ATOMIC_RELAXED);
	CHECK_EQ(m->export_ops->start(m), -EAGAIN);
	CHECK(!stats().started);
	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK(stats().started);
	stop();
}

#ifndef __SANITIZE_THREAD__
static bool racing;

/*
 * At most NR_PAGES changes, a quarter of what notified[] records: forks
 * slowed by a loaded machine once let it fill the record (about 800
 * entries before this test, 1 to 2100 during it on an idle one).
 */
static void *change_in_a_loop(void *arg)
{
	unsigned int i = 0;

	(void)arg;
	while (__atomic_load_n(&racing, __ATOMIC_RELAXED) && i < NR_PAGES) {
		sub(64 + i % 8, 1);
		change(64 + i % 8, 1);
		unsub(64 + i % 8, 1);
		i++;
	}
	return NULL;
}

/* The child's first use of the cache and of the monitor returns. */
static void fork_and_use(unsigned int n)
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		pthread_mutex_lock(&cache_lock);
		pthread_mutex_unlock(&cache_lock);
		libfabric_notify->notify(m, page(n), PAGE);
		WAIT_FOR(!sub(n, 1));
		CHECK(valid(n, 1));
		stop_as_libfabric();
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * fork() while the thread is in notify(), holding the cache's lock (and
 * so libfabric's mm_lock): before, the child inherited it held, and its
 * first cache use hung.  Then forks while the thread drains events and
 * notifies, under the library's lock and ours.
 */
static void test_fork_during_notify(void)
{
	pthread_t t;
	int i;

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(48, 1), 0);
	__atomic_store_n(&hold_notify, true, __ATOMIC_RELAXED);
	change(48, 1);
	WAIT_FOR(__atomic_load_n(&in_notify, __ATOMIC_RELAXED));
	fork_and_use(50);
	__atomic_store_n(&hold_notify, false, __ATOMIC_RELAXED);
	__atomic_store_n(&in_notify, false, __ATOMIC_RELAXED);

	__atomic_store_n(&racing, true, __ATOMIC_RELAXED);
	CHECK(!pthread_create(&t, NULL, change_in_a_loop, NULL));
	for (i = 0; i < 20; i++)
		fork_and_use(52);
	__atomic_store_n(&racing, false, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	WAIT_FOR(stats().watches == 0);
	stop();
}
#endif

/* libfabric's ofi_monitors_add_cache(), from a domain open. */
static void *open_domain(void *arg)
{
	(void)arg;
	pthread_rwlock_wrlock(&list_rwlock);
	__atomic_store_n(&writer_in, true, __ATOMIC_RELAXED);
	pthread_mutex_lock(&state_lock);
	pthread_mutex_unlock(&state_lock);
	pthread_rwlock_unlock(&list_rwlock);
	return NULL;
}

static void stop_waited(int sig)
{
	static const char msg[] = "test-monitor: stop() or start() waited for the stopped thread, which waits for a domain open that waits for their caller\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

/*
 * The last domain closes (stop() under mm_state_lock) while the thread
 * is entering notify() and another thread opens a domain, holding
 * mm_list_rwlock for writing and waiting for mm_state_lock: stop() must
 * return, and so must a domain open's start() under the same hold.
 * Before, stop() joined the thread, then start() did, and the three
 * waited for each other.  The new thread joins the stopped one.
 */
static void test_stop_while_a_domain_opens(void)
{
	unsigned int before = notified_count();
	pthread_t t;

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(56, 1), 0);
	__atomic_store_n(&gate_notify, true, __ATOMIC_RELAXED);
	change(56, 1);
	WAIT_FOR(__atomic_load_n(&in_notify, __ATOMIC_RELAXED));
	pthread_mutex_lock(&state_lock);
	CHECK(!pthread_create(&t, NULL, open_domain, NULL));
	WAIT_FOR(__atomic_load_n(&writer_in, __ATOMIC_RELAXED));
	signal(SIGALRM, stop_waited);
	alarm(10);
	m->export_ops->stop(m);
	CHECK_EQ(m->export_ops->start(m), 0);
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	pthread_mutex_unlock(&state_lock);
	pthread_join(t, NULL);
	WAIT_FOR(notified_count() == before + 1);
	__atomic_store_n(&gate_notify, false, __ATOMIC_RELAXED);
	__atomic_store_n(&writer_in, false, __ATOMIC_RELAXED);
	__atomic_store_n(&in_notify, false, __ATOMIC_RELAXED);

	CHECK_EQ(sub(56, 1), 0);
	CHECK(valid(56, 1));
	change(56, 1);
	WAIT_FOR(notified_count() == before + 2);
	CHECK(!valid(56, 1));
	stop();
}

/* A monitor libfabric refuses (its ops too small) unless one is imported. */
static int import_another(void)
{
	static struct fi_ops_mem_monitor ops = { .size = 1 };
	static struct fid_mem_monitor other = {
		.fid.fclass = FI_CLASS_MEM_MONITOR,
		.export_ops = &ops,
	};

	return fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0,
			 &other.fid, NULL);
}

/*
 * Our destructor runs while a cache still uses the monitor (a plugin's
 * domain, which the plugin's destructor closes after ours, before
 * libfabric's fi_fini()): libfabric keeps calling it, so it stays
 * imported and working.  The cache's stop() must not close it: libfabric
 * 1.21 holds mm_state_lock there, which the close takes (before, the
 * closer's lock failed here, and libfabric 2.1 hung).  fi_fini() does.
 */
static void test_a_used_monitor_is_closed_by_fi_fini(void)
{
	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(56, 1), 0);
	umn_ofi__close();
	CHECK(stats().imported);
	CHECK_EQ(import_another(), -FI_EBUSY);
	CHECK(valid(56, 1));
	change(56, 1);
	WAIT_FOR(stats().watches == 0);
	stop();
	CHECK(stats().imported);
	umn_ofi__fini();
	CHECK(!stats().imported);
	CHECK_EQ(import_another(), -FI_EINVAL);
	CHECK_EQ(umn_ofi_import(), 0);
	interpose();
}

#ifndef __SANITIZE_THREAD__
/*
 * fi_fini() while a cache uses the monitor (its domain closes later, from
 * an atexit() handler or a thread): libfabric's locks, notify()'s among
 * them, are destroyed, and a close of the import would take one.  The
 * monitor stays imported, notifies nothing, refuses every hit and
 * subscription, and never starts again.  Sticky, so in a child.
 */
static void test_a_monitor_used_after_fi_fini_fails_safe(void)
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		unsigned int before = notified_count();
		uint64_t failures = stats().failures;
		uint64_t overflows = stats().overflows;
		uint64_t events;

		alarm(60);
		CHECK_EQ(m->export_ops->start(m), 0);
		CHECK_EQ(sub(62, 1), 0);
		/*
		 * The thread's first read reports what the child's reopen
		 * lost, and it rechecks every watch, under the lock that
		 * umn_ofi__fini() takes next.  A change before that recheck
		 * would retire the watch there, its event dropped with it,
		 * uncounted: the change below comes after, as an event.
		 */
		WAIT_FOR(stats().overflows > overflows);
		events = stats().events;
		umn_ofi__fini();
		CHECK(stats().imported);
		CHECK(!valid(62, 1));
		CHECK(sub(63, 1) < 0);
		change(62, 1);
		/*
		 * Read and retired, not notified, by a thread that did not
		 * fail (a failed one frees the watches too, silently: the
		 * parent said so already).  The 2010 ABI's report waits for
		 * a pull valid() no longer makes.
		 */
		if (stats().abi)
			WAIT_FOR(stats().events > events &&
				 stats().watches == 0);
		CHECK_EQ(stats().failures, failures);
		CHECK_EQ(notified_count(), before);
		stop();
		CHECK(stats().imported);
		CHECK(m->export_ops->start(m) < 0);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

static bool teardown_after_destructors;

/*
 * Runs after every destructor of default priority, provider.c's among
 * them, and before libfabric's fi_fini(): as a plugin's destructor would
 * close its last domain.  fi_fini()'s cleanup then closes the import.
 */
__attribute__((destructor(101))) static void close_last_domain(void)
{
	if (!teardown_after_destructors)
		return;
	if (!stats().imported || !stats().started || !valid(60, 1)) {
		fprintf(stderr, "test-monitor: after the destructors: imported %d, started %d\n",
			stats().imported, stats().started);
		_exit(1);
	}
	stop();
	if (!stats().imported) {
		fprintf(stderr, "test-monitor: the last stop() closed the import\n");
		_exit(1);
	}
	umn_ofi__fini();
	if (stats().imported) {
		fprintf(stderr, "test-monitor: fi_fini() did not close the import\n");
		_exit(1);
	}
	printf("test-monitor: the last domain closed after the destructors: ok\n");
}

static void test_stats_fill_what_the_caller_knows(void)
{
	struct umn_ofi_stats s;

	memset(&s, 0xa5, sizeof(s));
	umn_ofi_stats(&s, offsetof(struct umn_ofi_stats, reused));
	CHECK(s.imported);
	CHECK_EQ(s.reused, 0xa5a5a5a5a5a5a5a5ULL);
}

static bool checking;

static void *check_in_a_loop(void *arg)
{
	unsigned int i = 0;

	(void)arg;
	while (__atomic_load_n(&checking, __ATOMIC_RELAXED))
		valid(i++ % 64, 1);
	return NULL;
}

/* For TSan: valid() against subscribe, unsubscribe and the thread. */
static void test_lookups_race_with_changes(void)
{
	pthread_t t[2];
	unsigned int i, n;

	CHECK_EQ(m->export_ops->start(m), 0);
	__atomic_store_n(&checking, true, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, check_in_a_loop, NULL));
	for (i = 0; i < 3000; i++) {
		n = (unsigned int)rnd_below(64);
		switch (rnd_below(3)) {
		case 0:
			sub(n, 1);
			break;
		case 1:
			unsub(n, 1);
			break;
		default:
			change(n, 1);
		}
	}
	__atomic_store_n(&checking, false, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	stop();
}

/* Range n of many: pages [n % 4088, + 1 + n / 4088), distinct to 20439. */
static int sub_nth(unsigned int n)
{
	return sub(n % 4088, 1 + n / 4088);
}

static bool valid_nth(unsigned int n)
{
	return valid(n % 4088, 1 + n / 4088);
}

static bool hitting;
static unsigned int hits_refused, hit_base, hit_rounds;
static pthread_t hitter;

/* Cache hits on 64 ranges from hit_base on, from another thread. */
static void *hit_while_growing(void *arg)
{
	unsigned int i;

	(void)arg;
	while (__atomic_load_n(&hitting, __ATOMIC_ACQUIRE)) {
		for (i = hit_base; i < hit_base + 64; i++)
			if (!valid_nth(i))
				__atomic_fetch_add(&hits_refused, 1,
						   __ATOMIC_RELAXED);
		__atomic_fetch_add(&hit_rounds, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * Hits in another thread on the 64 ranges from base on, all live, while
 * the pool grows, retiring nothing: a hit refused would be a lookup that
 * lost a live watch.
 */
static void hits_start(unsigned int base)
{
	hit_base = base;
	__atomic_store_n(&hitting, true, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_create(&hitter, NULL, hit_while_growing, NULL), 0);
}

static void hits_stop(void)
{
	unsigned int rounds = __atomic_load_n(&hit_rounds, __ATOMIC_ACQUIRE);

	/* A whole round after the pool grew, on a busy machine too. */
	WAIT_FOR(__atomic_load_n(&hit_rounds, __ATOMIC_ACQUIRE) > rounds + 1);
	__atomic_store_n(&hitting, false, __ATOMIC_RELEASE);
	pthread_join(hitter, NULL);
	CHECK_EQ(hits_refused, 0);
}

/*
 * Room for the ranges in use.  At 1/16 free, one turn of the clock's hand
 * that finds every watch new or found valid since it last passed adds a
 * handle of the device with as many watches again, up to the maximum; a
 * watch the turn finds cold is retired instead.  Lookups in another
 * thread go on meanwhile, and each handle's changes reach the caches.  A
 * request for memory that every handle gets turns the hand once, not
 * once per handle.  Before, the pool stayed at its first size and the
 * clock retired watches in use.  Run alone (test-monitor grow), with a
 * maximum of GROW_MAX: the first handle has 8192 watches.
 */
static void test_the_pool_grows_for_the_ranges_in_use(void)
{
	unsigned int i, n = 0, first = notified_count();
	uint64_t recycled, asked;

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(stats().capacity, 8192);
	while (n < 64)
		CHECK_EQ(sub_nth(n++), 0);
	/* New, so in use: a second handle. */
	hits_start(0);
	while (n < 8192 - 512 + 1)
		CHECK_EQ(sub_nth(n++), 0);
	hits_stop();
	CHECK_EQ(stats().capacity, 16384);
	CHECK_EQ(stats().recycled, 0);
	CHECK_EQ(device_watches(), n);
	/* The hand passed them all: the ones hit since stay, cold ones go. */
	while (n < 16384 - 1024 + 1)
		CHECK_EQ(sub_nth(n++), 0);
	CHECK_EQ(stats().capacity, 16384);
	CHECK(stats().recycled > 0);
	/* All found valid: a third handle, of what is left to the maximum. */
	for (i = 0; i < n; i++)
		valid_nth(i);
	WAIT_FOR(stats().watches == n - stats().recycled);
	recycled = stats().recycled;
	for (i = n; n < i + 64;)
		CHECK_EQ(sub_nth(n++), 0);
	hits_start(i);
	while (stats().capacity == 16384 && n < GROW_MAX)
		CHECK_EQ(sub_nth(n++), 0);
	hits_stop();
	CHECK_EQ(stats().capacity, GROW_MAX);
	CHECK_EQ(stats().recycled, recycled);

	/*
	 * The kernel asks each handle for memory: each gives back its own
	 * watches not in use, one turn of its own hand, which finds all in
	 * use, not a turn over all of them per request.
	 */
	for (i = 0; i < n; i++)
		valid_nth(i);
	recycled = stats().recycled;
	asked = stats().pressure;
	if (pressure(0)) {
		pressure_done(asked + 2);
		CHECK_EQ(stats().recycled, recycled);
	}
	/* A range only the third handle watches. */
	CHECK_EQ(sub(NR_PAGES - 2, 1), 0);
	change(NR_PAGES - 2, 1);
	WAIT_FOR(notified_since(first, NR_PAGES - 2));
	/* Every handle's watches fire, and the thread retires them all. */
	change(0, NR_PAGES);
	WAIT_FOR(stats().watches == 0);
	CHECK(!valid_nth(0) && !valid_nth(n - 1));
	CHECK_EQ(stats().failures, 0);
	stop();
}

/* libfabric's fi_fini() asserts (debug builds) that the import is closed. */
static void test_closing_lets_libfabric_import_again(void)
{
	umn_ofi__close();
	CHECK(!stats().imported);
	CHECK_EQ(umn_ofi_import(), 0);
	interpose();
}

int main(int argc, char **argv)
{
	bool grow = argc > 1 && !strcmp(argv[1], "grow");
	struct fi_info *info = NULL;
	char max[16];

	seed_rng("test-monitor");
	backend_setup();
	setenv("FI_MR_CACHE_MONITOR", "memhooks", 1);
	CHECK_EQ(umn_ofi_import(), -EPERM);
	unsetenv("FI_MR_CACHE_MONITOR");
	/* The maximum is read once: the pool's growth runs on its own. */
	snprintf(max, sizeof(max), "%u", grow ? GROW_MAX : MAX_WATCHES);
	setenv("FI_UMMUNOTIFY_MAX_WATCHES", max, 1);
	CHECK_EQ(umn_ofi_import(), 0);
	CHECK_EQ(umn_ofi_import(), 0);
	/* libfabric sets up its monitors (notify()'s lists) at fi_ini(). */
	fi_getinfo(FI_VERSION(1, 13), NULL, NULL, 0, NULL, &info);
	fi_freeinfo(info);
	/* Imported and loaded, it has opened nothing: the first start() does. */
	CHECK(!device_opened());

	m = umn_ofi__monitor();
	libfabric_notify = m->import_ops;
	recorder = *libfabric_notify;
	recorder.notify = record_notify;
	interpose();
	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK(device_opened());
	CHECK(stats().started);
	stop();
	if (grow) {
		test_the_pool_grows_for_the_ranges_in_use();
		printf("test-monitor grow: ok\n");
		return 0;
	}

	test_a_range_has_one_watch_shared_by_its_subscribers();
	test_a_changed_range_refuses_subscribers();
	test_the_thread_notifies_a_change_before_the_watch_goes();
	test_recycling_never_validates_a_replaced_range();
	test_a_burst_larger_than_a_read_is_no_overflow();
	test_lost_events_recheck_every_watch();
#ifndef __SANITIZE_THREAD__
	/* The plain and ASan builds run it: TSan stops a forked child's thread. */
	test_a_forked_child_starts_afresh();
	test_a_child_without_a_thread_keeps_the_parents_watch();
#endif
	test_a_failed_thread_drops_every_entry();
	test_pressure_gives_back_the_coldest_ranges();
	test_pressure_keeps_the_ranges_in_use();
	test_a_thread_that_cannot_start_fails_start();
#ifndef __SANITIZE_THREAD__
	test_fork_during_notify();
#endif
	test_stop_while_a_domain_opens();
	test_stats_fill_what_the_caller_knows();
	test_lookups_race_with_changes();
	test_a_used_monitor_is_closed_by_fi_fini();
#ifndef __SANITIZE_THREAD__
	test_a_monitor_used_after_fi_fini_fails_safe();
#endif
	test_closing_lets_libfabric_import_again();
	printf("test-monitor: ok\n");

	CHECK_EQ(m->export_ops->start(m), 0);
	CHECK_EQ(sub(60, 1), 0);
	teardown_after_destructors = true;
	return 0;
}
