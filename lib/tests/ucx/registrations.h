/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A count of the memory registrations UCX makes: how a program over UCX
 * tells a registration cache's hit from a miss.  Included once per
 * program, which must be linked -rdynamic: it defines ibv_reg_mr_iova2().
 */
#ifndef UMN_TESTS_REGISTRATIONS_H
#define UMN_TESTS_REGISTRATIONS_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * UCX registers through libibverbs' ibv_reg_mr_iova2(): this program's
 * definition (exported, -rdynamic) comes first and counts them.  UCX's
 * verbs transport loads libibverbs with its module, outside the global
 * scope that RTLD_NEXT searches.
 */
static unsigned long ucx_registrations;

struct ibv_mr;
struct ibv_pd;
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access);
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t,
				      uint64_t, unsigned int);

	if (!real) {
		void *verbs = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);

		real = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t,
					   uint64_t, unsigned int))
			(verbs ? dlsym(verbs, "ibv_reg_mr_iova2") : NULL);
		if (!real) {
			fprintf(stderr, "no ibv_reg_mr_iova2() in libibverbs.so.1\n");
			exit(2);
		}
	}
	__atomic_fetch_add(&ucx_registrations, 1, __ATOMIC_RELAXED);
	return real(pd, addr, length, iova, access);
}

#endif /* UMN_TESTS_REGISTRATIONS_H */
