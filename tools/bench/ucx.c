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

/*
 * What ucx-bench times: UCP's registration on the guest's UCX 1.13 and on
 * the Debian 13 system's 1.18, and 1.13's memory domain alone (1.18's
 * caches nothing).
 */
static const struct {
	const char *release, *api, *hit, *miss;
} kinds[] = {
	{ "1.13", "md", "uct_md_mem_reg + dereg", "reg, dereg" },
	{ "1.13", "ucp", "ucp_mem_map + unmap", "map, unmap" },
	{ "1.18", "ucp", "ucp_mem_map + unmap", "map, unmap" },
};
#define NR_KINDS	(sizeof(kinds) / sizeof(kinds[0]))

struct cache_run {
	double hit[UCX_REPS], miss4k[UCX_REPS], miss1m[UCX_REPS];
};

struct ucx_run {
	struct cache_run cache[NR_KINDS];
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
 * ucx-bench of kind k on path p: 1.18 in the Debian 13 system, where the
 * library is named by its path there, as in-root's VAR=VALUE words.
 */
static void run_bench(int p, size_t k, int rep, struct cache_run *r)
{
	const char *want = p == UMN ? "ummunotify" : "UCM's hooks";
	const char *release = kinds[k].release;
	char line[512], path[64] = "", ucx[32] = "";
	const char *env[11] = { NULL };
	char *cmd;
	FILE *f;
	int ret;

	if (strcmp(release, "1.18")) {
		path_env(p, -1, env);
		ret = asprintf(&cmd, "%s %s", getenv("UMMUNOTIFY_UCX_BENCH"),
			       kinds[k].api);
	} else {
		ret = asprintf(&cmd, "%s %s bench/ucx-bench %s",
			       getenv("UMMUNOTIFY_UCX_IN_ROOT"),
			       p == UMN ? "LD_PRELOAD=/mnt/lib/libummunotify-ucx.so.1 UCX_MEM_MMAP_HOOK_MODE=none" : "",
			       kinds[k].api);
	}
	if (ret < 0)
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
	if (strncmp(ucx, release, strlen(release)) ||
	    ucx[strlen(release)] != '.')
		fail("ucx-bench ran on another UCX release than asked", -EINVAL);
	free(cmd);
}

/* Kind k's goal for one loop: ummunotify within 10% of UCM's hooks. */
static void cache_goal(size_t k, const char *loop,
		       const struct summary s[NR_PATHS])
{
	char label[80], what[80];

	snprintf(label, sizeof(label), "ucx %s %s %s: within 10%% of UCM's hooks",
		 kinds[k].release, kinds[k].api, loop);
	snprintf(what, sizeof(what), "ummunotify / UCM hooks, UCX %s %s %s",
		 kinds[k].release, kinds[k].api, loop);
	goal(label, what, s[UMN].med / s[UCM].med, "x", 1.10, true);
}

/* Kind k's rows and goals: the cache's hit and misses, per path. */
static void cache_report(size_t k, struct ucx_run runs[NR_PATHS])
{
	struct summary hit[NR_PATHS], m4[NR_PATHS], m1[NR_PATHS];
	const char *release = kinds[k].release;
	char what[64];
	int p;

	for (p = 0; p < NR_PATHS; p++) {
		snprintf(what, sizeof(what), "UCX %s hit: %s", release,
			 kinds[k].hit);
		hit[p] = row(paths[p], what, "ns", runs[p].cache[k].hit,
			     UCX_REPS);
	}
	for (p = 0; p < NR_PATHS; p++) {
		snprintf(what, sizeof(what), "UCX %s 4 KiB: mmap, %s, munmap",
			 release, kinds[k].miss);
		m4[p] = row(paths[p], what, "us", runs[p].cache[k].miss4k,
			    UCX_REPS);
	}
	for (p = 0; p < NR_PATHS; p++) {
		snprintf(what, sizeof(what), "UCX %s 1 MiB: mmap, %s, munmap",
			 release, kinds[k].miss);
		m1[p] = row(paths[p], what, "us", runs[p].cache[k].miss1m,
			    UCX_REPS);
	}
	cache_goal(k, "hit", hit);
	cache_goal(k, "4 KiB miss", m4);
	cache_goal(k, "1 MiB miss", m1);
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
	int p, rep, mpi;
	size_t k;

	section(10, "UCX's registration cache (on rxe, UCX 1.13 and 1.18) and the MPI jobs over UCX, per path");
	if (!getenv("UMMUNOTIFY_UCX_BENCH") ||
	    !getenv("UMMUNOTIFY_UCX_PRELOAD")) {
		note("not measured: no ucx-bench (UCX, libummunotify-ucx or an RDMA device is missing)");
		return;
	}
	thp_mode(thp_was);
	thp_set("never");
	for (k = 0; k < NR_KINDS; k++) {
		if (!strcmp(kinds[k].release, "1.18") &&
		    !getenv("UMMUNOTIFY_UCX_IN_ROOT")) {
			note("UCX 1.18: not measured (no Debian 13 system: tools/testing/trixie-root)");
			continue;
		}
		for (rep = 0; rep < UCX_REPS; rep++)
			for (p = 0; p < NR_PATHS; p++)
				run_bench(p, k, rep, &runs[p].cache[k]);
		cache_report(k, runs);
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
