// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * RC queue pairs for the RDMA test and the demo: see rc.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rc.h"

#define RC_PORT		1
#define RC_PSN		0
/* Under TCG a loopback READ takes milliseconds; this is for a hang. */
#define RC_TIMEOUT_SEC	30

static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

/* An IPv4 RoCE v2 GID: what the rxe recipe (with-rxe) gives the device. */
static int find_gid(struct rc *rc)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_port_attr port;
	struct ibv_gid_entry entry;
	int i;

	if (ibv_query_port(rc->ctx, RC_PORT, &port))
		return -ENODEV;
	for (i = 0; i < port.gid_tbl_len; i++) {
		if (ibv_query_gid_ex(rc->ctx, RC_PORT, i, &entry, 0))
			continue;
		if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(entry.gid.raw, v4_prefix, sizeof(v4_prefix))) {
			rc->gid_index = i;
			rc->gid = entry.gid;
			return 0;
		}
	}
	return -ENODEV;
}

static struct ibv_context *open_device(void)
{
	const char *want = getenv("UMMUNOTIFY_RDMA_DEVICE");
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		return NULL;
	for (i = 0; list[i]; i++) {
		if (!want || !strcmp(ibv_get_device_name(list[i]), want)) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	}
	ibv_free_device_list(list);
	return ctx;
}

int rc_open(struct rc *rc)
{
	struct ibv_qp_init_attr init = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = RC_PORT,
		.qp_access_flags = IBV_ACCESS_REMOTE_READ,
	};
	int ret;

	memset(rc, 0, sizeof(*rc));
	rc->ctx = open_device();
	if (!rc->ctx)
		return -ENODEV;
	ret = find_gid(rc);
	if (ret)
		goto err;
	rc->buf = calloc(1, RC_MAX_READ);
	rc->pd = ibv_alloc_pd(rc->ctx);
	rc->cq = ibv_create_cq(rc->ctx, 2, NULL, NULL, 0);
	if (!rc->buf || !rc->pd || !rc->cq)
		goto err_errno;
	rc->mr = ibv_reg_mr(rc->pd, rc->buf, RC_MAX_READ,
			    IBV_ACCESS_LOCAL_WRITE);
	if (!rc->mr)
		goto err_errno;
	init.send_cq = init.recv_cq = rc->cq;
	rc->qp = ibv_create_qp(rc->pd, &init);
	if (!rc->qp)
		goto err_errno;
	ret = -ibv_modify_qp(rc->qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		goto err;
	return 0;

err_errno:
	ret = neg_errno();
err:
	rc_close(rc);
	return ret;
}

void rc_close(struct rc *rc)
{
	if (rc->qp)
		ibv_destroy_qp(rc->qp);
	if (rc->mr)
		ibv_dereg_mr(rc->mr);
	if (rc->cq)
		ibv_destroy_cq(rc->cq);
	if (rc->pd)
		ibv_dealloc_pd(rc->pd);
	if (rc->ctx)
		ibv_close_device(rc->ctx);
	free(rc->buf);
	memset(rc, 0, sizeof(*rc));
}

void rc_addr(const struct rc *rc, struct rc_addr *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->qpn = rc->qp->qp_num;
	addr->gid = rc->gid;
}

/* INIT -> RTR -> RTS, with one READ in flight each way at most. */
int rc_connect(struct rc *rc, const struct rc_addr *remote)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = remote->qpn,
		.rq_psn = RC_PSN,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = { .dgid = remote->gid, .hop_limit = 1,
				 .sgid_index = rc->gid_index },
			.port_num = RC_PORT,
		},
	};
	int ret;

	ret = ibv_modify_qp(rc->qp, &attr, IBV_QP_STATE | IBV_QP_AV |
			    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			    IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return -ret;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = RC_PSN;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	return -ibv_modify_qp(rc->qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN |
			      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int rc_read(struct rc *rc, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rc->buf,
		.length = len,
		.lkey = rc->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;
	time_t deadline = time(NULL) + RC_TIMEOUT_SEC;
	struct ibv_wc wc;
	int n, ret;

	if (len > RC_MAX_READ)
		return -EINVAL;
	ret = ibv_post_send(rc->qp, &wr, &bad);
	if (ret)
		return -ret;
	while (!(n = ibv_poll_cq(rc->cq, 1, &wc)))
		if (time(NULL) > deadline)
			return -ETIMEDOUT;
	return n < 0 ? -EIO : (int)wc.status;
}
