// SPDX-License-Identifier: GPL-2.0

//! Connections: one per (namespace, local address, remote address, type of service), with
//! their send queue, retransmit list, sequence and acknowledgement state, and life cycle.
//!
//! C counterpart: `net/rds/connection.c`, `net/rds/threads.c` and the transmit, ack and reset
//! paths of `net/rds/send.c` (`rds_send_xmit`, `rds_send_drop_acked`, `rds_send_path_reset`).
//!
//! # Life cycle
//!
//! ```text
//!            connect work / first send            transport: connected
//!   Down ──────────────────────────────► Connecting ──────────────────► Up
//!    ▲                                      │  │                          │
//!    │ shutdown done          start failed  │  │ drop                     │ drop (error,
//!    │ (then reconnect,       (reconnect)   │  ▼                          ▼  reset, reaper)
//!    │  with backoff)       ◄───────────────┘ Error ◄─────────────────────┘
//!    │                                           │ shutdown work
//!    └──────────────── Disconnecting ◄───────────┘
//! ```
//!
//! A drop ([`Conn::drop_connection`], any context) marks the connection `Error` and queues its
//! shutdown work, which (in process context) stops the send path, lets the transport stop and
//! drain ([`ConnTransport::shutdown`]), resets the path ([`Conn::shutdown`]: unacknowledged
//! messages go back to the head of the send queue marked `RETRANSMITTED`, those with an RDMA or
//! atomic operation are dropped and reported `RDS_RDMA_DROPPED`), and schedules a reconnect
//! with C's randomised exponential backoff (`net.rds.reconnect_{min,max}_delay_ms`).
//!
//! # Sending
//!
//! Senders append to the send queue and then drain it themselves ([`Conn::xmit`]); one task
//! drains a connection at a time (`in_xmit`), and whoever finds it busy leaves the work to it
//! or to the connection's send work. A message handed to the transport moves to the
//! retransmit list, where it stays until an acknowledgement covers it
//! ([`Conn::ack_received`]); the transport may take a message in several calls (a full ring
//! or no credits is ordinary backpressure: it kicks the connection when room appears).
//!
//! # Contexts
//!
//! Draining, connecting and shutting down run in process context ([`ProcessCtx`]).
//! Acknowledgements, received frames ([`crate::recv::incoming`]) and completions may arrive in
//! softirq context: the state they touch is under [`SpinLockBh`] locks.

use crate::bindings::net::{NetId, WaitQueue};
use crate::bindings::sync::{new_spinlock_bh, Gate, ProcessCtx, SpinLockBh};
use crate::bindings::sys::{
    self, impl_delayed_work_item, impl_work_item, new_process_work, DelayedWork, Work,
};
use crate::cong::{CongRef, NetCong};
use crate::message::{Message, POOL_BUF_MAX};
use crate::proto::{
    hs_exts, on_reset, tcp_connects, AckPacer, Addr, AtomicAckState, Backoff, ConnState, Header,
    OnReset, RxSeq, SavedRx, SeqCheck, SpareStack, Stat, TxSeq, FLAG_ACK_REQUIRED,
    FLAG_RETRANSMITTED, RDS_RDMA_DROPPED, RDS_RDMA_SUCCESS,
};
use crate::recv::RxCtx;
use crate::send;
use crate::socket::Shared;
use crate::stats;
use crate::transport::{ConnTransport, Transport, XmitError, XmitProgress};
use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use kernel::{
    c_str,
    list::{List, ListArc},
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    static_lock_class,
    sync::{Arc, Mutex, UniqueArc},
};

/// How many messages one drain sends before it hands the rest to the send work (C:
/// `send_batch_count`).
const SEND_BATCH: u32 = 1024;

/// How many pongs wait at most for the pong work (pings answered from softirq context); more
/// are not answered, as a congested pinger is not.
const PONGS_MAX: usize = 32;

/// The key of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ConnKey {
    /// The namespace.
    pub(crate) net: NetId,
    /// Local address.
    pub(crate) laddr: Addr,
    /// Remote address.
    pub(crate) faddr: Addr,
    /// Type of service.
    pub(crate) tos: u8,
    /// The path, for a transport with multipath (C: `cp_index`): each path is a connection
    /// of its own, with its own sequence numbers and queues. Path 0 is the first and the
    /// only one of a transport without multipath; it holds the path count
    /// ([`Conn::npaths`]).
    pub(crate) path: u8,
}

/// The message the transport is taking, and how far it got (C: `cp_xmit_rm` and the
/// `cp_xmit_*` offsets).
struct Cursor {
    msg: Arc<Message>,
    progress: XmitProgress,
    /// The core delivers it itself (a lossless connection, a plain message): it is on no
    /// retransmit list.
    direct: bool,
}

/// The fields of [`Conn`] protected by its spinlock (C: `cp_lock` and the fields the
/// `RDS_IN_XMIT` holder owns).
struct ConnInner {
    /// Messages waiting for the transport, in order.
    send_queue: List<Message>,
    /// Messages handed to the transport and not yet acknowledged, in sequence order (C:
    /// `cp_retrans`).
    retrans: List<Message>,
    /// The message in transmission (the `in_xmit` holder's).
    cursor: Option<Cursor>,
    /// The next sequence number to send.
    tx: TxSeq,
    /// Receive-side sequence tracking.
    rx: RxSeq,
    /// What the peer is owed in acknowledgements.
    /// When to ask the peer for an ack.
    pacer: AckPacer,
    /// The reconnect delay.
    backoff: Backoff,
    /// When the connection was last used (jiffies): a message queued or received.
    last_used: u64,
    /// Ports of pings answered from softirq context, for the pong work.
    pongs: [u16; PONGS_MAX],
    /// How many of `pongs` are set.
    npongs: usize,
    /// Sent messages an ack settled or a transport is done with, for the next transmit to
    /// give back to their senders' pools ([`Message::recycle_sent`], process context; acks
    /// and completions arrive in any context), each with at most [`POOL_BUF_MAX`] bytes of
    /// payload. A message may be here twice (its ack and its transport each gave it back):
    /// the last of its references recycles it.
    settled: SpareStack<Arc<Message>, SETTLED_MAX>,
}

/// References to sent messages a connection keeps for their senders' pools at most: two for
/// each spare a pool keeps ([`crate::message::POOL_MSGS`]), one from the ack and one from the
/// transport's completion, twice over: a transport that signals one send in several (IB: 8)
/// hands back that many at once, after their acks handed back theirs.
const SETTLED_MAX: usize = 4 * crate::message::POOL_MSGS;

/// Connections alive (created and not yet dropped), for the unload's leak check.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Counts its connection in [`LIVE`] while it exists.
struct Live(());

impl Live {
    fn new() -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Live(())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many connections exist (module unload: none should).
pub(crate) fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The multipath state of a connection's path ([`ConnKey::path`]); the count and the
/// handshake's flags are path 0's.
struct Paths {
    /// The transport has multipath ([`Transport::mp_capable`]).
    mp: bool,
    /// Path 0 of the connection, for a path above 0; `None` for path 0.
    base: Option<Arc<Conn>>,
    /// The negotiated path count (C: `c_npaths`): 0 until a handshake frame arrived, then 1
    /// to [`crate::proto::MPATH_MAX`]. Only a transport with multipath negotiates.
    npaths: AtomicU8,
    /// A probe ping was sent and no handshake frame came yet (C: `c_ping_triggered`).
    probing: AtomicBool,
    /// The peer numbers its client connections' source ports by path
    /// (`RDS_EXTHDR_SPORT_IDX`, C after 6.12: `c_with_sport_idx`).
    sport_idx: AtomicBool,
    /// The pong work is to send the probe ping (path 0 came up).
    probe_due: AtomicBool,
    /// The pong work is to start the paths (a handshake arrived in softirq context).
    start_due: AtomicBool,
}

/// A connection.
///
/// Lock order: `inner` is a leaf, except that a message's owner lock and its sender's `data`
/// lock are taken after it is released.
///
/// # Invariants
///
/// - Only the task that took `in_xmit` calls the transport's `xmit` for this connection or
///   changes `inner.cursor`, and it releases `in_xmit` when it stops; `send_gen` is bumped by
///   every drain, so a task that finds messages queued after another task's drain knows
///   whether that drain could have seen them (C's `RDS_IN_XMIT` / `cp_send_gen` protocol).
///   The shutdown work holds `in_xmit` while it resets the path.
/// - Once `destroyed` is set (under `inner`), nothing is queued on the connection again.
#[pin_data]
pub(crate) struct Conn {
    /// The identity of the connection.
    pub(crate) key: ConnKey,
    /// The core's shared state.
    pub(crate) shared: Arc<Shared>,
    /// The transport.
    pub(crate) transport: Arc<dyn Transport>,
    /// The transport's state of this connection (C: `cp_transport_data`); the transport gets
    /// it back by type with [`Conn::tstate`].
    pub(crate) tconn: Arc<dyn ConnTransport>,
    /// The congestion map of the remote address (C: `c_fcong`).
    pub(crate) fcong: CongRef,
    /// The congestion events of the namespace.
    pub(crate) netcong: Arc<NetCong>,
    /// Created by an arriving peer rather than by a local send.
    pub(crate) passive: bool,
    /// Multipath: the path's place among the connection's paths.
    paths: Paths,
    #[pin]
    inner: SpinLockBh<ConnInner>,
    /// The state ([`ConnState`]).
    state: AtomicU8,
    /// Held while a task drains the send queue or resets the path (C: `RDS_IN_XMIT`): a drain
    /// takes it or leaves the work to its owner, a shutdown waits for it.
    #[pin]
    in_xmit: Gate,
    /// Bumped by every drain (C: `cp_send_gen`).
    send_gen: AtomicU64,
    /// A drain found `in_xmit` taken: the holder drains once more after it lets go, whatever
    /// stopped it (a transport's kick that finds the drain busy must not be lost).
    xmit_again: AtomicBool,
    /// Set once the connection is removed from its table (reaped, namespace gone, unload).
    destroyed: AtomicBool,
    /// A reconnect is scheduled (C: `RDS_RECONNECT_PENDING`).
    reconnect_pending: AtomicBool,
    /// A congestion-map update is due (C: `c_map_queued`).
    map_queued: AtomicBool,
    /// What the peer is owed in acknowledgements; `received` and `reset` under `inner`, so
    /// that piggybacking an ack takes no lock.
    acks: AtomicAckState,
    /// Every message on the retransmit list has a sequence number above this (written under
    /// `inner`): an ack up to it settles nothing, and is handled without the lock.
    acked: AtomicU64,
    /// `inner.settled` may hold messages (set after they were added).
    settled_pending: AtomicBool,
    /// At least the number of messages on the send queue (raised under `inner` before a
    /// message is visible there, lowered after one left), so that a drain can tell without
    /// the lock that nothing is queued. Raised with `SeqCst`, which pairs with `in_xmit`.
    queued: AtomicUsize,
    /// Set when the last drain stopped on a shortage, so the send work pauses first.
    backoff: AtomicBool,
    /// Bumped by every reset: frames a transport sent before it are stale.
    epoch: AtomicU64,
    /// When (jiffies) the connection last started connecting (see [`ConnTable::stuck`]).
    connect_started: AtomicU64,
    /// Whether the connection was ever up: a peer may then hold sequence numbers of its
    /// (see [`ConnTable::reap`]).
    was_up: AtomicBool,
    /// Serialises shutdowns (the work and `destroy`).
    #[pin]
    down_lock: Mutex<()>,
    #[pin]
    send_work: Work<Conn, 0>,
    #[pin]
    down_work: Work<Conn, 1>,
    #[pin]
    pong_work: Work<Conn, 2>,
    #[pin]
    connect_work: DelayedWork<Conn>,
    /// Counts the connection in [`live`].
    _live: Live,
}

impl_work_item!(Conn, 0, send_work, Conn::send_worker);
impl_work_item!(Conn, 1, down_work, Conn::down_worker);
impl_work_item!(Conn, 2, pong_work, Conn::pong_worker);
impl_delayed_work_item!(Conn, connect_work, Conn::connect_work);

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drain {
    /// The queue is empty (as far as this drain could tell).
    Empty,
    /// Another task is draining.
    Busy,
    /// A batch was sent and more is queued.
    OverBatch,
    /// The transport is full; it kicks the connection when room appears.
    Full,
    /// The transport could not take a message now (memory).
    Shortage,
    /// The transport holds messages back (a test hook).
    Held,
    /// The connection is not up, or destroyed.
    NotUp,
}

impl Conn {
    fn new(
        key: ConnKey,
        shared: Arc<Shared>,
        transport: Arc<dyn Transport>,
        tconn: Arc<dyn ConnTransport>,
        fcong: CongRef,
        netcong: Arc<NetCong>,
        passive: bool,
        base: Option<Arc<Conn>>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Conn {
                key,
                shared,
                transport,
                tconn,
                fcong,
                netcong,
                passive,
                paths: Paths {
                    mp: transport.mp_capable(),
                    base,
                    npaths: AtomicU8::new(0),
                    probing: AtomicBool::new(false),
                    sport_idx: AtomicBool::new(false),
                    probe_due: AtomicBool::new(false),
                    start_due: AtomicBool::new(false),
                },
                inner <- new_spinlock_bh!(
                    ConnInner {
                        send_queue: List::new(),
                        retrans: List::new(),
                        cursor: None,
                        tx: TxSeq::new(),
                        rx: if transport.refuses_replays() {
                            RxSeq::per_incarnation()
                        } else {
                            RxSeq::new()
                        },
                        pacer: AckPacer::new(sys::max_unacked_packets(), sys::max_unacked_bytes()),
                        backoff: Backoff::default(),
                        last_used: sys::jiffies(),
                        pongs: [0; PONGS_MAX],
                        npongs: 0,
                        settled: SpareStack::new(),
                    },
                    "Conn::inner"
                ),
                state: AtomicU8::new(ConnState::Down as u8),
                in_xmit <- Gate::new(c_str!("Conn::in_xmit"), static_lock_class!()),
                send_gen: AtomicU64::new(0),
                xmit_again: AtomicBool::new(false),
                destroyed: AtomicBool::new(false),
                reconnect_pending: AtomicBool::new(false),
                map_queued: AtomicBool::new(false),
                acks: AtomicAckState::default(),
                acked: AtomicU64::new(0),
                settled_pending: AtomicBool::new(false),
                queued: AtomicUsize::new(0),
                backoff: AtomicBool::new(false),
                epoch: AtomicU64::new(0),
                connect_started: AtomicU64::new(0),
                was_up: AtomicBool::new(false),
                down_lock <- new_mutex!((), "Conn::down_lock"),
                send_work <- new_process_work!("Conn::send_work"),
                down_work <- new_process_work!("Conn::down_work"),
                pong_work <- new_process_work!("Conn::pong_work"),
                connect_work <- DelayedWork::new(),
                _live: Live::new(),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// The transport's state of this connection as the type `T` the transport made it (in
    /// [`Transport::conn_alloc`]); `None` for a connection of a transport whose state is of
    /// another type.
    pub(crate) fn tstate<T: ConnTransport>(&self) -> Option<&T> {
        let any: &dyn core::any::Any = &*self.tconn;
        any.downcast_ref()
    }

    /// The send work (C: `rds_send_worker`).
    fn send_worker(this: Arc<Conn>, ctx: &ProcessCtx) {
        stats::inc(Stat::SendDelayedRetry);
        if this.backoff.swap(false, Ordering::AcqRel) {
            // The last attempt ran out of memory: give reclaim a moment.
            sys::sleep_ms(1, ctx);
        }
        this.xmit(ctx);
    }

    /// The shutdown work (C: `rds_shutdown_worker`).
    fn down_worker(this: Arc<Conn>, ctx: &ProcessCtx) {
        this.shutdown(ctx);
    }

    /// Answers the pings that arrived in softirq context.
    fn pong_worker(this: Arc<Conn>, ctx: &ProcessCtx) {
        loop {
            let port = {
                let mut inner = this.inner.lock();
                if inner.npongs == 0 {
                    break;
                }
                inner.npongs -= 1;
                let i = inner.npongs;
                inner.pongs.get(i).copied().unwrap_or(0)
            };
            crate::recv::answer_ping(&this, port, ctx);
        }
        if this.paths.probe_due.swap(false, Ordering::AcqRel) {
            this.probe(ctx);
        }
        if this.paths.start_due.swap(false, Ordering::AcqRel) {
            this.paths_known(ctx);
        }
    }

    // --- multipath -------------------------------------------------------------------------

    /// Whether the connection's transport has multipath.
    pub(crate) fn mp(&self) -> bool {
        self.paths.mp
    }

    /// Path 0 of the connection (itself for path 0).
    pub(crate) fn base(&self) -> &Conn {
        self.paths.base.as_deref().unwrap_or(self)
    }

    /// [`Conn::base`], counted.
    pub(crate) fn base_arc(self: &Arc<Self>) -> Arc<Conn> {
        self.paths.base.clone().unwrap_or_else(|| self.clone())
    }

    /// The negotiated path count: 0 before the handshake (C: `c_npaths`).
    pub(crate) fn npaths(&self) -> u32 {
        u32::from(self.base().paths.npaths.load(Ordering::Acquire))
    }

    /// Whether the peer's client connections carry their path in their source port (see
    /// [`crate::proto::path_port`]), as the handshake said.
    pub(crate) fn peer_sport_idx(&self) -> bool {
        self.base().paths.sport_idx.load(Ordering::Acquire)
    }

    /// Whether the caller is to send the probe ping: true for one caller until a handshake
    /// frame arrives (C: `c_ping_triggered`).
    pub(crate) fn claim_probe(&self) -> bool {
        !self.base().paths.probing.swap(true, Ordering::AcqRel)
    }

    /// Gives up the claim of [`Conn::claim_probe`]: the probe could not be sent.
    pub(crate) fn release_probe(&self) {
        self.base().paths.probing.store(false, Ordering::Release);
    }

    /// A handshake frame (the probe ping or its pong) with header `hdr` arrived on this path
    /// (C: `rds_recv_hs_exthdrs` and `rds_start_mprds`, any context): the path count is
    /// what the peer offers, at most [`crate::proto::MPATH_MAX`] (1 if it offers nothing), senders waiting
    /// for it are woken, and the paths are started (in process context: the pong work's, if
    /// this is softirq context).
    pub(crate) fn handshake(self: &Arc<Self>, hdr: &Header, rx: RxCtx<'_>) {
        let base = self.base_arc();
        let (n, sport_idx) = hs_exts(hdr, u32::from(base.paths.npaths.load(Ordering::Acquire)));
        // Only a frame that offers a path count says how the peer numbers its ports (a user's
        // ping from port 1 says nothing).
        if let Some(sport_idx) = sport_idx {
            base.paths.sport_idx.store(sport_idx, Ordering::Release);
        }
        // `hs_npaths` is at most `MPATH_MAX`.
        base.paths
            .npaths
            .store(u8::try_from(n).unwrap_or(1), Ordering::Release);
        base.paths.probing.store(false, Ordering::Release);
        WaitQueue::congestion().wake_all();
        match rx {
            RxCtx::Process(ctx) => base.paths_known(ctx),
            RxCtx::Atomic => base.later(&base.paths.start_due),
        }
    }

    /// Sends the probe ping on path 0 unless one is out (process context).
    fn probe(self: &Arc<Self>, ctx: &ProcessCtx) {
        // A congested or gone peer gets no probe; a send or the next connect tries again.
        if self.claim_probe() && crate::send::send_probe(self, ctx).is_err() {
            self.release_probe();
        }
    }

    /// The handshake gave path 0 its count (process context): the paths are started, and the
    /// transport may set them straight.
    fn paths_known(self: &Arc<Self>, ctx: &ProcessCtx) {
        self.start_paths(ctx);
        self.tconn.paths_known(self, ctx);
    }

    /// Asks the pong work for what `flag` says (any context).
    fn later(self: &Arc<Self>, flag: &AtomicBool) {
        flag.store(true, Ordering::Release);
        if !self.is_destroyed() {
            Work::<Conn, 2>::queue(&self.shared.wq, self.clone());
        }
    }

    /// Connects every path of path 0's connection when there are several and this end is
    /// the one that connects them, the smaller address (C: `rds_start_mprds`).
    pub(crate) fn start_paths(self: &Arc<Self>, ctx: &ProcessCtx) {
        let n = self.npaths();
        if n <= 1 || !tcp_connects(&self.key.laddr, &self.key.faddr) {
            return;
        }
        for i in 0..n {
            let Ok(i) = u8::try_from(i) else { break };
            match self.shared.conns.path(self, i, false, ctx) {
                Ok(c) => c.connect_if_down(ctx),
                Err(_) => break,
            }
        }
    }

    // --- state ---------------------------------------------------------------------------

    /// The state.
    pub(crate) fn state(&self) -> ConnState {
        ConnState::from_u8(self.state.load(Ordering::Acquire)).unwrap_or(ConnState::Error)
    }

    /// Moves from `from` to `to` if the connection is in `from` (C:
    /// `rds_conn_path_transition`).
    fn transition(&self, from: ConnState, to: ConnState) -> bool {
        debug_assert!(from.may_become(to));
        self.state
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Whether the connection has been destroyed.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::Acquire)
    }

    /// The number of resets so far: frames sent before the current one are stale.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The `RDS_INFO_CONNECTION_FLAG_*` bits of the connection's state.
    pub(crate) fn info_flags(&self) -> u8 {
        self.state().info_flags(self.in_xmit.is_taken())
    }

    /// Connects now if the connection is down and no reconnect is scheduled (C:
    /// `rds_conn_path_connect_if_down`, called from `sendmsg`).
    pub(crate) fn connect_if_down(self: &Arc<Self>, ctx: &ProcessCtx) {
        if self.state() == ConnState::Down && !self.reconnect_pending.load(Ordering::Acquire) {
            self.start_connect(ctx);
        }
    }

    /// The delayed connect work (C: `rds_connect_worker`).
    fn connect_work(this: Arc<Self>, ctx: &ProcessCtx) {
        this.reconnect_pending.store(false, Ordering::Release);
        this.start_connect(ctx);
    }

    /// Whether the connection waits for its peer to connect it.
    fn waits_for_peer(&self) -> bool {
        self.passive && !self.transport.reconnects_passive()
    }

    fn start_connect(self: &Arc<Self>, ctx: &ProcessCtx) {
        if self.is_destroyed() || self.waits_for_peer() {
            return;
        }
        // A path above 0 connects only once the handshake gave several (C:
        // `rds_tcp_conn_path_connect`'s `-EAGAIN`).
        if self.key.path > 0 && self.npaths() < 2 {
            return;
        }
        if !self.transition(ConnState::Down, ConnState::Connecting) {
            return;
        }
        self.connect_started
            .store(sys::jiffies(), Ordering::Release);
        if self.tconn.connect(self, ctx).is_err() {
            if self.transition(ConnState::Connecting, ConnState::Down) {
                self.queue_reconnect();
            } else {
                self.drop_connection();
            }
        }
    }

    /// For a transport accepting a connection from the peer (C: the passive side of the
    /// handshake): claims a down connection for connecting; false when it is busy.
    pub(crate) fn try_accept(&self) -> bool {
        let claimed = self.transition(ConnState::Down, ConnState::Connecting);
        if claimed {
            self.connect_started
                .store(sys::jiffies(), Ordering::Release);
        }
        claimed
    }

    /// The transport completed a connect (any context; C: `rds_connect_path_complete`): the
    /// connection is up, its congestion map is queued for the peer, and sending resumes.
    pub(crate) fn connect_complete(self: &Arc<Self>) {
        if !self.transition(ConnState::Connecting, ConnState::Up) {
            self.drop_connection();
            return;
        }
        self.was_up.store(true, Ordering::Release);
        {
            let mut inner = self.inner.lock();
            inner.backoff.reset();
            inner.last_used = sys::jiffies();
        }
        self.map_queued
            .store(self.transport.sends_cong_maps(), Ordering::Release);
        self.kick();
        // Multipath: path 0 up: the probe ping goes at once, from either end (C sends it from
        // a send that needs a path above 0, and from the accepting end), so that the paths are
        // negotiated (and a peer's messages on them reach this end) whatever this end's
        // sockets hash to; and at every reconnect, as C does after 6.12, since a peer that
        // restarted has forgotten the count.
        if self.mp() && self.key.path == 0 {
            self.later(&self.paths.probe_due);
        }
    }

    /// Drops the connection (any context; C: `rds_conn_path_drop`): it goes to `Error` and
    /// the shutdown work takes it down and reconnects.
    pub(crate) fn drop_connection(self: &Arc<Self>) {
        loop {
            let st = self.state();
            let to = match st {
                ConnState::Up | ConnState::Connecting | ConnState::Disconnecting => {
                    ConnState::Error
                }
                _ => break,
            };
            if self.transition(st, to) {
                break;
            }
        }
        if self.is_destroyed() {
            return;
        }
        Work::<Conn, 1>::queue(&self.shared.wq, self.clone());
    }

    fn queue_reconnect(self: &Arc<Self>) {
        if self.is_destroyed() || self.waits_for_peer() {
            return;
        }
        let (min, max) = sys::reconnect_delays();
        let delay = self.inner.lock().backoff.next_delay(
            min,
            max,
            u64::from(crate::bindings::mm::random_u32()),
        );
        self.reconnect_pending.store(true, Ordering::Release);
        if !DelayedWork::queue(&self.shared.wq, self.clone(), delay) {
            // Already scheduled.
        }
    }

    /// Takes the connection down and, unless it was destroyed, schedules a reconnect (C:
    /// `rds_conn_shutdown`).
    pub(crate) fn shutdown(self: &Arc<Self>, ctx: &ProcessCtx) {
        let _serial = self.down_lock.lock();
        if self.state() != ConnState::Down {
            let started = self.transition(ConnState::Up, ConnState::Disconnecting)
                || self.transition(ConnState::Error, ConnState::Disconnecting)
                || self.transition(ConnState::Connecting, ConnState::Disconnecting);
            if !started {
                return;
            }
            self.in_xmit.take(ctx);
            self.tconn.shutdown(self, ctx);
            self.reset_path();
            self.in_xmit.release();
            if !self.transition(ConnState::Disconnecting, ConnState::Down) {
                // Dropped again meanwhile: the queued pass finishes the job.
                return;
            }
        }
        // Over a network a connection with nothing to send waits for a sender (or the peer)
        // instead of reconnecting: a peer that closed an idle connection (its reaper) is not
        // called back at once, again and again. The paths of a multipath connection are
        // reconnected by the smaller address, as in C: the larger one does not connect a path
        // above 0 (C's never does), so its messages on the path wait for this end.
        if self.transport.loops_back() || self.has_work() || self.reconnects_paths() {
            self.queue_reconnect();
        }
    }

    /// Whether this end reconnects the path whatever it has to send: a path of a connection
    /// with several, at the smaller address.
    fn reconnects_paths(&self) -> bool {
        self.npaths() > 1 && tcp_connects(&self.key.laddr, &self.key.faddr)
    }

    /// Whether messages wait on the connection (queued, or requeued unacknowledged ones).
    fn has_work(&self) -> bool {
        self.queued.load(Ordering::Acquire) != 0 || !self.inner.lock().retrans.is_empty()
    }

    /// Resets the path after the transport stopped (C: `rds_conn_path_reset`,
    /// `rds_send_path_reset`): unacknowledged messages go back to the head of the send queue,
    /// marked `RETRANSMITTED` and `ACK_REQUIRED`, except those with an RDMA or atomic
    /// operation, which are dropped (`RDS_RDMA_DROPPED`). The caller holds `in_xmit`.
    fn reset_path(&self) {
        stats::inc(Stat::ConnReset);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let mut dropped = List::<Message>::new();
        {
            let mut inner = self.inner.lock();
            inner.cursor = None;
            // The transport's next incarnation may be a restarted peer's.
            inner.rx.begin_incarnation();
            self.map_queued.store(false, Ordering::Release);
            inner.pacer = AckPacer::new(sys::max_unacked_packets(), sys::max_unacked_bytes());
            self.acks.reset();
            let mut requeue = List::<Message>::new();
            while let Some(m) = inner.retrans.pop_front() {
                match on_reset(m.op.is_some()) {
                    OnReset::Retransmit => {
                        m.add_flags(FLAG_RETRANSMITTED | FLAG_ACK_REQUIRED);
                        stats::inc(Stat::RsSendRetransmitted);
                        // INVARIANT: counted before it is on the queue.
                        self.queued.fetch_add(1, Ordering::SeqCst);
                        requeue.push_back(m);
                    }
                    OnReset::Drop => dropped.push_back(m),
                }
            }
            while let Some(m) = inner.send_queue.pop_front() {
                requeue.push_back(m);
            }
            inner.send_queue = requeue;
        }
        while let Some(m) = dropped.pop_front() {
            // Counted when the operation is reported dropped: one the transport performed
            // (and reported) before the reset only missed its ack, and is not sent again
            // either.
            if send::complete(&m, RDS_RDMA_DROPPED) {
                stats::inc(Stat::RsSendOpDropped);
            }
        }
    }

    /// Destroys the connection (process context): nothing is queued on it again, the
    /// transport is shut down, and queued and unacknowledged messages are dropped and their
    /// senders released (C: `rds_conn_destroy`).
    fn destroy(self: &Arc<Self>, ctx: &ProcessCtx) {
        let mut dropped = List::<Message>::new();
        {
            let mut inner = self.inner.lock();
            self.destroyed.store(true, Ordering::Release);
            // Senders waiting for its handshake see it gone.
            WaitQueue::congestion().wake_all();
            while let Some(m) = inner.send_queue.pop_front() {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                dropped.push_back(m);
            }
            while let Some(m) = inner.retrans.pop_front() {
                dropped.push_back(m);
            }
        }
        DelayedWork::cancel(self, ctx);
        {
            let _serial = self.down_lock.lock();
            self.in_xmit.take(ctx);
            self.tconn.shutdown(self, ctx);
            {
                let mut inner = self.inner.lock();
                inner.cursor = None;
                while let Some(m) = inner.send_queue.pop_front() {
                    self.queued.fetch_sub(1, Ordering::Relaxed);
                    dropped.push_back(m);
                }
                while let Some(m) = inner.retrans.pop_front() {
                    dropped.push_back(m);
                }
            }
            self.state.store(ConnState::Down as u8, Ordering::Release);
            self.in_xmit.release();
        }
        while let Some(m) = dropped.pop_front() {
            send::complete(&m, RDS_RDMA_DROPPED);
        }
    }

    // --- sending ---------------------------------------------------------------------------

    /// Appends a message, giving it the next sequence number. A destroyed connection takes
    /// nothing: the message comes back.
    pub(crate) fn enqueue(
        &self,
        msg: ListArc<Message>,
    ) -> core::result::Result<(), ListArc<Message>> {
        let mut inner = self.inner.lock();
        // `destroyed` is set under this lock, so no message is queued after the queue was
        // emptied.
        if self.is_destroyed() {
            return Err(msg);
        }
        msg.set_seq(inner.tx.take());
        // INVARIANT: counted before it is on the queue; `SeqCst` orders it before this task's
        // look at `in_xmit` (see `drain`).
        self.queued.fetch_add(1, Ordering::SeqCst);
        inner.send_queue.push_back(msg);
        inner.last_used = sys::jiffies();
        Ok(())
    }

    /// Queues the connection's send work (any context).
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.is_destroyed() {
            return;
        }
        // Already queued is fine: the pending run will see the new messages.
        Work::<Conn, 0>::queue(&self.shared.wq, self.clone());
    }

    /// Drains the send queue now if no other task does; otherwise, or if more remains than
    /// one batch, leaves it to the send work.
    pub(crate) fn xmit(self: &Arc<Self>, ctx: &ProcessCtx) {
        match self.drain(ctx) {
            Drain::Empty | Drain::NotUp | Drain::Held | Drain::Full => {}
            Drain::Busy => {
                // The draining task re-checks the queue after it lets go (see `drain`).
            }
            Drain::OverBatch => self.kick(),
            Drain::Shortage => {
                stats::inc(Stat::SendImmediateRetry);
                self.backoff.store(true, Ordering::Release);
                self.kick();
            }
        }
    }

    /// The next message to hand to the transport, moved to the retransmit list (C: the head
    /// of `rds_send_xmit`'s loop); `None` when the queue is empty. On a lossless connection a
    /// plain message goes on no list: the drain delivers it.
    fn next_message(&self, inner: &mut ConnInner, lossless: bool) -> Option<Cursor> {
        let m = inner.send_queue.pop_front()?;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        if lossless && m.op.is_none() {
            return Some(Cursor {
                msg: m.into_arc(),
                progress: XmitProgress::default(),
                direct: true,
            });
        }
        if !m.retransmitted() {
            let (max_p, max_b) = (sys::max_unacked_packets(), sys::max_unacked_bytes());
            if inner.pacer.on_send(m.len, max_p, max_b) {
                m.set_ack_required();
                stats::inc(Stat::SendAckRequired);
            }
        }
        let msg = m.clone_arc();
        // INVARIANT: a retransmission may have a sequence number an earlier ack covered.
        if m.seq() <= self.acked.load(Ordering::Relaxed) {
            self.acked
                .store(m.seq().saturating_sub(1), Ordering::Release);
        }
        // A stream transport marks where the message ends when it starts sending it.
        m.clear_tx_mark();
        inner.retrans.push_back(m);
        Some(Cursor {
            msg,
            progress: XmitProgress::default(),
            direct: false,
        })
    }

    /// What the drain sends next (the head of `rds_send_xmit`'s loop), in this order: the
    /// message in transmission, a congestion-map update, the next queued message (counted in
    /// `batch`). `Err` says why there is nothing: the batch is used up, the transport holds
    /// messages back, or the queue is empty. One lock of the connection in the common case,
    /// none when `no_cursor` (the caller knows there is no message in transmission) and
    /// nothing is queued.
    fn next_cursor(&self, batch: &mut u32, no_cursor: bool) -> core::result::Result<Cursor, Drain> {
        let ready = self.tconn.xmit_ready();
        let lossless = self.tconn.lossless();
        let map_due = self.map_queued.load(Ordering::Acquire);
        if no_cursor && !map_due && self.queued.load(Ordering::Acquire) == 0 {
            // Nothing in transmission (the caller sent it all), nothing queued.
            return Err(Drain::Empty);
        }
        {
            let mut inner = self.inner.lock();
            if let Some(c) = inner.cursor.take() {
                return Ok(c);
            }
            if *batch >= SEND_BATCH {
                return Err(Drain::OverBatch);
            }
            if !map_due {
                if !ready {
                    return Err(Drain::Held);
                }
                let next = self.next_message(&mut inner, lossless).ok_or(Drain::Empty);
                *batch += u32::from(next.is_ok());
                return next;
            }
        }
        match self.take_map_update() {
            Some(Ok(c)) => return Ok(c),
            // Still due; the drain backs off and tries again instead of spinning.
            Some(Err(())) => return Err(Drain::Shortage),
            None => {}
        }
        if !ready {
            return Err(Drain::Held);
        }
        let next = self
            .next_message(&mut self.inner.lock(), lossless)
            .ok_or(Drain::Empty);
        *batch += u32::from(next.is_ok());
        next
    }

    /// A congestion-map update for the peer, if one is due (C: `c_map_queued`).
    /// `Some(Err(()))` when building it failed (out of memory): it stays due.
    fn take_map_update(&self) -> Option<core::result::Result<Cursor, ()>> {
        if !self.map_queued.swap(false, Ordering::AcqRel) {
            return None;
        }
        stats::inc(Stat::CongUpdateQueued);
        match self
            .shared
            .cong
            .update_message(self.key.net, self.key.laddr, self.key.faddr)
        {
            Ok(m) => Some(Ok(Cursor {
                msg: m.into_arc(),
                progress: XmitProgress::default(),
                direct: false,
            })),
            Err(_) => {
                self.map_queued.store(true, Ordering::Release);
                Some(Err(()))
            }
        }
    }

    /// The transmit loop (C: `rds_send_xmit`).
    fn drain(self: &Arc<Self>, ctx: &ProcessCtx) -> Drain {
        self.recycle_settled(ctx);
        loop {
            // `SeqCst`: a sender's `queued` increment comes before this in the single total
            // order, or this drain's release of `in_xmit` does and the sender drains itself.
            if !self.in_xmit.try_take() {
                // Leave word for the holder; if it let go before seeing it, try again.
                self.xmit_again.store(true, Ordering::SeqCst);
                if self.in_xmit.is_taken() {
                    stats::inc(Stat::SendLockContention);
                    return Drain::Busy;
                }
                continue;
            }
            if self.is_destroyed() || self.state() != ConnState::Up {
                self.in_xmit.release();
                return Drain::NotUp;
            }
            let gen = self.send_gen.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
            let mut batch = 0;
            // A message in transmission is left only by a drain that stopped; after a message
            // went out whole there is none.
            let mut no_cursor = false;
            let end = loop {
                let mut cursor = match self.next_cursor(&mut batch, no_cursor) {
                    Ok(c) => c,
                    Err(e) => break e,
                };
                if cursor.direct {
                    self.deliver_direct(cursor.msg, ctx);
                } else if let Err(e) = self
                    .tconn
                    .xmit(self, &cursor.msg, &mut cursor.progress, ctx)
                {
                    self.inner.lock().cursor = Some(cursor);
                    break match e {
                        XmitError::Full => Drain::Full,
                        XmitError::NoMem => Drain::Shortage,
                    };
                }
                if self.state() != ConnState::Up {
                    break Drain::NotUp;
                }
                no_cursor = true;
            };
            self.tconn.xmit_complete(self, ctx);
            self.in_xmit.release();
            // A kick that came while this drain held `in_xmit` (room or credits the transport
            // found after this drain was told there were none): drain again.
            if self.xmit_again.swap(false, Ordering::SeqCst)
                && matches!(end, Drain::Full | Drain::Empty | Drain::Held)
            {
                continue;
            }
            if end != Drain::Empty {
                return end;
            }
            // A sender may have queued after our last look but before we let go; it backed
            // off on seeing us draining, so look again unless someone drained since.
            fence(Ordering::SeqCst);
            let raced = self.send_gen.load(Ordering::Acquire) != gen;
            if raced {
                stats::inc(Stat::SendLockQueueRaced);
                return Drain::Empty;
            }
            let more =
                self.map_queued.load(Ordering::Acquire) || self.queued.load(Ordering::SeqCst) != 0;
            if !more {
                return Drain::Empty;
            }
        }
    }

    /// Sends a plain message at once on a lossless connection ([`ConnTransport::lossless`])
    /// when nothing is ahead of it: no other task draining, nothing queued, unacknowledged or
    /// in transmission. It gets the next sequence number and is delivered before this returns
    /// (C's loopback, `rds_loop_xmit`, minus the queue, the header and the ack); the sender is
    /// not charged for it, as it is never outstanding. Otherwise the message comes back, for
    /// the caller to queue.
    pub(crate) fn send_now(
        self: &Arc<Self>,
        m: Pin<UniqueArc<Message>>,
        ctx: &ProcessCtx,
    ) -> core::result::Result<(), Pin<UniqueArc<Message>>> {
        if !self.tconn.lossless() || !self.tconn.xmit_ready() || !self.in_xmit.try_take() {
            return Err(m);
        }
        let seq = if self.state() == ConnState::Up {
            let mut inner = self.inner.lock();
            if self.is_destroyed()
                || self.queued.load(Ordering::Relaxed) != 0
                || self.map_queued.load(Ordering::Relaxed)
                || inner.cursor.is_some()
                || !inner.retrans.is_empty()
            {
                None
            } else {
                let seq = inner.tx.take();
                // Loopback receives its own numbers in order: always accepted (C's rule).
                let _ = inner.rx.check(seq, false);
                inner.last_used = sys::jiffies();
                Some(seq)
            }
        } else {
            None
        };
        let Some(seq) = seq else {
            self.release_xmit(ctx);
            return Err(m);
        };
        m.set_seq(seq);
        crate::recv::deliver(self, ListArc::from(m), RxCtx::Process(ctx));
        self.release_xmit(ctx);
        Ok(())
    }

    /// Lets go of `in_xmit` after [`Conn::send_now`], draining if a sender queued a message
    /// meanwhile and left it to us.
    fn release_xmit(self: &Arc<Self>, ctx: &ProcessCtx) {
        self.in_xmit.release();
        if self.xmit_again.swap(false, Ordering::SeqCst) || self.queued.load(Ordering::SeqCst) != 0
        {
            self.xmit(ctx);
        }
    }

    /// Delivers a message the drain took off the send queue of a lossless connection: it is
    /// settled with its sender, then handed to the receiving side, unless it is a
    /// retransmission of a message delivered before (sent before a reset, while the connection
    /// was not lossless).
    fn deliver_direct(self: &Arc<Self>, m: Arc<Message>, ctx: &ProcessCtx) {
        let check = {
            let mut inner = self.inner.lock();
            inner.last_used = sys::jiffies();
            inner.rx.check(m.seq(), m.retransmitted())
        };
        send::complete(&m, RDS_RDMA_SUCCESS);
        if !crate::recv::seq_admits(check) {
            return;
        }
        if let Ok(m) = ListArc::<Message, 1>::try_from_arc(m) {
            crate::recv::deliver(self, m, RxCtx::Process(ctx));
        }
    }

    /// Queues a congestion-map update for the peer (C: `rds_cong_queue_updates`), when the
    /// transport carries them.
    pub(crate) fn queue_map_update(self: &Arc<Self>) {
        if !self.transport.sends_cong_maps() {
            return;
        }
        if !self.map_queued.swap(true, Ordering::AcqRel) {
            self.kick();
        }
    }

    // --- acknowledgements and receiving ------------------------------------------------------

    /// The peer acknowledged everything up to `ack` (any context; C: `rds_send_drop_acked`):
    /// those messages leave the retransmit list and are settled with their senders.
    pub(crate) fn ack_received(&self, ack: u64) {
        if ack <= self.acked.load(Ordering::Acquire) {
            // Nothing on the retransmit list is that old (the invariant of `acked`).
            return;
        }
        self.settle_acked(self.take_acked(ack));
    }

    /// Settles the messages at the front of the retransmit list for which `acked` holds (any
    /// context): a stream transport's acknowledgement, which covers a prefix of what it sent
    /// (C: `rds_send_path_drop_acked` with the transport's `is_acked`).
    pub(crate) fn settle_sent(&self, acked: impl Fn(&Message) -> bool) {
        let mut out = List::<Message>::new();
        {
            let mut inner = self.inner.lock();
            let mut last = None;
            loop {
                let covered = inner
                    .retrans
                    .cursor_front()
                    .is_some_and(|c| acked(&c.current()));
                if !covered {
                    break;
                }
                match inner.retrans.pop_front() {
                    Some(m) => {
                        last = Some(m.seq());
                        out.push_back(m);
                    }
                    None => break,
                }
            }
            // INVARIANT: the list is in sequence order; what is left is above the last one
            // taken.
            if let Some(seq) = last {
                if seq > self.acked.load(Ordering::Relaxed) {
                    self.acked.store(seq, Ordering::Release);
                }
            }
        }
        self.settle_acked(out);
    }

    /// Settles the messages an ack took off the retransmit list with their senders (no lock
    /// held), and keeps those whose memory their senders' pools may take again for the next
    /// transmit ([`Conn::recycle_settled`]); the others are freed when their last user is
    /// done with them.
    fn settle_acked(&self, mut acked: List<Message>) {
        while let Some(m) = acked.pop_front() {
            send::complete(&m, RDS_RDMA_SUCCESS);
            // What is not kept is dropped here, outside the lock.
            drop(self.recycle_later(m.into_arc()));
        }
    }

    /// Keeps `msg`, a sent message that its ack settled or its transport is done with, for the
    /// next transmit to give back to its sender's pool (any context); returns it when there is
    /// no room, it is too large to be worth keeping or it is a zero-copy send's, for the caller
    /// to drop (outside any lock of the caller's).
    pub(crate) fn recycle_later(&self, msg: Arc<Message>) -> Option<Arc<Message>> {
        // A zero-copy message is not kept: its sender learns from its end that the kernel is
        // done with its pages (`crate::send::ZcDone`), which must not wait for another send.
        if msg.len as usize > POOL_BUF_MAX || msg.data.is_zcopy() {
            return Some(msg);
        }
        if let Err(msg) = self.inner.lock().settled.push(msg) {
            return Some(msg);
        }
        self.settled_pending.store(true, Ordering::Release);
        None
    }

    /// Gives the messages kept by [`Conn::recycle_later`] back to their senders' pools (at
    /// the start of a transmit, in process context): each one whose last reference this is.
    fn recycle_settled(&self, ctx: &ProcessCtx) {
        if !self.settled_pending.swap(false, Ordering::AcqRel) {
            return;
        }
        loop {
            let m = self.inner.lock().settled.pop();
            match m {
                Some(m) => Message::recycle_sent(m, ctx),
                None => break,
            }
        }
    }

    /// What `ack` covers, taken off the retransmit list.
    fn take_acked(&self, ack: u64) -> List<Message> {
        let mut acked = List::<Message>::new();
        self.take_acked_locked(&mut self.inner.lock(), ack, &mut acked);
        acked
    }

    /// Moves what `ack` covers from the retransmit list to `out`, if anything.
    fn take_acked_locked(&self, inner: &mut ConnInner, ack: u64, out: &mut List<Message>) {
        if ack <= self.acked.load(Ordering::Relaxed) {
            return;
        }
        // INVARIANT: what the ack covers leaves the (ordered) list below; the rest is above
        // `ack`.
        self.acked.store(ack, Ordering::Release);
        loop {
            let covered = inner
                .retrans
                .cursor_front()
                .is_some_and(|c| crate::proto::is_acked(c.current().seq(), ack));
            if !covered {
                break;
            }
            match inner.retrans.pop_front() {
                Some(m) => out.push_back(m),
                None => break,
            }
        }
    }

    /// The receive side's sequence and ack bookkeeping of a data frame that arrived (C: the
    /// ack state of `rds_ib_process_recv`, then `rds_recv_incoming`'s sequence check).
    ///
    /// `ack` is the frame's `h_ack`, settled as [`Conn::ack_received`] does, under the same
    /// lock (0 for none).
    pub(crate) fn rx_data(&self, ack: u64, seq: u64, flags: u8) -> SeqCheck {
        let mut acked = List::<Message>::new();
        let verdict = self.rx_data_locked(&mut self.inner.lock(), ack, seq, flags, &mut acked);
        self.settle_acked(acked);
        verdict
    }

    fn rx_data_locked(
        &self,
        inner: &mut ConnInner,
        ack: u64,
        seq: u64,
        flags: u8,
        acked: &mut List<Message>,
    ) -> SeqCheck {
        self.take_acked_locked(inner, ack, acked);
        inner.last_used = sys::jiffies();
        self.acks.received(seq, flags & FLAG_ACK_REQUIRED != 0);
        if flags & FLAG_ACK_REQUIRED != 0 {
            stats::inc(Stat::RecvAckRequired);
        }
        inner.rx.check(seq, flags & FLAG_RETRANSMITTED != 0)
    }

    /// The value for `h_ack` of a frame being sent (C: `rds_ib_piggyb_ack`): the ack counts
    /// as sent.
    pub(crate) fn piggyback_ack(&self) -> u64 {
        self.acks.piggyback()
    }

    /// The source and destination addresses of the frames this connection receives (see
    /// [`crate::transport::Transport::loops_back`]).
    pub(crate) fn rx_addrs(&self) -> (Addr, Addr) {
        if self.transport.loops_back() {
            (self.key.laddr, self.key.faddr)
        } else {
            (self.key.faddr, self.key.laddr)
        }
    }

    /// Whether the peer asked for an ack (`RDS_FLAG_ACK_REQUIRED`) that was not sent yet.
    pub(crate) fn ack_requested(&self) -> bool {
        self.acks.due()
    }

    /// The last sequence number received, for an ack-only frame; the ack counts as sent.
    pub(crate) fn take_ack(&self) -> Option<u64> {
        self.acks.take()
    }

    /// Remembers a ping to answer from process context (the pong work).
    pub(crate) fn defer_pong(self: &Arc<Self>, port: u16) {
        let queued = {
            let mut inner = self.inner.lock();
            let n = inner.npongs;
            match inner.pongs.get_mut(n) {
                Some(slot) => {
                    *slot = port;
                    inner.npongs = n + 1;
                    true
                }
                None => false,
            }
        };
        if queued && !self.is_destroyed() {
            Work::<Conn, 2>::queue(&self.shared.wq, self.clone());
        }
    }

    // --- introspection and cancellation ------------------------------------------------------

    /// The next sequence numbers to send and expect.
    pub(crate) fn seqs(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        (inner.tx.next, inner.rx.next)
    }

    /// Puts the receive side's sequence state aside, for a transport that may find what it
    /// receives next to be another path's (see [`SavedRx`]).
    pub(crate) fn save_rx(&self) -> SavedRx {
        self.inner.lock().rx.save()
    }

    /// Gives back the receive side's sequence state saved with [`Conn::save_rx`]: what the
    /// path received since was another path's. The caller makes sure nothing else was
    /// received meanwhile (the TCP transport: only from the socket it has just closed).
    pub(crate) fn restore_rx(&self, saved: SavedRx) {
        self.inner.lock().rx.restore(saved);
    }

    /// Moves the receive side's expected sequence number up to what another path's
    /// connection reached on this path's numbers ([`crate::proto::RxSeq::absorb`]).
    pub(crate) fn absorb_rx(&self, reached: SavedRx) {
        self.inner.lock().rx.absorb(reached);
    }

    /// Calls `f` for each queued message until it fails (under the connection's lock: `f`
    /// must not sleep).
    pub(crate) fn try_for_each_queued(&self, mut f: impl FnMut(&Message) -> Result) -> Result {
        let inner = self.inner.lock();
        inner.send_queue.iter().try_for_each(|m| f(&m))
    }

    /// Calls `f` for each message on the retransmit list until it fails (under the
    /// connection's lock).
    pub(crate) fn try_for_each_retrans(&self, mut f: impl FnMut(&Message) -> Result) -> Result {
        let inner = self.inner.lock();
        inner.retrans.iter().try_for_each(|m| f(&m))
    }

    /// Removes the messages of the socket `owner_id` for which `pick` holds from the send
    /// queue and the retransmit list, in order, into `out` (C: the connection half of
    /// `rds_send_drop_to`).
    pub(crate) fn remove_queued(
        &self,
        owner_id: usize,
        pick: impl Fn(&Message) -> bool,
        out: &mut List<Message>,
    ) {
        let mut inner = self.inner.lock();
        for list in [0, 1] {
            let mut kept = List::new();
            let src = if list == 0 {
                &mut inner.send_queue
            } else {
                &mut inner.retrans
            };
            while let Some(m) = src.pop_front() {
                if m.owner_id == owner_id && pick(&m) {
                    if list == 0 {
                        self.queued.fetch_sub(1, Ordering::Relaxed);
                    }
                    out.push_back(m);
                } else {
                    kept.push_back(m);
                }
            }
            *src = kept;
        }
    }

    /// Whether the reaper may take the connection when it is idle (see [`ConnTable::reap`]).
    fn reapable(&self) -> bool {
        self.transport.loops_back()
            || !self.was_up.load(Ordering::Acquire)
            || self.state() == ConnState::Down
    }

    /// Whether the connection is idle since `before` (jiffies): nothing queued, nothing
    /// unacknowledged, nothing in transmission, not used since.
    fn idle_since(&self, before: u64) -> bool {
        if self.in_xmit.is_taken() {
            return false;
        }
        let inner = self.inner.lock();
        inner.send_queue.is_empty()
            && inner.retrans.is_empty()
            && inner.cursor.is_none()
            && inner.npongs == 0
            && (inner.last_used as i64).wrapping_sub(before as i64) < 0
    }
}

/// All connections.
///
/// Lock order: `conns` is a leaf (connections are built before it is taken).
#[pin_data]
pub(crate) struct ConnTable {
    #[pin]
    conns: Mutex<RBTree<ConnKey, Arc<Conn>>>,
    /// The sequence numbers reaped network connections left (see [`ConnTable::reap`]), at
    /// most [`SEQS_KEPT_MAX`]. Lock order: taken under `conns` or alone; a leaf.
    #[pin]
    seqs: Mutex<KeptSeqs>,
}

/// How many reaped connections' sequence numbers are kept (about 100 bytes each).
const SEQS_KEPT_MAX: usize = 4096;

/// The sequence numbers of reaped network connections, by key: `(next to send, next
/// expected)`.
struct KeptSeqs {
    map: RBTree<ConnKey, (u64, u64)>,
    len: usize,
}

impl ConnTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            conns <- new_mutex!(RBTree::new(), "ConnTable::conns"),
            seqs <- new_mutex!(KeptSeqs { map: RBTree::new(), len: 0 }, "ConnTable::seqs"),
        })
    }

    /// The connection for `key`, if there is one.
    pub(crate) fn find(&self, key: &ConnKey) -> Option<Arc<Conn>> {
        self.conns.lock().get(key).cloned()
    }

    fn create(
        &self,
        shared: &Arc<Shared>,
        key: ConnKey,
        transport: &Arc<dyn Transport>,
        passive: bool,
        base: Option<&Arc<Conn>>,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Conn>> {
        if let Some(c) = self.find(&key) {
            return Ok(c);
        }
        // C: `__rds_conn_create`: a transport that prefers loopback (TCP) reaches an address
        // of this host over loopback (a path above 0 has its base's transport).
        let lo;
        let transport = if base.is_none() && !passive && transport.prefers_loopback() && {
            let dest = crate::proto::SockAddr {
                addr: key.faddr,
                port: 0,
                scope_id: 0,
            };
            shared.transports.preferred(key.net, &dest, ctx).is_some()
        } {
            lo = shared
                .transports
                .by_kind(crate::proto::RDS_TRANS_LOOP)
                .ok_or(EINVAL)?;
            &lo
        } else {
            transport
        };
        let fcong = shared.cong.get(key.net, key.faddr)?;
        let netcong = shared.cong.net(key.net)?;
        let tconn = transport.as_arc_borrow().conn_alloc(&key, ctx)?;
        let conn = Conn::new(
            key,
            shared.clone(),
            transport.clone(),
            tconn,
            fcong,
            netcong,
            passive,
            base.cloned(),
        )?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        {
            let mut conns = self.conns.lock();
            if let Some(c) = conns.get(&key) {
                return Ok(c.clone());
            }
            // A path is made only while its path 0 is in the table: path 0 goes (reaped,
            // destroyed) only after its other paths (see `reap`), so every path of a
            // connection shares one path 0 and its path count.
            if let Some(b) = base {
                let base_key = ConnKey { path: 0, ..key };
                if !conns.get(&base_key).is_some_and(|c| Arc::ptr_eq(c, b)) {
                    return Err(crate::bindings::net::enotconn());
                }
            }
            // A connection to the same peer that was reaped left its sequence numbers: the
            // peer goes on from them (and retransmits what it sent before with them).
            let kept = {
                let mut seqs = self.seqs.lock();
                let kept = seqs.map.remove(&key);
                if kept.is_some() {
                    seqs.len -= 1;
                }
                kept
            };
            if let Some((tx, rx)) = kept {
                let mut inner = conn.inner.lock();
                inner.tx.next = tx;
                inner.rx.next = rx;
                stats::inc(Stat::RsConnSeqRestored);
            }
            conns.insert(node.into_node(key, conn.clone()));
        }
        Ok(conn)
    }

    /// The connection for `key`, created over `transport` if it does not exist yet, and
    /// connected if it is down (C: `rds_conn_create_outgoing` and
    /// `rds_conn_path_connect_if_down`).
    pub(crate) fn get(
        &self,
        shared: &Arc<Shared>,
        key: ConnKey,
        transport: &Arc<dyn Transport>,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Conn>> {
        let conn = self.create(shared, key, transport, false, None, ctx)?;
        conn.connect_if_down(ctx);
        Ok(conn)
    }

    /// Path `i` of the connection whose path 0 is `base` (`base` itself for 0), created if it
    /// does not exist yet (not connected); `passive` for a path a peer's connect request is
    /// for. Fails when `base` is no longer in the table.
    pub(crate) fn path(
        &self,
        base: &Arc<Conn>,
        i: u8,
        passive: bool,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Conn>> {
        if i == 0 {
            return Ok(base.clone());
        }
        let key = ConnKey {
            path: i,
            ..base.key
        };
        self.create(&base.shared, key, &base.transport, passive, Some(base), ctx)
    }

    /// The connection a peer's connect request is for, created if needed without connecting
    /// (C: `rds_conn_create` from a transport's accept path); the transport then claims it
    /// with [`Conn::try_accept`].
    pub(crate) fn get_passive(
        &self,
        shared: &Arc<Shared>,
        key: ConnKey,
        transport: &Arc<dyn Transport>,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Conn>> {
        self.create(shared, key, transport, true, None, ctx)
    }

    /// Calls `f` for every connection of `net` (under the table's mutex; `f` may take
    /// spinlocks).
    pub(crate) fn for_each(&self, net: NetId, mut f: impl FnMut(&Arc<Conn>)) {
        let _ = self.try_for_each(net, |c| {
            f(c);
            Ok(())
        });
    }

    /// [`ConnTable::for_each`] until `f` fails.
    pub(crate) fn try_for_each(
        &self,
        net: NetId,
        mut f: impl FnMut(&Arc<Conn>) -> Result,
    ) -> Result {
        let conns = self.conns.lock();
        let r = conns
            .values()
            .filter(|c| c.key.net == net)
            .try_for_each(|c| f(c));
        r
    }

    /// Removes and destroys the first connection for which `pick` holds; false when none.
    fn destroy_one(&self, ctx: &ProcessCtx, pick: impl FnMut(&Conn) -> bool) -> bool {
        match self.take_one(pick) {
            Some(c) => {
                c.destroy(ctx);
                true
            }
            None => false,
        }
    }

    /// Destroys the connection for `key`, if there is one (the test build's KUnit cases).
    #[cfg(rds_test)]
    pub(crate) fn destroy(&self, key: &ConnKey, ctx: &ProcessCtx) -> bool {
        self.destroy_one(ctx, |c| c.key == *key)
    }

    /// Destroys every connection of a namespace that went away.
    pub(crate) fn net_exit(&self, net: NetId, ctx: &ProcessCtx) {
        while self.destroy_one(ctx, |c| c.key.net == net) {}
        self.forget_seqs(net);
    }

    /// Drops every connection (the `reset` test hook): each is shut down and reconnects.
    #[cfg(rds_test)]
    pub(crate) fn reset_all(&self) {
        let conns = self.conns.lock();
        for c in conns.values() {
            c.drop_connection();
        }
    }

    /// Destroys every connection (module unload).
    pub(crate) fn destroy_all(&self, ctx: &ProcessCtx) {
        while self.destroy_one(ctx, |_| true) {}
    }

    /// Drops the connections that started connecting before `before` (jiffies) and are
    /// connecting still: a handshake whose last event never came (a request or reply lost
    /// with no error reported, two ends each waiting for the other) starts over instead of
    /// holding the connection for ever. Returns how many.
    pub(crate) fn stuck(&self, before: u64) -> usize {
        let mut stuck = KVec::new();
        {
            let conns = self.conns.lock();
            for c in conns.values() {
                let started = c.connect_started.load(Ordering::Acquire);
                if c.state() == ConnState::Connecting
                    && (started as i64).wrapping_sub(before as i64) < 0
                    && stuck.push(c.clone(), GFP_ATOMIC).is_err()
                {
                    break;
                }
            }
        }
        for c in &stuck {
            stats::inc(Stat::RsConnConnectTimeout);
            c.drop_connection();
        }
        stuck.len()
    }

    /// Reaps the connections idle since `before` (jiffies); returns how many went.
    ///
    /// Over a network only connections that are down go, or that never came up (a sender
    /// to many addresses that answer nothing holds no memory for long): a connection that
    /// is up stays while its peer does, as in C, because the peer may be reading or writing
    /// memory registered at this end over it (RDMA the device serves) with no message on it
    /// for any length of time. Loopback connections go when idle.
    ///
    /// A reaped connection over a network that was up and carried messages leaves its
    /// sequence numbers behind, for the next connection to the same peer: the peer (C keeps
    /// its connections for ever) goes on numbering where it was, and after its reconnect
    /// retransmits, marked `RETRANSMITTED`, what it sent and saw no ack for. A fresh
    /// connection would take those again, delivering messages twice; one that numbered its
    /// own messages from 1 again would have its retransmissions dropped by the peer as old.
    /// Loopback has no peer to remember it.
    pub(crate) fn reap(&self, before: u64, ctx: &ProcessCtx) -> usize {
        let mut n = 0;
        while let Some(c) = self.take_reapable(before) {
            c.destroy(ctx);
            stats::inc(Stat::RsConnReaped);
            self.keep_seqs(&c);
            n += 1;
        }
        n
    }

    /// Takes the first connection the reaper may take out of the table: reapable, idle since
    /// `before`, and not path 0 of a connection with other paths left (the paths go first:
    /// they share path 0's path count).
    fn take_reapable(&self, before: u64) -> Option<Arc<Conn>> {
        let mut conns = self.conns.lock();
        let key = {
            // Keys are ordered with the path last: a path 0's other paths follow it.
            let mut it = conns.iter().peekable();
            let mut found = None;
            while let Some((k, c)) = it.next() {
                let has_paths = k.path == 0
                    && it
                        .peek()
                        .is_some_and(|(n, _)| ConnKey { path: 0, ..**n } == *k);
                if !has_paths && c.reapable() && c.idle_since(before) {
                    found = Some(*k);
                    break;
                }
            }
            found?
        };
        conns.remove(&key)
    }

    /// Takes the first connection `pick` chooses out of the table.
    fn take_one(&self, mut pick: impl FnMut(&Conn) -> bool) -> Option<Arc<Conn>> {
        let mut conns = self.conns.lock();
        let key = conns.iter().find(|(_, c)| pick(c)).map(|(k, _)| *k)?;
        conns.remove(&key)
    }

    /// Keeps the sequence numbers of the destroyed connection `c` (see [`ConnTable::reap`]).
    fn keep_seqs(&self, c: &Conn) {
        if c.transport.loops_back() || !c.was_up.load(Ordering::Acquire) {
            return;
        }
        let (tx, rx) = {
            let inner = c.inner.lock();
            (inner.tx.next, inner.rx.next)
        };
        if tx == TxSeq::new().next && rx == RxSeq::new().next {
            // Nothing was numbered either way: nothing to remember.
            return;
        }
        let Ok(node) = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT) else {
            stats::inc(Stat::RsConnSeqForgotten);
            return;
        };
        let conns = self.conns.lock();
        if conns.get(&c.key).is_some() {
            // A new connection to the peer already started (from fresh numbers).
            stats::inc(Stat::RsConnSeqForgotten);
            return;
        }
        let mut seqs = self.seqs.lock();
        if seqs.len >= SEQS_KEPT_MAX {
            stats::inc(Stat::RsConnSeqForgotten);
            return;
        }
        if seqs.map.insert(node.into_node(c.key, (tx, rx))).is_none() {
            seqs.len += 1;
        }
        stats::inc(Stat::RsConnSeqKept);
    }

    /// Forgets the sequence numbers kept for a namespace that went away.
    fn forget_seqs(&self, net: NetId) {
        let mut seqs = self.seqs.lock();
        loop {
            let key = seqs.map.iter().find(|(k, _)| k.net == net).map(|(k, _)| *k);
            let Some(k) = key else { break };
            if seqs.map.remove(&k).is_some() {
                seqs.len -= 1;
            }
        }
    }
}
