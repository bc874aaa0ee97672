// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libummunotify-verbs end to end, on a soft-RoCE device in a guest
 * (run it under with-rxe): an owner process registers a buffer through
 * the MR cache, a peer process RDMA-READs it over an RC queue pair.  The
 * owner then unmaps the buffer and maps different bytes at the same
 * address, looks it up again, and the peer must read the new bytes.
 * Again with the handles on the 2010 ABI (UMN_OPEN_LEGACY), and with one
 * watch of the whole address space (UMN_OPEN_WATCH_ALL).
 *
 * The same scenario runs again with invalidation off: the binding opens
 * its /dev/ummunotify handles through umn_open(), which this program
 * wraps (-Wl,--wrap=umn_open) to hand it a handle on the test double of
 * lib/tests/ instead, a source that reports nothing unless told.  Every
 * line of the cache and the binding runs as in production, only no
 * invalidation ever arrives: the peer must then read the stale bytes,
 * which shows that the test can tell.
 *
 * Access: an MR registered for local access only must not serve a
 * request for remote read.  The flags of each MR the cache returns are
 * those the binding passed to ibv_reg_mr_iova2(), which this program also
 * wraps to note them; the peer's READ through the local-only MR must be
 * refused where soft-RoCE refuses it for a plain ibv_reg_mr(), tried
 * first (5.10's rxe does not: there that half is a named skip).
 *
 * Last, fork: a child inherits the cache and the uverbs file, which it
 * shares with its parent; when the child's cache drops the inherited MR
 * and the child exits, the parent's MR must still serve the peer.
 *
 * Prints TAP; exits 0 when all pass, 1 when one fails, 4 (skip) without
 * an RDMA device or /dev/ummunotify.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ummunotify-verbs.h"
#include "../check.h"
#include "rc.h"

#define KSFT_SKIP	4
#define BUF_LEN		RC_MAX_READ
#define REMOTE_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)
#define MAX_DOUBLES	4

static unsigned int test_nr, failures;

/* Handles umn_open() gives while invalidation is off, to free at the end. */
static bool invalidation_off;
static struct umn_double *doubles[MAX_DOUBLES];
static unsigned int nr_doubles;

int __real_umn_open(struct umn **u, const struct umn_attr *attr);
int __wrap_umn_open(struct umn **u, const struct umn_attr *attr);

int __wrap_umn_open(struct umn **u, const struct umn_attr *attr)
{
	if (!invalidation_off)
		return __real_umn_open(u, attr);
	if (nr_doubles == MAX_DOUBLES)
		return -ENOSPC;
	return double_open(u, attr, &doubles[nr_doubles++]);
}

/*
 * The access flags of the latest MRs registered through ibv_reg_mr() with
 * flags the compiler cannot see (the binding's calls), newest last.
 */
#define MAX_NOTED	16
static struct {
	const struct ibv_mr *mr;
	unsigned int access;
} noted[MAX_NOTED];
static unsigned int nr_noted;

struct ibv_mr *__real_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t len, uint64_t iova,
				       unsigned int access);
struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t len, uint64_t iova,
				       unsigned int access);

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr,
				       size_t len, uint64_t iova,
				       unsigned int access)
{
	struct ibv_mr *mr = __real_ibv_reg_mr_iova2(pd, addr, len, iova,
						    access);

	if (mr) {
		noted[nr_noted % MAX_NOTED].mr = mr;
		noted[nr_noted % MAX_NOTED].access = access;
		nr_noted++;
	}
	return mr;
}

/* The flags MR was registered with, or -1 if it was not noted. */
static long access_of(const struct ibv_mr *mr)
{
	unsigned int i;

	for (i = nr_noted; i-- > 0 && i + MAX_NOTED >= nr_noted;)
		if (noted[i % MAX_NOTED].mr == mr)
			return noted[i % MAX_NOTED].access;
	return -1;
}

static void free_doubles(void)
{
	while (nr_doubles)
		double_free(doubles[--nr_doubles]);
}

static void ok(bool pass, const char *name)
{
	printf("%sok %u %s\n", pass ? "" : "not ", ++test_nr, name);
	fflush(stdout);
	failures += !pass;
}

static void skip(const char *name, const char *why)
{
	printf("ok %u %s # SKIP %s\n", ++test_nr, name, why);
	fflush(stdout);
}

static void bail_out(const char *what, int err)
{
	printf("Bail out! %s: %s\n", what, strerror(err));
	exit(1);
}

/* The owner's requests, answered with a struct reply and the bytes read. */
struct request {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;		/* 0: the peer exits */
};

struct reply {
	int32_t status;		/* IBV_WC_SUCCESS (0), other ibv_wc_status,
				 * or a negative errno */
};

struct peer {
	pid_t pid;
	int sock;
	struct rc rc;		/* the owner's end of the queue pair */
	char *seen;		/* BUF_LEN bytes, for what the peer read */
};

static void xfer(int fd, void *buf, size_t len, bool send)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = send ? write(fd, p, len) : read(fd, p, len);
		if (n <= 0)
			bail_out(send ? "write to the other process" :
					"read from the other process",
				 n ? errno : EPIPE);
		p += n;
		len -= n;
	}
}

/* Swap queue pair addresses over sock and connect. */
static int rc_meet(struct rc *rc, int sock)
{
	struct rc_addr mine, theirs;

	rc_addr(rc, &mine);
	xfer(sock, &mine, sizeof(mine), true);
	xfer(sock, &theirs, sizeof(theirs), false);
	return rc_connect(rc, &theirs);
}

static void peer_main(int sock)
{
	struct request req;
	struct reply reply;
	struct rc rc;
	int ret = rc_open(&rc);

	if (ret || (ret = rc_meet(&rc, sock))) {
		fprintf(stderr, "peer: queue pair: %s\n", strerror(-ret));
		_exit(1);
	}
	for (;;) {
		xfer(sock, &req, sizeof(req), false);
		if (!req.len)
			break;
		reply.status = rc_read(&rc, req.addr, req.rkey, req.len);
		xfer(sock, &reply, sizeof(reply), true);
		if (reply.status == IBV_WC_SUCCESS)
			xfer(sock, rc.buf, req.len, true);
	}
	rc_close(&rc);
	_exit(0);
}

static void peer_start(struct peer *p)
{
	int sv[2], ret;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		bail_out("socketpair", errno);
	p->pid = fork();
	if (p->pid < 0)
		bail_out("fork", errno);
	if (!p->pid) {
		close(sv[0]);
		peer_main(sv[1]);
	}
	close(sv[1]);
	p->sock = sv[0];
	p->seen = malloc(BUF_LEN);
	if (!p->seen)
		bail_out("malloc", ENOMEM);
	ret = rc_open(&p->rc);
	if (ret || (ret = rc_meet(&p->rc, p->sock)))
		bail_out("owner's queue pair", -ret);
}

static void peer_stop(struct peer *p)
{
	struct request bye = { 0 };
	int status;

	xfer(p->sock, &bye, sizeof(bye), true);
	close(p->sock);
	if (waitpid(p->pid, &status, 0) < 0 || status)
		bail_out("the peer failed", ECHILD);
	rc_close(&p->rc);
	free(p->seen);
}

/* The peer RDMA-READs len bytes at addr through rkey into out. */
static int peer_read(struct peer *p, const void *addr, uint32_t rkey,
		     size_t len, char *out)
{
	struct request req = { (uintptr_t)addr, rkey, len };
	struct reply reply;

	xfer(p->sock, &req, sizeof(req), true);
	xfer(p->sock, &reply, sizeof(reply), false);
	if (reply.status == IBV_WC_SUCCESS)
		xfer(p->sock, out, len, false);
	return reply.status;
}

static char *map_filled(void *where, char c)
{
	char *p = mmap(where, BUF_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED : 0),
		       -1, 0);

	if (p == MAP_FAILED)
		bail_out("mmap", errno);
	memset(p, c, BUF_LEN);
	return p;
}

/* Did the peer read BUF_LEN bytes of c? */
static bool holds(const char *data, char c)
{
	size_t i;

	for (i = 0; i < BUF_LEN; i++)
		if (data[i] != c)
			return false;
	return true;
}

static struct ibv_mr *get_mr(struct umn_mr_cache *c, void *addr, int access,
			     struct umn_mr_ref **ref)
{
	struct ibv_mr *mr = umn_reg_mr_cached(c, addr, BUF_LEN, access, ref);

	if (!mr)
		bail_out("umn_reg_mr_cached", errno);
	return mr;
}

static void print_stats(const struct umn_cache_stats *s)
{
	printf("# hits %llu, misses %llu, invalidations %llu, "
	       "registrations %llu, deregistrations %llu\n",
	       (unsigned long long)s->hits, (unsigned long long)s->misses,
	       (unsigned long long)s->invalidations,
	       (unsigned long long)s->registrations,
	       (unsigned long long)s->deregistrations);
}

static void destroy(struct umn_mr_cache *c)
{
	int ret = umn_mr_cache_destroy(c);

	if (ret)
		bail_out("umn_mr_cache_destroy", ret);
}

/* A peer, and a cache on the protection domain of its queue pair. */
static struct umn_mr_cache *peer_cache(struct peer *p,
				       const struct umn_mr_cache_attr *attr)
{
	struct umn_mr_cache *c;

	peer_start(p);
	c = umn_mr_cache_create(p->rc.pd, attr);
	if (!c)
		bail_out("umn_mr_cache_create", errno);
	return c;
}

/* How the cache's handles are opened, and whether they report anything. */
struct mode {
	const char *name;
	bool invalidate;
	uint32_t flags;		/* umn_attr.flags */
};

static void scenario_remap(const struct mode *mode)
{
	struct umn_mr_cache_attr attr = { .umn.flags = mode->flags };
	char *seen, name[160];
	struct umn_cache_stats stats;
	struct umn_mr_cache *c;
	struct umn_mr_ref *ref;
	struct ibv_mr *mr, *again;
	struct peer peer;
	char *buf;
	int status;

	invalidation_off = !mode->invalidate;
	c = peer_cache(&peer, &attr);
	seen = peer.seen;

	buf = map_filled(NULL, 'A');
	mr = get_mr(c, buf, REMOTE_ACCESS, &ref);
	status = peer_read(&peer, buf, mr->rkey, BUF_LEN, seen);
	snprintf(name, sizeof(name),
		 "%s: the peer reads the registered buffer", mode->name);
	ok(status == IBV_WC_SUCCESS && holds(seen, 'A'), name);
	umn_mr_put(ref);

	again = get_mr(c, buf, REMOTE_ACCESS, &ref);
	umn_mr_cache_stats(c, &stats);
	snprintf(name, sizeof(name),
		 "%s: a second lookup is a hit on the same MR", mode->name);
	ok(again == mr && stats.hits == 1 && stats.misses == 1, name);
	umn_mr_put(ref);

	/* Free it and map new bytes at the same address, as malloc may. */
	if (munmap(buf, BUF_LEN))
		bail_out("munmap", errno);
	map_filled(buf, 'B');
	mr = get_mr(c, buf, REMOTE_ACCESS, &ref);
	status = peer_read(&peer, buf, mr->rkey, BUF_LEN, seen);
	umn_mr_cache_stats(c, &stats);
	printf("# after the remap the peer reads \"%.4s...\" (status %d), "
	       "the buffer holds \"%.4s...\"\n",
	       status == IBV_WC_SUCCESS ? seen : "????", status, buf);
	print_stats(&stats);
	if (mode->invalidate) {
		snprintf(name, sizeof(name), "%s: after munmap and a new "
			 "mapping at the address, the peer reads the new bytes",
			 mode->name);
		ok(status == IBV_WC_SUCCESS && holds(seen, 'B') &&
		   stats.invalidations == 1 && stats.misses == 2 &&
		   stats.deregistrations == 1, name);
	} else {
		snprintf(name, sizeof(name), "%s: after munmap and a new "
			 "mapping at the address, the peer reads the stale "
			 "bytes", mode->name);
		ok(status == IBV_WC_SUCCESS && holds(seen, 'A') &&
		   stats.invalidations == 0 && stats.hits == 2, name);
	}
	umn_mr_put(ref);

	destroy(c);
	free_doubles();
	munmap(buf, BUF_LEN);
	peer_stop(&peer);
}

/*
 * The status of a peer's READ through an MR registered without
 * IBV_ACCESS_REMOTE_READ: does soft-RoCE refuse it?  Asked of a plain
 * ibv_reg_mr(), no library involved, over a queue pair of its own: a
 * refused READ leaves both of its ends in the error state.
 */
static int local_only_read_status(char *buf)
{
	struct peer probe;
	struct ibv_mr *mr;
	int status;

	peer_start(&probe);
	mr = ibv_reg_mr(probe.rc.pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("ibv_reg_mr", errno);
	status = peer_read(&probe, buf, mr->rkey, BUF_LEN, probe.seen);
	printf("# the peer's read through a plain local-only MR gets "
	       "status %d\n", status);
	if (ibv_dereg_mr(mr))
		bail_out("ibv_dereg_mr", errno);
	peer_stop(&probe);
	return status;
}

/*
 * An MR made for local access only has no remote key: returned for a
 * request that asks for remote read, it would fail the peer's READ.
 */
static void scenario_access(void)
{
	char *seen, *buf = map_filled(NULL, 'C');
	struct umn_mr_ref *local_ref, *remote_ref, *ref;
	struct ibv_mr *local, *remote;
	struct umn_cache_stats stats;
	struct umn_mr_cache *c;
	struct peer peer;
	int plain = local_only_read_status(buf);
	char why[160];

	invalidation_off = false;
	c = peer_cache(&peer, NULL);
	seen = peer.seen;

	local = get_mr(c, buf, IBV_ACCESS_LOCAL_WRITE, &local_ref);
	remote = get_mr(c, buf, REMOTE_ACCESS, &remote_ref);
	umn_mr_cache_stats(c, &stats);
	ok(remote != local && stats.misses == 2 && stats.hits == 0,
	   "access: an MR with fewer access flags than asked is not returned");

	ok(get_mr(c, buf, IBV_ACCESS_LOCAL_WRITE, &ref) == local,
	   "access: a request with the same flags hits the MR made for them");
	umn_mr_put(ref);

	ok(access_of(local) == IBV_ACCESS_LOCAL_WRITE &&
	   access_of(remote) == REMOTE_ACCESS,
	   "access: each MR returned was registered with the flags asked");

	ok(peer_read(&peer, buf, remote->rkey, BUF_LEN, seen) ==
	   IBV_WC_SUCCESS && holds(seen, 'C'),
	   "access: the peer reads through the MR made for remote read");

	/* Last: a refused READ leaves both queue pairs in the error state. */
	if (plain == IBV_WC_REM_ACCESS_ERR) {
		ok(peer_read(&peer, buf, local->rkey, BUF_LEN, seen) ==
		   IBV_WC_REM_ACCESS_ERR,
		   "access: the peer's read through the local-only MR is "
		   "refused");
	} else {
		snprintf(why, sizeof(why), "this kernel's rxe does not "
			 "refuse a read through a plain local-only MR: status "
			 "%d, not %d", plain, IBV_WC_REM_ACCESS_ERR);
		skip("access: the peer's read through the local-only MR is "
		     "refused", why);
	}

	umn_mr_put(local_ref);
	umn_mr_put(remote_ref);
	destroy(c);
	munmap(buf, BUF_LEN);
	peer_stop(&peer);
}

/*
 * A forked child's cache drops what it inherited without deregistering:
 * ibv_dereg_mr() there would go through the uverbs file the child
 * shares with its parent, and destroy the parent's MR.
 */
static void scenario_fork(const struct mode *mode)
{
	struct umn_mr_cache_attr attr = { .umn.flags = mode->flags };
	char name[160];
	char *seen, *buf = map_filled(NULL, 'F');
	struct umn_cache_stats stats;
	struct umn_mr_cache *c;
	struct umn_mr_ref *ref;
	struct ibv_mr *mr;
	struct peer peer;
	int status;
	pid_t pid;

	invalidation_off = false;
	c = peer_cache(&peer, &attr);
	seen = peer.seen;
	mr = get_mr(c, buf, REMOTE_ACCESS, &ref);
	umn_mr_put(ref);

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork", errno);
	if (!pid) {
		/* Drops the inherited MR: the next drain, and the destroy. */
		umn_mr_cache_stats(c, &stats);
		_exit(stats.entries == 1 && !umn_mr_cache_destroy(c) ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) != pid)
		bail_out("waitpid", errno);
	snprintf(name, sizeof(name),
		 "%s, fork: the child's cache drops the MR it inherited",
		 mode->name);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, name);

	snprintf(name, sizeof(name),
		 "%s, fork: the parent's next lookup is a hit on its MR",
		 mode->name);
	ok(get_mr(c, buf, REMOTE_ACCESS, &ref) == mr, name);
	umn_mr_put(ref);
	umn_mr_cache_stats(c, &stats);
	print_stats(&stats);

	status = peer_read(&peer, buf, mr->rkey, BUF_LEN, seen);
	printf("# after the child exited the peer's read gets status %d\n",
	       status);
	snprintf(name, sizeof(name), "%s, fork: after the child exits, the "
		 "parent's MR serves the peer's RDMA READ", mode->name);
	ok(status == IBV_WC_SUCCESS && holds(seen, 'F'), name);

	destroy(c);
	munmap(buf, BUF_LEN);
	peer_stop(&peer);
}

/* Skip, rather than fail, where there is nothing to test on. */
static void skip_unless_ready(void)
{
	struct umn *u;
	struct rc rc;
	int ret;

	ret = rc_open(&rc);
	if (ret) {
		printf("1..0 # SKIP no RoCE device with an IPv4 address "
		       "(run under lib/tests/rdma/with-rxe): %s\n",
		       strerror(-ret));
		exit(KSFT_SKIP);
	}
	rc_close(&rc);
	ret = __real_umn_open(&u, NULL);
	if (ret) {
		printf("1..0 # SKIP /dev/ummunotify: %s\n", strerror(-ret));
		exit(KSFT_SKIP);
	}
	umn_close(u);
}

int main(void)
{
	static const struct mode modes[] = {
		{ "invalidation on", true, 0 },
		{ "invalidation on, 2010 ABI", true, UMN_OPEN_LEGACY },
		{ "invalidation on, whole address space", true,
		  UMN_OPEN_WATCH_ALL },
		{ "invalidation off", false, 0 },
	};
	unsigned int i;

	printf("TAP version 13\n");
	skip_unless_ready();
	printf("1..23\n");
	fflush(stdout);
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		scenario_remap(&modes[i]);
	scenario_access();
	scenario_fork(&modes[0]);
	scenario_fork(&modes[2]);
	return failures ? 1 : 0;
}
