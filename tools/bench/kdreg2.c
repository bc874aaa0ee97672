// SPDX-License-Identifier: GPL-2.0
/*
 * HPE's kdreg2 (github.com/HewlettPackard/shs-kdreg2), built only when
 * "make bench KDREG2=DIR" names a kdreg2 tree whose kdreg2.ko is built
 * for the guest's kernel: the same work with the other kernel monitor, in
 * the same run.  A generation per region checked in mapped memory, like
 * the native ABI; events by read().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <kdreg2.h>

#include "bench.h"

static int fd = -1;
static const struct kdreg2_status_data *status;

static int kdreg2_open(unsigned int max_entries)
{
	struct kdreg2_config_data config = { .max_regions = max_entries };

	fd = open(KDREG2_DEVICE_NAME, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, KDREG2_IOCTL_CONFIG_DATA, &config))
		return -errno;
	status = config.status_data;
	return 0;
}

bool kdreg2_loaded(void)
{
	return !access(KDREG2_DEVICE_NAME, F_OK);
}

static void kdreg2_close(void)
{
	close(fd);
}

static int kdreg2_watch(struct region *e)
{
	struct kdreg2_ioctl_monitor m = {
		.addr = e->addr,
		.length = e->len,
		.cookie = (uintptr_t)e,
	};

	if (ioctl(fd, KDREG2_IOCTL_MONITOR, &m))
		return -errno;
	e->key[0] = m.monitoring_params.location;
	e->key[1] = m.monitoring_params.generation;
	return 0;
}

static void kdreg2_unwatch(struct region *e)
{
	struct kdreg2_ioctl_unmonitor u = {
		.cookie = (uintptr_t)e,
		.monitoring_params = {
			.location = e->key[0],
			.generation = e->key[1],
		},
	};

	if (ioctl(fd, KDREG2_IOCTL_UNMONITOR, &u))
		fail("KDREG2_IOCTL_UNMONITOR", -errno);
}

static inline bool kdreg2_valid(struct region *e)
{
	struct kdreg2_monitoring_params p = {
		.location = e->key[0],
		.generation = e->key[1],
	};

	return !kdreg2_mapping_changed(status, &p);
}

static unsigned long kdreg2_check(struct region *e, unsigned long n)
{
	struct region at_hand = *e;
	unsigned long i;

#pragma GCC unroll 8
	for (i = 0; i < n; i++)
		if (!kdreg2_valid(&at_hand))
			break;
	return i;
}

static unsigned long kdreg2_drain(unsigned long *lost)
{
	struct kdreg2_event ev[64];
	unsigned long events = 0;
	ssize_t n;

	(void)lost;
	while ((n = read(fd, ev, sizeof(ev))) > 0)
		events += n / sizeof(ev[0]);
	if (n < 0 && errno != EAGAIN)
		fail("read kdreg2", -errno);
	return events;
}

const struct backend kdreg2_backend = {
	.name = "kdreg2",
	.open = kdreg2_open,
	.close = kdreg2_close,
	.watch = kdreg2_watch,
	.unwatch = kdreg2_unwatch,
	.valid = kdreg2_valid,
	.check = kdreg2_check,
	.drain = kdreg2_drain,
};
