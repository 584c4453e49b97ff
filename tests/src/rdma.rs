//! RDMA over loopback (rds_rs only: C's loopback transport has no RDMA; an rds-rs extension,
//! `Documentation/rdma.md`). Results go to the unpaired file `rdma-rs.tap`.
//!
//! A client socket registers memory and a server socket moves data into and out of it with
//! `RDS_CMSG_RDMA_ARGS` and the atomics, in the same process: the cookie is handed over
//! directly, or as `RDS_CMSG_RDMA_DEST` (`RDS_GET_MR` vs `RDS_CMSG_RDMA_MAP`). Every transfer
//! is verified byte by byte, guard bytes around it included. This file has the transfers,
//! atomics, registrations (use-once, invalidate, flush), notifications and `poll`;
//! `rdma_barrier.rs` the barrier, cancel and close with operations in flight (through the
//! `loop_hold` test hook of rds_rs), `rdma_bad.rs` bad input.
//!
//! Ports 4600-4669 on 127.0.0.1, 127.0.0.2 and ::1. Observations are errno names, notification
//! statuses and tokens, values and `ok`/`bad` verdicts of content checks.

use crate::util::{
    arrival_bound, bound, err_name, pattern, res_obs, v4, v6_lo, wait_msg, Counters,
};
use crate::Report;
use librds::rdma::{
    status_name, RDS_RDMA_INVALIDATE, RDS_RDMA_NOTIFY_ME, RDS_RDMA_READWRITE, RDS_RDMA_SILENT,
    RDS_RDMA_USE_ONCE,
};
use librds::{
    AtomicArgs, AtomicOp, ControlBuf, GetMrArgs, RdmaArgs, RdmaMem, RdmaNotify, RdsIovec, RdsSocket,
};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The loopback hold hook of rds_rs.
pub(crate) const LOOP_HOLD: &str = "/sys/kernel/debug/rds_rs/loop_hold";

pub(crate) const LO: [u8; 4] = [127, 0, 0, 1];

/// Holds loopback delivery (`loop_hold` = 1) while it lives; writes 0 when dropped.
pub(crate) struct Hold(());

impl Hold {
    /// Sets `loop_hold` to 1.
    pub(crate) fn on() -> Result<Self, String> {
        std::fs::write(LOOP_HOLD, "1").map_err(|e| format!("writing {LOOP_HOLD}: {e}"))?;
        Ok(Self(()))
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(LOOP_HOLD, "0") {
            eprintln!("rds-tests: could not reset {LOOP_HOLD}: {e}");
        }
    }
}

/// `VmPin` of this process in kB: rds_rs charges registrations to the pinned memory of the
/// socket's creator (its `RLIMIT_MEMLOCK` account and its mm's `pinned_vm`, as io_uring
/// does), so this shows the registrations of sockets this process created (the tests pin
/// nothing else).
pub(crate) fn vmpin_kb() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmPin:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(-1)
}

/// [`vmpin_kb`] above `base` once the registrations freed before have let go of their pages:
/// at once over loopback and IB/RoCE; over iWARP rds_rs unpins a freed registration's pages
/// after its device's next fence round, which `RDS_FREE_MR` does not wait for
/// (`Documentation/rdma.md`), so this waits up to 5 s for the count to come back to `base`.
pub(crate) fn vmpin_after_free(base: i64) -> i64 {
    let t0 = Instant::now();
    loop {
        let d = vmpin_kb() - base;
        if d <= 0 || t0.elapsed() > Duration::from_secs(5) {
            return d;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `f` on a new thread whose effective capabilities lack `CAP_IPC_LOCK` (capabilities
/// are per thread), so that `RLIMIT_MEMLOCK` applies to it.
pub(crate) fn without_cap_ipc_lock<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const CAP_IPC_LOCK: u32 = 14;
    std::thread::scope(|sc| {
        sc.spawn(|| {
            // _LINUX_CAPABILITY_VERSION_3, the calling thread.
            let mut h = Header {
                version: 0x2008_0522,
                pid: 0,
            };
            let mut d = [Data::default(); 2];
            // SAFETY: capget reads the header and writes two `Data` (version 3).
            if unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) } != 0 {
                return Err(format!("capget: {}", io::Error::last_os_error()));
            }
            d[0].effective &= !(1 << CAP_IPC_LOCK);
            // SAFETY: capset reads the header and two `Data`; it changes this thread only.
            if unsafe { libc::syscall(libc::SYS_capset, &h, d.as_ptr()) } != 0 {
                return Err(format!("capset: {}", io::Error::last_os_error()));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| "thread panicked".to_string())?
    })
}

/// Sets the soft `RLIMIT_MEMLOCK` of the process (bytes) and returns the old soft limit.
pub(crate) fn set_memlock(cur: u64) -> Result<u64, String> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is valid for writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) } != 0 {
        return Err(format!("getrlimit: {}", io::Error::last_os_error()));
    }
    let old = rl.rlim_cur;
    rl.rlim_cur = cur.min(rl.rlim_max);
    // SAFETY: `rl` is a valid `rlimit`.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rl) } != 0 {
        return Err(format!("setrlimit: {}", io::Error::last_os_error()));
    }
    Ok(old)
}

/// A socket bound to `addr` with large send and receive buffers.
pub(crate) fn big(addr: SocketAddr) -> Result<RdsSocket, String> {
    let s = bound(addr)?;
    s.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20)
        .and_then(|_| s.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20))
        .map_err(|e| format!("SO_*BUFFORCE: {e}"))?;
    Ok(s)
}

/// Sends `payload` to `dest` with the control messages `ctl`.
pub(crate) fn send_ctl(
    s: &RdsSocket,
    dest: &SocketAddr,
    payload: &[u8],
    ctl: &ControlBuf,
    flags: i32,
) -> io::Result<usize> {
    s.send_msg(&[payload], Some(dest), ctl.as_bytes(), flags)
}

/// An RDMA operation's parameters for [`rdma_op`].
#[derive(Clone, Debug)]
pub(crate) struct Op {
    pub(crate) cookie: u64,
    pub(crate) remote_addr: u64,
    pub(crate) remote_bytes: u64,
    pub(crate) local: Vec<RdsIovec>,
    pub(crate) flags: u64,
    pub(crate) token: u64,
}

/// Sends an RDMA operation to `dest` with `payload`, the local iovecs encoded in a buffer that
/// lives across the call; `id` receives the operation's id (`RDS_CMSG_RDMA_ID`) when given.
pub(crate) fn rdma_op(
    s: &RdsSocket,
    dest: &SocketAddr,
    op: &Op,
    payload: &[u8],
    id: Option<&mut u64>,
    flags: i32,
) -> io::Result<usize> {
    let iovs = librds::rdma::encode_iovecs(&op.local);
    let mut c = ControlBuf::new();
    c.rdma_args(&RdmaArgs {
        cookie: op.cookie,
        remote: RdsIovec {
            addr: op.remote_addr,
            bytes: op.remote_bytes,
        },
        local_vec_addr: iovs.as_ptr() as u64,
        nr_local: op.local.len() as u64,
        flags: op.flags,
        user_token: op.token,
    });
    if let Some(id) = id {
        c.rdma_id(id as *mut u64 as u64);
    }
    send_ctl(s, dest, payload, &c, flags)
}

/// Sends an atomic operation to `dest` with `payload`.
pub(crate) fn atomic_op(
    s: &RdsSocket,
    dest: &SocketAddr,
    a: &AtomicArgs,
    payload: &[u8],
    id: Option<&mut u64>,
) -> io::Result<usize> {
    let mut c = ControlBuf::new();
    c.atomic(a);
    if let Some(id) = id {
        c.rdma_id(id as *mut u64 as u64);
    }
    send_ctl(s, dest, payload, &c, 0)
}

/// One notification-or-message from `recvmsg` without waiting, with room for `room`
/// notifications: `Ok(None)` when nothing is pending.
pub(crate) fn recv_notes(
    s: &RdsSocket,
    room: usize,
) -> Result<Option<(usize, i32, Vec<RdmaNotify>)>, String> {
    let mut buf = [0u8; 256];
    let cap = librds::cmsg::cmsg_space(16) * room;
    match s.recv_msg(&mut buf, cap, libc::MSG_DONTWAIT) {
        Ok(m) => Ok(Some((
            m.len,
            m.flags,
            m.cmsgs.iter().filter_map(|c| c.rdma_status()).collect(),
        ))),
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(None),
        Err(e) => Err(format!("recvmsg: {}", err_name(&e))),
    }
}

/// Collects notifications until `n` arrived or [`arrival_bound`] passed; a data message on the way
/// is counted as `other`.
pub(crate) fn wait_notes(s: &RdsSocket, n: usize) -> (Vec<RdmaNotify>, usize) {
    wait_notes_within(s, n, arrival_bound())
}

/// [`wait_notes`] with its own bound, for operations that may take longer than [`arrival_bound`]
/// on a busy host (megabytes over a soft RDMA device).
pub(crate) fn wait_notes_within(
    s: &RdsSocket,
    n: usize,
    bound: Duration,
) -> (Vec<RdmaNotify>, usize) {
    let t0 = Instant::now();
    let mut notes = Vec::new();
    let mut other = 0;
    while notes.len() < n {
        match recv_notes(s, 16) {
            Ok(Some((len, _, v))) => {
                if v.is_empty() || len > 0 {
                    other += 1;
                }
                notes.extend(v);
            }
            Ok(None) => {
                let left = bound.saturating_sub(t0.elapsed());
                if left.is_zero() {
                    break;
                }
                let _ = s.poll(libc::POLLIN, left.min(Duration::from_millis(100)));
            }
            Err(_) => break,
        }
    }
    (notes, other)
}

/// `STATUS#token,...` of notifications.
pub(crate) fn notes_obs(v: &[RdmaNotify]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|n| format!("{}#{}", status_name(n.status), n.user_token))
        .collect::<Vec<_>>()
        .join(",")
}

/// Waits for exactly one notification and describes it (`STATUS#token`, `none`, or more).
pub(crate) fn one_note(s: &RdsSocket) -> String {
    let (v, other) = wait_notes(s, 1);
    let mut o = notes_obs(&v);
    if other > 0 {
        o.push_str(&format!("+{other}msgs"));
    }
    o
}

/// What is left on the two sockets (drained): `""` when nothing, else ` leftover=...`.
/// Messages on the client (which registers) and notifications or messages on the server.
pub(crate) fn leftovers(c: &RdsSocket, s: &RdsSocket) -> String {
    let mut cn = 0;
    let mut buf = vec![0u8; 1 << 20];
    while c.recv(&mut buf, libc::MSG_DONTWAIT).is_ok() {
        cn += 1;
    }
    let mut sn = Vec::new();
    let mut smsgs = 0;
    while let Ok(Some((len, _, v))) = recv_notes(s, 16) {
        if v.is_empty() || len > 0 {
            smsgs += 1;
        }
        sn.extend(v);
    }
    if cn == 0 && sn.is_empty() && smsgs == 0 {
        String::new()
    } else {
        format!(
            " leftover=client_msgs{cn},server_msgs{smsgs},notes{}",
            notes_obs(&sn)
        )
    }
}

/// Receives one message on `c` within [`arrival_bound`]: its payload and RDMA_DEST cookie.
pub(crate) fn recv_msg(c: &RdsSocket) -> Result<(Vec<u8>, Option<u64>), String> {
    if !wait_msg(c) {
        return Err("no message".into());
    }
    let mut buf = vec![0u8; 1 << 20];
    let m = c
        .recv_msg(&mut buf, 256, libc::MSG_DONTWAIT)
        .map_err(|e| format!("recv: {}", err_name(&e)))?;
    buf.truncate(m.len);
    Ok((buf, m.cmsgs.iter().find_map(|c| c.rdma_dest())))
}

/// The payload of the next message on `c` as text, or `none` / the error.
pub(crate) fn got(c: &RdsSocket) -> String {
    match recv_msg(c) {
        Ok((p, _)) => format!("got={}", String::from_utf8_lossy(&p)),
        Err(e) => e.replace(' ', "_"),
    }
}

/// Whether nothing arrives on `c` within `d` (does not consume notifications; `c` must not
/// have any).
pub(crate) fn silent_for(c: &RdsSocket, d: Duration) -> bool {
    !crate::util::wait_msg_for(c, d)
}

/// `nothing` when nothing arrives at `c` within `d`, else `other` (what arrived is left for
/// the caller).
pub(crate) fn nothing_or(c: &RdsSocket, d: Duration, other: &'static str) -> &'static str {
    if silent_for(c, d) {
        "nothing"
    } else {
        other
    }
}

/// `ok` when `got == want`, else where they first differ.
pub(crate) fn same(got: &[u8], want: &[u8]) -> String {
    if got == want {
        return "ok".into();
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    format!("bad@{}", at.unwrap_or(got.len().min(want.len())))
}

/// `n` iovecs over `size` bytes of `mem` from offset `start`, each separated from the next by
/// `gap` bytes (odd offsets, spanning pages). Returns them and the offsets of the segments.
pub(crate) fn layout(
    mem: &RdmaMem,
    start: usize,
    size: usize,
    n: usize,
    gap: usize,
) -> (Vec<RdsIovec>, Vec<(usize, usize)>) {
    let mut iovs = Vec::new();
    let mut segs = Vec::new();
    let mut off = start;
    for i in 0..n {
        let len = size / n + usize::from(i < size % n);
        iovs.push(RdsIovec {
            addr: mem.at(off),
            bytes: len as u64,
        });
        segs.push((off, len));
        off += len + gap;
    }
    (iovs, segs)
}

/// The client (registers memory) and server (issues operations) of most checks.
pub(crate) struct Env {
    pub(crate) c: RdsSocket,
    pub(crate) s: RdsSocket,
    pub(crate) ca: SocketAddr,
    pub(crate) sa: SocketAddr,
    pub(crate) token: u64,
}

impl Env {
    pub(crate) fn new(ca: SocketAddr, sa: SocketAddr) -> Result<Self, String> {
        Ok(Self {
            c: big(ca)?,
            s: big(sa)?,
            ca,
            sa,
            token: 1000,
        })
    }

    /// A fresh user token.
    pub(crate) fn tok(&mut self) -> u64 {
        self.token += 1;
        self.token
    }
}

pub(crate) fn run(r: &mut Report) -> Result<(), String> {
    // Whatever an earlier run left, delivery is not held.
    let _ = std::fs::write(LOOP_HOLD, "0");
    r.expect(
        "loop_hold_hook",
        if std::path::Path::new(LOOP_HOLD).exists() {
            "present"
        } else {
            "missing"
        },
        "present",
    );
    let lck0 = vmpin_kb();
    let mut e = Env::new(v4(LO, 4600), v4(LO, 4601))?;
    transfers(r, &mut e)?;
    remote_offsets(r, &mut e)?;
    map_and_dest(r, &mut e)?;
    atomics(r, &mut e, true)?;
    registrations(r, &mut e)?;
    notifications(r, &mut e)?;
    silent(r, &mut e)?;
    ipv6(r)?;
    crate::rdma_barrier::run(r, &mut e)?;
    crate::rdma_bad::run(r, &mut e)?;
    drop(e);
    r.expect(
        "vmpin_after_close",
        &format!("{:+}", vmpin_kb() - lck0),
        "+0",
    );
    Ok(())
}

/// RDMA write and read over every size and iovec count, with data and guard checks.
fn transfers(r: &mut Report, e: &mut Env) -> Result<(), String> {
    transfers_with(r, e, None)
}

/// [`transfers`], on a device whose registrations map at most `max_pages` pages (siw's fast
/// registrations: 256): a transfer whose registration would take more (1 MiB from offset
/// 4093: 257 pages) registers from the start of a page instead (256 pages); the same data
/// checks.
fn transfers_with(r: &mut Report, e: &mut Env, max_pages: Option<usize>) -> Result<(), String> {
    const ROFF: usize = 4093;
    let sizes: [(usize, &str); 6] = [
        (1, "1"),
        (100, "100"),
        (4096, "4k"),
        (4097, "4k1"),
        (65536, "64k"),
        (1 << 20, "1m"),
    ];
    for (size, sname) in sizes {
        let data = pattern(size, size as u64);
        for n in [1usize, 2, 16, 512] {
            if n > size {
                continue;
            }
            for write in [true, false] {
                let name = format!("{}_{sname}_{n}iov", if write { "write" } else { "read" });
                let roff = match max_pages {
                    Some(m) if (ROFF % 4096 + size).div_ceil(4096) > m => 0,
                    _ => ROFF,
                };
                let obs = transfer(e, size, n, write, &data, roff)?;
                r.expect(
                    &name,
                    &obs,
                    "OK delivered=yes data=ok guards=ok note=OK#tok",
                );
            }
        }
    }
    Ok(())
}

/// One transfer of `size` bytes in `n` local iovecs (write: server to client's registration;
/// read: client's registration to server), returning its observation.
fn transfer(
    e: &mut Env,
    size: usize,
    n: usize,
    write: bool,
    data: &[u8],
    roff: usize,
) -> Result<String, String> {
    let gap = 3;
    let cmem = RdmaMem::new(roff + size + 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4093 + size + n * gap + 4096).map_err(|e| format!("mmap: {e}"))?;
    cmem.fill(0xEE);
    smem.fill(0x11);
    let (iovs, segs) = layout(&smem, 4093, size, n, gap);
    if write {
        let mut at = 0;
        for (off, len) in &segs {
            smem.write(*off, &data[at..at + len]);
            at += len;
        }
    } else {
        cmem.write(roff, data);
    }
    let cookie = match e.c.get_mr(cmem.at(roff), size as u64, RDS_RDMA_READWRITE) {
        Ok(c) => c,
        Err(err) => return Ok(format!("GET_MR_{}", err_name(&err))),
    };
    let token = e.tok();
    let op = Op {
        cookie,
        remote_addr: 0,
        remote_bytes: size as u64,
        local: iovs,
        flags: RDS_RDMA_NOTIFY_ME | if write { RDS_RDMA_READWRITE } else { 0 },
        token,
    };
    let sent = rdma_op(&e.s, &e.ca, &op, b"xfer", None, 0);
    let mut obs = res_obs(&sent);
    if sent.is_ok() {
        let delivered = match recv_msg(&e.c) {
            Ok((p, _)) if p == b"xfer" => "yes".to_string(),
            Ok(_) => "wrong".into(),
            Err(_) => "no".into(),
        };
        let note = one_note(&e.s).replace(&format!("#{token}"), "#tok");
        let (d, g) = if write {
            let got = cmem.read(0, cmem.len());
            let mut want = vec![0xEE; cmem.len()];
            want[roff..roff + size].copy_from_slice(data);
            (same(&got[roff..roff + size], data), same(&got, &want))
        } else {
            let got = smem.read(0, smem.len());
            let mut want = vec![0x11; smem.len()];
            let mut at = 0;
            let mut gathered = Vec::with_capacity(size);
            for (off, len) in &segs {
                want[*off..off + len].copy_from_slice(&data[at..at + len]);
                gathered.extend_from_slice(&got[*off..off + len]);
                at += len;
            }
            (same(&gathered, data), same(&got, &want))
        };
        obs = format!("{obs} delivered={delivered} data={d} guards={g} note={note}");
    }
    let _ = e.c.free_mr(cookie, 0);
    Ok(obs)
}

/// Remote addresses inside a registration: `remote_vec.addr` > 0, ranges crossing pages, a
/// remote range longer than the local bytes, the exact end.
fn remote_offsets(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(4 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let base = 7;
    let len = 3 * 4096 + 5;
    let cookie =
        e.c.get_mr(cmem.at(base), len as u64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    // The cookie's offset is the registration's zero-based address of the first byte: the
    // loopback device's random page-aligned base plus the page offset (C: the page offset).
    r.expect(
        "cookie_offset_keeps_page_offset",
        &format!(
            "pgoff={} key_nonzero={}",
            librds::rdma::cookie_offset(cookie) % 4096,
            librds::rdma::cookie_key(cookie) != 0
        ),
        "pgoff=7 key_nonzero=true",
    );
    // (name, remote addr, remote bytes, local bytes, write)
    let cases: [(&str, u64, u64, usize, bool); 5] = [
        ("write_at_remote_offset", 4000, 100, 100, true),
        ("read_at_remote_offset", 9000, 50, 50, false),
        ("write_remote_bytes_larger", 20, 200, 100, true),
        ("write_exact_end", (len - 64) as u64, 64, 64, true),
        ("read_remote_bytes_larger", 0, len as u64, 4096, false),
    ];
    for (name, raddr, rbytes, lbytes, write) in cases {
        cmem.fill(0xEE);
        smem.fill(0x11);
        let data = pattern(lbytes, raddr);
        let at = base + raddr as usize;
        if write {
            smem.write(5, &data);
        } else {
            cmem.write(at, &data);
        }
        let token = e.tok();
        let op = Op {
            cookie,
            remote_addr: raddr,
            remote_bytes: rbytes,
            local: vec![RdsIovec {
                addr: smem.at(5),
                bytes: lbytes as u64,
            }],
            flags: RDS_RDMA_NOTIFY_ME | if write { RDS_RDMA_READWRITE } else { 0 },
            token,
        };
        let sent = rdma_op(&e.s, &e.ca, &op, b"off", None, 0);
        let mut obs = res_obs(&sent);
        if sent.is_ok() {
            let m = got(&e.c);
            let note = one_note(&e.s).replace(&format!("#{token}"), "");
            let d = if write {
                let mut want = vec![0xEE; cmem.len()];
                want[at..at + lbytes].copy_from_slice(&data);
                same(&cmem.read(0, cmem.len()), &want)
            } else {
                let mut want = vec![0x11; smem.len()];
                want[5..5 + lbytes].copy_from_slice(&data);
                same(&smem.read(0, smem.len()), &want)
            };
            obs = format!("{obs} {m} data={d} note={note}");
        }
        r.expect(name, &obs, "OK got=off data=ok note=OK");
    }
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// `RDS_GET_MR` vs `RDS_CMSG_RDMA_MAP`, and `RDS_CMSG_RDMA_DEST` cookie passing: the
/// receiver learns the cookie from the message and RDMAs with it.
fn map_and_dest(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(3 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let lck0 = vmpin_kb();

    // RDMA_MAP: the client registers with its message to the server.
    cmem.fill(0xEE);
    let mut cookie = 0u64;
    let mut c = ControlBuf::new();
    c.rdma_map(&GetMrArgs {
        vec: RdsIovec {
            addr: cmem.at(4000),
            bytes: 300,
        },
        cookie_addr: &mut cookie as *mut u64 as u64,
        flags: RDS_RDMA_READWRITE,
    });
    r.expect(
        "rdma_map_send",
        &res_obs(&send_ctl(&e.c, &e.sa, b"map", &c, 0)),
        "OK",
    );
    let (obs, seen) = match recv_msg(&e.s) {
        Ok((p, dest)) => (
            format!(
                "payload={} dest_cookie={}",
                String::from_utf8_lossy(&p),
                match dest {
                    Some(d) if d == cookie && d != 0 => "same",
                    Some(_) => "different",
                    None => "none",
                }
            ),
            dest,
        ),
        Err(err) => (err.replace(' ', "_"), None),
    };
    r.expect(
        "rdma_map_receiver_gets_cookie",
        &obs,
        "payload=map dest_cookie=same",
    );
    r.expect(
        "rdma_map_registers",
        &format!("vmpin={:+}", vmpin_kb() - lck0),
        "vmpin=+8",
    );
    // The server writes into the client's buffer with the cookie it received.
    let data = pattern(300, 77);
    smem.write(100, &data);
    let op = Op {
        cookie: seen.unwrap_or(0),
        remote_addr: 0,
        remote_bytes: 300,
        local: vec![RdsIovec {
            addr: smem.at(100),
            bytes: 300,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        token: 1,
    };
    let sent = rdma_op(&e.s, &e.ca, &op, b"done", None, 0);
    let mut obs = res_obs(&sent);
    if sent.is_ok() {
        let mut want = vec![0xEE; cmem.len()];
        want[4000..4300].copy_from_slice(&data);
        obs = format!(
            "{obs} {} data={} note={}",
            got(&e.c),
            same(&cmem.read(0, cmem.len()), &want),
            one_note(&e.s)
        );
    }
    r.expect("rdma_map_then_write", &obs, "OK got=done data=ok note=OK#1");
    r.expect(
        "rdma_map_free_by_owner",
        &res_obs(&e.c.free_mr(cookie, 0)),
        "OK",
    );
    r.expect(
        "rdma_map_freed",
        &format!("vmpin={:+}", vmpin_after_free(lck0)),
        "vmpin=+0",
    );

    // RDMA_MAP with cookie_addr 0: the receiver still gets the cookie.
    let mut c = ControlBuf::new();
    c.rdma_map(&GetMrArgs {
        vec: RdsIovec {
            addr: cmem.at(8),
            bytes: 8,
        },
        cookie_addr: 0,
        flags: 0,
    });
    let sent = send_ctl(&e.c, &e.sa, b"map0", &c, 0);
    let obs = match (&sent, recv_msg(&e.s)) {
        (Ok(_), Ok((_, Some(d)))) => {
            let key_ok =
                librds::rdma::cookie_key(d) != 0 && librds::rdma::cookie_offset(d) % 4096 == 8;
            let freed = res_obs(&e.c.free_mr(d, 0));
            format!(
                "OK cookie={} free={freed}",
                if key_ok { "ok" } else { "bad" }
            )
        }
        (Ok(_), Ok((_, None))) => "OK cookie=none".into(),
        (Ok(_), Err(err)) => format!("OK {}", err.replace(' ', "_")),
        (Err(err), _) => err_name(err),
    };
    r.expect("rdma_map_without_cookie_addr", &obs, "OK cookie=ok free=OK");

    // GET_MR + RDMA_DEST: the client names an existing registration in its message; the
    // server reads from it.
    let src = pattern(5000, 5);
    cmem.fill(0xEE);
    cmem.write(3001, &src);
    let cookie =
        e.c.get_mr(cmem.at(3001), 5000, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let mut c = ControlBuf::new();
    c.rdma_dest(cookie);
    r.expect(
        "rdma_dest_send",
        &res_obs(&send_ctl(&e.c, &e.sa, b"dest", &c, 0)),
        "OK",
    );
    let seen = recv_msg(&e.s);
    r.expect(
        "rdma_dest_receiver_gets_cookie",
        &match &seen {
            Ok((p, Some(d))) if *d == cookie => {
                format!("payload={} same", String::from_utf8_lossy(p))
            }
            Ok((_, Some(_))) => "different".into(),
            Ok((_, None)) => "none".into(),
            Err(err) => err.replace(' ', "_"),
        },
        "payload=dest same",
    );
    smem.fill(0x11);
    let op = Op {
        cookie: seen.ok().and_then(|(_, d)| d).unwrap_or(0),
        remote_addr: 0,
        remote_bytes: 5000,
        local: vec![RdsIovec {
            addr: smem.at(1),
            bytes: 5000,
        }],
        flags: RDS_RDMA_NOTIFY_ME,
        token: 2,
    };
    let sent = rdma_op(&e.s, &e.ca, &op, b"read", None, 0);
    let mut obs = res_obs(&sent);
    if sent.is_ok() {
        let mut want = vec![0x11; smem.len()];
        want[1..5001].copy_from_slice(&src);
        obs = format!(
            "{obs} {} data={} note={}",
            got(&e.c),
            same(&smem.read(0, smem.len()), &want),
            one_note(&e.s)
        );
    }
    r.expect("rdma_dest_then_read", &obs, "OK got=read data=ok note=OK#2");
    // The same registration can be named again.
    let mut c = ControlBuf::new();
    c.rdma_dest(cookie);
    let sent = send_ctl(&e.c, &e.sa, b"again", &c, 0);
    r.expect(
        "rdma_dest_twice",
        &format!(
            "{} {}",
            res_obs(&sent),
            match recv_msg(&e.s) {
                Ok((_, Some(d))) if d == cookie => "same",
                _ => "bad",
            }
        ),
        "OK same",
    );
    let _ = e.c.free_mr(cookie, 0);

    // GET_MR_FOR_DEST: the same as GET_MR (the destination is not used).
    cmem.fill(0xEE);
    let cookie =
        e.c.get_mr_for_dest(&e.sa, cmem.at(16), 64, RDS_RDMA_READWRITE);
    let obs = match cookie {
        Ok(cookie) => {
            let data = pattern(64, 64);
            smem.write(0, &data);
            let op = Op {
                cookie,
                remote_addr: 0,
                remote_bytes: 64,
                local: vec![RdsIovec {
                    addr: smem.at(0),
                    bytes: 64,
                }],
                flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
                token: 3,
            };
            let sent = rdma_op(&e.s, &e.ca, &op, b"fd", None, 0);
            let mut want = vec![0xEE; cmem.len()];
            want[16..80].copy_from_slice(&data);
            let o = format!(
                "OK {} {} data={} note={}",
                res_obs(&sent),
                got(&e.c),
                same(&cmem.read(0, cmem.len()), &want),
                one_note(&e.s)
            );
            let _ = e.c.free_mr(cookie, 0);
            o
        }
        Err(err) => err_name(&err),
    };
    r.expect(
        "get_mr_for_dest_then_write",
        &obs,
        "OK OK got=fd data=ok note=OK#3",
    );
    Ok(())
}

/// The masked fetch-and-add of the IB verbs, bit by bit: a set bit of `mask` drops the carry
/// out of that bit.
fn ref_masked_fadd(old: u64, add: u64, mask: u64) -> u64 {
    let mut out = 0u64;
    let mut carry = 0u64;
    for i in 0..64 {
        let a = (old >> i) & 1;
        let b = (add >> i) & 1;
        out |= (a ^ b ^ carry) << i;
        carry = (a & b) | (a & carry) | (b & carry);
        if (mask >> i) & 1 == 1 {
            carry = 0;
        }
    }
    out
}

/// Atomics: values checked in the remote registration and in the local result (host byte
/// order).
/// `masked`: the transport runs the masked atomics (loopback does; rxe has only the plain
/// opcodes, so there a masked operation with masks that are not trivial fails with
/// `EOPNOTSUPP` and changes nothing, and one with trivial masks runs as the plain one).
fn atomics(r: &mut Report, e: &mut Env, masked: bool) -> Result<(), String> {
    let cmem = RdmaMem::new(3 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    // A registration of 64 bytes across a page boundary; the atomic's 8 bytes are in the
    // second page.
    let base = 4064;
    let roff = 40;
    let cookie =
        e.c.get_mr(cmem.at(base), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let cases: [(&str, u64, AtomicOp, u64); 9] = [
        (
            "atomic_fadd",
            0x1122_3344_5566_7788,
            AtomicOp::Fadd {
                add: 0x0101_0101_0101_0101,
            },
            0x1223_3445_5667_7889,
        ),
        ("atomic_fadd_wraps", u64::MAX, AtomicOp::Fadd { add: 2 }, 1),
        (
            "atomic_cswp_hit",
            5,
            AtomicOp::Cswp {
                compare: 5,
                swap: 0xdead_beef_0000_0009,
            },
            0xdead_beef_0000_0009,
        ),
        (
            "atomic_cswp_miss",
            5,
            AtomicOp::Cswp {
                compare: 6,
                swap: 9,
            },
            5,
        ),
        (
            "atomic_masked_fadd_fields16",
            0xFFFF_0001_7FFF_1234,
            AtomicOp::MaskedFadd {
                add: 0x0001_0001_0001_0001,
                nocarry_mask: 0x8000_8000_8000_8000,
            },
            ref_masked_fadd(
                0xFFFF_0001_7FFF_1234,
                0x0001_0001_0001_0001,
                0x8000_8000_8000_8000,
            ),
        ),
        (
            "atomic_masked_fadd_bit7",
            0x0000_0000_0000_01FF,
            AtomicOp::MaskedFadd {
                add: 0x0000_0000_0000_0101,
                nocarry_mask: 0x0000_0000_0000_0080,
            },
            ref_masked_fadd(0x1FF, 0x101, 0x80),
        ),
        (
            "atomic_masked_fadd_mask0",
            0x0000_0000_FFFF_FFFF,
            AtomicOp::MaskedFadd {
                add: 1,
                nocarry_mask: 0,
            },
            0x0000_0001_0000_0000,
        ),
        (
            "atomic_masked_cswp_hit",
            0xAAAA_BBBB_CCCC_DDDD,
            AtomicOp::MaskedCswp {
                compare: 0x0000_BBBB_0000_0000,
                swap: 0x1111_2222_3333_4444,
                compare_mask: 0x0000_FFFF_0000_0000,
                swap_mask: 0x0000_0000_FFFF_0000,
            },
            0xAAAA_BBBB_3333_DDDD,
        ),
        (
            "atomic_masked_cswp_miss",
            0xAAAA_BBBB_CCCC_DDDD,
            AtomicOp::MaskedCswp {
                compare: 0x0000_BBBC_0000_0000,
                swap: 0x1111_2222_3333_4444,
                compare_mask: 0x0000_FFFF_0000_0000,
                swap_mask: 0x0000_0000_FFFF_0000,
            },
            0xAAAA_BBBB_CCCC_DDDD,
        ),
    ];
    for (name, old, op, new) in cases {
        cmem.fill(0xEE);
        cmem.write_u64(base + roff, old);
        smem.write_u64(16, 0x5555_5555_5555_5555);
        let token = e.tok();
        let a = AtomicArgs {
            cookie,
            local_addr: smem.at(16),
            remote_addr: roff as u64,
            op,
            flags: RDS_RDMA_NOTIFY_ME,
            user_token: token,
        };
        let sent = atomic_op(&e.s, &e.ca, &a, b"atomic", None);
        let mut obs = res_obs(&sent);
        let plain = match op {
            AtomicOp::MaskedFadd { nocarry_mask, .. } => nocarry_mask == 0,
            AtomicOp::MaskedCswp {
                compare_mask,
                swap_mask,
                ..
            } => compare_mask == u64::MAX && swap_mask == u64::MAX,
            _ => true,
        };
        if !masked && !plain {
            r.expect(
                name,
                &format!(
                    "{obs} remote={:#x} local={:#x} nothing={}",
                    cmem.read_u64(base + roff),
                    smem.read_u64(16),
                    silent_for(&e.c, Duration::from_millis(200))
                ),
                &format!("EOPNOTSUPP remote={old:#x} local=0x5555555555555555 nothing=true"),
            );
            continue;
        }
        if sent.is_ok() {
            let m = got(&e.c);
            let note = one_note(&e.s).replace(&format!("#{token}"), "");
            // The rest of the registration and the page around it are untouched.
            let mut want = vec![0xEE; cmem.len()];
            want[base + roff..base + roff + 8].copy_from_slice(&new.to_ne_bytes());
            obs = format!(
                "{obs} {m} note={note} local_old={:#x} remote_new={:#x} bytes={}",
                smem.read_u64(16),
                cmem.read_u64(base + roff),
                same(&cmem.read(0, cmem.len()), &want)
            );
        }
        r.expect(
            name,
            &obs,
            &format!("OK got=atomic note=OK local_old={old:#x} remote_new={new:#x} bytes=ok"),
        );
    }
    // Host byte order: the bytes of the remote word are the native encoding of the sum.
    cmem.write(base + roff, &[1, 0, 0, 0, 0, 0, 0, 0]);
    let a = AtomicArgs {
        cookie,
        local_addr: smem.at(24),
        remote_addr: roff as u64,
        op: AtomicOp::Fadd { add: 0x100 },
        flags: RDS_RDMA_NOTIFY_ME,
        user_token: 9,
    };
    let sent = atomic_op(&e.s, &e.ca, &a, b"bo", None);
    let _ = got(&e.c);
    let _ = one_note(&e.s);
    r.expect(
        "atomic_host_byte_order",
        &format!(
            "{} remote_bytes={:?} local_bytes={:?}",
            res_obs(&sent),
            cmem.read(base + roff, 8),
            smem.read(24, 8)
        ),
        &format!(
            "OK remote_bytes={:?} local_bytes={:?}",
            0x101u64.to_ne_bytes().to_vec(),
            1u64.to_ne_bytes().to_vec()
        ),
    );
    // A sequence of fetch-and-adds accumulates.
    cmem.write_u64(base + roff, 0);
    let mut olds = Vec::new();
    for i in 1..=5u64 {
        let a = AtomicArgs {
            cookie,
            local_addr: smem.at(32),
            remote_addr: roff as u64,
            op: AtomicOp::Fadd { add: i },
            flags: 0,
            user_token: 0,
        };
        let _ = atomic_op(&e.s, &e.ca, &a, b"seq", None);
        let _ = got(&e.c);
        olds.push(smem.read_u64(32));
    }
    r.expect(
        "atomic_fadd_sequence",
        &format!("olds={olds:?} final={}", cmem.read_u64(base + roff)),
        "olds=[0, 1, 3, 6, 10] final=15",
    );
    // An atomic at the first word of a registration that starts 8-aligned mid-page.
    let cookie2 =
        e.c.get_mr(cmem.at(8200), 16, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    cmem.write_u64(8200, 41);
    cmem.write_u64(8208, 100);
    let a = AtomicArgs {
        cookie: cookie2,
        local_addr: smem.at(40),
        remote_addr: 8,
        op: AtomicOp::Fadd { add: 1 },
        flags: 0,
        user_token: 0,
    };
    let sent = atomic_op(&e.s, &e.ca, &a, b"second", None);
    r.expect(
        "atomic_second_word",
        &format!(
            "{} {} first={} second={} old={}",
            res_obs(&sent),
            got(&e.c),
            cmem.read_u64(8200),
            cmem.read_u64(8208),
            smem.read_u64(40)
        ),
        "OK got=second first=41 second=101 old=100",
    );
    let _ = e.c.free_mr(cookie2, 0);
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// A write of `data` from the server into the registration `cookie` (at offset 0), waiting
/// for the client's message and the notification: `OK got=... note=...`.
pub(crate) fn write_into(e: &mut Env, cookie: u64, smem: &RdmaMem, len: usize) -> String {
    let token = e.tok();
    let op = Op {
        cookie,
        remote_addr: 0,
        remote_bytes: len as u64,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: len as u64,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        token,
    };
    match rdma_op(&e.s, &e.ca, &op, b"w", None, 0) {
        Ok(_) => {
            let note = one_note(&e.s).replace(&format!("#{token}"), "");
            let m = if note == "OK" {
                got(&e.c)
            } else if silent_for(&e.c, Duration::from_millis(200)) {
                "nothing".into()
            } else {
                got(&e.c)
            };
            format!("OK {m} note={note}")
        }
        Err(err) => err_name(&err),
    }
}

/// Use-once, invalidate, flush, key uniqueness, locked-memory accounting.
fn registrations(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(3 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    smem.fill(0x42);
    let lck0 = vmpin_kb();

    // Locked memory: a registration of 2 pages (an odd start spanning a page boundary).
    let c1 = e.c.get_mr(cmem.at(4000), 200, RDS_RDMA_READWRITE);
    r.expect(
        "get_mr_charges_locked_memory",
        &format!("{} vmpin={:+}", res_obs(&c1), vmpin_kb() - lck0),
        "OK vmpin=+8",
    );
    if let Ok(c) = c1 {
        r.expect("free_mr", &res_obs(&e.c.free_mr(c, 0)), "OK");
    }
    r.expect(
        "free_mr_uncharges",
        &format!("vmpin={:+}", vmpin_kb() - lck0),
        "vmpin=+0",
    );

    // Use-once: freed when the message of the first RDMA arrives.
    cmem.fill(0xEE);
    let once =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect(
        "use_once_first",
        &write_into(e, once, &smem, 64),
        "OK got=w note=OK",
    );
    cmem.fill(0xEE);
    r.expect(
        "use_once_second_fails",
        &format!(
            "{} data={}",
            write_into(e, once, &smem, 64),
            same(&cmem.read(0, 64), &[0xEE; 64])
        ),
        "OK nothing note=REMOTE_ERROR data=ok",
    );
    r.expect(
        "use_once_free_after_use",
        &res_obs(&e.c.free_mr(once, 0)),
        "EINVAL",
    );
    r.expect(
        "use_once_uncharged",
        &format!("vmpin={:+}", vmpin_kb() - lck0),
        "vmpin=+0",
    );
    // A use-once registration survives an operation that failed (no message arrived).
    let once =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let token = e.tok();
    let op = Op {
        cookie: once,
        remote_addr: 32,
        remote_bytes: 64,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 64,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        token,
    };
    let _ = rdma_op(&e.s, &e.ca, &op, b"past", None, 0);
    let failed = one_note(&e.s).replace(&format!("#{token}"), "");
    r.expect(
        "use_once_survives_failed_op",
        &format!("{failed} then={}", write_into(e, once, &smem, 64)),
        "REMOTE_ERROR then=OK got=w note=OK",
    );
    r.expect(
        "use_once_used_after_retry",
        &res_obs(&e.c.free_mr(once, 0)),
        "EINVAL",
    );
    // A silent operation without payload sends no message, so it does not use the
    // registration up.
    let once =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let op = Op {
        cookie: once,
        remote_addr: 0,
        remote_bytes: 8,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 8,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME | RDS_RDMA_SILENT,
        token: 5,
    };
    let _ = rdma_op(&e.s, &e.ca, &op, b"", None, 0);
    let n = one_note(&e.s);
    r.expect(
        "use_once_silent_keeps_registration",
        &format!("{n} free={}", res_obs(&e.c.free_mr(once, 0))),
        "OK#5 free=OK",
    );

    // Invalidate at free: the key is dead at once.
    let inv =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE | RDS_RDMA_INVALIDATE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect(
        "invalidate_registration_works",
        &write_into(e, inv, &smem, 64),
        "OK got=w note=OK",
    );
    r.expect(
        "free_mr_invalidate",
        &res_obs(&e.c.free_mr(inv, RDS_RDMA_INVALIDATE)),
        "OK",
    );
    cmem.fill(0xEE);
    r.expect(
        "rdma_after_invalidate",
        &format!(
            "{} data={}",
            write_into(e, inv, &smem, 64),
            same(&cmem.read(0, 64), &[0xEE; 64])
        ),
        "OK nothing note=REMOTE_ERROR data=ok",
    );
    r.expect(
        "free_mr_after_invalidate",
        &res_obs(&e.c.free_mr(inv, RDS_RDMA_INVALIDATE)),
        "EINVAL",
    );
    // Freed without invalidate: dead too.
    let plain =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let _ = e.c.free_mr(plain, 0);
    r.expect(
        "rdma_after_free",
        &write_into(e, plain, &smem, 64),
        "OK nothing note=REMOTE_ERROR",
    );

    // Cookie 0 flushes (rds_rs's loopback: nothing to do, success; C's loopback: EINVAL).
    r.expect("free_mr_cookie_0_flush", &res_obs(&e.c.free_mr(0, 0)), "OK");
    r.expect(
        "free_mr_cookie_0_invalidate",
        &res_obs(&e.c.free_mr(0, RDS_RDMA_INVALIDATE)),
        "OK",
    );

    // Keys: never 0, never two live registrations with one key, freed keys not reissued
    // soon.
    let mut keys = Vec::new();
    let mut bad = None;
    for i in 0..64 {
        match e.c.get_mr(cmem.at(i * 8), 8, 0) {
            Ok(c) => keys.push(c),
            Err(err) => {
                bad = Some(err_name(&err));
                break;
            }
        }
    }
    let live: Vec<u32> = keys.iter().map(|c| librds::rdma::cookie_key(*c)).collect();
    for c in &keys {
        let _ = e.c.free_mr(*c, 0);
    }
    let mut again = Vec::new();
    for i in 0..64 {
        if let Ok(c) = e.c.get_mr(cmem.at(i * 8), 8, 0) {
            again.push(c);
        }
    }
    let reissued: Vec<u32> = again.iter().map(|c| librds::rdma::cookie_key(*c)).collect();
    for c in &again {
        let _ = e.c.free_mr(*c, 0);
    }
    let mut all = live.clone();
    all.extend(&reissued);
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    r.expect(
        "rkeys_unique_nonzero",
        &format!(
            "{} registered={} distinct={} zero={}",
            bad.unwrap_or_else(|| "OK".into()),
            n,
            all.len(),
            all.contains(&0)
        ),
        "OK registered=128 distinct=128 zero=false",
    );
    r.expect(
        "registrations_all_freed",
        &format!("vmpin={:+}", vmpin_kb() - lck0),
        "vmpin=+0",
    );
    // Locked memory: RLIMIT_MEMLOCK applies without CAP_IPC_LOCK; a limit of 0 means the
    // task may not lock memory at all (EPERM, after the wrap check, before the others).
    let lmem = RdmaMem::new(16 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let base_kb = u64::try_from(vmpin_kb()).unwrap_or(0);
    let old = set_memlock((base_kb + 64) * 1024)?;
    let c = &e.c;
    let limited = without_cap_ipc_lock(|| {
        let first = c.get_mr(lmem.at(0), 8 * 4096, 0);
        let within = c.get_mr(lmem.at(8 * 4096), 8 * 4096, 0);
        let over = c.get_mr(lmem.at(0), 4096, 0);
        let over_vm = vmpin_kb() - lck0;
        let mut freed = String::new();
        for k in [&first, &within, &over].into_iter().flatten() {
            freed.push_str(&res_obs(&c.free_mr(*k, 0)));
        }
        let again = c.get_mr(lmem.at(0), 16 * 4096, 0);
        if let Ok(k) = &again {
            let _ = c.free_mr(*k, 0);
        }
        format!(
            "first={} within={} over={} vmpin={over_vm:+} freed={freed} again={}",
            res_obs(&first),
            res_obs(&within),
            res_obs(&over),
            res_obs(&again)
        )
    });
    let _ = set_memlock(0);
    let no_mlock = without_cap_ipc_lock(|| {
        format!(
            "valid={} zero_length={} wrapping={}",
            res_obs(&c.get_mr(cmem.at(0), 4096, 0)),
            res_obs(&c.get_mr(cmem.at(0), 0, 0)),
            res_obs(&c.get_mr(u64::MAX - 10, 100, 0))
        )
    });
    // With CAP_IPC_LOCK (this thread), the limit does not apply.
    let _ = set_memlock(4096);
    let capable = c.get_mr(cmem.at(0), 3 * 4096, 0);
    if let Ok(k) = &capable {
        let _ = c.free_mr(*k, 0);
    }
    let _ = set_memlock(old);
    r.expect(
        "rlimit_memlock_charged",
        &limited.unwrap_or_else(|e| e.replace(':', "")),
        "first=OK within=OK over=ENOMEM vmpin=+64 freed=OKOK again=OK",
    );
    r.expect(
        "rlimit_memlock_0_no_cap",
        &no_mlock.unwrap_or_else(|e| e.replace(':', "")),
        "valid=EPERM zero_length=EPERM wrapping=EINVAL",
    );
    r.expect("rlimit_memlock_cap_ipc_lock", &res_obs(&capable), "OK");
    // Registrations are released at close.
    let x = big(v4(LO, 4620))?;
    for i in 0..3 {
        let _ = x.get_mr(cmem.at(i * 4096), 4096, 0);
    }
    let during = vmpin_kb() - lck0;
    drop(x);
    r.expect(
        "close_frees_registrations",
        &format!("during={during:+} after={:+}", vmpin_kb() - lck0),
        "during=+12 after=+0",
    );
    Ok(())
}

/// Notifications: with and without `RDS_RDMA_NOTIFY_ME`, `RDS_RECVERR`, several per
/// `recvmsg`, truncation, order before data, `poll`.
fn notifications(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let cookie =
        e.c.get_mr(cmem.at(0), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let dead =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let _ = e.c.free_mr(dead, 0);
    let op = |cookie: u64, flags: u64, token: u64| Op {
        cookie,
        remote_addr: 0,
        remote_bytes: 16,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 16,
        }],
        flags: RDS_RDMA_READWRITE | flags,
        token,
    };
    // After the barrier said an operation completed, a little time for anything that
    // should not come (a notification queued late would show).
    let settle = |_: &Env| std::thread::sleep(Duration::from_millis(50));
    // Operations with NOTIFY_ME and these tokens, no payload, all completed when this
    // returns (the barrier waits for the last).
    let notified = |e: &Env, tokens: std::ops::RangeInclusive<u64>| {
        let mut last = 0u64;
        for t in tokens {
            let _ = rdma_op(
                &e.s,
                &e.ca,
                &op(cookie, RDS_RDMA_NOTIFY_ME, t),
                b"",
                Some(&mut last),
                0,
            );
        }
        let _ = e.s.barrier(&e.ca, last, 0);
    };

    // One notification: a 0-byte message with one RDMA_STATUS.
    let _ = rdma_op(
        &e.s,
        &e.ca,
        &op(cookie, RDS_RDMA_NOTIFY_ME, 0xabcdef),
        b"n",
        None,
        0,
    );
    let _ = got(&e.c);
    let _ = e.s.poll(libc::POLLIN, arrival_bound());
    let mut buf = [0u8; 64];
    let obs = match e.s.recv_msg(&mut buf, 64, libc::MSG_DONTWAIT) {
        Ok(m) => format!(
            "len={} cmsgs={} note={} ctrunc={}",
            m.len,
            m.cmsgs.len(),
            notes_obs(
                &m.cmsgs
                    .iter()
                    .filter_map(|c| c.rdma_status())
                    .collect::<Vec<_>>()
            ),
            m.flags & libc::MSG_CTRUNC != 0
        ),
        Err(err) => err_name(&err),
    };
    r.expect(
        "notify_me_success",
        &obs,
        "len=0 cmsgs=1 note=OK#11259375 ctrunc=false",
    );

    // Many at once: five operations, one recvmsg with room for eight.
    let mut last = 0u64;
    notified(e, 101..=105);
    let first = recv_notes(&e.s, 8);
    let then = recv_notes(&e.s, 8);
    r.expect(
        "notify_many_in_one_recvmsg",
        &match first {
            Ok(Some((len, _, v))) => format!(
                "len={len} notes={} then={}",
                notes_obs(&v),
                match then {
                    Ok(None) => "EAGAIN".to_string(),
                    _ => "more".into(),
                }
            ),
            Ok(None) => "EAGAIN".into(),
            Err(err) => err,
        },
        "len=0 notes=OK#101,OK#102,OK#103,OK#104,OK#105 then=EAGAIN",
    );
    crate::util::drain(&e.c);

    // Room for one, for two.
    notified(e, 201..=203);
    let mut per_call = Vec::new();
    for _ in 0..4 {
        match recv_notes(&e.s, 1) {
            Ok(Some((_, _, v))) => per_call.push(notes_obs(&v)),
            Ok(None) => {
                per_call.push("EAGAIN".into());
                break;
            }
            Err(err) => {
                per_call.push(err);
                break;
            }
        }
    }
    r.expect(
        "notify_room_for_one",
        &per_call.join("|"),
        "OK#201|OK#202|OK#203|EAGAIN",
    );
    notified(e, 301..=303);
    let mut per_call = Vec::new();
    for _ in 0..3 {
        let mut b = [0u8; 8];
        // Room for two and a half.
        match e.s.recv_msg(&mut b, 80, libc::MSG_DONTWAIT) {
            Ok(m) => per_call.push(notes_obs(
                &m.cmsgs
                    .iter()
                    .filter_map(|c| c.rdma_status())
                    .collect::<Vec<_>>(),
            )),
            Err(err) => {
                per_call.push(err_name(&err));
                break;
            }
        }
    }
    r.expect(
        "notify_room_for_two",
        &per_call.join("|"),
        "OK#301,OK#302|OK#303|EAGAIN",
    );
    // No room at all: one notification is consumed, with MSG_CTRUNC.
    notified(e, 401..=402);
    let mut b = [0u8; 8];
    let first = match e.s.recv_msg(&mut b, 0, libc::MSG_DONTWAIT) {
        Ok(m) => format!("len={} ctrunc={}", m.len, m.flags & libc::MSG_CTRUNC != 0),
        Err(err) => err_name(&err),
    };
    let rest = match recv_notes(&e.s, 8) {
        Ok(Some((_, _, v))) => notes_obs(&v),
        Ok(None) => "EAGAIN".into(),
        Err(err) => err,
    };
    r.expect(
        "notify_no_control_room",
        &format!("{first} then={rest}"),
        "len=0 ctrunc=true then=OK#402",
    );
    crate::util::drain(&e.c);

    // Without NOTIFY_ME, success is silent.
    let _ = rdma_op(&e.s, &e.ca, &op(cookie, 0, 500), b"q", Some(&mut last), 0);
    let _ = got(&e.c);
    let _ = e.s.barrier(&e.ca, last, 0);
    settle(e);
    r.expect(
        "no_notify_me_no_notification",
        &match recv_notes(&e.s, 8) {
            Ok(None) => "none".to_string(),
            Ok(Some((_, _, v))) => notes_obs(&v),
            Err(err) => err,
        },
        "none",
    );
    // A failure with NOTIFY_ME.
    let _ = rdma_op(
        &e.s,
        &e.ca,
        &op(dead, RDS_RDMA_NOTIFY_ME, 501),
        b"q",
        None,
        0,
    );
    r.expect(
        "notify_me_remote_error",
        &format!(
            "{} client={}",
            one_note(&e.s),
            nothing_or(&e.c, Duration::from_millis(200), "message")
        ),
        "REMOTE_ERROR#501 client=nothing",
    );
    // RDS_RECVERR: failures are reported without NOTIFY_ME; successes are not.
    r.expect(
        "recverr_on",
        &res_obs(&e.s.set_int(librds::SOL_RDS, librds::RDS_RECVERR, 1)),
        "OK",
    );
    let _ = rdma_op(&e.s, &e.ca, &op(dead, 0, 502), b"q", Some(&mut last), 0);
    r.expect(
        "recverr_failure_notified",
        &one_note(&e.s),
        "REMOTE_ERROR#502",
    );
    let _ = rdma_op(&e.s, &e.ca, &op(cookie, 0, 503), b"q", Some(&mut last), 0);
    let _ = got(&e.c);
    let _ = e.s.barrier(&e.ca, last, 0);
    settle(e);
    r.expect(
        "recverr_success_silent",
        &match recv_notes(&e.s, 8) {
            Ok(None) => "none".to_string(),
            Ok(Some((_, _, v))) => notes_obs(&v),
            Err(err) => err,
        },
        "none",
    );
    let a = AtomicArgs {
        cookie: dead,
        local_addr: smem.at(64),
        remote_addr: 0,
        op: AtomicOp::Fadd { add: 1 },
        flags: 0,
        user_token: 504,
    };
    let _ = atomic_op(&e.s, &e.ca, &a, b"", None);
    r.expect(
        "recverr_atomic_failure_notified",
        &one_note(&e.s),
        "REMOTE_ERROR#504",
    );
    // RECVERR is taken when the operation is sent: turned off before it completes, the
    // failure is still reported.
    {
        let _hold = Hold::on()?;
        let _ = rdma_op(&e.s, &e.ca, &op(dead, 0, 505), b"q", Some(&mut last), 0);
        let _ = e.s.set_int(librds::SOL_RDS, librds::RDS_RECVERR, 0);
    }
    let _ = e.s.send_to(b"flush", e.ca);
    let _ = got(&e.c);
    r.expect("recverr_taken_at_send", &one_note(&e.s), "REMOTE_ERROR#505");
    let _ = rdma_op(&e.s, &e.ca, &op(dead, 0, 506), b"q", Some(&mut last), 0);
    let _ = e.s.barrier(&e.ca, last, 0);
    settle(e);
    r.expect(
        "recverr_off_failure_silent",
        &match recv_notes(&e.s, 8) {
            Ok(None) => "none".to_string(),
            Ok(Some((_, _, v))) => notes_obs(&v),
            Err(err) => err,
        },
        "none",
    );

    // Notifications come before data already queued.
    let _ = e.c.send_to(b"data-first", e.sa);
    let _ = wait_msg(&e.s);
    notified(e, 600..=600);
    let mut order = Vec::new();
    for _ in 0..3 {
        let mut b = [0u8; 64];
        match e.s.recv_msg(&mut b, 64, libc::MSG_DONTWAIT) {
            Ok(m) if m.len == 0 => order.push(notes_obs(
                &m.cmsgs
                    .iter()
                    .filter_map(|c| c.rdma_status())
                    .collect::<Vec<_>>(),
            )),
            Ok(m) => order.push(String::from_utf8_lossy(&b[..m.len]).into_owned()),
            Err(err) => {
                order.push(err_name(&err));
                break;
            }
        }
    }
    r.expect(
        "notification_before_data",
        &order.join("|"),
        "OK#600|data-first|EAGAIN",
    );
    crate::util::drain(&e.c);

    // poll: POLLIN while a notification is pending, and a poller is woken by one.
    notified(e, 700..=700);
    let before = e.s.poll(libc::POLLIN, Duration::ZERO).unwrap_or(-1) & libc::POLLIN != 0;
    let _ = recv_notes(&e.s, 8);
    let after = e.s.poll(libc::POLLIN, Duration::ZERO).unwrap_or(-1) & libc::POLLIN != 0;
    r.expect(
        "poll_pending_notification",
        &format!("pending={before} after_read={after}"),
        "pending=true after_read=false",
    );
    let woke = {
        let hold = Hold::on()?;
        let _ = rdma_op(
            &e.s,
            &e.ca,
            &op(cookie, RDS_RDMA_NOTIFY_ME, 701),
            b"",
            None,
            0,
        );
        std::thread::scope(|sc| {
            let poller = sc.spawn(|| {
                let t = Instant::now();
                let rev = e.s.poll(libc::POLLIN, arrival_bound()).unwrap_or(-1);
                (rev & libc::POLLIN != 0, t.elapsed())
            });
            std::thread::sleep(Duration::from_millis(300));
            let early = poller.is_finished();
            drop(hold);
            let _ = e.s.send_to(b"flush", e.ca);
            let (pollin, _) = poller.join().unwrap_or((false, Duration::ZERO));
            format!("early={early} pollin={pollin}")
        })
    };
    r.expect(
        "poll_woken_by_notification",
        &format!("{woke} note={}", one_note(&e.s)),
        "early=false pollin=true note=OK#701",
    );
    crate::util::drain(&e.c);
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// `RDS_RDMA_SILENT`: no message for the remote side when there is no payload.
fn silent(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let cookie =
        e.c.get_mr(cmem.at(0), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let data = pattern(512, 512);
    smem.write(0, &data);
    for (name, payload, flags, want) in [
        (
            "silent_write_no_payload",
            &b""[..],
            RDS_RDMA_READWRITE,
            "OK note=OK#1 client=nothing data=ok",
        ),
        (
            "silent_write_with_payload",
            &b"loud"[..],
            RDS_RDMA_READWRITE,
            "OK note=OK#1 client=got=loud data=ok",
        ),
        (
            "silent_read_no_payload",
            &b""[..],
            0,
            "OK note=OK#1 client=nothing data=ok",
        ),
    ] {
        cmem.fill(0xEE);
        if flags == 0 {
            cmem.write(0, &data);
            smem.fill(0);
        }
        let op = Op {
            cookie,
            remote_addr: 0,
            remote_bytes: 512,
            local: vec![RdsIovec {
                addr: smem.at(0),
                bytes: 512,
            }],
            flags: flags | RDS_RDMA_SILENT | RDS_RDMA_NOTIFY_ME,
            token: 1,
        };
        let sent = rdma_op(&e.s, &e.ca, &op, payload, None, 0);
        let note = one_note(&e.s);
        let client = if payload.is_empty() {
            if silent_for(&e.c, Duration::from_millis(300)) {
                "nothing".to_string()
            } else {
                got(&e.c)
            }
        } else {
            got(&e.c)
        };
        let d = if flags == 0 {
            same(&smem.read(0, 512), &data)
        } else {
            same(&cmem.read(0, 512), &data)
        };
        r.expect(
            name,
            &format!("{} note={note} client={client} data={d}", res_obs(&sent)),
            want,
        );
        if flags == 0 {
            smem.write(0, &data);
        }
    }
    // A silent atomic without payload.
    cmem.write_u64(8, 10);
    let a = AtomicArgs {
        cookie,
        local_addr: smem.at(1024),
        remote_addr: 8,
        op: AtomicOp::Fadd { add: 5 },
        flags: RDS_RDMA_SILENT | RDS_RDMA_NOTIFY_ME,
        user_token: 2,
    };
    let sent = atomic_op(&e.s, &e.ca, &a, b"", None);
    let note = one_note(&e.s);
    r.expect(
        "silent_atomic_no_payload",
        &format!(
            "{} note={note} client={} remote={} old={}",
            res_obs(&sent),
            nothing_or(&e.c, Duration::from_millis(300), "message"),
            cmem.read_u64(8),
            smem.read_u64(1024)
        ),
        "OK note=OK#2 client=nothing remote=15 old=10",
    );
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// A few of the above over `::1`.
fn ipv6(r: &mut Report) -> Result<(), String> {
    let e = Env::new(v6_lo(4630), v6_lo(4631))?;
    let cmem = RdmaMem::new(3 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(3 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let data = pattern(4096, 6);
    // Write, then read back into another buffer.
    cmem.fill(0xEE);
    smem.write(11, &data);
    let cookie =
        e.c.get_mr(cmem.at(2049), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let op = Op {
        cookie,
        remote_addr: 0,
        remote_bytes: 4096,
        local: vec![RdsIovec {
            addr: smem.at(11),
            bytes: 4096,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        token: 61,
    };
    let sent = rdma_op(&e.s, &e.ca, &op, b"six", None, 0);
    r.expect(
        "v6_write_4k",
        &format!(
            "{} {} note={} data={}",
            res_obs(&sent),
            got(&e.c),
            one_note(&e.s),
            same(&cmem.read(2049, 4096), &data)
        ),
        "OK got=six note=OK#61 data=ok",
    );
    let op = Op {
        local: vec![RdsIovec {
            addr: smem.at(8000),
            bytes: 4096,
        }],
        flags: RDS_RDMA_NOTIFY_ME,
        token: 62,
        ..op
    };
    let sent = rdma_op(&e.s, &e.ca, &op, b"back", None, 0);
    r.expect(
        "v6_read_4k",
        &format!(
            "{} {} note={} data={}",
            res_obs(&sent),
            got(&e.c),
            one_note(&e.s),
            same(&smem.read(8000, 4096), &data)
        ),
        "OK got=back note=OK#62 data=ok",
    );
    cmem.write_u64(2056, 7);
    let a = AtomicArgs {
        cookie,
        local_addr: smem.at(0),
        remote_addr: 7,
        op: AtomicOp::Cswp {
            compare: 7,
            swap: 8,
        },
        flags: RDS_RDMA_NOTIFY_ME,
        user_token: 63,
    };
    let sent = atomic_op(&e.s, &e.ca, &a, b"cas", None);
    r.expect(
        "v6_atomic_cswp",
        &format!(
            "{} {} note={} old={} new={}",
            res_obs(&sent),
            got(&e.c),
            one_note(&e.s),
            smem.read_u64(0),
            cmem.read_u64(2056)
        ),
        "OK got=cas note=OK#63 old=7 new=8",
    );
    // RDMA_DEST over ::1.
    let mut c = ControlBuf::new();
    c.rdma_dest(cookie);
    let sent = send_ctl(&e.c, &e.sa, b"d6", &c, 0);
    r.expect(
        "v6_rdma_dest",
        &format!(
            "{} {}",
            res_obs(&sent),
            match recv_msg(&e.s) {
                Ok((_, Some(d))) if d == cookie => "same",
                Ok(_) => "bad",
                Err(_) => "none",
            }
        ),
        "OK same",
    );
    // A registration of a socket bound to ::1 is not reachable through 127.0.0.1.
    let s4 = big(v4(LO, 4632))?;
    let c4 = big(v4(LO, 4633))?;
    let op = Op {
        cookie,
        remote_addr: 0,
        remote_bytes: 16,
        local: vec![RdsIovec {
            addr: smem.at(0),
            bytes: 16,
        }],
        flags: RDS_RDMA_READWRITE | RDS_RDMA_NOTIFY_ME,
        token: 64,
    };
    let sent = rdma_op(&s4, &v4(LO, 4633), &op, b"x", None, 0);
    r.expect(
        "v6_registration_not_reachable_over_v4",
        &format!(
            "{} note={} client={}",
            res_obs(&sent),
            one_note(&s4),
            nothing_or(&c4, Duration::from_millis(200), "message")
        ),
        "OK note=REMOTE_ERROR#64 client=nothing",
    );
    // The barrier over ::1.
    let mut id = 0u64;
    let _ = rdma_op(
        &e.s,
        &e.ca,
        &Op {
            local: vec![RdsIovec {
                addr: smem.at(0),
                bytes: 16,
            }],
            remote_bytes: 16,
            flags: RDS_RDMA_READWRITE,
            ..op.clone()
        },
        b"",
        Some(&mut id),
        0,
    );
    let _ = got(&e.c);
    let (res, mark) = e.s.barrier(&e.ca, id, 0);
    r.expect(
        "v6_barrier",
        &format!("id={id} {} mark={mark}", res_obs(&res)),
        "id=4 OK mark=4",
    );
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// RDMA over an RDMA device, rds_rs at both ends (issue 11): `rds-tests ib-rdma CADDR SADDR
/// NAME`. The client socket (it registers memory) is bound to CADDR port 4740, the server
/// socket (it runs the operations) to SADDR port 4741, so the operations cross the device's
/// connection from SADDR to CADDR. Checks are named `ib_rdma_NAME_...`: the transfers and
/// remote offsets of the loopback suite (1 B to 1 MiB, 1 to 512 iovecs, data and guards
/// checked), the ordering claim over many operations, and the peer's refusals.
/// The sockets of an `ib-*` subcommand given `CADDR SADDR NAME` (`args`; `usage` otherwise)
/// on ports `port` and `port + 1`, with the check prefix `ib_rdma_NAME_`, connected by a first
/// message (check `connect`); and whether NAME names an iWARP device's run (siw).
fn ib_env(
    r: &mut Report,
    args: &[&str],
    usage: &str,
    port: u16,
    connect: &str,
) -> Result<(Env, bool), String> {
    let [ca, sa, name] = args else {
        return Err(usage.into());
    };
    let ca: std::net::IpAddr = ca.parse().map_err(|_| format!("bad address {ca}"))?;
    let sa: std::net::IpAddr = sa.parse().map_err(|_| format!("bad address {sa}"))?;
    r.set_prefix(&format!("ib_rdma_{name}_"));
    let e = Env::new(SocketAddr::new(ca, port), SocketAddr::new(sa, port + 1))?;
    e.s.send_to(b"hello", e.ca)
        .map_err(|err| format!("first send: {err}"))?;
    r.expect(connect, &got(&e.c), "got=hello");
    Ok((e, name.starts_with("siw")))
}

pub(crate) fn ib_run(r: &mut Report, args: &[&str]) -> Result<(), String> {
    // siw (iWARP): registrations are fast registrations of at most 256 pages, and there are
    // no atomics.
    let (mut e, iwarp) = ib_env(
        r,
        args,
        "usage: rds-tests ib-rdma CADDR SADDR NAME",
        4740,
        "connect",
    )?;
    transfers_with(r, &mut e, if iwarp { Some(256) } else { None })?;
    remote_offsets(r, &mut e)?;
    if iwarp {
        // RDMA_MAP, RDMA_DEST and GET_MR_FOR_DEST as on loopback (on rxe the device pins the
        // pages too, so `VmPin` moves twice as much there; C against rds-rs covers RDMA_MAP
        // on rxe: `ib-rdma-pair`).
        map_and_dest(r, &mut e)?;
    }
    ib_ordering(r, &mut e)?;
    // A peer's refusal: IB answers the request with a NAK (`RDS_RDMA_REMOTE_ERROR`); iWARP
    // with a TERMINATE that ends the connection, and siw flushes what was outstanding, so
    // the operation is reported dropped.
    let refused = if iwarp { "DROPPED" } else { "REMOTE_ERROR" };
    ib_refusals(r, &mut e, refused)?;
    if iwarp {
        siw_no_atomics(r, &mut e)?;
    } else {
        // rxe has the plain atomics only.
        atomics(r, &mut e, false)?;
    }
    ib_barrier(r, &mut e, refused)?;
    if iwarp {
        siw_service_rebuilt(r, &mut e)?;
    }
    r.expect("nothing_left", &leftovers(&e.c, &e.s), "");
    Ok(())
}

/// The test build's `ib_service_break` knob: the device's service connection (on which siw's
/// registrations are posted) fails before the next registration, which makes a new one; the
/// registration made before keeps working, and so does the new one (each a 4 KiB write with
/// its data checked).
fn siw_service_rebuilt(r: &mut Report, e: &mut Env) -> Result<(), String> {
    const KNOB: &str = "/sys/kernel/debug/rds_rs/ib_service_break";
    let cmem = RdmaMem::new(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(2 * 4096).map_err(|e| format!("mmap: {e}"))?;
    cmem.fill(0);
    let before =
        e.c.get_mr(cmem.at(0), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    std::fs::write(KNOB, "1").map_err(|err| format!("{KNOB}: {err}"))?;
    let after = e.c.get_mr(cmem.at(4096), 4096, RDS_RDMA_READWRITE);
    let knob = std::fs::read_to_string(KNOB).map_err(|err| format!("{KNOB}: {err}"))?;
    r.expect(
        "service_broken_get_mr",
        &format!("{} knob={}", res_obs(&after), knob.trim()),
        "OK knob=0",
    );
    let mut obs = Vec::new();
    for (i, cookie) in [Some(before), after.ok()].into_iter().enumerate() {
        let Some(cookie) = cookie else { continue };
        let data = pattern(4096, 300 + i as u64);
        smem.write(i * 4096, &data);
        let token = e.tok();
        let op = Op {
            cookie,
            remote_addr: 0,
            remote_bytes: 4096,
            local: vec![RdsIovec {
                addr: smem.at(i * 4096),
                bytes: 4096,
            }],
            flags: RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE,
            token,
        };
        let sent = rdma_op(&e.s, &e.ca, &op, b"svc", None, 0);
        let note = one_note(&e.s).replace(&format!("#{token}"), "");
        obs.push(format!(
            "{}:{} {} data={}",
            if i == 0 { "before" } else { "after" },
            res_obs(&sent),
            note,
            same(&cmem.read(i * 4096, 4096), &data)
        ));
        let _ = got(&e.c);
        let _ = e.c.free_mr(cookie, 0);
    }
    r.expect(
        "service_broken_writes",
        &obs.join(" "),
        "before:OK OK data=ok after:OK OK data=ok",
    );
    Ok(())
}

/// siw has no atomics: every kind is refused at `sendmsg` with `EOPNOTSUPP`, and nothing
/// changes in the target.
fn siw_no_atomics(r: &mut Report, e: &mut Env) -> Result<(), String> {
    let cmem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    cmem.write_u64(0, 7);
    let cookie =
        e.c.get_mr(cmem.at(0), 64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let ops = [
        ("fadd", AtomicOp::Fadd { add: 1 }),
        (
            "cswp",
            AtomicOp::Cswp {
                compare: 7,
                swap: 8,
            },
        ),
        (
            "masked_fadd",
            AtomicOp::MaskedFadd {
                add: 1,
                nocarry_mask: 0,
            },
        ),
    ];
    for (name, op) in ops {
        let a = AtomicArgs {
            cookie,
            local_addr: smem.at(16),
            remote_addr: 0,
            op,
            flags: RDS_RDMA_NOTIFY_ME,
            user_token: e.tok(),
        };
        let sent = atomic_op(&e.s, &e.ca, &a, b"atomic", None);
        r.expect(
            &format!("atomic_{name}_refused"),
            &res_obs(&sent),
            "EOPNOTSUPP",
        );
    }
    r.expect(
        "atomic_target_unchanged",
        &format!("{}", cmem.read_u64(0)),
        "7",
    );
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// The ordering claim: a message that follows an RDMA write finds the write's data in place
/// when it arrives, every time. Rounds of 64 writes (each to its own 4 KiB slot of one
/// registration, with new data every round) sent back to back, each followed by its message;
/// each message's slot is checked the moment the message is read.
fn ib_ordering(r: &mut Report, e: &mut Env) -> Result<(), String> {
    const SLOTS: usize = 64;
    const SLOT: usize = 4096;
    const ROUNDS: usize = 5;
    let cmem = RdmaMem::new(SLOTS * SLOT).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(SLOTS * SLOT).map_err(|e| format!("mmap: {e}"))?;
    let cookie =
        e.c.get_mr(cmem.at(0), (SLOTS * SLOT) as u64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let mut bad = Vec::new();
    let mut notes = 0;
    for round in 0..ROUNDS {
        let datas: Vec<Vec<u8>> = (0..SLOTS)
            .map(|i| pattern(SLOT, (round * SLOTS + i) as u64 + 1))
            .collect();
        for (i, d) in datas.iter().enumerate() {
            smem.write(i * SLOT, d);
        }
        for i in 0..SLOTS {
            let op = Op {
                flags: RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE,
                token: (round * SLOTS + i) as u64,
                ..slot_write(cookie, &smem, i, SLOT)
            };
            rdma_op(&e.s, &e.ca, &op, &(i as u32).to_be_bytes(), None, 0)
                .map_err(|err| format!("sendmsg: {}", err_name(&err)))?;
        }
        for (i, d) in datas.iter().enumerate() {
            match recv_msg(&e.c) {
                Ok((p, _)) if p == (i as u32).to_be_bytes() => {
                    if cmem.read(i * SLOT, SLOT) != *d {
                        bad.push(format!("r{round}s{i}:data"));
                    }
                }
                Ok(_) => bad.push(format!("r{round}s{i}:wrong_message")),
                Err(err) => bad.push(format!("r{round}s{i}:{err}")),
            }
        }
        let (v, _) = wait_notes(&e.s, SLOTS);
        notes += v
            .iter()
            .filter(|n| n.status == librds::rdma::RDS_RDMA_SUCCESS)
            .count();
    }
    let total = ROUNDS * SLOTS;
    r.check(
        "write_then_message_in_place",
        &format!(
            "{total} writes, {} out of place, {notes} notes OK",
            bad.len()
        ),
        if bad.is_empty() && notes == total {
            Ok(())
        } else {
            Err(format!("{:?}", &bad[..bad.len().min(8)]))
        },
    );
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// A write of slot `i` (of `size` bytes) of `smem` into the same slot of `cookie`'s
/// registration, without notification.
fn slot_write(cookie: u64, smem: &RdmaMem, i: usize, size: usize) -> Op {
    Op {
        cookie,
        remote_addr: (i * size) as u64,
        remote_bytes: size as u64,
        local: vec![RdsIovec {
            addr: smem.at(i * size),
            bytes: size as u64,
        }],
        flags: RDS_RDMA_READWRITE,
        token: 0,
    }
}

/// A write of the first 64 bytes of `smem` to the start of `cookie`'s registration, with a
/// notification (`token`).
fn write64(cookie: u64, smem: &RdmaMem, token: u64) -> Op {
    Op {
        flags: RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE,
        token,
        ..slot_write(cookie, smem, 0, 64)
    }
}

/// One write of 64 bytes with `cookie` (and a message behind it): the notification and
/// whether the message arrived (`STATUS msg=yes|no`).
fn ib_try_write(e: &mut Env, cookie: u64, smem: &RdmaMem) -> Result<String, String> {
    let token = e.tok();
    let op = write64(cookie, smem, token);
    rdma_op(&e.s, &e.ca, &op, b"try", None, 0)
        .map_err(|err| format!("sendmsg: {}", err_name(&err)))?;
    let note = one_note(&e.s).replace(&format!("#{token}"), "");
    let msg = if note == "OK" {
        if got(&e.c) == "got=try" {
            "yes"
        } else {
            "no"
        }
    } else {
        nothing_or(&e.c, Duration::from_secs(2), "yes")
    };
    Ok(format!("{note} msg={msg}"))
}

/// The barrier over IB: 32 writes sent back to back, each given its id; one blocking barrier
/// on the last id returns once all are complete (their messages all arrive, and the data of
/// each is in place); then a refused write (forged r_key) completes too: a barrier on its id
/// returns, and the mark passes it.
fn ib_barrier(r: &mut Report, e: &mut Env, refused: &str) -> Result<(), String> {
    const N: usize = 32;
    const SLOT: usize = 4096;
    let cmem = RdmaMem::new(N * SLOT).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(N * SLOT).map_err(|e| format!("mmap: {e}"))?;
    cmem.fill(0);
    let cookie =
        e.c.get_mr(cmem.at(0), (N * SLOT) as u64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let mut ids = Vec::new();
    for i in 0..N {
        smem.write(i * SLOT, &pattern(SLOT, i as u64 + 100));
        let op = slot_write(cookie, &smem, i, SLOT);
        let mut id = 0u64;
        rdma_op(&e.s, &e.ca, &op, b"bar", Some(&mut id), 0)
            .map_err(|err| format!("sendmsg: {}", err_name(&err)))?;
        ids.push(id);
    }
    let last = ids.last().copied().unwrap_or(0);
    let consecutive = ids.windows(2).all(|w| w[1] == w[0] + 1);
    let (res, mark) = e.s.barrier(&e.ca, last, 0);
    // Every write's data is in place once the barrier says it completed.
    let in_place = (0..N)
        .filter(|i| cmem.read(i * SLOT, SLOT) == pattern(SLOT, *i as u64 + 100))
        .count();
    let mut msgs = 0;
    for _ in 0..N {
        if got(&e.c) == "got=bar" {
            msgs += 1;
        }
    }
    r.expect(
        "barrier_after_writes",
        &format!(
            "{} reached={} ids_consecutive={consecutive} in_place={in_place} msgs={msgs}",
            res_obs(&res),
            mark >= last
        ),
        &format!("OK reached=true ids_consecutive=true in_place={N} msgs={N}"),
    );
    // A refused operation completes (failed) and the mark passes it.
    let token = e.tok();
    let op = write64(cookie ^ 0x00FF_FF00, &smem, token);
    let mut id = 0u64;
    rdma_op(&e.s, &e.ca, &op, b"bad", Some(&mut id), 0)
        .map_err(|err| format!("sendmsg: {}", err_name(&err)))?;
    let (res, mark) = e.s.barrier(&e.ca, id, 0);
    let note = one_note(&e.s).replace(&format!("#{token}"), "");
    r.expect(
        "barrier_after_refused",
        &format!(
            "{} next_id={} reached={} note={note} msg={}",
            res_obs(&res),
            id == last + 1,
            mark >= id,
            nothing_or(&e.c, Duration::from_secs(2), "yes")
        ),
        &format!("OK next_id=true reached=true note={refused} msg=nothing"),
    );
    let _ = e.c.free_mr(cookie, 0);
    Ok(())
}

/// What the peer refuses: a forged r_key, a write into a read-only registration, a stale
/// cookie; each costs the operation (`RDS_RDMA_REMOTE_ERROR`, its message is not delivered)
/// and the connection a reconnect, after which operations work again. A use-once
/// registration is gone once the message of an operation on it arrived.
fn ib_refusals(r: &mut Report, e: &mut Env, refused: &str) -> Result<(), String> {
    let refused_msg = format!("{refused} msg=nothing");
    let cmem = RdmaMem::new(3 * 4096).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    smem.fill(0x5A);
    let good =
        e.c.get_mr(cmem.at(0), 4096, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect("write_good", &ib_try_write(e, good, &smem)?, "OK msg=yes");
    let forged = good ^ 0x00FF_FF00;
    r.expect(
        "write_forged_rkey",
        &ib_try_write(e, forged, &smem)?,
        &refused_msg,
    );
    r.expect(
        "write_good_after_reconnect",
        &ib_try_write(e, good, &smem)?,
        "OK msg=yes",
    );
    let ro =
        e.c.get_mr(cmem.at(4096), 4096, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect(
        "write_read_only",
        &ib_try_write(e, ro, &smem)?,
        &refused_msg,
    );
    // Reading it is allowed.
    cmem.write(4096, &pattern(64, 9));
    let token = e.tok();
    let op = Op {
        cookie: ro,
        remote_addr: 0,
        remote_bytes: 64,
        local: vec![RdsIovec {
            addr: smem.at(100),
            bytes: 64,
        }],
        flags: RDS_RDMA_NOTIFY_ME,
        token,
    };
    let sent = rdma_op(&e.s, &e.ca, &op, b"ro", None, 0);
    let mut obs = res_obs(&sent);
    if sent.is_ok() {
        let note = one_note(&e.s).replace(&format!("#{token}"), "");
        obs = format!(
            "{obs} note={note} {} data={}",
            got(&e.c),
            same(&smem.read(100, 64), &pattern(64, 9))
        );
    }
    r.expect("read_read_only", &obs, "OK note=OK got=ro data=ok");
    let _ = e.c.free_mr(ro, 0);
    let _ = e.c.free_mr(good, 0);
    r.expect(
        "write_stale_cookie",
        &ib_try_write(e, good, &smem)?,
        &refused_msg,
    );
    let once =
        e.c.get_mr(
            cmem.at(2 * 4096),
            4096,
            RDS_RDMA_READWRITE | RDS_RDMA_USE_ONCE,
        )
        .map_err(|err| format!("GET_MR: {err}"))?;
    r.expect(
        "write_use_once",
        &ib_try_write(e, once, &smem)?,
        "OK msg=yes",
    );
    r.expect("use_once_freed", &res_obs(&e.c.free_mr(once, 0)), "EINVAL");
    r.expect(
        "write_use_once_again",
        &ib_try_write(e, once, &smem)?,
        &refused_msg,
    );
    r.expect(
        "write_good_at_end",
        &{
            let c =
                e.c.get_mr(cmem.at(0), 4096, RDS_RDMA_READWRITE)
                    .map_err(|err| format!("GET_MR: {err}"))?;
            let o = ib_try_write(e, c, &smem)?;
            let _ = e.c.free_mr(c, 0);
            o
        },
        "OK msg=yes",
    );
    Ok(())
}

/// RDMA operations in flight across a fault (issue 11): `rds-tests ib-rdma-flood CADDR SADDR
/// PROGRESS STOP`. The client (CADDR port 4750) registers 64 slots of 4 KiB once; the server
/// (SADDR port 4751) keeps up to 64 writes in flight into them, each with a message behind it
/// and a notification asked for, until the file STOP appears (the caller breaks the
/// connection meanwhile; PROGRESS tells it how many operations completed), then waits for every
/// operation to be reported (at most 120 s) and runs 20 more writes with the same cookie.
/// Checks (named `ib_rdma_flood_...`): every operation reported exactly once (the statuses
/// counted), the later writes succeed with their data in place (the registration survived
/// the reconnects), no message arrived twice, and the memory pinned by this process is back
/// where it was once the registration is freed.
pub(crate) fn ib_flood(r: &mut Report, args: &[&str]) -> Result<(), String> {
    const SLOTS: u64 = 64;
    const SLOT: usize = 4096;
    const WINDOW: u64 = 64;
    let [ca, sa, progress, stop] = args else {
        return Err("usage: rds-tests ib-rdma-flood CADDR SADDR PROGRESS STOP".into());
    };
    let ca: std::net::IpAddr = ca.parse().map_err(|_| format!("bad address {ca}"))?;
    let sa: std::net::IpAddr = sa.parse().map_err(|_| format!("bad address {sa}"))?;
    let pin0 = vmpin_kb();
    let e = Env::new(SocketAddr::new(ca, 4750), SocketAddr::new(sa, 4751))?;
    let cmem = RdmaMem::new(SLOTS as usize * SLOT).map_err(|e| format!("mmap: {e}"))?;
    let smem = RdmaMem::new(SLOTS as usize * SLOT).map_err(|e| format!("mmap: {e}"))?;
    smem.fill(0x42);
    let cookie =
        e.c.get_mr(cmem.at(0), SLOTS * SLOT as u64, RDS_RDMA_READWRITE)
            .map_err(|err| format!("GET_MR: {err}"))?;
    // A write of server slot `slot` into the same slot of the registration, notified with
    // `token`.
    let notified_write = |slot: u64, token: u64| Op {
        flags: RDS_RDMA_NOTIFY_ME | RDS_RDMA_READWRITE,
        token,
        ..slot_write(cookie, &smem, slot as usize, SLOT)
    };
    let mut issued = 0u64;
    // The barrier id of the last operation issued.
    let mut last_id = 0u64;
    let mut reported = std::collections::BTreeMap::<u64, i32>::new();
    let mut dups = 0u64;
    let mut msgs = std::collections::BTreeSet::<u64>::new();
    let mut dup_msgs = 0u64;
    let mut buf = vec![0u8; 64];
    let deadline_stop = Instant::now() + Duration::from_secs(600);
    let mut stopping: Option<Instant> = None;
    let mut last_progress = Instant::now();
    loop {
        if stopping.is_none()
            && (std::path::Path::new(stop).exists() || Instant::now() > deadline_stop)
        {
            stopping = Some(Instant::now());
        }
        // Issue while the window has room.
        while stopping.is_none() && issued - (reported.len() as u64).min(issued) < WINDOW {
            let token = issued + 1;
            let op = notified_write(token % SLOTS, token);
            let mut id = 0u64;
            match rdma_op(
                &e.s,
                &e.ca,
                &op,
                &token.to_be_bytes(),
                Some(&mut id),
                libc::MSG_DONTWAIT,
            ) {
                Ok(_) => {
                    issued = token;
                    last_id = id;
                }
                Err(err) if matches!(err.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS)) => {
                    break
                }
                Err(err) => return Err(format!("op {token}: {}", err_name(&err))),
            }
        }
        // Notifications.
        while let Ok(Some((_, _, v))) = recv_notes(&e.s, 16) {
            for n in v {
                if reported.insert(n.user_token, n.status).is_some() {
                    dups += 1;
                }
            }
        }
        // Messages.
        while let Ok(n) = e.c.recv(&mut buf, libc::MSG_DONTWAIT) {
            if n == 8 {
                let t = u64::from_be_bytes(buf[..8].try_into().unwrap_or([0; 8]));
                if !msgs.insert(t) {
                    dup_msgs += 1;
                }
            }
        }
        if last_progress.elapsed() > Duration::from_millis(200) {
            crate::ib::progress(progress, reported.len() as u64);
            last_progress = Instant::now();
        }
        if let Some(t) = stopping {
            if reported.len() as u64 >= issued || t.elapsed() > Duration::from_secs(120) {
                break;
            }
        }
        let _ = e.s.poll(libc::POLLIN, Duration::from_millis(20));
    }
    crate::ib::progress(progress, reported.len() as u64);
    let mut by_status = std::collections::BTreeMap::<String, u64>::new();
    for s in reported.values() {
        *by_status.entry(status_name(*s).to_string()).or_default() += 1;
    }
    let missing = (1..=issued).filter(|t| !reported.contains_key(t)).count();
    let extra = reported.keys().filter(|t| **t == 0 || **t > issued).count();
    r.check(
        "ib_rdma_flood_each_reported_once",
        &format!("{issued} operations: {by_status:?}, {missing} unreported, {dups} twice"),
        if missing == 0 && dups == 0 && extra == 0 && issued >= 200 {
            Ok(())
        } else {
            Err(format!("extra={extra}"))
        },
    );
    let bad_status = reported
        .values()
        .filter(|s| {
            ![
                librds::rdma::RDS_RDMA_SUCCESS,
                librds::rdma::RDS_RDMA_DROPPED,
            ]
            .contains(s)
        })
        .count();
    r.expect(
        "ib_rdma_flood_statuses_ok_or_dropped",
        &bad_status.to_string(),
        "0",
    );
    // Every operation reported, so the barrier mark is past the last one (without waiting).
    let (res, mark) = e.s.barrier(&e.ca, last_id, librds::rdma::RDS_RDMA_DONTWAIT);
    r.expect(
        "ib_rdma_flood_barrier_past_all",
        &format!(
            "{} reached={}",
            res_obs(&res),
            last_id > 0 && mark >= last_id
        ),
        "OK reached=true",
    );
    // The registration outlived the fault: writes with the same cookie work.
    let mut after = Vec::new();
    for k in 0..20u64 {
        let slot = k % SLOTS;
        let data = pattern(SLOT, 7000 + k);
        smem.write(slot as usize * SLOT, &data);
        let token = 1_000_000 + k;
        let op = notified_write(slot, token);
        let sent = rdma_op(&e.s, &e.ca, &op, b"after", None, 0);
        let note = if sent.is_ok() {
            one_note(&e.s).replace(&format!("#{token}"), "")
        } else {
            res_obs(&sent)
        };
        let m = got(&e.c);
        let d = same(&cmem.read(slot as usize * SLOT, SLOT), &data);
        if note != "OK" || m != "got=after" || d != "ok" {
            after.push(format!("{k}:{note}/{m}/{d}"));
            if after.len() >= 3 {
                // The connection is not coming back; the check says so.
                break;
            }
        }
    }
    r.check(
        "ib_rdma_flood_old_cookie_after",
        &format!("20 writes, {} failed", after.len()),
        if after.is_empty() {
            Ok(())
        } else {
            Err(format!("{:?}", &after[..after.len().min(5)]))
        },
    );
    r.expect("ib_rdma_flood_messages_once", &dup_msgs.to_string(), "0");
    let _ = e.c.free_mr(cookie, 0);
    drop(e);
    r.expect(
        "ib_rdma_flood_pinned_back",
        &format!("{:+}", vmpin_kb() - pin0),
        "+0",
    );
    Ok(())
}

/// An operation on `len` bytes of registration `cookie` from its start, with one local piece
/// of `len` bytes at `local`.
fn one_piece(cookie: u64, local: u64, len: usize, flags: u64, token: u64) -> Op {
    Op {
        cookie,
        remote_addr: 0,
        remote_bytes: len as u64,
        local: vec![RdsIovec {
            addr: local,
            bytes: len as u64,
        }],
        flags,
        token,
    }
}

/// New memory holding `data`, registered (read-only) by the client: the memory and the cookie.
fn registered(e: &Env, data: &[u8]) -> Result<(RdmaMem, u64), String> {
    let mem = RdmaMem::new(data.len()).map_err(|e| format!("mmap: {e}"))?;
    mem.write(0, data);
    let cookie =
        e.c.get_mr(mem.at(0), data.len() as u64, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    Ok((mem, cookie))
}

/// `rds-tests ib-free-race CADDR SADDR NAME`: registrations freed while a peer reads them
/// ([`ib_free_during_read`]; on iWARP also [`ib_free_stalled`]).
pub(crate) fn ib_free_race(r: &mut Report, args: &[&str]) -> Result<(), String> {
    let (mut e, iwarp) = ib_env(
        r,
        args,
        "usage: rds-tests ib-free-race CADDR SADDR NAME",
        4742,
        "race_connect",
    )?;
    let fences0 = crate::ib_mr::counter(&e.c, "rs_ib_mr_fence")?;
    ib_free_during_read(r, &mut e)?;
    // The device's fence work fences after the frees returned: its last round gets a moment.
    if iwarp {
        std::thread::sleep(Duration::from_secs(1));
    }
    let fences = crate::ib_mr::counter(&e.c, "rs_ib_mr_fence")? - fences0;
    // On iWARP a deregistration fences the QPs of the device (this connection's end, while it
    // is up); on IB and RoCE nothing needs a fence.
    r.expect(
        "free_mr_fenced",
        if fences > 0 { "yes" } else { "no" },
        if iwarp { "yes" } else { "no" },
    );
    if iwarp {
        ib_free_stalled(r, &mut e)?;
    }
    Ok(())
}

/// `RDS_FREE_MR` (with `RDS_RDMA_INVALIDATE`) while a peer's RDMA reads of the
/// registration (four of 512 KiB, queued behind each other) are being answered, then the memory
/// unmapped at once and the process's next memory filled with another pattern (pages the
/// kernel let go of are reused by that allocation, on this one-CPU guest). Each read either
/// fails or, if it succeeds, brings the registration's data and nothing else: a page the
/// device was still sending from when the registration was freed must have stayed the
/// registration's (the pages are let go only once the device is done with them; issue 11).
/// The rounds free the registration at delays spread over the time the reads take; `raced`
/// counts the reads that succeeded although their notification was not there yet when
/// `RDS_FREE_MR` returned (the free overlapped the read, as seen from the requester).
fn ib_free_during_read(r: &mut Report, e: &mut Env) -> Result<(), String> {
    // 12 rounds of four 512 KiB reads: the frees still land all over the reads (a round's
    // delay steps by a twelfth of their span), at a quarter of the device time of the 24
    // rounds of 1 MiB reads this ran before (185-260 s of a vCPU over siw in make test).
    const LEN: usize = 1 << 19;
    const READS: usize = 4;
    const ROUNDS: usize = 12;
    // Four 1 MiB reads over siw took more than arrival_bound() (5 s) in a guest beside others.
    const READS_DONE: Duration = Duration::from_secs(60);
    let smem = RdmaMem::new(READS * LEN).map_err(|e| format!("mmap: {e}"))?;
    let send_reads = |e: &mut Env, cookie: u64| -> Result<Vec<u64>, String> {
        let mut tokens = Vec::new();
        for k in 0..READS {
            let token = e.tok();
            let op = one_piece(cookie, smem.at(k * LEN), LEN, RDS_RDMA_NOTIFY_ME, token);
            rdma_op(&e.s, &e.ca, &op, b"race", None, 0)
                .map_err(|err| format!("sendmsg: {}", err_name(&err)))?;
            tokens.push(token);
        }
        Ok(tokens)
    };
    // How long the reads take, undisturbed (the longest of three rounds). Nothing may
    // disturb them: the reaper keeps a connection that is up, though nothing but the peer's
    // reads (served by the device) goes over the MR owner's for many seconds on siw. A read
    // that failed says which counters moved meanwhile.
    let mut span = Duration::ZERO;
    for _ in 0..3 {
        let before = Counters::take(&e.c)?;
        let cmem = RdmaMem::new(LEN).map_err(|e| format!("mmap: {e}"))?;
        cmem.fill(0x11);
        let cookie =
            e.c.get_mr(cmem.at(0), LEN as u64, 0)
                .map_err(|err| format!("GET_MR: {err}"))?;
        let t0 = Instant::now();
        send_reads(e, cookie)?;
        let (v, _) = wait_notes_within(&e.s, READS, READS_DONE);
        let took = t0.elapsed();
        // A read's message is delivered only if the read succeeded.
        let delivered = v
            .iter()
            .filter(|n| n.status == librds::rdma::RDS_RDMA_SUCCESS)
            .count();
        for _ in 0..delivered {
            let _ = got(&e.c);
        }
        let _ = e.c.free_mr(cookie, RDS_RDMA_INVALIDATE);
        if v.len() != READS || delivered != READS {
            let after = Counters::take(&e.c)?;
            return Err(format!(
                "timing reads: {} (counters that changed: {})",
                notes_obs(&v),
                after.changes_obs(&before)
            ));
        }
        span = span.max(took);
    }
    let (mut ok, mut refused, mut raced) = (0, 0, 0);
    let mut free_time = Duration::ZERO;
    let mut bad = Vec::new();
    for round in 0..ROUNDS {
        let data = pattern(LEN, 700 + round as u64);
        let (cmem, cookie) = registered(e, &data)?;
        smem.fill(0xEE);
        let tokens = send_reads(e, cookie)?;
        // Slept, not spun: the device's work runs on the same (single) vCPU, and a spinning
        // requester would take half of it and stretch the reads it waits for.
        let delay = span * round as u32 / ROUNDS as u32;
        std::thread::sleep(delay);
        let t1 = Instant::now();
        let freed = e.c.free_mr(cookie, RDS_RDMA_INVALIDATE);
        free_time = free_time.max(t1.elapsed());
        let mut notes = Vec::new();
        while let Ok(Some((_, _, v))) = recv_notes(&e.s, 16) {
            notes.extend(v);
        }
        let early = notes.len();
        drop(cmem);
        let filler = RdmaMem::new(4 * LEN).map_err(|e| format!("mmap: {e}"))?;
        filler.fill(0xC5);
        if let Err(err) = freed {
            bad.push(format!("r{round}:free_mr={}", err_name(&err)));
        }
        if notes.len() < READS {
            notes.extend(wait_notes_within(&e.s, READS - notes.len(), READS_DONE).0);
        }
        if notes.len() != READS {
            bad.push(format!("r{round}:notes={}", notes_obs(&notes)));
        }
        for (i, n) in notes.iter().enumerate() {
            let Some(k) = tokens.iter().position(|&t| t == n.user_token) else {
                bad.push(format!("r{round}:token{}", n.user_token));
                continue;
            };
            if n.status != librds::rdma::RDS_RDMA_SUCCESS {
                refused += 1;
                continue;
            }
            ok += 1;
            if i >= early {
                raced += 1;
            }
            let got_data = smem.read(k * LEN, LEN);
            if got_data != data {
                let pages: Vec<String> = (0..LEN / 4096)
                    .filter(|p| got_data[p * 4096..][..4096] != data[p * 4096..][..4096])
                    .map(|p| {
                        let pg = &got_data[p * 4096..][..4096];
                        let kind = if pg.iter().all(|&b| b == 0xC5) {
                            "filler"
                        } else if pg.iter().all(|&b| b == 0) {
                            "zero"
                        } else if pg.iter().all(|&b| b == 0xEE) {
                            "unwritten"
                        } else {
                            "other"
                        };
                        format!("{p}:{kind}")
                    })
                    .collect();
                bad.push(format!(
                    "r{round}k{k}:{} pages[{}]",
                    pages.len(),
                    pages[..pages.len().min(4)].join(",")
                ));
            }
        }
        // The messages of the reads that succeeded (a refused read's is never delivered).
        while crate::util::wait_msg_for(&e.c, Duration::from_millis(300)) {
            let _ = got(&e.c);
        }
        drop(filler);
    }
    r.check(
        "free_mr_during_read",
        &format!(
            "{ROUNDS}x{READS} reads: {ok} OK ({raced} raced), {refused} refused, span {span:?}, \
             free_mr up to {free_time:?}"
        ),
        if bad.is_empty() && ok + refused == ROUNDS * READS {
            Ok(())
        } else {
            Err(format!("{:?}", &bad[..bad.len().min(8)]))
        },
    );
    let _ = leftovers(&e.c, &e.s);
    Ok(())
}

/// A fence that does not complete in time (siw), through the test build's `ib_fence_expire`
/// knob (a READ RESPONSE stuck behind a peer that takes nothing cannot be made on demand
/// here): `RDS_FREE_MR` of a registration a 1 MiB read is under way on finds the fences of
/// the device's QPs overdue at once (the knob makes every one overdue, not only the QP the
/// read is on), moves each to the error state (`rs_ib_mr_fence_stalled` by at least one, at
/// most the number of connections up: the reaper keeps those of earlier checks), which
/// flushes them, and returns; the registration's memory is unmapped and reused
/// at once. The read is reported exactly once (done with the registration's data, or
/// dropped), and the connection comes back: a new read works.
fn ib_free_stalled(r: &mut Report, e: &mut Env) -> Result<(), String> {
    const KNOB: &str = "/sys/kernel/debug/rds_rs/ib_fence_expire";
    const LEN: usize = 1 << 20;
    let smem = RdmaMem::new(LEN).map_err(|e| format!("mmap: {e}"))?;
    let stalled0 = crate::ib_mr::counter(&e.c, "rs_ib_mr_fence_stalled")?;
    // The connection is up (the refusals before reset it), so that the free finds its QP.
    e.s.send_to(b"ready", e.ca)
        .map_err(|err| format!("send: {err}"))?;
    r.expect("stall_connected", &got(&e.c), "got=ready");
    // The QPs a fence may find: every IB connection that is up (the IPv6 table lists all).
    let qps =
        e.c.connections(true)
            .map_err(|err| format!("RDS6_INFO_CONNECTIONS: {}", err_name(&err)))?
            .iter()
            .filter(|c| c.transport == "infiniband" && c.connected())
            .count() as u64;
    let data = pattern(LEN, 900);
    let (cmem, cookie) = registered(e, &data)?;
    smem.fill(0xEE);
    let token = e.tok();
    let op = one_piece(cookie, smem.at(0), LEN, RDS_RDMA_NOTIFY_ME, token);
    rdma_op(&e.s, &e.ca, &op, b"stall", None, 0)
        .map_err(|err| format!("sendmsg: {}", err_name(&err)))?;
    std::fs::write(KNOB, "1").map_err(|err| format!("{KNOB}: {err}"))?;
    let freed = e.c.free_mr(cookie, RDS_RDMA_INVALIDATE);
    drop(cmem);
    let filler = RdmaMem::new(4 * LEN).map_err(|e| format!("mmap: {e}"))?;
    filler.fill(0xC5);
    // The fence round is the device's fence work's, after the free returned: it consumes the
    // knob and fails the QPs (within 10 s; the pages stay pinned until it is over).
    let t1 = Instant::now();
    let (knob, stalled) = loop {
        let knob = std::fs::read_to_string(KNOB).map_err(|err| format!("{KNOB}: {err}"))?;
        let stalled = crate::ib_mr::counter(&e.c, "rs_ib_mr_fence_stalled")? - stalled0;
        if (knob.trim() == "0" && stalled > 0) || t1.elapsed() > Duration::from_secs(10) {
            break (knob, stalled);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The read's report (the connection resets; at most 60 s).
    let t0 = Instant::now();
    let mut notes = Vec::new();
    while notes.is_empty() && t0.elapsed() < Duration::from_secs(60) {
        notes = wait_notes(&e.s, 1).0;
    }
    notes.extend(wait_notes(&e.s, 1).0);
    let read = match notes.as_slice() {
        [n] if n.user_token == token && n.status == librds::rdma::RDS_RDMA_SUCCESS => {
            match same(&smem.read(0, LEN), &data).as_str() {
                "ok" => "reported".to_string(),
                bad => format!("OK data={bad}"),
            }
        }
        [n] if n.user_token == token && n.status == librds::rdma::RDS_RDMA_DROPPED => {
            "reported".to_string()
        }
        v => format!("notes={}", notes_obs(v)),
    };
    drop(filler);
    while crate::util::wait_msg_for(&e.c, Duration::from_millis(300)) {
        let _ = got(&e.c);
    }
    println!("# free_mr_fence_stalled: {stalled} QPs failed, {qps} IB connections up");
    r.expect(
        "free_mr_fence_stalled",
        &format!(
            "free_mr={} knob={} stalled_1_to_up={} read={read}",
            res_obs(&freed),
            knob.trim(),
            (1..=qps).contains(&stalled)
        ),
        "free_mr=OK knob=0 stalled_1_to_up=true read=reported",
    );
    // A new registration and read over the connection that came back.
    let cmem = RdmaMem::new(4096).map_err(|e| format!("mmap: {e}"))?;
    let data = pattern(4096, 999);
    cmem.write(0, &data);
    let cookie =
        e.c.get_mr(cmem.at(0), 4096, 0)
            .map_err(|err| format!("GET_MR: {err}"))?;
    let token = e.tok();
    let op = one_piece(cookie, smem.at(0), 4096, RDS_RDMA_NOTIFY_ME, token);
    let sent = rdma_op(&e.s, &e.ca, &op, b"after", None, 0);
    // The connection may still be coming back (at most 30 s).
    let t0 = Instant::now();
    let mut notes = Vec::new();
    while notes.is_empty() && t0.elapsed() < Duration::from_secs(30) {
        notes = wait_notes(&e.s, 1).0;
    }
    let note = notes_obs(&notes).replace(&format!("#{token}"), "");
    r.expect(
        "read_after_stall",
        &format!(
            "{} {note} {} data={}",
            res_obs(&sent),
            got(&e.c),
            same(&smem.read(0, 4096), &data)
        ),
        "OK OK got=after data=ok",
    );
    let _ = e.c.free_mr(cookie, RDS_RDMA_INVALIDATE);
    Ok(())
}
