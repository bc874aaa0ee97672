// SPDX-License-Identifier: GPL-2.0
/*
 * The test program that shipped with ummunotify in 2010, written again from
 * its description: a program of that time, built against the installed
 * <linux/ummunotify.h>, must build and pass unchanged.  One line per step;
 * exits 0 on success, 1 on failure, 4 (skip) without /dev/ummunotify.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <linux/ummunotify.h>

#define COOKIE	123

static void fail(int step, const char *fmt, ...)
{
	va_list ap;

	printf("step %d: FAILED: ", step);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

/* The kernel updates it behind the compiler's back. */
static __u64 read_counter(const __u64 *counter)
{
	return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}

int main(void)
{
	struct ummunotify_register_ioctl r = { 0 };
	long page = sysconf(_SC_PAGESIZE);
	struct ummunotify_event ev;
	const __u64 *counter;
	__u64 cookie = COOKIE;
	__u32 features = 0;
	char *p;
	int fd;

	fd = open("/dev/ummunotify", O_RDONLY);
	if (fd < 0 && errno == ENOENT) {
		printf("step 1: SKIP: no /dev/ummunotify\n");
		return 4;
	}
	if (fd < 0)
		fail(1, "open: %s", strerror(errno));
	if (ioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features))
		fail(1, "EXCHANGE_FEATURES: %s", strerror(errno));
	counter = mmap(NULL, sizeof(*counter), PROT_READ, MAP_SHARED, fd, 0);
	if (counter == MAP_FAILED)
		fail(1, "mmap of the counter: %s", strerror(errno));
	if (read_counter(counter) != 0)
		fail(1, "counter %llu, expected 0", read_counter(counter));
	printf("step 1: opened, features %#x granted, counter 0\n", features);

	p = mmap(NULL, 3 * page, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		fail(2, "mmap: %s", strerror(errno));
	r.start = (uintptr_t)p;
	r.end = (uintptr_t)(p + 3 * page);
	r.user_cookie = COOKIE;
	if (ioctl(fd, UMMUNOTIFY_REGISTER_REGION, &r))
		fail(2, "REGISTER_REGION: %s", strerror(errno));
	printf("step 2: 3 pages registered under cookie %d\n", COOKIE);

	if (munmap(p + page, page))
		fail(3, "munmap: %s", strerror(errno));
	if (read_counter(counter) != 1)
		fail(3, "counter %llu, expected 1", read_counter(counter));
	printf("step 3: middle page unmapped, counter 1\n");

	if (read(fd, &ev, sizeof(ev)) != sizeof(ev))
		fail(4, "read: %s", strerror(errno));
	if (ev.type != UMMUNOTIFY_EVENT_TYPE_INVAL ||
	    ev.user_cookie_counter != COOKIE ||
	    ev.flags != UMMUNOTIFY_EVENT_FLAG_HINT ||
	    ev.hint_start != (uintptr_t)(p + page) ||
	    ev.hint_end != (uintptr_t)(p + 2 * page))
		fail(4, "event type %u flags %#x hint [%#llx, %#llx) cookie %llu",
		     ev.type, ev.flags, ev.hint_start, ev.hint_end,
		     ev.user_cookie_counter);
	if (read(fd, &ev, sizeof(ev)) != sizeof(ev))
		fail(4, "read: %s", strerror(errno));
	if (ev.type != UMMUNOTIFY_EVENT_TYPE_LAST ||
	    ev.user_cookie_counter != 1)
		fail(4, "event type %u counter %llu, expected LAST with 1",
		     ev.type, ev.user_cookie_counter);
	printf("step 4: INVAL for cookie %d with the middle page, then LAST\n",
	       COOKIE);

	if (ioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie))
		fail(5, "UNREGISTER_REGION: %s", strerror(errno));
	if (munmap(p, page))
		fail(5, "munmap: %s", strerror(errno));
	if (read_counter(counter) != 1)
		fail(5, "counter %llu, expected 1", read_counter(counter));
	printf("step 5: unregistered, munmap not counted, counter 1\n");
	return 0;
}
