//! Tests of the bind port search.

use proptest::prelude::*;
use rds_proto::{bind_candidates, PROBE_PORT};

#[test]
fn requested_port_alone() {
    assert_eq!(bind_candidates(4000, 123).collect::<Vec<_>>(), vec![4000]);
    assert_eq!(
        bind_candidates(u16::MAX, 0).collect::<Vec<_>>(),
        vec![u16::MAX]
    );
}

#[test]
fn random_start_below_two_starts_at_two() {
    for r in [0, 1, 2] {
        let v: Vec<u16> = bind_candidates(0, r).collect();
        assert_eq!(v.first(), Some(&2));
        assert_eq!(v.len(), 65534);
    }
}

/// The C loop, transcribed as a reference model: `do { if (rover == 0) rover++; if (rover ==
/// PROBE) continue; try(rover); } while (rover++ != last);`
fn c_model(random: u16) -> Vec<u16> {
    let mut out = Vec::new();
    let mut rover = random.max(2);
    let last = rover.wrapping_sub(1);
    loop {
        if rover == 0 {
            rover = rover.wrapping_add(1);
        }
        if rover != PROBE_PORT {
            out.push(rover);
        }
        let cur = rover;
        rover = rover.wrapping_add(1);
        if cur == last {
            break;
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn zero_port_matches_c_and_covers_every_port_once(random in any::<u16>()) {
        let v: Vec<u16> = bind_candidates(0, random).collect();
        prop_assert_eq!(&v, &c_model(random));
        let mut sorted = v.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), 65534);
        prop_assert!(!v.contains(&0) && !v.contains(&PROBE_PORT));
    }
}
