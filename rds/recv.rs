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
use crate::proto::{
    encode_sockaddr, monitor_mask, CongChange, SockAddr, Stat, PROBE_PORT, RDS_CMSG_CONG_UPDATE,
    SOL_RDS, SOL_SOCKET,
};
use crate::send::{self, Completion};
use crate::socket::{Rds, RdsSocket};
use crate::stats;
use kernel::{list::ListArc, prelude::*, sync::Arc};

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

/// A message arrived on `conn` from `hdr.saddr` to `hdr.daddr` (C: `rds_recv_incoming`).
/// `msg` is the sender's message when the transport is loopback. The caller settles the
/// sender's side. An error (a shortage of memory) leaves the message to be retried.
pub(crate) fn incoming(conn: &Arc<Conn>, hdr: IncomingHeader, msg: &Message) -> Result {
    if !conn.accept_seq(hdr.seq, false) {
        stats::inc(Stat::RecvDropOldSeq);
        return Ok(());
    }
    if msg.kind == MsgKind::Data && hdr.dport == 0 && sys::ping_enabled() {
        if hdr.sport == 0 {
            // A ping from port 0 is not answered.
            return Ok(());
        }
        stats::inc(Stat::RecvPing);
        // The pong goes back to the pinger, over the pinged side's connection to it.
        let back = conn.shared.conns.get(
            &conn.shared,
            crate::conn::ConnKey {
                net: conn.key.net,
                laddr: hdr.daddr,
                faddr: hdr.saddr,
                tos: hdr.tos,
            },
            conn.transport,
        );
        if let Ok(back) = back {
            // A congested pinger gets no pong, as in C.
            let _ = send::send_pong(&back, hdr.sport);
        }
        return Ok(());
    }
    if hdr.dport == PROBE_PORT && hdr.sport == 0 {
        // A multipath handshake pong: loopback has one path only.
        return Ok(());
    }
    let Some(sock) = conn.shared.binds.find(
        conn.key.net,
        SockAddr {
            addr: hdr.daddr,
            port: hdr.dport,
            scope_id: 0,
        },
    ) else {
        stats::inc(Stat::RecvDropNoSock);
        return Ok(());
    };
    let tstamp = if sock.flag(SockFlag::RcvTstamp) {
        sys::real_time_ns()
    } else {
        0
    };
    let inc = Incoming::new(hdr, msg.data.clone(), tstamp, 0)?;
    sock.state().queue_incoming(&sock, inc);
    Ok(())
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
            change
        };
        self.cong_changed(change);
        sock.wake();
    }

    /// Applies a change of the socket's congestion state to its port's bit and tells the
    /// world (C: the second half of `rds_recv_rcvbuf_delta`). No lock held.
    fn cong_changed(&self, change: CongChange) {
        let Some((map, port)) = self.data.lock().cong.clone() else {
            return;
        };
        match change {
            CongChange::None => {}
            CongChange::Congested => {
                map.set(port);
                self.shared.cong.updated(0);
            }
            CongChange::Uncongested => {
                if map.clear(port) {
                    self.shared.cong.updated(monitor_mask(port));
                }
            }
        }
    }

    /// Empties the receive queue at close (C: `rds_clear_recv_queue` and
    /// `rds_cong_remove_socket`). The socket is already marked dead, so nothing new arrives.
    pub(crate) fn clear_recv_queue(&self) {
        let (queue, cong) = {
            let mut d = self.data.lock();
            let queue = core::mem::replace(&mut d.recv_queue, kernel::list::List::new());
            let bytes = d.account.bytes;
            d.account = Default::default();
            stats::add(Stat::RecvBytesFreedFromSock, bytes);
            (queue, d.cong.take())
        };
        drop(queue);
        if let Some((map, port)) = cong {
            if map.clear(port) {
                self.shared.cong.updated(monitor_mask(port));
            }
        }
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
        d.cong_notify != 0 || !d.recv_queue.is_empty()
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
            (taken, change)
        };
        drop(taken);
        self.cong_changed(change);
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
        put_recv_cmsgs(sock, msg, &inc).map_err(|_| EFAULT)?;
        stats::inc(Stat::RecvDelivered);
        if msg.wants_name() {
            let scope_id = s.bound_scope();
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
fn put_recv_cmsgs(sock: &Sock<Rds>, msg: &mut MsgHdr<'_>, inc: &Incoming) -> Result {
    if inc.rdma_cookie != 0 {
        msg.put_cmsg(SOL_RDS, RDS_CMSG_RDMA_DEST, &inc.rdma_cookie.to_ne_bytes())?;
    }
    if inc.rx_tstamp != 0 && sock.flag(SockFlag::RcvTstamp) {
        // struct __kernel_old_timeval / __kernel_sock_timeval: two 64-bit fields on x86-64.
        let ns = inc.rx_tstamp;
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
    if !d.recv_queue.is_empty() {
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

/// Settles the sender's side of a message that the loopback transport has delivered.
pub(crate) fn delivered(msg: &Message) {
    send::complete(msg, Completion::Success);
}
