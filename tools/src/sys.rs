//! The socket and system calls the tools need beyond `librds`: gathered sends, receives that
//! report the sender and truncation, buffer sizing, `RDS_INFO_*` queries, the TOS ioctl, CPU
//! accounting and interrupt handling; and `AF_UNIX` `SOCK_SEQPACKET` sockets, which
//! `rds-stress -U` runs its exchange over for comparison.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use librds::{RDS_MAX_MSG_SIZE, SIOCRDSSETTOS, SOL_RDS};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// The `sockaddr_in` of an IPv4 socket address.
pub fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid `sockaddr_in`.
    let mut sin: libc::sockaddr_in = unsafe { zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = a.port().to_be();
    sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    sin
}

/// Sends one message made of `head` followed by `body` to `dest` (`sendmsg(2)` with two
/// iovecs, so the payload is not copied in user space).
pub fn send2(
    fd: RawFd,
    head: &[u8],
    body: &[u8],
    dest: SocketAddrV4,
    flags: i32,
) -> io::Result<usize> {
    send2_ctl(fd, head, body, dest, &[], flags)
}

/// [`send2`] with control messages `ctl` (a buffer of `cmsghdr`s, as
/// `librds::ControlBuf::as_bytes` builds; empty for none). Inlined, so that [`send2`]'s
/// empty `ctl` costs nothing (`make bench` counts instructions).
#[inline(always)]
pub fn send2_ctl(
    fd: RawFd,
    head: &[u8],
    body: &[u8],
    dest: SocketAddrV4,
    ctl: &[u8],
    flags: i32,
) -> io::Result<usize> {
    let mut sin = sockaddr_in(dest);
    let mut iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        },
    ];
    // SAFETY: all-zero is a valid `msghdr`.
    let mut h: libc::msghdr = unsafe { zeroed() };
    h.msg_name = (&mut sin as *mut libc::sockaddr_in).cast();
    h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    h.msg_iov = iov.as_mut_ptr();
    h.msg_iovlen = if body.is_empty() { 1 } else { 2 };
    if !ctl.is_empty() {
        h.msg_control = ctl.as_ptr() as *mut libc::c_void;
        h.msg_controllen = ctl.len() as _;
    }
    // SAFETY: `h` points to `sin`, `iov` and `ctl`, which live across the call; each iovec
    // describes a borrowed slice of exactly its length, and the control buffer is `ctl`'s
    // length: the kernel only reads them.
    cvt_size(unsafe { libc::sendmsg(fd, &h, flags) })
}

/// Sends one message made of `head` followed by `body` on a connected socket (`sendmsg(2)`
/// with two iovecs and no address: [`send2`] for `AF_UNIX` `SOCK_SEQPACKET`).
pub fn send2_connected(fd: RawFd, head: &[u8], body: &[u8], flags: i32) -> io::Result<usize> {
    let mut iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        },
    ];
    // SAFETY: all-zero is a valid `msghdr` (no name, no control data).
    let mut h: libc::msghdr = unsafe { zeroed() };
    h.msg_iov = iov.as_mut_ptr();
    h.msg_iovlen = if body.is_empty() { 1 } else { 2 };
    // SAFETY: `h` points to `iov`, which lives across the call; each iovec describes a borrowed
    // slice of exactly its length, which the kernel only reads.
    cvt_size(unsafe { libc::sendmsg(fd, &h, flags) })
}

/// One received message.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    /// Bytes copied into the buffer.
    pub len: usize,
    /// The sender (`None` if the kernel reported no IPv4 address).
    pub from: Option<SocketAddrV4>,
    /// Whether the message was longer than the buffer (`MSG_TRUNC`).
    pub truncated: bool,
}

/// Receives one message into `buf` (`recvmsg(2)`), reporting the sender and truncation.
pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<Received> {
    recv_ctl(fd, buf, &mut [], flags).map(|(r, _)| r)
}

/// [`recv`] that also receives control messages into `ctl`; returns how many bytes of it the
/// kernel filled (parse them with `librds::parse_cmsgs`). Inlined, as [`send2_ctl`].
#[inline(always)]
pub fn recv_ctl(
    fd: RawFd,
    buf: &mut [u8],
    ctl: &mut [u8],
    flags: i32,
) -> io::Result<(Received, usize)> {
    // SAFETY: all-zero is a valid `sockaddr_in`.
    let mut sin: libc::sockaddr_in = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid `msghdr`.
    let mut h: libc::msghdr = unsafe { zeroed() };
    h.msg_name = (&mut sin as *mut libc::sockaddr_in).cast();
    h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    if !ctl.is_empty() {
        h.msg_control = ctl.as_mut_ptr().cast();
        h.msg_controllen = ctl.len() as _;
    }
    // SAFETY: the kernel writes at most `msg_namelen` bytes into `sin`, at most `buf.len()`
    // bytes into `buf` and at most `ctl.len()` into `ctl`, all exclusively borrowed across the
    // call.
    let len = cvt_size(unsafe { libc::recvmsg(fd, &mut h, flags) })?;
    let clen = (h.msg_controllen as usize).min(ctl.len());
    let from = (h.msg_namelen as usize >= size_of::<libc::sockaddr_in>()
        && sin.sin_family == libc::AF_INET as libc::sa_family_t)
        .then(|| {
            SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )
        });
    Ok((
        Received {
            len: len.min(buf.len()),
            from,
            truncated: h.msg_flags & libc::MSG_TRUNC != 0,
        },
        clen,
    ))
}

/// Receives one message into `buf` on a connected socket (`recvmsg(2)` without an address),
/// reporting truncation; `from` is always `None`.
pub fn recv_connected(fd: RawFd, buf: &mut [u8], flags: i32) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid `msghdr`.
    let mut h: libc::msghdr = unsafe { zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, exclusively borrowed
    // across the call; there is no name or control buffer.
    let len = cvt_size(unsafe { libc::recvmsg(fd, &mut h, flags) })?;
    Ok(Received {
        len: len.min(buf.len()),
        from: None,
        truncated: h.msg_flags & libc::MSG_TRUNC != 0,
    })
}

/// A new `AF_UNIX` `SOCK_SEQPACKET` socket (close-on-exec).
pub fn seqpacket_socket() -> io::Result<OwnedFd> {
    // SAFETY: `socket` has no memory-safety preconditions.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The `sockaddr_un` of an abstract-namespace name (no file; it goes away with the socket)
/// and its length.
fn abstract_addr(name: &str) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero is a valid `sockaddr_un`.
    let mut sun: libc::sockaddr_un = unsafe { zeroed() };
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = name.as_bytes();
    if b.len() + 1 > sun.sun_path.len() {
        return Err(io::Error::other(format!("AF_UNIX name '{name}' too long")));
    }
    // sun_path[0] stays 0: the abstract namespace.
    for (d, &c) in sun.sun_path[1..].iter_mut().zip(b) {
        *d = c as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + b.len();
    Ok((sun, len as libc::socklen_t))
}

/// Binds an `AF_UNIX` socket to the abstract name `name` and listens with room for `backlog`
/// connections.
pub fn unix_listen_abstract(fd: &OwnedFd, name: &str, backlog: i32) -> io::Result<()> {
    let (sun, len) = abstract_addr(name)?;
    // SAFETY: `sun` is a valid `sockaddr_un` of which `len` bytes are passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sun as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    // SAFETY: `listen` has no memory-safety preconditions.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(())
}

/// Connects an `AF_UNIX` socket to the abstract name `name`.
pub fn unix_connect_abstract(fd: &OwnedFd, name: &str) -> io::Result<()> {
    let (sun, len) = abstract_addr(name)?;
    // SAFETY: `sun` is a valid `sockaddr_un` of which `len` bytes are passed.
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&sun as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    Ok(())
}

/// Accepts one connection on a listening socket, waiting until `deadline` at most
/// (`ETIMEDOUT` after it). The new socket is close-on-exec.
pub fn accept_until(fd: &OwnedFd, deadline: Instant) -> io::Result<OwnedFd> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.min(Duration::from_millis(200)).as_millis() as libc::c_int;
        // SAFETY: `p` is one valid `pollfd`.
        let r = unsafe { libc::poll(&mut p, 1, ms.max(1)) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            continue;
        }
        // SAFETY: no address is asked for (both pointers NULL).
        let c = unsafe {
            libc::accept4(
                fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if c >= 0 {
            // SAFETY: `c` is a new descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(c) });
        }
        let e = io::Error::last_os_error();
        if !matches!(
            e.raw_os_error(),
            Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ECONNABORTED)
        ) {
            return Err(e);
        }
    }
}

fn set_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: `v` is a valid `int` and its size is passed along.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

fn get_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` and `len` are valid for writes and `len` holds the size of `v`.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut i32).cast(), &mut len) })?;
    Ok(v)
}

/// Asks for a send (`send` true) or receive buffer of `bytes` (what RDS counts against:
/// the kernel doubles the value and RDS allows half of that). Uses `SO_*BUFFORCE` when
/// permitted (root), else the plain option (capped by `net.core.[wr]mem_max`). Returns the
/// size RDS will allow, half of what `getsockopt` reports.
pub fn set_buffer(fd: RawFd, send: bool, bytes: usize) -> io::Result<usize> {
    let v = bytes.min(i32::MAX as usize / 2) as i32;
    let (force, plain) = if send {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    } else {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    };
    if set_int(fd, libc::SOL_SOCKET, force, v).is_err() {
        set_int(fd, libc::SOL_SOCKET, plain, v)?;
    }
    Ok(get_int(fd, libc::SOL_SOCKET, plain)? as usize / 2)
}

/// Sets the type of service of an RDS socket (`SIOCRDSSETTOS`).
pub fn set_tos(fd: RawFd, tos: u8) -> io::Result<()> {
    let mut t = tos;
    // SAFETY: the ioctl reads one byte through the pointer, which points to `t`.
    cvt(unsafe { libc::ioctl(fd, SIOCRDSSETTOS, &mut t as *mut u8) })?;
    Ok(())
}

/// One `RDS_INFO_*` query (`getsockopt(SOL_RDS, optname)`): probes the length, then fetches
/// (again while the table grows). Returns the size of one item and the bytes of all items.
pub fn info(fd: RawFd, optname: i32) -> io::Result<(usize, Vec<u8>)> {
    let mut cap: usize = 0;
    for _ in 0..16 {
        let mut buf = vec![0u8; cap];
        let mut len = cap as libc::socklen_t;
        let p = if cap == 0 {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast()
        };
        // SAFETY: `p` is NULL with length 0 (a probe) or points to `buf`, valid for writes of
        // `len` bytes; `len` is valid for reads and writes.
        let r = unsafe { libc::getsockopt(fd, SOL_RDS, optname, p, &mut len) };
        if r >= 0 {
            buf.truncate((len as usize).min(cap));
            return Ok((r as usize, buf));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSPC) && len as usize > cap {
            // Room for a few more items, in case the table grows between the two calls.
            cap = len as usize + len as usize / 4 + 256;
            continue;
        }
        return Err(e);
    }
    Err(io::Error::other("the RDS info table kept growing"))
}

/// The local address the routing table would use to reach `dest`.
pub fn local_addr_for(dest: Ipv4Addr) -> io::Result<Ipv4Addr> {
    let u = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    u.connect((dest, 9))?;
    match u.local_addr()? {
        std::net::SocketAddr::V4(a) => Ok(*a.ip()),
        std::net::SocketAddr::V6(_) => Err(io::Error::other("no IPv4 route")),
    }
}

/// Busy and total CPU time of the whole system so far, in clock ticks (`/proc/stat`).
pub fn cpu_ticks() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal ...; idle and iowait are not busy.
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Set by SIGINT or SIGTERM once [`catch_interrupts`] ran.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM set [`INTERRUPTED`] instead of ending the process.
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_interrupt` is async-signal-safe (one atomic store).
        unsafe {
            libc::signal(sig, on_interrupt as *const () as libc::sighandler_t);
        }
    }
}

/// The symbolic name of an errno value RDS programs meet, or its number.
pub fn errno_name(e: &io::Error) -> String {
    let n = e.raw_os_error().unwrap_or(0);
    let s = match n {
        libc::EAGAIN => "EAGAIN",
        libc::ENOBUFS => "ENOBUFS",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EINVAL => "EINVAL",
        libc::ENOTCONN => "ENOTCONN",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENOMEM => "ENOMEM",
        libc::EPIPE => "EPIPE",
        libc::EINTR => "EINTR",
        _ => return format!("errno {n}"),
    };
    s.to_string()
}
