// SPDX-License-Identifier: GPL-2.0

//! User memory for RDMA: pinned pages, copies through kernel mappings, mlock accounting.
//!
//! C headers: [`include/linux/mm.h`](srctree/include/linux/mm.h) (`pin_user_pages_fast`,
//! `unpin_user_pages_dirty_lock`, `account_locked_vm`),
//! [`include/linux/highmem.h`](srctree/include/linux/highmem.h) (`memcpy_*_page`).
//!
//! A memory registration or an RDMA operation pins the user pages it covers
//! ([`PinnedPages`]); data moves between pinned pages, or between them and kernel buffers,
//! through temporary kernel mappings. Long-lived pins are charged to the owner's
//! `RLIMIT_MEMLOCK` of the socket's creator ([`MemlockUser`], [`PinCharge`]).

use super::{
    raw,
    sync::{DropInProcess, ProcessCtx, ProcessDrop},
};
use core::{
    marker::PhantomData,
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, Ordering},
};
use kernel::{error::to_result, prelude::*, sync::Arc};

/// The kernel's page size; the module assumes 4 KiB where it meets the ABI (checked at
/// build time in `rds/message.rs`).
pub(crate) const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// User pages pinned with `pin_user_pages_fast`; unpinned when dropped (and marked dirty if
/// they were written to).
///
/// Dropping sleeps (`unpin_user_pages_dirty_lock` locks pages): drop in process context with
/// no spinlock held.
///
/// # Invariants
///
/// Every entry of `pages` is a page pinned by this object, unpinned only in `drop`.
pub(crate) struct PinnedPages {
    pages: KVec<*mut raw::page>,
    dirty: AtomicBool,
}

// SAFETY: Pinned pages stay valid wherever the pin is held; the helpers that read and write
// them map them temporarily on the calling CPU, which any thread may do.
unsafe impl Send for PinnedPages {}
// SAFETY: Shared access only reads and writes page contents through temporary mappings; the
// contents are user memory with no Rust-level aliasing guarantees to uphold.
unsafe impl Sync for PinnedPages {}

impl PinnedPages {
    /// Pins `nr` pages starting at the page-aligned user address `start`: for writing when
    /// `write` (data will be stored into them), long-term when `longterm` (a registration that
    /// outlives the system call). `EFAULT` when not all of them can be pinned.
    pub(crate) fn pin(start: u64, nr: usize, write: bool, longterm: bool) -> Result<Self> {
        let nr_c = i32::try_from(nr).map_err(|_| EINVAL)?;
        let mut pages = KVec::with_capacity(nr, GFP_KERNEL)?;
        for _ in 0..nr {
            pages.push(ptr::null_mut(), GFP_KERNEL)?;
        }
        let start = usize::try_from(start).map_err(|_| EFAULT)?;
        // SAFETY: `pages` has room for `nr` page pointers; the helper checks the user range.
        let got = unsafe {
            raw::rds_rs_pin_user_pages(start as _, nr_c, write, longterm, pages.as_mut_ptr())
        };
        let pinned = usize::try_from(got).unwrap_or(0);
        if pinned != nr {
            if pinned > 0 {
                // SAFETY: The first `pinned` entries were pinned just now and nothing else
                // knows about them.
                unsafe { raw::rds_rs_unpin_user_pages(pages.as_mut_ptr(), pinned as _, false) };
            }
            return Err(if got < 0 && got != -(raw::EFAULT as i32) {
                Error::from_errno(got)
            } else {
                EFAULT
            });
        }
        // INVARIANT: all `nr` pages are pinned.
        Ok(Self {
            pages,
            dirty: AtomicBool::new(false),
        })
    }

    /// Calls `f(page, offset in page, range in the caller's buffer)` for each piece of the byte
    /// range `[offset, offset + len)` of the pinned memory (counted from the start of the
    /// first page). `EINVAL` when the range is not inside.
    fn pieces(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(*mut raw::page, usize, core::ops::Range<usize>),
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.pages.len().saturating_mul(PAGE_SIZE) {
            return Err(EINVAL);
        }
        let mut at = offset;
        while at < end {
            let idx = at / PAGE_SIZE;
            let in_page = at % PAGE_SIZE;
            let n = (PAGE_SIZE - in_page).min(end - at);
            let page = *self.pages.get(idx).ok_or(EINVAL)?;
            f(page, in_page, (at - offset)..(at - offset + n));
            at += n;
        }
        Ok(())
    }

    /// Calls `f(page, offset in page, bytes)` for each page piece of the byte range
    /// `[offset, offset + len)` (counted from the start of the first page), in order; the
    /// pages stay pinned while `self` lives. `EINVAL` when the range is not inside.
    pub(crate) fn for_each_page(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(*mut raw::page, usize, usize),
    ) -> Result {
        self.pieces(offset, len, |page, off, r| f(page, off, r.len()))
    }

    /// The pinned pages, in order (valid while `self` lives).
    pub(super) fn raw_pages(&self) -> &[*mut raw::page] {
        &self.pages
    }

    /// Notes that a device wrote the pages: they are marked dirty when unpinned.
    pub(crate) fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Copies `dst.len()` bytes from `offset` into `dst`.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        let len = dst.len();
        self.pieces(offset, len, |page, off, r| {
            if let Some(d) = dst.get_mut(r) {
                // SAFETY: `page` is pinned (type invariant), `off + d.len()` stays within it
                // (`pieces`), and `d` is valid for writes of its length.
                unsafe { raw::rds_rs_page_read(page, off, d.as_mut_ptr().cast(), d.len()) };
            }
        })
    }

    /// Copies `src` into the pinned memory at `offset`.
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> Result {
        self.dirty.store(true, Ordering::Relaxed);
        self.pieces(offset, src.len(), |page, off, r| {
            if let Some(s) = src.get(r) {
                // SAFETY: As in `read`, with `s` valid for reads.
                unsafe { raw::rds_rs_page_write(page, off, s.as_ptr().cast(), s.len()) };
            }
        })
    }

    /// Copies `len` bytes from `self` at `src_off` to `dst` at `dst_off`, page by page.
    pub(crate) fn copy_to(
        &self,
        src_off: usize,
        dst: &PinnedPages,
        dst_off: usize,
        len: usize,
    ) -> Result {
        // Validate both ranges before touching anything.
        self.pieces(src_off, len, |_, _, _| {})?;
        dst.pieces(dst_off, len, |_, _, _| {})?;
        dst.dirty.store(true, Ordering::Relaxed);
        let mut done = 0;
        while done < len {
            let s = src_off + done;
            let d = dst_off + done;
            let n = (PAGE_SIZE - s % PAGE_SIZE)
                .min(PAGE_SIZE - d % PAGE_SIZE)
                .min(len - done);
            let sp = *self.pages.get(s / PAGE_SIZE).ok_or(EINVAL)?;
            let dp = *dst.pages.get(d / PAGE_SIZE).ok_or(EINVAL)?;
            // SAFETY: Both pages are pinned (type invariant) and the pieces stay within them
            // (`n` is bounded by both pages' remaining bytes; the ranges were checked above).
            unsafe { raw::rds_rs_page_copy(dp, d % PAGE_SIZE, sp, s % PAGE_SIZE, n) };
            done += n;
        }
        Ok(())
    }
}

/// What owns pinned pages and lends them to a device: a fast registration or a work request
/// keeps the owner, and so the pages, until the device is done with them.
///
/// Why that holds for any implementation: the pages are borrowed from `self`, so they live at
/// least as long as that borrow; after it, only dropping the owner or changing it through
/// `&mut` could let them go (nothing unpins [`PinnedPages`] through a shared reference, and no
/// sound container gives out a plain reference to what a shared reference may later remove),
/// and whoever keeps the owner does neither while the device may use the pages.
pub(crate) trait PinOwner: Send + Sync {
    /// The pages.
    fn pinned(&self) -> &PinnedPages;
}

impl super::sync::DropInProcess for PinnedPages {}

impl Drop for PinnedPages {
    fn drop(&mut self) {
        let n = self.pages.len();
        if n == 0 {
            return;
        }
        // SAFETY: Every entry is a page this object pinned (type invariant); they are unpinned
        // exactly once, here.
        unsafe {
            raw::rds_rs_unpin_user_pages(self.pages.as_mut_ptr(), n as _, *self.dirty.get_mut())
        };
    }
}

/// The data of a zero-copy `sendmsg` (`MSG_ZEROCOPY`): the caller's pages, each piece with a
/// page reference of its own (`iov_iter_get_pages2`, as C's `rds_message_zcopy_from_user`),
/// put when dropped (any context). The bytes stay the caller's: it may change them until the
/// send's completion says the kernel is done with them.
///
/// # Invariants
///
/// Every piece's page holds a reference taken for this object, put only in `drop`; its bytes
/// `[off, off + len)` lie inside the page; `end` is the sum of the lengths of the pieces up
/// to and including it, and the last one's is `len`.
pub(crate) struct UserPages {
    pieces: KVec<UserPiece>,
    len: usize,
}

struct UserPiece {
    page: *mut raw::page,
    off: usize,
    len: usize,
    end: usize,
}

// SAFETY: The pages are referenced for as long as the object lives; their contents are read
// through temporary mappings or handed to TCP, which any thread may do.
unsafe impl Send for UserPages {}
// SAFETY: Shared access only reads the pages (see above).
unsafe impl Sync for UserPages {}

/// A page of [`UserPages`], valid while they are.
#[derive(Clone, Copy)]
pub(crate) struct UserPage<'a> {
    page: *mut raw::page,
    _pages: PhantomData<&'a UserPages>,
}

impl UserPages {
    /// Takes the next `len` bytes of a `sendmsg`'s data by reference (`msg_iter` advances
    /// past them); `EFAULT` when they are not all there (nothing is kept then).
    ///
    /// # Safety
    ///
    /// `msg` is the valid `msghdr` of the `sendmsg` call in progress, in process context.
    pub(super) unsafe fn take(msg: *mut raw::msghdr, len: usize) -> Result<Self> {
        // One piece per page, plus one for a start inside a page.
        // INVARIANT: no piece yet; each piece pushed holds its page's reference, and a failure
        // drops `this`, which puts those taken so far.
        let mut this = Self {
            pieces: KVec::with_capacity(len.div_ceil(PAGE_SIZE) + 1, GFP_KERNEL)?,
            len: 0,
        };
        while this.len < len {
            let mut page: *mut raw::page = ptr::null_mut();
            let mut start = 0usize;
            // SAFETY: `msg` is valid (the function's requirement); `page` and `start` are valid
            // for writes; one page at most is returned.
            let n = unsafe { raw::rds_rs_msg_get_page(msg, &mut page, &mut start) };
            let n = match usize::try_from(n) {
                Ok(n) if n > 0 && !page.is_null() => n.min(len - this.len),
                _ => return Err(EFAULT),
            };
            let end = this.len + n;
            let piece = UserPiece {
                page,
                off: start,
                len: n,
                end,
            };
            let fits = start.checked_add(n).is_some_and(|e| e <= PAGE_SIZE);
            let pushed = fits && this.pieces.push(piece, GFP_KERNEL).is_ok();
            if !pushed {
                // One page at most was asked for, and room was reserved: neither happens.
                // SAFETY: The reference was taken just now and is not kept.
                unsafe { raw::rds_rs_put_page(page) };
                return Err(EFAULT);
            }
            this.len = end;
        }
        Ok(this)
    }

    /// The number of bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The number of pages (pieces).
    pub(crate) fn npages(&self) -> usize {
        self.pieces.len()
    }

    /// The piece holding byte `offset`: its page, the byte's offset in the page and the bytes
    /// from there to the piece's end.
    pub(crate) fn piece_at(&self, offset: usize) -> Option<(UserPage<'_>, usize, usize)> {
        if offset >= self.len {
            return None;
        }
        let i = self.pieces.partition_point(|p| p.end <= offset);
        let p = self.pieces.get(i)?;
        let into = offset - (p.end - p.len);
        Some((self.page(p), p.off + into, p.len - into))
    }

    /// Calls `f(page, offset, len)` for each piece in order, until it fails.
    pub(crate) fn try_for_each<E>(
        &self,
        mut f: impl FnMut(UserPage<'_>, usize, usize) -> core::result::Result<(), E>,
    ) -> core::result::Result<(), E> {
        self.pieces
            .iter()
            .try_for_each(|p| f(self.page(p), p.off, p.len))
    }

    fn page(&self, p: &UserPiece) -> UserPage<'_> {
        UserPage {
            page: p.page,
            _pages: PhantomData,
        }
    }
}

impl Drop for UserPages {
    fn drop(&mut self) {
        for p in self.pieces.iter() {
            // SAFETY: Each piece holds one reference to its page, put once, here (type
            // invariant).
            unsafe { raw::rds_rs_put_page(p.page) };
        }
    }
}

impl UserPage<'_> {
    /// The page, for the bindings that hand it to the kernel (it is referenced while the
    /// borrow lasts).
    pub(super) fn as_raw(&self) -> *mut raw::page {
        self.page
    }

    /// Copies bytes of the page from `offset` into `dst` (`EINVAL` past the page's end).
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        if offset.checked_add(dst.len()).is_none_or(|e| e > PAGE_SIZE) {
            return Err(EINVAL);
        }
        // SAFETY: The page is referenced while `self` borrows its `UserPages`; the range is
        // inside it (checked) and `dst` is valid for writes of its length.
        unsafe { raw::rds_rs_page_read(self.page, offset, dst.as_mut_ptr().cast(), dst.len()) };
        Ok(())
    }
}

/// The user who created a socket, to whom the socket's long-lived pins are charged (as
/// io_uring charges its creator): a reference to the creator's `user_struct` and a grab of
/// its `mm` (for `VmPin` in `/proc/PID/status`).
///
/// It may be dropped in any context: `free_uid` may run in atomic context, but the last
/// `mmdrop` frees the page tables (x86's `pgd_free` takes `pgd_lock`, which is not
/// softirq-safe), so the mm's reference travels in a [`ProcessDrop`] and is let go by the
/// deferred work, as the kernel's own `mmdrop_async` does. (A socket's last reference may go
/// in a softirq: an acknowledged message's, or an RCU callback's.)
///
/// # Invariants
///
/// `user` holds a reference taken by `get_current_user`.
pub(crate) struct MemlockUser {
    user: NonNull<raw::user_struct>,
    mm: Option<ProcessDrop<MmGrab>>,
}

/// A reference to an `mm_struct` taken by `mmgrab`, dropped with `mmdrop` (which may sleep
/// or take locks that are not softirq-safe when it is the last one: drop in process context).
///
/// # Invariants
///
/// The pointer holds one `mmgrab` reference, owned by this object.
pub(crate) struct MmGrab(NonNull<raw::mm_struct>);

// SAFETY: An `mm_struct` reference may be dropped from any task.
unsafe impl Send for MmGrab {}
// SAFETY: Shared access only reads the pointer.
unsafe impl Sync for MmGrab {}

impl DropInProcess for MmGrab {}

impl Drop for MmGrab {
    fn drop(&mut self) {
        // SAFETY: The reference is owned (type invariant) and dropped exactly once, here.
        unsafe { raw::rds_rs_mm_put(self.0.as_ptr()) };
    }
}

// SAFETY: The references may be used and dropped from any task.
unsafe impl Send for MemlockUser {}
// SAFETY: Shared access only charges atomically.
unsafe impl Sync for MemlockUser {}

impl MemlockUser {
    /// The calling task's user and mm (the socket's creator).
    pub(crate) fn current(ctx: &ProcessCtx) -> Result<Self> {
        // SAFETY: The helper returns the caller's user with a new reference.
        let user = NonNull::new(unsafe { raw::rds_rs_current_user() }).ok_or(EINVAL)?;
        let mut this = Self { user, mm: None };
        // SAFETY: The helper returns the caller's mm with a new reference, or null.
        if let Some(mm) = NonNull::new(unsafe { raw::rds_rs_mm_get() }) {
            // INVARIANT: the reference taken just above. Without memory for the node, the
            // reference is dropped here (process context) and so is `this`'s user.
            this.mm = Some(ProcessDrop::new(MmGrab(mm), GFP_KERNEL_ACCOUNT, ctx)?);
        }
        Ok(this)
    }

    /// The creator's mm, or null (a kernel thread).
    fn mm_ptr(&self) -> *mut raw::mm_struct {
        self.mm.as_ref().map_or(ptr::null_mut(), |m| m.0.as_ptr())
    }

    /// Charges `pages` pinned pages to the user: `EPERM` when the calling task may not lock
    /// memory at all (`can_do_mlock`, as C RDS checks), `ENOMEM` above the calling task's
    /// `RLIMIT_MEMLOCK` (unless it has `CAP_IPC_LOCK`) counting everything the user has
    /// charged so far.
    pub(crate) fn charge(self: &Arc<Self>, pages: usize) -> Result<PinCharge> {
        // SAFETY: The helper has no preconditions.
        if !unsafe { raw::rds_rs_can_do_mlock() } {
            return Err(EPERM);
        }
        // SAFETY: `user` and `mm` are referenced (type invariants).
        to_result(unsafe {
            raw::rds_rs_user_charge(self.user.as_ptr(), self.mm_ptr(), pages as _)
        })?;
        // INVARIANT: charged just now.
        Ok(PinCharge {
            user: self.clone(),
            pages,
        })
    }
}

impl Drop for MemlockUser {
    fn drop(&mut self) {
        // SAFETY: The reference was taken in `current` (type invariant) and is dropped exactly
        // once, here. The mm's goes with `self.mm`, to the deferred work.
        unsafe { raw::rds_rs_free_uid(self.user.as_ptr()) };
    }
}

/// Pages charged to a [`MemlockUser`]; uncharged when dropped (which never sleeps).
///
/// # Invariants
///
/// `pages` are charged to `user`.
pub(crate) struct PinCharge {
    user: Arc<MemlockUser>,
    pages: usize,
}

impl Drop for PinCharge {
    fn drop(&mut self) {
        // SAFETY: The pages are charged to the user (type invariant) and uncharged once, here;
        // the user's references are alive while `self.user` is.
        unsafe {
            raw::rds_rs_user_uncharge(self.user.user.as_ptr(), self.user.mm_ptr(), self.pages as _)
        };
    }
}

/// A random `u32` from the kernel's RNG (`get_random_u32`), for unguessable keys.
pub(crate) fn random_u32() -> u32 {
    // SAFETY: The helper has no preconditions.
    unsafe { raw::rds_rs_random_u32() }
}

/// Whether the calling task may lock memory at all (`can_do_mlock`).
pub(crate) fn can_do_mlock() -> bool {
    // SAFETY: The helper has no preconditions.
    unsafe { raw::rds_rs_can_do_mlock() }
}

/// Copies `src` into `page` at `offset` (`EINVAL` when it does not fit). The `&mut` makes the
/// caller the page's only user, so the write races with nothing.
pub(crate) fn page_write(page: &mut kernel::page::Page, offset: usize, src: &[u8]) -> Result {
    if offset
        .checked_add(src.len())
        .is_none_or(|end| end > kernel::page::PAGE_SIZE)
    {
        return Err(EINVAL);
    }
    // SAFETY: `src` is valid for reads of its length, the range is inside the page (checked
    // above), and `&mut page` excludes every concurrent access to it.
    unsafe { page.write_raw(src.as_ptr(), offset, src.len()) }
}

/// Copies bytes of `page` from `offset` into `dst` (`EINVAL` when the range is not inside the
/// page). Pages shared through `&Page` are not written (writes need `&mut`,
/// [`page_write`]), so the read races with no write.
pub(crate) fn page_read(page: &kernel::page::Page, offset: usize, dst: &mut [u8]) -> Result {
    if offset
        .checked_add(dst.len())
        .is_none_or(|end| end > kernel::page::PAGE_SIZE)
    {
        return Err(EINVAL);
    }
    // SAFETY: `dst` is valid for writes of its length, the range is inside the page (checked
    // above), and no write to a shared page can happen (see above).
    unsafe { page.read_raw(dst.as_mut_ptr(), offset, dst.len()) }
}

/// Empties a byte buffer, keeping its memory (6.12's `KVec` has no `clear`).
pub(crate) fn clear_bytes(v: &mut KVec<u8>) {
    // SAFETY: 0 is at most the capacity, and the bytes given up need no drop.
    unsafe { v.set_len(0) };
}

/// Drops `v`, skipping the call that dropping an empty `KVec` makes (`krealloc(NULL, 0)`
/// through the allocator, out of line): a vector that never allocated owns no memory and no
/// elements, so forgetting it leaks nothing. For the per-message paths.
pub(crate) fn free_vec<T>(v: KVec<T>) {
    if v.capacity() == 0 {
        core::mem::forget(v);
    } else {
        drop(v);
    }
}
