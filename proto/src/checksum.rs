//! The Internet checksum (RFC 1071) and the RDS header checksum `h_csum`.

use super::header::{CSUM_OFFSET, HEADER_LEN};

/// Adds two 16-bit words in ones'-complement arithmetic (end-around carry).
fn ones_add(a: u16, b: u16) -> u16 {
    let (sum, carry) = a.overflowing_add(b);
    // With a carry, `sum <= 0xfffe`, so adding it back never wraps.
    sum.wrapping_add(u16::from(carry))
}

/// Ones'-complement sum of `data` as big-endian 16-bit words; an odd trailing
/// byte is padded with a zero byte.
fn ones_sum(data: &[u8]) -> u16 {
    let mut sum = 0u16;
    let mut rest = data;
    while let [hi, lo, tail @ ..] = rest {
        sum = ones_add(sum, u16::from_be_bytes([*hi, *lo]));
        rest = tail;
    }
    if let [last] = rest {
        sum = ones_add(sum, u16::from_be_bytes([*last, 0]));
    }
    sum
}

/// Computes the Internet checksum of `data` (RFC 1071).
///
/// This is the complement of the ones'-complement sum of `data` taken as
/// big-endian 16-bit words, with an odd trailing byte padded with a zero byte.
/// Stored big-endian in a 16-bit-aligned field of `data` that was zero when
/// it was computed, it makes `internet_checksum` over the whole of `data`
/// return 0.
#[must_use]
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// Computes the `h_csum` value of an encoded RDS header.
///
/// The checksum is the Internet checksum of the 48 header bytes taken with
/// `h_csum` as zero, whatever `hdr` holds there, as Linux
/// `rds_message_make_checksum` does (`ip_fast_csum` over the header). Store
/// the result in [`Header::csum`](super::Header::csum): encoding writes it
/// big-endian, which is the byte order in which Linux's `__sum16` lands on
/// the wire, and the header then passes [`verify_checksum`].
///
/// A result of 0 means that the header bytes sum to `0xffff`; `h_csum` 0 also
/// means "no checksum", so such a header is accepted unchecked, as in Linux.
#[must_use]
pub fn header_checksum(hdr: &[u8; HEADER_LEN]) -> u16 {
    let mut bytes = *hdr;
    bytes[CSUM_OFFSET] = 0;
    bytes[CSUM_OFFSET + 1] = 0;
    internet_checksum(&bytes)
}

/// Checks the `h_csum` field of an encoded RDS header.
///
/// Returns `true` when `h_csum` is 0 (the sender did not checksum the
/// header) or when the Internet checksum over all 48 bytes, `h_csum`
/// included, is 0; as Linux `rds_message_verify_checksum`.
#[must_use]
pub fn verify_checksum(hdr: &[u8; HEADER_LEN]) -> bool {
    let csum = u16::from_be_bytes([hdr[CSUM_OFFSET], hdr[CSUM_OFFSET + 1]]);
    csum == 0 || internet_checksum(hdr) == 0
}
