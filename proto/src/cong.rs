//! Congestion maps and receive-buffer accounting: Linux `net/rds/cong.c`,
//! the IB transport's `rds_ib_cong_recv` (`net/rds/ib_recv.c`), and
//! `rds_recv_rcvbuf_delta` (`net/rds/recv.c`).
//!
//! A congestion map has one bit per port, set while the port's socket has
//! more received data queued than its receive buffer allows. C keeps it in
//! pages and addresses it with `set_bit_le` / `test_bit_le`, i.e. as a
//! little-endian bitmap: port `p` is bit `p % 8` of byte `p / 8`. A
//! congestion update message carries those 8192 bytes as they are.
//!
//! Here the map is an array of [`CONG_MAP_WORDS`] `u64` words, word `i` being
//! the little-endian reading of bytes `8 * i .. 8 * i + 8`, so port `p` is
//! bit `p % 64` ([`cong_mask`]) of word `p / 64` ([`cong_word`]);
//! [`words_to_wire`] and [`wire_to_words`] convert.

/// Bits in a congestion map: one per port.
pub const CONG_MAP_BITS: usize = 65536;
/// `u64` words in a congestion map.
pub const CONG_MAP_WORDS: usize = 1024;
/// Bytes in a congestion map, also the payload length of a congestion
/// update (`RDS_CONG_MAP_BYTES`).
pub const CONG_MAP_BYTES: usize = 8192;

/// The word of a congestion map that holds `port`'s bit.
#[must_use]
pub const fn cong_word(port: u16) -> usize {
    (port >> 6) as usize
}

/// `port`'s bit in the word [`cong_word`]`(port)`.
#[must_use]
pub const fn cong_mask(port: u16) -> u64 {
    1u64.wrapping_shl((port & 63) as u32)
}

/// `RDS_CONG_MONITOR_MASK(port)`: `port`'s bit in a socket's 64-bit
/// congestion-monitor mask (`RDS_CONG_MONITOR`, `RDS_CMSG_CONG_UPDATE`),
/// `1 << (port % 64)`.
#[must_use]
pub const fn monitor_mask(port: u16) -> u64 {
    1u64.wrapping_shl((port & 63) as u32)
}

/// `rds_cong_test_bit`: whether `port` is congested in `map`.
#[must_use]
pub fn cong_test(map: &[u64; CONG_MAP_WORDS], port: u16) -> bool {
    map.get(cong_word(port))
        .is_some_and(|w| w & cong_mask(port) != 0)
}

/// `rds_cong_set_bit`: marks `port` congested in `map`.
pub fn cong_set(map: &mut [u64; CONG_MAP_WORDS], port: u16) {
    if let Some(w) = map.get_mut(cong_word(port)) {
        *w |= cong_mask(port);
    }
}

/// `rds_cong_clear_bit`: marks `port` uncongested in `map`.
pub fn cong_clear(map: &mut [u64; CONG_MAP_WORDS], port: u16) {
    if let Some(w) = map.get_mut(cong_word(port)) {
        *w &= !cong_mask(port);
    }
}

/// The `portmask` the IB transport passes to `rds_cong_map_updated` when a
/// congestion update replaces the map `old` with `new`
/// (`rds_ib_cong_recv`): the bits set in `old` and clear in `new` (ports
/// that became uncongested), all words ORed together. So bit `b` is set iff
/// some port `p` with `p % 64 == b` became uncongested: exactly the
/// [`monitor_mask`] bits of those ports.
///
/// Words past the shorter of the two slices are ignored.
///
/// (The TCP and loopback transports do not compute this; they pass
/// `!0`, "every port may have changed".)
#[must_use]
pub fn uncongested_mask(old: &[u64], new: &[u64]) -> u64 {
    old.iter().zip(new).fold(0, |acc, (o, n)| acc | (o & !n))
}

/// Encodes a congestion map for the wire (the payload of a congestion
/// update): word `i` as little-endian bytes `8 * i .. 8 * i + 8`.
pub fn words_to_wire(words: &[u64; CONG_MAP_WORDS], out: &mut [u8; CONG_MAP_BYTES]) {
    for (w, chunk) in words.iter().zip(out.chunks_exact_mut(8)) {
        if let Ok(c) = <&mut [u8; 8]>::try_from(chunk) {
            *c = w.to_le_bytes();
        }
    }
}

/// Decodes a congestion map received from the wire; the inverse of
/// [`words_to_wire`].
pub fn wire_to_words(wire: &[u8; CONG_MAP_BYTES], out: &mut [u64; CONG_MAP_WORDS]) {
    for (w, chunk) in out.iter_mut().zip(wire.chunks_exact(8)) {
        if let Ok(c) = <[u8; 8]>::try_from(chunk) {
            *w = u64::from_le_bytes(c);
        }
    }
}

/// A change of a socket's congestion state; see [`RecvAccount`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongChange {
    /// The state did not change.
    None,
    /// The socket became congested: set its port's bit in the local map
    /// and queue a congestion update (`rds_cong_set_bit`,
    /// `rds_cong_queue_updates`).
    Congested,
    /// The socket became uncongested: clear its port's bit and queue an
    /// update.
    Uncongested,
}

/// A socket's account of received bytes queued on it (C `rs_rcv_bytes`)
/// and its congestion state (C `rs_congested`), updated as
/// `rds_recv_rcvbuf_delta` does.
///
/// `rcvbuf` in the methods is C's `rds_sk_rcvbuf` (`sk_rcvbuf / 2`), read
/// at each call as C does, since `SO_RCVBUF` may change it. After a
/// non-zero change of `bytes`:
/// - an uncongested socket becomes congested when `bytes > rcvbuf`;
/// - a congested socket becomes uncongested only when
///   `bytes < rcvbuf / 2` (hysteresis).
///
/// Either can happen on [`add`](Self::add) or [`remove`](Self::remove):
/// C does not look at the sign of the change, so a shrunk `rcvbuf` can make
/// a removal report congestion. A change of 0 bytes does nothing, as in C.
///
/// For the loopback transport C still counts the bytes but skips the
/// congestion state; such callers update [`bytes`](Self::bytes) themselves
/// (with saturating arithmetic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvAccount {
    /// Bytes of received messages queued on the socket.
    pub bytes: u64,
    /// Whether the socket's port is marked congested.
    pub congested: bool,
}

impl RecvAccount {
    /// A message of `len` bytes was queued on the socket (C calls
    /// `rds_recv_rcvbuf_delta` with `+h_len` in `rds_recv_incoming`).
    /// `bytes` saturates at `u64::MAX`.
    pub fn add(&mut self, len: u32, rcvbuf: u32) -> CongChange {
        if len == 0 {
            return CongChange::None;
        }
        self.bytes = self.bytes.saturating_add(u64::from(len));
        self.update(rcvbuf)
    }

    /// A message of `len` bytes left the socket's queue (C calls
    /// `rds_recv_rcvbuf_delta` with `-h_len` when a message is read or
    /// purged). `bytes` saturates at 0.
    pub fn remove(&mut self, len: u32, rcvbuf: u32) -> CongChange {
        if len == 0 {
            return CongChange::None;
        }
        self.bytes = self.bytes.saturating_sub(u64::from(len));
        self.update(rcvbuf)
    }

    /// The congestion decision of `rds_recv_rcvbuf_delta`.
    fn update(&mut self, rcvbuf: u32) -> CongChange {
        let now_congested = self.bytes > u64::from(rcvbuf);
        if !self.congested && now_congested {
            self.congested = true;
            CongChange::Congested
        } else if self.congested && self.bytes < u64::from(rcvbuf / 2) {
            self.congested = false;
            CongChange::Uncongested
        } else {
            CongChange::None
        }
    }
}
