// SPDX-License-Identifier: GPL-2.0

//! The ib_client `rds_rs`: the device core tells it of every RDMA device, present and future
//! ([`IbClient`]), while it is registered ([`IbRegistration`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h):
//! `struct ib_client`, `ib_register_client`, `ib_unregister_client`, `ib_set_client_data`;
//! the glue's client calls `rds_rs_ib_dev_add` and `rds_rs_ib_dev_remove` (here) from its
//! `add` and `remove` (`ib_glue.c`).

use super::device::Device;
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::{
    ptr::{self, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{error::to_result, ffi::c_void, prelude::*, sync::Arc, types::ForeignOwnable};

/// What the ib_client does with devices: the state it keeps per device.
pub(crate) trait IbClient: Send + Sync + 'static {
    /// The per-device state.
    type Data: ForeignOwnable + Send + Sync;

    /// A device appeared: `None` when the client does not serve it (process context; see the
    /// documentation of [`ib`](super)).
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
