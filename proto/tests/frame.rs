//! Validation and classification of an arriving frame (net/rds/ib_recv.c
//! rds_ib_process_recv, rds_ib_cong_recv; net/rds/recv.c
//! rds_recv_incoming_exthdrs; net/rds/message.c rds_message_next_extension,
//! rds_exthdr_size).

use rds_proto::{
    exthdr_payload_len, header_checksum, internet_checksum, parse_frame, walk_exthdrs, Ext, Frame,
    FrameError, FrameKind, Header, RdmaExts, CONG_MAP_BYTES, EXTHDR_GEN_NUM, EXTHDR_NONE,
    EXTHDR_NPATHS, EXTHDR_RDMA, EXTHDR_RDMA_DEST, EXTHDR_SPACE, EXTHDR_TYPES, EXTHDR_VERSION,
    FLAG_ACK_REQUIRED, FLAG_CONG_BITMAP, FLAG_RETRANSMITTED, HEADER_LEN, MAX_FRAME_LEN,
};

/// A data message header with a distinct value in most fields, no checksum.
fn data() -> Header {
    Header {
        sequence: 0x0102_0304_0506_0708,
        ack: 0x1112_1314_1516_1718,
        len: 100,
        sport: 4000,
        dport: 18634,
        flags: FLAG_ACK_REQUIRED,
        credit: 7,
        csum: 0,
        exthdr: [0; EXTHDR_SPACE],
    }
}

/// A congestion-map header as C's `rds_cong_update_alloc` makes it.
fn cong() -> Header {
    Header {
        sequence: 9,
        len: CONG_MAP_BYTES as u32,
        flags: FLAG_CONG_BITMAP,
        ..Header::default()
    }
}

/// An ack-only header as C's `rds_ib_send_ack` makes it.
fn ack() -> Header {
    Header {
        ack: 77,
        credit: 3,
        ..Header::default()
    }
}

fn parse(h: &Header, payload_len: Option<u64>) -> Result<Frame, FrameError> {
    parse_frame(&h.encode(), payload_len)
}

fn kind(h: &Header) -> Result<FrameKind, FrameError> {
    parse(h, Some(u64::from(h.len))).map(|f| f.kind)
}

fn with_area(area: [u8; EXTHDR_SPACE]) -> Header {
    Header {
        exthdr: area,
        ..data()
    }
}

/// `area` with `bytes` written from `at`, the rest `fill`.
fn area_with(fill: u8, at: usize, bytes: &[u8]) -> [u8; EXTHDR_SPACE] {
    let mut a = [fill; EXTHDR_SPACE];
    a[at..at + bytes.len()].copy_from_slice(bytes);
    a
}

// --- constants and the extension size table ---------------------------------------------------

#[test]
fn constants_match_linux() {
    assert_eq!(MAX_FRAME_LEN, 1 << 20); // RDS_MAX_MSG_SIZE
    assert_eq!(EXTHDR_TYPES, 16); // __RDS_EXTHDR_MAX
    assert_eq!(CONG_MAP_BYTES, 8192); // RDS_CONG_MAP_BYTES
}

#[test]
fn exthdr_size_table_is_cs() {
    // rds_exthdr_size: VERSION 4, RDMA 4, RDMA_DEST 8, NPATHS 2, GEN_NUM 4;
    // every other entry of the table (NONE, 4, 7..15) is 0, and types past
    // the table have no size either.
    for ty in 0..=u8::MAX {
        let want = match ty {
            1 | 2 | 6 => 4,
            3 => 8,
            5 => 2,
            _ => 0,
        };
        assert_eq!(exthdr_payload_len(ty), want, "type {ty}");
    }
    // ... and agrees with the encoder.
    for e in [
        Ext::Version(1),
        Ext::Rdma { rkey: 1 },
        Ext::RdmaDest { rkey: 1, offset: 2 },
        Ext::Npaths(1),
        Ext::GenNum(1),
    ] {
        assert_eq!(
            exthdr_payload_len(e.ext_type()) + 1,
            e.encoded_len(),
            "{e:?}"
        );
    }
}

#[test]
fn error_display() {
    assert_eq!(FrameError::Checksum.to_string(), "bad header checksum");
    assert_eq!(FrameError::TooLong.to_string(), "h_len above 1 MiB");
    assert_eq!(
        FrameError::LenMismatch.to_string(),
        "payload length differs from h_len"
    );
    assert_eq!(
        FrameError::CongMap.to_string(),
        "malformed congestion map frame"
    );
    assert_eq!(
        FrameError::TruncatedExt(3).to_string(),
        "extension header 3 truncated"
    );
    let e: &dyn std::error::Error = &FrameError::Checksum;
    assert!(e.source().is_none());
}

// --- the frame as decoded ---------------------------------------------------------------------

#[test]
fn accepted_frame_carries_the_decoded_header() {
    let mut h = data();
    h.add_ext(Ext::Rdma { rkey: 0xa1b2_c3d4 }).unwrap();
    let h = h.with_checksum();
    let mut bytes = h.encode();
    let f = parse_frame(&bytes, Some(100)).unwrap();
    assert_eq!(
        f,
        Frame {
            hdr: h,
            kind: FrameKind::Data,
            rdma_rkey: Some(0xa1b2_c3d4),
            rdma_dest: None,
        }
    );
    // Padding is checksummed (C's ip_fast_csum covers all 48 bytes) but not
    // decoded: nonzero padding under a checksum that covers it passes, and
    // a change of it alone is caught.
    bytes[26..30].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
    assert_eq!(parse_frame(&bytes, Some(100)), Err(FrameError::Checksum));
    let csum = header_checksum(&bytes);
    bytes[30..32].copy_from_slice(&csum.to_be_bytes());
    let f2 = parse_frame(&bytes, Some(100)).unwrap();
    assert_eq!(f2.hdr, Header { csum, ..h });
}

// --- h_csum -----------------------------------------------------------------------------------

#[test]
fn checksum_zero_is_unchecked() {
    let h = data();
    assert_eq!(h.csum, 0);
    assert_ne!(header_checksum(&h.encode()), 0);
    assert_eq!(kind(&h), Ok(FrameKind::Data));
    // Any change of the other bytes is accepted with h_csum 0.
    let mut b = h.encode();
    b[0] ^= 0xff;
    b[27] = 0x55;
    assert!(parse_frame(&b, Some(100)).is_ok());
}

#[test]
fn with_checksum_is_accepted() {
    for h in [data(), cong(), ack(), Header { len: 0, ..data() }] {
        let c = h.with_checksum();
        assert_ne!(c.csum, 0, "{h:?}");
        assert_eq!(internet_checksum(&c.encode()), 0);
        assert_eq!(parse(&c, Some(u64::from(h.len))).map(|f| f.hdr), Ok(c));
    }
}

#[test]
fn wrong_checksum_is_refused() {
    let c = data().with_checksum();
    for delta in [1u16, 2, 0x100, 0x8000, 0xfffe] {
        let bad = Header {
            csum: c.csum.wrapping_add(delta),
            ..c
        };
        if bad.csum == 0 {
            continue;
        }
        assert_eq!(parse(&bad, Some(100)), Err(FrameError::Checksum), "{delta}");
    }
    // 0xffff and 0x0000 are the same number in ones' complement, but only 0
    // means "unchecked"; the other zero must be a real checksum.
    let z = Header::default();
    assert_eq!(header_checksum(&z.encode()), 0xffff);
    assert_eq!(kind(&Header { csum: 0xffff, ..z }), Ok(FrameKind::AckOnly));
    let not_z = Header { ack: 1, ..z };
    assert_eq!(
        parse(
            &Header {
                csum: 0xffff,
                ..not_z
            },
            Some(0)
        ),
        Err(FrameError::Checksum)
    );
}

/// Every one of the 384 single-bit flips of `h` (checksummed), and whether
/// parse_frame took it.
fn flips(h: &Header, payload_len: Option<u64>) -> Vec<(usize, u8, Result<Frame, FrameError>)> {
    let good = h.encode();
    let mut out = Vec::new();
    for i in 0..HEADER_LEN {
        for bit in 0..8 {
            let mut b = good;
            b[i] ^= 1 << bit;
            out.push((i, bit, parse_frame(&b, payload_len)));
        }
    }
    out
}

#[test]
fn every_single_bit_flip_is_caught() {
    // The ones'-complement sum changes by ±2^k (k < 16) for a flip, never a
    // multiple of 0xffff, so the sum can no longer be 0xffff: no flip leaves
    // a nonzero h_csum valid. The only flips accepted are those that turn
    // h_csum into 0 ("unchecked"), which needs a one-bit h_csum (below).
    let mut hdrs = vec![data(), cong(), ack()];
    let mut h = data();
    h.add_ext(Ext::RdmaDest {
        rkey: 0xdead_beef,
        offset: 0x0102_0304,
    })
    .unwrap();
    h.add_ext(Ext::Rdma { rkey: 5 }).unwrap();
    hdrs.push(h);
    hdrs.push(Header {
        sequence: u64::MAX,
        ack: u64::MAX,
        len: MAX_FRAME_LEN,
        sport: u16::MAX,
        dport: u16::MAX,
        flags: 0xfe,
        credit: 0xff,
        csum: 0,
        exthdr: [0xff; EXTHDR_SPACE],
    });
    let mut checked = 0;
    for h in hdrs {
        let c = h.with_checksum();
        assert!(c.csum.count_ones() > 1, "{c:?}");
        assert!(parse(&c, None).is_ok(), "{c:?}");
        let all = flips(&c, None);
        assert_eq!(all.len(), 384);
        for (i, bit, r) in all {
            assert_eq!(r, Err(FrameError::Checksum), "byte {i} bit {bit} of {c:?}");
            checked += 1;
        }
    }
    assert_eq!(checked, 5 * 384);
}

#[test]
fn a_flip_that_zeroes_the_checksum_is_unchecked() {
    // Find a header whose checksum has a single bit set: flipping that bit
    // makes h_csum 0, and the header is then accepted unchecked, as in C.
    let c = (0u64..)
        .map(|s| {
            Header {
                sequence: s,
                ..data()
            }
            .with_checksum()
        })
        .find(|c| c.csum.count_ones() == 1)
        .unwrap();
    let csum_bit = c.csum.trailing_zeros() as u8;
    let (byte, bit) = if csum_bit >= 8 {
        (30, csum_bit - 8)
    } else {
        (31, csum_bit)
    };
    for (i, b, r) in flips(&c, Some(100)) {
        if (i, b) == (byte, bit) {
            let f = r.unwrap();
            assert_eq!(f.hdr, Header { csum: 0, ..c });
        } else {
            assert_eq!(r, Err(FrameError::Checksum), "byte {i} bit {b}");
        }
    }
}

#[test]
fn checksum_is_checked_first() {
    let bad = Header {
        csum: 1,
        len: MAX_FRAME_LEN + 1,
        flags: FLAG_CONG_BITMAP,
        exthdr: area_with(4, 15, &[EXTHDR_RDMA]),
        ..data()
    };
    assert_eq!(parse(&bad, Some(3)), Err(FrameError::Checksum));
}

// --- h_len ------------------------------------------------------------------------------------

#[test]
fn h_len_limit() {
    let max = Header {
        len: MAX_FRAME_LEN,
        ..data()
    };
    assert_eq!(kind(&max), Ok(FrameKind::Data));
    assert_eq!(kind(&max.with_checksum()), Ok(FrameKind::Data));
    assert!(parse(&max, None).is_ok());
    for len in [MAX_FRAME_LEN + 1, MAX_FRAME_LEN * 2, u32::MAX] {
        let h = Header { len, ..data() };
        assert_eq!(parse(&h, None), Err(FrameError::TooLong), "{len}");
        // Before the length comparison, even when the payload matches.
        assert_eq!(kind(&h), Err(FrameError::TooLong), "{len}");
        assert_eq!(parse(&h, Some(0)), Err(FrameError::TooLong), "{len}");
        assert_eq!(kind(&h.with_checksum()), Err(FrameError::TooLong), "{len}");
    }
}

#[test]
fn payload_length_must_match() {
    let h = data();
    assert!(parse(&h, Some(100)).is_ok());
    for n in [0, 99, 101, 100 + (1 << 32), u64::MAX] {
        assert_eq!(parse(&h, Some(n)), Err(FrameError::LenMismatch), "{n}");
    }
    // Unknown payload length: no check.
    assert!(parse(&h, None).is_ok());
    let z = Header { len: 0, ..data() };
    assert!(parse(&z, Some(0)).is_ok());
    assert_eq!(parse(&z, Some(1)), Err(FrameError::LenMismatch));
    assert_eq!(parse(&z, Some(1 << 32)), Err(FrameError::LenMismatch));
}

#[test]
fn payload_length_is_checked_before_the_kind() {
    // A malformed map with a wrong payload length: the length rule first.
    let h = Header { sport: 1, ..cong() };
    assert_eq!(parse(&h, Some(0)), Err(FrameError::LenMismatch));
    assert_eq!(parse(&h, None), Err(FrameError::CongMap));
}

// --- congestion maps --------------------------------------------------------------------------

#[test]
fn cong_map_frame() {
    let f = parse(&cong(), Some(CONG_MAP_BYTES as u64)).unwrap();
    assert_eq!(f.kind, FrameKind::CongMap);
    assert_eq!(f.hdr, cong());
    assert_eq!(kind(&cong().with_checksum()), Ok(FrameKind::CongMap));
    assert_eq!(parse(&cong(), None).map(|f| f.kind), Ok(FrameKind::CongMap));
    // Any flag byte with the bit set is a map here (C's IB and TCP want the
    // byte to be exactly RDS_FLAG_CONG_BITMAP; see the module documentation).
    for flags in [
        FLAG_CONG_BITMAP | FLAG_ACK_REQUIRED,
        FLAG_CONG_BITMAP | FLAG_RETRANSMITTED,
        0xff,
    ] {
        assert_eq!(
            kind(&Header { flags, ..cong() }),
            Ok(FrameKind::CongMap),
            "{flags:#x}"
        );
    }
    // Sequence, ack and credit are free.
    let h = Header {
        sequence: u64::MAX,
        ack: 5,
        credit: 200,
        ..cong()
    };
    assert_eq!(kind(&h), Ok(FrameKind::CongMap));
}

#[test]
fn cong_map_shape() {
    for h in [
        Header { sport: 1, ..cong() },
        Header { dport: 1, ..cong() },
        Header {
            sport: 0xffff,
            dport: 0xffff,
            ..cong()
        },
        Header { len: 0, ..cong() },
        Header {
            len: CONG_MAP_BYTES as u32 - 1,
            ..cong()
        },
        Header {
            len: CONG_MAP_BYTES as u32 + 1,
            ..cong()
        },
        Header {
            len: MAX_FRAME_LEN,
            ..cong()
        },
    ] {
        assert_eq!(kind(&h), Err(FrameError::CongMap), "{h:?}");
        assert_eq!(parse(&h, None), Err(FrameError::CongMap), "{h:?}");
    }
    // A ports-0 frame without payload but with the map bit is a bad map,
    // not an ack (C's IB would take it as an ack; no C sender writes it).
    let h = Header {
        flags: FLAG_CONG_BITMAP,
        ..ack()
    };
    assert_eq!(kind(&h), Err(FrameError::CongMap));
    // Without the bit, an 8 KiB ports-0 frame is data (a ping from port 0).
    let h = Header { flags: 0, ..cong() };
    assert_eq!(kind(&h), Ok(FrameKind::Data));
}

// --- ack-only and data ------------------------------------------------------------------------

#[test]
fn ack_only_frame() {
    assert_eq!(kind(&ack()), Ok(FrameKind::AckOnly));
    assert_eq!(kind(&Header::default()), Ok(FrameKind::AckOnly));
    assert_eq!(kind(&ack().with_checksum()), Ok(FrameKind::AckOnly));
    assert_eq!(parse(&ack(), None).map(|f| f.kind), Ok(FrameKind::AckOnly));
    // Other flags do not matter.
    for flags in [FLAG_ACK_REQUIRED, FLAG_RETRANSMITTED, 0xfe] {
        assert_eq!(
            kind(&Header { flags, ..ack() }),
            Ok(FrameKind::AckOnly),
            "{flags:#x}"
        );
    }
    let f = parse(&ack(), Some(0)).unwrap();
    assert_eq!(f.hdr.ack, 77);
    assert_eq!(f.hdr.credit, 3);
}

#[test]
fn data_frames() {
    assert_eq!(kind(&data()), Ok(FrameKind::Data));
    for h in [
        // Ports 0 with a payload.
        Header { len: 1, ..ack() },
        // A ping (dport 0) and a pong (to the probe port), without payload.
        Header { sport: 1, ..ack() },
        Header { dport: 1, ..ack() },
        Header {
            sport: 4000,
            dport: 0,
            ..ack()
        },
        // A 0-byte message between ports.
        Header { len: 0, ..data() },
        Header {
            flags: 0xfe,
            ..data()
        },
    ] {
        assert_eq!(kind(&h), Ok(FrameKind::Data), "{h:?}");
    }
}

#[test]
fn ack_only_needs_h_len_zero() {
    // With the payload length unknown, h_len decides.
    assert_eq!(
        parse(&Header { len: 4, ..ack() }, None).map(|f| f.kind),
        Ok(FrameKind::Data)
    );
}

// --- the extension-header walk ----------------------------------------------------------------

#[test]
fn empty_area() {
    assert_eq!(walk_exthdrs(&[0; EXTHDR_SPACE]), Ok((None, None)));
    let f = parse(&data(), Some(100)).unwrap();
    assert_eq!((f.rdma_rkey, f.rdma_dest), (None, None));
}

#[test]
fn none_ends_the_walk() {
    // RDMA, then NONE, then what would be another RDMA and a truncated
    // RDMA_DEST: nothing after NONE is looked at.
    let mut a = [0u8; EXTHDR_SPACE];
    a[..5].copy_from_slice(&[EXTHDR_RDMA, 0, 0, 0, 9]);
    a[5] = EXTHDR_NONE;
    a[6..11].copy_from_slice(&[EXTHDR_RDMA_DEST, 1, 2, 3, 4]);
    a[15] = EXTHDR_RDMA_DEST;
    assert_eq!(walk_exthdrs(&a), Ok((Some(9), None)));
    // NONE first: nothing at all.
    let a = area_with(0xff, 0, &[EXTHDR_NONE]);
    assert_eq!(walk_exthdrs(&a), Ok((None, None)));
    let a = area_with(EXTHDR_RDMA_DEST, 0, &[EXTHDR_NONE]);
    assert_eq!(walk_exthdrs(&a), Ok((None, None)));
}

#[test]
fn types_16_and_above_stop_the_walk() {
    for ty in EXTHDR_TYPES..=u8::MAX {
        // At the start: nothing after it is read, not even a truncated RDMA.
        let mut a = area_with(0, 0, &[ty, EXTHDR_RDMA, 0, 0, 0, 1]);
        a[15] = EXTHDR_RDMA_DEST;
        assert_eq!(walk_exthdrs(&a), Ok((None, None)), "type {ty}");
        // After an entry: the entry is kept.
        let a = area_with(ty, 0, &[EXTHDR_RDMA, 0, 0, 0, 2]);
        assert_eq!(walk_exthdrs(&a), Ok((Some(2), None)), "type {ty}");
        let mut a = a;
        a[15] = EXTHDR_GEN_NUM;
        assert_eq!(walk_exthdrs(&a), Ok((Some(2), None)), "type {ty}");
        let f = parse(&with_area(a), Some(100)).unwrap();
        assert_eq!(f.rdma_rkey, Some(2));
    }
}

#[test]
fn types_4_and_7_to_15_are_empty_and_skipped() {
    let empty: Vec<u8> = [4u8].into_iter().chain(7..EXTHDR_TYPES).collect();
    assert_eq!(empty.len(), 10);
    for &ty in &empty {
        assert_eq!(exthdr_payload_len(ty), 0);
        // The type byte alone is the entry; the next byte is a type again.
        let a = area_with(0, 0, &[ty, EXTHDR_RDMA, 0, 0, 1, 0]);
        assert_eq!(walk_exthdrs(&a), Ok((Some(0x100), None)), "type {ty}");
        // A whole area of them is fine, and the last byte may be one.
        assert_eq!(walk_exthdrs(&[ty; EXTHDR_SPACE]), Ok((None, None)));
        // 11 of them, then RDMA_DEST would need 9 bytes where 5 are left.
        let mut a = [ty; EXTHDR_SPACE];
        a[11] = EXTHDR_RDMA_DEST;
        assert_eq!(
            walk_exthdrs(&a),
            Err(FrameError::TruncatedExt(EXTHDR_RDMA_DEST))
        );
    }
    // All of them in a row, then an RDMA (10 + 5 = 15 bytes, then NONE).
    let mut a = [0u8; EXTHDR_SPACE];
    a[..10].copy_from_slice(&empty);
    a[10..15].copy_from_slice(&[EXTHDR_RDMA, 0xaa, 0xbb, 0xcc, 0xdd]);
    assert_eq!(walk_exthdrs(&a), Ok((Some(0xaabb_ccdd), None)));
    // Mixed with known entries.
    let a = [
        7,
        EXTHDR_NPATHS,
        0,
        2,
        15,
        EXTHDR_RDMA_DEST,
        0,
        0,
        0,
        5,
        0,
        0,
        0,
        6,
        4,
        9,
    ];
    assert_eq!(walk_exthdrs(&a), Ok((None, Some((5, 6)))));
}

#[test]
fn first_rdma_is_kept() {
    let a = [
        EXTHDR_RDMA,
        0,
        0,
        0,
        1,
        EXTHDR_RDMA,
        0,
        0,
        0,
        2,
        EXTHDR_RDMA,
        0,
        0,
        0,
        3,
        0,
    ];
    assert_eq!(walk_exthdrs(&a), Ok((Some(1), None)));
    // The same through add_ext, which appends several.
    let mut h = data();
    for k in [10, 20, 30] {
        h.add_ext(Ext::Rdma { rkey: k }).unwrap();
    }
    assert_eq!(
        h.exthdr,
        [2, 0, 0, 0, 10, 2, 0, 0, 0, 20, 2, 0, 0, 0, 30, 0]
    );
    let f = parse(&h.with_checksum(), Some(100)).unwrap();
    assert_eq!(f.rdma_rkey, Some(10));
}

#[test]
fn rdma_dest_is_kept_and_only_one_fits() {
    // RDMA_DEST after other entries, and with an RDMA either side.
    let a = area_with(0, 0, &[4, EXTHDR_RDMA_DEST, 0, 0, 0, 1, 0, 0, 0, 2]);
    assert_eq!(walk_exthdrs(&a), Ok((None, Some((1, 2)))));
    let mut h = data();
    h.add_ext(Ext::Rdma { rkey: 7 }).unwrap();
    h.add_ext(Ext::RdmaDest {
        rkey: 0x1122_3344,
        offset: 0x5566_7788,
    })
    .unwrap();
    assert_eq!(
        walk_exthdrs(&h.exthdr),
        Ok((Some(7), Some((0x1122_3344, 0x5566_7788))))
    );
    let mut h = data();
    h.add_ext(Ext::RdmaDest {
        rkey: u32::MAX,
        offset: 0,
    })
    .unwrap();
    h.add_ext(Ext::Rdma { rkey: 0 }).unwrap();
    assert_eq!(walk_exthdrs(&h.exthdr), Ok((Some(0), Some((u32::MAX, 0)))));
    // "The last one is kept": a second RDMA_DEST (9 + 9 = 18 bytes) never
    // fits in 16, so it is always a truncated one and the frame is refused;
    // the walk never sees two.
    for pad in 0..7 {
        let mut a = [4u8; EXTHDR_SPACE];
        a[pad] = EXTHDR_RDMA_DEST;
        a[pad + 9] = EXTHDR_RDMA_DEST;
        assert_eq!(
            walk_exthdrs(&a),
            Err(FrameError::TruncatedExt(EXTHDR_RDMA_DEST)),
            "pad {pad}"
        );
    }
    let mut h = data();
    h.add_ext(Ext::RdmaDest { rkey: 1, offset: 1 }).unwrap();
    assert!(h.add_ext(Ext::RdmaDest { rkey: 2, offset: 2 }).is_err());
}

#[test]
fn truncated_known_types_are_refused() {
    for ty in [
        EXTHDR_VERSION,
        EXTHDR_RDMA,
        EXTHDR_RDMA_DEST,
        EXTHDR_NPATHS,
        EXTHDR_GEN_NUM,
    ] {
        let n = exthdr_payload_len(ty);
        assert!(n > 0);
        // The type byte at every position from which its payload runs past
        // the 16 bytes (empty type-4 entries in front): refused.
        for at in EXTHDR_SPACE - n..EXTHDR_SPACE {
            let mut a = [4u8; EXTHDR_SPACE];
            a[at..].fill(0xee);
            a[at] = ty;
            assert_eq!(
                walk_exthdrs(&a),
                Err(FrameError::TruncatedExt(ty)),
                "type {ty} at {at}"
            );
            let h = with_area(a);
            assert_eq!(kind(&h), Err(FrameError::TruncatedExt(ty)));
            assert_eq!(
                parse(&h.with_checksum(), None),
                Err(FrameError::TruncatedExt(ty))
            );
        }
        // Where it just fits (payload ending at byte 15): accepted.
        let at = EXTHDR_SPACE - 1 - n;
        let mut a = [4u8; EXTHDR_SPACE];
        a[at] = ty;
        a[at + 1..].fill(0x11);
        let want = match ty {
            EXTHDR_RDMA => (Some(0x1111_1111), None),
            EXTHDR_RDMA_DEST => (None, Some((0x1111_1111, 0x1111_1111))),
            _ => (None, None),
        };
        assert_eq!(walk_exthdrs(&a), Ok(want), "type {ty} at {at}");
        assert!(kind(&with_area(a)).is_ok());
    }
    // Truncation after well-formed entries (Version, Version, RDMA_DEST).
    let mut a = [0u8; EXTHDR_SPACE];
    a[0] = EXTHDR_VERSION;
    a[5] = EXTHDR_RDMA;
    a[10] = EXTHDR_RDMA_DEST;
    assert_eq!(
        walk_exthdrs(&a),
        Err(FrameError::TruncatedExt(EXTHDR_RDMA_DEST))
    );
}

#[test]
fn truncated_ext_is_the_last_rule() {
    let a = area_with(4, 15, &[EXTHDR_NPATHS]);
    // Every kind is walked.
    for h in [data(), cong(), ack()] {
        let h = Header { exthdr: a, ..h };
        assert_eq!(
            kind(&h),
            Err(FrameError::TruncatedExt(EXTHDR_NPATHS)),
            "{h:?}"
        );
    }
    // Other rules first.
    let h = Header {
        exthdr: a,
        sport: 1,
        ..cong()
    };
    assert_eq!(kind(&h), Err(FrameError::CongMap));
    let h = Header {
        exthdr: a,
        ..data()
    };
    assert_eq!(parse(&h, Some(1)), Err(FrameError::LenMismatch));
}

#[test]
fn add_ext_reads_back() {
    let lists: [&[Ext]; 6] = [
        &[Ext::Rdma { rkey: 0xa1b2_c3d4 }],
        &[Ext::RdmaDest {
            rkey: 0x0102_0304,
            offset: 0x0506_0708,
        }],
        &[Ext::Version(0x0300_0001), Ext::GenNum(9), Ext::Npaths(8)],
        &[
            Ext::Npaths(1),
            Ext::RdmaDest { rkey: 3, offset: 4 },
            Ext::Npaths(2),
        ],
        &[Ext::Version(1), Ext::Rdma { rkey: 2 }, Ext::GenNum(3)],
        &[],
    ];
    for list in lists {
        let mut h = data();
        for &e in list {
            h.add_ext(e).unwrap();
        }
        let want_rkey = list.iter().find_map(|e| match *e {
            Ext::Rdma { rkey } => Some(rkey),
            _ => None,
        });
        let want_dest = list.iter().rev().find_map(|e| match *e {
            Ext::RdmaDest { rkey, offset } => Some((rkey, offset)),
            _ => None,
        });
        for h in [h, h.with_checksum()] {
            let f = parse(&h, Some(100)).unwrap();
            assert_eq!(
                (f.rdma_rkey, f.rdma_dest),
                (want_rkey, want_dest),
                "{list:?}"
            );
            assert_eq!(
                f.hdr.exts().collect::<Vec<_>>(),
                list.iter().map(|&e| Ok(e)).collect::<Vec<_>>()
            );
        }
    }
}

/// C's `rds_message_next_extension` loop, written out: the (type,
/// payload) entries it yields, and whether it stopped at a type whose
/// payload did not fit.
fn c_walk(area: &[u8; EXTHDR_SPACE]) -> (Vec<(u8, Vec<u8>)>, Option<u8>) {
    const SIZE: [usize; 16] = [0, 4, 4, 8, 0, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        if pos >= EXTHDR_SPACE {
            return (out, None);
        }
        let ty = area[pos];
        pos += 1;
        if ty == 0 || ty >= 16 {
            return (out, None);
        }
        let len = SIZE[usize::from(ty)];
        if pos + len > EXTHDR_SPACE {
            return (out, Some(ty));
        }
        out.push((ty, area[pos..pos + len].to_vec()));
        pos += len;
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

/// walk_exthdrs's answer, from C's walk.
fn model(area: &[u8; EXTHDR_SPACE]) -> Result<RdmaExts, FrameError> {
    let (entries, truncated) = c_walk(area);
    if let Some(ty) = truncated {
        return Err(FrameError::TruncatedExt(ty));
    }
    let rkey = entries
        .iter()
        .find(|(t, _)| *t == EXTHDR_RDMA)
        .map(|(_, p)| be32(p));
    let dest = entries
        .iter()
        .rev()
        .find(|(t, _)| *t == EXTHDR_RDMA_DEST)
        .map(|(_, p)| (be32(p), be32(&p[4..])));
    Ok((rkey, dest))
}

#[test]
fn walk_matches_c_on_every_two_type_prefix() {
    // Every pair of type bytes at the front, over three backgrounds: the
    // rest zero, the rest 0xff (stops), the rest type 4 (empty entries).
    let mut n = 0;
    for fill in [0u8, 0xff, 4] {
        for a0 in 0..=u8::MAX {
            for a1 in 0..=u8::MAX {
                let mut a = [fill; EXTHDR_SPACE];
                a[0] = a0;
                a[1] = a1;
                a[9] = 0x42;
                assert_eq!(walk_exthdrs(&a), model(&a), "{a:?}");
                n += 1;
            }
        }
    }
    assert_eq!(n, 3 * 65536);
}

#[test]
fn walk_matches_c_with_one_type_byte_anywhere() {
    // One type byte at each position behind empty entries, then junk.
    for at in 0..EXTHDR_SPACE {
        for ty in 0..=u8::MAX {
            for junk in [0u8, 2, 3, 0x10, 0xa5] {
                let mut a = [7u8; EXTHDR_SPACE];
                a[at] = ty;
                a[at + 1..].fill(junk);
                assert_eq!(walk_exthdrs(&a), model(&a), "{a:?}");
            }
        }
    }
}
