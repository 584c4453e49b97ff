//! Validation of an arriving frame: the 48-byte header as it came off the
//! wire, checked and classified before anything else looks at it (Linux
//! `rds_recv_incoming`, `rds_ib_process_recv`, `rds_message_next_extension`).
//!
//! A transport hands the core the header bytes and the length of the payload
//! that came with them; [`parse_frame`] decides, from those bytes alone,
//! whether the frame is an ack, a congestion map or a data message, and which
//! extension headers it carries. A frame that fails is dropped (and a network
//! transport drops its connection); nothing of it is delivered.
//!
//! The rules, and where they differ from C RDS 6.12:
//!
//! - `h_csum`: 0 means unchecked (as C); any other value must be the header's
//!   checksum ([`FrameError::Checksum`]).
//! - `h_len` at most [`MAX_FRAME_LEN`] (1 MiB, C's `RDS_MAX_MSG_SIZE`): C's
//!   receivers never check it ([`FrameError::TooLong`]).
//! - The payload that came with the header must be `h_len` bytes, when the
//!   transport knows it ([`FrameError::LenMismatch`]).
//! - A congestion-map frame (`RDS_FLAG_CONG_BITMAP` set in `h_flags`) has
//!   ports 0 and exactly [`crate::CONG_MAP_BYTES`] of payload, as C's
//!   senders write it (`rds_cong_update_alloc`) ([`FrameError::CongMap`]).
//!   C's receivers are laxer and classify differently: IB and TCP take a
//!   frame as a map only when `h_flags` is exactly `RDS_FLAG_CONG_BITMAP`
//!   (any other flags make it data), IB takes a ports-0 frame without
//!   payload as an ack before it looks at the flags, and
//!   `rds_ib_cong_recv` / `rds_tcp_cong_recv` silently drop a map whose
//!   `h_len` is not `RDS_CONG_MAP_BYTES` and never look at its ports.
//! - Extension headers are walked as C walks them: entries in `h_exthdr`
//!   until `RDS_EXTHDR_NONE`, the end of the area, or a type C does not know
//!   (16 and above stop the walk; 4 and 7..15 have no payload), so unknown
//!   types are tolerated. A known type whose payload runs past the end of the
//!   area is refused ([`FrameError::TruncatedExt`]); C stops silently there,
//!   but no RDS sender writes such a header.

use super::checksum::verify_checksum;
use super::cong::CONG_MAP_BYTES;
use super::header::{Header, EXTHDR_SPACE, FLAG_CONG_BITMAP, HEADER_LEN};

/// The largest `h_len` accepted (`RDS_MAX_MSG_SIZE`).
pub const MAX_FRAME_LEN: u32 = 1 << 20;

/// The extension types C 6.12 knows (`__RDS_EXTHDR_MAX`): the walk stops at
/// any type byte at or above it.
pub const EXTHDR_TYPES: u8 = 16;

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// `h_csum` is neither 0 nor the header's checksum.
    Checksum,
    /// `h_len` is above [`MAX_FRAME_LEN`].
    TooLong,
    /// The payload that arrived is not `h_len` bytes.
    LenMismatch,
    /// A congestion-map frame with ports or a length other than C's.
    CongMap,
    /// A known extension header whose payload runs past `h_exthdr`.
    TruncatedExt(u8),
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::Checksum => f.write_str("bad header checksum"),
            FrameError::TooLong => f.write_str("h_len above 1 MiB"),
            FrameError::LenMismatch => f.write_str("payload length differs from h_len"),
            FrameError::CongMap => f.write_str("malformed congestion map frame"),
            FrameError::TruncatedExt(t) => write!(f, "extension header {t} truncated"),
        }
    }
}

impl core::error::Error for FrameError {}

/// What a valid frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Ports 0, no payload, no congestion map: only `h_ack` (and `h_credit`)
    /// mean anything.
    AckOnly,
    /// A congestion map of the sender's address.
    CongMap,
    /// A message for a port (a ping when `dport` is 0).
    Data,
}

/// A frame that passed [`parse_frame`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The decoded header.
    pub hdr: Header,
    /// What it is.
    pub kind: FrameKind,
    /// The r_key of an `RDS_EXTHDR_RDMA` (the first one; C's
    /// `rds_recv_incoming_exthdrs` unuses the r_key of every one, but a C
    /// sender writes at most one extension header), if any.
    pub rdma_rkey: Option<u32>,
    /// The r_key and offset of an `RDS_EXTHDR_RDMA_DEST` (the last one, as
    /// C keeps the last; two never fit in `h_exthdr`), if any.
    pub rdma_dest: Option<(u32, u32)>,
}

/// The RDMA extension headers of a frame: the r_key of an `RDS_EXTHDR_RDMA`
/// and the r_key and offset of an `RDS_EXTHDR_RDMA_DEST`.
pub type RdmaExts = (Option<u32>, Option<(u32, u32)>);

/// The payload size of extension type `ty` in C's table
/// (`rds_exthdr_size`); 0 for the types C has no entry for.
#[must_use]
pub const fn exthdr_payload_len(ty: u8) -> usize {
    match ty {
        1 | 2 | 6 => 4,
        3 => 8,
        5 => 2,
        _ => 0,
    }
}

fn be32(b: &[u8]) -> Option<u32> {
    b.first_chunk::<4>().map(|c| u32::from_be_bytes(*c))
}

/// Walks `h_exthdr` as C's `rds_message_next_extension` does, noting the
/// RDMA and RDMA_DEST entries; see the module documentation.
///
/// # Errors
///
/// [`FrameError::TruncatedExt`] for a known type whose payload does not fit.
pub fn walk_exthdrs(area: &[u8; EXTHDR_SPACE]) -> Result<RdmaExts, FrameError> {
    if area[0] == 0 {
        // No extension header: the common case.
        return Ok((None, None));
    }
    let mut rkey = None;
    let mut dest = None;
    let mut pos = 0usize;
    // Each step consumes at least the type byte, so this ends within 16 steps.
    while let Some((&ty, rest)) = area.get(pos..).and_then(<[u8]>::split_first) {
        if ty == 0 || ty >= EXTHDR_TYPES {
            break;
        }
        let n = exthdr_payload_len(ty);
        let Some(payload) = rest.get(..n) else {
            return Err(FrameError::TruncatedExt(ty));
        };
        match ty {
            2 if rkey.is_none() => rkey = be32(payload),
            3 => {
                if let (Some(k), Some(o)) = (be32(payload), payload.get(4..).and_then(be32)) {
                    dest = Some((k, o));
                }
            }
            _ => {}
        }
        pos = pos.saturating_add(1).saturating_add(n);
    }
    Ok((rkey, dest))
}

/// Checks and classifies a frame from its header bytes and, when the
/// transport knows it, the length of the payload that came with it.
///
/// # Errors
///
/// The first rule broken, in the order of the module documentation.
pub fn parse_frame(
    bytes: &[u8; HEADER_LEN],
    payload_len: Option<u64>,
) -> Result<Frame, FrameError> {
    let hdr = Header::from_bytes(bytes);
    if hdr.csum != 0 && !verify_checksum(bytes) {
        return Err(FrameError::Checksum);
    }
    if hdr.len > MAX_FRAME_LEN {
        return Err(FrameError::TooLong);
    }
    if let Some(n) = payload_len {
        if n != u64::from(hdr.len) {
            return Err(FrameError::LenMismatch);
        }
    }
    let kind = if hdr.flags & FLAG_CONG_BITMAP != 0 {
        if hdr.sport != 0 || hdr.dport != 0 || hdr.len as usize != CONG_MAP_BYTES {
            return Err(FrameError::CongMap);
        }
        FrameKind::CongMap
    } else if hdr.sport == 0 && hdr.dport == 0 && hdr.len == 0 {
        FrameKind::AckOnly
    } else {
        FrameKind::Data
    };
    let (rdma_rkey, rdma_dest) = walk_exthdrs(&hdr.exthdr)?;
    Ok(Frame {
        hdr,
        kind,
        rdma_rkey,
        rdma_dest,
    })
}
