//! Control messages: `for_each_cmsghdr` + `CMSG_OK` (include/linux/socket.h),
//! `rds_rdma_bytes` and `rds_rm_size` (net/rds/send.c).

use proptest::prelude::*;
use rds_proto::{
    cmsg_align, cmsg_len, cmsg_space, cmsgs, encode_cmsg, rdma_bytes, scan_send_cmsgs, Cmsg,
    CmsgError, CmsgHdr, SendCmsgs, CMSG_HDR_LEN, RDMA_ARGS_LEN, RDS_CMSG_ATOMIC_CSWP,
    RDS_CMSG_ATOMIC_FADD, RDS_CMSG_CONG_UPDATE, RDS_CMSG_MASKED_ATOMIC_CSWP,
    RDS_CMSG_MASKED_ATOMIC_FADD, RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_MAP,
    RDS_CMSG_RDMA_STATUS, RDS_CMSG_RXPATH_LATENCY, RDS_CMSG_ZCOPY_COMPLETION,
    RDS_CMSG_ZCOPY_COOKIE, SOL_RDS, SOL_SOCKET,
};

use CmsgError::Inval;

// --- helpers ---------------------------------------------------------------

/// A raw header with an arbitrary `cmsg_len`, followed by `data` (no
/// padding).
fn raw(len: u64, level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&len.to_ne_bytes());
    v.extend_from_slice(&level.to_ne_bytes());
    v.extend_from_slice(&kind.to_ne_bytes());
    v.extend_from_slice(data);
    v
}

/// A well-formed control message, padded to `CMSG_SPACE`.
fn msg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
    let mut v = vec![0xeeu8; cmsg_space(data.len())];
    assert_eq!(encode_cmsg(level, kind, data, &mut v), Some(v.len()));
    v
}

/// A `struct rds_rdma_args` whose `remote_vec.bytes` (offset 16) is `bytes`;
/// the other fields are garbage.
fn rdma_args(bytes: u64) -> Vec<u8> {
    let mut v = vec![0x5au8; RDMA_ARGS_LEN];
    v[16..24].copy_from_slice(&bytes.to_ne_bytes());
    v
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn collect(buf: &[u8]) -> Vec<Result<Cmsg<'_>, CmsgError>> {
    cmsgs(buf).collect()
}

/// The C walk, transcribed as a reference model with the pointer
/// arithmetic done on offsets in `u128` (so nothing can overflow):
/// `CMSG_FIRSTHDR`, `CMSG_OK`, `__cmsg_nxthdr`. Yields (level, kind, data
/// range) or `None` for a not-OK header (after which the walk stops, as
/// every C caller returns -EINVAL).
fn c_model(buf: &[u8]) -> Vec<Option<(i32, i32, usize, usize)>> {
    let size = buf.len() as u128;
    let mut out = Vec::new();
    let hdr = 16u128;
    // CMSG_FIRSTHDR
    let mut cur: Option<u128> = if size >= hdr { Some(0) } else { None };
    while let Some(off) = cur {
        let o = off as usize;
        let cmsg_len = u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap()) as u128;
        let level = i32::from_ne_bytes(buf[o + 8..o + 12].try_into().unwrap());
        let kind = i32::from_ne_bytes(buf[o + 12..o + 16].try_into().unwrap());
        // CMSG_OK
        if !(cmsg_len >= hdr && cmsg_len <= size - off) {
            out.push(None);
            break;
        }
        out.push(Some((level, kind, o + 16, o + cmsg_len as usize)));
        // __cmsg_nxthdr: ptr = cmsg + CMSG_ALIGN(cmsg_len); NULL if
        // (ptr + 1) - ctl > size.
        let next = off + ((cmsg_len + 7) & !7);
        cur = if next + hdr > size { None } else { Some(next) };
    }
    out
}

fn as_model(buf: &[u8]) -> Vec<Option<(i32, i32, usize, usize)>> {
    let base = buf.as_ptr() as usize;
    cmsgs(buf)
        .map(|r| {
            r.ok().map(|c| {
                let start = c.data.as_ptr() as usize - base;
                (c.level, c.kind, start, start + c.data.len())
            })
        })
        .collect()
}

// --- CMSG_ALIGN, CMSG_LEN, CMSG_SPACE ----------------------------------------

#[test]
fn align_len_space() {
    assert_eq!(CMSG_HDR_LEN, 16);
    for (n, a) in [(0, 0), (1, 8), (7, 8), (8, 8), (9, 16), (56, 56), (57, 64)] {
        assert_eq!(cmsg_align(n), a, "CMSG_ALIGN({n})");
    }
    assert_eq!(cmsg_len(0), 16);
    assert_eq!(cmsg_len(4), 20);
    // CMSG_LEN(sizeof(struct rds_rdma_args)) is the minimum rds_rdma_bytes and
    // rds_cmsg_rdma_args accept.
    assert_eq!(RDMA_ARGS_LEN, 56);
    assert_eq!(cmsg_len(RDMA_ARGS_LEN), 72);
    assert_eq!(cmsg_space(0), 16);
    assert_eq!(cmsg_space(1), 24);
    assert_eq!(cmsg_space(4), 24);
    assert_eq!(cmsg_space(8), 24);
    // Saturation instead of overflow.
    assert_eq!(cmsg_align(usize::MAX), usize::MAX);
    assert_eq!(cmsg_align(usize::MAX - 6), usize::MAX);
    assert_eq!(cmsg_align(usize::MAX - 7), usize::MAX - 7);
    assert_eq!(cmsg_len(usize::MAX), usize::MAX);
    assert_eq!(cmsg_space(usize::MAX - 3), usize::MAX);
}

#[test]
fn errno_is_einval() {
    assert_eq!(Inval.errno(), 22);
    assert!(!Inval.to_string().is_empty());
}

// --- the walk ------------------------------------------------------------------

#[test]
fn shorter_than_a_header_has_no_cmsg() {
    // CMSG_FIRSTHDR is NULL when msg_controllen < sizeof(struct cmsghdr),
    // whatever the bytes (a bogus cmsg_len is never looked at).
    for n in 0..16 {
        assert!(collect(&vec![0xffu8; n]).is_empty(), "len {n}");
    }
}

#[test]
fn one_cmsg() {
    let buf = msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &7u32.to_ne_bytes());
    assert_eq!(buf.len(), 24);
    assert_eq!(u64::from_ne_bytes(buf[..8].try_into().unwrap()), 20);
    assert_eq!(&buf[20..], &[0; 4]);
    assert_eq!(
        collect(&buf),
        vec![Ok(Cmsg {
            level: SOL_RDS,
            kind: RDS_CMSG_ZCOPY_COOKIE,
            data: &7u32.to_ne_bytes(),
        })]
    );
}

#[test]
fn empty_data_and_unpadded_last() {
    // cmsg_len == 16: empty data is OK.
    let buf = raw(16, SOL_SOCKET, 1, &[]);
    assert_eq!(
        collect(&buf),
        vec![Ok(Cmsg {
            level: SOL_SOCKET,
            kind: 1,
            data: &[],
        })]
    );
    // The last message need not be padded: cmsg_len 20 in 20 bytes.
    let buf = raw(20, SOL_RDS, 12, &[1, 2, 3, 4]);
    assert_eq!(collect(&buf).len(), 1);
    assert_eq!(collect(&buf)[0].unwrap().data, &[1, 2, 3, 4]);
}

#[test]
fn not_ok_headers_yield_one_error() {
    // cmsg_len < sizeof(struct cmsghdr).
    for len in [0u64, 1, 15] {
        let buf = raw(len, SOL_RDS, RDS_CMSG_RDMA_ARGS, &[0; 32]);
        assert_eq!(collect(&buf), vec![Err(Inval)], "cmsg_len {len}");
    }
    // cmsg_len past the end of the buffer.
    let buf = raw(33, SOL_RDS, RDS_CMSG_RDMA_ARGS, &[0; 16]);
    assert_eq!(collect(&buf), vec![Err(Inval)]);
    let buf = raw(u64::MAX, SOL_RDS, RDS_CMSG_RDMA_ARGS, &[0; 16]);
    assert_eq!(collect(&buf), vec![Err(Inval)]);
    // Exactly to the end is OK.
    let buf = raw(32, SOL_RDS, RDS_CMSG_RDMA_ARGS, &[0; 16]);
    assert_eq!(collect(&buf).len(), 1);
    // A bad header after good ones: the good ones come first.
    let buf = cat(&[
        msg(SOL_SOCKET, 1, &[1]),
        msg(SOL_RDS, 2, &[2; 8]),
        raw(8, 0, 0, &[]),
        msg(SOL_RDS, 3, &[]),
    ]);
    let v = collect(&buf);
    assert_eq!(v.len(), 3);
    assert!(v[0].is_ok() && v[1].is_ok());
    assert_eq!(v[2], Err(Inval));
}

#[test]
fn next_header_is_aligned() {
    // cmsg_len 17: the next header is at CMSG_ALIGN(17) = 24, and bytes
    // 17..24 (whatever they are) are skipped.
    let mut buf = raw(17, SOL_RDS, 1, &[9]);
    buf.extend_from_slice(&[0xff; 7]);
    buf.extend(raw(16, SOL_RDS, 2, &[]));
    let v = collect(&buf);
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].unwrap().data, &[9]);
    assert_eq!(v[1].unwrap().kind, 2);
}

#[test]
fn trailing_partial_header_is_ignored() {
    // __cmsg_nxthdr returns NULL when the next header does not fit entirely,
    // so up to 15 trailing bytes (even 0xff garbage) are never read.
    for tail in 0..16 {
        let mut buf = msg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[1; 8]);
        buf.extend(vec![0xff; tail]);
        assert_eq!(collect(&buf).len(), 1, "tail {tail}");
        assert!(collect(&buf)[0].is_ok());
    }
    // 16 trailing bytes are a header, here a bad one.
    let mut buf = msg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[1; 8]);
    buf.extend(vec![0xff; 16]);
    assert_eq!(collect(&buf)[1], Err(Inval));
}

#[test]
fn unaligned_last_length_ends_the_walk() {
    // cmsg_len 20 in a 30-byte buffer: the next header would be at 24, and
    // 24 + 16 > 30, so the walk ends although bytes 20..30 exist.
    let mut buf = raw(20, SOL_RDS, 1, &[1; 4]);
    buf.extend(vec![0; 10]);
    assert_eq!(collect(&buf).len(), 1);
}

#[test]
fn iterator_is_fused() {
    let buf = raw(3, 0, 0, &[0; 20]);
    let mut it = cmsgs(&buf);
    assert_eq!(it.next(), Some(Err(Inval)));
    assert_eq!(it.next(), None);
    assert_eq!(it.next(), None);
}

// --- rds_rdma_bytes --------------------------------------------------------------

#[test]
fn rdma_bytes_sums_remote_vec_bytes() {
    assert_eq!(rdma_bytes(&[]), Ok(0));
    let buf = cat(&[
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(1000)),
        msg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8]),
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(24)),
        // Other levels are skipped, even with the RDMA_ARGS type.
        msg(SOL_SOCKET, RDS_CMSG_RDMA_ARGS, &rdma_args(1 << 40)),
    ]);
    assert_eq!(rdma_bytes(&buf), Ok(1024));
}

#[test]
fn rdma_bytes_wraps_like_size_t() {
    let buf = cat(&[
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(u64::MAX)),
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(2)),
    ]);
    assert_eq!(rdma_bytes(&buf), Ok(1));
}

#[test]
fn rdma_bytes_checks() {
    // RDMA_ARGS shorter than CMSG_LEN(sizeof(struct rds_rdma_args)) = 72.
    let buf = msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &[0; RDMA_ARGS_LEN - 1]);
    assert_eq!(rdma_bytes(&buf), Err(Inval));
    // Longer is fine; the extra bytes are ignored.
    let mut args = rdma_args(5);
    args.extend([0xff; 9]);
    assert_eq!(rdma_bytes(&msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &args)), Ok(5));
    // Short messages of other types and levels are fine here.
    let buf = cat(&[
        msg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[]),
        msg(SOL_SOCKET, RDS_CMSG_RDMA_ARGS, &[]),
        // rds_rdma_bytes does not reject unknown RDS types; rds_rm_size does.
        msg(SOL_RDS, 99, &[]),
    ]);
    assert_eq!(rdma_bytes(&buf), Ok(0));
    // A not-OK header.
    let buf = cat(&[
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(1)),
        raw(1000, SOL_RDS, 1, &[0; 16]),
    ]);
    assert_eq!(rdma_bytes(&buf), Err(Inval));
}

// --- rds_rm_size -------------------------------------------------------------------

#[test]
fn scan_counts_each_kind() {
    assert_eq!(scan_send_cmsgs(&[], false), Ok(SendCmsgs::default()));
    let buf = cat(&[
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(1)),
        msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(1)),
        msg(SOL_RDS, RDS_CMSG_ATOMIC_FADD, &[0; 72]),
        msg(SOL_RDS, RDS_CMSG_ATOMIC_CSWP, &[0; 72]),
        msg(SOL_RDS, RDS_CMSG_MASKED_ATOMIC_FADD, &[0; 72]),
        msg(SOL_RDS, RDS_CMSG_MASKED_ATOMIC_CSWP, &[0; 72]),
        msg(SOL_SOCKET, 1, &[0; 4]),
        msg(12345, RDS_CMSG_RDMA_STATUS, &[]),
    ]);
    assert_eq!(
        scan_send_cmsgs(&buf, false),
        Ok(SendCmsgs {
            rdma_args: 2,
            atomics: 4,
            ..SendCmsgs::default()
        })
    );
    let buf = cat(&[
        msg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8]),
        msg(SOL_RDS, RDS_CMSG_RDMA_MAP, &[0; 32]),
        msg(SOL_RDS, RDS_CMSG_RDMA_MAP, &[0; 32]),
        msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &7u32.to_ne_bytes()),
        msg(
            SOL_RDS,
            RDS_CMSG_ZCOPY_COOKIE,
            &0x1234_5678u32.to_ne_bytes(),
        ),
    ]);
    // The last cookie counts (C's rds_cmsg_zcopy writes each in turn).
    let want = SendCmsgs {
        rdma_dest: 1,
        rdma_map: 2,
        zcopy_cookie: Some(Ok(0x1234_5678)),
        ..SendCmsgs::default()
    };
    assert_eq!(scan_send_cmsgs(&buf, false), Ok(want));
    assert_eq!(scan_send_cmsgs(&buf, true), Ok(want));
}

#[test]
fn scan_rejects_types_not_for_sendmsg() {
    // The switch in rds_rm_size: everything but ARGS, DEST, MAP, ZCOPY_COOKIE
    // and the four atomics is -EINVAL, including the recvmsg-only types.
    for kind in [
        0,
        RDS_CMSG_RDMA_STATUS,
        RDS_CMSG_CONG_UPDATE,
        10,
        RDS_CMSG_RXPATH_LATENCY,
        RDS_CMSG_ZCOPY_COMPLETION,
        14,
        -1,
        i32::MAX,
    ] {
        let buf = msg(SOL_RDS, kind, &[0; 8]);
        assert_eq!(scan_send_cmsgs(&buf, false), Err(Inval), "type {kind}");
        // Any type is fine at another level.
        let buf = msg(SOL_SOCKET, kind, &[0; 8]);
        assert_eq!(scan_send_cmsgs(&buf, false), Ok(SendCmsgs::default()));
    }
}

#[test]
fn scan_rejects_mixed_groups() {
    // cmsg_groups == 3: (DEST, MAP, ZCOPY_COOKIE) with (ARGS, ATOMIC).
    let group1 = [
        RDS_CMSG_RDMA_ARGS,
        RDS_CMSG_ATOMIC_FADD,
        RDS_CMSG_ATOMIC_CSWP,
        RDS_CMSG_MASKED_ATOMIC_FADD,
        RDS_CMSG_MASKED_ATOMIC_CSWP,
    ];
    let group2 = [RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_MAP, RDS_CMSG_ZCOPY_COOKIE];
    for a in group1 {
        for b in group2 {
            let one = msg(SOL_RDS, a, &[0; 72]);
            let two = msg(SOL_RDS, b, &[0; 8]);
            assert_eq!(
                scan_send_cmsgs(&cat(&[one.clone(), two.clone()]), false),
                Err(Inval)
            );
            assert_eq!(scan_send_cmsgs(&cat(&[two, one]), true), Err(Inval));
        }
    }
}

#[test]
fn scan_zerocopy_needs_a_cookie() {
    // (msg->msg_flags & MSG_ZEROCOPY) && !zcopy_cookie
    assert_eq!(scan_send_cmsgs(&[], true), Err(Inval));
    let buf = msg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8]);
    assert_eq!(scan_send_cmsgs(&buf, true), Err(Inval));
    // A cookie at another level does not count.
    let buf = msg(SOL_SOCKET, RDS_CMSG_ZCOPY_COOKIE, &[0; 4]);
    assert_eq!(scan_send_cmsgs(&buf, true), Err(Inval));
    // rds_rm_size does not check the cookie's length (rds_cmsg_zcopy does, later): the walk
    // succeeds and the cookie is the error the caller returns.
    for short in 0..4 {
        let buf = msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &[0xab; 3][..short]);
        assert_eq!(
            scan_send_cmsgs(&buf, true),
            Ok(SendCmsgs {
                zcopy_cookie: Some(Err(Inval)),
                ..SendCmsgs::default()
            }),
            "{short} bytes"
        );
    }
}

#[test]
fn scan_reads_the_cookie() {
    let cookie = |data: &[u8]| {
        scan_send_cmsgs(&msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, data), true).map(|s| s.zcopy_cookie)
    };
    // Its first four bytes in native order; more are ignored (C reads a u32 at CMSG_DATA).
    assert_eq!(
        cookie(&[1, 2, 3, 4]),
        Ok(Some(Ok(u32::from_ne_bytes([1, 2, 3, 4]))))
    );
    assert_eq!(
        cookie(&[1, 2, 3, 4, 5, 6, 7, 8, 9]),
        Ok(Some(Ok(u32::from_ne_bytes([1, 2, 3, 4]))))
    );
    assert_eq!(cookie(&[1, 2, 3]), Ok(Some(Err(Inval))));
    // Several: the last one's value, but a short one anywhere is the error (C stops at it).
    let ok = msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &9u32.to_ne_bytes());
    let short = msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &[1, 2]);
    for (buf, want) in [
        (cat(&[ok.clone(), short.clone()]), Err(Inval)),
        (cat(&[short.clone(), ok.clone()]), Err(Inval)),
        (cat(&[short, ok.clone(), ok.clone()]), Err(Inval)),
        (
            cat(&[msg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &[0; 4]), ok]),
            Ok(9),
        ),
    ] {
        assert_eq!(
            scan_send_cmsgs(&buf, false).map(|s| s.zcopy_cookie),
            Ok(Some(want))
        );
    }
    // At another level it is not a cookie.
    let buf = msg(SOL_SOCKET, RDS_CMSG_ZCOPY_COOKIE, &[1, 2, 3, 4]);
    assert_eq!(
        scan_send_cmsgs(&buf, false).map(|s| s.zcopy_cookie),
        Ok(None)
    );
}

#[test]
fn scan_rejects_bad_headers() {
    let buf = cat(&[msg(SOL_SOCKET, 1, &[]), raw(15, SOL_SOCKET, 1, &[0; 8])]);
    assert_eq!(scan_send_cmsgs(&buf, false), Err(Inval));
}

// --- encode_cmsg ---------------------------------------------------------------

#[test]
fn encode_needs_room_for_the_padding() {
    let mut out = [0xaau8; 23];
    assert_eq!(encode_cmsg(SOL_RDS, 12, &[1, 2, 3, 4], &mut out), None);
    assert_eq!(out, [0xaa; 23], "untouched on failure");
    let mut out = [0xaau8; 30];
    assert_eq!(encode_cmsg(SOL_RDS, 12, &[1, 2, 3, 4], &mut out), Some(24));
    assert_eq!(&out[..8], &20u64.to_ne_bytes());
    assert_eq!(&out[8..12], &SOL_RDS.to_ne_bytes());
    assert_eq!(&out[12..16], &12i32.to_ne_bytes());
    assert_eq!(&out[16..20], &[1, 2, 3, 4]);
    assert_eq!(&out[20..24], &[0; 4]);
    assert_eq!(&out[24..], &[0xaa; 6]);
    assert_eq!(encode_cmsg(1, 2, &[], &mut [0u8; 15]), None);
    assert_eq!(encode_cmsg(1, 2, &[], &mut [0u8; 16]), Some(16));
}

// --- CmsgHdr -------------------------------------------------------------------

#[test]
fn header_layout() {
    let h = CmsgHdr {
        len: 20,
        level: SOL_RDS,
        kind: 12,
    };
    assert_eq!(h.encode().to_vec(), raw(20, SOL_RDS, 12, &[]));
    assert_eq!(CmsgHdr::decode(&raw(20, SOL_RDS, 12, &[9; 4])), Some(h));
    assert_eq!(CmsgHdr::decode(&[0; CMSG_HDR_LEN - 1]), None);
    // Any length is read as written, valid or not.
    let bad = raw(u64::MAX, -1, i32::MIN, &[]);
    assert_eq!(
        CmsgHdr::decode(&bad),
        Some(CmsgHdr {
            len: u64::MAX,
            level: -1,
            kind: i32::MIN
        })
    );
    // encode_cmsg writes the header CMSG_LEN(data.len()) claims.
    let m = msg(SOL_SOCKET, 3, &[1, 2, 3]);
    assert_eq!(
        CmsgHdr::decode(&m),
        Some(CmsgHdr {
            len: cmsg_len(3) as u64,
            level: SOL_SOCKET,
            kind: 3
        })
    );
}

proptest! {
    #[test]
    fn header_round_trip(len in any::<u64>(), level in any::<i32>(), kind in any::<i32>(),
                         raw in any::<[u8; CMSG_HDR_LEN]>()) {
        let h = CmsgHdr { len, level, kind };
        prop_assert_eq!(CmsgHdr::decode(&h.encode()), Some(h));
        prop_assert_eq!(CmsgHdr::decode(&raw).unwrap().encode(), raw);
    }
}

// --- properties -----------------------------------------------------------------

/// One header with a `cmsg_len` near the real length (or anything), and
/// its data; padded or not.
fn any_part() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(SOL_RDS), Just(SOL_SOCKET), any::<i32>()],
        prop_oneof![0i32..16, any::<i32>()],
        prop::collection::vec(any::<u8>(), 0..80),
        prop_oneof![
            6 => Just(0i64),
            2 => -20i64..20,
            1 => any::<i64>(),
        ],
        any::<bool>(),
    )
        .prop_map(|(level, kind, data, delta, pad)| {
            let len = (16 + data.len() as i64).wrapping_add(delta) as u64;
            let mut v = raw(len, level, kind, &data);
            if pad {
                v.resize(cmsg_space(data.len()), 0);
            }
            v
        })
}

fn any_control() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        (
            prop::collection::vec(any_part(), 0..6),
            prop::collection::vec(any::<u8>(), 0..20)
        )
            .prop_map(|(parts, tail)| {
                let mut v = parts.concat();
                v.extend(tail);
                v
            }),
    ]
}

/// A well-formed message for the round trip.
fn any_msg() -> impl Strategy<Value = (i32, i32, Vec<u8>)> {
    (
        any::<i32>(),
        any::<i32>(),
        prop::collection::vec(any::<u8>(), 0..64),
    )
}

/// `rds_rdma_bytes` over the model walk.
fn rdma_bytes_model(buf: &[u8]) -> Result<u64, CmsgError> {
    let mut sum = 0u64;
    for m in c_model(buf) {
        let (level, kind, start, end) = m.ok_or(Inval)?;
        if level == SOL_RDS && kind == RDS_CMSG_RDMA_ARGS {
            if end - start < 56 {
                return Err(Inval);
            }
            let b = u64::from_ne_bytes(buf[start + 16..start + 24].try_into().unwrap());
            sum = sum.wrapping_add(b);
        }
    }
    Ok(sum)
}

/// `rds_rm_size` (its validity rules) over the model walk, with C's
/// `cmsg_groups` bit set.
fn rm_size_model(buf: &[u8], zerocopy: bool) -> Result<SendCmsgs, CmsgError> {
    let mut s = SendCmsgs::default();
    let mut groups = 0;
    for m in c_model(buf) {
        let (level, kind, _, _) = m.ok_or(Inval)?;
        if level != SOL_RDS {
            continue;
        }
        match kind {
            1 => {
                s.rdma_args += 1;
                groups |= 1;
            }
            12 => groups |= 2,
            2 => {
                s.rdma_dest += 1;
                groups |= 2;
            }
            3 => {
                s.rdma_map += 1;
                groups |= 2;
            }
            6..=9 => {
                s.atomics += 1;
                groups |= 1;
            }
            64 => s.rdma_id += 1,
            _ => return Err(Inval),
        }
    }
    // rds_cmsg_send's walk, for the cookies only (rds_cmsg_zcopy): each in turn, stopping at
    // the first shorter than CMSG_LEN(sizeof(u32)).
    for (level, kind, start, end) in c_model(buf).into_iter().flatten() {
        if level != SOL_RDS || kind != 12 {
            continue;
        }
        if end - start < 4 {
            s.zcopy_cookie = Some(Err(Inval));
            break;
        }
        s.zcopy_cookie = Some(Ok(u32::from_ne_bytes(
            buf[start..start + 4].try_into().unwrap(),
        )));
    }
    if zerocopy && s.zcopy_cookie.is_none() {
        return Err(Inval);
    }
    if groups == 3 {
        return Err(Inval);
    }
    if s.rdma_id > 1 || (s.rdma_id == 1 && groups & 1 == 0) {
        return Err(Inval);
    }
    Ok(s)
}

/// Well-formed RDS send control messages, to reach the group rules.
fn any_send_control() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        (
            prop_oneof![4 => Just(SOL_RDS), 1 => Just(SOL_SOCKET)],
            prop_oneof![8 => 1i32..=9, 2 => Just(12), 1 => 0i32..16, 1 => Just(64)],
            any::<u64>(),
            0usize..8,
        )
            .prop_map(|(level, kind, bytes, extra)| {
                let mut data = rdma_args(bytes);
                if kind == RDS_CMSG_ZCOPY_COOKIE {
                    // A cookie of 0 to 7 bytes: short ones, and values that differ.
                    data = bytes.to_ne_bytes()[..extra].to_vec();
                } else {
                    data.truncate(RDMA_ARGS_LEN - 1 + extra);
                }
                msg(level, kind, &data)
            }),
        0..5,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn walk_matches_the_c_model(buf in any_control()) {
        prop_assert_eq!(as_model(&buf), c_model(&buf));
        // At most one error, and only last.
        let v = collect(&buf);
        if let Some(i) = v.iter().position(|r| r.is_err()) {
            prop_assert_eq!(i, v.len() - 1);
        }
    }

    #[test]
    fn checks_match_the_c_model(buf in any_control(), zerocopy in any::<bool>()) {
        prop_assert_eq!(rdma_bytes(&buf), rdma_bytes_model(&buf));
        prop_assert_eq!(scan_send_cmsgs(&buf, zerocopy), rm_size_model(&buf, zerocopy));
    }

    #[test]
    fn send_checks_match_the_c_model(buf in any_send_control(), zerocopy in any::<bool>()) {
        prop_assert_eq!(rdma_bytes(&buf), rdma_bytes_model(&buf));
        prop_assert_eq!(scan_send_cmsgs(&buf, zerocopy), rm_size_model(&buf, zerocopy));
    }

    #[test]
    fn encode_then_walk_round_trips(
        msgs in prop::collection::vec(any_msg(), 0..6),
        trim_last_padding in any::<bool>(),
        slack in 0usize..8,
    ) {
        let total: usize = msgs.iter().map(|(_, _, d)| cmsg_space(d.len())).sum();
        let mut buf = vec![0xa5u8; total + slack];
        let mut off = 0;
        for (level, kind, data) in &msgs {
            let n = encode_cmsg(*level, *kind, data, &mut buf[off..]).unwrap();
            prop_assert_eq!(n, cmsg_space(data.len()));
            prop_assert_eq!(n % 8, 0);
            // Padding is zeroed.
            prop_assert!(buf[off + cmsg_len(data.len())..off + n].iter().all(|b| *b == 0));
            off += n;
        }
        prop_assert_eq!(off, total);
        // Slack shorter than a header is never read.
        buf.truncate(total + slack);
        if trim_last_padding {
            if let Some((_, _, d)) = msgs.last() {
                buf.truncate(total - cmsg_space(d.len()) + cmsg_len(d.len()));
            }
        }
        let got: Vec<(i32, i32, Vec<u8>)> = cmsgs(&buf)
            .map(|r| r.map(|c| (c.level, c.kind, c.data.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn encode_never_panics(
        data in prop::collection::vec(any::<u8>(), 0..64),
        out_len in 0usize..100,
    ) {
        let mut out = vec![0u8; out_len];
        let r = encode_cmsg(SOL_RDS, 1, &data, &mut out);
        prop_assert_eq!(r.is_some(), out_len >= cmsg_space(data.len()));
    }

    #[test]
    fn align_properties(n in any::<usize>()) {
        let a = cmsg_align(n);
        if n <= usize::MAX - 7 {
            prop_assert_eq!(a % 8, 0);
            prop_assert!(a >= n && a - n < 8);
        } else {
            prop_assert_eq!(a, usize::MAX);
        }
        prop_assert!(cmsg_space(n) >= cmsg_len(n));
    }
}

/// rds-rs's RDS_CMSG_RDMA_ID (64): once, and only with an RDMA or atomic operation to number.
#[test]
fn rdma_id_needs_an_operation() {
    let id = msg(SOL_RDS, 64, &[0; 8]);
    let args = msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(0));
    let fadd = msg(SOL_RDS, rds_proto::RDS_CMSG_ATOMIC_FADD, &[0; 72]);
    let dest = msg(SOL_RDS, rds_proto::RDS_CMSG_RDMA_DEST, &[0; 8]);
    assert_eq!(scan_send_cmsgs(&id, false), Err(Inval));
    assert_eq!(
        scan_send_cmsgs(&cat(&[dest, id.clone()]), false),
        Err(Inval)
    );
    assert_eq!(
        scan_send_cmsgs(&cat(&[id.clone(), args.clone(), id.clone()]), false),
        Err(Inval)
    );
    let s = scan_send_cmsgs(&cat(&[id.clone(), args]), false).unwrap();
    assert_eq!((s.rdma_args, s.rdma_id), (1, 1));
    let s = scan_send_cmsgs(&cat(&[fadd, id]), false).unwrap();
    assert_eq!((s.atomics, s.rdma_id), (1, 1));
}

/// `scan_send_cmsgs_with` runs the RDMA_ARGS hook in walk order, so its error wins over a later
/// unknown type and over the combination rules, as `rds_rdma_extra_size` inside C's
/// `rds_rm_size` loop does; an earlier unknown type wins over it.
#[test]
fn scan_with_runs_args_hook_in_order() {
    use rds_proto::scan_send_cmsgs_with;
    #[derive(Debug, PartialEq)]
    enum E {
        Cmsg,
        Args,
    }
    impl From<CmsgError> for E {
        fn from(_: CmsgError) -> Self {
            E::Cmsg
        }
    }
    let args = msg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &rdma_args(0));
    let dest = msg(SOL_RDS, rds_proto::RDS_CMSG_RDMA_DEST, &[0; 8]);
    let unknown = msg(SOL_RDS, 10, &[0; 8]);
    let fail = |_: &[u8]| Err::<(), E>(E::Args);
    assert_eq!(
        scan_send_cmsgs_with(&cat(&[dest.clone(), args.clone()]), false, fail),
        Err(E::Args)
    );
    assert_eq!(
        scan_send_cmsgs_with(&cat(&[args.clone(), unknown.clone()]), false, fail),
        Err(E::Args)
    );
    assert_eq!(
        scan_send_cmsgs_with(&cat(&[unknown, args.clone()]), false, fail),
        Err(E::Cmsg)
    );
    let mut seen = 0;
    let s = scan_send_cmsgs_with(&cat(&[args.clone(), args]), false, |d: &[u8]| {
        seen += 1;
        assert_eq!(d.len(), 56);
        Ok::<(), E>(())
    })
    .unwrap();
    assert_eq!((seen, s.rdma_args), (2, 2));
    assert_eq!(
        scan_send_cmsgs_with(&cat(&[dest]), false, fail).map(|s| s.rdma_dest),
        Ok(1)
    );
}
