// SPDX-License-Identifier: GPL-2.0
/*
 * Both ABIs from a 32-bit process (built with -m32): the layouts are the
 * same for 32- and 64-bit callers, so compat_ioctl passes them through,
 * and a 32-bit address space ends lower, at its own TASK_SIZE.  Runs as
 * root in a guest with the module loaded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "kselftest_harness.h"
#include "native.h"
#include "process.h"
#include "sysfile.h"

#define TRACING		"/sys/kernel/tracing/"

#if defined(__arm__)
/*
 * TASK_SIZE_32 of an AArch32 process on arm64: 4 GiB less a page, of
 * whatever size the kernel's pages are.  With 64K pages and
 * CONFIG_KUSER_HELPERS it is the whole 4 GiB, the last page being the
 * kuser helpers' [vectors] page at 0xffff0000 (with smaller pages that
 * lies below TASK_SIZE_32 and changes nothing).
 */
static unsigned long long task_size_32(struct __test_metadata *_metadata)
{
	bool vectors = false;
	char line[256];
	FILE *maps;

	if (ps != 0x10000)
		return 0x100000000ULL - ps;
	maps = fopen("/proc/self/maps", "r");
	ASSERT_NE(NULL, maps);
	while (fgets(line, sizeof(line), maps))
		if (strstr(line, "[vectors]"))
			vectors = true;
	fclose(maps);
	return vectors ? 0x100000000ULL : 0x100000000ULL - ps;
}
#else
/* TASK_SIZE of a 32-bit process on x86-64: IA32_PAGE_OFFSET. */
static unsigned long long task_size_32(struct __test_metadata *_metadata)
{
	(void)_metadata;
	return 0xffffe000ULL;
}
#endif

FIXTURE(compat)
{
	char *buf;
	unsigned long long task_size;
};

FIXTURE_SETUP(compat)
{
	ASSERT_EQ(4, (int)sizeof(void *));
	self->buf = map_guarded(_metadata, 2);
	self->task_size = task_size_32(_metadata);
}

FIXTURE_TEARDOWN(compat)
{
}

TEST_F(compat, the_2010_abi_reports_an_munmap_to_a_32_bit_process)
{
	struct ummunotify_event ev[2];
	int fd = open_dev(_metadata, O_RDONLY);
	const __u64 *counter = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);

	ASSERT_NE(MAP_FAILED, counter);
	ASSERT_EQ(0, register_region(fd, self->buf, 2 * ps, 123));
	ASSERT_EQ(0, munmap(self->buf + ps, ps));
	EXPECT_EQ(1ULL, *counter);
	ASSERT_EQ((ssize_t)sizeof(ev), read(fd, ev, sizeof(ev)));
	EXPECT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_INVAL, ev[0].type);
	EXPECT_EQ((__u32)UMMUNOTIFY_EVENT_FLAG_HINT, ev[0].flags);
	EXPECT_EQ((uintptr_t)self->buf + ps, ev[0].hint_start);
	EXPECT_EQ((uintptr_t)self->buf + 2 * ps, ev[0].hint_end);
	EXPECT_EQ(123ULL, ev[0].user_cookie_counter);
	EXPECT_EQ((__u32)UMMUNOTIFY_EVENT_TYPE_LAST, ev[1].type);
	EXPECT_EQ(1ULL, ev[1].user_cookie_counter);
	close(fd);
}

TEST_F(compat, the_native_abi_works_for_a_32_bit_process)
{
	struct ummunotify_watch w;
	struct umn u;

	umn_init(_metadata, &u, WATCH_RING, 0, 0);
	w = watch_range(_metadata, u.fd, self->buf, ps, 7, 0);
	clear_page(_metadata, self->buf);
	EXPECT_NE(w.generation, gen_of(&u, w.slot));
	expect_event(_metadata, &u, UMMUNOTIFY_CAUSE_CLEAR, self->buf, ps, 7,
		     w.slot);
	close(u.fd);
}

/* A watch may end at the 32-bit TASK_SIZE, not beyond. */
TEST_F(compat, watches_end_at_the_32_bit_task_size)
{
	struct ummunotify_watch w = { .user_cookie = 1,
				      .start = self->task_size - ps,
				      .end = self->task_size };
	struct umn u;

	umn_init(_metadata, &u, WATCH_RING, 0, 0);
	EXPECT_EQ(0, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
	w.user_cookie = 2;
	w.end = self->task_size + 1;
	EXPECT_EQ(-EINVAL, uioctl(u.fd, UMMUNOTIFY_WATCH, &w));
	w.user_cookie = 3;
	EXPECT_EQ(-EINVAL, register_region(u.fd, (void *)(uintptr_t)w.start,
					   ps + 1, 3));
	close(u.fd);
}

/*
 * The RELEASE a 32-bit process's exit posts covers its address space as
 * WATCH_ALL does: [0, TASK_SIZE), not the 64-bit TASK_SIZE_MAX.  Nobody
 * can read a ring after its owner has exited: the ummunotify_event
 * tracepoint shows it.
 */
TEST_F(compat, the_release_of_a_32_bit_process_ends_at_its_task_size)
{
	static char trace[1 << 16];
	char want[128];
	pid_t pid;

	if (access(TRACING "trace", F_OK))
		ASSERT_EQ(0, mount("tracefs", TRACING, "tracefs", 0, NULL));
	ASSERT_EQ(0, write_file(TRACING "trace", ""));
	ASSERT_EQ(0, write_file(TRACING "events/ummunotify/ummunotify_event/enable",
				"1"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ummunotify_watch w = { .user_cookie = 1,
					      .flags = UMMUNOTIFY_WATCH_ALL };
		struct umn u;

		umn_init(_metadata, &u, WATCH_RING, 0, 0);
		_exit(uioctl(u.fd, UMMUNOTIFY_WATCH, &w) ? 1 : 0);
	}
	ASSERT_EQ(0, wait_child(pid));
	ASSERT_EQ(0, write_file(TRACING "events/ummunotify/ummunotify_event/enable",
				"0"));
	ASSERT_EQ(0, read_file(TRACING "trace", trace, sizeof(trace)));
	snprintf(want, sizeof(want), "[0x0, %#llx) cause=%u",
		 self->task_size, UMMUNOTIFY_CAUSE_RELEASE);
	EXPECT_NE(NULL, strstr(trace, want))
		TH_LOG("no \"%s\" in the trace:\n%s", want, trace);
}

TEST_HARNESS_MAIN
