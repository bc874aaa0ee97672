/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Inside libummunotify-ofi: the provider that carries the monitor into
 * libfabric (provider.c) and logs for it, shared with monitor.c.
 */
#ifndef UMN_OFI_INTERNAL_H
#define UMN_OFI_INTERNAL_H

#include <rdma/providers/fi_prov.h>

#include "ummunotify.h"
#include "ummunotify-ofi.h"

/* Registered with libfabric by libummunotify-fi.so; names our log lines. */
extern struct fi_provider umn_ofi__prov;

/* fi_prov_ini() of libummunotify-fi.so. */
struct fi_provider *umn_ofi__prov_ini(void);

#endif /* UMN_OFI_INTERNAL_H */
