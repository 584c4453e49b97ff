// SPDX-License-Identifier: GPL-2.0

//! The receive side of a path's QP: receive completions, reassembly and delivery.
//!
//! C counterpart: `net/rds/ib_recv.c` (`rds_ib_recv_cqe_handler`, `rds_ib_process_recv`,
//! `rds_ib_inc_copy_to_user`).
//!
//! [`RxState`], what reassembly keeps between fragments; `recv_done`, a receive's completion
//! in softirq context (credits and acks it carries, reassembly, delivery to
//! [`crate::recv::incoming`], the receive posted again: with its own page when the frame was
//! an ack or a small message copied out, [`COPY_MAX`]); `rx_failed`, the receive side giving
//! up on the QP; [`IbFrags`], the pages a larger message borrows.

use super::conn::wc_failed;
use super::qp::PathQp;
use super::AddrFmt;
use crate::bindings::ib::{Wc, WcStatus};
use crate::bindings::sync::{new_spinlock_bh, SpinLockBh};
use crate::conn::Conn;
use crate::message::{LentFrags, Payload, RxSlot};
use crate::proto::{FragOutcome, Header, Reassembly, SpareStack, Stat, FRAG_SIZE, HEADER_LEN};
use crate::recv::{self, RxCtx};
use crate::stats;
use core::sync::atomic::{fence, Ordering};
use kernel::{alloc::Flags, page::Page, prelude::*, sync::Arc};

/// What the receive side keeps between fragments.
pub(super) struct RxState {
    pub(super) reasm: Reassembly,
    pub(super) frags: KVec<Page>,
}

/// Messages up to this size that arrive in one fragment are copied out of their receive page,
/// which is posted again at once; larger ones borrow their pages (and the slots get new ones).
/// 1 KiB: copying it costs less than a new page and the record that lends it.
pub(super) const COPY_MAX: usize = 1024;

impl PathQp {
    /// Posts a receive into slot `slot` with `page`, or with a new page allocated with
    /// `flags`: a frame's header lands in the slot's header buffer, its data (one fragment at
    /// most) in the page.
    pub(super) fn post_recv(&self, slot: u32, page: Option<Page>, flags: Flags) -> Result {
        let page = match page {
            Some(p) => p,
            None => Page::alloc_page(flags)?,
        };
        self.qp
            .post_recv(slot, Self::recv_hdr(slot), page, FRAG_SIZE)
    }

    /// A receive completed (softirq context: nothing here sleeps, and what is allocated is
    /// allocated with `GFP_ATOMIC`).
    pub(super) fn recv_done(&self, conn: &Arc<Conn>, slot: u32, wc: Wc, live: bool) {
        let mut hdr = [0u8; HEADER_LEN];
        let buf = self.qp.complete_recv(slot, &mut hdr);
        if wc.status != WcStatus::Success {
            drop(buf);
            self.rx_dead.store(true, Ordering::Release);
            // Paired with the fence after `connect_complete` (`ESTABLISHED`): a flush that
            // comes before the connection is up is caught there.
            fence(Ordering::SeqCst);
            // A retired path's failure (a connect that yielded, whose QP the peer's reject
            // moved to the error state) is not the connection's.
            if live {
                wc_failed(conn, wc.status, Stat::RsIbRecvError);
            }
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
        let Some(page) = buf else {
            self.rx_failed(conn);
            return;
        };
        if self.hold.swap(false, Ordering::AcqRel) {
            // iWARP: the initiator spoke; the responder may send now.
            conn.kick();
        }
        let outcome = self.rx.lock().reasm.fragment(&hdr, wc.byte_len as usize);
        // The page the slot is posted with again, when this frame's contents are done with.
        let reuse = match outcome {
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
                conn.ack_received(h.ack);
                Some(page)
            }
            Ok(FragOutcome::More(h)) => {
                self.credits_received(conn, h.credit);
                conn.ack_received(h.ack);
                if self.rx.lock().frags.push(page, GFP_ATOMIC).is_err() {
                    self.rx_failed(conn);
                    return;
                }
                None
            }
            Ok(FragOutcome::Complete { first, this, .. }) => {
                self.credits_received(conn, this.credit);
                conn.ack_received(this.ack);
                match self.deliver(conn, &first, page) {
                    Ok(reuse) => reuse,
                    Err(()) => {
                        self.rx_failed(conn);
                        return;
                    }
                }
            }
        };
        // The slot takes a buffer again (its own page, one a delivered message gave back, or a
        // new one), which the peer is told about.
        let page = reuse.or_else(|| self.pages.take());
        if self.post_recv(slot, page, GFP_ATOMIC).is_err() {
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

    /// Delivers a message whose last fragment, `page`, arrived (`first`: the header of its
    /// first fragment) to the core. A small message in one fragment is copied out, and its
    /// page returned for the slot; a larger one borrows its pages.
    fn deliver(
        &self,
        conn: &Arc<Conn>,
        first: &[u8; HEADER_LEN],
        page: Page,
    ) -> Result<Option<Page>, ()> {
        let mut pages = core::mem::replace(&mut self.rx.lock().frags, KVec::new());
        let len = Header::from_bytes(first).len as usize;
        let (payload, reuse) = if pages.is_empty() && len <= COPY_MAX {
            (
                Payload::from_page(&page, len, GFP_ATOMIC).map_err(|_| ())?,
                Some(page),
            )
        } else {
            pages.push(page, GFP_ATOMIC).map_err(|_| ())?;
            let frags = IbFrags {
                pages,
                len,
                pool: self.pages.clone(),
            };
            let frags = Arc::new(frags, GFP_ATOMIC).map_err(|_| ())?;
            (Payload::lent(frags, len), None)
        };
        let rx = RxSlot::new(GFP_ATOMIC).map_err(|_| ())?;
        if recv::incoming(conn, first, payload, rx, RxCtx::Atomic).is_err() {
            stats::inc(Stat::RsIbBadFragment);
            return Err(());
        }
        Ok(reuse)
    }

    /// The receive side gives up on this QP: nothing more of it is delivered, and the
    /// connection drops (and reconnects).
    fn rx_failed(&self, conn: &Arc<Conn>) {
        self.rx_dead.store(true, Ordering::Release);
        conn.drop_connection();
    }
}

/// Receive pages of one QP that the messages which borrowed them gave back, for its receives
/// to be posted with again instead of new pages: at most [`POOL_PAGES`], kept in the pool
/// itself (giving back never allocates). Messages give back in any context, the receive
/// path takes in softirq context.
#[pin_data]
pub(super) struct PagePool {
    #[pin]
    spares: SpinLockBh<SpareStack<Page, POOL_PAGES>>,
}

/// Pages a [`PagePool`] keeps at most: those of two 64 KiB messages waiting for their
/// receivers (128 KiB; a connection's ring holds 1 MiB of receive pages besides).
pub(super) const POOL_PAGES: usize = 32;

impl PagePool {
    /// An empty pool.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                spares <- new_spinlock_bh!(SpareStack::new(), "PagePool::spares"),
            }),
            GFP_KERNEL,
        )
    }

    /// KiB of the pages kept.
    pub(super) fn spare_kib(&self) -> u32 {
        let n = self.spares.lock().len();
        u32::try_from(n * (kernel::page::PAGE_SIZE / 1024)).unwrap_or(u32::MAX)
    }

    /// A page given back earlier, if there is one.
    fn take(&self) -> Option<Page> {
        self.spares.lock().pop()
    }

    /// Keeps `pages` for later receives, as many as there is room for; the rest are freed
    /// (outside the lock).
    fn give(&self, pages: KVec<Page>) {
        let mut rest = pages.into_iter();
        let full = {
            let mut sp = self.spares.lock();
            rest.by_ref().find_map(|p| sp.push(p).err())
        };
        drop(full);
        drop(rest);
    }
}

/// The pages of a received message, lent to its payload: 4 KiB each, the last one shorter.
/// They go back to their QP's pool when the message is done with them.
struct IbFrags {
    pages: KVec<Page>,
    len: usize,
    pool: Arc<PagePool>,
}

impl Drop for IbFrags {
    fn drop(&mut self) {
        self.pool
            .give(core::mem::replace(&mut self.pages, KVec::new()));
    }
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
