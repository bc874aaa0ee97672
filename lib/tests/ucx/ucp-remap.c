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
 * Usage: ucp-remap [BYTES [ROUNDS [stop]]]  (UCX_TLS, UCX_NET_DEVICES
 * and the rest of UCX's configuration from the environment).  With stop
 * it stops itself (SIGSTOP) after the summary, its UCP contexts live, for
 * umnstat --check to look at.  Exit status 1 if a byte was wrong, 2 if
 * the program could not run.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include "remap.h"

#define TAG_MASK	UINT64_MAX

static void die(const char *what, ucs_status_t status)
{
	fprintf(stderr, "ucp-remap: %s: %s\n", what, ucs_status_string(status));
	exit(2);
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
	unsigned long before = ucx_registrations;
	int r, bad = 0;
	size_t i;

	for (r = first; r < first + rounds; r++) {
		void *sreq, *rreq;
		size_t wrong = 0;

		if (replacing)
			remap_replace(map, span, r);
		else if (r == first + 1)
			before = ucx_registrations;
		for (i = 0; i < len; i++)
			buf[i] = remap_expected(i, r);
		memset(rbuf, 0, len);
		rreq = ucp_tag_recv_nbx(rx->worker, rbuf, len, (ucp_tag_t)r,
					TAG_MASK, &param);
		sreq = ucp_tag_send_nbx(ep, buf, len, (ucp_tag_t)r, &param);
		wait_for(sreq, tx, rx, "send");
		wait_for(rreq, tx, rx, "receive");
		for (i = 0; i < len; i++)
			wrong += rbuf[i] != remap_expected(i, r);
		if (wrong) {
			if (bad < 4)
				printf("ucp-remap: round %d%s%s: %zu bytes of an earlier round\n",
				       r, replacing ? ", " : "",
				       replacing ? remap_methods[r % 4] : "", wrong);
			bad++;
		}
	}
	*regs = ucx_registrations - before;
	return bad;
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

	if (!len || rounds < 4 || (argc > 3 && strcmp(argv[3], "stop"))) {
		fprintf(stderr, "usage: ucp-remap [BYTES [ROUNDS >= 4 [stop]]]\n");
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
	remap_say_path("ucp-remap");
	printf("ucp-remap: %d rounds of %zu bytes: buffer reused: %d wrong, %lu registrations; replaced: %d wrong, %lu registrations\n",
	       rounds, len, bad_reuse, reg_reuse, bad_replace, reg_replace);
	/* For umnstat --check (check-ucx), with UCX's caches still live. */
	if (argc > 3) {
		fflush(stdout);
		raise(SIGSTOP);
	}

	wait_for(ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH), &tx, &rx,
		 "ucp_ep_close_nb");
	side_close(&tx);
	side_close(&rx);
	free(rbuf);
	return bad_reuse || bad_replace;
}
