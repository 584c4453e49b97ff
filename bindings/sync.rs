// SPDX-License-Identifier: GPL-2.0

//! Execution contexts, a spinlock usable from softirq context, and deferral of drops to
//! process context.
//!
//! C headers: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)
//! (`spin_lock_bh`), [`include/linux/llist.h`](srctree/include/linux/llist.h),
//! [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h).
//!
//! rds-rs runs in two kinds of context: process context (system calls, work items), where code
//! may sleep, and softirq context (a transport's completion handlers, loopback's softirq test
//! mode), where it must not. The types here carry that distinction:
//!
//! - [`ProcessCtx`] is a proof, handed down from the few places that start in process context
//!   (the socket callbacks, work items, module init and exit), that the code may sleep and
//!   holds no spinlock. Functions of the core that may sleep take `&ProcessCtx`; code reachable
//!   from softirq context has none to give, so it cannot call them.
//! - [`SpinLockBh`] is a spinlock taken with bottom halves disabled (`spin_lock_bh`): the locks
//!   of the data path, which both process and softirq context take.
//! - [`ProcessDrop`] holds a value whose destructor sleeps (pinned user pages, a reference to
//!   a task's `mm`): dropping it anywhere hands the value to a work item that drops it in
//!   process context, so an object that owns one may be dropped in any context.

use super::raw;
use core::{
    marker::PhantomData,
    mem::ManuallyDrop,
    ops::Deref,
    ptr::{self, NonNull},
};
use kernel::{
    alloc::{AllocError, Flags},
    prelude::*,
    sync::lock::{Backend, Lock},
    types::Opaque,
};

/// Proof that the current code runs in process context, may sleep, and holds no spinlock.
///
/// Not `Send`: it is valid only on the task and in the call that created it. Only the
/// bindings create one, at the entry points named in the module documentation.
pub(crate) struct ProcessCtx {
    _not_send: PhantomData<*mut ()>,
}

impl ProcessCtx {
    /// Claims process context at an entry point that is known to run in it (a `proto_ops`
    /// callback, a work item, module init or exit). `might_sleep()` checks the claim on
    /// kernels built with `CONFIG_DEBUG_ATOMIC_SLEEP`.
    pub(crate) fn enter() -> Self {
        // SAFETY: `might_sleep` only checks (and warns) on debug kernels.
        unsafe { raw::rds_rs_might_sleep() };
        Self {
            _not_send: PhantomData,
        }
    }
}

/// A spinlock taken with bottom halves disabled (`spin_lock_bh`), for data that both process
/// context and softirq context touch. Nothing that sleeps may happen under it.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// The backend of [`SpinLockBh`]: a kernel `spinlock_t` taken with `spin_lock_bh`.
pub(crate) struct SpinLockBhBackend;

// SAFETY: `spin_lock_bh` gives mutual exclusion like `spin_lock` (and also keeps softirqs of
// this CPU out); `relock` uses the default implementation, which calls `lock` again.
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees that `ptr` is valid for writes and that `name` and `key`
        // stay valid for reads indefinitely, which is what `__spin_lock_init` needs.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees that `ptr` points to an initialised spinlock.
        unsafe { raw::rds_rs_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller guarantees that it owns the lock at `ptr`, taken by `lock`.
        unsafe { raw::rds_rs_spin_unlock_bh(ptr.cast()) }
    }
}

/// Creates a [`SpinLockBh`] initialiser with the given name and a new lock class (as
/// `new_spinlock!` does for `SpinLock`).
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::bindings::sync::SpinLockBh::new(
            $inner,
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The part of a [`ProcessDrop`] node the C list and the deferred work see: the list link first
/// (the C side hands back a pointer to it, which is therefore a pointer to the node), then the
/// function that drops the node.
#[repr(C)]
struct DeferHeader {
    link: Opaque<raw::llist_node>,
    drop_node: unsafe fn(*mut DeferHeader),
}

/// A heap node holding a [`ProcessDrop`]'s value.
#[repr(C)]
struct DeferNode<T> {
    header: DeferHeader,
    value: ManuallyDrop<T>,
}

/// Drops the node at `hdr` and its value.
///
/// # Safety
///
/// `hdr` is the header of a `KBox<DeferNode<T>>` leaked by [`ProcessDrop::drop`], not yet
/// taken back; the caller runs in process context.
unsafe fn drop_node<T>(hdr: *mut DeferHeader) {
    // SAFETY: Per the function's safety requirements, `hdr` starts a leaked
    // `KBox<DeferNode<T>>` (the header is its first field of a `repr(C)` struct).
    let mut node = unsafe { KBox::from_raw(hdr.cast::<DeferNode<T>>()) };
    // SAFETY: The value is dropped once, here; the node is freed right after.
    unsafe { ManuallyDrop::drop(&mut node.value) };
}

/// A value whose destructor may sleep, made droppable in any context: dropping a
/// `ProcessDrop` queues the value for a work item that drops it in process context. Code in
/// process context that needs the value gone when it returns calls [`flush_deferred`]
/// afterwards.
///
/// # Invariants
///
/// `node` is a `KBox<DeferNode<T>>` leaked by `new` and owned by this object, its value
/// initialised, until `drop` hands it to the deferred work.
pub(crate) struct ProcessDrop<T: Send + 'static> {
    node: NonNull<DeferNode<T>>,
}

// SAFETY: The object owns a `T: Send`, moved between threads only by value.
unsafe impl<T: Send + 'static> Send for ProcessDrop<T> {}
// SAFETY: Shared access only gives `&T`; `T: Sync` makes that safe across threads.
unsafe impl<T: Send + Sync + 'static> Sync for ProcessDrop<T> {}

impl<T: Send + 'static> ProcessDrop<T> {
    /// Wraps `value`, allocating its node now (so that dropping never allocates). Called in
    /// process context: when there is no memory for the node, `value` is dropped before this
    /// returns.
    pub(crate) fn new(value: T, flags: Flags) -> Result<Self, AllocError> {
        // The node first, so that a failed allocation drops `value` (a node built around it
        // would keep it in its `ManuallyDrop` and leak it).
        let node = KBox::<DeferNode<T>>::new_uninit(flags)?;
        let node = KBox::write(
            node,
            DeferNode {
                header: DeferHeader {
                    link: Opaque::uninit(),
                    drop_node: drop_node::<T>,
                },
                value: ManuallyDrop::new(value),
            },
        );
        // INVARIANT: the box is leaked here and owned by the new object.
        Ok(Self {
            node: NonNull::from(KBox::leak(node)),
        })
    }
}

impl<T: Send + 'static> Deref for ProcessDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariant the node is live and its value initialised while `self`
        // exists.
        unsafe { &self.node.as_ref().value }
    }
}

impl<T: Send + 'static> Drop for ProcessDrop<T> {
    fn drop(&mut self) {
        let hdr = self.node.as_ptr().cast::<DeferHeader>();
        // SAFETY: The node is live (type invariant); its link is handed to the C list, which
        // owns the node from now on: the deferred work calls `drop_node::<T>` (stored in the
        // header by `new`) on it exactly once, in process context.
        unsafe { raw::rds_rs_defer(Opaque::raw_get(ptr::addr_of!((*hdr).link))) };
    }
}

/// Called by the deferred work for each node handed to `rds_rs_defer`, in process context.
///
/// # Safety
///
/// `link` is the link of a node queued by [`ProcessDrop::drop`], handed over once.
#[no_mangle]
unsafe extern "C" fn rds_rs_run_deferred(link: *mut raw::llist_node) {
    // CAST: the link is the first field of the `repr(C)` header, itself the first field of the
    // node, so the pointers coincide.
    let hdr = link.cast::<DeferHeader>();
    // SAFETY: `hdr` heads a node leaked by `ProcessDrop` (the function's safety requirements),
    // whose `drop_node` matches its value type; the work item runs in process context.
    unsafe { ((*hdr).drop_node)(hdr) }
}

/// Waits until every value handed to the deferred work so far has been dropped (module
/// unload: the work's code is the module's).
pub(crate) fn flush_deferred(_ctx: &ProcessCtx) {
    // SAFETY: The helper flushes a static work item; it may sleep, which `_ctx` allows.
    unsafe { raw::rds_rs_defer_flush() }
}

/// Ends the value of a uniquely owned [`Arc`] and hands back its memory, uninitialised, for a
/// new value of the same type: a cache of spare allocations reuses it instead of freeing it
/// and allocating again. The value's destructor runs here, before the memory is reused, as
/// pinning requires. `None` only if the reference was not the only one after all (then it is
/// dropped as usual).
pub(crate) fn recycle_unique<T>(
    value: Pin<kernel::sync::UniqueArc<T>>,
) -> Option<kernel::sync::UniqueArc<core::mem::MaybeUninit<T>>> {
    let arc: kernel::sync::Arc<T> = value.into();
    let ptr = kernel::sync::Arc::into_raw(arc).cast_mut();
    // SAFETY: `ptr` is the value of an `Arc` whose reference was the only one (it came from a
    // `UniqueArc`) and is now owned by `ptr` (`into_raw` does not run the destructor), so
    // nothing else can reach the value: it may be dropped in place, once; it is never used as
    // a `T` again (the memory is handed on as `MaybeUninit<T>` below).
    unsafe { ptr::drop_in_place(ptr) };
    // SAFETY: `ptr` came from `Arc::<T>::into_raw`, once. `MaybeUninit<T>` has the size,
    // alignment and layout of `T`, so the `#[repr(C)]` `ArcInner<MaybeUninit<T>>` has the
    // layout of `ArcInner<T>`: `from_raw` finds the same allocation and reference count, and
    // the allocation is freed with the same size if it ever is.
    let arc = unsafe {
        kernel::sync::Arc::<core::mem::MaybeUninit<T>>::from_raw(ptr.cast_const().cast())
    };
    // The reference is the only one: this gives the memory back as a `UniqueArc`.
    let unique = arc.into_unique_or_drop()?;
    // SAFETY: Nothing in the memory relies on being pinned any more: its `T` was dropped above,
    // and a `MaybeUninit<T>` is never dropped or used as a `T` without being initialised again.
    Some(unsafe { Pin::into_inner_unchecked(unique) })
}
