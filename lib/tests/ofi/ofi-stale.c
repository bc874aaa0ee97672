// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The stale-data tests through libfabric's MR cache: a buffer is
 * registered (fi_mr_reg() on verbs;ofi_rxm, which caches), a peer reads
 * it by RDMA, then it is unmapped and new memory with new contents mapped
 * at the same address by raw system calls, which libc hooks (libfabric's
 * memhooks monitor) never see, and registered again.  The peer must read
 * the new contents.
 *
 *   ofi-stale remap    first with libc's munmap() and mmap(), which every
 *                      monitor sees (memhooks too: it shows that it is
 *                      at work); then twice by raw system calls: once
 *                      after the monitor's thread has passed the unmap to
 *                      the cache (notify()), once at once, saying which
 *                      of notify() and valid() caught it
 *   ofi-stale recycle  with FI_UMMUNOTIFY_MAX_WATCHES=2: the buffer's
 *                      watch is recycled while the owner's cache holds
 *                      it, the buffer replaced, and the peer's domain (a
 *                      second cache) registers it before the owner does
 *   ofi-stale hold     a registration cached, the program stops itself
 *                      (SIGSTOP) for umnstat --check to look at, and
 *                      exits 0 when continued; hold-closed, the same with
 *                      the domains closed first
 *   ofi-stale grow     with FI_MR_CACHE_MAX_COUNT above GROW_PAGES: more
 *                      registrations cached than the monitor's first
 *                      handle has watches; the pool must grow, retiring
 *                      none, and a buffer cached after, watched by a
 *                      later handle, is replaced: the peer reads it
 *   ofi-stale late     a registration cached, the domains are closed
 *                      after every destructor ran, ours and libfabric's
 *                      fi_fini() (from an exit handler registered by a
 *                      library's constructor, libofi-late.so): the
 *                      monitor must still be imported and running then,
 *                      must not pass the buffer's unmap to notify(),
 *                      whose locks fi_fini() destroyed, and the domains'
 *                      closing must stop it
 *
 * The program does not import the monitor: libfabric loads it as a
 * provider (FI_PROVIDER_PATH, or its provider directory).  It reads the
 * monitor's counters to show what the monitor did, and fails unless the
 * monitor in use is the one UMMUNOTIFY_OFI_MONITOR names: "ummunotify"
 * (the default) or "libfabric" (its own, which FI_MR_CACHE_MONITOR picks).
 * With FI_MR_CACHE_MONITOR=memhooks it also fails unless libc's munmap()
 * carries memhooks' patch (x86-64, aarch64).
 *
 * Exit status: 0 the peer read new data every time, 1 it read old data
 * after the raw system calls only (what a monitor that missed them gives:
 * FI_MR_CACHE_MONITOR=memhooks shows it), 2 anything else went wrong
 * (old data after libc's calls too: no monitor at work), 4 no RDMA device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_errno.h>

#include "fab.h"
#include "late.h"
#include "ummunotify-ofi.h"

#define LEN	(64 * 1024)

static void die(const char *what, int ret)
{
	fprintf(stderr, "ofi-stale: %s: %s\n", what, fi_strerror(-ret));
	exit(2);
}

static struct fab owner, peer;
static struct fid_mr *dst_mr;
static void *dst, *late_buf;

static struct umn_ofi_stats stats(void)
{
	struct umn_ofi_stats s;

	umn_ofi_stats(&s, sizeof(s));
	return s;
}

static void *map(void)
{
	void *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap", -errno);
	return p;
}

static struct fid_mr *reg(struct fab *f, void *buf)
{
	struct fid_mr *mr;
	int ret = fab_reg(f, buf, LEN, &mr);

	if (ret)
		die("fi_mr_reg", ret);
	return mr;
}

/* What the peer reads through the owner's mr of buf: its first byte. */
static char peer_reads(void *buf, struct fid_mr *mr)
{
	int ret;

	memset(dst, 0, LEN);
	ret = fab_read(&peer, &owner, dst, dst_mr, LEN,
		       fab_remote_addr(&owner, buf), fi_mr_key(mr));
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

/* The same through libc, whose munmap() and mmap() memhooks patches. */
static void libc_remap(void *buf, char fill)
{
	if (munmap(buf, LEN))
		die("munmap", -errno);
	if (mmap(buf, LEN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != buf)
		die("mmap", -errno);
	memset(buf, fill, LEN);
}

/*
 * Does libc's munmap() start with the jump libfabric's memhooks writes
 * (x86-64: mov $handler, %r11; jmp *%r11; aarch64: movz x15, then three
 * movk x15 loading the handler's address, br x15)?  -1: cannot tell on
 * this machine.
 */
static int memhooks_patched(void)
{
#ifdef __x86_64__
	const unsigned char *f = dlsym(RTLD_NEXT, "munmap");

	return f && f[0] == 0x49 && f[1] == 0xbb && f[10] == 0x41 &&
	       f[11] == 0xff && f[12] == 0xe3;
#elif defined(__aarch64__)
	const uint32_t *f = dlsym(RTLD_NEXT, "munmap");
	/* The instructions, their 16-bit immediates masked. */
	const uint32_t imm = 0xffffu << 5;

	return f && (f[0] & ~imm) == 0xd2e0000f &&
	       (f[1] & ~imm) == 0xf2c0000f && (f[2] & ~imm) == 0xf2a0000f &&
	       (f[3] & ~imm) == 0xf280000f && f[4] == 0xd61f01e0;
#else
	return -1;
#endif
}

/* Whether COND came true within 5 s, polled each millisecond. */
#define waited(cond) ({							\
	struct timespec _pause = { 0, 1000000 };			\
	int _i;								\
									\
	for (_i = 0; _i < 5000 && !(cond); _i++)			\
		nanosleep(&_pause, NULL);				\
	(cond);								\
})

/* What the monitor counted, for a wait that gave up. */
static void say_counts(void)
{
	struct umn_ofi_stats s = stats();

	fprintf(stderr, "ofi-stale: monitor: %llu watches, %llu subscribes (%llu refused), %llu events, %llu ranges notified, %llu failures\n",
		(unsigned long long)s.watches,
		(unsigned long long)s.subscribes,
		(unsigned long long)s.refused,
		(unsigned long long)s.events,
		(unsigned long long)s.notified,
		(unsigned long long)s.failures);
}

/*
 * A refused subscribe() leaves the changed watch to the monitor's thread,
 * which refuses the range again until it has notified and freed it.
 */
static void wait_retired(uint64_t watches)
{
	if (waited(stats().watches < watches))
		return;
	fprintf(stderr, "ofi-stale: the changed watch was never freed\n");
	say_counts();
	/* The rounds' lines so far, which _exit() would drop in a pipe. */
	fflush(stdout);
	_exit(2);
}

/*
 * The thread has passed the unmap to notify(), and freed the watch of
 * the range after it: until then the range is refused, and the check's
 * registration would stay uncached, so that the next round's unmap would
 * have no watch to fire (the thread counts the range notified before it
 * frees the watch).
 */
static void wait_notified(const struct umn_ofi_stats *before)
{
	if (!waited(stats().notified > before->notified)) {
		fprintf(stderr, "ofi-stale: the invalidation never reached notify()\n");
		say_counts();
		exit(2);
	}
	wait_retired(before->watches);
}

/*
 * Register buf again and report what the peer reads; true if stale.
 * *key: the key of the registration before, then this one's.
 */
static bool check(const char *round, void *buf, char fill, uint64_t *key)
{
	struct fid_mr *mr = reg(&owner, buf);
	char got = peer_reads(buf, mr);

	printf("ofi-stale: %s: %s registration (key %#llx), the peer reads '%c': %s\n",
	       round, fi_mr_key(mr) == *key ? "cached" : "new",
	       (unsigned long long)fi_mr_key(mr), got,
	       got == fill ? "the new pages" : "STALE, the old pages");
	*key = fi_mr_key(mr);
	fi_close(&mr->fid);
	return got != fill;
}

/* buf registered and read, closed, and found cached: its key. */
static uint64_t cache(void *buf, char fill)
{
	struct fid_mr *mr;
	uint64_t key;
	char got;

	memset(buf, fill, LEN);
	mr = reg(&owner, buf);
	key = fi_mr_key(mr);
	got = peer_reads(buf, mr);
	fi_close(&mr->fid);
	mr = reg(&owner, buf);
	if (got != fill || fi_mr_key(mr) != key) {
		fprintf(stderr, "ofi-stale: not cached (read '%c', key %#llx then %#llx)\n",
			got, (unsigned long long)key,
			(unsigned long long)fi_mr_key(mr));
		exit(2);
	}
	fi_close(&mr->fid);
	return key;
}

static int test_remap(void)
{
	void *buf = map();
	uint64_t key = cache(buf, 'A');
	struct umn_ofi_stats before;
	const char *by;
	bool stale;

	before = stats();
	libc_remap(buf, 'L');
	if (before.started)
		wait_notified(&before);
	if (check("round 0, libc's munmap()", buf, 'L', &key)) {
		fprintf(stderr, "ofi-stale: even libc's munmap() was missed: no monitor at work\n");
		exit(2);
	}

	before = stats();
	remap(buf, 'B');
	if (before.started)
		wait_notified(&before);
	stale = check("round 1, after notify()", buf, 'B', &key);

	before = stats();
	remap(buf, 'C');
	stale |= check("round 2, at once", buf, 'C', &key);
	by = stats().stale > before.stale ? "valid()" :
	     stats().notified > before.notified ? "notify()" : "nothing";
	if (before.started)
		printf("ofi-stale: round 2 was caught by %s\n", by);
	/*
	 * Round 1's registration was cached (its watch freed first), so the
	 * monitor must have caught round 2: else the round tested nothing.
	 */
	if (before.started && !strcmp(by, "nothing")) {
		fprintf(stderr, "ofi-stale: round 2 was caught by nothing: round 1's registration was not cached\n");
		say_counts();
		exit(2);
	}
	/*
	 * A monitor that refused every hit after an invalidation would pass
	 * the rounds above: the replaced buffer must be cached again.
	 */
	if (!stale) {
		if (stats().refused > before.refused)
			wait_retired(before.watches);
		cache(buf, 'D');
		printf("ofi-stale: round 3: cached again, the peer reads the new pages\n");
	}
	return stale;
}

/* Exit 2 unless the monitor counted what the test is about. */
static void need(bool happened, const char *what)
{
	if (happened)
		return;
	fprintf(stderr, "ofi-stale: %s\n", what);
	exit(2);
}

static int test_recycle(void)
{
	void *buf = map();
	uint64_t key = cache(buf, 'A');
	struct umn_ofi_stats before = stats();
	struct fid_mr *mr;
	int i;

	/* More ranges than watches: buf's watch is recycled. */
	for (i = 0; i < 8; i++)
		fi_close(&reg(&owner, memset(map(), i, LEN))->fid);
	printf("ofi-stale: %llu watches recycled\n",
	       (unsigned long long)(stats().recycled - before.recycled));
	need(stats().recycled > before.recycled, "no watch was recycled");
	remap(buf, 'B');
	/* The peer's own cache registers buf first. */
	before = stats();
	mr = reg(&peer, buf);
	fi_close(&mr->fid);
	need(stats().subscribes > before.subscribes,
	     "the peer's registration subscribed no range");
	return check("after recycling", buf, 'B', &key);
}

/* More than the 8192 watches of the monitor's first handle. */
#define GROW_PAGES	9000

static int test_grow(void)
{
	struct umn_ofi_stats before = stats();
	long page = sysconf(_SC_PAGESIZE);
	char *pages = mmap(NULL, GROW_PAGES * page, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct fid_mr *mr;
	uint64_t key;
	void *buf;
	int i, ret;

	if (pages == MAP_FAILED)
		die("mmap", -errno);
	memset(pages, 1, GROW_PAGES * page);
	for (i = 0; i < GROW_PAGES; i++) {
		ret = fab_reg(&owner, pages + i * page, page, &mr);
		if (ret)
			die("fi_mr_reg", ret);
		fi_close(&mr->fid);
	}
	printf("ofi-stale: grow: %d pages cached: %llu watches, room for %llu, %llu recycled\n",
	       GROW_PAGES, (unsigned long long)stats().watches,
	       (unsigned long long)stats().capacity,
	       (unsigned long long)(stats().recycled - before.recycled));
	need(stats().recycled == before.recycled, "watches in use were recycled");
	need(stats().watches >= GROW_PAGES, "a registration has no watch");
	buf = map();
	key = cache(buf, 'A');
	remap(buf, 'B');
	return check("after the pool grew", buf, 'B', &key);
}

/* Run after every destructor: see late.c. */
static void close_late(void)
{
	struct umn_ofi_stats before = stats();

	printf("ofi-stale: late: after the destructors: monitor %s, %s\n",
	       before.imported ? "imported" : "NOT imported",
	       before.started ? "started" : "NOT started");
	fflush(stdout);
	/* libfabric would stop it through the NULL pointer the close left. */
	if (!before.imported || !before.started)
		_exit(2);
	remap(late_buf, 'B');
	wait_retired(before.watches);
	printf("ofi-stale: late: the buffer's unmap %s notify()\n",
	       stats().notified > before.notified ? "WENT TO" : "did not go to");
	fi_close(&dst_mr->fid);
	fab_close(&peer);
	fab_close(&owner);
	printf("ofi-stale: late: the domains closed: monitor %s, %s\n",
	       stats().imported ? "still imported" : "no longer imported",
	       stats().started ? "started" : "stopped");
	fflush(stdout);
	/* Closing the import would take libfabric's destroyed mm_state_lock. */
	if (stats().notified > before.notified || !stats().imported ||
	    stats().started)
		_exit(2);
}

static int test_late(void)
{
	late_buf = map();
	cache(late_buf, 'A');
	late_at_exit(close_late);
	return 0;
}

/* Stopped while the caches hold a registration: see check-ofi. */
static int test_hold(bool closed)
{
	cache(map(), 'A');
	if (closed) {
		fi_close(&dst_mr->fid);
		fab_close(&peer);
		fab_close(&owner);
	}
	printf("ofi-stale: hold: a registration cached%s, stopping\n",
	       closed ? ", the domains closed" : "");
	fflush(stdout);
	raise(SIGSTOP);
	return 0;
}

int main(int argc, char **argv)
{
	const char *prov = getenv("UMMUNOTIFY_OFI_PROVIDER");
	const char *want = getenv("UMMUNOTIFY_OFI_MONITOR");
	const char *chosen = getenv("FI_MR_CACHE_MONITOR");
	bool ours;
	int ret, stale;

	if (argc != 2 || (strcmp(argv[1], "remap") &&
			  strcmp(argv[1], "recycle") && strcmp(argv[1], "late") &&
			  strcmp(argv[1], "hold") && strcmp(argv[1], "hold-closed") &&
			  strcmp(argv[1], "grow"))) {
		fprintf(stderr, "usage: ofi-stale remap|recycle|late|hold|hold-closed|grow\n");
		return 2;
	}
	if (!prov)
		prov = "verbs;ofi_rxm";
	if (!want)
		want = "ummunotify";
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
	dst = map();
	ret = fab_reg(&peer, dst, LEN, &dst_mr);
	if (ret)
		die("fi_mr_reg (peer)", ret);

	ours = stats().imported && stats().started;
	printf("ofi-stale: %s, libfabric %u.%u, %s, memory monitor: %s\n",
	       argv[1], FI_MAJOR(fi_version()), FI_MINOR(fi_version()), prov,
	       !ours ? "libfabric's own" :
	       stats().abi ? "ummunotify (native ABI)" : "ummunotify (2010 ABI)");
	if (ours != !strcmp(want, "ummunotify")) {
		fprintf(stderr, "ofi-stale: expected the %s monitor\n", want);
		return 2;
	}
	ret = memhooks_patched();
	printf("ofi-stale: libc's munmap(): %s\n",
	       ret < 0 ? "cannot tell whether memhooks patched it" :
	       ret ? "patched by libfabric's memhooks" : "not patched");
	if (!ours && chosen && !strcmp(chosen, "memhooks") && ret == 0) {
		fprintf(stderr, "ofi-stale: FI_MR_CACHE_MONITOR=memhooks, but memhooks is not in libc's munmap()\n");
		return 2;
	}

	if (!strcmp(argv[1], "late"))
		return test_late();
	if (!strcmp(argv[1], "hold"))
		return test_hold(false);
	if (!strcmp(argv[1], "hold-closed"))
		return test_hold(true);
	stale = !strcmp(argv[1], "remap") ? test_remap() :
		!strcmp(argv[1], "grow") ? test_grow() : test_recycle();
	if (ours)
		printf("ofi-stale: monitor: %llu subscribes (%llu refused), %llu events, %llu ranges notified, %llu hits refused\n",
		       (unsigned long long)stats().subscribes,
		       (unsigned long long)stats().refused,
		       (unsigned long long)stats().events,
		       (unsigned long long)stats().notified,
		       (unsigned long long)stats().stale);
	/* A stopped thread notifies all and fails safe: still not a pass. */
	if (ours) {
		need(!stats().failures, "the monitor's thread stopped on an error");
		need(!stats().overflows, "the monitor lost events");
	}
	fi_close(&dst_mr->fid);
	fab_close(&peer);
	fab_close(&owner);
	return stale ? 1 : 0;
}
