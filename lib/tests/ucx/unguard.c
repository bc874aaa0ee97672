// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * check-ucx's negative control for UCX 1.18: preloaded before
 * libummunotify-ucx, it sends libucp's calls of ucs_pgtable_lookup() (UCP's
 * inline lookups) straight to libucs's, past the library's guard, and
 * every other call (ucs_rcache_get()'s, which the library's start-up probe
 * watches) on to the library.  libucp binds the symbol lazily, so the
 * library's check of its PLT passes and the guard is off: the cache must
 * then hand back stale registrations.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *lookup_fn(const void *pgtable, uintptr_t address);

static lookup_fn *resolve(void *handle)
{
	lookup_fn *fn = (lookup_fn *)dlsym(handle, "ucs_pgtable_lookup");

	if (!fn) {
		fprintf(stderr, "unguard: no ucs_pgtable_lookup()\n");
		abort();
	}
	return fn;
}

void *ucs_pgtable_lookup(const void *pgtable, uintptr_t address);
void *ucs_pgtable_lookup(const void *pgtable, uintptr_t address)
{
	static lookup_fn *ucs, *next;
	Dl_info caller;
	void *handle;

	if (!ucs) {
		handle = dlopen("libucs.so.0", RTLD_LAZY | RTLD_NOLOAD);
		ucs = resolve(handle);
		next = resolve(RTLD_NEXT);
	}
	if (dladdr(__builtin_return_address(0), &caller) &&
	    strstr(caller.dli_fname, "/libucp.so"))
		return ucs(pgtable, address);
	return next(pgtable, address);
}
