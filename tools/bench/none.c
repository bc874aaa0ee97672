// SPDX-License-Identifier: GPL-2.0
/* No monitoring: the baseline.  Nothing is ever reported. */
#include "bench.h"

static int none_open(unsigned int max_entries)
{
	(void)max_entries;
	return 0;
}

static void none_close(void)
{
}

static int none_watch(struct region *e)
{
	(void)e;
	return 0;
}

static void none_unwatch(struct region *e)
{
	(void)e;
}

const struct backend none_backend = {
	.name = "none",
	.open = none_open,
	.close = none_close,
	.watch = none_watch,
	.unwatch = none_unwatch,
	.valid = stale_valid,
	.check = stale_check,
	.drain = nothing_to_drain,
};
