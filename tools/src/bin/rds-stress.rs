//! `rds-stress`: sends requests and acknowledgements between two groups of tasks over RDS
//! sockets and verifies every message, as the classic rds-stress of rds-tools does.
//!
//! ```text
//! rds-stress [-r local] [-s remote] [-p port] [-t tasks] [-d depth] [-q req_bytes]
//!            [-a ack_bytes] [-D rdma_bytes [-Z]] [-T seconds] [-o] [-U] [-V] [-v]
//! ```
//! Without `-s` it is the passive instance (server): it listens on TCP `port` for one active
//! instance (client), which sends it the options. From then on both behave the same: each
//! starts `tasks` threads, each with one RDS socket (the server's bound to `port+1`,
//! `port+2`, ...; the client's to free ports), keeping `depth` requests outstanding to every
//! task of the other side and answering each request it receives with an ack. With `-o` only
//! the client sends requests. Every second each instance prints a line of statistics; after
//! `-T` seconds (or SIGINT) they stop sending, wait for every outstanding request to be
//! acked, exchange their totals over the TCP connection, and print a summary.
//!
//! Every message starts with a 32-byte header (magic, kind, source and destination task,
//! length, sequence number, payload checksum, header checksum) and carries a payload taken
//! from a fixed pseudo-random pattern at an offset derived from the header. The receiver
//! checks the sender, the header, the length, that sequence numbers arrive in order without
//! gaps, that every ack matches the oldest outstanding request, and every payload byte (with
//! `-V` also a payload checksum). Any difference is a verification error; the exit status is
//! 0 only if there were none, every request was acked, and both sides' totals agree.
//!
//! Sends never block: `EAGAIN` (send buffer full) and `ENOBUFS` (destination port
//! congested) are counted and retried after polling, while the task keeps receiving.
//!
//! With `-D bytes` every request also moves `bytes` by RDMA (as the classic tool's `-D`): the
//! requester registers a buffer with the request (`RDS_CMSG_RDMA_MAP`, use-once, so that it
//! works wherever C's RDS/IB does: on an established connection, without on-demand paging)
//! and the peer, finding the cookie in the request (`RDS_CMSG_RDMA_DEST`), answers with an ack
//! that carries an RDMA operation on it (`RDS_CMSG_RDMA_ARGS`): a write of pattern data into
//! the buffer, or with `-Z` a read of the pattern data the requester registered (with
//! `RDS_RDMA_FENCE`: C's IB transport otherwise lets the ack leave before the read is done).
//! RDS delivers the ack only once the RDMA is done, so the requester checks a written buffer
//! when the ack arrives; the reader checks what it read before it reuses the buffer. The first
//! request to each peer goes without RDMA, and nothing more is sent to that peer until it is
//! acked (the connection is then up, which C's registration needs).
//!
//! With `-U` the same exchange runs over `AF_UNIX` `SOCK_SEQPACKET` instead of RDS, as a
//! yardstick for `make bench`: each server task listens on the abstract name
//! `rds-stress.PORT` (PORT being the RDS port it would bind), each client task connects one
//! socket to every server task (and names itself in a first setup message), and from then on
//! the tasks send, receive, verify and count exactly as over RDS, a connected socket per peer
//! task taking the place of the peer's RDS address. Both instances must be on one host (in one
//! network namespace); the control connection is TCP as before.

use librds::rdma::{RDS_RDMA_FENCE, RDS_RDMA_READWRITE, RDS_RDMA_USE_ONCE};
use librds::{ControlBuf, GetMrArgs, RdmaArgs, RdmaMem, RdsIovec, RdsSocket};
use rds_tools::getopt::{self, Arg};
use rds_tools::sys::{self, Received};
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: rds-stress [-r local] [-s remote] [-p port] [-t tasks] [-d depth] [-q req_bytes]
                  [-a ack_bytes] [-D rdma_bytes [-Z]] [-T seconds] [-o] [-U] [-V] [-v]
  -r addr   local address (default: that of the TCP control connection)
  -s addr   the passive instance to connect to; without -s, be the passive instance
  -p port   TCP control port; server tasks bind port+1.. (default 4000)
  -t n      tasks (threads, one RDS socket each) per side (default 1)
  -d n      requests each task keeps outstanding to each peer task (default 1)
  -q bytes  request size, K/M suffixes allowed (default 1024; at least 32)
  -a bytes  ack size (default 1024; at least 32)
  -D bytes  RDMA: each request has the peer write this many bytes into the requester's
            memory (registered with the request), 1 MiB at most
  -Z        with -D: the peer reads them instead
  -T secs   stop after this many seconds (default: at SIGINT)
  -o        one-way: only the active instance sends requests
  -U        the same exchange over AF_UNIX SOCK_SEQPACKET instead of RDS (one host)
  -V        also checksum every payload (on top of the byte-by-byte check)
  -v        verbose: per-task totals at the end
(the options after -s are sent to the passive instance; -r and -p apply to each side)";

/// Bytes of the stress header at the start of every message.
const HDR: usize = 32;
const MAGIC: u32 = 0x5244_5354; // "RDST"
const KIND_REQ: u8 = 1;
const KIND_ACK: u8 = 2;
const FLAG_PCSUM: u8 = 1;
/// Offsets into the payload pattern are taken modulo this.
const PATTERN_SPREAD: usize = 251;
/// Bytes RDS adds to each message in flight (its header), for sizing the socket buffers.
const RDS_OVERHEAD: usize = 64;
/// How long the end of a run may take: outstanding requests acked, the peer's totals read.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
const PEER_DONE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the client keeps trying to reach a server that is not listening yet.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Verification errors printed per task (all are counted).
const MAX_PRINTED_ERRORS: u64 = 10;
const CONTROL_MAGIC: &[u8; 4] = b"RDSS";
/// The first message on each `AF_UNIX` connection (`-U`): this magic and the client task.
const UNIX_SETUP_MAGIC: &[u8; 4] = b"RDSU";
/// The most bytes one request moves by RDMA (`-D`).
const RDMA_MAX: usize = 1 << 20;
/// The pattern offset kind of RDMA data (beside `KIND_REQ` and `KIND_ACK`).
const KIND_RDMA: u8 = 3;
/// Room for the control messages of a received request (one `RDS_CMSG_RDMA_DEST`).
const RDMA_CTL_ROOM: usize = 64;
/// How long setting up the `AF_UNIX` connections may take.
const UNIX_SETUP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
struct Opts {
    local: Option<Ipv4Addr>,
    remote: Option<Ipv4Addr>,
    port: u16,
    params: Params,
    verbose: bool,
}

/// What both instances run with (the client's options, sent to the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    tasks: u32,
    depth: u32,
    req: u32,
    ack: u32,
    secs: u32,
    one_way: bool,
    pcsum: bool,
    /// `-U`: over `AF_UNIX` `SOCK_SEQPACKET` instead of RDS.
    unix: bool,
    /// `-D`: bytes moved by RDMA per request (0: none).
    rdma: u32,
    /// `-Z`: the RDMA is a read (of the requester's memory by the peer), not a write.
    rdma_read: bool,
}

impl Params {
    /// The bytes of one RDMA slot of a task's `rmem` (`-D`, rounded up to whole pages).
    fn rdma_slot_bytes(&self) -> usize {
        (self.rdma as usize).next_multiple_of(4096)
    }
}

fn parse_opts() -> Result<Opts, String> {
    let args = getopt::parse(std::env::args().skip(1), "r:s:p:t:d:q:a:D:T:oUVZvch")
        .map_err(|e| e.to_string())?;
    let mut o = Opts {
        local: None,
        remote: None,
        port: 4000,
        params: Params {
            tasks: 1,
            depth: 1,
            req: 1024,
            ack: 1024,
            secs: 0,
            one_way: false,
            pcsum: false,
            unix: false,
            rdma: 0,
            rdma_read: false,
        },
        verbose: false,
    };
    let e = |x: getopt::Error| x.to_string();
    for a in args {
        match a {
            Arg::Opt('r', v) => o.local = Some(getopt::value('r', &v).map_err(e)?),
            Arg::Opt('s', v) => o.remote = Some(getopt::value('s', &v).map_err(e)?),
            Arg::Opt('p', v) => o.port = getopt::value('p', &v).map_err(e)?,
            Arg::Opt('t', v) => o.params.tasks = getopt::value('t', &v).map_err(e)?,
            Arg::Opt('d', v) => o.params.depth = getopt::value('d', &v).map_err(e)?,
            Arg::Opt('q', v) => o.params.req = size32('q', &v)?,
            Arg::Opt('a', v) => o.params.ack = size32('a', &v)?,
            Arg::Opt('D', v) => o.params.rdma = size32('D', &v)?,
            Arg::Opt('Z', _) => o.params.rdma_read = true,
            Arg::Opt('T', v) => o.params.secs = getopt::value('T', &v).map_err(e)?,
            Arg::Opt('o', _) => o.params.one_way = true,
            Arg::Opt('U', _) => o.params.unix = true,
            Arg::Opt('V', _) => o.params.pcsum = true,
            Arg::Opt('v', _) => o.verbose = true,
            // The classic tool's -c (CPU use) is always on here.
            Arg::Opt('c', _) => {}
            Arg::Opt('h', _) => return Err(String::new()),
            Arg::Opt(c, _) => return Err(format!("invalid option -- '{c}'")),
            Arg::Operand(s) => return Err(format!("unexpected argument '{s}'")),
        }
    }
    check_params(&o.params)?;
    if o.params.tasks as usize + o.port as usize > 65535 {
        return Err(format!(
            "ports {}..{} out of range",
            o.port + 1,
            o.port as u32 + o.params.tasks
        ));
    }
    Ok(o)
}

fn size32(c: char, v: &Option<String>) -> Result<u32, String> {
    let n = getopt::size(c, v).map_err(|e| e.to_string())?;
    u32::try_from(n).map_err(|_| format!("-{c} {n} too large"))
}

fn check_params(p: &Params) -> Result<(), String> {
    if p.tasks == 0 || p.tasks > 256 {
        return Err(format!("tasks {} out of range 1..256", p.tasks));
    }
    if p.depth == 0 || p.depth > 4096 {
        return Err(format!("depth {} out of range 1..4096", p.depth));
    }
    if p.rdma as usize > RDMA_MAX {
        return Err(format!("-D {}: at most {RDMA_MAX} bytes", p.rdma));
    }
    if p.rdma > 0 && p.unix {
        return Err("-D needs RDS (not -U)".into());
    }
    if p.rdma_read && p.rdma == 0 {
        return Err("-Z needs -D".into());
    }
    for (c, v) in [('q', p.req), ('a', p.ack)] {
        if (v as usize) < HDR || v as usize > sys::RDS_MAX_MSG_SIZE {
            return Err(format!(
                "-{c} {v}: messages must be {HDR}..{} bytes",
                sys::RDS_MAX_MSG_SIZE
            ));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("rds-stress: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    sys::catch_interrupts();
    let r = if o.remote.is_some() {
        client(&o)
    } else {
        server(&o)
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("rds-stress: {e}");
            ExitCode::from(1)
        }
    }
}

// ---- control connection ----------------------------------------------------------------

/// Builds a control message.
#[derive(Default)]
struct Wire(Vec<u8>);

impl Wire {
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
}

/// Reads a control message.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("control message too short".into());
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
}

fn send_frame(tcp: &mut TcpStream, msg: &[u8]) -> Result<(), String> {
    let mut f = Vec::with_capacity(msg.len() + 4);
    f.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    f.extend_from_slice(msg);
    tcp.write_all(&f)
        .map_err(|e| format!("control connection: write: {e}"))
}

fn recv_frame(tcp: &mut TcpStream, timeout: Duration) -> Result<Vec<u8>, String> {
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| format!("control connection: {e}"))?;
    let rd = |tcp: &mut TcpStream, b: &mut [u8]| {
        tcp.read_exact(b).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => "the peer closed the control connection".to_string(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
                "the peer did not answer on the control connection within {} s",
                timeout.as_secs()
            ),
            _ => format!("control connection: read: {e}"),
        })
    };
    let mut l = [0u8; 4];
    rd(tcp, &mut l)?;
    let n = u32::from_le_bytes(l) as usize;
    if n > 1 << 20 {
        return Err(format!("control message of {n} bytes"));
    }
    let mut b = vec![0u8; n];
    rd(tcp, &mut b)?;
    Ok(b)
}

fn hello(p: &Params, addr: Ipv4Addr, ports: &[u16]) -> Vec<u8> {
    let flags = u32::from(p.one_way)
        | (u32::from(p.pcsum) << 1)
        | (u32::from(p.unix) << 2)
        | (u32::from(p.rdma_read) << 3);
    let mut w = Wire::default()
        .bytes(CONTROL_MAGIC)
        .u32(p.tasks)
        .u32(p.depth)
        .u32(p.req)
        .u32(p.ack)
        .u32(p.secs)
        .u32(flags)
        .u32(p.rdma)
        .bytes(&addr.octets())
        .u32(ports.len() as u32);
    for &port in ports {
        w = w.u32(port.into());
    }
    w.0
}

/// Parses a hello (or, with `params` false, a reply): parameters, address and ports.
fn parse_hello(b: &[u8]) -> Result<(Params, Ipv4Addr, Vec<u16>), String> {
    let mut r = Reader(b);
    if r.take(4)? != CONTROL_MAGIC {
        return Err("the peer is not an rds-stress of this kind (bad control magic)".into());
    }
    let tasks = r.u32()?;
    let depth = r.u32()?;
    let req = r.u32()?;
    let ack = r.u32()?;
    let secs = r.u32()?;
    let flags = r.u32()?;
    let rdma = r.u32()?;
    let a = r.take(4)?;
    let addr = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
    let n = r.u32()? as usize;
    let mut ports = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        ports.push(r.u32()? as u16);
    }
    let p = Params {
        tasks,
        depth,
        req,
        ack,
        secs,
        one_way: flags & 1 != 0,
        pcsum: flags & 2 != 0,
        unix: flags & 4 != 0,
        rdma,
        rdma_read: flags & 8 != 0,
    };
    Ok((p, addr, ports))
}

/// What each side tells the other at the end.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    ok: bool,
    req_sent: u64,
    req_acked: u64,
    req_rcvd: u64,
    errors: u64,
}

fn done_msg(t: &Totals) -> Vec<u8> {
    Wire::default()
        .bytes(b"DONE")
        .u32(t.ok.into())
        .u64(t.req_sent)
        .u64(t.req_acked)
        .u64(t.req_rcvd)
        .u64(t.errors)
        .0
}

fn drained_msg(drained: bool) -> Vec<u8> {
    Wire::default().bytes(b"DRND").u32(drained.into()).0
}

fn parse_drained(b: &[u8]) -> Result<bool, String> {
    let mut r = Reader(b);
    if r.take(4)? != b"DRND" {
        return Err("unexpected control message from the peer".into());
    }
    Ok(r.u32()? != 0)
}

fn parse_done(b: &[u8]) -> Result<Totals, String> {
    let mut r = Reader(b);
    if r.take(4)? != b"DONE" {
        return Err("unexpected control message from the peer".into());
    }
    Ok(Totals {
        ok: r.u32()? != 0,
        req_sent: r.u64()?,
        req_acked: r.u64()?,
        req_rcvd: r.u64()?,
        errors: r.u64()?,
    })
}

// ---- roles ---------------------------------------------------------------------------------

fn client(o: &Opts) -> Result<bool, String> {
    let remote = o.remote.unwrap_or(Ipv4Addr::LOCALHOST);
    let t0 = Instant::now();
    let mut tcp = loop {
        match TcpStream::connect((remote, o.port)) {
            Ok(s) => break s,
            Err(e)
                if e.kind() == io::ErrorKind::ConnectionRefused
                    && t0.elapsed() < CONNECT_TIMEOUT
                    && !interrupted() =>
            {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(format!("connecting to {remote}:{}: {e}", o.port)),
        }
    };
    let _ = tcp.set_nodelay(true);
    let local = match o.local {
        Some(a) => a,
        None => match tcp.local_addr() {
            Ok(SocketAddr::V4(a)) => *a.ip(),
            _ => return Err("no IPv4 address on the control connection".into()),
        },
    };
    let p = o.params;
    // Over AF_UNIX the client's sockets are made once the server listens (below).
    let socks = if p.unix {
        Vec::new()
    } else {
        open_sockets(&p, local, None)?
    };
    let ports: Vec<u16> = socks.iter().map(|(_, port)| *port).collect();
    send_frame(&mut tcp, &hello(&p, local, &ports))?;
    let reply = recv_frame(&mut tcp, Duration::from_secs(30))?;
    if reply.starts_with(b"FAIL") {
        return Err(format!(
            "the passive instance refused: {}",
            String::from_utf8_lossy(&reply[4..])
        ));
    }
    let (_, peer_addr, peer_ports) = parse_hello(&reply)?;
    if p.unix {
        let eps = unix_connect(&p, &peer_ports)?;
        return run(o, "client", p, eps, Vec::new(), tcp);
    }
    let peers = peer_ports
        .iter()
        .map(|&port| SocketAddrV4::new(peer_addr, port))
        .collect();
    run(o, "client", p, rds_endpoints(socks), peers, tcp)
}

fn server(o: &Opts) -> Result<bool, String> {
    let laddr = o.local.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let l = TcpListener::bind((laddr, o.port))
        .map_err(|e| format!("listening on {laddr}:{}: {e}", o.port))?;
    println!("waiting for a client on {laddr}:{} (TCP)", o.port);
    flush();
    let (mut tcp, from) = accept(&l)?;
    let _ = tcp.set_nodelay(true);
    let hello_b = recv_frame(&mut tcp, Duration::from_secs(30))?;
    let (p, peer_addr, peer_ports) = parse_hello(&hello_b)?;
    if let Err(e) = check_params(&p) {
        let _ = send_frame(
            &mut tcp,
            &Wire::default().bytes(b"FAIL").bytes(e.as_bytes()).0,
        );
        return Err(format!("client {from} asked for: {e}"));
    }
    if p.tasks as usize + o.port as usize > 65535 {
        let e = "task ports out of range".to_string();
        let _ = send_frame(
            &mut tcp,
            &Wire::default().bytes(b"FAIL").bytes(e.as_bytes()).0,
        );
        return Err(e);
    }
    let local = match o.local {
        Some(a) => a,
        None => match tcp.local_addr() {
            Ok(SocketAddr::V4(a)) => *a.ip(),
            _ => return Err("no IPv4 address on the control connection".into()),
        },
    };
    if p.unix {
        let listeners = match unix_listen(&p, o.port) {
            Ok(l) => l,
            Err(e) => {
                let _ = send_frame(
                    &mut tcp,
                    &Wire::default().bytes(b"FAIL").bytes(e.as_bytes()).0,
                );
                return Err(e);
            }
        };
        let ports: Vec<u16> = listeners.iter().map(|(_, port)| *port).collect();
        // As over RDS, the reply goes out once every task's socket listens.
        send_frame(&mut tcp, &hello(&p, local, &ports))?;
        let eps = unix_accept(&p, &listeners)?;
        drop(listeners);
        return run(o, "server", p, eps, Vec::new(), tcp);
    }
    let socks = match open_sockets(&p, local, Some(o.port)) {
        Ok(s) => s,
        Err(e) => {
            let _ = send_frame(
                &mut tcp,
                &Wire::default().bytes(b"FAIL").bytes(e.as_bytes()).0,
            );
            return Err(e);
        }
    };
    let ports: Vec<u16> = socks.iter().map(|(_, port)| *port).collect();
    // The reply goes out only once every task's socket is bound: the client starts sending
    // when it arrives.
    send_frame(&mut tcp, &hello(&p, local, &ports))?;
    let peers = peer_ports
        .iter()
        .map(|&port| SocketAddrV4::new(peer_addr, port))
        .collect();
    run(o, "server", p, rds_endpoints(socks), peers, tcp)
}

fn accept(l: &TcpListener) -> Result<(TcpStream, SocketAddr), String> {
    l.set_nonblocking(true)
        .map_err(|e| format!("listener: {e}"))?;
    loop {
        match l.accept() {
            Ok((s, a)) => {
                s.set_nonblocking(false)
                    .map_err(|e| format!("control connection: {e}"))?;
                return Ok((s, a));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if interrupted() {
                    return Err("interrupted while waiting for a client".into());
                }
                let _ =
                    librds::poll_fds(&[(l.as_raw_fd(), libc::POLLIN)], Duration::from_millis(200));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
}

/// The socket buffer a task asks for to fit everything in flight to and from `peers` peer
/// tasks, and the biggest message with RDS's header.
fn buffer_bytes(p: &Params, peers: usize) -> (usize, usize) {
    let per_msg = p.req as usize + p.ack as usize + 2 * RDS_OVERHEAD;
    let want = p.depth as usize * peers * per_msg + p.req.max(p.ack) as usize + 65536;
    let biggest = p.req.max(p.ack) as usize + RDS_OVERHEAD;
    (want, biggest)
}

/// Gives a socket the buffers of [`buffer_bytes`].
fn size_buffers(fd: RawFd, p: &Params, peers: usize) -> Result<(), String> {
    let (want, biggest) = buffer_bytes(p, peers);
    let snd = sys::set_buffer(fd, true, want).map_err(|e| format!("SO_SNDBUF: {e}"))?;
    let _rcv = sys::set_buffer(fd, false, want).map_err(|e| format!("SO_RCVBUF: {e}"))?;
    if snd < biggest {
        return Err(format!(
            "the send buffer ({snd} bytes) cannot hold one {biggest}-byte message; \
             run as root or raise net.core.wmem_max"
        ));
    }
    Ok(())
}

/// A task's sockets.
enum Endpoint {
    /// One RDS socket (bound to this port) for all peer tasks.
    Rds(RdsSocket, u16),
    /// One connected `AF_UNIX` `SOCK_SEQPACKET` socket per peer task, in peer order (`-U`).
    Unix(Vec<OwnedFd>),
}

fn rds_endpoints(socks: Vec<(RdsSocket, u16)>) -> Vec<Endpoint> {
    socks
        .into_iter()
        .map(|(s, port)| Endpoint::Rds(s, port))
        .collect()
}

/// The abstract `AF_UNIX` name of the server task that would bind `port` over RDS (`-U`).
fn unix_name(port: u16) -> String {
    format!("rds-stress.{port}")
}

/// Server side of `-U`: one listening `AF_UNIX` `SOCK_SEQPACKET` socket per task, named after
/// the RDS port the task would bind (`base+1+i`). Returns each with its port.
fn unix_listen(p: &Params, base: u16) -> Result<Vec<(OwnedFd, u16)>, String> {
    let mut out = Vec::new();
    for i in 0..p.tasks {
        let port = base + 1 + i as u16;
        let name = unix_name(port);
        let l =
            sys::seqpacket_socket().map_err(|e| format!("socket(AF_UNIX, SOCK_SEQPACKET): {e}"))?;
        sys::unix_listen_abstract(&l, &name, p.tasks as i32)
            .map_err(|e| format!("listening on @{name}: {e}"))?;
        out.push((l, port));
    }
    Ok(out)
}

/// Server side of `-U`: accepts on each listener one connection from every client task, each
/// starting with a setup message naming its client task. Returns each server task's sockets
/// in client task order.
fn unix_accept(p: &Params, listeners: &[(OwnedFd, u16)]) -> Result<Vec<Endpoint>, String> {
    let n = p.tasks as usize;
    let deadline = Instant::now() + UNIX_SETUP_TIMEOUT;
    let mut out = Vec::new();
    for (l, port) in listeners {
        let name = unix_name(*port);
        let mut slots: Vec<Option<OwnedFd>> = (0..n).map(|_| None).collect();
        for _ in 0..n {
            let c =
                sys::accept_until(l, deadline).map_err(|e| format!("accepting on @{name}: {e}"))?;
            // The setup message: the magic and the client task.
            let mut b = [0u8; 8];
            let r = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || interrupted() {
                    return Err(format!("no setup message on @{name}"));
                }
                let _ = librds::poll_fds(&[(c.as_raw_fd(), libc::POLLIN)], left);
                match sys::recv_connected(c.as_raw_fd(), &mut b, libc::MSG_DONTWAIT) {
                    Ok(r) => break r,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => {}
                    Err(e) => return Err(format!("setup message on @{name}: {e}")),
                }
            };
            let j = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
            if r.len != b.len() || r.truncated || &b[..4] != UNIX_SETUP_MAGIC || j >= n {
                return Err(format!("bad setup message on @{name}"));
            }
            if slots[j].is_some() {
                return Err(format!("client task {j} connected twice to @{name}"));
            }
            size_buffers(c.as_raw_fd(), p, 1)?;
            slots[j] = Some(c);
        }
        out.push(Endpoint::Unix(slots.into_iter().flatten().collect()));
    }
    Ok(out)
}

/// Client side of `-U`: for each client task, one `AF_UNIX` `SOCK_SEQPACKET` socket connected
/// to each server task (named after the ports in the server's reply), each first sending the
/// setup message.
fn unix_connect(p: &Params, peer_ports: &[u16]) -> Result<Vec<Endpoint>, String> {
    if peer_ports.len() != p.tasks as usize {
        return Err(format!(
            "the passive instance has {} tasks, {} asked for",
            peer_ports.len(),
            p.tasks
        ));
    }
    let mut out = Vec::new();
    for j in 0..p.tasks {
        let mut fds = Vec::new();
        for &port in peer_ports {
            let name = unix_name(port);
            let s = sys::seqpacket_socket()
                .map_err(|e| format!("socket(AF_UNIX, SOCK_SEQPACKET): {e}"))?;
            size_buffers(s.as_raw_fd(), p, 1)?;
            sys::unix_connect_abstract(&s, &name)
                .map_err(|e| format!("connecting to @{name}: {e}"))?;
            let setup = Wire::default().bytes(UNIX_SETUP_MAGIC).u32(j).0;
            sys::send2_connected(s.as_raw_fd(), &setup, &[], libc::MSG_NOSIGNAL)
                .map_err(|e| format!("setup message to @{name}: {e}"))?;
            fds.push(s);
        }
        out.push(Endpoint::Unix(fds));
    }
    Ok(out)
}

/// Opens and binds one RDS socket per task (to `base+1+i`, or a free port when `base` is
/// `None`) with buffers that fit everything in flight. Returns each socket with its port.
fn open_sockets(
    p: &Params,
    local: Ipv4Addr,
    base: Option<u16>,
) -> Result<Vec<(RdsSocket, u16)>, String> {
    let peers = p.tasks as usize;
    let (want, biggest) = buffer_bytes(p, peers);
    let mut out = Vec::new();
    for i in 0..p.tasks {
        let s = RdsSocket::new()
            .map_err(|e| format!("socket(AF_RDS): {e} (is an RDS module loaded?)"))?;
        let port = base.map_or(0, |b| b + 1 + i as u16);
        let at = SocketAddrV4::new(local, port);
        s.bind(at).map_err(|e| format!("bind {at}: {e}"))?;
        let fd = s.as_raw_fd();
        let snd = sys::set_buffer(fd, true, want).map_err(|e| format!("SO_SNDBUF: {e}"))?;
        let rcv = sys::set_buffer(fd, false, want).map_err(|e| format!("SO_RCVBUF: {e}"))?;
        if snd < biggest {
            return Err(format!(
                "the send buffer ({snd} bytes) cannot hold one {biggest}-byte message; \
                 run as root or raise net.core.wmem_max"
            ));
        }
        let _ = rcv;
        let port = if port == 0 {
            s.local_addr()
                .map_err(|e| format!("getsockname: {e}"))?
                .port()
        } else {
            port
        };
        out.push((s, port));
    }
    Ok(out)
}

// ---- tasks ---------------------------------------------------------------------------------

/// Counters of one task, read by the main thread every second.
#[derive(Default)]
struct Stats {
    req_tx: AtomicU64,
    ack_tx: AtomicU64,
    req_rx: AtomicU64,
    ack_rx: AtomicU64,
    bytes_tx: AtomicU64,
    bytes_rx: AtomicU64,
    send_calls: AtomicU64,
    send_ns: AtomicU64,
    rtt_ns: AtomicU64,
    rtt_n: AtomicU64,
    errors: AtomicU64,
    eagain: AtomicU64,
    enobufs: AtomicU64,
    outstanding: AtomicU64,
    /// Bytes moved by RDMA for this task's acked requests (`-D`).
    rdma_bytes: AtomicU64,
    /// Set once the task stopped sending requests and all of its requests were acked.
    drained: AtomicBool,
}

/// A copy of [`Stats`] (summed over tasks, or a difference of two).
#[derive(Clone, Copy, Default, Debug)]
struct Snap {
    req_tx: u64,
    ack_tx: u64,
    req_rx: u64,
    ack_rx: u64,
    bytes_tx: u64,
    bytes_rx: u64,
    send_calls: u64,
    send_ns: u64,
    rtt_ns: u64,
    rtt_n: u64,
    errors: u64,
    eagain: u64,
    enobufs: u64,
    outstanding: u64,
    rdma_bytes: u64,
}

impl Stats {
    fn snap(&self) -> Snap {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snap {
            req_tx: l(&self.req_tx),
            ack_tx: l(&self.ack_tx),
            req_rx: l(&self.req_rx),
            ack_rx: l(&self.ack_rx),
            bytes_tx: l(&self.bytes_tx),
            bytes_rx: l(&self.bytes_rx),
            send_calls: l(&self.send_calls),
            send_ns: l(&self.send_ns),
            rtt_ns: l(&self.rtt_ns),
            rtt_n: l(&self.rtt_n),
            errors: l(&self.errors),
            eagain: l(&self.eagain),
            enobufs: l(&self.enobufs),
            outstanding: l(&self.outstanding),
            rdma_bytes: l(&self.rdma_bytes),
        }
    }
}

impl Snap {
    fn add(mut self, o: &Snap) -> Snap {
        self.req_tx += o.req_tx;
        self.ack_tx += o.ack_tx;
        self.req_rx += o.req_rx;
        self.ack_rx += o.ack_rx;
        self.bytes_tx += o.bytes_tx;
        self.bytes_rx += o.bytes_rx;
        self.send_calls += o.send_calls;
        self.send_ns += o.send_ns;
        self.rtt_ns += o.rtt_ns;
        self.rtt_n += o.rtt_n;
        self.errors += o.errors;
        self.eagain += o.eagain;
        self.enobufs += o.enobufs;
        self.outstanding += o.outstanding;
        self.rdma_bytes += o.rdma_bytes;
        self
    }
    fn sub(&self, o: &Snap) -> Snap {
        Snap {
            req_tx: self.req_tx - o.req_tx,
            ack_tx: self.ack_tx - o.ack_tx,
            req_rx: self.req_rx - o.req_rx,
            ack_rx: self.ack_rx - o.ack_rx,
            bytes_tx: self.bytes_tx - o.bytes_tx,
            bytes_rx: self.bytes_rx - o.bytes_rx,
            send_calls: self.send_calls - o.send_calls,
            send_ns: self.send_ns - o.send_ns,
            rtt_ns: self.rtt_ns - o.rtt_ns,
            rtt_n: self.rtt_n - o.rtt_n,
            errors: self.errors - o.errors,
            eagain: self.eagain - o.eagain,
            enobufs: self.enobufs - o.enobufs,
            outstanding: self.outstanding,
            rdma_bytes: self.rdma_bytes - o.rdma_bytes,
        }
    }
}

/// State every task and the main thread share.
#[derive(Default)]
struct Shared {
    /// No new requests from now on (acks and receives go on).
    stop_sending: AtomicBool,
    /// Leave the loop.
    stop: AtomicBool,
    /// A task met an error it cannot go on from.
    fatal: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, msg: String) {
        let mut f = self.fatal.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(msg);
        }
        self.stop_sending.store(true, Ordering::SeqCst);
    }
    fn failed(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why a send did not go out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Blocked {
    /// `EAGAIN`/`ENOMEM`: the send buffer is full.
    Full,
    /// `ENOBUFS`: the destination port is congested.
    Congested,
}

/// The pattern every payload is cut from (the same in both instances).
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

fn fnv(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &c| {
        (h ^ u32::from(c)).wrapping_mul(0x0100_0193)
    })
}

/// Where in the pattern the payload of a message starts.
fn pattern_offset(kind: u8, src_task: u16, seq: u64) -> usize {
    ((seq as usize)
        .wrapping_add(src_task as usize * 31)
        .wrapping_add(kind as usize * 97))
        % PATTERN_SPREAD
}

/// A decoded stress header.
struct Header {
    kind: u8,
    flags: u8,
    src: u16,
    dst: u16,
    len: u32,
    seq: u64,
    pcsum: u32,
}

fn encode(h: &Header) -> [u8; HDR] {
    let mut b = [0u8; HDR];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4] = h.kind;
    b[5] = h.flags;
    b[6..8].copy_from_slice(&h.src.to_le_bytes());
    b[8..10].copy_from_slice(&h.dst.to_le_bytes());
    b[12..16].copy_from_slice(&h.len.to_le_bytes());
    b[16..24].copy_from_slice(&h.seq.to_le_bytes());
    b[24..28].copy_from_slice(&h.pcsum.to_le_bytes());
    let c = fnv(&b[..28]);
    b[28..32].copy_from_slice(&c.to_le_bytes());
    b
}

fn decode(b: &[u8]) -> Result<Header, String> {
    if b.len() < HDR {
        return Err(format!(
            "{} bytes, shorter than the {HDR}-byte header",
            b.len()
        ));
    }
    let u32at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u16at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    if u32at(0) != MAGIC {
        return Err(format!("bad magic {:#010x}", u32at(0)));
    }
    if u32at(28) != fnv(&b[..28]) {
        return Err("bad header checksum".into());
    }
    let mut s = [0u8; 8];
    s.copy_from_slice(&b[16..24]);
    Ok(Header {
        kind: b[4],
        flags: b[5],
        src: u16at(6),
        dst: u16at(8),
        len: u32at(12),
        seq: u64::from_le_bytes(s),
        pcsum: u32at(24),
    })
}

/// Who a peer task is: its RDS address, or (`-U`) its task number.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PeerId {
    Rds(SocketAddrV4),
    Unix(u16),
}

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerId::Rds(a) => write!(f, "{a}"),
            PeerId::Unix(t) => write!(f, "peer task {t} (AF_UNIX)"),
        }
    }
}

/// One peer task as a task sees it.
struct Peer {
    id: PeerId,
    /// The connected socket to the peer (`-U`); over RDS, the task's own socket.
    fd: RawFd,
    /// `-U`: the peer closed its socket (end of file), at the end of a run.
    closed: bool,
    next_seq: u64,
    inflight: VecDeque<(u64, Instant)>,
    expect_req: u64,
    /// `-D`: the first request (without RDMA) was acked: the connection is up.
    first_acked: bool,
}

struct Task {
    idx: u16,
    /// The task's RDS socket (unused with `-U`, where each peer has its own).
    fd: RawFd,
    p: Params,
    send_requests: bool,
    peers: Vec<Peer>,
    /// Requests to ack: peer, sequence number, and the cookie of the RDMA the ack carries.
    pending_acks: VecDeque<(usize, u64, Option<u64>)>,
    pattern: Arc<Vec<u8>>,
    /// `-D`: a buffer of `depth` RDMA slots per peer (written by peers, or the sink of reads).
    rmem: Option<RdmaMem>,
    /// `-Z`: the request whose read data each slot holds, unchecked yet (0: none).
    read_check: Vec<u64>,
    /// Control messages of a received request.
    ctl: Vec<u8>,
    shared: Arc<Shared>,
    st: Arc<Stats>,
    printed: u64,
    rr: usize,
    /// What the task polls while it waits (kept to save an allocation per wait).
    pollset: Vec<(RawFd, i16)>,
}

impl Task {
    fn error(&mut self, msg: String) {
        self.st.errors.fetch_add(1, Ordering::Relaxed);
        if self.printed < MAX_PRINTED_ERRORS {
            eprintln!("rds-stress: task {}: verification error: {msg}", self.idx);
            self.printed += 1;
        }
    }

    /// Whether request `seq` carries RDMA (`-D`): all but the first to each peer.
    fn rdma_for(&self, seq: u64) -> bool {
        self.p.rdma > 0 && seq >= 2
    }

    /// The RDMA slot of request `seq` of peer `peer`: `depth` per peer, reused every `depth`
    /// requests (by then the earlier one was acked).
    fn slot(&self, peer: usize, seq: u64) -> usize {
        peer * self.p.depth as usize + (seq % u64::from(self.p.depth)) as usize
    }

    /// The address of slot `k` of `rmem`.
    fn slot_addr(&self, k: usize) -> u64 {
        self.rmem
            .as_ref()
            .map_or(0, |m| m.at(k * self.p.rdma_slot_bytes()))
    }

    /// The RDMA data of request `seq` of task `src`: a stretch of the pattern.
    fn rdma_data(&self, src: u16, seq: u64) -> &[u8] {
        let off = pattern_offset(KIND_RDMA, src, seq);
        &self.pattern[off..off + self.p.rdma as usize]
    }

    /// `-Z`: slot `k` of peer `pi` is about to receive the read of request `seq`: checks what
    /// the slot's previous read brought (the last reads of a run are never checked).
    fn reuse_read_slot(&mut self, pi: usize, k: usize, seq: u64) {
        let Some(prev) = self
            .read_check
            .get_mut(k)
            .map(|c| core::mem::replace(c, seq))
        else {
            return;
        };
        let Some(m) = self.rmem.as_ref().filter(|_| prev != 0) else {
            return;
        };
        let got = m.read(k * self.p.rdma_slot_bytes(), self.p.rdma as usize);
        if got != self.rdma_data(pi as u16, prev) {
            let from = self.peers[pi].id;
            self.error(format!(
                "from {from}: request {prev}: the RDMA read brought other data"
            ));
        }
    }

    /// The control messages of a message: a request's registration (`RDS_CMSG_RDMA_MAP`) or
    /// an ack's RDMA operation (`RDS_CMSG_RDMA_ARGS`; `iovs` keeps its local iovec).
    fn rdma_ctl(
        &mut self,
        kind: u8,
        peer: usize,
        seq: u64,
        cookie: Option<u64>,
        iovs: &mut Vec<u8>,
    ) -> ControlBuf {
        let mut c = ControlBuf::new();
        let bytes = u64::from(self.p.rdma);
        if kind == KIND_REQ && self.rdma_for(seq) {
            // Written into our slot, or the pattern read from where it lies.
            let (addr, flags) = if self.p.rdma_read {
                let d = self.rdma_data(self.idx, seq);
                (d.as_ptr() as u64, RDS_RDMA_USE_ONCE)
            } else {
                let k = self.slot(peer, seq);
                (self.slot_addr(k), RDS_RDMA_USE_ONCE | RDS_RDMA_READWRITE)
            };
            c.rdma_map(&GetMrArgs {
                vec: RdsIovec { addr, bytes },
                cookie_addr: 0,
                flags,
            });
        } else if let (KIND_ACK, Some(cookie)) = (kind, cookie) {
            let (local, flags) = if self.p.rdma_read {
                let k = self.slot(peer, seq);
                self.reuse_read_slot(peer, k, seq);
                // Fenced: the ack must not leave before the read is done (C's IB transport
                // fences only when asked; rds_rs fences every read).
                (self.slot_addr(k), RDS_RDMA_FENCE)
            } else {
                let d = self.rdma_data(peer as u16, seq);
                (d.as_ptr() as u64, RDS_RDMA_READWRITE)
            };
            *iovs = librds::rdma::encode_iovecs(&[RdsIovec { addr: local, bytes }]);
            c.rdma_args(&RdmaArgs {
                cookie,
                remote: RdsIovec { addr: 0, bytes },
                local_vec_addr: iovs.as_ptr() as u64,
                nr_local: 1,
                flags,
                user_token: seq,
            });
        }
        c
    }

    /// Sends one message; `Ok(None)` if it went out. `cookie`: an ack's RDMA (`-D`).
    fn send(
        &mut self,
        kind: u8,
        peer: usize,
        seq: u64,
        cookie: Option<u64>,
    ) -> Result<Option<Blocked>, String> {
        let len = if kind == KIND_REQ {
            self.p.req
        } else {
            self.p.ack
        } as usize;
        let off = pattern_offset(kind, self.idx, seq);
        let body = &self.pattern[off..off + len - HDR];
        let h = Header {
            kind,
            flags: if self.p.pcsum { FLAG_PCSUM } else { 0 },
            src: self.idx,
            dst: peer as u16,
            len: len as u32,
            seq,
            pcsum: if self.p.pcsum { fnv(body) } else { 0 },
        };
        let head = encode(&h);
        let dest = self.peers[peer].id;
        let mut iovs = Vec::new();
        let ctl = if self.p.rdma > 0 {
            Some(self.rdma_ctl(kind, peer, seq, cookie, &mut iovs))
        } else {
            None
        };
        let body = &self.pattern[off..off + len - HDR];
        let t = Instant::now();
        let r = match (dest, &ctl) {
            (PeerId::Rds(a), None) => sys::send2(self.fd, &head, body, a, libc::MSG_DONTWAIT),
            (PeerId::Rds(a), Some(c)) => {
                sys::send2_ctl(self.fd, &head, body, a, c.as_bytes(), libc::MSG_DONTWAIT)
            }
            (PeerId::Unix(_), _) => sys::send2_connected(
                self.peers[peer].fd,
                &head,
                body,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            ),
        };
        self.st
            .send_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.st.send_calls.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(n) if n == len => {
                self.st.bytes_tx.fetch_add(len as u64, Ordering::Relaxed);
                Ok(None)
            }
            Ok(n) => Err(format!("sendmsg to {dest} sent {n} of {len} bytes")),
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOMEM) => {
                    self.st.eagain.fetch_add(1, Ordering::Relaxed);
                    Ok(Some(Blocked::Full))
                }
                Some(libc::ENOBUFS) => {
                    self.st.enobufs.fetch_add(1, Ordering::Relaxed);
                    Ok(Some(Blocked::Congested))
                }
                Some(libc::EINTR) => Ok(Some(Blocked::Full)),
                _ => Err(format!(
                    "sendmsg of {len} bytes to {dest}: {} ({e})",
                    sys::errno_name(&e)
                )),
            },
        }
    }

    /// `-D`: request `seq` to peer `pi` was acked: the first one brings the connection up;
    /// the others' RDMA is done (a written buffer is checked now).
    fn rdma_acked(&mut self, pi: usize, seq: u64) {
        if !self.rdma_for(seq) {
            self.peers[pi].first_acked = true;
            return;
        }
        if !self.p.rdma_read {
            let at = self.slot(pi, seq) * self.p.rdma_slot_bytes();
            let got = self
                .rmem
                .as_ref()
                .map(|m| m.read(at, self.p.rdma as usize))
                .unwrap_or_default();
            if got != self.rdma_data(self.idx, seq) {
                let from = self.peers[pi].id;
                self.error(format!(
                    "from {from}: ack of request {seq}: the RDMA write left other data"
                ));
            }
        }
        self.st
            .rdma_bytes
            .fetch_add(u64::from(self.p.rdma), Ordering::Relaxed);
    }

    /// Handles a message received on the task's RDS socket: finds the peer by its address.
    fn handle_from(&mut self, buf: &[u8], r: Received, cookie: Option<u64>) {
        let Some(from) = r.from else {
            return self.error("a message without a sender address".into());
        };
        let Some(pi) = self.peers.iter().position(|p| p.id == PeerId::Rds(from)) else {
            return self.error(format!("a message from {from}, which is no peer task"));
        };
        self.handle(pi, buf, r, cookie);
    }

    /// Handles a message from peer task `pi`; `cookie`: the RDMA cookie it carried (`-D`).
    fn handle(&mut self, pi: usize, buf: &[u8], r: Received, cookie: Option<u64>) {
        let from = self.peers[pi].id;
        if r.truncated {
            return self.error(format!(
                "a message from {from} longer than {} bytes",
                buf.len()
            ));
        }
        let m = &buf[..r.len];
        let h = match decode(m) {
            Ok(h) => h,
            Err(e) => return self.error(format!("from {from}: {e}")),
        };
        let want_len = match h.kind {
            KIND_REQ => self.p.req,
            KIND_ACK => self.p.ack,
            k => return self.error(format!("from {from}: unknown kind {k}")),
        };
        if h.len as usize != m.len() || h.len != want_len {
            return self.error(format!(
                "from {from}: {} bytes received, header says {}, expected {want_len}",
                m.len(),
                h.len
            ));
        }
        if h.src as usize != pi || h.dst != self.idx {
            return self.error(format!(
                "from {from}: header names task {} -> {}, expected {pi} -> {}",
                h.src, h.dst, self.idx
            ));
        }
        let off = pattern_offset(h.kind, h.src, h.seq);
        let want = &self.pattern[off..off + m.len() - HDR];
        let body = &m[HDR..];
        if body != want {
            let at = body.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            return self.error(format!(
                "from {from}: seq {} kind {}: payload differs at byte {} (got {:#04x}, want {:#04x})",
                h.seq,
                h.kind,
                HDR + at,
                body[at],
                want[at]
            ));
        }
        if h.flags & FLAG_PCSUM != 0 && fnv(body) != h.pcsum {
            return self.error(format!(
                "from {from}: seq {}: payload checksum differs",
                h.seq
            ));
        }
        self.st
            .bytes_rx
            .fetch_add(m.len() as u64, Ordering::Relaxed);
        if h.kind == KIND_REQ {
            self.st.req_rx.fetch_add(1, Ordering::Relaxed);
            let exp = self.peers[pi].expect_req;
            if h.seq != exp {
                self.error(format!(
                    "from {from}: request seq {} where {exp} was next (lost, duplicated or reordered)",
                    h.seq
                ));
            }
            self.peers[pi].expect_req = h.seq + 1;
            if self.rdma_for(h.seq) != cookie.is_some() {
                self.error(format!(
                    "from {from}: request seq {} {} an RDMA cookie",
                    h.seq,
                    if cookie.is_some() { "with" } else { "without" }
                ));
            }
            let cookie = cookie.filter(|_| self.rdma_for(h.seq));
            self.pending_acks.push_back((pi, h.seq, cookie));
        } else {
            self.st.ack_rx.fetch_add(1, Ordering::Relaxed);
            match self.peers[pi].inflight.front() {
                Some(&(seq, t)) if seq == h.seq => {
                    self.peers[pi].inflight.pop_front();
                    if self.p.rdma > 0 {
                        self.rdma_acked(pi, seq);
                    }
                    self.st
                        .rtt_ns
                        .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    self.st.rtt_n.fetch_add(1, Ordering::Relaxed);
                }
                Some(&(seq, _)) => {
                    self.error(format!(
                        "from {from}: ack for seq {} while {seq} was the oldest outstanding",
                        h.seq
                    ));
                    // Resynchronise: drop everything up to the acked request.
                    let q = &mut self.peers[pi].inflight;
                    while q.front().is_some_and(|&(s, _)| s <= h.seq) {
                        q.pop_front();
                    }
                }
                None => self.error(format!(
                    "from {from}: ack for seq {} with nothing outstanding",
                    h.seq
                )),
            }
        }
    }

    fn run(mut self) {
        let cap = self.p.req.max(self.p.ack) as usize + 1;
        let mut buf = vec![0u8; cap];
        let npeers = self.peers.len();
        while !self.shared.stop.load(Ordering::Relaxed) {
            let mut progressed = false;
            // Why a send did not go out, and to which peer.
            let mut blocked = None;
            // Acks first: the peer waits for them.
            while let Some(&(pi, seq, cookie)) = self.pending_acks.front() {
                match self.send(KIND_ACK, pi, seq, cookie) {
                    Ok(None) => {
                        self.pending_acks.pop_front();
                        self.st.ack_tx.fetch_add(1, Ordering::Relaxed);
                        progressed = true;
                    }
                    Ok(Some(b)) => {
                        blocked = Some((b, pi));
                        break;
                    }
                    Err(e) => return self.shared.fail(format!("task {}: {e}", self.idx)),
                }
            }
            if blocked.is_none()
                && self.send_requests
                && !self.shared.stop_sending.load(Ordering::Relaxed)
            {
                // Round robin over the peers, each up to `depth` outstanding.
                'peers: for k in 0..npeers {
                    let pi = (self.rr + k) % npeers;
                    while self.peers[pi].inflight.len() < self.p.depth as usize {
                        let seq = self.peers[pi].next_seq;
                        // `-D`: nothing after the first request until it is acked.
                        if self.rdma_for(seq) && !self.peers[pi].first_acked {
                            break;
                        }
                        match self.send(KIND_REQ, pi, seq, None) {
                            Ok(None) => {
                                let peer = &mut self.peers[pi];
                                peer.next_seq += 1;
                                peer.inflight.push_back((seq, Instant::now()));
                                self.st.req_tx.fetch_add(1, Ordering::Relaxed);
                                progressed = true;
                            }
                            Ok(Some(b)) => {
                                blocked = Some((b, pi));
                                self.rr = pi;
                                break 'peers;
                            }
                            Err(e) => return self.shared.fail(format!("task {}: {e}", self.idx)),
                        }
                    }
                }
            }
            // Up to 64 messages from each socket: the task's RDS socket, or with `-U` the
            // socket of each peer.
            let nsocks = if self.p.unix { npeers } else { 1 };
            for si in 0..nsocks {
                if self.p.unix && self.peers[si].closed {
                    continue;
                }
                for _ in 0..64 {
                    let mut cookie = None;
                    let r = if self.p.unix {
                        sys::recv_connected(self.peers[si].fd, &mut buf, libc::MSG_DONTWAIT)
                    } else if self.p.rdma > 0 {
                        sys::recv_ctl(self.fd, &mut buf, &mut self.ctl, libc::MSG_DONTWAIT).map(
                            |(r, n)| {
                                cookie = librds::parse_cmsgs(&self.ctl[..n])
                                    .iter()
                                    .find_map(|c| c.rdma_dest());
                                r
                            },
                        )
                    } else {
                        sys::recv(self.fd, &mut buf, libc::MSG_DONTWAIT)
                    };
                    match r {
                        // End of file: the peer instance closed its sockets at the end of the
                        // run (a 0-byte message is never sent).
                        Ok(r) if self.p.unix && r.len == 0 && !r.truncated => {
                            self.peers[si].closed = true;
                            break;
                        }
                        Ok(r) => {
                            if self.p.unix {
                                self.handle(si, &buf, r, None);
                            } else {
                                self.handle_from(&buf, r, cookie);
                            }
                            progressed = true;
                        }
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::EAGAIN) | Some(libc::EINTR)
                            ) =>
                        {
                            break
                        }
                        Err(e) => {
                            return self.shared.fail(format!(
                                "task {}: recvmsg: {} ({e})",
                                self.idx,
                                sys::errno_name(&e)
                            ))
                        }
                    }
                }
            }
            let out: usize = self.peers.iter().map(|p| p.inflight.len()).sum();
            self.st.outstanding.store(out as u64, Ordering::Relaxed);
            // Drained: no request outstanding, and none will be sent any more (this iteration
            // sent only if `stop_sending` was still clear when it looked, before this load).
            if out == 0 && self.shared.stop_sending.load(Ordering::SeqCst) {
                self.st.drained.store(true, Ordering::SeqCst);
            }
            if !progressed {
                let (events, ms) = match blocked {
                    Some((Blocked::Congested, _)) => (libc::POLLIN, 2),
                    Some((Blocked::Full, _)) => (libc::POLLIN | libc::POLLOUT, 20),
                    None => (libc::POLLIN, 50),
                };
                self.pollset.clear();
                if self.p.unix {
                    // Every open peer socket for input; the blocked one for output too.
                    for (k, peer) in self.peers.iter().enumerate() {
                        if !peer.closed {
                            let ev = match blocked {
                                Some((_, b)) if b == k => events,
                                _ => libc::POLLIN,
                            };
                            self.pollset.push((peer.fd, ev));
                        }
                    }
                } else {
                    self.pollset.push((self.fd, events));
                }
                if let Err(e) = librds::poll_fds(&self.pollset, Duration::from_millis(ms)) {
                    return self.shared.fail(format!("task {}: poll: {e}", self.idx));
                }
            }
        }
    }
}

// ---- the run -------------------------------------------------------------------------------

fn interrupted() -> bool {
    sys::INTERRUPTED.load(Ordering::SeqCst)
}

fn flush() {
    let _ = io::stdout().flush();
}

fn sum(stats: &[Arc<Stats>]) -> Snap {
    stats
        .iter()
        .fold(Snap::default(), |acc, s| acc.add(&s.snap()))
}

const HEADER_LINE: &str =
    "tsks   tx/s   rx/s  tx+rx K/s    mbi K/s    mbo K/s tx us/c   rtt us cpu %";

fn line(tasks: u32, d: &Snap, secs: f64, cpu: Option<f64>) -> String {
    let s = secs.max(1e-9);
    let per = |n: u64| n as f64 / s;
    let txus = if d.send_calls > 0 {
        d.send_ns as f64 / d.send_calls as f64 / 1000.0
    } else {
        0.0
    };
    let rtt = if d.rtt_n > 0 {
        d.rtt_ns as f64 / d.rtt_n as f64 / 1000.0
    } else {
        0.0
    };
    format!(
        "{:>4} {:>6.0} {:>6.0} {:>10.2} {:>10.2} {:>10.2} {:>7.2} {:>8.2} {:>5.1}",
        tasks,
        per(d.req_tx + d.ack_tx),
        per(d.req_rx + d.ack_rx),
        per(d.bytes_tx + d.bytes_rx) / 1024.0,
        0.0,
        0.0,
        txus,
        rtt,
        cpu.unwrap_or(-1.0)
    )
}

fn cpu_pct(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<f64> {
    let ((b0, t0), (b1, t1)) = (a?, b?);
    (t1 > t0).then(|| (b1 - b0) as f64 * 100.0 / (t1 - t0) as f64)
}

fn run(
    o: &Opts,
    role: &str,
    p: Params,
    eps: Vec<Endpoint>,
    peers: Vec<SocketAddrV4>,
    mut tcp: TcpStream,
) -> Result<bool, String> {
    let send_requests = !(p.one_way && role == "server");
    println!(
        "negotiated options: {} tasks per side, {} B requests, {} B acks, depth {}, {}{}{}{}",
        p.tasks,
        p.req,
        p.ack,
        p.depth,
        if p.secs > 0 {
            format!("{} s", p.secs)
        } else {
            "until interrupted".into()
        },
        if p.one_way { ", one-way" } else { "" },
        if p.pcsum { ", payload checksums" } else { "" },
        if p.unix {
            ", over AF_UNIX SOCK_SEQPACKET"
        } else {
            ""
        },
    );
    if o.verbose {
        if p.unix {
            println!("AF_UNIX: one connected socket per pair of tasks");
        } else {
            let mine: Vec<u16> = eps
                .iter()
                .filter_map(|e| match e {
                    Endpoint::Rds(_, port) => Some(*port),
                    Endpoint::Unix(_) => None,
                })
                .collect();
            println!("local ports {mine:?}, peer tasks {peers:?}");
        }
    }
    let pat = Arc::new(pattern(
        p.req.max(p.ack).max(p.rdma) as usize + PATTERN_SPREAD,
    ));
    let shared = Arc::new(Shared::default());
    let mut stats = Vec::new();
    let mut handles = Vec::new();
    for (i, ep) in eps.into_iter().enumerate() {
        let st = Arc::new(Stats::default());
        stats.push(st.clone());
        let peer = |id, fd| Peer {
            id,
            fd,
            closed: false,
            next_seq: 1,
            inflight: VecDeque::new(),
            expect_req: 1,
            first_acked: false,
        };
        let (fd, task_peers) = match &ep {
            Endpoint::Rds(s, _) => {
                let fd = s.as_raw_fd();
                let ps: Vec<Peer> = peers.iter().map(|&a| peer(PeerId::Rds(a), fd)).collect();
                (fd, ps)
            }
            Endpoint::Unix(fds) => {
                let ps = fds
                    .iter()
                    .enumerate()
                    .map(|(k, f)| peer(PeerId::Unix(k as u16), f.as_raw_fd()))
                    .collect();
                (-1, ps)
            }
        };
        // `-D`: `depth` slots per peer (written by the peers, or the sink of reads).
        let slots = task_peers.len() * p.depth as usize;
        let rmem = if p.rdma > 0 {
            let bytes = slots * p.rdma_slot_bytes();
            Some(RdmaMem::new(bytes).map_err(|e| format!("mmap of {bytes} bytes: {e}"))?)
        } else {
            None
        };
        let task = Task {
            idx: i as u16,
            fd,
            p,
            send_requests,
            peers: task_peers,
            pending_acks: VecDeque::new(),
            pattern: pat.clone(),
            rmem,
            read_check: vec![0; if p.rdma_read { slots } else { 0 }],
            ctl: vec![0; RDMA_CTL_ROOM],
            shared: shared.clone(),
            st,
            printed: 0,
            rr: 0,
            pollset: Vec::new(),
        };
        handles.push(thread::spawn(move || {
            // The sockets live as long as their task.
            let _ep = ep;
            task.run();
        }));
    }

    // The sending phase: a line per second until the time is up, an interrupt, a task's
    // failure, or word from the peer (which ended its own).
    println!("{HEADER_LINE}");
    flush();
    let start = Instant::now();
    let cpu0 = sys::cpu_ticks();
    let mut last = Snap::default();
    let mut last_t = start;
    let mut last_cpu = cpu0;
    let mut ended_by = "time";
    let mut tick = 1u64;
    // Requests completed (both ways) in each one-second interval.
    let mut per_sec: Vec<f64> = Vec::new();
    loop {
        let due = start + Duration::from_secs(tick);
        let mut stop = false;
        while Instant::now() < due {
            if interrupted() {
                ended_by = "interrupt";
                stop = true;
                break;
            }
            if shared.failed().is_some() {
                ended_by = "error";
                stop = true;
                break;
            }
            let r = librds::poll_fds(
                &[(tcp.as_raw_fd(), libc::POLLIN)],
                Duration::from_millis(50),
            );
            if matches!(r, Ok(ref v) if v[0] != 0) {
                ended_by = "peer";
                stop = true;
                break;
            }
        }
        if stop {
            break;
        }
        let now = Instant::now();
        let cur = sum(&stats);
        let cpu = sys::cpu_ticks();
        let d = cur.sub(&last);
        per_sec.push((d.rtt_n + d.req_rx) as f64 / (now - last_t).as_secs_f64().max(1e-9));
        println!(
            "{}",
            line(
                p.tasks,
                &cur.sub(&last),
                (now - last_t).as_secs_f64(),
                cpu_pct(last_cpu, cpu)
            )
        );
        flush();
        last = cur;
        last_t = now;
        last_cpu = cpu;
        if p.secs > 0 && tick >= p.secs as u64 {
            break;
        }
        tick += 1;
    }
    let phase = start.elapsed();
    let at_end = sum(&stats);
    let cpu_end = sys::cpu_ticks();
    shared.stop_sending.store(true, Ordering::SeqCst);

    // Drain: every request of ours acked (the tasks keep acking the peer's).
    let t = Instant::now();
    let mut drained = false;
    while t.elapsed() < DRAIN_TIMEOUT {
        if stats.iter().all(|s| s.drained.load(Ordering::SeqCst)) {
            drained = true;
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    // Both sides drained means nothing is in flight any more in either direction: each side
    // stopped sending requests before draining, and every request of each was acked by the
    // other. Only then are the totals final.
    let exchange = send_frame(&mut tcp, &drained_msg(drained))
        .and_then(|()| recv_frame(&mut tcp, PEER_DONE_TIMEOUT))
        .and_then(|b| parse_drained(&b));
    shared.stop.store(true, Ordering::SeqCst);
    for h in handles {
        let _ = h.join();
    }
    let fin = sum(&stats);
    let fatal = shared.failed();
    let my_totals = Totals {
        ok: drained && fatal.is_none() && fin.errors == 0,
        req_sent: fin.req_tx,
        req_acked: fin.rtt_n,
        req_rcvd: fin.req_rx,
        errors: fin.errors,
    };
    let exchange = exchange.and_then(|peer_drained| {
        send_frame(&mut tcp, &done_msg(&my_totals))?;
        let t = parse_done(&recv_frame(&mut tcp, PEER_DONE_TIMEOUT)?)?;
        Ok((peer_drained, t))
    });

    // The summary.
    let secs = phase.as_secs_f64();
    println!("---------------------------------------------");
    println!("{}", line(p.tasks, &at_end, secs, cpu_pct(cpu0, cpu_end)));
    if o.verbose {
        for (i, s) in stats.iter().enumerate() {
            let s = s.snap();
            println!(
                "task {i}: requests {} sent {} acked {} received; acks {} sent; EAGAIN {} ENOBUFS {}; errors {}",
                s.req_tx, s.rtt_n, s.req_rx, s.ack_tx, s.eagain, s.enobufs, s.errors
            );
        }
    }
    let mut problems = Vec::new();
    if let Some(f) = &fatal {
        problems.push(f.clone());
    }
    if !drained {
        problems.push(format!(
            "{} requests never acked within {} s",
            fin.req_tx - fin.rtt_n,
            DRAIN_TIMEOUT.as_secs()
        ));
    }
    if fin.errors > 0 {
        problems.push(format!("{} verification errors", fin.errors));
    }
    if fin.ack_tx != fin.req_rx {
        problems.push(format!(
            "{} requests received but {} acks sent",
            fin.req_rx, fin.ack_tx
        ));
    }
    match &exchange {
        Ok((peer_drained, peer)) => {
            if !peer_drained {
                problems.push("the peer's requests were not all acked".into());
            }
            if !peer.ok {
                problems.push(format!(
                    "the peer reported a failure ({} verification errors there)",
                    peer.errors
                ));
            }
            if peer.req_sent != fin.req_rx {
                problems.push(format!(
                    "the peer sent {} requests, {} arrived here",
                    peer.req_sent, fin.req_rx
                ));
            }
            if peer.req_rcvd != fin.req_tx {
                problems.push(format!(
                    "{} requests sent from here, the peer received {}",
                    fin.req_tx, peer.req_rcvd
                ));
            }
        }
        Err(e) => problems.push(format!("no totals from the peer: {e}")),
    }
    if send_requests && at_end.rtt_n == 0 && fatal.is_none() {
        problems.push("no request completed".into());
    }
    let both = (at_end.rtt_n + at_end.req_rx) as f64 / secs.max(1e-9);
    let rtt = if at_end.rtt_n > 0 {
        at_end.rtt_ns as f64 / at_end.rtt_n as f64 / 1000.0
    } else {
        0.0
    };
    let msgs =
        (at_end.req_tx + at_end.ack_tx + at_end.req_rx + at_end.ack_rx) as f64 / secs.max(1e-9);
    let mbs = (at_end.bytes_tx + at_end.bytes_rx) as f64 / secs.max(1e-9) / 1e6;
    // RDMA bytes of this side's acked requests.
    let rdma_mbs = at_end.rdma_bytes as f64 / secs.max(1e-9) / 1e6;
    let rdma = match (p.rdma, p.rdma_read) {
        (0, _) => "none".to_string(),
        (n, false) => format!("write:{n}"),
        (n, true) => format!("read:{n}"),
    };
    // The median second: what a run achieves when a passing disturbance (another guest on
    // the host, say) is left out.
    per_sec.sort_by(|a, b| a.total_cmp(b));
    let median = match per_sec.len() {
        0 => both,
        n if n % 2 == 1 => per_sec[n / 2],
        n => (per_sec[n / 2 - 1] + per_sec[n / 2]) / 2.0,
    };
    println!(
        "{role}: {:.2} s (ended by {ended_by}): {} requests sent, {} acked; {} requests \
         received from the peer, {} acked; {both:.0} requests/s both ways, rtt {rtt:.1} us; \
         {} verification errors",
        secs, fin.req_tx, fin.rtt_n, fin.req_rx, fin.ack_tx, fin.errors
    );
    let ok = problems.is_empty();
    println!(
        "summary: role={role} tasks={} depth={} req={} ack={} one_way={} secs={secs:.2} \
         req_sent={} req_acked={} peer_req_rcvd={} req_per_s={both:.0} \
         req_per_s_median={median:.0} own_req_per_s={:.0} msgs_per_s={msgs:.0} mb_per_s={mbs:.2} rdma={rdma} rdma_mb_per_s={rdma_mbs:.2} rtt_us={rtt:.1} eagain={} enobufs={} errors={} \
         result={}",
        p.tasks,
        p.depth,
        p.req,
        p.ack,
        u8::from(p.one_way),
        fin.req_tx,
        fin.rtt_n,
        fin.req_rx,
        at_end.rtt_n as f64 / secs.max(1e-9),
        fin.eagain,
        fin.enobufs,
        fin.errors,
        if ok { "ok" } else { "FAIL" }
    );
    for pr in &problems {
        println!("rds-stress: FAIL: {pr}");
    }
    flush();
    Ok(ok)
}
