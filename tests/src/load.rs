//! Load: 8 processes with 8 sockets each (64 sockets on 127.0.0.1, ports 20000-20063) send
//! messages of random sizes to random sockets (their own included) and receive, until a
//! given number of messages has been delivered.
//!
//! Sizes: 0 to 16 KiB, one in a hundred 0 to 1 MiB. Every message is determined by its
//! (source socket, destination socket, per-pair sequence number): its length and its content
//! are functions of the three, so the receiver knows exactly what the next message of every
//! pair must be. A message of at least 24 bytes starts with a header (magic, source,
//! destination, sequence, length, checksum of the rest); a shorter one is the head of that
//! header. The receiver counts what is lost, duplicated, reordered within a pair, or
//! corrupted.
//!
//! Which pairs a process sends on is drawn from a generator seeded by the process number, so
//! the messages, their sizes and the total payload are the same in every run (and for both
//! implementations): the observations are counts.
//!
//! Sends do not block (`MSG_DONTWAIT`). `ENOBUFS` (a congested destination: rds_rs) and
//! `EAGAIN` (a full send buffer) keep the message pending and the process goes on receiving.
//! A process never has more than one message pending, and the processes together keep at most
//! 16 MiB and 2048 messages in flight, so memory stays bounded without congestion control
//! (C's loopback has none).
//!
//! At the end, before any socket closes: no message is queued to be received
//! (`RDS_INFO_RECV_MESSAGES`), and the counters `recv_bytes_added_to_sock` and
//! `recv_bytes_freed_fromsock` moved by the same amount, the payload delivered. The send side
//! is back to zero too: nothing on the send or retransmit queues (`RDS_INFO_SEND_MESSAGES`,
//! `RDS_INFO_RETRANS_MESSAGES`), and every socket reports `POLLOUT` even with its send buffer
//! shrunk to the smallest the kernel allows (so no more than a few KiB can still be charged to
//! it). Then every process exits cleanly.
//!
//! Fault modes (rds_rs only: the test hooks of its test build), `load COUNT TIMEOUT MODE`:
//! `reset` resets the connection every few frames (`loop_reset_every` [`RESET_EVERY`]),
//! `softirq` delivers from softirq context through a small ring (`loop_softirq`, `loop_ring`
//! [`RING`]), `softirq-reset` both. The same test runs with the knobs set (and set back to 0 at
//! the end, whatever happens); its checks are named `load_MODE_...` (`load_softirq_reset_...`
//! for the last). A ninth process ([`rdma_child`]) issues RDMA writes with `RDS_RDMA_NOTIFY_ME`
//! into a registration of one of its sockets throughout the run (ports [`RDMA_PORT`] and the
//! next, on the same connection as the rest): every operation is reported exactly once,
//! `SUCCESS` with its data in place and its message delivered, or `DROPPED` (only at resets)
//! leaving its target as it was; at the end the barrier passes every operation. The resets and
//! retransmissions are printed; in the reset modes there must have been resets, in `softirq`
//! none.

use crate::faults::Knob;
use crate::rdma::{rdma_op, recv_notes, Op};
use crate::util::{err_name, pattern, v4, Counters};
use crate::Report;
use librds::info::{RDS_INFO_RECV_MESSAGES, RDS_INFO_RETRANS_MESSAGES, RDS_INFO_SEND_MESSAGES};
use librds::rdma::{RDS_RDMA_DROPPED, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE, RDS_RDMA_SUCCESS};
use librds::{poll_fds, RdsSocket};
use librds::{RdmaMem, RdsIovec};
use rds_proto::Stat;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const PROCS: usize = 8;
const PER_PROC: usize = 8;
const SOCKS: usize = PROCS * PER_PROC;
const BASE_PORT: u16 = 20000;
const HDR: usize = 24;
const MAGIC: u32 = 0x5244_534c;
const MAX_LEN: usize = 1 << 20;
const INFLIGHT_BYTES: u64 = 16 << 20;
const INFLIGHT_MSGS: u64 = 2048;

// Slots of the shared counters.
const DELIVERED: usize = 0;
const DUP: usize = 1;
const REORDER: usize = 2;
const CORRUPT: usize = 3;
const SEND_ERRORS: usize = 4;
const SENT: usize = 5;
const BYTES_DELIVERED: usize = 6;
const INFLIGHT_B: usize = 7;
const INFLIGHT_N: usize = 8;
const FINISHED: usize = 9;
const RELEASE: usize = 10;
const SETUP_ERRORS: usize = 11;
const READY: usize = 12;
const ENOBUFS_SEEN: usize = 13;
const BYTES_SENT: usize = 14;
const NO_POLLOUT: usize = 15;
const CHECKED: usize = 16;
// The RDMA worker's (fault modes).
const R_OPS: usize = 18;
const R_OK: usize = 19;
const R_DROPPED: usize = 20;
const R_BAD_NOTE: usize = 21;
const R_MISSING: usize = 22;
const R_DATA_BAD: usize = 23;
const R_MSGS: usize = 24;
const R_MSG_BAD: usize = 25;
const R_BARRIER_OK: usize = 26;
const R_ERRORS: usize = 27;
const R_DONE: usize = 28;
const SLOTS: usize = 32;

/// `loop_reset_every` in the reset modes: a reset every 1 to 100 frames.
const RESET_EVERY: u32 = 50;
/// `loop_ring` in the softirq modes: 64 fragments of 4 KiB in flight per connection.
const RING: u32 = 64;
/// The RDMA worker's sockets: the registration's owner on this port, the issuer on the next.
const RDMA_PORT: u16 = 20100;
/// Operations the RDMA worker keeps in flight (one registration slot each).
const RDMA_WINDOW: usize = 32;
/// Bytes each RDMA write moves.
const RDMA_SLOT: usize = 256;

/// How the load test runs: plainly (paired with C RDS) or in a fault mode of rds_rs's test
/// build.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Reset,
    Softirq,
    SoftirqReset,
}

impl Mode {
    fn parse(arg: Option<&str>) -> Result<Self, String> {
        Ok(match arg {
            None => Mode::Plain,
            Some("reset") => Mode::Reset,
            Some("softirq") => Mode::Softirq,
            Some("softirq-reset") => Mode::SoftirqReset,
            Some(m) => return Err(format!("bad mode {m} (reset, softirq or softirq-reset)")),
        })
    }

    /// The prefix of the check names.
    fn prefix(self) -> &'static str {
        match self {
            Mode::Plain => "load_",
            Mode::Reset => "load_reset_",
            Mode::Softirq => "load_softirq_",
            Mode::SoftirqReset => "load_softirq_reset_",
        }
    }

    fn resets(self) -> bool {
        matches!(self, Mode::Reset | Mode::SoftirqReset)
    }

    fn softirq(self) -> bool {
        matches!(self, Mode::Softirq | Mode::SoftirqReset)
    }

    /// Sets the mode's knobs; they go back to 0 when the guards are dropped.
    fn knobs(self) -> Result<Vec<Knob>, String> {
        let mut k = Vec::new();
        if self.softirq() {
            k.push(Knob::set("loop_softirq", 1)?);
            k.push(Knob::set("loop_ring", RING)?);
        }
        if self.resets() {
            k.push(Knob::set("loop_reset_every", RESET_EVERY)?);
        }
        Ok(k)
    }
}

/// Counters in memory shared by the parent and the forked workers.
struct Shared {
    base: *mut libc::c_void,
    len: usize,
}

impl Shared {
    fn new() -> Result<Self, String> {
        let len = SLOTS * 8;
        // SAFETY: an anonymous shared mapping at an address of the kernel's choice touches no
        // existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        Ok(Self { base, len })
    }

    fn at(&self, i: usize) -> &AtomicU64 {
        assert!(i < SLOTS);
        // SAFETY: the mapping is `SLOTS` zero-initialised, 8-byte aligned (page-aligned base)
        // u64s, valid as `AtomicU64`s, mapped for the lifetime of `self`, and only ever
        // accessed atomically (also by the other processes sharing it).
        unsafe { &*(self.base as *const AtomicU64).add(i) }
    }

    fn get(&self, i: usize) -> u64 {
        self.at(i).load(Ordering::SeqCst)
    }

    fn add(&self, i: usize, v: u64) {
        self.at(i).fetch_add(v, Ordering::SeqCst);
    }

    fn sub(&self, i: usize, v: u64) {
        self.at(i).fetch_sub(v, Ordering::SeqCst);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn key(src: usize, dst: usize, seq: u32) -> u64 {
    mix(((src as u64) << 40) ^ ((dst as u64) << 32) ^ u64::from(seq) ^ 0x5eed)
}

/// The length of message `seq` from `src` to `dst`.
fn msg_len(src: usize, dst: usize, seq: u32) -> usize {
    let h = key(src, dst, seq);
    if h.is_multiple_of(100) {
        ((h >> 8) % (MAX_LEN as u64 + 1)) as usize
    } else {
        ((h >> 8) % (16 * 1024 + 1)) as usize
    }
}

fn checksum(body: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut chunks = body.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(17);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    (h ^ u64::from_le_bytes(tail) ^ body.len() as u64).wrapping_mul(0x0000_0100_0000_01b3)
}

/// Writes message `seq` from `src` to `dst` into `buf`; returns its length.
fn build(buf: &mut [u8], src: usize, dst: usize, seq: u32) -> usize {
    let len = msg_len(src, dst, seq);
    let full = len.max(HDR);
    let mut x = key(src, dst, seq) | 1;
    for c in buf[HDR..full].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
    let sum = checksum(&buf[HDR..full][..len.saturating_sub(HDR)]);
    let mut h = [0u8; HDR];
    h[..4].copy_from_slice(&MAGIC.to_be_bytes());
    h[4..6].copy_from_slice(&(src as u16).to_be_bytes());
    h[6..8].copy_from_slice(&(dst as u16).to_be_bytes());
    h[8..12].copy_from_slice(&seq.to_be_bytes());
    h[12..16].copy_from_slice(&(len as u32).to_be_bytes());
    h[16..24].copy_from_slice(&sum.to_be_bytes());
    buf[..HDR].copy_from_slice(&h);
    len
}

/// The header of message `seq` (for checking messages shorter than a header).
fn header(src: usize, dst: usize, seq: u32) -> [u8; HDR] {
    let mut b = vec![0u8; msg_len(src, dst, seq).max(HDR)];
    build(&mut b, src, dst, seq);
    b[..HDR].try_into().expect("header")
}

enum Verdict {
    Ok,
    Dup,
    Reorder(u32),
    Corrupt,
}

/// Checks a message received on `dst` from `src` when `next` is the sequence expected.
fn verify(m: &[u8], src: usize, dst: usize, next: u32) -> Verdict {
    if m.len() < HDR {
        let want_len = msg_len(src, dst, next);
        return if m.len() == want_len && m == &header(src, dst, next)[..want_len] {
            Verdict::Ok
        } else {
            Verdict::Corrupt
        };
    }
    let be32 = |o: usize| u32::from_be_bytes(m[o..o + 4].try_into().expect("4"));
    let be16 = |o: usize| usize::from(u16::from_be_bytes([m[o], m[o + 1]]));
    if be32(0) != MAGIC || be16(4) != src || be16(6) != dst {
        return Verdict::Corrupt;
    }
    let seq = be32(8);
    let len = be32(12) as usize;
    let sum = u64::from_be_bytes(m[16..24].try_into().expect("8"));
    if len != m.len() || len != msg_len(src, dst, seq) || sum != checksum(&m[HDR..]) {
        return Verdict::Corrupt;
    }
    match seq.cmp(&next) {
        std::cmp::Ordering::Equal => Verdict::Ok,
        std::cmp::Ordering::Less => Verdict::Dup,
        std::cmp::Ordering::Greater => Verdict::Reorder(seq),
    }
}

fn addr(id: usize) -> SocketAddr {
    v4([127, 0, 0, 1], BASE_PORT + id as u16)
}

struct Worker<'a> {
    p: usize,
    socks: Vec<RdsSocket>,
    sh: &'a Shared,
    total: u64,
    deadline: Instant,
    /// Next sequence to send, per (own socket, destination).
    tx_seq: Vec<[u32; SOCKS]>,
    /// Next sequence expected, per (own socket, source).
    rx_seq: Vec<[u32; SOCKS]>,
    rng: u64,
    buf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl Worker<'_> {
    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Receives what is queued on every socket (a bounded batch each); returns how many.
    fn receive(&mut self) -> usize {
        let mut n = 0;
        for i in 0..PER_PROC {
            for _ in 0..16 {
                let m = match self.socks[i].recv_msg(&mut self.rbuf, 0, libc::MSG_DONTWAIT) {
                    Ok(m) => m,
                    Err(_) => break,
                };
                n += 1;
                let len = m.len.min(self.rbuf.len());
                self.sh.add(DELIVERED, 1);
                self.sh.add(BYTES_DELIVERED, len as u64);
                self.sh.sub(INFLIGHT_B, len as u64);
                self.sh.sub(INFLIGHT_N, 1);
                let dst = self.p * PER_PROC + i;
                let src = match m.from {
                    Some(SocketAddr::V4(a))
                        if a.ip().octets() == [127, 0, 0, 1]
                            && (BASE_PORT..BASE_PORT + SOCKS as u16).contains(&a.port()) =>
                    {
                        usize::from(a.port() - BASE_PORT)
                    }
                    _ => {
                        self.sh.add(CORRUPT, 1);
                        continue;
                    }
                };
                if m.flags & libc::MSG_TRUNC != 0 {
                    self.sh.add(CORRUPT, 1);
                    continue;
                }
                let next = self.rx_seq[i][src];
                match verify(&self.rbuf[..len], src, dst, next) {
                    Verdict::Ok => self.rx_seq[i][src] = next + 1,
                    Verdict::Dup => self.sh.add(DUP, 1),
                    Verdict::Reorder(seq) => {
                        self.sh.add(REORDER, 1);
                        self.rx_seq[i][src] = seq + 1;
                    }
                    Verdict::Corrupt => {
                        self.sh.add(CORRUPT, 1);
                        self.rx_seq[i][src] = next + 1;
                    }
                }
            }
        }
        n
    }

    fn run(&mut self, quota: u64) -> Result<(), String> {
        let mut sent = 0u64;
        // The pending message: (own socket index, destination, length).
        let mut pending: Option<(usize, usize, usize)> = None;
        let fds: Vec<(i32, i16)> = self
            .socks
            .iter()
            .map(|s| (s.as_raw_fd(), libc::POLLIN))
            .collect();
        loop {
            if Instant::now() > self.deadline {
                return Err("deadline".into());
            }
            let mut progress = self.receive() > 0;
            if pending.is_none() && sent < quota {
                let i = (self.rand() % PER_PROC as u64) as usize;
                let dst = (self.rand() % SOCKS as u64) as usize;
                let src = self.p * PER_PROC + i;
                let seq = self.tx_seq[i][dst];
                let len = build(&mut self.buf, src, dst, seq);
                pending = Some((i, dst, len));
            }
            if let Some((i, dst, len)) = pending {
                let room = self.sh.get(INFLIGHT_B) + len as u64 <= INFLIGHT_BYTES
                    && self.sh.get(INFLIGHT_N) < INFLIGHT_MSGS;
                if room || self.sh.get(INFLIGHT_N) == 0 {
                    self.sh.add(INFLIGHT_B, len as u64);
                    self.sh.add(INFLIGHT_N, 1);
                    match self.socks[i].send_to_flags(
                        &self.buf[..len],
                        &addr(dst),
                        libc::MSG_DONTWAIT,
                    ) {
                        Ok(_) => {
                            self.tx_seq[i][dst] += 1;
                            self.sh.add(SENT, 1);
                            self.sh.add(BYTES_SENT, len as u64);
                            sent += 1;
                            pending = None;
                            progress = true;
                        }
                        Err(e) => {
                            self.sh.sub(INFLIGHT_B, len as u64);
                            self.sh.sub(INFLIGHT_N, 1);
                            match e.raw_os_error() {
                                Some(libc::ENOBUFS) => self.sh.add(ENOBUFS_SEEN, 1),
                                Some(libc::EAGAIN) => {}
                                _ => {
                                    eprintln!("load: send: {}", err_name(&e));
                                    self.sh.add(SEND_ERRORS, 1);
                                    self.tx_seq[i][dst] += 1;
                                    sent += 1;
                                    pending = None;
                                }
                            }
                        }
                    }
                }
            }
            if sent == quota
                && pending.is_none()
                && self.sh.get(DELIVERED) + self.sh.get(SEND_ERRORS) >= self.total
            {
                return Ok(());
            }
            if !progress {
                let wait = if pending.is_some() { 2 } else { 20 };
                let _ = poll_fds(&fds, Duration::from_millis(wait));
            }
        }
    }
}

/// The worker process: sets up its sockets, waits for all to be ready, runs, reports,
/// and waits for the parent's release before closing its sockets.
fn child(p: usize, sh: &Shared, total: u64, deadline: Instant) -> i32 {
    let mut socks = Vec::new();
    for i in 0..PER_PROC {
        let s = match RdsSocket::new() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("load: socket: {e}");
                sh.add(SETUP_ERRORS, 1);
                return 3;
            }
        };
        let setup = s
            .bind(addr(p * PER_PROC + i))
            .and_then(|_| s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 1 << 20))
            .and_then(|_| s.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 1 << 20));
        if let Err(e) = setup {
            eprintln!("load: socket {} setup: {e}", p * PER_PROC + i);
            sh.add(SETUP_ERRORS, 1);
            return 3;
        }
        socks.push(s);
    }
    sh.add(READY, 1);
    while sh.get(READY) < PROCS as u64 {
        if Instant::now() > deadline || sh.get(SETUP_ERRORS) > 0 {
            return 4;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let quota = total / PROCS as u64 + u64::from((p as u64) < total % PROCS as u64);
    let mut w = Worker {
        p,
        socks,
        sh,
        total,
        deadline,
        tx_seq: vec![[0; SOCKS]; PER_PROC],
        rx_seq: vec![[0; SOCKS]; PER_PROC],
        rng: mix(p as u64 + 1) | 1,
        buf: vec![0u8; MAX_LEN.max(HDR)],
        rbuf: vec![0u8; MAX_LEN + 1],
    };
    let res = w.run(quota);
    sh.add(FINISHED, 1);
    if let Err(e) = &res {
        eprintln!("load: worker {p}: {e}");
    }
    // Once every worker is done (everything delivered), every socket's sends are settled:
    // POLLOUT, with the send buffer shrunk to the minimum (SO_SNDBUF 0: the kernel's
    // SOCK_MIN_SNDBUF). A sender is settled just after its message is delivered, so allow a
    // moment.
    while sh.get(FINISHED) < PROCS as u64 && Instant::now() < deadline + Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for s in &w.socks {
        let shrunk = s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, 0).is_ok();
        let out = s
            .poll(libc::POLLOUT, Duration::from_secs(2))
            .is_ok_and(|ev| ev & libc::POLLOUT != 0);
        if !(shrunk && out) {
            sh.add(NO_POLLOUT, 1);
        }
    }
    sh.add(CHECKED, 1);
    // Keep the sockets open until the parent has looked at the queues and counters.
    while sh.get(RELEASE) == 0 && Instant::now() < deadline + Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(w);
    if res.is_ok() {
        0
    } else {
        5
    }
}

/// The data RDMA write `n` of the RDMA worker carries.
fn rdma_data(n: u64) -> Vec<u8> {
    pattern(RDMA_SLOT, 0x4c52_0000_0000 ^ n)
}

/// The RDMA worker of the fault modes: see [`rdma_run`]. Reports in the `R_*` slots.
fn rdma_child(sh: &Shared, deadline: Instant) -> i32 {
    let res = rdma_run(sh, deadline);
    if let Err(e) = &res {
        eprintln!("load: rdma worker: {e}");
        sh.add(R_ERRORS, 1);
    }
    sh.add(R_DONE, 1);
    if res.is_ok() {
        0
    } else {
        5
    }
}

/// While the other workers run, writes into a registration of its own owner socket from its
/// issuer socket, at most one operation a millisecond and [`RDMA_WINDOW`] in flight (each into
/// its own slot of the registration), each with `RDS_RDMA_NOTIFY_ME` and its number as the
/// token; checks each notification as it comes (exactly one per operation; `SUCCESS`: the
/// slot holds the operation's data; `DROPPED`: the slot holds what it held before) and counts
/// the 0-byte messages the successful ones deliver to the owner. Then waits for what is still
/// in flight and asks the barrier for the last operation's id.
fn rdma_run(sh: &Shared, deadline: Instant) -> Result<(), String> {
    let owner_addr = v4([127, 0, 0, 1], RDMA_PORT);
    let issuer_addr = v4([127, 0, 0, 1], RDMA_PORT + 1);
    let socket = |a: SocketAddr| -> Result<RdsSocket, String> {
        let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
        s.bind(a)
            .and_then(|_| s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 4 << 20))
            .and_then(|_| s.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4 << 20))
            .map_err(|e| format!("socket {a} setup: {e}"))?;
        Ok(s)
    };
    let owner = socket(owner_addr)?;
    let issuer = socket(issuer_addr)?;
    let size = RDMA_WINDOW * RDMA_SLOT;
    let target = RdmaMem::new(size).map_err(|e| format!("mmap: {e}"))?;
    let source = RdmaMem::new(size).map_err(|e| format!("mmap: {e}"))?;
    let cookie = owner
        .get_mr(target.at(0), size as u64, RDS_RDMA_READWRITE)
        .map_err(|e| format!("GET_MR: {e}"))?;
    // What each slot of the target holds: the data of the last operation that succeeded there
    // (zeros before any).
    let mut holds: Vec<Option<u64>> = vec![None; RDMA_WINDOW];
    let mut free: Vec<usize> = (0..RDMA_WINDOW).rev().collect();
    // In flight: token → slot.
    let mut flight: std::collections::BTreeMap<u64, usize> = Default::default();
    let (mut next, mut last_id) = (0u64, 0u64);
    let mut buf = [0u8; 64];
    let fds = [
        (issuer.as_raw_fd(), libc::POLLIN),
        (owner.as_raw_fd(), libc::POLLIN),
    ];
    while sh.get(READY) < PROCS as u64 {
        if Instant::now() > deadline || sh.get(SETUP_ERRORS) > 0 {
            return Err("the workers never got ready".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Takes the notifications and messages that are there; returns whether there were any.
    let mut collect = |flight: &mut std::collections::BTreeMap<u64, usize>,
                       free: &mut Vec<usize>|
     -> Result<bool, String> {
        let mut any = false;
        while let Some((len, _, notes)) = recv_notes(&issuer, 16)? {
            any = true;
            if notes.is_empty() || len > 0 {
                sh.add(R_MSG_BAD, 1);
            }
            for n in notes {
                let Some(slot) = flight.remove(&n.user_token) else {
                    // Not in flight: a second notification, or one never asked for.
                    sh.add(R_BAD_NOTE, 1);
                    continue;
                };
                let got = target.read(slot * RDMA_SLOT, RDMA_SLOT);
                match n.status {
                    RDS_RDMA_SUCCESS => {
                        sh.add(R_OK, 1);
                        if got != rdma_data(n.user_token) {
                            sh.add(R_DATA_BAD, 1);
                        }
                        holds[slot] = Some(n.user_token);
                    }
                    RDS_RDMA_DROPPED => {
                        sh.add(R_DROPPED, 1);
                        let before = holds[slot].map_or_else(|| vec![0; RDMA_SLOT], rdma_data);
                        if got != before {
                            sh.add(R_DATA_BAD, 1);
                        }
                    }
                    _ => sh.add(R_BAD_NOTE, 1),
                }
                free.push(slot);
            }
        }
        while let Ok(n) = owner.recv(&mut buf, libc::MSG_DONTWAIT) {
            any = true;
            sh.add(if n == 0 { R_MSGS } else { R_MSG_BAD }, 1);
        }
        Ok(any)
    };
    let mut last_issue = Instant::now();
    while sh.get(FINISHED) < PROCS as u64 && Instant::now() < deadline {
        let mut progress = collect(&mut flight, &mut free)?;
        if last_issue.elapsed() >= Duration::from_millis(1) {
            if let Some(slot) = free.pop() {
                let data = rdma_data(next);
                source.write(slot * RDMA_SLOT, &data);
                let op = Op {
                    cookie,
                    remote_addr: (slot * RDMA_SLOT) as u64,
                    remote_bytes: RDMA_SLOT as u64,
                    local: vec![RdsIovec {
                        addr: source.at(slot * RDMA_SLOT),
                        bytes: RDMA_SLOT as u64,
                    }],
                    flags: RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE,
                    token: next,
                };
                let mut id = 0u64;
                match rdma_op(
                    &issuer,
                    &owner_addr,
                    &op,
                    b"",
                    Some(&mut id),
                    libc::MSG_DONTWAIT,
                ) {
                    Ok(_) => {
                        flight.insert(next, slot);
                        last_id = last_id.max(id);
                        sh.add(R_OPS, 1);
                        next += 1;
                        progress = true;
                        last_issue = Instant::now();
                    }
                    Err(e) => {
                        free.push(slot);
                        if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS)) {
                            eprintln!("load: rdma worker: sendmsg: {}", err_name(&e));
                            sh.add(R_ERRORS, 1);
                            next += 1;
                        }
                    }
                }
            }
        }
        if !progress {
            let _ = poll_fds(&fds, Duration::from_millis(1));
        }
    }
    // What is still in flight completes (or is dropped) within a bound.
    let t0 = Instant::now();
    while !flight.is_empty() && t0.elapsed() < Duration::from_secs(30) {
        if !collect(&mut flight, &mut free)? {
            let _ = poll_fds(&fds, Duration::from_millis(20));
        }
    }
    sh.add(R_MISSING, flight.len() as u64);
    let _ = issuer.set_recv_timeout(Some(Duration::from_secs(10)));
    let (res, mark) = issuer.barrier(&owner_addr, last_id, 0);
    if res.is_ok() && mark != u64::MAX && mark >= last_id {
        sh.add(R_BARRIER_OK, 1);
    } else {
        eprintln!("load: rdma worker: barrier for {last_id}: {res:?} mark {mark}");
    }
    // The messages of the last successful operations may still be on their way.
    let t0 = Instant::now();
    while sh.get(R_MSGS) < sh.get(R_OK) && t0.elapsed() < Duration::from_secs(5) {
        if !collect(&mut flight, &mut free)? {
            let _ = poll_fds(&fds, Duration::from_millis(20));
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    collect(&mut flight, &mut free)?;
    let _ = owner.free_mr(cookie, 0);
    Ok(())
}

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let total: u64 = match args.first() {
        Some(n) => n.parse().map_err(|_| format!("bad message count {n}"))?,
        None => 100_000,
    };
    let limit = match args.get(1) {
        Some(n) => Duration::from_secs(n.parse().map_err(|_| format!("bad timeout {n}"))?),
        None => Duration::from_secs(1200),
    };
    let mode = Mode::parse(args.get(2).copied())?;
    let name = |base: &str| format!("{}{base}", mode.prefix());
    let sh = Shared::new()?;
    let probe = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    let before = Counters::take(&probe)?;
    // The fault mode's knobs, set back to 0 when this returns (also early, on an error).
    let knobs = mode.knobs()?;
    let start = Instant::now();
    let deadline = start + limit;
    let _ = std::io::stdout().flush();
    let mut pids = Vec::new();
    // The workers, and the RDMA worker in a fault mode.
    let procs = if mode == Mode::Plain {
        PROCS
    } else {
        PROCS + 1
    };
    for p in 0..procs {
        // SAFETY: the process is single-threaded here; the child only runs `child` or
        // `rdma_child` (which allocate, make system calls and touch the shared mapping) and
        // leaves with `_exit`, never returning into the parent's code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            let code = if p < PROCS {
                child(p, &sh, total, deadline)
            } else {
                rdma_child(&sh, deadline)
            };
            // SAFETY: ends the child without running the parent's destructors or atexit code.
            unsafe { libc::_exit(code) };
        }
        pids.push(pid);
    }
    // Wait for every worker to finish its part (or the deadline).
    while sh.get(FINISHED) < PROCS as u64
        && Instant::now() < deadline + Duration::from_secs(5)
        && sh.get(SETUP_ERRORS) == 0
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = start.elapsed();
    let in_time = sh.get(FINISHED) == PROCS as u64 && elapsed <= limit;
    // And for every worker's send-side check.
    while sh.get(CHECKED) < sh.get(FINISHED) && Instant::now() < deadline + Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    // And for the RDMA worker's end.
    while mode != Mode::Plain
        && sh.get(R_DONE) == 0
        && Instant::now() < deadline + Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // Before any socket closes: nothing queued, and the accounting balanced.
    let ours = |lport: u16| (BASE_PORT..BASE_PORT + SOCKS as u16).contains(&lport);
    let on_queue = |opt: i32| {
        probe
            .messages(opt)
            .map(|l| l.iter().filter(|m| ours(m.lport)).count().to_string())
            .unwrap_or_else(|e| err_name(&e))
    };
    let queued = on_queue(RDS_INFO_RECV_MESSAGES);
    let send_queued = on_queue(RDS_INFO_SEND_MESSAGES);
    let retrans_queued = on_queue(RDS_INFO_RETRANS_MESSAGES);
    let checked = sh.get(CHECKED);
    let after = Counters::take(&probe)?;
    let added = after.delta(&before, "recv_bytes_added_to_sock");
    let freed = after.delta(&before, "recv_bytes_freed_fromsock");
    sh.add(RELEASE, 1);
    drop(knobs);
    let mut clean = 0;
    for pid in &pids {
        let mut status = 0;
        let t0 = Instant::now();
        loop {
            // SAFETY: `status` is valid for writes; `pid` is our child.
            let w = unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
            if w == *pid {
                if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                    clean += 1;
                }
                break;
            }
            if w < 0 || t0.elapsed() > Duration::from_secs(90) {
                // SAFETY: `pid` is our own child, still running; ends it.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
                // SAFETY: reaps it.
                unsafe { libc::waitpid(*pid, &mut status, 0) };
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let delivered = sh.get(DELIVERED);
    let sent = sh.get(SENT);
    let lost = sent.saturating_sub(delivered.saturating_sub(sh.get(DUP)));
    println!(
        "# load: {total} messages, {:.1}s, {} bytes, {} ENOBUFS retries",
        elapsed.as_secs_f64(),
        sh.get(BYTES_SENT),
        sh.get(ENOBUFS_SEEN)
    );
    r.check(
        &name("finished_in_time"),
        &format!("{in_time}"),
        if in_time {
            Ok(())
        } else {
            Err(format!(
                "{} of {PROCS} workers finished within {limit:?} ({delivered} of {total} delivered)",
                sh.get(FINISHED)
            ))
        },
    );
    r.expect(
        &name("messages"),
        &format!(
            "lost={lost} dup={} reorder={} corrupt={} delivered={delivered}",
            sh.get(DUP),
            sh.get(REORDER),
            sh.get(CORRUPT)
        ),
        &format!("lost=0 dup=0 reorder=0 corrupt=0 delivered={total}"),
    );
    r.expect(
        &name("send_errors"),
        &format!(
            "errors={} setup_errors={}",
            sh.get(SEND_ERRORS),
            sh.get(SETUP_ERRORS)
        ),
        "errors=0 setup_errors=0",
    );
    let bytes = sh.get(BYTES_SENT);
    r.expect(
        &name("payload"),
        &format!(
            "bytes_delivered_equal_sent={}",
            sh.get(BYTES_DELIVERED) == bytes
        ),
        "bytes_delivered_equal_sent=true",
    );
    println!("# load: payload {bytes} bytes");
    r.expect(
        &name("recv_queues_empty"),
        &format!("queued={queued}"),
        "queued=0",
    );
    r.expect(
        &name("send_queues_empty"),
        &format!("send={send_queued} retrans={retrans_queued}"),
        "send=0 retrans=0",
    );
    r.expect(
        &name("sndbuf_settled"),
        &format!("checked={checked} without_pollout={}", sh.get(NO_POLLOUT)),
        &format!("checked={PROCS} without_pollout=0"),
    );
    r.expect(
        &name("rcvbuf_accounting"),
        &format!(
            "added_equals_freed={} equals_payload={}",
            added.is_some() && added == freed,
            added == Some(i128::from(bytes))
        ),
        "added_equals_freed=true equals_payload=true",
    );
    r.expect(
        &name("workers_exit"),
        &format!("clean={clean}"),
        &format!("clean={procs}"),
    );
    let left = probe
        .sockets(false)
        .map(|l| {
            l.iter()
                .filter(|s| ours(s.bound.port()))
                .count()
                .to_string()
        })
        .unwrap_or_else(|e| err_name(&e));
    r.expect(&name("sockets_closed"), &format!("left={left}"), "left=0");
    if mode != Mode::Plain {
        fault_checks(r, mode, &sh, &after, &before);
    }
    Ok(())
}

/// The checks of a fault mode: resets as the mode has them, and the RDMA worker's results.
fn fault_checks(r: &mut Report, mode: Mode, sh: &Shared, after: &Counters, before: &Counters) {
    let name = |base: &str| format!("{}{base}", mode.prefix());
    let resets = after.delta(before, Stat::ConnReset.name());
    let obs = format!(
        "conn_reset={} retransmitted={} old_seq_dropped={} op_dropped={}",
        after.delta_obs(before, Stat::ConnReset.name()),
        after.delta_obs(before, Stat::RsSendRetransmitted.name()),
        after.delta_obs(before, Stat::RecvDropOldSeq.name()),
        after.delta_obs(before, Stat::RsSendOpDropped.name())
    );
    println!("# load: {obs}");
    r.check(
        &name("resets"),
        &obs,
        match (mode.resets(), resets) {
            (true, Some(n)) if n > 0 => Ok(()),
            (false, Some(0)) => Ok(()),
            (true, _) => Err(format!("loop_reset_every {RESET_EVERY} resets connections")),
            (false, _) => Err("nothing resets a connection in this mode".into()),
        },
    );
    let (ops, ok, dropped) = (sh.get(R_OPS), sh.get(R_OK), sh.get(R_DROPPED));
    println!("# load: RDMA worker: {ops} writes, {ok} SUCCESS, {dropped} DROPPED");
    r.check(
        &name("rdma_ops"),
        &format!("ops={ops} success={ok} dropped={dropped}"),
        if ops == 0 {
            Err("the RDMA worker issued no operation".into())
        } else if !mode.resets() && dropped > 0 {
            Err("an operation was dropped without a reset".into())
        } else {
            Ok(())
        },
    );
    r.expect(
        &name("rdma_notified_once"),
        &format!(
            "reported={} missing={} bad_notes={} errors={} done={}",
            ok + dropped == ops,
            sh.get(R_MISSING),
            sh.get(R_BAD_NOTE),
            sh.get(R_ERRORS),
            sh.get(R_DONE)
        ),
        "reported=true missing=0 bad_notes=0 errors=0 done=1",
    );
    r.expect(
        &name("rdma_data"),
        &format!("wrong={}", sh.get(R_DATA_BAD)),
        "wrong=0",
    );
    r.expect(
        &name("rdma_messages"),
        &format!(
            "delivered_equals_success={} stray={}",
            sh.get(R_MSGS) == ok,
            sh.get(R_MSG_BAD)
        ),
        "delivered_equals_success=true stray=0",
    );
    r.expect(
        &name("rdma_barrier"),
        &format!("reached={}", sh.get(R_BARRIER_OK) == 1),
        "reached=true",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_verify() {
        let mut buf = vec![0u8; MAX_LEN.max(HDR)];
        for seq in 0..2000 {
            let len = build(&mut buf, 3, 17, seq);
            assert!(len <= MAX_LEN);
            assert!(matches!(verify(&buf[..len], 3, 17, seq), Verdict::Ok));
            if len > HDR {
                buf[len - 1] ^= 1;
                assert!(matches!(verify(&buf[..len], 3, 17, seq), Verdict::Corrupt));
            }
        }
        let len = build(&mut buf, 1, 2, 5);
        assert!(matches!(
            verify(&buf[..len], 1, 2, 6),
            Verdict::Dup | Verdict::Corrupt
        ));
    }
}
