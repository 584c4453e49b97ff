// SPDX-License-Identifier: GPL-2.0

//! The loopback transport's model of an RDMA device: its memory registrations, its key space,
//! and the execution of RDMA and atomic operations between the pinned pages of two sockets of
//! the host.
//!
//! As a device would, it chooses each registration's r_key (a random 32-bit value that is
//! neither live nor among the recently freed ones, [`crate::proto::Quarantine`]) and its
//! zero-based addresses: instead of starting at 0 as C's registrations do, a registration
//! starts at a random page-aligned base ([`crate::proto::loop_region`]), which the cookie's
//! offset carries. An operation must name both the r_key and an address inside the region to
//! reach the memory, and failed lookups are rate-limited per sending socket
//! ([`crate::rdma::GuessLimiter`]), so guessing is hopeless (`Documentation/rdma.md` gives the
//! arithmetic). A registration made without `RDS_RDMA_READWRITE` can be read by peers but not
//! written (RDMA writes and atomics into it fail).
//!
//! Lookups and operations may run in softirq context (the transport's softirq test mode): the
//! index is under a [`SpinLockBh`], and dropping a registration never sleeps (its pages are
//! unpinned in process context, [`crate::bindings::sync::ProcessDrop`]).

use crate::bindings::mm::random_u32;
use crate::bindings::net::NetId;
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::proto::{
    key_acceptable, loop_region, Addr, Quarantine, RdsIovec, Region, Stat, RDS_RDMA_REMOTE_ERROR,
    RDS_RDMA_SUCCESS,
};
use crate::rdma::{OpKind, RdmaOp, RegPages};
use crate::stats;
use crate::transport::{MrHandle, RegRequest};
use kernel::{
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, UniqueArc},
};

/// How many freed r_keys are kept out of circulation.
const QUARANTINE: usize = 1024;

/// A registration as the model device keeps it.
pub(crate) struct LoopMr {
    /// The owner's namespace.
    net: NetId,
    /// The owner's bound address: RDMA to this registration must come for it.
    laddr: Addr,
    /// The zero-based addresses of the registered bytes.
    region: Region,
    /// The zero-based address of the first pinned page.
    base: u64,
    /// Peers may write.
    remote_write: bool,
    /// The pinned pages.
    pages: RegPages,
}

/// The fields of [`Hca`] under its lock.
struct HcaInner {
    keys: RBTree<u32, Arc<LoopMr>>,
    quarantine: Quarantine<QUARANTINE>,
}

/// The model device.
///
/// Lock order: `inner` is a leaf. Registrations are dropped outside it.
#[pin_data]
pub(crate) struct Hca {
    #[pin]
    inner: SpinLockBh<HcaInner>,
}

impl Hca {
    /// A device without registrations.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_spinlock_bh!(
                HcaInner {
                    keys: RBTree::new(),
                    quarantine: Quarantine::new(),
                },
                "Hca::inner"
            ),
        })
    }

    /// Registers the pages of `req` under a new r_key and a random base.
    pub(crate) fn register(
        self: &Arc<Self>,
        req: RegRequest,
        _ctx: &ProcessCtx,
    ) -> Result<Arc<dyn MrHandle>> {
        let vec = RdsIovec {
            addr: req.addr,
            bytes: req.len,
        };
        let region = loop_region(&vec, random_u32());
        let pgoff = req.addr % crate::proto::PAGE_SIZE;
        let base = u64::from(region.offset) - pgoff;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        // The entry is built here, without the lock.
        let mr = Arc::new(
            LoopMr {
                net: req.net,
                laddr: req.laddr,
                region,
                base,
                remote_write: req.remote_write,
                pages: req.pages,
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        let mut handle = UniqueArc::new(
            LoopMrHandle {
                hca: self.clone(),
                key: 0,
                region,
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        let mut inner = self.inner.lock();
        let key = loop {
            let candidate = random_u32();
            let live = |k: u32| inner.keys.get(&k).is_some();
            if key_acceptable(candidate, live, &inner.quarantine) {
                break candidate;
            }
        };
        inner.keys.insert(node.into_node(key, mr));
        drop(inner);
        handle.key = key;
        let handle: Arc<LoopMrHandle> = handle.into();
        Ok(handle)
    }

    /// Removes registration `key` and quarantines the key; returns it for the caller to drop.
    fn remove(&self, key: u32) -> Option<Arc<LoopMr>> {
        let mut inner = self.inner.lock();
        let mr = inner.keys.remove(&key);
        if mr.is_some() {
            inner.quarantine.retire(key);
        }
        mr
    }

    /// Performs an operation: finds the target registration (by r_key, in `net`, registered
    /// by a socket bound to `faddr`), checks the range and the access and moves the data.
    /// Returns the operation's `RDS_RDMA_*` status. Any context.
    pub(crate) fn execute(&self, net: NetId, faddr: Addr, op: &RdmaOp) -> i32 {
        if !op.guess.allows() {
            stats::inc(Stat::RsRdmaLookupLimited);
            return RDS_RDMA_REMOTE_ERROR;
        }
        let found = self
            .inner
            .lock()
            .keys
            .get(&op.rkey)
            .filter(|m| m.net == net && m.laddr == faddr)
            .cloned();
        let Some(mr) = found else {
            op.guess.failed();
            stats::inc(Stat::RsRdmaLookupFailed);
            return RDS_RDMA_REMOTE_ERROR;
        };
        let status = match self.transfer(&mr, op) {
            Ok(()) => RDS_RDMA_SUCCESS,
            Err(Miss::Range) => {
                // A wrong address with a right key is a guess of the base.
                op.guess.failed();
                stats::inc(Stat::RsRdmaLookupFailed);
                RDS_RDMA_REMOTE_ERROR
            }
            Err(Miss::Access) => RDS_RDMA_REMOTE_ERROR,
        };
        // The registration may be freed meanwhile; the last reference may go here (any
        // context may drop it).
        drop(mr);
        status
    }

    fn transfer(&self, mr: &LoopMr, op: &RdmaOp) -> core::result::Result<(), Miss> {
        let pages = &mr.pages.pages;
        match &op.kind {
            OpKind::Rdma {
                write,
                remote_addr,
                local,
            } => {
                let total: u64 = local.iter().map(|s| s.len as u64).sum();
                if !mr.region.contains(*remote_addr, total) {
                    return Err(Miss::Range);
                }
                if *write && !mr.remote_write {
                    return Err(Miss::Access);
                }
                // Offsets into the pinned pages.
                let rel = remote_addr.checked_sub(mr.base).ok_or(Miss::Range)?;
                let mut at = usize::try_from(rel).map_err(|_| Miss::Range)?;
                for seg in local.iter() {
                    let r = if *write {
                        seg.pages.copy_to(seg.offset, pages, at, seg.len)
                    } else {
                        pages.copy_to(at, &seg.pages, seg.offset, seg.len)
                    };
                    r.map_err(|_| Miss::Range)?;
                    at += seg.len;
                }
                stats::add(Stat::SendRdmaBytes, total);
                Ok(())
            }
            OpKind::Atomic {
                op: aop,
                remote_addr,
                local,
                offset,
            } => {
                if !mr.region.contains(*remote_addr, 8) {
                    return Err(Miss::Range);
                }
                if !mr.remote_write {
                    return Err(Miss::Access);
                }
                let rel = remote_addr.checked_sub(mr.base).ok_or(Miss::Range)?;
                let at = usize::try_from(rel).map_err(|_| Miss::Range)?;
                // Atomic operations are serialised against each other (as a device does; on
                // IB too they are not atomic against the CPUs' own accesses): the index's
                // lock.
                let _guard = self.inner.lock();
                let mut old = [0u8; 8];
                pages.read(at, &mut old).map_err(|_| Miss::Range)?;
                let new = aop.apply(u64::from_ne_bytes(old));
                pages
                    .write(at, &new.to_ne_bytes())
                    .map_err(|_| Miss::Range)?;
                local.write(*offset, &old).map_err(|_| Miss::Range)?;
                Ok(())
            }
        }
    }
}

/// Why an operation missed its registration.
enum Miss {
    /// Outside the registered region.
    Range,
    /// Not allowed (a write into a read-only registration).
    Access,
}

/// A socket's handle on a registration of the model device: dropping it removes the
/// registration from the index (no operation can find it afterwards); the pages go with the
/// last reference (an operation in progress may hold one).
struct LoopMrHandle {
    hca: Arc<Hca>,
    key: u32,
    region: Region,
}

impl MrHandle for LoopMrHandle {
    fn rkey(&self) -> u32 {
        self.key
    }

    fn region(&self) -> Region {
        self.region
    }
}

impl Drop for LoopMrHandle {
    fn drop(&mut self) {
        let mr = self.hca.remove(self.key);
        drop(mr);
    }
}
