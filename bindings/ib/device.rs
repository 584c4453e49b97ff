// SPDX-License-Identifier: GPL-2.0

//! An RDMA device, as the device core lends it to the ib_client ([`Device`]), the attributes
//! the transport reads of it ([`DevAttrs`]), and the device that serves a local address
//! ([`Device::for_addr`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h): `struct ib_device`,
//! its `attrs` (`struct ib_device_attr`) and name, `ib_device_get_by_netdev`, `ib_device_put`;
//! the glue's `rds_rs_ib_dev_attrs`, `rds_rs_ib_dev_name` and `rds_rs_ib_dev_for_addr`
//! (`ib_glue.c`).

use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::ptr::{self, NonNull};

/// Attributes of a device.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DevAttrs {
    /// Work requests per queue.
    pub(crate) max_qp_wr: u32,
    /// Scatter/gather entries per send work request.
    pub(crate) max_send_sge: u32,
    /// An iWARP device (RNIC), not InfiniBand or RoCE.
    pub(crate) iwarp: bool,
    /// The device executes atomic operations (`atomic_cap` is not `IB_ATOMIC_NONE`).
    pub(crate) atomics: bool,
    /// The device executes the masked atomics too (`masked_atomic_cap`).
    pub(crate) masked_atomics: bool,
    /// Memory registrations the device holds at most.
    pub(crate) max_mr: u32,
    /// Pages one fast registration may map (`max_fast_reg_page_list_len`).
    pub(crate) max_fast_reg_pages: u32,
    /// Local pieces of an RDMA READ work request (`max_sge_rd`: 1 on siw).
    pub(crate) max_sge_rd: u32,
}

/// An RDMA device, borrowed from the device core.
///
/// # Invariants
///
/// `ptr` points to a registered `ib_device`; users hold a `Device` only between the ib_client's
/// `add` and the return of its `remove` for that device (or while they hold a reference taken
/// with [`Device::for_addr`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Device {
    pub(super) ptr: NonNull<raw::ib_device>,
}

// SAFETY: A device may be used from any thread; the device core serialises what needs it.
unsafe impl Send for Device {}
// SAFETY: As above; `&Device` only reads attributes or calls thread-safe verbs.
unsafe impl Sync for Device {}

impl Device {
    pub(super) fn as_ptr(self) -> *mut raw::ib_device {
        self.ptr.as_ptr()
    }

    /// Its identity, as [`Device::for_addr`] returns it (for comparison only).
    pub(crate) fn id(self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Its attributes.
    pub(crate) fn attrs(self) -> DevAttrs {
        let mut a = raw::rds_rs_ib_attrs::default();
        // SAFETY: The device is registered (type invariant); `a` is valid for writes.
        unsafe { raw::rds_rs_ib_dev_attrs(self.as_ptr(), &mut a) };
        DevAttrs {
            max_qp_wr: a.max_qp_wr,
            max_send_sge: a.max_send_sge,
            iwarp: a.iwarp,
            atomics: a.atomic_cap != 0,
            masked_atomics: a.masked_atomic_cap != 0,
            max_mr: a.max_mr,
            max_fast_reg_pages: a.max_fast_reg_page_list_len,
            max_sge_rd: a.max_sge_rd,
        }
    }

    /// Its name (`rxe0`, `siw0`, ...), up to 31 bytes.
    pub(crate) fn name(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        // SAFETY: The device is registered (type invariant); its name is a NUL-terminated
        // string owned by the device.
        let name =
            unsafe { kernel::str::CStr::from_char_ptr(raw::rds_rs_ib_dev_name(self.as_ptr())) };
        for (o, b) in out.iter_mut().zip(name.as_bytes().iter().take(31)) {
            *o = *b;
        }
        out
    }

    /// Whether an RDMA device serves the interface that holds the local address `addr` (a
    /// 16-byte address, IPv4 v4-mapped) in the initial namespace; returns the device's
    /// identity (its address, for comparison only).
    pub(crate) fn for_addr(addr: &[u8; 16], scope_id: u32, _ctx: &ProcessCtx) -> Option<usize> {
        // SAFETY: `init_net` is a static; `addr` is valid for 16 bytes. The helper may sleep,
        // which `_ctx` allows.
        let dev = unsafe {
            raw::rds_rs_ib_dev_for_addr(ptr::addr_of_mut!(raw::init_net), addr.as_ptr(), scope_id)
        };
        if dev.is_null() {
            return None;
        }
        let id = dev as usize;
        // SAFETY: The helper returned a referenced device; the reference is dropped here.
        unsafe { raw::rds_rs_ib_dev_put(dev) };
        Some(id)
    }
}
