/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A buffer registered as a UCP program registers one: ucp_mem_map() of
 * it, then ucp_mem_unmap(), each looking it up in UCX's cache.  For
 * ucp-threads and ucx-bench, each of which defines die().
 */
#ifndef UMN_TESTS_UCP_MAP_H
#define UMN_TESTS_UCP_MAP_H

#include <ucp/api/ucp.h>

static void die(const char *what, ucs_status_t status);

static void ucp_map_unmap(ucp_context_h context, void *buf, size_t len)
{
	ucp_mem_map_params_t params = {
		.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
			      UCP_MEM_MAP_PARAM_FIELD_LENGTH,
		.address = buf,
		.length = len,
	};
	ucs_status_t status;
	ucp_mem_h memh;

	status = ucp_mem_map(context, &params, &memh);
	if (status != UCS_OK)
		die("ucp_mem_map", status);
	status = ucp_mem_unmap(context, memh);
	if (status != UCS_OK)
		die("ucp_mem_unmap", status);
}

#endif /* UMN_TESTS_UCP_MAP_H */
