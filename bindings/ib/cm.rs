// SPDX-License-Identifier: GPL-2.0

//! rdma_cm ids ([`CmId`], [`CmIdRef`]) and their events ([`CmEvent`], [`CmHandler`],
//! [`CmAction`]): listening, address and route resolution, connecting, accepting and
//! rejecting, and what the route says (GIDs, service level). The QP of an id, and the work
//! requests posted on it, are [`super::qp`]'s.
//!
//! C header: [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h): `rdma_create_id`,
//! `rdma_destroy_id`, `rdma_bind_addr`, `rdma_listen`, `rdma_resolve_addr`,
//! `rdma_resolve_route`, `rdma_connect_locked`, `rdma_accept`, `rdma_reject`,
//! `rdma_disconnect`, `rdma_notify`, `rdma_read_gids`, `enum rdma_cm_event_type`; the glue's
//! event handler calls `rds_rs_cm_event` (here) (`ib_glue.c`).

use super::device::Device;
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    error::{from_err_ptr, to_result},
    ffi::{c_int, c_void},
    prelude::*,
    sync::Arc,
};

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
    /// An event on `id` (see the documentation of [`ib`](super) for the rules); rdma_cm calls
    /// handlers in process context, with the id's handler mutex held.
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
    pub(super) ptr: NonNull<raw::rdma_cm_id>,
    pub(super) _p: PhantomData<&'a ()>,
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
}

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
