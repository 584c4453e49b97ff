//! Zero-copy completions: the ring's reservations, order and batches.

use proptest::prelude::*;
use rds_proto::{ZcRing, ZCOOKIES_LEN, ZCOOKIES_MAX};

fn decode(b: &[u8; ZCOOKIES_LEN]) -> (u32, Vec<u32>) {
    let num = u32::from_ne_bytes(b[..4].try_into().unwrap());
    let c = b[4..]
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    (num, c)
}

#[test]
fn batches_of_eight_oldest_first() {
    let mut buf = [0u32; 16];
    let mut r = ZcRing::new();
    for c in 0..11 {
        assert!(r.reserve(buf.len()));
        assert!(r.complete(&mut buf, 100 + c));
    }
    let (b, n) = r.peek(&buf).unwrap();
    assert_eq!(n, 8);
    let (num, cookies) = decode(&b);
    assert_eq!(num, 8);
    assert_eq!(cookies, (100..108).collect::<Vec<_>>());
    r.consume(n, buf.len());
    let (b, n) = r.peek(&buf).unwrap();
    assert_eq!(n, 3);
    let (num, cookies) = decode(&b);
    assert_eq!(num, 3);
    assert_eq!(cookies, vec![108, 109, 110, 0, 0, 0, 0, 0]);
    r.consume(n, buf.len());
    assert!(r.peek(&buf).is_none());
    assert_eq!(r.pending(), 0);
}

#[test]
fn full_ring_refuses_and_unread_completions_count() {
    let mut buf = [0u32; 4];
    let mut r = ZcRing::new();
    for _ in 0..4 {
        assert!(r.reserve(4));
    }
    // Four sends in flight: no fifth.
    assert!(!r.reserve(4));
    r.unreserve();
    assert!(r.reserve(4));
    for c in 0..4 {
        assert!(r.complete(&mut buf, c));
    }
    // Four completions unread: still no room.
    assert!(!r.reserve(4));
    let (_, n) = r.peek(&buf).unwrap();
    assert_eq!(n, 4);
    r.consume(2, 4);
    assert!(r.reserve(4));
    // A completion without a reservation is not stored.
    let mut r2 = ZcRing::new();
    assert!(!r2.complete(&mut buf, 9));
    assert_eq!(r2.pending(), 0);
}

proptest! {
    /// Any sequence of sends, completions and reads: cookies come out once each, in the order
    /// they completed, never more at once than the ring holds.
    #[test]
    fn cookies_once_in_order(ops in proptest::collection::vec(0u8..4, 0..400), cap in 1usize..20) {
        let mut buf = vec![0u32; cap];
        let mut r = ZcRing::new();
        let mut in_flight = 0usize;
        let mut next = 0u32;
        let mut completed = std::collections::VecDeque::new();
        for op in ops {
            match op {
                0 => {
                    let ok = r.reserve(cap);
                    prop_assert_eq!(ok, in_flight + completed.len() < cap);
                    if ok { in_flight += 1; }
                }
                1 if in_flight > 0 => {
                    prop_assert!(r.complete(&mut buf, next));
                    completed.push_back(next);
                    next += 1;
                    in_flight -= 1;
                }
                2 => {
                    match r.peek(&buf) {
                        None => prop_assert!(completed.is_empty()),
                        Some((b, n)) => {
                            let (num, cookies) = decode(&b);
                            prop_assert_eq!(num as usize, n);
                            prop_assert!(n <= ZCOOKIES_MAX);
                            for c in cookies.iter().take(n) {
                                prop_assert_eq!(Some(*c), completed.pop_front());
                            }
                            r.consume(n, cap);
                        }
                    }
                }
                _ if in_flight > 0 => { r.unreserve(); in_flight -= 1; }
                _ => {}
            }
            prop_assert_eq!(r.pending(), completed.len());
        }
    }
}
