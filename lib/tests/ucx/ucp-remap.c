// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A plain UCP program (no MPI): rendezvous-sized tagged messages from a
 * buffer whose pages are replaced between sends by raw system calls,
 * which libc hooks never see: munmap + mmap(MAP_FIXED), mmap over it,
 * madvise(MADV_DONTNEED), mremap of new pages onto it.  A receiving
 * context, a second UCP context of this process on the same RDMA device
 * (rc_verbs), RDMA-reads each message through the registration the
 * sender's UCX registration cache hands out: a cache that missed the
 * change hands it the old pages, and the receiver sees old data.
 *
 * Prints, from inside the process, which path told UCX of memory changes
 * (libummunotify-ucx's state and counters, whether UCM patched libc's
 * mmap functions), the registrations UCX made in each half, and the
 * rounds whose data was wrong:
 *
 *   ucp-remap: memory events: ummunotify (UCX 1.13.1, 40 ranges passed on)
 *   ucp-remap: libc's munmap, mmap, mremap, madvise: not patched
 *   ucp-remap: 20 rounds of 1048576 bytes: buffer reused: 0 wrong, 0 registrations; replaced: 0 wrong, 20 registrations
 *
 * Usage: ucp-remap [BYTES [ROUNDS]]  (UCX_TLS, UCX_NET_DEVICES and the
 * rest of UCX's configuration from the environment).  Exit status 1 if a
 * byte was wrong, 2 if the program could not run.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "ummunotify-ucx.h"
#include "patched.h"

#define TAG_MASK	UINT64_MAX

static void die(const char *what, ucs_status_t status)
{
	fprintf(stderr, "ucp-remap: %s: %s\n", what, ucs_status_string(status));
	exit(2);
}

/*
 * UCX registers through libibverbs' ibv_reg_mr_iova2(): this program's
 * definition (exported, -rdynamic) comes first and counts them.  UCX's
 * verbs transport loads libibverbs with its module, outside the global
 * scope that RTLD_NEXT searches.
 */
static unsigned long registrations;

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
			fprintf(stderr, "ucp-remap: no ibv_reg_mr_iova2() in libibverbs.so.1\n");
			exit(2);
		}
	}
	__atomic_fetch_add(&registrations, 1, __ATOMIC_RELAXED);
	return real(pd, addr, length, iova, access);
}

static uint8_t expected(size_t i, int round)
{
	return (uint8_t)(round * 131 + i / 4096 + i);
}

struct side {
	ucp_context_h context;
	ucp_worker_h worker;
	ucp_address_t *address;
	size_t address_len;
};

static void side_open(struct side *s)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_TAG,
	};
	ucp_worker_params_t wparams = {
		.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
		.thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucp_config_t *config;
	ucs_status_t status;

	status = ucp_config_read(NULL, NULL, &config);
	if (status != UCS_OK)
		die("ucp_config_read", status);
	status = ucp_init(&params, config, &s->context);
	ucp_config_release(config);
	if (status != UCS_OK)
		die("ucp_init", status);
	status = ucp_worker_create(s->context, &wparams, &s->worker);
	if (status != UCS_OK)
		die("ucp_worker_create", status);
	status = ucp_worker_get_address(s->worker, &s->address,
					&s->address_len);
	if (status != UCS_OK)
		die("ucp_worker_get_address", status);
}

static void side_close(struct side *s)
{
	ucp_worker_release_address(s->worker, s->address);
	ucp_worker_destroy(s->worker);
	ucp_cleanup(s->context);
}

/* Both workers progressed until REQ (a request or a status) completes. */
static void wait_for(void *req, struct side *a, struct side *b,
		     const char *what)
{
	ucs_status_t status;

	if (req == NULL)
		return;
	if (UCS_PTR_IS_ERR(req))
		die(what, UCS_PTR_STATUS(req));
	do {
		ucp_worker_progress(a->worker);
		ucp_worker_progress(b->worker);
		status = ucp_request_check_status(req);
	} while (status == UCS_INPROGRESS);
	ucp_request_free(req);
	if (status != UCS_OK)
		die(what, status);
}

/* Replace the pages of [map, map + span) by method round % 4. */
static void replace(uint8_t *map, size_t span, int round)
{
	const int prot = PROT_READ | PROT_WRITE;
	const int anon = MAP_PRIVATE | MAP_ANONYMOUS;
	long ret = 0;
	void *tmp;

	switch (round % 4) {
	case 0:		/* munmap + mmap(MAP_FIXED) */
		ret = syscall(SYS_munmap, map, span);
		if (!ret && (void *)syscall(SYS_mmap, map, span, prot,
					    anon | MAP_FIXED, -1, 0) != map)
			ret = -1;
		break;
	case 1:		/* mmap(MAP_FIXED) over it */
		if ((void *)syscall(SYS_mmap, map, span, prot,
				    anon | MAP_FIXED, -1, 0) != map)
			ret = -1;
		break;
	case 2:		/* madvise(MADV_DONTNEED): zero pages on next touch */
		ret = syscall(SYS_madvise, map, span, MADV_DONTNEED);
		break;
	case 3:		/* mremap of new pages onto it */
		tmp = (void *)syscall(SYS_mmap, NULL, span, prot, anon, -1, 0);
		if (tmp == MAP_FAILED) {
			ret = -1;
			break;
		}
		memset(tmp, 0, span);
		if ((void *)syscall(SYS_mremap, tmp, span, span,
				    MREMAP_MAYMOVE | MREMAP_FIXED, map) != map)
			ret = -1;
		break;
	}
	if (ret) {
		perror("ucp-remap: replacing the buffer");
		exit(2);
	}
}

static const char *const methods[] = {
	"munmap + mmap", "mmap over", "madvise(MADV_DONTNEED)", "mremap onto"
};

/*
 * ROUNDS sends of [buf, buf + len); returns the wrong ones and, in
 * *regs, the registrations UCX made meanwhile: with the buffer reused,
 * after the first round, which registers it (and UCX's own buffers).
 */
static int run(struct side *tx, struct side *rx, ucp_ep_h ep, uint8_t *map,
	       size_t span, uint8_t *buf, uint8_t *rbuf, size_t len,
	       int first, int rounds, int replacing, unsigned long *regs)
{
	ucp_request_param_t param = { .op_attr_mask = 0 };
	unsigned long before = registrations;
	int r, bad = 0;
	size_t i;

	for (r = first; r < first + rounds; r++) {
		void *sreq, *rreq;
		size_t wrong = 0;

		if (replacing)
			replace(map, span, r);
		else if (r == first + 1)
			before = registrations;
		for (i = 0; i < len; i++)
			buf[i] = expected(i, r);
		memset(rbuf, 0, len);
		rreq = ucp_tag_recv_nbx(rx->worker, rbuf, len, (ucp_tag_t)r,
					TAG_MASK, &param);
		sreq = ucp_tag_send_nbx(ep, buf, len, (ucp_tag_t)r, &param);
		wait_for(sreq, tx, rx, "send");
		wait_for(rreq, tx, rx, "receive");
		for (i = 0; i < len; i++)
			wrong += rbuf[i] != expected(i, r);
		if (wrong) {
			if (bad < 4)
				printf("ucp-remap: round %d%s%s: %zu bytes of an earlier round\n",
				       r, replacing ? ", " : "",
				       replacing ? methods[r % 4] : "", wrong);
			bad++;
		}
	}
	*regs = registrations - before;
	return bad;
}

static void say_path(void)
{
	void (*status_fn)(struct umn_ucx_status *, size_t) =
		(void (*)(struct umn_ucx_status *, size_t))
		dlsym(RTLD_DEFAULT, "umn_ucx_status");
	static const char *const states[] = {
		"not started", "ummunotify", "UCX's own (no /dev/ummunotify)",
		"UCX's own (a UCX release it does not support)",
	};
	struct umn_ucx_status st;
	const char *names[] = { "munmap", "mmap", "mremap", "madvise",
				"malloc", "free" };
	void *called[] = { (void *)munmap, (void *)mmap, (void *)mremap,
			   (void *)madvise, (void *)malloc, (void *)free };
	int i, patched = 0, unknown = 0, p;

	if (!status_fn) {
		printf("ucp-remap: memory events: UCX's own (libummunotify-ucx not loaded)\n");
	} else {
		status_fn(&st, sizeof(st));
		printf("ucp-remap: memory events: %s (UCX %u.%u.%u, %llu ranges passed on, %llu overflows)\n",
		       st.state < 4 ? states[st.state] : "?",
		       st.ucx_version[0], st.ucx_version[1],
		       st.ucx_version[2], (unsigned long long)st.ranges,
		       (unsigned long long)st.overflows);
	}
	for (i = 0; i < 6; i++) {
		p = libc_patched(names[i], called[i]);
		if (p)
			printf("ucp-remap: libc's %s: %s\n", names[i],
			       p < 0 ? "cannot tell" : "patched");
		patched += p == 1;
		unknown += p < 0;
	}
	if (!patched && !unknown)
		printf("ucp-remap: libc's munmap, mmap, mremap, madvise, malloc, free: not patched\n");
}

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	/* Not ending on a page: see mpi-remap.c's msg_place(). */
	size_t off = (64 + len) % page ? 64 : 128;
	size_t span = (off + len + page - 1) / page * page;
	unsigned long reg_reuse, reg_replace;
	ucp_ep_params_t ep_params;
	int bad_reuse, bad_replace;
	struct side tx, rx;
	uint8_t *map, *rbuf;
	ucs_status_t status;
	ucp_ep_h ep;

	if (!len || rounds < 4) {
		fprintf(stderr, "usage: ucp-remap [BYTES [ROUNDS >= 4]]\n");
		return 2;
	}
	side_open(&tx);
	side_open(&rx);
	memset(&ep_params, 0, sizeof(ep_params));
	ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
	ep_params.address = rx.address;
	status = ucp_ep_create(tx.worker, &ep_params, &ep);
	if (status != UCS_OK)
		die("ucp_ep_create", status);

	map = mmap(NULL, span, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rbuf = malloc(len);
	if (map == MAP_FAILED || !rbuf) {
		perror("ucp-remap");
		return 2;
	}
	bad_reuse = run(&tx, &rx, ep, map, span, map + off, rbuf, len, 0,
			rounds, 0, &reg_reuse);
	bad_replace = run(&tx, &rx, ep, map, span, map + off, rbuf, len,
			  rounds, rounds, 1, &reg_replace);
	say_path();
	printf("ucp-remap: %d rounds of %zu bytes: buffer reused: %d wrong, %lu registrations; replaced: %d wrong, %lu registrations\n",
	       rounds, len, bad_reuse, reg_reuse, bad_replace, reg_replace);

	wait_for(ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH), &tx, &rx,
		 "ucp_ep_close_nb");
	side_close(&tx);
	side_close(&rx);
	free(rbuf);
	return bad_reuse || bad_replace;
}
