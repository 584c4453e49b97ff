// SPDX-License-Identifier: GPL-2.0

//! Kernel services rds-rs uses besides the socket layer: a workqueue of its own, the
//! per-namespace exit hook, `/proc/sys/net/rds`, and the real-time clock.
//!
//! C headers: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h),
//! [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h),
//! [`include/linux/sysctl.h`](srctree/include/linux/sysctl.h).

use super::net::NetId;
use super::raw;
use core::{
    marker::PhantomData,
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};
use kernel::{
    error::to_result, ffi::c_void, prelude::*, sync::Arc, types::ForeignOwnable, workqueue::Queue,
};

/// `poll(2)` event bits (`EPOLL*`, the generic values x86 uses).
pub(crate) mod poll {
    /// Readable.
    pub(crate) const IN: u32 = 0x0001;
    /// Writable.
    pub(crate) const OUT: u32 = 0x0004;
    /// Error.
    pub(crate) const ERR: u32 = 0x0008;
    /// Normal data readable.
    pub(crate) const RDNORM: u32 = 0x0040;
    /// Normal data writable.
    pub(crate) const WRNORM: u32 = 0x0100;
    /// Priority data writable (RDS: a congestion map changed).
    pub(crate) const WRBAND: u32 = 0x0200;
}

/// A workqueue owned by the module (`alloc_workqueue`), drained and destroyed when dropped.
///
/// # Invariants
///
/// `wq` is a workqueue allocated by `alloc_workqueue` and not yet destroyed.
pub(crate) struct OwnedQueue {
    wq: NonNull<raw::workqueue_struct>,
}

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: Queueing work is thread-safe.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates a workqueue named `name` (`WQ_MEM_RECLAIM`: sends make progress under
    /// memory pressure).
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is a NUL-terminated string; the helper copies it.
        let wq = unsafe { raw::rds_rs_alloc_workqueue(name.as_char_ptr()) };
        // INVARIANT: a non-null result is a new workqueue.
        NonNull::new(wq).map(|wq| Self { wq }).ok_or(ENOMEM)
    }

    /// The queue, to enqueue work items on.
    pub(crate) fn queue(&self) -> &Queue {
        // SAFETY: `wq` is a live workqueue (type invariant) that outlives the borrow; the
        // kernel crate's `Queue` is a transparent wrapper of the same C type.
        unsafe { Queue::from_raw(self.wq.as_ptr().cast()) }
    }

    /// Waits until the queue is empty, including work queued by its own work items.
    pub(crate) fn drain(&self) {
        // SAFETY: `wq` is a live workqueue (type invariant).
        unsafe { raw::drain_workqueue(self.wq.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: `wq` is live (type invariant) and dropped once; `destroy_workqueue` drains
        // it first.
        unsafe { raw::destroy_workqueue(self.wq.as_ptr()) }
    }
}

/// Code to run when a network namespace goes away.
pub(crate) trait NetExit: Send + Sync + 'static {
    /// Forget everything that belongs to `net`. Runs in process context; no socket of `net`
    /// exists any more (each user socket holds a reference to its namespace; kernel sockets
    /// are released by their creators before then).
    fn net_exit(&self, net: NetId);
}

/// The state the registered [`NetExit`] hook runs with: `Arc::into_foreign` while registered.
static PERNET_STATE: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
/// Whether a [`PernetRegistration`] exists (the C side has one `pernet_operations`).
static PERNET_BUSY: AtomicBool = AtomicBool::new(false);

/// A registered per-namespace exit hook (`register_pernet_subsys`); unregistered when dropped.
/// Unregistering runs the hook for every namespace that still exists.
///
/// # Invariants
///
/// While this object exists, `PERNET_STATE` holds `Arc<T>::into_foreign` and the C hook is
/// registered with [`net_exit_callback::<T>`].
pub(crate) struct PernetRegistration<T: NetExit> {
    _state: PhantomData<Arc<T>>,
}

impl<T: NetExit> PernetRegistration<T> {
    /// Registers `state.net_exit` to run for every namespace that goes away. Only one
    /// registration can exist at a time (`EBUSY`).
    pub(crate) fn new(state: Arc<T>) -> Result<Self> {
        if PERNET_BUSY.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        PERNET_STATE.store(state.into_foreign().cast_mut(), Ordering::Release);
        // SAFETY: The callback only borrows `PERNET_STATE`, published above and released only
        // after unregistering.
        let r = to_result(unsafe { raw::rds_rs_pernet_register(Some(net_exit_callback::<T>)) });
        if let Err(e) = r {
            let p = PERNET_STATE.swap(ptr::null_mut(), Ordering::AcqRel);
            // SAFETY: `p` came from `into_foreign` above and the hook was never registered.
            drop(unsafe { <Arc<T> as ForeignOwnable>::from_foreign(p) });
            PERNET_BUSY.store(false, Ordering::Release);
            return Err(e);
        }
        // INVARIANT: the state is published and the hook registered.
        Ok(Self {
            _state: PhantomData,
        })
    }
}

impl<T: NetExit> Drop for PernetRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: The hook is registered (type invariant). `unregister_pernet_subsys` returns
        // only when no call of the hook runs any more.
        unsafe { raw::rds_rs_pernet_unregister() };
        let p = PERNET_STATE.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: `p` came from `into_foreign` in `new` (type invariant) and, the hook being
        // unregistered, nothing borrows it any more.
        drop(unsafe { <Arc<T> as ForeignOwnable>::from_foreign(p) });
        PERNET_BUSY.store(false, Ordering::Release);
    }
}

/// The C exit hook's call into Rust.
///
/// # Safety
///
/// Called by the namespace code with a namespace being dismantled, while a
/// `PernetRegistration<T>` exists.
unsafe extern "C" fn net_exit_callback<T: NetExit>(net: *mut raw::net) {
    // SAFETY: A registration of `T` exists (the function's safety requirements), so the state
    // is published and stays so until the hook is unregistered, which waits for this call.
    let state = unsafe { <Arc<T> as ForeignOwnable>::borrow(PERNET_STATE.load(Ordering::Acquire)) };
    state.net_exit(NetId::from_raw(net));
}

/// `/proc/sys/net/rds`, registered while this object exists.
///
/// # Invariants
///
/// The table is registered (`rds_rs_sysctl_register` succeeded) until dropped.
pub(crate) struct SysctlRegistration(());

impl SysctlRegistration {
    /// Registers the table (C RDS's names, defaults and handlers).
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: The helper registers a static table; it is unregistered in `drop`.
        to_result(unsafe { raw::rds_rs_sysctl_register() })?;
        Ok(Self(()))
    }
}

impl Drop for SysctlRegistration {
    fn drop(&mut self) {
        // SAFETY: The table is registered (type invariant).
        unsafe { raw::rds_rs_sysctl_unregister() }
    }
}

/// `net.rds.ping_enable`: whether messages to port 0 are answered.
pub(crate) fn ping_enabled() -> bool {
    // SAFETY: The helper reads a static variable.
    unsafe { raw::rds_rs_sysctl_ping_enable() != 0 }
}

/// `net.rds.max_unacked_packets`.
pub(crate) fn max_unacked_packets() -> u32 {
    // SAFETY: The helper reads a static variable.
    unsafe { raw::rds_rs_sysctl_max_unacked_packets() }
}

/// `net.rds.max_unacked_bytes`.
pub(crate) fn max_unacked_bytes() -> u32 {
    // SAFETY: The helper reads a static variable.
    unsafe { raw::rds_rs_sysctl_max_unacked_bytes() }
}

/// The wall-clock time in nanoseconds since the epoch (`ktime_get_real_ns`).
pub(crate) fn real_time_ns() -> i64 {
    // SAFETY: The helper has no preconditions.
    unsafe { raw::rds_rs_real_time_ns() }
}

/// Sleeps for about a millisecond (`msleep(1)`), to back off after a shortage.
pub(crate) fn sleep_briefly() {
    // SAFETY: `msleep` only sleeps; callers are in process context.
    unsafe { raw::msleep(1) }
}

/// The CPU-local clock in nanoseconds (`local_clock`), for receive-path latency traces.
pub(crate) fn local_clock_ns() -> u64 {
    // SAFETY: The helper has no preconditions.
    unsafe { raw::rds_rs_local_clock() }
}

/// The test hooks under `/sys/kernel/debug/rds_rs`, present while this object exists.
///
/// # Invariants
///
/// The debugfs directory is created (`rds_rs_debugfs_init` ran) until dropped.
pub(crate) struct DebugfsRegistration(());

impl DebugfsRegistration {
    /// Creates the directory and its files (debugfs failures are not errors, as usual).
    pub(crate) fn new() -> Self {
        // SAFETY: The helper creates static debugfs entries; removed in `drop`.
        unsafe { raw::rds_rs_debugfs_init() };
        Self(())
    }
}

impl Drop for DebugfsRegistration {
    fn drop(&mut self) {
        // SAFETY: Created in `new` (type invariant).
        unsafe { raw::rds_rs_debugfs_exit() }
    }
}

/// The `loop_hold` test hook: whether the loopback transport holds messages back.
pub(crate) fn loop_hold() -> bool {
    // SAFETY: The helper reads a static variable.
    unsafe { raw::rds_rs_loop_hold() }
}
