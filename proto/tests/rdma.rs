//! The RDMA ABI (include/uapi/linux/rds.h): struct layouts, cookies
//! (net/rds/rds.h rds_rdma_make_cookie, rds_rdma_cookie_key,
//! rds_rdma_cookie_offset), rds_pages_in_vec (net/rds/rdma.c), the atomic
//! cmsg mapping of rds_cmsg_atomic (net/rds/rdma.c) and the IB masked
//! atomic semantics.

use proptest::prelude::*;
use rds_proto::{
    cmsgs, cookie_key, cookie_offset, encode_cmsg, make_cookie, rdma_bytes, AtomicArgs, AtomicOp,
    FreeMrArgs, GetMrArgs, GetMrForDestArgs, RdmaArgs, RdmaNotify, RdsIovec, ATOMIC_ARGS_LEN,
    FREE_MR_ARGS_LEN, GET_MR_ARGS_LEN, GET_MR_FOR_DEST_ARGS_LEN, MAX_MSG_SIZE, PAGE_SIZE,
    RDMA_ARGS_LEN, RDMA_NOTIFY_LEN, RDS_CMSG_ATOMIC_CSWP, RDS_CMSG_ATOMIC_FADD,
    RDS_CMSG_MASKED_ATOMIC_CSWP, RDS_CMSG_MASKED_ATOMIC_FADD, RDS_CMSG_RDMA_ARGS, RDS_IOVEC_LEN,
    RDS_RDMA_CANCELED, RDS_RDMA_DONTWAIT, RDS_RDMA_DROPPED, RDS_RDMA_FENCE, RDS_RDMA_INVALIDATE,
    RDS_RDMA_NOTIFY_ME, RDS_RDMA_OTHER_ERROR, RDS_RDMA_READWRITE, RDS_RDMA_REMOTE_ERROR,
    RDS_RDMA_SILENT, RDS_RDMA_SUCCESS, RDS_RDMA_USE_ONCE, SOCKADDR_STORAGE_LEN, SOL_RDS,
    UIO_MAXIOV,
};

const KINDS: [i32; 4] = [
    RDS_CMSG_ATOMIC_FADD,
    RDS_CMSG_MASKED_ATOMIC_FADD,
    RDS_CMSG_ATOMIC_CSWP,
    RDS_CMSG_MASKED_ATOMIC_CSWP,
];

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

// --- constants and sizes ------------------------------------------------------

#[test]
fn constants_match_rds_h() {
    assert_eq!(RDS_RDMA_READWRITE, 0x1);
    assert_eq!(RDS_RDMA_FENCE, 0x2);
    assert_eq!(RDS_RDMA_INVALIDATE, 0x4);
    assert_eq!(RDS_RDMA_USE_ONCE, 0x8);
    assert_eq!(RDS_RDMA_DONTWAIT, 0x10);
    assert_eq!(RDS_RDMA_NOTIFY_ME, 0x20);
    assert_eq!(RDS_RDMA_SILENT, 0x40);
    assert_eq!(RDS_RDMA_SUCCESS, 0);
    assert_eq!(RDS_RDMA_REMOTE_ERROR, 1);
    assert_eq!(RDS_RDMA_CANCELED, 2);
    assert_eq!(RDS_RDMA_DROPPED, 3);
    assert_eq!(RDS_RDMA_OTHER_ERROR, 4);
    assert_eq!(UIO_MAXIOV, 1024);
    assert_eq!(PAGE_SIZE, 4096);
    assert_eq!(MAX_MSG_SIZE, 1 << 20);
}

/// sizeof() of each struct on x86-64, as gcc reports for the 6.12 uapi
/// header.
#[test]
fn sizes() {
    assert_eq!(RDS_IOVEC_LEN, 16);
    assert_eq!(GET_MR_ARGS_LEN, 32);
    assert_eq!(GET_MR_FOR_DEST_ARGS_LEN, 160);
    assert_eq!(SOCKADDR_STORAGE_LEN, 128);
    assert_eq!(FREE_MR_ARGS_LEN, 16);
    assert_eq!(RDMA_ARGS_LEN, 56);
    assert_eq!(ATOMIC_ARGS_LEN, 72);
    assert_eq!(RDMA_NOTIFY_LEN, 16);
    assert_eq!(RdsIovec::default().encode().len(), RDS_IOVEC_LEN);
    assert_eq!(GetMrArgs::default().encode().len(), GET_MR_ARGS_LEN);
    assert_eq!(
        GetMrForDestArgs::default().encode().len(),
        GET_MR_FOR_DEST_ARGS_LEN
    );
    assert_eq!(FreeMrArgs::default().encode().len(), FREE_MR_ARGS_LEN);
    assert_eq!(RdmaArgs::default().encode().len(), RDMA_ARGS_LEN);
    assert_eq!(RdmaNotify::default().encode().len(), RDMA_NOTIFY_LEN);
}

/// offsetof() of each field, as gcc reports for the 6.12 uapi header.
#[test]
fn offsets() {
    let v = RdsIovec { addr: 1, bytes: 2 }.encode();
    assert_eq!((u64_at(&v, 0), u64_at(&v, 8)), (1, 2));

    let g = GetMrArgs {
        vec: RdsIovec { addr: 1, bytes: 2 },
        cookie_addr: 3,
        flags: 4,
    }
    .encode();
    assert_eq!(
        [0, 8, 16, 24].map(|o| u64_at(&g, o)),
        [1, 2, 3, 4],
        "vec 0, cookie_addr 16, flags 24"
    );

    let mut dest = [0u8; 128];
    dest[0] = 2;
    dest[127] = 0xee;
    let gd = GetMrForDestArgs {
        dest,
        vec: RdsIovec { addr: 1, bytes: 2 },
        cookie_addr: 3,
        flags: 4,
    }
    .encode();
    assert_eq!(&gd[..128], &dest[..]);
    assert_eq!(
        [128, 136, 144, 152].map(|o| u64_at(&gd, o)),
        [1, 2, 3, 4],
        "vec 128, cookie_addr 144, flags 152"
    );

    let f = FreeMrArgs {
        cookie: 1,
        flags: 2,
    }
    .encode();
    assert_eq!((u64_at(&f, 0), u64_at(&f, 8)), (1, 2));

    let r = RdmaArgs {
        cookie: 1,
        remote_vec: RdsIovec { addr: 2, bytes: 3 },
        local_vec_addr: 4,
        nr_local: 5,
        flags: 6,
        user_token: 7,
    }
    .encode();
    assert_eq!(
        [0, 8, 16, 24, 32, 40, 48].map(|o| u64_at(&r, o)),
        [1, 2, 3, 4, 5, 6, 7]
    );

    let a = AtomicArgs {
        cookie: 1,
        local_addr: 2,
        remote_addr: 3,
        op: AtomicOp::Cswp {
            compare: 4,
            swap: 5,
            compare_mask: 6,
            swap_mask: 7,
        },
        flags: 8,
        user_token: 9,
    }
    .encode(RDS_CMSG_MASKED_ATOMIC_CSWP)
    .unwrap();
    assert_eq!(
        [0, 8, 16, 24, 32, 40, 48, 56, 64].map(|o| u64_at(&a, o)),
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
        "m_cswp: compare 24, swap 32, compare_mask 40, swap_mask 48; flags 56, user_token 64"
    );
    let a = AtomicArgs {
        cookie: 1,
        local_addr: 2,
        remote_addr: 3,
        op: AtomicOp::Fadd {
            add: 4,
            nocarry_mask: 5,
        },
        flags: 8,
        user_token: 9,
    }
    .encode(RDS_CMSG_MASKED_ATOMIC_FADD)
    .unwrap();
    assert_eq!(
        [24, 32, 40, 48, 56, 64].map(|o| u64_at(&a, o)),
        [4, 5, 0, 0, 8, 9],
        "m_fadd: add 24, nocarry_mask 32; unused union bytes zero"
    );

    let n = RdmaNotify {
        user_token: 0x1122_3344_5566_7788,
        status: -2,
    }
    .encode();
    assert_eq!(u64_at(&n, 0), 0x1122_3344_5566_7788);
    assert_eq!(i32::from_ne_bytes(n[8..12].try_into().unwrap()), -2);
    assert_eq!(&n[12..], &[0; 4], "tail padding zeroed");
}

#[test]
fn decode_needs_the_whole_struct() {
    assert_eq!(RdsIovec::decode(&[0; 15]), None);
    assert_eq!(GetMrArgs::decode(&[0; 31]), None);
    assert_eq!(GetMrForDestArgs::decode(&[0; 159]), None);
    assert_eq!(FreeMrArgs::decode(&[0; 15]), None);
    assert_eq!(RdmaArgs::decode(&[0; 55]), None);
    assert_eq!(RdmaNotify::decode(&[0; 11]), None);
    for k in KINDS {
        assert_eq!(AtomicArgs::decode(k, &[0; 71]), None, "kind {k}");
        assert!(AtomicArgs::decode(k, &[0; 72]).is_some(), "kind {k}");
    }
    // Longer input: the tail is ignored.
    let mut b = RdmaArgs::default().encode().to_vec();
    b.extend_from_slice(&[0xff; 9]);
    assert_eq!(RdmaArgs::decode(&b), Some(RdmaArgs::default()));
    assert_eq!(RdmaNotify::decode(&[0; 12]), Some(RdmaNotify::default()));
}

#[test]
fn get_mr_for_dest_is_get_mr() {
    // rds_get_mr_for_dest copies vec, cookie_addr and flags into a
    // struct rds_get_mr_args and ignores dest_addr.
    let d = GetMrForDestArgs {
        dest: [7; 128],
        vec: RdsIovec {
            addr: 0x1000,
            bytes: 10,
        },
        cookie_addr: 0x2000,
        flags: RDS_RDMA_USE_ONCE,
    };
    let g = d.as_get_mr_args();
    assert_eq!(g.vec, d.vec);
    assert_eq!(g.cookie_addr, 0x2000);
    assert_eq!(g.flags, RDS_RDMA_USE_ONCE);
    assert_eq!(&d.encode()[128..], &g.encode()[..]);
}

#[test]
fn rdma_args_agree_with_rdma_bytes() {
    // cmsg.rs's rds_rdma_bytes reads remote_vec.bytes at offset 16.
    let a = RdmaArgs {
        remote_vec: RdsIovec {
            addr: 0,
            bytes: 12345,
        },
        ..RdmaArgs::default()
    };
    let mut buf = [0u8; 128];
    let n = encode_cmsg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &a.encode(), &mut buf).unwrap();
    assert_eq!(rdma_bytes(&buf[..n]), Ok(12345));
    let c = cmsgs(&buf[..n]).next().unwrap().unwrap();
    assert_eq!(RdmaArgs::decode(c.data), Some(a));
}

// --- cookies ------------------------------------------------------------------

#[test]
fn cookie_layout() {
    // rds_rdma_make_cookie: r_key | (u64)offset << 32.
    assert_eq!(make_cookie(0x1234_5678, 0xabc), 0x0000_0abc_1234_5678);
    assert_eq!(cookie_key(0x0000_0abc_1234_5678), 0x1234_5678);
    assert_eq!(cookie_offset(0x0000_0abc_1234_5678), 0xabc);
    assert_eq!(make_cookie(0, 0), 0);
    assert_eq!(make_cookie(u32::MAX, u32::MAX), u64::MAX);
}

#[test]
fn op_remote_addr_adds_the_offset() {
    // rds_cmsg_rdma_args / rds_cmsg_atomic:
    // op_remote_addr = remote addr + rds_rdma_cookie_offset(cookie).
    let r = RdmaArgs {
        cookie: make_cookie(77, 100),
        remote_vec: RdsIovec { addr: 20, bytes: 8 },
        flags: RDS_RDMA_READWRITE,
        ..RdmaArgs::default()
    };
    assert_eq!(r.op_rkey(), 77);
    assert_eq!(r.op_remote_addr(), 120);
    assert!(r.is_write());
    let r = RdmaArgs {
        cookie: make_cookie(1, 1),
        remote_vec: RdsIovec {
            addr: u64::MAX,
            bytes: 0,
        },
        ..RdmaArgs::default()
    };
    assert_eq!(r.op_remote_addr(), 0, "wraps as C's u64 does");
    assert!(!r.is_write());
    let a = AtomicArgs {
        cookie: make_cookie(5, 4000),
        local_addr: 0,
        remote_addr: 96,
        op: AtomicOp::Fadd {
            add: 1,
            nocarry_mask: 0,
        },
        flags: 0,
        user_token: 0,
    };
    assert_eq!(a.op_rkey(), 5);
    assert_eq!(a.op_remote_addr(), 4096);
}

// --- rds_pages_in_vec -----------------------------------------------------------

fn iov(addr: u64, bytes: u64) -> RdsIovec {
    RdsIovec { addr, bytes }
}

#[test]
fn pages_in_vec() {
    assert_eq!(iov(0, 0).pages(), 0, "empty");
    assert_eq!(iov(0x1000, 0).pages(), 0, "empty");
    assert_eq!(iov(0, 1).pages(), 1);
    assert_eq!(iov(0, 4096).pages(), 1);
    assert_eq!(iov(0, 4097).pages(), 2);
    assert_eq!(iov(4095, 1).pages(), 1);
    assert_eq!(iov(4095, 2).pages(), 2);
    assert_eq!(iov(100, 8192).pages(), 3);
    // bytes is at most UINT_MAX.
    assert_eq!(iov(0, u64::from(u32::MAX)).pages(), 1 << 20);
    assert_eq!(iov(4095, u64::from(u32::MAX)).pages(), (1 << 20) + 1);
    assert_eq!(iov(0, u64::from(u32::MAX) + 1).pages(), 0);
    // addr + bytes wraps.
    assert_eq!(iov(u64::MAX, 1).pages(), 0);
    assert_eq!(iov(1, u64::MAX).pages(), 0);
    // Ends in the last byte of the address space: C's
    // addr + bytes + PAGE_SIZE - 1 wraps, but the truncation to
    // unsigned int makes the result right.
    assert_eq!(iov(u64::MAX - 1, 1).pages(), 1);
    assert_eq!(iov(u64::MAX - 4096, 4096).pages(), 2);
    assert_eq!(c_pages_in_vec(iov(u64::MAX - 4096, 4096)), 2);
}

/// rds_pages_in_vec transcribed: u64 wrapping arithmetic, truncated to
/// unsigned int.
fn c_pages_in_vec(v: RdsIovec) -> u64 {
    if v.addr.wrapping_add(v.bytes) <= v.addr || v.bytes > u64::from(u32::MAX) {
        return 0;
    }
    let r = (v.addr.wrapping_add(v.bytes).wrapping_add(4095) >> 12).wrapping_sub(v.addr >> 12);
    u64::from(r as u32)
}

/// The mathematical page count, in u128.
fn model_pages(v: RdsIovec) -> u64 {
    let (a, b) = (u128::from(v.addr), u128::from(v.bytes));
    if b == 0 || a + b > u128::from(u64::MAX) || b > u128::from(u32::MAX) {
        return 0;
    }
    let p = (a + b).div_ceil(4096) - a / 4096;
    u64::try_from(p).unwrap()
}

/// Addresses and lengths near the interesting boundaries, plus anything.
fn edgy_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..10_000,
        (0u64..10_000).prop_map(|d| u64::MAX - d),
        (0u64..10_000).prop_map(|d| u64::from(u32::MAX).wrapping_add(d).wrapping_sub(5000)),
        (0u64..300).prop_map(|p| p * 4096),
        (0u64..300, 0u64..4096).prop_map(|(p, o)| p * 4096 + o),
    ]
}

// --- masked atomics ---------------------------------------------------------------

/// Masked fetch-and-add bit by bit, as Linux commit 5e80ba8ff0bd describes
/// MFetchAdd: a ripple-carry adder whose carry out of bit i is dropped when
/// bit i of the boundary mask is set.
fn model_fadd(old: u64, add: u64, mask: u64) -> u64 {
    let mut out = 0u64;
    let mut carry = 0u64;
    for i in 0..64 {
        let s = ((old >> i) & 1) + ((add >> i) & 1) + carry;
        out |= (s & 1) << i;
        carry = s >> 1;
        if (mask >> i) & 1 == 1 {
            carry = 0;
        }
    }
    out
}

/// Masked fetch-and-add field by field: the fields end at the set mask bits
/// (and at bit 63); each is an independent addition modulo 2^width.
fn model_fadd_fields(old: u64, add: u64, mask: u64) -> u64 {
    let mut out = 0u64;
    let mut lo = 0u32;
    for hi in 0..64u32 {
        if (mask >> hi) & 1 == 1 || hi == 63 {
            let width = hi - lo + 1;
            let m = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            let f = (((old >> lo) & m) + ((add >> lo) & m)) & m;
            out |= f << lo;
            lo = hi + 1;
        }
    }
    out
}

fn model_cswp(old: u64, compare: u64, swap: u64, cmask: u64, smask: u64) -> u64 {
    let mut out = old;
    let matches = (0..64).all(|i| (cmask >> i) & 1 == 0 || (old >> i) & 1 == (compare >> i) & 1);
    if matches {
        for i in 0..64 {
            if (smask >> i) & 1 == 1 {
                out = (out & !(1 << i)) | (swap & (1 << i));
            }
        }
    }
    out
}

#[test]
fn fadd_examples() {
    let plain = |add| AtomicOp::Fadd {
        add,
        nocarry_mask: 0,
    };
    assert_eq!(plain(1).apply(41), 42);
    assert_eq!(plain(1).apply(u64::MAX), 0, "wraps");
    assert_eq!(plain(u64::MAX).apply(5), 4, "adding -1");
    // Two 32-bit counters: the low one wraps without touching the high one.
    let two32 = AtomicOp::Fadd {
        add: 1,
        nocarry_mask: 0x8000_0000_8000_0000,
    };
    assert_eq!(two32.apply(0x0000_0001_ffff_ffff), 0x0000_0001_0000_0000);
    assert_eq!(plain(1).apply(0x0000_0001_ffff_ffff), 0x0000_0002_0000_0000);
    let both = AtomicOp::Fadd {
        add: 0x0000_0003_0000_0001,
        nocarry_mask: 0x8000_0000_8000_0000,
    };
    assert_eq!(both.apply(0xffff_ffff_ffff_ffff), 0x0000_0002_0000_0000);
    // Eight byte counters.
    let bytes = AtomicOp::Fadd {
        add: 0x0101_0101_0101_0101,
        nocarry_mask: 0x8080_8080_8080_8080,
    };
    assert_eq!(bytes.apply(0x00ff_00ff_7f80_fe01), 0x0100_0100_8081_ff02);
    // Every bit a boundary: XOR.
    let xor = AtomicOp::Fadd {
        add: 0xf0f0,
        nocarry_mask: u64::MAX,
    };
    assert_eq!(xor.apply(0xff00), 0x0ff0);
}

#[test]
fn cswp_examples() {
    let plain = |compare, swap| AtomicOp::Cswp {
        compare,
        swap,
        compare_mask: !0,
        swap_mask: !0,
    };
    assert_eq!(plain(5, 9).apply(5), 9);
    assert_eq!(plain(5, 9).apply(6), 6, "no match: unchanged");
    // Compare the low byte only, swap the high byte only.
    let m = AtomicOp::Cswp {
        compare: 0x42,
        swap: 0xab00_0000_0000_0000,
        compare_mask: 0xff,
        swap_mask: 0xff00_0000_0000_0000,
    };
    assert_eq!(m.apply(0x1234_0000_0000_0042), 0xab34_0000_0000_0042);
    assert_eq!(m.apply(0x1234_0000_0000_0043), 0x1234_0000_0000_0043);
    // Empty compare mask: always swaps.
    let always = AtomicOp::Cswp {
        compare: 1,
        swap: 0xffff,
        compare_mask: 0,
        swap_mask: 0xff,
    };
    assert_eq!(always.apply(0x1200), 0x12ff);
}

// --- rds_cmsg_atomic's mapping ------------------------------------------------------

fn raw_atomic(union: [u64; 4]) -> [u8; 72] {
    let mut b = [0u8; 72];
    for (i, v) in [1u64, 8, 16].iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    }
    for (i, v) in union.iter().enumerate() {
        b[24 + i * 8..32 + i * 8].copy_from_slice(&v.to_ne_bytes());
    }
    b[56..64].copy_from_slice(&RDS_RDMA_NOTIFY_ME.to_ne_bytes());
    b[64..72].copy_from_slice(&99u64.to_ne_bytes());
    b
}

#[test]
fn atomic_cmsg_mapping() {
    let raw = raw_atomic([10, 20, 30, 40]);
    let dec = |k| AtomicArgs::decode(k, &raw).unwrap();
    // Common fields.
    let a = dec(RDS_CMSG_ATOMIC_FADD);
    assert_eq!(
        (a.cookie, a.local_addr, a.remote_addr, a.flags, a.user_token),
        (1, 8, 16, RDS_RDMA_NOTIFY_ME, 99)
    );
    // FADD: fadd.add, nocarry_mask 0.
    assert_eq!(
        a.op,
        AtomicOp::Fadd {
            add: 10,
            nocarry_mask: 0
        }
    );
    // MASKED_FADD: m_fadd.add, m_fadd.nocarry_mask.
    assert_eq!(
        dec(RDS_CMSG_MASKED_ATOMIC_FADD).op,
        AtomicOp::Fadd {
            add: 10,
            nocarry_mask: 20
        }
    );
    // CSWP: cswp.compare, cswp.swap, masks ~0.
    assert_eq!(
        dec(RDS_CMSG_ATOMIC_CSWP).op,
        AtomicOp::Cswp {
            compare: 10,
            swap: 20,
            compare_mask: !0,
            swap_mask: !0
        }
    );
    // MASKED_CSWP: all four.
    assert_eq!(
        dec(RDS_CMSG_MASKED_ATOMIC_CSWP).op,
        AtomicOp::Cswp {
            compare: 10,
            swap: 20,
            compare_mask: 30,
            swap_mask: 40
        }
    );
    // Not an atomic type.
    for k in [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 64, -1] {
        assert_eq!(AtomicArgs::decode(k, &raw), None, "kind {k}");
    }
}

#[test]
fn atomic_encode_kinds() {
    let mut a = AtomicArgs::decode(RDS_CMSG_ATOMIC_FADD, &raw_atomic([10, 0, 0, 0])).unwrap();
    assert_eq!(a.natural_kind(), RDS_CMSG_ATOMIC_FADD);
    assert_eq!(
        a.encode(RDS_CMSG_ATOMIC_FADD),
        Some(raw_atomic([10, 0, 0, 0]))
    );
    assert_eq!(
        a.encode(RDS_CMSG_MASKED_ATOMIC_FADD),
        Some(raw_atomic([10, 0, 0, 0]))
    );
    assert_eq!(a.encode(RDS_CMSG_ATOMIC_CSWP), None, "wrong operation");
    assert_eq!(a.encode(RDS_CMSG_RDMA_ARGS), None, "not atomic");
    a.op = AtomicOp::Fadd {
        add: 10,
        nocarry_mask: 1,
    };
    assert_eq!(a.natural_kind(), RDS_CMSG_MASKED_ATOMIC_FADD);
    assert_eq!(a.encode(RDS_CMSG_ATOMIC_FADD), None, "would lose the mask");
    a.op = AtomicOp::Cswp {
        compare: 1,
        swap: 2,
        compare_mask: !0,
        swap_mask: !0,
    };
    assert_eq!(a.natural_kind(), RDS_CMSG_ATOMIC_CSWP);
    assert_eq!(
        a.encode(RDS_CMSG_ATOMIC_CSWP),
        Some(raw_atomic([1, 2, 0, 0]))
    );
    assert_eq!(
        a.encode(RDS_CMSG_MASKED_ATOMIC_CSWP),
        Some(raw_atomic([1, 2, !0, !0]))
    );
    assert_eq!(a.encode(RDS_CMSG_MASKED_ATOMIC_FADD), None);
    a.op = AtomicOp::Cswp {
        compare: 1,
        swap: 2,
        compare_mask: !0,
        swap_mask: 7,
    };
    assert_eq!(a.natural_kind(), RDS_CMSG_MASKED_ATOMIC_CSWP);
    assert_eq!(a.encode(RDS_CMSG_ATOMIC_CSWP), None);
}

#[test]
fn notify_round_trip() {
    let n = RdmaNotify {
        user_token: 5,
        status: RDS_RDMA_DROPPED,
    };
    assert_eq!(RdmaNotify::decode(&n.encode()), Some(n));
}

// --- properties -----------------------------------------------------------------------

fn any_iovec() -> impl Strategy<Value = RdsIovec> {
    (edgy_u64(), edgy_u64()).prop_map(|(addr, bytes)| RdsIovec { addr, bytes })
}

fn any_atomic_op() -> impl Strategy<Value = AtomicOp> {
    prop_oneof![
        (any::<u64>(), any::<u64>())
            .prop_map(|(add, nocarry_mask)| AtomicOp::Fadd { add, nocarry_mask }),
        any::<u64>().prop_map(|add| AtomicOp::Fadd {
            add,
            nocarry_mask: 0
        }),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(compare, swap, compare_mask, swap_mask)| AtomicOp::Cswp {
                compare,
                swap,
                compare_mask,
                swap_mask
            }
        ),
        (any::<u64>(), any::<u64>()).prop_map(|(compare, swap)| AtomicOp::Cswp {
            compare,
            swap,
            compare_mask: !0,
            swap_mask: !0
        }),
    ]
}

fn any_atomic_args() -> impl Strategy<Value = AtomicArgs> {
    (
        any::<[u64; 3]>(),
        any_atomic_op(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |([cookie, local_addr, remote_addr], op, flags, user_token)| AtomicArgs {
                cookie,
                local_addr,
                remote_addr,
                op,
                flags,
                user_token,
            },
        )
}

proptest! {
    #[test]
    fn pages_match_c_and_math(v in any_iovec()) {
        prop_assert_eq!(v.pages(), c_pages_in_vec(v));
        prop_assert_eq!(v.pages(), model_pages(v));
        prop_assert!(v.pages() <= (1 << 20) + 1);
    }

    #[test]
    fn cookie_round_trip(k in any::<u32>(), o in any::<u32>(), c in any::<u64>()) {
        let made = make_cookie(k, o);
        prop_assert_eq!(cookie_key(made), k);
        prop_assert_eq!(cookie_offset(made), o);
        prop_assert_eq!(make_cookie(cookie_key(c), cookie_offset(c)), c);
        prop_assert_eq!(u64::from(cookie_key(c)), c & 0xffff_ffff);
        prop_assert_eq!(u64::from(cookie_offset(c)), c >> 32);
    }

    #[test]
    fn iovec_round_trip(v in any::<[u64; 2]>(), raw in any::<[u8; 16]>()) {
        let v = RdsIovec { addr: v[0], bytes: v[1] };
        prop_assert_eq!(RdsIovec::decode(&v.encode()), Some(v));
        prop_assert_eq!(RdsIovec::decode(&raw).unwrap().encode(), raw);
    }

    #[test]
    fn get_mr_round_trip(f in any::<[u64; 4]>(), raw in any::<[u8; 32]>()) {
        let a = GetMrArgs {
            vec: RdsIovec { addr: f[0], bytes: f[1] },
            cookie_addr: f[2],
            flags: f[3],
        };
        prop_assert_eq!(GetMrArgs::decode(&a.encode()), Some(a));
        prop_assert_eq!(GetMrArgs::decode(&raw).unwrap().encode(), raw);
    }

    #[test]
    fn get_mr_for_dest_round_trip(
        dest in proptest::collection::vec(any::<u8>(), 128),
        f in any::<[u64; 4]>(),
    ) {
        let a = GetMrForDestArgs {
            dest: dest.try_into().unwrap(),
            vec: RdsIovec { addr: f[0], bytes: f[1] },
            cookie_addr: f[2],
            flags: f[3],
        };
        let e = a.encode();
        prop_assert_eq!(GetMrForDestArgs::decode(&e), Some(a));
        prop_assert_eq!(GetMrForDestArgs::decode(&e).unwrap().encode(), e);
    }

    #[test]
    fn free_mr_round_trip(f in any::<[u64; 2]>(), raw in any::<[u8; 16]>()) {
        let a = FreeMrArgs { cookie: f[0], flags: f[1] };
        prop_assert_eq!(FreeMrArgs::decode(&a.encode()), Some(a));
        prop_assert_eq!(FreeMrArgs::decode(&raw).unwrap().encode(), raw);
    }

    #[test]
    fn rdma_args_round_trip(f in any::<[u64; 7]>(), raw in any::<[u8; 56]>()) {
        let a = RdmaArgs {
            cookie: f[0],
            remote_vec: RdsIovec { addr: f[1], bytes: f[2] },
            local_vec_addr: f[3],
            nr_local: f[4],
            flags: f[5],
            user_token: f[6],
        };
        prop_assert_eq!(RdmaArgs::decode(&a.encode()), Some(a));
        prop_assert_eq!(RdmaArgs::decode(&raw).unwrap().encode(), raw);
    }

    #[test]
    fn atomic_round_trip(a in any_atomic_args(), kind in proptest::sample::select(&KINDS[..])) {
        // The natural kind always encodes, and decodes back.
        let e = a.encode(a.natural_kind()).unwrap();
        prop_assert_eq!(AtomicArgs::decode(a.natural_kind(), &e), Some(a));
        // Any kind that encodes decodes back.
        if let Some(e) = a.encode(kind) {
            prop_assert_eq!(AtomicArgs::decode(kind, &e), Some(a));
        }
    }

    #[test]
    fn atomic_decode_reencodes(kind in proptest::sample::select(&KINDS[..]),
                               raw in proptest::collection::vec(any::<u8>(), 72..100)) {
        let a = AtomicArgs::decode(kind, &raw).unwrap();
        let e = a.encode(kind).unwrap();
        // The common fields and the union words the kind uses are kept.
        let used = match kind {
            RDS_CMSG_ATOMIC_FADD => 1,
            RDS_CMSG_MASKED_ATOMIC_FADD | RDS_CMSG_ATOMIC_CSWP => 2,
            _ => 4,
        };
        prop_assert_eq!(&e[..24 + used * 8], &raw[..24 + used * 8]);
        prop_assert!(e[24 + used * 8..56].iter().all(|&b| b == 0));
        prop_assert_eq!(&e[56..72], &raw[56..72]);
    }

    #[test]
    fn notify_round_trip_prop(user_token in any::<u64>(), status in any::<i32>()) {
        let n = RdmaNotify { user_token, status };
        let e = n.encode();
        prop_assert_eq!(RdmaNotify::decode(&e), Some(n));
        prop_assert_eq!(&e[12..], &[0u8; 4][..]);
    }

    #[test]
    fn fadd_matches_bitwise_model(old in any::<u64>(), add in any::<u64>(), mask in any::<u64>()) {
        let op = AtomicOp::Fadd { add, nocarry_mask: mask };
        let got = op.apply(old);
        prop_assert_eq!(got, model_fadd(old, add, mask));
        prop_assert_eq!(got, model_fadd_fields(old, add, mask));
        let plain = AtomicOp::Fadd { add, nocarry_mask: 0 };
        prop_assert_eq!(plain.apply(old), old.wrapping_add(add));
    }

    #[test]
    fn fadd_sparse_masks(old in any::<u64>(), add in any::<u64>(),
                         bits in proptest::collection::vec(0u32..64, 0..4)) {
        // Few boundaries, so carries do run across long fields.
        let mask = bits.iter().fold(0u64, |m, b| m | 1 << b);
        let op = AtomicOp::Fadd { add, nocarry_mask: mask };
        prop_assert_eq!(op.apply(old), model_fadd(old, add, mask));
    }

    #[test]
    fn cswp_matches_bitwise_model(old in any::<u64>(), compare in any::<u64>(),
                                  swap in any::<u64>(), cmask in any::<u64>(),
                                  smask in any::<u64>(), hit in any::<bool>()) {
        // Make matches likely half the time.
        let compare = if hit { (old & cmask) | (compare & !cmask) } else { compare };
        let op = AtomicOp::Cswp { compare, swap, compare_mask: cmask, swap_mask: smask };
        prop_assert_eq!(op.apply(old), model_cswp(old, compare, swap, cmask, smask));
        let plain = AtomicOp::Cswp { compare, swap, compare_mask: !0, swap_mask: !0 };
        prop_assert_eq!(plain.apply(old), if old == compare { swap } else { old });
    }
}
