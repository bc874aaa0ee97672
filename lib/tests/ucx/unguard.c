// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * An interposer ahead of libummunotify-ucx, for check-ucx: preloaded
 * first, it would send UCX's own lookups straight to libucs, past the
 * library: libucp's calls of ucs_pgtable_lookup() (UCP's inline lookups
 * in 1.18), and libucp's and libuct_ib's calls of ucs_rcache_get() (every
 * lookup in 1.13).  Every other call (the library's start-up probe's)
 * goes on to the library.  Those objects bind the symbols lazily: the
 * library binds their slots to its own before their first cache exists,
 * so this one is never reached from them and the guard holds.  Bound at
 * load (LD_BIND_NOW), their slots are this one's, and the library
 * refuses: 1.18 at start-up, 1.13 each of their caches.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *lookup_fn(const void *pgtable, uintptr_t address);
/* As libummunotify-ucx's: seven words, what 1.13's six-word calls allow. */
typedef int get_fn(void *rcache, void *address, size_t length, uintptr_t a3,
		   uintptr_t a4, uintptr_t a5, uintptr_t a6);

static void *resolve(void *handle, const char *name)
{
	void *fn = dlsym(handle, name);

	if (!fn) {
		fprintf(stderr, "unguard: no %s()\n", name);
		abort();
	}
	return fn;
}

/* Called from UCX's own libraries, which the library guards. */
static int from_ucx(const void *caller)
{
	Dl_info info;

	return dladdr(caller, &info) && info.dli_fname &&
	       (strstr(info.dli_fname, "/libucp.so") ||
		strstr(info.dli_fname, "/libuct_ib.so"));
}

/* UCX's NAME, in libucs, and the next definition after this one. */
static void find(const char *name, void **ucs, void **next)
{
	if (!__atomic_load_n(ucs, __ATOMIC_ACQUIRE)) {
		*next = resolve(RTLD_NEXT, name);
		__atomic_store_n(ucs, resolve(dlopen("libucs.so.0",
						     RTLD_LAZY | RTLD_NOLOAD),
					      name), __ATOMIC_RELEASE);
	}
}

void *ucs_pgtable_lookup(const void *pgtable, uintptr_t address);
void *ucs_pgtable_lookup(const void *pgtable, uintptr_t address)
{
	static void *ucs, *next;

	find("ucs_pgtable_lookup", &ucs, &next);
	return ((lookup_fn *)(from_ucx(__builtin_return_address(0)) ?
			      ucs : next))(pgtable, address);
}

int ucs_rcache_get(void *rcache, void *address, size_t length, uintptr_t a3,
		   uintptr_t a4, uintptr_t a5, uintptr_t a6);
int ucs_rcache_get(void *rcache, void *address, size_t length, uintptr_t a3,
		   uintptr_t a4, uintptr_t a5, uintptr_t a6)
{
	static void *ucs, *next;

	find("ucs_rcache_get", &ucs, &next);
	return ((get_fn *)(from_ucx(__builtin_return_address(0)) ? ucs : next))
		(rcache, address, length, a3, a4, a5, a6);
}
