// SPDX-License-Identifier: GPL-2.0

//! The receive side of a path's QP: receive completions, reassembly and delivery.
//!
//! C counterpart: `net/rds/ib_recv.c` (`rds_ib_recv_cqe_handler`, `rds_ib_process_recv`,
//! `rds_ib_inc_copy_to_user`).
//!
//! [`RxState`], what reassembly keeps between fragments; `recv_done`, a receive's completion
//! (credits and acks it carries, reassembly, delivery to [`crate::recv::incoming`], the
//! receive posted again); `rx_failed`, the receive side giving up on the QP; [`IbFrags`], the
//! pages a delivered message borrows.

use super::conn::wc_failed;
use super::qp::PathQp;
use super::AddrFmt;
use crate::bindings::ib::{Wc, WcStatus};
use crate::bindings::sync::ProcessCtx;
use crate::conn::Conn;
use crate::message::{LentFrags, Payload};
use crate::proto::{FragOutcome, Header, Reassembly, Stat, FRAG_SIZE};
use crate::recv::{self, RxCtx};
use crate::stats;
use core::sync::atomic::{fence, Ordering};
use kernel::{page::Page, prelude::*, sync::Arc};

/// What the receive side keeps between fragments.
pub(super) struct RxState {
    pub(super) reasm: Reassembly,
    pub(super) frags: KVec<Page>,
}

impl PathQp {
    pub(super) fn recv_done(
        &self,
        conn: &Arc<Conn>,
        slot: u32,
        wc: Wc,
        live: bool,
        ctx: &ProcessCtx,
    ) {
        let buf = self.qp.complete_recv(slot);
        if wc.status != WcStatus::Success {
            drop(buf);
            self.rx_dead.store(true, Ordering::Release);
            // Paired with the fence after `connect_complete` (`ESTABLISHED`): a flush that
            // comes before the connection is up is caught there.
            fence(Ordering::SeqCst);
            wc_failed(conn, wc.status, Stat::RsIbRecvError);
            return;
        }
        if !live {
            self.rx_dead.store(true, Ordering::Release);
        }
        if self.rx_dead.load(Ordering::Acquire) {
            // Receives complete one at a time, so nothing of this QP is delivered after the
            // frame that killed it.
            return;
        }
        let Some((hdr, page)) = buf else {
            self.rx_failed(conn);
            return;
        };
        if self.hold.swap(false, Ordering::AcqRel) {
            // iWARP: the initiator spoke; the responder may send now.
            conn.kick();
        }
        let outcome = self.rx.lock().reasm.fragment(&hdr, wc.byte_len as usize);
        match outcome {
            Err(e) => {
                let old = core::mem::replace(&mut self.rx.lock().frags, KVec::new());
                drop(old);
                stats::inc(match e {
                    crate::proto::FragError::Checksum => Stat::RecvDropBadChecksum,
                    _ => Stat::RsRecvDropBadHeader,
                });
                stats::inc(Stat::RsIbBadFragment);
                // As C's `rds_ib_conn_error`: a line per dropped connection.
                pr_warn!(
                    "RDS/IB: bad fragment ({:?}, {} bytes, seq {}, len {}) from {}: reconnecting\n",
                    e,
                    wc.byte_len,
                    Header::from_bytes(&hdr).sequence,
                    Header::from_bytes(&hdr).len,
                    AddrFmt(conn.key.faddr)
                );
                self.rx_failed(conn);
                return;
            }
            Ok(FragOutcome::Ack(h)) => {
                stats::inc(Stat::IbAckReceived);
                self.credits_received(conn, h.credit);
                conn.ack_received_recycling(h.ack, ctx);
                drop(page);
            }
            Ok(FragOutcome::More(h)) => {
                self.credits_received(conn, h.credit);
                conn.ack_received_recycling(h.ack, ctx);
                if self.rx.lock().frags.push(page, GFP_KERNEL).is_err() {
                    self.rx_failed(conn);
                    return;
                }
            }
            Ok(FragOutcome::Complete { first, this, .. }) => {
                self.credits_received(conn, this.credit);
                conn.ack_received_recycling(this.ack, ctx);
                let mut pages = core::mem::replace(&mut self.rx.lock().frags, KVec::new());
                if pages.push(page, GFP_KERNEL).is_err() {
                    self.rx_failed(conn);
                    return;
                }
                let len = Header::from_bytes(&first).len as usize;
                let frags = IbFrags { pages, len };
                let delivered = Arc::new(frags, GFP_KERNEL)
                    .map_err(|_| ENOMEM)
                    .and_then(|f| {
                        let slot = conn
                            .shared
                            .rx_slots
                            .take_or_alloc(ctx, GFP_KERNEL_ACCOUNT)?;
                        Ok((Payload::lent(f, len), slot))
                    });
                match delivered {
                    Ok((payload, rx)) => {
                        if recv::incoming(conn, &first, payload, rx, RxCtx::Process(ctx)).is_err() {
                            stats::inc(Stat::RsIbBadFragment);
                            self.rx_failed(conn);
                            return;
                        }
                    }
                    Err(_) => {
                        self.rx_failed(conn);
                        return;
                    }
                }
            }
        }
        // The slot takes a new buffer, which the peer is told about.
        if self.qp.post_recv(slot, GFP_KERNEL).is_err() {
            self.rx_failed(conn);
            return;
        }
        self.credits.add_posted(1);
        self.attempt_ack(conn);
        // A sender held back by its last credit (kept for a credit update while there was
        // nothing to tell) may use it now: it carries this receive's credit. Without this
        // kick both ends can wait for each other's update, each with fewer untold receives
        // than an ack-only update waits for (C retries a throttled send every jiffy).
        if self.flow_controlled()
            && self.credits.send() > 0
            && self.waiting.swap(false, Ordering::SeqCst)
        {
            conn.kick();
        }
    }

    /// The receive side gives up on this QP: nothing more of it is delivered, and the
    /// connection drops (and reconnects).
    fn rx_failed(&self, conn: &Arc<Conn>) {
        self.rx_dead.store(true, Ordering::Release);
        conn.drop_connection();
    }
}

/// The pages of a received message, lent to its payload: 4 KiB each, the last one shorter.
struct IbFrags {
    pages: KVec<Page>,
    len: usize,
}

impl LentFrags for IbFrags {
    fn try_for_each(&self, f: &mut dyn FnMut(&Page, usize, usize) -> Result) -> Result {
        let mut left = self.len;
        for p in self.pages.iter() {
            let n = left.min(FRAG_SIZE);
            f(p, 0, n)?;
            left -= n;
        }
        Ok(())
    }
}
