// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libummunotify-verbs on the host: no device, so the verbs it calls and
 * umn_open() are wrapped at link time (-Wl,--wrap=...).  ibv_reg_mr()
 * with an access value the compiler cannot see is ibv_reg_mr_iova2(); its
 * stand-in records the access flags; each handle is opened on the test
 * double, whose invalidations the test makes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ummunotify-verbs.h"
#include "../check.h"

#define PAGE		4096UL
#define A(n)		((void *)(0x10000000UL + (n) * PAGE))
#define LOCAL		IBV_ACCESS_LOCAL_WRITE
#define REMOTE		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)
#define MAX_DOUBLES	8

struct fake_mr {
	struct ibv_mr mr;
	unsigned int access;
};

static struct ibv_pd *const pd = (struct ibv_pd *)&pd;	/* never used */
static unsigned int live_mrs;
static int fail_reg;		/* next registration fails with this errno */
static int fail_open;		/* next umn_open() fails with this */
static struct umn_double *doubles[MAX_DOUBLES];
static unsigned int nr_doubles;

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *p, void *addr,
				       size_t len, uint64_t iova,
				       unsigned int access);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_umn_open(struct umn **u, const struct umn_attr *attr);

struct ibv_mr *__wrap_ibv_reg_mr_iova2(struct ibv_pd *p, void *addr,
				       size_t len, uint64_t iova,
				       unsigned int access)
{
	struct fake_mr *f;

	CHECK(p == pd && iova == (uintptr_t)addr);
	if (fail_reg) {
		errno = fail_reg;
		fail_reg = 0;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	CHECK(f);
	f->mr = (struct ibv_mr){ .pd = p, .addr = addr, .length = len };
	f->access = access;
	live_mrs++;
	return &f->mr;
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	CHECK(live_mrs > 0);
	live_mrs--;
	free(mr);
	return 0;
}

int __wrap_umn_open(struct umn **u, const struct umn_attr *attr)
{
	int ret = fail_open;

	if (ret) {
		fail_open = 0;
		return ret;
	}
	CHECK(nr_doubles < MAX_DOUBLES);
	ret = double_open(u, attr, &doubles[nr_doubles]);
	if (!ret)
		nr_doubles++;
	return ret;
}

/* Like an munmap of [start, end), seen by every handle. */
static void invalidate(void *start, void *end)
{
	unsigned int i;

	for (i = 0; i < nr_doubles; i++)
		double_invalidate(doubles[i], (uintptr_t)start,
				  (uintptr_t)end, UMN_CAUSE_UNMAP);
}

static void destroy(struct umn_mr_cache *c)
{
	CHECK_EQ(umn_mr_cache_destroy(c), 0);
	CHECK_EQ(live_mrs, 0);
	while (nr_doubles)
		double_free(doubles[--nr_doubles]);
}

static unsigned int access_of(const struct ibv_mr *mr)
{
	return ((const struct fake_mr *)mr)->access;
}

static void test_create_checks_its_arguments(void)
{
	struct umn_mr_cache_attr attr = { .comp_mask = 1 };

	errno = 0;
	CHECK(!umn_mr_cache_create(NULL, NULL) && errno == EINVAL);
	errno = 0;
	CHECK(!umn_mr_cache_create(pd, &attr) && errno == EINVAL);
	/* umn_open() refuses the settings: nothing is left behind. */
	attr = (struct umn_mr_cache_attr){ .umn.ring_entries = 3 };
	errno = 0;
	CHECK(!umn_mr_cache_create(pd, &attr) && errno == EINVAL);
	CHECK_EQ(nr_doubles, 0);
	fail_open = -ENODEV;
	errno = 0;
	CHECK(!umn_mr_cache_create(pd, NULL) && errno == ENODEV);
	CHECK_EQ(umn_mr_cache_destroy(NULL), 0);
}

static void test_an_mr_covers_the_request_in_whole_pages(void)
{
	struct umn_mr_cache *c = umn_mr_cache_create(pd, NULL);
	char *addr = (char *)A(1) + 100;
	struct umn_mr_ref *ref;
	struct ibv_mr *mr;

	CHECK(c);
	mr = umn_reg_mr_cached(c, addr, PAGE, REMOTE, &ref);
	CHECK(mr && mr->addr == A(1) && mr->length == 2 * PAGE);
	CHECK_EQ(access_of(mr), REMOTE);
	umn_mr_put(ref);
	destroy(c);
}

static void test_access_flags_must_match_exactly(void)
{
	struct umn_mr_cache *c = umn_mr_cache_create(pd, NULL);
	struct umn_mr_ref *local_ref, *remote_ref, *ref;
	struct ibv_mr *local, *remote;
	struct umn_cache_stats s;
	struct {
		struct umn_cache_stats s;
		uint64_t later;
	} big;

	CHECK(c);
	local = umn_reg_mr_cached(c, A(1), PAGE, LOCAL, &local_ref);
	remote = umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &remote_ref);
	CHECK(local && remote && local != remote);
	CHECK_EQ(access_of(local), LOCAL);
	CHECK_EQ(access_of(remote), REMOTE);
	/* Neither fewer flags than asked, nor more. */
	CHECK(umn_reg_mr_cached(c, A(1), PAGE, LOCAL, &ref) == local);
	umn_mr_put(ref);
	CHECK(umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &ref) == remote);
	umn_mr_put(ref);
	umn_mr_put(local_ref);
	umn_mr_put(remote_ref);

	/* The counters of every access value, summed. */
	umn_mr_cache_stats(c, &s);
	CHECK_EQ(s.misses, 2);
	CHECK_EQ(s.hits, 2);
	CHECK_EQ(s.entries, 2);
	CHECK_EQ(s.registrations, 2);
	CHECK_EQ(s.bytes, 2 * PAGE);
	/* All of them, and zeroes for those this library does not keep. */
	memset(&big, 0xff, sizeof(big));
	CHECK_EQ(umn_mr_cache_query_stats(c, &big.s, sizeof(big)), 0);
	CHECK(!memcmp(&big.s, &s, sizeof(s)));
	CHECK_EQ(big.later, 0);
	CHECK_EQ(umn_mr_cache_query_stats(c, &big.s, sizeof(s) - 8), EINVAL);
	destroy(c);
}

static void test_a_changed_mr_is_replaced_and_deregistered(void)
{
	struct umn_mr_cache *c = umn_mr_cache_create(pd, NULL);
	struct umn_mr_ref *old_ref, *ref;
	struct umn_cache_stats s;
	struct ibv_mr *old, *mr;

	CHECK(c);
	old = umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &old_ref);
	CHECK(old);
	invalidate(A(1), A(2));
	/* Held: replaced in the cache, deregistered at its put only. */
	mr = umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &ref);
	CHECK(mr && mr != old);
	CHECK_EQ(live_mrs, 2);
	umn_mr_put(old_ref);
	CHECK_EQ(live_mrs, 1);
	umn_mr_put(ref);

	umn_mr_cache_stats(c, &s);
	CHECK_EQ(s.invalidations, 1);
	CHECK_EQ(s.deregistrations, 1);
	CHECK_EQ(s.entries, 1);
	destroy(c);
}

static void test_a_failed_registration_sets_errno(void)
{
	struct umn_mr_cache *c = umn_mr_cache_create(pd, NULL);
	struct umn_mr_ref *ref;

	CHECK(c);
	fail_reg = EFAULT;
	errno = 0;
	CHECK(!umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &ref));
	CHECK_EQ(errno, EFAULT);
	errno = 0;
	CHECK(!umn_reg_mr_cached(c, A(1), 0, REMOTE, &ref));
	CHECK_EQ(errno, EINVAL);
	/* A new access value needs a handle of its own. */
	fail_open = -EMFILE;
	errno = 0;
	CHECK(!umn_reg_mr_cached(c, A(1), PAGE, LOCAL, &ref));
	CHECK_EQ(errno, EMFILE);
	CHECK_EQ(live_mrs, 0);
	destroy(c);
}

static void test_destroy_refuses_while_an_mr_is_held(void)
{
	struct umn_mr_cache *c = umn_mr_cache_create(pd, NULL);
	struct umn_mr_ref *ref;

	CHECK(c);
	CHECK(umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &ref));
	CHECK_EQ(umn_mr_cache_destroy(c), EBUSY);
	umn_mr_put(ref);
	destroy(c);
}

static void test_limits_apply_to_each_access_value(void)
{
	struct umn_mr_cache_attr attr = { .max_entries = 1 };
	struct umn_mr_cache *c = umn_mr_cache_create(pd, &attr);
	struct umn_mr_ref *ref;
	struct umn_cache_stats s;
	int i;

	CHECK(c);
	for (i = 0; i < 2; i++) {
		CHECK(umn_reg_mr_cached(c, A(2 * i), PAGE, LOCAL, &ref));
		umn_mr_put(ref);
		CHECK(umn_reg_mr_cached(c, A(2 * i), PAGE, REMOTE, &ref));
		umn_mr_put(ref);
	}
	umn_mr_cache_stats(c, &s);
	CHECK_EQ(s.entries, 2);
	CHECK_EQ(s.evictions, 2);
	destroy(c);
}

/* A forked child's destroy must not ibv_dereg_mr() the parent's MR. */
static void test_a_forked_child_never_deregisters_the_parents_mr(void)
{
	struct umn_mr_cache *c = umn_mr_cache_create(pd, NULL);
	struct umn_mr_ref *ref;
	int status;
	pid_t pid;

	CHECK(c);
	CHECK(umn_reg_mr_cached(c, A(1), PAGE, REMOTE, &ref));
	umn_mr_put(ref);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK_EQ(umn_mr_cache_destroy(c), 0);
		CHECK_EQ(live_mrs, 1);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(live_mrs, 1);
	destroy(c);
}

int main(void)
{
	test_create_checks_its_arguments();
	test_an_mr_covers_the_request_in_whole_pages();
	test_access_flags_must_match_exactly();
	test_a_changed_mr_is_replaced_and_deregistered();
	test_a_failed_registration_sets_errno();
	test_destroy_refuses_while_an_mr_is_held();
	test_limits_apply_to_each_access_value();
	test_a_forked_child_never_deregisters_the_parents_mr();
	printf("test-mr-cache: ok\n");
	return 0;
}
