// SPDX-License-Identifier: GPL-2.0

//! Receiving: delivery into a socket's receive queue, `recvmsg` and `poll`.
//!
//! C counterpart: `net/rds/recv.c` (`rds_recv_incoming`, `rds_recvmsg`,
//! `rds_clear_recv_queue`, `rds_recv_rcvbuf_delta`) and `rds_poll` in `net/rds/af_rds.c`.
//!
//! A transport hands each arriving frame to [`incoming`], which validates its header, settles
//! what its `h_ack` acknowledges, answers pings, finds the socket bound to the destination
//! and queues the message there, charging the socket's receive buffer (the payload and a
//! per-message overhead). A socket whose queue grows past its receive buffer marks its port in its
//! address's congestion map; it clears the mark once the queue has drained below half of it.

use crate::bindings::net::{erestartsys, etimedout, MsgHdr, PollCtx, Sock, SockFlag, WaitOutcome};
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use crate::bindings::sys::{self, poll};
use crate::cong::CongMap;
use crate::conn::Conn;
use crate::message::{IncomingHeader, Message, Payload, RxSlot};
use crate::proto::{
    cmsg_space, encode_sockaddr, is_hs_probe, monitor_mask, parse_frame, CongChange, FrameError,
    FrameKind, Header, RdmaNotify, SeqCheck, SockAddr, Stat, HEADER_LEN, PROBE_PORT,
    RDMA_NOTIFY_LEN, RDS_CMSG_CONG_UPDATE, RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_STATUS,
    RDS_CMSG_RXPATH_LATENCY, RDS_CMSG_ZCOPY_COMPLETION, SOL_RDS, SOL_SOCKET, SO_TIMESTAMP_NEW,
    SO_TIMESTAMP_OLD, ZCOOKIES_LEN,
};
use crate::send;
use crate::socket::{Rds, RdsSocket, SockData};
use crate::stats;
use core::sync::atomic::Ordering;
use kernel::{
    list::{List, ListArc},
    prelude::*,
    sync::Arc,
};

const MSG_PEEK: i32 = raw::MSG_PEEK as i32;
const MSG_TRUNC: i32 = raw::MSG_TRUNC as i32;
const MSG_OOB: i32 = raw::MSG_OOB as i32;
const MSG_ERRQUEUE: i32 = raw::MSG_ERRQUEUE as i32;
const MSG_DONTWAIT: i32 = raw::MSG_DONTWAIT as i32;

/// The context a frame is received in: process context (a transport that receives in a
/// system call or a work item, such as loopback delivering inside the sender's `sendmsg`) or
/// atomic context (softirq: completion handlers). In atomic context what needs process
/// context (answering a ping, telling congestion monitors) is left to work items.
#[derive(Clone, Copy)]
pub(crate) enum RxCtx<'a> {
    /// Process context: may sleep, no spinlock held.
    Process(&'a ProcessCtx),
    /// Softirq (or any atomic) context: the IB transport's receive completions, loopback's
    /// softirq test mode.
    Atomic,
}

/// A frame arrived on `conn` (C: `rds_recv_incoming`, and the header handling of the
/// transports' receive paths): `hdr` are the 48 header bytes as they came, `payload` what
/// came with them, `slot` the memory for the incoming message. The header is validated
/// ([`crate::proto::parse_frame`]) before anything else: a bad one is counted and reported
/// to the caller, which drops the frame (and a network transport its connection); nothing
/// of it is delivered. Then its `h_ack` settles what it acknowledges, and a data message is
/// delivered: a ping answered, anything else queued on the socket bound to its destination
/// (or dropped when there is none).
pub(crate) fn incoming(
    conn: &Arc<Conn>,
    hdr: &[u8; HEADER_LEN],
    payload: Payload,
    slot: RxSlot,
    rx: RxCtx<'_>,
) -> core::result::Result<(), FrameError> {
    let frame = match parse_frame(hdr, Some(payload.len() as u64)) {
        Ok(f) => f,
        Err(e) => {
            stats::inc(match e {
                FrameError::Checksum => Stat::RecvDropBadChecksum,
                _ => Stat::RsRecvDropBadHeader,
            });
            return Err(e);
        }
    };
    match frame.kind {
        FrameKind::AckOnly => {
            conn.ack_received(frame.hdr.ack);
            return Ok(());
        }
        FrameKind::CongMap => {
            conn.ack_received(frame.hdr.ack);
            let freed = conn.fcong.update_from(&payload);
            conn.shared
                .cong
                .updated(&conn.shared, &conn.netcong, freed, None, rx);
            return Ok(());
        }
        FrameKind::Data => {}
    }
    let h = frame.hdr;
    let (saddr, daddr) = conn.rx_addrs();
    // The frame's ack is settled with the sequence check, under one lock.
    if !seq_admits(conn.rx_data(h.ack, h.sequence, h.flags)) {
        return Ok(());
    }
    if ping_or_probe(conn, Some(&h), h.sport, h.dport, rx) {
        return Ok(());
    }
    let m = slot.fill(
        IncomingHeader {
            saddr,
            daddr,
            sport: h.sport,
            dport: h.dport,
            seq: h.sequence,
            tos: conn.key.tos,
            rdma_cookie: frame
                .rdma_dest
                .map_or(0, |(k, o)| crate::proto::make_cookie(k, o)),
        },
        payload,
    );
    queue_for(conn, m, frame.rdma_rkey, rx);
    Ok(())
}

/// Whether a message whose sequence number got `check` is delivered; a dropped one is
/// counted: an old retransmission as C does (`recv_drop_old_seq`), a replay within one
/// incarnation ([`crate::transport::Transport::refuses_replays`]) as `rs_recv_drop_replay`.
pub(crate) fn seq_admits(check: SeqCheck) -> bool {
    match check {
        SeqCheck::Accept => true,
        SeqCheck::OldRetransmission => {
            stats::inc(Stat::RecvDropOldSeq);
            false
        }
        SeqCheck::Replay => {
            stats::inc(Stat::RsRecvDropReplay);
            false
        }
    }
}

/// A message of a lossless transport arrived (loopback outside its fault modes,
/// [`crate::transport::ConnTransport::lossless`]): the sender's message itself, with no
/// header written or parsed, as nothing can be lost, reordered or corrupted on the way, and
/// no acknowledgement (the core settled it with its sender). Pings are answered; anything
/// else is queued on the socket bound to its destination (or dropped when there is none).
pub(crate) fn deliver(conn: &Arc<Conn>, m: ListArc<Message, 1>, rx: RxCtx<'_>) {
    if ping_or_probe(conn, None, m.sport, m.dport, rx) {
        return;
    }
    queue_for(conn, m, None, rx);
}

/// Answers a ping (`dport` 0, when pings are answered) or takes a multipath probe's pong;
/// returns whether the message was one of those. Over a transport with multipath, the probe
/// ping and its pong carry the peer's path count in `hdr` (C: `rds_recv_incoming`'s
/// handshake part).
fn ping_or_probe(
    conn: &Arc<Conn>,
    hdr: Option<&Header>,
    sport: u16,
    dport: u16,
    rx: RxCtx<'_>,
) -> bool {
    let handshake = match hdr {
        Some(h) if conn.mp() && is_hs_probe(sport, dport) => Some(h),
        _ => None,
    };
    if dport == 0 && sys::ping_enabled() {
        if sport == 0 {
            // A ping from port 0 is not answered.
            return true;
        }
        stats::inc(Stat::RecvPing);
        match rx {
            RxCtx::Process(ctx) => answer_ping(conn, sport, ctx),
            RxCtx::Atomic => conn.defer_pong(sport),
        }
        if let Some(h) = handshake {
            conn.handshake(h, rx);
        }
        return true;
    }
    if dport == PROBE_PORT && sport == 0 {
        // The pong of a probe (a transport without multipath has one path).
        if let Some(h) = handshake {
            conn.handshake(h, rx);
        }
        return true;
    }
    false
}

/// Queues `m` on the socket bound to its destination, if there is one (C: the second half of
/// `rds_recv_incoming`); `rdma_rkey` is the registration of the receiver's that the message's
/// RDMA operation used.
fn queue_for(conn: &Arc<Conn>, m: ListArc<Message, 1>, rdma_rkey: Option<u32>, rx: RxCtx<'_>) {
    let to = SockAddr {
        addr: m.daddr,
        port: m.dport,
        scope_id: 0,
    };
    // Under RCU: the socket stays alive until the section ends, and nothing here sleeps.
    let found = conn.shared.binds.with(conn.key.net, to, |sock| {
        // The RDMA operation this message completes used one of the receiver's registrations:
        // a use-once registration is done with (C: `rds_recv_incoming_exthdrs`).
        if let Some(rkey) = rdma_rkey {
            sock.state().unuse_mr(rkey);
        }
        sock.state().queue_incoming(sock, m)
    });
    let Some(news) = found else {
        stats::inc(Stat::RecvDropNoSock);
        return;
    };
    if let (Some(_), RxCtx::Process(ctx)) = (rdma_rkey, rx) {
        // The registration's pages are unpinned before the sender's call returns.
        crate::bindings::sync::flush_deferred(ctx);
    }
    if let Some(n) = news {
        conn.shared
            .cong
            .updated(&conn.shared, &conn.netcong, n.mask, Some(&n.map), rx);
    }
}

/// Answers a ping that arrived on `conn` from port `port` (C: `rds_send_pong`): the pong goes
/// back to the pinger: over the connection it came on (a network transport), or over the
/// pinged side's connection to the pinger (loopback, whose connection carries both
/// directions of one pair of addresses).
pub(crate) fn answer_ping(conn: &Arc<Conn>, port: u16, ctx: &ProcessCtx) {
    if !conn.transport.loops_back() {
        let _ = send::send_pong(conn, port);
        return;
    }
    let back = conn.shared.conns.get(
        &conn.shared,
        crate::conn::ConnKey {
            net: conn.key.net,
            laddr: conn.key.faddr,
            faddr: conn.key.laddr,
            tos: conn.key.tos,
            path: 0,
        },
        &conn.transport,
        ctx,
    );
    if let Ok(back) = back {
        // A congested pinger gets no pong, as in C.
        let _ = send::send_pong(&back, port);
    }
}

/// A change of a socket's congestion bit, to announce once the socket's lock is dropped.
pub(crate) struct CongNews {
    /// Monitor bits of the port, if it became uncongested (else 0).
    mask: u64,
    /// The socket's local map.
    map: Arc<CongMap>,
}

/// Applies a change of a socket's congestion state to its port's bit, under the socket's
/// `data` lock, so that the bit always follows the socket's accounting (C: the second half of
/// `rds_recv_rcvbuf_delta`, under `rs_recv_lock`). Returns what to announce with
/// [`RdsSocket::cong_updated`] once the lock is dropped, if the bit changed.
fn apply_cong(d: &SockData, change: CongChange) -> Option<CongNews> {
    let (map, port) = d.cong.as_ref()?;
    let mask = match change {
        CongChange::None => return None,
        CongChange::Congested => {
            map.set(*port);
            0
        }
        CongChange::Uncongested => {
            if !map.clear(*port) {
                return None;
            }
            monitor_mask(*port)
        }
    };
    Some(CongNews {
        mask,
        map: map.arc().clone(),
    })
}

impl RdsSocket {
    /// Queues a message on the receive queue, unless the socket is closing (C: the locked part
    /// of `rds_recv_incoming`), and wakes the socket's readers. Does not sleep (the caller
    /// found the socket under RCU); returns the change of the socket's congestion bit, for
    /// the caller to announce ([`crate::cong::CongTable::updated`]).
    fn queue_incoming(&self, sock: &Sock<Rds>, m: ListArc<Message, 1>) -> Option<CongNews> {
        let len = m.len;
        let charge = m.charge;
        let rcvbuf = sock.rcvbuf() / 2;
        if sock.flag(SockFlag::RcvTstamp) {
            m.rx_tstamp.store(sys::real_time_ns(), Ordering::Relaxed);
        }
        let change = {
            let mut d = self.data.lock();
            if d.dead {
                drop(d);
                drop(m);
                stats::inc(Stat::RecvDropDeadSock);
                return None;
            }
            if d.rx_traces != 0 {
                m.rx_end.store(sys::local_clock_ns(), Ordering::Relaxed);
            }
            stats::inc(Stat::RecvQueued);
            stats::add(Stat::RecvBytesAddedToSock, u64::from(len));
            let change = d.account.add(charge, rcvbuf);
            d.recv_queue.push_back(m);
            apply_cong(&d, change)
        };
        sock.wake();
        change
    }

    /// Tells the world that a port's congestion bit changed ([`apply_cong`]'s result): wakes
    /// pollers, blocked senders and monitors of the namespace. No lock held.
    fn cong_updated(&self, news: Option<CongNews>, rx: RxCtx<'_>) {
        if let Some(n) = news {
            self.shared
                .cong
                .updated(&self.shared, &self.netcong, n.mask, Some(&n.map), rx);
        }
    }

    /// Empties the receive queue at close (C: `rds_clear_recv_queue` and
    /// `rds_cong_remove_socket`). The socket is already marked dead, so nothing new arrives.
    pub(crate) fn clear_recv_queue(&self, ctx: &ProcessCtx) {
        let (queue, change, cong) = {
            let mut d = self.data.lock();
            let queue = core::mem::replace(&mut d.recv_queue, kernel::list::List::new());
            let bytes: u64 = queue.iter().map(|i| u64::from(i.len)).sum();
            d.account = Default::default();
            stats::add(Stat::RecvBytesFreedFromSock, bytes);
            let change = apply_cong(&d, CongChange::Uncongested);
            (queue, change, d.cong.take())
        };
        drop(queue);
        drop(cong);
        self.cong_updated(change, RxCtx::Process(ctx));
    }

    /// Adds `portmask` to the congestion notifications of a monitoring socket for the ports it
    /// was refused on; returns whether it has notifications to read (C: the monitor part of
    /// `rds_cong_map_updated`).
    pub(crate) fn cong_notify(&self, portmask: u64) -> bool {
        let mut d = self.data.lock();
        let hit = d.cong_mask & portmask;
        d.cong_notify |= hit;
        d.cong_mask &= !portmask;
        d.cong_notify != 0
    }

    /// What `recvmsg` finds first, with what it needs from the socket to return a message,
    /// under one lock: the message at the head of the queue is taken off it (and off the
    /// receive buffer's account), unless `peek`; `rcvbuf` is the socket's limit.
    fn head(&self, peek: bool, rcvbuf: u32) -> Head {
        let mut d = self.data.lock();
        if !d.notify_queue.is_empty() {
            return Head::Notes;
        }
        if d.cong_notify != 0 {
            return Head::Cong(d.cong_notify);
        }
        let (rx_traces, rx_trace_pos, scope_id) = (d.rx_traces, d.rx_trace_pos, d.scope_id);
        let (m, news) = if peek {
            match d.recv_queue.cursor_front() {
                Some(c) => (c.current().into(), None),
                None => return Head::Empty,
            }
        } else {
            let Some(m) = d.recv_queue.pop_front() else {
                return Head::Empty;
            };
            let change = d.account.remove(m.charge, rcvbuf);
            let news = apply_cong(&d, change);
            (m.into_arc(), news)
        };
        Head::Msg {
            m,
            taken: !peek,
            news,
            rx_traces,
            rx_trace_pos,
            scope_id,
        }
    }

    /// Puts back at the head of the queue a message [`RdsSocket::head`] took (the copy to
    /// user space faulted: the message stays for the next `recvmsg`, as in C).
    fn put_back(&self, m: Arc<Message>, rcvbuf: u32, ctx: &ProcessCtx) {
        let Ok(m) = ListArc::<Message, 1>::try_from_arc(m) else {
            return;
        };
        let news = {
            let mut d = self.data.lock();
            let change = d.account.add(m.charge, rcvbuf);
            d.recv_queue.push_front(m);
            apply_cong(&d, change)
        };
        self.cong_updated(news, RxCtx::Process(ctx));
    }

    /// Whether `recvmsg` has something to return (C: the wait condition of `rds_recvmsg`).
    fn readable(&self) -> bool {
        let d = self.data.lock();
        !d.notify_queue.is_empty() || d.cong_notify != 0 || !d.recv_queue.is_empty()
    }

    /// Hands the oldest zero-copy completions (at most [`crate::proto::ZCOOKIES_MAX`]) to
    /// `recvmsg` as an `RDS_CMSG_ZCOPY_COMPLETION` (C: `rds_recvmsg_zcookie`), when the socket
    /// has `SO_ZEROCOPY` on and the control buffer has room for one; returns whether it did.
    /// The completions stay when the control message cannot be written.
    #[inline]
    fn put_zcookies(&self, sock: &Sock<Rds>, msg: &mut MsgHdr<'_>) -> bool {
        sock.flag(SockFlag::ZeroCopy) && self.put_zcookies_on(msg)
    }

    /// [`RdsSocket::put_zcookies`] for a socket with `SO_ZEROCOPY` on (out of line: the other
    /// sockets' `recvmsg` stays short).
    #[inline(never)]
    fn put_zcookies_on(&self, msg: &mut MsgHdr<'_>) -> bool {
        if msg.control_room() < cmsg_space(ZCOOKIES_LEN) {
            return false;
        }
        // One caller at a time between reading the completions and dropping them.
        let _serial = self.inner.lock();
        let Some((bytes, n)) = ({
            let d = self.data.lock();
            d.zc.peek(&d.zc_buf)
        }) else {
            return false;
        };
        if msg
            .put_cmsg(SOL_RDS, RDS_CMSG_ZCOPY_COMPLETION, &bytes)
            .is_err()
        {
            return false;
        }
        let mut d = self.data.lock();
        let cap = d.zc_buf.len();
        d.zc.consume(n, cap);
        true
    }

    /// Hands pending completion notifications to `recvmsg` as `RDS_CMSG_RDMA_STATUS` control
    /// messages (C: `rds_notify_queue_get`): as many as the control buffer holds, at least one
    /// (which `put_cmsg` truncates, with `MSG_CTRUNC`, if it does not fit). Returns `None` when
    /// there were none.
    fn take_notifications(&self, msg: &mut MsgHdr<'_>) -> Option<Result> {
        let max = (msg.control_room() / cmsg_space(RDMA_NOTIFY_LEN)).max(1);
        let mut batch = List::new();
        {
            let mut d = self.data.lock();
            for _ in 0..max {
                match d.notify_queue.pop_front() {
                    Some(n) => batch.push_back(n),
                    None => break,
                }
            }
        }
        if batch.is_empty() {
            return None;
        }
        while let Some(n) = batch.pop_front() {
            let note = RdmaNotify {
                user_token: n.user_token,
                status: n.status.load(Ordering::Relaxed),
            };
            if let Err(e) = msg.put_cmsg(SOL_RDS, RDS_CMSG_RDMA_STATUS, &note.encode()) {
                // Those not handed over go back to the head of the queue, in order.
                batch.push_front(n);
                let mut d = self.data.lock();
                while let Some(back) = batch.pop_back() {
                    d.notify_queue.push_front(back);
                }
                return Some(Err(e));
            }
        }
        Some(Ok(()))
    }
}

/// What is at the head of a socket's receive side ([`RdsSocket::head`]).
enum Head {
    /// Completion notifications are pending.
    Notes,
    /// Congestion notifications (the port bits) are pending.
    Cong(u64),
    /// A message (taken off the queue unless peeking, with the congestion change that made),
    /// and the socket's receive-trace settings and scope id.
    Msg {
        m: Arc<Message>,
        taken: bool,
        news: Option<CongNews>,
        rx_traces: u8,
        rx_trace_pos: [u8; 3],
        scope_id: u32,
    },
    /// Nothing.
    Empty,
}

/// `recvmsg(2)` on an RDS socket (C: `rds_recvmsg`).
pub(crate) fn recvmsg(
    sock: &Sock<Rds>,
    msg: &mut MsgHdr<'_>,
    len: usize,
    flags: i32,
    ctx: &ProcessCtx,
) -> Result<usize> {
    let s = sock.state();
    let mut timeo = sock.rcvtimeo(flags & MSG_DONTWAIT != 0);
    if flags & MSG_OOB != 0 {
        // C returns 0 without looking further.
        return Ok(0);
    }
    if flags & MSG_ERRQUEUE != 0 {
        return sock.recv_errqueue(msg, len);
    }
    let peek = flags & MSG_PEEK != 0;
    let rcvbuf = sock.rcvbuf() / 2;
    loop {
        let (m, taken, news, rx_traces, rx_trace_pos, scope_id) = match s.head(peek, rcvbuf) {
            // Pending notifications first, and nothing else.
            Head::Notes => match s.take_notifications(msg) {
                Some(r) => return r.map(|()| 0),
                None => continue,
            },
            Head::Cong(notify) => {
                msg.put_cmsg(SOL_RDS, RDS_CMSG_CONG_UPDATE, &notify.to_ne_bytes())?;
                s.data.lock().cong_notify &= !notify;
                return Ok(0);
            }
            Head::Msg {
                m,
                taken,
                news,
                rx_traces,
                rx_trace_pos,
                scope_id,
            } => (m, taken, news, rx_traces, rx_trace_pos, scope_id),
            Head::Empty => {
                if timeo.is_zero() {
                    // A non-blocking call with nothing to read takes zero-copy completions
                    // alone (C: `rds_recvmsg_zcookie`; a blocking one does not wait for them).
                    return if s.put_zcookies(sock, msg) {
                        Ok(0)
                    } else {
                        Err(EAGAIN)
                    };
                }
                match sock.wait(timeo, || s.readable(), ctx) {
                    WaitOutcome::Ready(left) => {
                        timeo = left;
                        continue;
                    }
                    WaitOutcome::TimedOut => return Err(etimedout()),
                    WaitOutcome::Interrupted => return Err(erestartsys()),
                }
            }
        };
        s.cong_updated(news, RxCtx::Process(ctx));
        let want = m.data.len().min(msg.data_left());
        let copied = m.data.copy_to_user(msg, want);
        stats::add(Stat::CopyToUser, copied as u64);
        if copied != want {
            if taken {
                s.put_back(m, rcvbuf, ctx);
            }
            return Err(EFAULT);
        }
        if taken {
            stats::add(Stat::RecvBytesFreedFromSock, u64::from(m.len));
        }
        let mut ret = copied;
        if copied < m.len as usize {
            if flags & MSG_TRUNC != 0 {
                ret = m.len as usize;
            }
            msg.add_flags(MSG_TRUNC);
        }
        put_recv_cmsgs(sock, msg, &m, rx_traces, rx_trace_pos).map_err(|_| EFAULT)?;
        s.put_zcookies(sock, msg);
        stats::inc(Stat::RecvDelivered);
        if msg.wants_name() {
            let mut name = [0u8; crate::bindings::net::GETNAME_LEN];
            if let Some(n) = encode_sockaddr(
                &SockAddr {
                    addr: m.saddr,
                    port: m.sport,
                    scope_id,
                },
                &mut name,
            ) {
                msg.set_name(name.get(..n).unwrap_or(&[]));
            }
        }
        // Its memory serves the next message its sender sends (or the next to arrive).
        Message::recycle(m, &s.shared.rx_slots, ctx);
        return Ok(ret);
    }
}

/// The control messages of a received message (C: `rds_cmsg_recv`).
fn put_recv_cmsgs(
    sock: &Sock<Rds>,
    msg: &mut MsgHdr<'_>,
    inc: &Message,
    n: u8,
    pos: [u8; 3],
) -> Result {
    if inc.rdma_cookie != 0 {
        msg.put_cmsg(SOL_RDS, RDS_CMSG_RDMA_DEST, &inc.rdma_cookie.to_ne_bytes())?;
    }
    let ns = inc.rx_tstamp.load(Ordering::Relaxed);
    if ns != 0 && sock.flag(SockFlag::RcvTstamp) {
        // struct __kernel_old_timeval / __kernel_sock_timeval: two 64-bit fields on x86-64.
        let sec = ns.div_euclid(1_000_000_000);
        let usec = ns.rem_euclid(1_000_000_000) / 1000;
        let mut tv = [0u8; 16];
        tv[..8].copy_from_slice(&sec.to_ne_bytes());
        tv[8..].copy_from_slice(&usec.to_ne_bytes());
        let kind = if sock.flag(SockFlag::TstampNew) {
            SO_TIMESTAMP_NEW
        } else {
            SO_TIMESTAMP_OLD
        };
        msg.put_cmsg(SOL_SOCKET, kind, &tv)?;
    }
    if n > 0 {
        // C: `rds_cmsg_recv`'s `struct rds_cmsg_rx_trace` (u8 count, u8 positions[3], 4 bytes
        // of padding, u64 deltas[3]). The trace points of a loopback message: the header and
        // reassembly points are never set (0), the end is when it was queued, the last is now.
        let points = [
            0,
            0,
            inc.rx_end.load(Ordering::Relaxed),
            sys::local_clock_ns(),
        ];
        let mut t = [0u8; 32];
        t[0] = n;
        for i in 0..usize::from(n.min(3)) {
            let j = usize::from(pos[i]);
            t[1 + i] = pos[i];
            let d = points[(j + 1).min(3)].wrapping_sub(points[j.min(3)]);
            t[8 + 8 * i..16 + 8 * i].copy_from_slice(&d.to_ne_bytes());
        }
        msg.put_cmsg(SOL_RDS, RDS_CMSG_RXPATH_LATENCY, &t)?;
    }
    Ok(())
}

/// `poll(2)` on an RDS socket (C: `rds_poll`).
pub(crate) fn poll(sock: &Sock<Rds>, ctx: &PollCtx<'_>) -> u32 {
    let s = sock.state();
    ctx.wait_on_socket();
    if s.seen_congestion.load(Ordering::Relaxed) {
        ctx.wait_on(s.shared.cong.waitq());
    }
    let generation = s.netcong.generation();
    let sndbuf = u64::from(sock.sndbuf() / 2);
    let mut mask = 0;
    let mut d = s.data.lock();
    if !d.cong_monitor {
        // A congestion map changed: POLLIN "for historical reasons", as C says.
        if d.cong_track != generation {
            d.cong_track = generation;
            mask |= poll::IN | poll::RDNORM | poll::WRBAND;
        }
    } else if d.cong_notify != 0 {
        mask |= poll::IN | poll::RDNORM;
    }
    if !d.recv_queue.is_empty() || !d.notify_queue.is_empty() || d.zc.pending() != 0 {
        mask |= poll::IN | poll::RDNORM;
    }
    if s.snd_bytes.load(Ordering::Relaxed) < sndbuf {
        mask |= poll::OUT | poll::WRNORM;
    }
    drop(d);
    if mask != 0 {
        s.seen_congestion.store(false, Ordering::Relaxed);
    }
    if sock.has_error() {
        mask |= poll::ERR;
    }
    mask
}
