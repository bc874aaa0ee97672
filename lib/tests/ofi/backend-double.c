// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * test-monitor on the host: the monitor's umn_open() (wrapped at link
 * time) opens the test double, whose memory is only addresses.
 */
#include "ofi.h"
#include "backend.h"
#include "../check.h"

static struct umn_double *dbl;
static struct umn *handle;

int __wrap_umn_open(struct umn **u, const struct umn_attr *attr);
int __wrap_umn_open(struct umn **u, const struct umn_attr *attr)
{
	int ret = double_open(u, attr, &dbl);

	if (!ret)
		handle = *u;
	return ret;
}

/* The double is always there to open. */
int __wrap_umn_ofi__have_device(void);
int __wrap_umn_ofi__have_device(void)
{
	return 0;
}

void backend_setup(void)
{
}

void *page(unsigned int n)
{
	return (void *)(0x10000000UL + n * PAGE);
}

void change(unsigned int first, unsigned int n)
{
	struct fid_mem_monitor *m = umn_ofi__monitor();

	double_invalidate(dbl, (uintptr_t)page(first),
			  (uintptr_t)page(first + n), UMN_CAUSE_UNMAP);
	/*
	 * The 2010 ABI's reports wake the thread once a check has pulled
	 * them from the source: any check will do.
	 */
	m->export_ops->valid(m, page(first), PAGE);
}

bool pressure(uint64_t bytes)
{
	double_pressure(dbl, bytes);
	/* The 2010 ABI's request wakes the thread once pulled. */
	umn__pull(handle);
	return true;
}

unsigned int device_watches(void)
{
	return double_watches(dbl);
}

bool device_opened(void)
{
	return dbl != NULL;
}
