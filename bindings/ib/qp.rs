// SPDX-License-Identifier: GPL-2.0

//! An RC queue pair on an rdma_cm id ([`Qp`]) with its CQs, its buffers and its slots, and
//! the work requests it posts for its owner: SENDs, receives, RDMA and atomic operations
//! ([`RdmaWr`]), fast registrations and fences; the QP's asynchronous events ([`QpEvents`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h): `ib_post_send`
//! (`IB_WR_SEND`, `IB_WR_RDMA_WRITE`, `IB_WR_RDMA_READ`, the atomics, `IB_WR_REG_MR`,
//! `IB_WR_LOCAL_INV`), `ib_post_recv`, `ib_modify_qp`, `ib_drain_qp`, `enum ib_event_type`;
//! [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h): `rdma_create_qp`,
//! `rdma_destroy_qp`; the glue's `rds_rs_ib_post_*`, and its QP event handler, which calls
//! `rds_rs_ib_qp_event` (here) (`ib_glue.c`).

use super::cm::{CmId, CmIdRef};
use super::cq::{Cq, Wc, WcHandler, WcStatus, WrCqe};
use super::device::Device;
use super::dma::{DmaBuf, DmaMapping};
use super::mr::{FastMr, IdleMr};
use super::pd::Pd;
use super::waiter::Waiter;
use crate::bindings::mm::{PinOwner, PinnedPages};
use crate::bindings::raw;
use crate::bindings::sync::ProcessCtx;
use core::{
    marker::PhantomData,
    ptr::{self, NonNull},
    sync::atomic::Ordering,
};
use kernel::{
    error::to_result,
    ffi::{c_int, c_void},
    page::Page,
    prelude::*,
    sync::{Arc, Mutex},
};

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

// The QP verbs of an rdma_cm id (the rest of its methods are in `cm.rs`): its QP's creation
// and the work requests posted on it, for `Qp`.
impl<'a> CmIdRef<'a> {
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

/// What a posted send work request has mapped for the device (held until it completes:
/// dropping it unmaps).
enum Mapped {
    /// Nothing (a header alone, a READ into one of the QP's buffers).
    Nothing,
    /// A SEND's data.
    One { _map: DmaMapping },
    /// An RDMA request's pieces.
    Pieces { _maps: KVec<DmaMapping> },
}

/// What a posted send work request uses, until it completes. The mappings are dropped
/// (unmapped) before the keeper (which may own the mapped pages): fields drop in order.
struct Outstanding<K> {
    mapped: Mapped,
    keeper: K,
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
    inner: crate::bindings::sync::SpinLockBh<OwnWait>,
}

impl OwnSlot {
    fn new() -> Result<Arc<Self>> {
        Ok(Arc::pin_init(
            pin_init!(OwnSlot {
                inner <- crate::bindings::sync::new_spinlock_bh!(
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
            return Err(crate::bindings::net::enotconn());
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
    cm: crate::bindings::sync::SpinLockBh<Option<CmId>>,
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
    slots: crate::bindings::sync::SpinLockBh<Slots<K>>,
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
                cm <- crate::bindings::sync::new_spinlock_bh!(id, "Qp::cm"),
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
                slots <- crate::bindings::sync::new_spinlock_bh!(
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

    /// The buffer of `r` and the device address and length of `r`, if it lies inside it.
    fn buf_range(&self, r: BufRef) -> Result<(&DmaBuf, (u64, u32))> {
        let b = self.bufs.get(r.buf).ok_or(EINVAL)?;
        let end = r.off.checked_add(r.len).ok_or(EINVAL)?;
        if end > b.len {
            return Err(EINVAL);
        }
        Ok((b, (b.dma(r.off), u32::try_from(r.len).map_err(|_| EINVAL)?)))
    }

    /// Posts a SEND from send slot `slot`: `head` (copied into the buffer range `at`, of its
    /// length), then piece `piece` of `keeper`'s data (if any), with `flags`
    /// ([`SEND_SIGNALED`]...). `keeper` stays in the slot until [`Qp::complete_send`] (or the
    /// object goes). The range is the slot's to use while the request is out: the owner gives
    /// each slot a range of its own.
    pub(crate) fn post_send<const N: usize>(
        &self,
        slot: u32,
        at: BufRef,
        head: &[u8; N],
        keeper: K,
        piece: Option<usize>,
        flags: i32,
    ) -> Result {
        let cqe = self.cqe(TAG_SEND | slot).ok_or(EINVAL)?;
        if slot >= self.nsend {
            return Err(EINVAL);
        }
        let (buf, head_sge) = self.buf_range(BufRef { len: N, ..at })?;
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
        let out = Outstanding {
            mapped: map.map_or(Mapped::Nothing, |m| Mapped::One { _map: m }),
            keeper,
        };
        self.post_in_slot(slot, out, |id| {
            buf.write(at.off, head)?;
            // SAFETY: The QP exists (`post_in_slot` runs this with the QP open); the cqe, the
            // header buffer and the data mapping (kept in the slot) outlive the request.
            unsafe { id.post_send(cqe, head_sge, data, self.lkey, flags) }
        })
    }

    /// Posts a send-side work request from send slot `slot`: `post` posts it, called with the
    /// `slots` lock held once the QP is known open (so it exists: type invariant) and the slot
    /// free; if it was posted, what it uses (`out`) goes into the slot under the same lock,
    /// before its completion looks for it (`close` takes that lock too). Otherwise `out` is
    /// dropped: its mappings, then its keeper.
    fn post_in_slot(
        &self,
        slot: u32,
        out: Outstanding<K>,
        post: impl FnOnce(CmIdRef<'_>) -> Result,
    ) -> Result {
        let mut slots = self.slots.lock();
        let st = slots.free_send(slot)?;
        post(self.idref())?;
        *st = Some(out);
        Ok(())
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
        let out = Outstanding {
            mapped: Mapped::Pieces { _maps: maps },
            keeper,
        };
        self.post_in_slot(slot, out, |id| {
            // SAFETY: As in `post_send`: the QP exists, the cqe lives in this object, and the
            // mappings stay in the slot until the completion or the drain.
            unsafe { id.post_rdma(cqe, &addrs[..n], &lens[..n], self.lkey, wr, remote, flags) }
        })?;
        Ok(bytes)
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
                return Err(crate::bindings::net::enotconn());
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
            return Err(crate::bindings::net::etimedout());
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
        let (_, (addr, len)) = self.buf_range(into)?;
        let out = Outstanding {
            mapped: Mapped::Nothing,
            keeper,
        };
        let read = RdmaWr::Read;
        self.post_in_slot(slot, out, |id| {
            // SAFETY: As in `post_send`: the QP exists and the cqe lives in this object; the
            // one local piece is inside one of the QP's buffers (checked), which live as long.
            unsafe { id.post_rdma(cqe, &[addr], &[len], self.lkey, &read, remote, flags) }
        })
    }

    /// The SEND of slot `slot` completed (or was flushed): returns its keeper.
    pub(crate) fn complete_send(&self, slot: u32) -> Option<K> {
        let st = {
            let mut slots = self.slots.lock();
            slots.completed = slots.completed.wrapping_add(1);
            slots.sends.get_mut(slot as usize)?.take()?
        };
        let Outstanding { mapped, keeper } = st;
        // Unmapped first: the keeper may own the pages.
        drop(mapped);
        Some(keeper)
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
        let (_, head_sge) = self.buf_range(head)?;
        let map = DmaMapping::page(self.dev, &page, 0, len, false)?;
        let data = (map.addr(), u32::try_from(len).map_err(|_| EINVAL)?);
        let mut slots = self.slots.lock();
        if !slots.open {
            return Err(crate::bindings::net::enotconn());
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
    pub(crate) fn complete_recv<const N: usize>(
        &self,
        slot: u32,
        head: &mut [u8; N],
    ) -> Option<Page> {
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
