//! Congestion maps (net/rds/cong.c), the IB transport's uncongested port
//! mask (net/rds/ib_recv.c `rds_ib_cong_recv`) and receive-buffer
//! accounting (net/rds/recv.c `rds_recv_rcvbuf_delta`).

use proptest::prelude::*;
use rds_proto::{
    cong_clear, cong_mask, cong_set, cong_test, cong_word, monitor_mask, uncongested_mask,
    wire_to_words, words_to_wire, CongChange, RecvAccount, CONG_MAP_BITS, CONG_MAP_BYTES,
    CONG_MAP_WORDS,
};

type Map = [u64; CONG_MAP_WORDS];

fn map_of(ports: &[u16]) -> Box<Map> {
    let mut m = Box::new([0u64; CONG_MAP_WORDS]);
    for p in ports {
        cong_set(&mut m, *p);
    }
    m
}

/// Linux `test_bit_le(nr, addr)` on the wire bytes: bit `nr % 8` of byte
/// `nr / 8`.
fn test_bit_le(wire: &[u8], nr: usize) -> bool {
    wire[nr / 8] & (1 << (nr % 8)) != 0
}

// --- bit addressing ------------------------------------------------------------

#[test]
fn sizes() {
    assert_eq!(CONG_MAP_BITS, 65536);
    assert_eq!(CONG_MAP_WORDS * 64, CONG_MAP_BITS);
    assert_eq!(CONG_MAP_BYTES * 8, CONG_MAP_BITS);
}

#[test]
fn word_and_mask() {
    assert_eq!((cong_word(0), cong_mask(0)), (0, 1));
    assert_eq!((cong_word(63), cong_mask(63)), (0, 1 << 63));
    assert_eq!((cong_word(64), cong_mask(64)), (1, 1));
    assert_eq!((cong_word(4000), cong_mask(4000)), (62, 1 << 32));
    assert_eq!((cong_word(65535), cong_mask(65535)), (1023, 1 << 63));
    // RDS_CONG_MONITOR_MASK(port) = 1ULL << (port % 64).
    assert_eq!(monitor_mask(0), 1);
    assert_eq!(monitor_mask(65), 2);
    assert_eq!(monitor_mask(4000), 1 << 32);
    assert_eq!(monitor_mask(65535), 1 << 63);
}

#[test]
fn every_port_is_its_set_bit_le_bit() {
    // rds_cong_set_bit: set_bit_le(port % PAGE_BITS, page[port / PAGE_BITS]),
    // i.e. the little-endian bitmap bit `port` of the 8 KiB map.
    let mut m = map_of(&[]);
    let mut wire = [0u8; CONG_MAP_BYTES];
    for p in 0..=u16::MAX {
        cong_set(&mut m, p);
        words_to_wire(&m, &mut wire);
        let i = usize::from(p);
        // The only set bit of the map is in the 8 bytes of its word...
        assert_eq!(m.iter().map(|w| w.count_ones()).sum::<u32>(), 1);
        let w = i / 64 * 8;
        for (n, b) in wire[w..w + 8].iter().enumerate() {
            let want = if w + n == i / 8 { 1u8 << (i % 8) } else { 0 };
            assert_eq!(*b, want, "port {p}, byte {}", w + n);
        }
        assert!(test_bit_le(&wire, i));
        assert!(cong_test(&m, p));
        cong_clear(&mut m, p);
    }
}

#[test]
fn set_test_clear() {
    let mut m = map_of(&[]);
    assert!(!cong_test(&m, 4000));
    cong_set(&mut m, 4000);
    cong_set(&mut m, 4001);
    assert!(cong_test(&m, 4000) && cong_test(&m, 4001));
    cong_clear(&mut m, 4000);
    assert!(!cong_test(&m, 4000) && cong_test(&m, 4001));
    cong_clear(&mut m, 4000);
    assert!(!cong_test(&m, 4000));
}

#[test]
fn wire_layout_of_a_known_map() {
    // Port 1 is byte 0 bit 1; port 8 is byte 1 bit 0; port 65535 is byte 8191
    // bit 7.
    let m = map_of(&[1, 8, 65535]);
    let mut wire = [0u8; CONG_MAP_BYTES];
    words_to_wire(&m, &mut wire);
    assert_eq!(wire[0], 0b10);
    assert_eq!(wire[1], 0b1);
    assert_eq!(wire[8191], 0x80);
    assert_eq!(wire.iter().filter(|b| **b != 0).count(), 3);
}

// --- rds_ib_cong_recv's uncongested mask ---------------------------------------

#[test]
fn uncongested_examples() {
    // `uncongested |= ~(*src) & *dst`: bits set in the old map (dst) and
    // clear in the new one (src), folded over all words.
    let old = map_of(&[1, 64 + 2, 4000]);
    let new = map_of(&[1, 5]);
    // Port 66 -> bit 2, port 4000 -> bit 32; port 1 stays, port 5 became
    // congested (not reported).
    assert_eq!(uncongested_mask(&old[..], &new[..]), (1 << 2) | (1 << 32));
    assert_eq!(uncongested_mask(&new[..], &old[..]), 1 << 5);
    assert_eq!(uncongested_mask(&old[..], &old[..]), 0);
    assert_eq!(uncongested_mask(&[], &[]), 0);
    // Ports 2 and 66 share bit 2.
    let old = map_of(&[2, 66]);
    let new = map_of(&[2]);
    assert_eq!(uncongested_mask(&old[..], &new[..]), 1 << 2);
    // Mismatched lengths: the extra words are ignored.
    assert_eq!(uncongested_mask(&[1, 2, 4], &[0]), 1);
}

// --- rds_recv_rcvbuf_delta -----------------------------------------------------

#[test]
fn hysteresis() {
    let rcvbuf = 1000;
    let mut a = RecvAccount::default();
    assert_eq!(a.add(1000, rcvbuf), CongChange::None); // 1000: not > 1000
    assert_eq!(a.add(1, rcvbuf), CongChange::Congested); // 1001
    assert!(a.congested);
    assert_eq!(a.add(100, rcvbuf), CongChange::None); // 1101
    assert_eq!(a.remove(600, rcvbuf), CongChange::None); // 501: not < 500
    assert_eq!(a.remove(1, rcvbuf), CongChange::None); // 500: not < 500
    assert!(a.congested);
    assert_eq!(a.remove(1, rcvbuf), CongChange::Uncongested); // 499
    assert!(!a.congested);
    assert_eq!(a.add(501, rcvbuf), CongChange::None); // 1000
    assert_eq!(a.bytes, 1000);
}

#[test]
fn zero_delta_is_a_no_op() {
    // `if (delta == 0) return;` before the congestion test, even when the
    // test would now change the state.
    let mut a = RecvAccount {
        bytes: 5000,
        congested: false,
    };
    assert_eq!(a.add(0, 1000), CongChange::None);
    assert_eq!(a.remove(0, 1000), CongChange::None);
    assert!(!a.congested);
    assert_eq!(a.bytes, 5000);
}

#[test]
fn either_direction_can_change_either_way() {
    // C tests the state after any non-zero delta, so with a shrunk rcvbuf a
    // removal can congest...
    let mut a = RecvAccount {
        bytes: 5000,
        congested: false,
    };
    assert_eq!(a.remove(1, 1000), CongChange::Congested);
    // ...and with a grown one an addition can uncongest.
    let mut a = RecvAccount {
        bytes: 100,
        congested: true,
    };
    assert_eq!(a.add(1, 1000), CongChange::Uncongested);
}

#[test]
fn saturates() {
    let mut a = RecvAccount::default();
    assert_eq!(a.remove(10, 1000), CongChange::None);
    assert_eq!(a.bytes, 0);
    let mut a = RecvAccount {
        bytes: u64::MAX - 1,
        congested: true,
    };
    assert_eq!(a.add(u32::MAX, u32::MAX), CongChange::None);
    assert_eq!(a.bytes, u64::MAX);
    // rcvbuf 0: any queued byte congests; only 0 bytes is never < 0, so it
    // stays congested until rcvbuf grows.
    let mut a = RecvAccount::default();
    assert_eq!(a.add(1, 0), CongChange::Congested);
    assert_eq!(a.remove(1, 0), CongChange::None);
    assert!(a.congested);
}

// --- properties -----------------------------------------------------------------

fn any_map() -> impl Strategy<Value = Box<Map>> {
    prop_oneof![
        prop::collection::vec(any::<u16>(), 0..40).prop_map(|p| map_of(&p)),
        prop::collection::vec(any::<u64>(), CONG_MAP_WORDS).prop_map(|v| {
            let mut m = Box::new([0u64; CONG_MAP_WORDS]);
            m.copy_from_slice(&v);
            m
        }),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Add(u32, u32),
    Remove(u32, u32),
}

fn any_op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![4 => 0u32..3000, 1 => any::<u32>()];
    let rcvbuf = prop_oneof![4 => Just(2000u32), 2 => 0u32..5000, 1 => any::<u32>()];
    prop_oneof![
        (len.clone(), rcvbuf.clone()).prop_map(|(l, r)| Op::Add(l, r)),
        (len, rcvbuf).prop_map(|(l, r)| Op::Remove(l, r)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn wire_round_trips(m in any_map()) {
        let mut wire = Box::new([0u8; CONG_MAP_BYTES]);
        words_to_wire(&m, &mut wire);
        let mut back = Box::new([0u64; CONG_MAP_WORDS]);
        wire_to_words(&wire, &mut back);
        prop_assert_eq!(&back[..], &m[..]);
        let mut wire2 = Box::new([0u8; CONG_MAP_BYTES]);
        words_to_wire(&back, &mut wire2);
        prop_assert_eq!(&wire2[..], &wire[..]);
        // Each port's bit is its set_bit_le bit on the wire.
        for p in [0u16, 1, 63, 64, 4000, 65535] {
            prop_assert_eq!(cong_test(&m, p), test_bit_le(&wire[..], usize::from(p)));
        }
    }

    #[test]
    fn uncongested_mask_is_the_folded_port_set(old in any_map(), new in any_map()) {
        let mask = uncongested_mask(&old[..], &new[..]);
        // Bit b iff some port p with p % 64 == b went from congested to not.
        let mut want = 0u64;
        for p in 0..=u16::MAX {
            if cong_test(&old, p) && !cong_test(&new, p) {
                want |= monitor_mask(p);
            }
        }
        prop_assert_eq!(mask, want);
        prop_assert_eq!(uncongested_mask(&old[..], &old[..]), 0);
        prop_assert_eq!(uncongested_mask(&old[..], &[u64::MAX; CONG_MAP_WORDS]), 0);
        let all_old = old.iter().fold(0, |a, w| a | w);
        prop_assert_eq!(uncongested_mask(&old[..], &[0; CONG_MAP_WORDS]), all_old);
        // Only ports congested in old can be reported.
        prop_assert_eq!(mask & !all_old, 0);
    }

    #[test]
    fn uncongested_mask_of_one_port(p in any::<u16>(), others in prop::collection::vec(any::<u16>(), 0..10)) {
        let mut old = map_of(&others);
        cong_set(&mut old, p);
        let mut new = old.clone();
        cong_clear(&mut new, p);
        prop_assert_eq!(uncongested_mask(&old[..], &new[..]), monitor_mask(p));
    }

    #[test]
    fn recv_account_matches_c(
        start in any::<u32>(),
        ops in prop::collection::vec(any_op(), 0..64),
    ) {
        let mut a = RecvAccount::default();
        a.add(start, u32::MAX);
        // C's state, with rs_rcv_bytes widened so it cannot overflow.
        let mut bytes = i128::from(a.bytes);
        let mut congested = a.congested;
        for op in ops {
            let before = a;
            let (delta, rcvbuf) = match op {
                Op::Add(l, r) => (i128::from(l), r),
                Op::Remove(l, r) => (-i128::from(l), r),
            };
            let change = match op {
                Op::Add(l, r) => a.add(l, r),
                Op::Remove(l, r) => a.remove(l, r),
            };
            // The C function on the reference state (bytes clamped at 0, as
            // our account saturates instead of going negative).
            let mut want = CongChange::None;
            if delta != 0 {
                bytes = (bytes + delta).max(0);
                let now = bytes > i128::from(rcvbuf);
                if !congested && now {
                    congested = true;
                    want = CongChange::Congested;
                } else if congested && bytes < i128::from(rcvbuf / 2) {
                    congested = false;
                    want = CongChange::Uncongested;
                }
            }
            prop_assert_eq!(change, want);
            prop_assert_eq!(i128::from(a.bytes), bytes);
            prop_assert_eq!(a.congested, congested);
            // The hysteresis rule, stated directly.
            if delta != 0 {
                if before.congested {
                    prop_assert_eq!(a.congested, a.bytes >= u64::from(rcvbuf / 2));
                } else {
                    prop_assert_eq!(a.congested, a.bytes > u64::from(rcvbuf));
                }
            } else {
                prop_assert_eq!(a, before);
            }
            // A change is reported iff the flag flipped.
            prop_assert_eq!(change != CongChange::None, a.congested != before.congested);
        }
    }
}
