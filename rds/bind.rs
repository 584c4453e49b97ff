// SPDX-License-Identifier: GPL-2.0

//! The table of bound RDS sockets.
//!
//! C counterpart: `net/rds/bind.c` (`rds_add_bound`, `rds_remove_bound`).
//!
//! A binding is keyed by network namespace, address, port and IPv6 scope id. C RDS keys its
//! table without the namespace, so there two namespaces cannot bind the same address and port;
//! here bindings are per namespace (see `Documentation/differences-from-c.md`).

use crate::bindings::net::{eaddrinuse, random_u16, NetId};
use crate::proto::{bind_candidates, SockAddr, PROBE_PORT};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Mutex,
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
/// Lock order: `RdsSocket::inner` before `BindTable::bound`.
#[pin_data]
pub(crate) struct BindTable {
    #[pin]
    bound: Mutex<RBTree<BindKey, ()>>,
}

impl BindTable {
    /// Creates an empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            bound <- new_mutex!(RBTree::new(), "BindTable::bound"),
        })
    }

    /// Binds `addr` in `net`: the requested port, or for port 0 the first free port of a
    /// random search. Fails with `EINVAL` for the probe port and `EADDRINUSE` when the port
    /// (or, for port 0, every port) is taken.
    pub(crate) fn bind(&self, net: NetId, addr: SockAddr) -> Result<BindKey> {
        if addr.port == PROBE_PORT {
            return Err(EINVAL);
        }
        // Allocate before taking the lock.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut bound = self.bound.lock();
        for port in bind_candidates(addr.port, random_u16()) {
            let key = BindKey {
                net,
                addr: SockAddr { port, ..addr },
            };
            if bound.get(&key).is_none() {
                bound.insert(node.into_node(key, ()));
                return Ok(key);
            }
        }
        Err(eaddrinuse())
    }

    /// Removes a binding made by [`BindTable::bind`].
    pub(crate) fn unbind(&self, key: &BindKey) {
        self.bound.lock().remove(key);
    }
}
