// SPDX-License-Identifier: GPL-2.0
/*
 * A registration cache catching an munmap, in about fifteen lines.
 *
 * With an RDMA device (make demo sets up a soft-RoCE one in the guest,
 * with lib/tests/rdma/with-rxe), the buffer is registered with
 * ibv_reg_mr() through libummunotify-verbs, and a second queue pair, the
 * peer, reads it with RDMA READ.  Without one, a stand-in: registering
 * copies the buffer, and the peer reads the copy; like a real
 * registration, it keeps describing the old memory after an munmap.
 *
 * The demo holds on to the first registration while the cache replaces
 * it, so the peer can read through both: the old one shows what a cache
 * that missed the munmap would send.  Exits 1 if the cache missed it.
 *
 * With --hold, it then waits for the end of its standard input before
 * exiting, the cache still open: umnstat(8) can look at it meanwhile.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <ummunotify.h>
#ifdef UMN_HAVE_VERBS
#include <ummunotify-verbs.h>
#include "rc.h"
#endif

#define BUF_LEN		(64 * 1024)
#define MAX_COPIES	8

/* The cache and the peer, whichever the NIC. */
struct nic {
	char name[96];
	/* Look [addr, +BUF_LEN) up in the cache: a reference, and a key. */
	void *(*get)(void *addr, uint32_t *key);
	void (*put)(void *ref);
	/* The peer reads BUF_LEN bytes at addr through key into out. */
	bool (*read)(void *addr, uint32_t key, char *out);
	void (*stats)(struct umn_cache_stats *stats);
};

static void die(const char *what, int err)
{
	fprintf(stderr, "ummunotify-demo: %s: %s\n", what, strerror(err));
	exit(1);
}

/* The stand-in NIC: a registration is a copy, its key an index here. */
static struct umn_cache *copy_cache;
static char *copies[MAX_COPIES];

static int copy_reg(void *arg, void *addr, size_t len, void **handle)
{
	uint32_t key = 1;

	(void)arg;
	while (key < MAX_COPIES && copies[key])
		key++;
	if (key == MAX_COPIES)
		return -ENOSPC;
	copies[key] = malloc(len);
	if (!copies[key])
		return -ENOMEM;
	memcpy(copies[key], addr, len);
	*handle = (void *)(uintptr_t)key;
	return 0;
}

static void copy_dereg(void *arg, void *addr, size_t len, void *handle)
{
	uint32_t key = (uintptr_t)handle;

	(void)arg;
	(void)addr;
	(void)len;
	free(copies[key]);
	copies[key] = NULL;
}

static void *copy_get(void *addr, uint32_t *key)
{
	struct umn_cache_entry *e;
	int ret = umn_cache_get(copy_cache, addr, BUF_LEN, &e);

	if (ret)
		die("umn_cache_get", -ret);
	*key = (uintptr_t)e->handle;
	return e;
}

static void copy_put(void *ref)
{
	umn_cache_put(copy_cache, ref);
}

static bool copy_read(void *addr, uint32_t key, char *out)
{
	(void)addr;
	memcpy(out, copies[key], BUF_LEN);
	return true;
}

static void copy_stats(struct umn_cache_stats *stats)
{
	umn_cache_stats(copy_cache, stats);
}

static void open_stand_in(struct nic *nic)
{
	struct umn_cache_attr attr = { .reg = copy_reg, .dereg = copy_dereg };
	struct umn *u;
	int ret = umn_open(&u, NULL);

	if (ret)
		die("/dev/ummunotify (is the module loaded?)", -ret);
	ret = umn_cache_create(u, &attr, &copy_cache);
	if (ret)
		die("umn_cache_create", -ret);
	*nic = (struct nic){
		.name = "a stand-in NIC (no RDMA device): registering copies the buffer",
		.get = copy_get, .put = copy_put, .read = copy_read,
		.stats = copy_stats,
	};
}

#ifdef UMN_HAVE_VERBS
/* The real thing: the owner's MRs, read by the peer's queue pair. */
static struct rc owner, peer;
static struct umn_mr_cache *mr_cache;

static void *mr_get(void *addr, uint32_t *key)
{
	struct umn_mr_ref *ref;
	struct ibv_mr *mr = umn_reg_mr_cached(mr_cache, addr, BUF_LEN,
					      IBV_ACCESS_LOCAL_WRITE |
					      IBV_ACCESS_REMOTE_READ, &ref);

	if (!mr)
		die("umn_reg_mr_cached", errno);
	*key = mr->rkey;
	return ref;
}

static void mr_put(void *ref)
{
	umn_mr_put(ref);
}

static bool mr_read(void *addr, uint32_t key, char *out)
{
	if (rc_read(&peer, (uintptr_t)addr, key, BUF_LEN))
		return false;
	memcpy(out, peer.buf, BUF_LEN);
	return true;
}

static void mr_stats(struct umn_cache_stats *stats)
{
	umn_mr_cache_stats(mr_cache, stats);
}

/* False if there is no RoCE device to use. */
static bool open_rdma(struct nic *nic)
{
	struct rc_addr owner_addr, peer_addr;
	int ret;

	if (rc_open(&owner))
		return false;
	ret = rc_open(&peer);
	if (ret)
		die("the peer's queue pair", -ret);
	rc_addr(&owner, &owner_addr);
	rc_addr(&peer, &peer_addr);
	ret = rc_connect(&owner, &peer_addr);
	if (!ret)
		ret = rc_connect(&peer, &owner_addr);
	if (ret)
		die("connecting the queue pairs", -ret);
	mr_cache = umn_mr_cache_create(owner.pd, NULL);
	if (!mr_cache)
		die("umn_mr_cache_create (is the module loaded?)", errno);
	*nic = (struct nic){
		.get = mr_get, .put = mr_put, .read = mr_read,
		.stats = mr_stats,
	};
	snprintf(nic->name, sizeof(nic->name),
		 "%s (ibv_reg_mr(), RDMA READ by a peer queue pair)",
		 ibv_get_device_name(owner.ctx->device));
	return true;
}
#endif

static void open_nic(struct nic *nic)
{
#ifdef UMN_HAVE_VERBS
	if (open_rdma(nic))
		return;
#endif
	open_stand_in(nic);
}

static char *map_filled(void *where, char c)
{
	char *p = mmap(where, BUF_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED : 0),
		       -1, 0);

	if (p == MAP_FAILED)
		die("mmap", errno);
	memset(p, c, BUF_LEN);
	return p;
}

/* A lookup, and what the cache did for it. */
static void *lookup(struct nic *nic, char *buf, uint32_t *key)
{
	struct umn_cache_stats before, after;
	void *ref;

	nic->stats(&before);
	ref = nic->get(buf, key);
	nic->stats(&after);
	if (after.invalidations > before.invalidations)
		printf("     the kernel reported the munmap: the cache dropped the old registration\n");
	if (after.misses > before.misses)
		printf("     miss: registered [%p, +%d KiB), key %#x\n", buf,
		       BUF_LEN / 1024, *key);
	else
		printf("     hit: key %#x\n", *key);
	return ref;
}

/* The peer reads through key: true if it gets what the buffer holds. */
static bool peer_reads(struct nic *nic, char *buf, uint32_t key,
		       const char *which, char *seen)
{
	bool read = nic->read(buf, key, seen);
	bool same = read && !memcmp(seen, buf, BUF_LEN);

	printf("     %s key %#x: \"%.4s...\"  %s\n", which, key,
	       read ? seen : "????", !read ? "(the read failed)" : same ?
	       "correct" : "STALE (what a cache that missed the munmap sends)");
	return same;
}

int main(int argc, char **argv)
{
	bool hold = argc > 1 && !strcmp(argv[1], "--hold");
	char *buf, *seen = malloc(BUF_LEN);
	struct umn_cache_stats stats;
	uint32_t old_key, key;
	void *old_ref, *ref;
	struct nic nic;
	bool fresh;

	if (!seen)
		die("malloc", ENOMEM);
	open_nic(&nic);
	printf("ummunotify demo on %s\n\n", nic.name);

	buf = map_filled(NULL, 'A');
	printf("1. register a %d KiB buffer holding \"AAAA...\" through the cache\n",
	       BUF_LEN / 1024);
	old_ref = lookup(&nic, buf, &old_key);
	printf("2. look it up again\n");
	nic.put(lookup(&nic, buf, &key));
	printf("3. munmap it, map new memory at the same address, fill it with \"BBBB...\"\n");
	if (munmap(buf, BUF_LEN))
		die("munmap", errno);
	map_filled(buf, 'B');
	printf("4. look it up again\n");
	ref = lookup(&nic, buf, &key);
	printf("5. the peer reads the buffer through the old key and the new one\n");
	peer_reads(&nic, buf, old_key, "old", seen);
	fresh = peer_reads(&nic, buf, key, "new", seen);
	nic.put(old_ref);
	nic.put(ref);

	nic.stats(&stats);
	printf("\ncache: hits %llu, misses %llu, invalidations %llu: %s\n",
	       (unsigned long long)stats.hits,
	       (unsigned long long)stats.misses,
	       (unsigned long long)stats.invalidations,
	       fresh && stats.invalidations == 1 ?
	       "the munmap was caught" : "FAILED: the munmap was missed");
	fflush(stdout);
	while (hold && getchar() != EOF)
		;
	return !(fresh && stats.invalidations == 1);
}
