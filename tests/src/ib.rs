//! RDS over an RDMA transport (IB, RoCE, iWARP) between two addresses, usually two hosts (or
//! the two ends of a veth pair in one guest): an echo server on one side, a client that runs
//! the checks on the other. Both are plain RDS programs, so either side may be rds_rs or C RDS.
//!
//! - `rds-tests ib-echo ADDR FIRST-PORT NPORTS SECONDS [CLIENTS]`: binds NPORTS sockets (IB
//!   transport, as `rds-stress -T ib`) and sends every message back to where it came from,
//!   content unchanged; ends when CLIENTS clients (default 1) said they are done (a client's
//!   last message) or after SECONDS.
//! - `rds-tests ib-client LOCAL PEER FIRST-PORT NPORTS TAG [TOS]`: against an echo server at
//!   PEER: ping-pong, every size from 0 B to 1 MiB (1 MiB is `RDS_MAX_MSG_SIZE`; messages over
//!   4 KiB travel in several fragments), many sockets to many ports at once with per-pair order,
//!   a stream of 8 KiB messages kept in flight, a connection with another type of service,
//!   `rds-ping`'s protocol (port 0), and the `RDS_INFO_*` tables of the connection. Every
//!   payload is checked byte by byte. With TOS, the client's main socket sends on a connection
//!   of that type of service (the echoes come back on the server's, TOS 0).
//!
//! - `rds-tests ib-recycle LOCAL PEER TAG` (rds_rs only): two sockets of this host, one on each
//!   address, exchange 1 KiB requests and 64-byte answers one at a time; in steady state a
//!   sent message's memory goes back to its sender's pool once the peer's ack settled it
//!   (`rs_msg_recycled`), so the sends allocate (`rs_msg_alloc`) next to nothing.
//!
//! - `rds-tests ib-many TAG LOCAL NTOS PEER... [-- DROP-PEER...]` (rds_rs, the guest's veth pair):
//!   connections to several peers with several types of service, what they hold
//!   (`RDS_INFO_IB_CONNECTIONS`, free memory), and that memory coming back when those to the
//!   dropped peers are reaped (see [`many`]).
//!
//! - `rds-tests ib-duel TAG A B TOS-BASE race|unsent|crossed` (rds_rs at both ends, this host): both
//!   ends connect to each other at once; the tie-break settles each connection in one attempt
//!   (see [`duel`]).
//!
//! With `RDS_TESTS_TRANSPORT=tcp` in the environment, `ib-echo` and `ib-client` run over the
//! TCP transport instead (C's `rds_tcp` or rds_rs's): the sockets ask for it, the connection is
//! listed as `tcp` with its socket in `RDS_INFO_TCP_SOCKETS`, and a type of service maps to 0
//! (one connection), as TCP's `get_tos_map` does.
//!
//! Check names are prefixed by the client's tag (e.g. `rs_to_c_v4`), so that runs in both
//! directions can be told apart; every check must pass (these are interop checks, not
//! observations paired with another run).

use crate::util::{err_name, pattern};
use crate::Report;
use librds::{RdsSocket, Transport, SIOCRDSSETTOS};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest message (`RDS_MAX_MSG_SIZE`).
const MAX: usize = 1 << 20;
/// The message that ends an echo server (its client's last).
const STOP: &[u8] = b"ib-echo: stop";
/// How long an echo may take to come back: a bound against a hang, not a measure of speed.
/// rxe between two TCG guests is slow, and on a busy host a 1 MiB round trip in a debug guest
/// with a fraction of a core has taken over 30 s.
const ECHO_WAIT: Duration = Duration::from_secs(120);

fn parse<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("bad {what} {s}"))
}

/// Whether the echo server and client run over TCP (`RDS_TESTS_TRANSPORT=tcp`) rather than
/// IB.
fn over_tcp() -> bool {
    std::env::var("RDS_TESTS_TRANSPORT").is_ok_and(|t| t == "tcp")
}

/// The transport the echo server and client use.
fn transport() -> Transport {
    if over_tcp() {
        Transport::Tcp
    } else {
        Transport::Ib
    }
}

/// An RDS socket on the IB transport (TCP with `RDS_TESTS_TRANSPORT=tcp`) bound to `addr`,
/// with room for 1 MiB messages both ways and sends that wait at most [`ECHO_WAIT`] for room.
fn ib_socket(addr: SocketAddr) -> Result<RdsSocket, String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    s.set_transport(transport())
        .map_err(|e| format!("SO_RDS_TRANSPORT: {}", err_name(&e)))?;
    crate::util::force_buffers(&s, 8 << 20)?;
    // A send that waits for room waits a bounded time.
    s.set_send_timeout(Some(ECHO_WAIT))
        .map_err(|e| format!("SO_SNDTIMEO: {e}"))?;
    s.bind(addr)
        .map_err(|e| format!("bind {addr}: {}", err_name(&e)))?;
    Ok(s)
}

pub(crate) fn echo(args: &[&str]) -> Result<(), String> {
    let (addr, first, n, secs, stops) = match args {
        [a, f, n, s] => (a, f, n, s, "1"),
        [a, f, n, s, stops] => (a, f, n, s, *stops),
        _ => return Err("usage: ib-echo ADDR FIRST-PORT NPORTS SECONDS [CLIENTS]".into()),
    };
    let mut stops: u32 = parse(stops, "client count")?;
    let ip: IpAddr = parse(addr, "address")?;
    let first: u16 = parse(first, "port")?;
    let n: u16 = parse(n, "count")?;
    let bound = Duration::from_secs(parse(secs, "seconds")?);
    let socks = (0..n)
        .map(|i| ib_socket(SocketAddr::new(ip, first + i)))
        .collect::<Result<Vec<_>, _>>()?;
    println!("# echo bound to {ip} ports {first}..{}", first + n - 1);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let fds: Vec<(i32, i16)> = socks
        .iter()
        .map(|s| (std::os::fd::AsRawFd::as_raw_fd(s), libc::POLLIN))
        .collect();
    let start = Instant::now();
    let mut echoed = 0u64;
    let mut buf = vec![0u8; MAX + 1];
    'serve: while start.elapsed() < bound {
        let _ = librds::poll_fds(&fds, Duration::from_millis(200));
        for s in &socks {
            while let Ok((len, from)) = recv_nb(s, &mut buf) {
                if &buf[..len] == STOP {
                    stops = stops.saturating_sub(1);
                    if stops == 0 {
                        break 'serve;
                    }
                    continue;
                }
                // Sent back as it came; a full send buffer waits (a bounded blocking send).
                if let Err(e) = s.send_to(&buf[..len], from) {
                    println!("# echo to {from}: {}", err_name(&e));
                } else {
                    echoed += 1;
                }
            }
        }
    }
    println!("# echoed {echoed} in {:?}", start.elapsed());
    Ok(())
}

fn recv_nb(s: &RdsSocket, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
    let m = s.recv_msg(buf, 0, libc::MSG_DONTWAIT)?;
    match m.from {
        Some(f) => Ok((m.len, f)),
        None => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
    }
}

/// A payload of `len` bytes unique to (`seed`, `len`), with a small header naming it.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut p = pattern(len, seed ^ (len as u64).wrapping_mul(0x9e37));
    let tag = seed.to_be_bytes();
    let n = tag.len().min(len);
    p[..n].copy_from_slice(&tag[..n]);
    p
}

/// Waits for a message on `s` within `wait`; returns it and its source.
fn recv_wait(
    s: &RdsSocket,
    buf: &mut [u8],
    wait: Duration,
) -> Result<(Vec<u8>, SocketAddr), String> {
    let t0 = Instant::now();
    loop {
        match recv_nb(s, buf) {
            Ok((n, from)) => return Ok((buf[..n].to_vec(), from)),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
            Err(e) => return Err(format!("recv: {}", err_name(&e))),
        }
        let left = wait.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return Err("nothing came back".into());
        }
        let _ = s.poll(libc::POLLIN, left.min(Duration::from_millis(200)));
    }
}

/// Sends `p` to `to` and waits for it to come back from there, the same bytes.
fn round_trip(s: &RdsSocket, to: SocketAddr, p: &[u8], buf: &mut [u8]) -> Result<(), String> {
    s.send_to(p, to)
        .map_err(|e| format!("send {} B: {}", p.len(), err_name(&e)))?;
    let (got, from) = recv_wait(s, buf, ECHO_WAIT)?;
    if from != to {
        return Err(format!("answer from {from}, not {to}"));
    }
    if got != p {
        return Err(format!(
            "{} B came back as {} B or changed",
            p.len(),
            got.len()
        ));
    }
    Ok(())
}

pub(crate) fn client(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let (local, peer, first, n, tag, tos) = match args {
        [l, p, f, n, t] => (l, p, f, n, t, "0"),
        [l, p, f, n, t, tos] => (l, p, f, n, t, *tos),
        _ => return Err("usage: ib-client LOCAL PEER FIRST-PORT NPORTS TAG [TOS]".into()),
    };
    let tos: u8 = parse(tos, "type of service")?;
    let lip: IpAddr = parse(local, "address")?;
    let pip: IpAddr = parse(peer, "address")?;
    let first: u16 = parse(first, "port")?;
    let nports: u16 = parse(n, "count")?;
    let v6 = lip.is_ipv6();
    let name = |c: &str| format!("ib_{tag}_{c}");
    let mut buf = vec![0u8; MAX + 1];
    let to = |i: u16| SocketAddr::new(pip, first + i % nports);
    let tname = if over_tcp() { "tcp" } else { "infiniband" };
    let s = ib_socket(SocketAddr::new(lip, 0))?;
    if tos != 0 {
        // The checks' own connection (the echo server answers on its socket's, TOS 0).
        s.ioctl_byte(SIOCRDSSETTOS, Some(tos))
            .map_err(|e| format!("SIOCRDSSETTOS: {}", err_name(&e)))?;
    }

    // The first exchange connects; the peer may still be starting: retry for a while.
    let t0 = Instant::now();
    let first_trip = loop {
        let p = payload(64, 1);
        match s.send_to(&p, to(0)) {
            Ok(_) => {}
            Err(e) => break Err(format!("send: {}", err_name(&e))),
        }
        match recv_wait(&s, &mut buf, Duration::from_secs(5)) {
            Ok((got, _)) if got == p => break Ok(()),
            Ok(_) => continue,
            Err(_) if t0.elapsed() < Duration::from_secs(120) => continue,
            Err(e) => break Err(e),
        }
    };
    r.check(&name("connect"), "echo", first_trip.clone());
    if first_trip.is_err() {
        return Ok(());
    }
    // Late duplicates of the retries above.
    while recv_wait(&s, &mut buf, Duration::from_millis(500)).is_ok() {}

    // Ping-pong.
    let pp = (0..20).try_for_each(|i| round_trip(&s, to(0), &payload(64, 100 + i), &mut buf));
    r.check(&name("pingpong_20"), "20", pp);

    // Every size, 0 B to 1 MiB, across the fragment boundaries.
    let sizes = [
        0usize, 1, 47, 48, 100, 4095, 4096, 4097, 8191, 8192, 8193, 12288, 65536, 262_144,
        1_048_575, MAX,
    ];
    let mut bad = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        if let Err(e) = round_trip(&s, to(1), &payload(len, 200 + i as u64), &mut buf) {
            bad.push(format!("{len}={e}"));
        }
    }
    r.check(
        &name("sizes_0_to_1m"),
        &format!("{}", sizes.len()),
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        },
    );

    // Many sockets to many ports at once: 6 sockets x all ports x 4 messages, interleaved;
    // every message back, in order per (socket, port).
    let many = (|| -> Result<(), String> {
        let socks = (0..6)
            .map(|_| ib_socket(SocketAddr::new(lip, 0)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut want: HashMap<(usize, SocketAddr), Vec<Vec<u8>>> = HashMap::new();
        for round in 0..4u64 {
            for (k, so) in socks.iter().enumerate() {
                for port in 0..nports {
                    let p = payload(
                        100 + (round as usize) * 700,
                        1000 + round * 100 + k as u64 * 10 + port as u64,
                    );
                    so.send_to(&p, to(port))
                        .map_err(|e| format!("send: {}", err_name(&e)))?;
                    want.entry((k, to(port))).or_default().push(p);
                }
            }
        }
        for (k, so) in socks.iter().enumerate() {
            let mut got: HashMap<SocketAddr, Vec<Vec<u8>>> = HashMap::new();
            for _ in 0..(4 * nports as usize) {
                let (m, from) = recv_wait(so, &mut buf, ECHO_WAIT)?;
                got.entry(from).or_default().push(m);
            }
            for port in 0..nports {
                if got.get(&to(port)) != want.get(&(k, to(port))) {
                    return Err(format!(
                        "socket {k} port {port}: lost, reordered or changed"
                    ));
                }
            }
        }
        Ok(())
    })();
    r.check(&name("many_sockets_ports"), &format!("6x{nports}x4"), many);

    // A stream: 300 messages of 8 KiB kept 16 in flight; all back, in order, intact.
    let stream = (|| -> Result<(), String> {
        const N: u64 = 300;
        let (mut sent, mut back) = (0u64, 0u64);
        let t = Instant::now();
        while back < N {
            if t.elapsed() > Duration::from_secs(240) {
                return Err(format!("{back} of {N} back in time"));
            }
            while sent < N && sent - back < 16 {
                s.send_to(&payload(8192, 5000 + sent), to(2))
                    .map_err(|e| format!("send: {}", err_name(&e)))?;
                sent += 1;
            }
            let (m, _) = recv_wait(&s, &mut buf, ECHO_WAIT)?;
            if m != payload(8192, 5000 + back) {
                return Err(format!("message {back} lost, reordered or changed"));
            }
            back += 1;
        }
        Ok(())
    })();
    r.check(&name("stream_300x8k"), "300", stream);

    // Another type of service: another connection.
    let tos = (|| -> Result<(), String> {
        let t = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
        t.set_transport(transport())
            .map_err(|e| format!("SO_RDS_TRANSPORT: {}", err_name(&e)))?;
        t.bind(SocketAddr::new(lip, 0))
            .map_err(|e| format!("bind: {}", err_name(&e)))?;
        t.ioctl_byte(SIOCRDSSETTOS, Some(3))
            .map_err(|e| format!("SIOCRDSSETTOS: {}", err_name(&e)))?;
        round_trip(&t, to(0), &payload(300, 77), &mut buf)?;
        let conns = t
            .connections(v6)
            .map_err(|e| format!("RDS_INFO_CONNECTIONS: {}", err_name(&e)))?;
        let has = |tos: u8| {
            conns.iter().any(|c| {
                c.laddr == lip
                    && c.faddr == pip
                    && c.tos.unwrap_or(tos) == tos
                    && c.transport == tname
            })
        };
        // Over TCP every type of service maps to 0: one connection.
        let ok = if over_tcp() {
            has(0) && (v6 || !has(3))
        } else {
            has(0) && has(3)
        };
        if !ok {
            return Err(format!("connections {conns:?}"));
        }
        Ok(())
    })();
    r.check(
        &name("tos_3_own_connection"),
        if over_tcp() { "tos=0 (tcp)" } else { "tos=0,3" },
        tos,
    );

    // rds-ping's protocol: a message to port 0 is answered from port 0.
    let ping = (|| -> Result<(), String> {
        s.send_to(b"ping", SocketAddr::new(pip, 0))
            .map_err(|e| format!("send: {}", err_name(&e)))?;
        let (m, from) = recv_wait(&s, &mut buf, ECHO_WAIT)?;
        if from != SocketAddr::new(pip, 0) || !m.is_empty() {
            return Err(format!("{} B from {from}", m.len()));
        }
        Ok(())
    })();
    r.check(&name("ping_port_0"), "pong", ping);

    // The tables: the connection and its RDMA facts.
    let info = (|| -> Result<(), String> {
        let conns = s
            .connections(v6)
            .map_err(|e| format!("RDS_INFO_CONNECTIONS: {}", err_name(&e)))?;
        let c = conns
            .iter()
            .find(|c| c.laddr == lip && c.faddr == pip && c.tos.unwrap_or(0) == 0)
            .ok_or_else(|| format!("no connection in {conns:?}"))?;
        if c.transport != tname || !c.connected() {
            return Err(format!("{c:?}"));
        }
        if over_tcp() {
            let t = s
                .tcp_sockets(v6)
                .map_err(|e| format!("RDS_INFO_TCP_SOCKETS: {}", err_name(&e)))?;
            return if t.iter().any(|i| i.local.ip() == lip && i.peer.ip() == pip) {
                Ok(())
            } else {
                Err(format!("no TCP socket in {t:?}"))
            };
        }
        let ib = s
            .rdma_connections(v6)
            .map_err(|e| format!("RDS_INFO_IB_CONNECTIONS: {}", err_name(&e)))?;
        let i = ib
            .iter()
            .find(|i| i.src_addr == lip && i.dst_addr == pip && i.tos == 0)
            .ok_or_else(|| format!("no IB connection in {ib:?}"))?;
        if i.max_send_wr == 0 || i.max_recv_wr == 0 || i.max_send_sge == 0 {
            return Err(format!("{i:?}"));
        }
        Ok(())
    })();
    r.check(&name("info_tables"), "connected", info);
    // The echo server is done.
    let _ = s.send_to(STOP, to(0));
    Ok(())
}

/// The size of message `i` of a fault-test stream: 8 B to about 9 KiB, so that a third of the
/// messages travel in two or three fragments.
fn stream_len(i: u64) -> usize {
    8 + (i.wrapping_mul(2_654_435_761) % 9000) as usize
}

/// Writes `n` into the progress file `path` (the guest script reads it to time its faults): a
/// new file renamed over the old one, so that a reader never finds it empty or half-written.
pub(crate) fn progress(path: &str, n: u64) {
    let tmp = format!("{path}.tmp");
    if std::fs::write(&tmp, format!("{n}\n")).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// `rds-tests ib-sink ADDR PORT COUNT PROGRESS-FILE SECONDS [resume]`: receives the stream
/// of `ib-source` and checks that message `i` (its first 8 bytes) is the `i`th to arrive,
/// with its content intact: every message exactly once and in order, whatever the connection
/// went through. Writes the count received to PROGRESS-FILE as it goes; prints `# received N`
/// and exits 0 when all COUNT came (messages 0 to COUNT - 1), an error otherwise (the first
/// message out of order, a changed payload, or SECONDS passed). With `resume`, a socket bound
/// after the stream began (the peer's module was reloaded: what arrived while no socket was
/// bound is gone, as RDS drops messages for a port nobody holds): the first message may be
/// any, and from it on every one exactly once and in order up to COUNT - 1; it prints
/// `# received N from I`.
pub(crate) fn sink(args: &[&str]) -> Result<(), String> {
    let (addr, port, count, prog, secs, resume) = match args {
        [a, p, c, g, s] => (a, p, c, g, s, false),
        [a, p, c, g, s, "resume"] => (a, p, c, g, s, true),
        _ => return Err("usage: ib-sink ADDR PORT COUNT PROGRESS-FILE SECONDS [resume]".into()),
    };
    let at = SocketAddr::new(parse(addr, "address")?, parse(port, "port")?);
    let count: u64 = parse(count, "count")?;
    let bound = Duration::from_secs(parse(secs, "seconds")?);
    let s = ib_socket(at)?;
    println!("# sink bound to {at}");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    let mut buf = vec![0u8; MAX + 1];
    let mut next = 0u64;
    let mut first = None;
    let mut got_n = 0u64;
    progress(prog, 0);
    while next < count {
        let left = bound.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(format!("{next} of {count} received in {bound:?}"));
        }
        let (got, _) = match recv_wait(&s, &mut buf, left) {
            Ok(m) => m,
            Err(e) => return Err(format!("after {next} of {count}: {e}")),
        };
        if got.len() < 8 {
            return Err(format!("after {next}: a message of {} B", got.len()));
        }
        let mut idx = [0u8; 8];
        idx.copy_from_slice(&got[..8]);
        let i = u64::from_be_bytes(idx);
        if resume && first.is_none() {
            if i >= count {
                return Err(format!("the first message is {i}, past the last ({count})"));
            }
            first = Some(i);
            next = i;
        }
        if i != next {
            return Err(format!(
                "message {i} arrived where {next} was due ({})",
                if i < next {
                    "a duplicate"
                } else {
                    "messages lost"
                }
            ));
        }
        if got != payload(stream_len(i), i) {
            return Err(format!("message {i} changed ({} B)", got.len()));
        }
        next += 1;
        got_n += 1;
        if got_n.is_multiple_of(16) || next == count {
            progress(prog, got_n);
        }
    }
    // The sender may close its socket now (closing drops what it has not had acknowledged).
    let _ = std::fs::write(format!("{prog}.done"), b"done\n");
    match first {
        Some(f) => println!(
            "# received {got_n} from {f} in order in {:?}",
            start.elapsed()
        ),
        None => println!("# received {got_n} in order in {:?}", start.elapsed()),
    }
    Ok(())
}

/// `rds-tests ib-source LOCAL PEER PORT COUNT PROGRESS-FILE SECONDS PACE-MS DONE-FILE`:
/// sends COUNT messages (message `i` starts with `i`, big-endian, and has [`stream_len`]
/// bytes) to PEER:PORT, each send waiting for room as long as it takes (within SECONDS): a
/// connection that is down holds the messages, and the sender waits. PACE-MS is a pause
/// after each message (0: none). Writes the count sent to PROGRESS-FILE. Then keeps its
/// socket open until DONE-FILE exists (the sink's, written when it has everything): closing
/// an RDS socket drops its messages not yet acknowledged, as in C.
pub(crate) fn source(args: &[&str]) -> Result<(), String> {
    let [local, peer, port, count, prog, secs, pace, done] = args else {
        return Err(
            "usage: ib-source LOCAL PEER PORT COUNT PROGRESS-FILE SECONDS PACE-MS DONE-FILE".into(),
        );
    };
    let pace = Duration::from_millis(parse(pace, "pace")?);
    let port: u16 = parse(port, "port")?;
    let from = SocketAddr::new(parse(local, "address")?, 0);
    let to = SocketAddr::new(parse(peer, "address")?, port);
    let count: u64 = parse(count, "count")?;
    let bound = Duration::from_secs(parse(secs, "seconds")?);
    let s = ib_socket(from)?;
    let start = Instant::now();
    let mut waits = 0u64;
    progress(prog, 0);
    for i in 0..count {
        let p = payload(stream_len(i), i);
        loop {
            match s.send_to(&p, to) {
                Ok(_) => break,
                // Room did not come within the send timeout (the connection is down): wait on.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN | libc::ENOBUFS | libc::ETIMEDOUT)
                    ) && start.elapsed() < bound =>
                {
                    waits += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(format!("send {i}: {}", err_name(&e))),
            }
        }
        if (i + 1).is_multiple_of(16) || i + 1 == count {
            progress(prog, i + 1);
        }
        if !pace.is_zero() {
            std::thread::sleep(pace);
        }
    }
    let sent = start.elapsed();
    while !Path::new(done).exists() {
        if start.elapsed() >= bound {
            return Err(format!(
                "sent {count} in {sent:?}; the receiver did not finish within {bound:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("# sent {count} in {sent:?} ({waits} sends waited past the send timeout)");
    Ok(())
}

/// `rds-tests ib-reap SADDR RADDR`: the reaper and the sequence numbers of a network
/// connection (rds_rs at both ends, one module: the test build's `conn_idle_ms`, `reset` and
/// `ib_route_delay_ms`). An idle connection that is up is not reaped, however short the idle
/// time. Three messages from SADDR to RADDR are delivered and not acknowledged (no ack was
/// asked for and nothing goes back), so the sending end keeps them for retransmission. Both
/// ends go down; the sender's reconnect is held up in its route handler, and meanwhile the
/// receiving end's connection, down and idle, is reaped. When the sender gets through it
/// sends the three again, marked `RETRANSMITTED`: the new receiving connection must know them
/// as old (`recv_drop_old_seq` up by at least three: anything else unacknowledged comes again
/// too) and deliver nothing (a C peer, which keeps its connections, retransmits the same way
/// to a connection rds_rs reaped while it was down).
pub(crate) fn reap(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [sa, ra] = args else {
        return Err("usage: rds-tests ib-reap SADDR RADDR".into());
    };
    let sa: IpAddr = parse(sa, "address")?;
    let ra: IpAddr = parse(ra, "address")?;
    let tx = ib_socket(SocketAddr::new(sa, 4310))?;
    let rx = ib_socket(SocketAddr::new(ra, 4311))?;
    let to = SocketAddr::new(ra, 4311);
    let counter = |name: &str| crate::ib_mr::counter(&rx, name);
    let mut buf = vec![0u8; 4096];
    // The connection is up, and what went before is settled (a first message asks for an
    // ack: ACK_REQUIRED is set on a connection's first message after it comes up).
    tx.send_to(b"hello", to).map_err(|e| format!("send: {e}"))?;
    recv_wait(&rx, &mut buf, Duration::from_secs(60)).map_err(|e| format!("hello: {e}"))?;
    // With a short idle time the receiving end's connection is idle, and up: it stays (the
    // peer could be using memory registered at this end over it, with no message). The
    // reaper's next pass was planned with the old idle time (every 2.5 s at most); from then
    // on it runs every 125 ms.
    let idle = crate::faults::IdleMs::set(500)?;
    std::thread::sleep(Duration::from_secs(4));
    let receiver_up = |s: &RdsSocket| -> Result<bool, String> {
        Ok(s.connections(false)
            .map_err(|e| format!("RDS_INFO_CONNECTIONS: {}", err_name(&e)))?
            .iter()
            .any(|c| c.laddr == ra && c.faddr == sa && c.tos == Some(0) && c.connected()))
    };
    r.expect(
        "reap_up_stays",
        &format!("receiver_connection_up={}", receiver_up(&rx)?),
        "receiver_connection_up=true",
    );
    let (old0, kept0, restored0) = (
        counter("recv_drop_old_seq")?,
        counter("rs_conn_seq_kept")?,
        counter("rs_conn_seq_restored")?,
    );
    for i in 0..3u8 {
        tx.send_to(&[b'm', b'0' + i], to)
            .map_err(|e| format!("send: {e}"))?;
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        let (p, _) = recv_wait(&rx, &mut buf, Duration::from_secs(60))?;
        got.push(String::from_utf8_lossy(&p).into_owned());
    }
    r.expect("reap_delivered", &got.join(","), "m0,m1,m2");
    // The connections go down (the test build's reset); the sender's, holding the three
    // unacknowledged, reconnects at once, but its route handler is held for 5 s, as if the
    // peer were unreachable for a while. The receiving end's connection, down and idle, is
    // reaped meanwhile and leaves its sequence numbers behind.
    std::thread::sleep(Duration::from_millis(600));
    let route = crate::faults::Knob::set("ib_route_delay_ms", 5000)?;
    crate::faults::write_hook("reset", b"1").map_err(|e| format!("reset: {e}"))?;
    let t0 = Instant::now();
    while counter("rs_conn_seq_kept")? == kept0 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let kept = counter("rs_conn_seq_kept")? > kept0;
    drop(route);
    // The sender's connect goes on; the passive end's new connection takes the kept numbers
    // up and drops the three retransmissions as old.
    let t1 = Instant::now();
    let mut again = Vec::new();
    while t1.elapsed() < Duration::from_secs(30) {
        if let Ok((p, _)) = recv_wait(&rx, &mut buf, Duration::from_millis(500)) {
            again.push(String::from_utf8_lossy(&p).into_owned());
        }
        if counter("recv_drop_old_seq")? >= old0 + 3 && t1.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    drop(idle);
    r.expect(
        "reap_retransmissions_dropped",
        &format!(
            "kept={kept} delivered_again=[{}] old_seq_dropped_at_least_3={} restored={}",
            again.join(","),
            counter("recv_drop_old_seq")? >= old0 + 3,
            counter("rs_conn_seq_restored")? > restored0
        ),
        "kept=true delivered_again=[] old_seq_dropped_at_least_3=true restored=true",
    );
    // The connection works afterwards.
    tx.send_to(b"after", to).map_err(|e| format!("send: {e}"))?;
    let after = recv_wait(&rx, &mut buf, Duration::from_secs(60))
        .map(|(p, _)| String::from_utf8_lossy(&p).into_owned())
        .unwrap_or_else(|e| e);
    r.expect("reap_after", &after, "after");
    Ok(())
}

/// Warm-up exchanges of [`recycle`] (the connection, the pools' first spares).
const RECYCLE_WARM: u64 = 200;
/// Measured exchanges of [`recycle`]: two messages sent each.
const RECYCLE_N: u64 = 1000;
/// The allocations [`recycle`] allows in its measured exchanges: a message whose ack came
/// before its send completion, or one settled by an ack-only frame that came late, is
/// recycled at the completion instead; a few may still be in flight at a sender's next send.
const RECYCLE_ALLOC_MAX: u64 = 20;

pub(crate) fn recycle(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [local, peer, tag] = args else {
        return Err("usage: ib-recycle LOCAL PEER TAG".into());
    };
    let lip: IpAddr = parse(local, "address")?;
    let pip: IpAddr = parse(peer, "address")?;
    let name = |c: &str| format!("ib_{tag}_{c}");
    let cli = ib_socket(SocketAddr::new(lip, 4101))?;
    let srv_addr = SocketAddr::new(pip, 4100);
    let srv = ib_socket(srv_addr)?;
    let mut buf = vec![0u8; 2048];
    // `p` from `tx` to `to`, where `rx` must get it unchanged; returns its source.
    let pass = |tx: &RdsSocket,
                to: SocketAddr,
                rx: &RdsSocket,
                p: &[u8],
                what: &str,
                buf: &mut [u8]|
     -> Result<SocketAddr, String> {
        tx.send_to(p, to)
            .map_err(|e| format!("{what}: send: {}", err_name(&e)))?;
        let (got, from) = recv_wait(rx, buf, ECHO_WAIT)?;
        if got != p {
            return Err(format!("{what} came as {} B or changed", got.len()));
        }
        Ok(from)
    };
    let exchange = |i: u64, buf: &mut [u8]| -> Result<(), String> {
        let from = pass(
            &cli,
            srv_addr,
            &srv,
            &payload(1024, i),
            &format!("request {i}"),
            buf,
        )?;
        pass(
            &srv,
            from,
            &cli,
            &payload(64, i),
            &format!("answer {i}"),
            buf,
        )
        .map(|_| ())
    };
    let warm = (0..RECYCLE_WARM).try_for_each(|i| exchange(i, &mut buf));
    r.check(
        &name("recycle_warm"),
        &RECYCLE_WARM.to_string(),
        warm.clone(),
    );
    if warm.is_err() {
        return Ok(());
    }
    let counters = || -> Result<(u64, u64), String> {
        Ok((
            crate::ib_mr::counter(&cli, "rs_msg_alloc")?,
            crate::ib_mr::counter(&cli, "rs_msg_recycled")?,
        ))
    };
    let (alloc0, rec0) = counters()?;
    let run = (RECYCLE_WARM..RECYCLE_WARM + RECYCLE_N).try_for_each(|i| exchange(i, &mut buf));
    let (alloc1, rec1) = counters()?;
    let (alloc, rec) = (alloc1 - alloc0, rec1 - rec0);
    let obs = format!("{} sends: alloc {alloc} recycled {rec}", 2 * RECYCLE_N);
    let verdict = run.and_then(|()| {
        if alloc <= RECYCLE_ALLOC_MAX && alloc + rec == 2 * RECYCLE_N {
            Ok(())
        } else {
            Err(format!(
                "expected at most {RECYCLE_ALLOC_MAX} allocations, the rest recycled"
            ))
        }
    });
    r.check(&name("recycle_steady"), &obs, verdict);
    Ok(())
}

/// `MemFree` of `/proc/meminfo`, in KiB.
fn mem_free_kib() -> Result<u64, String> {
    let m = std::fs::read_to_string("/proc/meminfo").map_err(|e| format!("/proc/meminfo: {e}"))?;
    m.lines()
        .find_map(|l| l.strip_prefix("MemFree:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no MemFree in /proc/meminfo".into())
}

/// Receive pages one IB connection posts (`RECV_WR` in `rds_ib/ib.rs`: 256 of 4 KiB, 1 MiB),
/// the bulk of what it holds (Documentation/design.md, "Memory per connection").
const RING_KIB: u64 = 256 * 4;
/// What one connection may hold at most with the soft device's own queues and CQs (about
/// 300 KiB on rxe), its spare pages (at most 128 KiB), header buffers and bookkeeping.
const CONN_MAX_KIB: u64 = 2560;

/// `rds-tests ib-many TAG LOCAL NTOS PEER... -- DROP...` (rds_rs, both ends in this host): one
/// socket per type of service 0..NTOS on LOCAL sends a message to a socket on each PEER, so
/// that NTOS times the peers connections come up, each with its other end in this host too.
/// Checks that `RDS_INFO_IB_CONNECTIONS` lists them all with the documented ring (256
/// receives) and at most 128 KiB spare (`cache_allocs`), and that free memory fell by at
/// least their rings and at most [`CONN_MAX_KIB`] each. Then the DROP addresses (peers whose
/// routes the caller lets this program delete, as `ip` commands) go away, every connection is
/// reset, and those to and from the dropped peers, down now, are reaped (the idle time
/// shortened): free memory comes back by at least their rings.
pub(crate) fn many(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let (head, drop_cmds) = match args.iter().position(|a| *a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let [tag, local, ntos, peers @ ..] = head else {
        return Err("usage: rds-tests ib-many TAG LOCAL NTOS PEER... [-- DROP-PEER...]".into());
    };
    let local: IpAddr = parse(local, "address")?;
    let ntos: u8 = parse(ntos, "count")?;
    let peers = peers
        .iter()
        .map(|p| parse::<IpAddr>(p, "address"))
        .collect::<Result<Vec<_>, _>>()?;
    let dropped = drop_cmds
        .iter()
        .map(|p| parse::<IpAddr>(p, "address"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut txs = Vec::new();
    for tos in 0..ntos {
        let s = ib_socket(SocketAddr::new(local, 4330 + u16::from(tos)))?;
        s.ioctl_byte(SIOCRDSSETTOS, Some(tos))
            .map_err(|e| format!("SIOCRDSSETTOS: {}", err_name(&e)))?;
        txs.push(s);
    }
    let rxs = peers
        .iter()
        .map(|p| ib_socket(SocketAddr::new(*p, 4340)))
        .collect::<Result<Vec<_>, _>>()?;
    let ib_conns = |s: &RdsSocket| -> Result<Vec<librds::info::RdmaConnectionInfo>, String> {
        s.rdma_connections(false)
            .map_err(|e| format!("RDS_INFO_IB_CONNECTIONS: {}", err_name(&e)))
    };
    let ours = |c: &librds::info::RdmaConnectionInfo| {
        (c.src_addr == local && peers.contains(&c.dst_addr))
            || (c.dst_addr == local && peers.contains(&c.src_addr))
    };
    let before: Vec<_> = ib_conns(&txs[0])?.into_iter().filter(|c| ours(c)).collect();
    let free0 = mem_free_kib()?;
    let mut buf = vec![0u8; 4096];
    for (tos, tx) in txs.iter().enumerate() {
        for (p, rx) in peers.iter().zip(&rxs) {
            tx.send_to(&[tos as u8], SocketAddr::new(*p, 4340))
                .map_err(|e| format!("send to {p} (tos {tos}): {}", err_name(&e)))?;
            recv_wait(rx, &mut buf, ECHO_WAIT).map_err(|e| format!("at {p} (tos {tos}): {e}"))?;
        }
    }
    let conns: Vec<_> = ib_conns(&txs[0])?.into_iter().filter(|c| ours(c)).collect();
    let free1 = mem_free_kib()?;
    // Some may have been up before (type of service 0 to the first peer, from earlier tests):
    // the memory is that of the new ones.
    let n = (conns.len() - before.len().min(conns.len())) as u64;
    let want = 2 * usize::from(ntos) * peers.len();
    r.expect(
        &format!("{tag}_many_connections_listed"),
        &format!("connections={}", conns.len()),
        &format!("connections={want}"),
    );
    let rings_ok = conns
        .iter()
        .all(|c| c.max_recv_wr == 256 && c.cache_allocs <= 128);
    r.expect(
        &format!("{tag}_many_connections_ring"),
        &format!(
            "documented={rings_ok} (max_recv_wr {:?}, cache_allocs KiB {:?})",
            conns
                .iter()
                .map(|c| c.max_recv_wr)
                .collect::<std::collections::BTreeSet<_>>(),
            conns.iter().map(|c| c.cache_allocs).max()
        ),
        &format!(
            "documented=true (max_recv_wr {{256}}, cache_allocs KiB {:?})",
            conns.iter().map(|c| c.cache_allocs).max()
        ),
    );
    let used = free0.saturating_sub(free1);
    let per = used / n.max(1);
    r.expect(
        &format!("{tag}_many_connections_memory"),
        &format!(
            "per_connection_in_bounds={} ({used} KiB for {n} connections, {per} KiB each)",
            n > 0 && used >= n * RING_KIB && used <= n * CONN_MAX_KIB
        ),
        &format!("per_connection_in_bounds=true ({used} KiB for {n} connections, {per} KiB each)"),
    );
    if dropped.is_empty() {
        return Ok(());
    }
    // The dropped peers' connections go down and are reaped; the others reconnect.
    drop(rxs);
    drop(txs);
    let idle = crate::faults::IdleMs::set(300)?;
    for p in &dropped {
        let st = std::process::Command::new("ip")
            .args(["addr", "del", &format!("{p}/32"), "dev", "veth0"])
            .status()
            .map_err(|e| format!("ip addr del {p}: {e}"))?;
        if !st.success() {
            return Err(format!("ip addr del {p}: {st}"));
        }
        let _ = std::process::Command::new("ip")
            .args(["route", "del", &format!("{p}/32"), "dev", "veth1"])
            .status();
    }
    let probe = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    let gone = |c: &librds::info::RdmaConnectionInfo| {
        dropped.contains(&c.src_addr) || dropped.contains(&c.dst_addr)
    };
    let ndrop = conns.iter().filter(|c| gone(c)).count() as u64;
    crate::faults::write_hook("reset", b"1").map_err(|e| format!("reset: {e}"))?;
    let t0 = Instant::now();
    let left = loop {
        let left = ib_conns(&probe)?.into_iter().filter(|c| gone(c)).count();
        if left == 0 || t0.elapsed() > Duration::from_secs(60) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(idle);
    // Freed pages may sit in per-CPU lists for a moment.
    std::thread::sleep(Duration::from_secs(1));
    let free2 = mem_free_kib()?;
    let back = free2.saturating_sub(free1);
    r.expect(
        &format!("{tag}_many_connections_reaped"),
        &format!(
            "left={left} memory_back={} ({back} KiB back for {ndrop} connections)",
            ndrop > 0 && back >= ndrop * RING_KIB * 9 / 10
        ),
        &format!("left=0 memory_back=true ({back} KiB back for {ndrop} connections)"),
    );
    Ok(())
}

/// Rounds of [`duel`].
const DUEL_ROUNDS: u8 = 8;

/// `rds-tests ib-duel TAG A B TOS-BASE race|unsent|crossed` (rds_rs at both ends, this host): both ends
/// connect to each other at once, [`DUEL_ROUNDS`] times, each time on a new connection (types
/// of service TOS-BASE and up): a socket on A and one on B send each other a message back to
/// back, so that each end's connect is in progress when the other's request arrives. The
/// tie-break (`yields_connect`, Documentation/differences-from-c.md) settles every round in one
/// attempt: no request of a connect still current is rejected (`rs_ib_connect_rejected`), no
/// connection resets (`conn_reset`), and each reject for the race (`ib_connect_raced`, at the
/// smaller address) has the other end's yield (`rs_ib_connect_yielded`) to match. `unsent`
/// holds each connect's request back 300 ms after its route resolved (the test build's
/// `ib_route_delay_ms`), so that the first request always meets the other end's connect
/// before its request left: that end yields, every round (`race` leaves the timing alone and
/// reports which branch the rounds took). `crossed` holds each connection request back 300 ms
/// before it is looked at (`ib_request_delay_ms`), so that both requests left: the end with
/// the larger address yields and the other rejects, every round.
pub(crate) fn duel(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let [tag, a, b, base, mode] = args else {
        return Err("usage: rds-tests ib-duel TAG A B TOS-BASE race|unsent|crossed".into());
    };
    let a: IpAddr = parse(a, "address")?;
    let b: IpAddr = parse(b, "address")?;
    let base: u8 = parse(base, "type of service")?;
    let knob = match *mode {
        "race" => None,
        "unsent" => Some("ib_route_delay_ms"),
        "crossed" => Some("ib_request_delay_ms"),
        m => return Err(format!("bad mode {m}")),
    };
    let names = [
        "rs_ib_connect_yielded",
        "ib_connect_raced",
        "rs_ib_connect_rejected",
        "conn_reset",
    ];
    let probe = ib_socket(SocketAddr::new(a, 0))?;
    let counters = || -> Result<Vec<u64>, String> {
        names
            .iter()
            .map(|n| crate::ib_mr::counter(&probe, n))
            .collect()
    };
    let hold = match knob {
        Some(k) => Some(crate::faults::Knob::set(k, 300)?),
        None => None,
    };
    let c0 = counters()?;
    let mut buf = vec![0u8; 64];
    let mut slowest = Duration::ZERO;
    let mut failed = None;
    for i in 0..DUEL_ROUNDS {
        let tos = base.wrapping_add(i);
        let port = 4600 + 2 * u16::from(i);
        let (aa, ba) = (SocketAddr::new(a, port), SocketAddr::new(b, port + 1));
        let (sa, sb) = (ib_socket(aa)?, ib_socket(ba)?);
        for s in [&sa, &sb] {
            s.ioctl_byte(SIOCRDSSETTOS, Some(tos))
                .map_err(|e| format!("SIOCRDSSETTOS: {}", err_name(&e)))?;
        }
        let t0 = Instant::now();
        let sent = sa
            .send_to(&[b'a', i], ba)
            .and_then(|_| sb.send_to(&[b'b', i], aa));
        if let Err(e) = sent {
            failed = Some(format!("round {i}: send: {}", err_name(&e)));
            break;
        }
        let got = recv_wait(&sb, &mut buf, Duration::from_secs(60))
            .and_then(|(p, _)| Ok((p, recv_wait(&sa, &mut buf, Duration::from_secs(60))?.0)));
        match got {
            Ok((pb, pa)) if pb == [b'a', i] && pa == [b'b', i] => {}
            Ok((pb, pa)) => {
                failed = Some(format!("round {i}: got {pb:?} and {pa:?}"));
                break;
            }
            Err(e) => {
                failed = Some(format!("round {i}: {e}"));
                break;
            }
        }
        slowest = slowest.max(t0.elapsed());
    }
    drop(hold);
    let c1 = counters()?;
    let d: Vec<u64> = c1.iter().zip(&c0).map(|(x, y)| x - y).collect();
    let (yielded, raced, rejected, reset) = (d[0], d[1], d[2], d[3]);
    let obs = format!(
        "{DUEL_ROUNDS} rounds: yielded {yielded}, raced {raced}, rejected {rejected}, \
         reset {reset}, slowest {slowest:?}"
    );
    let verdict = if let Some(f) = failed {
        Err(f)
    } else if rejected != 0 || reset != 0 {
        Err("a round took more than one attempt".into())
    } else if raced > yielded {
        Err("a reject for the race without the other end's yield".into())
    } else if knob.is_some() && yielded != u64::from(DUEL_ROUNDS) {
        Err(format!("expected {DUEL_ROUNDS} yields, one per round"))
    } else if *mode == "crossed" && raced != u64::from(DUEL_ROUNDS) {
        Err(format!(
            "expected {DUEL_ROUNDS} rejects for the race, one per round (both requests left)"
        ))
    } else {
        Ok(())
    };
    r.check(&format!("ib_{tag}_duel_{mode}"), &obs, verdict);
    Ok(())
}
