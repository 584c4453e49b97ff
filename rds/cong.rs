// SPDX-License-Identifier: GPL-2.0

//! Congestion maps and congestion monitoring.
//!
//! C counterpart: `net/rds/cong.c`.
//!
//! Every local address has a map of 65536 bits, one per port: a set bit means the socket bound
//! to that port holds more than its receive buffer allows, and senders to that port must wait
//! (or get `ENOBUFS`). Maps are per network namespace and address ([`CongTable`]). Over
//! loopback the sender reads the receiver's map directly; a network transport ships the map
//! (the bit layout of [`crate::proto::cong_word`] / [`crate::proto::cong_mask`] is the wire's)
//! whenever it changes ([`crate::conn::Conn::queue_map_update`]).
//!
//! Whenever a map changes, [`CongTable::updated`] wakes tasks blocked on congestion (one wait
//! queue for the module, as C's `rds_poll_waitq`, whose sleepers re-check their own
//! condition), bumps the generation count of the map's namespace ([`NetCong`]) that `poll`
//! reports to sockets that are not monitoring, and tells the namespace's monitoring sockets
//! (`RDS_CONG_MONITOR`) which of the ports they were refused on became free. Nothing crosses
//! namespaces (C keeps one generation and one monitor list for all).
//!
//! Maps nobody uses any more (no bound socket, no connection) are reaped with idle
//! connections.

use crate::bindings::net::{NetId, SockRef, WaitQueue};
use crate::bindings::sync::ProcessCtx;
use crate::bindings::sys::{impl_work_item, new_process_work, Work};
use crate::message::Payload;
use crate::proto::Stat;
use crate::proto::{cong_mask, cong_word, Addr, CONG_MAP_BYTES, CONG_MAP_WORDS};
use crate::recv::RxCtx;
use crate::socket::{Rds, Shared};
use crate::stats;
use core::ops::Deref;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex},
};

/// The congestion map of one address.
///
/// # Invariants
///
/// `words` holds [`CONG_MAP_WORDS`] words, one bit for each of the 65,536 ports (so `word`
/// always finds a port's word; its `Option` is never `None`). `users` counts the [`CongRef`]s.
pub(crate) struct CongMap {
    words: KVec<AtomicU64>,
    /// The namespace and address the map belongs to.
    pub(crate) net: NetId,
    /// The address.
    pub(crate) addr: Addr,
    users: AtomicUsize,
    /// A local change is waiting to be announced to the address's connections.
    changed: AtomicBool,
}

impl CongMap {
    fn new(net: NetId, addr: Addr) -> Result<Arc<Self>> {
        let mut words = KVec::with_capacity(CONG_MAP_WORDS, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..CONG_MAP_WORDS {
            words.push(AtomicU64::new(0), GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Arc::new(
            Self {
                words,
                net,
                addr,
                users: AtomicUsize::new(0),
                changed: AtomicBool::new(false),
            },
            GFP_KERNEL_ACCOUNT,
        )?)
    }

    fn word(&self, port: u16) -> Option<&AtomicU64> {
        self.words.get(cong_word(port))
    }

    /// Whether `port` is congested.
    pub(crate) fn test(&self, port: u16) -> bool {
        self.word(port)
            .is_some_and(|w| w.load(Ordering::Acquire) & cong_mask(port) != 0)
    }

    /// Marks `port` congested; returns whether it was not.
    pub(crate) fn set(&self, port: u16) -> bool {
        self.word(port)
            .is_some_and(|w| w.fetch_or(cong_mask(port), Ordering::AcqRel) & cong_mask(port) == 0)
    }

    /// Marks `port` uncongested; returns whether it was congested.
    pub(crate) fn clear(&self, port: u16) -> bool {
        self.word(port)
            .is_some_and(|w| w.fetch_and(!cong_mask(port), Ordering::AcqRel) & cong_mask(port) != 0)
    }

    /// The map in its wire form (8 KiB, little-endian words), as a payload.
    pub(crate) fn to_payload(&self) -> Result<Payload> {
        let mut bytes = KVec::with_capacity(CONG_MAP_BYTES, GFP_KERNEL)?;
        for w in self.words.iter() {
            bytes.extend_from_slice(&w.load(Ordering::Acquire).to_le_bytes(), GFP_KERNEL)?;
        }
        Payload::from_bytes(&bytes, GFP_KERNEL)
    }

    /// Replaces the map with the wire form in `data` (a peer's update; C: `rds_ib_cong_recv`);
    /// returns the monitor bits of ports that became uncongested. Any context.
    pub(crate) fn update_from(&self, data: &Payload) -> u64 {
        let mut freed = 0u64;
        for (i, w) in self.words.iter().enumerate() {
            let mut b = [0u8; 8];
            if data.read(i * 8, &mut b).is_err() {
                break;
            }
            let new = u64::from_le_bytes(b);
            let old = w.swap(new, Ordering::AcqRel);
            freed |= crate::proto::uncongested_mask(&[old], &[new]);
        }
        freed
    }
}

/// A counted use of a [`CongMap`]: a bound socket's local map or a connection's remote map.
/// Maps without users are reaped.
pub(crate) struct CongRef {
    map: Arc<CongMap>,
}

impl CongRef {
    fn new(map: Arc<CongMap>) -> Self {
        map.users.fetch_add(1, Ordering::AcqRel);
        Self { map }
    }

    /// The map itself.
    pub(crate) fn arc(&self) -> &Arc<CongMap> {
        &self.map
    }
}

impl Clone for CongRef {
    fn clone(&self) -> Self {
        Self::new(self.map.clone())
    }
}

impl Deref for CongRef {
    type Target = CongMap;

    fn deref(&self) -> &CongMap {
        &self.map
    }
}

impl Drop for CongRef {
    fn drop(&mut self) {
        self.map.users.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The congestion events of one network namespace.
#[pin_data]
pub(crate) struct NetCong {
    /// The namespace.
    pub(crate) net: NetId,
    /// Bumped on every map update of the namespace (C: `rds_cong_generation`).
    generation: AtomicU64,
    /// Sockets of the namespace with `RDS_CONG_MONITOR` on, by identity.
    #[pin]
    monitors: Mutex<RBTree<usize, SockRef<Rds>>>,
    /// Monitor bits waiting for the congestion work (changes seen in softirq context).
    pending: AtomicU64,
    /// Local maps changed in softirq context, to announce from the congestion work.
    maps_changed: AtomicBool,
}

impl NetCong {
    fn new(net: NetId) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                net,
                generation: AtomicU64::new(0),
                monitors <- new_mutex!(RBTree::new(), "NetCong::monitors"),
                pending: AtomicU64::new(0),
                maps_changed: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// The current generation of map updates.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Adds a socket to the monitors (`RDS_CONG_MONITOR` on); idempotent.
    pub(crate) fn add_monitor(&self, sock: SockRef<Rds>) -> Result {
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let old = self.monitors.lock().insert(node.into_node(sock.id(), sock));
        drop(old);
        Ok(())
    }

    /// Removes a socket from the monitors.
    pub(crate) fn remove_monitor(&self, id: usize) {
        let old = self.monitors.lock().remove(&id);
        drop(old);
    }

    fn notify_monitors(&self, portmask: u64, _ctx: &ProcessCtx) {
        let monitors = self.monitors.lock();
        for sock in monitors.values() {
            if sock.state().cong_notify(portmask) {
                sock.wake();
            }
        }
    }
}

/// All congestion maps and the congestion events of every namespace.
///
/// Lock order: `maps` and `nets` are leaves; `NetCong::monitors` is held while each
/// monitoring socket's `RdsSocket::data` is taken.
#[pin_data]
pub(crate) struct CongTable {
    #[pin]
    maps: Mutex<RBTree<(NetId, Addr), Arc<CongMap>>>,
    #[pin]
    nets: Mutex<RBTree<NetId, Arc<NetCong>>>,
    /// Some namespace has work for the congestion work.
    pending: AtomicBool,
}

impl CongTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            maps <- new_mutex!(RBTree::new(), "CongTable::maps"),
            nets <- new_mutex!(RBTree::new(), "CongTable::nets"),
            pending: AtomicBool::new(false),
        })
    }

    /// The map of `addr` in `net`, created (uncongested) if needed.
    pub(crate) fn get(&self, net: NetId, addr: Addr) -> Result<CongRef> {
        if let Some(m) = self.maps.lock().get(&(net, addr)) {
            return Ok(CongRef::new(m.clone()));
        }
        let map = CongMap::new(net, addr)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let mut maps = self.maps.lock();
        // Another task may have created it meanwhile.
        if let Some(m) = maps.get(&(net, addr)) {
            return Ok(CongRef::new(m.clone()));
        }
        // Counted under the lock, so the reaper cannot take it meanwhile.
        let r = CongRef::new(map.clone());
        maps.insert(node.into_node((net, addr), map));
        Ok(r)
    }

    /// The congestion events of `net`, created if needed.
    pub(crate) fn net(&self, net: NetId) -> Result<Arc<NetCong>> {
        if let Some(n) = self.nets.lock().get(&net) {
            return Ok(n.clone());
        }
        let new = NetCong::new(net)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut nets = self.nets.lock();
        if let Some(n) = nets.get(&net) {
            return Ok(n.clone());
        }
        nets.insert(node.into_node(net, new.clone()));
        Ok(new)
    }

    /// A message carrying the current map of `laddr` for the peer `faddr`.
    pub(crate) fn update_message(
        &self,
        net: NetId,
        laddr: Addr,
        faddr: Addr,
    ) -> Result<kernel::list::ListArc<crate::message::Message>> {
        let map = self.maps.lock().get(&(net, laddr)).cloned();
        let payload = match map {
            Some(map) => map.to_payload()?,
            // No socket is bound to `laddr` any more (its map was reaped): no port there is
            // congested, and the peer is told so.
            None => Payload::from_bytes(
                &KVec::from_elem(0u8, CONG_MAP_BYTES, GFP_KERNEL)?,
                GFP_KERNEL,
            )?,
        };
        crate::message::Message::cong_update(payload, laddr, faddr)
    }

    /// Forgets the maps and events of a namespace that went away.
    pub(crate) fn net_exit(&self, net: NetId) {
        let mut maps = self.maps.lock();
        loop {
            let key = maps.keys().find(|key| key.0 == net).copied();
            let Some(key) = key else { break };
            maps.remove(&key);
        }
        drop(maps);
        let gone = self.nets.lock().remove(&net);
        drop(gone);
    }

    /// Reaps the maps nobody uses; returns how many went.
    pub(crate) fn reap(&self) -> usize {
        let mut n = 0;
        let mut maps = self.maps.lock();
        loop {
            let key = maps
                .iter()
                .find(|(_, m)| m.users.load(Ordering::Acquire) == 0)
                .map(|(k, _)| *k);
            let Some(key) = key else { break };
            maps.remove(&key);
            stats::inc(Stat::RsCongMapReaped);
            n += 1;
        }
        n
    }

    /// The wait queue of congestion changes: where senders blocked on a congested port, and
    /// pollers that saw congestion, sleep (one for the module, as C's `rds_poll_waitq`).
    pub(crate) fn waitq(&self) -> &'static WaitQueue {
        WaitQueue::congestion()
    }

    /// A congestion map of `netcong`'s namespace changed (C: `rds_cong_map_updated`):
    /// `portmask` holds the monitor bits (`port % 64`) of ports that became uncongested, and
    /// `local`, when the map is one of this host's addresses, the map, whose connections are
    /// told (C: `rds_cong_queue_updates`). Any context: what needs process context is left to
    /// the congestion work when `rx` is atomic.
    pub(crate) fn updated(
        &self,
        shared: &Arc<Shared>,
        netcong: &NetCong,
        portmask: u64,
        local: Option<&CongMap>,
        rx: RxCtx<'_>,
    ) {
        stats::inc(Stat::CongUpdateReceived);
        netcong.generation.fetch_add(1, Ordering::AcqRel);
        self.waitq().wake_all();
        let transports_ship_maps = shared.transports.ships_cong_maps();
        match rx {
            RxCtx::Process(ctx) => {
                if portmask != 0 {
                    netcong.notify_monitors(portmask, ctx);
                }
                if let (Some(map), true) = (local, transports_ship_maps) {
                    announce(shared, map);
                }
            }
            RxCtx::Atomic => {
                let mut work = false;
                if portmask != 0 {
                    netcong.pending.fetch_or(portmask, Ordering::AcqRel);
                    work = true;
                }
                if let (Some(map), true) = (local, transports_ship_maps) {
                    map.changed.store(true, Ordering::Release);
                    netcong.maps_changed.store(true, Ordering::Release);
                    work = true;
                }
                if work {
                    self.pending.store(true, Ordering::Release);
                    Work::<Shared, 0>::queue(&shared.wq, shared.clone());
                }
            }
        }
    }

    /// The congestion work: what [`CongTable::updated`] left for process context.
    fn run_pending(&self, shared: &Arc<Shared>, ctx: &ProcessCtx) {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let nets = {
            let nets = self.nets.lock();
            let mut v = KVec::new();
            for n in nets.values() {
                if v.push(n.clone(), GFP_KERNEL).is_err() {
                    self.pending.store(true, Ordering::Release);
                    break;
                }
            }
            v
        };
        for n in nets.iter() {
            let mask = n.pending.swap(0, Ordering::AcqRel);
            if mask != 0 {
                n.notify_monitors(mask, ctx);
            }
            if n.maps_changed.swap(false, Ordering::AcqRel) {
                let changed = {
                    let maps = self.maps.lock();
                    let mut v = KVec::new();
                    for m in maps.values() {
                        if m.net == n.net
                            && m.changed.swap(false, Ordering::AcqRel)
                            && v.push(m.clone(), GFP_KERNEL).is_err()
                        {
                            m.changed.store(true, Ordering::Release);
                            n.maps_changed.store(true, Ordering::Release);
                        }
                    }
                    v
                };
                for m in changed.iter() {
                    announce(shared, m);
                }
            }
        }
    }
}

/// Queues an update of the local map `map` on every connection from its address (C:
/// `rds_cong_queue_updates`), on path 0 of one with several paths.
fn announce(shared: &Arc<Shared>, map: &CongMap) {
    shared.conns.for_each(map.net, |c| {
        if c.key.laddr == map.addr && c.key.path == 0 {
            c.queue_map_update();
        }
    });
}

impl_work_item!(Shared, 0, cong_work, cong_worker);

/// The congestion work.
fn cong_worker(this: Arc<Shared>, ctx: &ProcessCtx) {
    this.cong.run_pending(&this, ctx);
}

/// The initialiser of [`Shared`]'s congestion work.
pub(crate) fn new_cong_work() -> impl PinInit<Work<Shared, 0>> {
    new_process_work!("Shared::cong_work")
}
