// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Opening, closing and forking; the calls every implementation shares.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunotify.h>

#include "internal.h"

#define UMN_DEVICE	"/dev/ummunotify"
#define UMN_NATIVE	(UMMUNOTIFY_FEATURE_WATCH | UMMUNOTIFY_FEATURE_RING)

/* The library's names are the kernel's numbers. */
#define UMN_SAME(name)	((int)UMN_##name == (int)UMMUNOTIFY_##name)
_Static_assert(UMN_SAME(CAUSE_UNMAP) && UMN_SAME(CAUSE_CLEAR) &&
	       UMN_SAME(CAUSE_PROTECTION) && UMN_SAME(CAUSE_SOFT_DIRTY) &&
	       UMN_SAME(CAUSE_MIGRATE) && UMN_SAME(CAUSE_RELEASE) &&
	       UMN_SAME(CAUSE_OVERFLOW) && UMN_SAME(CAUSE_PRESSURE) &&
	       UMN_SAME(CAUSES_DEFAULT), "causes");
_Static_assert(UMN_SAME(FEATURE_WATCH) && UMN_SAME(FEATURE_RING) &&
	       UMN_SAME(FEATURE_PRESSURE), "features");

/* Causes a watch may ask for: the rest are not about one range. */
#define UMN_WATCH_CAUSES	((1U << UMN_CAUSE_UNMAP) | \
				 (1U << UMN_CAUSE_CLEAR) | \
				 (1U << UMN_CAUSE_PROTECTION) | \
				 (1U << UMN_CAUSE_SOFT_DIRTY) | \
				 (1U << UMN_CAUSE_MIGRATE) | \
				 (1U << UMN_CAUSE_RELEASE))

static pthread_mutex_t umn_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct umn *umn_list;
static pthread_once_t umn_fork_once = PTHREAD_ONCE_INIT;

/*
 * What a forked child's umn_changed() reads until it reopens the device:
 * "something changed", so that the next umn_drain() reopens and reports
 * the loss of every watch.
 */
static const uint64_t umn_forked_produced = 1;
static const uint64_t umn_forked_consumed;
/* A forked child's whole-space word until it reopens: no generation. */
static const uint64_t umn_forked_word = UINT64_MAX;

static void umn_init_locks(struct umn *u)
{
	pthread_mutexattr_t attr;

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&u->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	pthread_mutex_init(&u->pull_lock, NULL);
}

/*
 * Hold every lock across fork(), so that the child's copy of each handle
 * and cache is consistent, not caught halfway through a change.
 */
static void umn_fork_prepare(void)
{
	struct umn *u;

	pthread_mutex_lock(&umn_list_lock);
	for (u = umn_list; u; u = u->next_open) {
		pthread_mutex_lock(&u->lock);
		if (u->cache)
			umn__cache_fork_prepare(u->cache);
		pthread_mutex_lock(&u->pull_lock);
	}
}

static void umn_fork_parent(void)
{
	struct umn *u;

	for (u = umn_list; u; u = u->next_open) {
		pthread_mutex_unlock(&u->pull_lock);
		if (u->cache)
			umn__cache_fork_parent(u->cache);
		pthread_mutex_unlock(&u->lock);
	}
	pthread_mutex_unlock(&umn_list_lock);
}

/*
 * The child's watches are the parent's: the device serves only the
 * address space that opened it, and the pages the parent registered are
 * not the child's.  Put zeroes where the generation words were, so that
 * every watch reads invalid (generations are never 0), and let the next
 * call that takes the lock reopen the device.  The mappings were
 * MADV_DONTFORK: without this handler (raw clone()) a child faults
 * instead of trusting its parent's words.
 */
static void umn_fork_child(void)
{
	struct umn *u;
	unsigned int i;

	for (u = umn_list; u; u = u->next_open) {
		/* Recursive mutexes know their owner by thread id: new here. */
		umn_init_locks(u);
		if (u->cache)
			umn__cache_fork_child(u->cache);
		for (i = 0; i < u->nr_maps; i++)
			mmap(u->maps[i].addr, u->maps[i].len, u->maps[i].prot,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		WRITE_ONCE(u->fast.pull_counter, NULL);
		WRITE_ONCE(u->fast.produced, &umn_forked_produced);
		WRITE_ONCE(u->fast.consumed, &umn_forked_consumed);
		/* Not the zeroes: they would match the 0 of a reopen's. */
		u->all.word = &umn_forked_word;
		u->all.generation = 0;
		u->forked = true;
	}
	pthread_mutex_unlock(&umn_list_lock);
}

static void umn_register_fork_handlers(void)
{
	pthread_atfork(umn_fork_prepare, umn_fork_parent, umn_fork_child);
}

int umn__add_map(struct umn *u, void *addr, size_t len, int prot, bool words)
{
	if (u->nr_maps == UMN_MAX_MAPS)
		return -ENOMEM;
	madvise(addr, len, MADV_DONTFORK);
	u->maps[u->nr_maps++] = (struct umn_map){ addr, len, prot, words };
	return 0;
}

/* Open the device and exchange features: the descriptor or -errno. */
static int umn_open_device(uint32_t *features)
{
	/* Read-write: the ring's head page is mapped writable. */
	int fd = open(UMN_DEVICE, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	int ret;

	if (fd < 0)
		/* No node, or a node without the module behind it. */
		return errno == ENOENT || errno == ENODEV || errno == ENXIO ?
		       -ENODEV : -errno;
	if (ioctl(fd, UMMUNOTIFY_EXCHANGE_FEATURES, features)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

static int umn_kernel_setup(struct umn *u)
{
	uint32_t features = u->attr.flags & UMN_OPEN_LEGACY ? 0 :
			    UMN_NATIVE | UMMUNOTIFY_FEATURE_PRESSURE;
	int fd = umn_open_device(&features);

	if (fd >= 0 && features && (features & UMN_NATIVE) != UMN_NATIVE) {
		/* Half the native ABI is no use: start again with none. */
		close(fd);
		features = 0;
		fd = umn_open_device(&features);
	}
	if (fd < 0)
		return fd;
	u->fd = fd;
	if (features)
		return umn__native_setup(u, features);
	u->source = &umn__legacy_source;
	return umn__emulated_setup(u);
}

/* Words of a forked parent's file, still read by its watches. */
static void umn_retire(struct umn *u, const struct umn_map *map)
{
	struct umn_map *retired = realloc(u->retired, (u->nr_retired + 1) *
					  sizeof(*retired));

	/* Out of memory: leak the mapping rather than fault on it. */
	if (!retired)
		return;
	u->retired = retired;
	u->retired[u->nr_retired++] = *map;
}

/* Undo u->setup(); keep_words: retire the mappings holding words. */
static void umn_teardown(struct umn *u, bool keep_words)
{
	unsigned int i;

	u->ops = NULL;
	for (i = 0; i < u->nr_maps; i++) {
		if (keep_words && u->maps[i].words)
			umn_retire(u, &u->maps[i]);
		else
			munmap(u->maps[i].addr, u->maps[i].len);
	}
	u->nr_maps = 0;
	free(u->slots);
	u->slots = NULL;
	u->nr_slots = 0;
	/* Closing the file unwatches them; a forked parent's, the parent. */
	u->nr_unwatched = 0;
	free(u->records);
	u->records = NULL;
	if (u->poll_fd >= 0)
		close(u->poll_fd);
	if (u->wake_fd >= 0)
		close(u->wake_fd);
	if (u->fd >= 0)
		close(u->fd);
	u->fd = u->poll_fd = u->wake_fd = -1;
}

/* u->setup(), and the whole-space watch if asked for. */
static int umn_setup(struct umn *u)
{
	int ret = u->setup(u);

	if (ret || !u->has_all)
		return ret;
	return u->ops->watch(u, 0, 0, UMN_CAUSES_DEFAULT, &u->all);
}

int umn_wait_invalidations(struct umn *u)
{
	/* A forked child reads zeroes there until it reopens. */
	const uint64_t *in_flight = READ_ONCE(u->in_flight);

	if (!in_flight)
		return u->has_all ? -EOPNOTSUPP : 0;
	/*
	 * Acquire: pairs with atomic64_dec_return_release() in the kernel's
	 * umn_all_end_range(): the page tables changed before the count.
	 */
	while (load_acquire(*in_flight))
		sched_yield();
	return 0;
}

int umn__lock(struct umn *u)
{
	int ret;

	pthread_mutex_lock(&u->lock);
	if (!u->forked)
		return 0;
	/* Also what a failed attempt left: the next call tries again. */
	umn_teardown(u, true);
	ret = umn_setup(u);
	if (ret) {
		pthread_mutex_unlock(&u->lock);
		return ret;
	}
	u->forked = false;
	WRITE_ONCE(u->lost, true);
	return 0;
}

void umn__unlock(struct umn *u)
{
	pthread_mutex_unlock(&u->lock);
}

static int umn_open_common(struct umn **up, const struct umn_attr *attr,
			   const struct umn_source *source, void *priv)
{
	struct umn *u;
	int ret;

	if (attr && (attr->comp_mask ||
		     attr->flags & ~(UMN_OPEN_LEGACY | UMN_OPEN_WATCH_ALL) ||
		     (attr->ring_entries & (attr->ring_entries - 1))))
		return -EINVAL;
	pthread_once(&umn_fork_once, umn_register_fork_handlers);

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	if (attr)
		u->attr = *attr;
	u->setup = source ? umn__emulated_setup : umn_kernel_setup;
	u->source = source;
	u->source_priv = priv;
	u->has_all = u->attr.flags & UMN_OPEN_WATCH_ALL;
	u->fd = u->poll_fd = u->wake_fd = -1;
	umn_init_locks(u);

	ret = umn_setup(u);
	if (ret) {
		umn_teardown(u, false);
		pthread_mutex_destroy(&u->pull_lock);
		pthread_mutex_destroy(&u->lock);
		free(u);
		return ret;
	}

	pthread_mutex_lock(&umn_list_lock);
	u->next_open = umn_list;
	umn_list = u;
	pthread_mutex_unlock(&umn_list_lock);
	*up = u;
	return 0;
}

int umn_open(struct umn **up, const struct umn_attr *attr)
{
	return umn_open_common(up, attr, NULL, NULL);
}

int umn__open_source(struct umn **up, const struct umn_attr *attr,
		     const struct umn_source *source, void *priv)
{
	return umn_open_common(up, attr, source, priv);
}

int umn_close(struct umn *u)
{
	struct umn **link;
	unsigned int i;

	if (!u)
		return 0;
	pthread_mutex_lock(&u->lock);
	if (u->cache) {
		pthread_mutex_unlock(&u->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&u->lock);

	pthread_mutex_lock(&umn_list_lock);
	for (link = &umn_list; *link != u; link = &(*link)->next_open)
		;
	*link = u->next_open;
	pthread_mutex_unlock(&umn_list_lock);

	umn_teardown(u, false);
	for (i = 0; i < u->nr_retired; i++)
		munmap(u->retired[i].addr, u->retired[i].len);
	free(u->retired);
	pthread_mutex_destroy(&u->pull_lock);
	pthread_mutex_destroy(&u->lock);
	free(u);
	return 0;
}

/* One cache per handle: it takes every event the handle reports. */
int umn__attach_cache(struct umn *u, struct umn_cache *c)
{
	int ret = 0;

	pthread_mutex_lock(&u->lock);
	if (c && u->cache)
		ret = -EBUSY;
	else
		u->cache = c;
	pthread_mutex_unlock(&u->lock);
	return ret;
}

unsigned int umn_features(struct umn *u)
{
	return READ_ONCE(u->features);
}

int umn_fd(struct umn *u)
{
	int ret = umn__lock(u);

	if (ret)
		return ret;
	ret = u->poll_fd >= 0 ? u->poll_fd : u->fd;
	umn__unlock(u);
	return ret;
}

/*
 * [addr, addr + len) is a range of this process's address space: in 64
 * bits, start + len of a 32-bit process would not wrap where it should.
 */
static bool umn_range_ok(const void *addr, size_t len)
{
	return len && len <= UINTPTR_MAX - (uintptr_t)addr;
}

int umn_watch(struct umn *u, const void *addr, size_t len,
	      unsigned int causes, struct umn_watch *w)
{
	uint64_t start = (uintptr_t)addr;
	int ret;

	if (!umn_range_ok(addr, len) || causes & ~UMN_WATCH_CAUSES)
		return -EINVAL;
	/* The kernel always reports RELEASE: say so. */
	causes = (causes ? causes : UMN_CAUSES_DEFAULT) |
		 1U << UMN_CAUSE_RELEASE;

	ret = umn__lock(u);
	if (ret)
		return ret;
	ret = u->ops->watch(u, start, start + len, causes, w);
	umn__unlock(u);
	return ret;
}

/*
 * Is w watched on u now, by umn_watch()?  Not if unwatched, made before a
 * fork, or the whole-space watch, which lasts as long as u.
 */
static bool umn_is_watched(struct umn *u, const struct umn_watch *w)
{
	return w->slot < u->nr_slots && u->slots[w->slot].watch == w &&
	       u->slots[w->slot].cookie == w->cookie && w != &u->all;
}

static int umn_unwatch_now_or_later(struct umn *u, struct umn_watch *w,
				    bool later)
{
	int ret = umn__lock(u);

	if (ret)
		return ret;
	if (!umn_is_watched(u, w))
		ret = -ENOENT;
	else if (later && u->ops->unwatch_later)
		ret = u->ops->unwatch_later(u, w);
	else
		ret = u->ops->unwatch(u, w);
	umn__unlock(u);
	return ret;
}

int umn_unwatch(struct umn *u, struct umn_watch *w)
{
	return umn_unwatch_now_or_later(u, w, false);
}

int umn__unwatch_later(struct umn *u, struct umn_watch *w)
{
	return umn_unwatch_now_or_later(u, w, true);
}

/* Not umn__lock(): a forked child has nothing queued, nor reopens for it. */
void umn__send_unwatches(struct umn *u)
{
	pthread_mutex_lock(&u->lock);
	if (!u->forked && u->ops->send_unwatches)
		u->ops->send_unwatches(u);
	pthread_mutex_unlock(&u->lock);
}

int umn_resize(struct umn *u, struct umn_watch *w, const void *addr,
	       size_t len)
{
	uint64_t start = (uintptr_t)addr;
	int ret;

	if (!umn_range_ok(addr, len))
		return -EINVAL;
	ret = umn__lock(u);
	if (ret)
		return ret;
	ret = umn_is_watched(u, w) ? u->ops->resize(u, w, start, start + len) :
				     -ENOENT;
	umn__unlock(u);
	return ret;
}

/*
 * u->lock held.  Never back: a loss is reported with the word as it is
 * then, which the events still queued behind the OVERFLOW may be older
 * than (generations only grow, and the loss's flush covered them).
 */
/*
 * u->lock held: w, made now, reads word.  A forked child's reopened
 * whole-space watch keeps the generation 0 its fork handler gave it, which
 * no word holds: it reads invalid, at every step and to threads reading it
 * meanwhile, until the loss umn__lock() queued is reported, so that no
 * entry made by the parent is trusted before.
 */
void umn__watch_made(struct umn *u, struct umn_watch *w, const uint64_t *word,
		     uint64_t generation)
{
	if (!u->forked)
		WRITE_ONCE(w->generation, generation);
	WRITE_ONCE(w->word, word);
}

void umn__all_reported(struct umn *u, uint64_t generation)
{
	/* Pairs with umn_valid(): what fn did is seen with the new value. */
	if (generation > u->all.generation)
		store_release(u->all.generation, generation);
}

void umn__report_loss(struct umn *u, umn_event_fn *fn, void *arg,
		      uint64_t value)
{
	struct umn_event lost = {
		.cause = UMN_CAUSE_OVERFLOW,
		.value = value,
	};
	/* Before fn: what changes after this, fn may not have seen. */
	uint64_t word = u->has_all ? load_acquire(*u->all.word) : 0;

	fn(arg, &lost);
	if (u->has_all)
		umn__all_reported(u, word);
}

/* At most max events to fn; the rest stay queued. */
static int umn_drain_max(struct umn *u, umn_event_fn *fn, void *arg,
			 size_t max)
{
	int ret = umn__lock(u);

	if (ret)
		return ret;
	ret = u->ops->drain(u, fn, arg, max);
	/*
	 * Set by a reopen, or by a failure to pull or to keep a record,
	 * which umn_valid() may make in another thread meanwhile.
	 */
	if (ret >= 0 && (size_t)ret < max &&
	    __atomic_exchange_n(&u->lost, false, __ATOMIC_ACQ_REL)) {
		umn__report_loss(u, fn, arg, 0);
		ret++;
	}
	umn__unlock(u);
	return ret;
}

int umn_drain(struct umn *u, umn_event_fn *fn, void *arg)
{
	return umn_drain_max(u, fn, arg, SIZE_MAX);
}

struct copy_out {
	struct umn_event *events;
	size_t copied;
};

static void copy_event(void *arg, const struct umn_event *event)
{
	struct copy_out *c = arg;

	c->events[c->copied++] = *event;
}

/*
 * umn_drain() into an array, for callers that must not be called back
 * with the handle's lock held.  What does not fit stays queued for the
 * next call.
 */
int umn_read_events(struct umn *u, struct umn_event *events, size_t n)
{
	struct copy_out c = { events, 0 };

	if (!n || n > INT_MAX)
		return -EINVAL;
	return umn_drain_max(u, copy_event, &c, n);
}

const struct umn_watch *umn_watch_all(struct umn *u)
{
	return u->has_all ? &u->all : NULL;
}
