//! Sending and receiving over the loopback transport (or over TCP between two namespaces,
//! `RDS_TESTS_TCP`: `util::tcp_peer_netns`): addresses, datagram boundaries, order,
//! `MSG_PEEK`/`MSG_TRUNC`/`MSG_DONTWAIT`, timeouts, the flag and address checks of C's
//! `rds_sendmsg`, the size limits, copy semantics, drops to unbound ports, and `EFAULT` from
//! bad user pointers (with what happens to the message).
//!
//! Ports 4300-4399 on 127.0.0.1, 127.0.0.2 and ::1 (over TCP: senders on the near end's
//! addresses, receivers on the far end's). Observations are lengths, errno names, addresses
//! (without `:`), booleans and counter deltas.

use crate::util::{
    addr_obs, bound, drain, err_name, far4, far4b, far6, fresh, near4, near6, nothing_within,
    over_tcp, pattern, res_obs, v4, wait_msg, Counters,
};
use crate::Report;
use librds::info::RDS_INFO_RECV_MESSAGES;
use librds::{sockaddr_bytes, FaultRegion, RawRecv, RawSend, RdsSocket, UserBuf, UserBufMut};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What [`recv_desc`] says of an intact message of `len` bytes from `from`.
fn got(len: usize, from: SocketAddr) -> String {
    format!(
        "len={len} from={} namelen={} content=ok",
        addr_obs(&from),
        if from.is_ipv4() { 16 } else { 28 }
    )
}

/// The IPv4 address of `a`, as bytes.
fn ip4(a: SocketAddr) -> [u8; 4] {
    match a.ip() {
        IpAddr::V4(v) => v.octets(),
        IpAddr::V6(_) => unreachable!("an IPv4 address"),
    }
}

/// The IPv6 address of `a`, as bytes.
fn ip6(a: SocketAddr) -> [u8; 16] {
    match a.ip() {
        IpAddr::V6(v) => v.octets(),
        IpAddr::V4(_) => unreachable!("an IPv6 address"),
    }
}

/// Receives one message (blocking, bounded by the socket's `SO_RCVTIMEO`) and describes it:
/// `len=N from=ADDR namelen=M content=ok|bad`.
fn recv_desc(s: &RdsSocket, cap: usize, want: &[u8]) -> String {
    let mut buf = vec![0u8; cap];
    match s.recv_msg(&mut buf, 0, 0) {
        Ok(m) => format!(
            "len={} from={} namelen={} content={}",
            m.len,
            m.from.map_or("none".into(), |a| addr_obs(&a)),
            m.namelen,
            if buf[..m.len.min(cap)] == *want {
                "ok"
            } else {
                "bad"
            }
        ),
        Err(e) => err_name(&e),
    }
}

/// Waits (up to 2 s) until counter `name` moved by at least `want` since `before` (deliveries
/// may be asynchronous), then returns the snapshot.
fn counters_after(
    s: &RdsSocket,
    before: &Counters,
    name: &str,
    want: i128,
) -> Result<Counters, String> {
    let t = Instant::now();
    loop {
        let now = Counters::take(s)?;
        if now.delta(before, name).unwrap_or(0) >= want || t.elapsed() > Duration::from_secs(2) {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The receive-queue entries of `RDS_INFO_RECV_MESSAGES` for local port `port`.
fn queued_for(s: &RdsSocket, port: u16) -> Result<usize, String> {
    Ok(s.messages(RDS_INFO_RECV_MESSAGES)
        .map_err(|e| format!("RDS_INFO_RECV_MESSAGES: {e}"))?
        .iter()
        .filter(|m| m.lport == port)
        .count())
}

fn send_named(s: &RdsSocket, name: &[u8], namelen: u32, payload: &[u8]) -> String {
    res_obs(&s.sendmsg_raw(&RawSend {
        name: UserBuf::Bytes(name),
        namelen,
        iov: vec![(UserBuf::Bytes(payload), payload.len())],
        ..Default::default()
    }))
}

fn sin6_bytes(addr: [u8; 16], port: u16, scope: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(28);
    v.extend_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(&addr);
    v.extend_from_slice(&scope.to_ne_bytes());
    v
}

fn mapped(a: [u8; 4]) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[10] = 0xff;
    m[11] = 0xff;
    m[12..].copy_from_slice(&a);
    m
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    crate::util::tcp_warm_up(
        r,
        &[("far4", far4(0)), ("far4b", far4b(0)), ("far6", far6(0))],
    )?;
    let (pa, pb, pc, pd, pe) = (4300, 4301, 4302, 4303, 4304);
    let a = bound(near4(pa))?;
    let b = bound(far4(pb))?;
    let c = bound(far4b(pc))?;
    let d = bound(near6(pd))?;
    let e = bound(far6(pe))?;
    let (ab, ac, ae) = (far4(pb), far4b(pc), far6(pe));

    // Content and sender address, per address pair.
    r.expect(
        "send_v4_same_addr",
        &res_obs(&a.send_to(b"hello", ab)),
        "OK",
    );
    r.expect(
        "recv_v4_same_addr",
        &recv_desc(&b, 64, b"hello"),
        &got(5, near4(pa)),
    );
    r.expect(
        "send_v4_other_addr",
        &res_obs(&a.send_to(b"there", ac)),
        "OK",
    );
    r.expect(
        "recv_v4_other_addr",
        &recv_desc(&c, 64, b"there"),
        &got(5, near4(pa)),
    );
    r.expect("send_v6", &res_obs(&d.send_to(b"six", ae)), "OK");
    r.expect("recv_v6", &recv_desc(&e, 64, b"six"), &got(3, near6(pd)));
    // The reply path: the receiver answers the address it got.
    let _ = c.send_to(b"back", near4(pa));
    r.expect(
        "recv_reply_other_addr",
        &recv_desc(&a, 64, b"back"),
        &got(4, far4b(pc)),
    );

    // Zero-length messages are messages.
    r.expect(
        "send_zero_length",
        &match a.send_to(b"", ab) {
            Ok(n) => format!("sent={n}"),
            Err(e) => err_name(&e),
        },
        "sent=0",
    );
    r.expect(
        "recv_zero_length",
        &recv_desc(&b, 64, b""),
        &got(0, near4(pa)),
    );

    // Datagram boundaries: two sends, two receives.
    let _ = a.send_to(b"one", ab);
    let _ = a.send_to(b"two-two", ab);
    let first = recv_desc(&b, 64, b"one");
    let second = recv_desc(&b, 64, b"two-two");
    r.expect(
        "boundaries_kept",
        &format!("{} | {}", first, second),
        &format!("{} | {}", got(3, near4(pa)), got(7, near4(pa))),
    );

    // Order per pair, with two senders interleaved towards one receiver.
    // Over loopback the second sender is b; over TCP, where b shares the far namespace with c
    // (and would reach it over loopback), it is a socket of the near end on b's port.
    let b_near;
    let second = if over_tcp() {
        b_near = bound(near4(pb))?;
        &b_near
    } else {
        &b
    };
    let n = 300u32;
    let mut seqs = [0u32; 2];
    let mut send_err = None;
    for i in 0..n {
        let tag = usize::from(i % 3 == 0);
        let s = if tag == 1 { second } else { &a };
        let seq = seqs[tag];
        seqs[tag] += 1;
        let mut m = vec![tag as u8];
        m.extend(seq.to_be_bytes());
        m.extend(pattern(
            (i % 200) as usize,
            ((tag as u64) << 32) | u64::from(seq),
        ));
        if let Err(e) = s.send_to(&m, ac) {
            send_err = Some(err_name(&e));
            break;
        }
    }
    let mut next = [0u32; 2];
    let mut received = 0;
    let mut bad = 0;
    let mut buf = vec![0u8; 1024];
    while received < n && send_err.is_none() {
        if !wait_msg(&c) {
            break;
        }
        let Ok((len, from)) = c.recv_from(&mut buf) else {
            break;
        };
        received += 1;
        let tag = usize::from(from.port() == pb);
        if len < 5 || usize::from(buf[0]) != tag {
            bad += 1;
            continue;
        }
        let seq = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
        let body_ok = buf[5..len] == pattern(len - 5, ((tag as u64) << 32) | u64::from(seq))[..];
        if seq != next[tag] || !body_ok {
            bad += 1;
        }
        next[tag] = seq + 1;
    }
    r.expect(
        "order_per_pair",
        &send_err.unwrap_or(format!("received={received} out_of_order_or_bad={bad}")),
        &format!("received={n} out_of_order_or_bad=0"),
    );

    // connect(): the default destination, sent to without msg_name.
    let f = bound(near4(4305))?;
    r.expect("connect_default_dest", &res_obs(&f.connect(ab)), "OK");
    r.expect(
        "send_connected_no_name",
        &res_obs(&f.send(b"conn", 0)),
        "OK",
    );
    r.expect(
        "recv_connected",
        &recv_desc(&b, 64, b"conn"),
        &got(4, near4(4305)),
    );
    r.expect(
        "sendmsg_connected_null_name",
        &res_obs(&f.send_msg(&[b"msg"], None, &[], 0)),
        "OK",
    );
    r.expect(
        "recv_sendmsg_connected",
        &recv_desc(&b, 64, b"msg"),
        &got(3, near4(4305)),
    );
    r.expect(
        "send_connected_explicit_name",
        &res_obs(&f.send_to(b"elsewhere", ac)),
        "OK",
    );
    r.expect(
        "recv_connected_explicit_name",
        &recv_desc(&c, 64, b"elsewhere"),
        &got(9, near4(4305)),
    );

    // MSG_PEEK leaves the message; the next read returns the same.
    let _ = a.send_to(b"peekme", ab);
    let peek = if wait_msg(&b) {
        let mut p = [0u8; 64];
        let mut q = [0u8; 64];
        let r1 = b.recv_msg(&mut p, 0, libc::MSG_PEEK);
        let r2 = b.recv_msg(&mut q, 0, 0);
        let r3 = b.recv(&mut [0u8; 8], libc::MSG_DONTWAIT);
        match (r1, r2) {
            (Ok(x), Ok(y)) => format!(
                "peek={} read={} same={} from_same={} then={}",
                x.len,
                y.len,
                p[..x.len] == q[..y.len] && &q[..y.len] == b"peekme",
                x.from == y.from,
                res_obs(&r3)
            ),
            (x, y) => format!("{} {}", res_obs(&x), res_obs(&y)),
        }
    } else {
        "nothing_arrived".into()
    };
    r.expect(
        "msg_peek",
        &peek,
        "peek=6 read=6 same=true from_same=true then=EAGAIN",
    );

    // MSG_TRUNC: a short buffer gets the head and the flag; with MSG_TRUNC in the call, the
    // return value is the full length. Either way the message is consumed.
    let long = pattern(100, 7);
    for (name, flags, want) in [
        (
            "recv_short_buffer",
            0,
            "ret=10 msg_trunc=true head_ok=true then=EAGAIN",
        ),
        (
            "recv_short_buffer_msg_trunc",
            libc::MSG_TRUNC,
            "ret=100 msg_trunc=true head_ok=true then=EAGAIN",
        ),
    ] {
        let _ = a.send_to(&long, ab);
        let obs = if wait_msg(&b) {
            let mut s = [0u8; 10];
            match b.recv_msg(&mut s, 0, flags) {
                Ok(m) => format!(
                    "ret={} msg_trunc={} head_ok={} then={}",
                    m.len,
                    m.flags & libc::MSG_TRUNC != 0,
                    s == long[..10],
                    res_obs(&b.recv(&mut [0u8; 128], libc::MSG_DONTWAIT))
                ),
                Err(e) => err_name(&e),
            }
        } else {
            "nothing_arrived".into()
        };
        r.expect(name, &obs, want);
    }
    let _ = a.send_to(b"12345", ab);
    let obs = if wait_msg(&b) {
        match b.recv_msg(&mut [], 0, 0) {
            Ok(m) => format!("ret={} msg_trunc={}", m.len, m.flags & libc::MSG_TRUNC != 0),
            Err(e) => err_name(&e),
        }
    } else {
        "nothing_arrived".into()
    };
    r.expect("recv_zero_buffer", &obs, "ret=0 msg_trunc=true");
    let _ = a.send_to(b"12345", ab);
    let obs = if wait_msg(&b) {
        match b.recv_msg(&mut [0u8; 5], 0, 0) {
            Ok(m) => format!("ret={} msg_trunc={}", m.len, m.flags & libc::MSG_TRUNC != 0),
            Err(e) => err_name(&e),
        }
    } else {
        "nothing_arrived".into()
    };
    r.expect("recv_exact_buffer", &obs, "ret=5 msg_trunc=false");

    // Empty queue: MSG_DONTWAIT, O_NONBLOCK, SO_RCVTIMEO.
    r.expect(
        "recv_dontwait_empty",
        &res_obs(&b.recv(&mut [0u8; 8], libc::MSG_DONTWAIT)),
        "EAGAIN",
    );
    let nb = bound(near4(4311))?;
    let _ = nb.set_nonblocking(true);
    r.expect(
        "recv_nonblocking_empty",
        &res_obs(&nb.recv(&mut [0u8; 8], 0)),
        "EAGAIN",
    );
    let t = bound(near4(4312))?;
    let _ = t.set_recv_timeout(Some(Duration::from_millis(300)));
    let start = Instant::now();
    let res = t.recv(&mut [0u8; 8], 0);
    let took = start.elapsed();
    r.check(
        "recv_timeout",
        &res_obs(&res),
        if took >= Duration::from_millis(250) && took < Duration::from_secs(10) {
            Ok(())
        } else {
            Err(format!("returned after {took:?}, timeout was 300ms"))
        },
    );

    // MSG_OOB: C returns 0 at once and leaves the queue alone; MSG_ERRQUEUE: nothing queued.
    let _ = a.send_to(b"oob", ab);
    let obs = if wait_msg(&b) {
        let oob = b.recv(&mut [0u8; 8], libc::MSG_OOB);
        let then = b.recv(&mut [0u8; 8], libc::MSG_DONTWAIT);
        format!(
            "ret={} then={}",
            oob.map_or_else(|e| err_name(&e), |n| n.to_string()),
            then.map_or_else(|e| err_name(&e), |n| n.to_string())
        )
    } else {
        "nothing_arrived".into()
    };
    r.expect("recv_msg_oob", &obs, "ret=0 then=3");
    r.expect(
        "recv_errqueue_empty",
        &res_obs(&b.recv(&mut [0u8; 8], libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)),
        "EAGAIN",
    );

    // sendmsg flags: only MSG_DONTWAIT (and MSG_ZEROCOPY, see the cmsg suite) pass.
    for (name, flag, want) in [
        ("send_flag_oob", libc::MSG_OOB, "EOPNOTSUPP"),
        ("send_flag_more", libc::MSG_MORE, "EOPNOTSUPP"),
        ("send_flag_eor", libc::MSG_EOR, "EOPNOTSUPP"),
        ("send_flag_nosignal", libc::MSG_NOSIGNAL, "EOPNOTSUPP"),
        ("send_flag_confirm", libc::MSG_CONFIRM, "EOPNOTSUPP"),
        ("send_flag_dontroute", libc::MSG_DONTROUTE, "EOPNOTSUPP"),
        ("send_flag_waitall", libc::MSG_WAITALL, "EOPNOTSUPP"),
        // MSG_CMSG_COMPAT is 0 in a kernel without CONFIG_COMPAT (the guest's), so C refuses
        // the bit as an unknown flag.
        (
            "send_flag_cmsg_compat",
            0x8000_0000_u32 as i32,
            "EOPNOTSUPP",
        ),
        ("send_flag_dontwait", libc::MSG_DONTWAIT, "OK"),
    ] {
        r.expect(name, &res_obs(&a.send_to_flags(b"f", &ab, flag)), want);
    }
    // The one that passed arrives; then a while for any other.
    wait_msg(&b);
    std::thread::sleep(Duration::from_millis(200));
    r.expect(
        "send_flags_delivered_only_ok",
        &format!("queued={}", drain(&b)),
        "queued=1",
    );

    // recvmsg flags other than OOB, ERRQUEUE, PEEK, TRUNC and DONTWAIT are ignored (C's
    // rds_recvmsg looks at no others): each receives its message normally.
    for (name, flag) in [
        ("recv_flag_waitall", libc::MSG_WAITALL),
        ("recv_flag_cmsg_cloexec", libc::MSG_CMSG_CLOEXEC),
        ("recv_flag_nosignal", libc::MSG_NOSIGNAL),
        ("recv_flag_eor", libc::MSG_EOR),
    ] {
        let sent = res_obs(&a.send_to(b"rf", ab));
        let obs = if wait_msg(&b) {
            let mut buf = [0u8; 8];
            match b.recv(&mut buf, flag | libc::MSG_DONTWAIT) {
                Ok(n) => format!("send={sent} recv={}", String::from_utf8_lossy(&buf[..n])),
                Err(e) => format!("send={sent} recv={}", err_name(&e)),
            }
        } else {
            format!("send={sent} nothing_arrived")
        };
        r.expect(name, &obs, "send=OK recv=rf");
    }

    // msg_name: lengths, families and addresses C refuses.
    let sin = sockaddr_bytes(&ab);
    let mut long_name = sin.clone();
    long_name.resize(32, 0);
    let mut unix = sin.clone();
    unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    let mut unspec = sin.clone();
    unspec[..2].copy_from_slice(&0u16.to_ne_bytes());
    let big = vec![0u8; 200];
    let v6b = sin6_bytes(ip6(ae), pe, 0);
    let cases: Vec<(&str, Vec<u8>, u32, &str)> = vec![
        ("name_len_8", sin.clone(), 8, "EINVAL"),
        ("name_len_15", sin.clone(), 15, "EINVAL"),
        ("name_len_32", long_name.clone(), 32, "OK"),
        ("name_len_129", big.clone(), 129, "EINVAL"),
        ("name_family_unix", unix, 16, "EINVAL"),
        ("name_family_unspec", unspec, 16, "EINVAL"),
        (
            "name_inaddr_any",
            sockaddr_bytes(&v4([0; 4], pb)),
            16,
            "EINVAL",
        ),
        (
            "name_broadcast",
            sockaddr_bytes(&v4([255; 4], pb)),
            16,
            "EINVAL",
        ),
        (
            "name_multicast",
            sockaddr_bytes(&v4([224, 0, 0, 1], pb)),
            16,
            "EINVAL",
        ),
    ];
    for (name, bytes, len, want) in cases {
        r.expect(name, &send_named(&a, &bytes, len, b"n"), want);
    }
    r.expect(
        "name_len_32_delivered",
        &recv_desc(&b, 64, b"n"),
        &got(1, near4(pa)),
    );
    let mut ll = [0u8; 16];
    ll[0] = 0xfe;
    ll[1] = 0x80;
    ll[15] = 1;
    let mut mc6 = [0u8; 16];
    mc6[0] = 0xff;
    mc6[1] = 2;
    mc6[15] = 1;
    let cases6: Vec<(&str, Vec<u8>, u32, &str)> = vec![
        ("name6_len_16", v6b.clone(), 16, "EINVAL"),
        ("name6_len_27", v6b.clone(), 27, "EINVAL"),
        ("name6_any", sin6_bytes([0; 16], pe, 0), 28, "EINVAL"),
        ("name6_multicast", sin6_bytes(mc6, pe, 0), 28, "EINVAL"),
        (
            "name6_linklocal_no_scope",
            sin6_bytes(ll, pe, 0),
            28,
            "EINVAL",
        ),
        (
            "name6_mapped_any",
            sin6_bytes(mapped([0; 4]), pe, 0),
            28,
            "EINVAL",
        ),
        (
            "name6_mapped_broadcast",
            sin6_bytes(mapped([255; 4]), pe, 0),
            28,
            "EINVAL",
        ),
        (
            "name6_mapped_multicast",
            sin6_bytes(mapped([239, 1, 1, 1]), pe, 0),
            28,
            "EINVAL",
        ),
    ];
    for (name, bytes, len, want) in cases6 {
        r.expect(name, &send_named(&d, &bytes, len, b"n"), want);
    }
    let fault = FaultRegion::unmapped(4096).map_err(|e| format!("mmap: {e}"))?;
    // The socket core treats a NULL msg_name as none, whatever msg_namelen says.
    r.expect(
        "name_null_len_16",
        &res_obs(&a.sendmsg_raw(&RawSend {
            name: UserBuf::Null,
            namelen: 16,
            iov: vec![(UserBuf::Bytes(b"n"), 1)],
            ..Default::default()
        })),
        "ENOTCONN",
    );
    r.expect(
        "name_unmapped",
        &res_obs(&a.sendmsg_raw(&RawSend {
            name: UserBuf::Fault(&fault),
            namelen: 16,
            iov: vec![(UserBuf::Bytes(b"n"), 1)],
            ..Default::default()
        })),
        "EFAULT",
    );

    // Address families must match the bound address; v4-mapped IPv6 names reach IPv4 sockets.
    r.expect(
        "send_v4_to_v6",
        &res_obs(&a.send_to(b"x", ae)),
        "EOPNOTSUPP",
    );
    r.expect(
        "send_v6_to_v4",
        &res_obs(&d.send_to(b"x", ab)),
        "EOPNOTSUPP",
    );
    r.expect(
        "send_v6_to_mapped",
        &send_named(&d, &sin6_bytes(mapped(ip4(ab)), pb, 0), 28, b"x"),
        "EOPNOTSUPP",
    );
    r.expect(
        "send_v4_to_mapped",
        &send_named(&a, &sin6_bytes(mapped(ip4(ab)), pb, 0), 28, b"mapped"),
        "OK",
    );
    r.expect(
        "recv_v4_from_mapped",
        &recv_desc(&b, 64, b"mapped"),
        &got(6, near4(pa)),
    );

    // Unbound and unconnected sends.
    let u = fresh()?;
    r.expect("send_unbound", &res_obs(&u.send_to(b"x", ab)), "ENOTCONN");
    let _ = u.connect(ab);
    r.expect(
        "send_unbound_connected",
        &res_obs(&u.send(b"x", 0)),
        "ENOTCONN",
    );
    r.expect(
        "send_unconnected_no_name",
        &res_obs(&a.send(b"x", 0)),
        "ENOTCONN",
    );
    r.expect(
        "sendmsg_unconnected_null_name",
        &res_obs(&a.send_msg(&[b"x"], None, &[], 0)),
        "ENOTCONN",
    );

    // Size limits: 1 MiB, and half of sk_sndbuf.
    let big_s = bound(near4(4306))?;
    r.expect(
        "sndbufforce_4m",
        &res_obs(&big_s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 4 << 20)),
        "OK",
    );
    let over = vec![0x5au8; (1 << 20) + 1];
    r.expect(
        "send_over_1mib",
        &res_obs(&big_s.send_to(&over, ab)),
        "EMSGSIZE",
    );
    let small = bound(near4(4307))?;
    let _ = small.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, 65536);
    r.expect(
        "sndbuf_64k_reads_back",
        &small
            .get_int(libc::SOL_SOCKET, libc::SO_SNDBUF)
            .map_or_else(|e| err_name(&e), |v| v.to_string()),
        "131072",
    );
    r.expect(
        "send_over_half_sndbuf",
        &res_obs(&small.send_to(&vec![1u8; 65537], ab)),
        "EMSGSIZE",
    );
    let half = pattern(65536, 3);
    r.expect(
        "send_half_sndbuf",
        &res_obs(&small.send_to(&half, ab)),
        "OK",
    );
    r.expect(
        "recv_half_sndbuf",
        &recv_desc(&b, 70000, &half),
        &got(65536, near4(4307)),
    );
    let mib = bound(far4(4308))?;
    r.expect(
        "rcvbufforce_4m",
        &res_obs(&mib.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4 << 20)),
        "OK",
    );
    let one_mib = pattern(1 << 20, 11);
    let _ = big_s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 1 << 20);
    r.expect(
        "send_exactly_1mib",
        &big_s
            .send_to(&one_mib, far4(4308))
            .map_or_else(|e| err_name(&e), |n| format!("sent={n}")),
        "sent=1048576",
    );
    r.expect(
        "recv_exactly_1mib",
        &recv_desc(&mib, (1 << 20) + 16, &one_mib),
        &got(1048576, near4(4306)),
    );

    // Copy semantics: the buffer is the caller's again as soon as sendmsg returns; gathers.
    let mut buf = pattern(3000, 5);
    let orig = buf.clone();
    let sent = a.send_to(&buf, ab);
    buf.iter_mut().for_each(|x| *x = 0);
    r.expect("send_then_overwrite", &res_obs(&sent), "OK");
    r.expect(
        "recv_sees_original",
        &recv_desc(&b, 4096, &orig),
        &got(3000, near4(pa)),
    );
    let parts: [&[u8]; 3] = [b"gat", b"", b"hered"];
    r.expect(
        "send_gather",
        &res_obs(&a.send_msg(&parts, Some(&ab), &[], 0)),
        "OK",
    );
    r.expect(
        "recv_gathered",
        &recv_desc(&b, 64, b"gathered"),
        &got(8, near4(pa)),
    );

    // A port nobody bound: the sender is told OK, the receiver side counts a drop.
    let before = Counters::take(&a)?;
    let sent = a.send_to(b"void", far4(4399));
    let after = counters_after(&a, &before, "recv_drop_no_sock", 1)?;
    r.expect(
        "send_to_unbound_port",
        &format!(
            "{} recv_drop_no_sock={} recv_queued={}",
            res_obs(&sent),
            after.delta_obs(&before, "recv_drop_no_sock"),
            after.delta_obs(&before, "recv_queued")
        ),
        "OK recv_drop_no_sock=+1 recv_queued=+0",
    );

    // A closed socket's port: dropped too, and a new socket on that port starts empty.
    let g = bound(far4(4309))?;
    let _ = a.send_to(b"early", far4(4309));
    // Delivered (not left for the drop count below), then the socket goes.
    wait_msg(&g);
    drop(g);
    let before = Counters::take(&a)?;
    let sent = a.send_to(b"late", far4(4309));
    let after = counters_after(&a, &before, "recv_drop_no_sock", 1)?;
    r.expect(
        "send_to_closed_port",
        &format!(
            "{} recv_drop_no_sock={}",
            res_obs(&sent),
            after.delta_obs(&before, "recv_drop_no_sock")
        ),
        "OK recv_drop_no_sock=+1",
    );
    let g2 = bound(far4(4309))?;
    r.expect(
        "rebound_port_starts_empty",
        &res_obs(&g2.recv(&mut [0u8; 8], libc::MSG_DONTWAIT)),
        "EAGAIN",
    );

    // Closing a socket with messages queued frees them (kmemleak judges the rest). The list is
    // read through b, which is in h's namespace (RDS_INFO_* lists are per namespace).
    let h = bound(far4(4310))?;
    for i in 0..10u8 {
        let _ = a.send_to(&[i; 100], far4(4310));
    }
    let t0 = Instant::now();
    let mut q = queued_for(&b, 4310)?;
    while q < 10 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        q = queued_for(&b, 4310)?;
    }
    drop(h);
    r.expect(
        "close_with_queued_messages",
        &format!("queued={q} after_close={}", queued_for(&b, 4310)?),
        "queued=10 after_close=0",
    );

    // EFAULT on send: nothing is delivered.
    let nothing = |s: &RdsSocket| match nothing_within(s, Duration::from_millis(300)) {
        Ok(true) => "nothing_delivered".to_string(),
        Ok(false) => format!("delivered={}", drain(s)),
        Err(e) => e,
    };
    for (name, iov) in [
        ("send_iov_null", vec![(UserBuf::Null, 10)]),
        ("send_iov_unmapped", vec![(UserBuf::Fault(&fault), 10)]),
        (
            "send_iov_second_unmapped",
            vec![(UserBuf::Bytes(b"ok"), 2), (UserBuf::Fault(&fault), 10)],
        ),
    ] {
        let sin = sockaddr_bytes(&ab);
        let res = a.sendmsg_raw(&RawSend {
            name: UserBuf::Bytes(&sin),
            namelen: 16,
            iov,
            ..Default::default()
        });
        r.expect(
            name,
            &format!("{} {}", res_obs(&res), nothing(&b)),
            "EFAULT nothing_delivered",
        );
    }
    let sin = sockaddr_bytes(&ab);
    let res = a.sendmsg_raw(&RawSend {
        name: UserBuf::Bytes(&sin),
        namelen: 16,
        iov: vec![(UserBuf::Null, 0)],
        ..Default::default()
    });
    r.expect("send_iov_null_len_0", &res_obs(&res), "OK");
    r.expect(
        "recv_iov_null_len_0",
        &recv_desc(&b, 8, b""),
        &got(0, near4(pa)),
    );
    let many: Vec<(UserBuf<'_>, usize)> = (0..1025).map(|_| (UserBuf::Bytes(b"i"), 1)).collect();
    r.expect(
        "send_1025_iovecs",
        &res_obs(&a.sendmsg_raw(&RawSend {
            name: UserBuf::Bytes(&sin),
            namelen: 16,
            iov: many,
            ..Default::default()
        })),
        "EMSGSIZE",
    );

    // EFAULT on receive into a bad buffer: the message stays queued.
    for (name, iov_fault) in [("recv_iov_unmapped", true), ("recv_iov_null", false)] {
        let _ = a.send_to(b"keep", ab);
        let obs = if wait_msg(&b) {
            let mut m = RawRecv {
                iov: vec![(
                    if iov_fault {
                        UserBufMut::Fault(&fault)
                    } else {
                        UserBufMut::Null
                    },
                    64,
                )],
                ..Default::default()
            };
            let res = b.recvmsg_raw(&mut m);
            drop(m);
            format!("{} then={}", res_obs(&res), recv_desc(&b, 64, b"keep"))
        } else {
            "nothing_arrived".into()
        };
        r.expect(name, &obs, &format!("EFAULT then={}", got(4, near4(pa))));
    }
    let _ = a.send_to(b"keep", ab);
    let obs = if wait_msg(&b) {
        let mut head = [0u8; 2];
        let mut m = RawRecv {
            iov: vec![
                (UserBufMut::Bytes(&mut head), 2),
                (UserBufMut::Fault(&fault), 64),
            ],
            ..Default::default()
        };
        let res = b.recvmsg_raw(&mut m);
        drop(m);
        format!("{} then={}", res_obs(&res), recv_desc(&b, 64, b"keep"))
    } else {
        "nothing_arrived".into()
    };
    r.expect(
        "recv_iov_second_unmapped",
        &obs,
        &format!("EFAULT then={}", got(4, near4(pa))),
    );
    // An unmapped msg_name: the socket core copies the name out after the protocol has
    // dequeued the message, so the message is gone.
    let _ = a.send_to(b"name", ab);
    let obs = if wait_msg(&b) {
        let mut body = [0u8; 64];
        let mut m = RawRecv {
            name: UserBufMut::Fault(&fault),
            namelen: 16,
            iov: vec![(UserBufMut::Bytes(&mut body), 64)],
            ..Default::default()
        };
        let res = b.recvmsg_raw(&mut m);
        drop(m);
        format!(
            "{} then={}",
            res_obs(&res),
            res_obs(&b.recv(&mut [0u8; 64], libc::MSG_DONTWAIT))
        )
    } else {
        "nothing_arrived".into()
    };
    r.expect("recv_name_unmapped", &obs, "EFAULT then=EAGAIN");
    // msg_namelen shorter than the sender's address: truncated copy, full length reported.
    for (name, len, want) in [
        ("recv6_namelen_16", 16u32, "ret=1 namelen=28 family_ok=true"),
        ("recv6_namelen_0", 0, "ret=1 namelen=28 family_ok=false"),
    ] {
        let _ = d.send_to(b"x", ae);
        let obs = if wait_msg(&e) {
            let mut nm = [0u8; 28];
            let mut body = [0u8; 8];
            let mut m = RawRecv {
                name: UserBufMut::Bytes(&mut nm),
                namelen: len,
                iov: vec![(UserBufMut::Bytes(&mut body), 8)],
                ..Default::default()
            };
            match e.recvmsg_raw(&mut m) {
                Ok(o) => {
                    drop(m);
                    format!(
                        "ret={} namelen={} family_ok={}",
                        o.ret,
                        o.namelen,
                        u16::from_ne_bytes([nm[0], nm[1]]) == libc::AF_INET6 as u16
                    )
                }
                Err(err) => err_name(&err),
            }
        } else {
            "nothing_arrived".into()
        };
        r.expect(name, &obs, want);
    }
    Ok(())
}
