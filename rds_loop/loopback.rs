// SPDX-License-Identifier: GPL-2.0

//! The loopback transport: messages between sockets of one host.
//!
//! C counterpart: `net/rds/loop.c`.
//!
//! Loopback behaves like a wire whose far end is the same connection (as in C, one connection
//! carries both directions): transmitting a message encodes its header
//! ([`Message::header`]) and hands those bytes, with the message's payload pages, to the
//! receive path ([`crate::recv::incoming`]), which knows nothing but what the header says.
//! Before the frame arrives, the model device ([`super::hca::Hca`]) performs the message's
//! RDMA or atomic operation, whose completion is reported then. The receiving side
//! acknowledges at the end of each drain, and the acknowledgement settles the sender's side
//! ([`Conn::ack_received`]). Unlike C's loopback, congestion is enforced and RDMA works (see
//! `Documentation/differences-from-c.md`).
//!
//! The test build adds fault modes (`Documentation/testing.md`): frames delivered from a
//! tasklet (softirq context) instead of the sender's context; connections reset every few
//! frames, losing frames in flight or acknowledgements; acknowledgements held back; and
//! frames injected from user space.

use super::hca::Hca;
use crate::bindings::mm::random_u32;
use crate::bindings::net::NetId;
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::bindings::testhooks;
use crate::conn::{Conn, ConnKey};
use crate::message::{Message, Payload, RxSlot};
use crate::proto::{Addr, ConnState, HEADER_LEN, RDS_RDMA_SUCCESS, RDS_TRANS_LOOP};
use crate::recv::{self, RxCtx};
use crate::send;
use crate::transport::{
    ConnTransport, MrHandle, MrOps, RegRequest, Transport, XmitError, XmitProgress,
};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::{
    list::{impl_has_list_links, impl_list_arc_safe, impl_list_item, List, ListArc, ListLinks},
    prelude::*,
    sync::{Arc, ArcBorrow},
};

/// The loopback transport, and what it keeps for all its connections: its model device and,
/// in the softirq test mode, the frames on their way. One is made at module load and joins
/// the core's transports ([`crate::transport::join`]).
#[pin_data]
pub(crate) struct Loopback {
    /// The model RDMA device.
    hca: Arc<Hca>,
    /// Frames waiting for the tasklet (softirq test mode), in order.
    #[pin]
    wire: SpinLockBh<List<WireFrame>>,
}

impl Loopback {
    /// The transport at module load.
    pub(crate) fn new() -> Result<Arc<Self>> {
        let hca = Arc::pin_init(Hca::new(), GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                hca,
                wire <- new_spinlock_bh!(List::new(), "Loopback::wire"),
            }),
            GFP_KERNEL,
        )
    }

    /// Delivers the frames queued for softirq delivery (the tasklet; softirq context).
    #[cfg(rds_test)]
    pub(crate) fn softirq_run(&self) {
        loop {
            let frame = self.wire.lock().pop_front();
            let Some(f) = frame else { break };
            // A frame sent before its connection's last reset is lost with the wire (its ring
            // slots went with the reset).
            if f.conn.epoch() != f.epoch || f.conn.state() != ConnState::Up {
                continue;
            }
            let Some(lc) = f.conn.tstate::<LoopConn>() else {
                continue;
            };
            lc.release(&f.conn, f.frags);
            let slot = f.slot.lock().take();
            if let Some(slot) = slot {
                arrive(&f.conn, self, &f.hdr, &f.msg, slot, RxCtx::Atomic);
            }
            if !testhooks::loop_ack_hold() && f.conn.state() == ConnState::Up {
                if let Some(ack) = f.conn.take_ack() {
                    f.conn.ack_received(ack);
                }
            }
        }
    }

    /// A frame from user space (the `inject` test hook): `[laddr 16][faddr 16][tos 1]
    /// [header 48][payload]`, arriving on that loopback connection of `net`. A frame that
    /// fails validation drops the connection (`EBADMSG`).
    #[cfg(rds_test)]
    pub(crate) fn inject(
        &self,
        shared: &Arc<crate::socket::Shared>,
        net: NetId,
        frame: &[u8],
        ctx: &ProcessCtx,
    ) -> Result {
        let (laddr, rest) = frame.split_first_chunk::<16>().ok_or(EINVAL)?;
        let (faddr, rest) = rest.split_first_chunk::<16>().ok_or(EINVAL)?;
        let (tos, rest) = rest.split_first().ok_or(EINVAL)?;
        let (hdr, payload) = rest.split_first_chunk::<HEADER_LEN>().ok_or(EINVAL)?;
        let key = ConnKey {
            net,
            laddr: Addr(*laddr),
            faddr: Addr(*faddr),
            tos: *tos,
            path: 0,
        };
        let conn = shared.conns.find(&key).ok_or(ENOENT)?;
        let payload = Payload::from_bytes(payload, GFP_KERNEL)?;
        let slot = RxSlot::new(GFP_KERNEL)?;
        if recv::incoming(&conn, hdr, payload, slot, RxCtx::Process(ctx)).is_err() {
            conn.drop_connection();
            return Err(crate::bindings::net::ebadmsg());
        }
        Ok(())
    }
}

/// A frame on its way to the tasklet.
#[pin_data]
struct WireFrame {
    #[pin]
    links: ListLinks,
    conn: Arc<Conn>,
    /// The connection's epoch when the frame was sent.
    epoch: u64,
    hdr: [u8; HEADER_LEN],
    msg: Arc<Message>,
    /// The ring slots (fragments) the frame holds until it arrives.
    frags: u32,
    /// The memory for the incoming message, allocated by the sender; `None` for a part of a
    /// message before its last.
    #[pin]
    slot: SpinLockBh<Option<RxSlot>>,
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for WireFrame { untracked; }
}
impl_has_list_links! {
    impl HasListLinks<0> for WireFrame { self.links }
}
impl_list_item! {
    impl ListItem<0> for WireFrame { using ListLinks; }
}

/// The memory for the incoming message of a frame being sent (a spare, or new memory charged
/// to the sender); a shortage holds the message back.
fn rx_slot(conn: &Conn, ctx: &ProcessCtx) -> Result<RxSlot, XmitError> {
    conn.shared
        .rx_slots
        .take_or_alloc(ctx, GFP_KERNEL_ACCOUNT)
        .map_err(|_| XmitError::NoMem)
}

/// The receiving end of the wire: the model device performs the message's operation (and its
/// completion is reported), then the frame arrives. A frame whose operation failed, or a
/// silent operation's message with nothing to say, is accounted by the receiving side but not
/// delivered (C's IB transport sends no message for the latter; for the former the device
/// would break the connection, which loopback does not).
fn arrive(
    conn: &Arc<Conn>,
    lo: &Loopback,
    hdr: &[u8; HEADER_LEN],
    msg: &Arc<Message>,
    slot: RxSlot,
    rx: RxCtx<'_>,
) {
    if let Some(op) = &msg.op {
        let status = lo.hca.execute(conn.key.net, conn.key.faddr, op);
        send::op_complete(msg, status);
        let silent = op.silent && msg.len == 0 && msg.rdma_cookie == 0;
        if status != RDS_RDMA_SUCCESS || silent {
            let _ = conn.rx_data(0, msg.seq(), msg.flags());
            return;
        }
    }
    // The receiver shares the message; one with an operation is copied instead, so that a
    // receiver that does not read cannot keep the operation's pinned pages.
    let data = if msg.op.is_none() {
        Payload::shared(msg.clone())
    } else {
        let flags = match rx {
            RxCtx::Process(_) => GFP_KERNEL_ACCOUNT,
            RxCtx::Atomic => GFP_ATOMIC,
        };
        match msg.data.copy(flags) {
            Ok(p) => p,
            Err(_) => {
                // As a device out of receive buffers would: the frame is lost, and the
                // connection with it (its messages are resent or reported dropped).
                conn.drop_connection();
                return;
            }
        }
    };
    if recv::incoming(conn, hdr, data, slot, rx).is_err() {
        // A header the sender encoded fails only if memory was corrupted.
        conn.drop_connection();
    }
}

impl Transport for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn kind(&self) -> i32 {
        RDS_TRANS_LOOP
    }

    fn laddr_check(&self, _net: NetId, addr: &Addr, _scope_id: u32, _ctx: &ProcessCtx) -> bool {
        addr.is_loopback()
    }

    fn conn_alloc(
        self: ArcBorrow<'_, Self>,
        _key: &ConnKey,
        _ctx: &ProcessCtx,
    ) -> Result<Arc<dyn ConnTransport>> {
        let c: Arc<dyn ConnTransport> = Arc::new(
            LoopConn {
                lo: self.into(),
                countdown: AtomicU32::new(0),
                inflight: AtomicU32::new(0),
                waiting: AtomicBool::new(false),
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        Ok(c)
    }

    fn sends_cong_maps(&self) -> bool {
        false
    }

    fn loops_back(&self) -> bool {
        true
    }

    fn mr_ops(&self) -> Option<&dyn MrOps> {
        Some(self)
    }
}

/// Loopback's state of one connection.
struct LoopConn {
    /// The transport.
    lo: Arc<Loopback>,
    /// Frames until the next forced reset (the `loop_reset_every` test mode); 0 when none is
    /// scheduled.
    countdown: AtomicU32,
    /// Fragments in flight (the `loop_ring` test mode: taken by `xmit`, given back when the
    /// frame arrives).
    inflight: AtomicU32,
    /// `xmit` found the ring full: the next release kicks the connection.
    waiting: AtomicBool,
}

/// The `h_ack` of a frame leaving on `conn`: what the receiving side acknowledges, piggybacked
/// (C: `rds_ib_piggyb_ack`). While the `loop_ack_hold` test mode holds acknowledgements back,
/// 0 (which acknowledges nothing: sequence numbers start at 1) and the ack stays owed, so that
/// a piggybacked ack does not settle what the mode keeps on the retransmit list.
fn frame_ack(conn: &Conn) -> u64 {
    if testhooks::loop_ack_hold() {
        0
    } else {
        conn.piggyback_ack()
    }
}

/// The fragments a message takes in the ring: one per 4 KiB of payload, at least one (as the
/// IB transport sends it).
fn frags_of(msg: &Message) -> u32 {
    msg.len.div_ceil(4096).max(1)
}

/// Where a forced reset hits a frame.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The frame is lost before it arrives.
    BeforeArrival,
    /// The frame arrives, but the connection goes before it is acknowledged.
    AfterArrival,
}

impl LoopConn {
    /// Takes up to `want` ring slots; returns how many it got (all of them when the ring is
    /// unlimited).
    fn reserve(&self, want: u32) -> u32 {
        let ring = testhooks::loop_ring();
        if ring == 0 {
            return want;
        }
        let mut cur = self.inflight.load(Ordering::Acquire);
        loop {
            let got = want.min(ring.saturating_sub(cur));
            if got == 0 {
                return 0;
            }
            match self.inflight.compare_exchange_weak(
                cur,
                cur + got,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return got,
                Err(c) => cur = c,
            }
        }
    }

    #[cfg(rds_test)]
    /// Gives back `n` ring slots (a frame arrived); kicks the connection if `xmit` waits for
    /// room (any context).
    fn release(&self, conn: &Arc<Conn>, n: u32) {
        if testhooks::loop_ring() == 0 && self.inflight.load(Ordering::Relaxed) == 0 {
            return;
        }
        let _ = self
            .inflight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(n))
            });
        if self.waiting.swap(false, Ordering::AcqRel) {
            conn.kick();
        }
    }

    /// The fault for this frame, in the reset test mode.
    fn fault(&self) -> Option<Fault> {
        let every = testhooks::loop_reset_every();
        if every == 0 {
            return None;
        }
        let left = self.countdown.load(Ordering::Relaxed);
        if left > 1 {
            self.countdown.store(left - 1, Ordering::Relaxed);
            return None;
        }
        let r = random_u32();
        let span = every.saturating_mul(2).max(1);
        self.countdown.store(1 + r % span, Ordering::Relaxed);
        if left == 0 {
            // First frame since the mode was switched on: only schedule.
            return None;
        }
        Some(if r & 0x8000_0000 != 0 {
            Fault::BeforeArrival
        } else {
            Fault::AfterArrival
        })
    }
}

impl ConnTransport for LoopConn {
    fn connect(&self, conn: &Arc<Conn>, ctx: &ProcessCtx) -> Result {
        conn.connect_complete();
        // A connection that comes up sends its local congestion map; C's loopback hands it
        // straight to the map's update (`rds_loop_xmit_cong_map`: `rds_cong_map_updated(map,
        // ~0)`), which pollers and monitors of the namespace see.
        let shared = &conn.shared;
        shared
            .cong
            .updated(shared, &conn.netcong, !0, None, RxCtx::Process(ctx));
        Ok(())
    }

    fn shutdown(&self, _conn: &Arc<Conn>, ctx: &ProcessCtx) {
        // A frame the tasklet is delivering finishes first; the others are stale now (the
        // connection's epoch moved) and are dropped when the tasklet gets to them, their ring
        // slots with them.
        testhooks::tasklet_wait(ctx);
        self.inflight.store(0, Ordering::Release);
        self.waiting.store(false, Ordering::Release);
    }

    fn xmit_ready(&self) -> bool {
        !testhooks::loop_hold()
    }

    /// Outside the test build's fault modes: frames delivered from a tasklet (with a model
    /// ring), resets, held acknowledgements. Then nothing can be lost or reordered and the
    /// core delivers plain messages itself; in those modes every message goes the way a
    /// network transport's do (header, retransmit list, acknowledgement), which they exist to
    /// exercise.
    fn lossless(&self) -> bool {
        !testhooks::loop_softirq()
            && testhooks::loop_reset_every() == 0
            && !testhooks::loop_ack_hold()
    }

    fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        ctx: &ProcessCtx,
    ) -> Result<(), XmitError> {
        if msg.is_cong_map() {
            // Loopback shares the maps: nothing to carry (C: `rds_loop_xmit` calls
            // `rds_cong_map_updated` instead).
            return Ok(());
        }
        let fault = self.fault();
        if fault == Some(Fault::BeforeArrival) {
            conn.drop_connection();
            return Ok(());
        }
        if testhooks::loop_softirq() {
            // The ring: each 4 KiB fragment of the message takes a slot until it arrives; a
            // message that does not fit goes in parts, and the rest waits for arrivals to
            // make room (they kick the connection). The message arrives with its last part.
            let frags = frags_of(msg);
            let want = frags.saturating_sub(u32::try_from(progress.sent).unwrap_or(frags));
            let mut got = self.reserve(want);
            if got < want {
                self.waiting.store(true, Ordering::Release);
                // Room may have appeared before `waiting` was set.
                got += self.reserve(want - got);
            }
            if got == 0 {
                return Err(XmitError::Full);
            }
            progress.sent += got as usize;
            let last = got == want;
            let (hdr, slot) = if last {
                let slot = rx_slot(conn, ctx)?;
                (msg.header(frame_ack(conn)).encode(), Some(slot))
            } else {
                ([0; HEADER_LEN], None)
            };
            let frame = ListArc::pin_init(
                try_pin_init!(WireFrame {
                    links <- ListLinks::new(),
                    conn: conn.clone(),
                    epoch: conn.epoch(),
                    hdr,
                    msg: msg.clone(),
                    frags: got,
                    slot <- new_spinlock_bh!(slot, "WireFrame::slot"),
                }),
                GFP_KERNEL_ACCOUNT,
            )
            .map_err(|_| XmitError::NoMem)?;
            self.lo.wire.lock().push_back(frame);
            testhooks::tasklet_schedule();
            if !last {
                return Err(XmitError::Full);
            }
        } else {
            let hdr = msg.header(frame_ack(conn)).encode();
            let slot = rx_slot(conn, ctx)?;
            arrive(conn, &self.lo, &hdr, msg, slot, RxCtx::Process(ctx));
        }
        progress.op_sent = true;
        if fault == Some(Fault::AfterArrival) {
            conn.drop_connection();
        }
        Ok(())
    }

    /// The receiving side acknowledges what arrived, at the end of each drain (unless the
    /// connection went down meanwhile, or the `loop_ack_hold` test mode holds acks back).
    fn xmit_complete(&self, conn: &Arc<Conn>, _ctx: &ProcessCtx) {
        if testhooks::loop_ack_hold() || conn.state() != ConnState::Up {
            return;
        }
        if let Some(ack) = conn.take_ack() {
            conn.ack_received(ack);
        }
    }
}

/// Registrations are the model device's.
impl MrOps for Loopback {
    fn register(&self, req: RegRequest, ctx: &ProcessCtx) -> Result<Arc<dyn MrHandle>> {
        self.hca.register(req, ctx)
    }

    fn flush(&self, _ctx: &ProcessCtx) {}
}
