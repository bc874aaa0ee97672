// SPDX-License-Identifier: GPL-2.0
/*
 * Issue 22, finding 1: removing a watch waits, uninterruptibly, for a
 * moment when no invalidation of the address space is running while one
 * of a watched range is (mmu_interval_notifier_remove()).  A process
 * whose threads keep invalidations overlapping never gives it one.
 *
 * THREADS threads loop madvise(MADV_DONTNEED) over SLICE_MIB slices of a
 * populated MAP_GIB mapping, the first slice over a 2010 REGISTER watch of
 * its first page; the main thread UNREGISTERs the watch and registers it
 * again, for SECONDS.  A watchdog thread reads the main thread's
 * state: should a call not return within BOUND seconds, with the
 * thread in D state, it says so and stops the madvise() threads (which is
 * what lets the removal finish: nothing else can, not even SIGKILL).
 *
 * Exits 0 if every call returned within BOUND, 1 if one did not (the
 * stall reproduced), 2 on a setup error.  It is not in the default test
 * list: it fails until the watch path stops waiting for other threads'
 * invalidations.  The stall needs vCPUs that run at once and enough
 * threads preempted inside their invalidations:
 *
 *   UMMUNOTIFY_TCG_THREAD=multi tools/testing/vm-run -k 6.1.0-57-amd64 \
 *       -m build/6.1.0-57-amd64/ummunotify.ko -- \
 *       build/selftests/dstate_repro [THREADS [BOUND [SECONDS [TOUCH]]]]
 *
 * BOUND defaults to 30 s, SECONDS to 120: a stall reproduced ends before
 * the hung-task detector's 120 s (vm-run's guests panic then).
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

#define MAP_GIB		1UL
#define SLICE_MIB	64UL

static char *map;
static size_t map_len, slice_len;
static atomic_bool stop;
static atomic_bool in_call;
static atomic_long zaps;
static pid_t main_tid;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Zap the slice, again and again: each call walks its page tables, an
 * invalidation long enough to be preempted in.  With TOUCH, a page in 64
 * is populated again first, so that each call frees pages too.
 */
static bool touch;

static void *zapper(void *arg)
{
	char *slice = map + (size_t)arg % (map_len / slice_len) * slice_len;
	size_t step = 64 * (size_t)getpagesize();

	while (!atomic_load(&stop)) {
		for (size_t off = 0; touch && off < slice_len; off += step)
			slice[off] = 1;
		madvise(slice, slice_len, MADV_DONTNEED);
		atomic_fetch_add(&zaps, 1);
	}
	return NULL;
}

/* The state letter of /proc/self/task/TID/stat, or '?'. */
static char task_state(pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return '?';
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	p = p ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' ? p[2] : '?';
}

struct watchdog {
	double bound;
	double call_start;	/* of the call running, under in_call */
	double longest_d;	/* longest time seen in D state in one call */
	bool stalled;
};

static void *watchdog(void *arg)
{
	struct watchdog *w = arg;
	double d_since = 0;

	while (!atomic_load(&stop)) {
		usleep(10000);
		if (!atomic_load(&in_call)) {
			d_since = 0;
			continue;
		}
		if (task_state(main_tid) != 'D') {
			d_since = 0;
			continue;
		}
		if (!d_since)
			d_since = now();
		if (now() - d_since > w->longest_d)
			w->longest_d = now() - d_since;
		if (now() - w->call_start > w->bound) {
			w->stalled = true;
			printf("# the call still in D state after %.1f s (%.1f s in D): stopping the madvise() threads\n",
			       now() - w->call_start, now() - d_since);
			fflush(stdout);
			atomic_store(&stop, true);
		}
	}
	return NULL;
}

/* A call the watchdog watches: -1 with errno set, 0, or 1 when it stalled. */
static const char *longest_call = "none";

static int watched_ioctl(struct watchdog *w, int fd, unsigned long req,
			 void *arg, double *longest)
{
	double took;
	int ret;

	w->call_start = now();
	atomic_store(&in_call, true);
	ret = ioctl(fd, req, arg);
	atomic_store(&in_call, false);
	took = now() - w->call_start;
	if (took > *longest) {
		*longest = took;
		longest_call = req == UMMUNOTIFY_REGISTER_REGION ?
			       "REGISTER" : "UNREGISTER";
	}
	return ret ? ret : w->stalled;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 200;
	struct watchdog w = { .bound = argc > 2 ? atof(argv[2]) : 30 };
	double seconds = argc > 3 ? atof(argv[3]) : 120;
	struct sched_param fifo = { .sched_priority = 1 };
	pthread_attr_t attr;
	struct ummunotify_register_ioctl reg = { 0 };
	double longest = 0, start;
	pthread_t *tids, dog;
	__u64 cookie = 1;
	int fd, i, rounds, ret = 0;

	touch = argc > 4 && atoi(argv[4]);
	main_tid = syscall(SYS_gettid);
	map_len = MAP_GIB << 30;
	slice_len = SLICE_MIB << 20;
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	fd = open("/dev/ummunotify", O_RDONLY);
	tids = calloc(threads, sizeof(*tids));
	if (map == MAP_FAILED || fd < 0 || !tids) {
		perror("setup");
		return 2;
	}
	reg.start = (unsigned long)map;
	reg.end = reg.start + getpagesize();
	reg.user_cookie = cookie;
	if (ioctl(fd, UMMUNOTIFY_REGISTER_REGION, &reg)) {
		perror("REGISTER");
		return 2;
	}
	for (i = 0; i < threads; i++)
		if (pthread_create(&tids[i], NULL, zapper, (void *)(long)i)) {
			perror("pthread_create");
			return 2;
		}
	/* Real-time, so that the busy threads cannot keep it from looking. */
	pthread_attr_init(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
	pthread_attr_setschedparam(&attr, &fifo);
	if (pthread_create(&dog, &attr, watchdog, &w)) {
		perror("pthread_create");
		return 2;
	}
	/* Every thread in its loop. */
	sleep(1);
	printf("# %d threads, %lu MiB slices of %lu GiB%s, bound %.0f s\n",
	       threads, SLICE_MIB, MAP_GIB, touch ? " touched" : "", w.bound);
	start = now();
	for (rounds = 0; now() - start < seconds && !ret; rounds++) {
		ret = watched_ioctl(&w, fd, UMMUNOTIFY_UNREGISTER_REGION,
				    &cookie, &longest);
		if (!ret)
			ret = watched_ioctl(&w, fd, UMMUNOTIFY_REGISTER_REGION,
					    &reg, &longest);
	}
	if (ret < 0)
		perror("UNREGISTER or REGISTER");
	atomic_store(&stop, true);
	for (i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);
	pthread_join(dog, NULL);
	printf("# %d rounds of UNREGISTER and REGISTER, the longest call %.3f s (a %s), the longest time in D state in one call %.3f s, %ld madvise() calls\n",
	       rounds, longest, longest_call, w.longest_d,
	       atomic_load(&zaps));
	if (ret < 0)
		return 2;
	printf("%s: %s\n", w.stalled ? "FAIL" : "ok",
	       w.stalled ? "a call was held in D state past the bound" :
			   "every call returned within the bound");
	return w.stalled;
}
