//! The `RDS_INFO_*` getsockopt interface: the length protocol (probe with length 0, too
//! small, exact, negative, unmapped) of every option number, and the contents of the socket,
//! connection, message and counter lists after a known exchange.
//!
//! Runs in a new network namespace so the lists hold only what this suite made (C and rds_rs
//! both list sockets, connections and queued messages per namespace); the counters are
//! global, so only their deltas across an exchange are compared, by name (C's list also holds
//! rds_tcp's counters).
//!
//! Ports 4460-4479 on 127.0.0.1, 127.0.0.2 and ::1.

use crate::util::{
    addr_obs, arrival_bound, bound, drain, err_name, fresh, in_new_netns, ip_obs, res_obs, v4,
    v6_lo, wait_msg, wait_msg_for, Counters,
};
use crate::Report;
use librds::info::*;
use librds::{FaultRegion, RdsSocket, UserBufMut, SOL_RDS};
use std::time::{Duration, Instant};

fn opt_name(opt: i32) -> String {
    match opt {
        RDS_INFO_COUNTERS => "counters".into(),
        RDS_INFO_CONNECTIONS => "connections".into(),
        RDS_INFO_SEND_MESSAGES => "send_messages".into(),
        RDS_INFO_RETRANS_MESSAGES => "retrans_messages".into(),
        RDS_INFO_RECV_MESSAGES => "recv_messages".into(),
        RDS_INFO_SOCKETS => "sockets".into(),
        RDS_INFO_TCP_SOCKETS => "tcp_sockets".into(),
        RDS_INFO_IB_CONNECTIONS => "ib_connections".into(),
        RDS_INFO_CONNECTION_STATS => "connection_stats".into(),
        RDS_INFO_IWARP_CONNECTIONS => "iwarp_connections".into(),
        RDS6_INFO_CONNECTIONS => "6_connections".into(),
        RDS6_INFO_SEND_MESSAGES => "6_send_messages".into(),
        RDS6_INFO_RETRANS_MESSAGES => "6_retrans_messages".into(),
        RDS6_INFO_RECV_MESSAGES => "6_recv_messages".into(),
        RDS6_INFO_SOCKETS => "6_sockets".into(),
        RDS6_INFO_TCP_SOCKETS => "6_tcp_sockets".into(),
        RDS6_INFO_IB_CONNECTIONS => "6_ib_connections".into(),
        n => format!("{n}"),
    }
}

/// `ret=N optlen=M` or `ERRNO optlen=M`.
fn reply_obs(s: &RdsSocket, opt: i32, len: i32) -> String {
    let r = s.info(opt, len);
    match r.ret {
        Ok(v) => format!("ret={v} optlen={}", r.optlen),
        Err(e) => format!("{} optlen={}", err_name(&e), r.optlen),
    }
}

fn sockets_obs(l: &[SocketInfo]) -> String {
    let mut v: Vec<String> = l
        .iter()
        .map(|s| {
            format!(
                "{}>{} snd={} rcv={}",
                addr_obs(&s.bound),
                addr_obs(&s.connected),
                s.sndbuf,
                s.rcvbuf
            )
        })
        .collect();
    v.sort();
    v.join(",")
}

fn conns_obs(l: &[ConnectionInfo]) -> String {
    let mut v: Vec<String> = l
        .iter()
        .map(|c| {
            format!(
                "{}>{} {} tx={} rx={} flags={}{}",
                ip_obs(&c.laddr),
                ip_obs(&c.faddr),
                c.transport,
                c.next_tx_seq,
                c.next_rx_seq,
                c.flags,
                c.tos.map_or(String::new(), |t| format!(" tos={t}"))
            )
        })
        .collect();
    v.sort();
    crate::util::joined_or_none(&v, ",")
}

fn msgs_obs(l: &[MessageInfo]) -> String {
    let mut v: Vec<String> = l
        .iter()
        .map(|m| {
            format!(
                "seq={} len={} {}/{}<{}/{} flags={} tos={}",
                m.seq,
                m.len,
                ip_obs(&m.laddr),
                m.lport,
                ip_obs(&m.faddr),
                m.fport,
                m.flags,
                m.tos
            )
        })
        .collect();
    v.sort();
    crate::util::joined_or_none(&v, ",")
}

fn ns_body(r: &mut Report) -> Result<(), String> {
    let mut put = |name: &str, obs: String, want: &str| r.expect(name, &obs, want);
    let s0 = fresh()?;

    // Every option number, probed with length 0 while nothing is bound: the item size when the
    // list is empty, ENOSPC and the needed length when not (RDS6_INFO_SOCKETS lists unbound
    // sockets too), ENOPROTOOPT when nothing provides it.
    for opt in RDS_INFO_FIRST..=RDS_INFO_LAST {
        let name = format!("info_probe_empty_{}", opt_name(opt));
        if opt == RDS_INFO_COUNTERS {
            continue;
        }
        let want = match opt {
            RDS_INFO_CONNECTIONS => "ret=42 optlen=0",
            RDS_INFO_SEND_MESSAGES | RDS_INFO_RETRANS_MESSAGES | RDS_INFO_RECV_MESSAGES => {
                "ret=26 optlen=0"
            }
            RDS_INFO_SOCKETS => "ret=28 optlen=0",
            RDS_INFO_TCP_SOCKETS => "ret=41 optlen=0",
            RDS6_INFO_CONNECTIONS => "ret=65 optlen=0",
            RDS6_INFO_SEND_MESSAGES | RDS6_INFO_RETRANS_MESSAGES | RDS6_INFO_RECV_MESSAGES => {
                "ret=50 optlen=0"
            }
            RDS6_INFO_SOCKETS => "ENOSPC optlen=52",
            RDS6_INFO_TCP_SOCKETS => "ret=64 optlen=0",
            RDS_INFO_IB_CONNECTIONS => "ret=68 optlen=0",
            RDS6_INFO_IB_CONNECTIONS => "ret=92 optlen=0",
            _ => "ENOPROTOOPT optlen=0",
        };
        put(&name, reply_obs(&s0, opt, 0), want);
    }

    // Bound sockets.
    let a = bound(v4([127, 0, 0, 1], 4460))?;
    let _ = a.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, 65536);
    let _ = a.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, 32768);
    let b = bound(v4([127, 0, 0, 2], 4461))?;
    let _ = a.connect(v4([127, 0, 0, 2], 4461));
    let e6 = bound(v6_lo(4462))?;
    let f6 = bound(v6_lo(4463))?;
    put(
        "info_sockets_probe",
        reply_obs(&s0, RDS_INFO_SOCKETS, 0),
        "ENOSPC optlen=56",
    );
    put(
        "info_sockets_len_27",
        reply_obs(&s0, RDS_INFO_SOCKETS, 27),
        "ENOSPC optlen=56",
    );
    put(
        "info_sockets_len_55",
        reply_obs(&s0, RDS_INFO_SOCKETS, 55),
        "ENOSPC optlen=56",
    );
    put(
        "info_sockets_exact",
        reply_obs(&s0, RDS_INFO_SOCKETS, 56),
        "ret=28 optlen=56",
    );
    put(
        "info_sockets_larger",
        reply_obs(&s0, RDS_INFO_SOCKETS, 1000),
        "ret=28 optlen=56",
    );
    let default_snd = fresh()?
        .get_int(libc::SOL_SOCKET, libc::SO_SNDBUF)
        .map_err(|e| format!("SO_SNDBUF: {e}"))?
        / 2;
    let default_rcv = fresh()?
        .get_int(libc::SOL_SOCKET, libc::SO_RCVBUF)
        .map_err(|e| format!("SO_RCVBUF: {e}"))?
        / 2;
    let socks = s0.sockets(false);
    put(
        "info_sockets_list",
        socks
            .as_ref()
            .map_or_else(err_name, |l| sockets_obs(l)),
        &format!(
            "127.0.0.1/4460>127.0.0.2/4461 snd=65536 rcv=32768,127.0.0.2/4461>0.0.0.0/0 snd={default_snd} rcv={default_rcv}"
        ),
    );
    let inum_ok = socks.as_ref().is_ok_and(|l| {
        l.iter()
            .any(|s| s.bound.port() == 4460 && Some(s.inum) == a.inode().ok())
            && l.iter()
                .any(|s| s.bound.port() == 4461 && Some(s.inum) == b.inode().ok())
    });
    put(
        "info_sockets_inum",
        format!("matches_fstat={inum_ok}"),
        "matches_fstat=true",
    );
    put(
        "info6_sockets_probe",
        reply_obs(&s0, RDS6_INFO_SOCKETS, 0),
        "ENOSPC optlen=260",
    );
    put(
        "info6_sockets_exact",
        reply_obs(&s0, RDS6_INFO_SOCKETS, 260),
        "ret=52 optlen=260",
    );
    put(
        "info6_sockets_list",
        s0.sockets(true)
            .map_or_else(|e| err_name(&e), |l| sockets_obs(&l)),
        &format!(
            "__/0>__/0 snd={default_snd} rcv={default_rcv},__1/4462>__/0 snd={default_snd} rcv={default_rcv},__1/4463>__/0 snd={default_snd} rcv={default_rcv},__ffff_127.0.0.1/4460>__ffff_127.0.0.2/4461 snd=65536 rcv=32768,__ffff_127.0.0.2/4461>__/0 snd={default_snd} rcv={default_rcv}"
        ),
    );

    // Bad lengths and buffers.
    put(
        "info_len_negative",
        reply_obs(&s0, RDS_INFO_SOCKETS, -1),
        "EINVAL optlen=-1",
    );
    put(
        "info_len_over_int_max_minus_page",
        reply_obs(&s0, RDS_INFO_SOCKETS, i32::MAX - 4096 + 2),
        "EINVAL optlen=2147479553",
    );
    let fault = FaultRegion::unmapped(8192).map_err(|e| format!("mmap: {e}"))?;
    let ro = FaultRegion::read_only(8192).map_err(|e| format!("mmap: {e}"))?;
    for (name, region) in [
        ("info_buffer_unmapped", &fault),
        ("info_buffer_read_only", &ro),
    ] {
        let (res, optlen) =
            s0.getsockopt_ptr(SOL_RDS, RDS_INFO_SOCKETS, UserBufMut::Fault(region), 4096);
        put(
            name,
            format!("{} optlen={optlen}", res_obs(&res)),
            "EAGAIN optlen=4096",
        );
    }
    let (res, optlen) = s0.getsockopt_ptr(SOL_RDS, RDS_INFO_SOCKETS, UserBufMut::Null, 100);
    put(
        "info_buffer_null",
        format!("{} optlen={optlen}", res_obs(&res)),
        "EAGAIN optlen=100",
    );
    let (res, optlen) = s0.getsockopt_ptr(SOL_RDS, 10002, UserBufMut::Fault(&fault), 4096);
    put(
        "info_unassigned_buffer_unmapped",
        format!("{} optlen={optlen}", res_obs(&res)),
        "EAGAIN optlen=4096",
    );
    put(
        "info_optlen_unmapped",
        res_obs(&s0.getsockopt_bad_optlen(SOL_RDS, RDS_INFO_SOCKETS, &fault)),
        "EFAULT",
    );

    // Traffic: 127.0.0.1 -> 127.0.0.2 three messages, one back, one left unread; ::1 -> ::1.
    let to_b = v4([127, 0, 0, 2], 4461);
    for m in [&b"m1"[..], b"m2", b"m3"] {
        a.send_to(m, to_b).map_err(|e| format!("send: {e}"))?;
    }
    let mut got = 0;
    let t0 = Instant::now();
    while got < 3 && t0.elapsed() < arrival_bound() {
        if wait_msg_for(&b, Duration::from_millis(100)) {
            got += drain(&b);
        }
    }
    b.send_to(b"back", v4([127, 0, 0, 1], 4460))
        .map_err(|e| format!("send back: {e}"))?;
    if !wait_msg(&a) {
        return Err("reply did not arrive".into());
    }
    drain(&a);
    e6.send_to(b"six", v6_lo(4463))
        .map_err(|e| format!("send v6: {e}"))?;
    if !wait_msg(&f6) {
        return Err("v6 message did not arrive".into());
    }
    drain(&f6);
    a.send_to(b"unread", to_b)
        .map_err(|e| format!("send: {e}"))?;
    let _ = wait_msg(&b);
    std::thread::sleep(Duration::from_millis(200));
    put(
        "info_exchange_received",
        format!("received={got}"),
        "received=3",
    );

    put(
        "info_connections_probe",
        reply_obs(&s0, RDS_INFO_CONNECTIONS, 0),
        "ENOSPC optlen=84",
    );
    put(
        "info_connections_len_41",
        reply_obs(&s0, RDS_INFO_CONNECTIONS, 41),
        "ENOSPC optlen=84",
    );
    put(
        "info_connections_len_42",
        reply_obs(&s0, RDS_INFO_CONNECTIONS, 42),
        "ENOSPC optlen=84",
    );
    put(
        "info_connections_exact",
        reply_obs(&s0, RDS_INFO_CONNECTIONS, 84),
        "ret=42 optlen=84",
    );
    put(
        "info_connections_list",
        s0.connections(false)
            .map_or_else(|e| err_name(&e), |l| conns_obs(&l)),
        "127.0.0.1>127.0.0.2 loopback tx=5 rx=5 flags=4 tos=0,127.0.0.2>127.0.0.1 loopback tx=2 rx=2 flags=4 tos=0",
    );
    put(
        "info6_connections_probe",
        reply_obs(&s0, RDS6_INFO_CONNECTIONS, 0),
        "ENOSPC optlen=195",
    );
    put(
        "info6_connections_list",
        s0.connections(true)
            .map_or_else(|e| err_name(&e), |l| conns_obs(&l)),
        "__1>__1 loopback tx=2 rx=2 flags=4,__ffff_127.0.0.1>__ffff_127.0.0.2 loopback tx=5 rx=5 flags=4,__ffff_127.0.0.2>__ffff_127.0.0.1 loopback tx=2 rx=2 flags=4",
    );
    put(
        "info_recv_messages_probe",
        reply_obs(&s0, RDS_INFO_RECV_MESSAGES, 0),
        "ENOSPC optlen=26",
    );
    put(
        "info_recv_messages_list",
        s0.messages(RDS_INFO_RECV_MESSAGES)
            .map_or_else(|e| err_name(&e), |l| msgs_obs(&l)),
        "seq=4 len=6 127.0.0.2/4461<127.0.0.1/4460 flags=0 tos=0",
    );
    put(
        "info6_recv_messages_list",
        s0.messages(RDS6_INFO_RECV_MESSAGES)
            .map_or_else(|e| err_name(&e), |l| msgs_obs(&l)),
        "seq=4 len=6 __ffff_127.0.0.2/4461<__ffff_127.0.0.1/4460 flags=0 tos=0",
    );
    for (opt, want) in [
        (RDS_INFO_SEND_MESSAGES, "ret=26 optlen=0"),
        (RDS_INFO_RETRANS_MESSAGES, "ret=26 optlen=0"),
        (RDS6_INFO_SEND_MESSAGES, "ret=50 optlen=0"),
        (RDS6_INFO_RETRANS_MESSAGES, "ret=50 optlen=0"),
        (RDS_INFO_TCP_SOCKETS, "ret=41 optlen=0"),
        (RDS6_INFO_TCP_SOCKETS, "ret=64 optlen=0"),
        (RDS_INFO_IB_CONNECTIONS, "ret=68 optlen=0"),
        (RDS6_INFO_IB_CONNECTIONS, "ret=92 optlen=0"),
        (RDS_INFO_CONNECTION_STATS, "ENOPROTOOPT optlen=0"),
        (RDS_INFO_IWARP_CONNECTIONS, "ENOPROTOOPT optlen=0"),
    ] {
        put(
            &format!("info_after_traffic_{}", opt_name(opt)),
            reply_obs(&s0, opt, 0),
            want,
        );
    }
    drain(&b);
    put(
        "info_recv_messages_after_read",
        reply_obs(&s0, RDS_INFO_RECV_MESSAGES, 0),
        "ret=26 optlen=0",
    );

    // Counters: the length protocol, C's names, and deltas across a known exchange over the
    // existing 127.0.0.1 -> 127.0.0.2 connection plus one message to an unbound port.
    let r = s0.info(RDS_INFO_COUNTERS, 0);
    let probe = match &r.ret {
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => format!(
            "ENOSPC multiple_of_40={} at_least_36={}",
            r.optlen % 40 == 0,
            r.optlen >= 36 * 40
        ),
        Err(e) => err_name(e),
        Ok(v) => format!("ret={v}"),
    };
    put(
        "info_counters_probe",
        probe,
        "ENOSPC multiple_of_40=true at_least_36=true",
    );
    let r = s0.info(RDS_INFO_COUNTERS, 40);
    put("info_counters_len_40", res_obs(&r.ret), "ENOSPC");
    let total = s0.info(RDS_INFO_COUNTERS, 0).optlen;
    let r = s0.info(RDS_INFO_COUNTERS, total);
    put(
        "info_counters_exact",
        format!("{} optlen_same={}", res_obs(&r.ret), r.optlen == total),
        "OK optlen_same=true",
    );
    put(
        "info_counters_exact_ret",
        format!("{:?}", r.ret.ok()),
        "Some(40)",
    );
    let before = Counters::take(&s0)?;
    let missing: Vec<&str> = COUNTER_NAMES
        .iter()
        .copied()
        .filter(|n| !before.has(n))
        .collect();
    put(
        "info_counters_names",
        if missing.is_empty() {
            "missing=none".into()
        } else {
            format!("missing={}", missing.join(","))
        },
        "missing=none",
    );
    a.send_to(&[1; 10], to_b)
        .map_err(|e| format!("send: {e}"))?;
    a.send_to(&[2; 10], to_b)
        .map_err(|e| format!("send: {e}"))?;
    a.send_to(&[3; 7], v4([127, 0, 0, 2], 4479))
        .map_err(|e| format!("send: {e}"))?;
    // Blocking reads (bounded by SO_RCVTIMEO): a MSG_PEEK would count as a delivery in C.
    let mut buf = [0u8; 64];
    let got = (0..2).filter(|_| b.recv(&mut buf, 0).is_ok()).count();
    std::thread::sleep(Duration::from_millis(200));
    let after = Counters::take(&s0)?;
    put(
        "info_counter_exchange_received",
        format!("received={got}"),
        "received=2",
    );
    for (name, want) in [
        ("recv_delivered", "+2"),
        ("recv_queued", "+2"),
        ("send_queued", "+3"),
        ("recv_drop_no_sock", "+1"),
        ("recv_ping", "+0"),
        ("send_pong", "+0"),
        ("recv_bytes_added_to_sock", "+20"),
        ("recv_bytes_freed_fromsock", "+20"),
        ("copy_from_user", "+27"),
        ("copy_to_user", "+20"),
    ] {
        put(
            &format!("info_counter_delta_{name}"),
            after.delta_obs(&before, name),
            want,
        );
    }
    drop((a, b, e6, f6));
    Ok(())
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    // The checks run (and print) on the namespace's thread; their failures are added here.
    let failed = in_new_netns(|| {
        let mut r = Report::default();
        ns_body(&mut r)?;
        Ok(r.failed)
    })?;
    r.failed += failed;
    Ok(())
}
