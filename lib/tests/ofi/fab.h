/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Two libfabric RDM endpoints in one process, each in a domain (and so
 * an MR cache) of its own, for tests and benchmarks that need a peer to
 * read memory by RDMA: verbs;ofi_rxm on soft-RoCE in a guest.
 */
#ifndef UMN_TESTS_FAB_H
#define UMN_TESTS_FAB_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	fi_addr_t peer;
};

/* Open an endpoint on prov ("verbs;ofi_rxm"); 0 or a negative errno. */
int fab_open(struct fab *f, const char *prov);
/* Make a and b each other's peer. */
int fab_pair(struct fab *a, struct fab *b);
void fab_close(struct fab *f);

/* Register [buf, +len) in f's domain for local use and remote reads. */
int fab_reg(struct fab *f, void *buf, size_t len, struct fid_mr **mr);
/* The address a peer reads buf of mr at. */
uint64_t fab_remote_addr(const struct fab *owner, const void *buf);

/*
 * reader reads len bytes of owner's memory (at raddr, under key) into
 * dst (registered as dst_mr), and waits for the completion.
 */
int fab_read(struct fab *reader, struct fab *owner, void *dst,
	     struct fid_mr *dst_mr, size_t len, uint64_t raddr, uint64_t key);

#endif /* UMN_TESTS_FAB_H */
