//! Extension headers in `h_exthdr`.

use rds_proto::{
    Ext, ExtIter, Header, HeaderError, EXTHDR_GEN_NUM, EXTHDR_NONE, EXTHDR_NPATHS, EXTHDR_RDMA,
    EXTHDR_RDMA_DEST, EXTHDR_SPACE, EXTHDR_VERSION,
};

fn exts(h: &Header) -> Vec<Result<Ext, HeaderError>> {
    h.exts().collect()
}

#[test]
fn type_values_match_linux() {
    assert_eq!(EXTHDR_NONE, 0);
    assert_eq!(EXTHDR_VERSION, 1);
    assert_eq!(EXTHDR_RDMA, 2);
    assert_eq!(EXTHDR_RDMA_DEST, 3);
    assert_eq!(EXTHDR_NPATHS, 5);
    assert_eq!(EXTHDR_GEN_NUM, 6);
}

#[test]
fn empty_area_has_no_exts() {
    assert!(exts(&Header::default()).is_empty());
}

/// Each type: its exact encoding, and that it parses back.
#[test]
fn add_and_parse_each_type() {
    let cases: [(Ext, &[u8]); 5] = [
        (Ext::Version(0x0102_0304), &[1, 0x01, 0x02, 0x03, 0x04]),
        (
            Ext::Rdma { rkey: 0xa1b2_c3d4 },
            &[2, 0xa1, 0xb2, 0xc3, 0xd4],
        ),
        (
            Ext::RdmaDest {
                rkey: 0x1122_3344,
                offset: 0x5566_7788,
            },
            &[3, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88],
        ),
        (Ext::Npaths(0x0a0b), &[5, 0x0a, 0x0b]),
        (Ext::GenNum(0xdead_beef), &[6, 0xde, 0xad, 0xbe, 0xef]),
    ];
    for (ext, bytes) in cases {
        assert_eq!(ext.encoded_len(), bytes.len());
        assert_eq!(ext.ext_type(), bytes[0]);
        let mut h = Header::default();
        h.add_ext(ext).unwrap();
        assert_eq!(&h.exthdr[..bytes.len()], bytes, "{ext:?}");
        assert!(h.exthdr[bytes.len()..].iter().all(|&b| b == 0));
        assert_eq!(exts(&h), vec![Ok(ext)]);
        // Survives the wire.
        let back = Header::decode(&h.encode()).unwrap();
        assert_eq!(exts(&back), vec![Ok(ext)]);
    }
}

#[test]
fn appends_several() {
    let mut h = Header::default();
    let list = [
        Ext::RdmaDest { rkey: 7, offset: 8 },
        Ext::Npaths(4),
        Ext::Npaths(0x0102),
    ];
    for e in list {
        h.add_ext(e).unwrap();
    }
    // 9 + 3 + 3 = 15 bytes used; the last byte is the terminator.
    assert_eq!(h.exthdr, [3, 0, 0, 0, 7, 0, 0, 0, 8, 5, 0, 4, 5, 1, 2, 0]);
    assert_eq!(exts(&h), list.map(Ok).to_vec());
}

#[test]
fn exact_fit_fills_whole_area() {
    // 5 + 5 + 3 + 3 = 16: no terminator needed at the end of the area.
    let mut h = Header::default();
    let list = [
        Ext::Version(1),
        Ext::GenNum(2),
        Ext::Npaths(3),
        Ext::Npaths(4),
    ];
    for e in list {
        h.add_ext(e).unwrap();
    }
    assert_eq!(h.exthdr, [1, 0, 0, 0, 1, 6, 0, 0, 0, 2, 5, 0, 3, 5, 0, 4]);
    assert_eq!(exts(&h), list.map(Ok).to_vec());
    assert_eq!(h.add_ext(Ext::Npaths(5)), Err(HeaderError::NoSpace));
}

#[test]
fn no_space() {
    let mut h = Header::default();
    h.add_ext(Ext::RdmaDest { rkey: 1, offset: 2 }).unwrap();
    h.add_ext(Ext::Version(3)).unwrap();
    // 14 bytes used, 2 free: none of the 4-byte types fits, nor Npaths (3).
    let before = h;
    for e in [
        Ext::Version(4),
        Ext::Rdma { rkey: 4 },
        Ext::GenNum(4),
        Ext::Npaths(4),
        Ext::RdmaDest { rkey: 4, offset: 4 },
    ] {
        assert_eq!(h.add_ext(e), Err(HeaderError::NoSpace), "{e:?}");
        assert_eq!(h, before, "failed add must not change the header");
    }
}

#[test]
fn add_terminates_over_garbage_after_none() {
    // Bytes after a NONE terminator are not entries; adding zeroes them.
    let mut h = Header {
        exthdr: [
            0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 9, 9, 9, 9, 9, 9, 9, 9,
        ],
        ..Header::default()
    };
    assert!(exts(&h).is_empty());
    h.add_ext(Ext::Npaths(2)).unwrap();
    assert_eq!(h.exthdr, [5, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(exts(&h), vec![Ok(Ext::Npaths(2))]);
}

#[test]
fn unknown_type_stops() {
    for ty in [4u8, 7, 15, 16, 0x80, 0xff] {
        let mut area = [0u8; EXTHDR_SPACE];
        area[0] = EXTHDR_NPATHS;
        area[2] = 1;
        area[3] = ty;
        area[4] = EXTHDR_VERSION; // never reached
        let h = Header {
            exthdr: area,
            ..Header::default()
        };
        assert_eq!(
            exts(&h),
            vec![Ok(Ext::Npaths(1)), Err(HeaderError::UnknownExt(ty))]
        );
        // Cannot append past an entry it cannot walk over.
        let mut h2 = h;
        assert_eq!(h2.add_ext(Ext::Npaths(2)), Err(HeaderError::UnknownExt(ty)));
        assert_eq!(h2, h);
    }
}

#[test]
fn truncated_payload_at_end() {
    // Version (5) + Version (5) + RdmaDest needing 9 with only 6 left.
    let mut area = [0u8; EXTHDR_SPACE];
    area[0] = EXTHDR_VERSION;
    area[5] = EXTHDR_VERSION;
    area[10] = EXTHDR_RDMA_DEST;
    let h = Header {
        exthdr: area,
        ..Header::default()
    };
    assert_eq!(
        exts(&h),
        vec![
            Ok(Ext::Version(0)),
            Ok(Ext::Version(0)),
            Err(HeaderError::TruncatedExt(EXTHDR_RDMA_DEST)),
        ]
    );
    let mut h2 = h;
    assert_eq!(
        h2.add_ext(Ext::Npaths(1)),
        Err(HeaderError::TruncatedExt(EXTHDR_RDMA_DEST))
    );

    // A type byte in the very last position with no room for its payload.
    let mut area = [0u8; EXTHDR_SPACE];
    area[0] = EXTHDR_RDMA_DEST;
    area[9] = EXTHDR_VERSION;
    area[14] = EXTHDR_NPATHS;
    area[15] = EXTHDR_GEN_NUM;
    let got: Vec<_> = ExtIter::new(&area).collect();
    assert_eq!(
        got,
        vec![
            Ok(Ext::RdmaDest { rkey: 0, offset: 0 }),
            Ok(Ext::Version(u32::from_be_bytes([0, 0, 0, 0]))),
            Err(HeaderError::TruncatedExt(EXTHDR_NPATHS)),
        ]
    );
}

#[test]
fn iterator_is_fused() {
    let mut area = [0u8; EXTHDR_SPACE];
    area[0] = 0x42;
    let mut it = ExtIter::new(&area);
    assert_eq!(it.next(), Some(Err(HeaderError::UnknownExt(0x42))));
    assert_eq!(it.next(), None);
    assert_eq!(it.next(), None);
}

#[test]
fn stops_at_none_between_entries() {
    let mut area = [0u8; EXTHDR_SPACE];
    area[0] = EXTHDR_NPATHS;
    area[2] = 3;
    area[3] = EXTHDR_NONE;
    area[4] = EXTHDR_VERSION; // after the terminator: ignored
    assert_eq!(
        ExtIter::new(&area).collect::<Vec<_>>(),
        vec![Ok(Ext::Npaths(3))]
    );
}
