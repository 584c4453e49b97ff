//! The wire rules of the IB/iWARP transport (Linux `net/rds/ib.h`,
//! `ib_cm.c`, `ib_recv.c`, `ib_ring.c`): the rdma_cm private data of the
//! connection handshake and the version negotiation, the reject reason, the
//! reassembly of a message from its 4 KiB fragments, the work ring, and the
//! credits of flow control.
//!
//! What C 6.12 does, and where rds-rs is stricter:
//!
//! - Private data: `{saddr, daddr}` (be32 each, or 16-byte IPv6 addresses)
//!   then the common part `{major u8, minor u8, minor_mask be16, tos u8,
//!   3 reserved, ack_seq be64, credit be32}` padded to 24 bytes: 32 bytes
//!   for IPv4, 56 for IPv6. On IB the passive side sees the request padded
//!   with zeros to 56 bytes whatever was sent; iWARP gives the exact length.
//! - Negotiation (`rds_ib_protocol_compatible`): major 4 with a common minor
//!   bit gives 4.0 plus the highest common bit; exactly 3.1 gives 3.1; a
//!   request whose major is 0 (an old peer that sends no version) gives 4.0.
//!   C also answers 4.0 to private data shorter than its struct (it then
//!   reads the addresses out of what is there); rds-rs refuses it
//!   ([`NegotiateError::Short`]), as it refuses no private data at all.
//!   Linux peers settle on 3.1; 3.1 and 4.x are the same wire.
//! - Fragments: every SEND carries the full header and at most 4096 bytes;
//!   later fragments must repeat the first's sequence, length and ports (the
//!   ack may differ) and carry exactly what the declared length leaves for
//!   them (C accepts a longer last fragment); every header's checksum is
//!   checked (0 means unchecked). rds-rs also refuses a declared length over
//!   1 MiB at the first fragment, before collecting any (C never checks it).
//! - Flow control ([`Credits`]): engaged when both handshake messages offer
//!   credits. C offers them only with `net.rds.ib.flow_control` set (0 by
//!   default) and relies on IB's RNR retries otherwise; iWARP has no RNR
//!   retry (a SEND without a posted receive terminates the connection), so
//!   rds-rs always offers them: two rds-rs peers use flow control, rds-rs
//!   and a default C peer do not.

use super::addr::Addr;
use super::checksum::verify_checksum;
use super::frame::MAX_FRAME_LEN;
use super::header::{Header, HEADER_LEN};

/// The rdma_cm port of RDS/IB over IPv4 (`RDS_PORT`).
pub const RDS_IB_PORT: u16 = 18634;
/// The rdma_cm port of RDS/IB over IPv6 (`RDS_CM_PORT`).
pub const RDS_IB_PORT6: u16 = 16385;
/// The data bytes a fragment carries at most (`RDS_FRAG_SIZE`).
pub const FRAG_SIZE: usize = 4096;
/// The length of the IPv4 private data (`struct rds_ib_connect_private`).
pub const PRIV_LEN_V4: usize = 32;
/// The length of the IPv6 private data (`struct rds6_ib_connect_private`).
pub const PRIV_LEN_V6: usize = 56;
/// Protocol 3.0 (`RDS_PROTOCOL_3_0`).
pub const PROTOCOL_3_0: u16 = 0x0300;
/// Protocol 3.1 (`RDS_PROTOCOL_3_1`), what Linux peers settle on.
pub const PROTOCOL_3_1: u16 = 0x0301;
/// Protocol 4.0 (`RDS_PROTOCOL_4_0`).
pub const PROTOCOL_4_0: u16 = 0x0400;
/// Protocol 4.1 (`RDS_PROTOCOL_4_1`).
pub const PROTOCOL_4_1: u16 = 0x0401;
/// The minor versions supported (`RDS_IB_SUPPORTED_PROTOCOLS`).
pub const MINOR_MASK: u16 = 0x0003;
/// Why this end rejects a connection request: the reason its reject carries (a host-endian
/// `int` in the private data, as C's `rdma_reject` calls send it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// `RDS_RDMA_REJ_INCOMPAT` (1): an incompatible version, or a request this end does not
    /// take now (C sends it for every reject; its active side drops the connection and retries
    /// later).
    Incompatible,
}

impl RejectReason {
    /// The value on the wire.
    #[must_use]
    pub const fn raw(self) -> i32 {
        match self {
            RejectReason::Incompatible => 1,
        }
    }
}

/// The private data of an RDS/IB connection request or reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnPriv {
    /// The sender's address.
    pub saddr: Addr,
    /// The receiver's address.
    pub daddr: Addr,
    /// Protocol major version.
    pub major: u8,
    /// Protocol minor version.
    pub minor: u8,
    /// The minor versions the sender supports.
    pub minor_mask: u16,
    /// Type of service of the connection.
    pub tos: u8,
    /// The last sequence number the sender received on this connection.
    pub ack_seq: u64,
    /// Receive credits offered (non-zero enables flow control).
    pub credit: u32,
}

impl ConnPriv {
    /// What an rds-rs active side proposes: 3.1 with the supported minors.
    #[must_use]
    pub fn request(saddr: Addr, daddr: Addr, tos: u8) -> ConnPriv {
        ConnPriv {
            saddr,
            daddr,
            major: 3,
            minor: 1,
            minor_mask: MINOR_MASK,
            tos,
            ack_seq: 0,
            credit: 0,
        }
    }

    /// The protocol version (`RDS_PROTOCOL(major, minor)`).
    #[must_use]
    pub fn version(&self) -> u16 {
        u16::from_be_bytes([self.major, self.minor])
    }

    /// The common part (`struct rds_ib_conn_priv_cmn`, 24 bytes with its
    /// padding).
    fn common(&self) -> [u8; 24] {
        let [m0, m1] = self.minor_mask.to_be_bytes();
        let [a0, a1, a2, a3, a4, a5, a6, a7] = self.ack_seq.to_be_bytes();
        let [c0, c1, c2, c3] = self.credit.to_be_bytes();
        #[rustfmt::skip]
        let out = [
            self.major, self.minor, m0, m1, self.tos, 0, 0, 0,
            a0, a1, a2, a3, a4, a5, a6, a7,
            c0, c1, c2, c3, 0, 0, 0, 0,
        ];
        out
    }

    /// Encodes into `out` in the layout of the address family (IPv4 when
    /// both addresses are IPv4); returns the length used (32 or 56).
    pub fn encode(&self, out: &mut [u8; PRIV_LEN_V6]) -> usize {
        *out = [0; PRIV_LEN_V6];
        let cmn = self.common();
        if let (Some(s), Some(d)) = (self.saddr.v4(), self.daddr.v4()) {
            let (addrs, rest) = out.split_at_mut(8);
            let (sa, da) = addrs.split_at_mut(4);
            sa.copy_from_slice(&s);
            da.copy_from_slice(&d);
            if let Some(c) = rest.first_chunk_mut::<24>() {
                *c = cmn;
            }
            PRIV_LEN_V4
        } else {
            let (addrs, rest) = out.split_at_mut(32);
            let (sa, da) = addrs.split_at_mut(16);
            sa.copy_from_slice(&self.saddr.0);
            da.copy_from_slice(&self.daddr.0);
            if let Some(c) = rest.first_chunk_mut::<24>() {
                *c = cmn;
            }
            PRIV_LEN_V6
        }
    }

    /// Decodes private data of the given family; `None` when `data` is too
    /// short for it (bytes beyond are padding and ignored).
    #[must_use]
    pub fn decode(data: &[u8], v6: bool) -> Option<ConnPriv> {
        let (saddr, daddr, cmn) = if v6 {
            let (s, rest) = data.split_first_chunk::<16>()?;
            let (d, rest) = rest.split_first_chunk::<16>()?;
            (Addr(*s), Addr(*d), rest.first_chunk::<24>()?)
        } else {
            let (s, rest) = data.split_first_chunk::<4>()?;
            let (d, rest) = rest.split_first_chunk::<4>()?;
            (
                Addr::from_v4(*s),
                Addr::from_v4(*d),
                rest.first_chunk::<24>()?,
            )
        };
        #[rustfmt::skip]
        let [
            major, minor, m0, m1, tos, _, _, _,
            a0, a1, a2, a3, a4, a5, a6, a7,
            c0, c1, c2, c3, _, _, _, _,
        ] = *cmn;
        Some(ConnPriv {
            saddr,
            daddr,
            major,
            minor,
            minor_mask: u16::from_be_bytes([m0, m1]),
            tos,
            ack_seq: u64::from_be_bytes([a0, a1, a2, a3, a4, a5, a6, a7]),
            credit: u32::from_be_bytes([c0, c1, c2, c3]),
        })
    }
}

/// Why the passive side refuses a connection request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NegotiateError {
    /// No private data.
    Empty,
    /// Private data shorter than the family's struct (C accepts it as 4.0).
    Short,
    /// A version no Linux RDS speaks with us (C: `RDS_RDMA_REJ_INCOMPAT`).
    Incompatible {
        /// The requested major version.
        major: u8,
        /// The requested minor version.
        minor: u8,
    },
}

/// The passive side's choice of version for a request with private data
/// `data` (as rdma_cm delivers it: possibly zero-padded) on a listener of
/// the given family (C: `rds_ib_protocol_compatible`). Returns the version
/// and the decoded request.
///
/// # Errors
///
/// [`NegotiateError`] says why the request is refused.
pub fn negotiate(data: &[u8], v6: bool) -> Result<(u16, ConnPriv), NegotiateError> {
    if data.is_empty() {
        return Err(NegotiateError::Empty);
    }
    let p = ConnPriv::decode(data, v6).ok_or(NegotiateError::Short)?;
    if p.major == 0 {
        return Ok((PROTOCOL_4_0, p));
    }
    let common = p.minor_mask & MINOR_MASK;
    if p.major == 4 && common != 0 {
        // 4.0 plus the highest common minor bit's position.
        let highest = u16::BITS
            .saturating_sub(1)
            .saturating_sub(common.leading_zeros());
        let minor = u8::try_from(highest).unwrap_or(0);
        return Ok((u16::from_be_bytes([4, minor]), p));
    }
    if p.version() == PROTOCOL_3_1 {
        return Ok((PROTOCOL_3_1, p));
    }
    Err(NegotiateError::Incompatible {
        major: p.major,
        minor: p.minor,
    })
}

/// Whether the active side accepts the version of a reply (C:
/// `rds_ib_cm_connect_complete` drops anything below 3.1).
#[must_use]
pub fn reply_version_ok(version: u16) -> bool {
    version >= PROTOCOL_3_1
}

/// Whether a connection request that meets our own connect to the same peer
/// (both ends connecting at once) takes its place: the tie-break of rds_rs,
/// where C rejects the request (`ib_connect_raced`) and both ends retry after a
/// random delay. An end yields, accepting the request and dropping its own
/// connect, when its own request has not left yet (`sent` false: the peer will
/// never see it) or when its address is the larger one; otherwise it rejects the
/// request, and its own request, which left before the reject, reaches the
/// other end first, where it is accepted. So two rds_rs ends settle in one
/// round. The order is C's `rds_addr_cmp` (the 16 bytes of the IPv6 or
/// v4-mapped address in turn), which RDS/TCP also uses to choose the end that
/// connects. Against C, which never yields, it is one round unless both
/// requests left and rds_rs has the smaller address (then both retry, as two C
/// ends do). Equal addresses (a connection to itself) yield only before
/// sending.
#[must_use]
pub fn yields_connect(laddr: &Addr, faddr: &Addr, sent: bool) -> bool {
    !sent || laddr > faddr
}

/// The reason carried by a reject's private data: a host-endian `int` of
/// C's `rdma_reject` ([`RejectReason::raw`]; any value may come), if there is one.
#[must_use]
pub fn reject_reason(data: &[u8]) -> Option<i32> {
    data.first_chunk::<4>().map(|b| i32::from_ne_bytes(*b))
}

/// What C's active side does with a reject (`RDMA_CM_EVENT_REJECTED`): it
/// drops the connection (to retry later) when there is no reason or the
/// reason is at most [`RejectReason::Incompatible`]'s; otherwise it ignores the event.
#[must_use]
pub fn reject_drops(data: &[u8]) -> bool {
    reject_reason(data).map_or(true, |r| r <= RejectReason::Incompatible.raw())
}

/// The number of SENDs a message of `len` payload bytes takes (at least one:
/// a 0-byte message is a header alone).
#[must_use]
pub fn frag_count(len: u32) -> u32 {
    len.div_ceil(FRAG_U32).max(1)
}

/// [`FRAG_SIZE`] as a `u32`.
const FRAG_U32: u32 = 4096;

/// Why a received fragment breaks the connection (C: `rds_ib_conn_error`
/// in `rds_ib_process_recv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragError {
    /// Fewer bytes than a header.
    NoHeader,
    /// More than a header and [`FRAG_SIZE`] bytes.
    TooLong,
    /// The header's checksum is wrong.
    Checksum,
    /// A message declared longer than 1 MiB.
    MessageTooLong,
    /// A later fragment's sequence, length or ports differ from the first's.
    Mismatch,
    /// A fragment does not carry what the declared length leaves for it.
    WrongLength,
}

/// What a received fragment completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragOutcome {
    /// An ack-only frame (ports 0, no data); its header acks.
    Ack(Header),
    /// A fragment of a message that needs more; the header's ack still
    /// counts.
    More(Header),
    /// The last fragment: the message is complete; the header is the first
    /// fragment's (the one the message is delivered with) and `frags` the
    /// number of fragments collected, this one included.
    Complete {
        /// The first fragment's header bytes.
        first: [u8; HEADER_LEN],
        /// This fragment's header (its ack counts).
        this: Header,
        /// The fragments of the message.
        frags: u32,
    },
}

/// The reassembly state of a connection's receive side (C: `i_ibinc`,
/// `i_recv_data_rem`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reassembly {
    /// The first fragment's header bytes, while a message is incomplete.
    first: Option<[u8; HEADER_LEN]>,
    /// Payload bytes still expected.
    rem: u32,
    /// Fragments collected so far.
    frags: u32,
}

impl Reassembly {
    /// Whether a message is incomplete.
    #[must_use]
    pub fn in_progress(&self) -> bool {
        self.first.is_some()
    }

    /// A connection reset: a partial message is thrown away.
    pub fn reset(&mut self) {
        *self = Reassembly::default();
    }

    /// One received SEND of `received` bytes whose first [`HEADER_LEN`] are
    /// `hdr` (the rest, `received - HEADER_LEN` bytes, is its data).
    ///
    /// # Errors
    ///
    /// [`FragError`]: the connection must be dropped; the state is reset.
    pub fn fragment(
        &mut self,
        hdr: &[u8; HEADER_LEN],
        received: usize,
    ) -> Result<FragOutcome, FragError> {
        let r = self.fragment_inner(hdr, received);
        if r.is_err() {
            self.reset();
        }
        r
    }

    fn fragment_inner(
        &mut self,
        hdr: &[u8; HEADER_LEN],
        received: usize,
    ) -> Result<FragOutcome, FragError> {
        let data = received
            .checked_sub(HEADER_LEN)
            .ok_or(FragError::NoHeader)?;
        let data = u32::try_from(data).map_err(|_| FragError::TooLong)?;
        if data > FRAG_U32 {
            return Err(FragError::TooLong);
        }
        if !verify_checksum(hdr) {
            return Err(FragError::Checksum);
        }
        let h = Header::from_bytes(hdr);
        // An ack-only frame may come between two fragments of a message (the sender's acks
        // do not wait for its messages; C takes them anywhere too).
        if h.sport == 0 && h.dport == 0 && data == 0 {
            return Ok(FragOutcome::Ack(h));
        }
        let first = match self.first {
            None => {
                if h.len > MAX_FRAME_LEN {
                    return Err(FragError::MessageTooLong);
                }
                self.rem = h.len;
                self.frags = 0;
                *hdr
            }
            Some(f) => {
                let fh = Header::from_bytes(&f);
                if fh.sequence != h.sequence
                    || fh.len != h.len
                    || fh.sport != h.sport
                    || fh.dport != h.dport
                {
                    return Err(FragError::Mismatch);
                }
                f
            }
        };
        let want = self.rem.min(FRAG_U32);
        if data != want {
            return Err(FragError::WrongLength);
        }
        self.frags = self.frags.saturating_add(1);
        self.rem = self.rem.saturating_sub(want);
        if self.rem == 0 {
            let frags = self.frags;
            self.reset();
            Ok(FragOutcome::Complete {
                first,
                this: h,
                frags,
            })
        } else {
            self.first = Some(first);
            Ok(FragOutcome::More(h))
        }
    }
}

/// A ring of `nr` work slots (C: `struct rds_ib_work_ring`): slots are
/// allocated in order from `alloc_ptr` and freed in the same order (a send
/// queue completes in order; a receive ring is consumed in order). Counters
/// are free-running; positions wrap at `nr` (which need not be a power of
/// two: C's `rds_ib_ring_unalloc` computes the position wrongly then, this
/// does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkRing {
    nr: u32,
    alloc_ptr: u32,
    alloc_ctr: u32,
    free_ctr: u32,
}

impl WorkRing {
    /// A ring of `nr` slots (at least one).
    #[must_use]
    pub fn new(nr: u32) -> WorkRing {
        WorkRing {
            nr: nr.max(1),
            alloc_ptr: 0,
            alloc_ctr: 0,
            free_ctr: 0,
        }
    }

    /// The number of slots.
    #[must_use]
    pub fn size(&self) -> u32 {
        self.nr
    }

    /// Slots allocated and not yet freed.
    #[must_use]
    pub fn used(&self) -> u32 {
        self.alloc_ctr.wrapping_sub(self.free_ctr)
    }

    /// Whether no slot is in use.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.used() == 0
    }

    /// Whether at most half of the slots are in use (C: `rds_ib_ring_low`).
    #[must_use]
    pub fn is_low(&self) -> bool {
        self.used() <= self.nr / 2
    }

    /// `(a + b) % nr` for positions (`a`, `b` below `nr`... or any `u32`).
    fn wrap(&self, a: u32, b: u32) -> u32 {
        let sum = u64::from(a).saturating_add(u64::from(b));
        u32::try_from(sum.checked_rem(u64::from(self.nr)).unwrap_or(0)).unwrap_or(0)
    }

    /// `(a - b) mod nr` for a position `a` and a count `b`.
    fn wrap_back(&self, a: u32, b: u32) -> u32 {
        let b = b.checked_rem(self.nr).unwrap_or(0);
        self.wrap(a, self.nr.saturating_sub(b))
    }

    /// Allocates up to `want` slots: returns the position of the first and
    /// how many (0 when the ring is full).
    pub fn alloc(&mut self, want: u32) -> (u32, u32) {
        let got = want.min(self.nr.saturating_sub(self.used()));
        let pos = self.alloc_ptr;
        if got > 0 {
            self.alloc_ptr = self.wrap(pos, got);
            self.alloc_ctr = self.alloc_ctr.wrapping_add(got);
        }
        (pos, got)
    }

    /// Gives back the last `n` slots allocated and not used.
    pub fn unalloc(&mut self, n: u32) {
        let n = n.min(self.used());
        self.alloc_ctr = self.alloc_ctr.wrapping_sub(n);
        self.alloc_ptr = self.wrap_back(self.alloc_ptr, n);
    }

    /// The position of the oldest slot in use (C: `rds_ib_ring_oldest`).
    #[must_use]
    pub fn oldest(&self) -> u32 {
        self.wrap_back(self.alloc_ptr, self.used())
    }

    /// Frees the `n` oldest slots.
    pub fn free(&mut self, n: u32) {
        let n = n.min(self.used());
        self.free_ctr = self.free_ctr.wrapping_add(n);
    }

    /// How many slots, oldest first, up to and including position `pos`
    /// (C: `rds_ib_ring_completed`).
    #[must_use]
    pub fn completed(&self, pos: u32) -> u32 {
        let oldest = self.oldest();
        let pos = pos.checked_rem(self.nr).unwrap_or(0);
        self.wrap_back(pos, oldest).saturating_add(1)
    }
}

/// The most credits one header advertises (`RDS_MAX_ADV_CREDIT`, the width
/// of `h_credit`).
pub const MAX_ADV_CREDIT: u32 = 255;
/// Posted receives that make a credit update worth an ack-only frame of its
/// own (C: 16 in `rds_ib_advertise_credits`).
pub const CREDIT_UPDATE_AT: u32 = 16;
/// The most credits of either kind kept (a field's width); more granted by a
/// peer are ignored (C warns past 16383 and wraps into the other field).
pub const MAX_CREDITS: u32 = 0xffff;

/// What [`Credits::grab`] gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grab {
    /// Sends that may be posted now (at most the number wanted).
    pub got: u32,
    /// Posted-receive credits to advertise in the first of them (`h_credit`).
    pub advertise: u32,
}

/// The credit-based flow control of one connection (C: `i_credits`, with
/// `rds_ib_send_grab_credits`, `rds_ib_send_add_credits` and
/// `rds_ib_advertise_credits`), engaged when both ends offer credits in the
/// handshake ([`ConnPriv::credit`]).
///
/// Two counts, kept in one atomic word so that taking send credits and the
/// posted credits to advertise with them is one step:
/// - send credits: receives the peer has posted for us and told us about;
///   every SEND (data fragment or ack-only frame) takes one;
/// - posted credits: receives we posted and have not told the peer about
///   yet; they travel in a header's `h_credit` (at most 255 per header) or
///   in the handshake.
///
/// The last send credit is kept for a frame that carries posted credits:
/// it is only taken when there are posted credits to advertise with it, so
/// two peers out of credits can always tell each other about new receives.
/// Without the control (a peer that did not offer credits) nothing is
/// enforced: the counts are kept but [`Credits::grab`] is not asked.
///
/// # Invariants
///
/// Both counts stay within [`MAX_CREDITS`] (low half: send credits, high
/// half: posted credits).
#[derive(Debug, Default)]
pub struct Credits {
    word: core::sync::atomic::AtomicU32,
}

/// The send credits of a packed word.
fn send_of(w: u32) -> u32 {
    w & MAX_CREDITS
}

/// The posted credits of a packed word.
fn posted_of(w: u32) -> u32 {
    w >> 16
}

/// A packed word.
fn pack(send: u32, posted: u32) -> u32 {
    (posted.min(MAX_CREDITS) << 16) | send.min(MAX_CREDITS)
}

impl Credits {
    /// No credits of either kind.
    #[must_use]
    pub const fn new() -> Credits {
        Credits {
            word: core::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Applies `f` to the counts `(send, posted)` atomically; returns what
    /// `f` returned with the new counts.
    fn update<R>(&self, mut f: impl FnMut(u32, u32) -> (u32, u32, R)) -> R {
        use core::sync::atomic::Ordering;
        let mut old = self.word.load(Ordering::Acquire);
        loop {
            let (send, posted, r) = f(send_of(old), posted_of(old));
            match self.word.compare_exchange_weak(
                old,
                pack(send, posted),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return r,
                Err(now) => old = now,
            }
        }
    }

    /// The send credits.
    #[must_use]
    pub fn send(&self) -> u32 {
        send_of(self.word.load(core::sync::atomic::Ordering::Acquire))
    }

    /// The posted credits not yet advertised.
    #[must_use]
    pub fn posted(&self) -> u32 {
        posted_of(self.word.load(core::sync::atomic::Ordering::Acquire))
    }

    /// Up to `wanted` sends, and the posted credits to advertise with them
    /// (at most `max_adv`): posted credits go only with a send that got a
    /// credit, or with none when `need_posted` (the caller sends anyway,
    /// e.g. without flow control). The last send credit is only given out
    /// with posted credits to advertise.
    pub fn grab(&self, wanted: u32, need_posted: bool, max_adv: u32) -> Grab {
        self.update(|send, posted| {
            let avail = if send > 0 && posted == 0 {
                send.saturating_sub(1)
            } else {
                send
            };
            let got = avail.min(wanted);
            let advertise = if posted > 0 && (got > 0 || need_posted) {
                posted.min(max_adv)
            } else {
                0
            };
            (
                send.saturating_sub(got),
                posted.saturating_sub(advertise),
                Grab { got, advertise },
            )
        })
    }

    /// Send credits the peer granted (a header's `h_credit`, or its
    /// handshake); past [`MAX_CREDITS`] they are not counted.
    pub fn add_send(&self, n: u32) {
        if n > 0 {
            self.update(|send, posted| (send.saturating_add(n), posted, ()));
        }
    }

    /// Gives back send credits taken by [`Credits::grab`] and not used.
    pub fn unget(&self, n: u32) {
        self.add_send(n);
    }

    /// `n` receives were posted; returns the posted credits now not yet
    /// advertised. When they reach [`CREDIT_UPDATE_AT`] (or half the
    /// receive ring, if that is smaller) they are worth an ack-only frame of
    /// their own: a peer that has nothing to send would otherwise never
    /// tell.
    pub fn add_posted(&self, n: u32) -> u32 {
        self.update(|send, posted| {
            let p = posted.saturating_add(n).min(MAX_CREDITS);
            (send, p, p)
        })
    }

    /// All posted credits, for the handshake's private data.
    pub fn take_posted(&self) -> u32 {
        self.update(|send, posted| (send, 0, posted))
    }
}
