// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * An interposer ahead of libummunotify-ucx, for check-ucx on UCX 1.18:
 * preloaded first, it would send libucp's calls of ucs_pgtable_lookup()
 * (UCP's inline lookups) straight to libucs's, past the library's guard,
 * and every other call (ucs_rcache_get()'s, which the library's start-up
 * probe watches) on to the library.  libucp binds the symbol lazily: the
 * library binds its slot to its own at start-up, so this one is never
 * reached from libucp and the guard holds.  Bound at load (LD_BIND_NOW),
 * libucp's slot is this one's, and the library refuses.
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
