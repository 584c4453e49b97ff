// SPDX-License-Identifier: GPL-2.0

//! RDMA and atomic operations on a path's QP.
//!
//! C counterpart: `net/rds/ib_send.c` (`rds_ib_xmit_rdma`, `rds_ib_xmit_atomic`,
//! `rds_ib_send_unmap_op`).
//!
//! [`atomic_wr`], the work request of an atomic operation; [`op_status`], what a failed work
//! request of an operation reports; `post_op`, which posts a message's operation ahead of its
//! SENDs ([`super::send`]).

use super::qp::PathQp;
use super::send::Inflight;
use crate::bindings::ib::{RdmaWr, WcStatus, SEND_SIGNALED};
use crate::bindings::mm::PAGE_SIZE;
use crate::conn::Conn;
use crate::message::Message;
use crate::proto::{
    AtomicOp, Stat, RDS_RDMA_DROPPED, RDS_RDMA_OTHER_ERROR, RDS_RDMA_REMOTE_ERROR, RDS_RDMA_SUCCESS,
};
use crate::rdma::OpKind;
use crate::send;
use crate::stats;
use crate::transport::XmitError;
use core::sync::atomic::Ordering;
use kernel::{prelude::*, sync::Arc};

/// The work request of an atomic operation.
pub(super) fn atomic_wr(a: &AtomicOp) -> RdmaWr {
    match *a {
        AtomicOp::Fadd { add, nocarry_mask } => RdmaWr::Fadd { add, nocarry_mask },
        AtomicOp::Cswp {
            compare,
            swap,
            compare_mask,
            swap_mask,
        } => RdmaWr::Cswp {
            compare,
            swap,
            compare_mask,
            swap_mask,
        },
    }
}

/// The `RDS_RDMA_*` status of an operation whose work request failed with `wc_status` (C:
/// `rds_ib_send_unmap_op`'s mapping, except for a lost peer): a remote access error is the
/// peer's refusal (a bad r_key, an address outside the registration, no write permission);
/// retries exhausted mean the peer was lost, as a flush does (C: `RDS_RDMA_OTHER_ERROR`);
/// anything else is an error of the connection.
pub(super) fn op_status(wc_status: WcStatus) -> i32 {
    match wc_status {
        WcStatus::RemAccessErr => RDS_RDMA_REMOTE_ERROR,
        WcStatus::RetryExcErr | WcStatus::RnrRetryExcErr => RDS_RDMA_DROPPED,
        _ => RDS_RDMA_OTHER_ERROR,
    }
}

impl PathQp {
    /// Posts the RDMA operation of `msg` (C: `rds_ib_xmit_rdma`): its local pieces in work
    /// requests of at most `max_sge` pieces each, the remote address advancing from one to
    /// the next, all of them or none (`Full` until the ring has room for all). Every one is
    /// signaled (its completion frees its slot and unmaps its pieces; a failure reports the
    /// operation); when `alone` (a silent operation with no message behind it), the last one's
    /// completion completes the operation. An operation that cannot be posted here completes
    /// at once with `RDS_RDMA_OTHER_ERROR`, and its message goes on.
    pub(super) fn post_op(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        alone: bool,
    ) -> Result<(), XmitError> {
        let Some(op) = msg.op.as_deref() else {
            return Ok(());
        };
        // The page pieces of the local memory, which the work requests map (`Qp::post_rdma`).
        let pieces = |off: usize, len: usize| {
            if len == 0 {
                0
            } else {
                (off % PAGE_SIZE + len).div_ceil(PAGE_SIZE)
            }
        };
        let (wr, remote_addr, stat, npieces) = match &op.kind {
            OpKind::Rdma {
                write,
                remote_addr,
                local,
            } => {
                let n = local.iter().map(|seg| pieces(seg.offset, seg.len)).sum();
                if *write {
                    (RdmaWr::Write, *remote_addr, Stat::RsIbRdmaWrite, n)
                } else {
                    (RdmaWr::Read, *remote_addr, Stat::RsIbRdmaRead, n)
                }
            }
            OpKind::Atomic {
                op: a,
                remote_addr,
                offset,
                ..
            } => {
                let wr = atomic_wr(a);
                if !self.dev.runs_atomic(&wr) {
                    // The device changed since `runs_op` looked.
                    send::op_complete(msg, RDS_RDMA_OTHER_ERROR);
                    return Ok(());
                }
                // The old value's 8 bytes, written by the device.
                (wr, *remote_addr, Stat::RsIbAtomic, pieces(*offset, 8))
            }
        };
        if npieces == 0 {
            // Nothing to move.
            if alone {
                send::op_complete(msg, RDS_RDMA_SUCCESS);
            }
            return Ok(());
        }
        // A READ takes at most `max_sge_rd` local pieces (siw: 1). Its sink is named by the
        // PD's local DMA l_key: siw checks only local write access for it (`siw_proc_rresp`),
        // which that key has, so no registration of the sink is needed.
        let per = if matches!(wr, RdmaWr::Read) {
            self.qp
                .max_sge()
                .min(self.dev.attrs.max_sge_rd.max(1) as usize)
        } else {
            self.qp.max_sge()
        };
        let nwr = npieces.div_ceil(per);
        // iWARP completes an RDMA WRITE once it is sent, and a peer that refuses it answers
        // with a TERMINATE that ends the connection: a READ of one byte behind the writes
        // (below: its response comes after the peer placed them) makes their
        // completion mean that the data is at the peer, and a refusal an operation that does
        // not complete (the connection's reset reports it dropped). The SEND behind it is
        // fenced.
        let placed = self.dev.attrs.iwarp && matches!(wr, RdmaWr::Write);
        let Ok(want) = u32::try_from(nwr + usize::from(placed)) else {
            send::op_complete(msg, RDS_RDMA_OTHER_ERROR);
            return Ok(());
        };
        if want > self.ring_slots() {
            send::op_complete(msg, RDS_RDMA_OTHER_ERROR);
            return Ok(());
        }
        let pos = {
            let mut ring = self.ring.lock();
            let (pos, got) = ring.alloc(want);
            if got < want {
                ring.unalloc(got);
                drop(ring);
                stats::inc(Stat::IbTxRingFull);
                // A completion kicks the connection; it retries from the start.
                self.waiting.store(true, Ordering::SeqCst);
                return Err(XmitError::Full);
            }
            pos
        };
        // Its completion is reported from here (a completion, or the reset's drop): an ack of
        // the message that comes first does not complete it (a READ's data may not be here
        // yet).
        send::op_posted(msg);
        let nslots = self.ring_slots();
        let mut raddr = remote_addr;
        let mut first = 0;
        for k in 0..want {
            let keep = Inflight::Rdma {
                msg: msg.clone(),
                completes: alone && k + 1 == want,
            };
            // Counted before it is posted: its completion (softirq) may come at once.
            self.rdma_started();
            let posted = if placed && k + 1 == want {
                // A READ of one byte, whose response comes back only after the peer handled
                // every request posted before it. Not zero bytes: siw answers a zero-byte READ
                // that has to wait in its inbound READ queue with the length of a stale work
                // request (48 bytes of an earlier SEND: `siw_activate_tx` leaves `sge[0]` as it
                // was, and the READ RESPONSE is then sent with one piece), which the requester
                // refuses with a TERMINATE.
                self.qp
                    .post_read_into(
                        (pos + k) % nslots,
                        keep,
                        Self::sink(),
                        (remote_addr, op.rkey),
                        SEND_SIGNALED,
                    )
                    .map(|()| 0)
            } else {
                let last = (first + per).min(npieces);
                let r = self.qp.post_rdma(
                    (pos + k) % nslots,
                    keep,
                    first..last,
                    &wr,
                    (raddr, op.rkey),
                    SEND_SIGNALED,
                );
                first = last;
                r
            };
            if posted.is_err() {
                self.rdma_ended();
                // The QP is going (or failed), or a piece could not be mapped: the rest of the
                // slots go back, and the reset reports the operation dropped (it is never sent
                // again).
                self.ring.lock().unalloc(want - k);
                conn.drop_connection();
                return Err(XmitError::Full);
            }
            if let Ok(bytes) = posted {
                raddr = raddr.wrapping_add(bytes);
            }
        }
        stats::inc(stat);
        Ok(())
    }
}
