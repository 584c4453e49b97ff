//! Internet checksum and the RDS header checksum.

use rds_proto::{header_checksum, internet_checksum, verify_checksum, Header, HEADER_LEN};

fn sample() -> Header {
    Header {
        sequence: 0x0102_0304_0506_0708,
        ack: 0x1112_1314_1516_1718,
        len: 0x2122_2324,
        sport: 4000,
        dport: 18634,
        flags: 0x03,
        credit: 7,
        csum: 0,
        exthdr: [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    }
}

#[test]
fn rfc1071_example() {
    // RFC 1071 section 3: words 0001 f203 f4f5 f6f7 sum to 0xddf2.
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(internet_checksum(&data), !0xddf2);
    assert_eq!(internet_checksum(&data), 0x220d);
    // Appending the checksum makes the whole sum to zero.
    let mut with = [0u8; 10];
    with[..8].copy_from_slice(&data);
    with[8..].copy_from_slice(&0x220du16.to_be_bytes());
    assert_eq!(internet_checksum(&with), 0);
}

#[test]
fn odd_length_pads_with_zero() {
    assert_eq!(internet_checksum(&[0x12]), !0x1200);
    assert_eq!(
        internet_checksum(&[0x00, 0x01, 0xf2]),
        internet_checksum(&[0x00, 0x01, 0xf2, 0x00])
    );
}

#[test]
fn empty_and_zero_data() {
    assert_eq!(internet_checksum(&[]), 0xffff);
    assert_eq!(internet_checksum(&[0; 48]), 0xffff);
}

#[test]
fn end_around_carry() {
    // 0xffff + 0x0001 = 0x1_0000 -> folds to 0x0001.
    assert_eq!(internet_checksum(&[0xff, 0xff, 0x00, 0x01]), !0x0001);
    // 0x8000 + 0x8000 = 0x1_0000 -> 0x0001.
    assert_eq!(internet_checksum(&[0x80, 0x00, 0x80, 0x00]), !0x0001);
    // Many large words: every carry is folded back in.
    let data = [0xffu8; 1000];
    assert_eq!(internet_checksum(&data), 0x0000);
    let mut data = [0xfeu8; 1001];
    data[1000] = 0x01;
    // Compare with a straightforward u64 reference implementation.
    assert_eq!(internet_checksum(&data), reference(&data));
}

/// Straightforward RFC 1071 reference: sum into a wide accumulator, then fold.
fn reference(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    for pair in data.chunks(2) {
        let hi = u64::from(pair[0]);
        let lo = u64::from(pair.get(1).copied().unwrap_or(0));
        sum += (hi << 8) | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[test]
fn matches_reference_on_patterns() {
    let mut data = [0u8; 97];
    for (i, b) in data.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37).wrapping_add(11);
    }
    for n in 0..=data.len() {
        assert_eq!(internet_checksum(&data[..n]), reference(&data[..n]), "{n}");
    }
}

#[test]
fn header_checksum_ignores_stored_csum() {
    let h = sample();
    let a = header_checksum(&h.encode());
    let b = header_checksum(&Header { csum: 0xabcd, ..h }.encode());
    assert_eq!(a, b);
    // It is the Internet checksum of the header with h_csum zero.
    assert_eq!(a, internet_checksum(&h.encode()));
}

#[test]
fn header_with_checksum_verifies() {
    let h = sample().with_checksum();
    assert_ne!(h.csum, 0);
    assert_eq!(h.csum, header_checksum(&sample().encode()));
    let bytes = h.encode();
    assert!(verify_checksum(&bytes));
    // All 24 big-endian words, h_csum included, sum to 0xffff.
    assert_eq!(internet_checksum(&bytes), 0);
    // The checksum sits big-endian at offset 30.
    assert_eq!(&bytes[30..32], &h.csum.to_be_bytes());
}

#[test]
fn default_header_checksum() {
    // An all-zero header sums to 0, so its checksum is 0xffff.
    let h = Header::default().with_checksum();
    assert_eq!(h.csum, 0xffff);
    assert!(verify_checksum(&h.encode()));
}

#[test]
fn every_single_bit_flip_fails() {
    let bytes = sample().with_checksum().encode();
    for bit in 0..HEADER_LEN * 8 {
        let mut b = bytes;
        b[bit / 8] ^= 1 << (bit % 8);
        let csum = u16::from_be_bytes([b[30], b[31]]);
        if csum == 0 {
            // A flip that zeroes h_csum turns the check off (as in Linux);
            // it cannot happen here unless h_csum has a single bit set.
            assert!(verify_checksum(&b));
            continue;
        }
        assert!(!verify_checksum(&b), "bit {bit} flipped still verifies");
    }
}

#[test]
fn zero_csum_means_unchecked() {
    let h = sample();
    assert_eq!(h.csum, 0);
    assert!(verify_checksum(&h.encode()));
}

#[test]
fn wrong_csum_fails() {
    let h = sample().with_checksum();
    let bad = Header {
        csum: h.csum.wrapping_add(1),
        ..h
    };
    assert!(!verify_checksum(&bad.encode()));
}

proptest::proptest! {
    /// The checksum (a wide accumulator, carries folded at the end) equals the
    /// word-by-word reference on any data, of any length.
    #[test]
    fn any_data_matches_reference(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
        proptest::prop_assert_eq!(internet_checksum(&data), reference(&data));
    }

    /// Sums that land on a multiple of 0xffff (all-ones words) fold as the reference does.
    #[test]
    fn ones_heavy_data_matches_reference(n in 0usize..200, tail in proptest::num::u8::ANY) {
        let mut data = vec![0xffu8; n];
        data.push(tail);
        proptest::prop_assert_eq!(internet_checksum(&data), reference(&data));
    }
}
