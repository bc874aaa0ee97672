// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libummunotify-ucx: UCX's registration caches (ucs_rcache) told of every
 * change to the memory they registered by /dev/ummunotify, with UCM's
 * libc patches off.  Preloaded, it defines some of UCX's own functions,
 * which UCX's libraries (and Open MPI, for ucm_test_external_events())
 * call through their PLT, and hands each call on to UCX's:
 *
 *   ucs_rcache_create()	 the first one, before UCX subscribes to
 *				 VM_UNMAPPED, opens a whole-address-space
 *				 watch (UMN_OPEN_WATCH_ALL) and marks
 *				 VM_UNMAPPED an external event, so that UCM
 *				 installs no hook for it;
 *   ucs_rcache_get()		 every lookup first catches up: one check of
 *				 the watch (umn_valid(): two loads) and, when
 *				 the kernel published a change, each changed
 *				 range passed to UCX with ucm_vm_munmap(), as
 *				 UCM's hooks would have, once the change has
 *				 reached the page tables;
 *   ucm_test_external_events()	 Open MPI's check that the feed works;
 *   ucs_pgtable_lookup(),	 1.18 only, below.
 *   ucs_rcache_destroy()
 *
 * Why a lookup through ucs_rcache_get() never hands back a registration
 * whose memory changed before it began, in any thread: the module
 * publishes each change (the watch's word) before the changing call
 * returns.  A lookup that begins after that sees the word moved, unless
 * umn_drain() already passed the change on: the watch's generation moves
 * on only after feed() returned for it.  feed() first waits until no
 * invalidation the kernel started is still changing page tables
 * (umn_wait_invalidations()), then passes the range on: a region UCX
 * inserted before that is dropped, at once or from UCX's queue, and one
 * inserted after pins the new pages.  ucm_vm_munmap() reaches the caches
 * synchronously: they drop the overlapping regions at once or queue them,
 * and ucs_rcache_get() takes its fast path only with nothing queued, under
 * the cache's page-table lock, which whoever empties the queue holds for
 * writing until the queued regions are out.  So by the time the handed-on
 * lookup runs, every change published before it began is in the cache.
 * A change published while it runs is seen by the next lookup.
 *
 * In UCX 1.13 every lookup goes through ucs_rcache_get().  From 1.15 on,
 * UCP's lookup (ucp_memh_get(): ucs_rcache_lookup_unsafe()) is inline in
 * libucp: it tests the queue empty, then calls ucs_pgtable_lookup() on the
 * cache's page table, which libucp imports from libucs, so through its
 * PLT, to this library's.  There (1.18) a lookup of a live UCP cache's
 * page table, outside ucs_rcache_get(), hands on only if the cache has
 * drained every range fed so far, and otherwise finds nothing: UCP then
 * takes its slow path, ucs_rcache_get(), which catches up and drains.
 * fed counts the ranges fed, bumped in feed() after ucm_vm_munmap()
 * returned, so before the generation moves on; a cache's drained is fed
 * as read after a catch-up and before a handed-on ucs_rcache_get() of it,
 * raised after that returned, when every range counted was out of it.
 * A lookup that begins after a change's call returned catches up, so
 * reads fed at or past the change's feed; it hands on only with drained
 * at or past that, so after the change's regions were out.
 *
 * A 1.18 cache's page table is known by its place in the cache, learned
 * at start-up: a private cache, ucs_rcache_get() called on it, and the
 * page table UCX passed to ucs_pgtable_lookup() from there.  Page tables
 * of other kinds (UCS's memory-type cache) are handed on untouched.  A
 * hit costs the watch's check, a walk of the live caches (one per UCP
 * context) and two loads; after a change, each cache's next inline
 * lookup takes the slow path once.
 *
 * The lookups of a cache must reach this library: its owner's calls of
 * ucs_rcache_get() (and in 1.18 libucp's of ucs_pgtable_lookup() and the
 * cache's functions).  Slots not bound yet are bound here (another
 * definition ahead in the lookup scope, or RTLD_DEEPBIND, would take them
 * otherwise): 1.18's libucp at start-up, and every owner when it makes a
 * cache.  A release not in supported[], or a 1.18 whose libucp is bound
 * elsewhere, or whose start-up probe fails, is left its own hooks; a
 * cache whose owner is bound elsewhere is refused; the library says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ucm/api/ucm.h>

#include "ummunotify.h"
#include "ummunotify-ucx.h"

/* See ucs_rcache_get() below. */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "ucs_rcache_get() is handed on for x86-64 and AArch64 calling conventions only"
#endif

/*
 * The UCX releases read and tested: in 1.13 every lookup goes through
 * ucs_rcache_get(), in 1.18 UCP's also inline through ucs_pgtable_lookup().
 */
static const struct {
	unsigned int major, minor;
	bool inline_lookups;
} supported[] = { { 1, 13, false }, { 1, 18, true } };

/* Past every user address of x86-64 (57 bits) and AArch64 (52 bits). */
#define ALL_MEMORY		(1ULL << 57)

typedef ucs_status_t rcache_get_fn(void *rcache, void *address, size_t length,
				   uintptr_t a3, uintptr_t a4, uintptr_t a5,
				   uintptr_t a6);
typedef ucs_status_t rcache_get6_fn(void *rcache, void *address,
				    size_t length, uintptr_t a3, uintptr_t a4,
				    uintptr_t a5);
typedef ucs_status_t rcache_create_fn(const void *params, const char *name,
				      void *stats_parent, void **rcache_p);
typedef ucs_status_t test_events_fn(int events);
typedef void vm_munmap_fn(void *addr, size_t length);
typedef void rcache_destroy_fn(void *rcache);
typedef void *pgtable_lookup_fn(const void *pgtable, uintptr_t address);

/*
 * UCX 1.18's ucs_rcache_params_t and ucs_rcache_ops_t (ucs/memory/rcache.h),
 * for the probe's cache and to tell which caches subscribe to VM_UNMAPPED.
 */
struct rcache_ops_118 {
	ucs_status_t (*mem_reg)(void *context, void *rcache, void *arg,
				void *region, uint16_t flags);
	void (*mem_dereg)(void *context, void *rcache, void *region);
	void (*merge)(void *context, void *rcache, void *arg, void *region);
	void (*dump_region)(void *context, void *rcache, void *region,
			    char *buf, size_t max);
};

struct rcache_params_118 {
	size_t region_struct_size;
	int ucm_events;
	int ucm_event_priority;
	const struct rcache_ops_118 *ops;
	void *context;
	int flags;
	unsigned long max_regions;
	size_t max_size;
	size_t max_unreleased;
};

/* 1.13's ucs_rcache_params_t begins so: the alignments went in 1.15. */
struct rcache_params_113 {
	size_t region_struct_size;
	size_t alignment;
	size_t max_alignment;
	int ucm_events;
};

/* Room for 1.18's ucs_rcache_region_t (96 bytes on 64-bit). */
#define PROBE_REGION_SIZE	256
/* UCS_RCACHE_FLAG_NO_PFN_CHECK: the probe registers nothing. */
#define RCACHE_FLAG_NO_PFN_CHECK	1

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool ready;			/* init() has run: acquire */
static bool seven_args;			/* ucs_rcache_get() has 7 (1.15 on) */
static rcache_get_fn *ucx_get;
static rcache_create_fn *ucx_create;
static rcache_destroy_fn *ucx_destroy;
static pgtable_lookup_fn *ucx_lookup;	/* resolved on first use: see there */
static test_events_fn *ucx_test_external;
static vm_munmap_fn *ucx_vm_munmap;

static struct umn *umn;			/* set, with release, once active */
static const struct umn_watch *all;
static struct umn_ucx_status status;	/* counters: atomic */

/*
 * 1.18: guard inline lookups (set before umn is published), where a
 * cache's page table is in it (learned by probe_pgtable()), and the
 * ranges fed so far (see the top).
 */
static bool guard;
static uintptr_t pgtable_offset;
static uint64_t fed;

/*
 * The live caches that subscribe to VM_UNMAPPED, each with the fed count
 * it drained: a list whose entries are never freed, a destroyed cache's
 * reused by the next, so that lookups walk it without a lock.
 */
struct cache {
	void *rcache;		/* NULL: free; set with release */
	uint64_t drained;
	struct cache *next;
};
static struct cache *caches;
static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * This library's thread-locals are read on every hit: static TLS, no
 * __tls_get_addr() call (it is preloaded, so loaded at start-up).
 */
#define HIT_TLS	__thread __attribute__((tls_model("initial-exec")))

/* The cache whose ucs_rcache_get() this thread is in, handed on. */
static HIT_TLS void *in_get;
/* The probe's cache while init() probes, and the page table seen. */
static void *probing;
static const void *probed;

/*
 * The feed test's page, and whether feed() passed on a change covering
 * it: feed() runs under the handle's lock, which the test's catch-up
 * takes after setting probe and before reading probe_seen.
 */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t probe;
static bool probe_seen;

/* UCX's own level: at "info" and more verbose ones, this speaks too. */
static bool info_wanted(void)
{
	static const char *const quiet[] = { "fatal", "error", "warn", "diag" };
	const char *level = getenv("UCX_LOG_LEVEL");
	size_t i;

	if (!level)
		return false;
	for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
		if (!strcasecmp(level, quiet[i]))
			return false;
	return true;
}

/*
 * UCX's own NAME: the next definition after this library's, else the one
 * in library LIB, loaded already, where UCX was dlopen()ed RTLD_LOCAL
 * (Open MPI's components) and RTLD_NEXT does not see it.
 */
static void *ucx_symbol(const char *lib, const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);
	void *handle;

	if (sym)
		return sym;
	handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	if (!handle)
		return NULL;
	sym = dlsym(handle, name);
	dlclose(handle);
	return sym;
}

/* A wrapper called by a UCX whose own function cannot be found. */
static void *target(void *fn, const char *name)
{
	if (!fn) {
		fprintf(stderr, "ummunotify-ucx[%d]: UCX called %s(), but its own cannot be found\n",
			(int)getpid(), name);
		abort();
	}
	return fn;
}

/* supported[]'s index of release V, or -1. */
static int release(const uint32_t v[3])
{
	size_t i;

	for (i = 0; i < sizeof(supported) / sizeof(supported[0]); i++)
		if (v[0] == supported[i].major && v[1] == supported[i].minor)
			return i;
	return -1;
}

/* The first live cache entry of RCACHE, or NULL. */
static struct cache *cache_of(const void *rcache)
{
	struct cache *c;

	for (c = __atomic_load_n(&caches, __ATOMIC_ACQUIRE); c; c = c->next)
		if (__atomic_load_n(&c->rcache, __ATOMIC_ACQUIRE) == rcache)
			return c;
	return NULL;
}

/* UCX's ucs_pgtable_lookup(), found when first needed: see there. */
static void *lookup(const void *pgtable, uintptr_t address)
{
	pgtable_lookup_fn *fn = __atomic_load_n(&ucx_lookup, __ATOMIC_RELAXED);

	if (!fn) {
		fn = target(ucx_symbol("libucs.so.0", "ucs_pgtable_lookup"),
			    "ucs_pgtable_lookup");
		__atomic_store_n(&ucx_lookup, fn, __ATOMIC_RELAXED);
	}
	return fn(pgtable, address);
}

ucs_status_t ucs_rcache_get(void *rcache, void *address, size_t length,
			    uintptr_t a3, uintptr_t a4, uintptr_t a5,
			    uintptr_t a6);
ucs_status_t ucs_rcache_create(const void *params, const char *name,
			       void *stats_parent, void **rcache_p);
void ucs_rcache_destroy(void *rcache);
void *ucs_pgtable_lookup(const void *pgtable, uintptr_t address);
/* This library's own, as the process binds calls to them. */
#define HERE(name, sym) \
	extern __typeof__(sym) name \
		__attribute__((alias(#sym), visibility("hidden")))
HERE(lookup_here, ucs_pgtable_lookup);
HERE(get_here, ucs_rcache_get);
HERE(create_here, ucs_rcache_create);
HERE(destroy_here, ucs_rcache_destroy);

#if defined(__x86_64__)
#define R_JUMP_SLOT	R_X86_64_JUMP_SLOT
#define R_GLOB_DAT	R_X86_64_GLOB_DAT
#else
#define R_JUMP_SLOT	R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT	R_AARCH64_GLOB_DAT
#endif

/*
 * The functions of UCX's whose calls from a cache's owner must reach this
 * library's: in 1.13 the lookup, ucs_rcache_get(), and in 1.18 also the
 * inline lookups' ucs_pgtable_lookup() and the calls that keep the list
 * of caches and drained counts.
 */
static const char *const guarded_names[] = {
	"ucs_pgtable_lookup", "ucs_rcache_get", "ucs_rcache_create",
	"ucs_rcache_destroy",
};
#define GUARD_LOOKUP	0x1u	/* ucs_pgtable_lookup */
#define GUARD_GET	0x2u	/* ucs_rcache_get */
#define GUARD_1_13	0x6u	/* ucs_rcache_get, ucs_rcache_create */
#define GUARD_ALL	0xfu

/* What import_check() found in one loaded object. */
struct import {
	const char *name;	/* the object's file name, or NULL: */
	uintptr_t addr;		/* ... the object holding this address */
	unsigned int names;	/* the guarded_names[] bits to check */
	const char *found;	/* the object's path, once found */
	unsigned int seen;	/* the names bits it has slots for */
	unsigned int bound;	/* ... bound to this library's */
	unsigned int elsewhere;	/* ... bound to another, or not relocated */
};

static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) ptr)
{
	/* glibc relocates these entries in memory; others may not. */
	return ptr < info->dlpi_addr ? info->dlpi_addr + ptr : ptr;
}

static bool in_object(const struct dl_phdr_info *info, uintptr_t addr)
{
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= start &&
		    addr - start < ph->p_memsz)
			return true;
	}
	return false;
}

/* This library's definition of guarded_names[i]. */
static uintptr_t ours(size_t i)
{
	const uintptr_t defs[] = {
		(uintptr_t)lookup_here, (uintptr_t)get_here,
		(uintptr_t)create_here, (uintptr_t)destroy_here,
	};

	return defs[i];
}

/*
 * A slot bound to this library's function counts; one not bound yet
 * (lazy binding: it still points into the object's PLT) is bound to it
 * now, as the loader binds it when this library comes first in the lookup
 * scope, and as it would not where something else came first, or where
 * the object was opened RTLD_DEEPBIND: its calls then reach the guard
 * whatever the order.  A slot not bound yet has not been called: in UCX
 * 1.13 and 1.18 every cache an object looks up through it subscribes to
 * VM_UNMAPPED, so was made through here, after its object's slots were
 * checked (the loader binds a slot only in a call through it).  A slot
 * bound to something else is left, and refused.
 */
static void import_relocs(const struct dl_phdr_info *info,
			  const ElfW(Rela) *rela, size_t bytes,
			  const ElfW(Sym) *symtab, const char *strtab,
			  struct import *im)
{
	size_t i, k;

	for (i = 0; i < bytes / sizeof(*rela); i++) {
		const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rela[i].r_info)];
		unsigned int type = ELF64_R_TYPE(rela[i].r_info);
		uintptr_t *slot, value;

		if (!ELF64_R_SYM(rela[i].r_info))
			continue;
		for (k = 0; k < sizeof(guarded_names) / sizeof(*guarded_names) &&
		     strcmp(strtab + sym->st_name, guarded_names[k]); k++)
			;
		if (k == sizeof(guarded_names) / sizeof(*guarded_names) ||
		    !(im->names & 1u << k))
			continue;
		im->seen |= 1u << k;
		slot = (uintptr_t *)(info->dlpi_addr + rela[i].r_offset);
		value = __atomic_load_n(slot, __ATOMIC_RELAXED);
		if (sym->st_shndx != SHN_UNDEF ||
		    (type != R_JUMP_SLOT && type != R_GLOB_DAT)) {
			im->elsewhere++;
		} else if (value == ours(k)) {
			im->bound++;
		} else if (type == R_JUMP_SLOT && in_object(info, value)) {
			__atomic_store_n(slot, ours(k), __ATOMIC_RELEASE);
			im->bound++;
		} else {
			im->elsewhere++;
		}
	}
}

/* dl_iterate_phdr()'s callback: the object's relocations of the names. */
static int import_check(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = strrchr(info->dlpi_name, '/');
	const ElfW(Sym) *symtab = NULL;
	const ElfW(Rela) *rela = NULL, *jmprel = NULL;
	size_t rela_bytes = 0, jmprel_bytes = 0;
	const ElfW(Dyn) *dyn = NULL;
	const char *strtab = NULL;
	struct import *im = arg;
	bool is_rela = true;
	int i;

	(void)size;
	if (im->name ? strcmp(base ? base + 1 : info->dlpi_name, im->name) :
		       !in_object(info, im->addr))
		return 0;
	im->found = *info->dlpi_name ? info->dlpi_name : "the executable";
	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr +
					     info->dlpi_phdr[i].p_vaddr);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			symtab = (const void *)dyn_addr(info, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			strtab = (const void *)dyn_addr(info, dyn->d_un.d_ptr);
			break;
		case DT_RELA:
			rela = (const void *)dyn_addr(info, dyn->d_un.d_ptr);
			break;
		case DT_RELASZ:
			rela_bytes = dyn->d_un.d_val;
			break;
		case DT_JMPREL:
			jmprel = (const void *)dyn_addr(info, dyn->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			jmprel_bytes = dyn->d_un.d_val;
			break;
		case DT_PLTREL:
			is_rela = dyn->d_un.d_val == DT_RELA;
			break;
		}
	}
	if (!symtab || !strtab || !is_rela) {
		im->elsewhere++;
		return 1;
	}
	if (rela)
		import_relocs(info, rela, rela_bytes, symtab, strtab, im);
	if (jmprel)
		import_relocs(info, jmprel, jmprel_bytes, symtab, strtab, im);
	return 1;
}

/* The probe's registration fails: its cache holds nothing registered. */
static ucs_status_t probe_reg(void *context, void *rcache, void *arg,
			      void *region, uint16_t flags)
{
	(void)context, (void)rcache, (void)arg, (void)region, (void)flags;
	return UCS_ERR_UNSUPPORTED;
}

/* UCX's trace level describes regions with it. */
static void probe_dump(void *context, void *rcache, void *region, char *buf,
		       size_t max)
{
	(void)context, (void)rcache, (void)region;
	if (max)
		buf[0] = '\0';
}

/*
 * Learn where UCX 1.18 keeps a cache's page table: a private cache, with
 * no events and nothing registered (its one region fails), looked up by
 * UCX's own ucs_rcache_get(), whose call to ucs_pgtable_lookup() this
 * library sees.  A distance past the cache's first page is no ucs_rcache.
 */
static bool probe_pgtable(void)
{
	/* Nothing registered to deregister; one region merges with none. */
	static const struct rcache_ops_118 ops = {
		.mem_reg = probe_reg,
		.dump_region = probe_dump,
	};
	const struct rcache_params_118 params = {
		.region_struct_size = PROBE_REGION_SIZE,
		.ucm_event_priority = 1000,
		.ops = &ops,
		.flags = RCACHE_FLAG_NO_PFN_CHECK,
		.max_regions = ULONG_MAX,
		.max_size = SIZE_MAX,
		.max_unreleased = SIZE_MAX,
	};
	long page = sysconf(_SC_PAGESIZE);
	void *rcache, *region;
	uintptr_t offset;

	if (ucx_create(&params, "ummunotify-ucx-probe", NULL, &rcache) != UCS_OK)
		return false;
	__atomic_store_n(&probing, rcache, __ATOMIC_RELAXED);
	in_get = rcache;
	ucx_get(rcache, (void *)page, page, page, PROT_READ, 0,
		(uintptr_t)&region);
	in_get = NULL;
	__atomic_store_n(&probing, NULL, __ATOMIC_RELAXED);
	ucx_destroy(rcache);
	offset = (uintptr_t)probed - (uintptr_t)rcache;
	if (!probed || !offset || offset >= (uintptr_t)page ||
	    offset % sizeof(void *))
		return false;
	pgtable_offset = offset;
	return true;
}

/* Why UCP's inline lookups cannot be guarded here, or NULL. */
static const char *unguarded(void)
{
	struct import im = { .name = "libucp.so.0", .names = GUARD_ALL };

	if (!ucx_destroy)
		return "ucs_rcache_destroy() not found";
	dl_iterate_phdr(import_check, &im);
	if (!im.found)
		return "libucp.so.0 not found";
	if ((im.seen & (GUARD_LOOKUP | GUARD_GET)) !=
	    (GUARD_LOOKUP | GUARD_GET) || im.elsewhere)
		return "libucp.so.0 does not call ucs_pgtable_lookup() and the cache's functions through its PLT, bound here";
	if (!probe_pgtable())
		return "ucs_rcache_get() did not show where a cache keeps its page table";
	return NULL;
}

/* The state last: umn_ucx_status() reads what came before it. */
static void publish(uint32_t state)
{
	__atomic_store_n(&status.state, state, __ATOMIC_RELEASE);
}

static void init_ucx(void);

static void init(void)
{
	init_ucx();
	__atomic_store_n(&ready, true, __ATOMIC_RELEASE);
}

static void init_ucx(void)
{
	struct umn_attr attr = { .flags = UMN_OPEN_WATCH_ALL };
	void (*get_version)(unsigned int *, unsigned int *, unsigned int *);
	void (*set_external)(int events);
	ucm_global_config_t *opts;
	unsigned int v[3] = { 0, 0, 0 };
	const char *why = NULL;
	struct umn *u;
	int ret, r;

	ucx_get = ucx_symbol("libucs.so.0", "ucs_rcache_get");
	ucx_create = ucx_symbol("libucs.so.0", "ucs_rcache_create");
	ucx_destroy = ucx_symbol("libucs.so.0", "ucs_rcache_destroy");
	ucx_test_external = ucx_symbol("libucm.so.0", "ucm_test_external_events");
	ucx_vm_munmap = ucx_symbol("libucm.so.0", "ucm_vm_munmap");
	set_external = ucx_symbol("libucm.so.0", "ucm_set_external_event");
	opts = ucx_symbol("libucm.so.0", "ucm_global_opts");
	get_version = ucx_symbol("libucp.so.0", "ucp_get_version");
	if (get_version)
		get_version(&v[0], &v[1], &v[2]);
	memcpy(status.ucx_version, v, sizeof(v));
	/* An unknown release passes seven: see ucs_rcache_get(). */
	seven_args = !get_version || v[0] > 1 || v[1] >= 15;

	r = release(status.ucx_version);
	if (get_version && ucx_vm_munmap && set_external && opts &&
	    ucx_test_external && r >= 0 && supported[r].inline_lookups)
		why = unguarded();
	if (!get_version || !ucx_vm_munmap || !set_external || !opts ||
	    !ucx_test_external || r < 0 || why) {
		const char *hook_mode = getenv("UCX_MEM_MMAP_HOOK_MODE");
		const char *what = hook_mode && !strcasecmp(hook_mode, "none") ?
			"UCX runs without memory hooks, so without registration caches" :
			"UCX keeps its own memory hooks";

		publish(UMN_UCX_UNSUPPORTED);
		if (why)
			fprintf(stderr, "ummunotify-ucx[%d]: UCX %u.%u.%u's lookups cannot be checked here (%s): %s\n",
				(int)getpid(), v[0], v[1], v[2], why, what);
		else if (get_version)
			fprintf(stderr, "ummunotify-ucx[%d]: UCX %u.%u.%u is not a release this library supports (1.13, 1.18): %s\n",
				(int)getpid(), v[0], v[1], v[2], what);
		else
			fprintf(stderr, "ummunotify-ucx[%d]: UCX's release is unknown (libucp.so.0 is not loaded): %s\n",
				(int)getpid(), what);
		return;
	}
	ret = umn_open(&u, &attr);
	/* Without the kernel's in-flight count the argument at the top fails. */
	if (!ret && umn_wait_invalidations(u)) {
		umn_close(u);
		ret = -EOPNOTSUPP;
	}
	if (ret) {
		/*
		 * UCX_MEM_MMAP_HOOK_MODE=none kept UCM from patching libc at
		 * start-up: UCX's default mode patches it when the cache
		 * subscribes.  (1.13's "reloc" mode hung UCP programs here.)
		 */
		if (opts->mmap_hook_mode == UCM_MMAP_HOOK_NONE)
			opts->mmap_hook_mode = UCM_MMAP_HOOK_BISTRO;
		status.error = -ret;
		publish(UMN_UCX_NO_DEVICE);
		/* No module is a node's choice; anything else, a problem. */
		if (info_wanted() || ret != -ENODEV)
			fprintf(stderr, "ummunotify-ucx[%d]: /dev/ummunotify: %s: UCX uses its own memory hooks\n",
				(int)getpid(), strerror(-ret));
		return;
	}
	set_external(UCM_EVENT_VM_UNMAPPED);
	all = umn_watch_all(u);
	guard = supported[r].inline_lookups;
	__atomic_store_n(&umn, u, __ATOMIC_RELEASE);
	publish(UMN_UCX_ACTIVE);
	if (info_wanted())
		fprintf(stderr, "ummunotify-ucx[%d]: UCX %u.%u.%u's registration caches learn of memory changes from /dev/ummunotify; %s\n",
			(int)getpid(), v[0], v[1], v[2],
			opts->mmap_hook_mode == UCM_MMAP_HOOK_NONE ?
			"UCM's memory hooks are off" :
			"UCM patched libc at start-up (UCX_MEM_MMAP_HOOK_MODE is not none) and feeds them too");
}

static void count(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* umn_drain()'s callback, under the handle's lock. */
static void feed(void *arg, const struct umn_event *event)
{
	uintptr_t start = event->start, end = event->end;
	uintptr_t page = __atomic_load_n(&probe, __ATOMIC_RELAXED);

	if (event->cause == UMN_CAUSE_OVERFLOW) {
		/* Nothing tells which ranges changed. */
		start = 0;
		end = ALL_MEMORY;
		count(&status.overflows);
	} else if (!event->watch) {
		/* The address space is gone: nothing will look it up. */
		return;
	}
	/* The change reaches the page tables before UCX hears: see the top. */
	umn_wait_invalidations(arg);
	ucx_vm_munmap((void *)start, end - start);
	/* Before the generation moves on: see the top. */
	__atomic_fetch_add(&fed, 1, __ATOMIC_RELEASE);
	count(&status.ranges);
	if (page && start <= page && page < end)
		__atomic_store_n(&probe_seen, true, __ATOMIC_RELAXED);
}

/*
 * Set while this thread feeds UCX: a UCM handler that looked a cache up
 * would otherwise drain again inside the drain (the handle's lock is
 * recursive), under the outer drain's view of the ring.
 */
static HIT_TLS bool feeding;

static void catch_up_slow(struct umn *u)
{
	static const struct umn_event lost = { .cause = UMN_CAUSE_OVERFLOW };

	count(&status.catch_ups);
	feeding = true;
	/* A forked child that cannot reopen the device knows nothing. */
	if (umn_drain(u, feed, u) < 0)
		feed(u, &lost);
	feeding = false;
}

static inline void catch_up(void)
{
	struct umn *u = __atomic_load_n(&umn, __ATOMIC_ACQUIRE);

	if (u && !feeding && !umn_valid(u, all))
		catch_up_slow(u);
}

static inline void init_once(void)
{
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
		pthread_once(&once, init);
}

/*
 * UCX 1.13 passes six arguments, 1.15 and later seven (an alignment came
 * before prot).  Seven pointer-sized ones are taken, which the x86-64 and
 * AArch64 calling conventions allow for a six-argument caller (the
 * seventh is then a word of the caller's frame, read and not used), and
 * as many handed on as the release takes, so that a release this library
 * refuses still runs through it unchanged.
 */
ucs_status_t ucs_rcache_get(void *rcache, void *address, size_t length,
			    uintptr_t a3, uintptr_t a4, uintptr_t a5,
			    uintptr_t a6)
{
	void *outer = in_get;
	ucs_status_t ret;
	struct cache *c;
	uint64_t seq, old;

	init_once();
	catch_up();
	seq = __atomic_load_n(&fed, __ATOMIC_ACQUIRE);
	in_get = rcache;
	if (seven_args)
		ret = ((rcache_get_fn *)target(ucx_get, __func__))
			(rcache, address, length, a3, a4, a5, a6);
	else
		ret = ((rcache_get6_fn *)target(ucx_get, __func__))
			(rcache, address, length, a3, a4, a5);
	in_get = outer;
	/* Every range counted in seq is out of the cache, whatever ret. */
	c = __atomic_load_n(&umn, __ATOMIC_ACQUIRE) && guard ?
		cache_of(rcache) : NULL;
	if (c) {
		old = __atomic_load_n(&c->drained, __ATOMIC_RELAXED);
		while (old < seq &&
		       !__atomic_compare_exchange_n(&c->drained, &old, seq, true,
						    __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED))
			;
	}
	return ret;
}

/*
 * Whether the object that makes a cache, at CALLER, looks it up through
 * this library: it must call ucs_rcache_get() (UCX's owners look up the
 * caches they make), and its calls of guarded_names[] (1.13: get and
 * create) must reach this library, slots not bound yet bound now.  An
 * object bound elsewhere (a definition ahead of this library's, with
 * LD_BIND_NOW; RTLD_DEEPBIND), or one that calls no ucs_rcache_get() (a
 * wrapper forwarding the make), would look up without catching up, with
 * UCM's hooks off: its cache is refused, UCX goes on without it, and the
 * library says so, once, and counts it.  On AArch64, GCC 10 and later
 * give the return address without its pointer authentication code.
 */
static bool creator_bound(uintptr_t caller)
{
	static bool said;
	struct import im = { .addr = caller,
			     .names = guard ? GUARD_ALL : GUARD_1_13 };

	dl_iterate_phdr(import_check, &im);
	if (im.found && (im.seen & GUARD_GET) && !im.elsewhere)
		return true;
	count(&status.refused);
	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		fprintf(stderr, "ummunotify-ucx[%d]: %s does not call ucs_rcache_get() through this library: its registration cache is refused, and UCX goes on without it (said once; umn_ucx_status() counts them)\n",
			(int)getpid(), im.found ? im.found : "an unknown object");
	return false;
}

/*
 * A cache that subscribes to VM_UNMAPPED is made only for an owner whose
 * lookups catch up (creator_bound()); in 1.18 it is entered in caches,
 * under caches_lock, which no lookup takes, having drained every range
 * fed before it was made.
 */
ucs_status_t ucs_rcache_create(const void *params, const char *name,
			       void *stats_parent, void **rcache_p)
{
	const struct rcache_params_113 *p113 = params;
	const struct rcache_params_118 *p118 = params;
	struct cache *c;
	ucs_status_t ret;
	bool watched;
	uint64_t seq;

	init_once();
	watched = __atomic_load_n(&umn, __ATOMIC_ACQUIRE) &&
		  ((seven_args ? p118->ucm_events : p113->ucm_events) &
		   UCM_EVENT_VM_UNMAPPED);
	if (watched && !creator_bound((uintptr_t)__builtin_return_address(0)))
		return UCS_ERR_UNSUPPORTED;
	if (!watched || !guard)
		return ((rcache_create_fn *)target(ucx_create, __func__))
			(params, name, stats_parent, rcache_p);
	pthread_mutex_lock(&caches_lock);
	for (c = caches; c && c->rcache; c = c->next)
		;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c) {
			pthread_mutex_unlock(&caches_lock);
			return UCS_ERR_NO_MEMORY;
		}
		c->next = caches;
		__atomic_store_n(&caches, c, __ATOMIC_RELEASE);
	}
	seq = __atomic_load_n(&fed, __ATOMIC_ACQUIRE);
	ret = ucx_create(params, name, stats_parent, rcache_p);
	if (ret == UCS_OK) {
		__atomic_store_n(&c->drained, seq, __ATOMIC_RELAXED);
		__atomic_store_n(&c->rcache, *rcache_p, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&caches_lock);
	return ret;
}

/* Out of caches before UCX frees it: no lookup of it can be running. */
void ucs_rcache_destroy(void *rcache)
{
	struct cache *c;

	init_once();
	pthread_mutex_lock(&caches_lock);
	c = cache_of(rcache);
	if (c)
		__atomic_store_n(&c->rcache, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&caches_lock);
	((rcache_destroy_fn *)target(ucx_destroy, __func__))(rcache);
}

/*
 * Every lookup of a cache's page table: UCP's inline ones (1.15 on), and
 * ucs_rcache_get()'s own, handed on here (in_get).  Not init_once():
 * UCS's memory-type cache looks up before any registration cache is made,
 * under its own lock.  A live cache that has not drained every range fed
 * finds nothing, so that UCP takes its slow path: ucs_rcache_get().
 */
void *ucs_pgtable_lookup(const void *pgtable, uintptr_t address)
{
	struct cache *c = NULL;
	const void *rcache;

	if (__atomic_load_n(&umn, __ATOMIC_ACQUIRE) && guard) {
		rcache = (const char *)pgtable - pgtable_offset;
		c = rcache != in_get ? cache_of(rcache) : NULL;
	}
	if (c) {
		catch_up();
		if (__atomic_load_n(&c->drained, __ATOMIC_ACQUIRE) <
		    __atomic_load_n(&fed, __ATOMIC_ACQUIRE))
			return NULL;
	} else if (in_get && in_get == __atomic_load_n(&probing, __ATOMIC_RELAXED)) {
		probed = pgtable;
	}
	return lookup(pgtable, address);
}

/*
 * Does an munmap() reach UCX's handlers?  UCM's own test expects them
 * called inside munmap(); here they are called by the next lookup, so the
 * test is this library's: a page unmapped by a raw system call, then a
 * catch-up, which must pass on a change covering it.
 */
static bool feed_fires(struct umn *u)
{
	long page = sysconf(_SC_PAGESIZE);
	bool seen = false;
	void *p;

	pthread_mutex_lock(&probe_lock);
	p = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		catch_up();
		__atomic_store_n(&probe, (uintptr_t)p, __ATOMIC_RELAXED);
		syscall(SYS_munmap, p, page);
		catch_up_slow(u);
		seen = __atomic_exchange_n(&probe_seen, false, __ATOMIC_RELAXED);
		__atomic_store_n(&probe, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&probe_lock);
	return seen;
}

ucs_status_t ucm_test_external_events(int events)
{
	struct umn *u;

	init_once();
	u = __atomic_load_n(&umn, __ATOMIC_ACQUIRE);
	if (u && (events & UCM_EVENT_VM_UNMAPPED)) {
		if (!feed_fires(u))
			return UCS_ERR_UNSUPPORTED;
		events &= ~UCM_EVENT_VM_UNMAPPED;
		if (!events)
			return UCS_OK;
	}
	return ((test_events_fn *)target(ucx_test_external, __func__))(events);
}

void umn_ucx_status(struct umn_ucx_status *out, size_t size)
{
	struct umn_ucx_status now = {
		.state = __atomic_load_n(&status.state, __ATOMIC_ACQUIRE),
		.error = status.error,
		.catch_ups = __atomic_load_n(&status.catch_ups, __ATOMIC_RELAXED),
		.ranges = __atomic_load_n(&status.ranges, __ATOMIC_RELAXED),
		.overflows = __atomic_load_n(&status.overflows, __ATOMIC_RELAXED),
		.refused = __atomic_load_n(&status.refused, __ATOMIC_RELAXED),
	};

	memcpy(now.ucx_version, status.ucx_version, sizeof(now.ucx_version));
	memcpy(out, &now, size < sizeof(now) ? size : sizeof(now));
	/* A caller newer than this library finds zeros in what it added. */
	if (size > sizeof(now))
		memset((char *)out + sizeof(now), 0, size - sizeof(now));
}
