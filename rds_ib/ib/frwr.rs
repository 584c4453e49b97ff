// SPDX-License-Identifier: GPL-2.0

//! Registrations on iWARP devices: fast registration (FRWR) posted on the device's service
//! connection.
//!
//! C counterpart: `net/rds/ib_frmr.c` (`rds_ib_post_reg_frmr`), which posts on the QP of the
//! connection that carried `RDS_CMSG_RDMA_MAP`. Here a registration belongs to the device, as
//! on IB/RoCE (`ib_reg_user_mr`, `super::mr::IbMr`), but siw's `ib_reg_user_mr` addresses a
//! registration by the user's virtual address whatever iova it is given, which a cookie's
//! 32-bit offset cannot carry. So on iWARP a registration is an MR of the PD
//! (`ib_alloc_mr` + `ib_map_mr_sg` over the pages the core pinned, its address set to the
//! region's zero-based base, a fresh key: [`FastMr`]), made valid by an `IB_WR_REG_MR` work
//! request. siw executes work requests only on a QP in RTS, so every iWARP device gets a
//! *service connection*: an rdma_cm connection of the device to its own address (a listener
//! on a port rdma_cm chooses, an active id connecting to it), made at the first registration
//! on the device and kept until the device goes. Registrations are serialised on it (a mutex:
//! they run in process context); the registering thread waits for the completion of its
//! `REG_MR` ([`Qp::register_mr`], at most [`SERVICE_MS`]; a failure or a timeout tears the connection
//! down, which flushes the request, and the registration fails with the MR freed). A
//! connection that failed is made again at the next registration; registrations made earlier
//! stay valid (an MR belongs to the PD, not to a QP).
//!
//! Revocation: siw's `ib_dereg_mr` makes the STag invalid for every later lookup before it
//! returns (`siw_mr_drop_mem`), and [`FastMr::deregister`] waits for a grace period after it
//! (a placement that found the STag valid just before runs with preemption disabled). A READ
//! RESPONSE siw started before goes on, though (one lookup per response): the owner fences
//! every QP of the device before the pages are unmapped and unpinned (`fence_device` in
//! `fence.rs`).
//!
//! # Contexts
//!
//! The service's rdma_cm handlers run in rdma_cm's work queues (process context); they create
//! the QPs of the two ends, but never destroy an id or drop one: [`teardown`] does, from the
//! registering thread or the device's removal, with the device's service lock held.

use super::mr::{DevMr, RevocableMr};
use super::{IbDev, RESOLVE_MS};
use crate::bindings::ib::{
    CmAction, CmEvent, CmEventKind, CmHandler, CmId, CmIdRef, FastMr, Qp, QpEvents, QpSpec, Waiter,
    Wc, WcHandler, WcStatus, QP_EVENT_COMM_EST,
};
use crate::bindings::sync::ProcessCtx;
use crate::bindings::testhooks;
use crate::proto::Addr;
use crate::rdma::RegPages;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::RBTreeNodeReservation,
    sync::{Arc, Mutex},
};

/// How long the service connection may take to come up, and a `REG_MR` to complete.
const SERVICE_MS: u32 = 5000;

/// The QP of a service connection: it posts nothing but `REG_MR`s ([`Qp::register_mr`]), so
/// its send slots keep nothing.
type SvcQp = Arc<Qp<()>>;

/// The service connection's parts the handlers fill in.
struct SvcInner {
    /// The active end's QP (on the active id, which [`SvcConn`] owns).
    qp: Option<SvcQp>,
    /// The passive end: its id (adopted from the request) and QP.
    passive: Option<(CmId, SvcQp)>,
    /// The active end is established.
    up: bool,
    /// [`teardown`] has taken the parts: the handlers add nothing more.
    closed: bool,
}

/// The state the handlers and completions of one service connection share.
#[pin_data]
struct SvcState {
    dev: Arc<IbDev>,
    #[pin]
    inner: Mutex<SvcInner>,
    /// An error event, a failed completion or a QP event: the connection is not used again.
    broken: AtomicBool,
    /// The thread that started the connection waits for it: its one other party arrives
    /// when the active end is established or the connection breaks (`settled`).
    ready: Arc<Waiter>,
    /// `ready`'s other party arrived.
    settled: AtomicBool,
}

impl SvcState {
    fn usable(&self) -> Option<SvcQp> {
        if self.broken.load(Ordering::Acquire) {
            return None;
        }
        let inner = self.inner.lock();
        if inner.up && !inner.closed {
            inner.qp.clone()
        } else {
            None
        }
    }

    fn fail(&self) {
        self.broken.store(true, Ordering::Release);
        self.settle();
    }

    /// The connection is established or broken: the thread that started it stops waiting.
    fn settle(&self) {
        if !self.settled.swap(true, Ordering::AcqRel) {
            self.ready.arrive();
        }
    }

    /// A QP of the service on `id` (small: it posts one `REG_MR` at a time, in a slot of the
    /// QP's own).
    fn new_qp(self: &Arc<Self>, id: CmIdRef<'_>, ctx: &ProcessCtx) -> Result<SvcQp> {
        let state = self.clone();
        let events = QpEvents {
            handler: Arc::new(
                move |ev: i32| {
                    if ev != QP_EVENT_COMM_EST {
                        state.fail();
                    }
                },
                GFP_KERNEL,
            )?,
        };
        let spec = QpSpec {
            nsend: 1,
            nrecv: 1,
            vector: 0,
            bufs: &[],
        };
        let handler: Arc<dyn WcHandler> = self.clone();
        let pd = self.dev.pd.lock();
        let pd = pd.as_ref().ok_or(ENODEV)?;
        Qp::new(id, None, pd, &spec, handler, events, ctx)
    }
}

impl WcHandler for SvcState {
    /// Softirq context. The service posts no work request of the owner's (a `REG_MR`'s
    /// completion goes to the QP's own handler, [`Qp::register_mr`]): anything here is a
    /// broken connection.
    fn done(&self, _tag: u32, _wc: Wc) {
        self.fail();
    }
}

/// The events of the active end.
struct Active(Arc<SvcState>);

impl CmHandler for Active {
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction {
        let st = &self.0;
        match ev.kind {
            CmEventKind::AddrResolved => {
                if id.resolve_route(RESOLVE_MS).is_err() {
                    st.fail();
                }
            }
            CmEventKind::RouteResolved => {
                let Ok(q) = st.new_qp(id, ctx) else {
                    st.fail();
                    return CmAction::Keep;
                };
                let mut inner = st.inner.lock();
                if inner.closed || inner.qp.is_some() {
                    drop(inner);
                    // Torn down meanwhile: the QP goes now (the id goes with the teardown).
                    q.shutdown(ctx);
                    return CmAction::Keep;
                }
                inner.qp = Some(q);
                drop(inner);
                if id.connect(&[]).is_err() {
                    st.fail();
                }
            }
            CmEventKind::Established => {
                st.inner.lock().up = true;
                st.settle();
            }
            CmEventKind::AddrError
            | CmEventKind::RouteError
            | CmEventKind::ConnectError
            | CmEventKind::Unreachable
            | CmEventKind::Rejected
            | CmEventKind::DeviceRemoval
            | CmEventKind::AddrChange
            | CmEventKind::Disconnected
            | CmEventKind::TimewaitExit => st.fail(),
            _ => {}
        }
        CmAction::Keep
    }
}

/// The events of the listener and of the passive end.
struct Passive(Arc<SvcState>);

impl CmHandler for Passive {
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction {
        let st = &self.0;
        match ev.kind {
            CmEventKind::ConnectRequest => {
                if st.broken.load(Ordering::Acquire) {
                    return CmAction::Destroy;
                }
                let Ok(q) = st.new_qp(id, ctx) else {
                    st.fail();
                    return CmAction::Destroy;
                };
                let handler: Arc<dyn CmHandler> = match Arc::new(Passive(st.clone()), GFP_KERNEL) {
                    Ok(h) => h,
                    Err(_) => {
                        q.shutdown(ctx);
                        st.fail();
                        return CmAction::Destroy;
                    }
                };
                let mut inner = st.inner.lock();
                if inner.closed || inner.passive.is_some() {
                    drop(inner);
                    q.shutdown(ctx);
                    return CmAction::Destroy;
                }
                let owned = match id.adopt(handler) {
                    Ok(o) => o,
                    Err(_) => {
                        drop(inner);
                        q.shutdown(ctx);
                        st.fail();
                        return CmAction::Destroy;
                    }
                };
                // From here the id is the service's (it goes with the teardown).
                inner.passive = Some((owned, q));
                drop(inner);
                if id.accept(&[]).is_err() {
                    st.fail();
                }
            }
            CmEventKind::Established => {}
            _ => st.fail(),
        }
        CmAction::Keep
    }
}

/// A service connection: the two ids the registering side created, and the shared state.
pub(super) struct SvcConn {
    state: Arc<SvcState>,
    listen: CmId,
    active: CmId,
}

/// A device's service connection, if made; the lock serialises registrations and their
/// `REG_MR`s, and the device's removal takes it before its PD goes.
pub(super) type Service = Mutex<Option<SvcConn>>;

/// A new, empty service slot.
pub(super) fn service() -> impl PinInit<Service> {
    new_mutex!(None, "IbDev::service")
}

/// Takes the service connection down (process context, not in one of its handlers): no more
/// requests (the listener goes first, after any request its handler is working on), then
/// both ends' QPs (drained: every request completes) and ids.
pub(super) fn teardown(conn: Option<SvcConn>, ctx: &ProcessCtx) {
    let Some(SvcConn {
        state,
        listen,
        active,
    }) = conn
    else {
        return;
    };
    state.fail();
    drop(listen);
    let (qp, passive) = {
        let mut inner = state.inner.lock();
        inner.closed = true;
        (inner.qp.take(), inner.passive.take())
    };
    if let Some(q) = qp {
        q.shutdown(ctx);
        drop(q);
    }
    drop(active);
    if let Some((id, q)) = passive {
        q.shutdown(ctx);
        drop(q);
        drop(id);
    }
}

/// The service connection's QP, made now (from `laddr`, an address of the device, to itself)
/// if there is none or the one there failed.
fn ready_locked(
    svc: &mut Option<SvcConn>,
    dev: &Arc<IbDev>,
    laddr: &Addr,
    ctx: &ProcessCtx,
) -> Result<SvcQp> {
    if testhooks::ib_service_break() {
        // The test build's knob: as if the connection had failed (an error event).
        if let Some(c) = svc.as_ref() {
            c.state.fail();
        }
    }
    if let Some(q) = svc.as_ref().and_then(|c| c.state.usable()) {
        return Ok(q);
    }
    teardown(svc.take(), ctx);
    let v6 = laddr.v4().is_none();
    // The starting thread's party, and the handlers' (see `SvcState::ready`).
    let ready = Waiter::new()?;
    ready.add();
    let theirs = ready.clone();
    let state = Arc::pin_init(
        pin_init!(SvcState {
            dev: dev.clone(),
            inner <- new_mutex!(
                SvcInner {
                    qp: None,
                    passive: None,
                    up: false,
                    closed: false,
                },
                "SvcState::inner"
            ),
            broken: AtomicBool::new(false),
            ready: theirs,
            settled: AtomicBool::new(false),
        }),
        GFP_KERNEL,
    )?;
    let listen = CmId::new(Arc::new(Passive(state.clone()), GFP_KERNEL)?, v6, ctx)?;
    let active = CmId::new(Arc::new(Active(state.clone()), GFP_KERNEL)?, v6, ctx);
    let active = match active {
        Ok(a) => a,
        Err(e) => {
            drop(listen);
            return Err(e);
        }
    };
    let started = listen.listen_at(&laddr.0, 0, ctx).and_then(|()| {
        let port = listen.port();
        active.resolve_addr(&laddr.0, &laddr.0, port, 0, RESOLVE_MS)
    });
    *svc = Some(SvcConn {
        state: state.clone(),
        listen,
        active,
    });
    if let Err(e) = started {
        teardown(svc.take(), ctx);
        return Err(e);
    }
    // Established or broken, at most `SERVICE_MS` from now.
    ready.arrive();
    let q = if ready.wait(SERVICE_MS, ctx) {
        state.usable()
    } else {
        None
    };
    match q {
        Some(q) => Ok(q),
        None => {
            pr_warn!("no service connection on an iWARP device\n");
            teardown(svc.take(), ctx);
            Err(crate::bindings::net::enotconn())
        }
    }
}

/// Posts a `REG_MR` of `mr` on the service connection and waits for its completion; a
/// failure or a timeout tears the connection down (`Qp::register_mr` has flushed the request
/// by then).
fn reg_locked(
    svc: &mut Option<SvcConn>,
    qp: &SvcQp,
    mr: &FastMr<RegPages>,
    remote_write: bool,
    ctx: &ProcessCtx,
) -> Result {
    if svc.is_none() {
        return Err(crate::bindings::net::enotconn());
    }
    let r = match qp.register_mr(mr, remote_write, SERVICE_MS, ctx) {
        Ok(WcStatus::Success) => return Ok(()),
        Ok(status) => {
            pr_warn!(
                "fast registration on an iWARP device failed ({})\n",
                status.raw()
            );
            EIO
        }
        Err(e) if e == crate::bindings::net::etimedout() => {
            pr_warn!("fast registration on an iWARP device timed out\n");
            EIO
        }
        Err(e) => e,
    };
    teardown(svc.take(), ctx);
    Err(r)
}

/// Registers the pinned `pages` (`len` bytes from `offset` in the first page) on the iWARP
/// device `dev`, addressed by peers from `iova`, with remote read (and remote write when
/// `remote_write`): the registration, which keeps the pages until it is freed, goes into
/// `cell`, which is listed on the device by its
/// r_key (`node`) before the service lock is released, so that the device's removal, which
/// takes that lock before its PD goes, finds it. Returns the r_key.
#[expect(clippy::too_many_arguments)]
pub(super) fn register(
    dev: &Arc<IbDev>,
    laddr: &Addr,
    pages: RegPages,
    offset: usize,
    len: u64,
    iova: u64,
    remote_write: bool,
    cell: &Arc<RevocableMr>,
    node: RBTreeNodeReservation<u32, Arc<RevocableMr>>,
    ctx: &ProcessCtx,
) -> Result<u32> {
    let mut svc = dev.service.lock();
    if dev.removing.load(Ordering::Acquire) {
        return Err(ENODEV);
    }
    let mr = {
        let pd = dev.pd.lock();
        let pd = pd.as_ref().ok_or(ENODEV)?;
        // The registration keeps the pages until it is freed.
        FastMr::map(pd, pages, offset, len, iova, ctx)?
    };
    // One more try on a new connection if the first one turns out broken.
    let mut tries = 0;
    loop {
        tries += 1;
        let r = ready_locked(&mut svc, dev, laddr, ctx)
            .and_then(|qp| reg_locked(&mut svc, &qp, &mr, remote_write, ctx));
        match r {
            Ok(()) => break,
            Err(_) if tries < 2 => continue,
            Err(e) => return Err(e),
        }
    }
    let rkey = mr.rkey();
    *cell.lock() = Some(DevMr::Fast(mr));
    let pd = dev.pd.lock();
    let old = dev.mrs.lock().insert(node.into_node(rkey, cell.clone()));
    drop(old);
    drop(pd);
    drop(svc);
    Ok(rkey)
}
