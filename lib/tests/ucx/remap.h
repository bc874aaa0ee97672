/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the stale-data programs over UCX share (ucp-remap, and mpi-remap's
 * UCX mode): the data pattern of each round, the four ways to replace a
 * buffer's pages by raw system calls, a count of UCX's registrations, and
 * the path that told UCX of memory changes, as the process itself sees
 * it.  Included once per program: registrations.h defines
 * ibv_reg_mr_iova2().
 */
#ifndef UMN_TESTS_REMAP_H
#define UMN_TESTS_REMAP_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ummunotify-ucx.h"
#include "patched.h"
#include "registrations.h"

/* Byte I of round ROUND's message. */
static inline uint8_t remap_expected(size_t i, int round)
{
	return (uint8_t)(round * 131 + i / 4096 + i);
}

/* Replace the pages of [map, map + span) by method round % 4. */
static void remap_replace(uint8_t *map, size_t span, int round)
{
	const int prot = PROT_READ | PROT_WRITE;
	const int anon = MAP_PRIVATE | MAP_ANONYMOUS;
	long ret = 0;
	void *tmp;

	switch (round % 4) {
	case 0:		/* munmap + mmap(MAP_FIXED) */
		ret = syscall(SYS_munmap, map, span);
		if (!ret && (void *)syscall(SYS_mmap, map, span, prot,
					    anon | MAP_FIXED, -1, 0) != map)
			ret = -1;
		break;
	case 1:		/* mmap(MAP_FIXED) over it */
		if ((void *)syscall(SYS_mmap, map, span, prot,
				    anon | MAP_FIXED, -1, 0) != map)
			ret = -1;
		break;
	case 2:		/* madvise(MADV_DONTNEED): zero pages on next touch */
		ret = syscall(SYS_madvise, map, span, MADV_DONTNEED);
		break;
	case 3:		/* mremap of new pages onto it */
		tmp = (void *)syscall(SYS_mmap, NULL, span, prot, anon, -1, 0);
		if (tmp == MAP_FAILED) {
			ret = -1;
			break;
		}
		memset(tmp, 0, span);
		if ((void *)syscall(SYS_mremap, tmp, span, span,
				    MREMAP_MAYMOVE | MREMAP_FIXED, map) != map)
			ret = -1;
		break;
	}
	if (ret) {
		perror("replacing the buffer");
		exit(2);
	}
}

static const char *const remap_methods[] = {
	"munmap + mmap", "mmap over", "madvise(MADV_DONTNEED)", "mremap onto"
};

/* PREFIX: the lines' start, the program's name and more. */
static void remap_say_path(const char *prefix)
{
	void (*status_fn)(struct umn_ucx_status *, size_t) =
		(void (*)(struct umn_ucx_status *, size_t))
		dlsym(RTLD_DEFAULT, "umn_ucx_status");
	static const char *const states[] = {
		"not started", "ummunotify", "UCX's own (no /dev/ummunotify)",
		"UCX's own (the library refused this UCX)",
	};
	struct umn_ucx_status st = { 0 };
	const char *names[] = { "munmap", "mmap", "mremap", "madvise",
				"malloc", "free" };
	void *called[] = { (void *)munmap, (void *)mmap, (void *)mremap,
			   (void *)madvise, (void *)malloc, (void *)free };
	int i, patched = 0, unknown = 0, p;

	if (!status_fn) {
		printf("%s: memory events: UCX's own (libummunotify-ucx not loaded)\n",
		       prefix);
	} else {
		status_fn(&st, sizeof(st));
		printf("%s: memory events: %s (UCX %u.%u.%u, %llu ranges passed on, %llu overflows, %llu caches refused)\n",
		       prefix, st.state < 4 ? states[st.state] : "?",
		       st.ucx_version[0], st.ucx_version[1],
		       st.ucx_version[2], (unsigned long long)st.ranges,
		       (unsigned long long)st.overflows,
		       (unsigned long long)st.refused);
	}
	for (i = 0; i < 6; i++) {
		p = libc_patched(names[i], called[i]);
		if (p)
			printf("%s: libc's %s: %s\n", prefix, names[i],
			       p < 0 ? "cannot tell" : "patched");
		patched += p == 1;
		unknown += p < 0;
	}
	if (!patched && !unknown)
		printf("%s: libc's munmap, mmap, mremap, madvise, malloc, free: not patched\n",
		       prefix);
}

#endif /* UMN_TESTS_REMAP_H */
