// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The provider that turns the monitor on without changing a program:
 * libfabric loads every lib*-fi.so of its provider directory (or of
 * FI_PROVIDER_PATH) during fi_ini(), after it has chosen its default
 * monitor and before any MR cache exists, and calls its fi_prov_ini().
 * Ours imports the monitor there, which makes it the default, and offers
 * no fabric: fi_getinfo() never returns it.
 *
 * FI_MR_CACHE_MONITOR naming one of libfabric's monitors keeps that one:
 * libfabric applies it before loading providers, so an import here would
 * silently override it.  "ummunotify" is ours (libfabric ignores names
 * it does not know).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include "ofi.h"

static int prov_getinfo(uint32_t version, const char *node,
			const char *service, uint64_t flags,
			const struct fi_info *hints, struct fi_info **info)
{
	(void)version, (void)node, (void)service, (void)flags, (void)hints;
	*info = NULL;
	return -FI_ENODATA;
}

static int prov_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		       void *context)
{
	(void)attr, (void)fabric, (void)context;
	return -FI_ENODATA;
}

/* The monitor outlives fi_fini(): both libraries are never unloaded. */
static void prov_cleanup(void)
{
}

struct fi_provider umn_ofi__prov = {
	.version = FI_VERSION(1, 0),
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = "ummunotify",
	.getinfo = prov_getinfo,
	.fabric = prov_fabric,
	.cleanup = prov_cleanup,
};

struct fi_provider *umn_ofi__prov_ini(void)
{
	static bool said;
	const char *want = getenv("FI_MR_CACHE_MONITOR");
	char msg[160];
	int ret;

	if (want && *want && strcmp(want, "ummunotify")) {
		FI_INFO(&umn_ofi__prov, FI_LOG_MR,
			"FI_MR_CACHE_MONITOR=%s: the ummunotify memory monitor is not imported\n",
			want);
		return &umn_ofi__prov;
	}
	ret = umn_ofi_import();
	if (!ret || said)
		return &umn_ofi__prov;
	/* Once, whatever the log level: caching goes on, less safely. */
	said = true;
	snprintf(msg, sizeof(msg),
		 "ummunotify memory monitor not imported (%s): libfabric's own monitor stays in use",
		 ret == -ENODEV ? "no /dev/ummunotify" : strerror(-ret));
	if (fi_log_enabled(&umn_ofi__prov, FI_LOG_WARN, FI_LOG_MR))
		FI_WARN(&umn_ofi__prov, FI_LOG_MR, "%s\n", msg);
	else
		fprintf(stderr, "libfabric:%d:ummunotify:mr: %s\n",
			(int)getpid(), msg);
	return &umn_ofi__prov;
}
