//! RDS over TCP (issue 20), the parts that are pure logic: the framing of the byte stream,
//! the rule of who connects, the settling of sent messages by TCP's acknowledged sequence,
//! and the multipath hash.
//!
//! C counterparts (Linux 6.12): `rds_tcp_data_recv` (`tcp_recv.c`: the stream reassembled
//! into headers and payloads across segment boundaries), `rds_tcp_is_acked` (`tcp_send.c`),
//! `rds_addr_cmp` as `rds_tcp_conn_path_connect` and `rds_queue_reconnect` use it (only the
//! smaller address connects), and `RDS_MPATH_HASH` (`rds.h`, `jhash_1word`).
//!
//! The stream is an `rds_header` (48 bytes) and then `h_len` bytes of payload, message after
//! message, with nothing between them. [`StreamRx`] takes the bytes as TCP hands them over, in
//! pieces of any size, and says for each piece what it holds: part of a header, a complete
//! header (checked), or payload bytes of the current message, and when a message ends. It
//! keeps at most one header (48 bytes): the payload is the caller's to place (straight into
//! the message's pages), so a peer can make it hold nothing more. Where rds-rs is stricter
//! than C: an `h_len` above 1 MiB (`RDS_MAX_MSG_SIZE`) is refused at the header, before any
//! payload is taken (C never checks it and keeps reading); the caller drops the connection.

use super::frame::MAX_FRAME_LEN;
use super::header::{Header, HEADER_LEN};

/// The TCP port RDS listens on (`RDS_TCP_PORT`), the same number as RDS/IB's IPv6 port.
pub const RDS_TCP_PORT: u16 = 16385;

/// The most paths of one connection (`RDS_MPATH_WORKERS`).
pub const MPATH_MAX: u32 = 8;

/// Why the stream cannot go on (the caller drops the connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// A header's `h_len` is above [`MAX_FRAME_LEN`].
    TooLong(u32),
}

/// What the start of a piece of the stream holds ([`StreamRx::next`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStep {
    /// The first `used` bytes completed no header yet (they are kept).
    HeaderPart {
        /// Bytes taken.
        used: usize,
    },
    /// The first `used` bytes completed this header; its payload follows (none if its
    /// `h_len` is 0: then the message is complete too).
    Header {
        /// Bytes taken.
        used: usize,
        /// The header (as it came: `h_csum` is not checked here).
        header: Header,
        /// Its 48 bytes as they came.
        bytes: [u8; HEADER_LEN],
        /// The message has no payload: it is complete.
        complete: bool,
    },
    /// The first `used` bytes are payload of the current message, starting at `offset` in
    /// it; `complete` when they are its last.
    Payload {
        /// Bytes taken.
        used: usize,
        /// Where in the message's payload they go.
        offset: u32,
        /// They end the message.
        complete: bool,
    },
}

/// Where the receive side of a stream is (C: `tc_tinc`, `tc_tinc_hdr_rem`,
/// `tc_tinc_data_rem`).
///
/// # Invariants
///
/// In `Header`, `got < HEADER_LEN`; in `Payload`, `offset < len` and `len <= MAX_FRAME_LEN`.
#[derive(Clone, Copy, Debug)]
enum RxState {
    Header { buf: [u8; HEADER_LEN], got: usize },
    Payload { len: u32, offset: u32 },
}

/// The receive side of an RDS/TCP stream: bytes in, headers and payload ranges out.
#[derive(Clone, Copy, Debug)]
pub struct StreamRx {
    state: RxState,
}

impl Default for StreamRx {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamRx {
    /// At the start of a stream (a new connection).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            state: RxState::Header {
                buf: [0; HEADER_LEN],
                got: 0,
            },
        }
    }

    /// Whether the stream is between two messages (nothing of the next one taken yet).
    #[must_use]
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, RxState::Header { got: 0, .. })
    }

    /// What the start of `data` holds; the caller goes on with `data[used..]`. Takes at least
    /// one byte of a non-empty `data` unless it fails.
    ///
    /// # Errors
    ///
    /// [`StreamError`] when a header is refused; the stream cannot go on.
    pub fn next(&mut self, data: &[u8]) -> Result<StreamStep, StreamError> {
        match &mut self.state {
            RxState::Header { buf, got } => {
                let want = HEADER_LEN.saturating_sub(*got);
                let n = want.min(data.len());
                // `got + n <= HEADER_LEN` (the invariant, and `n <= want`).
                let end = got.saturating_add(n);
                // A copy by `zip` (the lengths are equal): `copy_from_slice`'s length check
                // ends in a panic function the kernel's objtool does not know as `noreturn`.
                if let (Some(dst), Some(src)) = (buf.get_mut(*got..end), data.get(..n)) {
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d = *s;
                    }
                }
                *got = end;
                if *got < HEADER_LEN {
                    return Ok(StreamStep::HeaderPart { used: n });
                }
                let bytes = *buf;
                let header = Header::from_bytes(&bytes);
                if header.len > MAX_FRAME_LEN {
                    return Err(StreamError::TooLong(header.len));
                }
                let complete = header.len == 0;
                self.state = if complete {
                    Self::new().state
                } else {
                    RxState::Payload {
                        len: header.len,
                        offset: 0,
                    }
                };
                Ok(StreamStep::Header {
                    used: n,
                    header,
                    bytes,
                    complete,
                })
            }
            RxState::Payload { .. } => Ok(self.payload_step(data.len())),
        }
    }

    /// How many bytes of a header are still missing (0 while a payload is being taken).
    #[must_use]
    pub fn header_missing(&self) -> usize {
        match self.state {
            RxState::Header { got, .. } => HEADER_LEN.saturating_sub(got),
            RxState::Payload { .. } => 0,
        }
    }

    /// [`StreamRx::next`] for `avail` bytes of payload that the caller places itself (it need
    /// not read them first): `None` unless a payload is being taken.
    pub fn next_payload(&mut self, avail: usize) -> Option<StreamStep> {
        match self.state {
            RxState::Payload { .. } => Some(self.payload_step(avail)),
            RxState::Header { .. } => None,
        }
    }

    fn payload_step(&mut self, avail: usize) -> StreamStep {
        match &mut self.state {
            RxState::Header { .. } => StreamStep::HeaderPart { used: 0 },
            RxState::Payload { len, offset } => {
                let left = len.saturating_sub(*offset);
                let n = u32::try_from(avail).unwrap_or(u32::MAX).min(left);
                let at = *offset;
                // `offset + n <= len` (`n <= left`).
                *offset = offset.saturating_add(n);
                let complete = *offset >= *len;
                if complete {
                    self.state = Self::new().state;
                }
                StreamStep::Payload {
                    used: n as usize,
                    offset: at,
                    complete,
                }
            }
        }
    }
}

/// Whether a sent message that ended at stream sequence `end` (TCP's sequence number just
/// past its last byte) is acknowledged once TCP's `snd_una` is `una`: `una` is at or past
/// `end`, in TCP's modulo-2^32 order (C: `rds_tcp_is_acked`, `!before(una, end)`). Valid
/// while the two are less than 2^31 apart, as TCP keeps them.
#[must_use]
pub fn tcp_acked(end: u32, una: u32) -> bool {
    // `before(una, end)` is `(una - end) as i32 < 0`.
    una.wrapping_sub(end) < 1 << 31
}

/// Whether this end connects (is TCP's client) for a connection from `laddr` to `faddr`:
/// the smaller address does (C: `rds_addr_cmp(laddr, faddr) < 0`, the 16 bytes of the
/// IPv6 or v4-mapped address in order); the larger one only accepts.
#[must_use]
pub fn tcp_connects(laddr: &super::addr::Addr, faddr: &super::addr::Addr) -> bool {
    laddr < faddr
}

/// The Linux kernel's `jhash_1word(a, initval)` (Bob Jenkins' lookup3 final mix of one
/// word), which `RDS_MPATH_HASH` applies to a socket's bound port.
#[must_use]
pub fn jhash_1word(a: u32, initval: u32) -> u32 {
    // JHASH_INITVAL, plus the length in bytes (4) as `jhash_3words` adds it (`initval + 12`
    // for three words, `__jhash_nwords(a, 0, 0, initval + JHASH_INITVAL + (1 << 2))`).
    const JHASH_INITVAL: u32 = 0xdead_beef;
    let base = JHASH_INITVAL.wrapping_add(initval).wrapping_add(1 << 2);
    let (mut a, mut b, mut c) = (a.wrapping_add(base), base, base);
    // __jhash_final(a, b, c): seven steps `x ^= y; x -= rol32(y, r)`.
    fn step(x: &mut u32, y: u32, r: u32) {
        *x ^= y;
        *x = x.wrapping_sub(y.rotate_left(r));
    }
    step(&mut c, b, 14);
    step(&mut a, c, 11);
    step(&mut b, a, 25);
    step(&mut c, b, 16);
    step(&mut a, c, 4);
    step(&mut b, a, 14);
    step(&mut c, b, 24);
    c
}

/// What chooses the path of a message from port `sport` to port `dport`: the two ports, in
/// either order. Both ends of an exchange between two sockets therefore choose the same path,
/// and a reply goes back on the TCP connection that brought the request, where TCP
/// acknowledges each with the other. (C hashes the sender's port alone, with a seed that is 0
/// for every socket but the first one bound after the module loads, `net_get_random_once`:
/// its request and its reply take two connections unless the ports happen to agree, and each
/// connection then sends acknowledgements of its own.) The order of a socket's messages to
/// one destination is kept: they all take one path.
#[must_use]
pub fn mpath_key(sport: u16, dport: u16) -> u32 {
    let (lo, hi) = if sport <= dport {
        (sport, dport)
    } else {
        (dport, sport)
    };
    (u32::from(lo) << 16) | u32::from(hi)
}

/// The path of a connection with `npaths` paths (at most [`MPATH_MAX`]) that a message with
/// path key `key` ([`mpath_key`]) takes: `jhash_1word(key, 0) & (npaths - 1)` (C:
/// `RDS_MPATH_HASH`; always below `npaths`, which a peer need not make a power of two). One
/// path (or none negotiated yet): path 0.
#[must_use]
pub fn mpath_of(key: u32, npaths: u32) -> u32 {
    if npaths <= 1 {
        return 0;
    }
    jhash_1word(key, 0) & npaths.min(MPATH_MAX).saturating_sub(1)
}

/// The path a message with path key `key` takes over a connection with `npaths` paths, when
/// that is known without a handshake (C: `rds_send_mprds_hash`): once the count is known
/// (`npaths` > 0), [`mpath_of`] of it; before, path 0 for a key that [`MPATH_MAX`] paths
/// would put there, and `None` for the others, which need the handshake.
#[must_use]
pub fn mpath_known(key: u32, npaths: u32) -> Option<u32> {
    let n = if npaths == 0 { MPATH_MAX } else { npaths };
    let p = mpath_of(key, n);
    (npaths != 0 || p == 0).then_some(p)
}

/// The path of a connection with `npaths` paths (0 before the handshake) that a TCP connection
/// accepted from the peer's port `fport` is for, when the acceptor can tell: path 0 of a
/// connection with one path; for a peer that numbers its client ports by path (`sport_idx`,
/// from the handshake; see [`path_port`]), the port modulo [`MPATH_MAX`] (taken modulo
/// `npaths` too, should a peer name a path it does not have). `None` before the handshake,
/// and for a peer with several paths that does not say (C 6.12: the first free path takes
/// it).
#[must_use]
pub fn accepted_path(npaths: u32, sport_idx: bool, fport: u16) -> Option<u32> {
    match npaths {
        0 => None,
        1 => Some(0),
        // Modulo `MPATH_MAX` first: the port modulo a count that does not divide 8 (3, 5, 6,
        // 7) is not the path.
        n if sport_idx => (u32::from(fport) % MPATH_MAX).checked_rem(n),
        _ => None,
    }
}

/// Whether a TCP connection accepted from the peer's port `fport` and put on `path` is another
/// path's, as far as the acceptor can tell now ([`accepted_path`]): one it took before the
/// handshake, when it could not tell.
#[must_use]
pub fn misplaced(npaths: u32, sport_idx: bool, fport: u16, path: u32) -> bool {
    accepted_path(npaths, sport_idx, fport).is_some_and(|p| p != path)
}

/// Whether a message from `sport` to `dport` is a multipath handshake: the probe ping
/// (from `RDS_FLAG_PROBE_PORT`, 1, to port 0) or its pong (from port 0 to port 1)
/// (C: `RDS_HS_PROBE`).
#[must_use]
pub fn is_hs_probe(sport: u16, dport: u16) -> bool {
    use super::port::PROBE_PORT;
    (sport == PROBE_PORT && dport == 0) || (sport == 0 && dport == PROBE_PORT)
}

/// What a handshake frame (the probe ping or its pong) with header `hdr` tells of the peer
/// (C: `rds_recv_hs_exthdrs`), when the path count was `prev` before: the path count, the
/// smaller of [`MPATH_MAX`] and the peer's `RDS_EXTHDR_NPATHS`, or `prev` when the frame has
/// none (a peer that offers nothing has one path), never below 1; and whether the peer
/// numbers its client connections' source ports by path (`RDS_EXTHDR_SPORT_IDX`), which only
/// a frame that offers a count says (`None` otherwise: a user's ping from port 1). An
/// `RDS_EXTHDR_GEN_NUM` is accepted and not relied on. A malformed extension area ends the
/// walk, as in C.
#[must_use]
pub fn hs_exts(hdr: &Header, prev: u32) -> (u32, Option<bool>) {
    let mut offered = None;
    let mut sport_idx = false;
    for e in hdr.exts().map_while(Result::ok) {
        match e {
            super::ext::Ext::Npaths(n) => offered = Some(u32::from(n)),
            super::ext::Ext::SportIdx(_) => sport_idx = true,
            _ => {}
        }
    }
    let n = offered.map_or(prev, |n| n.min(MPATH_MAX)).max(1);
    (n, offered.map(|_| sport_idx))
}

/// The path count part of [`hs_exts`].
#[must_use]
pub fn hs_npaths(hdr: &Header, prev: u32) -> u32 {
    hs_exts(hdr, prev).0
}

/// The TCP source port a client connection of path `path` binds to, the `group`-th of the
/// groups of [`MPATH_MAX`] ports in the local port range `[low, high]`, so that the port
/// modulo [`MPATH_MAX`] is the path (C after 6.12, `RDS_EXTHDR_SPORT_IDX`); `None` when the
/// range holds fewer groups. Groups start at `low` rounded up to a multiple of [`MPATH_MAX`].
#[must_use]
pub fn path_port(low: u16, high: u16, group: u32, path: u32) -> Option<u16> {
    let m = MPATH_MAX;
    let first = u32::from(low).checked_next_multiple_of(m)?;
    let port = first
        .checked_add(group.checked_mul(m)?)?
        .checked_add(path.checked_rem(m)?)?;
    if port > u32::from(high) {
        return None;
    }
    u16::try_from(port).ok()
}

/// How many groups of [`MPATH_MAX`] ports the local port range `[low, high]` holds (see
/// [`path_port`]).
#[must_use]
pub fn path_port_groups(low: u16, high: u16) -> u32 {
    let Some(first) = u32::from(low).checked_next_multiple_of(MPATH_MAX) else {
        return 0;
    };
    u32::from(high)
        .saturating_add(1)
        .saturating_sub(first)
        .checked_div(MPATH_MAX)
        .unwrap_or(0)
}
