// SPDX-License-Identifier: GPL-2.0

//! Congestion maps and congestion monitoring.
//!
//! C counterpart: `net/rds/cong.c`.
//!
//! Every local address has a map of 65536 bits, one per port: a set bit means the socket bound
//! to that port holds more than its receive buffer allows, and senders to that port must wait
//! (or get `ENOBUFS`). Maps are per network namespace and address ([`CongTable`]). Over
//! loopback the sender reads the receiver's map directly; a remote transport ships the map
//! (the bit layout of [`crate::proto::cong_word`] / [`crate::proto::cong_mask`] is the wire's).
//!
//! Whenever a map changes, [`CongTable::updated`] wakes tasks blocked on congestion (one wait
//! queue for all maps, as C's `rds_poll_waitq`), bumps a generation count that `poll` reports
//! to sockets that are not monitoring, and tells monitoring sockets (`RDS_CONG_MONITOR`) which
//! of the ports they were refused on became free.

use crate::bindings::net::{NetId, SockRef, WaitQueue};
use crate::proto::Stat;
use crate::proto::{cong_mask, cong_word, Addr, CONG_MAP_WORDS};
use crate::socket::Rds;
use crate::stats;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex},
};

/// The congestion map of one local address.
///
/// # Invariants
///
/// `words` holds [`CONG_MAP_WORDS`] words, one bit for each of the 65,536 ports (so `word`
/// always finds a port's word; its `Option` is never `None`).
pub(crate) struct CongMap {
    words: KVec<AtomicU64>,
}

impl CongMap {
    fn new() -> Result<Arc<Self>> {
        let mut words = KVec::with_capacity(CONG_MAP_WORDS, GFP_KERNEL)?;
        for _ in 0..CONG_MAP_WORDS {
            words.push(AtomicU64::new(0), GFP_KERNEL)?;
        }
        Ok(Arc::new(Self { words }, GFP_KERNEL)?)
    }

    fn word(&self, port: u16) -> Option<&AtomicU64> {
        self.words.get(cong_word(port))
    }

    /// Whether `port` is congested.
    pub(crate) fn test(&self, port: u16) -> bool {
        self.word(port)
            .is_some_and(|w| w.load(Ordering::Acquire) & cong_mask(port) != 0)
    }

    /// Marks `port` congested.
    pub(crate) fn set(&self, port: u16) {
        if let Some(w) = self.word(port) {
            w.fetch_or(cong_mask(port), Ordering::AcqRel);
        }
    }

    /// Marks `port` uncongested; returns whether it was congested.
    pub(crate) fn clear(&self, port: u16) -> bool {
        self.word(port)
            .is_some_and(|w| w.fetch_and(!cong_mask(port), Ordering::AcqRel) & cong_mask(port) != 0)
    }
}

/// All congestion maps, the monitoring sockets, and the congestion wait queue.
///
/// Lock order: `maps` and `monitors` are leaves, except that `monitors` is held while each
/// monitoring socket's `RdsSocket::data` is taken.
#[pin_data]
pub(crate) struct CongTable {
    #[pin]
    maps: Mutex<RBTree<(NetId, Addr), Arc<CongMap>>>,
    /// Sockets with `RDS_CONG_MONITOR` on, by identity.
    #[pin]
    monitors: Mutex<RBTree<usize, SockRef<Rds>>>,
    /// Bumped on every map update (C: `rds_cong_generation`).
    generation: AtomicU64,
}

impl CongTable {
    /// An empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            maps <- new_mutex!(RBTree::new(), "CongTable::maps"),
            monitors <- new_mutex!(RBTree::new(), "CongTable::monitors"),
            generation: AtomicU64::new(0),
        })
    }

    /// The map of `addr` in `net`, created (uncongested) if needed.
    pub(crate) fn get(&self, net: NetId, addr: Addr) -> Result<Arc<CongMap>> {
        if let Some(m) = self.maps.lock().get(&(net, addr)) {
            return Ok(m.clone());
        }
        let map = CongMap::new()?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut maps = self.maps.lock();
        // Another task may have created it meanwhile.
        if let Some(m) = maps.get(&(net, addr)) {
            return Ok(m.clone());
        }
        maps.insert(node.into_node((net, addr), map.clone()));
        Ok(map)
    }

    /// Forgets the maps of a namespace that went away.
    pub(crate) fn net_exit(&self, net: NetId) {
        let mut maps = self.maps.lock();
        loop {
            let key = maps.keys().find(|key| key.0 == net).copied();
            let Some(key) = key else { break };
            maps.remove(&key);
        }
    }

    /// The wait queue of congestion changes: where senders blocked on a congested port, and
    /// pollers that saw congestion, sleep (one for the module, as C's `rds_poll_waitq`).
    pub(crate) fn waitq(&self) -> &'static WaitQueue {
        WaitQueue::congestion()
    }

    /// The current generation of map updates.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A congestion map changed; `portmask` holds the monitor bits (`port % 64`) of ports that
    /// became uncongested (C: `rds_cong_map_updated`). Process context; no spinlock held.
    pub(crate) fn updated(&self, portmask: u64) {
        stats::inc(Stat::CongUpdateReceived);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.waitq().wake_all();
        if portmask == 0 {
            return;
        }
        let monitors = self.monitors.lock();
        for sock in monitors.values() {
            if sock.state().cong_notify(portmask) {
                sock.wake();
            }
        }
    }

    /// Adds a socket to the monitors (`RDS_CONG_MONITOR` on); idempotent.
    pub(crate) fn add_monitor(&self, sock: SockRef<Rds>) -> Result {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let old = self.monitors.lock().insert(node.into_node(sock.id(), sock));
        drop(old);
        Ok(())
    }

    /// Removes a socket from the monitors.
    pub(crate) fn remove_monitor(&self, id: usize) {
        let old = self.monitors.lock().remove(&id);
        drop(old);
    }
}
