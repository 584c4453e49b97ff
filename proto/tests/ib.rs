//! The IB transport's wire rules: private data, negotiation, rejects, fragment
//! reassembly and the work ring.

use proptest::prelude::*;
use rds_proto::{
    frag_count, negotiate, reject_drops, reject_reason, reply_version_ok, yields_connect, Addr,
    ConnPriv, Credits, FragError, FragOutcome, Grab, Header, NegotiateError, Reassembly,
    RejectReason, WorkRing, CREDIT_UPDATE_AT, FLAG_CONG_BITMAP, HEADER_LEN, MAX_ADV_CREDIT,
    MAX_CREDITS, PRIV_LEN_V4, PRIV_LEN_V6, PROTOCOL_3_1, PROTOCOL_4_0, PROTOCOL_4_1,
};
use std::collections::VecDeque;

fn v4(a: [u8; 4]) -> Addr {
    Addr::from_v4(a)
}

fn v6(last: u8) -> Addr {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = last;
    Addr(a)
}

// --- private data ------------------------------------------------------------------------------

/// The IPv4 layout of `struct rds_ib_connect_private` on x86-64: saddr @0, daddr @4, major @8,
/// minor @9, minor_mask @10 (be16), tos @12, ack_seq @16 (be64), credit @24 (be32), 32 bytes.
#[test]
fn priv_v4_layout() {
    let p = ConnPriv {
        saddr: v4([192, 0, 2, 1]),
        daddr: v4([192, 0, 2, 2]),
        major: 3,
        minor: 1,
        minor_mask: 3,
        tos: 7,
        ack_seq: 0x0102_0304_0506_0708,
        credit: 0x1122_3344,
    };
    let mut out = [0xffu8; PRIV_LEN_V6];
    assert_eq!(p.encode(&mut out), PRIV_LEN_V4);
    let want: [u8; 32] = [
        192, 0, 2, 1, 192, 0, 2, 2, 3, 1, 0, 3, 7, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22,
        0x33, 0x44, 0, 0, 0, 0,
    ];
    assert_eq!(out[..32], want);
    assert!(out[32..].iter().all(|&b| b == 0));
    assert_eq!(ConnPriv::decode(&out[..32], false), Some(p));
    // Padded to 56 bytes, as IB delivers a request: the same.
    assert_eq!(ConnPriv::decode(&out, false), Some(p));
    // One byte short: nothing.
    assert_eq!(ConnPriv::decode(&out[..31], false), None);
}

/// The IPv6 layout: 16-byte addresses, then the same common part at 32; 56 bytes.
#[test]
fn priv_v6_layout() {
    let p = ConnPriv::request(v6(1), v6(2), 3);
    let mut out = [0u8; PRIV_LEN_V6];
    assert_eq!(p.encode(&mut out), PRIV_LEN_V6);
    assert_eq!(out[..16], v6(1).0);
    assert_eq!(out[16..32], v6(2).0);
    assert_eq!(out[32..36], [3, 1, 0, 3]);
    assert_eq!(out[36], 3);
    assert_eq!(ConnPriv::decode(&out, true), Some(p));
    assert_eq!(ConnPriv::decode(&out[..55], true), None);
    assert_eq!(p.version(), PROTOCOL_3_1);
}

proptest! {
    #[test]
    fn priv_round_trip(s in any::<[u8; 16]>(), d in any::<[u8; 16]>(), major: u8, minor: u8,
                       mask: u16, tos: u8, ack: u64, credit: u32, four: bool) {
        let (saddr, daddr) = if four {
            (v4([s[0], s[1], s[2], s[3]]), v4([d[0], d[1], d[2], d[3]]))
        } else {
            let mut s = s;
            s[0] |= 1; // not v4-mapped
            (Addr(s), Addr(d))
        };
        let p = ConnPriv { saddr, daddr, major, minor, minor_mask: mask, tos, ack_seq: ack, credit };
        let mut out = [0u8; PRIV_LEN_V6];
        let n = p.encode(&mut out);
        prop_assert_eq!(n, if four { PRIV_LEN_V4 } else { PRIV_LEN_V6 });
        prop_assert_eq!(ConnPriv::decode(&out[..n], !four), Some(p));
    }

    /// Any bytes decode without panicking; what decodes re-encodes to the same prefix.
    #[test]
    fn priv_decode_any(data in proptest::collection::vec(any::<u8>(), 0..80), six: bool) {
        let need = if six { PRIV_LEN_V6 } else { PRIV_LEN_V4 };
        if let Some(p) = ConnPriv::decode(&data, six) {
            prop_assert!(data.len() >= need);
            let _ = negotiate(&data, six);
            prop_assert_eq!(p.saddr.v4().is_some() || six, true);
        } else {
            prop_assert!(data.len() < need);
        }
    }
}

// --- negotiation -------------------------------------------------------------------------------

fn request(major: u8, minor: u8, mask: u16) -> [u8; PRIV_LEN_V6] {
    let mut p = ConnPriv::request(v4([10, 0, 0, 1]), v4([10, 0, 0, 2]), 0);
    p.major = major;
    p.minor = minor;
    p.minor_mask = mask;
    let mut out = [0u8; PRIV_LEN_V6];
    p.encode(&mut out);
    out
}

#[test]
fn negotiation_as_c() {
    let ok = |major, minor, mask| negotiate(&request(major, minor, mask), false).map(|v| v.0);
    // Linux peers: 3.1.
    assert_eq!(ok(3, 1, 3), Ok(PROTOCOL_3_1));
    assert_eq!(ok(3, 1, 0), Ok(PROTOCOL_3_1));
    // 4.x: 4.0 plus the highest common minor bit.
    assert_eq!(ok(4, 1, 3), Ok(PROTOCOL_4_1));
    assert_eq!(ok(4, 0, 1), Ok(PROTOCOL_4_0));
    assert_eq!(ok(4, 7, 0xfff2), Ok(PROTOCOL_4_1));
    // Major 0: an old peer without a version: 4.0 (as C).
    assert_eq!(ok(0, 0, 0), Ok(PROTOCOL_4_0));
    // Incompatible.
    assert_eq!(
        ok(3, 0, 3),
        Err(NegotiateError::Incompatible { major: 3, minor: 0 })
    );
    assert_eq!(
        ok(4, 1, 0),
        Err(NegotiateError::Incompatible { major: 4, minor: 1 })
    );
    assert_eq!(
        ok(5, 0, 3),
        Err(NegotiateError::Incompatible { major: 5, minor: 0 })
    );
    // No or short private data.
    assert_eq!(negotiate(&[], false), Err(NegotiateError::Empty));
    assert_eq!(
        negotiate(&request(3, 1, 3)[..20], false),
        Err(NegotiateError::Short)
    );
    assert_eq!(
        negotiate(&request(3, 1, 3)[..PRIV_LEN_V4], true),
        Err(NegotiateError::Short)
    );
    assert!(reply_version_ok(PROTOCOL_3_1));
    assert!(reply_version_ok(PROTOCOL_4_1));
    assert!(!reply_version_ok(0x0300));
}

#[test]
fn reject_reasons() {
    // C's RDS_RDMA_REJ_INCOMPAT.
    assert_eq!(RejectReason::Incompatible.raw(), 1);
    assert_eq!(reject_reason(&[]), None);
    assert!(reject_drops(&[]));
    assert!(reject_drops(&1i32.to_ne_bytes()));
    assert!(reject_drops(&0i32.to_ne_bytes()));
    assert!(!reject_drops(&2i32.to_ne_bytes()));
    assert_eq!(
        reject_reason(&[1, 0, 0, 0, 9, 9]),
        Some(i32::from_ne_bytes([1, 0, 0, 0]))
    );
    // Shorter than an int: no reason (C drops too).
    assert!(reject_drops(&[5, 5]));
}

// --- reassembly --------------------------------------------------------------------------------

fn hdr(seq: u64, ack: u64, len: u32, sport: u16, dport: u16, flags: u8) -> [u8; HEADER_LEN] {
    Header {
        sequence: seq,
        ack,
        len,
        sport,
        dport,
        flags,
        ..Header::default()
    }
    .with_checksum()
    .encode()
}

#[test]
fn frag_counts() {
    assert_eq!(frag_count(0), 1);
    assert_eq!(frag_count(1), 1);
    assert_eq!(frag_count(4096), 1);
    assert_eq!(frag_count(4097), 2);
    assert_eq!(frag_count(1 << 20), 256);
}

#[test]
fn single_fragment_and_ack() {
    let mut r = Reassembly::default();
    let h = hdr(7, 3, 100, 10, 20, 0);
    match r.fragment(&h, HEADER_LEN + 100) {
        Ok(FragOutcome::Complete { first, this, frags }) => {
            assert_eq!(first, h);
            assert_eq!(this.ack, 3);
            assert_eq!(frags, 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(!r.in_progress());
    // 0-byte message: a header alone, complete.
    let h = hdr(8, 0, 0, 10, 20, 0);
    assert!(matches!(
        r.fragment(&h, HEADER_LEN),
        Ok(FragOutcome::Complete { frags: 1, .. })
    ));
    // Ack-only: ports 0, no data.
    let a = hdr(0, 42, 0, 0, 0, 0);
    assert!(matches!(r.fragment(&a, HEADER_LEN), Ok(FragOutcome::Ack(h)) if h.ack == 42));
    // Unchecked header (csum 0) is fine.
    let mut u = hdr(9, 0, 5, 1, 2, 0);
    u[30] = 0;
    u[31] = 0;
    assert!(matches!(
        r.fragment(&u, HEADER_LEN + 5),
        Ok(FragOutcome::Complete { .. })
    ));
}

#[test]
fn multi_fragment_message() {
    let mut r = Reassembly::default();
    let len = 2 * 4096 + 10;
    assert!(matches!(
        r.fragment(&hdr(5, 1, len, 3, 4, 0), HEADER_LEN + 4096),
        Ok(FragOutcome::More(_))
    ));
    assert!(r.in_progress());
    // Later fragments may carry another ack.
    assert!(matches!(
        r.fragment(&hdr(5, 2, len, 3, 4, 0), HEADER_LEN + 4096),
        Ok(FragOutcome::More(h)) if h.ack == 2
    ));
    match r.fragment(&hdr(5, 3, len, 3, 4, 0), HEADER_LEN + 10) {
        Ok(FragOutcome::Complete { first, this, frags }) => {
            assert_eq!(first, hdr(5, 1, len, 3, 4, 0));
            assert_eq!(this.ack, 3);
            assert_eq!(frags, 3);
        }
        other => panic!("{other:?}"),
    }
    // An ack-only frame between two fragments of a message is an ack, and the message goes
    // on (the peer's acks do not wait for its messages; C takes them anywhere). Treating it
    // as a mismatched fragment dropped connections whose send ring filled mid-message.
    assert!(matches!(
        r.fragment(&hdr(6, 1, len, 3, 4, 0), HEADER_LEN + 4096),
        Ok(FragOutcome::More(_))
    ));
    assert!(matches!(
        r.fragment(&hdr(0, 9, 0, 0, 0, 0), HEADER_LEN),
        Ok(FragOutcome::Ack(h)) if h.ack == 9
    ));
    assert!(r.in_progress());
    assert!(matches!(
        r.fragment(&hdr(6, 1, len, 3, 4, 0), HEADER_LEN + 4096),
        Ok(FragOutcome::More(_))
    ));
    assert!(matches!(
        r.fragment(&hdr(6, 1, len, 3, 4, 0), HEADER_LEN + 10),
        Ok(FragOutcome::Complete { frags: 3, .. })
    ));
    // A congestion map: 8192 bytes, two fragments, ports 0.
    let m = hdr(0, 0, 8192, 0, 0, FLAG_CONG_BITMAP);
    assert!(matches!(
        r.fragment(&m, HEADER_LEN + 4096),
        Ok(FragOutcome::More(_))
    ));
    assert!(matches!(
        r.fragment(&m, HEADER_LEN + 4096),
        Ok(FragOutcome::Complete { frags: 2, .. })
    ));
}

#[test]
fn fragment_errors() {
    let bad = |first: Option<([u8; HEADER_LEN], usize)>, h: [u8; HEADER_LEN], n: usize| {
        let mut r = Reassembly::default();
        if let Some((f, fl)) = first {
            assert!(matches!(r.fragment(&f, fl), Ok(FragOutcome::More(_))));
        }
        let e = r.fragment(&h, n);
        // After an error nothing is left half-assembled.
        assert!(!r.in_progress());
        e.err()
    };
    let len = 4096 + 1;
    let f = Some((hdr(5, 0, len, 3, 4, 0), HEADER_LEN + 4096));
    assert_eq!(
        bad(None, hdr(1, 0, 0, 1, 2, 0), 47),
        Some(FragError::NoHeader)
    );
    assert_eq!(
        bad(None, hdr(1, 0, 5000, 1, 2, 0), HEADER_LEN + 4097),
        Some(FragError::TooLong)
    );
    let mut c = hdr(1, 0, 1, 1, 2, 0);
    c[0] ^= 1;
    assert_eq!(bad(None, c, HEADER_LEN + 1), Some(FragError::Checksum));
    assert_eq!(
        bad(None, hdr(1, 0, (1 << 20) + 1, 1, 2, 0), HEADER_LEN + 4096),
        Some(FragError::MessageTooLong)
    );
    assert_eq!(
        bad(f, hdr(6, 0, len, 3, 4, 0), HEADER_LEN + 1),
        Some(FragError::Mismatch)
    );
    assert_eq!(
        bad(f, hdr(5, 0, len + 1, 3, 4, 0), HEADER_LEN + 1),
        Some(FragError::Mismatch)
    );
    assert_eq!(
        bad(f, hdr(5, 0, len, 9, 4, 0), HEADER_LEN + 1),
        Some(FragError::Mismatch)
    );
    assert_eq!(
        bad(f, hdr(5, 0, len, 3, 9, 0), HEADER_LEN + 1),
        Some(FragError::Mismatch)
    );
    // The last fragment must carry exactly what is left.
    assert_eq!(
        bad(f, hdr(5, 0, len, 3, 4, 0), HEADER_LEN + 2),
        Some(FragError::WrongLength)
    );
    // A middle fragment shorter than 4096.
    assert_eq!(
        bad(None, hdr(5, 0, len, 3, 4, 0), HEADER_LEN + 4000),
        Some(FragError::WrongLength)
    );
    // A single fragment longer than the declared length.
    assert_eq!(
        bad(None, hdr(5, 0, 10, 3, 4, 0), HEADER_LEN + 11),
        Some(FragError::WrongLength)
    );
}

proptest! {
    /// Any sequence of fragments: never panics, never collects more than 1 MiB, and a message
    /// is complete only when the data adds up to its declared length.
    #[test]
    fn reassembly_any(frags in proptest::collection::vec(
        (0u64..3, 0u32..20000, 0u16..3, 0usize..4200, any::<bool>()), 0..64)) {
        let mut r = Reassembly::default();
        let mut collected = 0u64;
        for (seq, len, port, data, good_csum) in frags {
            let mut h = hdr(seq, 0, len, port, port, 0);
            if !good_csum { h[31] ^= 0x55; }
            match r.fragment(&h, HEADER_LEN + data) {
                Ok(FragOutcome::More(_)) => collected += data as u64,
                Ok(FragOutcome::Complete { first, .. }) => {
                    collected += data as u64;
                    prop_assert_eq!(collected, u64::from(Header::from_bytes(&first).len));
                    collected = 0;
                }
                Ok(FragOutcome::Ack(_)) => prop_assert_eq!(collected, 0),
                Err(_) => collected = 0,
            }
            prop_assert!(collected <= 1 << 20);
        }
    }
}

// --- the work ring -----------------------------------------------------------------------------

#[test]
fn ring_basics() {
    let mut r = WorkRing::new(5);
    assert_eq!(r.alloc(3), (0, 3));
    assert_eq!(r.used(), 3);
    assert_eq!(r.alloc(4), (3, 2));
    assert_eq!(r.alloc(1), (0, 0));
    assert_eq!(r.oldest(), 0);
    assert_eq!(r.completed(1), 2);
    r.free(2);
    assert_eq!(r.oldest(), 2);
    assert_eq!(r.alloc(3), (0, 2));
    // Unalloc across the wrap.
    r.unalloc(2);
    assert_eq!(r.used(), 3);
    assert_eq!(r.alloc(1), (0, 1));
    assert_eq!(r.completed(0), 4);
    assert!(!r.is_low());
    r.free(4);
    assert!(r.is_empty() && r.is_low());
}

proptest! {
    /// The ring against a model queue of positions, for any size (powers of two or not).
    #[test]
    fn ring_model(nr in 1u32..40, ops in proptest::collection::vec((0u8..3, 0u32..50), 0..200)) {
        let mut r = WorkRing::new(nr);
        let mut q: VecDeque<u32> = VecDeque::new();
        let mut next = 0u32;
        for (op, n) in ops {
            match op {
                0 => {
                    let (pos, got) = r.alloc(n);
                    prop_assert_eq!(got, n.min(nr - q.len() as u32));
                    if got > 0 { prop_assert_eq!(pos, next); }
                    for _ in 0..got { q.push_back(next); next = (next + 1) % nr; }
                }
                1 => {
                    let k = n.min(q.len() as u32);
                    r.free(n);
                    for _ in 0..k { q.pop_front(); }
                }
                _ => {
                    let k = n.min(q.len() as u32);
                    r.unalloc(n);
                    for _ in 0..k { q.pop_back(); next = (next + nr - 1) % nr; }
                }
            }
            prop_assert_eq!(r.used(), q.len() as u32);
            if let Some(&o) = q.front() {
                prop_assert_eq!(r.oldest(), o);
                for (i, &p) in q.iter().enumerate() {
                    prop_assert_eq!(r.completed(p), i as u32 + 1);
                }
            }
        }
    }
}

// --- credits -----------------------------------------------------------------------------------

#[test]
fn credits_grab_rules() {
    let c = Credits::new();
    // Nothing granted: nothing to take, even with posted credits to tell.
    assert_eq!(c.grab(4, false, MAX_ADV_CREDIT), Grab::default());
    c.add_posted(3);
    assert_eq!(c.grab(4, false, MAX_ADV_CREDIT), Grab::default());
    // Without send credits, posted credits go only when the caller sends anyway.
    assert_eq!(
        c.grab(0, true, MAX_ADV_CREDIT),
        Grab {
            got: 0,
            advertise: 3
        }
    );
    assert_eq!(c.posted(), 0);
    // The last send credit is kept while there is nothing to advertise with it.
    c.add_send(5);
    assert_eq!(c.grab(10, false, MAX_ADV_CREDIT).got, 4);
    assert_eq!(c.send(), 1);
    assert_eq!(c.grab(1, false, MAX_ADV_CREDIT).got, 0);
    // ...and given out with posted credits, which go with it.
    assert_eq!(c.add_posted(2), 2);
    assert_eq!(
        c.grab(1, false, MAX_ADV_CREDIT),
        Grab {
            got: 1,
            advertise: 2
        }
    );
    assert_eq!((c.send(), c.posted()), (0, 0));
    // At most `max_adv` advertised at once; the rest stays.
    c.add_send(10);
    c.add_posted(300);
    assert_eq!(
        c.grab(2, false, MAX_ADV_CREDIT),
        Grab {
            got: 2,
            advertise: 255
        }
    );
    assert_eq!((c.send(), c.posted()), (8, 45));
    c.unget(2);
    assert_eq!(c.send(), 10);
    assert_eq!(c.take_posted(), 45);
    assert_eq!(c.posted(), 0);
}

#[test]
fn credits_saturate() {
    let c = Credits::new();
    for _ in 0..1000 {
        c.add_send(255);
    }
    assert_eq!(c.send(), MAX_CREDITS);
    assert_eq!(
        c.posted(),
        0,
        "send credits never spill into the posted count"
    );
    assert_eq!(c.add_posted(u32::MAX), MAX_CREDITS);
    assert_eq!(c.send(), MAX_CREDITS);
}

/// One end of a connection under flow control, as the transport drives it: `bufs` receive
/// buffers, each posted (free) or holding a frame not processed yet.
struct End {
    credits: Credits,
    free: u32,
    unprocessed: VecDeque<u32>,
    want_data: u32,
    sent_data: u32,
    got_data: u32,
    ack_wanted: bool,
    threshold: u32,
}

impl End {
    fn new(bufs: u32, want_data: u32) -> End {
        let credits = Credits::new();
        credits.add_posted(bufs);
        End {
            credits,
            free: bufs,
            unprocessed: VecDeque::new(),
            want_data,
            sent_data: 0,
            got_data: 0,
            ack_wanted: false,
            threshold: CREDIT_UPDATE_AT.min(bufs / 2),
        }
    }
}

/// A frame on the wire: data or ack-only, with the credits it advertises.
#[derive(Clone, Copy, Debug)]
struct Frame {
    data: bool,
    credit: u32,
}

/// Two ends and the wire both ways; `step` does one thing, `Err` if a frame found no posted
/// receive (an RNR on IB, a TERMINATE on iWARP: what flow control exists to prevent).
struct Pair {
    ends: [End; 2],
    wires: [VecDeque<Frame>; 2],
}

impl Pair {
    fn new(bufs: [u32; 2], data: [u32; 2]) -> Pair {
        let p = Pair {
            ends: [End::new(bufs[0], data[0]), End::new(bufs[1], data[1])],
            wires: [VecDeque::new(), VecDeque::new()],
        };
        // The handshake: each end's posted receives become the other's send credits.
        let req = p.ends[0].credits.take_posted();
        p.ends[1].credits.add_send(req);
        let rep = p.ends[1].credits.take_posted();
        p.ends[0].credits.add_send(rep);
        p
    }

    /// Action `a` at end `x`: 0 send data, 1 deliver a frame to the other end, 2 process a
    /// received frame (and repost its buffer, and send an ack if credits call for one), 3 send
    /// all the data it can at once (as `xmit` posts a message's fragments: one grab, the
    /// credits advertised in the first).
    fn step(&mut self, x: usize, a: u8) -> Result<bool, String> {
        let y = 1 - x;
        match a {
            3 => {
                let e = &mut self.ends[x];
                let g = e
                    .credits
                    .grab(e.want_data - e.sent_data, false, MAX_ADV_CREDIT);
                for k in 0..g.got {
                    e.sent_data += 1;
                    self.wires[x].push_back(Frame {
                        data: true,
                        credit: if k == 0 { g.advertise } else { 0 },
                    });
                }
                Ok(g.got > 0)
            }
            0 => {
                let e = &mut self.ends[x];
                if e.sent_data == e.want_data {
                    return Ok(false);
                }
                let g = e.credits.grab(1, false, MAX_ADV_CREDIT);
                if g.got == 0 {
                    return Ok(false);
                }
                e.sent_data += 1;
                self.wires[x].push_back(Frame {
                    data: true,
                    credit: g.advertise,
                });
                Ok(true)
            }
            1 => {
                let Some(f) = self.wires[x].pop_front() else {
                    return Ok(false);
                };
                let r = &mut self.ends[y];
                if r.free == 0 {
                    return Err(format!("end {y} got a frame with no receive posted"));
                }
                r.free -= 1;
                r.unprocessed
                    .push_back(f.credit | if f.data { 1 << 16 } else { 0 });
                Ok(true)
            }
            _ => {
                let e = &mut self.ends[x];
                let Some(f) = e.unprocessed.pop_front() else {
                    return Ok(false);
                };
                if f >> 16 == 1 {
                    e.got_data += 1;
                }
                e.credits.add_send(f & 0xffff);
                e.free += 1;
                if e.credits.add_posted(1) >= e.threshold {
                    e.ack_wanted = true;
                }
                if e.ack_wanted {
                    let g = e.credits.grab(1, false, MAX_ADV_CREDIT);
                    if g.got == 1 {
                        e.ack_wanted = false;
                        self.wires[x].push_back(Frame {
                            data: false,
                            credit: g.advertise,
                        });
                    }
                }
                Ok(true)
            }
        }
    }

    /// Runs everything to the end in a fixed order; `Err` if it stops short (a deadlock).
    fn drain(&mut self) -> Result<(), String> {
        for _ in 0..1_000_000 {
            let mut moved = false;
            for x in 0..2 {
                for a in [0u8, 1, 2] {
                    moved |= self.step(x, a)?;
                }
            }
            if !moved {
                break;
            }
        }
        for (x, e) in self.ends.iter().enumerate() {
            let y = &self.ends[1 - x];
            if e.sent_data != e.want_data || y.got_data != e.want_data {
                return Err(format!(
                    "stuck: end {x} sent {} of {}, end {} got {}",
                    e.sent_data,
                    e.want_data,
                    1 - x,
                    y.got_data
                ));
            }
        }
        Ok(())
    }
}

proptest! {
    /// Under any interleaving of sends, deliveries and processing, no frame ever finds its
    /// receiver without a posted receive, and once both ends run freely every message gets
    /// through (the reserved last credit keeps two ends out of credits talking).
    #[test]
    fn credits_never_overrun_never_deadlock(
        bufs in (17u32..300, 17u32..300),
        data in (0u32..2000, 0u32..2000),
        steps in proptest::collection::vec((0usize..2, 0u8..4), 0..3000),
    ) {
        let mut p = Pair::new([bufs.0, bufs.1], [data.0, data.1]);
        for (x, a) in steps {
            if let Err(e) = p.step(x, a) {
                prop_assert!(false, "{}", e);
            }
        }
        if let Err(e) = p.drain() {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Both ends send all they may at once, then everything arrives and is processed: without
/// the reserved last credit both would be out of credits with updates to tell and no way to.
#[test]
fn credits_both_ends_burst() {
    for bufs in [4, 17, 64, 256] {
        let mut p = Pair::new([bufs, bufs], [10 * bufs, 10 * bufs]);
        for x in 0..2 {
            p.step(x, 3).unwrap();
        }
        for x in 0..2 {
            while p.step(x, 1).unwrap() {}
        }
        for x in 0..2 {
            while p.step(x, 2).unwrap() {}
        }
        p.drain().unwrap();
    }
}

/// A small ring (four buffers, the least a QP gets) still never deadlocks when the update
/// threshold is half of it.
#[test]
fn credits_small_ring() {
    for d in 0..50 {
        let mut p = Pair::new([4, 4], [d, 50 - d]);
        p.drain().unwrap();
    }
}

#[test]
fn connect_tie_break() {
    // Requests sent by both: the larger address yields, the smaller keeps its connect.
    let (a, b) = (v4([192, 0, 2, 1]), v4([192, 0, 2, 2]));
    assert!(yields_connect(&b, &a, true));
    assert!(!yields_connect(&a, &b, true));
    // A request not sent yet always yields (the peer will not see it).
    assert!(yields_connect(&a, &b, false));
    // C's rds_addr_cmp: the 16 bytes in order.
    assert!(yields_connect(
        &v4([10, 0, 0, 1]),
        &v4([9, 255, 255, 255]),
        true
    ));
    assert!(yields_connect(&v6(2), &v6(1), true));
    // A v4-mapped address is below every fd00::/8 address.
    assert!(yields_connect(&v6(0), &v4([255, 255, 255, 255]), true));
    // A connection to itself yields only before sending.
    assert!(!yields_connect(&a, &a, true));
}

proptest! {
    /// Two ends whose requests both left: exactly one yields (none for one address).
    #[test]
    fn connect_tie_break_one_end(x in any::<[u8; 16]>(), y in any::<[u8; 16]>()) {
        let (x, y) = (Addr(x), Addr(y));
        let ends = u8::from(yields_connect(&x, &y, true)) + u8::from(yields_connect(&y, &x, true));
        prop_assert_eq!(ends, u8::from(x != y));
    }
}
