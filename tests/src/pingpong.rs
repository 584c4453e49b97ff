//! A ping-pong between two RDS sockets, usually in two guests over RDS/IB.
//!
//! The client sends `ping <seq>` and waits for `pong <seq>`, resending while the server is not
//! yet bound (RDS drops messages to a port with no socket). The server answers every ping and
//! ends after answering the last one plus a short linger for resent duplicates. Both sides give
//! up after a bounded time.
//!
//! Both sides pin their socket to the IB transport with `SO_RDS_TRANSPORT` before binding, as
//! `rds-stress -T ib` does. Besides naming the transport under test, this keeps the C modules
//! off a lock-order inversion they have in 6.12 (`rds_bind` calls `rds_ib_laddr_check`, which
//! destroys an rdma_cm id, while holding `rds_trans_sem`; the passive accept path takes the two
//! locks the other way round), which lockdep reports on the debug kernel. See
//! Documentation/c-rds-findings.md.

use crate::Report;
use librds::{RdsSocket, Transport};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

const OVERALL: Duration = Duration::from_secs(240);
const LINGER: Duration = Duration::from_secs(3);

fn parse_addr(s: &str) -> Result<Ipv4Addr, String> {
    s.parse().map_err(|e| format!("bad address {s}: {e}"))
}

fn parse_num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("bad number {s}"))
}

fn parse_seq(msg: &[u8], kind: &str) -> Option<u64> {
    let text = std::str::from_utf8(msg).ok()?;
    text.strip_prefix(kind)?.strip_prefix(' ')?.parse().ok()
}

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    match args {
        ["server", addr, port, count] => {
            server(r, parse_addr(addr)?, parse_num(port)?, parse_num(count)?)
        }
        ["client", local, server_addr, port, count] => client(
            r,
            parse_addr(local)?,
            parse_addr(server_addr)?,
            parse_num(port)?,
            parse_num(count)?,
        ),
        _ => Err("usage: pingpong server ADDR PORT COUNT | client LOCAL SERVER PORT COUNT".into()),
    }
}

fn server(r: &mut Report, addr: Ipv4Addr, port: u16, count: u64) -> Result<(), String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    s.set_transport(Transport::Ib)
        .map_err(|e| format!("SO_RDS_TRANSPORT: {e}"))?;
    s.bind(SocketAddrV4::new(addr, port))
        .map_err(|e| format!("bind: {e}"))?;
    println!("# server bound to {addr}:{port}");
    let start = Instant::now();
    let mut answered_last: Option<Instant> = None;
    let mut next = 0u64;
    let mut buf = [0u8; 256];
    let result = loop {
        if let Some(t) = answered_last {
            if t.elapsed() > LINGER {
                break Ok(());
            }
        }
        if start.elapsed() > OVERALL {
            break Err(format!("timed out after answering {next} of {count} pings"));
        }
        if !s
            .wait_readable(Duration::from_millis(200))
            .map_err(|e| format!("poll: {e}"))?
        {
            continue;
        }
        let (n, from) = s.recv_from(&mut buf).map_err(|e| format!("recv: {e}"))?;
        let Some(seq) = parse_seq(&buf[..n], "ping") else {
            break Err(format!("unexpected message {:?}", &buf[..n]));
        };
        if seq > next {
            break Err(format!(
                "ping {seq} arrived before ping {next}: lost or reordered"
            ));
        }
        if seq == next {
            next += 1;
        }
        s.send_to(format!("pong {seq}").as_bytes(), from)
            .map_err(|e| format!("send: {e}"))?;
        if next == count && answered_last.is_none() {
            answered_last = Some(Instant::now());
        }
    };
    r.check("pingpong_server", &format!("{next}/{count}"), result);
    Ok(())
}

fn client(
    r: &mut Report,
    local: Ipv4Addr,
    server: Ipv4Addr,
    port: u16,
    count: u64,
) -> Result<(), String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    s.set_transport(Transport::Ib)
        .map_err(|e| format!("SO_RDS_TRANSPORT: {e}"))?;
    s.bind(SocketAddrV4::new(local, 0))
        .map_err(|e| format!("bind: {e}"))?;
    let dest = SocketAddrV4::new(server, port);
    let start = Instant::now();
    let mut buf = [0u8; 256];
    let mut done = 0u64;
    let mut rtts = Vec::new();
    let result = 'outer: loop {
        if done == count {
            break Ok(());
        }
        let sent = Instant::now();
        s.send_to(format!("ping {done}").as_bytes(), dest)
            .map_err(|e| format!("send: {e}"))?;
        // Wait for this pong; resend after a second (the server may not be bound yet).
        while sent.elapsed() < Duration::from_secs(1) {
            if start.elapsed() > OVERALL {
                break 'outer Err(format!("timed out after {done} of {count} pongs"));
            }
            if !s
                .wait_readable(Duration::from_millis(100))
                .map_err(|e| format!("poll: {e}"))?
            {
                continue;
            }
            let (n, from) = s.recv_from(&mut buf).map_err(|e| format!("recv: {e}"))?;
            if from != std::net::SocketAddr::V4(dest) {
                break 'outer Err(format!("pong from {from}, expected {dest}"));
            }
            match parse_seq(&buf[..n], "pong") {
                Some(seq) if seq == done => {
                    rtts.push(sent.elapsed());
                    done += 1;
                    continue 'outer;
                }
                Some(seq) if seq < done => {} // answer to a resent ping
                _ => break 'outer Err(format!("unexpected message {:?}", &buf[..n])),
            }
        }
    };
    if let Some(best) = rtts.iter().min() {
        println!(
            "# {done} round trips, best {best:?}, total {:?}",
            start.elapsed()
        );
    }
    r.check("pingpong_client", &format!("{done}/{count}"), result);
    Ok(())
}
