//! `SpareStack`: the fixed-capacity stack of spares (message slots, receive pages, settled
//! messages) the module's caches keep.

use rds_proto::SpareStack;

#[test]
fn last_in_first_out_and_bounded() {
    let mut s = SpareStack::<u32, 3>::new();
    assert!(s.is_empty());
    assert_eq!(s.pop(), None);
    for v in 1..=3 {
        assert_eq!(s.push(v), Ok(()));
    }
    assert_eq!(s.len(), 3);
    // Full: the value comes back.
    assert_eq!(s.push(4), Err(4));
    assert_eq!(s.pop(), Some(3));
    assert_eq!(s.push(5), Ok(()));
    assert_eq!(s.pop(), Some(5));
    assert_eq!(s.pop(), Some(2));
    assert_eq!(s.pop(), Some(1));
    assert_eq!(s.pop(), None);
    assert!(s.is_empty());
}

#[test]
fn zero_capacity_keeps_nothing() {
    let mut s = SpareStack::<u8, 0>::default();
    assert_eq!(s.push(1), Err(1));
    assert_eq!(s.pop(), None);
}
