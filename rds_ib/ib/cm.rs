// SPDX-License-Identifier: GPL-2.0

//! Connection management: the listeners and their connection requests (the passive side),
//! and the events of a path's cm id (the active side: address and route resolution, the
//! handshake).
//!
//! C counterpart: `net/rds/ib_cm.c` (`rds_ib_cm_handle_connect`, `rds_ib_cm_initiate_connect`,
//! `rds_ib_cm_connect_complete`) and `net/rds/rdma_transport.c` (the cm event handler).
//!
//! - [`Listener`]: the handler of the listeners' ids (made by `IbModule::new`); `accept`
//!   checks a request, claims its connection and accepts it with a new [`Path`] and QP, or
//!   rejects it.
//! - `CmHandler for Path`: a path's events, from `ADDR_RESOLVED` to `ESTABLISHED` (the reply's
//!   version and credits) and the errors that drop the connection.

use super::conn::{IbConn, Path};
use super::{IbTransport, RESOLVE_MS};
use crate::bindings::ib::{CmAction, CmEvent, CmEventKind, CmHandler, CmIdRef, Device};
use crate::bindings::net::NetId;
use crate::bindings::sync::ProcessCtx;
use crate::bindings::sys;
use crate::conn::{Conn, ConnKey};
use crate::proto::{
    negotiate, reject_drops, reply_version_ok, ConnPriv, ConnState, NegotiateError, RejectReason,
    Stat, PRIV_LEN_V6,
};
use crate::socket::Shared;
use crate::stats;
use crate::transport::Transport;
use core::sync::atomic::{fence, Ordering};
use kernel::{prelude::*, sync::Arc};

/// The listeners: requests on the RDS ports.
pub(super) struct Listener {
    pub(super) shared: Arc<Shared>,
    pub(super) ib: Arc<IbTransport>,
}

impl CmHandler for Listener {
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction {
        if ev.kind != CmEventKind::ConnectRequest {
            return CmAction::Keep;
        }
        match self.accept(id, ev, ctx) {
            Ok(()) => CmAction::Keep,
            Err(reason) => {
                id.reject(reason.raw());
                CmAction::Destroy
            }
        }
    }
}

impl Listener {
    /// A connection request (C: `rds_ib_cm_handle_connect`): `Err` rejects it with the
    /// reason (and rdma_cm destroys its id).
    fn accept(
        &self,
        id: CmIdRef<'_>,
        ev: &CmEvent<'_>,
        ctx: &ProcessCtx,
    ) -> core::result::Result<(), RejectReason> {
        pr_debug!(
            "ib connect request, {} bytes of private data\n",
            ev.private.len()
        );
        let delay = crate::bindings::testhooks::ib_request_delay_ms();
        if delay > 0 {
            sys::sleep_ms(delay, ctx);
        }
        let (version, p) = negotiate(ev.private, ev.v6).map_err(|e| {
            stats::inc(Stat::RsIbConnectBadPrivate);
            match e {
                NegotiateError::Incompatible { .. }
                | NegotiateError::Empty
                | NegotiateError::Short => RejectReason::Incompatible,
            }
        })?;
        // The request is for our address `daddr`, from the peer's `saddr`: an address of this
        // host that a device serves, from a unicast address (C takes them as they come; a
        // peer could otherwise make us keep connections for any address).
        if p.saddr.is_any()
            || p.saddr.is_loopback()
            || p.daddr.is_loopback()
            || Device::for_addr(&p.daddr.0, 0, ctx).is_none()
        {
            stats::inc(Stat::RsIbConnectBadPrivate);
            return Err(RejectReason::Incompatible);
        }
        let key = ConnKey {
            net: NetId::init(),
            laddr: p.daddr,
            faddr: p.saddr,
            tos: p.tos,
            path: 0,
        };
        let shared = &self.shared;
        let ib: Arc<dyn Transport> = self.ib.clone();
        let conn = shared
            .conns
            .get_passive(shared, key, &ib, ctx)
            .map_err(|_| RejectReason::Incompatible)?;
        // A connection of this key made by another transport is not ours to accept.
        let Some(ic) = conn.tstate::<IbConn>() else {
            return Err(RejectReason::Incompatible);
        };
        pr_debug!("ib request for state {:?}\n", conn.state());
        // Our own connect to the peer, retired because this request takes its place (see
        // `yields_connect`): the connection stays `Connecting`, with this incarnation instead.
        let mut yielded = None;
        if !conn.try_accept() {
            // C's counters: a request for a connection that is up closes it as stale
            // (`ib_listen_closed_stale`); one that meets our own connect in progress is a race
            // (`ib_connect_raced`) unless the tie-break gives the connection to the request.
            match conn.state() {
                ConnState::Up => {
                    // A stale connection: the peer started over; ours goes too (C).
                    conn.drop_connection();
                    stats::inc(Stat::IbListenClosedStale);
                    return Err(RejectReason::Incompatible);
                }
                ConnState::Connecting => {
                    let ours = ic.current().filter(|o| o.yield_to_peer());
                    if ours.is_none() {
                        stats::inc(Stat::IbConnectRaced);
                        return Err(RejectReason::Incompatible);
                    }
                    yielded = ours;
                }
                _ => return Err(RejectReason::Incompatible),
            }
        }
        let fail = |conn: &Arc<Conn>| {
            conn.drop_connection();
            RejectReason::Incompatible
        };
        let path = Path::new(conn.clone(), false).map_err(|_| fail(&conn))?;
        path.version.store(version, Ordering::Relaxed);
        let q = path.setup(id, ctx).map_err(|_| fail(&conn))?;
        // Flow control if the request offers credits; the reply offers ours then (and only
        // then: a peer that offers none does not expect any).
        q.engage_flow_control(p.credit);
        let offer = if p.credit != 0 {
            q.credits.take_posted()
        } else {
            0
        };
        let delay = crate::bindings::testhooks::ib_accept_delay_ms();
        if delay > 0 {
            sys::sleep_ms(delay, ctx);
        }
        // Published unless the connection was destroyed: the destroy sets its flag before its
        // shutdown takes the path under this lock, so either this sees the flag or the
        // shutdown finds this path. A previous incarnation goes with this one (below); it is
        // handed over before this one is published, so that any teardown of this one finds it.
        // Our connect, if this request takes its place, was retired above, so that none of its
        // events (the peer's reject of it, say) drops the connection meanwhile.
        let replaced = {
            let mut cur = ic.path.lock();
            if conn.is_destroyed() {
                None
            } else if yielded
                .as_ref()
                .is_some_and(|o| !matches!(cur.as_ref(), Some(c) if Arc::ptr_eq(c, o)))
            {
                // Our connect went meanwhile (it failed, or a shutdown took it): the connection
                // is not ours to take over now.
                None
            } else {
                let old = cur.replace(path.clone());
                let replaced = old.is_some();
                *path.prev.lock() = old;
                Some(replaced)
            }
        };
        // The incarnation replaced delivers nothing more (its frames' retransmissions come
        // over this one).
        let old = path.prev.lock().clone();
        if let Some(o) = old {
            o.retire();
        }
        let Some(replaced) = replaced else {
            // The id is not adopted: rdma_cm destroys it after the reject.
            stats::inc(Stat::RsIbCmRaced);
            q.qp.shutdown(ctx);
            return Err(RejectReason::Incompatible);
        };
        // The QP is installed and the request accepted under `pending`'s lock, unless a
        // teardown of the (published) path came first (see `Path::pending`).
        let pending = path.pending.lock();
        if path.dead.load(Ordering::Acquire) {
            drop(pending);
            stats::inc(Stat::RsIbCmRaced);
            q.qp.shutdown(ctx);
            return Err(RejectReason::Incompatible);
        }
        let handler: Arc<dyn CmHandler> = path.clone();
        let owned = match id.adopt(handler) {
            Ok(o) => o,
            Err(_) => {
                drop(pending);
                q.qp.shutdown(ctx);
                return Err(fail(&conn));
            }
        };
        // From here the id is ours (it goes with the QP's shutdown): no more rejects.
        if let Err(back) = q.qp.set_id(owned) {
            // Cannot happen (a new QP has no id); the id must not be dropped in its handler.
            core::mem::forget(back);
        }
        *path.qp.lock() = Some(q);
        let mut reply = ConnPriv::request(p.daddr, p.saddr, p.tos);
        let [major, minor] = version.to_be_bytes();
        reply.major = major;
        reply.minor = minor;
        reply.credit = offer;
        let mut buf = [0u8; PRIV_LEN_V6];
        let n = reply.encode(&mut buf);
        if id.accept(buf.get(..n).unwrap_or(&[])).is_err() {
            conn.drop_connection();
        }
        drop(pending);
        if yielded.is_some() {
            // Our own connect, replaced: its id and QP go now, in the core's work queue outside
            // the cm handlers (their destruction waits for this handler's work queue); the
            // connection stays `Connecting` with this incarnation.
            stats::inc(Stat::RsIbConnectYielded);
            path.drop_prev_later();
            return Ok(());
        }
        if replaced {
            // A previous incarnation the shutdown work has not torn down yet (an active
            // connect that failed, say): it goes now, with this one, through the connection's
            // shutdown, which tears this one down and it with it. Only dropping it would leave
            // its cm id, and the connection it holds, for ever.
            conn.drop_connection();
        }
        Ok(())
    }
}

impl CmHandler for Path {
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction {
        let conn = &self.conn;
        pr_debug!(
            "ib path {:p} active {} event {} status {} conn state {:?}\n",
            self,
            self.active,
            ev.kind.raw(),
            ev.status,
            conn.state()
        );
        if self.dead.load(Ordering::Acquire) {
            // A path torn down or replaced (our connect after the peer's request won): its
            // events say nothing about the connection, which may be up on another path.
            // Its teardown destroys the id.
            return CmAction::Keep;
        }
        match ev.kind {
            CmEventKind::AddrResolved => {
                id.set_tos(conn.key.tos);
                if id.resolve_route(RESOLVE_MS).is_err() {
                    conn.drop_connection();
                }
            }
            CmEventKind::RouteResolved => {
                let Some(me) = self.me() else {
                    // A path the connection left: its teardown destroys the id.
                    return CmAction::Keep;
                };
                let r = me.setup(id, ctx);
                let delay = crate::bindings::testhooks::ib_route_delay_ms();
                if delay > 0 {
                    sys::sleep_ms(delay, ctx);
                }
                pr_debug!(
                    "ib path setup {:?}\n",
                    r.as_ref().err().map(|e| e.to_errno())
                );
                match r {
                    Ok(q) => {
                        // Installed and connected under `pending`'s lock (see there).
                        let mut pending = self.pending.lock();
                        let owned = if self.dead.load(Ordering::Acquire) {
                            None
                        } else {
                            pending.take()
                        };
                        let Some(owned) = owned else {
                            // Torn down (or replaced) meanwhile: the id stays where it is (the
                            // teardown destroys it once this handler returns; it must not go
                            // here); the QP, which does not own it, goes now.
                            drop(pending);
                            stats::inc(Stat::RsIbCmRaced);
                            q.qp.shutdown(ctx);
                            return CmAction::Keep;
                        };
                        // The owned id moves to the QP, which destroys it at its shutdown.
                        if let Err(back) = q.qp.set_id(owned) {
                            *pending = Some(back);
                        }
                        // The request leaves now (a request from the peer that meets it is
                        // settled by the address order from here: `Path::yield_to_peer`).
                        self.requested.store(true, Ordering::Release);
                        let mut req =
                            ConnPriv::request(conn.key.laddr, conn.key.faddr, conn.key.tos);
                        req.credit = q.credits.take_posted();
                        *self.qp.lock() = Some(q);
                        let mut buf = [0u8; PRIV_LEN_V6];
                        let n = req.encode(&mut buf);
                        if id.connect(buf.get(..n).unwrap_or(&[])).is_err() {
                            conn.drop_connection();
                        }
                        drop(pending);
                    }
                    Err(_) => conn.drop_connection(),
                }
            }
            CmEventKind::Established => {
                if self.active {
                    // The reply's version (C: `rds_ib_cm_connect_complete`); a reply without
                    // private data is 4.1 there, which is the same wire.
                    let reply = ConnPriv::decode(ev.private, conn.key.laddr.v4().is_none());
                    if let Some(p) = reply {
                        if !reply_version_ok(p.version()) {
                            stats::inc(Stat::RsIbConnectBadPrivate);
                            conn.drop_connection();
                            return CmAction::Keep;
                        }
                        self.version.store(p.version(), Ordering::Relaxed);
                    }
                    if let Some(q) = self.qp() {
                        // Flow control if the reply offers credits too (nothing is sent
                        // before this).
                        q.engage_flow_control(reply.map_or(0, |p| p.credit));
                        // iWARP: the initiator speaks first (MPA); an ack-only frame says
                        // nothing else, and frees the responder to send.
                        if q.dev.attrs.iwarp {
                            q.send_ack(conn);
                        }
                    }
                }
                let delay = crate::bindings::testhooks::ib_established_delay_ms();
                if delay > 0 {
                    sys::sleep_ms(delay, ctx);
                }
                conn.connect_complete();
                // A receive that failed before the connection was up was not taken for an
                // error (`wc_failed`): the QP went to the error state during the handshake
                // (rxe moves a responder's QP there at a peer's RDMA request with a bad
                // r_key, and its flushes can come before this event). Such a QP receives
                // nothing more; only a reconnect brings the connection back. Paired with
                // the fence in `PathQp::recv_done`: either that sees the connection up, or this
                // sees `rx_dead`.
                fence(Ordering::SeqCst);
                if !self.dead.load(Ordering::Acquire)
                    && self.qp().is_some_and(|q| q.rx_dead.load(Ordering::Acquire))
                {
                    conn.drop_connection();
                }
            }
            CmEventKind::Rejected => {
                stats::inc(Stat::RsIbConnectRejected);
                if reject_drops(ev.private) {
                    conn.drop_connection();
                }
            }
            CmEventKind::AddrError
            | CmEventKind::RouteError
            | CmEventKind::ConnectError
            | CmEventKind::Unreachable
            | CmEventKind::DeviceRemoval
            | CmEventKind::AddrChange
            | CmEventKind::Disconnected
            | CmEventKind::TimewaitExit => conn.drop_connection(),
            _ => {}
        }
        CmAction::Keep
    }
}
