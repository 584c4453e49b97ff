//! `rds-pingpong`: the plainest request/response exchange over `AF_RDS` (or `AF_UNIX`
//! `SOCK_SEQPACKET`), for `make bench`: one client and one server process, blocking
//! `sendto`/`recv` of requests and answers, nothing verified, nothing else done per message.
//!
//! ```text
//! rds-pingpong [-U] [-r client_addr] [-s server_addr] [-p port] [-q req_bytes]
//!              [-a answer_bytes] [-d depth] [-w warmup_secs] -T seconds
//! ```
//! The program opens both sockets (over RDS: the server's bound to `server_addr:port`, the
//! client's to `client_addr:port+1`; with `-U` a connected `AF_UNIX` `SOCK_SEQPACKET` pair),
//! sizes their buffers for everything in flight, and forks the server. The server answers
//! every request it receives with one answer of `answer_bytes`; the client sends one request
//! and waits for its answer (an RDS connection's set-up is not measured), then keeps `depth`
//! requests outstanding: each answer received is followed by the next request. After
//! `warmup_secs` (default 1) it starts counting, after `seconds` more it stops sending, takes
//! the outstanding answers and sends an empty message, which ends the server. Times are the
//! process's `CLOCK_MONOTONIC`: in `make bench`'s guest (QEMU `-icount`) that clock counts
//! instructions, so the rate is a per-instruction cost of the whole exchange.
//!
//! Prints `summary: family=rds|unix req=.. answer=.. depth=.. secs=.. requests=..
//! req_per_s=.. sent=.. answered=..` and exits 0 when the run completed: every request sent
//! was answered by the server and every answer reached the client. Any failed call, a
//! count that does not add up, or a run that does not end within `seconds + warmup + 60`
//! (a watchdog alarm in each process) exits non-zero without a summary.

use librds::RdsSocket;
use rds_tools::getopt::{self, Arg};
use rds_tools::sys;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

const USAGE: &str = "\
usage: rds-pingpong [-U] [-r client_addr] [-s server_addr] [-p port] [-q req_bytes]
                    [-a answer_bytes] [-d depth] [-w warmup_secs] -T seconds
  -U        over AF_UNIX SOCK_SEQPACKET (a socket pair) instead of RDS
  -r addr   the client's RDS address (default 127.0.0.1), bound to port+1
  -s addr   the server's RDS address (default 127.0.0.1), bound to port
  -p port   the server's RDS port (default 4000)
  -q bytes  request size, K/M suffixes allowed (default 1024, at least 1)
  -a bytes  answer size (default 64, at least 1)
  -d n      requests outstanding (default 1)
  -w secs   seconds before counting starts (default 1)
  -T secs   seconds counted";

/// Bytes RDS adds to each message in flight (its header), for sizing the socket buffers.
const RDS_OVERHEAD: usize = 64;
/// Seconds the end of a run (outstanding answers, the server's exit) may take before the
/// watchdog ends the process.
const GRACE_SECS: u32 = 60;

#[derive(Clone, Copy)]
struct Opts {
    unix: bool,
    client: Ipv4Addr,
    server: Ipv4Addr,
    port: u16,
    req: usize,
    answer: usize,
    depth: u32,
    warmup: u32,
    secs: u32,
}

fn parse() -> Result<Opts, String> {
    let args =
        getopt::parse(std::env::args().skip(1), "Ur:s:p:q:a:d:w:T:h").map_err(|e| e.to_string())?;
    let mut o = Opts {
        unix: false,
        client: Ipv4Addr::LOCALHOST,
        server: Ipv4Addr::LOCALHOST,
        port: 4000,
        req: 1024,
        answer: 64,
        depth: 1,
        warmup: 1,
        secs: 0,
    };
    let e = |x: getopt::Error| x.to_string();
    for a in args {
        match a {
            Arg::Opt('U', _) => o.unix = true,
            Arg::Opt('r', v) => o.client = getopt::value('r', &v).map_err(e)?,
            Arg::Opt('s', v) => o.server = getopt::value('s', &v).map_err(e)?,
            Arg::Opt('p', v) => o.port = getopt::value('p', &v).map_err(e)?,
            Arg::Opt('q', v) => o.req = getopt::size('q', &v).map_err(e)? as usize,
            Arg::Opt('a', v) => o.answer = getopt::size('a', &v).map_err(e)? as usize,
            Arg::Opt('d', v) => o.depth = getopt::value('d', &v).map_err(e)?,
            Arg::Opt('w', v) => o.warmup = getopt::value('w', &v).map_err(e)?,
            Arg::Opt('T', v) => o.secs = getopt::value('T', &v).map_err(e)?,
            Arg::Opt('h', _) => return Err(String::new()),
            Arg::Opt(c, _) => return Err(format!("invalid option -- '{c}'")),
            Arg::Operand(s) => return Err(format!("unexpected argument '{s}'")),
        }
    }
    for (c, v) in [('q', o.req), ('a', o.answer)] {
        if v == 0 || v > sys::RDS_MAX_MSG_SIZE {
            return Err(format!(
                "-{c} {v}: messages must be 1..{} bytes",
                sys::RDS_MAX_MSG_SIZE
            ));
        }
    }
    if o.depth == 0 || o.depth > 4096 {
        return Err(format!("depth {} out of range 1..4096", o.depth));
    }
    if o.secs == 0 || o.secs > 86400 || o.warmup > 3600 {
        return Err("-T must be 1..86400 seconds, -w at most 3600".into());
    }
    if o.port == u16::MAX {
        return Err("port+1 out of range".into());
    }
    Ok(o)
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// Where each process sends: the peer's RDS address, or nothing on a connected socket.
#[derive(Clone, Copy)]
enum Peer {
    Rds(libc::sockaddr_in),
    Connected,
}

/// One socket of the exchange and its peer.
struct End {
    fd: OwnedFd,
    peer: Peer,
}

impl End {
    /// Sends `buf` (one blocking `sendto`), again when a signal interrupted it.
    #[inline(always)]
    fn send(&self, buf: &[u8]) -> Result<(), String> {
        let (addr, len) = match &self.peer {
            Peer::Rds(sin) => (
                (sin as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            Peer::Connected => (std::ptr::null(), 0),
        };
        loop {
            // SAFETY: `buf` is valid for reads of its length and `addr` is NULL with length 0
            // or points to the peer's `sockaddr_in` of `len` bytes, both borrowed across the
            // call.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    0,
                    addr,
                    len,
                )
            };
            if r == buf.len() as isize {
                return Ok(());
            }
            if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(if r < 0 {
                os_err("sendto")
            } else {
                format!("sendto sent {r} of {} bytes", buf.len())
            });
        }
    }

    /// Receives one message into `buf` (one blocking `recv`); returns its length.
    #[inline(always)]
    fn recv(&self, buf: &mut [u8]) -> Result<usize, String> {
        loop {
            // SAFETY: `buf` is valid for writes of its length, exclusively borrowed across the
            // call.
            let r =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if r >= 0 {
                return Ok(r as usize);
            }
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(os_err("recv"));
            }
        }
    }
}

/// Opens the two ends: (client, server).
fn open(o: &Opts) -> Result<(End, End), String> {
    let want =
        o.depth as usize * (o.req + o.answer + 2 * RDS_OVERHEAD) + o.req.max(o.answer) + 65536;
    let biggest = o.req.max(o.answer) + RDS_OVERHEAD;
    let size = |fd: RawFd| -> Result<(), String> {
        let snd = sys::set_buffer(fd, true, want).map_err(|e| format!("SO_SNDBUF: {e}"))?;
        sys::set_buffer(fd, false, want).map_err(|e| format!("SO_RCVBUF: {e}"))?;
        if snd < biggest {
            return Err(format!(
                "the send buffer ({snd} bytes) cannot hold one {biggest}-byte message; \
                 run as root or raise net.core.wmem_max"
            ));
        }
        Ok(())
    };
    if o.unix {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors `socketpair` writes.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r < 0 {
            return Err(os_err("socketpair(AF_UNIX, SOCK_SEQPACKET)"));
        }
        // SAFETY: both are new descriptors that nothing else owns.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        size(a.as_raw_fd())?;
        size(b.as_raw_fd())?;
        let end = |fd| End {
            fd,
            peer: Peer::Connected,
        };
        return Ok((end(a), end(b)));
    }
    let at_server = SocketAddrV4::new(o.server, o.port);
    let at_client = SocketAddrV4::new(o.client, o.port + 1);
    let bound = |at: SocketAddrV4| -> Result<OwnedFd, String> {
        let s = RdsSocket::new()
            .map_err(|e| format!("socket(AF_RDS): {e} (is an RDS module loaded?)"))?;
        s.bind(at).map_err(|e| format!("bind {at}: {e}"))?;
        size(s.as_raw_fd())?;
        Ok(s.into_fd())
    };
    let client = End {
        fd: bound(at_client)?,
        peer: Peer::Rds(sys::sockaddr_in(at_server)),
    };
    let server = End {
        fd: bound(at_server)?,
        peer: Peer::Rds(sys::sockaddr_in(at_client)),
    };
    Ok((client, server))
}

/// How far the client's run is: counts the SIGALRMs.
static PHASE: AtomicU32 = AtomicU32::new(0);
/// Seconds counted (`-T`), for the alarm handler.
static SECS: AtomicU32 = AtomicU32::new(0);
const WARMING: u32 = 0;
const COUNTING: u32 = 1;
const STOPPING: u32 = 2;

extern "C" fn on_alarm(_sig: libc::c_int) {
    // Each alarm moves the run on and sets the next: the end of the counted seconds, then the
    // watchdog of the drain, which ends the process.
    let p = PHASE.fetch_add(1, Ordering::SeqCst) + 1;
    // SAFETY: `alarm` and `_exit` are async-signal-safe.
    unsafe {
        match p {
            COUNTING => {
                libc::alarm(SECS.load(Ordering::SeqCst));
            }
            STOPPING => {
                libc::alarm(GRACE_SECS);
            }
            _ => libc::_exit(3),
        }
    }
}

/// Makes SIGALRM call [`on_alarm`]; calls interrupted by it are restarted.
fn catch_alarm() -> Result<(), String> {
    // SAFETY: all-zero is a valid `sigaction` (empty mask, no flags).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_alarm as *const () as libc::sighandler_t;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa` is a valid `sigaction` whose handler is async-signal-safe; no old action
    // is asked for.
    if unsafe { libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut()) } < 0 {
        return Err(os_err("sigaction(SIGALRM)"));
    }
    Ok(())
}

/// The server: answers every request until the empty message; returns the requests answered.
fn serve(end: &End, o: &Opts) -> Result<u64, String> {
    let mut buf = vec![0u8; o.req];
    let answer = vec![0x5au8; o.answer];
    let mut n = 0u64;
    loop {
        if end.recv(&mut buf)? == 0 {
            return Ok(n);
        }
        end.send(&answer)?;
        n += 1;
    }
}

/// What the client measured.
struct Counted {
    requests: u64,
    secs: f64,
    sent: u64,
}

/// The client: one exchange, the warm-up, the counted seconds, the drain; then the empty
/// message that ends the server.
fn client(end: &End, o: &Opts) -> Result<Counted, String> {
    let req = vec![0xa5u8; o.req];
    let mut buf = vec![0u8; o.answer];
    // The first exchange sets up the RDS connection.
    end.send(&req)?;
    end.recv(&mut buf)?;
    let mut sent = 1u64;
    let mut answers = 1u64;
    let mut phase = WARMING;
    let (mut t0, mut n0) = (Instant::now(), answers);
    if o.warmup == 0 {
        PHASE.store(COUNTING, Ordering::SeqCst);
        // SAFETY: `alarm` has no memory-safety preconditions.
        unsafe { libc::alarm(o.secs) };
    } else {
        // SAFETY: as above.
        unsafe { libc::alarm(o.warmup) };
    }
    for _ in 0..o.depth {
        end.send(&req)?;
        sent += 1;
    }
    let mut outstanding = o.depth;
    let (mut t1, mut n1) = (t0, 0);
    while outstanding > 0 {
        end.recv(&mut buf)?;
        answers += 1;
        let p = PHASE.load(Ordering::Relaxed);
        if p != phase {
            if phase == WARMING {
                (t0, n0) = (Instant::now(), answers);
            }
            if p >= STOPPING {
                (t1, n1) = (Instant::now(), answers);
            }
            phase = p;
        }
        if phase >= STOPPING {
            outstanding -= 1;
        } else {
            end.send(&req)?;
            sent += 1;
        }
    }
    end.send(&[])?;
    if answers != sent {
        return Err(format!("{sent} requests sent, {answers} answers received"));
    }
    Ok(Counted {
        requests: n1 - n0,
        secs: t1.duration_since(t0).as_secs_f64(),
        sent,
    })
}

fn run(o: &Opts) -> Result<(), String> {
    let (cli, srv) = open(o)?;
    // The server's count comes back through a pipe.
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: `p` has room for the two descriptors `pipe` writes.
    if unsafe { libc::pipe(p.as_mut_ptr()) } < 0 {
        return Err(os_err("pipe"));
    }
    // SAFETY: both are new descriptors that nothing else owns.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    // SAFETY: this process has one thread, so the child may go on running Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_err("fork"));
    }
    if pid == 0 {
        drop(cli);
        drop(rd);
        // SAFETY: `alarm` has no memory-safety preconditions; SIGALRM's default action ends
        // the process.
        unsafe { libc::alarm(o.warmup + o.secs + 2 * GRACE_SECS) };
        let code = match serve(&srv, o) {
            Ok(n) => {
                let b = n.to_le_bytes();
                // SAFETY: `b` is valid for reads of its length.
                let w = unsafe { libc::write(wr.as_raw_fd(), b.as_ptr().cast(), b.len()) };
                i32::from(w != b.len() as isize)
            }
            Err(e) => {
                eprintln!("rds-pingpong: server: {e}");
                1
            }
        };
        // SAFETY: `_exit` ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    drop(srv);
    drop(wr);
    SECS.store(o.secs, Ordering::SeqCst);
    let r = catch_alarm().and_then(|()| client(&cli, o));
    if r.is_err() {
        // SAFETY: `pid` is our own child, which has not been waited for.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: `status` is valid for writes.
    let w = unsafe { libc::waitpid(pid, &mut status, 0) };
    let c = r?;
    if w != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("the server failed (wait status {status:#x})"));
    }
    let mut b = [0u8; 8];
    // SAFETY: `b` is valid for writes of its length.
    let n = unsafe { libc::read(rd.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
    if n != b.len() as isize {
        return Err("no count from the server".into());
    }
    let answered = u64::from_le_bytes(b);
    if answered != c.sent {
        return Err(format!("{} requests sent, {answered} answered", c.sent));
    }
    if c.requests == 0 || c.secs <= 0.0 {
        return Err("no request was counted".into());
    }
    println!(
        "summary: family={} req={} answer={} depth={} secs={:.3} requests={} req_per_s={:.0} \
         sent={} answered={answered}",
        if o.unix { "unix" } else { "rds" },
        o.req,
        o.answer,
        o.depth,
        c.secs,
        c.requests,
        c.requests as f64 / c.secs,
        c.sent
    );
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("rds-pingpong: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rds-pingpong: {e}");
            ExitCode::from(1)
        }
    }
}
