//! The barrier (rds-rs's `RDS_BARRIER` and `RDS_CMSG_RDMA_ID`), cancelling and closing with
//! RDMA operations in flight, and the window of outstanding operations. Part of `rds-tests
//! rdma` (rds_rs only).
//!
//! Operations are held on their connection with rds_rs's `loop_hold` test hook
//! (`/sys/kernel/debug/rds_rs/loop_hold`): while it is 1, loopback leaves messages queued;
//! after it is reset, the next `sendmsg` on the connection sends them. The hook is always
//! reset (the guard `Hold` resets it when dropped).

use crate::rdma::{
    big, got, leftovers, notes_obs, nothing_or, one_note, rdma_op, recv_notes, same, send_ctl,
    vmpin_kb, wait_notes, Env, Hold, Op, LO,
};
use crate::util::{arrival_bound, drain, err_name, pattern, res_obs, v4};
use crate::Report;
use librds::rdma::{
    BarrierArgs, RDS_BARRIER_ARGS_SIZE, RDS_RDMA_DONTWAIT, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE,
    RDS_RDMA_SILENT,
};
use librds::{
    sockaddr_bytes, AtomicArgs, AtomicOp, ControlBuf, FaultRegion, GetMrArgs, RdmaMem, RdsIovec,
    RdsSocket, UserBuf, RDS_CANCEL_SENT_TO, SOL_RDS,
};
use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// `OK mark=N`, `EAGAIN mark=N`, ... of a barrier call.
fn bar(s: &RdsSocket, dest: &SocketAddr, wait_id: u64, flags: u64) -> String {
    let (res, mark) = s.barrier(dest, wait_id, flags);
    let mark = if mark == u64::MAX {
        "unwritten".to_string()
    } else {
        mark.to_string()
    };
    format!("{} mark={mark}", res_obs(&res))
}

fn cancel(s: &RdsSocket, dest: &SocketAddr) -> io::Result<()> {
    let a = sockaddr_bytes(dest);
    s.setsockopt_raw(SOL_RDS, RDS_CANCEL_SENT_TO, Some(&a), a.len())
}

pub(crate) fn run(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(4 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    cmem.fill(0xEE);
    smem.fill(0x77);
    let cookie =
        e.c.get_mr(cmem.at(0), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let c2 = big(v4(LO, 4641))?;
    let cookie2 = c2
        .get_mr(cmem.at(8192), 4096, RDS_RDMA_READWRITE)
        .map_err(|err| format!("GET_MR: {err}"))?;
    let dead =
        e.c.get_mr(cmem.at(0), 8, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let _ = e.c.free_mr(dead, 0);
    let b = big(v4(LO, 4640))?;
    let (d1, d2) = (e.ca, v4(LO, 4641));
    let op = |cookie: u64, off: u64, flags: u64, token: u64| Op {
        cookie,
        remote_addr: off,
        remote_bytes: 16,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 16,
        }],
        flags: RDS_RDMA_READWRITE | flags,
        token,
    };
    let send = |dest: &SocketAddr, o: &Op, payload: &[u8]| -> (io::Result<usize>, u64) {
        let mut id = 0u64;
        let res = rdma_op(&b, dest, o, payload, Some(&mut id), 0);
        (res, id)
    };

    // Ids: 1, 2, 3, ... per destination.
    let mut ids1 = Vec::new();
    let mut ids2 = Vec::new();
    for _ in 0..3 {
        ids1.push(send(&d1, &op(cookie, 0, 0, 0), b"").1);
    }
    for _ in 0..2 {
        ids2.push(send(&d2, &op(cookie2, 0, 0, 0), b"").1);
    }
    ids1.push(send(&d1, &op(cookie, 0, 0, 0), b"").1);
    r.expect(
        "rdma_id_per_destination",
        &format!("d1={ids1:?} d2={ids2:?}"),
        "d1=[1, 2, 3, 4] d2=[1, 2]",
    );
    // Atomics are numbered too.
    let mut id = 0u64;
    let a = AtomicArgs {
        cookie,
        local_addr: smem.at(64),
        remote_addr: 64,
        op: AtomicOp::Fadd { add: 1 },
        flags: 0,
        user_token: 0,
    };
    let res = crate::rdma::atomic_op(&b, &d1, &a, b"", Some(&mut id));
    r.expect(
        "rdma_id_atomic",
        &format!("{} id={id}", res_obs(&res)),
        "OK id=5",
    );
    // A sendmsg that fails takes no id.
    let mut o = op(cookie, 0, 0, 0);
    o.local.clear();
    let mut id = 12345u64;
    let res = rdma_op(&b, &d1, &o, b"", Some(&mut id), 0);
    let next = send(&d1, &op(cookie, 0, 0, 0), b"");
    r.expect(
        "rdma_id_failed_sendmsg",
        &format!(
            "{} id={id} next={} {}",
            res_obs(&res),
            res_obs(&next.0),
            next.1
        ),
        "EINVAL id=12345 next=OK 6",
    );
    // The mark after completion.
    r.expect("barrier_mark_d1", &bar(&b, &d1, 6, 0), "OK mark=6");
    r.expect("barrier_mark_d2", &bar(&b, &d2, 2, 0), "OK mark=2");
    r.expect("barrier_wait_id_0", &bar(&b, &d1, 0, 0), "OK mark=6");
    r.expect(
        "barrier_reached_dontwait",
        &bar(&b, &d1, 3, RDS_RDMA_DONTWAIT),
        "OK mark=6",
    );
    r.expect(
        "barrier_unused_destination",
        &bar(&b, &v4(LO, 4649), 0, 0),
        "OK mark=0",
    );
    r.expect(
        "barrier_unused_destination_wait",
        &bar(&b, &v4(LO, 4649), 1, 0),
        "EINVAL mark=unwritten",
    );
    r.expect(
        "barrier_never_issued",
        &bar(&b, &d1, 7, 0),
        "EINVAL mark=unwritten",
    );
    r.expect(
        "barrier_never_issued_max",
        &bar(&b, &d1, u64::MAX, RDS_RDMA_DONTWAIT),
        "EINVAL mark=unwritten",
    );
    // Bad arguments.
    let good = BarrierArgs::new(&d1, 0, 0, 0).encode();
    let mut long = good.to_vec();
    long.push(0);
    for (name, len) in [
        ("barrier_optlen_151", RDS_BARRIER_ARGS_SIZE - 1),
        ("barrier_optlen_153", RDS_BARRIER_ARGS_SIZE + 1),
        ("barrier_optlen_0", 0),
        ("barrier_optlen_8", 8),
    ] {
        r.expect(
            name,
            &res_obs(&b.barrier_raw(UserBuf::Bytes(&long), len)),
            "EINVAL",
        );
    }
    r.expect(
        "barrier_optlen_152_ok",
        &res_obs(&b.barrier_raw(UserBuf::Bytes(&good), RDS_BARRIER_ARGS_SIZE)),
        "OK",
    );
    for (name, flags) in [
        ("barrier_flags_1", 1u64),
        ("barrier_flags_notify_me", RDS_RDMA_NOTIFY_ME),
        (
            "barrier_flags_dontwait_and_1_shl_40",
            RDS_RDMA_DONTWAIT | 1 << 40,
        ),
    ] {
        let a = BarrierArgs::new(&d1, 0, 0, flags).encode();
        r.expect(
            name,
            &res_obs(&b.barrier_raw(UserBuf::Bytes(&a), a.len())),
            "EINVAL",
        );
    }
    let fault = FaultRegion::unmapped(4096).map_err(|e| format!("mmap: {e}"))?;
    let ro = FaultRegion::read_only(4096).map_err(|e| format!("mmap: {e}"))?;
    r.expect(
        "barrier_args_null",
        &res_obs(&b.barrier_raw(UserBuf::Null, RDS_BARRIER_ARGS_SIZE)),
        "EFAULT",
    );
    r.expect(
        "barrier_args_unmapped",
        &res_obs(&b.barrier_raw(UserBuf::Fault(&fault), RDS_BARRIER_ARGS_SIZE)),
        "EFAULT",
    );
    for (name, addr) in [
        ("barrier_mark_addr_unmapped", fault.addr() as u64),
        ("barrier_mark_addr_read_only", ro.addr() as u64),
    ] {
        let a = BarrierArgs::new(&d1, 6, addr, 0).encode();
        r.expect(
            name,
            &res_obs(&b.barrier_raw(UserBuf::Bytes(&a), a.len())),
            "EFAULT",
        );
    }
    let mut a = BarrierArgs::new(&d1, 0, 0, 0);
    a.dest = [0; 128];
    let enc = a.encode();
    r.expect(
        "barrier_dest_af_unspec",
        &res_obs(&b.barrier_raw(UserBuf::Bytes(&enc), enc.len())),
        "EINVAL",
    );
    let _ = drain(&e.c);
    let _ = drain(&c2);

    // Not reached yet: non-blocking (DONTWAIT, O_NONBLOCK) EAGAIN, a timeout, and a waiter
    // that the completion wakes.
    {
        let hold = Hold::on()?;
        let (res, id) = send(&d1, &op(cookie, 0, 0, 0), b"held");
        r.expect(
            "barrier_held_op_sent",
            &format!("{} id={id}", res_obs(&res)),
            "OK id=7",
        );
        r.expect(
            "barrier_dontwait_not_reached",
            &bar(&b, &d1, id, RDS_RDMA_DONTWAIT),
            "EAGAIN mark=6",
        );
        let _ = b.set_nonblocking(true);
        r.expect(
            "barrier_o_nonblock_not_reached",
            &bar(&b, &d1, id, 0),
            "EAGAIN mark=6",
        );
        let _ = b.set_nonblocking(false);
        let _ = b.set_recv_timeout(Some(Duration::from_millis(300)));
        let t = Instant::now();
        let o = bar(&b, &d1, id, 0);
        let waited = t.elapsed() >= Duration::from_millis(250);
        let _ = b.set_recv_timeout(Some(arrival_bound()));
        r.expect(
            "barrier_timeout",
            &format!("{o} waited={waited}"),
            "ETIMEDOUT mark=6 waited=true",
        );
        let obs = std::thread::scope(|sc| {
            let waiter = sc.spawn(|| bar(&b, &d1, id, 0));
            std::thread::sleep(Duration::from_millis(400));
            let early = waiter.is_finished();
            drop(hold);
            let _ = e.s.send_to(b"flush", d1);
            let res = waiter.join().unwrap_or_else(|_| "panicked".into());
            format!("early={early} {res}")
        });
        r.expect("barrier_blocking_woken", &obs, "early=false OK mark=7");
    }
    r.expect(
        "barrier_held_messages_arrive",
        &format!("{} {}", got(&e.c), got(&e.c)),
        "got=held got=flush",
    );

    // Many operations, one barrier.
    let mut first = 0;
    let mut last = 0;
    let mut fails = 0;
    for i in 0..100 {
        let (res, id) = send(&d1, &op(cookie, 16, RDS_RDMA_SILENT, 0), b"");
        if res.is_err() {
            fails += 1;
        }
        if i == 0 {
            first = id;
        }
        last = id;
    }
    r.expect(
        "barrier_many_ops",
        &format!(
            "fails={fails} first={first} last={last} {}",
            bar(&b, &d1, last, 0)
        ),
        "fails=0 first=8 last=107 OK mark=107",
    );

    // Failed operations complete.
    let (_, fid) = send(&d1, &op(dead, 0, RDS_RDMA_NOTIFY_ME, 900), b"x");
    r.expect(
        "barrier_failed_op_completes",
        &format!(
            "id={fid} note={} {}",
            one_note(&b),
            bar(&b, &d1, fid, RDS_RDMA_DONTWAIT)
        ),
        "id=108 note=REMOTE_ERROR#900 OK mark=108",
    );
    // A failure between two successes, all held, then released.
    let mid;
    {
        let _hold = Hold::on()?;
        let _ = send(&d1, &op(cookie, 0, 0, 0), b"m1");
        mid = send(&d1, &op(dead, 0, RDS_RDMA_NOTIFY_ME, 901), b"m2").1;
        let _ = send(&d1, &op(cookie, 0, 0, 0), b"m3");
        r.expect(
            "barrier_held_three",
            &bar(&b, &d1, mid + 1, RDS_RDMA_DONTWAIT),
            "EAGAIN mark=108",
        );
    }
    let _ = e.s.send_to(b"flush", d1);
    r.expect(
        "barrier_over_failed_op",
        &format!(
            "{} note={} client={} {} {}",
            bar(&b, &d1, mid + 1, 0),
            one_note(&b),
            got(&e.c),
            got(&e.c),
            got(&e.c)
        ),
        "OK mark=111 note=REMOTE_ERROR#901 client=got=m1 got=m3 got=flush",
    );

    // Cancelled operations complete, with RDS_RDMA_CANCELED for those that asked.
    cmem.fill(0xEE);
    let (last1, id2);
    {
        let _hold = Hold::on()?;
        let mut l = 0;
        for t in 801..=803 {
            l = send(&d1, &op(cookie, 128, RDS_RDMA_NOTIFY_ME, t), b"cancelled").1;
        }
        last1 = l;
        id2 = send(&d2, &op(cookie2, 0, RDS_RDMA_NOTIFY_ME, 804), b"to-d2").1;
        r.expect("cancel_sent_to", &res_obs(&cancel(&b, &d1)), "OK");
        let (v, other) = wait_notes(&b, 3);
        r.expect(
            "cancel_notifications",
            &format!("{} other={other}", notes_obs(&v)),
            "CANCELED#801,CANCELED#802,CANCELED#803 other=0",
        );
        r.expect(
            "cancel_raises_mark",
            &bar(&b, &d1, last1, RDS_RDMA_DONTWAIT),
            "OK mark=114",
        );
        r.expect(
            "cancel_other_destination_still_held",
            &format!("id={id2} {}", bar(&b, &d2, id2, RDS_RDMA_DONTWAIT)),
            "id=3 EAGAIN mark=2",
        );
    }
    let _ = b.send_to(b"flush", d1);
    r.expect(
        "cancel_other_destination_goes",
        &format!(
            "{} note={} c2={}",
            bar(&b, &d2, id2, 0),
            one_note(&b),
            got(&c2)
        ),
        "OK mark=3 note=OK#804 c2=got=to-d2",
    );
    r.expect(
        "cancelled_not_delivered",
        &format!(
            "{} then={} data={}",
            got(&e.c),
            nothing_or(&e.c, Duration::from_millis(200), "more"),
            same(&cmem.read(128, 16), &[0xEE; 16])
        ),
        "got=flush then=nothing data=ok",
    );
    // RECVERR does not report cancelled operations.
    let _ = b.set_int(SOL_RDS, librds::RDS_RECVERR, 1);
    {
        let _hold = Hold::on()?;
        let (_, id) = send(&d1, &op(cookie, 128, 0, 805), b"cancelled");
        let _ = cancel(&b, &d1);
        std::thread::sleep(Duration::from_millis(100));
        r.expect(
            "cancel_recverr_silent",
            &format!(
                "{} notes={}",
                bar(&b, &d1, id, RDS_RDMA_DONTWAIT),
                match recv_notes(&b, 8) {
                    Ok(None) => "none".to_string(),
                    Ok(Some((_, _, v))) => notes_obs(&v),
                    Err(err) => err,
                }
            ),
            "OK mark=115 notes=none",
        );
    }
    let _ = b.set_int(SOL_RDS, librds::RDS_RECVERR, 0);
    let _ = b.send_to(b"flush", d1);
    let _ = got(&e.c);

    // The window: at most 4096 operations outstanding per destination.
    let w = big(v4(LO, 4642))?;
    {
        let _hold = Hold::on()?;
        let t0 = Instant::now();
        let mut accepted = 0u64;
        let mut stop = String::from("none");
        let mut wid = 0u64;
        for _ in 0..4096 {
            let mut id = 0;
            match rdma_op(
                &w,
                &d1,
                &op(cookie, 32, RDS_RDMA_SILENT, 0),
                b"",
                Some(&mut id),
                libc::MSG_DONTWAIT,
            ) {
                Ok(_) => {
                    accepted += 1;
                    wid = id;
                }
                Err(err) => {
                    stop = err_name(&err);
                    break;
                }
            }
        }
        println!("# 4096 held operations queued in {:?}", t0.elapsed());
        let next = rdma_op(
            &w,
            &d1,
            &op(cookie, 32, RDS_RDMA_SILENT, 0),
            b"",
            None,
            libc::MSG_DONTWAIT,
        );
        let _ = w.set_send_timeout(Some(Duration::from_millis(200)));
        let blocking = rdma_op(&w, &d1, &op(cookie, 32, RDS_RDMA_SILENT, 0), b"", None, 0);
        r.expect(
            "window_4096",
            &format!(
                "accepted={accepted} stop={stop} last_id={wid} next={} blocking={}",
                res_obs(&next),
                res_obs(&blocking)
            ),
            "accepted=4096 stop=none last_id=4096 next=EAGAIN blocking=ETIMEDOUT",
        );
        let _ = cancel(&w, &d1);
        let mut id = 0;
        let after = rdma_op(
            &w,
            &d1,
            &op(cookie, 32, RDS_RDMA_SILENT, 0),
            b"",
            Some(&mut id),
            libc::MSG_DONTWAIT,
        );
        r.expect(
            "window_after_cancel",
            &format!(
                "{} {} id={id}",
                bar(&w, &d1, 4096, RDS_RDMA_DONTWAIT),
                res_obs(&after)
            ),
            "OK mark=4096 OK id=4097",
        );
    }
    let _ = w.send_to(b"flush", d1);
    r.expect(
        "window_released",
        &format!("{} {}", bar(&w, &d1, 4097, 0), got(&e.c)),
        "OK mark=4097 got=flush",
    );
    drop(w);

    // Close with operations in flight.
    let lck0 = vmpin_kb();
    cmem.fill(0xEE);
    {
        let _hold = Hold::on()?;
        let x = big(v4(LO, 4643))?;
        for t in 0..3 {
            let o = op(cookie, 256 + 16 * t, RDS_RDMA_NOTIFY_ME, t);
            let _ = rdma_op(&x, &d1, &o, b"from-x", None, 0);
        }
        let a = AtomicArgs {
            cookie,
            local_addr: smem.at(512),
            remote_addr: 512,
            op: AtomicOp::Fadd { add: 1 },
            flags: RDS_RDMA_NOTIFY_ME,
            user_token: 9,
        };
        let _ = crate::rdma::atomic_op(&x, &d1, &a, b"from-x", None);
        drop(x);
    }
    let _ = b.send_to(b"flush-x", d1);
    r.expect(
        "close_sender_with_ops_queued",
        &format!(
            "{} then={} data={}",
            got(&e.c),
            nothing_or(&e.c, Duration::from_millis(200), "more"),
            same(&cmem.read(256, 264), &[0xEE; 264])
        ),
        "got=flush-x then=nothing data=ok",
    );
    let ymem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    {
        let _hold = Hold::on()?;
        let y = big(v4(LO, 4644))?;
        let ycookie = y
            .get_mr(ymem.at(0), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
        let _ = rdma_op(
            &b,
            &v4(LO, 4644),
            &op(ycookie, 0, RDS_RDMA_NOTIFY_ME, 850),
            b"to-y",
            None,
            0,
        );
        drop(y);
        r.expect(
            "close_owner_frees_registration",
            &format!("vmpin={:+}", vmpin_kb() - lck0),
            "vmpin=+0",
        );
    }
    let _ = b.send_to(b"flush-y", d1);
    r.expect(
        "close_owner_with_op_queued",
        &format!("note={} client={}", one_note(&b), got(&e.c)),
        "note=REMOTE_ERROR#850 client=got=flush-y",
    );
    // Closing with a notification unread and registrations left: the registrations (one
    // page each, charged to VmPin) are freed with the socket.
    {
        let z = big(v4(LO, 4645))?;
        let regs: Vec<String> = (0..3)
            .map(|i| res_obs(&z.get_mr(ymem.at(i * 64), 64, RDS_RDMA_READWRITE)))
            .collect();
        let registered = vmpin_kb() - lck0;
        let sent = rdma_op(
            &z,
            &d1,
            &op(cookie, 0, RDS_RDMA_NOTIFY_ME, 1),
            b"z",
            None,
            0,
        );
        let client = got(&e.c);
        let done = bar(&z, &d1, 1, 0);
        // The first poll takes the congestion map updates a fresh socket sees once; then
        // POLLIN is the notification (z receives no messages).
        let _ = z.poll(libc::POLLIN, Duration::ZERO);
        let pending = z
            .poll(libc::POLLIN, Duration::ZERO)
            .is_ok_and(|ev| ev & libc::POLLIN != 0);
        r.expect(
            "close_with_notification_and_registrations_setup",
            &format!(
                "regs={} vmpin={registered:+} {} client={client} {done} pending={pending}",
                regs.join(","),
                res_obs(&sent)
            ),
            "regs=OK,OK,OK vmpin=+12 OK client=got=z OK mark=1 pending=true",
        );
        drop(z);
        r.expect(
            "close_with_notification_and_registrations",
            &format!("vmpin={:+}{}", vmpin_kb() - lck0, leftovers(&e.c, &b)),
            "vmpin=+0",
        );
    }
    // Both ends close while an operation between them is held.
    {
        let _hold = Hold::on()?;
        let c3 = big(v4(LO, 4646))?;
        let x2 = big(v4(LO, 4647))?;
        let c3cookie = c3
            .get_mr(ymem.at(1024), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
        let _ = rdma_op(
            &x2,
            &v4(LO, 4646),
            &op(c3cookie, 0, RDS_RDMA_NOTIFY_ME, 1),
            b"",
            None,
            0,
        );
        let _ = rdma_op(
            &x2,
            &v4(LO, 4646),
            &op(cookie, 0, RDS_RDMA_NOTIFY_ME, 2),
            b"",
            None,
            0,
        );
        drop(c3);
        drop(x2);
    }
    let _ = b.send_to(b"flush-z", d1);
    r.expect(
        "close_both_ends_then_release",
        &format!(
            "{} vmpin={:+}{}",
            got(&e.c),
            vmpin_kb() - lck0,
            leftovers(&e.c, &b)
        ),
        "got=flush-z vmpin=+0",
    );
    held_ops_one_barrier(r, e, &b)?;
    rdma_map_refused(r, e, &smem, cookie)?;
    let _ = e.c.free_mr(cookie, 0);
    let _ = c2.free_mr(cookie2, 0);
    Ok(())
}

/// Many RDMA writes held to one destination: while held, their target is untouched and one
/// barrier call blocks; after the release it returns once, with the mark of the last, and a
/// receiver reading the messages as they come finds each write's data in place.
fn held_ops_one_barrier(r: &mut Report, e: &mut Env, b: &RdsSocket) -> Result<(), String> {
    const N: usize = 16;
    const SEG: usize = 64;
    let d5 = v4(LO, 4650);
    let c5 = big(d5)?;
    let target = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let src = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    target.fill(0xEE);
    let data: Vec<Vec<u8>> = (0..N).map(|i| pattern(SEG, 500 + i as u64)).collect();
    for (i, d) in data.iter().enumerate() {
        src.write(i * SEG, d);
    }
    let cookie5 = c5
        .get_mr(target.at(0), (N * SEG) as u64, RDS_RDMA_READWRITE)
        .map_err(|err| format!("GET_MR: {err}"))?;
    let hold = Hold::on()?;
    let mut ids = Vec::new();
    let mut fails = 0;
    for i in 0..N {
        let o = Op {
            cookie: cookie5,
            remote_addr: (i * SEG) as u64,
            remote_bytes: SEG as u64,
            local: vec![RdsIovec {
                addr: src.at(i * SEG),
                bytes: SEG as u64,
            }],
            flags: RDS_RDMA_READWRITE,
            token: 0,
        };
        let mut id = 0;
        if rdma_op(b, &d5, &o, format!("w{i}").as_bytes(), Some(&mut id), 0).is_err() {
            fails += 1;
        }
        ids.push(id);
    }
    r.expect(
        "barrier_held_16_ops",
        &format!("fails={fails} ids={:?}", ids),
        &format!("fails=0 ids={:?}", (1..=N as u64).collect::<Vec<_>>()),
    );
    r.expect(
        "rdma_write_held_target_untouched",
        &format!(
            "data={} client={} {}",
            same(&target.read(0, 4096), &[0xEE; 4096]),
            nothing_or(&c5, Duration::from_millis(200), "message"),
            bar(b, &d5, 1, RDS_RDMA_DONTWAIT)
        ),
        "data=ok client=nothing EAGAIN mark=0",
    );
    let last = ids[N - 1];
    let (waited, seen) = std::thread::scope(|sc| {
        let waiter = sc.spawn(|| bar(b, &d5, last, 0));
        // Reads the messages as they arrive; on each, checks that its write is in place.
        let reader = sc.spawn(|| {
            let mut v = Vec::new();
            let mut buf = [0u8; 64];
            for _ in 0..=N {
                match c5.recv(&mut buf, 0) {
                    Ok(n) => {
                        let label = String::from_utf8_lossy(&buf[..n]).into_owned();
                        let i = label
                            .strip_prefix('w')
                            .and_then(|x| x.parse::<usize>().ok())
                            .filter(|i| *i < N);
                        match i {
                            Some(i) => v.push(format!(
                                "{label}={}",
                                same(&target.read(i * SEG, SEG), &data[i])
                            )),
                            None => v.push(label),
                        }
                    }
                    Err(err) => {
                        v.push(err_name(&err));
                        break;
                    }
                }
            }
            v.join(",")
        });
        std::thread::sleep(Duration::from_millis(400));
        let early = format!(
            "early_barrier={} early_reader={}",
            waiter.is_finished(),
            reader.is_finished()
        );
        drop(hold);
        let _ = e.s.send_to(b"flush", d5);
        let w = waiter.join().unwrap_or_else(|_| "panicked".into());
        let seen = reader.join().unwrap_or_else(|_| "panicked".into());
        (format!("{early} {w}"), seen)
    });
    r.expect(
        "barrier_one_call_many_completions",
        &waited,
        &format!("early_barrier=false early_reader=false OK mark={N}"),
    );
    let want: Vec<String> = (0..N).map(|i| format!("w{i}=ok")).collect();
    r.expect(
        "rdma_write_data_in_place_on_arrival",
        &seen,
        &format!("{},flush", want.join(",")),
    );
    let mut all = vec![0xEE; 4096];
    for (i, d) in data.iter().enumerate() {
        all[i * SEG..(i + 1) * SEG].copy_from_slice(d);
    }
    r.expect(
        "rdma_write_held_then_all_data",
        &format!(
            "data={}{}",
            same(&target.read(0, 4096), &all),
            leftovers(&c5, b)
        ),
        "data=ok",
    );
    let _ = c5.free_mr(cookie5, 0);
    Ok(())
}

/// A `sendmsg` with `RDS_CMSG_RDMA_MAP` refused because the send buffer is full (`EAGAIN`,
/// or `ETIMEDOUT` after `SO_SNDTIMEO`): the registration it made is undone (VmPin back, the
/// cookie written to the caller names nothing), nothing is sent; an operation refused the
/// same way takes no id.
fn rdma_map_refused(
    r: &mut Report,
    e: &mut Env,
    smem: &RdmaMem,
    cookie: u64,
) -> Result<(), String> {
    let d6 = v4(LO, 4651);
    let rx = big(d6)?;
    let m = crate::util::bound(v4(LO, 4652))?;
    m.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, 4096)
        .map_err(|err| format!("SO_SNDBUF: {err}"))?;
    let mapmem = RdmaMem::new(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let lck = vmpin_kb();
    let filler = [0x46u8; 1000];
    let map = |flags: i32| -> String {
        let mut cookie = 0u64;
        let mut c = ControlBuf::new();
        c.rdma_map(&GetMrArgs {
            vec: RdsIovec {
                addr: mapmem.at(100),
                bytes: 300,
            },
            cookie_addr: &mut cookie as *mut u64 as u64,
            flags: RDS_RDMA_READWRITE,
        });
        let res = send_ctl(&m, &d6, b"map", &c, flags);
        let vm = vmpin_kb() - lck;
        // SAFETY: `cookie` is a live local the kernel may have written.
        let cookie = unsafe { std::ptr::read_volatile(&cookie) };
        let after = if cookie == 0 {
            "cookie=unwritten".to_string()
        } else {
            format!("cookie=written free={}", res_obs(&m.free_mr(cookie, 0)))
        };
        format!("{} vmpin={vm:+} {after}", res_obs(&res))
    };
    // An operation from m to the client.
    let o = Op {
        cookie,
        remote_addr: 0,
        remote_bytes: 16,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 16,
        }],
        flags: RDS_RDMA_READWRITE,
        token: 0,
    };
    {
        let _hold = Hold::on()?;
        let mut accepted = 0;
        let stop = loop {
            match m.send_to_flags(&filler, &d6, libc::MSG_DONTWAIT) {
                Ok(_) => accepted += 1,
                Err(err) => break err_name(&err),
            }
            if accepted == 64 {
                break "none".into();
            }
        };
        r.expect(
            "rdma_map_full_sndbuf_setup",
            &format!("accepted={accepted} stop={stop}"),
            &format!(
                "accepted={} stop=EAGAIN",
                crate::util::rs_admitted(4096, filler.len())
            ),
        );
        r.expect(
            "rdma_map_eagain_undone",
            &map(libc::MSG_DONTWAIT),
            "EAGAIN vmpin=+0 cookie=written free=EINVAL",
        );
        let _ = m.set_send_timeout(Some(Duration::from_millis(200)));
        r.expect(
            "rdma_map_etimedout_undone",
            &map(0),
            "ETIMEDOUT vmpin=+0 cookie=written free=EINVAL",
        );
        let _ = m.set_send_timeout(Some(arrival_bound()));
        // An operation refused for the full buffer takes no id.
        let mut id = 12345u64;
        let res = rdma_op(&m, &e.ca, &o, b"op", Some(&mut id), libc::MSG_DONTWAIT);
        r.expect(
            "rdma_op_eagain_takes_no_id",
            &format!("{} id={id}", res_obs(&res)),
            "EAGAIN id=12345",
        );
    }
    // The release (m's buffer is still full: another socket's send on the connection), then
    // an operation from m to the client: its first, id 1.
    let kick = res_obs(&e.s.send_to(b"flush", e.ca));
    let mut id = 0u64;
    let res = rdma_op(&m, &e.ca, &o, b"op", Some(&mut id), 0);
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 2048];
    while crate::util::wait_msg_for(&rx, Duration::from_millis(300)) {
        match rx.recv(&mut buf, libc::MSG_DONTWAIT) {
            Ok(n) if buf[..n] == filler => seen.push("fill".to_string()),
            Ok(n) => seen.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(err) => {
                seen.push(err_name(&err));
                break;
            }
        }
    }
    r.expect(
        "rdma_map_refused_nothing_sent",
        &format!(
            "kick={kick} {} id={id} client={},{} rx={} vmpin={:+}",
            res_obs(&res),
            got(&e.c),
            got(&e.c),
            seen.join(","),
            vmpin_kb() - lck
        ),
        &format!(
            "kick=OK OK id=1 client=got=flush,got=op rx={} vmpin=+0",
            vec!["fill"; crate::util::rs_admitted(4096, filler.len())].join(",")
        ),
    );
    many_destinations(r, e, smem)
}

/// A socket that sends operations to many destinations keeps trackers only for some of them
/// (it forgets those with nothing outstanding), and what it reports stays true: each
/// destination's ids still increase, a forgotten destination's mark covers its ops, and an id
/// never sent there is refused.
fn many_destinations(r: &mut Report, e: &mut Env, smem: &RdmaMem) -> Result<(), String> {
    let tmem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let cookie =
        e.c.get_mr(tmem.at(0), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let t = big(v4(LO, 4661))?;
    // Silent operations with no payload send no message: no receiver is needed at the ports.
    let o = Op {
        cookie,
        remote_addr: 0,
        remote_bytes: 8,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 8,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_SILENT,
        token: 0,
    };
    let dests: Vec<SocketAddr> = (0..100).map(|i| v4(LO, 5100 + i)).collect();
    let mut ids = Vec::new();
    let mut errors = 0;
    for d in &dests {
        let mut id = 0u64;
        if rdma_op(&t, d, &o, b"", Some(&mut id), 0).is_err() {
            errors += 1;
        }
        ids.push(id);
    }
    let first64 = ids.iter().take(64).all(|&id| id == 1);
    let distinct_after: BTreeSet<u64> = ids.iter().skip(64).copied().collect();
    r.expect(
        "many_destinations_ids",
        &format!(
            "errors={errors} first64_all_1={first64} later_nonzero={}",
            ids.iter().skip(64).all(|&id| id > 0)
        ),
        "errors=0 first64_all_1=true later_nonzero=true",
    );
    println!("# ids past the first 64 destinations: {distinct_after:?}");
    // Destination 0 was forgotten: its op (id 1) is covered by its mark; id 2 was never sent
    // there.
    let d0 = dests[0];
    let before = bar(&t, &d0, 1, 0);
    let never = bar(&t, &d0, ids.iter().copied().max().unwrap_or(0) + 1, 0);
    let mut again = 0u64;
    let res = rdma_op(&t, &d0, &o, b"", Some(&mut again), 0);
    let after = bar(&t, &d0, again, 0);
    r.expect(
        "many_destinations_forgotten_barrier",
        &format!(
            "before={before} never={} again={} increases={} after={}",
            never.split(' ').next().unwrap_or(""),
            res_obs(&res),
            again > 1,
            after.split(' ').next().unwrap_or("")
        ),
        "before=OK mark=1 never=EINVAL again=OK increases=true after=OK",
    );
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}
