// SPDX-License-Identifier: GPL-2.0

//! A protection domain ([`Pd`]): what QPs and memory registrations of a device are made on.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h): `ib_alloc_pd`,
//! `ib_dealloc_pd`, `struct ib_pd`'s `local_dma_lkey`.

use super::device::Device;
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*};

/// A protection domain, shared (`Arc<Pd>`) by what is made on it: each QP and registration
/// holds it, so it is deallocated only after the last of them is gone.
///
/// # Invariants
///
/// `ptr` was allocated by `ib_alloc_pd` on `dev` and is owned by this object.
pub(crate) struct Pd {
    pub(super) ptr: NonNull<raw::ib_pd>,
    dev: Device,
}

// SAFETY: A PD may be used and freed from any thread.
unsafe impl Send for Pd {}
// SAFETY: Shared access only reads its lkey.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `dev`.
    pub(crate) fn new(dev: Device, _ctx: &ProcessCtx) -> Result<Self> {
        // SAFETY: The device is registered; allocating may sleep, which `_ctx` allows.
        let p = from_err_ptr(unsafe { raw::rds_rs_ib_alloc_pd(dev.as_ptr()) })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: allocated just now.
        Ok(Self { ptr, dev })
    }

    /// The device's local DMA lkey.
    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: The PD is live (type invariant).
        unsafe { raw::rds_rs_ib_pd_lkey(self.ptr.as_ptr()) }
    }

    /// The device.
    pub(crate) fn device(&self) -> Device {
        self.dev
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant); every QP and registration made on it holds a
        // reference to it (`Qp`, `UserMr`, `IdleMr`, `FastMr`), so none is left.
        unsafe { raw::rds_rs_ib_dealloc_pd(self.ptr.as_ptr()) };
    }
}
