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

use crate::util::{err_name, v4, Counters};
use crate::Report;
use librds::info::{RDS_INFO_RECV_MESSAGES, RDS_INFO_RETRANS_MESSAGES, RDS_INFO_SEND_MESSAGES};
use librds::{poll_fds, RdsSocket};
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
const SLOTS: usize = 18;

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

pub(crate) fn run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let total: u64 = match args.first() {
        Some(n) => n.parse().map_err(|_| format!("bad message count {n}"))?,
        None => 100_000,
    };
    let limit = match args.get(1) {
        Some(n) => Duration::from_secs(n.parse().map_err(|_| format!("bad timeout {n}"))?),
        None => Duration::from_secs(1200),
    };
    let sh = Shared::new()?;
    let probe = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    let before = Counters::take(&probe)?;
    let start = Instant::now();
    let deadline = start + limit;
    let _ = std::io::stdout().flush();
    let mut pids = Vec::new();
    for p in 0..PROCS {
        // SAFETY: the process is single-threaded here; the child only runs `child` (which
        // allocates, makes system calls and touches the shared mapping) and leaves with
        // `_exit`, never returning into the parent's code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            let code = child(p, &sh, total, deadline);
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
        "load_finished_in_time",
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
        "load_messages",
        &format!(
            "lost={lost} dup={} reorder={} corrupt={} delivered={delivered}",
            sh.get(DUP),
            sh.get(REORDER),
            sh.get(CORRUPT)
        ),
        &format!("lost=0 dup=0 reorder=0 corrupt=0 delivered={total}"),
    );
    r.expect(
        "load_send_errors",
        &format!(
            "errors={} setup_errors={}",
            sh.get(SEND_ERRORS),
            sh.get(SETUP_ERRORS)
        ),
        "errors=0 setup_errors=0",
    );
    let bytes = sh.get(BYTES_SENT);
    r.expect(
        "load_payload",
        &format!(
            "bytes_delivered_equal_sent={}",
            sh.get(BYTES_DELIVERED) == bytes
        ),
        "bytes_delivered_equal_sent=true",
    );
    println!("# load: payload {bytes} bytes");
    r.expect(
        "load_recv_queues_empty",
        &format!("queued={queued}"),
        "queued=0",
    );
    r.expect(
        "load_send_queues_empty",
        &format!("send={send_queued} retrans={retrans_queued}"),
        "send=0 retrans=0",
    );
    r.expect(
        "load_sndbuf_settled",
        &format!("checked={checked} without_pollout={}", sh.get(NO_POLLOUT)),
        &format!("checked={PROCS} without_pollout=0"),
    );
    r.expect(
        "load_rcvbuf_accounting",
        &format!(
            "added_equals_freed={} equals_payload={}",
            added.is_some() && added == freed,
            added == Some(i128::from(bytes))
        ),
        "added_equals_freed=true equals_payload=true",
    );
    r.expect(
        "load_workers_exit",
        &format!("clean={clean}"),
        &format!("clean={PROCS}"),
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
    r.expect("load_sockets_closed", &format!("left={left}"), "left=0");
    Ok(())
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
