//! The Internet checksum (RFC 1071) and the RDS header checksum `h_csum`.

use super::header::{CSUM_OFFSET, HEADER_LEN};

/// Ones'-complement sum of `data` as big-endian 16-bit words; an odd trailing
/// byte is padded with a zero byte.
///
/// The words are added four bytes at a time into a wide accumulator and the
/// carries folded back in at the end (RFC 1071, "deferred carries"): the same
/// sum as adding word by word with an end-around carry each time, for a
/// fraction of the instructions (an RDS header is summed on every send and
/// receive). The accumulator cannot overflow: each step adds less than 2^32,
/// so it would take more than 2^32 steps (16 GiB of data).
fn ones_sum(data: &[u8]) -> u16 {
    let mut sum = 0u64;
    let mut quads = data.chunks_exact(4);
    for q in quads.by_ref() {
        if let [a, b, c, d] = *q {
            // Two words at once: 2^16 is 1 in ones'-complement arithmetic, so a 32-bit
            // big-endian word adds the same as its two halves.
            sum = sum.wrapping_add(u64::from(u32::from_be_bytes([a, b, c, d])));
        }
    }
    match *quads.remainder() {
        [a, b, c] => {
            sum = sum
                .wrapping_add(u64::from(u16::from_be_bytes([a, b])))
                .wrapping_add(u64::from(u16::from_be_bytes([c, 0])));
        }
        [a, b] => sum = sum.wrapping_add(u64::from(u16::from_be_bytes([a, b]))),
        [a] => sum = sum.wrapping_add(u64::from(u16::from_be_bytes([a, 0]))),
        _ => {}
    }
    // Fold the carries back in until the sum fits 16 bits (at most four times).
    while sum > 0xffff {
        sum = (sum & 0xffff).wrapping_add(sum >> 16);
    }
    // The loop leaves at most 0xffff.
    u16::try_from(sum).unwrap_or(u16::MAX)
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
