/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Hand-written C helpers for kernel macros that Rust cannot call. Static inline functions are
 * wrapped automatically by bindgen --wrap-static-fns; only macros need an entry here.
 */
#ifndef RDS_RS_HELPERS_H
#define RDS_RS_HELPERS_H

#include <linux/types.h>
#include <linux/sockptr.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

struct sock;

struct ib_pd *rds_rs_ib_alloc_pd(struct ib_device *device, unsigned int flags);
struct rdma_cm_id *rds_rs_rdma_create_id(struct net *net, rdma_cm_event_handler event_handler,
					 void *context, enum rdma_ucm_port_space ps,
					 enum ib_qp_type qp_type);

/* copy_from_sockptr: 0, or -EFAULT if the (user or kernel) source cannot be read. */
int rds_rs_copy_from_sockptr(void *dst, sockptr_t src, size_t size);

/* Layout facts of struct sock, checked against the Rust bindings at module init. */
size_t rds_rs_sizeof_sock(void);
size_t rds_rs_offsetof_sk_destruct(void);

#endif
