//! Helpers shared by the datapath suites: sockets, observations, counters, namespaces,
//! sysctls.

use crate::outcome;
use librds::RdsSocket;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

/// How long a receive may wait for a message that must arrive: long enough for a slow
/// emulated guest, short enough that a lost message fails the check instead of hanging.
/// 5 s, or `RDS_TESTS_ARRIVAL` seconds: the RDMA suites over a soft device on the debug
/// kernel (`ib-one.sh`) move megabytes through rxe or siw under KASAN, and a guest on a
/// loaded host took more than 5 s for one 1 MiB RDMA write (the message behind it then
/// arrived during the next check, and every later one saw its predecessor's).
pub(crate) fn arrival_bound() -> Duration {
    static SECS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    Duration::from_secs(*SECS.get_or_init(|| {
        std::env::var("RDS_TESTS_ARRIVAL")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&s| s > 0)
            .unwrap_or(5)
    }))
}

/// Forces `s`'s send and receive buffers to `bytes` (`SO_SNDBUFFORCE`, `SO_RCVBUFFORCE`).
pub(crate) fn force_buffers(s: &RdsSocket, bytes: i32) -> Result<(), String> {
    for opt in [libc::SO_SNDBUFFORCE, libc::SO_RCVBUFFORCE] {
        s.set_int(libc::SOL_SOCKET, opt, bytes)
            .map_err(|e| format!("buffer size: {e}"))?;
    }
    Ok(())
}

/// What rds_rs charges a message against its sender's send buffer and its receiver's receive
/// buffer on top of its payload (`Documentation/differences-from-c.md`: "0-byte messages are
/// charged"); C charges the payload alone.
pub(crate) const RS_MSG_OVERHEAD: usize = 256;

/// Observations joined with `sep`, or `none` when there are none (how the suites print a
/// set of things seen).
pub(crate) fn joined_or_none<S: AsRef<str>>(v: &[S], sep: &str) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter().map(AsRef::as_ref).collect::<Vec<&str>>().join(sep)
    }
}

/// How many messages of `len` bytes a send buffer of `limit` bytes admits on rds_rs: each is
/// admitted while the bytes charged are below the limit, so the last may overshoot.
pub(crate) fn rs_admitted(limit: usize, len: usize) -> usize {
    limit.div_ceil(len + RS_MSG_OVERHEAD)
}

/// An IPv4 socket address.
pub(crate) fn v4(a: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(a), port))
}

/// `[::1]:port`.
pub(crate) fn v6_lo(port: u16) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, port, 0, 0))
}

/// A new RDS socket, or why not.
pub(crate) fn fresh() -> Result<RdsSocket, String> {
    RdsSocket::new().map_err(|e| format!("socket: {e}"))
}

/// A new RDS socket bound to `addr`, with a receive timeout so a lost message cannot hang.
pub(crate) fn bound(addr: SocketAddr) -> Result<RdsSocket, String> {
    let s = fresh()?;
    s.bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    s.set_recv_timeout(Some(arrival_bound()))
        .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
    Ok(s)
}

/// The errno name of an error (as `outcome` would print it).
pub(crate) fn err_name(e: &std::io::Error) -> String {
    outcome::<()>(&Err(std::io::Error::from_raw_os_error(
        e.raw_os_error().unwrap_or(0),
    )))
}

/// An address for an observation: no `:` (the judge cuts an observation at the first `:`).
pub(crate) fn addr_obs(a: &SocketAddr) -> String {
    format!("{}/{}", ip_obs(&a.ip()), a.port())
}

/// An IP address for an observation, `:` replaced by `_`.
pub(crate) fn ip_obs(ip: &IpAddr) -> String {
    ip.to_string().replace(':', "_")
}

/// Waits up to [`arrival`] until a message (or notification) can be received on `s`.
///
/// `POLLIN` alone does not say so: C RDS also reports `POLLIN` once after any congestion map
/// update (every new loopback connection makes one), so this peeks to be sure.
pub(crate) fn wait_msg(s: &RdsSocket) -> bool {
    wait_msg_for(s, arrival_bound())
}

/// [`wait_msg`] with another bound.
pub(crate) fn wait_msg_for(s: &RdsSocket, limit: Duration) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        let mut b = [0u8; 1];
        if s.recv(&mut b, libc::MSG_PEEK | libc::MSG_DONTWAIT).is_ok() {
            return true;
        }
        let left = limit.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return false;
        }
        let _ = s.poll(libc::POLLIN, left.min(Duration::from_millis(200)));
    }
}

/// Receives one message within [`arrival`] into a buffer of `cap` bytes: `(payload, from)`.
pub(crate) fn recv_one(s: &RdsSocket, cap: usize) -> Result<(Vec<u8>, SocketAddr), String> {
    if !wait_msg(s) {
        return Err("nothing arrived".into());
    }
    let mut buf = vec![0u8; cap];
    let (n, from) = s
        .recv_from(&mut buf)
        .map_err(|e| format!("recv: {}", err_name(&e)))?;
    buf.truncate(n);
    Ok((buf, from))
}

/// Whether nothing can be received within `wait` (for "nothing arrived" checks).
pub(crate) fn nothing_within(s: &RdsSocket, wait: Duration) -> Result<bool, String> {
    Ok(!wait_msg_for(s, wait))
}

/// Drains everything queued on `s` without waiting; returns how many messages.
pub(crate) fn drain(s: &RdsSocket) -> usize {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0;
    while s.recv(&mut buf, libc::MSG_DONTWAIT).is_ok() {
        n += 1;
    }
    n
}

/// A snapshot of the `RDS_INFO_COUNTERS` values by name.
pub(crate) struct Counters(HashMap<String, u64>);

impl Counters {
    /// Reads every counter through `s`.
    pub(crate) fn take(s: &RdsSocket) -> Result<Self, String> {
        let list = s
            .counters()
            .map_err(|e| format!("RDS_INFO_COUNTERS: {}", err_name(&e)))?;
        Ok(Self(list.into_iter().map(|c| (c.name, c.value)).collect()))
    }

    /// How much counter `name` moved since `before` (`None`: missing in either snapshot).
    pub(crate) fn delta(&self, before: &Self, name: &str) -> Option<i128> {
        Some(i128::from(*self.0.get(name)?) - i128::from(*before.0.get(name)?))
    }

    /// The observation of a counter delta: `+N`, or `missing`.
    pub(crate) fn delta_obs(&self, before: &Self, name: &str) -> String {
        match self.delta(before, name) {
            Some(d) => format!("{d:+}"),
            None => "missing".into(),
        }
    }

    /// Whether the counter exists.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// `name+delta` for each counter that moved since `before`, by name, comma-separated
    /// (`none` if none did).
    pub(crate) fn changes_obs(&self, before: &Self) -> String {
        let mut moved: Vec<String> = self
            .0
            .keys()
            .filter_map(|n| match self.delta(before, n) {
                Some(0) => None,
                Some(d) => Some(format!("{n}{d:+}")),
                None => Some(format!("{n}=new")),
            })
            .collect();
        moved.sort();
        crate::util::joined_or_none(&moved, ",")
    }
}

/// Runs `f` on a new thread in a new network namespace with `lo` up, and returns its result.
/// Sockets created there stay in that namespace for their lifetime, whichever thread uses
/// them later.
pub(crate) fn in_new_netns<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    std::thread::spawn(move || {
        // SAFETY: `unshare` has no memory-safety preconditions; CLONE_NEWNET moves only the
        // calling thread into a new network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWNET): {}",
                std::io::Error::last_os_error()
            ));
        }
        lo_up()?;
        f()
    })
    .join()
    .map_err(|_| "namespace thread panicked".to_string())?
}

/// Brings up `lo` in the calling thread's network namespace.
pub(crate) fn lo_up() -> Result<(), String> {
    // SAFETY: `socket` has no memory-safety preconditions.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: all-zero is a valid `ifreq`.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    // SAFETY: `ifr` is a valid `ifreq` naming `lo`; SIOCGIFFLAGS fills in its flags.
    let mut r = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) };
    if r == 0 {
        // SAFETY: SIOCGIFFLAGS set the `ifru_flags` member of the union.
        unsafe { ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: as above; SIOCSIFFLAGS reads `ifr`.
        r = unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr) };
    }
    let err = std::io::Error::last_os_error();
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    if r != 0 {
        return Err(format!("bringing up lo: {err}"));
    }
    Ok(())
}

/// The path of an RDS sysctl.
pub(crate) fn sysctl_path(name: &str) -> String {
    format!("/proc/sys/net/rds/{name}")
}

/// Reads an RDS sysctl (trimmed).
pub(crate) fn sysctl_read(name: &str) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(sysctl_path(name))?
        .trim()
        .to_string())
}

/// Writes an RDS sysctl.
pub(crate) fn sysctl_write(name: &str, v: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(sysctl_path(name))?;
    f.write_all(v.as_bytes())
}

/// Restores an RDS sysctl to its value at creation when dropped.
pub(crate) struct SysctlGuard {
    name: &'static str,
    old: String,
}

impl SysctlGuard {
    /// Remembers the current value of `name`.
    pub(crate) fn new(name: &'static str) -> Result<Self, String> {
        let old = sysctl_read(name).map_err(|e| format!("reading {name}: {e}"))?;
        Ok(Self { name, old })
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        if let Err(e) = sysctl_write(self.name, &self.old) {
            eprintln!("rds-tests: could not restore {}: {e}", self.name);
        }
    }
}

/// A deterministic pattern of `len` bytes (for content checks).
pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The errno of a result, or `OK`.
pub(crate) fn res_obs<T>(r: &std::io::Result<T>) -> String {
    outcome(r)
}
