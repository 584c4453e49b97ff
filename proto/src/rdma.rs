//! The RDMA ABI of `include/uapi/linux/rds.h`: the argument structs of
//! `RDS_GET_MR`, `RDS_GET_MR_FOR_DEST`, `RDS_FREE_MR`, `RDS_CMSG_RDMA_ARGS`,
//! `RDS_CMSG_RDMA_MAP` and the atomic control messages; the
//! `RDS_CMSG_RDMA_STATUS` notification; RDMA cookies
//! (`net/rds/rds.h`); and the semantics of the IB masked atomics that C RDS
//! maps every atomic onto (`net/rds/rdma.c` `rds_cmsg_atomic`,
//! `net/rds/ib_send.c` `rds_ib_xmit_atomic`).
//!
//! Every field is native-endian (these structs never go on the wire, only
//! between user space and the kernel) and every struct has 8-byte alignment
//! and no padding except [`RdmaNotify`]'s tail. The sizes and offsets below
//! were checked with `offsetof`/`sizeof` against the 6.12 uapi header on
//! x86-64 (LP64).
//!
//! `struct rds_iovec` ([`RdsIovec`], 16 bytes):
//!
//! | offset | field          |
//! |--------|----------------|
//! | 0      | `__u64 addr`   |
//! | 8      | `__u64 bytes`  |
//!
//! `struct rds_get_mr_args` ([`GetMrArgs`], [`GET_MR_ARGS_LEN`] = 32) and
//! `struct rds_get_mr_for_dest_args` ([`GetMrForDestArgs`],
//! [`GET_MR_FOR_DEST_ARGS_LEN`] = 160):
//!
//! | `get_mr` | `get_mr_for_dest` | field                                         |
//! |----------|-------------------|-----------------------------------------------|
//! |          | 0                 | `struct __kernel_sockaddr_storage dest_addr` (128) |
//! | 0        | 128               | `struct rds_iovec vec`                        |
//! | 16       | 144               | `__u64 cookie_addr`                           |
//! | 24       | 152               | `__u64 flags`                                 |
//!
//! `struct rds_free_mr_args` ([`FreeMrArgs`], [`FREE_MR_ARGS_LEN`] = 16):
//! `cookie` at 0, `flags` at 8.
//!
//! `struct rds_rdma_args` ([`RdmaArgs`], [`RDMA_ARGS_LEN`] = 56):
//!
//! | offset | field                                   |
//! |--------|-----------------------------------------|
//! | 0      | `rds_rdma_cookie_t cookie`              |
//! | 8      | `struct rds_iovec remote_vec` (addr 8, bytes 16) |
//! | 24     | `__u64 local_vec_addr`                  |
//! | 32     | `__u64 nr_local`                        |
//! | 40     | `__u64 flags`                           |
//! | 48     | `__u64 user_token`                      |
//!
//! `struct rds_atomic_args` ([`AtomicArgs`], [`ATOMIC_ARGS_LEN`] = 72):
//!
//! | offset | field                | `cswp`    | `fadd` | `m_cswp`       | `m_fadd`       |
//! |--------|----------------------|-----------|--------|----------------|----------------|
//! | 0      | `cookie`             |           |        |                |                |
//! | 8      | `__u64 local_addr`   |           |        |                |                |
//! | 16     | `__u64 remote_addr`  |           |        |                |                |
//! | 24     | union (32 bytes)     | `compare` | `add`  | `compare`      | `add`          |
//! | 32     |                      | `swap`    |        | `swap`         | `nocarry_mask` |
//! | 40     |                      |           |        | `compare_mask` |                |
//! | 48     |                      |           |        | `swap_mask`    |                |
//! | 56     | `__u64 flags`        |           |        |                |                |
//! | 64     | `__u64 user_token`   |           |        |                |                |
//!
//! `struct rds_rdma_notify` ([`RdmaNotify`], [`RDMA_NOTIFY_LEN`] = 16):
//! `user_token` at 0, `__s32 status` at 8, 4 bytes of tail padding.

use super::cmsg::{
    RDMA_ARGS_LEN, RDS_CMSG_ATOMIC_CSWP, RDS_CMSG_ATOMIC_FADD, RDS_CMSG_MASKED_ATOMIC_CSWP,
    RDS_CMSG_MASKED_ATOMIC_FADD,
};

/// `RDS_RDMA_READWRITE`: on `RDS_CMSG_RDMA_ARGS`, an RDMA write (local to
/// remote) instead of a read; on a registration, a writable MR.
pub const RDS_RDMA_READWRITE: u64 = 0x1;
/// `RDS_RDMA_FENCE`: the immediate-data message waits for the RDMA to
/// complete (IB send fence).
pub const RDS_RDMA_FENCE: u64 = 0x2;
/// `RDS_RDMA_INVALIDATE`: invalidate the R_Key when the MR is freed.
pub const RDS_RDMA_INVALIDATE: u64 = 0x4;
/// `RDS_RDMA_USE_ONCE`: free the MR once it has been used (when the peer's
/// message that used it arrives).
pub const RDS_RDMA_USE_ONCE: u64 = 0x8;
/// `RDS_RDMA_DONTWAIT`: do not block in the barrier (C's deprecated
/// `RDS_BARRIER`; rds-rs's [`RDS_BARRIER`](super::RDS_BARRIER)).
pub const RDS_RDMA_DONTWAIT: u64 = 0x10;
/// `RDS_RDMA_NOTIFY_ME`: queue an `RDS_CMSG_RDMA_STATUS` notification when
/// the operation completes.
pub const RDS_RDMA_NOTIFY_ME: u64 = 0x20;
/// `RDS_RDMA_SILENT`: do not deliver the immediate-data message to the
/// remote socket.
pub const RDS_RDMA_SILENT: u64 = 0x40;

/// `RDS_RDMA_SUCCESS`: [`RdmaNotify::status`] of an operation that
/// completed.
pub const RDS_RDMA_SUCCESS: i32 = 0;
/// `RDS_RDMA_REMOTE_ERROR`: the remote side failed the operation.
pub const RDS_RDMA_REMOTE_ERROR: i32 = 1;
/// `RDS_RDMA_CANCELED`: the message was cancelled (`RDS_CANCEL_SENT_TO`).
pub const RDS_RDMA_CANCELED: i32 = 2;
/// `RDS_RDMA_DROPPED`: the message was dropped (connection reset, socket
/// closed).
pub const RDS_RDMA_DROPPED: i32 = 3;
/// `RDS_RDMA_OTHER_ERROR`: any other failure.
pub const RDS_RDMA_OTHER_ERROR: i32 = 4;

/// `UIO_MAXIOV`: the most local iovecs one `RDS_CMSG_RDMA_ARGS` may name.
pub const UIO_MAXIOV: u64 = 1024;
/// `PAGE_SIZE` of the kernels rds-rs supports (4 KiB pages).
pub const PAGE_SIZE: u64 = 4096;
/// `PAGE_SHIFT`: log2 of [`PAGE_SIZE`].
const PAGE_SHIFT: u32 = 12;
/// `RDS_MAX_MSG_SIZE` (`net/rds/rds.h`), 1 MiB: the largest message
/// payload, the largest sum of `remote_vec.bytes` of one `sendmsg`, and
/// (in pages, plus one for misalignment) the largest MR.
pub const MAX_MSG_SIZE: u64 = 1 << 20;

/// `sizeof(struct rds_iovec)`.
pub const RDS_IOVEC_LEN: usize = 16;
/// `sizeof(struct rds_get_mr_args)`.
pub const GET_MR_ARGS_LEN: usize = 32;
/// `sizeof(struct rds_get_mr_for_dest_args)`.
pub const GET_MR_FOR_DEST_ARGS_LEN: usize = 160;
/// `sizeof(struct __kernel_sockaddr_storage)`.
pub const SOCKADDR_STORAGE_LEN: usize = 128;
/// `sizeof(struct rds_free_mr_args)`.
pub const FREE_MR_ARGS_LEN: usize = 16;
/// `sizeof(struct rds_atomic_args)`: cookie, `local_addr`, `remote_addr`,
/// the 32-byte union, `flags`, `user_token`.
pub const ATOMIC_ARGS_LEN: usize = 72;
/// `sizeof(struct rds_rdma_notify)`: 12 bytes of fields, padded to 16.
pub const RDMA_NOTIFY_LEN: usize = 16;

/// The native-endian `u64` at `off` in `b`, if `b` holds it.
fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..)
        .and_then(|r| r.first_chunk::<8>())
        .map(|c| u64::from_ne_bytes(*c))
}

/// Writes `v` native-endian at `off` in `out`; does nothing if it does not
/// fit (never the case for the fixed-size buffers of this module).
fn put_u64(out: &mut [u8], off: usize, v: u64) {
    if let Some(c) = out.get_mut(off..).and_then(|r| r.first_chunk_mut::<8>()) {
        *c = v.to_ne_bytes();
    }
}

/// `rds_rdma_make_cookie`: the 64-bit RDMA cookie naming the MR with
/// R_Key `r_key`, `offset` bytes into its first page:
/// `r_key | (u64)offset << 32`.
#[must_use]
pub const fn make_cookie(r_key: u32, offset: u32) -> u64 {
    let [k0, k1, k2, k3] = r_key.to_le_bytes();
    let [o0, o1, o2, o3] = offset.to_le_bytes();
    u64::from_le_bytes([k0, k1, k2, k3, o0, o1, o2, o3])
}

/// `rds_rdma_cookie_key`: the R_Key of a cookie, its low 32 bits.
#[must_use]
pub const fn cookie_key(c: u64) -> u32 {
    let [b0, b1, b2, b3, _, _, _, _] = c.to_le_bytes();
    u32::from_le_bytes([b0, b1, b2, b3])
}

/// `rds_rdma_cookie_offset`: the offset of a cookie, its high 32 bits.
#[must_use]
pub const fn cookie_offset(c: u64) -> u32 {
    let [_, _, _, _, b4, b5, b6, b7] = c.to_le_bytes();
    u32::from_le_bytes([b4, b5, b6, b7])
}

/// `struct rds_iovec`: a range of user memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdsIovec {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub bytes: u64,
}

impl RdsIovec {
    /// Reads the first [`RDS_IOVEC_LEN`] bytes of `b`; `None` if shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(RdsIovec {
            addr: get_u64(b, 0)?,
            bytes: get_u64(b, 8)?,
        })
    }

    /// The 16 bytes of the C struct.
    #[must_use]
    pub fn encode(&self) -> [u8; RDS_IOVEC_LEN] {
        let mut out = [0u8; RDS_IOVEC_LEN];
        put_u64(&mut out, 0, self.addr);
        put_u64(&mut out, 8, self.bytes);
        out
    }

    /// `rds_pages_in_vec`: 0 when `addr + bytes` wraps (or `bytes` is 0, as
    /// C's `addr + bytes <= addr` test also rejects) or `bytes` exceeds
    /// `u32::MAX` (C keeps lengths in a scatterlist's `unsigned int`), else
    /// the number of 4 KiB pages the range touches. At most
    /// `2^20 + 1`.
    ///
    /// C computes `((addr + bytes + PAGE_SIZE - 1) >> PAGE_SHIFT) -
    /// (addr >> PAGE_SHIFT)` in `u64` and truncates it to `unsigned int`;
    /// the intermediate sum can wrap for ranges ending in the last page of
    /// the address space, but the wrap is a multiple of 2^52 pages, which
    /// the truncation removes, so C's result is always the true count
    /// computed here.
    #[must_use]
    pub fn pages(&self) -> u64 {
        let Some(end) = self.addr.checked_add(self.bytes) else {
            return 0;
        };
        if end <= self.addr || self.bytes > u64::from(u32::MAX) {
            return 0;
        }
        // end > addr >= 0, so end - 1 does not wrap; last >= first.
        let last = end.saturating_sub(1).wrapping_shr(PAGE_SHIFT);
        let first = self.addr.wrapping_shr(PAGE_SHIFT);
        last.saturating_sub(first).saturating_add(1)
    }
}

/// `struct rds_get_mr_args`: the `RDS_GET_MR` socket option and the
/// `RDS_CMSG_RDMA_MAP` control message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GetMrArgs {
    /// The user memory to register.
    pub vec: RdsIovec,
    /// Where the kernel writes the new MR's cookie (`u64`); 0 for nowhere.
    pub cookie_addr: u64,
    /// [`RDS_RDMA_USE_ONCE`], [`RDS_RDMA_INVALIDATE`],
    /// [`RDS_RDMA_READWRITE`]; other bits are ignored, as in C.
    pub flags: u64,
}

impl GetMrArgs {
    /// Reads the first [`GET_MR_ARGS_LEN`] bytes of `b`; `None` if shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(GetMrArgs {
            vec: RdsIovec {
                addr: get_u64(b, 0)?,
                bytes: get_u64(b, 8)?,
            },
            cookie_addr: get_u64(b, 16)?,
            flags: get_u64(b, 24)?,
        })
    }

    /// The 32 bytes of the C struct.
    #[must_use]
    pub fn encode(&self) -> [u8; GET_MR_ARGS_LEN] {
        let mut out = [0u8; GET_MR_ARGS_LEN];
        put_u64(&mut out, 0, self.vec.addr);
        put_u64(&mut out, 8, self.vec.bytes);
        put_u64(&mut out, 16, self.cookie_addr);
        put_u64(&mut out, 24, self.flags);
        out
    }
}

/// `struct rds_get_mr_for_dest_args`: the `RDS_GET_MR_FOR_DEST` socket
/// option. C ignores `dest` (`rds_get_mr_for_dest` behaves like
/// `rds_get_mr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetMrForDestArgs {
    /// `dest_addr`: the bytes of a `struct __kernel_sockaddr_storage`.
    pub dest: [u8; SOCKADDR_STORAGE_LEN],
    /// The user memory to register.
    pub vec: RdsIovec,
    /// Where the kernel writes the new MR's cookie; 0 for nowhere.
    pub cookie_addr: u64,
    /// As [`GetMrArgs::flags`].
    pub flags: u64,
}

impl Default for GetMrForDestArgs {
    fn default() -> Self {
        GetMrForDestArgs {
            dest: [0; SOCKADDR_STORAGE_LEN],
            vec: RdsIovec::default(),
            cookie_addr: 0,
            flags: 0,
        }
    }
}

impl GetMrForDestArgs {
    /// Reads the first [`GET_MR_FOR_DEST_ARGS_LEN`] bytes of `b`; `None` if
    /// shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        let (dest, rest) = b.split_first_chunk::<SOCKADDR_STORAGE_LEN>()?;
        let a = GetMrArgs::decode(rest)?;
        Some(GetMrForDestArgs {
            dest: *dest,
            vec: a.vec,
            cookie_addr: a.cookie_addr,
            flags: a.flags,
        })
    }

    /// The 160 bytes of the C struct.
    #[must_use]
    pub fn encode(&self) -> [u8; GET_MR_FOR_DEST_ARGS_LEN] {
        let mut out = [0u8; GET_MR_FOR_DEST_ARGS_LEN];
        if let Some((dest, rest)) = out.split_first_chunk_mut::<SOCKADDR_STORAGE_LEN>() {
            *dest = self.dest;
            if let Some(r) = rest.first_chunk_mut::<GET_MR_ARGS_LEN>() {
                *r = self.as_get_mr_args().encode();
            }
        }
        out
    }

    /// The `struct rds_get_mr_args` C builds from it
    /// (`rds_get_mr_for_dest`: `vec`, `cookie_addr` and `flags` copied).
    #[must_use]
    pub const fn as_get_mr_args(&self) -> GetMrArgs {
        GetMrArgs {
            vec: self.vec,
            cookie_addr: self.cookie_addr,
            flags: self.flags,
        }
    }
}

/// `struct rds_free_mr_args`: the `RDS_FREE_MR` socket option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreeMrArgs {
    /// The cookie of the MR to free (only its R_Key is looked at); 0 means
    /// "flush the transport's unused MRs".
    pub cookie: u64,
    /// [`RDS_RDMA_INVALIDATE`]; other bits are ignored, as in C.
    pub flags: u64,
}

impl FreeMrArgs {
    /// Reads the first [`FREE_MR_ARGS_LEN`] bytes of `b`; `None` if shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(FreeMrArgs {
            cookie: get_u64(b, 0)?,
            flags: get_u64(b, 8)?,
        })
    }

    /// The 16 bytes of the C struct.
    #[must_use]
    pub fn encode(&self) -> [u8; FREE_MR_ARGS_LEN] {
        let mut out = [0u8; FREE_MR_ARGS_LEN];
        put_u64(&mut out, 0, self.cookie);
        put_u64(&mut out, 8, self.flags);
        out
    }
}

/// `struct rds_rdma_args`: the `RDS_CMSG_RDMA_ARGS` control message
/// ([`RDMA_ARGS_LEN`] bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaArgs {
    /// The cookie of the remote MR.
    pub cookie: u64,
    /// The remote range: `addr` is relative to the start of the remote
    /// user buffer (see [`RdmaArgs::op_remote_addr`]); `bytes` bounds the
    /// sum of the local iovecs' lengths.
    pub remote_vec: RdsIovec,
    /// User address of the `nr_local` local `struct rds_iovec`s.
    pub local_vec_addr: u64,
    /// Number of local iovecs, 1 to [`UIO_MAXIOV`].
    pub nr_local: u64,
    /// [`RDS_RDMA_READWRITE`], [`RDS_RDMA_FENCE`], [`RDS_RDMA_NOTIFY_ME`],
    /// [`RDS_RDMA_SILENT`]; other bits are ignored, as in C.
    pub flags: u64,
    /// Returned in the operation's [`RdmaNotify`].
    pub user_token: u64,
}

impl RdmaArgs {
    /// Reads the first [`RDMA_ARGS_LEN`] bytes of `b`; `None` if shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        Some(RdmaArgs {
            cookie: get_u64(b, 0)?,
            remote_vec: RdsIovec {
                addr: get_u64(b, 8)?,
                bytes: get_u64(b, 16)?,
            },
            local_vec_addr: get_u64(b, 24)?,
            nr_local: get_u64(b, 32)?,
            flags: get_u64(b, 40)?,
            user_token: get_u64(b, 48)?,
        })
    }

    /// The 56 bytes of the C struct.
    #[must_use]
    pub fn encode(&self) -> [u8; RDMA_ARGS_LEN] {
        let mut out = [0u8; RDMA_ARGS_LEN];
        put_u64(&mut out, 0, self.cookie);
        put_u64(&mut out, 8, self.remote_vec.addr);
        put_u64(&mut out, 16, self.remote_vec.bytes);
        put_u64(&mut out, 24, self.local_vec_addr);
        put_u64(&mut out, 32, self.nr_local);
        put_u64(&mut out, 40, self.flags);
        put_u64(&mut out, 48, self.user_token);
        out
    }

    /// C's `op_rkey`: the R_Key of [`RdmaArgs::cookie`].
    #[must_use]
    pub const fn op_rkey(&self) -> u32 {
        cookie_key(self.cookie)
    }

    /// C's `op_remote_addr`: `remote_vec.addr + cookie_offset(cookie)`
    /// (wrapping, as C's `u64`), the address in the MR's zero-based
    /// coordinates (see `Region`).
    #[must_use]
    pub const fn op_remote_addr(&self) -> u64 {
        self.remote_vec
            .addr
            .wrapping_add(cookie_offset(self.cookie) as u64)
    }

    /// Whether this is an RDMA write ([`RDS_RDMA_READWRITE`]).
    #[must_use]
    pub const fn is_write(&self) -> bool {
        self.flags & RDS_RDMA_READWRITE != 0
    }
}

/// The operation of an atomic control message, in the masked form C RDS
/// always issues (`rds_cmsg_atomic` converts the unmasked cmsgs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Masked fetch-and-add.
    Fadd {
        /// The addend.
        add: u64,
        /// Field boundaries: a carry out of a bit whose mask bit is set is
        /// discarded. 0 for a plain 64-bit add.
        nocarry_mask: u64,
    },
    /// Masked compare-and-swap.
    Cswp {
        /// Compared with the remote value under `compare_mask`.
        compare: u64,
        /// Written under `swap_mask` on a match.
        swap: u64,
        /// The bits compared; `!0` for a plain compare-and-swap.
        compare_mask: u64,
        /// The bits swapped; `!0` for a plain compare-and-swap.
        swap_mask: u64,
    },
}

impl AtomicOp {
    /// What the remote 8 bytes become when the operation meets `old`
    /// there, with the semantics of the IB masked atomics
    /// (`IB_WR_MASKED_ATOMIC_FETCH_AND_ADD`,
    /// `IB_WR_MASKED_ATOMIC_CMP_AND_SWP`, as Linux commit 5e80ba8ff0bd
    /// "IB/core: Add support for masked atomic operations" and the
    /// ConnectX "Enhanced Atomic Operations" define them). The initiator
    /// reads back `old` in every case (the fetch of fetch-and-add, the
    /// response of compare-and-swap, whether or not it swapped).
    ///
    /// - [`AtomicOp::Fadd`]: `add` is added to `old` bit by bit from bit 0
    ///   up, and the carry out of bit `i` is dropped when bit `i` of
    ///   `nocarry_mask` is set (and out of bit 63 always). So a set mask bit
    ///   marks the most significant bit of a field, and each field is an
    ///   independent wrapping addition. With `nocarry_mask == 0` this is a
    ///   plain wrapping 64-bit add.
    /// - [`AtomicOp::Cswp`]: if `(old & compare_mask) == (compare &
    ///   compare_mask)` the result is `(old & !swap_mask) | (swap &
    ///   swap_mask)`, else `old`.
    ///
    /// The fetch-and-add is computed without a loop: adding with every
    /// field's top bit cleared cannot carry across a boundary (the carry
    /// out of the bit below a boundary lands in the cleared boundary bit),
    /// and the boundary bits are then the sum bit `a ^ b ^ carry_in`.
    #[must_use]
    pub const fn apply(&self, old: u64) -> u64 {
        match *self {
            AtomicOp::Fadd { add, nocarry_mask } => {
                let low = (old & !nocarry_mask).wrapping_add(add & !nocarry_mask);
                low ^ ((old ^ add) & nocarry_mask)
            }
            AtomicOp::Cswp {
                compare,
                swap,
                compare_mask,
                swap_mask,
            } => {
                if (old ^ compare) & compare_mask == 0 {
                    (old & !swap_mask) | (swap & swap_mask)
                } else {
                    old
                }
            }
        }
    }
}

/// `struct rds_atomic_args`: the four atomic control messages
/// ([`ATOMIC_ARGS_LEN`] bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicArgs {
    /// The cookie of the remote MR.
    pub cookie: u64,
    /// User address of the local 8 bytes that receive the old remote value.
    pub local_addr: u64,
    /// The remote address, relative to the start of the remote user
    /// buffer (see [`AtomicArgs::op_remote_addr`]).
    pub remote_addr: u64,
    /// The operation, masked form.
    pub op: AtomicOp,
    /// [`RDS_RDMA_NOTIFY_ME`], [`RDS_RDMA_SILENT`]; other bits are ignored,
    /// as in C.
    pub flags: u64,
    /// Returned in the operation's [`RdmaNotify`].
    pub user_token: u64,
}

impl AtomicArgs {
    /// Reads an atomic control message of type `kind` as `rds_cmsg_atomic`
    /// does, mapping the four types onto the masked operations:
    ///
    /// - `RDS_CMSG_ATOMIC_FADD`: `fadd.add`, `nocarry_mask` 0;
    /// - `RDS_CMSG_MASKED_ATOMIC_FADD`: `m_fadd.add`, `m_fadd.nocarry_mask`;
    /// - `RDS_CMSG_ATOMIC_CSWP`: `cswp.compare`, `cswp.swap`, both masks
    ///   `!0`;
    /// - `RDS_CMSG_MASKED_ATOMIC_CSWP`: the four `m_cswp` fields.
    ///
    /// Union bytes the type does not use are ignored. `None` when `kind` is
    /// none of these or `data` is shorter than [`ATOMIC_ARGS_LEN`] (C:
    /// `cmsg_len < CMSG_LEN(sizeof(struct rds_atomic_args))`, `EINVAL`,
    /// for every type). Bytes past [`ATOMIC_ARGS_LEN`] are ignored.
    #[must_use]
    pub fn decode(kind: i32, data: &[u8]) -> Option<Self> {
        let data = data.get(..ATOMIC_ARGS_LEN)?;
        let u0 = get_u64(data, 24)?;
        let u1 = get_u64(data, 32)?;
        let u2 = get_u64(data, 40)?;
        let u3 = get_u64(data, 48)?;
        let op = match kind {
            RDS_CMSG_ATOMIC_FADD => AtomicOp::Fadd {
                add: u0,
                nocarry_mask: 0,
            },
            RDS_CMSG_MASKED_ATOMIC_FADD => AtomicOp::Fadd {
                add: u0,
                nocarry_mask: u1,
            },
            RDS_CMSG_ATOMIC_CSWP => AtomicOp::Cswp {
                compare: u0,
                swap: u1,
                compare_mask: !0,
                swap_mask: !0,
            },
            RDS_CMSG_MASKED_ATOMIC_CSWP => AtomicOp::Cswp {
                compare: u0,
                swap: u1,
                compare_mask: u2,
                swap_mask: u3,
            },
            _ => return None,
        };
        Some(AtomicArgs {
            cookie: get_u64(data, 0)?,
            local_addr: get_u64(data, 8)?,
            remote_addr: get_u64(data, 16)?,
            op,
            flags: get_u64(data, 56)?,
            user_token: get_u64(data, 64)?,
        })
    }

    /// The control-message type that expresses [`AtomicArgs::op`] most
    /// simply: the unmasked type when the masks are the unmasked ones
    /// (`nocarry_mask` 0; both compare-and-swap masks `!0`), else the
    /// masked one.
    #[must_use]
    pub const fn natural_kind(&self) -> i32 {
        match self.op {
            AtomicOp::Fadd {
                nocarry_mask: 0, ..
            } => RDS_CMSG_ATOMIC_FADD,
            AtomicOp::Fadd { .. } => RDS_CMSG_MASKED_ATOMIC_FADD,
            AtomicOp::Cswp {
                compare_mask: u64::MAX,
                swap_mask: u64::MAX,
                ..
            } => RDS_CMSG_ATOMIC_CSWP,
            AtomicOp::Cswp { .. } => RDS_CMSG_MASKED_ATOMIC_CSWP,
        }
    }

    /// The 72 bytes of the C struct as a control message of type `kind`
    /// carries them (union bytes the type does not use are zero). `None`
    /// when `kind` is not an atomic type, names the other operation, or is
    /// unmasked while the masks are not the unmasked ones (the encoding
    /// would lose them); [`AtomicArgs::natural_kind`] always works.
    #[must_use]
    pub fn encode(&self, kind: i32) -> Option<[u8; ATOMIC_ARGS_LEN]> {
        let union: [u64; 4] = match (kind, self.op) {
            (RDS_CMSG_ATOMIC_FADD, AtomicOp::Fadd { add, nocarry_mask }) => {
                if nocarry_mask != 0 {
                    return None;
                }
                [add, 0, 0, 0]
            }
            (RDS_CMSG_MASKED_ATOMIC_FADD, AtomicOp::Fadd { add, nocarry_mask }) => {
                [add, nocarry_mask, 0, 0]
            }
            (
                RDS_CMSG_ATOMIC_CSWP,
                AtomicOp::Cswp {
                    compare,
                    swap,
                    compare_mask,
                    swap_mask,
                },
            ) => {
                if compare_mask != !0 || swap_mask != !0 {
                    return None;
                }
                [compare, swap, 0, 0]
            }
            (
                RDS_CMSG_MASKED_ATOMIC_CSWP,
                AtomicOp::Cswp {
                    compare,
                    swap,
                    compare_mask,
                    swap_mask,
                },
            ) => [compare, swap, compare_mask, swap_mask],
            _ => return None,
        };
        let mut out = [0u8; ATOMIC_ARGS_LEN];
        put_u64(&mut out, 0, self.cookie);
        put_u64(&mut out, 8, self.local_addr);
        put_u64(&mut out, 16, self.remote_addr);
        let [u0, u1, u2, u3] = union;
        put_u64(&mut out, 24, u0);
        put_u64(&mut out, 32, u1);
        put_u64(&mut out, 40, u2);
        put_u64(&mut out, 48, u3);
        put_u64(&mut out, 56, self.flags);
        put_u64(&mut out, 64, self.user_token);
        Some(out)
    }

    /// C's `op_rkey`: the R_Key of [`AtomicArgs::cookie`].
    #[must_use]
    pub const fn op_rkey(&self) -> u32 {
        cookie_key(self.cookie)
    }

    /// C's `op_remote_addr`: `remote_addr + cookie_offset(cookie)`
    /// (wrapping), in the MR's zero-based coordinates.
    #[must_use]
    pub const fn op_remote_addr(&self) -> u64 {
        self.remote_addr
            .wrapping_add(cookie_offset(self.cookie) as u64)
    }
}

/// `struct rds_rdma_notify`: the data of an `RDS_CMSG_RDMA_STATUS` control
/// message ([`RDMA_NOTIFY_LEN`] bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaNotify {
    /// The `user_token` of the operation's [`RdmaArgs`] or [`AtomicArgs`].
    pub user_token: u64,
    /// [`RDS_RDMA_SUCCESS`], [`RDS_RDMA_REMOTE_ERROR`],
    /// [`RDS_RDMA_CANCELED`], [`RDS_RDMA_DROPPED`] or
    /// [`RDS_RDMA_OTHER_ERROR`].
    pub status: i32,
}

impl RdmaNotify {
    /// The 16 bytes of the C struct, the 4 bytes of tail padding zero (so
    /// no kernel memory leaks to user space).
    #[must_use]
    pub fn encode(&self) -> [u8; RDMA_NOTIFY_LEN] {
        let mut out = [0u8; RDMA_NOTIFY_LEN];
        put_u64(&mut out, 0, self.user_token);
        if let Some(c) = out.get_mut(8..).and_then(|r| r.first_chunk_mut::<4>()) {
            *c = self.status.to_ne_bytes();
        }
        out
    }

    /// Reads the first 12 bytes of `b` (the padding is not looked at);
    /// `None` if shorter.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        let status = b.get(8..).and_then(|r| r.first_chunk::<4>())?;
        Some(RdmaNotify {
            user_token: get_u64(b, 0)?,
            status: i32::from_ne_bytes(*status),
        })
    }
}
