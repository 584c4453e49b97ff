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

/// The network namespace of the far end when the transport-neutral suites run over TCP
/// (`RDS_TESTS_TCP=NETNS`, a name of `ip netns`), or `None` over loopback.
///
/// Over loopback both ends of every exchange are in the process's namespace and the suites
/// use 127.0.0.1, 127.0.0.2 and ::1. Over TCP a destination on the sender's host would still
/// go over loopback, so the two ends are in two namespaces joined by a veth pair (made by
/// `tests/guest/tcp-neutral.sh`): the near end, the process's own namespace, has
/// [`TCP_NEAR4`] and [`TCP_NEAR6`]; the far end, namespace `NETNS`, has
/// [`TCP_FAR4`], [`TCP_FAR4B`] and [`TCP_FAR6`]. Every socket then asks for TCP
/// (`SO_RDS_TRANSPORT`), and one bound to a far address is made in the far namespace
/// ([`bound`]).
pub(crate) fn tcp_peer_netns() -> Option<&'static str> {
    static PEER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PEER.get_or_init(|| {
        std::env::var("RDS_TESTS_TCP")
            .ok()
            .filter(|v| !v.is_empty())
    })
    .as_deref()
}

/// Whether the suite runs over TCP between two namespaces ([`tcp_peer_netns`]).
pub(crate) fn over_tcp() -> bool {
    tcp_peer_netns().is_some()
}

/// The near end's first IPv4 address over TCP.
pub(crate) const TCP_NEAR4: [u8; 4] = [203, 0, 113, 1];
/// The far end's first IPv4 address over TCP.
pub(crate) const TCP_FAR4: [u8; 4] = [203, 0, 113, 2];
/// The far end's second IPv4 address over TCP (127.0.0.2's part over loopback).
pub(crate) const TCP_FAR4B: [u8; 4] = [203, 0, 113, 3];
/// The near end's IPv6 address over TCP.
pub(crate) const TCP_NEAR6: Ipv6Addr = Ipv6Addr::new(0xfd03, 0, 0, 0, 0, 0, 0, 1);
/// The far end's IPv6 address over TCP.
pub(crate) const TCP_FAR6: Ipv6Addr = Ipv6Addr::new(0xfd03, 0, 0, 0, 0, 0, 0, 2);

/// `tcp` over TCP ([`over_tcp`]), `lo` over loopback.
fn by_mode<T>(tcp: T, lo: T) -> T {
    if over_tcp() {
        tcp
    } else {
        lo
    }
}

/// The sender's side of an exchange: 127.0.0.1, or [`TCP_NEAR4`] over TCP.
pub(crate) fn near4(port: u16) -> SocketAddr {
    v4(by_mode(TCP_NEAR4, [127, 0, 0, 1]), port)
}

/// The receiver's side of an exchange: 127.0.0.1 too, or [`TCP_FAR4`] over TCP.
pub(crate) fn far4(port: u16) -> SocketAddr {
    v4(by_mode(TCP_FAR4, [127, 0, 0, 1]), port)
}

/// A second address of the receiver's side: 127.0.0.2, or [`TCP_FAR4B`] over TCP.
pub(crate) fn far4b(port: u16) -> SocketAddr {
    v4(by_mode(TCP_FAR4B, [127, 0, 0, 2]), port)
}

/// The sender's side over IPv6: ::1, or [`TCP_NEAR6`] over TCP.
pub(crate) fn near6(port: u16) -> SocketAddr {
    let ip = by_mode(TCP_NEAR6, Ipv6Addr::LOCALHOST);
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

/// The receiver's side over IPv6: ::1, or [`TCP_FAR6`] over TCP.
pub(crate) fn far6(port: u16) -> SocketAddr {
    let ip = by_mode(TCP_FAR6, Ipv6Addr::LOCALHOST);
    SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0))
}

/// Whether a socket bound to `ip` belongs in the far namespace (over TCP only).
fn is_far(ip: &IpAddr) -> bool {
    over_tcp()
        && match ip {
            IpAddr::V4(a) => [TCP_FAR4, TCP_FAR4B].contains(&a.octets()),
            IpAddr::V6(a) => {
                *a == TCP_FAR6 || a.to_ipv4_mapped().is_some_and(|m| is_far(&m.into()))
            }
        }
}

/// Runs `f` in the far end's namespace (on a thread moved there with `setns`) over TCP, and
/// here over loopback. Sockets made there stay in that namespace.
pub(crate) fn on_far<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let Some(ns) = tcp_peer_netns() else {
        return f();
    };
    std::thread::spawn(move || {
        let path = format!("/run/netns/{ns}");
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        use std::os::fd::AsRawFd;
        // SAFETY: `setns` has no memory-safety preconditions; it moves only the calling
        // thread into the namespace `file` refers to.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        f()
    })
    .join()
    .map_err(|_| "far namespace thread panicked".to_string())?
}

/// Over TCP ([`over_tcp`]), brings up the connection of each `(label, far address)` pair (the
/// near end's address of the same family to it), every one of its paths, before a suite's
/// checks begin, and reports it as the check `tcp_paths_LABEL`: a ping answered, and both
/// ends listing the same 8 TCP sockets of the pair (`RDS_INFO_TCP_SOCKETS`), still the same
/// 200 ms later. The near end's addresses are the smaller, so it is the end that connects
/// every path, in C as in rds_rs.
///
/// Why first: C loses messages sent while a connection's paths come up (its accepting end
/// resets a path's TCP connection that arrives before it knows the path count, and what TCP
/// had acknowledged on it is gone; `Documentation/differences-from-c.md`), and C sends its
/// congestion map again as every path comes up: a suite's checks are about what comes after.
/// A ping lost that way is sent again (every second, within the arrival bound four times).
/// Nothing over loopback.
pub(crate) fn tcp_warm_up(
    r: &mut crate::Report,
    pairs: &[(&str, SocketAddr)],
) -> Result<(), String> {
    if !over_tcp() {
        return Ok(());
    }
    for &(label, far) in pairs {
        let near = if far.is_ipv4() { near4(0) } else { near6(0) };
        let s = bound(near)?;
        let t0 = std::time::Instant::now();
        let mut pings = 0;
        let pong = loop {
            pings += 1;
            s.send_to(b"", SocketAddr::new(far.ip(), 0))
                .map_err(|e| format!("ping {far}: {}", err_name(&e)))?;
            if wait_msg_for(&s, Duration::from_secs(1)) {
                break true;
            }
            if t0.elapsed() > arrival_bound() * 4 {
                break false;
            }
        };
        drain(&s);
        // The TCP sockets of the pair at each end, by the local port of the near end's.
        let sf = fresh_far()?;
        let ports = |reader: &RdsSocket, here: IpAddr, there: IpAddr| -> Vec<u16> {
            let mut v: Vec<u16> = reader
                .tcp_sockets(far.is_ipv6())
                .map(|l| {
                    l.iter()
                        .filter(|t| t.local.ip() == here && t.peer.ip() == there)
                        .map(|t| {
                            if here == near.ip() {
                                t.local.port()
                            } else {
                                t.peer.port()
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort_unstable();
            v
        };
        // Both ends list the same 8, twice 200 ms apart (no path still being reset).
        let up = || {
            let n = ports(&s, near.ip(), far.ip());
            n.len() == 8 && n == ports(&sf, far.ip(), near.ip())
        };
        let t1 = std::time::Instant::now();
        let mut steady = false;
        while !steady && t1.elapsed() < arrival_bound() * 4 {
            let before = ports(&s, near.ip(), far.ip());
            if up() {
                std::thread::sleep(Duration::from_millis(200));
                steady = up() && ports(&s, near.ip(), far.ip()) == before;
            } else {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        println!(
            "# {label}: {pings} pings, {:?} until the paths were up",
            t0.elapsed()
        );
        r.expect(
            &format!("tcp_paths_{label}"),
            &format!(
                "pong={pong} paths={}/{} steady={steady}",
                ports(&s, near.ip(), far.ip()).len(),
                ports(&sf, far.ip(), near.ip()).len()
            ),
            "pong=true paths=8/8 steady=true",
        );
    }
    Ok(())
}

/// A new RDS socket, or why not. Over TCP ([`over_tcp`]) it asks for the TCP transport.
pub(crate) fn fresh() -> Result<RdsSocket, String> {
    let s = RdsSocket::new().map_err(|e| format!("socket: {e}"))?;
    if over_tcp() {
        s.set_transport(librds::Transport::Tcp)
            .map_err(|e| format!("SO_RDS_TRANSPORT: {}", err_name(&e)))?;
    }
    Ok(s)
}

/// A new RDS socket in the far end's namespace ([`on_far`]; here over loopback).
pub(crate) fn fresh_far() -> Result<RdsSocket, String> {
    on_far(fresh)
}

/// A new RDS socket bound to `addr`, with a receive timeout so a lost message cannot hang.
/// Over TCP, one bound to a far address ([`far4`], [`far4b`], [`far6`]) is made in the far
/// end's namespace.
pub(crate) fn bound(addr: SocketAddr) -> Result<RdsSocket, String> {
    if is_far(&addr.ip()) {
        return on_far(move || bound_here(addr));
    }
    bound_here(addr)
}

/// [`bound`] in the calling thread's namespace.
fn bound_here(addr: SocketAddr) -> Result<RdsSocket, String> {
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

/// Runs `f` where the RDS sysctls are: here, or over TCP ([`over_tcp`], the process in a
/// namespace of its own) on a thread moved into the initial namespace (pid 1's), since C
/// registers `net.rds` there alone (its values are global).
fn in_sysctl_netns<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    if !over_tcp() {
        return f();
    }
    std::thread::spawn(move || {
        let file = std::fs::File::open("/proc/1/ns/net")?;
        use std::os::fd::AsRawFd;
        // SAFETY: `setns` has no memory-safety preconditions; it moves only the calling
        // thread into the namespace `file` refers to.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| std::io::Error::other("sysctl thread panicked"))?
}

/// Reads an RDS sysctl (trimmed).
pub(crate) fn sysctl_read(name: &str) -> std::io::Result<String> {
    let path = sysctl_path(name);
    in_sysctl_netns(move || Ok(std::fs::read_to_string(path)?.trim().to_string()))
}

/// Writes an RDS sysctl.
pub(crate) fn sysctl_write(name: &str, v: &str) -> std::io::Result<()> {
    use std::io::Write;
    let (path, v) = (sysctl_path(name), v.to_string());
    in_sysctl_netns(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.write_all(v.as_bytes())
    })
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
