// SPDX-License-Identifier: GPL-2.0

//! A namespace's listener: port 16385, and what an accepted connection is for.
//!
//! C counterpart: `net/rds/tcp_listen.c` (`rds_tcp_listen_init`, `rds_tcp_accept_one`,
//! `rds_tcp_accept_one_path`, `rds_tcp_listen_data_ready`).
//!
//! The listener's callback queues the accept work, which accepts every waiting connection.
//! A connection is for the RDS connection between its two addresses (created passively if
//! there is none); it is taken only from a peer with the smaller address (TCP's client, C's
//! rule). One from a peer with the larger address is a nudge: it is reset, and this side
//! connects instead. One from an address of this host is refused (loopback carries those).

use super::conn::TcpConn;
use super::TcpTransport;
use crate::bindings::net::NetId;
use crate::bindings::sync::ProcessCtx;
use crate::bindings::sys::{impl_work_item, new_process_work, Work};
use crate::bindings::tcp::{self as btcp, ListenEvents, Listener, TcpSocket};
use crate::conn::ConnKey;
use crate::proto::{tcp_connects, Addr, Stat, RDS_TCP_PORT};
use crate::stats;
use crate::transport::Transport;
use core::sync::atomic::Ordering;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

/// The backlog of a listener (C: 64).
const BACKLOG: i32 = 64;

/// A namespace's listener.
///
/// Lock order: `sock` before a connection's `TcpConn::state` (the accept work installs the
/// accepted socket while it holds `sock`, so that the namespace's exit, which takes the
/// listener out under `sock`, knows that no accept is still creating connections).
#[pin_data]
pub(super) struct NetListener {
    net: NetId,
    tcp: Arc<TcpTransport>,
    /// The listening socket; `None` once the namespace is going.
    #[pin]
    sock: Mutex<Option<Listener>>,
    #[pin]
    accept_work: Work<NetListener, 0>,
}

impl_work_item!(NetListener, 0, accept_work, NetListener::accept_worker);

/// The listener's callback: a connection waits.
struct Ready {
    l: Arc<NetListener>,
}

impl ListenEvents for Ready {
    fn ready(&self) {
        Work::<NetListener, 0>::queue(&self.l.tcp.shared.wq, self.l.clone());
    }
}

impl NetListener {
    /// Listens on port 16385 of every address in `net`: IPv6 (which takes IPv4 too), or IPv4
    /// where IPv6 is not available.
    pub(super) fn start(
        tcp: &Arc<TcpTransport>,
        net: NetId,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Self>> {
        let l = Arc::pin_init(
            pin_init!(Self {
                net,
                tcp: tcp.clone(),
                sock <- new_mutex!(None, "NetListener::sock"),
                accept_work <- new_process_work!("NetListener::accept_work"),
            }),
            GFP_KERNEL,
        )?;
        let listen = |v6: bool| -> Result<Listener> {
            let s = TcpSocket::new(net, v6, ctx)?;
            // The family's wildcard address.
            let any = if v6 { Addr::ANY } else { Addr::from_v4([0; 4]) };
            s.bind(&any.0, RDS_TCP_PORT, 0, ctx)?;
            let ready: Arc<dyn ListenEvents> = Arc::new(Ready { l: l.clone() }, GFP_KERNEL)?;
            s.into_listener(BACKLOG, ready, ctx)
        };
        let sock = match listen(true) {
            Ok(s) => s,
            Err(_) => listen(false).inspect_err(|e| {
                pr_warn!("no RDS/TCP listener in a namespace ({:?})\n", e.to_errno())
            })?,
        };
        *l.sock.lock() = Some(sock);
        Ok(l)
    }

    /// The namespace.
    pub(super) fn net(&self) -> NetId {
        self.net
    }

    /// Closes the listener (the namespace is going): when this returns, no accept creates a
    /// connection in the namespace any more.
    pub(super) fn stop(&self, _ctx: &ProcessCtx) {
        let l = self.sock.lock().take();
        drop(l);
    }

    fn accept_worker(this: Arc<Self>, ctx: &ProcessCtx) {
        if this.tcp.closing.load(Ordering::Acquire) {
            return;
        }
        let guard = this.sock.lock();
        let Some(l) = guard.as_ref() else { return };
        loop {
            match l.accept(ctx) {
                Ok(Some(s)) => this.accept_one(s, ctx),
                Ok(None) => break,
                Err(_) => {
                    stats::inc(Stat::RsTcpAcceptFailed);
                    break;
                }
            }
        }
    }

    /// Matches an accepted socket to its connection (C: `rds_tcp_accept_one`).
    fn accept_one(&self, sock: TcpSocket, ctx: &ProcessCtx) {
        // A socket for no connection of TCP's is reset, and counted.
        let refuse = |sock: TcpSocket| {
            stats::inc(Stat::RsTcpAcceptRefused);
            sock.reset(ctx);
        };
        let n = sock.names();
        let (laddr, faddr) = (Addr(n.laddr), Addr(n.faddr));
        sock.tune(self.net, ctx);
        // C: a connection from an address of this host comes over loopback only.
        if btcp::addr_is_local(self.net, &n.faddr, n.dev_if, ctx) {
            return refuse(sock);
        }
        let key = ConnKey {
            net: self.net,
            laddr,
            faddr,
            tos: 0,
            path: 0,
        };
        let shared = &self.tcp.shared;
        let t: Arc<dyn Transport> = self.tcp.clone();
        let Ok(conn) = shared.conns.get_passive(shared, key, &t, ctx) else {
            return refuse(sock);
        };
        let Some(tc) = conn.tstate::<TcpConn>() else {
            // A connection of another transport between the same addresses.
            return refuse(sock);
        };
        if !tcp_connects(&faddr, &laddr) {
            // The peer has the larger address: it only nudges; this side connects, every
            // path (the nudge does not say which path it is for).
            sock.reset(ctx);
            conn.connect_if_down(ctx);
            conn.start_paths(ctx);
            return;
        }
        tc.accept(&conn, sock, ctx);
    }
}
