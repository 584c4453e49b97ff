// SPDX-License-Identifier: GPL-2.0

//! The IB/iWARP transport: devices, rdma_cm connections and the datagram path.
//!
//! C counterpart: `net/rds/ib.c`, `ib_cm.c`, `ib_send.c`, `ib_recv.c`, `ib_rdma.c`,
//! `rdma_transport.c`. This file holds the transport and its devices (`ib.c`); the rest is
//! in the submodules, one concept each.
//!
//! # Pieces
//!
//! - [`IbDev`]: a device the ib_client added, with its protection domain. Connections come
//!   and go on it; its `remove` takes them down and waits until none is left before the PD
//!   goes (C drops them and lets the PD go with the last reference).
//! - [`cm`]: the listeners: rdma_cm ids on 0.0.0.0:18634 and [::]:16385. A connection request
//!   is checked (private data, version: [`crate::proto::negotiate`]), matched to the
//!   connection it is for (created passively if needed) and accepted with its own QP, or
//!   rejected (a connection already connecting: C's answer to simultaneous connects; both
//!   sides then retry with the core's backoff). Also the active side's events, up to the
//!   handshake's reply.
//! - [`conn`]: [`IbConn`], the transport's state of one connection: the current
//!   [`Path`](conn::Path) (one incarnation on a device: cm id, QP, CQs, rings), replaced at
//!   every connect. [`qp`]: the QP of a path and what the data path keeps with it.
//! - The data path ([`send`], [`recv`]): a message is sent as `frag_count(len)` SENDs, each
//!   with the full header (checksummed, as C) and at most 4 KiB; the last is solicited (C arms
//!   its receive CQ for solicited events only). Receives land in a ring of 48-byte header
//!   buffers and 4 KiB pages; [`crate::proto::Reassembly`] checks and joins fragments, and a
//!   complete message goes to [`crate::recv::incoming`] with its pages lent
//!   ([`IbFrags`](recv::IbFrags)). Acks piggyback on every SEND; an ack-only frame goes when
//!   the peer asks (`ACK_REQUIRED`), as C, one at a time (one more goes when it completes if
//!   another was asked for meanwhile).
//! - Flow control ([`crate::proto::Credits`], in [`send`]): both handshake messages offer the
//!   receives posted; when both offer, every SEND takes a credit and headers carry the
//!   receives posted since (`h_credit`), or an ack-only frame does when 16 are untold. C
//!   offers credits only with `net.rds.ib.flow_control` set, so against a default C peer
//!   there is none (IB's RNR retries cover a receiver that is behind); iWARP has no RNR retry,
//!   and two rds-rs peers always use it.
//! - RDMA ([`rdma`]): an operation's RDMA or atomic work requests go on the connection's QP
//!   ahead of its message. Registrations ([`mr`]) belong to a device; on iWARP they are fast
//!   registrations on the device's service connection ([`frwr`]), and a deregistration
//!   fences every QP of the device ([`fence`]).
//!
//! # Contexts
//!
//! rdma_cm handlers run in process context (rdma_cm's work queues); completions in softirq
//! context (the CQs' `irq_poll`, `IB_POLL_SOFTIRQ`: `WcHandler::done` gets no `ProcessCtx`, so
//! nothing it calls sleeps, and what it allocates is `GFP_ATOMIC`); `xmit` runs in the core's
//! drain (process context). No cm id is created or destroyed in a cm handler: ids are created
//! by `connect` (the connect work) and destroyed by `shutdown` (the shutdown work).
//!
//! # Lock order
//!
//! Each lock with the locks that may be held when it is taken (none: taken alone). Mutexes
//! are process context only; BH spinlocks are taken by the completions too, and nothing
//! sleeps under them.
//!
//! | lock | kind | taken inside |
//! |---|---|---|
//! | `IbTransport::devs` | mutex | none |
//! | `IbDev::service` | mutex | none |
//! | `frwr::SvcState::inner` | mutex | `IbDev::service` |
//! | `mr::IbMr::cell` (`mr::RevocableMr`) | mutex | `IbDev::service` |
//! | `IbDev::fence_run` | mutex | none |
//! | `IbDev::unfenced` | mutex | `IbMr::cell`, `IbDev::fence_run` |
//! | `IbDev::idle` | mutex | `IbMr::cell`, `IbDev::fence_run` |
//! | `IbDev::pd`, `IbDev::mrs` | mutex | `IbDev::service`, `IbDev::idle` |
//! | a QP's `life` (`bindings/ib.rs`) | mutex | `IbDev::idle` |
//! | a QP's `fence_mr` (`bindings/ib.rs`) | mutex | `IbDev::idle` |
//! | `conn::Path::pending` | mutex | none |
//! | `IbConn::path`, `Path::qp`, `Path::prev` | BH spinlock | `Path::pending` |
//! | `qp::PathQp::ring`, `PathQp::rx`, `recv::PagePool::spares` | BH spinlock | none |
//! | a QP's `slots`, then its `fence` (`bindings/ib.rs`) | BH spinlock | none, `slots` |
//! | a QP's `cm`, `IbDev::qps`, `frwr::SvcState::reg` | BH spinlock | none |
//!
//! `Documentation/design.md` has them in the module's lock table, with what each protects.

use crate::bindings::ib::{
    CmHandler, CmId, DevAttrs, Device, IbClient, IbRegistration, IdleMr, Pd, Qp, RdmaWr, Waiter,
};
use crate::bindings::net::NetId;
use crate::bindings::sync::{new_spinlock_bh, ProcessCtx, SpinLockBh};
use crate::bindings::sys::{impl_work_item, new_process_work, Work};
use crate::conn::{Conn, ConnKey};
use crate::proto::{Addr, Stat, RDS_IB_PORT, RDS_IB_PORT6, RDS_TRANS_IB};
use crate::rdma::{OpKind, RdmaOp};
use crate::socket::Shared;
use crate::stats;
use crate::transport::{join, ConnTransport, Membership, MrOps, Transport};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::RBTree,
    sync::{Arc, ArcBorrow, Mutex},
};

mod cm;
mod conn;
mod fence;
mod frwr;
mod mr;
mod qp;
mod rdma;
mod recv;
mod send;

use cm::Listener;
use conn::IbConn;
use mr::RevocableMr;
use rdma::atomic_wr;
use send::Inflight;

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
/// `pd` is `Some` until `remove` took every connection on the device down (every party of
/// `paths` arrived, and no new path starts: `removing`).
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
    idle: Mutex<Option<Arc<IdleMr>>>,
    /// Held by every QP and registration made on it as well; `remove` drops this reference
    /// once none is left.
    #[pin]
    pd: Mutex<Option<Arc<Pd>>>,
    /// The registrations made on the device, by r_key (see [`IbMrReg`]); `remove` revokes
    /// those still there before the PD goes. Under `pd`'s lock when both are taken.
    #[pin]
    mrs: Mutex<RBTree<u32, Arc<RevocableMr>>>,
    /// iWARP: the service connection that fast registrations are posted on (`frwr`); taken
    /// by `remove` before the PD goes. Lock order: before `pd`.
    #[pin]
    service: frwr::Service,
    /// The QPs of the paths on the device, by address (`QpListing`): what `fence_device` posts
    /// on.
    #[pin]
    qps: SpinLockBh<RBTree<usize, Arc<Qp<Inflight>>>>,
    /// Paths (QPs) alive on the device, one party each (`PathCountGuard`), and one for the
    /// device itself, which `remove` gives up before it waits for the others.
    paths: Arc<Waiter>,
    /// The device is going away: no new path.
    removing: AtomicBool,
    /// iWARP: deregistered fast registrations waiting for a fence round of the device before
    /// their pages go (`fence::Unfenced`; `None` once `remove` took them: later ones are
    /// fenced by their owner). Lock order: after a registration's cell, inside `fence_run`.
    #[pin]
    unfenced: Mutex<Option<KVec<fence::Unfenced>>>,
    /// Held by the fence work while it fences a batch, and by `remove` while it takes the
    /// batch left. Lock order: before `IbDev::idle`.
    #[pin]
    fence_run: Mutex<()>,
    /// The fence work (`fence::run_batch`), queued on the core's work queue.
    #[pin]
    fence_work: Work<IbDev, 0>,
    /// The core's shared state (its work queue, for `fence_work`).
    shared: Arc<Shared>,
}

impl_work_item!(IbDev, 0, fence_work, fence::run_batch);

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
        let pd = Arc::new(Pd::new(dev, ctx).ok()?, GFP_KERNEL).ok()?;
        let lkey = pd.lkey();
        let attrs = dev.attrs();
        let idle = if attrs.iwarp {
            Some(IdleMr::new(&pd, ctx).ok()?)
        } else {
            None
        };
        let paths = Waiter::new().ok()?;
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
                paths,
                removing: AtomicBool::new(false),
                unfenced <- new_mutex!(Some(KVec::new()), "IbDev::unfenced"),
                fence_run <- new_mutex!((), "IbDev::fence_run"),
                fence_work <- new_process_work!("IbDev::fence_work"),
                shared: self.shared.clone(),
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
        {
            // Under the lock a path is counted under (`PathQp::new`): a path counted before
            // this is waited for below, none is counted after.
            let _devs = self.ib.devs.lock();
            data.removing.store(true, Ordering::Release);
        }
        data.paths.arrive();
        // Every connection on the device goes down (its shutdown destroys the QP and the id);
        // wait for the last, then the PD can go. A connection between its path and `Up` when
        // dropped may need dropping again: every 100 ms while any is left.
        let mut waited = 0u32;
        loop {
            self.shared.conns.for_each(NetId::init(), |c| {
                if let Some(ic) = c.tstate::<IbConn>() {
                    if ic.on_device(dev) {
                        c.drop_connection();
                    }
                }
            });
            if data.paths.wait(100, ctx) {
                break;
            }
            waited += 1;
            if waited % 100 == 0 {
                pr_warn!("still waiting for connections on a removed RDMA device\n");
            }
        }
        // iWARP: deregistrations waiting for a fence go now (no QP is left to fence; a batch
        // being fenced finishes first); later ones are fenced by their owners.
        fence::drain(&data);
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
        // Every QP and registration on the device is gone, so this is the PD's last reference,
        // and the PD is deallocated before the device's removal goes on. Said loudly if not
        // (the PD would go with its last holder, after the device's removal).
        if let Some(pd) = pd.take() {
            if Arc::into_unique_or_drop(pd).is_none() {
                pr_err!("the PD of a removed RDMA device is still in use\n");
            }
        }
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

    fn refuses_replays(&self) -> bool {
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
