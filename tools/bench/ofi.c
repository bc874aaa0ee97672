// SPDX-License-Identifier: GPL-2.0
/*
 * Test 9: libfabric's MR cache with each memory monitor, side by side:
 * ofi-bench's cache hit and register/use/unmap loops, one process per
 * monitor and repetition, the monitors in turn so that the machine's
 * drift hits them alike; ofi-valid's direct measurement of the check a
 * hit makes; and the two-rank MPI job's bandwidth with each monitor the
 * job's log confirms (lib/tests/ofi/mpi-job), MPI_REPS jobs per monitor,
 * the monitors in turn too.  tools/bench/run names the
 * programs: UMMUNOTIFY_OFI_BENCH, UMMUNOTIFY_OFI_VALID, UMMUNOTIFY_MPI_JOB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "report.h"

#define OFI_REPS	5
#define MPI_REPS	3
#define MPI_ROUNDS	20

static const char *const monitors[] = { "userfaultfd", "memhooks",
					"ummunotify" };
enum { UFFD, MEMHOOKS, UMN, NR_MONITORS };

struct ofi_run {
	double hit[OFI_REPS], loop4k[OFI_REPS], loop1m[OFI_REPS];
	double reuse_mbps[MPI_REPS], replace_mbps[MPI_REPS];
	double wrong[MPI_REPS];	/* MPI rounds with wrong data, buffer replaced */
	bool mpi[MPI_REPS];	/* ran, on the monitor it was meant to */
};

/* Run cmd with FI_MR_CACHE_MONITOR=monitor. */
static FILE *run_monitor(const char *monitor, const char *cmd)
{
	const char *const env[] = { "FI_MR_CACHE_MONITOR", monitor, NULL };

	return run_with(env, cmd);
}

static void run_bench(int m, int rep, struct ofi_run *r)
{
	const char *want = m == UMN ? "ummunotify" : "libfabric's";
	char line[512], monitor[64] = "";
	FILE *f = run_monitor(monitors[m], getenv("UMMUNOTIFY_OFI_BENCH"));

	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "monitor - %63[^\n]", monitor);
		read_values(line, "hit", r->hit, rep, rep + 1);
		read_values(line, "loop4k", r->loop4k, rep, rep + 1);
		read_values(line, "loop1m", r->loop1m, rep, rep + 1);
	}
	if (pclose(f))
		fail("ofi-bench", -EIO);
	if (strcmp(monitor, want))
		fail("ofi-bench ran on another monitor than asked", -EINVAL);
}

/*
 * The MPI job on monitor m.  Open MPI's own monitor, on its libc
 * patcher, replaces libfabric's unless ours was imported first: the
 * patcher is excluded, and the job's log must name the monitor asked for.
 */
static void run_mpi(int m, int rep, struct ofi_run *r)
{
	const char *const env[] = { "FI_MR_CACHE_MONITOR", monitors[m],
				    "OMPI_MCA_memory", "^patcher", NULL };
	char want[64], line[512];
	int reuse_wrong, wrong, ranks = 0;
	FILE *f;

	snprintf(want, sizeof(want), "%s%s\n", m == UMN ? "" : "libfabric's ",
		 monitors[m]);
	f = run_with(env, getenv("UMMUNOTIFY_MPI_JOB"));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "mpi-remap: %*d rounds of %*u bytes: buffer reused: %d wrong, %lf MB/s; replaced: %d wrong, %lf MB/s",
			   &reuse_wrong, &r->reuse_mbps[rep], &wrong,
			   &r->replace_mbps[rep]) == 4) {
			r->wrong[rep] = wrong;
			r->mpi[rep] = true;
		}
		if (strstr(line, ": memory monitor: ") &&
		    !strcmp(strstr(line, ": memory monitor: ") + 18, want))
			ranks++;
	}
	pclose(f);	/* fails, as it must, where data was wrong */
	r->mpi[rep] &= ranks == 2;
}

/* Every job of monitor m ran, on m. */
static bool mpi_ran(const struct ofi_run *r)
{
	int rep;

	for (rep = 0; rep < MPI_REPS; rep++)
		if (!r->mpi[rep])
			return false;
	return true;
}

void measure_ofi(void)
{
	static struct ofi_run runs[NR_MONITORS];
	struct summary hit[NR_MONITORS], l4[NR_MONITORS], l1[NR_MONITORS];
	struct summary check, none, wrong[NR_MONITORS];
	const char *valid = getenv("UMMUNOTIFY_OFI_VALID");
	double v[OFI_REPS], v0[OFI_REPS];
	char line[512];
	int m, rep, n = 0, n0 = 0;
	FILE *f;

	section(9, "libfabric MR cache (verbs;ofi_rxm) and the MPI job, per monitor");
	if (!getenv("UMMUNOTIFY_OFI_BENCH") || !valid) {
		note("not measured: no ofi-bench (libfabric or an RDMA device is missing)");
		return;
	}
	for (rep = 0; rep < OFI_REPS; rep++)
		for (m = 0; m < NR_MONITORS; m++)
			run_bench(m, rep, &runs[m]);
	for (m = 0; m < NR_MONITORS; m++)
		hit[m] = row(monitors[m], "cache hit: fi_mr_reg + fi_close",
			     "ns", runs[m].hit, OFI_REPS);
	for (m = 0; m < NR_MONITORS; m++)
		l4[m] = row(monitors[m], "4 KiB: mmap, reg, close, munmap",
			    "us", runs[m].loop4k, OFI_REPS);
	for (m = 0; m < NR_MONITORS; m++)
		l1[m] = row(monitors[m], "1 MiB: mmap, reg, close, munmap",
			    "us", runs[m].loop1m, OFI_REPS);
	note("medians of %d processes per monitor, run in turn; [lowest - highest]",
	     OFI_REPS);

	f = run_monitor("ummunotify", valid);
	while (fgets(line, sizeof(line), f)) {
		n += read_values(line, "valid", v, 0, OFI_REPS);
		n0 += read_values(line, "valid0", v0, 0, OFI_REPS);
	}
	if (pclose(f) || n != OFI_REPS || n0 != OFI_REPS)
		fail("ofi-valid", -EIO);
	check = row("ummunotify", "the hit's check: valid()", "ns", v,
		    OFI_REPS);
	none = row("memhooks", "the hit's check: none (valid = true)", "ns",
		   v0, OFI_REPS);

	memset(wrong, 0, sizeof(wrong));
	if (getenv("UMMUNOTIFY_MPI_JOB")) {
		for (rep = 0; rep < MPI_REPS; rep++)
			for (m = 0; m < NR_MONITORS; m++)
				run_mpi(m, rep, &runs[m]);
		for (m = 0; m < NR_MONITORS; m++) {
			if (!mpi_ran(&runs[m])) {
				note("MPI with %s: not run, or the job's log named another monitor",
				     monitors[m]);
				continue;
			}
			row(monitors[m], "MPI 1 MiB messages, buffer reused",
			    "MB/s", runs[m].reuse_mbps, MPI_REPS);
			row(monitors[m], "MPI 1 MiB messages, buffer replaced",
			    "MB/s", runs[m].replace_mbps, MPI_REPS);
			wrong[m] = row(monitors[m],
				       "MPI rounds received wrong (of 20)", "",
				       runs[m].wrong, MPI_REPS);
		}
		note("MPI: medians of %d jobs per monitor, run in turn; two soft-RoCE devices over a veth in one TCG guest, Open MPI's patcher excluded",
		     MPI_REPS);
		/* The machine's drift against the monitors' difference. */
		for (rep = 0; rep < MPI_REPS; rep++)
			note("MPI jobs, turn %d, reused / replaced: %s %.1f / %.1f, %s %.1f / %.1f, %s %.1f / %.1f MB/s",
			     rep + 1, monitors[UFFD],
			     runs[UFFD].reuse_mbps[rep],
			     runs[UFFD].replace_mbps[rep], monitors[MEMHOOKS],
			     runs[MEMHOOKS].reuse_mbps[rep],
			     runs[MEMHOOKS].replace_mbps[rep], monitors[UMN],
			     runs[UMN].reuse_mbps[rep],
			     runs[UMN].replace_mbps[rep]);
	}

	goal("ofi hit: within 10% of memhooks", "ummunotify / memhooks hit",
	     hit[UMN].med / hit[MEMHOOKS].med, "x", 1.10, true);
	goal("ofi hit: the check adds under 10%",
	     "(valid() - none) / memhooks hit",
	     (check.med - none.med) / hit[MEMHOOKS].med, "x", 0.10, true);
	goal("ofi 4 KiB loop: faster than uffd", "ummunotify / uffd, 4 KiB",
	     l4[UMN].med / l4[UFFD].med, "x", 1.0, true);
	goal("ofi 1 MiB loop: faster than uffd", "ummunotify / uffd, 1 MiB",
	     l1[UMN].med / l1[UFFD].med, "x", 1.0, true);
	if (mpi_ran(&runs[UMN]))
		goal("MPI: no wrong data with ummunotify",
		     "most rounds received wrong in a job", wrong[UMN].hi, "",
		     0, true);
	if (mpi_ran(&runs[MEMHOOKS]))
		goal("MPI: memhooks misses raw munmap",
		     "fewest rounds received wrong in a job",
		     wrong[MEMHOOKS].lo, "", 1, false);
}
