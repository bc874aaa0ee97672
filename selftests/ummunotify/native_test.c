// SPDX-License-Identifier: GPL-2.0
/*
 * The native ummunotify ABI, item by item: feature negotiation, setup and
 * the shared memory, watches and their generation words, cause filters,
 * the event ring and its overflow, whole-address-space watches, resizing,
 * the counters in fdinfo and sysfs, every documented error, and a
 * multithreaded stress checked against a model of what a registration
 * cache may conclude.  The contract is
 * Documentation/userspace-api/ummunotify.rst.
 *
 * Memory is changed in small mappings between PROT_NONE guard pages: they
 * never merge with a neighbour and never cover an aligned 2 MiB block, so
 * no transparent huge page split adds a CLEAR to what a test expects.
 *
 * Runs as root in a guest with the module loaded (tools/testing/vm-run);
 * UMMUNOTIFY_STRESS_SECONDS lengthens the stress (default 3 seconds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "kselftest_harness.h"
#include "native.h"
#include "process.h"
#include "sysfile.h"

/*
 * Negotiation and setup, on a bare O_RDWR file.
 */
FIXTURE(negotiation)
{
	int fd;
};

FIXTURE_SETUP(negotiation)
{
	self->fd = open_dev(_metadata, O_RDWR);
}

FIXTURE_TEARDOWN(negotiation)
{
	close(self->fd);
}

TEST_F(negotiation, exchange_grants_the_known_features_but_no_unknown_bit)
{
	EXPECT_EQ(ALL_FEATURES, exchange(self->fd, ~0U));
	EXPECT_EQ(ALL_FEATURES, fdinfo(self->fd, "features"));
	EXPECT_EQ(0, exchange(self->fd, 1U << 31));
	EXPECT_EQ(0, fdinfo(self->fd, "features"));
	EXPECT_EQ(UMMUNOTIFY_FEATURE_RING,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_RING | 1U << 8));
}

TEST_F(negotiation, exchange_grants_pressure_only_with_ring)
{
	EXPECT_EQ(0, exchange(self->fd, UMMUNOTIFY_FEATURE_PRESSURE));
	EXPECT_EQ(UMMUNOTIFY_FEATURE_WATCH,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_WATCH |
				     UMMUNOTIFY_FEATURE_PRESSURE));
	EXPECT_EQ(UMMUNOTIFY_FEATURE_RING | UMMUNOTIFY_FEATURE_PRESSURE,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_RING |
				     UMMUNOTIFY_FEATURE_PRESSURE));
}

TEST_F(negotiation, asking_for_nothing_keeps_the_2010_abi)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_watch w = watch_arg(buf, ps, 2, 0);
	struct ummunotify_params p;
	struct ummunotify_event ev[2];
	__u64 *counter;

	ASSERT_EQ(0, exchange(self->fd, 0));
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(-EINVAL, uioctl(self->fd, UMMUNOTIFY_WATCH, &w));
	counter = mmap(NULL, sizeof(*counter), PROT_READ, MAP_SHARED,
		       self->fd, 0);
	ASSERT_NE(MAP_FAILED, counter);
	ASSERT_EQ(0, register_region(self->fd, buf, ps, 1));
	ASSERT_EQ(0, munmap(buf, ps));
	EXPECT_EQ(1ULL, __atomic_load_n(counter, __ATOMIC_ACQUIRE));
	ASSERT_EQ((ssize_t)sizeof(ev), try_read(self->fd, ev, sizeof(ev)));
	EXPECT_EQ(UMMUNOTIFY_EVENT_TYPE_INVAL, (int)ev[0].type);
	EXPECT_EQ(UMMUNOTIFY_EVENT_FLAG_HINT, (int)ev[0].flags);
	EXPECT_EQ((uintptr_t)buf, ev[0].hint_start);
	EXPECT_EQ((uintptr_t)buf + ps, ev[0].hint_end);
	EXPECT_EQ(1ULL, ev[0].user_cookie_counter);
	EXPECT_EQ(UMMUNOTIFY_EVENT_TYPE_LAST, (int)ev[1].type);
	EXPECT_EQ(1ULL, ev[1].user_cookie_counter);
}

TEST_F(negotiation, exchange_is_refused_after_setup)
{
	struct ummunotify_params p;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	ASSERT_EQ(0, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(-EINVAL, exchange(self->fd, WATCH_RING));
	EXPECT_EQ(-EINVAL, exchange(self->fd, 0));
}

TEST_F(negotiation, exchange_and_setup_are_refused_after_a_registration)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_params p;

	ASSERT_EQ(0, register_region(self->fd, buf, ps, 1));
	EXPECT_EQ(-EINVAL, exchange(self->fd, WATCH_RING));
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(0, fdinfo(self->fd, "features"));
}

TEST_F(negotiation, exchange_is_refused_after_a_read)
{
	struct ummunotify_event ev;

	ASSERT_EQ(0, fcntl(self->fd, F_SETFL, O_NONBLOCK));
	ASSERT_EQ(-EAGAIN, try_read(self->fd, &ev, sizeof(ev)));
	EXPECT_EQ(-EINVAL, exchange(self->fd, WATCH_RING));
}

TEST_F(negotiation, exchange_faults_on_a_bad_pointer_and_grants_nothing)
{
	__u32 wanted = WATCH_RING;
	struct ummunotify_params p;

	EXPECT_EQ(-EFAULT, uioctl(self->fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				  NULL));
	EXPECT_EQ(-EFAULT, uioctl(self->fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				  read_only_copy(_metadata, &wanted,
						 sizeof(wanted))));
	EXPECT_EQ(0, fdinfo(self->fd, "features"));
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, setup_is_refused_before_exchange)
{
	struct ummunotify_params p;

	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	EXPECT_EQ(0, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, setup_is_refused_when_nothing_was_granted)
{
	struct ummunotify_params p;

	ASSERT_EQ(0, exchange(self->fd, UMMUNOTIFY_FEATURE_PRESSURE));
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, setup_is_refused_twice)
{
	struct ummunotify_params p;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	ASSERT_EQ(0, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, watch_before_setup_is_refused)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_watch w = watch_arg(buf, ps, 1, 0);
	struct ummunotify_params p;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	EXPECT_EQ(-EINVAL, uioctl(self->fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0, fdinfo(self->fd, "regions"));
	EXPECT_EQ(0, setup(self->fd, &p, 0, 0));
}

/* A 2010 registration of a file granted WATCH but never set up. */
TEST_F(negotiation, resize_of_a_2010_registration_is_refused)
{
	char *buf = map_guarded(_metadata, 2);
	struct ummunotify_watch w;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	ASSERT_EQ(0, register_region(self->fd, buf, ps, 1));
	EXPECT_EQ(-EINVAL, resize(self->fd, &w, buf, 2 * ps, 1, 0));
}

/*
 * The 2010 test program passed an uninitialised mask: whatever a 2010
 * program is granted, it keeps the 2010 ABI until it calls SETUP.
 */
TEST_F(negotiation, until_setup_a_file_granted_features_speaks_the_2010_abi)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_event ev[2];
	struct ummunotify_params p;
	const __u64 *counter;

	ASSERT_NE(0, exchange(self->fd, ~0U));
	counter = mmap(NULL, ps, PROT_READ, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, counter);
	ASSERT_EQ(0, register_region(self->fd, buf, ps, 7));
	clear_page(_metadata, buf);
	EXPECT_EQ(1ULL, *counter);
	ASSERT_EQ((ssize_t)sizeof(ev), try_read(self->fd, ev, sizeof(ev)));
	EXPECT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_INVAL, ev[0].type);
	EXPECT_EQ(7ULL, ev[0].user_cookie_counter);
	EXPECT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_LAST, ev[1].type);
	/* Used the 2010 way: too late to turn the features on. */
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, setup_gives_4096_slots_and_ring_entries_by_default)
{
	/* Whole pages of words: 8192 slots with 64K pages. */
	__u32 slots = (4096 * sizeof(__u64) + ps - 1) / ps * ps / sizeof(__u64);
	struct ummunotify_params p;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	ASSERT_EQ(0, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(slots, p.slots);
	EXPECT_EQ(4096U, p.ring_entries);
	EXPECT_EQ((long long)slots, fdinfo(self->fd, "slots"));
	EXPECT_EQ(4096, fdinfo(self->fd, "ring_entries"));
}

TEST_F(negotiation, setup_rounds_slots_up_to_whole_pages)
{
	__u32 per_page = ps / sizeof(__u64);
	int fd = open_dev(_metadata, O_RDWR);
	struct ummunotify_params p;

	ASSERT_EQ(UMMUNOTIFY_FEATURE_WATCH,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_WATCH));
	ASSERT_EQ(0, setup(self->fd, &p, 1, 0));
	EXPECT_EQ(per_page, p.slots);
	ASSERT_EQ(UMMUNOTIFY_FEATURE_WATCH,
		  exchange(fd, UMMUNOTIFY_FEATURE_WATCH));
	ASSERT_EQ(0, setup(fd, &p, per_page + 1, 0));
	EXPECT_EQ(2 * per_page, p.slots);
	EXPECT_EQ(2 * per_page, fdinfo(fd, "slots"));
}

TEST_F(negotiation, setup_accepts_ring_sizes_from_2_to_2_pow_20)
{
	int fd = open_dev(_metadata, O_RDWR);
	struct ummunotify_params p;

	ASSERT_EQ(UMMUNOTIFY_FEATURE_RING,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_RING));
	ASSERT_EQ(0, setup(self->fd, &p, 0, 2));
	EXPECT_EQ(2U, p.ring_entries);
	ASSERT_EQ(UMMUNOTIFY_FEATURE_RING,
		  exchange(fd, UMMUNOTIFY_FEATURE_RING));
	ASSERT_EQ(0, setup(fd, &p, 0, 1U << 20));
	EXPECT_EQ(1U << 20, p.ring_entries);
	EXPECT_LE((__u64)EVENT_SIZE << 20, p.mmap_size);
}

TEST_F(negotiation, setup_refuses_ring_sizes_that_are_not_powers_of_two_from_2_to_2_pow_20)
{
	static const __u32 bad[] = { 1, 3, 6, 4095, 1U << 21, 1U << 31 };
	struct ummunotify_params p;
	unsigned int i;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-EINVAL, setup(self->fd, &p, 0, bad[i]))
			TH_LOG("ring_entries %u", bad[i]);
	}
	EXPECT_EQ(0, setup(self->fd, &p, 0, 8));
}

TEST_F(negotiation, setup_refuses_slots_without_watch_and_entries_without_ring)
{
	int fd = open_dev(_metadata, O_RDWR);
	struct ummunotify_params p;

	ASSERT_EQ(UMMUNOTIFY_FEATURE_RING,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_RING));
	EXPECT_EQ(-EINVAL, setup(self->fd, &p, 1, 0));
	EXPECT_EQ(0, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(0U, p.slots);
	ASSERT_EQ(UMMUNOTIFY_FEATURE_WATCH,
		  exchange(fd, UMMUNOTIFY_FEATURE_WATCH));
	EXPECT_EQ(-EINVAL, setup(fd, &p, 0, 4));
	EXPECT_EQ(0, setup(fd, &p, 0, 0));
	EXPECT_EQ(0U, p.ring_entries);
	EXPECT_EQ(0ULL, p.head_offset);
}

TEST_F(negotiation, setup_refuses_nonzero_flags_and_reserved_fields)
{
	struct ummunotify_params p;
	unsigned int i;

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	p = (struct ummunotify_params) { .flags = 1 };
	EXPECT_EQ(-EINVAL, uioctl(self->fd, UMMUNOTIFY_SETUP, &p));
	p = (struct ummunotify_params) { .reserved = 1 };
	EXPECT_EQ(-EINVAL, uioctl(self->fd, UMMUNOTIFY_SETUP, &p));
	for (i = 0; i < ARRAY_SIZE(p.reserved2); i++) {
		p = (struct ummunotify_params) {};
		p.reserved2[i] = 1;
		EXPECT_EQ(-EINVAL, uioctl(self->fd, UMMUNOTIFY_SETUP, &p))
			TH_LOG("reserved2[%u]", i);
	}
	EXPECT_EQ(0, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, setup_faults_on_a_bad_pointer_and_changes_nothing)
{
	struct ummunotify_params p = {};

	ASSERT_EQ(WATCH_RING, exchange(self->fd, WATCH_RING));
	EXPECT_EQ(-EFAULT, uioctl(self->fd, UMMUNOTIFY_SETUP, NULL));
	EXPECT_EQ(-EFAULT, uioctl(self->fd, UMMUNOTIFY_SETUP,
				  read_only_copy(_metadata, &p, sizeof(p))));
	EXPECT_EQ(0, fdinfo(self->fd, "slots"));
	EXPECT_EQ(0, fdinfo(self->fd, "ring_entries"));
	EXPECT_EQ(0, setup(self->fd, &p, 0, 0));
}

TEST_F(negotiation, watch_is_refused_without_feature_watch)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_watch w = watch_arg(buf, ps, 1, 0);
	struct ummunotify_params p;

	ASSERT_EQ(UMMUNOTIFY_FEATURE_RING,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_RING));
	ASSERT_EQ(0, setup(self->fd, &p, 0, 0));
	EXPECT_EQ(-EINVAL, uioctl(self->fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0, fdinfo(self->fd, "regions"));
}

TEST_F(negotiation, resize_is_refused_without_feature_watch)
{
	char *buf = map_guarded(_metadata, 2);
	struct ummunotify_params p;
	struct ummunotify_watch w;

	ASSERT_EQ(UMMUNOTIFY_FEATURE_RING,
		  exchange(self->fd, UMMUNOTIFY_FEATURE_RING));
	ASSERT_EQ(0, setup(self->fd, &p, 0, 0));
	ASSERT_EQ(0, register_region(self->fd, buf, ps, 1));
	EXPECT_EQ(-EINVAL, resize(self->fd, &w, buf, 2 * ps, 1, 0));
}

TEST_F(negotiation, a_ring_only_file_posts_2010_registrations_without_a_slot)
{
	char *buf = map_guarded(_metadata, 1);
	struct umn u;

	umn_init(_metadata, &u, UMMUNOTIFY_FEATURE_RING, 0, 0);
	ASSERT_EQ(0, register_region(u.fd, buf, ps, 1));
	clear_page(_metadata, buf);
	expect_event(_metadata, &u, UMMUNOTIFY_CAUSE_CLEAR, buf, ps, 1,
		     UMMUNOTIFY_NO_SLOT);
	EXPECT_TRUE(ring_empty(&u));
}

TEST_F(negotiation, a_watch_only_file_reports_through_the_2010_queue)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_watch w;
	struct ummunotify_event ev;
	struct umn u;

	umn_init(_metadata, &u, UMMUNOTIFY_FEATURE_WATCH, 0, 0);
	EXPECT_EQ(0ULL, u.p.head_offset);
	w = watch_range(_metadata, u.fd, buf, ps, 1, 0);
	clear_page(_metadata, buf);
	EXPECT_NE(w.generation, gen_of(&u, w.slot));
	ASSERT_EQ((ssize_t)sizeof(ev), try_read(u.fd, &ev, sizeof(ev)));
	EXPECT_EQ(UMMUNOTIFY_EVENT_TYPE_INVAL, (int)ev.type);
	EXPECT_EQ(1ULL, ev.user_cookie_counter);
}

TEST_F(negotiation, a_read_only_file_cannot_map_its_head_writable)
{
	int fd = open_dev(_metadata, O_RDONLY);
	struct ummunotify_params p;

	ASSERT_EQ(WATCH_RING, exchange(fd, WATCH_RING));
	ASSERT_EQ(0, setup(fd, &p, 0, 0));
	EXPECT_EQ(-EACCES, try_mmap(fd, ps, PROT_READ | PROT_WRITE,
				    MAP_SHARED, p.head_offset));
	EXPECT_EQ(0, try_mmap(fd, ps, PROT_READ, MAP_SHARED, p.head_offset));
	EXPECT_EQ(0, try_mmap(fd, p.mmap_size, PROT_READ, MAP_SHARED, 0));
}

/*
 * A file granted WATCH and RING with the default sizes, mapped, and a
 * guarded buffer of BUF_PAGES populated pages.
 */
FIXTURE(native)
{
	struct umn u;
	char *buf;
};

FIXTURE_SETUP(native)
{
	umn_init(_metadata, &self->u, WATCH_RING, 0, 0);
	self->buf = map_guarded(_metadata, BUF_PAGES);
}

FIXTURE_TEARDOWN(native)
{
	close(self->u.fd);
}

TEST_F(native, setup_reports_a_layout_that_fits_in_the_mapping)
{
	const struct ummunotify_params *p = &self->u.p;
	const struct {
		const char *name;
		__u64 start, len, align;
	} fields[] = {
		{ "counter", p->off.counter, 8, 8 },
		{ "tail", p->off.tail, 8, 8 },
		{ "dropped", p->off.dropped, 8, 8 },
		{ "ring_mask", p->off.ring_mask, 4, 4 },
		{ "generations", p->off.generations, p->slots * 8ULL, 8 },
		{ "events", p->off.events, p->ring_entries * EVENT_SIZE, 8 },
	};
	unsigned int i, j, n = ARRAY_SIZE(fields);

	EXPECT_EQ(0ULL, p->mmap_size % ps);
	EXPECT_NE(0ULL, p->head_offset);
	EXPECT_EQ(0ULL, p->head_offset % ps);
	EXPECT_EQ(0U, p->off.head % 8);
	EXPECT_LE(p->off.head + 8, ps);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(0ULL, fields[i].start % fields[i].align)
			TH_LOG("%s", fields[i].name);
		EXPECT_LE(fields[i].start + fields[i].len, p->mmap_size)
			TH_LOG("%s", fields[i].name);
		for (j = 0; j < i; j++) {
			EXPECT_FALSE(ranges_overlap(fields[i].start,
						    fields[i].len,
						    fields[j].start,
						    fields[j].len))
				TH_LOG("%s overlaps %s", fields[i].name,
				       fields[j].name);
		}
	}
}

TEST_F(native, a_new_area_reads_zero_except_the_ring_mask)
{
	const struct umn *u = &self->u;
	__u32 slot;

	EXPECT_EQ(0ULL, area_u64(u, u->p.off.counter));
	EXPECT_EQ(0ULL, ring_tail(u));
	EXPECT_EQ(0ULL, ring_dropped(u));
	EXPECT_EQ(u->p.ring_entries - 1,
		  *(const __u32 *)(u->area + u->p.off.ring_mask));
	EXPECT_EQ(0ULL, *u->head);
	for (slot = 0; slot < u->p.slots; slot++) {
		ASSERT_EQ(0ULL, gen_of(u, slot)) TH_LOG("slot %u", slot);
	}
}

TEST_F(native, the_area_maps_read_only_and_never_writable)
{
	EXPECT_EQ(0, try_mmap(self->u.fd, self->u.p.mmap_size, PROT_READ,
			      MAP_SHARED, 0));
	EXPECT_EQ(-EPERM, try_mmap(self->u.fd, self->u.p.mmap_size,
				   PROT_READ | PROT_WRITE, MAP_SHARED, 0));
	EXPECT_EQ(-EPERM, try_mmap(self->u.fd, ps, PROT_WRITE, MAP_SHARED, 0));
	EXPECT_EQ(-1, mprotect(self->u.area, ps, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
}

TEST_F(native, the_head_page_maps_read_write_and_the_kernel_sees_it)
{
	struct pollfd pfd = { .fd = self->u.fd, .events = POLLIN };
	__u64 *head;

	head = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, self->u.fd,
		    self->u.p.head_offset);
	ASSERT_NE(MAP_FAILED, head);
	head = (__u64 *)((char *)head + self->u.p.off.head);
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	__atomic_store_n(head, 1, __ATOMIC_RELEASE);
	EXPECT_EQ(1ULL, *self->u.head);
	EXPECT_EQ(0, poll(&pfd, 1, 0));
}

TEST_F(native, mmap_refuses_wrong_offsets_and_sizes_and_private_mappings)
{
	const struct ummunotify_params *p = &self->u.p;
	int fd = self->u.fd;

	EXPECT_EQ(-EINVAL, try_mmap(fd, p->mmap_size + ps, PROT_READ,
				    MAP_SHARED, 0));
	EXPECT_EQ(-EINVAL, try_mmap(fd, ps, PROT_READ, MAP_SHARED, ps));
	EXPECT_EQ(-EINVAL, try_mmap(fd, 2 * ps, PROT_READ | PROT_WRITE,
				    MAP_SHARED, p->head_offset));
	EXPECT_EQ(-EINVAL, try_mmap(fd, ps, PROT_READ | PROT_WRITE,
				    MAP_SHARED, p->head_offset + ps));
	EXPECT_EQ(-EINVAL, try_mmap(fd, p->mmap_size, PROT_READ,
				    MAP_PRIVATE, 0));
	EXPECT_EQ(-EINVAL, try_mmap(fd, ps, PROT_READ, MAP_PRIVATE,
				    p->head_offset));
}

TEST_F(native, the_2010_counter_sits_at_off_counter_and_counts_invalidations)
{
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(1ULL, area_u64(&self->u, self->u.p.off.counter));
	EXPECT_EQ(1, fdinfo(self->u.fd, "counter"));
}

TEST_F(native, watch_returns_a_slot_whose_word_holds_its_nonzero_generation)
{
	struct ummunotify_watch a, b;

	a = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	b = watch_range(_metadata, self->u.fd, self->buf, ps, 2, 0);
	EXPECT_LT(a.slot, self->u.p.slots);
	EXPECT_LT(b.slot, self->u.p.slots);
	EXPECT_NE(a.slot, b.slot);
	EXPECT_NE(0ULL, a.generation);
	EXPECT_NE(0ULL, b.generation);
	EXPECT_NE(a.generation, b.generation);
	EXPECT_EQ(a.generation, gen_of(&self->u, a.slot));
	EXPECT_EQ(b.generation, gen_of(&self->u, b.slot));
	EXPECT_EQ(2, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, munmap_changes_the_generation_before_it_returns)
{
	struct ummunotify_watch w;
	char *p = self->buf + ps;

	w = watch_range(_metadata, self->u.fd, p, ps, 1, 0);
	ASSERT_EQ(0, munmap(p, ps));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_UNMAP,
			       p, ps, 1, w.slot));
}

/* arm64's top-byte tags (MTE, HWASan): taken off, as munmap() does. */
TEST_F(native, a_tagged_range_is_watched_untagged)
{
#ifdef __aarch64__
	char *p = self->buf + ps;
	void *tagged = (void *)((uintptr_t)p | 0x2aUL << 56);
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, tagged, ps, 1, 0);
	ASSERT_EQ(0, munmap(tagged, ps));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_UNMAP,
			       p, ps, 1, w.slot));
#else
	SKIP(return, "no address tags on this architecture");
#endif
}

TEST_F(native, madvise_dontneed_changes_the_generation_before_it_returns)
{
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
			       self->buf, ps, 1, w.slot));
}

TEST_F(native, mremap_changes_the_generation_before_it_returns)
{
	char *dst = map_guarded(_metadata, 1);
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_EQ(dst, mremap(self->buf, ps, ps,
			      MREMAP_MAYMOVE | MREMAP_FIXED, dst));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	/* The move and the unmap of the old range may each report it. */
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_UNMAP, self->buf,
		     ps, 1, w.slot);
}

TEST_F(native, mmap_fixed_over_a_watched_range_changes_the_generation)
{
	struct ummunotify_watch w;
	char *p = self->buf;

	w = watch_range(_metadata, self->u.fd, p, ps, 1, 0);
	ASSERT_EQ(p, mmap(p, ps, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_UNMAP,
			       p, ps, 1, w.slot));
}

TEST_F(native, mprotect_leaves_a_default_watch_alone_and_counts_it_filtered)
{
	long long filtered = fdinfo(self->u.fd, "filtered");
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(filtered + 1, fdinfo(self->u.fd, "filtered"));
}

TEST_F(native, mprotect_changes_a_watch_that_asks_for_protection)
{
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1,
			UMMUNOTIFY_CAUSES_DEFAULT | CAUSE(PROTECTION));
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u,
			       UMMUNOTIFY_CAUSE_PROTECTION, self->buf, ps, 1,
			       w.slot));
}

/* fork() write-protects the parent's private pages for copy-on-write. */
static void fork_and_reap(struct __test_metadata *_metadata)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid)
		_exit(0);
	ASSERT_EQ(0, wait_child(pid));
}

TEST_F(native, fork_leaves_a_default_watch_alone)
{
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	fork_and_reap(_metadata);
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
}

TEST_F(native, fork_changes_a_watch_that_asks_for_protection)
{
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1,
			UMMUNOTIFY_CAUSES_DEFAULT | CAUSE(PROTECTION));
	fork_and_reap(_metadata);
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u,
			       UMMUNOTIFY_CAUSE_PROTECTION, self->buf, ps, 1,
			       w.slot));
}

TEST_F(native, causes_select_what_a_watch_reports)
{
	long long filtered = fdinfo(self->u.fd, "filtered");
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1,
			CAUSE(PROTECTION));
	clear_page(_metadata, self->buf);
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(filtered + 1, fdinfo(self->u.fd, "filtered"));
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
}

TEST_F(native, unwatch_makes_the_slot_read_zero_and_stops_reports)
{
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_EQ(0, unwatch(self->u.fd, 1));
	EXPECT_EQ(0ULL, gen_of(&self->u, w.slot));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
	clear_page(_metadata, self->buf);
	EXPECT_EQ(0ULL, gen_of(&self->u, w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(-EINVAL, unwatch(self->u.fd, 1));
}

static int compare_u64(const void *a, const void *b)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b;

	return x < y ? -1 : x > y;
}

/* Sorts GENS: are they all nonzero and distinct? */
static bool generations_unique(struct __test_metadata *_metadata,
			       __u64 *gens, size_t n)
{
	size_t i;

	qsort(gens, n, sizeof(*gens), compare_u64);
	for (i = 0; i < n; i++) {
		if (!gens[i]) {
			TH_LOG("a generation is 0");
			return false;
		}
		if (i && gens[i] == gens[i - 1]) {
			TH_LOG("generation %llu repeats", gens[i]);
			return false;
		}
	}
	return true;
}

#define REUSE_CYCLES	2000

TEST_F(native, reused_slots_never_repeat_a_generation)
{
	static __u64 gens[2 * REUSE_CYCLES];
	static bool slot_seen[REUSE_CYCLES];
	struct ummunotify_watch w;
	unsigned int i, reused = 0;
	size_t n = 0;
	struct umn u;

	/* One page of slots for 2000 watches: slots must be reused. */
	umn_init(_metadata, &u, UMMUNOTIFY_FEATURE_WATCH, 1, 0);
	ASSERT_GT(REUSE_CYCLES, (int)u.p.slots);
	for (i = 0; i < REUSE_CYCLES; i++) {
		w = watch_range(_metadata, u.fd, self->buf, ps, i, 0);
		ASSERT_EQ(w.generation, gen_of(&u, w.slot));
		reused += slot_seen[w.slot];
		slot_seen[w.slot] = true;
		gens[n++] = w.generation;
		if (i % 2) {
			clear_page(_metadata, self->buf);
			gens[n++] = gen_of(&u, w.slot);
		}
		ASSERT_EQ(0, unwatch(u.fd, i));
	}
	EXPECT_LT(0U, reused);
	EXPECT_TRUE(generations_unique(_metadata, gens, n));
}

TEST_F(native, a_cookie_in_use_is_refused)
{
	struct ummunotify_watch w = watch_arg(self->buf, 2 * ps, 5, 0);

	watch_range(_metadata, self->u.fd, self->buf, ps, 5, 0);
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(-EINVAL, register_region(self->u.fd, self->buf, ps, 5));
	ASSERT_EQ(0, register_region(self->u.fd, self->buf, ps, 6));
	w.user_cookie = 6;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(2, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, watch_fails_with_enospc_when_the_slots_run_out)
{
	struct ummunotify_watch w = watch_arg(self->buf, ps, 0, 0);
	unsigned int i;
	struct umn u;
	char *buf;

	umn_init(_metadata, &u, UMMUNOTIFY_FEATURE_WATCH, 1, 0);
	/* A page each: a stack over one page ends sooner (max_overlap). */
	buf = mmap(NULL, u.p.slots * ps, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, buf);
	for (i = 0; i < u.p.slots; i++)
		watch_range(_metadata, u.fd, buf + i * ps, ps, i, 0);
	w.user_cookie = i;
	EXPECT_EQ(-ENOSPC, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(u.p.slots, fdinfo(u.fd, "regions"));
	ASSERT_EQ(0, unwatch(u.fd, 7));
	EXPECT_EQ(0, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
}

TEST_F(native, watch_all_with_a_range_is_refused)
{
	struct ummunotify_watch w = watch_arg(NULL, 0, 1, 0);

	w.flags = UMMUNOTIFY_WATCH_ALL;
	w.end = ps;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	w.start = ps;
	w.end = 2 * ps;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, watch_refuses_bad_ranges_causes_flags_and_reserved)
{
	__u64 b = (uintptr_t)self->buf;
	struct {
		const char *what;
		struct ummunotify_watch w;
	} bad[] = {
		{ "empty range", { .start = b, .end = b } },
		{ "start after end", { .start = b + ps, .end = b } },
		{ "end beyond user space", { .start = b, .end = 1ULL << 63 } },
		{ "end at ~0", { .start = b, .end = ~0ULL } },
		{ "unknown cause", { .start = b, .end = b + ps,
				     .causes = 1U << 8 } },
		{ "unknown high cause", { .start = b, .end = b + ps,
					  .causes = 1U << 31 } },
		{ "unknown flag", { .start = b, .end = b + ps, .flags = 2 } },
		{ "nonzero reserved", { .start = b, .end = b + ps,
					.reserved = 1 } },
	};
	unsigned int i, n = ARRAY_SIZE(bad);

	for (i = 0; i < n; i++) {
		EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCH,
					  &bad[i].w))
			TH_LOG("%s", bad[i].what);
	}
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
}

/* Only a 2010 file is as lax as the 2010 kernel (see ummunotify_test). */
TEST_F(native, register_on_a_set_up_file_refuses_nonzero_flags_and_reserved)
{
	struct ummunotify_register_ioctl r = {
		.start = (uintptr_t)self->buf,
		.end = (uintptr_t)self->buf + ps,
		.user_cookie = 1,
		.flags = 1,
	};

	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_REGISTER_REGION, &r));
	r.flags = 0;
	r.reserved = 1;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_REGISTER_REGION, &r));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, watch_faults_on_bad_pointers_and_registers_nothing)
{
	struct ummunotify_watch w = watch_arg(self->buf, ps, 1, 0);

	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCH, NULL));
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCH,
				  read_only_copy(_metadata, &w, sizeof(w))));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
	clear_page(_metadata, self->buf);
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
}

TEST_F(native, an_unknown_ioctl_fails_with_enotty)
{
	const unsigned long next = _IOWR(UMMUNOTIFY_MAGIC, 7,
					 struct ummunotify_watch);
	const unsigned long write_only = _IOW(UMMUNOTIFY_MAGIC, 4,
					      struct ummunotify_watch);
	struct ummunotify_watch w = watch_arg(self->buf, ps, 1, 0);

	EXPECT_EQ(-ENOTTY, uioctl(self->u.fd, next, &w));
	EXPECT_EQ(-ENOTTY, uioctl(self->u.fd, write_only, &w));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, events_carry_the_clipped_range_cookie_slot_cause_and_generation)
{
	char *p = self->buf;
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, p + ps, 2 * ps, 9, 0);
	ASSERT_EQ(0, madvise(p, 2 * ps, MADV_DONTNEED));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
			       p + ps, ps, 9, w.slot));
	ASSERT_EQ(0, munmap(p + 2 * ps, 2 * ps));
	EXPECT_EQ(gen_of(&self->u, w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_UNMAP,
			       p + 2 * ps, ps, 9, w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
}

TEST_F(native, one_invalidation_over_two_watches_posts_an_event_for_each)
{
	struct ummunotify_ring_event ev[2];
	struct ummunotify_watch a, b;
	char *p = self->buf;
	unsigned int i;

	a = watch_range(_metadata, self->u.fd, p, 2 * ps, 1, 0);
	b = watch_range(_metadata, self->u.fd, p + ps, 2 * ps, 2, 0);
	ASSERT_EQ(0, madvise(p, 3 * ps, MADV_DONTNEED));
	ASSERT_TRUE(ring_pop(&self->u, &ev[0]));
	ASSERT_TRUE(ring_pop(&self->u, &ev[1]));
	EXPECT_TRUE(ring_empty(&self->u));
	for (i = 0; i < 2; i++) {
		const struct ummunotify_watch *w = ev[i].user_cookie == 1 ?
						   &a : &b;

		check_event(_metadata, &ev[i], UMMUNOTIFY_CAUSE_CLEAR,
			    (void *)(uintptr_t)w->start, 2 * ps,
			    w->user_cookie, w->slot);
		EXPECT_EQ(gen_of(&self->u, w->slot), ev[i].generation);
	}
	EXPECT_NE(ev[0].user_cookie, ev[1].user_cookie);
}

TEST_F(native, read_returns_whole_events_and_advances_the_head)
{
	struct ummunotify_ring_event ev[4];
	struct ummunotify_watch w;
	unsigned int i;

	w = watch_range(_metadata, self->u.fd, self->buf, 3 * ps, 1, 0);
	clear_pages(_metadata, self->buf, 0, 3);
	ASSERT_EQ(2 * EVENT_SIZE, try_read(self->u.fd, ev,
					   2 * EVENT_SIZE + 10));
	EXPECT_EQ(2ULL, *self->u.head);
	ASSERT_EQ(EVENT_SIZE, try_read(self->u.fd, &ev[2], 2 * EVENT_SIZE));
	EXPECT_EQ(3ULL, *self->u.head);
	for (i = 0; i < 3; i++)
		check_event(_metadata, &ev[i], UMMUNOTIFY_CAUSE_CLEAR,
			    self->buf + i * ps, ps, 1, w.slot);
	EXPECT_EQ(gen_of(&self->u, w.slot), ev[2].generation);
}

/* As a 2010 file's: not cut short where the buffer's next page is absent. */
TEST_F(native, read_fills_a_buffer_whose_later_page_is_not_present)
{
	struct ummunotify_ring_event *ev;
	struct ummunotify_watch w;
	unsigned int i;
	char *out;

	out = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, out);
	out[0] = 1;
	/* Not present, even if a huge page backed the first. */
	ASSERT_EQ(0, madvise(out + ps, ps, MADV_DONTNEED));
	ev = (struct ummunotify_ring_event *)(out + ps - EVENT_SIZE);
	w = watch_range(_metadata, self->u.fd, self->buf, 3 * ps, 1, 0);
	clear_pages(_metadata, self->buf, 0, 3);
	ASSERT_EQ(3 * EVENT_SIZE, try_read(self->u.fd, ev, 3 * EVENT_SIZE));
	EXPECT_EQ(3ULL, *self->u.head);
	for (i = 0; i < 3; i++)
		check_event(_metadata, &ev[i], UMMUNOTIFY_CAUSE_CLEAR,
			    self->buf + i * ps, ps, 1, w.slot);
	EXPECT_EQ(0, munmap(out, 2 * ps));
}

TEST_F(native, read_into_a_guard_page_returns_the_events_before_it)
{
	struct ummunotify_ring_event *ev, rest[2];
	struct ummunotify_watch w;
	unsigned int i;
	char *out;

	out = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, out);
	ASSERT_EQ(0, mprotect(out + ps, ps, PROT_NONE));
	ev = (struct ummunotify_ring_event *)(out + ps - EVENT_SIZE);
	w = watch_range(_metadata, self->u.fd, self->buf, 3 * ps, 1, 0);
	clear_pages(_metadata, self->buf, 0, 3);
	ASSERT_EQ(EVENT_SIZE, try_read(self->u.fd, ev, 3 * EVENT_SIZE));
	EXPECT_EQ(1ULL, *self->u.head);
	check_event(_metadata, ev, UMMUNOTIFY_CAUSE_CLEAR, self->buf, ps, 1,
		    w.slot);
	ASSERT_EQ(2 * EVENT_SIZE, try_read(self->u.fd, rest, sizeof(rest)));
	for (i = 0; i < 2; i++)
		check_event(_metadata, &rest[i], UMMUNOTIFY_CAUSE_CLEAR,
			    self->buf + (i + 1) * ps, ps, 1, w.slot);
	EXPECT_EQ(0, munmap(out, 2 * ps));
}

TEST_F(native, read_of_less_than_one_event_is_refused)
{
	struct ummunotify_ring_event ev;

	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(-EINVAL, try_read(self->u.fd, &ev, EVENT_SIZE - 1));
	EXPECT_EQ(0ULL, *self->u.head);
	EXPECT_EQ(EVENT_SIZE, try_read(self->u.fd, &ev, EVENT_SIZE));
}

TEST_F(native, read_of_an_empty_nonblocking_ring_fails_with_eagain)
{
	struct ummunotify_ring_event ev;

	ASSERT_EQ(0, fcntl(self->u.fd, F_SETFL, O_NONBLOCK));
	EXPECT_EQ(-EAGAIN, try_read(self->u.fd, &ev, sizeof(ev)));
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(EVENT_SIZE, try_read(self->u.fd, &ev, sizeof(ev)));
	EXPECT_EQ(-EAGAIN, try_read(self->u.fd, &ev, sizeof(ev)));
}

TEST_F(native, read_into_a_bad_buffer_faults_and_loses_nothing)
{
	struct ummunotify_ring_event ev = {};
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(-EFAULT, try_read(self->u.fd,
				    read_only_copy(_metadata, &ev, sizeof(ev)),
				    EVENT_SIZE));
	EXPECT_EQ(0ULL, *self->u.head);
	ASSERT_EQ(EVENT_SIZE, try_read(self->u.fd, &ev, sizeof(ev)));
	check_event(_metadata, &ev, UMMUNOTIFY_CAUSE_CLEAR, self->buf, ps, 1,
		    w.slot);
}

/* Clear the page ARG: another thread does, to wake up this one. */
static void clear_now(void *page)
{
	madvise(page, ps, MADV_DONTNEED);
}

TEST_F(native, a_blocking_read_returns_the_event_posted_meanwhile)
{
	struct ummunotify_ring_event ev;
	struct ummunotify_watch w;
	struct when_asleep later;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_EQ(0, start_when_asleep(&later, clear_now, self->buf));
	EXPECT_EQ(EVENT_SIZE, try_read(self->u.fd, &ev, sizeof(ev)));
	ASSERT_EQ(1, end_when_asleep(&later)) TH_LOG("read() never slept");
	check_event(_metadata, &ev, UMMUNOTIFY_CAUSE_CLEAR, self->buf, ps, 1,
		    w.slot);
}

TEST_F(native, poll_is_readable_exactly_while_head_and_tail_differ)
{
	struct pollfd pfd = { .fd = self->u.fd, .events = POLLIN };

	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	clear_page(_metadata, self->buf);
	ASSERT_EQ(1, poll(&pfd, 1, 0));
	EXPECT_EQ(POLLIN, pfd.revents);
	set_head(&self->u, ring_tail(&self->u));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
}

TEST_F(native, poll_wakes_up_when_an_event_is_posted)
{
	struct pollfd pfd = { .fd = self->u.fd, .events = POLLIN };
	struct when_asleep later;

	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_EQ(0, start_when_asleep(&later, clear_now, self->buf));
	EXPECT_EQ(1, poll(&pfd, 1, 2 * WAKER_MS));
	EXPECT_EQ(POLLIN, pfd.revents);
	ASSERT_EQ(1, end_when_asleep(&later)) TH_LOG("poll() never slept");
}

TEST_F(native, watch_all_reports_every_munmap_with_its_exact_range)
{
	const struct {
		size_t page, pages;
	} cuts[] = { { 1, 1 }, { 3, 2 }, { 6, 1 }, { 0, 1 } };
	unsigned int i, n = ARRAY_SIZE(cuts);
	struct ummunotify_watch w = { .user_cookie = 3 };
	struct ummunotify_ring_event ev;

	w.flags = UMMUNOTIFY_WATCH_ALL;
	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	for (i = 0; i < n; i++)
		ASSERT_EQ(0, munmap(self->buf + cuts[i].page * ps,
				    cuts[i].pages * ps));
	/* Other changes (a stack page's first write) may come in between. */
	for (i = 0; i < n && ring_pop(&self->u, &ev); ) {
		if (ev.cause != UMMUNOTIFY_CAUSE_UNMAP)
			continue;
		check_event(_metadata, &ev, UMMUNOTIFY_CAUSE_UNMAP,
			    self->buf + cuts[i].page * ps, cuts[i].pages * ps,
			    3, w.slot);
		i++;
	}
	EXPECT_EQ(n, i);
}

TEST_F(native, watch_all_changes_its_generation_on_any_munmap)
{
	char *elsewhere = map_guarded(_metadata, 1);
	struct ummunotify_watch w = { .user_cookie = 3 };

	w.flags = UMMUNOTIFY_WATCH_ALL;
	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	ASSERT_EQ(0, munmap(elsewhere, ps));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
}

/* Its ring says what changed: the 2010 counter is for range watches. */
TEST_F(native, watch_all_leaves_the_2010_counter_alone)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };

	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	clear_page(_metadata, self->buf);
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(0ULL, area_u64(&self->u, self->u.p.off.counter));
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR, self->buf,
		     ps, 3, w.slot);
}

/* Without a ring its reports are the 2010 queue's: the counter says so. */
TEST_F(native, watch_all_without_a_ring_moves_the_counter)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	struct umn u;

	umn_init(_metadata, &u, UMMUNOTIFY_FEATURE_WATCH, 0, 0);
	ASSERT_EQ(0, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
	clear_page(_metadata, self->buf);
	EXPECT_NE(w.generation, gen_of(&u, w.slot));
	EXPECT_LT(0ULL, area_u64(&u, u.p.off.counter));
	close(u.fd);
}

/*
 * The files of one process share the address space's notifier: each gets
 * every invalidation and keeps its own in_flight, and one closing leaves
 * the other as it was.
 */
TEST_F(native, watch_all_files_of_one_process_each_see_everything)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	struct ummunotify_watch w2 = w;
	struct umn u2;

	umn_init(_metadata, &u2, WATCH_RING, 0, 0);
	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	ASSERT_EQ(0, uioctl(u2.fd, UMMUNOTIFY_WATCH, &w2));
	clear_page(_metadata, self->buf);
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR, self->buf,
		     ps, 3, w.slot);
	expect_event(_metadata, &u2, UMMUNOTIFY_CAUSE_CLEAR, self->buf, ps, 3,
		     w2.slot);
	EXPECT_EQ(0, close(u2.fd));
	clear_page(_metadata, self->buf + ps);
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
		     self->buf + ps, ps, 3, w.slot);
	EXPECT_EQ(0ULL, area_u64(&self->u, self->u.p.off.in_flight));
}

/* A bounded number of them: each invalidation walks them all. */
TEST_F(native, watch_all_watches_of_a_file_are_bounded)
{
	struct ummunotify_watch w = { .flags = UMMUNOTIFY_WATCH_ALL };
	int n;

	for (n = 0; n < 100; n++) {
		w.user_cookie = 100 + n;
		if (uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w))
			break;
	}
	EXPECT_EQ(16, n);
	EXPECT_EQ(16, fdinfo(self->u.fd, "whole_space"));
	EXPECT_EQ(getpid(), fdinfo(self->u.fd, "opener"));
	w.user_cookie = 999;
	EXPECT_EQ(-ENOSPC, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0, unwatch(self->u.fd, 100));
	EXPECT_EQ(15, fdinfo(self->u.fd, "whole_space"));
	EXPECT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
}

/* A result that cannot be written back: no watch, no event later. */
TEST_F(native, watch_with_an_unwritable_result_makes_no_watch)
{
	struct ummunotify_watch w = watch_arg(self->buf, ps, 9, 0), *ro;
	struct ummunotify_watch all = { .user_cookie = 10,
					.flags = UMMUNOTIFY_WATCH_ALL };

	ro = read_only_copy(_metadata, &w, sizeof(w));
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCH, ro));
	ro = read_only_copy(_metadata, &all, sizeof(all));
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCH, ro));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(0, fdinfo(self->u.fd, "whole_space"));
	clear_page(_metadata, self->buf);
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(0, fdinfo(self->u.fd, "events"));
}

/*
 * off.in_flight counts the invalidations of the address space that have
 * started and not ended, once the file has a whole-address-space watch:
 * 0 when nothing changes memory, more while a thread keeps invalidating,
 * 0 again when it stops.
 */
#define IN_FLIGHT_SECONDS	10
/*
 * The harness's bound of the tests that loop for up to 10 or 20 s (its
 * default, 30 s, left a CI machine 2.5 times slower little room).
 */
#define LOOP_TIMEOUT		90

TEST_F_TIMEOUT(native, watch_all_counts_the_invalidations_in_flight,
	       LOOP_TIMEOUT)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	size_t off = self->u.p.off.in_flight;
	struct timespec start;
	struct busy busy;
	bool seen = false;

	ASSERT_NE(0U, off);
	ASSERT_EQ(0U, off % 8);
	ASSERT_GE(self->u.p.mmap_size, off + 8);
	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0ULL, area_u64(&self->u, off));
	busy_start(_metadata, &busy);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!seen && seconds_since(&start) < IN_FLIGHT_SECONDS)
		seen = area_u64(&self->u, off) != 0;
	busy_stop(_metadata, &busy);
	EXPECT_TRUE(seen)
		TH_LOG("in_flight stayed 0 for %d s", IN_FLIGHT_SECONDS);
	EXPECT_EQ(0ULL, area_u64(&self->u, off));
	/* The ring has the MADV_FREEs; none of them is still in flight. */
	EXPECT_LT(0ULL, ring_tail(&self->u));
}

/*
 * A file without one keeps no count, not even while the address space
 * keeps invalidating (another file of it has one): nothing to pay for.
 */
TEST_F_TIMEOUT(native, in_flight_stays_zero_without_a_watch_all, LOOP_TIMEOUT)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	size_t off = self->u.p.off.in_flight;
	struct timespec start;
	bool other = false, ours = false;
	struct busy busy;
	struct umn u2;

	umn_init(_metadata, &u2, WATCH_RING, 0, 0);
	ASSERT_EQ(0, uioctl(u2.fd, UMMUNOTIFY_WATCH, &w));
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	busy_start(_metadata, &busy);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seconds_since(&start) < IN_FLIGHT_SECONDS && !ours &&
	       (!other || seconds_since(&start) < 1)) {
		other |= area_u64(&u2, off) != 0;
		ours |= area_u64(&self->u, off) != 0;
	}
	busy_stop(_metadata, &busy);
	EXPECT_TRUE(other) TH_LOG("the file with WATCH_ALL never counted");
	EXPECT_FALSE(ours);
	close(u2.fd);
}

/*
 * A file leaves the address space's notifier with its last whole-address-
 * space watch: from then on the invalidations of the process pay nothing
 * for it and it counts nothing; a new one joins again.
 */
TEST_F_TIMEOUT(native, in_flight_stops_with_the_last_watch_all, LOOP_TIMEOUT)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	struct ummunotify_watch w2 = w;
	size_t off = self->u.p.off.in_flight;
	bool other = false, ours = false;
	struct timespec start;
	struct busy busy;
	struct umn u2;

	umn_init(_metadata, &u2, WATCH_RING, 0, 0);
	ASSERT_EQ(0, uioctl(u2.fd, UMMUNOTIFY_WATCH, &w2));
	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	ASSERT_EQ(0, unwatch(self->u.fd, 3));
	busy_start(_metadata, &busy);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seconds_since(&start) < IN_FLIGHT_SECONDS && !ours &&
	       (!other || seconds_since(&start) < 1)) {
		other |= area_u64(&u2, off) != 0;
		ours |= area_u64(&self->u, off) != 0;
	}
	EXPECT_TRUE(other) TH_LOG("the file with WATCH_ALL never counted");
	EXPECT_FALSE(ours) TH_LOG("counted after its last WATCH_ALL went");
	ours = false;
	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seconds_since(&start) < IN_FLIGHT_SECONDS && !ours)
		ours = area_u64(&self->u, off) != 0;
	busy_stop(_metadata, &busy);
	EXPECT_TRUE(ours) TH_LOG("a new WATCH_ALL did not count again");
	EXPECT_EQ(0ULL, area_u64(&self->u, off));
	close(u2.fd);
}

/*
 * Each invalidation of the process visits every file of it with whole-
 * address-space watches: 16 files at most, and one that leaves makes room.
 */
#define ALL_FILES	16

TEST_F(native, watch_all_files_of_an_address_space_are_bounded)
{
	struct ummunotify_watch w = { .user_cookie = 3,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	struct umn u[ALL_FILES + 1];
	int i;

	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	for (i = 0; i < ALL_FILES; i++)
		umn_init(_metadata, &u[i], WATCH_RING, 0, 0);
	for (i = 0; i < ALL_FILES - 1; i++)
		ASSERT_EQ(0, uioctl(u[i].fd, UMMUNOTIFY_WATCH, &w))
			TH_LOG("file %d", i);
	EXPECT_EQ(-ENOSPC, uioctl(u[i].fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0, fdinfo(u[i].fd, "regions"));
	/* A range watch has nothing to do with it. */
	watch_range(_metadata, u[i].fd, self->buf, ps, 4, 0);
	EXPECT_EQ(0, unwatch(self->u.fd, 3));
	EXPECT_EQ(0, uioctl(u[i].fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(-ENOSPC, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(0, unwatch(u[0].fd, 3));
	EXPECT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	for (i = 0; i < ALL_FILES; i++)
		close(u[i].fd);
}

/* A whole-address-space watch is never moved, nor a range one made one. */
TEST_F(native, resize_refuses_watch_all_both_ways)
{
	struct ummunotify_watch all = { .user_cookie = 3,
					.flags = UMMUNOTIFY_WATCH_ALL };
	struct ummunotify_watch range, w;

	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &all));
	range = watch_range(_metadata, self->u.fd, self->buf, ps, 4, 0);
	EXPECT_EQ(-EINVAL, resize(self->u.fd, &w, self->buf, 2 * ps, 3, 0));
	w = all;
	w.user_cookie = 4;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_RESIZE, &w));
	/* Both as they were. */
	clear_page(_metadata, self->buf + ps);
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
		     self->buf + ps, ps, 3, all.slot);
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(0, unwatch(self->u.fd, 3));
	clear_page(_metadata, self->buf);
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR, self->buf,
		     ps, 4, range.slot);
}

/* UMMUNOTIFY_WATCHV: unwatches, then watches, in one call. */
static int watchv(int fd, __u64 *cookies, __u32 nr_unwatch,
		  struct ummunotify_watch *w, __u32 nr_watch, __u32 *done)
{
	struct ummunotify_watchv v = {
		.unwatch = (uintptr_t)cookies,
		.watch = (uintptr_t)w,
		.nr_unwatch = nr_unwatch,
		.nr_watch = nr_watch,
	};
	int ret = uioctl(fd, UMMUNOTIFY_WATCHV, &v);

	*done = v.done;
	return ret;
}

TEST_F(native, watchv_unwatches_then_watches_in_one_call)
{
	struct ummunotify_watch old[3], w[2];
	__u64 gone[] = { 1, 2 };
	__u32 done;

	for (int i = 0; i < 3; i++)
		old[i] = watch_range(_metadata, self->u.fd, self->buf + i * ps,
				     ps, i + 1, 0);
	/* Cookie 1 again, for another page: unwatched first. */
	w[0] = watch_arg(self->buf + 3 * ps, ps, 1, 0);
	w[1] = watch_arg(self->buf + 4 * ps, ps, 5, 0);
	ASSERT_EQ(0, watchv(self->u.fd, gone, 2, w, 2, &done));
	EXPECT_EQ(2U, done);
	EXPECT_EQ(3, fdinfo(self->u.fd, "regions"));
	for (int i = 0; i < 2; i++) {
		EXPECT_NE(0ULL, w[i].generation);
		EXPECT_EQ(w[i].generation, gen_of(&self->u, w[i].slot));
	}
	EXPECT_EQ(old[2].generation, gen_of(&self->u, old[2].slot));
	/* The old page of cookie 1 is not watched, its new one is. */
	clear_page(_metadata, self->buf);
	EXPECT_EQ(w[0].generation, gen_of(&self->u, w[0].slot));
	clear_page(_metadata, self->buf + 3 * ps);
	EXPECT_NE(w[0].generation, gen_of(&self->u, w[0].slot));
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
		     self->buf + 3 * ps, ps, 1, w[0].slot);
	EXPECT_TRUE(ring_empty(&self->u));
}

TEST_F(native, watchv_changes_nothing_on_a_bad_argument)
{
	struct ummunotify_watch w[2], *ro;
	struct ummunotify_watchv v = { 0 };
	__u64 cookies[2] = { 1, 1 };
	__u32 done;

	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	w[0] = watch_arg(self->buf + ps, ps, 7, 0);
	w[1] = watch_arg(self->buf + 2 * ps, 0, 8, 0);	/* empty range */
	/* A bad watch: the unwatch is not done either. */
	EXPECT_EQ(-EINVAL, watchv(self->u.fd, cookies, 1, w, 2, &done));
	EXPECT_EQ(0U, done);
	/* A cookie twice, or unknown. */
	EXPECT_EQ(-EINVAL, watchv(self->u.fd, cookies, 2, w, 1, &done));
	cookies[1] = 99;
	EXPECT_EQ(-EINVAL, watchv(self->u.fd, cookies, 2, w, 1, &done));
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));
	/* Sizes and flags. */
	v.nr_watch = UMMUNOTIFY_WATCHV_MAX + 1;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, &v));
	v = (struct ummunotify_watchv){ .flags = 1 };
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, &v));
	v = (struct ummunotify_watchv){ .done = 1 };
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, &v));
	/* Results that cannot be written back, and bad pointers. */
	ro = read_only_copy(_metadata, w, sizeof(w[0]));
	EXPECT_EQ(-EFAULT, watchv(self->u.fd, cookies, 1, ro, 1, &done));
	v = (struct ummunotify_watchv){ .watch = 8, .nr_watch = 1 };
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, &v));
	v = (struct ummunotify_watchv){ .unwatch = 8, .nr_unwatch = 1 };
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, &v));
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, (void *)8));
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));
}

/* Empty arrays are not read: their pointers may be anything. */
TEST_F(native, watchv_reads_no_empty_array)
{
	struct ummunotify_watchv v = {
		.unwatch = (__u64)-4096,
		.watch = (__u64)-4096,
	};

	EXPECT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCHV, &v));
	EXPECT_EQ(0U, v.done);
}

/* A watch cookie in use, or given twice, fails before any unwatch. */
TEST_F(native, watchv_checks_the_watch_cookies_before_unwatching)
{
	struct ummunotify_watch w[2];
	__u64 gone = 1;
	__u32 done;

	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	watch_range(_metadata, self->u.fd, self->buf + ps, ps, 2, 0);
	w[0] = watch_arg(self->buf + 2 * ps, ps, 2, 0);	/* in use */
	EXPECT_EQ(-EINVAL, watchv(self->u.fd, &gone, 1, w, 1, &done));
	EXPECT_EQ(0U, done);
	w[0] = watch_arg(self->buf + 2 * ps, ps, 5, 0);
	w[1] = watch_arg(self->buf + 3 * ps, ps, 5, 0);	/* twice */
	EXPECT_EQ(-EINVAL, watchv(self->u.fd, &gone, 1, w, 2, &done));
	EXPECT_EQ(0U, done);
	EXPECT_EQ(2, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(0, unwatch(self->u.fd, 1));
}

/*
 * Past the checks, a watch the kernel cannot make (here: more
 * whole-address-space watches than a file may have) stops the rest;
 * done counts those made, in a batch too big for the stack buffer.
 */
TEST_F(native, watchv_stops_at_the_first_watch_that_fails)
{
	struct ummunotify_watch all = { .flags = UMMUNOTIFY_WATCH_ALL };
	struct ummunotify_watch w[3];
	__u64 gone[3] = { 1, 2, 3 };
	__u32 done;
	int n;

	for (n = 0; n < 3; n++)
		watch_range(_metadata, self->u.fd, self->buf + n * ps, ps,
			    n + 1, 0);
	for (n = 0; n < 16; n++) {
		all.user_cookie = 100 + n;
		ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &all));
	}
	w[0] = watch_arg(self->buf + 4 * ps, ps, 20, 0);
	w[1] = all;
	w[1].user_cookie = 21;
	w[2] = watch_arg(self->buf + 5 * ps, ps, 22, 0);
	EXPECT_EQ(-ENOSPC, watchv(self->u.fd, gone, 3, w, 3, &done));
	EXPECT_EQ(1U, done);
	/* The unwatches were done, the first watch made. */
	EXPECT_EQ(17, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(w[0].generation, gen_of(&self->u, w[0].slot));
	EXPECT_EQ(-EINVAL, unwatch(self->u.fd, 1));
	EXPECT_EQ(0, unwatch(self->u.fd, 20));
	EXPECT_EQ(-EINVAL, unwatch(self->u.fd, 22));
}

/*
 * WATCH_ALL waited for the invalidations already running, until issue 22;
 * a signal was to end the wait only while the call had changed nothing
 * (EINTR with a handler without SA_RESTART, nothing changed), and a
 * WATCHV whose unwatches were done was to go through.  Now it waits for
 * none, the notifier registered by the file's first watch: under a storm
 * of signals and invalidations no WATCHV is interrupted, with unwatches
 * or without.  A second whole-address-space watch keeps the file joined,
 * so that each call finds invalidations running.
 */
static void on_alarm(int sig)
{
	(void)sig;
}

#define INTERRUPT_SECONDS	10

TEST_F_TIMEOUT(native, watchv_of_watch_all_is_not_interrupted_by_signals,
	       LOOP_TIMEOUT)
{
	struct ummunotify_watch keep = { .user_cookie = 1ULL << 40,
					 .flags = UMMUNOTIFY_WATCH_ALL };
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval tick = { .it_interval.tv_usec = 200,
				  .it_value.tv_usec = 200 };
	struct itimerval off = { 0 };
	int interrupted = 0, swapped = 0, ret;
	struct ummunotify_watch w;
	__u64 cookie = 1, next;
	struct timespec start;
	struct busy busy;
	__u32 done;

	ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &keep));
	watch_range(_metadata, self->u.fd, self->buf, ps, cookie, 0);
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	busy_start(_metadata, &busy);
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &tick, NULL));
	/* Nothing to unwatch: an interrupted one would change nothing. */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!interrupted && seconds_since(&start) < INTERRUPT_SECONDS) {
		w = (struct ummunotify_watch){ .user_cookie = 2,
					       .flags = UMMUNOTIFY_WATCH_ALL };
		ret = watchv(self->u.fd, NULL, 0, &w, 1, &done);
		if (ret == -EINTR) {
			interrupted++;
			EXPECT_EQ(0U, done);
			EXPECT_EQ(2, fdinfo(self->u.fd, "regions"));
		} else {
			ASSERT_EQ(0, ret) TH_LOG("WATCHV: %s", strerror(-ret));
			ASSERT_EQ(0, unwatch(self->u.fd, 2));
		}
	}
	/* Unwatches first: the call goes through, whatever arrives. */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seconds_since(&start) < INTERRUPT_SECONDS) {
		next = cookie + 1;
		w = (struct ummunotify_watch){ .user_cookie = next,
					       .flags = UMMUNOTIFY_WATCH_ALL };
		ret = watchv(self->u.fd, &cookie, 1, &w, 1, &done);
		ASSERT_EQ(0, ret) TH_LOG("WATCHV after %d: %s", swapped,
					 strerror(-ret));
		EXPECT_EQ(1U, done);
		swapped++;
		cookie = next;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	busy_stop(_metadata, &busy);
	EXPECT_EQ(0, interrupted)
		TH_LOG("%d WATCHVs interrupted in %d s", interrupted,
		       INTERRUPT_SECONDS);
	EXPECT_EQ(2, fdinfo(self->u.fd, "regions"));
	TH_LOG("%d WATCHVs with an unwatch under the signals", swapped);
}

TEST_F(native, resize_keeps_the_slot_and_returns_the_generation_unchanged)
{
	struct ummunotify_watch w, r;
	__u64 generation;

	w = watch_range(_metadata, self->u.fd, self->buf, 2 * ps, 1, 0);
	clear_page(_metadata, self->buf);
	generation = gen_of(&self->u, w.slot);
	ASSERT_EQ(0, resize(self->u.fd, &r, self->buf + ps, 2 * ps, 1, 0));
	EXPECT_EQ(w.slot, r.slot);
	EXPECT_EQ(generation, r.generation);
	EXPECT_EQ(generation, gen_of(&self->u, w.slot));
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, resize_reports_the_new_range_and_not_the_old_only_part)
{
	struct ummunotify_watch w, r;
	char *p = self->buf;

	w = watch_range(_metadata, self->u.fd, p, 2 * ps, 1, 0);
	ASSERT_EQ(0, resize(self->u.fd, &r, p + ps, 2 * ps, 1, 0));
	clear_page(_metadata, p);
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
	clear_page(_metadata, p + 2 * ps);
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR, p + 2 * ps,
		     ps, 1, w.slot);
}

TEST_F(native, resize_with_zero_causes_keeps_the_watch_causes)
{
	struct ummunotify_watch w, r;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1,
			CAUSE(PROTECTION));
	ASSERT_EQ(0, resize(self->u.fd, &r, self->buf, 2 * ps, 1, 0));
	clear_page(_metadata, self->buf);
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	ASSERT_EQ(0, mprotect(self->buf + ps, ps, PROT_READ));
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
}

TEST_F(native, resize_with_causes_replaces_them)
{
	struct ummunotify_watch w, r;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1,
			CAUSE(PROTECTION));
	ASSERT_EQ(0, resize(self->u.fd, &r, self->buf, ps, 1,
			    UMMUNOTIFY_CAUSES_DEFAULT));
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
	clear_page(_metadata, self->buf);
	EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
}

TEST_F(native, resize_refuses_unknown_cookies_and_bad_arguments)
{
	struct ummunotify_watch r;

	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	EXPECT_EQ(-EINVAL, resize(self->u.fd, &r, self->buf, ps, 2, 0));
	EXPECT_EQ(-EINVAL, resize(self->u.fd, &r, self->buf, 0, 1, 0));
	EXPECT_EQ(-EINVAL, resize(self->u.fd, &r, self->buf, ps, 1, 1U << 8));
	r = watch_arg(self->buf, ps, 1, 0);
	r.flags = UMMUNOTIFY_WATCH_ALL;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_RESIZE, &r));
	r = watch_arg(self->buf, ps, 1, 0);
	r.reserved = 1;
	EXPECT_EQ(-EINVAL, uioctl(self->u.fd, UMMUNOTIFY_RESIZE, &r));
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, resize_faults_on_bad_pointers_and_changes_nothing)
{
	struct ummunotify_watch w, r = watch_arg(self->buf + ps, ps, 1, 0);

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_RESIZE, NULL));
	EXPECT_EQ(-EFAULT, uioctl(self->u.fd, UMMUNOTIFY_RESIZE,
				  read_only_copy(_metadata, &r, sizeof(r))));
	clear_page(_metadata, self->buf);
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR, self->buf,
		     ps, 1, w.slot);
}

/* An munmap()/mmap() loop on one page, counting invalidations missed. */
struct resize_race {
	struct umn *u;
	char *page;
	__u32 slot;
	bool stop;
	unsigned long unmaps;
	unsigned long missed;
	int error;
};

static void *resize_race_unmap(void *arg)
{
	struct resize_race *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		__u64 before = gen_of(r->u, r->slot);

		if (munmap(r->page, ps) || !map_fresh(r->page, ps)) {
			r->error = errno ?: EEXIST;
			break;
		}
		if (gen_of(r->u, r->slot) == before)
			r->missed++;
		__atomic_add_fetch(&r->unmaps, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* This long and this many unmaps at least, unless past the cap. */
#define RACE_SECONDS	1
#define RACE_UNMAPS	200
#define RACE_MAX_SECONDS 20

/*
 * Only the page in both ranges is unmapped: count the events for it,
 * logging the first other one.
 */
static void count_resize_race_events(struct __test_metadata *_metadata,
				     struct resize_race *r,
				     unsigned long *events,
				     unsigned long *strays)
{
	struct ummunotify_ring_event ev;

	while (ring_pop(r->u, &ev)) {
		if (ev.cause == UMMUNOTIFY_CAUSE_OVERFLOW)
			continue;
		if (ev.cause == UMMUNOTIFY_CAUSE_UNMAP &&
		    ev.start == (uintptr_t)r->page &&
		    ev.end == (uintptr_t)r->page + ps &&
		    ev.user_cookie == 1 && ev.slot == r->slot) {
			++*events;
		} else if (!(*strays)++) {
			TH_LOG("stray event: cause %u [%#llx, %#llx) cookie %llu slot %u",
			       ev.cause, ev.start, ev.end, ev.user_cookie,
			       ev.slot);
		}
	}
}

TEST_F_TIMEOUT(native, resize_never_misses_the_shared_part_while_another_thread_unmaps_it,
	       LOOP_TIMEOUT)
{
	char *p = self->buf;
	struct ummunotify_watch w, m;
	struct resize_race r = { .u = &self->u, .page = p + ps };
	unsigned long events = 0, strays = 0;
	struct timespec start;
	pthread_t thread;
	unsigned int i;

	w = watch_range(_metadata, self->u.fd, p, 2 * ps, 1, 0);
	r.slot = w.slot;
	clock_gettime(CLOCK_MONOTONIC, &start);
	ASSERT_EQ(0, pthread_create(&thread, NULL, resize_race_unmap, &r));
	for (i = 0; _metadata->passed; i++) {
		double elapsed = seconds_since(&start);

		if ((elapsed > RACE_SECONDS &&
		     __atomic_load_n(&r.unmaps, __ATOMIC_RELAXED) >=
		     RACE_UNMAPS) || elapsed > RACE_MAX_SECONDS)
			break;
		EXPECT_EQ(0, resize(self->u.fd, &m, p + (i % 2 ? 0 : ps),
				    2 * ps, 1, 0));
		EXPECT_EQ(w.slot, m.slot);
		count_resize_race_events(_metadata, &r, &events, &strays);
	}
	__atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(thread, NULL));
	count_resize_race_events(_metadata, &r, &events, &strays);
	TH_LOG("%u resizes, %lu unmaps, %lu events in %.1f s", i, r.unmaps,
	       events, seconds_since(&start));
	EXPECT_EQ(0, r.error) TH_LOG("munmap/mmap: %s", strerror(r.error));
	EXPECT_LT(0UL, r.unmaps);
	EXPECT_EQ(0UL, r.missed)
		TH_LOG("%lu of %lu unmaps missed", r.missed, r.unmaps);
	EXPECT_EQ(0UL, strays);
	/* Each unmap is in the ring or among the events it dropped. */
	EXPECT_LE(r.unmaps, events + ring_dropped(&self->u))
		TH_LOG("%lu unmaps, %lu events, %llu dropped", r.unmaps,
		       events, ring_dropped(&self->u));
}

/*
 * Race-free registration: a WATCH inserted while an invalidation of its
 * range is already running is reported changed by it before the WATCH
 * returns (it waited for it to finish before issue 22).  So a page still
 * present after WATCH returned is either untouched by it or the
 * generation changes.  The page watched is the last of a large
 * region that another thread clears (which, unlike munmap, keeps the
 * mapping for pagemap to read): its zap comes last.
 */
/* Fault in [P, +LEN) for writing: by MADV_POPULATE_WRITE from 5.14 on. */
static void populate(struct __test_metadata *_metadata, char *p, size_t len)
{
	size_t off;

	if (!madvise(p, len, MADV_POPULATE_WRITE))
		return;
	ASSERT_EQ(EINVAL, errno);
	for (off = 0; off < len; off += ps)
		p[off] = 1;
}

#define RUNNING_BYTES	(64UL << 20)
#define RUNNING_CYCLES	4
#define RUNNING_WATCHES	1024
/* The last pages, watched in turn: far fewer a page than max_overlap. */
#define RUNNING_PAGES	32

struct running_clear {
	char *region;
	bool started;
	bool done;
	int error;
};

static void *clear_region_now(void *arg)
{
	struct running_clear *r = arg;

	__atomic_store_n(&r->started, true, __ATOMIC_RELEASE);
	if (madvise(r->region, RUNNING_BYTES, MADV_DONTNEED))
		r->error = errno;
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

TEST_F(native, a_watch_made_while_its_range_is_invalidated_is_never_stale)
{
	static struct {
		struct ummunotify_watch w;
		bool present;
	} seen[RUNNING_WATCHES];
	unsigned int cycle, i, n, present = 0, attempts = 0, stale = 0;
	int pagemap = open_pagemap(_metadata);
	struct running_clear r = { .region = NULL };
	pthread_t thread;
	char *last;

	r.region = mmap(NULL, RUNNING_BYTES, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, r.region);
	ASSERT_EQ(0, madvise(r.region, RUNNING_BYTES, MADV_NOHUGEPAGE));
	last = r.region + RUNNING_BYTES - RUNNING_PAGES * ps;
	for (cycle = 0; cycle < RUNNING_CYCLES; cycle++) {
		populate(_metadata, r.region, RUNNING_BYTES);
		r.started = false;
		r.done = false;
		ASSERT_EQ(0, pthread_create(&thread, NULL, clear_region_now,
					    &r));
		while (!__atomic_load_n(&r.started, __ATOMIC_ACQUIRE))
			;
		n = 0;
		while (n < RUNNING_WATCHES &&
		       !__atomic_load_n(&r.done, __ATOMIC_ACQUIRE)) {
			char *page = last + n % RUNNING_PAGES * ps;

			seen[n].w = watch_range(_metadata, self->u.fd, page,
						ps, n, 0);
			seen[n].present = page_present(pagemap, page);
			n++;
		}
		ASSERT_EQ(0, pthread_join(thread, NULL));
		ASSERT_EQ(0, r.error);
		for (i = 0; i < n; i++) {
			present += seen[i].present;
			stale += seen[i].present && seen[i].w.generation ==
				 gen_of(&self->u, seen[i].w.slot);
			ASSERT_EQ(0, unwatch(self->u.fd, i));
		}
		attempts += n;
	}
	TH_LOG("%u watches during %u clears, %u saw the page present",
	       attempts, RUNNING_CYCLES, present);
	EXPECT_EQ(0U, stale)
		TH_LOG("%u watches saw the page, kept their generation", stale);
}

TEST_F(native, fdinfo_shows_the_features_sizes_and_watches)
{
	EXPECT_EQ(WATCH_RING, fdinfo(self->u.fd, "features"));
	EXPECT_EQ(self->u.p.slots, fdinfo(self->u.fd, "slots"));
	EXPECT_EQ(self->u.p.ring_entries, fdinfo(self->u.fd, "ring_entries"));
	EXPECT_EQ(0, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(0, fdinfo(self->u.fd, "released"));
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));
}

TEST_F(native, fdinfo_counts_published_and_filtered_invalidations)
{
	long long events = fdinfo(self->u.fd, "events");
	long long filtered = fdinfo(self->u.fd, "filtered");

	ASSERT_EQ(0, events);
	ASSERT_EQ(0, filtered);
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(1, fdinfo(self->u.fd, "events"));
	EXPECT_EQ(0, fdinfo(self->u.fd, "filtered"));
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	EXPECT_EQ(1, fdinfo(self->u.fd, "events"));
	EXPECT_EQ(1, fdinfo(self->u.fd, "filtered"));
	EXPECT_EQ(0, fdinfo(self->u.fd, "dropped"));
}

TEST_F(native, a_forked_child_gets_eperm_from_every_native_call)
{
	struct ummunotify_watch w;
	pid_t pid;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct pollfd pfd = { .fd = self->u.fd, .events = POLLIN };
		struct ummunotify_watch c = watch_arg(self->buf, ps, 2, 0);
		struct ummunotify_ring_event ev;
		struct ummunotify_params p;

		EXPECT_EQ(-EPERM, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &c));
		EXPECT_EQ(-EPERM, resize(self->u.fd, &c, self->buf, 2 * ps, 1,
					 0));
		EXPECT_EQ(-EPERM, unwatch(self->u.fd, 1));
		EXPECT_EQ(-EPERM, setup(self->u.fd, &p, 0, 0));
		EXPECT_EQ(-EPERM, exchange(self->u.fd, WATCH_RING));
		EXPECT_EQ(-EPERM, try_read(self->u.fd, &ev, sizeof(ev)));
		EXPECT_EQ(-EPERM, try_mmap(self->u.fd, self->u.p.mmap_size,
					   PROT_READ, MAP_SHARED, 0));
		EXPECT_EQ(-EPERM, try_mmap(self->u.fd, ps,
					   PROT_READ | PROT_WRITE, MAP_SHARED,
					   self->u.p.head_offset));
		EXPECT_EQ(1, poll(&pfd, 1, 0));
		EXPECT_EQ(POLLERR, pfd.revents);
		/* Not the child's file: umnstat --check tells them apart. */
		EXPECT_EQ(getppid(), fdinfo(self->u.fd, "opener"));
		_exit(_metadata->passed ? 0 : 1);
	}
	ASSERT_EQ(0, wait_child(pid));
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(w.generation, gen_of(&self->u, w.slot));
}

/*
 * A file whose owner, a child, passes it over a socket.  Only the owner
 * may read the ring, so the RELEASE its exit posts shows in fdinfo.
 */
FIXTURE(passed_file)
{
	int sv[2];
};

FIXTURE_SETUP(passed_file)
{
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				self->sv));
}

FIXTURE_TEARDOWN(passed_file)
{
	close(self->sv[0]);
	close(self->sv[1]);
}

TEST_F(passed_file, is_marked_released_when_its_owner_exits)
{
	long long files = sysfs("files");
	int *sv = self->sv, fd;
	char byte;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		char *buf = map_guarded(_metadata, 1);
		struct umn u;

		umn_init(_metadata, &u, WATCH_RING, 0, 0);
		watch_range(_metadata, u.fd, buf, ps, 1, 0);
		ASSERT_EQ(0, send_fd(sv[1], u.fd));
		ASSERT_EQ(1, read(sv[1], &byte, 1));
		_exit(0);
	}
	fd = recv_fd(sv[0]);
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, fdinfo(fd, "released"));
	EXPECT_EQ(1, fdinfo(fd, "regions"));
	EXPECT_EQ(0, fdinfo(fd, "events"));
	ASSERT_EQ(1, write(sv[0], "x", 1));
	ASSERT_EQ(0, wait_child(pid));
	EXPECT_EQ(1, fdinfo(fd, "released"));
	EXPECT_EQ(1, fdinfo(fd, "events"));
	EXPECT_EQ(files + 1, sysfs("files"));
	EXPECT_EQ(0, close(fd));
	EXPECT_EQ(files, sysfs("files"));
}

/*
 * A 4-entry ring and one watch over the whole buffer: the ring fills
 * after four clear_page()s.
 */
#define TINY_RING	4U

FIXTURE(tiny_ring)
{
	struct umn u;
	char *buf;
	struct ummunotify_watch w;
};

FIXTURE_SETUP(tiny_ring)
{
	umn_init(_metadata, &self->u, WATCH_RING, 0, TINY_RING);
	self->buf = map_guarded(_metadata, BUF_PAGES);
	self->w = watch_range(_metadata, self->u.fd, self->buf,
			      BUF_PAGES * ps, 1, 0);
}

FIXTURE_TEARDOWN(tiny_ring)
{
	close(self->u.fd);
}

static void expect_clear(struct __test_metadata *_metadata,
			 FIXTURE_DATA(tiny_ring) *self, unsigned int page)
{
	expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
		     self->buf + page * ps, ps, 1, self->w.slot);
}

TEST_F(tiny_ring, a_full_ring_keeps_the_oldest_events_and_counts_the_dropped)
{
	unsigned int i;

	clear_pages(_metadata, self->buf, 0, TINY_RING + 2);
	EXPECT_EQ(TINY_RING, ring_tail(&self->u));
	EXPECT_EQ(2ULL, ring_dropped(&self->u));
	EXPECT_EQ(2, fdinfo(self->u.fd, "dropped"));
	EXPECT_EQ(TINY_RING + 2, fdinfo(self->u.fd, "events"));
	for (i = 0; i < TINY_RING; i++)
		expect_clear(_metadata, self, i);
}

TEST_F(tiny_ring, generation_words_are_never_lost_when_the_ring_is_full)
{
	__u64 before;

	clear_pages(_metadata, self->buf, 0, TINY_RING);
	before = gen_of(&self->u, self->w.slot);
	clear_page(_metadata, self->buf + TINY_RING * ps);
	EXPECT_EQ(1ULL, ring_dropped(&self->u));
	EXPECT_NE(before, gen_of(&self->u, self->w.slot));
}

TEST_F(tiny_ring, the_first_event_after_an_overflow_follows_an_overflow_event)
{
	clear_pages(_metadata, self->buf, 0, TINY_RING + 2);
	set_head(&self->u, ring_tail(&self->u));
	clear_page(_metadata, self->buf + 7 * ps);
	expect_overflow(_metadata, &self->u, 2);
	EXPECT_EQ(gen_of(&self->u, self->w.slot),
		  expect_event(_metadata, &self->u, UMMUNOTIFY_CAUSE_CLEAR,
			       self->buf + 7 * ps, ps, 1, self->w.slot));
	EXPECT_TRUE(ring_empty(&self->u));
	EXPECT_EQ(2ULL, ring_dropped(&self->u));
}

TEST_F(tiny_ring, the_ring_recovers_by_itself_after_an_overflow)
{
	unsigned int i;

	clear_pages(_metadata, self->buf, 0, TINY_RING + 2);
	set_head(&self->u, ring_tail(&self->u));
	clear_page(_metadata, self->buf + 7 * ps);
	set_head(&self->u, ring_tail(&self->u));
	clear_pages(_metadata, self->buf, 0, TINY_RING);
	for (i = 0; i < TINY_RING; i++)
		expect_clear(_metadata, self, i);
	EXPECT_TRUE(ring_empty(&self->u));
	clear_pages(_metadata, self->buf, 0, TINY_RING + 1);
	set_head(&self->u, ring_tail(&self->u));
	clear_page(_metadata, self->buf);
	expect_overflow(_metadata, &self->u, 1);
	expect_clear(_metadata, self, 0);
	EXPECT_EQ(3ULL, ring_dropped(&self->u));
	EXPECT_EQ(3, fdinfo(self->u.fd, "dropped"));
}

TEST_F(tiny_ring, a_head_outside_the_ring_makes_it_look_full)
{
	__u64 tail;

	clear_pages(_metadata, self->buf, 0, 2);
	tail = ring_tail(&self->u);
	set_head(&self->u, tail + 10);
	clear_page(_metadata, self->buf + 2 * ps);
	EXPECT_EQ(tail, ring_tail(&self->u));
	EXPECT_EQ(1ULL, ring_dropped(&self->u));
}

/* read() after a head set past the tail: the ring's live entries only. */
static void expect_read_restarts_at(struct __test_metadata *_metadata,
				    FIXTURE_DATA(tiny_ring) *self,
				    unsigned int first, unsigned int n)
{
	struct ummunotify_ring_event ev[2 * TINY_RING];
	__u64 tail = ring_tail(&self->u);
	ssize_t len;
	unsigned int i;

	set_head(&self->u, tail + 10);
	len = try_read(self->u.fd, ev, sizeof(ev));
	ASSERT_EQ(n * EVENT_SIZE, len) {
		for (i = 0; i < len / EVENT_SIZE; i++)
			TH_LOG("read: cause %u cookie %llu [%#llx, %#llx) slot %u generation %llu",
			       ev[i].cause, ev[i].user_cookie, ev[i].start,
			       ev[i].end, ev[i].slot, ev[i].generation);
	}
	EXPECT_EQ(tail, *self->u.head);
	for (i = 0; i < n; i++)
		check_event(_metadata, &ev[i], UMMUNOTIFY_CAUSE_CLEAR,
			    self->buf + (first + i) * ps, ps, 1,
			    self->w.slot);
}

TEST_F(tiny_ring, read_restarts_a_head_outside_a_wrapped_ring_at_its_oldest_entry)
{
	clear_pages(_metadata, self->buf, 0, 2);
	set_head(&self->u, 2);
	clear_pages(_metadata, self->buf, 2, TINY_RING);
	expect_read_restarts_at(_metadata, self, 2, TINY_RING);
}

TEST_F(tiny_ring, read_restarts_a_head_outside_a_ring_not_yet_full_at_its_oldest_entry)
{
	clear_pages(_metadata, self->buf, 0, 2);
	expect_read_restarts_at(_metadata, self, 0, 2);
}

TEST_F(tiny_ring, module_counters_in_sysfs_follow_files_watches_and_events)
{
	long long files = sysfs("files"), regions = sysfs("regions");
	long long events = sysfs("events"), dropped = sysfs("dropped");
	long long filtered = sysfs("filtered");
	int fd;

	/* The fixture's file and watch are the only ones. */
	ASSERT_EQ(1, files);
	ASSERT_EQ(1, regions);
	ASSERT_LE(0, events);
	ASSERT_LE(0, dropped);
	ASSERT_LE(0, filtered);
	fd = open_dev(_metadata, O_RDWR);
	EXPECT_EQ(files + 1, sysfs("files"));
	EXPECT_EQ(0, close(fd));
	EXPECT_EQ(files, sysfs("files"));
	watch_range(_metadata, self->u.fd, self->buf, ps, 2, 0);
	EXPECT_EQ(regions + 1, sysfs("regions"));
	ASSERT_EQ(0, unwatch(self->u.fd, 2));
	EXPECT_EQ(regions, sysfs("regions"));
	clear_pages(_metadata, self->buf, 0, TINY_RING + 1);
	EXPECT_EQ(events + TINY_RING + 1, sysfs("events"));
	EXPECT_EQ(dropped + 1, sysfs("dropped"));
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	EXPECT_EQ(filtered + 1, sysfs("filtered"));
}

/* Tests that lower the max_regions module parameter, and restore it. */
FIXTURE(max_regions)
{
	long long saved;
};

FIXTURE_SETUP(max_regions)
{
	self->saved = read_number(MAX_REGIONS);
	ASSERT_LT(0, self->saved);
}

FIXTURE_TEARDOWN(max_regions)
{
	if (read_number(MAX_REGIONS) != self->saved)
		EXPECT_EQ(0, write_max_regions(self->saved));
}

/*
 * Lower max_regions to VALUE; false if we may not.  Root always may: its
 * refusal is the module's fault, a failure.
 */
static bool lower_max_regions(struct __test_metadata *_metadata,
			      long long value)
{
	int ret = write_max_regions(value);

	if ((ret == -EACCES || ret == -EPERM) && geteuid())
		return false;
	ASSERT_EQ(0, ret);
	ASSERT_EQ(value, read_number(MAX_REGIONS));
	return true;
}

TEST_F(max_regions, setup_refuses_more_slots_than_max_regions)
{
	int fd = open_dev(_metadata, O_RDWR);
	struct ummunotify_params p;

	if (!lower_max_regions(_metadata, 1024))
		SKIP(return, "not root: cannot write %s", MAX_REGIONS);
	ASSERT_EQ(WATCH_RING, exchange(fd, WATCH_RING));
	EXPECT_EQ(-EINVAL, setup(fd, &p, 1025, 0));
	EXPECT_EQ(-EINVAL, setup(fd, &p, 0, 0));
	/* Not the rest of the page of words (64K pages): max_regions cuts it. */
	EXPECT_EQ(0, setup(fd, &p, 1024, 0));
	EXPECT_EQ(1024U, p.slots);
}

TEST_F(max_regions, watch_fails_with_enospc_at_max_regions)
{
	char *buf = map_guarded(_metadata, 1);
	struct ummunotify_watch w = watch_arg(buf, ps, 3, 0);
	struct umn u;

	umn_init(_metadata, &u, WATCH_RING, 0, 0);
	if (!lower_max_regions(_metadata, 2))
		SKIP(return, "not root: cannot write %s", MAX_REGIONS);
	watch_range(_metadata, u.fd, buf, ps, 1, 0);
	watch_range(_metadata, u.fd, buf, ps, 2, 0);
	EXPECT_EQ(-ENOSPC, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(-ENOSPC, register_region(u.fd, buf, ps, 4));
	EXPECT_EQ(2, fdinfo(u.fd, "regions"));
	ASSERT_EQ(0, unwatch(u.fd, 1));
	EXPECT_EQ(0, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
}

/*
 * max_overlap: no address is under more than that many range watches of
 * one address space, so that reclaim, migration and the OOM reaper never
 * run a callback per watch of a stack a user built over their pages.
 */
#define MAX_OVERLAP	"/sys/module/ummunotify/parameters/max_overlap"
#define STACK		8

FIXTURE(max_overlap)
{
	long long saved;
	struct umn u;
	char *buf;
};

FIXTURE_SETUP(max_overlap)
{
	char text[32];

	self->saved = read_number(MAX_OVERLAP);
	ASSERT_LT(0, self->saved) TH_LOG("%s is missing", MAX_OVERLAP);
	umn_init(_metadata, &self->u, WATCH_RING, 0, 0);
	self->buf = map_guarded(_metadata, 2);
	snprintf(text, sizeof(text), "%d\n", STACK);
	/* Only a user who may not write it skips: root must succeed. */
	if (write_file(MAX_OVERLAP, text) && geteuid())
		SKIP(return, "not root: cannot write %s", MAX_OVERLAP);
	ASSERT_EQ(STACK, read_number(MAX_OVERLAP));
}

FIXTURE_TEARDOWN(max_overlap)
{
	char text[32];

	snprintf(text, sizeof(text), "%lld\n", self->saved);
	if (read_number(MAX_OVERLAP) != self->saved)
		EXPECT_EQ(0, write_file(MAX_OVERLAP, text));
	close(self->u.fd);
}

/* STACK watches of the first page, cookies 1 to STACK. */
static void stack_watches(struct __test_metadata *_metadata, int fd, char *buf)
{
	__u64 cookie;

	for (cookie = 1; cookie <= STACK; cookie++)
		watch_range(_metadata, fd, buf, ps, cookie, 0);
}

TEST_F(max_overlap, a_watch_over_a_full_stack_is_refused_and_changes_nothing)
{
	struct ummunotify_watch w = watch_arg(self->buf, 2 * ps, 100, 0);
	__u64 tail;

	stack_watches(_metadata, self->u.fd, self->buf);
	tail = ring_tail(&self->u);
	EXPECT_EQ(-ENOSPC, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	w = watch_arg(self->buf + ps - 8, 16, 101, 0);
	EXPECT_EQ(-ENOSPC, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	EXPECT_EQ(-ENOSPC, register_region(self->u.fd, self->buf, ps, 102));
	EXPECT_EQ(STACK, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(tail, ring_tail(&self->u));
	/* Beside the stack, and once one of it goes, there is room. */
	watch_range(_metadata, self->u.fd, self->buf + ps, ps, 103, 0);
	ASSERT_EQ(0, unwatch(self->u.fd, 1));
	watch_range(_metadata, self->u.fd, self->buf, ps, 104, 0);
	/* The page's invalidation calls the STACK watches over it. */
	clear_page(_metadata, self->buf);
	EXPECT_EQ(tail + STACK, ring_tail(&self->u));
}

/* Pages are invalidated whole: watches of distinct bytes of one stack up. */
TEST_F(max_overlap, watches_of_distinct_bytes_of_one_page_stack_up)
{
	struct ummunotify_watch w = watch_arg(self->buf + STACK * 8, 8, 100, 0);
	__u64 cookie;

	for (cookie = 0; cookie < STACK; cookie++)
		watch_range(_metadata, self->u.fd, self->buf + cookie * 8, 8,
			    cookie, 0);
	EXPECT_EQ(-ENOSPC, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
	watch_range(_metadata, self->u.fd, self->buf + ps, 8, 101, 0);
}

/* What counts is the watches over each page, not over the whole range. */
TEST_F(max_overlap, a_watch_over_many_pages_watched_once_each_is_made)
{
	char *buf = map_guarded(_metadata, 4 * STACK);
	__u64 cookie;

	for (cookie = 0; cookie < 4 * STACK; cookie++)
		watch_range(_metadata, self->u.fd, buf + cookie * ps, ps,
			    cookie, 0);
	watch_range(_metadata, self->u.fd, buf, 4 * STACK * ps, 100, 0);
	watch_range(_metadata, self->u.fd, self->buf, 2 * ps, 101, 0);
}

TEST_F(max_overlap, the_stack_counts_every_file_of_the_address_space)
{
	struct ummunotify_watch w = watch_arg(self->buf, ps, 1, 0);
	struct umn other;
	pid_t pid;

	umn_init(_metadata, &other, WATCH_RING, 0, 0);
	stack_watches(_metadata, self->u.fd, self->buf);
	EXPECT_EQ(-ENOSPC, uioctl(other.fd, UMMUNOTIFY_WATCH, &w));
	/* Another address space, the same addresses: a stack of its own. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct umn child;

		umn_init(_metadata, &child, WATCH_RING, 0, 0);
		stack_watches(_metadata, child.fd, self->buf);
		_exit(_metadata->passed ? 0 : 1);
	}
	ASSERT_EQ(0, wait_child(pid));
	close(other.fd);
}

TEST_F(max_overlap, resize_onto_a_full_stack_is_refused_and_keeps_the_watch)
{
	struct ummunotify_watch w;
	struct ummunotify_ring_event ev;

	stack_watches(_metadata, self->u.fd, self->buf);
	watch_range(_metadata, self->u.fd, self->buf + ps, ps, 100, 0);
	EXPECT_EQ(-ENOSPC, resize(self->u.fd, &w, self->buf, 2 * ps, 100, 0));
	/* A watch of the stack may move within it: it does not count. */
	EXPECT_EQ(0, resize(self->u.fd, &w, self->buf, ps / 2, 1, 0));
	clear_page(_metadata, self->buf + ps);
	ASSERT_TRUE(ring_pop(&self->u, &ev));
	EXPECT_EQ(100ULL, ev.user_cookie);
	EXPECT_TRUE(ring_empty(&self->u));
}

/*
 * Open MPI 1.5-2.0 does not look at REGISTER's result: a 2010 client gets
 * the registration, reported changed at once, so that it drops it rather
 * than keep one nothing watches.  A set-up file gets ENOSPC.
 */
TEST_F(max_overlap, a_2010_registration_over_a_full_page_is_reported_at_once)
{
	int fd = open_dev(_metadata, O_RDWR | O_NONBLOCK);
	struct ummunotify_event ev[2];
	__u64 cookie;

	for (cookie = 1; cookie <= STACK; cookie++)
		ASSERT_EQ(0, register_region(fd, self->buf, ps, cookie));
	EXPECT_EQ(-EAGAIN, try_read(fd, ev, sizeof(ev)));
	ASSERT_EQ(0, register_region(fd, self->buf + ps - 8, 16, 100));
	ASSERT_EQ((ssize_t)sizeof(ev), try_read(fd, ev, sizeof(ev)));
	EXPECT_EQ(UMMUNOTIFY_EVENT_TYPE_INVAL, (int)ev[0].type);
	EXPECT_EQ(100ULL, ev[0].user_cookie_counter);
	EXPECT_EQ(UMMUNOTIFY_EVENT_TYPE_LAST, (int)ev[1].type);
	EXPECT_EQ(STACK + 1, fdinfo(fd, "regions"));
	EXPECT_EQ(0, unwatch(fd, 100));
	EXPECT_EQ(-ENOSPC, register_region(self->u.fd, self->buf, ps, 101));
	close(fd);
}

TEST_F(max_overlap, watchv_unwatches_first_and_makes_room)
{
	struct ummunotify_watch w[2] = {
		watch_arg(self->buf, ps, 100, 0),
		watch_arg(self->buf, ps, 101, 0),
	};
	__u64 cookies[] = { 1 };
	__u32 done;

	stack_watches(_metadata, self->u.fd, self->buf);
	EXPECT_EQ(-ENOSPC, watchv(self->u.fd, cookies, 1, w, 2, &done));
	EXPECT_EQ(1U, done);
	EXPECT_EQ(STACK, fdinfo(self->u.fd, "regions"));
	EXPECT_EQ(-EINVAL, unwatch(self->u.fd, 1));
}

/*
 * Against the module's own bound, whatever it is: a stack over one page
 * ends at max_overlap, long before the slots do.
 */
TEST_F(native, a_stack_of_watches_over_one_page_ends_at_max_overlap)
{
	long long bound = read_number(MAX_OVERLAP), n;
	char *buf = map_guarded(_metadata, 1);
	struct umn u;
	int ret = 0;

	umn_init(_metadata, &u, WATCH_RING, 65536, 0);
	for (n = 0; n < 65536 && !ret; n++) {
		struct ummunotify_watch w = watch_arg(buf, ps, n, 0);

		ret = uioctl(u.fd, UMMUNOTIFY_WATCH, &w);
	}
	EXPECT_EQ(-ENOSPC, ret);
	EXPECT_EQ(bound, n - 1) TH_LOG("%lld watches of one page", n - 1);
	EXPECT_GE(4096, n - 1);
	close(u.fd);
}

/*
 * The stress.  Cells of CELL_PAGES pages are watched and unwatched by
 * watcher threads and unmapped, replaced or cleared by mapper threads
 * while a consumer drains the ring.  A mapper holds a cell's lock across
 * one change; a watcher adds its watch to the cell's list, under that
 * lock, only after WATCH returned.  So each watch on the list when a
 * change starts was inserted before it, and the contract decides:
 *
 * - when the change returns, each such watch's word differs from what
 *   it was before and from the watch's generation (no missed
 *   invalidation), and the ring, unless it overflowed, holds an event
 *   for the watch over the whole cell with the change's cause;
 * - a word never equals a generation after an invalidation of its range
 *   returned, nor after its watch went (no stale generation, ever);
 * - while a word still equals the watch's generation, the page frame a
 *   cache would have pinned after WATCH is still the one mapped;
 * - generations, from WATCH and in events, are never 0 and never repeat;
 * - the OVERFLOW events account for every event dropped.
 */
#define STRESS_CELLS		16
#define CELL_PAGES		2
#define STRESS_MAPPERS		2
#define STRESS_WATCHERS		2
#define WATCHES_EACH		16
#define DEAD_PAIRS		64
#define STRESS_SECONDS		3
#define STRESS_MAX_SECONDS	3600
#define SENTINEL		1	/* a cookie no cell watch uses */

struct vec {
	void *v;
	size_t n, cap;
};

static void vec_push(struct vec *v, const void *elem, size_t size)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 1024;
		v->v = realloc(v->v, v->cap * size);
		if (!v->v)
			abort();
	}
	memcpy((char *)v->v + v->n++ * size, elem, size);
}

/* A watch as a registration cache keeps it. */
struct live {
	struct live *next;	/* on its cell's list, under the cell's lock */
	__u64 cookie;
	__u64 generation;
	__u64 pfn;		/* first page's frame after WATCH; 0: none */
	__u32 slot;
	unsigned int cell;
	bool invalidated;	/* an invalidation of the cell has returned */
};

struct cell {
	pthread_mutex_t lock;
	char *addr;
	bool retired;		/* its place was taken while it was unmapped */
	struct live *watches;
};

/* What an event must be, and, sorted, how events are matched. */
struct expectation {
	__u64 cookie;
	__u64 start;
	__u64 end;
	__u64 cause;
};

struct stress {
	struct umn *u;
	int pagemap;
	struct cell cells[STRESS_CELLS];
	bool stop;
	__u64 serial;
	pthread_mutex_t lock;		/* for what follows */
	struct vec expected;		/* struct expectation */
	struct vec generations;		/* __u64, returned by WATCH */
	unsigned long changes;
	unsigned long failures;
	char failure[256];
};

struct stress_thread {
	pthread_t thread;
	struct stress *s;
	unsigned int seed;
	char *scratch;		/* mappers: where mremap moves a cell to */
	struct vec events;	/* the consumer: what it read */
};

static bool stress_stopped(struct stress *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
}

static void __attribute__((format(printf, 2, 3)))
stress_fail(struct stress *s, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&s->lock);
	if (!s->failures++) {
		va_start(ap, fmt);
		vsnprintf(s->failure, sizeof(s->failure), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&s->lock);
	__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
}

enum { OP_MUNMAP, OP_MAP_FIXED, OP_MREMAP, OP_DONTNEED, NR_OPS };

static const char *const op_names[NR_OPS] = {
	"munmap", "mmap(MAP_FIXED)", "mremap", "madvise(DONTNEED)",
};

/* Change cell C with OP: the cause it must report, or -1 if it failed. */
static int stress_change(struct stress_thread *t, struct cell *c, int op)
{
	size_t len = CELL_PAGES * ps;

	switch (op) {
	case OP_MUNMAP:
		if (munmap(c->addr, len))
			break;
		c->retired = !map_fresh(c->addr, len);
		return UMMUNOTIFY_CAUSE_UNMAP;
	case OP_MAP_FIXED:
		if (mmap(c->addr, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != c->addr)
			break;
		return UMMUNOTIFY_CAUSE_UNMAP;
	case OP_MREMAP:
		/* The pages move out; the cell stays mapped, empty. */
		if (mremap(c->addr, len, len, MREMAP_MAYMOVE | MREMAP_FIXED |
			   MREMAP_DONTUNMAP, t->scratch) != t->scratch ||
		    mmap(t->scratch, len, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != t->scratch)
			break;
		return UMMUNOTIFY_CAUSE_UNMAP;
	default:
		if (madvise(c->addr, len, MADV_DONTNEED))
			break;
		return UMMUNOTIFY_CAUSE_CLEAR;
	}
	stress_fail(t->s, "%s of cell %p: %s", op_names[op], c->addr,
		    strerror(errno));
	return -1;
}

static void stress_change_once(struct stress_thread *t)
{
	__u64 before[STRESS_WATCHERS * WATCHES_EACH];
	struct stress *s = t->s;
	struct cell *c = &s->cells[rand_r(&t->seed) % STRESS_CELLS];
	int op = rand_r(&t->seed) % NR_OPS;
	unsigned int n, i;
	struct live *l;
	int cause;

	pthread_mutex_lock(&c->lock);
	if (c->retired)
		goto out;
	for (l = c->watches, n = 0; l; l = l->next)
		before[n++] = gen_of(s->u, l->slot);
	cause = stress_change(t, c, op);
	if (cause < 0)
		goto out;
	for (l = c->watches, n = 0; l; l = l->next, n++) {
		struct expectation e = {
			.cookie = l->cookie,
			.start = (uintptr_t)c->addr,
			.end = (uintptr_t)c->addr + CELL_PAGES * ps,
			.cause = cause,
		};
		__u64 now = gen_of(s->u, l->slot);

		if (now == before[n] || now == l->generation)
			stress_fail(s, "missed invalidation: %s of %p returned, watch %llu (slot %u) still reads %llu",
				    op_names[op], c->addr, l->cookie, l->slot,
				    now);
		__atomic_store_n(&l->invalidated, true, __ATOMIC_RELEASE);
		pthread_mutex_lock(&s->lock);
		vec_push(&s->expected, &e, sizeof(e));
		pthread_mutex_unlock(&s->lock);
	}
	/* New pages, as the application would touch them. */
	for (i = 0; i < CELL_PAGES && !c->retired; i++)
		c->addr[i * ps] = 1;
	pthread_mutex_lock(&s->lock);
	s->changes++;
	pthread_mutex_unlock(&s->lock);
out:
	pthread_mutex_unlock(&c->lock);
}

static void *stress_mapper(void *arg)
{
	struct stress_thread *t = arg;

	while (!stress_stopped(t->s))
		stress_change_once(t);
	return NULL;
}

/* What a registration cache may conclude from one load must be true. */
static void stress_check(struct stress *s, const struct live *l)
{
	bool invalidated = __atomic_load_n(&l->invalidated, __ATOMIC_ACQUIRE);
	__u64 pfn = pfn_at(s->pagemap, s->cells[l->cell].addr);

	/* The frame is read before the word: the notifier runs first. */
	if (gen_of(s->u, l->slot) != l->generation)
		return;
	if (invalidated)
		stress_fail(s, "stale generation: watch %llu (slot %u) reads %llu after an invalidation of its range returned",
			    l->cookie, l->slot, l->generation);
	else if (l->pfn && pfn && pfn != l->pfn)
		stress_fail(s, "stale generation: watch %llu (slot %u) reads %llu but its page moved from frame %#llx to %#llx",
			    l->cookie, l->slot, l->generation, l->pfn, pfn);
}

struct watcher {
	struct live *live[WATCHES_EACH];
	unsigned int n;
	struct {
		__u32 slot;
		__u64 generation;
	} dead[DEAD_PAIRS];
	unsigned int dead_n;
};

static void stress_watch(struct stress_thread *t, struct watcher *w)
{
	unsigned int i = rand_r(&t->seed) % STRESS_CELLS;
	struct stress *s = t->s;
	struct cell *c = &s->cells[i];
	struct ummunotify_watch uw;
	struct live *l;

	l = calloc(1, sizeof(*l));
	if (!l)
		abort();
	l->cell = i;
	l->cookie = __atomic_add_fetch(&s->serial, 1, __ATOMIC_RELAXED) *
		    STRESS_CELLS + i;
	uw = watch_arg(c->addr, CELL_PAGES * ps, l->cookie, 0);
	if (uioctl(s->u->fd, UMMUNOTIFY_WATCH, &uw)) {
		stress_fail(s, "WATCH: %s", strerror(errno));
		free(l);
		return;
	}
	if (!uw.generation)
		stress_fail(s, "WATCH returned generation 0");
	l->slot = uw.slot;
	l->generation = uw.generation;
	/* What an RDMA registration would pin now. */
	l->pfn = pfn_at(s->pagemap, c->addr);
	pthread_mutex_lock(&s->lock);
	vec_push(&s->generations, &uw.generation, sizeof(uw.generation));
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&c->lock);
	l->next = c->watches;
	c->watches = l;
	pthread_mutex_unlock(&c->lock);
	w->live[w->n++] = l;
}

static void stress_unwatch(struct stress *s, struct watcher *w,
			   unsigned int k)
{
	struct live *l = w->live[k], **pp;
	struct cell *c = &s->cells[l->cell];

	pthread_mutex_lock(&c->lock);
	for (pp = &c->watches; *pp != l; pp = &(*pp)->next)
		;
	*pp = l->next;
	stress_check(s, l);
	pthread_mutex_unlock(&c->lock);
	if (unwatch(s->u->fd, l->cookie))
		stress_fail(s, "UNREGISTER %llu: %s", l->cookie,
			    strerror(errno));
	else if (gen_of(s->u, l->slot) == l->generation)
		stress_fail(s, "slot %u still reads %llu after its watch went",
			    l->slot, l->generation);
	w->dead[w->dead_n % DEAD_PAIRS].slot = l->slot;
	w->dead[w->dead_n % DEAD_PAIRS].generation = l->generation;
	w->dead_n++;
	w->live[k] = w->live[--w->n];
	free(l);
}

static void stress_check_all(struct stress *s, struct watcher *w)
{
	unsigned int i;

	for (i = 0; i < w->n; i++)
		stress_check(s, w->live[i]);
	for (i = 0; i < w->dead_n && i < DEAD_PAIRS; i++)
		if (gen_of(s->u, w->dead[i].slot) == w->dead[i].generation)
			stress_fail(s, "slot %u reads %llu again after its watch went",
				    w->dead[i].slot, w->dead[i].generation);
}

static void *stress_watcher(void *arg)
{
	struct stress_thread *t = arg;
	struct watcher w = { .n = 0 };

	while (!stress_stopped(t->s)) {
		unsigned int r = rand_r(&t->seed) % 8;

		if (!w.n || (w.n < WATCHES_EACH && r < 4))
			stress_watch(t, &w);
		else if (r < 7)
			stress_unwatch(t->s, &w, rand_r(&t->seed) % w.n);
		else
			stress_check_all(t->s, &w);
	}
	while (w.n)
		stress_unwatch(t->s, &w, 0);
	return NULL;
}

static void ring_drain(struct umn *u, struct vec *events)
{
	struct ummunotify_ring_event ev;

	while (ring_pop(u, &ev))
		vec_push(events, &ev, sizeof(ev));
}

static void *stress_consumer(void *arg)
{
	struct stress_thread *t = arg;
	struct pollfd pfd = { .fd = t->s->u->fd, .events = POLLIN };

	while (!stress_stopped(t->s)) {
		poll(&pfd, 1, 10);
		ring_drain(t->s->u, &t->events);
	}
	return NULL;
}

static unsigned int stress_seconds(void)
{
	const char *env = getenv("UMMUNOTIFY_STRESS_SECONDS");
	unsigned long seconds = env ? strtoul(env, NULL, 10) : 0;

	if (!seconds)
		return STRESS_SECONDS;
	return seconds < STRESS_MAX_SECONDS ? seconds : STRESS_MAX_SECONDS;
}

static int compare_expectations(const void *a, const void *b)
{
	const struct expectation *x = a, *y = b;

	if (x->cookie != y->cookie)
		return x->cookie < y->cookie ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->cause < y->cause ? -1 : x->cause > y->cause;
}

/* How many of EXPECTED (sorted) have no event of their own in GOT. */
static size_t count_missing(const struct vec *expected, const struct vec *got)
{
	const struct expectation *e = expected->v, *g = got->v;
	size_t i = 0, j = 0, missing = 0;

	while (i < expected->n) {
		int cmp = j < got->n ? compare_expectations(&g[j], &e[i]) : 1;

		if (cmp < 0) {
			j++;
		} else {
			missing += cmp > 0;
			j += !cmp;
			i++;
		}
	}
	return missing;
}

/*
 * Check the events the consumer read: each in its watch's cell, with a
 * generation; fill GOT and GENS.  Returns the events lost as OVERFLOW
 * events count them.
 */
static __u64 stress_check_events(struct __test_metadata *_metadata,
				 struct stress *s, const struct vec *events,
				 const char *sentinel, struct vec *got,
				 struct vec *gens)
{
	const struct ummunotify_ring_event *ev = events->v;
	size_t i, strays = 0;
	__u64 lost = 0;

	for (i = 0; i < events->n; i++) {
		struct expectation e = {
			.cookie = ev[i].user_cookie,
			.start = ev[i].start,
			.end = ev[i].end,
			.cause = ev[i].cause,
		};
		__u64 start = (uintptr_t)sentinel, len = ps;

		if (ev[i].cause == UMMUNOTIFY_CAUSE_OVERFLOW) {
			lost += ev[i].generation;
			continue;
		}
		if (e.cookie != SENTINEL) {
			start = (uintptr_t)s->cells[e.cookie %
						    STRESS_CELLS].addr;
			len = CELL_PAGES * ps;
		}
		if (e.start < start || e.end > start + len ||
		    e.start >= e.end || ev[i].slot == UMMUNOTIFY_NO_SLOT ||
		    (e.cause != UMMUNOTIFY_CAUSE_UNMAP &&
		     e.cause != UMMUNOTIFY_CAUSE_CLEAR)) {
			if (!strays++)
				TH_LOG("stray event: cookie %llu [%#llx, %#llx) cause %llu slot %u",
				       e.cookie, e.start, e.end, e.cause,
				       ev[i].slot);
			continue;
		}
		vec_push(got, &e, sizeof(e));
		vec_push(gens, &ev[i].generation, sizeof(ev[i].generation));
	}
	EXPECT_EQ(0UL, strays);
	return lost;
}

TEST_F_TIMEOUT(native, concurrent_watches_and_unmaps_never_leave_a_stale_generation,
	       STRESS_MAX_SECONDS + 120)
{
	struct stress_thread mappers[STRESS_MAPPERS];
	struct stress_thread watchers[STRESS_WATCHERS];
	struct stress_thread consumer = { .seed = 0 };
	unsigned int seconds = stress_seconds(), i;
	struct vec got = { .v = NULL }, gens = { .v = NULL };
	char *sentinel = self->buf;
	struct timespec start;
	struct stress *s;
	__u64 lost;
	size_t missing;

	/* Should a thread hang in user space, end it all. */
	alarm(seconds + 90);
	s = calloc(1, sizeof(*s));
	ASSERT_NE(NULL, s);
	s->u = &self->u;
	pthread_mutex_init(&s->lock, NULL);
	s->pagemap = open_pagemap(_metadata);
	if (!pfn_at(s->pagemap, sentinel))
		TH_LOG("no page frames in pagemap (not root?): not checking pinned pages");
	for (i = 0; i < STRESS_CELLS; i++) {
		pthread_mutex_init(&s->cells[i].lock, NULL);
		s->cells[i].addr = map_guarded(_metadata, CELL_PAGES);
	}
	watch_range(_metadata, self->u.fd, sentinel, ps, SENTINEL, 0);

	consumer.s = s;
	ASSERT_EQ(0, pthread_create(&consumer.thread, NULL, stress_consumer,
				    &consumer));
	for (i = 0; i < STRESS_MAPPERS; i++) {
		mappers[i] = (struct stress_thread) {
			.s = s,
			.seed = 1 + i,
			.scratch = map_guarded(_metadata, CELL_PAGES),
		};
		ASSERT_EQ(0, pthread_create(&mappers[i].thread, NULL,
					    stress_mapper, &mappers[i]));
	}
	for (i = 0; i < STRESS_WATCHERS; i++) {
		watchers[i] = (struct stress_thread) {
			.s = s,
			.seed = 100 + i,
		};
		ASSERT_EQ(0, pthread_create(&watchers[i].thread, NULL,
					    stress_watcher, &watchers[i]));
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		struct timespec tick = { .tv_nsec = 50 * 1000 * 1000 };

		nanosleep(&tick, NULL);
	} while (!stress_stopped(s) && seconds_since(&start) < seconds);
	__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
	for (i = 0; i < STRESS_MAPPERS; i++)
		ASSERT_EQ(0, pthread_join(mappers[i].thread, NULL));
	for (i = 0; i < STRESS_WATCHERS; i++)
		ASSERT_EQ(0, pthread_join(watchers[i].thread, NULL));
	ASSERT_EQ(0, pthread_join(consumer.thread, NULL));
	ASSERT_EQ(0UL, s->failures)
		TH_LOG("%lu failures, the first: %s", s->failures, s->failure);

	/* One more event flushes the OVERFLOW of any event dropped. */
	clear_page(_metadata, sentinel);
	ring_drain(&self->u, &consumer.events);
	TH_LOG("%lu changes, %zu watches, %zu expected events, %zu events read, %llu dropped",
	       s->changes, s->generations.n, s->expected.n,
	       consumer.events.n, ring_dropped(&self->u));
	EXPECT_LT(0UL, s->expected.n);
	EXPECT_EQ(1, fdinfo(self->u.fd, "regions"));

	lost = stress_check_events(_metadata, s, &consumer.events, sentinel,
				   &got, &gens);
	EXPECT_EQ(ring_dropped(&self->u), lost);
	/* Each invalidation is in the ring or among the events it dropped. */
	qsort(s->expected.v, s->expected.n, sizeof(struct expectation),
	      compare_expectations);
	qsort(got.v, got.n, sizeof(struct expectation), compare_expectations);
	missing = count_missing(&s->expected, &got);
	EXPECT_LE(missing, lost)
		TH_LOG("%zu of %zu invalidations missing from the ring, %llu dropped",
		       missing, s->expected.n, lost);
	for (i = 0; i < s->generations.n; i++)
		vec_push(&gens, (__u64 *)s->generations.v + i, sizeof(__u64));
	EXPECT_TRUE(generations_unique(_metadata, gens.v, gens.n));
}

/* Tracepoints: register, invalidate (published or filtered), unregister. */
#define TRACING		"/sys/kernel/tracing/"

static void expect_traced(struct __test_metadata *_metadata,
			  const char *trace, const char *line)
{
	EXPECT_NE(NULL, strstr(trace, line))
		TH_LOG("no \"%s\" in the trace:\n%s", line, trace);
}

TEST_F(native, tracepoints_show_register_invalidate_and_unregister)
{
	static char trace[1 << 16];
	unsigned long start = (unsigned long)self->buf;
	struct ummunotify_watch w;
	char want[128];

	if (access(TRACING "trace", F_OK) &&
	    mount("tracefs", TRACING, "tracefs", 0, NULL))
		SKIP(return, "no tracefs");
	if (access(TRACING "events", F_OK))
		SKIP(return, "this kernel has no event tracing");
	/* Event tracing without the module's events is the module's fault. */
	ASSERT_EQ(0, access(TRACING "events/ummunotify/enable", F_OK))
		TH_LOG("no ummunotify events in %sevents", TRACING);
	ASSERT_EQ(0, write_file(TRACING "trace", ""));
	ASSERT_EQ(0, write_file(TRACING "events/ummunotify/enable", "1"));

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 4242, 0);
	ASSERT_EQ(0, mprotect(self->buf, ps, PROT_READ));
	clear_page(_metadata, self->buf);
	ASSERT_EQ(0, unwatch(self->u.fd, w.user_cookie));

	ASSERT_EQ(0, write_file(TRACING "events/ummunotify/enable", "0"));
	ASSERT_EQ(0, read_file(TRACING "trace", trace, sizeof(trace)));
	ASSERT_NE('\0', trace[0]);

	snprintf(want, sizeof(want),
		 "ummunotify_register: cookie=4242 [%#lx, %#lx) slot=%u ret=0",
		 start, start + ps, w.slot);
	expect_traced(_metadata, trace, want);
	snprintf(want, sizeof(want),
		 "ummunotify_invalidate: cookie=4242 [%#lx, %#lx) cause=%u filtered",
		 start, start + ps, UMMUNOTIFY_CAUSE_PROTECTION);
	expect_traced(_metadata, trace, want);
	snprintf(want, sizeof(want),
		 "ummunotify_invalidate: cookie=4242 [%#lx, %#lx) cause=%u published",
		 start, start + ps, UMMUNOTIFY_CAUSE_CLEAR);
	expect_traced(_metadata, trace, want);
	expect_traced(_metadata, trace, "ummunotify_unregister: cookie=4242 ret=0");
}

/*
 * An invalidation over many watches lets go of the notifier's lock now
 * and then, for the ioctls of other threads, and goes on from where it
 * was: each watch it covered must still see it, none skipped, while
 * watches come and go beside them.
 */
/* Of the fixture's 4096 slots, with the churners'. */
#define WALK_WATCHES	4000
#define WALK_CHURNERS	2

struct churner {
	pthread_t thread;
	int fd;
	char *p;
	__u64 cookie;
	atomic_bool *stop;
	long cycles;
	int err;
};

/* Watch a page of the watched ones and unwatch it, again and again. */
static void *churn(void *arg)
{
	struct churner *c = arg;
	unsigned int seed = c->cookie;
	struct ummunotify_watch w;

	while (!atomic_load(c->stop)) {
		w = watch_arg(c->p + rand_r(&seed) % WALK_WATCHES * ps, ps,
			      c->cookie, 0);
		if (uioctl(c->fd, UMMUNOTIFY_WATCH, &w) ||
		    unwatch(c->fd, c->cookie)) {
			c->err = errno;
			break;
		}
		c->cycles++;
	}
	return NULL;
}

TEST_F(native, a_walk_over_many_watches_reaches_each_while_others_come_and_go)
{
	struct churner churners[WALK_CHURNERS];
	static __u32 slot[WALK_WATCHES];
	static __u64 gen[WALK_WATCHES];
	size_t len = WALK_WATCHES * ps;
	atomic_bool stop = false;
	int i, round, missed = 0;
	struct umn *u = &self->u;
	char *p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < WALK_WATCHES; i++)
		slot[i] = watch_range(_metadata, u->fd, p + i * ps, ps, i + 1,
				      0).slot;
	for (i = 0; i < WALK_CHURNERS; i++) {
		churners[i] = (struct churner) {
			.fd = u->fd,
			.p = p,
			.cookie = WALK_WATCHES + 1 + i,
			.stop = &stop,
		};
		ASSERT_EQ(0, pthread_create(&churners[i].thread, NULL, churn,
					    &churners[i]));
	}
	for (round = 0; round < 200; round++) {
		for (i = 0; i < WALK_WATCHES; i++)
			gen[i] = gen_of(u, slot[i]);
		ASSERT_EQ(0, madvise(p, len, MADV_DONTNEED));
		for (i = 0; i < WALK_WATCHES; i++)
			missed += gen_of(u, slot[i]) == gen[i];
	}
	atomic_store(&stop, true);
	for (i = 0; i < WALK_CHURNERS; i++) {
		ASSERT_EQ(0, pthread_join(churners[i].thread, NULL));
		EXPECT_EQ(0, churners[i].err);
		/* They did come and go meanwhile. */
		EXPECT_LT(0, churners[i].cycles);
	}
	EXPECT_EQ(0, missed);
	munmap(p, len);
}

int main(int argc, char **argv)
{
	if (access(DEVICE, R_OK | W_OK))
		ksft_exit_skip("%s: %s (is the module loaded?)\n", DEVICE,
			       strerror(errno));
	return test_harness_run(argc, argv);
}
