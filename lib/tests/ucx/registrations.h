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
 * UCX registers through libibverbs' ibv_reg_mr_iova2() (1.13) or
 * ibv_reg_mr() (1.18, which Debian 13's libibverbs does not pass through
 * the former's exported symbol): this program's definitions (exported,
 * -rdynamic) come first and count them, once where one calls the other.
 * UCX's verbs transport loads libibverbs with its module, outside the
 * global scope that RTLD_NEXT searches.
 */
static unsigned long ucx_registrations;
static __thread unsigned long thread_registrations;	/* the caller's */
static __thread int in_reg_mr;

struct ibv_mr;
struct ibv_pd;

static void *verbs_symbol(const char *name)
{
	void *verbs = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *sym = verbs ? dlsym(verbs, name) : NULL;

	if (!sym) {
		fprintf(stderr, "no %s() in libibverbs.so.1\n", name);
		exit(2);
	}
	return sym;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access);
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t,
				      uint64_t, unsigned int);

	if (!real)
		real = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t,
					   uint64_t, unsigned int))
			verbs_symbol("ibv_reg_mr_iova2");
	if (!in_reg_mr) {
		__atomic_fetch_add(&ucx_registrations, 1, __ATOMIC_RELAXED);
		thread_registrations++;
	}
	return real(pd, addr, length, iova, access);
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access);
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access)
{
	static struct ibv_mr *(*real)(struct ibv_pd *, void *, size_t, int);
	struct ibv_mr *mr;

	if (!real)
		real = (struct ibv_mr *(*)(struct ibv_pd *, void *, size_t,
					   int))verbs_symbol("ibv_reg_mr");
	__atomic_fetch_add(&ucx_registrations, 1, __ATOMIC_RELAXED);
	thread_registrations++;
	in_reg_mr = 1;
	mr = real(pd, addr, length, access);
	in_reg_mr = 0;
	return mr;
}

#endif /* UMN_TESTS_REGISTRATIONS_H */
