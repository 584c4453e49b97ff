//! `rds-ping`: measures the round trip to a peer's RDS, as the classic rds-ping of rds-tools
//! does. Each ping is a message of 0 bytes to port 0 of the destination; the peer's RDS itself
//! answers with a "pong" from port 0 (no program runs there).
//!
//! ```text
//! rds-ping [-c count] [-i interval] [-I local_addr] [-Q tos] dest
//! ```
//! Prints one line per reply (`   1: 35 usec`), or `   N: no reply` for a ping not answered
//! in time. Exits 0 if any reply came, 1 if none did, 2 on a usage error.

use librds::RdsSocket;
use rds_tools::getopt::{self, Arg};
use rds_tools::sys;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: rds-ping [-c count] [-i interval] [-I local_addr] [-Q tos] dest
  -c count     stop after this many pings (default: until interrupted)
  -i interval  seconds between pings (default 1; fractions allowed)
  -I addr      local address to send from (default: the route's source address)
  -Q tos       type of service of the socket (SIOCRDSSETTOS)";

/// How long a ping waits for its reply at least (a TCG guest can take a while to set up a
/// connection).
const MIN_WAIT: Duration = Duration::from_secs(1);

struct Opts {
    count: Option<u64>,
    interval: Duration,
    local: Option<Ipv4Addr>,
    tos: Option<u8>,
    dest: Ipv4Addr,
}

fn parse() -> Result<Opts, String> {
    let args = getopt::parse(std::env::args().skip(1), "c:i:I:Q:h").map_err(|e| e.to_string())?;
    let mut count = None;
    let mut interval = Duration::from_secs(1);
    let mut local = None;
    let mut tos = None;
    let mut dest = None;
    for a in args {
        match a {
            Arg::Opt('c', v) => {
                count = Some(getopt::value::<u64>('c', &v).map_err(|e| e.to_string())?)
            }
            Arg::Opt('i', v) => {
                let s: f64 = getopt::value('i', &v).map_err(|e| e.to_string())?;
                if !(0.0..=3600.0).contains(&s) {
                    return Err(format!("interval {s} out of range"));
                }
                interval = Duration::from_secs_f64(s);
            }
            Arg::Opt('I', v) => local = Some(getopt::value('I', &v).map_err(|e| e.to_string())?),
            Arg::Opt('Q', v) => tos = Some(getopt::value('Q', &v).map_err(|e| e.to_string())?),
            Arg::Opt('h', _) => return Err(String::new()),
            Arg::Opt(c, _) => return Err(format!("invalid option -- '{c}'")),
            Arg::Operand(s) => {
                if dest.is_some() {
                    return Err("more than one destination".into());
                }
                dest = Some(s.parse().map_err(|_| format!("bad destination '{s}'"))?);
            }
        }
    }
    Ok(Opts {
        count,
        interval,
        local,
        tos,
        dest: dest.ok_or("no destination given")?,
    })
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            if e.is_empty() {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            eprintln!("rds-ping: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(0) => ExitCode::from(1),
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rds-ping: {e}");
            ExitCode::from(1)
        }
    }
}

/// Pings until the count is reached or the program is interrupted; returns the number of
/// replies.
fn run(o: &Opts) -> Result<u64, String> {
    let local = match o.local {
        Some(a) => a,
        None => sys::local_addr_for(o.dest)
            .map_err(|e| format!("no local address to reach {}: {e}", o.dest))?,
    };
    let s =
        RdsSocket::new().map_err(|e| format!("socket(AF_RDS): {e} (is an RDS module loaded?)"))?;
    s.bind(SocketAddrV4::new(local, 0))
        .map_err(|e| format!("bind {local}:0: {e}"))?;
    if let Some(t) = o.tos {
        sys::set_tos(s.as_raw_fd(), t).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENOTTY) {
                " (the socket's transport has no TOS map: loopback has none, TCP and IB do)"
            } else {
                ""
            };
            format!("SIOCRDSSETTOS {t}: {e}{hint}")
        })?;
    }
    sys::catch_interrupts();
    let fd = s.as_raw_fd();
    let dest = SocketAddrV4::new(o.dest, 0);
    let wait = o.interval.max(MIN_WAIT);
    let mut buf = [0u8; 64];
    let mut replies = 0u64;
    let mut seq = 0u64;
    let interrupted = || sys::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst);
    while o.count.is_none_or(|c| seq < c) && !interrupted() {
        seq += 1;
        // A reply that came after its ping gave up must not count for this one.
        while sys::recv(fd, &mut buf, libc::MSG_DONTWAIT).is_ok() {}
        let t0 = Instant::now();
        if let Err(e) = sys::send2(fd, &[], &[], dest, 0) {
            // The classic tool keeps going when one ping cannot be sent.
            println!("{seq:4}: send failed: {e}");
        } else {
            let mut answered = false;
            while !interrupted() {
                let left = wait.saturating_sub(t0.elapsed());
                if left.is_zero() {
                    break;
                }
                match s.wait_readable(left.min(Duration::from_millis(200))) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(format!("poll: {e}")),
                }
                match sys::recv(fd, &mut buf, libc::MSG_DONTWAIT) {
                    Ok(r) if r.from == Some(dest) => {
                        let us = t0.elapsed().as_micros();
                        println!("{seq:4}: {us} usec");
                        answered = true;
                        replies += 1;
                        break;
                    }
                    // Anything else (a stray message to this port) is not a reply.
                    Ok(_) => {}
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => {}
                    Err(e) => return Err(format!("recvmsg: {e}")),
                }
            }
            if !answered && !interrupted() {
                println!("{seq:4}: no reply within {} ms", wait.as_millis());
            }
        }
        if o.count.is_some_and(|c| seq >= c) {
            break;
        }
        let next = t0 + o.interval;
        while !interrupted() {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
        }
    }
    Ok(replies)
}
