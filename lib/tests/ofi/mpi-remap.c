// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Two MPI ranks, rendezvous-sized messages from a buffer the sender
 * replaces between sends: raw munmap and mmap system calls (which libc
 * hooks never see) put new memory with new contents at the same address.
 * Through Open MPI's mtl/ofi on verbs;ofi_rxm the receiver RDMA-reads
 * the sender's buffer through a registration the sender's MR cache
 * holds: a monitor that missed the unmap hands it the old pages.  The
 * receiver checks every byte.
 *
 * With "ucx" (Open MPI's pml ucx, MPICH's ch4:ucx), the sender's
 * registrations go through UCX's cache, the buffer is replaced in turn
 * by each of remap.h's four raw-syscall methods, and each rank says which
 * path told UCX of memory changes, as remap.h sees it from inside the
 * process, and rank 0 how many registrations UCX made in each half.
 *
 * Usage: mpi-remap [BYTES [ROUNDS [ucx]]]  (run by mpirun with two ranks)
 * Prints, from rank 1, the rounds whose data was wrong and the bandwidth
 * with the buffer reused (cache hits) and replaced every round, and of
 * the wrong rounds how many were stale (the whole message one earlier
 * round's: sent through a registration of the old pages) and how many
 * corrupt (anything else).  Exit status 1 if any byte was wrong.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "remap.h"

static void fill(uint8_t *buf, size_t len, int round)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = remap_expected(i, round);
}

static size_t wrong_bytes(const uint8_t *buf, size_t len, int round)
{
	size_t i, bad = 0;

	for (i = 0; i < len; i++)
		bad += buf[i] != remap_expected(i, round);
	return bad;
}

/*
 * The earlier round (0 .. round - 1) whose data the whole of BUF
 * is, or -1: a stale registration hands the receiver the old pages, which
 * hold the last round written to them before the buffer was replaced.
 */
static int stale_round(const uint8_t *buf, size_t len, int round)
{
	size_t i;
	int r;

	for (r = round - 1; r >= 0; r--) {
		for (i = 0; i < len && buf[i] == remap_expected(i, r); i++)
			;
		if (i == len)
			return r;
	}
	return -1;
}

/*
 * The message and the mapping it lies in: the message starts a little
 * into its first page so that it never ends on a page boundary.  6.1's
 * rdma_rxe has a bug there: rxe_mr_copy() steps to the next map of 256
 * pages after copying the last page of one even when nothing is left to
 * copy, so a copy ending exactly at the end of an MR that spans a multiple
 * of 256 pages reads one pointer past mr->map.  Every rendezvous read of
 * a page-aligned 1 MiB buffer did: KASAN reported slab-out-of-bounds in
 * rxe_mr_copy.  A copy that ends inside a page never takes that step.
 */
struct msg {
	uint8_t *map;
	size_t span;
	uint8_t *buf;
	size_t len;
};

static void msg_place(struct msg *m, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t off = (64 + len) % page ? 64 : 128;

	m->len = len;
	m->span = (off + len + page - 1) / page * page;
	m->map = mmap(NULL, m->span, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m->map == MAP_FAILED)
		MPI_Abort(MPI_COMM_WORLD, 2);
	m->buf = m->map + off;
}

/*
 * rounds messages of m->len bytes; returns wrong rounds (rank 1), MB/s.
 * REPLACE: 0 reuses the buffer, 1 replaces it by munmap + mmap, 4 by
 * each of remap.h's methods in turn.  Adds the stale rounds to *STALE.
 */
static int run(int rank, const struct msg *m, int rounds, int first,
	       int replace, double *mbps, int *stale)
{
	uint8_t *buf = m->buf;
	size_t len = m->len;
	double start;
	int r, old, bad = 0;

	MPI_Barrier(MPI_COMM_WORLD);
	start = MPI_Wtime();
	for (r = first; r < first + rounds; r++) {
		if (rank == 0) {
			if (replace)
				remap_replace(m->map, m->span,
					      replace == 4 ? r : 0);
			fill(buf, len, r);
			MPI_Send(buf, (int)len, MPI_BYTE, 1, r, MPI_COMM_WORLD);
		} else {
			MPI_Recv(buf, (int)len, MPI_BYTE, 0, r, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if (wrong_bytes(buf, len, r)) {
				old = stale_round(buf, len, r);
				*stale += old >= 0;
				if (bad < 3 && old >= 0)
					printf("mpi-remap: round %d: stale, the data of round %d\n",
					       r, old);
				else if (bad < 3)
					printf("mpi-remap: round %d: corrupt, not the data of any earlier round\n",
					       r);
				bad++;
			}
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	*mbps = (double)len * rounds / (MPI_Wtime() - start) / 1e6;
	return bad;
}

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	int ucx = argc > 3 && !strcmp(argv[3], "ucx");
	int rank, size, bad_reuse, bad_replace, stale = 0, patched;
	unsigned long regs[3];
	char prefix[32];
	double reuse, replace;
	struct msg m;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (!rank)
			fprintf(stderr, "mpi-remap: run with two ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	msg_place(&m, len);

	regs[0] = ucx_registrations;
	bad_reuse = run(rank, &m, 1, 0, 0, &reuse, &stale);
	regs[1] = ucx_registrations;
	bad_reuse += run(rank, &m, rounds - 1, 1, 0, &reuse, &stale);
	regs[2] = ucx_registrations;
	bad_replace = run(rank, &m, rounds, rounds, ucx ? 4 : 1, &replace,
			  &stale);
	if (ucx) {
		snprintf(prefix, sizeof(prefix), "mpi-remap: rank %d", rank);
		remap_say_path(prefix);
		if (rank == 0)
			printf("%s: registrations: first round %lu, reused rounds after it %lu, replaced rounds %lu\n",
			       prefix, regs[1] - regs[0], regs[2] - regs[1],
			       ucx_registrations - regs[2]);
		fflush(stdout);
	} else {
		/* libfabric's memhooks, in this rank, patches libc's munmap(). */
		patched = libc_patched("munmap", (void *)munmap);
		printf("mpi-remap: rank %d: libc's munmap: %s\n", rank,
		       patched < 0 ? "cannot tell" :
		       patched ? "patched" : "not patched");
		fflush(stdout);
	}
	if (rank == 1) {
		printf("mpi-remap: %d rounds of %zu bytes: buffer reused: %d wrong, %.1f MB/s; replaced: %d wrong, %.1f MB/s; wrong rounds: %d stale, %d corrupt\n",
		       rounds, len, bad_reuse, reuse, bad_replace, replace,
		       stale, bad_reuse + bad_replace - stale);
		fflush(stdout);
	}
	MPI_Finalize();
	return bad_reuse || bad_replace;
}
