// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libummunotify-fi.so, for libfabric's provider directory: the entry
 * point libfabric looks up; the rest is in libummunotify-ofi.
 */
#include "ofi.h"

struct fi_provider *fi_prov_ini(void);

__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
	return umn_ofi__prov_ini();
}
