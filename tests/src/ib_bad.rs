//! Helpers of the bad-peer test (`tests/guest/ib-bad.sh`, issue 10): a receiver that reports
//! what a misbehaving RDS/IB peer (`tests/peer/badpeer.c`) got delivered, and a background
//! ping-pong between two rds_rs addresses that must carry on while the peer misbehaves.
//!
//! - `rds-tests ib-bad recv ADDR PORT STOP-FILE MAX-SECONDS`: binds ADDR:PORT (IB transport),
//!   prints `bound`, then one line per message received, `msg from=IP/PORT len=N fnv=HASH`
//!   (FNV-1a of the payload, as badpeer prints for what it sends), until STOP-FILE exists or
//!   MAX-SECONDS passed.
//! - `rds-tests ib-bad bg LOCAL PEER PORT TOS PROGRESS-FILE STOP-FILE MAX-SECONDS`: an echo
//!   socket on PEER:PORT and a client on LOCAL, both with type of service TOS, the client
//!   sending `bg N` every 250 ms and waiting for the echo; PROGRESS-FILE holds the number of
//!   round trips done (the guest script reads it to see that the connection carries on).
//!   Ends when STOP-FILE exists: one result line, `ok ib_bad_background N round trips,
//!   longest MS ms` when every echo came back, in order and unchanged, within
//!   [`ECHO_WAIT`], and the connections of that TOS between the two addresses are still up;
//!   `not ok ...` otherwise.

use librds::{RdsSocket, Transport, SIOCRDSSETTOS};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long one background round trip may take (the first one connects): a bound against a
/// hang, generous for a busy host.
const ECHO_WAIT: Duration = Duration::from_secs(60);
/// The pace of the background ping-pong: some twenty round trips in a scenario of a few
/// seconds (at 50 ms it made some 1,450 in each device's run of ib-bad.sh, on the guest's one
/// vCPU beside the scenarios it watches).
const PACE: Duration = Duration::from_millis(250);
/// `RDS_INFO_CONNECTION_FLAG_CONNECTED`.
const FLAG_CONNECTED: u8 = 0x04;

fn parse<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("bad {what} {s}"))
}

/// FNV-1a, 32 bits (badpeer's `fnv`).
fn fnv(data: &[u8]) -> u32 {
    data.iter().fold(2_166_136_261u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    })
}

fn ib_socket(addr: SocketAddrV4) -> Result<RdsSocket, String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    s.set_transport(Transport::Ib)
        .map_err(|e| format!("SO_RDS_TRANSPORT: {e}"))?;
    s.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4 << 20)
        .map_err(|e| format!("SO_RCVBUFFORCE: {e}"))?;
    s.bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    Ok(s)
}

pub(crate) fn run(args: &[&str]) -> Result<(), String> {
    match args {
        ["recv", addr, port, stop, secs] => recv(
            SocketAddrV4::new(parse(addr, "address")?, parse(port, "port")?),
            Path::new(stop),
            Duration::from_secs(parse(secs, "seconds")?),
        ),
        ["bg", local, peer, port, tos, progress, stop, secs] => bg(
            parse(local, "address")?,
            SocketAddrV4::new(parse(peer, "address")?, parse(port, "port")?),
            parse(tos, "type of service")?,
            Path::new(progress),
            Path::new(stop),
            Duration::from_secs(parse(secs, "seconds")?),
        ),
        _ => Err("usage: ib-bad recv ADDR PORT STOP-FILE MAX-SECONDS | \
                  ib-bad bg LOCAL PEER PORT TOS PROGRESS-FILE STOP-FILE MAX-SECONDS"
            .into()),
    }
}

fn recv(addr: SocketAddrV4, stop: &Path, max: Duration) -> Result<(), String> {
    use std::io::Write;
    let s = ib_socket(addr)?;
    println!("bound {addr}");
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    let mut buf = vec![0u8; (1 << 20) + 4096];
    while !stop.exists() && start.elapsed() < max {
        if !s
            .wait_readable(Duration::from_millis(200))
            .map_err(|e| format!("poll: {e}"))?
        {
            continue;
        }
        let (n, from) = s.recv_from(&mut buf).map_err(|e| format!("recv: {e}"))?;
        let data = buf.get(..n).unwrap_or(&[]);
        println!(
            "msg from={}/{} len={n} fnv={:08x}",
            from.ip(),
            from.port(),
            fnv(data)
        );
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

fn bg(
    local: Ipv4Addr,
    peer: SocketAddrV4,
    tos: u8,
    progress: &Path,
    stop: &Path,
    max: Duration,
) -> Result<(), String> {
    let server = ib_socket(peer)?;
    let client = ib_socket(SocketAddrV4::new(local, 0))?;
    // Both ways on a connection of that TOS (a reply goes on its sender's TOS).
    for s in [&server, &client] {
        s.ioctl_byte(SIOCRDSSETTOS, Some(tos))
            .map_err(|e| format!("SIOCRDSSETTOS: {e}"))?;
    }
    let start = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut trips = 0u64;
    let mut longest = Duration::ZERO;
    let result = std::thread::scope(|sc| {
        // The echo side: every message goes back to where it came from.
        let echo = sc.spawn(|| -> Result<(), String> {
            let mut buf = [0u8; 256];
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if !server
                    .wait_readable(Duration::from_millis(100))
                    .map_err(|e| format!("echo poll: {e}"))?
                {
                    continue;
                }
                let (n, from) = server
                    .recv_from(&mut buf)
                    .map_err(|e| format!("echo recv: {e}"))?;
                server
                    .send_to(buf.get(..n).unwrap_or(&[]), from)
                    .map_err(|e| format!("echo send: {e}"))?;
            }
            Ok(())
        });
        let r = (|| -> Result<(), String> {
            let mut buf = [0u8; 256];
            while !stop.exists() {
                if start.elapsed() > max {
                    return Err(format!("still running after {max:?}"));
                }
                let msg = format!("bg {trips}");
                let sent = Instant::now();
                client
                    .send_to(msg.as_bytes(), SocketAddr::V4(peer))
                    .map_err(|e| format!("send {trips}: {e}"))?;
                loop {
                    let left = ECHO_WAIT.checked_sub(sent.elapsed()).ok_or_else(|| {
                        format!("no echo of round trip {trips} within {ECHO_WAIT:?}")
                    })?;
                    if !client
                        .wait_readable(left.min(Duration::from_millis(200)))
                        .map_err(|e| format!("poll: {e}"))?
                    {
                        continue;
                    }
                    let (n, from) = client
                        .recv_from(&mut buf)
                        .map_err(|e| format!("recv: {e}"))?;
                    let got = buf.get(..n).unwrap_or(&[]);
                    if from != SocketAddr::V4(peer) || got != msg.as_bytes() {
                        return Err(format!(
                            "round trip {trips}: {:?} from {from}, expected {msg:?} from {peer}",
                            String::from_utf8_lossy(got)
                        ));
                    }
                    break;
                }
                if trips > 0 {
                    longest = longest.max(sent.elapsed());
                }
                trips += 1;
                let tmp = progress.with_extension("tmp");
                std::fs::write(&tmp, format!("{trips}\n"))
                    .and_then(|()| std::fs::rename(&tmp, progress))
                    .map_err(|e| format!("progress file: {e}"))?;
                std::thread::sleep(PACE);
            }
            Ok(())
        })();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let e = echo
            .join()
            .unwrap_or_else(|_| Err("echo thread panicked".into()));
        r.and(e)
    });
    // The connections of that TOS both ways are up at the end.
    let conns = result.and_then(|()| {
        let list = client
            .connections(false)
            .map_err(|e| format!("RDS_INFO_CONNECTIONS: {e}"))?;
        let up = |l: Ipv4Addr, f: Ipv4Addr| {
            list.iter().any(|c| {
                c.laddr == l
                    && c.faddr == f
                    && c.tos == Some(tos)
                    && c.transport == "infiniband"
                    && c.flags & FLAG_CONNECTED != 0
            })
        };
        if up(local, *peer.ip()) && up(*peer.ip(), local) {
            Ok(())
        } else {
            Err(format!(
                "the TOS {tos} connections between {local} and {} are not both up",
                peer.ip()
            ))
        }
    });
    let obs = format!("{trips} round trips, longest {} ms", longest.as_millis());
    match conns {
        Ok(()) => println!("ok ib_bad_background {obs}"),
        Err(why) => println!("not ok ib_bad_background {obs}: {why}"),
    }
    Ok(())
}
