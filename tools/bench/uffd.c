// SPDX-License-Identifier: GPL-2.0
/*
 * userfaultfd as libfabric's memory monitor uses it: watched ranges are
 * registered for missing-page faults with UNMAP, REMOVE and REMAP events,
 * and a handler thread reads each event, drops the entries it hits from
 * the cache's index and answers faults with a zero page.  Unwatching only
 * leaves the index (libfabric's unsubscribe does nothing either).  The
 * unmapping thread sleeps until the handler has read its event, not until
 * it has handled it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/userfaultfd.h>

#include "bench.h"

static int uffd = -1;
static int stop_pipe[2] = { -1, -1 };
static pthread_t handler;

static void unregister(uintptr_t start, uintptr_t end)
{
	struct uffdio_range range = { .start = start, .len = end - start };

	ioctl(uffd, UFFDIO_UNREGISTER, &range);
}

static void zero_page(uintptr_t addr)
{
	struct uffdio_zeropage zp = {
		.range = { .start = addr & ~(page - 1), .len = page },
	};

	while (ioctl(uffd, UFFDIO_ZEROPAGE, &zp) && errno == EAGAIN)
		;
}

static void handle(const struct uffd_msg *msg)
{
	switch (msg->event) {
	case UFFD_EVENT_REMOVE:
		/* Later faults there are the kernel's to handle again. */
		unregister(msg->arg.remove.start, msg->arg.remove.end);
		/* fall through */
	case UFFD_EVENT_UNMAP:
		index_invalidate(msg->arg.remove.start, msg->arg.remove.end);
		break;
	case UFFD_EVENT_REMAP:
		index_invalidate(msg->arg.remap.from,
				 msg->arg.remap.from + msg->arg.remap.len);
		break;
	case UFFD_EVENT_PAGEFAULT:
		zero_page(msg->arg.pagefault.address);
		break;
	}
}

static void *handler_main(void *arg)
{
	struct pollfd fds[2] = {
		{ .fd = uffd, .events = POLLIN },
		{ .fd = stop_pipe[0], .events = POLLIN },
	};
	struct uffd_msg msg;

	(void)arg;
	while (poll(fds, 2, -1) >= 0 && !fds[1].revents)
		if (read(uffd, &msg, sizeof(msg)) == sizeof(msg))
			handle(&msg);
	return NULL;
}

static int uffd_open(unsigned int max_entries)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_EVENT_UNMAP |
			    UFFD_FEATURE_EVENT_REMOVE |
			    UFFD_FEATURE_EVENT_REMAP,
	};
	int ret;

	(void)max_entries;
	uffd = syscall(SYS_userfaultfd,
		       O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) || pipe(stop_pipe))
		return -errno;
	ret = pthread_create(&handler, NULL, handler_main, NULL);
	return -ret;
}

static void uffd_close(void)
{
	if (write(stop_pipe[1], "", 1) != 1)
		fail("stopping the handler", -errno);
	pthread_join(handler, NULL);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	close(uffd);
	index_clear();
}

static int uffd_watch(struct region *e)
{
	uintptr_t start = (uintptr_t)e->addr & ~(page - 1);
	struct uffdio_register reg = {
		.range = {
			.start = start,
			.len = (((uintptr_t)e->addr + e->len + page - 1) &
				~(page - 1)) - start,
		},
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	if (!e->len)
		return -EOPNOTSUPP;	/* only mapped memory */
	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		return -errno;
	return index_add(e);
}

static void uffd_unwatch(struct region *e)
{
	index_del(e);
}

const struct backend uffd_backend = {
	.name = "uffd",
	.open = uffd_open,
	.close = uffd_close,
	.watch = uffd_watch,
	.unwatch = uffd_unwatch,
	.valid = stale_valid,
	.check = stale_check,
	.drain = nothing_to_drain,
};
