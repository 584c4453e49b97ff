// SPDX-License-Identifier: GPL-2.0

//! The test hooks of the test build (`--cfg rds_test`; C side in `testhooks.c`): knobs and
//! triggers under `/sys/kernel/debug/rds_rs`, and the tasklet with which the loopback
//! transport delivers from softirq context. In the production build the knobs read as off
//! and nothing of this is registered.

#[cfg(rds_test)]
use super::sync::ProcessCtx;
#[cfg(rds_test)]
use kernel::prelude::*;

/// What the debugfs triggers and the tasklet act on (the core's shared state).
#[cfg(rds_test)]
pub(crate) trait TestTarget: Send + Sync + 'static {
    /// The tasklet ran (softirq context): deliver what the loopback transport queued.
    fn softirq_run(&self);

    /// `reset`: drop every connection (they reconnect).
    fn reset_all(&self, ctx: &ProcessCtx) -> Result;

    /// `inject`: a frame arrives (`Documentation/testing.md` gives the layout).
    fn inject(&self, frame: &[u8], ctx: &ProcessCtx) -> Result;

    /// A KUnit case that needs the core's state: 0 for success, else the number of the first
    /// check that failed.
    fn kunit(&self, case: u32, ctx: &ProcessCtx) -> i32;
}

#[cfg(rds_test)]
mod imp {
    use super::super::raw;
    use super::super::sync::ProcessCtx;
    use super::TestTarget;
    use core::{
        ptr,
        sync::atomic::{AtomicPtr, Ordering},
    };
    use kernel::{error::from_result, ffi::c_int, prelude::*, sync::Arc};

    /// The registered target: a leaked `KBox<Arc<dyn TestTarget>>`, or null.
    static TARGET: AtomicPtr<Arc<dyn TestTarget>> = AtomicPtr::new(ptr::null_mut());

    /// The hooks, registered while this object exists.
    ///
    /// # Invariants
    ///
    /// While it exists, `TARGET` holds a box leaked by `new` and the C hooks are registered.
    pub(crate) struct TestHooks(());

    impl TestHooks {
        /// Publishes `target` and creates the debugfs files.
        pub(crate) fn new(target: Arc<dyn TestTarget>) -> Result<Self> {
            let b = KBox::new(target, GFP_KERNEL)?;
            let old = TARGET.swap(KBox::into_raw(b), Ordering::AcqRel);
            debug_assert!(old.is_null());
            // SAFETY: The helper creates static debugfs entries, removed in `drop`; their
            // handlers only borrow `TARGET`, published above.
            unsafe { raw::rds_rs_testhooks_init() };
            // INVARIANT: published and registered.
            Ok(Self(()))
        }
    }

    impl Drop for TestHooks {
        fn drop(&mut self) {
            // SAFETY: Registered (type invariant); removing the files waits for handlers in
            // progress and the tasklet is killed, so nothing borrows `TARGET` afterwards.
            unsafe { raw::rds_rs_testhooks_exit() };
            let p = TARGET.swap(ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: `p` came from `KBox::into_raw` in `new` (type invariant) and nothing
                // borrows it any more (see above).
                drop(unsafe { KBox::from_raw(p) });
            }
        }
    }

    /// Runs KUnit case `case` on the registered target (`-1` when there is none).
    pub(crate) fn kunit(case: u32) -> i32 {
        let ctx = ProcessCtx::enter();
        with_target(|t| t.kunit(case, &ctx)).unwrap_or(-1)
    }

    /// Calls `f` with the registered target, if any.
    fn with_target<R>(f: impl FnOnce(&dyn TestTarget) -> R) -> Option<R> {
        let p = TARGET.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: A non-null `TARGET` is a live box (the registration's invariant) that stays
        // so while hooks can run: `TestHooks::drop` unregisters them before freeing it.
        let t = unsafe { &*p };
        Some(f(&**t))
    }

    #[no_mangle]
    extern "C" fn rds_rs_test_softirq_run() {
        with_target(|t| t.softirq_run());
    }

    #[no_mangle]
    extern "C" fn rds_rs_test_reset_all() -> c_int {
        from_result(|| {
            let ctx = ProcessCtx::enter();
            with_target(|t| t.reset_all(&ctx)).unwrap_or(Err(ENODEV))?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `buf` is valid for reads of `len` bytes for the call (the C handler's copy of the
    /// written data).
    #[no_mangle]
    unsafe extern "C" fn rds_rs_test_inject(buf: *const u8, len: usize) -> c_int {
        from_result(|| {
            // SAFETY: Per the function's safety requirements.
            let frame = unsafe { core::slice::from_raw_parts(buf, len) };
            let ctx = ProcessCtx::enter();
            with_target(|t| t.inject(frame, &ctx)).unwrap_or(Err(ENODEV))?;
            Ok(0)
        })
    }

    /// `loop_hold`.
    pub(crate) fn loop_hold() -> bool {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_loop_hold() != 0 }
    }

    /// `guess_refill_hold`.
    pub(crate) fn guess_refill_hold() -> bool {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_guess_refill_hold() != 0 }
    }

    /// `loop_ack_hold`.
    pub(crate) fn loop_ack_hold() -> bool {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_loop_ack_hold() != 0 }
    }

    /// `loop_reset_every`.
    pub(crate) fn loop_reset_every() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_loop_reset_every() }
    }

    /// `loop_softirq`.
    pub(crate) fn loop_softirq() -> bool {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_loop_softirq() != 0 }
    }

    /// `loop_ring`.
    pub(crate) fn loop_ring() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_loop_ring() }
    }

    /// `ib_service_break`, consumed: whether a registration on an iWARP device is to find
    /// its service connection failed (the knob reads as 0 again after).
    pub(crate) fn ib_service_break() -> bool {
        // SAFETY: The helper exchanges a static variable.
        unsafe { raw::rds_rs_test_ib_service_break() != 0 }
    }

    /// `ib_fence_expire`, consumed: whether the fences after a deregistration on an iWARP
    /// device are to be treated as overdue at once (the knob reads as 0 again after).
    pub(crate) fn ib_fence_expire() -> bool {
        // SAFETY: The helper exchanges a static variable.
        unsafe { raw::rds_rs_test_ib_fence_expire() != 0 }
    }

    /// `ib_route_delay_ms`.
    pub(crate) fn ib_route_delay_ms() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_ib_route_delay_ms() }
    }

    /// `ib_accept_delay_ms`.
    pub(crate) fn ib_accept_delay_ms() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_ib_accept_delay_ms() }
    }

    /// `ib_request_delay_ms`.
    pub(crate) fn ib_request_delay_ms() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_ib_request_delay_ms() }
    }

    /// `ib_fence_hold_ms`.
    pub(crate) fn ib_fence_hold_ms() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_ib_fence_hold_ms() }
    }

    /// `ib_established_delay_ms`.
    pub(crate) fn ib_established_delay_ms() -> u32 {
        // SAFETY: The helper reads a static variable.
        unsafe { raw::rds_rs_test_ib_established_delay_ms() }
    }

    /// Schedules the tasklet (which runs [`TestTarget::softirq_run`]).
    pub(crate) fn tasklet_schedule() {
        // SAFETY: The helper schedules a static tasklet, killed only at unregistration.
        unsafe { raw::rds_rs_test_tasklet_schedule() }
    }

    /// Waits until the tasklet is not running.
    pub(crate) fn tasklet_wait(_ctx: &ProcessCtx) {
        // SAFETY: The helper waits on a static tasklet.
        unsafe { raw::rds_rs_test_tasklet_wait() }
    }
}

#[cfg(not(rds_test))]
mod imp {
    use super::super::sync::ProcessCtx;

    /// `loop_hold` (off in the production build).
    pub(crate) fn loop_hold() -> bool {
        false
    }

    /// `guess_refill_hold` (off in the production build).
    pub(crate) fn guess_refill_hold() -> bool {
        false
    }

    /// `loop_ack_hold` (off in the production build).
    pub(crate) fn loop_ack_hold() -> bool {
        false
    }

    /// `loop_reset_every` (off in the production build).
    pub(crate) fn loop_reset_every() -> u32 {
        0
    }

    /// `loop_softirq` (off in the production build).
    pub(crate) fn loop_softirq() -> bool {
        false
    }

    /// `loop_ring` (off in the production build).
    pub(crate) fn loop_ring() -> u32 {
        0
    }

    /// `ib_service_break` (off in the production build).
    pub(crate) fn ib_service_break() -> bool {
        false
    }

    /// `ib_fence_expire` (off in the production build).
    pub(crate) fn ib_fence_expire() -> bool {
        false
    }

    /// `ib_route_delay_ms` (off in the production build).
    pub(crate) fn ib_route_delay_ms() -> u32 {
        0
    }

    /// `ib_accept_delay_ms` (off in the production build).
    pub(crate) fn ib_accept_delay_ms() -> u32 {
        0
    }

    /// `ib_request_delay_ms` (off in the production build).
    pub(crate) fn ib_request_delay_ms() -> u32 {
        0
    }

    /// `ib_fence_hold_ms` (off in the production build).
    pub(crate) fn ib_fence_hold_ms() -> u32 {
        0
    }

    /// `ib_established_delay_ms` (off in the production build).
    pub(crate) fn ib_established_delay_ms() -> u32 {
        0
    }

    /// Never called in the production build (`loop_softirq` is off).
    pub(crate) fn tasklet_schedule() {}

    /// Never called in the production build.
    pub(crate) fn tasklet_wait(_ctx: &ProcessCtx) {}
}

pub(crate) use imp::*;
