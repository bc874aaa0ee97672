// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The provider that turns the monitor on without changing a program:
 * libfabric loads every lib*-fi.so of its provider directory (or of
 * FI_PROVIDER_PATH) during fi_ini(), after it has chosen its default
 * monitor and before any MR cache exists, and calls its fi_prov_ini().
 * libummunotify-fi.so there is a link to this library, so that a program
 * that also links it has one monitor, not two.  fi_prov_ini() imports the
 * monitor, which makes it the default, and registers a provider that
 * offers no fabric (fi_getinfo() never returns it) only if it did: then
 * "fi_info -l" lists ummunotify exactly when the monitor is in use.  At
 * fi_fini() the provider's cleanup closes the import, as libfabric
 * expects of an importer (see umn_ofi__fini()).
 */
#define _GNU_SOURCE	/* O_CLOEXEC, dladdr() */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

struct fi_provider umn_ofi__prov = {
	.version = FI_VERSION(1, 0),
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = "ummunotify",
	.getinfo = prov_getinfo,
	.fabric = prov_fabric,
	.cleanup = umn_ofi__fini,
};

bool umn_ofi__asked(void)
{
	const char *want = getenv("FI_MR_CACHE_MONITOR");

	return want && !strcmp(want, "ummunotify");
}

/*
 * unset: the libfabric this library logs through never set its log up
 * (see FI_EXT_INI): then FI_LOG_LEVEL asks for stderr too.
 */
static void vsay(bool unset, bool loud, const char *fmt, va_list ap)
{
	char msg[256];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!unset && fi_log_enabled(&umn_ofi__prov, FI_LOG_WARN, FI_LOG_MR))
		FI_WARN(&umn_ofi__prov, FI_LOG_MR, "%s\n", msg);
	else if (loud || umn_ofi__asked() ||
		 (unset && getenv("FI_LOG_LEVEL")))
		fprintf(stderr, "libfabric:%d:ummunotify:mr: %s\n",
			(int)getpid(), msg);
}

void umn_ofi__say(bool loud, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(false, loud, fmt, ap);
	va_end(ap);
}

static void say_unlogged(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void say_unlogged(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(true, false, fmt, ap);
	va_end(ap);
}

/*
 * Opened and closed at once, nothing set up: a node that is there but
 * cannot be opened (a static /dev's after the module is gone, an LSM's
 * denial, the per-user limit used up) keeps libfabric's own monitor,
 * said once, instead of an import whose start() fails in every cache,
 * which would leave every domain uncached.  The open costs a file's
 * allocation and per-user charge, both released by the close.  Here, not
 * in monitor.c, so that the host's test can stand in for it.
 */
int umn_ofi__have_device(void)
{
	struct stat st;
	int fd;

	if (stat("/dev/ummunotify", &st) || !S_ISCHR(st.st_mode))
		return -ENODEV;
	fd = open("/dev/ummunotify", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/*
 * Is the libfabric that calls the provider (at caller) the one its
 * import goes to, the libfabric.so.1 this library links?  A program with
 * libfabric.a linked in statically loads providers too, and the
 * provider's DT_NEEDED then brings in a second libfabric, whose default
 * monitor no cache of the program's uses (nor is its log set up).
 */
static bool loaded_by_our_libfabric(const void *caller, Dl_info *theirs)
{
	Dl_info ours;

	if (!dladdr((const void *)(uintptr_t)fi_open, &ours) ||
	    !dladdr(caller, theirs))
		return true;	/* cannot tell */
	return ours.dli_fbase == theirs->dli_fbase;
}

FI_EXT_INI
{
	const char *want = getenv("FI_MR_CACHE_MONITOR");
	bool asked = umn_ofi__asked();
	static bool said;
	Dl_info theirs;
	int ret;

	if (!loaded_by_our_libfabric(__builtin_return_address(0), &theirs)) {
		say_unlogged("%sthe ummunotify memory monitor is not imported: the libfabric in %s loaded the provider, which imports into another one (libfabric.a linked statically?)",
			     asked ? "FI_MR_CACHE_MONITOR=ummunotify, but " : "",
			     theirs.dli_fname && *theirs.dli_fname ?
			     theirs.dli_fname : "the program");
		return NULL;
	}
	umn_ofi__define_params();
	ret = umn_ofi_import();

	if (!ret) {
		if (want && *want && !asked)
			FI_WARN(&umn_ofi__prov, FI_LOG_MR,
				"FI_MR_CACHE_MONITOR=%s names no monitor libfabric knows, which then keeps its default: the ummunotify monitor\n",
				want);
		return &umn_ofi__prov;
	}
	/* Not the device's EPERM, which the admin must hear about. */
	if (ret == -EPERM && want && umn_ofi__libfabric_monitor(want)) {
		FI_INFO(&umn_ofi__prov, FI_LOG_MR,
			"FI_MR_CACHE_MONITOR=%s: the ummunotify memory monitor is not imported\n",
			want);
		return NULL;
	}
	if (said)
		return NULL;
	said = true;
	/* The winner may be the program's own copy of this one, or Open MPI's. */
	if (ret == -EBUSY)
		umn_ofi__say(false, "%sthe ummunotify memory monitor is not imported: another imported monitor is in use",
		    asked ? "FI_MR_CACHE_MONITOR=ummunotify, but " : "");
	else
		umn_ofi__say(ret == -EACCES || ret == -EPERM,
		    "%sthe ummunotify memory monitor is not imported (%s%s): libfabric's default monitor is in use",
		    asked ? "FI_MR_CACHE_MONITOR=ummunotify, but " : "",
		    ret == -ENODEV ? "" : "/dev/ummunotify: ",
		    ret == -ENODEV ? "no /dev/ummunotify" : strerror(-ret));
	return NULL;
}

/* Before libfabric's fi_fini(), which a program that imported it may lack. */
__attribute__((destructor)) static void close_at_exit(void)
{
	umn_ofi__close();
}
