// SPDX-License-Identifier: GPL-2.0

//! The QP of a path and what the data path keeps with it.
//!
//! C counterpart: the QP, ring, credit and ack fields of `struct rds_ib_connection`
//! (`net/rds/ib.h`), set up by `rds_ib_setup_qp` (`ib_cm.c`).
//!
//! [`PathQp`]'s definition and constructor; its methods are with the side they serve:
//! [`super::send`] (ring slots, credits, SENDs and acks), [`super::recv`] (receive
//! completions) and [`super::rdma`] (RDMA and atomic operations). Also what a `PathQp` holds on
//! its device while it lives: its place in the device's QP list (`QpListing`, for the fences of
//! [`super::fence`]) and in its count of paths (`PathCountGuard`).

use super::conn::Path;
use super::recv::{PagePool, RxState};
use super::send::Inflight;
use super::{IbDev, RECV_WR, SEND_WR, SEND_WR_IWARP};
use crate::bindings::ib::{
    BufRef, CmIdRef, Pd, Qp, QpEvents, QpSpec, Waiter, WcHandler, QP_EVENT_COMM_EST,
};
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::proto::{Credits, Reassembly, WorkRing, CREDIT_UPDATE_AT, HEADER_LEN};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{prelude::*, rbtree::RBTreeNodeReservation, sync::Arc};

/// The QP of a path and what the data path keeps with it: one incarnation's QP with its send
/// ring, receive reassembly, flow-control credits, ack-only frame and held sends, and its
/// place on its device. Made by [`Path::setup`], dropped by the path's teardown (after the QP
/// is drained); its methods are in `send.rs`, `recv.rs` and `rdma.rs`.
#[pin_data]
pub(super) struct PathQp {
    pub(super) qp: Arc<Qp<Inflight>>,
    pub(super) dev: Arc<IbDev>,
    /// The send ring: which slots are in use (SENDs complete in order).
    #[pin]
    pub(super) ring: SpinLockBh<WorkRing>,
    /// Receive pages that delivered messages gave back, for the receives.
    pub(super) pages: Arc<PagePool>,
    /// Reassembly: receive completions (softirq context, one at a time per CQ) take it.
    #[pin]
    pub(super) rx: SpinLockBh<RxState>,
    /// `xmit` found the ring full or ran out of credits: the next send completion or credit
    /// update kicks the connection.
    pub(super) waiting: AtomicBool,
    /// Flow control (both ends offered credits), settled before this end sends anything.
    pub(super) flowctl: AtomicBool,
    /// The credits of flow control (counted from the start; enforced when `flowctl`).
    pub(super) credits: Credits,
    /// Posted receives untold to the peer that make an ack-only frame worth it.
    pub(super) update_at: u32,
    /// The ack-only frame is out (one at a time; its completion sends the next if wanted).
    pub(super) ack_busy: AtomicBool,
    /// iWARP's responder must not send before the initiator's first frame arrives (MPA):
    /// the passive side holds its sends until its first receive, which kicks the connection.
    pub(super) hold: AtomicBool,
    /// The receive side gave up on this QP (a bad frame, a failed receive): the frames still
    /// in its ring are discarded, not delivered. A frame after one that was thrown away
    /// would otherwise be delivered, and the one thrown away, when the sender sends it again
    /// after the reconnect (as a retransmission, with a sequence number below what was
    /// delivered), dropped as a duplicate: lost.
    pub(super) rx_dead: AtomicBool,
    /// SENDs posted unsignaled since the last signaled one (`send.rs`, `SIGNAL_EVERY`).
    pub(super) unsignaled: AtomicU32,
    /// RDMA work requests posted and not completed yet, as parties of a waiter whose own
    /// party, the QP's, arrives when its path's teardown waits for them to settle
    /// (`rdma_settling`).
    pub(super) rdma_out: Arc<Waiter>,
    /// The teardown gave up the QP's party of `rdma_out`.
    pub(super) rdma_settling: AtomicBool,
    /// RDMA work requests posted and not completed yet (`rdma_out`'s parties, as a number):
    /// on iWARP the message behind an operation waits until none is out (`send.rs`, `xmit`).
    pub(super) rdma_wrs: AtomicU32,
    /// Lists the QP on its device (before `_token`: a path stops counting only after).
    _listed: QpListing,
    /// Counts the path on its device.
    _token: PathCountGuard,
}

/// A QP's entry in its device's list of QPs (`IbDev::qps`, which [`super::fence`] posts its
/// fences on): made with the QP, taken out when this drops.
struct QpListing {
    dev: Arc<IbDev>,
    key: usize,
}

impl QpListing {
    fn new(dev: &Arc<IbDev>, qp: &Arc<Qp<Inflight>>) -> Result<Self> {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let key = &**qp as *const Qp<Inflight> as usize;
        let old = dev.qps.lock().insert(node.into_node(key, qp.clone()));
        drop(old);
        Ok(Self {
            dev: dev.clone(),
            key,
        })
    }
}

impl Drop for QpListing {
    fn drop(&mut self) {
        let node = self.dev.qps.lock().remove_node(&self.key);
        // The QP (if that was its last reference) goes outside the lock.
        drop(node);
    }
}

/// A path counted alive on its device (a party of `IbDev::paths`, whose arrivals the device's
/// removal waits for): added by [`PathQp::new`] unless the device is going, arrives when this
/// drops.
struct PathCountGuard(Arc<IbDev>);

impl Drop for PathCountGuard {
    fn drop(&mut self) {
        self.0.paths.arrive();
    }
}

/// The QP's buffers (`QpSpec::bufs`): the headers of the send slots, one per slot, the ack-only
/// frame's last ...
const SEND_HDRS: usize = 0;
/// ... the headers of the receive slots, one per slot ...
const RECV_HDRS: usize = 1;
/// ... and where a fence READ's byte lands (never looked at; `rdma.rs`).
const SINK: usize = 2;
/// See [`SINK`].
const SINK_LEN: usize = 8;

impl PathQp {
    /// Slots of the send ring (the QP's send slots but the last, the ack-only frame's).
    pub(super) fn ring_slots(&self) -> u32 {
        self.qp.nsend() - 1
    }

    /// The send slot of the ack-only frame: the one after the ring.
    pub(super) fn ack_slot(&self) -> u32 {
        self.ring_slots()
    }

    /// Where send slot `slot`'s header goes.
    pub(super) fn send_hdr(slot: u32) -> BufRef {
        BufRef {
            buf: SEND_HDRS,
            off: slot as usize * HEADER_LEN,
            len: HEADER_LEN,
        }
    }

    /// Where receive slot `slot`'s header lands.
    pub(super) fn recv_hdr(slot: u32) -> BufRef {
        BufRef {
            buf: RECV_HDRS,
            off: slot as usize * HEADER_LEN,
            len: HEADER_LEN,
        }
    }

    /// Where a fence READ's byte lands (`rdma.rs`).
    pub(super) fn sink() -> BufRef {
        BufRef {
            buf: SINK,
            off: 0,
            len: 1,
        }
    }

    /// An RDMA work request is about to be posted: counted in `rdma_out` and `rdma_wrs`.
    pub(super) fn rdma_started(&self) {
        self.rdma_out.add();
        self.rdma_wrs.fetch_add(1, Ordering::SeqCst);
    }

    /// An RDMA work request completed (or was not posted after all): counted off both.
    pub(super) fn rdma_ended(&self) {
        self.rdma_out.arrive();
        self.rdma_wrs.fetch_sub(1, Ordering::SeqCst);
    }

    pub(super) fn new(
        path: Arc<Path>,
        id: CmIdRef<'_>,
        dev: Arc<IbDev>,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Self>> {
        let token = {
            // Counted under the device list's lock, which `remove` sets `removing` beside.
            let _devs = path.ic().ok_or(ENODEV)?.ib.devs.lock();
            if dev.removing.load(Ordering::Acquire) {
                return Err(ENODEV);
            }
            dev.paths.add();
            PathCountGuard(dev.clone())
        };
        let pages = PagePool::new()?;
        let rdma_out = Waiter::new()?;
        // The send queue also takes the ack-only frame, and `Qp`'s own requests (a fence, a
        // registration, the drain's).
        let cap = dev.attrs.max_qp_wr.saturating_sub(4).max(4);
        let send_wr = if dev.attrs.iwarp {
            SEND_WR_IWARP
        } else {
            SEND_WR
        };
        let ring = send_wr.min(cap);
        let nrecv = RECV_WR.min(cap);
        // The send slots are the ring's and the ack-only frame's (the last): a header each.
        let nsend = ring + 1;
        let bufs = [
            (nsend as usize * HEADER_LEN, true),
            (nrecv as usize * HEADER_LEN, false),
            (SINK_LEN, false),
        ];
        let spec = QpSpec {
            nsend,
            nrecv,
            vector: 0,
            bufs: &bufs,
        };
        let active = path.active;
        let conn = path.conn.clone();
        let events = QpEvents {
            handler: Arc::new(
                move |ev: i32| {
                    // COMM_EST is handled by rdma_cm; any other event is fatal for the QP.
                    if ev != QP_EVENT_COMM_EST {
                        conn.drop_connection();
                    }
                },
                GFP_KERNEL,
            )?,
        };
        let handler: Arc<dyn WcHandler> = path;
        let qp = {
            let pd = dev.pd.lock();
            let pd: &Arc<Pd> = pd.as_ref().ok_or(ENODEV)?;
            Qp::new(id, None, pd, &spec, handler, events, ctx)?
        };
        let listed = match QpListing::new(&dev, &qp) {
            Ok(l) => l,
            Err(e) => {
                qp.shutdown(ctx);
                return Err(e);
            }
        };
        Arc::pin_init(
            pin_init!(Self {
                qp,
                dev: dev.clone(),
                pages,
                ring <- new_spinlock_bh!(WorkRing::new(ring), "PathQp::ring"),
                rx <- new_spinlock_bh!(
                    RxState {
                        reasm: Reassembly::default(),
                        frags: KVec::new(),
                    },
                    "PathQp::rx"
                ),
                waiting: AtomicBool::new(false),
                flowctl: AtomicBool::new(false),
                credits: Credits::new(),
                update_at: CREDIT_UPDATE_AT.min(spec.nrecv / 2).max(1),
                ack_busy: AtomicBool::new(false),
                hold: AtomicBool::new(!active && dev.attrs.iwarp),
                rx_dead: AtomicBool::new(false),
                unsignaled: AtomicU32::new(0),
                rdma_out,
                rdma_settling: AtomicBool::new(false),
                rdma_wrs: AtomicU32::new(0),
                _listed: listed,
                _token: token,
            }),
            GFP_KERNEL,
        )
    }
}
