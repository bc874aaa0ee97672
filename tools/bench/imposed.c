// SPDX-License-Identifier: GPL-2.0
/*
 * 11. The work one user's watches add to another user's invalidation
 * (issue 22, finding 3): a process watches pages of a shared file, and a
 * process of another uid truncates the file, which unmaps the pages in
 * the watcher's address space (twice on shmem: before and after it
 * drops the page cache).  The truncate returns only after the watcher's
 * notifier has published every watch the range covered, so its time
 * grows with the watches; what bounds it is the watcher's budget
 * (max_user_watches).  The watcher does not read its ring: once it is
 * full, a watch costs an event dropped, not one written and a wake-up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

#include "bench.h"
#include "report.h"

/* Truncations timed per repetition: two unmapping walks each. */
#define TRUNCATES	10
/* The truncating process's uid: anybody but the watcher. */
#define OTHER_UID	65534

static const unsigned int lives[] = { 0, 1000, 100000, 1000000 };
#define NR_LIVES	ARRAY_SIZE(lives)

struct imposed_out {
	double truncate[NR_LIVES][REPS];
	double getpid[REPS];
};

/* What the truncating child is given. */
struct imposed_arg {
	int fd;			/* the file */
	char *area;		/* the watcher's mapping of it, inherited */
	size_t len;
	size_t level;		/* which of lives[] is watched */
};

/*
 * In a process of another uid: the file cut to nothing (unmapping every
 * page of it in the watcher's address space) and grown back (which
 * unmaps nothing), TRUNCATES times a repetition.
 */
static void truncate_child(const void *arg)
{
	const struct imposed_arg *a = arg;
	struct imposed_out *out = shared;
	uint64_t t;
	int r, k;

	/* Its copy of the mapping, which no watch covers, goes first. */
	if (munmap(a->area, a->len))
		fail("munmap", -errno);
	if (setresgid(OTHER_UID, OTHER_UID, OTHER_UID) ||
	    setresuid(OTHER_UID, OTHER_UID, OTHER_UID))
		fail("setresuid", -errno);
	for (r = 0; r < REPS; r++) {
		t = now_ns();
		for (k = 0; k < TRUNCATES; k++)
			if (ftruncate(a->fd, 0) || ftruncate(a->fd, a->len))
				fail("ftruncate", -errno);
		out->truncate[a->level][r] = (double)(now_ns() - t) / TRUNCATES;
		out->getpid[r] = getpid_ns();
	}
}

/*
 * The watcher: watches on distinct pages of its MAP_SHARED mapping of
 * the file, more at each step, and the other user's truncations timed
 * in a child.  The watches stay in the module's tree when reported
 * changed, so every truncation walks them all.
 */
static void imposed_child(const void *arg)
{
	const struct backend *b = arg;
	unsigned int n = 0;
	struct imposed_arg a = { .len = (size_t)lives[NR_LIVES - 1] * page };
	struct region *live = calloc(lives[NR_LIVES - 1], sizeof(*live));
	struct region outside;

	if (!live)
		fail("calloc", -ENOMEM);
	a.fd = memfd_create("umn-bench-imposed", MFD_CLOEXEC);
	if (a.fd < 0 || ftruncate(a.fd, a.len))
		fail("memfd", -errno);
	a.area = mmap(NULL, a.len, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0);
	if (a.area == MAP_FAILED)
		fail("mmap", -errno);
	open_backend(b, lives[NR_LIVES - 1] + 1);
	/* The notifier's fixed cost in every step, 0 watches included. */
	watch(b, &outside, map(page), page);
	for (a.level = 0; a.level < NR_LIVES; a.level++) {
		for (; n < lives[a.level]; n++)
			watch(b, &live[n], a.area + (size_t)n * page, page);
		in_child(truncate_child, &a);
	}
	b->close();
}

void measure_imposed(void)
{
	static const struct backend *const watched[] = {
		&native_backend, &legacy_backend,
	};
	struct imposed_out *out = shared;
	double med[NR_LIVES], added[REPS];
	struct summary s;
	char what[64];
	size_t i;
	int r;

	section(11,
		"Another user's truncate of a file with many watches on its pages");
	for_each(b, watched) {
		in_child(imposed_child, *b);
		for (i = 0; i < NR_LIVES; i++) {
			snprintf(what, sizeof(what), "truncate, %u watches",
				 lives[i]);
			med[i] = row((*b)->name, what, "ns", out->truncate[i],
				     REPS).med;
		}
		/* What each watch of the largest step added, rep by rep. */
		for (r = 0; r < REPS; r++)
			added[r] = (out->truncate[NR_LIVES - 1][r] - med[0]) /
				   lives[NR_LIVES - 1];
		s = ratio_row((*b)->name, "added by a watch", "getpid", added,
			      out->getpid, REPS);
		note("%s: a truncate %.0f getpid()s longer at a user's bound",
		     (*b)->name, s.med * 1048576);
	}
	note("(the bound: max_user_watches, whose largest default is 1048576).");
	note("A truncate of a memfd unmaps twice: two walks of the watches.");
	note("kdreg2 is not measured: its notifier drops the regions it reports,");
	note("so only the first truncate would walk them.");
}
