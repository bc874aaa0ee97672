// SPDX-License-Identifier: GPL-2.0
/*
 * 8. Precision: on a scripted workload, registrations each backend
 * reports invalidated whose pages did not change, and changes it missed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "bench.h"
#include "report.h"

#define BUFS		8
#define BUF_PAGES	16
#define SLOT_PAGES	(BUF_PAGES + 1)	/* a buffer and a neighbour page */
#define HUGE		(2UL << 20)

/* A registration and the page frames it registered. */
struct reg {
	struct region e;
	uint64_t pfn[BUF_PAGES];
};

struct precision {
	double changed, false_positive, missed;
};

static int pagemap = -1;

/* 0: not present. */
static uint64_t pfn_of(const char *addr)
{
	uint64_t v;

	if (pread(pagemap, &v, sizeof(v), (uintptr_t)addr / page * sizeof(v)) !=
	    sizeof(v))
		fail("/proc/self/pagemap", -errno);
	return v >> 63 ? v & ((1ULL << 55) - 1) : 0;
}

static void remember_pages(struct reg *reg)
{
	int i;

	for (i = 0; i < BUF_PAGES; i++) {
		reg->pfn[i] = pfn_of(reg->e.addr + i * page);
		if (!reg->pfn[i])
			fail("no page frame numbers in pagemap: run as root", -EPERM);
	}
}

static bool pages_changed(const struct reg *reg)
{
	int i;

	for (i = 0; i < BUF_PAGES; i++)
		if (pfn_of(reg->e.addr + i * page) != reg->pfn[i])
			return true;
	return false;
}

static void op_fork(struct reg *regs)
{
	pid_t pid = fork();

	(void)regs;
	if (!pid)
		_exit(0);
	waitpid(pid, NULL, 0);
}

/* A copy-on-write break: the parent writes while the child shares. */
static void op_write_after_fork(struct reg *regs)
{
	int go[2];
	pid_t pid;
	char c;

	if (pipe(go))
		fail("pipe", -errno);
	pid = fork();
	if (!pid)
		_exit(read(go[0], &c, 1) != 1);
	regs[0].e.addr[0]++;
	if (write(go[1], "", 1) != 1)
		fail("pipe", -errno);
	waitpid(pid, NULL, 0);
	close(go[0]);
	close(go[1]);
}

static void op_mprotect(struct reg *regs)
{
	int i;

	for (i = 0; i < BUFS; i++) {
		mprotect(regs[i].e.addr, regs[i].e.len, PROT_READ);
		mprotect(regs[i].e.addr, regs[i].e.len, PROT_READ | PROT_WRITE);
	}
}

static void op_munmap_neighbour(struct reg *regs)
{
	munmap(regs[0].e.addr + BUF_PAGES * page, page);
}

static void op_madvise_neighbours(struct reg *regs)
{
	int i;

	for (i = 0; i < BUFS; i++)
		madvise(regs[i].e.addr + BUF_PAGES * page, page, MADV_DONTNEED);
}

static void op_madvise(struct reg *regs)
{
	int i;

	for (i = 0; i < BUFS; i++)
		madvise(regs[i].e.addr, regs[i].e.len, MADV_DONTNEED);
}

/* Each buffer moves one slot on, into the reservation's spare slot. */
static void op_mremap(struct reg *regs)
{
	int i;

	for (i = BUFS - 1; i >= 0; i--)
		if (mremap(regs[i].e.addr, regs[i].e.len, regs[i].e.len,
			   MREMAP_MAYMOVE | MREMAP_FIXED,
			   regs[i].e.addr + SLOT_PAGES * page) == MAP_FAILED)
			fail("mremap", -errno);
}

static void op_munmap(struct reg *regs)
{
	int i;

	for (i = 0; i < BUFS; i++)
		munmap(regs[i].e.addr, regs[i].e.len);
}

static const struct step {
	const char *name;
	void (*op)(struct reg *regs);
	bool in_huge_block;	/* all buffers in one aligned 2 MiB mapping */
} steps[] = {
	{ "fork", op_fork, false },
	{ "write after fork (copy-on-write)", op_write_after_fork, false },
	{ "mprotect read-only, then back", op_mprotect, false },
	{ "munmap of a neighbour, same 2 MiB", op_munmap_neighbour, true },
	{ "madvise(DONTNEED) of neighbours", op_madvise_neighbours, false },
	{ "madvise(DONTNEED) of the buffers", op_madvise, false },
	{ "mremap (move) of the buffers", op_mremap, false },
	{ "munmap of the buffers", op_munmap, false },
};
#define NR_STEPS	ARRAY_SIZE(steps)

/*
 * Buffers of BUF_PAGES pages, each followed by a neighbour page: in
 * mappings of their own between PROT_NONE gaps, or all in one mapping of
 * exactly an aligned 2 MiB block (a VMA split there splits the block's
 * transparent huge page first).  Spare room after the last buffer for
 * op_mremap.
 */
static char *map_buffers(const struct step *step, struct reg *regs,
			 size_t *len)
{
	size_t slot = SLOT_PAGES * page;
	char *base;
	int i;

	*len = 2 * HUGE;
	base = reserve(*len);
	if (step->in_huge_block) {
		char *block = (char *)(((uintptr_t)base + HUGE - 1) &
				       ~(HUGE - 1));

		map_fixed(block, HUGE);
		for (i = 0; i < BUFS; i++)
			regs[i].e.addr = block + i * slot;
	} else {
		for (i = 0; i < BUFS; i++) {
			regs[i].e.addr = base + i * (slot + page);
			map_fixed(regs[i].e.addr, slot);
		}
	}
	for (i = 0; i < BUFS; i++)
		touch(regs[i].e.addr, slot);
	return base;
}

static void precision_child(const void *arg)
{
	const struct backend *b = arg;
	struct precision *out = shared;
	struct reg regs[BUFS];
	size_t s, len;
	char *base;
	int i;

	pagemap = open("/proc/self/pagemap", O_RDONLY);
	if (pagemap < 0)
		fail("/proc/self/pagemap", -errno);
	open_backend(b, BUFS);
	for (s = 0; s < NR_STEPS; s++) {
		base = map_buffers(&steps[s], regs, &len);
		for (i = 0; i < BUFS; i++) {
			watch(b, &regs[i].e, regs[i].e.addr,
			      BUF_PAGES * page);
			remember_pages(&regs[i]);
		}
		steps[s].op(regs);
		/* userfaultfd's handler runs on its own time. */
		usleep(20000);
		b->drain(NULL);
		out[s] = (struct precision){ 0 };
		for (i = 0; i < BUFS; i++) {
			bool changed = pages_changed(&regs[i]);
			bool reported = !b->valid(&regs[i].e);

			out[s].changed += changed;
			out[s].false_positive += reported && !changed;
			out[s].missed += changed && !reported;
			b->unwatch(&regs[i].e);
		}
		munmap(base, len);
	}
	b->close();
}

void measure_precision(void)
{
	struct precision res[ARRAY_SIZE(all)][NR_STEPS];
	double fp, missed, changed;
	size_t k, s;
	char what[96];

	section(8, "Precision: registrations reported invalidated whose pages did not change");
	for (k = 0; k < ARRAY_SIZE(all); k++) {
		in_child(precision_child, all[k]);
		memcpy(res[k], shared, sizeof(res[k]));
	}
	printf("   %-36s %7s", "false positives / missed, of 8", "changed");
	for (k = 0; k < ARRAY_SIZE(all); k++)
		printf(" %9s", all[k]->name);
	printf("\n");
	for (s = 0; s < NR_STEPS; s++) {
		printf("   %-36s %7.0f", steps[s].name, res[0][s].changed);
		for (k = 0; k < ARRAY_SIZE(all); k++) {
			printf(" %5.0f/%-3.0f", res[k][s].false_positive,
			       res[k][s].missed);
			snprintf(what, sizeof(what), "%s: false positives",
				 steps[s].name);
			record(all[k]->name, what, "", &res[k][s].false_positive, 1);
			snprintf(what, sizeof(what), "%s: missed",
				 steps[s].name);
			record(all[k]->name, what, "", &res[k][s].missed, 1);
		}
		printf("\n");
	}
	for (k = 0; k < ARRAY_SIZE(all); k++) {
		fp = missed = changed = 0;
		for (s = 0; s < NR_STEPS; s++) {
			fp += res[k][s].false_positive;
			missed += res[k][s].missed;
			changed += res[k][s].changed;
		}
		snprintf(what, sizeof(what), "false positives, of %.0f unchanged",
			 NR_STEPS * BUFS - changed);
		row(all[k]->name, what, "", &fp, 1);
		snprintf(what, sizeof(what), "missed, of %.0f changed", changed);
		row(all[k]->name, what, "", &missed, 1);
	}
	note("\"changed\": a page frame of the buffer differs, by /proc/self/pagemap.");
}

