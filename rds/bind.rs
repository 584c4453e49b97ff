// SPDX-License-Identifier: GPL-2.0

//! The table of bound RDS sockets.
//!
//! C counterpart: `net/rds/bind.c` (`rds_add_bound`, `rds_remove_bound`, `rds_find_bound`).
//!
//! A binding is keyed by network namespace, address, port and IPv6 scope id. C RDS keys its
//! table without the namespace, so there two namespaces cannot bind the same address and port;
//! here bindings are per namespace (see `Documentation/differences-from-c.md`). The table holds
//! a reference to each bound socket, dropped when the socket unbinds at close (after a grace
//! period).
//!
//! Every message that arrives looks its socket up here, on any CPU: lookups take no lock and
//! no reference, under RCU ([`BindTable::with`], as C's `rhashtable` lookup); binding and
//! unbinding take the table's mutex.

use crate::bindings::net::{eaddrinuse, random_u16, NetId, Sock, SockRef};
use crate::bindings::rcu::{read_lock, RcuTable};
use crate::proto::{bind_candidates, SockAddr, PROBE_PORT};
use crate::socket::Rds;
use kernel::prelude::*;

/// The key of one binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BindKey {
    net: NetId,
    /// The bound address, port and scope id.
    pub(crate) addr: SockAddr,
}

impl BindKey {
    /// The key's hash: its fields mixed by multiplication with an odd constant (C hashes the
    /// address, port and scope id with `jhash`).
    fn hash(&self) -> u32 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h = (self.net.id() as u64)
            ^ (u64::from(self.addr.port) << 32)
            ^ u64::from(self.addr.scope_id);
        for chunk in self.addr.addr.0.chunks_exact(8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        h = (h ^ (h >> 29)).wrapping_mul(K);
        (h >> 32) as u32
    }
}

/// The table's buckets: enough that the sockets of a busy host rarely share one.
const BUCKETS: usize = 1024;

/// All bindings of all RDS sockets.
///
/// Lock order: `RdsSocket::inner` before the table's writer mutex; nothing is taken inside it.
/// Arriving messages look sockets up from any context, softirq included, without a lock.
#[pin_data]
pub(crate) struct BindTable {
    #[pin]
    bound: RcuTable<BindKey, SockRef<Rds>, BUCKETS>,
}

impl BindTable {
    /// Creates an empty table.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            bound <- RcuTable::new(),
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
        let mut entry =
            RcuTable::<_, _, BUCKETS>::prepare(BindKey { net, addr }, sock, GFP_KERNEL_ACCOUNT)?;
        let mut w = self.bound.write();
        for port in bind_candidates(addr.port, random_u16()) {
            let key = BindKey {
                net,
                addr: SockAddr { port, ..addr },
            };
            if !w.contains(&key, key.hash()) {
                entry.set_key(key);
                return match w.insert(entry, key.hash()) {
                    Ok(()) => Ok(key),
                    Err(e) => {
                        drop(w);
                        drop(e.into_value());
                        Err(eaddrinuse())
                    }
                };
            }
        }
        drop(w);
        // The reference is dropped outside the lock.
        drop(entry.into_value());
        Err(eaddrinuse())
    }

    /// Removes a binding made by [`BindTable::bind`]; the table's reference to the socket goes
    /// after a grace period.
    pub(crate) fn unbind(&self, key: &BindKey) {
        self.bound.write().remove(key, key.hash());
    }

    /// Calls `f` with the socket bound to `addr` in `net`, if there is one (C:
    /// `rds_find_bound`), under RCU: `f` must not sleep.
    pub(crate) fn with<R>(
        &self,
        net: NetId,
        addr: SockAddr,
        f: impl FnOnce(&Sock<Rds>) -> R,
    ) -> Option<R> {
        let key = BindKey { net, addr };
        let guard = read_lock();
        self.bound.get(&guard, &key, key.hash()).map(|sock| f(sock))
    }
}
