// SPDX-License-Identifier: GPL-2.0
/*
 * ummunotify's 2010 ABI, as a cache uses it: while the mapped counter
 * equals the one the last LAST event carried, nothing changed; otherwise
 * read() the reports and mark their entries (the cookie is the entry).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "bench.h"

#define BATCH		256
/* TASK_SIZE with 4-level page tables: all a process maps by default. */
#define USER_END	0x7ffffffff000ULL

static int fd = -1;
static const uint64_t *counter;
static uint64_t seen;
/* Serialises reading with unregistering: no report outlives its entry. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int legacy_open(unsigned int max_entries)
{
	(void)max_entries;
	seen = 0;
	fd = open("/dev/ummunotify", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	counter = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
	return counter == MAP_FAILED ? -errno : 0;
}

static void legacy_close(void)
{
	munmap((void *)counter, page);
	close(fd);
}

static int legacy_watch(struct region *e)
{
	struct ummunotify_register_ioctl r = {
		.start = (uintptr_t)e->addr,
		.end = e->len ? (uintptr_t)e->addr + e->len : USER_END,
		.user_cookie = (uintptr_t)e,
	};
	int ret;

	pthread_mutex_lock(&lock);
	ret = ioctl(fd, UMMUNOTIFY_REGISTER_REGION, &r) ? -errno : 0;
	pthread_mutex_unlock(&lock);
	return ret;
}

static void legacy_unwatch(struct region *e)
{
	__u64 cookie = (uintptr_t)e;
	int ret;

	pthread_mutex_lock(&lock);
	ret = ioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie) ? -errno : 0;
	pthread_mutex_unlock(&lock);
	if (ret)
		fail("UMMUNOTIFY_UNREGISTER_REGION", ret);
}

static bool counter_moved(void)
{
	return __atomic_load_n(counter, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&seen, __ATOMIC_ACQUIRE);
}

/*
 * Reads every pending report.  With the lock held, an empty queue means
 * every report counted up to the value loaded first has been handled:
 * that value becomes "seen", unless a LAST event brought a newer one.
 */
static unsigned long read_reports(void)
{
	struct ummunotify_event ev[BATCH];
	unsigned long reports = 0;
	uint64_t now;
	ssize_t len;
	size_t i;

	pthread_mutex_lock(&lock);
	now = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
	while ((len = read(fd, ev, sizeof(ev))) > 0) {
		for (i = 0; i < len / sizeof(*ev); i++) {
			if (ev[i].type == UMMUNOTIFY_EVENT_TYPE_LAST) {
				now = ev[i].user_cookie_counter;
				continue;
			}
			region_set_stale((struct region *)(uintptr_t)
					ev[i].user_cookie_counter);
			reports++;
		}
	}
	if (errno != EAGAIN)
		fail("read reports", -errno);
	__atomic_store_n(&seen, now, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return reports;
}

/* Reports are merged, never lost. */
static unsigned long legacy_drain(unsigned long *lost)
{
	(void)lost;
	return counter_moved() ? read_reports() : 0;
}

static void legacy_hammer(void)
{
	read_reports();
}

static inline bool legacy_valid(struct region *e)
{
	if (counter_moved())
		legacy_drain(NULL);
	return !region_stale(e);
}

static unsigned long legacy_check(struct region *e, unsigned long n)
{
	unsigned long i;

#pragma GCC unroll 8
	for (i = 0; i < n; i++)
		if (!legacy_valid(e))
			break;
	return i;
}

const struct backend legacy_backend = {
	.name = "legacy",
	.open = legacy_open,
	.close = legacy_close,
	.watch = legacy_watch,
	.unwatch = legacy_unwatch,
	.valid = legacy_valid,
	.check = legacy_check,
	.drain = legacy_drain,
	.hammer = legacy_hammer,
};
