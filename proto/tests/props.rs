//! Property tests: round trips, checksums, and no panics on arbitrary bytes.

mod common;
use common::any_ext;

use proptest::prelude::*;
use rds_proto::{
    header_checksum, internet_checksum, verify_checksum, Ext, ExtIter, Header, HeaderError,
    EXTHDR_SPACE, HEADER_LEN,
};

fn any_header() -> impl Strategy<Value = Header> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<[u8; EXTHDR_SPACE]>(),
    )
        .prop_map(
            |(sequence, ack, len, sport, dport, flags, credit, csum, exthdr)| Header {
                sequence,
                ack,
                len,
                sport,
                dport,
                flags,
                credit,
                csum,
                exthdr,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn header_round_trip(h in any_header()) {
        let bytes = h.encode();
        prop_assert_eq!(&bytes[26..30], &[0u8; 4][..]);
        prop_assert_eq!(Header::decode(&bytes), Ok(h));
    }

    #[test]
    fn bytes_round_trip_except_padding(mut bytes in any::<[u8; HEADER_LEN]>()) {
        let h = Header::decode(&bytes).unwrap();
        bytes[26..30].fill(0);
        prop_assert_eq!(h.encode(), bytes);
    }

    #[test]
    fn checksummed_header_verifies(h in any_header()) {
        let c = h.with_checksum();
        let bytes = c.encode();
        prop_assert!(verify_checksum(&bytes));
        prop_assert_eq!(c.csum, header_checksum(&bytes));
        if c.csum != 0 {
            prop_assert_eq!(internet_checksum(&bytes), 0);
        }
    }

    #[test]
    fn corrupted_checksummed_header_fails(
        h in any_header(),
        byte in 0..HEADER_LEN,
        delta in 1u8..=255,
    ) {
        let mut bytes = h.with_checksum().encode();
        bytes[byte] = bytes[byte].wrapping_add(delta);
        let csum = u16::from_be_bytes([bytes[30], bytes[31]]);
        // Changing one byte by `delta` changes one word by `delta` or
        // `delta << 8`, which is never 0 modulo 0xffff, so the ones'-complement
        // sum always changes. (A change that zeroes h_csum disables the check.)
        if csum != 0 {
            prop_assert!(!verify_checksum(&bytes));
        }
    }

    /// The array decoder reads exactly what the field-by-field reader reads.
    #[test]
    fn from_bytes_matches_field_reader(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        prop_assert_eq!(Header::decode(&bytes), Header::decode_fields(&bytes));
        if let Some(b) = bytes.first_chunk::<HEADER_LEN>() {
            prop_assert_eq!(Header::from_bytes(b), Header::decode_fields(&bytes).unwrap());
            let h = Header::from_bytes(b);
            prop_assert_eq!(Header::from_bytes(&h.encode()), h);
        }
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        match Header::decode(&bytes) {
            Ok(h) => {
                prop_assert!(bytes.len() >= HEADER_LEN);
                let _ = verify_checksum(&h.encode());
                let _ = h.exts().count();
            }
            Err(e) => {
                prop_assert_eq!(e, HeaderError::TooShort);
                prop_assert!(bytes.len() < HEADER_LEN);
            }
        }
    }

    #[test]
    fn exts_never_panic(area in any::<[u8; EXTHDR_SPACE]>()) {
        let items: Vec<_> = ExtIter::new(&area).collect();
        // At most one error, and only as the last item.
        let errors = items.iter().filter(|r| r.is_err()).count();
        prop_assert!(errors <= 1);
        if errors == 1 {
            prop_assert!(items.last().unwrap().is_err());
        }
        // Entries never use more bytes than the area has.
        let used: usize = items.iter().flatten().map(Ext::encoded_len).sum();
        prop_assert!(used <= EXTHDR_SPACE);
        // Adding to such an area never panics, and fails exactly when
        // iterating reports an error or there is no room.
        let mut h = Header { exthdr: area, ..Header::default() };
        let r = h.add_ext(Ext::Npaths(1));
        if let Some(Err(e)) = items.last() {
            prop_assert_eq!(r, Err(*e));
        }
    }

    #[test]
    fn added_exts_parse_back(list in proptest::collection::vec(any_ext(), 0..8)) {
        let mut h = Header::default();
        let mut added = Vec::new();
        let mut used = 0;
        for e in list {
            let fits = used + e.encoded_len() <= EXTHDR_SPACE;
            match h.add_ext(e) {
                Ok(()) => {
                    prop_assert!(fits);
                    used += e.encoded_len();
                    added.push(Ok(e));
                }
                Err(err) => {
                    prop_assert!(!fits);
                    prop_assert_eq!(err, HeaderError::NoSpace);
                }
            }
        }
        let back = Header::decode(&h.encode()).unwrap();
        prop_assert_eq!(back.exts().collect::<Vec<_>>(), added);
    }
}
