// SPDX-License-Identifier: GPL-2.0

//! Kernel services rds-rs uses besides the socket layer: a workqueue of its own and work items
//! on it (immediate and delayed, whose runs get a proof of process context), the
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
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering},
};
use kernel::{
    error::to_result,
    ffi::c_void,
    prelude::*,
    sync::{Arc, LockClassKey},
    types::{ForeignOwnable, Opaque},
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
    fn net_exit(&self, net: NetId, ctx: &super::sync::ProcessCtx);
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
    // The namespace code runs exit hooks in process context (the `netns` workqueue, or
    // `unregister_pernet_subsys`).
    state.net_exit(NetId::from_raw(net), &super::sync::ProcessCtx::enter());
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

/// Copies of the `/proc/sys/net/rds` values, which the data path reads: the sysctl handler
/// reloads them after every write (`rds_rs_sysctl_changed`), so a read costs a load. Until the
/// table is registered they hold C's defaults.
struct Sysctl {
    ping_enable: AtomicU32,
    max_unacked_packets: AtomicU32,
    max_unacked_bytes: AtomicU32,
    reconnect_min: AtomicU64,
    reconnect_max: AtomicU64,
}

static SYSCTL: Sysctl = Sysctl {
    ping_enable: AtomicU32::new(1),
    max_unacked_packets: AtomicU32::new(8),
    max_unacked_bytes: AtomicU32::new(16 << 20),
    reconnect_min: AtomicU64::new(1),
    reconnect_max: AtomicU64::new(1),
};

/// Called by the sysctl handlers after a value changed, and when the table is registered:
/// reloads the copies.
#[no_mangle]
extern "C" fn rds_rs_sysctl_changed() {
    // SAFETY: The helpers read static variables.
    let (ping, packets, bytes, min, max) = unsafe {
        (
            raw::rds_rs_sysctl_ping_enable(),
            raw::rds_rs_sysctl_max_unacked_packets(),
            raw::rds_rs_sysctl_max_unacked_bytes(),
            raw::rds_rs_sysctl_reconnect_min_jiffies() as u64,
            raw::rds_rs_sysctl_reconnect_max_jiffies() as u64,
        )
    };
    SYSCTL.ping_enable.store(ping, Ordering::Relaxed);
    SYSCTL.max_unacked_packets.store(packets, Ordering::Relaxed);
    SYSCTL.max_unacked_bytes.store(bytes, Ordering::Relaxed);
    SYSCTL.reconnect_min.store(min, Ordering::Relaxed);
    SYSCTL.reconnect_max.store(max, Ordering::Relaxed);
}

/// `net.rds.ping_enable`: whether messages to port 0 are answered.
pub(crate) fn ping_enabled() -> bool {
    SYSCTL.ping_enable.load(Ordering::Relaxed) != 0
}

/// `net.rds.max_unacked_packets`.
pub(crate) fn max_unacked_packets() -> u32 {
    SYSCTL.max_unacked_packets.load(Ordering::Relaxed)
}

/// `net.rds.max_unacked_bytes`.
pub(crate) fn max_unacked_bytes() -> u32 {
    SYSCTL.max_unacked_bytes.load(Ordering::Relaxed)
}

/// The wall-clock time in nanoseconds since the epoch (`ktime_get_real_ns`).
pub(crate) fn real_time_ns() -> i64 {
    // SAFETY: The helper has no preconditions.
    unsafe { raw::rds_rs_real_time_ns() }
}

/// Sleeps for `ms` milliseconds (`msleep`).
pub(crate) fn sleep_ms(ms: u32, _ctx: &super::sync::ProcessCtx) {
    // SAFETY: `msleep` only sleeps, which `_ctx` allows.
    unsafe { raw::msleep(ms) }
}

/// The CPU-local clock in nanoseconds (`local_clock`), for receive-path latency traces.
pub(crate) fn local_clock_ns() -> u64 {
    // SAFETY: The helper has no preconditions.
    unsafe { raw::rds_rs_local_clock() }
}

/// How long a connection may stay idle before the reaper takes it, in jiffies.
pub(crate) fn conn_idle_jiffies() -> u64 {
    // SAFETY: The helper reads a static variable.
    unsafe { raw::rds_rs_conn_idle_jiffies() as u64 }
}

/// How often the reaper runs: a quarter of the idle time, between 10 ms and 5 s.
pub(crate) fn reap_interval() -> u64 {
    (conn_idle_jiffies() / 4).clamp(ms_to_jiffies(10), ms_to_jiffies(5000))
}

/// The current time in jiffies.
pub(crate) fn jiffies() -> u64 {
    // SAFETY: `jiffies` is a static of the kernel that the timer code updates; a volatile read
    // is `READ_ONCE`, as C reads it.
    unsafe { ptr::read_volatile(ptr::addr_of!(raw::jiffies)) as u64 }
}

/// `ms` milliseconds in jiffies (rounded up, as `msecs_to_jiffies`).
pub(crate) fn ms_to_jiffies(ms: u32) -> u64 {
    // SAFETY: The helper only computes.
    unsafe { raw::rds_rs_msecs_to_jiffies(ms) as u64 }
}

/// `net.rds.reconnect_min_delay_ms` and `reconnect_max_delay_ms`, in jiffies.
pub(crate) fn reconnect_delays() -> (u64, u64) {
    (
        SYSCTL.reconnect_min.load(Ordering::Relaxed),
        SYSCTL.reconnect_max.load(Ordering::Relaxed),
    )
}

/// A work item that runs after a delay (`struct delayed_work`), embedded in a `T` that is
/// shared through an `Arc<T>`; see [`DelayedWorkItem`].
///
/// # Invariants
///
/// `dw` was initialised by `rds_rs_init_delayed_work` with [`delayed_work_callback::<T>`].
#[pin_data]
pub(crate) struct DelayedWork<T> {
    #[pin]
    dw: Opaque<raw::delayed_work>,
    _item: PhantomData<T>,
}

// SAFETY: The delayed work is queued, run and cancelled by the workqueue code, which allows that
// from any thread; `T` itself is `Send + Sync` for every use (`DelayedWorkItem`).
unsafe impl<T> Send for DelayedWork<T> {}
// SAFETY: As above.
unsafe impl<T> Sync for DelayedWork<T> {}

/// A type with a [`DelayedWork`] field, and what runs when it fires.
///
/// # Safety
///
/// `OFFSET` is the offset of a `DelayedWork<Self>` field in `Self` (use
/// [`impl_has_delayed_work!`]).
pub(crate) unsafe trait DelayedWorkItem: Sized + Send + Sync + 'static {
    /// The offset of the `DelayedWork<Self>` field.
    const OFFSET: usize;

    /// Runs the work, in process context, with the reference the queueing took.
    fn run(this: Arc<Self>, ctx: &super::sync::ProcessCtx);
}

/// Implements [`DelayedWorkItem`]'s offset for `$ty`'s field `$field` (a `DelayedWork<$ty>`),
/// with `$run` as its work.
macro_rules! impl_delayed_work_item {
    ($ty:ty, $field:ident, $run:path) => {
        // The unsafe code is this macro's (in bindings/), checked here, not its caller's.
        #[allow(unsafe_code)]
        // SAFETY: `OFFSET` is the offset of `$field`, whose type the `_check` below pins to
        // `DelayedWork<$ty>`.
        unsafe impl $crate::bindings::sys::DelayedWorkItem for $ty {
            const OFFSET: usize = {
                fn _check(x: &$ty) -> &$crate::bindings::sys::DelayedWork<$ty> {
                    &x.$field
                }
                ::core::mem::offset_of!($ty, $field)
            };

            fn run(this: ::kernel::sync::Arc<Self>, ctx: &$crate::bindings::sync::ProcessCtx) {
                $run(this, ctx)
            }
        }
    };
}
pub(crate) use impl_delayed_work_item;

impl<T: DelayedWorkItem> DelayedWork<T> {
    /// An initialiser for the field.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes while the closure runs; the helper initialises
            // the delayed work in place with the callback of `T`.
            // INVARIANT: initialised with `delayed_work_callback::<T>`.
            dw <- Opaque::ffi_init(|slot| unsafe {
                raw::rds_rs_init_delayed_work(slot, Some(delayed_work_callback::<T>))
            }),
            _item: PhantomData,
        })
    }

    fn of(this: &T) -> *mut raw::delayed_work {
        let base = ptr::from_ref(this).cast::<u8>();
        // SAFETY: `T::OFFSET` is the offset of a `DelayedWork<T>` inside `T` (trait safety
        // requirement), so the result points to that field of `*this`.
        let field = unsafe { base.add(T::OFFSET) }.cast::<DelayedWork<T>>();
        // SAFETY: `field` points to a live `DelayedWork<T>`.
        Opaque::raw_get(unsafe { ptr::addr_of!((*field).dw) })
    }

    /// Queues `this`'s work on `queue` to run after `delay` jiffies; returns false (and drops
    /// `this`) when it was already pending.
    pub(crate) fn queue(queue: &OwnedQueue, this: Arc<T>, delay: u64) -> bool {
        let dw = Self::of(&this);
        let raw = Arc::into_raw(this);
        let delay = usize::try_from(delay).unwrap_or(usize::MAX) as _;
        // SAFETY: `dw` belongs to the object `raw` keeps alive and was initialised (type
        // invariant); the queue is live (type invariant of `OwnedQueue`). When queued, the
        // reference `raw` is owned by the pending work: the callback or `cancel` takes it back.
        let queued = unsafe { raw::rds_rs_queue_delayed_work(queue.wq.as_ptr(), dw, delay) };
        if !queued {
            // SAFETY: Not queued, so `raw` (from `into_raw` above) is still ours.
            drop(unsafe { Arc::from_raw(raw) });
        }
        queued
    }

    /// Cancels `this`'s pending work and waits for a running one to finish
    /// (`cancel_delayed_work_sync`); returns whether it was pending.
    pub(crate) fn cancel(this: &Arc<T>, _ctx: &super::sync::ProcessCtx) -> bool {
        let dw = Self::of(this);
        // SAFETY: `dw` is an initialised delayed work of a live object; the call may sleep,
        // which `_ctx` allows.
        let was_pending = unsafe { raw::rds_rs_cancel_delayed_work_sync(dw) };
        if was_pending {
            // SAFETY: The pending work owned the reference `queue` leaked for it, and will not
            // run now; it is taken back exactly once, here.
            drop(unsafe { Arc::from_raw(ptr::from_ref::<T>(this)) });
        }
        was_pending
    }
}

/// The C callback of a [`DelayedWork<T>`].
///
/// # Safety
///
/// Called by the workqueue code for a delayed work initialised by [`DelayedWork::new`] for `T`
/// and queued by [`DelayedWork::queue`], which leaked an `Arc<T>` for this run.
unsafe extern "C" fn delayed_work_callback<T: DelayedWorkItem>(work: *mut raw::work_struct) {
    // CAST: `work` is the first field of `struct delayed_work`, the `Opaque` field of
    // `DelayedWork<T>` (its only non-zero-sized field), which is at `T::OFFSET` in `T`.
    let t = work.cast::<u8>().wrapping_sub(T::OFFSET).cast::<T>();
    // SAFETY: Per the function's safety requirements, `t` is the object whose `Arc` was leaked
    // by `queue` for this run.
    let this = unsafe { Arc::from_raw(t) };
    T::run(this, &super::sync::ProcessCtx::enter());
}

/// A work item (`struct work_struct`) embedded in a `T` that is shared through an `Arc<T>`,
/// number `ID` of `T`'s work items; see [`WorkItem`]. Its run gets a proof of process context.
///
/// # Invariants
///
/// `w` was initialised by `rds_rs_init_work` with [`work_callback::<T, ID>`].
#[repr(C)]
#[pin_data]
pub(crate) struct Work<T, const ID: u64> {
    #[pin]
    w: Opaque<raw::work_struct>,
    _item: PhantomData<T>,
}

// SAFETY: The work is queued and run by the workqueue code, which allows that from any thread;
// `T` itself is `Send + Sync` for every use (`WorkItem`).
unsafe impl<T, const ID: u64> Send for Work<T, ID> {}
// SAFETY: As above.
unsafe impl<T, const ID: u64> Sync for Work<T, ID> {}

/// A type with a [`Work<Self, ID>`] field, and what runs when it is queued.
///
/// # Safety
///
/// `OFFSET` is the offset of a `Work<Self, ID>` field in `Self` (use [`impl_work_item!`]).
pub(crate) unsafe trait WorkItem<const ID: u64>:
    Sized + Send + Sync + 'static
{
    /// The offset of the `Work<Self, ID>` field.
    const OFFSET: usize;

    /// Runs the work, in process context, with the reference the queueing took.
    fn run(this: Arc<Self>, ctx: &super::sync::ProcessCtx);
}

/// Implements [`WorkItem`] number `$id` for `$ty`, whose field `$field` is a `Work<$ty, $id>`,
/// with `$run` as its work.
macro_rules! impl_work_item {
    ($ty:ty, $id:literal, $field:ident, $run:path) => {
        // The unsafe code is this macro's (in bindings/), checked here, not its caller's.
        #[allow(unsafe_code)]
        // SAFETY: `OFFSET` is the offset of `$field`, whose type the `_check` below pins to
        // `Work<$ty, $id>`.
        unsafe impl $crate::bindings::sys::WorkItem<$id> for $ty {
            const OFFSET: usize = {
                fn _check(x: &$ty) -> &$crate::bindings::sys::Work<$ty, $id> {
                    &x.$field
                }
                ::core::mem::offset_of!($ty, $field)
            };

            fn run(this: ::kernel::sync::Arc<Self>, ctx: &$crate::bindings::sync::ProcessCtx) {
                $run(this, ctx)
            }
        }
    };
}
pub(crate) use impl_work_item;

/// Creates a [`Work`] initialiser with a lockdep class of its own and the given name (as
/// `new_work!` does).
macro_rules! new_process_work {
    ($name:literal) => {
        $crate::bindings::sys::Work::new(::kernel::c_str!($name), ::kernel::static_lock_class!())
    };
}
pub(crate) use new_process_work;

impl<T: WorkItem<ID>, const ID: u64> Work<T, ID> {
    /// An initialiser for the field; use [`new_process_work!`].
    pub(crate) fn new(name: &'static CStr, key: &'static LockClassKey) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes while the closure runs; the helper initialises
            // the work in place with the callback of `T`, and a name and key that live for ever.
            // INVARIANT: initialised with `work_callback::<T, ID>`.
            w <- Opaque::ffi_init(|slot| unsafe {
                raw::rds_rs_init_work(
                    slot,
                    Some(work_callback::<T, ID>),
                    name.as_char_ptr(),
                    super::sync::lock_class_key(key),
                )
            }),
            _item: PhantomData,
        })
    }

    /// Queues `this`'s work on `queue`; returns false (and drops `this`) when it was already
    /// pending (the pending run will see whatever this one was for).
    pub(crate) fn queue(queue: &OwnedQueue, this: Arc<T>) -> bool {
        let base = ptr::from_ref::<T>(&this).cast::<u8>();
        // SAFETY: `T::OFFSET` is the offset of a `Work<T, ID>` inside `T` (trait safety
        // requirement), so the result points to that field of `*this`.
        let field = unsafe { base.add(T::OFFSET) }.cast::<Work<T, ID>>();
        // SAFETY: `field` points to a live `Work<T, ID>`.
        let w = Opaque::raw_get(unsafe { ptr::addr_of!((*field).w) });
        let raw = Arc::into_raw(this);
        // SAFETY: `w` belongs to the object `raw` keeps alive and was initialised (type
        // invariant); the queue is live (type invariant of `OwnedQueue`). When queued, the
        // reference `raw` is owned by the pending work, which the callback takes back.
        let queued = unsafe { raw::rds_rs_queue_work(queue.wq.as_ptr(), w) };
        if !queued {
            // SAFETY: Not queued, so `raw` (from `into_raw` above) is still ours.
            drop(unsafe { Arc::from_raw(raw) });
        }
        queued
    }
}

/// The C callback of a [`Work<T, ID>`].
///
/// # Safety
///
/// Called by the workqueue code for a work initialised by [`Work::new`] for `T` and `ID` and
/// queued by [`Work::queue`], which leaked an `Arc<T>` for this run.
unsafe extern "C" fn work_callback<T: WorkItem<ID>, const ID: u64>(work: *mut raw::work_struct) {
    // CAST: `work` is the `Opaque` field of `Work<T, ID>` (its only non-zero-sized field), which
    // is at `T::OFFSET` in `T`.
    let t = work.cast::<u8>().wrapping_sub(T::OFFSET).cast::<T>();
    // SAFETY: Per the function's safety requirements, `t` is the object whose `Arc` was leaked
    // by `queue` for this run.
    let this = unsafe { Arc::from_raw(t) };
    // Work items run in process context.
    T::run(this, &super::sync::ProcessCtx::enter());
}
