//! RDS over TCP's pure logic: the stream's framing, TCP's acknowledged sequence, who connects,
//! and the multipath hash.

use proptest::prelude::*;
use rds_proto::{
    accepted_path, hs_exts, hs_npaths, is_hs_probe, jhash_1word, misplaced, mpath_key, mpath_known,
    mpath_of, path_port, path_port_groups, tcp_acked, tcp_connects, Addr, Ext, Header, StreamError,
    StreamRx, StreamStep, HEADER_LEN, MPATH_MAX, PROBE_PORT,
};

/// A message on the stream: a header with `h_len` = `payload.len()`, then the payload.
fn frame(seq: u64, payload: &[u8]) -> Vec<u8> {
    let h = Header {
        sequence: seq,
        len: payload.len() as u32,
        sport: 4000,
        dport: 4001,
        ..Header::default()
    };
    let mut v = h.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

/// Messages as a receiver rebuilds them: each one's header sequence and payload.
type Msgs = Vec<(u64, Vec<u8>)>;

/// What a receiver rebuilds from `stream` fed in pieces of the sizes `cuts` (cycled): each
/// message's header sequence and payload, and whether the stream ended between messages.
fn receive(stream: &[u8], cuts: &[usize]) -> Result<(Msgs, bool), StreamError> {
    let mut rx = StreamRx::new();
    let mut out = Vec::new();
    let mut cur: Option<(u64, Vec<u8>)> = None;
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let n = cuts[k % cuts.len()].max(1).min(stream.len() - at);
        k += 1;
        let mut piece = &stream[at..at + n];
        at += n;
        while !piece.is_empty() {
            let step = rx.next(piece)?;
            let used = match step {
                StreamStep::HeaderPart { used } => used,
                StreamStep::Header {
                    used,
                    header,
                    bytes,
                    complete,
                } => {
                    assert_eq!(Header::from_bytes(&bytes), header);
                    if complete {
                        out.push((header.sequence, Vec::new()));
                    } else {
                        cur = Some((header.sequence, Vec::new()));
                    }
                    used
                }
                StreamStep::Payload {
                    used,
                    offset,
                    complete,
                } => {
                    let (_, p) = cur.as_mut().expect("payload without a header");
                    assert_eq!(offset as usize, p.len(), "payload out of order");
                    p.extend_from_slice(&piece[..used]);
                    if complete {
                        out.push(cur.take().unwrap());
                    }
                    used
                }
            };
            assert!(used > 0 && used <= piece.len());
            piece = &piece[used..];
        }
    }
    Ok((out, rx.at_boundary()))
}

#[test]
fn one_message_whole_and_byte_by_byte() {
    let s = frame(7, b"hello");
    for cuts in [vec![s.len()], vec![1], vec![47, 1, 5], vec![48], vec![50]] {
        let (msgs, end) = receive(&s, &cuts).unwrap();
        assert_eq!(msgs, vec![(7, b"hello".to_vec())]);
        assert!(end);
    }
}

#[test]
fn empty_message_completes_at_its_header() {
    let mut s = frame(1, b"");
    s.extend(frame(2, b"x"));
    let (msgs, end) = receive(&s, &[HEADER_LEN]).unwrap();
    assert_eq!(msgs, vec![(1, vec![]), (2, b"x".to_vec())]);
    assert!(end);
}

#[test]
fn partial_header_is_kept_and_not_a_boundary() {
    let s = frame(3, b"abc");
    let mut rx = StreamRx::new();
    assert!(rx.at_boundary());
    assert_eq!(rx.next(&s[..10]), Ok(StreamStep::HeaderPart { used: 10 }));
    assert!(!rx.at_boundary());
    match rx.next(&s[10..]) {
        Ok(StreamStep::Header {
            used: 38,
            complete: false,
            header,
            ..
        }) => assert_eq!(header.len, 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        rx.next(&s[48..]),
        Ok(StreamStep::Payload {
            used: 3,
            offset: 0,
            complete: true
        })
    );
    assert!(rx.at_boundary());
}

#[test]
fn too_long_is_refused_at_the_header() {
    let h = Header {
        len: (1 << 20) + 1,
        ..Header::default()
    };
    let mut rx = StreamRx::new();
    assert_eq!(
        rx.next(&h.encode()),
        Err(StreamError::TooLong((1 << 20) + 1))
    );
    // 1 MiB exactly is fine.
    let h = Header {
        len: 1 << 20,
        ..Header::default()
    };
    let mut rx = StreamRx::new();
    assert!(matches!(
        rx.next(&h.encode()),
        Ok(StreamStep::Header {
            complete: false,
            ..
        })
    ));
}

#[test]
fn acked_follows_tcp_order_across_the_wrap() {
    assert!(tcp_acked(100, 100));
    assert!(tcp_acked(100, 101));
    assert!(!tcp_acked(100, 99));
    // Across 2^32.
    assert!(tcp_acked(u32::MAX - 5, 10));
    assert!(!tcp_acked(10, u32::MAX - 5));
    assert!(tcp_acked(0, 0x7fff_ffff));
    assert!(!tcp_acked(0, 0x8000_0000));
}

#[test]
fn smaller_address_connects() {
    let a = Addr::from_v4([10, 0, 0, 1]);
    let b = Addr::from_v4([10, 0, 0, 2]);
    assert!(tcp_connects(&a, &b));
    assert!(!tcp_connects(&b, &a));
    assert!(!tcp_connects(&a, &a));
}

#[test]
fn jhash_matches_the_kernel() {
    // Values of include/linux/jhash.h's jhash_1word, computed with its definitions.
    for (a, init, want) in [
        (0, 0, 0x0493_96b8),
        (1, 0, 0x72a8_2a9b),
        (4000, 0, 0xca59_0529),
        (4000, 0x1234_5678, 0x586e_0665),
        (65535, 0xffff_ffff, 0x855e_a287),
        (16385, 42, 0x181c_ccec),
    ] {
        assert_eq!(jhash_1word(a, init), want, "jhash_1word({a}, {init:#x})");
    }
}

#[test]
fn mpath_in_range_and_zero_without_paths() {
    for key in [0u32, 1, 4000, 65535, 0xffff_ffff] {
        assert_eq!(mpath_of(key, 0), 0);
        assert_eq!(mpath_of(key, 1), 0);
        for n in [2, 4, 8, 16] {
            assert!(mpath_of(key, n) < n.min(MPATH_MAX));
        }
    }
    assert_eq!(mpath_of(4000, 8), 0xca59_0529 & 7);
    // A peer may offer a count that is not a power of two: the path is still below it.
    for key in 0..2000u32 {
        for n in 2..=8 {
            assert!(mpath_of(key * 7919, n) < n);
        }
    }
}

#[test]
fn both_ends_of_an_exchange_take_one_path() {
    for a in (0..65535u16).step_by(97) {
        for b in (0..65535u16).step_by(101) {
            assert_eq!(mpath_key(a, b), mpath_key(b, a));
            assert_eq!(mpath_of(mpath_key(a, b), 8), mpath_of(mpath_key(b, a), 8));
        }
    }
    // The ports themselves, not only their sum or either one, make the key.
    assert_ne!(mpath_key(4000, 4001), mpath_key(4001, 4001));
    assert_ne!(mpath_key(1, 4), mpath_key(2, 3));
    // The paths of one port's exchanges with many ports spread over all 8.
    let mut seen = [false; 8];
    for d in 4000..4200u16 {
        seen[mpath_of(mpath_key(18634, d), 8) as usize] = true;
    }
    assert!(seen.iter().all(|&s| s));
}

#[test]
fn path_known_before_and_after_the_handshake() {
    for k in 0..4000u32 {
        let key = k.wrapping_mul(2_654_435_761);
        // Before: the keys MPATH_MAX paths put on path 0 go there, the others wait.
        let before = mpath_known(key, 0);
        match mpath_of(key, MPATH_MAX) {
            0 => assert_eq!(before, Some(0)),
            _ => assert_eq!(before, None),
        }
        // After: always known, below the count.
        for n in 1..=8 {
            let p = mpath_known(key, n).unwrap();
            assert!(p < n);
            assert_eq!(p, mpath_of(key, n));
        }
        assert_eq!(mpath_known(key, 1), Some(0));
    }
}

#[test]
fn sport_idx_is_read_from_the_handshake() {
    assert_eq!(
        hs_exts(&hs_header(&[Ext::Npaths(8), Ext::SportIdx(0)]), 0),
        (8, Some(true))
    );
    assert_eq!(hs_exts(&hs_header(&[Ext::Npaths(8)]), 0), (8, Some(false)));
    // No count offered: nothing said about the ports either.
    assert_eq!(hs_exts(&hs_header(&[]), 8), (8, None));
    assert_eq!(hs_exts(&hs_header(&[Ext::SportIdx(0)]), 8), (8, None));
    assert_eq!(
        hs_exts(
            &hs_header(&[Ext::Npaths(8), Ext::GenNum(3), Ext::SportIdx(0)]),
            0
        ),
        (8, Some(true))
    );
    // As a C 6.12 peer sees it: NPATHS first, then a type it stops at.
    let h = hs_header(&[Ext::Npaths(8), Ext::SportIdx(0)]);
    assert_eq!(&h.exthdr[..5], &[5, 0, 8, 8, 0]);
}

#[test]
fn client_ports_carry_the_path() {
    // Linux's default range.
    let (lo, hi) = (32768u16, 60999u16);
    let groups = path_port_groups(lo, hi);
    assert_eq!(groups, (60999 + 1 - 32768) / 8);
    for path in 0..8 {
        for group in [0, 1, groups / 2, groups - 1] {
            let p = path_port(lo, hi, group, path).unwrap();
            assert_eq!(u32::from(p) % 8, path);
            assert!((lo..=hi).contains(&p));
        }
        assert_eq!(path_port(lo, hi, groups, path), None);
    }
    // An unaligned start is rounded up; a range of fewer than 8 ports may hold no group.
    assert_eq!(path_port(1001, 2000, 0, 3), Some(1008 + 3));
    assert_eq!(path_port_groups(1001, 1007), 0);
    assert_eq!(path_port(1001, 1007, 0, 0), None);
    assert_eq!(path_port_groups(65530, 65535), 0);
    assert_eq!(path_port(65528, 65535, 0, 7), Some(65535));
}

#[test]
fn accepted_connections_find_their_path() {
    let (lo, hi) = (32768u16, 60999u16);
    for path in 0..8 {
        let port = path_port(lo, hi, 5, path).unwrap();
        // Before the handshake nobody can tell: nothing is misplaced yet.
        assert_eq!(accepted_path(0, true, port), None);
        assert!(!misplaced(0, true, port, 0));
        // One path: path 0, whatever the port.
        assert_eq!(accepted_path(1, true, port), Some(0));
        assert_eq!(accepted_path(1, false, port), Some(0));
        assert!(!misplaced(1, false, port, 0));
        // A peer that numbers its ports by path: the path its port names; a connection of
        // path 3 taken on path 0 before the handshake is misplaced there, and only there.
        for n in (path + 1)..=8 {
            assert_eq!(accepted_path(n, true, port), Some(path));
            for on in 0..n {
                assert_eq!(misplaced(n, true, port, on), on != path);
            }
        }
        // A peer that does not say (C 6.12): the first free path takes it; never misplaced.
        for n in 2..=8 {
            assert_eq!(accepted_path(n, false, port), None);
            assert!((0..n).all(|on| !misplaced(n, false, port, on)));
        }
    }
}

proptest! {
    #[test]
    fn misplaced_is_another_known_path(n in 0u32..=8, sport_idx in any::<bool>(),
                                       fport in any::<u16>(), on in 0u32..8) {
        let p = accepted_path(n, sport_idx, fport);
        prop_assert!(p.is_none_or(|p| p < n));
        prop_assert_eq!(misplaced(n, sport_idx, fport, on), p.is_some_and(|p| p != on));
    }
}

#[test]
fn handshake_ports() {
    assert!(is_hs_probe(PROBE_PORT, 0));
    assert!(is_hs_probe(0, PROBE_PORT));
    assert!(!is_hs_probe(PROBE_PORT, PROBE_PORT));
    assert!(!is_hs_probe(0, 0));
    assert!(!is_hs_probe(2, 0));
    assert!(!is_hs_probe(0, 4000));
}

/// A handshake header carrying `exts`.
fn hs_header(exts: &[Ext]) -> Header {
    let mut h = Header {
        sport: PROBE_PORT,
        ..Header::default()
    };
    for e in exts {
        h.add_ext(*e).unwrap();
    }
    h
}

#[test]
fn path_count_from_the_handshake() {
    // The peer's count, at most 8; none offered: what it was, at least 1.
    assert_eq!(hs_npaths(&hs_header(&[Ext::Npaths(8)]), 0), 8);
    assert_eq!(hs_npaths(&hs_header(&[Ext::Npaths(4)]), 8), 4);
    assert_eq!(hs_npaths(&hs_header(&[Ext::Npaths(1000)]), 0), MPATH_MAX);
    assert_eq!(hs_npaths(&hs_header(&[Ext::Npaths(0)]), 8), 1);
    assert_eq!(hs_npaths(&hs_header(&[]), 0), 1);
    assert_eq!(hs_npaths(&hs_header(&[]), 8), 8);
    // A generation number is accepted, before or after the count.
    assert_eq!(
        hs_npaths(&hs_header(&[Ext::GenNum(7), Ext::Npaths(2)]), 0),
        2
    );
    assert_eq!(
        hs_npaths(&hs_header(&[Ext::Npaths(2), Ext::GenNum(7)]), 0),
        2
    );
    // A malformed area ends the walk: what came before it counts.
    let mut h = hs_header(&[Ext::Npaths(2)]);
    h.exthdr[3] = 0xee;
    assert_eq!(hs_npaths(&h, 0), 2);
    let mut h = Header::default();
    h.exthdr[0] = 0xee;
    assert_eq!(hs_npaths(&h, 0), 1);
}

proptest! {
    /// Any extension area gives a path count of 1 to 8, without panicking.
    #[test]
    fn path_count_bounded(area in proptest::array::uniform16(any::<u8>()), prev in 0u32..=8) {
        let h = Header { exthdr: area, ..Header::default() };
        let n = hs_npaths(&h, prev);
        prop_assert!((1..=MPATH_MAX).contains(&n));
    }
}

proptest! {
    /// Any cutting of a stream of messages gives back the same messages, in order, and ends
    /// between messages.
    #[test]
    fn any_cutting_gives_the_same_messages(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..8),
        cuts in prop::collection::vec(1usize..100, 1..10),
    ) {
        let mut s = Vec::new();
        let mut want = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            s.extend(frame(i as u64, p));
            want.push((i as u64, p.clone()));
        }
        let (got, end) = receive(&s, &cuts).unwrap();
        prop_assert_eq!(got, want);
        prop_assert!(end);
    }

    /// Arbitrary bytes never panic and never take more than given; a refusal is only for a
    /// length over 1 MiB.
    #[test]
    fn garbage_is_taken_or_refused(data in prop::collection::vec(any::<u8>(), 0..2000), cut in 1usize..200) {
        let mut rx = StreamRx::new();
        let mut rest = &data[..];
        while !rest.is_empty() {
            let piece = &rest[..cut.min(rest.len())];
            match rx.next(piece) {
                Ok(StreamStep::HeaderPart { used })
                | Ok(StreamStep::Header { used, .. })
                | Ok(StreamStep::Payload { used, .. }) => {
                    prop_assert!(used > 0 && used <= piece.len());
                    rest = &rest[used..];
                }
                Err(StreamError::TooLong(n)) => {
                    prop_assert!(n > 1 << 20);
                    break;
                }
            }
        }
    }
}

/// A receiver that places payloads itself (as the kernel does, from skbs into pages): it
/// reads only header bytes, at most `header_missing()` at a time, and advances over payload
/// with `next_payload` without handing the bytes over; it rebuilds the same messages.
fn receive_placing(stream: &[u8], cuts: &[usize]) -> Result<(Msgs, bool), StreamError> {
    let mut rx = StreamRx::new();
    let mut out = Vec::new();
    let mut cur: Option<(u64, Vec<u8>, usize)> = None;
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let n = cuts[k % cuts.len()].max(1).min(stream.len() - at);
        k += 1;
        let end = at + n;
        while at < end {
            let missing = rx.header_missing();
            if missing > 0 {
                assert!(cur.is_none());
                let take = missing.min(end - at);
                match rx.next(&stream[at..at + take])? {
                    StreamStep::HeaderPart { used } => at += used,
                    StreamStep::Header {
                        used,
                        header,
                        complete,
                        ..
                    } => {
                        at += used;
                        if complete {
                            out.push((header.sequence, Vec::new()));
                        } else {
                            cur = Some((header.sequence, Vec::new(), header.len as usize));
                        }
                    }
                    StreamStep::Payload { .. } => panic!("payload while a header is missing"),
                }
            } else {
                let step = rx.next_payload(end - at).expect("in a payload");
                let StreamStep::Payload {
                    used,
                    offset,
                    complete,
                } = step
                else {
                    panic!("next_payload gave {step:?}");
                };
                let (seq, mut data, len) = cur.take().expect("a message in progress");
                assert_eq!(offset as usize, data.len());
                data.extend_from_slice(&stream[at..at + used]);
                at += used;
                assert_eq!(complete, data.len() == len);
                if complete {
                    out.push((seq, data));
                } else {
                    cur = Some((seq, data, len));
                }
            }
        }
    }
    Ok((out, rx.at_boundary() && cur.is_none()))
}

#[test]
fn placing_receiver_between_messages() {
    let rx = StreamRx::new();
    assert_eq!(rx.header_missing(), HEADER_LEN);
    let mut rx = rx;
    assert_eq!(rx.next_payload(10), None);
    // A whole header with a payload: then no header bytes are missing.
    let f = frame(1, &[7; 10]);
    assert!(matches!(
        rx.next(&f[..HEADER_LEN]),
        Ok(StreamStep::Header {
            complete: false,
            ..
        })
    ));
    assert_eq!(rx.header_missing(), 0);
    assert_eq!(
        rx.next_payload(100),
        Some(StreamStep::Payload {
            used: 10,
            offset: 0,
            complete: true
        })
    );
    assert_eq!(rx.header_missing(), HEADER_LEN);
}

proptest! {
    #[test]
    fn placing_receiver_rebuilds_messages(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..8),
        cuts in proptest::collection::vec(1usize..200, 1..6),
    ) {
        let mut stream = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            stream.extend_from_slice(&frame(i as u64 + 1, p));
        }
        let (msgs, boundary) = receive_placing(&stream, &cuts).unwrap();
        prop_assert!(boundary);
        prop_assert_eq!(msgs.len(), payloads.len());
        for (i, (seq, data)) in msgs.iter().enumerate() {
            prop_assert_eq!(*seq, i as u64 + 1);
            prop_assert_eq!(data, &payloads[i]);
        }
    }
}
