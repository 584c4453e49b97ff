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
//!
//! Over TCP (`RDS_TESTS_TCP`, see `util::tcp_peer_netns`) the suite runs in the two fresh
//! namespaces `tests/guest/tcp-neutral.sh` makes for it: the sending sockets (127.0.0.1's and
//! ::1's part) at the near end, the receiving ones at the far end, each namespace listing its
//! own. The lists are read from both ends (a socket of the far end for its part) and joined,
//! so that a list holds what the loopback run's does; the length protocol is read at the near
//! end, whose lists are shorter. The connection lists show one connection per address pair at
//! each end (TCP carries both directions), and the sequence numbers of connections and
//! queued messages are not compared: RDS/TCP spreads a pair's messages over its 8 paths, each
//! numbered on its own, by a hash of the sending port (C seeds it with 0 but for the first
//! socket bound, rds_rs with a random number per socket), and the list shows path 0's.

use crate::util::{
    addr_obs, arrival_bound, bound, drain, err_name, far4b, far6, fresh, fresh_far, in_new_netns,
    ip_obs, near4, near6, over_tcp, res_obs, wait_msg, wait_msg_for, Counters,
};
use crate::Report;
use librds::info::*;
use librds::{FaultRegion, RdsSocket, UserBufMut, SOL_RDS};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The entries sorted and joined with `,` (as the list observations are).
fn sorted(mut v: Vec<String>) -> String {
    v.sort();
    crate::util::joined_or_none(&v, ",")
}

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

/// The connections of `l`, with their sequence numbers when `seqs` (not compared over TCP:
/// see the module's comment).
fn conns_obs(l: &[ConnectionInfo], seqs: bool) -> String {
    let mut v: Vec<String> = l
        .iter()
        .map(|c| {
            format!(
                "{}>{} {}{} flags={}{}",
                ip_obs(&c.laddr),
                ip_obs(&c.faddr),
                c.transport,
                if seqs {
                    format!(" tx={} rx={}", c.next_tx_seq, c.next_rx_seq)
                } else {
                    String::new()
                },
                c.flags,
                c.tos.map_or(String::new(), |t| format!(" tos={t}"))
            )
        })
        .collect();
    v.sort();
    crate::util::joined_or_none(&v, ",")
}

/// The messages of `l`; over TCP without their sequence numbers (the module's comment).
fn msgs_obs(l: &[MessageInfo]) -> String {
    let mut v: Vec<String> = l
        .iter()
        .map(|m| {
            format!(
                "{}len={} {}/{}<{}/{} flags={} tos={}",
                if over_tcp() {
                    String::new()
                } else {
                    format!("seq={} ", m.seq)
                },
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

/// A list read at both ends (over TCP), or at the one (loopback): `Ok` with both joined.
fn both<T>(
    near: std::io::Result<Vec<T>>,
    far: Option<std::io::Result<Vec<T>>>,
) -> std::io::Result<Vec<T>> {
    let mut l = near?;
    if let Some(f) = far {
        l.extend(f?);
    }
    Ok(l)
}

fn ns_body(r: &mut Report) -> Result<(), String> {
    let mut put = |name: &str, obs: String, want: &str| r.expect(name, &obs, want);
    let s0 = fresh()?;
    // The far end's reader over TCP: it lists the far namespace's sockets, connections and
    // messages (over loopback there is one namespace, and no second reader to list).
    let tcp = over_tcp();
    let s0f = if tcp { Some(fresh_far()?) } else { None };
    // The near end lists a of the two IPv4 sockets and e6 of the two IPv6 ones over TCP.
    let (n4, n6) = if tcp { (1, 3) } else { (2, 5) };
    let (pa, pb, pe, pf) = (near4(4460), far4b(4461), near6(4462), far6(4463));
    let (a_obs, b_obs) = (addr_obs(&pa), addr_obs(&pb));
    let (e_obs, f_obs) = (addr_obs(&pe), addr_obs(&pf));
    let (a_ip, b_ip) = (ip_obs(&pa.ip()), ip_obs(&pb.ip()));

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
    // Over TCP the connections come up before the sockets are bound (util::tcp_warm_up).
    crate::util::tcp_warm_up(r, &[("far4b", far4b(0)), ("far6", far6(0))])?;
    let mut put = |name: &str, obs: String, want: &str| r.expect(name, &obs, want);

    // Bound sockets.
    let a = bound(pa)?;
    let _ = a.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, 65536);
    let _ = a.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, 32768);
    let b = bound(pb)?;
    let _ = a.connect(pb);
    let e6 = bound(pe)?;
    let f6 = bound(pf)?;
    // The reply to a request of `len` bytes for `n` items of `item` bytes.
    let fits = |len: i32, item: i32, n: i32| {
        if len >= item * n {
            format!("ret={item} optlen={}", item * n)
        } else {
            format!("ENOSPC optlen={}", item * n)
        }
    };
    for (name, len) in [
        ("info_sockets_probe", 0),
        ("info_sockets_len_27", 27),
        ("info_sockets_len_55", 55),
        ("info_sockets_exact", 28 * n4),
        ("info_sockets_larger", 1000),
    ] {
        put(
            name,
            reply_obs(&s0, RDS_INFO_SOCKETS, len),
            &fits(len, 28, n4),
        );
    }
    let default_snd = fresh()?
        .get_int(libc::SOL_SOCKET, libc::SO_SNDBUF)
        .map_err(|e| format!("SO_SNDBUF: {e}"))?
        / 2;
    let default_rcv = fresh()?
        .get_int(libc::SOL_SOCKET, libc::SO_RCVBUF)
        .map_err(|e| format!("SO_RCVBUF: {e}"))?
        / 2;
    let socks = both(s0.sockets(false), s0f.as_ref().map(|f| f.sockets(false)));
    put(
        "info_sockets_list",
        socks.as_ref().map_or_else(err_name, |l| sockets_obs(l)),
        &sorted(vec![
            format!("{a_obs}>{b_obs} snd=65536 rcv=32768"),
            format!("{b_obs}>0.0.0.0/0 snd={default_snd} rcv={default_rcv}"),
        ]),
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
        &fits(0, 52, n6),
    );
    put(
        "info6_sockets_exact",
        reply_obs(&s0, RDS6_INFO_SOCKETS, 52 * n6),
        &fits(52 * n6, 52, n6),
    );
    // The unbound readers (s0, and s0f over TCP) are listed too.
    let dflt = format!("snd={default_snd} rcv={default_rcv}");
    let mut want6 = vec![
        format!("{e_obs}>__/0 {dflt}"),
        format!("{f_obs}>__/0 {dflt}"),
        format!("__ffff_{a_obs}>__ffff_{b_obs} snd=65536 rcv=32768"),
        format!("__ffff_{b_obs}>__/0 {dflt}"),
    ];
    want6.extend((0..1 + usize::from(tcp)).map(|_| format!("__/0>__/0 {dflt}")));
    put(
        "info6_sockets_list",
        both(s0.sockets(true), s0f.as_ref().map(|f| f.sockets(true)))
            .map_or_else(|e| err_name(&e), |l| sockets_obs(&l)),
        &sorted(want6),
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
    let to_b = pb;
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
    b.send_to(b"back", pa)
        .map_err(|e| format!("send back: {e}"))?;
    if !wait_msg(&a) {
        return Err("reply did not arrive".into());
    }
    drain(&a);
    e6.send_to(b"six", pf)
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

    for (name, len) in [
        ("info_connections_probe", 0),
        ("info_connections_len_41", 41),
        ("info_connections_len_42", 42),
        ("info_connections_exact", 42 * n4),
    ] {
        put(
            name,
            reply_obs(&s0, RDS_INFO_CONNECTIONS, len),
            &fits(len, 42, n4),
        );
    }
    let conns = both(
        s0.connections(false),
        s0f.as_ref().map(|f| f.connections(false)),
    );
    let conns6 = both(
        s0.connections(true),
        s0f.as_ref().map(|f| f.connections(true)),
    );
    let (want4, want6) = if tcp {
        // One connection per address pair at each end, carrying both directions.
        let (e_ip, f_ip) = (ip_obs(&pe.ip()), ip_obs(&pf.ip()));
        for l in [&conns, &conns6] {
            println!(
                "# connections with sequence numbers: {}",
                l.as_ref().map_or_else(err_name, |l| conns_obs(l, true))
            );
        }
        (
            sorted(vec![
                format!("{a_ip}>{b_ip} tcp flags=4 tos=0"),
                format!("{b_ip}>{a_ip} tcp flags=4 tos=0"),
            ]),
            sorted(vec![
                format!("{e_ip}>{f_ip} tcp flags=4"),
                format!("{f_ip}>{e_ip} tcp flags=4"),
                format!("__ffff_{a_ip}>__ffff_{b_ip} tcp flags=4"),
                format!("__ffff_{b_ip}>__ffff_{a_ip} tcp flags=4"),
            ]),
        )
    } else {
        // A connection per direction, each end's sequence numbers its own.
        (
            "127.0.0.1>127.0.0.2 loopback tx=5 rx=5 flags=4 tos=0,127.0.0.2>127.0.0.1 loopback tx=2 rx=2 flags=4 tos=0".to_string(),
            "__1>__1 loopback tx=2 rx=2 flags=4,__ffff_127.0.0.1>__ffff_127.0.0.2 loopback tx=5 rx=5 flags=4,__ffff_127.0.0.2>__ffff_127.0.0.1 loopback tx=2 rx=2 flags=4".to_string(),
        )
    };
    let obs = |l: &std::io::Result<Vec<ConnectionInfo>>| {
        l.as_ref().map_or_else(err_name, |l| conns_obs(l, !tcp))
    };
    put("info_connections_list", obs(&conns), &want4);
    // The near end has a's IPv4 connection and e6's over TCP; loopback three.
    put(
        "info6_connections_probe",
        reply_obs(&s0, RDS6_INFO_CONNECTIONS, 0),
        &fits(0, 65, if tcp { 2 } else { 3 }),
    );
    put("info6_connections_list", obs(&conns6), &want6);
    // The message left unread is at b's end: the fourth of its connection over loopback
    // (over TCP, of a path: not compared).
    let rd = s0f.as_ref().unwrap_or(&s0);
    let seq4 = if tcp { "" } else { "seq=4 " };
    put(
        "info_recv_messages_probe",
        reply_obs(rd, RDS_INFO_RECV_MESSAGES, 0),
        "ENOSPC optlen=26",
    );
    put(
        "info_recv_messages_list",
        rd.messages(RDS_INFO_RECV_MESSAGES)
            .map_or_else(|e| err_name(&e), |l| msgs_obs(&l)),
        &format!("{seq4}len=6 {b_obs}<{a_obs} flags=0 tos=0"),
    );
    put(
        "info6_recv_messages_list",
        rd.messages(RDS6_INFO_RECV_MESSAGES)
            .map_or_else(|e| err_name(&e), |l| msgs_obs(&l)),
        &format!("{seq4}len=6 __ffff_{b_obs}<__ffff_{a_obs} flags=0 tos=0"),
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
        let name = format!("info_after_traffic_{}", opt_name(opt));
        if tcp && matches!(opt, RDS_INFO_TCP_SOCKETS | RDS6_INFO_TCP_SOCKETS) {
            // Over TCP the pairs' sockets are there, one per path up (how many paths are up
            // differs: rds_rs connects every negotiated path, C those it sends on).
            let item = if opt == RDS_INFO_TCP_SOCKETS { 41 } else { 64 };
            let rep = s0.info(opt, 0);
            put(
                &name,
                format!(
                    "{} listed={}",
                    res_obs(&rep.ret),
                    rep.optlen > 0 && rep.optlen % item == 0
                ),
                "ENOSPC listed=true",
            );
            continue;
        }
        put(&name, reply_obs(&s0, opt, 0), want);
    }
    drain(&b);
    put(
        "info_recv_messages_after_read",
        reply_obs(rd, RDS_INFO_RECV_MESSAGES, 0),
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
    a.send_to(&[3; 7], SocketAddr::new(pb.ip(), 4479))
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
    // Over TCP the process is already in a fresh namespace of its own, its peer in another
    // (made for this suite by tcp-neutral.sh).
    if over_tcp() {
        return ns_body(r);
    }
    // The checks run (and print) on the namespace's thread; their failures are added here.
    let failed = in_new_netns(|| {
        let mut r = Report::default();
        ns_body(&mut r)?;
        Ok(r.failed)
    })?;
    r.failed += failed;
    Ok(())
}
