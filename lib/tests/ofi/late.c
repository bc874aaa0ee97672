// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A library whose constructor registers an atexit() handler, as runtimes
 * do: glibc runs it after every library's destructor, because the program
 * registers the dynamic linker's (which runs them) only after the
 * libraries' constructors ran.  ofi-stale's "late" test closes its
 * domains from it.
 */
#include <stdlib.h>

#include "late.h"

static void (*late_fn)(void);

void late_at_exit(void (*fn)(void))
{
	late_fn = fn;
}

static void run_late(void)
{
	if (late_fn)
		late_fn();
}

__attribute__((constructor)) static void register_late(void)
{
	atexit(run_late);
}
