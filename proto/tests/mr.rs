//! Memory-registration rules (net/rds/rdma.c __rds_rdma_map,
//! rds_rdma_pages, rds_rdma_extra_size, rds_cmsg_rdma_args,
//! rds_cmsg_atomic), regions, and the R_Key quarantine.

use std::collections::VecDeque;

use proptest::prelude::*;
use rds_proto::{
    check_atomic, check_rdma_args, check_rdma_bytes, check_registration, check_registration_mlock,
    key_acceptable, loop_region, make_cookie, rdma_pages, rdma_sg_too_big, AtomicArgs, AtomicOp,
    MrError, Quarantine, RdmaArgs, RdsIovec, Region, LOOP_BASES, MAX_MR_PAGES, MAX_MSG_SIZE,
    MSG_SG_MAX, PAGE_SIZE, SG_ENTRY_LEN, UIO_MAXIOV,
};

fn iov(addr: u64, bytes: u64) -> RdsIovec {
    RdsIovec { addr, bytes }
}

#[test]
fn errnos() {
    assert_eq!(MrError::Inval.errno(), 22);
    assert_eq!(MrError::MsgSize.errno(), 90);
    assert_eq!(MrError::Fault.errno(), 14);
    assert_eq!(MrError::NotConn.errno(), 107);
    assert_eq!(MrError::OpNotSupp.errno(), 95);
    assert_eq!(MrError::Perm.errno(), 1);
    assert!(!MrError::Perm.to_string().is_empty());
}

// --- __rds_rdma_map -----------------------------------------------------------------

#[test]
fn registration_ok() {
    assert_eq!(check_registration(&iov(0x1000, 1)), Ok((1, 0)));
    assert_eq!(check_registration(&iov(0x1234, 100)), Ok((1, 0x234)));
    assert_eq!(check_registration(&iov(0x1ff0, 0x20)), Ok((2, 0xff0)));
    // Ends exactly at the last page boundary of the address space:
    // PAGE_ALIGN does not wrap.
    assert_eq!(check_registration(&iov(u64::MAX - 8191, 4096)), Ok((1, 0)));
}

#[test]
fn registration_wraps() {
    // (addr + bytes) < addr.
    assert_eq!(check_registration(&iov(u64::MAX, 1)), Err(MrError::Inval));
    assert_eq!(check_registration(&iov(1, u64::MAX)), Err(MrError::Inval));
    // PAGE_ALIGN(addr + bytes) < addr + bytes: the end is in the last,
    // partial page.
    assert_eq!(
        check_registration(&iov(u64::MAX - 10, 5)),
        Err(MrError::Inval)
    );
    assert_eq!(
        check_registration(&iov(u64::MAX - 4095, 1)),
        Err(MrError::Inval)
    );
    // Ending exactly at the last page boundary is fine.
    assert_eq!(check_registration(&iov(u64::MAX - 4096, 1)), Ok((1, 4095)));
}

#[test]
fn registration_empty_or_huge_is_einval() {
    // rds_pages_in_vec returns 0 for bytes == 0 and bytes > UINT_MAX, so a
    // 5 GiB registration is EINVAL, not EMSGSIZE.
    assert_eq!(check_registration(&iov(0x1000, 0)), Err(MrError::Inval));
    assert_eq!(
        check_registration(&iov(0x1000, 5 << 30)),
        Err(MrError::Inval)
    );
    assert_eq!(
        check_registration(&iov(0, u64::from(u32::MAX))),
        Err(MrError::MsgSize)
    );
}

#[test]
fn registration_size_limit() {
    // (nr_pages - 1) > RDS_MAX_MSG_SIZE >> PAGE_SHIFT: at most 257 pages,
    // so an aligned region may be 1 MiB + 4 KiB.
    assert_eq!(MAX_MR_PAGES, 257);
    assert_eq!(check_registration(&iov(0, 257 * 4096)), Ok((257, 0)));
    assert_eq!(
        check_registration(&iov(0, 257 * 4096 + 1)),
        Err(MrError::MsgSize)
    );
    assert_eq!(
        check_registration(&iov(4095, 256 * 4096 + 1)),
        Ok((257, 4095))
    );
    assert_eq!(
        check_registration(&iov(4095, 256 * 4096 + 2)),
        Err(MrError::MsgSize)
    );
}

#[test]
fn registration_mlock_order() {
    // can_do_mlock() comes after the overflow checks and before the page
    // count checks.
    assert_eq!(
        check_registration_mlock(&iov(u64::MAX, 1), false),
        Err(MrError::Inval)
    );
    assert_eq!(
        check_registration_mlock(&iov(u64::MAX - 10, 5), false),
        Err(MrError::Inval)
    );
    assert_eq!(
        check_registration_mlock(&iov(0x1000, 0), false),
        Err(MrError::Perm)
    );
    assert_eq!(
        check_registration_mlock(&iov(0, 1 << 30), false),
        Err(MrError::Perm)
    );
    assert_eq!(
        check_registration_mlock(&iov(0, 1), false),
        Err(MrError::Perm)
    );
    assert_eq!(check_registration_mlock(&iov(0, 1), true), Ok((1, 0)));
}

/// __rds_rdma_map's checks, in u128 arithmetic.
fn model_registration(v: RdsIovec, can_mlock: bool) -> Result<(u64, u32), MrError> {
    let (a, b) = (u128::from(v.addr), u128::from(v.bytes));
    let end = a + b;
    let top = 1u128 << 64;
    if end >= top || end.div_ceil(4096) * 4096 >= top {
        return Err(MrError::Inval);
    }
    if !can_mlock {
        return Err(MrError::Perm);
    }
    if b == 0 || b > u128::from(u32::MAX) {
        return Err(MrError::Inval);
    }
    let pages = end.div_ceil(4096) - a / 4096;
    if pages - 1 > (1 << 20) / 4096 {
        return Err(MrError::MsgSize);
    }
    Ok((pages as u64, (v.addr % 4096) as u32))
}

// --- Region ---------------------------------------------------------------------------

#[test]
fn region_of_registration() {
    // Registered at 0x12345, 100 bytes: cookie offset 0x345; zero-based
    // bytes [0x345, 0x3a9).
    let r = Region::of(&iov(0x12345, 100));
    assert_eq!(
        r,
        Region {
            offset: 0x345,
            len: 100
        }
    );
    // remote_vec.addr 0 + cookie offset is the first byte.
    assert_eq!(r.index(0x345), Some(0));
    assert_eq!(r.index(0x345 + 99), Some(99));
    assert_eq!(r.index(0x345 + 100), None);
    assert_eq!(r.index(0x344), None);
    assert!(r.contains(0x345, 100));
    assert!(r.contains(0x345 + 92, 8));
    assert!(!r.contains(0x345 + 93, 8));
    assert!(!r.contains(0x344, 1));
    assert!(r.contains(0x345 + 100, 0), "empty access at the end");
    assert!(!r.contains(0x345 + 101, 0));
    assert!(!r.contains(u64::MAX, u64::MAX));
    assert!(!r.contains(0x345, u64::MAX));
    let big = Region {
        offset: 4095,
        len: u64::MAX,
    };
    assert!(big.contains(u64::MAX, 1), "offset + len is past u64::MAX");
    let small = Region { offset: 0, len: 10 };
    assert!(!small.contains(5, u64::MAX), "at + len overflows");
    assert!(!small.contains(u64::MAX, 2), "at + len overflows");
    assert!(big.contains(u64::MAX, 0));
    assert!(big.contains(4095, u64::MAX));
    assert_eq!(big.index(u64::MAX), Some(u64::MAX - 4095));
}

// --- rds_rdma_extra_size / rds_cmsg_rdma_args --------------------------------------------

fn rdma(nr_local: u64, remote_bytes: u64) -> RdmaArgs {
    RdmaArgs {
        cookie: make_cookie(1, 0),
        remote_vec: iov(0, remote_bytes),
        local_vec_addr: 0x1000,
        nr_local,
        flags: 0,
        user_token: 0,
    }
}

#[test]
fn rdma_args_rules() {
    let one = [iov(0x1000, 100)];
    assert_eq!(check_rdma_args(&rdma(1, 100), &one), Ok((1, 100)));
    assert_eq!(check_rdma_args(&rdma(1, 1000), &one), Ok((1, 100)));
    // nr_local == 0: EINVAL (rds_rdma_extra_size).
    assert_eq!(check_rdma_args(&rdma(0, 100), &[]), Err(MrError::Inval));
    // nr_local > UIO_MAXIOV: EMSGSIZE, before anything is looked at.
    assert_eq!(
        check_rdma_args(&rdma(UIO_MAXIOV + 1, 100), &[]),
        Err(MrError::MsgSize)
    );
    assert_eq!(
        check_rdma_args(&rdma(u64::MAX, 100), &one),
        Err(MrError::MsgSize)
    );
    // vec->len != nr_local: EINVAL.
    assert_eq!(check_rdma_args(&rdma(2, 100), &one), Err(MrError::Inval));
    // An iovec with no pages (empty, wrapping, or > UINT_MAX): EINVAL.
    for bad in [iov(0x1000, 0), iov(u64::MAX, 1), iov(0, 1 << 32)] {
        assert_eq!(
            check_rdma_args(&rdma(2, u64::MAX), &[iov(0, 1), bad]),
            Err(MrError::Inval),
            "{bad:?}"
        );
    }
    // nr_bytes > remote_vec.bytes: EINVAL.
    assert_eq!(check_rdma_args(&rdma(1, 99), &one), Err(MrError::Inval));
    assert_eq!(
        check_rdma_args(&rdma(2, 199), &[iov(0, 100), iov(0x5000, 100)]),
        Err(MrError::Inval)
    );
    assert_eq!(
        check_rdma_args(&rdma(2, 200), &[iov(4000, 100), iov(0x5000, 100)]),
        Ok((3, 200))
    );
}

#[test]
fn rdma_args_limits() {
    let many = vec![iov(0x1000, 1); 1024];
    assert_eq!(check_rdma_args(&rdma(1024, 1024), &many), Ok((1024, 1024)));
    // The largest request: 1024 iovecs of UINT_MAX bytes, each over
    // 2^20 + 1 pages; the page total stays far below INT_MAX.
    let huge = vec![iov(4095, u64::from(u32::MAX)); 1024];
    assert_eq!(
        check_rdma_args(&rdma(1024, u64::MAX), &huge),
        Ok((1024 * ((1 << 20) + 1), 1024 * u64::from(u32::MAX)))
    );
    // C sums the lengths in an unsigned int: 3 GiB + 3 GiB wraps to 2 GiB
    // there and passes against a 2 GiB remote vector; here it does not.
    let two = [iov(0, 3 << 30), iov(1 << 40, 3 << 30)];
    assert_eq!(
        check_rdma_args(&rdma(2, 2 << 30), &two),
        Err(MrError::Inval)
    );
    assert_eq!(check_rdma_bytes(&rdma(2, 6 << 30), &two), Ok(6 << 30));
    assert_eq!(rdma_pages(&two), Ok(2 * (3 << 18)));
    assert_eq!(rdma_pages(&[]), Ok(0));
}

/// rds_rdma_extra_size + rds_cmsg_rdma_args in u128 arithmetic.
fn model_rdma(args: &RdmaArgs, local: &[RdsIovec]) -> Result<(u64, u64), MrError> {
    if args.nr_local == 0 {
        return Err(MrError::Inval);
    }
    if args.nr_local > 1024 {
        return Err(MrError::MsgSize);
    }
    if local.len() as u64 != args.nr_local {
        return Err(MrError::Inval);
    }
    let mut pages = 0u128;
    let mut bytes = 0u128;
    for v in local {
        let (a, b) = (u128::from(v.addr), u128::from(v.bytes));
        if b == 0 || a + b >= 1 << 64 || b > u128::from(u32::MAX) {
            return Err(MrError::Inval);
        }
        pages += (a + b).div_ceil(4096) - a / 4096;
        if pages > i32::MAX as u128 {
            return Err(MrError::Inval);
        }
        bytes += b;
    }
    if bytes > u128::from(args.remote_vec.bytes) {
        return Err(MrError::Inval);
    }
    Ok((pages as u64, bytes as u64))
}

// --- rds_cmsg_atomic -------------------------------------------------------------------

fn atomic(cookie: u64, local_addr: u64, remote_addr: u64) -> AtomicArgs {
    AtomicArgs {
        cookie,
        local_addr,
        remote_addr,
        op: AtomicOp::Fadd {
            add: 1,
            nocarry_mask: 0,
        },
        flags: 0,
        user_token: 0,
    }
}

#[test]
fn atomic_alignment() {
    assert_eq!(check_atomic(&atomic(make_cookie(1, 0), 0x1000, 8)), Ok(()));
    // Local misaligned: EFAULT, as rds_cmsg_atomic returns.
    for l in [0x1001, 0x1004, 0x1007] {
        assert_eq!(
            check_atomic(&atomic(make_cookie(1, 0), l, 8)),
            Err(MrError::Fault)
        );
    }
    // Remote misaligned after adding the cookie offset: EINVAL (rds-rs).
    assert_eq!(
        check_atomic(&atomic(make_cookie(1, 0), 0x1000, 4)),
        Err(MrError::Inval)
    );
    assert_eq!(
        check_atomic(&atomic(make_cookie(1, 4), 0x1000, 4)),
        Ok(()),
        "offset 4 + 4"
    );
    assert_eq!(
        check_atomic(&atomic(make_cookie(1, 4), 0x1000, 8)),
        Err(MrError::Inval)
    );
    // Local is checked first.
    assert_eq!(
        check_atomic(&atomic(make_cookie(1, 0), 0x1001, 1)),
        Err(MrError::Fault)
    );
    // Wrapping remote address.
    assert_eq!(
        check_atomic(&atomic(make_cookie(1, 8), 0, u64::MAX - 7)),
        Ok(())
    );
}

// --- Quarantine and key_acceptable ----------------------------------------------------------

#[test]
fn quarantine_fifo() {
    let mut q = Quarantine::<3>::new();
    assert!(q.is_empty());
    assert_eq!(q.capacity(), 3);
    assert_eq!(q.retire(10), None);
    assert_eq!(q.retire(11), None);
    assert_eq!(q.retire(12), None);
    assert_eq!(q.len(), 3);
    assert!(q.contains(10) && q.contains(11) && q.contains(12));
    assert!(!q.contains(13) && !q.contains(0));
    // Full: the oldest goes.
    assert_eq!(q.retire(13), Some(10));
    assert!(!q.contains(10));
    assert_eq!(q.iter().collect::<Vec<_>>(), [11, 12, 13]);
    assert_eq!(q.retire(14), Some(11));
    assert_eq!(q.retire(15), Some(12));
    assert_eq!(q.retire(16), Some(13));
    assert_eq!(q.iter().collect::<Vec<_>>(), [14, 15, 16]);
    assert_eq!(q.len(), 3);
    assert_eq!(Quarantine::<3>::default(), Quarantine::<3>::new());
}

#[test]
fn quarantine_zero_capacity() {
    let mut q = Quarantine::<0>::new();
    assert_eq!(q.retire(5), Some(5));
    assert!(q.is_empty());
    assert!(!q.contains(5));
    assert_eq!(q.iter().count(), 0);
}

#[test]
fn key_rules() {
    let mut q = Quarantine::<2>::new();
    let live = |k: u32| k == 7;
    assert!(!key_acceptable(0, live, &q), "0 means flush");
    assert!(!key_acceptable(7, live, &q), "live");
    assert!(key_acceptable(8, live, &q));
    q.retire(8);
    assert!(!key_acceptable(8, live, &q), "quarantined");
    q.retire(9);
    q.retire(10);
    assert!(key_acceptable(8, live, &q), "evicted");
    assert!(!key_acceptable(9, live, &q));
    assert!(!key_acceptable(10, live, &q));
    let q4096 = Quarantine::<4096>::new();
    assert!(key_acceptable(u32::MAX, |_| false, &q4096));
}

#[derive(Clone, Debug)]
enum QOp {
    Retire(u32),
    Check(u32),
}

fn q_op() -> impl Strategy<Value = QOp> {
    prop_oneof![
        (0u32..40).prop_map(QOp::Retire),
        (0u32..40).prop_map(QOp::Check),
    ]
}

fn run_quarantine<const N: usize>(ops: &[QOp]) -> Result<(), TestCaseError> {
    let mut q = Quarantine::<N>::new();
    let mut model = VecDeque::new();
    for op in ops {
        match *op {
            QOp::Retire(k) => {
                model.push_back(k);
                let evicted = if model.len() > N {
                    model.pop_front()
                } else {
                    None
                };
                prop_assert_eq!(q.retire(k), evicted);
            }
            QOp::Check(k) => {
                prop_assert_eq!(q.contains(k), model.contains(&k));
                let live = |x: u32| x % 7 == 0;
                prop_assert_eq!(
                    key_acceptable(k, live, &q),
                    k != 0 && !live(k) && !model.contains(&k)
                );
            }
        }
        prop_assert_eq!(q.len(), model.len());
        prop_assert_eq!(q.is_empty(), model.is_empty());
        prop_assert_eq!(
            q.iter().collect::<Vec<_>>(),
            model.iter().copied().collect::<Vec<_>>()
        );
    }
    Ok(())
}

// --- properties --------------------------------------------------------------------------------

fn edgy_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..10_000,
        (0u64..10_000).prop_map(|d| u64::MAX - d),
        (0u64..10_000).prop_map(|d| u64::from(u32::MAX).wrapping_add(d).wrapping_sub(5000)),
        (0u64..300).prop_map(|p| p * 4096),
        (0u64..300, 0u64..4096).prop_map(|(p, o)| p * 4096 + o),
        (0u64..300, 0u64..4096).prop_map(|(p, o)| u64::MAX - p * 4096 - o),
    ]
}

fn any_iovec() -> impl Strategy<Value = RdsIovec> {
    (edgy_u64(), edgy_u64()).prop_map(|(addr, bytes)| RdsIovec { addr, bytes })
}

/// Mostly-valid local iovecs: small lengths, sometimes a bad one.
fn local_iovec() -> impl Strategy<Value = RdsIovec> {
    prop_oneof![
        8 => (any::<u64>(), 1u64..20_000).prop_map(|(a, b)| iov(a >> 1, b)),
        1 => any_iovec(),
    ]
}

proptest! {
    #[test]
    fn registration_matches_model(v in any_iovec(), can_mlock in any::<bool>()) {
        prop_assert_eq!(check_registration_mlock(&v, can_mlock), model_registration(v, can_mlock));
        prop_assert_eq!(check_registration(&v), model_registration(v, true));
    }

    #[test]
    fn region_matches_interval(offset in 0u32..4096, len in edgy_u64(),
                               at in edgy_u64(), n in edgy_u64()) {
        let r = Region { offset, len };
        let (o, l, a, n128) =
            (u128::from(offset), u128::from(len), u128::from(at), u128::from(n));
        prop_assert_eq!(r.contains(at, n), o <= a && a + n128 <= o + l);
        let idx = (o <= a && a < o + l).then(|| (a - o) as u64);
        prop_assert_eq!(r.index(at), idx);
        if let Some(i) = r.index(at) {
            prop_assert!(r.contains(at, 1));
            prop_assert!(i < len);
        }
    }

    #[test]
    fn region_of_registration_covers_it(v in any_iovec()) {
        // Every byte of a valid registration is addressable at
        // remote addr i + cookie offset.
        if let Ok((_, off)) = check_registration(&v) {
            let r = Region::of(&v);
            prop_assert_eq!(r.offset, off);
            let o = u64::from(off);
            prop_assert!(r.contains(o, v.bytes));
            prop_assert_eq!(r.index(o), Some(0));
            prop_assert_eq!(r.index(o + v.bytes - 1), Some(v.bytes - 1));
            prop_assert_eq!(r.index(o + v.bytes), None);
        }
    }

    #[test]
    fn rdma_args_match_model(nr in prop_oneof![0u64..6, Just(1024), Just(1025), any::<u64>()],
                             local in proptest::collection::vec(local_iovec(), 0..6),
                             remote in prop_oneof![0u64..100_000, any::<u64>()]) {
        // Usually nr_local == local.len(), sometimes not.
        let nr = if nr < 6 { local.len() as u64 } else { nr };
        let args = rdma(nr, remote);
        prop_assert_eq!(check_rdma_args(&args, &local), model_rdma(&args, &local));
    }

    #[test]
    fn atomic_matches_model(cookie in any::<u64>(), l in any::<u64>(), r in any::<u64>()) {
        let want = if l % 8 != 0 {
            Err(MrError::Fault)
        } else if (u128::from(r) + u128::from(cookie >> 32)) % 8 != 0 {
            Err(MrError::Inval)
        } else {
            Ok(())
        };
        prop_assert_eq!(check_atomic(&atomic(cookie, l, r)), want);
    }

    #[test]
    fn quarantine_matches_vecdeque(ops in proptest::collection::vec(q_op(), 0..200)) {
        run_quarantine::<0>(&ops)?;
        run_quarantine::<1>(&ops)?;
        run_quarantine::<5>(&ops)?;
        run_quarantine::<64>(&ops)?;
    }
}

#[test]
fn sg_limit_is_c_kmalloc_bound() {
    // 4 MiB of 32-byte entries, less the message: about 131,000 pages (512 MiB).
    let most = MSG_SG_MAX / SG_ENTRY_LEN;
    assert!(!rdma_sg_too_big(0));
    assert!(!rdma_sg_too_big(257));
    assert!(!rdma_sg_too_big(1024));
    assert!(!rdma_sg_too_big(most));
    assert!(rdma_sg_too_big(most + 1));
    // One iovec of 4 GiB - 1 spans 2^20 pages from a page boundary, 2^20 + 1 from elsewhere.
    assert_eq!(rdma_pages(&[iov(0x1000, u64::from(u32::MAX))]), Ok(1 << 20));
    let pages = rdma_pages(&[iov(0x1800, u64::from(u32::MAX))]).expect("pages");
    assert_eq!(pages, (1 << 20) + 1);
    assert!(rdma_sg_too_big(pages));
    assert!(rdma_sg_too_big(u64::MAX));
}

// --- loopback registration bases ---------------------------------------------------------------

#[test]
fn loop_bases() {
    // Every page-aligned base below 2^32 - 2 MiB.
    assert_eq!(LOOP_BASES, ((1 << 32) - 2 * MAX_MSG_SIZE) / PAGE_SIZE);
    assert_eq!(LOOP_BASES, (1 << 20) - (1 << 9));
    // About 20 random bits.
    const { assert!(LOOP_BASES > 1 << 19 && LOOP_BASES < 1 << 20) };
}

/// The base `loop_region` chose for `v` (offset less the page offset).
fn loop_base(v: &RdsIovec, rand: u32) -> u64 {
    let r = loop_region(v, rand);
    u64::from(r.offset) - v.addr % PAGE_SIZE
}

#[test]
fn loop_region_examples() {
    let v = iov(0x7f00_1234, 100);
    assert_eq!(
        loop_region(&v, 0),
        Region {
            offset: 0x234,
            len: 100
        }
    );
    assert_eq!(
        loop_region(&v, 1),
        Region {
            offset: 0x1234,
            len: 100
        }
    );
    // rand wraps at LOOP_BASES.
    let top = u32::try_from(LOOP_BASES).unwrap();
    assert_eq!(loop_region(&v, top), loop_region(&v, 0));
    assert_eq!(loop_region(&v, top + 5), loop_region(&v, 5));
    assert_eq!(loop_base(&v, top - 1), (LOOP_BASES - 1) * PAGE_SIZE);
    assert_eq!(
        loop_base(&v, u32::MAX),
        (u64::from(u32::MAX) % LOOP_BASES) * PAGE_SIZE
    );
    // The largest registration at the highest base still ends below 2^32.
    for addr in [0, 1, PAGE_SIZE - 1] {
        let bytes = MAX_MR_PAGES * PAGE_SIZE - addr;
        let big = iov(addr, bytes);
        assert_eq!(check_registration(&big), Ok((MAX_MR_PAGES, addr as u32)));
        let r = loop_region(&big, top - 1);
        assert!(u64::from(r.offset) + r.len <= u64::from(u32::MAX), "{addr}");
        assert!(r.contains(u64::from(r.offset), r.len));
        assert_eq!(r.index(u64::from(r.offset) + r.len - 1), Some(bytes - 1));
    }
}

#[test]
fn loop_bases_are_distinct() {
    // Every rand below LOOP_BASES: its own page-aligned base, in order.
    let v = iov(0x1000, 1);
    let mut last = None;
    for rand in 0..u32::try_from(LOOP_BASES).unwrap() {
        let base = loop_base(&v, rand);
        assert_eq!(base, u64::from(rand) * PAGE_SIZE);
        if let Some(l) = last {
            assert!(base > l);
        }
        last = Some(base);
    }
    assert_eq!(last, Some((1 << 32) - 2 * MAX_MSG_SIZE - PAGE_SIZE));
}

/// Registrations that pass check_registration, of every size up to the
/// largest, at addresses all over the space.
fn valid_iovec() -> impl Strategy<Value = RdsIovec> {
    prop_oneof![
        (any::<u64>(), 1u64..=MAX_MR_PAGES * PAGE_SIZE),
        (any::<u64>(), 1u64..100),
        (0u64..PAGE_SIZE, Just(MAX_MR_PAGES * PAGE_SIZE)),
        any_iovec().prop_map(|v| (v.addr, v.bytes)),
    ]
    .prop_map(|(addr, bytes)| iov(addr, bytes))
    .prop_filter("a valid registration", |v| check_registration(v).is_ok())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn loop_region_fits(v in valid_iovec(),
                        rand in prop_oneof![any::<u32>(), 0u32..10,
                                            (0u32..10).prop_map(|d| u32::MAX - d),
                                            (0u32..10).prop_map(|d| (LOOP_BASES as u32) - 1 - d)]) {
        let (_, page_off) = check_registration(&v).unwrap();
        let r = loop_region(&v, rand);
        let (offset, len) = (u64::from(r.offset), r.len);
        prop_assert_eq!(len, v.bytes);
        // The page offset survives: the peer's addresses keep their alignment.
        prop_assert_eq!(offset % PAGE_SIZE, v.addr % PAGE_SIZE);
        prop_assert_eq!(offset % PAGE_SIZE, u64::from(page_off));
        // The region fits in the cookie's 32-bit offset.
        prop_assert!(offset + len <= u64::from(u32::MAX));
        // Its base is a page multiple below 2^32 - 2 MiB, chosen by rand.
        let base = offset - v.addr % PAGE_SIZE;
        prop_assert_eq!(base % PAGE_SIZE, 0);
        prop_assert!(base < (1 << 32) - 2 * MAX_MSG_SIZE);
        prop_assert_eq!(base, (u64::from(rand) % LOOP_BASES) * PAGE_SIZE);
        // Every byte is addressable, and nothing outside.
        prop_assert!(r.contains(offset, len));
        prop_assert_eq!(r.index(offset), Some(0));
        prop_assert_eq!(r.index(offset + len - 1), Some(len - 1));
        prop_assert_eq!(r.index(offset + len), None);
        prop_assert_eq!(r.index(offset.wrapping_sub(1)), None);
    }

    #[test]
    fn loop_bases_differ(a in 0..LOOP_BASES, b in 0..LOOP_BASES, v in valid_iovec()) {
        let (a, b) = (a as u32, b as u32);
        let (ra, rb) = (loop_region(&v, a), loop_region(&v, b));
        prop_assert_eq!(ra == rb, a == b);
        // Different bases are at least a page apart, so two registrations
        // of the same buffer do not share an offset.
        if a != b {
            prop_assert!(ra.offset.abs_diff(rb.offset) >= PAGE_SIZE as u32);
        }
    }
}
