// SPDX-License-Identifier: GPL-2.0
/*
 * C glue of rds_rs's IB/iWARP transport; see ib_glue.h. Every function here is a thin
 * translation of a verbs or rdma_cm call (or a macro, or a static inline) into a form the Rust
 * wrappers in bindings/ib.rs can call; the rules of use are documented there.
 */
#include <linux/inetdevice.h>
#include <linux/moduleparam.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/scatterlist.h>
#include <net/addrconf.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include "ib_glue.h"

static int rds_rs_ib_add_one(struct ib_device *dev);
static void rds_rs_ib_remove_one(struct ib_device *dev, void *client_data);

static struct ib_client rds_rs_ib_client = {
	.name = "rds_rs",
	.add = rds_rs_ib_add_one,
	.remove = rds_rs_ib_remove_one,
};

/* A device we do not serve gets no client data and no remove call. */
static int rds_rs_ib_add_one(struct ib_device *dev)
{
	void *data = rds_rs_ib_dev_add(dev);

	if (!data)
		return -EOPNOTSUPP;
	ib_set_client_data(dev, &rds_rs_ib_client, data);
	return 0;
}

static void rds_rs_ib_remove_one(struct ib_device *dev, void *client_data)
{
	rds_rs_ib_dev_remove(dev, client_data);
}

int rds_rs_ib_register(void)
{
	return ib_register_client(&rds_rs_ib_client);
}

void rds_rs_ib_unregister(void)
{
	ib_unregister_client(&rds_rs_ib_client);
}

void rds_rs_ib_dev_attrs(struct ib_device *dev, struct rds_rs_ib_attrs *out)
{
	const struct ib_device_attr *a = &dev->attrs;

	out->max_qp_wr = a->max_qp_wr;
	out->max_send_sge = a->max_send_sge;
	out->max_recv_sge = a->max_recv_sge;
	out->max_sge_rd = a->max_sge_rd;
	out->max_cqe = a->max_cqe;
	out->max_qp_rd_atom = a->max_qp_rd_atom;
	out->max_qp_init_rd_atom = a->max_qp_init_rd_atom;
	out->atomic_cap = a->atomic_cap;
	out->masked_atomic_cap = a->masked_atomic_cap;
	out->max_fast_reg_page_list_len = a->max_fast_reg_page_list_len;
	out->max_mr = a->max_mr;
	out->device_cap_flags = a->device_cap_flags;
	out->iwarp = rdma_protocol_iwarp(dev, rdma_start_port(dev));
}

const char *rds_rs_ib_dev_name(struct ib_device *dev)
{
	return dev_name(&dev->dev);
}

/*
 * The RDMA device behind the local address `addr` (16 bytes, IPv4 v4-mapped) in `net`, with a
 * reference (rds_rs_ib_dev_put), or NULL when the address is not local or no RDMA device
 * serves its interface. No rdma_cm id is involved (C's rds_ib_laddr_check binds a throw-away
 * one, which is what makes C's passive accept trip lockdep).
 */
struct ib_device *rds_rs_ib_dev_for_addr(struct net *net, const u8 addr[16], u32 scope_id)
{
	struct net_device *ndev;
	struct ib_device *dev;

	if (ipv6_addr_v4mapped((const struct in6_addr *)addr)) {
		__be32 a;

		memcpy(&a, addr + 12, 4);
		ndev = ip_dev_find(net, a);
	} else {
		struct net_device *hint = NULL;

		rcu_read_lock();
		if (scope_id)
			hint = dev_get_by_index_rcu(net, scope_id);
		ndev = ipv6_dev_find(net, (const struct in6_addr *)addr, hint);
		if (ndev)
			dev_hold(ndev);
		rcu_read_unlock();
	}
	if (!ndev)
		return NULL;
	dev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	dev_put(ndev);
	return dev;
}

void rds_rs_ib_dev_put(struct ib_device *dev)
{
	ib_device_put(dev);
}

struct ib_pd *rds_rs_ib_alloc_pd(struct ib_device *dev)
{
	return ib_alloc_pd(dev, 0);
}

void rds_rs_ib_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

u32 rds_rs_ib_pd_lkey(struct ib_pd *pd)
{
	return pd->local_dma_lkey;
}

/*
 * Registers [start, start + len) of the calling process's memory on pd's device, addressed by
 * peers from iova (ib_reg_user_mr: the device pins the pages itself, through current->mm).
 * Remote read always; remote write (with local write, which it requires) when asked, and
 * remote atomics with it when the device has them.
 */
struct ib_mr *rds_rs_ib_reg_user_mr(struct ib_pd *pd, u64 start, u64 len, u64 iova,
				    bool remote_write, bool atomic, u32 *rkey)
{
	int access = IB_ACCESS_REMOTE_READ;
	struct ib_mr *mr;

	if (remote_write)
		access |= IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	if (remote_write && atomic)
		access |= IB_ACCESS_REMOTE_ATOMIC;
	mr = ib_reg_user_mr(pd, start, len, iova, access);
	if (!IS_ERR(mr))
		*rkey = mr->rkey;
	return mr;
}

int rds_rs_ib_dereg_mr(struct ib_mr *mr)
{
	return ib_dereg_mr(mr);
}

struct rds_rs_frmr {
	struct ib_mr *mr;
	struct ib_device *dev;
	struct sg_table sgt;
	int nents;
};

/*
 * An MR of up to npages pages (ib_alloc_mr) mapping len bytes of pages from offset in the
 * first: the pages are mapped for the device (ib_dma_map_sg), the MR's page list built from
 * them (ib_map_mr_sg: -EINVAL if the device takes fewer, as C's rds_ib_map_frmr), its
 * address set to iova (as ib_map_mr_sg_zbva sets 0) and its key renewed (a random low byte).
 * The registration becomes valid when an IB_WR_REG_MR of it completes.
 */
struct rds_rs_frmr *rds_rs_ib_frmr_map(struct ib_pd *pd, struct page **pages, u32 npages,
				       u32 offset, u64 len, u64 iova, u32 *rkey)
{
	struct rds_rs_frmr *f;
	int ret, n;

	if (!npages || len > UINT_MAX)
		return ERR_PTR(-EINVAL);
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return ERR_PTR(-ENOMEM);
	f->dev = pd->device;
	f->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(f->mr)) {
		ret = PTR_ERR(f->mr);
		goto free;
	}
	ret = sg_alloc_table_from_pages(&f->sgt, pages, npages, offset, len, GFP_KERNEL);
	if (ret)
		goto dereg;
	f->nents = ib_dma_map_sg(f->dev, f->sgt.sgl, f->sgt.orig_nents, DMA_BIDIRECTIONAL);
	if (!f->nents) {
		ret = -ENOMEM;
		goto table;
	}
	n = ib_map_mr_sg(f->mr, f->sgt.sgl, f->nents, NULL, PAGE_SIZE);
	if (n != f->nents) {
		ret = n < 0 ? n : -EINVAL;
		goto unmap;
	}
	f->mr->iova = iova;
	ib_update_fast_reg_key(f->mr, get_random_u8());
	*rkey = f->mr->rkey;
	return f;
unmap:
	ib_dma_unmap_sg(f->dev, f->sgt.sgl, f->sgt.orig_nents, DMA_BIDIRECTIONAL);
table:
	sg_free_table(&f->sgt);
dereg:
	ib_dereg_mr(f->mr);
free:
	kfree(f);
	return ERR_PTR(ret);
}

/*
 * Deregisters the MR (siw: the STag is invalid for every lookup when this returns) and waits
 * for a grace period (a placement that looked the STag up before runs with preemption
 * disabled, in the socket's data_ready: it is over then). Once only; the pages stay mapped.
 */
void rds_rs_ib_frmr_dereg(struct rds_rs_frmr *f)
{
	int ret;

	if (!f->mr)
		return;
	ret = ib_dereg_mr(f->mr);
	if (ret)
		pr_warn("rds_rs: ib_dereg_mr of a fast registration failed: %d\n", ret);
	f->mr = NULL;
	synchronize_rcu();
}

/* Deregisters the MR (unless done already), then unmaps the pages. */
void rds_rs_ib_frmr_free(struct rds_rs_frmr *f)
{
	rds_rs_ib_frmr_dereg(f);
	ib_dma_unmap_sg(f->dev, f->sgt.sgl, f->sgt.orig_nents, DMA_BIDIRECTIONAL);
	sg_free_table(&f->sgt);
	kfree(f);
}

/* An MR of the PD that is never made valid: what fences invalidate (rds_rs_ib_post_fence). */
struct ib_mr *rds_rs_ib_alloc_idle_mr(struct ib_pd *pd, u32 *rkey)
{
	struct ib_mr *mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 1);

	if (!IS_ERR(mr))
		*rkey = mr->rkey;
	return mr;
}

/* Moves the QP to the error state: every request still queued is flushed. */
int rds_rs_ib_qp_to_error(struct rdma_cm_id *id)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	if (!id->qp)
		return -ENOTCONN;
	return ib_modify_qp(id->qp, &attr, IB_QP_STATE);
}

/* A completion counter: done when every party added (and the creator) arrived. */
struct rds_rs_waiter {
	atomic_t left;
	struct completion done;
};

struct rds_rs_waiter *rds_rs_waiter_new(void)
{
	struct rds_rs_waiter *w = kmalloc(sizeof(*w), GFP_KERNEL);

	if (w) {
		atomic_set(&w->left, 1);
		init_completion(&w->done);
	}
	return w;
}

void rds_rs_waiter_add(struct rds_rs_waiter *w)
{
	atomic_inc(&w->left);
}

void rds_rs_waiter_arrive(struct rds_rs_waiter *w)
{
	if (atomic_dec_and_test(&w->left))
		complete_all(&w->done);
}

bool rds_rs_waiter_wait(struct rds_rs_waiter *w, unsigned int ms)
{
	return wait_for_completion_timeout(&w->done, msecs_to_jiffies(ms)) != 0;
}

void rds_rs_waiter_free(struct rds_rs_waiter *w)
{
	kfree(w);
}

/*
 * Completions are handled in softirq context: the CQ's event schedules its irq_poll, which
 * polls it with a budget (as C RDS's tasklets do), with no hop to a work item.
 */
struct ib_cq *rds_rs_ib_alloc_cq(struct ib_device *dev, int nr_cqe, int comp_vector)
{
	return ib_alloc_cq(dev, NULL, nr_cqe, comp_vector, IB_POLL_SOFTIRQ);
}

void rds_rs_ib_free_cq(struct ib_cq *cq)
{
	ib_free_cq(cq);
}

static int rds_rs_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev, bool v6)
{
	const void *priv = NULL;
	u8 len = 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
	case RDMA_CM_EVENT_ESTABLISHED:
	case RDMA_CM_EVENT_REJECTED:
		priv = ev->param.conn.private_data;
		len = priv ? ev->param.conn.private_data_len : 0;
		break;
	default:
		break;
	}
	return rds_rs_cm_event(id->context, id, ev->event, ev->status, priv, len, v6);
}

static int rds_rs_cm_handler4(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	return rds_rs_cm_handler(id, ev, false);
}

static int rds_rs_cm_handler6(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	return rds_rs_cm_handler(id, ev, true);
}

/*
 * A reliable-connected rdma_cm id in the initial namespace (RDS/IB runs only there). The
 * family decides the handler, which a listener's requests inherit.
 */
struct rdma_cm_id *rds_rs_cm_create(void *ctx, bool v6)
{
	return rdma_create_id(&init_net, v6 ? rds_rs_cm_handler6 : rds_rs_cm_handler4, ctx,
			      RDMA_PS_TCP, IB_QPT_RC);
}

void rds_rs_cm_destroy(struct rdma_cm_id *id)
{
	rdma_destroy_id(id);
}

void rds_rs_cm_set_context(struct rdma_cm_id *id, void *ctx)
{
	id->context = ctx;
}

struct ib_device *rds_rs_cm_device(struct rdma_cm_id *id)
{
	return id->device;
}

static void rds_rs_sockaddr(struct sockaddr_storage *ss, const u8 addr[16], u16 port,
			    u32 scope_id)
{
	memset(ss, 0, sizeof(*ss));
	if (ipv6_addr_v4mapped((const struct in6_addr *)addr)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr.s_addr, addr + 12, 4);
		sin->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
		sin6->sin6_port = htons(port);
		sin6->sin6_scope_id = scope_id;
	}
}

/* Binds the wildcard address of the family to `port` and listens (backlog 128, as C). */
int rds_rs_cm_listen(struct rdma_cm_id *id, bool v6, u16 port)
{
	struct sockaddr_storage ss;
	u8 any[16] = {};
	int ret;

	if (!v6) {
		any[10] = 0xff;
		any[11] = 0xff;
	} else {
		/* Only IPv6 on the IPv6 port: v4-mapped requests go to the IPv4 listener. */
		ret = rdma_set_afonly(id, 1);
		if (ret)
			return ret;
	}
	rds_rs_sockaddr(&ss, any, port, 0);
	ret = rdma_bind_addr(id, (struct sockaddr *)&ss);
	if (ret)
		return ret;
	return rdma_listen(id, 128);
}

/* Binds addr with a port rdma_cm chooses, and listens (a few requests at a time). */
int rds_rs_cm_listen_at(struct rdma_cm_id *id, const u8 addr[16], u32 scope_id)
{
	struct sockaddr_storage ss;
	int ret;

	rds_rs_sockaddr(&ss, addr, 0, scope_id);
	ret = rdma_bind_addr(id, (struct sockaddr *)&ss);
	if (ret)
		return ret;
	return rdma_listen(id, 4);
}

/* The id's bound port, host order. */
u16 rds_rs_cm_port(struct rdma_cm_id *id)
{
	struct sockaddr *sa = (struct sockaddr *)&id->route.addr.src_addr;

	if (sa->sa_family == AF_INET6)
		return be16_to_cpu(((struct sockaddr_in6 *)sa)->sin6_port);
	return be16_to_cpu(((struct sockaddr_in *)sa)->sin_port);
}

int rds_rs_cm_resolve_addr(struct rdma_cm_id *id, const u8 laddr[16], const u8 faddr[16],
			   u16 port, u32 scope_id, int timeout_ms)
{
	struct sockaddr_storage src, dst;

	rds_rs_sockaddr(&src, laddr, 0, scope_id);
	rds_rs_sockaddr(&dst, faddr, port, scope_id);
	return rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst,
				 timeout_ms);
}

int rds_rs_cm_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	return rdma_resolve_route(id, timeout_ms);
}

/* C: rdma_set_service_type at ADDR_RESOLVED, and the smallest RNR timer (C does the same). */
void rds_rs_cm_set_tos(struct rdma_cm_id *id, u8 tos)
{
	rdma_set_service_type(id, tos);
	rdma_set_min_rnr_timer(id, IB_RNR_TIMER_000_32);
}

/*
 * C's module parameter, under C's name and with C's default: how many times the QP resends an
 * unacknowledged packet before the send fails with a retry error (the connection then drops and
 * reconnects). The active side's value goes to both QPs of a connection (the CM's REQ carries it).
 * Set at load, read-only after, as C's; above 7 counts as 7, as in C (rxe takes 7 as "for ever").
 */
static unsigned int rds_ib_retry_count = 1;
module_param(rds_ib_retry_count, uint, 0444);
MODULE_PARM_DESC(rds_ib_retry_count, " Number of hw retries before reporting an error");

/* C's conn_param: resources from the device, the retry count above, RNR retry 7 (infinite). */
static void rds_rs_cm_param(struct rdma_cm_id *id, struct rdma_conn_param *p, const void *priv,
			    u8 len)
{
	memset(p, 0, sizeof(*p));
	p->private_data = priv;
	p->private_data_len = len;
	p->responder_resources = min_t(u32, id->device->attrs.max_qp_rd_atom, 255);
	p->initiator_depth = min_t(u32, id->device->attrs.max_qp_init_rd_atom, 255);
	p->retry_count = min_t(unsigned int, READ_ONCE(rds_ib_retry_count), 7);
	p->rnr_retry_count = 7;
}

/* From the id's event handler, which holds the handler lock rdma_connect_locked needs. */
int rds_rs_cm_connect(struct rdma_cm_id *id, const void *priv, u8 len)
{
	struct rdma_conn_param p;

	rds_rs_cm_param(id, &p, priv, len);
	return rdma_connect_locked(id, &p);
}

/* From the CONNECT_REQUEST handler of the new id (rdma_accept asserts its handler lock). */
int rds_rs_cm_accept(struct rdma_cm_id *id, const void *priv, u8 len)
{
	struct rdma_conn_param p;

	rds_rs_cm_param(id, &p, priv, len);
	return rdma_accept(id, &p);
}

/* C's reject: a host-endian int as consumer-defined private data. */
int rds_rs_cm_reject(struct rdma_cm_id *id, int reason)
{
	return rdma_reject(id, &reason, sizeof(reason), IB_CM_REJ_CONSUMER_DEFINED);
}

int rds_rs_cm_disconnect(struct rdma_cm_id *id)
{
	return rdma_disconnect(id);
}

/* The first SEND may arrive before the RTU: COMM_EST moves the QP on (C does this too). */
int rds_rs_cm_established(struct rdma_cm_id *id)
{
	return rdma_notify(id, IB_EVENT_COMM_EST);
}

/* The service level of the route (C: i_sl); iWARP has no path record. */
u8 rds_rs_cm_sl(struct rdma_cm_id *id)
{
	if (id->route.path_rec)
		return id->route.path_rec->sl;
	return 0;
}

void rds_rs_cm_gids(struct rdma_cm_id *id, u8 src[16], u8 dst[16])
{
	memset(src, 0, 16);
	memset(dst, 0, 16);
	if (id->device)
		rdma_read_gids(id, (union ib_gid *)src, (union ib_gid *)dst);
}

static void rds_rs_ib_qp_event_handler(struct ib_event *ev, void *ctx)
{
	rds_rs_ib_qp_event(ctx, ev->event);
}

int rds_rs_ib_create_qp(struct rdma_cm_id *id, struct ib_pd *pd, struct ib_cq *send_cq,
			struct ib_cq *recv_cq, u32 max_send_wr, u32 max_recv_wr, u32 max_send_sge,
			void *qp_ctx)
{
	struct ib_qp_init_attr attr = {
		.event_handler = rds_rs_ib_qp_event_handler,
		.qp_context = qp_ctx,
		.cap = {
			.max_send_wr = max_send_wr,
			.max_recv_wr = max_recv_wr,
			.max_send_sge = max_send_sge,
			.max_recv_sge = 2,
		},
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.send_cq = send_cq,
		.recv_cq = recv_cq,
	};

	return rdma_create_qp(id, pd, &attr);
}

void rds_rs_ib_drain_qp(struct rdma_cm_id *id)
{
	if (id->qp)
		ib_drain_qp(id->qp);
}

void rds_rs_ib_destroy_qp(struct rdma_cm_id *id)
{
	if (id->qp)
		rdma_destroy_qp(id);
}

static void rds_rs_ib_done(struct ib_cq *cq, struct ib_wc *wc)
{
	rds_rs_ib_wc(wc->wr_cqe, wc->status, wc->opcode, wc->byte_len);
}

void rds_rs_ib_cqe_init(struct ib_cqe *cqe)
{
	cqe->done = rds_rs_ib_done;
}

int rds_rs_ib_post_send(struct rdma_cm_id *id, struct ib_cqe *cqe, u64 hdr, u32 hdr_len,
			u64 data, u32 data_len, u32 lkey, int flags)
{
	struct ib_sge sge[2] = {
		{ .addr = hdr, .length = hdr_len, .lkey = lkey },
		{ .addr = data, .length = data_len, .lkey = lkey },
	};
	struct ib_send_wr wr = {
		.wr_cqe = cqe,
		.sg_list = sge,
		.num_sge = data_len ? 2 : 1,
		.opcode = IB_WR_SEND,
	};

	if (flags & RDS_RS_IB_SIGNALED)
		wr.send_flags |= IB_SEND_SIGNALED;
	if (flags & RDS_RS_IB_SOLICITED)
		wr.send_flags |= IB_SEND_SOLICITED;
	if (flags & RDS_RS_IB_FENCE)
		wr.send_flags |= IB_SEND_FENCE;
	return ib_post_send(id->qp, &wr, NULL);
}

/*
 * An RDMA WRITE (write) or READ of nsge local pieces (DMA addresses and lengths, at most
 * RDS_RS_IB_MAX_SGE, all under lkey) to or from the peer's registration rkey at remote_addr.
 */
int rds_rs_ib_post_rdma(struct rdma_cm_id *id, struct ib_cqe *cqe, const u64 *addrs,
			const u32 *lens, u32 nsge, u32 lkey, int kind, u64 remote_addr,
			u32 rkey, const struct rds_rs_ib_atomic *at, int flags)
{
	struct ib_sge sge[RDS_RS_IB_MAX_SGE];
	struct ib_rdma_wr rdma = {};
	struct ib_atomic_wr atomic = {};
	struct ib_send_wr *wr;
	u32 i;

	if (nsge == 0 || nsge > RDS_RS_IB_MAX_SGE)
		return -EINVAL;
	switch (kind) {
	case RDS_RS_IB_WR_WRITE:
	case RDS_RS_IB_WR_READ:
		rdma.wr.opcode = kind == RDS_RS_IB_WR_WRITE ? IB_WR_RDMA_WRITE : IB_WR_RDMA_READ;
		rdma.remote_addr = remote_addr;
		rdma.rkey = rkey;
		wr = &rdma.wr;
		break;
	case RDS_RS_IB_WR_CSWP:
	case RDS_RS_IB_WR_FADD:
	case RDS_RS_IB_WR_MASKED_CSWP:
	case RDS_RS_IB_WR_MASKED_FADD:
		if (!at || nsge != 1 || lens[0] != sizeof(u64))
			return -EINVAL;
		atomic.wr.opcode = kind == RDS_RS_IB_WR_CSWP ? IB_WR_ATOMIC_CMP_AND_SWP :
				   kind == RDS_RS_IB_WR_FADD ? IB_WR_ATOMIC_FETCH_AND_ADD :
				   kind == RDS_RS_IB_WR_MASKED_CSWP ?
				   IB_WR_MASKED_ATOMIC_CMP_AND_SWP :
				   IB_WR_MASKED_ATOMIC_FETCH_AND_ADD;
		atomic.remote_addr = remote_addr;
		atomic.rkey = rkey;
		atomic.compare_add = at->compare_add;
		atomic.swap = at->swap;
		atomic.compare_add_mask = at->compare_add_mask;
		atomic.swap_mask = at->swap_mask;
		wr = &atomic.wr;
		break;
	default:
		return -EINVAL;
	}
	for (i = 0; i < nsge; i++) {
		sge[i].addr = addrs[i];
		sge[i].length = lens[i];
		sge[i].lkey = lkey;
	}
	wr->wr_cqe = cqe;
	wr->sg_list = sge;
	wr->num_sge = nsge;
	if (flags & RDS_RS_IB_SIGNALED)
		wr->send_flags |= IB_SEND_SIGNALED;
	if (flags & RDS_RS_IB_FENCE)
		wr->send_flags |= IB_SEND_FENCE;
	return ib_post_send(id->qp, wr, NULL);
}

int rds_rs_ib_post_reg_mr(struct rdma_cm_id *id, struct ib_cqe *cqe, struct rds_rs_frmr *f,
			  bool remote_write, int flags)
{
	struct ib_reg_wr reg = {
		.wr = {
			.opcode = IB_WR_REG_MR,
			.wr_cqe = cqe,
		},
		.mr = f->mr,
		.key = f->mr->rkey,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ,
	};

	if (remote_write)
		reg.access |= IB_ACCESS_REMOTE_WRITE;
	if (flags & RDS_RS_IB_SIGNALED)
		reg.wr.send_flags |= IB_SEND_SIGNALED;
	return ib_post_send(id->qp, &reg.wr, NULL);
}

/*
 * A signaled IB_WR_LOCAL_INV of rkey (an MR that is never valid: nothing changes). siw runs it
 * in its transmit thread after the work it is doing, a READ RESPONSE it started included, so
 * its completion says that response is over.
 */
int rds_rs_ib_post_fence(struct rdma_cm_id *id, struct ib_cqe *cqe, u32 rkey)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV,
		.wr_cqe = cqe,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = rkey,
	};

	return ib_post_send(id->qp, &wr, NULL);
}

int rds_rs_ib_post_recv(struct rdma_cm_id *id, struct ib_cqe *cqe, u64 hdr, u32 hdr_len,
			u64 data, u32 data_len, u32 lkey)
{
	struct ib_sge sge[2] = {
		{ .addr = hdr, .length = hdr_len, .lkey = lkey },
		{ .addr = data, .length = data_len, .lkey = lkey },
	};
	struct ib_recv_wr wr = {
		.wr_cqe = cqe,
		.sg_list = sge,
		.num_sge = 2,
	};

	return ib_post_recv(id->qp, &wr, NULL);
}

static enum dma_data_direction rds_rs_dir(int to_device)
{
	return to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE;
}

int rds_rs_ib_map_single(struct ib_device *dev, void *p, size_t len, int to_device, u64 *out)
{
	u64 a = ib_dma_map_single(dev, p, len, rds_rs_dir(to_device));

	if (ib_dma_mapping_error(dev, a))
		return -ENOMEM;
	*out = a;
	return 0;
}

void rds_rs_ib_unmap_single(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_unmap_single(dev, addr, len, rds_rs_dir(to_device));
}

int rds_rs_ib_map_page(struct ib_device *dev, struct page *page, size_t off, size_t len,
		       int to_device, u64 *out)
{
	u64 a = ib_dma_map_page(dev, page, off, len, rds_rs_dir(to_device));

	if (ib_dma_mapping_error(dev, a))
		return -ENOMEM;
	*out = a;
	return 0;
}

void rds_rs_ib_unmap_page(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_unmap_page(dev, addr, len, rds_rs_dir(to_device));
}

void rds_rs_ib_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_sync_single_for_cpu(dev, addr, len, rds_rs_dir(to_device));
}

void rds_rs_ib_sync_for_device(struct ib_device *dev, u64 addr, size_t len, int to_device)
{
	ib_dma_sync_single_for_device(dev, addr, len, rds_rs_dir(to_device));
}
