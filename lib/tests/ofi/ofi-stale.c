// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The stale-data test through libfabric's MR cache: a buffer is
 * registered (fi_mr_reg() on verbs;ofi_rxm, which caches), a peer reads
 * it by RDMA, then it is unmapped and new memory with new contents mapped
 * at the same address by raw system calls, which libc hooks (libfabric's
 * memhooks monitor) never see, and registered again.  The peer must read
 * the new contents.
 *
 * The program does not import the monitor: libfabric loads it as a
 * provider (FI_PROVIDER_PATH, or its provider directory).  It only reads
 * the monitor's counters to show that it was used, and waits, in the
 * first round, for the invalidation to reach the cache through notify().
 *
 * Exit status: 0 the peer read new data every time, 1 it read old data
 * (what a monitor that missed the unmap gives: FI_MR_CACHE_MONITOR=memhooks
 * shows it), 2 anything else went wrong, 4 no RDMA device.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "fab.h"
#include "ummunotify-ofi.h"

#define LEN	(64 * 1024)

static void die(const char *what, int ret)
{
	fprintf(stderr, "ofi-stale: %s: %s\n", what, fi_strerror(-ret));
	exit(2);
}

/* What a peer reading through key finds at buf: its first byte. */
static char peer_reads(struct fab *owner, struct fab *peer, void *dst,
		       struct fid_mr *dst_mr, void *buf, uint64_t key)
{
	int ret;

	memset(dst, 0, LEN);
	ret = fab_read(peer, owner, dst, dst_mr, LEN,
		       fab_remote_addr(owner, buf), key);
	if (ret)
		die("fi_read", ret);
	return *(char *)dst;
}

/* munmap() and mmap() without libc, as a static binary or raw code would. */
static void remap(void *buf, char fill)
{
	void *p;

	if (syscall(SYS_munmap, buf, LEN))
		die("munmap", -errno);
	p = (void *)syscall(SYS_mmap, buf, LEN, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p != buf)
		die("mmap", -errno);
	memset(buf, fill, LEN);
}

static void wait_notified(uint64_t before)
{
	struct timespec pause = { 0, 1000000 };
	struct umn_ofi_stats s;
	int i;

	for (i = 0; i < 5000; i++) {
		umn_ofi_stats(&s);
		if (s.notified > before)
			return;
		nanosleep(&pause, NULL);
	}
	fprintf(stderr, "ofi-stale: the invalidation never reached notify()\n");
	exit(2);
}

int main(void)
{
	const char *prov = getenv("UMMUNOTIFY_OFI_PROVIDER");
	struct fab owner, peer;
	struct fid_mr *mr, *dst_mr;
	struct umn_ofi_stats s;
	uint64_t key, old_key;
	char fill, got;
	int ret, round, stale = 0;
	void *buf, *dst;

	if (!prov)
		prov = "verbs;ofi_rxm";
	ret = fab_open(&owner, prov);
	if (ret == -FI_ENODATA) {
		fprintf(stderr, "ofi-stale: no %s endpoint (no RDMA device?)\n",
			prov);
		return 4;
	}
	if (ret)
		die("fab_open", ret);
	ret = fab_open(&peer, prov);
	if (!ret)
		ret = fab_pair(&owner, &peer);
	if (ret)
		die("fab_open/fab_pair", ret);

	dst = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dst == MAP_FAILED || buf == MAP_FAILED)
		die("mmap", -errno);
	ret = fab_reg(&peer, dst, LEN, &dst_mr);
	if (ret)
		die("fi_mr_reg (peer)", ret);

	memset(buf, 'A', LEN);
	ret = fab_reg(&owner, buf, LEN, &mr);
	if (ret)
		die("fi_mr_reg", ret);
	old_key = fi_mr_key(mr);
	got = peer_reads(&owner, &peer, dst, dst_mr, buf, old_key);
	fi_close(&mr->fid);
	ret = fab_reg(&owner, buf, LEN, &mr);
	if (ret)
		die("fi_mr_reg", ret);
	if (got != 'A' || fi_mr_key(mr) != old_key) {
		fprintf(stderr, "ofi-stale: no MR cache here (read '%c', key %#llx then %#llx)\n",
			got, (unsigned long long)old_key,
			(unsigned long long)fi_mr_key(mr));
		return 2;
	}
	fi_close(&mr->fid);

	umn_ofi_stats(&s);
	printf("ofi-stale: %s, memory monitor: %s\n", prov,
	       s.started ? (s.abi ? "ummunotify (native ABI)" :
				    "ummunotify (2010 ABI)") :
			   "libfabric's own");

	/*
	 * Round 1 waits until the monitor's thread has passed the unmap to
	 * the cache (notify()); round 2 registers at once (valid()).
	 */
	for (round = 1, fill = 'B'; round <= 2; round++, fill++) {
		umn_ofi_stats(&s);
		remap(buf, fill);
		if (round == 1 && s.started)
			wait_notified(s.notified);
		ret = fab_reg(&owner, buf, LEN, &mr);
		if (ret)
			die("fi_mr_reg", ret);
		key = fi_mr_key(mr);
		got = peer_reads(&owner, &peer, dst, dst_mr, buf, key);
		printf("ofi-stale: round %d: %s registration (key %#llx), the peer reads '%c': %s\n",
		       round, key == old_key ? "cached" : "new",
		       (unsigned long long)key, got,
		       got == fill ? "the new pages" : "STALE, the old pages");
		stale += got != fill;
		old_key = key;
		fi_close(&mr->fid);
	}

	umn_ofi_stats(&s);
	if (s.started)
		printf("ofi-stale: monitor: %llu subscribes, %llu events, %llu ranges notified\n",
		       (unsigned long long)s.subscribes,
		       (unsigned long long)s.events,
		       (unsigned long long)s.notified);
	fi_close(&dst_mr->fid);
	fab_close(&peer);
	fab_close(&owner);
	return stale ? 1 : 0;
}
