// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A library whose constructor registers an exit handler that runs after
 * every destructor, libfabric's fi_fini() included, as a thread still
 * running during exit() would close its domains.  Not atexit(): glibc
 * binds a library's atexit() handlers to it and runs them with its
 * destructors, before libfabric's (a plugin's destructor, ofi-exit).
 * __cxa_atexit() without a DSO handle is the program's: registered
 * before the dynamic linker's (which runs the destructors, and which the
 * program registers after the libraries' constructors ran), it runs after
 * it.  ofi-stale's "late" test closes its domains from it.
 */
#include <stdlib.h>

#include "late.h"

int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void (*late_fn)(void);

void late_at_exit(void (*fn)(void))
{
	late_fn = fn;
}

static void run_late(void *arg)
{
	(void)arg;
	if (late_fn)
		late_fn();
}

__attribute__((constructor)) static void register_late(void)
{
	__cxa_atexit(run_late, NULL, NULL);
}
