// SPDX-License-Identifier: GPL-2.0
/*
 * Test 10: UCX's registration cache fed by UCM's hooks (UCX as installed)
 * and by libummunotify-ucx (preloaded, UCX_MEM_MMAP_HOOK_MODE=none), side
 * by side: ucx-bench's cache hit and miss loops, one process per path and
 * repetition, the paths in turn so that the machine's drift hits them
 * alike, on UCX 1.13 and, where tools/bench/run gives the Debian 13
 * system (UMMUNOTIFY_UCX_IN_ROOT: lib/tests/ofi/in-root ROOT BUILD), on
 * UCX 1.18 there, whose UCP lookups are inline; and the two-rank MPI jobs over UCX (lib/tests/ofi/mpi-job,
 * mpi-remap's ucx mode): Open MPI's pml ucx (MPI_JOB_PML=ucx) and MPICH's
 * ch4:ucx (MPI_JOB_MPI=mpich, mpi-remap-mpich), MPI_REPS jobs per MPI and
 * path, each checked as check-ofi checks it.  Transparent huge pages are
 * off meanwhile, as check-ofi runs the jobs: their splits re-register a
 * reused buffer with ummunotify (ummunotify-ucx.rst, "Huge pages").
 * tools/bench/run names the programs: UMMUNOTIFY_UCX_BENCH,
 * UMMUNOTIFY_UCX_PRELOAD, UMMUNOTIFY_MPI_JOB, UMMUNOTIFY_MPICH_JOB.
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
#define MPI_ROUNDS	20	/* of each kind: tools/bench/run's job */

static const char *const paths[] = { "UCM hooks", "ummunotify" };
enum { UCM, UMN, NR_PATHS };

static const char *const mpis[] = { "Open MPI", "MPICH" };
static const char *const mpi_jobs[] = { "UMMUNOTIFY_MPI_JOB",
					"UMMUNOTIFY_MPICH_JOB" };
enum { OMPI, MPICH, NR_MPIS };

struct mpi_run {
	double reuse_mbps[MPI_REPS], replace_mbps[MPI_REPS];
	double wrong[MPI_REPS];	/* rounds with wrong data, buffer replaced */
	bool ok[MPI_REPS];	/* ran on its path, cached, counted right */
};

/* Where ucx-bench runs: the guest's UCX, or the Debian 13 system's. */
static const char *const releases[] = { "1.13", "1.18" };
enum { UCX113, UCX118, NR_RELEASES };

struct cache_run {
	double hit[UCX_REPS], miss4k[UCX_REPS], miss1m[UCX_REPS];
};

struct ucx_run {
	struct cache_run cache[NR_RELEASES];
	struct mpi_run mpi[NR_MPIS];
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
 * it on (ummunotify-ucx.rst, "Turning it on").  In the Open MPI job Open
 * MPI's own libc patcher is left out on both paths: as installed it, not
 * UCM, feeds UCX (opal_common_ucx_opal_mem_hooks), and the paths would
 * differ in two things.  MPICH has no patcher of its own.
 */
static void path_env(int p, int mpi, const char *env[11])
{
	int n = 0;

	if (mpi == OMPI) {
		env[n++] = "MPI_JOB_PML";
		env[n++] = "ucx";
		env[n++] = "OMPI_MCA_memory";
		env[n++] = "^patcher";
	} else if (mpi == MPICH) {
		env[n++] = "MPI_JOB_MPI";
		env[n++] = "mpich";
	}
	if (p == UMN) {
		env[n++] = "LD_PRELOAD";
		env[n++] = getenv("UMMUNOTIFY_UCX_PRELOAD");
		env[n++] = "UCX_MEM_MMAP_HOOK_MODE";
		env[n++] = "none";
	}
	env[n] = NULL;
}

/*
 * ucx-bench on path p and release rel: in the Debian 13 system the
 * library is named by its path there, as in-root's VAR=VALUE words.
 */
static void run_bench(int p, int rel, int rep, struct cache_run *r)
{
	const char *want = p == UMN ? "ummunotify" : "UCM's hooks";
	char line[512], path[64] = "", ucx[32] = "";
	const char *env[11] = { NULL };
	char *cmd;
	FILE *f;

	if (rel == UCX113) {
		path_env(p, -1, env);
		cmd = strdup(getenv("UMMUNOTIFY_UCX_BENCH"));
	} else if (asprintf(&cmd, "%s %s bench/ucx-bench",
			    getenv("UMMUNOTIFY_UCX_IN_ROOT"),
			    p == UMN ? "LD_PRELOAD=/mnt/lib/libummunotify-ucx.so.1 UCX_MEM_MMAP_HOOK_MODE=none" : "") < 0) {
		cmd = NULL;
	}
	if (!cmd)
		fail("ucx-bench", -ENOMEM);
	f = run_with(env, cmd);
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "path - %63[^\n]", path);
		sscanf(line, "ucx - %31[^\n]", ucx);
		read_values(line, "hit", r->hit, rep, rep + 1);
		read_values(line, "miss4k", r->miss4k, rep, rep + 1);
		read_values(line, "miss1m", r->miss1m, rep, rep + 1);
	}
	if (pclose(f))
		fail(cmd, -EIO);
	if (strcmp(path, want))
		fail("ucx-bench ran on another path than asked", -EINVAL);
	if (strncmp(ucx, releases[rel], strlen(releases[rel])) ||
	    ucx[strlen(releases[rel])] != '.')
		fail("ucx-bench ran on another UCX release than asked", -EINVAL);
	free(cmd);
}

/* Release rel's rows and goals: the cache's hit and misses, per path. */
static void cache_report(int rel, struct ucx_run runs[NR_PATHS])
{
	struct summary hit[NR_PATHS], m4[NR_PATHS], m1[NR_PATHS];
	char what[64], label[64];
	int p;

	for (p = 0; p < NR_PATHS; p++) {
		snprintf(what, sizeof(what), "UCX %s hit: ucp_mem_map + unmap",
			 releases[rel]);
		hit[p] = row(paths[p], what, "ns", runs[p].cache[rel].hit,
			     UCX_REPS);
	}
	for (p = 0; p < NR_PATHS; p++) {
		snprintf(what, sizeof(what), "UCX %s 4 KiB: mmap, map, unmap, munmap",
			 releases[rel]);
		m4[p] = row(paths[p], what, "us", runs[p].cache[rel].miss4k,
			    UCX_REPS);
	}
	for (p = 0; p < NR_PATHS; p++) {
		snprintf(what, sizeof(what), "UCX %s 1 MiB: mmap, map, unmap, munmap",
			 releases[rel]);
		m1[p] = row(paths[p], what, "us", runs[p].cache[rel].miss1m,
			    UCX_REPS);
	}
	snprintf(label, sizeof(label), "ucx %s hit: within 10%% of UCM's hooks",
		 releases[rel]);
	goal(label, "ummunotify / UCM hooks hit", hit[UMN].med / hit[UCM].med,
	     "x", 1.10, true);
	snprintf(label, sizeof(label),
		 "ucx %s 4 KiB miss: within 10%% of UCM's hooks", releases[rel]);
	goal(label, "ummunotify / UCM hooks, 4 KiB miss",
	     m4[UMN].med / m4[UCM].med, "x", 1.10, true);
	snprintf(label, sizeof(label),
		 "ucx %s 1 MiB miss: within 10%% of UCM's hooks", releases[rel]);
	goal(label, "ummunotify / UCM hooks, 1 MiB miss",
	     m1[UMN].med / m1[UCM].med, "x", 1.10, true);
}

/*
 * The MPI job of MPI on path p, checked as check-ofi checks it: both ranks
 * say they ran on p, and libc is unpatched (ummunotify) or patched (UCM's
 * hooks) in both; rank 0 registered at least once in the first round and
 * never in the reused rounds after it (or the reused bandwidth is not the
 * cache's hit), and in the replaced rounds at least once each with
 * ummunotify, with UCM's hooks no more than the rounds that arrived right
 * (a wrong round was sent through a stale registration); no round's data
 * corrupt (every wrong one an earlier round's).
 */
static void run_mpi(int p, int mpi, int rep, struct mpi_run *r)
{
	const char *want = p == UMN ? "ummunotify (" :
		"UCX's own (libummunotify-ucx not loaded)";
	int reuse_wrong, wrong = -1, stale, corrupt = -1, ranks = 0;
	int unpatched = 0, patched[2] = { 0, 0 }, rank;
	unsigned long first, reuse, again;
	bool counted = false, libc;
	char *cmd, line[512];
	const char *env[11];
	FILE *f;

	if (asprintf(&cmd, "%s ucx", getenv(mpi_jobs[mpi])) < 0)
		fail("asprintf", -ENOMEM);
	path_env(p, mpi, env);
	f = run_with(env, cmd);
	r->ok[rep] = false;
	while (fgets(line, sizeof(line), f)) {
		const char *said = strstr(line, ": memory events: ");

		if (sscanf(line, "mpi-remap: %*d rounds of %*u bytes: buffer reused: %d wrong, %lf MB/s; replaced: %d wrong, %lf MB/s; wrong rounds: %d stale, %d corrupt",
			   &reuse_wrong, &r->reuse_mbps[rep], &wrong,
			   &r->replace_mbps[rep], &stale, &corrupt) == 6)
			r->wrong[rep] = wrong;
		if (!strncmp(line, "mpi-remap: rank ", 16) && said &&
		    !strncmp(said + 17, want, strlen(want)))
			ranks++;
		if (sscanf(line, "mpi-remap: rank 0: registrations: first round %lu, reused rounds after it %lu, replaced rounds %lu",
			   &first, &reuse, &again) == 3)
			counted = true;
		if (strstr(line, ": libc's ") &&
		    sscanf(line, "mpi-remap: rank %d:", &rank) == 1 &&
		    (rank == 0 || rank == 1)) {
			unpatched += !!strstr(line, ": libc's munmap, mmap, mremap, madvise, malloc, free: not patched\n");
			patched[rank] |= !!strstr(line, ": patched\n");
		}
	}
	pclose(f);	/* fails, as it must, where data was wrong */
	free(cmd);
	if (wrong < 0 || corrupt || ranks != 2 || !counted || first < 1 ||
	    reuse)
		return;
	if (p == UMN)
		libc = unpatched == 2 && again >= MPI_ROUNDS;
	else
		libc = patched[0] && patched[1] &&
		       again <= (unsigned long)(MPI_ROUNDS - wrong);
	r->ok[rep] = libc;
}

/* Every job of one MPI and path ran, and passed run_mpi's checks. */
static bool mpi_ran(const struct mpi_run *r)
{
	int rep;

	for (rep = 0; rep < MPI_REPS; rep++)
		if (!r->ok[rep])
			return false;
	return true;
}

/* The rows and goals of one MPI's jobs. */
static void mpi_report(int mpi, struct ucx_run runs[NR_PATHS])
{
	struct summary reuse[NR_PATHS], wrong[NR_PATHS];
	char what[64], goal_label[80];
	const char *name = mpis[mpi];
	int p, rep;

	for (p = 0; p < NR_PATHS; p++) {
		const struct mpi_run *r = &runs[p].mpi[mpi];

		if (!mpi_ran(r)) {
			note("%s with %s: a job did not run, ran on another path, or its counts were wrong (see run_mpi())",
			     name, paths[p]);
			continue;
		}
		snprintf(what, sizeof(what), "%s/UCX 1 MiB, buffer reused", name);
		reuse[p] = row(paths[p], what, "MB/s", r->reuse_mbps, MPI_REPS);
		snprintf(what, sizeof(what), "%s/UCX 1 MiB, buffer replaced", name);
		row(paths[p], what, "MB/s", r->replace_mbps, MPI_REPS);
		snprintf(what, sizeof(what), "%s/UCX rounds wrong (of %d)", name,
			 MPI_ROUNDS);
		wrong[p] = row(paths[p], what, "", r->wrong, MPI_REPS);
	}
	for (rep = 0; rep < MPI_REPS; rep++)
		note("%s jobs, turn %d, reused / replaced: %s %.1f / %.1f, %s %.1f / %.1f MB/s",
		     name, rep + 1, paths[UCM], runs[UCM].mpi[mpi].reuse_mbps[rep],
		     runs[UCM].mpi[mpi].replace_mbps[rep], paths[UMN],
		     runs[UMN].mpi[mpi].reuse_mbps[rep],
		     runs[UMN].mpi[mpi].replace_mbps[rep]);
	if (mpi_ran(&runs[UMN].mpi[mpi]) && mpi_ran(&runs[UCM].mpi[mpi])) {
		snprintf(goal_label, sizeof(goal_label),
			 "%s/UCX reused: within 10%% of UCM's hooks", name);
		snprintf(what, sizeof(what),
			 "ummunotify / UCM hooks, %s reused MB/s", name);
		goal(goal_label, what, reuse[UMN].med / reuse[UCM].med, "x",
		     0.90, false);
	}
	if (mpi_ran(&runs[UMN].mpi[mpi])) {
		snprintf(goal_label, sizeof(goal_label),
			 "%s/UCX: no wrong data with ummunotify", name);
		snprintf(what, sizeof(what),
			 "most rounds received wrong, %s", name);
		goal(goal_label, what, wrong[UMN].hi, "", 0, true);
	}
	if (mpi_ran(&runs[UCM].mpi[mpi])) {
		snprintf(goal_label, sizeof(goal_label),
			 "%s/UCX: UCM's hooks miss raw syscalls", name);
		snprintf(what, sizeof(what),
			 "fewest rounds received wrong, %s", name);
		goal(goal_label, what, wrong[UCM].lo, "", 1, false);
	}
}

void measure_ucx(void)
{
	static struct ucx_run runs[NR_PATHS];
	char thp_was[32];
	int p, rep, mpi, rel;

	section(10, "UCX's registration cache (UCP on rxe, UCX 1.13 and 1.18) and the MPI jobs over UCX, per path");
	if (!getenv("UMMUNOTIFY_UCX_BENCH") ||
	    !getenv("UMMUNOTIFY_UCX_PRELOAD")) {
		note("not measured: no ucx-bench (UCX, libummunotify-ucx or an RDMA device is missing)");
		return;
	}
	thp_mode(thp_was);
	thp_set("never");
	for (rel = 0; rel < NR_RELEASES; rel++) {
		if (rel == UCX118 && !getenv("UMMUNOTIFY_UCX_IN_ROOT")) {
			note("UCX 1.18: not measured (no Debian 13 system: tools/testing/trixie-root)");
			continue;
		}
		for (rep = 0; rep < UCX_REPS; rep++)
			for (p = 0; p < NR_PATHS; p++)
				run_bench(p, rel, rep, &runs[p].cache[rel]);
		cache_report(rel, runs);
	}
	note("medians of %d processes per path, run in turn; [lowest - highest]; no registration in any hit loop, one per miss",
	     UCX_REPS);

	for (mpi = 0; mpi < NR_MPIS; mpi++) {
		if (!getenv(mpi_jobs[mpi])) {
			note("%s: not run (no %s: the program is not built)",
			     mpis[mpi], mpi_jobs[mpi]);
			continue;
		}
		for (rep = 0; rep < MPI_REPS; rep++)
			for (p = 0; p < NR_PATHS; p++)
				run_mpi(p, mpi, rep, &runs[p].mpi[mpi]);
		mpi_report(mpi, runs);
	}
	note("MPI: medians of %d jobs per MPI and path, run in turn; Open MPI's pml ucx (its patcher excluded) and MPICH's ch4:ucx, rc_verbs, two soft-RoCE devices over a wire in one TCG guest",
	     MPI_REPS);
	note("MPI: a replaced round that arrived wrong was sent through a stale registration, not registered anew");
	thp_set(thp_was);
}
