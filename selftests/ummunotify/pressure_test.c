// SPDX-License-Identifier: GPL-2.0
/*
 * Memory-pressure advisories: a file granted UMMUNOTIFY_FEATURE_PRESSURE
 * gets a PRESSURE ring event when reclaim in its memory cgroup asks the
 * module for the pages the file watches; files in other cgroups and files
 * that did not ask get none.
 *
 * Runs as root in a guest: it creates a cgroup v2 group with a memory
 * limit and has the kernel reclaim in it (memory.reclaim, or before 5.19
 * a lowered memory.high, runs the reclaim a cgroup at its limit runs,
 * without the throttling that makes reaching the limit take seconds per
 * page under emulation).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "kselftest_harness.h"
#include "sysfile.h"

#define CGROUP_ROOT	"/sys/fs/cgroup"
#define CGROUP		CGROUP_ROOT "/ummunotify-pressure"
#define INTERVAL_PARAM	"/sys/module/ummunotify/parameters/pressure_interval_ms"
#define WATCHED		(1UL << 30)	/* 1 GiB: reclaim asks for a share */

struct ring {
	int fd;
	struct ummunotify_params params;
	char *area;
	__u64 *head;
};

/*
 * Open a file with watches and a ring, asking for @features too; returns
 * the features granted beyond those two.
 */
static __u32 ring_open(struct ring *r, __u32 features)
{
	const __u32 base = UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING;
	__u32 granted = base | features;

	r->fd = open("/dev/ummunotify", O_RDWR);
	if (r->fd < 0 ||
	    ioctl(r->fd, UMMUNOTIFY_EXCHANGE_FEATURES, &granted) ||
	    ioctl(r->fd, UMMUNOTIFY_SETUP, &r->params))
		return 0;
	r->area = mmap(NULL, r->params.mmap_size, PROT_READ, MAP_SHARED,
		       r->fd, 0);
	r->head = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE,
		       MAP_SHARED, r->fd, r->params.head_offset);
	if (r->area == MAP_FAILED || r->head == MAP_FAILED ||
	    (granted & base) != base)
		return 0;
	return granted & ~base;
}

static int ring_watch(struct ring *r, void *addr, size_t len, __u64 cookie)
{
	struct ummunotify_watch w = {
		.start = (unsigned long)addr,
		.end = (unsigned long)addr + len,
		.user_cookie = cookie,
	};

	return ioctl(r->fd, UMMUNOTIFY_WATCH, &w);
}

/* Consume the ring; return the number of PRESSURE events, their bytes. */
static int ring_pressure(struct ring *r, __u64 *bytes)
{
	__u64 tail = __atomic_load_n((__u64 *)(r->area + r->params.off.tail),
				     __ATOMIC_ACQUIRE);
	__u32 mask = r->params.ring_entries - 1;
	struct ummunotify_ring_event *ev;
	int n = 0;

	*bytes = 0;
	for (__u64 pos = *r->head; pos != tail; pos++) {
		ev = (void *)(r->area + r->params.off.events) +
		     (pos & mask) * sizeof(*ev);
		if (ev->cause == UMMUNOTIFY_CAUSE_PRESSURE) {
			n++;
			*bytes += ev->generation;
		}
	}
	__atomic_store_n(r->head, tail, __ATOMIC_RELEASE);
	return n;
}

/*
 * The 6.1 harness runs the test body after a SKIP in FIXTURE_SETUP, and
 * no teardown after a failed ASSERT there: the setup only records what
 * the teardown restores, and the test itself changes the system.
 */
FIXTURE(pressure) {
	char saved_interval[32];
	bool made_cgroup;
};

FIXTURE_SETUP(pressure)
{
	ASSERT_EQ(0, read_file(INTERVAL_PARAM, self->saved_interval,
			       sizeof(self->saved_interval)));
}

FIXTURE_TEARDOWN(pressure)
{
	EXPECT_EQ(0, write_file(INTERVAL_PARAM, self->saved_interval));
	if (self->made_cgroup)
		EXPECT_EQ(0, rmdir(CGROUP));
}

/* A child cgroup with the memory controller; false if there is none. */
static bool make_cgroup(void)
{
	char controllers[256];

	if (access(CGROUP_ROOT "/cgroup.controllers", F_OK) &&
	    mount("none", CGROUP_ROOT, "cgroup2", 0, NULL))
		return false;
	if (read_file(CGROUP_ROOT "/cgroup.controllers", controllers,
		      sizeof(controllers)) || !strstr(controllers, "memory"))
		return false;
	return !write_file(CGROUP_ROOT "/cgroup.subtree_control", "+memory") &&
	       (!mkdir(CGROUP, 0755) || errno == EEXIST);
}

/*
 * Have the kernel reclaim @bytes in CGROUP; 0, or -1 with errno (EAGAIN:
 * it found less to free, having asked the shrinkers all the same).
 * memory.reclaim is new in 5.19; before it, a write of memory.high below
 * the usage runs the same loop of memcg reclaim in the writer until the
 * usage is under it or nothing more is freed, and writing the old limit
 * back ends it.  Nothing is opened or touched while the limit is low: a
 * charge above memory.high would have the caller throttled on its way
 * back to user space.
 */
static int reclaim_in_cgroup(unsigned long bytes)
{
	char text[32], high[32], usage[32];
	unsigned long used;
	int fd, ret, err;

	snprintf(text, sizeof(text), "%lu", bytes);
	if (!write_file(CGROUP "/memory.reclaim", text))
		return 0;
	if (errno != ENOENT)
		return -1;
	if (read_file(CGROUP "/memory.high", high, sizeof(high)) ||
	    read_file(CGROUP "/memory.current", usage, sizeof(usage)))
		return -1;
	fd = open(CGROUP "/memory.high", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	used = strtoul(usage, NULL, 10);
	snprintf(text, sizeof(text), "%lu", used > bytes ? used - bytes : 0);
	ret = pwrite(fd, text, strlen(text), 0) < 0 ? -1 : 0;
	err = errno;
	if (pwrite(fd, high, strlen(high), 0) < 0) {
		ret = -1;
		err = errno;
	}
	close(fd);
	errno = err;
	return ret;
}

/*
 * In a child inside the cgroup: a file with PRESSURE and one without,
 * both watching 1 GiB; reclaim in the cgroup.  Exit status: 0 if only the
 * first got a PRESSURE event, and for no more than it watches.
 */
static int child_under_pressure(void *watched)
{
	struct ring asked = { 0 }, silent = { 0 };
	__u64 bytes, ignored;
	char pid[32];

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (write_file(CGROUP "/cgroup.procs", pid) ||
	    write_file(CGROUP "/memory.max", "268435456"))
		return 10;
	/* Open after moving: a file belongs to its opener's cgroup. */
	if (ring_open(&asked, UMMUNOTIFY_FEATURE_PRESSURE) !=
	    UMMUNOTIFY_FEATURE_PRESSURE)
		return 11;
	if (ring_open(&silent, 0) != 0 || silent.fd < 0)
		return 12;
	if (ring_watch(&asked, watched, WATCHED, 1) ||
	    ring_watch(&silent, watched, WATCHED, 1))
		return 13;

	/* EAGAIN: it found too little to free; it asked us all the same. */
	if (reclaim_in_cgroup(64UL << 20) && errno != EAGAIN)
		return 17;

	if (ring_pressure(&asked, &bytes) != 1)
		return 14;
	if (bytes == 0 || bytes > WATCHED)
		return 15;
	if (ring_pressure(&silent, &ignored) != 0)
		return 16;
	return 0;
}

TEST_F(pressure, reclaim_in_a_cgroup_reaches_only_its_files_that_asked)
{
	struct ring outside = { 0 };	/* in the parent's cgroup */
	void *watched;
	__u64 bytes;
	pid_t pid;
	int status;

	self->made_cgroup = make_cgroup();
	if (!self->made_cgroup)
		SKIP(return, "no cgroup v2 memory controller");
	/* At most one event each while the test runs. */
	ASSERT_EQ(0, write_file(INTERVAL_PARAM, "600000"));
	watched = mmap(NULL, WATCHED, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, watched);
	ASSERT_EQ(UMMUNOTIFY_FEATURE_PRESSURE,
		  ring_open(&outside, UMMUNOTIFY_FEATURE_PRESSURE));
	ASSERT_EQ(0, ring_watch(&outside, watched, WATCHED, 1));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_under_pressure(watched));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* The parent's file is in another cgroup: nothing asked of it. */
	EXPECT_EQ(0, ring_pressure(&outside, &bytes));
	close(outside.fd);
}

/* Pages resident in the calling process, from /proc/self/statm. */
static unsigned long resident_bytes(void)
{
	unsigned long size, resident;
	char statm[128];

	if (read_file("/proc/self/statm", statm, sizeof(statm)) ||
	    sscanf(statm, "%lu %lu", &size, &resident) != 2)
		return 0;
	return resident * getpagesize();
}

/*
 * In a child inside the cgroup: a file with PRESSURE watching all of user
 * space but its first page (not WATCH_ALL, which pressure ignores), and
 * reclaim in the cgroup.  Exit status: 0 if memory.reclaim returned
 * within a second and the event asked for no more than is resident.
 */
static int child_watching_all_of_user_space(void)
{
	struct ring r = { 0 };
	struct timespec start, end;
	__u64 bytes, resident;
	char pid[32];
	double took;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (write_file(CGROUP "/cgroup.procs", pid) ||
	    write_file(CGROUP "/memory.max", "268435456"))
		return 10;
	if (ring_open(&r, UMMUNOTIFY_FEATURE_PRESSURE) !=
	    UMMUNOTIFY_FEATURE_PRESSURE)
		return 11;
	if (ring_watch(&r, (void *)4096, 0x7ffffffff000UL - 4096, 1))
		return 12;
	resident = resident_bytes();
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (reclaim_in_cgroup(64UL << 20) && errno != EAGAIN)
		return 13;
	clock_gettime(CLOCK_MONOTONIC, &end);
	took = end.tv_sec - start.tv_sec + (end.tv_nsec - start.tv_nsec) / 1e9;
	if (took >= 1.0)
		return 14;
	if (ring_pressure(&r, &bytes) != 1)
		return 15;
	if (bytes == 0 || bytes > resident + (1 << 20))
		return 16;
	return 0;
}

/*
 * The module's share of reclaim is memory that exists: before the fix it
 * was the 2^35 pages a watch covers, mapped or not, and a scan never said
 * it was done, so that memory.reclaim in the cgroup (and kswapd, and
 * global reclaim) did not come back.
 */
TEST_F(pressure, reclaim_returns_promptly_with_a_watch_of_all_user_space)
{
	struct timespec start;
	int status = 0;
	pid_t pid;

	self->made_cgroup = make_cgroup();
	ASSERT_TRUE(self->made_cgroup) TH_LOG("no cgroup v2 memory controller");
	ASSERT_EQ(0, write_file(INTERVAL_PARAM, "600000"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_watching_all_of_user_space());
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!waitpid(pid, &status, WNOHANG)) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		/* A child stuck in reclaim cannot be killed: leave it. */
		ASSERT_GT(10, now.tv_sec - start.tv_sec)
			TH_LOG("memory.reclaim has not returned in 10 s");
		usleep(10000);
	}
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/*
 * Many files in one cgroup, all of one process, watching the same
 * populated 64 MiB: a reclaim call looks at a bounded number of them, so
 * it costs about what it costs with a few, and together they count the
 * process's memory once.  Before the fix every call walked every file
 * three times under the list's spinlock (seconds at a few thousand
 * files), and each file counted the whole RSS.  The bound is relative,
 * so that a slow (debug, emulated) kernel scales both alike: a call with
 * many files looks at 32 of them, with few at 8, hence 4 times, and 1 s
 * of slack.
 */
#define FEW_FILES	8
#define MANY_FILES	8000
#define MANY_WATCHED	(64UL << 20)	/* a few pages for each */
#define PAGES_PARAM	"/sys/module/ummunotify/parameters/max_user_pages"
/* Their watches stack up: as many over each page as there are files. */
#define OVERLAP_PARAM	"/sys/module/ummunotify/parameters/max_overlap"

/*
 * Three calls asking the cgroup for 1 MiB back, the fastest one's seconds
 * in *took (one stall of a loaded host is not the module's cost); the
 * rings of files r[0, n) keep only the last call's events.
 */
static int reclaim_seconds(struct ring *r, int n, double *took)
{
	struct timespec start, end;
	__u64 bytes;
	double t;

	*took = 1e9;
	for (int call = 0; call < 3; call++) {
		for (int i = 0; call && i < n; i++)
			ring_pressure(&r[i], &bytes);
		clock_gettime(CLOCK_MONOTONIC, &start);
		if (reclaim_in_cgroup(1UL << 20) && errno != EAGAIN)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &end);
		t = end.tv_sec - start.tv_sec +
		    (end.tv_nsec - start.tv_nsec) / 1e9;
		if (t < *took)
			*took = t;
	}
	return 0;
}

static int child_with_many_files(void)
{
	struct rlimit nofile = { MANY_FILES + 64, MANY_FILES + 64 };
	__u64 bytes, total = 0, resident;
	static struct ring r[MANY_FILES];
	double few = 0, many;
	char pid[32], *buf;
	int i, j;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (setrlimit(RLIMIT_NOFILE, &nofile) ||
	    write_file(CGROUP "/cgroup.procs", pid) ||
	    write_file(CGROUP "/memory.max", "1073741824"))
		return 10;
	buf = mmap(NULL, MANY_WATCHED, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED)
		return 11;
	for (i = 0; i < MANY_FILES; i++) {
		r[i].params.slots = 512;
		r[i].params.ring_entries = 64;
		if (ring_open(&r[i], UMMUNOTIFY_FEATURE_PRESSURE) !=
		    UMMUNOTIFY_FEATURE_PRESSURE ||
		    ring_watch(&r[i], buf, MANY_WATCHED, 1))
			return 12;
		if (i + 1 != FEW_FILES)
			continue;
		if (reclaim_seconds(r, FEW_FILES, &few))
			return 13;
		/* What the next call asks is counted alone. */
		for (j = 0; j < FEW_FILES; j++)
			ring_pressure(&r[j], &bytes);
	}
	resident = resident_bytes();
	if (reclaim_seconds(r, MANY_FILES, &many))
		return 13;
	fprintf(stderr, "# memory.reclaim with %d files: %.3f s, with %d: %.3f s\n",
		FEW_FILES, few, MANY_FILES, many);
	if (many > 4 * few + 1.0)
		return 14;
	for (i = 0; i < MANY_FILES; i++) {
		ring_pressure(&r[i], &bytes);
		total += bytes;
	}
	if (!total || total > resident)
		return 15;
	return 0;
}

TEST_F_TIMEOUT(pressure, a_reclaim_call_costs_the_same_with_many_files, 300)
{
	char pages[32], overlap[32], stack[32];
	pid_t pid;
	int status;

	self->made_cgroup = make_cgroup();
	ASSERT_TRUE(self->made_cgroup) TH_LOG("no cgroup v2 memory controller");
	ASSERT_EQ(0, read_file(PAGES_PARAM, pages, sizeof(pages)));
	ASSERT_EQ(0, read_file(OVERLAP_PARAM, overlap, sizeof(overlap)));
	ASSERT_EQ(0, write_file(PAGES_PARAM, "1000000"));
	snprintf(stack, sizeof(stack), "%d", MANY_FILES);
	ASSERT_EQ(0, write_file(OVERLAP_PARAM, stack));
	ASSERT_EQ(0, write_file(INTERVAL_PARAM, "0"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(child_with_many_files());
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, write_file(PAGES_PARAM, pages));
	EXPECT_EQ(0, write_file(OVERLAP_PARAM, overlap));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_F(pressure, is_granted_only_with_the_ring)
{
	__u32 features = UMMUNOTIFY_FEATURE_PRESSURE;
	int fd = open("/dev/ummunotify", O_RDONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features));
	EXPECT_EQ(0U, features);
	close(fd);
}

TEST_HARNESS_MAIN
