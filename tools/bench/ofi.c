// SPDX-License-Identifier: GPL-2.0
/*
 * Test 9: libfabric's MR cache with each memory monitor, side by side:
 * ofi-bench's cache hit and register/use/unmap loops, and the two-rank
 * MPI job's bandwidth (lib/tests/ofi/mpi-job), each run in a process of
 * its own, the monitor chosen by FI_MR_CACHE_MONITOR.  tools/bench/run
 * names the programs: UMMUNOTIFY_OFI_BENCH and UMMUNOTIFY_MPI_JOB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "report.h"

#define OFI_REPS	5

static const char *const monitors[] = { "userfaultfd", "memhooks",
					"ummunotify" };
enum { UFFD, MEMHOOKS, UMN, NR_MONITORS };

struct ofi_run {
	double hit[OFI_REPS], loop4k[OFI_REPS], loop1m[OFI_REPS];
	double reuse_mbps, replace_mbps;
	int wrong;		/* MPI rounds with wrong data, buffer replaced */
	bool mpi;
};

static FILE *run_with(const char *monitor, const char *cmd)
{
	FILE *f;

	setenv("FI_MR_CACHE_MONITOR", monitor, 1);
	fflush(NULL);
	f = popen(cmd, "r");
	if (!f)
		fail(cmd, -errno);
	return f;
}

static void read_values(const char *line, const char *name, double *v)
{
	size_t n = strlen(name);
	char *end;
	int i;

	if (strncmp(line, name, n) || line[n] != ' ')
		return;
	line = strchr(line + n + 1, ' ');
	for (i = 0; line && i < OFI_REPS; i++) {
		v[i] = strtod(line, &end);
		line = end;
	}
}

static void run_monitor(const char *monitor, struct ofi_run *r)
{
	const char *bench = getenv("UMMUNOTIFY_OFI_BENCH");
	const char *job = getenv("UMMUNOTIFY_MPI_JOB");
	char line[512];
	int reuse_wrong;
	FILE *f;

	f = run_with(monitor, bench);
	while (fgets(line, sizeof(line), f)) {
		read_values(line, "hit", r->hit);
		read_values(line, "loop4k", r->loop4k);
		read_values(line, "loop1m", r->loop1m);
	}
	if (pclose(f))
		fail("ofi-bench", -EIO);
	if (!job)
		return;
	f = run_with(monitor, job);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "mpi-remap: %*d rounds of %*u bytes: buffer reused: %d wrong, %lf MB/s; replaced: %d wrong, %lf MB/s",
			   &reuse_wrong, &r->reuse_mbps, &r->wrong,
			   &r->replace_mbps) == 4)
			r->mpi = true;
	pclose(f);	/* fails, as it must, where data was wrong */
}

void measure_ofi(void)
{
	static struct ofi_run runs[NR_MONITORS];
	struct summary hit[NR_MONITORS], l4[NR_MONITORS], l1[NR_MONITORS];
	double v[1];
	int m;

	section(9, "libfabric MR cache (verbs;ofi_rxm) and the MPI job, per monitor");
	if (!getenv("UMMUNOTIFY_OFI_BENCH")) {
		note("not measured: no ofi-bench (libfabric or an RDMA device is missing)");
		return;
	}
	for (m = 0; m < NR_MONITORS; m++)
		run_monitor(monitors[m], &runs[m]);
	for (m = 0; m < NR_MONITORS; m++)
		hit[m] = row(monitors[m], "cache hit: fi_mr_reg + fi_close",
			     "ns", runs[m].hit, OFI_REPS);
	for (m = 0; m < NR_MONITORS; m++)
		l4[m] = row(monitors[m], "4 KiB: mmap, reg, close, munmap",
			    "us", runs[m].loop4k, OFI_REPS);
	for (m = 0; m < NR_MONITORS; m++)
		l1[m] = row(monitors[m], "1 MiB: mmap, reg, close, munmap",
			    "us", runs[m].loop1m, OFI_REPS);
	for (m = 0; m < NR_MONITORS; m++) {
		if (!runs[m].mpi)
			continue;
		v[0] = runs[m].reuse_mbps;
		row(monitors[m], "MPI 1 MiB messages, buffer reused", "MB/s",
		    v, 1);
		v[0] = runs[m].replace_mbps;
		row(monitors[m], "MPI 1 MiB messages, buffer replaced", "MB/s",
		    v, 1);
		v[0] = runs[m].wrong;
		row(monitors[m], "MPI rounds received wrong (of 20)", "",
		    v, 1);
	}
	note("MPI: one guest, TCG: the bandwidths compare monitors, not NICs");
	goal("ofi hit: within 10% of memhooks", "ummunotify / memhooks hit",
	     hit[UMN].med / hit[MEMHOOKS].med, "x", 1.10, true);
	goal("ofi 4 KiB loop: faster than uffd", "ummunotify / uffd, 4 KiB",
	     l4[UMN].med / l4[UFFD].med, "x", 1.0, true);
	goal("ofi 1 MiB loop: faster than uffd", "ummunotify / uffd, 1 MiB",
	     l1[UMN].med / l1[UFFD].med, "x", 1.0, true);
	if (runs[UMN].mpi)
		goal("MPI: no wrong data with ummunotify",
		     "rounds received wrong", runs[UMN].wrong, "", 0, true);
}
