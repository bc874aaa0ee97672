// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * test-monitor on the host: the monitor's umn_open() (wrapped at link
 * time) opens a test double, whose memory is only addresses, for each of
 * its handles.
 */
#include "ofi.h"
#include "backend.h"
#include "../check.h"

static struct umn_double *dbl[32];
static struct umn *handle[32];
static unsigned int nr_dbl;

int __wrap_umn_open(struct umn **u, const struct umn_attr *attr);
int __wrap_umn_open(struct umn **u, const struct umn_attr *attr)
{
	int ret;

	CHECK(nr_dbl < sizeof(dbl) / sizeof(dbl[0]));
	ret = double_open(u, attr, &dbl[nr_dbl]);
	if (!ret)
		handle[nr_dbl++] = *u;
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
	unsigned int i;

	for (i = 0; i < nr_dbl; i++) {
		double_invalidate(dbl[i], (uintptr_t)page(first),
				  (uintptr_t)page(first + n), UMN_CAUSE_UNMAP);
		/* The 2010 ABI's reports wake the thread once pulled. */
		umn__pull(handle[i]);
	}
	/* A check pulls too, as a cache's would. */
	m->export_ops->valid(m, page(first), PAGE);
}

/* The kernel asks every file of the process (up to 32 a call). */
bool pressure(uint64_t bytes)
{
	unsigned int i;

	for (i = 0; i < nr_dbl; i++) {
		double_pressure(dbl[i], bytes);
		/* The 2010 ABI's request wakes the thread once pulled. */
		umn__pull(handle[i]);
	}
	return true;
}

unsigned int device_watches(void)
{
	unsigned int i, n = 0;

	for (i = 0; i < nr_dbl; i++)
		n += double_watches(dbl[i]);
	return n;
}

bool device_opened(void)
{
	return nr_dbl > 0;
}
