// SPDX-License-Identifier: GPL-2.0

//! A connection's IB state and its incarnations.
//!
//! C counterpart: `net/rds/ib_cm.c` (`rds_ib_conn_alloc`, `rds_ib_conn_path_connect`,
//! `rds_ib_conn_path_shutdown`, `rds_ib_setup_qp`, the CQ handlers) and `ib.c`'s connection
//! info.
//!
//! - [`IbConn`]: the transport's state of one connection (its `ConnTransport`): connect,
//!   shutdown, `xmit` (on the current path's QP: [`super::send`]) and the connection info.
//! - [`Path`]: one incarnation on a device: the cm id while it resolves, then the QP and its
//!   resources ([`PathQp`], [`super::qp`]); its setup, retirement and teardown.
//! - `WcHandler for Path`: the completions of the path's QP, handed to the send and receive
//!   sides; [`wc_failed`], what a failed one does.

use super::qp::PathQp;
use super::{IbTransport, RDMA_SETTLE_MS, RESOLVE_MS};
use crate::bindings::ib::{
    CmHandler, CmId, CmIdRef, Device, Wc, WcHandler, WcStatus, TAG_KIND, TAG_RECV, TAG_SEND,
};
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::bindings::sys::{impl_work_item, new_process_work, Work};
use crate::conn::{Conn, ConnKey};
use crate::message::Message;
use crate::proto::{yields_connect, ConnState, Stat, MAX_MR_PAGES, RDS_IB_PORT, RDS_IB_PORT6};
use crate::stats;
use crate::transport::{ConnTransport, RdmaInfo, XmitError, XmitProgress};
use core::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

/// The IB state of one connection.
#[pin_data]
pub(crate) struct IbConn {
    pub(super) key: ConnKey,
    /// The transport (its devices).
    pub(super) ib: Arc<IbTransport>,
    /// The peer is an address of this host (C: `c_loopback`): both ends share the maps.
    pub(super) local_peer: bool,
    /// The current incarnation, if any.
    #[pin]
    pub(super) path: SpinLockBh<Option<Arc<Path>>>,
}

impl IbConn {
    pub(super) fn current(&self) -> Option<Arc<Path>> {
        self.path.lock().clone()
    }

    pub(super) fn on_device(&self, dev: Device) -> bool {
        self.current()
            .and_then(|p| p.qp())
            .is_some_and(|q| q.dev.dev == dev)
    }

    fn v6(&self) -> bool {
        self.key.laddr.v4().is_none()
    }
}

impl ConnTransport for IbConn {
    fn connect(&self, conn: &Arc<Conn>, ctx: &ProcessCtx) -> Result {
        let path = Path::new(conn.clone(), true)?;
        let handler: Arc<dyn CmHandler> = path.clone();
        let id = CmId::new(handler, self.v6(), ctx)?;
        // The id goes into the path before the path is published: a shutdown that takes the
        // path from here on destroys the id with it.
        *path.pending.lock() = Some(id);
        let old = self.path.lock().replace(path.clone());
        if let Some(o) = old {
            o.teardown(ctx);
        }
        if conn.is_destroyed() {
            // Destroyed since the core looked (a `sendmsg` starts connects outside the
            // connection's works): its shutdown may have taken the path before this one was in
            // place, and nothing else would tear this one down (the connection and the path
            // hold each other). The destroy set the flag before its shutdown took the path, so
            // one of the two sees the other.
            let mine = {
                let mut cur = self.path.lock();
                if cur.as_ref().is_some_and(|p| Arc::ptr_eq(p, &path)) {
                    cur.take()
                } else {
                    None
                }
            };
            if let Some(p) = mine {
                p.teardown(ctx);
            }
            return Err(crate::bindings::net::enotconn());
        }
        let port = if self.v6() { RDS_IB_PORT6 } else { RDS_IB_PORT };
        let pending = path.pending.lock();
        match pending.as_ref() {
            // The events follow; `ROUTE_RESOLVED` takes the id from `pending`.
            Some(id) => id.resolve_addr(&self.key.laddr.0, &self.key.faddr.0, port, 0, RESOLVE_MS),
            // A shutdown took the path down already.
            None => Err(crate::bindings::net::enotconn()),
        }
    }

    fn shutdown(&self, _conn: &Arc<Conn>, ctx: &ProcessCtx) {
        let path = self.path.lock().take();
        if let Some(p) = path {
            p.teardown(ctx);
        }
    }

    fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        _ctx: &ProcessCtx,
    ) -> Result<(), XmitError> {
        if msg.is_cong_map() && self.local_peer {
            // Both ends share the host's maps (C sends none over IB loopback).
            return Ok(());
        }
        let Some(q) = self.current().and_then(|p| p.qp()) else {
            return Err(XmitError::Full);
        };
        q.xmit(conn, msg, progress)
    }

    fn rdma_info(&self) -> Option<RdmaInfo> {
        let mut info = RdmaInfo::default();
        if let Some(q) = self.current().and_then(|p| p.qp()) {
            if let Some((s, d, sl)) = q.qp.route_info() {
                info.src_gid = s;
                info.dst_gid = d;
                info.sl = sl;
                info.max_send_wr = q.ring_slots();
                info.max_recv_wr = q.qp.nrecv();
                info.max_send_sge = q.dev.attrs.max_send_sge.min(8);
                info.cache_kib = q.pages.spare_kib();
                info.mr_max = q.dev.attrs.max_mr;
                // iWARP: one fast registration maps at most this many pages.
                let most = u32::try_from(MAX_MR_PAGES).unwrap_or(u32::MAX);
                info.mr_size = if q.dev.attrs.iwarp {
                    most.min(q.dev.attrs.max_fast_reg_pages)
                } else {
                    most
                };
            }
        }
        Some(info)
    }
}

/// One incarnation of a connection on a device: the cm id while its address and route
/// resolve (`pending`, active side), then the QP and its resources ([`PathQp`]).
#[pin_data]
pub(super) struct Path {
    pub(super) conn: Arc<Conn>,
    pub(super) active: bool,
    /// The id while the address and route resolve. Its lock also orders a teardown against
    /// the cm handlers that install the QP (`ROUTE_RESOLVED`, a passive accept): they check
    /// `dead` and install the QP (and connect or accept) under it, and `teardown` sets `dead`
    /// under it before it looks for the QP; so either the handler sees `dead` and takes its
    /// QP down itself, or the teardown finds the QP.
    #[pin]
    pub(super) pending: Mutex<Option<CmId>>,
    /// A teardown started, or a newer incarnation replaced this one: no QP may be installed
    /// any more, and what arrives is not delivered (set under `pending`'s lock).
    pub(super) dead: AtomicBool,
    /// Active side: the connection request left (`ROUTE_RESOLVED` connected, under
    /// `pending`'s lock); what the tie-break of a request from the peer looks at.
    pub(super) requested: AtomicBool,
    /// The QP and its resources, once set up.
    #[pin]
    pub(super) qp: SpinLockBh<Option<Arc<PathQp>>>,
    /// The version the handshake settled on.
    pub(super) version: AtomicU16,
    /// The incarnation this one replaced in a passive accept, which runs in a cm handler and
    /// must not take it down there: it goes with this one (`teardown`).
    /// Lock order: after [`IbConn`]'s `path`.
    #[pin]
    pub(super) prev: SpinLockBh<Option<Arc<Path>>>,
    /// Takes `prev` down ([`Path::drop_prev_later`]).
    #[pin]
    prev_work: Work<Path, 0>,
}

impl_work_item!(Path, 0, prev_work, Path::prev_teardown);

impl Path {
    pub(super) fn new(conn: Arc<Conn>, active: bool) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                conn,
                active,
                pending <- new_mutex!(None, "Path::pending"),
                dead: AtomicBool::new(false),
                requested: AtomicBool::new(false),
                qp <- new_spinlock_bh!(None, "Path::qp"),
                version: AtomicU16::new(0),
                prev <- new_spinlock_bh!(None, "Path::prev"),
                prev_work <- new_process_work!("Path::prev_work"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// The QP and its resources, once set up (`None` before, and after the teardown took
    /// them).
    pub(super) fn qp(&self) -> Option<Arc<PathQp>> {
        self.qp.lock().clone()
    }

    /// Marks the path dead (see `dead`) without tearing it down: what a cm handler may do to a
    /// path it replaces, and the first step of `teardown`.
    pub(super) fn retire(&self) {
        let _serial = self.pending.lock();
        self.dead.store(true, Ordering::Release);
    }

    /// A request from the peer met this connect in progress (active side): retires the path
    /// and returns true if the tie-break gives the connection to the peer's request
    /// (`yields_connect`); the decision and the retirement are one step under `pending`'s
    /// lock, so that the request does not leave in between.
    pub(super) fn yield_to_peer(&self) -> bool {
        let _serial = self.pending.lock();
        let key = &self.conn.key;
        let sent = self.requested.load(Ordering::Acquire);
        if !self.active || !yields_connect(&key.laddr, &key.faddr, sent) {
            return false;
        }
        self.dead.store(true, Ordering::Release);
        true
    }

    /// Takes the path down (process context, not in a cm handler): the id of a connect in
    /// progress is destroyed; a QP stops posting, disconnects, drains (every outstanding
    /// request completes, flushed), and goes with its id and resources.
    fn teardown(&self, ctx: &ProcessCtx) {
        pr_debug!("ib path {:p} teardown\n", self);
        // From here no handler installs a QP (see `pending`), and nothing this incarnation
        // receives is delivered (`Path::done`): a newer one may deliver already.
        self.retire();
        let pending = self.pending.lock().take();
        // RDMA requests still out get a moment to complete by themselves before the QP is
        // flushed (their completions are handled while the path still holds the QP): a peer
        // that refused one (a bad r_key) sends its NAK before it disconnects, but the
        // disconnect may be handled here first, and the operation would then be reported
        // dropped instead of refused.
        if let Some(q) = self.qp() {
            if !q.rdma_settling.swap(true, Ordering::AcqRel) {
                q.rdma_out.arrive();
            }
            // At most `RDMA_SETTLE_MS`, and not at all when none is out.
            q.rdma_out.wait(RDMA_SETTLE_MS, ctx);
        }
        // The QP first: it may use the id `pending` held.
        let qp = self.qp.lock().take();
        if let Some(q) = qp {
            q.qp.shutdown(ctx);
            // Nothing else holds the resources now: completions are drained, the id's
            // handlers are over, and the core runs no `xmit` during a shutdown.
            drop(q);
        }
        // Destroying the id waits for a handler of it that is still running.
        drop(pending);
        let prev = self.prev.lock().take();
        if let Some(p) = prev {
            p.teardown(ctx);
        }
    }

    /// Takes the incarnation this one replaced (`prev`) down later, in the work `prev_work`
    /// on the core's work queue, outside the cm handlers: what a passive accept that took over
    /// our own connect does (see `yields_connect`), since destroying the old id in a cm
    /// handler could wait for the handler's own work queue. A shutdown of this path first
    /// takes it down with this one.
    pub(super) fn drop_prev_later(self: &Arc<Self>) {
        Work::<Path, 0>::queue(&self.conn.shared.wq, self.clone());
    }

    /// The work of [`Path::drop_prev_later`].
    fn prev_teardown(this: Arc<Self>, ctx: &ProcessCtx) {
        let prev = this.prev.lock().take();
        if let Some(p) = prev {
            p.teardown(ctx);
        }
    }

    /// Builds the QP and its resources on the id's device and posts the receives (in the id's
    /// handler).
    pub(super) fn setup(
        self: &Arc<Self>,
        id: CmIdRef<'_>,
        ctx: &ProcessCtx,
    ) -> Result<Arc<PathQp>> {
        let dev = id.device().ok_or(ENODEV)?;
        let ibdev = self.ic().ok_or(ENODEV)?.ib.find(dev).ok_or(ENODEV)?;
        let q = PathQp::new(self.clone(), id, ibdev, ctx)?;
        for i in 0..q.qp.nrecv() {
            if let Err(e) = q.post_recv(i, None, GFP_KERNEL) {
                q.qp.shutdown(ctx);
                return Err(e);
            }
        }
        // The receives the handshake offers the peer.
        q.credits.add_posted(q.qp.nrecv());
        Ok(q)
    }

    /// The IB state of the path's connection (always there: the path was made for an IB
    /// connection).
    pub(super) fn ic(&self) -> Option<&IbConn> {
        self.conn.tstate::<IbConn>()
    }

    /// The `Arc` of this path (the connection holds it), if it is still the current one.
    pub(super) fn me(&self) -> Option<Arc<Path>> {
        let cur = self.ic()?.current()?;
        core::ptr::eq(&*cur, self).then_some(cur)
    }
}

/// A work request completed in error: the connection drops (its QP is unusable). A flushed
/// request is the echo of an error already handled, or of a teardown, unless the connection
/// is still up: then the QP went to the error state without telling us first (rxe does when
/// a packet cannot leave the host, e.g. while the link is down), and nothing but a reconnect
/// brings back its receives and credits (C: any failed completion while the connection is up).
pub(super) fn wc_failed(conn: &Arc<Conn>, status: WcStatus, stat: Stat) {
    if status != WcStatus::WrFlushErr {
        stats::inc(stat);
        conn.drop_connection();
    } else if conn.state() == ConnState::Up {
        // Not counted as an error of ours: a peer that disconnects flushes our receives too,
        // sometimes before its DISCONNECTED event arrives.
        conn.drop_connection();
    }
}

impl WcHandler for Path {
    /// Softirq context (see [`WcHandler`]).
    fn done(&self, tag: u32, wc: Wc) {
        // After a teardown took the resources, the flushed requests have nothing left to give
        // back: the resources go with the QP.
        let Some(q) = self.qp() else { return };
        let slot = tag & !TAG_KIND;
        let live = !self.dead.load(Ordering::Acquire);
        match tag & TAG_KIND {
            TAG_SEND if slot == q.ack_slot() => q.ack_done(&self.conn, wc, live),
            TAG_SEND => q.send_done(&self.conn, slot, wc, live),
            // Frames of an incarnation that is going are not delivered: a newer one may
            // already have delivered their retransmissions, and they would come again (an
            // original is not marked RETRANSMITTED, so the sequence check lets it through).
            // The peer resends them, unacknowledged, after the reset that comes with it.
            TAG_RECV => q.recv_done(&self.conn, slot, wc, live),
            _ => {}
        }
    }
}
