/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C glue of rds_rs's IB/iWARP transport (bindings/ib_glue.c): the ib_client, rdma_cm ids and
 * their event handler, QPs, work requests, completions and DMA mapping, reduced to what the
 * Rust wrappers in bindings/ib.rs need. Macros and static inline verbs are reached here.
 */
#ifndef RDS_RS_IB_GLUE_H
#define RDS_RS_IB_GLUE_H

#include <linux/types.h>

struct ib_device;
struct ib_pd;
struct ib_mr;
struct ib_cq;
struct ib_cqe;
struct rdma_cm_id;
struct page;
struct net;

/* Device attributes the transport uses. */
struct rds_rs_ib_attrs {
	u32 max_qp_wr;
	u32 max_send_sge;
	u32 max_recv_sge;
	u32 max_sge_rd;
	u32 max_cqe;
	u32 max_qp_rd_atom;
	u32 max_qp_init_rd_atom;
	u32 atomic_cap;		/* enum ib_atomic_cap */
	u32 masked_atomic_cap;
	u32 max_fast_reg_page_list_len;
	u32 max_mr;
	u64 device_cap_flags;
	bool iwarp;
};

/* The ib_client "rds_rs": add and remove call these (Rust). */
void *rds_rs_ib_dev_add(struct ib_device *dev);
void rds_rs_ib_dev_remove(struct ib_device *dev, void *data);
int rds_rs_ib_register(void);
void rds_rs_ib_unregister(void);

void rds_rs_ib_dev_attrs(struct ib_device *dev, struct rds_rs_ib_attrs *out);
const char *rds_rs_ib_dev_name(struct ib_device *dev);
struct ib_device *rds_rs_ib_dev_for_addr(struct net *net, const u8 addr[16], u32 scope_id);
void rds_rs_ib_dev_put(struct ib_device *dev);

struct ib_pd *rds_rs_ib_alloc_pd(struct ib_device *dev);
void rds_rs_ib_dealloc_pd(struct ib_pd *pd);
u32 rds_rs_ib_pd_lkey(struct ib_pd *pd);
struct ib_mr *rds_rs_ib_reg_user_mr(struct ib_pd *pd, u64 start, u64 len, u64 iova,
				    bool remote_write, bool atomic, u32 *rkey);
int rds_rs_ib_dereg_mr(struct ib_mr *mr);

/*
 * Fast registration (FRWR) of pinned pages, for iWARP: an MR of the PD mapping
 * [offset, offset + len) of the pages, addressed by peers from iova once an IB_WR_REG_MR of it
 * completed (rds_rs_ib_post_reg_mr). Freeing deregisters it, then unmaps the pages.
 */
struct rds_rs_frmr;
struct rds_rs_frmr *rds_rs_ib_frmr_map(struct ib_pd *pd, struct page **pages, u32 npages,
				       u32 offset, u64 len, u64 iova, u32 *rkey);
void rds_rs_ib_frmr_dereg(struct rds_rs_frmr *f);
void rds_rs_ib_frmr_free(struct rds_rs_frmr *f);
struct ib_mr *rds_rs_ib_alloc_idle_mr(struct ib_pd *pd, u32 *rkey);
int rds_rs_ib_qp_to_error(struct rdma_cm_id *id);
struct rds_rs_waiter;
struct rds_rs_waiter *rds_rs_waiter_new(void);
void rds_rs_waiter_add(struct rds_rs_waiter *w);
void rds_rs_waiter_arrive(struct rds_rs_waiter *w);
bool rds_rs_waiter_wait(struct rds_rs_waiter *w, unsigned int ms);
void rds_rs_waiter_free(struct rds_rs_waiter *w);

struct ib_cq *rds_rs_ib_alloc_cq(struct ib_device *dev, int nr_cqe, int comp_vector);
void rds_rs_ib_free_cq(struct ib_cq *cq);

/* rdma_cm ids; the handler calls rds_rs_cm_event (Rust) with the id's context. */
int rds_rs_cm_event(void *ctx, struct rdma_cm_id *id, int event, int status,
		    const void *private_data, u8 private_data_len, bool listen_v6);
struct rdma_cm_id *rds_rs_cm_create(void *ctx, bool v6);
void rds_rs_cm_destroy(struct rdma_cm_id *id);
void rds_rs_cm_set_context(struct rdma_cm_id *id, void *ctx);
struct ib_device *rds_rs_cm_device(struct rdma_cm_id *id);
int rds_rs_cm_listen(struct rdma_cm_id *id, bool v6, u16 port);
int rds_rs_cm_listen_at(struct rdma_cm_id *id, const u8 addr[16], u32 scope_id);
u16 rds_rs_cm_port(struct rdma_cm_id *id);
int rds_rs_cm_resolve_addr(struct rdma_cm_id *id, const u8 laddr[16], const u8 faddr[16],
			   u16 port, u32 scope_id, int timeout_ms);
int rds_rs_cm_resolve_route(struct rdma_cm_id *id, int timeout_ms);
void rds_rs_cm_set_tos(struct rdma_cm_id *id, u8 tos);
int rds_rs_cm_connect(struct rdma_cm_id *id, const void *priv, u8 len);
int rds_rs_cm_accept(struct rdma_cm_id *id, const void *priv, u8 len);
int rds_rs_cm_reject(struct rdma_cm_id *id, int reason);
int rds_rs_cm_disconnect(struct rdma_cm_id *id);
int rds_rs_cm_established(struct rdma_cm_id *id);
u8 rds_rs_cm_sl(struct rdma_cm_id *id);
void rds_rs_cm_gids(struct rdma_cm_id *id, u8 src[16], u8 dst[16]);

/* QPs on a cm id; asynchronous QP events call rds_rs_ib_qp_event (Rust). */
void rds_rs_ib_qp_event(void *ctx, int event);
int rds_rs_ib_create_qp(struct rdma_cm_id *id, struct ib_pd *pd, struct ib_cq *send_cq,
			struct ib_cq *recv_cq, u32 max_send_wr, u32 max_recv_wr, u32 max_send_sge,
			void *qp_ctx);
void rds_rs_ib_drain_qp(struct rdma_cm_id *id);
void rds_rs_ib_destroy_qp(struct rdma_cm_id *id);

/* Work requests: one header SGE and at most one data SGE. */
#define RDS_RS_IB_SIGNALED	0x1
#define RDS_RS_IB_SOLICITED	0x2
#define RDS_RS_IB_FENCE		0x4
void rds_rs_ib_cqe_init(struct ib_cqe *cqe);
int rds_rs_ib_post_send(struct rdma_cm_id *id, struct ib_cqe *cqe, u64 hdr, u32 hdr_len,
			u64 data, u32 data_len, u32 lkey, int flags);
int rds_rs_ib_post_recv(struct rdma_cm_id *id, struct ib_cqe *cqe, u64 hdr, u32 hdr_len,
			u64 data, u32 data_len, u32 lkey);
/* RDMA work requests: at most this many local pieces each (C: RDS_IB_MAX_SGE). */
#define RDS_RS_IB_MAX_SGE	8
/* The operation of an RDMA work request (rds_rs_ib_post_rdma's `kind`). */
#define RDS_RS_IB_WR_WRITE		0
#define RDS_RS_IB_WR_READ		1
#define RDS_RS_IB_WR_CSWP		2
#define RDS_RS_IB_WR_FADD		3
#define RDS_RS_IB_WR_MASKED_CSWP	4
#define RDS_RS_IB_WR_MASKED_FADD	5

/* The operands of an atomic work request (IB's names: for a fetch-and-add, compare_add is the
 * addend and compare_add_mask the field boundaries). */
struct rds_rs_ib_atomic {
	u64 compare_add;
	u64 swap;
	u64 compare_add_mask;
	u64 swap_mask;
};

/* An RDMA WRITE or READ of nsge pieces, or an atomic (one 8-byte piece, the old value's
 * destination; `at` its operands), on the peer's rkey at remote_addr. */
int rds_rs_ib_post_rdma(struct rdma_cm_id *id, struct ib_cqe *cqe, const u64 *addrs,
			const u32 *lens, u32 nsge, u32 lkey, int kind, u64 remote_addr,
			u32 rkey, const struct rds_rs_ib_atomic *at, int flags);
/* An IB_WR_REG_MR of f (remote read; remote write, with local write, when asked). */
int rds_rs_ib_post_reg_mr(struct rdma_cm_id *id, struct ib_cqe *cqe, struct rds_rs_frmr *f,
			  bool remote_write, int flags);
int rds_rs_ib_post_fence(struct rdma_cm_id *id, struct ib_cqe *cqe, u32 rkey);
/* Completions call this (Rust) with the work request's ib_cqe. */
void rds_rs_ib_wc(struct ib_cqe *cqe, int status, int opcode, u32 byte_len);

/* DMA mapping for the device (direction: 1 to the device, 0 from it). */
int rds_rs_ib_map_single(struct ib_device *dev, void *p, size_t len, int to_device, u64 *out);
void rds_rs_ib_unmap_single(struct ib_device *dev, u64 addr, size_t len, int to_device);
int rds_rs_ib_map_page(struct ib_device *dev, struct page *page, size_t off, size_t len,
		       int to_device, u64 *out);
void rds_rs_ib_unmap_page(struct ib_device *dev, u64 addr, size_t len, int to_device);
void rds_rs_ib_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len, int to_device);
void rds_rs_ib_sync_for_device(struct ib_device *dev, u64 addr, size_t len, int to_device);

#endif
