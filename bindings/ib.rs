// SPDX-License-Identifier: GPL-2.0

//! Verbs and rdma_cm for the IB/iWARP transport: the ib_client, devices, protection domains,
//! completion queues, rdma_cm ids and their events, queue pairs, work requests and DMA mapping.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h); the C glue is `ib_glue.c`.
//!
//! # Contexts and rules
//!
//! - The ib_client's `add` and `remove` ([`IbClient`]) run in process context with the
//!   device core's locks held: they may sleep, but must not register or unregister clients.
//!   A device is valid between its `add` and the return of its `remove`.
//! - rdma_cm event handlers ([`CmHandler::event`]) run in process context (rdma_cm's work
//!   queues) with the id's handler mutex held: they may sleep, must not create or destroy cm
//!   ids, and must not drop a [`CmId`] (its `Drop` destroys the id, which waits for the
//!   handler: a deadlock in its own handler). Returning [`CmAction::Destroy`] has rdma_cm
//!   destroy the id of the event, which is only allowed for an id the handler did not adopt.
//! - Completions ([`WcHandler::done`]) run in softirq context: the CQ's event schedules its
//!   `irq_poll` (`IB_POLL_SOFTIRQ`), which polls it with a budget, one CQ at a time on one
//!   CPU. A handler must not sleep (it gets no [`ProcessCtx`]), allocates with `GFP_ATOMIC`,
//!   and every lock it shares with process context is taken with bottom halves disabled
//!   ([`super::sync::SpinLockBh`]). Every work request names a [`WrCqe`], which must stay
//!   valid and pinned until its completion (a flush completes every outstanding request when
//!   the QP is drained).

use super::mm::{PinOwner, PinnedPages};
use super::raw;
use super::sync::ProcessCtx;
use core::{
    marker::PhantomData,
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    page::Page,
    prelude::*,
    sync::{Arc, Mutex},
    types::{ForeignOwnable, Opaque},
};

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
    ptr: NonNull<raw::ib_device>,
}

// SAFETY: A device may be used from any thread; the device core serialises what needs it.
unsafe impl Send for Device {}
// SAFETY: As above; `&Device` only reads attributes or calls thread-safe verbs.
unsafe impl Sync for Device {}

impl Device {
    fn as_ptr(self) -> *mut raw::ib_device {
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

/// What the ib_client does with devices: the state it keeps per device.
pub(crate) trait IbClient: Send + Sync + 'static {
    /// The per-device state.
    type Data: ForeignOwnable + Send + Sync;

    /// A device appeared: `None` when the client does not serve it (process context; see the
    /// module documentation).
    fn add(&self, dev: Device, ctx: &ProcessCtx) -> Option<Self::Data>;

    /// A device goes away: after this returns the device must not be used (process context).
    fn remove(&self, dev: Device, data: Self::Data, ctx: &ProcessCtx);
}

/// The registered client, type-erased for the C callbacks.
trait ClientDyn: Send + Sync {
    fn add(&self, dev: Device, ctx: &ProcessCtx) -> *mut c_void;
    /// # Safety
    ///
    /// `data` was returned by `add` for `dev` and is handed back once.
    unsafe fn remove(&self, dev: Device, data: *mut c_void, ctx: &ProcessCtx);
}

struct ClientBox<T: IbClient>(Arc<T>);

impl<T: IbClient> ClientDyn for ClientBox<T> {
    fn add(&self, dev: Device, ctx: &ProcessCtx) -> *mut c_void {
        match self.0.add(dev, ctx) {
            Some(d) => d.into_foreign() as *mut c_void,
            None => ptr::null_mut(),
        }
    }

    unsafe fn remove(&self, dev: Device, data: *mut c_void, ctx: &ProcessCtx) {
        // SAFETY: Per the function's safety requirements, `data` came from `into_foreign` in
        // `add` and is taken back once.
        let d = unsafe { T::Data::from_foreign(data as _) };
        self.0.remove(dev, d, ctx);
    }
}

/// The client the C callbacks call: a leaked `KBox<Arc<dyn ClientDyn>>` (a thin pointer), or
/// null.
static CLIENT: AtomicPtr<Arc<dyn ClientDyn>> = AtomicPtr::new(ptr::null_mut());

/// The ib_client `rds_rs`, registered while this object exists.
///
/// # Invariants
///
/// While it exists, `CLIENT` holds a box leaked by `new` and the C client is registered.
pub(crate) struct IbRegistration(());

impl IbRegistration {
    /// Registers `client`; its `add` runs for every device already present before this
    /// returns.
    pub(crate) fn new<T: IbClient>(client: Arc<T>, _ctx: &ProcessCtx) -> Result<Self> {
        let inner: Arc<dyn ClientDyn> = Arc::new(ClientBox(client), GFP_KERNEL)?;
        let outer = KBox::new(inner, GFP_KERNEL)?;
        let p = KBox::into_raw(outer);
        if CLIENT
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `p` was leaked just above and not published.
            drop(unsafe { KBox::from_raw(p) });
            return Err(EBUSY);
        }
        // SAFETY: The client struct is static; its callbacks read `CLIENT`, published above.
        if let Err(e) = to_result(unsafe { raw::rds_rs_ib_register() }) {
            let p = CLIENT.swap(ptr::null_mut(), Ordering::AcqRel);
            // SAFETY: Registration failed, so no callback uses the box.
            drop(unsafe { KBox::from_raw(p) });
            return Err(e);
        }
        // INVARIANT: published and registered.
        Ok(Self(()))
    }
}

impl Drop for IbRegistration {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant); unregistering calls `remove` for every device
        // and is a full fence: no callback runs afterwards.
        unsafe { raw::rds_rs_ib_unregister() };
        let p = CLIENT.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: `p` came from `KBox::into_raw` in `new` and nothing uses it any more.
            drop(unsafe { KBox::from_raw(p) });
        }
    }
}

fn with_client<R>(f: impl FnOnce(&dyn ClientDyn) -> R) -> Option<R> {
    let p = CLIENT.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: A non-null `CLIENT` is a live box while the client is registered, and the C
    // callbacks run only then.
    Some(f(unsafe { &**p }))
}

/// # Safety
///
/// Called by the ib_client `add` callback with a registered device.
#[no_mangle]
unsafe extern "C" fn rds_rs_ib_dev_add(dev: *mut raw::ib_device) -> *mut c_void {
    let Some(ptr) = NonNull::new(dev) else {
        return ptr::null_mut();
    };
    // The ib_client callbacks run in process context (device registration, module load).
    let ctx = ProcessCtx::enter();
    // INVARIANT: the device is registered for the duration of `add`.
    with_client(|c| c.add(Device { ptr }, &ctx)).unwrap_or(ptr::null_mut())
}

/// # Safety
///
/// Called by the ib_client `remove` callback, with the data `add` returned.
#[no_mangle]
unsafe extern "C" fn rds_rs_ib_dev_remove(dev: *mut raw::ib_device, data: *mut c_void) {
    let Some(ptr) = NonNull::new(dev) else { return };
    if data.is_null() {
        return;
    }
    // The ib_client callbacks run in process context (device unregistration, module unload).
    let ctx = ProcessCtx::enter();
    // SAFETY: The device is registered until `remove` returns; `data` is what `add` returned,
    // handed back once.
    let _ = with_client(|c| unsafe { c.remove(Device { ptr }, data, &ctx) });
}

/// A protection domain, shared (`Arc<Pd>`) by what is made on it: each QP and registration
/// holds it, so it is deallocated only after the last of them is gone.
///
/// # Invariants
///
/// `ptr` was allocated by `ib_alloc_pd` on `dev` and is owned by this object.
pub(crate) struct Pd {
    ptr: NonNull<raw::ib_pd>,
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

/// A registration of user memory on a device (`ib_reg_user_mr`): the device pins the pages
/// (through the calling process's `mm`), and peers reach them by the r_key, at addresses that
/// start at the iova given. Deregistered when dropped (`ib_dereg_mr`): once the drop returns,
/// no peer can reach the memory. Dropping may sleep: the owner drops it in process context.
///
/// # Invariants
///
/// `ptr` was returned by `ib_reg_user_mr` on `_pd` and is owned by this object.
pub(crate) struct UserMr {
    ptr: NonNull<raw::ib_mr>,
    rkey: u32,
    /// The PD it was made on, kept until after it is deregistered (fields drop after `drop`).
    _pd: Arc<Pd>,
}

// SAFETY: A registration may be used and deregistered from any thread.
unsafe impl Send for UserMr {}
// SAFETY: Shared access only reads the r_key (a copy).
unsafe impl Sync for UserMr {}

impl UserMr {
    /// Registers the calling process's `len` bytes at user address `start`, which peers
    /// address from `iova` on (its offset in a page must be `start`'s); peers may read them,
    /// and with `remote_write` also write them (and run atomics on them, when `atomics`).
    /// Deregistering may sleep: the owner drops it in process context.
    pub(crate) fn register(
        pd: &Arc<Pd>,
        start: u64,
        len: u64,
        iova: u64,
        remote_write: bool,
        atomics: bool,
        _ctx: &ProcessCtx,
    ) -> Result<Self> {
        let mut rkey = 0u32;
        // SAFETY: The PD is live (`pd` is borrowed); `rkey` is valid for writes. Pinning the
        // pages may sleep, which `_ctx` allows; the memory is the caller's process's, which
        // is the one running this system call.
        let p = from_err_ptr(unsafe {
            raw::rds_rs_ib_reg_user_mr(
                pd.ptr.as_ptr(),
                start,
                len,
                iova,
                remote_write,
                atomics,
                &mut rkey,
            )
        })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: registered just now on `pd`, which it holds.
        Ok(Self {
            ptr,
            rkey,
            _pd: pd.clone(),
        })
    }

    /// The r_key peers name the registration by.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }
}

impl Drop for UserMr {
    fn drop(&mut self) {
        // SAFETY: Owned, and its PD is live (held: type invariant); the owner drops it in
        // process context, where deregistering may sleep.
        let r = unsafe { raw::rds_rs_ib_dereg_mr(self.ptr.as_ptr()) };
        if r != 0 {
            pr_warn!("ib_dereg_mr failed: {}\n", r);
        }
    }
}

/// A fast registration (FRWR) of pinned pages on a device (`ib_alloc_mr` + `ib_map_mr_sg`),
/// for devices whose `ib_reg_user_mr` cannot take the address peers use (siw). It is made
/// valid by an `IB_WR_REG_MR` work request ([`Qp::register_mr`]) and revoked when dropped
/// (`ib_dereg_mr`, then a grace period, then the pages are unmapped): once the drop returns,
/// no new access of a peer finds the memory. Dropping sleeps: the owner drops it in process
/// context.
///
/// # Invariants
///
/// `ptr` was returned by `rds_rs_ib_frmr_map` on `_pd` over the pages of `_pages` and is owned
/// by this object; `_pages` keeps them pinned until after it is freed.
pub(crate) struct FastMr<P: PinOwner> {
    ptr: NonNull<raw::rds_rs_frmr>,
    rkey: u32,
    /// The PD it was made on, kept until after it is freed (fields drop after `drop`).
    _pd: Arc<Pd>,
    /// The pages it maps, unpinned after it is freed.
    _pages: P,
}

// SAFETY: The registration may be used and freed from any thread; `P` is `Send`.
unsafe impl<P: PinOwner> Send for FastMr<P> {}
// SAFETY: Shared access only reads the r_key (a copy) or hands the pointer to a work request;
// `P` is `Sync`.
unsafe impl<P: PinOwner> Sync for FastMr<P> {}

impl<P: PinOwner> FastMr<P> {
    /// Maps `len` bytes of `pages` from `offset` (in the first page) into a new fast
    /// registration on `pd`, addressed by peers from `iova`, with a fresh key; the
    /// registration keeps `pages` (dropped with it, in process context: freeing it sleeps). It
    /// is not valid until an `IB_WR_REG_MR` of it completed ([`Qp::register_mr`]). `EINVAL` if
    /// the device maps fewer of the pages than asked (the caller checks `max_fast_reg_pages`
    /// first; above it, siw's `ib_alloc_mr` fails with `ENOMEM`).
    pub(crate) fn map(
        pd: &Arc<Pd>,
        pages: P,
        offset: usize,
        len: u64,
        iova: u64,
        _ctx: &ProcessCtx,
    ) -> Result<Self> {
        let raw_pages = pages.pinned().raw_pages();
        let n = u32::try_from(raw_pages.len()).map_err(|_| EINVAL)?;
        let off = u32::try_from(offset).map_err(|_| EINVAL)?;
        let mut rkey = 0u32;
        // Allocating and mapping may sleep, which `_ctx` allows; the helper only reads the page
        // array (`cast_mut` is for its C signature).
        // SAFETY: `pd` is live (borrowed); `raw_pages` holds `n` pinned pages of `pages`, which
        // the registration keeps (`PinOwner`); `rkey` is writable.
        let p = from_err_ptr(unsafe {
            raw::rds_rs_ib_frmr_map(
                pd.ptr.as_ptr(),
                raw_pages.as_ptr().cast_mut(),
                n,
                off,
                len,
                iova,
                &mut rkey,
            )
        })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: mapped just now on `pd` over `pages`, both of which it holds.
        Ok(Self {
            ptr,
            rkey,
            _pd: pd.clone(),
            _pages: pages,
        })
    }

    /// The r_key (and l_key) of the registration.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Deregisters the MR now (no new access finds it), keeping the pages mapped until the
    /// object is dropped: a device that was still sending from them (siw's READ RESPONSE in
    /// progress) may go on until the owner fenced it ([`Qp::post_fence`]).
    pub(crate) fn deregister(&mut self, _ctx: &ProcessCtx) {
        // SAFETY: Owned, its PD is live and its pages pinned (type invariant); deregistering
        // and the grace period may sleep, which `_ctx` allows. The helper does it once.
        unsafe { raw::rds_rs_ib_frmr_dereg(self.ptr.as_ptr()) };
    }
}

impl<P: PinOwner> Drop for FastMr<P> {
    fn drop(&mut self) {
        // SAFETY: Owned, its PD is live and its pages pinned (type invariant); the owner
        // drops it in process context, where deregistering and the grace period may sleep.
        unsafe { raw::rds_rs_ib_frmr_free(self.ptr.as_ptr()) };
    }
}

/// An MR of a PD that is never made valid: what fence work requests ([`Qp::post_fence`])
/// invalidate, which changes nothing. Freed when dropped.
///
/// # Invariants
///
/// `ptr` was returned by `ib_alloc_mr` on `_pd` and is owned by this object; every QP a fence
/// of it was posted on holds it until the QP is gone ([`Qp::post_fence`]).
pub(crate) struct IdleMr {
    ptr: NonNull<raw::ib_mr>,
    rkey: u32,
    /// The PD it was made on, kept until after it is freed (fields drop after `drop`).
    _pd: Arc<Pd>,
}

// SAFETY: The MR is only freed (once, by its owner) and its key read (a copy).
unsafe impl Send for IdleMr {}
// SAFETY: As above.
unsafe impl Sync for IdleMr {}

impl IdleMr {
    /// A new idle MR on `pd`. Freeing it may sleep: the last holder drops it in process
    /// context.
    pub(crate) fn new(pd: &Arc<Pd>, _ctx: &ProcessCtx) -> Result<Arc<Self>> {
        let mut rkey = 0u32;
        // SAFETY: The PD is live (borrowed); `rkey` is valid for writes; allocating may sleep,
        // which `_ctx` allows.
        let p = from_err_ptr(unsafe { raw::rds_rs_ib_alloc_idle_mr(pd.ptr.as_ptr(), &mut rkey) })?;
        let ptr = NonNull::new(p).ok_or(ENOMEM)?;
        // INVARIANT: allocated just now on `pd`, which it holds; no fence names it yet.
        Ok(Arc::new(
            Self {
                ptr,
                rkey,
                _pd: pd.clone(),
            },
            GFP_KERNEL,
        )?)
    }

    /// Its key.
    pub(crate) fn rkey(&self) -> u32 {
        self.rkey
    }
}

impl Drop for IdleMr {
    fn drop(&mut self) {
        // SAFETY: Owned, its PD is live (held) and no QP that a fence of it was posted on is
        // left (each holds it: type invariant); the last holder drops it in process context.
        unsafe { raw::rds_rs_ib_dereg_mr(self.ptr.as_ptr()) };
    }
}

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

/// A completion queue polled in softirq context (`IB_POLL_SOFTIRQ`); freed when dropped.
///
/// # Invariants
///
/// `ptr` was allocated by `ib_alloc_cq` and is owned by this object.
pub(crate) struct Cq {
    ptr: NonNull<raw::ib_cq>,
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

/// A Rust enum for a C enum: the variants with their C values, and a last variant `Other`
/// for any value not listed (a newer kernel's). Generates `from_raw` (the conversion from the
/// C value, for the glue callbacks of this module) and `raw` (the C value back).
macro_rules! c_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vm:meta])* $v:ident = $val:literal, )*
        }
    ) => {
        $(#[$m])*
        $vis enum $name {
            $( $(#[$vm])* $v, )*
            /// A value not listed here.
            Other(i32),
        }

        impl $name {
            /// The variant of the C value `v`.
            fn from_raw(v: i32) -> Self {
                match v {
                    $( $val => Self::$v, )*
                    v => Self::Other(v),
                }
            }

            /// The C value.
            pub(crate) fn raw(self) -> i32 {
                match self {
                    $( Self::$v => $val, )*
                    Self::Other(v) => v,
                }
            }
        }
    };
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
    /// `irq_poll` (`IB_POLL_SOFTIRQ`, `ib_glue.c`), so this must not sleep (see the module
    /// documentation).
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

    fn raw(&self) -> *mut raw::ib_cqe {
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

/// What an rdma_cm event handler tells rdma_cm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmAction {
    /// Keep the id.
    Keep,
    /// Destroy the id of the event (only for a connection request the handler did not adopt).
    Destroy,
}

c_enum! {
    /// The type of an rdma_cm event: C's `enum rdma_cm_event_type` (and `Other(i32)`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum CmEventKind {
        /// `RDMA_CM_EVENT_ADDR_RESOLVED`: the address was resolved.
        AddrResolved = 0,
        /// `RDMA_CM_EVENT_ADDR_ERROR`: the address could not be resolved.
        AddrError = 1,
        /// `RDMA_CM_EVENT_ROUTE_RESOLVED`: the route was resolved.
        RouteResolved = 2,
        /// `RDMA_CM_EVENT_ROUTE_ERROR`: the route could not be resolved.
        RouteError = 3,
        /// `RDMA_CM_EVENT_CONNECT_REQUEST`: a connection request on a listener.
        ConnectRequest = 4,
        /// `RDMA_CM_EVENT_CONNECT_RESPONSE`: a reply for an id without a QP.
        ConnectResponse = 5,
        /// `RDMA_CM_EVENT_CONNECT_ERROR`: the connection could not be made.
        ConnectError = 6,
        /// `RDMA_CM_EVENT_UNREACHABLE`: the peer did not answer.
        Unreachable = 7,
        /// `RDMA_CM_EVENT_REJECTED`: the peer rejected the request.
        Rejected = 8,
        /// `RDMA_CM_EVENT_ESTABLISHED`: the connection is up.
        Established = 9,
        /// `RDMA_CM_EVENT_DISCONNECTED`: the connection went down.
        Disconnected = 10,
        /// `RDMA_CM_EVENT_DEVICE_REMOVAL`: the device of the id is going.
        DeviceRemoval = 11,
        /// `RDMA_CM_EVENT_MULTICAST_JOIN`: a multicast join completed.
        MulticastJoin = 12,
        /// `RDMA_CM_EVENT_MULTICAST_ERROR`: a multicast group failed.
        MulticastError = 13,
        /// `RDMA_CM_EVENT_ADDR_CHANGE`: the address moved to another device.
        AddrChange = 14,
        /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`: the QP left the timewait state.
        TimewaitExit = 15,
    }
}

/// An rdma_cm event.
pub(crate) struct CmEvent<'a> {
    /// The event type.
    pub(crate) kind: CmEventKind,
    /// Its status (negative errno for errors; the reject reason for `REJECTED`).
    pub(crate) status: i32,
    /// The private data of a connection request, reply or reject (as rdma_cm delivers it).
    pub(crate) private: &'a [u8],
    /// The event came through the IPv6 handler (the listener's family, for requests).
    pub(crate) v6: bool,
}

/// Who handles the events of an rdma_cm id.
pub(crate) trait CmHandler: Send + Sync {
    /// An event on `id` (see the module documentation for the rules); rdma_cm calls handlers
    /// in process context, with the id's handler mutex held.
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction;
}

/// The context of an rdma_cm id: who handles its events.
type CmCtx = KBox<Arc<dyn CmHandler>>;

/// An rdma_cm id owned by the transport; destroyed when dropped (which waits for a running
/// handler of the id, so never drop one inside its own handler).
///
/// # Invariants
///
/// `ptr` is a live rdma_cm id owned by this object; its context is `ctx`, a leaked
/// [`CmCtx`] freed after the id is destroyed.
pub(crate) struct CmId {
    ptr: NonNull<raw::rdma_cm_id>,
    ctx: *mut Arc<dyn CmHandler>,
}

// SAFETY: rdma_cm ids may be used from any thread (rdma_cm serialises its state changes).
unsafe impl Send for CmId {}
// SAFETY: As above.
unsafe impl Sync for CmId {}

/// A borrowed rdma_cm id, as an event handler sees it.
#[derive(Clone, Copy)]
pub(crate) struct CmIdRef<'a> {
    ptr: NonNull<raw::rdma_cm_id>,
    _p: PhantomData<&'a ()>,
}

fn leak_ctx(h: Arc<dyn CmHandler>) -> Result<*mut Arc<dyn CmHandler>> {
    let b: CmCtx = KBox::new(h, GFP_KERNEL)?;
    Ok(KBox::into_raw(b))
}

impl CmId {
    /// A new id whose events go to `handler` (IPv6 ids get the IPv6 handler).
    pub(crate) fn new(handler: Arc<dyn CmHandler>, v6: bool, _ctx: &ProcessCtx) -> Result<Self> {
        let ctx = leak_ctx(handler)?;
        // SAFETY: `ctx` stays valid until after the id is destroyed (`Drop`); creating an id
        // may sleep, which `_ctx` allows.
        let p = unsafe { raw::rds_rs_cm_create(ctx.cast(), v6) };
        match from_err_ptr(p).and_then(|p| NonNull::new(p).ok_or(ENOMEM)) {
            // INVARIANT: created just now with context `ctx`.
            Ok(ptr) => Ok(Self { ptr, ctx }),
            Err(e) => {
                // SAFETY: No id uses `ctx`.
                drop(unsafe { KBox::from_raw(ctx) });
                Err(e)
            }
        }
    }

    /// Binds the family's wildcard address to `port` and listens.
    pub(crate) fn listen(&self, v6: bool, port: u16, _ctx: &ProcessCtx) -> Result {
        // SAFETY: The id is live (type invariant); may sleep, which `_ctx` allows.
        to_result(unsafe { raw::rds_rs_cm_listen(self.ptr.as_ptr(), v6, port) })
    }

    /// Binds the local address `addr` with a port rdma_cm chooses, and listens.
    pub(crate) fn listen_at(&self, addr: &[u8; 16], scope_id: u32, _ctx: &ProcessCtx) -> Result {
        // SAFETY: The id is live (type invariant); `addr` is valid for 16 bytes; may sleep,
        // which `_ctx` allows.
        to_result(unsafe { raw::rds_rs_cm_listen_at(self.ptr.as_ptr(), addr.as_ptr(), scope_id) })
    }

    /// The port the id is bound to.
    pub(crate) fn port(&self) -> u16 {
        // SAFETY: The id is live (type invariant).
        unsafe { raw::rds_rs_cm_port(self.ptr.as_ptr()) }
    }

    /// Starts resolving the route from `laddr` to `faddr`:`port` (the events follow).
    pub(crate) fn resolve_addr(
        &self,
        laddr: &[u8; 16],
        faddr: &[u8; 16],
        port: u16,
        scope_id: u32,
        timeout_ms: i32,
    ) -> Result {
        // SAFETY: The id is live; the addresses are valid for 16 bytes.
        to_result(unsafe {
            raw::rds_rs_cm_resolve_addr(
                self.ptr.as_ptr(),
                laddr.as_ptr(),
                faddr.as_ptr(),
                port,
                scope_id,
                timeout_ms,
            )
        })
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: Owned (type invariant); destroying waits for running handlers of the id, after
        // which none runs, so the context can go.
        unsafe {
            raw::rds_rs_cm_destroy(self.ptr.as_ptr());
            drop(KBox::from_raw(self.ctx));
        }
    }
}

impl<'a> CmIdRef<'a> {
    /// The device the id is bound to, once the address is resolved (or the request arrived).
    pub(crate) fn device(self) -> Option<Device> {
        // SAFETY: The id is live while borrowed.
        let p = unsafe { raw::rds_rs_cm_device(self.ptr.as_ptr()) };
        // INVARIANT: an id's device is registered while the id is bound to it.
        NonNull::new(p).map(|ptr| Device { ptr })
    }

    /// Takes ownership of the id of a connection request, whose events now go to `handler`.
    /// The handler must then return [`CmAction::Keep`].
    pub(crate) fn adopt(self, handler: Arc<dyn CmHandler>) -> Result<CmId> {
        let ctx = leak_ctx(handler)?;
        // SAFETY: The id is live; from its handler, setting the context is allowed (rdma_cm
        // reads it only for later events).
        unsafe { raw::rds_rs_cm_set_context(self.ptr.as_ptr(), ctx.cast()) };
        // INVARIANT: the caller's id, whose context is now `ctx`.
        Ok(CmId { ptr: self.ptr, ctx })
    }

    /// Sets the type of service and the minimal RNR timer (at `ADDR_RESOLVED`).
    pub(crate) fn set_tos(self, tos: u8) {
        // SAFETY: The id is live.
        unsafe { raw::rds_rs_cm_set_tos(self.ptr.as_ptr(), tos) };
    }

    /// Starts resolving the route (at `ADDR_RESOLVED`).
    pub(crate) fn resolve_route(self, timeout_ms: i32) -> Result {
        // SAFETY: The id is live.
        to_result(unsafe { raw::rds_rs_cm_resolve_route(self.ptr.as_ptr(), timeout_ms) })
    }

    /// Creates the id's RC QP on `pd` with the two CQs; its asynchronous events go to
    /// `qp_ctx` ([`QpEvents`]).
    ///
    /// # Safety
    ///
    /// `qp_ctx` stays alive until the QP is destroyed.
    pub(crate) unsafe fn create_qp(
        self,
        pd: &Arc<Pd>,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: (u32, u32, u32),
        qp_ctx: *const QpEvents,
    ) -> Result {
        // SAFETY: The id, the PD and the CQs are live; the caller vouches for `qp_ctx`.
        to_result(unsafe {
            raw::rds_rs_ib_create_qp(
                self.ptr.as_ptr(),
                pd.ptr.as_ptr(),
                send_cq.ptr.as_ptr(),
                recv_cq.ptr.as_ptr(),
                caps.0,
                caps.1,
                caps.2,
                qp_ctx.cast_mut().cast(),
            )
        })
    }

    /// Connects with `private` data (from the handler, at `ROUTE_RESOLVED`).
    pub(crate) fn connect(self, private: &[u8]) -> Result {
        let len = u8::try_from(private.len()).map_err(|_| EINVAL)?;
        // SAFETY: The id is live and its handler lock is held (we run in its handler);
        // `private` is valid for `len` bytes and copied by rdma_cm.
        to_result(unsafe {
            raw::rds_rs_cm_connect(self.ptr.as_ptr(), private.as_ptr().cast(), len)
        })
    }

    /// Accepts a connection request with `private` data (from the request's handler).
    pub(crate) fn accept(self, private: &[u8]) -> Result {
        let len = u8::try_from(private.len()).map_err(|_| EINVAL)?;
        // SAFETY: As for `connect`; `rdma_accept` needs the request id's handler lock, held.
        to_result(unsafe { raw::rds_rs_cm_accept(self.ptr.as_ptr(), private.as_ptr().cast(), len) })
    }

    /// Rejects a connection request with C's reason (a host-endian int).
    pub(crate) fn reject(self, reason: i32) {
        // SAFETY: The id is live.
        let _ = unsafe { raw::rds_rs_cm_reject(self.ptr.as_ptr(), reason) };
    }

    /// Moves the QP on when a SEND arrives before the RTU (`IB_EVENT_COMM_EST`).
    #[expect(
        dead_code,
        reason = "rxe and siw send the RTU before data; kept for hardware"
    )]
    pub(crate) fn established(self) {
        // SAFETY: The id is live.
        let _ = unsafe { raw::rds_rs_cm_established(self.ptr.as_ptr()) };
    }

    /// The service level of the route (0 on iWARP).
    pub(crate) fn sl(self) -> u8 {
        // SAFETY: The id is live.
        unsafe { raw::rds_rs_cm_sl(self.ptr.as_ptr()) }
    }

    /// The source and destination GIDs.
    pub(crate) fn gids(self) -> ([u8; 16], [u8; 16]) {
        let (mut s, mut d) = ([0u8; 16], [0u8; 16]);
        // SAFETY: The id is live; both buffers are valid for 16 bytes.
        unsafe { raw::rds_rs_cm_gids(self.ptr.as_ptr(), s.as_mut_ptr(), d.as_mut_ptr()) };
        (s, d)
    }

    /// Posts a SEND of a header (`hdr`, `hdr_len` bytes at a device address) and, if
    /// `data_len` is not 0, data; `flags` are [`SEND_SIGNALED`] etc.
    ///
    /// # Safety
    ///
    /// The QP exists; `cqe` stays valid until the request completes; the device addresses
    /// are mapped for the device and stay so until then.
    pub(crate) unsafe fn post_send(
        self,
        cqe: &WrCqe,
        hdr: (u64, u32),
        data: (u64, u32),
        lkey: u32,
        flags: i32,
    ) -> Result {
        // SAFETY: Per the function's safety requirements.
        to_result(unsafe {
            raw::rds_rs_ib_post_send(
                self.ptr.as_ptr(),
                cqe.raw(),
                hdr.0,
                hdr.1,
                data.0,
                data.1,
                lkey,
                flags,
            )
        })
    }

    /// Posts an RDMA work request `wr` between the local pieces `sges` (device addresses and
    /// lengths, at most [`MAX_SGE`]; an atomic has one, 8 bytes, for the old value) and the
    /// peer's registration `rkey` at `remote_addr`; `flags` are [`SEND_SIGNALED`] and
    /// [`SEND_FENCE`].
    ///
    /// # Safety
    ///
    /// As for [`CmIdRef::post_send`]; the pieces are mapped for the device (to read them for
    /// a WRITE, to write them for a READ or an atomic) and stay so until the request
    /// completes.
    #[expect(clippy::too_many_arguments)]
    pub(crate) unsafe fn post_rdma(
        self,
        cqe: &WrCqe,
        addrs: &[u64],
        lens: &[u32],
        lkey: u32,
        wr: &RdmaWr,
        remote: (u64, u32),
        flags: i32,
    ) -> Result {
        let n = addrs.len();
        if n == 0 || n > MAX_SGE || lens.len() != n {
            return Err(EINVAL);
        }
        let (kind, at) = wr.raw();
        let at_ptr = at.as_ref().map_or(ptr::null(), ptr::from_ref);
        // SAFETY: Per the function's safety requirements; both arrays hold `n` entries and
        // `at_ptr` is null or points to `at`, all of which the helper copies before it returns.
        to_result(unsafe {
            raw::rds_rs_ib_post_rdma(
                self.ptr.as_ptr(),
                cqe.raw(),
                addrs.as_ptr(),
                lens.as_ptr(),
                n as u32,
                lkey,
                kind,
                remote.0,
                remote.1,
                at_ptr,
                flags,
            )
        })
    }

    /// Posts a receive into a header buffer and a data buffer (device addresses).
    ///
    /// # Safety
    ///
    /// As for [`CmIdRef::post_send`]; the buffers are mapped for the device to write.
    pub(crate) unsafe fn post_recv(
        self,
        cqe: &WrCqe,
        hdr: (u64, u32),
        data: (u64, u32),
        lkey: u32,
    ) -> Result {
        // SAFETY: Per the function's safety requirements.
        to_result(unsafe {
            raw::rds_rs_ib_post_recv(
                self.ptr.as_ptr(),
                cqe.raw(),
                hdr.0,
                hdr.1,
                data.0,
                data.1,
                lkey,
            )
        })
    }
}

/// What an RDMA work request does.
pub(crate) enum RdmaWr {
    /// RDMA WRITE: the local pieces to the remote range.
    Write,
    /// RDMA READ: the remote range to the local pieces.
    Read,
    /// Compare-and-swap on the remote 8 bytes: where `(old ^ compare) & compare_mask` is 0,
    /// they become `(old & !swap_mask) | (swap & swap_mask)`. Masks of all ones post IB's
    /// plain opcode, others the masked one.
    Cswp {
        /// Compared with the remote value.
        compare: u64,
        /// Written on a match.
        swap: u64,
        /// The bits compared.
        compare_mask: u64,
        /// The bits swapped.
        swap_mask: u64,
    },
    /// Fetch-and-add on the remote 8 bytes; a carry out of a bit set in `nocarry_mask` is
    /// dropped. A zero mask posts IB's plain opcode, others the masked one.
    Fadd {
        /// The addend.
        add: u64,
        /// The field boundaries.
        nocarry_mask: u64,
    },
}

impl RdmaWr {
    /// Whether the request needs the device's masked atomics.
    pub(crate) fn masked(&self) -> bool {
        match *self {
            RdmaWr::Cswp {
                compare_mask,
                swap_mask,
                ..
            } => compare_mask != u64::MAX || swap_mask != u64::MAX,
            RdmaWr::Fadd { nocarry_mask, .. } => nocarry_mask != 0,
            RdmaWr::Write | RdmaWr::Read => false,
        }
    }

    /// The glue's kind and atomic operands.
    fn raw(&self) -> (c_int, Option<raw::rds_rs_ib_atomic>) {
        let masked = self.masked();
        match *self {
            RdmaWr::Write => (raw::RDS_RS_IB_WR_WRITE as c_int, None),
            RdmaWr::Read => (raw::RDS_RS_IB_WR_READ as c_int, None),
            RdmaWr::Cswp {
                compare,
                swap,
                compare_mask,
                swap_mask,
            } => (
                if masked {
                    raw::RDS_RS_IB_WR_MASKED_CSWP
                } else {
                    raw::RDS_RS_IB_WR_CSWP
                } as c_int,
                Some(raw::rds_rs_ib_atomic {
                    compare_add: compare,
                    swap,
                    compare_add_mask: if masked { compare_mask } else { 0 },
                    swap_mask: if masked { swap_mask } else { 0 },
                }),
            ),
            RdmaWr::Fadd { add, nocarry_mask } => (
                if masked {
                    raw::RDS_RS_IB_WR_MASKED_FADD
                } else {
                    raw::RDS_RS_IB_WR_FADD
                } as c_int,
                Some(raw::rds_rs_ib_atomic {
                    compare_add: add,
                    swap: 0,
                    compare_add_mask: nocarry_mask,
                    swap_mask: 0,
                }),
            ),
        }
    }
}

/// A SEND that generates a completion.
pub(crate) const SEND_SIGNALED: i32 = raw::RDS_RS_IB_SIGNALED as i32;
/// A SEND that raises a solicited event at the receiver (C arms its receive CQ for these).
pub(crate) const SEND_SOLICITED: i32 = raw::RDS_RS_IB_SOLICITED as i32;
/// A SEND that waits for earlier RDMA reads.
pub(crate) const SEND_FENCE: i32 = raw::RDS_RS_IB_FENCE as i32;
/// The most local pieces of one RDMA work request (C: `RDS_IB_MAX_SGE`).
pub(crate) const MAX_SGE: usize = raw::RDS_RS_IB_MAX_SGE as usize;

/// Called by the glue for every rdma_cm event.
///
/// # Safety
///
/// `ctx` is the context of `id` (a leaked [`CmCtx`] alive while the id exists); `private` is
/// valid for `len` bytes or null.
#[no_mangle]
unsafe extern "C" fn rds_rs_cm_event(
    ctx: *mut c_void,
    id: *mut raw::rdma_cm_id,
    event: c_int,
    status: c_int,
    private: *const c_void,
    len: u8,
    v6: bool,
) -> c_int {
    let (Some(idp), false) = (NonNull::new(id), ctx.is_null()) else {
        return 0;
    };
    let private = if private.is_null() {
        &[][..]
    } else {
        // SAFETY: Per the function's safety requirements.
        unsafe { core::slice::from_raw_parts(private.cast::<u8>(), usize::from(len)) }
    };
    // SAFETY: Per the function's safety requirements `ctx` is a live `CmCtx`.
    let h = unsafe { &*ctx.cast::<Arc<dyn CmHandler>>() };
    let ev = CmEvent {
        kind: CmEventKind::from_raw(event),
        status,
        private,
        v6,
    };
    // rdma_cm runs its handlers in process context (its work queues and the callers of its
    // functions).
    let ctx = ProcessCtx::enter();
    match h.event(
        CmIdRef {
            ptr: idp,
            _p: PhantomData,
        },
        &ev,
        &ctx,
    ) {
        CmAction::Keep => 0,
        CmAction::Destroy => 1,
    }
}

/// Who handles a QP's asynchronous events (`IB_EVENT_COMM_EST`, errors).
pub(crate) struct QpEvents {
    /// The handler: `f(event)`; any context the device core calls it in (may be atomic).
    pub(crate) handler: Arc<dyn Fn(i32) + Send + Sync>,
}

/// `IB_EVENT_COMM_EST`.
pub(crate) const QP_EVENT_COMM_EST: i32 = 8;

/// # Safety
///
/// `ctx` is a live [`QpEvents`] (the QP's creator keeps it until the QP is destroyed).
#[no_mangle]
unsafe extern "C" fn rds_rs_ib_qp_event(ctx: *mut c_void, event: c_int) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: Per the function's safety requirements.
    let q = unsafe { &*ctx.cast::<QpEvents>() };
    (q.handler)(event);
}

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
    len: usize,
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
    addr: u64,
    len: usize,
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
    unsafe fn raw_page(
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

/// A piece of data a SEND carries: bytes of a page, or a physically contiguous kernel buffer.
pub(crate) enum Piece<'a> {
    /// `len` bytes at `off` in `page`.
    Page(&'a Page, usize, usize),
    /// A kernel buffer (kmalloc'd).
    Bytes(&'a [u8]),
}

/// What a send-side work request keeps alive until it completes, and where its data is.
pub(crate) trait SendSource: Send + Sync {
    /// Piece `idx` of a SEND's data (`None`: no data).
    fn piece(&self, idx: usize) -> Option<Piece<'_>>;

    /// Segment `idx` of an RDMA request's local memory ([`Qp::post_rdma`]): pinned pages, the
    /// offset of the data from the start of their first page, and its length (`None`: no
    /// more). The pages are borrowed from `self`, which the request keeps: they stay pinned
    /// until it completed (see [`PinOwner`]).
    fn pinned(&self, _idx: usize) -> Option<(&PinnedPages, usize, usize)> {
        None
    }
}

impl SendSource for () {
    fn piece(&self, _idx: usize) -> Option<Piece<'_>> {
        None
    }
}

/// What a posted send work request uses, until it completes. The mappings are dropped
/// (unmapped) before the keeper (which may own the mapped pages).
struct Outstanding<K> {
    /// An RDMA request's pieces.
    maps: KVec<DmaMapping>,
    /// A SEND's data.
    _map: Option<DmaMapping>,
    keeper: Option<K>,
}

/// A receive slot's memory while posted: where its head goes (one of the QP's buffers) and
/// its page.
struct Posted {
    head: BufRef,
    page: Page,
    map: DmaMapping,
}

/// A range of one of the QP's own buffers ([`QpSpec::bufs`]): `len` bytes at `off` of buffer
/// `buf`.
#[derive(Clone, Copy)]
pub(crate) struct BufRef {
    /// The buffer's index in [`QpSpec::bufs`].
    pub(crate) buf: usize,
    /// The offset in it.
    pub(crate) off: usize,
    /// The length.
    pub(crate) len: usize,
}

/// Tags of completions: the kind in the top bits, the slot index below.
pub(crate) const TAG_SEND: u32 = 0;
/// See [`TAG_SEND`].
pub(crate) const TAG_RECV: u32 = 1 << 30;
/// See [`TAG_SEND`]: the QP's own requests, whose completions go to its own handlers, never
/// to the owner's: the fence ([`Qp::post_fence`]) and the registration
/// ([`Qp::register_mr`]), told apart by the low bits.
const TAG_OWN: u32 = 3 << 30;
/// See [`TAG_OWN`].
const TAG_FENCE: u32 = TAG_OWN;
/// See [`TAG_OWN`].
const TAG_REG: u32 = TAG_OWN | 1;
/// The kind bits of a tag.
pub(crate) const TAG_KIND: u32 = 3 << 30;

/// A request of the QP's own (a fence or a registration) while it is out: who waits for it,
/// and the status of its completion.
struct OwnWait {
    waiter: Option<Arc<Waiter>>,
    status: Option<WcStatus>,
}

/// Handles the completions of one of the QP's own requests (softirq context): records the
/// status and lets the waiter go.
#[pin_data]
struct OwnSlot {
    #[pin]
    inner: super::sync::SpinLockBh<OwnWait>,
}

impl OwnSlot {
    fn new() -> Result<Arc<Self>> {
        Ok(Arc::pin_init(
            pin_init!(OwnSlot {
                inner <- super::sync::new_spinlock_bh!(
                    OwnWait {
                        waiter: None,
                        status: None,
                    },
                    "Qp::own"
                ),
            }),
            GFP_KERNEL,
        )?)
    }
}

impl WcHandler for OwnSlot {
    fn done(&self, _tag: u32, wc: Wc) {
        let w = {
            let mut inner = self.inner.lock();
            inner.status = Some(wc.status);
            inner.waiter.take()
        };
        if let Some(w) = w {
            w.arrive();
        }
    }
}

/// The slots' states, under one lock per direction.
struct Slots<K> {
    sends: KVec<Option<Outstanding<K>>>,
    recvs: KVec<Option<Posted>>,
    /// Send-side requests completed so far: their progress.
    completed: u64,
    /// Posting is allowed (the QP exists and is not closed).
    open: bool,
}

impl<K> Slots<K> {
    /// Send slot `slot`, if posting is allowed and the slot is free (`ENOTCONN`, `EBUSY`).
    fn free_send(&mut self, slot: u32) -> Result<&mut Option<Outstanding<K>>> {
        if !self.open {
            return Err(super::net::enotconn());
        }
        let st = self.sends.get_mut(slot as usize).ok_or(EINVAL)?;
        if st.is_some() {
            return Err(EBUSY);
        }
        Ok(st)
    }
}

/// An RC queue pair on an rdma_cm id with its completion queues, the buffers its owner asked
/// for ([`QpSpec::bufs`], mapped for the device, which work requests name by [`BufRef`]), and
/// its slots: `nsend` send slots (what each request keeps until it completes: a keeper and
/// its mappings), one for a fence ([`Qp::post_fence`]), one for a registration
/// ([`Qp::register_mr`]), and `nrecv` receive slots (a page each). Completions of every slot
/// but the fence's and the registration's go to `handler` with the slot's tag.
/// Posting is refused once [`Qp::close`]d; the object must be shut down ([`Qp::shutdown`])
/// before it goes (its `Drop` does it otherwise), which drains the QP so that no request names
/// its slots any more.
///
/// # Invariants
///
/// While `slots.open`, the QP of `id` exists; every posted request names a cqe of `cqes` and
/// its slot holds (in `slots`) what the request uses (mappings, the data's owner) until its
/// completion or until the QP is drained; `handler` is alive for as long as a request may
/// complete (this object owns it); `cqes` is never resized (the requests hold its addresses).
#[pin_data(PinnedDrop)]
pub(crate) struct Qp<K: SendSource + 'static> {
    #[pin]
    cm: super::sync::SpinLockBh<Option<CmId>>,
    id: NonNull<raw::rdma_cm_id>,
    dev: Device,
    lkey: u32,
    /// The owner's buffers ([`QpSpec::bufs`]).
    bufs: KVec<DmaBuf>,
    /// The send cqes, then the receive cqes, then the fence's and the registration's.
    cqes: KVec<WrCqe>,
    /// The fence's waiter (the fence cqe's handler).
    fence: Arc<OwnSlot>,
    /// The registration's waiter and status (the registration cqe's handler).
    reg: Arc<OwnSlot>,
    /// The idle MR the last fence named ([`Qp::post_fence`]), kept while the QP lives (replaced
    /// only in process context, by the next fence).
    #[pin]
    fence_mr: Mutex<Option<Arc<IdleMr>>>,
    /// The PD the QP was made on, kept until after the QP is destroyed (fields drop after
    /// `drop`).
    _pd: Arc<Pd>,
    /// Orders [`Qp::fail`] before the QP's destruction.
    #[pin]
    life: Mutex<()>,
    nsend: u32,
    nrecv: u32,
    /// Local pieces per RDMA request (the QP was created with that many send SGEs).
    max_sge: usize,
    #[pin]
    slots: super::sync::SpinLockBh<Slots<K>>,
    has_qp: core::sync::atomic::AtomicBool,
    handler: Arc<dyn WcHandler>,
    events: KBox<QpEvents>,
    // The CQs go after the QP (fields drop in order, after `drop`).
    send_cq: Cq,
    recv_cq: Cq,
}

// SAFETY: The raw id is used under the `slots` lock while open (posting) or by the shutdown;
// everything else is `Send`.
unsafe impl<K: SendSource + 'static> Send for Qp<K> {}
// SAFETY: Shared access goes through the `slots` and `cm` locks.
unsafe impl<K: SendSource + 'static> Sync for Qp<K> {}

/// Sizes of a new [`Qp`].
pub(crate) struct QpSpec<'a> {
    /// Send slots.
    pub(crate) nsend: u32,
    /// Receive slots.
    pub(crate) nrecv: u32,
    /// The completion vector.
    pub(crate) vector: u32,
    /// Buffers the QP keeps mapped until it goes: (bytes, for the device to read them).
    pub(crate) bufs: &'a [(usize, bool)],
}

impl<K: SendSource + 'static> Qp<K> {
    /// Creates the QP of the id `idref` (on `pd`'s device) with its CQs and slots. `id` is the
    /// owned id when the caller has it (it then goes with this object's shutdown); otherwise
    /// the caller keeps the id alive until the shutdown, or hands it over with
    /// [`Qp::set_id`].
    pub(crate) fn new(
        idref: CmIdRef<'_>,
        id: Option<CmId>,
        pd: &Arc<Pd>,
        spec: &QpSpec<'_>,
        handler: Arc<dyn WcHandler>,
        events: QpEvents,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Self>> {
        let dev = pd.device();
        // Room in the send queue and its CQ for the fence, the registration and the drain's
        // own request.
        let send_cq = Cq::new(dev, spec.nsend + 3, spec.vector, ctx)?;
        let recv_cq = Cq::new(dev, spec.nrecv + 1, spec.vector, ctx)?;
        let mut bufs = KVec::with_capacity(spec.bufs.len(), GFP_KERNEL)?;
        for &(len, to_device) in spec.bufs {
            bufs.push(DmaBuf::new(dev, len.max(1), to_device, ctx)?, GFP_KERNEL)?;
        }
        let hp: *const dyn WcHandler = &*handler;
        let fence = OwnSlot::new()?;
        let fp: *const dyn WcHandler = &*fence;
        let reg = OwnSlot::new()?;
        let rp: *const dyn WcHandler = &*reg;
        let total = (spec.nsend + spec.nrecv + 2) as usize;
        let mut cqes = KVec::with_capacity(total, GFP_KERNEL)?;
        let tags = Iterator::chain(
            (0..spec.nsend).map(|i| TAG_SEND | i),
            (0..spec.nrecv).map(|i| TAG_RECV | i),
        );
        for t in tags {
            // SAFETY: `handler` is kept in the object, which drains the QP before it goes; the
            // cqes do not move once the vector is built (its capacity is exact and it is never
            // grown).
            cqes.push(unsafe { WrCqe::new(hp, t) }, GFP_KERNEL)?;
        }
        // SAFETY: As above, with `fence` kept in the object.
        cqes.push(unsafe { WrCqe::new(fp, TAG_FENCE) }, GFP_KERNEL)?;
        // SAFETY: As above, with `reg` kept in the object.
        cqes.push(unsafe { WrCqe::new(rp, TAG_REG) }, GFP_KERNEL)?;
        let mut sends = KVec::with_capacity(spec.nsend as usize, GFP_KERNEL)?;
        for _ in 0..spec.nsend {
            sends.push(None, GFP_KERNEL)?;
        }
        let mut recvs = KVec::with_capacity(spec.nrecv as usize, GFP_KERNEL)?;
        for _ in 0..spec.nrecv {
            recvs.push(None, GFP_KERNEL)?;
        }
        let events = KBox::new(events, GFP_KERNEL)?;
        // A SEND takes two pieces (header, data); an RDMA request up to `MAX_SGE`.
        let max_sge = (dev.attrs().max_send_sge as usize).clamp(2, MAX_SGE);
        let q = Arc::pin_init(
            try_pin_init!(Self {
                cm <- super::sync::new_spinlock_bh!(id, "Qp::cm"),
                id: idref.ptr,
                dev,
                lkey: pd.lkey(),
                bufs,
                cqes,
                fence,
                reg,
                fence_mr <- kernel::new_mutex!(None, "Qp::fence_mr"),
                _pd: pd.clone(),
                life <- kernel::new_mutex!((), "Qp::life"),
                nsend: spec.nsend,
                nrecv: spec.nrecv,
                max_sge,
                slots <- super::sync::new_spinlock_bh!(
                    Slots {
                        sends,
                        recvs,
                        completed: 0,
                        open: false,
                    },
                    "Qp::slots"
                ),
                has_qp: core::sync::atomic::AtomicBool::new(false),
                handler,
                events,
                send_cq,
                recv_cq,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `events` is boxed in the object, which destroys the QP before it goes.
        unsafe {
            idref.create_qp(
                pd,
                &q.send_cq,
                &q.recv_cq,
                (spec.nsend + 2, spec.nrecv + 1, q.max_sge as u32),
                &*q.events,
            )?
        };
        q.has_qp.store(true, Ordering::Release);
        // INVARIANT: the QP exists now.
        q.slots.lock().open = true;
        Ok(q)
    }

    fn idref(&self) -> CmIdRef<'_> {
        CmIdRef {
            ptr: self.id,
            _p: PhantomData,
        }
    }

    /// Hands over the owned id (adopted after the QP was created); it goes with the
    /// shutdown.
    pub(crate) fn set_id(&self, id: CmId) -> core::result::Result<(), CmId> {
        let mut cm = self.cm.lock();
        if cm.is_some() {
            return Err(id);
        }
        *cm = Some(id);
        Ok(())
    }

    /// Send slots.
    pub(crate) fn nsend(&self) -> u32 {
        self.nsend
    }

    /// Receive slots.
    pub(crate) fn nrecv(&self) -> u32 {
        self.nrecv
    }

    /// Local pieces one RDMA request may take.
    pub(crate) fn max_sge(&self) -> usize {
        self.max_sge
    }

    fn cqe(&self, tag: u32) -> Option<&WrCqe> {
        let idx = match tag & TAG_KIND {
            TAG_SEND => tag & !TAG_KIND,
            TAG_RECV => self.nsend + (tag & !TAG_KIND),
            _ => self.nsend + self.nrecv + (tag & !TAG_KIND),
        };
        self.cqes.get(idx as usize)
    }

    /// The device address and length of `r`, if it lies inside its buffer.
    fn buf_range(&self, r: BufRef) -> Result<(u64, u32)> {
        let b = self.bufs.get(r.buf).ok_or(EINVAL)?;
        let end = r.off.checked_add(r.len).ok_or(EINVAL)?;
        if end > b.len {
            return Err(EINVAL);
        }
        Ok((b.dma(r.off), u32::try_from(r.len).map_err(|_| EINVAL)?))
    }

    /// Posts a SEND from send slot `slot`: `head` (copied into the buffer range `at`, of its
    /// length), then piece `piece` of `keeper`'s data (if any), with `flags`
    /// ([`SEND_SIGNALED`]...). `keeper` stays in the slot until [`Qp::complete_send`] (or the
    /// object goes). The range is the slot's to use while the request is out: the owner gives
    /// each slot a range of its own.
    pub(crate) fn post_send(
        &self,
        slot: u32,
        at: BufRef,
        head: &[u8],
        keeper: K,
        piece: Option<usize>,
        flags: i32,
    ) -> Result {
        let cqe = self.cqe(TAG_SEND | slot).ok_or(EINVAL)?;
        if slot >= self.nsend {
            return Err(EINVAL);
        }
        let at = BufRef {
            len: head.len(),
            ..at
        };
        let head_sge = self.buf_range(at)?;
        let map = match piece.and_then(|i| keeper.piece(i)) {
            None => None,
            Some(Piece::Page(p, o, n)) => Some(DmaMapping::page(self.dev, p, o, n, true)?),
            // SAFETY: `keeper` owns the bytes and stays in the slot, with the mapping, until
            // the request completed or the QP is drained: the buffer outlives the mapping.
            Some(Piece::Bytes(b)) => Some(unsafe { DmaMapping::bytes(self.dev, b)? }),
        };
        let data = map
            .as_ref()
            .map_or((0, 0), |m| (m.addr(), u32::try_from(m.len).unwrap_or(0)));
        let mut slots = self.slots.lock();
        let st = slots.free_send(slot)?;
        self.bufs.get(at.buf).ok_or(EINVAL)?.write(at.off, head)?;
        // The data mapping goes into the slot below, under the same lock, before any completion
        // can take it; `close` takes that lock too.
        // SAFETY: The QP exists while open (type invariant, checked under the lock); the cqe,
        // the header buffer and the data mapping outlive the request (the QP is drained first).
        let r = unsafe {
            self.idref()
                .post_send(cqe, head_sge, data, self.lkey, flags)
        };
        if r.is_ok() {
            *st = Some(Outstanding {
                maps: KVec::new(),
                _map: map,
                keeper: Some(keeper),
            });
        }
        r
    }

    /// Posts an RDMA work request from send slot `slot` (see [`CmIdRef::post_rdma`]) to or from
    /// `remote` (address, r_key): its local memory is the page pieces `pieces` of `keeper`'s
    /// pinned segments ([`SendSource::pinned`]), counted from 0 over all of them in order,
    /// mapped here for the device to read (a WRITE) or to write (a READ or an atomic
    /// operation: the pages are then marked dirty). `keeper` and the mappings stay in the slot
    /// until [`Qp::complete_send`], which unmaps before it lets the keeper go. Returns the
    /// bytes the request moves. `EINVAL` when `pieces` is empty, longer than
    /// [`Qp::max_sge`] or beyond the segments.
    pub(crate) fn post_rdma(
        &self,
        slot: u32,
        keeper: K,
        pieces: core::ops::Range<usize>,
        wr: &RdmaWr,
        remote: (u64, u32),
        flags: i32,
    ) -> Result<u64> {
        let cqe = self.cqe(TAG_SEND | slot).ok_or(EINVAL)?;
        if slot >= self.nsend || pieces.is_empty() || pieces.len() > self.max_sge {
            return Err(EINVAL);
        }
        let to_device = matches!(wr, RdmaWr::Write);
        let mut maps = KVec::with_capacity(pieces.len(), GFP_KERNEL)?;
        let mut at = 0usize;
        let mut failed = None;
        let mut seg = 0;
        while at < pieces.end {
            let Some((pages, offset, len)) = keeper.pinned(seg) else {
                break;
            };
            seg += 1;
            if !to_device {
                pages.mark_dirty();
            }
            pages.for_each_page(offset, len, |page, off, n| {
                let idx = at;
                at += 1;
                if failed.is_some() || !pieces.contains(&idx) {
                    return;
                }
                // SAFETY: The piece is inside a page that `pages` pins; `pages` is borrowed from
                // `keeper`, which the slot keeps until after the mapping is gone (`PinOwner`).
                let mapped = unsafe { DmaMapping::raw_page(self.dev, page, off, n, to_device) }
                    // Room was reserved; a failed push would drop (unmap) the mapping.
                    .and_then(|m| maps.push(m, GFP_KERNEL).map_err(Error::from));
                if let Err(e) = mapped {
                    failed = Some(e);
                }
            })?;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if maps.len() != pieces.len() {
            return Err(EINVAL);
        }
        let mut addrs = [0u64; MAX_SGE];
        let mut lens = [0u32; MAX_SGE];
        let mut bytes = 0u64;
        for (i, m) in maps.iter().enumerate() {
            addrs[i] = m.addr;
            lens[i] = u32::try_from(m.len).map_err(|_| EINVAL)?;
            bytes += m.len as u64;
        }
        let n = maps.len();
        let mut slots = self.slots.lock();
        let st = slots.free_send(slot)?;
        // SAFETY: As in `post_send`: the QP exists while open (checked under the lock), the
        // cqe lives in this object, and the mappings stay in the slot (stored below, under the
        // same lock) until the completion or the drain.
        let r = unsafe {
            self.idref()
                .post_rdma(cqe, &addrs[..n], &lens[..n], self.lkey, wr, remote, flags)
        };
        if r.is_ok() {
            *st = Some(Outstanding {
                maps,
                _map: None,
                keeper: Some(keeper),
            });
        }
        r.map(|()| bytes)
    }

    /// Posts an `IB_WR_REG_MR` of `mr` (peers may then read the registration, and write it
    /// when `remote_write`) and waits for its completion, at most `timeout_ms`: returns its
    /// status. After a timeout the QP is shut down ([`Qp::shutdown`]: the request is flushed)
    /// before this returns `ETIMEDOUT`, so the device is done with `mr` whatever happens.
    /// `EBUSY` while another registration is out; `ENOTCONN` once the QP is closed.
    pub(crate) fn register_mr<P: PinOwner>(
        &self,
        mr: &FastMr<P>,
        remote_write: bool,
        timeout_ms: u32,
        ctx: &ProcessCtx,
    ) -> Result<WcStatus> {
        let cqe = self.cqe(TAG_REG).ok_or(EINVAL)?;
        // This thread's party, and the completion's.
        let waiter = Waiter::new()?;
        waiter.add();
        {
            let slots = self.slots.lock();
            if !slots.open {
                return Err(super::net::enotconn());
            }
            // Lock order: `slots`, then the slot's own (as for the fence).
            let mut own = self.reg.inner.lock();
            if own.waiter.is_some() {
                return Err(EBUSY);
            }
            // SAFETY: The QP exists while open (type invariant, checked under the lock); the
            // cqe lives in this object; `mr` is borrowed until this returns, after the request
            // completed or the QP was drained (below).
            to_result(unsafe {
                raw::rds_rs_ib_post_reg_mr(
                    self.id.as_ptr(),
                    cqe.raw(),
                    mr.ptr.as_ptr(),
                    remote_write,
                    SEND_SIGNALED,
                )
            })?;
            own.status = None;
            own.waiter = Some(waiter.clone());
        }
        waiter.arrive();
        if !waiter.wait(timeout_ms, ctx) {
            // The drain flushes the request: the device has let go of `mr` once it returns.
            self.shutdown(ctx);
            return Err(super::net::etimedout());
        }
        let status = self.reg.inner.lock().status.take();
        status.ok_or(EIO)
    }

    /// Posts an RDMA READ from send slot `slot` of `into.len` bytes at `remote` (address,
    /// r_key) into the buffer range `into` (the QP's buffer, mapped for the device to write).
    /// `keeper` stays in the slot until [`Qp::complete_send`].
    pub(crate) fn post_read_into(
        &self,
        slot: u32,
        keeper: K,
        into: BufRef,
        remote: (u64, u32),
        flags: i32,
    ) -> Result {
        let cqe = self.cqe(TAG_SEND | slot).ok_or(EINVAL)?;
        if slot >= self.nsend || into.len == 0 {
            return Err(EINVAL);
        }
        let (addr, len) = self.buf_range(into)?;
        let mut slots = self.slots.lock();
        let st = slots.free_send(slot)?;
        // SAFETY: As in `post_send`: the QP exists while open (checked under the lock) and the
        // cqe lives in this object, which drains the QP before it goes; the one local piece is
        // inside one of the QP's buffers (checked), which live as long.
        let r = unsafe {
            self.idref().post_rdma(
                cqe,
                &[addr],
                &[len],
                self.lkey,
                &RdmaWr::Read,
                remote,
                flags,
            )
        };
        if r.is_ok() {
            *st = Some(Outstanding {
                maps: KVec::new(),
                _map: None,
                keeper: Some(keeper),
            });
        }
        r
    }

    /// The SEND of slot `slot` completed (or was flushed): returns its keeper.
    pub(crate) fn complete_send(&self, slot: u32) -> Option<K> {
        let st = {
            let mut slots = self.slots.lock();
            slots.completed = slots.completed.wrapping_add(1);
            slots.sends.get_mut(slot as usize)?.take()?
        };
        let Outstanding { maps, _map, keeper } = st;
        // Unmapped first: the keeper may own the pages.
        drop(maps);
        drop(_map);
        keeper
    }

    /// How many send-side requests have completed so far (a count that moves while the QP
    /// makes progress).
    pub(crate) fn send_progress(&self) -> u64 {
        self.slots.lock().completed
    }

    /// Posts a fence: a signaled local invalidation of `idle`'s key, which changes nothing;
    /// `waiter` gains a party that arrives when the fence completes, executed or flushed (the
    /// QP's drain flushes it at the latest). On siw the fence runs in the QP's transmit thread
    /// after what it is doing, a READ RESPONSE in progress included, so its completion says
    /// that nothing the QP started before reads memory any more. `EPIPE` once the QP is
    /// closed (its shutdown may not have stopped it yet), the device's error otherwise (siw:
    /// `ENOTCONN` for a QP not in RTS, which is sending nothing), `EBUSY` while an earlier
    /// fence is out.
    pub(crate) fn post_fence(
        &self,
        idle: &Arc<IdleMr>,
        waiter: &Arc<Waiter>,
        _ctx: &ProcessCtx,
    ) -> Result {
        let cqe = self.cqe(TAG_FENCE).ok_or(EINVAL)?;
        // The QP holds the MR its fences name, from before the first is posted until it goes
        // (`IdleMr`'s invariant). The one it held before (the same, in practice) goes here,
        // in process context.
        let old = self.fence_mr.lock().replace(idle.clone());
        drop(old);
        let slots = self.slots.lock();
        if !slots.open {
            return Err(EPIPE);
        }
        // Lock order: `slots`, then the fence's. The completion takes the fence's lock, so
        // it finds the waiter stored (below) even if it runs at once.
        let mut f = self.fence.inner.lock();
        if f.waiter.is_some() {
            return Err(EBUSY);
        }
        // The request names no memory, only the key of `idle`, an MR of the QP's PD.
        // SAFETY: The QP exists while open (type invariant, checked under the lock); the cqe
        // lives in this object, which drains the QP first, and so does `idle` (`fence_mr`).
        let r = unsafe { raw::rds_rs_ib_post_fence(self.id.as_ptr(), cqe.raw(), idle.rkey()) };
        to_result(r)?;
        waiter.add();
        f.waiter = Some(waiter.clone());
        Ok(())
    }

    /// A fence of this QP is out (posted, not completed).
    pub(crate) fn fence_pending(&self) -> bool {
        self.fence.inner.lock().waiter.is_some()
    }

    /// Moves the QP to the error state (process context): everything queued on it is
    /// flushed, and its owner sees the failed completions. Nothing if it is gone already.
    pub(crate) fn fail(&self, _ctx: &ProcessCtx) {
        let _life = self.life.lock();
        if self.has_qp.load(Ordering::Acquire) {
            // SAFETY: The QP exists (`has_qp`, cleared only under `life` before the QP is
            // destroyed); modifying it may sleep, which `_ctx` allows.
            let r = unsafe { raw::rds_rs_ib_qp_to_error(self.id.as_ptr()) };
            if r != 0 {
                pr_warn!("could not move a QP to the error state: {}\n", r);
            }
        }
    }

    /// Posts a receive into slot `slot`: the first bytes of what arrives land in the buffer
    /// range `head`, the rest (at most `len` bytes) in `page`, which the slot keeps until
    /// [`Qp::complete_recv`] (or the object goes). The range is the slot's while the request
    /// is out: the owner gives each slot a range of its own.
    pub(crate) fn post_recv(&self, slot: u32, head: BufRef, page: Page, len: usize) -> Result {
        let cqe = self.cqe(TAG_RECV | slot).ok_or(EINVAL)?;
        if slot >= self.nrecv {
            return Err(EINVAL);
        }
        let head_sge = self.buf_range(head)?;
        let map = DmaMapping::page(self.dev, &page, 0, len, false)?;
        let data = (map.addr(), u32::try_from(len).map_err(|_| EINVAL)?);
        let mut slots = self.slots.lock();
        if !slots.open {
            return Err(super::net::enotconn());
        }
        let st = slots.recvs.get_mut(slot as usize).ok_or(EINVAL)?;
        if st.is_some() {
            return Err(EBUSY);
        }
        // SAFETY: As in `post_send`; the page is mapped for the device to write and stays in
        // the slot (stored below, under the lock) until the completion; the head range is
        // inside one of the QP's buffers (checked).
        let r = unsafe { self.idref().post_recv(cqe, head_sge, data, self.lkey) };
        if r.is_ok() {
            *st = Some(Posted { head, page, map });
        }
        r
    }

    /// The receive of slot `slot` completed: copies the start of its head range into `head`
    /// and returns its page (unmapped: the CPU may read it).
    pub(crate) fn complete_recv(&self, slot: u32, head: &mut [u8]) -> Option<Page> {
        let p = self.slots.lock().recvs.get_mut(slot as usize)?.take()?;
        let Posted {
            head: at,
            page,
            map,
        } = p;
        map.unmap();
        let n = head.len().min(at.len);
        self.bufs
            .get(at.buf)?
            .read(at.off, head.get_mut(..n)?)
            .ok()?;
        Some(page)
    }

    /// The source and destination GIDs and the service level of the connection, while the QP
    /// is open (`None` after it closed).
    pub(crate) fn route_info(&self) -> Option<([u8; 16], [u8; 16], u8)> {
        let slots = self.slots.lock();
        if !slots.open {
            return None;
        }
        // The id is alive while open (type invariant; the shutdown closes before it goes).
        let id = self.idref();
        let (s, d) = id.gids();
        let sl = id.sl();
        drop(slots);
        Some((s, d, sl))
    }

    /// Refuses further posts.
    pub(crate) fn close(&self) {
        self.slots.lock().open = false;
    }

    /// Takes the QP down (process context, not in a cm handler of the id): no more posts,
    /// disconnect, wait for every outstanding request to complete (flushed), destroy the QP,
    /// then the owned id.
    pub(crate) fn shutdown(&self, _ctx: &ProcessCtx) {
        self.close();
        // Held while the QP goes, not while the id does (whose destruction waits for its
        // handlers, which may take the owner's locks).
        let life = self.life.lock();
        if self.has_qp.swap(false, Ordering::AcqRel) {
            // SAFETY: The id is alive: it is ours (`cm`) or the caller's, which keeps it until
            // the QP is gone; nothing posts any more (closed above under the `slots` lock).
            // Draining and destroying may sleep, which `_ctx` allows.
            unsafe {
                raw::rds_rs_cm_disconnect(self.id.as_ptr());
                raw::rds_rs_ib_drain_qp(self.id.as_ptr());
                raw::rds_rs_ib_destroy_qp(self.id.as_ptr());
            }
        }
        drop(life);
        let id = self.cm.lock().take();
        drop(id);
    }
}

#[pinned_drop]
impl<K: SendSource + 'static> PinnedDrop for Qp<K> {
    fn drop(self: Pin<&mut Self>) {
        // The owner shuts the QP down first; if it did not, the QP must still go before the
        // slots and the CQs (never in a completion of this QP: the owner guarantees it).
        if self.has_qp.load(Ordering::Acquire) {
            let ctx = ProcessCtx::enter();
            self.shutdown(&ctx);
        }
    }
}
