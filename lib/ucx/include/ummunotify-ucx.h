/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libummunotify-ucx: UCX's registration caches told of every change to
 * the memory they registered by /dev/ummunotify instead of UCM's libc
 * patches.  Loaded with LD_PRELOAD into an unmodified UCX program (Open
 * MPI's pml ucx, MPICH's ch4:ucx, a UCP program); see ummunotify-ucx(7).
 */
#ifndef UMMUNOTIFY_UCX_H
#define UMMUNOTIFY_UCX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* umn_ucx_status.state */
enum {
	UMN_UCX_IDLE = 0,	/* no UCX registration cache made yet */
	UMN_UCX_ACTIVE,		/* the caches learn of changes from the module */
	UMN_UCX_NO_DEVICE,	/* /dev/ummunotify did not open: UCM's hooks */
	UMN_UCX_UNSUPPORTED,	/* a UCX this library was not made for, or
				 * whose checks failed: UCM's hooks */
};

/*
 * What the library did.  Zero it, and pass sizeof(struct umn_ucx_status):
 * fields are only ever added at the end; a library newer than the
 * caller's header fills what the caller knows, and one older leaves the
 * rest as it was (libummunotify-ucx 1.2, of ummunotify 1.3.0, on: zeroes
 * it).
 */
struct umn_ucx_status {
	uint32_t state;			/* UMN_UCX_* */
	int32_t error;			/* NO_DEVICE: umn_open()'s errno value */
	uint32_t ucx_version[3];	/* major, minor, release; 0s: unknown */
	uint32_t reserved;
	uint64_t catch_ups;		/* lookups that found changes to pass on */
	uint64_t ranges;		/* changed ranges passed to UCX */
	uint64_t overflows;		/* events lost: every registration dropped */
	uint64_t refused;		/* caches refused: their owners' lookups
					 * would pass this library (since
					 * libummunotify-ucx 1.2) */
};

void umn_ucx_status(struct umn_ucx_status *status, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOTIFY_UCX_H */
