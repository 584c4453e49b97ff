// SPDX-License-Identifier: GPL-2.0

//! A count of parties to wait for ([`Waiter`]): the QP's own requests (a fence, a
//! registration) arrive from their completions, in softirq context, and a process waits for
//! them with a timeout.
//!
//! C header: [`include/linux/completion.h`](srctree/include/linux/completion.h):
//! `complete_all`, `wait_for_completion_timeout`, with an `atomic_t` count of parties; the
//! glue's `rds_rs_waiter_*` (`ib_glue.c`).

use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

/// A count of parties to wait for: [`Waiter::wait`] returns once every party
/// [`Waiter::add`]ed, and the creator, [`Waiter::arrive`]d.
///
/// # Invariants
///
/// `ptr` was returned by `rds_rs_waiter_new` and is owned by this object.
pub(crate) struct Waiter {
    ptr: NonNull<raw::rds_rs_waiter>,
}

// SAFETY: The counter is atomic and the completion is the kernel's, made for use across
// threads.
unsafe impl Send for Waiter {}
// SAFETY: As above.
unsafe impl Sync for Waiter {}

impl Waiter {
    /// A waiter with one party, the creator.
    pub(crate) fn new() -> Result<Arc<Self>> {
        // SAFETY: No preconditions.
        let p = unsafe { raw::rds_rs_waiter_new() };
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: allocated just now.
        Ok(Arc::new(Self { ptr }, GFP_KERNEL)?)
    }

    /// One more party.
    pub(crate) fn add(&self) {
        // SAFETY: Live (type invariant).
        unsafe { raw::rds_rs_waiter_add(self.ptr.as_ptr()) }
    }

    /// A party is done (any context).
    pub(crate) fn arrive(&self) {
        // SAFETY: Live (type invariant) for as long as the caller's reference, which
        // `complete_all` inside does not outlast.
        unsafe { raw::rds_rs_waiter_arrive(self.ptr.as_ptr()) }
    }

    /// Waits until every party arrived, at most `ms` milliseconds: whether they did.
    pub(crate) fn wait(&self, ms: u32, _ctx: &ProcessCtx) -> bool {
        // SAFETY: Live (type invariant); the wait sleeps, which `_ctx` allows.
        unsafe { raw::rds_rs_waiter_wait(self.ptr.as_ptr(), ms) }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant); no one arrives any more (they hold references).
        unsafe { raw::rds_rs_waiter_free(self.ptr.as_ptr()) }
    }
}
