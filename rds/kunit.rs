// SPDX-License-Identifier: GPL-2.0

//! The Rust cases of the module's KUnit suite (the suite itself is `rds/kunit.c`).
//!
//! Each case runs pure protocol logic as compiled into the module, the same code the host tests
//! exercise, to catch differences between the kernel and host builds (target, flags, `core`).
//! A case returns 0 on success, or the number of the first check that failed.

use crate::bindings::mm::page_write;
use crate::bindings::net::NetId;
use crate::bindings::sync::ProcessCtx;
use crate::conn::ConnKey;
use crate::message::{IncomingHeader, LentFrags, Message, Payload};
use crate::proto::Stat;
use crate::proto::{
    cmsg_space, cmsgs, cookie_key, cookie_offset, encode_cmsg, key_acceptable, make_cookie,
    scan_send_cmsgs, verify_checksum, AtomicOp, BarrierState, CmsgError, CongChange, Ext, Header,
    HeaderError, OpTracker, Quarantine, RecvAccount, FLAG_ACK_REQUIRED, HEADER_LEN,
    RDS_CMSG_RDMA_ARGS, RDS_CMSG_RDMA_DEST, RDS_CMSG_ZCOPY_COOKIE, SOL_RDS, SOL_SOCKET,
};
use crate::proto::{Addr, ConnState};
use crate::socket::Shared;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::{ffi::c_int, page::Page, prelude::*, sync::Arc};

/// Runs checks in order and returns the 1-based index of the first that fails, or 0.
fn first_failure(checks: &[bool]) -> c_int {
    checks
        .iter()
        .position(|ok| !ok)
        .map_or(0, |i| c_int::try_from(i + 1).unwrap_or(c_int::MAX))
}

fn sample() -> Header {
    Header {
        sequence: 0x0102_0304_0506_0708,
        ack: 0x1112_1314_1516_1718,
        len: 0x2122_2324,
        sport: 0x3132,
        dport: 0x4142,
        flags: FLAG_ACK_REQUIRED,
        credit: 7,
        csum: 0,
        exthdr: [0; 16],
    }
}

#[no_mangle]
extern "C" fn rds_rs_kunit_header_roundtrip() -> c_int {
    let h = sample();
    let wire = h.encode();
    first_failure(&[
        wire[..8] == [1, 2, 3, 4, 5, 6, 7, 8],
        wire[16..20] == [0x21, 0x22, 0x23, 0x24],
        wire[20..24] == [0x31, 0x32, 0x41, 0x42],
        wire[24] == FLAG_ACK_REQUIRED && wire[25] == 7,
        Header::decode(&wire) == Ok(h),
        Header::decode(&wire[..HEADER_LEN - 1]) == Err(HeaderError::TooShort),
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_header_checksum() -> c_int {
    let h = sample().with_checksum();
    let wire = h.encode();
    let mut flipped = wire;
    flipped[5] ^= 0x10;
    first_failure(&[
        h.csum != 0,
        verify_checksum(&wire),
        !verify_checksum(&flipped),
        verify_checksum(&sample().encode()),
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_header_ext() -> c_int {
    let mut h = sample();
    let added = h
        .add_ext(Ext::RdmaDest {
            rkey: 0xdead_beef,
            offset: 0x10,
        })
        .is_ok()
        && h.add_ext(Ext::Version(0x0301)).is_ok();
    let mut exts = h.exts();
    first_failure(&[
        added,
        exts.next()
            == Some(Ok(Ext::RdmaDest {
                rkey: 0xdead_beef,
                offset: 0x10,
            })),
        exts.next() == Some(Ok(Ext::Version(0x0301))),
        exts.next().is_none(),
        h.add_ext(Ext::RdmaDest { rkey: 1, offset: 2 }).is_err(),
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_cmsg() -> c_int {
    let mut buf = [0u8; 64];
    let a = encode_cmsg(SOL_SOCKET, 1, &[1, 2, 3, 4], &mut buf).unwrap_or(0);
    let b = encode_cmsg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8], &mut buf[a..]).unwrap_or(0);
    let both = &buf[..a + b];
    let mut it = cmsgs(both);
    let first = it.next();
    let second = it.next();
    let mut short = [0u8; 16];
    short[0] = 8; // cmsg_len 8 < sizeof(struct cmsghdr)
    let mut mixed = [0u8; 128];
    let c = encode_cmsg(SOL_RDS, RDS_CMSG_RDMA_DEST, &[0; 8], &mut mixed).unwrap_or(0);
    let d = encode_cmsg(SOL_RDS, RDS_CMSG_RDMA_ARGS, &[0; 72], &mut mixed[c..]).unwrap_or(0);
    let mut zc = [0u8; 64];
    let word = 0x1234_5678u32.to_ne_bytes();
    let e = encode_cmsg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &word, &mut zc).unwrap_or(0);
    let f = encode_cmsg(SOL_RDS, RDS_CMSG_ZCOPY_COOKIE, &word[..3], &mut zc[e..]).unwrap_or(0);
    first_failure(&[
        a == cmsg_space(4) && b == cmsg_space(8),
        matches!(first, Some(Ok(m)) if m.level == SOL_SOCKET && m.data == [1, 2, 3, 4]),
        matches!(second, Some(Ok(m)) if m.kind == RDS_CMSG_RDMA_DEST && m.data.len() == 8),
        it.next().is_none(),
        matches!(cmsgs(&short).next(), Some(Err(CmsgError::Inval))),
        scan_send_cmsgs(both, false).is_ok_and(|s| s.rdma_dest == 1),
        scan_send_cmsgs(&mixed[..c + d], false) == Err(CmsgError::Inval),
        scan_send_cmsgs(&[], true) == Err(CmsgError::Inval),
        scan_send_cmsgs(&zc[..e], true).is_ok_and(|s| s.zcopy_cookie == Some(Ok(0x1234_5678))),
        scan_send_cmsgs(&zc[..e + f], true)
            .is_ok_and(|s| s.zcopy_cookie == Some(Err(CmsgError::Inval))),
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_recv_account() -> c_int {
    let mut a = RecvAccount::default();
    let rcvbuf = 1000;
    first_failure(&[
        a.add(600, rcvbuf) == CongChange::None,
        a.add(600, rcvbuf) == CongChange::Congested,
        a.remove(600, rcvbuf) == CongChange::None,
        a.remove(200, rcvbuf) == CongChange::Uncongested,
        a.remove(400, rcvbuf) == CongChange::None,
        a.bytes == 0 && !a.congested,
        a.remove(5, rcvbuf) == CongChange::None && a.bytes == 0,
    ])
}

#[no_mangle]
extern "C" fn rds_rs_kunit_rdma_rules() -> c_int {
    let c = make_cookie(0xdead_beef, 0x123);
    let mut t = OpTracker::<1>::new();
    let ids = [t.issue(), t.issue(), t.issue()];
    let out_of_order = t.complete(2);
    let mark_after_2 = t.mark();
    let in_order = t.complete(1);
    let mut q = Quarantine::<2>::new();
    let evicted = [q.retire(7), q.retire(8), q.retire(9)];
    let fadd = AtomicOp::Fadd {
        add: 1,
        nocarry_mask: 0x8000_0000,
    };
    first_failure(&[
        cookie_key(c) == 0xdead_beef && cookie_offset(c) == 0x123,
        ids == [Some(1), Some(2), Some(3)],
        !out_of_order && mark_after_2 == 0,
        in_order && t.mark() == 2,
        t.barrier(2) == BarrierState::Reached && t.barrier(3) == BarrierState::Pending,
        t.barrier(4) == BarrierState::NeverIssued,
        evicted == [None, None, Some(7)] && !q.contains(7) && q.contains(9),
        // The r_key rule the registry draws keys with: never 0, never live, never quarantined.
        !key_acceptable(0, |_| false, &q),
        !key_acceptable(9, |_| false, &q) && !key_acceptable(8, |_| false, &q),
        !key_acceptable(5, |k| k == 5, &q),
        key_acceptable(7, |_| false, &q) && key_acceptable(5, |k| k == 6, &q),
        // Two 32-bit fields: the carry out of the low one does not reach the high one.
        fadd.apply(0x0000_0001_ffff_ffff) == 0x0000_0001_0000_0000,
    ])
}

/// The KUnit cases that need the core's shared state (run through the test hooks' target).
const CASE_PASSIVE: u32 = 1;
/// See [`CASE_PASSIVE`].
const CASE_LENT_PAYLOAD: u32 = 2;
/// See [`CASE_PASSIVE`].
const CASE_CONG_UNBOUND: u32 = 3;
/// See [`CASE_PASSIVE`].
const CASE_SLOT_CACHE: u32 = 4;

#[no_mangle]
extern "C" fn rds_rs_kunit_passive_conn() -> c_int {
    crate::bindings::testhooks::kunit(CASE_PASSIVE)
}

#[no_mangle]
extern "C" fn rds_rs_kunit_lent_payload() -> c_int {
    crate::bindings::testhooks::kunit(CASE_LENT_PAYLOAD)
}

#[no_mangle]
extern "C" fn rds_rs_kunit_cong_unbound() -> c_int {
    crate::bindings::testhooks::kunit(CASE_CONG_UNBOUND)
}

#[no_mangle]
extern "C" fn rds_rs_kunit_slot_cache() -> c_int {
    crate::bindings::testhooks::kunit(CASE_SLOT_CACHE)
}

/// Payloads of sizes around each boundary between ways of storing them (inside the payload,
/// one buffer, buffers of 16 KiB, pages) read back, copy, segment and fragment to the bytes
/// they were made of.
#[no_mangle]
extern "C" fn rds_rs_kunit_payload_stores() -> c_int {
    let sizes = [0usize, 1, 63, 64, 65, 4095, 4096, 4097, 16384, 16385, 70000];
    let mut src = KVec::<u8>::new();
    if src.extend_with(70000, 0, GFP_KERNEL).is_err() {
        return 100;
    }
    for (i, b) in src.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let mut back = KVec::<u8>::new();
    if back.extend_with(70000, 0, GFP_KERNEL).is_err() {
        return 101;
    }
    for (n, &len) in sizes.iter().enumerate() {
        let base = 10 * (n as c_int + 1);
        let Some(bytes) = src.get(..len) else {
            return base;
        };
        let Ok(p) = Payload::from_bytes(bytes, GFP_KERNEL) else {
            return base + 1;
        };
        let Ok(c) = p.copy(GFP_KERNEL) else {
            return base + 2;
        };
        for q in [&p, &c] {
            let Some(dst) = back.get_mut(..len) else {
                return base + 3;
            };
            if q.len() != len || q.read(0, dst).is_err() || dst != bytes {
                return base + 4;
            }
            // One byte past the end is not there.
            if q.read(len, &mut [0u8; 1]).is_ok() {
                return base + 5;
            }
            // The fragments, then the 4 KiB segments, add up to the bytes in order.
            let mut at = 0usize;
            let walked = q.try_for_each_frag(|f| {
                let d = back.get_mut(at..at + f.len()).ok_or(EINVAL)?;
                f.read(0, d)?;
                at += f.len();
                Ok(())
            });
            if walked.is_err() || at != len || back.get(..len) != Some(bytes) {
                return base + 6;
            }
            let mut at = 0usize;
            let mut idx = 0;
            while let Some(f) = q.segment(idx) {
                let Some(d) = back.get_mut(at..at + f.len()) else {
                    return base + 7;
                };
                if f.read(0, d).is_err() || (f.len() != 4096 && at + f.len() != len) {
                    return base + 7;
                }
                at += f.len();
                idx += 1;
            }
            if at != len || back.get(..len) != Some(bytes) {
                return base + 8;
            }
        }
    }
    0
}

/// The counters the message-memory cases read (`STAT_*` of `kunit.c`).
#[no_mangle]
extern "C" fn rds_rs_kunit_stat(which: u32) -> u64 {
    let stat = match which {
        0 => Stat::RsMsgAlloc,
        1 => Stat::RsMsgRecycled,
        2 => Stat::RsPayloadAlloc,
        _ => Stat::RsPayloadRecycled,
    };
    crate::stats::get(stat)
}

/// How many spares a socket's pool keeps.
#[no_mangle]
extern "C" fn rds_rs_kunit_pool_msgs() -> u32 {
    crate::message::POOL_MSGS as u32
}

/// What the buffers of large payloads a socket's pool keeps may hold in all.
#[no_mangle]
extern "C" fn rds_rs_kunit_pool_chunk_bytes() -> u32 {
    crate::message::POOL_CHUNK_BYTES as u32
}

/// Runs a KUnit case on the shared state.
pub(crate) fn run_on_shared(shared: &Arc<Shared>, case: u32, ctx: &ProcessCtx) -> c_int {
    match case {
        CASE_PASSIVE => passive_conn(shared, ctx),
        CASE_LENT_PAYLOAD => lent_payload(),
        CASE_CONG_UNBOUND => cong_unbound(shared),
        CASE_SLOT_CACHE => slot_cache(shared, ctx),
        _ => -1,
    }
}

/// A connection created by an arriving peer: down and not connecting by itself, claimed once
/// by the transport, up when the transport completes, gone when destroyed.
fn passive_conn(shared: &Arc<Shared>, ctx: &ProcessCtx) -> c_int {
    let key = ConnKey {
        net: NetId::init(),
        laddr: Addr::from_v4([127, 0, 0, 91]),
        faddr: Addr::from_v4([127, 0, 0, 92]),
        tos: 0,
        path: 0,
    };
    let Some(lo) = shared.transports.by_kind(crate::proto::RDS_TRANS_LOOP) else {
        return 100;
    };
    let Ok(c) = shared.conns.get_passive(shared, key, &lo, ctx) else {
        return 101;
    };
    let down = c.state() == ConnState::Down;
    c.connect_if_down(ctx);
    let still_down = c.state() == ConnState::Down;
    let first = c.try_accept();
    let second = c.try_accept();
    let connecting = c.state() == ConnState::Connecting;
    c.connect_complete();
    let up = c.state() == ConnState::Up && c.info_flags() == 0x04;
    let found = shared.conns.find(&key).is_some();
    let destroyed = shared.conns.destroy(&key, ctx) && c.is_destroyed();
    let gone = shared.conns.find(&key).is_none();
    first_failure(&[
        down, still_down, first, !second, connecting, up, found, destroyed, gone,
    ])
}

/// A congestion update from an address no socket is bound to (its map was reaped, or never
/// existed) is a whole map with no port congested, not an error: a drain that kept the update
/// due would spin on it.
fn cong_unbound(shared: &Arc<Shared>) -> c_int {
    let laddr = Addr::from_v4([127, 0, 0, 93]);
    let faddr = Addr::from_v4([127, 0, 0, 94]);
    let Ok(m) = shared.cong.update_message(NetId::init(), laddr, faddr) else {
        return 101;
    };
    let p = &m.data;
    let mut all = KVec::<u8>::new();
    let mut ok = true;
    if all.extend_with(p.len(), 0xa5, GFP_KERNEL).is_err() {
        return 102;
    }
    if p.read(0, &mut all).is_err() {
        ok = false;
    }
    first_failure(&[
        ok,
        m.is_cong_map(),
        p.len() == crate::proto::CONG_MAP_BYTES,
        all.iter().all(|b| *b == 0),
    ])
}

/// A delivered message's memory goes to the cache when its last reference does (its payload
/// dropped then), at most `SPARE_SLOTS` are kept, a message still referenced elsewhere is not
/// taken, and taking gives the spares back out.
fn slot_cache(shared: &Arc<Shared>, ctx: &ProcessCtx) -> c_int {
    struct Flag(Arc<AtomicBool>);
    impl LentFrags for Flag {
        fn try_for_each(&self, _f: &mut dyn FnMut(&Page, usize, usize) -> Result) -> Result {
            Ok(())
        }
    }
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let cache = &shared.rx_slots;
    let hdr = IncomingHeader {
        saddr: Addr::from_v4([127, 0, 0, 95]),
        daddr: Addr::from_v4([127, 0, 0, 96]),
        sport: 1,
        dport: 2,
        seq: 3,
        tos: 0,
        rdma_cookie: 0,
    };
    // Empty what earlier traffic left.
    let mut held = KVec::new();
    while cache.spares() > 0 {
        let Ok(s) = cache.take_or_alloc(ctx, GFP_KERNEL) else {
            return 100;
        };
        if held.push(s, GFP_KERNEL).is_err() {
            return 101;
        }
    }
    drop(held);
    let Ok(dropped) = Arc::new(AtomicBool::new(false), GFP_KERNEL) else {
        return 102;
    };
    let Ok(frags) = Arc::new(Flag(dropped.clone()), GFP_KERNEL) else {
        return 103;
    };
    let Ok(slot) = cache.take_or_alloc(ctx, GFP_KERNEL) else {
        return 104;
    };
    let inc: Arc<Message> = slot.fill(hdr, Payload::lent(frags, 0)).into_arc();
    // Still referenced elsewhere: not taken, nothing dropped.
    let other = inc.clone();
    Message::recycle(inc, cache, ctx);
    let kept_while_shared = cache.spares() == 0 && !dropped.load(Ordering::Acquire);
    Message::recycle(other, cache, ctx);
    let recycled = cache.spares() == 1 && dropped.load(Ordering::Acquire);
    // Many more than the cache keeps.
    let mut many = KVec::new();
    for _ in 0..80 {
        let Ok(slot) = cache.take_or_alloc(ctx, GFP_KERNEL) else {
            return 105;
        };
        let inc = slot.fill(hdr, Payload::empty()).into_arc();
        if many.push(inc, GFP_KERNEL).is_err() {
            return 106;
        }
    }
    let took_the_spare = cache.spares() == 0;
    for inc in many {
        Message::recycle(inc, cache, ctx);
    }
    let bounded = cache.spares() == crate::message::SPARE_SLOTS;
    first_failure(&[kept_while_shared, recycled, took_the_spare, bounded])
}

/// A transport's receive fragments in a payload: read through, and given back when the last
/// user drops the payload.
fn lent_payload() -> c_int {
    struct Frags {
        pages: KVec<Page>,
        back: Arc<AtomicBool>,
    }
    impl LentFrags for Frags {
        fn try_for_each(&self, f: &mut dyn FnMut(&Page, usize, usize) -> Result) -> Result {
            // The second fragment starts 100 bytes into its page.
            let mut i = 0;
            for p in self.pages.iter() {
                let (off, len) = if i == 0 { (0, 4096) } else { (100, 50) };
                f(p, off, len)?;
                i += 1;
            }
            Ok(())
        }
    }
    impl Drop for Frags {
        fn drop(&mut self) {
            self.back.store(true, Ordering::Release);
        }
    }
    let Ok(back) = Arc::new(AtomicBool::new(false), GFP_KERNEL) else {
        return 100;
    };
    let mut pages = KVec::new();
    for fill in [0xa5u8, 0x5a] {
        let Ok(p) = Page::alloc_page(GFP_KERNEL) else {
            return 101;
        };
        let mut p = p;
        if page_write(&mut p, 0, &[fill; 4096]).is_err() {
            return 102;
        }
        if pages.push(p, GFP_KERNEL).is_err() {
            return 103;
        }
    }
    let frags = Frags {
        pages,
        back: back.clone(),
    };
    let Ok(frags) = Arc::new(frags, GFP_KERNEL) else {
        return 104;
    };
    let payload = Payload::lent(frags, 4146);
    let mut edge = [0u8; 4];
    let read = payload.read(4094, &mut edge).is_ok();
    let mut past = [0u8; 2];
    let past_end = payload.read(4145, &mut past).is_err();
    let len = payload.len() == 4146;
    let before = !back.load(Ordering::Acquire);
    drop(payload);
    let after = back.load(Ordering::Acquire);
    first_failure(&[
        read,
        edge == [0xa5, 0xa5, 0x5a, 0x5a],
        past_end,
        len,
        before,
        after,
    ])
}
