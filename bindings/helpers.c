// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for kernel macros used by rds-rs (see helpers.h). The macros pass KBUILD_MODNAME,
 * so the resources they create are attributed to rds_rs.
 */
#include <net/sock.h>
#include "helpers.h"

int rds_rs_copy_from_sockptr(void *dst, sockptr_t src, size_t size)
{
	return copy_from_sockptr(dst, src, size) ? -EFAULT : 0;
}

size_t rds_rs_sizeof_sock(void)
{
	return sizeof(struct sock);
}

size_t rds_rs_offsetof_sk_destruct(void)
{
	return offsetof(struct sock, sk_destruct);
}

struct ib_pd *rds_rs_ib_alloc_pd(struct ib_device *device, unsigned int flags)
{
	return ib_alloc_pd(device, flags);
}

struct rdma_cm_id *rds_rs_rdma_create_id(struct net *net, rdma_cm_event_handler event_handler,
					 void *context, enum rdma_ucm_port_space ps,
					 enum ib_qp_type qp_type)
{
	return rdma_create_id(net, event_handler, context, ps, qp_type);
}
