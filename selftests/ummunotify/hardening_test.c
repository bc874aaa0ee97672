// SPDX-License-Identifier: GPL-2.0
/*
 * What any local user could do to the kernel or to another process through
 * /dev/ummunotify (mode 0666), before the module was hardened: each test
 * here failed on b2ef9d9.  A use-after-free racing mmap() with a failing
 * SETUP, mappings a forked child inherited, executable mappings, memory
 * bounded per file only, a WATCH that held up the file behind a busy
 * address space, SIGIO sent (and its queue entry allocated) from the
 * notifier, read() failing with EFAULT though nothing faulted.
 *
 * Runs as root in a guest with the module loaded (tools/testing/vm-run).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "kselftest_harness.h"
#include "native.h"
#include "process.h"
#include "sysfile.h"

#define PARAMS		"/sys/module/ummunotify/parameters/"
#define TRACING		"/sys/kernel/tracing/"
#define RACE_SECONDS	5.0

/* Files each test opens itself. */
FIXTURE(bare)
{
};

FIXTURE_SETUP(bare)
{
}

FIXTURE_TEARDOWN(bare)
{
}

/*
 * mmap() cannot take the lock SETUP holds, so it must only ever see an
 * area that SETUP has finished: here SETUP fails in its last step (its
 * argument is read-only) again and again while another thread maps the
 * counter page.  Before the fix mmap() read the page array that a failing
 * SETUP freed, a window of a few instructions: a real-time thread on the
 * mapping thread's CPU preempts it at random points (with CONFIG_PREEMPT,
 * as the debug kernel has it), stretching the window to a millisecond,
 * and KASAN reported the use-after-free.
 */
struct setup_race {
	int fd;
	void *params;		/* read-only: SETUP fails with EFAULT */
	atomic_bool stop;
	long efaults, others;
};

static int pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

static void *fail_setup(void *arg)
{
	struct setup_race *r = arg;

	pin_to_cpu(0);
	while (!atomic_load(&r->stop)) {
		if (uioctl(r->fd, UMMUNOTIFY_SETUP, r->params) == -EFAULT)
			r->efaults++;
		else
			r->others++;
	}
	return NULL;
}

/* SCHED_FIFO on CPU 1: wake every 300 us, run for 1 ms. */
static void *preempt_often(void *arg)
{
	struct sched_param param = { .sched_priority = 1 };
	struct setup_race *r = arg;
	struct timespec nap = { .tv_nsec = 300000 }, start;

	pin_to_cpu(1);
	if (sched_setscheduler(0, SCHED_FIFO, &param))
		return NULL;
	while (!atomic_load(&r->stop)) {
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_MONOTONIC, &start);
		while (seconds_since(&start) < 1e-3)
			;
	}
	return NULL;
}

TEST_F(bare, mmap_racing_a_failing_setup_maps_only_the_counter_page)
{
	struct ummunotify_params params = { 0 }, *p;
	struct setup_race r = { 0 };
	pthread_t setter, preempter;
	struct timespec start;
	long maps = 0;
	__u64 *page;

	ASSERT_LE(2, sysconf(_SC_NPROCESSORS_ONLN));
	r.fd = open_dev(_metadata, O_RDWR);
	ASSERT_EQ(WATCH_RING, exchange(r.fd, WATCH_RING));
	r.params = read_only_copy(_metadata, &params, sizeof(params));
	ASSERT_EQ(0, pin_to_cpu(1));
	ASSERT_EQ(0, pthread_create(&setter, NULL, fail_setup, &r));
	ASSERT_EQ(0, pthread_create(&preempter, NULL, preempt_often, &r));
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seconds_since(&start) < RACE_SECONDS) {
		page = mmap(NULL, ps, PROT_READ, MAP_SHARED, r.fd, 0);
		ASSERT_NE(MAP_FAILED, page) TH_LOG("%s", strerror(errno));
		/* The counter of a file nothing was registered on. */
		ASSERT_EQ(0ULL, *page);
		ASSERT_EQ(0, munmap(page, ps));
		/* Only the counter page: no SETUP ever succeeded. */
		ASSERT_EQ(-EINVAL, try_mmap(r.fd, 2 * ps, PROT_READ, MAP_SHARED,
					    0));
		maps++;
	}
	atomic_store(&r.stop, true);
	ASSERT_EQ(0, pthread_join(setter, NULL));
	ASSERT_EQ(0, pthread_join(preempter, NULL));
	EXPECT_LT(0, r.efaults);
	EXPECT_EQ(0, r.others);
	TH_LOG("%ld mmaps raced %ld failing SETUPs", maps, r.efaults);

	/* Nothing of the failed attempts stayed: a real SETUP works. */
	ASSERT_EQ(0, setup(r.fd, &params, 0, 0));
	p = mmap(NULL, params.mmap_size, PROT_READ, MAP_SHARED, r.fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(params.ring_entries - 1,
		  *(__u32 *)((char *)p + params.off.ring_mask));
	close(r.fd);
}

/*
 * Forked children: the mappings of the file stay with its owner.  The
 * child of a process that mapped them gets SIGSEGV where they were, and
 * MADV_DOFORK cannot hand them down either.
 */
FIXTURE(owner)
{
	struct umn u;
	char *buf;
};

FIXTURE_SETUP(owner)
{
	umn_init(_metadata, &self->u, WATCH_RING, 0, 0);
	self->buf = map_guarded(_metadata, 1);
}

FIXTURE_TEARDOWN(owner)
{
	close(self->u.fd);
}

/* Fork a child that loads (or stores to) ADDR; what it died of. */
static int child_touches(volatile __u64 *addr, bool store)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (!pid) {
		if (store)
			*addr = 0;
		_exit(*addr == ~0ULL);
	}
	return wait_child(pid);
}

TEST_F(owner, a_forked_child_inherits_no_mapping_of_the_file)
{
	struct ummunotify_watch w;

	w = watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_NE(0ULL, gen_of(&self->u, w.slot));
	EXPECT_EQ(128 + SIGSEGV, child_touches((__u64 *)self->u.area, false));
	EXPECT_EQ(128 + SIGSEGV,
		  child_touches((__u64 *)(self->u.area +
					  self->u.p.off.generations), false));
	EXPECT_EQ(128 + SIGSEGV, child_touches(self->u.head, false));
	EXPECT_EQ(128 + SIGSEGV, child_touches(self->u.head, true));
	/* The parent's head is as it left it. */
	EXPECT_EQ(0ULL, *self->u.head);
}

TEST_F(owner, madvise_dofork_cannot_hand_the_mappings_down)
{
	EXPECT_EQ(-1, madvise(self->u.area, self->u.p.mmap_size, MADV_DOFORK));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, madvise(self->u.head, ps, MADV_DOFORK));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(128 + SIGSEGV, child_touches((__u64 *)self->u.area, false));
	EXPECT_EQ(128 + SIGSEGV, child_touches(self->u.head, true));
}

TEST_F(bare, a_forked_child_inherits_no_2010_counter_page)
{
	int fd = open_dev(_metadata, O_RDONLY);
	__u64 *counter = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);

	ASSERT_NE(MAP_FAILED, counter);
	EXPECT_EQ(128 + SIGSEGV, child_touches(counter, false));
	EXPECT_EQ(0ULL, *counter);
	close(fd);
}

/* The area holds cookies user space chose: it is never code. */
TEST_F(owner, no_mapping_of_the_file_can_be_executable)
{
	EXPECT_EQ(-EPERM, try_mmap(self->u.fd, self->u.p.mmap_size,
				   PROT_READ | PROT_EXEC, MAP_SHARED, 0));
	EXPECT_EQ(-EPERM, try_mmap(self->u.fd, ps,
				   PROT_READ | PROT_WRITE | PROT_EXEC,
				   MAP_SHARED, self->u.p.head_offset));
	EXPECT_EQ(-1, mprotect(self->u.area, self->u.p.mmap_size,
			       PROT_READ | PROT_EXEC));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(-1, mprotect(self->u.head, ps, PROT_READ | PROT_EXEC));
	EXPECT_EQ(EACCES, errno);
}

/*
 * A process whose personality makes every readable mapping executable
 * (old 32-bit programs without PT_GNU_STACK) maps the counter page as
 * before, but not executable.
 */
TEST_F(bare, read_implies_exec_maps_the_counter_page_without_exec)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid) {
		int fd = open(DEVICE, O_RDONLY);
		char line[256], want[32];
		bool found = false;
		void *counter;
		FILE *maps;

		if (fd < 0 || personality(READ_IMPLIES_EXEC) < 0)
			_exit(10);
		counter = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);
		if (counter == MAP_FAILED)
			_exit(11);
		snprintf(want, sizeof(want), "%lx-", (unsigned long)counter);
		maps = fopen("/proc/self/maps", "r");
		while (maps && fgets(line, sizeof(line), maps))
			if (!strncmp(line, want, strlen(want)))
				found = !strncmp(line + strcspn(line, " "),
						 " r--s", 5);
		_exit(found ? 0 : 12);
	}
	EXPECT_EQ(0, wait_child(pid));
}

static sigjmp_buf ran_no_code;

static void on_fault(int sig)
{
	(void)sig;
	siglongjmp(ran_no_code, 1);
}

/* Whether a call to the byte at P, a "ret", comes back. */
static bool runs_as_code(const unsigned char *p)
{
	struct sigaction sa = { .sa_handler = on_fault }, old;
	volatile bool ran = false;

	if (*p != 0xc3 || sigaction(SIGSEGV, &sa, &old))
		return true;
	if (!sigsetjmp(ran_no_code, 1)) {
		((void (*)(void))p)();
		ran = true;
	}
	sigaction(SIGSEGV, &old, NULL);
	return ran;
}

/*
 * Under READ_IMPLIES_EXEC the mappings are made all the same, and their
 * page table entries are not executable either: neither a "ret" the
 * owner writes to the head page nor a cookie 0xc3 in the ring runs.
 */
TEST_F(owner, read_implies_exec_maps_the_ring_without_exec)
{
	const struct ummunotify_ring_event *ev;
	unsigned char *head, *area;

	watch_range(_metadata, self->u.fd, self->buf, ps, 0xc3, 0);
	ASSERT_EQ(0, munmap(self->buf, ps));
	ASSERT_EQ(1ULL, ring_tail(&self->u));
	ASSERT_LE(0, personality(READ_IMPLIES_EXEC));
	area = mmap(NULL, self->u.p.mmap_size, PROT_READ, MAP_SHARED,
		    self->u.fd, 0);
	ASSERT_NE(MAP_FAILED, area);
	head = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, self->u.fd,
		    self->u.p.head_offset);
	ASSERT_NE(MAP_FAILED, head);
	ev = (const void *)(area + self->u.p.off.events);
	head[ps - 1] = 0xc3;
	EXPECT_FALSE(runs_as_code(head + ps - 1));
	EXPECT_FALSE(runs_as_code((const void *)&ev->user_cookie));
}

/*
 * The pages are special page table entries: nothing can take a reference
 * to them, as vmsplice() or process_vm_readv() would, and hand them to
 * another process to read later.
 */
TEST_F(owner, nothing_can_take_a_reference_to_the_shared_pages)
{
	struct iovec iov = { .iov_base = self->u.area, .iov_len = ps };
	__u64 copy;
	struct iovec local = { .iov_base = &copy, .iov_len = sizeof(copy) };
	int pipefd[2];

	ASSERT_EQ(0, pipe(pipefd));
	EXPECT_EQ(-1, vmsplice(pipefd[1], &iov, 1, 0));
	EXPECT_EQ(EFAULT, errno);
	iov.iov_base = self->u.head;
	EXPECT_EQ(-1, vmsplice(pipefd[1], &iov, 1, 0));
	EXPECT_EQ(EFAULT, errno);
	iov.iov_base = self->u.area;
	iov.iov_len = sizeof(copy);
	EXPECT_EQ(-1, process_vm_readv(getpid(), &local, 1, &iov, 1, 0));
	EXPECT_EQ(EFAULT, errno);
	close(pipefd[0]);
	close(pipefd[1]);
}

TEST_F(bare, the_2010_counter_page_cannot_be_executable)
{
	int fd = open_dev(_metadata, O_RDONLY);
	void *counter;

	EXPECT_EQ(-EPERM, try_mmap(fd, ps, PROT_READ | PROT_EXEC, MAP_SHARED,
				   0));
	counter = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, counter);
	EXPECT_EQ(-1, mprotect(counter, ps, PROT_READ | PROT_EXEC));
	EXPECT_EQ(EACCES, errno);
	close(fd);
}

/*
 * A head user space set outside the ring makes it look full until read()
 * puts the head back at the oldest entry.  When nothing was ever posted
 * that is all read() does: nothing faulted, there is just nothing to
 * read.
 */
TEST_F(owner, read_repairs_a_garbage_head_on_an_empty_ring_without_efault)
{
	struct ummunotify_ring_event ev;
	struct pollfd pfd = { .fd = self->u.fd, .events = POLLIN };
	int flags = fcntl(self->u.fd, F_GETFL);

	ASSERT_EQ(0, fcntl(self->u.fd, F_SETFL, flags | O_NONBLOCK));
	set_head(&self->u, 12345);
	EXPECT_EQ(1, poll(&pfd, 1, 0));
	EXPECT_EQ(-EAGAIN, try_read(self->u.fd, &ev, sizeof(ev)));
	EXPECT_EQ(0ULL, *self->u.head);
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	/* And an event posted afterwards reads normally. */
	watch_range(_metadata, self->u.fd, self->buf, ps, 7, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(EVENT_SIZE, try_read(self->u.fd, &ev, sizeof(ev)));
	EXPECT_EQ(7ULL, ev.user_cookie);
	EXPECT_EQ(UMMUNOTIFY_CAUSE_CLEAR, ev.cause);
}

/*
 * EXCHANGE_FEATURES and SETUP write their result without faulting (they
 * hold regions_lock); on a page not present they fault it in and start
 * again.  Faulting in writes the page, so the request must have been read
 * before: here another thread keeps zapping the argument's page (a
 * shared memfd page keeps its contents, only the mapping goes), and every
 * call must answer the request as it was made.
 */
struct zap {
	void *page;
	atomic_bool stop;
	atomic_long zaps;	/* done so far */
	int pinned;		/* pin_to_cpu(1)'s, read once zaps is not 0 */
	double seconds;		/* 0: until stop */
};

static void *zap_page(void *arg)
{
	struct zap *z = arg;
	struct timespec start;

	z->pinned = pin_to_cpu(1);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!atomic_load(&z->stop) &&
	       (!z->seconds || seconds_since(&start) < z->seconds)) {
		madvise(z->page, ps, MADV_DONTNEED);
		atomic_fetch_add(&z->zaps, 1);
	}
	return NULL;
}

TEST_F(bare, a_request_is_answered_as_made_when_its_page_goes_away)
{
	struct ummunotify_params *params;
	struct zap z = { 0 };
	/*
	 * A word more than a page holds (513 with 4K pages), rounded up to
	 * two pages of words; one page if byte 0 were lost.
	 */
	__u32 slots = ps / sizeof(__u64) + 1;
	struct timespec start;
	long calls = 0;
	pthread_t t;
	int memfd, fd;
	__u32 *mask;

	memfd = memfd_create("request", 0);
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, ps));
	z.page = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, z.page);
	mask = z.page;
	params = (void *)((char *)z.page + 64);
	pin_to_cpu(0);
	ASSERT_EQ(0, pthread_create(&t, NULL, zap_page, &z));
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seconds_since(&start) < RACE_SECONDS) {
		fd = open("/dev/ummunotify", O_RDWR);
		ASSERT_LE(0, fd);
		*mask = UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING;
		ASSERT_EQ(0, uioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, mask));
		ASSERT_EQ(UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING,
			  *mask);
		*params = (struct ummunotify_params) {
			.slots = slots,
			.ring_entries = 2,
		};
		ASSERT_EQ(0, uioctl(fd, UMMUNOTIFY_SETUP, params));
		ASSERT_EQ(2 * (slots - 1), params->slots);
		ASSERT_EQ(2U, params->ring_entries);
		close(fd);
		calls++;
	}
	atomic_store(&z.stop, true);
	pthread_join(t, NULL);
	TH_LOG("%ld files set up while their arguments' page went away",
	       calls);
	munmap(z.page, ps);
	close(memfd);
}

/*
 * A call whose argument another thread unmaps as fast as the call faults
 * it in ends on a signal, as a call that waits does.  SETUP makes the
 * area before it writes its answer: with a 4 MiB ring each try takes long
 * enough for the zapping thread to win most races.  Before the fix only
 * SIGKILL ended the tries; SETUP went on until the zapping stopped, after
 * ZAP_SECONDS, and returned 0 then.  A SETUP done before the signal proves
 * nothing if no zap fell within it (seen on 5.10 with both vCPUs in one
 * host thread, and on arm64 under TCG): it is made again on a new file, up
 * to 20 times, and if none of them met a zap the test is a skip.  One
 * that zaps met and that still returned 0 in time is no reason to skip:
 * twenty such fail, as a SETUP that goes on until the zapping stops does.
 */
#define ZAP_SECONDS	3.0
#define ALARM_SECONDS	0.1

static void on_alarm(int sig)
{
	(void)sig;
}

TEST_F(bare, a_setup_whose_argument_keeps_going_away_ends_on_a_signal)
{
	/* No SA_RESTART: the interrupted call returns EINTR. */
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval alarm_in = {
		.it_value.tv_usec = ALARM_SECONDS * 1000000,
	}, disarm = { 0 };
	struct ummunotify_params *params;
	struct zap z = { .seconds = ZAP_SECONDS };
	struct timespec start;
	int memfd, fd, ret, tries = 0, met = 0;
	long zaps;
	double took;
	pthread_t t;

	memfd = memfd_create("request", 0);
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, ps));
	z.page = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, z.page);
	params = z.page;
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	ASSERT_EQ(0, pin_to_cpu(0));
	ASSERT_EQ(0, pthread_create(&t, NULL, zap_page, &z));
	while (!atomic_load(&z.zaps))
		sched_yield();
	/* On SETUP's CPU it would zap only when SETUP sleeps. */
	if (z.pinned) {
		atomic_store(&z.stop, true);
		pthread_join(t, NULL);
	}
	ASSERT_EQ(0, z.pinned)
		TH_LOG("the zapping thread not on CPU 1: %s",
		       strerror(-z.pinned));
	do {
		if (tries++)
			close(fd);
		fd = open(DEVICE, O_RDWR);
		ASSERT_LE(0, fd);
		ASSERT_EQ(WATCH_RING, exchange(fd, WATCH_RING));
		*params = (struct ummunotify_params) { .ring_entries = 1 << 17 };
		ASSERT_EQ(0, setitimer(ITIMER_REAL, &alarm_in, NULL));
		clock_gettime(CLOCK_MONOTONIC, &start);
		zaps = atomic_load(&z.zaps);
		ret = uioctl(fd, UMMUNOTIFY_SETUP, params);
		zaps = atomic_load(&z.zaps) - zaps;
		took = seconds_since(&start);
		setitimer(ITIMER_REAL, &disarm, NULL);
		met += zaps > 0;
	} while (!ret && took < ALARM_SECONDS && tries < 20);
	atomic_store(&z.stop, true);
	pthread_join(t, NULL);
	TH_LOG("%d of %d SETUPs met zaps; the last returned %d after %.3f s, %ld zaps in it",
	       met, tries, ret, took, zaps);
	if (!ret && took < ALARM_SECONDS && !met) {
		signal(SIGALRM, SIG_DFL);
		close(fd);
		SKIP(return, "no zap fell within any of %d SETUPs", tries);
	}
	EXPECT_EQ(-EINTR, ret);
	EXPECT_GT(ZAP_SECONDS / 2, took);
	/* It changed nothing: made again, it works. */
	EXPECT_EQ(0, uioctl(fd, UMMUNOTIFY_SETUP, params));
	EXPECT_EQ(1U << 17, params->ring_entries);
	signal(SIGALRM, SIG_DFL);
	close(fd);
	munmap(z.page, ps);
	close(memfd);
}

/*
 * Per-user limits: max_user_watches bounds the watches of all the files
 * one user opened, in any process; max_user_pages their shared memory.
 * The fixture lowers the parameters and restores them.
 */
#define TEST_UID	4242
#define OTHER_UID	4343
#define USER_WATCHES	8

FIXTURE(user_limits)
{
	/* The limits in force before, restored after, whatever fails. */
	char saved[4][32];
	bool read;
};

static const char *const user_limits_params[] = {
	"max_user_watches", "max_user_pages", "max_ns_watches", "max_ns_pages",
};

FIXTURE_SETUP(user_limits)
{
	char path[128];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(user_limits_params); i++) {
		snprintf(path, sizeof(path), PARAMS "%s", user_limits_params[i]);
		ASSERT_EQ(0, read_file(path, self->saved[i],
				       sizeof(self->saved[i])))
			TH_LOG("no %s parameter", user_limits_params[i]);
	}
	self->read = true;
}

FIXTURE_TEARDOWN(user_limits)
{
	char path[128];
	size_t i;

	for (i = 0; self->read && i < ARRAY_SIZE(user_limits_params); i++) {
		snprintf(path, sizeof(path), PARAMS "%s", user_limits_params[i]);
		EXPECT_EQ(0, write_file(path, self->saved[i]));
	}
}

static int set_param(const char *name, long value)
{
	char path[128], text[32];

	snprintf(path, sizeof(path), PARAMS "%s", name);
	snprintf(text, sizeof(text), "%ld\n", value);
	return write_file(path, text) ? -errno : 0;
}

/*
 * Changing uids leaves the process not dumpable, which makes its /proc
 * files root's: 5.10 then refuses it its own /proc/self/fdinfo (6.1 asks
 * ptrace_may_access(), which lets a process see itself).
 */
static int become(uid_t uid)
{
	return setresgid(uid, uid, uid) || setresuid(uid, uid, uid) ||
	       prctl(PR_SET_DUMPABLE, 1) ? -errno : 0;
}

/*
 * A native file of the calling user with N watches of one page each, the
 * I-th at BUF + I * STEP with cookie 1 + I; the file, or -errno of the
 * first that failed (the file is then closed).
 */
static int file_with_watches(char *buf, int n, size_t step)
{
	struct ummunotify_params p;
	int fd = open(DEVICE, O_RDWR | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (exchange(fd, WATCH_RING) != WATCH_RING ||
	    setup(fd, &p, 0, 64))
		ret = -EPROTO;
	for (int i = 0; !ret && i < n; i++) {
		struct ummunotify_watch w = watch_arg(buf + i * step, ps,
						      1 + i, 0);

		ret = uioctl(fd, UMMUNOTIFY_WATCH, &w);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* In a child as UID: N more watches in a new file; 0 or -errno. */
static int watches_as(uid_t uid, char *buf, int n)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		return -errno;
	if (!pid) {
		if (become(uid))
			_exit(100);
		fd = file_with_watches(buf, n, 0);
		_exit(fd >= 0 ? 0 : fd == -ENOSPC ? 1 : 101);
	}
	switch (wait_child(pid)) {
	case 0:
		return 0;
	case 1:
		return -ENOSPC;
	default:
		return -EPROTO;
	}
}

/*
 * What a file's fdinfo and the module's totals in sysfs show tells when
 * watched memory changed.  A process of another user the descriptor went
 * to sees none of the file's counts, nor its user's, nor the totals; the
 * opener's user and root see them all.  Before the fix every user saw
 * every one.
 */
#define SYS_EVENTS	"/sys/class/misc/ummunotify/events"

TEST_F(bare, another_user_holding_the_file_sees_none_of_its_counts)
{
	char *buf = map_guarded(_metadata, 1);
	int ready[2], go[2], sock[2], fd;
	pid_t opener, other;
	char text[32], byte;

	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM, 0, sock));
	opener = fork();
	ASSERT_LE(0, opener);
	if (!opener) {
		if (become(TEST_UID))
			_exit(10);
		fd = file_with_watches(buf, 1, 0);
		if (fd < 0 || fdinfo(fd, "regions") != 1 ||
		    fdinfo(fd, "user_watches") < 1)
			_exit(11);
		if (send_fd(sock[0], fd) ||
		    write(ready[1], &fd, sizeof(fd)) != sizeof(fd) ||
		    read(go[0], &byte, 1) != 1)
			_exit(12);
		_exit(0);
	}
	close(ready[1]);
	ASSERT_EQ((ssize_t)sizeof(fd), read(ready[0], &fd, sizeof(fd)))
		TH_LOG("the opener exited with %d", wait_child(opener));
	EXPECT_EQ(1, fdinfo_of(opener, fd, "regions"));
	EXPECT_EQ(0, read_file(SYS_EVENTS, text, sizeof(text)));

	other = fork();
	ASSERT_LE(0, other);
	if (!other) {
		if (become(OTHER_UID))
			_exit(20);
		fd = recv_fd(sock[1]);
		if (fd < 0)
			_exit(21);
		/* The VFS's lines, not the module's. */
		if (fdinfo(fd, "flags") < 0)
			_exit(22);
		if (fdinfo(fd, "regions") != -1 ||
		    fdinfo(fd, "events") != -1 ||
		    fdinfo(fd, "user_watches") != -1)
			_exit(23);
		if (!read_file(SYS_EVENTS, text, sizeof(text)) ||
		    errno != EACCES)
			_exit(24);
		_exit(0);
	}
	EXPECT_EQ(0, wait_child(other));
	ASSERT_EQ(1, write(go[1], "g", 1));
	EXPECT_EQ(0, wait_child(opener));
	close(ready[0]);
	close(go[0]);
	close(go[1]);
	close(sock[0]);
	close(sock[1]);
}

TEST_F(user_limits, max_user_watches_bounds_the_files_of_one_user_in_all_processes)
{
	char *buf = map_guarded(_metadata, 1);
	int go[2], done[2], status;
	char byte;
	pid_t pid;

	ASSERT_EQ(0, set_param("max_user_watches", USER_WATCHES));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Two files of TEST_UID: 5 watches, then 3, then no more. */
		int a, b, c;

		if (become(TEST_UID))
			_exit(10);
		a = file_with_watches(buf, 5, 0);
		b = file_with_watches(buf, 3, 0);
		if (a < 0 || b < 0)
			_exit(11);
		c = file_with_watches(buf, 1, 0);
		if (c != -ENOSPC)
			_exit(12);
		if (fdinfo(a, "user_watches") != USER_WATCHES)
			_exit(13);
		if (write(done[1], "r", 1) != 1 || read(go[0], &byte, 1) != 1)
			_exit(14);
		/* Five watches given back: five more fit. */
		close(a);
		if (write(done[1], "c", 1) != 1 || read(go[0], &byte, 1) != 1)
			_exit(15);
		_exit(0);
	}
	/* A child that gives up ends the test at once, not at its timeout. */
	close(done[1]);
	close(go[0]);
	ASSERT_EQ(1, read(done[0], &byte, 1))
		TH_LOG("the child exited with %d", wait_child(pid));
	/* Another process of the same user: nothing left. */
	EXPECT_EQ(-ENOSPC, watches_as(TEST_UID, buf, 1));
	/* Another user has its own budget. */
	EXPECT_EQ(0, watches_as(OTHER_UID, buf, USER_WATCHES));
	/* Root raises the limit at run time. */
	ASSERT_EQ(0, set_param("max_user_watches", USER_WATCHES + 2));
	EXPECT_EQ(0, watches_as(TEST_UID, buf, 2));
	EXPECT_EQ(-ENOSPC, watches_as(TEST_UID, buf, 3));
	ASSERT_EQ(0, set_param("max_user_watches", USER_WATCHES));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(1, read(done[0], &byte, 1));
	EXPECT_EQ(0, watches_as(TEST_UID, buf, 5));
	EXPECT_EQ(-ENOSPC, watches_as(TEST_UID, buf, 6));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);
}

/*
 * The ids a user namespace maps are its creator's to hand out: a process
 * in one, whatever its uid there and whatever kernel uid that maps to, is
 * charged to the user who made the namespace.  Here root maps the
 * namespace TEST_UID made onto 1000 uids of its own; uid 0 in it is kernel
 * uid 100000, which without that rule had a budget of its own.
 */
TEST_F(user_limits, a_user_namespace_shares_its_creators_budget)
{
	char *buf = map_guarded(_metadata, 1);
	int ready[2], hold[2], go[2], status;
	char byte, path[64];
	pid_t holder, pid;

	ASSERT_EQ(0, set_param("max_user_watches", USER_WATCHES));
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(hold));
	ASSERT_EQ(0, pipe(go));
	/* TEST_UID's budget, all of it, held by one process. */
	holder = fork();
	ASSERT_LE(0, holder);
	if (!holder) {
		if (become(TEST_UID) ||
		    file_with_watches(buf, USER_WATCHES, 0) < 0 ||
		    write(ready[1], "h", 1) != 1)
			_exit(10);
		_exit(read(hold[0], &byte, 1) == 1 ? 0 : 11);
	}
	ASSERT_EQ(1, read(ready[0], &byte, 1));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int fd;

		if (become(TEST_UID) || unshare(CLONE_NEWUSER) ||
		    write(ready[1], "n", 1) != 1 || read(go[0], &byte, 1) != 1)
			_exit(20);
		/* Root in the namespace: kernel uid 100000. */
		if (setresgid(0, 0, 0) || setresuid(0, 0, 0))
			_exit(21);
		fd = file_with_watches(buf, 1, 0);
		_exit(fd == -ENOSPC ? 0 : fd >= 0 ? 22 : 23);
	}
	ASSERT_EQ(1, read(ready[0], &byte, 1));
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	ASSERT_EQ(0, write_file(path, "0 100000 1000\n"));
	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	ASSERT_EQ(0, write_file(path, "deny\n"));
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	ASSERT_EQ(0, write_file(path, "0 100000 1000\n"));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("namespace child status %#x", status);
	ASSERT_EQ(1, write(hold[1], "g", 1));
	EXPECT_EQ(0, wait_child(holder));
}

/*
 * A user namespace root makes, as a container runtime does ("unshare -U"
 * as root), has budgets of its own: per user of the namespace, and for
 * all of them together (max_ns_pages).  Its tenants, up to their limits,
 * make no open() fail for root or for another such namespace, even one
 * whose uid 0 is root's ("unshare -U -r").  Before the fix they were
 * charged to root, the namespace's creator, and spent root's budget.
 */
#define NS_FILES	4	/* per user, in pages: 3 each */

/* Files opened until one fails; the last error in *ERR. */
static int open_until_refused(int *err)
{
	int n = 0;

	while (n < 64 && open(DEVICE, O_RDONLY) >= 0)
		n++;
	*err = errno;
	return n;
}

/*
 * A child of root's in a new user namespace, mapping its uids 0..999 from
 * BASE (0: just its uid 0 to root), as uid 0 there; it runs FN, reports
 * what it returns on REPORT, and holds its files until GO closes.
 */
struct tenant {
	int report[2], go[2];
	pid_t pid;
};

static int in_namespace(struct tenant *t, unsigned int base,
			void (*fn)(struct tenant *t))
{
	char path[64], map[32];
	int ready[2];
	char byte;

	if (pipe(ready) || pipe(t->report) || pipe(t->go))
		return -1;
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (!t->pid) {
		close(ready[0]);
		close(t->go[1]);
		if (unshare(CLONE_NEWUSER) || write(ready[1], "n", 1) != 1 ||
		    read(t->go[0], &byte, 1) != 1 ||
		    setresgid(0, 0, 0) || setresuid(0, 0, 0))
			_exit(1);
		fn(t);
		/* Holds its files until the test closes GO. */
		while (read(t->go[0], &byte, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &byte, 1) != 1)
		return -1;
	close(ready[0]);
	snprintf(map, sizeof(map), "0 %u %u\n", base, base ? 1000 : 1);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", t->pid);
	if (write_file(path, map))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/setgroups", t->pid);
	if (write_file(path, "deny\n"))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", t->pid);
	if (write_file(path, map) || write(t->go[1], "g", 1) != 1)
		return -1;
	return 0;
}

/* In the namespace: what uid 0 opens, then uid 1 meanwhile. */
static void two_users_open(struct tenant *t)
{
	int n[4];
	pid_t pid;

	n[0] = open_until_refused(&n[1]);
	pid = fork();
	if (!pid) {
		if (setresuid(1, 1, 1))
			_exit(1);
		n[2] = open_until_refused(&n[3]);
		_exit(write(t->report[1], &n[2], 2 * sizeof(int)) !=
		      2 * sizeof(int));
	}
	/* uid 1's, then uid 0's: the files of uid 1 go at its exit. */
	waitpid(pid, NULL, 0);
	if (write(t->report[1], n, 2 * sizeof(int)) != 2 * sizeof(int))
		_exit(2);
}

static void one_open(struct tenant *t)
{
	int n[2];

	n[0] = open(DEVICE, O_RDONLY) >= 0;
	n[1] = n[0] ? 0 : errno;
	if (write(t->report[1], n, sizeof(n)) != sizeof(n))
		_exit(2);
}

static void end_tenant(struct __test_metadata *_metadata, struct tenant *t)
{
	close(t->go[1]);
	EXPECT_EQ(0, wait_child(t->pid));
	close(t->go[0]);
	close(t->report[0]);
	close(t->report[1]);
}

TEST_F(user_limits, a_container_spends_neither_roots_budget_nor_another_containers)
{
	struct tenant a, b;
	int uid1[2], uid0[2], got[2], fd;

	ASSERT_EQ(0, set_param("max_user_pages", 3 * NS_FILES));
	/* uid 0 and uid 1 of one namespace: NS_FILES each, 6 together. */
	EXPECT_EQ(0, set_param("max_ns_pages", 3 * 6));
	ASSERT_EQ(0, in_namespace(&a, 200000, two_users_open));
	ASSERT_EQ((ssize_t)sizeof(uid1), read(a.report[0], uid1, sizeof(uid1)));
	ASSERT_EQ((ssize_t)sizeof(uid0), read(a.report[0], uid0, sizeof(uid0)));
	TH_LOG("in the namespace uid 0 opened %d files, then uid 1 %d",
	       uid0[0], uid1[0]);
	EXPECT_EQ(NS_FILES, uid0[0]);
	EXPECT_EQ(ENOSPC, uid0[1]);
	EXPECT_EQ(6 - NS_FILES, uid1[0]);
	EXPECT_EQ(ENOSPC, uid1[1]);

	/* Meanwhile root opens, and so does another namespace's uid 0. */
	fd = open(DEVICE, O_RDONLY);
	EXPECT_LE(0, fd) TH_LOG("root's open(): %s", strerror(errno));
	ASSERT_EQ(0, in_namespace(&b, 0, one_open));
	ASSERT_EQ((ssize_t)sizeof(got), read(b.report[0], got, sizeof(got)));
	EXPECT_EQ(1, got[0]) TH_LOG("the other namespace's open(): %s",
				    strerror(got[1]));
	end_tenant(_metadata, &b);
	end_tenant(_metadata, &a);
	if (fd >= 0)
		close(fd);
}

/*
 * UMMUNOTIFY_NS_LIMITS: an admin bounds one container apart from the
 * others (max_ns_pages is every container's), before it opens anything;
 * its root reads the bound and cannot raise it.
 */
static int ns_limits(int fd, pid_t pid, __u32 flags, __u64 max_watches,
		     __u64 max_pages, struct ummunotify_ns_limits *got)
{
	struct ummunotify_ns_limits l = {
		.pid = pid,
		.flags = flags,
		.max_watches = max_watches,
		.max_pages = max_pages,
	};

	if (ioctl(fd, UMMUNOTIFY_NS_LIMITS, &l))
		return -errno;
	if (got)
		*got = l;
	return 0;
}

/*
 * In the namespace, told by a byte on GO: 'o' closes the files it holds,
 * opens until refused and reports how many and why; 'c' closes them and
 * reports 0; 'n' makes a child in a namespace of its own and reports its
 * pid.
 */
static void open_when_told(struct tenant *t)
{
	int fds[64], n[2], nfds = 0, ready[2];
	char byte;
	pid_t pid;

	while (read(t->go[0], &byte, 1) == 1) {
		while (nfds)
			close(fds[--nfds]);
		n[0] = n[1] = 0;
		if (byte == 'o') {
			while (nfds < 64 &&
			       (fds[nfds] = open(DEVICE, O_RDONLY)) >= 0)
				nfds++;
			n[0] = nfds;
			n[1] = errno;
		} else if (byte == 'n') {
			if (pipe(ready))
				_exit(4);
			pid = fork();
			if (!pid) {
				if (prctl(PR_SET_PDEATHSIG, SIGKILL) ||
				    unshare(CLONE_NEWUSER) ||
				    write(ready[1], "n", 1) != 1)
					_exit(1);
				pause();
				_exit(0);
			}
			if (pid < 0 || read(ready[0], &byte, 1) != 1)
				_exit(5);
			n[0] = pid;
		}
		if (write(t->report[1], n, sizeof(n)) != sizeof(n))
			_exit(2);
	}
}

/* Tell tenant T to do WHAT (see open_when_told()); what it reports. */
static int tell(struct tenant *t, char what, int *errnum)
{
	int n[2] = { -1, 0 };

	if (write(t->go[1], &what, 1) != 1 ||
	    read(t->report[0], n, sizeof(n)) != sizeof(n))
		return -1;
	if (errnum)
		*errnum = n[1];
	return n[0];
}

/* Another container's tenant, which root_tries_to_raise_its_limit() reads. */
static pid_t other_container;

/*
 * Its root: SET's error, GET's, the max_pages GET read, and GET's errors
 * for another container and for a process in none (pid 1).
 */
static void root_tries_to_raise_its_limit(struct tenant *t)
{
	struct ummunotify_ns_limits got = { 0 };
	int fd = open(DEVICE, O_RDONLY);
	long long n[5];

	n[0] = ns_limits(fd, getpid(), UMMUNOTIFY_NS_LIMITS_SET, 0, 1 << 20,
			 NULL);
	n[1] = ns_limits(fd, getpid(), 0, 0, 0, &got);
	n[2] = got.max_pages;
	n[3] = ns_limits(fd, other_container, 0, 0, 0, NULL);
	n[4] = ns_limits(fd, 1, 0, 0, 0, NULL);
	if (write(t->report[1], n, sizeof(n)) != sizeof(n))
		_exit(2);
}

TEST_F(user_limits, an_admin_bounds_one_container_and_no_other)
{
	struct ummunotify_ns_limits got;
	struct tenant a, b;
	int err, fd;
	pid_t nested;

	ASSERT_EQ(0, set_param("max_user_pages", 3 * NS_FILES));
	ASSERT_EQ(0, set_param("max_ns_pages", 3 * NS_FILES));
	ASSERT_EQ(0, set_param("max_ns_watches", 1000));
	fd = open(DEVICE, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, in_namespace(&a, 200000, open_when_told));
	ASSERT_EQ(0, in_namespace(&b, 300000, open_when_told));

	/* Two files' worth for a, which holds none yet. */
	ASSERT_EQ(0, ns_limits(fd, a.pid, UMMUNOTIFY_NS_LIMITS_SET, 0, 3 * 2,
			       &got));
	EXPECT_EQ(1000ULL, got.max_watches);
	EXPECT_EQ(3ULL * 2, got.max_pages);
	EXPECT_EQ(0ULL, got.watches);
	EXPECT_EQ(0ULL, got.pages);
	EXPECT_EQ(1, sysfs("ns_limits"));
	/* A call between, which looks for limits to drop: not a's. */
	ASSERT_EQ(0, ns_limits(fd, b.pid, 0, 0, 0, &got));
	EXPECT_EQ(3ULL * NS_FILES, got.max_pages);
	EXPECT_EQ(2, tell(&a, 'o', &err));
	EXPECT_EQ(ENOSPC, err);
	EXPECT_EQ(NS_FILES, tell(&b, 'o', &err));
	EXPECT_EQ(ENOSPC, err);
	ASSERT_EQ(0, ns_limits(fd, a.pid, 0, 0, 0, &got));
	EXPECT_EQ(3ULL * 2, got.max_pages);
	EXPECT_EQ(3ULL * 2, got.pages);
	ASSERT_EQ(0, ns_limits(fd, b.pid, 0, 0, 0, &got));
	EXPECT_EQ(3ULL * NS_FILES, got.max_pages);
	EXPECT_EQ(3ULL * NS_FILES, got.pages);

	/* a's limits outlive its files. */
	EXPECT_EQ(0, tell(&a, 'c', NULL));
	ASSERT_EQ(0, ns_limits(fd, b.pid, 0, 0, 0, NULL));
	EXPECT_EQ(2, tell(&a, 'o', &err));

	/* A namespace made in a is a's, limits and use. */
	nested = tell(&a, 'n', NULL);
	ASSERT_LT(0, nested);
	ASSERT_EQ(0, ns_limits(fd, nested, 0, 0, 0, &got));
	EXPECT_EQ(3ULL * 2, got.max_pages);
	EXPECT_EQ(0ULL, got.pages);

	/* Below what b holds: its next open is refused, nothing is taken. */
	ASSERT_EQ(0, ns_limits(fd, b.pid, UMMUNOTIFY_NS_LIMITS_SET, 0, 3,
			       &got));
	EXPECT_EQ(3ULL, got.max_pages);
	EXPECT_EQ(3ULL * NS_FILES, got.pages);
	EXPECT_EQ(1, tell(&b, 'o', &err));
	EXPECT_EQ(ENOSPC, err);

	/* Zero: the parameters', as when the module loaded. */
	ASSERT_EQ(0, ns_limits(fd, a.pid, UMMUNOTIFY_NS_LIMITS_SET, 0, 0,
			       &got));
	EXPECT_EQ(3ULL * NS_FILES, got.max_pages);
	EXPECT_EQ(0ULL, got.pages);
	EXPECT_EQ(1, sysfs("ns_limits"));
	ASSERT_EQ(0, ns_limits(fd, b.pid, UMMUNOTIFY_NS_LIMITS_SET, 0, 0,
			       NULL));
	EXPECT_EQ(0, sysfs("ns_limits"));
	end_tenant(_metadata, &b);
	end_tenant(_metadata, &a);
	close(fd);
}

TEST_F(user_limits, only_an_admin_sets_a_containers_limits)
{
	struct ummunotify_ns_limits got, *ro, l = { .flags = 2 };
	int ready[2], hold[2], fd, status;
	struct tenant a, b;
	long long n[5];
	pid_t pid, gone;
	char byte;

	fd = open(DEVICE, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, in_namespace(&b, 300000, one_open));
	other_container = b.pid;
	ASSERT_EQ(0, in_namespace(&a, 200000, root_tries_to_raise_its_limit));
	ASSERT_EQ((ssize_t)sizeof(n), read(a.report[0], n, sizeof(n)));
	EXPECT_EQ(-EPERM, n[0]);
	EXPECT_EQ(0, n[1]);
	EXPECT_LT(0, n[2]);
	EXPECT_NE(1 << 20, n[2]);
	/* Neither another container's budget, nor who is in one. */
	EXPECT_EQ(-EPERM, n[3]);
	EXPECT_EQ(-EPERM, n[4]);

	/* Another user of the initial namespace may neither set nor read. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int ufd = open(DEVICE, O_RDONLY);

		if (become(TEST_UID))
			_exit(10);
		if (ns_limits(ufd, a.pid, UMMUNOTIFY_NS_LIMITS_SET, 1, 1,
			      NULL) != -EPERM)
			_exit(11);
		if (ns_limits(ufd, getppid(), 0, 0, 0, NULL) != -EPERM)
			_exit(12);
		_exit(ns_limits(ufd, a.pid, 0, 0, 0, NULL) == -EPERM ? 0 : 13);
	}
	EXPECT_EQ(0, wait_child(pid));

	/* A user's own namespace is charged to the user: no container. */
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(hold));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (become(TEST_UID) || unshare(CLONE_NEWUSER) ||
		    write(ready[1], "n", 1) != 1)
			_exit(20);
		_exit(read(hold[0], &byte, 1) == 1 ? 0 : 21);
	}
	ASSERT_EQ(1, read(ready[0], &byte, 1));
	EXPECT_EQ(-EINVAL, ns_limits(fd, pid, UMMUNOTIFY_NS_LIMITS_SET, 1, 1,
				     NULL));
	ASSERT_EQ(1, write(hold[1], "g", 1));
	EXPECT_EQ(0, wait_child(pid));

	/* A pid no process has any more. */
	gone = fork();
	ASSERT_LE(0, gone);
	if (!gone)
		_exit(0);
	ASSERT_EQ(gone, waitpid(gone, &status, 0));
	EXPECT_EQ(-ESRCH, ns_limits(fd, gone, 0, 0, 0, NULL));

	EXPECT_EQ(-EINVAL, ns_limits(fd, getpid(), 0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, ns_limits(fd, 0, 0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, ns_limits(fd, -1, 0, 0, 0, NULL));
	l.pid = a.pid;
	EXPECT_EQ(-1, ioctl(fd, UMMUNOTIFY_NS_LIMITS, &l));
	EXPECT_EQ(EINVAL, errno);
	l.flags = UMMUNOTIFY_NS_LIMITS_SET;
	l.max_pages = 1;
	l.reserved[1] = 1;
	EXPECT_EQ(-1, ioctl(fd, UMMUNOTIFY_NS_LIMITS, &l));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ioctl(fd, UMMUNOTIFY_NS_LIMITS, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	/* A read-only argument: refused before anything is set. */
	l.reserved[1] = 0;
	ro = mmap(NULL, getpagesize(), PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	*ro = l;
	ASSERT_EQ(0, mprotect(ro, getpagesize(), PROT_READ));
	EXPECT_EQ(-1, ioctl(fd, UMMUNOTIFY_NS_LIMITS, ro));
	EXPECT_EQ(EFAULT, errno);
	munmap(ro, getpagesize());

	/* None of it set anything. */
	EXPECT_EQ(0, sysfs("ns_limits"));
	ASSERT_EQ(0, ns_limits(fd, a.pid, 0, 0, 0, &got));
	EXPECT_EQ((__u64)n[2], got.max_pages);
	/* a holds b's pipes: a goes first. */
	end_tenant(_metadata, &a);
	end_tenant(_metadata, &b);
	close(fd);
}

/*
 * Limits hold their namespace while anything else does, and no longer: a
 * container gone, they go at the next call.  Its creds are freed after an
 * RCU grace period, so the test asks for a while.
 */
TEST_F(user_limits, a_containers_limits_go_with_it)
{
	struct ummunotify_ns_limits got;
	struct tenant a, b;
	int fd, tries;

	fd = open(DEVICE, O_RDONLY);
	ASSERT_LE(0, fd);
	/* b first: a tenant holds the pipes of those made before it. */
	ASSERT_EQ(0, in_namespace(&b, 300000, one_open));
	ASSERT_EQ(0, in_namespace(&a, 200000, one_open));
	ASSERT_EQ(0, ns_limits(fd, a.pid, UMMUNOTIFY_NS_LIMITS_SET, 7, 0,
			       NULL));
	ASSERT_EQ(0, ns_limits(fd, b.pid, UMMUNOTIFY_NS_LIMITS_SET, 7, 0,
			       NULL));
	EXPECT_EQ(2, sysfs("ns_limits"));
	end_tenant(_metadata, &a);
	/* RCU_LAZY, or rcu_nocbs=, may hold the creds' frees for 10 s. */
	for (tries = 0; tries < 750 && sysfs("ns_limits") != 1; tries++) {
		usleep(20000);
		ASSERT_EQ(0, ns_limits(fd, b.pid, 0, 0, 0, NULL));
	}
	EXPECT_EQ(1, sysfs("ns_limits"));
	/* b's, not a's, are left. */
	ASSERT_EQ(0, ns_limits(fd, b.pid, 0, 0, 0, &got));
	EXPECT_EQ(7ULL, got.max_watches);
	ASSERT_EQ(0, ns_limits(fd, b.pid, UMMUNOTIFY_NS_LIMITS_SET, 0, 0,
			       NULL));
	EXPECT_EQ(0, sysfs("ns_limits"));
	end_tenant(_metadata, &b);
	close(fd);
}

/*
 * The owner's exit gives its user's budget back before it is reaped, even
 * while its address space lives on in a process it shares it with
 * (CLONE_VM) that keeps it invalidating, as any other user of the address
 * space (khugepaged, a /proc reader) may for a moment.  The exit's close
 * tears down there and then; were it the release queue's, the next check
 * of the budget would find it spent.
 */
struct sharer {
	char *busy;
	int ack;	/* written once it has closed every other fd */
};

static int invalidate_for_ever(void *arg)
{
	struct sharer *s = arg;

	/* Its parent is the test's process, which reaps it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL))
		return 1;
	/* Its copies of the file and the test's pipes go first. */
	for (int fd = 0; fd < 1024; fd++)
		if (fd != s->ack)
			close(fd);
	if (write(s->ack, "", 1) != 1)
		return 1;
	close(s->ack);
	for (;;)
		madvise(s->busy, BUSY_LEN, MADV_FREE);
	return 0;
}

/*
 * In the test's child: N processes that share its address space and keep
 * S->busy invalidating, children of the test's process.  Once this returns
 * 0, they have closed their copies of its files: the child's are the last.
 */
#define MAX_SHARERS	4

static int share_and_invalidate(struct sharer *s, int n, pid_t *pids)
{
	static char stacks[MAX_SHARERS][64 << 10];
	int ack[2], i;
	char c;

	if (n > MAX_SHARERS || pipe(ack))
		return -1;
	s->ack = ack[1];
	for (i = 0; i < n; i++) {
		pids[i] = clone(invalidate_for_ever, stacks[i] + sizeof(stacks[i]),
				CLONE_VM | CLONE_PARENT | SIGCHLD, s);
		if (pids[i] < 0)
			return -1;
	}
	/* A sharer that died before its ack gives EOF, not a wait. */
	close(ack[1]);
	for (i = 0; i < n; i++)
		if (read(ack[0], &c, 1) != 1)
			return -1;
	close(ack[0]);
	return 0;
}

static void reap_sharers(struct __test_metadata *_metadata, pid_t *pids,
			 int n)
{
	for (int i = 0; i < n; i++) {
		EXPECT_EQ(0, kill(pids[i], SIGKILL));
		EXPECT_EQ(128 + SIGKILL, wait_child(pids[i]));
	}
}

TEST_F(user_limits, an_exiting_owner_gives_its_budget_back_at_once)
{
	char *buf = map_guarded(_metadata, 1);
	pid_t holder, sharer = 0;
	int ready[2];

	ASSERT_EQ(0, set_param("max_user_watches", USER_WATCHES));
	ASSERT_EQ(0, pipe(ready));
	holder = fork();
	ASSERT_LE(0, holder);
	if (!holder) {
		struct sharer s = { .busy = busy_map() };
		pid_t pid;

		if (s.busy == MAP_FAILED)
			_exit(10);
		if (become(TEST_UID))
			_exit(11);
		/* Watched where it invalidates: each removal waits. */
		if (file_with_watches(s.busy, USER_WATCHES, 0) < 0)
			_exit(12);
		if (share_and_invalidate(&s, 1, &pid) ||
		    write(ready[1], &pid, sizeof(pid)) != sizeof(pid))
			_exit(13);
		/* Let it get going; the file is ours alone. */
		usleep(100000);
		_exit(0);
	}
	close(ready[1]);
	ASSERT_EQ((ssize_t)sizeof(sharer),
		  read(ready[0], &sharer, sizeof(sharer)))
		TH_LOG("the child exited with %d", wait_child(holder));
	EXPECT_EQ(0, wait_child(holder));
	EXPECT_EQ(0, watches_as(TEST_UID, buf, USER_WATCHES));
	reap_sharers(_metadata, &sharer, 1);
	close(ready[0]);
}

/* Event @e is the refusals' report over [@start, @end). */
static bool is_refusal(const struct ummunotify_event *e, char *start,
		       char *end)
{
	return e->type == UMMUNOTIFY_EVENT_TYPE_INVAL &&
	       e->flags == UMMUNOTIFY_EVENT_FLAG_HINT &&
	       e->user_cookie_counter == 0 &&
	       e->hint_start == (uintptr_t)start &&
	       e->hint_end == (uintptr_t)end;
}

/*
 * Open MPI 1.5-2.0 ignores REGISTER's result: a refused registration is
 * reported changed, cookie 0, over the ranges refused since the last
 * read, after the other reports (zhpe stops at cookie 0) and before LAST.
 */
TEST_F(user_limits, max_user_watches_bounds_2010_registrations_too)
{
	char *buf = map_guarded(_metadata, 4);
	pid_t pid;

	ASSERT_EQ(0, set_param("max_user_watches", 2));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ummunotify_event ev[5];
		volatile __u64 *counter;
		int fd;

		if (become(TEST_UID))
			_exit(10);
		fd = open(DEVICE, O_RDONLY | O_NONBLOCK);
		counter = mmap(NULL, sizeof(*counter), PROT_READ, MAP_SHARED,
			       fd, 0);
		if (fd < 0 || counter == MAP_FAILED ||
		    register_region(fd, buf, ps, 1) ||
		    register_region(fd, buf, ps, 2))
			_exit(11);
		if (register_region(fd, buf + 2 * ps, ps, 3) != -ENOSPC ||
		    register_region(fd, buf + ps, 10, 4) != -ENOSPC ||
		    *counter != 2)
			_exit(12);
		/* Bad arguments are no refusal. */
		if (register_region(fd, buf + ps, 0, 5) != -EINVAL ||
		    *counter != 2)
			_exit(13);
		/* Two real reports, queued after the refusals. */
		if (madvise(buf, ps, MADV_DONTNEED) || *counter != 4)
			_exit(14);
		if (read(fd, ev, sizeof(ev)) != 4 * sizeof(ev[0]) ||
		    ev[0].type != UMMUNOTIFY_EVENT_TYPE_INVAL ||
		    ev[1].type != UMMUNOTIFY_EVENT_TYPE_INVAL ||
		    ev[0].user_cookie_counter + ev[1].user_cookie_counter != 3 ||
		    !is_refusal(&ev[2], buf + ps, buf + 3 * ps) ||
		    ev[3].type != UMMUNOTIFY_EVENT_TYPE_LAST ||
		    ev[3].user_cookie_counter != 4)
			_exit(15);
		/* Reported once; a later refusal has a report of its own. */
		if (read(fd, ev, sizeof(ev)) != -1 || errno != EAGAIN ||
		    register_region(fd, buf + 3 * ps, ps, 6) != -ENOSPC)
			_exit(16);
		if (read(fd, ev, sizeof(ev)) != 2 * sizeof(ev[0]) ||
		    !is_refusal(&ev[0], buf + 3 * ps, buf + 4 * ps) ||
		    ev[1].type != UMMUNOTIFY_EVENT_TYPE_LAST ||
		    ev[1].user_cookie_counter != 5)
			_exit(17);
		/* The two watches stand. */
		_exit(fdinfo(fd, "regions") == 2 ? 0 : 18);
	}
	EXPECT_EQ(0, wait_child(pid));
}

/*
 * A file whose first REGISTER was refused speaks the 2010 ABI: its
 * counter moved and the refusals' report waits, so it cannot become a
 * ring file; EXCHANGE and SETUP fail as after a registration.
 */
TEST_F(user_limits, a_refused_first_registration_keeps_the_2010_abi)
{
	char *buf = map_guarded(_metadata, 2);
	pid_t pid;

	ASSERT_EQ(0, set_param("max_user_watches", 1));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ummunotify_event ev[3];
		struct ummunotify_params p;
		int full, fd;

		if (become(TEST_UID))
			_exit(10);
		full = open(DEVICE, O_RDWR | O_NONBLOCK);
		fd = open(DEVICE, O_RDWR | O_NONBLOCK);
		if (full < 0 || fd < 0 || register_region(full, buf, ps, 1))
			_exit(11);
		if (register_region(fd, buf + ps, ps, 2) != -ENOSPC)
			_exit(12);
		if (exchange(fd, UMMUNOTIFY_FEATURE_WATCH) != -EINVAL ||
		    setup(fd, &p, 0, 0) != -EINVAL ||
		    fdinfo(fd, "features") != 0)
			_exit(13);
		if (read(fd, ev, sizeof(ev)) != 2 * sizeof(ev[0]) ||
		    !is_refusal(&ev[0], buf + ps, buf + 2 * ps) ||
		    ev[1].type != UMMUNOTIFY_EVENT_TYPE_LAST ||
		    ev[1].user_cookie_counter != 1)
			_exit(14);
		_exit(0);
	}
	EXPECT_EQ(0, wait_child(pid));
}

TEST_F(user_limits, max_user_pages_bounds_setup_and_open)
{
	pid_t pid;

	ASSERT_EQ(0, set_param("max_user_pages", 10));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ummunotify_params p;
		int a, b, c, d;

		if (become(TEST_UID))
			_exit(10);
		/* Three pages a file: 6 of 10. */
		a = open(DEVICE, O_RDWR);
		b = open(DEVICE, O_RDWR);
		if (a < 0 || b < 0 || exchange(a, WATCH_RING) != WATCH_RING)
			_exit(11);
		/* 4096 slots and a 4096-entry ring: 49 pages. */
		if (setup(a, &p, 0, 0) != -ENOSPC)
			_exit(12);
		/* A page of 512 slots, 20 of 2048 events, the head: 22. */
		if (setup(a, &p, 512, 2048) != -ENOSPC)
			_exit(13);
		/* Just the page of slots: 7 of 10. */
		if (exchange(b, UMMUNOTIFY_FEATURE_WATCH) !=
		    UMMUNOTIFY_FEATURE_WATCH || setup(b, &p, 512, 0))
			_exit(14);
		c = open(DEVICE, O_RDWR);
		if (c < 0 || fdinfo(c, "user_pages") != 10)
			_exit(15);
		if (open(DEVICE, O_RDWR) != -1 || errno != ENOSPC)
			_exit(16);
		/* b's four pages are back. */
		close(b);
		d = open(DEVICE, O_RDWR);
		if (d < 0 || fdinfo(c, "user_pages") != 9)
			_exit(17);
		/* The failed SETUPs left a as new: 3 pages fit in 10 - 3. */
		if (setup(a, &p, 512, 2) != -ENOSPC || close(c) || close(d) ||
		    setup(a, &p, 512, 2) || fdinfo(a, "user_pages") != 6)
			_exit(18);
		_exit(0);
	}
	EXPECT_EQ(0, wait_child(pid));
}

/*
 * WATCH waited for the invalidations already running in the address
 * space (mmu_interval_read_begin()), which in a busy process may be long,
 * and that once held up the file's read() behind it.  Since issue 22 it
 * waits for none: one running over the watch is reported to it at once.
 * Here one thread keeps the address space invalidating (see
 * busy_start()) while another WATCHes and UNREGISTERs its page again
 * and again: no WATCH may take long, and each watch still sees its page
 * cleared.  (A WATCH that fell between two madvise() calls did not wait
 * on the module before either, but in 200 rounds one always did.)
 */
#define BUSY_ROUNDS	200
/* A WATCH on the debug kernel takes microseconds; a wait, the madvise(). */
#define BUSY_WATCH_MS	500.0

TEST_F_TIMEOUT(owner, a_watch_in_a_busy_address_space_waits_for_no_invalidation,
	       120)
{
	struct ummunotify_watch w;
	struct timespec a, b;
	double ms, longest = 0;
	struct busy busy;
	int round;

	/* The address space's notifier is registered by the first watch. */
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	ASSERT_EQ(0, unwatch(self->u.fd, 1));
	busy_start(_metadata, &busy);
	for (round = 1; round <= BUSY_ROUNDS; round++) {
		w = watch_arg(self->buf, ps, 1000 + round, 0);
		clock_gettime(CLOCK_MONOTONIC, &a);
		ASSERT_EQ(0, uioctl(self->u.fd, UMMUNOTIFY_WATCH, &w));
		clock_gettime(CLOCK_MONOTONIC, &b);
		ms = (b.tv_sec - a.tv_sec) * 1e3 +
		     (b.tv_nsec - a.tv_nsec) / 1e6;
		if (ms > longest)
			longest = ms;
		clear_page(_metadata, self->buf);
		EXPECT_NE(w.generation, gen_of(&self->u, w.slot));
		ASSERT_EQ(0, unwatch(self->u.fd, 1000 + round));
	}
	busy_stop(_metadata, &busy);
	TH_LOG("%d WATCHes, the longest %.3f ms", BUSY_ROUNDS, longest);
	EXPECT_GT(BUSY_WATCH_MS, longest);
}

/*
 * The last close by another process (one the file was passed to, or the
 * kernel's delayed fput of a file left in flight) must not wait for the
 * owner's invalidations.  Removing a watch's notifier waits for a pause in
 * the invalidations that cross watches, which the owner, here threads
 * invalidating the watched memory without end, makes rare: one pause per
 * watch of many.  The child is passed the file and closes it last, the
 * owner's descriptor and mappings gone.
 */
#define CLOSE_WATCHES	4000
#define CLOSE_BUSY	4	/* threads: more than CPUs, so often preempted
				 * inside an invalidation */
/*
 * A close that waits for that pause can wait for as long as the threads
 * run (an exit did, more than 30 s in a 6.1 guest, in the execve() test
 * below, whose sharers are processes); one that does not took 1 to 19 ms
 * on the debug kernel, and once in CI more than 50 ms, the closer's
 * wake-up behind the busy threads on a guest run in one host thread.
 */
#define CLOSE_MS	1000.0

static double close_ms(int fd)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
}

/* The teardowns left to the driver's queue happen all the same. */
static void regions_come_back(struct __test_metadata *_metadata,
			      long long regions)
{
	for (int i = 0; i < 3000 && sysfs("regions") != regions; i++)
		usleep(10000);
	EXPECT_EQ(regions, sysfs("regions"));
}

TEST_F_TIMEOUT(owner, a_last_close_elsewhere_waits_for_no_invalidation, 300)
{
	const size_t step = BUSY_LEN / CLOSE_WATCHES / ps * ps;
	long long regions = sysfs("regions");
	struct busy busy[CLOSE_BUSY];
	double took = -1;
	int sv[2], i, got;
	char go = 1, *mem;
	pid_t pid;

	mem = mmap(NULL, BUSY_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, mem);
	ASSERT_EQ(0, madvise(mem, BUSY_LEN, MADV_NOHUGEPAGE));
	for (i = 0; i < CLOSE_WATCHES; i++) {
		mem[i * step] = 1;
		watch_range(_metadata, self->u.fd, mem + i * step, ps, 1 + i, 0);
	}
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Its copy from fork() goes first: the passed one is last. */
		close(self->u.fd);
		got = recv_fd(sv[1]);
		if (got < 0 || read(sv[1], &go, 1) != 1)
			_exit(2);
		took = close_ms(got);
		_exit(write(sv[1], &took, sizeof(took)) == sizeof(took) ? 0 : 3);
	}
	ASSERT_EQ(0, send_fd(sv[0], self->u.fd));
	ASSERT_EQ(0, munmap(self->u.area, self->u.p.mmap_size));
	ASSERT_EQ(0, munmap((char *)self->u.head - self->u.p.off.head, ps));
	close(self->u.fd);
	self->u.fd = -1;
	for (i = 0; i < CLOSE_BUSY; i++) {
		busy[i].p = mem;
		atomic_store(&busy[i].stop, false);
		ASSERT_EQ(0, pthread_create(&busy[i].thread, NULL,
					    busy_invalidating, &busy[i]));
	}
	ASSERT_EQ(1, write(sv[0], &go, 1));
	ASSERT_EQ((ssize_t)sizeof(took), read(sv[0], &took, sizeof(took)));
	for (i = 0; i < CLOSE_BUSY; i++) {
		atomic_store(&busy[i].stop, true);
		ASSERT_EQ(0, pthread_join(busy[i].thread, NULL));
	}
	ASSERT_EQ(0, munmap(mem, BUSY_LEN));
	EXPECT_EQ(0, wait_child(pid));
	TH_LOG("the last close of %d watches took %.0f ms", CLOSE_WATCHES,
	       took);
	EXPECT_GT(CLOSE_MS, took);
	regions_come_back(_metadata, regions);
	close(sv[0]);
	close(sv[1]);
}

/*
 * A teardown left to the driver's queue waited (before issue 22) as long
 * as the processes sharing the opener's address space kept invalidating
 * where its watches are, and TEST_UID's stalled teardowns, more than the
 * queue runs at once, were not to hold up OTHER_UID's.  Now a teardown
 * waits for no invalidation: with the sharers still invalidating, every
 * teardown of both users is over at once, their budgets back.
 */
#define STALLED_BEYOND	45
#define STALLED_WATCHES	2
/*
 * What an unbound workqueue with the default limit runs at once (256,
 * 1024 from 6.13), as the driver's is: writeback's, in sysfs.
 */
#define UNBOUND_ACTIVE	"/sys/devices/virtual/workqueue/writeback/max_active"

/* In the holder, as TEST_UID: a file to read the budget by, then N more. */
static int send_stalled_files(int sock, char *busy, int n)
{
	int fd = file_with_watches(busy, 0, 0);

	if (fd < 0 || send_fd(sock, fd))
		return -1;
	close(fd);
	for (int i = 0; i < n; i++) {
		/* A page of its own for each, under max_overlap. */
		fd = file_with_watches(busy + i * ps, STALLED_WATCHES,
				       BUSY_LEN / STALLED_WATCHES / ps * ps);
		if (fd < 0 || send_fd(sock, fd))
			return -1;
		close(fd);
	}
	return 0;
}

/* In the peer, as OTHER_UID: a file to read the budget by, one with watches. */
static int send_other_files(int sock, char *buf)
{
	int budget = file_with_watches(buf, 0, 0);
	int fd = file_with_watches(buf, USER_WATCHES, 0);

	if (budget < 0 || fd < 0 || send_fd(sock, budget) || send_fd(sock, fd))
		return -1;
	close(budget);
	close(fd);
	return 0;
}

TEST_F_TIMEOUT(user_limits, queued_teardowns_wait_for_no_invalidation, 300)
{
	long long regions = sysfs("regions"), stalled, left;
	int hold[2], other[2], budget, other_budget, other_fd, i, n, *files;
	char *buf = map_guarded(_metadata, 1), active[32];
	pid_t holder, peer, sharers[MAX_SHARERS];
	struct timespec start;
	struct rlimit nofile;
	char go = 1;

	ASSERT_EQ(0, read_file(UNBOUND_ACTIVE, active, sizeof(active)));
	n = atoi(active) + STALLED_BEYOND;
	files = calloc(n, sizeof(*files));
	ASSERT_NE(NULL, files);
	nofile = (struct rlimit){ n + 64, n + 64 };
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &nofile));
	ASSERT_EQ(0, set_param("max_user_watches", 1 << 20));
	ASSERT_EQ(0, set_param("max_user_pages", 1 << 20));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, hold));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, other));
	/* Both before the test has files: neither holds the other's. */
	peer = fork();
	ASSERT_LE(0, peer);
	if (!peer) {
		if (become(OTHER_UID) || send_other_files(other[1], buf))
			_exit(10);
		_exit(read(other[1], &go, 1) == 1 ? 0 : 11);
	}
	close(other[1]);
	holder = fork();
	ASSERT_LE(0, holder);
	if (!holder) {
		struct sharer s = { .busy = busy_map() };

		if (s.busy == MAP_FAILED || become(TEST_UID) ||
		    send_stalled_files(hold[1], s.busy, n) ||
		    share_and_invalidate(&s, MAX_SHARERS, sharers) ||
		    write(hold[1], sharers, sizeof(sharers)) !=
		    sizeof(sharers))
			_exit(10);
		/* Its address space lives, and its sharers, until told. */
		_exit(read(hold[1], &go, 1) == 1 ? 0 : 11);
	}
	close(hold[1]);
	budget = recv_fd(hold[0]);
	ASSERT_LE(0, budget);
	for (i = 0; i < n; i++) {
		files[i] = recv_fd(hold[0]);
		ASSERT_LE(0, files[i]) TH_LOG("file %d of TEST_UID", i);
	}
	ASSERT_EQ((ssize_t)sizeof(sharers),
		  read(hold[0], sharers, sizeof(sharers)))
		TH_LOG("the holder exited with %d", wait_child(holder));
	other_budget = recv_fd(other[0]);
	other_fd = recv_fd(other[0]);
	ASSERT_LE(0, other_budget);
	ASSERT_LE(0, other_fd);
	/* With what earlier tests' teardowns may not have given back. */
	stalled = fdinfo(budget, "user_watches");
	ASSERT_LE(n * STALLED_WATCHES, stalled);
	ASSERT_LE(USER_WATCHES, fdinfo(other_budget, "user_watches"));

	/* Last closes elsewhere, the owners alive: all to the queue. */
	for (i = 0; i < n; i++)
		close(files[i]);
	close(other_fd);
	clock_gettime(CLOCK_MONOTONIC, &start);
	/* Not near the hung task detector's 120 s, should it fail. */
	while ((fdinfo(other_budget, "user_watches") ||
		stalled - fdinfo(budget, "user_watches") <
		n * STALLED_WATCHES) && seconds_since(&start) < 30)
		usleep(1000);
	left = fdinfo(budget, "user_watches");
	TH_LOG("%d teardowns of TEST_UID and one of OTHER_UID over in %.3f s, %lld of TEST_UID's watches gone",
	       n, seconds_since(&start), stalled - left);
	EXPECT_EQ(0, fdinfo(other_budget, "user_watches"));
	EXPECT_LE(n * STALLED_WATCHES, stalled - left);

	/* The sharers stop. */
	reap_sharers(_metadata, sharers, MAX_SHARERS);
	ASSERT_EQ(1, write(hold[0], &go, 1));
	ASSERT_EQ(1, write(other[0], &go, 1));
	EXPECT_EQ(0, wait_child(holder));
	EXPECT_EQ(0, wait_child(peer));
	close(budget);
	close(other_budget);
	regions_come_back(_metadata, regions);
	close(hold[0]);
	close(other[0]);
	free(files);
}

/*
 * The program the owner execve()s owns nothing: neither its close of an
 * O_CLOEXEC file (when it first returns to user space) nor its exit must
 * wait for the old address space, which processes sharing it (CLONE_VM)
 * keep invalidating where the file's watches are.
 */
#define EXEC_SECONDS	10.0	/* 0.2 s on 6.1, 1 s on the debug kernel */

static void exec_leaves_the_file(struct __test_metadata *_metadata,
				 bool cloexec)
{
	long long regions = sysfs("regions");
	pid_t sharers[MAX_SHARERS];
	int ready[2], status = -1;
	struct timespec start;
	bool exited;
	double took;
	pid_t pid;

	ASSERT_EQ(0, access("/bin/true", X_OK));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct sharer s = { .busy = busy_map() };
		int fd;

		if (s.busy == MAP_FAILED)
			_exit(10);
		fd = file_with_watches(s.busy, CLOSE_WATCHES,
				       BUSY_LEN / CLOSE_WATCHES / ps * ps);
		if (fd < 0 || (!cloexec && fcntl(fd, F_SETFD, 0)))
			_exit(11);
		if (share_and_invalidate(&s, MAX_SHARERS, sharers) ||
		    write(ready[1], sharers, sizeof(sharers)) !=
		    sizeof(sharers))
			_exit(12);
		execl("/bin/true", "true", (char *)NULL);
		_exit(13);
	}
	close(ready[1]);
	ASSERT_EQ((ssize_t)sizeof(sharers),
		  read(ready[0], sharers, sizeof(sharers)))
		TH_LOG("the child exited with %d", wait_child(pid));
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!(exited = waitpid(pid, &status, WNOHANG) == pid) &&
	       seconds_since(&start) < EXEC_SECONDS)
		usleep(10000);
	took = seconds_since(&start);
	/* Their end ends a wait in the exit, if there is one. */
	reap_sharers(_metadata, sharers, MAX_SHARERS);
	if (!exited)
		EXPECT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the child's status: %#x", status);
	TH_LOG("execve() and exit took %.2f s", took);
	EXPECT_TRUE(exited)
		TH_LOG("not over after %.0f s", EXEC_SECONDS);
	regions_come_back(_metadata, regions);
	close(ready[0]);
}

TEST_F_TIMEOUT(bare, an_execve_after_open_does_not_wait_for_the_old_address_space,
	       300)
{
	exec_leaves_the_file(_metadata, false);
}

TEST_F_TIMEOUT(bare, an_execve_closing_the_file_does_not_wait_for_the_old_address_space,
	       300)
{
	exec_leaves_the_file(_metadata, true);
}

/*
 * SIGIO with F_SETSIG queues a siginfo, which kill_fasync() allocates, and
 * with F_SETOWN of a process group signals every process of it: never in
 * the notifier, which may run where neither is allowed, nor in interrupt
 * context.  The signal arrives all the same; a stack trace of its
 * generation must show a worker thread, not the notifier.
 */
static char *read_trace(struct __test_metadata *_metadata)
{
	static char trace[1 << 17];

	ASSERT_EQ(0, read_file(TRACING "trace", trace, sizeof(trace)));
	return trace;
}

TEST_F(owner, sigio_with_f_setsig_is_not_sent_from_the_notifier)
{
	const int sig = SIGRTMIN + 1;
	char filter[64], *trace, *from;
	siginfo_t info;
	sigset_t set;
	struct timespec timeout = { .tv_sec = 10 };

	if (access(TRACING "trace", F_OK))
		ASSERT_EQ(0, mount("tracefs", TRACING, "tracefs", 0, NULL));
	snprintf(filter, sizeof(filter), "stacktrace if sig == %d", sig);
	ASSERT_EQ(0, write_file(TRACING "trace", ""));
	ASSERT_EQ(0, write_file(TRACING "events/signal/signal_generate/trigger",
				filter));
	ASSERT_EQ(0, write_file(TRACING "events/signal/signal_generate/enable",
				"1"));

	sigemptyset(&set);
	sigaddset(&set, sig);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &set, NULL));
	ASSERT_EQ(0, fcntl(self->u.fd, F_SETOWN, getpid()));
	ASSERT_EQ(0, fcntl(self->u.fd, F_SETSIG, sig));
	ASSERT_EQ(0, fcntl(self->u.fd, F_SETFL, O_ASYNC));
	watch_range(_metadata, self->u.fd, self->buf, ps, 1, 0);
	clear_page(_metadata, self->buf);
	EXPECT_EQ(sig, sigtimedwait(&set, &info, &timeout));
	EXPECT_EQ(self->u.fd, info.si_fd);

	ASSERT_EQ(0, write_file(TRACING "events/signal/signal_generate/enable",
				"0"));
	snprintf(filter, sizeof(filter), "!stacktrace if sig == %d", sig);
	ASSERT_EQ(0, write_file(TRACING "events/signal/signal_generate/trigger",
				filter));
	/* From a worker thread: not the notifier, not an interrupt. */
	trace = read_trace(_metadata);
	from = strstr(trace, "=> kill_fasync");
	ASSERT_NE(NULL, from) TH_LOG("no stack trace of the signal:\n%s", trace);
	EXPECT_EQ(NULL, strstr(from, "umn_invalidate"))
		TH_LOG("sent from the notifier:\n%s", trace);
	EXPECT_NE(NULL, strstr(from, "worker_thread"))
		TH_LOG("not sent from a work item:\n%s", trace);
}

/*
 * Registering the whole-address-space notifier takes every lock of the
 * address space (mm_take_all_locks()), among them the i_mmap locks of the
 * files every process maps, and a global mutex: it happens once in the
 * life of an address space, however often a process opens a file, watches
 * everything and closes it.  A kprobe counts a fresh child's calls; the
 * module's reference count shows the notifier kept while the child lives
 * and gone after it (nothing else may use the module meanwhile: the
 * guest runs one test program at a time).
 */
#define TAKE_ALL_LOCKS	"umn_hardening/take_all_locks"
#define WATCH_ALL_LOOPS	20

static int watch_all_and_close(void)
{
	struct ummunotify_watch w = { .user_cookie = 1,
				      .flags = UMMUNOTIFY_WATCH_ALL };
	__u32 features = UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING;
	struct ummunotify_params p = { 0 };
	int fd = open(DEVICE, O_RDWR | O_CLOEXEC), ret = -1;

	if (fd >= 0 &&
	    ioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features) >= 0 &&
	    !ioctl(fd, UMMUNOTIFY_SETUP, &p) &&
	    !ioctl(fd, UMMUNOTIFY_WATCH, &w))
		ret = 0;
	if (fd >= 0)
		close(fd);
	return ret;
}

static long long module_refs(void)
{
	return read_number("/sys/module/ummunotify/refcnt");
}

TEST_F(bare, watch_all_in_a_loop_registers_the_notifier_once)
{
	int go[2], done[2], i, hits = 0;
	long long refs = module_refs();
	char c = 0, *trace, *line;
	pid_t pid;

	if (access(TRACING "trace", F_OK))
		ASSERT_EQ(0, mount("tracefs", TRACING, "tracefs", 0, NULL));
	if (append_file(TRACING "kprobe_events",
			"p:" TAKE_ALL_LOCKS " mm_take_all_locks"))
		SKIP(return, "no kprobe on mm_take_all_locks: %s",
		     strerror(errno));
	ASSERT_LE(0, refs);
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int ret = read(go[0], &c, 1) == 1 ? 0 : 1;

		for (i = 0; !ret && i < WATCH_ALL_LOOPS; i++)
			ret = watch_all_and_close() ? 2 : 0;
		if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			ret = 3;
		_exit(ret);
	}
	snprintf(trace = malloc(64), 64, "common_pid == %d", pid);
	ASSERT_EQ(0, write_file(TRACING "trace", ""));
	ASSERT_EQ(0, write_file(TRACING "events/" TAKE_ALL_LOCKS "/filter",
				trace));
	free(trace);
	ASSERT_EQ(0, write_file(TRACING "events/" TAKE_ALL_LOCKS "/enable",
				"1"));
	ASSERT_EQ(1, write(go[1], &c, 1));
	ASSERT_EQ(1, read(done[0], &c, 1));
	EXPECT_EQ(refs + 1, module_refs())
		TH_LOG("the notifier of a live address space holds the module");
	ASSERT_EQ(0, write_file(TRACING "events/" TAKE_ALL_LOCKS "/enable",
				"0"));
	trace = read_trace(_metadata);
	for (line = trace; (line = strstr(line, "take_all_locks:")); line++)
		hits++;
	EXPECT_EQ(1, hits) TH_LOG("mm_take_all_locks() %d times in %d loops",
				  hits, WATCH_ALL_LOOPS);
	ASSERT_EQ(1, write(go[1], &c, 1));
	EXPECT_EQ(0, wait_child(pid));
	/* Freed after SRCU, with the exited address space. */
	for (i = 0; i < 500 && module_refs() != refs; i++)
		usleep(10000);
	EXPECT_EQ(refs, module_refs());
	EXPECT_EQ(0, append_file(TRACING "kprobe_events", "-:" TAKE_ALL_LOCKS));
}

int main(int argc, char **argv)
{
	if (access(DEVICE, R_OK | W_OK))
		ksft_exit_skip("%s: %s (is the module loaded?)\n", DEVICE,
			       strerror(errno));
	return test_harness_run(argc, argv);
}
