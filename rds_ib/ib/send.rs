// SPDX-License-Identifier: GPL-2.0

//! The send side of a path's QP: ring slots and credits, a message's SENDs, their
//! completions, the credits a header grants, and ack-only frames.
//!
//! C counterpart: `net/rds/ib_send.c` (`rds_ib_xmit`, `rds_ib_send_cqe_handler`,
//! `rds_ib_send_grab_credits`, `rds_ib_send_add_credits`) and the ack half of `ib_recv.c`
//! (`rds_ib_attempt_ack`, `rds_ib_send_ack`).
//!
//! [`Inflight`], what a send work request keeps until it completes (the [`SendSource`] of the
//! QP's SENDs), and the send-side methods of [`PathQp`]: flow control (`engage_flow_control`,
//! `credits_received`), `reserve`, `xmit` and `post`, `send_done`, `attempt_ack` and
//! `send_ack`.

use super::conn::wc_failed;
use super::qp::PathQp;
use super::rdma::op_status;
use crate::bindings::ib::{
    Piece, SendSource, Wc, WcStatus, SEND_FENCE, SEND_SIGNALED, SEND_SOLICITED,
};
use crate::bindings::mm::PinnedPages;
use crate::conn::Conn;
use crate::message::{Frag, Message};
use crate::proto::{
    frag_count, Grab, Header, Stat, HEADER_LEN, MAX_ADV_CREDIT, RDS_RDMA_DROPPED, RDS_RDMA_SUCCESS,
};
use crate::rdma::OpKind;
use crate::send;
use crate::stats;
use crate::transport::{XmitError, XmitProgress};
use core::sync::atomic::Ordering;
use kernel::{prelude::*, sync::Arc};

/// A send work request in flight: what its slot keeps alive until it completes (or the drain
/// flushes it), its message; handed back by the completion (`send_done`). Also the
/// [`SendSource`] of a SEND's payload pieces.
pub(super) enum Inflight {
    /// A SEND of a fragment of the message (its payload); `last`: the last fragment, whose
    /// completion completes the message's operation (RC ordering: the operation's RDMA, posted
    /// before it, is done).
    Send { msg: Arc<Message>, last: bool },
    /// An RDMA work request of the message's operation (the message owns the pages it
    /// maps); `completes`: the last of a silent operation that has no SEND behind it, whose
    /// completion completes the operation.
    Rdma { msg: Arc<Message>, completes: bool },
    /// The ack-only frame (its header is all it sends).
    Ack,
}

impl SendSource for Inflight {
    fn piece(&self, idx: usize) -> Option<Piece<'_>> {
        let Inflight::Send { msg, .. } = self else {
            return None;
        };
        msg.data.segment(idx).and_then(|f| match f {
            Frag::Page(p, o, n) => Some(Piece::Page(p, o, n)),
            Frag::Bytes(b) => Some(Piece::Bytes(b)),
            // Zero-copy payloads are TCP's only (and have no segments).
            Frag::User(..) => None,
        })
    }

    fn pinned(&self, idx: usize) -> Option<(&PinnedPages, usize, usize)> {
        let Inflight::Rdma { msg, .. } = self else {
            return None;
        };
        match &msg.op.as_deref()?.kind {
            OpKind::Rdma { local, .. } => local.get(idx).map(|s| (&s.pages, s.offset, s.len)),
            // The old value's 8 bytes.
            OpKind::Atomic { local, offset, .. } => (idx == 0).then_some((&**local, *offset, 8)),
        }
    }
}

/// SENDs posted in a row of which only the last is signaled: its completion frees the slots of
/// those before it (a send queue completes in order). 8, not C's `max_unsignaled_wr` (16):
/// a sent message goes back to its sender's pool only once its slot is freed, and a pool
/// keeps 16 spares (`POOL_MSGS`), so with 16 a sender one batch ahead of the completions
/// allocated (`ib-recycle`: 23 messages in 2,000 on a busy host). Signaled whatever the count: the last fragment of a message with
/// an RDMA or atomic operation (its completion completes the operation) or of more than one
/// fragment (so that no more than this many single-fragment messages wait, unsignaled, for a
/// later send to free them), the last of a batch cut short by the ring or the credits (as C),
/// RDMA requests, fences, registrations and ack-only frames.
pub(super) const SIGNAL_EVERY: u32 = 8;

impl PathQp {
    /// Engages flow control if the peer offered `credit` (its posted receives) in the
    /// handshake; this end always offers its own.
    pub(super) fn engage_flow_control(&self, credit: u32) {
        if credit != 0 {
            self.credits.add_send(credit);
            self.flowctl.store(true, Ordering::Release);
        }
    }

    pub(super) fn flow_controlled(&self) -> bool {
        self.flowctl.load(Ordering::Acquire)
    }

    /// Up to `want` send slots and, under flow control, as many credits: the first slot's
    /// position, how many, and the posted credits to advertise with them. `None` when none is
    /// free; the next send completion or credit update kicks the connection then.
    fn reserve(&self, want: u32) -> Option<(u32, Grab)> {
        for first in [true, false] {
            let (pos, got) = self.ring.lock().alloc(want);
            if got == 0 {
                stats::inc(Stat::IbTxRingFull);
            } else {
                let g = if self.flow_controlled() {
                    self.credits.grab(got, false, MAX_ADV_CREDIT)
                } else {
                    Grab { got, advertise: 0 }
                };
                if g.got < got {
                    // Only `xmit` allocates send slots, and the core runs one at a time.
                    self.ring.lock().unalloc(got - g.got);
                    stats::inc(Stat::IbTxThrottle);
                }
                if g.got > 0 {
                    if g.got < want {
                        self.waiting.store(true, Ordering::SeqCst);
                    }
                    return Some((pos, g));
                }
            }
            if first {
                // Ask to be kicked, then look once more: room or credits may have come
                // between the look and the ask.
                self.waiting.store(true, Ordering::SeqCst);
            }
        }
        None
    }

    /// Whether RDMA requests are out; if so, the next send completion kicks the connection
    /// (asked for before the second look, so that a completion in between is not missed).
    fn ops_out(&self) -> bool {
        if self.rdma_wrs.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.waiting.store(true, Ordering::SeqCst);
        self.rdma_wrs.load(Ordering::SeqCst) != 0
    }

    /// Sends (more of) `msg`: each fragment a SEND of the header and at most 4 KiB; stops
    /// when the ring is full or the credits are out (a completion or a credit update kicks
    /// the connection).
    pub(super) fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
    ) -> Result<(), XmitError> {
        if self.hold.load(Ordering::Acquire) {
            // Released (and the connection kicked) by the first receive.
            return Err(XmitError::Full);
        }
        let total = frag_count(msg.len);
        if !progress.op_sent && msg.op.is_some() {
            // The operation first, then the message behind it on the same QP; a silent
            // operation with nothing to say has no message (C: `rds_send_xmit`).
            let alone = msg
                .op
                .as_deref()
                .is_some_and(|op| op.silent && msg.len == 0 && msg.rdma_cookie == 0);
            self.post_op(conn, msg, alone)?;
            progress.op_sent = true;
            if alone {
                progress.sent = total as usize;
                return Ok(());
            }
        }
        let done = u32::try_from(progress.sent).unwrap_or(total);
        if done >= total {
            return Ok(());
        }
        if done == 0 && msg.op.is_some() && self.dev.attrs.iwarp && self.ops_out() {
            // iWARP: the message behind an operation goes once the operation's requests (and
            // any before them) completed, instead of behind `SEND_FENCE`. siw's transmit
            // thread, holding a fenced SEND, serves no READ request of its peer's (it queues
            // the response for when it is free), so two ends that each had a READ out with a
            // fenced SEND behind it waited for each other for ever. The last completion kicks
            // the connection (`waiting`).
            return Err(XmitError::Full);
        }
        let Some((pos, g)) = self.reserve(total - done) else {
            return Err(XmitError::Full);
        };
        self.post(conn, msg, progress, pos, g, done, total)
    }

    #[expect(clippy::too_many_arguments)]
    fn post(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        pos: u32,
        g: Grab,
        done: u32,
        total: u32,
    ) -> Result<(), XmitError> {
        // The header of every fragment: the piggybacked ack and C's checksum; the first one
        // posted now also tells the receives posted since the last update.
        let base = msg.header(conn.piggyback_ack());
        let hdr: [u8; HEADER_LEN] = base.with_checksum().encode();
        let first_hdr = (g.advertise > 0).then(|| {
            stats::inc(Stat::IbTxCreditUpdates);
            Header {
                credit: u8::try_from(g.advertise).unwrap_or(u8::MAX),
                ..base
            }
            .with_checksum()
            .encode()
        });
        let nslots = self.ring_slots();
        let cut_short = done + g.got < total;
        for k in 0..g.got {
            let frag = done + k;
            let slot = (pos + k) % nslots;
            let last = frag + 1 == total;
            let must_signal =
                (last && (msg.op.is_some() || total > 1)) || (cut_short && k + 1 == g.got);
            let mut flags = if last { SEND_SOLICITED } else { 0 };
            if self.signal_now(must_signal) {
                flags |= SEND_SIGNALED;
            }
            let piece = (msg.len > 0).then_some(frag as usize);
            let h = match &first_hdr {
                Some(f) if k == 0 => f,
                _ => &hdr,
            };
            // The first SEND behind an RDMA read or an atomic (whose results the message
            // announces), or a fenced operation, waits for it. On iWARP `xmit` waited for
            // every operation (a write's too, which ends in a READ: `post_op`) before.
            let fence = frag == 0
                && !self.dev.attrs.iwarp
                && msg.op.as_deref().is_some_and(|op| {
                    op.fence
                        || matches!(
                            op.kind,
                            OpKind::Rdma { write: false, .. } | OpKind::Atomic { .. }
                        )
                });
            let flags = if fence { flags | SEND_FENCE } else { flags };
            let keep = Inflight::Send {
                msg: msg.clone(),
                last,
            };
            if self
                .qp
                .post_send(slot, Self::send_hdr(slot), h, keep, piece, flags)
                .is_err()
            {
                // The QP is going (or failed): what was not posted goes back; the connection
                // resets and the message is sent again.
                self.ring.lock().unalloc(g.got - k);
                if self.flow_controlled() {
                    self.credits.unget(g.got - k);
                }
                progress.sent = frag as usize;
                conn.drop_connection();
                return Err(XmitError::Full);
            }
            progress.sent = frag as usize + 1;
        }
        if done + g.got < total {
            return Err(XmitError::Full);
        }
        progress.op_sent = true;
        Ok(())
    }

    /// Whether the SEND about to be posted is signaled: when it `must` be, or when
    /// [`SIGNAL_EVERY`] SENDs went unsignaled before it (only `xmit` posts SENDs, one call at a
    /// time per connection).
    fn signal_now(&self, must: bool) -> bool {
        let every = SIGNAL_EVERY.min(self.ring_slots() / 2).max(1);
        let n = self.unsignaled.load(Ordering::Relaxed) + 1;
        if must || n >= every {
            self.unsignaled.store(0, Ordering::Relaxed);
            true
        } else {
            self.unsignaled.store(n, Ordering::Relaxed);
            false
        }
    }

    /// A signaled send-side request completed (softirq context): so did every request posted
    /// before it on the ring (a send queue completes in order; a flushed queue reports every
    /// request, signaled or not). Their slots are freed and what they kept is handed back.
    /// `live`: the QP's path is still the connection's (a failure of a retired one, such as a
    /// connect that yielded to the peer's, does not drop the connection).
    pub(super) fn send_done(&self, conn: &Arc<Conn>, slot: u32, wc: Wc, live: bool) {
        let (oldest, n) = {
            let ring = self.ring.lock();
            (ring.oldest(), ring.completed(slot))
        };
        let nslots = self.ring_slots();
        // Completions of one CQ run one at a time, and only they free slots: the `n` oldest
        // are this completion's.
        for k in 1..n {
            let earlier = self.qp.complete_send((oldest + k - 1) % nslots);
            self.sent(conn, earlier, WcStatus::Success);
        }
        let keeper = self.qp.complete_send(slot);
        self.ring.lock().free(n);
        self.sent(conn, keeper, wc.status);
        if wc.status != WcStatus::Success {
            if live {
                wc_failed(conn, wc.status, Stat::RsIbSendError);
            }
            return;
        }
        if self.waiting.swap(false, Ordering::AcqRel) {
            conn.kick();
        }
    }

    /// What a completed send request kept (`keeper`), done with: its message's operation
    /// completes if this was the request that completes it, and the message goes back to its
    /// sender's pool at the next transmit, if the peer's ack settled it by then (the pool's lock
    /// is not taken in softirq context).
    fn sent(&self, conn: &Arc<Conn>, keeper: Option<Inflight>, status: WcStatus) {
        if matches!(keeper, Some(Inflight::Rdma { .. })) {
            // `send_done` kicks a connection whose message waits for this (`waiting`).
            self.rdma_ended();
        }
        // The operation of a message completes with the SEND behind it (or, alone, its last
        // RDMA request); a failed request of its reports it. A flush of the request that
        // completes it reports it dropped: the reset does so too for a message still
        // unacknowledged, but one the peer's ack settled is left to this report
        // (`send::WaitingOp`).
        match &keeper {
            Some(Inflight::Send { msg, last: true })
            | Some(Inflight::Rdma {
                msg,
                completes: true,
            }) if msg.op.is_some()
                && matches!(status, WcStatus::Success | WcStatus::WrFlushErr) =>
            {
                let st = if status == WcStatus::Success {
                    RDS_RDMA_SUCCESS
                } else {
                    RDS_RDMA_DROPPED
                };
                send::op_complete(msg, st);
            }
            Some(Inflight::Send { msg, .. }) | Some(Inflight::Rdma { msg, .. })
                if status != WcStatus::Success
                    && status != WcStatus::WrFlushErr
                    && msg.op.is_some() =>
            {
                send::op_complete(msg, op_status(status));
            }
            _ => {}
        }
        // The message goes back to its sender's pool, at the next transmit, if the peer's ack
        // settled it by then (the pool's lock is not taken in softirq context).
        if let Some(Inflight::Send { msg, .. } | Inflight::Rdma { msg, .. }) = keeper {
            drop(conn.recycle_later(msg));
        }
    }

    /// A header granted `n` send credits (C counts them whatever the flow control).
    pub(super) fn credits_received(&self, conn: &Arc<Conn>, n: u8) {
        if n == 0 {
            return;
        }
        stats::inc(Stat::IbRxCreditUpdates);
        self.credits.add_send(u32::from(n));
        if self.flow_controlled() && self.waiting.swap(false, Ordering::SeqCst) {
            conn.kick();
        }
    }

    /// Sends an ack-only frame if one is due: the peer asked for an ack (`ACK_REQUIRED`), or
    /// enough posted receives are untold (C: `rds_ib_attempt_ack`).
    pub(super) fn attempt_ack(&self, conn: &Arc<Conn>) {
        if conn.ack_requested()
            || (self.flow_controlled() && self.credits.posted() >= self.update_at)
        {
            self.send_ack(conn);
        }
    }

    /// The ack-only frame completed (softirq context): the next may go, and goes now if one
    /// was asked for meanwhile; a failure drops the connection (`live`: as in `send_done`).
    pub(super) fn ack_done(&self, conn: &Arc<Conn>, wc: Wc, live: bool) {
        drop(self.qp.complete_send(self.ack_slot()));
        self.ack_busy.store(false, Ordering::Release);
        if wc.status == WcStatus::Success {
            self.attempt_ack(conn);
        } else if live {
            wc_failed(conn, wc.status, Stat::IbAckSendFailure);
        }
    }

    /// Sends an ack-only frame with the last sequence number received and, under flow
    /// control, the posted receives untold; one at a time (its completion sends the next if
    /// one is due), and under flow control only with a credit (a credit update tries again).
    pub(super) fn send_ack(&self, conn: &Arc<Conn>) {
        if self.ack_busy.swap(true, Ordering::AcqRel) {
            stats::inc(Stat::IbAckSendDelayed);
            return;
        }
        let advertise = if self.flow_controlled() {
            let g = self.credits.grab(1, false, MAX_ADV_CREDIT);
            if g.got == 0 {
                stats::inc(Stat::IbTxThrottle);
                self.ack_busy.store(false, Ordering::Release);
                return;
            }
            g.advertise
        } else {
            0
        };
        let ack = conn.take_ack().unwrap_or_else(|| conn.piggyback_ack());
        let h = Header {
            ack,
            credit: u8::try_from(advertise).unwrap_or(u8::MAX),
            ..Header::default()
        }
        .with_checksum()
        .encode();
        let slot = self.ack_slot();
        let flags = SEND_SIGNALED | SEND_SOLICITED;
        match self
            .qp
            .post_send(slot, Self::send_hdr(slot), &h, Inflight::Ack, None, flags)
        {
            Ok(()) => {
                stats::inc(Stat::IbAckSent);
                if advertise > 0 {
                    stats::inc(Stat::IbTxCreditUpdates);
                }
            }
            Err(e) if e == EBUSY => {
                // Cannot happen (`ack_busy` was clear); nothing went out.
                self.ack_busy.store(false, Ordering::Release);
            }
            Err(_) => {
                self.ack_busy.store(false, Ordering::Release);
                stats::inc(Stat::IbAckSendFailure);
                conn.drop_connection();
            }
        }
    }
}
