//! Memory-registration rules: the checks C RDS makes on MR registrations
//! (`net/rds/rdma.c` `__rds_rdma_map`), on RDMA requests
//! (`rds_rdma_extra_size`, `rds_rdma_pages`, `rds_cmsg_rdma_args`) and on
//! atomics (`rds_cmsg_atomic`); the bounds of a registered region; and the
//! R_Key allocation policy of rds-rs.
//!
//! # Coordinates of a registered region
//!
//! A registration of user address `A`, `L` bytes, gets the cookie
//! `make_cookie(r_key, A % PAGE_SIZE)`. A peer names bytes of it with an
//! address relative to the start of the buffer (`remote_vec.addr`, or an
//! atomic's `remote_addr`), to which C adds the cookie's offset
//! (`op_remote_addr`). The result is an address in the MR's zero-based
//! coordinates, where byte 0 is the start of `A`'s page: the region
//! occupies `[A % PAGE_SIZE, A % PAGE_SIZE + L)` ([`Region`]).
//!
//! # R_Key allocation (rds-rs's policy)
//!
//! C RDS gets R_Keys from the IB device. rds-rs's loopback registry makes
//! its own, and a cookie is a capability: whoever knows it may read or
//! write the memory. So:
//!
//! - R_Keys are random 32-bit values (from the kernel's CSPRNG), so a
//!   cookie cannot be guessed from others;
//! - 0 is never used, as a cookie of 0 means "flush" to `RDS_FREE_MR` and
//!   "none" in messages (`m_rdma_cookie`);
//! - a key is never issued while an MR with it exists (the caller's
//!   "live" predicate: its registry);
//! - a freed key goes into a [`Quarantine`], a FIFO of the last `N` freed
//!   keys, and is not reissued while there, so a stale cookie (one still
//!   in flight, or kept by a peer after the MR was freed) does not
//!   silently name a new MR. After `N` further frees it may be drawn
//!   again, with probability about 2^-32 per draw.
//!
//! [`key_acceptable`] is the whole rule; the caller draws candidates until
//! one is acceptable.

use super::rdma::{
    cookie_offset, AtomicArgs, RdmaArgs, RdsIovec, MAX_MSG_SIZE, PAGE_SIZE, UIO_MAXIOV,
};

/// Errors of the memory-registration rules; each is one errno of C RDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrError {
    /// `EINVAL`.
    Inval,
    /// `EMSGSIZE`.
    MsgSize,
    /// `EFAULT`.
    Fault,
    /// `ENOTCONN`.
    NotConn,
    /// `EOPNOTSUPP`.
    OpNotSupp,
    /// `EPERM`.
    Perm,
}

impl MrError {
    /// The positive errno C RDS returns (negated) for this error.
    #[must_use]
    pub const fn errno(self) -> i32 {
        match self {
            MrError::Inval => 22,
            MrError::MsgSize => 90,
            MrError::Fault => 14,
            MrError::NotConn => 107,
            MrError::OpNotSupp => 95,
            MrError::Perm => 1,
        }
    }
}

impl core::fmt::Display for MrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            MrError::Inval => "invalid RDMA argument",
            MrError::MsgSize => "RDMA region too large",
            MrError::Fault => "bad RDMA address",
            MrError::NotConn => "socket not bound",
            MrError::OpNotSupp => "transport does not support RDMA",
            MrError::Perm => "not allowed to lock memory",
        };
        f.write_str(s)
    }
}

impl core::error::Error for MrError {}

/// The most pages one MR may span: `RDS_MAX_MSG_SIZE >> PAGE_SHIFT` plus
/// one for a misaligned start (257).
pub const MAX_MR_PAGES: u64 = MAX_MSG_SIZE / PAGE_SIZE + 1;

/// `__rds_rdma_map`'s checks of a registration request, in C's order,
/// after its bound-address (`ENOTCONN`) and transport (`EOPNOTSUPP`)
/// checks, for a caller allowed to lock memory; see
/// [`check_registration_mlock`].
///
/// 1. `addr + bytes` wraps, or `PAGE_ALIGN(addr + bytes)` wraps (the sum
///    is in the last, partial, page of the address space): `Inval`;
/// 2. [`RdsIovec::pages`] is 0 (`bytes` is 0 or above `u32::MAX`):
///    `Inval`;
/// 3. more than [`MAX_MR_PAGES`] pages
///    (`nr_pages - 1 > RDS_MAX_MSG_SIZE >> PAGE_SHIFT`): `MsgSize`.
///
/// Returns the page count and the cookie offset `addr % PAGE_SIZE`.
///
/// # Errors
///
/// As listed.
pub fn check_registration(vec: &RdsIovec) -> Result<(u64, u32), MrError> {
    check_registration_mlock(vec, true)
}

/// [`check_registration`] with C's `can_do_mlock()` test at its place
/// between steps 1 and 2: when `can_do_mlock` is false, `Perm` (unless
/// step 1 failed first).
///
/// # Errors
///
/// As [`check_registration`], plus `Perm`.
pub fn check_registration_mlock(vec: &RdsIovec, can_do_mlock: bool) -> Result<(u64, u32), MrError> {
    // C: (addr + bytes) < addr, in wrapping u64.
    let end = vec.addr.checked_add(vec.bytes).ok_or(MrError::Inval)?;
    // C: PAGE_ALIGN(end) < end, i.e. end + PAGE_SIZE - 1 wraps and the
    // mask leaves less than end; for an aligned end it does not wrap.
    if end.checked_next_multiple_of(PAGE_SIZE).is_none() {
        return Err(MrError::Inval);
    }
    if !can_do_mlock {
        return Err(MrError::Perm);
    }
    let pages = vec.pages();
    if pages == 0 {
        return Err(MrError::Inval);
    }
    if pages > MAX_MR_PAGES {
        return Err(MrError::MsgSize);
    }
    Ok((pages, page_offset(vec.addr)))
}

/// `addr & ~PAGE_MASK`: the offset of `addr` in its page.
fn page_offset(addr: u64) -> u32 {
    let [b0, b1, _, _, _, _, _, _] = (addr % PAGE_SIZE).to_le_bytes();
    u32::from(u16::from_le_bytes([b0, b1]))
}

/// A registered region as the registry keeps it: the bytes
/// `[offset, offset + len)` of the MR's zero-based coordinates (see the
/// module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    /// `A % PAGE_SIZE` for a registration at user address `A`: the cookie
    /// offset.
    pub offset: u32,
    /// The registered length `L`.
    pub len: u64,
}

impl Region {
    /// The region of a registration of `vec`.
    #[must_use]
    pub fn of(vec: &RdsIovec) -> Self {
        Region {
            offset: page_offset(vec.addr),
            len: vec.bytes,
        }
    }

    /// Whether an access of `len` bytes at zero-based address `at` stays
    /// inside: `offset <= at` and `at + len <= offset + self.len`,
    /// computed without overflow. An empty access at the region's end is
    /// inside.
    #[must_use]
    pub fn contains(&self, at: u64, len: u64) -> bool {
        let Some(rel) = at.checked_sub(u64::from(self.offset)) else {
            return false;
        };
        match self.len.checked_sub(rel) {
            Some(room) => len <= room,
            None => false,
        }
    }

    /// The byte index into the registered user buffer of zero-based
    /// address `at` (`at - offset`), if that byte is inside the region.
    #[must_use]
    pub fn index(&self, at: u64) -> Option<u64> {
        let rel = at.checked_sub(u64::from(self.offset))?;
        (rel < self.len).then_some(rel)
    }
}

/// How many page-aligned bases the loopback transport can give a
/// registration's zero-based addresses ([`loop_region`]): every base that
/// leaves room for the largest registration below 2^32, so that the
/// cookie's 32-bit offset always holds base, page offset and length.
pub const LOOP_BASES: u64 = ((1u64 << 32) - 2 * MAX_MSG_SIZE) / PAGE_SIZE;

/// The region of a registration of `vec` on the loopback transport, whose
/// model HCA places the registration at a random page-aligned zero-based
/// address (`rand % LOOP_BASES` pages) instead of C's 0: the cookie's
/// offset (`region.offset`) then carries about 20 more random bits beside
/// the 32-bit r_key, and an RDMA must name both to reach the memory.
#[must_use]
pub fn loop_region(vec: &RdsIovec, rand: u32) -> Region {
    let base = (u64::from(rand) % LOOP_BASES).saturating_mul(PAGE_SIZE);
    let offset = base.saturating_add(u64::from(page_offset(vec.addr)));
    Region {
        offset: u32::try_from(offset).unwrap_or(u32::MAX),
        len: vec.bytes,
    }
}

/// `rds_rdma_pages`: the pages of the local iovecs together.
///
/// # Errors
///
/// `Inval` when an iovec's [`RdsIovec::pages`] is 0, or the total
/// overflows C's `int` (impossible with at most [`UIO_MAXIOV`] iovecs of
/// at most `2^20 + 1` pages each, but checked as C does).
pub fn rdma_pages(local: &[RdsIovec]) -> Result<u64, MrError> {
    let mut total: u64 = 0;
    for v in local {
        let p = v.pages();
        if p == 0 {
            return Err(MrError::Inval);
        }
        total = total.saturating_add(p);
        if total > u64::from(i32::MAX.unsigned_abs()) {
            return Err(MrError::Inval);
        }
    }
    Ok(total)
}

/// The size of one `struct scatterlist` in C RDS (x86-64, without
/// `CONFIG_DEBUG_SG`).
pub const SG_ENTRY_LEN: u64 = 32;

/// What C RDS can allocate for a message's scatterlists: `rds_message_alloc`
/// refuses more than `KMALLOC_MAX_SIZE` (4 MiB with 4 KiB pages) less the
/// message itself, taken here as 1 KiB.
pub const MSG_SG_MAX: u64 = (4 << 20) - 1024;

/// Whether the local pages of a message's RDMA operations (the sum of
/// [`rdma_pages`]) need more scatterlist than C RDS can allocate: C's
/// `sendmsg` then fails with `ENOMEM` before it pins anything. rds-rs
/// answers the same, which also bounds what one call can make it pin.
#[must_use]
pub fn rdma_sg_too_big(pages: u64) -> bool {
    pages.saturating_mul(SG_ENTRY_LEN) > MSG_SG_MAX
}

/// `rds_rdma_extra_size` and the argument checks of `rds_cmsg_rdma_args`,
/// in C's order, given the args and the local iovecs the caller copied
/// from `local_vec_addr` (`nr_local * 16` bytes; a failed copy is the
/// caller's `EFAULT`, between steps 2 and 3):
///
/// 1. `nr_local == 0`: `Inval`;
/// 2. `nr_local >` [`UIO_MAXIOV`]: `MsgSize`;
/// 3. `local.len() != nr_local`: `Inval` (C: `vec->len != nr_local`);
/// 4. [`rdma_pages`] fails: `Inval`;
/// 5. the local lengths add up to more than `remote_vec.bytes`: `Inval`.
///
/// Returns the total pages and total bytes of the local iovecs.
///
/// C pins the local pages between steps 4 and 5, so a pinning failure
/// (`EFAULT`) wins over step 5 there; a caller that wants C's exact errno
/// for such a doubly bad request pins before calling
/// [`check_rdma_bytes`] separately.
///
/// Difference from C: C adds the lengths in an `unsigned int`
/// (`nr_bytes`), so a sum of 4 GiB or more wraps and can pass step 5 (and
/// becomes the operation's byte count, shorter than the pinned pages); the
/// sum here is exact.
///
/// # Errors
///
/// As listed.
pub fn check_rdma_args(args: &RdmaArgs, local: &[RdsIovec]) -> Result<(u64, u64), MrError> {
    if args.nr_local == 0 {
        return Err(MrError::Inval);
    }
    if args.nr_local > UIO_MAXIOV {
        return Err(MrError::MsgSize);
    }
    if u64::try_from(local.len()).ok() != Some(args.nr_local) {
        return Err(MrError::Inval);
    }
    let pages = rdma_pages(local)?;
    let bytes = check_rdma_bytes(args, local)?;
    Ok((pages, bytes))
}

/// Step 5 of [`check_rdma_args`] alone: the sum of the local lengths
/// (exact, saturating), which must not exceed `remote_vec.bytes`.
///
/// # Errors
///
/// `Inval` when it does.
pub fn check_rdma_bytes(args: &RdmaArgs, local: &[RdsIovec]) -> Result<u64, MrError> {
    let bytes = local
        .iter()
        .fold(0u64, |acc, v| acc.saturating_add(v.bytes));
    if bytes > args.remote_vec.bytes {
        return Err(MrError::Inval);
    }
    Ok(bytes)
}

/// The alignment checks of an atomic:
///
/// 1. `local_addr` not 8-byte aligned: `Fault` (C `rds_cmsg_atomic`
///    returns `EFAULT` for this, not `EINVAL`);
/// 2. the remote address in zero-based coordinates (`remote_addr +
///    cookie_offset(cookie)`, [`AtomicArgs::op_remote_addr`]) not 8-byte
///    aligned: `Inval`. This is rds-rs's rule: C does not check it and
///    leaves it to the IB device, which fails the operation
///    asynchronously (a remote error in the completion); rds-rs refuses
///    it at `sendmsg`. As a cookie's offset is the registration's address
///    modulo the page size, this is the alignment of the remote user
///    address.
///
/// # Errors
///
/// As listed.
pub fn check_atomic(args: &AtomicArgs) -> Result<(), MrError> {
    if args.local_addr & 7 != 0 {
        return Err(MrError::Fault);
    }
    let remote = args
        .remote_addr
        .wrapping_add(u64::from(cookie_offset(args.cookie)));
    if remote & 7 != 0 {
        return Err(MrError::Inval);
    }
    Ok(())
}

/// A FIFO quarantine of recently retired R_Keys with a fixed capacity `N`
/// (the kernel picks `N`, e.g. 4096), held in an inline array, so it needs
/// no allocation. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantine<const N: usize> {
    /// Ring buffer; the `len` keys from `head` (wrapping) are held, oldest
    /// first.
    keys: [u32; N],
    /// Index of the oldest key (0 when empty).
    head: usize,
    /// Number of keys held, at most `N`.
    len: usize,
}

impl<const N: usize> Quarantine<N> {
    /// An empty quarantine.
    #[must_use]
    pub const fn new() -> Self {
        Quarantine {
            keys: [0; N],
            head: 0,
            len: 0,
        }
    }

    /// The held keys as (up to) two slices, oldest first.
    fn slices(&self) -> (&[u32], &[u32]) {
        let (before, from_head) = self.keys.split_at_checked(self.head).unwrap_or((&[], &[]));
        if self.len <= from_head.len() {
            (from_head.get(..self.len).unwrap_or(&[]), &[])
        } else {
            let wrapped = self.len.saturating_sub(from_head.len());
            (from_head, before.get(..wrapped).unwrap_or(&[]))
        }
    }

    /// Whether `key` is held (a linear scan of at most `N` keys).
    #[must_use]
    pub fn contains(&self, key: u32) -> bool {
        let (a, b) = self.slices();
        a.contains(&key) || b.contains(&key)
    }

    /// Adds a retired key as the newest, evicting the oldest when full;
    /// returns the evicted key. With `N == 0` nothing is held and `key`
    /// itself is returned.
    pub fn retire(&mut self, key: u32) -> Option<u32> {
        if N == 0 {
            return Some(key);
        }
        if self.len < N {
            // head < N and len < N, so the sum does not overflow.
            let pos = self.head.saturating_add(self.len).checked_rem(N)?;
            if let Some(slot) = self.keys.get_mut(pos) {
                *slot = key;
            }
            self.len = self.len.saturating_add(1);
            None
        } else {
            let slot = self.keys.get_mut(self.head)?;
            let evicted = *slot;
            *slot = key;
            self.head = self.head.saturating_add(1).checked_rem(N).unwrap_or(0);
            Some(evicted)
        }
    }

    /// The number of keys held.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The capacity, `N`.
    #[must_use]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The held keys, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (a, b) = self.slices();
        a.iter().chain(b).copied()
    }
}

impl<const N: usize> Default for Quarantine<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a random `candidate` may become a new R_Key: it is not 0, no
/// live MR has it (`live`, the caller's registry), and it is not in the
/// quarantine `q`.
#[must_use]
pub fn key_acceptable<const N: usize>(
    candidate: u32,
    live: impl Fn(u32) -> bool,
    q: &Quarantine<N>,
) -> bool {
    candidate != 0 && !live(candidate) && !q.contains(candidate)
}
