// SPDX-License-Identifier: GPL-2.0

//! DMA mapping for a device: kernel buffers a QP keeps mapped ([`DmaBuf`]) and the mappings of
//! a work request's data ([`DmaMapping`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h):
//! `ib_dma_map_single`, `ib_dma_unmap_single`, `ib_dma_map_page`, `ib_dma_unmap_page`,
//! `ib_dma_mapping_error`, `ib_dma_sync_single_for_cpu`, `ib_dma_sync_single_for_device`.

use super::device::Device;
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::ptr::{self, NonNull};
use kernel::{ffi::c_int, page::Page, prelude::*};

/// Memory mapped for a device: `len` bytes of a kernel buffer (headers), unmapped and freed
/// when dropped. The CPU and the device take turns on each region: the owner posts a region
/// only when it is done with it, and touches it again only after the request completed.
///
/// # Invariants
///
/// `buf` is a `len`-byte allocation owned by this object, mapped at `addr` for `dev` in the
/// direction `to_device` until dropped.
pub(crate) struct DmaBuf {
    buf: NonNull<u8>,
    pub(super) len: usize,
    cap: usize,
    addr: u64,
    dev: Device,
    to_device: bool,
}

// SAFETY: The buffer is owned; access goes through `&self`/`&mut self` copies.
unsafe impl Send for DmaBuf {}
// SAFETY: Shared access reads and writes through raw copies of disjoint regions the caller
// owns at the time (see the type's documentation); no references into the buffer escape.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// `len` zeroed bytes mapped for `dev` (`to_device`: the device reads them).
    pub(crate) fn new(dev: Device, len: usize, to_device: bool, _ctx: &ProcessCtx) -> Result<Self> {
        let v = KVec::<u8>::from_elem(0, len, GFP_KERNEL)?;
        let (p, l, cap) = v.into_raw_parts();
        let mut addr = 0u64;
        // SAFETY: `p` is valid for `l` bytes; mapping may sleep, which `_ctx` allows.
        let r = unsafe {
            raw::rds_rs_ib_map_single(dev.as_ptr(), p.cast(), l, c_int::from(to_device), &mut addr)
        };
        if r != 0 {
            // SAFETY: Taken back from `into_raw_parts` above.
            drop(unsafe { KVec::from_raw_parts(p, l, cap) });
            return Err(ENOMEM);
        }
        let buf = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: allocated and mapped above.
        Ok(Self {
            buf,
            len,
            cap,
            addr,
            dev,
            to_device,
        })
    }

    /// The device address of byte `off`.
    pub(crate) fn dma(&self, off: usize) -> u64 {
        self.addr + off as u64
    }

    /// Copies `src` into the buffer at `off` (for the device to read after a post).
    pub(crate) fn write(&self, off: usize, src: &[u8]) -> Result {
        let end = off.checked_add(src.len()).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // SAFETY: In bounds (checked); the caller owns the region (type documentation), so
        // nothing else writes it now; raw copies create no references into the buffer.
        unsafe {
            raw::rds_rs_ib_sync_for_cpu(
                self.dev.as_ptr(),
                self.dma(off),
                src.len(),
                c_int::from(self.to_device),
            );
            ptr::copy_nonoverlapping(src.as_ptr(), self.buf.as_ptr().add(off), src.len());
            raw::rds_rs_ib_sync_for_device(
                self.dev.as_ptr(),
                self.dma(off),
                src.len(),
                c_int::from(self.to_device),
            );
        }
        Ok(())
    }

    /// Copies bytes of the buffer at `off` into `dst` (what the device wrote, after the
    /// request completed).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        let end = off.checked_add(dst.len()).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // SAFETY: As for `write`.
        unsafe {
            raw::rds_rs_ib_sync_for_cpu(
                self.dev.as_ptr(),
                self.dma(off),
                dst.len(),
                c_int::from(self.to_device),
            );
            ptr::copy_nonoverlapping(self.buf.as_ptr().add(off), dst.as_mut_ptr(), dst.len());
            raw::rds_rs_ib_sync_for_device(
                self.dev.as_ptr(),
                self.dma(off),
                dst.len(),
                c_int::from(self.to_device),
            );
        }
        Ok(())
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: Mapped and owned (type invariant); the owner drained the QP first, so the
        // device no longer uses it.
        unsafe {
            raw::rds_rs_ib_unmap_single(
                self.dev.as_ptr(),
                self.addr,
                self.len,
                c_int::from(self.to_device),
            );
            drop(KVec::from_raw_parts(self.buf.as_ptr(), self.len, self.cap));
        }
    }
}

/// A mapping of some bytes for a device to read (a SEND's data) or write (a receive buffer):
/// a page range or a kernel buffer; unmapped by [`DmaMapping::unmap`] (or when dropped).
///
/// # Invariants
///
/// `addr` maps `len` bytes for `dev` in the direction `to_device`, from a page range
/// (`page`) or a single buffer, until unmapped.
pub(crate) struct DmaMapping {
    dev: Device,
    pub(super) addr: u64,
    pub(super) len: usize,
    page: bool,
    to_device: bool,
}

impl DmaMapping {
    /// Maps `len` bytes of `page` at `off`.
    pub(crate) fn page(
        dev: Device,
        page: &Page,
        off: usize,
        len: usize,
        to_device: bool,
    ) -> Result<Self> {
        if off
            .checked_add(len)
            .is_none_or(|e| e > kernel::page::PAGE_SIZE)
        {
            return Err(EINVAL);
        }
        // SAFETY: The page is allocated (borrowed) and the range is inside it (checked above).
        unsafe { Self::raw_page(dev, page.as_ptr().cast(), off, len, to_device) }
    }

    /// Maps `len` bytes of the page `page` at `off`.
    ///
    /// # Safety
    ///
    /// `page` is a page that stays allocated while the mapping exists, and `off + len` is at
    /// most the page size.
    pub(super) unsafe fn raw_page(
        dev: Device,
        page: *mut raw::page,
        off: usize,
        len: usize,
        to_device: bool,
    ) -> Result<Self> {
        let mut addr = 0u64;
        // SAFETY: Per the function's safety requirements; `addr` is valid for writes.
        let r = unsafe {
            raw::rds_rs_ib_map_page(
                dev.as_ptr(),
                page,
                off,
                len,
                c_int::from(to_device),
                &mut addr,
            )
        };
        if r != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: mapped above.
        Ok(Self {
            dev,
            addr,
            len,
            page: true,
            to_device,
        })
    }

    /// Maps a kernel buffer for the device to read.
    ///
    /// # Safety
    ///
    /// `bytes` stays allocated (and unwritten) until the mapping is unmapped.
    pub(crate) unsafe fn bytes(dev: Device, bytes: &[u8]) -> Result<Self> {
        let mut addr = 0u64;
        // SAFETY: `bytes` is a live kernel buffer (physically contiguous: kmalloc'd), valid for
        // its length; the caller keeps it so.
        let r = unsafe {
            raw::rds_rs_ib_map_single(
                dev.as_ptr(),
                bytes.as_ptr().cast_mut().cast(),
                bytes.len(),
                1,
                &mut addr,
            )
        };
        if r != 0 {
            return Err(ENOMEM);
        }
        // INVARIANT: mapped above.
        Ok(Self {
            dev,
            addr,
            len: bytes.len(),
            page: false,
            to_device: true,
        })
    }

    /// The device address.
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    /// Unmaps now.
    pub(crate) fn unmap(self) {
        drop(self);
    }
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        // SAFETY: Mapped (type invariant), unmapped once, here.
        unsafe {
            if self.page {
                raw::rds_rs_ib_unmap_page(
                    self.dev.as_ptr(),
                    self.addr,
                    self.len,
                    c_int::from(self.to_device),
                );
            } else {
                raw::rds_rs_ib_unmap_single(
                    self.dev.as_ptr(),
                    self.addr,
                    self.len,
                    c_int::from(self.to_device),
                );
            }
        }
    }
}
