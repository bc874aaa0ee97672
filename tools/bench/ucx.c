// SPDX-License-Identifier: GPL-2.0
/*
 * Test 10: UCX's registration cache fed by UCM's hooks (UCX as installed)
 * and by libummunotify-ucx (preloaded, UCX_MEM_MMAP_HOOK_MODE=none), side
 * by side: ucx-bench's cache hit and miss loops, one process per path and
 * repetition, the paths in turn so that the machine's drift hits them
 * alike; and the two-rank Open MPI job over pml ucx (lib/tests/ofi/mpi-job
 * with MPI_JOB_PML=ucx, mpi-remap's ucx mode), MPI_REPS jobs per path,
 * each rank saying which path fed UCX.  Transparent huge pages are off
 * meanwhile, as check-ofi runs the job: their splits re-register a
 * reused buffer with ummunotify (ummunotify-ucx.rst, "Huge pages").
 * tools/bench/run names the programs: UMMUNOTIFY_UCX_BENCH,
 * UMMUNOTIFY_UCX_PRELOAD, UMMUNOTIFY_MPI_JOB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "report.h"

#define UCX_REPS	5
#define MPI_REPS	3

static const char *const paths[] = { "UCM hooks", "ummunotify" };
enum { UCM, UMN, NR_PATHS };

struct ucx_run {
	double hit[UCX_REPS], miss4k[UCX_REPS], miss1m[UCX_REPS];
	double reuse_mbps[MPI_REPS], replace_mbps[MPI_REPS];
	double wrong[MPI_REPS];	/* MPI rounds with wrong data, buffer replaced */
	bool mpi[MPI_REPS];	/* ran, cached, on the path it was meant to */
};

static const char thp[] = "/sys/kernel/mm/transparent_hugepage/enabled";

/* The mode in brackets, "always [madvise] never"; "" without THP. */
static void thp_mode(char mode[32])
{
	char line[128] = "";
	const char *open;
	FILE *f = fopen(thp, "r");

	*mode = '\0';
	if (!f)
		return;
	if (!fgets(line, sizeof(line), f))
		*line = '\0';
	fclose(f);
	open = strchr(line, '[');
	if (open)
		sscanf(open, "[%31[^]]", mode);
}

static void thp_set(const char *mode)
{
	FILE *f;

	if (!*mode)
		return;
	f = fopen(thp, "w");
	if (!f || fputs(mode, f) < 0 || fclose(f))
		fail(thp, -errno);
}

/*
 * Path p's environment, NAME, VALUE pairs: ummunotify's as a site turns
 * it on (ummunotify-ucx.rst).  In the MPI job Open MPI's own libc patcher
 * is left out on both paths: as installed it, not UCM, feeds UCX
 * (opal_common_ucx_opal_mem_hooks), and the paths would differ in two
 * things.
 */
static void path_env(int p, bool mpi, const char *env[9])
{
	int n = 0;

	if (mpi) {
		env[n++] = "MPI_JOB_PML";
		env[n++] = "ucx";
		env[n++] = "OMPI_MCA_memory";
		env[n++] = "^patcher";
	}
	if (p == UMN) {
		env[n++] = "LD_PRELOAD";
		env[n++] = getenv("UMMUNOTIFY_UCX_PRELOAD");
		env[n++] = "UCX_MEM_MMAP_HOOK_MODE";
		env[n++] = "none";
	}
	env[n] = NULL;
}

static void run_bench(int p, int rep, struct ucx_run *r)
{
	const char *want = p == UMN ? "ummunotify" : "UCM's hooks";
	char line[512], path[64] = "";
	const char *env[9];
	FILE *f;

	path_env(p, false, env);
	f = run_with(env, getenv("UMMUNOTIFY_UCX_BENCH"));
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "path - %63[^\n]", path);
		read_values(line, "hit", r->hit, rep, rep + 1);
		read_values(line, "miss4k", r->miss4k, rep, rep + 1);
		read_values(line, "miss1m", r->miss1m, rep, rep + 1);
	}
	if (pclose(f))
		fail("ucx-bench", -EIO);
	if (strcmp(path, want))
		fail("ucx-bench ran on another path than asked", -EINVAL);
}

/*
 * The MPI job on path p: both ranks must say they ran on it, and rank 0
 * must have registered nothing in the reused rounds after the first, or
 * the reused bandwidth is not the cache's hit.
 */
static void run_mpi(int p, int rep, struct ucx_run *r)
{
	const char *want = p == UMN ? "ummunotify (" :
		"UCX's own (libummunotify-ucx not loaded)";
	int reuse_wrong, wrong, ranks = 0, cached = 0;
	char *cmd, line[512];
	const char *env[9];
	unsigned long regs;
	FILE *f;

	if (asprintf(&cmd, "%s ucx", getenv("UMMUNOTIFY_MPI_JOB")) < 0)
		fail("asprintf", -ENOMEM);
	path_env(p, true, env);
	f = run_with(env, cmd);
	while (fgets(line, sizeof(line), f)) {
		const char *said = strstr(line, ": memory events: ");

		if (sscanf(line, "mpi-remap: %*d rounds of %*u bytes: buffer reused: %d wrong, %lf MB/s; replaced: %d wrong, %lf MB/s",
			   &reuse_wrong, &r->reuse_mbps[rep], &wrong,
			   &r->replace_mbps[rep]) == 4) {
			r->wrong[rep] = wrong;
			r->mpi[rep] = true;
		}
		if (!strncmp(line, "mpi-remap: rank ", 16) && said &&
		    !strncmp(said + 17, want, strlen(want)))
			ranks++;
		if (sscanf(line, "mpi-remap: rank 0: registrations: first round %*u, reused rounds after it %lu,",
			   &regs) == 1)
			cached = !regs;
	}
	pclose(f);	/* fails, as it must, where data was wrong */
	free(cmd);
	r->mpi[rep] &= ranks == 2 && cached;
}

/* Every job of path p ran, on p, cached. */
static bool mpi_ran(const struct ucx_run *r)
{
	int rep;

	for (rep = 0; rep < MPI_REPS; rep++)
		if (!r->mpi[rep])
			return false;
	return true;
}

void measure_ucx(void)
{
	static struct ucx_run runs[NR_PATHS];
	struct summary hit[NR_PATHS], m4[NR_PATHS], m1[NR_PATHS];
	struct summary reuse[NR_PATHS], wrong[NR_PATHS];
	char thp_was[32];
	int p, rep;

	section(10, "UCX's registration cache (ib md on rxe) and the MPI job over UCX, per path");
	if (!getenv("UMMUNOTIFY_UCX_BENCH") ||
	    !getenv("UMMUNOTIFY_UCX_PRELOAD")) {
		note("not measured: no ucx-bench (UCX, libummunotify-ucx or an RDMA device is missing)");
		return;
	}
	thp_mode(thp_was);
	thp_set("never");
	for (rep = 0; rep < UCX_REPS; rep++)
		for (p = 0; p < NR_PATHS; p++)
			run_bench(p, rep, &runs[p]);
	for (p = 0; p < NR_PATHS; p++)
		hit[p] = row(paths[p], "cache hit: uct_md_mem_reg + dereg", "ns",
			     runs[p].hit, UCX_REPS);
	for (p = 0; p < NR_PATHS; p++)
		m4[p] = row(paths[p], "4 KiB: mmap, reg, dereg, munmap", "us",
			    runs[p].miss4k, UCX_REPS);
	for (p = 0; p < NR_PATHS; p++)
		m1[p] = row(paths[p], "1 MiB: mmap, reg, dereg, munmap", "us",
			    runs[p].miss1m, UCX_REPS);
	note("medians of %d processes per path, run in turn; [lowest - highest]; no registration in any hit loop, one per miss",
	     UCX_REPS);

	memset(wrong, 0, sizeof(wrong));
	memset(reuse, 0, sizeof(reuse));
	if (getenv("UMMUNOTIFY_MPI_JOB")) {
		for (rep = 0; rep < MPI_REPS; rep++)
			for (p = 0; p < NR_PATHS; p++)
				run_mpi(p, rep, &runs[p]);
		for (p = 0; p < NR_PATHS; p++) {
			if (!mpi_ran(&runs[p])) {
				note("MPI with %s: not run, not on that path, or the reused buffer registered again",
				     paths[p]);
				continue;
			}
			reuse[p] = row(paths[p], "MPI/UCX 1 MiB, buffer reused",
				       "MB/s", runs[p].reuse_mbps, MPI_REPS);
			row(paths[p], "MPI/UCX 1 MiB, buffer replaced", "MB/s",
			    runs[p].replace_mbps, MPI_REPS);
			wrong[p] = row(paths[p],
				       "MPI/UCX rounds received wrong (of 20)",
				       "", runs[p].wrong, MPI_REPS);
		}
		note("MPI: medians of %d jobs per path, run in turn; Open MPI's pml ucx, rc_verbs, its patcher excluded, two soft-RoCE devices over a wire in one TCG guest",
		     MPI_REPS);
		note("MPI: a replaced round that arrived wrong was sent through a stale registration, not registered anew");
		for (rep = 0; rep < MPI_REPS; rep++)
			note("MPI jobs, turn %d, reused / replaced: %s %.1f / %.1f, %s %.1f / %.1f MB/s",
			     rep + 1, paths[UCM], runs[UCM].reuse_mbps[rep],
			     runs[UCM].replace_mbps[rep], paths[UMN],
			     runs[UMN].reuse_mbps[rep],
			     runs[UMN].replace_mbps[rep]);
	}
	thp_set(thp_was);

	goal("ucx hit: within 10% of UCM's hooks", "ummunotify / UCM hooks hit",
	     hit[UMN].med / hit[UCM].med, "x", 1.10, true);
	goal("ucx 4 KiB miss: within 10% of UCM's hooks",
	     "ummunotify / UCM hooks, 4 KiB miss", m4[UMN].med / m4[UCM].med,
	     "x", 1.10, true);
	goal("ucx 1 MiB miss: within 10% of UCM's hooks",
	     "ummunotify / UCM hooks, 1 MiB miss", m1[UMN].med / m1[UCM].med,
	     "x", 1.10, true);
	if (mpi_ran(&runs[UMN]) && mpi_ran(&runs[UCM]))
		goal("MPI/UCX reused: within 10% of UCM's hooks",
		     "ummunotify / UCM hooks, MPI reused MB/s",
		     reuse[UMN].med / reuse[UCM].med, "x", 0.90, false);
	if (mpi_ran(&runs[UMN]))
		goal("MPI/UCX: no wrong data with ummunotify",
		     "most rounds received wrong in a UCX job", wrong[UMN].hi,
		     "", 0, true);
	if (mpi_ran(&runs[UCM]))
		goal("MPI/UCX: UCM's hooks miss raw syscalls",
		     "fewest rounds received wrong in a UCX job",
		     wrong[UCM].lo, "", 1, false);
}
