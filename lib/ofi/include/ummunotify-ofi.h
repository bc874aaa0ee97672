/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libummunotify-ofi: a memory monitor for libfabric's MR cache, built on
 * /dev/ummunotify and imported with fi_import() (FI_CLASS_MEM_MONITOR).
 *
 * Installed as a libfabric provider (libummunotify-fi.so in libfabric's
 * provider directory, a link to this library), it is imported by every
 * libfabric program without a change; a program may also import it itself
 * with umn_ofi_import().  See umn_ofi_import(3).  Functions return 0 or a
 * negative errno value.
 */
#ifndef UMMUNOTIFY_OFI_H
#define UMMUNOTIFY_OFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int umn_ofi_import(void);

/*
 * The monitor's thread, named so while an MR cache uses the monitor; a
 * thread stopped, and not gone yet, is renamed at once, and so is the
 * thread of a monitor that failed (after fi_fini() with a cache active),
 * which caches nothing.
 */
#define UMN_OFI_THREAD_NAME	"umn-ofi"
#define UMN_OFI_STOPPED_THREAD_NAME "umn-ofi-stopped"
#define UMN_OFI_FAILED_THREAD_NAME "umn-ofi-failed"

/*
 * What the monitor did.  Pass sizeof(struct umn_ofi_stats): fields are
 * only ever added at the end, and a library newer than the caller's
 * header fills what the caller knows.
 */
struct umn_ofi_stats {
	bool imported;		/* libfabric took the monitor */
	bool started;		/* an MR cache uses it now */
	uint32_t abi;		/* features granted, umn_features(3) */
	uint64_t watches;	/* ranges watched now */
	uint64_t subscribes;	/* subscribe() calls */
	uint64_t reused;	/* ... served by the live watch of the range */
	uint64_t refused;	/* ... refused: the registration stays uncached */
	uint64_t recycled;	/* watches retired for room or memory */
	uint64_t events;	/* invalidations of watched ranges */
	uint64_t notified;	/* ranges passed to libfabric's notify() */
	uint64_t overflows;	/* events lost: every watch rechecked */
	uint64_t stale;		/* cache hits valid() refused */
	uint64_t failures;	/* threads stopped on an error: see the man page */
	uint64_t pressure;	/* kernel requests for memory handled */
	uint64_t capacity;	/* watches it has room for now (1.1) */
};

void umn_ofi_stats(struct umn_ofi_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOTIFY_OFI_H */
