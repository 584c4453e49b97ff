//! Extension headers, carried in the 16-byte `h_exthdr` area of the header.
//!
//! The area holds a sequence of entries, each a type byte followed by a
//! payload whose length is implied by the type; a type byte of
//! [`EXTHDR_NONE`] (or the end of the area) ends the sequence.

use super::header::{HeaderError, EXTHDR_SPACE};

/// Type byte that ends the extension list (`RDS_EXTHDR_NONE`).
pub const EXTHDR_NONE: u8 = 0;
/// Type byte of [`Ext::Version`] (`RDS_EXTHDR_VERSION`).
pub const EXTHDR_VERSION: u8 = 1;
/// Type byte of [`Ext::Rdma`] (`RDS_EXTHDR_RDMA`).
pub const EXTHDR_RDMA: u8 = 2;
/// Type byte of [`Ext::RdmaDest`] (`RDS_EXTHDR_RDMA_DEST`).
pub const EXTHDR_RDMA_DEST: u8 = 3;
/// Type byte of [`Ext::Npaths`] (`RDS_EXTHDR_NPATHS`).
pub const EXTHDR_NPATHS: u8 = 5;
/// Type byte of [`Ext::GenNum`] (`RDS_EXTHDR_GEN_NUM`).
pub const EXTHDR_GEN_NUM: u8 = 6;
/// Type byte of [`Ext::SportIdx`] (`RDS_EXTHDR_SPORT_IDX`, after Linux 6.12).
pub const EXTHDR_SPORT_IDX: u8 = 8;

/// One extension header; all payload fields are big-endian on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ext {
    /// Protocol version (`struct rds_ext_header_version`: be32 `h_version`).
    Version(u32),
    /// `R_Key` of the RDMA operation this message chases
    /// (`struct rds_ext_header_rdma`: be32 `h_rdma_rkey`).
    Rdma {
        /// The RDMA `R_Key`.
        rkey: u32,
    },
    /// Destination of a requested RDMA operation
    /// (`struct rds_ext_header_rdma_dest`: be32 `h_rdma_rkey`, be32
    /// `h_rdma_offset`).
    RdmaDest {
        /// The RDMA `R_Key`.
        rkey: u32,
        /// The offset within the RDMA region.
        offset: u32,
    },
    /// Number of paths of a multipath connection (be16).
    Npaths(u16),
    /// Connection generation number (be32).
    GenNum(u32),
    /// The sender's TCP client connections carry their path's index in the low three bits
    /// of their source port (one byte, which says nothing: 0 from Linux after 6.12).
    SportIdx(u8),
}

/// Length of an entry of type `ty`, type byte included, or `None` for
/// [`EXTHDR_NONE`] and types this crate does not know.
const fn entry_len(ty: u8) -> Option<usize> {
    match ty {
        EXTHDR_VERSION | EXTHDR_RDMA | EXTHDR_GEN_NUM => Some(1 + 4),
        EXTHDR_RDMA_DEST => Some(1 + 8),
        EXTHDR_NPATHS => Some(1 + 2),
        EXTHDR_SPORT_IDX => Some(1 + 1),
        _ => None,
    }
}

/// Splits `N` bytes off the front of an entry's payload.
fn take<const N: usize>(data: &[u8], ty: u8) -> Result<([u8; N], &[u8]), HeaderError> {
    match data.split_first_chunk::<N>() {
        Some((head, rest)) => Ok((*head, rest)),
        None => Err(HeaderError::TruncatedExt(ty)),
    }
}

/// Copies `src` to the front of `dst` and returns the rest of `dst`.
fn put<'a>(dst: &'a mut [u8], src: &[u8]) -> Result<&'a mut [u8], HeaderError> {
    let (head, rest) = dst
        .split_at_mut_checked(src.len())
        .ok_or(HeaderError::NoSpace)?;
    // Not `copy_from_slice`: its length-mismatch panic path is not always
    // optimized out (e.g. at `-Copt-level=s`), although lengths are equal.
    for (d, s) in head.iter_mut().zip(src) {
        *d = *s;
    }
    Ok(rest)
}

impl Ext {
    /// The type byte of this extension (one of the `EXTHDR_*` constants).
    #[must_use]
    pub const fn ext_type(&self) -> u8 {
        match self {
            Ext::Version(_) => EXTHDR_VERSION,
            Ext::Rdma { .. } => EXTHDR_RDMA,
            Ext::RdmaDest { .. } => EXTHDR_RDMA_DEST,
            Ext::Npaths(_) => EXTHDR_NPATHS,
            Ext::GenNum(_) => EXTHDR_GEN_NUM,
            Ext::SportIdx(_) => EXTHDR_SPORT_IDX,
        }
    }

    /// Number of bytes this extension takes in `h_exthdr`: the type byte plus
    /// the payload.
    #[must_use]
    pub const fn encoded_len(&self) -> usize {
        match self {
            Ext::Version(_) | Ext::Rdma { .. } | Ext::GenNum(_) => 1 + 4,
            Ext::RdmaDest { .. } => 1 + 8,
            Ext::Npaths(_) => 1 + 2,
            Ext::SportIdx(_) => 1 + 1,
        }
    }

    /// Parses the payload of an entry of type `ty` at the front of `data`;
    /// returns the extension and the bytes after it.
    fn parse(ty: u8, data: &[u8]) -> Result<(Ext, &[u8]), HeaderError> {
        match ty {
            EXTHDR_VERSION => {
                let (v, rest) = take(data, ty)?;
                Ok((Ext::Version(u32::from_be_bytes(v)), rest))
            }
            EXTHDR_RDMA => {
                let (rkey, rest) = take(data, ty)?;
                let rkey = u32::from_be_bytes(rkey);
                Ok((Ext::Rdma { rkey }, rest))
            }
            EXTHDR_RDMA_DEST => {
                let (rkey, rest) = take(data, ty)?;
                let (offset, rest) = take(rest, ty)?;
                let rkey = u32::from_be_bytes(rkey);
                let offset = u32::from_be_bytes(offset);
                Ok((Ext::RdmaDest { rkey, offset }, rest))
            }
            EXTHDR_NPATHS => {
                let (n, rest) = take(data, ty)?;
                Ok((Ext::Npaths(u16::from_be_bytes(n)), rest))
            }
            EXTHDR_GEN_NUM => {
                let (g, rest) = take(data, ty)?;
                Ok((Ext::GenNum(u32::from_be_bytes(g)), rest))
            }
            EXTHDR_SPORT_IDX => {
                let ([b], rest) = take::<1>(data, ty)?;
                Ok((Ext::SportIdx(b), rest))
            }
            _ => Err(HeaderError::UnknownExt(ty)),
        }
    }

    /// Writes this extension (type byte, then payload) at the front of `dst`
    /// and returns the rest of `dst`; [`HeaderError::NoSpace`] when it does
    /// not fit, in which case `dst` is left unchanged.
    pub(super) fn write_to<'a>(&self, dst: &'a mut [u8]) -> Result<&'a mut [u8], HeaderError> {
        if dst.len() < self.encoded_len() {
            return Err(HeaderError::NoSpace);
        }
        let dst = put(dst, &[self.ext_type()])?;
        match *self {
            Ext::Version(v) | Ext::Rdma { rkey: v } | Ext::GenNum(v) => put(dst, &v.to_be_bytes()),
            Ext::RdmaDest { rkey, offset } => {
                let dst = put(dst, &rkey.to_be_bytes())?;
                put(dst, &offset.to_be_bytes())
            }
            Ext::Npaths(n) => put(dst, &n.to_be_bytes()),
            Ext::SportIdx(b) => put(dst, &[b]),
        }
    }
}

/// Returns the free part of an extension area: the bytes from its
/// [`EXTHDR_NONE`] terminator (or its end) on.
///
/// Fails with the error [`ExtIter`] would yield when an entry before the
/// terminator is of an unknown type or runs past the end of the area.
pub(super) fn free_tail(area: &mut [u8]) -> Result<&mut [u8], HeaderError> {
    let mut rest = area;
    loop {
        let ty = match rest.first().copied() {
            None | Some(EXTHDR_NONE) => return Ok(rest),
            Some(ty) => ty,
        };
        let len = entry_len(ty).ok_or(HeaderError::UnknownExt(ty))?;
        let (_, after) = rest
            .split_at_mut_checked(len)
            .ok_or(HeaderError::TruncatedExt(ty))?;
        rest = after;
    }
}

/// Iterator over the extension headers of an `h_exthdr` area; see
/// [`Header::exts`](super::Header::exts).
///
/// It yields the entries in order and ends at an [`EXTHDR_NONE`] type byte or
/// at the end of the area. An entry of an unknown type yields
/// [`HeaderError::UnknownExt`], one whose payload runs past the end of the
/// area yields [`HeaderError::TruncatedExt`], and iteration ends after either.
///
/// Linux `rds_message_next_extension` stops silently in both cases instead
/// (and treats the unassigned types below 16 as entries with an empty
/// payload; here they are unknown).
#[derive(Clone, Debug)]
pub struct ExtIter<'a> {
    rest: &'a [u8],
}

impl<'a> ExtIter<'a> {
    /// Iterates over the extension headers in `area`, an `h_exthdr` field.
    #[must_use]
    pub fn new(area: &'a [u8; EXTHDR_SPACE]) -> Self {
        ExtIter { rest: area }
    }
}

impl Iterator for ExtIter<'_> {
    type Item = Result<Ext, HeaderError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&ty, data) = self.rest.split_first()?;
        if ty == EXTHDR_NONE {
            self.rest = &[];
            return None;
        }
        match Ext::parse(ty, data) {
            Ok((ext, rest)) => {
                self.rest = rest;
                Some(Ok(ext))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for ExtIter<'_> {}
