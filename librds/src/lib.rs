//! Safe user-space access to `AF_RDS` sockets (Reliable Datagram Sockets).
//!
//! The constants and layouts follow `include/uapi/linux/rds.h`; programs written with this
//! library work against any RDS implementation, Linux's C RDS or rds-rs.
//!
//! ```no_run
//! use librds::RdsSocket;
//! use std::net::{Ipv4Addr, SocketAddrV4};
//!
//! let s = RdsSocket::new()?;
//! s.bind(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 4000))?;
//! s.send_to(b"hello", SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 4000))?;
//! let mut buf = [0u8; 64];
//! let (n, from) = s.recv_from(&mut buf)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `AF_RDS` / `PF_RDS`.
pub const AF_RDS: i32 = 21;
/// `SOL_RDS`, the socket option level of RDS.
pub const SOL_RDS: i32 = 276;

/// `SO_RDS_TRANSPORT`: pins the socket to one transport before it is bound.
pub const SO_RDS_TRANSPORT: i32 = 8;

/// The transports `SO_RDS_TRANSPORT` can select (`RDS_TRANS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// InfiniBand and iWARP (`RDS_TRANS_IB`).
    Ib = 0,
    /// TCP (`RDS_TRANS_TCP`).
    Tcp = 2,
}

/// Converts a libc return value into an `io::Result`, taking `errno` on `-1`.
fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn sockaddr_in(addr: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: `sockaddr_in` is plain old data; all-zero is a valid value.
    let mut sin: libc::sockaddr_in = unsafe { zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = addr.port().to_be();
    sin.sin_addr.s_addr = u32::from(*addr.ip()).to_be();
    sin
}

fn from_sockaddr_in(sin: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    )
}

/// Creates a socket of family `AF_RDS` with any type and protocol, for probing what the kernel
/// accepts. Returns the file descriptor.
pub fn raw_socket(family: i32, ty: i32, protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: `socket` has no memory-safety preconditions.
    let fd = cvt(unsafe { libc::socket(family, ty, protocol) }.into())?;
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// An `AF_RDS` socket (`SOCK_SEQPACKET`, protocol 0).
#[derive(Debug)]
pub struct RdsSocket {
    fd: OwnedFd,
}

impl RdsSocket {
    /// Creates a new RDS socket.
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            fd: raw_socket(AF_RDS, libc::SOCK_SEQPACKET, 0)?,
        })
    }

    /// Binds the socket to a local IPv4 address and port (port 0 picks a free port).
    pub fn bind(&self, addr: SocketAddrV4) -> io::Result<()> {
        let sin = sockaddr_in(addr);
        // SAFETY: `sin` is a valid `sockaddr_in` and its size is passed along.
        cvt(unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sin as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// Selects the transport of an unbound socket (`SO_RDS_TRANSPORT`).
    pub fn set_transport(&self, t: Transport) -> io::Result<()> {
        let v = t as libc::c_int;
        // SAFETY: `v` is a valid `int` and its size is passed along.
        cvt(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                SOL_RDS,
                SO_RDS_TRANSPORT,
                (&v as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// `bind(2)` with the raw bytes of a socket address (any family and length), for testing
    /// what the kernel accepts.
    pub fn bind_raw(&self, addr: &[u8]) -> io::Result<()> {
        // SAFETY: `addr` is valid for `addr.len()` bytes.
        cvt(unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                addr.as_ptr().cast(),
                addr.len() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// `connect(2)` with the raw bytes of a socket address (sets the default destination).
    pub fn connect_raw(&self, addr: &[u8]) -> io::Result<()> {
        // SAFETY: `addr` is valid for `addr.len()` bytes.
        cvt(unsafe {
            libc::connect(
                self.fd.as_raw_fd(),
                addr.as_ptr().cast(),
                addr.len() as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// `getsockname(2)` (`peer` false) or `getpeername(2)` (`peer` true): the raw address
    /// bytes, as long as the length the kernel returned.
    pub fn name_raw(&self, peer: bool) -> io::Result<Vec<u8>> {
        let mut buf = [0u8; 128];
        let mut len = buf.len() as libc::socklen_t;
        let f = if peer {
            libc::getpeername
        } else {
            libc::getsockname
        };
        // SAFETY: `buf` and `len` are valid for writes and `len` holds the size of `buf`.
        cvt(unsafe { f(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), &mut len) }.into())?;
        Ok(buf[..(len as usize).min(buf.len())].to_vec())
    }

    /// `setsockopt(2)` with raw bytes (`None`: a NULL pointer with length `len`).
    pub fn setsockopt_raw(
        &self,
        level: i32,
        name: i32,
        val: Option<&[u8]>,
        len: usize,
    ) -> io::Result<()> {
        let p = val.map_or(std::ptr::null(), |v| v.as_ptr());
        if let Some(v) = val {
            assert!(len <= v.len(), "setsockopt_raw: len past the value");
        }
        // SAFETY: see above.
        cvt(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                p.cast(),
                len as libc::socklen_t,
            )
        }
        .into())?;
        Ok(())
    }

    /// `getsockopt(2)` into a buffer of `cap` bytes; returns the bytes and the length the
    /// kernel reported.
    pub fn getsockopt_raw(&self, level: i32, name: i32, cap: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; cap];
        let mut len = cap as libc::socklen_t;
        // SAFETY: `buf` is valid for writes of `cap` bytes and `len` holds `cap`.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        }
        .into())?;
        buf.truncate((len as usize).min(cap));
        Ok(buf)
    }

    /// `ioctl(2)` on the socket with a pointer to one byte (`None`: a NULL pointer). Returns the
    /// byte afterwards.
    pub fn ioctl_byte(&self, cmd: libc::c_ulong, val: Option<u8>) -> io::Result<u8> {
        let mut b = val.unwrap_or(0);
        let p: *mut u8 = if val.is_some() {
            &mut b
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `p` is NULL or points to one writable byte.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), cmd, p) }.into())?;
        Ok(b)
    }

    /// Returns the local address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        // SAFETY: all-zero is a valid `sockaddr_in`.
        let mut sin: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `sin` and `len` are valid for writes and `len` holds the size of `sin`.
        cvt(unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                (&mut sin as *mut libc::sockaddr_in).cast(),
                &mut len,
            )
        }
        .into())?;
        Ok(from_sockaddr_in(&sin))
    }

    /// Sends one datagram to `dest`. Returns the number of bytes sent.
    pub fn send_to(&self, buf: &[u8], dest: SocketAddrV4) -> io::Result<usize> {
        let sin = sockaddr_in(dest);
        // SAFETY: `buf` is valid for `buf.len()` bytes and `sin` is a valid `sockaddr_in`.
        let n = cvt(unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                0,
                (&sin as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        } as libc::c_long)?;
        Ok(n as usize)
    }

    /// Receives one datagram; returns its length and the sender's address.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4)> {
        // SAFETY: all-zero is a valid `sockaddr_in`.
        let mut sin: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes; `sin`/`len` as above.
        let n = cvt(unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut sin as *mut libc::sockaddr_in).cast(),
                &mut len,
            )
        } as libc::c_long)?;
        Ok((n as usize, from_sockaddr_in(&sin)))
    }

    /// Waits until a datagram can be received, for at most `timeout`. Returns whether one can.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `pfd` is one valid `pollfd`.
        let n = cvt(unsafe { libc::poll(&mut pfd, 1, ms) }.into())?;
        Ok(n > 0 && pfd.revents & libc::POLLIN != 0)
    }
}

impl AsRawFd for RdsSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
