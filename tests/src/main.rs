//! Integration test programs for rds-rs, run inside a guest against one RDS implementation.
//!
//! Each suite prints one TAP-like line per check:
//! `ok <name> <observation>` or `not ok <name> <observation>: <why>`.
//! The observation (an errno name or a value) is what the harness compares between our module
//! and the in-tree C RDS: the two must agree, check by check.
//!
//! Usage:
//! - `rds-tests socket`: socket creation and type checks.
//! - `rds-tests bind`: bind, connect, getsockname and getpeername.
//! - `rds-tests sockopt`: `SOL_RDS` socket options and the TOS ioctls.
//! - `rds-tests netns <OK|EADDRINUSE>`: binding the same port in another network namespace.
//! - `rds-tests sendrecv`: sending and receiving over loopback, flags, limits, bad pointers.
//! - `rds-tests cmsg`: control messages on `sendmsg`.
//! - `rds-tests poll`: `poll` readiness and wakeups.
//! - `rds-tests sockopt2`: `RDS_CANCEL_SENT_TO`, `SO_TIMESTAMP`, `RDS_CONG_MONITOR`,
//!   `SO_RDS_MSG_RXPATH_LATENCY`, option lengths.
//! - `rds-tests info`: the `RDS_INFO_*` queries (in a new network namespace).
//! - `rds-tests ping`: ping/pong on port 0 and `net.rds.ping_enable`.
//! - `rds-tests ping-cross <other|pinger>`: where a pong between two loopback addresses goes
//!   (a documented difference).
//! - `rds-tests sysctl`: `/proc/sys/net/rds`.
//! - `rds-tests netns-traffic`: messages and info lists across network namespaces.
//! - `rds-tests cong <congests|never>`: congestion over loopback (a documented difference).
//! - `rds-tests close-race`: closing sockets other threads are using.
//! - `rds-tests rdma`: RDMA over loopback, the barrier, bad input (rds_rs only: an extension).
//! - `rds-tests queued`: messages held on their connection (rds_rs only: its `loop_hold` test
//!   hook): a full send buffer, `RDS_CANCEL_SENT_TO`, `RDS_INFO_SEND_MESSAGES`, closing a socket
//!   or a network namespace with messages queued.
//! - `rds-tests rdma-abi`: the RDMA argument checks C RDS and rds_rs share.
//! - `rds-tests faults`: bad frames injected, retransmission across a reset, RDMA operations
//!   in flight at resets (rds_rs only: its test hooks).
//! - `rds-tests rdma-reg <addr> [ib]`: registration rules on a transport with memory
//!   registrations (C's RDS/IB, rds_rs's loopback).
//! - `rds-tests hostile`: what a hostile local user can make the module hold, pin or reach
//!   (rds_rs only): per-message charges, memory cgroups, bounded notifications and waits, the
//!   creator's mlock limit, r_key guessing, per-namespace congestion, `sk_flags` under the lock.
//! - `rds-tests ib-echo ADDR FIRST-PORT NPORTS SECONDS` and
//!   `rds-tests ib-client LOCAL PEER FIRST-PORT NPORTS TAG`: RDS over IB/RoCE/iWARP between
//!   two addresses, an echo server and a client that checks (either side rds_rs or C RDS).
//! - `rds-tests ib-bad recv|bg ...`: helpers of the bad RDS/IB peer test (`ib_bad.rs`).
//! - `rds-tests ib-sink ...` and `rds-tests ib-source ...`: a numbered stream across faults,
//!   checked exactly once and in order (`ib.rs`, `tests/guest/ib-one.sh`).
//! - `rds-tests load [messages [timeout-seconds]]`: 8 processes, 64 sockets, content checks.
//! - `rds-tests hold <seconds> [go-file]`: open RDS sockets (one unbound, two bound with a
//!   message unread), print `holding`, keep them open that long; with `go-file`, once it
//!   exists, check that they still work and print `after-unload ...`.
//! - `rds-tests pingpong server <addr> <port> <count>`
//! - `rds-tests pingpong client <local-addr> <server-addr> <port> <count>`

mod bind;
mod close_race;
mod cmsg;
mod cong;
mod faults;
mod hostile;
mod ib;
mod ib_bad;
mod ib_mr;
mod ib_rdma_pair;
mod info;
mod load;
mod netns;
mod netns_traffic;
mod ping;
mod pingpong;
mod poll;
mod queued;
mod rdma;
mod rdma_abi;
mod rdma_bad;
mod rdma_barrier;
mod rdma_reg;
mod sendrecv;
mod socket;
mod sockopt;
mod sockopt2;
mod sysctl;
mod util;

use std::io;
use std::process::ExitCode;

/// Collects the results of one suite.
#[derive(Default)]
pub(crate) struct Report {
    failed: usize,
    /// Put before every check's name (a suite run for several transports or families).
    prefix: String,
}

impl Report {
    /// Records a check whose observed outcome must equal `expected`.
    pub(crate) fn expect(&mut self, name: &str, observed: &str, expected: &str) {
        let p = &self.prefix;
        if observed == expected {
            println!("ok {p}{name} {observed}");
        } else {
            self.failed += 1;
            println!("not ok {p}{name} {observed}: expected {expected}");
        }
    }

    /// Records a check that passed or failed with an explanation.
    pub(crate) fn check(&mut self, name: &str, observed: &str, result: Result<(), String>) {
        let p = &self.prefix;
        match result {
            Ok(()) => println!("ok {p}{name} {observed}"),
            Err(why) => {
                self.failed += 1;
                println!("not ok {p}{name} {observed}: {why}");
            }
        }
    }

    /// Names every later check `PREFIX` + its name.
    pub(crate) fn set_prefix(&mut self, prefix: &str) {
        self.prefix = prefix.to_string();
    }
}

/// Names the outcome of a system call: `OK` or the errno's symbolic name.
pub(crate) fn outcome<T>(r: &io::Result<T>) -> String {
    match r {
        Ok(_) => "OK".into(),
        Err(e) => errno_name(e.raw_os_error().unwrap_or(0)),
    }
}

/// The symbolic name of an errno value (the ones RDS returns), or `E<number>`.
pub(crate) fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOTCONN => "ENOTCONN",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENOBUFS => "ENOBUFS",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::ENOTTY => "ENOTTY",
        libc::EPROTOTYPE => "EPROTOTYPE",
        libc::EBADF => "EBADF",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EPIPE => "EPIPE",
        libc::EIO => "EIO",
        libc::ENODEV => "ENODEV",
        libc::ENXIO => "ENXIO",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENETDOWN => "ENETDOWN",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECANCELED => "ECANCELED",
        libc::E2BIG => "E2BIG",
        libc::ERANGE => "ERANGE",
        _ => return format!("E{e}"),
    };
    name.into()
}

/// Holds an RDS socket open for a while (used to check that an open socket pins the module).
fn hold(secs: &str, go: Option<&str>) -> Result<(), String> {
    use std::time::{Duration, Instant};
    let secs: u64 = secs.parse().map_err(|_| format!("bad number {secs}"))?;
    // An unbound socket, and two bound ones with a message unread in one's receive queue.
    let _idle = librds::RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    let a = librds::RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    let b = librds::RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    a.bind("127.0.0.1:0".parse::<std::net::SocketAddr>().expect("addr"))
        .map_err(|e| format!("bind: {e}"))?;
    b.bind("127.0.0.1:0".parse::<std::net::SocketAddr>().expect("addr"))
        .map_err(|e| format!("bind: {e}"))?;
    let to_b = b.local_addr().map_err(|e| format!("getsockname: {e}"))?;
    a.send_to(b"held", to_b).map_err(|e| format!("send: {e}"))?;
    println!("holding");
    let deadline = Instant::now() + Duration::from_secs(secs);
    let Some(go) = go else {
        std::thread::sleep(Duration::from_secs(secs));
        return Ok(());
    };
    // When `go` appears (after the unload attempt), the sockets must still work: the held
    // message is there, and a new one goes through.
    while !std::path::Path::new(go).exists() {
        if Instant::now() > deadline {
            return Err("go file never appeared".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut buf = [0u8; 16];
    let got = |b: &librds::RdsSocket, buf: &mut [u8]| -> String {
        if !util::wait_msg_for(b, Duration::from_secs(5)) {
            return "nothing".into();
        }
        match b.recv_from(buf) {
            Ok((n, _)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(e) => format!("recv: {e}"),
        }
    };
    let first = got(&b, &mut buf);
    let sent = a
        .send_to(b"after", to_b)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let second = got(&b, &mut buf);
    println!("after-unload first={first} send={sent:?} second={second}");
    Ok(())
}

/// Ends the process if a suite runs longer than `limit`: a system call that never returns
/// (a bug in the module under test) fails the suite instead of hanging the guest. Not for
/// `load`, which forks (and bounds itself), `netns`, which stays single-threaded, nor `hold`,
/// `pingpong` and the `ib-*` programs, which bound themselves (every wait in them is
/// bounded; over emulated RDMA between guests they may take longer than the watchdog).
fn watchdog(suite: String, limit: std::time::Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        println!("not ok {suite}_watchdog none: did not finish within {limit:?}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(3);
    });
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut report = Report::default();
    if let Some(suite) = args.first() {
        if !matches!(
            *suite,
            "load"
                | "hold"
                | "pingpong"
                | "netns"
                | "ib-echo"
                | "ib-client"
                | "ib-bad"
                | "ib-sink"
                | "ib-source"
                | "ib-rdma-flood"
        ) {
            // Against a hang only: the longest suites take 60-70 s of a vCPU on the debug
            // kernel, and a guest on a busy host gets a fifth of a core or less.
            watchdog(suite.to_string(), std::time::Duration::from_secs(900));
        }
    }
    let res = match args.as_slice() {
        ["socket"] => {
            socket::run(&mut report);
            Ok(())
        }
        ["bind"] => {
            bind::run(&mut report);
            Ok(())
        }
        ["sockopt"] => {
            sockopt::run(&mut report);
            Ok(())
        }
        ["sendrecv"] => sendrecv::run(&mut report),
        ["cmsg"] => cmsg::run(&mut report),
        ["poll"] => poll::run(&mut report),
        ["sockopt2"] => sockopt2::run(&mut report),
        ["info"] => info::run(&mut report),
        ["ping"] => ping::run(&mut report),
        ["ping-cross", expect] => ping::cross(&mut report, expect),
        ["sysctl"] => sysctl::run(&mut report),
        ["netns-traffic"] => netns_traffic::run(&mut report),
        ["cong", expect] => cong::run(&mut report, expect),
        ["close-race"] => close_race::run(&mut report),
        ["queued"] => queued::run(&mut report),
        ["rdma"] => rdma::run(&mut report),
        ["rdma-abi"] => rdma_abi::run(&mut report),
        ["faults"] => faults::run(&mut report),
        ["hostile"] => hostile::run(&mut report),
        ["ib-echo", rest @ ..] => ib::echo(rest),
        ["ib-client", rest @ ..] => ib::client(&mut report, rest),
        ["ib-recycle", rest @ ..] => ib::recycle(&mut report, rest),
        ["ib-many", rest @ ..] => ib::many(&mut report, rest),
        ["ib-duel", rest @ ..] => ib::duel(&mut report, rest),
        ["ib-bad", rest @ ..] => ib_bad::run(rest),
        ["ib-mr", rest @ ..] => ib_mr::run(&mut report, rest),
        ["ib-mr-revoke", rest @ ..] => ib_mr::revoke(&mut report, rest),
        ["ib-slow-fence", rest @ ..] => ib_mr::slow_fence(&mut report, rest),
        ["ib-rdma", rest @ ..] => rdma::ib_run(&mut report, rest),
        ["ib-rdma-pair", rest @ ..] => ib_rdma_pair::run(&mut report, rest),
        ["ib-rdma-flood", rest @ ..] => rdma::ib_flood(&mut report, rest),
        ["ib-free-race", rest @ ..] => rdma::ib_free_race(&mut report, rest),
        ["ib-sink", rest @ ..] => ib::sink(rest),
        ["ib-reap", rest @ ..] => ib::reap(&mut report, rest),
        ["ib-source", rest @ ..] => ib::source(rest),
        ["rdma-reg", rest @ ..] => rdma_reg::run(&mut report, rest),
        ["load", rest @ ..] => load::run(&mut report, rest),
        ["pingpong", rest @ ..] => pingpong::run(&mut report, rest),
        ["hold", secs] => hold(secs, None),
        ["hold", secs, go] => hold(secs, Some(go)),
        ["netns", expect] => netns::run(&mut report, expect),
        _ => Err("usage: rds-tests SUITE [ARGS] (see the source for the suites)".to_string()),
    };
    if let Err(e) = res {
        // Also as a result line, so the harness counts the suite that could not run.
        let suite = args.first().copied().unwrap_or("rds-tests");
        println!("not ok {suite} none: {e}");
        eprintln!("rds-tests: {e}");
        return ExitCode::from(2);
    }
    if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
