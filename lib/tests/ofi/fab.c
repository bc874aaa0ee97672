// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * See fab.h.  The endpoints ask for what the MPI layers ask of
 * verbs;ofi_rxm: RDM, tagged and RMA, with the memory-registration modes
 * a modern application accepts, and take the ones the provider wants.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "fab.h"

#define FAB_VERSION	FI_VERSION(1, 13)

int fab_open(struct fab *f, const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	memset(f, 0, sizeof(*f));
	if (!hints)
		return -ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_REMOTE_READ;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FAB_VERSION, NULL, NULL, 0, hints, &f->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = fi_fabric(f->info->fabric_attr, &f->fabric, NULL);
	if (!ret)
		ret = fi_domain(f->fabric, f->info, &f->domain, NULL);
	if (!ret)
		ret = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
	if (!ret)
		ret = fi_av_open(f->domain, &av_attr, &f->av, NULL);
	if (!ret)
		ret = fi_endpoint(f->domain, f->info, &f->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(f->ep, &f->av->fid, 0);
	if (!ret)
		ret = fi_enable(f->ep);
	if (ret)
		fab_close(f);
	return ret;
}

static int insert_peer(struct fab *f, const struct fab *peer)
{
	char name[256];
	size_t len = sizeof(name);
	int ret = fi_getname(&peer->ep->fid, name, &len);

	if (ret)
		return ret;
	return fi_av_insert(f->av, name, 1, &f->peer, 0, NULL) == 1 ?
	       0 : -EIO;
}

int fab_pair(struct fab *a, struct fab *b)
{
	int ret = insert_peer(a, b);

	return ret ? ret : insert_peer(b, a);
}

void fab_close(struct fab *f)
{
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	fi_freeinfo(f->info);
	memset(f, 0, sizeof(*f));
}

int fab_reg(struct fab *f, void *buf, size_t len, struct fid_mr **mr)
{
	return fi_mr_reg(f->domain, buf, len, FI_READ | FI_REMOTE_READ, 0, 0,
			 0, mr, NULL);
}

uint64_t fab_remote_addr(const struct fab *owner, const void *buf)
{
	return owner->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ?
	       (uintptr_t)buf : 0;
}

/* Progress both sides (rxm's connection setup needs the passive one). */
int fab_read(struct fab *reader, struct fab *owner, void *dst,
	     struct fid_mr *dst_mr, size_t len, uint64_t raddr, uint64_t key)
{
	struct fi_context ctx;
	struct fi_cq_entry entry;
	struct fi_cq_err_entry err;
	struct timespec start, now;
	ssize_t ret;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		ret = fi_read(reader->ep, dst, len, fi_mr_desc(dst_mr),
			      reader->peer, raddr, key, &ctx);
		if (ret == -FI_EAGAIN) {
			fi_cq_read(reader->cq, &entry, 1);
			fi_cq_read(owner->cq, &entry, 1);
		}
	} while (ret == -FI_EAGAIN);
	if (ret)
		return (int)ret;
	for (;;) {
		ret = fi_cq_read(reader->cq, &entry, 1);
		if (ret == 1)
			return 0;
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(reader->cq, &err, 0);
			return -(err.err ? err.err : EIO);
		}
		if (ret != -FI_EAGAIN)
			return (int)ret;
		fi_cq_read(owner->cq, &entry, 1);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 20)
			return -ETIMEDOUT;
	}
}
