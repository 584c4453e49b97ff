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
//! the locked memory of the socket's creator ([`crate::bindings::mm::MemlockUser`]), and hands
//! the pages to the socket's transport, whose device registers them under an r_key it
//! chooses ([`crate::transport::MrOps`]). The socket keeps the registration by r_key until
//! `RDS_FREE_MR`, until a use-once registration has been used, or until close; dropping it
//! revokes the registration, and the pages are unpinned once the device can no longer reach
//! them.
//!
//! # Operations
//!
//! A `sendmsg` with `RDMA_ARGS` or an atomic control message carries one [`RdmaOp`]: the local
//! pages are pinned at `sendmsg` (after any congestion wait, for writing when data will land
//! in them), the remote side is named by r_key and a zero-based address. The transport
//! performs the operation before the message's own delivery, so the receiver sees the message
//! only once the data is in place.
//!
//! # Completion
//!
//! Every operation completes exactly once, through `crate::send::op_complete` (the transport,
//! when the operation is done) or `crate::send::complete` (the message is settled: acked,
//! cancelled, or dropped with its connection): with success, a remote error, cancelled
//! (`RDS_CANCEL_SENT_TO`, close) or dropped (a reset). Completion queues a notification
//! (`RDS_CMSG_RDMA_STATUS`) when the operation asked for one (`RDS_RDMA_NOTIFY_ME`), or when
//! it failed and the socket had `RDS_RECVERR` on at `sendmsg` (as C), and raises the sender's
//! high-water mark for the destination. A socket has at most [`NOTIFY_MAX`] notifications
//! outstanding (issued or unread).

use crate::bindings::mm::{MemlockUser, PinCharge, PinOwner, PinnedPages, PAGE_SIZE};
use crate::bindings::net::{eopnotsupp, errno, Sock};
use crate::bindings::sync::{
    flush_deferred, new_spinlock_bh, DropInProcess, ProcessCtx, ProcessDrop, SpinLockBh,
};
use crate::proto::{
    check_atomic, check_rdma_bytes, check_registration_mlock, cmsgs, cookie_key, make_cookie,
    rdma_pages, Addr, AtomicArgs, AtomicOp, BarrierState, GetMrArgs, GuessLimit, MrError,
    OpTracker, RdmaArgs, RdsIovec, SocketIds, NOTIFY_MAX, RDMA_ARGS_LEN, RDS_CMSG_ATOMIC_CSWP,
    RDS_CMSG_ATOMIC_FADD, RDS_CMSG_MASKED_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_FADD,
    RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_ID, RDS_CMSG_RDMA_MAP,
    RDS_CMSG_ZCOPY_COOKIE, RDS_IOVEC_LEN, RDS_RDMA_FENCE, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE,
    RDS_RDMA_SILENT, RDS_RDMA_USE_ONCE, SOL_RDS, UIO_MAXIOV,
};
use crate::proto::{ATOMIC_ARGS_LEN, GET_MR_ARGS_LEN};
use crate::socket::{Rds, RdsSocket};
use crate::transport::{MrHandle, RegRequest};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use kernel::{
    list::{impl_has_list_links, impl_list_arc_safe, impl_list_item, ListArc, ListLinks},
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Arc,
    uaccess::UserSlice,
};

/// The per-destination window of operation ids (`64 * W` ids may be in flight).
pub(crate) const OP_WINDOW: usize = 64;

/// The op-id tracker of one destination.
pub(crate) type Tracker = OpTracker<OP_WINDOW>;

fn mr_error(e: MrError) -> Error {
    errno(e.errno())
}

/// User pages pinned for a registration, with their charge to the socket creator's locked
/// memory. Unpinning sleeps, so they travel in a [`ProcessDrop`] ([`RegPages`]).
pub(crate) struct PinnedRegion {
    /// The pages (the user range rounded out to whole pages).
    pub(crate) pages: PinnedPages,
    /// The charge, dropped after the pages are unpinned.
    _charge: PinCharge,
}

impl DropInProcess for PinnedRegion {}

impl PinOwner for RegPages {
    fn pinned(&self) -> &PinnedPages {
        &self.pages
    }
}

/// The pages of a registration, droppable in any context.
pub(crate) type RegPages = ProcessDrop<PinnedRegion>;

/// A memory registration of a socket.
pub(crate) struct Mr {
    /// The r_key.
    pub(crate) key: u32,
    /// Freed once a peer's message that used it arrives (`RDS_RDMA_USE_ONCE`).
    pub(crate) use_once: bool,
    /// The transport's registration; dropping it revokes the registration.
    _handle: Arc<dyn MrHandle>,
}

/// The rate limit on a socket's failed r_key lookups ([`GuessLimit`]), shared with its
/// operations so that a transport can apply it where the lookup happens (any context).
#[pin_data]
pub(crate) struct GuessLimiter {
    #[pin]
    inner: SpinLockBh<GuessLimit>,
}

impl GuessLimiter {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                inner <- new_spinlock_bh!(
                    GuessLimit::new(crate::bindings::sys::local_clock_ns()),
                    "GuessLimiter::inner"
                ),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// The limit's clock: the time, or (test build, `guess_refill_hold`) 0, a time that
    /// refills nothing since every earlier one.
    fn now() -> u64 {
        if crate::bindings::testhooks::guess_refill_hold() {
            0
        } else {
            crate::bindings::sys::local_clock_ns()
        }
    }

    /// Whether a lookup may be made now.
    pub(crate) fn allows(&self) -> bool {
        self.inner.lock().allows(Self::now())
    }

    /// A lookup failed.
    pub(crate) fn failed(&self) {
        self.inner.lock().failed(Self::now())
    }
}

/// What every RDMA-capable socket shares with its operations and registrations.
pub(crate) struct RdmaOwner {
    /// The socket's creator, charged for its registrations.
    pub(crate) user: Arc<MemlockUser>,
    /// The socket's rate limit on failed lookups.
    pub(crate) guess: Arc<GuessLimiter>,
    /// Notifications outstanding (issued with an operation, or queued and unread).
    pub(crate) notifiers: Arc<AtomicU32>,
}

impl RdmaOwner {
    /// The state of a new socket (its creator is the calling task).
    pub(crate) fn new(ctx: &ProcessCtx) -> Result<Self> {
        Ok(Self {
            user: Arc::new(MemlockUser::current(ctx)?, GFP_KERNEL_ACCOUNT)?,
            guess: GuessLimiter::new()?,
            notifiers: Arc::new(AtomicU32::new(0), GFP_KERNEL_ACCOUNT)?,
        })
    }
}

/// One outstanding notification of a socket, counted while it exists.
struct NotifyToken(Arc<AtomicU32>);

impl NotifyToken {
    /// Takes one of the socket's [`NOTIFY_MAX`] notifications; `ENOBUFS` when none is left.
    fn take(count: &Arc<AtomicU32>) -> Result<Self> {
        let mut cur = count.load(Ordering::Relaxed);
        loop {
            if cur >= NOTIFY_MAX {
                crate::stats::inc(crate::proto::Stat::RsNotifyLimit);
                return Err(crate::bindings::net::enobufs());
            }
            match count.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(Self(count.clone())),
                Err(c) => cur = c,
            }
        }
    }
}

impl Drop for NotifyToken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
    /// Counts against the socket's outstanding notifications while it exists.
    _token: NotifyToken,
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
    fn new(user_token: u64, count: &Arc<AtomicU32>) -> Result<ListArc<Self>> {
        let token = NotifyToken::take(count)?;
        ListArc::pin_init(
            try_pin_init!(Notifier {
                links <- ListLinks::new(),
                user_token,
                status: AtomicI32::new(0),
                _token: token,
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }
}

/// One pinned local iovec of an RDMA operation.
pub(crate) struct LocalSeg {
    /// The pages.
    pub(crate) pages: PinnedPages,
    /// Offset of the data in the first page.
    pub(crate) offset: usize,
    /// Bytes.
    pub(crate) len: usize,
}

impl DropInProcess for KVec<LocalSeg> {}

/// What an operation does.
pub(crate) enum OpKind {
    /// An RDMA read (remote to local) or write (local to remote).
    Rdma {
        /// Local to remote.
        write: bool,
        /// The zero-based remote address (the cookie's offset included).
        remote_addr: u64,
        /// The local iovecs, in order; the remote range is filled or read contiguously.
        local: ProcessDrop<KVec<LocalSeg>>,
    },
    /// An atomic operation on 8 remote bytes; the old value lands in local memory.
    Atomic {
        /// The operation.
        op: AtomicOp,
        /// The zero-based remote address (8-byte aligned).
        remote_addr: u64,
        /// The local page.
        local: ProcessDrop<PinnedPages>,
        /// The offset of the local 8 bytes in it.
        offset: usize,
    },
}

/// An RDMA or atomic operation attached to a message. Dropping it never sleeps (its pinned
/// pages are released in process context).
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
    /// `RDS_RDMA_FENCE`: wait for earlier operations before this one (IB fences the SEND
    /// behind it; loopback performs every operation in order).
    pub(crate) fence: bool,
    /// The caller's token.
    pub(crate) user_token: u64,
    /// The sending socket's limit on failed lookups.
    pub(crate) guess: Arc<GuessLimiter>,
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
    pub(crate) fn get_mr(
        &self,
        sock: &Sock<Rds>,
        args: &GetMrArgs,
        ctx: &ProcessCtx,
    ) -> Result<(u64, u32)> {
        let (laddr, transport) = {
            let inner = self.inner.lock();
            match (inner.bound, &inner.transport) {
                (Some(b), Some(t)) => (b.addr.addr, t.clone()),
                _ => return Err(crate::bindings::net::enotconn()),
            }
        };
        let ops = transport.mr_ops().ok_or_else(eopnotsupp)?;
        let (pages, _offset) =
            check_registration_mlock(&args.vec, crate::bindings::mm::can_do_mlock())
                .map_err(mr_error)?;
        let npages = usize::try_from(pages).map_err(|_| EINVAL)?;
        let charge = self.rdma.user.charge(npages)?;
        let start = args.vec.addr & !(PAGE_SIZE as u64 - 1);
        let pinned = PinnedPages::pin(start, npages, true, true)?;
        let reg = ProcessDrop::new(
            PinnedRegion {
                pages: pinned,
                _charge: charge,
            },
            GFP_KERNEL_ACCOUNT,
            ctx,
        )?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let mr = KBox::new(
            Mr {
                key: 0,
                use_once: args.flags & RDS_RDMA_USE_ONCE != 0,
                _handle: ops.register(
                    RegRequest {
                        net: sock.net(),
                        laddr,
                        pages: reg,
                        addr: args.vec.addr,
                        len: args.vec.bytes,
                        remote_write: args.flags & RDS_RDMA_READWRITE != 0,
                    },
                    ctx,
                )?,
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        let key = mr._handle.rkey();
        let cookie = make_cookie(key, mr._handle.region().offset);
        let mut mr = mr;
        mr.key = key;
        if args.cookie_addr != 0 {
            let written = usize::try_from(args.cookie_addr)
                .map_err(|_| EFAULT)
                .and_then(|addr| UserSlice::new(addr, 8).writer().write(&cookie));
            if let Err(e) = written {
                // Revoked, and unpinned before the call returns.
                drop(mr);
                flush_deferred(ctx);
                return Err(e);
            }
        }
        let old = self.mrs.lock().insert(node.into_node(key, mr));
        drop(old);
        Ok((cookie, key))
    }

    /// Frees a registration of this socket (C: `rds_free_mr`); `EINVAL` for a key it does not
    /// own. Returns once the registration can no longer be reached and, unless an operation
    /// in progress still holds them, its pages are unpinned.
    pub(crate) fn free_mr(&self, key: u32, ctx: &ProcessCtx) -> Result {
        let mr = self.mrs.lock().remove(&key).ok_or(EINVAL)?;
        drop(mr);
        flush_deferred(ctx);
        Ok(())
    }

    /// `RDS_FREE_MR` with cookie 0: flushes the transport's unused registrations.
    pub(crate) fn flush_mrs(&self, ctx: &ProcessCtx) -> Result {
        let transport = self.inner.lock().transport.clone().ok_or(EINVAL)?;
        let ops = transport.mr_ops().ok_or(EINVAL)?;
        ops.flush(ctx);
        Ok(())
    }

    /// A peer's message that used registration `key` arrived (any context; C:
    /// `rds_rdma_unuse`): a use-once registration is freed.
    pub(crate) fn unuse_mr(&self, key: u32) {
        let mr = {
            let mut mrs = self.mrs.lock();
            match mrs.get(&key) {
                Some(m) if m.use_once => mrs.remove(&key),
                _ => None,
            }
        };
        drop(mr);
    }

    /// Frees every registration at close (C: `rds_rdma_drop_keys`).
    pub(crate) fn drop_mrs(&self, ctx: &ProcessCtx) {
        let mrs = core::mem::replace(&mut *self.mrs.lock(), RBTree::new());
        drop(mrs);
        flush_deferred(ctx);
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
        ctx: &ProcessCtx,
    ) -> Result<SendRdma> {
        let mut out = SendRdma::default();
        let res = self.prepare_rdma_into(sock, control, vecs, &mut out, ctx);
        if let Err(e) = res {
            self.undo_rdma(&mut out, ctx);
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
        ctx: &ProcessCtx,
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
                    out.op = Some(self.prepare_rdma_args(&args, &local, ctx)?);
                }
                RDS_CMSG_ATOMIC_FADD
                | RDS_CMSG_ATOMIC_CSWP
                | RDS_CMSG_MASKED_ATOMIC_FADD
                | RDS_CMSG_MASKED_ATOMIC_CSWP => {
                    if c.data.len() < ATOMIC_ARGS_LEN || out.op.is_some() {
                        return Err(EINVAL);
                    }
                    let args = AtomicArgs::decode(c.kind, c.data).ok_or(EINVAL)?;
                    out.op = Some(self.prepare_atomic(&args, ctx)?);
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
                    let (cookie, key) = self.get_mr(sock, &args, ctx)?;
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
                // Checked and taken by `sendmsg` (the message's payload carries it).
                RDS_CMSG_ZCOPY_COOKIE => {}
                _ => return Err(EINVAL),
            }
        }
        if let Some(op) = &out.op {
            if op.notify || op.recverr {
                out.notifier = Some(Notifier::new(op.user_token, &self.rdma.notifiers)?);
            }
        }
        Ok(())
    }

    /// Undoes what `prepare_rdma` did for a send that failed: an `RDMA_MAP` registration is
    /// freed (C: `rds_rdma_unuse(rs, key, 1)` in `rds_sendmsg`).
    pub(crate) fn undo_rdma(&self, r: &mut SendRdma, ctx: &ProcessCtx) {
        if let Some(key) = r.mapped.take() {
            let _ = self.free_mr(key, ctx);
        }
    }

    /// `RDS_CMSG_RDMA_ARGS` (C: `rds_cmsg_rdma_args`), with the local iovecs read and checked
    /// before ([`read_local_vecs`]; `sendmsg` has limited their pages with
    /// [`crate::proto::rdma_sg_too_big`]): pins them (`EFAULT`), then checks that they do not
    /// add up to more than the remote vector (`EINVAL`), in C's order.
    ///
    /// When the byte counts are wrong the result is an error either way, so nothing is kept:
    /// each iovec is pinned alone and released, only to tell `EFAULT` from `EINVAL` as C does.
    fn prepare_rdma_args(
        &self,
        args: &RdmaArgs,
        local: &[RdsIovec],
        ctx: &ProcessCtx,
    ) -> Result<KBox<RdmaOp>> {
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
        let mut segs = KVec::with_capacity(local.len(), GFP_KERNEL_ACCOUNT)?;
        for v in local.iter() {
            let pages = pin(v)?;
            segs.push(
                LocalSeg {
                    pages,
                    offset: (v.addr % PAGE_SIZE as u64) as usize,
                    len: usize::try_from(v.bytes).map_err(|_| EINVAL)?,
                },
                GFP_KERNEL_ACCOUNT,
            )?;
        }
        let local = ProcessDrop::new(segs, GFP_KERNEL_ACCOUNT, ctx)?;
        crate::stats::inc(crate::proto::Stat::SendRdma);
        let recverr = self.data.lock().recverr;
        Ok(KBox::new(
            RdmaOp {
                kind: OpKind::Rdma {
                    write,
                    remote_addr: args.op_remote_addr(),
                    local,
                },
                rkey: args.op_rkey(),
                notify: args.flags & RDS_RDMA_NOTIFY_ME != 0,
                recverr,
                silent: args.flags & RDS_RDMA_SILENT != 0,
                fence: args.flags & RDS_RDMA_FENCE != 0,
                user_token: args.user_token,
                guess: self.rdma.guess.clone(),
                id: AtomicU64::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )?)
    }

    /// The atomic control messages (C: `rds_cmsg_atomic`).
    fn prepare_atomic(&self, args: &AtomicArgs, ctx: &ProcessCtx) -> Result<KBox<RdmaOp>> {
        check_atomic(args).map_err(mr_error)?;
        let start = args.local_addr & !(PAGE_SIZE as u64 - 1);
        let local = ProcessDrop::new(
            PinnedPages::pin(start, 1, true, false)?,
            GFP_KERNEL_ACCOUNT,
            ctx,
        )?;
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
                fence: args.flags & RDS_RDMA_FENCE != 0,
                user_token: args.user_token,
                guess: self.rdma.guess.clone(),
                id: AtomicU64::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )?)
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
