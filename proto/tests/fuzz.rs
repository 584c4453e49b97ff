//! Fuzz suite: every rds-proto entry point that takes bytes or values user
//! space (or a peer) controls, fed arbitrary and structured inputs by
//! proptest on stable cargo. Each property checks the documented rules of
//! the entry point (decode/encode stability, results consistent with the
//! input's length, accepted values within the documented limits, errors
//! being the documented errno), not only the absence of a panic.
//!
//! Cases per property: the `FUZZ_CASES` environment variable, default
//! [`DEFAULT_CASES`]. A long run:
//! `FUZZ_CASES=1000000 cargo test --release -p rds-proto --test fuzz`.

mod common;
use common::any_ext;

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Debug;

use proptest::prelude::*;
use rds_proto::{
    bind_candidates, check_atomic, check_bind_scope, check_info_request, check_rdma_args,
    check_rdma_bytes, check_registration, check_registration_mlock, check_send_dest, cmsg_align,
    cmsg_len, cmsg_space, cmsgs, cong_clear, cong_set, cong_test, cookie_key, cookie_offset,
    decode_counter, encode_cmsg, encode_counter, encode_sockaddr, encode_unbound_local,
    exthdr_payload_len, header_checksum, info_outcome, internet_checksum, is_info_option,
    key_acceptable, make_cookie, monitor_mask, parse_bind, parse_connect, parse_frame,
    parse_send_dest, rdma_bytes, rdma_pages, rdma_sg_too_big, scan_send_cmsgs,
    scan_send_cmsgs_with, sndbuf_ack_required, sndbuf_admits, uncongested_mask, verify_checksum,
    walk_exthdrs, wire_to_words, words_to_wire, AckPacer, Addr, AddrError, AtomicArgs, AtomicOp,
    Backoff, BarrierArgs, BarrierState, Cmsg, CmsgError, CmsgHdr, CongChange, ConnInfo, Ext,
    ExtIter, FrameError, FrameKind, FreeMrArgs, GetMrArgs, GetMrForDestArgs, GuessLimit, Header,
    HeaderError, InfoError, InfoOutcome, MrError, MsgInfo, OpTracker, Quarantine, RdmaArgs,
    RdmaConnInfo, RdmaExts, RdmaNotify, RdsIovec, RecvAccount, Region, Replays, RxSeq, SendCmsgs,
    SeqCheck, SockAddr, SockInfo, TcpSockInfo, TxSeq, AF_INET, AF_INET6, AF_UNSPEC,
    ATOMIC_ARGS_LEN, BARRIER_ARGS_LEN, CMSG_HDR_LEN, CONG_MAP_BYTES, CONG_MAP_WORDS,
    EXTHDR_GEN_NUM, EXTHDR_NONE, EXTHDR_NPATHS, EXTHDR_RDMA, EXTHDR_RDMA_DEST, EXTHDR_SPACE,
    EXTHDR_SPORT_IDX, EXTHDR_TYPES, EXTHDR_VERSION, FLAG_CONG_BITMAP, FREE_MR_ARGS_LEN,
    GET_MR_ARGS_LEN, GET_MR_FOR_DEST_ARGS_LEN, GUESS_BURST, GUESS_PER_SEC, HEADER_LEN,
    INFO6_CONNECTION_LEN, INFO6_MESSAGE_LEN, INFO6_RDMA_CONNECTION_LEN, INFO6_SOCKET_LEN,
    INFO6_TCP_SOCKET_LEN, INFO_CONNECTION_LEN, INFO_COUNTER_LEN, INFO_COUNTER_NAME_LEN,
    INFO_MAX_LEN, INFO_MESSAGE_LEN, INFO_RDMA_CONNECTION_LEN, INFO_SOCKET_LEN, INFO_TCP_SOCKET_LEN,
    IPV6_ADDR_LINKLOCAL, IPV6_ADDR_MAPPED, IPV6_ADDR_MULTICAST, IPV6_ADDR_UNICAST, MAX_FRAME_LEN,
    MAX_MR_PAGES, MSG_SG_MAX, PAGE_SIZE, RDMA_ARGS_LEN, RDMA_NOTIFY_LEN, RDS_CMSG_ATOMIC_CSWP,
    RDS_CMSG_ATOMIC_FADD, RDS_CMSG_MASKED_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_FADD,
    RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST, RDS_CMSG_RDMA_ID, RDS_CMSG_RDMA_MAP,
    RDS_CMSG_ZCOPY_COOKIE, RDS_INFO_FIRST, RDS_INFO_LAST, RDS_IOVEC_LEN, SG_ENTRY_LEN,
    SOCKADDR_IN6_LEN, SOCKADDR_IN_LEN, SOCKADDR_STORAGE_LEN, SOL_RDS, SOL_SOCKET, UIO_MAXIOV,
};

// --- configuration -------------------------------------------------------------------------

/// Cases per property when `FUZZ_CASES` is not set; keeps the whole file
/// well under 20 s in a debug `cargo test` on a 2-core machine.
const DEFAULT_CASES: u32 = 1000;

/// The proptest configuration of every property: `FUZZ_CASES` cases.
fn config() -> ProptestConfig {
    let cases = match std::env::var("FUZZ_CASES") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("FUZZ_CASES={v:?} is not a case count")),
        Err(_) => DEFAULT_CASES,
    };
    ProptestConfig::with_cases(cases)
}

// --- shared strategies and helpers --------------------------------------------------------------

/// Arbitrary bytes, of a length from 0 to `max`.
fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

/// `u64`s biased toward the edges the rules care about: 0, `u32::MAX`,
/// `i32::MAX`, `u64::MAX`, page boundaries, the last pages of the address
/// space, and the MR size limit.
fn edgy_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => any::<u64>(),
        2 => prop::sample::select(vec![
            0u64,
            1,
            7,
            8,
            PAGE_SIZE - 1,
            PAGE_SIZE,
            PAGE_SIZE + 1,
            1 << 20,
            (1 << 20) + 1,
            (1 << 20) + PAGE_SIZE,
            u64::from(i32::MAX.unsigned_abs()),
            u64::from(u32::MAX),
            u64::from(u32::MAX) + 1,
            u64::MAX / 2,
            u64::MAX - PAGE_SIZE,
            u64::MAX - PAGE_SIZE + 1,
            u64::MAX - 1,
            u64::MAX,
        ]),
        2 => 0u64..10_000,
        1 => (0u64..10_000).prop_map(|d| u64::MAX - d),
        1 => (0u64..10_000).prop_map(|d| u64::from(u32::MAX).wrapping_add(d).wrapping_sub(5000)),
        2 => (0u64..300, 0u64..PAGE_SIZE).prop_map(|(p, o)| p * PAGE_SIZE + o),
        1 => (0u64..300, 0u64..PAGE_SIZE).prop_map(|(p, o)| u64::MAX - p * PAGE_SIZE - o),
        1 => (any::<u64>(), -2i64..=2)
            .prop_map(|(a, d)| (a & !(PAGE_SIZE - 1)).wrapping_add_signed(d)),
    ]
}

/// `usize`s biased toward 0, small values and `usize::MAX`.
fn edgy_usize() -> impl Strategy<Value = usize> {
    prop_oneof![
        any::<usize>(),
        0usize..200,
        (0usize..200).prop_map(|d| usize::MAX - d),
        prop::sample::select(vec![
            1usize << 31,
            1 << 32,
            usize::MAX / 2,
            usize::MAX / 2 + 1
        ]),
    ]
}

fn any_iovec() -> impl Strategy<Value = RdsIovec> {
    (edgy_u64(), edgy_u64()).prop_map(|(addr, bytes)| RdsIovec { addr, bytes })
}

/// Local iovecs: mostly valid small ones, sometimes anything.
fn local_iovec() -> impl Strategy<Value = RdsIovec> {
    prop_oneof![
        6 => (any::<u64>(), 1u64..20_000).prop_map(|(a, b)| RdsIovec { addr: a >> 1, bytes: b }),
        1 => any_iovec(),
    ]
}

/// Lists of local iovecs: a few arbitrary ones, or many copies of one (up
/// to past `UIO_MAXIOV`, and past `i32::MAX` pages in total).
fn iovec_list() -> impl Strategy<Value = Vec<RdsIovec>> {
    prop_oneof![
        4 => prop::collection::vec(local_iovec(), 0..8),
        1 => (any_iovec(), 0usize..3000, prop::option::of(any_iovec())).prop_map(|(v, n, last)| {
            let mut l = vec![v; n];
            l.extend(last);
            l
        }),
        1 => (0u64..PAGE_SIZE, 0usize..2200).prop_map(|(off, n)| {
            // 2^20 + 1 pages each: 2048 of them pass i32::MAX pages.
            vec![RdsIovec { addr: PAGE_SIZE + off.max(1), bytes: u64::from(u32::MAX) }; n]
        }),
    ]
}

/// The byte offset of `sub` in `buf`, when `sub` lies inside `buf`.
fn offset_in(buf: &[u8], sub: &[u8]) -> Option<usize> {
    let start = (sub.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
    (start.checked_add(sub.len())? <= buf.len()).then_some(start)
}

fn ne_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

fn u128_of(v: u64) -> u128 {
    u128::from(v)
}

/// The 4 KiB pages `[addr, addr + bytes)` touches, computed exactly.
fn true_pages(addr: u64, bytes: u64) -> u128 {
    if bytes == 0 {
        return 0;
    }
    let end = u128_of(addr) + u128_of(bytes);
    ((end - 1) >> 12) - (u128_of(addr) >> 12) + 1
}

/// Checks a fixed-size decoder against its encoder on `buf`: it succeeds
/// iff `buf` holds `N` bytes, reads only those, and decode→encode→decode is
/// stable (the encoding being the bytes read, with the padding `pad` zeroed).
fn check_fixed<T: PartialEq + Debug, const N: usize>(
    buf: &[u8],
    decode: impl Fn(&[u8]) -> Option<T>,
    encode: impl Fn(&T) -> [u8; N],
    pad: Option<std::ops::Range<usize>>,
) -> Result<Option<T>, TestCaseError> {
    let d = decode(buf);
    prop_assert_eq!(d.is_some(), buf.len() >= N, "decode of {} bytes", buf.len());
    if let Some(v) = &d {
        let again = decode(&buf[..N]);
        prop_assert_eq!(again.as_ref(), Some(v));
        let mut want = [0u8; N];
        want.copy_from_slice(&buf[..N]);
        if let Some(r) = pad {
            want[r].fill(0);
        }
        let e = encode(v);
        prop_assert_eq!(&e[..], &want[..]);
        let back = decode(&e);
        prop_assert_eq!(back.as_ref(), Some(v));
    }
    Ok(d)
}

// --- header and extension headers ----------------------------------------------------------

/// Length of an extension entry of type `ty`, type byte included.
fn ext_len(ty: u8) -> Option<usize> {
    match ty {
        EXTHDR_VERSION | EXTHDR_RDMA | EXTHDR_GEN_NUM => Some(5),
        EXTHDR_RDMA_DEST => Some(9),
        EXTHDR_NPATHS => Some(3),
        EXTHDR_SPORT_IDX => Some(2),
        _ => None,
    }
}

/// `h_exthdr` areas: arbitrary bytes, or entries of likely type bytes with
/// payloads of arbitrary length.
fn any_area() -> impl Strategy<Value = [u8; EXTHDR_SPACE]> {
    // Mostly well-formed entries, sometimes an arbitrary type byte with a
    // payload of arbitrary length.
    let entry = prop_oneof![
        4 => any_ext().prop_map(|e| {
            let mut h = Header::default();
            h.add_ext(e).unwrap();
            h.exthdr[..e.encoded_len()].to_vec()
        }),
        1 => (prop_oneof![0u8..8, any::<u8>()], bytes(10)).prop_map(|(ty, payload)| {
            let mut v = vec![ty];
            v.extend(payload);
            v
        }),
    ];
    prop_oneof![
        1 => any::<[u8; EXTHDR_SPACE]>(),
        3 => (
            prop::collection::vec(entry, 0..5),
            any::<bool>(),
            any::<[u8; EXTHDR_SPACE]>()
        )
            .prop_map(|(entries, zero_tail, fill)| {
                let mut area = if zero_tail { [0; EXTHDR_SPACE] } else { fill };
                for (a, b) in area.iter_mut().zip(entries.concat()) {
                    *a = b;
                }
                area
            }),
    ]
}

/// The header bytes of a decoded header: the first 48 bytes, padding zeroed.
fn header_bytes(buf: &[u8]) -> [u8; HEADER_LEN] {
    let mut b: [u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().unwrap();
    b[26..30].fill(0);
    b
}

/// Walks `area` with [`ExtIter`] and checks each item against the bytes;
/// returns the items and the offset of the free tail (`None` after an
/// error).
#[allow(clippy::type_complexity)]
fn check_walk(
    area: &[u8; EXTHDR_SPACE],
) -> Result<(Vec<Result<Ext, HeaderError>>, Option<usize>), TestCaseError> {
    let items: Vec<_> = ExtIter::new(area).collect();
    let mut pos = 0usize;
    for (i, item) in items.iter().enumerate() {
        prop_assert!(pos < EXTHDR_SPACE, "an item past the area");
        match *item {
            Ok(e) => {
                let n = e.encoded_len();
                prop_assert_eq!(area[pos], e.ext_type());
                prop_assert_eq!(Some(n), ext_len(area[pos]));
                prop_assert!(pos + n <= EXTHDR_SPACE, "entry runs past h_exthdr");
                // The entry re-encodes to exactly the bytes it came from.
                let mut h = Header::default();
                prop_assert_eq!(h.add_ext(e), Ok(()));
                prop_assert_eq!(&h.exthdr[..n], &area[pos..pos + n]);
                pos += n;
            }
            Err(e) => {
                prop_assert_eq!(i, items.len() - 1, "an error is the last item");
                let ty = area[pos];
                match e {
                    HeaderError::UnknownExt(t) => {
                        prop_assert_eq!(t, ty);
                        prop_assert!(ty != EXTHDR_NONE && ext_len(ty).is_none());
                    }
                    HeaderError::TruncatedExt(t) => {
                        prop_assert_eq!(t, ty);
                        prop_assert!(pos + ext_len(ty).unwrap() > EXTHDR_SPACE);
                    }
                    other => prop_assert!(false, "walker yielded {:?}", other),
                }
                return Ok((items, None));
            }
        }
    }
    // The walk ended at the terminator or the end of the area.
    prop_assert!(pos == EXTHDR_SPACE || area[pos] == EXTHDR_NONE);
    Ok((items, Some(pos)))
}

// --- arriving frames -----------------------------------------------------------------------------

/// One entry of C's extension walk: its offset, type and payload.
type CEntry<'a> = (usize, u8, &'a [u8]);

/// C's `rds_message_next_extension` loop, written out from message.c: the
/// entries it yields, and the type at which it stopped because the payload
/// (`rds_exthdr_size`) did not fit, if it did.
fn c_exthdr_walk(area: &[u8; EXTHDR_SPACE]) -> (Vec<CEntry<'_>>, Option<u8>) {
    const SIZE: [usize; 16] = [0, 4, 4, 8, 0, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < EXTHDR_SPACE {
        let ty = area[pos];
        if ty == EXTHDR_NONE || ty >= 16 {
            break;
        }
        let len = SIZE[usize::from(ty)];
        if pos + 1 + len > EXTHDR_SPACE {
            return (out, Some(ty));
        }
        out.push((pos, ty, &area[pos + 1..pos + 1 + len]));
        pos += 1 + len;
    }
    (out, None)
}

fn be32_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(b[off..off + 4].try_into().unwrap())
}

/// `walk_exthdrs` from C's walk: refused where C stops at a truncated
/// entry; else the first RDMA and the last RDMA_DEST.
fn exthdr_model(area: &[u8; EXTHDR_SPACE]) -> Result<RdmaExts, FrameError> {
    let (entries, truncated) = c_exthdr_walk(area);
    if let Some(ty) = truncated {
        return Err(FrameError::TruncatedExt(ty));
    }
    let rkey = entries
        .iter()
        .find(|e| e.1 == EXTHDR_RDMA)
        .map(|e| be32_at(e.2, 0));
    let dest = entries
        .iter()
        .rev()
        .find(|e| e.1 == EXTHDR_RDMA_DEST)
        .map(|e| (be32_at(e.2, 0), be32_at(e.2, 4)));
    Ok((rkey, dest))
}

/// `parse_frame`'s rules, in the order of its documentation, from the
/// bytes.
fn frame_model(
    raw: &[u8; HEADER_LEN],
    payload_len: Option<u64>,
) -> Result<(FrameKind, RdmaExts), FrameError> {
    let csum = u16::from_be_bytes([raw[30], raw[31]]);
    if csum != 0 && internet_checksum(raw) != 0 {
        return Err(FrameError::Checksum);
    }
    let len = be32_at(raw, 16);
    if len > 1 << 20 {
        return Err(FrameError::TooLong);
    }
    if payload_len.is_some_and(|n| n != u64::from(len)) {
        return Err(FrameError::LenMismatch);
    }
    let ports0 = raw[20..24] == [0; 4];
    let kind = if raw[24] & 1 != 0 {
        if !ports0 || len != 8192 {
            return Err(FrameError::CongMap);
        }
        FrameKind::CongMap
    } else if ports0 && len == 0 {
        FrameKind::AckOnly
    } else {
        FrameKind::Data
    };
    let area: [u8; EXTHDR_SPACE] = raw[32..].try_into().unwrap();
    Ok((kind, exthdr_model(&area)?))
}

/// `h_exthdr` areas for the frame walk: those of [`any_area`], and bytes
/// biased toward the types C's table has (0..16) and a few past it.
fn frame_area() -> BoxedStrategy<[u8; EXTHDR_SPACE]> {
    // Boxed, as are the strategies built on it: their value trees are
    // large, and a debug build's test thread overflows its stack on them.
    prop_oneof![
        2 => any_area().boxed(),
        1 => prop::array::uniform16(prop_oneof![
            4 => 0u8..EXTHDR_TYPES,
            1 => EXTHDR_TYPES..=EXTHDR_TYPES + 2,
            1 => any::<u8>(),
        ])
        .boxed(),
    ]
    .boxed()
}

/// Header bytes and payload lengths for `parse_frame`: fields biased
/// toward each rule's edges (ports 0, `h_len` 0, 8192 and around 1 MiB,
/// the map bit), an `h_csum` that is 0, valid, valid but for one bit, or
/// arbitrary, and a payload length that is unknown, right, or anything.
fn any_frame() -> impl Strategy<Value = ([u8; HEADER_LEN], Option<u64>)> {
    let len = prop_oneof![
        any::<u32>(),
        0u32..200,
        Just(0u32),
        Just(CONG_MAP_BYTES as u32),
        (MAX_FRAME_LEN - 2)..=(MAX_FRAME_LEN + 2),
    ];
    let port = prop_oneof![Just(0u16), Just(1), any::<u16>()];
    let flags = prop_oneof![Just(0u8), Just(FLAG_CONG_BITMAP), 0u8..8, any::<u8>()];
    let hdr = (
        (any::<u64>(), any::<u64>(), len, port.clone(), port),
        (flags, any::<u8>(), frame_area()),
    )
        .prop_map(
            |((sequence, ack, len, sport, dport), (flags, credit, exthdr))| Header {
                sequence,
                ack,
                len,
                sport,
                dport,
                flags,
                credit,
                csum: 0,
                exthdr,
            },
        );
    // The shape: as drawn, or made a map or an ack (which then may still
    // break other rules).
    let shape = prop_oneof![3 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)];
    let csum_mode = prop_oneof![3 => Just(0u8), 3 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    let len_mode = prop_oneof![2 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8)];
    let structured = (
        (hdr, shape),
        prop_oneof![Just([0u8; 4]), any::<[u8; 4]>()],
        (csum_mode, any::<u16>(), 0usize..HEADER_LEN * 8),
        (len_mode, edgy_u64()),
    )
        .prop_map(
            |((mut h, shape), pad, (csum_mode, csum, flip), (len_mode, other))| {
                match shape {
                    1 => {
                        h.flags |= FLAG_CONG_BITMAP;
                        (h.sport, h.dport, h.len) = (0, 0, CONG_MAP_BYTES as u32);
                    }
                    2 => {
                        h.flags &= !FLAG_CONG_BITMAP;
                        (h.sport, h.dport, h.len) = (0, 0, 0);
                    }
                    _ => {}
                }
                let mut raw = h.encode();
                raw[26..30].copy_from_slice(&pad);
                let good = header_checksum(&raw);
                let c = match csum_mode {
                    0 => 0,
                    1 | 2 => good,
                    _ => csum,
                };
                raw[30..32].copy_from_slice(&c.to_be_bytes());
                if csum_mode == 2 {
                    raw[flip / 8] ^= 1 << (flip % 8);
                }
                let payload = match len_mode {
                    0 => None,
                    1 => Some(u64::from(be32_at(&raw, 16))),
                    _ => Some(other),
                };
                (raw, payload)
            },
        )
        .boxed();
    prop_oneof![
        1 => (any::<[u8; HEADER_LEN]>(), prop::option::of(edgy_u64())),
        6 => structured,
    ]
}

/// The sequences of calls fed to a `GuessLimit`: a move of the clock
/// (kept, a few ns, up to a few tokens' worth, anything forward, or back),
/// what is called then, and how many times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GuessOp {
    /// `allows`, then `failed` when it allowed (a failed lookup).
    Lookup,
    /// `failed` alone.
    Failed,
    /// `allows` alone (a lookup that succeeded).
    Allows,
}

fn guess_ops() -> impl Strategy<Value = Vec<(i128, GuessOp, u32)>> {
    let step = prop_oneof![
        2 => Just(0i128),
        2 => 0i128..1000,
        4 => 0i128..(4 * 15_625_000),
        1 => 0i128..(3 * 1_000_000_000),
        1 => any::<u64>().prop_map(i128::from),
        1 => any::<u64>().prop_map(|d| -i128::from(d)),
        1 => (0i128..(2 * 15_625_000)).prop_map(|d| -d),
    ];
    let op = prop_oneof![
        4 => Just(GuessOp::Lookup),
        1 => Just(GuessOp::Failed),
        1 => Just(GuessOp::Allows),
    ];
    // Each op is repeated (at the same instant) once, or up to a burst and
    // more.
    let reps = prop_oneof![4 => Just(1u32), 1 => 1u32..80];
    prop::collection::vec((step, op, reps), 0..100)
}

/// Reconnect sysctls biased toward 0, small values and `u64::MAX`.
fn backoff_sysctl() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1u64),
        0u64..5,
        1u64..10_000,
        Just(u64::MAX),
        (0u64..4).prop_map(|d| u64::MAX / 2 + d - 2),
        any::<u64>(),
    ]
}

// --- control messages ----------------------------------------------------------------------------

/// A `cmsg_len` relative to the true length of a control message.
#[derive(Clone, Debug)]
enum Len {
    Exact,
    Delta(i64),
    Raw(u64),
}

/// One control message with a likely level and type, a payload (RDMA
/// args with edgy `remote_vec.bytes`, atomic args, or anything), a
/// `cmsg_len` usually right, and usually padded.
fn cmsg_part() -> impl Strategy<Value = Vec<u8>> {
    let payload = prop_oneof![
        3 => bytes(80),
        2 => (edgy_u64(), any::<[u8; RDMA_ARGS_LEN]>(), 48usize..64).prop_map(|(n, fill, len)| {
            let mut v = fill.to_vec();
            v[16..24].copy_from_slice(&n.to_ne_bytes());
            v.resize(len, 0);
            v
        }),
        1 => prop::collection::vec(any::<u8>(), 64..80),
    ];
    let len = prop_oneof![
        12 => Just(Len::Exact),
        2 => (-24i64..24).prop_map(Len::Delta),
        1 => any::<u64>().prop_map(Len::Raw),
        1 => prop::sample::select(vec![0u64, 15, 16, 1 << 63, u64::MAX - 7, u64::MAX])
            .prop_map(Len::Raw),
    ];
    (
        prop_oneof![4 => Just(SOL_RDS), 1 => Just(SOL_SOCKET), 1 => any::<i32>()],
        prop_oneof![
            6 => 0i32..16,
            1 => Just(RDS_CMSG_RDMA_ID),
            1 => any::<i32>(),
        ],
        payload,
        len,
        prop_oneof![3 => Just(true), 1 => Just(false)],
    )
        .prop_map(|(level, kind, data, len, pad)| {
            let exact = (CMSG_HDR_LEN + data.len()) as u64;
            let len = match len {
                Len::Exact => exact,
                Len::Delta(d) => exact.wrapping_add_signed(d),
                Len::Raw(v) => v,
            };
            let mut v = CmsgHdr { len, level, kind }.encode().to_vec();
            v.extend(&data);
            if pad {
                v.resize(CMSG_HDR_LEN + cmsg_align(data.len()), 0);
            }
            v
        })
}

/// A well-formed `sendmsg` control message: an RDS type `rds_rm_size`
/// knows (or another level's), with a payload of its size (RDMA args with
/// edgy `remote_vec.bytes`), padded as `CMSG_SPACE`.
fn send_part() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![8 => Just(SOL_RDS), 1 => Just(SOL_SOCKET)],
        prop::sample::select(vec![
            (RDS_CMSG_RDMA_ARGS, RDMA_ARGS_LEN),
            (RDS_CMSG_RDMA_ARGS, RDMA_ARGS_LEN),
            (RDS_CMSG_RDMA_ARGS, RDMA_ARGS_LEN + 8),
            (RDS_CMSG_RDMA_DEST, 8),
            (RDS_CMSG_RDMA_MAP, GET_MR_ARGS_LEN),
            (RDS_CMSG_ATOMIC_FADD, ATOMIC_ARGS_LEN),
            (RDS_CMSG_ATOMIC_CSWP, ATOMIC_ARGS_LEN),
            (RDS_CMSG_MASKED_ATOMIC_FADD, ATOMIC_ARGS_LEN),
            (RDS_CMSG_MASKED_ATOMIC_CSWP, ATOMIC_ARGS_LEN),
            (RDS_CMSG_ZCOPY_COOKIE, 4),
            (RDS_CMSG_ZCOPY_COOKIE, 4),
            (RDS_CMSG_ZCOPY_COOKIE, 8),
            (RDS_CMSG_ZCOPY_COOKIE, 3),
            (RDS_CMSG_ZCOPY_COOKIE, 0),
            (RDS_CMSG_RDMA_ID, 8),
        ]),
        edgy_u64(),
        any::<[u8; 80]>(),
    )
        .prop_map(|(level, (kind, n), remote, fill)| {
            let mut data = fill[..n].to_vec();
            if kind == RDS_CMSG_RDMA_ARGS {
                data[16..24].copy_from_slice(&remote.to_ne_bytes());
            }
            let mut v = vec![0u8; cmsg_space(n)];
            encode_cmsg(level, kind, &data, &mut v).unwrap();
            v
        })
}

/// `msg_control` buffers: arbitrary bytes, well-formed `sendmsg` control
/// messages, or those mixed with malformed ones, followed by a few bytes
/// of junk (sometimes enough for another header).
fn any_control() -> impl Strategy<Value = Vec<u8>> {
    let part = prop_oneof![2 => send_part(), 1 => cmsg_part()];
    prop_oneof![
        1 => bytes(256),
        4 => (
            prop::collection::vec(part, 0..6),
            prop_oneof![4 => bytes(15), 1 => bytes(40)],
        )
            .prop_map(|(parts, tail)| {
                let mut v = parts.concat();
                v.extend(tail);
                v
            }),
    ]
}

/// The walk of `buf` checked against the C rules (`CMSG_FIRSTHDR`,
/// `CMSG_OK`, `__cmsg_nxthdr`); returns the items with the offset of the
/// header each came from.
#[allow(clippy::type_complexity)]
fn check_cmsg_walk(buf: &[u8]) -> Result<Vec<(usize, Result<Cmsg<'_>, CmsgError>)>, TestCaseError> {
    let items: Vec<_> = cmsgs(buf).collect();
    let mut next = (buf.len() >= CMSG_HDR_LEN).then_some(0usize);
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let Some(off) = next else {
            return Err(TestCaseError::fail(format!(
                "item {i} after the walk should have ended"
            )));
        };
        let hdr = CmsgHdr::decode(&buf[off..]).unwrap();
        match item {
            Ok(c) => {
                // The message lies inside the buffer, right after its header.
                let start = offset_in(buf, c.data);
                prop_assert_eq!(start, Some(off + CMSG_HDR_LEN), "data not after its header");
                prop_assert_eq!(hdr.len, (CMSG_HDR_LEN + c.data.len()) as u64);
                prop_assert!(off + CMSG_HDR_LEN + c.data.len() <= buf.len());
                prop_assert_eq!((c.level, c.kind), (hdr.level, hdr.kind));
                prop_assert_eq!(off % 8, 0);
                let n = off + cmsg_align(CMSG_HDR_LEN + c.data.len());
                next = (n + CMSG_HDR_LEN <= buf.len()).then_some(n);
            }
            Err(e) => {
                prop_assert_eq!(e, CmsgError::Inval);
                prop_assert_eq!(e.errno(), 22);
                let room = (buf.len() - off) as u64;
                prop_assert!(
                    hdr.len < CMSG_HDR_LEN as u64 || hdr.len > room,
                    "OK header refused"
                );
                next = None;
            }
        }
        out.push((off, item));
    }
    prop_assert_eq!(next, None, "the walk ended early");
    Ok(out)
}

#[derive(Debug, PartialEq)]
enum ScanErr {
    Cmsg(CmsgError),
    Hook(usize),
}

impl From<CmsgError> for ScanErr {
    fn from(e: CmsgError) -> Self {
        ScanErr::Cmsg(e)
    }
}

/// `rds_rm_size` as documented on [`scan_send_cmsgs_with`], over an
/// already-checked walk: the result, and the (offset, length) of the
/// `RDMA_ARGS` data handed to the hook, which fails its call number
/// `fail_at`.
#[allow(clippy::type_complexity)]
fn scan_model(
    items: &[(usize, Result<Cmsg<'_>, CmsgError>)],
    buf: &[u8],
    zerocopy: bool,
    fail_at: Option<usize>,
) -> (Result<SendCmsgs, ScanErr>, Vec<(usize, usize)>) {
    let mut s = SendCmsgs::default();
    let mut calls = Vec::new();
    for (_, item) in items {
        let c = match item {
            Ok(c) => c,
            Err(e) => return (Err(ScanErr::Cmsg(*e)), calls),
        };
        if c.level != SOL_RDS {
            continue;
        }
        match c.kind {
            RDS_CMSG_RDMA_ARGS => {
                calls.push((offset_in(buf, c.data).unwrap(), c.data.len()));
                if fail_at == Some(calls.len() - 1) {
                    return (Err(ScanErr::Hook(calls.len() - 1)), calls);
                }
                s.rdma_args += 1;
            }
            // C reads the cookies in a second walk (rds_cmsg_send -> rds_cmsg_zcopy), each
            // in turn, stopping at one shorter than a u32; below.
            RDS_CMSG_ZCOPY_COOKIE => {}
            RDS_CMSG_RDMA_DEST => s.rdma_dest += 1,
            RDS_CMSG_RDMA_MAP => s.rdma_map += 1,
            RDS_CMSG_ATOMIC_FADD
            | RDS_CMSG_ATOMIC_CSWP
            | RDS_CMSG_MASKED_ATOMIC_FADD
            | RDS_CMSG_MASKED_ATOMIC_CSWP => s.atomics += 1,
            RDS_CMSG_RDMA_ID => s.rdma_id += 1,
            _ => return (Err(ScanErr::Cmsg(CmsgError::Inval)), calls),
        }
    }
    for c in items.iter().filter_map(|(_, c)| c.as_ref().ok()) {
        if c.level != SOL_RDS || c.kind != RDS_CMSG_ZCOPY_COOKIE {
            continue;
        }
        match c.data.get(..4) {
            Some(b) => s.zcopy_cookie = Some(Ok(u32::from_ne_bytes(b.try_into().unwrap()))),
            None => {
                s.zcopy_cookie = Some(Err(CmsgError::Inval));
                break;
            }
        }
    }
    let dest = s.rdma_dest + s.rdma_map > 0 || s.zcopy_cookie.is_some();
    let args = s.rdma_args + s.atomics > 0;
    let zerocopy_ok = !zerocopy || s.zcopy_cookie.is_some();
    let groups_ok = !(dest && args);
    let id_ok = s.rdma_id <= 1 && (s.rdma_id == 0 || args);
    if zerocopy_ok && groups_ok && id_ok {
        (Ok(s), calls)
    } else {
        (Err(ScanErr::Cmsg(CmsgError::Inval)), calls)
    }
}

// --- addresses ---------------------------------------------------------------------------------

/// Addresses biased toward the prefixes `__ipv6_addr_type` tells apart
/// and the IPv4 addresses RDS refuses.
fn any_addr() -> impl Strategy<Value = Addr> {
    let v4 = prop_oneof![
        Just([0u8, 0, 0, 0]),
        Just([255u8, 255, 255, 255]),
        (224u8..240, any::<[u8; 3]>()).prop_map(|(a, [b, c, d])| [a, b, c, d]),
        (Just(127u8), any::<[u8; 3]>()).prop_map(|(a, [b, c, d])| [a, b, c, d]),
        any::<[u8; 4]>(),
    ];
    let prefixed = (
        prop::sample::select(vec![0x00u8, 0x20, 0xfc, 0xfe, 0xff]),
        any::<u8>(),
        any::<[u8; 14]>(),
    )
        .prop_map(|(b0, b1, rest)| {
            let mut a = [0; 16];
            a[0] = b0;
            a[1] = b1;
            a[2..].copy_from_slice(&rest);
            Addr(a)
        });
    prop_oneof![
        2 => v4.clone().prop_map(Addr::from_v4),
        1 => v4.prop_map(|[a, b, c, d]| Addr([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a, b, c, d])),
        2 => prefixed,
        1 => any::<[u8; 16]>().prop_map(Addr),
        2 => (any::<u8>(), any::<[u8; 14]>()).prop_map(|(b1, rest)| {
            // fe80::/10 and fec0::/10.
            let mut a = [0; 16];
            a[0] = 0xfe;
            a[1] = 0x80 | (b1 & 0x7f);
            a[2..].copy_from_slice(&rest);
            Addr(a)
        }),
        1 => Just(Addr::ANY),
        1 => Just(Addr::LOOPBACK),
    ]
}

fn any_scope() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), 1u32..4, any::<u32>()]
}

fn any_sockaddr() -> impl Strategy<Value = SockAddr> {
    (any_addr(), any::<u16>(), any_scope()).prop_map(|(addr, port, scope_id)| SockAddr {
        addr,
        port,
        scope_id,
    })
}

/// Raw sockaddr bytes of any length up to `sizeof(struct
/// sockaddr_storage)` + 2: a likely family then anything, or a well-formed
/// `sockaddr_in` / `sockaddr_in6` cut to any length with junk after it.
fn any_sockaddr_bytes() -> impl Strategy<Value = Vec<u8>> {
    let fam = prop_oneof![Just(AF_INET), Just(AF_INET6), Just(AF_UNSPEC), any::<u16>()];
    let built = (
        any::<bool>(),
        any_addr(),
        any::<u16>(),
        any::<[u8; 4]>(),
        any_scope(),
        // The exact size, or any length (shorter, or with bytes after it).
        prop_oneof![2 => Just(None), 1 => (0usize..=40).prop_map(Some)],
        any::<[u8; 40]>(),
    )
        .prop_map(|(six, a, port, junk, scope, len, fill)| {
            let mut v = fill.to_vec();
            if six {
                v[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
                v[2..4].copy_from_slice(&port.to_be_bytes());
                v[4..8].copy_from_slice(&junk);
                v[8..24].copy_from_slice(&a.0);
                v[24..28].copy_from_slice(&scope.to_ne_bytes());
            } else {
                v[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
                v[2..4].copy_from_slice(&port.to_be_bytes());
                v[4..8].copy_from_slice(&a.0[12..]);
            }
            let size = if six {
                SOCKADDR_IN6_LEN
            } else {
                SOCKADDR_IN_LEN
            };
            v.truncate(len.unwrap_or(size));
            v
        });
    prop_oneof![
        2 => (fam, bytes(128)).prop_map(|(f, rest)| {
            let mut v = f.to_ne_bytes().to_vec();
            v.extend(rest);
            v
        }),
        1 => bytes(40),
        4 => built,
    ]
}

fn family_of(b: &[u8]) -> Option<u16> {
    b.get(..2).map(|f| u16::from_ne_bytes([f[0], f[1]]))
}

fn ipv4_unusable(a: [u8; 4]) -> bool {
    a == [0, 0, 0, 0] || a == [255, 255, 255, 255] || a[0] & 0xf0 == 0xe0
}

/// `check_in6`: unicast, or v4-mapped with a usable IPv4 address.
fn in6_usable(a: &Addr) -> bool {
    a.kind() & IPV6_ADDR_UNICAST != 0 || a.v4().is_some_and(|v| !ipv4_unusable(v))
}

fn addr_errno_ok(e: AddrError) -> bool {
    matches!(
        (e, e.errno()),
        (AddrError::Inval, 22)
            | (AddrError::DestAddrReq, 89)
            | (AddrError::ProtoType, 91)
            | (AddrError::AfNoSupport, 97)
            | (AddrError::OpNotSupp, 95)
    )
}

// --- the properties ------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    // Header::decode: Ok iff 48 bytes, reads only those, and
    // decode→encode→decode is stable (padding dropped); the checksum rules
    // hold on whatever bytes came in.
    #[test]
    fn header_decode_any_bytes(buf in bytes(160)) {
        match Header::decode(&buf) {
            Err(e) => {
                prop_assert_eq!(e, HeaderError::TooShort);
                prop_assert!(buf.len() < HEADER_LEN);
            }
            Ok(h) => {
                prop_assert!(buf.len() >= HEADER_LEN);
                prop_assert_eq!(Header::decode(&buf[..HEADER_LEN]), Ok(h));
                let enc = h.encode();
                prop_assert_eq!(enc, header_bytes(&buf));
                prop_assert_eq!(Header::decode(&enc), Ok(h));
                prop_assert_eq!(h.sequence, u64::from_be_bytes(buf[0..8].try_into().unwrap()));
                prop_assert_eq!(h.len, u32::from_be_bytes(buf[16..20].try_into().unwrap()));
                prop_assert_eq!(h.csum, u16::from_be_bytes([buf[30], buf[31]]));
                prop_assert_eq!(&h.exthdr[..], &buf[32..48]);
                let raw: [u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().unwrap();
                prop_assert_eq!(verify_checksum(&raw), h.csum == 0 || internet_checksum(&raw) == 0);
                // h_csum is not part of its own checksum.
                let mut other = raw;
                other[30] ^= 0x5a;
                other[31] ^= 0xa5;
                prop_assert_eq!(header_checksum(&other), header_checksum(&raw));
                let c = h.with_checksum();
                prop_assert!(verify_checksum(&c.encode()));
                prop_assert_eq!(Header { csum: h.csum, ..c }, h);
            }
        }
    }

    // The extension-header walker on any h_exthdr: every entry lies inside
    // the area and re-encodes to its bytes, at most one error and only
    // last, of the right kind; the iterator is fused; add_ext fails with
    // the walker's error or NoSpace, or appends exactly one entry.
    #[test]
    fn ext_walk_any_area(area in any_area(), new in any_ext()) {
        let (items, free) = check_walk(&area)?;
        let h = Header { exthdr: area, ..Header::default() };
        prop_assert_eq!(h.exts().collect::<Vec<_>>(), items.clone());
        let mut it = ExtIter::new(&area);
        for _ in it.by_ref() {}
        prop_assert!(it.next().is_none() && it.next().is_none());

        let mut h2 = h;
        let r = h2.add_ext(new);
        match (free, items.last()) {
            (None, Some(Err(e))) => {
                prop_assert_eq!(r, Err(*e));
                prop_assert_eq!(h2, h);
            }
            (Some(pos), _) if pos + new.encoded_len() <= EXTHDR_SPACE => {
                prop_assert_eq!(r, Ok(()));
                let mut want = items.clone();
                want.push(Ok(new));
                prop_assert_eq!(h2.exts().collect::<Vec<_>>(), want);
                prop_assert_eq!(&h2.exthdr[..pos], &area[..pos]);
                prop_assert!(h2.exthdr[pos + new.encoded_len()..].iter().all(|b| *b == 0));
                let (_, free2) = check_walk(&h2.exthdr)?;
                prop_assert!(free2.is_some());
            }
            (Some(_), _) => {
                prop_assert_eq!(r, Err(HeaderError::NoSpace));
                prop_assert_eq!(h2, h);
            }
            (None, _) => prop_assert!(false, "walk error without an error item"),
        }
    }

    // The cmsg walker on any msg_control: every message lies inside the
    // buffer right after an 8-aligned header whose cmsg_len it matches, a
    // refused header is one CMSG_OK refuses (EINVAL), and the walk visits
    // exactly the headers C's would.
    #[test]
    fn cmsg_walk_stays_in_buffer(buf in any_control()) {
        let items = check_cmsg_walk(&buf)?;
        prop_assert!(items.len() <= buf.len() / CMSG_HDR_LEN);
        if let Some(i) = items.iter().position(|(_, r)| r.is_err()) {
            prop_assert_eq!(i, items.len() - 1);
        }
        let mut it = cmsgs(&buf);
        for _ in it.by_ref() {}
        prop_assert!(it.next().is_none());
    }

    // cmsg headers: decode reads exactly 16 bytes, and decode/encode are
    // inverse; encode_cmsg writes CMSG_SPACE bytes or nothing, and the
    // walk gives the message back.
    #[test]
    fn cmsg_encode_decode(raw in bytes(40), level in any::<i32>(), kind in any::<i32>(),
                          data in bytes(100), out_len in 0usize..140, fill in any::<u8>()) {
        let h = CmsgHdr::decode(&raw);
        prop_assert_eq!(h.is_some(), raw.len() >= CMSG_HDR_LEN);
        if let Some(h) = h {
            prop_assert_eq!(&h.encode()[..], &raw[..CMSG_HDR_LEN]);
            prop_assert_eq!(CmsgHdr::decode(&h.encode()), Some(h));
        }
        let mut out = vec![fill; out_len];
        let r = encode_cmsg(level, kind, &data, &mut out);
        let space = cmsg_space(data.len());
        if out_len >= space {
            prop_assert_eq!(r, Some(space));
            prop_assert!(out[space..].iter().all(|b| *b == fill), "wrote past CMSG_SPACE");
            prop_assert!(out[cmsg_len(data.len())..space].iter().all(|b| *b == 0));
            let got: Vec<_> = cmsgs(&out[..space]).collect();
            prop_assert_eq!(got, vec![Ok(Cmsg { level, kind, data: &data })]);
        } else {
            prop_assert_eq!(r, None);
            prop_assert!(out.iter().all(|b| *b == fill), "wrote when it did not fit");
        }
    }

    // cmsg_align / cmsg_len / cmsg_space never wrap: exact or saturated.
    #[test]
    fn cmsg_sizes_saturate(n in edgy_usize()) {
        let a = cmsg_align(n);
        if n <= usize::MAX - 7 {
            prop_assert!(a % 8 == 0 && a >= n && a - n < 8);
        } else {
            prop_assert_eq!(a, usize::MAX);
        }
        prop_assert_eq!(cmsg_len(n), n.saturating_add(CMSG_HDR_LEN));
        prop_assert_eq!(cmsg_space(n), a.saturating_add(CMSG_HDR_LEN));
        prop_assert!(cmsg_space(n) >= cmsg_len(n));
    }

    // rds_rdma_bytes: EINVAL on a refused header or a short RDMA_ARGS,
    // else the wrapping sum of remote_vec.bytes, which RdmaArgs::decode of
    // each RDMA_ARGS agrees with.
    #[test]
    fn rdma_bytes_any_control(buf in any_control()) {
        let items = check_cmsg_walk(&buf)?;
        let mut want: Result<u64, CmsgError> = Ok(0);
        for (_, item) in &items {
            let c = match item {
                Ok(c) => c,
                Err(e) => {
                    want = Err(*e);
                    break;
                }
            };
            if c.level == SOL_RDS && c.kind == RDS_CMSG_RDMA_ARGS {
                match RdmaArgs::decode(c.data) {
                    None => {
                        prop_assert!(c.data.len() < RDMA_ARGS_LEN);
                        want = Err(CmsgError::Inval);
                        break;
                    }
                    Some(a) => {
                        want = want.map(|s| s.wrapping_add(a.remote_vec.bytes));
                    }
                }
            }
        }
        prop_assert_eq!(rdma_bytes(&buf), want);
    }

    // rds_rm_size's walk: the counts and the documented rules, the hook
    // called on each RDMA_ARGS in walk order with data inside the buffer,
    // its error ending the walk; scan_send_cmsgs is the walk with a hook
    // that never fails.
    #[test]
    fn scan_send_cmsgs_any_control(buf in any_control(), zerocopy in any::<bool>(),
                                   fail_at in prop::option::of(0usize..4)) {
        let items = check_cmsg_walk(&buf)?;
        let (want, want_calls) = scan_model(&items, &buf, zerocopy, fail_at);
        let mut calls = Vec::new();
        let got = scan_send_cmsgs_with(&buf, zerocopy, |d: &[u8]| {
            calls.push((offset_in(&buf, d).unwrap_or(usize::MAX), d.len()));
            if fail_at == Some(calls.len() - 1) {
                Err(ScanErr::Hook(calls.len() - 1))
            } else {
                Ok(())
            }
        });
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(&calls, &want_calls);
        let plain = scan_send_cmsgs(&buf, zerocopy);
        let (model_plain, _) = scan_model(&items, &buf, zerocopy, None);
        prop_assert_eq!(plain.map_err(ScanErr::Cmsg), model_plain);
        if let Ok(s) = plain {
            let dest = s.rdma_dest > 0 || s.rdma_map > 0 || s.zcopy_cookie.is_some();
            let args = s.rdma_args > 0 || s.atomics > 0;
            prop_assert!(!(dest && args));
            prop_assert!(!zerocopy || s.zcopy_cookie.is_some());
            prop_assert!(s.rdma_id <= 1 && (s.rdma_id == 0 || args));
        }
        if let Err(e) = plain {
            prop_assert_eq!(e.errno(), 22);
        }
    }

    // The fixed-size RDMA ABI structs and the barrier args: decoded iff
    // long enough, from their first bytes only, and decode→encode→decode
    // stable; the derived values (cookie parts, the GET_MR args of
    // GET_MR_FOR_DEST) are the documented ones.
    #[test]
    fn rdma_abi_decoders_any_bytes(buf in bytes(200)) {
        if let Some(v) = check_fixed(&buf, RdsIovec::decode, RdsIovec::encode, None)? {
            prop_assert_eq!((v.addr, v.bytes), (ne_u64(&buf, 0), ne_u64(&buf, 8)));
            let p = v.pages();
            prop_assert!(p == 0 || u128::from(p) == true_pages(v.addr, v.bytes));
            prop_assert!(p <= (1 << 20) + 1);
            prop_assert_eq!(p == 0, v.bytes == 0 || v.bytes > u64::from(u32::MAX)
                || v.addr.checked_add(v.bytes).is_none());
        }
        check_fixed(&buf, GetMrArgs::decode, GetMrArgs::encode, None)?;
        let d = check_fixed(&buf, GetMrForDestArgs::decode, GetMrForDestArgs::encode, None)?;
        if let Some(d) = d {
            prop_assert_eq!(&d.dest[..], &buf[..SOCKADDR_STORAGE_LEN]);
            let plain = GetMrArgs::decode(&buf[SOCKADDR_STORAGE_LEN..]);
            prop_assert_eq!(Some(d.as_get_mr_args()), plain);
        }
        if let Some(f) = check_fixed(&buf, FreeMrArgs::decode, FreeMrArgs::encode, None)? {
            prop_assert_eq!((f.cookie, f.flags), (ne_u64(&buf, 0), ne_u64(&buf, 8)));
        }
        if let Some(a) = check_fixed(&buf, RdmaArgs::decode, RdmaArgs::encode, None)? {
            prop_assert_eq!(a.remote_vec.bytes, ne_u64(&buf, 16));
            prop_assert_eq!(a.op_rkey(), cookie_key(a.cookie));
            prop_assert_eq!(make_cookie(cookie_key(a.cookie), cookie_offset(a.cookie)), a.cookie);
            prop_assert_eq!(
                a.op_remote_addr(),
                a.remote_vec.addr.wrapping_add(u64::from(cookie_offset(a.cookie)))
            );
        }
        if let Some(b) = check_fixed(&buf, BarrierArgs::decode, BarrierArgs::encode, None)? {
            prop_assert_eq!(&b.dest[..], &buf[..SOCKADDR_STORAGE_LEN]);
            prop_assert_eq!(
                (b.wait_id, b.mark_addr, b.flags),
                (ne_u64(&buf, 128), ne_u64(&buf, 136), ne_u64(&buf, 144))
            );
        }
        // RdmaNotify reads its 12 bytes of fields, not the tail padding,
        // and writes the padding as zero.
        let n = RdmaNotify::decode(&buf);
        prop_assert_eq!(n.is_some(), buf.len() >= 12);
        if let Some(n) = n {
            prop_assert_eq!(RdmaNotify::decode(&buf[..12]), Some(n));
            let e = n.encode();
            prop_assert_eq!(&e[..12], &buf[..12]);
            prop_assert_eq!(&e[12..], &[0u8; 4][..]);
            prop_assert_eq!(RdmaNotify::decode(&e), Some(n));
        }
        prop_assert_eq!(
            (RDS_IOVEC_LEN, GET_MR_ARGS_LEN, GET_MR_FOR_DEST_ARGS_LEN, FREE_MR_ARGS_LEN,
             RDMA_ARGS_LEN, RDMA_NOTIFY_LEN, BARRIER_ARGS_LEN),
            (16, 32, 160, 16, 56, 16, 152)
        );
    }

    // The atomic decode by kind: only the four atomic kinds, only 72 bytes
    // or more, reading 72; the union mapped as rds_cmsg_atomic does;
    // re-encoding under the same kind gives the bytes back (unused union
    // words zeroed); check_atomic's EFAULT/EINVAL rules; the masked
    // semantics of the decoded operation.
    #[test]
    fn atomic_decode_any_bytes(
        kind in prop_oneof![4 => 6i32..=9, 1 => any::<i32>(), 1 => -2i32..16],
        buf in prop_oneof![bytes(100), prop::collection::vec(any::<u8>(), 72..=80)],
        old in any::<u64>(),
        fix_align in any::<bool>(),
    ) {
        let mut buf = buf;
        if fix_align && buf.len() >= ATOMIC_ARGS_LEN {
            // Often aligned, to get past the EFAULT check.
            buf[8] &= !7;
            buf[16] &= !7;
            buf[4] = 0;
        }
        let atomic = (RDS_CMSG_ATOMIC_FADD..=RDS_CMSG_MASKED_ATOMIC_CSWP).contains(&kind);
        let a = AtomicArgs::decode(kind, &buf);
        prop_assert_eq!(a.is_some(), atomic && buf.len() >= ATOMIC_ARGS_LEN);
        let Some(a) = a else { return Ok(()) };
        prop_assert_eq!(AtomicArgs::decode(kind, &buf[..ATOMIC_ARGS_LEN]), Some(a));
        prop_assert_eq!(
            (a.cookie, a.local_addr, a.remote_addr, a.flags, a.user_token),
            (ne_u64(&buf, 0), ne_u64(&buf, 8), ne_u64(&buf, 16), ne_u64(&buf, 56), ne_u64(&buf, 64))
        );
        let u = [ne_u64(&buf, 24), ne_u64(&buf, 32), ne_u64(&buf, 40), ne_u64(&buf, 48)];
        let (op, used) = match kind {
            RDS_CMSG_ATOMIC_FADD => (AtomicOp::Fadd { add: u[0], nocarry_mask: 0 }, 1),
            RDS_CMSG_MASKED_ATOMIC_FADD => (AtomicOp::Fadd { add: u[0], nocarry_mask: u[1] }, 2),
            RDS_CMSG_ATOMIC_CSWP => {
                let (compare, swap) = (u[0], u[1]);
                let op = AtomicOp::Cswp { compare, swap, compare_mask: !0, swap_mask: !0 };
                (op, 2)
            }
            _ => {
                let [compare, swap, compare_mask, swap_mask] = u;
                let op = AtomicOp::Cswp { compare, swap, compare_mask, swap_mask };
                (op, 4)
            }
        };
        prop_assert_eq!(a.op, op);
        let mut want = buf[..ATOMIC_ARGS_LEN].to_vec();
        want[24 + 8 * used..56].fill(0);
        let e = a.encode(kind);
        prop_assert_eq!(e.map(|e| e.to_vec()), Some(want));
        prop_assert_eq!(AtomicArgs::decode(kind, &e.unwrap()), Some(a));
        let nk = a.natural_kind();
        prop_assert_eq!(AtomicArgs::decode(nk, &a.encode(nk).unwrap()), Some(a));
        // The other operation's kinds never encode it.
        for k in [
            RDS_CMSG_ATOMIC_FADD,
            RDS_CMSG_MASKED_ATOMIC_FADD,
            RDS_CMSG_ATOMIC_CSWP,
            RDS_CMSG_MASKED_ATOMIC_CSWP,
        ] {
            let same_op = matches!(
                (k, a.op),
                (RDS_CMSG_ATOMIC_FADD | RDS_CMSG_MASKED_ATOMIC_FADD, AtomicOp::Fadd { .. })
                    | (RDS_CMSG_ATOMIC_CSWP | RDS_CMSG_MASKED_ATOMIC_CSWP, AtomicOp::Cswp { .. })
            );
            if !same_op {
                prop_assert_eq!(a.encode(k), None);
            }
        }
        for k in [0, 5, 10, 64, i32::MIN, i32::MAX] {
            prop_assert_eq!(a.encode(k), None);
        }
        // check_atomic: EFAULT for a misaligned local address first, then
        // EINVAL for a misaligned remote one (in MR coordinates).
        let remote = u128_of(a.remote_addr) + u128::from(cookie_offset(a.cookie));
        let want = if a.local_addr % 8 != 0 {
            Err(MrError::Fault)
        } else if remote % 8 != 0 {
            Err(MrError::Inval)
        } else {
            Ok(())
        };
        prop_assert_eq!(check_atomic(&a), want);
        prop_assert_eq!(a.op_remote_addr(), remote as u64);
        if let Err(e) = check_atomic(&a) {
            prop_assert_eq!(e.errno(), if e == MrError::Fault { 14 } else { 22 });
        }
        // The masked semantics.
        let new = a.op.apply(old);
        match a.op {
            AtomicOp::Fadd { add, nocarry_mask: 0 } => prop_assert_eq!(new, old.wrapping_add(add)),
            AtomicOp::Fadd { add, nocarry_mask } => {
                // Each field adds on its own: bit by bit, carries dropped at
                // the mask bits.
                let mut carry = 0u64;
                let mut want = 0u64;
                for i in 0..64 {
                    let (x, y) = ((old >> i) & 1, (add >> i) & 1);
                    want |= (x ^ y ^ carry) << i;
                    carry = (x & y) | (carry & (x ^ y));
                    if (nocarry_mask >> i) & 1 == 1 {
                        carry = 0;
                    }
                }
                prop_assert_eq!(new, want);
            }
            AtomicOp::Cswp { compare, swap, compare_mask, swap_mask } => {
                if (old ^ compare) & compare_mask == 0 {
                    prop_assert_eq!(new & swap_mask, swap & swap_mask);
                    prop_assert_eq!(new & !swap_mask, old & !swap_mask);
                } else {
                    prop_assert_eq!(new, old);
                }
            }
        }
    }

    // parse_bind on any sockaddr bytes: EINVAL only; reads no byte past
    // the family's sockaddr nor sin_zero / sin6_flowinfo; an accepted
    // address is the one in the bytes, usable (not ::, not multicast or
    // broadcast), with a scope id iff link-local, and survives
    // encode_sockaddr→parse_bind.
    #[test]
    fn parse_bind_any_bytes(buf in any_sockaddr_bytes(), junk in any::<[u8; 8]>()) {
        let r = parse_bind(&buf);
        let fam = family_of(&buf);
        let size = match fam {
            Some(AF_INET) => SOCKADDR_IN_LEN,
            Some(AF_INET6) => SOCKADDR_IN6_LEN,
            _ => usize::MAX,
        };
        if buf.len() < 2 || size == usize::MAX || buf.len() < size {
            prop_assert_eq!(r, Err(AddrError::Inval));
            return Ok(());
        }
        prop_assert_eq!(parse_bind(&buf[..size]), r);
        let mut other = buf.clone();
        if fam == Some(AF_INET) {
            other[8..16].copy_from_slice(&junk);
        } else {
            other[4..8].copy_from_slice(&junk[..4]);
        }
        prop_assert_eq!(parse_bind(&other), r, "sin_zero / sin6_flowinfo were read");
        let port = u16::from_be_bytes([buf[2], buf[3]]);
        match r {
            Err(e) => {
                prop_assert_eq!(e, AddrError::Inval);
                prop_assert_eq!(e.errno(), 22);
                if fam == Some(AF_INET) {
                    prop_assert!(ipv4_unusable(buf[4..8].try_into().unwrap()));
                } else {
                    let a = Addr(buf[8..24].try_into().unwrap());
                    let scope = u32::from_ne_bytes(buf[24..28].try_into().unwrap());
                    let ll = a.kind() & IPV6_ADDR_LINKLOCAL != 0;
                    prop_assert!(!in6_usable(&a) || (ll && scope == 0));
                }
            }
            Ok(s) => {
                prop_assert_eq!(s.port, port);
                prop_assert!(!s.addr.is_any());
                prop_assert_eq!(s.addr.kind() & IPV6_ADDR_MULTICAST, 0);
                if fam == Some(AF_INET) {
                    prop_assert_eq!(s.addr, Addr::from_v4(buf[4..8].try_into().unwrap()));
                    prop_assert!(!ipv4_unusable(buf[4..8].try_into().unwrap()));
                    prop_assert_eq!(s.scope_id, 0);
                } else {
                    prop_assert_eq!(&s.addr.0[..], &buf[8..24]);
                    prop_assert!(in6_usable(&s.addr));
                    let scope = u32::from_ne_bytes(buf[24..28].try_into().unwrap());
                    if s.addr.kind() & IPV6_ADDR_LINKLOCAL != 0 {
                        prop_assert!(scope != 0);
                        prop_assert_eq!(s.scope_id, scope);
                    } else {
                        prop_assert_eq!(s.scope_id, 0);
                    }
                }
                if let Some(v4) = s.addr.v4() {
                    prop_assert!(!ipv4_unusable(v4));
                }
                let mut out = [0u8; SOCKADDR_IN6_LEN];
                let n = encode_sockaddr(&s, &mut out).unwrap();
                prop_assert_eq!(parse_bind(&out[..n]), Ok(s));
                prop_assert_eq!(parse_send_dest(&out[..n]), Ok(s));
            }
        }
    }

    // parse_connect on any sockaddr bytes and bound side: the documented
    // errno for each case, never reading past the family's sockaddr, and an
    // accepted address is parse_bind's (plus the bound-scope rule).
    #[test]
    fn parse_connect_any_bytes(buf in any_sockaddr_bytes(),
                               bound in prop::option::of(any_sockaddr())) {
        let r = parse_connect(&buf, bound);
        if let Err(e) = r {
            prop_assert!(addr_errno_ok(e), "{:?} has errno {}", e, e.errno());
            prop_assert!(e != AddrError::OpNotSupp);
        }
        let b = parse_bind(&buf);
        let want = match family_of(&buf) {
            None => Err(AddrError::Inval),
            Some(AF_INET) if buf.len() < SOCKADDR_IN_LEN => Err(AddrError::Inval),
            Some(AF_INET) if buf[4..8] == [0, 0, 0, 0] => Err(AddrError::DestAddrReq),
            Some(AF_INET) => b,
            Some(AF_INET6) if buf.len() < SOCKADDR_IN6_LEN => Err(AddrError::Inval),
            Some(AF_INET6) => {
                let a = Addr(buf[8..24].try_into().unwrap());
                let bound_scope = match bound {
                    Some(s) if !s.addr.is_any() => s.scope_id,
                    _ => 0,
                };
                match b {
                    Err(_) if !in6_usable(&a) => Err(AddrError::ProtoType),
                    Err(e) => Err(e),
                    Ok(s) if s.scope_id != 0 && bound_scope != 0 && s.scope_id != bound_scope => {
                        Err(AddrError::Inval)
                    }
                    Ok(s) => Ok(s),
                }
            }
            Some(_) => Err(AddrError::AfNoSupport),
        };
        prop_assert_eq!(r, want);
        if buf.len() > SOCKADDR_IN6_LEN {
            prop_assert_eq!(parse_connect(&buf[..SOCKADDR_IN6_LEN], bound), r);
        }
    }

    // parse_send_dest is parse_bind behind the 16-byte minimum;
    // check_send_dest's documented rules for any destination and bound side.
    #[test]
    fn send_dest_any(buf in any_sockaddr_bytes(), dest in any_sockaddr(), bound in any_sockaddr()) {
        let r = parse_send_dest(&buf);
        if buf.len() < SOCKADDR_IN_LEN {
            prop_assert_eq!(r, Err(AddrError::Inval));
        } else {
            prop_assert_eq!(r, parse_bind(&buf));
        }
        let dest = r.unwrap_or(dest);
        let got = check_send_dest(&dest, &bound);
        let want = if dest.addr.v4().is_some() != bound.addr.v4().is_some() {
            Err(AddrError::OpNotSupp)
        } else if dest.scope_id == bound.scope_id || dest.scope_id == 0 {
            Ok(bound.scope_id)
        } else if bound.scope_id != 0 {
            Err(AddrError::Inval)
        } else {
            Ok(dest.scope_id)
        };
        prop_assert_eq!(got, want);
        if let Ok(s) = got {
            prop_assert!(s == dest.scope_id || s == bound.scope_id);
            if bound.scope_id != 0 {
                prop_assert_eq!(s, bound.scope_id, "a link-local bound socket sends on its link");
            }
        }
        if let Err(e) = got {
            prop_assert!(addr_errno_ok(e));
        }
    }

    // check_bind_scope: EINVAL iff connected and both scope ids set and
    // different.
    #[test]
    fn bind_scope_any(scope in any_scope(), connected in any::<bool>(), bound in any_scope()) {
        let want = if connected && scope != 0 && bound != 0 && scope != bound {
            Err(AddrError::Inval)
        } else {
            Ok(())
        };
        prop_assert_eq!(check_bind_scope(scope, connected, bound), want);
    }

    // encode_sockaddr / encode_unbound_local into any buffer: None iff
    // shorter than a sockaddr_in6, and nothing written past the length
    // returned.
    #[test]
    fn sockaddr_encoders_any_buffer(a in any_sockaddr(), conn in prop::option::of(any_sockaddr()),
                                    len in 0usize..64, fill in any::<u8>()) {
        let mut out = vec![fill; len];
        let r = encode_sockaddr(&a, &mut out);
        prop_assert_eq!(r.is_some(), len >= SOCKADDR_IN6_LEN);
        match r {
            None => prop_assert!(out.iter().all(|b| *b == fill)),
            Some(n) => {
                let want = if a.addr.v4().is_some() { SOCKADDR_IN_LEN } else { SOCKADDR_IN6_LEN };
                prop_assert_eq!(n, want);
                prop_assert!(out[n..].iter().all(|b| *b == fill));
                let fam = if n == SOCKADDR_IN_LEN { AF_INET } else { AF_INET6 };
                prop_assert_eq!(family_of(&out), Some(fam));
            }
        }
        let mut out = vec![fill; len];
        let r = encode_unbound_local(conn, &mut out);
        prop_assert_eq!(r.is_some(), len >= SOCKADDR_IN6_LEN);
        match r {
            None => prop_assert!(out.iter().all(|b| *b == fill)),
            Some(n) => {
                prop_assert!(out[n..].iter().all(|b| *b == fill));
                prop_assert!(out[2..n].iter().all(|b| *b == 0));
                let want = match conn {
                    Some(c) if !c.addr.is_any() && c.addr.kind() & IPV6_ADDR_MAPPED == 0 => {
                        (AF_INET6, SOCKADDR_IN6_LEN)
                    }
                    Some(c) if !c.addr.is_any() => (AF_INET, SOCKADDR_IN_LEN),
                    _ => (AF_UNSPEC, SOCKADDR_IN_LEN),
                };
                prop_assert_eq!((family_of(&out).unwrap(), n), want);
            }
        }
    }

    // check_info_request: accepts exactly 0 <= len <= INFO_MAX_LEN with
    // start + len not wrapping; EINVAL otherwise. info_outcome: Fits only
    // when the exact product fits len; NoSpace with the saturated product.
    #[test]
    fn info_request_any(
        len in prop_oneof![
            2 => any::<i32>(),
            1 => -3i32..3,
            1 => (INFO_MAX_LEN - 3)..=i32::MAX,
            2 => prop::sample::select(vec![
                INFO_MAX_LEN - 1, INFO_MAX_LEN, INFO_MAX_LEN + 1, i32::MAX, -1, i32::MIN,
            ]),
        ],
        start in edgy_u64(),
        // Or a start within a few bytes of making start + len wrap.
        near_wrap in prop::option::of(-2i64..=2),
        opt in prop_oneof![any::<i32>(), (RDS_INFO_FIRST - 3)..(RDS_INFO_LAST + 3)],
        (olen, each, nr) in (edgy_usize(), edgy_usize(), edgy_usize()),
    ) {
        let start = match near_wrap {
            Some(d) => (u64::MAX - u64::from(len.unsigned_abs())).wrapping_add_signed(d),
            None => start,
        };
        let r = check_info_request(len, start);
        let ok = (0..=INFO_MAX_LEN).contains(&len)
            && u128_of(start) + u128::from(len.unsigned_abs()) <= u128_of(u64::MAX);
        prop_assert_eq!(r.is_ok(), ok);
        if let Err(e) = r {
            prop_assert_eq!(e, InfoError::Inval);
            prop_assert_eq!(e.errno(), 22);
        } else {
            prop_assert!((0..=INFO_MAX_LEN).contains(&len));
            prop_assert!(start.checked_add(u64::from(len.unsigned_abs())).is_some());
        }
        prop_assert_eq!(INFO_MAX_LEN, i32::MAX - 4096 + 1);
        prop_assert_eq!(is_info_option(opt), (RDS_INFO_FIRST..=RDS_INFO_LAST).contains(&opt));

        // The product saturates (documented), so only a len of usize::MAX,
        // which check_info_request never lets through, can take a
        // saturated product for a fit.
        let product = (nr as u128) * (each as u128);
        let saturated = product.min(usize::MAX as u128);
        match info_outcome(olen, each, nr) {
            InfoOutcome::Fits { each: e, total } => {
                prop_assert_eq!(e, each);
                prop_assert_eq!(total as u128, saturated);
                prop_assert!(total <= olen);
                if olen < usize::MAX {
                    prop_assert_eq!(total as u128, product);
                }
            }
            InfoOutcome::NoSpace { needed } => {
                prop_assert_eq!(needed as u128, saturated);
                prop_assert!(needed > olen);
            }
        }
    }

    // The info record decoders: decoded iff long enough, from their first
    // bytes only, decode→encode→decode stable (the encoding being the
    // bytes read for the records without strings or padding); the strings
    // are NUL-free prefixes of their fields.
    #[test]
    fn info_decoders_any_bytes(
        buf in prop_oneof![bytes(120), prop::collection::vec(any::<u8>(), 90..=100)],
                               nuls in prop::collection::vec(0usize..100, 0..3)) {
        let mut buf = buf;
        // Some NULs, to end the strings inside their fields.
        for i in nuls {
            if let Some(b) = buf.get_mut(i) {
                *b = 0;
            }
        }
        let buf = &buf[..];
        // v4 records carry IPv4 addresses: they come back v4-mapped, and
        // encode to the same bytes.
        check_fixed(buf, MsgInfo::decode_v4, MsgInfo::encode_v4, None)?;
        check_fixed(buf, MsgInfo::decode_v6, MsgInfo::encode_v6, None)?;
        check_fixed(buf, SockInfo::decode_v4, SockInfo::encode_v4, None)?;
        check_fixed(buf, SockInfo::decode_v6, SockInfo::encode_v6, None)?;
        check_fixed(buf, TcpSockInfo::decode_v4, TcpSockInfo::encode_v4, None)?;
        if let Some(t) = check_fixed(buf, TcpSockInfo::decode_v6, TcpSockInfo::encode_v6, None)? {
            prop_assert_eq!(t.tos, 0);
        }
        check_fixed(buf, RdmaConnInfo::decode_v4, RdmaConnInfo::encode_v4, Some(62..64))?;
        check_fixed(buf, RdmaConnInfo::decode_v6, RdmaConnInfo::encode_v6, Some(86..88))?;

        // Connection records: the transport name is the field up to its
        // first NUL (cut to valid UTF-8); re-encoding writes that and zeros.
        for (v6, len, field) in [
            (false, INFO_CONNECTION_LEN, 24..40),
            (true, INFO6_CONNECTION_LEN, 48..64),
        ] {
            let d = if v6 { ConnInfo::decode_v6(buf) } else { ConnInfo::decode_v4(buf) };
            prop_assert_eq!(d.is_some(), buf.len() >= len);
            let Some(c) = d else { continue };
            let f = &buf[field.clone()];
            let t = c.transport.as_bytes();
            prop_assert!(t.len() <= f.len() && &f[..t.len()] == t && !t.contains(&0));
            let e = if v6 { c.encode_v6().to_vec() } else { c.encode_v4().to_vec() };
            prop_assert_eq!(e.len(), len);
            prop_assert_eq!(&e[..field.start], &buf[..field.start]);
            prop_assert_eq!(&e[field.end..], &buf[field.end..len]);
            prop_assert_eq!(&e[field.start..field.start + t.len()], t);
            prop_assert!(e[field.start + t.len()..field.end].iter().all(|b| *b == 0));
            let back = if v6 { ConnInfo::decode_v6(&e) } else { ConnInfo::decode_v4(&e) };
            prop_assert_eq!(back, Some(c));
            if v6 {
                prop_assert_eq!(c.tos, 0);
            }
        }

        // Counters: the name is a NUL-free prefix of the 32-byte field; its
        // record reads back with the name cut to at most 31 bytes.
        let d = decode_counter(buf);
        prop_assert_eq!(d.is_some(), buf.len() >= INFO_COUNTER_LEN);
        if let Some((name, value)) = d {
            let n = name.as_bytes();
            prop_assert!(n.len() <= INFO_COUNTER_NAME_LEN && &buf[..n.len()] == n);
            prop_assert!(!n.contains(&0));
            prop_assert_eq!(value, ne_u64(buf, 32));
            let e = encode_counter(name, value);
            let (back, v2) = decode_counter(&e).unwrap();
            prop_assert_eq!(v2, value);
            prop_assert!(name.starts_with(back) && back.len() < INFO_COUNTER_NAME_LEN);
            if n.len() < INFO_COUNTER_NAME_LEN {
                prop_assert_eq!(back, name);
            }
            prop_assert_eq!(e[INFO_COUNTER_NAME_LEN - 1], 0, "the name is always terminated");
            let e2 = encode_counter(back, value);
            prop_assert_eq!(decode_counter(&e2), Some((back, value)));
        }
        prop_assert_eq!(
            (INFO_MESSAGE_LEN, INFO6_MESSAGE_LEN, INFO_SOCKET_LEN, INFO6_SOCKET_LEN,
             INFO_TCP_SOCKET_LEN, INFO6_TCP_SOCKET_LEN, INFO_RDMA_CONNECTION_LEN,
             INFO6_RDMA_CONNECTION_LEN),
            (26, 50, 28, 52, 41, 64, 68, 92)
        );
    }

    // __rds_rdma_map's checks on any iovec, in C's order, with the
    // documented errno; an accepted registration spans 1 to MAX_MR_PAGES
    // pages that cover it exactly, and its Region holds all of it.
    #[test]
    fn registration_any_iovec(v in any_iovec(), can_mlock in any::<bool>()) {
        let r = check_registration_mlock(&v, can_mlock);
        let end = u128_of(v.addr) + u128_of(v.bytes);
        let aligned_end = end.div_ceil(u128::from(PAGE_SIZE)) * u128::from(PAGE_SIZE);
        let pages = true_pages(v.addr, v.bytes);
        let want = if end > u128_of(u64::MAX) || aligned_end > u128_of(u64::MAX) {
            Err(MrError::Inval)
        } else if !can_mlock {
            Err(MrError::Perm)
        } else if v.bytes == 0 || v.bytes > u64::from(u32::MAX) {
            Err(MrError::Inval)
        } else if pages > u128::from(MAX_MR_PAGES) {
            Err(MrError::MsgSize)
        } else {
            Ok((pages as u64, (v.addr % PAGE_SIZE) as u32))
        };
        prop_assert_eq!(r, want);
        prop_assert_eq!(check_registration(&v), check_registration_mlock(&v, true));
        match r {
            Ok((p, off)) => {
                prop_assert!((1..=MAX_MR_PAGES).contains(&p));
                prop_assert_eq!(MAX_MR_PAGES, 257);
                prop_assert!(u64::from(off) < PAGE_SIZE);
                let span = u128::from(off) + u128_of(v.bytes);
                prop_assert!(u128::from(p) * u128::from(PAGE_SIZE) >= span);
                prop_assert!(u128::from(p - 1) * u128::from(PAGE_SIZE) < span);
                let region = Region::of(&v);
                prop_assert_eq!(region.offset, off);
                prop_assert!(region.contains(u64::from(off), v.bytes));
                prop_assert!(!region.contains(u64::from(off), v.bytes + 1));
                prop_assert_eq!(region.index(u64::from(off) + v.bytes - 1), Some(v.bytes - 1));
            }
            Err(e) => {
                let errno = match e {
                    MrError::Inval => 22,
                    MrError::MsgSize => 90,
                    MrError::Perm => 1,
                    other => {
                        return Err(TestCaseError::fail(format!("registration gave {other:?}")));
                    }
                };
                prop_assert_eq!(e.errno(), errno);
            }
        }
    }

    // Region bounds on any values: contains / index are the interval tests,
    // computed without wrapping.
    #[test]
    fn region_any(offset in prop_oneof![0u32..4096, any::<u32>()], len in edgy_u64(),
                  at in edgy_u64(), n in edgy_u64()) {
        let r = Region { offset, len };
        let (o, l, a) = (u128::from(offset), u128_of(len), u128_of(at));
        prop_assert_eq!(r.contains(at, n), o <= a && a + u128_of(n) <= o + l);
        prop_assert_eq!(r.index(at), (o <= a && a < o + l).then(|| (a - o) as u64));
    }

    // rds_rdma_pages on any iovec list: EINVAL for an empty or too-long
    // iovec or past i32::MAX pages in total, else the exact total; and
    // rdma_sg_too_big is the exact C kmalloc bound.
    #[test]
    fn rdma_pages_any_list(local in iovec_list(), p in edgy_u64()) {
        let r = rdma_pages(&local);
        let mut total: u128 = 0;
        let mut bad = false;
        for v in &local {
            let q = v.pages();
            bad |= q == 0;
            total += u128::from(q);
        }
        let limit = u128::from(i32::MAX.unsigned_abs());
        if bad || total > limit {
            prop_assert_eq!(r, Err(MrError::Inval));
        } else {
            prop_assert_eq!(r, Ok(total as u64));
            prop_assert!(total <= limit);
            let too_big = total * u128::from(SG_ENTRY_LEN) > u128::from(MSG_SG_MAX);
            prop_assert_eq!(rdma_sg_too_big(total as u64), too_big);
        }
        let too_big = u128_of(p) * u128::from(SG_ENTRY_LEN) > u128::from(MSG_SG_MAX);
        prop_assert_eq!(rdma_sg_too_big(p), too_big);
    }

    // rds_rdma_extra_size + rds_cmsg_rdma_args on any args and iovecs: the
    // documented errors in C's order; accepted args have 1..=UIO_MAXIOV
    // iovecs, their exact page total (at most i32::MAX) and byte total (at
    // most remote_vec.bytes). check_rdma_bytes alone: the saturating sum,
    // refused iff above remote_vec.bytes.
    #[test]
    fn rdma_args_any(local in iovec_list(),
                     nr in prop_oneof![3 => Just(None), 1 => edgy_u64().prop_map(Some)],
                     remote in prop_oneof![0u64..100_000, edgy_u64()],
                     raw in any::<[u8; RDMA_ARGS_LEN]>()) {
        let mut args = RdmaArgs::decode(&raw).unwrap();
        args.nr_local = nr.unwrap_or(local.len() as u64);
        args.remote_vec.bytes = remote;
        let r = check_rdma_args(&args, &local);
        let sum: u128 = local.iter().map(|v| u128_of(v.bytes)).sum();
        let pages = rdma_pages(&local);
        let want = if args.nr_local == 0 {
            Err(MrError::Inval)
        } else if args.nr_local > UIO_MAXIOV {
            Err(MrError::MsgSize)
        } else if args.nr_local != local.len() as u64 {
            Err(MrError::Inval)
        } else if let Err(e) = pages {
            Err(e)
        } else if sum > u128_of(remote) {
            Err(MrError::Inval)
        } else {
            Ok((pages.unwrap(), sum as u64))
        };
        prop_assert_eq!(r, want);
        if let Ok((p, b)) = r {
            prop_assert!((1..=UIO_MAXIOV).contains(&(local.len() as u64)));
            prop_assert!(p <= u64::from(i32::MAX.unsigned_abs()));
            prop_assert!(b <= remote);
        }
        if let Err(e) = r {
            prop_assert_eq!(e.errno(), if e == MrError::MsgSize { 90 } else { 22 });
        }
        let sat = sum.min(u128_of(u64::MAX)) as u64;
        let want = if sat > remote { Err(MrError::Inval) } else { Ok(sat) };
        prop_assert_eq!(check_rdma_bytes(&args, &local), want);
    }

    // check_atomic on any addresses and cookie (not only decoded ones).
    #[test]
    fn check_atomic_any(cookie in edgy_u64(), local in edgy_u64(), remote in edgy_u64()) {
        let a = AtomicArgs {
            cookie,
            local_addr: local,
            remote_addr: remote,
            op: AtomicOp::Fadd { add: 1, nocarry_mask: 0 },
            flags: 0,
            user_token: 0,
        };
        let want = if local % 8 != 0 {
            Err(MrError::Fault)
        } else if (u128_of(remote) + u128::from(cookie_offset(cookie))) % 8 != 0 {
            Err(MrError::Inval)
        } else {
            Ok(())
        };
        prop_assert_eq!(check_atomic(&a), want);
    }

    // Receive sequence numbers on any sequence of (seq, retransmitted,
    // new incarnation): under C's rule only old retransmissions are dropped;
    // per incarnation also replays (old, not retransmitted) after the first
    // message of an incarnation that was not a retransmission; an accepted
    // one sets next to seq + 1 (wrapping), a dropped one leaves it. Transmit
    // numbers count up, wrapping.
    #[test]
    fn seq_any_sequence(start in edgy_u64(), strict in any::<bool>(),
                        msgs in prop::collection::vec(
                            (edgy_u64(), any::<bool>(), prop::bool::weighted(0.1)), 0..32)) {
        let mut rx = RxSeq {
            next: start,
            replays: if strict { Replays::FirstAccepted } else { Replays::Accepted },
        };
        // Whether a message of this incarnation that was not a retransmission was accepted.
        let mut settled = false;
        for (seq, re, reset) in msgs {
            if reset {
                rx.begin_incarnation();
                settled = false;
            }
            let before = rx.next;
            let got = rx.check(seq, re);
            let want = if seq < before && re {
                SeqCheck::OldRetransmission
            } else if seq < before && strict && settled {
                SeqCheck::Replay
            } else {
                SeqCheck::Accept
            };
            prop_assert_eq!(got, want);
            prop_assert_eq!(rx.next,
                            if got == SeqCheck::Accept { seq.wrapping_add(1) } else { before });
            if got == SeqCheck::Accept && !re {
                settled = true;
            }
            prop_assert_eq!(rx.replays, match (strict, settled) {
                (false, _) => Replays::Accepted,
                (true, false) => Replays::FirstAccepted,
                (true, true) => Replays::Refused,
            });
        }
        let mut tx = TxSeq { next: start };
        for i in 0..3u64 {
            prop_assert_eq!(tx.take(), start.wrapping_add(i));
        }
        prop_assert_eq!(RxSeq::new().next, 0);
        prop_assert_eq!(TxSeq::new().next, 1);
    }

    // ACK pacing and send-buffer admission on any values: an ACK is asked
    // for exactly when the budget is out, which refills it; otherwise the
    // budget shrinks by exactly one packet and len bytes.
    #[test]
    fn ack_pacing_any(start in (any::<u32>(), any::<u32>()),
                      sends in prop::collection::vec((prop_oneof![any::<u32>(), 0u32..5000],
                                                      prop_oneof![any::<u32>(), 0u32..10],
                                                      any::<u32>()), 0..32),
                      queued in edgy_u64(), sndbuf in any::<u32>()) {
        let mut p = AckPacer::new(start.0, start.1);
        for (len, maxp, maxb) in sends {
            let before = p;
            let ack = p.on_send(len, maxp, maxb);
            prop_assert_eq!(ack, before.packets == 0 || before.bytes < len);
            if ack {
                prop_assert_eq!(p, AckPacer::new(maxp, maxb));
            } else {
                prop_assert_eq!(p.packets, before.packets - 1);
                prop_assert_eq!(p.bytes, before.bytes - len);
            }
        }
        prop_assert_eq!(sndbuf_admits(queued, sndbuf), queued < u64::from(sndbuf));
        prop_assert_eq!(sndbuf_ack_required(queued, sndbuf), queued >= u64::from(sndbuf / 2));
    }

    // Receive-buffer accounting on any operation sequence, from any state:
    // bytes is the clamped exact sum, a change is reported iff the flag
    // flips, and the hysteresis holds.
    #[test]
    fn recv_account_any_sequence(
        bytes0 in edgy_u64(), congested0 in any::<bool>(),
        ops in prop::collection::vec(
            (any::<bool>(), prop_oneof![any::<u32>(), 0u32..3000, Just(u32::MAX)],
             prop_oneof![any::<u32>(), 0u32..5000, Just(0u32), Just(u32::MAX)]),
            0..32),
    ) {
        let mut a = RecvAccount { bytes: bytes0, congested: congested0 };
        for (add, len, rcvbuf) in ops {
            let before = a;
            let change = if add { a.add(len, rcvbuf) } else { a.remove(len, rcvbuf) };
            if len == 0 {
                prop_assert_eq!(change, CongChange::None);
                prop_assert_eq!(a, before);
                continue;
            }
            let want_bytes = if add {
                before.bytes.saturating_add(u64::from(len))
            } else {
                before.bytes.saturating_sub(u64::from(len))
            };
            prop_assert_eq!(a.bytes, want_bytes);
            if before.congested {
                prop_assert_eq!(a.congested, a.bytes >= u64::from(rcvbuf / 2));
            } else {
                prop_assert_eq!(a.congested, a.bytes > u64::from(rcvbuf));
            }
            let want = match (before.congested, a.congested) {
                (false, true) => CongChange::Congested,
                (true, false) => CongChange::Uncongested,
                _ => CongChange::None,
            };
            prop_assert_eq!(change, want);
        }
    }

    // Congestion maps from the wire (a peer's congestion update): wire
    // bytes → words → wire is the identity, each port's bit is its
    // set_bit_le bit, set/clear touch only that bit, and
    // uncongested_mask on slices of any lengths folds old & !new over the
    // common words.
    #[test]
    fn cong_map_any_wire(seed in any::<u64>(), dense in any::<bool>(),
                         ports in prop::collection::vec(any::<u16>(), 1..8),
                         old in prop::collection::vec(any::<u64>(), 0..20),
                         new in prop::collection::vec(any::<u64>(), 0..20)) {
        let mut wire = Box::new([0u8; CONG_MAP_BYTES]);
        let mut x = seed | 1;
        for b in wire.iter_mut() {
            // xorshift: a cheap arbitrary map.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = if dense { x as u8 } else { u8::from(x % 61 == 0) << (x % 8) };
        }
        let mut words = Box::new([0u64; CONG_MAP_WORDS]);
        wire_to_words(&wire, &mut words);
        let mut back = Box::new([0u8; CONG_MAP_BYTES]);
        words_to_wire(&words, &mut back);
        prop_assert_eq!(&back[..], &wire[..]);
        for &p in &ports {
            let bit = (wire[usize::from(p) / 8] >> (p % 8)) & 1 == 1;
            prop_assert_eq!(cong_test(&words, p), bit);
            let mut m = words.clone();
            cong_set(&mut m, p);
            prop_assert!(cong_test(&m, p));
            cong_clear(&mut m, p);
            prop_assert!(!cong_test(&m, p));
            let w = usize::from(p) / 64;
            prop_assert_eq!(m[w] | monitor_mask(p), words[w] | monitor_mask(p));
            prop_assert_eq!(&m[..w], &words[..w]);
            prop_assert_eq!(&m[w + 1..], &words[w + 1..]);
            prop_assert_eq!(monitor_mask(p), 1u64 << (p % 64));
        }
        let want = old.iter().zip(&new).fold(0, |acc, (o, n)| acc | (o & !n));
        prop_assert_eq!(uncongested_mask(&old, &new), want);
        prop_assert_eq!(uncongested_mask(&old, &old), 0);
    }

    // bind(2)'s port candidates for any request: a requested port alone,
    // or for port 0 every port but 0 and 1 exactly once, from max(random, 2).
    #[test]
    fn bind_candidates_any(
        requested in prop_oneof![Just(0u16), any::<u16>()],
        random in any::<u16>(),
    ) {
        let mut it = bind_candidates(requested, random);
        if requested != 0 {
            prop_assert_eq!(it.collect::<Vec<_>>(), vec![requested]);
            return Ok(());
        }
        let first = it.next();
        prop_assert_eq!(first, Some(random.max(2)));
        let mut seen = vec![false; 65536];
        seen[usize::from(random.max(2))] = true;
        let mut n = 1usize;
        for p in it {
            prop_assert!(p >= 2, "port {} offered", p);
            prop_assert!(!seen[usize::from(p)], "port {} twice", p);
            seen[usize::from(p)] = true;
            n += 1;
        }
        prop_assert_eq!(n, 65534);
    }

    // The barrier's op tracker on any sequence of issues and completions
    // (of issued ids and of arbitrary, mostly bogus ones): the mark is the
    // largest fully completed prefix and never decreases, ids are issued
    // in order within the window, bogus completions change nothing, and
    // barrier() agrees with the mark.
    #[test]
    fn op_tracker_any_sequence(ops in prop::collection::vec(
        prop_oneof![
            4 => Just(None),
            4 => any::<usize>().prop_map(|i| Some(Err(i))),
            2 => edgy_u64().prop_map(|id| Some(Ok(id))),
        ], 0..160)) {
        run_tracker::<0>(&ops)?;
        run_tracker::<1>(&ops)?;
        run_tracker::<2>(&ops)?;
    }

    // The R_Key quarantine on any retire/check sequence (keys including 0
    // and u32::MAX), against a FIFO; key_acceptable's rule.
    #[test]
    fn quarantine_any_sequence(ops in prop::collection::vec(
        (any::<bool>(), prop_oneof![0u32..20, Just(u32::MAX), any::<u32>()]), 0..100)) {
        run_quarantine::<0>(&ops)?;
        run_quarantine::<1>(&ops)?;
        run_quarantine::<3>(&ops)?;
        run_quarantine::<64>(&ops)?;
    }

    // parse_frame on any 48 bytes and any payload length: it answers as
    // its documented rules, in their order (checked against a model of
    // them over C's extension walk), and an accepted frame obeys each
    // rule: h_csum 0 or valid, h_len at most 1 MiB and the payload's, a
    // map's and an ack's shape, and the RDMA extensions it reports are
    // entries of the area, the first RDMA and the last RDMA_DEST.
    #[test]
    fn parse_frame_any_bytes((raw, payload_len) in any_frame()) {
        let r = parse_frame(&raw, payload_len);
        let h = Header::decode(&raw).unwrap();
        prop_assert_eq!(
            r.map(|f| (f.kind, (f.rdma_rkey, f.rdma_dest))),
            frame_model(&raw, payload_len)
        );
        let Ok(f) = r else { return Ok(()) };
        prop_assert_eq!(f.hdr, h);
        prop_assert!(h.csum == 0 || verify_checksum(&raw));
        prop_assert!(h.csum == 0 || internet_checksum(&raw) == 0);
        prop_assert!(h.len <= MAX_FRAME_LEN);
        if let Some(n) = payload_len {
            prop_assert_eq!(n, u64::from(h.len));
        }
        let ports0 = h.sport == 0 && h.dport == 0;
        match f.kind {
            FrameKind::CongMap => {
                prop_assert!(h.flags & FLAG_CONG_BITMAP != 0);
                prop_assert!(ports0 && h.len as usize == CONG_MAP_BYTES);
            }
            FrameKind::AckOnly => {
                prop_assert!(h.flags & FLAG_CONG_BITMAP == 0);
                prop_assert!(ports0 && h.len == 0);
            }
            FrameKind::Data => {
                prop_assert!(h.flags & FLAG_CONG_BITMAP == 0);
                prop_assert!(!(ports0 && h.len == 0));
            }
        }
        let (entries, truncated) = c_exthdr_walk(&h.exthdr);
        prop_assert_eq!(truncated, None);
        let rdma: Vec<u32> = entries
            .iter()
            .filter(|e| e.1 == EXTHDR_RDMA)
            .map(|e| be32_at(&h.exthdr, e.0 + 1))
            .collect();
        let dest: Vec<(u32, u32)> = entries
            .iter()
            .filter(|e| e.1 == EXTHDR_RDMA_DEST)
            .map(|e| (be32_at(&h.exthdr, e.0 + 1), be32_at(&h.exthdr, e.0 + 5)))
            .collect();
        prop_assert_eq!(f.rdma_rkey, rdma.first().copied());
        prop_assert_eq!(f.rdma_dest, dest.last().copied());
        prop_assert!(dest.len() <= 1, "two RDMA_DEST in 16 bytes");
        // The same header with a fresh checksum, and unchecked, classify
        // the same (the checksum rule is independent of the others).
        let fresh = parse_frame(&h.with_checksum().encode(), payload_len);
        prop_assert_eq!(fresh.map(|g| (g.kind, g.rdma_rkey, g.rdma_dest)),
                        Ok((f.kind, f.rdma_rkey, f.rdma_dest)));
    }

    // walk_exthdrs on any area: C's walk (16 and above stop, 4 and 7..15
    // empty, NONE ends), refusing exactly where C stops at a truncated
    // known type; it agrees with ExtIter where ExtIter knows every type,
    // and parse_frame carries its answer.
    #[test]
    fn walk_exthdrs_any_area(area in frame_area()) {
        let r = walk_exthdrs(&area);
        prop_assert_eq!(r, exthdr_model(&area));
        if let Err(e) = r {
            let FrameError::TruncatedExt(ty) = e else {
                return Err(TestCaseError::fail(format!("walk refused with {e:?}")));
            };
            prop_assert!(ty != EXTHDR_NONE && ty < EXTHDR_TYPES);
            prop_assert!(exthdr_payload_len(ty) > 0);
            // At a position from which its payload runs past the area.
            let (entries, _) = c_exthdr_walk(&area);
            let at = entries.last().map_or(0, |e| e.0 + 1 + e.2.len());
            prop_assert_eq!(area[at], ty);
            prop_assert!(at + 1 + exthdr_payload_len(ty) > EXTHDR_SPACE);
        }
        // ExtIter walks the same entries until a type it does not know.
        let items: Vec<_> = ExtIter::new(&area).collect();
        // Up to an RDS_EXTHDR_SPORT_IDX: C 6.12 (which walk_exthdrs follows) has no size for
        // it and reads on from its payload byte.
        let known: Vec<Ext> = items
            .iter()
            .map_while(|i| i.ok())
            .take_while(|e| !matches!(e, Ext::SportIdx(_)))
            .collect();
        let sport_idx = items.iter().any(|i| {
            matches!(
                i,
                Ok(Ext::SportIdx(_)) | Err(HeaderError::TruncatedExt(EXTHDR_SPORT_IDX))
            )
        });
        let rkey = known.iter().find_map(|e| match *e {
            Ext::Rdma { rkey } => Some(rkey),
            _ => None,
        });
        let dest = known.iter().rev().find_map(|e| match *e {
            Ext::RdmaDest { rkey, offset } => Some((rkey, offset)),
            _ => None,
        });
        match items.last() {
            _ if sport_idx => {
                // The walks part at the SPORT_IDX: only what came before it is common.
                if let (Ok((k, _)), Some(_)) = (r, rkey) {
                    prop_assert_eq!(k, rkey);
                }
            }
            None | Some(Ok(_)) => prop_assert_eq!(r, Ok((rkey, dest))),
            Some(Err(HeaderError::TruncatedExt(t))) => {
                prop_assert_eq!(r, Err(FrameError::TruncatedExt(*t)));
            }
            Some(Err(HeaderError::UnknownExt(t))) if *t >= EXTHDR_TYPES => {
                prop_assert_eq!(r, Ok((rkey, dest)));
            }
            Some(Err(_)) => {
                // An empty type (4, 7..15): walk_exthdrs goes on past it,
                // so it may only add to what ExtIter saw.
                if let Ok((k, _)) = r {
                    if rkey.is_some() {
                        prop_assert_eq!(k, rkey);
                    }
                }
            }
        }
        let h = Header { exthdr: area, sport: 1, len: 1, ..Header::default() };
        prop_assert_eq!(
            parse_frame(&h.encode(), Some(1)).map(|f| (f.rdma_rkey, f.rdma_dest)),
            r
        );
    }

    // The r_key guessing limit on any sequence of lookups, failures and
    // clock moves (forward, back, by up to 2^64 ns, from any start): it
    // never grants more failed lookups than GUESS_BURST plus GUESS_PER_SEC
    // per second the clock advanced; the first GUESS_BURST failures are
    // never refused; and a refused socket is allowed again 1/64 s later.
    #[test]
    fn guess_limit_any_sequence(t0 in edgy_u64(), ops in guess_ops()) {
        let mut g = GuessLimit::new(t0);
        let mut now = t0;
        let mut latest = t0;
        let mut granted: u128 = 0;
        let mut failures: u64 = 0;
        let mut grants = Vec::new();
        for (step, op, reps) in ops {
            now = u64::try_from((i128::from(now) + step).clamp(0, i128::from(u64::MAX))).unwrap();
            for _ in 0..reps {
            let is_latest = now >= latest;
            latest = latest.max(now);
            let allowed = match op {
                GuessOp::Lookup | GuessOp::Allows => g.allows(now),
                GuessOp::Failed => false,
            };
            if failures < GUESS_BURST && op != GuessOp::Failed {
                prop_assert!(allowed, "refused after {} failures", failures);
            }
            if !allowed && op != GuessOp::Failed && is_latest {
                if let Some(later) = now.checked_add(1_000_000_000 / GUESS_PER_SEC) {
                    let mut g2 = g;
                    prop_assert!(g2.allows(later), "still refused 1/64 s later");
                }
            }
            match op {
                GuessOp::Lookup if allowed => {
                    g.failed(now);
                    granted += 1;
                    failures += 1;
                    grants.push(latest);
                }
                GuessOp::Failed => {
                    g.failed(now);
                    failures += 1;
                }
                _ => {}
            }
            let elapsed = u128::from(latest - t0);
            let most = u128::from(GUESS_BURST)
                + elapsed * u128::from(GUESS_PER_SEC) / 1_000_000_000;
            prop_assert!(granted <= most, "{} granted in {} ns", granted, elapsed);
            }
        }
        // The same in every window between two grants i <= j: a token
        // bucket grants at most a burst plus the refill of the window (the
        // clock as the limit saw it), (j - i + 1) * 1e9 <= GUESS_BURST * 1e9
        // + (t_j - t_i) * GUESS_PER_SEC, i.e. A(j) - B(i) <= GUESS_BURST * 1e9
        // with A(j) = (j + 1) * 1e9 - t_j * GUESS_PER_SEC and
        // B(i) = i * 1e9 - t_i * GUESS_PER_SEC: checked against the least
        // B(i) so far.
        let per = i128::from(GUESS_PER_SEC);
        let mut least_b = i128::MAX;
        for (j, &t) in grants.iter().enumerate() {
            let j = j as i128;
            least_b = least_b.min(j * 1_000_000_000 - i128::from(t) * per);
            let a = (j + 1) * 1_000_000_000 - i128::from(t) * per;
            prop_assert!(a - least_b <= i128::from(GUESS_BURST) * 1_000_000_000,
                         "grant {} at {} ns: more than a burst plus the refill", j, t);
        }
    }

    // The reconnect backoff on any sequence of reconnects (any sysctls,
    // any random number, from any ceiling) and resets: the first delay
    // after a reset is 0 and sets the ceiling to min (at least 1); every
    // other is rand % ceiling, below the ceiling before it advanced; the
    // ceiling then doubles, saturating, to at most max (at least 1).
    #[test]
    fn backoff_any_sequence(start in prop_oneof![Just(0u64), edgy_u64()],
                            ops in prop::collection::vec(
                                prop::option::of((backoff_sysctl(), backoff_sysctl(),
                                                  edgy_u64())),
                                0..40)) {
        let mut b = Backoff { ceiling: start };
        for op in ops {
            let Some((min, max, rand)) = op else {
                b.reset();
                prop_assert_eq!(b, Backoff::default());
                continue;
            };
            let before = b.ceiling;
            let d = b.next_delay(min, max, rand);
            if before == 0 {
                prop_assert_eq!(d, 0);
                prop_assert_eq!(b.ceiling, min.max(1));
            } else {
                prop_assert!(d < before);
                prop_assert_eq!(d, rand % before);
                prop_assert_eq!(b.ceiling, before.saturating_mul(2).min(max.max(1)));
                prop_assert!(b.ceiling <= max.max(1));
            }
            prop_assert!(b.ceiling >= 1);
        }
    }
}

/// Runs `ops` on an `OpTracker<W>`: `None` issues, `Some(Err(i))` completes
/// the `i`-th outstanding id (modulo their number), `Some(Ok(id))`
/// completes `id` whatever it is.
fn run_tracker<const W: usize>(ops: &[Option<Result<u64, usize>>]) -> Result<(), TestCaseError> {
    let window = W as u64 * 64;
    let mut t = OpTracker::<W>::new();
    let mut next = 1u64;
    let mut done = BTreeSet::new();
    let mut mark = 0u64;
    for op in ops {
        let before = t.clone();
        match *op {
            None => {
                let can = next - mark <= window;
                prop_assert_eq!(t.can_issue(), can);
                if can {
                    prop_assert_eq!(t.issue(), Some(next));
                    next += 1;
                } else {
                    prop_assert_eq!(t.issue(), None);
                    prop_assert_eq!(&t, &before);
                }
            }
            Some(target) => {
                let id = match target {
                    Ok(id) => id,
                    Err(i) => {
                        let out: Vec<u64> =
                            (mark + 1..next).filter(|x| !done.contains(x)).collect();
                        if out.is_empty() {
                            continue;
                        }
                        out[i % out.len()]
                    }
                };
                let valid = id > mark && id < next && !done.contains(&id);
                let old_mark = mark;
                if valid {
                    done.insert(id);
                    while done.remove(&(mark + 1)) {
                        mark += 1;
                    }
                }
                prop_assert_eq!(t.complete(id), mark != old_mark);
                if !valid {
                    prop_assert_eq!(&t, &before, "completing {} changed the tracker", id);
                }
            }
        }
        prop_assert!(t.mark() >= before.mark(), "the mark went back");
        prop_assert_eq!(t.mark(), mark);
        prop_assert_eq!(t.next_id(), next);
        prop_assert!(t.mark() < t.next_id());
        prop_assert!(t.next_id() - t.mark() <= window + 1, "outside the window");
        prop_assert_eq!(t.outstanding(), next - mark - 1 - done.len() as u64);
        for id in [0, mark, mark + 1, next - 1, next, u64::MAX] {
            let want = if id <= mark {
                BarrierState::Reached
            } else if id >= next {
                BarrierState::NeverIssued
            } else {
                BarrierState::Pending
            };
            prop_assert_eq!(t.barrier(id), want);
        }
    }
    Ok(())
}

/// Runs `ops` (`(true, k)` retires `k`, `(false, k)` checks it) on a
/// `Quarantine<N>` and a FIFO model.
fn run_quarantine<const N: usize>(ops: &[(bool, u32)]) -> Result<(), TestCaseError> {
    let mut q = Quarantine::<N>::new();
    let mut model = VecDeque::new();
    let live = |k: u32| k % 5 == 1;
    for &(retire, k) in ops {
        if retire {
            model.push_back(k);
            let evicted = if model.len() > N {
                model.pop_front()
            } else {
                None
            };
            prop_assert_eq!(q.retire(k), evicted);
        } else {
            prop_assert_eq!(q.contains(k), model.contains(&k));
            prop_assert_eq!(
                key_acceptable(k, live, &q),
                k != 0 && !live(k) && !model.contains(&k)
            );
        }
        prop_assert!(q.len() <= N && q.len() == model.len());
        prop_assert_eq!(q.capacity(), N);
        prop_assert_eq!(
            q.iter().collect::<Vec<_>>(),
            model.iter().copied().collect::<Vec<_>>()
        );
    }
    Ok(())
}
