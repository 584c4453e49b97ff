// SPDX-License-Identifier: GPL-2.0

//! The table of bound RDS sockets.
//!
//! C counterpart: `net/rds/bind.c` (`rds_add_bound`, `rds_remove_bound`, `rds_find_bound`).
//!
//! A binding is keyed by network namespace, address, port and IPv6 scope id. C RDS keys its
//! table without the namespace, so there two namespaces cannot bind the same address and port;
//! here bindings are per namespace (see `Documentation/differences-from-c.md`). The table holds
//! a reference to each bound socket, dropped when the socket unbinds at close.

use crate::bindings::net::{eaddrinuse, random_u16, NetId, SockRef};
use crate::bindings::sync::{new_spinlock_bh, SpinLockBh};
use crate::proto::{bind_candidates, SockAddr, PROBE_PORT};
use crate::socket::Rds;
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
};

/// The key of one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BindKey {
    net: NetId,
    /// The bound address, port and scope id.
    pub(crate) addr: SockAddr,
}

/// All bindings of all RDS sockets.
///
/// Lock order: `RdsSocket::inner` before `BindTable::bound`; nothing is taken inside `bound`.
/// Arriving messages look sockets up from softirq context too, hence a BH-safe lock.
#[pin_data]
pub(crate) struct BindTable {
    #[pin]
    bound: SpinLockBh<RBTree<BindKey, SockRef<Rds>>>,
}

impl BindTable {
    /// Creates an empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            bound <- new_spinlock_bh!(RBTree::new(), "BindTable::bound"),
        })
    }

    /// Binds `sock` to `addr` in `net`: the requested port, or for port 0 the first free port
    /// of a random search. Fails with `EINVAL` for the probe port and `EADDRINUSE` when the
    /// port (or, for port 0, every port) is taken.
    pub(crate) fn bind(&self, net: NetId, addr: SockAddr, sock: SockRef<Rds>) -> Result<BindKey> {
        if addr.port == PROBE_PORT {
            return Err(EINVAL);
        }
        // Allocate before taking the lock.
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let mut bound = self.bound.lock();
        for port in bind_candidates(addr.port, random_u16()) {
            let key = BindKey {
                net,
                addr: SockAddr { port, ..addr },
            };
            if bound.get(&key).is_none() {
                bound.insert(node.into_node(key, sock));
                return Ok(key);
            }
        }
        drop(bound);
        drop(sock);
        Err(eaddrinuse())
    }

    /// Removes a binding made by [`BindTable::bind`].
    pub(crate) fn unbind(&self, key: &BindKey) {
        let sock = self.bound.lock().remove(key);
        // The reference is dropped outside the lock.
        drop(sock);
    }

    /// The socket bound to `addr` in `net`, if any (C: `rds_find_bound`).
    pub(crate) fn find(&self, net: NetId, addr: SockAddr) -> Option<SockRef<Rds>> {
        self.bound.lock().get(&BindKey { net, addr }).cloned()
    }
}
