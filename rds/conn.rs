// SPDX-License-Identifier: GPL-2.0

//! Connections: one per (namespace, local address, remote address, type of service).
//!
//! C counterpart: `net/rds/connection.c`, `net/rds/threads.c` and the transmit loop of
//! `net/rds/send.c` (`rds_send_xmit`).
//!
//! A connection owns the queue of messages waiting for its transport and the sequence
//! numbers of both directions. Senders append to the queue and then try to drain it
//! themselves ([`Conn::xmit`]); only one task drains a connection at a time, and whoever finds
//! it busy leaves the work to the current drainer or to the connection's worker on the
//! module's workqueue. A drainer that has sent a batch hands the rest to the worker, so no
//! sender is held up for long.

use crate::bindings::net::NetId;
use crate::bindings::sys;
use crate::cong::CongMap;
use crate::message::Message;
use crate::proto::{AckPacer, Addr, RxSeq, Stat, TxSeq};
use crate::socket::Shared;
use crate::stats;
use crate::transport::{Transport, XmitError};
use core::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use kernel::{
    impl_has_work,
    list::{List, ListArc},
    new_mutex, new_spinlock, new_work,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex, SpinLock},
    workqueue::{Work, WorkItem},
};

/// How many messages one drain sends before it hands the rest to the worker (C:
/// `send_batch_count`).
const SEND_BATCH: u32 = 1024;

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
}

/// The fields of [`Conn`] protected by its spinlock (C: `cp_lock`).
struct ConnInner {
    /// Messages waiting for the transport, in order.
    send_queue: List<Message>,
    /// The next sequence number to send.
    tx: TxSeq,
    /// Receive-side sequence tracking.
    rx: RxSeq,
    /// When to ask the peer for an ack.
    pacer: AckPacer,
}

/// A connection.
///
/// Lock order: `inner` is a leaf.
///
/// # Invariants
///
/// - Only the task that set `in_xmit` (from false to true) calls the transport's `xmit` for
///   this connection, and it clears `in_xmit` when it stops; `send_gen` is bumped by every
///   drain, so a task that finds messages queued after another task's drain knows whether that
///   drain could have seen them (C's `RDS_IN_XMIT` / `cp_send_gen` protocol).
/// - Once `dead` is set (under `inner`), nothing is queued on `inner.send_queue` again.
#[pin_data]
pub(crate) struct Conn {
    /// The identity of the connection.
    pub(crate) key: ConnKey,
    /// The core's shared state.
    pub(crate) shared: Arc<Shared>,
    /// The transport.
    pub(crate) transport: &'static dyn Transport,
    /// The congestion map of the remote address (C: `c_fcong`).
    pub(crate) fcong: Arc<CongMap>,
    #[pin]
    inner: SpinLock<ConnInner>,
    /// Set while a task drains the send queue (C: `RDS_IN_XMIT`).
    in_xmit: AtomicBool,
    /// Bumped by every drain (C: `cp_send_gen`).
    send_gen: AtomicU64,
    /// Set once the connection is destroyed (its namespace went away or the module unloads).
    dead: AtomicBool,
    /// Set when the last drain stopped on a shortage, so the worker pauses before retrying.
    backoff: AtomicBool,
    #[pin]
    work: Work<Conn>,
}

impl_has_work! {
    impl HasWork<Self> for Conn { self.work }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        stats::inc(Stat::SendDelayedRetry);
        if this.backoff.swap(false, Ordering::AcqRel) {
            // The last attempt ran out of memory: give reclaim a moment.
            sys::sleep_briefly();
        }
        this.xmit_and_reschedule();
    }
}

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drain {
    /// The queue is empty (as far as this drain could tell).
    Empty,
    /// Another task is draining.
    Busy,
    /// A batch was sent and more is queued.
    OverBatch,
    /// The transport could not take a message now.
    Shortage,
    /// The transport holds messages back (a test hook).
    Held,
    /// The connection is dead.
    Dead,
}

impl Conn {
    fn new(
        key: ConnKey,
        shared: Arc<Shared>,
        transport: &'static dyn Transport,
        fcong: Arc<CongMap>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Conn {
                key,
                shared,
                transport,
                fcong,
                inner <- new_spinlock!(
                    ConnInner {
                        send_queue: List::new(),
                        tx: TxSeq::new(),
                        rx: RxSeq::new(),
                        pacer: AckPacer::new(sys::max_unacked_packets(), sys::max_unacked_bytes()),
                    },
                    "Conn::inner"
                ),
                in_xmit: AtomicBool::new(false),
                send_gen: AtomicU64::new(0),
                dead: AtomicBool::new(false),
                backoff: AtomicBool::new(false),
                work <- new_work!("Conn::work"),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether the connection has been destroyed.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Appends a message, giving it the next sequence number. A connection that was destroyed
    /// takes nothing: the message comes back, for the caller to settle as dropped.
    pub(crate) fn enqueue(
        &self,
        msg: ListArc<Message>,
    ) -> core::result::Result<(), ListArc<Message>> {
        let mut inner = self.inner.lock();
        // `dead` is set under this lock (`destroy`), so no message is queued after the queue
        // was taken.
        if self.is_dead() {
            return Err(msg);
        }
        msg.set_seq(inner.tx.take());
        inner.send_queue.push_back(msg);
        Ok(())
    }

    /// The receive side's sequence check of a message that arrived on this connection
    /// (`rds_recv_incoming`): false when it is an old retransmission to drop.
    pub(crate) fn accept_seq(&self, seq: u64, retransmitted: bool) -> bool {
        self.inner.lock().rx.accept(seq, retransmitted)
    }

    /// The next sequence numbers to send and expect, and whether a task is draining.
    pub(crate) fn seqs(&self) -> (u64, u64, bool) {
        let inner = self.inner.lock();
        (
            inner.tx.next,
            inner.rx.next,
            self.in_xmit.load(Ordering::Relaxed),
        )
    }

    /// Calls `f` for each queued message until it fails (under the connection's lock: `f`
    /// must not sleep).
    pub(crate) fn try_for_each_queued(&self, mut f: impl FnMut(&Message) -> Result) -> Result {
        let inner = self.inner.lock();
        inner.send_queue.iter().try_for_each(|m| f(&m))
    }

    /// Removes the queued messages of the socket `owner_id` for which `pick` holds, in order,
    /// into `out` (C: the connection half of `rds_send_drop_to`).
    pub(crate) fn remove_queued(
        &self,
        owner_id: usize,
        pick: impl Fn(&Message) -> bool,
        out: &mut List<Message>,
    ) {
        let mut inner = self.inner.lock();
        let mut kept = List::new();
        while let Some(m) = inner.send_queue.pop_front() {
            if m.owner_id == owner_id && pick(&m) {
                out.push_back(m);
            } else {
                kept.push_back(m);
            }
        }
        inner.send_queue = kept;
    }

    /// Queues the connection's worker.
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.is_dead() {
            return;
        }
        // Already queued is fine: the pending run will see the new messages.
        let _ = self.shared.wq.queue().enqueue(self.clone());
    }

    /// Drains the send queue now if no other task does; otherwise, or if more remains than
    /// one batch, leaves it to the worker.
    pub(crate) fn xmit_and_reschedule(self: &Arc<Self>) {
        match self.drain() {
            Drain::Empty | Drain::Dead | Drain::Held => {}
            Drain::Busy => {
                // The draining task re-checks the queue after it lets go (see `drain`).
            }
            Drain::OverBatch => self.kick(),
            Drain::Shortage => {
                self.backoff.store(true, Ordering::Release);
                self.kick();
            }
        }
    }

    /// The transmit loop (C: `rds_send_xmit`).
    fn drain(self: &Arc<Self>) -> Drain {
        loop {
            if self.in_xmit.swap(true, Ordering::Acquire) {
                stats::inc(Stat::SendLockContention);
                return Drain::Busy;
            }
            if self.is_dead() {
                self.in_xmit.store(false, Ordering::Release);
                return Drain::Dead;
            }
            let gen = self.send_gen.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
            let mut batch = 0;
            let mut end = Drain::Empty;
            loop {
                if batch >= SEND_BATCH {
                    end = Drain::OverBatch;
                    break;
                }
                let msg = {
                    let mut inner = self.inner.lock();
                    let msg = inner.send_queue.pop_front();
                    if let Some(m) = &msg {
                        let (max_p, max_b) = (sys::max_unacked_packets(), sys::max_unacked_bytes());
                        if inner.pacer.on_send(m.len, max_p, max_b) {
                            m.set_ack_required();
                            stats::inc(Stat::SendAckRequired);
                        }
                    }
                    msg
                };
                let Some(msg) = msg else { break };
                batch += 1;
                if let Err(e) = self.transport.xmit(self, msg.as_arc()) {
                    // Put it back at the head, for the worker (shortage) or the next send.
                    self.inner.lock().send_queue.push_front(msg);
                    end = match e {
                        XmitError::NoMem => Drain::Shortage,
                        XmitError::Held => Drain::Held,
                    };
                    break;
                }
                // The transport has it now; our reference goes.
                drop(msg);
            }
            self.in_xmit.store(false, Ordering::Release);
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
            if self.inner.lock().send_queue.is_empty() {
                return Drain::Empty;
            }
        }
    }

    /// Destroys the connection: no more sends; queued messages are dropped and their senders
    /// released. Returns the dropped messages for the caller to settle.
    fn destroy(&self) -> List<Message> {
        let mut inner = self.inner.lock();
        self.dead.store(true, Ordering::Release);
        core::mem::replace(&mut inner.send_queue, List::new())
    }
}

/// All connections.
///
/// Lock order: `conns` is a leaf (connections are built before it is taken).
#[pin_data]
pub(crate) struct ConnTable {
    #[pin]
    conns: Mutex<RBTree<ConnKey, Arc<Conn>>>,
}

impl ConnTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            conns <- new_mutex!(RBTree::new(), "ConnTable::conns"),
        })
    }

    /// The connection for `key`, created over `transport` if it does not exist yet (C:
    /// `rds_conn_create_outgoing`).
    pub(crate) fn get(
        &self,
        shared: &Arc<Shared>,
        key: ConnKey,
        transport: &'static dyn Transport,
    ) -> Result<Arc<Conn>> {
        if let Some(c) = self.conns.lock().get(&key) {
            return Ok(c.clone());
        }
        let fcong = shared.cong.get(key.net, key.faddr)?;
        let conn = Conn::new(key, shared.clone(), transport, fcong)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        {
            let mut conns = self.conns.lock();
            if let Some(c) = conns.get(&key) {
                return Ok(c.clone());
            }
            conns.insert(node.into_node(key, conn.clone()));
        }
        // A connection that comes up sends its local congestion map first; over loopback C
        // hands it straight to the remote map's update (`rds_cong_map_updated(map, ~0)`),
        // which pollers and monitors see. Do the same.
        shared.cong.updated(!0);
        Ok(conn)
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

    /// Destroys every connection of a namespace that went away (C: `rds_loop_kill_conns`).
    pub(crate) fn net_exit(&self, net: NetId) {
        loop {
            let conn = {
                let mut conns = self.conns.lock();
                let key = conns.keys().find(|k| k.net == net).copied();
                match key {
                    Some(k) => conns.remove(&k),
                    None => None,
                }
            };
            let Some(conn) = conn else { break };
            let mut dropped = conn.destroy();
            while let Some(m) = dropped.pop_front() {
                crate::send::complete(&m, crate::proto::RDS_RDMA_DROPPED);
            }
        }
    }
}
