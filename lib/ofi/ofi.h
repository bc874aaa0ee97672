/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Inside libummunotify-ofi: the monitor (monitor.c) and the provider that
 * carries it into libfabric and names its log lines (provider.c).
 */
#ifndef UMN_OFI_INTERNAL_H
#define UMN_OFI_INTERNAL_H

#include <rdma/fi_ext.h>
#include <rdma/providers/fi_prov.h>

#include "ummunotify.h"
#include "ummunotify-ofi.h"

/* Registered with libfabric when the monitor is imported; logs for it. */
extern struct fi_provider umn_ofi__prov;

/* The monitor as libfabric sees it, for tests and benchmarks. */
struct fid_mem_monitor *umn_ofi__monitor(void);

/*
 * Stop the monitor and close the import, as libfabric's fi_fini() wants,
 * unless a cache still uses it: from our destructor (fi_fini() closes it
 * later) and from the provider's cleanup, fi_fini() (then never).
 */
void umn_ofi__close(void);
void umn_ofi__fini(void);

/* Define FI_UMMUNOTIFY_MAX_WATCHES, once, for fi_info -e and the monitor. */
void umn_ofi__define_params(void);

/* 0 if /dev/ummunotify opens, or -ENODEV (no node), open()'s -errno. */
int umn_ofi__have_device(void);

/* FI_MR_CACHE_MONITOR=ummunotify: the program asked for this monitor. */
bool umn_ofi__asked(void);

/*
 * A warning: the program runs on without the monitor.  Silent, as a
 * provider is, unless FI_LOG_LEVEL asks (libfabric's log) or the program
 * asked for the monitor (then one line on stderr, whatever the level):
 * every rank of every libfabric program would say it, on a node without
 * the module, tools that never register memory among them.  Loud: on
 * stderr anyway, for what an admin must fix (a denied device, a limit
 * used up, a thread that failed mid-job), which a node without the
 * module never says.
 */
void umn_ofi__say(bool loud, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* FI_MR_CACHE_MONITOR names one of libfabric's own monitors. */
bool umn_ofi__libfabric_monitor(const char *name);

#endif /* UMN_OFI_INTERNAL_H */
