/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ummunotify: tell user space, before the unmapping call returns, that
 * memory it registered (for example with an RDMA NIC) has been unmapped
 * or replaced.  See Documentation/userspace-api/ummunotify.rst.
 */
#ifndef _UAPI_LINUX_UMMUNOTIFY_H
#define _UAPI_LINUX_UMMUNOTIFY_H

#include <linux/types.h>
#include <linux/ioctl.h>

/*
 * Register the range [start, end) under user_cookie, which must be unique
 * within the open file.  flags and reserved are ignored, as the 2010
 * kernel ignored them, until UMMUNOTIFY_SETUP; after it they must be 0.
 */
struct ummunotify_register_ioctl {
	__u64	start;
	__u64	end;
	__u64	user_cookie;
	__u32	flags;
	__u32	reserved;
};

#define UMMUNOTIFY_MAGIC		'U'

/* In: features wanted.  Out: features granted.  Only before first use. */
#define UMMUNOTIFY_EXCHANGE_FEATURES	_IOWR(UMMUNOTIFY_MAGIC, 1, __u32)
#define UMMUNOTIFY_REGISTER_REGION	_IOW(UMMUNOTIFY_MAGIC, 2, \
					     struct ummunotify_register_ioctl)
#define UMMUNOTIFY_UNREGISTER_REGION	_IOW(UMMUNOTIFY_MAGIC, 3, __u64)

enum {
	/* A registered region was invalidated; user_cookie_counter = cookie. */
	UMMUNOTIFY_EVENT_TYPE_INVAL	= 0,
	/* The queue is empty; user_cookie_counter = generation counter. */
	UMMUNOTIFY_EVENT_TYPE_LAST	= 1,
};

enum {
	/* [hint_start, hint_end) is the only part of the region invalidated. */
	UMMUNOTIFY_EVENT_FLAG_HINT	= 1 << 0,
};

/* What read() returns, one or more whole events at a time. */
struct ummunotify_event {
	__u32	type;
	__u32	flags;
	__u64	hint_start;
	__u64	hint_end;
	__u64	user_cookie_counter;
};

/*
 * The native ABI, granted by EXCHANGE_FEATURES.  A file that asks for
 * nothing behaves exactly as above.
 */
#define UMMUNOTIFY_FEATURE_WATCH	0x1U /* WATCH, RESIZE, generations */
#define UMMUNOTIFY_FEATURE_RING		0x2U /* events in a shared ring */
#define UMMUNOTIFY_FEATURE_PRESSURE	0x4U /* memory-pressure advisories */

/*
 * Why a range changed: bit numbers of ummunotify_watch.causes and values
 * of ummunotify_ring_event.cause.
 */
enum {
	UMMUNOTIFY_CAUSE_UNMAP		= 0, /* munmap, mremap, MAP_FIXED, brk, shmdt */
	UMMUNOTIFY_CAUSE_CLEAR		= 1, /* madvise, copy-on-write, reclaim, migration */
	UMMUNOTIFY_CAUSE_PROTECTION	= 2, /* mprotect, fork: same pages */
	UMMUNOTIFY_CAUSE_SOFT_DIRTY	= 3, /* clear_refs: same pages */
	UMMUNOTIFY_CAUSE_MIGRATE	= 4, /* moved to or from device memory */
	UMMUNOTIFY_CAUSE_RELEASE	= 5, /* the address space is gone */
	UMMUNOTIFY_CAUSE_OVERFLOW	= 6, /* ring events were lost */
	UMMUNOTIFY_CAUSE_PRESSURE	= 7, /* the kernel asks for memory back */
};

/* What a watch reports unless it asks otherwise; RELEASE always is. */
#define UMMUNOTIFY_CAUSES_DEFAULT	((1U << UMMUNOTIFY_CAUSE_UNMAP) | \
					 (1U << UMMUNOTIFY_CAUSE_CLEAR) | \
					 (1U << UMMUNOTIFY_CAUSE_MIGRATE) | \
					 (1U << UMMUNOTIFY_CAUSE_RELEASE))

/* ummunotify_watch.flags */
#define UMMUNOTIFY_WATCH_ALL		0x1U /* the whole user address space */

/* UMMUNOTIFY_WATCH and UMMUNOTIFY_RESIZE (which finds the watch by cookie). */
struct ummunotify_watch {
	__u64	start;		/* in: [start, end), unless WATCH_ALL */
	__u64	end;
	__u64	user_cookie;	/* in: unique within the file */
	__u32	causes;		/* in: 1 << UMMUNOTIFY_CAUSE_*; 0: default */
	__u32	flags;		/* in: UMMUNOTIFY_WATCH_* */
	__u64	generation;	/* out: the slot's generation now */
	__u32	slot;		/* out: index into the generation words */
	__u32	reserved;	/* must be 0 */
};

/* UMMUNOTIFY_SETUP: sizes in, layout of the shared memory out. */
struct ummunotify_params {
	__u32	slots;		/* in: generation words (0: default); out */
	__u32	ring_entries;	/* in: power of two (0: default); out */
	__u32	flags;		/* must be 0 */
	__u32	reserved;	/* must be 0 */
	__u64	mmap_size;	/* out: map this much, PROT_READ, offset 0 */
	__u64	head_offset;	/* out: mmap offset of the one consumer page */
	struct ummunotify_offsets {
		__u32	counter;	/* __u64: the legacy counter */
		__u32	tail;		/* __u64: producer position */
		__u32	dropped;	/* __u64: ring events lost, ever */
		__u32	ring_mask;	/* __u32: ring_entries - 1 */
		__u32	events;		/* struct ummunotify_ring_event[] */
		__u32	generations;	/* __u64[slots] */
		__u32	head;		/* __u64 in the consumer page */
		/*
		 * __u64: invalidations started and not ended, counted while
		 * the file has a WATCH_ALL watch; 0: not provided.
		 */
		__u32	in_flight;
	} off;
	__u64	reserved2[4];	/* must be 0 */
};

/* An entry of the ring, and what read() returns with FEATURE_RING. */
struct ummunotify_ring_event {
	__u64	start;		/* range changed, clipped to the watch */
	__u64	end;
	__u64	user_cookie;
	/* Slot's new generation; OVERFLOW: events lost; PRESSURE: bytes. */
	__u64	generation;
	__u32	slot;		/* UMMUNOTIFY_NO_SLOT if none */
	__u16	cause;		/* UMMUNOTIFY_CAUSE_* */
	__u16	flags;		/* 0 */
};

#define UMMUNOTIFY_NO_SLOT		0xffffffffU

/*
 * UMMUNOTIFY_WATCHV: unregister nr_unwatch watches by cookie, then make
 * nr_watch watches, in one call.  Nothing changes unless every argument
 * (cookies included) is good; past that, the first watch the kernel
 * cannot make (ENOSPC, ENOMEM; EINTR for a signal) stops the rest, the
 * unwatches stay done, and done says how many watches were made.
 */
struct ummunotify_watchv {
	__u64	unwatch;	/* in: __u64 cookies[nr_unwatch] */
	__u64	watch;		/* in/out: struct ummunotify_watch[nr_watch] */
	__u32	nr_unwatch;	/* in: at most UMMUNOTIFY_WATCHV_MAX */
	__u32	nr_watch;	/* in: at most UMMUNOTIFY_WATCHV_MAX */
	__u32	done;		/* out: watches made; in: 0 */
	__u32	flags;		/* must be 0 */
};

#define UMMUNOTIFY_WATCHV_MAX		1024

/*
 * UMMUNOTIFY_NS_LIMITS: the budget of a container, that is of a user
 * namespace the initial namespace's root made (with the namespaces made
 * in it), named by a process in it.  Any open file serves.  Setting needs
 * CAP_SYS_RESOURCE in the initial user namespace; reading, in the
 * container's.
 */
struct ummunotify_ns_limits {
	__s32	pid;		/* in: a process of the container */
	__u32	flags;		/* in: UMMUNOTIFY_NS_LIMITS_* */
	/* in with SET (0: max_ns_watches, max_ns_pages); out: in force */
	__u64	max_watches;
	__u64	max_pages;
	__u64	watches;	/* out: what its users hold now */
	__u64	pages;
	__u64	reserved[2];	/* must be 0 */
};

/* Set max_watches and max_pages, then report as without it. */
#define UMMUNOTIFY_NS_LIMITS_SET	0x1U

#define UMMUNOTIFY_WATCH	_IOWR(UMMUNOTIFY_MAGIC, 4, struct ummunotify_watch)
#define UMMUNOTIFY_RESIZE	_IOWR(UMMUNOTIFY_MAGIC, 5, struct ummunotify_watch)
#define UMMUNOTIFY_SETUP	_IOWR(UMMUNOTIFY_MAGIC, 6, struct ummunotify_params)
#define UMMUNOTIFY_WATCHV	_IOWR(UMMUNOTIFY_MAGIC, 7, struct ummunotify_watchv)
#define UMMUNOTIFY_NS_LIMITS	_IOWR(UMMUNOTIFY_MAGIC, 8, \
				     struct ummunotify_ns_limits)

#endif /* _UAPI_LINUX_UMMUNOTIFY_H */
