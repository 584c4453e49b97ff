// SPDX-License-Identifier: GPL-2.0

//! Completion queues ([`Cq`]) and completions: what a work request names ([`WrCqe`]), who
//! handles its completion ([`WcHandler`]) and what it learns ([`Wc`], [`WcStatus`]); the
//! glue's completion callback.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h): `ib_alloc_cq`
//! (`IB_POLL_SOFTIRQ`), `ib_free_cq`, `struct ib_cqe` and its `done`, `struct ib_wc`,
//! `enum ib_wc_status`; the glue's `rds_rs_ib_cqe_init` and its `done`, which calls
//! `rds_rs_ib_wc` (here) (`ib_glue.c`).

use super::device::Device;
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, ffi::c_int, prelude::*, types::Opaque};

/// A completion queue polled in softirq context (`IB_POLL_SOFTIRQ`); freed when dropped.
///
/// # Invariants
///
/// `ptr` was allocated by `ib_alloc_cq` and is owned by this object.
pub(crate) struct Cq {
    pub(super) ptr: NonNull<raw::ib_cq>,
}

// SAFETY: A CQ may be used and freed from any thread.
unsafe impl Send for Cq {}
// SAFETY: Shared access only hands the pointer to `rdma_create_qp`.
unsafe impl Sync for Cq {}

impl Cq {
    /// A CQ of `nr_cqe` entries on `dev`.
    pub(crate) fn new(dev: Device, nr_cqe: u32, vector: u32, _ctx: &ProcessCtx) -> Result<Self> {
        let n = c_int::try_from(nr_cqe).map_err(|_| EINVAL)?;
        let v = c_int::try_from(vector).map_err(|_| EINVAL)?;
        // SAFETY: The device is registered; allocating may sleep, which `_ctx` allows.
        let p = from_err_ptr(unsafe { raw::rds_rs_ib_alloc_cq(dev.as_ptr(), n, v) })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: allocated just now.
        Ok(Self { ptr })
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant); the QPs using it are destroyed first by construction
        // of the transport (`ib_free_cq` waits for the polling work).
        unsafe { raw::rds_rs_ib_free_cq(self.ptr.as_ptr()) };
    }
}

c_enum! {
    /// How a work request completed: C's `enum ib_wc_status` (and `Other(i32)`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum WcStatus {
        /// `IB_WC_SUCCESS`.
        Success = 0,
        /// `IB_WC_LOC_LEN_ERR`: a local length error (a receive too small for the message).
        LocLenErr = 1,
        /// `IB_WC_LOC_QP_OP_ERR`: a local QP operation error.
        LocQpOpErr = 2,
        /// `IB_WC_LOC_EEC_OP_ERR`: a local EE context operation error.
        LocEecOpErr = 3,
        /// `IB_WC_LOC_PROT_ERR`: a local protection error (a bad l_key).
        LocProtErr = 4,
        /// `IB_WC_WR_FLUSH_ERR`: the QP is in error or drained; the request did not execute.
        WrFlushErr = 5,
        /// `IB_WC_MW_BIND_ERR`: a memory window bind error.
        MwBindErr = 6,
        /// `IB_WC_BAD_RESP_ERR`: a bad response from the peer.
        BadRespErr = 7,
        /// `IB_WC_LOC_ACCESS_ERR`: a local access error.
        LocAccessErr = 8,
        /// `IB_WC_REM_INV_REQ_ERR`: the peer found the request invalid.
        RemInvReqErr = 9,
        /// `IB_WC_REM_ACCESS_ERR`: the peer refused a remote access (r_key, range, permission).
        RemAccessErr = 10,
        /// `IB_WC_REM_OP_ERR`: the peer failed to execute the request.
        RemOpErr = 11,
        /// `IB_WC_RETRY_EXC_ERR`: the peer did not answer (transport retries exhausted).
        RetryExcErr = 12,
        /// `IB_WC_RNR_RETRY_EXC_ERR`: the peer had no receive posted (RNR retries exhausted).
        RnrRetryExcErr = 13,
        /// `IB_WC_LOC_RDD_VIOL_ERR`: a local RD domain violation.
        LocRddViolErr = 14,
        /// `IB_WC_REM_INV_RD_REQ_ERR`: the peer found the RD request invalid.
        RemInvRdReqErr = 15,
        /// `IB_WC_REM_ABORT_ERR`: the peer aborted the request.
        RemAbortErr = 16,
        /// `IB_WC_INV_EECN_ERR`: an invalid EE context number.
        InvEecnErr = 17,
        /// `IB_WC_INV_EEC_STATE_ERR`: an invalid EE context state.
        InvEecStateErr = 18,
        /// `IB_WC_FATAL_ERR`: a fatal error of the device.
        FatalErr = 19,
        /// `IB_WC_RESP_TIMEOUT_ERR`: a response timed out.
        RespTimeoutErr = 20,
        /// `IB_WC_GENERAL_ERR`: any other error.
        GeneralErr = 21,
    }
}

/// What a completion handler learns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wc {
    /// How the request completed.
    pub(crate) status: WcStatus,
    /// `enum ib_wc_opcode`.
    #[expect(dead_code, reason = "for RDMA completions (issue 11)")]
    pub(crate) opcode: i32,
    /// Bytes received (receives).
    pub(crate) byte_len: u32,
}

/// Who handles the completions of work requests naming a [`WrCqe`].
pub(crate) trait WcHandler: Send + Sync {
    /// The request with tag `tag` completed. Softirq context: the CQs are polled by their
    /// `irq_poll` (`IB_POLL_SOFTIRQ`, `ib_glue.c`), so this must not sleep (see the
    /// documentation of [`ib`](super)).
    fn done(&self, tag: u32, wc: Wc);
}

/// The `ib_cqe` a work request names, with who handles its completion.
///
/// # Invariants
///
/// `cqe.done` is the glue's completion callback; `handler`, when set, points to a live
/// handler for as long as a work request naming this `WrCqe` may complete (its owner drains
/// the QP before dropping either).
#[repr(C)]
pub(crate) struct WrCqe {
    cqe: Opaque<raw::ib_cqe>,
    handler: *const dyn WcHandler,
    tag: u32,
}

// SAFETY: The raw handler pointer is only dereferenced in completions, where the owner
// guarantees it is alive; the handler is `Send + Sync`.
unsafe impl Send for WrCqe {}
// SAFETY: As above.
unsafe impl Sync for WrCqe {}

impl WrCqe {
    /// A cqe for requests tagged `tag`, handled by `handler`.
    ///
    /// # Safety
    ///
    /// `handler` stays alive, and the `WrCqe` stays at the same address, until every work
    /// request posted with it has completed.
    pub(crate) unsafe fn new(handler: *const dyn WcHandler, tag: u32) -> Self {
        let cqe = Opaque::uninit();
        // SAFETY: `cqe` is valid for writes; the helper sets its `done`.
        unsafe { raw::rds_rs_ib_cqe_init(cqe.get()) };
        // INVARIANT: `done` set above; the caller vouches for `handler`.
        Self { cqe, handler, tag }
    }

    pub(super) fn raw(&self) -> *mut raw::ib_cqe {
        self.cqe.get()
    }
}

/// Called by the glue for every completion.
///
/// # Safety
///
/// `cqe` is the first field of a live `WrCqe` named by the completed request.
#[no_mangle]
unsafe extern "C" fn rds_rs_ib_wc(cqe: *mut raw::ib_cqe, status: c_int, opcode: c_int, len: u32) {
    // CAST: `cqe` is the first field of the `repr(C)` `WrCqe`, so the pointers coincide.
    let w = cqe.cast::<WrCqe>();
    // The glue's CQs are polled in softirq context (`IB_POLL_SOFTIRQ`): no `ProcessCtx`.
    // SAFETY: Per the function's safety requirements the `WrCqe` is live; its handler is alive
    // while requests naming it may complete (type invariant).
    unsafe {
        let h = &*(*w).handler;
        h.done(
            (*w).tag,
            Wc {
                status: WcStatus::from_raw(status),
                opcode,
                byte_len: len,
            },
        );
    }
}
