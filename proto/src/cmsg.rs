//! Control messages (`msg_control` of `sendmsg`): walking them as Linux's
//! `for_each_cmsghdr` + `CMSG_OK` do, and the checks C RDS makes on them in
//! `net/rds/send.c` (`rds_rdma_bytes`, `rds_rm_size`).
//!
//! The layout is the LP64 Linux one (`include/linux/socket.h`,
//! `struct cmsghdr`), integers in native byte order:
//!
//! | offset | field                                       |
//! |--------|---------------------------------------------|
//! | 0      | `__kernel_size_t cmsg_len` (8 bytes), header + data |
//! | 8      | `int cmsg_level`                            |
//! | 12     | `int cmsg_type`                             |
//! | 16     | data ([`CMSG_HDR_LEN`]), up to `cmsg_len`   |
//!
//! Each header starts at a multiple of 8 bytes (`CMSG_ALIGN`) from the
//! start of the buffer.

use super::barrier::RDS_CMSG_RDMA_ID;

/// Socket-level control messages and options (`SOL_SOCKET`).
pub const SOL_SOCKET: i32 = 1;
/// RDS control messages and socket options (`SOL_RDS`).
pub const SOL_RDS: i32 = 276;

/// `RDS_CMSG_RDMA_ARGS` (sendmsg): request an RDMA transfer; the data is a
/// `struct rds_rdma_args` ([`RDMA_ARGS_LEN`] bytes).
pub const RDS_CMSG_RDMA_ARGS: i32 = 1;
/// `RDS_CMSG_RDMA_DEST` (sendmsg, recvmsg): the RDMA cookie of the
/// intended source or destination of an RDMA transfer.
pub const RDS_CMSG_RDMA_DEST: i32 = 2;
/// `RDS_CMSG_RDMA_MAP` (sendmsg): map a memory range and send its R_Key in
/// an extension header; the data is a `struct rds_get_mr_args`.
pub const RDS_CMSG_RDMA_MAP: i32 = 3;
/// `RDS_CMSG_RDMA_STATUS` (recvmsg): status of a completed RDMA operation.
pub const RDS_CMSG_RDMA_STATUS: i32 = 4;
/// `RDS_CMSG_CONG_UPDATE` (recvmsg): congestion update, a 64-bit port mask.
pub const RDS_CMSG_CONG_UPDATE: i32 = 5;
/// `RDS_CMSG_ATOMIC_FADD` (sendmsg): atomic fetch-and-add.
pub const RDS_CMSG_ATOMIC_FADD: i32 = 6;
/// `RDS_CMSG_ATOMIC_CSWP` (sendmsg): atomic compare-and-swap.
pub const RDS_CMSG_ATOMIC_CSWP: i32 = 7;
/// `RDS_CMSG_MASKED_ATOMIC_FADD` (sendmsg): masked atomic fetch-and-add.
pub const RDS_CMSG_MASKED_ATOMIC_FADD: i32 = 8;
/// `RDS_CMSG_MASKED_ATOMIC_CSWP` (sendmsg): masked atomic compare-and-swap.
pub const RDS_CMSG_MASKED_ATOMIC_CSWP: i32 = 9;
/// `RDS_CMSG_RXPATH_LATENCY` (recvmsg): receive-path latency trace.
pub const RDS_CMSG_RXPATH_LATENCY: i32 = 11;
/// `RDS_CMSG_ZCOPY_COOKIE` (sendmsg): the `u32` cookie of a zero-copy send.
pub const RDS_CMSG_ZCOPY_COOKIE: i32 = 12;
/// `RDS_CMSG_ZCOPY_COMPLETION` (recvmsg): completed zero-copy cookies.
pub const RDS_CMSG_ZCOPY_COMPLETION: i32 = 13;

/// `sizeof(struct cmsghdr)` on 64-bit Linux; also the offset of the data.
pub const CMSG_HDR_LEN: usize = 16;
/// `sizeof(struct rds_rdma_args)`: cookie, `remote_vec` (addr, bytes),
/// `local_vec_addr`, `nr_local`, `flags`, `user_token`, each 8 bytes.
pub const RDMA_ARGS_LEN: usize = 56;
/// Offset of `remote_vec.bytes` in `struct rds_rdma_args`.
const RDMA_ARGS_REMOTE_BYTES: usize = 16;

/// `CMSG_ALIGN`: `len` rounded up to a multiple of 8 (`sizeof(long)`).
/// Saturates to `usize::MAX` where the rounding would overflow.
#[must_use]
pub const fn cmsg_align(len: usize) -> usize {
    match len.checked_add(7) {
        Some(v) => v & !7,
        None => usize::MAX,
    }
}

/// `CMSG_LEN`: the `cmsg_len` of a control message carrying `data_len`
/// bytes. Saturates to `usize::MAX`.
#[must_use]
pub const fn cmsg_len(data_len: usize) -> usize {
    CMSG_HDR_LEN.saturating_add(data_len)
}

/// `CMSG_SPACE`: the bytes a control message carrying `data_len` bytes
/// takes in a buffer, padding included. Saturates to `usize::MAX`.
#[must_use]
pub const fn cmsg_space(data_len: usize) -> usize {
    CMSG_HDR_LEN.saturating_add(cmsg_align(data_len))
}

/// A `struct cmsghdr`, the [`CMSG_HDR_LEN`] bytes in front of each control
/// message's data (see the table at the top of this module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmsgHdr {
    /// `cmsg_len`: header plus data, padding not included; as written,
    /// right or wrong.
    pub len: u64,
    /// `cmsg_level`, e.g. [`SOL_RDS`].
    pub level: i32,
    /// `cmsg_type`, e.g. [`RDS_CMSG_RDMA_ARGS`].
    pub kind: i32,
}

impl CmsgHdr {
    /// Reads the first [`CMSG_HDR_LEN`] bytes of `b`; `None` if shorter.
    /// Nothing is checked: see [`cmsgs`] for what makes a header valid.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        #[rustfmt::skip]
        let [
            l0, l1, l2, l3, l4, l5, l6, l7,
            v0, v1, v2, v3,
            t0, t1, t2, t3,
        ] = *b.first_chunk::<CMSG_HDR_LEN>()?;
        Some(CmsgHdr {
            len: u64::from_ne_bytes([l0, l1, l2, l3, l4, l5, l6, l7]),
            level: i32::from_ne_bytes([v0, v1, v2, v3]),
            kind: i32::from_ne_bytes([t0, t1, t2, t3]),
        })
    }

    /// The [`CMSG_HDR_LEN`] bytes of the header.
    #[must_use]
    pub fn encode(&self) -> [u8; CMSG_HDR_LEN] {
        let [l0, l1, l2, l3, l4, l5, l6, l7] = self.len.to_ne_bytes();
        let [v0, v1, v2, v3] = self.level.to_ne_bytes();
        let [t0, t1, t2, t3] = self.kind.to_ne_bytes();
        [
            l0, l1, l2, l3, l4, l5, l6, l7, v0, v1, v2, v3, t0, t1, t2, t3,
        ]
    }
}

/// One control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cmsg<'a> {
    /// `cmsg_level`, e.g. [`SOL_RDS`].
    pub level: i32,
    /// `cmsg_type`, e.g. [`RDS_CMSG_RDMA_ARGS`].
    pub kind: i32,
    /// The data: bytes [`CMSG_HDR_LEN`] up to `cmsg_len` of the message
    /// (the padding after it is not included).
    pub data: &'a [u8],
}

/// Errors of control-message checks; each maps to one errno of C RDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmsgError {
    /// `EINVAL`: a malformed header (not `CMSG_OK`), an unknown or
    /// too-short RDS control message, or a forbidden combination.
    Inval,
}

impl CmsgError {
    /// The positive errno C RDS returns (negated) for this error.
    #[must_use]
    pub const fn errno(self) -> i32 {
        match self {
            CmsgError::Inval => 22,
        }
    }
}

impl core::fmt::Display for CmsgError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CmsgError::Inval => write!(f, "invalid control message"),
        }
    }
}

impl core::error::Error for CmsgError {}

/// Iterator over the control messages of a `msg_control` buffer; see
/// [`cmsgs`].
#[derive(Clone, Debug)]
pub struct CmsgIter<'a> {
    /// The buffer from the current header to its end; empty when done.
    rest: &'a [u8],
}

/// Walks the control messages of `control` (the kernel's copy of
/// `msg_control`; `control.len()` is `msg_controllen`) exactly as Linux's
/// `for_each_cmsghdr` with a `CMSG_OK` check on each header does:
///
/// - the first header exists only if the buffer holds at least
///   [`CMSG_HDR_LEN`] bytes;
/// - a header is OK iff `cmsg_len` >= [`CMSG_HDR_LEN`] and `cmsg_len` is at
///   most the number of bytes from the header's start to the end of the
///   buffer; a header that is not OK yields [`CmsgError::Inval`] once, and
///   iteration ends;
/// - the next header starts [`cmsg_align`]`(cmsg_len)` bytes after the
///   current one; iteration ends when it would not fit entirely (16 bytes)
///   in the buffer (`__cmsg_nxthdr`). Trailing bytes are ignored.
///
/// The iterator never panics, whatever the bytes.
#[must_use]
pub fn cmsgs(control: &[u8]) -> CmsgIter<'_> {
    CmsgIter { rest: control }
}

impl<'a> Iterator for CmsgIter<'a> {
    type Item = Result<Cmsg<'a>, CmsgError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        let Some(hdr) = CmsgHdr::decode(rest) else {
            self.rest = &[];
            return None;
        };
        // CMSG_OK; a length that does not fit a usize cannot fit the buffer.
        let data = match usize::try_from(hdr.len) {
            Ok(len) if len >= CMSG_HDR_LEN => rest.get(CMSG_HDR_LEN..len),
            _ => None,
        };
        let Some(data) = data else {
            self.rest = &[];
            return Some(Err(CmsgError::Inval));
        };
        // `data.len() + CMSG_HDR_LEN` is `cmsg_len`, which fits in the buffer.
        let step = cmsg_align(CMSG_HDR_LEN.saturating_add(data.len()));
        self.rest = match rest.get(step..) {
            Some(next) if next.len() >= CMSG_HDR_LEN => next,
            _ => &[],
        };
        Some(Ok(Cmsg {
            level: hdr.level,
            kind: hdr.kind,
            data,
        }))
    }
}

impl core::iter::FusedIterator for CmsgIter<'_> {}

/// `rds_rdma_bytes`: the sum of `remote_vec.bytes` over every
/// [`SOL_RDS`] / [`RDS_CMSG_RDMA_ARGS`] control message, wrapping as C's
/// `size_t` does. `rds_sendmsg` compares it with `RDS_MAX_MSG_SIZE`.
///
/// # Errors
///
/// [`CmsgError::Inval`] on a header that is not `CMSG_OK`, or an
/// `RDS_CMSG_RDMA_ARGS` whose `cmsg_len` is shorter than
/// `CMSG_LEN(sizeof(struct rds_rdma_args))` (72).
pub fn rdma_bytes(control: &[u8]) -> Result<u64, CmsgError> {
    let mut sum: u64 = 0;
    for c in cmsgs(control) {
        let c = c?;
        if c.level != SOL_RDS || c.kind != RDS_CMSG_RDMA_ARGS {
            continue;
        }
        if c.data.len() < RDMA_ARGS_LEN {
            return Err(CmsgError::Inval);
        }
        let bytes = c
            .data
            .get(RDMA_ARGS_REMOTE_BYTES..)
            .and_then(|d| d.first_chunk::<8>())
            .ok_or(CmsgError::Inval)?;
        sum = sum.wrapping_add(u64::from_ne_bytes(*bytes));
    }
    Ok(sum)
}

/// What `rds_rm_size` learns from the control messages of a `sendmsg`;
/// see [`scan_send_cmsgs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendCmsgs {
    /// Number of [`RDS_CMSG_RDMA_ARGS`].
    pub rdma_args: usize,
    /// Number of [`RDS_CMSG_RDMA_DEST`].
    pub rdma_dest: usize,
    /// Number of [`RDS_CMSG_RDMA_MAP`].
    pub rdma_map: usize,
    /// Number of [`RDS_CMSG_ATOMIC_FADD`], [`RDS_CMSG_ATOMIC_CSWP`],
    /// [`RDS_CMSG_MASKED_ATOMIC_FADD`] and [`RDS_CMSG_MASKED_ATOMIC_CSWP`]
    /// together.
    pub atomics: usize,
    /// The cookie of the [`RDS_CMSG_ZCOPY_COOKIE`]s given, if any: the last one's first four
    /// bytes (native byte order), or [`CmsgError::Inval`] if one of them is shorter than that
    /// (C's `rds_cmsg_zcopy`: `cmsg_len < CMSG_LEN(sizeof(u32))`, for each in walk order; a
    /// longer one is fine). `rds_rm_size` does not look at the length, so the walk does not
    /// fail for it: C returns this error later (`rds_cmsg_send`, once the message is built),
    /// and so does the caller.
    pub zcopy_cookie: Option<Result<u32, CmsgError>>,
    /// Number of rds-rs's [`RDS_CMSG_RDMA_ID`] (where to write the id of the message's RDMA
    /// or atomic operation).
    pub rdma_id: usize,
}

/// `rds_rm_size`'s walk over the control messages of a `sendmsg`: counts
/// the RDS control messages by kind and applies its validity rules.
/// Control messages of other levels are skipped.
///
/// `zerocopy` is whether `MSG_ZEROCOPY` is in the `sendmsg` flags. C tests
/// the flag itself here, not whether the socket has `SO_ZEROCOPY` set (which
/// `rds_sendmsg` requires before it actually sends zero-copy).
///
/// The content of the messages is not looked at (C reads
/// `struct rds_rdma_args` in `rds_rdma_extra_size`, after [`rdma_bytes`]
/// checked its length), except for the zero-copy cookie, which is read
/// here rather than in a second walk (C: `rds_cmsg_send`); one too short is
/// not an error of the walk but noted in [`SendCmsgs::zcopy_cookie`].
///
/// # Errors
///
/// [`CmsgError::Inval`] when
/// - a header is not `CMSG_OK`;
/// - an [`SOL_RDS`] control message has a type other than
///   [`RDS_CMSG_RDMA_ARGS`], [`RDS_CMSG_RDMA_DEST`], [`RDS_CMSG_RDMA_MAP`],
///   [`RDS_CMSG_ZCOPY_COOKIE`] or one of the four atomic types;
/// - `zerocopy` is set and no [`RDS_CMSG_ZCOPY_COOKIE`] was given;
/// - RDMA_DEST, RDMA_MAP or ZCOPY_COOKIE is combined with RDMA_ARGS or an
///   atomic;
/// - (rds-rs's extension) [`RDS_CMSG_RDMA_ID`] is given more than once, or
///   without an RDMA_ARGS or atomic operation to number.
pub fn scan_send_cmsgs(control: &[u8], zerocopy: bool) -> Result<SendCmsgs, CmsgError> {
    scan_send_cmsgs_with(control, zerocopy, |_| Ok::<(), CmsgError>(()))
}

/// [`scan_send_cmsgs`] with C's per-`RDMA_ARGS` work done in walk order: `on_args` gets the
/// data of each [`RDS_CMSG_RDMA_ARGS`] as the walk reaches it (C: `rds_rdma_extra_size`, which
/// reads and checks the local iovecs there), and its error ends the walk, before later control
/// messages and before the combination rules are looked at, as in C.
///
/// # Errors
///
/// As [`scan_send_cmsgs`], converted into `E`, or `on_args`'s error.
pub fn scan_send_cmsgs_with<E: From<CmsgError>>(
    control: &[u8],
    zerocopy: bool,
    mut on_args: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<SendCmsgs, E> {
    let mut s = SendCmsgs::default();
    for c in cmsgs(control) {
        let c = c?;
        if c.level != SOL_RDS {
            continue;
        }
        match c.kind {
            RDS_CMSG_RDMA_ARGS => {
                on_args(c.data)?;
                s.rdma_args = s.rdma_args.saturating_add(1);
            }
            RDS_CMSG_ZCOPY_COOKIE => {
                // A short one stays an error whatever comes after it (C stops at it).
                if !matches!(s.zcopy_cookie, Some(Err(_))) {
                    s.zcopy_cookie = Some(zcopy_cookie(c.data));
                }
            }
            RDS_CMSG_RDMA_DEST => s.rdma_dest = s.rdma_dest.saturating_add(1),
            RDS_CMSG_RDMA_MAP => s.rdma_map = s.rdma_map.saturating_add(1),
            RDS_CMSG_ATOMIC_CSWP
            | RDS_CMSG_ATOMIC_FADD
            | RDS_CMSG_MASKED_ATOMIC_CSWP
            | RDS_CMSG_MASKED_ATOMIC_FADD => s.atomics = s.atomics.saturating_add(1),
            RDS_CMSG_RDMA_ID => s.rdma_id = s.rdma_id.saturating_add(1),
            _ => return Err(CmsgError::Inval.into()),
        }
    }
    if zerocopy && s.zcopy_cookie.is_none() {
        return Err(CmsgError::Inval.into());
    }
    // Ensure (DEST, MAP, ZCOPY_COOKIE) are never used with (ARGS, ATOMIC).
    let group_dest = s.rdma_dest != 0 || s.rdma_map != 0 || s.zcopy_cookie.is_some();
    let group_args = s.rdma_args != 0 || s.atomics != 0;
    if group_dest && group_args {
        return Err(CmsgError::Inval.into());
    }
    if s.rdma_id > 1 || (s.rdma_id == 1 && !group_args) {
        return Err(CmsgError::Inval.into());
    }
    Ok(s)
}

/// The cookie in the data of an [`RDS_CMSG_ZCOPY_COOKIE`] (C: `rds_cmsg_zcopy`): its first
/// four bytes; [`CmsgError::Inval`] when it has fewer.
fn zcopy_cookie(data: &[u8]) -> Result<u32, CmsgError> {
    let b = data.first_chunk::<4>().ok_or(CmsgError::Inval)?;
    Ok(u32::from_ne_bytes(*b))
}

/// Writes a control message (header, `data`, zero padding up to
/// [`cmsg_space`]`(data.len())`) to the front of `out`, as user space
/// builds `msg_control`. `cmsg_len` is [`cmsg_len`]`(data.len())`.
///
/// Returns the bytes written, [`cmsg_space`]`(data.len())`, or `None` (and
/// `out` untouched) when they do not fit in `out`.
#[must_use]
pub fn encode_cmsg(level: i32, kind: i32, data: &[u8], out: &mut [u8]) -> Option<usize> {
    let space = cmsg_space(data.len());
    let len = u64::try_from(cmsg_len(data.len())).ok()?;
    let dst = out.get_mut(..space)?;
    let (hdr, body) = dst.split_first_chunk_mut::<CMSG_HDR_LEN>()?;
    *hdr = CmsgHdr { len, level, kind }.encode();
    body.fill(0);
    for (d, s) in body.iter_mut().zip(data) {
        *d = *s;
    }
    Some(space)
}
