// SPDX-License-Identifier: GPL-2.0
/*
 * ucx-bench: UCX's registration cache on an RDMA device, with the memory
 * events the environment gives UCX: UCM's hooks as installed, or
 * libummunotify-ucx (LD_PRELOAD, UCX_MEM_MMAP_HOOK_MODE=none).  It times
 * registering one buffer through API, of UMMUNOTIFY_RDMA_DEVICE:
 *
 *   ucp  what a UCP program pays: ucp_mem_map() and ucp_mem_unmap(), in a
 *        UCP context whose one transport is rc_verbs.  In UCX 1.13 that
 *        looks the buffer up in the InfiniBand memory domain's cache
 *        (ucs_rcache_get()); in 1.18 in the UCP context's own, inline in
 *        libucp (ucp_memh_get()), as UCP's sends look their buffers up.
 *   md   the memory domain alone, as UCX's own test of registration cost
 *        (test_md.reg_perf) times it: uct_md_mem_reg() and
 *        uct_md_mem_dereg(), ucs_rcache_get() and little else in 1.13
 *        (1.18's domain caches nothing).
 *
 * umn-bench (ucx.c) runs it once per path, API and repetition, the paths
 * in turn, and reads its lines, "NAME unit VALUE":
 *
 *   ucx      -   UCX's release
 *   path     -   ummunotify, or UCM's hooks
 *   hit      ns  registering and deregistering a cached buffer
 *   miss4k   us  mmap, touch, register, deregister, munmap: 4 KiB, anew
 *   miss1m   us  the same, 1 MiB
 *
 * It fails unless the hit loop registered nothing and each miss once, at
 * the same address each time: the cache was on, and every munmap reached
 * it.
 *
 * Usage: ucx-bench ucp|md
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include "registrations.h"
#include "ucp-map.h"
#include "ummunotify-ucx.h"

#define BUF_SIZE	4096

/* The API timed: one of the two is open. */
static ucp_context_h context;
static uct_md_h md;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what, ucs_status_t status)
{
	fprintf(stderr, "ucx-bench: %s: %s\n", what, ucs_status_string(status));
	exit(1);
}

/* A UCP context on DEV's rc_verbs alone: one memory domain to register. */
static ucp_context_h open_context(const char *dev)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA,
	};
	ucp_config_t *config;
	ucp_context_h context;
	ucs_status_t status;
	char *devices;

	if (asprintf(&devices, "%s:1", dev) < 0)
		die("asprintf", UCS_ERR_NO_MEMORY);
	status = ucp_config_read(NULL, NULL, &config);
	if (status != UCS_OK)
		die("ucp_config_read", status);
	if (ucp_config_modify(config, "TLS", "rc_verbs") != UCS_OK ||
	    ucp_config_modify(config, "NET_DEVICES", devices) != UCS_OK)
		die("ucp_config_modify", UCS_ERR_INVALID_PARAM);
	status = ucp_init(&params, config, &context);
	ucp_config_release(config);
	free(devices);
	if (status != UCS_OK)
		die("ucp_init", status);
	return context;
}

/* The ib component's memory domain named dev, its cache as configured. */
static uct_md_h open_md(const char *dev)
{
	uct_component_attr_t attr;
	uct_component_h *components;
	unsigned int n, i, j;
	uct_md_config_t *config;
	ucs_status_t status;
	uct_md_h md;

	status = uct_query_components(&components, &n);
	if (status != UCS_OK)
		die("uct_query_components", status);
	for (i = 0; i < n; i++) {
		attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
				  UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
		status = uct_component_query(components[i], &attr);
		if (status != UCS_OK || strcmp(attr.name, "ib"))
			continue;
		attr.md_resources = calloc(attr.md_resource_count,
					   sizeof(*attr.md_resources));
		attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
		if (!attr.md_resources ||
		    uct_component_query(components[i], &attr) != UCS_OK)
			die("uct_component_query", UCS_ERR_NO_MEMORY);
		for (j = 0; j < attr.md_resource_count; j++)
			if (!strcmp(attr.md_resources[j].md_name, dev))
				break;
		if (j == attr.md_resource_count)
			break;
		free(attr.md_resources);
		status = uct_md_config_read(components[i], NULL, NULL, &config);
		if (status != UCS_OK)
			die("uct_md_config_read", status);
		status = uct_md_open(components[i], dev, config, &md);
		uct_config_release(config);
		if (status != UCS_OK)
			die("uct_md_open", status);
		uct_release_component_list(components);
		return md;
	}
	fprintf(stderr, "ucx-bench: no ib memory domain %s\n", dev);
	exit(1);
}

static void md_reg_dereg(void *buf, size_t len)
{
	ucs_status_t status;
	uct_mem_h memh;

	status = uct_md_mem_reg(md, buf, len, UCT_MD_MEM_ACCESS_ALL, &memh);
	if (status != UCS_OK)
		die("uct_md_mem_reg", status);
	status = uct_md_mem_dereg(md, memh);
	if (status != UCS_OK)
		die("uct_md_mem_dereg", status);
}

static void reg_dereg(void *buf, size_t len)
{
	if (context)
		ucp_map_unmap(context, buf, len);
	else
		md_reg_dereg(buf, len);
}

static double hit_ns(char *buf, int iters)
{
	double t = now();
	int i;

	for (i = 0; i < iters; i++)
		reg_dereg(buf, BUF_SIZE);
	return (now() - t) / iters;
}

/*
 * Each iteration's mmap must return the first's address: only then is a
 * registration per iteration the proof that every munmap reached the
 * cache (a buffer at a new address registers anew whatever the cache
 * missed).
 */
static double miss_us(size_t len, int iters)
{
	double t = now();
	char *p, *first = NULL;
	int i;

	for (i = 0; i < iters; i++) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die("mmap", UCS_ERR_NO_MEMORY);
		if (!first)
			first = p;
		if (p != first) {
			fprintf(stderr, "ucx-bench: mmap of %zu bytes returned %p, not %p as at first: a registration there proves nothing\n",
				len, (void *)p, (void *)first);
			exit(1);
		}
		memset(p, 1, len);
		reg_dereg(p, len);
		munmap(p, len);
	}
	return (now() - t) / iters / 1e3;
}

/* Which path fed the cache, as libummunotify-ucx says, if preloaded. */
static const char *path(void)
{
	void (*status_fn)(struct umn_ucx_status *, size_t) =
		(void (*)(struct umn_ucx_status *, size_t))
		dlsym(RTLD_DEFAULT, "umn_ucx_status");
	struct umn_ucx_status st = { 0 };

	if (!status_fn)
		return "UCM's hooks";
	status_fn(&st, sizeof(st));
	return st.state == UMN_UCX_ACTIVE ? "ummunotify" :
	       "UCM's hooks (libummunotify-ucx inactive)";
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		size_t len;
		int iters;
	} misses[] = { { "miss4k", 4096, 400 }, { "miss1m", 1 << 20, 40 } };
	const char *dev = getenv("UMMUNOTIFY_RDMA_DEVICE");
	unsigned int major, minor, release;
	unsigned long regs;
	double v;
	char *buf;
	size_t i;

	if (argc != 2 || (strcmp(argv[1], "ucp") && strcmp(argv[1], "md"))) {
		fprintf(stderr, "usage: ucx-bench ucp|md\n");
		return 2;
	}
	if (!dev) {
		fprintf(stderr, "ucx-bench: no UMMUNOTIFY_RDMA_DEVICE\n");
		return 2;
	}
	ucp_get_version(&major, &minor, &release);
	printf("ucx - %u.%u.%u\n", major, minor, release);
	if (!strcmp(argv[1], "ucp"))
		context = open_context(dev);
	else
		md = open_md(dev);
	buf = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap", UCS_ERR_NO_MEMORY);
	memset(buf, 1, BUF_SIZE);
	hit_ns(buf, 1000);
	printf("path - %s\n", path());

	regs = ucx_registrations;
	v = hit_ns(buf, 20000);
	regs = ucx_registrations - regs;
	printf("hit ns %.1f\n", v);
	if (regs) {
		fprintf(stderr, "ucx-bench: the hit loop registered %lu times: no cache\n",
			regs);
		return 1;
	}
	for (i = 0; i < sizeof(misses) / sizeof(misses[0]); i++) {
		miss_us(misses[i].len, misses[i].iters / 10);
		regs = ucx_registrations;
		v = miss_us(misses[i].len, misses[i].iters);
		regs = ucx_registrations - regs;
		printf("%s us %.2f\n", misses[i].name, v);
		if (regs != (unsigned long)misses[i].iters) {
			fprintf(stderr, "ucx-bench: %s: %lu registrations in %d misses: an munmap missed\n",
				misses[i].name, regs, misses[i].iters);
			return 1;
		}
	}
	if (context)
		ucp_cleanup(context);
	else
		uct_md_close(md);
	return 0;
}
