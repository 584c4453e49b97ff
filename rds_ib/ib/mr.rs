// SPDX-License-Identifier: GPL-2.0

//! Registrations on RDMA devices.
//!
//! C counterpart: `net/rds/ib_rdma.c` (`rds_ib_get_mr`, `rds_ib_free_mr` and the MR pools)
//! and `ib_frmr.c`.
//!
//! [`DevMr`] (the device registration: `ib_reg_user_mr`, or on iWARP a fast registration made
//! by [`super::frwr`]), [`RevocableMr`] (its slot in the device's list), [`IbMr`] (the handle the
//! core keeps) and [`IbMrReg`] (what dropping it undoes: on iWARP with a fence,
//! [`super::fence`]), and `MrOps for IbTransport`, which makes them.

use super::fence::{fence_later, Unfenced};
use super::frwr;
use super::{IbDev, IbTransport, MR_8K_PAGES};
use crate::bindings::ib::{FastMr, UserMr};
use crate::bindings::mm::random_u32;
use crate::bindings::sync::{DropInProcess, ProcessCtx, ProcessDrop};
use crate::proto::{loop_region, RdsIovec, Region, Stat};
use crate::rdma::RegPages;
use crate::stats;
use crate::transport::{MrHandle, MrOps, RegRequest};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::RBTreeNodeReservation,
    sync::{Arc, Mutex},
};

/// A registration on a device: by `ib_reg_user_mr` (IB, RoCE) or fast registration (iWARP).
/// Dropping it revokes it.
pub(super) enum DevMr {
    User(UserMr),
    /// With the pages it maps.
    Fast(FastMr<RegPages>),
}

impl DevMr {
    fn rkey(&self) -> u32 {
        match self {
            DevMr::User(m) => m.rkey(),
            DevMr::Fast(m) => m.rkey(),
        }
    }
}

/// A registration's device MR, listed by its device, while it is valid: the device's removal
/// revokes it (takes the MR, deregistering it before the PD goes), or the registration's
/// owner deregisters it; `None` after either.
pub(super) type RevocableMr = Mutex<Option<DevMr>>;

/// A registration on an RDMA device (C: an FRWR or FMR of `ib_rdma.c`): made with
/// `ib_reg_user_mr` on the device's PD (on iWARP, by fast registration on the device's service
/// connection: `frwr`), so it belongs to the device, not to a connection. It
/// needs no connection to be made, is usable on every connection of the device, outlives
/// reconnects, and is revoked by `ib_dereg_mr`, which returns only once no peer can reach the
/// memory. Peers address it from the random page-aligned base of its region (the cookie's
/// offset, as loopback's model does), not from 0.
struct IbMr {
    rkey: u32,
    region: Region,
    /// Dropped (deregistration and unpinning) in process context.
    _reg: ProcessDrop<IbMrReg>,
}

impl MrHandle for IbMr {
    fn rkey(&self) -> u32 {
        self.rkey
    }

    fn region(&self) -> Region {
        self.region
    }
}

/// What dropping an [`IbMr`] undoes, in process context: the device registration (unless the
/// device's removal revoked it first), then the core's pin of the pages (which a fast
/// registration holds itself).
struct IbMrReg {
    dev: Arc<IbDev>,
    rkey: u32,
    /// Of C's 8 KiB pool's size (for the counters).
    small: bool,
    cell: Arc<RevocableMr>,
    /// The pages of a registration by `ib_reg_user_mr` (which pins them again itself).
    _pages: Option<RegPages>,
}

impl DropInProcess for IbMrReg {
    fn end(self, ctx: &ProcessCtx) {
        let IbMrReg {
            dev,
            rkey,
            small,
            cell,
            _pages: pages,
        } = self;
        // Deregistered here, under the cell's lock, taken before the registration leaves the
        // device's list: the device's removal either finds it listed and waits for this on the
        // cell's lock before the PD goes, or finds the cell empty. (Lock order: the cell,
        // then `mrs`.) The pages are unpinned after.
        let mut cell = cell.lock();
        let listed = dev.mrs.lock().remove(&rkey);
        drop(listed);
        let mr = cell.take();
        if mr.is_some() {
            stats::inc(Stat::RsIbMrDeregistered);
        }
        stats::inc(if small {
            Stat::IbRdmaMr8kFree
        } else {
            Stat::IbRdmaMr1mFree
        });
        match mr {
            Some(DevMr::Fast(mut f)) => {
                // iWARP (siw) looks a registration up once per READ RESPONSE: one that started
                // before the deregistration goes on reading the pages. Unreachable from here
                // (what `RDS_FREE_MR` promises), they stay mapped and pinned until every QP of
                // the device is past what it was doing: the device's next fence round, which
                // does not hold up this deregistration, or any other.
                f.deregister(ctx);
                fence_later(&dev, Unfenced::new(f), ctx);
            }
            other => {
                drop(other);
                drop(pages);
            }
        }
        drop(cell);
    }
}

impl MrOps for IbTransport {
    fn register(&self, req: RegRequest, ctx: &ProcessCtx) -> Result<Arc<dyn MrHandle>> {
        let dev = self.find_addr(&req.laddr, ctx).ok_or(ENODEV)?;
        let vec = RdsIovec {
            addr: req.addr,
            bytes: req.len,
        };
        let region = loop_region(&vec, random_u32());
        // C's pool of the registration's size, for its counters.
        let small = vec.pages() <= MR_8K_PAGES;
        if dev.attrs.iwarp && vec.pages() > u64::from(dev.attrs.max_fast_reg_pages) {
            // More pages than one fast registration maps (siw: 256, so a 1 MiB range that does
            // not start on a page boundary). C's `rds_ib_map_frmr` fails such a mapping with
            // `EINVAL`.
            return Err(EINVAL);
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let cell = Arc::pin_init(new_mutex!(None, "IbMr::cell"), GFP_KERNEL)?;
        let (rkey, pages) = if dev.attrs.iwarp {
            // siw takes the user address as an `ib_reg_user_mr` registration's iova whatever
            // it is asked for, which a cookie's 32-bit offset cannot carry: fast registration.
            let rkey = frwr::register(
                &dev,
                &req.laddr,
                req.pages,
                (req.addr % crate::bindings::mm::PAGE_SIZE as u64) as usize,
                req.len,
                u64::from(region.offset),
                req.remote_write,
                &cell,
                node,
                ctx,
            )?;
            (rkey, None)
        } else {
            let pd = dev.pd.lock();
            let pd = pd.as_ref().ok_or(ENODEV)?;
            // `cell` (listed by the device below, under the PD's lock) gets the MR: the device's
            // removal revokes it, else `IbMrReg`'s drop deregisters it, in process context.
            let mr = UserMr::register(
                pd,
                req.addr,
                req.len,
                u64::from(region.offset),
                req.remote_write,
                dev.attrs.atomics,
                ctx,
            )?;
            let mr = DevMr::User(mr);
            let rkey = mr.rkey();
            *cell.lock() = Some(mr);
            let old = dev.mrs.lock().insert(node.into_node(rkey, cell.clone()));
            drop(old);
            (rkey, Some(req.pages))
        };
        stats::inc(Stat::RsIbMrRegistered);
        stats::inc(if small {
            Stat::IbRdmaMr8kAlloc
        } else {
            Stat::IbRdmaMr1mAlloc
        });
        let reg = ProcessDrop::new(
            IbMrReg {
                dev,
                rkey,
                small,
                cell,
                _pages: pages,
            },
            GFP_KERNEL,
            ctx,
        )?;
        let mr: Arc<dyn MrHandle> = Arc::new(
            IbMr {
                rkey,
                region,
                _reg: reg,
            },
            GFP_KERNEL,
        )?;
        Ok(mr)
    }

    fn flush(&self, _ctx: &ProcessCtx) {}
}
