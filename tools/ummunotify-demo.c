// SPDX-License-Identifier: GPL-2.0
/*
 * A registration cache catching an munmap, in thirty lines of output.
 *
 * The "NIC registration" here is a copy of the buffer's contents taken
 * when the buffer is registered: like a real one, it keeps describing the
 * old memory after the application unmaps and remaps the address.  The
 * cache asks /dev/ummunotify whether anything changed: one load of the
 * counter page on every lookup, read() only when the counter moved.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#define BUF_LEN		(64 * 1024)
#define MAX_ENTRIES	16

struct entry {
	uintptr_t start, end;
	uint64_t cookie;
	char snapshot[16];	/* what the "NIC" sees */
	int valid;
};

static struct {
	int fd;
	volatile const uint64_t *counter;
	uint64_t seen;		/* counter value of the last LAST event */
	uint64_t next_cookie;
	struct entry entries[MAX_ENTRIES];
	unsigned int hits, misses, invalidations;
} cache;

static void die(const char *what)
{
	fprintf(stderr, "ummunotify-demo: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* The only system calls a hit ever costs: none, unless the counter moved. */
static void cache_sync(void)
{
	struct ummunotify_event ev[8];
	ssize_t n;

	if (*cache.counter == cache.seen)
		return;
	printf("    counter %llu -> %llu: the kernel says something changed\n",
	       (unsigned long long)cache.seen,
	       (unsigned long long)*cache.counter);
	for (;;) {
		n = read(cache.fd, ev, sizeof(ev));
		if (n < 0)
			die("read");
		for (int i = 0; i < n / (ssize_t)sizeof(ev[0]); i++) {
			if (ev[i].type == UMMUNOTIFY_EVENT_TYPE_LAST) {
				cache.seen = ev[i].user_cookie_counter;
				return;
			}
			for (int j = 0; j < MAX_ENTRIES; j++) {
				struct entry *e = &cache.entries[j];

				if (!e->valid ||
				    e->cookie != ev[i].user_cookie_counter)
					continue;
				printf("    INVAL cookie %llu [%#llx, %#llx): entry dropped\n",
				       (unsigned long long)e->cookie,
				       (unsigned long long)ev[i].hint_start,
				       (unsigned long long)ev[i].hint_end);
				ioctl(cache.fd, UMMUNOTIFY_UNREGISTER_REGION,
				      &e->cookie);
				e->valid = 0;
				cache.invalidations++;
			}
		}
	}
}

static struct entry *cache_get(void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	struct ummunotify_register_ioctl r = { .start = start, .end = end };
	struct entry *free_slot = NULL;

	cache_sync();
	for (int j = 0; j < MAX_ENTRIES; j++) {
		struct entry *e = &cache.entries[j];

		if (e->valid && e->start <= start && end <= e->end) {
			cache.hits++;
			printf("    cache hit, cookie %llu\n",
			       (unsigned long long)e->cookie);
			return e;
		}
		if (!e->valid && !free_slot)
			free_slot = e;
	}
	if (!free_slot) {
		errno = ENOSPC;
		die("cache full");
	}
	/* Watch first, then register: an munmap in between is caught. */
	r.user_cookie = ++cache.next_cookie;
	if (ioctl(cache.fd, UMMUNOTIFY_REGISTER_REGION, &r))
		die("UMMUNOTIFY_REGISTER_REGION");
	*free_slot = (struct entry){ start, end, r.user_cookie, { 0 }, 1 };
	memcpy(free_slot->snapshot, addr, sizeof(free_slot->snapshot) - 1);
	cache.misses++;
	printf("    cache miss: registered [%#lx, +%zu KiB) as cookie %llu\n",
	       (unsigned long)start, len / 1024,
	       (unsigned long long)r.user_cookie);
	return free_slot;
}

static void *map_filled(void *where, char c)
{
	void *p = mmap(where, BUF_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED : 0),
		       -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	memset(p, c, BUF_LEN);
	return p;
}

int main(void)
{
	struct entry *e;
	char *buf;

	cache.fd = open("/dev/ummunotify", O_RDONLY);
	if (cache.fd < 0)
		die("open /dev/ummunotify (is the module loaded?)");
	cache.counter = mmap(NULL, sizeof(uint64_t), PROT_READ, MAP_SHARED,
			     cache.fd, 0);
	if (cache.counter == MAP_FAILED)
		die("mmap counter");

	printf("ummunotify demo: a registration cache learns of an munmap from the kernel\n\n");
	buf = map_filled(NULL, 'A');
	printf("1. send from a new buffer (contents \"AAAA...\")\n");
	cache_get(buf, BUF_LEN);
	printf("2. send from it again\n");
	cache_get(buf, BUF_LEN);

	printf("3. free it (munmap) and get new memory at the same address (\"BBBB...\")\n");
	if (munmap(buf, BUF_LEN))
		die("munmap");
	map_filled(buf, 'B');

	printf("4. send from it again\n");
	e = cache_get(buf, BUF_LEN);
	printf("    the NIC now sends \"%.4s...\", the buffer holds \"%.4s...\": %s\n\n",
	       e->snapshot, buf,
	       memcmp(e->snapshot, buf, 4) ? "STALE DATA" : "correct");

	printf("hits %u, misses %u, invalidations %u\n", cache.hits,
	       cache.misses, cache.invalidations);
	return !(cache.hits == 1 && cache.misses == 2 &&
		 cache.invalidations == 1 && !memcmp(e->snapshot, buf, 4));
}
