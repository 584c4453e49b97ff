// SPDX-License-Identifier: GPL-2.0

//! Sending: `sendmsg`, send-buffer accounting, completion and cancellation.
//!
//! C counterpart: `net/rds/send.c` (`rds_sendmsg`, `rds_send_queue_rm`,
//! `rds_send_remove_from_sock`, `rds_send_drop_to`, `rds_send_pong`).
//!
//! `sendmsg` checks its arguments in C's order (flags, destination, binding, control
//! messages, sizes), copies the payload into the pages of a [`Message`] (the caller owns its
//! buffer again when `sendmsg` returns), waits out congestion at the destination port (at most
//! the send timeout), only then pins the memory of an RDMA operation, charges the socket's
//! send buffer (the payload and a per-message overhead), queues the message on the connection
//! and drains the queue. Each message counts against its sender's send buffer until
//! [`complete`] settles it: acknowledged by the peer, cancelled, or dropped with its
//! connection; its operation completes earlier, when the transport is done with it
//! ([`op_complete`]).

use crate::bindings::net::{
    emsgsize, enobufs, eopnotsupp, erestartsys, errno, etimedout, user_writable, MsgHdr, Sock,
    SockFlag, SockRef, WaitOutcome, WaitQueue,
};
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use crate::conn::{Conn, ConnKey};
use crate::message::{Message, MessageParts, MsgHead, Payload, ZcData};
use crate::proto::{
    check_send_dest, monitor_mask, mpath_key, mpath_known, parse_send_dest, rdma_bytes,
    rdma_sg_too_big, scan_send_cmsgs_with, sndbuf_ack_required, sndbuf_admits, Addr, SockAddr,
    Stat, PROBE_PORT, RDS_RDMA_CANCELED, RDS_RDMA_DROPPED, RDS_RDMA_SUCCESS,
};
use crate::rdma::{read_local_vecs, Issue, LocalVecs, Notifier, RdmaOp, SendRdma, Tracker};
use crate::socket::{addr_error, Rds, RdsSocket, SockData, ZC_MAX};
use crate::stats;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    list::{List, ListArc},
    prelude::*,
    rbtree::RBTreeNodeReservation,
    sync::{Arc, UniqueArc},
    uaccess::UserSlice,
};

/// The largest payload (data or RDMA) of one message (C: `RDS_MAX_MSG_SIZE`).
pub(crate) const MAX_MSG_SIZE: usize = 1 << 20;

const MSG_DONTWAIT: i32 = raw::MSG_DONTWAIT as i32;
const MSG_CMSG_COMPAT: i32 = raw::MSG_CMSG_COMPAT as i32;
const MSG_ZEROCOPY: i32 = raw::MSG_ZEROCOPY as i32;

/// `sendmsg(2)` on an RDS socket.
pub(crate) fn sendmsg(
    sock: &Sock<Rds>,
    msg: &mut MsgHdr<'_>,
    len: usize,
    ctx: &ProcessCtx,
) -> Result<usize> {
    let s = sock.state();
    let flags = msg.flags();
    if flags & !(MSG_DONTWAIT | MSG_CMSG_COMPAT | MSG_ZEROCOPY) != 0 {
        return Err(eopnotsupp());
    }
    let nonblock = flags & MSG_DONTWAIT != 0;
    let named = match msg.name() {
        Some(name) => Some(parse_send_dest(name).map_err(addr_error)?),
        None => None,
    };
    let zcopy = flags & MSG_ZEROCOPY != 0 && sock.flag(SockFlag::ZeroCopy);
    let route = s.route(named, zcopy)?;

    let control = msg.control();
    let rdma = rdma_bytes(control).map_err(|e| errno(e.errno()))?;
    let rdma = usize::try_from(rdma).unwrap_or(usize::MAX);
    if len.max(rdma) > MAX_MSG_SIZE {
        return Err(emsgsize());
    }
    let sndbuf = sock.sndbuf() / 2;
    if len > sndbuf as usize {
        return Err(emsgsize());
    }
    if zcopy && !route.zerocopy {
        return Err(eopnotsupp());
    }
    // C's `rds_rm_size`: the walk that also reads and checks each RDMA_ARGS's local iovecs.
    // `None` until one has some: a plain send then holds no vector (dropping even an empty
    // `KVec` calls the allocator).
    let mut vecs: Option<LocalVecs> = None;
    let mut pages = 0u64;
    let cmsgs = scan_send_cmsgs_with(control, flags & MSG_ZEROCOPY != 0, |data| {
        let (local, n) = read_local_vecs(data)?;
        vecs.get_or_insert_with(KVec::new).push(local, GFP_KERNEL)?;
        pages = pages.saturating_add(n);
        Ok::<(), Error>(())
    })?;
    // C's `rds_message_alloc`: scatterlists for more pages than kmalloc can give fail the call
    // before anything is pinned.
    if rdma_sg_too_big(pages) {
        return Err(ENOMEM);
    }

    let head = MsgHead {
        sport: route.bound.port,
        dport: route.dest.port,
        saddr: route.bound.addr,
        daddr: route.dest.addr,
        tos: route.tos,
        owner_id: sock.id(),
    };
    // C: a cookie is at least a `u32`, and goes with a zero-copy send of some payload only
    // (`rds_cmsg_zcopy`).
    let cookie = cmsgs
        .zcopy_cookie
        .transpose()
        .map_err(|e| errno(e.errno()))?;
    if cookie.is_some() && (!zcopy || len == 0) {
        return Err(EINVAL);
    }
    let mut m = match cookie {
        Some(cookie) => zcopy_message(sock, head, msg, len, cookie)?,
        None => {
            let m = Message::from_user(&s.pool, head, msg, len, route.pages)?;
            stats::add(Stat::CopyFromUser, len as u64);
            m
        }
    };
    let mut conn = s.conn_for(sock, &route, nonblock, ctx)?;
    // Connections are not keyed by transport: a TCP socket's destination may already be
    // served by another transport's connection, which cannot send the caller's pages.
    if m.data.is_zcopy() && !conn.transport.zerocopy() && !conn.transport.loops_back() {
        return Err(eopnotsupp());
    }
    // Congestion first: nothing is pinned or registered while a sender waits (bounded by
    // the send timeout).
    wait_uncongested(sock, &conn, route.dest.port, nonblock, ctx)?;

    // The RDMA control messages: pinning, registrations (C: `rds_cmsg_send`).
    let has_rdma = cmsgs.rdma_args + cmsgs.atomics + cmsgs.rdma_dest + cmsgs.rdma_map > 0
        || cmsgs.zcopy_cookie.is_some()
        || cmsgs.rdma_id > 0;
    if !has_rdma && sndbuf_admits(s.snd_bytes.load(Ordering::Relaxed), sndbuf) {
        // A plain message, room in the send buffer: a lossless connection with nothing ahead
        // of it takes it now, delivered before this returns, so it is never charged.
        match conn.send_now(m, ctx) {
            Ok(()) => {
                stats::inc(Stat::SendQueued);
                stats::inc(Stat::SendDropAcked);
                return Ok(len);
            }
            Err(back) => m = back,
        }
    }
    let mut rdma = if has_rdma {
        s.prepare_rdma(sock, control, vecs.unwrap_or_else(KVec::new), ctx)?
    } else {
        SendRdma::default()
    };
    if let Err(e) = make_message(sock, &conn, &mut m, &mut rdma, ctx) {
        s.undo_rdma(&mut rdma, ctx);
        return Err(e);
    }
    let mut m: ListArc<Message> = ListArc::from(m);
    if let Err(e) = admit_message(sock, &route, &m, &rdma, nonblock, sndbuf, ctx) {
        // Nothing was charged; the registration of an RDMA_MAP is undone.
        s.undo_rdma(&mut rdma, ctx);
        return Err(e);
    }
    // The registration of an RDMA_MAP now belongs to the message's receiver.
    rdma.mapped = None;
    // A zero-copy send reports its completion from now on, whatever becomes of it (C: the
    // message has its socket).
    m.data.arm_zcopy();
    // A connection reaped (idle) since this send found it takes no message: the next one is
    // made; one destroyed with its namespace is not replaced.
    for _ in 0..3 {
        match conn.enqueue(m) {
            Ok(()) => {
                stats::inc(Stat::SendQueued);
                conn.xmit(ctx);
                return Ok(len);
            }
            Err(back) => {
                m = back;
                match s.conn_for(sock, &route, nonblock, ctx) {
                    Ok(c) => conn = c,
                    Err(_) => break,
                }
            }
        }
    }
    complete(&m, RDS_RDMA_DROPPED);
    Ok(len)
}

/// Completes the message of a `sendmsg` that goes through its connection's queue: its
/// operation and cookie, and its sender, against whose send buffer it will count.
fn make_message(
    sock: &Sock<Rds>,
    conn: &Arc<Conn>,
    m: &mut Pin<UniqueArc<Message>>,
    rdma: &mut SendRdma,
    ctx: &ProcessCtx,
) -> Result {
    if rdma
        .op
        .as_deref()
        .is_some_and(|op| !conn.transport.runs_op(conn, op, ctx))
    {
        return Err(eopnotsupp());
    }
    // The id goes to the caller once the op is accepted; an address it cannot be written to
    // fails the call before an id is taken.
    if rdma.op.is_some() && rdma.id_addr != 0 && !user_writable(rdma.id_addr, 8) {
        return Err(EFAULT);
    }
    m.as_mut().set_rdma(rdma.op.take(), rdma.cookie);
    m.set_owner(sock.to_ref(), rdma.notifier.take());
    Ok(())
}

/// Charges the message to the send buffer (waiting for room on a blocking socket) and gives
/// its operation an id (C: `rds_send_queue_rm`).
fn admit_message(
    sock: &Sock<Rds>,
    route: &Route,
    m: &Message,
    rdma: &SendRdma,
    nonblock: bool,
    sndbuf: u32,
    ctx: &ProcessCtx,
) -> Result {
    let s = sock.state();
    let dest = (route.dest.addr, route.dest.port);
    let charge = u64::from(m.charge);
    let op: Option<&RdmaOp> = m.op.as_deref();
    let ack_required = loop {
        if op.is_some() {
            s.ensure_tracker(dest)?;
        }
        let mut outcome = Admit::Full;
        let mut admit = || {
            outcome = s.admit(charge, sndbuf, op, dest);
            outcome != Admit::Full
        };
        if !admit() {
            stats::inc(Stat::SendQueueFull);
            if nonblock {
                return Err(EAGAIN);
            }
            match sock.wait(sock.sndtimeo(false), &mut admit, ctx) {
                WaitOutcome::Ready(_) => {}
                WaitOutcome::TimedOut => return Err(etimedout()),
                WaitOutcome::Interrupted => return Err(erestartsys()),
            }
        }
        match outcome {
            Admit::Admitted(ack) => break ack,
            // The destination's tracker was forgotten meanwhile (it had nothing outstanding):
            // make one again.
            Admit::NoTracker | Admit::Full => continue,
        }
    };
    if let Some(op) = op {
        if rdma.id_addr != 0 {
            let written = usize::try_from(rdma.id_addr)
                .map_err(|_| EFAULT)
                .and_then(|a| UserSlice::new(a, 8).writer().write(&op.id()));
            if let Err(e) = written {
                // The address was writable a moment ago (checked above) but no longer is: the
                // operation never happens; its id completes at once (so no barrier waits for
                // it), with no notification.
                settle(m, RDS_RDMA_CANCELED, false);
                return Err(e);
            }
        }
    }
    if ack_required {
        m.set_ack_required();
    }
    Ok(())
}

/// What [`RdsSocket::admit`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admit {
    /// Charged (and the op numbered); whether the message asks for an ack.
    Admitted(bool),
    /// The send buffer, or the destination's op window, is full.
    Full,
    /// The op's destination has no tracker: make one and try again.
    NoTracker,
}

/// Where a send goes: the socket's binding, the destination and the scope, the transport.
pub(crate) struct Route {
    /// The socket's bound address and port.
    pub(crate) bound: SockAddr,
    /// The destination (address, port, scope id).
    pub(crate) dest: SockAddr,
    /// The type of service.
    pub(crate) tos: u8,
    /// The socket's transport sends `MSG_ZEROCOPY` messages (asked only for those).
    zerocopy: bool,
    /// The socket's transport takes a payload's pages by reference
    /// ([`Transport::payload_in_pages`](crate::transport::Transport::payload_in_pages)).
    pages: bool,
    /// The socket's cached connection (of its last send).
    cached: Option<Arc<Conn>>,
    /// The destination the socket stays on path 0 for
    /// ([`crate::socket::SockInner::mpath_fallback`]).
    mpath_fallback: Option<(Addr, u8)>,
}

impl RdsSocket {
    /// Works out where a send goes (C: the address part of `rds_sendmsg`): `named` is the
    /// parsed `msg_name`, if the call had one; `zcopy`, whether it asks for zero copy.
    fn route(&self, named: Option<SockAddr>, zcopy: bool) -> Result<Route> {
        let inner = self.inner.lock();
        let dest = match named {
            Some(d) => d,
            None => inner.conn.map_or(SockAddr::default(), |c| SockAddr {
                scope_id: inner.scope_id,
                ..c
            }),
        };
        let (Some(key), Some(transport)) = (inner.bound, &inner.transport) else {
            return Err(crate::bindings::net::enotconn());
        };
        let bound = key.addr;
        if dest.addr.is_any() {
            return Err(crate::bindings::net::enotconn());
        }
        let scope_id = if named.is_some() {
            check_send_dest(&dest, &bound).map_err(addr_error)?
        } else {
            dest.scope_id
        };
        Ok(Route {
            bound,
            dest: SockAddr { scope_id, ..dest },
            tos: inner.tos,
            zerocopy: zcopy && transport.zerocopy(),
            pages: transport.payload_in_pages(),
            cached: inner.conn_cache.clone(),
            mpath_fallback: inner.mpath_fallback,
        })
    }

    /// The connection for a route: the socket's cached one if it matches, else one from the
    /// table (created and connected if needed), which is then cached (C: `rs_conn`). Over a
    /// transport with multipath, the path the socket's port hashes to (C:
    /// `rds_send_mprds_hash`): before the path count is known, a send that would take a path
    /// above 0 sends the probe ping and, unless `nonblock`, waits for the handshake (at most
    /// the send timeout; then, or when interrupted, it takes path 0, as in C, and stays on it
    /// for that destination: its later messages must not overtake those on another path).
    fn conn_for(
        &self,
        sock: &Sock<Rds>,
        route: &Route,
        nonblock: bool,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Conn>> {
        if let Some(c) = &route.cached {
            if c.key.faddr == route.dest.addr
                && c.key.tos == route.tos
                && !c.is_destroyed()
                && (!c.mp()
                    || known_path(route, c.npaths()) == Some(c.key.path)
                    || (c.key.path == 0 && route.mpath_fallback == Some((c.key.faddr, c.key.tos))))
            {
                c.connect_if_down(ctx);
                return Ok(c.clone());
            }
        }
        self.conn_lookup(sock, route, nonblock, ctx)
    }

    /// [`RdsSocket::conn_for`] when the socket's cached connection does not serve the route
    /// (out of line: the cached case stays short).
    #[inline(never)]
    fn conn_lookup(
        &self,
        sock: &Sock<Rds>,
        route: &Route,
        nonblock: bool,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Conn>> {
        let key = ConnKey {
            net: sock.net(),
            laddr: route.bound.addr,
            faddr: route.dest.addr,
            tos: route.tos,
            path: 0,
        };
        // The socket's transport (it has one: `route` found it bound).
        let transport = self
            .inner
            .lock()
            .transport
            .clone()
            .ok_or_else(crate::bindings::net::enotconn)?;
        let mut conn = self.shared.conns.get(&self.shared, key, &transport, ctx)?;
        let dest = (key.faddr, key.tos);
        let mut fallback = None;
        if conn.mp() && route.mpath_fallback != Some(dest) {
            match pick_path(sock, &conn, route, nonblock, ctx) {
                Some(0) => {}
                Some(path) => {
                    conn = self.shared.conns.path(&conn, path, false, ctx)?;
                    conn.connect_if_down(ctx);
                }
                None => fallback = Some(dest),
            }
        }
        let old = {
            let mut inner = self.inner.lock();
            if fallback.is_some() {
                inner.mpath_fallback = fallback;
            }
            inner.conn_cache.replace(conn.clone())
        };
        drop(old);
        Ok(conn)
    }

    /// Charges `len` bytes to the send buffer if it has room (C: `rds_send_queue_rm`: the
    /// bytes already queued must be below `sndbuf`, so the last message may overshoot), and
    /// gives the message's operation the next id for `dest`, if the id window has room.
    /// Returns `None` when it cannot, else whether the send buffer is half full (the message
    /// then asks for an ack, as in C).
    fn admit(&self, len: u64, sndbuf: u32, op: Option<&RdmaOp>, dest: (Addr, u16)) -> Admit {
        let mut d = self.data.lock();
        let snd_bytes = self.snd_bytes.load(Ordering::Relaxed);
        if !sndbuf_admits(snd_bytes, sndbuf) {
            return Admit::Full;
        }
        if let Some(op) = op {
            match d.trackers.issue(&dest) {
                Issue::Issued(id) => op.set_id(id),
                Issue::Full => return Admit::Full,
                Issue::Missing => return Admit::NoTracker,
            }
        }
        let snd_bytes = snd_bytes.saturating_add(len);
        self.snd_bytes.store(snd_bytes, Ordering::Relaxed);
        Admit::Admitted(sndbuf_ack_required(snd_bytes, sndbuf))
    }

    /// Makes sure the socket has an op-id tracker for `dest`.
    fn ensure_tracker(&self, dest: (Addr, u16)) -> Result {
        if self.data.lock().trackers.contains(&dest) {
            return Ok(());
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let tracker = KBox::new(Tracker::new(), GFP_KERNEL)?;
        let spare = {
            let mut d = self.data.lock();
            if d.trackers.contains(&dest) {
                Some((node, tracker))
            } else {
                d.trackers.insert(dest, node, tracker);
                None
            }
        };
        drop(spare);
        Ok(())
    }
}

/// The message of a zero-copy send of `len` bytes (C: `rds_message_zcopy_from_user`): the
/// caller's pages by reference, charged to the socket creator's locked memory (`ENOMEM`
/// above its limit, as C), with a place in the socket's completions (`ENOBUFS` when
/// [`ZC_MAX`] are taken: completions to read first).
fn zcopy_message(
    sock: &Sock<Rds>,
    head: MsgHead,
    msg: &mut MsgHdr<'_>,
    len: usize,
    cookie: u32,
) -> Result<Pin<UniqueArc<Message>>> {
    let s = sock.state();
    if s.data.lock().zc_buf.is_empty() {
        let buf = KVec::from_elem(0u32, ZC_MAX, GFP_KERNEL_ACCOUNT)?;
        let mut d = s.data.lock();
        let spare = if d.zc_buf.is_empty() {
            core::mem::replace(&mut d.zc_buf, buf)
        } else {
            buf
        };
        drop(d);
        drop(spare);
    }
    {
        let mut d = s.data.lock();
        let cap = d.zc_buf.len();
        if !d.zc.reserve(cap) {
            stats::inc(Stat::RsZcopyFull);
            return Err(enobufs());
        }
    }
    // From here the place is the notification's: dropped unarmed, it gives it back.
    let done = ZcDone {
        sock: sock.to_ref(),
        cookie,
        armed: AtomicBool::new(false),
    };
    let pages = msg.take_user_pages(len)?;
    let charge = s.rdma.user.charge(pages.npages()).map_err(|_| ENOMEM)?;
    stats::add(Stat::RsZcopyBytes, len as u64);
    Message::from_user_pages(
        &s.pool,
        head,
        ZcData {
            pages,
            _charge: charge,
            done,
        },
    )
}

/// The notification of a zero-copy send (C: `rds_znotifier`): dropped once the kernel is done
/// with the sender's pages (after them, in any context), it adds the send's cookie to its
/// socket's completions for `recvmsg` to report (C: `rds_rm_zerocopy_callback`), once armed:
/// a send that failed before it was queued reports nothing (C: the message had no socket
/// yet) and gives its place back.
pub(crate) struct ZcDone {
    sock: SockRef<Rds>,
    cookie: u32,
    armed: AtomicBool,
}

impl ZcDone {
    /// The send was queued: its completion is reported.
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }
}

impl Drop for ZcDone {
    fn drop(&mut self) {
        let s = self.sock.state();
        let armed = *self.armed.get_mut();
        {
            let mut d = s.data.lock();
            let SockData { zc, zc_buf, .. } = &mut *d;
            if armed {
                zc.complete(zc_buf, self.cookie);
            } else {
                zc.unreserve();
            }
        }
        if armed {
            self.sock.wake();
        }
    }
}

/// The path a route's socket takes over a connection with `npaths` paths, if that is known
/// without a handshake ([`mpath_known`]).
fn known_path(route: &Route, npaths: u32) -> Option<u8> {
    mpath_known(mpath_key(route.bound.port, route.dest.port), npaths)
        .and_then(|p| u8::try_from(p).ok())
}

/// The path a route's socket sends on over the connection whose path 0 is `base` (see
/// [`RdsSocket::conn_for`]); `None` for path 0 as a fallback, the path count not being known.
fn pick_path(
    sock: &Sock<Rds>,
    base: &Arc<Conn>,
    route: &Route,
    nonblock: bool,
    ctx: &ProcessCtx,
) -> Option<u8> {
    if let Some(p) = known_path(route, base.npaths()) {
        return Some(p);
    }
    if base.claim_probe() && send_probe(base, ctx).is_err() {
        // A congested peer gets no probe now; the next send tries again.
        base.release_probe();
    }
    if nonblock {
        return None;
    }
    let ready = || base.npaths() != 0 || base.is_destroyed();
    let _ = WaitQueue::congestion().wait(sock.sndtimeo(false), ready, ctx);
    known_path(route, base.npaths())
}

/// Waits until `port` at the connection's destination is not congested (C: `rds_cong_wait`),
/// at most for the socket's send timeout (`ETIMEDOUT`; C waits without bound).
fn wait_uncongested(
    sock: &Sock<Rds>,
    conn: &Conn,
    port: u16,
    nonblock: bool,
    ctx: &ProcessCtx,
) -> Result {
    if !conn.fcong.test(port) {
        return Ok(());
    }
    let s = sock.state();
    if nonblock {
        if s.data.lock().cong_monitor {
            s.data.lock().cong_mask |= monitor_mask(port);
            // An update may have come in meanwhile.
            if !conn.fcong.test(port) {
                return Ok(());
            }
        }
        stats::inc(Stat::CongSendError);
        s.seen_congestion.store(true, Ordering::Relaxed);
        return Err(enobufs());
    }
    stats::inc(Stat::CongSendBlocked);
    let waitq = s.shared.cong.waitq();
    match waitq.wait(sock.sndtimeo(false), || !conn.fcong.test(port), ctx) {
        WaitOutcome::Ready(_) => Ok(()),
        WaitOutcome::TimedOut => {
            s.seen_congestion.store(true, Ordering::Relaxed);
            Err(etimedout())
        }
        WaitOutcome::Interrupted => {
            s.seen_congestion.store(true, Ordering::Relaxed);
            Err(erestartsys())
        }
    }
}

/// Whether a completion with `status` queues a notification for `op`: when the operation
/// asked for one (`RDS_RDMA_NOTIFY_ME`), or when it failed (but was not cancelled) and the
/// socket had `RDS_RECVERR` on, as in C.
fn notification_due(op: &RdmaOp, status: i32) -> bool {
    due(op.notify, op.recverr, status)
}

/// [`notification_due`] from the operation's two flags.
fn due(notify: bool, recverr: bool, status: i32) -> bool {
    notify || (recverr && status != RDS_RDMA_SUCCESS && status != RDS_RDMA_CANCELED)
}

/// Operation `id` to `dest` completed with `status`, under its sender's data lock (`d`): its id
/// completes (raising the high-water mark for the destination), and when a notification is
/// `due` the one in `notifier` is queued (taken from it; otherwise it stays there, for the
/// caller to drop outside the lock).
fn op_completed_locked(
    d: &mut SockData,
    dest: &(Addr, u16),
    id: u64,
    notifier: &mut Option<ListArc<Notifier>>,
    due: bool,
    status: i32,
) {
    d.trackers.complete(dest, id);
    if due {
        if let Some(n) = notifier.take() {
            n.status.store(status, Ordering::Relaxed);
            d.notify_queue.push_back(n);
        }
    }
}

/// An operation whose message the peer's ack settled before the transport reported the
/// operation itself complete. The peer acks the message behind an RDMA READ once it has sent
/// the READ's responses, but the READ's data may not be in the sender's memory yet: a soft
/// device (rxe) places READ responses and handles the ack's arrival in different tasks. So the
/// operation's id and notification wait for the transport's report ([`op_complete`]), and an
/// operation that goes unreported (its connection went down with it) completes with
/// `RDS_RDMA_DROPPED` when this is dropped. C notifies success at the ack
/// (`rds_send_remove_from_sock`), before the data may be there (Documentation/
/// differences-from-c.md).
pub(crate) struct WaitingOp {
    sock: SockRef<Rds>,
    notifier: Option<ListArc<Notifier>>,
    dest: (Addr, u16),
    id: u64,
    notify: bool,
    recverr: bool,
    done: bool,
}

impl WaitingOp {
    /// Completes the operation with `status`, once (any context; no lock held but the
    /// caller's leaves, which come before the sender's `data`).
    fn finish(&mut self, status: i32) {
        if core::mem::replace(&mut self.done, true) {
            return;
        }
        let s = self.sock.state();
        let unused = {
            let mut d = s.data.lock();
            let due = due(self.notify, self.recverr, status);
            op_completed_locked(&mut d, &self.dest, self.id, &mut self.notifier, due, status);
            self.notifier.take()
        };
        self.sock.wake();
        drop(unused);
    }
}

impl Drop for WaitingOp {
    fn drop(&mut self) {
        self.finish(RDS_RDMA_DROPPED);
    }
}

/// The transport is about to post `msg`'s operation and will report its completion
/// ([`op_complete`], any status). From here a peer's ack that settles the message before
/// that report leaves the operation's completion to it ([`WaitingOp`]).
pub(crate) fn op_posted(msg: &Message) {
    msg.with_owner(|o| o.op_posted = true);
}

/// The message's RDMA or atomic operation completed with `status` (any context; C:
/// `rds_rdma_send_complete`): its id completes (raising the sender's high-water mark for the
/// destination) and a notification is queued when due. Only the first completion of an
/// operation counts; the message stays charged to its sender until it is settled
/// ([`complete`]).
pub(crate) fn op_complete(msg: &Message, status: i32) {
    let Some(op) = msg.op.as_deref() else { return };
    let mut waiting = None;
    let woke = msg.with_owner(|o| {
        if o.op_done {
            return None;
        }
        o.op_done = true;
        if o.waiting.is_some() {
            // Settled by the peer's ack already: completed below, outside this lock.
            waiting = o.waiting.take();
            return None;
        }
        let sock = o.sock.as_ref()?;
        let s = sock.state();
        let mut d = s.data.lock();
        let due = notification_due(op, status);
        op_completed_locked(
            &mut d,
            &(msg.daddr, msg.dport),
            op.id(),
            &mut o.notifier,
            due,
            status,
        );
        Some(sock.clone())
    });
    if let Some(sock) = woke {
        sock.wake();
        // The reference to the sender is dropped here, outside every lock.
        drop(sock);
    }
    if let Some(mut w) = waiting {
        w.finish(status);
    }
}

/// Settles a message with its sender, with the `RDS_RDMA_*` status of its operation: the
/// message leaves the sender's send buffer, its operation completes if it has not yet
/// ([`op_complete`]), and the sender is woken (C: `rds_send_remove_from_sock`,
/// `__rds_send_complete`). Only the first call for a message does anything. Any context.
/// Returns whether the message's operation completed here, with `status`.
pub(crate) fn complete(msg: &Message, status: i32) -> bool {
    settle(msg, status, true)
}

/// [`complete`], with notifications only when `notify` (a send refused after its operation
/// was numbered is not a completion the caller needs to hear about).
fn settle(msg: &Message, status: i32, notify: bool) -> bool {
    // The sender and the notifier, taken once. An ack (success) that comes before the
    // transport reported the operation posted leaves the operation to that report.
    let (sock, notifier, op_done) = msg.with_owner(|o| {
        let sock = o.sock.take();
        let mut notifier = o.notifier.take();
        let mut op_done = o.op_done;
        if let (Some(s), Some(op)) = (sock.as_ref(), msg.op.as_deref()) {
            if status == RDS_RDMA_SUCCESS && !op_done && o.op_posted {
                o.waiting = Some(WaitingOp {
                    sock: s.clone(),
                    notifier: notifier.take(),
                    dest: (msg.daddr, msg.dport),
                    id: op.id(),
                    notify: op.notify,
                    recverr: op.recverr,
                    done: false,
                });
                // Not completed here.
                op_done = true;
            }
        }
        (sock, notifier, op_done)
    });
    let Some(sock) = sock else {
        drop(notifier);
        return false;
    };
    if status == RDS_RDMA_SUCCESS {
        stats::inc(Stat::SendDropAcked);
    }
    let unused = {
        let s = sock.state();
        let mut d = s.data.lock();
        let snd_bytes = s
            .snd_bytes
            .load(Ordering::Relaxed)
            .saturating_sub(u64::from(msg.charge));
        s.snd_bytes.store(snd_bytes, Ordering::Relaxed);
        if snd_bytes == 0 {
            stats::inc(Stat::SendQueueEmpty);
        }
        let mut notifier = notifier;
        if let Some(op) = msg.op.as_deref().filter(|_| !op_done) {
            let due = notify && notification_due(op, status);
            op_completed_locked(
                &mut d,
                &(msg.daddr, msg.dport),
                op.id(),
                &mut notifier,
                due,
                status,
            );
        }
        notifier
    };
    sock.wake();
    drop(unused);
    // The reference to the sender is dropped here, outside every lock.
    drop(sock);
    msg.op.is_some() && !op_done
}

/// Drops the socket's messages still on their connections (queued or unacknowledged), to
/// `dest` (address and port) or to anyone (C: `rds_send_drop_to`, for `RDS_CANCEL_SENT_TO`
/// and close).
pub(crate) fn drop_to(sock: &Sock<Rds>, bound: Addr, dest: Option<(Addr, u16)>) {
    let s = sock.state();
    let mut dropped: List<Message> = List::new();
    s.shared.conns.for_each(sock.net(), |conn| {
        if conn.key.laddr != bound {
            return;
        }
        if let Some((addr, _)) = dest {
            if conn.key.faddr != addr {
                return;
            }
        }
        conn.remove_queued(
            sock.id(),
            |m| dest.map_or(true, |(_, port)| m.dport == port),
            &mut dropped,
        );
    });
    while let Some(m) = dropped.pop_front() {
        complete(&m, RDS_RDMA_CANCELED);
    }
}

/// Answers a ping: a 0-byte message from port 0 back to the pinger (C: `rds_send_pong`).
/// `conn` is the pinged side's connection to the pinger. The pong of a probe ping (to
/// [`PROBE_PORT`]) carries the path count ([`crate::transport::Transport::mp_capable`]).
pub(crate) fn send_pong(conn: &Arc<Conn>, dport: u16) -> Result {
    send_control(conn, 0, dport)
}

/// Sends the probe ping of the multipath handshake on path 0 `base` (C: `rds_send_ping`):
/// from [`PROBE_PORT`] to port 0, with the path count; connects the path if it is down.
pub(crate) fn send_probe(base: &Arc<Conn>, ctx: &ProcessCtx) -> Result {
    base.connect_if_down(ctx);
    send_control(base, PROBE_PORT, 0)
}

/// Queues a 0-byte message of the core's from `sport` to `dport` (C: `rds_send_probe`).
fn send_control(conn: &Arc<Conn>, sport: u16, dport: u16) -> Result {
    // C: rds_cong_wait(..., nonblock, NULL): a congested pinger gets no pong.
    if conn.fcong.test(dport) {
        stats::inc(Stat::CongSendError);
        return Err(enobufs());
    }
    let m = Message::new(
        MessageParts {
            sport,
            dport,
            saddr: conn.key.laddr,
            daddr: conn.key.faddr,
            tos: conn.key.tos,
            data: Payload::empty(),
            flags: 0,
        },
        GFP_KERNEL,
    )?;
    if conn.enqueue(m).is_err() {
        // The connection was destroyed meanwhile: no one is left to answer.
        return Ok(());
    }
    stats::inc(Stat::SendQueued);
    stats::inc(Stat::SendPong);
    conn.kick();
    Ok(())
}
