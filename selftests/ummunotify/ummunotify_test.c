// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of /dev/ummunotify as the 2010 ("legacy") ABI describes it: the
 * ioctls and their errors, the generation counter page, which changes to
 * the address space are reported, read(), poll and SIGIO, what processes
 * other than the owner may do, and behaviour under load and concurrency.
 *
 * Test memory is small and fenced by PROT_NONE guard pages (struct buf), so
 * that every VMA a test splits is smaller than 2 MiB.  Splitting a VMA that
 * covers a whole aligned 2 MiB block raises a transparent-huge-page split
 * invalidation over that block first, so exact counts would otherwise
 * depend on where the kernel placed the mapping.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>

#include <linux/ummunotify.h>

#include "calls.h"
#include "kselftest_harness.h"
#include "process.h"

#define EVENT		sizeof(struct ummunotify_event)
/* A read() result of n whole events. */
#define EVENTS(n)	((ssize_t)((n) * EVENT))
/* The most reports a test expects from one read(). */
#define MAX_REPORTS	8UL
/* A moment: long enough for a signal or an exit to have happened. */
#define DELAY_US	200000
/* How long a waiter waits: longer than its waker waits for it to sleep. */
#define WAIT_MS		(2 * WAKER_MS)

static size_t page_size;

static int register_region(int fd, const void *start, const void *end,
			   __u64 cookie)
{
	struct ummunotify_register_ioctl r = {
		.start = (uintptr_t)start,
		.end = (uintptr_t)end,
		.user_cookie = cookie,
	};

	return uioctl(fd, UMMUNOTIFY_REGISTER_REGION, &r);
}

static int unregister_region(int fd, __u64 cookie)
{
	return uioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie);
}

/* An open /dev/ummunotify and its mapped generation counter. */
struct ufile {
	int fd;
	const __u64 *counter;	/* read with counter() */
};

/* Returns 0 or -errno; used in child processes too, so no ASSERTs. */
static int ufile_open(struct ufile *f)
{
	void *p;

	f->fd = open(DEVICE, O_RDONLY);
	if (f->fd < 0)
		return -errno;
	p = mmap(NULL, page_size, PROT_READ, MAP_SHARED, f->fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	f->counter = p;
	return 0;
}

/*
 * EXPECT, not ASSERT: this runs in teardowns, where the 6.1 harness turns
 * an ASSERT after a failed one into an endless loop.
 */
static void ufile_close(struct __test_metadata *_metadata, struct ufile *f)
{
	EXPECT_EQ(0, munmap((void *)f->counter, page_size));
	EXPECT_EQ(0, close(f->fd));
}

static __u64 counter(const struct ufile *f)
{
	return __atomic_load_n(f->counter, __ATOMIC_ACQUIRE);
}

/*
 * PROT_NONE address space marked VM_DONTDUMP, so that nothing mapped into
 * it later merges with what is left of it.
 */
static char *reserve(size_t pages)
{
	size_t len = pages * page_size;
	char *p = mmap(NULL, len, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p != MAP_FAILED && madvise(p, len, MADV_DONTDUMP)) {
		munmap(p, len);
		return MAP_FAILED;
	}
	return p;
}

/* Pages of memory between two guard pages: a VMA of its own. */
struct buf {
	char *p;
	size_t pages;
};

static char *page_of(const struct buf *b, size_t i)
{
	return b->p + i * page_size;
}

/* Private anonymous pages, written so that each has a page of its own. */
static int map_buf(struct buf *b, size_t pages)
{
	char *guard = reserve(pages + 2);

	if (guard == MAP_FAILED)
		return -errno;
	b->p = guard + page_size;
	b->pages = pages;
	if (mmap(b->p, pages * page_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return -errno;
	memset(b->p, 0x5a, pages * page_size);
	return 0;
}

/* Written pages of a memfd (shmem) mapped shared; *memfd stays open. */
static int map_memfd(struct buf *b, size_t pages, int *memfd)
{
	char *guard = reserve(pages + 2);
	size_t len = pages * page_size;

	if (guard == MAP_FAILED)
		return -errno;
	b->p = guard + page_size;
	b->pages = pages;
	*memfd = memfd_create("ummunotify_test", MFD_CLOEXEC);
	if (*memfd < 0 || ftruncate(*memfd, len) ||
	    mmap(b->p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 *memfd, 0) == MAP_FAILED)
		return -errno;
	memset(b->p, 0x5a, len);
	return 0;
}

static struct ummunotify_event inval(__u64 cookie, __u32 flags,
				     const void *start, const void *end)
{
	return (struct ummunotify_event){
		.type = UMMUNOTIFY_EVENT_TYPE_INVAL,
		.flags = flags,
		.hint_start = (uintptr_t)start,
		.hint_end = (uintptr_t)end,
		.user_cookie_counter = cookie,
	};
}

static struct ummunotify_event last(__u64 counter)
{
	return (struct ummunotify_event){
		.type = UMMUNOTIFY_EVENT_TYPE_LAST,
		.user_cookie_counter = counter,
	};
}

static const char *describe(char *s, size_t len,
			    const struct ummunotify_event *ev)
{
	snprintf(s, len, "{type %u flags %#x hint [%#llx, %#llx) %s %#llx}",
		 ev->type, ev->flags, ev->hint_start, ev->hint_end,
		 ev->type == UMMUNOTIFY_EVENT_TYPE_LAST ? "counter" : "cookie",
		 ev->user_cookie_counter);
	return s;
}

static void expect_event(struct __test_metadata *_metadata,
			 const struct ummunotify_event *want,
			 const struct ummunotify_event *got, size_t i)
{
	char w[128], g[128];

	ASSERT_EQ(0, memcmp(want, got, sizeof(*got)))
		TH_LOG("event %zu: expected %s, got %s", i,
		       describe(w, sizeof(w), want),
		       describe(g, sizeof(g), got));
}

/* Nothing at all is queued: a non-blocking read() fails with EAGAIN. */
static void expect_nothing_pending(struct __test_metadata *_metadata, int fd)
{
	struct ummunotify_event ev;
	int flags = fcntl(fd, F_GETFL);
	char s[128];

	ASSERT_EQ(0, fcntl(fd, F_SETFL, flags | O_NONBLOCK));
	ASSERT_EQ(-1, read(fd, &ev, sizeof(ev)))
		TH_LOG("unexpected event %s", describe(s, sizeof(s), &ev));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, fcntl(fd, F_SETFL, flags));
}

/*
 * Reads n reports into got[], which has room for MAX_REPORTS + 2 events,
 * and checks that the LAST event carrying the counter follows them in the
 * same read() and that nothing else is pending.
 */
static void read_reports(struct __test_metadata *_metadata,
			 const struct ufile *f, struct ummunotify_event *got,
			 size_t n)
{
	struct ummunotify_event want = last(counter(f));
	ssize_t len;
	char s[128];

	ASSERT_GE(MAX_REPORTS, n);
	len = read(f->fd, got, (MAX_REPORTS + 2) * EVENT);
	ASSERT_EQ(EVENTS(n + 1), len) {
		for (ssize_t i = 0; i < len / EVENTS(1); i++)
			TH_LOG("read event %zd: %s", i,
			       describe(s, sizeof(s), &got[i]));
	}
	expect_event(_metadata, &want, &got[n], n);
	expect_nothing_pending(_metadata, f->fd);
}

/* Exactly the reports want[0..n), oldest first, then LAST, then nothing. */
static void expect_reports(struct __test_metadata *_metadata,
			   const struct ufile *f,
			   const struct ummunotify_event *want, size_t n)
{
	struct ummunotify_event got[MAX_REPORTS + 2];

	read_reports(_metadata, f, got, n);
	for (size_t i = 0; i < n; i++)
		expect_event(_metadata, &want[i], &got[i], i);
}

static int by_cookie(const void *a, const void *b)
{
	const struct ummunotify_event *x = a, *y = b;

	return (x->user_cookie_counter > y->user_cookie_counter) -
	       (x->user_cookie_counter < y->user_cookie_counter);
}

/* As expect_reports(), for reports queued by one invalidation. */
static void expect_reports_in_any_order(struct __test_metadata *_metadata,
					const struct ufile *f,
					const struct ummunotify_event *want,
					size_t n)
{
	struct ummunotify_event got[MAX_REPORTS + 2], sorted[MAX_REPORTS];

	read_reports(_metadata, f, got, n);
	memcpy(sorted, want, n * EVENT);
	qsort(sorted, n, EVENT, by_cookie);
	qsort(got, n, EVENT, by_cookie);
	for (size_t i = 0; i < n; i++)
		expect_event(_metadata, &sorted[i], &got[i], i);
}

/*
 * One report for cookie whose hint is [start, end), the whole region, with
 * or without HINT: for operations that may hit the region more than once.
 */
static void expect_whole_region_report(struct __test_metadata *_metadata,
				       const struct ufile *f, __u64 cookie,
				       const void *start, const void *end)
{
	struct ummunotify_event got[MAX_REPORTS + 2], want;

	read_reports(_metadata, f, got, 1);
	want = inval(cookie, got[0].flags & UMMUNOTIFY_EVENT_FLAG_HINT,
		     start, end);
	expect_event(_metadata, &want, &got[0], 0);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* munmap() from another thread once this one sleeps, to wake it up. */
struct munmap_later {
	struct when_asleep w;
	void *addr;
	size_t len;
};

static void munmap_now(void *arg)
{
	struct munmap_later *m = arg;

	munmap(m->addr, m->len);
}

static int start_munmap_later(struct munmap_later *m, void *addr, size_t len)
{
	m->addr = addr;
	m->len = len;
	return start_when_asleep(&m->w, munmap_now, m);
}

#define OWNER_COOKIE	0x0123
#define FOREIGN_COOKIE	0x0456

/*
 * The state another process must leave alone: a two-page region under
 * OWNER_COOKIE whose first page was dropped, its report queued.  Returns 0
 * or -errno; used in child processes too, so no ASSERTs.
 */
static int queue_owner_report(const struct ufile *f, struct buf *b)
{
	int ret = map_buf(b, 2);

	if (!ret)
		ret = register_region(f->fd, b->p, page_of(b, 2),
				      OWNER_COOKIE);
	if (!ret && madvise(b->p, page_size, MADV_DONTNEED))
		ret = -errno;
	return ret;
}

static void expect_owner_unchanged(struct __test_metadata *_metadata,
				   const struct ufile *f, const struct buf *b)
{
	ASSERT_EQ(1ULL, counter(f));
	/* FOREIGN_COOKIE is free: the other process registered nothing. */
	ASSERT_EQ(0, register_region(f->fd, b->p, page_of(b, 1),
				     FOREIGN_COOKIE));
	/* The report is still queued: nothing was read or unregistered. */
	expect_reports(_metadata, f, (struct ummunotify_event[]){
		inval(OWNER_COOKIE, UMMUNOTIFY_EVENT_FLAG_HINT,
		      page_of(b, 0), page_of(b, 1)),
	}, 1);
	/* And the owner's notifications still work. */
	ASSERT_EQ(0, madvise(page_of(b, 1), page_size, MADV_DONTNEED));
	ASSERT_EQ(2ULL, counter(f));
	expect_reports(_metadata, f, (struct ummunotify_event[]){
		inval(OWNER_COOKIE, UMMUNOTIFY_EVENT_FLAG_HINT,
		      page_of(b, 1), page_of(b, 2)),
	}, 1);
}

static int refused(int call, const char *what, long ret)
{
	fprintf(stderr, "# a foreign %s returned %ld (%s), not EPERM\n",
		what, ret, ret < 0 ? strerror(errno) : "success");
	return call;
}

/*
 * What a process other than the owner may try with the file: each call
 * must fail with EPERM, and poll() must say POLLERR.  Returns 0 or the
 * number of the first call that did not.  Runs in other processes, so no
 * ASSERTs.
 */
static int check_refused(int fd)
{
	struct ummunotify_register_ioctl r = {
		.start = (uintptr_t)&r,
		.end = (uintptr_t)(&r + 1),
		.user_cookie = FOREIGN_COOKIE,
	};
	__u64 cookie = OWNER_COOKIE;
	__u32 features = 0;
	struct ummunotify_event ev[2];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long ret;
	void *p;

	ret = ioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features);
	if (ret != -1 || errno != EPERM)
		return refused(1, "EXCHANGE_FEATURES", ret);
	ret = ioctl(fd, UMMUNOTIFY_REGISTER_REGION, &r);
	if (ret != -1 || errno != EPERM)
		return refused(2, "REGISTER_REGION", ret);
	ret = ioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie);
	if (ret != -1 || errno != EPERM)
		return refused(3, "UNREGISTER_REGION", ret);
	ret = read(fd, ev, sizeof(ev));
	if (ret != -1 || errno != EPERM)
		return refused(4, "read()", ret);
	p = mmap(NULL, page_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED || errno != EPERM)
		return refused(5, "mmap()", p == MAP_FAILED ? -1 : 0);
	if (poll(&pfd, 1, 0) != 1 || pfd.revents != POLLERR) {
		fprintf(stderr, "# a foreign poll() said %#x, not POLLERR\n",
			pfd.revents);
		return 6;
	}
	return 0;
}

/*
 * The test program exec()s itself with this variable set to a file it
 * opened before: the new image must be refused like any other process.
 */
#define REFUSED_FD_ENV	"UMMUNOTIFY_TEST_REFUSED_FD"

static void __attribute__((constructor)) init(void)
{
	const char *fd = getenv(REFUSED_FD_ENV);

	page_size = sysconf(_SC_PAGESIZE);
	if (fd)
		_exit(check_refused(atoi(fd)));
}

FIXTURE(ummunotify)
{
	struct ufile f;
};

FIXTURE_SETUP(ummunotify)
{
	int ret = ufile_open(&self->f);

	ASSERT_EQ(0, ret) TH_LOG("%s: %s", DEVICE, strerror(-ret));
}

FIXTURE_TEARDOWN(ummunotify)
{
	ufile_close(_metadata, &self->f);
}

/* Opening the device. */

TEST_F(ummunotify, a_new_file_has_a_zero_counter)
{
	ASSERT_EQ(0ULL, counter(&self->f));
}

TEST_F(ummunotify, an_unprivileged_user_can_open_and_use_the_device)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid) {
		struct ufile f;
		struct buf b;

		if (!getuid() && (setgroups(0, NULL) ||
				  setresgid(65534, 65534, 65534) ||
				  setresuid(65534, 65534, 65534)))
			_exit(1);
		if (ufile_open(&f))
			_exit(2);
		if (queue_owner_report(&f, &b))
			_exit(3);
		_exit(counter(&f) == 1 ? 0 : 4);
	}
	ASSERT_EQ(0, wait_child(pid));
}

TEST_F(ummunotify, each_file_has_its_own_cookies)
{
	struct ufile g;
	struct buf b;

	ASSERT_EQ(0, ufile_open(&g));
	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 5));
	ASSERT_EQ(0, register_region(g.fd, b.p, page_of(&b, 1), 5));
	ASSERT_EQ(0, unregister_region(g.fd, 5));
	ASSERT_EQ(-EINVAL, unregister_region(g.fd, 5));
	ASSERT_EQ(0, unregister_region(self->f.fd, 5));
	ufile_close(_metadata, &g);
}

TEST_F(ummunotify, an_invalidation_counts_only_on_the_files_watching_it)
{
	struct ufile g;
	struct buf b;

	ASSERT_EQ(0, ufile_open(&g));
	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, register_region(g.fd, page_of(&b, 1), page_of(&b, 2),
				     2));
	ASSERT_EQ(0, munmap(page_of(&b, 0), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	ASSERT_EQ(0ULL, counter(&g));
	expect_nothing_pending(_metadata, g.fd);
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	ASSERT_EQ(1ULL, counter(&g));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		      page_of(&b, 1)),
	}, 1);
	expect_reports(_metadata, &g, (struct ummunotify_event[]){
		inval(2, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
	ufile_close(_metadata, &g);
}

/* EXCHANGE_FEATURES */

/*
 * Features the 2010 ABI knows nothing of are never granted; native_test
 * checks the ones that are.
 */
TEST_F(ummunotify, exchange_features_grants_nothing_the_2010_abi_lacks)
{
	static const __u32 asks[] = { 0, 0x80000000, 0xfffffff8U };

	for (size_t i = 0; i < ARRAY_SIZE(asks); i++) {
		__u32 features = asks[i];

		ASSERT_EQ(0, uioctl(self->f.fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				    &features));
		ASSERT_EQ(0U, features) TH_LOG("asked for %#x", asks[i]);
	}
}

TEST_F(ummunotify, exchange_features_fails_after_a_registration)
{
	__u32 features = 0;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(-EINVAL, uioctl(self->f.fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				  &features));
}

TEST_F(ummunotify, exchange_features_fails_after_a_read)
{
	struct ummunotify_event ev;
	__u32 features = 0;

	ASSERT_EQ(0, fcntl(self->f.fd, F_SETFL, O_NONBLOCK));
	ASSERT_EQ(-1, read(self->f.fd, &ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
	ASSERT_EQ(-EINVAL, uioctl(self->f.fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				  &features));
}

TEST_F(ummunotify, exchange_features_fails_with_a_bad_pointer)
{
	char *bad = reserve(1);

	ASSERT_NE(MAP_FAILED, bad);
	ASSERT_EQ(-EFAULT, uioctl(self->f.fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				  bad));
}

/* REGISTER_REGION */

TEST_F(ummunotify, register_rejects_an_empty_or_reversed_range)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(-EINVAL, register_region(self->f.fd, page_of(&b, 1),
					   page_of(&b, 1), 1));
	ASSERT_EQ(-EINVAL, register_region(self->f.fd, page_of(&b, 1),
					   page_of(&b, 0), 1));
}

TEST_F(ummunotify, register_rejects_an_end_beyond_user_space)
{
	static const __u64 ends[] = { 1ULL << 63, ~0ULL };
	struct ummunotify_register_ioctl r = { .user_cookie = 1 };
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	r.start = (uintptr_t)b.p;
	for (size_t i = 0; i < ARRAY_SIZE(ends); i++) {
		r.end = ends[i];
		ASSERT_EQ(-EINVAL, uioctl(self->f.fd,
					  UMMUNOTIFY_REGISTER_REGION, &r))
			TH_LOG("end %#llx", r.end);
	}
}

/*
 * The 2010 kernel never looked at flags or reserved, and Open MPI leaves
 * flags uninitialised: a 2010 file takes any value and watches the range.
 */
TEST_F(ummunotify, register_ignores_flags_and_reserved_as_the_2010_kernel_did)
{
	struct ummunotify_register_ioctl r;
	struct ummunotify_event want[2];
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 2));
	for (int i = 0; i < 2; i++) {
		memset(&r, 0xa5, sizeof(r));
		r.start = (uintptr_t)page_of(&b, i);
		r.end = (uintptr_t)page_of(&b, i + 1);
		r.user_cookie = i + 1;
		ASSERT_EQ(0, uioctl(self->f.fd, UMMUNOTIFY_REGISTER_REGION,
				    &r));
		want[i] = inval(i + 1, UMMUNOTIFY_EVENT_FLAG_HINT,
				page_of(&b, i), page_of(&b, i + 1));
	}
	ASSERT_EQ(0, madvise(page_of(&b, 0), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&b, 1), page_size, MADV_DONTNEED));
	ASSERT_EQ(2ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, want, 2);
}

TEST_F(ummunotify, register_rejects_a_cookie_already_in_use)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 0),
				     page_of(&b, 1), 7));
	ASSERT_EQ(-EINVAL, register_region(self->f.fd, page_of(&b, 1),
					   page_of(&b, 2), 7));
	/* The refused registration watches nothing... */
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(0ULL, counter(&self->f));
	/* ...and the first one is intact. */
	ASSERT_EQ(0, munmap(page_of(&b, 0), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(7, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		      page_of(&b, 1)),
	}, 1);
}

TEST_F(ummunotify, register_fails_with_a_bad_pointer)
{
	char *bad = reserve(1);

	ASSERT_NE(MAP_FAILED, bad);
	ASSERT_EQ(-EFAULT, uioctl(self->f.fd, UMMUNOTIFY_REGISTER_REGION,
				  bad));
}

TEST_F(ummunotify, an_unaligned_region_reports_a_hint_clipped_to_it)
{
	struct buf b;
	char *end;

	ASSERT_EQ(0, map_buf(&b, 3));
	end = page_of(&b, 1) + 200;
	ASSERT_EQ(0, register_region(self->f.fd, b.p + 100, end, 1));
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1), end),
	}, 1);
}

TEST_F(ummunotify, a_hint_is_clipped_to_the_region_at_both_ends)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1) + 100,
				     page_of(&b, 2) - 100, 1));
	ASSERT_EQ(0, munmap(b.p, 3 * page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1) + 100,
		      page_of(&b, 2) - 100),
	}, 1);
}

TEST_F(ummunotify, an_unmapped_range_is_watched_once_it_is_mapped)
{
	char *guard = reserve(3);
	char *p = guard + page_size;

	ASSERT_NE(MAP_FAILED, guard);
	ASSERT_EQ(0, munmap(p, page_size));
	ASSERT_EQ(0, register_region(self->f.fd, p, p + page_size, 1));
	/* Mapping the hole replaces nothing. */
	ASSERT_EQ(p, mmap(p, page_size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	memset(p, 1, page_size);
	ASSERT_EQ(0ULL, counter(&self->f));
	ASSERT_EQ(0, munmap(p, page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, p, p + page_size),
	}, 1);
}

TEST_F(ummunotify, overlapping_regions_with_different_cookies_each_report)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 0),
				     page_of(&b, 3), 1));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 2), 2));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 3), 3));
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(3ULL, counter(&self->f));
	expect_reports_in_any_order(_metadata, &self->f,
				    (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
		inval(2, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
		inval(3, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 3);
}

/*
 * max_regions: the fixture lowers the module parameter (root only) and
 * restores it afterwards.
 */
#define MAX_REGIONS_PARAM	"/sys/module/ummunotify/parameters/max_regions"
#define MAX_REGIONS_TEST	8

FIXTURE(max_regions)
{
	struct ufile f;
	char saved[32];		/* the parameter's value, "" if not changed */
	struct buf b;		/* a page for each region and one more */
};

static int write_max_regions(const char *value)
{
	int fd = open(MAX_REGIONS_PARAM, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	close(fd);
	if (n < 0)
		return -errno;
	return n == (ssize_t)strlen(value) ? 0 : -EIO;
}

FIXTURE_SETUP(max_regions)
{
	char limit[16];
	ssize_t n = -1;
	int ret, fd;

	ret = ufile_open(&self->f);
	ASSERT_EQ(0, ret) TH_LOG("%s: %s", DEVICE, strerror(-ret));
	ASSERT_EQ(0, map_buf(&self->b, MAX_REGIONS_TEST + 1));
	/* Last: the teardown, which restores it, runs only if this returns. */
	fd = open(MAX_REGIONS_PARAM, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, self->saved, sizeof(self->saved) - 1);
		close(fd);
	}
	snprintf(limit, sizeof(limit), "%d", MAX_REGIONS_TEST);
	if (n <= 0 || write_max_regions(limit)) {
		self->saved[0] = '\0';
		/* Root always may: its refusal is the module's fault. */
		ASSERT_NE(0U, geteuid())
			TH_LOG("root cannot set %s", MAX_REGIONS_PARAM);
	}
}

FIXTURE_TEARDOWN(max_regions)
{
	ufile_close(_metadata, &self->f);
	if (self->saved[0])
		EXPECT_EQ(0, write_max_regions(self->saved));
}

/* Registers one page under cookie i + 1 for each i in [first, end). */
static int register_pages(int fd, const struct buf *b, int first, int end)
{
	int ret = 0;

	for (int i = first; i < end && !ret; i++)
		ret = register_region(fd, page_of(b, i), page_of(b, i + 1),
				      i + 1);
	return ret;
}

TEST_F(max_regions, register_fails_with_enospc_beyond_max_regions)
{
	int fd = self->f.fd;

	if (!self->saved[0])
		SKIP(return, "not root: cannot set %s", MAX_REGIONS_PARAM);
	ASSERT_EQ(0, register_pages(fd, &self->b, 0, MAX_REGIONS_TEST));
	ASSERT_EQ(-ENOSPC, register_pages(fd, &self->b, MAX_REGIONS_TEST,
					  MAX_REGIONS_TEST + 1));
	/* The refused region took no room and no cookie. */
	ASSERT_EQ(0, unregister_region(fd, 1));
	ASSERT_EQ(0, register_pages(fd, &self->b, MAX_REGIONS_TEST,
				    MAX_REGIONS_TEST + 1));
}

TEST_F(max_regions, max_regions_limits_each_file_separately)
{
	struct ufile g;

	if (!self->saved[0])
		SKIP(return, "not root: cannot set %s", MAX_REGIONS_PARAM);
	ASSERT_EQ(0, ufile_open(&g));
	ASSERT_EQ(0, register_pages(self->f.fd, &self->b, 0,
				    MAX_REGIONS_TEST));
	ASSERT_EQ(0, register_pages(g.fd, &self->b, 0, MAX_REGIONS_TEST));
	ASSERT_EQ(-ENOSPC, register_pages(g.fd, &self->b, MAX_REGIONS_TEST,
					  MAX_REGIONS_TEST + 1));
	ufile_close(_metadata, &g);
}

/* UNREGISTER_REGION */

TEST_F(ummunotify, unregister_rejects_an_unknown_cookie)
{
	struct buf b;

	ASSERT_EQ(-EINVAL, unregister_region(self->f.fd, 1));
	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(-EINVAL, unregister_region(self->f.fd, 2));
}

TEST_F(ummunotify, unregister_fails_with_a_bad_pointer)
{
	char *bad = reserve(1);

	ASSERT_NE(MAP_FAILED, bad);
	ASSERT_EQ(-EFAULT, uioctl(self->f.fd, UMMUNOTIFY_UNREGISTER_REGION,
				  bad));
}

TEST_F(ummunotify, unregister_discards_the_queued_report)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 0),
				     page_of(&b, 1), 1));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 2), 2));
	ASSERT_EQ(0, munmap(b.p, 2 * page_size));
	ASSERT_EQ(0, unregister_region(self->f.fd, 1));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(2, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

TEST_F(ummunotify, an_unregistered_region_is_no_longer_watched)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, unregister_region(self->f.fd, 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(0ULL, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
}

TEST_F(ummunotify, a_cookie_can_be_registered_again_after_unregister)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 0),
				     page_of(&b, 1), 1));
	ASSERT_EQ(0, unregister_region(self->f.fd, 1));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 2), 1));
	ASSERT_EQ(0, munmap(b.p, 2 * page_size));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

/* Requests that are not ours; a zeroed argument makes ours fail anyway. */

static void expect_enotty(struct __test_metadata *_metadata, int fd,
			  const unsigned long *requests, size_t n)
{
	__u64 arg[8] = { 0 };

	for (size_t i = 0; i < n; i++) {
		EXPECT_EQ(-ENOTTY, uioctl(fd, requests[i], arg))
			TH_LOG("request %#lx", requests[i]);
	}
}

TEST_F(ummunotify, unknown_ioctls_fail_with_enotty)
{
	static const unsigned long requests[] = {
		_IO(UMMUNOTIFY_MAGIC, 0),
		_IOWR(UMMUNOTIFY_MAGIC, 0xff, __u64),
		_IOW('V', 2, struct ummunotify_register_ioctl),
		_IOWR('T', 1, __u32),
		TCGETS,
	};

	expect_enotty(_metadata, self->f.fd, requests, ARRAY_SIZE(requests));
}

TEST_F(ummunotify, ioctls_with_the_wrong_size_or_direction_fail_with_enotty)
{
	static const unsigned long requests[] = {
		_IO(UMMUNOTIFY_MAGIC, 1),
		_IOR(UMMUNOTIFY_MAGIC, 1, __u32),
		_IOW(UMMUNOTIFY_MAGIC, 1, __u32),
		_IOWR(UMMUNOTIFY_MAGIC, 1, __u64),
		_IO(UMMUNOTIFY_MAGIC, 2),
		_IOR(UMMUNOTIFY_MAGIC, 2, struct ummunotify_register_ioctl),
		_IOWR(UMMUNOTIFY_MAGIC, 2, struct ummunotify_register_ioctl),
		_IOW(UMMUNOTIFY_MAGIC, 2, __u64),
		_IO(UMMUNOTIFY_MAGIC, 3),
		_IOR(UMMUNOTIFY_MAGIC, 3, __u64),
		_IOWR(UMMUNOTIFY_MAGIC, 3, __u64),
		_IOW(UMMUNOTIFY_MAGIC, 3, __u32),
	};

	expect_enotty(_metadata, self->f.fd, requests, ARRAY_SIZE(requests));
}

/* The counter page */

TEST_F(ummunotify, every_mapping_of_up_to_a_page_shows_the_counter)
{
	struct ufile small = { .fd = self->f.fd };
	struct buf b;

	small.counter = mmap(NULL, sizeof(__u64), PROT_READ, MAP_SHARED,
			     self->f.fd, 0);
	ASSERT_NE(MAP_FAILED, small.counter);
	ASSERT_EQ(0ULL, counter(&small));
	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(1ULL, counter(&small));
	ASSERT_EQ(1ULL, counter(&self->f));
}

TEST_F(ummunotify, mmap_at_a_nonzero_offset_fails_with_einval)
{
	ASSERT_EQ(MAP_FAILED, mmap(NULL, page_size, PROT_READ, MAP_SHARED,
				   self->f.fd, page_size));
	ASSERT_EQ(EINVAL, errno);
}

TEST_F(ummunotify, mmap_longer_than_a_page_fails_with_einval)
{
	ASSERT_EQ(MAP_FAILED, mmap(NULL, 2 * page_size, PROT_READ, MAP_SHARED,
				   self->f.fd, 0));
	ASSERT_EQ(EINVAL, errno);
}

TEST_F(ummunotify, a_private_mmap_fails_with_einval)
{
	ASSERT_EQ(MAP_FAILED, mmap(NULL, page_size, PROT_READ, MAP_PRIVATE,
				   self->f.fd, 0));
	ASSERT_EQ(EINVAL, errno);
}

TEST_F(ummunotify, a_writable_mmap_fails_with_eacces_on_a_read_only_file)
{
	ASSERT_EQ(MAP_FAILED, mmap(NULL, page_size, PROT_READ | PROT_WRITE,
				   MAP_SHARED, self->f.fd, 0));
	ASSERT_EQ(EACCES, errno);
}

TEST_F(ummunotify, a_writable_mmap_fails_with_eperm_on_a_read_write_file)
{
	int fd = open(DEVICE, O_RDWR);

	ASSERT_LE(0, fd);
	ASSERT_EQ(MAP_FAILED, mmap(NULL, page_size, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0));
	ASSERT_EQ(EPERM, errno);
	ASSERT_EQ(0, close(fd));
}

TEST_F(ummunotify, the_counter_page_cannot_be_made_writable)
{
	static const int modes[] = { O_RDONLY, O_RDWR };

	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		int fd = open(DEVICE, modes[i]);
		void *p;

		ASSERT_LE(0, fd);
		p = mmap(NULL, page_size, PROT_READ, MAP_SHARED, fd, 0);
		ASSERT_NE(MAP_FAILED, p);
		ASSERT_EQ(-1, mprotect(p, page_size, PROT_READ | PROT_WRITE))
			TH_LOG("open mode %#x", modes[i]);
		ASSERT_EQ(EACCES, errno);
		ASSERT_EQ(0, munmap(p, page_size));
		ASSERT_EQ(0, close(fd));
	}
}

/* What is counted and reported: the rows of the events table. */

TEST_F(ummunotify, munmap_of_a_region_counts_once_before_it_returns)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(0ULL, counter(&self->f));
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

TEST_F(ummunotify, munmap_of_memory_outside_every_region_is_not_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 2), 1));
	ASSERT_EQ(0, munmap(page_of(&b, 0), page_size));
	ASSERT_EQ(0, munmap(page_of(&b, 2), page_size));
	ASSERT_EQ(0ULL, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
}

/* Once per region: see overlapping_invalidations_each_move_the_counter. */
TEST_F(ummunotify, one_munmap_over_three_regions_counts_each_region)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, i),
					     page_of(&b, i + 1), 10 + i));
	ASSERT_EQ(0, munmap(b.p, 3 * page_size));
	ASSERT_EQ(3ULL, counter(&self->f));
	expect_reports_in_any_order(_metadata, &self->f,
				    (struct ummunotify_event[]){
		inval(10, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		      page_of(&b, 1)),
		inval(11, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
		inval(12, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 2),
		      page_of(&b, 3)),
	}, 3);
}

TEST_F(ummunotify, mmap_fixed_over_a_region_is_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(page_of(&b, 1),
		  mmap(page_of(&b, 1), page_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

/*
 * The old range of a move is hit twice: moving the page tables, then
 * unmapping it.
 */
TEST_F(ummunotify, mremap_moving_a_region_is_counted)
{
	struct buf b, to;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, map_buf(&to, 3));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 2), 1));
	ASSERT_EQ(to.p, mremap(b.p, 3 * page_size, 3 * page_size,
			       MREMAP_MAYMOVE | MREMAP_FIXED, to.p));
	ASSERT_EQ(2ULL, counter(&self->f));
	expect_whole_region_report(_metadata, &self->f, 1, page_of(&b, 1),
				   page_of(&b, 2));
}

TEST_F(ummunotify, mremap_shrinking_a_region_is_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(b.p, mremap(b.p, 3 * page_size, page_size, 0));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 3)),
	}, 1);
}

TEST_F(ummunotify, mremap_onto_a_region_is_counted)
{
	struct buf b, to;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, map_buf(&to, 3));
	ASSERT_EQ(0, register_region(self->f.fd, to.p, page_of(&to, 3), 1));
	ASSERT_EQ(page_of(&to, 1),
		  mremap(b.p, page_size, page_size,
			 MREMAP_MAYMOVE | MREMAP_FIXED, page_of(&to, 1)));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&to, 1),
		      page_of(&to, 2)),
	}, 1);
}

TEST_F(ummunotify, shrinking_brk_over_a_region_is_counted)
{
	uintptr_t top = (uintptr_t)sbrk(0);
	char *heap = (char *)((top + page_size - 1) & ~(page_size - 1));

	ASSERT_EQ(0, brk(heap + 3 * page_size));
	memset(heap, 1, 3 * page_size);
	ASSERT_EQ(0, register_region(self->f.fd, heap, heap + 3 * page_size,
				     1));
	ASSERT_EQ(0, brk(heap + page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, heap + page_size,
		      heap + 3 * page_size),
	}, 1);
}

TEST_F(ummunotify, shmdt_of_a_region_is_counted)
{
	int id = shmget(IPC_PRIVATE, 3 * page_size, IPC_CREAT | 0600);
	char *p;

	ASSERT_LE(0, id);
	p = shmat(id, NULL, 0);
	ASSERT_NE((void *)-1, p);
	ASSERT_EQ(0, shmctl(id, IPC_RMID, NULL));
	memset(p, 1, 3 * page_size);
	ASSERT_EQ(0, register_region(self->f.fd, p + page_size,
				     p + 2 * page_size, 1));
	ASSERT_EQ(0, shmdt(p));
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, p + page_size,
		      p + 2 * page_size),
	}, 1);
}

static void expect_madvise_counted(struct __test_metadata *_metadata,
				   const struct ufile *f, const struct buf *b,
				   int advice)
{
	ASSERT_EQ(0, register_region(f->fd, b->p, page_of(b, 3), 1));
	ASSERT_EQ(0, madvise(page_of(b, 1), page_size, advice));
	ASSERT_EQ(1ULL, counter(f));
	expect_reports(_metadata, f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(b, 1),
		      page_of(b, 2)),
	}, 1);
}

TEST_F(ummunotify, madvise_dontneed_is_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	expect_madvise_counted(_metadata, &self->f, &b, MADV_DONTNEED);
}

TEST_F(ummunotify, madvise_free_is_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	expect_madvise_counted(_metadata, &self->f, &b, MADV_FREE);
}

TEST_F(ummunotify, madvise_remove_is_counted)
{
	struct buf b;
	int memfd;

	ASSERT_EQ(0, map_memfd(&b, 3, &memfd));
	expect_madvise_counted(_metadata, &self->f, &b, MADV_REMOVE);
}

/* Truncation unmaps the tail twice: before and after dropping the pages. */
TEST_F(ummunotify, truncating_a_mapped_file_is_counted)
{
	struct buf b;
	int memfd;

	ASSERT_EQ(0, map_memfd(&b, 3, &memfd));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 1),
				     page_of(&b, 3), 1));
	ASSERT_EQ(0, ftruncate(memfd, page_size));
	ASSERT_EQ(2ULL, counter(&self->f));
	expect_whole_region_report(_metadata, &self->f, 1, page_of(&b, 1),
				   page_of(&b, 3));
}

/* A child that shares the parent's pages until told to exit. */
struct sharer {
	pid_t pid;
	int release;	/* closing it lets the child exit */
};

static int fork_sharer(struct sharer *s)
{
	int pipefd[2];
	char byte;

	if (pipe(pipefd))
		return -errno;
	s->pid = fork();
	if (s->pid < 0)
		return -errno;
	if (!s->pid) {
		close(pipefd[1]);
		_exit(read(pipefd[0], &byte, 1) == 0 ? 0 : 1);
	}
	close(pipefd[0]);
	s->release = pipefd[1];
	return 0;
}

static int end_sharer(struct sharer *s)
{
	close(s->release);
	return wait_child(s->pid);
}

TEST_F(ummunotify, fork_is_not_counted)
{
	struct sharer child;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(0, fork_sharer(&child));
	ASSERT_EQ(0ULL, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
	ASSERT_EQ(0, end_sharer(&child));
	ASSERT_EQ(0ULL, counter(&self->f));
}

TEST_F(ummunotify, a_write_while_a_child_shares_the_page_is_counted)
{
	struct sharer child;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(0, fork_sharer(&child));
	page_of(&b, 1)[0] = 1;
	ASSERT_EQ(1ULL, counter(&self->f));
	ASSERT_EQ(0, end_sharer(&child));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

TEST_F(ummunotify, the_first_write_to_a_page_only_read_is_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	/* Back to the shared zero page, by reading. */
	ASSERT_EQ(0, madvise(b.p, 3 * page_size, MADV_DONTNEED));
	for (size_t i = 0; i < 3; i++)
		ASSERT_EQ(0, __atomic_load_n(page_of(&b, i), __ATOMIC_RELAXED));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	page_of(&b, 1)[0] = 1;
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

TEST_F(ummunotify, mprotect_is_not_counted)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(0, mprotect(b.p, 3 * page_size, PROT_READ));
	ASSERT_EQ(0, mprotect(page_of(&b, 1), page_size,
			      PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, mprotect(b.p, 3 * page_size, PROT_NONE));
	ASSERT_EQ(0ULL, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
}

TEST_F(ummunotify, userfaultfd_write_protection_is_not_counted)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register uffd_register = {
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	struct uffdio_writeprotect wp = {
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	struct buf b;
	int uffd;

	ASSERT_EQ(0, map_buf(&b, 3));
	uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		SKIP(return, "userfaultfd: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_API, &api));
	uffd_register.range.start = (uintptr_t)b.p;
	uffd_register.range.len = 3 * page_size;
	if (ioctl(uffd, UFFDIO_REGISTER, &uffd_register))
		SKIP(return, "userfaultfd write-protect: %s", strerror(errno));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	wp.range = uffd_register.range;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_WRITEPROTECT, &wp));
	wp.mode = 0;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_WRITEPROTECT, &wp));
	ASSERT_EQ(0ULL, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
	ASSERT_EQ(0, close(uffd));
}

TEST_F(ummunotify, clearing_soft_dirty_bits_is_not_counted)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY);
	struct buf b;

	if (fd < 0)
		SKIP(return, "/proc/self/clear_refs: %s", strerror(errno));
	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	if (write(fd, "4", 1) != 1)
		SKIP(return, "no soft-dirty bits: %s", strerror(errno));
	ASSERT_EQ(0ULL, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
	ASSERT_EQ(0, close(fd));
}

/* 1 if the page at addr is in the page table, 0 if not, or -errno. */
static int page_present(const void *addr)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	off_t off = (uintptr_t)addr / page_size * sizeof(__u64);
	__u64 entry;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, &entry, sizeof(entry), off);
	close(fd);
	if (n != sizeof(entry))
		return n < 0 ? -errno : -EIO;
	return entry >> 63;
}

/*
 * Without swap, reclaim of a shmem page unmaps it and keeps it in the page
 * cache.  Whether reclaim takes the page is up to the kernel: the test
 * checks that if the page left the page table, the region was told.
 */
TEST_F(ummunotify, reclaim_of_a_mapped_page_is_counted)
{
	struct buf b;
	int memfd;

	ASSERT_EQ(0, map_memfd(&b, 3, &memfd));
	ASSERT_EQ(1, page_present(page_of(&b, 1)));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	if (madvise(page_of(&b, 1), page_size, MADV_PAGEOUT))
		SKIP(return, "MADV_PAGEOUT: %s", strerror(errno));
	if (page_present(page_of(&b, 1)))
		SKIP(return, "reclaim left the page mapped");
	ASSERT_EQ(1ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

/* read() */

TEST_F(ummunotify, read_with_room_for_less_than_one_event_fails_with_einval)
{
	struct ummunotify_event ev;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(-1, read(self->f.fd, &ev, 0));
	ASSERT_EQ(EINVAL, errno);
	ASSERT_EQ(-1, read(self->f.fd, &ev, EVENT - 1));
	ASSERT_EQ(EINVAL, errno);
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, b.p, page_of(&b, 1)),
	}, 1);
}

TEST_F(ummunotify, read_returns_as_many_whole_events_as_fit)
{
	struct ummunotify_event ev[3];
	struct ummunotify_event want;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, i),
					     page_of(&b, i + 1), 10 + i));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, munmap(page_of(&b, i), page_size));
	ASSERT_EQ(EVENTS(1), read(self->f.fd, ev, EVENT + EVENT / 2));
	want = inval(10, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		     page_of(&b, 1));
	expect_event(_metadata, &want, &ev[0], 0);
	/* No room for LAST after the two reports: it comes next time. */
	ASSERT_EQ(EVENTS(2), read(self->f.fd, ev, 2 * EVENT));
	want = inval(11, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		     page_of(&b, 2));
	expect_event(_metadata, &want, &ev[0], 0);
	want = inval(12, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 2),
		     page_of(&b, 3));
	expect_event(_metadata, &want, &ev[1], 1);
	ASSERT_EQ(EVENTS(1), read(self->f.fd, ev, sizeof(ev)));
	want = last(3);
	expect_event(_metadata, &want, &ev[0], 0);
	expect_nothing_pending(_metadata, self->f.fd);
}

TEST_F(ummunotify, a_second_hit_before_read_widens_the_hint_to_the_region)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 1));
	ASSERT_EQ(0, madvise(page_of(&b, 0), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&b, 2), page_size, MADV_DONTNEED));
	ASSERT_EQ(2ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, 0, page_of(&b, 0), page_of(&b, 3)),
	}, 1);
}

TEST_F(ummunotify, reports_are_read_oldest_first)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, i),
					     page_of(&b, i + 1), 10 + i));
	ASSERT_EQ(0, madvise(page_of(&b, 1), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&b, 0), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&b, 2), page_size, MADV_DONTNEED));
	ASSERT_EQ(3ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(11, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
		inval(10, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		      page_of(&b, 1)),
		inval(12, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 2),
		      page_of(&b, 3)),
	}, 3);
}

TEST_F(ummunotify, a_second_hit_keeps_the_report_in_its_place)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 0),
				     page_of(&b, 2), 1));
	ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, 2),
				     page_of(&b, 3), 2));
	ASSERT_EQ(0, madvise(page_of(&b, 0), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&b, 2), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&b, 1), page_size, MADV_DONTNEED));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, 0, page_of(&b, 0), page_of(&b, 2)),
		inval(2, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 2),
		      page_of(&b, 3)),
	}, 2);
}

TEST_F(ummunotify, read_blocks_until_an_invalidation)
{
	struct ummunotify_event ev[3], want;
	struct munmap_later later;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, start_munmap_later(&later, b.p, page_size));
	/* Nothing can be read before the munmap(). */
	ASSERT_EQ(EVENTS(2), read(self->f.fd, ev, sizeof(ev)));
	ASSERT_EQ(1, end_when_asleep(&later.w))
		TH_LOG("the waiter never slept");
	want = inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, b.p, page_of(&b, 1));
	expect_event(_metadata, &want, &ev[0], 0);
	want = last(1);
	expect_event(_metadata, &want, &ev[1], 1);
}

TEST_F(ummunotify, a_nonblocking_read_with_nothing_queued_fails_with_eagain)
{
	struct ummunotify_event ev;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, fcntl(self->f.fd, F_SETFL, O_NONBLOCK));
	ASSERT_EQ(-1, read(self->f.fd, &ev, sizeof(ev)));
	ASSERT_EQ(EAGAIN, errno);
}

TEST_F(ummunotify, read_into_a_bad_buffer_fails_with_efault_consuming_nothing)
{
	char *bad = reserve(1);
	struct buf b;

	ASSERT_NE(MAP_FAILED, bad);
	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(-1, read(self->f.fd, bad, 2 * EVENT));
	ASSERT_EQ(EFAULT, errno);
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, b.p, page_of(&b, 1)),
	}, 1);
}

/* Two one-page regions of B, cookies 1 and 2, each invalidated. */
static void two_reports(struct __test_metadata *_metadata, int fd,
			struct buf *b)
{
	size_t i;

	ASSERT_EQ(0, map_buf(b, 2));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, register_region(fd, page_of(b, i),
					     page_of(b, i + 1), 1 + i));
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, madvise(page_of(b, i), page_size, MADV_DONTNEED));
}

/*
 * The 2010 kernel's copy_to_user() faulted the buffer in as it went: a
 * read() whose buffer runs into a page not yet present (or one a fork
 * left copy-on-write) is filled as far as there are events, not cut short
 * at the first page.
 */
TEST_F(ummunotify, a_read_fills_a_buffer_whose_later_page_is_not_present)
{
	struct ummunotify_event *got, want = last(2);
	struct buf b, out;
	size_t i;

	ASSERT_EQ(0, map_buf(&out, 2));
	ASSERT_EQ(0, madvise(page_of(&out, 1), page_size, MADV_DONTNEED));
	/* The first event in the first page, the others in the second. */
	got = (struct ummunotify_event *)(page_of(&out, 1) - EVENT);
	two_reports(_metadata, self->f.fd, &b);
	ASSERT_EQ(EVENTS(3), read(self->f.fd, got, EVENTS(3)));
	expect_event(_metadata, &want, &got[2], 2);
	for (i = 0; i < 2; i++) {
		want = inval(1 + i, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, i),
			     page_of(&b, i + 1));
		expect_event(_metadata, &want, &got[i], i);
	}
}

/* Where the buffer runs into a page it cannot write: the events before. */
TEST_F(ummunotify, a_read_into_a_guard_page_returns_the_events_before_it)
{
	struct ummunotify_event *got, want;
	struct buf b, out;

	/* map_buf() puts a PROT_NONE page after the buffer's one. */
	ASSERT_EQ(0, map_buf(&out, 1));
	got = (struct ummunotify_event *)(page_of(&out, 1) - EVENT);
	two_reports(_metadata, self->f.fd, &b);
	ASSERT_EQ(EVENTS(1), read(self->f.fd, got, EVENTS(3)));
	want = inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		     page_of(&b, 1));
	expect_event(_metadata, &want, got, 0);
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(2, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

TEST_F(ummunotify, reading_a_report_leaves_the_region_registered)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 2), 1));
	ASSERT_EQ(0, madvise(page_of(&b, 0), page_size, MADV_DONTNEED));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 0),
		      page_of(&b, 1)),
	}, 1);
	ASSERT_EQ(0, madvise(page_of(&b, 1), page_size, MADV_DONTNEED));
	ASSERT_EQ(2ULL, counter(&self->f));
	expect_reports(_metadata, &self->f, (struct ummunotify_event[]){
		inval(1, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		      page_of(&b, 2)),
	}, 1);
}

/* poll, select, epoll and SIGIO */

/* poll() revents for every event we might see, without waiting. */
static short poll_now(int fd)
{
	struct pollfd pfd = {
		.fd = fd,
		.events = POLLIN | POLLRDNORM | POLLOUT | POLLPRI,
	};

	return poll(&pfd, 1, 0) < 0 ? -1 : pfd.revents;
}

TEST_F(ummunotify, poll_is_quiet_while_nothing_is_pending)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, poll_now(self->f.fd));
}

TEST_F(ummunotify, poll_is_readable_while_a_report_is_pending)
{
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(POLLIN | POLLRDNORM, poll_now(self->f.fd));
}

TEST_F(ummunotify, poll_is_readable_while_only_the_last_event_is_pending)
{
	struct ummunotify_event ev;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(EVENTS(1), read(self->f.fd, &ev, sizeof(ev)));
	ASSERT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_INVAL, ev.type);
	ASSERT_EQ(POLLIN | POLLRDNORM, poll_now(self->f.fd));
	ASSERT_EQ(EVENTS(1), read(self->f.fd, &ev, sizeof(ev)));
	ASSERT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_LAST, ev.type);
	ASSERT_EQ(0, poll_now(self->f.fd));
}

TEST_F(ummunotify, poll_wakes_up_on_an_invalidation)
{
	struct pollfd pfd = { .fd = self->f.fd, .events = POLLIN };
	struct munmap_later later;
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, start_munmap_later(&later, b.p, page_size));
	ASSERT_EQ(1, poll(&pfd, 1, WAIT_MS));
	ASSERT_EQ(POLLIN, pfd.revents);
	ASSERT_EQ(1, end_when_asleep(&later.w))
		TH_LOG("the waiter never slept");
}

TEST_F(ummunotify, select_wakes_up_on_an_invalidation)
{
	struct timeval tv = { .tv_sec = WAIT_MS / 1000 };
	struct munmap_later later;
	struct buf b;
	fd_set set;

	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, start_munmap_later(&later, b.p, page_size));
	FD_ZERO(&set);
	FD_SET(self->f.fd, &set);
	ASSERT_EQ(1, select(self->f.fd + 1, &set, NULL, NULL, &tv));
	ASSERT_TRUE(FD_ISSET(self->f.fd, &set));
	ASSERT_EQ(1, end_when_asleep(&later.w))
		TH_LOG("the waiter never slept");
}

TEST_F(ummunotify, epoll_wakes_up_on_an_invalidation)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct munmap_later later;
	struct buf b;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->f.fd, &ev));
	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, start_munmap_later(&later, b.p, page_size));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, WAIT_MS));
	ASSERT_EQ((__u32)EPOLLIN, ev.events);
	ASSERT_EQ(1, end_when_asleep(&later.w))
		TH_LOG("the waiter never slept");
	ASSERT_EQ(0, close(ep));
}

/* Blocks SIGIO and asks for it on the file; returns the blocked set. */
static void setup_sigio(struct __test_metadata *_metadata, int fd,
			sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGIO);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, set, NULL));
	ASSERT_EQ(0, fcntl(fd, F_SETOWN, getpid()));
	ASSERT_EQ(0, fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC));
}

TEST_F(ummunotify, fasync_sends_sigio_when_a_report_is_queued)
{
	struct timespec wait = { .tv_sec = WAIT_MS / 1000 };
	struct buf b;
	sigset_t set;

	setup_sigio(_metadata, self->f.fd, &set);
	ASSERT_EQ(0, map_buf(&b, 1));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(b.p, page_size));
	ASSERT_EQ(SIGIO, sigtimedwait(&set, NULL, &wait));
}

TEST_F(ummunotify, fasync_sends_nothing_for_memory_outside_every_region)
{
	struct timespec wait = { .tv_nsec = DELAY_US * 1000 };
	struct buf b;
	sigset_t set;

	setup_sigio(_metadata, self->f.fd, &set);
	ASSERT_EQ(0, map_buf(&b, 2));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 1), 1));
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(-1, sigtimedwait(&set, NULL, &wait));
	ASSERT_EQ(EAGAIN, errno);
}

/* Processes other than the owner */

TEST_F(ummunotify, a_forked_child_is_refused_and_changes_nothing)
{
	struct buf b;
	pid_t pid;

	ASSERT_EQ(0, queue_owner_report(&self->f, &b));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(check_refused(self->f.fd));
	ASSERT_EQ(0, wait_child(pid));
	expect_owner_unchanged(_metadata, &self->f, &b);
}

TEST_F(ummunotify, a_process_sent_the_file_is_refused_and_changes_nothing)
{
	struct buf b;
	int sv[2];
	pid_t pid;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int fd;

		close(self->f.fd);
		fd = recv_fd(sv[1]);
		_exit(fd < 0 ? 100 : check_refused(fd));
	}
	ASSERT_EQ(0, queue_owner_report(&self->f, &b));
	ASSERT_EQ(0, send_fd(sv[0], self->f.fd));
	ASSERT_EQ(0, wait_child(pid));
	expect_owner_unchanged(_metadata, &self->f, &b);
}

TEST_F(ummunotify, the_owner_is_refused_after_execve)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid) {
		struct ufile f;
		char fd[16];
		struct buf b;

		if (ufile_open(&f) || queue_owner_report(&f, &b))
			_exit(100);
		snprintf(fd, sizeof(fd), "%d", f.fd);
		setenv(REFUSED_FD_ENV, fd, 1);
		execl("/proc/self/exe", "ummunotify_test", (char *)NULL);
		_exit(101);
	}
	ASSERT_EQ(0, wait_child(pid));
}

TEST_F(ummunotify, the_owner_can_exit_while_another_process_holds_the_file)
{
	int sv[2], fd;
	pid_t pid;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ufile f;
		struct buf b;

		/* Exits with the file open and a report queued. */
		_exit(ufile_open(&f) || queue_owner_report(&f, &b) ||
		      send_fd(sv[1], f.fd));
	}
	ASSERT_EQ(0, close(sv[1]));
	fd = recv_fd(sv[0]);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, wait_child(pid));
	ASSERT_EQ(0, check_refused(fd));
	ASSERT_EQ(0, close(fd));
}

struct reader {
	const struct ufile *f;
	pid_t tid;
};

static void *read_forever(void *arg)
{
	struct ummunotify_event ev;
	struct reader *r = arg;

	__atomic_store_n(&r->tid, gettid(), __ATOMIC_RELEASE);
	while (read(r->f->fd, &ev, sizeof(ev)) > 0 || errno == EINTR)
		;
	return NULL;
}

TEST_F(ummunotify, the_owner_can_exit_with_regions_and_a_blocked_read)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid) {
		struct reader r = { 0 };
		pthread_t reader;
		struct ufile f;
		struct buf b;

		r.f = &f;
		if (ufile_open(&f) || map_buf(&b, 2) ||
		    register_region(f.fd, b.p, page_of(&b, 1), 1) ||
		    register_region(f.fd, b.p, page_of(&b, 2), 2) ||
		    pthread_create(&reader, NULL, read_forever, &r))
			_exit(1);
		/* Exit only once the read() blocks. */
		while (!__atomic_load_n(&r.tid, __ATOMIC_ACQUIRE))
			sched_yield();
		_exit(wait_asleep(r.tid, WAKER_MS) ? 0 : 2);
	}
	ASSERT_EQ(0, wait_child(pid)) TH_LOG("2: the read() never blocked");
}

/* Threads */

#define VISIBILITY_ROUNDS	64

struct unmapper {
	pthread_t thread;
	const struct buf *b;
	atomic_int go;		/* the round to do */
	atomic_int done;	/* the last round done */
};

static void *unmapper_thread(void *arg)
{
	struct unmapper *u = arg;

	for (int i = 0; i < VISIBILITY_ROUNDS; i++) {
		while (atomic_load(&u->go) != i)
			sched_yield();
		munmap(page_of(u->b, i), page_size);
		atomic_store(&u->done, i);
	}
	return NULL;
}

TEST_F(ummunotify, a_munmap_is_seen_by_other_threads_once_it_returns)
{
	struct unmapper u = { .go = -1, .done = -1 };
	struct buf b;

	ASSERT_EQ(0, map_buf(&b, VISIBILITY_ROUNDS));
	for (int i = 0; i < VISIBILITY_ROUNDS; i++)
		ASSERT_EQ(0, register_region(self->f.fd, page_of(&b, i),
					     page_of(&b, i + 1), i + 1));
	u.b = &b;
	ASSERT_EQ(0, pthread_create(&u.thread, NULL, unmapper_thread, &u));
	for (int i = 0; i < VISIBILITY_ROUNDS; i++) {
		atomic_store(&u.go, i);
		while (atomic_load(&u.done) != i)
			sched_yield();
		ASSERT_EQ((__u64)i + 1, counter(&self->f))
			TH_LOG("round %d", i);
	}
	ASSERT_EQ(0, pthread_join(u.thread, NULL));
}

/*
 * Invalidations by different threads that overlap in time must each move
 * the counter: each thread compares it with the value it read just before.
 * Back-to-back madvise() calls keep both threads inside invalidations most
 * of the time, so that they overlap often.
 */
#define OVERLAP_PAGES	64
#define OVERLAP_SECONDS	1

struct invalidator {
	pthread_t thread;
	const struct ufile *f;
	struct buf b;
	double deadline;
	unsigned long rounds;
	unsigned long missed;	/* rounds that left the counter alone */
	int error;
};

static void *invalidate_until_deadline(void *arg)
{
	struct invalidator *t = arg;
	size_t len = t->b.pages * page_size;

	while (now() < t->deadline) {
		__u64 before = counter(t->f);

		if (madvise(t->b.p, len, MADV_DONTNEED)) {
			t->error = errno;
			break;
		}
		if (counter(t->f) == before)
			t->missed++;
		t->rounds++;
	}
	return NULL;
}

TEST_F(ummunotify, overlapping_invalidations_each_move_the_counter)
{
	struct invalidator t[2] = { 0 };
	double deadline = now() + OVERLAP_SECONDS;

	for (int i = 0; i < 2; i++) {
		t[i].f = &self->f;
		t[i].deadline = deadline;
		ASSERT_EQ(0, map_buf(&t[i].b, OVERLAP_PAGES));
		ASSERT_EQ(0, register_region(self->f.fd, t[i].b.p,
					     page_of(&t[i].b, OVERLAP_PAGES),
					     i + 1));
	}
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&t[i].thread, NULL,
					    invalidate_until_deadline, &t[i]));
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_join(t[i].thread, NULL));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, t[i].error)
			TH_LOG("madvise: %s", strerror(t[i].error));
		ASSERT_LT(0UL, t[i].rounds);
		ASSERT_EQ(0UL, t[i].missed)
			TH_LOG("thread %d: %lu of %lu left the counter alone",
			       i, t[i].missed, t[i].rounds);
	}
	/*
	 * One thread's move can hide another's lost one: each madvise() hits
	 * one region once, so the counter ends at the number of calls.
	 */
	ASSERT_EQ((__u64)(t[0].rounds + t[1].rounds), counter(&self->f));
}

#define MANY_REGIONS	100000
/* A 2 MiB aligned span of the regions: unmapping it splits no huge page. */
#define MANY_HIT_FIRST	49152
#define MANY_HIT_PAGES	1024
#define HUGE_SIZE	(2UL << 20)

TEST_F_TIMEOUT(ummunotify, one_file_holds_100000_regions, 600)
{
	size_t len = MANY_REGIONS * page_size + HUGE_SIZE;
	static bool seen[MANY_HIT_PAGES];
	struct ummunotify_event ev[128];
	char *map, *base, *hit;
	size_t reports = 0;
	bool done = false;

	map = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, madvise(map, len, MADV_NOHUGEPAGE));
	base = (char *)(((uintptr_t)map + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1));
	hit = base + MANY_HIT_FIRST * page_size;
	ASSERT_EQ(0UL, (uintptr_t)hit % HUGE_SIZE);
	ASSERT_EQ(0UL, MANY_HIT_PAGES * page_size % HUGE_SIZE);
	memset(hit, 1, MANY_HIT_PAGES * page_size);

	for (size_t i = 0; i < MANY_REGIONS; i++) {
		ASSERT_EQ(0, register_region(self->f.fd, base + i * page_size,
					     base + (i + 1) * page_size,
					     i + 1))
			TH_LOG("region %zu", i);
	}
	ASSERT_EQ(0, munmap(hit, MANY_HIT_PAGES * page_size));
	/* One per region hit. */
	ASSERT_EQ((__u64)MANY_HIT_PAGES, counter(&self->f));

	while (!done) {
		ssize_t n = read(self->f.fd, ev, sizeof(ev));

		ASSERT_LT(0, n);
		ASSERT_EQ(0, n % EVENTS(1));
		for (ssize_t i = 0; i < n / EVENTS(1); i++) {
			__u64 page = ev[i].user_cookie_counter - 1;
			char *p = base + page * page_size;
			struct ummunotify_event want;

			want = inval(page + 1, UMMUNOTIFY_EVENT_FLAG_HINT, p,
				     p + page_size);

			if (ev[i].type == UMMUNOTIFY_EVENT_TYPE_LAST) {
				want = last(MANY_HIT_PAGES);
				expect_event(_metadata, &want, &ev[i], i);
				ASSERT_EQ(n / EVENTS(1), i + 1);
				done = true;
				break;
			}
			expect_event(_metadata, &want, &ev[i], i);
			ASSERT_LE((__u64)MANY_HIT_FIRST, page);
			ASSERT_GT((__u64)MANY_HIT_FIRST + MANY_HIT_PAGES, page);
			ASSERT_FALSE(seen[page - MANY_HIT_FIRST]);
			seen[page - MANY_HIT_FIRST] = true;
			reports++;
		}
	}
	ASSERT_EQ((size_t)MANY_HIT_PAGES, reports);
	expect_nothing_pending(_metadata, self->f.fd);

	for (size_t i = 0; i < MANY_REGIONS; i++) {
		ASSERT_EQ(0, unregister_region(self->f.fd, i + 1))
			TH_LOG("region %zu", i);
	}
	ASSERT_EQ(0, munmap(map, len));
	ASSERT_EQ((__u64)MANY_HIT_PAGES, counter(&self->f));
	expect_nothing_pending(_metadata, self->f.fd);
}

/*
 * Stress: workers each register a region in a slot of their own, then
 * invalidate the slot (munmap, mmap over it, madvise, mremap away, in turn,
 * each at least STRESS_MIN_CYCLES times) and wait for the report for the
 * region; a noise thread registers and unregisters regions over all the
 * slots meanwhile, and a reader thread reads everything.
 *
 * A report proves a given invalidation was seen only if the read() that
 * returned it began after the invalidation began: a global epoch, bumped
 * by a worker just before it invalidates and sampled by the reader just
 * before each read(), orders the two.  The reader holds a mutex across
 * sampling and read(), and a worker takes it to bump the epoch, so that no
 * read() begins before an invalidation yet returns its report.  The worker
 * bumps it again once the invalidation returned: a read() that began after
 * that and emptied the queue (it ends with LAST, or finds nothing) must
 * have returned the report, or the invalidation was missed.
 */
#define STRESS_WORKERS		2
#define STRESS_SLOT_PAGES	4
#define STRESS_NOISE_REGIONS	16
#define STRESS_NOISE		0x8000000000000000ULL	/* noise cookies */
#define STRESS_DEFAULT_SECONDS	3
/* Past the seconds, until each worker did each operation this often. */
#define STRESS_MIN_CYCLES	2
#define STRESS_OPS		4
/* How long a report may take to reach the reader under emulation. */
#define STRESS_REPORT_SECONDS	30
#define STRESS_ENV		"UMMUNOTIFY_STRESS_SECONDS"

struct stress;

struct stress_worker {
	struct stress *s;
	pthread_t thread;
	unsigned int id;
	char *slot;			/* where its region lives */
	char *scratch;			/* where mremap() moves the slot */
	atomic_ullong cookie;		/* region being checked */
	atomic_ullong start, end;
	atomic_ullong epoch;		/* its invalidation began; 0: not yet */
	atomic_ullong returned;		/* it returned; 0: not yet */
	atomic_bool reported;		/* a report read after it began */
	atomic_ullong gone_cookie;	/* the region last unregistered... */
	atomic_ullong gone_epoch;	/* ...and when that was done */
	unsigned long rounds;
};

struct stress {
	const struct ufile *f;
	char *arena;
	size_t arena_len;
	double deadline;
	atomic_ullong epoch;
	pthread_mutex_t reading;
	atomic_bool stop;
	atomic_bool failed;
	char why[256];
	struct stress_worker w[STRESS_WORKERS];
};

static unsigned int stress_seconds(void)
{
	const char *s = getenv(STRESS_ENV);

	return s && atoi(s) > 0 ? atoi(s) : STRESS_DEFAULT_SECONDS;
}

/* Records the first failure and stops everyone. */
static void *stress_fail(struct stress *s, const char *fmt, ...)
{
	va_list ap;

	if (!atomic_exchange(&s->failed, true)) {
		va_start(ap, fmt);
		vsnprintf(s->why, sizeof(s->why), fmt, ap);
		va_end(ap);
	}
	return NULL;
}

static bool stress_over(struct stress *s)
{
	return atomic_load(&s->failed) || atomic_load(&s->stop);
}

/* Puts PROT_NONE back where a slot was unmapped. */
static int stress_refill(char *p, size_t len)
{
	return mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		    MAP_FIXED_NOREPLACE, -1, 0) == p ? 0 : -errno;
}

static int stress_invalidate(struct stress_worker *w)
{
	size_t len = STRESS_SLOT_PAGES * page_size;

	switch (w->rounds % STRESS_OPS) {
	case 0:
		if (munmap(w->slot, len))
			return -errno;
		return stress_refill(w->slot, len);
	case 1:
		return mmap(w->slot, len, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			    -1, 0) == w->slot ? 0 : -errno;
	case 2:
		return madvise(w->slot, len, MADV_DONTNEED) ? -errno : 0;
	default:
		if (mremap(w->slot, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			   w->scratch) != w->scratch)
			return -errno;
		if (mmap(w->scratch, len, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != w->scratch)
			return -errno;
		return stress_refill(w->slot, len);
	}
}

static void *stress_worker(void *arg)
{
	struct stress_worker *w = arg;
	struct stress *s = w->s;
	size_t len = STRESS_SLOT_PAGES * page_size;
	unsigned int seed = w->id;

	while (!stress_over(s) &&
	       (now() < s->deadline ||
		w->rounds < STRESS_MIN_CYCLES * STRESS_OPS)) {
		__u64 cookie = ((__u64)(w->id + 1) << 32) | w->rounds;
		size_t a = rand_r(&seed) % len;
		size_t b = a + 1 + rand_r(&seed) % (len - a);
		double give_up;
		int ret;

		if (mmap(w->slot, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != w->slot)
			return stress_fail(s, "mmap: %s", strerror(errno));
		memset(w->slot, 1, len);
		/* Before reported, which the reader reads first. */
		atomic_store(&w->returned, 0);
		atomic_store(&w->epoch, 0);
		atomic_store(&w->reported, false);
		atomic_store(&w->start, (uintptr_t)w->slot + a);
		atomic_store(&w->end, (uintptr_t)w->slot + b);
		atomic_store(&w->cookie, cookie);
		ret = register_region(s->f->fd, w->slot + a, w->slot + b,
				      cookie);
		if (ret)
			return stress_fail(s, "register %#llx: %s", cookie,
					   strerror(-ret));

		pthread_mutex_lock(&s->reading);
		atomic_store(&w->epoch, atomic_fetch_add(&s->epoch, 1) + 1);
		pthread_mutex_unlock(&s->reading);
		ret = stress_invalidate(w);
		if (ret)
			return stress_fail(s, "invalidation %lu: %s",
					   w->rounds % STRESS_OPS,
					   strerror(-ret));
		pthread_mutex_lock(&s->reading);
		atomic_store(&w->returned,
			     atomic_fetch_add(&s->epoch, 1) + 1);
		pthread_mutex_unlock(&s->reading);

		give_up = now() + STRESS_REPORT_SECONDS;
		while (!atomic_load(&w->reported)) {
			if (atomic_load(&s->failed))
				return NULL;
			if (now() > give_up)
				return stress_fail(s, "no report for %#llx after invalidation %lu",
						   cookie, w->rounds % STRESS_OPS);
			usleep(1000);
		}

		ret = unregister_region(s->f->fd, cookie);
		if (ret)
			return stress_fail(s, "unregister %#llx: %s", cookie,
					   strerror(-ret));
		atomic_store(&w->gone_cookie, cookie);
		atomic_store(&w->gone_epoch,
			     atomic_fetch_add(&s->epoch, 1) + 1);
		w->rounds++;
	}
	return NULL;
}

static void *stress_noise(void *arg)
{
	__u64 ring[STRESS_NOISE_REGIONS] = { 0 };
	struct stress *s = arg;
	unsigned int seed = 0;
	__u64 n = 0;
	int ret;

	for (; !stress_over(s); n++) {
		__u64 *slot = &ring[n % STRESS_NOISE_REGIONS];
		size_t a = rand_r(&seed) % s->arena_len;
		size_t b = a + 1 + rand_r(&seed) % (s->arena_len - a);

		ret = *slot ? unregister_region(s->f->fd, *slot) : 0;
		if (ret)
			return stress_fail(s, "unregister noise %#llx: %s",
					   *slot, strerror(-ret));
		*slot = STRESS_NOISE | (n + 1);
		ret = register_region(s->f->fd, s->arena + a, s->arena + b,
				      *slot);
		if (ret)
			return stress_fail(s, "register noise %#llx: %s",
					   *slot, strerror(-ret));
	}
	for (size_t i = 0; i < STRESS_NOISE_REGIONS; i++) {
		ret = ring[i] ? unregister_region(s->f->fd, ring[i]) : 0;
		if (ret)
			return stress_fail(s, "unregister noise %#llx: %s",
					   ring[i], strerror(-ret));
	}
	return NULL;
}

/* Checks one event read in a read() that began at epoch r. */
static bool stress_check(struct stress *s, const struct ummunotify_event *ev,
			 __u64 r, __u64 *last_counter)
{
	__u64 c = ev->user_cookie_counter;
	struct stress_worker *w;
	bool hint_ok;

	if (ev->type == UMMUNOTIFY_EVENT_TYPE_LAST) {
		if (c < *last_counter || c > counter(s->f)) {
			stress_fail(s, "LAST %llu after %llu, counter %llu",
				    c, *last_counter, counter(s->f));
			return false;
		}
		*last_counter = c;
		return true;
	}
	if (ev->type != UMMUNOTIFY_EVENT_TYPE_INVAL) {
		stress_fail(s, "event type %u", ev->type);
		return false;
	}
	if (c & STRESS_NOISE)
		return true;
	if ((c >> 32) - 1 >= STRESS_WORKERS) {
		stress_fail(s, "report for unknown cookie %#llx", c);
		return false;
	}
	w = &s->w[(c >> 32) - 1];
	if (c == atomic_load(&w->gone_cookie) &&
	    atomic_load(&w->gone_epoch) <= r) {
		stress_fail(s, "report for %#llx after unregister", c);
		return false;
	}
	if (c != atomic_load(&w->cookie))
		return true;	/* read before it was unregistered */
	if (ev->flags & UMMUNOTIFY_EVENT_FLAG_HINT)
		hint_ok = ev->hint_start >= atomic_load(&w->start) &&
			  ev->hint_end <= atomic_load(&w->end) &&
			  ev->hint_start < ev->hint_end;
	else
		hint_ok = ev->hint_start == atomic_load(&w->start) &&
			  ev->hint_end == atomic_load(&w->end);
	if (ev->flags & ~UMMUNOTIFY_EVENT_FLAG_HINT || !hint_ok) {
		stress_fail(s, "%#llx: flags %#x hint [%#llx, %#llx) of [%#llx, %#llx)",
			    c, ev->flags, ev->hint_start, ev->hint_end,
			    atomic_load(&w->start), atomic_load(&w->end));
		return false;
	}
	if (atomic_load(&w->epoch) && atomic_load(&w->epoch) <= r)
		atomic_store(&w->reported, true);
	return true;
}

/*
 * After a read() that began at epoch R and emptied the queue: a worker
 * whose invalidation returned before R has had its report read.
 */
static bool stress_check_missed(struct stress *s, __u64 r)
{
	for (unsigned int i = 0; i < STRESS_WORKERS; i++) {
		struct stress_worker *w = &s->w[i];
		__u64 returned;

		if (atomic_load(&w->reported))
			continue;
		returned = atomic_load(&w->returned);
		if (returned && returned <= r) {
			stress_fail(s, "missed invalidation %lu of %#llx: no report in a read() begun after it returned",
				    w->rounds % STRESS_OPS,
				    atomic_load(&w->cookie));
			return false;
		}
	}
	return true;
}

static void *stress_reader(void *arg)
{
	struct ummunotify_event ev[64];
	struct stress *s = arg;
	__u64 last_counter = 0;

	while (!stress_over(s)) {
		struct pollfd pfd = { .fd = s->f->fd, .events = POLLIN };
		__u64 r;
		ssize_t n;

		poll(&pfd, 1, 10);
		pthread_mutex_lock(&s->reading);
		r = atomic_load(&s->epoch);
		n = read(s->f->fd, ev, sizeof(ev));
		pthread_mutex_unlock(&s->reading);
		if (n < 0 && errno == EAGAIN) {
			if (!stress_check_missed(s, r))
				return NULL;
			continue;
		}
		if (n <= 0 || n % EVENTS(1))
			return stress_fail(s, "read returned %zd: %s", n,
					   strerror(errno));
		for (ssize_t i = 0; i < n / EVENTS(1); i++)
			if (!stress_check(s, &ev[i], r, &last_counter))
				return NULL;
		if (ev[n / EVENTS(1) - 1].type == UMMUNOTIFY_EVENT_TYPE_LAST &&
		    !stress_check_missed(s, r))
			return NULL;
	}
	return NULL;
}

TEST_F_TIMEOUT(ummunotify, concurrent_threads_miss_no_invalidation,
	       STRESS_DEFAULT_SECONDS + 2 * STRESS_REPORT_SECONDS)
{
	/* Per worker: guard, slot, guard, scratch; a guard at the end. */
	size_t stride = 2 * (STRESS_SLOT_PAGES + 1);
	size_t pages = STRESS_WORKERS * stride + 1;
	struct stress s = {
		.f = &self->f,
		.reading = PTHREAD_MUTEX_INITIALIZER,
	};
	pthread_t noise, reader;

	s.arena = reserve(pages);
	ASSERT_NE(MAP_FAILED, s.arena);
	s.arena_len = pages * page_size;
	s.deadline = now() + stress_seconds();
	ASSERT_EQ(0, fcntl(self->f.fd, F_SETFL, O_NONBLOCK));
	for (unsigned int i = 0; i < STRESS_WORKERS; i++) {
		struct stress_worker *w = &s.w[i];

		w->s = &s;
		w->id = i;
		w->slot = s.arena + (i * stride + 1) * page_size;
		w->scratch = w->slot + (STRESS_SLOT_PAGES + 1) * page_size;
	}
	ASSERT_EQ(0, pthread_create(&reader, NULL, stress_reader, &s));
	ASSERT_EQ(0, pthread_create(&noise, NULL, stress_noise, &s));
	for (unsigned int i = 0; i < STRESS_WORKERS; i++)
		ASSERT_EQ(0, pthread_create(&s.w[i].thread, NULL,
					    stress_worker, &s.w[i]));
	for (unsigned int i = 0; i < STRESS_WORKERS; i++)
		ASSERT_EQ(0, pthread_join(s.w[i].thread, NULL));
	atomic_store(&s.stop, true);
	ASSERT_EQ(0, pthread_join(noise, NULL));
	ASSERT_EQ(0, pthread_join(reader, NULL));

	ASSERT_FALSE(atomic_load(&s.failed)) TH_LOG("%s", s.why);
	for (unsigned int i = 0; i < STRESS_WORKERS; i++) {
		TH_LOG("worker %u: %lu invalidations checked", i,
		       s.w[i].rounds);
		ASSERT_LE((unsigned long)STRESS_MIN_CYCLES * STRESS_OPS,
			  s.w[i].rounds);
	}
}

/* UMMUNOTIFY_STRESS_SECONDS lengthens the test: give it the time. */
static void __attribute__((constructor)) stress_timeout(void)
{
	_ummunotify_concurrent_threads_miss_no_invalidation_object.timeout =
		stress_seconds() + 2 * STRESS_REPORT_SECONDS;
}

/* The five steps of the test program that shipped with the 2010 patches. */
TEST_F(ummunotify, the_2010_test_program_passes)
{
	struct ummunotify_event ev, want;
	__u32 features = 0;
	struct buf b;

	/* 1. Features exchanged; the counter is 0. */
	ASSERT_EQ(0, uioctl(self->f.fd, UMMUNOTIFY_EXCHANGE_FEATURES,
			    &features));
	ASSERT_EQ(0ULL, counter(&self->f));
	/* 2. Three populated read-only pages, registered under 123. */
	ASSERT_EQ(0, map_buf(&b, 3));
	ASSERT_EQ(0, mprotect(b.p, 3 * page_size, PROT_READ));
	ASSERT_EQ(0, register_region(self->f.fd, b.p, page_of(&b, 3), 123));
	/* 3. munmap of the middle page: the counter is exactly 1. */
	ASSERT_EQ(0, munmap(page_of(&b, 1), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
	/* 4. One event at a time: the report, then LAST. */
	ASSERT_EQ(EVENTS(1), read(self->f.fd, &ev, sizeof(ev)));
	want = inval(123, UMMUNOTIFY_EVENT_FLAG_HINT, page_of(&b, 1),
		     page_of(&b, 2));
	expect_event(_metadata, &want, &ev, 0);
	ASSERT_EQ(EVENTS(1), read(self->f.fd, &ev, sizeof(ev)));
	want = last(1);
	expect_event(_metadata, &want, &ev, 1);
	/* 5. Unregistered, a munmap leaves the counter alone. */
	ASSERT_EQ(0, unregister_region(self->f.fd, 123));
	ASSERT_EQ(0, munmap(page_of(&b, 0), page_size));
	ASSERT_EQ(1ULL, counter(&self->f));
}

/*
 * The programs that used the 2010 ABI (see
 * Documentation/userspace-api/ummunotify.rst, "Clients of the 2010 ABI"),
 * each as it uses the device.
 */
#define CLIENT_PAGES	4
#define CLIENT_READS	64

FIXTURE(clients)
{
	struct buf b;
	int fd;
	const volatile __u64 *counter;
};

FIXTURE_SETUP(clients)
{
	ASSERT_EQ(0, map_buf(&self->b, CLIENT_PAGES));
	self->fd = open(DEVICE, O_RDONLY | O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	/* Open MPI maps 8 bytes, not a page. */
	self->counter = mmap(NULL, sizeof(__u64), PROT_READ, MAP_SHARED,
			     self->fd, 0);
	ASSERT_NE(MAP_FAILED, self->counter);
}

FIXTURE_TEARDOWN(clients)
{
	EXPECT_EQ(0, close(self->fd));
}

/*
 * Open MPI 1.5.2-2.0.4: registrations with flags left uninitialised;
 * opal_memory_changed() compares the counter with the last LAST's value
 * and, when it moved, reads up to 128 events at a time, releasing
 * [hint_start, hint_end) of each INVAL, until a LAST matches the counter.
 */
TEST_F(clients, open_mpi_registers_uninitialised_flags_and_drains_in_batches)
{
	static const struct { size_t first, pages; } regs[] = {
		{ 0, 1 }, { 1, 1 }, { 2, 2 },
	};
	struct ummunotify_event ev[128];
	char *released_from[4] = { 0 }, *released_to[4] = { 0 };
	int reads = 0, lasts = 0;
	__u64 seen = 0;

	for (size_t i = 0; i < ARRAY_SIZE(regs); i++) {
		struct ummunotify_register_ioctl r;

		memset(&r, 0xa5, sizeof(r));	/* the stack's garbage */
		r.start = (uintptr_t)page_of(&self->b, regs[i].first);
		r.end = r.start + regs[i].pages * page_size;
		r.user_cookie = i + 1;
		r.reserved = 0;
		ASSERT_EQ(0, uioctl(self->fd, UMMUNOTIFY_REGISTER_REGION, &r));
	}
	ASSERT_EQ(seen, *self->counter);

	/* Cookie 2 once; cookie 3 twice, so its report loses HINT. */
	ASSERT_EQ(0, munmap(page_of(&self->b, 1), page_size));
	ASSERT_EQ(0, madvise(page_of(&self->b, 2), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&self->b, 3), page_size, MADV_DONTNEED));
	ASSERT_NE(seen, *self->counter);

	while (seen != *self->counter) {
		ssize_t n = read(self->fd, ev, sizeof(ev));

		ASSERT_LT(reads++, CLIENT_READS);
		ASSERT_LT(0, n) TH_LOG("read: %s", strerror(errno));
		ASSERT_EQ(0, n % (ssize_t)EVENT);
		for (ssize_t i = 0; i < n / (ssize_t)EVENT; i++) {
			__u64 c = ev[i].user_cookie_counter;

			if (ev[i].type == UMMUNOTIFY_EVENT_TYPE_LAST) {
				seen = c;
				lasts++;
				continue;
			}
			ASSERT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_INVAL, ev[i].type);
			ASSERT_TRUE(c >= 1 && c <= ARRAY_SIZE(regs));
			released_from[c] = (char *)(uintptr_t)ev[i].hint_start;
			released_to[c] = (char *)(uintptr_t)ev[i].hint_end;
		}
	}
	EXPECT_EQ(1, lasts);
	EXPECT_EQ(NULL, released_from[1]);
	/* What the release hook is given covers what changed. */
	EXPECT_EQ(page_of(&self->b, 1), released_from[2]);
	EXPECT_EQ(page_of(&self->b, 2), released_to[2]);
	EXPECT_EQ(page_of(&self->b, 2), released_from[3]);
	EXPECT_EQ(page_of(&self->b, 4), released_to[3]);
	expect_nothing_pending(_metadata, self->fd);
}

/*
 * Portals4: one 32-byte event per read(), exactly; INVALs matched by
 * cookie; after a failed registration it reads until its saved counter
 * equals the kernel's, so a LAST must keep coming while more is queued,
 * even when memory changes as it drains.
 */
TEST_F(clients, portals4_reads_one_event_at_a_time_until_the_counters_match)
{
	struct ummunotify_event ev;
	int seen_cookie[3] = { 0 }, reads = 0;
	bool changed_while_draining = false;
	__u64 saved = 0;

	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, register_region(self->fd, page_of(&self->b, i),
					     page_of(&self->b, i + 1), i + 1));
	ASSERT_EQ(0, madvise(page_of(&self->b, 0), page_size, MADV_DONTNEED));
	ASSERT_EQ(0, madvise(page_of(&self->b, 1), page_size, MADV_DONTNEED));

	while (saved != *self->counter) {
		ASSERT_LT(reads++, CLIENT_READS);
		ASSERT_EQ(EVENTS(1), read(self->fd, &ev, sizeof(ev)))
			TH_LOG("read: %s", strerror(errno));
		if (ev.type == UMMUNOTIFY_EVENT_TYPE_LAST) {
			saved = ev.user_cookie_counter;
			continue;
		}
		ASSERT_TRUE(ev.user_cookie_counter == 1 ||
			    ev.user_cookie_counter == 2);
		seen_cookie[ev.user_cookie_counter]++;
		if (!changed_while_draining) {
			/* Memory changes again before the LAST is read. */
			ASSERT_EQ(0, madvise(page_of(&self->b, 0), page_size,
					     MADV_DONTNEED));
			changed_while_draining = true;
		}
	}
	EXPECT_EQ(saved, *self->counter);
	EXPECT_EQ(3ULL, saved);
	/* Cookie 1 was queued again after its first report was read. */
	EXPECT_LE(1, seen_cookie[1]);
	EXPECT_EQ(1, seen_cookie[2]);
	EXPECT_EQ(3, seen_cookie[1] + seen_cookie[2]);
	expect_nothing_pending(_metadata, self->fd);
}

/*
 * The libfabric zhpe provider: an inclusive end (addr + len - 1) on
 * ranges that need not be page aligned; reads until EAGAIN and ignores
 * LAST.  The byte left out of the watch never matters: its page is
 * watched through the bytes before it.
 */
TEST_F(clients, zhpe_registers_inclusive_unaligned_ends_and_reads_until_eagain)
{
	char *addr = page_of(&self->b, 0) + 100;
	size_t len = 2 * page_size;
	struct ummunotify_event ev[8];
	int invals = 0, reads = 0;
	ssize_t n;

	ASSERT_EQ(0, register_region(self->fd, addr, addr + len - 1, 9));
	/* The last page of the registration, which only part of it covers. */
	ASSERT_EQ(0, madvise(page_of(&self->b, 2), page_size, MADV_DONTNEED));
	ASSERT_EQ(1ULL, *self->counter);
	/* A page outside it. */
	ASSERT_EQ(0, madvise(page_of(&self->b, 3), page_size, MADV_DONTNEED));
	ASSERT_EQ(1ULL, *self->counter);

	while ((n = read(self->fd, ev, sizeof(ev))) > 0) {
		ASSERT_LT(reads++, CLIENT_READS);
		for (ssize_t i = 0; i < n / (ssize_t)EVENT; i++) {
			if (ev[i].type != UMMUNOTIFY_EVENT_TYPE_INVAL)
				continue;
			EXPECT_EQ(9ULL, ev[i].user_cookie_counter);
			EXPECT_EQ((__u32)UMMUNOTIFY_EVENT_FLAG_HINT, ev[i].flags);
			EXPECT_EQ((uintptr_t)page_of(&self->b, 2),
				  ev[i].hint_start);
			EXPECT_EQ((uintptr_t)(addr + len - 1), ev[i].hint_end);
			invals++;
		}
	}
	EXPECT_EQ(-1, n);
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_EQ(1, invals);
}

TEST_HARNESS_MAIN
