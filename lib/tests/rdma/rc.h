/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A reliable-connected queue pair on port 1 of an RoCE device, and RDMA
 * READs through it: the "peer" of the RDMA test and of the demo.  Both
 * ends may be on one device (soft-RoCE loops them back), in one process
 * or two.  Functions return 0 or a negative errno value.
 */
#ifndef UMN_RC_H
#define UMN_RC_H

#include <stdint.h>

#include <infiniband/verbs.h>

#define RC_MAX_READ	(64 * 1024)	/* bytes one rc_read() can fetch */

struct rc {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;		/* over buf, where reads land */
	char *buf;
	int gid_index;
	union ibv_gid gid;
};

/* What the other end needs to connect to this one. */
struct rc_addr {
	uint32_t qpn;
	union ibv_gid gid;
};

/*
 * Open the device named by $UMMUNOTIFY_RDMA_DEVICE, or the first one;
 * -ENODEV if there is none with an IPv4 RoCE v2 address.
 */
int rc_open(struct rc *rc);
void rc_close(struct rc *rc);
void rc_addr(const struct rc *rc, struct rc_addr *addr);
int rc_connect(struct rc *rc, const struct rc_addr *remote);

/*
 * RDMA READ of len bytes at raddr, through rkey, into rc->buf.  Returns
 * the completion's status (IBV_WC_SUCCESS is 0) or a negative errno.
 */
int rc_read(struct rc *rc, uint64_t raddr, uint32_t rkey, uint32_t len);

#endif /* UMN_RC_H */
