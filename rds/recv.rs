// SPDX-License-Identifier: GPL-2.0

//! Receiving: delivery into a socket's receive queue, `recvmsg` and `poll`.
//!
//! C counterpart: `net/rds/recv.c` (`rds_recv_incoming`, `rds_recvmsg`,
//! `rds_clear_recv_queue`, `rds_recv_rcvbuf_delta`) and `rds_poll` in `net/rds/af_rds.c`.
//!
//! A transport hands each arriving message to [`incoming`], which answers pings, finds the
//! socket bound to the destination and queues the message there, charging the socket's
//! receive buffer. A socket whose queue grows past its receive buffer marks its port in its
//! address's congestion map; it clears the mark once the queue has drained below half of it.

use crate::bindings::net::{erestartsys, etimedout, MsgHdr, PollCtx, Sock, SockFlag, WaitOutcome};
use crate::bindings::raw;
use crate::bindings::sys::{self, poll};
use crate::conn::Conn;
use crate::message::{Incoming, IncomingHeader, Message, MsgKind};
use crate::proto::RDS_RDMA_SUCCESS;
use crate::proto::{
    cmsg_space, encode_sockaddr, monitor_mask, CongChange, RdmaNotify, SockAddr, Stat, PROBE_PORT,
    RDMA_NOTIFY_LEN, RDS_CMSG_CONG_UPDATE, RDS_CMSG_RDMA_STATUS, RDS_CMSG_RXPATH_LATENCY, SOL_RDS,
    SOL_SOCKET,
};
use crate::send;
use crate::socket::{Rds, RdsSocket, SockData};
use crate::stats;
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

/// `SO_TIMESTAMP_OLD` (cmsg type of the 16-byte `struct __kernel_old_timeval`).
const SO_TIMESTAMP_OLD: i32 = 29;
/// `SO_TIMESTAMP_NEW` (cmsg type of the 16-byte `struct __kernel_sock_timeval`).
const SO_TIMESTAMP_NEW: i32 = 63;
/// `RDS_CMSG_RDMA_DEST`.
const RDS_CMSG_RDMA_DEST: i32 = 2;

/// The incoming message a transport hands to [`deliver`] for `msg`, which went over `conn`
/// (allocated before anything happens, so that a shortage leaves everything to be retried).
pub(crate) fn make_incoming(conn: &Conn, msg: &Message) -> Result<ListArc<Incoming>> {
    let hdr = IncomingHeader {
        saddr: conn.key.laddr,
        daddr: conn.key.faddr,
        sport: msg.sport,
        dport: msg.dport,
        seq: msg.seq(),
        tos: conn.key.tos,
        rdma_cookie: msg.rdma_cookie,
        rdma_rkey: msg.op.as_ref().filter(|op| op.is_rdma()).map(|op| op.rkey),
    };
    Incoming::new(hdr, msg.data.clone())
}

/// A message arrived on `conn` (C: `rds_recv_incoming`): answers pings, and queues the
/// message on the socket bound to its destination, or drops it. `kind` is what the sender
/// built.
pub(crate) fn deliver(conn: &Arc<Conn>, inc: ListArc<Incoming>, kind: MsgKind) {
    if !conn.accept_seq(inc.seq, false) {
        stats::inc(Stat::RecvDropOldSeq);
        return;
    }
    if kind == MsgKind::Data && inc.dport == 0 && sys::ping_enabled() {
        if inc.sport == 0 {
            // A ping from port 0 is not answered.
            return;
        }
        stats::inc(Stat::RecvPing);
        // The pong goes back to the pinger, over the pinged side's connection to it.
        let back = conn.shared.conns.get(
            &conn.shared,
            crate::conn::ConnKey {
                net: conn.key.net,
                laddr: inc.daddr,
                faddr: inc.saddr,
                tos: inc.tos,
            },
            conn.transport,
        );
        if let Ok(back) = back {
            // A congested pinger gets no pong, as in C.
            let _ = send::send_pong(&back, inc.sport);
        }
        return;
    }
    if inc.dport == PROBE_PORT && inc.sport == 0 {
        // A multipath handshake pong: loopback has one path only.
        return;
    }
    let Some(sock) = conn.shared.binds.find(
        conn.key.net,
        SockAddr {
            addr: inc.daddr,
            port: inc.dport,
            scope_id: 0,
        },
    ) else {
        stats::inc(Stat::RecvDropNoSock);
        return;
    };
    // The RDMA operation this message completes used one of the receiver's registrations:
    // a use-once registration is done with (C: `rds_recv_incoming_exthdrs`).
    if let Some(rkey) = inc.rdma_rkey {
        sock.state().unuse_mr(rkey);
    }
    if sock.flag(SockFlag::RcvTstamp) {
        inc.rx_tstamp
            .store(sys::real_time_ns(), core::sync::atomic::Ordering::Relaxed);
    }
    inc.rx_end
        .store(sys::local_clock_ns(), core::sync::atomic::Ordering::Relaxed);
    sock.state().queue_incoming(&sock, inc);
}

/// Applies a change of a socket's congestion state to its port's bit, under the socket's
/// `data` lock, so that the bit always follows the socket's accounting (C: the second half of
/// `rds_recv_rcvbuf_delta`, under `rs_recv_lock`). Returns the port mask to announce with
/// [`RdsSocket::cong_updated`] once the lock is dropped, if the bit changed.
fn apply_cong(d: &SockData, change: CongChange) -> Option<u64> {
    let (map, port) = d.cong.as_ref()?;
    match change {
        CongChange::None => None,
        CongChange::Congested => {
            map.set(*port);
            Some(0)
        }
        CongChange::Uncongested => map.clear(*port).then(|| monitor_mask(*port)),
    }
}

impl RdsSocket {
    /// Queues a message on the receive queue, unless the socket is closing (C: the locked part
    /// of `rds_recv_incoming`).
    fn queue_incoming(&self, sock: &Sock<Rds>, inc: ListArc<Incoming>) {
        let len = inc.len;
        let rcvbuf = sock.rcvbuf() / 2;
        let change = {
            let mut d = self.data.lock();
            if d.dead {
                drop(d);
                stats::inc(Stat::RecvDropDeadSock);
                return;
            }
            stats::inc(Stat::RecvQueued);
            stats::add(Stat::RecvBytesAddedToSock, u64::from(len));
            let change = d.account.add(len, rcvbuf);
            d.recv_queue.push_back(inc);
            apply_cong(&d, change)
        };
        self.cong_updated(change);
        sock.wake();
    }

    /// Tells the world that a port's congestion bit changed ([`apply_cong`]'s result): wakes
    /// pollers, blocked senders and monitors. No lock held.
    fn cong_updated(&self, portmask: Option<u64>) {
        if let Some(mask) = portmask {
            self.shared.cong.updated(mask);
        }
    }

    /// Empties the receive queue at close (C: `rds_clear_recv_queue` and
    /// `rds_cong_remove_socket`). The socket is already marked dead, so nothing new arrives.
    pub(crate) fn clear_recv_queue(&self) {
        let (queue, change) = {
            let mut d = self.data.lock();
            let queue = core::mem::replace(&mut d.recv_queue, kernel::list::List::new());
            let bytes = d.account.bytes;
            d.account = Default::default();
            stats::add(Stat::RecvBytesFreedFromSock, bytes);
            let change = apply_cong(&d, CongChange::Uncongested);
            d.cong = None;
            (queue, change)
        };
        drop(queue);
        self.cong_updated(change);
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

    /// The message at the head of the receive queue, if any.
    fn peek(&self) -> Option<Arc<Incoming>> {
        let mut d = self.data.lock();
        d.recv_queue.cursor_front().map(|c| c.current().into())
    }

    /// Whether `recvmsg` has something to return (C: the wait condition of `rds_recvmsg`).
    fn readable(&self) -> bool {
        let d = self.data.lock();
        !d.notify_queue.is_empty() || d.cong_notify != 0 || !d.recv_queue.is_empty()
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
                status: n.status.load(core::sync::atomic::Ordering::Relaxed),
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

    /// Removes `inc` if it is still at the head of the queue (C: `rds_still_queued`); with
    /// `keep`, only checks. Returns whether it was there.
    fn still_queued(&self, sock: &Sock<Rds>, inc: &Arc<Incoming>, keep: bool) -> bool {
        let rcvbuf = sock.rcvbuf() / 2;
        let (taken, change) = {
            let mut d = self.data.lock();
            let at_head = d
                .recv_queue
                .cursor_front()
                .is_some_and(|c| core::ptr::eq(&*c.current(), &**inc));
            if !at_head {
                return false;
            }
            if keep {
                return true;
            }
            let taken = d.recv_queue.pop_front();
            stats::add(Stat::RecvBytesFreedFromSock, u64::from(inc.len));
            let change = d.account.remove(inc.len, rcvbuf);
            (taken, apply_cong(&d, change))
        };
        drop(taken);
        self.cong_updated(change);
        true
    }
}

/// `recvmsg(2)` on an RDS socket (C: `rds_recvmsg`).
pub(crate) fn recvmsg(
    sock: &Sock<Rds>,
    msg: &mut MsgHdr<'_>,
    len: usize,
    flags: i32,
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
    loop {
        // Pending notifications first, and nothing else.
        if let Some(r) = s.take_notifications(msg) {
            return r.map(|()| 0);
        }
        let notify = s.data.lock().cong_notify;
        if notify != 0 {
            msg.put_cmsg(SOL_RDS, RDS_CMSG_CONG_UPDATE, &notify.to_ne_bytes())?;
            s.data.lock().cong_notify &= !notify;
            return Ok(0);
        }
        let Some(inc) = s.peek() else {
            if timeo.is_zero() {
                return Err(EAGAIN);
            }
            match sock.wait(timeo, || s.readable()) {
                WaitOutcome::Ready(left) => {
                    timeo = left;
                    continue;
                }
                WaitOutcome::TimedOut => return Err(etimedout()),
                WaitOutcome::Interrupted => return Err(erestartsys()),
            }
        };
        let data = inc.data.bytes();
        let want = data.len().min(msg.data_left());
        let copied = msg.copy_to_user(data.get(..want).unwrap_or(&[]));
        stats::add(Stat::CopyToUser, copied as u64);
        if copied != want {
            return Err(EFAULT);
        }
        if !s.still_queued(sock, &inc, flags & MSG_PEEK != 0) {
            // Someone else took it first: try the next one.
            stats::inc(Stat::RecvDeliverRaced);
            msg.revert(copied);
            continue;
        }
        let mut ret = copied;
        if copied < inc.len as usize {
            if flags & MSG_TRUNC != 0 {
                ret = inc.len as usize;
            }
            msg.add_flags(MSG_TRUNC);
        }
        let (rx_traces, rx_trace_pos, scope_id) = {
            let d = s.data.lock();
            (d.rx_traces, d.rx_trace_pos, d.scope_id)
        };
        put_recv_cmsgs(sock, msg, &inc, rx_traces, rx_trace_pos).map_err(|_| EFAULT)?;
        stats::inc(Stat::RecvDelivered);
        if msg.wants_name() {
            let mut name = [0u8; crate::bindings::net::GETNAME_LEN];
            if let Some(n) = encode_sockaddr(
                &SockAddr {
                    addr: inc.saddr,
                    port: inc.sport,
                    scope_id,
                },
                &mut name,
            ) {
                msg.set_name(name.get(..n).unwrap_or(&[]));
            }
        }
        return Ok(ret);
    }
}

/// The control messages of a received message (C: `rds_cmsg_recv`).
fn put_recv_cmsgs(
    sock: &Sock<Rds>,
    msg: &mut MsgHdr<'_>,
    inc: &Incoming,
    n: u8,
    pos: [u8; 3],
) -> Result {
    if inc.rdma_cookie != 0 {
        msg.put_cmsg(SOL_RDS, RDS_CMSG_RDMA_DEST, &inc.rdma_cookie.to_ne_bytes())?;
    }
    let ns = inc.rx_tstamp.load(core::sync::atomic::Ordering::Relaxed);
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
            inc.rx_end.load(core::sync::atomic::Ordering::Relaxed),
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
    if s.data.lock().seen_congestion {
        ctx.wait_on(s.shared.cong.waitq());
    }
    let generation = s.shared.cong.generation();
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
    if !d.recv_queue.is_empty() || !d.notify_queue.is_empty() {
        mask |= poll::IN | poll::RDNORM;
    }
    if d.snd_bytes < sndbuf {
        mask |= poll::OUT | poll::WRNORM;
    }
    if mask != 0 {
        d.seen_congestion = false;
    }
    drop(d);
    if sock.has_error() {
        mask |= poll::ERR;
    }
    mask
}

/// Settles the sender's side of a message that the loopback transport has handled.
pub(crate) fn delivered(msg: &Message) {
    send::complete(msg, RDS_RDMA_SUCCESS);
}
