// SPDX-License-Identifier: GPL-2.0

//! Messages on their way out, messages that arrived, and their payloads.
//!
//! C counterpart: `net/rds/message.c`, `net/rds/page.c` and the `rds_message` /
//! `rds_incoming` structs of `net/rds/rds.h`.
//!
//! A [`Message`] is built by `sendmsg` (or by the core: pongs, congestion maps): the payload is
//! copied from user space once, into the pages of a [`Payload`] that is never written again.
//! It sits on its connection's send queue until the transport takes it, then on the
//! retransmit list until the peer acknowledges it. What crosses to the receiving side is its
//! wire header ([`Message::header`]) and its payload; the receiving side builds an
//! [`Incoming`] from the header alone (over loopback it shares the sender's [`Payload`]; a
//! network transport hands over its own receive fragments, [`Payload::lent`]).

use crate::bindings::mm::{page_read, page_write, PinCharge, UserPage, UserPages};
use crate::bindings::net::{emsgsize, MsgHdr, SockRef};
use crate::bindings::sync::{
    new_spinlock_bh, new_spinlock_pc, recycle_unique, ProcessCtx, SpinLockBh, SpinLockPc,
};
use crate::bindings::tcp::SkbChain;
use crate::proto::{
    msg_charge, Addr, Ext, Header, SpareStack, Stat, FLAG_ACK_REQUIRED, FLAG_CONG_BITMAP,
    FLAG_RETRANSMITTED,
};
use crate::rdma::{Notifier, RdmaOp};
use crate::send::WaitingOp;
use crate::socket::Rds;
use crate::stats;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use kernel::{
    alloc::Flags,
    list::{
        impl_has_list_links, impl_list_arc_safe, impl_list_item, AtomicTracker, ListArc, ListLinks,
        TryNewListArc,
    },
    page::{Page, PAGE_SIZE},
    prelude::*,
    sync::{Arc, UniqueArc},
};

// The payload's pages hold `PAGE_SIZE` bytes each, and the RDMA rules of `proto` count pages
// of the same size: they must agree.
const _: () = assert!(PAGE_SIZE == crate::proto::PAGE_SIZE as usize);

/// Where a stream transport writes received payload bytes ([`PayloadBuilder::target`]).
pub(crate) enum Target<'a> {
    /// Bytes of kernel memory.
    Bytes(&'a mut [u8]),
    /// `len` bytes of a page at `off`.
    Page(&'a Page, usize, usize),
}

/// The payload of a message being received from a byte stream (TCP), filled in order as the
/// bytes arrive: inside itself up to [`INLINE_MAX`] bytes, in one buffer up to a page, else in
/// pages, all allocated when the header arrives (so that filling never fails for memory; a
/// peer that announces a message and sends nothing makes its connection hold at most 1 MiB).
///
/// # Invariants
///
/// `filled <= len`; the first `filled` bytes are written; for `Pages`, there are
/// `ceil(len / PAGE_SIZE)` pages, packed; for `Small`, the buffer is `len` bytes long.
pub(crate) struct PayloadBuilder {
    len: usize,
    filled: usize,
    store: BuildStore,
}

enum BuildStore {
    Inline([u8; INLINE_MAX]),
    Small(KVec<u8>),
    Pages(KVec<Page>),
}

impl PayloadBuilder {
    /// Room for `len` bytes, allocated with `flags`.
    pub(crate) fn new(len: usize, flags: Flags) -> Result<Self> {
        let store = if len <= INLINE_MAX {
            BuildStore::Inline([0; INLINE_MAX])
        } else if len <= PAGE_SIZE {
            BuildStore::Small(KVec::from_elem(0u8, len, flags)?)
        } else {
            let n = len.div_ceil(PAGE_SIZE);
            let mut pages = KVec::with_capacity(n, flags)?;
            for _ in 0..n {
                pages.push(Page::alloc_page(flags)?, flags)?;
            }
            BuildStore::Pages(pages)
        };
        // INVARIANT: nothing filled yet; a small buffer has `len` bytes, the pages are all
        // there.
        Ok(Self {
            len,
            filled: 0,
            store,
        })
    }

    /// The bytes still to be filled.
    pub(crate) fn remaining(&self) -> usize {
        self.len - self.filled
    }

    /// Where the next bytes go, at most `n` of them (fewer where a page ends). The caller
    /// writes all of the target and then calls [`PayloadBuilder::advance`] with its length.
    pub(crate) fn target(&mut self, n: usize) -> Result<Target<'_>> {
        let at = self.filled;
        let n = n.min(self.len - at);
        match &mut self.store {
            BuildStore::Inline(buf) => buf.get_mut(at..at + n).map(Target::Bytes).ok_or(EINVAL),
            BuildStore::Small(buf) => buf.get_mut(at..at + n).map(Target::Bytes).ok_or(EINVAL),
            BuildStore::Pages(pages) => {
                let idx = at / PAGE_SIZE;
                let off = at % PAGE_SIZE;
                let page = pages.get(idx).ok_or(EINVAL)?;
                Ok(Target::Page(page, off, n.min(PAGE_SIZE - off)))
            }
        }
    }

    /// The last target's `n` bytes were written.
    pub(crate) fn advance(&mut self, n: usize) {
        // INVARIANT: the caller wrote the target, which is inside `len`.
        self.filled = (self.filled + n).min(self.len);
    }

    /// The payload, once all of it was filled (`EINVAL` before).
    pub(crate) fn finish(self) -> Result<Payload> {
        if self.filled != self.len {
            return Err(EINVAL);
        }
        let store = match self.store {
            BuildStore::Inline(buf) => Store::Inline(buf),
            BuildStore::Small(buf) => Store::Small(buf),
            BuildStore::Pages(pages) => Store::Own(pages),
        };
        // INVARIANT: all `len` bytes were filled in the layout `Payload` keeps for the store
        // (inline up to `INLINE_MAX`; one buffer of exactly `len` bytes up to a page, below
        // `SMALL_MAX`; `ceil(len / PAGE_SIZE)` packed pages).
        Ok(Payload {
            len: self.len,
            store,
        })
    }
}

/// Fragments of a received message that belong to a transport (its receive buffers): the
/// transport takes them back when the last user of the payload drops it.
pub(crate) trait LentFrags: Send + Sync {
    /// The fragments in order: `f(page, offset, len)` for each, until `f` fails.
    fn try_for_each(&self, f: &mut dyn FnMut(&Page, usize, usize) -> Result) -> Result;
}

/// The bit of `MsgBody::tx_mark` that says it is set.
const TX_MARK_SET: u64 = 1 << 32;

/// Payloads up to this size live in one physically contiguous kernel buffer (`kmalloc`) rather
/// than in pages of their own (as C carves small payloads out of a shared page,
/// `rds_page_remainder_alloc`): one allocation instead of a page vector and a page allocation
/// per 4 KiB. Above one page the buffer is a higher-order allocation that may fail under
/// fragmentation; the payload then takes pages after all.
const SMALL_MAX: usize = 4 * PAGE_SIZE;

/// Payloads up to this size (acks, pings, small requests) live inside the [`Payload`] itself,
/// and so inside the message that holds it: no allocation of their own.
const INLINE_MAX: usize = 64;

/// Payload memory kept from a message for the next one made in the same memory (a pool
/// spare's): a buffer for a payload of at most [`SMALL_MAX`] bytes, and the buffers of a
/// larger payload ([`SMALL_MAX`] bytes each, the last one perhaps shorter).
pub(crate) struct SpareBufs {
    small: KVec<u8>,
    chunks: KVec<KVec<u8>>,
}

/// The bytes `bufs` can hold in all.
fn capacity_of(bufs: &[KVec<u8>]) -> usize {
    bufs.iter().map(|c| c.capacity()).sum()
}

impl SpareBufs {
    /// No memory kept.
    pub(crate) const fn new() -> Self {
        Self {
            small: KVec::new(),
            chunks: KVec::new(),
        }
    }

    /// Whether this memory suits a payload of `len` bytes: any does for one that lives inside
    /// its message (which leaves the buffers with the spare); a larger one needs buffers it
    /// fits in. (Asking tiny payloads for a spare without buffers made each of them scan the
    /// whole pool once every spare had kept one: rds-stress 1 KiB depth 8 lost 1.3%.)
    fn suits(&self, len: usize) -> bool {
        if len <= INLINE_MAX {
            true
        } else if len <= SMALL_MAX {
            self.small.capacity() >= len
        } else {
            self.chunk_bytes() >= len
        }
    }

    /// The bytes the large payload's buffers can hold.
    fn chunk_bytes(&self) -> usize {
        capacity_of(&self.chunks)
    }

    /// Keeps the memory of `data` (a payload that is done) when it is larger than what is
    /// kept already; `small` buffers only up to `small_max` bytes.
    #[inline]
    fn keep(&mut self, data: Payload, small_max: usize) {
        match data.store {
            Store::Small(buf) => {
                if buf.capacity() > self.small.capacity() && buf.capacity() <= small_max {
                    crate::bindings::mm::free_vec(core::mem::replace(&mut self.small, buf));
                }
            }
            Store::Chunks(chunks) => self.keep_chunks(chunks),
            _ => {}
        }
    }

    /// [`SpareBufs::keep`] for a large payload's buffers (out of line: the small messages'
    /// path stays short).
    #[inline(never)]
    fn keep_chunks(&mut self, chunks: KVec<KVec<u8>>) {
        if capacity_of(&chunks) > self.chunk_bytes() {
            crate::bindings::mm::free_vec(core::mem::replace(&mut self.chunks, chunks));
        }
    }

    /// The large payload's buffers, when they fit a payload of `len` bytes exactly: as many
    /// buffers as `len` needs, each with room for its part. Emptied (ready to be filled).
    fn take_chunks_for(&mut self, len: usize) -> Option<KVec<KVec<u8>>> {
        let n = len.div_ceil(SMALL_MAX);
        if len <= SMALL_MAX || self.chunks.len() != n {
            return None;
        }
        let mut left = len;
        for c in self.chunks.iter() {
            let part = left.min(SMALL_MAX);
            if c.capacity() < part {
                return None;
            }
            left -= part;
        }
        let mut chunks = core::mem::replace(&mut self.chunks, KVec::new());
        for c in chunks.iter_mut() {
            crate::bindings::mm::clear_bytes(c);
        }
        Some(chunks)
    }
}

/// One piece of a payload, as [`Payload::try_for_each_frag`] hands it out.
pub(crate) enum Frag<'a> {
    /// `len` bytes at `offset` in a page (the payload's own page or a transport's fragment).
    Page(&'a Page, usize, usize),
    /// Bytes in a kernel buffer (a small payload, or a tiny one inside its message, which
    /// lives in a `kmalloc`ed `Arc`); physically contiguous, so one fragment for a device too.
    Bytes(&'a [u8]),
    /// `len` bytes at `offset` in a page of a zero-copy sender's memory ([`ZcData`]).
    User(UserPage<'a>, usize, usize),
}

impl Frag<'_> {
    /// The fragment's length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Frag::Page(_, _, n) | Frag::User(_, _, n) => *n,
            Frag::Bytes(b) => b.len(),
        }
    }

    /// Copies bytes of the fragment from `offset` into `dst` (`EINVAL` when they are not all
    /// in the fragment).
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        let end = offset.checked_add(dst.len()).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        match self {
            Frag::Page(page, off, _) => page_read(page, off + offset, dst),
            Frag::User(page, off, _) => page.read(off + offset, dst),
            Frag::Bytes(b) => {
                dst.copy_from_slice(b.get(offset..end).ok_or(EINVAL)?);
                Ok(())
            }
        }
    }
}

/// Where a payload's bytes are.
enum Store {
    /// A tiny payload (at most [`INLINE_MAX`] bytes), its bytes first.
    Inline([u8; INLINE_MAX]),
    /// A small payload (at most [`SMALL_MAX`] bytes) in one physically contiguous kernel
    /// buffer.
    Small(KVec<u8>),
    /// A larger payload in buffers of [`SMALL_MAX`] bytes, the last one shorter.
    Chunks(KVec<KVec<u8>>),
    /// Pages the core allocated: the bytes packed from the start of the first page,
    /// `PAGE_SIZE` per page.
    Own(KVec<Page>),
    /// A transport's fragments, given back when dropped.
    Lent(Arc<dyn LentFrags>),
    /// Another message's payload (loopback's network-like path shares the sender's message
    /// with the receiver's).
    Msg(Arc<Message>),
    /// A zero-copy sender's pages.
    User(ZcData),
    /// Received bytes in the skbs they arrived in (a stream transport's, without a copy).
    Skbs(SkbChain),
}

/// The payload of a zero-copy send (`MSG_ZEROCOPY`): the sender's pages, and its
/// notification, which tells the sender the kernel is done with them when it is dropped,
/// after the pages were let go (C: `rds_znotifier`).
pub(crate) struct ZcData {
    /// The pages.
    pub(crate) pages: UserPages,
    /// Their charge to the sender's locked memory (held until they are let go).
    pub(crate) _charge: PinCharge,
    /// The notification.
    pub(crate) done: crate::send::ZcDone,
}

/// The bytes of one message, in pages (C: the data scatterlist of `rds_message`), immutable
/// once built. Dropping it frees (or gives back) the pages, which any context may do.
///
/// # Invariants
///
/// `len` is the number of bytes `store` holds (for `Inline`, at most [`INLINE_MAX`], the first
/// `len` bytes of the array; for `Small`, the buffer's length, at most
/// [`SMALL_MAX`]; for `Chunks`, buffers of [`SMALL_MAX`] bytes whose lengths add up to `len`;
/// for `Own`, `ceil(len / PAGE_SIZE)` pages; for `Msg`, the other message's payload length;
/// for `Skbs`, the bytes of its skbs).
pub(crate) struct Payload {
    len: usize,
    store: Store,
}

/// The size of a payload's segments ([`Payload::segment`]).
const SEG: usize = 4096;

impl Payload {
    /// An empty payload.
    pub(crate) fn empty() -> Self {
        // INVARIANT: no bytes.
        Self {
            len: 0,
            store: Store::Inline([0; INLINE_MAX]),
        }
    }

    /// Pages for `len` bytes.
    fn alloc(len: usize, flags: Flags) -> Result<KVec<Page>> {
        let n = len.div_ceil(PAGE_SIZE);
        let mut pages = KVec::with_capacity(n, flags)?;
        for _ in 0..n {
            pages.push(Page::alloc_page(flags)?, flags)?;
        }
        Ok(pages)
    }

    /// Empty buffers with room for `len` bytes in chunks of [`SMALL_MAX`], charged to the
    /// caller's memory cgroup; `None` when a higher-order allocation fails (the caller falls
    /// back to pages).
    fn alloc_chunks(len: usize) -> Option<KVec<KVec<u8>>> {
        let n = len.div_ceil(SMALL_MAX);
        let mut chunks = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT).ok()?;
        let mut left = len;
        while left > 0 {
            let size = left.min(SMALL_MAX);
            let c = KVec::with_capacity(size, GFP_KERNEL_ACCOUNT | __GFP_NOWARN).ok()?;
            chunks.push(c, GFP_KERNEL_ACCOUNT).ok()?;
            left -= size;
        }
        Some(chunks)
    }

    /// Replaces the payload (whose memory is dropped: a spare's payload is empty, its memory
    /// is in `spare`) with `len` bytes of a `sendmsg`'s payload: inside the payload up to
    /// [`INLINE_MAX`] bytes, else in the memory `spare` keeps from an earlier message (its
    /// small buffer up to [`SMALL_MAX`] bytes when it has room, its large payload's buffers
    /// when they fit `len`), else in new memory. New memory is charged to the caller's memory
    /// cgroup. `EFAULT` when user memory faults.
    pub(crate) fn fill_from_user(
        &mut self,
        msg: &mut MsgHdr<'_>,
        len: usize,
        spare: &mut SpareBufs,
    ) -> Result {
        let inline = Self::inline_with(len, |dst| {
            if msg.copy_into_slice(dst) == len {
                Ok(())
            } else {
                Err(EFAULT)
            }
        });
        if let Some(p) = inline {
            *self = p?;
            return Ok(());
        }
        if len <= SMALL_MAX && spare.small.capacity() >= len {
            let mut buf = core::mem::replace(&mut spare.small, KVec::new());
            crate::bindings::mm::clear_bytes(&mut buf);
            if msg.copy_into_vec(&mut buf, len)? != len {
                spare.small = buf;
                return Err(EFAULT);
            }
            stats::inc(Stat::RsPayloadRecycled);
            // INVARIANT: the buffer holds the `len` bytes copied.
            *self = Self {
                len,
                store: Store::Small(buf),
            };
            return Ok(());
        }
        if len > SMALL_MAX {
            if let Some(r) = self.fill_from_user_into_spare_chunks(msg, len, spare) {
                return r;
            }
        }
        stats::inc(Stat::RsPayloadAlloc);
        *self = Self::from_user(msg, len)?;
        Ok(())
    }

    /// [`Payload::fill_from_user`] into the large payload's buffers `spare` keeps, when they
    /// fit `len`; `None` when they do not (out of line: the small messages' path stays
    /// short).
    #[inline(never)]
    fn fill_from_user_into_spare_chunks(
        &mut self,
        msg: &mut MsgHdr<'_>,
        len: usize,
        spare: &mut SpareBufs,
    ) -> Option<Result> {
        let mut chunks = spare.take_chunks_for(len)?;
        let mut left = len;
        for c in chunks.iter_mut() {
            let n = left.min(SMALL_MAX);
            match msg.copy_into_vec(c, n) {
                Ok(got) if got == n => left -= n,
                Ok(_) => {
                    spare.chunks = chunks;
                    return Some(Err(EFAULT));
                }
                Err(e) => return Some(Err(e)),
            }
        }
        stats::inc(Stat::RsPayloadRecycled);
        // INVARIANT: the buffers hold the `len` bytes copied, `SMALL_MAX` each in order
        // (`take_chunks_for` gave as many as `len` needs, each with room for its part).
        *self = Self {
            len,
            store: Store::Chunks(chunks),
        };
        Some(Ok(()))
    }

    /// Copies `len` bytes of a `sendmsg`'s payload into new memory, charged to the caller's
    /// memory cgroup; `EFAULT` when user memory faults.
    fn from_user(msg: &mut MsgHdr<'_>, len: usize) -> Result<Self> {
        let inline = Self::inline_with(len, |dst| {
            if msg.copy_into_slice(dst) == len {
                Ok(())
            } else {
                Err(EFAULT)
            }
        });
        if let Some(p) = inline {
            return p;
        }
        let small = if len <= PAGE_SIZE {
            Some(KVec::with_capacity(len, GFP_KERNEL_ACCOUNT)?)
        } else if len <= SMALL_MAX {
            KVec::with_capacity(len, GFP_KERNEL_ACCOUNT | __GFP_NOWARN).ok()
        } else {
            None
        };
        if let Some(mut buf) = small {
            if msg.copy_into_vec(&mut buf, len)? != len {
                return Err(EFAULT);
            }
            // INVARIANT: the buffer holds the `len` bytes copied.
            return Ok(Self {
                len,
                store: Store::Small(buf),
            });
        }
        if let Some(mut chunks) = Self::alloc_chunks(len) {
            for c in chunks.iter_mut() {
                let n = c.capacity();
                if msg.copy_into_vec(c, n)? != n {
                    return Err(EFAULT);
                }
            }
            // INVARIANT: the chunks hold the `len` bytes copied, in order.
            return Ok(Self {
                len,
                store: Store::Chunks(chunks),
            });
        }
        Self::from_user_to_pages(msg, len)
    }

    /// Copies `len` bytes of a `sendmsg`'s payload into new pages, charged to the caller's
    /// memory cgroup (for a transport that hands pages over by reference, or when kernel
    /// buffers cannot be had); `EFAULT` when user memory faults.
    pub(crate) fn from_user_to_pages(msg: &mut MsgHdr<'_>, len: usize) -> Result<Self> {
        let pages = Self::alloc(len, GFP_KERNEL_ACCOUNT)?;
        let mut left = len;
        for page in pages.iter() {
            let n = left.min(PAGE_SIZE);
            if msg.copy_into_page(page, 0, n)? != n {
                return Err(EFAULT);
            }
            left -= n;
        }
        // INVARIANT: `len` bytes were copied into `ceil(len / PAGE_SIZE)` pages.
        Ok(Self {
            len,
            store: Store::Own(pages),
        })
    }

    /// Copies `bytes` into a new payload.
    pub(crate) fn from_bytes(bytes: &[u8], flags: Flags) -> Result<Self> {
        let inline = Self::inline_with(bytes.len(), |dst| {
            dst.copy_from_slice(bytes);
            Ok(())
        });
        if let Some(p) = inline {
            return p;
        }
        if bytes.len() <= SMALL_MAX {
            let mut buf = KVec::with_capacity(bytes.len(), flags)?;
            buf.extend_from_slice(bytes, flags)?;
            // INVARIANT: the buffer holds the bytes.
            return Ok(Self {
                len: bytes.len(),
                store: Store::Small(buf),
            });
        }
        let mut pages = Self::alloc(bytes.len(), flags)?;
        for (page, chunk) in pages.iter_mut().zip(bytes.chunks(PAGE_SIZE)) {
            page_write(page, 0, chunk)?;
        }
        // INVARIANT: the bytes fill the pages in order.
        Ok(Self {
            len: bytes.len(),
            store: Store::Own(pages),
        })
    }

    /// Copies the first `len` bytes of `page` (at most a page) into a new payload: inside
    /// itself when small enough, else in one buffer. For a transport that gives its receive
    /// page back to the device at once rather than lending it to the message.
    pub(crate) fn from_page(page: &Page, len: usize, flags: Flags) -> Result<Self> {
        if len > PAGE_SIZE {
            return Err(EINVAL);
        }
        if let Some(p) = Self::inline_with(len, |dst| page_read(page, 0, dst)) {
            return p;
        }
        let mut buf = KVec::from_elem(0u8, len, flags)?;
        page_read(page, 0, &mut buf)?;
        // INVARIANT: the buffer holds the `len` bytes (`len` is at most a page, below
        // `SMALL_MAX`).
        Ok(Self {
            len,
            store: Store::Small(buf),
        })
    }

    /// A payload of `len` bytes inside itself, which `fill` writes (it is handed exactly `len`
    /// bytes); `None` when `len` is too large for that.
    fn inline_with(len: usize, fill: impl FnOnce(&mut [u8]) -> Result) -> Option<Result<Self>> {
        let mut buf = [0u8; INLINE_MAX];
        let dst = buf.get_mut(..len)?;
        Some(fill(dst).map(|()| {
            // INVARIANT: `fill` wrote the first `len` bytes.
            Self {
                len,
                store: Store::Inline(buf),
            }
        }))
    }

    /// The bytes of a payload kept in one piece of kernel memory (inside itself or in one
    /// buffer), `None` for the others.
    fn contiguous(&self) -> Option<&[u8]> {
        match &self.store {
            Store::Inline(buf) => buf.get(..self.len),
            Store::Small(buf) => Some(buf),
            _ => None,
        }
    }

    /// The payload of `m`, shared with it (the receiver's copy of a loopback message on the
    /// network-like path).
    pub(crate) fn shared(m: Arc<Message>) -> Self {
        // INVARIANT: the same bytes as `m`'s payload.
        Self {
            len: m.data.len(),
            store: Store::Msg(m),
        }
    }

    /// A zero-copy sender's payload.
    pub(crate) fn user(data: ZcData) -> Self {
        // INVARIANT: the pages hold `len` bytes.
        Self {
            len: data.pages.len(),
            store: Store::User(data),
        }
    }

    /// Whether this is a zero-copy sender's payload.
    pub(crate) fn is_zcopy(&self) -> bool {
        matches!(self.store, Store::User(_))
    }

    /// A zero-copy payload's sender is told when the kernel is done with its pages, from now
    /// on ([`crate::send::ZcDone::arm`]); nothing for another payload.
    pub(crate) fn arm_zcopy(&self) {
        if let Store::User(z) = &self.store {
            z.done.arm();
        }
    }

    /// A received payload in the skbs it arrived in.
    pub(crate) fn skbs(chain: SkbChain) -> Self {
        // INVARIANT: the chain holds `len` bytes.
        Self {
            len: chain.len(),
            store: Store::Skbs(chain),
        }
    }

    /// A payload of `len` bytes in a transport's fragments.
    pub(crate) fn lent(frags: Arc<dyn LentFrags>, len: usize) -> Self {
        // INVARIANT: the transport vouches that its fragments hold `len` bytes.
        Self {
            len,
            store: Store::Lent(frags),
        }
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// A copy in new memory (for a receiver that must not hold the sender's message).
    pub(crate) fn copy(&self, flags: Flags) -> Result<Self> {
        if let Some(p) = Self::inline_with(self.len, |dst| self.read(0, dst)) {
            return p;
        }
        if self.len <= SMALL_MAX {
            let mut buf = KVec::from_elem(0u8, self.len, flags)?;
            self.read(0, &mut buf)?;
            // INVARIANT: the buffer holds the payload's bytes.
            return Ok(Self {
                len: self.len,
                store: Store::Small(buf),
            });
        }
        let mut pages = Self::alloc(self.len, flags)?;
        let mut chunk = [0u8; 256];
        for (i, page) in pages.iter_mut().enumerate() {
            let start = i * PAGE_SIZE;
            let end = (start + PAGE_SIZE).min(self.len);
            let mut at = start;
            while at < end {
                let n = (end - at).min(chunk.len());
                let c = chunk.get_mut(..n).ok_or(EINVAL)?;
                self.read(at, c)?;
                page_write(page, at - start, c)?;
                at += n;
            }
        }
        // INVARIANT: the pages hold the payload's bytes, packed.
        Ok(Self {
            len: self.len,
            store: Store::Own(pages),
        })
    }

    /// The `idx`-th 4 KiB segment of the payload (the data of one fragment of a network
    /// transport), `None` past the end. Payloads of the core are segmented exactly; a
    /// transport's lent fragments (received, never sent) have no segments.
    pub(crate) fn segment(&self, idx: usize) -> Option<Frag<'_>> {
        let start = idx.checked_mul(SEG)?;
        if start >= self.len {
            return None;
        }
        let n = (self.len - start).min(SEG);
        match &self.store {
            Store::Inline(_) | Store::Small(_) => {
                self.contiguous()?.get(start..start + n).map(Frag::Bytes)
            }
            Store::Chunks(chunks) => {
                let c = chunks.get(start / SMALL_MAX)?;
                let at = start % SMALL_MAX;
                c.get(at..at + n).map(Frag::Bytes)
            }
            Store::Own(pages) => pages.get(idx).map(|p| Frag::Page(p, 0, n)),
            Store::Lent(_) | Store::User(_) | Store::Skbs(_) => None,
            Store::Msg(m) => m.data.segment(idx),
        }
    }

    /// The fragment holding byte `offset` and the byte's offset in it (for a stream transport,
    /// which sends a payload from any offset on); `None` past the end.
    pub(crate) fn frag_at(&self, offset: usize) -> Option<(Frag<'_>, usize)> {
        match &self.store {
            Store::User(z) => z
                .pages
                .piece_at(offset)
                .map(|(p, o, n)| (Frag::User(p, o, n), 0)),
            Store::Msg(m) => m.data.frag_at(offset),
            _ => self.segment(offset / SEG).map(|f| (f, offset % SEG)),
        }
    }

    /// Calls `f` for each fragment in order, until it fails.
    pub(crate) fn try_for_each_frag(&self, mut f: impl FnMut(Frag<'_>) -> Result) -> Result {
        match &self.store {
            Store::Inline(_) | Store::Small(_) => match self.contiguous() {
                Some([]) => Ok(()),
                Some(b) => f(Frag::Bytes(b)),
                None => Err(EINVAL),
            },
            Store::Chunks(chunks) => chunks.iter().try_for_each(|c| f(Frag::Bytes(c))),
            Store::Own(pages) => {
                let mut left = self.len;
                for page in pages.iter() {
                    let n = left.min(PAGE_SIZE);
                    f(Frag::Page(page, 0, n))?;
                    left -= n;
                }
                Ok(())
            }
            Store::Lent(frags) => {
                frags.try_for_each(&mut |page, off, n| f(Frag::Page(page, off, n)))
            }
            Store::Msg(m) => m.data.try_for_each_frag(f),
            Store::User(z) => z.pages.try_for_each(|p, off, n| f(Frag::User(p, off, n))),
            // Received only: read and copied out by `read` and `copy_to_user`.
            Store::Skbs(_) => Err(EINVAL),
        }
    }

    /// Copies the first `max` bytes (at most) to a `recvmsg`'s iovecs; returns the bytes
    /// copied, short when user memory faults or the iovecs fill up.
    pub(crate) fn copy_to_user(&self, msg: &mut MsgHdr<'_>, max: usize) -> usize {
        if let Store::Skbs(chain) = &self.store {
            return msg.copy_from_skbs(chain, max.min(self.len));
        }
        if let Some(b) = self.contiguous() {
            // One buffer (a small payload): one copy, as the walk below would make.
            let n = b.len().min(max.min(self.len));
            return match b.get(..n) {
                Some(b) if n > 0 => msg.copy_from_slice(b),
                _ => 0,
            };
        }
        let mut left = max.min(self.len);
        let mut copied = 0;
        let _ = self.try_for_each_frag(|frag| {
            let n = frag.len().min(left);
            if n == 0 {
                return Err(EAGAIN);
            }
            let got = match frag {
                Frag::Page(page, off, _) => msg.copy_from_page(page, off, n)?,
                Frag::User(page, off, _) => msg.copy_from_user_page(page, off, n)?,
                Frag::Bytes(b) => msg.copy_from_slice(b.get(..n).ok_or(EINVAL)?),
            };
            copied += got;
            left -= got;
            if got != n {
                return Err(EFAULT);
            }
            Ok(())
        });
        copied
    }

    /// Copies bytes from `offset` into `dst`; `EINVAL` when they are not all there.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        if let Store::Skbs(chain) = &self.store {
            return chain.read(offset, dst);
        }
        let end = offset.checked_add(dst.len()).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let mut at = 0usize;
        let mut done = 0usize;
        self.try_for_each_frag(|f| {
            let frag = at..at + f.len();
            at += f.len();
            let lo = frag.start.max(offset + done);
            let hi = frag.end.min(end);
            if lo < hi {
                let d = dst.get_mut(lo - offset..hi - offset).ok_or(EINVAL)?;
                f.read(lo - frag.start, d)?;
                done = hi - offset;
            }
            Ok(())
        })?;
        if done == dst.len() {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }
}

/// A message: what a socket sends, through its connection's send queue and retransmit list,
/// and what a socket receives, on its receive queue (C: `rds_message` with its embedded
/// `m_inc`, and `rds_incoming`). Over loopback the receiver gets the sender's message itself
/// (with no header written or parsed); a network transport builds the receiving side's from
/// the header that arrived, in memory it allocated beforehand ([`RxSlot`]).
///
/// A message a socket sends comes from the socket's pool of spares ([`MsgPool`]) when it has
/// one, and goes back there with its payload buffer when its last user (the receiver's
/// `recvmsg`, over loopback) is done with it ([`Message::recycle`]), so that a socket sending
/// steadily allocates nothing per message.
///
/// Lock order: `owner` before `RdsSocket::data`.
#[pin_data]
pub(crate) struct Message {
    /// The links of the connection's send queue or retransmit list (one at a time).
    #[pin]
    links: ListLinks<0>,
    /// The links of the receiving socket's queue.
    #[pin]
    rx_links: ListLinks<1>,
    /// Whether the message is on a receive queue (or on its way to one).
    #[pin]
    rx_tracker: AtomicTracker<1>,
    /// The sending socket while the message counts against its send buffer (C: `m_rs`, under
    /// `m_rs_lock`), and the operation's notifier.
    #[pin]
    owner: SpinLockBh<Owner>,
    /// Everything else (read through [`Deref`](core::ops::Deref)).
    body: MsgBody,
}

// `body` is declared without `#[pin]` and nothing points into it: a spare message (uniquely
// owned, on no list) is rewritten through it.
crate::bindings::sync::impl_unpinned_field!(Message, body: MsgBody, body_mut);

/// The fields of a [`Message`] other than its links and its owner.
///
/// # Invariants
///
/// `len == data.len()`; `charge == msg_charge(len)` is what the message counts against its
/// sender's send buffer while the owner holds the sender, and against the receiver's receive
/// buffer while it is queued there.
pub(crate) struct MsgBody {
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Payload length (`h_len`).
    pub(crate) len: u32,
    /// What the message counts against its sender's send buffer and its receiver's receive
    /// buffer.
    pub(crate) charge: u32,
    /// The payload.
    pub(crate) data: Payload,
    /// The identity of the sending socket ([`crate::bindings::net::Sock::id`]), 0 for none or
    /// for a message that arrived from a network.
    pub(crate) owner_id: usize,
    /// The source address (the sender's bound address).
    pub(crate) saddr: Addr,
    /// The destination address.
    pub(crate) daddr: Addr,
    /// The connection's type of service.
    pub(crate) tos: u8,
    /// The RDMA or atomic operation to perform before the message is delivered.
    pub(crate) op: Option<KBox<RdmaOp>>,
    /// A registration cookie for the receiver (`RDS_CMSG_RDMA_DEST`), 0 for none.
    pub(crate) rdma_cookie: u64,
    /// Sequence number, assigned when queued on the connection (or when it arrived).
    seq: AtomicU64,
    /// Where a stream transport put the end of the message: TCP's sequence number just past
    /// its last byte, with [`TX_MARK_SET`] when set (C: `m_ack_seq`, `RDS_MSG_HAS_ACK_SEQ`).
    /// Cleared when the message goes to the retransmit list.
    tx_mark: AtomicU64,
    /// Header flags (`RDS_FLAG_*`).
    flags: AtomicU8,
    /// When it was queued at the receiver (nanoseconds of real time), 0 when `SO_TIMESTAMP`
    /// was off.
    pub(crate) rx_tstamp: AtomicI64,
    /// When it was queued at the receiver (`local_clock`), for `SO_RDS_MSG_RXPATH_LATENCY`
    /// (C: `i_rx_lat_trace[RDS_MSG_RX_END]`); 0 when the receiver traces nothing.
    pub(crate) rx_end: AtomicU64,
    /// The pool the message's memory goes back to ([`Message::recycle`]), `None` for memory
    /// that is freed (or kept by the module's [`SlotCache`]).
    pool: Option<Arc<MsgPool>>,
    /// Payload memory kept for the next use of the message's memory (a spare's).
    spare: SpareBufs,
}

impl core::ops::Deref for Message {
    type Target = MsgBody;

    fn deref(&self) -> &MsgBody {
        &self.body
    }
}

/// What [`Message::take_owner`] hands over.
pub(crate) struct Owner {
    /// The sending socket.
    pub(crate) sock: Option<SockRef<Rds>>,
    /// The notifier of the message's operation, if it may need one.
    pub(crate) notifier: Option<ListArc<Notifier>>,
    /// The operation has completed (its id and notification are settled).
    pub(crate) op_done: bool,
    /// The transport posted the operation and reports its completion
    /// ([`crate::send::op_posted`]).
    pub(crate) op_posted: bool,
    /// The operation, when the peer's ack settled the message before the transport reported
    /// the operation complete: it completes at that report (or with `RDS_RDMA_DROPPED` when
    /// the message goes without one).
    pub(crate) waiting: Option<WaitingOp>,
}

impl Owner {
    const fn none() -> Self {
        Self {
            sock: None,
            notifier: None,
            op_done: false,
            op_posted: false,
            waiting: None,
        }
    }
}

/// The parts of a message of the core ([`Message::new`]: pongs, congestion maps).
pub(crate) struct MessageParts {
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Source address (the connection's local address).
    pub(crate) saddr: Addr,
    /// Destination address.
    pub(crate) daddr: Addr,
    /// The connection's type of service.
    pub(crate) tos: u8,
    /// The payload.
    pub(crate) data: Payload,
    /// Header flags (`RDS_FLAG_CONG_BITMAP` for a congestion map).
    pub(crate) flags: u8,
}

/// Where a message a socket sends goes, and where it comes from (the addressing of a
/// `sendmsg`).
#[derive(Clone, Copy)]
pub(crate) struct MsgHead {
    /// Source port (the sender's bound port).
    pub(crate) sport: u16,
    /// Destination port.
    pub(crate) dport: u16,
    /// Source address (the sender's bound address).
    pub(crate) saddr: Addr,
    /// Destination address.
    pub(crate) daddr: Addr,
    /// Type of service.
    pub(crate) tos: u8,
    /// The sending socket's identity.
    pub(crate) owner_id: usize,
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for Message { untracked; }
    impl ListArcSafe<1> for Message { tracked_by rx_tracker: AtomicTracker<1>; }
}
impl_has_list_links! {
    impl HasListLinks<0> for Message { self.links }
    impl HasListLinks<1> for Message { self.rx_links }
}
impl_list_item! {
    impl ListItem<0> for Message { using ListLinks; }
    impl ListItem<1> for Message { using ListLinks; }
}

impl MsgBody {
    /// Sets the addressing of a `sendmsg`'s message and its length, `len`, which its payload
    /// holds (set by the caller); the rest starts over.
    #[inline]
    fn set_head(&mut self, head: MsgHead, len: u32) {
        self.sport = head.sport;
        self.dport = head.dport;
        // INVARIANT: the payload holds `len` bytes (the caller's requirement).
        self.len = len;
        self.charge = msg_charge(len);
        self.owner_id = head.owner_id;
        self.saddr = head.saddr;
        self.daddr = head.daddr;
        self.tos = head.tos;
        self.op = None;
        self.rdma_cookie = 0;
        *self.seq.get_mut() = 0;
        *self.flags.get_mut() = 0;
        *self.rx_tstamp.get_mut() = 0;
        *self.rx_end.get_mut() = 0;
    }

    /// A body with nothing in it yet.
    fn new(data: Payload, pool: Option<Arc<MsgPool>>) -> Result<Self> {
        let len = u32::try_from(data.len()).map_err(|_| emsgsize())?;
        // INVARIANT: `len` is the payload's length and `charge` its charge.
        Ok(Self {
            sport: 0,
            dport: 0,
            len,
            charge: msg_charge(len),
            data,
            owner_id: 0,
            saddr: Addr::default(),
            daddr: Addr::default(),
            tos: 0,
            op: None,
            rdma_cookie: 0,
            seq: AtomicU64::new(0),
            tx_mark: AtomicU64::new(0),
            flags: AtomicU8::new(0),
            rx_tstamp: AtomicI64::new(0),
            rx_end: AtomicU64::new(0),
            pool,
            spare: SpareBufs::new(),
        })
    }
}

impl Message {
    /// Builds a message of the core (pongs, congestion maps): no sender, no operation.
    pub(crate) fn new(p: MessageParts, flags: Flags) -> Result<ListArc<Self>> {
        let mut body = MsgBody::new(p.data, None)?;
        body.sport = p.sport;
        body.dport = p.dport;
        body.saddr = p.saddr;
        body.daddr = p.daddr;
        body.tos = p.tos;
        body.flags = AtomicU8::new(p.flags);
        ListArc::pin_init(
            try_pin_init!(Message {
                links <- ListLinks::new(),
                rx_links <- ListLinks::new(),
                rx_tracker <- AtomicTracker::new(),
                owner <- new_spinlock_bh!(Owner::none(), "Message::owner"),
                body,
            }),
            flags,
        )
    }

    /// The message of a `sendmsg` of `len` bytes to `head`, with its payload copied from the
    /// caller's iovecs: a spare of `pool` when it has one (its payload buffer reused when it is
    /// large enough), else new memory charged to the caller's memory cgroup. `EFAULT` when
    /// user memory faults. With `pages` (the sender's transport hands pages over by reference,
    /// [`crate::transport::Transport::payload_in_pages`]), a payload above a page goes in pages
    /// of its own instead of kernel buffers. The owner, operation and cookie are set later
    /// ([`Message::set_owner`], [`Message::set_rdma`]); until the message is published it is
    /// the caller's alone.
    pub(crate) fn from_user(
        pool: &Arc<MsgPool>,
        head: MsgHead,
        msg: &mut MsgHdr<'_>,
        len: usize,
        pages: bool,
    ) -> Result<Pin<UniqueArc<Self>>> {
        let mut m = Self::from_user_empty(pool, len)?;
        let b = m.as_mut().body_mut();
        let len32 = u32::try_from(len).map_err(|_| emsgsize())?;
        if pages && len > PAGE_SIZE {
            stats::inc(Stat::RsPayloadAlloc);
            b.data = Payload::from_user_to_pages(msg, len)?;
        } else {
            b.data.fill_from_user(msg, len, &mut b.spare)?;
        }
        b.set_head(head, len32);
        b.pool = Some(pool.clone());
        Ok(m)
    }

    /// A spare of `pool` for a message of `len` bytes, or new memory (see
    /// [`Message::from_user`]), its fields to be set.
    #[inline(always)]
    fn from_user_empty(pool: &Arc<MsgPool>, len: usize) -> Result<Pin<UniqueArc<Self>>> {
        let m = match pool.take(len) {
            Some(m) => {
                stats::inc(Stat::RsMsgRecycled);
                m
            }
            None => {
                stats::inc(Stat::RsMsgAlloc);
                let body = MsgBody::new(Payload::empty(), None)?;
                UniqueArc::pin_init(
                    pin_init!(Message {
                        links <- ListLinks::new(),
                        rx_links <- ListLinks::new(),
                        rx_tracker <- AtomicTracker::new(),
                        owner <- new_spinlock_bh!(Owner::none(), "Message::owner"),
                        body,
                    }),
                    GFP_KERNEL_ACCOUNT,
                )?
            }
        };
        Ok(m)
    }

    /// The message of a zero-copy `sendmsg` to `head`: [`Message::from_user`], with the
    /// caller's pages as its payload instead of a copy.
    pub(crate) fn from_user_pages(
        pool: &Arc<MsgPool>,
        head: MsgHead,
        data: ZcData,
    ) -> Result<Pin<UniqueArc<Self>>> {
        let len = data.pages.len();
        let mut m = Self::from_user_empty(pool, len)?;
        let b = m.as_mut().body_mut();
        let len32 = u32::try_from(len).map_err(|_| emsgsize())?;
        let old = core::mem::replace(&mut b.data, Payload::user(data));
        b.spare.keep(old, POOL_BUF_MAX);
        b.set_head(head, len32);
        b.pool = Some(pool.clone());
        Ok(m)
    }

    /// Gives a message of a `sendmsg` its operation and the cookie for its receiver.
    pub(crate) fn set_rdma(self: Pin<&mut Self>, op: Option<KBox<RdmaOp>>, rdma_cookie: u64) {
        let b = self.body_mut();
        b.op = op;
        b.rdma_cookie = rdma_cookie;
    }

    /// Makes the message count against its sender's send buffer until it is settled
    /// ([`crate::send::complete`]), with the notifier of its operation.
    pub(crate) fn set_owner(&self, sock: SockRef<Rds>, notifier: Option<ListArc<Notifier>>) {
        let mut o = self.owner.lock();
        o.sock = Some(sock);
        o.notifier = notifier;
        o.op_done = false;
        o.op_posted = false;
        // None here: `to_pool` ended it before the spare went back. Dropped outside the lock
        // in any case.
        let waiting = o.waiting.take();
        drop(o);
        drop(waiting);
    }

    /// The caller is done with `msg`, the last user of a message that arrived (`recvmsg`):
    /// if this was the last reference, its memory goes back to the pool of the socket that
    /// sent it (a spare for that socket's next message), or else to the module's cache of
    /// memory for incoming messages; its contents (a transport's fragments, an operation, the
    /// sender's message it shares) are dropped here. Process context: the caches' locks are
    /// taken in process context only.
    pub(crate) fn recycle(msg: Arc<Self>, cache: &SlotCache, ctx: &ProcessCtx) {
        let Some(mut m) = msg.into_unique_or_drop() else {
            return;
        };
        let b = m.as_mut().body_mut();
        let Some(pool) = b.pool.take() else {
            cache.give_back(m, ctx);
            return;
        };
        Self::to_pool(m, pool);
    }

    /// The caller, a network transport, is done with `msg`, a message this node sent (its
    /// acknowledgement settled it, or the send request that carried it completed): if this
    /// was the last reference, its memory goes back to its sender's pool, as
    /// [`Message::recycle`] does for a message that arrived. Process context, as there (an
    /// ack settled in softirq context leaves its messages to the next transmit:
    /// [`crate::conn::Conn::ack_received`]).
    pub(crate) fn recycle_sent(msg: Arc<Self>, _ctx: &ProcessCtx) {
        let Some(mut m) = msg.into_unique_or_drop() else {
            return;
        };
        if let Some(pool) = m.as_mut().body_mut().pool.take() {
            Self::to_pool(m, pool);
        }
    }

    /// Gives `m`'s memory to `pool` (the pool it came from).
    #[inline]
    fn to_pool(mut m: Pin<UniqueArc<Self>>, pool: Arc<MsgPool>) {
        // An operation its transport never reported (the connection went down with it)
        // completes now, dropped, outside the owner's lock.
        let waiting = m.owner.lock().waiting.take();
        drop(waiting);
        let b = m.as_mut().body_mut();
        // Its payload memory stays with it for the next message (within the pool's bounds, which
        // `give_back` applies to the large ones); what it held goes now.
        b.op = None;
        let data = core::mem::replace(&mut b.data, Payload::empty());
        b.spare.keep(data, POOL_BUF_MAX);
        pool.give_back(m);
    }

    /// A congestion-map update of `saddr`'s map carrying `data` (C: `rds_cong_update_alloc`):
    /// ports 0, flags `CONG_BITMAP`, no sequence number.
    pub(crate) fn cong_update(data: Payload, saddr: Addr, daddr: Addr) -> Result<ListArc<Self>> {
        Self::new(
            MessageParts {
                sport: 0,
                dport: 0,
                saddr,
                daddr,
                tos: 0,
                data,
                flags: FLAG_CONG_BITMAP,
            },
            GFP_KERNEL,
        )
    }

    /// The sequence number.
    pub(crate) fn seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// Sets the sequence number (when the message is queued on its connection).
    pub(crate) fn set_seq(&self, seq: u64) {
        self.seq.store(seq, Ordering::Relaxed);
    }

    /// Where a stream transport put the end of the message ([`Message::set_tx_mark`]), if it
    /// did since the message went to the retransmit list.
    pub(crate) fn tx_mark(&self) -> Option<u32> {
        let m = self.tx_mark.load(Ordering::Acquire);
        (m & TX_MARK_SET != 0).then_some(m as u32)
    }

    /// Records where a stream transport put the end of the message (before it sends a byte
    /// of it).
    pub(crate) fn set_tx_mark(&self, end: u32) {
        self.tx_mark
            .store(TX_MARK_SET | u64::from(end), Ordering::Release);
    }

    /// Forgets the stream position (the message goes to the retransmit list to be sent).
    pub(crate) fn clear_tx_mark(&self) {
        self.tx_mark.store(0, Ordering::Release);
    }

    /// The header flags.
    pub(crate) fn flags(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Adds header flags (`RDS_FLAG_ACK_REQUIRED`, `RDS_FLAG_RETRANSMITTED`).
    pub(crate) fn add_flags(&self, flags: u8) {
        self.flags.fetch_or(flags, Ordering::Relaxed);
    }

    /// Asks the receiver for an immediate ack.
    pub(crate) fn set_ack_required(&self) {
        self.add_flags(FLAG_ACK_REQUIRED);
    }

    /// Whether it is a retransmission.
    pub(crate) fn retransmitted(&self) -> bool {
        self.flags() & FLAG_RETRANSMITTED != 0
    }

    /// Whether it is a congestion-map update.
    pub(crate) fn is_cong_map(&self) -> bool {
        self.flags() & FLAG_CONG_BITMAP != 0
    }

    /// The wire header, with `ack` in `h_ack` (C: the header part of the transports' `xmit`):
    /// at most one extension header, as C 6.12 writes (`RDS_EXTHDR_RDMA` for an RDMA
    /// operation, else `RDS_EXTHDR_RDMA_DEST` for a cookie). `h_csum` is 0 (unchecked): a
    /// transport that checksums its headers (IB, as C's) adds it with
    /// [`Header::with_checksum`]; C's loopback and TCP do not.
    pub(crate) fn header(&self, ack: u64) -> Header {
        let mut h = Header {
            sequence: self.seq(),
            ack,
            len: self.len,
            sport: self.sport,
            dport: self.dport,
            flags: self.flags(),
            credit: 0,
            csum: 0,
            exthdr: [0; 16],
        };
        let ext = match &self.op {
            Some(op) if op.is_rdma() => Some(Ext::Rdma { rkey: op.rkey }),
            _ if self.rdma_cookie != 0 => Some(Ext::RdmaDest {
                rkey: crate::proto::cookie_key(self.rdma_cookie),
                offset: crate::proto::cookie_offset(self.rdma_cookie),
            }),
            _ => None,
        };
        if let Some(e) = ext {
            // An empty area always has room for one extension header.
            let _ = h.add_ext(e);
        }
        h
    }

    /// Calls `f` with the owner state, under its lock (which comes before the sender's
    /// `data` lock).
    pub(crate) fn with_owner<R>(&self, f: impl FnOnce(&mut Owner) -> R) -> R {
        f(&mut self.owner.lock())
    }
}

/// The addressing and identity of a message that arrived from a network (everything but its
/// payload), from its header and its connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IncomingHeader {
    /// Source address.
    pub(crate) saddr: Addr,
    /// Destination address.
    pub(crate) daddr: Addr,
    /// Source port (host order).
    pub(crate) sport: u16,
    /// Destination port (host order).
    pub(crate) dport: u16,
    /// Sequence number.
    pub(crate) seq: u64,
    /// The connection's type of service.
    pub(crate) tos: u8,
    /// The registration cookie the sender attached (`RDS_EXTHDR_RDMA_DEST`), 0 for none.
    pub(crate) rdma_cookie: u64,
}

/// Memory for one message that arrives from a network, allocated where allocating is allowed
/// (a transport fills its receive ring with them in process context), so that receiving never
/// allocates.
pub(crate) struct RxSlot(UniqueArc<MaybeUninit<Message>>);

impl RxSlot {
    /// Allocates a slot.
    pub(crate) fn new(flags: Flags) -> Result<Self> {
        Ok(Self(UniqueArc::new_uninit(flags)?))
    }

    /// Builds the incoming message in the slot, ready for a receive queue.
    pub(crate) fn fill(self, hdr: IncomingHeader, data: Payload) -> ListArc<Message, 1> {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        // INVARIANT: `len` is the payload's length (within the 1 MiB the transports accept),
        // and `charge` its charge.
        let body = MsgBody {
            sport: hdr.sport,
            dport: hdr.dport,
            len,
            charge: msg_charge(len),
            data,
            owner_id: 0,
            saddr: hdr.saddr,
            daddr: hdr.daddr,
            tos: hdr.tos,
            op: None,
            rdma_cookie: hdr.rdma_cookie,
            seq: AtomicU64::new(hdr.seq),
            tx_mark: AtomicU64::new(0),
            flags: AtomicU8::new(0),
            rx_tstamp: AtomicI64::new(0),
            rx_end: AtomicU64::new(0),
            pool: None,
            spare: SpareBufs::new(),
        };
        let init = pin_init!(Message {
            links <- ListLinks::new(),
            rx_links <- ListLinks::new(),
            rx_tracker <- AtomicTracker::new(),
            owner <- new_spinlock_bh!(Owner::none(), "Message::owner"),
            body,
        });
        match self.0.pin_init_with(init) {
            Ok(m) => ListArc::from(m),
            // The initialiser cannot fail.
            Err(e) => match e {},
        }
    }
}

/// How many spare messages a socket's pool keeps: as many as a socket that keeps 8 requests
/// and 8 answers in flight (rds-stress's depth 8 both ways) gets back in a burst; with 8,
/// 17% of such a socket's sends allocated a message and 23% of its 16 KiB requests a buffer
/// (the spares that did not fit were freed and made again a moment later).
pub(crate) const POOL_MSGS: usize = 16;
/// The largest payload buffer a spare keeps for payloads up to [`SMALL_MAX`] bytes (a larger
/// one is freed with its message).
pub(crate) const POOL_BUF_MAX: usize = SMALL_MAX;
/// What the buffers of larger payloads that a socket's pool keeps may hold in all (two
/// 128 KiB messages' worth); a spare coming back with more than fits is kept without them.
/// With [`POOL_MSGS`] and [`POOL_BUF_MAX`]: a pool holds at most 512 KiB of payload memory.
pub(crate) const POOL_CHUNK_BYTES: usize = 256 * 1024;

/// The spares of a [`MsgPool`].
///
/// # Invariants
///
/// `slots[..n]` are `Some`, the rest `None`; `chunk_bytes` is the sum of their spares'
/// [`SpareBufs::chunk_bytes`], at most [`POOL_CHUNK_BYTES`].
struct PoolSpares {
    n: usize,
    chunk_bytes: usize,
    /// The socket is gone: nothing is kept any more.
    closed: bool,
    slots: [Option<Pin<UniqueArc<Message>>>; POOL_MSGS],
}

/// A socket's spare messages (C has none: it allocates and frees every message): a message
/// the socket sent comes back here when its receiver is done with it, with its payload buffer,
/// and the socket's next `sendmsg` takes it instead of allocating. At most [`POOL_MSGS`] are
/// kept, each with a buffer of at most [`POOL_BUF_MAX`] bytes, and the buffers of larger
/// payloads up to [`POOL_CHUNK_BYTES`] in all, all allocated by (and charged to the memory
/// cgroup of) the socket's senders; the socket empties and closes its pool when
/// it is released, and a message that comes back after that is freed. Process context only.
#[pin_data]
pub(crate) struct MsgPool {
    #[pin]
    spares: SpinLockPc<PoolSpares>,
}

impl MsgPool {
    /// An empty pool.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                // INVARIANT: none.
                spares <- new_spinlock_pc!(
                    PoolSpares {
                        n: 0,
                        chunk_bytes: 0,
                        closed: false,
                        slots: [const { None }; POOL_MSGS],
                    },
                    "MsgPool::spares"
                ),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// A spare for a payload of `len` bytes, if there is one: the last one kept if its memory
    /// suits the payload ([`SpareBufs::suits`]), else the latest that does, else the last.
    /// (A socket that sends 16 KiB requests and 64-byte answers gets them back mixed: taking
    /// the last one alone gave requests the answers' spares, which may have no buffer.)
    fn take(&self, len: usize) -> Option<Pin<UniqueArc<Message>>> {
        let mut sp = self.spares.lock();
        let last = sp.n.checked_sub(1)?;
        let suits = |i: usize| {
            sp.slots
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|m| m.spare.suits(len))
        };
        if !suits(last) {
            if let Some(i) = (0..last).rev().find(|&i| suits(i)) {
                // Both are `Some` (below `n`): the invariant holds after the swap.
                sp.slots.swap(i, last);
            }
        }
        // INVARIANT: the last `Some` becomes `None`, and its large buffers leave the count.
        sp.n = last;
        let m = sp.slots.get_mut(last).and_then(Option::take)?;
        sp.chunk_bytes = sp.chunk_bytes.saturating_sub(m.spare.chunk_bytes());
        Some(m)
    }

    /// Keeps `m` (on no list, its contents dropped, its pool taken) as a spare if there is
    /// room, without its large payload's buffers if they do not fit the pool's bound;
    /// otherwise it is freed. What is not kept is freed outside the lock.
    fn give_back(&self, mut m: Pin<UniqueArc<Message>>) {
        let chunks = m.spare.chunk_bytes();
        let mut unkept = None;
        let full = {
            let mut guard = self.spares.lock();
            let sp = &mut *guard;
            let n = sp.n;
            let closed = sp.closed;
            let fits = sp.chunk_bytes + chunks <= POOL_CHUNK_BYTES;
            match sp.slots.get_mut(n) {
                Some(free) if !closed => {
                    if fits {
                        sp.chunk_bytes += chunks;
                    } else {
                        let spare = &mut m.as_mut().body_mut().spare;
                        unkept = Some(core::mem::replace(&mut spare.chunks, KVec::new()));
                    }
                    // INVARIANT: the first `None` becomes `Some`, its large buffers counted
                    // (or dropped when they would pass the bound).
                    *free = Some(m);
                    sp.n = n + 1;
                    None
                }
                _ => Some(m),
            }
        };
        drop(unkept);
        drop(full);
    }

    /// Frees the spares and keeps none from now on (the socket is released).
    pub(crate) fn close(&self) {
        let spares = {
            let mut sp = self.spares.lock();
            sp.closed = true;
            sp.n = 0;
            sp.chunk_bytes = 0;
            core::mem::replace(&mut sp.slots, [const { None }; POOL_MSGS])
        };
        drop(spares);
    }
}

/// How many spare [`RxSlot`]s the module keeps.
pub(crate) const SPARE_SLOTS: usize = 32;

/// The spare slots of a [`SlotCache`].
///
/// Spare memory for messages that arrive from a network: the memory of such a message
/// `recvmsg` is done with goes to the next one that arrives (over IB in the receive
/// completion's work, over loopback in its fault modes, which go the network's way), instead
/// of being freed and allocated again. At most [`SPARE_SLOTS`] are kept; a spare stays
/// charged to the memory cgroup of the sender it was first allocated for. Process context
/// only (the `&ProcessCtx` arguments): its lock is never taken in softirq context.
#[pin_data]
pub(crate) struct SlotCache {
    #[pin]
    spare: SpinLockPc<SpareStack<RxSlot, SPARE_SLOTS>>,
}

impl SlotCache {
    /// An empty cache.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            spare <- new_spinlock_pc!(SpareStack::new(), "SlotCache::spare"),
        })
    }

    /// How many spares there are (for tests).
    #[cfg(rds_test)]
    pub(crate) fn spares(&self) -> usize {
        self.spare.lock().len()
    }

    /// A spare slot, or a new one.
    pub(crate) fn take_or_alloc(&self, _ctx: &ProcessCtx, flags: Flags) -> Result<RxSlot> {
        let spare = self.spare.lock().pop();
        match spare {
            Some(s) => Ok(s),
            None => RxSlot::new(flags),
        }
    }

    /// Keeps the memory of `m` (uniquely owned) for a later message if there is room;
    /// otherwise just frees it. `m`'s contents (the payload, a transport's fragments) are
    /// dropped here, outside the lock.
    fn give_back(&self, m: Pin<UniqueArc<Message>>, _ctx: &ProcessCtx) {
        let Some(slot) = recycle_unique(m) else {
            return;
        };
        let full = self.spare.lock().push(RxSlot(slot));
        drop(full);
    }
}
