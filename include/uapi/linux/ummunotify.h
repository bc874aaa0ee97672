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
 * within the open file.  flags and reserved must be 0.
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

#endif /* _UAPI_LINUX_UMMUNOTIFY_H */
