// SPDX-License-Identifier: GPL-2.0
/*
 * libc interposition, standing in for the monitors that hook libc
 * (libfabric's memhooks, UCX's ucm): this program's munmap(), mremap()
 * and madvise() drop the entries of the range from the cache's index,
 * then make the system call.  Changes made without calling them (a
 * copy-on-write break, glibc's internal calls, a raw system call) go
 * unnoticed, as with the real ones.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

static bool hooked;

static void notify(void *addr, size_t len)
{
	if (__atomic_load_n(&hooked, __ATOMIC_RELAXED))
		index_invalidate((uintptr_t)addr, (uintptr_t)addr + len);
}

int munmap(void *addr, size_t len)
{
	notify(addr, len);
	return syscall(SYS_munmap, addr, len);
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new = NULL;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		new = va_arg(ap, void *);
		va_end(ap);
	}
	notify(old, old_len);
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new);
}

int madvise(void *addr, size_t len, int advice)
{
	if (advice == MADV_DONTNEED || advice == MADV_FREE ||
	    advice == MADV_REMOVE)
		notify(addr, len);
	return syscall(SYS_madvise, addr, len, advice);
}

static int interpose_open(unsigned int max_entries)
{
	(void)max_entries;
	__atomic_store_n(&hooked, true, __ATOMIC_RELAXED);
	return 0;
}

static void interpose_close(void)
{
	__atomic_store_n(&hooked, false, __ATOMIC_RELAXED);
	index_clear();
}

static int interpose_watch(struct region *e)
{
	return e->len ? index_add(e) : -EOPNOTSUPP;
}

static void interpose_unwatch(struct region *e)
{
	index_del(e);
}

const struct backend interpose_backend = {
	.name = "interpose",
	.open = interpose_open,
	.close = interpose_close,
	.watch = interpose_watch,
	.unwatch = interpose_unwatch,
	.valid = stale_valid,
	.check = stale_check,
	.drain = nothing_to_drain,
};
