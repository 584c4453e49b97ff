// SPDX-License-Identifier: GPL-2.0

//! Memory registrations on a PD: of user memory ([`UserMr`]), fast registrations of pinned
//! pages ([`FastMr`], iWARP), and the idle MR a fence names ([`IdleMr`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h): `ib_reg_user_mr`
//! (through the device's `reg_user_mr`), `ib_alloc_mr`, `ib_map_mr_sg`,
//! `ib_update_fast_reg_key`, `ib_dereg_mr`; the glue's `rds_rs_ib_frmr_map`,
//! `rds_rs_ib_frmr_dereg`, `rds_rs_ib_frmr_free` and `rds_rs_ib_alloc_idle_mr` (`ib_glue.c`).
//! The work requests that make a [`FastMr`] valid and that name an [`IdleMr`] are the QP's
//! ([`super::qp`]).

use super::pd::Pd;
use crate::bindings::mm::PinOwner;
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*, sync::Arc};

/// A registration of user memory on a device (`ib_reg_user_mr`): the device pins the pages
/// (through the calling process's `mm`), and peers reach them by the r_key, at addresses that
/// start at the iova given. Deregistered when dropped (`ib_dereg_mr`): once the drop returns,
/// no peer can reach the memory. Dropping may sleep: the owner drops it in process context.
///
/// # Invariants
///
/// `ptr` was returned by `ib_reg_user_mr` on `_pd` and is owned by this object.
pub(crate) struct UserMr {
    ptr: NonNull<raw::ib_mr>,
    rkey: u32,
    /// The PD it was made on, kept until after it is deregistered (fields drop after `drop`).
    _pd: Arc<Pd>,
}

// SAFETY: A registration may be used and deregistered from any thread.
unsafe impl Send for UserMr {}
// SAFETY: Shared access only reads the r_key (a copy).
unsafe impl Sync for UserMr {}

impl UserMr {
    /// Registers the calling process's `len` bytes at user address `start`, which peers
    /// address from `iova` on (its offset in a page must be `start`'s); peers may read them,
    /// and with `remote_write` also write them (and run atomics on them, when `atomics`).
    /// Deregistering may sleep: the owner drops it in process context.
    pub(crate) fn register(
        pd: &Arc<Pd>,
        start: u64,
        len: u64,
        iova: u64,
        remote_write: bool,
        atomics: bool,
        _ctx: &ProcessCtx,
    ) -> Result<Self> {
        let mut rkey = 0u32;
        // SAFETY: The PD is live (`pd` is borrowed); `rkey` is valid for writes. Pinning the
        // pages may sleep, which `_ctx` allows; the memory is the caller's process's, which
        // is the one running this system call.
        let p = from_err_ptr(unsafe {
            raw::rds_rs_ib_reg_user_mr(
                pd.ptr.as_ptr(),
                start,
                len,
                iova,
                remote_write,
                atomics,
                &mut rkey,
            )
        })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: registered just now on `pd`, which it holds.
        Ok(Self {
            ptr,
            rkey,
            _pd: pd.clone(),
        })
    }

    /// The r_key peers name the registration by.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }
}

impl Drop for UserMr {
    fn drop(&mut self) {
        // SAFETY: Owned, and its PD is live (held: type invariant); the owner drops it in
        // process context, where deregistering may sleep.
        let r = unsafe { raw::rds_rs_ib_dereg_mr(self.ptr.as_ptr()) };
        if r != 0 {
            pr_warn!("ib_dereg_mr failed: {}\n", r);
        }
    }
}

/// A fast registration (FRWR) of pinned pages on a device (`ib_alloc_mr` + `ib_map_mr_sg`),
/// for devices whose `ib_reg_user_mr` cannot take the address peers use (siw). It is made
/// valid by an `IB_WR_REG_MR` work request ([`Qp::register_mr`]) and revoked when dropped
/// (`ib_dereg_mr`, then a grace period, then the pages are unmapped): once the drop returns,
/// no new access of a peer finds the memory. Dropping sleeps: the owner drops it in process
/// context.
///
/// # Invariants
///
/// `ptr` was returned by `rds_rs_ib_frmr_map` on `_pd` over the pages of `_pages` and is owned
/// by this object; `_pages` keeps them pinned until after it is freed.
///
/// [`Qp::register_mr`]: super::qp::Qp::register_mr
pub(crate) struct FastMr<P: PinOwner> {
    pub(super) ptr: NonNull<raw::rds_rs_frmr>,
    rkey: u32,
    /// The PD it was made on, kept until after it is freed (fields drop after `drop`).
    _pd: Arc<Pd>,
    /// The pages it maps, unpinned after it is freed.
    _pages: P,
}

// SAFETY: The registration may be used and freed from any thread; `P` is `Send`.
unsafe impl<P: PinOwner> Send for FastMr<P> {}
// SAFETY: Shared access only reads the r_key (a copy) or hands the pointer to a work request;
// `P` is `Sync`.
unsafe impl<P: PinOwner> Sync for FastMr<P> {}

impl<P: PinOwner> FastMr<P> {
    /// Maps `len` bytes of `pages` from `offset` (in the first page) into a new fast
    /// registration on `pd`, addressed by peers from `iova`, with a fresh key; the
    /// registration keeps `pages` (dropped with it, in process context: freeing it sleeps). It
    /// is not valid until an `IB_WR_REG_MR` of it completed ([`Qp::register_mr`]). `EINVAL` if
    /// the device maps fewer of the pages than asked (the caller checks `max_fast_reg_pages`
    /// first; above it, siw's `ib_alloc_mr` fails with `ENOMEM`).
    ///
    /// [`Qp::register_mr`]: super::qp::Qp::register_mr
    pub(crate) fn map(
        pd: &Arc<Pd>,
        pages: P,
        offset: usize,
        len: u64,
        iova: u64,
        _ctx: &ProcessCtx,
    ) -> Result<Self> {
        let raw_pages = pages.pinned().raw_pages();
        let n = u32::try_from(raw_pages.len()).map_err(|_| EINVAL)?;
        let off = u32::try_from(offset).map_err(|_| EINVAL)?;
        let mut rkey = 0u32;
        // Allocating and mapping may sleep, which `_ctx` allows; the helper only reads the page
        // array (`cast_mut` is for its C signature).
        // SAFETY: `pd` is live (borrowed); `raw_pages` holds `n` pinned pages of `pages`, which
        // the registration keeps (`PinOwner`); `rkey` is writable.
        let p = from_err_ptr(unsafe {
            raw::rds_rs_ib_frmr_map(
                pd.ptr.as_ptr(),
                raw_pages.as_ptr().cast_mut(),
                n,
                off,
                len,
                iova,
                &mut rkey,
            )
        })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: mapped just now on `pd` over `pages`, both of which it holds.
        Ok(Self {
            ptr,
            rkey,
            _pd: pd.clone(),
            _pages: pages,
        })
    }

    /// The r_key (and l_key) of the registration.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Deregisters the MR now (no new access finds it), keeping the pages mapped until the
    /// object is dropped: a device that was still sending from them (siw's READ RESPONSE in
    /// progress) may go on until the owner fenced it ([`Qp::post_fence`]).
    ///
    /// [`Qp::post_fence`]: super::qp::Qp::post_fence
    pub(crate) fn deregister(&mut self, _ctx: &ProcessCtx) {
        // SAFETY: Owned, its PD is live and its pages pinned (type invariant); deregistering
        // and the grace period may sleep, which `_ctx` allows. The helper does it once.
        unsafe { raw::rds_rs_ib_frmr_dereg(self.ptr.as_ptr()) };
    }
}

impl<P: PinOwner> Drop for FastMr<P> {
    fn drop(&mut self) {
        // SAFETY: Owned, its PD is live and its pages pinned (type invariant); the owner
        // drops it in process context, where deregistering and the grace period may sleep.
        unsafe { raw::rds_rs_ib_frmr_free(self.ptr.as_ptr()) };
    }
}

/// An MR of a PD that is never made valid: what fence work requests ([`Qp::post_fence`])
/// invalidate, which changes nothing. Freed when dropped.
///
/// # Invariants
///
/// `ptr` was returned by `ib_alloc_mr` on `_pd` and is owned by this object; every QP a fence
/// of it was posted on holds it until the QP is gone ([`Qp::post_fence`]).
///
/// [`Qp::post_fence`]: super::qp::Qp::post_fence
pub(crate) struct IdleMr {
    ptr: NonNull<raw::ib_mr>,
    rkey: u32,
    /// The PD it was made on, kept until after it is freed (fields drop after `drop`).
    _pd: Arc<Pd>,
}

// SAFETY: The MR is only freed (once, by its owner) and its key read (a copy).
unsafe impl Send for IdleMr {}
// SAFETY: As above.
unsafe impl Sync for IdleMr {}

impl IdleMr {
    /// A new idle MR on `pd`. Freeing it may sleep: the last holder drops it in process
    /// context.
    pub(crate) fn new(pd: &Arc<Pd>, _ctx: &ProcessCtx) -> Result<Arc<Self>> {
        let mut rkey = 0u32;
        // SAFETY: The PD is live (borrowed); `rkey` is valid for writes; allocating may sleep,
        // which `_ctx` allows.
        let p = from_err_ptr(unsafe { raw::rds_rs_ib_alloc_idle_mr(pd.ptr.as_ptr(), &mut rkey) })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: allocated just now on `pd`, which it holds; no fence names it yet.
        Ok(Arc::new(
            Self {
                ptr,
                rkey,
                _pd: pd.clone(),
            },
            GFP_KERNEL,
        )?)
    }

    /// Its key.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }
}

impl Drop for IdleMr {
    fn drop(&mut self) {
        // SAFETY: Owned, its PD is live (held) and no QP that a fence of it was posted on is
        // left (each holds it: type invariant); the last holder drops it in process context.
        unsafe { raw::rds_rs_ib_dereg_mr(self.ptr.as_ptr()) };
    }
}
