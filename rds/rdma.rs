// SPDX-License-Identifier: GPL-2.0

//! RDMA: memory registrations, RDMA and atomic operations, completion notifications and the
//! barrier high-water mark.
//!
//! C counterpart: `net/rds/rdma.c` (`__rds_rdma_map`, `rds_free_mr`, `rds_rdma_unuse`,
//! `rds_cmsg_rdma_args`, `rds_cmsg_rdma_dest`, `rds_cmsg_rdma_map`, `rds_cmsg_atomic`) and the
//! notification half of `net/rds/send.c` and `recv.c`.
//!
//! # Registrations
//!
//! `RDS_GET_MR` (or an `RDMA_MAP` control message) pins a user range long-term, charges it to
//! the caller's locked memory, and registers it under a fresh r_key: a random 32-bit value
//! that is neither live nor in the quarantine of recently freed keys, so a stale cookie does
//! not name a new registration ([`crate::proto::Quarantine`]). The registration is kept twice:
//! by its socket (which frees it with `RDS_FREE_MR`, when a use-once registration has been used,
//! or at close) and in the namespace-wide [`MrIndex`], where the loopback transport finds the
//! target of an RDMA operation by r_key, as an HCA would.
//!
//! # Operations
//!
//! A `sendmsg` with `RDMA_ARGS` or an atomic control message carries one [`RdmaOp`]: the local
//! pages are pinned at `sendmsg` (for writing when data will land in them), the remote side is
//! named by r_key and a zero-based address. The transport performs the operation right before
//! the message's own delivery, so the receiver sees the message only once the data is in
//! place; a failed operation is reported (`RDS_RDMA_REMOTE_ERROR`) and its message is not
//! delivered.
//!
//! # Completion
//!
//! Every operation completes exactly once, through `crate::send::complete`: with success,
//! a remote error, cancelled (`RDS_CANCEL_SENT_TO`, close) or dropped (its connection went
//! away). Completion queues a notification (`RDS_CMSG_RDMA_STATUS`) when the operation asked
//! for one (`RDS_RDMA_NOTIFY_ME`), or when it failed and the socket had `RDS_RECVERR` on at
//! `sendmsg` (as C), and raises the sender's high-water mark for the destination.

use crate::bindings::mm::{random_u32, LockedVm, PinnedPages, PAGE_SIZE};
use crate::bindings::net::{eopnotsupp, errno, NetId, Sock};
use crate::proto::{
    check_atomic, check_rdma_bytes, check_registration_mlock, cmsgs, cookie_key, make_cookie,
    rdma_pages, Addr, AtomicArgs, AtomicOp, BarrierState, GetMrArgs, MrError, OpTracker,
    Quarantine, RdmaArgs, RdsIovec, Region, SocketIds, RDMA_ARGS_LEN, RDS_CMSG_ATOMIC_CSWP,
    RDS_CMSG_ATOMIC_FADD, RDS_CMSG_MASKED_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_FADD,
    RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_ID, RDS_CMSG_RDMA_MAP,
    RDS_CMSG_ZCOPY_COOKIE, RDS_IOVEC_LEN, RDS_RDMA_NOTIFY_ME, RDS_RDMA_REMOTE_ERROR,
    RDS_RDMA_SILENT, RDS_RDMA_USE_ONCE, SOL_RDS, UIO_MAXIOV,
};
use crate::proto::{ATOMIC_ARGS_LEN, GET_MR_ARGS_LEN};
use crate::socket::{Rds, RdsSocket};
use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use kernel::{
    list::{impl_has_list_links, impl_list_arc_safe, impl_list_item, ListArc, ListLinks},
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex, UniqueArc},
    uaccess::UserSlice,
};

/// How many freed r_keys are kept out of circulation.
const QUARANTINE: usize = 1024;

/// The per-destination window of operation ids (`64 * W` ids may be in flight).
pub(crate) const OP_WINDOW: usize = 64;

/// The op-id tracker of one destination.
pub(crate) type Tracker = OpTracker<OP_WINDOW>;

fn mr_error(e: MrError) -> Error {
    errno(e.errno())
}

/// A memory registration.
pub(crate) struct Mr {
    /// The r_key.
    pub(crate) key: u32,
    /// The owner's namespace.
    pub(crate) net: NetId,
    /// The owner's bound address: RDMA to this registration must target it.
    pub(crate) laddr: Addr,
    /// The registered bytes, in zero-based RDMA addresses.
    pub(crate) region: Region,
    /// Freed once a peer's message that used it arrives (`RDS_RDMA_USE_ONCE`).
    pub(crate) use_once: bool,
    /// The pinned pages (the user range, rounded out to whole pages).
    pages: PinnedPages,
    /// The charge to the owner's locked memory.
    _charge: LockedVm,
}

/// The fields of [`MrIndex`] protected by its mutex.
struct MrIndexInner {
    keys: RBTree<u32, Arc<Mr>>,
    quarantine: Quarantine<QUARANTINE>,
}

/// Every live registration by r_key, and the quarantine of freed keys.
///
/// Lock order: `inner` is a leaf. Registrations are dropped (which unpins and sleeps) outside it.
#[pin_data]
pub(crate) struct MrIndex {
    #[pin]
    inner: Mutex<MrIndexInner>,
}

impl MrIndex {
    /// An empty index.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_mutex!(
                MrIndexInner {
                    keys: RBTree::new(),
                    quarantine: Quarantine::new(),
                },
                "MrIndex::inner"
            ),
        })
    }

    /// Registers `mr` under a new r_key (which this sets). Nothing is allocated or dropped
    /// under the lock: on failure `mr` is dropped after it is released.
    fn insert_new(&self, mut mr: UniqueArc<Mr>) -> Result<Arc<Mr>> {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut inner = self.inner.lock();
        let key = loop {
            let candidate = random_u32();
            let live = |k: u32| inner.keys.get(&k).is_some();
            if crate::proto::key_acceptable(candidate, live, &inner.quarantine) {
                break candidate;
            }
        };
        mr.key = key;
        let mr = Arc::from(mr);
        inner.keys.insert(node.into_node(key, mr.clone()));
        Ok(mr)
    }

    /// The live registration with r_key `key`.
    pub(crate) fn find(&self, key: u32) -> Option<Arc<Mr>> {
        self.inner.lock().keys.get(&key).cloned()
    }

    /// Removes a registration and quarantines its key; returns it for the caller to drop.
    fn remove(&self, key: u32) -> Option<Arc<Mr>> {
        let mut inner = self.inner.lock();
        let mr = inner.keys.remove(&key);
        if mr.is_some() {
            inner.quarantine.retire(key);
        }
        mr
    }
}

/// A completion notification, allocated when the operation is queued so that completing it
/// never allocates (C: `struct rds_notifier`).
#[pin_data]
pub(crate) struct Notifier {
    #[pin]
    links: ListLinks,
    /// The caller's token.
    pub(crate) user_token: u64,
    /// The status (`RDS_RDMA_*`), set at completion.
    pub(crate) status: AtomicI32,
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for Notifier { untracked; }
}
impl_has_list_links! {
    impl HasListLinks<0> for Notifier { self.links }
}
impl_list_item! {
    impl ListItem<0> for Notifier { using ListLinks; }
}

impl Notifier {
    fn new(user_token: u64) -> Result<ListArc<Self>> {
        ListArc::pin_init(
            try_pin_init!(Notifier {
                links <- ListLinks::new(),
                user_token,
                status: AtomicI32::new(0),
            }),
            GFP_KERNEL,
        )
    }
}

/// One pinned local iovec of an RDMA operation.
pub(crate) struct LocalSeg {
    pages: PinnedPages,
    /// Offset of the data in the first page.
    offset: usize,
    /// Bytes.
    len: usize,
}

/// What an operation does.
pub(crate) enum OpKind {
    /// An RDMA read (remote to local) or write (local to remote).
    Rdma {
        /// Local to remote.
        write: bool,
        /// The zero-based remote address (the cookie's offset included).
        remote_addr: u64,
        /// The local iovecs, in order; the remote range is filled or read contiguously.
        local: KVec<LocalSeg>,
    },
    /// An atomic operation on 8 remote bytes; the old value lands in local memory.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// The zero-based remote address (8-byte aligned).
        remote_addr: u64,
        /// The local page.
        local: PinnedPages,
        /// The offset of the local 8 bytes in it.
        offset: usize,
    },
}

/// An RDMA or atomic operation attached to a message.
pub(crate) struct RdmaOp {
    /// What it does.
    pub(crate) kind: OpKind,
    /// The remote registration.
    pub(crate) rkey: u32,
    /// `RDS_RDMA_NOTIFY_ME`.
    pub(crate) notify: bool,
    /// `RDS_RECVERR` of the socket when the operation was queued.
    pub(crate) recverr: bool,
    /// `RDS_RDMA_SILENT`: no message for the remote side (when there is no payload).
    pub(crate) silent: bool,
    /// The caller's token.
    pub(crate) user_token: u64,
    /// The operation's id (per socket and destination), set when it is queued; 0 before.
    id: AtomicU64,
}

impl RdmaOp {
    /// The operation's id.
    pub(crate) fn id(&self) -> u64 {
        self.id.load(Ordering::Relaxed)
    }

    /// Sets the operation's id.
    pub(crate) fn set_id(&self, id: u64) {
        self.id.store(id, Ordering::Relaxed);
    }

    /// Whether it is an RDMA operation (whose message names the r_key for use-once).
    pub(crate) fn is_rdma(&self) -> bool {
        matches!(self.kind, OpKind::Rdma { .. })
    }
}

/// What the control messages of a `sendmsg` asked for.
#[derive(Default)]
pub(crate) struct SendRdma {
    /// The operation, if any.
    pub(crate) op: Option<KBox<RdmaOp>>,
    /// Its notifier, if it may need one.
    pub(crate) notifier: Option<ListArc<Notifier>>,
    /// The cookie for the receiver (`RDMA_DEST`, or the registration of `RDMA_MAP`).
    pub(crate) cookie: u64,
    /// The registration made by `RDMA_MAP`, to undo if the send fails.
    pub(crate) mapped: Option<u32>,
    /// Where to write the operation's id (`RDS_CMSG_RDMA_ID`), 0 for nowhere.
    pub(crate) id_addr: u64,
}

/// The local iovecs of each `RDS_CMSG_RDMA_ARGS` of a `sendmsg`, read and checked in the
/// first walk over the control messages (C: `rds_rdma_extra_size` in `rds_rm_size`), in order.
pub(crate) type LocalVecs = KVec<KVec<RdsIovec>>;

impl From<crate::proto::CmsgError> for Error {
    fn from(e: crate::proto::CmsgError) -> Self {
        errno(e.errno())
    }
}

/// Reads and checks the local iovecs of one `RDS_CMSG_RDMA_ARGS` (C: `rds_rdma_extra_size`):
/// `nr_local` 0 (`EINVAL`) or over `UIO_MAXIOV` (`EMSGSIZE`), an unreadable array (`EFAULT`),
/// an empty or wrapping iovec (`EINVAL`). Returns them and the pages they span.
pub(crate) fn read_local_vecs(data: &[u8]) -> Result<(KVec<RdsIovec>, u64)> {
    let args = RdmaArgs::decode(data).ok_or(EINVAL)?;
    if args.nr_local == 0 {
        return Err(EINVAL);
    }
    if args.nr_local > UIO_MAXIOV {
        return Err(crate::bindings::net::emsgsize());
    }
    let n = usize::try_from(args.nr_local).map_err(|_| EINVAL)?;
    let mut raw = KVec::new();
    let addr = usize::try_from(args.local_vec_addr).map_err(|_| EFAULT)?;
    UserSlice::new(addr, n * RDS_IOVEC_LEN)
        .reader()
        .read_all(&mut raw, GFP_KERNEL)?;
    let mut local = KVec::with_capacity(n, GFP_KERNEL)?;
    for chunk in raw.chunks(RDS_IOVEC_LEN) {
        local.push(RdsIovec::decode(chunk).ok_or(EINVAL)?, GFP_KERNEL)?;
    }
    let pages = rdma_pages(&local).map_err(mr_error)?;
    Ok((local, pages))
}

impl RdsSocket {
    /// Registers user memory (C: `__rds_rdma_map`); returns the cookie and the r_key.
    pub(crate) fn get_mr(&self, sock: &Sock<Rds>, args: &GetMrArgs) -> Result<(u64, u32)> {
        let (laddr, transport) = {
            let inner = self.inner.lock();
            match (inner.bound, inner.transport) {
                (Some(b), Some(t)) => (b.addr.addr, t),
                _ => return Err(crate::bindings::net::enotconn()),
            }
        };
        let ops = transport.transport().mr_ops().ok_or_else(eopnotsupp)?;
        let (pages, offset) =
            check_registration_mlock(&args.vec, crate::bindings::mm::can_do_mlock())
                .map_err(mr_error)?;
        let npages = usize::try_from(pages).map_err(|_| EINVAL)?;
        let charge = LockedVm::charge(npages)?;
        let start = args.vec.addr & !(PAGE_SIZE as u64 - 1);
        let pinned = PinnedPages::pin(start, npages, true, true)?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let region = Region::of(&args.vec);
        let use_once = args.flags & RDS_RDMA_USE_ONCE != 0;
        let net = sock.net();
        let mr = UniqueArc::new(
            Mr {
                // Set by `insert_new`.
                key: 0,
                net,
                laddr,
                region,
                use_once,
                pages: pinned,
                _charge: charge,
            },
            GFP_KERNEL,
        )?;
        let mr = self.shared.mrs.insert_new(mr)?;
        let key = mr.key;
        let cookie = make_cookie(key, offset);
        let published = ops.register(&mr).and_then(|()| {
            if args.cookie_addr != 0 {
                let addr = usize::try_from(args.cookie_addr).map_err(|_| EFAULT)?;
                UserSlice::new(addr, 8).writer().write(&cookie)?;
            }
            Ok(())
        });
        if let Err(e) = published {
            let gone = self.shared.mrs.remove(key);
            drop(gone);
            drop(mr);
            return Err(e);
        }
        let old = self.mrs.lock().insert(node.into_node(key, mr));
        drop(old);
        Ok((cookie, key))
    }

    /// Frees a registration of this socket (C: `rds_free_mr`); `EINVAL` for a key it does not
    /// own.
    pub(crate) fn free_mr(&self, key: u32, invalidate: bool) -> Result {
        let mr = self.mrs.lock().remove(&key).ok_or(EINVAL)?;
        self.release_mr(mr, invalidate);
        Ok(())
    }

    /// `RDS_FREE_MR` with cookie 0: flushes the transport's unused registrations.
    pub(crate) fn flush_mrs(&self) -> Result {
        let transport = self.inner.lock().transport.ok_or(EINVAL)?;
        let ops = transport.transport().mr_ops().ok_or(EINVAL)?;
        ops.flush();
        Ok(())
    }

    fn release_mr(&self, mr: Arc<Mr>, invalidate: bool) {
        let gone = self.shared.mrs.remove(mr.key);
        drop(gone);
        if invalidate {
            if let Some(t) = self.inner.lock().transport {
                if let Some(ops) = t.transport().mr_ops() {
                    ops.invalidate(&mr);
                }
            }
        }
        // Unpinned when the last reference goes (an operation in progress may hold one).
        drop(mr);
    }

    /// A peer's message that used registration `key` arrived (C: `rds_rdma_unuse`): a
    /// use-once registration is freed.
    pub(crate) fn unuse_mr(&self, key: u32) {
        let mr = {
            let mut mrs = self.mrs.lock();
            match mrs.get(&key) {
                Some(m) if m.use_once => mrs.remove(&key),
                _ => None,
            }
        };
        if let Some(mr) = mr {
            self.release_mr(mr, true);
        }
    }

    /// Frees every registration at close (C: `rds_rdma_drop_keys`).
    pub(crate) fn drop_mrs(&self) {
        loop {
            let mr = {
                let mut mrs = self.mrs.lock();
                let key = mrs.keys().next().copied();
                match key {
                    Some(k) => mrs.remove(&k),
                    None => None,
                }
            };
            let Some(mr) = mr else { break };
            self.release_mr(mr, false);
        }
    }

    /// Whether this socket owns registration `key` (for `RDMA_DEST`).
    fn owns_mr(&self, key: u32) -> bool {
        self.mrs.lock().get(&key).is_some()
    }

    /// Reads the RDMA control messages of a `sendmsg` (C: `rds_cmsg_send` for the RDMA
    /// types), pinning local memory and registering `RDMA_MAP` ranges. The caller has checked
    /// them with `scan_send_cmsgs`.
    pub(crate) fn prepare_rdma(
        &self,
        sock: &Sock<Rds>,
        control: &[u8],
        vecs: LocalVecs,
    ) -> Result<SendRdma> {
        let mut out = SendRdma::default();
        let res = self.prepare_rdma_into(sock, control, vecs, &mut out);
        if let Err(e) = res {
            self.undo_rdma(&mut out);
            return Err(e);
        }
        Ok(out)
    }

    fn prepare_rdma_into(
        &self,
        sock: &Sock<Rds>,
        control: &[u8],
        vecs: LocalVecs,
        out: &mut SendRdma,
    ) -> Result {
        let mut vecs = vecs.into_iter();
        for c in cmsgs(control) {
            let c = c.map_err(|_| EINVAL)?;
            if c.level != SOL_RDS {
                continue;
            }
            match c.kind {
                RDS_CMSG_RDMA_ARGS => {
                    if c.data.len() < RDMA_ARGS_LEN || out.op.is_some() {
                        return Err(EINVAL);
                    }
                    let args = RdmaArgs::decode(c.data).ok_or(EINVAL)?;
                    let local = vecs.next().ok_or(EINVAL)?;
                    out.op = Some(self.prepare_rdma_args(&args, &local)?);
                }
                RDS_CMSG_ATOMIC_FADD
                | RDS_CMSG_ATOMIC_CSWP
                | RDS_CMSG_MASKED_ATOMIC_FADD
                | RDS_CMSG_MASKED_ATOMIC_CSWP => {
                    if c.data.len() < ATOMIC_ARGS_LEN || out.op.is_some() {
                        return Err(EINVAL);
                    }
                    let args = AtomicArgs::decode(c.kind, c.data).ok_or(EINVAL)?;
                    out.op = Some(self.prepare_atomic(&args)?);
                }
                RDS_CMSG_RDMA_DEST => {
                    let cookie = c
                        .data
                        .first_chunk::<8>()
                        .map(|b| u64::from_ne_bytes(*b))
                        .ok_or(EINVAL)?;
                    if out.cookie != 0 || !self.owns_mr(cookie_key(cookie)) {
                        return Err(EINVAL);
                    }
                    out.cookie = cookie;
                }
                RDS_CMSG_RDMA_MAP => {
                    if c.data.len() < GET_MR_ARGS_LEN || out.cookie != 0 {
                        return Err(EINVAL);
                    }
                    let args = GetMrArgs::decode(c.data).ok_or(EINVAL)?;
                    let (cookie, key) = self.get_mr(sock, &args)?;
                    out.cookie = cookie;
                    out.mapped = Some(key);
                }
                RDS_CMSG_RDMA_ID => {
                    let addr = c
                        .data
                        .first_chunk::<8>()
                        .map(|b| u64::from_ne_bytes(*b))
                        .ok_or(EINVAL)?;
                    out.id_addr = addr;
                }
                // A cookie is only valid on a zero-copy send, which only TCP offers.
                RDS_CMSG_ZCOPY_COOKIE => return Err(EINVAL),
                _ => return Err(EINVAL),
            }
        }
        if let Some(op) = &out.op {
            if op.notify || op.recverr {
                out.notifier = Some(Notifier::new(op.user_token)?);
            }
        }
        Ok(())
    }

    /// Undoes what `prepare_rdma` did for a send that failed: an `RDMA_MAP` registration is
    /// freed (C: `rds_rdma_unuse(rs, key, 1)` in `rds_sendmsg`).
    pub(crate) fn undo_rdma(&self, r: &mut SendRdma) {
        if let Some(key) = r.mapped.take() {
            let _ = self.free_mr(key, false);
        }
    }

    /// `RDS_CMSG_RDMA_ARGS` (C: `rds_cmsg_rdma_args`), with the local iovecs read and checked
    /// before ([`read_local_vecs`]; `sendmsg` has limited their pages with
    /// [`crate::proto::rdma_sg_too_big`]): pins them (`EFAULT`), then checks that they do not
    /// add up to more than the remote vector (`EINVAL`), in C's order.
    ///
    /// When the byte counts are wrong the result is an error either way, so nothing is kept:
    /// each iovec is pinned alone and released, only to tell `EFAULT` from `EINVAL` as C does.
    fn prepare_rdma_args(&self, args: &RdmaArgs, local: &[RdsIovec]) -> Result<KBox<RdmaOp>> {
        if local.len() as u64 != args.nr_local {
            return Err(EINVAL);
        }
        let write = args.is_write();
        // A write sends local data (read it); a read stores into local memory.
        let pin = |v: &RdsIovec| {
            let npages = usize::try_from(v.pages()).map_err(|_| EINVAL)?;
            PinnedPages::pin(v.addr & !(PAGE_SIZE as u64 - 1), npages, !write, false)
        };
        if let Err(e) = check_rdma_bytes(args, local) {
            for v in local.iter() {
                drop(pin(v)?);
            }
            return Err(mr_error(e));
        }
        let mut segs = KVec::with_capacity(local.len(), GFP_KERNEL)?;
        for v in local.iter() {
            let pages = pin(v)?;
            segs.push(
                LocalSeg {
                    pages,
                    offset: (v.addr % PAGE_SIZE as u64) as usize,
                    len: usize::try_from(v.bytes).map_err(|_| EINVAL)?,
                },
                GFP_KERNEL,
            )?;
        }
        crate::stats::inc(crate::proto::Stat::SendRdma);
        let recverr = self.data.lock().recverr;
        Ok(KBox::new(
            RdmaOp {
                kind: OpKind::Rdma {
                    write,
                    remote_addr: args.op_remote_addr(),
                    local: segs,
                },
                rkey: args.op_rkey(),
                notify: args.flags & RDS_RDMA_NOTIFY_ME != 0,
                recverr,
                silent: args.flags & RDS_RDMA_SILENT != 0,
                user_token: args.user_token,
                id: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// The atomic control messages (C: `rds_cmsg_atomic`).
    fn prepare_atomic(&self, args: &AtomicArgs) -> Result<KBox<RdmaOp>> {
        check_atomic(args).map_err(mr_error)?;
        let start = args.local_addr & !(PAGE_SIZE as u64 - 1);
        let local = PinnedPages::pin(start, 1, true, false)?;
        let recverr = self.data.lock().recverr;
        Ok(KBox::new(
            RdmaOp {
                kind: OpKind::Atomic {
                    op: args.op,
                    remote_addr: args.op_remote_addr(),
                    local,
                    offset: (args.local_addr % PAGE_SIZE as u64) as usize,
                },
                rkey: args.op_rkey(),
                notify: args.flags & RDS_RDMA_NOTIFY_ME != 0,
                recverr,
                silent: args.flags & RDS_RDMA_SILENT != 0,
                user_token: args.user_token,
                id: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?)
    }
}

/// Performs an operation over loopback: finds the target registration (by r_key, in `net`,
/// registered by a socket bound to `faddr`), checks the range and moves the data. `Err`
/// carries the `RDS_RDMA_*` status of a failure.
pub(crate) fn execute_loopback(
    index: &MrIndex,
    net: NetId,
    faddr: Addr,
    op: &RdmaOp,
) -> core::result::Result<(), i32> {
    let mr = index
        .find(op.rkey)
        .filter(|m| m.net == net && m.laddr == faddr)
        .ok_or(RDS_RDMA_REMOTE_ERROR)?;
    match &op.kind {
        OpKind::Rdma {
            write,
            remote_addr,
            local,
        } => {
            let total: u64 = local.iter().map(|s| s.len as u64).sum();
            if !mr.region.contains(*remote_addr, total) {
                return Err(RDS_RDMA_REMOTE_ERROR);
            }
            // Zero-based addresses are offsets into the pinned pages.
            let mut at = usize::try_from(*remote_addr).map_err(|_| RDS_RDMA_REMOTE_ERROR)?;
            for seg in local.iter() {
                let r = if *write {
                    seg.pages.copy_to(seg.offset, &mr.pages, at, seg.len)
                } else {
                    mr.pages.copy_to(at, &seg.pages, seg.offset, seg.len)
                };
                r.map_err(|_| RDS_RDMA_REMOTE_ERROR)?;
                at += seg.len;
            }
            crate::stats::add(crate::proto::Stat::SendRdmaBytes, total);
            Ok(())
        }
        OpKind::Atomic {
            op: aop,
            remote_addr,
            local,
            offset,
        } => {
            if !mr.region.contains(*remote_addr, 8) {
                return Err(RDS_RDMA_REMOTE_ERROR);
            }
            let at = usize::try_from(*remote_addr).map_err(|_| RDS_RDMA_REMOTE_ERROR)?;
            // Atomic operations are serialised against each other (as an HCA does; on IB
            // too they are not atomic against the CPUs' own accesses): the index's lock.
            let _guard = index.inner.lock();
            let mut old = [0u8; 8];
            mr.pages
                .read(at, &mut old)
                .map_err(|_| RDS_RDMA_REMOTE_ERROR)?;
            let new = aop.apply(u64::from_ne_bytes(old));
            mr.pages
                .write(at, &new.to_ne_bytes())
                .map_err(|_| RDS_RDMA_REMOTE_ERROR)?;
            local
                .write(*offset, &old)
                .map_err(|_| RDS_RDMA_REMOTE_ERROR)?;
            Ok(())
        }
    }
}

/// How many op trackers a socket keeps before it forgets those with nothing outstanding.
const TRACKERS_KEPT: usize = 64;

/// What issuing an op id for a destination found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Issue {
    /// The id.
    Issued(u64),
    /// The destination's window is full (`OP_WINDOW * 64` ids outstanding).
    Full,
    /// The destination has no tracker (it was forgotten meanwhile): make one and try again.
    Missing,
}

/// The op-id trackers of a socket, by destination, and the socket-wide id bookkeeping that
/// lets it forget trackers with nothing outstanding ([`SocketIds`]).
///
/// # Invariants
///
/// `count` is the number of trackers in `map`; a destination without a tracker has no
/// operation outstanding.
pub(crate) struct Trackers {
    map: RBTree<(Addr, u16), KBox<Tracker>>,
    count: usize,
    ids: SocketIds,
}

impl Trackers {
    /// No trackers.
    pub(crate) fn new() -> Self {
        Self {
            map: RBTree::new(),
            count: 0,
            ids: SocketIds::new(),
        }
    }

    /// Whether `dest` has a tracker.
    pub(crate) fn contains(&self, dest: &(Addr, u16)) -> bool {
        self.map.get(dest).is_some()
    }

    /// Adds a tracker for `dest` (which has none) in the memory given, starting where
    /// [`SocketIds::first_id`] says; then, past [`TRACKERS_KEPT`] trackers, forgets the idle
    /// ones of other destinations. Runs under the socket's spinlock: it frees, but does not
    /// allocate.
    pub(crate) fn insert(
        &mut self,
        dest: (Addr, u16),
        node: RBTreeNodeReservation<(Addr, u16), KBox<Tracker>>,
        mut tracker: KBox<Tracker>,
    ) {
        *tracker = Tracker::starting_at(self.ids.first_id());
        self.map.insert(node.into_node(dest, tracker));
        self.count += 1;
        if self.count > TRACKERS_KEPT {
            self.forget_idle(dest);
        }
    }

    /// Forgets the trackers with nothing outstanding, except `keep`'s.
    fn forget_idle(&mut self, keep: (Addr, u16)) {
        loop {
            let mut batch = [None; 32];
            let mut n = 0;
            for (k, t) in self.map.iter() {
                if *k != keep && t.is_idle() {
                    if let Some(slot) = batch.get_mut(n) {
                        *slot = Some(*k);
                        n += 1;
                    } else {
                        break;
                    }
                }
            }
            if n == 0 {
                return;
            }
            for k in batch.iter().flatten() {
                if self.map.remove(k).is_some() {
                    self.count = self.count.saturating_sub(1);
                    self.ids.forgot();
                }
            }
        }
    }

    /// Issues the next id for `dest`.
    pub(crate) fn issue(&mut self, dest: &(Addr, u16)) -> Issue {
        let Some(t) = self.map.get_mut(dest) else {
            return Issue::Missing;
        };
        match t.issue() {
            Some(id) => {
                self.ids.issued(id);
                Issue::Issued(id)
            }
            None => Issue::Full,
        }
    }

    /// Records the completion of `id` to `dest`.
    pub(crate) fn complete(&mut self, dest: &(Addr, u16), id: u64) {
        if let Some(t) = self.map.get_mut(dest) {
            t.complete(id);
        }
    }

    /// The mark of `dest` and the state of a barrier waiting for `id` there.
    pub(crate) fn barrier(&self, dest: &(Addr, u16), id: u64) -> (u64, BarrierState) {
        match self.map.get(dest) {
            Some(t) => (t.mark(), t.barrier(id)),
            None => self.ids.untracked(id),
        }
    }
}
