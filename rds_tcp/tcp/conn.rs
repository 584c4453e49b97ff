// SPDX-License-Identifier: GPL-2.0

//! A connection over TCP: its socket, who connects, and the socket's callbacks.
//!
//! C counterpart: `net/rds/tcp_connect.c` (`rds_tcp_conn_path_connect`,
//! `rds_tcp_state_change`, `rds_tcp_conn_path_shutdown`), `tcp.c` (`rds_tcp_set_callbacks`,
//! `rds_tcp_restore_callbacks`) and the installing half of `tcp_listen.c`.
//!
//! # Who connects
//!
//! The end with the smaller address connects (TCP's client) and reconnects after a failure.
//! The larger end accepts. When it has something to send while down, it nudges: it connects
//! too, and the peer (C or rds-rs) resets that connection and connects back. A nudge is never
//! used to carry data; if the peer refuses it, the connection drops and the core's backoff
//! nudges again. An accepted connection is installed when the RDS connection is down, or
//! connecting with only a nudge out (the nudge is dropped); otherwise it waits, parked, for
//! the connection to be down (C resets it, and loses what TCP had acknowledged on it).
//!
//! # Incarnations
//!
//! Each socket has its own [`Link`], the handler of its callbacks and the state of its byte
//! stream (the receive side's position, the message being received). A link is retired
//! before its socket is detached; a retired link's callbacks and work change nothing.

use super::recv::RxState;
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::bindings::sys::{
    impl_delayed_work_item, impl_work_item, new_process_work, DelayedWork, Work,
};
use crate::bindings::tcp::{self as btcp, Attached, CbSock, TcpEvents, TcpSocket, TcpState};
use crate::conn::{Conn, ConnKey};
use crate::message::Message;
use crate::proto::{
    accepted_path, misplaced, path_port, path_port_groups, tcp_acked, tcp_connects, Addr, SavedRx,
    Stat, TcpSockInfo, RDS_TCP_PORT,
};
use crate::stats;
use crate::transport::{ConnTransport, XmitError, XmitProgress};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, ArcBorrow, Mutex},
};

/// What a socket was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// This end connected (it has the smaller address).
    Client,
    /// This end's connection attempt that only tells the peer to connect (the larger address).
    Nudge,
    /// Accepted from the peer.
    Accepted,
}

/// The current socket of a connection.
pub(super) struct Current {
    pub(super) sock: Attached,
    pub(super) link: Arc<Link>,
    /// The header of the message being sent (written when the drain starts a message, read
    /// while it sends the rest).
    pub(super) tx_hdr: [u8; crate::proto::HEADER_LEN],
    /// The socket is corked for the drain in progress (set before a send that gains from
    /// it, cleared by [`ConnTransport::xmit_complete`]).
    pub(super) corked: bool,
    /// The messages the drain in progress has sent whole on this socket.
    pub(super) drain_sent: u32,
}

impl Current {
    fn new(sock: Attached, link: Arc<Link>) -> Self {
        Self {
            sock,
            link,
            tx_hdr: [0; crate::proto::HEADER_LEN],
            corked: false,
            drain_sent: 0,
        }
    }
}

/// The transport's state of one connection.
#[pin_data]
pub(crate) struct TcpConn {
    key: ConnKey,
    /// The current socket and its link (process context).
    #[pin]
    pub(super) state: Mutex<Option<Current>>,
    /// An accepted socket waiting for the connection to go down, to be installed then.
    /// Accepted sockets waiting to be installed ([`Parked`]): slot 0 for one known to be for
    /// this path (a newer one for the same path replaces it), slots 1 and up, of path 0's,
    /// for sockets whose path is not known yet (each waits on its own).
    #[pin]
    parked: Mutex<[Option<Arc<Parked>>; PARKED_SLOTS]>,
    /// The group of the local port range the next client socket tries first
    /// ([`TcpConn::bind_path_port`]).
    port_group: AtomicU32,
}

/// Slots for parked sockets per path: one per path of a connection, and the one for the path's
/// own (see [`TcpConn::parked`]).
const PARKED_SLOTS: usize = crate::proto::MPATH_MAX as usize + 1;

/// How often a parked socket is tried ([`Parked`]): 10 ms after it came, then twice as long
/// each time, 1 s at most: about 5 s in all.
const PARKED_TRIES: u32 = 11;

/// An accepted socket that came while its connection was busy (going down after an error or a
/// reset, or still up while the peer had already given it up). TCP may have acknowledged
/// data on it already, which the peer will not send again: rather than reset it (C), it waits
/// for the connection to be down, read after everything the old socket held, and is installed
/// then; it is reset only if that takes more than 5 s, or the connection is destroyed.
#[pin_data]
pub(super) struct Parked {
    /// Path 0 of the connection.
    conn: Arc<Conn>,
    /// The path whose `parked` slot holds it: the one the socket is for, when that is known,
    /// else path 0.
    home: Arc<Conn>,
    /// Its slot there.
    slot: usize,
    #[pin]
    sock: Mutex<Option<TcpSocket>>,
    tries: AtomicU32,
    #[pin]
    work: DelayedWork<Parked>,
}

impl_delayed_work_item!(Parked, work, Parked::retry);

impl Parked {
    fn retry(this: Arc<Self>, ctx: &ProcessCtx) {
        let Some(tc) = this.home.tstate::<TcpConn>() else {
            return;
        };
        let sock = this.sock.lock().take();
        let Some(sock) = sock else { return };
        let unslot = || {
            let mut p = tc.parked.lock();
            match p.get_mut(this.slot) {
                Some(e) if e.as_ref().is_some_and(|p| Arc::ptr_eq(p, &this)) => e.take(),
                _ => None,
            }
        };
        if this.conn.is_destroyed() || this.home.is_destroyed() {
            // Out of its slot too: the slot holds it and it holds the connection.
            drop(unslot());
            sock.reset(ctx);
            return;
        }
        match place(&this.conn, sock, ctx) {
            None => drop(unslot()),
            Some(sock) => {
                let current = tc
                    .parked
                    .lock()
                    .get(this.slot)
                    .and_then(Option::as_ref)
                    .is_some_and(|p| Arc::ptr_eq(p, &this));
                if current && this.tries.load(Ordering::Relaxed) >= PARKED_TRIES {
                    drop(unslot());
                }
                if !current || this.tries.fetch_add(1, Ordering::Relaxed) >= PARKED_TRIES {
                    stats::inc(Stat::TcpConnectRaced);
                    sock.reset(ctx);
                    return;
                }
                *this.sock.lock() = Some(sock);
                let tries = this.tries.load(Ordering::Relaxed);
                DelayedWork::queue(&this.conn.shared.wq, this.clone(), park_delay(tries));
            }
        }
    }
}

/// Installs an accepted socket on a path of the connection whose path 0 is `base` if that
/// path can take it now (C: `rds_tcp_accept_one_path`): the path its port says ([`path_of`]),
/// else the first of the negotiated paths (path 0 before the handshake) that can; gives it
/// back when none can.
fn place(base: &Arc<Conn>, mut sock: TcpSocket, ctx: &ProcessCtx) -> Option<TcpSocket> {
    let n = base.npaths().max(1);
    let mut provisional = None;
    let paths = match path_of(base, &sock) {
        Some(i) => {
            unplace(base, ctx);
            u32::from(i)..u32::from(i) + 1
        }
        None => {
            // Before the handshake path 0 takes it; if path 0 cannot, the port's path (a peer
            // that numbers its ports by path connected its other paths before this end
            // learnt the count; for one that does not, it is as good as the first free one).
            if base.npaths() == 0 {
                let i = u32::from(sock.names().fport) % crate::proto::MPATH_MAX;
                provisional = (i != 0).then_some(i);
            }
            0..n
        }
    };
    for i in Iterator::chain(paths, provisional) {
        let Ok(i) = u8::try_from(i) else { break };
        let Ok(c) = base.shared.conns.path(base, i, true, ctx) else {
            break;
        };
        let Some(tc) = c.tstate::<TcpConn>() else {
            break;
        };
        match tc.adopt(&c, sock, ctx) {
            Some(back) => sock = back,
            None => return None,
        }
    }
    Some(sock)
}

/// The path an accepted socket is for, when that is known: the only one of a connection of one
/// path, or the one its port says for a peer that numbers its ports by path (C after 6.12).
/// `None` before the handshake (path 0 takes it when it can; a path of the peer's that
/// connected before this end learnt the count waits), or for a peer with several paths that
/// does not say (the first free one takes it, as C 6.12 does).
fn path_of(base: &Conn, sock: &TcpSocket) -> Option<u8> {
    let fport = sock.names().fport;
    accepted_path(base.npaths(), base.peer_sport_idx(), fport).and_then(|i| u8::try_from(i).ok())
}

/// Drops the paths whose accepted socket came from a port of another path, once the handshake
/// said the peer numbers its ports by path (see [`path_of`]): accepted before that, they would
/// pair this end's sequence numbers with another path's of the peer's. The peer connects them
/// again, to the right path; what such a socket delivered is taken back from the path's
/// receive state when it is closed ([`Link::saved_rx`]).
pub(super) fn unplace(base: &Arc<Conn>, ctx: &ProcessCtx) {
    let (n, sport_idx) = (base.npaths(), base.peer_sport_idx());
    if n < 2 || !sport_idx {
        return;
    }
    for i in 0..n {
        let Ok(i) = u8::try_from(i) else { break };
        let Ok(c) = base.shared.conns.path(base, i, true, ctx) else {
            break;
        };
        let Some(tc) = c.tstate::<TcpConn>() else {
            break;
        };
        let wrong = tc.state.lock().as_ref().is_some_and(|cur| {
            let fport = cur.sock.names().fport;
            cur.link.role == Role::Accepted && misplaced(n, sport_idx, fport, u32::from(i))
        });
        if wrong {
            stats::inc(Stat::RsTcpPathMisplaced);
            c.drop_connection();
        }
    }
}

/// The pause before the try after `tries` tries of a parked socket.
fn park_delay(tries: u32) -> u64 {
    crate::bindings::sys::ms_to_jiffies(10u32.checked_shl(tries).unwrap_or(1000).min(1000))
}

impl TcpConn {
    pub(super) fn new(key: ConnKey) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                key,
                state <- new_mutex!(None, "TcpConn::state"),
                parked <- new_mutex!(Default::default(), "TcpConn::parked"),
                port_group: AtomicU32::new(crate::bindings::mm::random_u32()),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Binds a client socket to a source port that carries the connection's path in its low
    /// three bits ([`path_port`]; C after 6.12, which the handshake announces with
    /// `RDS_EXTHDR_SPORT_IDX`), trying the groups of the namespace's local port range in
    /// turn from the one after the last used; `EADDRINUSE` when none is free.
    fn bind_path_port(&self, sock: &TcpSocket, ctx: &ProcessCtx) -> Result {
        let (lo, hi) = btcp::local_port_range(self.key.net);
        let groups = path_port_groups(lo, hi);
        let path = u32::from(self.key.path);
        for _ in 0..groups {
            let g = self.port_group.fetch_add(1, Ordering::Relaxed) % groups;
            let Some(port) = path_port(lo, hi, g, path) else {
                break;
            };
            match sock.bind(&self.key.laddr.0, port, 0, ctx) {
                Ok(()) => return Ok(()),
                Err(e) if e == crate::bindings::net::eaddrinuse() => continue,
                Err(e) => return Err(e),
            }
        }
        // A port of another path would put the connection on that path at the peer: the
        // connect fails instead, and the core's backoff tries again.
        stats::inc(Stat::RsTcpPortAny);
        Err(crate::bindings::net::eaddrinuse())
    }

    /// Whether this end is TCP's client of the connection.
    fn is_client(&self) -> bool {
        tcp_connects(&self.key.laddr, &self.key.faddr)
    }

    /// Installs `cur` as the current socket, replacing (and closing) the one before. If the
    /// connection was destroyed meanwhile, the new one is closed too (the connection and the
    /// link hold each other; nothing else would). Returns whether it was installed.
    fn install(&self, conn: &Arc<Conn>, cur: Current, ctx: &ProcessCtx) -> bool {
        let old = self.state.lock().replace(cur);
        if let Some(o) = old {
            o.close(ctx);
        }
        if conn.is_destroyed() {
            let mine = self.state.lock().take();
            if let Some(m) = mine {
                m.close(ctx);
            }
            return false;
        }
        true
    }

    /// Takes an accepted socket for the connection whose path 0 is `conn` (C: the second half
    /// of `rds_tcp_accept_one`): installed on its path if that can take it ([`place`]).
    /// Otherwise it is parked until it can ([`Parked`]); when the path it is for is known and
    /// up, that path is dropped first (the peer connected it again, so it has given the old
    /// socket up).
    pub(super) fn accept(&self, conn: &Arc<Conn>, sock: TcpSocket, ctx: &ProcessCtx) {
        let Some(sock) = place(conn, sock, ctx) else {
            return;
        };
        let target = path_of(conn, &sock);
        let home = match target.map(|i| conn.shared.conns.path(conn, i, true, ctx)) {
            Some(Ok(p)) => p,
            Some(Err(_)) => {
                stats::inc(Stat::TcpConnectRaced);
                sock.reset(ctx);
                return;
            }
            None => conn.clone(),
        };
        if target.is_some() && home.state() == crate::proto::ConnState::Up {
            home.drop_connection();
        }
        let Some(htc) = home.tstate::<TcpConn>() else {
            sock.reset(ctx);
            return;
        };
        // A socket for a known path takes that path's own slot (replacing an older one for it);
        // one for a path not known yet takes a free slot of path 0's.
        let slot = if target.is_some() {
            Some(0)
        } else {
            htc.parked
                .lock()
                .iter()
                .skip(1)
                .position(Option::is_none)
                .map(|i| i + 1)
        };
        let Some(slot) = slot else {
            stats::inc(Stat::TcpConnectRaced);
            sock.reset(ctx);
            return;
        };
        let home_ref = home.clone();
        let parked = Arc::pin_init(
            pin_init!(Parked {
                conn: conn.clone(),
                home: home_ref,
                slot,
                sock <- new_mutex!(Some(sock), "Parked::sock"),
                tries: AtomicU32::new(0),
                work <- DelayedWork::new(),
            }),
            GFP_KERNEL,
        );
        let Ok(parked) = parked else {
            // No memory to wait: the socket is reset (the peer retries).
            stats::inc(Stat::TcpConnectRaced);
            return;
        };
        let old = {
            let mut p = htc.parked.lock();
            match p.get_mut(slot) {
                Some(e) if slot == 0 || e.is_none() => Ok(e.replace(parked.clone())),
                _ => Err(()),
            }
        };
        let old = match old {
            Ok(old) => old,
            Err(()) => {
                // Its free slot was taken meanwhile (accepts run one at a time: never).
                stats::inc(Stat::TcpConnectRaced);
                if let Some(s) = parked.sock.lock().take() {
                    s.reset(ctx);
                }
                return;
            }
        };
        if let Some(o) = old {
            // The peer gave up the earlier one: its connection attempt is the new one. Its
            // retry is stopped first (it may hold the socket while it runs).
            DelayedWork::cancel(&o, ctx);
            let s = o.sock.lock().take();
            if let Some(s) = s {
                stats::inc(Stat::TcpListenClosedStale);
                s.reset(ctx);
            }
        }
        DelayedWork::queue(&conn.shared.wq, parked, park_delay(0));
    }

    /// Installs an accepted socket if the connection can take it now (down, or connecting
    /// with only a nudge out); gives it back otherwise.
    fn adopt(&self, conn: &Arc<Conn>, sock: TcpSocket, ctx: &ProcessCtx) -> Option<TcpSocket> {
        let st = self.state.lock();
        let nudging = st.as_ref().is_some_and(|c| c.link.role == Role::Nudge);
        let claimed =
            conn.try_accept() || (nudging && conn.state() == crate::proto::ConnState::Connecting);
        if !claimed {
            return Some(sock);
        }
        // A nudge still there goes when the accepted socket takes its place (`install`).
        drop(st);
        // Before the handshake the socket may be another path's of the peer's: what this path
        // expects next is kept, for `close` to give back if it turns out so. Nothing arrives
        // on the path before the socket is attached (it was down, its last socket read out).
        let saved_rx = (conn.npaths() == 0).then(|| conn.save_rx());
        let link = match Link::new(conn.clone(), Role::Accepted, saved_rx) {
            Ok(l) => l,
            Err(_) => {
                sock.reset(ctx);
                conn.drop_connection();
                return None;
            }
        };
        let handler: Arc<dyn TcpEvents> = link.clone();
        let a = match sock.attach(handler, ctx) {
            Ok(a) => a,
            Err(_) => {
                conn.drop_connection();
                return None;
            }
        };
        if !self.install(conn, Current::new(a, link.clone()), ctx) {
            return None;
        }
        conn.connect_complete();
        // What arrived before the callbacks were ours is read now.
        self.read_for(&link, ctx);
        // So is a close that came before them (the peer's FIN or reset): no state change
        // will tell it any more.
        let gone = self.state.lock().as_ref().is_some_and(|c| {
            Arc::ptr_eq(&c.link, &link) && c.sock.state() != TcpState::Established
        });
        if gone {
            conn.drop_connection();
        }
        None
    }

    /// Reads in process context what a callback could not take (the link's receive work).
    pub(super) fn read_for(&self, link: &Arc<Link>, ctx: &ProcessCtx) {
        let st = self.state.lock();
        let Some(cur) = st.as_ref() else { return };
        if !Arc::ptr_eq(&cur.link, link) {
            return;
        }
        link.read_locked(&cur.sock, ctx);
    }
}

impl Current {
    /// Retires the link and closes the socket. What the socket still holds is read first and
    /// the socket is shut down under the same hold of its lock: those bytes were acknowledged
    /// to the peer by TCP, which will not send them again, and what comes after the shutdown
    /// is refused rather than acknowledged.
    fn close(self, ctx: &ProcessCtx) {
        let link = self.link;
        // The peer's port, for a socket whose path may turn out to be another (see below).
        let fport = link.saved_rx.map(|_| self.sock.names().fport);
        link.retired.store(true, Ordering::Release);
        let sock = self.sock.detach(ctx);
        if link.role == Role::Nudge {
            sock.read_and_shut(None, ctx);
        } else {
            // The memory a header waits for, where the allocation may wait.
            let _ = link.fill_need(ctx);
            let mut again = false;
            sock.read_and_shut(
                Some(&mut |skb| link.take(&mut link.rx.lock(), skb, GFP_ATOMIC, &mut again)),
                ctx,
            );
            if again {
                // Out of memory for what was read last: the rest is lost with the socket.
                stats::inc(Stat::RsTcpRxNomem);
            }
        }
        // No linger: everything TCP acknowledged was read and the rest was refused, so
        // nothing is lost by a reset, and no orphaned socket keeps timers that would outlive
        // the namespace (C instead takes a namespace reference per socket, which keeps a
        // namespace with RDS/TCP connections from ever going).
        sock.reset(ctx);
        link.rx.lock().reset();
        // Everything the socket delivered is in: if it was taken before the handshake and the
        // handshake says it was another path's (`unplace`), the path's sequence numbers went
        // by that path's, and its own retransmissions would be dropped as old.
        let c = &link.conn;
        if let (Some(saved), Some(fport)) = (link.saved_rx, fport) {
            let (n, idx) = (c.npaths(), c.peer_sport_idx());
            if misplaced(n, idx, fport, u32::from(c.key.path)) {
                stats::inc(Stat::RsTcpRxSeqRestored);
                let reached = c.save_rx();
                c.restore_rx(saved);
                // The path it really was takes in what it delivered: TCP may not have
                // acknowledged the last of it when it was reset, and the peer then sends that
                // again on the real path, marked retransmitted. (Only when it delivered
                // something, and only from path 0, where a socket goes before the handshake.)
                let real = accepted_path(n, idx, fport).and_then(|j| u8::try_from(j).ok());
                let wanted = reached != saved && c.key.path == 0 && !c.is_destroyed();
                if let Some(j) = real.filter(|_| wanted) {
                    if let Ok(cj) = c.shared.conns.path(c, j, true, ctx) {
                        cj.absorb_rx(reached);
                    }
                }
            }
        }
    }
}

impl ConnTransport for TcpConn {
    fn connect(&self, conn: &Arc<Conn>, ctx: &ProcessCtx) -> Result {
        let role = if self.is_client() {
            Role::Client
        } else {
            Role::Nudge
        };
        let (laddr, faddr) = (&self.key.laddr, &self.key.faddr);
        let sock = TcpSocket::new(self.key.net, laddr.v4().is_none(), ctx)?;
        sock.tune(self.key.net, ctx);
        if role == Role::Client {
            self.bind_path_port(&sock, ctx)?;
        } else {
            sock.bind(&laddr.0, 0, 0, ctx)?;
        }
        let link = Link::new(conn.clone(), role, None)?;
        let handler: Arc<dyn TcpEvents> = link.clone();
        let a = sock.connect(&faddr.0, RDS_TCP_PORT, 0, handler, ctx)?;
        if !self.install(conn, Current::new(a, link), ctx) {
            return Err(crate::bindings::net::enotconn());
        }
        // Over a fast link the connection may have come up inside the connect, before the
        // socket was installed: a drain then found no socket. It goes again now.
        if conn.state() == crate::proto::ConnState::Up {
            conn.kick();
        }
        Ok(())
    }

    fn shutdown(&self, conn: &Arc<Conn>, ctx: &ProcessCtx) {
        let cur = self.state.lock().take();
        if let Some(c) = cur {
            c.close(ctx);
        }
        if conn.is_destroyed() {
            // Parked sockets go with the connection (their work then finds nothing).
            let all = core::mem::replace(&mut *self.parked.lock(), Default::default());
            for p in all.into_iter().flatten() {
                // Its retry stopped (a pending timer must not fire after the module is gone).
                DelayedWork::cancel(&p, ctx);
                let s = p.sock.lock().take();
                if let Some(s) = s {
                    s.reset(ctx);
                }
            }
        }
    }

    fn paths_known(&self, base: &Arc<Conn>, ctx: &ProcessCtx) {
        unplace(base, ctx);
    }

    fn stream_info(&self) -> Option<TcpSockInfo> {
        let st = self.state.lock();
        let cur = st.as_ref()?;
        if cur.link.role == Role::Nudge {
            return None;
        }
        let n = cur.sock.names();
        let (hdr_rem, data_rem) = cur.link.rx.lock().remaining();
        Some(TcpSockInfo {
            local_addr: Addr(n.laddr),
            local_port: n.lport,
            peer_addr: Addr(n.faddr),
            peer_port: n.fport,
            hdr_rem: hdr_rem as u64,
            data_rem: data_rem as u64,
            last_sent_nxt: cur.link.last_sent_nxt.load(Ordering::Relaxed),
            last_expected_una: cur.link.last_expected_una.load(Ordering::Relaxed),
            last_seen_una: cur.link.last_seen_una.load(Ordering::Relaxed),
            tos: 0,
        })
    }

    fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        ctx: &ProcessCtx,
    ) -> Result<(), XmitError> {
        super::send::xmit(self, conn, msg, progress, ctx)
    }

    fn xmit_complete(&self, _conn: &Arc<Conn>, ctx: &ProcessCtx) {
        super::send::uncork(self, ctx);
    }
}

/// One socket's incarnation of a connection: the handler of the socket's callbacks, the
/// receive side of its stream.
#[pin_data]
pub(crate) struct Link {
    pub(super) conn: Arc<Conn>,
    pub(super) role: Role,
    /// Set before the socket is detached: callbacks still running change nothing.
    pub(super) retired: AtomicBool,
    /// A send found the socket full: the next write space with room kicks the connection.
    pub(super) want_kick: AtomicBool,
    /// The socket reached `ESTABLISHED` (a nudge the peer took: it connects back).
    established: AtomicBool,
    /// Where the last message sent started on the stream (C: `t_last_sent_nxt`).
    pub(super) last_sent_nxt: AtomicU32,
    /// Where it ends (C: `t_last_expected_una`).
    pub(super) last_expected_una: AtomicU32,
    /// TCP's acknowledged sequence when the write space was last called (C:
    /// `t_last_seen_una`).
    pub(super) last_seen_una: AtomicU32,
    /// The receive side.
    #[pin]
    pub(super) rx: SpinLockBh<RxState>,
    /// For an accepted socket taken before the handshake: the path's receive state before it,
    /// given back when it is closed if it turns out to be another path's ([`unplace`]).
    saved_rx: Option<SavedRx>,
    #[pin]
    recv_work: Work<Link, 0>,
}

impl_work_item!(Link, 0, recv_work, Link::recv_worker);

impl Link {
    fn new(conn: Arc<Conn>, role: Role, saved_rx: Option<SavedRx>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                conn,
                role,
                retired: AtomicBool::new(false),
                want_kick: AtomicBool::new(false),
                established: AtomicBool::new(false),
                last_sent_nxt: AtomicU32::new(0),
                last_expected_una: AtomicU32::new(0),
                last_seen_una: AtomicU32::new(0),
                rx <- new_spinlock_bh!(RxState::new(), "Link::rx"),
                saved_rx,
                recv_work <- new_process_work!("Link::recv_work"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    pub(super) fn live(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }

    /// Leaves a read that stopped for memory to the receive work (process context).
    pub(super) fn read_later(self: &Arc<Self>) {
        if self.live() && !self.conn.is_destroyed() {
            Work::<Link, 0>::queue(&self.conn.shared.wq, self.clone());
        }
    }

    fn recv_worker(this: Arc<Self>, ctx: &ProcessCtx) {
        if let Some(tc) = this.conn.tstate::<TcpConn>() {
            tc.read_for(&this, ctx);
        }
    }
}

impl TcpEvents for Link {
    fn data_ready(self: ArcBorrow<'_, Self>, sock: &CbSock<'_>) {
        stats::inc(Stat::TcpDataReadyCalls);
        if !self.live() || self.role == Role::Nudge {
            return;
        }
        self.read_cb(sock);
    }

    fn write_space(self: ArcBorrow<'_, Self>, sock: &CbSock<'_>, room: bool) {
        stats::inc(Stat::TcpWriteSpaceCalls);
        if !self.live() || self.role == Role::Nudge {
            return;
        }
        // C: `rds_tcp_write_space`: what TCP's acknowledged sequence passed is settled.
        let una = sock.snd_una();
        self.last_seen_una.store(una, Ordering::Relaxed);
        self.conn
            .settle_sent(|m| m.tx_mark().is_some_and(|end| tcp_acked(end, una)));
        if room && self.want_kick.swap(false, Ordering::AcqRel) {
            self.conn.kick();
        }
    }

    fn state_change(self: ArcBorrow<'_, Self>, _sock: &CbSock<'_>, state: TcpState) {
        if !self.live() {
            return;
        }
        match (state, self.role) {
            (TcpState::Established, Role::Client) => {
                self.established.store(true, Ordering::Release);
                self.conn.connect_complete();
            }
            // The peer took the nudge: it resets it and connects back.
            (TcpState::Established, _) => self.established.store(true, Ordering::Release),
            (TcpState::CloseWait | TcpState::Close, Role::Nudge)
                if self.established.load(Ordering::Acquire) => {}
            // Refused, reset or closed: the core reconnects (the client) or nudges again.
            (TcpState::CloseWait | TcpState::Close, _) => self.conn.drop_connection(),
            _ => {}
        }
    }
}
