// SPDX-License-Identifier: GPL-2.0

//! The IB/iWARP transport: devices, rdma_cm connections and the datagram path.
//!
//! C counterpart: `net/rds/ib.c`, `ib_cm.c`, `ib_send.c`, `ib_recv.c`, `rdma_transport.c`.
//!
//! # Pieces
//!
//! - [`IbDev`]: a device the ib_client added, with its protection domain. Connections come
//!   and go on it; its `remove` takes them down and waits until none is left before the PD
//!   goes (C drops them and lets the PD go with the last reference).
//! - The listeners: rdma_cm ids on 0.0.0.0:18634 and [::]:16385. A connection request is
//!   checked (private data, version: [`crate::proto::negotiate`]), matched to the connection
//!   it is for (created passively if needed) and accepted with its own QP, or rejected (a
//!   connection already connecting: C's answer to simultaneous connects; both sides then
//!   retry with the core's backoff).
//! - [`IbConn`]: the transport's state of one connection: the current [`Path`] (one
//!   incarnation on a device: cm id, QP, CQs, rings), replaced at every connect.
//! - The data path: a message is sent as `frag_count(len)` SENDs, each with the full header
//!   (checksummed, as C) and at most 4 KiB; the last is solicited (C arms its receive CQ for
//!   solicited events only). Receives land in a ring of 48-byte header buffers and 4 KiB
//!   pages; [`crate::proto::Reassembly`] checks and joins fragments, and a complete message
//!   goes to [`crate::recv::incoming`] with its pages lent ([`IbFrags`]). Acks piggyback on
//!   every SEND; an ack-only frame goes when the peer asks (`ACK_REQUIRED`), as C, one at a
//!   time (one more goes when it completes if another was asked for meanwhile).
//! - Flow control ([`crate::proto::Credits`]): both handshake messages offer the receives
//!   posted; when both offer, every SEND takes a credit and headers carry the receives posted
//!   since (`h_credit`), or an ack-only frame does when 16 are untold. C offers credits only
//!   with `net.rds.ib.flow_control` set, so against a default C peer there is none (IB's RNR
//!   retries cover a receiver that is behind); iWARP has no RNR retry, and two rds-rs peers
//!   always use it.
//!
//! # Contexts
//!
//! rdma_cm handlers and completions run in process context (rdma_cm's work queues, the
//! `ib-comp-wq` work that polls our CQs, `IB_POLL_WORKQUEUE`); `xmit` runs in the core's drain
//! (process context). No cm id is created or destroyed in a cm handler: ids are created by
//! `connect` (the connect work) and destroyed by `shutdown` (the shutdown work).

use crate::bindings::ib::{
    cm_event, CmAction, CmEvent, CmHandler, CmId, CmIdRef, DevAttrs, Device, DmaMapping, FastMr,
    IbClient, IbRegistration, IdleMr, Pd, Piece, Qp, QpEvents, QpSpec, RdmaWr, SendSource, UserMr,
    Waiter, Wc, WcHandler, QP_EVENT_COMM_EST, SEND_FENCE, SEND_SIGNALED, SEND_SOLICITED, TAG_ACK,
    TAG_KIND, TAG_RECV, TAG_SEND, WC_FLUSH_ERR, WC_REM_ACCESS_ERR, WC_RETRY_EXC_ERR,
    WC_RNR_RETRY_EXC_ERR, WC_SUCCESS,
};
use crate::bindings::mm::{random_u32, PinnedPages};
use crate::bindings::net::NetId;
use crate::bindings::sync::{new_spinlock_bh, DropInProcess, ProcessCtx, ProcessDrop, SpinLockBh};
use crate::bindings::sys;
use crate::bindings::testhooks;
use crate::conn::{Conn, ConnKey};
use crate::message::{Frag, LentFrags, Message, Payload};
use crate::proto::{
    frag_count, loop_region, negotiate, reject_drops, reply_version_ok, Addr, AtomicOp, ConnPriv,
    ConnState, Credits, FragOutcome, Grab, Header, NegotiateError, RdsIovec, Reassembly, Region,
    Stat, WorkRing, CREDIT_UPDATE_AT, FRAG_SIZE, HEADER_LEN, MAX_ADV_CREDIT, MAX_MR_PAGES,
    PRIV_LEN_V6, RDS_IB_PORT, RDS_IB_PORT6, RDS_RDMA_DROPPED, RDS_RDMA_OTHER_ERROR,
    RDS_RDMA_REMOTE_ERROR, RDS_RDMA_SUCCESS, RDS_TRANS_IB, REJ_INCOMPAT,
};
use crate::rdma::{OpKind, RdmaOp};
use crate::recv::{self, RxCtx};
use crate::send;
use crate::socket::Shared;
use crate::stats;
use crate::transport::{
    join, ConnTransport, Membership, MrHandle, MrOps, RdmaInfo, RegRequest, Transport, XmitError,
    XmitProgress,
};
use core::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU32, AtomicUsize, Ordering};
use kernel::{
    new_mutex,
    page::Page,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, ArcBorrow, Mutex},
};

#[path = "frwr.rs"]
mod frwr;

/// Send work requests per connection (C: `rds_ib_sysctl_max_send_wr` 256).
const SEND_WR: u32 = 256;
/// Send work requests per connection on iWARP: an RDMA READ there takes one local piece per
/// work request (siw's `max_sge_rd` is 1), so a 1 MiB read in many iovecs needs several
/// hundred.
const SEND_WR_IWARP: u32 = 1024;
/// Receive buffers per connection (C: 1024; 256 keep a TCG guest's memory small).
const RECV_WR: u32 = 256;
/// How long address and route resolution may take (C: 5000 ms).
const RESOLVE_MS: i32 = 5000;
/// How long a teardown waits for RDMA requests still out to complete by themselves.
const RDMA_SETTLE_MS: u32 = 1000;
/// How long a QP with a fence out (after a deregistration on iWARP) may go without completing
/// anything before it is moved to the error state (`fence_device`).
const FENCE_MS: u32 = 2000;

/// The pages of a registration that C takes from its 8 KiB pool (`RDS_MR_8K_MSG_SIZE`).
const MR_8K_PAGES: u64 = 2;

/// The transport, and what it keeps for all its connections: the devices it serves. One is
/// made at module load ([`IbModule::new`]) and joins the core's transports.
#[pin_data]
pub(crate) struct IbTransport {
    #[pin]
    devs: Mutex<KVec<Arc<IbDev>>>,
}

impl IbTransport {
    /// No devices yet.
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                devs <- new_mutex!(KVec::new(), "IbTransport::devs"),
            }),
            GFP_KERNEL,
        )
    }

    fn find(&self, dev: Device) -> Option<Arc<IbDev>> {
        self.find_id(dev.id())
    }

    /// The device that serves the local address `addr`, if the transport has it.
    fn find_addr(&self, addr: &Addr, ctx: &ProcessCtx) -> Option<Arc<IbDev>> {
        self.find_id(Device::for_addr(&addr.0, 0, ctx)?)
    }

    /// The device of identity `id` ([`Device::id`]), unless it is going away.
    fn find_id(&self, id: usize) -> Option<Arc<IbDev>> {
        self.devs
            .lock()
            .iter()
            .find(|d| d.dev.id() == id && !d.removing.load(Ordering::Acquire))
            .cloned()
    }
}

/// A device the transport serves.
///
/// # Invariants
///
/// `pd` is `Some` until `remove` took every connection on the device down (`paths` is then
/// 0 and no new path starts: `removing`).
#[pin_data]
pub(crate) struct IbDev {
    dev: Device,
    attrs: DevAttrs,
    lkey: u32,
    /// iWARP: the MR that fences invalidate (`fence_device`, which holds the lock while its
    /// fences are out); dropped by `remove` once no QP is left, before the PD (and declared
    /// before it, so that it also goes first if the device is dropped unlisted). Lock order:
    /// after a registration's cell, before `pd` and a QP's `life`.
    #[pin]
    idle: Mutex<Option<IdleMr>>,
    #[pin]
    pd: Mutex<Option<Pd>>,
    /// The registrations made on the device, by r_key (see [`IbMrReg`]); `remove` revokes
    /// those still there before the PD goes. Under `pd`'s lock when both are taken.
    #[pin]
    mrs: Mutex<RBTree<u32, Arc<MrCell>>>,
    /// iWARP: the service connection that fast registrations are posted on (`frwr`); taken
    /// by `remove` before the PD goes. Lock order: before `pd`.
    #[pin]
    service: frwr::Service,
    /// The QPs of the paths on the device, by address (`Listed`): what `fence_device` posts
    /// on.
    #[pin]
    qps: SpinLockBh<RBTree<usize, Arc<Qp<Keep>>>>,
    /// Paths (QPs) alive on the device.
    paths: AtomicUsize,
    /// The device is going away: no new path.
    removing: AtomicBool,
}

impl IbDev {
    /// Whether the device executes the atomic request `wr`: atomics at all, and the masked
    /// opcodes when the masks are not trivial (rxe has only the plain ones).
    fn runs_atomic(&self, wr: &RdmaWr) -> bool {
        self.attrs.atomics && (!wr.masked() || self.attrs.masked_atomics)
    }
}

/// The ib_client: adds every RDMA device (IB, RoCE, iWARP) and takes its connections down
/// when it goes.
struct Client {
    shared: Arc<Shared>,
    ib: Arc<IbTransport>,
}

impl IbClient for Client {
    type Data = Arc<IbDev>;

    fn add(&self, dev: Device, ctx: &ProcessCtx) -> Option<Arc<IbDev>> {
        let pd = Pd::new(dev, ctx).ok()?;
        let lkey = pd.lkey();
        let attrs = dev.attrs();
        let idle = if attrs.iwarp {
            // SAFETY: Dropped by `remove` before the PD, once every QP of the device (every
            // QP a fence names it on) is gone.
            Some(unsafe { IdleMr::new(&pd, ctx) }.ok()?)
        } else {
            None
        };
        let d = Arc::pin_init(
            pin_init!(IbDev {
                dev,
                attrs,
                lkey,
                pd <- new_mutex!(Some(pd), "IbDev::pd"),
                mrs <- new_mutex!(RBTree::new(), "IbDev::mrs"),
                service <- frwr::service(),
                idle <- new_mutex!(idle, "IbDev::idle"),
                qps <- new_spinlock_bh!(RBTree::new(), "IbDev::qps"),
                paths: AtomicUsize::new(0),
                removing: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )
        .ok()?;
        let mut devs = self.ib.devs.lock();
        devs.push(d.clone(), GFP_KERNEL).ok()?;
        drop(devs);
        pr_info!("RDMA device {} added\n", DevName(dev.name()));
        Some(d)
    }

    fn remove(&self, dev: Device, data: Arc<IbDev>, ctx: &ProcessCtx) {
        data.removing.store(true, Ordering::Release);
        // Every connection on the device goes down (its shutdown destroys the QP and the id);
        // wait for the last, then the PD can go.
        let mut waited = 0u32;
        while data.paths.load(Ordering::Acquire) != 0 {
            self.shared.conns.for_each(NetId::init(), |c| {
                if let Some(ic) = c.tstate::<IbConn>() {
                    if ic.on_device(dev) {
                        c.drop_connection();
                    }
                }
            });
            sys::sleep_ms(10, ctx);
            waited += 1;
            if waited % 1000 == 0 {
                pr_warn!("still waiting for connections on a removed RDMA device\n");
            }
        }
        // iWARP: the service connection goes (a registration in progress finishes first; later
        // ones see `removing`).
        let mut svc = data.service.lock();
        frwr::teardown(svc.take(), ctx);
        // No QP is left to name the idle MR (a fence in progress finished: it holds the lock
        // until its QPs answered or were drained). Lock order: `idle` before `pd`.
        let idle = data.idle.lock().take();
        drop(idle);
        // The registrations still on the device are revoked (their owners' handles stay, and
        // find nothing to deregister), then the PD goes. Holding the PD's lock (and the
        // service's) keeps new registrations out meanwhile.
        let mut pd = data.pd.lock();
        let mrs = core::mem::replace(&mut *data.mrs.lock(), RBTree::new());
        let mut revoked = 0;
        for (_, cell) in mrs.iter() {
            let mr = cell.lock().take();
            drop(mr);
            stats::inc(Stat::RsIbMrRevoked);
            revoked += 1;
        }
        drop(mrs);
        let pd = pd.take();
        drop(pd);
        drop(svc);
        if revoked != 0 {
            pr_info!(
                "{} registrations on a removed RDMA device revoked\n",
                revoked
            );
        }
        // The list without this device (KVec has no `retain`); if there is no memory for the
        // copy, the device stays listed, `removing`, which every lookup skips.
        let mut devs = self.ib.devs.lock();
        if let Ok(mut kept) = KVec::with_capacity(devs.len(), GFP_KERNEL) {
            for d in core::mem::replace(&mut *devs, KVec::new()) {
                if !Arc::ptr_eq(&d, &data) {
                    // Room was reserved for all of them.
                    let _ = kept.push(d, GFP_KERNEL);
                }
            }
            *devs = kept;
        }
        drop(devs);
        pr_info!("RDMA device {} removed\n", DevName(dev.name()));
    }
}

/// An address for messages: dotted quad for IPv4 (mapped), otherwise 8 groups of hex.
struct AddrFmt(Addr);

impl core::fmt::Display for AddrFmt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = &self.0 .0;
        if let Some(v4) = self.0.v4() {
            return write!(f, "{}.{}.{}.{}", v4[0], v4[1], v4[2], v4[3]);
        }
        for (i, pair) in b.chunks(2).enumerate() {
            let sep = if i == 0 { "" } else { ":" };
            let hi = pair.first().copied().unwrap_or(0);
            let lo = pair.get(1).copied().unwrap_or(0);
            write!(f, "{sep}{:x}", u16::from_be_bytes([hi, lo]))?;
        }
        Ok(())
    }
}

/// A device name for messages.
struct DevName([u8; 32]);

impl core::fmt::Display for DevName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for &b in self.0.iter().take_while(|&&b| b != 0) {
            write!(f, "{}", char::from(b))?;
        }
        Ok(())
    }
}

/// The listeners: requests on the RDS ports.
struct Listener {
    shared: Arc<Shared>,
    ib: Arc<IbTransport>,
}

/// What the IB transport registers while the module is loaded.
pub(crate) struct IbModule {
    // Dropped in this order: the listeners first (no new passive connections), then the
    // client (every device removed, so every connection down), then the transport leaves the
    // core's registry.
    _listen4: Option<CmId>,
    _listen6: Option<CmId>,
    _client: IbRegistration,
    _member: Membership,
}

impl IbModule {
    /// Makes the transport, registers the client (devices present are added now) and the
    /// listeners, and joins the core's transports.
    pub(crate) fn new(shared: &Arc<Shared>, ctx: &ProcessCtx) -> Result<Self> {
        let ib = IbTransport::new()?;
        let member = join(shared, ib.clone())?;
        let client = IbRegistration::new(
            Arc::new(
                Client {
                    shared: shared.clone(),
                    ib: ib.clone(),
                },
                GFP_KERNEL,
            )?,
            ctx,
        )?;
        let listener: Arc<dyn CmHandler> = Arc::new(
            Listener {
                shared: shared.clone(),
                ib,
            },
            GFP_KERNEL,
        )?;
        let listen = |v6: bool, port: u16| -> Result<CmId> {
            let id = CmId::new(listener.clone(), v6, ctx)?;
            id.listen(v6, port, ctx)?;
            Ok(id)
        };
        let l4 = listen(false, RDS_IB_PORT)
            .inspect_err(|e| pr_warn!("no RDS/IB listener ({:?})\n", e.to_errno()))
            .ok();
        // As C, a failing IPv6 listener is not fatal.
        let l6 = listen(true, RDS_IB_PORT6).ok();
        Ok(Self {
            _listen4: l4,
            _listen6: l6,
            _client: client,
            _member: member,
        })
    }

    /// Stops listening (module unload, before connections are destroyed).
    pub(crate) fn stop_listening(&mut self) {
        drop(self._listen4.take());
        drop(self._listen6.take());
    }
}

/// A registration on a device: by `ib_reg_user_mr` (IB, RoCE) or fast registration (iWARP).
/// Dropping it revokes it.
enum DevMr {
    User(UserMr),
    Fast(FastMr),
}

impl DevMr {
    fn rkey(&self) -> u32 {
        match self {
            DevMr::User(m) => m.rkey(),
            DevMr::Fast(m) => m.rkey(),
        }
    }
}

/// A registration's slot in its device's list: the device registration while it is valid.
type MrCell = Mutex<Option<DevMr>>;

/// A registration on an RDMA device (C: an FRWR or FMR of `ib_rdma.c`): made with
/// `ib_reg_user_mr` on the device's PD (on iWARP, by fast registration on the device's service
/// connection: `frwr`), so it belongs to the device, not to a connection. It
/// needs no connection to be made, is usable on every connection of the device, outlives
/// reconnects, and is revoked by `ib_dereg_mr`, which returns only once no peer can reach the
/// memory. Peers address it from the random page-aligned base of its region (the cookie's
/// offset, as loopback's model does), not from 0.
struct IbMr {
    rkey: u32,
    region: Region,
    /// Dropped (deregistration and unpinning) in process context.
    _reg: ProcessDrop<IbMrReg>,
}

impl MrHandle for IbMr {
    fn rkey(&self) -> u32 {
        self.rkey
    }

    fn region(&self) -> Region {
        self.region
    }
}

/// What dropping an [`IbMr`] undoes, in process context: the device registration (unless the
/// device's removal revoked it first), then the core's pin of the pages.
struct IbMrReg {
    dev: Arc<IbDev>,
    rkey: u32,
    /// Of C's 8 KiB pool's size (for the counters).
    small: bool,
    cell: Arc<MrCell>,
    _pages: crate::rdma::RegPages,
}

impl DropInProcess for IbMrReg {
    fn end(self, ctx: &ProcessCtx) {
        let listed = self.dev.mrs.lock().remove(&self.rkey);
        drop(listed);
        // Deregistered here, under the cell's lock (so that the device's removal, which takes
        // it before the PD goes, waits for the deregistration); the pages are unpinned after,
        // when `_pages` goes.
        let mut cell = self.cell.lock();
        let mut mr = cell.take();
        if mr.is_some() {
            stats::inc(Stat::RsIbMrDeregistered);
        }
        if let Some(DevMr::Fast(f)) = &mut mr {
            // iWARP (siw) looks a registration up once per READ RESPONSE: one that started
            // before the deregistration goes on reading the pages. They stay mapped and
            // pinned until every QP of the device is past what it was doing.
            f.deregister(ctx);
            fence_device(&self.dev, ctx);
        }
        stats::inc(if self.small {
            Stat::IbRdmaMr8kFree
        } else {
            Stat::IbRdmaMr1mFree
        });
        drop(mr);
        drop(cell);
    }
}

/// Waits (process context) until every QP of the iWARP device `dev` is past the work it had
/// started: a fence on each ([`Qp::post_fence`]). A fence completes after everything queued
/// before it on its QP, which may take a while on a busy one; a QP that completed no send-side
/// request for [`FENCE_MS`] while its fence is out is stuck (a READ RESPONSE behind a peer that
/// takes nothing) and is moved to the error state, which flushes it (its connection resets:
/// `rs_ib_mr_fence_stalled`). A QP that refuses the fence because it is not in RTS is sending
/// nothing (siw: `ENOTCONN`); one refused for another reason, a closed one included (its
/// shutdown may not have stopped it yet), is moved to the error state too (which waits for a
/// shutdown under way).
fn fence_device(dev: &IbDev, ctx: &ProcessCtx) {
    let idle = dev.idle.lock();
    let Some(idle) = idle.as_ref() else { return };
    let mut qps = listed_qps(dev, ctx);
    let Ok(waiter) = Waiter::new() else {
        // No memory for the waiter: the slow way, every QP to the error state.
        for (q, _) in qps.iter() {
            q.fail(ctx);
        }
        return;
    };
    // Fences are posted under `idle`, held until every one of them completed: no QP has
    // another's out (`EBUSY`), and one that is pending below is this round's.
    for (q, _) in qps.iter() {
        match q.post_fence(idle, &waiter) {
            Ok(()) => stats::inc(Stat::RsIbMrFence),
            Err(e) if e == crate::bindings::net::enotconn() => {}
            Err(_) => q.fail(ctx),
        }
    }
    waiter.arrive();
    // The test build's knob: as if a first bound had passed at once with no progress (not
    // even a zero-time wait, which sleeps a tick).
    let mut expire = testhooks::ib_fence_expire();
    let mut rounds = 0u32;
    loop {
        if !expire && waiter.wait(FENCE_MS, ctx) {
            return;
        }
        for (q, last) in qps.iter_mut() {
            if *last == u64::MAX || !q.fence_pending() {
                continue;
            }
            let now = q.send_progress();
            if expire || now == *last {
                stats::inc(Stat::RsIbMrFenceStalled);
                q.fail(ctx);
                // Its flush completes the fence.
                *last = u64::MAX;
            } else {
                *last = now;
            }
        }
        expire = false;
        rounds += 1;
        if rounds % 15 == 0 {
            pr_warn!(
                "fences on an iWARP device still out after {} s\n",
                rounds * FENCE_MS / 1000
            );
        }
    }
}

/// The QPs listed on `dev` now, each with its send-side progress (all of them: without memory
/// for the list, it tries again).
fn listed_qps(dev: &IbDev, ctx: &ProcessCtx) -> KVec<(Arc<Qp<Keep>>, u64)> {
    let mut v = KVec::new();
    loop {
        let want = dev.qps.lock().iter().count();
        if v.reserve(want, GFP_KERNEL).is_err() {
            sys::sleep_ms(10, ctx);
            continue;
        }
        let qps = dev.qps.lock();
        if qps.iter().count() > want {
            continue;
        }
        for (_, q) in qps.iter() {
            // Room was reserved.
            let _ = v.push((q.clone(), q.send_progress()), GFP_ATOMIC);
        }
        return v;
    }
}

impl MrOps for IbTransport {
    fn register(&self, req: RegRequest, ctx: &ProcessCtx) -> Result<Arc<dyn MrHandle>> {
        let dev = self.find_addr(&req.laddr, ctx).ok_or(ENODEV)?;
        let vec = RdsIovec {
            addr: req.addr,
            bytes: req.len,
        };
        let region = loop_region(&vec, random_u32());
        // C's pool of the registration's size, for its counters.
        let small = vec.pages() <= MR_8K_PAGES;
        if dev.attrs.iwarp && vec.pages() > u64::from(dev.attrs.max_fast_reg_pages) {
            // More pages than one fast registration maps (siw: 256, so a 1 MiB range that does
            // not start on a page boundary). C's `rds_ib_map_frmr` fails such a mapping with
            // `EINVAL`.
            return Err(EINVAL);
        }
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let cell = Arc::pin_init(new_mutex!(None, "IbMr::cell"), GFP_KERNEL)?;
        let rkey = if dev.attrs.iwarp {
            // siw takes the user address as an `ib_reg_user_mr` registration's iova whatever
            // it is asked for, which a cookie's 32-bit offset cannot carry: fast registration.
            frwr::register(
                &dev,
                &req.laddr,
                &req.pages,
                (req.addr % crate::bindings::mm::PAGE_SIZE as u64) as usize,
                req.len,
                u64::from(region.offset),
                req.remote_write,
                &cell,
                node,
                ctx,
            )?
        } else {
            let pd = dev.pd.lock();
            let pd = pd.as_ref().ok_or(ENODEV)?;
            // SAFETY: `cell` (listed by the device below, under the PD's lock) gets the MR: device
            // removal deregisters it before the PD goes, else `IbMrReg`'s drop does, in process
            // context, while the device and its PD live.
            let mr = unsafe {
                UserMr::register(
                    pd,
                    req.addr,
                    req.len,
                    u64::from(region.offset),
                    req.remote_write,
                    dev.attrs.atomics,
                    ctx,
                )?
            };
            let mr = DevMr::User(mr);
            let rkey = mr.rkey();
            *cell.lock() = Some(mr);
            let old = dev.mrs.lock().insert(node.into_node(rkey, cell.clone()));
            drop(old);
            rkey
        };
        stats::inc(Stat::RsIbMrRegistered);
        stats::inc(if small {
            Stat::IbRdmaMr8kAlloc
        } else {
            Stat::IbRdmaMr1mAlloc
        });
        let reg = ProcessDrop::new(
            IbMrReg {
                dev,
                rkey,
                small,
                cell,
                _pages: req.pages,
            },
            GFP_KERNEL,
            ctx,
        )?;
        let mr: Arc<dyn MrHandle> = Arc::new(
            IbMr {
                rkey,
                region,
                _reg: reg,
            },
            GFP_KERNEL,
        )?;
        Ok(mr)
    }

    fn flush(&self, _ctx: &ProcessCtx) {}
}

impl Transport for IbTransport {
    fn name(&self) -> &'static str {
        "infiniband"
    }

    fn kind(&self) -> i32 {
        RDS_TRANS_IB
    }

    fn laddr_check(&self, net: NetId, addr: &Addr, scope_id: u32, ctx: &ProcessCtx) -> bool {
        // C: RDS/IB serves the initial namespace only, and addresses an RDMA device serves.
        net == NetId::init()
            && !addr.is_loopback()
            && Device::for_addr(&addr.0, scope_id, ctx).is_some()
    }

    fn conn_alloc(
        self: ArcBorrow<'_, Self>,
        key: &ConnKey,
        ctx: &ProcessCtx,
    ) -> Result<Arc<dyn ConnTransport>> {
        // A peer on this host (C: `c_loopback`): both ends share the congestion maps.
        let local_peer = Device::for_addr(&key.faddr.0, 0, ctx).is_some();
        let c: Arc<dyn ConnTransport> = Arc::pin_init(
            pin_init!(IbConn {
                key: *key,
                ib: self.into(),
                local_peer,
                path <- new_spinlock_bh!(None, "IbConn::path"),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        Ok(c)
    }

    fn sends_cong_maps(&self) -> bool {
        true
    }

    fn reconnects_passive(&self) -> bool {
        true
    }

    fn mr_ops(&self) -> Option<&dyn MrOps> {
        Some(self)
    }

    fn tos_map(&self, tos: u8) -> Option<u8> {
        // C's `rds_ib_get_tos_map`: the identity.
        Some(tos)
    }

    fn runs_op(&self, conn: &Conn, op: &RdmaOp, ctx: &ProcessCtx) -> bool {
        // Atomics need a device that has them (siw has none; rxe only the plain ones). A
        // device that is gone fails the operation when it is posted.
        match &op.kind {
            OpKind::Rdma { .. } => true,
            OpKind::Atomic { op: a, .. } => self
                .find_addr(&conn.key.laddr, ctx)
                .is_none_or(|d| d.runs_atomic(&atomic_wr(a))),
        }
    }
}

/// The IB state of one connection.
#[pin_data]
pub(crate) struct IbConn {
    key: ConnKey,
    /// The transport (its devices).
    ib: Arc<IbTransport>,
    /// The peer is an address of this host (C: `c_loopback`): both ends share the maps.
    local_peer: bool,
    /// The current incarnation, if any.
    #[pin]
    path: SpinLockBh<Option<Arc<Path>>>,
}

impl IbConn {
    fn current(&self) -> Option<Arc<Path>> {
        self.path.lock().clone()
    }

    fn on_device(&self, dev: Device) -> bool {
        self.current()
            .and_then(|p| p.qpr())
            .is_some_and(|q| q.dev.dev == dev)
    }

    fn v6(&self) -> bool {
        self.key.laddr.v4().is_none()
    }
}

impl ConnTransport for IbConn {
    fn connect(&self, conn: &Arc<Conn>, ctx: &ProcessCtx) -> Result {
        let path = Path::new(conn.clone(), true)?;
        let handler: Arc<dyn CmHandler> = path.clone();
        let id = CmId::new(handler, self.v6(), ctx)?;
        // The id goes into the path before the path is published: a shutdown that takes the
        // path from here on destroys the id with it.
        *path.pending.lock() = Some(id);
        let old = self.path.lock().replace(path.clone());
        if let Some(o) = old {
            o.teardown(ctx);
        }
        if conn.is_destroyed() {
            // Destroyed since the core looked (a `sendmsg` starts connects outside the
            // connection's works): its shutdown may have taken the path before this one was in
            // place, and nothing else would tear this one down (the connection and the path
            // hold each other). The destroy set the flag before its shutdown took the path, so
            // one of the two sees the other.
            let mine = {
                let mut cur = self.path.lock();
                if cur.as_ref().is_some_and(|p| Arc::ptr_eq(p, &path)) {
                    cur.take()
                } else {
                    None
                }
            };
            if let Some(p) = mine {
                p.teardown(ctx);
            }
            return Err(crate::bindings::net::enotconn());
        }
        let port = if self.v6() { RDS_IB_PORT6 } else { RDS_IB_PORT };
        let pending = path.pending.lock();
        match pending.as_ref() {
            // The events follow; `ROUTE_RESOLVED` takes the id from `pending`.
            Some(id) => id.resolve_addr(&self.key.laddr.0, &self.key.faddr.0, port, 0, RESOLVE_MS),
            // A shutdown took the path down already.
            None => Err(crate::bindings::net::enotconn()),
        }
    }

    fn shutdown(&self, _conn: &Arc<Conn>, ctx: &ProcessCtx) {
        let path = self.path.lock().take();
        if let Some(p) = path {
            p.teardown(ctx);
        }
    }

    fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        _ctx: &ProcessCtx,
    ) -> Result<(), XmitError> {
        if msg.is_cong_map() && self.local_peer {
            // Both ends share the host's maps (C sends none over IB loopback).
            return Ok(());
        }
        let Some(q) = self.current().and_then(|p| p.qpr()) else {
            return Err(XmitError::Full);
        };
        q.xmit(conn, msg, progress)
    }

    fn rdma_info(&self) -> Option<RdmaInfo> {
        let mut info = RdmaInfo::default();
        if let Some(q) = self.current().and_then(|p| p.qpr()) {
            if let Some((s, d, sl)) = q.qp.route_info() {
                info.src_gid = s;
                info.dst_gid = d;
                info.sl = sl;
                info.max_send_wr = q.qp.nsend();
                info.max_recv_wr = q.qp.nrecv();
                info.max_send_sge = q.dev.attrs.max_send_sge.min(8);
                info.mr_max = q.dev.attrs.max_mr;
                // iWARP: one fast registration maps at most this many pages.
                let most = u32::try_from(MAX_MR_PAGES).unwrap_or(u32::MAX);
                info.mr_size = if q.dev.attrs.iwarp {
                    most.min(q.dev.attrs.max_fast_reg_pages)
                } else {
                    most
                };
            }
        }
        Some(info)
    }
}

/// The work request of an atomic operation.
fn atomic_wr(a: &AtomicOp) -> RdmaWr {
    match *a {
        AtomicOp::Fadd { add, nocarry_mask } => RdmaWr::Fadd { add, nocarry_mask },
        AtomicOp::Cswp {
            compare,
            swap,
            compare_mask,
            swap_mask,
        } => RdmaWr::Cswp {
            compare,
            swap,
            compare_mask,
            swap_mask,
        },
    }
}

/// What a send work request keeps until it completes: its message.
enum Keep {
    /// A SEND of a fragment of the message (its payload); `last`: the last fragment, whose
    /// completion completes the message's operation (RC ordering: the operation's RDMA, posted
    /// before it, is done).
    Send { msg: Arc<Message>, last: bool },
    /// An RDMA work request of the message's operation (the message owns the pages it
    /// maps); `completes`: the last of a silent operation that has no SEND behind it, whose
    /// completion completes the operation.
    Rdma { msg: Arc<Message>, completes: bool },
}

impl SendSource for Keep {
    fn piece(&self, idx: usize) -> Option<Piece<'_>> {
        let Keep::Send { msg, .. } = self else {
            return None;
        };
        msg.data.segment(idx).map(|f| match f {
            Frag::Page(p, o, n) => Piece::Page(p, o, n),
            Frag::Bytes(b) => Piece::Bytes(b),
        })
    }
}

/// The `RDS_RDMA_*` status of an operation whose work request failed with `wc_status` (C:
/// `rds_ib_send_unmap_op`'s mapping, except for a lost peer): a remote access error is the
/// peer's refusal (a bad r_key, an address outside the registration, no write permission);
/// retries exhausted mean the peer was lost, as a flush does (C: `RDS_RDMA_OTHER_ERROR`);
/// anything else is an error of the connection.
fn op_status(wc_status: i32) -> i32 {
    match wc_status {
        WC_REM_ACCESS_ERR => RDS_RDMA_REMOTE_ERROR,
        WC_RETRY_EXC_ERR | WC_RNR_RETRY_EXC_ERR => RDS_RDMA_DROPPED,
        _ => RDS_RDMA_OTHER_ERROR,
    }
}

/// One incarnation of a connection on a device: the cm id while its address and route
/// resolve (`pending`, active side), then the QP and its resources ([`Qpr`]).
#[pin_data]
struct Path {
    conn: Arc<Conn>,
    active: bool,
    /// The id while the address and route resolve. Its lock also orders a teardown against
    /// the cm handlers that install the QP (`ROUTE_RESOLVED`, a passive accept): they check
    /// `dead` and install the QP (and connect or accept) under it, and `teardown` sets `dead`
    /// under it before it looks for the QP; so either the handler sees `dead` and takes its
    /// QP down itself, or the teardown finds the QP.
    #[pin]
    pending: Mutex<Option<CmId>>,
    /// A teardown started, or a newer incarnation replaced this one: no QP may be installed
    /// any more, and what arrives is not delivered (set under `pending`'s lock).
    dead: AtomicBool,
    /// The QP and its resources, once set up.
    #[pin]
    qpr: SpinLockBh<Option<Arc<Qpr>>>,
    /// The version the handshake settled on.
    version: AtomicU16,
    /// The incarnation this one replaced in a passive accept, which runs in a cm handler and
    /// must not take it down there: it goes with this one (`teardown`).
    /// Lock order: after [`IbConn`]'s `path`.
    #[pin]
    prev: SpinLockBh<Option<Arc<Path>>>,
}

impl Path {
    fn new(conn: Arc<Conn>, active: bool) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                conn,
                active,
                pending <- new_mutex!(None, "Path::pending"),
                dead: AtomicBool::new(false),
                qpr <- new_spinlock_bh!(None, "Path::qpr"),
                version: AtomicU16::new(0),
                prev <- new_spinlock_bh!(None, "Path::prev"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    fn qpr(&self) -> Option<Arc<Qpr>> {
        self.qpr.lock().clone()
    }

    /// Marks the path dead (see `dead`) without tearing it down: what a cm handler may do to a
    /// path it replaces, and the first step of `teardown`.
    fn retire(&self) {
        let _serial = self.pending.lock();
        self.dead.store(true, Ordering::Release);
    }

    /// Takes the path down (process context, not in a cm handler): the id of a connect in
    /// progress is destroyed; a QP stops posting, disconnects, drains (every outstanding
    /// request completes, flushed), and goes with its id and resources.
    fn teardown(&self, ctx: &ProcessCtx) {
        pr_debug!("ib path {:p} teardown\n", self);
        // From here no handler installs a QP (see `pending`), and nothing this incarnation
        // receives is delivered (`Path::done`): a newer one may deliver already.
        self.retire();
        let pending = self.pending.lock().take();
        // RDMA requests still out get a moment to complete by themselves before the QP is
        // flushed (their completions are handled while the path still holds the QP): a peer
        // that refused one (a bad r_key) sends its NAK before it disconnects, but the
        // disconnect may be handled here first, and the operation would then be reported
        // dropped instead of refused.
        if let Some(q) = self.qpr() {
            let mut waited = 0;
            while q.rdma_inflight.load(Ordering::Acquire) != 0 && waited < RDMA_SETTLE_MS {
                sys::sleep_ms(10, ctx);
                waited += 10;
            }
        }
        // The QP first: it may use the id `pending` held.
        let qpr = self.qpr.lock().take();
        if let Some(q) = qpr {
            q.qp.shutdown(ctx);
            // Nothing else holds the resources now: completions are drained, the id's
            // handlers are over, and the core runs no `xmit` during a shutdown.
            drop(q);
        }
        // Destroying the id waits for a handler of it that is still running.
        drop(pending);
        let prev = self.prev.lock().take();
        if let Some(p) = prev {
            p.teardown(ctx);
        }
    }

    /// Builds the QP and its resources on the id's device and posts the receives (in the id's
    /// handler).
    fn setup(self: &Arc<Self>, id: CmIdRef<'_>, ctx: &ProcessCtx) -> Result<Arc<Qpr>> {
        let dev = id.device().ok_or(ENODEV)?;
        let ibdev = self.ic().ok_or(ENODEV)?.ib.find(dev).ok_or(ENODEV)?;
        let q = Qpr::new(self.clone(), id, ibdev, ctx)?;
        for i in 0..q.qp.nrecv() {
            if let Err(e) = q.qp.post_recv(i, GFP_KERNEL) {
                q.qp.shutdown(ctx);
                return Err(e);
            }
        }
        // The receives the handshake offers the peer.
        q.credits.add_posted(q.qp.nrecv());
        Ok(q)
    }

    /// The IB state of the path's connection (always there: the path was made for an IB
    /// connection).
    fn ic(&self) -> Option<&IbConn> {
        self.conn.tstate::<IbConn>()
    }

    /// The `Arc` of this path (the connection holds it), if it is still the current one.
    fn me(&self) -> Option<Arc<Path>> {
        let cur = self.ic()?.current()?;
        core::ptr::eq(&*cur, self).then_some(cur)
    }
}

impl CmHandler for Path {
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction {
        let conn = &self.conn;
        pr_debug!(
            "ib path {:p} active {} event {} status {} conn state {:?}\n",
            self,
            self.active,
            ev.kind,
            ev.status,
            conn.state()
        );
        match ev.kind {
            cm_event::ADDR_RESOLVED => {
                id.set_tos(conn.key.tos);
                if id.resolve_route(RESOLVE_MS).is_err() {
                    conn.drop_connection();
                }
            }
            cm_event::ROUTE_RESOLVED => {
                let Some(me) = self.me() else {
                    // A path the connection left: its teardown destroys the id.
                    return CmAction::Keep;
                };
                let r = me.setup(id, ctx);
                let delay = crate::bindings::testhooks::ib_route_delay_ms();
                if delay > 0 {
                    sys::sleep_ms(delay, ctx);
                }
                pr_debug!(
                    "ib path setup {:?}\n",
                    r.as_ref().err().map(|e| e.to_errno())
                );
                match r {
                    Ok(q) => {
                        // Installed and connected under `pending`'s lock (see there).
                        let mut pending = self.pending.lock();
                        let owned = if self.dead.load(Ordering::Acquire) {
                            None
                        } else {
                            pending.take()
                        };
                        let Some(owned) = owned else {
                            // Torn down (or replaced) meanwhile: the id stays where it is (the
                            // teardown destroys it once this handler returns; it must not go
                            // here); the QP, which does not own it, goes now.
                            drop(pending);
                            stats::inc(Stat::RsIbCmRaced);
                            q.qp.shutdown(ctx);
                            return CmAction::Keep;
                        };
                        // The owned id moves to the QP, which destroys it at its shutdown.
                        if let Err(back) = q.qp.set_id(owned) {
                            *pending = Some(back);
                        }
                        let mut req =
                            ConnPriv::request(conn.key.laddr, conn.key.faddr, conn.key.tos);
                        req.credit = q.credits.take_posted();
                        *self.qpr.lock() = Some(q);
                        let mut buf = [0u8; PRIV_LEN_V6];
                        let n = req.encode(&mut buf);
                        if id.connect(buf.get(..n).unwrap_or(&[])).is_err() {
                            conn.drop_connection();
                        }
                        drop(pending);
                    }
                    Err(_) => conn.drop_connection(),
                }
            }
            cm_event::ESTABLISHED => {
                if self.active {
                    // The reply's version (C: `rds_ib_cm_connect_complete`); a reply without
                    // private data is 4.1 there, which is the same wire.
                    let reply = ConnPriv::decode(ev.private, conn.key.laddr.v4().is_none());
                    if let Some(p) = reply {
                        if !reply_version_ok(p.version()) {
                            stats::inc(Stat::RsIbConnectBadPrivate);
                            conn.drop_connection();
                            return CmAction::Keep;
                        }
                        self.version.store(p.version(), Ordering::Relaxed);
                    }
                    if let Some(q) = self.qpr() {
                        // Flow control if the reply offers credits too (nothing is sent
                        // before this).
                        q.engage_flow_control(reply.map_or(0, |p| p.credit));
                        // iWARP: the initiator speaks first (MPA); an ack-only frame says
                        // nothing else, and frees the responder to send.
                        if q.dev.attrs.iwarp {
                            q.send_ack(conn);
                        }
                    }
                }
                let delay = crate::bindings::testhooks::ib_established_delay_ms();
                if delay > 0 {
                    sys::sleep_ms(delay, ctx);
                }
                conn.connect_complete();
                // A receive that failed before the connection was up was not taken for an
                // error (`wc_failed`): the QP went to the error state during the handshake
                // (rxe moves a responder's QP there at a peer's RDMA request with a bad
                // r_key, and its flushes can come before this event). Such a QP receives
                // nothing more; only a reconnect brings the connection back. Paired with
                // the fence in `Qpr::recv_done`: either that sees the connection up, or this
                // sees `rx_dead`.
                fence(Ordering::SeqCst);
                if !self.dead.load(Ordering::Acquire)
                    && self
                        .qpr()
                        .is_some_and(|q| q.rx_dead.load(Ordering::Acquire))
                {
                    conn.drop_connection();
                }
            }
            cm_event::REJECTED => {
                stats::inc(Stat::RsIbConnectRejected);
                if reject_drops(ev.private) {
                    conn.drop_connection();
                }
            }
            cm_event::ADDR_ERROR
            | cm_event::ROUTE_ERROR
            | cm_event::CONNECT_ERROR
            | cm_event::UNREACHABLE
            | cm_event::DEVICE_REMOVAL
            | cm_event::ADDR_CHANGE
            | cm_event::DISCONNECTED
            | cm_event::TIMEWAIT_EXIT => conn.drop_connection(),
            _ => {}
        }
        CmAction::Keep
    }
}

/// A work request completed in error: the connection drops (its QP is unusable). A flushed
/// request is the echo of an error already handled, or of a teardown, unless the connection
/// is still up: then the QP went to the error state without telling us first (rxe does when
/// a packet cannot leave the host, e.g. while the link is down), and nothing but a reconnect
/// brings back its receives and credits (C: any failed completion while the connection is up).
fn wc_failed(conn: &Arc<Conn>, status: i32, stat: Stat) {
    if status != WC_FLUSH_ERR {
        stats::inc(stat);
        conn.drop_connection();
    } else if conn.state() == ConnState::Up {
        // Not counted as an error of ours: a peer that disconnects flushes our receives too,
        // sometimes before its DISCONNECTED event arrives.
        conn.drop_connection();
    }
}

impl WcHandler for Path {
    fn done(&self, tag: u32, wc: Wc, ctx: &ProcessCtx) {
        // After a teardown took the resources, the flushed requests have nothing left to give
        // back: the resources go with the QP.
        let Some(q) = self.qpr() else { return };
        let slot = tag & !TAG_KIND;
        match tag & TAG_KIND {
            TAG_SEND => q.send_done(&self.conn, slot, wc, ctx),
            // Frames of an incarnation that is going are not delivered: a newer one may
            // already have delivered their retransmissions, and they would come again (an
            // original is not marked RETRANSMITTED, so the sequence check lets it through).
            // The peer resends them, unacknowledged, after the reset that comes with it.
            TAG_RECV => q.recv_done(
                &self.conn,
                slot,
                wc,
                !self.dead.load(Ordering::Acquire),
                ctx,
            ),
            TAG_ACK => {
                q.qp.complete_ack();
                q.ack_busy.store(false, Ordering::Release);
                if wc.status == WC_SUCCESS {
                    // Another ack may have been asked for while this one was out.
                    q.attempt_ack(&self.conn);
                } else {
                    wc_failed(&self.conn, wc.status, Stat::IbAckSendFailure);
                }
            }
            _ => {}
        }
    }
}

impl CmHandler for Listener {
    fn event(&self, id: CmIdRef<'_>, ev: &CmEvent<'_>, ctx: &ProcessCtx) -> CmAction {
        if ev.kind != cm_event::CONNECT_REQUEST {
            return CmAction::Keep;
        }
        match self.accept(id, ev, ctx) {
            Ok(()) => CmAction::Keep,
            Err(reason) => {
                id.reject(reason);
                CmAction::Destroy
            }
        }
    }
}

impl Listener {
    /// A connection request (C: `rds_ib_cm_handle_connect`): `Err` rejects it with the
    /// reason (and rdma_cm destroys its id).
    fn accept(
        &self,
        id: CmIdRef<'_>,
        ev: &CmEvent<'_>,
        ctx: &ProcessCtx,
    ) -> core::result::Result<(), i32> {
        pr_debug!(
            "ib connect request, {} bytes of private data\n",
            ev.private.len()
        );
        let (version, p) = negotiate(ev.private, ev.v6).map_err(|e| {
            stats::inc(Stat::RsIbConnectBadPrivate);
            match e {
                NegotiateError::Incompatible { .. }
                | NegotiateError::Empty
                | NegotiateError::Short => REJ_INCOMPAT,
            }
        })?;
        // The request is for our address `daddr`, from the peer's `saddr`: an address of this
        // host that a device serves, from a unicast address (C takes them as they come; a
        // peer could otherwise make us keep connections for any address).
        if p.saddr.is_any()
            || p.saddr.is_loopback()
            || p.daddr.is_loopback()
            || Device::for_addr(&p.daddr.0, 0, ctx).is_none()
        {
            stats::inc(Stat::RsIbConnectBadPrivate);
            return Err(REJ_INCOMPAT);
        }
        let key = ConnKey {
            net: NetId::init(),
            laddr: p.daddr,
            faddr: p.saddr,
            tos: p.tos,
        };
        let shared = &self.shared;
        let ib: Arc<dyn Transport> = self.ib.clone();
        let conn = shared
            .conns
            .get_passive(shared, key, &ib, ctx)
            .map_err(|_| REJ_INCOMPAT)?;
        // A connection of this key made by another transport is not ours to accept.
        let Some(ic) = conn.tstate::<IbConn>() else {
            return Err(REJ_INCOMPAT);
        };
        pr_debug!("ib request for state {:?}\n", conn.state());
        if !conn.try_accept() {
            // C's counters: a request for a connection that is up closes it as stale
            // (`ib_listen_closed_stale`); one that meets our own connect in progress is a race
            // (`ib_connect_raced`).
            match conn.state() {
                ConnState::Up => {
                    // A stale connection: the peer started over; ours goes too (C).
                    conn.drop_connection();
                    stats::inc(Stat::IbListenClosedStale);
                }
                ConnState::Connecting => stats::inc(Stat::IbConnectRaced),
                _ => {}
            }
            return Err(REJ_INCOMPAT);
        }
        let fail = |conn: &Arc<Conn>| {
            conn.drop_connection();
            REJ_INCOMPAT
        };
        let path = Path::new(conn.clone(), false).map_err(|_| fail(&conn))?;
        path.version.store(version, Ordering::Relaxed);
        let q = path.setup(id, ctx).map_err(|_| fail(&conn))?;
        // Flow control if the request offers credits; the reply offers ours then (and only
        // then: a peer that offers none does not expect any).
        q.engage_flow_control(p.credit);
        let offer = if p.credit != 0 {
            q.credits.take_posted()
        } else {
            0
        };
        let delay = crate::bindings::testhooks::ib_accept_delay_ms();
        if delay > 0 {
            sys::sleep_ms(delay, ctx);
        }
        // Published unless the connection was destroyed: the destroy sets its flag before its
        // shutdown takes the path under this lock, so either this sees the flag or the
        // shutdown finds this path. A previous incarnation goes with this one (below); it is
        // handed over before this one is published, so that any teardown of this one finds it.
        let replaced = {
            let mut cur = ic.path.lock();
            if conn.is_destroyed() {
                None
            } else {
                let old = cur.replace(path.clone());
                let replaced = old.is_some();
                *path.prev.lock() = old;
                Some(replaced)
            }
        };
        // The incarnation replaced delivers nothing more (its frames' retransmissions come
        // over this one).
        let old = path.prev.lock().clone();
        if let Some(o) = old {
            o.retire();
        }
        let Some(replaced) = replaced else {
            // The id is not adopted: rdma_cm destroys it after the reject.
            stats::inc(Stat::RsIbCmRaced);
            q.qp.shutdown(ctx);
            return Err(REJ_INCOMPAT);
        };
        // The QP is installed and the request accepted under `pending`'s lock, unless a
        // teardown of the (published) path came first (see `Path::pending`).
        let pending = path.pending.lock();
        if path.dead.load(Ordering::Acquire) {
            drop(pending);
            stats::inc(Stat::RsIbCmRaced);
            q.qp.shutdown(ctx);
            return Err(REJ_INCOMPAT);
        }
        let handler: Arc<dyn CmHandler> = path.clone();
        let owned = match id.adopt(handler) {
            Ok(o) => o,
            Err(_) => {
                drop(pending);
                q.qp.shutdown(ctx);
                return Err(fail(&conn));
            }
        };
        // From here the id is ours (it goes with the QP's shutdown): no more rejects.
        if let Err(back) = q.qp.set_id(owned) {
            // Cannot happen (a new QP has no id); the id must not be dropped in its handler.
            core::mem::forget(back);
        }
        *path.qpr.lock() = Some(q);
        let mut reply = ConnPriv::request(p.daddr, p.saddr, p.tos);
        let [major, minor] = version.to_be_bytes();
        reply.major = major;
        reply.minor = minor;
        reply.credit = offer;
        let mut buf = [0u8; PRIV_LEN_V6];
        let n = reply.encode(&mut buf);
        if id.accept(buf.get(..n).unwrap_or(&[])).is_err() {
            conn.drop_connection();
        }
        drop(pending);
        if replaced {
            // A previous incarnation the shutdown work has not torn down yet (an active
            // connect that failed, say): it goes now, with this one, through the connection's
            // shutdown, which tears this one down and it with it. Only dropping it would leave
            // its cm id, and the connection it holds, for ever.
            conn.drop_connection();
        }
        Ok(())
    }
}

/// What the receive side keeps between fragments.
struct RxState {
    reasm: Reassembly,
    frags: KVec<Page>,
}

/// The QP of a path and what the data path keeps with it.
#[pin_data]
struct Qpr {
    qp: Arc<Qp<Keep>>,
    dev: Arc<IbDev>,
    /// The send ring: which slots are in use (SENDs complete in order).
    #[pin]
    ring: SpinLockBh<WorkRing>,
    /// Reassembly. Completions run in process context (the CQ's poll work), one at a time
    /// per CQ: a mutex, so that collecting fragments may allocate.
    #[pin]
    rx: Mutex<RxState>,
    /// `xmit` found the ring full or ran out of credits: the next send completion or credit
    /// update kicks the connection.
    waiting: AtomicBool,
    /// Flow control (both ends offered credits), settled before this end sends anything.
    flowctl: AtomicBool,
    /// The credits of flow control (counted from the start; enforced when `flowctl`).
    credits: Credits,
    /// Posted receives untold to the peer that make an ack-only frame worth it.
    update_at: u32,
    /// The ack-only frame is out (one at a time; its completion sends the next if wanted).
    ack_busy: AtomicBool,
    /// iWARP's responder must not send before the initiator's first frame arrives (MPA):
    /// the passive side holds its sends until its first receive, which kicks the connection.
    hold: AtomicBool,
    /// The receive side gave up on this QP (a bad frame, a failed receive): the frames still
    /// in its ring are discarded, not delivered. A frame after one that was thrown away
    /// would otherwise be delivered, and the one thrown away, when the sender sends it again
    /// after the reconnect (as a retransmission, with a sequence number below what was
    /// delivered), dropped as a duplicate: lost.
    rx_dead: AtomicBool,
    /// RDMA work requests posted and not completed yet.
    rdma_inflight: AtomicU32,
    /// Lists the QP on its device (before `_token`: a path stops counting only after).
    _listed: Listed,
    /// Counts the path on its device.
    _token: PathToken,
}

/// A QP listed on its device (`IbDev::qps`) until this goes.
struct Listed {
    dev: Arc<IbDev>,
    key: usize,
}

impl Listed {
    fn new(dev: &Arc<IbDev>, qp: &Arc<Qp<Keep>>) -> Result<Self> {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let key = &**qp as *const Qp<Keep> as usize;
        let old = dev.qps.lock().insert(node.into_node(key, qp.clone()));
        drop(old);
        Ok(Self {
            dev: dev.clone(),
            key,
        })
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        let node = self.dev.qps.lock().remove_node(&self.key);
        // The QP (if that was its last reference) goes outside the lock.
        drop(node);
    }
}

/// A path alive on a device (its `paths` count).
struct PathToken(Arc<IbDev>);

impl Drop for PathToken {
    fn drop(&mut self) {
        self.0.paths.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Qpr {
    fn new(
        path: Arc<Path>,
        id: CmIdRef<'_>,
        dev: Arc<IbDev>,
        ctx: &ProcessCtx,
    ) -> Result<Arc<Self>> {
        let token = {
            // Counted under the device list's lock, which `remove` sets `removing` beside.
            let _devs = path.ic().ok_or(ENODEV)?.ib.devs.lock();
            if dev.removing.load(Ordering::Acquire) {
                return Err(ENODEV);
            }
            dev.paths.fetch_add(1, Ordering::AcqRel);
            PathToken(dev.clone())
        };
        // The send queue also takes the ack-only frame and a fence.
        let cap = dev.attrs.max_qp_wr.saturating_sub(2).max(4);
        let send_wr = if dev.attrs.iwarp {
            SEND_WR_IWARP
        } else {
            SEND_WR
        };
        let spec = QpSpec {
            nsend: send_wr.min(cap),
            nrecv: RECV_WR.min(cap),
            vector: 0,
        };
        let active = path.active;
        let conn = path.conn.clone();
        let events = QpEvents {
            handler: Arc::new(
                move |ev: i32| {
                    // COMM_EST is handled by rdma_cm; any other event is fatal for the QP.
                    if ev != QP_EVENT_COMM_EST {
                        conn.drop_connection();
                    }
                },
                GFP_KERNEL,
            )?,
        };
        let handler: Arc<dyn WcHandler> = path;
        let qp = {
            let pd = dev.pd.lock();
            let pd: &Pd = pd.as_ref().ok_or(ENODEV)?;
            Qp::new(id, None, pd, &spec, handler, events, ctx)?
        };
        let listed = match Listed::new(&dev, &qp) {
            Ok(l) => l,
            Err(e) => {
                qp.shutdown(ctx);
                return Err(e);
            }
        };
        Arc::pin_init(
            pin_init!(Self {
                qp,
                dev: dev.clone(),
                ring <- new_spinlock_bh!(WorkRing::new(spec.nsend), "Qpr::ring"),
                rx <- new_mutex!(
                    RxState {
                        reasm: Reassembly::default(),
                        frags: KVec::new(),
                    },
                    "Qpr::rx"
                ),
                waiting: AtomicBool::new(false),
                flowctl: AtomicBool::new(false),
                credits: Credits::new(),
                update_at: CREDIT_UPDATE_AT.min(spec.nrecv / 2).max(1),
                ack_busy: AtomicBool::new(false),
                hold: AtomicBool::new(!active && dev.attrs.iwarp),
                rx_dead: AtomicBool::new(false),
                rdma_inflight: AtomicU32::new(0),
                _listed: listed,
                _token: token,
            }),
            GFP_KERNEL,
        )
    }

    /// Engages flow control if the peer offered `credit` (its posted receives) in the
    /// handshake; this end always offers its own.
    fn engage_flow_control(&self, credit: u32) {
        if credit != 0 {
            self.credits.add_send(credit);
            self.flowctl.store(true, Ordering::Release);
        }
    }

    fn flow_controlled(&self) -> bool {
        self.flowctl.load(Ordering::Acquire)
    }

    /// Up to `want` send slots and, under flow control, as many credits: the first slot's
    /// position, how many, and the posted credits to advertise with them. `None` when none is
    /// free; the next send completion or credit update kicks the connection then.
    fn reserve(&self, want: u32) -> Option<(u32, Grab)> {
        for first in [true, false] {
            let (pos, got) = self.ring.lock().alloc(want);
            if got == 0 {
                stats::inc(Stat::IbTxRingFull);
            } else {
                let g = if self.flow_controlled() {
                    self.credits.grab(got, false, MAX_ADV_CREDIT)
                } else {
                    Grab { got, advertise: 0 }
                };
                if g.got < got {
                    // Only `xmit` allocates send slots, and the core runs one at a time.
                    self.ring.lock().unalloc(got - g.got);
                    stats::inc(Stat::IbTxThrottle);
                }
                if g.got > 0 {
                    if g.got < want {
                        self.waiting.store(true, Ordering::SeqCst);
                    }
                    return Some((pos, g));
                }
            }
            if first {
                // Ask to be kicked, then look once more: room or credits may have come
                // between the look and the ask.
                self.waiting.store(true, Ordering::SeqCst);
            }
        }
        None
    }

    /// Sends (more of) `msg`: each fragment a SEND of the header and at most 4 KiB; stops
    /// when the ring is full or the credits are out (a completion or a credit update kicks
    /// the connection).
    fn xmit(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
    ) -> Result<(), XmitError> {
        if self.hold.load(Ordering::Acquire) {
            // Released (and the connection kicked) by the first receive.
            return Err(XmitError::Full);
        }
        let total = frag_count(msg.len);
        if !progress.op_sent && msg.op.is_some() {
            // The operation first, then the message behind it on the same QP; a silent
            // operation with nothing to say has no message (C: `rds_send_xmit`).
            let alone = msg
                .op
                .as_deref()
                .is_some_and(|op| op.silent && msg.len == 0 && msg.rdma_cookie == 0);
            self.post_op(conn, msg, alone)?;
            progress.op_sent = true;
            if alone {
                progress.sent = total as usize;
                return Ok(());
            }
        }
        let done = u32::try_from(progress.sent).unwrap_or(total);
        if done >= total {
            return Ok(());
        }
        let Some((pos, g)) = self.reserve(total - done) else {
            return Err(XmitError::Full);
        };
        self.post(conn, msg, progress, pos, g, done, total)
    }

    /// Posts the RDMA operation of `msg` (C: `rds_ib_xmit_rdma`): its local pieces in work
    /// requests of at most `max_sge` pieces each, the remote address advancing from one to
    /// the next, all of them or none (`Full` until the ring has room for all). Every one is
    /// signaled (its completion frees its slot and unmaps its pieces; a failure reports the
    /// operation); when `alone` (a silent operation with no message behind it), the last one's
    /// completion completes the operation. An operation that cannot be posted here completes
    /// at once with `RDS_RDMA_OTHER_ERROR`, and its message goes on.
    fn post_op(&self, conn: &Arc<Conn>, msg: &Arc<Message>, alone: bool) -> Result<(), XmitError> {
        let Some(op) = msg.op.as_deref() else {
            return Ok(());
        };
        let mut maps = KVec::new();
        // Maps `len` bytes of the operation's pinned `pages` at `off` (for the device to read
        // them: `to_device`), piece by piece, onto `maps`.
        let mut map = |pages: &PinnedPages, off: usize, len: usize, to_device: bool| {
            // SAFETY: The pages belong to the operation, which the message owns; every work
            // request keeps the message (`Keep::Rdma`) and its slot unmaps its pieces before
            // letting the message go.
            let m = unsafe { DmaMapping::pinned(self.dev.dev, pages, off, len, to_device) }
                .map_err(|_| XmitError::NoMem)?;
            for piece in m {
                maps.push(piece, GFP_KERNEL).map_err(|_| XmitError::NoMem)?;
            }
            Ok::<_, XmitError>(())
        };
        let (wr, remote_addr, stat) = match &op.kind {
            OpKind::Rdma {
                write,
                remote_addr,
                local,
            } => {
                for seg in local.iter() {
                    map(&seg.pages, seg.offset, seg.len, *write)?;
                }
                if *write {
                    (RdmaWr::Write, *remote_addr, Stat::RsIbRdmaWrite)
                } else {
                    (RdmaWr::Read, *remote_addr, Stat::RsIbRdmaRead)
                }
            }
            OpKind::Atomic {
                op: a,
                remote_addr,
                local,
                offset,
            } => {
                let wr = atomic_wr(a);
                if !self.dev.runs_atomic(&wr) {
                    // The device changed since `runs_op` looked.
                    send::op_complete(msg, RDS_RDMA_OTHER_ERROR);
                    return Ok(());
                }
                // The old value's 8 bytes, written by the device.
                map(local, *offset, 8, false)?;
                (wr, *remote_addr, Stat::RsIbAtomic)
            }
        };
        if maps.is_empty() {
            // Nothing to move.
            if alone {
                send::op_complete(msg, RDS_RDMA_SUCCESS);
            }
            return Ok(());
        }
        // A READ takes at most `max_sge_rd` local pieces (siw: 1). Its sink is named by the
        // PD's local DMA l_key: siw checks only local write access for it (`siw_proc_rresp`),
        // which that key has, so no registration of the sink is needed.
        let per = if matches!(wr, RdmaWr::Read) {
            self.qp
                .max_sge()
                .min(self.dev.attrs.max_sge_rd.max(1) as usize)
        } else {
            self.qp.max_sge()
        };
        let nwr = maps.len().div_ceil(per);
        // iWARP completes an RDMA WRITE once it is sent, and a peer that refuses it answers
        // with a TERMINATE that ends the connection: a READ of one byte behind the writes
        // (`Qp::post_fence_read`: its response comes after the peer placed them) makes their
        // completion mean that the data is at the peer, and a refusal an operation that does
        // not complete (the connection's reset reports it dropped). The SEND behind it is
        // fenced.
        let placed = self.dev.attrs.iwarp && matches!(wr, RdmaWr::Write);
        let Ok(want) = u32::try_from(nwr + usize::from(placed)) else {
            send::op_complete(msg, RDS_RDMA_OTHER_ERROR);
            return Ok(());
        };
        if want > self.qp.nsend() {
            send::op_complete(msg, RDS_RDMA_OTHER_ERROR);
            return Ok(());
        }
        let pos = {
            let mut ring = self.ring.lock();
            let (pos, got) = ring.alloc(want);
            if got < want {
                ring.unalloc(got);
                drop(ring);
                stats::inc(Stat::IbTxRingFull);
                // A completion kicks the connection; it retries from the start.
                self.waiting.store(true, Ordering::SeqCst);
                return Err(XmitError::Full);
            }
            pos
        };
        let nslots = self.qp.nsend();
        let mut raddr = remote_addr;
        let mut pieces = maps.into_iter();
        for k in 0..want {
            let mut bytes = 0u64;
            let keep = Keep::Rdma {
                msg: msg.clone(),
                completes: alone && k + 1 == want,
            };
            let posted = if placed && k + 1 == want {
                self.qp.post_fence_read(
                    (pos + k) % nslots,
                    keep,
                    (remote_addr, op.rkey),
                    SEND_SIGNALED,
                )
            } else {
                KVec::with_capacity(per, GFP_KERNEL)
                    .map_err(Error::from)
                    .and_then(|mut chunk| {
                        for m in pieces.by_ref().take(per) {
                            bytes += m.len() as u64;
                            // Room for `per` was reserved.
                            chunk.push(m, GFP_KERNEL)?;
                        }
                        self.qp.post_rdma(
                            (pos + k) % nslots,
                            keep,
                            chunk,
                            &wr,
                            (raddr, op.rkey),
                            SEND_SIGNALED,
                        )
                    })
            };
            if posted.is_err() {
                // The QP is going (or failed): the rest of the slots go back, and the reset
                // reports the operation dropped (it is never sent again).
                self.ring.lock().unalloc(want - k);
                conn.drop_connection();
                return Err(XmitError::Full);
            }
            self.rdma_inflight.fetch_add(1, Ordering::AcqRel);
            raddr = raddr.wrapping_add(bytes);
        }
        stats::inc(stat);
        Ok(())
    }

    #[expect(clippy::too_many_arguments)]
    fn post(
        &self,
        conn: &Arc<Conn>,
        msg: &Arc<Message>,
        progress: &mut XmitProgress,
        pos: u32,
        g: Grab,
        done: u32,
        total: u32,
    ) -> Result<(), XmitError> {
        // The header of every fragment: the piggybacked ack and C's checksum; the first one
        // posted now also tells the receives posted since the last update.
        let base = msg.header(conn.piggyback_ack());
        let hdr: [u8; HEADER_LEN] = base.with_checksum().encode();
        let first_hdr = (g.advertise > 0).then(|| {
            stats::inc(Stat::IbTxCreditUpdates);
            Header {
                credit: u8::try_from(g.advertise).unwrap_or(u8::MAX),
                ..base
            }
            .with_checksum()
            .encode()
        });
        let nslots = self.qp.nsend();
        for k in 0..g.got {
            let frag = done + k;
            let slot = (pos + k) % nslots;
            let last = frag + 1 == total;
            let flags = if last {
                SEND_SIGNALED | SEND_SOLICITED
            } else {
                SEND_SIGNALED
            };
            let piece = (msg.len > 0).then_some(frag as usize);
            let h = match &first_hdr {
                Some(f) if k == 0 => f,
                _ => &hdr,
            };
            // The first SEND behind an RDMA read or an atomic (whose results the message
            // announces), or a fenced operation, waits for it; on iWARP, behind a write too
            // (which ends in a READ: `post_op`).
            let fence = frag == 0
                && msg.op.as_deref().is_some_and(|op| {
                    op.fence
                        || self.dev.attrs.iwarp
                        || matches!(
                            op.kind,
                            OpKind::Rdma { write: false, .. } | OpKind::Atomic { .. }
                        )
                });
            let flags = if fence { flags | SEND_FENCE } else { flags };
            let keep = Keep::Send {
                msg: msg.clone(),
                last,
            };
            if self.qp.post_send(slot, h, keep, piece, flags).is_err() {
                // The QP is going (or failed): what was not posted goes back; the connection
                // resets and the message is sent again.
                self.ring.lock().unalloc(g.got - k);
                if self.flow_controlled() {
                    self.credits.unget(g.got - k);
                }
                progress.sent = frag as usize;
                conn.drop_connection();
                return Err(XmitError::Full);
            }
            progress.sent = frag as usize + 1;
        }
        if done + g.got < total {
            return Err(XmitError::Full);
        }
        progress.op_sent = true;
        Ok(())
    }

    fn send_done(&self, conn: &Arc<Conn>, slot: u32, wc: Wc, ctx: &ProcessCtx) {
        let keeper = self.qp.complete_send(slot);
        self.ring.lock().free(1);
        if matches!(keeper, Some(Keep::Rdma { .. })) {
            self.rdma_inflight.fetch_sub(1, Ordering::AcqRel);
        }
        // The operation of a message completes with the SEND behind it (or, alone, its last
        // RDMA request); a failed request of its reports it (a flush: the reset does).
        match &keeper {
            Some(Keep::Send { msg, last: true })
            | Some(Keep::Rdma {
                msg,
                completes: true,
            }) if wc.status == WC_SUCCESS && msg.op.is_some() => {
                send::op_complete(msg, RDS_RDMA_SUCCESS);
            }
            Some(Keep::Send { msg, .. }) | Some(Keep::Rdma { msg, .. })
                if wc.status != WC_SUCCESS && wc.status != WC_FLUSH_ERR && msg.op.is_some() =>
            {
                send::op_complete(msg, op_status(wc.status));
            }
            _ => {}
        }
        // The message goes back to its sender's pool if the peer's ack already settled it.
        if let Some(Keep::Send { msg, .. } | Keep::Rdma { msg, .. }) = keeper {
            Message::recycle_sent(msg, ctx);
        }
        if wc.status != WC_SUCCESS {
            wc_failed(conn, wc.status, Stat::RsIbSendError);
            return;
        }
        if self.waiting.swap(false, Ordering::AcqRel) {
            conn.kick();
        }
    }

    fn recv_done(&self, conn: &Arc<Conn>, slot: u32, wc: Wc, live: bool, ctx: &ProcessCtx) {
        let buf = self.qp.complete_recv(slot);
        if wc.status != WC_SUCCESS {
            drop(buf);
            self.rx_dead.store(true, Ordering::Release);
            // Paired with the fence after `connect_complete` (`ESTABLISHED`): a flush that
            // comes before the connection is up is caught there.
            fence(Ordering::SeqCst);
            wc_failed(conn, wc.status, Stat::RsIbRecvError);
            return;
        }
        if !live {
            self.rx_dead.store(true, Ordering::Release);
        }
        if self.rx_dead.load(Ordering::Acquire) {
            // Receives complete one at a time, so nothing of this QP is delivered after the
            // frame that killed it.
            return;
        }
        let Some((hdr, page)) = buf else {
            self.rx_failed(conn);
            return;
        };
        if self.hold.swap(false, Ordering::AcqRel) {
            // iWARP: the initiator spoke; the responder may send now.
            conn.kick();
        }
        let outcome = self.rx.lock().reasm.fragment(&hdr, wc.byte_len as usize);
        match outcome {
            Err(e) => {
                let old = core::mem::replace(&mut self.rx.lock().frags, KVec::new());
                drop(old);
                stats::inc(match e {
                    crate::proto::FragError::Checksum => Stat::RecvDropBadChecksum,
                    _ => Stat::RsRecvDropBadHeader,
                });
                stats::inc(Stat::RsIbBadFragment);
                // As C's `rds_ib_conn_error`: a line per dropped connection.
                pr_warn!(
                    "RDS/IB: bad fragment ({:?}, {} bytes, seq {}, len {}) from {}: reconnecting\n",
                    e,
                    wc.byte_len,
                    Header::from_bytes(&hdr).sequence,
                    Header::from_bytes(&hdr).len,
                    AddrFmt(conn.key.faddr)
                );
                self.rx_failed(conn);
                return;
            }
            Ok(FragOutcome::Ack(h)) => {
                stats::inc(Stat::IbAckReceived);
                self.credits_received(conn, h.credit);
                conn.ack_received_recycling(h.ack, ctx);
                drop(page);
            }
            Ok(FragOutcome::More(h)) => {
                self.credits_received(conn, h.credit);
                conn.ack_received_recycling(h.ack, ctx);
                if self.rx.lock().frags.push(page, GFP_KERNEL).is_err() {
                    self.rx_failed(conn);
                    return;
                }
            }
            Ok(FragOutcome::Complete { first, this, .. }) => {
                self.credits_received(conn, this.credit);
                conn.ack_received_recycling(this.ack, ctx);
                let mut pages = core::mem::replace(&mut self.rx.lock().frags, KVec::new());
                if pages.push(page, GFP_KERNEL).is_err() {
                    self.rx_failed(conn);
                    return;
                }
                let len = Header::from_bytes(&first).len as usize;
                let frags = IbFrags { pages, len };
                let delivered = Arc::new(frags, GFP_KERNEL)
                    .map_err(|_| ENOMEM)
                    .and_then(|f| {
                        let slot = conn
                            .shared
                            .rx_slots
                            .take_or_alloc(ctx, GFP_KERNEL_ACCOUNT)?;
                        Ok((Payload::lent(f, len), slot))
                    });
                match delivered {
                    Ok((payload, rx)) => {
                        if recv::incoming(conn, &first, payload, rx, RxCtx::Process(ctx)).is_err() {
                            stats::inc(Stat::RsIbBadFragment);
                            self.rx_failed(conn);
                            return;
                        }
                    }
                    Err(_) => {
                        self.rx_failed(conn);
                        return;
                    }
                }
            }
        }
        // The slot takes a new buffer, which the peer is told about.
        if self.qp.post_recv(slot, GFP_KERNEL).is_err() {
            self.rx_failed(conn);
            return;
        }
        self.credits.add_posted(1);
        self.attempt_ack(conn);
        // A sender held back by its last credit (kept for a credit update while there was
        // nothing to tell) may use it now: it carries this receive's credit. Without this
        // kick both ends can wait for each other's update, each with fewer untold receives
        // than an ack-only update waits for (C retries a throttled send every jiffy).
        if self.flow_controlled()
            && self.credits.send() > 0
            && self.waiting.swap(false, Ordering::SeqCst)
        {
            conn.kick();
        }
    }

    /// The receive side gives up on this QP: nothing more of it is delivered, and the
    /// connection drops (and reconnects).
    fn rx_failed(&self, conn: &Arc<Conn>) {
        self.rx_dead.store(true, Ordering::Release);
        conn.drop_connection();
    }

    /// A header granted `n` send credits (C counts them whatever the flow control).
    fn credits_received(&self, conn: &Arc<Conn>, n: u8) {
        if n == 0 {
            return;
        }
        stats::inc(Stat::IbRxCreditUpdates);
        self.credits.add_send(u32::from(n));
        if self.flow_controlled() && self.waiting.swap(false, Ordering::SeqCst) {
            conn.kick();
        }
    }

    /// Sends an ack-only frame if one is due: the peer asked for an ack (`ACK_REQUIRED`), or
    /// enough posted receives are untold (C: `rds_ib_attempt_ack`).
    fn attempt_ack(&self, conn: &Arc<Conn>) {
        if conn.ack_requested()
            || (self.flow_controlled() && self.credits.posted() >= self.update_at)
        {
            self.send_ack(conn);
        }
    }

    /// Sends an ack-only frame with the last sequence number received and, under flow
    /// control, the posted receives untold; one at a time (its completion sends the next if
    /// one is due), and under flow control only with a credit (a credit update tries again).
    fn send_ack(&self, conn: &Arc<Conn>) {
        if self.ack_busy.swap(true, Ordering::AcqRel) {
            stats::inc(Stat::IbAckSendDelayed);
            return;
        }
        let advertise = if self.flow_controlled() {
            let g = self.credits.grab(1, false, MAX_ADV_CREDIT);
            if g.got == 0 {
                stats::inc(Stat::IbTxThrottle);
                self.ack_busy.store(false, Ordering::Release);
                return;
            }
            g.advertise
        } else {
            0
        };
        let ack = conn.take_ack().unwrap_or_else(|| conn.piggyback_ack());
        let h = Header {
            ack,
            credit: u8::try_from(advertise).unwrap_or(u8::MAX),
            ..Header::default()
        }
        .with_checksum()
        .encode();
        match self.qp.post_ack(&h, SEND_SIGNALED | SEND_SOLICITED) {
            Ok(true) => {
                stats::inc(Stat::IbAckSent);
                if advertise > 0 {
                    stats::inc(Stat::IbTxCreditUpdates);
                }
            }
            Ok(false) => {
                // Cannot happen (`ack_busy` was clear); nothing went out.
                self.ack_busy.store(false, Ordering::Release);
            }
            Err(_) => {
                self.ack_busy.store(false, Ordering::Release);
                stats::inc(Stat::IbAckSendFailure);
                conn.drop_connection();
            }
        }
    }
}

/// The pages of a received message, lent to its payload: 4 KiB each, the last one shorter.
struct IbFrags {
    pages: KVec<Page>,
    len: usize,
}

impl LentFrags for IbFrags {
    fn try_for_each(&self, f: &mut dyn FnMut(&Page, usize, usize) -> Result) -> Result {
        let mut left = self.len;
        for p in self.pages.iter() {
            let n = left.min(FRAG_SIZE);
            f(p, 0, n)?;
            left -= n;
        }
        Ok(())
    }
}
