// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ofi-exit's plugin: a domain that caches a registration, closed by the
 * plugin's destructor.  It reaches the monitor's counters through the
 * provider libfabric loaded, without linking it (which would make its
 * destructor run after ours).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <rdma/fi_errno.h>

#include "fab.h"
#include "ummunotify-ofi.h"

#define LEN	(64 * 1024)

static void (*get_stats)(struct umn_ofi_stats *stats, size_t size);
static struct fab owner;
static bool opened;

static const char *monitor(void)
{
	struct umn_ofi_stats s;

	get_stats(&s, sizeof(s));
	return !s.imported ? "not imported" :
	       s.started ? "imported, started" : "imported, stopped";
}

int ofi_exit_plugin_run(void);
int ofi_exit_plugin_run(void)
{
	void *prov = dlopen("libummunotify-ofi.so.1", RTLD_NOW | RTLD_NOLOAD);
	struct umn_ofi_stats s;
	struct fid_mr *mr;
	uint64_t key;
	bool cached;
	void *buf;
	int ret;

	get_stats = prov ? (void (*)(struct umn_ofi_stats *, size_t))
			   dlsym(prov, "umn_ofi_stats") : NULL;
	if (!get_stats) {
		fprintf(stderr, "ofi-exit: libfabric did not load the ummunotify provider\n");
		return 2;
	}
	ret = fab_open(&owner, "verbs;ofi_rxm");
	if (ret == -FI_ENODATA) {
		fprintf(stderr, "ofi-exit: no verbs;ofi_rxm endpoint (no RDMA device?)\n");
		return 4;
	}
	if (ret) {
		fprintf(stderr, "ofi-exit: fab_open: %s\n", fi_strerror(-ret));
		return 2;
	}
	opened = true;
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || fab_reg(&owner, buf, LEN, &mr))
		return 2;
	key = fi_mr_key(mr);
	fi_close(&mr->fid);
	if (fab_reg(&owner, buf, LEN, &mr))
		return 2;
	cached = fi_mr_key(mr) == key;
	fi_close(&mr->fid);
	get_stats(&s, sizeof(s));
	printf("ofi-exit: libfabric %u.%u, registration %s, monitor %s\n",
	       FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
	       cached ? "cached" : "NOT cached", monitor());
	fflush(stdout);
	return cached && s.imported && s.started ? 0 : 2;
}

__attribute__((destructor)) static void close_domain(void)
{
	if (!opened)
		return;
	printf("ofi-exit: the plugin's destructor closes the domain: monitor %s\n",
	       monitor());
	fflush(stdout);
	fab_close(&owner);
	printf("ofi-exit: the domain closed: monitor %s\n", monitor());
	fflush(stdout);
}
