// SPDX-License-Identifier: GPL-2.0
/*
 * A seeded fuzzer of /dev/ummunotify that checks what the documentation
 * promises while it goes (Documentation/userspace-api/ummunotify.rst).
 *
 * Each round runs in processes of its own (so that every file of the round
 * is closed when they exit), each with several threads.  Every thread draws
 * its operations from a generator seeded from the run's seed, the round,
 * the process and the thread: every ioctl with valid, boundary and garbage
 * arguments (wrapping ranges, TASK_SIZE edges, huge sizes, bad, read-only
 * and half-mapped argument pages), read() of every size, mmap, mprotect,
 * mremap and munmap of the device's mappings with every offset and
 * protection, fork, SCM_RIGHTS, closing a file while other threads use
 * it, and munmap, mmap(MAP_FIXED), mremap, madvise and transparent huge
 * page splits over watched memory.  It checks:
 *
 *  - each call's result against the documented errno (when several errors
 *    apply, any of them) and, on a file one thread owns, that a failed call
 *    changed nothing (fdinfo "regions");
 *  - no missed invalidation: when a thread's munmap, mmap(MAP_FIXED),
 *    mremap or madvise(DONTNEED, FREE) of memory it mapped returns, every
 *    watch of that thread overlapping it has a new generation word and
 *    the 2010 counter of its file moved by at least one per such watch;
 *  - the ring carries an event for each of them, unless the ring counted
 *    at least that many as dropped; the 2010 queue a report read after it;
 *  - generations are never 0 and never repeat within a file (a value is
 *    only ever seen for one cookie and slot);
 *  - events are well formed (cause, range within the watch, slot, flags);
 *  - a forked child or a process given the file over SCM_RIGHTS gets
 *    EPERM from every call and inherits none of its mappings;
 *  - /sys/class/misc/ummunotify/{files,regions} read 0 after every round.
 *
 * Beside the threads, each process has ZAPPERS threads (-z, default 1)
 * that loop madvise(MADV_DONTNEED) over pages of the threads' spans, so
 * that every watch, unwatch, RESIZE and close races invalidations of the
 * watched memory in other threads (issue 22): no call may wait for them
 * to stop, and what the threads check holds all the same, the zappers'
 * invalidations only adding events.  Not with -o, whose thread replays
 * alone.
 *
 * A failed check shows the thread's last operations.  A missed
 * invalidation shows too what tells a module bug from a model bug: the
 * watch's history, whether /proc/self/maps agrees with what the thread
 * believes it mapped, the watch's events still in the ring, and the
 * module's tracepoints, traced for the whole run, for the watch and for
 * the thread's last calls.
 *
 * Memory is changed only in a span of each thread's own, at fixed
 * addresses far below where mmap() places anything else, so that the
 * thread knows exactly what is mapped there and the same seed makes the
 * same calls: run with one process and one thread (-p 1 -j 1, or -o P.T to
 * run one thread of a round alone), a seed replays exactly.  Output is TAP,
 * one test point per round; every round line carries its seed.  Writes
 * its progress to /dev/kmsg, so that a kernel report can be matched with
 * the round that caused it; vm-run fails the run on any kernel report.
 *
 * Usage: fuzz [-s SEED] [-r ROUNDS | -t SECONDS] [-f FIRST] [-p PROCS]
 *             [-j THREADS] [-z ZAPPERS] [-n OPS] [-o P.T] [-w LIMIT] [-v]
 * A round whose processes have not ended after LIMIT seconds (600) is a
 * stall: the fuzzer shows their kernel stacks and stops.
 * The environment's UMMUNOTIFY_FUZZ_SEED and UMMUNOTIFY_FUZZ_SECONDS
 * stand for -s and -t.  Runs as root in a guest with the module loaded.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "calls.h"
#include "process.h"
#include "sysfile.h"

#define MAX_REGIONS	"/sys/module/ummunotify/parameters/max_regions"
#define MAX_OVERLAP	"/sys/module/ummunotify/parameters/max_overlap"
#define WATCH_RING	(UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING)
#define KNOWN_FEATURES	(WATCH_RING | UMMUNOTIFY_FEATURE_PRESSURE)
#define CAUSE(name)	(1U << UMMUNOTIFY_CAUSE_##name)
#define KNOWN_CAUSES	(CAUSE(UNMAP) | CAUSE(CLEAR) | CAUSE(PROTECTION) | \
			 CAUSE(SOFT_DIRTY) | CAUSE(MIGRATE) | CAUSE(RELEASE))
#define LEGACY_EVENT	sizeof(struct ummunotify_event)
#define RING_EVENT	sizeof(struct ummunotify_ring_event)

#define MAX_PROCS	8
#define MAX_THREADS	8
#define MAX_ZAPPERS	8
#define SHARED_FILES	3
#define MAX_FILES	(SHARED_FILES + MAX_THREADS)
/* Live watches of one thread, so that per-user limits stay far away. */
#define MAX_LIVE	48
/* WATCH_ALL watches of one file (the module's UMN_MAX_ALL). */
#define MAX_ALL		16
#define MAX_FAILURES	8
#define LOG_LINES	24

/*
 * Each thread's span: pages of small mappings, then, 2 MiB aligned, a
 * block for transparent huge pages.  Spans start far below mmap_base:
 * nothing mmap(NULL) returns lands there while the space above is free.
 */
#define ARENA_BASE	0x300000000000ULL
#define SPAN_BYTES	(8ULL << 20)
#define SMALL_PAGES	256
#define HUGE_OFFSET	(4ULL << 20)
#define HUGE_BYTES	(2ULL << 20)

static size_t ps;
static dev_t device_rdev;
static bool faults;		/* failslab and fail_page_alloc are there */
static uint64_t task_size;
static long long max_regions;
static long long max_overlap;
static bool verbose;
/* tracefs, when the module's events are on for this run (see trace_on()). */
static const char *tracing;

/* splitmix64: small, fast, and the same on every machine. */
struct rng {
	uint64_t s;
};

static uint64_t next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(struct rng *r, uint64_t n)
{
	return n ? next(r) % n : 0;
}

static bool chance(struct rng *r, unsigned int percent)
{
	return below(r, 100) < percent;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
	struct rng r = { a ^ (b * 0xd6e8feb86659fd93ULL) };

	return next(&r);
}

static uint64_t pick(struct rng *r, const uint64_t *v, size_t n)
{
	return v[below(r, n)];
}

#define PICK(r, ...) ({ const uint64_t v_[] = { __VA_ARGS__ }; \
			pick(r, v_, sizeof(v_) / sizeof(v_[0])); })

/* Errno sets: bit e for errno e; EOVERFLOW is past 63. */
static uint64_t E(int e)
{
	return e == EOVERFLOW ? 1ULL << 63 : 1ULL << e;
}

/*
 * A file of the round.  "dead" is set before the descriptor is replaced,
 * so that a thread that finds it clear after a call knows the call went to
 * this file; the mappings (and with them the file) stay until no thread
 * uses them, so watches keep working after close as they must.
 */
enum mode {
	M_LEGACY,	/* the 2010 ABI */
	M_GRANTED,	/* features granted, never set up: still 2010 */
	M_WATCH,	/* generation words, the 2010 queue */
	M_RING,		/* the ring, no slots */
	M_WATCH_RING,
	M_ALL,		/* and pressure advisories */
	NR_MODES
};

static const char *const mode_names[] = {
	"2010", "granted", "watch", "ring", "watch+ring", "all",
};

enum state { F_CLOSED, F_SETTING_UP, F_OPEN };

#define GEN_TABLE	(1U << 16)

struct gen_entry {
	uint64_t gen;
	uint64_t cookie;
};

struct ufile {
	pthread_mutex_t lock;		/* state, users, dead, epoch */
	enum state state;
	int users;
	bool dead;
	unsigned int epoch;
	int owner;			/* thread index, or -1: shared */

	int fd;
	enum mode mode;
	bool rdwr;
	__u32 features;
	bool set_up;
	struct ummunotify_params p;
	char *area;
	size_t area_len;
	__u64 *head;
	atomic_bool used;		/* a watch or read() was tried */
	atomic_int slotted;		/* watches holding a slot */
	atomic_int alls;		/* WATCH_ALL watches */

	pthread_mutex_t consume;	/* one consumer at a time */
	bool garbage_head;		/* we wrote one: see op_ring() */
	pthread_mutex_t gens_lock;
	struct gen_entry *gens;		/* GEN_TABLE entries */
	unsigned int nr_gens;
};

/* A watch or registration, by cookie (see cookie_of()). */
struct watch {
	int file;
	unsigned int epoch;
	bool live;
	bool has_slot;			/* the kernel gave it a slot */
	bool slot_known;		/* WATCH said which */
	bool all;			/* WATCH_ALL */
	__u32 slot;
	__u32 causes;
	__u32 causes_ever;		/* what events may have */
	uint64_t start, end;		/* now */
	uint64_t lo, hi;		/* every range it ever had */
	uint32_t hits;			/* invalidations the owner caused */
	unsigned long made_op, moved_op;	/* its WATCH, last RESIZE */
	unsigned long gone_op;		/* its UNREGISTER */
	uint64_t made_gen;		/* what WATCH returned */
	atomic_uint seen;		/* events consumed for it */
	uint64_t hit_seq;		/* before the owner's last hit */
	_Atomic uint64_t read_seq;	/* after the last read of a report */
};

struct thread {
	int proc, index;
	uint64_t seed;
	struct rng r;
	pthread_t id;
	char *span;
	unsigned char prot[SPAN_BYTES / 4096];	/* per page; 0: unmapped */
	struct watch *w;
	unsigned int nr_w, max_w, live;
	unsigned long ops, op;
	int failures;
	pid_t children[4];
	char *scratch;			/* RW page, then a PROT_NONE page */
	int make_it_fail;		/* /proc/thread-self/make-it-fail */
	char *ro;			/* a read-only page */
	/* What the thread did, so a passing round shows it tested something. */
	unsigned long watches, checked, events, forks, closes, races, faults;
	unsigned long nomem;		/* calls that failed for it */
	char log[LOG_LINES][160];
	unsigned int log_next;
	bool explained;			/* a missed invalidation was */
};

struct round {
	int proc, threads;
	uint64_t seed;
	struct ufile files[MAX_FILES];
	struct thread t[MAX_THREADS];
	int only;			/* -1, or the one thread that runs */
	_Atomic uint64_t seq;
	int devnull;
	atomic_int failures;
	atomic_bool zapping_done;	/* the threads have ended */
	atomic_ulong zaps;		/* madvise() calls of the zappers */
};

static struct round R;

/* One write per line, so that lines of several processes stay whole. */
static void say(const char *fmt, ...)
{
	char line[4200];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDOUT_FILENO, line, n) < 0)
		return;
}

static void kmsg(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int fd, n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, line, n > 0 ? n : 0) < 0)
		n = 0;
	close(fd);
}

/* The thread's recent operations, shown when a check fails. */
static void note(struct thread *t, const char *fmt, ...)
{
	char *line = t->log[t->log_next++ % LOG_LINES];
	va_list ap;
	int n;

	n = snprintf(line, 160, "p%d.t%d #%lu ", t->proc, t->index, t->op);
	va_start(ap, fmt);
	vsnprintf(line + n, 160 - n, fmt, ap);
	va_end(ap);
	if (verbose)
		fprintf(stderr, "%s\n", line);
}

static void fail(struct thread *t, const char *fmt, ...)
{
	char report[4096];
	unsigned int i;
	va_list ap;
	int n;

	n = snprintf(report, sizeof(report),
		     "# FAIL p%d.t%d (thread seed %#" PRIx64 ") op %lu: ",
		     t->proc, t->index, t->seed, t->op);
	va_start(ap, fmt);
	n += vsnprintf(report + n, sizeof(report) - n, fmt, ap);
	va_end(ap);
	/* The first failures show what led to them, in one write. */
	if (t->failures++ < 4 && n < (int)sizeof(report)) {
		n += snprintf(report + n, sizeof(report) - n,
			      "\n#   its last operations, oldest first:");
		for (i = t->failures > 1 ? LOG_LINES - 8 : 0; i < LOG_LINES;
		     i++) {
			const char *line = t->log[(t->log_next + i) % LOG_LINES];

			if (*line && n < (int)sizeof(report))
				n += snprintf(report + n, sizeof(report) - n,
					      "\n#     %s", line);
		}
	}
	say("%s", report);
	atomic_fetch_add(&R.failures, 1);
}

/* 0 or -errno for each call, as the oracle compares them. */
static long sysret(long ret)
{
	return ret < 0 ? -errno : ret;
}

/*
 * The oracle: RET must be one of the errnos in ERRS, or success if ERRS
 * is empty.  OK_TOO allows success besides the errors (a race decides).
 */
static bool expect(struct thread *t, const char *what, long ret,
		   uint64_t errs, bool ok_too)
{
	if (ret >= 0 && (!errs || ok_too))
		return true;
	if (ret < 0 && -ret < 64 && (errs & E(-ret)))
		return true;
	if (ret == -EOVERFLOW && (errs & E(EOVERFLOW)))
		return true;
	if (ret >= 0)
		fail(t, "%s succeeded, expected errno set %#" PRIx64, what,
		     errs);
	else
		fail(t, "%s: %s, expected %s (errno set %#" PRIx64 ")", what,
		     strerror(-ret), errs ? "an error" : "success", errs);
	return false;
}

static uint64_t load64(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
}

static uint64_t cookie_of(const struct thread *t, unsigned int i)
{
	return 0xc000000000000000ULL | (uint64_t)t->index << 40 | i;
}

/* The watch behind a cookie any thread of this process made, or NULL. */
static struct watch *watch_of(uint64_t cookie)
{
	unsigned int ti = cookie >> 40 & 0xff, i = cookie & 0xffffffffU;

	if ((cookie >> 48) != 0xc000 || ti >= (unsigned int)R.threads ||
	    i >= R.t[ti].nr_w)
		return NULL;
	return &R.t[ti].w[i];
}

/*
 * Cookies every thread uses at once on the shared files, so that WATCH,
 * RESIZE and UNREGISTER of one cookie race: no model follows them, only
 * the errnos they may get and the well-formedness of their events.
 */
#define SHARED_COOKIE	0xd000000000000000ULL
#define SHARED_COOKIES	16

static bool is_shared_cookie(uint64_t cookie)
{
	return (cookie & ~(uint64_t)(SHARED_COOKIES - 1)) == SHARED_COOKIE;
}

/* Page I of the thread's span. */
static char *page(struct thread *t, size_t i)
{
	return t->span + i * ps;
}

static size_t huge_first(void)
{
	return HUGE_OFFSET / ps;
}

static size_t huge_pages(void)
{
	return HUGE_BYTES / ps;
}

/*
 * Files.  A thread uses one for a call with use_file() (the descriptor is
 * the file's) or keeps it mapped with hold_file() (its mappings stay);
 * put_file() ends either.  The last user of a closed file unmaps it.
 */
static void finalize(struct ufile *f)
{
	if (f->area)
		munmap(f->area, f->area_len);
	if (f->head)
		munmap((char *)f->head - f->p.off.head, ps);
	close(f->fd);
	f->area = NULL;
	f->head = NULL;
	f->state = F_CLOSED;
}

static struct ufile *grab(int i, bool need_fd, bool setting_up_too)
{
	struct ufile *f = &R.files[i];
	bool ok;

	pthread_mutex_lock(&f->lock);
	ok = (f->state == F_OPEN ||
	      (setting_up_too && f->state == F_SETTING_UP)) &&
	     !(need_fd && f->dead);
	if (ok)
		f->users++;
	pthread_mutex_unlock(&f->lock);
	return ok ? f : NULL;
}

static struct ufile *use_file(int i)
{
	return grab(i, true, false);
}

static void put_file(struct ufile *f)
{
	pthread_mutex_lock(&f->lock);
	if (--f->users == 0 && f->dead)
		finalize(f);
	pthread_mutex_unlock(&f->lock);
}

/* The call just made went to F, not to what replaced its descriptor. */
static bool still_open(struct ufile *f)
{
	return !__atomic_load_n(&f->dead, __ATOMIC_SEQ_CST);
}

/*
 * The call that returned RET went to F, or changed nothing: /dev/null,
 * which replaces a closed file's descriptor, fails every ioctl, so a 0
 * came from F even if another thread closed it since.
 */
static bool reached(struct ufile *f, long ret)
{
	return still_open(f) || ret == 0;
}

static bool has_watch(const struct ufile *f)
{
	return f->set_up && (f->features & UMMUNOTIFY_FEATURE_WATCH);
}

static bool has_ring(const struct ufile *f)
{
	return f->set_up && (f->features & UMMUNOTIFY_FEATURE_RING);
}

static __u64 counter(const struct ufile *f)
{
	return load64(f->area + (f->set_up ? f->p.off.counter : 0));
}

static __u64 gen_word(const struct ufile *f, __u32 slot)
{
	return load64(f->area + f->p.off.generations + slot * 8);
}

static __u64 dropped(const struct ufile *f)
{
	return load64(f->area + f->p.off.dropped);
}

/*
 * Generations never repeat within a file: a value belongs to one cookie
 * (and so one slot) for ever.  Returns false, having said why, if GEN
 * was seen for another cookie, or is 0.
 */
static bool saw_gen(struct thread *t, struct ufile *f, uint64_t gen,
		    uint64_t cookie, const char *where)
{
	unsigned int h = (unsigned int)(mix(gen, 0) % GEN_TABLE);
	bool ok = true;

	if (!gen) {
		fail(t, "%s: generation 0 for cookie %#" PRIx64, where,
		     cookie);
		return false;
	}
	pthread_mutex_lock(&f->gens_lock);
	if (f->nr_gens < GEN_TABLE / 2) {
		while (f->gens[h].gen && f->gens[h].gen != gen)
			h = (h + 1) % GEN_TABLE;
		if (!f->gens[h].gen) {
			f->gens[h].gen = gen;
			f->gens[h].cookie = cookie;
			f->nr_gens++;
		} else if (f->gens[h].cookie != cookie) {
			ok = false;
		}
	}
	pthread_mutex_unlock(&f->gens_lock);
	if (!ok)
		fail(t, "%s: generation %#" PRIx64 " of cookie %#" PRIx64
		     " was handed out before to cookie %#" PRIx64, where, gen,
		     cookie, f->gens[h].cookie);
	return ok;
}

/*
 * Events.  A consumer checks each one against the watch its cookie names
 * and counts it, so that the end of the round can tell whether any
 * invalidation went unreported.
 */
static void check_ring_event(struct thread *t, struct ufile *f, int fi,
			     const struct ummunotify_ring_event *ev)
{
	struct watch *w;

	if (ev->flags)
		fail(t, "ring event with flags %#x", ev->flags);
	switch (ev->cause) {
	case UMMUNOTIFY_CAUSE_OVERFLOW:
		if (!ev->generation || ev->slot != UMMUNOTIFY_NO_SLOT)
			fail(t, "OVERFLOW event: %" PRIu64 " lost, slot %u",
			     (uint64_t)ev->generation, ev->slot);
		return;
	case UMMUNOTIFY_CAUSE_PRESSURE:
		if (!(f->features & UMMUNOTIFY_FEATURE_PRESSURE) ||
		    !ev->generation || ev->slot != UMMUNOTIFY_NO_SLOT)
			fail(t, "PRESSURE event on a %s file: %" PRIu64
			     " bytes, slot %u", mode_names[f->mode],
			     (uint64_t)ev->generation, ev->slot);
		return;
	case UMMUNOTIFY_CAUSE_RELEASE:
		fail(t, "RELEASE event while the address space lives");
		return;
	}
	/*
	 * A garbage head that happens to lie in [tail - entries, tail]
	 * hands out entries never written, or old ones again.
	 */
	if (f->garbage_head && !ev->user_cookie && !ev->start && !ev->end)
		return;
	if (is_shared_cookie(ev->user_cookie)) {
		if (ev->start >= ev->end || ev->end > task_size ||
		    ev->cause > UMMUNOTIFY_CAUSE_MIGRATE)
			fail(t, "event [%#llx, %#llx) cause %u for a shared "
			     "cookie", ev->start, ev->end, ev->cause);
		if (has_watch(f))
			saw_gen(t, f, ev->generation, ev->user_cookie,
				"ring event");
		return;
	}
	w = watch_of(ev->user_cookie);
	if (!w || w->file != fi || w->epoch != f->epoch) {
		fail(t, "ring event for cookie %#" PRIx64
		     ", which this file never had", (uint64_t)ev->user_cookie);
		return;
	}
	atomic_fetch_add(&w->seen, 1);
	if (ev->cause > UMMUNOTIFY_CAUSE_MIGRATE ||
	    !(w->causes_ever & (1U << ev->cause)))
		fail(t, "event of cause %u for cookie %#" PRIx64
		     " whose causes are %#x", ev->cause,
		     (uint64_t)ev->user_cookie, w->causes_ever);
	if (ev->start >= ev->end || ev->start < w->lo || ev->end > w->hi)
		fail(t, "event [%#" PRIx64 ", %#" PRIx64 ") outside watch %#"
		     PRIx64 " [%#" PRIx64 ", %#" PRIx64 ")",
		     (uint64_t)ev->start, (uint64_t)ev->end,
		     (uint64_t)ev->user_cookie, w->lo, w->hi);
	if (w->has_slot) {
		if (ev->slot == UMMUNOTIFY_NO_SLOT ||
		    (w->slot_known && ev->slot != w->slot))
			fail(t, "event for cookie %#" PRIx64 " names slot %u, "
			     "not %u: event generation %#" PRIx64 ", slot %u "
			     "reads %#" PRIx64 ", slot %u %#" PRIx64 "; the "
			     "watch made at op %lu (generation %#" PRIx64
			     "), last moved at op %lu, %s at op %lu",
			     (uint64_t)ev->user_cookie, ev->slot, w->slot,
			     (uint64_t)ev->generation, ev->slot,
			     ev->slot < f->p.slots ? gen_word(f, ev->slot) : 0,
			     w->slot, gen_word(f, w->slot), w->made_op,
			     w->made_gen, w->moved_op,
			     w->live ? "live" : "gone", w->gone_op);
		saw_gen(t, f, ev->generation, ev->user_cookie, "ring event");
	} else if (ev->slot != UMMUNOTIFY_NO_SLOT || ev->generation) {
		fail(t, "event of a watch without slot: slot %u, generation %"
		     PRIu64, ev->slot, (uint64_t)ev->generation);
	}
}

static void check_legacy_event(struct thread *t, struct ufile *f, int fi,
			       const struct ummunotify_event *ev,
			       __u64 counter_before, uint64_t seq)
{
	struct watch *w;
	uint64_t old;

	if (ev->type == UMMUNOTIFY_EVENT_TYPE_LAST) {
		if (ev->flags || ev->user_cookie_counter < counter_before ||
		    ev->user_cookie_counter > counter(f))
			fail(t, "LAST with flags %#x counter %" PRIu64
			     ", the counter went from %" PRIu64 " to %" PRIu64,
			     ev->flags, (uint64_t)ev->user_cookie_counter,
			     (uint64_t)counter_before, (uint64_t)counter(f));
		return;
	}
	if (ev->type == UMMUNOTIFY_EVENT_TYPE_INVAL &&
	    is_shared_cookie(ev->user_cookie_counter))
		return;
	/* Cookie 0: the report of REGISTERs refused for a limit or memory. */
	if (ev->type == UMMUNOTIFY_EVENT_TYPE_INVAL &&
	    !ev->user_cookie_counter) {
		if (ev->flags != UMMUNOTIFY_EVENT_FLAG_HINT ||
		    ev->hint_start >= ev->hint_end || ev->hint_end > task_size)
			fail(t, "refusal report flags %#x [%#" PRIx64 ", %#"
			     PRIx64 ")", ev->flags, (uint64_t)ev->hint_start,
			     (uint64_t)ev->hint_end);
		return;
	}
	w = watch_of(ev->user_cookie_counter);
	if (ev->type != UMMUNOTIFY_EVENT_TYPE_INVAL || !w || w->file != fi ||
	    w->epoch != f->epoch) {
		fail(t, "event of type %u for cookie %#" PRIx64
		     ", which this file never had", ev->type,
		     (uint64_t)ev->user_cookie_counter);
		return;
	}
	atomic_fetch_add(&w->seen, 1);
	old = atomic_load(&w->read_seq);
	while (old < seq && !atomic_compare_exchange_weak(&w->read_seq, &old,
							   seq))
		;
	if (ev->flags & ~UMMUNOTIFY_EVENT_FLAG_HINT ||
	    ev->hint_start >= ev->hint_end || ev->hint_start < w->lo ||
	    ev->hint_end > w->hi)
		fail(t, "report flags %#x [%#" PRIx64 ", %#" PRIx64
		     ") for cookie %#" PRIx64 " [%#" PRIx64 ", %#" PRIx64
		     "), ever within [%#" PRIx64 ", %#" PRIx64 ")%s", ev->flags,
		     (uint64_t)ev->hint_start, (uint64_t)ev->hint_end,
		     (uint64_t)ev->user_cookie_counter, w->start, w->end,
		     w->lo, w->hi, w->live ? "" : ", not live");
}

/*
 * read() of SIZE bytes into BUF (maybe a bad pointer), checked against
 * the documented results; events that arrive are checked and counted.
 * F's consume lock held.
 */
static long read_events(struct thread *t, struct ufile *f, int fi, void *buf,
			size_t size, bool bad_buf)
{
	size_t ev_size = has_ring(f) ? RING_EVENT : LEGACY_EVENT;
	__u64 before = counter(f), head = has_ring(f) && f->head ? *f->head : 0;
	uint64_t errs = 0;
	long ret, i;

	/*
	 * A read() the driver sees fixes the file's features; one into a
	 * buffer outside user space the VFS refuses first (access_ok()).
	 */
	if (size >= ev_size && (uintptr_t)buf < task_size &&
	    size <= task_size - (uintptr_t)buf)
		atomic_store(&f->used, true);
	ret = sysret(read(f->fd, buf, size));
	if (!still_open(f))
		return ret;
	/* The VFS refuses a buffer outside user space whatever the size. */
	if (size < ev_size)
		errs = E(EINVAL) | (bad_buf ? E(EFAULT) : 0);
	else if (bad_buf)
		errs = E(EFAULT) | E(EAGAIN);
	else
		errs = E(EAGAIN);
	note(t, "read file %d (%s) size %zu%s = %ld", fi, mode_names[f->mode], size,
	     bad_buf ? " bad buffer" : "", ret);
	if (!expect(t, "read()", ret, errs, !bad_buf && size >= ev_size))
		return ret;
	if (ret > 0 && (ret % ev_size || (size_t)ret > size)) {
		fail(t, "read() of %zu returned %ld: not whole events", size,
		     ret);
		return ret;
	}
	if (ret == -EFAULT && has_ring(f) && f->head && *f->head != head &&
	    !f->garbage_head)
		fail(t, "read() into a bad buffer moved the head");
	t->events += ret > 0 ? ret / ev_size : 0;
	for (i = 0; ret > 0 && i < ret / (long)ev_size; i++) {
		if (has_ring(f))
			check_ring_event(t, f, fi,
					 (struct ummunotify_ring_event *)buf + i);
		else
			check_legacy_event(t, f, fi,
					   (struct ummunotify_event *)buf + i,
					   before, atomic_fetch_add(&R.seq, 1) + 1);
	}
	return ret;
}

/* The documented consumer of the shared head.  Consume lock held. */
static void pop_ring(struct thread *t, struct ufile *f, int fi)
{
	const struct ummunotify_ring_event *events =
		(const void *)(f->area + f->p.off.events);
	__u32 mask = *(const __u32 *)(f->area + f->p.off.ring_mask);
	__u64 tail = load64(f->area + f->p.off.tail), head = *f->head;

	if (mask != f->p.ring_entries - 1)
		fail(t, "ring mask %#x for %u entries", mask,
		     f->p.ring_entries);
	if (tail - head > (__u64)mask + 1)
		return;		/* a garbage head: read() restarts it */
	for (; head != tail; head++, t->events++)
		check_ring_event(t, f, fi, &events[head & mask]);
	__atomic_store_n(f->head, head, __ATOMIC_RELEASE);
}

/* Take every event pending on F.  Consume lock held. */
static void drain(struct thread *t, struct ufile *f, int fi)
{
	static __thread union {
		struct ummunotify_ring_event ring[64];
		struct ummunotify_event legacy[64];
	} buf;
	int rounds = 0;

	if (has_ring(f) && f->head)
		pop_ring(t, f, fi);
	while (rounds++ < 10000 &&
	       read_events(t, f, fi, &buf, sizeof(buf), false) > 0)
		;
}

/*
 * Opening a file: the mode, EXCHANGE_FEATURES and SETUP, with wrong
 * arguments first (each must fail and change nothing), while other
 * threads may map the file already.
 */
static const __u32 mode_features[] = {
	[M_LEGACY] = 0,
	[M_GRANTED] = UMMUNOTIFY_FEATURE_WATCH,
	[M_WATCH] = UMMUNOTIFY_FEATURE_WATCH,
	[M_RING] = UMMUNOTIFY_FEATURE_RING,
	[M_WATCH_RING] = WATCH_RING,
	[M_ALL] = KNOWN_FEATURES,
};

/* ARG copied to the read-only page: a valid argument that cannot be written. */
static void *read_only(struct thread *t, const void *arg, size_t len)
{
	mprotect(t->ro, ps, PROT_READ | PROT_WRITE);
	memcpy(t->ro, arg, len);
	mprotect(t->ro, ps, PROT_READ);
	return t->ro;
}

/* ARG placed so that its end lies in the PROT_NONE page after scratch. */
static void *straddling(struct thread *t, const void *arg, size_t len)
{
	char *p = t->scratch + ps - len / 2;

	memcpy(p, arg, len / 2);
	return p;
}

/* Pointers no call may read from. */
static void *bad_pointer(struct thread *t)
{
	return (void *)(uintptr_t)PICK(&t->r, 0, 1, (uintptr_t)t->scratch + ps,
				       0xffff888000000000ULL,
				       0x8000000000000000ULL, task_size);
}

static bool setup_checks(struct thread *t, struct ufile *f)
{
	const struct ummunotify_params *p = &f->p;
	__u64 size = p->mmap_size;
	bool ok = true;

	if (has_watch(f) && (p->off.generations % 8 ||
			     p->off.generations + (__u64)p->slots * 8 > size ||
			     (p->slots * 8) % ps))
		ok = false;
	if (has_ring(f) && (p->off.events + (__u64)p->ring_entries *
			    RING_EVENT > size || !p->head_offset ||
			    p->head_offset % ps || p->off.head + 8 > ps))
		ok = false;
	if (!has_ring(f) && p->head_offset)
		ok = false;
	if (size % ps || p->off.counter + 8 > size || p->off.tail + 8 > size ||
	    p->off.dropped + 8 > size || p->off.ring_mask + 4 > size)
		ok = false;
	if (!ok)
		fail(t, "SETUP returned a layout that does not fit: size %#llx"
		     " slots %u at %#x, %u entries at %#x, head at %#llx+%#x",
		     size, p->slots, p->off.generations, p->ring_entries,
		     p->off.events, p->head_offset, p->off.head);
	return ok;
}

static void bad_setups(struct thread *t, struct ufile *f)
{
	struct ummunotify_params p;
	__u32 feat = f->features;
	int i, n = 1 + below(&t->r, 4);
	long ret;

	for (i = 0; i < n; i++) {
		uint64_t errs = E(EINVAL);

		memset(&p, 0, sizeof(p));
		switch (below(&t->r, 10)) {
		case 0:
			p.flags = 1U << below(&t->r, 32);
			break;
		case 1:
			p.reserved = next(&t->r) | 1;
			break;
		case 2:
			p.reserved2[below(&t->r, 4)] = next(&t->r) | 1;
			break;
		case 3:
			if (!(feat & UMMUNOTIFY_FEATURE_WATCH))
				p.slots = 1 + below(&t->r, 100);
			else
				p.slots = PICK(&t->r, max_regions + 1,
					       UINT32_MAX);
			if (!(feat & UMMUNOTIFY_FEATURE_WATCH) ||
			    p.slots > max_regions)
				break;
			continue;
		case 4:
			p.ring_entries = PICK(&t->r, 1, 3, 6, 1U << 21,
					      (1U << 20) + 1, UINT32_MAX,
					      1U << 31);
			if (!(feat & UMMUNOTIFY_FEATURE_RING))
				p.ring_entries = 2;
			break;
		case 5:
		case 6:
			/* Defect 1 of issue 8: a failing SETUP vs mmap. */
			errs = E(EFAULT);
			if (!read_only(t, &p, sizeof(p)))
				continue;
			ret = sysret(ioctl(f->fd, UMMUNOTIFY_SETUP, t->ro));
			note(t, "SETUP read-only params = %ld", ret);
			expect(t, "SETUP with read-only params", ret, errs,
			       false);
			continue;
		case 7:
			ret = sysret(ioctl(f->fd, UMMUNOTIFY_SETUP,
					   bad_pointer(t)));
			expect(t, "SETUP with a bad pointer", ret, E(EFAULT),
			       false);
			continue;
		case 8:
			ret = sysret(ioctl(f->fd, UMMUNOTIFY_SETUP,
					   straddling(t, &p, sizeof(p))));
			expect(t, "SETUP with a half-mapped argument", ret,
			       E(EFAULT), false);
			continue;
		default:
			if (feat & UMMUNOTIFY_FEATURE_RING)
				continue;
			p.ring_entries = 4;
			break;
		}
		ret = sysret(ioctl(f->fd, UMMUNOTIFY_SETUP, &p));
		note(t, "SETUP slots %u ring %u flags %#x = %ld", p.slots,
		     p.ring_entries, p.flags, ret);
		expect(t, "SETUP with bad values", ret, errs, false);
	}
}

static void open_file(struct thread *t, int fi)
{
	struct ufile *f = &R.files[fi];
	enum mode mode = below(&t->r, NR_MODES);
	__u32 want, granted, expect_granted;
	long ret;

	pthread_mutex_lock(&f->lock);
	if (f->state != F_CLOSED) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	f->rdwr = mode >= M_RING || chance(&t->r, 50);
	f->fd = open(DEVICE, (f->rdwr ? O_RDWR : O_RDONLY) | O_NONBLOCK |
		     O_CLOEXEC);
	if (f->fd < 0) {
		pthread_mutex_unlock(&f->lock);
		fail(t, "open " DEVICE ": %s", strerror(errno));
		return;
	}
	f->mode = mode;
	f->features = 0;
	f->set_up = false;
	f->area = NULL;
	f->head = NULL;
	f->dead = false;
	f->epoch++;
	f->users = 1;
	atomic_store(&f->used, false);
	atomic_store(&f->slotted, 0);
	atomic_store(&f->alls, 0);
	memset(&f->p, 0, sizeof(f->p));
	memset(f->gens, 0, GEN_TABLE * sizeof(*f->gens));
	f->nr_gens = 0;
	f->garbage_head = false;
	/* Other threads may map offset 0 (one page) from now on. */
	f->state = F_SETTING_UP;
	pthread_mutex_unlock(&f->lock);
	note(t, "open file %d: %s, %s", fi, mode_names[mode],
	     f->rdwr ? "O_RDWR" : "O_RDONLY");

	if (chance(&t->r, 30)) {
		struct ummunotify_params p;

		ret = setup(f->fd, &p, 0, 0);
		expect(t, "SETUP before EXCHANGE_FEATURES", ret, E(EINVAL),
		       false);
	}
	if (chance(&t->r, 20)) {
		ret = sysret(ioctl(f->fd, UMMUNOTIFY_EXCHANGE_FEATURES,
				   bad_pointer(t)));
		expect(t, "EXCHANGE_FEATURES with a bad pointer", ret,
		       E(EFAULT), false);
	}
	if (mode != M_LEGACY || chance(&t->r, 50)) {
		/* Unknown bits are not granted, pressure only with a ring. */
		want = mode_features[mode] | (chance(&t->r, 30) ?
					      (__u32)next(&t->r) & ~7U : 0);
		granted = want;
		if (chance(&t->r, 15)) {
			ret = sysret(ioctl(f->fd, UMMUNOTIFY_EXCHANGE_FEATURES,
					   read_only(t, &want, sizeof(want))));
			expect(t, "EXCHANGE_FEATURES read-only", ret,
			       E(EFAULT), false);
		}
		ret = uioctl(f->fd, UMMUNOTIFY_EXCHANGE_FEATURES, &granted);
		expect_granted = want & KNOWN_FEATURES;
		if (!(expect_granted & UMMUNOTIFY_FEATURE_RING))
			expect_granted &= ~UMMUNOTIFY_FEATURE_PRESSURE;
		if (expect(t, "EXCHANGE_FEATURES", ret, 0, false) &&
		    granted != expect_granted)
			fail(t, "EXCHANGE_FEATURES of %#x granted %#x", want,
			     granted);
		f->features = granted;
	}
	if (mode >= M_WATCH) {
		__u32 slots = PICK(&t->r, 0, 1, 8, 100, 512, 513, 4096);
		/* Mostly rings that keep up; small ones to overflow. */
		__u32 entries = PICK(&t->r, 0, 0, 256, 1024, 1024, 64, 16, 4,
				     2);

		if (!(f->features & UMMUNOTIFY_FEATURE_WATCH))
			slots = 0;
		if (!(f->features & UMMUNOTIFY_FEATURE_RING))
			entries = 0;
		bad_setups(t, f);
		ret = setup(f->fd, &f->p, slots, entries);
		note(t, "SETUP slots %u ring %u = %ld: size %llu", slots,
		     entries, ret, f->p.mmap_size);
		f->set_up = expect(t, "SETUP", ret, 0, false);
		if (f->set_up && setup_checks(t, f)) {
			__u32 want_slots = slots ?: 4096;

			want_slots = (want_slots * 8 + ps - 1) / ps * ps / 8;
			if (has_watch(f) && f->p.slots != want_slots)
				fail(t, "SETUP of %u slots gave %u", slots,
				     f->p.slots);
			if (has_ring(f) && f->p.ring_entries != (entries ?: 4096))
				fail(t, "SETUP of %u entries gave %u", entries,
				     f->p.ring_entries);
		}
		if (f->set_up) {
			struct ummunotify_params again;

			ret = setup(f->fd, &again, slots, entries);
			expect(t, "a second SETUP", ret, E(EINVAL), false);
		}
	}
	f->area_len = f->set_up ? f->p.mmap_size : ps;
	if (!f->set_up)
		memset(&f->p, 0, sizeof(f->p));
	f->area = mmap(NULL, f->area_len, PROT_READ, MAP_SHARED, f->fd, 0);
	if (f->area == MAP_FAILED) {
		fail(t, "mmap of the area: %s", strerror(errno));
		f->area = NULL;
	}
	if (has_ring(f)) {
		char *h = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED,
			       f->fd, f->p.head_offset);

		if (h == MAP_FAILED)
			fail(t, "mmap of the head: %s", strerror(errno));
		else
			f->head = (__u64 *)(h + f->p.off.head);
	}
	pthread_mutex_lock(&f->lock);
	f->state = F_OPEN;
	if (!f->area || (has_ring(f) && !f->head))
		f->dead = true;		/* unusable: close it */
	pthread_mutex_unlock(&f->lock);
	put_file(f);
}

/*
 * Close F while other threads may be in calls on it: its descriptor is
 * replaced at once (the kernel sees a close), its mappings stay until no
 * thread uses them.
 */
static void close_file(struct thread *t, int fi)
{
	struct ufile *f = &R.files[fi];

	pthread_mutex_lock(&f->lock);
	if (f->state == F_OPEN && !f->dead) {
		__atomic_store_n(&f->dead, true, __ATOMIC_SEQ_CST);
		if (dup2(R.devnull, f->fd) < 0)
			fail(t, "dup2 over file %d: %s", fi, strerror(errno));
		note(t, "close file %d (%d users)", fi, f->users);
		t->closes++;
		if (f->users == 0)
			finalize(f);
	}
	pthread_mutex_unlock(&f->lock);
}

/* A random file this thread may use: a shared one or its own. */
static int pick_file(struct thread *t)
{
	int fi = chance(&t->r, 70) ? (int)below(&t->r, SHARED_FILES)
				   : SHARED_FILES + t->index;

	/* A closed file is opened again soon, in a mode of its own. */
	if (__atomic_load_n(&R.files[fi].state, __ATOMIC_ACQUIRE) == F_CLOSED &&
	    chance(&t->r, 30))
		open_file(t, fi);
	return fi;
}

static bool is_private(const struct ufile *f)
{
	return f->owner >= 0;
}

/* On a file only this thread uses, fdinfo must agree with the model. */
static void check_regions(struct thread *t, struct ufile *f, int fi)
{
	long long n = 0, got;
	unsigned int i;

	if (!is_private(f))
		return;
	for (i = 0; i < t->nr_w; i++)
		if (t->w[i].live && t->w[i].file == fi &&
		    t->w[i].epoch == f->epoch)
			n++;
	got = fdinfo(f->fd, "regions");
	if (got != n)
		fail(t, "fdinfo shows %lld regions, %lld are registered", got,
		     n);
}

/*
 * An address as the kernel takes it (untagged_addr()): arm64's top-byte
 * tag goes, unless bit 55 says a kernel address.
 */
static uint64_t untagged(uint64_t a)
{
#ifdef __aarch64__
	return a & 1ULL << 55 ? a : a & ((1ULL << 56) - 1);
#else
	return a;
#endif
}

/* An address as a caller may give it: on arm64, sometimes tagged. */
static uint64_t tagged(struct thread *t, uint64_t a)
{
#ifdef __aarch64__
	if (!(a & 1ULL << 55) && chance(&t->r, 10))
		return a | below(&t->r, 256) << 56;
#else
	(void)t;
#endif
	return a;
}

/* Ranges a watch or registration may ask for, mostly in the span. */
static void pick_any_range(struct thread *t, uint64_t *start, uint64_t *end)
{
	uint64_t base = (uintptr_t)t->span, a, len;

	switch (below(&t->r, 40)) {
	case 4:		/* huge and valid: what reclaim may ask pressure for */
		*start = PICK(&t->r, ps, base, 1ULL << 32);
		*end = chance(&t->r, 50) ? task_size : *start + (1ULL << 30);
		return;
	case 5:
	case 0:		/* boundaries, some valid, most not */
		a = PICK(&t->r, 0, 1, ps, task_size - ps, task_size - 1,
			 task_size, task_size + ps, 1ULL << 47, 1ULL << 56,
			 0x8000000000000000ULL, ~0ULL - ps + 1, ~0ULL, base);
		len = PICK(&t->r, 0, 1, ps, task_size, ~0ULL, ~0ULL - a,
			   -a, 0x1000000000000000ULL);
		*start = a;
		*end = a + len;		/* may wrap */
		return;
	case 1:		/* reversed or empty */
		*start = base + below(&t->r, SMALL_PAGES) * ps;
		*end = *start - below(&t->r, 2) * ps;
		return;
	case 2:		/* across the hole between the two parts */
		*start = base + below(&t->r, SMALL_PAGES) * ps;
		*end = base + HUGE_OFFSET + below(&t->r, huge_pages()) * ps;
		return;
	case 3:		/* somewhere in the huge block */
		a = base + HUGE_OFFSET + below(&t->r, huge_pages()) * ps;
		*start = a + (chance(&t->r, 30) ? below(&t->r, ps) : 0);
		*end = a + (1 + below(&t->r, 64)) * ps;
		return;
	default:	/* small pages, aligned or not */
		a = below(&t->r, SMALL_PAGES);
		len = 1 + below(&t->r, chance(&t->r, 80) ? 8 : 64);
		if (a + len > SMALL_PAGES)
			len = SMALL_PAGES - a;
		*start = base + a * ps;
		*end = *start + len * ps;
		if (chance(&t->r, 25)) {
			*start += below(&t->r, ps);
			*end -= below(&t->r, ps);
			if (*end <= *start)
				*end = *start + 1;
		}
		return;
	}
}

/* A range as the kernel takes it; tagged() makes an argument of it. */
static void pick_range(struct thread *t, uint64_t *start, uint64_t *end)
{
	pick_any_range(t, start, end);
	*start = untagged(*start);
	*end = untagged(*end);
}

static bool range_ok(uint64_t start, uint64_t end)
{
	return start < end && end <= task_size;
}

/* Argument placement for an ioctl: where it is, and what that implies. */
enum place { P_GOOD, P_RO, P_BAD, P_HALF };

static enum place pick_place(struct thread *t)
{
	uint64_t n = below(&t->r, 100);

	return n < 85 ? P_GOOD : n < 91 ? P_RO : n < 96 ? P_BAD : P_HALF;
}

static void *place_arg(struct thread *t, enum place pl, void *arg, size_t len)
{
	switch (pl) {
	case P_RO:
		return read_only(t, arg, len);
	case P_BAD:
		return bad_pointer(t);
	case P_HALF:
		return straddling(t, arg, len);
	default:
		return arg;
	}
}

static struct watch *new_watch(struct thread *t, int fi, struct ufile *f)
{
	struct watch *w;

	if (t->nr_w == t->max_w)
		return NULL;
	w = &t->w[t->nr_w];
	memset(w, 0, sizeof(*w));
	w->file = fi;
	w->epoch = f->epoch;
	w->lo = UINT64_MAX;
	return w;
}

static void set_range(struct watch *w, uint64_t start, uint64_t end)
{
	w->start = start;
	w->end = end;
	if (start < w->lo)
		w->lo = start;
	if (end > w->hi)
		w->hi = end;
}

/*
 * Could a range watch now find a page under max_overlap watches of the
 * process?  Only if the process has that many watches, counting the
 * threads' calls in flight and the shared cookies.
 */
static bool may_stack(void)
{
	long long n = R.threads + SHARED_FILES * SHARED_COOKIES;
	int i;

	for (i = 0; i < R.threads; i++)
		n += __atomic_load_n(&R.t[i].live, __ATOMIC_RELAXED);
	return max_overlap >= 0 && n >= max_overlap;
}

/* A live watch of this thread, or NULL. */
static struct watch *pick_watch(struct thread *t, unsigned int *index)
{
	unsigned int i, n = t->nr_w, start = below(&t->r, n ?: 1);

	for (i = 0; i < n; i++) {
		unsigned int j = (start + i) % n;

		if (t->w[j].live) {
			*index = j;
			return &t->w[j];
		}
	}
	return NULL;
}

/*
 * UMMUNOTIFY_REGISTER_REGION or UMMUNOTIFY_WATCH, valid or not.  The
 * watch's record exists before the call, so that a consumer that sees its
 * first event finds it; a cookie is never used twice but on purpose.
 */
static void op_watch(struct thread *t)
{
	int fi = pick_file(t);
	struct ufile *f = use_file(fi);
	bool native, all = false, dup = false;
	bool ok_too = false, may_succeed, slotted = false, counted = false;
	struct ummunotify_watch wa = { 0 };
	struct ummunotify_register_ioctl ra = { 0 };
	enum place pl = pick_place(t);
	uint64_t errs = 0, start, end, cookie;
	long long regions = -1;
	struct watch *w;
	unsigned int i;
	void *arg;
	long ret;

	if (!f)
		return;
	native = chance(&t->r, has_watch(f) ? 90 : 10);
	w = new_watch(t, fi, f);
	if (!w || t->live >= MAX_LIVE) {
		put_file(f);
		return;
	}
	pick_range(t, &start, &end);
	if (native && has_watch(f) && chance(&t->r, 4)) {
		all = true;
		start = end = 0;
	}
	cookie = cookie_of(t, t->nr_w);
	/* Sometimes a cookie this thread has live on this file. */
	if (chance(&t->r, 5)) {
		struct watch *old = pick_watch(t, &i);

		if (old && old->file == fi && old->epoch == f->epoch) {
			dup = true;
			cookie = cookie_of(t, i);
		}
	}
	if (is_private(f))
		regions = fdinfo(f->fd, "regions");
	if (native) {
		wa.start = tagged(t, start);
		wa.end = tagged(t, end);
		wa.user_cookie = cookie;
		wa.causes = chance(&t->r, 70) ? 0 :
			    chance(&t->r, 90) ? (__u32)below(&t->r, 64) :
						(__u32)next(&t->r);
		wa.flags = all ? UMMUNOTIFY_WATCH_ALL :
			   chance(&t->r, 3) ? (__u32)next(&t->r) : 0;
		wa.reserved = chance(&t->r, 3) ? (__u32)next(&t->r) : 0;
		if (wa.flags & ~UMMUNOTIFY_WATCH_ALL || wa.reserved ||
		    wa.causes & ~KNOWN_CAUSES)
			errs |= E(EINVAL);
		if (wa.flags & UMMUNOTIFY_WATCH_ALL && (wa.start || wa.end))
			errs |= E(EINVAL);
		if (!(wa.flags & UMMUNOTIFY_WATCH_ALL) && !range_ok(start, end))
			errs |= E(EINVAL);
		if (!has_watch(f))
			errs |= E(EINVAL);
		if (pl == P_RO)
			errs |= E(EFAULT);
		arg = place_arg(t, pl, &wa, sizeof(wa));
	} else {
		ra.start = tagged(t, start);
		ra.end = tagged(t, end);
		ra.user_cookie = cookie;
		/*
		 * The 2010 kernel ignored flags and reserved, and Open MPI
		 * passes garbage flags (issue 8, defect 6): a file that
		 * was never set up must accept them; a set-up file
		 * refuses them.
		 */
		if (chance(&t->r, 5))
			ra.flags = (__u32)next(&t->r);
		if (chance(&t->r, 3))
			ra.reserved = (__u32)next(&t->r);
		if ((ra.flags || ra.reserved) && f->set_up)
			errs |= E(EINVAL);
		if (!range_ok(start, end))
			errs |= E(EINVAL);
		arg = place_arg(t, pl, &ra, sizeof(ra));
	}
	if (dup) {
		errs |= E(EINVAL);
		ok_too = false;
	}
	if (pl == P_BAD || pl == P_HALF) {
		errs = E(EFAULT);	/* nothing else can be known */
		ok_too = false;
	}
	may_succeed = !errs || ok_too;
	if (may_succeed && has_watch(f)) {
		/* Shared files: other threads take slots meanwhile. */
		int used = atomic_fetch_add(&f->slotted, 1);

		slotted = true;
		if (used >= (int)f->p.slots) {
			errs = E(ENOSPC);
			ok_too = false;
		} else if (used + R.threads + SHARED_COOKIES >
			   (int)f->p.slots) {
			errs |= E(ENOSPC);
			ok_too = true;
		}
	}
	if (may_succeed && !all && may_stack()) {
		errs |= E(ENOSPC);
		ok_too = true;
	}
	if (may_succeed && all) {
		/* 16 a file; shared files: other threads add theirs. */
		int used = atomic_fetch_add(&f->alls, 1);

		counted = true;
		if (used >= MAX_ALL) {
			errs = E(ENOSPC);
			ok_too = false;
		} else if (used + R.threads > MAX_ALL) {
			errs |= E(ENOSPC);
			ok_too = true;
		}
		may_succeed = !errs || ok_too;
	}
	if (may_succeed) {
		w->causes = (native && wa.causes ? wa.causes :
			     UMMUNOTIFY_CAUSES_DEFAULT) | CAUSE(RELEASE);
		w->causes_ever = w->causes;
		w->all = all;
		set_range(w, all ? 0 : start, all ? task_size : end);
		w->has_slot = has_watch(f);
		w->slot = UMMUNOTIFY_NO_SLOT;
		t->nr_w++;
	}
	ret = uioctl(f->fd, native ? UMMUNOTIFY_WATCH :
			    UMMUNOTIFY_REGISTER_REGION, arg);
	note(t, "%s file %d [%#" PRIx64 ", %#" PRIx64 ") cookie %#" PRIx64
	     " causes %#x flags %#x reserved %#x place %d = %ld",
	     native ? "WATCH" : "REGISTER", fi, start, end, cookie, wa.causes,
	     native ? wa.flags : ra.flags, native ? wa.reserved : ra.reserved,
	     pl, ret);
	if (!still_open(f))
		goto out;
	if (ret == 0)
		atomic_store(&f->used, true);
	if (ret == 0 && may_succeed) {
		slotted = false;
		counted = false;
		t->watches++;
		w->live = true;
		w->made_op = t->op;
		t->live++;
		if (native && wa.slot >= f->p.slots) {
			fail(t, "WATCH returned slot %u of %u", wa.slot,
			     f->p.slots);
		} else if (native) {
			w->slot = wa.slot;
			w->slot_known = true;
			w->made_gen = wa.generation;
			saw_gen(t, f, wa.generation, cookie, "WATCH");
			if (gen_word(f, wa.slot) < wa.generation)
				fail(t, "slot %u reads %#llx after WATCH "
				     "returned %#llx", wa.slot,
				     gen_word(f, wa.slot), wa.generation);
		}
	} else {
		expect(t, native ? "WATCH" : "REGISTER_REGION", ret, errs,
		       ok_too);
		if (regions >= 0 && fdinfo(f->fd, "regions") != regions)
			fail(t, "a failed %s changed the regions from %lld "
			     "to %lld", native ? "WATCH" : "REGISTER", regions,
			     fdinfo(f->fd, "regions"));
	}
out:
	if (slotted)
		atomic_fetch_sub(&f->slotted, 1);
	if (counted)
		atomic_fetch_sub(&f->alls, 1);
	if (is_private(f) && !errs)
		check_regions(t, f, fi);
	put_file(f);
}

static void drop_watch(struct thread *t, struct watch *w, struct ufile *f)
{
	w->live = false;
	w->gone_op = t->op;
	t->live--;
	if (w->has_slot)
		atomic_fetch_sub(&f->slotted, 1);
	if (w->all)
		atomic_fetch_sub(&f->alls, 1);
}

/* UMMUNOTIFY_UNREGISTER_REGION of a live watch, an unknown cookie, or bad. */
static void op_unwatch(struct thread *t)
{
	unsigned int i = 0;
	struct watch *w = pick_watch(t, &i);
	enum place pl = pick_place(t);
	struct ufile *f;
	uint64_t cookie, errs = 0;
	int fi;
	long ret;

	if (w && chance(&t->r, 85)) {
		fi = w->file;
		cookie = cookie_of(t, i);
	} else {
		w = NULL;
		fi = pick_file(t);
		cookie = PICK(&t->r, 0, ~0ULL, next(&t->r) & ~(1ULL << 63),
			      cookie_of(t, t->nr_w + 1));
		errs = E(EINVAL);
	}
	f = use_file(fi);
	if (!f)
		return;
	if (w && w->epoch != f->epoch) {
		w->live = false;	/* its file was closed */
		t->live--;
		put_file(f);
		return;
	}
	if (pl == P_BAD || pl == P_HALF)
		errs = E(EFAULT);
	ret = uioctl(f->fd, UMMUNOTIFY_UNREGISTER_REGION,
		     place_arg(t, pl, &cookie, sizeof(cookie)));
	note(t, "UNREGISTER file %d cookie %#" PRIx64 " place %d = %ld", fi,
	     cookie, pl, ret);
	if (reached(f, ret) &&
	    expect(t, "UNREGISTER_REGION", ret, errs, false) && w && !errs) {
		__u32 slot = w->slot;

		drop_watch(t, w, f);
		/* On a file of its own, nobody can have taken the slot. */
		if (w->slot_known && is_private(f) && gen_word(f, slot))
			fail(t, "slot %u reads %#llx after UNREGISTER", slot,
			     gen_word(f, slot));
	}
	if (still_open(f))
		check_regions(t, f, fi);
	put_file(f);
}

/* UMMUNOTIFY_RESIZE of a live watch to a new range, or of garbage. */
static void op_resize(struct thread *t)
{
	unsigned int i = 0;
	struct watch *w = pick_watch(t, &i);
	struct ummunotify_watch wa = { 0 };
	enum place pl = pick_place(t);
	uint64_t errs = 0, start, end;
	struct ufile *f;
	__u64 gen_before = 0;
	bool stack;
	int fi;
	long ret;

	fi = w ? w->file : pick_file(t);
	f = use_file(fi);
	if (!f)
		return;
	if (w && w->epoch != f->epoch) {
		drop_watch(t, w, f);
		put_file(f);
		return;
	}
	pick_range(t, &start, &end);
	wa.start = tagged(t, start);
	wa.end = tagged(t, end);
	wa.user_cookie = w && chance(&t->r, 90) ? cookie_of(t, i)
						: cookie_of(t, t->nr_w + 7);
	wa.causes = chance(&t->r, 80) ? 0 : (__u32)below(&t->r, 64);
	if (chance(&t->r, 3))
		wa.flags = 1 + (__u32)below(&t->r, 3);
	if (chance(&t->r, 3))
		wa.reserved = 1;
	if (!w || wa.user_cookie != cookie_of(t, i) || !has_watch(f) ||
	    wa.reserved || wa.causes & ~KNOWN_CAUSES ||
	    wa.flags & ~UMMUNOTIFY_WATCH_ALL ||
	    (wa.flags & UMMUNOTIFY_WATCH_ALL) || !range_ok(start, end))
		errs |= E(EINVAL);
	/* A registration without a slot is a 2010 one: no RESIZE. */
	if (w && !w->has_slot)
		errs |= E(EINVAL);
	/* Nor of a whole-address-space watch. */
	if (w && w->all)
		errs |= E(EINVAL);
	if (pl == P_RO)
		errs |= E(EFAULT);
	if (pl == P_BAD || pl == P_HALF)
		errs = E(EFAULT);
	if (w && w->slot_known)
		gen_before = gen_word(f, w->slot);
	if (!errs) {
		/* Events may name either range while it moves. */
		w->lo = w->lo < start ? w->lo : start;
		w->hi = w->hi > end ? w->hi : end;
		w->causes_ever |= wa.causes;
	}
	ret = uioctl(f->fd, UMMUNOTIFY_RESIZE,
		     place_arg(t, pl, &wa, sizeof(wa)));
	note(t, "RESIZE file %d cookie %#llx to [%#" PRIx64 ", %#" PRIx64
	     ") causes %#x flags %#x place %d = %ld", fi, wa.user_cookie,
	     start, end, wa.causes, wa.flags, pl, ret);
	stack = !errs && may_stack();
	if (!reached(f, ret) ||
	    !expect(t, "RESIZE", ret, errs | (stack ? E(ENOSPC) : 0), stack)) {
		put_file(f);
		return;
	}
	if (!errs && !ret) {
		set_range(w, start, end);
		w->moved_op = t->op;
		if (wa.causes)
			w->causes = wa.causes | CAUSE(RELEASE);
		if (w->slot_known && wa.slot != w->slot)
			fail(t, "RESIZE moved cookie %#llx from slot %u to %u",
			     wa.user_cookie, w->slot, wa.slot);
		if (w->slot_known && wa.generation < gen_before)
			fail(t, "RESIZE returned generation %#llx, the slot "
			     "read %#llx before", wa.generation, gen_before);
		if (w->slot_known)
			saw_gen(t, f, wa.generation, wa.user_cookie, "RESIZE");
	}
	put_file(f);
}

/*
 * Memory churn over the thread's span.  What the kernel must report is
 * computed from what the thread knows is mapped; a watch of the thread
 * that overlaps it must show it before the call returns.
 */
struct inval {
	uint64_t start, end;
	unsigned int cause;
};

struct churn {
	struct ufile *held[MAX_FILES];
	__u64 counter[MAX_FILES];
	unsigned int idx[MAX_LIVE + 16];	/* the live watches */
	__u64 gen[MAX_LIVE + 16];		/* their words before */
	unsigned int nr;
	uint64_t seq;
	struct inval iv[8];
	unsigned int nr_iv;
};

/* Forget the watches of files closed since. */
static void prune(struct thread *t)
{
	unsigned int i;

	for (i = 0; i < t->nr_w; i++) {
		struct watch *w = &t->w[i];
		struct ufile *f = &R.files[w->file];

		if (w->live &&
		    (__atomic_load_n(&f->epoch, __ATOMIC_ACQUIRE) != w->epoch ||
		     __atomic_load_n(&f->state, __ATOMIC_ACQUIRE) == F_CLOSED)) {
			w->live = false;
			t->live--;
		}
	}
}

static void churn_begin(struct thread *t, struct churn *c)
{
	unsigned int i;

	memset(c, 0, sizeof(*c));
	prune(t);
	for (i = 0; i < MAX_FILES; i++) {
		c->held[i] = grab(i, false, false);
		if (c->held[i] && c->held[i]->area)
			c->counter[i] = counter(c->held[i]);
	}
	for (i = 0; i < t->nr_w && c->nr < MAX_LIVE + 16; i++) {
		struct watch *w = &t->w[i];
		struct ufile *f = c->held[w->file];

		if (!w->live || !f || f->epoch != w->epoch)
			continue;
		c->idx[c->nr] = i;
		c->gen[c->nr++] = w->slot_known ? gen_word(f, w->slot) : 0;
	}
	c->seq = atomic_fetch_add(&R.seq, 1) + 1;
}

/* The mapped pages of [first, first + n) invalidated with CAUSE. */
static void expect_mapped(struct thread *t, struct churn *c, size_t first,
			  size_t n, unsigned int cause)
{
	size_t i = first, j;

	while (i < first + n && c->nr_iv < 8) {
		if (!t->prot[i]) {
			i++;
			continue;
		}
		for (j = i; j < first + n && t->prot[j]; j++)
			;
		c->iv[c->nr_iv++] = (struct inval) {
			(uintptr_t)page(t, i), (uintptr_t)page(t, j), cause
		};
		i = j;
	}
}

/*
 * What the kernel has mapped in pages [first, first + n) of the span, per
 * page as t->prot says it (0 unmapped, 1 read-only, 3 writable), from
 * /proc/self/maps.  Returns false if that cannot be read.
 */
static bool read_maps(struct thread *t, size_t first, size_t n,
		      unsigned char *prot)
{
	uintptr_t lo = (uintptr_t)page(t, first), hi = lo + n * ps;
	FILE *maps = fopen("/proc/self/maps", "re");
	unsigned long start, end;
	char *line = NULL, perms[8];
	size_t size = 0;

	if (!maps)
		return false;
	memset(prot, 0, n);
	while (getline(&line, &size, maps) > 0) {
		if (sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3 ||
		    end <= lo || start >= hi)
			continue;
		start = start > lo ? start : lo;
		end = end < hi ? end : hi;
		memset(prot + (start - lo) / ps, perms[1] == 'w' ? 3 : 1,
		       (end - start) / ps);
	}
	free(line);
	fclose(maps);
	return true;
}

/*
 * Ask the kernel after a call whose effect is unsure: a failed mremap()
 * may have unmapped its target, and since 6.17 a failed move of several
 * mappings may have moved some.
 */
static void resync(struct thread *t, size_t first, size_t n)
{
	if (!read_maps(t, first, n, t->prot + first))
		fail(t, "/proc/self/maps: %s", strerror(errno));
}

static const char *prot_name(unsigned char prot)
{
	return prot == 3 ? "writable" : prot ? "read-only" : "unmapped";
}

/* Up to 4 runs of pages where the model and the kernel's maps disagree. */
static void explain_maps(struct thread *t)
{
	static __thread unsigned char kernel[SPAN_BYTES / 4096];
	size_t i, j, n = SPAN_BYTES / ps, runs = 0;

	if (!read_maps(t, 0, n, kernel)) {
		say("#   /proc/self/maps: %s", strerror(errno));
		return;
	}
	for (i = 0; i < n && runs < 4; i = j) {
		for (j = i; j < n && t->prot[j] == t->prot[i] &&
			    kernel[j] == kernel[i]; j++)
			;
		if (t->prot[i] == kernel[i])
			continue;
		runs++;
		say("#   pages %zu+%zu: %s for the thread, %s in "
		    "/proc/self/maps", i, j - i, prot_name(t->prot[i]),
		    prot_name(kernel[i]));
	}
	if (!runs)
		say("#   /proc/self/maps agrees with what the thread has mapped");
}

/* The events for COOKIE still in F's ring, newest first. */
static void explain_ring(struct ufile *f, uint64_t cookie)
{
	const struct ummunotify_ring_event *events =
		(const void *)(f->area + f->p.off.events);
	__u64 tail = load64(f->area + f->p.off.tail), i;
	unsigned int shown = 0;

	for (i = tail; i-- > 0 && tail - i <= f->p.ring_entries && shown < 8;) {
		const struct ummunotify_ring_event *ev =
			&events[i & (f->p.ring_entries - 1)];

		if (ev->user_cookie != cookie)
			continue;
		shown++;
		say("#   ring entry %llu: [%#llx, %#llx) cause %u slot %u "
		    "generation %#llx", i, ev->start, ev->end, ev->cause,
		    ev->slot, ev->generation);
	}
	say("#   %s%u events for it among the ring's last %u (tail %llu, "
	    "dropped %llu)", shown == 8 ? "at least " : "", shown,
	    f->p.ring_entries, tail, dropped(f));
}

/* The process (trace option record-tgid) a trace line is of, or -1. */
static long trace_tgid(const char *line)
{
	const char *p = strchr(line, '(');

	return p ? strtol(p + 1, NULL, 10) : -1;
}

/*
 * The kernel's account (the module's tracepoints) of this thread's last
 * calls and of COOKIE in this process, with the trace stopped meanwhile.
 */
static void explain_trace(uint64_t cookie)
{
	static __thread char mine[24][200], its[8][200];
	unsigned int n_mine = 0, n_its = 0, i;
	char path[80], key[32], name[40], *line = NULL;
	size_t size = 0;
	FILE *trace;

	if (!tracing)
		return;
	snprintf(path, sizeof(path), "%s/tracing_on", tracing);
	write_file(path, "0");
	snprintf(path, sizeof(path), "%s/trace", tracing);
	trace = fopen(path, "re");
	snprintf(key, sizeof(key), "-%ld ", (long)syscall(SYS_gettid));
	snprintf(name, sizeof(name), "cookie=%" PRIu64 " ", cookie);
	while (trace && getline(&line, &size, trace) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (strstr(line, key))
			snprintf(mine[n_mine++ % 24], 200, "%s", line);
		if (strstr(line, name) && trace_tgid(line) == getpid())
			snprintf(its[n_its++ % 8], 200, "%s", line);
	}
	free(line);
	if (trace)
		fclose(trace);
	snprintf(path, sizeof(path), "%s/tracing_on", tracing);
	write_file(path, "1");
	say("#   the module's trace of the watch (cookie=%" PRIu64 "), oldest "
	    "first:", cookie);
	for (i = n_its > 8 ? n_its - 8 : 0; i < n_its; i++)
		say("#     %s", its[i % 8]);
	say("#   the module's trace of this thread's last calls:");
	for (i = n_mine > 24 ? n_mine - 24 : 0; i < n_mine; i++)
		say("#     %s", mine[i % 24]);
}

/*
 * After a missed invalidation of watch W (cookie COOKIE) of file F: what
 * is needed to tell a module bug from a model bug.  Once a thread.
 */
static void explain_miss(struct thread *t, const struct churn *c,
			 const struct watch *w, struct ufile *f,
			 uint64_t cookie)
{
	static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
	char line[400] = "";
	unsigned int k;
	int n = 0;

	if (t->explained)
		return;
	t->explained = true;
	pthread_mutex_lock(&one_at_a_time);
	say("#   watch %#" PRIx64 ": file %d (%s, %s%s), %s, causes %#x, "
	    "slot %u, made at op %lu, last RESIZE at op %lu; %u hits before, "
	    "%u events for it read", cookie, w->file, mode_names[f->mode],
	    is_private(f) ? "its own" : "shared",
	    still_open(f) ? "" : ", closed", w->all ? "WATCH_ALL" : "a range",
	    w->causes, w->slot, w->made_op, w->moved_op, w->hits - 1,
	    atomic_load(&w->seen));
	for (k = 0; k < c->nr_iv && n < (int)sizeof(line); k++)
		n += snprintf(line + n, sizeof(line) - n,
			      " [%#" PRIx64 ", %#" PRIx64 ") cause %u",
			      c->iv[k].start, c->iv[k].end, c->iv[k].cause);
	say("#   the call was to invalidate%s", line);
	explain_maps(t);
	if (has_ring(f))
		explain_ring(f, cookie);
	explain_trace(cookie);
	pthread_mutex_unlock(&one_at_a_time);
}

static void churn_end(struct thread *t, struct churn *c, const char *what)
{
	unsigned int need[MAX_FILES] = { 0 }, i, k;

	for (i = 0; i < c->nr; i++) {
		struct watch *w = &t->w[c->idx[i]];
		struct ufile *f = c->held[w->file];
		bool hit = false;
		__u64 now;

		for (k = 0; k < c->nr_iv; k++)
			hit |= w->start < c->iv[k].end &&
			       c->iv[k].start < w->end &&
			       (w->causes & (1U << c->iv[k].cause));
		if (!hit)
			continue;
		/* A whole-address-space watch with a ring leaves the counter. */
		need[w->file] += !(w->all &&
				   f->features & UMMUNOTIFY_FEATURE_RING);
		w->hits++;
		t->checked++;
		w->hit_seq = c->seq;
		if (!w->slot_known)
			continue;
		now = gen_word(f, w->slot);
		if (now == c->gen[i]) {
			fail(t, "missed invalidation: %s returned and watch %#"
			     PRIx64 " [%#" PRIx64 ", %#" PRIx64 ") in slot %u "
			     "of file %d still has generation %#llx", what,
			     cookie_of(t, c->idx[i]), w->start, w->end, w->slot,
			     w->file, now);
			explain_miss(t, c, w, f, cookie_of(t, c->idx[i]));
		} else {
			saw_gen(t, f, now, cookie_of(t, c->idx[i]),
				"generation word");
		}
	}
	for (i = 0; i < MAX_FILES; i++) {
		struct ufile *f = c->held[i];

		if (!f)
			continue;
		if (need[i] && counter(f) - c->counter[i] < need[i])
			fail(t, "%s hit %u watches of file %d but its counter "
			     "moved from %llu to %llu", what, need[i], i,
			     c->counter[i], counter(f));
		put_file(f);
	}
}

/* A page range in the small part or in the huge block. */
/*
 * A page range in the small part or in the huge block, half of the time
 * around one of the thread's watches.
 */
static void pick_pages(struct thread *t, size_t *first, size_t *n)
{
	bool huge = chance(&t->r, 30);
	size_t base = huge ? huge_first() : 0;
	size_t zone = huge ? huge_pages() : SMALL_PAGES;
	uint64_t span = (uintptr_t)t->span;
	unsigned int i = 0;
	struct watch *w = chance(&t->r, 50) ? pick_watch(t, &i) : NULL;

	*n = chance(&t->r, 85) ? 1 + below(&t->r, 8) :
	     chance(&t->r, 50) ? 1 + below(&t->r, zone) : zone;
	*first = base + below(&t->r, zone - *n + 1);
	if (w && !w->all && w->start >= span && w->end <= span + SPAN_BYTES) {
		size_t lo = (w->start - span) / ps, hi = (w->end - span - 1) / ps;

		huge = lo >= huge_first();
		base = huge ? huge_first() : 0;
		zone = huge ? huge_pages() : SMALL_PAGES;
		if (hi >= base + zone || lo < base)
			return;
		*n = 1 + below(&t->r, 4);
		*first = lo + below(&t->r, hi - lo + 1);
		*first = *first > base + 1 ? *first - below(&t->r, 2) : *first;
		if (*first + *n > base + zone)
			*first = base + zone - *n;
	}
}

static void set_prot(struct thread *t, size_t first, size_t n,
		     unsigned char prot)
{
	memset(t->prot + first, prot, n);
}

static void populate(struct thread *t, size_t first, size_t n)
{
	size_t i;

	for (i = first; i < first + n; i++)
		if (t->prot[i] == 3 && chance(&t->r, 50))
			*(volatile char *)page(t, i) = (char)i;
}

static bool all_mapped(struct thread *t, size_t first, size_t n)
{
	size_t i;

	for (i = first; i < first + n; i++)
		if (!t->prot[i])
			return false;
	return true;
}

static void op_churn(struct thread *t)
{
	size_t first, n, to, n2;
	struct churn c;
	const char *what;
	void *p;
	long ret;

	pick_pages(t, &first, &n);
	churn_begin(t, &c);
	switch (below(&t->r, 7)) {
	case 0:
		what = "munmap";
		expect_mapped(t, &c, first, n, UMMUNOTIFY_CAUSE_UNMAP);
		ret = sysret(munmap(page(t, first), n * ps));
		expect(t, what, ret, 0, false);
		set_prot(t, first, n, 0);
		break;
	case 1:
	case 2:
		what = "mmap(MAP_FIXED)";
		expect_mapped(t, &c, first, n, UMMUNOTIFY_CAUSE_UNMAP);
		p = mmap(page(t, first), n * ps, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		ret = p == MAP_FAILED ? -errno : 0;
		if (expect(t, what, ret, 0, false)) {
			set_prot(t, first, n, 3);
			if (first >= huge_first() && chance(&t->r, 50))
				madvise(p, n * ps, MADV_HUGEPAGE);
			populate(t, first, n);
		} else {
			resync(t, first, n);
		}
		break;
	case 3:
		what = chance(&t->r, 70) ? "madvise(MADV_DONTNEED)"
					 : "madvise(MADV_FREE)";
		expect_mapped(t, &c, first, n, UMMUNOTIFY_CAUSE_CLEAR);
		ret = sysret(madvise(page(t, first), n * ps,
				     what[15] == 'D' ? MADV_DONTNEED
						     : MADV_FREE));
		expect(t, what, ret, all_mapped(t, first, n) ? 0 : E(ENOMEM),
		       false);
		break;
	case 4: {
		/* Move within the same part, shrink or grow in place. */
		size_t zone_first = first >= huge_first() ? huge_first() : 0;
		size_t zone = first >= huge_first() ? huge_pages()
						    : SMALL_PAGES;
		int flags = 0;

		what = "mremap";
		n2 = 1 + below(&t->r, 8);
		to = zone_first + below(&t->r, zone - n2 + 1);
		if (chance(&t->r, 60) && (to + n2 <= first || first + n <= to))
			flags = MREMAP_MAYMOVE | MREMAP_FIXED;
		if (!flags && first + n2 > zone_first + zone)
			n2 = n;
		if (!flags)
			to = first;
		p = mremap(page(t, first), n * ps, n2 * ps, flags,
			   page(t, to));
		ret = p == MAP_FAILED ? -errno : 0;
		note(t, "mremap %zu+%zu to %zu+%zu flags %d = %ld", first, n,
		     to, n2, flags, ret);
		if (ret) {
			/* Nothing to check: it may have unmapped the
			 * target before failing. */
			resync(t, zone_first, zone);
			break;
		}
		if (flags && n2 == n) {
			/*
			 * A move that keeps the size may span several
			 * mappings and holes since 6.17 (d23cb648e365,
			 * "mm/mremap: permit mremap() move of multiple
			 * VMAs"): each mapping lands at its offset, and the
			 * target's pages across from a hole stay as they
			 * were.  Before, it is one mapping or EFAULT.
			 */
			size_t i, j;

			expect_mapped(t, &c, first, n, UMMUNOTIFY_CAUSE_UNMAP);
			for (i = 0; i < n; i = j + 1) {
				for (j = i; j < n && t->prot[first + j]; j++)
					;
				expect_mapped(t, &c, to + i, j - i,
					      UMMUNOTIFY_CAUSE_UNMAP);
				memcpy(t->prot + to + i, t->prot + first + i,
				       j - i);
				set_prot(t, first + i, j - i, 0);
			}
		} else if (flags) {
			unsigned char prot = t->prot[first];

			expect_mapped(t, &c, first, n, UMMUNOTIFY_CAUSE_UNMAP);
			expect_mapped(t, &c, to, n2, UMMUNOTIFY_CAUSE_UNMAP);
			set_prot(t, first, n, 0);
			set_prot(t, to, n2, prot);
		} else if (n2 < n) {
			expect_mapped(t, &c, first + n2, n - n2,
				      UMMUNOTIFY_CAUSE_UNMAP);
			set_prot(t, first + n2, n - n2, 0);
		} else {
			set_prot(t, first + n, n2 - n, t->prot[first]);
		}
		break;
	}
	case 5: {
		unsigned char prot = chance(&t->r, 50) ? 1 : 3;
		size_t i;

		what = "mprotect";
		ret = sysret(mprotect(page(t, first), n * ps,
				      prot == 3 ? PROT_READ | PROT_WRITE
						: PROT_READ));
		/* It stops at the first hole. */
		for (i = first; i < first + n && t->prot[i]; i++)
			t->prot[i] = prot;
		expect(t, what, ret, i == first + n ? 0 : E(ENOMEM), false);
		break;
	}
	default:
		what = "write";
		ret = 0;
		populate(t, first, n);
		break;
	}
	note(t, "%s pages %zu+%zu = %ld", what, first, n, ret);
	churn_end(t, &c, what);
}

/* A transparent huge page over the block, to be split by later churn. */
static void op_huge(struct thread *t)
{
	size_t first = huge_first(), n = huge_pages();
	struct churn c;
	char *p;

	churn_begin(t, &c);
	expect_mapped(t, &c, first, n, UMMUNOTIFY_CAUSE_UNMAP);
	p = mmap(page(t, first), n * ps, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED) {
		fail(t, "mmap of the huge block: %s", strerror(errno));
		resync(t, first, n);
	} else {
		set_prot(t, first, n, 3);
		madvise(p, n * ps, MADV_HUGEPAGE);
		*(volatile char *)p = 1;
	}
	note(t, "huge block mapped");
	churn_end(t, &c, "mmap(MAP_FIXED) of the huge block");
}

/* Reclaim: no report is promised (pages may stay), but none may break. */
static void op_reclaim(struct thread *t)
{
	size_t first, n;

	pick_pages(t, &first, &n);
	madvise(page(t, first), n * ps, MADV_PAGEOUT);
	note(t, "MADV_PAGEOUT pages %zu+%zu", first, n);
	/*
	 * Reclaim runs the shrinkers, the pressure one too: it must ask
	 * the files for memory and come back at once (issue 8, defect 2).
	 */
	if (chance(&t->r, 5)) {
		write_file("/proc/sys/vm/drop_caches", "2");
		note(t, "drop_caches");
	} else if (chance(&t->r, 5)) {
		write_file("/sys/fs/cgroup/memory.reclaim", "1M");
		note(t, "memory.reclaim of 1M");
	}
}

static void op_read(struct thread *t)
{
	static __thread char buf[8192];
	int fi = pick_file(t);
	struct ufile *f = use_file(fi);
	size_t size;
	bool bad;

	if (!f)
		return;
	size = PICK(&t->r, 0, 1, 31, 32, 33, 39, 40, 41, 64, 79, 80, 120, 4096,
		    below(&t->r, sizeof(buf)));
	bad = chance(&t->r, 5);
	pthread_mutex_lock(&f->consume);
	read_events(t, f, fi, bad ? bad_pointer(t) : buf, size, bad);
	pthread_mutex_unlock(&f->consume);
	put_file(f);
}

/* The shared head: consume, or write a garbage head now and then. */
static void op_ring(struct thread *t)
{
	int fi = pick_file(t);
	struct ufile *f = use_file(fi);

	if (!f)
		return;
	if (has_ring(f) && f->head) {
		pthread_mutex_lock(&f->consume);
		if (chance(&t->r, 3)) {
			__u64 garbage = PICK(&t->r, ~0ULL, *f->head + (1ULL << 40),
					     next(&t->r));

			note(t, "garbage head %#llx on file %d", garbage, fi);
			f->garbage_head = true;
			__atomic_store_n(f->head, garbage, __ATOMIC_RELEASE);
		} else {
			pop_ring(t, f, fi);
		}
		pthread_mutex_unlock(&f->consume);
	}
	put_file(f);
}

/*
 * The device's mappings: every offset, length, protection and sharing,
 * then mprotect, mremap and munmap of what was mapped.  Refusing
 * PROT_EXEC and keeping the mappings from fork children is issue 8's
 * defect 4.
 */
static void op_mmap(struct thread *t)
{
	int fi = pick_file(t);
	struct ufile *f = grab(fi, true, true);
	size_t nr_pages, pages, len, off;
	uint64_t errs = 0;
	int prot, flags;
	bool head, setting_up;
	char *p;
	long ret;

	if (!f)
		return;
	setting_up = f->state == F_SETTING_UP;
	nr_pages = f->set_up && !setting_up ? f->p.mmap_size / ps : 1;
	if (setting_up) {
		off = 0;	/* the only mapping valid in every state */
		len = PICK(&t->r, 1, 8, ps);
		prot = PROT_READ;
		flags = MAP_SHARED;
	} else {
		off = PICK(&t->r, 0, 0, 0, 1, nr_pages - 1, nr_pages,
			   nr_pages, nr_pages + 1, below(&t->r, nr_pages + 3),
			   1ULL << 40, 0x7fffffffffffULL) * ps;
		len = PICK(&t->r, 1, ps - 1, ps, ps + 1, 2 * ps, nr_pages * ps,
			   (nr_pages + 1) * ps, below(&t->r, 4 * ps) + 1, 0);
		prot = PICK(&t->r, PROT_READ, PROT_READ, PROT_READ, PROT_NONE,
			    PROT_READ | PROT_WRITE, PROT_WRITE,
			    PROT_READ | PROT_EXEC, PROT_EXEC,
			    PROT_READ | PROT_WRITE | PROT_EXEC);
		flags = PICK(&t->r, MAP_SHARED, MAP_SHARED, MAP_SHARED,
			     MAP_PRIVATE, MAP_SHARED_VALIDATE);
	}
	pages = (len + ps - 1) / ps;
	head = has_ring(f) && off == f->p.head_offset;
	if (!len)
		errs |= E(EINVAL);
	if (!(flags & MAP_SHARED))
		errs |= E(EINVAL);
	else if ((prot & PROT_WRITE) && !f->rdwr)
		errs |= E(EACCES);
	if (prot & PROT_EXEC)
		errs |= E(EPERM);
	if (head ? pages > 1 : off || pages > nr_pages)
		errs |= E(EINVAL);
	if (!head && (prot & PROT_WRITE))
		errs |= E(EPERM);
	if (off >= (1ULL << 40) * ps)
		errs |= E(EOVERFLOW) | E(EINVAL);
	p = mmap(NULL, len, prot, flags, f->fd, off);
	ret = p == MAP_FAILED ? -errno : 0;
	note(t, "mmap file %d off %#zx len %#zx prot %#x flags %#x = %ld", fi,
	     off, len, prot, flags, ret);
	if (!still_open(f)) {
		if (!ret)
			munmap(p, len);
		put_file(f);
		return;
	}
	if (!expect(t, "mmap of the device", ret, errs, false) || ret) {
		if (!ret)
			munmap(p, len);
		put_file(f);
		return;
	}
	if (prot & PROT_READ) {
		volatile __u64 *word = (volatile __u64 *)p;
		__u64 before = f->area && !setting_up ? counter(f) : 0, v = *word;

		if (!head && f->area && !setting_up &&
		    (v < before || v > counter(f)))
			fail(t, "a new mapping shows counter %llu, the area "
			     "%llu..%llu", v, before, counter(f));
	}
	switch (below(&t->r, 6)) {
	case 4:
		/* Never inherited, and no way to ask for it. */
		ret = sysret(madvise(p, len, MADV_DOFORK));
		expect(t, "madvise(MADV_DOFORK) of a device mapping", ret,
		       E(EINVAL), false);
		break;
	case 0:
		ret = sysret(mprotect(p, len, PROT_READ | PROT_WRITE));
		expect(t, "mprotect(PROT_WRITE) of a device mapping", ret,
		       head ? 0 : E(EACCES), false);
		break;
	case 1:
		ret = sysret(mprotect(p, len, PROT_READ | PROT_EXEC));
		expect(t, "mprotect(PROT_EXEC) of a device mapping", ret,
		       E(EACCES), false);
		break;
	case 2: {
		size_t new_len = PICK(&t->r, ps, len / 2, len + ps, 2 * len);
		int mflags = PICK(&t->r, 0, MREMAP_MAYMOVE);
		char *q;

		/* VM_DONTEXPAND: no growing; shrinking and moving are fine. */
		q = mremap(p, len, new_len, mflags);
		ret = q == MAP_FAILED ? -errno : 0;
		note(t, "mremap device mapping %#zx to %#zx flags %d = %ld", len,
		     new_len, mflags, ret);
		if (new_len && (new_len + ps - 1) / ps > pages)
			expect(t, "mremap growing a device mapping", ret,
			       E(EFAULT) | E(ENOMEM), false);
		else if (new_len)
			expect(t, "mremap shrinking a device mapping", ret, 0,
			       false);
		if (!ret) {
			if (prot & PROT_READ)
				(void)*(volatile char *)q;
			p = q;
			len = new_len;
		}
		break;
	}
	default:
		break;
	}
	munmap(p, len);
	put_file(f);
}

/* Unknown commands, calls out of order, poll and fasync. */
static void op_ioctl(struct thread *t)
{
	int fi = pick_file(t);
	struct ufile *f = use_file(fi);
	__u32 word = 0;
	struct ummunotify_params p = { 0 };
	unsigned long cmd;
	long ret;

	if (!f)
		return;
	switch (below(&t->r, 8)) {
	case 0:
		/* Anything but the eight commands: ENOTTY. */
		cmd = PICK(&t->r, (__u32)next(&t->r),
			   _IOC(below(&t->r, 4), 'U', below(&t->r, 16),
				below(&t->r, 256)),
			   _IO('U', 1), _IOR('U', 2, __u64), _IOW('U', 4, __u64),
			   _IOWR('U', 7, struct ummunotify_watch), 0);
		if (cmd == UMMUNOTIFY_EXCHANGE_FEATURES ||
		    cmd == UMMUNOTIFY_REGISTER_REGION ||
		    cmd == UMMUNOTIFY_UNREGISTER_REGION ||
		    cmd == UMMUNOTIFY_WATCH || cmd == UMMUNOTIFY_RESIZE ||
		    cmd == UMMUNOTIFY_SETUP || cmd == UMMUNOTIFY_WATCHV ||
		    cmd == UMMUNOTIFY_NS_LIMITS)
			break;
		ret = sysret(ioctl(f->fd, cmd, t->scratch));
		note(t, "ioctl %#lx file %d = %ld", cmd, fi, ret);
		if (still_open(f))
			expect(t, "an unknown ioctl", ret, E(ENOTTY), false);
		break;
	case 1:
		/* After first use or SETUP, the file's features are fixed. */
		word = (__u32)next(&t->r);
		ret = uioctl(f->fd, UMMUNOTIFY_EXCHANGE_FEATURES, &word);
		note(t, "late EXCHANGE_FEATURES file %d = %ld", fi, ret);
		if (still_open(f) && (f->set_up || atomic_load(&f->used)))
			expect(t, "EXCHANGE_FEATURES after first use", ret,
			       E(EINVAL), !is_private(f) && !f->set_up);
		break;
	case 2:
		/* Where SETUP could still work, make sure it does not. */
		if (!f->set_up && (!atomic_load(&f->used) || !is_private(f)))
			p.flags = 1;
		ret = uioctl(f->fd, UMMUNOTIFY_SETUP, &p);
		note(t, "late SETUP file %d = %ld", fi, ret);
		if (still_open(f))
			expect(t, "SETUP after first use", ret, E(EINVAL), false);
		break;
	case 3: {
		struct pollfd pfd = { .fd = f->fd, .events = POLLIN };

		/* Sometimes long enough for another thread to wake it. */
		ret = sysret(poll(&pfd, 1, chance(&t->r, 80) ? 0 :
					   (int)below(&t->r, 20)));
		if (still_open(f) && ret >= 0 && (pfd.revents & ~POLLIN & ~POLLRDNORM))
			fail(t, "poll by the owner: revents %#x", pfd.revents);
		break;
	}
	case 4: {
		/* SIGIO (or a queued real-time signal) to this process. */
		int fl = fcntl(f->fd, F_GETFL);

		fcntl(f->fd, F_SETOWN, getpid());
		if (chance(&t->r, 50))
			fcntl(f->fd, F_SETSIG, chance(&t->r, 50) ? SIGRTMIN + 1 : 0);
		ret = sysret(fcntl(f->fd, F_SETFL, fl ^ O_ASYNC));
		note(t, "fasync %s file %d = %ld", fl & O_ASYNC ? "off" : "on",
		     fi, ret);
		if (still_open(f))
			expect(t, "F_SETFL O_ASYNC", ret, 0, false);
		break;
	}
	case 5: {
		long long got = fdinfo(f->fd, "regions");

		if (still_open(f) && got < 0)
			fail(t, "no regions in fdinfo");
		else if (still_open(f))
			check_regions(t, f, fi);
		break;
	}
	case 6: {
		/*
		 * No process of the fuzzer is in a container: NS_LIMITS, SET
		 * or not, of anything changes nothing and fails.
		 */
		struct ummunotify_ns_limits l = {
			.pid = (__s32)PICK(&t->r, 0, getpid(), getppid(), 1,
					   (__u32)next(&t->r), -1),
			.flags = (__u32)PICK(&t->r, 0, UMMUNOTIFY_NS_LIMITS_SET,
					     next(&t->r)),
			.max_watches = PICK(&t->r, 0, 1, next(&t->r)),
			.max_pages = PICK(&t->r, 0, 1, next(&t->r)),
			.reserved = { PICK(&t->r, 0, 0, next(&t->r)) },
		};
		void *arg = chance(&t->r, 60) ? (void *)&l :
			    chance(&t->r, 50) ? read_only(t, &l, sizeof(l)) :
			    chance(&t->r, 50) ? straddling(t, &l, sizeof(l)) :
			    bad_pointer(t);

		ret = uioctl(f->fd, UMMUNOTIFY_NS_LIMITS, arg);
		note(t, "NS_LIMITS pid %d flags %#x file %d = %ld", l.pid,
		     l.flags, fi, ret);
		if (still_open(f))
			expect(t, "NS_LIMITS outside any container", ret,
			       E(EINVAL) | E(ESRCH) | E(EFAULT), false);
		break;
	}
	default:
		/* A file only its opener may read: not even a read-only
		 * mapping of another file's descriptor number. */
		ret = sysret(read(f->fd, NULL, 0));
		if (still_open(f))
			expect(t, "read() of 0 bytes", ret, E(EINVAL), false);
		break;
	}
	put_file(f);
}

/*
 * O_ASYNC must be refused to a child.  The parent's threads turn it on and
 * off meanwhile, and setting it where it is set already calls no fasync():
 * only a success on each of several tries, each after turning it off
 * (which anyone may), counts.
 */
static bool async_refused(int fd)
{
	for (int i = 0; i < 8; i++) {
		int fl = fcntl(fd, F_GETFL) & ~O_ASYNC;

		if (fcntl(fd, F_SETFL, fl))
			return false;
		if (fcntl(fd, F_SETFL, fl | O_ASYNC) == -1)
			return errno == EPERM;
	}
	return false;
}

/* In a child: every call on FD must fail with EPERM, and mmap'd AREA of the
 * parent must not be there.  Returns a bit per call that did not. */
static int foreign_checks(int fd, char *area, dev_t rdev)
{
	struct ummunotify_watch w = { .start = 4096, .end = 8192, .user_cookie = 1 };
	struct ummunotify_register_ioctl r = { .start = 4096, .end = 8192 };
	struct ummunotify_params p = { 0 };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	__u32 features = KNOWN_FEATURES;
	__u64 cookie = 1;
	unsigned char vec;
	char buf[64];
	int bad = 0;
	struct stat st;
	void *m;

	/* A file closed meanwhile left /dev/null in its place. */
	if (fstat(fd, &st) || st.st_rdev != rdev)
		return 0;
	if (uioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features) != -EPERM ||
	    uioctl(fd, UMMUNOTIFY_REGISTER_REGION, &r) != -EPERM ||
	    uioctl(fd, UMMUNOTIFY_UNREGISTER_REGION, &cookie) != -EPERM ||
	    uioctl(fd, UMMUNOTIFY_WATCH, &w) != -EPERM ||
	    uioctl(fd, UMMUNOTIFY_RESIZE, &w) != -EPERM ||
	    uioctl(fd, UMMUNOTIFY_SETUP, &p) != -EPERM)
		bad |= 1;
	if (read(fd, buf, sizeof(buf)) != -1 || errno != EPERM)
		bad |= 2;
	m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (m != MAP_FAILED || errno != EPERM)
		bad |= 4;
	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLERR))
		bad |= 8;
	if (!async_refused(fd))
		bad |= 16;
	if (area && !mincore(area, 4096, &vec))
		bad |= 32;
	return bad;
}

static const char *const foreign_calls[] = {
	"an ioctl", "read()", "mmap()", "poll()", "O_ASYNC",
	"(the parent's mapping is inherited)", "(no file received)",
};

static void reap(struct thread *t, pid_t pid)
{
	int status = wait_child(pid), i;

	if (status == 0)
		return;
	if (status > 0 && status < 128) {
		for (i = 0; i < 7; i++)
			if (status & (1 << i))
				fail(t, "a forked child or SCM_RIGHTS receiver "
				     "was not refused %s", foreign_calls[i]);
	} else {
		fail(t, "child %d ended with status %d", pid, status);
	}
}

/*
 * fork(): the child checks the inherited descriptor and one received
 * over SCM_RIGHTS, then, after a while, exits, maybe being the last to
 * hold the file: its release runs in the child, for the parent's mm.
 */
static void op_fork(struct thread *t)
{
	int fi = pick_file(t), sv[2], slot = below(&t->r, 4);
	struct ufile *f = use_file(fi);
	unsigned int delay = below(&t->r, 20000);
	pid_t pid;

	if (!f)
		return;
	if (t->children[slot]) {
		reap(t, t->children[slot]);
		t->children[slot] = 0;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		put_file(f);
		return;
	}
	pid = fork();
	if (pid == 0) {
		int got, bad;

		close(sv[0]);
		bad = foreign_checks(f->fd, f->area, device_rdev);
		got = recv_fd(sv[1]);
		if (got < 0)
			bad |= 64;
		else
			bad |= foreign_checks(got, NULL, device_rdev);
		usleep(delay);
		_exit(bad);
	}
	close(sv[1]);
	if (pid > 0) {
		if (send_fd(sv[0], f->fd))
			fail(t, "SCM_RIGHTS: %s", strerror(errno));
		t->children[slot] = pid;
		t->forks++;
	}
	note(t, "fork %d with file %d", pid, fi);
	close(sv[0]);
	put_file(f);
}

/*
 * Issue 8's defect 1: mmap() of offset 0 while SETUP fails (its result
 * cannot be written) and frees what it allocated.  A helper maps and
 * unmaps the first page in a loop meanwhile; the area mapped afterwards
 * must show a zero counter and the layout SETUP gave.
 */
struct race {
	int fd;
	atomic_bool stop;
	unsigned long maps;
};

static void *race_mapper(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop)) {
		void *p = mmap(NULL, ps, PROT_READ, MAP_SHARED, r->fd, 0);

		if (p != MAP_FAILED) {
			r->maps += *(volatile __u64 *)p == 0;
			munmap(p, ps);
		}
	}
	return NULL;
}

static void op_setup_race(struct thread *t)
{
	struct race r = { .fd = open(DEVICE, O_RDWR | O_CLOEXEC) };
	struct ummunotify_params p = { .slots = 1 + below(&t->r, 2048),
				       .ring_entries = 1U << (1 + below(&t->r, 10)) };
	__u32 features = WATCH_RING;
	int i, n = 4 + below(&t->r, 16);
	pthread_t helper;
	char *area;
	long ret;

	if (r.fd < 0 || uioctl(r.fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features) ||
	    pthread_create(&helper, NULL, race_mapper, &r)) {
		fail(t, "SETUP race: no file to race on");
		if (r.fd >= 0)
			close(r.fd);
		return;
	}
	for (i = 0; i < n; i++) {
		ret = sysret(ioctl(r.fd, UMMUNOTIFY_SETUP,
				   read_only(t, &p, sizeof(p))));
		expect(t, "SETUP with read-only params (racing mmap)", ret,
		       E(EFAULT), false);
	}
	ret = uioctl(r.fd, UMMUNOTIFY_SETUP, &p);
	atomic_store(&r.stop, true);
	pthread_join(helper, NULL);
	note(t, "SETUP race: %d failed SETUPs, %lu maps, then SETUP = %ld", n,
	     r.maps, ret);
	t->races++;
	if (expect(t, "SETUP after failed ones", ret, 0, false)) {
		area = mmap(NULL, p.mmap_size, PROT_READ, MAP_SHARED, r.fd, 0);
		if (area == MAP_FAILED)
			fail(t, "SETUP race: mmap of the area: %s",
			     strerror(errno));
		else if (load64(area + p.off.counter) || load64(area + p.off.tail))
			fail(t, "SETUP race: a new area shows counter %llu, "
			     "tail %llu", load64(area + p.off.counter),
			     load64(area + p.off.tail));
		if (area != MAP_FAILED)
			munmap(area, p.mmap_size);
	}
	close(r.fd);
}

/*
 * Allocation failures, where the kernel has fault injection: the calls of
 * one thread fail their slab and page allocations at random while it
 * opens, sets up, watches and maps a file of its own.  Each call must
 * then fail with ENOMEM and change nothing, or work.
 */
static void inject(struct thread *t, bool on)
{
	if (pwrite(t->make_it_fail, on ? "1" : "0", 1, 0) != 1)
		fail(t, "make-it-fail: %s", strerror(errno));
}

static bool nomem_or_ok(struct thread *t, const char *what, long ret)
{
	t->nomem += ret == -ENOMEM;
	return expect(t, what, ret, E(ENOMEM), true);
}

static void op_faults(struct thread *t)
{
	struct ummunotify_params p = { .slots = 8, .ring_entries = 16 };
	__u32 features = WATCH_RING;
	int fd, i, n = 1 + below(&t->r, 8), watched = 0;
	char *area = MAP_FAILED;
	long ret;

	if (!faults)
		return;
	t->faults++;
	inject(t, true);
	fd = open(DEVICE, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	inject(t, false);
	if (!nomem_or_ok(t, "open with failing allocations", fd < 0 ? -errno : 0) ||
	    fd < 0)
		return;
	ret = uioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, &features);
	expect(t, "EXCHANGE_FEATURES", ret, 0, false);
	inject(t, true);
	ret = uioctl(fd, UMMUNOTIFY_SETUP, &p);
	inject(t, false);
	note(t, "SETUP with failing allocations = %ld", ret);
	if (nomem_or_ok(t, "SETUP with failing allocations", ret) && ret) {
		/* Nothing changed: it can be set up now. */
		p = (struct ummunotify_params) { .slots = 8, .ring_entries = 16 };
		ret = uioctl(fd, UMMUNOTIFY_SETUP, &p);
		expect(t, "SETUP after one that ran out of memory", ret, 0,
		       false);
	}
	if (!ret) {
		inject(t, true);
		area = mmap(NULL, p.mmap_size, PROT_READ, MAP_SHARED, fd, 0);
		inject(t, false);
		nomem_or_ok(t, "mmap with failing allocations",
			    area == MAP_FAILED ? -errno : 0);
	}
	for (i = 0; !ret && i < n; i++) {
		struct ummunotify_watch w = {
			.start = (uintptr_t)page(t, below(&t->r, SMALL_PAGES)),
			.user_cookie = i,
		};
		bool native = chance(&t->r, 50);
		long wret;

		w.end = w.start + ps;
		inject(t, true);
		wret = uioctl(fd, native ? UMMUNOTIFY_WATCH
					 : UMMUNOTIFY_REGISTER_REGION, &w);
		inject(t, false);
		nomem_or_ok(t, "WATCH with failing allocations", wret);
		watched += !wret;
		if (native && area != MAP_FAILED && !wret && w.slot < p.slots &&
		    !load64(area + p.off.generations + w.slot * 8))
			fail(t, "a watch made while allocations failed has "
			     "generation 0");
	}
	if (!ret && fdinfo(fd, "regions") != watched)
		fail(t, "fdinfo shows %lld regions after %d watches worked",
		     fdinfo(fd, "regions"), watched);
	note(t, "faults: %d of %d watches worked", watched, n);
	if (area != MAP_FAILED)
		munmap(area, p.mmap_size);
	close(fd);
}

/* A shared cookie on a shared file: racing WATCH, RESIZE, UNREGISTER. */
static void op_shared(struct thread *t)
{
	int fi = below(&t->r, SHARED_FILES);
	struct ufile *f = use_file(fi);
	struct ummunotify_watch w = { 0 };
	uint64_t errs = E(EINVAL) | E(EBUSY), start, end;
	unsigned long cmd;
	long ret;

	if (!f)
		return;
	pick_range(t, &start, &end);
	w.start = tagged(t, start);
	w.end = tagged(t, end);
	w.user_cookie = SHARED_COOKIE + below(&t->r, SHARED_COOKIES);
	switch (below(&t->r, 4)) {
	case 0:
		cmd = UMMUNOTIFY_WATCH;
		errs = E(EINVAL) | E(ENOSPC);
		break;
	case 1:
		cmd = UMMUNOTIFY_REGISTER_REGION;
		errs = E(EINVAL) | E(ENOSPC);
		break;
	case 2:
		cmd = UMMUNOTIFY_RESIZE;
		errs |= E(ENOSPC);
		break;
	default:
		cmd = UMMUNOTIFY_UNREGISTER_REGION;
		break;
	}
	ret = uioctl(f->fd, cmd, cmd == UMMUNOTIFY_UNREGISTER_REGION ?
		     (void *)&w.user_cookie : (void *)&w);
	note(t, "shared cookie %#llx cmd %#lx file %d = %ld", w.user_cookie,
	     cmd, fi, ret);
	if (still_open(f))
		expect(t, "a call on a shared cookie", ret, errs, true);
	if (!ret && has_watch(f) && cmd == UMMUNOTIFY_WATCH)
		saw_gen(t, f, w.generation, w.user_cookie, "WATCH");
	put_file(f);
}

enum op { O_WATCH, O_UNWATCH, O_RESIZE, O_CHURN, O_HUGE, O_RECLAIM, O_READ,
	  O_RING, O_MMAP, O_IOCTL, O_FORK, O_CLOSE, O_SETUP_RACE, O_FAULTS,
	  O_SHARED, NR_OPS };

static const unsigned int weights[NR_OPS] = {
	[O_WATCH] = 18, [O_UNWATCH] = 6, [O_RESIZE] = 5, [O_CHURN] = 28,
	[O_HUGE] = 1, [O_RECLAIM] = 1, [O_READ] = 10, [O_RING] = 6,
	[O_MMAP] = 8, [O_IOCTL] = 8, [O_FORK] = 1, [O_CLOSE] = 1,
	[O_SETUP_RACE] = 1, [O_FAULTS] = 1, [O_SHARED] = 5,
};

static enum op pick_op(struct thread *t)
{
	unsigned int total = 0, i, n;

	for (i = 0; i < NR_OPS; i++)
		total += weights[i];
	n = below(&t->r, total);
	for (i = 0; n >= weights[i]; i++)
		n -= weights[i];
	return i;
}

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	unsigned int i;

	t->make_it_fail = faults ? open("/proc/thread-self/make-it-fail",
					O_WRONLY | O_CLOEXEC) : -1;
	for (t->op = 1; t->op <= t->ops && t->failures < MAX_FAILURES;
	     t->op++) {
		enum op op = pick_op(t);
		int fi;

		switch (op) {
		case O_WATCH:
			op_watch(t);
			break;
		case O_UNWATCH:
			op_unwatch(t);
			break;
		case O_RESIZE:
			op_resize(t);
			break;
		case O_CHURN:
			op_churn(t);
			break;
		case O_HUGE:
			op_huge(t);
			break;
		case O_RECLAIM:
			op_reclaim(t);
			break;
		case O_READ:
			op_read(t);
			break;
		case O_RING:
			op_ring(t);
			break;
		case O_MMAP:
			op_mmap(t);
			break;
		case O_IOCTL:
			op_ioctl(t);
			break;
		case O_FORK:
			op_fork(t);
			break;
		case O_SETUP_RACE:
			op_setup_race(t);
			break;
		case O_FAULTS:
			op_faults(t);
			break;
		case O_SHARED:
			op_shared(t);
			break;
		default:
			fi = pick_file(t);
			if (__atomic_load_n(&R.files[fi].state,
					    __ATOMIC_ACQUIRE) == F_CLOSED)
				open_file(t, fi);
			else
				close_file(t, fi);
			break;
		}
	}
	for (i = 0; i < 4; i++)
		if (t->children[i])
			reap(t, t->children[i]);
	if (t->make_it_fail >= 0)
		close(t->make_it_fail);
	return NULL;
}

/*
 * The end of a round: every event still pending is taken, then every
 * invalidation a thread caused must have been reported, but for as many
 * as the ring says it dropped.
 */
static void check_reported(struct thread *t, int fi)
{
	struct ufile *f = use_file(fi);
	uint64_t missing = 0, hits = 0, seen = 0;
	int i;
	unsigned int j;

	if (!f)
		return;
	pthread_mutex_lock(&f->consume);
	drain(t, f, fi);
	pthread_mutex_unlock(&f->consume);
	for (i = 0; i < R.threads; i++) {
		for (j = 0; j < R.t[i].nr_w; j++) {
			struct watch *w = &R.t[i].w[j];

			if (w->file != fi || w->epoch != f->epoch || !w->hits)
				continue;
			hits += w->hits;
			seen += atomic_load(&w->seen);
			if (has_ring(f)) {
				unsigned int n = atomic_load(&w->seen);

				missing += w->hits > n ? w->hits - n : 0;
			} else if (w->live &&
				   atomic_load(&w->read_seq) <= w->hit_seq) {
				fail(t, "cookie %#" PRIx64 " of file %d was "
				     "invalidated, and no report was read "
				     "after it", cookie_of(&R.t[i], j), fi);
			}
		}
	}
	say("# p%d file %d (%s): %" PRIu64 " invalidations caused, %" PRIu64
	    " events for them, %" PRIu64 " missing, %llu dropped%s", R.proc, fi,
	    mode_names[f->mode], hits, seen, missing,
	    has_ring(f) ? dropped(f) : 0, f->garbage_head ? ", garbage head" : "");
	if (has_ring(f) && missing > dropped(f))
		fail(t, "file %d: %" PRIu64 " invalidations have no event, "
		     "and the ring dropped %llu", fi, missing, dropped(f));
	put_file(f);
}

static void on_signal(int sig)
{
	(void)sig;
}

static char *map_span(struct thread *t)
{
	char *base = (char *)(uintptr_t)(ARENA_BASE + t->index * SPAN_BYTES);
	char *p = mmap(base, SPAN_BYTES, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	/* Reserved only to prove it free: the thread maps into it. */
	if (p != base)
		return NULL;
	munmap(p, SPAN_BYTES);
	return base;
}

/*
 * A zapper: madvise(MADV_DONTNEED) of 1 to 64 pages of any thread's span,
 * mapped or not (ENOMEM then), until the threads have ended.  About a
 * thousand a second: enough to race the threads' calls, not so many that
 * the rings drop most events, which would hide a missing one.
 */
static void *zapper_main(void *arg)
{
	struct rng r = { .s = (uintptr_t)arg };
	size_t pages = SPAN_BYTES / ps, first, n;
	struct thread *t;

	while (!atomic_load(&R.zapping_done)) {
		t = &R.t[below(&r, R.threads)];
		first = below(&r, pages);
		n = 1 + below(&r, 64);
		if (n > pages - first)
			n = pages - first;
		madvise(t->span + first * ps, n * ps, MADV_DONTNEED);
		atomic_fetch_add(&R.zaps, 1);
		usleep(below(&r, 2000));
	}
	return NULL;
}

/* One process of a round.  Exits 0 if every check held. */
static int run_process(uint64_t seed, int proc, int threads, unsigned long ops,
		       int only, int zappers)
{
	pthread_t zapper[MAX_ZAPPERS];
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	int i;

	sigaction(SIGIO, &sa, NULL);
	sigaction(SIGRTMIN + 1, &sa, NULL);
	R.proc = proc;
	R.threads = threads;
	R.seed = seed;
	R.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (i = 0; i < MAX_FILES; i++) {
		struct ufile *f = &R.files[i];

		pthread_mutex_init(&f->lock, NULL);
		pthread_mutex_init(&f->consume, NULL);
		pthread_mutex_init(&f->gens_lock, NULL);
		f->owner = i < SHARED_FILES ? -1 : i - SHARED_FILES;
		f->gens = calloc(GEN_TABLE, sizeof(*f->gens));
		if (!f->gens)
			return 2;
	}
	for (i = 0; i < threads; i++) {
		struct thread *t = &R.t[i];

		t->proc = proc;
		t->index = i;
		t->seed = mix(seed, proc * MAX_THREADS + i + 1);
		t->r.s = t->seed;
		t->ops = ops;
		t->max_w = ops + 16;
		t->w = calloc(t->max_w, sizeof(*t->w));
		t->scratch = mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t->span = map_span(t);
		if (!t->w || t->scratch == MAP_FAILED || !t->span) {
			say("# p%d: no memory for thread %d", proc, i);
			return 2;
		}
		mprotect(t->scratch + ps, ps, PROT_NONE);
		t->ro = t->scratch + 2 * ps;
	}
	/* The files, as the round's seed has them, before any thread runs. */
	for (i = 0; i < SHARED_FILES + threads; i++)
		open_file(&R.t[0], i);
	for (i = 0; i < threads; i++)
		if ((only < 0 || only == i) &&
		    pthread_create(&R.t[i].id, NULL, thread_main, &R.t[i]))
			return 2;
	if (only >= 0)
		zappers = 0;
	for (i = 0; i < zappers; i++)
		if (pthread_create(&zapper[i], NULL, zapper_main,
				   (void *)(uintptr_t)mix(seed, ~(uint64_t)i)))
			return 2;
	for (i = 0; i < threads; i++)
		if (only < 0 || only == i)
			pthread_join(R.t[i].id, NULL);
	atomic_store(&R.zapping_done, true);
	for (i = 0; i < zappers; i++)
		pthread_join(zapper[i], NULL);
	if (zappers)
		say("# p%d: %d zappers, %lu madvise(MADV_DONTNEED) calls", proc,
		    zappers, atomic_load(&R.zaps));
	for (i = 0; i < SHARED_FILES + threads; i++) {
		check_reported(&R.t[0], i);
		close_file(&R.t[0], i);
	}
	for (i = 0; i < threads; i++) {
		struct thread *t = &R.t[i];

		say("# p%d.t%d: %lu operations, %lu watches, %lu invalidations "
		    "of them checked, %lu events read, %lu forks, %lu closes, "
		    "%lu SETUP races, %lu with failing allocations (%lu calls "
		    "failed with ENOMEM)", proc, i, t->op - 1, t->watches,
		    t->checked, t->events, t->forks, t->closes, t->races,
		    t->faults, t->nomem);
		munmap(R.t[i].span, SPAN_BYTES);
		if (R.t[i].failures >= MAX_FAILURES)
			say("# p%d.t%d stopped after %d failures", proc, i,
			    R.t[i].failures);
	}
	return atomic_load(&R.failures) ? 1 : 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t number(const char *s, const char *what)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || !*s || *end) {
		fprintf(stderr, "fuzz: bad %s: %s\n", what, s);
		exit(2);
	}
	return v;
}


/*
 * A round's process that does not end in time is stuck, most likely in
 * the kernel: show where (its threads' kernel stacks), then give up.
 */
static int wait_round(pid_t pid, double deadline)
{
	char path[300], stack[2048];
	struct dirent *task;
	int status;
	pid_t got;
	DIR *dir;

	while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now() < deadline)
		usleep(50000);
	if (got == pid)
		return WIFEXITED(status) ? WEXITSTATUS(status)
					 : 128 + WTERMSIG(status);
	say("# process %d did not end in time; its threads' kernel stacks:",
	    pid);
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	while (dir && (task = readdir(dir))) {
		if (task->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stack", pid,
			 task->d_name);
		if (!read_file(path, stack, sizeof(stack)))
			say("# task %s:\n%s", task->d_name, stack);
	}
	if (dir)
		closedir(dir);
	/* Running tasks show no stack there: have the kernel log them. */
	write_file("/proc/sysrq-trigger", "l");
	write_file("/proc/sysrq-trigger", "w");
	kill(pid, SIGKILL);
	return -1;
}

/*
 * Fault injection for the threads that ask for it (make-it-fail), half
 * of their slab and page allocations, but not the pages of user memory.
 */
static bool setup_faults(void)
{
	static const char *const dirs[] = {
		"/sys/kernel/debug/failslab/",
		"/sys/kernel/debug/fail_page_alloc/",
	};
	static const char *const attrs[][2] = {
		{ "task-filter", "Y" }, { "probability", "50" },
		{ "interval", "1" }, { "times", "-1" }, { "verbose", "0" },
		{ "ignore-gfp-wait", "N" }, { "ignore-gfp-highmem", "Y" },
		{ "min-order", "0" },
	};
	char path[128];
	unsigned int d, a;

	for (d = 0; d < 2; d++) {
		if (access(dirs[d], F_OK))
			return false;
		for (a = 0; a < sizeof(attrs) / sizeof(attrs[0]); a++) {
			snprintf(path, sizeof(path), "%s%s", dirs[d],
				 attrs[a][0]);
			/* Not every attribute is in both. */
			if (!access(path, F_OK) && write_file(path, attrs[a][1]))
				return false;
		}
	}
	return true;
}

/*
 * The module's tracepoints into the kernel's trace buffer for the run
 * (tracefs mounted if it is not), so that a missed invalidation can show
 * what the kernel did.
 */
static void trace_on(bool on)
{
	if (on && access("/sys/kernel/tracing/trace", F_OK))
		mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	/* The process of each line: cookies are the same in each. */
	if (on && !write_file("/sys/kernel/tracing/options/record-tgid", "1") &&
	    !write_file("/sys/kernel/tracing/events/ummunotify/enable", "1"))
		tracing = "/sys/kernel/tracing";
	if (!on && tracing)
		write_file("/sys/kernel/tracing/events/ummunotify/enable", "0");
}

/* The module's counts once every file of the round is closed. */
static bool counts_back_to_zero(char *why, size_t len)
{
	long long files = -1, regions = -1;
	int i;

	/*
	 * A file's last reference may go a moment after its process, or
	 * longer on a loaded debug kernel: 30 s, as hardening_test allows.
	 */
	for (i = 0; i < 300; i++) {
		files = sysfs("files");
		regions = sysfs("regions");
		if (!files && !regions)
			return true;
		usleep(100000);
	}
	snprintf(why, len, "sysfs shows %lld files and %lld regions after "
		 "every file was closed", files, regions);
	return false;
}

static void usage(void)
{
	fprintf(stderr, "usage: fuzz [-s SEED] [-r ROUNDS | -t SECONDS] [-f FIRST]"
		" [-p PROCS] [-j THREADS] [-z ZAPPERS] [-n OPS] [-o P.T]"
		" [-w LIMIT] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	/* The bounded run of make check: under 3 minutes on the debug kernel. */
	uint64_t seed, rounds = 4, first = 1, ops = 1200, r;
	int procs = 2, threads = 3, only_proc = -1, only_thread = -1, opt;
	int zappers = 1;
	double seconds = 0, start, round_limit = 600;
	const char *env;
	unsigned int passed = 0, failed = 0;

	ps = sysconf(_SC_PAGESIZE);
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL;
	env = getenv("UMMUNOTIFY_FUZZ_SEED");
	if (env && *env)
		seed = number(env, "UMMUNOTIFY_FUZZ_SEED");
	env = getenv("UMMUNOTIFY_FUZZ_SECONDS");
	if (env && *env)
		seconds = number(env, "UMMUNOTIFY_FUZZ_SECONDS");
	while ((opt = getopt(argc, argv, "s:r:t:f:p:j:z:n:o:w:v")) != -1) {
		switch (opt) {
		case 's':
			seed = number(optarg, "seed");
			break;
		case 'r':
			rounds = number(optarg, "rounds");
			seconds = 0;
			break;
		case 't':
			seconds = number(optarg, "seconds");
			break;
		case 'f':
			first = number(optarg, "first round");
			break;
		case 'p':
			procs = number(optarg, "processes");
			break;
		case 'j':
			threads = number(optarg, "threads");
			break;
		case 'z':
			zappers = number(optarg, "zappers");
			break;
		case 'n':
			ops = number(optarg, "operations");
			break;
		case 'o':
			if (sscanf(optarg, "%d.%d", &only_proc, &only_thread) != 2)
				usage();
			break;
		case 'w':
			round_limit = number(optarg, "round limit");
			break;
		case 'v':
			verbose = true;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || procs < 1 || procs > MAX_PROCS || threads < 1 ||
	    threads > MAX_THREADS || zappers < 0 || zappers > MAX_ZAPPERS ||
	    only_proc >= procs ||
	    only_thread >= threads || !ops)
		usage();

#if defined(__aarch64__)
	/*
	 * TASK_SIZE on arm64: 1 << VA_BITS, no guard page.  VA_BITS follows
	 * the page size and the levels of tables: 36 (16K pages, 2 levels),
	 * 39 (4K, 3), 42 (64K, 2), 47 (16K, 3), 48 (any, Debian's kernels),
	 * 52 (64K with LVA, or LPA2 from 6.9).  It is the largest B of these
	 * for which this process can map the page just below 1 << B; EEXIST
	 * (something is there already) says so too.
	 */
	{
		static const int va_bits[] = { 52, 48, 47, 42, 39, 36, 0 };
		const int *b;

		for (b = va_bits; *b; b++) {
			void *want = (void *)((1ULL << *b) - ps);
			void *p = mmap(want, ps, PROT_NONE,
				       MAP_PRIVATE | MAP_ANONYMOUS |
				       MAP_FIXED_NOREPLACE, -1, 0);

			if (p != MAP_FAILED)
				munmap(p, ps);
			if (p == want || (p == MAP_FAILED && errno == EEXIST))
				break;
		}
		if (!*b) {
			fprintf(stderr, "fuzz: no arm64 TASK_SIZE fits\n");
			exit(1);
		}
		task_size = 1ULL << *b;
	}
#else
	/* TASK_SIZE: the 57-bit one only if this process can map above 47. */
	{
		void *p = mmap((void *)(1ULL << 47), ps, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			       -1, 0);

		task_size = p == MAP_FAILED ? (1ULL << 47) - ps
					    : (1ULL << 56) - ps;
		if (p != MAP_FAILED)
			munmap(p, ps);
	}
#endif
	max_regions = read_number(MAX_REGIONS);
	max_overlap = read_number(MAX_OVERLAP);
	faults = setup_faults();
	trace_on(true);

	setvbuf(stdout, NULL, _IONBF, 0);
	say("TAP version 13");
	if (!seconds)
		say("1..%" PRIu64, rounds);
	say("# ummunotify fuzz: seed %#" PRIx64 ", %s %g, %d processes x %d "
	    "threads x %" PRIu64 " operations a round, %d zappers a process",
	    seed, seconds ? "seconds" : "rounds",
	    seconds ? seconds : (double)rounds, procs, threads, ops, zappers);
	say("# allocation failure injection: %s",
	    faults ? "failslab and fail_page_alloc, per thread" :
		     "not in this kernel");
	say("# the module's tracepoints: %s", tracing ? "traced, shown on a "
	    "missed invalidation" : "not available");
	say("# replay thread T of process P of round R alone: fuzz -s %#"
	    PRIx64 " -f R -r 1 -p %d -j %d -n %" PRIu64 " -o P.T", seed, procs,
	    threads, ops);
	{
		struct stat st;

		if (stat(DEVICE, &st)) {
			say("not ok 1 no " DEVICE " (is the module loaded?)");
			return 1;
		}
		device_rdev = st.st_rdev;
	}
	start = now();
	for (r = first; seconds ? now() - start < seconds : r < first + rounds;
	     r++) {
		uint64_t rseed = mix(seed, r);
		pid_t pids[MAX_PROCS];
		char why[160] = "";
		int p, bad = 0, stalled = 0;
		double t0 = now();

		for (p = 0; p < procs; p++) {
			char line[400];
			int n = 0, i;

			for (i = 0; i < threads; i++)
				n += snprintf(line + n, sizeof(line) - n, " %#"
					      PRIx64, mix(rseed,
							  p * MAX_THREADS + i + 1));
			say("# round %" PRIu64 " process %d thread seeds:%s", r,
			    p, line);
		}
		kmsg("ummunotify fuzz: round %" PRIu64 " of seed %#" PRIx64
		     " starts\n", r, seed);
		for (p = 0; p < procs; p++) {
			pids[p] = -1;
			if (only_proc >= 0 && p != only_proc)
				continue;
			pids[p] = fork();
			if (pids[p] == 0)
				_exit(run_process(rseed, p, threads, ops,
						  only_thread, zappers));
		}
		for (p = 0; p < procs; p++) {
			int status;

			if (pids[p] < 0)
				continue;
			status = wait_round(pids[p], t0 + round_limit);
			if (status < 0) {
				bad = stalled = 1;
				snprintf(why, sizeof(why), "process %d stalled "
					 "for %.0f s", p, round_limit);
			} else if (status) {
				bad = 1;
				snprintf(why, sizeof(why), "process %d exited "
					 "with status %d", p, status);
			}
		}
		if (!bad && !counts_back_to_zero(why, sizeof(why)))
			bad = 1;
		if (stalled) {
			/* Its files are still open: no later round can pass. */
			say("not ok %u round %" PRIu64 " seed %#" PRIx64 ": %s",
			    passed + failed + 1, r, seed, why);
			say("1..%u", passed + failed + 1);
			return 1;
		}
		kmsg("ummunotify fuzz: round %" PRIu64 " ends\n", r);
		say("%sok %u round %" PRIu64 " seed %#" PRIx64 " (%.1f s)%s%s",
		    bad ? "not " : "", passed + failed + 1, r, seed,
		    now() - t0, bad ? ": " : "", why);
		if (bad)
			failed++;
		else
			passed++;
	}
	trace_on(false);
	if (seconds)
		say("1..%u", passed + failed);
	say("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:0 error:0", passed,
	    failed);
	return failed ? 1 : 0;
}
