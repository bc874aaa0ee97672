// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The 2010 ABI as a source of reports: REGISTER_REGION and
 * UNREGISTER_REGION by cookie, the counter page at offset 0, and read()
 * of INVAL events up to the LAST one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "internal.h"

/* umn_kernel_setup() opened u->fd and granted no features. */
static int legacy_open(struct umn *u)
{
	size_t len = sysconf(_SC_PAGESIZE);
	void *counter = mmap(NULL, len, PROT_READ, MAP_SHARED, u->fd, 0);
	int ret;

	if (counter == MAP_FAILED)
		return -errno;
	ret = umn__add_map(u, counter, len, PROT_READ, false);
	if (ret) {
		munmap(counter, len);
		return ret;
	}
	u->counter = counter;
	return 0;
}

static int legacy_add(struct umn *u, uint64_t cookie, uint64_t start,
		      uint64_t end)
{
	struct ummunotify_register_ioctl arg = {
		.start = start,
		.end = end,
		.user_cookie = cookie,
	};

	/*
	 * The 2010 ABI has no whole-space watch, and its one report per
	 * registration would not say what changed.
	 */
	if (start == end)
		return -EOPNOTSUPP;
	return umn__ioctl_restart(u->fd, UMMUNOTIFY_REGISTER_REGION, &arg);
}

static int legacy_remove(struct umn *u, uint64_t cookie)
{
	return ioctl(u->fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie) ? -errno : 0;
}

/*
 * Read until the kernel has nothing left: a short read ends with the
 * LAST event, after which every new report moves the counter again.
 */
static int legacy_pull(struct umn *u)
{
	struct ummunotify_event events[64];
	ssize_t len, i;

	for (;;) {
		len = read(u->fd, events, sizeof(events));
		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0)
			return errno == EAGAIN ? 0 : -errno;
		for (i = 0; i < len / (ssize_t)sizeof(events[0]); i++)
			if (events[i].type == UMMUNOTIFY_EVENT_TYPE_INVAL)
				umn__report(u, events[i].user_cookie_counter,
					    events[i].hint_start,
					    events[i].hint_end,
					    UMN_CAUSE_UNKNOWN);
		if (len < (ssize_t)sizeof(events))
			return 0;
	}
}

const struct umn_source umn__legacy_source = {
	.open = legacy_open,
	.add = legacy_add,
	.remove = legacy_remove,
	.pull = legacy_pull,
};
