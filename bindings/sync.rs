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
//!   (the socket callbacks, work items, the deferred drops, the ib_client, rdma_cm and
//!   completion callbacks, module init and exit), that the code may sleep and holds no
//!   spinlock. Only the bindings' trampolines make one (and the module's init and exit, with
//!   [`ProcessCtx::for_module`]); functions that may sleep take `&ProcessCtx`, and code
//!   reachable from softirq context has none to give, so it cannot call them.
//! - [`SpinLockBh`] is a spinlock taken with bottom halves disabled (`spin_lock_bh`): the locks
//!   of the data path, which both process and softirq context take.
//! - [`ProcessDrop`] holds a value whose end sleeps (pinned user pages, a reference to a task's
//!   `mm`, a device registration): dropping it anywhere hands the value to a work item that
//!   ends it in process context ([`DropInProcess`]), so an object that owns one may be dropped
//!   in any context.
//! - [`Gate`] is a flag that a fast path takes without waiting and a slow path waits for,
//!   which lockdep sees as a lock (a connection's transmit ownership, C's `RDS_IN_XMIT`).

use super::raw;
use core::{
    marker::PhantomData,
    mem::ManuallyDrop,
    ops::Deref,
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
};
use kernel::{
    alloc::{AllocError, Flags},
    prelude::*,
    sync::{
        lock::{Backend, Lock},
        LockClassKey,
    },
    types::Opaque,
    ThisModule,
};

/// Proof that the current code runs in process context, may sleep, and holds no spinlock.
///
/// Not `Send`: it is valid only on the task and in the call that created it. Only the
/// bindings' trampolines create one, at the entry points named in the module documentation,
/// and the module's init and exit ([`ProcessCtx::for_module`]).
pub(crate) struct ProcessCtx {
    _not_send: PhantomData<*mut ()>,
}

impl ProcessCtx {
    /// Claims process context at an entry point that is known to run in it (a `proto_ops`
    /// callback, a work item, an ib_client or rdma_cm callback). On kernels built with
    /// `CONFIG_DEBUG_ATOMIC_SLEEP`, `might_sleep()` checks the claim; elsewhere the claim
    /// costs nothing.
    pub(super) fn enter() -> Self {
        #[cfg(CONFIG_DEBUG_ATOMIC_SLEEP)]
        // SAFETY: `might_sleep` only checks (and warns).
        unsafe {
            raw::rds_rs_might_sleep()
        };
        Self {
            _not_send: PhantomData,
        }
    }

    /// Process context for the module's init and exit, which the kernel runs in process
    /// context (`init_module`, `delete_module`). Only the module's root holds its
    /// `ThisModule`.
    pub(crate) fn for_module(_module: &'static ThisModule) -> Self {
        Self::enter()
    }
}

/// Initialises the `spinlock_t` at `ptr` (the `init` of both spinlock backends below).
///
/// # Safety
///
/// `ptr` is valid for writes, and `name` and `key` stay valid for reads indefinitely.
unsafe fn spin_init(
    ptr: *mut kernel::bindings::spinlock_t,
    name: *const kernel::ffi::c_char,
    key: *mut kernel::bindings::lock_class_key,
) {
    // SAFETY: `ptr` is valid for writes and `name` and `key` stay valid for reads
    // indefinitely (this function's contract), which is what `__spin_lock_init` needs.
    unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
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
        // SAFETY: The caller's guarantees are those of `Backend::init`, which `spin_init`
        // needs.
        unsafe { spin_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // `spin_lock_bh` is `_raw_spin_lock_bh` of the `raw_spinlock_t` that starts every
        // `spinlock_t` (outside PREEMPT_RT): the kernel's own entry point, called directly.
        // CAST: the raw lock is the first member of `spinlock_t`, so the pointers coincide.
        // SAFETY: The caller guarantees that `ptr` points to an initialised spinlock.
        unsafe { raw::_raw_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // CAST: As in `lock`.
        // SAFETY: The caller guarantees that it owns the lock at `ptr`, taken by `lock`.
        unsafe { raw::_raw_spin_unlock_bh(ptr.cast()) }
    }
}

/// A spinlock for data that only process context touches (`spin_lock`, preemption off, bottom
/// halves on), taken through the kernel's own entry points.
pub(crate) type SpinLockPc<T> = Lock<T, SpinLockPcBackend>;

/// The backend of [`SpinLockPc`]: a kernel `spinlock_t` taken with `spin_lock`.
pub(crate) struct SpinLockPcBackend;

// SAFETY: `spin_lock` gives mutual exclusion; `relock` uses the default implementation, which
// calls `lock` again.
unsafe impl Backend for SpinLockPcBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller's guarantees are those of `Backend::init`, which `spin_init`
        // needs.
        unsafe { spin_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // CAST: As in `SpinLockBhBackend::lock`: the raw lock starts the `spinlock_t`.
        // SAFETY: The caller guarantees that `ptr` points to an initialised spinlock.
        unsafe { raw::_raw_spin_lock(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // CAST: As in `lock`.
        // SAFETY: The caller guarantees that it owns the lock at `ptr`, taken by `lock`.
        unsafe { raw::_raw_spin_unlock(ptr.cast()) }
    }
}

/// Creates a [`SpinLockPc`] initialiser with the given name and a new lock class.
macro_rules! new_spinlock_pc {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::bindings::sync::SpinLockPc::new(
            $inner,
            ::kernel::c_str!($name),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_pc;

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

/// A value whose end may sleep (unpinning pages takes the mm's locks; deregistering memory
/// waits for the device): [`ProcessDrop`] ends it in process context. The default `end` just
/// drops the value; a type whose end needs the proof of process context does its work there.
pub(crate) trait DropInProcess: Send + 'static {
    /// Ends the value, in process context.
    fn end(self, _ctx: &ProcessCtx)
    where
        Self: Sized,
    {
    }
}

/// The part of a [`ProcessDrop`] node the C list and the deferred work see: the list link first
/// (the C side hands back a pointer to it, which is therefore a pointer to the node), then the
/// function that drops the node.
#[repr(C)]
struct DeferHeader {
    link: Opaque<raw::llist_node>,
    drop_node: unsafe fn(*mut DeferHeader, &ProcessCtx),
}

/// A heap node holding a [`ProcessDrop`]'s value.
#[repr(C)]
struct DeferNode<T> {
    header: DeferHeader,
    value: ManuallyDrop<T>,
}

/// Frees the node at `hdr` and ends its value.
///
/// # Safety
///
/// `hdr` is the header of a `KBox<DeferNode<T>>` leaked by [`ProcessDrop::drop`], not yet
/// taken back.
unsafe fn drop_node<T: DropInProcess>(hdr: *mut DeferHeader, ctx: &ProcessCtx) {
    // SAFETY: Per the function's safety requirements, `hdr` starts a leaked
    // `KBox<DeferNode<T>>` (the header is its first field of a `repr(C)` struct).
    let mut node = unsafe { KBox::from_raw(hdr.cast::<DeferNode<T>>()) };
    // SAFETY: The value is taken once, here; the node is freed right after without it.
    let value = unsafe { ManuallyDrop::take(&mut node.value) };
    drop(node);
    value.end(ctx);
}

/// A value whose end may sleep, made droppable in any context: dropping a `ProcessDrop`
/// queues the value for a work item that ends it in process context ([`DropInProcess`]). Code
/// in process context that needs the value gone when it returns calls [`flush_deferred`]
/// afterwards.
///
/// # Invariants
///
/// `node` is a `KBox<DeferNode<T>>` leaked by `new` and owned by this object, its value
/// initialised, until `drop` hands it to the deferred work.
pub(crate) struct ProcessDrop<T: DropInProcess> {
    node: NonNull<DeferNode<T>>,
}

// SAFETY: The object owns a `T: Send`, moved between threads only by value.
unsafe impl<T: DropInProcess> Send for ProcessDrop<T> {}
// SAFETY: Shared access only gives `&T`; `T: Sync` makes that safe across threads.
unsafe impl<T: DropInProcess + Sync> Sync for ProcessDrop<T> {}

impl<T: DropInProcess> ProcessDrop<T> {
    /// Wraps `value`, allocating its node now (so that dropping never allocates). When there
    /// is no memory for the node, `value` is ended before this returns.
    pub(crate) fn new(value: T, flags: Flags, ctx: &ProcessCtx) -> Result<Self, AllocError> {
        let node = match KBox::<DeferNode<T>>::new_uninit(flags) {
            Ok(n) => n,
            Err(e) => {
                value.end(ctx);
                return Err(e);
            }
        };
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

impl<T: DropInProcess> Deref for ProcessDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariant the node is live and its value initialised while `self`
        // exists.
        unsafe { &self.node.as_ref().value }
    }
}

impl<T: DropInProcess> Drop for ProcessDrop<T> {
    fn drop(&mut self) {
        let hdr = self.node.as_ptr().cast::<DeferHeader>();
        // SAFETY: The node is live (type invariant); its link is handed to the C list, which
        // owns the node from now on: the deferred work calls `drop_node::<T>` (stored in the
        // header by `new`) on it exactly once.
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
    // The deferred work is a work item: process context.
    let ctx = ProcessCtx::enter();
    // SAFETY: `hdr` heads a node leaked by `ProcessDrop` (the function's safety requirements),
    // whose `drop_node` matches its value type.
    unsafe { ((*hdr).drop_node)(hdr, &ctx) }
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
    // SAFETY: `ptr` holds the only reference (from a `UniqueArc`; `into_raw` ran no destructor),
    // so nothing else reaches the value: it is dropped in place once, here, and never used as a
    // `T` again (the memory goes on as `MaybeUninit<T>` below).
    unsafe { ptr::drop_in_place(ptr) };
    // SAFETY: `ptr` came from `Arc::<T>::into_raw`, once; `MaybeUninit<T>` has `T`'s layout, so
    // `#[repr(C)]` `ArcInner<MaybeUninit<T>>` has `ArcInner<T>`'s: `from_raw` finds the same
    // allocation and count, and a free uses the same size.
    let arc = unsafe {
        kernel::sync::Arc::<core::mem::MaybeUninit<T>>::from_raw(ptr.cast_const().cast())
    };
    // The reference is the only one: this gives the memory back as a `UniqueArc`.
    let unique = arc.into_unique_or_drop()?;
    // SAFETY: Nothing in the memory relies on being pinned any more: its `T` was dropped above,
    // and a `MaybeUninit<T>` is never dropped or used as a `T` without being initialised again.
    Some(unsafe { Pin::into_inner_unchecked(unique) })
}

/// A flag owned by one task at a time: a fast path takes it without waiting
/// ([`Gate::try_take`]) and leaves the work to the owner when it cannot; a slow path waits for
/// it ([`Gate::take`]). On kernels with lockdep, the flag is a lock to lockdep (a try-lock for
/// the fast path, a blocking acquisition for the wait), so a wait for it while holding a lock
/// its owner needs is reported, as a wait for a mutex would be. The wait sleeps on the gate's
/// wait queue until the owner lets go ([`Gate::release`] wakes it).
///
/// The flag's operations are sequentially consistent, so a protocol of "set a flag, then look
/// at the gate" against "release the gate, then look at the flag" cannot miss both ways.
///
/// # Invariants
///
/// `raw` was initialised by `rds_rs_gate_init` and is never moved.
#[pin_data]
pub(crate) struct Gate {
    held: AtomicBool,
    /// Tasks waiting in [`Gate::take`].
    waiters: AtomicU32,
    #[pin]
    raw: Opaque<raw::rds_rs_gate>,
}

// SAFETY: The flags are atomics; the wait queue and lockdep map are used through the kernel's
// thread-safe functions.
unsafe impl Send for Gate {}
// SAFETY: As above.
unsafe impl Sync for Gate {}

impl Gate {
    /// A gate nobody owns, named `name` for lockdep.
    pub(crate) fn new(name: &'static CStr, key: &'static LockClassKey) -> impl PinInit<Self> {
        pin_init!(Self {
            held: AtomicBool::new(false),
            waiters: AtomicU32::new(0),
            // INVARIANT: initialised here.
            // SAFETY: `slot` is valid for writes while the closure runs; the helper
            // initialises the wait queue and the lockdep map in place, with a name and key
            // that live for ever.
            raw <- Opaque::ffi_init(|slot| unsafe {
                raw::rds_rs_gate_init(slot, name.as_char_ptr(), lock_class_key(key))
            }),
        })
    }

    /// Takes the gate if nobody owns it; returns whether it did.
    pub(crate) fn try_take(&self) -> bool {
        if self.held.swap(true, Ordering::SeqCst) {
            return false;
        }
        #[cfg(CONFIG_LOCKDEP)]
        // SAFETY: The gate is initialised (type invariant).
        unsafe {
            raw::rds_rs_gate_acquired(self.raw.get(), true)
        };
        true
    }

    /// Whether somebody owns the gate (sequentially consistent).
    pub(crate) fn is_taken(&self) -> bool {
        self.held.load(Ordering::SeqCst)
    }

    /// Waits until the gate is free and takes it (process context).
    pub(crate) fn take(&self, _ctx: &ProcessCtx) {
        #[cfg(CONFIG_LOCKDEP)]
        // SAFETY: The gate is initialised (type invariant). Told before waiting, as a lock
        // being acquired.
        unsafe {
            raw::rds_rs_gate_acquired(self.raw.get(), false)
        };
        if self.held.swap(true, Ordering::SeqCst) {
            self.waiters.fetch_add(1, Ordering::SeqCst);
            self.wait(|| !self.held.swap(true, Ordering::SeqCst));
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Sleeps on the gate's wait queue until `cond` holds (it does not sleep itself).
    fn wait<C: FnMut() -> bool>(&self, mut cond: C) {
        // SAFETY: The gate is initialised (type invariant); `cond_trampoline::<C>` gets `arg`
        // pointing at `cond`, which outlives the call. The callers are in process context.
        unsafe {
            raw::rds_rs_gate_wait(
                self.raw.get(),
                Some(cond_trampoline::<C>),
                ptr::addr_of_mut!(cond).cast(),
            )
        };
    }

    /// Lets go of the gate (its owner, in the task that took it), waking a waiter.
    pub(crate) fn release(&self) {
        #[cfg(CONFIG_LOCKDEP)]
        // SAFETY: The gate is initialised (type invariant) and held by this task.
        unsafe {
            raw::rds_rs_gate_released(self.raw.get())
        };
        self.held.store(false, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            // SAFETY: The gate is initialised (type invariant).
            unsafe { raw::rds_rs_gate_wake(self.raw.get()) };
        }
    }
}

/// Calls the closure behind `arg` for the C wait helper.
///
/// # Safety
///
/// `arg` points to a live `C` that nothing else uses during the call.
unsafe extern "C" fn cond_trampoline<C: FnMut() -> bool>(arg: *mut kernel::ffi::c_void) -> bool {
    // SAFETY: Per the function's safety requirements.
    let cond = unsafe { &mut *arg.cast::<C>() };
    cond()
}

/// The C pointer of a lockdep class key.
pub(super) fn lock_class_key(key: &'static LockClassKey) -> *mut raw::lock_class_key {
    // CAST: `LockClassKey` is a transparent wrapper of `Opaque<lock_class_key>`, itself
    // transparent over the C struct, so the pointers coincide; the key is only written by
    // lockdep, through its own synchronisation.
    ptr::from_ref(key).cast_mut().cast()
}

/// Gives a `#[pin_data]` struct `$t` a method `$name(self: Pin<&mut Self>) -> &mut $fty` for
/// its field `$field`, which must be declared without `#[pin]` and be `Unpin` (checked): a
/// field that is not structurally pinned may be borrowed mutably from a pinned struct, as long
/// as no other field points into it (the caller's promise, stated where the macro is used).
macro_rules! impl_unpinned_field {
    ($t:ty, $field:ident: $fty:ty, $name:ident) => {
        const _: fn() = || {
            fn unpin<T: ::core::marker::Unpin>() {}
            unpin::<$fty>();
            let _: fn(&$t) -> &$fty = |x| &x.$field;
        };

        impl $t {
            /// Mutable access to the field, which is not structurally pinned.
            // The unsafe code is this macro's (in bindings/), checked here, not its caller's.
            #[allow(unsafe_code)]
            fn $name(self: ::core::pin::Pin<&mut Self>) -> &mut $fty {
                // SAFETY: The field is not structurally pinned (declared without `#[pin]`,
                // `Unpin`) and nothing points into it, so borrowing it mutably cannot move
                // pinned data; the rest of the struct is not touched.
                unsafe { &mut ::core::pin::Pin::get_unchecked_mut(self).$field }
            }
        }
    };
}
pub(crate) use impl_unpinned_field;
